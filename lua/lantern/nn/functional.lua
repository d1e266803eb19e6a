--- The parameter-free form of every layer, and the losses: `lt.nn.functional`, also `lt.nn.F`
-- (PyTorch's `torch.nn.functional`, usually imported as `local F = lt.nn.functional`). Every
-- numeric step is a call into the C core (kernels where they exist, otherwise tensor ops); no
-- per-element Lua loops. Dims are Lua's (1-based, negatives from the end) and class indices
-- are 1-based. The shapes and options are those of the layers on the `lantern.nn` page.
-- @module lantern.nn.functional
local lt = require "lantern"
local util = require "lantern.nn.util"
local check = require("lantern.options").check
local warnings = require "lantern.warnings"

local F = {}
local is_tensor, check_tensor, ntuple = util.is_tensor, util.check_tensor, util.ntuple

-- helpers -----------------------------------------------------------------------------
local function sizes(t) return util.sizes(t) end
local function shape_str(t) return util.shape_str(t) end

local function kernel(name)
  local f = rawget(lt, name)
  if f == nil then
    local ok, v = pcall(function() return lt[name] end)
    if ok then f = v end
  end
  return f
end

-- Normalises a Lua dim (1-based, negative from the end) against rank n -> 1..n.
local function wrap_dim(d, n, where)
  local r = d < 0 and n + d + 1 or d
  if r < 1 or r > math.max(n, 1) then
    error(where .. ": dim " .. d .. " is out of range for a tensor of rank " .. n, 3)
  end
  return r
end
F._wrap_dim = wrap_dim

local function check_reduction(r, where)
  if r ~= "mean" and r ~= "sum" and r ~= "none" then
    error(where .. ": reduction must be 'mean', 'sum' or 'none', got '" .. tostring(r) .. "'", 3)
  end
end

local function reduce(loss, reduction)
  if reduction == "mean" then return loss:mean() end
  if reduction == "sum" then return loss:sum() end
  return loss
end

-- Legacy PyTorch reduction arguments (size_average, reduce) -> reduction string.
local function reduction_of(opts, where)
  opts = opts or {}
  local r = opts.reduction or "mean"
  if opts.size_average ~= nil or opts.reduce ~= nil then
    local sa = opts.size_average ~= false
    local rd = opts.reduce ~= false
    r = not rd and "none" or (sa and "mean" or "sum")
  end
  check_reduction(r, where)
  return r
end
F._reduction_of = reduction_of

local function numel_of_shape(s)
  local n = 1
  for _, v in ipairs(s) do n = n * v end
  return n
end

---------------------------------------------------------------------------------------------
--- Linear maps and shapes.
-- @section linear

--- `input W^T + b`, as `nn.Linear`.
-- @tparam Tensor input `(*, in)`
-- @tparam Tensor weight `(out, in)`
-- @tparam[opt] Tensor bias `(out)`
-- @treturn Tensor `(*, out)`
function F.linear(input, weight, bias)
  check_tensor(input, "linear", "input")
  check_tensor(weight, "linear", "weight")
  local in_f = weight:size(weight:dim())
  if input:dim() == 0 or input:size(input:dim()) ~= in_f then
    error("linear: input of shape " .. shape_str(input) .. " does not match weight of shape " ..
      shape_str(weight) .. " (expected last dim " .. in_f .. ")", 2)
  end
  -- with a bias, 2-D and contiguous 3-D inputs take one addmm that starts from the bias (the
  -- GEMM accumulates onto it: no separate pass to add it), as in PyTorch
  local d = input:dim()
  if bias ~= nil and is_tensor(bias) and bias:dim() == 1 and weight:dim() == 2 and
      bias:size(1) == weight:size(1) then
    if d == 2 then return lt.addmm(bias, input, weight:t()) end
    if d == 3 and input:is_contiguous() then
      local n1, n2 = input:size(1), input:size(2)
      return lt.addmm(bias, input:view(n1 * n2, in_f), weight:t()):view(n1, n2, weight:size(1))
    end
  end
  local out = input:matmul(weight:t())
  if bias ~= nil then out = out + bias end
  return out
end

--- `out[..., k] = x1 W[k] x2 + b[k]`, as `nn.Bilinear`.
-- @tparam Tensor input1 `(*, in1)`
-- @tparam Tensor input2 `(*, in2)`
-- @tparam Tensor weight `(out, in1, in2)`
-- @tparam[opt] Tensor bias `(out)`
-- @treturn Tensor `(*, out)`
function F.bilinear(input1, input2, weight, bias)
  check_tensor(input1, "bilinear", "input1")
  check_tensor(input2, "bilinear", "input2")
  local w = sizes(weight)
  local out_f, in1, in2 = w[1], w[2], w[3]
  local s1, s2 = sizes(input1), sizes(input2)
  if #s1 == 0 or s1[#s1] ~= in1 or #s2 == 0 or s2[#s2] ~= in2 then
    error("bilinear: inputs of shape " .. shape_str(input1) .. " and " .. shape_str(input2) ..
      " do not match weight of shape " .. shape_str(weight), 2)
  end
  local lead = { table.unpack(s1, 1, #s1 - 1) }
  local n = numel_of_shape(lead)
  local x1 = input1:reshape(n, in1)
  local x2 = input2:reshape(n, in2)
  -- (n, in1) @ (in1, out*in2) -> (n, out, in2), times x2 over in2
  local wm = weight:permute(2, 1, 3):reshape(in1, out_f * in2)
  local t = x1:matmul(wm):view(n, out_f, in2)
  local out = (t * x2:unsqueeze(2)):sum(3)
  if bias ~= nil then out = out + bias end
  lead[#lead + 1] = out_f
  return out:reshape(lead)
end

--- Flattens dims `start_dim`..`end_dim` (default: all, as `torch.flatten`).
-- @tparam Tensor input
-- @int[opt=1] start_dim
-- @int[opt=-1] end_dim
-- @treturn Tensor
function F.flatten(input, start_dim, end_dim)
  return input:flatten(start_dim or 1, end_dim or -1)
end

--- Splits dim `dim` into the sizes `sizes_` (one may be -1).
-- @tparam Tensor input
-- @int dim
-- @tab sizes_
-- @treturn Tensor
function F.unflatten(input, dim, sizes_)
  local s = sizes(input)
  local d = wrap_dim(dim, #s, "unflatten")
  local new = {}
  for i = 1, d - 1 do new[#new + 1] = s[i] end
  local known, infer = 1, nil
  for i, v in ipairs(sizes_) do
    if v == -1 then infer = i else known = known * v end
  end
  local sz = { table.unpack(sizes_) }
  if infer then sz[infer] = s[d] // known end
  if numel_of_shape(sz) ~= s[d] then
    error("unflatten: sizes " .. util.tuple_str(sizes_) .. " do not multiply to the size " ..
      s[d] .. " of dim " .. dim .. " of input " .. shape_str(input), 2)
  end
  for _, v in ipairs(sz) do new[#new + 1] = v end
  for i = d + 1, #s do new[#new + 1] = s[i] end
  return input:reshape(new)
end

-- Source positions (1-based) of a dim of size n padded by l before and r after, for the modes
-- that copy from the input: reflect mirrors about the edge elements, replicate repeats them,
-- circular wraps around.
local PAD_SOURCE = {
  reflect = function(p, n) if p < 0 then p = -p elseif p >= n then p = 2 * (n - 1) - p end return p end,
  replicate = function(p, n) return p < 0 and 0 or (p >= n and n - 1 or p) end,
  circular = function(p, n) return p % n end,
}

local function pad_copy(out, d, l, r, mode)
  local n = out:size(d)
  if mode == "reflect" and (l >= n or r >= n) then
    error("pad: padding size should be less than the corresponding input dimension, but got: " ..
      "padding (" .. l .. ", " .. r .. ") at dimension " .. d .. " of input " .. shape_str(out), 3)
  elseif mode == "circular" and (l > n or r > n) then
    error("pad: padding value causes wrapping around more than once (padding (" .. l .. ", " ..
      r .. ") at dimension " .. d .. " of input " .. shape_str(out) .. ")", 3)
  elseif n == 0 then
    error("pad: cannot pad an empty dimension " .. d .. " of input " .. shape_str(out) ..
      " in mode '" .. mode .. "'", 3)
  end
  local src, idx = PAD_SOURCE[mode], {}
  for p = -l, n + r - 1 do idx[#idx + 1] = src(p, n) + 1 end
  return out:index_select(d, lt.tensor(idx, { dtype = "int64" }))
end

-- Constant padding: the value everywhere, then the (cropped) input copied into the interior
-- view, whose gradient is that view of the output's. A `cat` per padded dim wrote the padding
-- columns of every row a cache line apiece and copied the rest twice: (32, 64, 32, 32) by one
-- on each side took 2.0 ms against PyTorch's 0.43.
local function pad_constant(input, pad, value)
  local nd, x = input:dim(), input
  local s = sizes(input)
  local at = {}
  for i = 1, #pad // 2 do
    local d = nd - i + 1
    local l, r = pad[2 * i - 1], pad[2 * i]
    -- a negative amount crops first, as PyTorch
    if l < 0 then x = x:narrow(d, 1 - l, x:size(d) + l); l = 0 end
    if r < 0 then x = x:narrow(d, 1, x:size(d) + r); r = 0 end
    s[d] = x:size(d) + l + r
    at[d] = l
  end
  local out = lt.full(s, value, { dtype = input.dtype })
  local view = out
  for d, l in pairs(at) do view = view:narrow(d, l + 1, x:size(d)) end
  view:copy_(x)
  return out
end

--- Pads the last dims: `pad` lists amounts for the last dim first, `{left, right, top,
-- bottom, front, back}` (PyTorch's order); a negative amount crops. Any rank.
-- @tparam Tensor input
-- @tab pad an even number of amounts
-- @string[opt="constant"] mode `"constant"` (fills with value), `"reflect"` (mirrors about
-- the edge elements), `"replicate"` (repeats them) or `"circular"` (wraps around)
-- @number[opt=0] value the fill of `"constant"`
-- @treturn Tensor
-- @usage F.pad(lt.ones(1, 2, 2), {1, 1})           -- last dim 2 -> 4
-- F.pad(x, {1, 1, 2, 2}, "reflect")             -- W by 1 and H by 2 on each side
function F.pad(input, pad, mode, value)
  mode = mode or "constant"
  if mode ~= "constant" and not PAD_SOURCE[mode] then
    error("pad: mode must be one of 'constant', 'reflect', 'replicate', 'circular', got '" ..
      tostring(mode) .. "'", 2)
  end
  if mode ~= "constant" and value ~= nil and value ~= 0 then
    error("pad: padding mode '" .. mode .. "' doesn't take in value argument", 2)
  end
  if type(pad) ~= "table" or #pad % 2 ~= 0 then
    error("pad: padding must be a table with an even number of entries", 2)
  end
  value = value or 0
  local out = input
  local nd = input:dim()
  if #pad // 2 > nd then error("pad: padding for " .. (#pad // 2) .. " dims on a tensor of rank " .. nd, 2) end
  if mode == "constant" then return pad_constant(input, pad, value) end
  for i = 1, #pad // 2 do
    local d = nd - i + 1
    local l, r = pad[2 * i - 1], pad[2 * i]
    -- a negative amount crops first (in every mode, as PyTorch)
    if l < 0 then out = out:narrow(d, 1 - l, out:size(d) + l); l = 0 end
    if r < 0 then out = out:narrow(d, 1, out:size(d) + r); r = 0 end
    if mode ~= "constant" then
      if l > 0 or r > 0 then out = pad_copy(out, d, l, r, mode) end
    else
      if l > 0 or r > 0 then
        local parts = {}
        local s = sizes(out)
        if l > 0 then
          s[d] = l
          parts[#parts + 1] = lt.full(s, value, { dtype = out.dtype })
        end
        parts[#parts + 1] = out
        if r > 0 then
          s = sizes(out)
          s[d] = r
          parts[#parts + 1] = lt.full(s, value, { dtype = out.dtype })
        end
        out = lt.cat(parts, d)
      end
    end
  end
  return out
end

---------------------------------------------------------------------------------------------
--- Convolution and pooling.
-- @section conv
local function conv_check(where, input, weight, ndim_spatial, groups, transposed)
  check_tensor(input, where, "input")
  check_tensor(weight, where, "weight")
  local nd = input:dim()
  if nd ~= ndim_spatial + 1 and nd ~= ndim_spatial + 2 then
    error(where .. ": expected " .. (ndim_spatial + 1) .. "D (unbatched) or " ..
      (ndim_spatial + 2) .. "D (batched) input, but got input of size: " .. shape_str(input), 3)
  end
  local cin = input:size(nd - ndim_spatial)
  local expect = transposed and weight:size(1) or weight:size(2) * groups
  if cin ~= expect then
    error(where .. ": expected input" .. shape_str(input) .. " to have " .. expect ..
      " channels, but got " .. cin .. " channels instead (weight of size " ..
      shape_str(weight) .. ", groups=" .. groups .. ")", 3)
  end
  return nd == ndim_spatial + 1
end

local CONV = { "stride", "padding", "dilation", "groups" }
local CONV_T = { "stride", "padding", "output_padding", "groups", "dilation" }

local function convnd(where, kname, nsp, input, weight, bias, opts)
  opts = check(where, opts, CONV)
  local groups = opts.groups or 1
  local unbatched = conv_check(where, input, weight, nsp, groups, false)
  local stride = ntuple(opts.stride or 1, nsp, where .. " stride")
  local dilation = ntuple(opts.dilation or 1, nsp, where .. " dilation")
  local padding = opts.padding or 0
  if padding == "same" then
    for i = 1, nsp do
      if stride[i] ~= 1 then error(where .. ": padding='same' is not supported for strided convolutions", 3) end
    end
  elseif padding ~= "valid" then
    padding = ntuple(padding, nsp, where .. " padding")
  end
  if bias ~= nil and bias:numel() ~= weight:size(1) then
    error(where .. ": bias of shape " .. shape_str(bias) .. " does not match " .. weight:size(1) ..
      " output channels", 3)
  end
  local x = unbatched and input:unsqueeze(1) or input
  local k = kernel(kname)
  if k == nil then error(where .. ": the core has no " .. kname .. " kernel", 3) end
  local out = k(x, weight, bias, { stride = stride, padding = padding, dilation = dilation, groups = groups })
  if unbatched then out = out:squeeze(1) end
  return out
end

--- 1-D convolution of `(N, C_in, L)` (or `(C_in, L)`) input, as `nn.Conv1d` without its
-- padding_mode. `F.conv2d(input, weight, bias, opts)` is the 2-D form, over `(N, C_in, H, W)`
-- (or `(C_in, H, W)`) with weight `(C_out, C_in / groups, kH, kW)`.
-- @tparam Tensor input
-- @tparam Tensor weight `(C_out, C_in / groups, k)`
-- @tparam[opt] Tensor bias `(C_out)`
-- @tparam[opt] table opts `stride` (1), `padding` (0, a number per dim, `"same"` or
-- `"valid"`), `dilation` (1), `groups` (1)
-- @treturn Tensor
-- @usage F.conv2d(x, w, nil, {padding = 1, stride = 2})
function F.conv1d(input, weight, bias, opts) return convnd("conv1d", "conv1d", 1, input, weight, bias, opts) end
--- 2-D convolution (see `F.conv1d(`).
-- @tparam Tensor input
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @tparam[opt] table opts
-- @treturn Tensor
function F.conv2d(input, weight, bias, opts) return convnd("conv2d", "conv2d", 2, input, weight, bias, opts) end

--- 2-D transposed convolution, as `nn.ConvTranspose2d`.
-- @tparam Tensor input `(N, C_in, H, W)` or `(C_in, H, W)`
-- @tparam Tensor weight `(C_in, C_out / groups, kH, kW)`
-- @tparam[opt] Tensor bias `(C_out)`
-- @tparam[opt] table opts `stride` (1), `padding` (0), `output_padding` (0), `groups` (1),
-- `dilation` (1)
-- @treturn Tensor
function F.conv_transpose2d(input, weight, bias, opts)
  opts = check("conv_transpose2d", opts, CONV_T)
  local groups = opts.groups or 1
  local unbatched = conv_check("conv_transpose2d", input, weight, 2, groups, true)
  local x = unbatched and input:unsqueeze(1) or input
  local k = kernel("conv_transpose2d")
  if k == nil then error("conv_transpose2d: the core has no conv_transpose2d kernel", 2) end
  local out = k(x, weight, bias, {
    stride = ntuple(opts.stride or 1, 2, "conv_transpose2d stride"),
    padding = ntuple(opts.padding or 0, 2, "conv_transpose2d padding"),
    output_padding = ntuple(opts.output_padding or 0, 2, "conv_transpose2d output_padding"),
    groups = groups,
    dilation = ntuple(opts.dilation or 1, 2, "conv_transpose2d dilation"),
  })
  if unbatched then out = out:squeeze(1) end
  return out
end

-- pooling -----------------------------------------------------------------------------
local function pool_input(where, input)
  check_tensor(input, where, "input")
  local nd = input:dim()
  if nd ~= 3 and nd ~= 4 then
    error(where .. ": expected 3D or 4D input (got " .. nd .. "D input of size " ..
      shape_str(input) .. ")", 3)
  end
  if nd == 3 then return input:unsqueeze(1), true end
  return input, false
end

-- max_pool2d(x, kernel_size, {stride, padding, dilation, ceil_mode, return_indices})
-- (options may also be given positionally as in PyTorch).
local MAX_POOL = { "stride", "padding", "dilation", "ceil_mode", "return_indices" }
local AVG_POOL = { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" }

--- 2-D max pooling, as `nn.MaxPool2d`; the options as one table or positionally.
-- @tparam Tensor input `(N, C, H, W)` or `(C, H, W)`
-- @param kernel_size number or `{kH, kW}`
-- @param[opt] stride (default kernel_size), or the options table `{stride=, padding=,
-- dilation=, ceil_mode=, return_indices=}`
-- @param[opt=0] padding
-- @param[opt=1] dilation
-- @bool[opt=false] ceil_mode
-- @bool[opt=false] return_indices also return the 1-based flat positions of the maxima
-- @treturn Tensor
-- @usage F.max_pool2d(x, 2); F.max_pool2d(x, 3, {stride = 2, padding = 1})
function F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
  local o
  if util.is_options(stride) then
    o = check("max_pool2d", stride, MAX_POOL)
  else
    o = { stride = stride, padding = padding, dilation = dilation, ceil_mode = ceil_mode,
      return_indices = return_indices }
  end
  local x, unb = pool_input("max_pool2d", input)
  local ks = ntuple(kernel_size, 2, "max_pool2d kernel_size")
  local k = kernel("max_pool2d")
  if k == nil then error("max_pool2d: the core has no max_pool2d kernel", 2) end
  local out, idx = k(x, {
    kernel_size = ks,
    stride = ntuple(o.stride or ks, 2, "max_pool2d stride"),
    padding = ntuple(o.padding or 0, 2, "max_pool2d padding"),
    dilation = ntuple(o.dilation or 1, 2, "max_pool2d dilation"),
    ceil_mode = o.ceil_mode or false,
    return_indices = o.return_indices or false,
  })
  if unb then
    out = out:squeeze(1)
    if idx then idx = idx:squeeze(1) end
  end
  if o.return_indices then return out, idx end
  return out
end

--- 2-D average pooling, as `nn.AvgPool2d`; the options as one table or positionally.
-- @tparam Tensor input
-- @param kernel_size
-- @param[opt] stride (default kernel_size), or the options table
-- @param[opt=0] padding
-- @bool[opt=false] ceil_mode
-- @bool[opt=true] count_include_pad
-- @param[opt] divisor_override
-- @treturn Tensor
function F.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
  local o
  if util.is_options(stride) then
    o = check("avg_pool2d", stride, AVG_POOL)
  else
    o = { stride = stride, padding = padding, ceil_mode = ceil_mode,
      count_include_pad = count_include_pad, divisor_override = divisor_override }
  end
  local x, unb = pool_input("avg_pool2d", input)
  local ks = ntuple(kernel_size, 2, "avg_pool2d kernel_size")
  local k = kernel("avg_pool2d")
  if k == nil then error("avg_pool2d: the core has no avg_pool2d kernel", 2) end
  local cip = o.count_include_pad
  if cip == nil then cip = true end
  local out = k(x, {
    kernel_size = ks,
    stride = ntuple(o.stride or ks, 2, "avg_pool2d stride"),
    padding = ntuple(o.padding or 0, 2, "avg_pool2d padding"),
    ceil_mode = o.ceil_mode or false,
    count_include_pad = cip,
    divisor_override = o.divisor_override,
  })
  if unb then out = out:squeeze(1) end
  return out
end

--- Average pooling to `output_size`, as `nn.AdaptiveAvgPool2d`.
-- @tparam Tensor input
-- @param output_size number or `{h, w}` (nil or -1 keeps the input's)
-- @treturn Tensor
function F.adaptive_avg_pool2d(input, output_size)
  local x, unb = pool_input("adaptive_avg_pool2d", input)
  local os = ntuple(output_size, 2, "adaptive_avg_pool2d output_size")
  local s = sizes(x)
  for i = 1, 2 do if os[i] == nil or os[i] == -1 then os[i] = s[2 + i] end end
  local out
  if os[1] == 1 and os[2] == 1 then
    out = x:flatten(3):mean(3, true):unsqueeze(4)
  else
    local k = kernel("adaptive_avg_pool2d")
    if k == nil then error("adaptive_avg_pool2d: the core has no adaptive_avg_pool2d kernel", 2) end
    out = k(x, os)
  end
  if unb then out = out:squeeze(1) end
  return out
end

--- Resampling.
-- @section resample

-- float32 rounding of a Lua number: PyTorch computes the resampling scale in the input's float
local function f32(x) return (string.unpack("f", string.pack("f", x))) end

local INTERP_MODES = { nearest = 0, ["nearest-exact"] = 0, linear = 1, bilinear = 2,
  trilinear = 3, area = 0, bicubic = 2 }

-- Source positions along one dim of in_n elements for out_n outputs: the 1-based indices and,
-- for the linear modes, the second index and the two weights (tensors of out_n in dtype dt).
-- `scale` is 1 / scale_factor when one was given, else in_n / out_n; PyTorch computes the
-- nearest modes in float32 and the linear ones in the input's float dtype, and so does this.
local function source_index(mode, in_n, out_n, scale, align, dt)
  if mode == "nearest" or mode == "nearest-exact" then
    local dst, sc = lt.arange(out_n, { dtype = "float32" }), f32(scale)
    local pos
    if mode == "nearest" and out_n == in_n then
      pos = dst
    elseif mode == "nearest" and out_n == 2 * in_n then
      pos = (dst / 2):floor()   -- PyTorch shifts the index there
    elseif mode == "nearest" then
      pos = (dst * sc):floor()
    else
      pos = ((dst + 0.5) * sc):floor()
    end
    return pos:clamp(0, in_n - 1):long() + 1
  end
  local round = dt == "float32" and f32 or function(v) return v end
  local dst = lt.arange(out_n, { dtype = dt })
  local src
  if align then
    src = dst * (out_n > 1 and round((in_n - 1) / (out_n - 1)) or 0)
  else
    src = ((dst + 0.5) * round(scale) - 0.5):clamp(0)
  end
  local i0 = src:floor()
  local w1 = src - i0
  i0 = i0:long()
  local i1 = (i0 + 1):clamp(0, in_n - 1)
  return i0 + 1, i1 + 1, 1 - w1, w1
end

--- Resizes the spatial dims of `(N, C, L)`, `(N, C, H, W)` or `(N, C, D, H, W)` input to
-- `size` or by `scale_factor`, as PyTorch's `interpolate`: modes `"nearest"` (the default; the
-- source index rounded down, as PyTorch's), `"nearest-exact"`, `"linear"` (3-D), `"bilinear"`
-- (4-D), `"trilinear"` (5-D) and `"area"` (4-D: adaptive average pooling). The linear modes
-- take `align_corners` (default false: pixel centres). Nearest modes are an index_select per
-- resized dim, linear ones one `lt.resample` pass per dim, each with its gradient; `"bicubic"` and `antialias` are not supported.
-- @tparam Tensor input
-- @param[opt] size a number or one per spatial dim, or an options table
--   `{size=, scale_factor=, mode=, align_corners=, recompute_scale_factor=, antialias=}` in
--   place of the rest
-- @param[opt] scale_factor a number or one per spatial dim
-- @string[opt="nearest"] mode
-- @bool[opt] align_corners
-- @treturn Tensor
-- @usage F.interpolate(x, {scale_factor = 2, mode = "bilinear"})
function F.interpolate(input, size, scale_factor, mode, align_corners)
  check_tensor(input, "interpolate", "input")
  local o
  if util.is_options(size) then
    o = check("interpolate", size, { "size", "scale_factor", "mode", "align_corners",
      "recompute_scale_factor", "antialias" })
  else
    o = { size = size, scale_factor = scale_factor, mode = mode, align_corners = align_corners }
  end
  mode = o.mode or "nearest"
  local nd = input:dim()
  local sp = nd - 2
  local need = INTERP_MODES[mode]
  if need == nil then
    error("interpolate: mode must be nearest, nearest-exact, linear, bilinear, trilinear or " ..
      "area, got " .. tostring(mode), 2)
  end
  if mode == "bicubic" then error("interpolate: mode bicubic is not supported", 2) end
  if o.antialias then error("interpolate: antialias is not supported", 2) end
  if sp < 1 or sp > 3 then
    error("interpolate: expected a 3-D, 4-D or 5-D input (N, C and 1 to 3 spatial dims), got " ..
      nd .. "-D input of size " .. shape_str(input), 2)
  end
  if need > 0 and need ~= sp then
    error(string.format("interpolate: got %dD input, but %s mode needs %dD input", nd, mode,
      need + 2), 2)
  end
  if mode == "area" and sp ~= 2 then
    error("interpolate: area mode supports 4-D input here, got " .. nd .. "-D input", 2)
  end
  local align = o.align_corners
  if align ~= nil and need == 0 then
    error("interpolate: align_corners option can only be set with the interpolating modes: " ..
      "linear | bilinear | trilinear", 2)
  end
  if (o.size == nil) == (o.scale_factor == nil) then
    error(o.size == nil and "interpolate: either size or scale_factor should be defined"
      or "interpolate: only one of size or scale_factor should be defined", 2)
  end
  local s = sizes(input)
  local out, scales = {}, {}
  if o.size ~= nil then
    out = ntuple(o.size, sp, "interpolate size")
  else
    local sf = ntuple(o.scale_factor, sp, "interpolate scale_factor")
    for i = 1, sp do
      if type(sf[i]) ~= "number" or not (sf[i] > 0) then
        error("interpolate: scale_factor must be positive, got " .. tostring(sf[i]), 2)
      end
      out[i] = math.floor(s[2 + i] * sf[i])
      if not o.recompute_scale_factor then scales[i] = 1 / sf[i] end
    end
  end
  for i = 1, sp do
    if math.type(out[i]) == nil or out[i] < 1 then
      error("interpolate: output size must be positive integers, got " ..
        util.tuple_str(out), 2)
    end
    out[i] = math.tointeger(out[i]) or out[i]
    scales[i] = scales[i] or s[2 + i] / out[i]
  end
  if need > 0 and input.dtype ~= "float32" and input.dtype ~= "float64" then
    error("interpolate: " .. mode .. " mode needs a float input, got " .. input.dtype, 2)
  end
  if mode == "area" then return F.adaptive_avg_pool2d(input, out) end
  -- nearest modes select, so the dims may go in any order: when none shrinks, the last (whose
  -- selection picks single elements, where the others copy whole rows) goes first, on the
  -- smallest tensor (x2 on 32 x 64 x 32 x 32: 5.7 -> 4.9 ms; its backward adds whole rows
  -- first, too, the same sums in another order). The linear modes keep the order their bits
  -- follow.
  local first, last, step = 1, sp, 1
  if need == 0 then
    local grows = true
    for i = 1, sp do grows = grows and out[i] >= s[2 + i] end
    if grows then first, last, step = sp, 1, -1 end
  end
  local x = input
  for i = first, last, step do
    local d, in_n = 2 + i, s[2 + i]
    -- an unchanged size selects every element in place, except nearest-exact with a scale
    -- other than 1, whose (i + 0.5) * scale can fall short of i (PyTorch has no shortcut there)
    if out[i] ~= in_n or need > 0 or (mode == "nearest-exact" and scales[i] ~= 1) then
      local i0, i1, _, w1 = source_index(mode, in_n, out[i], scales[i], align, x.dtype)
      if need == 0 then
        x = x:index_select(d, i0)   -- nearest: any dtype; its backward scatters rows as fast
      elseif x.device ~= "cpu" then   -- the GPU plugin has index_select and products, not resample
        local shape = {}
        for k = 1, nd do shape[k] = k == d and out[i] or 1 end
        x = x:index_select(d, i0) * (1 - w1):reshape(shape) + x:index_select(d, i1) * w1:reshape(shape)
      else
        x = lt.resample(x, d, i0, i1, w1)
      end
    end
  end
  return x
end

-- pixel_shuffle's and pixel_unshuffle's factor r, which must be a positive integer
local function shuffle_factor(op, name, r)
  if math.type(r) ~= "integer" or r < 1 then
    error(op .. ": " .. name .. " must be a positive integer, got " .. tostring(r), 3)
  end
  return r
end

--- Moves `r^2` channels into an `r`-times larger image: `(*, C r^2, H, W)` to
-- `(*, C, H r, W r)`, as `nn.PixelShuffle`; `F.pixel_unshuffle` is the inverse.
-- @tparam Tensor input
-- @int upscale_factor
-- @treturn Tensor
function F.pixel_shuffle(input, upscale_factor)
  check_tensor(input, "pixel_shuffle", "input")
  local r = shuffle_factor("pixel_shuffle", "upscale_factor", upscale_factor)
  local s, nd = sizes(input), input:dim()
  if nd < 3 or s[nd - 2] % (r * r) ~= 0 then
    error("pixel_shuffle: expected input of at least 3 dims whose channels divide by " ..
      "upscale_factor^2 = " .. r * r .. ", got input of size " .. shape_str(input), 2)
  end
  local lead = { table.unpack(s, 1, nd - 3) }
  local c, h, w = s[nd - 2] // (r * r), s[nd - 1], s[nd]
  local t = input:reshape(-1, c, r, r, h, w):permute(1, 2, 5, 3, 6, 4)
  local shape = { table.unpack(lead) }
  for _, v in ipairs({ c, h * r, w * r }) do shape[#shape + 1] = v end
  return t:reshape(shape)
end

--- The inverse of `pixel_shuffle`: `(*, C, H r, W r)` to `(*, C r^2, H, W)`.
-- @tparam Tensor input
-- @int downscale_factor
-- @treturn Tensor
function F.pixel_unshuffle(input, downscale_factor)
  check_tensor(input, "pixel_unshuffle", "input")
  local r = shuffle_factor("pixel_unshuffle", "downscale_factor", downscale_factor)
  local s, nd = sizes(input), input:dim()
  if nd < 3 or s[nd - 1] % r ~= 0 or s[nd] % r ~= 0 then
    error("pixel_unshuffle: expected input of at least 3 dims whose height and width divide " ..
      "by downscale_factor = " .. r .. ", got input of size " .. shape_str(input), 2)
  end
  local lead = { table.unpack(s, 1, nd - 3) }
  local c, h, w = s[nd - 2], s[nd - 1] // r, s[nd] // r
  local t = input:reshape(-1, c, h, r, w, r):permute(1, 2, 4, 6, 3, 5)
  local shape = { table.unpack(lead) }
  for _, v in ipairs({ c * r * r, h, w }) do shape[#shape + 1] = v end
  return t:reshape(shape)
end

---------------------------------------------------------------------------------------------
--- Normalisation.
-- @section norm

--- Batch normalisation over dim 2 (channels), as `nn.BatchNorm2d`: with `training`, the
-- batch statistics are used and the running statistics (when given) are updated in place
-- with the unbiased variance; otherwise the running statistics are used.
-- @tparam Tensor input `(N, C, *)`
-- @tparam ?Tensor running_mean `(C)` or nil
-- @tparam ?Tensor running_var `(C)` or nil
-- @tparam[opt] Tensor weight `(C)`
-- @tparam[opt] Tensor bias `(C)`
-- @bool[opt=false] training
-- @number[opt=0.1] momentum
-- @number[opt=1e-5] eps
-- @treturn Tensor
function F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
  check_tensor(input, "batch_norm", "input")
  if training == nil then training = false end
  momentum = momentum or 0.1
  eps = eps or 1e-5
  local nd = input:dim()
  if nd < 2 then
    error("batch_norm: expected at least 2D input (got " .. nd .. "D input of size " ..
      shape_str(input) .. ")", 2)
  end
  local c = input:size(2)
  for _, t in ipairs({ running_mean or false, running_var or false, weight or false, bias or false }) do
    if t and t:numel() ~= c then
      error("batch_norm: running_mean should contain " .. c .. " elements not " .. t:numel() ..
        " (input of size " .. shape_str(input) .. ")", 2)
    end
  end
  if training then
    local per = c > 0 and input:numel() // c or 0
    if per == 1 then
      error("Expected more than 1 value per channel when training, got input size " ..
        util.torch_size(input), 2)
    end
    -- no values: empty out, the running statistics untouched (as PyTorch)
    if per == 0 then return input:clone() end
  end
  local k = kernel("batch_norm")
  if k then
    return k(input, running_mean, running_var, weight, bias, training, momentum, eps)
  end
  -- composite fallback: statistics over every dim but the channel one
  local shape = { 1, c }
  for _ = 3, nd do shape[#shape + 1] = 1 end
  local x2 = input:transpose(1, 2):reshape(c, -1)
  local mean, var
  if training or running_mean == nil then
    mean = x2:mean(2)
    local d = x2 - mean:unsqueeze(2)
    var = (d * d):mean(2)
    if training and running_mean ~= nil then
      local n = x2:size(2)
      lt.no_grad(function()
        running_mean:mul_(1 - momentum):add_(mean:detach() * momentum)
        running_var:mul_(1 - momentum):add_(var:detach() * (momentum * n / (n - 1)))
      end)
    end
  else
    mean, var = running_mean, running_var
  end
  local out = (input - mean:view(shape)) * (var + eps):rsqrt():view(shape)
  if weight ~= nil then out = out * weight:view(shape) end
  if bias ~= nil then out = out + bias:view(shape) end
  return out
end

local function norm_shape(ns)
  if type(ns) == "number" then return { ns } end
  return ns
end

--- Layer normalisation over the last dims, as `nn.LayerNorm`.
-- @tparam Tensor input
-- @param normalized_shape a size or a table of sizes
-- @tparam[opt] Tensor weight
-- @tparam[opt] Tensor bias
-- @number[opt=1e-5] eps
-- @treturn Tensor
function F.layer_norm(input, normalized_shape, weight, bias, eps)
  check_tensor(input, "layer_norm", "input")
  local ns = norm_shape(normalized_shape)
  eps = eps or 1e-5
  local s = sizes(input)
  local ok = #s >= #ns
  for i = 1, #ns do if not ok or s[#s - #ns + i] ~= ns[i] then ok = false break end end
  if not ok then
    error("layer_norm: given normalized_shape=" .. util.tuple_str(ns) .. ", expected input with " ..
      "shape [*, " .. table.concat(ns, ", ") .. "], but got input of size " .. shape_str(input), 2)
  end
  local k = kernel("layer_norm")
  if k then return k(input, ns, weight, bias, eps) end
  local lead = { table.unpack(s, 1, #s - #ns) }
  lead[#lead + 1] = -1
  local x = input:reshape(lead)
  local mean = x:mean(-1, true)
  local d = x - mean
  local var = (d * d):mean(-1, true)
  local out = (d * (var + eps):rsqrt()):reshape(s)
  if weight ~= nil then out = out * weight end
  if bias ~= nil then out = out + bias end
  return out
end

--- Group normalisation, as `nn.GroupNorm`.
-- @tparam Tensor input `(N, C, *)`
-- @int num_groups
-- @tparam[opt] Tensor weight `(C)`
-- @tparam[opt] Tensor bias `(C)`
-- @number[opt=1e-5] eps
-- @treturn Tensor
function F.group_norm(input, num_groups, weight, bias, eps)
  check_tensor(input, "group_norm", "input")
  eps = eps or 1e-5
  local s = sizes(input)
  if #s < 2 then error("group_norm: expected at least 2D input, got " .. shape_str(input), 2) end
  local c = s[2]
  if c % num_groups ~= 0 then
    error("group_norm: expected number of channels in input (" .. c .. ") to be divisible by " ..
      "num_groups (" .. num_groups .. "), input of size " .. shape_str(input), 2)
  end
  local k = kernel("group_norm")
  if k then return k(input, num_groups, weight, bias, eps) end
  local x = input:reshape(s[1], num_groups, -1)
  local mean = x:mean(3, true)
  local d = x - mean
  local var = (d * d):mean(3, true)
  local out = (d * (var + eps):rsqrt()):reshape(s)
  local shape = { 1, c }
  for _ = 3, #s do shape[#shape + 1] = 1 end
  if weight ~= nil then out = out * weight:view(shape) end
  if bias ~= nil then out = out + bias:view(shape) end
  return out
end

local FEPS = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16 }

--- RMS normalisation over the last dims, as `nn.RMSNorm`.
-- @tparam Tensor input
-- @param normalized_shape a size or a table of sizes
-- @tparam[opt] Tensor weight
-- @number[opt] eps (default: the dtype's machine epsilon)
-- @treturn Tensor
function F.rms_norm(input, normalized_shape, weight, eps)
  check_tensor(input, "rms_norm", "input")
  local ns = norm_shape(normalized_shape)
  eps = eps or FEPS[input.dtype] or 1.1920928955078125e-07
  local s = sizes(input)
  local ok = #s >= #ns
  for i = 1, #ns do if not ok or s[#s - #ns + i] ~= ns[i] then ok = false break end end
  if not ok then
    error("rms_norm: given normalized_shape=" .. util.tuple_str(ns) .. ", expected input with " ..
      "shape [*, " .. table.concat(ns, ", ") .. "], but got input of size " .. shape_str(input), 2)
  end
  local k = kernel("rms_norm")
  if k then return k(input, ns, weight, eps) end
  local lead = { table.unpack(s, 1, #s - #ns) }
  lead[#lead + 1] = -1
  local x = input:reshape(lead)
  local out = (x * ((x * x):mean(-1, true) + eps):rsqrt()):reshape(s)
  if weight ~= nil then out = out * weight end
  return out
end

--- `input / max(||input||_p, eps)` along `dim`.
-- @tparam Tensor input
-- @number[opt=2] p
-- @int[opt=2] dim
-- @number[opt=1e-12] eps
-- @treturn Tensor
function F.normalize(input, p, dim, eps)
  p = p or 2
  dim = dim or 2
  eps = eps or 1e-12
  local n = input:norm(p, dim, true)
  return input / n:clamp(eps, nil)
end

---------------------------------------------------------------------------------------------
--- Dropout and embeddings.
-- @section dropout

--- Zeroes elements with probability `p` and scales the rest by `1/(1-p)` when `training`;
-- returns `input` itself otherwise (or when p is 0).
-- @tparam Tensor input
-- @number[opt=0.5] p
-- @bool[opt=true] training (a model passes `self.training`)
-- @tparam[opt] table opts `{generator=}`
-- @treturn Tensor
function F.dropout(input, p, training, opts)
  opts = opts and check("dropout", opts, { "generator" })
  p = p or 0.5
  if training == nil then training = true end
  if type(p) ~= "number" or p < 0 or p > 1 then
    error("dropout probability has to be between 0 and 1, but got " .. tostring(p), 2)
  end
  if not training or p == 0 then return input end
  local k = kernel("dropout")
  if k then return k(input, p, training, opts) end
  if p == 1 then return input * 0 end
  local mask = lt.rand(sizes(input), { dtype = input.dtype, generator = opts and opts.generator })
  mask = mask:ge(p):to(input.dtype) * (1 / (1 - p))
  return input * mask
end

--- Zeroes whole channels of `(N, C, H, W)` or `(N, C, L)` input with probability `p` and
-- scales the rest by `1/(1-p)`, as `nn.Dropout2d`.
-- @tparam Tensor input
-- @number[opt=0.5] p
-- @bool[opt=true] training
-- @tparam[opt] table opts `{generator=}`
-- @treturn Tensor
function F.dropout2d(input, p, training, opts)
  check_tensor(input, "dropout2d", "input")
  opts = opts and check("dropout2d", opts, { "generator" })
  p = p or 0.5
  if training == nil then training = true end
  if type(p) ~= "number" or p < 0 or p > 1 then
    error("dropout probability has to be between 0 and 1, but got " .. tostring(p), 2)
  end
  local nd = input:dim()
  if nd ~= 3 and nd ~= 4 then
    error("dropout2d: expected 3D or 4D input, got input of size " .. shape_str(input), 2)
  end
  if not training or p == 0 then return input end
  if p == 1 then return input * 0 end
  -- one draw per (sample, channel): 3D input is (N, C, L), as PyTorch 1.13 reads it
  local s = sizes(input)
  local ms = { s[1], s[2] }
  for _ = 3, nd do ms[#ms + 1] = 1 end
  local keep = lt.rand(ms, { dtype = input.dtype, generator = opts and opts.generator })
  return input * (keep:ge(p):to(input.dtype) * (1 / (1 - p)))
end

-- PyTorch's embedding_renorm_: the rows that `input` looks up whose norm exceeds max_norm are
-- scaled in place to max_norm, before the lookup and outside the graph. The mask of rows used
-- comes from one index_add_, so the cost is one pass over the table whatever the batch.
local function embedding_renorm(weight, input, max_norm, norm_type)
  lt.no_grad(function()
    local used = lt.zeros(weight:size(1), { dtype = weight.dtype })
      :index_add_(1, input:reshape(-1), lt.ones(input:numel(), { dtype = weight.dtype })):gt(0)
    local norms = weight:norm(norm_type, 2, true)
    local over = used:unsqueeze(2):logical_and(norms:gt(max_norm))
    weight:mul_(lt.where(over, max_norm / (norms + 1e-7), lt.ones_like(norms)))
  end)
end

--- Rows of `weight` at the 1-based int64 positions in `input`, as `nn.Embedding`; with
-- `max_norm` the rows looked up are renormalised in place first, as in PyTorch.
-- @tparam Tensor input int64 indices `(*)`
-- @tparam Tensor weight `(num, dim)`
-- @param[opt] padding_idx 1-based row with no gradient, or the options
-- `{padding_idx=, max_norm=, norm_type=}`
-- @tparam[opt] table opts `{max_norm=, norm_type=2}`
-- @treturn Tensor `(*, dim)`
function F.embedding(input, weight, padding_idx, opts)
  check_tensor(input, "embedding", "input")
  check_tensor(weight, "embedding", "weight")
  if type(padding_idx) == "table" then padding_idx, opts = nil, padding_idx end
  opts = check("embedding", opts, { "padding_idx", "max_norm", "norm_type" })
  if padding_idx == nil then padding_idx = opts.padding_idx end
  if input.dtype ~= "int64" then
    error("embedding: expected indices of dtype int64, got " .. input.dtype ..
      " (convert them with x:long())", 2)
  end
  if opts.max_norm ~= nil then
    if type(opts.max_norm) ~= "number" then
      error("embedding: max_norm must be a number, got " .. util.typename(opts.max_norm), 2)
    end
    embedding_renorm(weight, input, opts.max_norm, opts.norm_type or 2)
  end
  local k = kernel("embedding")
  if k then return k(input, weight, padding_idx) end
  local s = sizes(input)
  local out = weight:index_select(1, input:reshape(-1))
  s[#s + 1] = weight:size(2)
  return out:reshape(s)
end

--- One-hot encoding of 1-based class positions (`x:one_hot(n)`).
-- @tparam Tensor t int64
-- @int[opt] num_classes (default: the largest value)
-- @treturn Tensor int64
function F.one_hot(t, num_classes) return t:one_hot(num_classes) end

---------------------------------------------------------------------------------------------
--- Activations, the functions of the activation layers (same formulas and defaults).
-- @section activations

--- `max(0, x)`. Also `F.relu6(x)` (`min(max(0, x), 6)`), `F.silu`, `F.tanh`, `F.sigmoid`,
-- `F.mish`, `F.softsign`, `F.logsigmoid`, `F.hardsigmoid` (`min(max(x + 3, 0), 6) / 6`) and
-- `F.hardswish` (`x * hardsigmoid(x)`), these two one C kernel each way (`lt.hardsigmoid`,
-- `lt.hardswish`).
-- @tparam Tensor x
-- @treturn Tensor
function F.relu(x) return x:relu() end
function F.relu6(x) return x:clamp(0, 6) end
--- `x` clamped to `[min_val, max_val]`.
-- @tparam Tensor x
-- @number[opt=-1] min_val
-- @number[opt=1] max_val
-- @treturn Tensor
function F.hardtanh(x, min_val, max_val) return x:clamp(min_val or -1, max_val or 1) end
--- `x` for x >= 0, `negative_slope * x` below.
-- @tparam Tensor x
-- @number[opt=0.01] negative_slope
-- @treturn Tensor
function F.leaky_relu(x, negative_slope)
  negative_slope = negative_slope or 0.01
  if x.leaky_relu then return x:leaky_relu(negative_slope) end
  return lt.where(x:gt(0), x, x * negative_slope)
end
--- `x` for x > 0, `alpha * (exp(x) - 1)` below.
-- @tparam Tensor x
-- @number[opt=1] alpha
-- @treturn Tensor
function F.elu(x, alpha)
  alpha = alpha or 1.0
  if x.elu then return x:elu(alpha) end
  return lt.where(x:gt(0), x, (x:exp() - 1) * alpha)
end
--- `x * Phi(x)` (exact, with erf) or its tanh approximation.
-- @tparam Tensor x
-- @string[opt="none"] approximate `"none"` or `"tanh"`
-- @treturn Tensor
function F.gelu(x, approximate)
  if type(approximate) == "table" then
    approximate = check("gelu", approximate, { "approximate" }).approximate
  end
  approximate = approximate or "none"
  if approximate ~= "none" and approximate ~= "tanh" then
    error("gelu: approximate must be 'none' or 'tanh', got '" .. tostring(approximate) .. "'", 2)
  end
  return x:gelu(approximate)
end
function F.silu(x) return x:silu() end
function F.tanh(x) return x:tanh() end
function F.sigmoid(x) return x:sigmoid() end
--- `log(1 + exp(beta * x)) / beta`, linear where `beta * x > threshold`.
-- @tparam Tensor x
-- @number[opt=1] beta
-- @number[opt=20] threshold
-- @treturn Tensor
function F.softplus(x, beta, threshold)
  beta, threshold = beta or 1, threshold or 20
  if x.softplus then return x:softplus(beta, threshold) end
  local bx = x * beta
  return lt.where(bx:gt(threshold), x, (bx:exp() + 1):log() / beta)
end
function F.logsigmoid(x)
  -- log sigmoid(x) = min(x, 0) - log1p(exp(-|x|))
  return x:clamp(nil, 0) - (-x:abs()):exp():log1p()
end
function F.mish(x) return x * F.softplus(x):tanh() end
function F.softsign(x) return x / (x:abs() + 1) end
function F.hardsigmoid(x) return lt.hardsigmoid(x) end
function F.hardswish(x) return lt.hardswish(x) end
--- Gated linear unit: the halves a, b of `dim` give `a * sigmoid(b)`.
-- @tparam Tensor x
-- @int[opt=-1] dim
-- @treturn Tensor
function F.glu(x, dim)
  dim = dim or -1
  local a, b = table.unpack(x:chunk(2, dim))
  return a * b:sigmoid()
end

-- PyTorch's implicit softmax dim (deprecated there): 1 for 0/1/3-D input, else 2 (Lua dims).
local function softmax_dim(x, dim)
  if dim ~= nil then return dim end
  local nd = x:dim()
  if nd == 0 or nd == 1 or nd == 3 then return 1 end
  return 2
end
F._softmax_dim = softmax_dim
--- Softmax along `dim`; without dim, PyTorch's legacy choice (dim 1 for 0-, 1- and 3-D
-- input, else dim 2). Also `F.log_softmax(x, dim)` and `F.softmin(x, dim)`.
-- @tparam Tensor x
-- @int[opt] dim
-- @treturn Tensor
function F.softmax(x, dim) return x:softmax(softmax_dim(x, dim)) end
function F.log_softmax(x, dim) return x:log_softmax(softmax_dim(x, dim)) end
function F.softmin(x, dim) return (-x):softmax(softmax_dim(x, dim)) end

---------------------------------------------------------------------------------------------
--- Attention.
-- @section attention

-- The fused op's checks, for the composed path (whose errors would name matmul or pass a mask
-- of another dtype through type promotion).
local function check_sdpa_operands(q, k, v, m)
  local where = "scaled_dot_product_attention"
  local names, ops = { "query", "key", "value" }, { q, k, v }
  for i = 1, 3 do check_tensor(ops[i], where, names[i]) end
  if not (util.is_float(q) and k.dtype == q.dtype and v.dtype == q.dtype) then
    error(string.format("%s: expected query, key and value of one float dtype, got %s, %s and %s",
      where, q.dtype, k.dtype, v.dtype), util.user_level())
  end
  local forms = { "(*, L, E)", "(*, S, E)", "(*, S, Ev)" }
  for i = 1, 3 do
    if ops[i]:dim() < 2 then
      error(string.format("%s: expected %s with at least 2 dims %s, got shape %s", where,
        names[i], forms[i], shape_str(ops[i])), util.user_level())
    end
  end
  if k:size(-1) ~= q:size(-1) or v:size(-2) ~= k:size(-2) then
    error(string.format("%s: expected query (*, L, E), key (*, S, E) and value (*, S, Ev), got " ..
      "%s, %s and %s", where, shape_str(q), shape_str(k), shape_str(v)), util.user_level())
  end
  -- the broadcast batch dims, right-aligned as the tensors' own
  local full, nb = {}, math.max(q:dim(), k:dim(), v:dim()) - 2
  for d = 1, nb do
    local n = 1
    for i = 1, 3 do
      local sz = sizes(ops[i])
      local s = sz[d - (nb - (#sz - 2))] or 1
      if s ~= 1 and n ~= 1 and s ~= n then
        error(string.format("%s: the batch dims of query %s, key %s and value %s do not " ..
          "broadcast", where, shape_str(q), shape_str(k), shape_str(v)), util.user_level())
      end
      if s ~= 1 then n = s end
    end
    full[d] = n
  end
  if m == nil then return end
  check_tensor(m, where, "attn_mask")
  if m.dtype ~= "bool" and m.dtype ~= q.dtype then
    error(string.format("%s: expected a bool attn_mask or one of query's dtype %s, got %s",
      where, q.dtype, m.dtype), util.user_level())
  end
  full[nb + 1], full[nb + 2] = q:size(-2), k:size(-2)
  local ms, ok = sizes(m), m:dim() <= #full
  for i = 0, m:dim() - 1 do
    local s = ms[#ms - i]
    ok = ok and (s == 1 or s == full[#full - i])
  end
  if not ok then
    error(string.format("%s: attn_mask of shape %s does not broadcast to [%s] (*, L, S)", where,
      shape_str(m), table.concat(full, ", ")), util.user_level())
  end
end

--- `softmax(q k^T * scale + mask) v` over the last two dims (any leading batch and head
-- dims, broadcast as in PyTorch). A bool `attn_mask` marks the positions that *take part*
-- (PyTorch's rule for this function, the opposite of MultiheadAttention's); a float mask (of
-- q's dtype) is added to the scores. `is_causal` keeps key j <= query i and excludes
-- `attn_mask`, as in PyTorch 2. One fused op in C: keys and queries go in blocks with an
-- online softmax, so the `(L, S)` weights are never stored (backward recomputes them); a
-- query row with no key taking part gives NaN, as the composed formula. `dropout_p` drops
-- weights whenever given (as PyTorch's function does), kept ones scaled by `1/(1-p)`, inside
-- the fused op: the mask comes from one 64-bit draw of the generator hashed with each weight's
-- index, so it is never stored either (its stream differs from `F.dropout`'s). A float
-- `attn_mask` that requires grad while grad mode is on runs the composed formula instead (the
-- fused op gives the mask no gradient).
-- @tparam Tensor q `(*, L, E)`
-- @tparam Tensor k `(*, S, E)`
-- @tparam Tensor v `(*, S, Ev)`
-- @tparam[opt] table opts `attn_mask`, `dropout_p` (0), `is_causal` (false), `scale`
-- (default `1/sqrt(E)`), `generator`
-- @treturn Tensor `(*, L, Ev)`
function F.scaled_dot_product_attention(q, k, v, opts)
  opts = check("scaled_dot_product_attention", opts, { "attn_mask", "dropout_p", "is_causal",
    "scale", "generator" })
  local m = opts.attn_mask
  if m ~= nil and opts.is_causal then
    error("scaled_dot_product_attention: attn_mask and is_causal cannot both be set (is_causal " ..
      "is the mask of the upper triangle)", util.user_level())
  end
  local p = opts.dropout_p or 0
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error("scaled_dot_product_attention: dropout_p must be a number in [0, 1], got " ..
      tostring(p), util.user_level())
  end
  -- the fused op gives a float mask no gradient; the composed formula does, as PyTorch's
  local mask_grad = is_tensor(m) and m.dtype ~= "bool" and m.requires_grad and lt.is_grad_enabled()
  if not mask_grad then
    return lt.scaled_dot_product_attention(q, k, v, m, opts.is_causal, opts.scale, p,
      opts.generator and { generator = opts.generator } or nil)
  end
  check_sdpa_operands(q, k, v, m)
  local d = q:size(q:dim())
  local scale = opts.scale or 1 / math.sqrt(d)
  local scores = q:matmul(k:transpose(-2, -1)) * scale
  local L, S = q:size(q:dim() - 1), k:size(k:dim() - 1)
  if opts.is_causal then
    local causal = lt.ones(L, S, { dtype = "bool" }):triu(1)
    scores = scores:masked_fill(causal, -math.huge)
  end
  if m ~= nil then
    if m.dtype == "bool" then
      scores = scores:masked_fill(m:logical_not(), -math.huge)
    else
      scores = scores + m
    end
  end
  local w = scores:softmax(-1)
  if p > 0 then w = F.dropout(w, p, true, { generator = opts.generator }) end
  return (w:matmul(v))
end

-- losses -----------------------------------------------------------------------------
local function check_same(where, input, target)
  check_tensor(input, where, "input")
  check_tensor(target, where, "target")
end

-- Raises naming the loss unless input and target broadcast together (the core's message
-- would name the subtraction inside it).
local function check_broadcast(where, input, target)
  local a, b = sizes(input), sizes(target)
  local n = math.max(#a, #b)
  for i = 0, n - 1 do
    local da, db = a[#a - i] or 1, b[#b - i] or 1
    if da ~= db and da ~= 1 and db ~= 1 then
      error(string.format("%s: input of shape %s and target of shape %s cannot be broadcast " ..
        "(size %d vs %d at dimension %d)", where, shape_str(input), shape_str(target), da, db,
        n - i), util.user_level())
    end
  end
end

-- The elementwise losses take a target of another shape by broadcasting, which is seldom
-- meant ([N, 1] against [N]); PyTorch warns, and so does Lantern.
local function check_pair(where, input, target)
  check_same(where, input, target)
  if util.same_shape(input, target) then return end
  check_broadcast(where, input, target)
  warnings.warn(where .. ": Using a target size (" .. util.size_str(target) .. ") that is " ..
    "different to the input size (" .. util.size_str(input) .. "). This will likely lead to incorrect " ..
    "results due to broadcasting. Please ensure they have the same size.")
end

-- Whether a regression loss takes the fused kernel (lt.mse_loss and the like, one pass each
-- way): input and target of one shape and one float dtype, on the cpu (the GPU plugin has the
-- elementwise ops but not this kernel); others broadcast through the ops.
local function fused_pair(input, target)
  return input.dtype == target.dtype and util.is_float(input) and util.same_shape(input, target)
    and input.device == "cpu" and target.device == "cpu"
end

local REDUCTION = { "reduction", "size_average", "reduce" }
local function with_reduction(...)
  local t = { table.unpack(REDUCTION) }
  for _, k in ipairs { ... } do t[#t + 1] = k end
  return t
end
local SMOOTH_L1, HUBER = with_reduction("beta"), with_reduction("delta")
local NLL = with_reduction("weight", "ignore_index")
local CROSS_ENTROPY = with_reduction("weight", "ignore_index", "label_smoothing")
local BCE, BCE_LOGITS = with_reduction("weight"), with_reduction("weight", "pos_weight")
local KL_DIV = with_reduction("log_target")

---------------------------------------------------------------------------------------------
--- Losses: the functions of the loss modules, same formulas and options. `input` and
-- `target` of the same shape unless said otherwise; a target that only broadcasts warns, as
-- in PyTorch.
-- @section losses

--- Mean squared error (`nn.MSELoss`).
-- @tparam Tensor input
-- @tparam Tensor target
-- @tparam[opt] table opts `reduction` (`"mean"`, `"sum"` or `"none"`; also `size_average`, `reduce`)
-- @treturn Tensor
-- @usage local loss = F.mse_loss(model(x), y)
function F.mse_loss(input, target, opts)
  opts = check("mse_loss", opts, REDUCTION)
  check_pair("mse_loss", input, target)
  local r = reduction_of(opts, "mse_loss")
  if fused_pair(input, target) then return lt.mse_loss(input, target, { reduction = r }) end
  local d = input - target
  return reduce(d * d, r)
end

--- Mean absolute error (`nn.L1Loss`).
-- @tparam Tensor input
-- @tparam Tensor target
-- @tparam[opt] table opts `reduction` (`"mean"`, `"sum"` or `"none"`; also `size_average`, `reduce`)
-- @treturn Tensor
function F.l1_loss(input, target, opts)
  opts = check("l1_loss", opts, REDUCTION)
  check_pair("l1_loss", input, target)
  local r = reduction_of(opts, "l1_loss")
  if fused_pair(input, target) then return lt.l1_loss(input, target, { reduction = r }) end
  return reduce((input - target):abs(), r)
end

--- Smooth L1 (`nn.SmoothL1Loss`).
-- @tparam Tensor input
-- @tparam Tensor target
-- @tparam[opt] table opts `reduction`, `beta` (1)
-- @treturn Tensor
function F.smooth_l1_loss(input, target, opts)
  opts = check("smooth_l1_loss", opts, SMOOTH_L1)
  check_pair("smooth_l1_loss", input, target)
  local r = reduction_of(opts, "smooth_l1_loss")
  local beta = opts.beta or 1.0
  if not (beta >= 0) then error("smooth_l1_loss: beta must be non-negative, got " .. beta, 2) end
  if beta == 0 then   -- l1_loss (its pair already checked)
    if fused_pair(input, target) then return lt.l1_loss(input, target, { reduction = r }) end
    return reduce((input - target):abs(), r)
  end
  if fused_pair(input, target) then
    return lt.smooth_l1_loss(input, target, { reduction = r, beta = beta })
  end
  local d = (input - target):abs()
  local loss = lt.where(d:lt(beta), d * d * (0.5 / beta), d - 0.5 * beta)
  return reduce(loss, r)
end

--- Huber loss (`nn.HuberLoss`).
-- @tparam Tensor input
-- @tparam Tensor target
-- @tparam[opt] table opts `reduction`, `delta` (1)
-- @treturn Tensor
function F.huber_loss(input, target, opts)
  opts = check("huber_loss", opts, HUBER)
  check_pair("huber_loss", input, target)
  local r = reduction_of(opts, "huber_loss")
  local delta = opts.delta or 1.0
  if not (delta > 0) then error("huber_loss: delta must be positive, got " .. delta, 2) end
  if fused_pair(input, target) then
    return lt.huber_loss(input, target, { reduction = r, delta = delta })
  end
  local d = (input - target):abs()
  local loss = lt.where(d:lt(delta), d * d * 0.5, (d - 0.5 * delta) * delta)
  return reduce(loss, r)
end

-- Class dim of an input for nll/cross_entropy: 1 for an unbatched (C) input, else 2.
local function class_dim(input) return input:dim() == 1 and 1 or 2 end

local function check_class_target(where, input, target)
  local cd = class_dim(input)
  local nd = input:dim()
  local ok = target:dim() == nd - 1
  if ok then   -- size by size, no tables: a training step's loss passes here every step
    local j = 1
    for i = 1, nd do
      if i ~= cd then
        if target:size(j) ~= input:size(i) then ok = false break end
        j = j + 1
      end
    end
  end
  if not ok then
    local si = sizes(input)
    error(where .. ": expected target of shape " .. (function()
      local e = {}
      for i = 1, #si do if i ~= cd then e[#e + 1] = si[i] end end
      return "[" .. table.concat(e, ", ") .. "]"
    end)() .. " (class indices) for input of shape " .. shape_str(input) .. ", got target of shape " ..
      shape_str(target), 3)
  end
end

--- Negative log-likelihood of log-probabilities (`nn.NLLLoss`).
-- @tparam Tensor input `(N, C)`, `(C)` or `(N, C, d...)`
-- @tparam Tensor target int64 classes in 1..C
-- @tparam[opt] table opts `weight`, `ignore_index` (-100), `reduction`
-- @treturn Tensor
function F.nll_loss(input, target, opts)
  opts = check("nll_loss", opts, NLL)
  check_same("nll_loss", input, target)
  local r = reduction_of(opts, "nll_loss")
  if input:dim() < 1 then error("nll_loss: input must have at least 1 dim", 2) end
  if target.dtype ~= "int64" then
    error("nll_loss: expected target of dtype int64 (class indices), got " .. target.dtype, 2)
  end
  check_class_target("nll_loss", input, target)
  local cd = class_dim(input)
  local C = input:size(cd)
  local weight = opts.weight
  if weight ~= nil and (weight:dim() ~= 1 or weight:numel() ~= C) then
    error("nll_loss: weight tensor should be defined either for all " .. C ..
      " classes or no classes but got weight tensor of shape: " .. shape_str(weight), 2)
  end
  return lt.nll_loss(input, target, { weight = weight, ignore_index = opts.ignore_index,
    reduction = r })
end

--- Cross entropy of logits (`nn.CrossEntropyLoss`): target int64 class indices (1-based)
-- or float class probabilities of the input's shape.
-- @tparam Tensor input `(N, C)`, `(C)` or `(N, C, d...)`
-- @tparam Tensor target
-- @tparam[opt] table opts `weight`, `ignore_index` (-100), `reduction`, `label_smoothing`
-- (0)
-- @treturn Tensor
-- @usage F.cross_entropy(logits, lt.tensor{2, 1, 3})
function F.cross_entropy(input, target, opts)
  opts = check("cross_entropy", opts, CROSS_ENTROPY)
  check_same("cross_entropy", input, target)
  local r = reduction_of(opts, "cross_entropy")
  local ls = opts.label_smoothing or 0.0
  if ls < 0 or ls > 1 then
    error("cross_entropy: label_smoothing must be between 0.0 and 1.0. Got: " .. ls, 2)
  end
  if input:dim() < 1 then error("cross_entropy: input must have at least 1 dim", 2) end
  local cd = class_dim(input)
  local C = input:size(cd)
  local weight = opts.weight
  local wshape
  if weight ~= nil then
    if weight:dim() ~= 1 or weight:numel() ~= C then
      error("cross_entropy: weight tensor should be defined either for all " .. C ..
        " classes or no classes but got weight tensor of shape: " .. shape_str(weight), 2)
    end
    wshape = {}
    for i = 1, input:dim() do wshape[i] = (i == cd) and C or 1 end
  end
  if util.is_float(target) then
    if not util.same_shape(input, target) then
      error("cross_entropy: expected target of shape " .. shape_str(input) .. " (class " ..
        "probabilities) or class indices, got target of shape " .. shape_str(target), 2)
    end
    local logp = input:log_softmax(cd)
    local t = target
    if ls > 0 then t = t * (1 - ls) + ls / C end
    local prod = logp * t
    if weight ~= nil then prod = prod * weight:view(wshape) end
    local loss = -prod:sum(cd)
    if r == "none" then return loss end
    if r == "sum" then return loss:sum() end
    return loss:sum() / (input:numel() // C)
  end
  if target.dtype ~= "int64" then
    error("cross_entropy: expected target of dtype int64 (class indices) or a floating dtype " ..
      "(class probabilities), got " .. target.dtype, 2)
  end
  check_class_target("cross_entropy", input, target)
  -- class indices: the fused C kernel (log_softmax, nll and smoothing in one pass each way).
  -- Its vector rows are contiguous classes: (N, C, d1, ...) input moves C last first (a copy,
  -- and one back for the gradient), which costs less than rows of classes a stride apart.
  local o = { weight = weight, ignore_index = opts.ignore_index, reduction = r, label_smoothing = ls }
  if input:dim() > 2 and input.dtype == "float32" and input:numel() > 0 then
    local rows = input:movedim(2, -1):reshape(-1, C)
    local loss = lt.cross_entropy(rows, target:reshape(-1), o)
    if r == "none" then return loss:view(target:size()) end
    return loss
  end
  return lt.cross_entropy(input, target, o)
end

--- Binary cross entropy of probabilities (`nn.BCELoss`); input and target of the same
-- shape.
-- @tparam Tensor input in [0, 1]
-- @tparam Tensor target
-- @tparam[opt] table opts `weight`, `reduction`
-- @treturn Tensor
function F.binary_cross_entropy(input, target, opts)
  opts = check("binary_cross_entropy", opts, BCE)
  check_same("binary_cross_entropy", input, target)
  local r = reduction_of(opts, "binary_cross_entropy")
  if not util.same_shape(input, target) then
    error("binary_cross_entropy: Using a target size (" .. util.size_str(target) .. ") that is " ..
      "different to the input size (" .. util.size_str(input) .. ") is deprecated. Please ensure " ..
      "they have the same size.", 2)
  end
  local logx = input:log():clamp(-100, nil)
  local log1mx = (-input + 1):log():clamp(-100, nil)
  local loss = -(target * logx + (-target + 1) * log1mx)
  if opts.weight ~= nil then loss = loss * opts.weight end
  return reduce(loss, r)
end

--- Binary cross entropy of logits (`nn.BCEWithLogitsLoss`), in the stable form
-- `(1 - y) x + (1 + (pw - 1) y) (log(1 + exp(-|x|)) + max(-x, 0))`.
-- @tparam Tensor input
-- @tparam Tensor target
-- @tparam[opt] table opts `weight`, `pos_weight`, `reduction`
-- @treturn Tensor
function F.binary_cross_entropy_with_logits(input, target, opts)
  opts = check("binary_cross_entropy_with_logits", opts, BCE_LOGITS)
  check_same("binary_cross_entropy_with_logits", input, target)
  local r = reduction_of(opts, "binary_cross_entropy_with_logits")
  if not util.same_shape(input, target) then
    error("binary_cross_entropy_with_logits: target size (" .. util.size_str(target) ..
      ") must be the same as input size (" .. util.size_str(input) .. ")", 2)
  end
  if opts.pos_weight == nil and opts.weight == nil and fused_pair(input, target) then
    return lt.binary_cross_entropy_with_logits(input, target, { reduction = r })
  end
  local softplus_neg = (-input:abs()):exp():log1p() + (-input):clamp(0, nil)
  local loss
  if opts.pos_weight ~= nil then
    local lw = (opts.pos_weight - 1) * target + 1
    loss = (-target + 1) * input + lw * softplus_neg
  else
    loss = (-target + 1) * input + softplus_neg
  end
  if opts.weight ~= nil then loss = loss * opts.weight end
  return reduce(loss, r)
end

--- Kullback-Leibler divergence of log-probabilities `input` from `target` (`nn.KLDivLoss`).
-- @tparam Tensor input log-probabilities
-- @tparam Tensor target probabilities (log-probabilities with `log_target`)
-- @tparam[opt] table opts `reduction` (`"mean"`, which warns as PyTorch, `"batchmean"`,
-- `"sum"` or `"none"`), `log_target` (false)
-- @treturn Tensor
function F.kl_div(input, target, opts)
  opts = check("kl_div", opts, KL_DIV)
  check_same("kl_div", input, target)
  local r = opts.reduction or "mean"
  if r ~= "batchmean" then r = reduction_of(opts, "kl_div") end
  check_broadcast("kl_div", input, target)
  if r == "mean" then
    warnings.warn("kl_div: reduction 'mean' divides the total loss by both the batch size and " ..
      "the support size. 'batchmean' divides only by the batch size, and aligns with the KL " ..
      "div math definition. 'mean' will be changed to behave the same as 'batchmean' in the " ..
      "next major release.")
  end
  local loss
  if opts.log_target then
    loss = target:exp() * (target - input)
  else
    local pos = target:gt(0)
    local safe_t = lt.where(pos, target, lt.ones_like(target))
    loss = lt.where(pos, target * safe_t:log(), lt.zeros_like(target)) - target * input
  end
  if r == "batchmean" then
    if input:dim() == 0 then return loss:sum() end
    return loss:sum() / input:size(1)
  end
  return reduce(loss, r)
end

--- Cosine similarity of `x1` and `x2` along `dim`, each norm clamped to at least eps.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @int[opt=2] dim
-- @number[opt=1e-8] eps
-- @treturn Tensor
function F.cosine_similarity(x1, x2, dim, eps)
  dim = dim or 2
  eps = eps or 1e-8
  local n1 = x1:norm(2, dim, true):clamp(eps, nil)
  local n2 = x2:norm(2, dim, true):clamp(eps, nil)
  return ((x1 / n1) * (x2 / n2)):sum(dim)
end

return F
