--- Model summaries after Python's torchinfo: `nn.utils.summary` and `nn.utils.count_parameters`.
-- @module lantern.nn.utils
local lt = require "lantern"
local mod = require "lantern.nn.module"
local util = require "lantern.nn.util"
local check = require("lantern.options").check

local M = {}

local NAME_WIDTH, COL_WIDTH, ALIGN = 40, 25, 5
local DTYPES = { float32 = true, float64 = true, int64 = true, bool = true }

-- 1234567 -> "1,234,567" (Python's "{:,}").
local function commas(n)
  local s = tostring(n)
  local sign, int, frac = s:match("^(-?)(%d+)(.*)$")
  if not int then return s end
  int = int:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", "")
  return sign .. int .. frac
end

local function ulen(s) return utf8.len(s) or #s end

local function pad(s, w) return s .. string.rep(" ", math.max(0, w - ulen(s))) end

local function shape_str(sizes)
  if not sizes or #sizes == 0 then return "--" end
  return "[" .. table.concat(sizes, ", ") .. "]"
end

-- The first tensor of a forward's result (a tensor, or the packed table of several values,
-- searched depth first): its sizes give the row's shape, as torchinfo shows the first element
-- of a tuple.
local function first_tensor(v, seen)
  if util.is_tensor(v) then return v end
  if type(v) ~= "table" or mod.is_module(v) then return nil end
  seen = seen or {}
  if seen[v] then return nil end
  seen[v] = true
  local n = v.n or #v
  for i = 1, n do
    local t = first_tensor(v[i], seen)
    if t then return t end
  end
  return nil
end

local function numel(sizes)
  local n = 1
  for _, s in ipairs(sizes) do n = n * s end
  return n
end

local function param_counts(params)
  local total, trainable, bytes = 0, 0, 0
  for _, p in ipairs(params) do
    local n = p:numel()
    total = total + n
    if p.requires_grad then trainable = trainable + n end
    bytes = bytes + n * p:element_size()
  end
  return total, trainable, bytes
end

--- The number of elements in a model's parameters, each shared tensor once.
-- @param model a Module, or parameters as the optimisers take them (a tensor, a list,
-- `model:parameters()`)
-- @tparam[opt] table opts `trainable_only` (default false): count only the parameters
-- that require grad
-- @treturn int
-- @usage nn.utils.count_parameters(nn.Linear(4, 2))                           --> 10
-- nn.utils.count_parameters(model, {trainable_only = true})
function M.count_parameters(model, opts)
  opts = check("count_parameters", opts, { "trainable_only" })
  local params
  if mod.is_module(model) then
    params = model:parameters()
  elseif util.is_tensor(model) or type(model) == "table" or type(model) == "function" then
    params = util.param_list(model)
  else
    error("count_parameters: expected a Module or a list of tensors, got " .. util.typename(model), 2)
  end
  local seen, total = {}, 0
  for i, p in ipairs(params) do
    if not util.is_tensor(p) then
      error("count_parameters: parameter " .. i .. " is a " .. util.typename(p) .. ", not a Tensor", 2)
    end
    if not seen[p] and (not opts.trainable_only or p.requires_grad) then
      seen[p] = true
      total = total + p:numel()
    end
  end
  return total
end

-- torchinfo's estimate of multiply-adds for one call of a leaf layer, from its parameters and
-- output sizes: a convolution's weights meet every output position of the batch, a linear
-- layer's every row, other weights once per sample; recurrent weights (weight_ih_l0, ...)
-- once per sample and step.
local function mult_adds(m, cls, out)
  if not out or #out == 0 then return 0 end
  local macs = 0
  for _, e in ipairs(m:named_parameters()) do
    local name, n = e[1], e[2]:numel()
    if name == "weight" or name == "bias" then
      if cls:find("Conv", 1, true) then
        local k = out[1]
        for i = 3, #out do k = k * out[i] end
        macs = macs + n * k
      elseif cls:find("Linear", 1, true) then
        local k = 1
        for i = 1, #out - 1 do k = k * out[i] end
        macs = macs + n * k
      else
        macs = macs + out[1] * n
      end
    elseif name:find("weight", 1, true) or name:find("bias", 1, true) then
      macs = macs + out[1] * (out[2] or 1) * n
    end
  end
  return macs
end

-- The inputs of the forward pass: tensors given, or tensors made from sizes.
local function make_inputs(input, dtypes)
  local list
  if util.is_tensor(input) then
    list = { input }
  elseif type(input) == "table" and #input > 0 then
    if type(input[1]) == "number" then list = { input } else list = input end
  else
    error("summary: input_size must be a table of sizes ({1, 3, 32, 32}), a list of them, " ..
      "a tensor or a list of tensors, got " .. util.typename(input), 3)
  end
  if type(dtypes) == "string" then dtypes = { dtypes } end
  local out, bytes = {}, 0
  for i, v in ipairs(list) do
    local t
    if util.is_tensor(v) then
      t = v
    elseif type(v) == "table" then
      for j, s in ipairs(v) do
        if math.type(s) ~= "integer" or s < 0 then
          error(string.format("summary: input %d: size %d must be a non-negative integer, got %s",
            i, j, tostring(s)), 3)
        end
      end
      local dt = dtypes and (dtypes[i] or dtypes[#dtypes]) or "float32"
      if not DTYPES[dt] then
        error("summary: dtypes: unknown dtype '" .. tostring(dt) ..
          "' (float32, float64, int64 or bool)", 3)
      end
      if dt == "float32" or dt == "float64" then
        t = lt.rand(v, { dtype = dt })
      else
        -- integer inputs are positions or class indices, which count from 1
        t = lt.ones(v, { dtype = dt })
      end
    else
      error("summary: input " .. i .. " is a " .. util.typename(v) .. ", expected sizes or a tensor", 3)
    end
    out[i] = t
    bytes = bytes + t:numel() * t:element_size()
  end
  return out, bytes
end

local Summary = {}
Summary.__index = Summary
Summary.__name = "ModelSummary"
Summary.__tostring = function(self) return self.text end

local function render(s, rows, max_depth)
  local shown = {}
  local name_width = NAME_WIDTH
  for _, r in ipairs(rows) do
    if r.depth <= max_depth then
      shown[#shown + 1] = r
      name_width = math.max(name_width, math.ceil((r.depth * ALIGN + 1 + ulen(r.title)) / ALIGN) * ALIGN)
    end
  end
  local width = name_width + 2 * COL_WIDTH
  local divider = string.rep("=", width)
  local function row(name, a, b)
    return (pad(name, name_width) .. " " .. pad(a, COL_WIDTH) .. " " .. pad(b, COL_WIDTH)):gsub("%s+$", "")
  end
  local out = { divider, row("Layer (type (var_name):depth-idx)", "Output Shape", "Param #"), divider }
  for _, r in ipairs(shown) do
    local prefix = ""
    if r.depth == 1 then
      prefix = "├─"
    elseif r.depth > 1 then
      prefix = string.rep("│    ", r.depth - 1) .. "└─"
    end
    local params
    if r.recursive then
      params = "(recursive)"
    elseif r.num_params == 0 then
      params = "--"
    elseif r.leaf or r.depth == max_depth then
      params = commas(r.num_params)
      if r.trainable_params == 0 then params = "(" .. params .. ")" end
    else
      params = r.direct_params > 0 and commas(r.direct_params) or "--"
    end
    out[#out + 1] = row(prefix .. r.title, shape_str(r.output), params)
  end
  local function mb(bytes) return string.format("%.2f", bytes / 1e6) end
  local macs, unit = s.total_mult_adds, "M"
  if macs >= 1e12 then macs, unit = macs / 1e12, "T"
  elseif macs >= 1e9 then macs, unit = macs / 1e9, "G"
  else macs = macs / 1e6 end
  local macs_s = macs == math.floor(macs) and commas(math.floor(macs)) or commas(string.format("%.2f", macs))
  out[#out + 1] = divider
  out[#out + 1] = "Total params: " .. commas(s.total_params)
  out[#out + 1] = "Trainable params: " .. commas(s.trainable_params)
  out[#out + 1] = "Non-trainable params: " .. commas(s.total_params - s.trainable_params)
  out[#out + 1] = "Total mult-adds (" .. unit .. "): " .. macs_s
  out[#out + 1] = divider
  out[#out + 1] = "Input size (MB): " .. mb(s.input_bytes)
  out[#out + 1] = "Forward/backward pass size (MB): " .. mb(s.output_bytes)
  out[#out + 1] = "Params size (MB): " .. mb(s.param_bytes)
  out[#out + 1] = "Estimated Total Size (MB): " .. mb(s.total_bytes)
  out[#out + 1] = divider
  return table.concat(out, "\n")
end

--- A summary of a model, as Python's torchinfo prints it: runs one forward pass under
-- `no_grad` on inputs of the given sizes, with forward hooks on every submodule, and lists per
-- layer its class and name, indented by depth, the shape of its output and its parameter
-- count, then the totals and torchinfo's memory estimates. For torchinfo's example network
-- (two convolutions, Dropout2d and two linear layers, applied to one 28x28 image):
--
--     ==========================================================================================
--     Layer (type (var_name):depth-idx)        Output Shape              Param #
--     ==========================================================================================
--     Net (Net)                                [1, 10]                   --
--     ├─Conv2d (conv1): 1-1                    [1, 10, 24, 24]           260
--     ├─Conv2d (conv2): 1-2                    [1, 20, 8, 8]             5,020
--     ├─Dropout2d (conv2_drop): 1-3            [1, 20, 8, 8]             --
--     ├─Linear (fc1): 1-4                      [1, 50]                   16,050
--     ├─Linear (fc2): 1-5                      [1, 10]                   510
--     ==========================================================================================
--     Total params: 21,840
--     Trainable params: 21,840
--     Non-trainable params: 0
--     Total mult-adds (M): 0.49
--     ==========================================================================================
--     Input size (MB): 0.00
--     Forward/backward pass size (MB): 0.06
--     Params size (MB): 0.09
--     Estimated Total Size (MB): 0.15
--     ==========================================================================================
--
-- The rules are torchinfo's: rows are in the order the modules were called (a container that
-- is never called itself, such as a `ModuleList`, gets a row before its first child); a layer
-- shows all its parameters, a container only those it holds itself (`--` for none) except at
-- the last depth shown, where it shows all of them; a count in parentheses is frozen (no
-- parameter requires grad), and a module called again shows `(recursive)`. A layer that
-- returns several values (LSTM, MultiheadAttention) shows the shape of the first tensor.
-- Totals count each parameter once (shared weights too); non-trainable parameters are those
-- with `requires_grad` false. Sizes are in MB of 10^6 bytes: input size is the bytes of the
-- input tensors (torchinfo adds Python's object overhead, Lantern counts the elements),
-- forward/backward pass size twice the bytes of the outputs of the layers that have
-- parameters (the output and its gradient), params size the bytes of the parameters, and the
-- estimated total their sum. Mult-adds follow torchinfo's estimate from parameter counts and
-- output sizes.
--
-- The model runs in eval mode (torchinfo's default) and every module's mode is restored
-- afterwards, also when the forward pass raises; the hooks are removed in every case.
-- @param model a Module
-- @param input_size the sizes of the input (`{1, 1, 28, 28}`), a list of sizes for a model
-- with several inputs (`{{1, 10}, {1, 20}}`), an example tensor, or a list of tensors. Inputs
-- made from sizes are uniform random floats; int64 and bool inputs are ones (positions count
-- from 1, so an `Embedding` gets valid indices)
-- @tparam[opt] table opts `depth` (default 3: rows deeper than this are not shown), `dtypes`
-- (a dtype, or one per input, for inputs made from sizes; default `"float32"`), `mode`
-- (`"eval"`, the default, `"train"` or `"same"`: the model's own modes)
-- @return a summary object: `tostring(s)` (or `print(s)`, or `s.text`) is the table above;
-- fields `total_params`, `trainable_params`, `total_mult_adds`, `input_bytes`,
-- `output_bytes`, `param_bytes`, `total_bytes`, and `rows`, one per row as
-- `{name=, class=, depth=, output=sizes, num_params=, trainable_params=, recursive=}`
-- @usage local s = nn.utils.summary(model, {1, 1, 28, 28})
-- print(s)
-- print(s.total_params, s.trainable_params)
-- nn.utils.summary(model, lt.randn(8, 3, 32, 32), {depth = 1})
function M.summary(model, input_size, opts)
  opts = check("summary", opts, { "depth", "dtypes", "mode" })
  if not mod.is_module(model) then
    error("summary: expected a Module, got " .. util.typename(model), 2)
  end
  local max_depth = opts.depth or 3
  if math.type(max_depth) ~= "integer" or max_depth < 0 then
    error("summary: depth must be a non-negative integer, got " .. tostring(max_depth), 2)
  end
  local mode = opts.mode or "eval"
  if mode ~= "eval" and mode ~= "train" and mode ~= "same" then
    error("summary: mode must be 'eval', 'train' or 'same', got '" .. tostring(mode) .. "'", 2)
  end
  local dtypes = opts.dtypes
  if dtypes ~= nil and type(dtypes) ~= "string" and type(dtypes) ~= "table" then
    error("summary: dtypes must be a dtype name or a list of them, got " .. type(dtypes), 2)
  end
  local inputs, input_bytes = make_inputs(input_size, dtypes)

  local entries = model:named_modules()
  local info, by_name = {}, {}
  for _, e in ipairs(entries) do
    local name, m = e[1], e[2]
    local _, dots = name:gsub("%.", "")
    info[m] = { name = name, depth = name == "" and 0 or dots + 1, var = name:match("([^%.]+)$") }
    by_name[name] = m
  end

  -- the calls, in the order they began; a stack pairs each pre-hook with its forward hook
  local calls, stack, handles = {}, {}, {}
  for _, e in ipairs(entries) do
    local m = e[2]
    handles[#handles + 1] = m:register_forward_pre_hook(function(self)
      local c = { module = self }
      calls[#calls + 1] = c
      stack[#stack + 1] = c
    end)
    handles[#handles + 1] = m:register_forward_hook(function(self, _, output)
      for i = #stack, 1, -1 do
        if stack[i].module == self then
          local c = table.remove(stack, i)
          local t = first_tensor(output)
          if t then
            c.output = t:size()
            c.output_bytes = t:numel() * t:element_size()
          end
          break
        end
      end
    end)
  end
  local modes = {}
  for i, e in ipairs(entries) do modes[i] = e[2].training end
  if mode == "eval" then model:eval() elseif mode == "train" then model:train() end
  local ok, err = pcall(lt.no_grad, function() return model(table.unpack(inputs)) end)
  for _, h in ipairs(handles) do h.remove() end
  -- parents come before their children, so each module ends with its own mode
  for i, e in ipairs(entries) do e[2]:train(modes[i]) end
  if not ok then
    error("summary: the forward pass of " .. model:type_name() .. " failed: " .. tostring(err), 2)
  end

  local rows, seen, idx = {}, {}, {}
  local function add_row(m, c)
    local inf = info[m]
    local cls = m:type_name()
    idx[inf.depth] = (idx[inf.depth] or 0) + 1
    -- torchinfo names the root by its class, as it has no attribute name
    local title = string.format("%s (%s)", cls, cls)
    if inf.depth > 0 then title = string.format("%s (%s): %d-%d", cls, inf.var, inf.depth, idx[inf.depth]) end
    local total, trainable = param_counts(m:parameters())
    local direct = param_counts(m:parameters(false))
    local r = {
      name = inf.name, class = cls, depth = inf.depth, title = title,
      output = c and c.output, output_bytes = c and c.output_bytes or 0,
      num_params = total, trainable_params = trainable, direct_params = direct,
      leaf = #m:children() == 0, recursive = seen[m] == true, called = c ~= nil,
    }
    if r.leaf and c then r.mult_adds = mult_adds(m, cls, r.output) end
    seen[m] = true
    rows[#rows + 1] = r
  end
  for _, c in ipairs(calls) do
    local inf = info[c.module]
    -- containers that were not called themselves (ModuleList, ModuleDict) before their child
    local parts, prefix = {}, nil
    for part in inf.name:gmatch("[^%.]+") do
      prefix = prefix and (prefix .. "." .. part) or part
      parts[#parts + 1] = prefix
    end
    if inf.name ~= "" and not seen[model] then add_row(model, nil) end
    for i = 1, #parts - 1 do
      local anc = by_name[parts[i]]
      if anc and not seen[anc] then add_row(anc, nil) end
    end
    add_row(c.module, c)
  end

  local s = setmetatable({ rows = {}, input_bytes = input_bytes, output_bytes = 0,
    total_mult_adds = 0 }, Summary)
  s.total_params, s.trainable_params, s.param_bytes = param_counts(model:parameters())
  for _, r in ipairs(rows) do
    if r.leaf and r.called then
      if r.num_params > 0 then s.output_bytes = s.output_bytes + 2 * r.output_bytes end
      s.total_mult_adds = s.total_mult_adds + (r.mult_adds or 0)
    end
    s.rows[#s.rows + 1] = { name = r.name, class = r.class, depth = r.depth, output = r.output,
      num_params = r.num_params, trainable_params = r.trainable_params, recursive = r.recursive }
  end
  s.total_bytes = s.input_bytes + s.output_bytes + s.param_bytes
  s.text = render(s, rows, max_depth)
  return s
end

return M
