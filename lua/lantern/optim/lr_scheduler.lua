--- Learning-rate schedulers (`lt.optim.lr_scheduler`) with PyTorch's names, arguments and
-- `step()` arithmetic. Required arguments are positional, the rest go in a trailing options
-- table (`StepLR(opt, 10, {gamma = 0.5})`). Construction performs the initial step (epoch 0),
-- as in PyTorch, setting each group's `initial_lr`. `step()` uses PyTorch's chainable forms,
-- which read and scale each group's current lr, so schedulers compose (`ChainedScheduler`,
-- `SequentialLR`) and the lrs equal PyTorch's to the last bit; `step(epoch)` uses the closed
-- forms where PyTorch has them. Unknown options and bad arguments (with PyTorch's messages)
-- are errors; a step that fails changes nothing.
--
--     local sched = lt.optim.lr_scheduler
--     local opt = lt.optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
--     local s = sched.CosineAnnealingLR(opt, epochs)
--     for epoch = 1, epochs do
--       train_one_epoch(opt)
--       s:step()
--     end
-- @module lantern.optim.lr_scheduler
-- @alias sched
local check = require "lantern.optim.check"
local fail, typename, show = check.fail, check.typename, check.show

local sched = {}

--- What every scheduler has (PyTorch's `LRScheduler`): `s.optimizer`, `s.last_epoch`,
-- `s.base_lrs` (the groups' `initial_lr`), and the methods below. Each class computes its
-- lrs in `s:get_lr()` (the chainable form, called by step).
-- @type Scheduler
local Scheduler = {}
Scheduler.__index = Scheduler

local function class(name, parent)
  local cls = setmetatable({ __name = name }, { __index = parent or Scheduler,
    __call = function(c, ...) return c.new(c, ...) end })
  cls.__index = cls
  return cls
end

-- argument checks ---------------------------------------------------------------------

local function check_optimizer(name, opt)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    fail("%s: %s is not an Optimizer", name, typename(opt))
  end
end

local function number_arg(name, key, v)
  if type(v) ~= "number" then fail("%s: %s must be a number, got %s", name, key, typename(v)) end
  return v
end

local function positive_int(name, key, v)
  local n = check.integer(v)
  if not n or n < 1 then fail("%s: %s must be a positive integer, got %s", name, key, show(v)) end
  return n
end

local function last_epoch_arg(name, v)
  if v == nil then return -1 end
  local n = check.integer(v)
  if not n or n < -1 then fail("%s: last_epoch must be an integer >= -1, got %s", name, show(v)) end
  return n
end

local function boolean_arg(name, key, v, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then fail("%s: %s must be a boolean, got %s", name, key, typename(v)) end
  return v
end

-- A number, or a list of one number per parameter group (PyTorch's _format_param).
local function per_group(name, key, opt, v)
  local n = #opt.param_groups
  local out = {}
  if type(v) == "table" then
    if #v ~= n then fail("%s: expected %d values for %s, got %d", name, n, key, #v) end
    for i = 1, n do out[i] = number_arg(name, key, v[i]) end
  else
    number_arg(name, key, v)
    for i = 1, n do out[i] = v end
  end
  return out
end

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

-- One function per group, from a function or a list of them.
local function lambdas(name, opt, fns)
  local n = #opt.param_groups
  local out = {}
  if callable(fns) then
    for i = 1, n do out[i] = fns end
  elseif type(fns) == "table" then
    if #fns ~= n then fail("%s: Expected %d lr_lambdas, but got %d", name, n, #fns) end
    for i = 1, n do
      if not callable(fns[i]) then
        fail("%s: lr_lambda %d must be a function, got %s", name, i, typename(fns[i]))
      end
      out[i] = fns[i]
    end
  else
    fail("%s: lr_lambda must be a function or a list of functions, got %s", name, typename(fns))
  end
  return out
end

local function call_lambda(self, i)
  local f = self.lr_lambdas[i](self.last_epoch)
  if type(f) ~= "number" then
    fail("%s: lr_lambda %d returned %s for epoch %s, expected a number", self.__name, i, typename(f),
      tostring(self.last_epoch))
  end
  return f
end

-- the base class ---------------------------------------------------------------------

local function group_lrs(opt)
  local out = {}
  for i, g in ipairs(opt.param_groups) do out[i] = g.lr end
  return out
end

-- PyTorch's _LRScheduler.__init__ up to (not including) the initial step; called once every
-- argument is checked, since it writes initial_lr into the groups.
local function init(cls, opt, last_epoch)
  local groups = opt.param_groups
  if last_epoch ~= -1 then
    for i, g in ipairs(groups) do
      if g.initial_lr == nil then
        fail("%s: param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer",
          cls.__name, i)
      end
    end
  end
  local self = setmetatable({ optimizer = opt, last_epoch = last_epoch }, cls)
  self.base_lrs = {}
  for i, g in ipairs(groups) do
    if g.initial_lr == nil then g.initial_lr = g.lr end
    self.base_lrs[i] = g.initial_lr
  end
  return self
end

function Scheduler:_initial_step()
  self._step_count = 0
  self:step()
end

local function start(self)
  self:_initial_step()
  return self
end

local function compute(self, epoch)
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    return self:get_lr()
  end
  self.last_epoch = epoch
  if self._get_closed_form_lr then return self:_get_closed_form_lr() end
  return self:get_lr()
end

--- Advances one step and writes the new lrs into the optimiser's groups. `step(epoch)` jumps
-- to `epoch` (the closed form where PyTorch has one). A step that fails changes nothing.
-- @number[opt] epoch
function Scheduler:step(epoch)
  if epoch ~= nil and type(epoch) ~= "number" then
    fail("%s: step(epoch): epoch must be a number, got %s", self.__name, typename(epoch))
  end
  local last, count = self.last_epoch, self._step_count
  self._step_count = count + 1
  local ok, values = pcall(compute, self, epoch)
  if not ok then
    self.last_epoch, self._step_count = last, count
    error(values, 0)
  end
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = values[i] end
  self._last_lr = group_lrs(self.optimizer)
end

--- The lrs the last step set, one per parameter group.
-- @treturn table
function Scheduler:get_last_lr()
  local out = {}
  for i, v in ipairs(self._last_lr) do out[i] = v end
  return out
end

-- Plain data only: functions (lambdas, scale_fn) are code, not state, as PyTorch drops them.
local function copy_data(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do
    if type(x) ~= "function" then t[k] = copy_data(x) end
  end
  return t
end

--- Every field but the optimiser (and functions), as PyTorch's `__dict__` minus optimizer:
-- plain data (lambdas and `scale_fn` are code, not state). `SequentialLR` and
-- `ChainedScheduler` save their schedulers' states.
-- @treturn table
function Scheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and type(v) ~= "function" then sd[k] = copy_data(v) end
  end
  return sd
end

--- Restores the fields of a `state_dict()`; keys that would hide a method, the optimiser or a
-- function the scheduler was given are ignored.
-- @tab sd
function Scheduler:load_state_dict(sd)
  if type(sd) ~= "table" then
    fail("%s: load_state_dict expects a table, got %s", self.__name, typename(sd))
  end
  for k, v in pairs(sd) do
    if k ~= "optimizer" and type(self[k]) ~= "function" then self[k] = copy_data(v) end
  end
end

local function map_base(self, f)
  local out = {}
  for i, base in ipairs(self.base_lrs) do out[i] = f(base, i) end
  return out
end

local function map_group(self, f)
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do out[i] = f(g.lr, i) end
  return out
end

local function same_lrs(self) return group_lrs(self.optimizer) end

-- LambdaLR ---------------------------------------------------------------------

---------------------------------------------------------------------------------------------
--- The schedulers. Each is called as `Name(optimizer, ...)` and has the methods of
-- Scheduler above.
-- @section schedulers

--- `lr = initial_lr * lr_lambda(epoch)`.
-- @function LambdaLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @param lr_lambda a function of the epoch, or a list of one per group
-- @tparam[opt] table opts `last_epoch` (-1; to resume, with `initial_lr` in the groups)
-- @usage sched.LambdaLR(opt, function(epoch) return 0.95 ^ epoch end)
sched.LambdaLR = class("LambdaLR")
function sched.LambdaLR.new(cls, opt, lr_lambda, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local fns = lambdas(name, opt, lr_lambda)
  local self = init(cls, opt, last)
  self.lr_lambdas = fns
  return start(self)
end
function sched.LambdaLR:get_lr()
  return map_base(self, function(b, i) return b * call_lambda(self, i) end)
end
function sched.LambdaLR:state_dict()
  local sd = Scheduler.state_dict(self)
  sd.lr_lambdas = nil
  return sd
end

-- MultiplicativeLR ---------------------------------------------------------------------

--- Each step multiplies the lr by `lr_lambda(epoch)`.
-- @function MultiplicativeLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @param lr_lambda a function of the epoch, or a list of one per group
-- @tparam[opt] table opts `last_epoch` (-1; to resume, with `initial_lr` in the groups)
sched.MultiplicativeLR = class("MultiplicativeLR")
sched.MultiplicativeLR.new = sched.LambdaLR.new
sched.MultiplicativeLR.state_dict = sched.LambdaLR.state_dict
function sched.MultiplicativeLR:get_lr()
  if self.last_epoch > 0 then
    return map_group(self, function(lr, i) return lr * call_lambda(self, i) end)
  end
  return same_lrs(self)
end

-- StepLR ---------------------------------------------------------------------

--- Multiplies the lr by `gamma` every `step_size` epochs.
-- @function StepLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @int step_size
-- @tparam[opt] table opts `gamma` (0.1), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
-- @usage sched.StepLR(opt, 30, {gamma = 0.1})   -- lr / 10 at epochs 30, 60, ...
sched.StepLR = class("StepLR")
function sched.StepLR.new(cls, opt, step_size, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "gamma", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  step_size = positive_int(name, "step_size", step_size)
  local gamma = number_arg(name, "gamma", o.gamma == nil and 0.1 or o.gamma)
  local self = init(cls, opt, last)
  self.step_size, self.gamma = step_size, gamma
  return start(self)
end
function sched.StepLR:get_lr()
  if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return same_lrs(self) end
  return map_group(self, function(lr) return lr * self.gamma end)
end
function sched.StepLR:_get_closed_form_lr()
  return map_base(self, function(b) return b * self.gamma ^ (self.last_epoch // self.step_size) end)
end

-- MultiStepLR ---------------------------------------------------------------------

--- Multiplies the lr by `gamma` at each milestone (a milestone given twice decays twice
-- there).
-- @function MultiStepLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @tab milestones increasing epochs
-- @tparam[opt] table opts `gamma` (0.1), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
sched.MultiStepLR = class("MultiStepLR")
function sched.MultiStepLR.new(cls, opt, milestones, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "gamma", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  if type(milestones) ~= "table" then
    fail("%s: milestones must be a list of integers, got %s", name, typename(milestones))
  end
  local ms = {}
  for i = 1, #milestones do
    local m = check.integer(milestones[i])
    if not m then
      fail("%s: milestones must be a list of integers, got %s at position %d", name, show(milestones[i]), i)
    end
    ms[i] = m
  end
  table.sort(ms)
  local gamma = number_arg(name, "gamma", o.gamma == nil and 0.1 or o.gamma)
  local self = init(cls, opt, last)
  self.milestones, self.gamma = ms, gamma
  return start(self)
end
local function milestones_upto(self, e, exact)
  local k = 0
  for _, m in ipairs(self.milestones) do
    if m == e or (not exact and m < e) then k = k + 1 end
  end
  return k
end
function sched.MultiStepLR:get_lr()
  local k = milestones_upto(self, self.last_epoch, true)
  if k == 0 then return same_lrs(self) end
  return map_group(self, function(lr) return lr * self.gamma ^ k end)
end
function sched.MultiStepLR:_get_closed_form_lr()
  local k = milestones_upto(self, self.last_epoch, false)
  return map_base(self, function(b) return b * self.gamma ^ k end)
end

-- ConstantLR ---------------------------------------------------------------------

--- The lr times `factor` until epoch `total_iters`, then the lr itself.
-- @function ConstantLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @tparam[opt] table opts `factor` (1/3), `total_iters` (5), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
sched.ConstantLR = class("ConstantLR")
function sched.ConstantLR.new(cls, opt, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "factor", "total_iters", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local factor = number_arg(name, "factor", o.factor == nil and 1.0 / 3 or o.factor)
  if not (factor >= 0 and factor <= 1) then
    fail("%s: Constant multiplicative factor expected to be between 0 and 1. Got %s.", name, tostring(factor))
  end
  if factor == 0 then
    -- PyTorch accepts it, then divides by it at total_iters
    fail("%s: a factor of 0 cannot be undone at total_iters (the lr would be 0/0); use a small factor", name)
  end
  local total = positive_int(name, "total_iters", o.total_iters == nil and 5 or o.total_iters)
  local self = init(cls, opt, last)
  self.factor, self.total_iters = factor, total
  return start(self)
end
function sched.ConstantLR:get_lr()
  local e = self.last_epoch
  if e == 0 then return map_group(self, function(lr) return lr * self.factor end) end
  if e ~= self.total_iters then return same_lrs(self) end
  return map_group(self, function(lr) return lr * (1.0 / self.factor) end)
end
function sched.ConstantLR:_get_closed_form_lr()
  local reached = self.last_epoch >= self.total_iters and (1 - self.factor) or 0.0
  return map_base(self, function(b) return b * (self.factor + reached) end)
end

-- LinearLR ---------------------------------------------------------------------

--- The lr times a factor going linearly from `start_factor` to `end_factor` over
-- `total_iters` epochs (a warm-up).
-- @function LinearLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @tparam[opt] table opts `start_factor` (1/3), `end_factor` (1), `total_iters` (5), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
sched.LinearLR = class("LinearLR")
function sched.LinearLR.new(cls, opt, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "start_factor", "end_factor", "total_iters", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local sf = number_arg(name, "start_factor", o.start_factor == nil and 1.0 / 3 or o.start_factor)
  local ef = number_arg(name, "end_factor", o.end_factor == nil and 1.0 or o.end_factor)
  if not (sf >= 0 and sf <= 1) then
    fail("%s: Starting multiplicative factor expected to be between 0 and 1. Got %s.", name, tostring(sf))
  end
  if sf == 0 then
    -- PyTorch 1.13 accepts it, then divides by it in the first step
    fail("%s: Starting multiplicative factor expected to be greater than 0 (a start of 0 divides by 0 in the first step)", name)
  end
  if not (ef >= 0 and ef <= 1) then
    fail("%s: Ending multiplicative factor expected to be between 0 and 1. Got %s.", name, tostring(ef))
  end
  local total = positive_int(name, "total_iters", o.total_iters == nil and 5 or o.total_iters)
  local self = init(cls, opt, last)
  self.start_factor, self.end_factor, self.total_iters = sf, ef, total
  return start(self)
end
function sched.LinearLR:get_lr()
  local e, sf, ef, total = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
  if e == 0 then return map_group(self, function(lr) return lr * sf end) end
  if e > total then return same_lrs(self) end
  return map_group(self, function(lr)
    return lr * (1.0 + (ef - sf) / (total * sf + (e - 1) * (ef - sf)))
  end)
end
function sched.LinearLR:_get_closed_form_lr()
  local sf, ef, total = self.start_factor, self.end_factor, self.total_iters
  return map_base(self, function(b)
    return b * (sf + (ef - sf) * math.min(total, self.last_epoch) / total)
  end)
end

-- ExponentialLR ---------------------------------------------------------------------

--- Multiplies the lr by `gamma` every epoch.
-- @function ExponentialLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @number gamma
-- @tparam[opt] table opts `last_epoch` (-1; to resume, with `initial_lr` in the groups)
sched.ExponentialLR = class("ExponentialLR")
function sched.ExponentialLR.new(cls, opt, gamma, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  gamma = number_arg(name, "gamma", gamma)
  local self = init(cls, opt, last)
  self.gamma = gamma
  return start(self)
end
function sched.ExponentialLR:get_lr()
  if self.last_epoch == 0 then return same_lrs(self) end
  return map_group(self, function(lr) return lr * self.gamma end)
end
function sched.ExponentialLR:_get_closed_form_lr()
  return map_base(self, function(b) return b * self.gamma ^ self.last_epoch end)
end

-- PolynomialLR ---------------------------------------------------------------------

--- `lr * (1 - epoch / total_iters)^power` until total_iters.
-- @function PolynomialLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @tparam[opt] table opts `total_iters` (5), `power` (1), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
sched.PolynomialLR = class("PolynomialLR")
function sched.PolynomialLR.new(cls, opt, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "total_iters", "power", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local total = positive_int(name, "total_iters", o.total_iters == nil and 5 or o.total_iters)
  local power = number_arg(name, "power", o.power == nil and 1.0 or o.power)
  local self = init(cls, opt, last)
  self.total_iters, self.power = total, power
  return start(self)
end
function sched.PolynomialLR:get_lr()
  local e, total = self.last_epoch, self.total_iters
  if e == 0 or e > total then return same_lrs(self) end
  local decay = ((1.0 - e / total) / (1.0 - (e - 1) / total)) ^ self.power
  return map_group(self, function(lr) return lr * decay end)
end
function sched.PolynomialLR:_get_closed_form_lr()
  local total = self.total_iters
  return map_base(self, function(b)
    return b * (1.0 - math.min(total, self.last_epoch) / total) ^ self.power
  end)
end

-- CosineAnnealingLR ---------------------------------------------------------------------

--- Cosine annealing from the lr down to `eta_min` over `T_max` epochs:
-- `eta_min + (lr - eta_min) (1 + cos(pi epoch / T_max)) / 2` (in PyTorch's chainable form).
-- @function CosineAnnealingLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @int T_max
-- @tparam[opt] table opts `eta_min` (0), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
sched.CosineAnnealingLR = class("CosineAnnealingLR")
function sched.CosineAnnealingLR.new(cls, opt, T_max, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "eta_min", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  if type(T_max) ~= "number" or not (T_max > 0) then
    fail("%s: T_max must be a positive number, got %s", name, show(T_max))
  end
  local eta_min = number_arg(name, "eta_min", o.eta_min == nil and 0 or o.eta_min)
  local self = init(cls, opt, last)
  self.T_max, self.eta_min = T_max, eta_min
  return start(self)
end
function sched.CosineAnnealingLR:get_lr()
  local e, T, eta, pi = self.last_epoch, self.T_max, self.eta_min, math.pi
  if e == 0 then return same_lrs(self) end
  local groups = self.optimizer.param_groups
  local out = {}
  if self._step_count == 1 and e > 0 then
    for i, b in ipairs(self.base_lrs) do out[i] = eta + (b - eta) * (1 + math.cos(e * pi / T)) / 2 end
  elseif (e - 1 - T) % (2 * T) == 0 then
    for i, b in ipairs(self.base_lrs) do
      out[i] = groups[i].lr + (b - eta) * (1 - math.cos(pi / T)) / 2
    end
  else
    for i, g in ipairs(groups) do
      out[i] = (1 + math.cos(pi * e / T)) / (1 + math.cos(pi * (e - 1) / T)) * (g.lr - eta) + eta
    end
  end
  return out
end
function sched.CosineAnnealingLR:_get_closed_form_lr()
  local eta = self.eta_min
  return map_base(self, function(b)
    return eta + (b - eta) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end)
end

-- CosineAnnealingWarmRestarts ---------------------------------------------------------------------

--- Cosine annealing restarted every `T_i` epochs, with `T_0` first and each period `T_mult`
-- times the last. `step()` advances an epoch; `step(epoch)` takes a fractional epoch
-- (`epoch + batch / batches`), which anneals within the epoch (see
-- `CosineAnnealingWarmRestarts:step(`).
-- @function CosineAnnealingWarmRestarts
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @int T_0
-- @tparam[opt] table opts `T_mult` (1, an integer), `eta_min` (0), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
-- @usage local s = sched.CosineAnnealingWarmRestarts(opt, 10, {T_mult = 2})
-- for epoch = 0, 29 do for b = 1, nb do train(b); s:step(epoch + b / nb) end end
sched.CosineAnnealingWarmRestarts = class("CosineAnnealingWarmRestarts")
function sched.CosineAnnealingWarmRestarts.new(cls, opt, T_0, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "T_mult", "eta_min", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local t0 = check.integer(T_0)
  if not t0 or t0 <= 0 then fail("%s: Expected positive integer T_0, but got %s", name, show(T_0)) end
  local mult = o.T_mult == nil and 1 or check.integer(o.T_mult)
  if not mult or mult < 1 then
    fail("%s: Expected integer T_mult >= 1, but got %s", name, show(o.T_mult))
  end
  local eta_min = number_arg(name, "eta_min", o.eta_min == nil and 0 or o.eta_min)
  local self = init(cls, opt, last)
  self.T_0, self.T_i, self.T_mult, self.eta_min, self.T_cur = t0, t0, mult, eta_min, last
  return start(self)
end
function sched.CosineAnnealingWarmRestarts:get_lr()
  local eta = self.eta_min
  return map_base(self, function(b)
    return eta + (b - eta) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
  end)
end
--- Steps to the next epoch, or to `epoch` (a number, fractional for a position within an
-- epoch).
-- @function CosineAnnealingWarmRestarts:step
-- @number[opt] epoch
function sched.CosineAnnealingWarmRestarts:step(epoch)
  local name = self.__name
  if epoch ~= nil and type(epoch) ~= "number" then
    fail("%s: step(epoch): epoch must be a number, got %s", name, typename(epoch))
  end
  if epoch == nil and self.last_epoch < 0 then epoch = 0 end
  if epoch == nil then
    epoch = self.last_epoch + 1
    self.T_cur = self.T_cur + 1
    if self.T_cur >= self.T_i then
      self.T_cur = self.T_cur - self.T_i
      self.T_i = self.T_i * self.T_mult
    end
  else
    if not (epoch >= 0) then fail("%s: Expected non-negative epoch, but got %s", name, tostring(epoch)) end
    local t0, mult = self.T_0, self.T_mult
    if epoch >= t0 then
      if mult == 1 then
        self.T_cur = epoch % t0
      else
        -- Python's math.log(x, base) is log(x)/log(base); Lua's log2 for base 2 rounds
        -- differently and int() truncates
        local n = math.tointeger(math.floor(math.log(epoch / t0 * (mult - 1) + 1) / math.log(mult)))
        local p = 1
        for _ = 1, n do p = p * mult end
        self.T_cur = epoch - t0 * (p - 1) / (mult - 1)
        self.T_i = t0 * p
      end
    else
      self.T_i = t0
      self.T_cur = epoch
    end
  end
  self.last_epoch = math.floor(epoch)
  local lrs = self:get_lr()
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i] end
  self._last_lr = group_lrs(self.optimizer)
end

-- CyclicLR ---------------------------------------------------------------------

--- Cycles the lr between `base_lr` and `max_lr` (per batch), rising over `step_size_up`
-- steps and falling over `step_size_down`; `"triangular"` keeps the amplitude,
-- `"triangular2"` halves it each cycle, `"exp_range"` scales it by `gamma^step`, or
-- `scale_fn(x)` gives it. With `cycle_momentum` (default true) the momentum of SGD and
-- RMSprop (also when it was 0) cycles inversely between `max_momentum` and `base_momentum`;
-- as in PyTorch 1.13, Adam needs `{cycle_momentum = false}`. `s:scale_fn(x)` is the amplitude
-- at cycle (or step) x.
-- @function CyclicLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @param base_lr a number or one per group
-- @param max_lr a number or one per group
-- @tparam[opt] table opts `step_size_up` (2000), `step_size_down` (`step_size_up`), `mode`
-- (`"triangular"`), `gamma` (1), `scale_fn`, `scale_mode` (`"cycle"` or `"iterations"`),
-- `cycle_momentum` (true), `base_momentum` (0.8), `max_momentum` (0.9), `last_epoch` (-1; to resume, with `initial_lr` in the groups)
-- @usage sched.CyclicLR(opt, 0.001, 0.1, {step_size_up = 500, mode = "triangular2"})
sched.CyclicLR = class("CyclicLR")
local CYCLIC_MODES = { triangular = "cycle", triangular2 = "cycle", exp_range = "iterations" }
function sched.CyclicLR.new(cls, opt, base_lr, max_lr, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "step_size_up", "step_size_down", "mode", "gamma", "scale_fn",
    "scale_mode", "cycle_momentum", "base_momentum", "max_momentum", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local base_lrs = per_group(name, "base_lr", opt, base_lr)
  local max_lrs = per_group(name, "max_lr", opt, max_lr)
  local up = number_arg(name, "step_size_up", o.step_size_up == nil and 2000 or o.step_size_up)
  local down = o.step_size_down == nil and up or number_arg(name, "step_size_down", o.step_size_down)
  if not (up > 0) or not (down > 0) then
    fail("%s: step_size_up and step_size_down must be positive, got %s and %s", name, tostring(up),
      tostring(down))
  end
  local mode = o.mode == nil and "triangular" or o.mode
  local scale_fn = o.scale_fn
  if scale_fn ~= nil and not callable(scale_fn) then
    fail("%s: scale_fn must be a function, got %s", name, typename(scale_fn))
  end
  if scale_fn == nil and not CYCLIC_MODES[mode] then
    fail("%s: mode is invalid and scale_fn is nil: expected 'triangular', 'triangular2' or 'exp_range', got %s",
      name, show(mode))
  end
  local scale_mode = o.scale_mode == nil and "cycle" or o.scale_mode
  if scale_mode ~= "cycle" and scale_mode ~= "iterations" then
    fail("%s: scale_mode must be 'cycle' or 'iterations', got %s", name, show(scale_mode))
  end
  local gamma = number_arg(name, "gamma", o.gamma == nil and 1.0 or o.gamma)
  local cycle_momentum = boolean_arg(name, "cycle_momentum", o.cycle_momentum, true)
  local base_m, max_m
  if cycle_momentum then
    if opt.defaults == nil or opt.defaults.momentum == nil then
      fail("%s: optimizer must support momentum with `cycle_momentum` option enabled (%s has no momentum; pass {cycle_momentum = false})",
        name, opt.__name or "this optimizer")
    end
    base_m = per_group(name, "base_momentum", opt, o.base_momentum == nil and 0.8 or o.base_momentum)
    max_m = per_group(name, "max_momentum", opt, o.max_momentum == nil and 0.9 or o.max_momentum)
  end

  if last == -1 then
    for i, g in ipairs(opt.param_groups) do g.lr = base_lrs[i] end
  end
  local self = init(cls, opt, last)
  self.max_lrs = max_lrs
  self.total_size = up + down + 0.0
  self.step_ratio = up / self.total_size
  self.mode, self.gamma = mode, gamma
  self._scale_fn_custom = scale_fn
  self.scale_mode = scale_fn and scale_mode or CYCLIC_MODES[mode]
  self.cycle_momentum = cycle_momentum
  if cycle_momentum then
    if last == -1 then
      for i, g in ipairs(opt.param_groups) do g.momentum = base_m[i] end
    end
    self.base_momentums = {}
    for i, g in ipairs(opt.param_groups) do self.base_momentums[i] = g.momentum end
    self.max_momentums = max_m
  end
  -- as in PyTorch, the initial step runs with base_lrs taken from initial_lr, then base_lr
  start(self)
  self.base_lrs = base_lrs
  return self
end
function sched.CyclicLR:scale_fn(x)
  if self._scale_fn_custom then
    local v = self._scale_fn_custom(x)
    if type(v) ~= "number" then
      fail("%s: scale_fn returned %s for %s, expected a number", self.__name, typename(v), tostring(x))
    end
    return v
  end
  if self.mode == "triangular" then return 1.0 end
  if self.mode == "triangular2" then return 1 / (2.0 ^ (x - 1)) end
  return self.gamma ^ x
end
function sched.CyclicLR:get_lr()
  local e = self.last_epoch
  local cycle = math.floor(1 + e / self.total_size)
  local x = 1.0 + e / self.total_size - cycle
  local factor
  if x <= self.step_ratio then
    factor = x / self.step_ratio
  else
    factor = (x - 1) / (self.step_ratio - 1)
  end
  local arg = self.scale_mode == "cycle" and cycle or e
  local lrs = {}
  for i, b in ipairs(self.base_lrs) do
    lrs[i] = b + (self.max_lrs[i] - b) * factor * self:scale_fn(arg)
  end
  if self.cycle_momentum then
    local momenta = {}
    for i, bm in ipairs(self.base_momentums) do
      local mm = self.max_momentums[i]
      momenta[i] = mm - (mm - bm) * factor * self:scale_fn(arg)
    end
    for i, g in ipairs(self.optimizer.param_groups) do g.momentum = momenta[i] end
  end
  return lrs
end

-- OneCycleLR ---------------------------------------------------------------------

--- The 1cycle policy (per batch): the lr rises from `max_lr / div_factor` to `max_lr` over
-- `pct_start` of the steps, then anneals to `initial_lr / final_div_factor` (with
-- `three_phase`, back to the initial lr first). The momentum of SGD and RMSprop or `betas[1]`
-- of Adam and AdamW cycles inversely (`cycle_momentum`); Adagrad needs
-- `{cycle_momentum = false}`. Stepping past `total_steps` raises.
-- @function OneCycleLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @param max_lr a number or one per group
-- @tparam table opts `total_steps`, or `epochs` and `steps_per_epoch`; `pct_start` (0.3),
-- `anneal_strategy` (`"cos"` or `"linear"`), `cycle_momentum` (true), `base_momentum` (0.85),
-- `max_momentum` (0.95), `div_factor` (25), `final_div_factor` (1e4), `three_phase` (false),
-- `last_epoch` (-1; to resume, with `initial_lr` in the groups)
-- @usage local s = sched.OneCycleLR(opt, 0.01, {epochs = 10, steps_per_epoch = #loader})
sched.OneCycleLR = class("OneCycleLR")
function sched.OneCycleLR.new(cls, opt, max_lr, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "total_steps", "epochs", "steps_per_epoch", "pct_start",
    "anneal_strategy", "cycle_momentum", "base_momentum", "max_momentum", "div_factor",
    "final_div_factor", "three_phase", "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local total
  if o.total_steps == nil and o.epochs == nil and o.steps_per_epoch == nil then
    fail("%s: You must define either total_steps OR (epochs AND steps_per_epoch)", name)
  elseif o.total_steps ~= nil then
    total = check.integer(o.total_steps)
    if not total or total <= 0 then
      fail("%s: Expected positive integer total_steps, but got %s", name, show(o.total_steps))
    end
  else
    local ep, spe = check.integer(o.epochs), check.integer(o.steps_per_epoch)
    if not ep or ep <= 0 then fail("%s: Expected positive integer epochs, but got %s", name, show(o.epochs)) end
    if not spe or spe <= 0 then
      fail("%s: Expected positive integer steps_per_epoch, but got %s", name, show(o.steps_per_epoch))
    end
    total = ep * spe
  end
  local pct = o.pct_start == nil and 0.3 or o.pct_start
  if type(pct) ~= "number" or not (pct >= 0 and pct <= 1) then
    fail("%s: Expected float between 0 and 1 pct_start, but got %s", name, show(pct))
  end
  local strategy = o.anneal_strategy == nil and "cos" or o.anneal_strategy
  if strategy ~= "cos" and strategy ~= "linear" then
    fail("%s: anneal_strategy must be one of 'cos' or 'linear', instead got %s", name, show(strategy))
  end
  local div = number_arg(name, "div_factor", o.div_factor == nil and 25.0 or o.div_factor)
  local fdiv = number_arg(name, "final_div_factor", o.final_div_factor == nil and 1e4 or o.final_div_factor)
  local three = boolean_arg(name, "three_phase", o.three_phase, false)
  local max_lrs = per_group(name, "max_lr", opt, max_lr)
  local cycle_momentum = boolean_arg(name, "cycle_momentum", o.cycle_momentum, true)
  local use_beta1, max_m, base_m
  if cycle_momentum then
    local d = opt.defaults or {}
    if d.momentum == nil and d.betas == nil then
      fail("%s: optimizer must support momentum with `cycle_momentum` option enabled (%s has neither momentum nor betas; pass {cycle_momentum = false})",
        name, opt.__name or "this optimizer")
    end
    use_beta1 = d.betas ~= nil
    max_m = per_group(name, "max_momentum", opt, o.max_momentum == nil and 0.95 or o.max_momentum)
    base_m = per_group(name, "base_momentum", opt, o.base_momentum == nil and 0.85 or o.base_momentum)
  end

  if last == -1 then
    for i, g in ipairs(opt.param_groups) do
      g.initial_lr = max_lrs[i] / div
      g.max_lr = max_lrs[i]
      g.min_lr = g.initial_lr / fdiv
    end
    if cycle_momentum then
      for i, g in ipairs(opt.param_groups) do
        -- a new table: the groups' betas may be shared with the defaults
        if use_beta1 then g.betas = { max_m[i], g.betas[2] } else g.momentum = max_m[i] end
        g.max_momentum, g.base_momentum = max_m[i], base_m[i]
      end
    end
  end
  local self = init(cls, opt, last)
  self.total_steps = total
  if three then
    self._schedule_phases = {
      { end_step = pct * total - 1, start_lr = "initial_lr", end_lr = "max_lr",
        start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = 2 * pct * total - 2, start_lr = "max_lr", end_lr = "initial_lr",
        start_momentum = "base_momentum", end_momentum = "max_momentum" },
      { end_step = total - 1, start_lr = "initial_lr", end_lr = "min_lr",
        start_momentum = "max_momentum", end_momentum = "max_momentum" },
    }
  else
    self._schedule_phases = {
      { end_step = pct * total - 1, start_lr = "initial_lr", end_lr = "max_lr",
        start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = total - 1, start_lr = "max_lr", end_lr = "min_lr",
        start_momentum = "base_momentum", end_momentum = "max_momentum" },
    }
  end
  self.anneal_strategy = strategy
  self.cycle_momentum, self.use_beta1 = cycle_momentum, use_beta1
  return start(self)
end
local function anneal(kind, s, e, pct)
  if kind == "cos" then return e + (s - e) / 2.0 * (math.cos(math.pi * pct) + 1) end
  return (e - s) * pct + s
end
function sched.OneCycleLR:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    fail("%s: Tried to step %d times. The specified number of total steps is %d", self.__name,
      step + 1, self.total_steps)
  end
  local phases, kind = self._schedule_phases, self.anneal_strategy
  local lrs, momenta = {}, {}
  for i, g in ipairs(self.optimizer.param_groups) do
    local start_step = 0
    for k, ph in ipairs(phases) do
      if step <= ph.end_step or k == #phases then
        local pct = (step - start_step) / (ph.end_step - start_step)
        lrs[i] = anneal(kind, g[ph.start_lr], g[ph.end_lr], pct)
        if self.cycle_momentum then
          momenta[i] = anneal(kind, g[ph.start_momentum], g[ph.end_momentum], pct)
        end
        break
      end
      start_step = ph.end_step
    end
  end
  if self.cycle_momentum then
    for i, g in ipairs(self.optimizer.param_groups) do
      if self.use_beta1 then g.betas = { momenta[i], g.betas[2] } else g.momentum = momenta[i] end
    end
  end
  return lrs
end

-- SequentialLR / ChainedScheduler ---------------------------------------------------------------------

local function scheduler_list(name, schedulers)
  if type(schedulers) ~= "table" then
    fail("%s: schedulers must be a list of schedulers, got %s", name, typename(schedulers))
  end
  if type(schedulers.step) == "function" then
    fail("%s: schedulers must be a list of schedulers, got one scheduler (wrap it: {s})", name)
  end
  local list = {}
  for i = 1, #schedulers do
    local s = schedulers[i]
    if type(s) ~= "table" or type(s.step) ~= "function" or type(s.optimizer) ~= "table" then
      fail("%s: schedulers must be a list of schedulers, got %s at position %d", name, typename(s), i)
    end
    if getmetatable(s) == sched.ReduceLROnPlateau then
      fail("%s: ReduceLROnPlateau (position %d) steps on a metric and cannot be combined", name, i)
    end
    list[i] = s
  end
  if #list == 0 then fail("%s: schedulers must be a non-empty list of schedulers", name) end
  return list
end

local function nested_state(self)
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k ~= "_schedulers" and type(v) ~= "function" then sd[k] = copy_data(v) end
  end
  sd._schedulers = {}
  for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
  return sd
end

local function load_nested(self, sd)
  if type(sd) ~= "table" then
    fail("%s: load_state_dict expects a table, got %s", self.__name, typename(sd))
  end
  local subs = sd._schedulers
  if type(subs) ~= "table" or #subs ~= #self._schedulers then
    fail("%s: load_state_dict expects '_schedulers' with %d state dicts, got %s", self.__name,
      #self._schedulers, type(subs) == "table" and tostring(#subs) or typename(subs))
  end
  for k, v in pairs(sd) do
    if k ~= "optimizer" and k ~= "_schedulers" and type(self[k]) ~= "function" then
      self[k] = copy_data(v)
    end
  end
  for i, s in ipairs(self._schedulers) do s:load_state_dict(subs[i]) end
end

--- `schedulers[i + 1]` takes over at `milestones[i]`, starting from its own epoch 0 (a
-- warm-up followed by a decay).
-- @function SequentialLR
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...) (the one every scheduler was made for)
-- @tab schedulers
-- @tab milestones one fewer than the schedulers
-- @tparam[opt] table opts `last_epoch` (-1; to resume, with `initial_lr` in the groups)
-- @usage local warm = sched.LinearLR(opt, {start_factor = 0.1, total_iters = 5})
-- local s = sched.SequentialLR(opt, {warm, sched.CosineAnnealingLR(opt, 95)}, {5})
sched.SequentialLR = class("SequentialLR")
function sched.SequentialLR.new(cls, opt, schedulers, milestones, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "last_epoch" })
  local last = last_epoch_arg(name, o.last_epoch)
  local list = scheduler_list(name, schedulers)
  for i, s in ipairs(list) do
    if s.optimizer ~= opt then
      fail("%s: Sequential Schedulers expects all schedulers to belong to the same optimizer, but got schedulers at index %d to be different than the optimizer passed in.",
        name, i)
    end
  end
  if type(milestones) ~= "table" then
    fail("%s: milestones must be a list of integers, got %s", name, typename(milestones))
  end
  if #milestones ~= #list - 1 then
    fail("%s: Sequential Schedulers expects number of schedulers provided to be one more than the number of milestone points, but got number of schedulers %d and the number of milestones to be equal to %d",
      name, #list, #milestones)
  end
  local ms = {}
  for i = 1, #milestones do
    local m = check.integer(milestones[i])
    if not m or (i > 1 and m < ms[i - 1]) then
      fail("%s: milestones must be increasing integers, got %s at position %d", name, show(milestones[i]), i)
    end
    ms[i] = m
  end
  for i, g in ipairs(opt.param_groups) do
    if g.initial_lr == nil then
      fail("%s: param 'initial_lr' is not specified in param_groups[%d]", name, i)
    end
  end
  local self = setmetatable({ optimizer = opt, _schedulers = list, _milestones = ms,
    last_epoch = last + 1 }, cls)
  for _, g in ipairs(opt.param_groups) do g.lr = g.initial_lr end
  -- undo the initial step each scheduler took when it was made
  for _, s in ipairs(list) do s.last_epoch = s.last_epoch - 1 end
  list[1]:_initial_step()
  self._last_lr = list[1]:get_last_lr()
  return self
end
function sched.SequentialLR:step(epoch)
  if epoch ~= nil then fail("%s: step() takes no epoch", self.__name) end
  self.last_epoch = self.last_epoch + 1
  local idx = 0
  for _, m in ipairs(self._milestones) do if m <= self.last_epoch then idx = idx + 1 end end
  local s = self._schedulers[idx + 1]
  if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
  self._last_lr = s:get_last_lr()
end
sched.SequentialLR.state_dict = nested_state
sched.SequentialLR.load_state_dict = load_nested

--- One `step()` steps every scheduler in turn, so their factors multiply.
-- @function ChainedScheduler
-- @tab schedulers of one optimiser
-- @tparam[opt] table opts none (an empty table is accepted)
-- @usage sched.ChainedScheduler({sched.ConstantLR(opt, {factor = 0.5}), sched.ExponentialLR(opt, 0.9)})
sched.ChainedScheduler = class("ChainedScheduler")
function sched.ChainedScheduler.new(cls, schedulers, o)
  local name = cls.__name
  check.options(name, o, {})
  local list = scheduler_list(name, schedulers)
  for i = 2, #list do
    if list[i].optimizer ~= list[1].optimizer then
      fail("%s: ChainedScheduler expects all schedulers to belong to the same optimizer, but got schedulers at index 1 and %d to be different",
        name, i)
    end
  end
  local self = setmetatable({ optimizer = list[1].optimizer, _schedulers = list }, cls)
  self._last_lr = group_lrs(self.optimizer)
  return self
end
function sched.ChainedScheduler:step(epoch)
  if epoch ~= nil then fail("%s: step() takes no epoch", self.__name) end
  for _, s in ipairs(self._schedulers) do s:step() end
  self._last_lr = group_lrs(self.optimizer)
end
sched.ChainedScheduler.state_dict = nested_state
sched.ChainedScheduler.load_state_dict = load_nested

-- ReduceLROnPlateau ---------------------------------------------------------------------

--- Multiplies the lr by `factor` when a metric has stopped improving for `patience` steps:
-- call `s:step(metric)` after each evaluation. `s:is_better(metric)` tells whether a value
-- beats the best so far by the threshold.
-- @function ReduceLROnPlateau
-- @param optimizer an optimiser (`lt.optim.SGD(...)`, ...)
-- @tparam[opt] table opts `mode` (`"min"` or `"max"`), `factor` (0.1), `patience` (10),
-- `threshold` (1e-4), `threshold_mode` (`"rel"` or `"abs"`), `cooldown` (0), `min_lr` (0, or
-- one per group), `eps` (1e-8: smaller changes of the lr are skipped)
-- @usage local s = sched.ReduceLROnPlateau(opt, {patience = 3})
-- s:step(val_loss)
sched.ReduceLROnPlateau = class("ReduceLROnPlateau")
function sched.ReduceLROnPlateau.new(cls, opt, o)
  local name = cls.__name
  check_optimizer(name, opt)
  o = check.options(name, o, { "mode", "factor", "patience", "threshold", "threshold_mode",
    "cooldown", "min_lr", "eps" })
  local factor = number_arg(name, "factor", o.factor == nil and 0.1 or o.factor)
  if factor >= 1 then fail("%s: Factor should be < 1.0.", name) end
  local mode = o.mode == nil and "min" or o.mode
  if mode ~= "min" and mode ~= "max" then
    fail("%s: mode %s is unknown! (expected 'min' or 'max')", name, tostring(mode))
  end
  local tmode = o.threshold_mode == nil and "rel" or o.threshold_mode
  if tmode ~= "rel" and tmode ~= "abs" then
    fail("%s: threshold mode %s is unknown! (expected 'rel' or 'abs')", name, tostring(tmode))
  end
  local function count(key, default)
    local v = o[key] == nil and default or o[key]
    local n = check.integer(v)
    if not n or n < 0 then fail("%s: %s must be a non-negative integer, got %s", name, key, show(v)) end
    return n
  end
  local self = setmetatable({ optimizer = opt }, cls)
  self.mode, self.factor, self.threshold_mode = mode, factor, tmode
  self.patience, self.cooldown = count("patience", 10), count("cooldown", 0)
  self.threshold = number_arg(name, "threshold", o.threshold == nil and 1e-4 or o.threshold)
  if type(o.min_lr) == "table" and #o.min_lr ~= #opt.param_groups then
    fail("%s: expected %d min_lrs, got %d", name, #opt.param_groups, #o.min_lr)
  end
  self.min_lrs = per_group(name, "min_lr", opt, o.min_lr == nil and 0 or o.min_lr)
  self.eps = number_arg(name, "eps", o.eps == nil and 1e-8 or o.eps)
  self.best = mode == "min" and math.huge or -math.huge
  self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
  self._last_lr = group_lrs(opt)
  return self
end
function sched.ReduceLROnPlateau:is_better(a)
  local rel = self.threshold_mode == "rel"
  if self.mode == "min" then
    return a < (rel and self.best * (1 - self.threshold) or self.best - self.threshold)
  end
  return a > (rel and self.best * (1 + self.threshold) or self.best + self.threshold)
end
--- Takes the metric of this step (a number or a one-element tensor) and lowers the lrs
-- when it has not improved for `patience` steps.
-- @function ReduceLROnPlateau:step
-- @param metric
-- @int[opt] epoch
function sched.ReduceLROnPlateau:step(metric, epoch)
  local name = self.__name
  if type(metric) ~= "number" then
    local ok, v = pcall(function() return metric:item() end)
    if not ok or type(v) ~= "number" then
      fail("%s: step expects a metric (a number or a one-element tensor), got %s", name, typename(metric))
    end
    metric = v
  end
  if epoch ~= nil and type(epoch) ~= "number" then
    fail("%s: step(metric, epoch): epoch must be a number, got %s", name, typename(epoch))
  end
  self.last_epoch = epoch or self.last_epoch + 1
  if self:is_better(metric) then
    self.best, self.num_bad_epochs = metric, 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local new = math.max(g.lr * self.factor, self.min_lrs[i])
      if g.lr - new > self.eps then g.lr = new end
    end
    self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
  end
  self._last_lr = group_lrs(self.optimizer)
end

return sched
