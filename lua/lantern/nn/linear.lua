--- Identity, Linear, Bilinear, Flatten, Unflatten.
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local check = require("lantern.options").check
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local init = require "lantern.nn.initfn"

local Module = mod.Module
local L = {}

local LAYER_OPTS = { "bias", "dtype", "device" }

local function opts_of(v, where)
  if v ~= nil and type(v) ~= "table" then
    error(where .. ": options must be a table, e.g. {bias = false}, got " .. type(v), util.user_level())
  end
  return check(where, v, LAYER_OPTS)
end

-- Factory options shared by the layers: {dtype = "float64"} (device is cpu only).
local function factory(opts, where) return util.factory(opts, where) end
L._factory = factory

-- A newcomer's commonest slip: integer data (a tensor of Lua integers) into a float layer.
-- PyTorch reports a dtype clash inside matmul; this names the layer and the conversion.
function L._check_float_input(where, x, weight)
  if x.dtype == weight.dtype then return end
  local conv = weight.dtype == "float64" and "x:double()" or "x:float()"
  if not util.is_float(x) then
    error(where .. ": expected a floating-point input, got " .. x.dtype .. " (convert it with " ..
      conv .. ")", util.user_level())
  end
  error(where .. ": input is " .. x.dtype .. " but the layer's weight is " .. weight.dtype ..
    " (convert the input with " .. conv .. ", or the layer with m:" ..
    (x.dtype == "float64" and "double()" or "float()") .. ")", util.user_level())
end
local check_float_input = L._check_float_input

local function bias_flag(opts)
  if opts.bias == nil then return true end
  return opts.bias and true or false
end

---------------------------------------------------------------------------------------------
--- Linear layers and reshaping.
-- @section linear

--- Returns its input unchanged (a placeholder, as PyTorch's `nn.Identity`).
-- @function Identity
local Identity = Module:extend("Identity")
L.Identity = Identity
function Identity:__init() Module.__init(self) end
function Identity:forward(x) return x end

--- `y = x W^T + b`, applied to the last dim.
--
-- Shapes: input `(*, in_features)`, output `(*, out_features)`. Parameters: `weight`
-- `(out_features, in_features)` and `bias` `(out_features)`, both uniform in
-- `(-1/sqrt(in_features), 1/sqrt(in_features))` (PyTorch's kaiming_uniform with a = sqrt(5)).
-- An integer input raises naming the conversion (`x:float()`).
-- @function Linear
-- @int in_features
-- @int out_features
-- @tparam[opt] table opts `bias` (default true), `dtype` (default `"float32"`)
-- @usage local fc = nn.Linear(4, 2)
-- fc(lt.randn(8, 4)).shape   --> {8, 2}
-- nn.Linear(4, 2, {bias = false})
local Linear = Module:extend("Linear")
L.Linear = Linear

function Linear:__init(in_features, out_features, opts)
  Module.__init(self)
  opts = opts_of(opts, "Linear")
  if type(opts.bias) == "boolean" or opts.bias == nil then else
    error("Linear: option bias must be a boolean", 2)
  end
  self.in_features = util.check_int(in_features, "Linear", "in_features", 0)
  self.out_features = util.check_int(out_features, "Linear", "out_features", 0)
  local f = factory(opts, "Linear")
  self.weight = lt.empty(out_features, in_features, f)
  if bias_flag(opts) then
    self.bias = lt.empty(out_features, f)
  else
    self:register_parameter("bias", nil)
  end
  self:_init_parameters()
end

function Linear:reset_parameters()
  init.kaiming_uniform_(self.weight, math.sqrt(5))
  if self.bias ~= nil then
    local fan_in = init._calculate_fan_in_and_fan_out(self.weight)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end

function Linear:forward(x)
  if not util.is_tensor(x) then error("Linear: expected a Tensor input, got " .. util.typename(x), 2) end
  if x:dim() == 0 or x:size(-1) ~= self.in_features then
    error("Linear: input of shape " .. util.shape_str(x) .. " does not match in_features=" ..
      self.in_features .. " (last dim must be " .. self.in_features .. ")", 2)
  end
  check_float_input("Linear", x, self.weight)
  return F.linear(x, self.weight, self.bias)
end

function Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features,
    self.out_features, util.bool_str(self.bias ~= nil))
end

--- `y_k = x1^T W_k x2 + b_k`.
--
-- Shapes: inputs `(*, in1_features)` and `(*, in2_features)`, output `(*, out_features)`.
-- Parameters: `weight` `(out_features, in1_features, in2_features)`, `bias`
-- `(out_features)`, uniform in `(-1/sqrt(in1_features), 1/sqrt(in1_features))`.
-- @function Bilinear
-- @int in1_features
-- @int in2_features
-- @int out_features
-- @tparam[opt] table opts `bias` (default true), `dtype`
-- @usage nn.Bilinear(3, 4, 2)(lt.randn(5, 3), lt.randn(5, 4)).shape   --> {5, 2}
local Bilinear = Module:extend("Bilinear")
L.Bilinear = Bilinear

function Bilinear:__init(in1_features, in2_features, out_features, opts)
  Module.__init(self)
  opts = opts_of(opts, "Bilinear")
  self.in1_features = util.check_int(in1_features, "Bilinear", "in1_features", 0)
  self.in2_features = util.check_int(in2_features, "Bilinear", "in2_features", 0)
  self.out_features = util.check_int(out_features, "Bilinear", "out_features", 0)
  local f = factory(opts, "Bilinear")
  self.weight = lt.empty(out_features, in1_features, in2_features, f)
  if bias_flag(opts) then
    self.bias = lt.empty(out_features, f)
  else
    self:register_parameter("bias", nil)
  end
  self:_init_parameters()
end

function Bilinear:reset_parameters()
  local bound = 1 / math.sqrt(self.weight:size(2))
  init.uniform_(self.weight, -bound, bound)
  if self.bias ~= nil then init.uniform_(self.bias, -bound, bound) end
end

function Bilinear:forward(x1, x2)
  if not util.is_tensor(x1) or not util.is_tensor(x2) then
    error("Bilinear: expected two Tensor inputs", 2)
  end
  if x1:dim() == 0 or x1:size(-1) ~= self.in1_features or x2:dim() == 0 or
    x2:size(-1) ~= self.in2_features then
    error("Bilinear: inputs of shape " .. util.shape_str(x1) .. " and " .. util.shape_str(x2) ..
      " do not match in1_features=" .. self.in1_features .. ", in2_features=" ..
      self.in2_features, 2)
  end
  check_float_input("Bilinear", x1, self.weight)
  check_float_input("Bilinear", x2, self.weight)
  return F.bilinear(x1, x2, self.weight, self.bias)
end

function Bilinear:extra_repr()
  return string.format("in1_features=%d, in2_features=%d, out_features=%d, bias=%s",
    self.in1_features, self.in2_features, self.out_features, util.bool_str(self.bias ~= nil))
end

--- Flattens dims `start_dim`..`end_dim` into one (Lua dims: the default 2 is PyTorch's
-- `Flatten(1, -1)`, keeping the batch dim).
--
-- Shapes: input `(N, *)`, output `(N, prod(*))` with the defaults.
-- @function Flatten
-- @int[opt=2] start_dim
-- @int[opt=-1] end_dim
-- @usage nn.Flatten()(lt.zeros(8, 3, 4, 4)).shape   --> {8, 48}
local Flatten = Module:extend("Flatten")
L.Flatten = Flatten
function Flatten:__init(start_dim, end_dim)
  Module.__init(self)
  self.start_dim = start_dim or 2
  self.end_dim = end_dim or -1
end
function Flatten:forward(x) return x:flatten(self.start_dim, self.end_dim) end
function Flatten:extra_repr()
  return string.format("start_dim=%d, end_dim=%d", self.start_dim, self.end_dim)
end

--- Splits dim `dim` into `unflattened_size` (the inverse of Flatten).
--
-- Shapes: input `(*, S, *)` with S the product of the sizes, output `(*, s1, s2, ..., *)`.
-- @function Unflatten
-- @int dim (1-based)
-- @tab unflattened_size
-- @usage nn.Unflatten(2, {2, 3})(lt.zeros(4, 6)).shape   --> {4, 2, 3}
local Unflatten = Module:extend("Unflatten")
L.Unflatten = Unflatten
function Unflatten:__init(dim, unflattened_size)
  Module.__init(self)
  if type(unflattened_size) ~= "table" then
    error("Unflatten: unflattened_size must be a table of sizes", 2)
  end
  self.dim = dim
  self.unflattened_size = unflattened_size
end
function Unflatten:forward(x) return F.unflatten(x, self.dim, self.unflattened_size) end
function Unflatten:extra_repr()
  return "dim=" .. self.dim .. ", unflattened_size=" .. util.tuple_str(self.unflattened_size)
end

return L
