--- Autograd helpers written in Lua: autograd.grad, custom Functions and gradcheck.
-- @module lantern.autograd
local lt = require "lantern"
local core = require "lantern.core"

local autograd = {}

--- Gradients of `outputs` with respect to `inputs` (a tensor or a list of tensors).
-- Returns a list with one gradient per input (nil for unused inputs with allow_unused).
function autograd.grad(outputs, inputs, opts)
  local res = core._grad(outputs, inputs, opts)
  for i = 1, #res do
    if res[i] == false then res[i] = nil end
  end
  return res
end

autograd.backward = function(t, g, opts) return t:backward(g, opts) end

--------------------------------------------------------------------- Function

local Ctx = {}
Ctx.__index = Ctx

--- Saves tensors for backward; they come back as `ctx.saved_tensors`.
function Ctx:save_for_backward(...)
  self.saved_tensors = table.pack(...)
end

function Ctx:mark_non_differentiable(...)
  self._non_diff = table.pack(...)
end

local Function = {}
Function.__index = Function
Function.__name = "Function"

--- Declares a user op: `local Cube = lt.autograd.Function:extend("Cube")`, then define
-- `Cube.forward(ctx, ...)` and `Cube.backward(ctx, grad...)`, and call `Cube.apply(...)`.
function Function:extend(name)
  assert(type(name) == "string", "Function:extend expects a class name")
  local cls = setmetatable({ __name = name }, { __index = self })
  cls.__index = cls
  cls.apply = function(...) return autograd._apply(cls, ...) end
  return cls
end

function autograd._apply(cls, ...)
  local args = table.pack(...)
  local ctx = setmetatable({ needs_input_grad = {} }, Ctx)
  local inputs = {}
  for i = 1, args.n do
    local a = args[i]
    if lt.is_tensor(a) then
      inputs[i] = a
      ctx.needs_input_grad[i] = a.requires_grad
    else
      inputs[i] = nil
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
    local g = table.pack(cls.backward(ctx, ...))
    local r = {}
    for i = 1, nin do r[i] = g[i] or false end
    return r
  end
  -- `false` stands for an argument that is not a tensor
  local ins = {}
  for i = 1, nin do ins[i] = inputs[i] or false end
  core._function_record(cls.__name, bw, ins, list)
  return table.unpack(outs, 1, outs.n)
end

autograd.Function = Function

--------------------------------------------------------------------- gradcheck

--- Compares analytic and finite-difference Jacobians of `fn(inputs...)` in float64.
-- Returns true, or raises naming the first mismatch (input, index, both values).
function autograd.gradcheck(fn, inputs, opts)
  opts = opts or {}
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
