-- Gradients of the elementwise family: PyTorch reference gradients (spec/fixtures/
-- elementwise.lua), float64 finite-difference gradchecks of every differentiable op (broadcast,
-- numbers on either side, non-contiguous inputs, in-place forms), and the special rules:
-- ties of maximum/minimum, the clamp mask, where to both branches, dtypes of gradients.
local lt = require "lantern"
local fx = require "fixtures.elementwise"
local gradcheck = lt.autograd.gradcheck

local function flat(t)
  if lt.is_tensor(t) then return t:double():reshape(-1):tolist() end
  local out = {}
  local function walk(v)
    if type(v) == "table" then
      for _, e in ipairs(v) do walk(e) end
    else
      out[#out + 1] = v
    end
  end
  walk(t)
  return out
end

local function close(got, want, tol)
  tol = tol or 1e-10
  local x, y = flat(got), flat(want)
  assert.are.equal(#y, #x, "element count")
  for i = 1, #x do
    if math.abs(x[i] - y[i]) > tol * (1 + math.abs(y[i])) then
      error(string.format("element %d: got %.17g, want %.17g", i, x[i], y[i]), 2)
    end
  end
end

local function leaf(v) return lt.tensor(v, { dtype = "float64", requires_grad = true }) end
local F64 = { dtype = "float64" }
local function rnd(...)
  return lt.randn({ ... }, F64)
end
-- random float64 leaf with values kept away from 0 (|v| in [0.3, 1.3]) and a sign pattern
local function away(...)
  local t = lt.rand({ ... }, F64) + 0.3
  local s = lt.randn({ ... }, F64):sign()
  s = lt.where(s:eq(0), 1, s)
  return (t * s):requires_grad_()
end
local function pos(...)
  return (lt.rand({ ... }, F64) + 0.5):requires_grad_()
end
local function unit(...)   -- inside (-0.8, 0.8)
  return ((lt.rand({ ... }, F64) - 0.5) * 1.6):requires_grad_()
end

local function errors_with(fn, ...)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  err = tostring(err)
  for _, pat in ipairs({ ... }) do
    assert.is_truthy(err:find(pat, 1, true), "message '" .. err .. "' lacks '" .. pat .. "'")
  end
end

local unary_fn = {
  gelu_tanh = function(x) return x:gelu("tanh") end,
  leaky_relu = function(x) return x:leaky_relu(0.1) end,
  elu = function(x) return x:elu(0.7) end,
  softplus = function(x) return x:softplus(2.0, 3.0) end,
}

describe("elementwise gradients against PyTorch", function()
  for _, c in ipairs(fx.unary) do
    it(c.name, function()
      local x = leaf(c.x)
      local y = unary_fn[c.name] and unary_fn[c.name](x) or x[c.name](x)
      assert.are.equal(c.grad_fn, y.grad_fn)
      ;(y * lt.tensor(c.g, { dtype = "float64" })):sum():backward()
      close(x.grad, c.dx, 1e-12)
    end)
  end

  for _, c in ipairs(fx.binary) do
    it(c.name .. " with broadcasting", function()
      local a, b = leaf(c.a), leaf(c.b)
      local y = a[c.name](a, b)
      assert.are.equal(c.grad_fn, y.grad_fn)
      ;(y * lt.tensor(c.g, { dtype = "float64" })):sum():backward()
      close(a.grad, c.da, 1e-12)
      close(b.grad, c.db, 1e-12)
    end)
  end
end)

describe("gradcheck of unary ops", function()
  local cases = {
    { "neg", away }, { "abs", away }, { "exp", away }, { "log", pos }, { "log1p", pos },
    { "sqrt", pos }, { "rsqrt", pos }, { "sin", away }, { "cos", away }, { "tanh", away },
    { "sigmoid", away }, { "relu", away }, { "gelu", away }, { "silu", away },
    { "reciprocal", away }, { "square", away }, { "expm1", away }, { "log2", pos },
    { "erf", away }, { "leaky_relu", away }, { "elu", away }, { "softplus", away },
    { "tan", unit }, { "asin", unit }, { "acos", unit }, { "atan", away },
    { "hardsigmoid", away }, { "hardswish", away },   -- within (-3, 3): off their corners
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " (contiguous and transposed)", function()
      local x = c[2](3, 4)
      assert.is_true(gradcheck(function(t) return t[c[1]](t) end, { x }))
      assert.is_true(gradcheck(function(t) return t:t()[c[1]](t:t()) end, { x }))
    end)
  end

  it("parameterised activations", function()
    local x = away(2, 3)
    assert.is_true(gradcheck(function(t) return t:gelu("tanh") end, { x }))
    assert.is_true(gradcheck(function(t) return t:leaky_relu(0.3) end, { x }))
    assert.is_true(gradcheck(function(t) return t:elu(1.7) end, { x }))
    assert.is_true(gradcheck(function(t) return t:softplus(2, 1) end, { x }))   -- both branches
  end)

  it("gives zero gradients for sign, floor, ceil, round and trunc", function()
    for _, op in ipairs({ "sign", "floor", "ceil", "round", "trunc" }) do
      local x = leaf({ -1.3, 0.2, 2.7 })
      x[op](x):sum():backward()
      close(x.grad, { 0, 0, 0 })
    end
    assert.are.equal("SignBackward0", leaf({ 1 }):sign().grad_fn)
  end)
end)

describe("gradcheck of binary ops", function()
  local ops = {
    { "add", rnd, rnd }, { "sub", rnd, rnd }, { "mul", rnd, rnd }, { "div", rnd, away },
    { "pow", pos, rnd }, { "maximum", rnd, rnd }, { "minimum", rnd, rnd },
    { "atan2", away, away }, { "fmod", rnd, away }, { "remainder", rnd, away },
  }
  for _, c in ipairs(ops) do
    it(c[1] .. " with broadcasting and non-contiguous operands", function()
      local function mk(gen, ...)
        local t = gen(...)
        if not t.requires_grad then t:requires_grad_() end
        return t
      end
      local a, b = mk(c[2], 2, 3), mk(c[3], 3)
      assert.is_true(gradcheck(function(x, y) return x[c[1]](x, y) end, { a, b }))
      local b2 = mk(c[3], 2, 1)
      assert.is_true(gradcheck(function(x, y) return lt[c[1]](x, y) end, { a, b2 }))
      -- a transposed operand against a [3, 1] column
      local b3 = mk(c[3], 3, 1)
      assert.is_true(gradcheck(function(x, y) return x:t()[c[1]](x:t(), y) end, { a, b3 }))
      -- a narrowed (strided) operand
      local w = mk(c[2], 2, 5)
      assert.is_true(gradcheck(function(x, y)
        local v = x:narrow(2, 2, 3)
        return v[c[1]](v, y)
      end, { w, b }))
    end)
  end

  it("with a number on either side", function()
    local x = away(2, 3)
    local p = pos(2, 3)
    local fns = {
      function(t) return t + 2 end, function(t) return 2 + t end,
      function(t) return t - 2 end, function(t) return 2 - t end,
      function(t) return t * 3 end, function(t) return 3 * t end,
      function(t) return t / 3 end, function(t) return 3 / t end,
      function(t) return t ^ 2 end, function(t) return t ^ 3 end,
      function(t) return t ^ -1 end, function(t) return 2 ^ t end,
      function(t) return t:maximum(0.1) end, function(t) return lt.minimum(0.1, t) end,
      function(t) return t:atan2(2) end, function(t) return lt.atan2(2, t) end,
      function(t) return t:fmod(0.7) end, function(t) return t:remainder(0.7) end,
      function(t) return lt.fmod(3, t) end, function(t) return lt.remainder(3, t) end,
      function(t) return t % 0.7 end,
    }
    for i, fn in ipairs(fns) do
      local ok, err = pcall(gradcheck, fn, { x })
      assert.is_true(ok, "case " .. i .. ": " .. tostring(err) .. tostring(x))
    end
    assert.is_true(gradcheck(function(t) return t ^ 2.5 end, { p }))
    assert.is_true(gradcheck(function(t) return t ^ 0.5 end, { p }))
    local e = p:detach():clone()
    assert.is_true(gradcheck(function(t) return t:pow(e) end, { p }))
  end)

  it("names the nodes like PyTorch", function()
    local x = leaf({ 1, 2 })
    assert.are.equal("AddBackward0", (x + 2).grad_fn)
    assert.are.equal("SubBackward0", (x - 2).grad_fn)
    assert.are.equal("RsubBackward1", (2 - x).grad_fn)
    assert.are.equal("MulBackward0", (2 * x).grad_fn)
    assert.are.equal("DivBackward0", (x / 2).grad_fn)
    assert.are.equal("PowBackward0", (x ^ 2).grad_fn)
    assert.are.equal("PowBackward1", (x ^ x).grad_fn)
    assert.are.equal("PowBackward2", (2 ^ x).grad_fn)
    assert.are.equal("PowBackward0", x:square().grad_fn)
    assert.are.equal("FmodBackward0", x:fmod(2).grad_fn)
    assert.are.equal("RemainderBackward1", x:remainder(x).grad_fn)
    assert.are.equal("ClampBackward1", x:clamp(0, 1).grad_fn)
    assert.are.equal("WhereBackward0", lt.where(x:gt(1), x, 0).grad_fn)
    assert.are.equal("NegBackward0", (-x).grad_fn)
  end)
end)

describe("special gradient rules", function()
  it("splits maximum/minimum ties half-half", function()
    local a, b = leaf({ 1, 2, 5 }), leaf({ 1, 3, 4 })
    a:maximum(b):sum():backward()
    close(a.grad, { 0.5, 0, 1 })
    close(b.grad, { 0.5, 1, 0 })
    local c, d = leaf({ 1, 2, 5 }), leaf({ 1, 3, 4 })
    lt.minimum(c, d):sum():backward()
    close(c.grad, { 0.5, 1, 0 })
    close(d.grad, { 0.5, 0, 1 })
    local x = leaf({ 2 })
    x:maximum(x):sum():backward()
    close(x.grad, { 1 })
    local y = leaf({ 0, 1 })
    y:maximum(0):sum():backward()
    close(y.grad, { 0.5, 1 })
  end)

  it("passes the clamp gradient where min <= x <= max", function()
    local x = leaf({ -2, -1, 0, 1, 2 })
    x:clamp(-1, 1):sum():backward()
    close(x.grad, { 0, 1, 1, 1, 0 })
    local y = leaf({ -2, 0, 2 })
    y:clamp(0):sum():backward()
    close(y.grad, { 0, 1, 1 })
    local z = leaf({ -2, 0, 2 })
    z:clamp(nil, 0):sum():backward()
    close(z.grad, { 1, 1, 0 })
    assert.is_true(gradcheck(function(t) return t:clamp(-0.5, 0.5) end, { away(3, 3) }))
  end)

  it("sends where's gradient to both branches, reduced over broadcasting", function()
    local c = lt.tensor({ { true, false, true }, { false, false, true } })
    local a, b = leaf({ { 1, 2, 3 }, { 4, 5, 6 } }), leaf({ 10, 20, 30 })
    local y = lt.where(c, a, b)
    ;(y * lt.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float64" })):sum():backward()
    close(a.grad, { 1, 0, 3, 0, 0, 6 })
    close(b.grad, { 4, 7, 0 })
    local p, q = rnd(2, 3):requires_grad_(), rnd(2, 1):requires_grad_()
    assert.is_true(gradcheck(function(u, v) return lt.where(c, u, v) end, { p, q }))
    assert.is_true(gradcheck(function(u) return lt.where(c:t(), u:t(), 0) end, { p }))
  end)

  it("returns gradients in each input's dtype", function()
    local a = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })                   -- float32
    local b = lt.tensor({ 3.0, 4.0 }, { dtype = "float64", requires_grad = true })
    local y = a * b
    assert.are.equal("float64", y.dtype)
    y:sum():backward()
    assert.are.equal("float32", a.grad.dtype)
    assert.are.equal("float64", b.grad.dtype)
    close(a.grad, { 3, 4 })
    close(b.grad, { 1, 2 })
    local c = lt.tensor({ 1.5, 2.5 }, { requires_grad = true })
    local i = lt.tensor({ 2, 3 })
    ;(c * i + i):sum():backward()
    close(c.grad, { 2, 3 })
  end)

  it("does not record comparisons, logical ops or isnan", function()
    local x = leaf({ 1, 2 })
    for _, r in ipairs({ x:gt(1), x:eq(x), x:logical_and(x), x:isnan(), x:isfinite(),
                         x:logical_not(), lt.isclose(x, x) }) do
      assert.is_false(r.requires_grad)
      assert.is_nil(r.grad_fn)
    end
  end)

  it("does not record under no_grad", function()
    local x = leaf({ 1, 2 })
    local y = lt.no_grad(function() return x * 2 + x:exp() end)
    assert.is_false(y.requires_grad)
  end)
end)

describe("in-place ops under autograd", function()
  it("records on the written tensor with the values before the write", function()
    local a, b = leaf({ 1, 2, 3 }), leaf({ 4, 5, 6 })
    local y = a * 1
    y:mul_(b)
    assert.are.equal("MulBackward0", y.grad_fn)
    y:sum():backward()
    close(a.grad, { 4, 5, 6 })
    close(b.grad, { 1, 2, 3 })
  end)

  it("matches gradcheck for binary in-place forms", function()
    local a = away(2, 3)
    local b = away(3)
    local ops = { "add_", "sub_", "mul_", "div_", "atan2_", "fmod_", "remainder_" }
    for _, op in ipairs(ops) do
      assert.is_true(gradcheck(function(x, y)
        local t = x * 1
        t[op](t, y)
        return t
      end, { a, b }), op)
    end
    assert.is_true(gradcheck(function(x, y)
      local t = x:abs() + 0.5
      t:pow_(y)
      return t
    end, { a, b }))
    assert.is_true(gradcheck(function(x) return (x * 1):mul_(2):add_(1, { alpha = 3 }):pow_(2) end, { a }))
    assert.is_true(gradcheck(function(x)
      local t = x * 1
      t:mul_(t)
      return t
    end, { a }))
    assert.is_true(gradcheck(function(x)
      local t = x * 1
      t:add_(t)
      return t
    end, { a }))
  end)

  it("matches gradcheck for unary in-place forms", function()
    local x = unit(2, 3)
    local ops = { "neg_", "abs_", "exp_", "sqrt_", "rsqrt_", "sin_", "cos_", "tanh_",
                  "sigmoid_", "relu_", "reciprocal_", "square_", "expm1_", "erf_", "tan_",
                  "asin_", "acos_", "atan_", "log_", "log1p_", "log2_", "leaky_relu_", "elu_" }
    for _, op in ipairs(ops) do
      local pre = function(t) return t * 1 end
      if op == "sqrt_" or op == "rsqrt_" or op == "log_" or op == "log2_" or op == "log1p_" then
        pre = function(t) return t:abs() + 0.5 end
      end
      assert.is_true(gradcheck(function(t)
        local u = pre(t)
        u[op](u)
        return u
      end, { x }), op)
    end
    assert.is_true(gradcheck(function(t) return (t * 1):clamp_(-0.3, 0.3) end, { x }))
  end)

  it("makes a tensor that did not require grad part of the graph", function()
    local b = leaf({ 2, 3 })
    local y = lt.tensor({ 1, 1 }, { dtype = "float64" })
    y:mul_(b)
    assert.is_true(y.requires_grad)
    y:sum():backward()
    close(b.grad, { 1, 1 })
  end)

  it("detects a saved input modified later", function()
    local a, b = leaf({ 1, 2 }), leaf({ 3, 4 })
    local c = b * 1
    local y = a * c          -- saves c for a's gradient
    c:add_(1)
    errors_with(function() y:sum():backward() end, "modified by an inplace operation")
  end)

  it("refuses non-differentiable in-place ops on tensors that require grad", function()
    local y = leaf({ 1, 2 }) * 1
    errors_with(function() y:eq_(1) end, "eq_")
  end)
end)
