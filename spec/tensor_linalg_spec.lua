-- Matrix products: matmul in every rank case (PyTorch fixtures from spec/fixtures/gen_linalg.py
-- and hand computations), mm, bmm, mv, dot, outer, addmm; int64 products; non-contiguous,
-- expanded and empty operands; gradients against PyTorch; errors naming the op and shapes.
local lt = require "lantern"
local cases = require "fixtures.linalg"

-- Largest |a - b| / (1 + |b|) over nested lists (numbers at the leaves); raises on a shape
-- mismatch.
local function maxerr(a, b, path)
  path = path or ""
  if type(b) == "table" then
    assert(type(a) == "table", "expected a list at " .. path)
    assert(#a == #b, string.format("length %d vs %d at %s", #a, #b, path))
    local m = 0
    for i = 1, #b do m = math.max(m, maxerr(a[i], b[i], path .. "[" .. i .. "]")) end
    return m
  end
  assert(type(a) == "number", "expected a number at " .. path .. ", got " .. type(a))
  return math.abs(a - b) / (1 + math.abs(b))
end

local function assert_close(expected, t, tol)
  local got = type(t) == "number" and t or t:tolist()
  local e = maxerr(got, expected)
  assert(e <= (tol or 1e-12), string.format("max relative error %g > %g", e, tol or 1e-12))
end

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local function seq(...)
  local sz = { ... }
  local n = 1
  for _, s in ipairs(sz) do n = n * s end
  return lt.arange(n, { dtype = "float32" }):reshape(sz)
end

local function call(op, a, b, input, beta, alpha)
  if op == "addmm" then return lt.addmm(input, a, b, { beta = beta, alpha = alpha }) end
  return lt[op](a, b)
end

describe("products against PyTorch", function()
  for _, c in ipairs(cases) do
    it(c.name .. " (float64 values and gradients)", function()
      local a = lt.tensor(c.a, { dtype = "float64", requires_grad = true })
      local b = lt.tensor(c.b, { dtype = "float64", requires_grad = true })
      local input = c.input and lt.tensor(c.input, { dtype = "float64", requires_grad = true })
      assert.are.same(c.a_shape, a:size())
      local out = call(c.op, a, b, input, c.beta, c.alpha)
      assert.are.same(c.out_shape, out:size())
      assert.are.equal("float64", out.dtype)
      assert.are.equal(c.grad_fn, out.grad_fn)
      assert_close(c.out, out, 1e-12)
      out:backward(lt.tensor(c.g, { dtype = "float64" }))
      assert_close(c.ga, a.grad, 1e-12)
      assert_close(c.gb, b.grad, 1e-12)
      if input then assert_close(c.gi, input.grad, 1e-12) end
      assert.are.same(c.a_shape, a.grad:size())
      assert.are.same(c.b_shape, b.grad:size())
    end)

    it(c.name .. " (float32)", function()
      local a = lt.tensor(c.a, { dtype = "float32" })
      local b = lt.tensor(c.b, { dtype = "float32" })
      local input = c.input and lt.tensor(c.input, { dtype = "float32" })
      local out = call(c.op, a, b, input, c.beta, c.alpha)
      assert.are.equal("float32", out.dtype)
      assert_close(c.out, out, 1e-5)
    end)
  end
end)

describe("matmul by hand", function()
  it("multiplies in every rank case", function()
    local m = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } })
    local v = lt.tensor({ 1.0, -1.0 })
    assert.are.equal(-1.0, lt.matmul(v, lt.tensor({ 2.0, 3.0 })):item())
    assert.are.same({}, lt.matmul(v, v):size())
    assert.are.same({ -1.0, -1.0 }, lt.matmul(m, v):tolist())
    assert.are.same({ -2.0, -2.0 }, lt.matmul(v, m):tolist())
    assert.are.same({ { 7.0, 10.0 }, { 15.0, 22.0 } }, lt.matmul(m, m):tolist())
    local b = lt.stack({ m, m * 2 })   -- (2, 2, 2)
    assert.are.same({ { { 7.0, 10.0 }, { 15.0, 22.0 } }, { { 14.0, 20.0 }, { 30.0, 44.0 } } },
      lt.matmul(b, m):tolist())
    assert.are.same({ { { 7.0, 10.0 }, { 15.0, 22.0 } }, { { 14.0, 20.0 }, { 30.0, 44.0 } } },
      lt.matmul(m, b):tolist())
    assert.are.same({ { -1.0, -1.0 }, { -2.0, -2.0 } }, lt.matmul(b, v):tolist())
    assert.are.same({ { -2.0, -2.0 }, { -4.0, -4.0 } }, lt.matmul(v, b):tolist())
    assert.are.same({ { { 7.0, 10.0 }, { 15.0, 22.0 } }, { { 28.0, 40.0 }, { 60.0, 88.0 } } },
      lt.matmul(b, b):tolist())
  end)

  it("is a method too", function()
    local a, b = seq(2, 3), seq(3, 2)
    assert.are.same({ { 10.0, 13.0 }, { 28.0, 40.0 } }, a:matmul(b):tolist())
    assert.are.same({ { 10.0, 13.0 }, { 28.0, 40.0 } }, a:mm(b):tolist())
  end)

  it("multiplies int64 exactly with integer loops", function()
    local a = lt.tensor({ { 1, 2 }, { 3, 4 } })
    local r = lt.matmul(a, a)
    assert.are.equal("int64", r.dtype)
    assert.are.same({ { 7, 10 }, { 15, 22 } }, r:tolist())
    assert.are.same({ 3, 7 }, lt.matmul(a, lt.tensor({ 1, 1 })):tolist())
    assert.are.equal(11, lt.dot(lt.tensor({ 1, 2 }), lt.tensor({ 3, 4 })):item())
    local big = lt.tensor({ { 3000000000 } })
    assert.are.same({ { 9000000000000000000 } }, lt.mm(big, big):tolist())
    assert.are.same({ { 7, 10 }, { 15, 22 } }, lt.matmul(a:t():t(), a):tolist())
    assert.are.same({ { 10, 14 }, { 14, 20 } }, lt.matmul(a:t(), a):tolist())
    assert.are.same({ { 9, 8 }, { 17, 20 } },
      lt.addmm(lt.tensor({ 1, -1 }), a, a, { beta = 2, alpha = 1 }):tolist())
  end)

  it("mv, dot, outer, bmm and addmm by hand", function()
    local m = lt.tensor({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })
    assert.are.same({ 6.0, 15.0 }, lt.mv(m, lt.ones(3)):tolist())
    assert.are.equal(32.0, lt.dot(lt.tensor({ 1.0, 2.0, 3.0 }), lt.tensor({ 4.0, 5.0, 6.0 })):item())
    assert.are.same({ { 3.0, 4.0 }, { 6.0, 8.0 } },
      lt.outer(lt.tensor({ 1.0, 2.0 }), lt.tensor({ 3.0, 4.0 })):tolist())
    assert.are.same({ { 3.0, 4.0 }, { 6.0, 8.0 } },
      lt.ger(lt.tensor({ 1.0, 2.0 }), lt.tensor({ 3.0, 4.0 })):tolist())
    local x = lt.stack({ lt.eye(2), lt.eye(2) * 3 })
    local y = lt.stack({ lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }), lt.ones(2, 2) })
    assert.are.same({ { { 1.0, 2.0 }, { 3.0, 4.0 } }, { { 3.0, 3.0 }, { 3.0, 3.0 } } },
      lt.bmm(x, y):tolist())
    -- beta * input + alpha * a @ b, input broadcast along rows
    local r = lt.addmm(lt.tensor({ 1.0, 2.0 }), lt.eye(2), lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }),
      { beta = 10, alpha = 2 })
    assert.are.same({ { 12.0, 24.0 }, { 16.0, 28.0 } }, r:tolist())
    -- beta = 0 ignores nan in input, as in PyTorch
    local n = lt.addmm(lt.full({ 2, 2 }, 0 / 0), lt.eye(2), lt.eye(2), { beta = 0 })
    assert.are.same({ { 1.0, 0.0 }, { 0.0, 1.0 } }, n:tolist())
    assert.are.equal("AddmmBackward0",
      lt.addmm(lt.zeros(2), lt.eye(2), lt.ones(2, 2, { requires_grad = true })).grad_fn)
  end)

  it("handles empty operands", function()
    assert.are.same({ 0, 4 }, lt.matmul(lt.zeros(0, 3), lt.zeros(3, 4)):size())
    assert.are.same({ { 0.0, 0.0 }, { 0.0, 0.0 } }, lt.matmul(lt.zeros(2, 0), lt.zeros(0, 2)):tolist())
    assert.are.same({ 2, 0 }, lt.matmul(lt.zeros(2, 3), lt.zeros(3, 0)):size())
    assert.are.same({ 0, 2, 4 }, lt.matmul(lt.zeros(0, 2, 3), lt.zeros(3, 4)):size())
    assert.are.equal(0.0, lt.dot(lt.zeros(0), lt.zeros(0)):item())
    assert.are.same({ { 5.0, 5.0 } }, lt.addmm(lt.full({ 1, 2 }, 5.0), lt.zeros(1, 0), lt.zeros(0, 2)):tolist())
    -- the gradient of an empty inner dimension is empty, of the others zero
    local a = lt.zeros(2, 0, { requires_grad = true })
    local b = lt.zeros(0, 3, { requires_grad = true })
    lt.matmul(a, b):sum():backward()
    assert.are.same({ 2, 0 }, a.grad:size())
    assert.are.same({ 0, 3 }, b.grad:size())
  end)

  it("never reads stale values from reused memory", function()
    for _ = 1, 3 do
      local junk = lt.full({ 64, 64 }, 0 / 0)
      junk = nil
      collectgarbage()
      local r = lt.matmul(lt.ones(64, 64), lt.ones(64, 64))
      assert.are.equal(64 * 64 * 64, r:sum():item())
      local v = lt.matmul(lt.ones(64, 64), lt.ones(64))
      assert.are.equal(64 * 64, v:sum():item())
    end
  end)
end)

describe("non-contiguous operands", function()
  local function check(a, b)
    local want = lt.matmul(a:contiguous(), b:contiguous())
    local got = lt.matmul(a, b)
    assert.are.same(want:size(), got:size())
    assert_close(want:tolist(), got, 1e-6)
  end

  it("uses transposed views without copying their meaning", function()
    local a, b = lt.randn(5, 4), lt.randn(6, 5)
    check(a:t(), b:t())          -- (4,5) x (5,6), both column-major
    check(a:t(), lt.randn(5, 3)) -- column-major x row-major
    check(lt.randn(3, 5), a)     -- row-major x row-major
    check(lt.randn(7, 3, 4):transpose(2, 3), lt.randn(3, 2))   -- batch of transposed
    check(lt.randn(7, 3, 4):transpose(2, 3), lt.randn(7, 3, 5))
    check(lt.randn(2, 3), lt.randn(7, 5, 3):transpose(2, 3))
    check(lt.randn(4, 7, 3):transpose(1, 2), lt.randn(3, 5))   -- batch dim not outermost
    check(lt.randn(4, 7, 3):permute({ 2, 3, 1 }), lt.randn(7, 4, 2))
  end)

  it("accepts narrowed rows, strided vectors and expanded (stride 0) operands", function()
    local base = lt.randn(6, 10)
    check(base:narrow(2, 3, 4), lt.randn(4, 5))             -- row stride 10 > 4 columns
    check(lt.randn(3, 6), base:narrow(2, 2, 5))
    check(base:select(2, 1), lt.randn(6, 2))                 -- vector with stride 10
    check(lt.randn(2, 10), base:select(1, 2))
    check(lt.randn(1, 4):expand(3, 4), lt.randn(4, 2))       -- rows share memory
    check(lt.randn(3, 4), lt.randn(4, 1):expand(4, 5))
    check(lt.randn(3, 1):expand(3, 4), lt.randn(4, 1):expand(4, 5))
    check(lt.randn(4):expand(4), lt.randn(1):expand(4))
    check(lt.randn(2, 3, 4):expand(5, 2, 3, 4), lt.randn(4, 2))
    check(base:t():narrow(1, 2, 3), lt.randn(6, 2))
  end)

  it("gives gradients of non-contiguous inputs the right shape and values", function()
    local w = lt.randn(5, 4, { dtype = "float64", requires_grad = true })
    local x = lt.randn(3, 4, { dtype = "float64", requires_grad = true })
    local y = lt.matmul(x, w:t())
    y:sum():backward()
    -- d/dw sum(x w^T) = ones(3,5)^T x
    local want = lt.matmul(lt.ones(5, 3, { dtype = "float64" }), x:detach())
    assert_close(want:tolist(), w.grad, 1e-12)
    assert.is_true(w.grad:is_contiguous())
    assert_close(lt.matmul(lt.ones(3, 5, { dtype = "float64" }), w:detach()):tolist(), x.grad, 1e-12)
  end)
end)

describe("bad input", function()
  it("names the op and both shapes", function()
    local e = err_of(lt.matmul, lt.zeros(2, 3), lt.zeros(4, 5))
    assert.matches("matmul", e)
    assert.matches("[2, 3]", e, 1, true)
    assert.matches("[4, 5]", e, 1, true)
    e = err_of(lt.mm, lt.zeros(2, 3), lt.zeros(4, 5))
    assert.matches("mm: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5", e, 1, true)
    e = err_of(lt.mm, lt.zeros(2, 3, 1), lt.zeros(3, 5))
    assert.matches("mm: .*%[2, 3, 1%].*%[3, 5%]", e)
    e = err_of(lt.matmul, lt.zeros(3), lt.zeros(4))
    assert.matches("dot: .*%[3%].*%[4%]", e)
    e = err_of(lt.matmul, lt.zeros(2, 2, 3), lt.zeros(3, 3, 4))
    assert.matches("matmul: .*%[2, 2, 3%].*%[3, 3, 4%]", e)
    e = err_of(lt.matmul, lt.tensor(1.0), lt.zeros(3))
    assert.matches("matmul: .*at least 1%-D", e)
    e = err_of(lt.bmm, lt.zeros(2, 2, 3), lt.zeros(3, 3, 3))
    assert.matches("bmm: .*%[2, 2, 3%].*%[3, 3, 3%]", e)
    e = err_of(lt.bmm, lt.zeros(2, 3), lt.zeros(3, 3, 3))
    assert.matches("bmm: expected two 3%-D", e)
    e = err_of(lt.mv, lt.zeros(2, 3), lt.zeros(4))
    assert.matches("mv: .*%[2, 3%].*%[4%]", e)
    e = err_of(lt.dot, lt.zeros(2, 2), lt.zeros(2))
    assert.matches("dot: expected two 1%-D tensors, got shapes %[2, 2%] and %[2%]", e)
    e = err_of(lt.outer, lt.zeros(2, 2), lt.zeros(2))
    assert.matches("outer: ", e)
    e = err_of(lt.addmm, lt.zeros(3), lt.zeros(2, 3), lt.zeros(3, 4))
    assert.matches("addmm: input of shape %[3%] cannot be broadcast", e)
    e = err_of(lt.addmm, lt.zeros(4), lt.zeros(2, 3), lt.zeros(2, 4))
    assert.matches("addmm: mat1 and mat2", e)
  end)

  it("rejects mixed dtypes, bool and non-tensors", function()
    local e = err_of(lt.matmul, lt.zeros(2, 2), lt.zeros(2, 2, { dtype = "float64" }))
    assert.matches("matmul: .*same dtype.*float32.*float64", e)
    e = err_of(lt.mm, lt.zeros(2, 2, { dtype = "bool" }), lt.zeros(2, 2, { dtype = "bool" }))
    assert.matches("mm: not implemented for bool", e)
    e = err_of(lt.matmul, lt.zeros(2, 2), 3)
    assert.matches("Tensor expected", e)
    e = err_of(lt.addmm, lt.zeros(2, 2), lt.zeros(2, 2), lt.zeros(2, 2), 5)
    assert.matches("addmm: .*options table", e)
  end)

  it("leaves inputs untouched after an error", function()
    local a = lt.tensor({ { 1.0, 2.0 } })
    pcall(lt.matmul, a, lt.zeros(3, 3))
    assert.are.same({ { 1.0, 2.0 } }, a:tolist())
  end)
end)
