-- Activation layers: ReLU, LeakyReLU, ELU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax, ...
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

local function inplace_repr(self) return self.inplace and "inplace=True" or "" end

simple("ReLU", { { "inplace", false } }, function(_, x) return F.relu(x) end, inplace_repr)
simple("ReLU6", { { "inplace", false } }, function(_, x) return F.relu6(x) end, inplace_repr)
simple("LeakyReLU", { { "negative_slope", 0.01 }, { "inplace", false } },
  function(self, x) return F.leaky_relu(x, self.negative_slope) end,
  function(self)
    return "negative_slope=" .. util.num_str(self.negative_slope) .. (self.inplace and ", inplace=True" or "")
  end)
simple("ELU", { { "alpha", 1.0 }, { "inplace", false } },
  function(self, x) return F.elu(x, self.alpha) end,
  function(self)
    return "alpha=" .. util.num_str(self.alpha) .. (self.inplace and ", inplace=True" or "")
  end)
simple("GELU", { { "approximate", "none" } },
  function(self, x) return F.gelu(x, self.approximate) end,
  function(self) return "approximate='" .. self.approximate .. "'" end)
simple("SiLU", { { "inplace", false } }, function(_, x) return F.silu(x) end, inplace_repr)
simple("Mish", { { "inplace", false } }, function(_, x) return F.mish(x) end, inplace_repr)
simple("Tanh", {}, function(_, x) return F.tanh(x) end)
simple("Sigmoid", {}, function(_, x) return F.sigmoid(x) end)
simple("LogSigmoid", {}, function(_, x) return F.logsigmoid(x) end)
simple("Softsign", {}, function(_, x) return F.softsign(x) end)
simple("Hardtanh", { { "min_val", -1.0 }, { "max_val", 1.0 }, { "inplace", false } },
  function(self, x) return F.hardtanh(x, self.min_val, self.max_val) end,
  function(self)
    return "min_val=" .. util.num_str(self.min_val) .. ", max_val=" .. util.num_str(self.max_val) ..
      (self.inplace and ", inplace=True" or "")
  end)
simple("Softplus", { { "beta", 1 }, { "threshold", 20 } },
  function(self, x) return F.softplus(x, self.beta, self.threshold) end,
  function(self) return "beta=" .. util.num_str(self.beta) .. ", threshold=" .. util.num_str(self.threshold) end)

-- Softmax(dim) / LogSoftmax(dim) / Softmin(dim) in Lua dims; dim = nil uses PyTorch's legacy
-- implicit choice.
local function dim_repr(self) return "dim=" .. (self.dim == nil and "None" or tostring(self.dim)) end
simple("Softmax", { { "dim", nil } }, function(self, x) return F.softmax(x, self.dim) end, dim_repr)
simple("LogSoftmax", { { "dim", nil } }, function(self, x) return F.log_softmax(x, self.dim) end, dim_repr)
simple("Softmin", { { "dim", nil } }, function(self, x) return F.softmin(x, self.dim) end, dim_repr)
simple("GLU", { { "dim", -1 } }, function(self, x) return F.glu(x, self.dim) end, dim_repr)

return A
