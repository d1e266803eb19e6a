--- Activation layers: ReLU, LeakyReLU, ELU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax, ...
-- @module lantern.nn
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local check = require("lantern.options").check

local Module = mod.Module
local A = {}

local function check_input(self, x)
  if not util.is_tensor(x) then
    error(self:type_name() .. ": expected a Tensor input, got " .. util.typename(x), 3)
  end
end

-- Defines a parameter-free layer: name, constructor field names, forward, repr.
local function simple(name, fields, fwd, repr)
  local cls = Module:extend(name)
  function cls:__init(...)
    Module.__init(self)
    local args = { ... }
    local opts = (#fields > 0 and type(args[1]) == "table") and args[1] or nil
    if opts then
      local known = {}
      for i, f in ipairs(fields) do known[i] = f[1] end
      check(name, opts, known)
    end
    for i, f in ipairs(fields) do
      local v
      if opts then v = opts[f[1]] else v = args[i] end
      if v == nil then v = f[2] end
      self[f[1]] = v
    end
  end
  function cls:forward(x)
    check_input(self, x)
    return fwd(self, x)
  end
  cls.extra_repr = repr or function() return "" end
  A[name] = cls
  return cls
end

---------------------------------------------------------------------------------------------
--- Activations: elementwise layers without parameters; input `(*)`, output the same shape
-- (Softmax, LogSoftmax, Softmin along a dim; GLU halves one). Arguments come positionally or
-- as one options table (`nn.LeakyReLU{negative_slope = 0.2}`).
-- @section activations
local function inplace_repr(self) return self.inplace and "inplace=True" or "" end

--- `max(0, x)`.
-- @function ReLU
-- @bool[opt=false] inplace accepted for PyTorch code; the result is a new tensor
-- @usage nn.ReLU()(lt.tensor{-1.0, 2.0})   --> tensor([0., 2.])
simple("ReLU", { { "inplace", false } }, function(_, x) return F.relu(x) end, inplace_repr)
--- `min(max(0, x), 6)`.
-- @function ReLU6
-- @bool[opt=false] inplace accepted for PyTorch code; the result is a new tensor
simple("ReLU6", { { "inplace", false } }, function(_, x) return F.relu6(x) end, inplace_repr)
--- `x` for x >= 0, `negative_slope * x` below.
-- @function LeakyReLU
-- @number[opt=0.01] negative_slope
-- @bool[opt=false] inplace accepted for PyTorch code; the result is a new tensor
simple("LeakyReLU", { { "negative_slope", 0.01 }, { "inplace", false } },
  function(self, x) return F.leaky_relu(x, self.negative_slope) end,
  function(self)
    return "negative_slope=" .. util.num_str(self.negative_slope) .. (self.inplace and ", inplace=True" or "")
  end)
--- `x` for x > 0, `alpha * (exp(x) - 1)` below.
-- @function ELU
-- @number[opt=1] alpha
-- @bool[opt=false] inplace accepted for PyTorch code; the result is a new tensor
simple("ELU", { { "alpha", 1.0 }, { "inplace", false } },
  function(self, x) return F.elu(x, self.alpha) end,
  function(self)
    return "alpha=" .. util.num_str(self.alpha) .. (self.inplace and ", inplace=True" or "")
  end)
--- `x * Phi(x)` with Phi the standard normal CDF; `approximate = "tanh"` uses the tanh
-- approximation.
-- @function GELU
-- @string[opt="none"] approximate `"none"` or `"tanh"`
simple("GELU", { { "approximate", "none" } },
  function(self, x) return F.gelu(x, self.approximate) end,
  function(self) return "approximate='" .. self.approximate .. "'" end)
--- `x * sigmoid(x)` (swish).
-- @function SiLU
-- @bool[opt=false] inplace accepted for PyTorch code; the result is a new tensor
simple("SiLU", { { "inplace", false } }, function(_, x) return F.silu(x) end, inplace_repr)
--- `x * tanh(softplus(x))`.
-- @function Mish
-- @bool[opt=false] inplace accepted for PyTorch code; the result is a new tensor
simple("Mish", { { "inplace", false } }, function(_, x) return F.mish(x) end, inplace_repr)
--- The hyperbolic tangent.
-- @function Tanh
simple("Tanh", {}, function(_, x) return F.tanh(x) end)
--- `1 / (1 + exp(-x))`.
-- @function Sigmoid
simple("Sigmoid", {}, function(_, x) return F.sigmoid(x) end)
--- `log(sigmoid(x))`, computed stably.
-- @function LogSigmoid
simple("LogSigmoid", {}, function(_, x) return F.logsigmoid(x) end)
--- `x / (1 + |x|)`.
-- @function Softsign
simple("Softsign", {}, function(_, x) return F.softsign(x) end)
--- `x` clamped to `[min_val, max_val]`.
-- @function Hardtanh
-- @number[opt=-1] min_val
-- @number[opt=1] max_val
-- @bool[opt=false] inplace accepted for PyTorch code; the result is a new tensor
simple("Hardtanh", { { "min_val", -1.0 }, { "max_val", 1.0 }, { "inplace", false } },
  function(self, x) return F.hardtanh(x, self.min_val, self.max_val) end,
  function(self)
    return "min_val=" .. util.num_str(self.min_val) .. ", max_val=" .. util.num_str(self.max_val) ..
      (self.inplace and ", inplace=True" or "")
  end)
--- `log(1 + exp(beta * x)) / beta`, linear where `beta * x > threshold`.
-- @function Softplus
-- @number[opt=1] beta
-- @number[opt=20] threshold
simple("Softplus", { { "beta", 1 }, { "threshold", 20 } },
  function(self, x) return F.softplus(x, self.beta, self.threshold) end,
  function(self) return "beta=" .. util.num_str(self.beta) .. ", threshold=" .. util.num_str(self.threshold) end)

-- Softmax(dim) / LogSoftmax(dim) / Softmin(dim) in Lua dims; dim = nil uses PyTorch's legacy
-- implicit choice.
local function dim_repr(self) return "dim=" .. (self.dim == nil and "None" or tostring(self.dim)) end
--- `exp(x) / sum(exp(x))` along `dim`, so each slice sums to 1.
-- @function Softmax
-- @int[opt] dim 1-based (nil: PyTorch's legacy implicit choice, dim 1 for 0-, 1- and 3-D
-- input, else 2)
-- @usage nn.Softmax(2)(lt.randn(4, 10)):sum(2)   --> ones
simple("Softmax", { { "dim", nil } }, function(self, x) return F.softmax(x, self.dim) end, dim_repr)
--- `log(softmax(x))` along `dim`, computed stably (input to `NLLLoss`).
-- @function LogSoftmax
-- @int[opt] dim 1-based
simple("LogSoftmax", { { "dim", nil } }, function(self, x) return F.log_softmax(x, self.dim) end, dim_repr)
--- `softmax(-x)` along `dim`.
-- @function Softmin
-- @int[opt] dim 1-based
simple("Softmin", { { "dim", nil } }, function(self, x) return F.softmin(x, self.dim) end, dim_repr)
--- Gated linear unit: splits `dim` in halves a and b and returns `a * sigmoid(b)`; the
-- output has half the size along `dim`.
-- @function GLU
-- @int[opt=-1] dim
simple("GLU", { { "dim", -1 } }, function(self, x) return F.glu(x, self.dim) end, dim_repr)

return A
