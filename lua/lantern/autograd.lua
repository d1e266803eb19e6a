--- Autograd helpers written in Lua: `autograd.grad`, custom Functions and `gradcheck`
-- (`lt.autograd`). The graph itself is recorded and run in C: `y:backward()`, `x.grad`,
-- `x:register_hook(fn)` and `lt.no_grad` are on the Tensor and lantern pages. The backward pass
-- runs newest node first and frees the graph unless `retain_graph` is given; gradients
-- accumulate in `.grad` until set to nil. Only first-order gradients are computed
-- (`create_graph = true` is refused).
-- @module lantern.autograd
local lt = require "lantern"
local core = require "lantern.core"
local options = require "lantern.options"

local autograd = {}

-- The engine keeps no graph of the backward pass itself, so higher-order gradients are not
-- available; create_graph = true is refused rather than ignored.
local function no_create_graph(op, opts)
  if opts.create_graph then
    error(op .. ": create_graph = true is not supported (Lantern computes first-order " ..
      "gradients only)", options.user_level(2) or 2)
  end
end

--- Gradients of `outputs` with respect to `inputs`, returned instead of accumulated into
-- `.grad`.
-- @param outputs a tensor or a list of tensors
-- @param inputs a tensor or a list of tensors
-- @tparam[opt] table opts `grad_outputs` (a tensor or list: the seeds, needed for outputs of
-- more than one element), `retain_graph` (default false), `allow_unused` (default false:
-- an input the outputs do not depend on raises)
-- @treturn table one gradient per input (nil for an unused input with `allow_unused`)
-- @usage local gx = lt.autograd.grad(y:sum(), {x})[1]
function autograd.grad(outputs, inputs, opts)
  opts = options.check("grad", opts, { "grad_outputs", "retain_graph", "create_graph",
    "allow_unused" })
  no_create_graph("grad", opts)
  local res = core._grad(outputs, inputs, { grad_outputs = opts.grad_outputs,
    retain_graph = opts.retain_graph, allow_unused = opts.allow_unused })
  for i = 1, #res do
    if res[i] == false then res[i] = nil end
  end
  return res
end

--- `t:backward(gradient, opts)` as a function; the gradient may be left out (opts second).
-- @tparam Tensor t
-- @tparam[opt] Tensor g the gradient
-- @tparam[opt] table opts `{retain_graph=false}`
function autograd.backward(t, g, opts)
  if type(g) == "table" then g, opts = nil, g end
  opts = options.check("backward", opts, { "retain_graph", "create_graph" })
  no_create_graph("backward", opts)
  return t:backward(g, { retain_graph = opts.retain_graph })
end

---------------------------------------------------------------------------------------------
--- Custom Functions: ops with a forward and a backward written in Lua.
-- @section functions

local Ctx = {}
Ctx.__index = Ctx

--- In `forward`: saves tensors for backward; they come back as `ctx.saved_tensors`. The
-- context also has `ctx.needs_input_grad[i]` (whether argument i requires grad) and takes any
-- other field forward wants to leave for backward.
-- @param ... tensors
function Ctx:save_for_backward(...)
  self.saved_tensors = table.pack(...)
end

--- In `forward`: marks outputs that have no gradient (PyTorch's call; Lantern records it
-- and gives them none).
-- @param ... output tensors
function Ctx:mark_non_differentiable(...)
  self._non_diff = table.pack(...)
end

--- The base of custom ops (PyTorch's `torch.autograd.Function`). A subclass defines
-- `forward(ctx, ...)`, which runs under `no_grad` and returns tensors, and
-- `backward(ctx, grad...)`, which gets one gradient per output and returns one gradient (or
-- nil) per argument of forward; `Cube.apply(...)` runs it and records a node named after the
-- class (`grad_fn == "CubeBackward"`). A gradient that only broadcasts to its input's shape
-- is summed down to it; a wrong count, type or shape raises naming the position.
-- @type Function
local Function = {}
Function.__index = Function
Function.__name = "Function"

--- Declares a user op: `local Cube = lt.autograd.Function:extend("Cube")`, then define
-- `Cube.forward(ctx, ...)` and `Cube.backward(ctx, grad...)`, and call `Cube.apply(...)`.
-- @string name the class name (the node is named name .. "Backward")
-- @return the class, with `apply`
-- @usage local Cube = lt.autograd.Function:extend("Cube")
-- function Cube.forward(ctx, x) ctx:save_for_backward(x); return x * x * x end
-- function Cube.backward(ctx, g) local x = ctx.saved_tensors[1]; return g * 3 * x * x end
-- local y = Cube.apply(x)                    -- y.grad_fn == "CubeBackward"
function Function:extend(name)
  assert(type(name) == "string", "Function:extend expects a class name")
  local cls = setmetatable({ __name = name }, { __index = self })
  cls.__index = cls
  cls.apply = function(...) return autograd._apply(cls, ...) end
  return cls
end

local function what(v)
  local t = type(v)
  if t == "table" or t == "userdata" then return "a " .. t end
  if t == "number" then return math.type(v) == "integer" and "an integer" or "a number" end
  return "a " .. t
end

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

-- A gradient whose shape the input's expands to is summed down to the input's shape, as
-- PyTorch does; nil when the shapes are not compatible.
local function sum_to(g, shape)
  local gs = g:size()
  local lead = #gs - #shape
  if lead < 0 then return nil end
  for i = 1, #shape do
    if shape[i] ~= gs[lead + i] and shape[i] ~= 1 then return nil end
  end
  for _ = 1, lead do g = g:sum(1) end
  for i = 1, #shape do
    if shape[i] == 1 and g:size(i) ~= 1 then g = g:sum(i, true) end
  end
  return g
end

-- Checks what a Function's backward returned against its inputs: each gradient is a tensor
-- or nil, none stands for an argument that was not a tensor, and each fits its input's shape
-- (PyTorch raises for all three; a wrong value would otherwise be dropped in silence or fail
-- later in an op that does not name the Function). Returns the list the engine takes.
local function backward_results(shapes, nin, g)
  for i = 1, g.n do
    local v = g[i]
    if v ~= nil and not lt.is_tensor(v) then
      error(string.format("backward returned %s at position %d (expected a Tensor or nil)",
        what(v), i), 0)
    end
    if v ~= nil and i > nin then
      error(string.format("backward returned %d gradients, but forward took %d arguments " ..
        "(the gradient at position %d has no input)", g.n, nin, i), 0)
    end
  end
  local r = {}
  for i = 1, nin do
    local v = g[i]
    if v ~= nil then
      local shape = shapes[i]
      if shape == false then
        error(string.format("backward returned a gradient at position %d, but argument %d of " ..
          "forward was not a Tensor (return nil there)", i, i), 0)
      end
      local vs = v:size()
      local same = #vs == #shape
      for k = 1, #shape do if vs[k] ~= shape[k] then same = false break end end
      if not same then
        local fitted = sum_to(v, shape)
        if fitted == nil then
          error(string.format("backward returned a gradient of shape %s at position %d, " ..
            "but input %d has shape %s", shape_str(vs), i, i, shape_str(shape)), 0)
        end
        v = fitted
      end
    end
    r[i] = v or false
  end
  return r
end

function autograd._apply(cls, ...)
  local args = table.pack(...)
  local ctx = setmetatable({ needs_input_grad = {} }, Ctx)
  local inputs, shapes = {}, {}
  for i = 1, args.n do
    local a = args[i]
    if lt.is_tensor(a) then
      inputs[i] = a
      shapes[i] = a:size()
      ctx.needs_input_grad[i] = a.requires_grad
    else
      inputs[i] = nil
      shapes[i] = false
      ctx.needs_input_grad[i] = false
    end
  end
  local outs = table.pack(lt.no_grad(cls.forward, ctx, table.unpack(args, 1, args.n)))
  local list = {}
  for i = 1, outs.n do
    assert(lt.is_tensor(outs[i]), cls.__name .. ".forward must return tensors")
    -- every output gets its own tensor (an input returned as is, or a view of one, would
    -- otherwise carry the input's identity or view links into the graph)
    outs[i] = outs[i]:detach()
    list[i] = outs[i]
  end
  local nin = args.n
  local function bw(...)
    return backward_results(shapes, nin, table.pack(cls.backward(ctx, ...)))
  end
  -- `false` stands for an argument that is not a tensor
  local ins = {}
  for i = 1, nin do ins[i] = inputs[i] or false end
  core._function_record(cls.__name, bw, ins, list)
  return table.unpack(outs, 1, outs.n)
end

autograd.Function = Function

---------------------------------------------------------------------------------------------
--- Checking gradients.
-- @section gradcheck

--- Compares analytic and finite-difference Jacobians of `fn(inputs...)` in float64: one
-- backward pass per output element against central differences of every element of the
-- inputs that require grad. Returns true, or raises naming the first mismatch (output
-- element, input, element, both values).
-- @func fn returns a tensor
-- @param inputs a tensor or a list of arguments (the float64 tensors that require grad are
-- checked)
-- @tparam[opt] table opts `{eps=1e-6, atol=1e-5, rtol=1e-3}`
-- @treturn boolean true
-- @usage local x = lt.randn(3, {dtype = "float64", requires_grad = true})
-- lt.autograd.gradcheck(function(a) return (a * a):sum() end, {x})
function autograd.gradcheck(fn, inputs, opts)
  opts = options.check("gradcheck", opts, { "eps", "atol", "rtol" })
  local eps = opts.eps or 1e-6
  local atol = opts.atol or 1e-5
  local rtol = opts.rtol or 1e-3
  if lt.is_tensor(inputs) then inputs = { inputs } end
  local diff = {}
  for i, x in ipairs(inputs) do
    if lt.is_tensor(x) and x.requires_grad then
      if x.dtype ~= "float64" then
        error(string.format("gradcheck: input %d is %s; gradcheck needs float64 inputs", i, x.dtype), 2)
      end
      diff[#diff + 1] = i
    end
  end
  if #diff == 0 then error("gradcheck: no input requires grad", 2) end
  local function run()
    local out = fn(table.unpack(inputs))
    if not lt.is_tensor(out) then error("gradcheck: fn must return a tensor", 3) end
    return out
  end
  local out0 = run()
  local nout = out0:numel()
  -- numerical Jacobian: column j of input i, perturbing one element at a time in place
  local numeric = {}
  lt.no_grad(function()
    for _, i in ipairs(diff) do
      local x = inputs[i]
      local n = x:numel()
      numeric[i] = {}
      local xd = x:detach()
      local xflat = xd:reshape(n)
      if not xd:is_contiguous() then
        error("gradcheck: input " .. i .. " must be contiguous or a view that reshape keeps", 2)
      end
      for j = 1, n do
        local orig = xflat[j]:item()
        xflat[j] = orig + eps
        local fp = run():double():reshape(nout):tolist()
        xflat[j] = orig - eps
        local fm = run():double():reshape(nout):tolist()
        xflat[j] = orig
        local col = {}
        for k = 1, nout do col[k] = (fp[k] - fm[k]) / (2 * eps) end
        numeric[i][j] = col
      end
    end
  end)
  -- analytic Jacobian: one backward per output element
  for k = 1, nout do
    local out = run()
    local seed = lt.zeros(out:size(), { dtype = out.dtype })
    seed:reshape(nout)[k] = 1
    local ins = {}
    for a, i in ipairs(diff) do ins[a] = inputs[i] end
    local grads = autograd.grad(out, ins, { grad_outputs = { seed }, allow_unused = true })
    for a, i in ipairs(diff) do
      local g = grads[a]
      local n = inputs[i]:numel()
      local gl = g and g:double():reshape(n):tolist() or nil
      for j = 1, n do
        local an = gl and gl[j] or 0
        local nu = numeric[i][j][k]
        if math.abs(an - nu) > atol + rtol * math.abs(nu) or an ~= an then
          error(string.format(
            "gradcheck: Jacobian mismatch for output element %d with respect to input %d, element %d: analytic %.10g, numerical %.10g",
            k, i, j, an, nu), 2)
        end
      end
    end
  end
  return true
end

return autograd
