-- Schedulers replay PyTorch 1.13's step() (fixtures from spec/fixtures/gen_schedulers.py): the
-- lrs of two parameter groups, the momentum or betas[1] the cyclic schedulers set, and the
-- parameters of training runs whose momentum a scheduler cycles.
local lt = require "lantern"
local optim = lt.optim
local S = optim.lr_scheduler
local fx = dofile("spec/fixtures/schedulers.lua")

-- The optimiser of gen_schedulers.py's two_groups().
local function two_groups(kind, momentum)
  local a = lt.zeros(2, { requires_grad = true })
  local b = lt.zeros(3, { requires_grad = true })
  local groups = { { params = { a } }, { params = { b }, lr = 0.1 } }
  if kind == "SGD" then return optim.SGD(groups, { lr = 0.5, momentum = momentum }) end
  return optim.Adam(groups, { lr = 0.5 })
end

local make = {
  ["StepLR"] = function(o) return S.StepLR(o, 3, { gamma = 0.5 }) end,
  ["MultiStepLR dup"] = function(o) return S.MultiStepLR(o, { 9, 2, 5, 5 }, { gamma = 0.5 }) end,
  ["ExponentialLR"] = function(o) return S.ExponentialLR(o, 0.9) end,
  ["CosineAnnealingLR"] = function(o) return S.CosineAnnealingLR(o, 10, { eta_min = 0.01 }) end,
  ["CosineAnnealingLR 7"] = function(o) return S.CosineAnnealingLR(o, 7) end,
  ["LinearLR"] = function(o) return S.LinearLR(o, { start_factor = 0.25, total_iters = 4 }) end,
  ["LinearLR down"] = function(o)
    return S.LinearLR(o, { start_factor = 1.0, end_factor = 0.1, total_iters = 7 })
  end,
  ["LambdaLR"] = function(o) return S.LambdaLR(o, function(e) return 1.0 / (e + 1) end) end,
  ["LambdaLR list"] = function(o)
    return S.LambdaLR(o, { function(e) return 0.9 ^ e end, function(e) return 1.0 + e end })
  end,
  ["ConstantLR"] = function(o) return S.ConstantLR(o) end,
  ["ConstantLR 0.5/4"] = function(o) return S.ConstantLR(o, { factor = 0.5, total_iters = 4 }) end,
  ["PolynomialLR"] = function(o) return S.PolynomialLR(o) end,
  ["PolynomialLR 8^2"] = function(o) return S.PolynomialLR(o, { total_iters = 8, power = 2.0 }) end,
  ["MultiplicativeLR"] = function(o) return S.MultiplicativeLR(o, function() return 0.95 end) end,
  ["MultiplicativeLR list"] = function(o)
    return S.MultiplicativeLR(o, { function() return 0.9 end, function(e) return 1.0 + 0.01 * e end })
  end,
  ["CyclicLR triangular"] = function(o) return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 4 }) end,
  ["CyclicLR triangular2"] = function(o)
    return S.CyclicLR(o, { 0.01, 0.02 }, { 0.1, 0.3 },
      { step_size_up = 4, step_size_down = 3, mode = "triangular2" })
  end,
  ["CyclicLR exp_range"] = function(o)
    return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 5, mode = "exp_range", gamma = 0.9,
      base_momentum = { 0.7, 0.75 }, max_momentum = 0.95 })
  end,
  ["CyclicLR scale_fn"] = function(o)
    return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 3, scale_fn = function(x) return 1.0 / (1.0 + x) end,
      scale_mode = "iterations" })
  end,
  ["CyclicLR scale_fn cycle"] = function(o)
    return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 3, scale_fn = function(x) return 0.5 ^ x end })
  end,
  ["CyclicLR momentum 0"] = function(o) return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 4 }) end,
  ["CyclicLR Adam no momentum"] = function(o)
    return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 4, cycle_momentum = false })
  end,
  ["CosineAnnealingWarmRestarts"] = function(o) return S.CosineAnnealingWarmRestarts(o, 5) end,
  ["CosineAnnealingWarmRestarts 3x2"] = function(o)
    return S.CosineAnnealingWarmRestarts(o, 3, { T_mult = 2, eta_min = 0.01 })
  end,
  ["CosineAnnealingWarmRestarts epochs"] = function(o)
    return S.CosineAnnealingWarmRestarts(o, 5, { eta_min = 0.001 })
  end,
  ["CosineAnnealingWarmRestarts 3x2 epochs"] = function(o)
    return S.CosineAnnealingWarmRestarts(o, 3, { T_mult = 2 })
  end,
  ["OneCycleLR SGD"] = function(o) return S.OneCycleLR(o, 1.0, { total_steps = 30 }) end,
  ["OneCycleLR SGD momentum 0"] = function(o)
    return S.OneCycleLR(o, { 1.0, 0.2 }, { total_steps = 30, base_momentum = 0.8,
      max_momentum = { 0.9, 0.99 } })
  end,
  ["OneCycleLR Adam three_phase linear"] = function(o)
    return S.OneCycleLR(o, 0.3, { epochs = 6, steps_per_epoch = 5, three_phase = true,
      anneal_strategy = "linear", pct_start = 0.25 })
  end,
  ["OneCycleLR no cycle_momentum"] = function(o)
    return S.OneCycleLR(o, 1.0, { total_steps = 30, cycle_momentum = false })
  end,
  ["SequentialLR"] = function(o)
    return S.SequentialLR(o, { S.ConstantLR(o, { factor = 0.1, total_iters = 2 }),
      S.ExponentialLR(o, 0.9) }, { 2 })
  end,
  ["SequentialLR warmup cosine"] = function(o)
    return S.SequentialLR(o, { S.LinearLR(o, { start_factor = 0.1, total_iters = 4 }),
      S.CosineAnnealingLR(o, 10) }, { 5 })
  end,
  ["SequentialLR three"] = function(o)
    return S.SequentialLR(o, { S.ConstantLR(o, { factor = 0.5, total_iters = 10 }),
      S.StepLR(o, 2, { gamma = 0.5 }), S.MultiplicativeLR(o, function() return 0.9 end) }, { 3, 10 })
  end,
  ["ChainedScheduler"] = function(o)
    return S.ChainedScheduler({ S.ConstantLR(o, { factor = 0.1, total_iters = 2 }),
      S.ExponentialLR(o, 0.9) })
  end,
  ["ChainedScheduler three"] = function(o)
    return S.ChainedScheduler({ S.StepLR(o, 3, { gamma = 0.5 }), S.CosineAnnealingLR(o, 10),
      S.LinearLR(o, { start_factor = 0.5, total_iters = 6 }) })
  end,
  ["StepLR epochs"] = function(o) return S.StepLR(o, 3, { gamma = 0.5 }) end,
  ["MultiStepLR epochs"] = function(o) return S.MultiStepLR(o, { 2, 5, 5 }) end,
  ["ConstantLR epochs"] = function(o) return S.ConstantLR(o, { factor = 0.5, total_iters = 4 }) end,
  ["LinearLR epochs"] = function(o) return S.LinearLR(o, { start_factor = 0.2, total_iters = 5 }) end,
  ["PolynomialLR epochs"] = function(o) return S.PolynomialLR(o, { total_iters = 6, power = 3 }) end,
  ["CosineAnnealingLR epochs"] = function(o) return S.CosineAnnealingLR(o, 8) end,
  ["ExponentialLR epochs"] = function(o) return S.ExponentialLR(o, 0.8) end,
  ["StepLR resume"] = function(o) return S.StepLR(o, 3, { gamma = 0.5, last_epoch = 4 }) end,
  ["CosineAnnealingLR resume"] = function(o) return S.CosineAnnealingLR(o, 10, { last_epoch = 3 }) end,
  ["LinearLR resume"] = function(o) return S.LinearLR(o, { total_iters = 6, last_epoch = 2 }) end,
}

-- Chainable and closed forms round differently; these match PyTorch's operation order, so
-- the tolerance is a few ulps.
local function close(got, want)
  return math.abs(got - want) <= 4e-16 * math.max(1, math.abs(want))
end

local function check_groups(label, step, what, got, want)
  for gi = 1, #want do
    assert(close(got[gi], want[gi]), string.format("%s step %d group %d %s: %.17g, PyTorch %.17g",
      label, step, gi, what, got[gi], want[gi]))
  end
end

local function snapshot(opt, key)
  local out = {}
  for i, g in ipairs(opt.param_groups) do
    if key == "beta1" then out[i] = g.betas[1] else out[i] = g[key] end
  end
  return out
end

describe("lr schedulers replay PyTorch's step() with two parameter groups", function()
  for _, c in ipairs(fx.lr) do
    it(c.label, function()
      assert(make[c.label], "no constructor for fixture case " .. c.label)
      local opt = two_groups(c.kind, c.momentum)
      if c.resume then
        for _, g in ipairs(opt.param_groups) do g.initial_lr = g.lr end
      end
      local s = make[c.label](opt)
      local function check(i)
        check_groups(c.label, i - 1, "lr", snapshot(opt, "lr"), c.lr[i])
        check_groups(c.label, i - 1, "get_last_lr", s:get_last_lr(), c.lr[i])
        if c.momenta then check_groups(c.label, i - 1, "momentum", snapshot(opt, "momentum"), c.momenta[i]) end
        if c.beta1 then check_groups(c.label, i - 1, "betas[1]", snapshot(opt, "beta1"), c.beta1[i]) end
      end
      check(1)
      for i = 2, #c.lr do
        if c.epochs then s:step(c.epochs[i - 1]) else s:step() end
        check(i)
      end
    end)
  end
end)

-- The worst |t - ref| / (floor + |ref|): float32 runs drift by an ulp now and then, which is
-- a large relative error on an element that passes near zero, hence the floor.
local function max_rel_err(t, ref, floor)
  local a = t:double():reshape(-1):tolist()
  local flat = {}
  local function walk(x)
    if type(x) == "table" then for _, v in ipairs(x) do walk(v) end else flat[#flat + 1] = x end
  end
  walk(ref)
  assert.are.equal(#flat, #a)
  local worst = 0
  for i = 1, #a do
    local e = math.abs(a[i] - flat[i]) / ((floor or 1e-6) + math.abs(flat[i]))
    if e > worst then worst = e end
  end
  return worst
end

local train = {
  ["SGD momentum 0 + OneCycleLR"] = {
    function(p) return optim.SGD(p, { lr = 0.1 }) end,
    function(o) return S.OneCycleLR(o, 0.5, { total_steps = 20 }) end },
  ["SGD nesterov + OneCycleLR"] = {
    function(p) return optim.SGD(p, { lr = 0.1, momentum = 0.9, nesterov = true }) end,
    function(o) return S.OneCycleLR(o, 0.5, { total_steps = 20, base_momentum = 0.8, max_momentum = 0.9 }) end },
  ["SGD + OneCycleLR float64"] = {
    function(p) return optim.SGD(p, { lr = 0.1, momentum = 0.5, dampening = 0.1 }) end,
    function(o) return S.OneCycleLR(o, 0.5, { total_steps = 20, three_phase = true }) end },
  ["Adam + OneCycleLR"] = {
    function(p) return optim.Adam(p, { lr = 0.01 }) end,
    function(o) return S.OneCycleLR(o, 0.05, { total_steps = 20 }) end },
  ["AdamW + OneCycleLR"] = {
    function(p) return optim.AdamW(p, { lr = 0.01, amsgrad = true }) end,
    function(o) return S.OneCycleLR(o, 0.05, { total_steps = 20, anneal_strategy = "linear" }) end },
  ["RMSprop + OneCycleLR"] = {
    function(p) return optim.RMSprop(p, { lr = 0.01, momentum = 0.5 }) end,
    function(o) return S.OneCycleLR(o, 0.05, { total_steps = 20 }) end },
  ["SGD + CyclicLR"] = {
    function(p) return optim.SGD(p, { lr = 0.1 }) end,
    function(o) return S.CyclicLR(o, 0.01, 0.2, { step_size_up = 3, mode = "triangular2" }) end },
  ["RMSprop + CyclicLR"] = {
    function(p) return optim.RMSprop(p, { lr = 0.01 }) end,
    function(o) return S.CyclicLR(o, 0.001, 0.02, { step_size_up = 4 }) end },
}

describe("training with a scheduler that cycles momentum ends where PyTorch's does", function()
  for _, c in ipairs(fx.training) do
    it(c.label, function()
      local mk = assert(train[c.label], "no constructors for fixture case " .. c.label)
      local w = lt.tensor(c.w0, { dtype = c.dtype, requires_grad = true })
      local b = lt.tensor(c.b0, { dtype = c.dtype, requires_grad = true })
      local opt = mk[1]({ w, b })
      local s = mk[2](opt)
      local tol, floor = 1e-5, 0.1
      if c.dtype == "float64" then tol, floor = 1e-12, 1e-6 end
      for i, g in ipairs(c.grads) do
        w.grad = lt.tensor(g[1], { dtype = c.dtype })
        b.grad = lt.tensor(g[2], { dtype = c.dtype })
        opt:step()
        s:step()
        assert(max_rel_err(w, c.traj[i][1], floor) < tol, c.label .. " step " .. i .. " weight")
        assert(max_rel_err(b, c.traj[i][2], floor) < tol, c.label .. " step " .. i .. " bias")
      end
    end)
  end

  it("the momentum a scheduler sets reaches the update (a run without it differs)", function()
    local c = fx.training[1]
    local function run(cycle)
      local w = lt.tensor(c.w0, { requires_grad = true })
      local opt = optim.SGD({ w }, { lr = 0.1 })
      local s = S.OneCycleLR(opt, 0.5, { total_steps = 20, cycle_momentum = cycle })
      for i = 1, 5 do
        w.grad = lt.tensor(c.grads[i][1])
        opt:step()
        s:step()
      end
      return w, opt
    end
    local w1, o1 = run(true)
    local w2, o2 = run(false)
    assert.is_truthy(o1.state[w1].momentum_buffer)
    assert.is_nil(o2.state[w2] and o2.state[w2].momentum_buffer)
    assert.are.equal(0, o2.param_groups[1].momentum)
    assert.is_true(max_rel_err(w1, c.traj[5][1]) < 1e-5)
    assert.is_false(lt.allclose(w1:detach(), w2:detach()))
  end)
end)

describe("scheduler state", function()
  local function fresh_two()
    return two_groups("SGD", 0.9)
  end

  -- Steps a scheduler k times, saves both state dicts, and checks that a fresh optimiser and
  -- scheduler loaded from them continue exactly as the original does.
  local function resumes(build, k, n)
    local o1 = fresh_two()
    local s1 = build(o1)
    for _ = 1, k do s1:step() end
    local osd, ssd = o1:state_dict(), s1:state_dict()
    local o2 = fresh_two()
    local s2 = build(o2)
    o2:load_state_dict(osd)
    s2:load_state_dict(ssd)
    for i = 1, n do
      s1:step()
      s2:step()
      for gi = 1, 2 do
        local a, b = o1.param_groups[gi], o2.param_groups[gi]
        assert.are.equal(a.lr, b.lr, "lr after resume, step " .. i)
        assert.are.equal(a.momentum, b.momentum, "momentum after resume, step " .. i)
      end
      assert.are.same(s1:get_last_lr(), s2:get_last_lr())
    end
  end

  it("state_dict/load_state_dict resume every scheduler", function()
    resumes(function(o) return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 3, mode = "triangular2" }) end, 5, 10)
    resumes(function(o) return S.CyclicLR(o, 0.01, 0.1, { step_size_up = 3, scale_fn = function(x) return 0.5 ^ x end }) end, 4, 8)
    resumes(function(o) return S.CosineAnnealingWarmRestarts(o, 3, { T_mult = 2 }) end, 7, 12)
    resumes(function(o) return S.PolynomialLR(o, { total_iters = 8, power = 2 }) end, 3, 8)
    resumes(function(o) return S.ConstantLR(o, { factor = 0.5, total_iters = 4 }) end, 2, 5)
    resumes(function(o) return S.MultiplicativeLR(o, function() return 0.9 end) end, 3, 4)
    resumes(function(o) return S.OneCycleLR(o, 1.0, { total_steps = 20 }) end, 6, 10)
    resumes(function(o)
      return S.SequentialLR(o, { S.ConstantLR(o, { factor = 0.1, total_iters = 2 }),
        S.ExponentialLR(o, 0.9) }, { 3 })
    end, 2, 6)
    resumes(function(o)
      return S.ChainedScheduler({ S.StepLR(o, 2, { gamma = 0.5 }), S.LinearLR(o, { total_iters = 4 }) })
    end, 3, 6)
  end)

  it("state_dict is plain data, saves with lt.save and keeps no functions", function()
    local o = fresh_two()
    local s = S.SequentialLR(o, { S.LambdaLR(o, function(e) return 1 / (e + 1) end),
      S.CyclicLR(o, 0.01, 0.1, { step_size_up = 2, scale_fn = function(x) return 1 / x end }) }, { 2 })
    for _ = 1, 4 do s:step() end
    local sd = s:state_dict()
    assert.are.equal(2, #sd._schedulers)
    assert.is_nil(sd._schedulers[1].lr_lambdas)
    assert.is_nil(sd._schedulers[2]._scale_fn_custom)
    assert.are.equal(4, sd.last_epoch)
    local path = os.tmpname()
    lt.save(sd, path)
    local back = lt.load(path)
    os.remove(path)
    assert.are.equal(sd._schedulers[2].last_epoch, back._schedulers[2].last_epoch)
    -- a loaded dict does not alias the scheduler's own tables
    sd._schedulers[2].base_lrs[1] = 123
    assert.are_not.equal(123, s._schedulers[2].base_lrs[1])
  end)

  it("load_state_dict keeps methods and the given functions", function()
    local o = fresh_two()
    local s = S.CyclicLR(o, 0.01, 0.1, { step_size_up = 2, scale_fn = function() return 0.5 end })
    s:load_state_dict({ step = 3, get_lr = "x", _scale_fn_custom = 1, last_epoch = 2 })
    s:step()
    assert.are.equal(3, s.last_epoch)
    -- epoch 3 of a 4-step cycle, the lr halfway down, halved by scale_fn
    assert.is_true(math.abs(o.param_groups[1].lr - (0.01 + 0.09 * 0.5 * 0.5)) < 1e-15)
  end)

  it("a step that fails leaves the scheduler and the lrs as they were", function()
    local o = fresh_two()
    local s = S.OneCycleLR(o, 1.0, { total_steps = 3 })
    for _ = 1, 3 do s:step() end
    local lr, epoch = o.param_groups[1].lr, s.last_epoch
    assert.has_error(function() s:step() end,
      "OneCycleLR: Tried to step 5 times. The specified number of total steps is 3")
    assert.are.equal(epoch, s.last_epoch)
    assert.are.equal(lr, o.param_groups[1].lr)
    local calls = 0
    local l = S.LambdaLR(fresh_two(), function(e)
      calls = calls + 1
      if e == 2 then error("boom at 2", 0) end
      return 1
    end)
    l:step()
    assert.has_error(function() l:step() end, "boom at 2")
    assert.are.equal(1, l.last_epoch)
  end)

  it("get_last_lr returns a copy", function()
    local o = fresh_two()
    local s = S.StepLR(o, 2)
    local l = s:get_last_lr()
    l[1] = 99
    assert.are.same({ 0.5, 0.1 }, s:get_last_lr())
  end)

  it("OneCycleLR gives each Adam group betas of its own", function()
    local p = lt.zeros(2, { requires_grad = true })
    local q = lt.zeros(2, { requires_grad = true })
    local opt = optim.Adam({ { params = { p } }, { params = { q } } }, { lr = 0.1 })
    S.OneCycleLR(opt, 0.5, { total_steps = 10, max_momentum = { 0.95, 0.9 } })
    assert.are.same({ 0.95, 0.999 }, opt.param_groups[1].betas)
    assert.are.same({ 0.9, 0.999 }, opt.param_groups[2].betas)
    assert.are.same({ 0.9, 0.999 }, optim.Adam.defaults.betas)
    assert.are.same({ 0.9, 0.999 }, opt.defaults.betas)
  end)
end)
