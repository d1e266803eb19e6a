-- roll, movedim/moveaxis, broadcast_to, meshgrid, lerp, addcmul and addcdiv: PyTorch's values
-- and gradients (spec/fixtures/more_ops.lua, gen_more_ops.py), float64 gradchecks, errors.
local lt = require "lantern"
local support = require "spec.support"
local fx = dofile("spec/fixtures/more_ops.lua")

local function flat(t) return t:reshape(-1):tolist() end

local close_list = support.close_list

-- PyTorch's 0-based dims (a number or a list) as Lua's
local function lua_dims(d)
  if type(d) == "number" then return d >= 0 and d + 1 or d end
  local out = {}
  for i, v in ipairs(d) do out[i] = v >= 0 and v + 1 or v end
  return out
end

local x = lt.arange(24, { dtype = "float64" }):reshape(2, 3, 4)

describe("roll, movedim, broadcast_to and meshgrid against PyTorch", function()
  it("roll over every shift and dims case, and through a transposed input", function()
    for _, c in ipairs(fx.roll) do
      local what = "roll " .. tostring(c.dims)
      local dims = c.dims and lua_dims(c.dims)
      close_list(flat(x:roll(c.shifts, dims)), c.y, 0, what)
      local xt = x:transpose(1, 3):contiguous():transpose(1, 3)   -- same values, other strides
      close_list(flat(lt.roll(xt, c.shifts, dims)), c.y, 0, what .. " strided")
    end
    for _, r in ipairs({ x:roll(0, 1), x:roll(24), x:roll(0) }) do
      assert.is_true(r:equal(x))
      r[1][1][1] = 99   -- a copy, as PyTorch's, even where nothing moved
      assert.are.equal(0, x[1][1][1]:item())
    end
  end)

  it("movedim and moveaxis", function()
    for _, c in ipairs(fx.movedim) do
      local y = x:movedim(c.src, c.dst)
      assert.are.same(c.shape, y:size())
      close_list(flat(y), c.y, 0, "movedim")
      assert.is_true(lt.moveaxis(x, c.src, c.dst):equal(y))
    end
  end)

  it("broadcast_to is expand", function()
    local v = lt.tensor({ 1.0, 2.0, 3.0 })
    assert.are.same({ { 1, 2, 3 }, { 1, 2, 3 } }, v:broadcast_to(2, 3):tolist())
    assert.is_true(lt.broadcast_to(v, { 4, 3 }):equal(v:expand(4, 3)))
    support.expect_error(function() return v:broadcast_to(2, 4) end, "broadcast_to")
  end)

  it("meshgrid with ij and xy indexing, varargs or a list", function()
    local a, b, c = lt.tensor({ 1.0, 2, 3 }), lt.tensor({ 4.0, 5 }), lt.tensor({ 6.0, 7, 8, 9 })
    for _, g in ipairs(fx.meshgrid) do
      local outs = { lt.meshgrid(a, b, c, { indexing = g.indexing }) }
      local outs2 = { lt.meshgrid({ a, b, c }, { indexing = g.indexing }) }
      assert.are.equal(3, #outs)
      for i = 1, 3 do
        assert.are.same(g.shape, outs[i]:size())
        close_list(flat(outs[i]), g.y[i], 0, "meshgrid " .. g.indexing .. " " .. i)
        assert.is_true(outs2[i]:equal(outs[i]))
      end
    end
    local p, q = lt.meshgrid(a, b)   -- ij without options
    assert.are.same({ 3, 2 }, p:size())
    assert.are.same({ 3, 2 }, q:size())
  end)

  it("refuse bad arguments", function()
    support.expect_error(function() return x:roll({ 1, 2 }, 1) end, "roll",
      "shifts and dimensions must align")
    support.expect_error(function() return x:roll({ 1, 2 }) end, "roll", "without dims")
    support.expect_error(function() return x:roll(1, 4) end, "roll", "dimension 4 out of range")
    support.expect_error(function() return x:movedim({ 1, 1 }, { 2, 3 }) end, "movedim",
      "repeated dim in source")
    support.expect_error(function() return x:movedim({ 1, 2 }, 3) end, "movedim",
      "the same number of dims")
    support.expect_error(function() return lt.meshgrid(lt.zeros(2, 2)) end, "meshgrid",
      "0-d or 1-d")
    support.expect_error(function() return lt.meshgrid(lt.zeros(2), { indexing = "ji" }) end,
      "meshgrid", "indexing must be")
  end)
end)

describe("lerp, addcmul and addcdiv against PyTorch", function()
  local I = fx.inputs
  local function leaf(v, shape)
    return lt.tensor(v, { dtype = "float64" }):reshape(shape):requires_grad_()
  end

  it("values and the gradient of every input", function()
    for _, c in ipairs(fx.elementwise) do
      local s, e, t1 = leaf(I.s, { 2, 5 }), leaf(I.e, { 2, 5 }), leaf(I.t1, { 2, 5 })
      local t2, w = leaf(I.t2, { 5 }), leaf(I.w, { 2, 5 })
      local y, used
      if c.op == "lerp" then
        y = s:lerp(e, c.value == "tensor" and w or c.value)
        used = c.value == "tensor" and { s, e, w } or { s, e }
      else
        y = s[c.op](s, t1, t2, { value = c.value })
        used = { s, t1, t2 }
      end
      local what = c.op .. " " .. tostring(c.value)
      close_list(flat(y), c.y, 1e-15, what)
      y:backward(lt.tensor(I.g, { dtype = "float64" }):reshape(2, 5))
      for i, t in ipairs(used) do
        close_list(flat(t.grad), c.grads[i], 1e-14, what .. " grad " .. i)
      end
    end
  end)

  it("give the same bits recorded or not (unrecorded, they reuse their first result)", function()
    for _, dt in ipairs({ "float32", "float64" }) do
      local s, t1 = lt.randn(4, 6, { dtype = dt }), lt.randn(4, 6, { dtype = dt })
      local t2 = lt.rand(6, { dtype = dt }) + 0.5
      for _, op in ipairs({ "addcmul", "addcdiv" }) do
        for _, v in ipairs({ 1, -0.75 }) do
          local plain = lt.no_grad(function() return s[op](s, t1, t2, v) end)
          local rec = s:clone():requires_grad_()
          local y = rec[op](rec, t1, t2, v)
          assert.is_not_nil(y.grad_fn)
          assert.is_true(y:detach():equal(plain), op .. " " .. v .. " " .. dt)
          -- self broadcast up to the product's shape, and a float64 self over float32 factors
          local row = s:narrow(1, 1, 1)
          assert.are.same({ 4, 6 }, row[op](row, t1, t2, v):size())
          local wide = lt.no_grad(function() return s:double()[op](s:double(), t1, t2, v) end)
          assert.are.equal("float64", wide.dtype)
        end
      end
      for _, w in ipairs({ 0.3, -0.2, 0.5, 0.8, 1.7 }) do
        local plain = lt.no_grad(function() return s:lerp(t1, w) end)
        local rec = s:clone():requires_grad_()
        local y = rec:lerp(t1, w)
        assert.is_not_nil(y.grad_fn)
        assert.is_true(y:detach():equal(plain), "lerp " .. w .. " " .. dt)
      end
    end
  end)

  it("the in-place forms refuse what the separate in-place ops refuse", function()
    local a, b = lt.randn(2), lt.rand(2) + 0.5
    -- a view of a leaf that requires grad (made before or under no_grad): every form raises
    local w = lt.randn(4)
    local v = w:narrow(1, 1, 2)
    w:requires_grad_()
    local w2 = lt.randn(4):requires_grad_()
    local v2 = lt.no_grad(function() return w2:narrow(1, 1, 2) end)
    for _, t in ipairs({ v, v2 }) do
      local before = t:detach():clone()
      for _, f in ipairs({
        function() return t:addcmul_(a, b) end, function() return t:addcdiv_(a, b, 2) end,
        function() return t:lerp_(a, 0.3) end, function() return t:lerp_(a, b) end }) do
        support.expect_error(f, "a view of a leaf Variable that requires grad")
      end
      assert.is_true(lt.equal(before, t:detach()))
    end
  end)

  it("the in-place forms write into self; gradchecks in float64", function()
    local a, b = lt.tensor({ 1.0, 2, 3 }), lt.tensor({ 10.0, 20, 30 })
    local c = a:clone()
    assert.are.equal(c, c:addcmul_(b, b, 0.1))
    close_list(c:tolist(), { 11, 42, 93 }, 1e-6, "addcmul_")
    c = a:clone()
    c:addcdiv_(b, lt.tensor({ 2.0, 4, 5 }), { value = 2 })
    close_list(c:tolist(), { 11, 12, 15 }, 1e-6, "addcdiv_")
    c = a:clone()
    assert.are.equal(c, c:lerp_(b, 0.5))
    close_list(c:tolist(), { 5.5, 11, 16.5 }, 1e-6, "lerp_")
    local gradcheck = lt.autograd.gradcheck
    local function r(...) return lt.randn({ ... }, { dtype = "float64" }):requires_grad_() end
    local w = (lt.rand(3, 4, { dtype = "float64" }) * 1.6 - 0.3):requires_grad_()
    assert.is_true(gradcheck(function(p, q, ww) return p:lerp(q, ww) end, { r(3, 4), r(3, 4), w }))
    assert.is_true(gradcheck(function(p, q, u) return p:addcmul(q, u, { value = 0.7 }) end,
      { r(3, 4), r(3, 4), r(4) }))
    local den = (lt.rand(3, 4, { dtype = "float64" }) + 0.5):requires_grad_()
    assert.is_true(gradcheck(function(p, q, u) return p:addcdiv(q, u, -1.5) end,
      { r(3, 4), r(3, 4), den }))
    assert.is_true(gradcheck(function(p) return p:roll({ 1, -2 }, { 1, 2 }) end, { r(3, 4) }))
    support.expect_error(function()
      return lt.tensor({ 1, 2 }):addcdiv(lt.tensor({ 1, 2 }), lt.tensor({ 1, 1 }))
    end, "addcdiv", "Integer division with addcdiv is no longer supported")
    support.expect_error(function() return a:lerp(b, "x") end, "lerp", "weight")
    support.expect_error(function() return lt.tensor({ 1, 2 }):lerp(lt.tensor({ 3, 4 }), 0.5) end,
      "lerp", "expected float tensors", "int64")
    support.expect_error(function() return a:addcmul(b, b, { val = 1 }) end, "addcmul",
      "unknown option 'val'")
  end)
end)
