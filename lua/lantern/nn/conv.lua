--- Convolution and pooling layers: Conv1d, Conv2d, ConvTranspose2d, MaxPool2d, AvgPool2d,
-- AdaptiveAvgPool2d. The kernels (and their backward passes) are C ops of the core. Upsample,
-- PixelShuffle and PixelUnshuffle are made of tensor ops.
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local init = require "lantern.nn.initfn"
local linear = require "lantern.nn.linear"
local check = require("lantern.options").check

local Module = mod.Module
local ntuple, tuple_str = util.ntuple, util.tuple_str
local C = {}

-- Options: a table {stride, padding, dilation, groups, bias, padding_mode, output_padding,
-- dtype}, or PyTorch's positional order after kernel_size.
local POS = { "stride", "padding", "dilation", "groups", "bias", "padding_mode" }
local POS_T = { "stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode" }
local KNOWN = { "stride", "padding", "dilation", "groups", "bias", "padding_mode", "dtype", "device" }
local KNOWN_T = { "stride", "padding", "output_padding", "groups", "bias", "dilation",
  "padding_mode", "dtype", "device" }
-- A table after kernel_size is the options unless it is a size ({2, 2} as the stride).
local function conv_opts(where, order, known, ...)
  local first = ...
  if select("#", ...) == 1 and util.is_options(first) then return check(where, first, known) end
  local o = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if i == select("#", ...) and i > 1 and util.is_options(v) then
      -- positional values followed by an options table: Conv2d(1, 2, 3, 2, {bias = false})
      check(where, v, known)
      for k, x in pairs(v) do
        if o[k] ~= nil then error(where .. ": option '" .. k .. "' given twice", util.user_level()) end
        o[k] = x
      end
    elseif order[i] == nil then
      error(where .. ": too many arguments (" .. select("#", ...) + 3 .. ")", util.user_level())
    else
      o[order[i]] = v
    end
  end
  return o
end

local function all_eq(t, v)
  for _, x in ipairs(t) do if x ~= v then return false end end
  return true
end

---------------------------------------------------------------------------------------------
--- Convolution and pooling. The kernels and their backward passes are C (im2col and
-- OpenBLAS GEMM for convolutions). Each layer also takes unbatched input, without the N dim.
-- @section conv
local ConvNd = Module:extend("_ConvNd")
C._ConvNd = ConvNd

function ConvNd:__init(name, nsp, transposed, in_channels, out_channels, kernel_size, o)
  Module.__init(self)
  self.in_channels = util.check_int(in_channels, name, "in_channels", 1)
  self.out_channels = util.check_int(out_channels, name, "out_channels", 1)
  local groups = util.check_int(o.groups or 1, name, "groups", 1)
  if in_channels % groups ~= 0 then error(name .. ": in_channels must be divisible by groups", 4) end
  if out_channels % groups ~= 0 then error(name .. ": out_channels must be divisible by groups", 4) end
  self.kernel_size = ntuple(kernel_size, nsp, name .. " kernel_size")
  self.stride = ntuple(o.stride or 1, nsp, name .. " stride")
  local padding = o.padding or 0
  if type(padding) == "string" then
    if padding ~= "same" and padding ~= "valid" then
      error(name .. ": Invalid padding string '" .. padding .. "', should be one of {'valid', 'same'}", 4)
    end
    if padding == "same" and not all_eq(self.stride, 1) then
      error(name .. ": padding='same' is not supported for strided convolutions", 4)
    end
    self.padding = padding
  else
    self.padding = ntuple(padding, nsp, name .. " padding")
  end
  self.dilation = ntuple(o.dilation or 1, nsp, name .. " dilation")
  self.output_padding = ntuple(o.output_padding or 0, nsp, name .. " output_padding")
  self.transposed = transposed
  self.groups = groups
  self.padding_mode = o.padding_mode or "zeros"
  local modes = { zeros = true, reflect = true, replicate = true, circular = true }
  if not modes[self.padding_mode] then
    error(name .. ": padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', got '" ..
      tostring(self.padding_mode) .. "'", 4)
  end
  if transposed and self.padding_mode ~= "zeros" then
    error(name .. ": Only \"zeros\" padding mode is supported for " .. name, 4)
  end
  local f = util.factory(o, name)
  local wshape
  if transposed then
    wshape = { in_channels, out_channels // groups }
  else
    wshape = { out_channels, in_channels // groups }
  end
  for _, k in ipairs(self.kernel_size) do wshape[#wshape + 1] = k end
  self.weight = lt.empty(wshape, f)
  local bias = o.bias
  if bias == nil then bias = true end
  if bias then
    self.bias = lt.empty(out_channels, f)
  else
    self:register_parameter("bias", nil)
  end
  self:_init_parameters()
end

function ConvNd:reset_parameters()
  init.kaiming_uniform_(self.weight, math.sqrt(5))
  if self.bias ~= nil then
    local fan_in = init._calculate_fan_in_and_fan_out(self.weight)
    if fan_in ~= 0 then
      local bound = 1 / math.sqrt(fan_in)
      init.uniform_(self.bias, -bound, bound)
    end
  end
end

function ConvNd:extra_repr()
  local s = self.in_channels .. ", " .. self.out_channels .. ", kernel_size=" ..
    tuple_str(self.kernel_size) .. ", stride=" .. tuple_str(self.stride)
  if type(self.padding) == "string" then
    s = s .. ", padding=" .. self.padding
  elseif not all_eq(self.padding, 0) then
    s = s .. ", padding=" .. tuple_str(self.padding)
  end
  if not all_eq(self.dilation, 1) then s = s .. ", dilation=" .. tuple_str(self.dilation) end
  if not all_eq(self.output_padding, 0) then
    s = s .. ", output_padding=" .. tuple_str(self.output_padding)
  end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=False" end
  if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end

-- The input padded for a padding_mode other than zeros (the convolution then pads nothing), as
-- PyTorch's _reversed_padding_repeated_twice: last dim first, "same" split with the extra
-- element after.
function ConvNd:_pad_input(x)
  if self.padding_mode == "zeros" then return x end
  local amounts = {}
  for i = #self.kernel_size, 1, -1 do
    local before, after
    if self.padding == "valid" then
      before, after = 0, 0
    elseif self.padding == "same" then
      local total = self.dilation[i] * (self.kernel_size[i] - 1)
      before = total // 2
      after = total - before
    else
      before, after = self.padding[i], self.padding[i]
    end
    amounts[#amounts + 1] = before
    amounts[#amounts + 1] = after
  end
  return F.pad(x, amounts, self.padding_mode)
end

function ConvNd:_conv_opts()
  return { stride = self.stride, padding = self.padding_mode == "zeros" and self.padding or 0,
    dilation = self.dilation, groups = self.groups }
end

--- 1-D convolution over `(N, C_in, L)` input.
--
-- Shapes: output `(N, C_out, L_out)` with
-- `L_out = floor((L + 2 padding - dilation (kernel_size - 1) - 1) / stride) + 1`.
-- Parameters: `weight` `(C_out, C_in / groups, kernel_size)` and `bias` `(C_out)`, uniform in
-- `(-1/sqrt(k), 1/sqrt(k))` with `k = C_in / groups * kernel_size` (PyTorch's init).
-- @function Conv1d
-- @int in_channels `C_in`
-- @int out_channels `C_out`
-- @param kernel_size number or `{k}`
-- @tparam[opt] table opts `stride` (default 1), `padding` (0; a number, one per dim,
-- `"valid"` or `"same"`, which needs stride 1 and puts an odd extra zero at the end),
-- `dilation` (1), `groups` (1: `in_channels` and `out_channels` must divide by it), `bias`
-- (true), `padding_mode` (`"zeros"`, `"reflect"`, `"replicate"` or `"circular"`), `dtype`;
-- or PyTorch's positional order after kernel_size (stride, padding, dilation, groups, bias,
-- padding_mode), optionally followed by the table
-- @usage nn.Conv1d(4, 8, 3, {padding = 1})(lt.randn(2, 4, 10)).shape   --> {2, 8, 10}
local Conv1d = ConvNd:extend("Conv1d")
C.Conv1d = Conv1d
function Conv1d:__init(in_channels, out_channels, kernel_size, ...)
  ConvNd.__init(self, "Conv1d", 1, false, in_channels, out_channels, kernel_size,
    conv_opts("Conv1d", POS, KNOWN, ...))
end
function Conv1d:forward(x)
  if not util.is_tensor(x) then error("Conv1d: expected a Tensor input, got " .. util.typename(x), 2) end
  linear._check_float_input("Conv1d", x, self.weight)
  return F.conv1d(self:_pad_input(x), self.weight, self.bias, self:_conv_opts())
end

--- 2-D convolution over `(N, C_in, H, W)` input.
--
-- Shapes: output `(N, C_out, H_out, W_out)` with
-- `H_out = floor((H + 2 padding[1] - dilation[1] (kernel_size[1] - 1) - 1) / stride[1]) + 1`
-- and the same for W with the second values.
-- Parameters: `weight` `(C_out, C_in / groups, kH, kW)` and `bias` `(C_out)`, uniform in
-- `(-1/sqrt(k), 1/sqrt(k))` with `k = C_in / groups * kH * kW` (PyTorch's init).
-- An integer input raises naming the conversion.
-- @function Conv2d
-- @int in_channels `C_in`
-- @int out_channels `C_out`
-- @param kernel_size number or `{kH, kW}`
-- @tparam[opt] table opts `stride` (default 1), `padding` (0; a number, one per dim,
-- `"valid"` or `"same"`, which needs stride 1 and puts an odd extra zero at the end),
-- `dilation` (1), `groups` (1: `in_channels` and `out_channels` must divide by it), `bias`
-- (true), `padding_mode` (`"zeros"`, `"reflect"`, `"replicate"` or `"circular"`), `dtype`;
-- or PyTorch's positional order after kernel_size (stride, padding, dilation, groups, bias,
-- padding_mode), optionally followed by the table
-- @usage local conv = nn.Conv2d(3, 16, 3, {padding = 1})
-- conv(lt.randn(8, 3, 32, 32)).shape                      --> {8, 16, 32, 32}
-- nn.Conv2d(16, 32, 3, 2)(lt.randn(1, 16, 32, 32)).shape  --> {1, 32, 15, 15} (stride 2)
local Conv2d = ConvNd:extend("Conv2d")
C.Conv2d = Conv2d
function Conv2d:__init(in_channels, out_channels, kernel_size, ...)
  ConvNd.__init(self, "Conv2d", 2, false, in_channels, out_channels, kernel_size,
    conv_opts("Conv2d", POS, KNOWN, ...))
end
function Conv2d:forward(x)
  if not util.is_tensor(x) then error("Conv2d: expected a Tensor input, got " .. util.typename(x), 2) end
  linear._check_float_input("Conv2d", x, self.weight)
  return F.conv2d(self:_pad_input(x), self.weight, self.bias, self:_conv_opts())
end

--- 2-D transposed convolution (the gradient of Conv2d with respect to its input), over
-- `(N, C_in, H, W)` input.
--
-- Shapes: output `(N, C_out, H_out, W_out)` with
-- `H_out = (H - 1) stride - 2 padding + dilation (kernel_size - 1) + output_padding + 1`.
-- `forward(x, output_size)` picks the output_padding that gives `output_size` (its last two
-- entries). Parameters: `weight` `(C_in, C_out / groups, kH, kW)` and `bias` `(C_out)`.
-- `padding_mode` other than `"zeros"` raises, as in PyTorch.
-- @function ConvTranspose2d
-- @int in_channels
-- @int out_channels
-- @param kernel_size number or `{kH, kW}`
-- @tparam[opt] table opts `stride` (1), `padding` (0), `output_padding` (0), `groups` (1),
-- `bias` (true), `dilation` (1), `dtype`; or PyTorch's positional order after kernel_size
-- (stride, padding, output_padding, groups, bias, dilation)
-- @usage nn.ConvTranspose2d(8, 4, 2, {stride = 2})(lt.randn(1, 8, 5, 5)).shape   --> {1, 4, 10, 10}
local ConvTranspose2d = ConvNd:extend("ConvTranspose2d")
C.ConvTranspose2d = ConvTranspose2d
function ConvTranspose2d:__init(in_channels, out_channels, kernel_size, ...)
  local o = conv_opts("ConvTranspose2d", POS_T, KNOWN_T, ...)
  if type(o.padding) == "string" then error("ConvTranspose2d: padding must be a number or a table", 2) end
  ConvNd.__init(self, "ConvTranspose2d", 2, true, in_channels, out_channels, kernel_size, o)
end
function ConvTranspose2d:forward(x, output_size)
  if not util.is_tensor(x) then
    error("ConvTranspose2d: expected a Tensor input, got " .. util.typename(x), 2)
  end
  linear._check_float_input("ConvTranspose2d", x, self.weight)
  local op = self.output_padding
  if output_size ~= nil then
    -- output_padding chosen so the output has the requested spatial size
    local n = #output_size
    local s = util.sizes(x)
    op = {}
    for i = 1, 2 do
      local want = output_size[n - 2 + i]
      local min = (s[#s - 2 + i] - 1) * self.stride[i] - 2 * self.padding[i] +
        self.dilation[i] * (self.kernel_size[i] - 1) + 1
      op[i] = want - min
      if op[i] < 0 or op[i] >= math.max(self.stride[i], self.dilation[i]) then
        error("ConvTranspose2d: requested an output size of " .. util.tuple_str(output_size) ..
          ", which is not reachable from the input size " .. util.shape_str(x), 2)
      end
    end
  end
  return F.conv_transpose2d(x, self.weight, self.bias, {
    stride = self.stride, padding = self.padding, output_padding = op,
    groups = self.groups, dilation = self.dilation,
  })
end

-- pooling -----------------------------------------------------------------------------
local function size_str(v)
  if type(v) == "table" then return tuple_str(v) end
  return tostring(v)
end

local MAXPOOL = { "stride", "padding", "dilation", "return_indices", "ceil_mode" }
local AVGPOOL = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" }

-- PyTorch's positional order after kernel_size, or one options table.
local function pool_args(where, order, ...)
  local first = ...
  if util.is_options(first) then return check(where, first, order) end
  local o = {}
  for i = 1, select("#", ...) do
    if order[i] == nil then
      error(where .. ": too many arguments (" .. select("#", ...) + 1 .. ")", util.user_level())
    end
    o[order[i]] = select(i, ...)
  end
  return o
end

--- 2-D max pooling over `(N, C, H, W)` input.
--
-- Shapes: output `(N, C, H_out, W_out)` with
-- `H_out = floor((H + 2 padding - dilation (kernel_size - 1) - 1) / stride) + 1` (ceil with
-- `ceil_mode`). With `return_indices` forward returns the output and the 1-based flat
-- positions of the maxima within each input plane.
-- @function MaxPool2d
-- @param kernel_size number or `{kH, kW}`
-- @tparam[opt] table opts `stride` (default kernel_size), `padding` (0, at most half the
-- kernel), `dilation` (1), `return_indices` (false), `ceil_mode` (false); or those
-- positionally, in that order
-- @usage nn.MaxPool2d(2)(lt.randn(1, 3, 8, 8)).shape   --> {1, 3, 4, 4}
local MaxPool2d = Module:extend("MaxPool2d")
C.MaxPool2d = MaxPool2d
function MaxPool2d:__init(kernel_size, ...)
  Module.__init(self)
  local o = pool_args("MaxPool2d", MAXPOOL, ...)
  if kernel_size == nil then error("MaxPool2d: kernel_size is required", 2) end
  self.kernel_size = kernel_size
  self.stride = o.stride or kernel_size
  self.padding = o.padding or 0
  self.dilation = o.dilation or 1
  self.return_indices = o.return_indices or false
  self.ceil_mode = o.ceil_mode or false
  local ks, pd = ntuple(kernel_size, 2, "MaxPool2d kernel_size"), ntuple(self.padding, 2, "MaxPool2d padding")
  for i = 1, 2 do
    if pd[i] * 2 > ks[i] then
      error("MaxPool2d: pad should be at most half of effective kernel size, but got pad=" ..
        pd[i] .. ", kernel_size=" .. ks[i], 2)
    end
  end
end
function MaxPool2d:forward(x)
  if not util.is_tensor(x) then error("MaxPool2d: expected a Tensor input, got " .. util.typename(x), 2) end
  return F.max_pool2d(x, self.kernel_size, {
    stride = self.stride, padding = self.padding, dilation = self.dilation,
    ceil_mode = self.ceil_mode, return_indices = self.return_indices,
  })
end
function MaxPool2d:extra_repr()
  return "kernel_size=" .. size_str(self.kernel_size) .. ", stride=" .. size_str(self.stride) ..
    ", padding=" .. size_str(self.padding) .. ", dilation=" .. size_str(self.dilation) ..
    ", ceil_mode=" .. util.bool_str(self.ceil_mode)
end

--- 2-D average pooling over `(N, C, H, W)` input.
--
-- Shapes: as MaxPool2d (without dilation).
-- @function AvgPool2d
-- @param kernel_size number or `{kH, kW}`
-- @tparam[opt] table opts `stride` (default kernel_size), `padding` (0), `ceil_mode` (false),
-- `count_include_pad` (true: the padding zeros count in the average), `divisor_override`
-- (a number to divide by instead); or those positionally, in that order
local AvgPool2d = Module:extend("AvgPool2d")
C.AvgPool2d = AvgPool2d
function AvgPool2d:__init(kernel_size, ...)
  Module.__init(self)
  local o = pool_args("AvgPool2d", AVGPOOL, ...)
  if kernel_size == nil then error("AvgPool2d: kernel_size is required", 2) end
  self.kernel_size = kernel_size
  self.stride = o.stride or kernel_size
  self.padding = o.padding or 0
  self.ceil_mode = o.ceil_mode or false
  if o.count_include_pad == nil then self.count_include_pad = true else self.count_include_pad = o.count_include_pad end
  self.divisor_override = o.divisor_override
end
function AvgPool2d:forward(x)
  if not util.is_tensor(x) then error("AvgPool2d: expected a Tensor input, got " .. util.typename(x), 2) end
  return F.avg_pool2d(x, self.kernel_size, {
    stride = self.stride, padding = self.padding, ceil_mode = self.ceil_mode,
    count_include_pad = self.count_include_pad, divisor_override = self.divisor_override,
  })
end
function AvgPool2d:extra_repr()
  return "kernel_size=" .. size_str(self.kernel_size) .. ", stride=" .. size_str(self.stride) ..
    ", padding=" .. size_str(self.padding)
end

--- 2-D average pooling to a fixed output size, whatever the input's.
--
-- Shapes: input `(N, C, H, W)`, output `(N, C, out_H, out_W)`.
-- @function AdaptiveAvgPool2d
-- @param output_size a number or `{out_H, out_W}` (nil or -1 keeps that input size)
-- @usage nn.AdaptiveAvgPool2d(1)(lt.randn(2, 8, 7, 5)).shape   --> {2, 8, 1, 1}
local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
C.AdaptiveAvgPool2d = AdaptiveAvgPool2d
function AdaptiveAvgPool2d:__init(output_size)
  Module.__init(self)
  if output_size == nil then error("AdaptiveAvgPool2d: output_size is required", 2) end
  self.output_size = output_size
end
function AdaptiveAvgPool2d:forward(x)
  if not util.is_tensor(x) then
    error("AdaptiveAvgPool2d: expected a Tensor input, got " .. util.typename(x), 2)
  end
  return F.adaptive_avg_pool2d(x, self.output_size)
end
function AdaptiveAvgPool2d:extra_repr() return "output_size=" .. size_str(self.output_size) end

--- Resizes the spatial dims of its input to `size` or by `scale_factor` (`F.interpolate`).
--
-- Shapes: input `(N, C, L)`, `(N, C, H, W)` or `(N, C, D, H, W)`.
-- @function Upsample
-- @tparam[opt] table opts `{size=, scale_factor=, mode="nearest", align_corners=,
--   recompute_scale_factor=}`
-- @usage nn.Upsample({scale_factor = 2, mode = "bilinear"})(lt.randn(1, 3, 8, 8)).shape
--   --> {1, 3, 16, 16}
local Upsample = Module:extend("Upsample")
C.Upsample = Upsample
function Upsample:__init(opts)
  Module.__init(self)
  opts = require("lantern.options").check("Upsample", opts or {},
    { "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor" })
  self.size, self.scale_factor = opts.size, opts.scale_factor
  self.mode, self.align_corners = opts.mode or "nearest", opts.align_corners
  self.recompute_scale_factor = opts.recompute_scale_factor
end
function Upsample:forward(x)
  return F.interpolate(x, { size = self.size, scale_factor = self.scale_factor, mode = self.mode,
    align_corners = self.align_corners, recompute_scale_factor = self.recompute_scale_factor })
end
-- PyTorch keeps scale_factor as floats: "scale_factor=2.0", "(2.0, 3.0)"
local function float_str(v)
  if type(v) ~= "table" then return util.num_str(v + 0.0) end
  local f = {}
  for i, x in ipairs(v) do f[i] = x + 0.0 end
  return util.tuple_str(f)
end
function Upsample:extra_repr()
  local info = self.scale_factor ~= nil and "scale_factor=" .. float_str(self.scale_factor)
    or "size=" .. util.tuple_str(self.size)
  return info .. ", mode=" .. self.mode
end

--- Moves `r^2` channels into an `r`-times larger image (`F.pixel_shuffle`): `(*, C r^2, H, W)`
-- to `(*, C, H r, W r)`. `nn.PixelUnshuffle(r)` is the inverse.
-- @function PixelShuffle
-- @int upscale_factor
local PixelShuffle = Module:extend("PixelShuffle")
C.PixelShuffle = PixelShuffle
function PixelShuffle:__init(upscale_factor)
  Module.__init(self)
  self.upscale_factor = upscale_factor
end
function PixelShuffle:forward(x) return F.pixel_shuffle(x, self.upscale_factor) end
function PixelShuffle:extra_repr() return "upscale_factor=" .. tostring(self.upscale_factor) end

--- The inverse of `PixelShuffle` (`F.pixel_unshuffle`).
-- @function PixelUnshuffle
-- @int downscale_factor
local PixelUnshuffle = Module:extend("PixelUnshuffle")
C.PixelUnshuffle = PixelUnshuffle
function PixelUnshuffle:__init(downscale_factor)
  Module.__init(self)
  self.downscale_factor = downscale_factor
end
function PixelUnshuffle:forward(x) return F.pixel_unshuffle(x, self.downscale_factor) end
function PixelUnshuffle:extra_repr()
  return "downscale_factor=" .. tostring(self.downscale_factor)
end

return C
