--- Tensor printing in PyTorch's repr format.
-- `print.tensor(t)` returns exactly what PyTorch prints for the same tensor: precision 4,
-- integer mode for integral floats, scientific mode for wide ranges, columns aligned to the
-- widest element, lines wrapped at 80 characters, summarised with `...` past 1000 elements
-- (3 edge items per dimension), and the `dtype=` / `requires_grad=True` / `grad_fn=<...>`
-- suffixes. `lt.set_printoptions` is its one function for users; `tostring(x)` and `print(x)`
-- use it.
-- @module lantern
local M = {}

local floor, max, huge = math.floor, math.max, math.huge
local concat, srep, sformat = table.concat, string.rep, string.format

local defaults = { precision = 4, threshold = 1000, edgeitems = 3, linewidth = 80 }

--- Current options (precision, threshold, edgeitems, linewidth, sci_mode).
-- @local
M.options = { precision = 4, threshold = 1000, edgeitems = 3, linewidth = 80, sci_mode = nil }

-- The keys set_printoptions takes.
local known = { precision = true, threshold = true, edgeitems = true, linewidth = true,
  sci_mode = true, profile = true }

--- Sets how tensors print, like torch.set_printoptions. The options stay until set again.
-- @tparam table o any of `precision` (digits after the point, default 4), `threshold`
-- (elements past which the print is summarised with `...`, default 1000), `edgeitems` (items
-- shown at each end of a summarised dim, default 3), `linewidth` (characters per line,
-- default 80), `sci_mode` (true or false; nil for automatic) and `profile` (`"default"`,
-- `"short"` or `"full"`, applied first)
-- @usage lt.set_printoptions{precision = 2}
-- print(lt.tensor{1 / 3})   --> tensor([0.33])
-- lt.set_printoptions{profile = "default"}
function M.set_printoptions(o)
  o = o or {}
  for k in pairs(o) do
    if not known[k] then
      error("set_printoptions: unknown option '" .. tostring(k) .. "' (expected precision, " ..
            "threshold, edgeitems, linewidth, sci_mode or profile)", 2)
    end
  end
  local opts = M.options
  if o.profile ~= nil then
    if o.profile == "default" then
      opts.precision, opts.threshold, opts.edgeitems, opts.linewidth = 4, 1000, 3, 80
    elseif o.profile == "short" then
      opts.precision, opts.threshold, opts.edgeitems, opts.linewidth = 2, 1000, 2, 80
    elseif o.profile == "full" then
      opts.precision, opts.threshold, opts.edgeitems, opts.linewidth = 4, huge, 3, 80
    else
      error("set_printoptions: unknown profile '" .. tostring(o.profile) ..
            "' (expected default, short or full)", 2)
    end
  end
  for _, k in ipairs { "precision", "threshold", "edgeitems", "linewidth" } do
    local v = o[k]
    if v ~= nil then
      if type(v) ~= "number" or v < 0 then
        error("set_printoptions: " .. k .. " must be a non-negative number", 2)
      end
      opts[k] = v
    end
  end
  if o.sci_mode ~= nil then opts.sci_mode = o.sci_mode end
  if o.sci_mode == nil and o.profile ~= nil then opts.sci_mode = nil end
end

--- Restores the default options.
-- @local
function M.reset_printoptions()
  for k, v in pairs(defaults) do M.options[k] = v end
  M.options.sci_mode = nil
end

local function is_finite(v) return v == v and v ~= huge and v ~= -huge end

local function nonfinite_str(v)
  if v ~= v then return "nan" end
  return v > 0 and "inf" or "-inf"
end

-- Python's '{:.Nf}' / '{:.Ne}' for finite values and nan/inf spelled as Python does.
local function fmt_f(v, p)
  if not is_finite(v) then return nonfinite_str(v) end
  return sformat("%." .. p .. "f", v)
end

local function fmt_e(v, p)
  if not is_finite(v) then return nonfinite_str(v) end
  return sformat("%." .. p .. "e", v)
end

local function lpad(s, w)
  local n = w - #s
  if n > 0 then return srep(" ", n) .. s end
  return s
end

-- The element formatter: looks at every (summarised) value once to pick the mode and width.
local function new_formatter(values, floating, is_bool)
  local p = floor(M.options.precision)
  local f = { int_mode = true, sci_mode = false, max_width = 1 }
  if not floating then
    for i = 1, #values do
      local v = values[i]
      local s = is_bool and (v and "True" or "False") or sformat("%d", v)
      if #s > f.max_width then f.max_width = #s end
    end
  else
    local nz, n = {}, 0
    for i = 1, #values do
      local v = values[i]
      if v ~= 0 and is_finite(v) then
        n = n + 1
        nz[n] = v
      end
    end
    if n > 0 then
      local amin, amax = huge, 0
      for i = 1, n do
        local a = nz[i] < 0 and -nz[i] or nz[i]
        if a < amin then amin = a end
        if a > amax then amax = a end
        if f.int_mode and nz[i] ~= math.ceil(nz[i]) then f.int_mode = false end
      end
      local w = 1
      if f.int_mode then
        if amax / amin > 1000 or amax > 1e8 then
          f.sci_mode = true
          for i = 1, n do w = max(w, #fmt_e(nz[i], p)) end
        else
          for i = 1, n do w = max(w, #sformat("%.0f", nz[i]) + 1) end
        end
      else
        if amax / amin > 1000 or amax > 1e8 or amin < 1e-4 then
          f.sci_mode = true
          for i = 1, n do w = max(w, #fmt_e(nz[i], p)) end
        else
          for i = 1, n do w = max(w, #fmt_f(nz[i], p)) end
        end
      end
      f.max_width = w
    end
    if M.options.sci_mode ~= nil then f.sci_mode = M.options.sci_mode end
  end
  local width = f.max_width
  local sci, int_mode = f.sci_mode, f.int_mode
  if not floating then
    f.format = function(v)
      local s = is_bool and (v and "True" or "False") or sformat("%d", v)
      return lpad(s, width)
    end
  elseif sci then
    f.format = function(v) return lpad(fmt_e(v, p), width) end
  elseif int_mode then
    f.format = function(v)
      if not is_finite(v) then return lpad(nonfinite_str(v), width) end
      return lpad(sformat("%.0f", v) .. ".", width)
    end
  else
    f.format = function(v) return lpad(fmt_f(v, p), width) end
  end
  return f
end

-- The values to show, as nested tables (leaves are Lua values). A dimension cut by
-- summarisation keeps its first and last `edge` entries and records `cut` = how many entries
-- come before the "..." marker.
local function gather(t, nd, summarize, edge)
  if not summarize then return t:tolist() end
  if nd == 0 then return t:item() end
  local n = t:size(1)
  local node, idx = {}, {}
  if n > 2 * edge then
    for i = 1, edge do idx[#idx + 1] = i end
    for i = n - edge + 1, n do idx[#idx + 1] = i end
    node.cut = edge
  else
    for i = 1, n do idx[i] = i end
  end
  for k, i in ipairs(idx) do
    local sub = t[i]
    if nd == 1 then
      node[k] = sub:item()
    else
      node[k] = gather(sub, nd - 1, true, edge)
    end
  end
  return node
end

local function flatten(node, nd, out)
  if nd == 0 then
    out[#out + 1] = node
    return out
  end
  for i = 1, #node do flatten(node[i], nd - 1, out) end
  return out
end

local function vector_str(node, indent, summarize, fmt)
  local o = M.options
  local element_length = fmt.max_width + 2
  local per_line = max(1, floor((o.linewidth - indent) / element_length))
  local data = {}
  if summarize and node.cut == 0 then
    data[1] = "..."
  else
    for i = 1, #node do
      data[#data + 1] = fmt.format(node[i])
      if node.cut == i then data[#data + 1] = " ..." end
    end
  end
  local lines = {}
  for i = 1, #data, per_line do
    lines[#lines + 1] = concat(data, ", ", i, math.min(i + per_line - 1, #data))
  end
  return "[" .. concat(lines, ",\n" .. srep(" ", indent + 1)) .. "]"
end

local function tensor_str(node, nd, indent, summarize, fmt)
  if nd == 0 then return fmt.format(node) end
  if nd == 1 then return vector_str(node, indent, summarize, fmt) end
  local slices = {}
  if node.cut == 0 then slices[1] = "..." end
  for i = 1, #node do
    slices[#slices + 1] = tensor_str(node[i], nd - 1, indent + 1, summarize, fmt)
    if node.cut == i then slices[#slices + 1] = "..." end
  end
  return "[" .. concat(slices, "," .. srep("\n", nd - 1) .. srep(" ", indent + 1)) .. "]"
end

local function add_suffixes(s, suffixes, indent)
  local parts = { s }
  local last_nl = s:match(".*()\n")   -- 1-based position of the last newline, or nil
  local last_line_len = #s - (last_nl and last_nl - 1 or -1) + 1
  for _, suffix in ipairs(suffixes) do
    if last_line_len + #suffix + 2 > M.options.linewidth then
      parts[#parts + 1] = ",\n" .. srep(" ", indent) .. suffix
      last_line_len = indent + #suffix
    else
      parts[#parts + 1] = ", " .. suffix
      last_line_len = last_line_len + #suffix + 2
    end
  end
  parts[#parts + 1] = ")"
  return concat(parts)
end

-- Python's tuple repr of a size list: "(2, 0)", "(5,)", "()".
local function size_tuple(size)
  if #size == 1 then return "(" .. size[1] .. ",)" end
  return "(" .. concat(size, ", ") .. ")"
end

--- The body of a tensor's repr, between `tensor(` and the suffixes.
-- @local
function M.data_str(t, indent)
  indent = indent or 7
  local numel = t:numel()
  if numel == 0 then return "[]" end
  if t.device ~= "cpu" then t = t:detach():cpu() end   -- values are read on the host
  local nd = t:dim()
  local o = M.options
  local summarize = numel > o.threshold
  local edge = floor(o.edgeitems)
  local node = gather(t, nd, summarize, edge)
  local dt = t.dtype
  local floating = dt == "float32" or dt == "float64"
  local fmt = new_formatter(flatten(node, nd, {}), floating, dt == "bool")
  return tensor_str(node, nd, indent, summarize, fmt)
end

--- PyTorch's repr of tensor t. opts.parameter = true prefixes "Parameter containing:\n".
-- @local
function M.tensor(t, opts)
  local prefix = "tensor("
  local indent = #prefix
  local suffixes = {}
  local dt = t.dtype
  local body
  if t.device ~= "cpu" then suffixes[1] = "device='" .. t.device .. "'" end
  if t:numel() == 0 then
    if t:dim() ~= 1 then suffixes[#suffixes + 1] = "size=" .. size_tuple(t:size()) end
    if dt ~= "float32" then suffixes[#suffixes + 1] = "dtype=torch." .. dt end
    body = "[]"
  else
    if dt ~= "float32" and dt ~= "int64" and dt ~= "bool" then
      suffixes[#suffixes + 1] = "dtype=torch." .. dt
    end
    body = M.data_str(t, indent)
  end
  local grad_fn = t.grad_fn
  if grad_fn then
    suffixes[#suffixes + 1] = "grad_fn=<" .. tostring(grad_fn) .. ">"
  elseif t.requires_grad then
    suffixes[#suffixes + 1] = "requires_grad=True"
  end
  local s = add_suffixes(prefix .. body, suffixes, indent)
  if type(opts) == "table" and opts.parameter then s = "Parameter containing:\n" .. s end
  return s
end

--- "torch.Size([2, 3])" for a tensor (or a size table).
-- @local
function M.size(t)
  local size = type(t) == "table" and t or t:size()
  return "torch.Size([" .. concat(size, ", ") .. "])"
end

return M
