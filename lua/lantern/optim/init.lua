--- Optimisers (`lt.optim`) with PyTorch's names, options, update formulas and state_dict
-- layout: SGD, Adam, AdamW, RMSprop, Adagrad, and `lt.optim.lr_scheduler`. The update of each
-- parameter is one fused C pass that follows PyTorch's formulas operation by operation, so
-- trajectories match PyTorch's to float rounding.
--
--     local opt = lt.optim.Adam(model:parameters(), {lr = 1e-3})
--     for step = 1, steps do
--       local loss = F.mse_loss(model(x), y)
--       opt:zero_grad(); loss:backward(); opt:step()
--     end
--
-- Arguments are checked when the optimiser is made (and in `add_param_group`), for every
-- group, with PyTorch's messages after the optimiser's name (`Adam: Invalid learning rate:
-- -1`); options must be a table, and an unknown option names the nearest known one. Each step
-- reads its group's hyper-parameters afresh, so a scheduler's lr, momentum or betas take
-- effect.
-- @module lantern.optim
local lt = require "lantern"
local core = require "lantern.core"

local check = require "lantern.optim.check"
local fail = check.fail

local optim = {}

--- The base class of the optimisers (PyTorch's `torch.optim.Optimizer`). An instance has
-- `param_groups` (a list of groups, each `{params = {...}, lr = ..., ...}` with every option),
-- `defaults` and `state` (per parameter tensor: its buffers and step count).
-- @type Optimizer
local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

--- Declares an optimiser class: `local MyOpt = optim.Optimizer:extend("MyOpt", defaults)`.
-- The class defines `MyOpt:update(p, grad, state, group)`, which changes `p` in place from
-- its gradient under `no_grad` (state is p's table in `opt.state`, group its parameter
-- group). Number and boolean defaults fix the type of their option; optional members:
-- `MyOpt.check_group(group, where)` raises for values the class refuses, `state_tensors` (the
-- names of state buffers shaped like the parameter) and `MyOpt.required_state(group)` (the
-- state keys a loaded state_dict must have), and `MyOpt:group_options(group)`, whose table
-- `step` makes once per group and passes to `update` as a fifth argument.
-- @string name
-- @tab defaults option name -> default value
-- @return the class; `MyOpt(params, opts)` constructs
-- @usage local Sign = lt.optim.Optimizer:extend("Sign", {lr = 0.01})
-- function Sign:update(p, grad, state, group) p:sub_(grad:sign() * group.lr) end
function Optimizer:extend(name, defaults)
  local cls = setmetatable({ __name = name, defaults = defaults }, { __index = self,
    __call = function(c, ...) return c.new(c, ...) end })
  cls.__index = cls
  cls.__tostring = self.__tostring
  return cls
end

local U = require "lantern.nn.util"
local as_param_list = U.param_list

local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local t = {}
  for k, x in pairs(v) do t[k] = deep_copy(x) end
  return setmetatable(t, getmetatable(v))
end

local PARAMS_EXPECTED = "params must be a list of tensors or of parameter-group tables"

-- A copy of the list with model:named_parameters()' {name, tensor} pairs as their tensors.
local function unnamed(list)
  local out = {}
  for i = 1, #list do
    local v = list[i]
    if type(v) == "table" and v.params == nil and type(v[1]) == "string" and lt.is_tensor(v[2]) then
      v = v[2]
    end
    out[i] = v
  end
  return out
end

-- The constructor's `params` as a list of group tables (not yet filled with defaults).
local function parse_params(name, params)
  local list = as_param_list(params)
  if type(list) ~= "table" or check.typename(list):match("^module ") then
    local hint = type(list) == "table" and " (pass model:parameters())" or ""
    fail("%s: %s, got %s%s", name, PARAMS_EXPECTED, check.typename(list), hint)
  end
  if #list == 0 then
    if next(list) ~= nil then
      fail("%s: %s, got a table with no list entries (wrap a single group: {{params = ...}})",
        name, PARAMS_EXPECTED)
    end
    fail("%s: optimizer got an empty parameter list", name)
  end
  list = unnamed(list)
  local first = lt.is_tensor(list[1]) and "tensor" or "group"
  for i = 1, #list do
    local v = list[i]
    local kind = lt.is_tensor(v) and "tensor" or (type(v) == "table" and "group") or nil
    if not kind then fail("%s: %s, got %s at position %d", name, PARAMS_EXPECTED, check.typename(v), i) end
    if kind ~= first then
      fail("%s: %s, not a mix of both (position 1 is a %s, position %d a %s)", name, PARAMS_EXPECTED,
        first == "tensor" and "Tensor" or "group table", i, kind == "tensor" and "Tensor" or "table")
    end
  end
  if first == "tensor" then return { { params = list } } end
  return list
end

local NONNEG = {
  lr = "learning rate", momentum = "momentum value", weight_decay = "weight_decay value",
  eps = "epsilon value", alpha = "alpha value", lr_decay = "lr_decay value",
  initial_accumulator_value = "initial_accumulator_value value",
}

-- Refuses the hyper-parameters of group `g` that PyTorch refuses, with PyTorch's messages;
-- `where` ("" or " (parameter group 2)") says which group.
function Optimizer:check_hparams(g, where)
  local name = self.__name
  for k, d in pairs(getmetatable(self).defaults) do
    local v = g[k]
    if type(d) == "number" and type(v) ~= "number" then
      fail("%s: %s must be a number, got %s%s", name, k, check.typename(v), where)
    elseif type(d) == "boolean" and type(v) ~= "boolean" then
      fail("%s: %s must be a boolean, got %s%s", name, k, check.typename(v), where)
    end
    if NONNEG[k] and type(d) == "number" and not (v >= 0) then
      fail("%s: Invalid %s: %s%s", name, NONNEG[k], tostring(v), where)
    end
  end
  if getmetatable(self).defaults.betas ~= nil then
    local b = g.betas
    if type(b) ~= "table" or type(b[1]) ~= "number" or type(b[2]) ~= "number" or #b ~= 2 then
      fail("%s: betas must be a table of two numbers, got %s%s", name, check.typename(b), where)
    end
    for i = 1, 2 do
      if not (b[i] >= 0 and b[i] < 1) then
        fail("%s: Invalid beta parameter at index %d: %s%s", name, i - 1, tostring(b[i]), where)
      end
    end
  end
  if self.check_group then self.check_group(g, where) end
end

function Optimizer.new(cls, params, opts)
  local name = cls.__name
  if opts ~= nil and type(opts) ~= "table" then
    fail("%s: options must be a table such as {lr = %s}, got %s", name,
      type(opts) == "number" and tostring(opts) or "0.01", check.typename(opts))
  end
  local known = {}
  for k in pairs(cls.defaults) do known[#known + 1] = k end
  table.sort(known)
  check.options(name, opts, known)
  local self = setmetatable({ param_groups = {}, state = {} }, cls)
  self.defaults = deep_copy(cls.defaults)
  for k, v in pairs(opts or {}) do self.defaults[k] = deep_copy(v) end
  self:check_hparams(self.defaults, "")
  for _, g in ipairs(parse_params(name, params)) do self:add_param_group(g) end
  if cls.check then cls.check(self) end
  return self
end

--- Adds a group `{params = {...}, lr = ...}`; missing options come from the defaults. Keys
-- other than the optimiser's options are kept in the group (as PyTorch keeps them). A
-- parameter may be in one group only.
-- @tab group
function Optimizer:add_param_group(group)
  local name, gi = self.__name, #self.param_groups + 1
  if type(group) ~= "table" then
    fail("%s: a parameter group must be a table {params = ...}, got %s", name, check.typename(group))
  end
  if group.params == nil then fail("%s: parameter group %d has no 'params'", name, gi) end
  local g = {}
  for k, v in pairs(group) do g[k] = v end
  local list = as_param_list(group.params)
  if type(list) ~= "table" or check.typename(list):match("^module ") then
    fail("%s: params of parameter group %d must be a tensor or a list of tensors, got %s", name, gi,
      check.typename(list))
  end
  g.params = unnamed(list)
  for k, v in pairs(self.defaults) do
    if g[k] == nil then g[k] = deep_copy(v) end
  end
  local seen = {}
  for _, pg in ipairs(self.param_groups) do
    for _, p in ipairs(pg.params) do seen[p] = true end
  end
  local mine = {}
  for i, p in ipairs(g.params) do
    if not lt.is_tensor(p) then
      fail("%s: optimizer can only optimize Tensors, but parameter %d of group %d is %s", name, i, gi,
        check.typename(p))
    end
    if p.is_leaf == false and not p.retains_grad then
      fail("%s: can't optimize a non-leaf Tensor (parameter %d of group %d)", name, i, gi)
    end
    if mine[p] then fail("%s: parameter %d of group %d appears twice in the group", name, i, gi) end
    if seen[p] then fail("%s: some parameters appear in more than one parameter group", name) end
    mine[p] = true
  end
  self:check_hparams(g, string.format(" (parameter group %d)", gi))
  self.param_groups[gi] = g
end

--- Clears the gradients of every parameter: to nil (the default, as PyTorch 2) or, with
-- false, to zeros.
-- @bool[opt=true] set_to_none
function Optimizer:zero_grad(set_to_none)
  if set_to_none == nil then set_to_none = true end
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      if set_to_none then
        p.grad = nil   -- without reading it first: a read makes a handle for the collector
      else
        local grad = p.grad
        if grad then grad:zero_() end
      end
    end
  end
end

-- State made inside a release scope (lt.tidy) must outlive it.
local function keep_state(st)
  for _, v in pairs(st) do lt.keep(v) end
end

-- The updates of every group. A class with `group_options` gets one options table per group
-- and step, passed to its update as a fifth argument, rather than one per parameter.
local function step_groups(self)
  for _, group in ipairs(self.param_groups) do
    local o = self.group_options and self:group_options(group)
    for _, p in ipairs(group.params) do
      local grad = p.grad
      if grad then
        local st = self.state[p]
        if not st then
          st = {}
          self.state[p] = st
        end
        self:update(p, grad, st, group, o)
        if lt._scope_depth() > 0 then keep_state(st) end
      end
    end
  end
end

--- One update of every parameter that has a gradient. `closure` (optional) re-evaluates the
-- model under grad mode and returns the loss, which step returns.
-- @func[opt] closure
-- @return the closure's loss, or nil
function Optimizer:step(closure)
  local loss
  if closure then loss = lt.enable_grad(closure) end
  local old = core.set_grad_enabled(false)   -- lt.no_grad without its closure and result table
  local ok, err = pcall(step_groups, self)
  core.set_grad_enabled(old)
  if not ok then error(err, 0) end
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

--- The state in PyTorch's layout: `state` keyed by 0-based parameter index across the
-- groups, and `param_groups` whose `params` list those indices (Adam's `step` is a 0-dim
-- float32 tensor as in PyTorch), so `lt.save(opt:state_dict(), "opt.pt")` moves between
-- Lantern and PyTorch.
-- @treturn table
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

-- Keys in a fixed order (numbers, then the rest by name), so that of several problems a load
-- always reports the same one.
local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local na, nb = type(a) == "number", type(b) == "number"
    if na ~= nb then return na end
    if na then return a < b end
    return tostring(a) < tostring(b)
  end)
  return keys
end

local function is_none(v)
  local ser = package.loaded["lantern.serialization"]
  return ser ~= nil and v == ser.None
end

-- A loaded state entry for parameter `p` (key `idx` of the state dict), checked and copied:
-- tensors the class keeps per parameter must have its shape and a floating dtype (cast to the
-- parameter's), `step` must be a count. PyTorch's None (SGD's momentum_buffer before any
-- momentum) is an absent entry.
local function load_entry(self, idx, st, p, group)
  local name = self.__name
  if type(st) ~= "table" then
    fail("%s: load_state_dict: state[%s] must be a table, got %s", name, tostring(idx), check.typename(st))
  end
  local per_param = {}
  for _, k in ipairs(self.state_tensors or {}) do per_param[k] = true end
  local s = {}
  for _, k in ipairs(sorted_keys(st)) do
    local v = st[k]
    local key = string.format("state[%s].%s", tostring(idx), tostring(k))
    if is_none(v) then
      v = nil
    elseif k == "step" then
      if lt.is_tensor(v) then
        if v:numel() ~= 1 then
          fail("%s: load_state_dict: %s must be a number or a one-element tensor, got shape %s",
            name, key, check.shape(v))
        end
        v = v:item()
      end
      if type(v) ~= "number" or not (v >= 0) or v == math.huge then
        fail("%s: load_state_dict: %s must be a non-negative count, got %s", name, key, check.show(v))
      end
    elseif per_param[k] then
      if not lt.is_tensor(v) then
        fail("%s: load_state_dict: %s must be a Tensor, got %s", name, key, check.typename(v))
      end
      if not U.same_shape(v, p) then
        fail("%s: load_state_dict: %s has shape %s, but parameter %s has shape %s", name, key,
          check.shape(v), tostring(idx), check.shape(p))
      end
      if p:is_floating_point() and not v:is_floating_point() then
        fail("%s: load_state_dict: %s has dtype %s, but parameter %s is %s (state must be floating)",
          name, key, v.dtype, tostring(idx), p.dtype)
      end
      v = copy_value(v, p):contiguous()
    else
      v = copy_value(v, p)
    end
    s[k] = v
  end
  if next(s) ~= nil and self.required_state then
    for _, k in ipairs(self.required_state(group)) do
      if s[k] == nil then
        fail("%s: load_state_dict: state[%s] has no '%s' (%s keeps %s per parameter%s)", name,
          tostring(idx), k, name, table.concat(self.required_state(group), ", "),
          group.amsgrad and " with amsgrad" or (group.centered and " when centered" or ""))
      end
    end
  end
  return s
end

--- Loads a state dict of `state_dict()`'s (or PyTorch's) layout. Everything is checked before
-- anything changes, so a failed load leaves the optimiser as it was: state of another shape
-- than its parameter, integer state, missing buffers and bad hyper-parameters are refused;
-- floating state is cast to the parameter's dtype, and PyTorch's None `momentum_buffer`
-- reads as no buffer yet.
-- @tab sd
function Optimizer:load_state_dict(sd)
  local name = self.__name
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    fail("%s: load_state_dict expects a table with 'state' and 'param_groups'", name)
  end
  if #sd.param_groups ~= #self.param_groups then
    fail("%s: loaded state dict has a different number of parameter groups (%d, the optimizer has %d)",
      name, #sd.param_groups, #self.param_groups)
  end
  local byindex, groups, group_of = {}, {}, {}
  for gi, g in ipairs(self.param_groups) do
    local sg = sd.param_groups[gi]
    if type(sg) ~= "table" or type(sg.params) ~= "table" then
      fail("%s: load_state_dict: param_groups[%d] must be a table with a 'params' list", name, gi)
    end
    if #sg.params ~= #g.params then
      fail("%s: loaded state dict contains a parameter group that doesn't match the size of optimizer's group (group %d: %d parameters, the optimizer's has %d)",
        name, gi, #sg.params, #g.params)
    end
    local ng = {}
    for k, v in pairs(g) do ng[k] = v end
    for k, v in pairs(sg) do
      if k ~= "params" then ng[k] = copy_value(v) end
    end
    self:check_hparams(ng, string.format(" (loaded parameter group %d)", gi))
    groups[gi] = ng
    for i, p in ipairs(g.params) do
      byindex[sg.params[i]] = p
      group_of[p] = ng
    end
  end
  local state = {}
  for _, idx in ipairs(sorted_keys(sd.state)) do
    local p = byindex[idx]
    if p then
      local s = load_entry(self, idx, sd.state[idx], p, group_of[p])
      keep_state(s)
      state[p] = s
    end
  end
  self.state = state
  for gi, g in ipairs(self.param_groups) do
    for k in pairs(g) do g[k] = nil end
    for k, v in pairs(groups[gi]) do g[k] = v end
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

---------------------------------------------------------------------------------------------
--- The optimisers. Each is called as `Name(params, opts)`; `opts` holds the options below,
-- every one of which may also be set per group.
-- @section optimizers

--- Stochastic gradient descent, with PyTorch's momentum
-- (`b = momentum * b + (1 - dampening) * g`, the first step `b = g`) and Nesterov
-- (`g = g + momentum * b`); weight decay adds `weight_decay * p` to the gradient.
-- @function SGD
-- @param params a tensor, a list or iterator of tensors (`model:parameters()`,
-- `model:named_parameters()`), or a list of group tables `{params = ..., lr = ...}`
-- @tparam[opt] table opts `lr` (1e-3), `momentum` (0), `dampening` (0), `weight_decay` (0),
-- `nesterov` (false; needs momentum and zero dampening), `maximize` (false)
-- @usage local opt = lt.optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
local SGD = Optimizer:extend("SGD", { lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0,
  nesterov = false, maximize = false })

function SGD.check_group(g, where)
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    fail("SGD: Nesterov momentum requires a momentum and zero dampening%s", where)
  end
end
SGD.state_tensors = { "momentum_buffer" }

function SGD:group_options(g)
  return { lr = g.lr, momentum = g.momentum, dampening = g.dampening,
    weight_decay = g.weight_decay, nesterov = g.nesterov, maximize = g.maximize, first = false }
end

function SGD:update(p, grad, st, g, o)
  o = o or self:group_options(g)
  o.first = false
  if g.momentum ~= 0 and not st.momentum_buffer then
    st.momentum_buffer = lt.empty_like(p)
    o.first = true
  end
  core._sgd_step(p, grad:contiguous(), g.momentum ~= 0 and st.momentum_buffer or nil, o)
end
optim.SGD = SGD

-- Adam / AdamW ---------------------------------------------------------------------

local function adam_options(decoupled)
  return function(_, g)
    return { lr = g.lr, beta1 = g.betas[1], beta2 = g.betas[2], eps = g.eps,
      weight_decay = g.weight_decay, amsgrad = g.amsgrad, maximize = g.maximize,
      decoupled = decoupled, step = 0 }
  end
end

local function adam_update(self, p, grad, st, g, o)
  if not st.exp_avg then
    st.step = 0
    st.exp_avg = zeros_like(p)
    st.exp_avg_sq = zeros_like(p)
    if g.amsgrad then st.max_exp_avg_sq = zeros_like(p) end
  end
  st.step = st.step + 1
  o = o or self:group_options(g)
  o.step = st.step
  core._adam_step(p, grad:contiguous(), st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq, o)
end

local ADAM_STATE = { "exp_avg", "exp_avg_sq", "max_exp_avg_sq" }
local function adam_required(g)
  if g.amsgrad then return { "step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq" } end
  return { "step", "exp_avg", "exp_avg_sq" }
end

--- Adam: moving averages `m` and `v` of the gradient and its square, bias-corrected; with
-- `amsgrad` the maximum of v is used. Weight decay is added to the gradient (L2).
-- @function Adam
-- @param params a tensor, a list or iterator of tensors (`model:parameters()`,
-- `model:named_parameters()`), or a list of group tables `{params = ..., lr = ...}`
-- @tparam[opt] table opts `lr` (1e-3), `betas` ({0.9, 0.999}), `eps` (1e-8), `weight_decay`
-- (0), `amsgrad` (false), `maximize` (false)
-- @usage local opt = lt.optim.Adam({{params = enc:parameters(), lr = 1e-4},
--                                  {params = head:parameters()}}, {lr = 1e-3})
local Adam = Optimizer:extend("Adam", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8,
  weight_decay = 0, amsgrad = false, maximize = false })
Adam.group_options, Adam.update = adam_options(false), adam_update
Adam.state_tensors, Adam.required_state = ADAM_STATE, adam_required
optim.Adam = Adam

--- AdamW: Adam with decoupled weight decay (`p = p * (1 - lr * weight_decay)` before the
-- update).
-- @function AdamW
-- @param params a tensor, a list or iterator of tensors (`model:parameters()`,
-- `model:named_parameters()`), or a list of group tables `{params = ..., lr = ...}`
-- @tparam[opt] table opts `lr` (1e-3), `betas` ({0.9, 0.999}), `eps` (1e-8), `weight_decay`
-- (1e-2), `amsgrad` (false), `maximize` (false)
local AdamW = Optimizer:extend("AdamW", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8,
  weight_decay = 1e-2, amsgrad = false, maximize = false })
AdamW.group_options, AdamW.update = adam_options(true), adam_update
AdamW.state_tensors, AdamW.required_state = ADAM_STATE, adam_required
optim.AdamW = AdamW

-- RMSprop ---------------------------------------------------------------------

--- RMSprop: divides the gradient by the root of a moving average of its square (`alpha`),
-- centred (minus the squared mean) with `centered`, with optional momentum.
-- @function RMSprop
-- @param params a tensor, a list or iterator of tensors (`model:parameters()`,
-- `model:named_parameters()`), or a list of group tables `{params = ..., lr = ...}`
-- @tparam[opt] table opts `lr` (1e-2), `alpha` (0.99), `eps` (1e-8), `weight_decay` (0),
-- `momentum` (0), `centered` (false), `maximize` (false)
local RMSprop = Optimizer:extend("RMSprop", { lr = 1e-2, alpha = 0.99, eps = 1e-8,
  weight_decay = 0, momentum = 0, centered = false, maximize = false })

-- The momentum buffer is made when momentum first becomes positive, which a scheduler that
-- cycles momentum (CyclicLR) can do after the first step.
function RMSprop:update(p, grad, st, g)
  if not st.square_avg then
    st.step = 0
    st.square_avg = zeros_like(p)
    if g.centered then st.grad_avg = zeros_like(p) end
  end
  if g.momentum > 0 and not st.momentum_buffer then st.momentum_buffer = zeros_like(p) end
  st.step = st.step + 1
  core._rmsprop_step(p, grad:contiguous(), st.square_avg, st.grad_avg,
    g.momentum > 0 and st.momentum_buffer or nil, {
    lr = g.lr, alpha = g.alpha, eps = g.eps, weight_decay = g.weight_decay,
    momentum = g.momentum, centered = g.centered, maximize = g.maximize })
end
RMSprop.state_tensors = { "square_avg", "momentum_buffer", "grad_avg" }
function RMSprop.required_state(g)
  if g.centered then return { "step", "square_avg", "grad_avg" } end
  return { "step", "square_avg" }
end
optim.RMSprop = RMSprop

-- Adagrad ---------------------------------------------------------------------

--- Adagrad: divides by the root of the sum of squared gradients, with the lr decayed as
-- `lr / (1 + (step - 1) * lr_decay)`.
-- @function Adagrad
-- @param params a tensor, a list or iterator of tensors (`model:parameters()`,
-- `model:named_parameters()`), or a list of group tables `{params = ..., lr = ...}`
-- @tparam[opt] table opts `lr` (1e-2), `lr_decay` (0), `weight_decay` (0),
-- `initial_accumulator_value` (0), `eps` (1e-10), `maximize` (false)
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
Adagrad.state_tensors = { "sum" }
function Adagrad.required_state() return { "step", "sum" } end
optim.Adagrad = Adagrad

setmetatable(optim, { __index = function(t, k)
  if k == "lr_scheduler" then
    local v = require "lantern.optim.lr_scheduler"
    rawset(t, k, v)
    return v
  end
end })

return optim
