--- Optimisers with PyTorch's names, options, update formulas and state_dict layout.
-- The per-parameter update runs in C (core._sgd_step, ...), one fused pass per parameter.
-- @module lantern.optim
local lt = require "lantern"
local core = require "lantern.core"

local optim = {}

local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

--- Declares an optimiser class: `local MyOpt = optim.Optimizer:extend("MyOpt", defaults)`.
function Optimizer:extend(name, defaults)
  local cls = setmetatable({ __name = name, defaults = defaults }, { __index = self,
    __call = function(c, ...) return c.new(c, ...) end })
  cls.__index = cls
  cls.__tostring = self.__tostring
  return cls
end

local as_param_list = require("lantern.nn.util").param_list

function Optimizer.new(cls, params, opts)
  local self = setmetatable({ param_groups = {}, state = {} }, cls)
  opts = opts or {}
  for k in pairs(opts) do
    if cls.defaults[k] == nil then
      error(string.format("%s: unknown option '%s'", cls.__name, k), 3)
    end
  end
  self.defaults = {}
  for k, v in pairs(cls.defaults) do self.defaults[k] = v end
  for k, v in pairs(opts) do self.defaults[k] = v end
  params = as_param_list(params)
  if type(params) ~= "table" or #params == 0 then
    error(cls.__name .. ": optimizer got an empty parameter list", 3)
  end
  if lt.is_tensor(params[1]) then params = { { params = params } } end
  for _, g in ipairs(params) do self:add_param_group(g) end
  if cls.check then cls.check(self) end
  return self
end

--- Adds a group `{params = {...}, lr = ...}`; missing options come from the defaults.
function Optimizer:add_param_group(group)
  local g = {}
  for k, v in pairs(group) do g[k] = v end
  g.params = as_param_list(group.params)
  for k, v in pairs(self.defaults) do
    if g[k] == nil then g[k] = v end
  end
  local seen = {}
  for _, pg in ipairs(self.param_groups) do
    for _, p in ipairs(pg.params) do seen[p] = true end
  end
  for i, p in ipairs(g.params) do
    if not lt.is_tensor(p) then
      error(string.format("%s: parameter %d of a group is not a Tensor", self.__name, i), 3)
    end
    if seen[p] then
      error(self.__name .. ": some parameters appear in more than one parameter group", 3)
    end
    seen[p] = true
  end
  self.param_groups[#self.param_groups + 1] = g
end

--- Clears gradients: to nil (default, as PyTorch 2.x) or to zeros.
function Optimizer:zero_grad(set_to_none)
  if set_to_none == nil then set_to_none = true end
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      if p.grad then
        if set_to_none then p.grad = nil else p.grad:zero_() end
      end
    end
  end
end

-- State made inside a release scope (lt.tidy) must outlive it.
local function keep_state(st)
  for _, v in pairs(st) do lt.keep(v) end
end

--- One update; `closure` (optional) re-evaluates the model and returns the loss.
function Optimizer:step(closure)
  local loss
  if closure then loss = lt.enable_grad(closure) end
  lt.no_grad(function()
    for _, group in ipairs(self.param_groups) do
      for _, p in ipairs(group.params) do
        local grad = p.grad
        if grad then
          local st = self.state[p]
          if not st then
            st = {}
            self.state[p] = st
          end
          self:update(p, grad, st, group)
          if lt._scope_depth() > 0 then keep_state(st) end
        end
      end
    end
  end)
  return loss
end

local function copy_value(v, like)
  if lt.is_tensor(v) then
    local c = v:clone()
    if like and v:is_floating_point() and like:is_floating_point() then c = c:to(like.dtype) end
    return c
  elseif type(v) == "table" then
    local t = {}
    for k, x in pairs(v) do t[k] = copy_value(x) end
    return t
  end
  return v
end

--- PyTorch's layout: `state` keyed by 0-based parameter index across groups, and
-- `param_groups` whose `params` lists those indices.
function Optimizer:state_dict()
  local index, n = {}, 0
  local groups = {}
  for gi, g in ipairs(self.param_groups) do
    local ng = {}
    for k, v in pairs(g) do
      if k ~= "params" then ng[k] = copy_value(v) end
    end
    ng.params = {}
    for _, p in ipairs(g.params) do
      if index[p] == nil then
        index[p] = n
        n = n + 1
      end
      ng.params[#ng.params + 1] = index[p]
    end
    groups[gi] = ng
  end
  local state = {}
  for p, st in pairs(self.state) do
    if index[p] ~= nil then
      local s = {}
      for k, v in pairs(st) do s[k] = copy_value(v) end
      if s.step ~= nil and not lt.is_tensor(s.step) then
        s.step = lt.tensor(s.step, { dtype = "float32" })
      end
      state[index[p]] = s
    end
  end
  return { state = state, param_groups = groups }
end

function Optimizer:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    error(self.__name .. ": load_state_dict expects a table with 'state' and 'param_groups'", 2)
  end
  if #sd.param_groups ~= #self.param_groups then
    error(self.__name .. ": loaded state dict has a different number of parameter groups", 2)
  end
  local byindex = {}
  for gi, g in ipairs(self.param_groups) do
    local sg = sd.param_groups[gi]
    if #sg.params ~= #g.params then
      error(self.__name .. ": loaded state dict contains a parameter group that doesn't match the size of optimizer's group", 2)
    end
    for i, p in ipairs(g.params) do byindex[sg.params[i]] = p end
  end
  self.state = {}
  for idx, st in pairs(sd.state) do
    local p = byindex[idx]
    if p then
      local s = {}
      for k, v in pairs(st) do
        if k == "step" then
          s[k] = lt.is_tensor(v) and v:item() or v
        else
          s[k] = copy_value(v, p)
        end
      end
      keep_state(s)
      self.state[p] = s
    end
  end
  for gi, g in ipairs(self.param_groups) do
    for k, v in pairs(sd.param_groups[gi]) do
      if k ~= "params" then g[k] = copy_value(v) end
    end
  end
end

function Optimizer:__tostring()
  local lines = { self.__name .. " (" }
  for i, g in ipairs(self.param_groups) do
    lines[#lines + 1] = "Parameter Group " .. (i - 1)
    local keys = {}
    for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = g[k]
      if type(v) == "table" then v = "(" .. table.concat(v, ", ") .. ")" end
      lines[#lines + 1] = "    " .. k .. ": " .. tostring(v)
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

local function zeros_like(p) return lt.zeros_like(p) end

------------------------------------------------------------------------ SGD

local SGD = Optimizer:extend("SGD", { lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0,
  nesterov = false, maximize = false })

function SGD:check()
  for _, g in ipairs(self.param_groups) do
    if g.lr < 0 then error("SGD: Invalid learning rate: " .. g.lr, 4) end
    if g.momentum < 0 then error("SGD: Invalid momentum value: " .. g.momentum, 4) end
    if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
      error("SGD: Nesterov momentum requires a momentum and zero dampening", 4)
    end
  end
end

function SGD:update(p, grad, st, g)
  local first = false
  if g.momentum ~= 0 and not st.momentum_buffer then
    st.momentum_buffer = lt.empty_like(p)
    first = true
  end
  core._sgd_step(p, grad:contiguous(), g.momentum ~= 0 and st.momentum_buffer or nil, {
    lr = g.lr, momentum = g.momentum, dampening = g.dampening, weight_decay = g.weight_decay,
    nesterov = g.nesterov, maximize = g.maximize, first = first })
end
optim.SGD = SGD

------------------------------------------------------------------------ Adam / AdamW

local function adam_update(decoupled)
  return function(self, p, grad, st, g)
    if not st.exp_avg then
      st.step = 0
      st.exp_avg = zeros_like(p)
      st.exp_avg_sq = zeros_like(p)
      if g.amsgrad then st.max_exp_avg_sq = zeros_like(p) end
    end
    st.step = st.step + 1
    core._adam_step(p, grad:contiguous(), st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq, {
      lr = g.lr, beta1 = g.betas[1], beta2 = g.betas[2], eps = g.eps,
      weight_decay = g.weight_decay, amsgrad = g.amsgrad, maximize = g.maximize,
      decoupled = decoupled, step = st.step })
  end
end

local function adam_check(self)
  for _, g in ipairs(self.param_groups) do
    if g.lr < 0 then error(self.__name .. ": Invalid learning rate: " .. g.lr, 4) end
    if g.eps < 0 then error(self.__name .. ": Invalid epsilon value: " .. g.eps, 4) end
    for i = 1, 2 do
      if not (g.betas[i] >= 0 and g.betas[i] < 1) then
        error(string.format("%s: Invalid beta parameter at index %d: %s", self.__name, i - 1, g.betas[i]), 4)
      end
    end
  end
end

local Adam = Optimizer:extend("Adam", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8,
  weight_decay = 0, amsgrad = false, maximize = false })
Adam.update = adam_update(false)
Adam.check = adam_check
optim.Adam = Adam

local AdamW = Optimizer:extend("AdamW", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8,
  weight_decay = 1e-2, amsgrad = false, maximize = false })
AdamW.update = adam_update(true)
AdamW.check = adam_check
optim.AdamW = AdamW

------------------------------------------------------------------------ RMSprop

local RMSprop = Optimizer:extend("RMSprop", { lr = 1e-2, alpha = 0.99, eps = 1e-8,
  weight_decay = 0, momentum = 0, centered = false, maximize = false })

function RMSprop:update(p, grad, st, g)
  if not st.square_avg then
    st.step = 0
    st.square_avg = zeros_like(p)
    if g.momentum > 0 then st.momentum_buffer = zeros_like(p) end
    if g.centered then st.grad_avg = zeros_like(p) end
  end
  st.step = st.step + 1
  core._rmsprop_step(p, grad:contiguous(), st.square_avg, st.grad_avg, st.momentum_buffer, {
    lr = g.lr, alpha = g.alpha, eps = g.eps, weight_decay = g.weight_decay,
    momentum = g.momentum, centered = g.centered, maximize = g.maximize })
end
optim.RMSprop = RMSprop

------------------------------------------------------------------------ Adagrad

local Adagrad = Optimizer:extend("Adagrad", { lr = 1e-2, lr_decay = 0, weight_decay = 0,
  initial_accumulator_value = 0, eps = 1e-10, maximize = false })

function Adagrad:update(p, grad, st, g)
  if not st.sum then
    st.step = 0
    st.sum = lt.full_like(p, g.initial_accumulator_value)
  end
  st.step = st.step + 1
  core._adagrad_step(p, grad:contiguous(), st.sum, { lr = g.lr, lr_decay = g.lr_decay,
    weight_decay = g.weight_decay, eps = g.eps, maximize = g.maximize, step = st.step })
end
optim.Adagrad = Adagrad

setmetatable(optim, { __index = function(t, k)
  if k == "lr_scheduler" then
    local v = require "lantern.optim.lr_scheduler"
    rawset(t, k, v)
    return v
  end
end })

return optim
