-- The autograd engine: accumulation, retain_graph, grad modes, detach, version counters,
-- hooks, custom Functions, autograd.grad and the errors of each misuse.
local lt = require "lantern"

local function close(a, b, tol)
  tol = tol or 1e-6
  local x, y = a:double():reshape(-1):tolist(), b
  if lt.is_tensor(b) then y = b:double():reshape(-1):tolist() end
  assert.are.equal(#y, #x)
  for i = 1, #x do
    if math.abs(x[i] - y[i]) > tol * (1 + math.abs(y[i])) then
      error(string.format("element %d: %g vs %g", i, x[i], y[i]), 2)
    end
  end
end

describe("autograd basics", function()
  it("computes the gradient of a scalar and marks leaves", function()
    local x = lt.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
    local y = (x * x):sum()
    assert.is_true(x.is_leaf)
    assert.is_false(y.is_leaf)
    assert.is_truthy(y.grad_fn)
    y:backward()
    close(x.grad, { 2, 4, 6 })
  end)

  it("accumulates gradients across backward calls", function()
    local x = lt.tensor({ 1.0, -1.0 }, { requires_grad = true })
    for _ = 1, 3 do (x * 2):sum():backward() end
    close(x.grad, { 6, 6 })
    x.grad = nil
    assert.is_nil(x.grad)
  end)

  it("names grad_fn like PyTorch", function()
    local a = lt.randn(2, 3, { requires_grad = true })
    local b = lt.randn(3, 4)
    assert.are.equal("MmBackward0", a:mm(b).grad_fn)
    assert.are.equal("MulBackward0", (a * 2).grad_fn)
  end)

  it("requires a gradient for non-scalar outputs", function()
    local x = lt.ones(2, 2, { requires_grad = true })
    local y = x * 3
    assert.has_error(function() y:backward() end)
    local ok, err = pcall(y.backward, y)
    assert.is_false(ok)
    assert.matches("grad can be implicitly created only for scalar outputs", err)
    y:backward(lt.ones(2, 2))
    close(x.grad, { 3, 3, 3, 3 })
  end)

  it("rejects backward through a tensor that does not require grad", function()
    local y = lt.ones(2):sum()
    local ok, err = pcall(y.backward, y)
    assert.is_false(ok)
    assert.matches("does not require grad", err)
  end)

  it("frees the graph unless retain_graph, and says so when reused", function()
    local x = lt.tensor({ 0.5, 1.5 }, { requires_grad = true })
    local y = x:exp():sum()
    y:backward({ retain_graph = true })
    y:backward()
    close(x.grad, (x:detach():exp() * 2))
    local ok, err = pcall(y.backward, y)
    assert.is_false(ok)
    assert.matches("backward through the graph a second time", err)
  end)

  it("reduces broadcast gradients to each input's shape", function()
    local a = lt.ones(3, 1, { requires_grad = true })
    local b = lt.ones(4, { requires_grad = true })
    ;(a * b):sum():backward()
    assert.are.same({ 3, 1 }, a.grad:size())
    assert.are.same({ 4 }, b.grad:size())
    close(a.grad, { 4, 4, 4 })
    close(b.grad, { 3, 3, 3, 3 })
  end)

  it("uses a shared input twice", function()
    local x = lt.tensor({ 3.0 }, { requires_grad = true })
    local y = x * x + x
    y:sum():backward()
    close(x.grad, { 7 })
  end)
end)

describe("grad mode", function()
  it("no_grad records nothing and restores the mode when fn raises", function()
    local x = lt.ones(2, { requires_grad = true })
    local y = lt.no_grad(function() return x * 2 end)
    assert.is_false(y.requires_grad)
    assert.is_true(lt.is_grad_enabled())
    assert.has_error(function() lt.no_grad(function() error("boom") end) end)
    assert.is_true(lt.is_grad_enabled())
    lt.set_grad_enabled(false)
    assert.is_false((x * 2).requires_grad)
    local z = lt.enable_grad(function() return x * 2 end)
    assert.is_true(z.requires_grad)
    lt.set_grad_enabled(true)
  end)

  it("detach shares storage and stops the graph", function()
    local x = lt.ones(3, { requires_grad = true })
    local y = x * 2
    local d = y:detach()
    assert.is_false(d.requires_grad)
    d[1] = 10
    assert.are.equal(10, y[1]:item())
    local e = x * 1
    e:detach_()
    assert.is_true(e.is_leaf)
    assert.is_false(e.requires_grad)
  end)
end)

describe("in-place checks", function()
  it("refuses in-place ops on a leaf that requires grad", function()
    local x = lt.ones(2, { requires_grad = true })
    local ok, err = pcall(function() x:add_(1) end)
    assert.is_false(ok)
    assert.matches("leaf Variable that requires grad", err)
    lt.no_grad(function() x:add_(1) end)
    close(x, { 2, 2 })
  end)

  it("detects a saved tensor modified in place (version counter)", function()
    local x = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local y = x:exp()
    local z = (y * y):sum()
    y:mul_(2)
    local ok, err = pcall(z.backward, z)
    assert.is_false(ok)
    assert.matches("modified by an inplace operation", err)
    assert.matches("MulBackward0", err)
  end)

  -- expected values from PyTorch 1.13 (the same code in Python)
  it("records a write through a view on the base (CopySlices), as PyTorch", function()
    local x = lt.ones(4, { requires_grad = true })
    local h = x * 2
    local v, w = h:narrow(1, 2, 2), h:narrow(1, 3, 2)
    v:mul_(3)
    assert.are.equal("CopySlices", h.grad_fn)
    assert.are.equal("AsStridedBackward0", v.grad_fn)
    assert.are.same({ 2, 6, 6, 2 }, h:tolist())
    ;(h * x):sum():backward()
    close(x.grad, { 4, 12, 12, 4 })
    -- w was made before the write: its history is remade from the base when it is used
    x = lt.ones(4, { requires_grad = true })
    h = x * 2
    w = h:narrow(1, 3, 2)
    assert.are.equal("SliceBackward0", w.grad_fn)
    h:narrow(1, 2, 2):mul_(3)
    assert.are.equal("AsStridedBackward0", w.grad_fn)
    ;(w * w):sum():backward()
    close(x.grad, { 0, 0, 72, 8 })
    -- a write into the base itself: a view made before it sees the new history too
    x = lt.ones(4, { requires_grad = true })
    h = x * 2
    v = h:narrow(1, 2, 2)
    h:mul_(3)
    v:sum():backward()
    close(x.grad, { 0, 6, 6, 0 })
  end)

  it("a value that requires grad written into a view makes the base require grad", function()
    local y = lt.zeros(3)
    local w = lt.tensor({ 2.0 }, { requires_grad = true })
    y:narrow(1, 2, 1):copy_(w * 5)
    assert.are.equal("CopySlices", y.grad_fn)
    assert.is_true(y.requires_grad)
    y:sum():backward()
    close(w.grad, { 5 })
    -- x[i] = v and x[i][j] = v go the same way
    local m = lt.zeros(2, 3)
    local a = lt.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
    m[1] = a * a
    m[2][3] = a[1] * 10
    ;(m * lt.tensor({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })):sum():backward()
    close(a.grad, { 2 + 60, 8, 18 })
  end)

  it("a program writing through many kinds of views matches PyTorch (gen_view_writes.py)", function()
    local ref = dofile("spec/fixtures/view_writes.lua")
    local function T(t) return lt.tensor(t, { dtype = "float64" }) end
    local x = T({ { 0.5, -1.0, 2.0 }, { 1.5, 0.3, -0.7 }, { 0.2, 0.9, -1.1 }, { 1.0, -0.4, 0.6 } }):requires_grad_()
    local w = T({ 0.7, -1.3, 0.4 }):requires_grad_()
    local h = x * 1.5
    local e = h[2]:expand(3, 3)
    local c = h:t()
    h:narrow(1, 1, 2):mul_(w)
    c[3]:add_(w[1])
    h[4]:fill_(2.0)
    h[1][1] = w[2] * w[3]
    h:narrow(1, 3, 1):clamp_(-0.5, 0.5)
    h:narrow(2, 1, 2):masked_fill_(T({ { 1, 0 }, { 0, 0 }, { 0, 1 }, { 0, 0 } }):gt(0), 3.0)
    h:select(2, 2):narrow(1, 2, 2):exp_()
    local loss = (h * h):sum() + (e * e * T({ 1.0, 2.0, 3.0 })):sum() + (c * c):sum()
    loss:backward()
    local function near(got, want)
      for i = 1, #want do
        assert.is_true(math.abs(got[i] - want[i]) <= 1e-12 * (1 + math.abs(want[i])),
          string.format("element %d: %.17g vs %.17g", i, got[i], want[i]))
      end
    end
    near({ loss:item() }, { ref.loss })
    near(h:detach():reshape(-1):tolist(), ref.h)
    near(x.grad:reshape(-1):tolist(), ref.x_grad)
    near(w.grad:tolist(), ref.w_grad)
  end)

  it("a view made before its base required grad is brought up to date before any op", function()
    -- expected values from PyTorch 1.13
    local function setup()
      local b = lt.zeros(4)
      local v1, v2 = b:narrow(1, 1, 3), b:narrow(1, 2, 3)
      local w = lt.ones(3, { requires_grad = true })
      v2:add_(w)                                   -- b requires grad from here on
      return b, v1, w
    end
    local _, v1, w = setup()
    ;((v1 * 2):sum() + (w * 0):sum()):backward()
    close(w.grad, { 2, 2, 0 })
    local b
    b, v1, w = setup()
    v1:mul_(5)
    b:sum():backward()
    close(w.grad, { 5, 5, 1 })
    b, v1, w = setup()
    v1:fill_(0)
    b:sum():backward()
    close(w.grad, { 0, 0, 1 })
    -- and a view of a base that became a leaf requiring grad may not be written
    b = lt.zeros(4)
    local v = b:narrow(1, 2, 2)
    b:requires_grad_(true)
    local ok, err = pcall(function() v:mul_(2) end)
    assert.is_false(ok)
    assert.matches("a view of a leaf Variable that requires grad", err)
  end)

  it("retain_grad and hooks on a view follow it through writes", function()
    -- h = x * 2 and its view v = h[2..3]
    local function view_of_product()
      local h = lt.ones(4, { requires_grad = true }) * 2
      return h, h:narrow(1, 2, 2)
    end
    local _, v = view_of_product()
    v:retain_grad()
    v:mul_(3)                                    -- a write through v itself
    ;(v * 1):sum():backward()
    close(v.grad, { 1, 1 })
    local h
    h, v = view_of_product()
    v:retain_grad()
    h:mul_(3)                                    -- a write into the base
    ;(v * 5):sum():backward()
    close(v.grad, { 5, 5 })
    h, v = view_of_product()
    h:mul_(3)
    local seen
    v:register_hook(function(g) seen = g:clone() end)
    ;(v * 5):sum():backward()
    close(seen, { 5, 5 })
  end)

  it("a custom Function returning a view of its input is an ordinary output", function()
    local Nar = lt.autograd.Function:extend("Nar")
    function Nar.forward(_, x) return x:narrow(1, 3, 2) end
    function Nar.backward(_, g)
      local r = lt.zeros(4)
      r:narrow(1, 3, 2):copy_(g)
      return r
    end
    local x = lt.ones(4, { requires_grad = true })
    local y = Nar.apply(x)
    assert.are.equal("NarBackward", y.grad_fn)
    ;(y * 3):sum():backward()
    assert.is_true(x.is_leaf)
    close(x.grad, { 0, 0, 3, 3 })
  end)

  it("in-place writes through views pass a float64 gradcheck", function()
    local function f(x, w)
      local h = x * 1
      h:narrow(1, 2, 3):mul_(w)                -- a slice scaled by w
      h[1]:add_(h[5])                          -- a row read from and written into h
      h:select(2, 1):narrow(1, 1, 3):copy_(w)  -- part of a column overwritten (a view of a view)
      h:narrow(2, 2, 2):t():exp_()             -- a transposed view
      return h
    end
    local x = lt.randn(5, 3, { dtype = "float64", requires_grad = true })
    local w = lt.randn(3, { dtype = "float64", requires_grad = true })
    assert.is_true(lt.autograd.gradcheck(f, { x, w }))
  end)

  it("refuses the writes through views that PyTorch refuses or Lantern cannot record", function()
    local x = lt.ones(3, { requires_grad = true })
    local ok, err = pcall(function() x:narrow(1, 1, 1):mul_(3) end)
    assert.is_false(ok)
    assert.matches("a view of a leaf Variable that requires grad", err)
    local y = x * 2
    local v = lt.no_grad(function() return y:narrow(1, 1, 2) end)
    ok, err = pcall(function() v:mul_(2) end)
    assert.is_false(ok)
    assert.matches("A view was created in no_grad mode", err)
    lt.no_grad(function() y:narrow(1, 1, 1):mul_(3) end)
    assert.are.same({ 6, 2, 2 }, y:tolist())
  end)

  it("records in-place ops on non-leaves", function()
    local x = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local y = x * 1
    y:mul_(3)
    y:sum():backward()
    close(x.grad, { 3, 3 })
  end)

  it("an overwrite (fill_, zero_, random fills, copy_ of a constant) cuts the history with a zero gradient", function()
    local cases = {
      { "FillBackward2", function(h) h:fill_(7) end },
      { "ZeroBackward0", function(h) h:zero_() end },
      { "NormalBackward0", function(h) h:normal_() end },
      { "UniformBackward0", function(h) h:uniform_() end },
      { "BernoulliBackward2", function(h) h:bernoulli_(0.5) end },
      { "CopyBackwards", function(h) h:copy_(lt.tensor({ 4.0, 5.0, 6.0 })) end },
    }
    for _, c in ipairs(cases) do
      local x = lt.tensor({ 1.0, 2.0, 3.0 }, { requires_grad = true })
      local h = x * 2
      c[2](h)
      assert.are.equal(c[1], h.grad_fn)
      assert.is_true(h.requires_grad)
      ;(h * x):sum():backward()
      -- only the path through the factor x remains: d(h*x)/dx = h (the new values)
      assert.is_true(lt.allclose(x.grad, h:detach()), c[1])
    end
  end)
end)

describe("hooks and retain_grad", function()
  it("a hook's return value replaces the gradient", function()
    local x = lt.ones(2, { requires_grad = true })
    local seen
    x:register_hook(function(g) seen = g:clone(); return g * 10 end)
    ;(x * 3):sum():backward()
    close(seen, { 3, 3 })
    close(x.grad, { 30, 30 })
  end)

  it("hooks on intermediate tensors and retain_grad", function()
    local x = lt.ones(2, { requires_grad = true })
    local y = x * 2
    y:retain_grad()
    y:register_hook(function(g) return g + 1 end)
    ;(y * 5):sum():backward()
    close(y.grad, { 6, 6 })
    close(x.grad, { 12, 12 })
  end)

  it("retain_grad follows a tensor through an in-place op (the gradient of its new value)",
    function()
    local x = lt.ones(3, { requires_grad = true })
    local y = x * 2
    y:retain_grad()
    y:mul_(2)
    ;(y * 3):sum():backward()
    close(y.grad, { 3, 3, 3 })
    close(x.grad, { 12, 12, 12 })
  end)

  it("a retain_grad tensor that loses its history and dies is not written by backward",
    function()
    for _, drop in ipairs({ "detach_", "fill_", "add_" }) do
      local x = lt.randn(3, { requires_grad = true })
      local y = x * 2
      y:retain_grad()
      local z = y * 3
      if drop == "detach_" then y:detach_() elseif drop == "fill_" then y:fill_(1) else y:add_(1) end
      y = nil
      collectgarbage()
      collectgarbage()
      -- fresh tensors reuse the dead tensor's struct; none may receive a gradient
      local fresh = {}
      for i = 1, 64 do fresh[i] = lt.zeros(3) end
      z:sum():backward()
      for i = 1, 64 do assert.is_nil(fresh[i].grad, drop) end
      close(x.grad, { 6, 6, 6 })
    end
  end)

  it("a hook that runs backward through the graph it is part of gets an error", function()
    local x = lt.ones(3, { requires_grad = true })
    local a = x * 2
    local b = (a * 3):sum()
    local c = (a * 4):sum()
    local inner_ok, inner_err
    x:register_hook(function()
      if inner_ok == nil then inner_ok, inner_err = pcall(function() c:backward() end) end
    end)
    b:backward()
    assert.is_false(inner_ok)
    assert.matches("already running a backward pass", inner_err)
    close(x.grad, { 6, 6, 6 })
    -- afterwards the graph of c is intact and runs on its own
    c:backward()
    close(x.grad, { 14, 14, 14 })
  end)

  it("x[i] = v keeps v's gradient (the write is recorded on x)", function()
    local w = lt.ones({}, { requires_grad = true })
    local x = lt.zeros(3)
    x[2] = w * 5
    assert.same({ 0, 5, 0 }, x:tolist())
    x:sum():backward()
    assert.are.equal(5, w.grad:item())
    local z = lt.zeros(3)
    lt.no_grad(function() z[2] = w * 5 end)
    assert.same({ 0, 5, 0 }, z:tolist())
    assert.is_false(z.requires_grad)
  end)

  it("a tensor cannot be its own grad (it would never be freed)", function()
    local x = lt.ones(3, { requires_grad = true })
    local ok, err = pcall(function() x.grad = x end)
    assert.is_false(ok)
    assert.matches("its own grad", err)
    assert.is_nil(x.grad)
  end)

  -- AccumulateGrad keeps the incoming gradient without a copy only when nothing else can see
  -- it: a view whose base only it holds (a bias's reduced gradient, a weight's transposed
  -- product) is kept; a view of a tensor the caller holds is copied
  it("a leaf's first gradient never shares memory with a tensor the caller holds", function()
    local held = lt.arange(6):float()
    local x = lt.ones(2, 3, { requires_grad = true })
    x:register_hook(function() return held:view(2, 3) end)
    ;(x * 1):sum():backward()
    held:fill_(-1)
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, x.grad:tolist())
    -- the gradient given to backward reaches the leaf as a view of it
    local z = lt.ones(2, 3, { requires_grad = true })
    local G = lt.arange(6):float()
    z:view(6):backward(G)
    G:fill_(-1)
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, z.grad:tolist())
    local y = lt.ones(3, 2, { requires_grad = true })
    local base = lt.arange(6):float():reshape(2, 3)
    y:register_hook(function() return base:t():contiguous():view(3, 2) end)   -- base only via a view
    ;(y * 1):sum():backward()
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, y.grad:tolist())
    -- kept gradients of the common shapes are right, and later steps add into them
    local lin = lt.nn.Linear(4, 3)
    local inp = lt.randn(5, 4)
    lin(inp):sum():backward()
    assert.is_true(lt.allclose(lin.bias.grad, lt.full({ 3 }, 5.0)))
    assert.is_true(lt.allclose(lin.weight.grad, inp:sum(1):expand(3, 4), 1e-5, 1e-5))
    lin(inp):sum():backward()
    assert.is_true(lt.allclose(lin.bias.grad, lt.full({ 3 }, 10.0)))
    assert.is_true(lt.allclose(lin.weight.grad, inp:sum(1):expand(3, 4) * 2, 1e-5, 1e-5))
  end)

  it("an error in a hook surfaces as a Lua error", function()
    local x = lt.ones(2, { requires_grad = true })
    x:register_hook(function() error("hook failed") end)
    local ok, err = pcall(function() (x * 1):sum():backward() end)
    assert.is_false(ok)
    assert.matches("hook failed", err)
  end)

  it("an error object that is not a string still surfaces, and the graph stays usable", function()
    local x = lt.ones(2, { requires_grad = true })
    local fail = true
    x:register_hook(function(g) if fail then error({ code = 1 }) end return g end)
    local ok, err = pcall(function() (x * 3):sum():backward() end)
    assert.is_false(ok)
    assert.matches("hook: error object is not a string", err)
    fail = false
    ;(x * 3):sum():backward()
    assert.is_true(lt.equal(x.grad, lt.full({ 2 }, 3.0)))
  end)
end)

describe("autograd.grad", function()
  it("returns gradients without touching .grad", function()
    local x = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local y = (x * x * x):sum()
    local g = lt.autograd.grad(y, { x })
    close(g[1], { 3, 12 })
    assert.is_nil(x.grad)
  end)

  it("reports unused inputs unless allow_unused", function()
    local x = lt.ones(2, { requires_grad = true })
    local w = lt.ones(2, { requires_grad = true })
    local y = (x * 2):sum()
    local ok, err = pcall(lt.autograd.grad, y, { x, w }, { retain_graph = true })
    assert.is_false(ok)
    assert.matches("not have been used in the graph", err)
    local g = lt.autograd.grad(y, { x, w }, { allow_unused = true })
    close(g[1], { 2, 2 })
    assert.is_nil(g[2])
  end)

  it("takes grad_outputs for non-scalar outputs", function()
    local x = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local g = lt.autograd.grad(x * 3, { x }, { grad_outputs = { lt.tensor({ 1.0, 10.0 }) } })
    close(g[1], { 3, 30 })
  end)
end)

describe("autograd.Function", function()
  local Cube = lt.autograd.Function:extend("Cube")
  function Cube.forward(ctx, x)
    ctx:save_for_backward(x)
    return x * x * x
  end
  function Cube.backward(ctx, g)
    local x = ctx.saved_tensors[1]
    return g * 3 * x * x
  end

  it("runs a user op in the graph and names its node", function()
    local x = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local y = Cube.apply(x)
    assert.are.equal("CubeBackward", y.grad_fn)
    ;(y * 2):sum():backward()
    close(x.grad, { 6, 24 })
  end)

  it("passes gradcheck mixed with C ops", function()
    local x = lt.randn(3, { dtype = "float64", requires_grad = true })
    assert.is_true(lt.autograd.gradcheck(function(a) return Cube.apply(a:sin()) * 2 end, { x }))
  end)

  it("an error in a Function's backward names the Function", function()
    local Boom = lt.autograd.Function:extend("Boom")
    function Boom.forward(_, x) return x * 2 end
    function Boom.backward(_, _) error("no gradient today") end
    local x = lt.ones(3, { requires_grad = true })
    local ok, err = pcall(function() Boom.apply(x):sum():backward() end)
    assert.is_false(ok)
    assert.matches("BoomBackward: .*no gradient today", err)
    assert.is_nil(x.grad)
  end)

  it("gradcheck reports a wrong backward", function()
    local Bad = lt.autograd.Function:extend("Bad")
    function Bad.forward(_, x) return x * 2 end
    function Bad.backward(_, g) return g * 3 end
    local x = lt.randn(2, { dtype = "float64", requires_grad = true })
    local ok, err = pcall(lt.autograd.gradcheck, function(a) return Bad.apply(a) end, { x })
    assert.is_false(ok)
    assert.matches("analytic 3.*numerical 2", err)
  end)
end)

describe("gradients written over the incoming one", function()
  -- An elementwise backward (relu, tanh, sigmoid, gelu...) writes its result over the gradient
  -- it was given when nothing but the engine holds that gradient.
  it("lets a chain of elementwise backwards reuse one buffer", function()
    local n = 1 << 20
    local x = lt.randn(n, { requires_grad = true })
    -- every intermediate held here, so that no saved tensor freed during the pass hides a
    -- fresh buffer in the peak
    local a = x:gelu()
    local t = a:tanh()
    local s = t:sigmoid()
    local r = s:relu()
    local loss = r:sum()
    lt.reset_peak_memory_stats()
    local before = lt.memory_stats().in_use
    loss:backward()
    local grew = lt.memory_stats().peak_in_use - before
    -- relu's backward takes a fresh buffer (its incoming gradient is a broadcast scalar), the
    -- three after it write over it: one gradient's bytes at a time, not two
    assert.is_true(grew >= 4 * n and grew < 6 * n, "peak grew by " .. grew .. " bytes")
    local x64, t64, s64 = x:detach():double(), t:detach():double(), s:detach():double()
    local dgelu = ((x64 / math.sqrt(2)):erf() + 1) * 0.5 +
      x64 * (x64 * x64 * -0.5):exp() / math.sqrt(2 * math.pi)
    local expect = s64:gt(0):double() * s64 * (1 - s64) * (1 - t64 * t64) * dgelu
    assert.is_true((x.grad:double() - expect):abs():max():item() < 1e-5)
  end)

  it("leaves alone a gradient that a hook kept", function()
    local x = lt.randn(64, { requires_grad = true })
    local y = x:tanh()
    local kept, copy
    y:register_hook(function(g) kept = g; copy = g:clone() end)
    ;(y:relu() * 3):sum():backward()
    assert.are.equal(0, (kept - copy):abs():max():item())
    local t = x:detach():tanh()
    close(x.grad, (t:gt(0)):float() * 3 * (1 - t * t))
  end)

  it("leaves alone a gradient that autograd.grad returns", function()
    local x = lt.randn(64, { requires_grad = true })
    local y = x:tanh()
    local z = y:sigmoid()
    local g = lt.autograd.grad((z * 5):sum(), { y, x })   -- y's gradient, then tanh's backward
    local t = x:detach():tanh()
    local s = t:sigmoid()
    close(g[1], s * (1 - s) * 5)
    close(g[2], s * (1 - s) * 5 * (1 - t * t))
  end)
end)

describe("graph memory", function()
  local rss_kb = require("support").rss_kb

  -- n calls of step after 5,000 of warm-up grow the resident size by less than 20 MiB
  local function expect_flat_rss(step, n)
    for _ = 1, 5000 do step() end
    local before = rss_kb()
    for _ = 1, n do step() end
    local after = rss_kb()
    assert.is_true(after - before < 20 * 1024, string.format("RSS grew by %d KiB", after - before))
  end

  -- #nosan: AddressSanitizer's quarantine holds freed memory back, so RSS is not flat under it
  it("keeps a flat resident size over 100,000 forward+backward steps without collectgarbage #nosan", function()
    local w = lt.randn(64, 64, { requires_grad = true })
    local x = lt.randn(8, 64)
    local function step()
      local h = (x:mm(w)):tanh()
      local loss = (h * h):mean()
      loss:backward()
      w.grad = nil
    end
    expect_flat_rss(step, 100000)
  end)

  it("keeps a flat resident size over 50,000 steps that write through views #nosan", function()
    local x = lt.randn(64, { requires_grad = true })
    local function step()
      local h = x * 2
      local w = h:narrow(1, 10, 20)             -- remade from the base after the writes
      h:narrow(1, 1, 16):mul_(3)
      h[5] = x[1] * 2
      ;(w * w):sum():backward()
      x.grad = nil
    end
    expect_flat_rss(step, 50000)
  end)
end)
