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

-- the random constructors whose binding once read their tensors' data
local function on_device(t, what)
  assert.are.equal(lt.device(DEVICE) == "cpu" and "cpu" or lt.zeros(1, { device = DEVICE }).device,
    t.device, what .. ": device")
end

case("uniform", "bernoulli of a probs tensor on the device: draws, dtype, checks", function()
  for _, dt in ipairs({ "float32", "float64" }) do
    local probs = { 0, 1, 0.25, 0.5, 0.75, 1, 0, 0.9, 0.1, 0.5, 0.3, 0.6 }
    local p = lt.tensor(probs, { dtype = dt }):reshape(3, 4)
    for _, layout in ipairs({ "contiguous", "transposed" }) do
      local pl = layout == "transposed" and p:t() or p
      local pd = pl:to(DEVICE)
      -- one uniform draw per element in row-major order, 1 where it is below the probability
      local u = D.values(lt.empty(pl.shape, { dtype = "float64", device = "cpu" })
        :uniform_(0, 1, { generator = lt.Generator(21) }))
      local pv, want = D.values(pl:double()), {}
      for i = 1, #u do want[i] = u[i] < pv[i] and 1 or 0 end
      local b = lt.bernoulli(pd, { generator = lt.Generator(21) })
      on_device(b, "bernoulli " .. layout)
      check(b:cpu(), pl.shape, dt, want, 0, "bernoulli " .. dt .. " " .. layout)
    end
  end
  local many = lt.full({ 4000 }, 0.25, { device = DEVICE })
  local m = lt.bernoulli(many, { generator = lt.Generator(3) }):mean():item()
  assert.is_true(math.abs(m - 0.25) < 0.03, "frequency " .. m)
  local e = lt.bernoulli(lt.zeros({ 0, 2 }, { device = DEVICE }))
  assert.are.same({ 0, 2 }, e.shape)
  fails_with("bernoulli: probabilities must be in [0, 1], got 1.5 at flat position 3",
    lt.bernoulli, lt.tensor({ 0.5, 0, 1.5, -1 }, { device = DEVICE }))
  fails_with("at flat position 2", lt.bernoulli, lt.tensor({ 0.5, 0 / 0 }, { device = DEVICE }))
  -- bernoulli(t, p): t's shape, dtype and device
  local t = lt.zeros({ 2, 3 }, { dtype = "float64", device = DEVICE })
  local bt = lt.bernoulli(t, 1)
  on_device(bt, "bernoulli(t, p)")
  check(bt:cpu(), { 2, 3 }, "float64", { 1, 1, 1, 1, 1, 1 }, 0, "bernoulli(t, 1)")
end)

case("uniform", "multinomial of weights on the device: the host's draws, checks", function()
  local w = lt.tensor({ { 0, 2, 1, 0, 5 }, { 1, 1, 0, 3, 0 } }, { dtype = "float64" })
  for _, replacement in ipairs({ true, false }) do
    local n = replacement and 9 or 3
    local want = D.values(w:multinomial(n, replacement, { generator = lt.Generator(4) }))
    local got = w:to(DEVICE):multinomial(n, replacement, { generator = lt.Generator(4) })
    on_device(got, "multinomial")
    check(got:cpu(), { 2, n }, "int64", want, 0, "multinomial, replacement " ..
      tostring(replacement))
  end
  fails_with("multinomial: probability tensor contains either `inf`, `nan` or element < 0",
    function()
      return lt.tensor({ 1, -1 }, { dtype = "float64", device = DEVICE }):multinomial(1)
    end)
  fails_with("multinomial: invalid multinomial distribution (sum of probabilities <= 0)",
    function() return lt.zeros({ 2 }, { device = DEVICE }):multinomial(1) end)
end)

case("randperm", "randperm on the device: positions from 1, dtypes", function()
  for _, dt in ipairs({ "int64", "float32", "float64" }) do
    local r = lt.randperm(9, { device = DEVICE, dtype = dt, generator = lt.Generator(8) })
    on_device(r, "randperm " .. dt)
    local want = D.values(lt.randperm(9, { device = "cpu", generator = lt.Generator(8) }))
    check(r:cpu(), { 9 }, dt, want, 0, "randperm " .. dt)
    table.sort(want)
    for i = 1, 9 do assert.are.equal(i, want[i], "every position once") end
  end
  check(lt.randperm(0, { device = DEVICE }):cpu(), { 0 }, "int64", {}, 0, "empty")
end)

case("to_host", "lt.tensor of one-element device tensors reads them through the host", function()
  local a = lt.tensor(2.5, { device = DEVICE })
  local i = lt.tensor({ 7 }, { device = DEVICE })
  local b = lt.tensor(true, { device = DEVICE })
  check(lt.tensor({ a, 1 }, { device = "cpu" }), { 2 }, "float32", { 2.5, 1 }, 0, "float")
  check(lt.tensor({ { i, 2 } }, { device = "cpu" }), { 1, 2 }, "int64", { 7, 2 }, 0, "int")
  check(lt.tensor({ b, false }, { device = "cpu" }), { 2 }, "bool", { true, false }, 0, "bool")
end)

case("to_host", "a generator's state set from a tensor on the device", function()
  local g = lt.Generator(5)
  local state = g:get_state()
  local first = lt.rand(4, { generator = g, device = "cpu" }):tolist()
  local h = lt.Generator(99)
  h:set_state(state:to(DEVICE))
  assert.are.same(first, lt.rand(4, { generator = h, device = "cpu" }):tolist())
  local strided = lt.stack({ state, state }, 2):to(DEVICE):select(2, 1)
  h:set_state(strided)
  assert.are.same(first, lt.rand(4, { generator = h, device = "cpu" }):tolist())
end)
