-- Optimisers and schedulers refuse bad arguments when they are made, with PyTorch's messages
-- (fixtures from spec/fixtures/gen_optim.py) prefixed by the op's name, and a failed call
-- changes nothing.
local lt = require "lantern"
local optim = lt.optim
local S = optim.lr_scheduler
local fx = dofile("spec/fixtures/optim.lua")

local function param() return lt.zeros(2, { requires_grad = true }) end
local function sgd() return optim.SGD({ param() }, { lr = 0.1 }) end
local function two_groups()
  return optim.SGD({ { params = { param() } }, { params = { param() } } }, { lr = 0.1 })
end

local function message_of(fn)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error")
  return tostring(err)
end

-- The same invalid calls as gen_optim.py's `errors`, by label: the op's name and the call.
local p1 = { param() }
local calls = {
  ["SGD lr"] = { "SGD", function() optim.SGD(p1, { lr = -1 }) end },
  ["SGD momentum"] = { "SGD", function() optim.SGD(p1, { lr = 0.1, momentum = -0.5 }) end },
  ["SGD weight_decay"] = { "SGD", function() optim.SGD(p1, { lr = 0.1, weight_decay = -1e-4 }) end },
  ["SGD nesterov"] = { "SGD", function() optim.SGD(p1, { lr = 0.1, nesterov = true }) end },
  ["SGD nesterov dampening"] = { "SGD", function()
    optim.SGD(p1, { lr = 0.1, momentum = 0.9, dampening = 0.1, nesterov = true })
  end },
  ["Adam lr"] = { "Adam", function() optim.Adam(p1, { lr = -0.001 }) end },
  ["Adam eps"] = { "Adam", function() optim.Adam(p1, { eps = -1e-8 }) end },
  ["Adam beta0"] = { "Adam", function() optim.Adam(p1, { betas = { 1.0, 0.999 } }) end },
  ["Adam beta1"] = { "Adam", function() optim.Adam(p1, { betas = { 0.9, -0.1 } }) end },
  ["Adam weight_decay"] = { "Adam", function() optim.Adam(p1, { weight_decay = -1 }) end },
  ["AdamW beta0"] = { "AdamW", function() optim.AdamW(p1, { betas = { -0.5, 0.999 } }) end },
  ["AdamW eps"] = { "AdamW", function() optim.AdamW(p1, { eps = -1 }) end },
  ["RMSprop lr"] = { "RMSprop", function() optim.RMSprop(p1, { lr = -0.5 }) end },
  ["RMSprop alpha"] = { "RMSprop", function() optim.RMSprop(p1, { alpha = -1 }) end },
  ["RMSprop eps"] = { "RMSprop", function() optim.RMSprop(p1, { eps = -1e-3 }) end },
  ["RMSprop momentum"] = { "RMSprop", function() optim.RMSprop(p1, { momentum = -0.9 }) end },
  ["RMSprop weight_decay"] = { "RMSprop", function() optim.RMSprop(p1, { weight_decay = -2 }) end },
  ["Adagrad lr"] = { "Adagrad", function() optim.Adagrad(p1, { lr = -1 }) end },
  ["Adagrad lr_decay"] = { "Adagrad", function() optim.Adagrad(p1, { lr_decay = -0.1 }) end },
  ["Adagrad weight_decay"] = { "Adagrad", function() optim.Adagrad(p1, { weight_decay = -0.1 }) end },
  ["Adagrad initial_accumulator_value"] = { "Adagrad", function()
    optim.Adagrad(p1, { initial_accumulator_value = -1 })
  end },
  ["Adagrad eps"] = { "Adagrad", function() optim.Adagrad(p1, { eps = -1e-10 }) end },
  ["empty"] = { "SGD", function() optim.SGD({}, { lr = 0.1 }) end },
  ["two groups share a parameter"] = { "SGD", function()
    optim.SGD({ { params = p1 }, { params = p1 } }, { lr = 0.1 })
  end },
  ["load: number of groups"] = { "SGD", function() two_groups():load_state_dict(sgd():state_dict()) end },
  ["load: group size"] = { "SGD", function()
    sgd():load_state_dict(optim.SGD({ param(), param() }, { lr = 0.1 }):state_dict())
  end },
  ["OneCycleLR no total"] = { "OneCycleLR", function() S.OneCycleLR(sgd(), 1.0) end },
  ["OneCycleLR total_steps"] = { "OneCycleLR", function() S.OneCycleLR(sgd(), 1.0, { total_steps = 0 }) end },
  ["OneCycleLR epochs"] = { "OneCycleLR", function()
    S.OneCycleLR(sgd(), 1.0, { epochs = -2, steps_per_epoch = 3 })
  end },
  ["OneCycleLR steps_per_epoch"] = { "OneCycleLR", function()
    S.OneCycleLR(sgd(), 1.0, { epochs = 2, steps_per_epoch = 0 })
  end },
  ["OneCycleLR pct_start"] = { "OneCycleLR", function()
    S.OneCycleLR(sgd(), 1.0, { total_steps = 10, pct_start = 1.5 })
  end },
  ["OneCycleLR Adagrad"] = { "OneCycleLR", function()
    S.OneCycleLR(optim.Adagrad(p1), 1.0, { total_steps = 10 })
  end },
  ["OneCycleLR max_lr list"] = { "OneCycleLR", function()
    S.OneCycleLR(sgd(), { 1.0, 2.0 }, { total_steps = 10 })
  end },
  ["OneCycleLR past total_steps"] = { "OneCycleLR", function()
    local s = S.OneCycleLR(sgd(), 1.0, { total_steps = 3 })
    for _ = 1, 4 do s:step() end
  end },
  ["CyclicLR Adam"] = { "CyclicLR", function() S.CyclicLR(optim.Adam(p1), 0.01, 0.1) end },
  ["CyclicLR base_lr list"] = { "CyclicLR", function() S.CyclicLR(two_groups(), { 0.01 }, 0.1) end },
  ["CosineAnnealingWarmRestarts T_0"] = { "CosineAnnealingWarmRestarts", function()
    S.CosineAnnealingWarmRestarts(sgd(), 0)
  end },
  ["CosineAnnealingWarmRestarts T_mult"] = { "CosineAnnealingWarmRestarts", function()
    S.CosineAnnealingWarmRestarts(sgd(), 5, { T_mult = 0 })
  end },
  ["CosineAnnealingWarmRestarts epoch"] = { "CosineAnnealingWarmRestarts", function()
    S.CosineAnnealingWarmRestarts(sgd(), 5):step(-1)
  end },
  ["ConstantLR factor"] = { "ConstantLR", function() S.ConstantLR(sgd(), { factor = 1.5 }) end },
  ["LinearLR start_factor"] = { "LinearLR", function() S.LinearLR(sgd(), { start_factor = -0.5 }) end },
  ["LinearLR end_factor"] = { "LinearLR", function() S.LinearLR(sgd(), { end_factor = 2 }) end },
  ["LambdaLR count"] = { "LambdaLR", function()
    S.LambdaLR(two_groups(), { function() return 1.0 end })
  end },
  ["MultiplicativeLR count"] = { "MultiplicativeLR", function()
    local f = function() return 1.0 end
    S.MultiplicativeLR(two_groups(), { f, f, f })
  end },
  ["SequentialLR milestones"] = { "SequentialLR", function()
    local o = sgd()
    S.SequentialLR(o, { S.ConstantLR(o), S.ExponentialLR(o, 0.9) }, { 2, 4 })
  end },
  ["SequentialLR optimizer"] = { "SequentialLR", function()
    local o, other = sgd(), sgd()
    S.SequentialLR(o, { S.ConstantLR(o), S.ExponentialLR(other, 0.9) }, { 2 })
  end },
  ["ChainedScheduler optimizer"] = { "ChainedScheduler", function()
    local o, other = sgd(), sgd()
    S.ChainedScheduler({ S.ConstantLR(o), S.ExponentialLR(other, 0.9) })
  end },
  ["ReduceLROnPlateau factor"] = { "ReduceLROnPlateau", function() S.ReduceLROnPlateau(sgd(), { factor = 1.0 }) end },
  ["ReduceLROnPlateau mode"] = { "ReduceLROnPlateau", function() S.ReduceLROnPlateau(sgd(), { mode = "foo" }) end },
  ["ReduceLROnPlateau threshold_mode"] = { "ReduceLROnPlateau", function()
    S.ReduceLROnPlateau(sgd(), { threshold_mode = "bar" })
  end },
  ["ReduceLROnPlateau min_lr"] = { "ReduceLROnPlateau", function()
    S.ReduceLROnPlateau(two_groups(), { min_lr = { 0.1 } })
  end },
}

-- Positions in messages are Lua's (the second scheduler is 2, PyTorch's index 1).
local lua_positions = {
  ["SequentialLR optimizer"] = { "at index 1 ", "at index 2 " },
  ["ChainedScheduler optimizer"] = { "at index 0 and 1 ", "at index 1 and 2 " },
}

describe("PyTorch's messages, prefixed with the op", function()
  for _, c in ipairs(fx.errors) do
    it(c.label, function()
      local call = assert(calls[c.label], "no call for fixture case " .. c.label)
      local want = c.message
      local swap = lua_positions[c.label]
      if swap then want = want:gsub(swap[1], swap[2]) end
      want = call[1] .. ": " .. want
      local got = message_of(call[2])
      assert(got:find(want, 1, true), string.format("got %q, want it to contain %q", got, want))
    end)
  end

  it("errors point at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() optim.SGD({ param() }, { lr = -1 }) end)
    assert.is_false(ok)
    assert.matches("optim_validation_spec.lua:" .. line .. ": SGD: Invalid learning rate", err, 1, true)
    line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() S.StepLR(sgd(), 2, { gama = 0.5 }) end)
    assert.matches("optim_validation_spec.lua:" .. line .. ": StepLR: unknown option 'gama'", err, 1, true)
  end)
end)

describe("optimiser arguments", function()
  it("say what params must be", function()
    local expected = "params must be a list of tensors or of parameter-group tables"
    assert.has_error(function() optim.SGD({ 1, 2 }) end,
      "SGD: " .. expected .. ", got number at position 1")
    assert.has_error(function() optim.Adam("x") end, "Adam: " .. expected .. ", got string")
    assert.has_error(function() optim.Adam(nil) end, "Adam: " .. expected .. ", got nil")
    assert.has_error(function() optim.SGD({ param(), "w" }) end,
      "SGD: " .. expected .. ", got string at position 2")
    assert.matches("not a mix of both", message_of(function() optim.SGD({ param(), { params = { param() } } }) end))
    assert.matches("wrap a single group", message_of(function() optim.SGD({ params = { param() } }) end))
    local lin = lt.nn.Linear(2, 2)
    assert.matches("got module Linear %(pass model:parameters%(%)%)", message_of(function() optim.SGD(lin) end))
    -- what is accepted: a tensor, a list, an iterator, groups
    assert.are.equal(1, #optim.SGD(param()).param_groups[1].params)
    assert.are.equal(2, #optim.SGD(lin:parameters()).param_groups[1].params)
    assert.are.equal(2, #optim.SGD(lin:named_parameters()).param_groups[1].params)
    assert.are.equal(2, #optim.SGD({ { params = param() }, { params = { param() } } }).param_groups)
    local g = optim.SGD({ { params = lin:named_parameters(), lr = 0.5 } }).param_groups[1]
    assert.are.equal(lin.weight, g.params[1])
    assert.are.equal(lin.bias, g.params[2])
  end)

  it("say options are a table", function()
    assert.has_error(function() optim.SGD({ param() }, 0.1) end,
      "SGD: options must be a table such as {lr = 0.1}, got number")
    assert.has_error(function() optim.Adam({ param() }, "fast") end,
      "Adam: options must be a table such as {lr = 0.01}, got string")
  end)

  it("refuse unknown options, naming the nearest", function()
    assert.matches("SGD: unknown option 'momentun' %(did you mean 'momentum'%?%)",
      message_of(function() optim.SGD({ param() }, { momentun = 0.9 }) end))
    assert.matches("Adam: unknown option 'beta' %(did you mean 'betas'%?%)",
      message_of(function() optim.Adam({ param() }, { beta = { 0.9, 0.99 } }) end))
    assert.matches("RMSprop: unknown option 'foreach'",
      message_of(function() optim.RMSprop({ param() }, { foreach = true }) end))
  end)

  it("check types", function()
    assert.has_error(function() optim.SGD({ param() }, { lr = "0.1" }) end, "SGD: lr must be a number, got string")
    assert.has_error(function() optim.SGD({ param() }, { nesterov = 1 }) end,
      "SGD: nesterov must be a boolean, got number")
    assert.has_error(function() optim.Adam({ param() }, { betas = 0.9 }) end,
      "Adam: betas must be a table of two numbers, got number")
    assert.has_error(function() optim.Adam({ param() }, { betas = { 0.9 } }) end,
      "Adam: betas must be a table of two numbers, got table")
    assert.has_error(function() optim.SGD({ param() }, { lr = 0 / 0 }) end)
  end)

  it("check every group's values, in the constructor and in add_param_group", function()
    assert.has_error(function()
      optim.SGD({ { params = { param() } }, { params = { param() }, lr = -2 } }, { lr = 0.1 })
    end, "SGD: Invalid learning rate: -2 (parameter group 2)")
    assert.has_error(function()
      optim.SGD({ { params = { param() }, momentum = 0, nesterov = true } }, { lr = 0.1, momentum = 0.9 })
    end, "SGD: Nesterov momentum requires a momentum and zero dampening (parameter group 1)")
    local opt = optim.RMSprop({ param() })
    assert.has_error(function() opt:add_param_group({ params = { param() }, alpha = -1 }) end,
      "RMSprop: Invalid alpha value: -1 (parameter group 2)")
    assert.has_error(function() opt:add_param_group({ lr = 0.1 }) end, "RMSprop: parameter group 2 has no 'params'")
    assert.has_error(function() opt:add_param_group(param()) end,
      "RMSprop: a parameter group must be a table {params = ...}, got Tensor")
    assert.has_error(function() opt:add_param_group({ params = { param(), 3 } }) end,
      "RMSprop: optimizer can only optimize Tensors, but parameter 2 of group 2 is number")
    local p = param()
    assert.has_error(function() opt:add_param_group({ params = { p, p } }) end,
      "RMSprop: parameter 2 of group 2 appears twice in the group")
    assert.has_error(function() opt:add_param_group({ params = opt.param_groups[1].params }) end,
      "RMSprop: some parameters appear in more than one parameter group")
    local leaf = param()
    assert.has_error(function() opt:add_param_group({ params = { leaf * 2 } }) end,
      "RMSprop: can't optimize a non-leaf Tensor (parameter 1 of group 2)")
    -- the failed calls added nothing; a good group still goes in, with its own betas copy
    assert.are.equal(1, #opt.param_groups)
    opt:add_param_group({ params = { param() }, lr = 0.5, name = "head" })
    assert.are.equal(2, #opt.param_groups)
    assert.are.equal("head", opt.param_groups[2].name)
    assert.are.equal(0.99, opt.param_groups[2].alpha)
  end)

  it("give each group tables of its own", function()
    local opt = optim.Adam({ { params = { param() } }, { params = { param() } } })
    assert.are_not.equal(opt.param_groups[1].betas, opt.param_groups[2].betas)
    assert.are_not.equal(opt.defaults.betas, optim.Adam.defaults.betas)
  end)
end)

describe("optimiser load_state_dict", function()
  local function trained_adam(shape_w)
    local w = lt.zeros(shape_w or { 2, 2 }, { requires_grad = true })
    local b = lt.zeros(2, { requires_grad = true })
    local opt = optim.Adam({ w, b }, { lr = 0.1 })
    w.grad, b.grad = lt.ones_like(w), lt.ones_like(b)
    opt:step()
    return opt, w, b
  end

  local function snapshot(opt)
    local out = { groups = {}, state = {} }
    for i, g in ipairs(opt.param_groups) do out.groups[i] = { lr = g.lr, eps = g.eps } end
    for p, st in pairs(opt.state) do
      out.state[p] = { step = st.step, exp_avg = st.exp_avg and st.exp_avg:clone() }
    end
    return out
  end

  local function unchanged(opt, before)
    for i, g in ipairs(opt.param_groups) do
      assert.are.equal(before.groups[i].lr, g.lr)
      assert.are.equal(before.groups[i].eps, g.eps)
    end
    local n = 0
    for p, st in pairs(opt.state) do
      n = n + 1
      assert.are.equal(before.state[p].step, st.step)
      assert.is_true(lt.equal(before.state[p].exp_avg, st.exp_avg))
    end
    local m = 0
    for _ in pairs(before.state) do m = m + 1 end
    assert.are.equal(m, n)
  end

  it("refuses state of the wrong shape, naming the index, the key and both shapes", function()
    local opt = trained_adam()
    local before = snapshot(opt)
    local sd = trained_adam():state_dict()
    sd.param_groups[1].lr = 0.5
    sd.state[0].exp_avg = lt.zeros(3)
    assert.has_error(function() opt:load_state_dict(sd) end,
      "Adam: load_state_dict: state[0].exp_avg has shape [3], but parameter 0 has shape [2, 2]")
    unchanged(opt, before)
    -- state made for a model of another shape
    local other = trained_adam({ 4 }):state_dict()
    assert.has_error(function() opt:load_state_dict(other) end,
      "Adam: load_state_dict: state[0].exp_avg has shape [4], but parameter 0 has shape [2, 2]")
    unchanged(opt, before)
  end)

  it("refuses non-floating state, missing keys and bad steps", function()
    local opt = trained_adam()
    local before = snapshot(opt)
    local function with(edit)
      local sd = trained_adam():state_dict()
      edit(sd)
      return message_of(function() opt:load_state_dict(sd) end)
    end
    assert.are.equal("Adam: load_state_dict: state[1].exp_avg_sq has dtype int64, but parameter 1 is float32 (state must be floating)",
      with(function(sd) sd.state[1].exp_avg_sq = lt.zeros(2, { dtype = "int64" }) end):gsub("^.-: Adam", "Adam"))
    assert.matches("state%[0%] has no 'exp_avg_sq' %(Adam keeps step, exp_avg, exp_avg_sq per parameter%)",
      with(function(sd) sd.state[0].exp_avg_sq = nil end))
    assert.matches("state%[0%] has no 'max_exp_avg_sq'",
      with(function(sd) sd.param_groups[1].amsgrad = true end))
    assert.matches("state%[0%].step must be a non%-negative count, got %-1",
      with(function(sd) sd.state[0].step = -1 end))
    assert.matches("state%[0%].step must be a number or a one%-element tensor, got shape %[2%]",
      with(function(sd) sd.state[0].step = lt.zeros(2) end))
    assert.matches("state%[0%].exp_avg must be a Tensor, got table",
      with(function(sd) sd.state[0].exp_avg = { 1, 2 } end))
    assert.matches("Adam: Invalid learning rate: %-1 %(loaded parameter group 1%)",
      with(function(sd) sd.param_groups[1].lr = -1 end))
    assert.matches("param_groups%[1%] must be a table with a 'params' list",
      with(function(sd) sd.param_groups[1].params = nil end))
    unchanged(opt, before)
  end)

  it("casts floating state to the parameter's dtype and copies it", function()
    local opt, w = trained_adam()
    local sd = trained_adam():state_dict()
    sd.state[0].exp_avg = lt.full({ 2, 2 }, 0.25, { dtype = "float64" })
    opt:load_state_dict(sd)
    assert.are.equal("float32", opt.state[w].exp_avg.dtype)
    sd.state[0].exp_avg:fill_(7)
    assert.are.same({ { 0.25, 0.25 }, { 0.25, 0.25 } }, opt.state[w].exp_avg:tolist())
  end)

  it("reads PyTorch's None momentum_buffer as no buffer yet", function()
    local None = require("lantern.serialization").None
    local p = lt.ones(2, { requires_grad = true })
    local opt = optim.SGD({ p }, { lr = 0.1, momentum = 0.9 })
    opt:load_state_dict({ state = { [0] = { momentum_buffer = None } },
      param_groups = { { params = { 0 }, lr = 0.1, momentum = 0.9, dampening = 0, weight_decay = 0,
        nesterov = false, maximize = false } } })
    assert.is_nil(opt.state[p].momentum_buffer)
    p.grad = lt.ones(2)
    opt:step()
    assert.are.same({ 1, 1 }, opt.state[p].momentum_buffer:tolist())
  end)

  it("refuses tables that are not state dicts", function()
    local opt = sgd()
    assert.has_error(function() opt:load_state_dict(5) end,
      "SGD: load_state_dict expects a table with 'state' and 'param_groups'")
    assert.has_error(function() opt:load_state_dict({ state = {}, param_groups = { 3 } }) end,
      "SGD: load_state_dict: param_groups[1] must be a table with a 'params' list")
  end)
end)

describe("scheduler arguments", function()
  local every = {
    function(o, x) return S.StepLR(o, 2, x) end,
    function(o, x) return S.MultiStepLR(o, { 2 }, x) end,
    function(o, x) return S.ConstantLR(o, x) end,
    function(o, x) return S.LinearLR(o, x) end,
    function(o, x) return S.ExponentialLR(o, 0.9, x) end,
    function(o, x) return S.PolynomialLR(o, x) end,
    function(o, x) return S.CosineAnnealingLR(o, 10, x) end,
    function(o, x) return S.CosineAnnealingWarmRestarts(o, 10, x) end,
    function(o, x) return S.LambdaLR(o, function() return 1 end, x) end,
    function(o, x) return S.MultiplicativeLR(o, function() return 1 end, x) end,
    function(o, x) return S.CyclicLR(o, 0.01, 0.1, x) end,
    function(o, x) return S.OneCycleLR(o, 0.1, x or { total_steps = 10 }) end,
    function(o, x) return S.ReduceLROnPlateau(o, x) end,
    function(o, x) return S.SequentialLR(o, { S.ConstantLR(o), S.ConstantLR(o) }, { 2 }, x) end,
    function(o, x) return S.ChainedScheduler({ S.ConstantLR(o) }, x) end,
  }

  it("every scheduler refuses unknown options and leaves the optimiser alone", function()
    for i, make in ipairs(every) do
      local o = sgd()
      local err = message_of(function() make(o, { verbos = true }) end)
      assert(err:find("unknown option 'verbos'", 1, true), i .. ": " .. err)
      if i ~= 14 and i ~= 15 then   -- the combined ones' parts were made, and stepped
        assert.is_nil(o.param_groups[1].initial_lr, "scheduler " .. i)
        assert.are.equal(0.1, o.param_groups[1].lr)
      end
      assert.matches("options must be a table", message_of(function() make(o, 5) end))
      assert.is_truthy(make(sgd()):get_last_lr()[1])
    end
    assert.matches("did you mean 'gamma'", message_of(function() S.StepLR(sgd(), 2, { gama = 0.5 }) end))
    assert.matches("did you mean 'T_mult'", message_of(function() S.CosineAnnealingWarmRestarts(sgd(), 2, { T_mul = 2 }) end))
  end)

  it("refuse what is not an optimiser, and bad required arguments", function()
    assert.has_error(function() S.StepLR(5, 2) end, "StepLR: number is not an Optimizer")
    assert.has_error(function() S.CyclicLR({}, 0.1, 1) end, "CyclicLR: table is not an Optimizer")
    assert.has_error(function() S.StepLR(sgd(), 0) end, "StepLR: step_size must be a positive integer, got 0")
    assert.has_error(function() S.StepLR(sgd(), 2.5) end, "StepLR: step_size must be a positive integer, got 2.5")
    assert.has_error(function() S.MultiStepLR(sgd(), 3) end, "MultiStepLR: milestones must be a list of integers, got number")
    assert.has_error(function() S.ExponentialLR(sgd()) end, "ExponentialLR: gamma must be a number, got nil")
    assert.has_error(function() S.CosineAnnealingLR(sgd(), 0) end, "CosineAnnealingLR: T_max must be a positive number, got 0")
    assert.has_error(function() S.CosineAnnealingWarmRestarts(sgd(), 2.5) end,
      "CosineAnnealingWarmRestarts: Expected positive integer T_0, but got 2.5")
    assert.has_error(function() S.PolynomialLR(sgd(), { total_iters = 0 }) end,
      "PolynomialLR: total_iters must be a positive integer, got 0")
    assert.matches("a factor of 0 cannot be undone", message_of(function() S.ConstantLR(sgd(), { factor = 0 }) end))
    assert.matches("greater than 0", message_of(function() S.LinearLR(sgd(), { start_factor = 0 }) end))
    assert.has_error(function() S.LambdaLR(sgd(), 3) end,
      "LambdaLR: lr_lambda must be a function or a list of functions, got number")
    assert.matches("lr_lambda 1 returned nil for epoch 0, expected a number",
      message_of(function() S.LambdaLR(sgd(), function() end) end))
    assert.matches("mode is invalid and scale_fn is nil",
      message_of(function() S.CyclicLR(sgd(), 0.01, 0.1, { mode = "zigzag" }) end))
    assert.matches("scale_mode must be 'cycle' or 'iterations'",
      message_of(function() S.CyclicLR(sgd(), 0.01, 0.1, { scale_fn = math.abs, scale_mode = "epoch" }) end))
    assert.matches("anneal_strategy must be one of 'cos' or 'linear', instead got \"cosine\"",
      message_of(function() S.OneCycleLR(sgd(), 1, { total_steps = 5, anneal_strategy = "cosine" }) end))
    assert.has_error(function() S.StepLR(sgd(), 2, { last_epoch = 3 }) end,
      "StepLR: param 'initial_lr' is not specified in param_groups[1] when resuming an optimizer")
    assert.has_error(function() S.StepLR(sgd(), 2, { last_epoch = -2 }) end,
      "StepLR: last_epoch must be an integer >= -1, got -2")
    assert.has_error(function() S.StepLR(sgd(), 2):step("x") end,
      "StepLR: step(epoch): epoch must be a number, got string")
    assert.has_error(function() S.ReduceLROnPlateau(sgd()):step() end,
      "ReduceLROnPlateau: step expects a metric (a number or a one-element tensor), got nil")
  end)

  it("CyclicLR and OneCycleLR say how to use an optimiser without momentum", function()
    assert.matches("Adam has no momentum; pass {cycle_momentum = false}",
      message_of(function() S.CyclicLR(optim.Adam({ param() }), 0.01, 0.1) end))
    assert.matches("Adagrad has neither momentum nor betas",
      message_of(function() S.OneCycleLR(optim.Adagrad({ param() }), 1, { total_steps = 4 }) end))
    local o = optim.Adagrad({ param() })
    S.OneCycleLR(o, 1, { total_steps = 4, cycle_momentum = false })
    assert.is_true(math.abs(o.param_groups[1].lr - 1 / 25) < 1e-16)
  end)

  it("SequentialLR and ChainedScheduler check their schedulers", function()
    local o = sgd()
    assert.matches("got one scheduler %(wrap it: {s}%)",
      message_of(function() S.ChainedScheduler(S.ConstantLR(o)) end))
    assert.matches("non%-empty list", message_of(function() S.ChainedScheduler({}) end))
    assert.matches("got number at position 2",
      message_of(function() S.SequentialLR(o, { S.ConstantLR(o), 5 }, { 1 }) end))
    assert.matches("ReduceLROnPlateau %(position 1%) steps on a metric",
      message_of(function() S.ChainedScheduler({ S.ReduceLROnPlateau(o) }) end))
    assert.matches("milestones must be increasing integers, got 2 at position 2",
      message_of(function()
        S.SequentialLR(o, { S.ConstantLR(o), S.ConstantLR(o), S.ConstantLR(o) }, { 5, 2 })
      end))
    assert.has_error(function() S.ChainedScheduler({ S.ConstantLR(o) }):step(3) end,
      "ChainedScheduler: step() takes no epoch")
  end)
end)
