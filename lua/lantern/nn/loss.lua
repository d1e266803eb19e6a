-- Loss modules over nn.functional: MSELoss, L1Loss, SmoothL1Loss, HuberLoss, CrossEntropyLoss,
-- NLLLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss. Options as a table, e.g.
-- nn.CrossEntropyLoss{weight = w, ignore_index = 1, reduction = "sum", label_smoothing = 0.1};
-- nn.MSELoss("sum") is accepted as a shorthand for {reduction = "sum"}. Class targets are int64
-- 1-based class indices; ignore_index is compared with the target values as given (a 1-based
-- class, or the default -100). weight / pos_weight are buffers, as in PyTorch.
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local check = require("lantern.options").check

local Module = mod.Module
local Loss = {}

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

define("MSELoss", {}, {}, function(self, x, y) return F.mse_loss(x, y, { reduction = self.reduction }) end)
define("L1Loss", {}, {}, function(self, x, y) return F.l1_loss(x, y, { reduction = self.reduction }) end)
define("SmoothL1Loss", { { "beta", 1.0 } }, {}, function(self, x, y)
  return F.smooth_l1_loss(x, y, { reduction = self.reduction, beta = self.beta })
end)
define("HuberLoss", { { "delta", 1.0 } }, {}, function(self, x, y)
  return F.huber_loss(x, y, { reduction = self.reduction, delta = self.delta })
end)
define("CrossEntropyLoss", { { "ignore_index", -100 }, { "label_smoothing", 0.0 } }, { "weight" },
  function(self, x, y)
    return F.cross_entropy(x, y, { weight = self.weight, ignore_index = self.ignore_index,
      reduction = self.reduction, label_smoothing = self.label_smoothing })
  end)
define("NLLLoss", { { "ignore_index", -100 } }, { "weight" }, function(self, x, y)
  return F.nll_loss(x, y, { weight = self.weight, ignore_index = self.ignore_index, reduction = self.reduction })
end)
define("BCELoss", {}, { "weight" }, function(self, x, y)
  return F.binary_cross_entropy(x, y, { weight = self.weight, reduction = self.reduction })
end)
define("BCEWithLogitsLoss", {}, { "weight", "pos_weight" }, function(self, x, y)
  return F.binary_cross_entropy_with_logits(x, y, { weight = self.weight, pos_weight = self.pos_weight,
    reduction = self.reduction })
end)
define("KLDivLoss", { { "log_target", false } }, {}, function(self, x, y)
  return F.kl_div(x, y, { reduction = self.reduction, log_target = self.log_target })
end)

return Loss
