-- Gradients of the view, shape and indexing ops: float64 finite-difference checks for every
-- differentiable op, grad_fn names as in PyTorch, and a few gradients worked out by hand.
local lt = require "lantern"
local gradcheck = function(...) return lt.autograd.gradcheck(...) end

local function rnd(...)
  local sz = { ... }
  return lt.randn(sz, { dtype = "float64", requires_grad = true })
end

local I = function(t) return lt.tensor(t) end

describe("gradcheck of views", function()
  before_each(function() lt.manual_seed(7) end)

  it("view / reshape / flatten / unflatten", function()
    local x = rnd(2, 3, 2)
    assert.is_true(gradcheck(function(a) return a:view(3, 4) end, { x }))
    assert.is_true(gradcheck(function(a) return a:view(-1) * 2 end, { x }))
    assert.is_true(gradcheck(function(a) return a:reshape(6, 2) end, { x }))
    -- reshape that must copy (a transposed input)
    assert.is_true(gradcheck(function(a) return a:transpose(1, 3):reshape(12) end, { x }))
    assert.is_true(gradcheck(function(a) return a:flatten(2) end, { x }))
    assert.is_true(gradcheck(function(a) return a:unflatten(2, { 1, 3 }) end, { x }))
  end)

  it("squeeze / unsqueeze / transpose / t / permute", function()
    local x = rnd(1, 3, 1, 2)
    assert.is_true(gradcheck(function(a) return a:squeeze() end, { x }))
    assert.is_true(gradcheck(function(a) return a:squeeze(3) end, { x }))
    assert.is_true(gradcheck(function(a) return a:unsqueeze(-1) end, { x }))
    assert.is_true(gradcheck(function(a) return a:transpose(2, 4) end, { x }))
    assert.is_true(gradcheck(function(a) return a:permute(4, 2, 1, 3) end, { x }))
    assert.is_true(gradcheck(function(a) return a:t() end, { rnd(2, 3) }))
  end)

  it("expand (gradient summed over the broadcast dims)", function()
    local x = rnd(3, 1)
    assert.is_true(gradcheck(function(a) return a:expand(2, 3, 4) end, { x }))
    assert.is_true(gradcheck(function(a) return a:expand_as(lt.zeros(3, 5)) end, { x }))
  end)

  it("narrow / select / split / chunk / unbind", function()
    local x = rnd(4, 3)
    assert.is_true(gradcheck(function(a) return a:narrow(1, 2, 2) end, { x }))
    assert.is_true(gradcheck(function(a) return a:narrow(2, -1, 1) end, { x }))
    assert.is_true(gradcheck(function(a) return a:select(2, 3) end, { x }))
    assert.is_true(gradcheck(function(a) return a:t():select(1, 1) end, { x }))
    assert.is_true(gradcheck(function(a)
      local p = a:split({ 1, 3 })
      return p[1] * 2 + p[2]:narrow(1, 1, 1)
    end, { x }))
    assert.is_true(gradcheck(function(a)
      local c = a:chunk(2, 1)
      return c[1] - c[2] * 3
    end, { x }))
    assert.is_true(gradcheck(function(a)
      local u = a:unbind(2)
      return u[1] * u[3]
    end, { x }))
  end)
end)

describe("gradcheck of copying shape ops", function()
  before_each(function() lt.manual_seed(11) end)

  it("cat / stack over several inputs and dims", function()
    local a, b = rnd(2, 3), rnd(2, 1)
    assert.is_true(gradcheck(function(p, q) return lt.cat({ p, q, p }, 2) end, { a, b }))
    assert.is_true(gradcheck(function(p) return lt.cat({ p, p * 2 }) end, { a }))
    assert.is_true(gradcheck(function(p, q) return lt.stack({ p, q:expand(2, 3) }, 2) end,
      { a, b }))
    -- an input that does not require grad takes no part
    local c = lt.ones(2, 3, { dtype = "float64" })
    assert.is_true(gradcheck(function(p) return lt.cat({ c, p }, 1) end, { a }))
  end)

  it("repeat / tile / flip / tril / triu", function()
    local x = rnd(2, 3)
    assert.is_true(gradcheck(function(a) return a:repeat_tensor(2, 1, 2) end, { x }))
    assert.is_true(gradcheck(function(a) return a:tile(2) end, { x }))
    assert.is_true(gradcheck(function(a) return a:flip(1, 2) end, { x }))
    assert.is_true(gradcheck(function(a) return a:t():flip(2) end, { x }))
    assert.is_true(gradcheck(function(a) return a:tril() end, { rnd(3, 3) }))
    assert.is_true(gradcheck(function(a) return a:triu(1) end, { rnd(2, 3, 3) }))
  end)
end)

describe("gradcheck of indexing ops", function()
  before_each(function() lt.manual_seed(13) end)

  it("index_select and index_add (repeated indices accumulate)", function()
    local x = rnd(4, 3)
    assert.is_true(gradcheck(function(a) return a:index_select(1, I { 2, 4, 2 }) end, { x }))
    assert.is_true(gradcheck(function(a) return a:t():index_select(2, I { 1, 1 }) end, { x }))
    local src = rnd(4, 2)
    assert.is_true(gradcheck(function(a, s) return a:index_add(2, I { 3, 3 }, s) end,
      { x, src }))
  end)

  it("gather", function()
    local x = rnd(3, 4)
    assert.is_true(gradcheck(function(a) return a:gather(2, I { { 1, 1 }, { 4, 2 }, { 3, 3 } })
    end, { x }))
    assert.is_true(gradcheck(function(a) return a:gather(1, I { { 3, 1, 1, 2 } }) end, { x }))
  end)

  it("scatter (src and value) and scatter_add", function()
    local x, s = rnd(3, 4), rnd(2, 4)
    local idx = I { { 1, 2, 3, 1 }, { 2, 3, 1, 3 } }
    assert.is_true(gradcheck(function(a, b) return a:scatter(1, idx, b) end, { x, s }))
    assert.is_true(gradcheck(function(a) return a:scatter(1, idx, 0.5) end, { x }))
    assert.is_true(gradcheck(function(a, b) return a:scatter_add(1, idx, b) end, { x, s }))
    -- src larger than index: only its leading corner gets a gradient
    local big = rnd(3, 5)
    assert.is_true(gradcheck(function(a, b) return a:scatter(1, idx, b) end, { x, big }))
    assert.is_true(gradcheck(function(a, b) return a:scatter_add(1, idx, b) end, { x, big }))
  end)

  it("masked_fill and masked_select (with broadcasting)", function()
    local x = rnd(2, 3)
    local m = lt.tensor({ { true, false, true }, { false, false, true } })
    assert.is_true(gradcheck(function(a) return a:masked_fill(m, 3) end, { x }))
    assert.is_true(gradcheck(function(a) return a:masked_select(m) end, { x }))
    local row = rnd(3)
    assert.is_true(gradcheck(function(a) return a:masked_fill(m, -1) end, { row }))
    assert.is_true(gradcheck(function(a) return a:masked_select(m) end, { row }))
    -- a value tensor that requires grad
    local v = lt.tensor(0.5, { dtype = "float64", requires_grad = true })
    assert.is_true(gradcheck(function(a, b) return a:masked_fill(m, b) end, { x, v }))
  end)

  it("in-place masked_fill_ / scatter_add_ / index_add_ on non-leaf tensors", function()
    local x, s = rnd(2, 3), rnd(1, 3)
    local m = lt.tensor({ true, false, false })
    assert.is_true(gradcheck(function(a) return (a * 1):masked_fill_(m, 0) end, { x }))
    assert.is_true(gradcheck(function(a, b)
      return (a * 2):scatter_add_(1, I { { 2, 1, 2 } }, b)
    end, { x, s }))
    assert.is_true(gradcheck(function(a, b)
      return (a + 0):index_add_(1, I { 2 }, b)
    end, { x, s }))
    assert.is_true(gradcheck(function(a, b)
      return (a + 0):scatter_(1, I { { 2, 1, 2 } }, b)
    end, { x, s }))
  end)
end)

describe("gradients by hand and grad_fn names", function()
  it("names nodes as PyTorch does", function()
    local x = lt.ones(2, 2, { requires_grad = true })
    local m = lt.tensor({ { true, false }, { false, true } })
    local names = {
      ViewBackward0 = x:view(4), TransposeBackward0 = x:t(),
      PermuteBackward0 = x:permute(2, 1), ExpandBackward0 = x:expand(3, 2, 2),
      SliceBackward0 = x:narrow(1, 1, 1), SelectBackward0 = x:select(1, 1),
      SqueezeBackward0 = x:squeeze(), SqueezeBackward1 = x:squeeze(1),
      UnsqueezeBackward0 = x:unsqueeze(1), CatBackward0 = lt.cat({ x, x }),
      StackBackward0 = lt.stack({ x, x }), IndexSelectBackward0 = x:index_select(1, I { 1 }),
      GatherBackward0 = x:gather(1, I { { 1, 2 } }),
      ScatterBackward0 = x:scatter(1, I { { 1 } }, lt.ones(1, 1)),
      ScatterBackward1 = x:scatter(1, I { { 1 } }, 2),
      ScatterAddBackward0 = x:scatter_add(1, I { { 1 } }, lt.ones(1, 1)),
      IndexAddBackward0 = x:index_add(1, I { 1 }, lt.ones(1, 2)),
      MaskedFillBackward0 = x:masked_fill(m, 0), MaskedSelectBackward0 = x:masked_select(m),
      RepeatBackward0 = x:repeat_tensor(2, 1), FlipBackward0 = x:flip(1),
      TrilBackward0 = x:tril(), TriuBackward0 = x:triu(),
    }
    for name, t in pairs(names) do assert.are.equal(name, t.grad_fn) end
  end)

  it("expand sums, gather and index_select accumulate repeats", function()
    local x = lt.tensor({ { 1.0 }, { 2.0 } }, { requires_grad = true })
    x:expand(2, 3):sum():backward()
    assert.are.same({ { 3 }, { 3 } }, x.grad:tolist())
    local y = lt.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
    ;(y:gather(1, I { 3, 3, 1 }) * lt.tensor({ 1.0, 10.0, 100.0 })):sum():backward()
    assert.are.same({ 100, 0, 11 }, y.grad:tolist())
    y.grad = nil
    y:index_select(1, I { 2, 2, 2 }):sum():backward()
    assert.are.same({ 0, 3, 0 }, y.grad:tolist())
  end)

  it("cat sends each input its slice, in the input's dtype", function()
    local a = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })               -- float32
    local b = lt.tensor({ 3.0 }, { dtype = "float64", requires_grad = true })
    local c = lt.cat({ a, b })
    assert.are.equal("float64", c.dtype)
    ;(c * lt.tensor({ 1.0, 2.0, 3.0 }, { dtype = "float64" })):sum():backward()
    assert.are.equal("float32", a.grad.dtype)
    assert.are.same({ 1, 2 }, a.grad:tolist())
    assert.are.same({ 3 }, b.grad:tolist())
  end)

  it("a view's gradient reaches the base through several views", function()
    local x = lt.zeros(2, 3, { requires_grad = true })
    local w = lt.tensor({ 1.0, 2.0 })
    ;(x:t():narrow(1, 2, 2):select(1, 1) * w):sum():backward()
    assert.are.same({ { 0, 1, 0 }, { 0, 2, 0 } }, x.grad:tolist())
  end)

  it("saved indices modified in place are detected", function()
    local x = lt.ones(3, { requires_grad = true })
    local idx = I { 1, 2 }
    local y = x:gather(1, idx)
    idx:fill_(3)
    local ok, err = pcall(function() y:sum():backward() end)
    assert.is_false(ok)
    assert.matches("modified by an inplace operation", err)
  end)

  it("in-place ops on a leaf that requires grad are refused", function()
    local x = lt.ones(3, { requires_grad = true })
    local ok, err = pcall(x.masked_fill_, x, lt.tensor({ true, false, true }), 0)
    assert.is_false(ok)
    assert.matches("masked_fill_: a leaf Variable that requires grad", err)
    ok, err = pcall(x.scatter_add_, x, 1, I { 1 }, lt.ones(1))
    assert.is_false(ok)
    assert.matches("scatter_add_", err)
  end)
end)

-- Outputs and gradients against PyTorch (spec/fixtures/gen_shape.py): each case applies the
-- same op through the Lua API, with 1-based dims and 1-based index tensors.
describe("shape and indexing ops against PyTorch fixtures", function()
  local fx = require "fixtures.shape_ops"

  local function make(t, dtype)
    return lt.tensor(t.data, { dtype = dtype }):reshape(t.shape)
  end

  local function close(name, what, got, want)
    local g = got:double():reshape(-1):tolist()
    assert.are.same(want.shape, got:size(), name .. " " .. what .. " shape")
    for i = 1, #want.data do
      if math.abs(g[i] - want.data[i]) > 1e-12 * (1 + math.abs(want.data[i])) then
        error(string.format("%s %s element %d: %.17g vs %.17g", name, what, i, g[i],
          want.data[i]), 2)
      end
    end
  end

  local ops = {
    gather_dim2 = function(c, x) return x:gather(2, make(c.index, "int64")) end,
    gather_dim1 = function(c, x) return x:gather(1, make(c.index, "int64")) end,
    scatter_src = function(c, x, s) return x:scatter(1, make(c.index, "int64"), s) end,
    scatter_value = function(c, x) return x:scatter(2, make(c.index, "int64"), 2.5) end,
    scatter_add = function(c, x, s) return x:scatter_add(2, make(c.index, "int64"), s) end,
    index_select_dim1 = function(c, x) return x:index_select(1, make(c.index, "int64")) end,
    index_select_dim2 = function(c, x) return x:index_select(2, make(c.index, "int64")) end,
    index_add = function(c, x, s) return x:index_add(2, make(c.index, "int64"), s) end,
    masked_fill = function(c, x) return x:masked_fill(make(c.mask, "bool"), -2.0) end,
    masked_fill_bcast = function(c, x) return x:masked_fill(make(c.mask, "bool"), -2.0) end,
    masked_select = function(c, x) return x:masked_select(make(c.mask, "bool")) end,
    masked_select_bcast = function(c, x) return x:masked_select(make(c.mask, "bool")) end,
    ["repeat"] = function(_, x) return x:repeat_tensor(2, 1, 2) end,
    flip = function(_, x) return x:flip(1, 3) end,
    tril = function(_, x) return x:tril(-1) end,
    triu = function(_, x) return x:triu(1) end,
    cat = function(_, a, b) return lt.cat({ a, b, a }, 2) end,
    stack = function(_, a, b) return lt.stack({ a, b }, 3) end,
    expand = function(_, x) return x:expand(2, 3, 4) end,
    permute = function(_, x) return x:permute(3, 1, 2) end,
    transpose_reshape = function(_, x) return x:transpose(1, 3):reshape(4, 6) end,
    narrow_select = function(_, x) return x:narrow(2, 2, 2):select(3, -1) end,
    unflatten_squeeze = function(_, x) return x:unflatten(2, { 2, 1, 3 }):squeeze(3) end,
  }

  for _, c in ipairs(fx.cases) do
    it(c.name, function()
      local op = assert(ops[c.name], "no Lua op for fixture case " .. c.name)
      local xs = {}
      for i, t in ipairs(c.inputs) do
        xs[i] = make(t, "float64"):requires_grad_()
      end
      local out = op(c, table.unpack(xs))
      close(c.name, "output", out, c.out)
      local grads = lt.autograd.grad(out, xs, { grad_outputs = { make(c.g, "float64") },
        allow_unused = true })
      for i, want in ipairs(c.grads) do
        close(c.name, "grad " .. i, grads[i] or lt.zeros(want.shape, { dtype = "float64" }),
          want)
      end
    end)
  end

  it("one_hot", function()
    local o = make(fx.one_hot.input, "int64"):one_hot(5)
    assert.are.same(fx.one_hot.out.shape, o:size())
    assert.are.same(fx.one_hot.out.data, o:reshape(-1):tolist())
  end)
end)
