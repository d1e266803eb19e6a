-- Finite-difference gradient checks (float64) of the matrix products in every rank case,
-- including broadcast batch dims, transposed / expanded inputs, addmm's beta and alpha, and
-- second use of the same tensor on both sides.
local lt = require "lantern"
local gradcheck = lt.autograd.gradcheck

local function r(...)
  return lt.randn({ ... }, { dtype = "float64", requires_grad = true })
end

describe("gradcheck of matrix products", function()
  before_each(function() lt.manual_seed(7) end)

  it("matmul in every rank case", function()
    local shapes = {
      { { 3 }, { 3 } }, { { 2, 3 }, { 3 } }, { { 3 }, { 3, 4 } }, { { 2, 3 }, { 3, 4 } },
      { { 4, 2, 3 }, { 3, 2 } }, { { 4, 2, 3 }, { 3 } }, { { 3 }, { 4, 3, 2 } },
      { { 2, 3 }, { 4, 3, 2 } }, { { 4, 2, 3 }, { 4, 3, 2 } }, { { 4, 2, 3 }, { 1, 3, 2 } },
      { { 1, 2, 3 }, { 4, 3, 2 } }, { { 2, 1, 2, 3 }, { 3, 3, 2 } }, { { 2, 3, 2, 3 }, { 3, 1 } },
      { { 1, 3 }, { 2, 3, 1 } },
    }
    for _, s in ipairs(shapes) do
      local a, b = r(table.unpack(s[1])), r(table.unpack(s[2]))
      assert.is_true(gradcheck(lt.matmul, { a, b }))
    end
  end)

  it("mm, bmm, mv, dot, outer", function()
    assert.is_true(gradcheck(lt.mm, { r(3, 4), r(4, 2) }))
    assert.is_true(gradcheck(lt.bmm, { r(2, 3, 4), r(2, 4, 3) }))
    assert.is_true(gradcheck(lt.mv, { r(3, 4), r(4) }))
    assert.is_true(gradcheck(lt.dot, { r(5), r(5) }))
    assert.is_true(gradcheck(lt.outer, { r(3), r(4) }))
  end)

  it("addmm with beta and alpha and a broadcast input", function()
    for _, ins in ipairs { { 3 }, { 2, 3 }, { 1, 3 }, { 2, 1 }, {} } do
      local f = function(i, a, b) return lt.addmm(i, a, b, { beta = 0.5, alpha = -2 }) end
      assert.is_true(gradcheck(f, { r(table.unpack(ins)), r(2, 4), r(4, 3) }))
    end
    assert.is_true(gradcheck(lt.addmm, { r(3), r(2, 4), r(4, 3) }))
  end)

  it("transposed, permuted and expanded inputs", function()
    assert.is_true(gradcheck(function(a, b) return lt.matmul(a:t(), b:t()) end,
      { r(4, 3), r(2, 4) }))
    assert.is_true(gradcheck(function(a, b) return lt.matmul(a:transpose(2, 3), b) end,
      { r(3, 4, 2), r(4, 5) }))
    assert.is_true(gradcheck(function(a, b) return lt.matmul(a:transpose(1, 2), b) end,
      { r(4, 3, 2), r(2, 5) }))
    assert.is_true(gradcheck(function(a, b) return lt.matmul(a:expand(3, 2, 4), b) end,
      { r(1, 2, 4), r(4, 2) }))
    assert.is_true(gradcheck(function(a, b) return lt.mm(a, b:expand(4, 3)) end,
      { r(2, 4), r(1, 3) }))
  end)

  it("the same tensor on both sides", function()
    assert.is_true(gradcheck(function(a) return lt.matmul(a, a) end, { r(3, 3) }))
    assert.is_true(gradcheck(function(a) return lt.matmul(a, a:t()) end, { r(2, 3) }))
    assert.is_true(gradcheck(function(a) return lt.dot(a, a) end, { r(4) }))
  end)

  it("second-order use: a product inside a longer graph", function()
    assert.is_true(gradcheck(function(x, w1, w2)
      return lt.matmul(lt.matmul(x, w1):tanh(), w2)
    end, { r(3, 4), r(4, 5), r(5, 2) }))
  end)
end)

describe("product gradients by hand", function()
  it("mm: dA = G B^T and dB = A^T G", function()
    local a = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }, { requires_grad = true })
    local b = lt.tensor({ { 5.0, 6.0 }, { 7.0, 8.0 } }, { requires_grad = true })
    lt.mm(a, b):sum():backward()
    assert.are.same({ { 11.0, 15.0 }, { 11.0, 15.0 } }, a.grad:tolist())
    assert.are.same({ { 4.0, 4.0 }, { 6.0, 6.0 } }, b.grad:tolist())
  end)

  it("a broadcast batch gradient is summed", function()
    local a = lt.ones(3, 2, 2, { requires_grad = true })
    local b = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }, { requires_grad = true })
    lt.matmul(a, b):sum():backward()
    assert.are.same({ { 6.0, 6.0 }, { 6.0, 6.0 } }, b.grad:tolist())
    local c = lt.ones(1, 2, 2, { requires_grad = true })
    lt.matmul(c, lt.ones(4, 2, 2)):sum():backward()
    assert.are.same({ { { 8.0, 8.0 }, { 8.0, 8.0 } } }, c.grad:tolist())
  end)

  it("dot and outer", function()
    local x = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local y = lt.tensor({ 3.0, 4.0 }, { requires_grad = true })
    lt.dot(x, y):backward()
    assert.are.same({ 3.0, 4.0 }, x.grad:tolist())
    assert.are.same({ 1.0, 2.0 }, y.grad:tolist())
    x.grad, y.grad = nil, nil
    lt.outer(x, y):sum():backward()
    assert.are.same({ 7.0, 7.0 }, x.grad:tolist())
    assert.are.same({ 3.0, 3.0 }, y.grad:tolist())
  end)

  it("refuses to backward after an in-place change of a saved input", function()
    local a = lt.ones(2, 2, { requires_grad = true })
    local b = lt.ones(2, 2)
    local y = lt.mm(a, b)
    b:add_(1)
    local ok, err = pcall(function() y:sum():backward() end)
    assert.is_false(ok)
    assert.matches("modified by an inplace operation", tostring(err))
  end)
end)
