--- Learning-rate schedulers with PyTorch's names and formulas. Each sets the lr of every
-- parameter group of its optimiser; construction performs the initial step (epoch 0), as in
-- PyTorch; `state_dict()`/`load_state_dict()` save and restore the schedule position.
-- @module lantern.optim.lr_scheduler
local sched = {}

local Scheduler = {}
Scheduler.__index = Scheduler

local function class(name, parent)
  local cls = setmetatable({ __name = name }, { __index = parent or Scheduler,
    __call = function(c, ...) return c.new(c, ...) end })
  cls.__index = cls
  return cls
end

local function init(cls, optimizer, last_epoch)
  local self = setmetatable({ optimizer = optimizer, last_epoch = last_epoch or -1 }, cls)
  for _, g in ipairs(optimizer.param_groups) do
    if self.last_epoch == -1 then g.initial_lr = g.initial_lr or g.lr end
    if g.initial_lr == nil then
      error(cls.__name .. ": param 'initial_lr' is not specified in param_groups when resuming an optimizer", 3)
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(optimizer.param_groups) do self.base_lrs[i] = g.initial_lr end
  return self
end

--- Advances one epoch (or step) and writes the new lrs into the optimiser.
function Scheduler:step()
  self.last_epoch = self.last_epoch + 1
  local lrs = self:get_lr()
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i] end
  self._last_lr = lrs
end

function Scheduler:get_last_lr() return self._last_lr end

function Scheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and type(v) ~= "function" then sd[k] = v end
  end
  return sd
end

function Scheduler:load_state_dict(sd)
  for k, v in pairs(sd) do self[k] = v end
end

local function map_base(self, f)
  local out = {}
  for i, base in ipairs(self.base_lrs) do out[i] = f(base, i) end
  return out
end

local function start(self)
  self:step()
  return self
end

-- StepLR(opt, step_size, {gamma=0.1})
sched.StepLR = class("StepLR")
function sched.StepLR.new(cls, opt, step_size, o)
  o = o or {}
  local self = init(cls, opt, o.last_epoch)
  self.step_size, self.gamma = step_size, o.gamma or 0.1
  return start(self)
end
function sched.StepLR:get_lr()
  return map_base(self, function(b) return b * self.gamma ^ (self.last_epoch // self.step_size) end)
end

-- MultiStepLR(opt, milestones, {gamma=0.1})
sched.MultiStepLR = class("MultiStepLR")
function sched.MultiStepLR.new(cls, opt, milestones, o)
  o = o or {}
  local self = init(cls, opt, o.last_epoch)
  self.milestones = {}
  for i, m in ipairs(milestones) do self.milestones[i] = m end
  table.sort(self.milestones)
  self.gamma = o.gamma or 0.1
  return start(self)
end
function sched.MultiStepLR:get_lr()
  local k = 0
  for _, m in ipairs(self.milestones) do if m <= self.last_epoch then k = k + 1 end end
  return map_base(self, function(b) return b * self.gamma ^ k end)
end

-- ExponentialLR(opt, gamma)
sched.ExponentialLR = class("ExponentialLR")
function sched.ExponentialLR.new(cls, opt, gamma, o)
  o = o or {}
  local self = init(cls, opt, o.last_epoch)
  self.gamma = gamma
  return start(self)
end
function sched.ExponentialLR:get_lr()
  return map_base(self, function(b) return b * self.gamma ^ self.last_epoch end)
end

-- CosineAnnealingLR(opt, T_max, {eta_min=0})
sched.CosineAnnealingLR = class("CosineAnnealingLR")
function sched.CosineAnnealingLR.new(cls, opt, T_max, o)
  o = o or {}
  local self = init(cls, opt, o.last_epoch)
  self.T_max, self.eta_min = T_max, o.eta_min or 0
  return start(self)
end
function sched.CosineAnnealingLR:get_lr()
  return map_base(self, function(b)
    return self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end)
end

-- LinearLR(opt, {start_factor=1/3, end_factor=1, total_iters=5})
sched.LinearLR = class("LinearLR")
function sched.LinearLR.new(cls, opt, o)
  o = o or {}
  local self = init(cls, opt, o.last_epoch)
  self.start_factor = o.start_factor or 1 / 3
  self.end_factor = o.end_factor or 1.0
  self.total_iters = o.total_iters or 5
  if self.start_factor <= 0 or self.start_factor > 1 then
    error("LinearLR: Starting multiplicative factor expected to be greater than 0 and less or equal to 1.", 2)
  end
  return start(self)
end
function sched.LinearLR:get_lr()
  local t = math.min(self.total_iters, self.last_epoch)
  return map_base(self, function(b)
    return b * (self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters)
  end)
end

-- LambdaLR(opt, fn_or_list): lr = base * fn(epoch)
sched.LambdaLR = class("LambdaLR")
function sched.LambdaLR.new(cls, opt, fns, o)
  o = o or {}
  local self = init(cls, opt, o.last_epoch)
  if type(fns) == "function" then
    local list = {}
    for i = 1, #opt.param_groups do list[i] = fns end
    fns = list
  end
  self.lr_lambdas = fns
  return start(self)
end
function sched.LambdaLR:get_lr()
  return map_base(self, function(b, i) return b * self.lr_lambdas[i](self.last_epoch) end)
end
function sched.LambdaLR:state_dict()
  local sd = Scheduler.state_dict(self)
  sd.lr_lambdas = nil   -- functions are code, not state (as PyTorch drops them)
  return sd
end

-- OneCycleLR(opt, max_lr, {total_steps | epochs+steps_per_epoch, pct_start=0.3,
--   anneal_strategy="cos", div_factor=25, final_div_factor=1e4, three_phase=false})
sched.OneCycleLR = class("OneCycleLR")
function sched.OneCycleLR.new(cls, opt, max_lr, o)
  o = o or {}
  local total = o.total_steps or (o.epochs and o.steps_per_epoch and o.epochs * o.steps_per_epoch)
  if not total or total <= 0 then
    error("OneCycleLR: You must define either total_steps OR (epochs AND steps_per_epoch)", 2)
  end
  local div, fdiv = o.div_factor or 25, o.final_div_factor or 1e4
  for i, g in ipairs(opt.param_groups) do
    if (o.last_epoch or -1) == -1 then
      local m = type(max_lr) == "table" and max_lr[i] or max_lr
      g.initial_lr = m / div
      g.max_lr = m
      g.min_lr = g.initial_lr / fdiv
    end
  end
  local self = init(cls, opt, o.last_epoch)
  self.total_steps = total
  local pct = o.pct_start or 0.3
  if o.three_phase then
    self.phases = {
      { end_step = pct * total - 1, s = "initial_lr", e = "max_lr" },
      { end_step = 2 * pct * total - 2, s = "max_lr", e = "initial_lr" },
      { end_step = total - 1, s = "initial_lr", e = "min_lr" },
    }
  else
    self.phases = {
      { end_step = pct * total - 1, s = "initial_lr", e = "max_lr" },
      { end_step = total - 1, s = "max_lr", e = "min_lr" },
    }
  end
  self.anneal = o.anneal_strategy or "cos"
  return start(self)
end
local function anneal(kind, s, e, pct)
  if kind == "cos" then return e + (s - e) / 2 * (math.cos(math.pi * pct) + 1) end
  return (e - s) * pct + s
end
function sched.OneCycleLR:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    error(string.format("OneCycleLR: Tried to step %d times. The specified number of total steps is %d", step, self.total_steps), 3)
  end
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    local start_step, lr = 0, nil
    for k, ph in ipairs(self.phases) do
      if step <= ph.end_step or k == #self.phases then
        local pct = (step - start_step) / (ph.end_step - start_step)
        lr = anneal(self.anneal, g[ph.s], g[ph.e], pct)
        break
      end
      start_step = ph.end_step
    end
    out[i] = lr
  end
  return out
end

-- ReduceLROnPlateau(opt, {mode="min", factor=0.1, patience=10, threshold=1e-4,
--   threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8}); step(metric)
sched.ReduceLROnPlateau = class("ReduceLROnPlateau")
function sched.ReduceLROnPlateau.new(cls, opt, o)
  o = o or {}
  local self = setmetatable({ optimizer = opt }, cls)
  self.mode, self.factor = o.mode or "min", o.factor or 0.1
  if self.factor >= 1 then error("ReduceLROnPlateau: Factor should be < 1.0.", 2) end
  self.patience, self.threshold = o.patience or 10, o.threshold or 1e-4
  self.threshold_mode, self.cooldown = o.threshold_mode or "rel", o.cooldown or 0
  self.min_lrs = {}
  for i = 1, #opt.param_groups do
    self.min_lrs[i] = type(o.min_lr) == "table" and o.min_lr[i] or (o.min_lr or 0)
  end
  self.eps = o.eps or 1e-8
  self.best = self.mode == "min" and math.huge or -math.huge
  self.num_bad_epochs, self.cooldown_counter, self.last_epoch = 0, 0, 0
  self._last_lr = {}
  for i, g in ipairs(opt.param_groups) do self._last_lr[i] = g.lr end
  return self
end
function sched.ReduceLROnPlateau:is_better(a)
  local rel = self.threshold_mode == "rel"
  if self.mode == "min" then
    return a < (rel and self.best * (1 - self.threshold) or self.best - self.threshold)
  end
  return a > (rel and self.best * (1 + self.threshold) or self.best + self.threshold)
end
function sched.ReduceLROnPlateau:step(metric)
  if type(metric) ~= "number" then metric = metric:item() end
  self.last_epoch = self.last_epoch + 1
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
  for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
end

return sched
