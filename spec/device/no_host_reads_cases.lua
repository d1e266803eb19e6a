-- Cases for the answers the op layer needs about every element of a tensor (a divisor holding a
-- zero, equal, allclose): a reduction on the tensor's device whose one-byte answer comes to the
-- host, never a read of the tensor's data. On the mock device of spec/device_api_spec.lua they
-- run on memory that is not the host's.
local D = require "device.support"
local assert = require "luassert"   -- a required file does not see busted's assert
local lt, DEVICE, case, check = D.lt, D.DEVICE, D.case, D.check

local function fails_with(text, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error containing " .. text)
  assert.is_truthy(tostring(err):find(text, 1, true), "error '" .. tostring(err) .. "' lacks '" ..
    text .. "'")
end

local ZERO_DIV = "ZeroDivisionError (integer division by zero)"

case("reduce", "integer division by a divisor holding a zero fails; one without divides", function()
  local a = lt.tensor({ 7, -7, 9, 4 }, { device = DEVICE })
  local with_zero = lt.tensor({ 2, 3, 0, 5 }, { device = DEVICE })
  local ops = {
    { "remainder", function(x, y) return x % y end },
    { "fmod", function(x, y) return x:fmod(y) end },
    { "div", function(x, y) return x:div(y, { rounding_mode = "trunc" }) end },
    { "div", function(x, y) return x:div(y, { rounding_mode = "floor" }) end },
    { "floor_divide", function(x, y) return x // y end },
  }
  for _, o in ipairs(ops) do
    fails_with(o[1] .. ": " .. ZERO_DIV, o[2], a, with_zero)
    -- the zero found anywhere: a strided view, a 0-d divisor, a bool divisor
    fails_with(o[1] .. ": " .. ZERO_DIV, o[2], a, lt.tensor({ 1, 9, 0, 9, 1, 9, 1, 9 },
      { device = DEVICE }):reshape(4, 2):select(2, 1))
    fails_with(o[1] .. ": " .. ZERO_DIV, o[2], a, lt.tensor(0, { device = DEVICE }))
    fails_with(o[1] .. ": " .. ZERO_DIV, o[2], a, lt.tensor({ true, false, true, true },
      { device = DEVICE }))
  end
  local before = a:cpu():tolist()
  fails_with("fmod_: " .. ZERO_DIV, function() a:fmod_(with_zero) end)
  fails_with("remainder_: " .. ZERO_DIV, function() a:remainder_(with_zero) end)
  assert.are.same(before, a:cpu():tolist(), "a failed in-place call leaves its input")
  local b = lt.tensor({ 2, 3, -4, 5 }, { device = DEVICE })
  check((a % b):cpu(), { 4 }, "int64", { 1, 2, -3, 4 }, 0, "remainder")
  check(a:fmod(b):cpu(), { 4 }, "int64", { 1, -1, 1, 4 }, 0, "fmod")
  check((a // b):cpu(), { 4 }, "int64", { 3, -3, -3, 0 }, 0, "floor_divide")
  check(a:div(b, { rounding_mode = "trunc" }):cpu(), { 4 }, "int64", { 3, -2, -2, 0 }, 0, "trunc")
  local empty = lt.zeros({ 0 }, { dtype = "int64", device = DEVICE })
  check((empty // empty):cpu(), { 0 }, "int64", {}, 0, "empty divisor holds no zero")
  -- a float divisor divides in float: no error
  check((a % lt.tensor({ 2.0, 3.0, 0.0, 5.0 }, { device = DEVICE })):cpu(), { 4 }, "float32",
    { 1, 2, 0 / 0, 4 }, 0, "float remainder by zero")
end)

case("reduce", "equal and allclose answer from the device", function()
  for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
    local x = lt.tensor({ 1, 0, 3, 4, 0, 6 }):to(dt):reshape(2, 3):to(DEVICE)
    local y = x:clone()
    assert.is_true(lt.equal(x, y), "equal " .. dt)
    assert.is_true(lt.equal(x:t(), y:t()), "equal transposed " .. dt)
    assert.is_false(lt.equal(x, x:t():contiguous():reshape(2, 3)), "not equal " .. dt)
    assert.is_false(lt.equal(x, x:reshape(3, 2)), "shapes differ " .. dt)
  end
  local a = lt.tensor({ 1.0, 2.0, 3.0 }, { device = DEVICE })
  assert.is_true(lt.allclose(a, a + 1e-9), "allclose")
  assert.is_false(lt.allclose(a, a + 1e-3), "not allclose")
  assert.is_true(lt.allclose(a, a + 0.05, { atol = 0.1 }), "allclose atol")
  local n = lt.tensor({ 0 / 0, 1 }, { device = DEVICE })
  assert.is_false(lt.allclose(n, n), "NaN")
  assert.is_true(lt.allclose(n, n, { equal_nan = true }), "NaN with equal_nan")
  local e = lt.zeros({ 0 }, { device = DEVICE })
  assert.is_true(lt.equal(e, e) and lt.allclose(e, e), "empty")
end)
