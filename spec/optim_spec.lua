-- Optimisers and schedulers replay PyTorch's trajectories (fixtures from gen_optim.py).
local lt = require "lantern"
local optim = lt.optim
local fx = dofile("spec/fixtures/optim.lua")

local function max_rel_err(t, ref)
  local a = t:double():reshape(-1):tolist()
  local flat = {}
  local function walk(x) if type(x) == "table" then for _, v in ipairs(x) do walk(v) end else flat[#flat + 1] = x end end
  walk(ref)
  local worst = 0
  for i = 1, #a do
    local e = math.abs(a[i] - flat[i]) / (1e-6 + math.abs(flat[i]))
    if e > worst then worst = e end
  end
  return worst
end

describe("optimisers match PyTorch step for step", function()
  for ci, c in ipairs(fx.optimizers) do
    local label = string.format("%d %s %s", ci, c.name, c.dtype)
    it(label, function()
      local w = lt.tensor(c.w0, { dtype = c.dtype, requires_grad = true })
      local b = lt.tensor(c.b0, { dtype = c.dtype, requires_grad = true })
      local opts = {}
      for k, v in pairs(c.opts) do opts[k] = v end
      local opt = optim[c.name]({ w, b }, opts)
      local tol = c.dtype == "float64" and 1e-12 or 1e-5
      for s, g in ipairs(c.grads) do
        w.grad = lt.tensor(g[1], { dtype = c.dtype })
        b.grad = lt.tensor(g[2], { dtype = c.dtype })
        opt:step()
        assert.is_true(max_rel_err(w, c.traj[s][1]) < tol, label .. " step " .. s .. " weight")
        assert.is_true(max_rel_err(b, c.traj[s][2]) < tol, label .. " step " .. s .. " bias")
      end
    end)
  end
end)

describe("optimiser behaviour", function()
  it("zero_grad sets grads to nil, or zeros them", function()
    local p = lt.ones(2, { requires_grad = true })
    local opt = optim.SGD({ p }, { lr = 0.1 })
    ;(p * 2):sum():backward()
    opt:zero_grad(false)
    assert.are.same({ 0, 0 }, p.grad:tolist())
    opt:zero_grad()
    assert.is_nil(p.grad)
  end)

  it("step(closure) returns the loss and skips parameters without grads", function()
    local p = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local q = lt.tensor({ 5.0 }, { requires_grad = true })
    local opt = optim.SGD({ p, q }, { lr = 0.5 })
    local loss = opt:step(function()
      opt:zero_grad()
      local l = (p * p):sum()
      l:backward()
      return l
    end)
    assert.are.equal(5, loss:item())
    assert.are.same({ 0, 0 }, p:tolist())
    assert.are.same({ 5 }, q:tolist())
  end)

  it("parameter groups take per-group options", function()
    local a = lt.ones(1, { requires_grad = true })
    local b = lt.ones(1, { requires_grad = true })
    local opt = optim.SGD({ { params = { a } }, { params = { b }, lr = 1.0 } }, { lr = 0.1 })
    a.grad, b.grad = lt.ones(1), lt.ones(1)
    opt:step()
    assert.is_true(math.abs(a:item() - 0.9) < 1e-6)
    assert.are.equal(0, b:item())
  end)

  it("state_dict has PyTorch's layout and round-trips into a fresh optimiser", function()
    local function make()
      local w = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }, { requires_grad = true })
      local b = lt.tensor({ 0.5, -0.5 }, { requires_grad = true })
      return w, b, optim.Adam({ w, b }, { lr = 0.1 })
    end
    local w1, b1, o1 = make()
    for _ = 1, 3 do
      w1.grad, b1.grad = w1:detach() * 0.1, b1:detach() + 1
      o1:step()
    end
    local sd = o1:state_dict()
    assert.are.same({ 0, 1 }, sd.param_groups[1].params)
    assert.is_truthy(sd.state[0].exp_avg)
    assert.are.equal(3, sd.state[0].step:item())
    assert.are.equal(0.1, sd.param_groups[1].lr)
    local w2, b2, o2 = make()
    w2:detach():copy_(w1); b2:detach():copy_(b1)
    o2:load_state_dict(sd)
    for _ = 1, 2 do
      w1.grad, b1.grad = w1:detach() * 0.1, b1:detach() + 1
      w2.grad, b2.grad = w2:detach() * 0.1, b2:detach() + 1
      o1:step(); o2:step()
    end
    assert.is_true(lt.equal(w1, w2))
    assert.is_true(lt.equal(b1, b2))
  end)

  it("a gradient that is the parameter itself updates from its old value", function()
    for _, make in ipairs {
      function(ps) return optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end,
      function(ps) return optim.Adam(ps, { lr = 0.1 }) end,
      function(ps) return optim.RMSprop(ps, { lr = 0.1 }) end,
      function(ps) return optim.Adagrad(ps, { lr = 0.1 }) end,
    } do
      local p = lt.tensor({ 1.0, -2.0, 3.0 }, { requires_grad = true })
      local q = lt.tensor({ 1.0, -2.0, 3.0 }, { requires_grad = true })
      p.grad = p:detach()                     -- shares memory with the parameter
      q.grad = lt.tensor({ 1.0, -2.0, 3.0 })  -- the same values in a buffer of its own
      make({ p }):step()
      make({ q }):step()
      assert.is_true(lt.allclose(p:detach(), q:detach(), 0, 0))
      assert.is_false(lt.allclose(q:detach(), lt.tensor({ 1.0, -2.0, 3.0 })))
    end
  end)

  it("takes a group's options afresh at every step and each parameter's own first step", function()
    -- SGD with momentum 0.5 and lr 0.1, 0.2, 0.3 over three steps: the buffer is g, 1.5 g, 1.75 g
    local g = lt.tensor({ 1.0, -2.0, 0.5 })
    local p = lt.zeros(3, { requires_grad = true })
    local late = lt.zeros(3, { requires_grad = true })   -- its first gradient comes at step 3
    local opt = optim.SGD({ late, p }, { lr = 0.1, momentum = 0.5 })
    for k = 1, 3 do
      p.grad = g:clone()
      if k == 3 then late.grad = g:clone() end
      opt.param_groups[1].lr = 0.1 * k
      opt:step()
    end
    local want = (g * -(0.1 + 0.2 * 1.5 + 0.3 * 1.75)):tolist()
    local got = p:detach():tolist()
    for i = 1, 3 do assert.is_true(math.abs(got[i] - want[i]) < 1e-6, tostring(got[i])) end
    -- late's buffer starts as its gradient in the same step as p's goes on from its own
    assert.are.same((g * -0.3):tolist(), late:detach():tolist())
  end)

  it("runs a class made with Optimizer:extend, with or without group_options", function()
    local Sign = optim.Optimizer:extend("Sign", { lr = 0.01 })
    function Sign:update(p, grad, state, group, o)
      assert.is_nil(o)
      state.n = (state.n or 0) + 1
      p:sub_(grad:sign() * group.lr)
    end
    local p = lt.tensor({ 1.0, 1.0 }, { requires_grad = true })
    local opt = Sign({ p }, { lr = 0.25 })
    p.grad = lt.tensor({ 3.0, -2.0 })
    opt:step()
    opt:step()
    assert.are.same({ 0.5, 1.5 }, p:detach():tolist())
    assert.are.equal(2, opt.state[p].n)
    local Scaled = optim.Optimizer:extend("Scaled", { lr = 0.5 })
    local made = 0
    function Scaled:group_options(group) made = made + 1; return { lr = group.lr } end
    function Scaled:update(p_, grad, _, _, o) p_:sub_(grad * o.lr) end
    local x, y = lt.ones(2, { requires_grad = true }), lt.ones(2, { requires_grad = true })
    local s = Scaled({ x, y })
    x.grad, y.grad = lt.ones(2), lt.ones(2)
    s:step()
    assert.are.equal(1, made)   -- once for the group, not once per parameter
    assert.are.same({ 0.5, 0.5 }, y:detach():tolist())
  end)

  it("refuses optimiser state that shares memory with the parameter", function()
    local core = require "lantern.core"
    local p = lt.ones(4)
    local before = p:clone()
    assert.has_error(function()
      core._sgd_step(p, lt.ones(4), p, { lr = 0.1, momentum = 0.9 })
    end, "SGD: momentum_buffer shares memory with the parameter; each needs its own buffer")
    assert.is_true(lt.equal(p, before))
    local m = lt.zeros(4)
    assert.has_error(function()
      core._adam_step(p, lt.ones(4), m, m, nil, { lr = 0.1, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, step = 1 })
    end, "Adam: exp_avg_sq shares memory with exp_avg; each needs its own buffer")
  end)

  it("rejects bad options with clear errors", function()
    local p = lt.ones(1, { requires_grad = true })
    assert.has_error(function() optim.SGD({ p }, { lr = -1 }) end, "SGD: Invalid learning rate: -1")
    assert.has_error(function() optim.Adam({ p }, { betas = { 1.5, 0.9 } }) end)
    assert.has_error(function() optim.SGD({}, { lr = 1 }) end, "SGD: optimizer got an empty parameter list")
    local ok, err = pcall(optim.SGD, { p }, { lrr = 1 })
    assert.is_false(ok)
    assert.matches("unknown option 'lrr'", err)
  end)
end)

describe("lr schedulers match PyTorch", function()
  local S = optim.lr_scheduler
  local make = {
    StepLR = function(o) return S.StepLR(o, 3, { gamma = 0.5 }) end,
    MultiStepLR = function(o) return S.MultiStepLR(o, { 2, 5, 9 }, { gamma = 0.1 }) end,
    ExponentialLR = function(o) return S.ExponentialLR(o, 0.9) end,
    CosineAnnealingLR = function(o) return S.CosineAnnealingLR(o, 10, { eta_min = 0.01 }) end,
    LinearLR = function(o) return S.LinearLR(o, { start_factor = 0.25, total_iters = 4 }) end,
    OneCycleLR = function(o) return S.OneCycleLR(o, 1.0, { total_steps = 12 }) end,
    LambdaLR = function(o) return S.LambdaLR(o, function(e) return 1.0 / (e + 1) end) end,
    ReduceLROnPlateau = function(o) return S.ReduceLROnPlateau(o, { patience = 2, factor = 0.5 }) end,
  }
  local metrics = { 1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0, 1.0, 1.0, 0.5, 0.6 }
  for _, c in ipairs(fx.schedulers) do
    it(c.name, function()
      local p = lt.zeros(1, { requires_grad = true })
      local opt = optim.SGD({ p }, { lr = 0.5 })
      local s = make[c.name](opt)
      local function check(i)
        local got, want = opt.param_groups[1].lr, c.lrs[i]
        assert.is_true(math.abs(got - want) <= 1e-12 + 1e-9 * math.abs(want),
          string.format("%s step %d: %.17g vs %.17g", c.name, i - 1, got, want))
      end
      check(1)
      for i = 1, #c.lrs - 1 do
        if c.name == "ReduceLROnPlateau" then s:step(metrics[i]) else s:step() end
        check(i + 1)
      end
    end)
  end

  it("state_dict restores the schedule position (with the optimiser's, which holds the lr)", function()
    local p = lt.zeros(1, { requires_grad = true })
    local opt = optim.SGD({ p }, { lr = 1 })
    local s = S.StepLR(opt, 2, { gamma = 0.5 })
    for _ = 1, 3 do s:step() end
    local sd = s:state_dict()
    local opt2 = optim.SGD({ p }, { lr = 1 })
    local s2 = S.StepLR(opt2, 2, { gamma = 0.5 })
    opt2:load_state_dict(opt:state_dict())
    s2:load_state_dict(sd)
    s:step(); s2:step()
    assert.are.equal(s:get_last_lr()[1], s2:get_last_lr()[1])
    assert.are.equal(0.25, s2:get_last_lr()[1])
    -- the step is chainable, as PyTorch's: without the optimiser's lr it scales the fresh one
    local opt3 = optim.SGD({ p }, { lr = 1 })
    local s3 = S.StepLR(opt3, 2, { gamma = 0.5 })
    s3:load_state_dict(sd)
    s3:step()
    assert.are.equal(0.5, s3:get_last_lr()[1])
  end)
end)

describe("nn.utils gradient clipping", function()
  local utils = lt.nn.utils
  it("clip_grad_norm_ scales gradients to the max norm and returns the total norm", function()
    local a = lt.tensor({ 3.0, 0.0 }, { requires_grad = true })
    local b = lt.tensor({ 4.0 }, { requires_grad = true })
    a.grad, b.grad = lt.tensor({ 3.0, 0.0 }), lt.tensor({ 4.0 })
    local total = utils.clip_grad_norm_({ a, b }, 1.0)
    assert.is_true(math.abs(total:item() - 5) < 1e-6)
    assert.is_true(math.abs(a.grad[1]:item() - 0.6) < 1e-5)
    assert.is_true(math.abs(b.grad[1]:item() - 0.8) < 1e-5)
    local t2 = utils.clip_grad_norm_({ a, b }, 10.0)
    assert.is_true(math.abs(t2:item() - 1) < 1e-4)
    assert.is_true(math.abs(b.grad[1]:item() - 0.8) < 1e-5)   -- unchanged below the limit
    a.grad = lt.tensor({ -7.0, 2.0 })
    local inf = utils.clip_grad_norm_({ a }, 1.0, { norm_type = math.huge })
    assert.are.equal(7, inf:item())
  end)

  it("clip_grad_value_ clamps; parameters_to_vector round-trips", function()
    local a = lt.zeros(3, { requires_grad = true })
    a.grad = lt.tensor({ -5.0, 0.5, 9.0 })
    utils.clip_grad_value_({ a }, 1.0)
    assert.are.same({ -1, 0.5, 1 }, a.grad:tolist())
    local p1, p2 = lt.tensor({ { 1.0, 2.0 } }), lt.tensor({ 3.0 })
    local v = utils.parameters_to_vector({ p1, p2 })
    assert.are.same({ 1, 2, 3 }, v:tolist())
    utils.vector_to_parameters(v * 2, { p1, p2 })
    assert.are.same({ { 2, 4 } }, p1:tolist())
    assert.are.same({ 6 }, p2:tolist())
  end)
end)
