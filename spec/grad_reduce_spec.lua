-- Gradients of the reductions: float64 finite-difference checks of every differentiable op
-- (all dims, some dims, keepdim true/false, non-contiguous inputs), hand-computed gradients
-- for ties, zeros and indices, and PyTorch's node names.
local lt = require "lantern"
local gradcheck = lt.autograd.gradcheck

local function close(a, b, tol)
  tol = tol or 1e-9
  local x = a:double():reshape(-1):tolist()
  local y = lt.is_tensor(b) and b:double():reshape(-1):tolist() or b
  assert.are.equal(#y, #x, "element count")
  for i = 1, #x do
    if math.abs(x[i] - y[i]) > tol * (1 + math.abs(y[i])) then
      error(string.format("element %d: %.17g vs %.17g", i, x[i], y[i]), 2)
    end
  end
end

-- A float64 leaf with distinct, well separated values (no ties, no zeros).
local function input(...)
  local n = 1
  local shape = { ... }
  for _, s in ipairs(shape) do n = n * s end
  local v = {}
  for i = 1, n do v[i] = ((i * 37) % 101) / 17 - 2.9 end
  return lt.tensor(v, { dtype = "float64" }):reshape(shape):requires_grad_()
end

local function positive(...)
  local x = input(...)
  return (x:detach():abs() + 0.5):requires_grad_()
end

-- the layouts a function is checked under: contiguous and transposed (non-contiguous)
local layouts = {
  contiguous = function(x) return x end,
  transposed = function(x) return x:transpose(1, x:dim()) end,
}

describe("gradcheck", function()
  local dimsets = { {}, { 1 }, { 2 }, { 3 }, { 1, 3 }, { 2, 3 }, { 1, 2, 3 } }

  for lname, lay in pairs(layouts) do
    describe("(" .. lname .. " input)", function()
      for _, op in ipairs({ "sum", "mean", "amax", "amin", "logsumexp" }) do
        it(op .. " over all/some dims with keepdim true and false", function()
          local x = input(2, 3, 4)
          for _, d in ipairs(dimsets) do
            for _, k in ipairs({ false, true }) do
              local dims = #d > 0 and d or nil
              assert.is_true(gradcheck(function(t) return lay(t)[op](lay(t), dims, k) end, { x }))
            end
          end
        end)
      end

      it("prod over all/some dims (no zeros)", function()
        local x = positive(2, 3, 2)
        for _, d in ipairs(dimsets) do
          for _, k in ipairs({ false, true }) do
            local dims = #d > 0 and d or nil
            assert.is_true(gradcheck(function(t) return lay(t):prod(dims, k) end, { x }))
          end
        end
      end)

      it("var and std with corrections and keepdim", function()
        local x = input(3, 4, 2)
        for _, d in ipairs(dimsets) do
          for _, k in ipairs({ false, true }) do
            for _, c in ipairs({ 1, 0 }) do
              local dims = #d > 0 and d or nil
              local o = { keepdim = k, correction = c }
              assert.is_true(gradcheck(function(t) return lay(t):var(dims, o) end, { x }))
              assert.is_true(gradcheck(function(t) return lay(t):std(dims, o) end, { x }))
            end
          end
        end
      end)

      it("norm for p = 2, 1, inf, -inf, 3, 0.5 over all and some dims", function()
        local x = input(2, 3, 4)
        for _, p in ipairs({ 2, 1, math.huge, -math.huge, 3, 0.5 }) do
          for _, d in ipairs({ {}, { 1 }, { 3 }, { 1, 2 } }) do
            for _, k in ipairs({ false, true }) do
              local dims = #d > 0 and d or nil
              assert.is_true(gradcheck(function(t) return lay(t):norm(p, dims, k) end, { x }),
                "p = " .. p)
            end
          end
        end
      end)

      it("max/min along a dim (values), softmax, log_softmax, cumsum", function()
        local x = input(2, 3, 4)
        for d = 1, 3 do
          for _, k in ipairs({ false, true }) do
            assert.is_true(gradcheck(function(t) return (lay(t):max(d, k)) end, { x }))
            assert.is_true(gradcheck(function(t) return (lay(t):min(d, k)) end, { x }))
          end
          assert.is_true(gradcheck(function(t) return lay(t):softmax(d) end, { x }))
          assert.is_true(gradcheck(function(t) return lay(t):log_softmax(d) end, { x }))
          assert.is_true(gradcheck(function(t) return lay(t):cumsum(d) end, { x }))
        end
        assert.is_true(gradcheck(function(t) return lay(t):max() end, { x }))
        assert.is_true(gradcheck(function(t) return lay(t):min() end, { x }))
      end)
    end)
  end

  it("softmax weighted by a second input (softmax backward with a non-trivial grad)", function()
    local x, w = input(3, 5), input(3, 5)
    assert.is_true(gradcheck(function(a, b) return (a:softmax(2) * b):sum() end, { x, w }))
    assert.is_true(gradcheck(function(a, b) return (a:log_softmax(1) * b):sum() end, { x, w }))
  end)

  it("0-dim inputs", function()
    local s = lt.tensor(1.5, { dtype = "float64", requires_grad = true })
    assert.is_true(gradcheck(function(t) return t:sum() end, { s }))
    assert.is_true(gradcheck(function(t) return t:softmax(1) end, { s }))
    assert.is_true(gradcheck(function(t) return t:logsumexp(1) end, { s }))
  end)
end)

describe("gradients by hand", function()
  it("sum and mean spread the gradient", function()
    local x = lt.ones(2, 3, { requires_grad = true })
    x:sum(2):backward(lt.tensor({ 1.0, 2.0 }))
    close(x.grad, { 1, 1, 1, 2, 2, 2 })
    x.grad = nil
    x:mean():backward()
    close(x.grad, { 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 6 }, 1e-6)
    x.grad = nil
    x:mean(1, true):backward(lt.tensor({ { 2.0, 4.0, 6.0 } }))
    close(x.grad, { 1, 2, 3, 1, 2, 3 })
  end)

  it("full max/min and amax/amin split the gradient evenly among ties", function()
    local x = lt.tensor({ { 1.0, 3.0, 3.0 } }, { requires_grad = true })
    x:max():backward()
    close(x.grad, { 0, 0.5, 0.5 })
    x.grad = nil
    x:amax(2):backward(lt.tensor({ 6.0 }))
    close(x.grad, { 0, 3, 3 })
    local y = lt.tensor({ 2.0, 2.0, 2.0, 5.0 }, { requires_grad = true })
    y:min():backward()
    close(y.grad, { 1 / 3, 1 / 3, 1 / 3, 0 }, 1e-6)
    y.grad = nil
    y:amin():backward()
    close(y.grad, { 1 / 3, 1 / 3, 1 / 3, 0 }, 1e-6)
  end)

  it("max along a dim sends the gradient to the selected index only", function()
    local x = lt.tensor({ { 1.0, 3.0, 3.0 }, { 9.0, 0.0, 9.0 } }, { requires_grad = true })
    local v = x:max(2)
    v:backward(lt.tensor({ 10.0, 20.0 }))
    close(x.grad, { 0, 10, 0, 20, 0, 0 })
    x.grad = nil
    local m = x:min(1, true)
    m:sum():backward()
    close(x.grad, { 1, 0, 1, 0, 1, 0 })
  end)

  it("the indices of max do not require grad", function()
    local x = lt.randn(2, 3, { requires_grad = true })
    local v, i = x:max(2)
    assert.is_true(v.requires_grad)
    assert.is_false(i.requires_grad)
  end)

  it("prod handles zeros exactly", function()
    local x = lt.tensor({ { 0.0, 1.0 }, { 2.0, 0.0 } }, { requires_grad = true })
    x:prod(2):sum():backward()
    close(x.grad, { 1, 0, 0, 2 })
    local y = lt.tensor({ { 0.0, 0.0 }, { 2.0, 3.0 } }, { requires_grad = true })
    y:prod():backward()
    close(y.grad, { 0, 0, 0, 0 })
    local z = lt.tensor({ 2.0, 0.0, 4.0 }, { requires_grad = true })
    z:prod():backward()
    close(z.grad, { 0, 8, 0 })
    local w = lt.tensor({ 2.0, 3.0, 4.0 }, { requires_grad = true })
    w:prod():backward()
    close(w.grad, { 12, 8, 6 })
  end)

  it("norm at zero and inf-norm ties follow PyTorch", function()
    local z = lt.zeros(2, { requires_grad = true })
    z:norm():backward()
    close(z.grad, { 0, 0 })
    local t = lt.tensor({ 1.0, -3.0, 3.0 }, { requires_grad = true })
    t:norm(math.huge):backward()
    close(t.grad, { 0, -0.5, 0.5 })
    local h = lt.tensor({ 0.0, 1.0 }, { requires_grad = true })
    h:norm(0.5):backward()
    close(h.grad, { 0, 1 })
    local o = lt.tensor({ 3.0, -4.0 }, { requires_grad = true })
    o:norm(1):backward()
    close(o.grad, { 1, -1 })
  end)

  it("std of constant input has zero gradient", function()
    local c = lt.tensor({ 2.0, 2.0 }, { requires_grad = true })
    c:std():backward()
    close(c.grad, { 0, 0 })
  end)

  it("softmax and log_softmax backward by hand", function()
    local x = lt.tensor({ 0.0, math.log(3) }, { dtype = "float64", requires_grad = true })
    local y = x:softmax(1)   -- {0.25, 0.75}
    y:backward(lt.tensor({ 1.0, 0.0 }, { dtype = "float64" }))
    -- d y1 / d x = y1 (e1 - y) = {0.25 * 0.75, -0.25 * 0.75}
    close(x.grad, { 0.1875, -0.1875 }, 1e-12)
    x.grad = nil
    x:log_softmax(1):backward(lt.tensor({ 1.0, 0.0 }, { dtype = "float64" }))
    close(x.grad, { 0.75, -0.75 }, 1e-12)
  end)

  it("float32 softmax/log_softmax backward kernels match float64", function()
    for _, sh in ipairs({ { 5, 37 }, { 3, 7, 5, 3 }, { 2, 300, 70 } }) do
      local x32 = lt.randn(sh) * 3
      local g32 = lt.randn(sh)
      for d = 1, #sh do
        for _, op in ipairs({ "softmax", "log_softmax" }) do
          local a = x32:clone():requires_grad_()
          local b = x32:double():requires_grad_()
          a[op](a, d):backward(g32)
          b[op](b, d):backward(g32:double())
          close(a.grad, b.grad, 1e-5)
          -- and with a non-contiguous incoming gradient
          local c = x32:clone():requires_grad_()
          local gt = g32:transpose(1, #sh):contiguous():transpose(1, #sh)
          c[op](c, d):backward(gt)
          close(c.grad, b.grad, 1e-5)
        end
      end
    end
  end)

  it("cumsum backward is a reversed cumsum", function()
    local x = lt.ones(4, { requires_grad = true })
    x:cumsum(1):sum():backward()
    close(x.grad, { 4, 3, 2, 1 })
  end)

  it("logsumexp backward is the softmax", function()
    local x = lt.tensor({ { 1.0, 2.0, 3.0 } }, { dtype = "float64", requires_grad = true })
    x:logsumexp(2):sum():backward()
    close(x.grad, x:detach():softmax(2), 1e-12)
  end)

  it("broadcast gradients are reduced (ltO_sum_to)", function()
    local b = lt.ones(3, { requires_grad = true })
    local a = lt.ones(4, 2, 3)
    local y = (a + b) * 2
    y:sum():backward()
    close(b.grad, { 16, 16, 16 })
    local c = lt.ones(2, 1, { requires_grad = true })
    local z = a + c
    z:sum():backward()
    close(c.grad, { 12, 12 })
  end)
end)

describe("graph nodes", function()
  it("are named like PyTorch's", function()
    local x = lt.randn(2, 3, { requires_grad = true })
    assert.are.equal("SumBackward0", x:sum().grad_fn)
    assert.are.equal("SumBackward1", x:sum(1).grad_fn)
    assert.are.equal("MeanBackward0", x:mean().grad_fn)
    assert.are.equal("MeanBackward1", x:mean(2).grad_fn)
    assert.are.equal("ProdBackward0", x:prod().grad_fn)
    assert.are.equal("ProdBackward1", x:prod(1).grad_fn)
    assert.are.equal("MaxBackward1", x:max().grad_fn)
    assert.are.equal("MaxBackward0", x:max(1).grad_fn)
    assert.are.equal("MinBackward1", x:min().grad_fn)
    assert.are.equal("MinBackward0", x:min(2).grad_fn)
    assert.are.equal("AmaxBackward0", x:amax(1).grad_fn)
    assert.are.equal("AminBackward0", x:amin().grad_fn)
    assert.are.equal("VarBackward0", x:var().grad_fn)
    assert.are.equal("StdBackward0", x:std(1).grad_fn)
    assert.are.equal("NormBackward1", x:norm().grad_fn)
    assert.are.equal("LogsumexpBackward0", x:logsumexp(2).grad_fn)
    assert.are.equal("SoftmaxBackward0", x:softmax(2).grad_fn)
    assert.are.equal("LogSoftmaxBackward0", x:log_softmax(2).grad_fn)
    assert.are.equal("CumsumBackward0", x:cumsum(2).grad_fn)
  end)

  it("are not recorded for all/any/argmax or under no_grad", function()
    local x = lt.randn(2, 3, { requires_grad = true })
    assert.is_false(x:all().requires_grad)
    assert.is_false(x:any(1).requires_grad)
    assert.is_false(x:argmax().requires_grad)
    lt.no_grad(function() assert.is_false(x:sum().requires_grad) end)
  end)

  it("detect in-place modification of a saved output", function()
    local x = lt.randn(3, { requires_grad = true })
    local y = x:softmax(1)
    y:mul_(2)
    local ok, err = pcall(function() y:sum():backward() end)
    assert.is_false(ok)
    assert.matches("modified by an inplace operation", tostring(err))
  end)
end)

-- a mean's gradient is the incoming one divided by the count, broadcast: every element holds
-- exactly g / count (float32, the same bits as dividing each element), keepdim or not
describe("mean's gradient", function()
  it("is g / count in every element", function()
    local function hex(v) return string.format("%a", v) end
    local x = lt.randn(4, 6, 7, 7):requires_grad_()
    local g = lt.randn(4, 6) * 3
    x:mean({ 3, 4 }):backward(g)
    local want = (g / 49):tolist()
    local got = x.grad
    assert.are.same({ 4, 6, 7, 7 }, got:size())
    for _, ij in ipairs { { 1, 1 }, { 2, 5 }, { 4, 6 } } do
      local plane = got[ij[1]][ij[2]]:reshape(-1):tolist()
      for k = 1, 49 do assert.are.equal(hex(want[ij[1]][ij[2]]), hex(plane[k])) end
    end
    local y = lt.randn(5, 3):requires_grad_()
    y:mean(1, true):backward(lt.tensor({ { 1.0, 2.0, 3.0 } }))
    assert.are.same({ 0.2, 0.4, 0.6 }, (y.grad[5]:double() * 1e6):round():div(1e6):tolist())
    local z = lt.randn(3):requires_grad_()
    z:mean():backward()
    assert.are.equal(hex(lt.tensor(1.0):div(3):item()), hex(z.grad[2]:item()))
  end)

  -- dense, as PyTorch's: a hook may edit it in place, and backward twice accumulates
  it("is a dense tensor a hook can edit in place", function()
    local x = lt.randn(3, 4):requires_grad_()
    local seen
    x:register_hook(function(g)
      seen = g:is_contiguous()
      g:mul_(2)
      return g
    end)
    x:mean(2):backward(lt.ones(3))
    assert.is_true(seen)
    assert.are.equal(string.format("%a", lt.tensor(2.0):div(4):item()), string.format("%a", x.grad[2][3]:item()))
    x:mean(2):backward(lt.ones(3))
    assert.are.equal(1.0, x.grad[3][4]:item())
    local y = lt.randn(2, 5):requires_grad_()
    local g = lt.autograd.grad(y:mean(), y)
    assert.is_true((g[1] or g):is_contiguous())
  end)
end)
