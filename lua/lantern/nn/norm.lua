--- Normalisation layers: BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm, RMSNorm.
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local init = require "lantern.nn.initfn"
local check = require("lantern.options").check

local Module, NONE = mod.Module, mod.NONE
local N = {}

local function opts_of(v, where, known)
  if v ~= nil and type(v) ~= "table" then
    error(where .. ": options must be a table, e.g. {eps = 1e-3}, got " .. type(v), util.user_level())
  end
  return check(where, v, known)
end

local function flag(v, default)
  if v == nil then return default end
  return v and true or false
end

-- The affine parameters: weight and (unless with_bias is false) bias of `shape`, or the names
-- registered empty, as PyTorch does when affine is off.
local function affine_params(self, on, shape, f, with_bias)
  if on then self.weight = lt.empty(shape, f) else self:register_parameter("weight", nil) end
  if on and with_bias ~= false then
    self.bias = lt.empty(shape, f)
  else
    self:register_parameter("bias", nil)
  end
end

---------------------------------------------------------------------------------------------
--- Normalisation. The kernels and their backward passes are C.
-- @section norm

-- BatchNorm -----------------------------------------------------------------------------
-- _BatchNorm(num_features, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats =
-- true, dtype}). momentum = false (or nn.NONE) selects the cumulative moving average (PyTorch's
-- momentum=None). Buffers: running_mean, running_var, num_batches_tracked (int64).
local BatchNorm = Module:extend("_BatchNorm")
N._BatchNorm = BatchNorm
BatchNorm._version = 2

function BatchNorm:__init(num_features, opts)
  Module.__init(self)
  local name = self:type_name()
  opts = opts_of(opts, name, { "eps", "momentum", "affine", "track_running_stats", "dtype", "device" })
  self.num_features = util.check_int(num_features, name, "num_features", 1)
  self.eps = opts.eps or 1e-5
  local m = opts.momentum
  if m == false or m == NONE then m = nil elseif m == nil then m = 0.1 end
  self.momentum = m
  self.affine = flag(opts.affine, true)
  self.track_running_stats = flag(opts.track_running_stats, true)
  local f = util.factory(opts, name)
  affine_params(self, self.affine, num_features, f)
  if self.track_running_stats then
    self:register_buffer("running_mean", lt.zeros(num_features, f))
    self:register_buffer("running_var", lt.ones(num_features, f))
    self:register_buffer("num_batches_tracked", lt.zeros({}, { dtype = "int64" }))
  else
    self:register_buffer("running_mean", nil)
    self:register_buffer("running_var", nil)
    self:register_buffer("num_batches_tracked", nil)
  end
  self:_init_parameters()
end

function BatchNorm:reset_running_stats()
  if self.track_running_stats then
    lt.no_grad(function()
      self.running_mean:zero_()
      self.running_var:fill_(1)
      self.num_batches_tracked:zero_()
    end)
  end
end

function BatchNorm:reset_parameters()
  self:reset_running_stats()
  if self.affine then
    init.ones_(self.weight)
    init.zeros_(self.bias)
  end
end

function BatchNorm:_check_input_dim() end

function BatchNorm:forward(input)
  local name = self:type_name()
  if not util.is_tensor(input) then error(name .. ": expected a Tensor input, got " .. util.typename(input), 2) end
  self:_check_input_dim(input)
  if input:size(2) ~= self.num_features then
    error(name .. ": expected input with " .. self.num_features .. " channels (dim 2), got input of size " ..
      util.shape_str(input), 2)
  end
  if self.training and input:numel() // self.num_features == 1 then   -- 0: empty out (as PyTorch)
    error(name .. ": Expected more than 1 value per channel when training, got input size " ..
      util.torch_size(input), 2)
  end
  local eaf = self.momentum or 0.0
  if self.training and self.track_running_stats then
    local nbt = self.num_batches_tracked
    if nbt ~= nil then
      lt.no_grad(function() nbt:add_(1) end)
      if self.momentum == nil then eaf = 1.0 / nbt:item() else eaf = self.momentum end
    end
  end
  local bn_training = self.training or (self.running_mean == nil and self.running_var == nil)
  local use_stats = (not self.training) or self.track_running_stats
  return F.batch_norm(input, use_stats and self.running_mean or nil, use_stats and self.running_var or nil,
    self.weight, self.bias, bn_training, eaf, self.eps)
end

function BatchNorm:extra_repr()
  return string.format("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s",
    self.num_features, util.num_str(self.eps), util.num_str(self.momentum),
    util.bool_str(self.affine), util.bool_str(self.track_running_stats))
end

-- Checkpoints from before num_batches_tracked existed (no version-2 metadata) load with 0.
function BatchNorm:_load_from_state_dict(sd, keys, prefix, local_metadata, ...)
  local version = local_metadata and local_metadata.version
  if (version == nil or version < 2) and self.track_running_stats then
    local key = prefix .. "num_batches_tracked"
    if sd[key] == nil then sd[key] = lt.zeros({}, { dtype = "int64" }) end
  end
  return Module._load_from_state_dict(self, sd, keys, prefix, local_metadata, ...)
end

--- Batch normalisation over `(N, C)` or `(N, C, L)` input: each channel is normalised by
-- the batch's mean and biased variance while training (updating the running statistics
-- with `momentum`, the unbiased variance as PyTorch), by the running statistics in eval mode.
-- `bn:reset_running_stats()` starts them again.
--
-- Shapes: output as input.
-- @function BatchNorm1d
-- @int num_features C
-- @tparam[opt] table opts `eps` (1e-5, added to the variance), `momentum` (0.1; false for
-- the cumulative average, PyTorch's `momentum=None`), `affine` (true: learnable `weight` and
-- `bias` of size C, ones and zeros), `track_running_stats` (true: buffers `running_mean`,
-- `running_var` and `num_batches_tracked`, int64), `dtype`
local BatchNorm1d = BatchNorm:extend("BatchNorm1d")
N.BatchNorm1d = BatchNorm1d
function BatchNorm1d:_check_input_dim(input)
  local d = input:dim()
  if d ~= 2 and d ~= 3 then
    error("BatchNorm1d: expected 2D or 3D input (got " .. d .. "D input of size " ..
      util.shape_str(input) .. ")", 3)
  end
end

--- Batch normalisation over `(N, C, H, W)` input, per channel C; as BatchNorm1d otherwise.
--
-- Shapes: output as input.
-- @function BatchNorm2d
-- @int num_features C
-- @tparam[opt] table opts `eps` (1e-5, added to the variance), `momentum` (0.1; false for
-- the cumulative average, PyTorch's `momentum=None`), `affine` (true: learnable `weight` and
-- `bias` of size C, ones and zeros), `track_running_stats` (true: buffers `running_mean`,
-- `running_var` and `num_batches_tracked`, int64), `dtype`
-- @usage local bn = nn.BatchNorm2d(16)
-- bn(lt.randn(8, 16, 4, 4)); bn:eval()   -- running_mean and running_var are updated, then used
local BatchNorm2d = BatchNorm:extend("BatchNorm2d")
N.BatchNorm2d = BatchNorm2d
function BatchNorm2d:_check_input_dim(input)
  local d = input:dim()
  if d ~= 4 then
    error("BatchNorm2d: expected 4D input (got " .. d .. "D input of size " ..
      util.shape_str(input) .. ")", 3)
  end
end

-- LayerNorm -----------------------------------------------------------------------------
local function shape_of(ns, where)
  if type(ns) == "number" then ns = { ns } end
  if type(ns) ~= "table" or #ns == 0 then
    error(where .. ": normalized_shape must be a number or a table of sizes", 3)
  end
  local out = {}
  for i, v in ipairs(ns) do out[i] = util.check_int(v, where, "normalized_shape", 1) end
  return out
end

--- Layer normalisation over the last dims (those of `normalized_shape`), per sample:
-- `(x - mean) / sqrt(var + eps) * weight + bias`.
--
-- Shapes: input `(*, normalized_shape...)`, output the same. Parameters `weight` (ones) and
-- `bias` (zeros) of `normalized_shape`.
-- @function LayerNorm
-- @param normalized_shape a size or a table of sizes
-- @tparam[opt] table opts `eps` (1e-5), `elementwise_affine` (true), `bias` (true), `dtype`
-- @usage nn.LayerNorm(64)(lt.randn(2, 10, 64)).shape   --> {2, 10, 64}
local LayerNorm = Module:extend("LayerNorm")
N.LayerNorm = LayerNorm
function LayerNorm:__init(normalized_shape, opts)
  Module.__init(self)
  opts = opts_of(opts, "LayerNorm", { "eps", "elementwise_affine", "bias", "dtype", "device" })
  self.normalized_shape = shape_of(normalized_shape, "LayerNorm")
  self.eps = opts.eps or 1e-5
  self.elementwise_affine = flag(opts.elementwise_affine, true)
  affine_params(self, self.elementwise_affine, self.normalized_shape,
    util.factory(opts, "LayerNorm"), flag(opts.bias, true))
  self:_init_parameters()
end
function LayerNorm:reset_parameters()
  if self.weight ~= nil then init.ones_(self.weight) end
  if self.bias ~= nil then init.zeros_(self.bias) end
end
function LayerNorm:forward(x)
  if not util.is_tensor(x) then error("LayerNorm: expected a Tensor input, got " .. util.typename(x), 2) end
  return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
end
function LayerNorm:extra_repr()
  return util.tuple_str(self.normalized_shape) .. ", eps=" .. util.num_str(self.eps) ..
    ", elementwise_affine=" .. util.bool_str(self.elementwise_affine)
end

--- Group normalisation: the C channels split into `num_groups` groups, each normalised over
-- its channels and spatial positions, per sample.
--
-- Shapes: input `(N, C, *)`, output the same. Parameters `weight` (ones) and `bias` (zeros)
-- of size C.
-- @function GroupNorm
-- @int num_groups must divide num_channels
-- @int num_channels C
-- @tparam[opt] table opts `eps` (1e-5), `affine` (true), `dtype`
local GroupNorm = Module:extend("GroupNorm")
N.GroupNorm = GroupNorm
function GroupNorm:__init(num_groups, num_channels, opts)
  Module.__init(self)
  opts = opts_of(opts, "GroupNorm", { "eps", "affine", "dtype", "device" })
  self.num_groups = util.check_int(num_groups, "GroupNorm", "num_groups", 1)
  self.num_channels = util.check_int(num_channels, "GroupNorm", "num_channels", 1)
  if num_channels % num_groups ~= 0 then
    error("GroupNorm: num_channels must be divisible by num_groups", 2)
  end
  self.eps = opts.eps or 1e-5
  self.affine = flag(opts.affine, true)
  affine_params(self, self.affine, num_channels, util.factory(opts, "GroupNorm"))
  self:_init_parameters()
end
function GroupNorm:reset_parameters()
  if self.affine then
    init.ones_(self.weight)
    init.zeros_(self.bias)
  end
end
function GroupNorm:forward(x)
  if not util.is_tensor(x) then error("GroupNorm: expected a Tensor input, got " .. util.typename(x), 2) end
  if x:dim() < 2 or x:size(2) ~= self.num_channels then
    error("GroupNorm: expected input with " .. self.num_channels .. " channels (dim 2), got input of size " ..
      util.shape_str(x), 2)
  end
  return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end
function GroupNorm:extra_repr()
  return self.num_groups .. ", " .. self.num_channels .. ", eps=" .. util.num_str(self.eps) ..
    ", affine=" .. util.bool_str(self.affine)
end

--- Root-mean-square normalisation over the last dims: `x / sqrt(mean(x^2) + eps) * weight`
-- (PyTorch 2.4's `nn.RMSNorm`).
--
-- Shapes: input `(*, normalized_shape...)`, output the same. Parameter `weight` (ones).
-- @function RMSNorm
-- @param normalized_shape a size or a table of sizes
-- @tparam[opt] table opts `eps` (default: the dtype's machine epsilon), `elementwise_affine`
-- (true), `dtype`
local RMSNorm = Module:extend("RMSNorm")
N.RMSNorm = RMSNorm
function RMSNorm:__init(normalized_shape, opts)
  Module.__init(self)
  opts = opts_of(opts, "RMSNorm", { "eps", "elementwise_affine", "dtype", "device" })
  self.normalized_shape = shape_of(normalized_shape, "RMSNorm")
  self.eps = opts.eps
  self.elementwise_affine = flag(opts.elementwise_affine, true)
  if self.elementwise_affine then
    self.weight = lt.empty(self.normalized_shape, util.factory(opts, "RMSNorm"))
  else
    self:register_parameter("weight", nil)
  end
  self:_init_parameters()
end
function RMSNorm:reset_parameters()
  if self.weight ~= nil then init.ones_(self.weight) end
end
function RMSNorm:forward(x)
  if not util.is_tensor(x) then error("RMSNorm: expected a Tensor input, got " .. util.typename(x), 2) end
  return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)
end
function RMSNorm:extra_repr()
  return util.tuple_str(self.normalized_shape) .. ", eps=" .. util.num_str(self.eps) ..
    ", elementwise_affine=" .. util.bool_str(self.elementwise_affine)
end

return N
