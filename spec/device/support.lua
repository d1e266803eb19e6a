-- Helpers of the per-device op suite (spec/device_ops_spec.lua): plain-Lua tensors, inputs in
-- every layout, comparisons, numerical gradients, and case(entry, name, fn), which files a case
-- for a kernel-table entry. Each spec/device/*_cases.lua takes this table and adds its cases.
local assert = require "luassert"   -- a required file does not see busted's assert
local lt = require "lantern"

local DEVICE = os.getenv("LANTERN_DEVICE") or "cpu"
-- every tensor a case makes is on the device under test; references are computed on the host
if lt.device(DEVICE) ~= "cpu" then lt.set_default_device(DEVICE) end

-- ------------------------------------------------------------ plain-Lua tensors

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local function flatten(v, out)
  out = out or {}
  if type(v) == "table" then
    for _, e in ipairs(v) do flatten(e, out) end
  else
    out[#out + 1] = v
  end
  return out
end

-- the values of t in row-major order, as Lua numbers (bools stay bools)
local function values(t)
  if #t.shape == 0 then return { t:tolist() } end
  return flatten(t:tolist())
end

local function copy_shape(s)
  local r = {}
  for i, v in ipairs(s) do r[i] = v end
  return r
end

-- row-major strides of a shape, in elements
local function strides(shape)
  local st, s = {}, 1
  for d = #shape, 1, -1 do
    st[d] = s
    s = s * shape[d]
  end
  return st
end

-- calls f(index list (1-based), flat position) for every element of shape
local function each(shape, f)
  local n = numel(shape)
  local idx = {}
  for d = 1, #shape do idx[d] = 1 end
  for p = 1, n do
    f(idx, p)
    for d = #shape, 1, -1 do
      idx[d] = idx[d] + 1
      if idx[d] <= shape[d] then break end
      idx[d] = 1
    end
  end
end

local function flat_pos(shape, idx)
  local st, p = strides(shape), 1
  for d = 1, #shape do p = p + (idx[d] - 1) * st[d] end
  return p
end

-- ------------------------------------------------------------ comparisons

local function is_nan(v) return v ~= v end

local function close_list(got, want, tol, what)
  assert.are.equal(#want, #got, (what or "") .. ": element count")
  for i = 1, #want do
    local u, v = got[i], want[i]
    local ok
    if type(v) == "boolean" or type(u) == "boolean" then
      ok = u == v
    elseif is_nan(v) then
      ok = is_nan(u)
    elseif v == math.huge or v == -math.huge then
      ok = u == v
    else
      ok = math.abs(u - v) <= tol * (1 + math.abs(v))
    end
    if not ok then
      error(string.format("%s: element %d is %s, expected %s", what or "values", i, tostring(u),
        tostring(v)), 2)
    end
  end
end

local function check(t, shape, dtype, want, tol, what)
  assert.are.same(shape, t.shape, (what or "") .. ": shape")
  assert.are.equal(dtype, t.dtype, (what or "") .. ": dtype")
  close_list(values(t), want, tol, what)
end

-- ------------------------------------------------------------ inputs in several layouts

-- deterministic values: a small LCG, so every run checks the same numbers
local seed = 12345
local function rnd()
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
end

-- n distinct values in [-2, 2) (no ties, so max/min gradients are well defined)
local function distinct(n)
  local v = {}
  for i = 1, n do v[i] = (rnd() * 4 - 2) + i * 1e-3 end
  return v
end

local function ints(n, lo, hi)
  local v = {}
  for i = 1, n do v[i] = lo + math.floor(rnd() * (hi - lo + 1)) end
  return v
end

local function make(vals, shape, dtype)
  if #shape == 0 then return lt.tensor(vals[1], { dtype = dtype }) end
  if numel(shape) == 0 then return lt.zeros(shape, { dtype = dtype }) end
  return lt.tensor(vals, { dtype = dtype }):reshape(shape)
end

-- The same logical tensor (shape, row-major values) laid out as `layout`:
--   contiguous; noncontig (transposed storage); strided (every third element of a wider
--   tensor, from an offset of one); broadcast (the values of dim 1 repeated: built by expand).
local function laid_out(vals, shape, dtype, kind)
  local nd = #shape
  if kind == "contiguous" or nd == 0 or numel(shape) == 0 then
    return make(vals, shape, dtype)
  elseif kind == "noncontig" then
    if nd == 1 then kind = "strided" else
      local c = make(vals, shape, dtype)
      return c:transpose(1, nd):contiguous():transpose(1, nd)
    end
  end
  if kind == "strided" then
    local wide = copy_shape(shape)
    wide[nd + 1] = 3
    local wv = {}
    for i = 1, #vals do
      wv[3 * i - 2], wv[3 * i - 1], wv[3 * i] = 0, vals[i], 0
    end
    return make(wv, wide, dtype):select(nd + 1, 2)
  elseif kind == "broadcast" then
    local one = copy_shape(shape)
    one[1] = 1
    return make({ table.unpack(vals, 1, numel(one)) }, one, dtype):expand(shape)
  end
  error("unknown layout " .. kind)
end

local function layout(vals, shape, dtype, kind)
  local t = laid_out(vals, shape, dtype, kind)
  -- every layout but the first must really be one the kernels see as non-contiguous
  assert(kind == "contiguous" or numel(shape) <= 1 or not t:is_contiguous(), kind)
  return t
end

local LAYOUTS = { "contiguous", "noncontig", "strided", "broadcast" }

-- A laid-out input and its logical values (for broadcast: the first slice's values repeated).
local function input(vals, shape, dtype, kind)
  local t = layout(vals, shape, dtype, kind)
  return t, values(t)
end

-- ------------------------------------------------------------ reference gradients

-- d/dx of sum(w * f(x)) by central differences of the plain-Lua reference f (flat lists)
local function numgrad(f, x, w)
  local g, h = {}, 1e-6
  for i = 1, #x do
    local keep = x[i]
    x[i] = keep + h
    local up = f(x)
    x[i] = keep - h
    local down = f(x)
    x[i] = keep
    local s = 0
    for j = 1, #w do s = s + w[j] * (up[j] - down[j]) end
    g[i] = s / (2 * h)
  end
  return g
end

-- Runs op on a leaf laid out as `kind` (float64), backward of sum(w * op(x)), and compares x's
-- gradient with the numerical one of ref (a function of the flat input values).
local function check_grad(op, ref, vals, shape, kind, what)
  local t = layout(vals, shape, "float64", kind)
  local x = t:detach():requires_grad_()
  local y = op(x)
  local xs = values(x)
  local ny = numel(y.shape)
  local w = distinct(ny)
  local wt = make(w, y.shape, "float64")
  if ny > 0 then (y * wt):sum():backward() end
  local want = numgrad(ref, xs, w)
  if ny == 0 or numel(shape) == 0 then
    assert.is_true(x.grad == nil or numel(x.grad.shape) == 0, what)
    return
  end
  check(x.grad, shape, "float64", want, 1e-5, (what or "") .. " gradient")
end

-- ------------------------------------------------------------ cases, by table entry
local cases = {}
local function case(entry, name, fn)
  cases[entry] = cases[entry] or {}
  table.insert(cases[entry], { name = name, fn = fn })
end

local SHAPES = { {}, { 5 }, { 3, 4 }, { 2, 3, 4 }, { 0, 3 } }
local FLOATS = { "float32", "float64" }
local function tol_of(dt) return dt == "float32" and 1e-5 or 1e-12 end

return {
  lt = lt, DEVICE = DEVICE, numel = numel, flatten = flatten, values = values,
  copy_shape = copy_shape, strides = strides, each = each, flat_pos = flat_pos, is_nan = is_nan,
  close_list = close_list, check = check, rnd = rnd, distinct = distinct, ints = ints, make = make,
  layout = layout, LAYOUTS = LAYOUTS, input = input, numgrad = numgrad, check_grad = check_grad,
  cases = cases, case = case, SHAPES = SHAPES, FLOATS = FLOATS, tol_of = tol_of,
}
