--- Loss modules over nn.functional: MSELoss, L1Loss, SmoothL1Loss, HuberLoss, CrossEntropyLoss,
-- NLLLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss. Options as a table, e.g.
-- nn.CrossEntropyLoss{weight = w, ignore_index = 1, reduction = "sum", label_smoothing = 0.1};
-- nn.MSELoss("sum") is accepted as a shorthand for {reduction = "sum"}. Class targets are int64
-- 1-based class indices; ignore_index is compared with the target values as given (a 1-based
-- class, or the default -100). weight / pos_weight are buffers, as in PyTorch.
-- @module lantern.nn
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local check = require("lantern.options").check

local Module = mod.Module
local Loss = {}

---------------------------------------------------------------------------------------------
--- Losses: `loss(input, target)` returns a 0-dim tensor (or, with `reduction = "none"`, one
-- value per element or sample). Options come as a table or, for the reduction alone, as a
-- string (`nn.MSELoss("sum")`); `weight` and `pos_weight` become buffers, as in PyTorch. Each
-- is the module form of the function of the same name in `nn.functional`. A target that only
-- broadcasts to the input warns, as PyTorch does.
-- @section losses
local function opts_of(v, where, known)
  if type(v) == "string" then return { reduction = v } end
  if v ~= nil and type(v) ~= "table" then
    error(where .. ": options must be a table, e.g. {reduction = 'sum'}, got " .. type(v),
      util.user_level())
  end
  return check(where, v, known)
end

local function define(name, fields, weighted, fn)
  local cls = Module:extend(name)
  local known = { "reduction", "size_average", "reduce" }
  for _, f in ipairs(fields) do known[#known + 1] = f[1] end
  for _, w in ipairs(weighted) do known[#known + 1] = w end
  function cls:__init(opts)
    Module.__init(self)
    opts = opts_of(opts, name, known)
    if name == "KLDivLoss" and opts.reduction == "batchmean" then
      self.reduction = "batchmean"
    else
      self.reduction = F._reduction_of(
        { reduction = opts.reduction, size_average = opts.size_average, reduce = opts.reduce }, name)
    end
    for _, f in ipairs(fields) do
      local v = opts[f[1]]
      if v == nil then v = f[2] end
      self[f[1]] = v
    end
    for _, w in ipairs(weighted) do
      local t = opts[w]
      if t ~= nil and not util.is_tensor(t) then
        error(name .. ": option " .. w .. " must be a Tensor, got " .. util.typename(t), 2)
      end
      self:register_buffer(w, t)
    end
  end
  function cls:forward(input, target)
    if not util.is_tensor(input) then error(name .. ": expected input to be a Tensor, got " .. util.typename(input), 2) end
    if not util.is_tensor(target) then error(name .. ": expected target to be a Tensor, got " .. util.typename(target), 2) end
    return fn(self, input, target)
  end
  Loss[name] = cls
  return cls
end

--- Mean squared error `(input - target)^2`.
--
-- Shapes: input and target `(*)` of the same shape.
-- @function MSELoss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`)
-- @usage nn.MSELoss()(lt.tensor{1.0, 2.0}, lt.tensor{1.0, 4.0}):item()   --> 2.0
define("MSELoss", {}, {}, function(self, x, y) return F.mse_loss(x, y, { reduction = self.reduction }) end)
--- Mean absolute error `|input - target|`.
--
-- Shapes: input and target `(*)`.
-- @function L1Loss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`)
define("L1Loss", {}, {}, function(self, x, y) return F.l1_loss(x, y, { reduction = self.reduction }) end)
--- `0.5 d^2 / beta` where `|d| < beta`, `|d| - 0.5 beta` elsewhere (d = input - target).
--
-- Shapes: input and target `(*)`.
-- @function SmoothL1Loss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`), `beta` (1)
define("SmoothL1Loss", { { "beta", 1.0 } }, {}, function(self, x, y)
  return F.smooth_l1_loss(x, y, { reduction = self.reduction, beta = self.beta })
end)
--- `0.5 d^2` where `|d| < delta`, `delta (|d| - 0.5 delta)` elsewhere.
--
-- Shapes: input and target `(*)`.
-- @function HuberLoss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`), `delta` (1)
define("HuberLoss", { { "delta", 1.0 } }, {}, function(self, x, y)
  return F.huber_loss(x, y, { reduction = self.reduction, delta = self.delta })
end)
--- Cross entropy of logits: log-softmax over the classes, then the negative log-likelihood
-- of the target classes, in one fused C pass.
--
-- Shapes: input `(N, C)`, `(C)` or `(N, C, d1, ...)`; target int64 class indices in 1..C of
-- shape `(N)` (`()`, `(N, d1, ...)`), or class probabilities of the input's shape.
-- @function CrossEntropyLoss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`), `weight` (a tensor of C class weights),
-- `ignore_index` (-100: a target value that contributes nothing, compared as given),
-- `label_smoothing` (0)
-- @usage local loss = nn.CrossEntropyLoss()(logits, lt.tensor{3, 1})   -- classes are 1-based
define("CrossEntropyLoss", { { "ignore_index", -100 }, { "label_smoothing", 0.0 } }, { "weight" },
  function(self, x, y)
    return F.cross_entropy(x, y, { weight = self.weight, ignore_index = self.ignore_index,
      reduction = self.reduction, label_smoothing = self.label_smoothing })
  end)
--- Negative log-likelihood of log-probabilities (the output of LogSoftmax).
--
-- Shapes: input `(N, C)` or `(N, C, d1, ...)`, target int64 classes in 1..C.
-- @function NLLLoss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`), `weight`, `ignore_index` (-100)
define("NLLLoss", { { "ignore_index", -100 } }, { "weight" }, function(self, x, y)
  return F.nll_loss(x, y, { weight = self.weight, ignore_index = self.ignore_index, reduction = self.reduction })
end)
--- Binary cross entropy of probabilities: `-(t log(x) + (1 - t) log(1 - x))`, the logs
-- clamped at -100 as PyTorch.
--
-- Shapes: input and target `(*)`, input in [0, 1].
-- @function BCELoss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`), `weight` (a tensor broadcast
-- to the input)
define("BCELoss", {}, { "weight" }, function(self, x, y)
  return F.binary_cross_entropy(x, y, { weight = self.weight, reduction = self.reduction })
end)
--- Binary cross entropy of logits (sigmoid and BCELoss in one stable formula).
--
-- Shapes: input and target `(*)`.
-- @function BCEWithLogitsLoss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`), `weight`, `pos_weight` (a weight of the
-- positive class, one per class, broadcast over the last dim)
define("BCEWithLogitsLoss", {}, { "weight", "pos_weight" }, function(self, x, y)
  return F.binary_cross_entropy_with_logits(x, y, { weight = self.weight, pos_weight = self.pos_weight,
    reduction = self.reduction })
end)
--- Kullback-Leibler divergence `target (log(target) - input)` for `input` holding
-- log-probabilities (with `log_target`, target holds them too). `"mean"` averages over every
-- element and warns, as PyTorch; `"batchmean"` divides the sum by the batch size.
--
-- Shapes: input and target `(*)`.
-- @function KLDivLoss
-- @param[opt] opts a table of `reduction` (`"mean"`, the default, `"sum"` or `"none"`; also PyTorch's deprecated
-- `size_average` and `reduce`) or `"batchmean"`, `log_target` (false)
define("KLDivLoss", { { "log_target", false } }, {}, function(self, x, y)
  return F.kl_div(x, y, { reduction = self.reduction, log_target = self.log_target })
end)

return Loss
