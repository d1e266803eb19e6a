-- The elementwise family: arithmetic (methods, functions and Lua operators), comparisons,
-- logical ops, math functions and activations, clamp, where, isclose/allclose/equal, PyTorch's
-- type promotion, broadcasting, non-contiguous inputs, in-place semantics and errors.
-- Reference values are hand-computed or come from spec/fixtures/elementwise.lua (PyTorch).
local lt = require "lantern"
local fx = require "fixtures.elementwise"

local inf, nan = 1 / 0, 0 / 0

local function flat(t)
  if lt.is_tensor(t) then
    if t.dtype == "bool" then t = t:long() end
    return t:double():reshape(-1):tolist()
  end
  local out = {}
  local function walk(v)
    if type(v) == "table" then
      for _, e in ipairs(v) do walk(e) end
    elseif type(v) == "boolean" then
      out[#out + 1] = v and 1 or 0
    else
      out[#out + 1] = v
    end
  end
  walk(t)
  return out
end

-- Elementwise comparison with a relative tolerance; NaN matches NaN, inf matches inf.
local function close(got, want, tol)
  tol = tol or 1e-12
  local x, y = flat(got), flat(want)
  assert.are.equal(#y, #x, "element count")
  for i = 1, #x do
    local a, b = x[i], y[i]
    local ok
    if b ~= b then
      ok = a ~= a
    elseif b == inf or b == -inf then
      ok = a == b
    else
      ok = math.abs(a - b) <= tol * (1 + math.abs(b))
    end
    if not ok then error(string.format("element %d: got %.17g, want %.17g", i, a, b), 2) end
  end
end

local function shape(t) return t:size() end

local function f64(v) return lt.tensor(v, { dtype = "float64" }) end
local function f32(v) return lt.tensor(v, { dtype = "float32" }) end
local function i64(v) return lt.tensor(v, { dtype = "int64" }) end

local function errors_with(fn, ...)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  err = tostring(err)
  for _, pat in ipairs({ ... }) do
    assert.is_truthy(err:find(pat, 1, true), "message '" .. err .. "' lacks '" .. pat .. "'")
  end
  return err
end

local unary_fn = {
  gelu_tanh = function(x) return x:gelu("tanh") end,
  leaky_relu = function(x) return x:leaky_relu(0.1) end,
  elu = function(x) return x:elu(0.7) end,
  softplus = function(x) return x:softplus(2.0, 3.0) end,
}
local function apply_unary(name, x)
  if unary_fn[name] then return unary_fn[name](x) end
  return x[name](x)
end

describe("unary ops against PyTorch", function()
  for _, c in ipairs(fx.unary) do
    it(c.name .. " in float64 and float32", function()
      local y = apply_unary(c.name, f64(c.x))
      assert.are.equal("float64", y.dtype)
      close(y, c.y, 1e-12)
      local y32 = apply_unary(c.name, f32(c.x))
      assert.are.equal("float32", y32.dtype)
      close(y32, c.y32, 2e-6)
    end)
  end

  it("exists as lt.op(x) too", function()
    local x = f64({ 0.5, 1.5 })
    close(lt.exp(x), { math.exp(0.5), math.exp(1.5) })
    close(lt.sqrt(x), { math.sqrt(0.5), math.sqrt(1.5) })
    close(lt.tanh(x), { 0.46211715726000974, 0.9051482536448664 })
    close(lt.neg(x), { -0.5, -1.5 })
    close(lt.gelu(x, { approximate = "tanh" }), x:gelu("tanh"))
    close(lt.leaky_relu(f64({ -2, 3 }), { negative_slope = 0.2 }), { -0.4, 3 })
    close(lt.elu(f64({ -1, 3 }), { alpha = 2 }), { 2 * (math.exp(-1) - 1), 3 })
    close(lt.softplus(f64({ 1, 30 }), { beta = 1, threshold = 20 }), { math.log(1 + math.exp(1)), 30 })
  end)

  it("uses PyTorch defaults for activation parameters", function()
    close(f64({ -1, 2 }):leaky_relu(), { -0.01, 2 })
    close(f64({ -1, 2 }):elu(), { math.exp(-1) - 1, 2 })
    close(f64({ 0, 25 }):softplus(), { math.log(2), 25 })
  end)

  it("handles special values", function()
    local x = f64({ nan, inf, -inf, 0 })
    close(x:relu(), { nan, inf, 0, 0 })
    close(x:sign(), { 0, 1, -1, 0 })
    close(x:exp(), { nan, inf, 0, 1 })
    close(x:sigmoid(), { nan, 1, 0, 0.5 })
    close(x:abs(), { nan, inf, inf, 0 })
    close(f64({ -1, 0 }):log(), { nan, -inf })
    close(f64({ -1 }):sqrt(), { nan })
  end)

  it("rounds half to even", function()
    close(f32({ 0.5, 1.5, 2.5, -0.5, -1.5 }):round(), { 0, 2, 2, -0, -2 })
  end)
end)

describe("binary ops against PyTorch with broadcasting", function()
  for _, c in ipairs(fx.binary) do
    it(c.name .. " of [2,3] and [3]", function()
      local a, b = f64(c.a), f64(c.b)
      local y = a[c.name](a, b)
      assert.are.same({ 2, 3 }, shape(y))
      close(y, c.y)
      close(lt[c.name](a, b), c.y)
      -- broadcasting the other way round gives the mirrored shape
      local y2 = lt[c.name](a:t(), b:reshape(3, 1))
      assert.are.same({ 3, 2 }, shape(y2))
      close(y2:t(), c.y)
    end)
  end
end)

describe("arithmetic by hand", function()
  it("adds, subtracts, multiplies and divides tensors", function()
    local a, b = f32({ 1, 2, 3 }), f32({ 4, 5, 6 })
    close(a + b, { 5, 7, 9 })
    close(a - b, { -3, -3, -3 })
    close(a * b, { 4, 10, 18 })
    close(a / b, { 0.25, 0.4, 0.5 }, 1e-7)
    close(b % a, { 0, 1, 0 })
    close(-a, { -1, -2, -3 })
    close(a ^ b, { 1, 32, 729 })
  end)

  it("takes the flat small-op path only for one shape or one element: equal counts can still broadcast", function()
    -- (2,1) and (1,2) hold two elements each but broadcast to (2,2)
    local a = lt.tensor({ { 1.0 }, { 2.0 } })
    local b = lt.tensor({ { 10.0, 20.0 } })
    assert.are.same({ { 11, 21 }, { 12, 22 } }, (a + b):tolist())
    assert.are.same({ { 10, 20 }, { 20, 40 } }, (a * b):tolist())
    -- a transposed operand of the same shape is not dense
    local m = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } })
    assert.are.same({ { 2, 5 }, { 5, 8 } }, (m + m:t()):tolist())
    -- a narrowed (offset) operand is dense and read from its offset
    local v = lt.tensor({ 1.0, 2.0, 3.0, 4.0 }):narrow(1, 3, 2)
    assert.are.same({ 4, 6 }, (v + lt.tensor({ 1.0, 2.0 })):tolist())
    -- float64, zero-dim and empty operands
    assert.are.equal(0.5, (lt.tensor(1.0, { dtype = "float64" }) / lt.tensor(2.0, { dtype = "float64" })):item())
    assert.are.same({ 0 }, (lt.zeros(0) - lt.zeros(0)):size())
    -- a single element on either side, as a number or a tensor of any rank
    assert.are.same({ 3, 6 }, (lt.tensor({ 1.0, 2.0 }) * 3):tolist())
    assert.are.same({ 2, 1 }, (3 - lt.tensor({ 1.0, 2.0 })):tolist())
    assert.are.same({ 4, 3 }, (lt.tensor({ 5.0 }) - lt.tensor({ 1.0, 2.0 })):tolist())
    assert.are.same({ { { 0.5, 1 } } }, (lt.tensor({ { 1.0, 2.0 } }) / lt.tensor({ { { 2.0 } } })):tolist())
    assert.are.same({ 0 }, (lt.tensor(2.0) * lt.zeros(0)):size())
  end)

  it("gives the same bits on the small path as on the general one", function()
    -- under 32768 elements, dense operands of one dtype (or a number) take a short path in
    -- lt_binary; above it the general driver runs: a small slice must match the large result
    lt.manual_seed(11)
    local N, n = 40000, 37
    for _, dt in ipairs { "float32", "float64" } do
      local x = lt.randn(N, { dtype = dt })
      local y = lt.rand(N, { dtype = dt }) + 0.5
      local xs, ys = x:narrow(1, 1, n):clone(), y:narrow(1, 1, n):clone()
      local cases = {
        { function(p, q) return p + q end, "a + b" }, { function(p, q) return p - q end, "a - b" },
        { function(p, q) return p * q end, "a * b" }, { function(p, q) return p / q end, "a / b" },
        { function(p) return p * 0.1 end, "a * 0.1" }, { function(p) return 0.1 / p end, "0.1 / a" },
        { function(p) return 3 - p end, "3 - a" }, { function(p) return p / 7 end, "a / 7" },
        { function(p) return p * lt.tensor(0.1, { dtype = dt }) end, "a * 0-dim" },
        { function(p) return lt.tensor(3, { dtype = dt }) - p end, "0-dim - a" },
      }
      for _, c in ipairs(cases) do
        assert.are.same(c[1](x, y):narrow(1, 1, n):tolist(), c[1](xs, ys):tolist(), dt .. " " .. c[2])
      end
    end
    -- an operand that requires grad is recorded, not taken by the short path
    local w = lt.tensor({ 1.0, 2.0 }):requires_grad_()
    local z = w * 3 + w
    assert.is_not_nil(z.grad_fn)
    z:sum():backward()
    assert.are.same({ 4, 4 }, w.grad:tolist())
    lt.no_grad(function() assert.is_nil((w * 3).grad_fn) end)
  end)

  it("leaves operands that are not dense and of one shape to the general path", function()
    -- the short path checks shape and strides of both operands in one pass; what it refuses
    -- must still come out right, and what it takes must have contiguous strides
    local function sum2(p, q)
      local r = {}
      for i, row in ipairs(p:tolist()) do
        r[i] = {}
        for j, v in ipairs(row) do r[i][j] = v + q:tolist()[i][j] end
      end
      return r
    end
    lt.manual_seed(5)
    local a = lt.randn(3, 4, { dtype = "float64" })
    local bt = lt.randn(4, 3, { dtype = "float64" }):t()        -- same shape, transposed strides
    local be = lt.randn(3, 1, { dtype = "float64" }):expand(3, 4) -- same shape, a zero stride
    assert.are.same(sum2(a, bt), (a + bt):tolist())
    assert.are.same(sum2(bt, a), (bt + a):tolist())
    assert.are.same(sum2(a, be), (a + be):tolist())
    assert.are.same({ 4, 1 }, (a + bt):stride())
    -- a size-1 dimension's stride does not matter: still dense, and the result is contiguous
    local c = lt.randn(1, 5):t()
    local d = c + c
    assert.are.same({ 5, 1 }, d:size())
    assert.are.same({ 1, 1 }, d:stride())
    for i = 1, 5 do assert.are.equal(2 * c[i][1]:item(), d[i][1]:item()) end
    -- the same element count in other shapes is a broadcast error, not a flat add
    assert.has_error(function() return lt.zeros(2, 6) + lt.zeros(3, 4) end)
    assert.are.same({ 1, 4 }, (lt.ones(4) + lt.ones(1, 4)):size())
    assert.are.same({ 0, 3 }, (lt.zeros(0, 3) + lt.zeros(0, 3)):size())
  end)

  it("takes numbers on either side of every operator", function()
    local x = f64({ 1, 2, 4 })
    close(x + 1, { 2, 3, 5 })
    close(1 + x, { 2, 3, 5 })
    close(x - 1, { 0, 1, 3 })
    close(2 - x, { 1, 0, -2 })
    close(x * 3, { 3, 6, 12 })
    close(3 * x, { 3, 6, 12 })
    close(x / 2, { 0.5, 1, 2 })
    close(2 / x, { 2, 1, 0.5 })
    close(x ^ 2, { 1, 4, 16 })
    close(2 ^ x, { 2, 4, 16 })
    close(x ^ 0.5, { 1, math.sqrt(2), 2 })
    close(x ^ -1, { 1, 0.5, 0.25 })
    close(x ^ 3, { 1, 8, 64 })
    close(x % 3, { 1, 2, 1 })
    close(7 % x, { 0, 1, 3 })
  end)

  it("offers methods and functions with numbers on either side", function()
    local x = f64({ 1, 2, 4 })
    close(x:sub(1), { 0, 1, 3 })
    close(lt.sub(10, x), { 9, 8, 6 })
    close(lt.div(8, x), { 8, 4, 2 })
    close(lt.pow(3, x), { 3, 9, 81 })
    close(x:maximum(2), { 2, 2, 4 })
    close(lt.minimum(2, x), { 1, 2, 2 })
    close(x:atan2(1), { math.atan(1, 1), math.atan(2, 1), math.atan(4, 1) })
    close(x:mul(x), { 1, 4, 16 })
    close(lt.multiply(x, 2), { 2, 4, 8 })
    close(lt.divide(x, 2), { 0.5, 1, 2 })
  end)

  it("supports alpha in add and sub", function()
    local a, b = f64({ 1, 2 }), f64({ 10, 20 })
    close(a:add(b, { alpha = 2 }), { 21, 42 })
    close(lt.sub(a, b, { alpha = 0.5 }), { -4, -8 })
    close(a:add(3, { alpha = 2 }), { 7, 8 })
    local c = a:clone()
    c:add_(b, { alpha = -1 })
    close(c, { -9, -18 })
  end)

  it("computes fmod and remainder with C and Python sign rules", function()
    local a = f64({ -7, 7, -7, 7 })
    local b = f64({ 3, -3, -3, 3 })
    close(a:fmod(b), { -1, 1, -1, 1 })
    close(a:remainder(b), { 2, -2, -1, 1 })
    close(i64({ -7, 7 }):fmod(3), { -1, 1 })
    close(i64({ -7, 7 }):remainder(3), { 2, 1 })
    close(i64({ -7, 7 }):remainder(i64({ -3, -3 })), { -1, -2 })
  end)

  -- pow with one scalar exponent takes PyTorch's cheaper forms: x, x*x, x*x*x, sqrt x, 1/x,
  -- 1/sqrt x, 1/(x*x); so -0 ^ -0.5 is -inf and -inf ^ -0.5 NaN (libm's pow: +inf and 0). The
  -- gradient is g * (e * x^(e-1)) with x^(e-1) in the same forms (PyTorch 1.13's values).
  it("takes pow's cheaper forms for scalar exponents, values and gradients as PyTorch", function()
    local function bits(t)
      local r = {}
      for i, v in ipairs(t:double():tolist()) do r[i] = v ~= v and "nan" or string.format("%a", v) end
      return table.concat(r, " ")
    end
    local xs = { -0.0, 0.0, -inf, inf, 4, -1, nan, 0.3, -2.5, 1e-20 }
    local function form(x, e)   -- the value PyTorch's forms give, in float64
      if e == 0.5 then return math.sqrt(x) elseif e == -0.5 then return 1 / math.sqrt(x)
      elseif e == 1 then return x elseif e == 2 then return x * x elseif e == 3 then return x * x * x
      elseif e == -1 then return 1 / x elseif e == -2 then return 1 / (x * x) end
      return x ^ e
    end
    for _, e in ipairs { 1, 2, 3, 0.5, -1, -0.5, -2, 2.5, -3 } do
      for _, dt in ipairs { "float64", "float32" } do
        local x = lt.tensor(xs, { dtype = dt }):requires_grad_()
        local y = x:pow(e)
        y:sum():backward()
        local want, dwant = {}, {}
        for i, v in ipairs(x:detach():double():tolist()) do
          want[i] = form(v, e)
          dwant[i] = e * form(v, e - 1)
        end
        want = lt.tensor(want, { dtype = "float64" }):to(dt)
        dwant = lt.tensor(dwant, { dtype = "float64" }):to(dt)
        if dt == "float64" then
          assert.are.equal(bits(want), bits(y), "pow " .. e)
          assert.are.equal(bits(dwant), bits(x.grad), "pow " .. e .. " gradient")
        else   -- float32 rounds each step: NaN, inf and zero signs as float64's, values close
          close(y, want:double():tolist(), 1e-6)
          close(x.grad, dwant:double():tolist(), 1e-6)
          assert.are.equal(bits(want:sign()), bits(y:sign()), "pow " .. e .. " signs")
        end
      end
    end
    -- x^3 and x^-2 are x*x*x and 1/(x*x) bit for bit, as in PyTorch (powf would round once)
    local x = lt.randn(4099) * 3
    assert.are.equal(bits(x * x * x), bits(x:pow(3)))
    assert.are.equal(bits((x * x):reciprocal()), bits(x:pow(-2)))
  end)

  -- a block of 256 holding NaN, inf or |x| > 2^24 goes to a loop with libm calls, but every
  -- element in range still takes the vector formula: libm's float32 sin is 1 ulp off on about
  -- 1% of inputs, and a value must not depend on its neighbours (nor on the thread count)
  it("gives sin, cos and tan of an element whatever its neighbours", function()
    local function hex(t)
      local r = {}
      for i, v in ipairs(t:double():tolist()) do r[i] = v ~= v and "nan" or string.format("%a", v) end
      return r
    end
    lt.manual_seed(5)
    local x = lt.rand(3000) * 2 ^ 20
    for _, special in ipairs { 1 / 0, 0 / 0, 2 ^ 30 } do
      local y = x:clone()
      y:narrow(1, 1500, 1):fill_(special)
      for _, name in ipairs { "sin", "cos", "tan" } do
        local a, b = hex(x[name](x)), hex(y[name](y))
        for i = 1, #a do
          if i ~= 1500 and a[i] ~= b[i] then
            error(("%s at %d: %s alone, %s beside %s"):format(name, i, a[i], b[i], special))
          end
        end
      end
      for _, name in ipairs { "sin", "cos" } do   -- the gradients take the same blocks
        local xa, ya = x:clone():requires_grad_(), y:clone():requires_grad_()
        xa[name](xa):sum():backward()
        ya[name](ya):sum():backward()
        local a, b = hex(xa.grad), hex(ya.grad)
        for i = 1, #a do
          if i ~= 1500 and a[i] ~= b[i] then error(name .. " gradient at " .. i) end
        end
      end
    end
  end)

  it("propagates NaN through maximum and minimum", function()
    local a, b = f64({ nan, 1, 2 }), f64({ 1, nan, 3 })
    close(a:maximum(b), { nan, nan, 3 })
    close(a:minimum(b), { nan, nan, 2 })
  end)

  it("does integer arithmetic exactly and wraps on overflow", function()
    local a = i64({ 7, -7, 3 })
    close(a + 1, { 8, -6, 4 })
    close(a * i64({ 2, 3, -1 }), { 14, -21, -3 })
    close(a ^ 2, { 49, 49, 9 })
    assert.are.equal("int64", (a ^ 2).dtype)
    close(i64({ 2 }) ^ i64({ 10 }), { 1024 })
    local big = i64({ math.maxinteger })
    assert.are.equal(math.mininteger, (big + 1):item())
    assert.are.equal(math.mininteger, i64({ math.mininteger }):abs():item())
    -- integer powers with a negative tensor exponent follow PyTorch (0 except for +-1)
    close(i64({ 1, -1, 2 }) ^ i64({ -1, -1, -1 }), { 1, -1, 0 })
  end)
end)

describe("special values and sizes", function()
  it("keeps inf/nan right on the vectorised paths", function()
    local v = { 1 / 0, -1 / 0, 0 / 0, 100, -100, 0, 1e-30, -1e-30, 50, -50 }
    local x = f32(v)
    close(x:sigmoid(), { 1, 0, nan, 1, 0, 0.5, 0.5, 0.5, 1, 1.9287498479639178e-22 }, 1e-6)
    close(x:tanh(), { 1, -1, nan, 1, -1, 0, 1e-30, -1e-30, 1, -1 }, 1e-6)
    close(x:exp():narrow(1, 1, 6), { inf, 0, nan, inf, 3.7200759760208361e-44, 1 }, 1e-6)
    close(f64(v):gelu(), { inf, nan, nan, 100, -0, 0, 5e-31, -5e-31, 50, -0 }, 1e-12)
    close(f32({ -3 }):gelu(), { -0.0040496940950784 }, 1e-5)     -- no cancellation in the tail
    close(f64(v):silu():narrow(1, 4, 3), { 100, -100 * 3.7200759760208361e-44, 0 }, 1e-9)
  end)

  it("handles zero-dim and empty tensors", function()
    local s = lt.tensor(2.0) + lt.tensor(3.0)
    assert.are.equal(0, s:dim())
    assert.are.equal(5, s:item())
    assert.are.equal(0, (lt.ones(0) + lt.ones(0)):numel())
    assert.are.same({ 0, 3 }, shape(lt.ones(0, 3) * lt.ones(3)))
    assert.are.equal(0, lt.ones(0):exp():numel())
    assert.are.same({ 2, 3 }, shape(lt.tensor(1.0) + lt.ones(2, 3)))
    assert.is_true(lt.equal(lt.ones(0), lt.ones(0)))
  end)

  it("keeps integers beyond 2^53 exact", function()
    local big = (1 << 53) + 1
    local x = i64({ 1, 2 })
    assert.are.equal(big + 1, (x + big):tolist()[1])
    assert.are.equal(big - 2, (big - x):tolist()[2])
    assert.is_true(i64({ math.maxinteger }):eq(math.maxinteger):item())
    assert.is_false(i64({ math.maxinteger }):eq(math.maxinteger - 1):item())
    x:add_(big)
    assert.are.equal(big + 2, x:tolist()[2])
    assert.are.equal("float32", (f32({ 1 }) + big).dtype)
  end)
end)

describe("comparisons and logical ops", function()
  it("compare tensors and numbers and return bool tensors", function()
    local a, b = f32({ 1, 2, 3 }), f32({ 3, 2, 1 })
    local cases = {
      { "eq", { 0, 1, 0 } }, { "ne", { 1, 0, 1 } }, { "lt", { 1, 0, 0 } },
      { "le", { 1, 1, 0 } }, { "gt", { 0, 0, 1 } }, { "ge", { 0, 1, 1 } },
    }
    for _, c in ipairs(cases) do
      local r = a[c[1]](a, b)
      assert.are.equal("bool", r.dtype)
      close(r, c[2])
      close(lt[c[1]](a, b), c[2])
    end
    close(a:gt(1.5), { 0, 1, 1 })
    close(a:eq(2), { 0, 1, 0 })
    close(lt.lt(2, a), { 0, 0, 1 })   -- 2 < a
    close(i64({ 1, 2 }):lt(1.5), { 1, 0 })
    assert.are.same({ true, false }, i64({ 1, 2 }):lt(1.5):tolist())
  end)

  it("broadcast comparisons and treat NaN as unequal", function()
    local r = f64({ { 1 }, { 2 } }):lt(f64({ 1, 2, 3 }))
    assert.are.same({ 2, 3 }, shape(r))
    close(r, { 0, 1, 1, 0, 0, 1 })
    close(f64({ nan }):eq(f64({ nan })), { 0 })
    close(f64({ nan }):ne(nan), { 1 })
  end)

  it("compares float32 with a number in float32", function()
    -- 0.1 rounds to the same float as the stored element, as in PyTorch
    close(f32({ 0.1 }):eq(0.1), { 1 })
  end)

  it("does logical and/or/xor/not on any dtype", function()
    local p, q = lt.tensor({ true, true, false, false }), lt.tensor({ true, false, true, false })
    close(p:logical_and(q), { 1, 0, 0, 0 })
    close(p:logical_or(q), { 1, 1, 1, 0 })
    close(p:logical_xor(q), { 0, 1, 1, 0 })
    close(p:logical_not(), { 0, 0, 1, 1 })
    local f = f32({ 0, 2, nan, -1 })
    close(f:logical_and(i64({ 1, 1, 1, 0 })), { 0, 1, 1, 0 })
    close(lt.logical_not(f), { 1, 0, 0, 0 })
    assert.are.equal("bool", f:logical_or(0).dtype)
    close(p:logical_and(true), { 1, 1, 0, 0 })
    close(p:logical_or(false), { 1, 1, 0, 0 })
  end)

  it("isnan and isfinite", function()
    local x = f64({ 1, nan, inf, -inf })
    close(x:isnan(), { 0, 1, 0, 0 })
    close(lt.isfinite(x), { 1, 0, 0, 0 })
    close(i64({ 1, 2 }):isnan(), { 0, 0 })
    close(i64({ 1, 2 }):isfinite(), { 1, 1 })
    assert.are.equal("bool", x:isnan().dtype)
  end)

  it("bool arithmetic is logical like PyTorch", function()
    local p, q = lt.tensor({ true, false }), lt.tensor({ true, true })
    local s = p + q
    assert.are.equal("bool", s.dtype)
    close(s, { 1, 1 })
    close(p * q, { 1, 0 })
    assert.are.equal("int64", (p + 1).dtype)
    close(p + 1, { 2, 1 })
    assert.are.equal("float32", (p / q).dtype)
  end)
end)

describe("equal, allclose and isclose", function()
  it("equal needs the same shape and values", function()
    assert.is_true(lt.equal(f32({ 1, 2 }), f32({ 1, 2 })))
    assert.is_true(f32({ 1, 2 }):equal(f64({ 1, 2 })))
    assert.is_false(lt.equal(f32({ 1, 2 }), f32({ 1, 3 })))
    assert.is_false(lt.equal(f32({ 1, 2 }), f32({ { 1, 2 } })))
    assert.is_false(lt.equal(f32({ nan }), f32({ nan })))
  end)

  it("allclose uses rtol/atol like PyTorch", function()
    assert.is_true(lt.allclose(f64({ 1, 2 }), f64({ 1 + 1e-6, 2 })))
    assert.is_false(lt.allclose(f64({ 1, 2 }), f64({ 1.001, 2 })))
    assert.is_true(lt.allclose(f64({ 1 }), f64({ 1.001 }), 1e-2))
    assert.is_true(lt.allclose(f64({ 0 }), f64({ 1e-3 }), 0, 1e-2))
    assert.is_true(f64({ 1 }):allclose(f64({ 1.001 }), { rtol = 1e-2 }))
    assert.is_false(lt.allclose(f64({ nan }), f64({ nan })))
    assert.is_true(lt.allclose(f64({ nan }), f64({ nan }), { equal_nan = true }))
    assert.is_true(lt.allclose(f64({ inf }), f64({ inf })))
    assert.is_false(lt.allclose(f64({ inf }), f64({ -inf })))
    assert.is_true(lt.allclose(f64({ { 1, 1 } }), f64({ 1 })))   -- broadcasts
  end)

  it("isclose returns a bool tensor", function()
    local r = lt.isclose(f32({ 1, 2, 3 }), f32({ 1, 2.0000001, 4 }))
    assert.are.equal("bool", r.dtype)
    close(r, { 1, 1, 0 })
    close(i64({ 1, 2 }):isclose(i64({ 1, 3 })), { 1, 0 })
  end)
end)

describe("clamp", function()
  it("clamps with min, max or both", function()
    local x = f64({ -2, -0.5, 0.5, 2 })
    close(x:clamp(-1, 1), { -1, -0.5, 0.5, 1 })
    close(x:clamp(0), { 0, 0, 0.5, 2 })
    close(x:clamp(nil, 0), { -2, -0.5, 0, 0 })
    close(x:clamp({ min = -1 }), { -1, -0.5, 0.5, 2 })
    close(x:clamp({ max = 1 }), { -2, -0.5, 0.5, 1 })
    close(lt.clip(x, -1, 1), { -1, -0.5, 0.5, 1 })
    close(lt.clamp(x, -1, 1), { -1, -0.5, 0.5, 1 })
  end)

  it("follows PyTorch on NaN and on min > max", function()
    close(f64({ nan, 1 }):clamp(0, 2), { nan, 1 })
    close(f64({ 1, 2 }):clamp(nan), { nan, nan })
    close(f64({ -5, 0, 5 }):clamp(3, 1), { 1, 1, 1 })
  end)

  it("keeps integer tensors integer unless a bound is fractional", function()
    local i = i64({ -3, 1, 5 })
    local r = i:clamp(0, 2)
    assert.are.equal("int64", r.dtype)
    close(r, { 0, 1, 2 })
    local r2 = i:clamp(0.5)
    assert.are.equal("float32", r2.dtype)
    close(r2, { 0.5, 1, 5 })
  end)

  it("takes tensor bounds", function()
    local x = f64({ -2, 0, 2 })
    close(x:clamp(f64({ -1, 1, 1 }), f64({ 0, 2, 1.5 })), { -1, 1, 1.5 })
    close(x:clamp(nil, f64({ 0 })), { -2, 0, 0 })
  end)

  it("clamps in place", function()
    local x = f64({ -2, 0, 2 })
    assert.are.equal(x, x:clamp_(-1, 1))
    close(x, { -1, 0, 1 })
    x:clip_({ min = 0.5 })
    close(x, { 0.5, 0.5, 1 })
  end)

  it("rejects missing or bad bounds", function()
    errors_with(function() return f64({ 1 }):clamp() end, "clamp", "min", "max")
    errors_with(function() return f64({ 1 }):clamp("a") end, "clamp", "min")
    errors_with(function() return i64({ 1 }):clamp_(0.5) end, "clamp_", "float32", "int64")
  end)
end)

describe("where", function()
  it("selects elementwise with broadcasting", function()
    local c = lt.tensor({ true, false, true })
    close(lt.where(c, f32({ 1, 2, 3 }), f32({ 10, 20, 30 })), { 1, 20, 3 })
    local r = lt.where(lt.tensor({ { true }, { false } }), f64({ 1, 2 }), f64({ 9 }))
    assert.are.same({ 2, 2 }, shape(r))
    close(r, { 1, 2, 9, 9 })
  end)

  it("takes numbers and promotes like PyTorch", function()
    local c = lt.tensor({ true, false })
    local r = lt.where(c, 1, 0)
    assert.are.equal("int64", r.dtype)
    close(r, { 1, 0 })
    local i = i64({ 5, 6 })
    assert.are.equal("float32", lt.where(c, 1.5, i).dtype)
    close(lt.where(c, 1.5, i), { 1.5, 6 })
    assert.are.equal("float32", lt.where(c, i, f32({ 7, 8 })).dtype)
    assert.are.equal("float64", lt.where(c, f64({ 1, 2 }), 0).dtype)
    close(lt.where(c, f64({ 1, 2 }), 0), { 1, 0 })
  end)

  it("as a method is Tensor.where(cond, other)", function()
    local x = f32({ 1, 2 })
    close(x:where(lt.tensor({ false, true }), 0), { 0, 2 })
  end)

  it("requires a bool condition", function()
    errors_with(function() return lt.where(i64({ 1 }), f32({ 1 }), f32({ 2 })) end,
      "where", "bool", "int64")
    errors_with(function() return lt.where(lt.tensor({ true, false }), f32({ 1, 2, 3 }), 0) end,
      "where", "[2]", "[3]")
  end)
end)

describe("type promotion", function()
  local dts = { "bool", "int64", "float32", "float64" }
  local function mk(dt, dims)
    local v = dt == "bool" and { true, false } or { 1, 0 }
    if dims == 0 then v = dt == "bool" and true or 1 end
    return lt.tensor(v, { dtype = dt })
  end

  it("promotes two tensors along bool < int64 < float32 < float64", function()
    for i, a in ipairs(dts) do
      for j, b in ipairs(dts) do
        local want = dts[math.max(i, j)]
        assert.are.equal(want, (mk(a) + mk(b)).dtype, a .. " + " .. b)
        assert.are.equal(want, mk(a):maximum(mk(b)).dtype, a .. " max " .. b)
        assert.are.equal("bool", mk(a):eq(mk(b)).dtype)
      end
    end
  end)

  it("lets a zero-dim tensor widen only across categories", function()
    assert.are.equal("float32", (mk("float32") + mk("float64", 0)).dtype)
    assert.are.equal("float64", (mk("int64") + mk("float64", 0)).dtype)
    assert.are.equal("int64", (mk("bool") + mk("int64", 0)).dtype)
    assert.are.equal("int64", (mk("int64") + mk("int64", 0)).dtype)
    assert.are.equal("float64", (mk("int64", 0) + mk("float64", 0)).dtype)
    assert.are.equal("float32", (mk("int64", 0) + mk("float32")).dtype)
  end)

  it("never widens a float tensor with a number", function()
    assert.are.equal("float32", (mk("float32") + 1.5).dtype)
    assert.are.equal("float32", (mk("float32") * 2).dtype)
    assert.are.equal("float64", (mk("float64") + 1).dtype)
    assert.are.equal("float32", (2.5 - mk("float32")).dtype)
  end)

  it("makes an integer tensor float32 with a float number", function()
    assert.are.equal("float32", (mk("int64") + 1.5).dtype)
    assert.are.equal("int64", (mk("int64") + 1).dtype)
    assert.are.equal("float32", (mk("int64") * 0.5).dtype)
    assert.are.equal("float32", (mk("bool") + 1.5).dtype)
    assert.are.equal("int64", (mk("bool") * 3).dtype)
  end)

  it("divides integers truly into float32", function()
    local r = i64({ 1, 2, 7 }) / i64({ 2, 2, 2 })
    assert.are.equal("float32", r.dtype)
    close(r, { 0.5, 1, 3.5 })
    assert.are.equal("float32", (i64({ 3 }) / 2).dtype)
    close(i64({ 3 }) / 2, { 1.5 })
    assert.are.equal("float32", (6 / i64({ 4 })).dtype)
    assert.are.equal("float32", i64({ 1 }):atan2(i64({ 1 })).dtype)
  end)

  it("gives float32 for float math on integer tensors and keeps int where PyTorch does", function()
    local i = i64({ 1, 4 })
    for _, op in ipairs({ "exp", "log", "sqrt", "sigmoid", "tanh", "sin", "rsqrt", "reciprocal",
                          "log1p", "expm1", "log2", "erf", "cos", "tan", "atan" }) do
      assert.are.equal("float32", i[op](i).dtype, op)
    end
    close(i:sqrt(), { 1, 2 })
    for _, op in ipairs({ "neg", "abs", "sign", "relu", "square", "floor", "ceil", "round", "trunc" }) do
      assert.are.equal("int64", i[op](i).dtype, op)
    end
    close(i64({ -3, 2 }):relu(), { 0, 2 })
    close(i64({ -3, 2 }):abs(), { 3, 2 })
    close(i64({ -3, 2 }):sign(), { -1, 1 })
    assert.are.equal("int64", lt.tensor({ true, false }):square().dtype)
    assert.are.equal("float32", lt.tensor({ true, false }):exp().dtype)
    assert.are.equal("bool", lt.tensor({ true, false }):sign().dtype)
  end)
end)

describe("non-contiguous inputs", function()
  local base = f64({ { 1, 2, 3 }, { 4, 5, 6 } })

  it("binary ops on transposed, narrowed and expanded views", function()
    local t = base:t()                              -- 3x2, strides (1, 3)
    assert.is_false(t:is_contiguous())
    close(t + t:contiguous(), { 2, 8, 4, 10, 6, 12 })
    close(t * f64({ 10, 100 }), { 10, 400, 20, 500, 30, 600 })
    local n = base:narrow(2, 2, 2)                  -- {{2,3},{5,6}}
    close(n - 1, { 1, 2, 4, 5 })
    close(n * n:t(), { 4, 15, 15, 36 })
    local e = f64({ 1, 2, 3 }):expand(2, 3)
    close(e + base, { 2, 4, 6, 5, 7, 9 })
    close(lt.maximum(e, base), { 1, 2, 3, 4, 5, 6 })
  end)

  it("unary ops and comparisons on views", function()
    local t = base:t()
    close(t:exp(), { math.exp(1), math.exp(4), math.exp(2), math.exp(5), math.exp(3), math.exp(6) })
    close(t:neg(), { -1, -4, -2, -5, -3, -6 })
    close(t:gt(2.5), { 0, 1, 0, 1, 1, 1 })
    close(base:narrow(2, 3, 1):sqrt(), { math.sqrt(3), math.sqrt(6) })
    close(t:clamp(2, 5), { 2, 4, 2, 5, 3, 5 })
    close(lt.where(t:gt(3), t, 0), { 0, 4, 0, 5, 0, 6 })
  end)

  it("mixed dtypes and views together", function()
    local t = base:t():float()
    local i = i64({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    close(t:t():contiguous():t() + i, { 2, 6, 5, 9, 8, 12 })
    local r = i64({ { 1, 2, 3 }, { 4, 5, 6 } }):t() / 2
    assert.are.equal("float32", r.dtype)
    close(r, { 0.5, 2, 1, 2.5, 1.5, 3 })
  end)

  it("in-place ops into a view write through to the base", function()
    local b = base:clone()
    local v = b:narrow(2, 2, 2)
    v:mul_(10)
    close(b, { 1, 20, 30, 4, 50, 60 })
    b:t():add_(f64({ 1, 2 }))
    close(b, { 2, 21, 31, 6, 52, 62 })
    b:narrow(1, 1, 1):exp_()
    close(b:narrow(1, 2, 1), { 6, 52, 62 })
  end)

  it("in-place with an operand overlapping the destination", function()
    local x = f64({ { 1, 2 }, { 3, 4 } })
    x:add_(x:t())
    close(x, { 2, 5, 5, 8 })
    local y = f64({ 1, 2, 3 })
    y:mul_(y)
    close(y, { 1, 4, 9 })
    -- copy_ reads an overlapping source as it was, at every size (large ones take the blocked
    -- transposed copy)
    for _, n in ipairs { 2, 100 } do
      local z = lt.randn(n, n)
      local want = z:t():contiguous()
      z:copy_(z:t())
      assert.is_true(z:eq(want):all():item(), tostring(n))
    end
    local r = lt.randn(100, 10)   -- rows 26.. are written before they are read
    local want = r:narrow(1, 1, 50):clone()
    r:narrow(1, 26, 50):copy_(r:narrow(1, 1, 50))
    assert.is_true(r:narrow(1, 26, 50):eq(want):all():item())
  end)
end)

describe("large tensors (parallel path)", function()
  it("matches the small-path results", function()
    local n = 100003
    local a = lt.arange(n, { dtype = "float64" })
    local b = a * 2 + 1
    assert.are.equal(b:narrow(1, n, 1):item(), 2 * (n - 1) + 1)
    assert.are.equal(b:narrow(1, 50000, 1):item(), 2 * 49999 + 1)
    local m = lt.arange(4 * 40000, { dtype = "float32" }):reshape(40000, 4)
    local s = m:t() + m:t()                          -- strided, multi-row
    assert.are.equal(2 * 159999, s:narrow(2, 40000, 1):narrow(1, 4, 1):item())
    local c = m:gt(80000)
    assert.are.equal("bool", c.dtype)
    assert.is_true(c:narrow(1, 40000, 1):narrow(2, 4, 1):item())
    local e = lt.ones(n, { dtype = "float64" }):exp()
    close(e:narrow(1, n - 2, 3), { math.exp(1), math.exp(1), math.exp(1) })
    local x = lt.zeros(n, { dtype = "float32" })
    x:add_(1.5)
    assert.are.equal(1.5, x:narrow(1, n, 1):item())
  end)
end)

-- An operand that runs across memory along the output's rows (a transposed input) is read in
-- blocks of rows copied onto the stack, and a strided row goes through blocks that the vector
-- loops then read: the bits must be those of the same op on a contiguous copy, whatever the
-- thread count, the dtype, the shape's remainders against the blocks (16 rows, 64 columns) and
-- the op's arity.
describe("transposed inputs", function()
  local function same_bits(got, want)
    assert.are.same(want:size(), got:size())
    assert.are.equal(want.dtype, got.dtype)
    local g, w = flat(got), flat(want)
    assert.are.equal(#w, #g)
    local bad = 0
    for i = 1, #w do
      if not (g[i] == w[i] or (g[i] ~= g[i] and w[i] ~= w[i])) then bad = bad + 1 end
    end
    assert.are.equal(0, bad)
  end
  -- (30 x 200: rows of 30, too short for blocks, take the strided loops; 300 x 257 is large
  -- enough to be cut over the threads)
  local shapes = { { 200, 131 }, { 3, 70, 97 }, { 17, 64 }, { 30, 200 }, { 300, 257 } }
  local before = lt.get_num_threads()
  after_each(function() lt.set_num_threads(before) end)
  for _, sz in ipairs(shapes) do
    local name = table.concat(sz, " x ")
    it("unary, binary, ternary and converting ops on " .. name, function()
      for _, threads in ipairs { 1, 2 } do
        lt.set_num_threads(threads)
        lt.manual_seed(11)
        local nd = #sz
        local a = lt.randn(table.unpack(sz)):transpose(nd - 1, nd)   -- a transposed view
        local b = lt.randn(table.unpack(sz)):transpose(nd - 1, nd)
        local c = lt.randn(a:size())                                -- contiguous
        local ac, bc = a:contiguous(), b:contiguous()
        assert.is_false(a:is_contiguous())
        same_bits(a:exp(), ac:exp())
        same_bits(a:relu(), ac:relu())
        same_bits(a:gelu(), ac:gelu())
        same_bits(a:tanh(), ac:tanh())
        same_bits(a + c, ac + c)
        same_bits(a * b, ac * bc)
        same_bits(c - a * 3, c - ac * 3)
        same_bits(lt.where(a:gt(0), b, c), lt.where(ac:gt(0), bc, c))
        same_bits(a:gt(b), ac:gt(bc))
        same_bits(a:double() + c, ac:double() + c)
        same_bits((a * 100):long() + 1, (ac * 100):long() + 1)
        same_bits(a:double():exp(), ac:double():exp())
        same_bits(a:clamp(-0.5, 0.5), ac:clamp(-0.5, 0.5))
        -- transposed bool and int64 inputs (one- and eight-byte blocks)
        local m = lt.randn(table.unpack(sz)):gt(0):transpose(nd - 1, nd)
        same_bits(lt.where(m, c, a), lt.where(m:contiguous(), c, ac))
        same_bits(m:logical_not(), m:contiguous():logical_not())
        local q = lt.randint(-50, 50, sz):transpose(nd - 1, nd)
        same_bits(q * 3 + 1, q:contiguous() * 3 + 1)
        same_bits(q:float():exp(), q:contiguous():float():exp())
        -- in place into a contiguous output, and into a transposed one
        local o = c:clone()
        o:add_(a)
        same_bits(o, c + ac)
        local t = lt.randn(table.unpack(sz)):transpose(nd - 1, nd)
        local tc = t:contiguous()
        t:mul_(c)
        same_bits(t, tc * c)
        local u = lt.randn(table.unpack(sz)):transpose(nd - 1, nd)
        local uc = u:contiguous()
        u:exp_()
        same_bits(u, uc:exp())
      end
    end)
  end
  it("gives a transposed input the gradient of its contiguous copy", function()
    lt.manual_seed(5)
    local x = lt.randn(70, 90, { requires_grad = true })
    local w = lt.randn(90, 70)
    local g1 = lt.autograd.grad((x:t():gelu() * w):sum(), { x })[1]
    local g2 = lt.autograd.grad((x:t():contiguous():gelu() * w):sum(), { x })[1]
    same_bits(g1, g2)
  end)
end)

describe("in-place semantics", function()
  it("returns the tensor itself and writes in its dtype", function()
    local x = f32({ 1, 2, 3 })
    assert.are.equal(x, x:add_(1))
    close(x, { 2, 3, 4 })
    assert.are.equal(x, x:mul_(f64({ 2, 2, 2 })))
    assert.are.equal("float32", x.dtype)
    close(x, { 4, 6, 8 })
    x:div_(4):neg_()
    close(x, { -1, -1.5, -2 })
    x:abs_():sqrt_():pow_(2)
    close(x, { 1, 1.5, 2 }, 1e-6)
    x:sub_(1):relu_():sigmoid_()
    close(x, { 0.5, 1 / (1 + math.exp(-0.5)), 1 / (1 + math.exp(-1)) }, 1e-6)
    local y = f32({ 2, 3 })
    y:eq_(2)
    assert.are.equal("float32", y.dtype)
    close(y, { 1, 0 })
  end)

  it("every unary in-place form matches the out-of-place op", function()
    local names = { "neg", "abs", "sign", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos",
                    "tanh", "sigmoid", "relu", "reciprocal", "square", "floor", "ceil", "round",
                    "trunc", "expm1", "log2", "erf", "tan", "asin", "acos", "atan", "gelu",
                    "silu", "leaky_relu", "elu" }
    for _, op in ipairs(names) do
      local x = f64({ 0.1, 0.5, 0.9 })
      local want = x[op](x)
      x[op .. "_"](x)
      close(x, want)
    end
  end)

  it("bumps the version counter (saved tensors detect the write)", function()
    local x = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local y = x:exp()         -- saves its output
    y:add_(1)
    errors_with(function() y:sum():backward() end, "modified by an inplace operation")
  end)

  it("refuses a leaf that requires grad", function()
    local x = lt.tensor({ 1.0 }, { requires_grad = true })
    errors_with(function() x:add_(1) end, "add_", "leaf")
    errors_with(function() x:exp_() end, "exp_", "leaf")
    errors_with(function() x:clamp_(0) end, "clamp_", "leaf")
    lt.no_grad(function() x:add_(1) end)
    close(x, { 2 })
  end)

  it("checks shape and dtype of the destination", function()
    errors_with(function() lt.ones(2, 1):add_(lt.ones(2, 3)) end, "add_", "[2, 1]", "[2, 3]")
    errors_with(function() i64({ 1 }):add_(f32({ 1.5 })) end, "add_", "float32", "int64")
    errors_with(function() i64({ 1 }):div_(2) end, "div_", "float32", "int64")
    errors_with(function() i64({ 1 }):exp_() end, "exp_", "float32", "int64")
    errors_with(function() lt.tensor({ true }):add_(1) end, "add_", "int64", "bool")
    errors_with(function() lt.ones(3):expand(2, 3):add_(1) end, "add_", "single memory location")
    local x = f32({ 1, 2 })
    pcall(function() x:add_(lt.ones(3)) end)
    close(x, { 1, 2 })   -- a failed call leaves the tensor untouched
  end)
end)

describe("errors", function()
  it("names the op and both shapes when shapes do not broadcast", function()
    errors_with(function() return lt.ones(2, 3) + lt.ones(3, 2) end, "add", "[2, 3]", "[3, 2]")
    errors_with(function() return lt.ones(4):mul(lt.ones(3)) end, "mul", "[4]", "[3]")
    errors_with(function() return lt.ones(2, 3):eq(lt.ones(2)) end, "eq", "[2, 3]", "[2]")
    errors_with(function() return lt.maximum(lt.ones(2), lt.ones(5)) end, "maximum", "[2]", "[5]")
  end)

  it("rejects ops PyTorch rejects", function()
    local b = lt.tensor({ true, false })
    errors_with(function() return b - b end, "sub", "bool")
    errors_with(function() return -b end, "neg", "bool")
    errors_with(function() return b:abs() end, "abs", "bool")
    errors_with(function() return b ^ b end, "pow", "bool")
    errors_with(function() return i64({ 2 }) ^ -1 end, "pow", "negative")
    errors_with(function() return i64({ 2 }):fmod(0) end, "fmod", "ZeroDivisionError")
    errors_with(function() return i64({ 2 }):remainder(i64({ 0 })) end, "remainder", "ZeroDivision")
    errors_with(function() return i64({ 2 }):gelu() end, "gelu", "int64")
    errors_with(function() return i64({ 2 }):silu() end, "silu", "int64")
    errors_with(function() return f32({ 1 }):gelu("fast") end, "gelu", "tanh")
  end)

  it("rejects non-tensor operands", function()
    errors_with(function() return lt.add("x", lt.ones(1)) end, "add")
    errors_with(function() return lt.ones(1) + {} end, "add")
    errors_with(function() return lt.exp(3) end, "exp")
    errors_with(function() return lt.isclose(f32({ 1 }), f32({ 1 }), -1) end, "isclose", "rtol")
    errors_with(function() return lt.allclose(f32({ 1, 2 }), f32({ 1, 2, 3 })) end, "allclose", "[2]", "[3]")
  end)
end)
