--- Initialisers (`lt.nn.init`), in place with PyTorch's formulas, all under `no_grad`, each
-- returning the tensor. Random ones accept a trailing `{generator = g}`, and the arguments may
-- come as keywords: `init.kaiming_uniform_(w, {a = math.sqrt(5), mode = "fan_in"})`. Fans
-- follow PyTorch: `fan_in = size(2) * receptive field`, `fan_out = size(1) * receptive field`
-- (the receptive field is the product of the sizes past dim 2).
--
-- PyTorch's deprecated names without the underscore are the same functions:
-- `nn.init.uniform`, `nn.init.normal`, `nn.init.constant`, `nn.init.eye`, `nn.init.dirac`,
-- `nn.init.xavier_uniform`, `nn.init.xavier_normal`, `nn.init.kaiming_uniform`,
-- `nn.init.kaiming_normal`, `nn.init.orthogonal`, `nn.init.sparse`.
-- @module lantern.nn.init
-- @alias I
local lt = require "lantern"
local util = require "lantern.nn.util"
local check_opts = require("lantern.options").check
local warnings = require "lantern.warnings"

local I = {}

local function check(t, where)
  if not util.is_tensor(t) then error(where .. ": expected a Tensor, got " .. util.typename(t), 3) end
end

-- Random-fill options: only a generator is passed on to the core.
local function gen_opts(opts)
  if type(opts) == "table" and opts.generator ~= nil then return { generator = opts.generator } end
  return nil
end

local function uniform(t, a, b, opts)
  local g = gen_opts(opts)
  if g then return t:uniform_(a, b, g) end
  return t:uniform_(a, b)
end
local function normal(t, m, s, opts)
  local g = gen_opts(opts)
  if g then return t:normal_(m, s, g) end
  return t:normal_(m, s)
end

local function no_grad(fn) return lt.no_grad(fn) end

-- Splits trailing keyword tables: f(t, x, y, {generator=g}) or f(t, {x=..., y=..., generator=g}).
local function kw(where, args, names)
  local out = {}
  local last = args[args.n]
  local opts
  if args.n >= 1 and type(last) == "table" and not util.is_tensor(last) then
    opts = last
    args[args.n] = nil
    args.n = args.n - 1
    local known = { table.unpack(names) }
    known[#known + 1] = "generator"
    check_opts(where, opts, known)
  end
  for i, name in ipairs(names) do
    local v = args[i]
    if v == nil and opts then v = opts[name] end
    out[name] = v
  end
  return out, opts
end

--- The recommended gain for a nonlinearity: 1 for linear, conv and sigmoid, 5/3 for tanh,
-- sqrt(2) for relu, `sqrt(2 / (1 + slope^2))` for leaky_relu, 3/4 for selu.
-- @string nonlinearity
-- @number[opt=0.01] param leaky_relu's negative slope
-- @treturn number
-- @usage init.calculate_gain("relu")   --> 1.4142135623731
function I.calculate_gain(nonlinearity, param)
  local linear = {
    linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
    conv_transpose2d = true, conv_transpose3d = true, sigmoid = true,
  }
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5.0 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2.0) end
  if nonlinearity == "leaky_relu" then
    local slope
    if param == nil then slope = 0.01
    elseif type(param) == "number" then slope = param
    else error("calculate_gain: negative_slope " .. tostring(param) .. " not a valid number", 2) end
    return math.sqrt(2.0 / (1 + slope * slope))
  end
  if nonlinearity == "selu" then return 3.0 / 4 end
  error("calculate_gain: Unsupported nonlinearity " .. tostring(nonlinearity), 2)
end

-- fan_in, fan_out as PyTorch computes them (dims 1 and 2 times the receptive field).
function I._calculate_fan_in_and_fan_out(t)
  local s = util.sizes(t)
  if #s < 2 then
    error("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions", 3)
  end
  local rf = 1
  for i = 3, #s do rf = rf * s[i] end
  return s[2] * rf, s[1] * rf
end
local fans = I._calculate_fan_in_and_fan_out

local function correct_fan(t, mode)
  local m = type(mode) == "string" and mode:lower() or mode
  if m ~= "fan_in" and m ~= "fan_out" then
    error("Mode " .. tostring(mode) .. " not supported, please use one of ['fan_in', 'fan_out']", 3)
  end
  local fi, fo = fans(t)
  return m == "fan_in" and fi or fo
end

--- Uniform values in [a, b).
-- @tparam Tensor t
-- @param ... `a` (0), `b` (1), then `{generator=}`; or `{a=, b=, generator=}`
-- @treturn Tensor t
function I.uniform_(t, ...)
  check(t, "init.uniform_")
  local a, opts = kw("init.uniform_", table.pack(...), { "a", "b" })
  no_grad(function() uniform(t, a.a or 0, a.b or 1, opts) end)
  return t
end

--- Normal values with `mean` and `std`.
-- @tparam Tensor t
-- @param ... `mean` (0), `std` (1), then `{generator=}`; or `{mean=, std=, generator=}`
-- @treturn Tensor t
function I.normal_(t, ...)
  check(t, "init.normal_")
  local a, opts = kw("init.normal_", table.pack(...), { "mean", "std" })
  no_grad(function() normal(t, a.mean or 0, a.std or 1, opts) end)
  return t
end

--- Fills with `val`. Also `init.zeros_(t)` and `init.ones_(t)`.
-- @tparam Tensor t
-- @number val
-- @treturn Tensor t
function I.constant_(t, val)
  check(t, "init.constant_")
  if type(val) ~= "number" then error("init.constant_: value must be a number, got " .. type(val), 2) end
  no_grad(function() t:fill_(val) end)
  return t
end
--- Fills with zeros.
-- @tparam Tensor t
-- @treturn Tensor t
function I.zeros_(t) check(t, "init.zeros_") no_grad(function() t:zero_() end) return t end
--- Fills with ones.
-- @tparam Tensor t
-- @treturn Tensor t
function I.ones_(t) check(t, "init.ones_") no_grad(function() t:fill_(1) end) return t end

--- The identity matrix (2-D tensors).
-- @tparam Tensor t
-- @treturn Tensor t
function I.eye_(t)
  check(t, "init.eye_")
  if t:dim() ~= 2 then error("init.eye_: Only tensors with 2 dimensions are supported", 2) end
  no_grad(function() t:copy_(lt.eye(t:size(1), t:size(2), { dtype = t.dtype })) end)
  return t
end

--- The Dirac delta: convolution weights (3, 4 or 5 dims) that keep their input's channels,
-- in `groups` groups.
-- @tparam Tensor t
-- @int[opt=1] groups
-- @treturn Tensor t
function I.dirac_(t, groups)
  check(t, "init.dirac_")
  groups = groups or 1
  local nd = t:dim()
  if nd < 3 or nd > 5 then error("init.dirac_: Only tensors with 3, 4, or 5 dimensions are supported", 2) end
  local s = util.sizes(t)
  if s[1] % groups ~= 0 then error("init.dirac_: dim 1 is not divisible by groups", 2) end
  local out_per = s[1] // groups
  local md = math.min(out_per, s[2])
  no_grad(function()
    t:zero_()
    for g = 0, groups - 1 do
      for d = 0, md - 1 do
        local v = t:select(1, g * out_per + d + 1):select(1, d + 1)
        for k = 3, nd do v = v:select(1, (s[k] - 1) // 2 + 1) end
        v:fill_(1)
      end
    end
  end)
  return t
end

--- Glorot uniform: bound `gain * sqrt(6 / (fan_in + fan_out))`.
-- @tparam Tensor t at least 2-D
-- @param ... `gain` (1), then `{generator=}`; or `{gain=, generator=}`
-- @treturn Tensor t
function I.xavier_uniform_(t, ...)
  check(t, "init.xavier_uniform_")
  local a, opts = kw("init.xavier_uniform_", table.pack(...), { "gain" })
  local fi, fo = fans(t)
  local std = (a.gain or 1) * math.sqrt(2.0 / (fi + fo))
  local bound = math.sqrt(3.0) * std
  no_grad(function() uniform(t, -bound, bound, opts) end)
  return t
end

--- Glorot normal: std `gain * sqrt(2 / (fan_in + fan_out))`.
-- @tparam Tensor t at least 2-D
-- @param ... `gain` (1), then `{generator=}`; or `{gain=, generator=}`
-- @treturn Tensor t
function I.xavier_normal_(t, ...)
  check(t, "init.xavier_normal_")
  local a, opts = kw("init.xavier_normal_", table.pack(...), { "gain" })
  local fi, fo = fans(t)
  local std = (a.gain or 1) * math.sqrt(2.0 / (fi + fo))
  no_grad(function() normal(t, 0, std, opts) end)
  return t
end

local function kaiming_std(t, a)
  local fan = correct_fan(t, a.mode or "fan_in")
  local gain = I.calculate_gain(a.nonlinearity or "leaky_relu", a.a or 0)
  return gain / math.sqrt(fan)
end

--- He uniform: bound `sqrt(3) * gain / sqrt(fan)` with the gain of `nonlinearity` at `a`.
-- An empty tensor is left alone with a warning, as in PyTorch.
-- @tparam Tensor t at least 2-D
-- @param ... `a` (0, the negative slope), `mode` (`"fan_in"` or `"fan_out"`), `nonlinearity`
-- (`"leaky_relu"`), then `{generator=}`; or all as one table
-- @treturn Tensor t
-- @usage init.kaiming_uniform_(w, math.sqrt(5))   -- what Linear and Conv2d use
function I.kaiming_uniform_(t, ...)
  check(t, "init.kaiming_uniform_")
  local a, opts = kw("init.kaiming_uniform_", table.pack(...), { "a", "mode", "nonlinearity" })
  if t:numel() == 0 then
    warnings.warn("init.kaiming_uniform_: Initializing zero-element tensors is a no-op")
    return t
  end
  local bound = math.sqrt(3.0) * kaiming_std(t, a)
  no_grad(function() uniform(t, -bound, bound, opts) end)
  return t
end

--- He normal: std `gain / sqrt(fan)`.
-- @tparam Tensor t at least 2-D
-- @param ... `a`, `mode`, `nonlinearity` as `kaiming_uniform_`, then `{generator=}`
-- @treturn Tensor t
function I.kaiming_normal_(t, ...)
  check(t, "init.kaiming_normal_")
  local a, opts = kw("init.kaiming_normal_", table.pack(...), { "a", "mode", "nonlinearity" })
  if t:numel() == 0 then
    warnings.warn("init.kaiming_normal_: Initializing zero-element tensors is a no-op")
    return t
  end
  local std = kaiming_std(t, a)
  no_grad(function() normal(t, 0, std, opts) end)
  return t
end

--- A (semi-)orthogonal matrix, times `gain`, from the QR decomposition of a Gaussian matrix
-- with R's diagonal made positive (PyTorch's sign correction); dims past the first are
-- flattened.
-- @tparam Tensor t at least 2-D
-- @param ... `gain` (1), then `{generator=}`
-- @treturn Tensor t
function I.orthogonal_(t, ...)
  check(t, "init.orthogonal_")
  local a, opts = kw("init.orthogonal_", table.pack(...), { "gain" })
  if t:dim() < 2 then error("init.orthogonal_: Only tensors with 2 or more dimensions are supported", 2) end
  if t:numel() == 0 then return t end
  local rows = t:size(1)
  local cols = t:numel() // rows
  no_grad(function()
    local flat = lt.empty(rows, cols, { dtype = "float64" })
    normal(flat, 0, 1, opts)
    local m = rows < cols and flat:t():contiguous() or flat
    local n, k = m:size(1), m:size(2)      -- tall: n >= k
    local q = lt.zeros(n, k, { dtype = "float64" })
    for j = 1, k do
      local v = m:select(2, j):clone()
      if j > 1 then
        local qj = q:narrow(2, 1, j - 1)
        for _ = 1, 2 do v = v - qj:matmul(qj:t():matmul(v)) end
      end
      local nrm = v:norm():item()
      if nrm > 0 then v = v / nrm else v:zero_() end
      q:select(2, j):copy_(v)
    end
    if rows < cols then q = q:t() end
    t:copy_(q:reshape(util.sizes(t)) * (a.gain or 1))
  end)
  return t
end

-- erf of a Lua number (for the CDF bounds of trunc_normal_): Taylor series for |x| < 3, the
-- continued fraction of erfc beyond; accurate to ~1e-13.
local function lt_erf(x)
  local ax = math.abs(x)
  local r
  if ax < 3 then
    local sum, term, n = ax, ax, 0
    repeat
      n = n + 1
      term = term * (-1) * ax * ax / n
      local add = term / (2 * n + 1)
      sum = sum + add
    until math.abs(add) < 1e-17 * math.abs(sum) or n > 200
    r = 2 / math.sqrt(math.pi) * sum
  else
    -- continued fraction for erfc
    local t = 0
    for k = 60, 1, -1 do t = k / 2 / (ax + t) end
    r = 1 - math.exp(-ax * ax) / math.sqrt(math.pi) / (ax + t)
  end
  return x < 0 and -r or r
end
I._erf = lt_erf

-- erfinv of a float64 tensor in (-1, 1): Giles' approximation refined by Newton steps on erf.
local function erfinv(x)
  if x.erfinv then return x:erfinv() end
  local w = -((-x + 1) * (x + 1)):log()
  local function horner(z, coeffs)
    local p = z * 0 + coeffs[1]
    for i = 2, #coeffs do p = p * z + coeffs[i] end
    return p
  end
  local small = horner(w - 2.5, { 2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
    0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941 })
  local large = horner(w:clamp(0, nil):sqrt() - 3, { -0.000200214257, 0.000100950558, 0.00134934322,
    -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682 })
  local y = lt.where(w:lt(5), small, large) * x
  if y.erf then
    local c = 2 / math.sqrt(math.pi)
    for _ = 1, 2 do
      y = y - (y:erf() - x) / ((-(y * y)):exp() * c)
    end
  end
  return y
end
I._erfinv = erfinv

--- Normal values with `mean` and `std` truncated to [a, b] (absolute bounds), by
-- inverse-CDF sampling.
-- @tparam Tensor t
-- @param ... `mean` (0), `std` (1), `a` (-2), `b` (2), then `{generator=}`; or one table
-- @treturn Tensor t
function I.trunc_normal_(t, ...)
  check(t, "init.trunc_normal_")
  local args, opts = kw("init.trunc_normal_", table.pack(...), { "mean", "std", "a", "b" })
  local mean, std = args.mean or 0, args.std or 1
  local a, b = args.a or -2, args.b or 2
  if (mean < a - 2 * std) or (mean > b + 2 * std) then
    warnings.warn("init.trunc_normal_: mean is more than 2 std from [a, b]. The distribution " ..
      "of values may be incorrect.")
  end
  if t:numel() == 0 then return t end
  local function cdf(x) return (1 + lt_erf((x - mean) / std / math.sqrt(2))) / 2 end
  no_grad(function()
    local l, u = cdf(a), cdf(b)
    local x = lt.empty(util.sizes(t), { dtype = "float64" })
    uniform(x, 2 * l - 1, 2 * u - 1, opts)
    -- keep strictly inside (-1, 1) so erfinv stays finite
    x = x:clamp(-1 + 1e-15, 1 - 1e-15)
    local y = erfinv(x) * (std * math.sqrt(2)) + mean
    t:copy_(y:clamp(a, b))
  end)
  return t
end


--- Normal values N(0, std^2) with `ceil(sparsity * rows)` zeros in each column (2-D).
-- @tparam Tensor t
-- @param ... `sparsity`, `std` (0.01), then `{generator=}`; or one table
-- @treturn Tensor t
function I.sparse_(t, ...)
  check(t, "init.sparse_")
  local args, opts = kw("init.sparse_", table.pack(...), { "sparsity", "std" })
  if t:dim() ~= 2 then error("init.sparse_: Only tensors with 2 dimensions are supported", 2) end
  local rows, cols = t:size(1), t:size(2)
  local nz = math.ceil((args.sparsity or 0) * rows)
  no_grad(function()
    normal(t, 0, args.std or 0.01, opts)
    if nz > 0 then
      for c = 1, cols do
        -- a random permutation of the rows (from the generator), first nz rows zeroed
        local keys = lt.rand(rows, gen_opts(opts)):tolist()
        local idx = {}
        for i = 1, rows do idx[i] = i end
        table.sort(idx, function(x, y) return keys[x] < keys[y] end)
        local col = t:select(2, c)
        for i = 1, nz do col:narrow(1, idx[i], 1):zero_() end
      end
    end
  end)
  return t
end

-- Aliases without the trailing underscore (old PyTorch names).
for _, name in ipairs { "uniform", "normal", "constant", "eye", "dirac", "xavier_uniform",
  "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse" } do
  I[name] = I[name .. "_"]
end

return I
