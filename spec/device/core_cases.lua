-- Cases for the first kernels of the table: copy, fill, the elementwise family, gemm,
-- reductions, arg search, softmax and cumsum.
local assert = require "luassert"   -- a required file does not see busted's assert
local D = require "device.support"
local lt, numel, values, copy_shape, strides, each, flat_pos, is_nan = D.lt, D.numel, D.values,
  D.copy_shape, D.strides, D.each, D.flat_pos, D.is_nan
local close_list, check, rnd, distinct, ints, make = D.close_list, D.check, D.rnd, D.distinct,
  D.ints, D.make
local layout, LAYOUTS, input, numgrad, check_grad = D.layout, D.LAYOUTS, D.input, D.numgrad,
  D.check_grad
local case, SHAPES, FLOATS, tol_of = D.case, D.SHAPES, D.FLOATS, D.tol_of

-- ------------------------------------------------------------ plain-Lua references

local REDUCE = {
  sum = function(a, v) return a + v end,
  prod = function(a, v) return a * v end,
  amax = function(a, v) return (v > a or is_nan(v)) and v or a end,
  amin = function(a, v) return (v < a or is_nan(v)) and v or a end,
  all = function(a, v) return a and (v ~= 0 and v ~= false) end,
  any = function(a, v) return a or (v ~= 0 and v ~= false) end,
}
local INIT = { sum = 0, prod = 1, amax = -math.huge, amin = math.huge, all = true, any = false }

-- op over the dims in `dims` (1-based list; empty: all) of x (flat, shape): flat result, shape
local function ref_reduce(name, x, shape, dims, keepdim)
  local red = {}
  if #dims == 0 then
    for d = 1, #shape do red[d] = true end
  else
    for _, d in ipairs(dims) do red[d < 0 and #shape + d + 1 or d] = true end
  end
  local oshape, kshape = {}, {}
  for d = 1, #shape do
    kshape[d] = red[d] and 1 or shape[d]
    if not red[d] then
      oshape[#oshape + 1] = shape[d]
    elseif keepdim then
      oshape[#oshape + 1] = 1
    end
  end
  local base = name == "mean" and "sum" or name
  local acc, cnt = {}, {}
  for i = 1, numel(kshape) do acc[i], cnt[i] = INIT[base], 0 end
  each(shape, function(idx, p)
    local k = {}
    for d = 1, #shape do k[d] = red[d] and 1 or idx[d] end
    local q = flat_pos(kshape, k)
    local v = x[p]
    if type(v) == "boolean" then v = v and 1 or 0 end
    acc[q] = REDUCE[base](acc[q], v)
    cnt[q] = cnt[q] + 1
  end)
  if name == "mean" then
    for i = 1, #acc do acc[i] = acc[i] / cnt[i] end
  end
  return acc, oshape
end

local function ref_softmax(x, shape, dim, log)
  if #shape == 0 then return { log and 0 or 1 } end
  local out, rowm, rows = {}, {}, {}
  local st = strides(shape)[dim]
  -- the row of each element starts at its position with index 1 along dim
  local function start(idx, p) return p - (idx[dim] - 1) * st end
  each(shape, function(idx, p)
    local r = start(idx, p)
    rowm[r] = math.max(rowm[r] or -math.huge, x[p])
  end)
  each(shape, function(idx, p)
    local r = start(idx, p)
    rows[r] = (rows[r] or 0) + math.exp(x[p] - rowm[r])
  end)
  each(shape, function(idx, p)
    local r = start(idx, p)
    out[p] = log and (x[p] - rowm[r] - math.log(rows[r])) or math.exp(x[p] - rowm[r]) / rows[r]
  end)
  return out
end

local function ref_cumsum(x, shape, dim)
  local out = {}
  if #shape == 0 then return { type(x[1]) == "boolean" and (x[1] and 1 or 0) or x[1] } end
  each(shape, function(idx, p)
    local k, s = copy_shape(idx), 0
    for i = 1, idx[dim] do
      k[dim] = i
      local v = x[flat_pos(shape, k)]
      if type(v) == "boolean" then v = v and 1 or 0 end
      s = s + v
    end
    out[p] = s
  end)
  return out
end

-- first best along dim (NaN wins): values and 1-based indices, output shape without dim
local function ref_search(x, shape, dim, is_max, keepdim)
  local vals, idxs, oshape = {}, {}, {}
  for d = 1, #shape do
    if d ~= dim then oshape[#oshape + 1] = shape[d] elseif keepdim then oshape[#oshape + 1] = 1 end
  end
  local kshape = copy_shape(shape)
  if #shape > 0 then kshape[dim] = 1 end
  each(kshape, function(idx, q)
    local k = copy_shape(idx)
    local bv, bi
    for i = 1, (#shape > 0 and shape[dim] or 1) do
      if #shape > 0 then k[dim] = i end
      local v = x[#shape > 0 and flat_pos(shape, k) or 1]
      if bi == nil then bv, bi = v, i
      elseif not is_nan(bv) and (is_nan(v) or (is_max and v > bv) or (not is_max and v < bv)) then
        bv, bi = v, i
      end
    end
    vals[q], idxs[q] = bv, bi
  end)
  return vals, idxs, oshape
end

-- sort along dim (NaN the largest, ties by position): flat values and 1-based indices, the
-- first k of each row (all when k is nil)
local function ref_sort(x, shape, dim, desc, k)
  local n = #shape > 0 and shape[dim] or 1
  k = k or n
  local oshape = copy_shape(shape)
  if #shape > 0 then oshape[dim] = k end
  local vals, idxs = {}, {}
  local kshape = copy_shape(shape)
  if #shape > 0 then kshape[dim] = 1 end
  each(kshape, function(idx)
    local row, pos = {}, {}
    local at = copy_shape(idx)
    for i = 1, n do
      if #shape > 0 then at[dim] = i end
      row[i], pos[i] = x[#shape > 0 and flat_pos(shape, at) or 1], i
    end
    table.sort(pos, function(p, q)
      local a, b = row[p], row[q]
      if is_nan(a) or is_nan(b) then
        if is_nan(a) and is_nan(b) then return p < q end
        return desc == is_nan(a)
      end
      if a ~= b then return desc == (a > b) end
      return p < q
    end)
    for i = 1, k do
      if #shape > 0 then at[dim] = i end
      local q = #shape > 0 and flat_pos(oshape, at) or 1
      vals[q], idxs[q] = row[pos[i]], pos[i]
    end
  end)
  return vals, idxs, oshape
end

-- first best of all elements (row-major), 1-based
local function ref_flat_best(x, is_max)
  local bv, bi = x[1], 1
  for i = 2, #x do
    local v = x[i]
    if not is_nan(bv) and (is_nan(v) or (is_max and v > bv) or (not is_max and v < bv)) then
      bv, bi = v, i
    end
  end
  return bi
end


-- copy: contiguous() of every layout, dtype conversion, clone (backward: identity)
case("copy", "contiguous, clone and dtype conversion of every layout", function()
  for _, shape in ipairs(SHAPES) do
    for _, kind in ipairs(LAYOUTS) do
      local vals = distinct(math.max(numel(shape), 1))
      local t, v = input(vals, shape, "float64", kind)
      check(t:contiguous(), shape, "float64", v, 0, "contiguous " .. kind)
      check(t:float(), shape, "float32", v, 1e-6, "float " .. kind)
      local iv = {}
      for i, e in ipairs(v) do iv[i] = e < 0 and math.ceil(e) or math.floor(e) end
      check(t:long(), shape, "int64", iv, 0, "long " .. kind)
      check_grad(function(x) return x:clone() end, function(x) return { table.unpack(x) } end,
        vals, shape, kind, "clone " .. kind)
    end
  end
end)

-- fill: full and fill_ (backward: zero gradient)
case("fill", "full, fill_ on every layout that may be written, zero gradient", function()
  for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
    for _, shape in ipairs(SHAPES) do
      local n = numel(shape)
      local v = dt == "bool" and true or 3
      local want = {}
      for i = 1, (#shape == 0 and 1 or n) do want[i] = v == true and true or 3 end
      check(lt.full(shape, v, { dtype = dt }), shape, dt, want, 0, "full " .. dt)
      for _, kind in ipairs({ "contiguous", "noncontig", "strided" }) do
        local t = layout(distinct(math.max(n, 1)), shape, "float64", kind)
        t:fill_(-1.5)
        local w = {}
        for i = 1, (#shape == 0 and 1 or n) do w[i] = -1.5 end
        check(t, shape, "float64", w, 0, "fill_ " .. kind)
      end
    end
  end
  check_grad(function(x)
    local y = x:clone()
    y:fill_(2)
    return y
  end, function(x)
    local r = {}
    for i = 1, #x do r[i] = 2 end
    return r
  end, distinct(12), { 3, 4 }, "noncontig", "fill_")
end)

local BINOPS = {
  { "add", function(a, b) return a + b end, function(u, v) return u + v end },
  { "sub", function(a, b) return a - b end, function(u, v) return u - v end },
  { "mul", function(a, b) return a * b end, function(u, v) return u * v end },
  { "div", function(a, b) return a / b end, function(u, v) return u / v end },
  { "maximum", function(a, b) return lt.maximum(a, b) end,
    function(u, v) return math.max(u, v) end },
}

-- binary: broadcast operands of every layout, mixed dtypes, comparisons
case("binary", "broadcast, strided and mixed-dtype operands; comparisons", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, op in ipairs(BINOPS) do
      local av = distinct(24)
      local a, va = input(av, shape, "float64", kind)
      local bv = distinct(4)
      for i = 1, 4 do bv[i] = bv[i] + 3 end   -- no division by zero
      local b = lt.tensor(bv, { dtype = "float32" })
      local want = {}
      for i = 1, 24 do want[i] = op[3](va[i], b:double():tolist()[(i - 1) % 4 + 1]) end
      check(op[2](a, b), shape, "float64", want, 1e-6, op[1] .. " " .. kind)
      check_grad(function(x) return op[2](x, b:double()) end, function(x)
        local r = {}
        for i = 1, #x do r[i] = op[3](x[i], bv[(i - 1) % 4 + 1]) end
        return r
      end, av, shape, kind, op[1] .. " " .. kind)
    end
    local a, va = input(ints(24, -3, 3), shape, "int64", kind)
    local want = {}
    for i = 1, 24 do want[i] = va[i] < 1 end
    check(a:lt(1), shape, "bool", want, 0, "lt " .. kind)
    local s = a + a
    for i = 1, 24 do want[i] = 2 * va[i] end
    check(s, shape, "int64", want, 0, "int add " .. kind)
  end
  check(lt.zeros({ 0, 3 }) + lt.ones({ 3 }), { 0, 3 }, "float32", {}, 0, "empty")
end)

-- binary's parameters: isclose's rtol and atol (the ops with parameters share the entry)
case("binary", "isclose with rtol, atol and equal_nan", function()
  for _, dt in ipairs(FLOATS) do
    local a = make({ 1, 2, 0 / 0, 100, -1 }, { 5 }, dt)
    local b = make({ 1.05, 2.5, 0 / 0, 100.5, 1 }, { 5 }, dt)
    check(a:isclose(b, { rtol = 0, atol = 0.1 }), { 5 }, "bool",
      { true, false, false, false, false }, 0, "isclose atol " .. dt)
    check(a:isclose(b, { rtol = 0.01, atol = 0, equal_nan = true }), { 5 }, "bool",
      { false, false, true, true, false }, 0, "isclose rtol " .. dt)
  end
end)

-- ternary: the two-operand gradient formulas of the binary ops, for either operand
local GRAD2 = {
  { "div", function(a, b) return a / b end, function(u, v) return u / v end },
  { "pow", function(a, b) return a:pow(b) end, function(u, v) return u ^ v end },
  { "atan2", function(a, b) return a:atan2(b) end, function(u, v) return math.atan(u, v) end },
  { "maximum", function(a, b) return lt.maximum(a, b) end, math.max },
  { "minimum", function(a, b) return lt.minimum(a, b) end, math.min },
  { "fmod", function(a, b) return a:fmod(b) end, math.fmod },
  { "remainder", function(a, b) return a:remainder(b) end,
    function(u, v) return u - math.floor(u / v) * v end },
}
case("ternary", "gradients of div pow atan2 maximum minimum fmod remainder, both operands",
  function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, op in ipairs(GRAD2) do
      -- maximum and minimum compare values of [-2, 2) (no ties); the others take a in [1, 2)
      -- (in (-2, -1] for the remainders) against b in [3, 4), so no kink or pole is near
      local av, bv = distinct(24), distinct(4)
      if op[1] ~= "maximum" and op[1] ~= "minimum" then
        local sign = (op[1] == "fmod" or op[1] == "remainder") and -1 or 1
        for i = 1, 24 do av[i] = sign * (1 + (av[i] + 2) / 4) end
        for i = 1, 4 do bv[i] = 3 + (bv[i] + 2) / 4 end
      end
      local b64 = make(bv, { 4 }, "float64")
      check_grad(function(x) return op[2](x, b64) end, function(x)
        local r = {}
        for i = 1, #x do r[i] = op[3](x[i], bv[(i - 1) % 4 + 1]) end
        return r
      end, av, shape, kind, op[1] .. " a " .. kind)
      local a64 = layout(av, shape, "float64", kind)
      local avals = values(a64)
      check_grad(function(y) return op[2](a64, y) end, function(y)
        local r = {}
        for i = 1, 24 do r[i] = op[3](avals[i], y[(i - 1) % 4 + 1]) end
        return r
      end, bv, { 4 }, "contiguous", op[1] .. " b " .. kind)
    end
  end
end)

-- where: cond ? a : b with broadcasting, every layout, and its gradient to both sides
-- addc: addcmul, addcdiv and lerp with nothing to record (one pass where a device has the
-- entry, the separate binary ops where it has not), fresh and in place
case("addc", "addcmul addcdiv lerp (number and tensor weights), layouts, in place", function()
  local shape = { 3, 4 }
  local OPS = {
    { "addcmul", function(s, a, b) return s:addcmul(a, b, -0.75) end,
      function(s, a, b) return s:addcmul_(a, b, -0.75) end,
      function(s, a, b) return s - 0.75 * a * b end },
    { "addcdiv", function(s, a, b) return s:addcdiv(a, b, 2) end,
      function(s, a, b) return s:addcdiv_(a, b, 2) end,
      function(s, a, b) return s + 2 * a / b end },
    { "lerp 0.25", function(s, a) return s:lerp(a, 0.25) end,
      function(s, a) return s:lerp_(a, 0.25) end,
      function(s, a) return s + 0.25 * (a - s) end },
    { "lerp 0.75", function(s, a) return s:lerp(a, 0.75) end,
      function(s, a) return s:lerp_(a, 0.75) end,
      function(s, a) return s + 0.75 * (a - s) end },
    { "lerp tensor", function(s, a, b) return s:lerp(a, b) end,
      function(s, a, b) return s:lerp_(a, b) end,
      function(s, a, b) return s + b * (a - s) end },
  }
  for _, dt in ipairs(FLOATS) do
    local tol = dt == "float32" and 1e-5 or 1e-12
    for _, kind in ipairs(LAYOUTS) do
      for _, op in ipairs(OPS) do
        local a, va = input(distinct(12), shape, dt, kind)
        local bv = distinct(4)
        for i = 1, 4 do bv[i] = 1 + (bv[i] + 2) / 4 end   -- [1, 2): divisors and weights
        local b = make(bv, { 4 }, dt)
        local sv = distinct(12)
        local want = {}
        for i = 1, 12 do want[i] = op[4](sv[i], va[i], bv[(i - 1) % 4 + 1]) end
        local what = op[1] .. " " .. dt .. " " .. kind
        check(lt.no_grad(function() return op[2](make(sv, shape, dt), a, b) end), shape, dt,
          want, tol, what)
        local into = make(sv, shape, dt)
        assert.are.equal(into, lt.no_grad(function() return op[3](into, a, b) end))
        check(into, shape, dt, want, tol, what .. " in place")
      end
    end
  end
end)

case("where", "broadcast condition and operands, layouts, gradients", function()
  local shape = { 3, 4 }
  for _, dt in ipairs(FLOATS) do
    for _, kind in ipairs(LAYOUTS) do
      local a, va = input(distinct(12), shape, dt, kind)
      local cond = lt.tensor({ { true }, { false }, { true } })
      local b = make({ -1, -2, -3, -4 }, { 4 }, dt)
      local want = {}
      for i = 1, 12 do
        local row = (i - 1) // 4 + 1
        want[i] = row ~= 2 and va[i] or -((i - 1) % 4 + 1)
      end
      check(lt.where(cond, a, b), shape, dt, want, 0, "where " .. dt .. " " .. kind)
    end
  end
  local cond = lt.tensor({ { true, false, true, false }, { false, false, true, true },
                           { true, true, false, false } })
  local cv = values(cond)
  local bv = distinct(12)
  check_grad(function(x) return lt.where(cond, x, make(bv, { 3, 4 }, "float64")) end,
    function(x)
      local r = {}
      for i = 1, 12 do r[i] = cv[i] and x[i] or bv[i] end
      return r
    end, distinct(12), { 3, 4 }, "noncontig", "where a")
  check(lt.where(lt.zeros({ 0, 4 }, { dtype = "bool" }), lt.ones({ 0, 4 }), lt.zeros({ 4 })),
    { 0, 4 }, "float32", {}, 0, "where empty")
end)

-- binary_flat: the small-op path (dense float operands or one single element, n < 32768)
case("binary_flat", "small dense float operands and scalars", function()
  for _, dt in ipairs(FLOATS) do
    for _, op in ipairs({ table.unpack(BINOPS, 1, 4) }) do
      local av, bv = distinct(16), distinct(16)
      for i = 1, 16 do bv[i] = bv[i] + 3 end
      local a, b = make(av, { 16 }, dt), make(bv, { 16 }, dt)
      local va, vb = values(a), values(b)
      local want, wants = {}, {}
      for i = 1, 16 do
        want[i] = op[3](va[i], vb[i])
        wants[i] = op[3](va[i], vb[1])
      end
      check(op[2](a, b), { 16 }, dt, want, tol_of(dt), op[1] .. " " .. dt)
      check(op[2](a, lt.tensor(vb[1], { dtype = dt })), { 16 }, dt, wants, tol_of(dt),
        op[1] .. " scalar " .. dt)
      check_grad(function(x) return op[2](x, make(bv, { 16 }, "float64")) end, function(x)
        local r = {}
        for i = 1, #x do r[i] = op[3](x[i], bv[i]) end
        return r
      end, av, { 16 }, "contiguous", op[1] .. " flat")
    end
  end
  local s = lt.tensor(2.5) * lt.tensor(4.0)
  check(s, {}, "float32", { 10 }, 0, "0-d")
end)

local UNOPS = {
  { "exp", math.exp },
  { "tanh", function(v) return (math.exp(v) - math.exp(-v)) / (math.exp(v) + math.exp(-v)) end },
  { "sigmoid", function(v) return 1 / (1 + math.exp(-v)) end },
  { "neg", function(v) return -v end }, { "abs", math.abs },
}

-- unary: every layout and shape, float dtypes
case("unary", "exp tanh sigmoid neg abs over layouts and shapes", function()
  for _, dt in ipairs(FLOATS) do
    for _, shape in ipairs(SHAPES) do
      for _, kind in ipairs(LAYOUTS) do
        for _, op in ipairs(UNOPS) do
          local vals = distinct(math.max(numel(shape), 1))
          local t, v = input(vals, shape, dt, kind)
          local want = {}
          for i = 1, #v do want[i] = op[2](v[i]) end
          check(t[op[1]](t), shape, dt, want, tol_of(dt) * 10, op[1] .. " " .. kind)
          if dt == "float64" then
            check_grad(function(x) return x[op[1]](x) end, function(x)
              local r = {}
              for i = 1, #x do r[i] = op[2](x[i]) end
              return r
            end, vals, shape, kind, op[1] .. " " .. kind)
          end
        end
      end
    end
  end
end)

-- unary_pair: gelu's value and derivative in one pass (what a recorded gelu runs): both are
-- checked, the value against the erf form, the gradient against the analytic derivative (float32)
-- and central differences (float64)
local function erf_ref(x)   -- the Maclaurin series, ample for |x| < 2
  local term, s = x, x
  for n = 1, 60 do
    term = -term * x * x / n
    s = s + term / (2 * n + 1)
  end
  return 2 / math.sqrt(math.pi) * s
end
local function gelu_ref(v) return 0.5 * v * (1 + erf_ref(v / math.sqrt(2))) end
local function gelu_grad_ref(v)
  return 0.5 * (1 + erf_ref(v / math.sqrt(2))) + v * math.exp(-0.5 * v * v) / math.sqrt(2 * math.pi)
end
case("unary_pair", "gelu with its derivative, over layouts and shapes", function()
  for _, dt in ipairs(FLOATS) do
    for _, shape in ipairs(SHAPES) do
      for _, kind in ipairs(LAYOUTS) do
        local vals = distinct(math.max(numel(shape), 1))
        local t, v = input(vals, shape, dt, kind)
        local x = t:detach():requires_grad_()
        local y = x:gelu()
        assert.are.equal("GeluBackward0", y.grad_fn)
        local want, gwant = {}, {}
        for i = 1, #v do want[i], gwant[i] = gelu_ref(v[i]), gelu_grad_ref(v[i]) end
        check(y, shape, dt, want, tol_of(dt) * 10, "gelu " .. kind)
        if numel(shape) > 0 and kind ~= "broadcast" then
          y:sum():backward()
          check(x.grad, shape, dt, gwant, tol_of(dt) * 10, "gelu gradient " .. kind)
        end
        if dt == "float64" then
          check_grad(function(z) return z:gelu() end, function(z)
            local r = {}
            for i = 1, #z do r[i] = gelu_ref(z[i]) end
            return r
          end, vals, shape, kind, "gelu " .. kind)
        end
      end
    end
  end
end)

-- gemm: matmul of plain and transposed matrices
case("matmul", "matmul with transposed operands", function()
  for _, dt in ipairs(FLOATS) do
    for _, ta in ipairs({ false, true }) do
      for _, tb in ipairs({ false, true }) do
        local m, k, n = 3, 4, 5
        local av, bv = distinct(m * k), distinct(k * n)
        local a = ta and make(av, { m, k }, dt):t():contiguous():t() or make(av, { m, k }, dt)
        local b = tb and make(bv, { k, n }, dt):t():contiguous():t() or make(bv, { k, n }, dt)
        local va, vb = values(a), values(b)
        local function ref(x)
          local r = {}
          for i = 1, m do
            for j = 1, n do
              local s = 0
              for l = 1, k do s = s + x[(i - 1) * k + l] * vb[(l - 1) * n + j] end
              r[(i - 1) * n + j] = s
            end
          end
          return r
        end
        check(a:matmul(b), { m, n }, dt, ref(va), tol_of(dt) * 10, "matmul")
        if dt == "float64" then
          check_grad(function(x) return x:matmul(b) end, ref, av, { m, k },
            ta and "noncontig" or "contiguous", "matmul")
        end
      end
    end
  end
end)

-- addmm with a bias row (a Linear layer's bias): 1-D, 1 x n and strided biases, beta and alpha,
-- a transposed weight; gradients of every input
case("addmm_row", "addmm from a bias row, with beta, alpha and gradients", function()
  local m, k, n = 3, 4, 5
  local av, wv, bv = distinct(m * k), distinct(n * k), distinct(2 * n)
  for _, dt in ipairs(FLOATS) do
    local a, w = make(av, { m, k }, dt), make(wv, { n, k }, dt)
    local wide = make(bv, { n, 2 }, dt)
    for _, bias in ipairs({ wide:select(2, 1):contiguous(),
                            wide:select(2, 1):contiguous():reshape(1, n), wide:select(2, 2) }) do
      local biasv = values(bias)
      for _, ab in ipairs({ { 1, 1 }, { 0.5, -2 } }) do
        local beta, alpha = ab[1], ab[2]
        local function ref(x, y, z)
          local r = {}
          for i = 1, m do
            for j = 1, n do
              local acc = 0
              for l = 1, k do acc = acc + x[(i - 1) * k + l] * y[(j - 1) * k + l] end
              r[(i - 1) * n + j] = beta * z[j] + alpha * acc
            end
          end
          return r
        end
        local opts = { beta = beta, alpha = alpha }
        check(lt.addmm(bias, a, w:t(), opts), { m, n }, dt, ref(av, wv, biasv), tol_of(dt) * 10,
          "addmm bias row")
        if dt == "float64" then
          local bshape = bias.shape
          check_grad(function(x) return lt.addmm(bias, x, w:t(), opts) end,
            function(x) return ref(x, wv, biasv) end, av, { m, k }, "contiguous", "addmm input")
          check_grad(function(x) return lt.addmm(bias, a, x:t(), opts) end,
            function(x) return ref(av, x, biasv) end, wv, { n, k }, "noncontig", "addmm weight")
          check_grad(function(x) return lt.addmm(x, a, w:t(), opts) end,
            function(x) return ref(av, wv, x) end, biasv, bshape, "contiguous", "addmm bias")
        end
      end
    end
  end
end)

-- batched products: broadcast batch dims, vectors, and the gradient summed over a broadcast
-- batch; inputs whose layout the kernel cannot read (every other column) go through a copy
local function ref_bmm(av, bv, nb, m, k, n, bcast_b)
  local r = {}
  for s = 1, nb do
    for i = 1, m do
      for j = 1, n do
        local acc = 0
        for l = 1, k do
          local bo = bcast_b and 0 or (s - 1) * k * n
          acc = acc + av[(s - 1) * m * k + (i - 1) * k + l] * bv[bo + (l - 1) * n + j]
        end
        r[(s - 1) * m * n + (i - 1) * n + j] = acc
      end
    end
  end
  return r
end

case("matmul", "batched, broadcast and vector products with gradients", function()
  local nb, m, k, n = 2, 3, 4, 2
  local av, bv = distinct(nb * m * k), distinct(k * n)
  for _, dt in ipairs(FLOATS) do
    local a, b = make(av, { nb, m, k }, dt), make(bv, { k, n }, dt)
    check(a:matmul(b), { nb, m, n }, dt, ref_bmm(av, bv, nb, m, k, n, true), tol_of(dt) * 10,
      "broadcast batch")
    local v = make({ table.unpack(bv, 1, k) }, { k }, dt)
    local want = {}
    for i = 1, nb * m do
      local acc = 0
      for l = 1, k do acc = acc + av[(i - 1) * k + l] * bv[l] end
      want[i] = acc
    end
    check(a:matmul(v), { nb, m }, dt, want, tol_of(dt) * 10, "matrix-vector")
  end
  -- the weight gradient sums over the broadcast batch
  check_grad(function(x) return make(av, { nb, m, k }, "float64"):matmul(x) end,
    function(x) return ref_bmm(av, x, nb, m, k, n, true) end, bv, { k, n }, "contiguous",
    "broadcast weight")
  check_grad(function(x) return x:matmul(make(bv, { k, n }, "float64")) end,
    function(x) return ref_bmm(x, bv, nb, m, k, n, true) end, av, { nb, m, k }, "noncontig",
    "batched input")
end)

case("matmul_ready", "operands the kernel cannot read as laid out are copied first", function()
  local m, k, n = 3, 4, 2
  local av, bv = distinct(m * k), distinct(k * n)
  for _, dt in ipairs(FLOATS) do
    -- every other column of a wider matrix: neither row- nor column-major
    local wide = {}
    for i = 1, m * k do wide[2 * i - 1], wide[2 * i] = av[i], 0 end
    local a = make(wide, { m, k, 2 }, dt):select(3, 1)
    assert.are.same({ 2 * k, 2 }, a:stride())
    assert.are.same({ m, k }, a.shape)
    local b = make(bv, { k, n }, dt)
    check(a:matmul(b), { m, n }, dt, ref_bmm(av, bv, 1, m, k, n, true), tol_of(dt) * 10,
      "strided columns")
    check(b:t():matmul(a:t()), { n, m }, dt, values(a:matmul(b):t()), tol_of(dt) * 10,
      "transposed strided")
  end
end)

local DIMSETS = { {}, { 1 }, { -1 }, { 1, 3 }, { 2 } }

-- a 2-norm over a whole tensor: the backend's sum of squares where it has one (contiguous),
-- the squares summed otherwise; gradients in float64
case("sumsq", "norm of a whole tensor, every layout, keepdim, with its gradient", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, dt in ipairs(FLOATS) do
      local vals = distinct(24)
      local t, v = input(vals, shape, dt, kind)
      local acc = 0
      for _, x in ipairs(v) do acc = acc + x * x end
      check(t:norm(), {}, dt, { math.sqrt(acc) }, tol_of(dt) * 10, "norm " .. kind)
      check(t:norm(2, nil, true), { 1, 1, 1 }, dt, { math.sqrt(acc) }, tol_of(dt) * 10,
        "norm keepdim " .. kind)
      if dt == "float64" then
        check_grad(function(x) return x:norm() end, function(x)
          local a = 0
          for _, y in ipairs(x) do a = a + y * y end
          return { math.sqrt(a) }
        end, vals, shape, kind, "norm " .. kind)
      end
    end
  end
end)

-- reduce: every reduction, dims subset, keepdim, dtype, layout, empty and 0-d inputs
case("reduce", "sum mean prod amax amin all any over dims, layouts and dtypes", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, dims in ipairs(DIMSETS) do
      for _, keepdim in ipairs({ false, true }) do
        local function args() return #dims == 0 and {} or { dims, keepdim } end
        for _, dt in ipairs(FLOATS) do
          local vals = distinct(24)
          local t, v = input(vals, shape, dt, kind)
          for _, name in ipairs({ "sum", "mean", "prod", "amax", "amin" }) do
            local want, osh = ref_reduce(name, v, shape, dims, #dims > 0 and keepdim)
            check(t[name](t, table.unpack(args())), osh, dt, want, tol_of(dt) * 10,
              name .. " " .. kind)
            if dt == "float64" then
              check_grad(function(x) return x[name](x, table.unpack(args())) end,
                function(x) return (ref_reduce(name, x, shape, dims, #dims > 0 and keepdim)) end,
                vals, shape, kind, name .. " " .. kind)
            end
          end
        end
        local t, v = input(ints(24, -2, 2), shape, "int64", kind)
        for _, name in ipairs({ "sum", "prod", "amax", "amin" }) do
          local want, osh = ref_reduce(name, v, shape, dims, #dims > 0 and keepdim)
          check(t[name](t, table.unpack(args())), osh, "int64", want, 0, name .. " int64")
        end
        for _, name in ipairs({ "all", "any" }) do
          local want, osh = ref_reduce(name, v, shape, dims, #dims > 0 and keepdim)
          check(t[name](t, table.unpack(args())), osh, "bool", want, 0, name .. " int64")
        end
        local b, bvals = input(ints(24, 0, 1), shape, "int64", kind)
        local bt = b:ne(0)
        local want, osh = ref_reduce("sum", bvals, shape, dims, #dims > 0 and keepdim)
        check(bt:sum(table.unpack(args())), osh, "int64", want, 0, "sum bool")
      end
    end
  end
  -- empty and 0-d inputs, NaN and infinities
  check(lt.zeros({ 0, 3 }):sum(1), { 3 }, "float32", { 0, 0, 0 }, 0, "empty sum")
  check(lt.zeros({ 0, 3 }):prod(1), { 3 }, "float32", { 1, 1, 1 }, 0, "empty prod")
  check(lt.zeros({ 0, 3 }):all(), {}, "bool", { true }, 0, "empty all")
  check(lt.tensor(2.5):sum(), {}, "float32", { 2.5 }, 0, "0-d sum")
  check(lt.tensor(2.5):amax(), {}, "float32", { 2.5 }, 0, "0-d amax")
  local nan = lt.tensor({ 1, 0 / 0, 3, math.huge })
  check(nan:amax(), {}, "float32", { 0 / 0 }, 0, "amax nan")
  check(lt.tensor({ 1, -math.huge, 3 }):amin(), {}, "float32", { -math.huge }, 0, "amin -inf")
  -- long reductions: chunked partial sums, inner and column modes
  local big = lt.ones({ 40000, 2 }, { dtype = "float64" })
  check(big:sum(1), { 2 }, "float64", { 40000, 40000 }, 0, "column sum")
  check(big:t():sum(2), { 2 }, "float64", { 40000, 40000 }, 0, "inner sum")
  check_grad(function(x) return x:sum() end, function(x) return { x[1] } end, { 2.5 }, {},
    "contiguous", "0-d sum")
end)

-- prod_backward: gradients of products with no, one and two zeros in a row
case("prod_backward", "prod gradients with zeros, over dims and layouts", function()
  local shape = { 3, 4 }
  local rows = { { 1.5, -2, 0.5, 3 }, { 1.5, 0, 0.5, 3 }, { 0, 2, 0, 3 } }
  local vals = {}
  for _, r in ipairs(rows) do for _, v in ipairs(r) do vals[#vals + 1] = v end end
  for _, kind in ipairs({ "contiguous", "noncontig", "strided" }) do
    for _, dims in ipairs({ {}, { 2 }, { 1 } }) do
      check_grad(function(x) return #dims == 0 and x:prod() or x:prod(dims[1]) end,
        function(x) return (ref_reduce("prod", x, shape, dims, false)) end, vals, shape, kind,
        "prod " .. kind)
    end
  end
  for _, dt in ipairs(FLOATS) do
    local x = make(vals, shape, dt):requires_grad_()
    x:prod(2):sum():backward()
    check(x.grad, shape, dt, { -3, 2.25, -9, -1.5, 0, 2.25, 0, 0, 0, 0, 0, 0 }, 1e-6, "prod " .. dt)
  end
end)

-- has_nan: amax/max gradients split among the NaNs when the result is NaN
case("has_nan", "amax and max gradients with and without NaN", function()
  for _, dt in ipairs(FLOATS) do
    local x = lt.tensor({ { 1, 0 / 0, 3, 0 / 0 }, { 5, 2, 5, 1 } }, { dtype = dt }):requires_grad_()
    x:amax(2):sum():backward()
    check(x.grad, { 2, 4 }, dt, { 0, 0.5, 0, 0.5, 0.5, 0, 0.5, 0 }, 0, "amax nan " .. dt)
    local y = lt.tensor({ 4, 1, 4 }, { dtype = dt }):requires_grad_()
    y:max():backward()
    check(y.grad, { 3 }, dt, { 0.5, 0, 0.5 }, 0, "max ties " .. dt)
    local z = lt.tensor({ 1, 0 / 0 }, { dtype = dt }):requires_grad_()
    z:amin():backward()
    check(z.grad, { 2 }, dt, { 0, 1 }, 0, "amin nan " .. dt)
  end
end)

-- search_dim: max/min along a dim with indices, argmax/argmin along a dim
case("search_dim", "max/min/argmax/argmin along a dim: ties, NaN, layouts, gradients", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, dt in ipairs({ "float32", "float64", "int64" }) do
      local vals = dt == "int64" and ints(24, -2, 2) or distinct(24)
      if dt == "float64" then vals[7] = 0 / 0 end
      local t, v = input(vals, shape, dt, kind)
      for dim = 1, 3 do
        for _, keepdim in ipairs({ false, true }) do
          for _, is_max in ipairs({ true, false }) do
            local wv, wi, osh = ref_search(v, shape, dim, is_max, keepdim)
            local vals_t, idx_t = t[is_max and "max" or "min"](t, dim, keepdim)
            check(vals_t, osh, dt, wv, 0, "max values " .. kind)
            check(idx_t, osh, "int64", wi, 0, "max indices " .. kind)
            local a = t[is_max and "argmax" or "argmin"](t, dim, keepdim)
            check(a, osh, "int64", wi, 0, "argmax " .. kind)
          end
        end
      end
    end
    local vals = distinct(24)
    -- (a broadcast dim 1 holds ties, whose gradient goes to the first: checked by hand below)
    for dim = kind == "broadcast" and 2 or 1, 3 do
      for _, keepdim in ipairs({ false, true }) do
        check_grad(function(x) return (x:max(dim, keepdim)) end,
          function(x) return (ref_search(x, shape, dim, true, keepdim)) end, vals, shape, kind,
          "max(dim) " .. kind)
      end
    end
  end
  local s = lt.tensor(4.0)
  local v, i = s:max(1)
  check(v, {}, "float32", { 4 }, 0, "0-d max")
  check(i, {}, "int64", { 1 }, 0, "0-d max index")
  check_grad(function(x) return (x:max(1)) end, function(x) return { x[1] } end, { 4 }, {},
    "contiguous", "0-d max(dim)")
  check(lt.zeros({ 0, 3 }):argmax(2), { 0 }, "int64", {}, 0, "empty rows")
  check(lt.tensor({ { 1, 3, 3 } }):argmax(2), { 1 }, "int64", { 2 }, 0, "first tie wins")
  local x = lt.tensor({ { 1, 3, 3 } }, { dtype = "float64" }):requires_grad_()
  local mx = x:max(2)
  mx:sum():backward()
  check(x.grad, { 1, 3 }, "float64", { 0, 1, 0 }, 0, "a tie's gradient goes to the first")
end)

-- search_flat: argmax/argmin over all elements: layouts, ties, NaN, more than one chunk
case("search_flat", "argmax/argmin of all elements: layouts, ties, NaN, chunks", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, dt in ipairs({ "float32", "float64", "int64" }) do
      local vals = dt == "int64" and ints(24, -2, 2) or distinct(24)
      local t, v = input(vals, shape, dt, kind)
      check(t:argmax(), {}, "int64", { ref_flat_best(v, true) }, 0, "argmax " .. kind)
      check(t:argmin(), {}, "int64", { ref_flat_best(v, false) }, 0, "argmin " .. kind)
      check(t:argmax(nil, true), { 1, 1, 1 }, "int64", { ref_flat_best(v, true) }, 0,
        "argmax keepdim " .. kind)
    end
  end
  check(lt.tensor({ 1, 0 / 0, 5, 0 / 0 }):argmax(), {}, "int64", { 2 }, 0, "nan wins")
  check(lt.tensor(7.0):argmin(), {}, "int64", { 1 }, 0, "0-d")
  -- 3 chunks of 32768: the best element in the last, a tie in the first and the last
  local n = 70000
  local big = lt.zeros({ n }, { dtype = "float64" })
  big[5] = 9
  big[69000] = 9
  big[40000] = -9
  check(big:argmax(), {}, "int64", { 5 }, 0, "first of a tie across chunks")
  check(big:argmin(), {}, "int64", { 40000 }, 0, "min in a middle chunk")
  big[50000] = 0 / 0
  check(big:argmax(), {}, "int64", { 50000 }, 0, "NaN in a later chunk")
end)

-- softmax and softmax_backward: every dim, layouts, the row, column and vector paths (float32
-- rows of 16 or more, float32 with the dim not innermost)
local SOFT_SHAPES = { {}, { 5 }, { 2, 3, 5 }, { 2, 17 }, { 0, 4 } }
local function each_softmax(fn)
  for _, shape in ipairs(SOFT_SHAPES) do
    for dim = 1, math.max(#shape, 1) do
      for _, log in ipairs({ false, true }) do
        for _, kind in ipairs(LAYOUTS) do
          fn(shape, dim, #shape == 0 and -1 or dim, log, log and "log_softmax" or "softmax", kind)
        end
      end
    end
  end
end

case("softmax", "softmax/log_softmax along every dim and layout", function()
  each_softmax(function(shape, dim, d, log, name, kind)
    local vals = distinct(math.max(numel(shape), 1))
    for _, dt in ipairs(FLOATS) do
      local t, v = input(vals, shape, dt, kind)
      check(t[name](t, d), shape, dt, ref_softmax(v, shape, dim, log), tol_of(dt) * 10,
        name .. " " .. kind)
    end
  end)
  local big = lt.tensor({ { -math.huge, 0, 1000 } })
  check(big:softmax(2), { 1, 3 }, "float32", { 0, 0, 1 }, 0, "infinities")
end)

case("softmax_backward", "their gradients, float32 and float64", function()
  each_softmax(function(shape, dim, d, log, name, kind)
    local vals = distinct(math.max(numel(shape), 1))
    local function ref(z) return ref_softmax(z, shape, dim, log) end
    check_grad(function(x) return x[name](x, d) end, ref, vals, shape, kind, name .. " " .. kind)
    -- float32 gradients, which take the vectorised paths, against the float64 reference
    if numel(shape) > 0 then
      local x = layout(vals, shape, "float32", kind):detach():requires_grad_()
      local w = distinct(numel(shape))
      x[name](x, d):mul(make(w, shape, "float32")):sum():backward()
      check(x.grad, shape, "float32", numgrad(ref, values(x), w), 1e-4, name .. " f32 gradient")
    end
  end)
end)

-- cumsum: every dim, layouts, dtypes (integers and bools give int64), gradients
case("cumsum", "cumsum along every dim, layouts, dtypes, gradients", function()
  for _, shape in ipairs({ {}, { 5 }, { 2, 3, 4 }, { 0, 3 } }) do
    for dim = 1, math.max(#shape, 1) do
      local d = #shape == 0 and -1 or dim
      for _, kind in ipairs(LAYOUTS) do
        for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
          local n = math.max(numel(shape), 1)
          local vals = (dt == "float32" or dt == "float64") and distinct(n)
            or ints(n, 0, dt == "bool" and 1 or 5)
          local t, v
          if dt == "bool" then
            t, v = input(vals, shape, "int64", kind)
            t = t:ne(0)
            v = values(t)
          else
            t, v = input(vals, shape, dt, kind)
          end
          local odt = dt == "bool" and "int64" or dt
          check(t:cumsum(d), shape, odt, ref_cumsum(v, shape, dim), tol_of(odt) * 10,
            "cumsum " .. dt .. " " .. kind)
        end
        check_grad(function(x) return x:cumsum(d) end,
          function(x) return ref_cumsum(x, shape, dim) end, distinct(math.max(numel(shape), 1)),
          shape, kind, "cumsum " .. kind)
      end
    end
  end
end)

-- sort: sort, argsort and topk along a dim
case("sort", "sort/argsort/topk along every dim: ties, NaN, layouts, dtypes, gradients", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, dt in ipairs({ "float32", "float64", "int64" }) do
      local vals = dt == "int64" and ints(24, -2, 2) or distinct(24)
      if dt == "float64" then vals[7], vals[9], vals[20] = 0 / 0, vals[8], vals[8] end
      local t, v = input(vals, shape, dt, kind)
      for dim = 1, 3 do
        for _, desc in ipairs({ false, true }) do
          local wv, wi, osh = ref_sort(v, shape, dim, desc)
          local sv, si = t:sort(dim, desc)
          check(sv, osh, dt, wv, 0, "sort values " .. kind)
          check(si, osh, "int64", wi, 0, "sort indices " .. kind)
          check(t:argsort(dim, desc), osh, "int64", wi, 0, "argsort " .. kind)
          wv, wi, osh = ref_sort(v, shape, dim, desc, 2)
          local kv, ki = t:topk(2, dim, desc)
          check(kv, osh, dt, wv, 0, "topk values " .. kind)
          check(ki, osh, "int64", wi, 0, "topk indices " .. kind)
        end
      end
    end
    for dim = kind == "broadcast" and 2 or 1, 3 do   -- (broadcast dim 1: ties, checked above)
      check_grad(function(x) return (x:sort(dim, true)) end,
        function(x) return (ref_sort(x, shape, dim, true)) end, distinct(24), shape, kind,
        "sort " .. kind)
      check_grad(function(x) return (x:topk(2, dim, false)) end,
        function(x) return (ref_sort(x, shape, dim, false, 2)) end, distinct(24), shape, kind,
        "topk " .. kind)
    end
  end
  local s, si = lt.tensor(4.0):sort()
  check(s, {}, "float32", { 4 }, 0, "0-d sort")
  check(si, {}, "int64", { 1 }, 0, "0-d sort index")
  check(lt.zeros({ 0, 3 }):argsort(2), { 0, 3 }, "int64", {}, 0, "empty rows")
  local b = lt.tensor({ { 1, 0, 1, 0 } }):ne(0)
  check(b:argsort(2), { 1, 4 }, "int64", { 2, 4, 1, 3 }, 0, "bool: stable")
end)

-- searchsorted: positions in sorted rows, both sides, layouts, a shared 1-d sequence
-- unique_few: unique of long inputs with few distinct values (hashed where a device can,
-- sorted where it cannot), values in order with NaN last and -0 as +0, inverse and counts
case("unique_few", "unique of 2048 values of a few kinds: values, inverse, counts, dtypes",
  function()
  local n = 2048
  local kinds = ints(n, 0, 9)
  for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
    local list = {}
    for i = 1, n do
      local k = kinds[i]
      if dt == "bool" then
        list[i] = k % 2 == 1
      elseif dt == "int64" then
        list[i] = (k - 5) * 2 ^ 33
      else
        list[i] = k == 9 and 0 / 0 or k == 8 and -0.0 or k == 0 and 0.0 or (k - 4) / 2
      end
    end
    -- the reference: distinct values in order (by their rank as numbers; NaN last, zeros one)
    local function rank(v)
      if dt == "bool" then return v and 1 or 0 end
      if v ~= v then return math.huge end
      return v
    end
    local seen, distinct = {}, {}
    for i = 1, n do
      local r = rank(list[i])
      if not seen[r] then
        seen[r] = { value = list[i], count = 0 }
        distinct[#distinct + 1] = r
      end
      seen[r].count = seen[r].count + 1
    end
    table.sort(distinct)
    local place, want_v, want_c, want_i = {}, {}, {}, {}
    for p, r in ipairs(distinct) do
      place[r] = p
      want_v[p] = seen[r].value
      want_c[p] = seen[r].count
    end
    for i = 1, n do want_i[i] = place[rank(list[i])] end
    local t = make(list, { n }, dt)
    local v, inv, c = t:unique({ return_inverse = true, return_counts = true })
    check(v, { #distinct }, dt, want_v, 0, "unique values " .. dt)
    check(inv, { n }, "int64", want_i, 0, "unique inverse " .. dt)
    check(c, { #distinct }, "int64", want_c, 0, "unique counts " .. dt)
  end
end)

case("searchsorted", "searchsorted/bucketize: both sides, ties, layouts, dtypes", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    for _, dt in ipairs({ "float32", "float64", "int64" }) do
      local t, v = input(ints(24, -3, 3), shape, dt, kind)
      local seq = t:sort(3)
      local sv = values(seq)
      local probe = lt.tensor({ -4, -3, 0, 1, 3, 4 }, { dtype = dt }):expand(2, 3, 6)
      for _, right in ipairs({ false, true }) do
        local want = {}
        each({ 2, 3, 6 }, function(idx, q)
          local pv = ({ -4, -3, 0, 1, 3, 4 })[idx[3]]
          local r = 1
          for i = 1, 4 do
            local e = sv[flat_pos(shape, { idx[1], idx[2], i })]
            if e < pv or (right and e == pv) then r = i + 1 end
          end
          want[q] = r
        end)
        check(lt.searchsorted(seq, probe, { right = right }), { 2, 3, 6 }, "int64", want, 0,
          "searchsorted " .. dt .. " " .. kind)
      end
      local b = lt.tensor({ -1, 0, 2 }, { dtype = dt })
      local bw = {}
      for q, x in ipairs(v) do bw[q] = x <= -1 and 1 or x <= 0 and 2 or x <= 2 and 3 or 4 end
      check(lt.bucketize(t, b), shape, "int64", bw, 0, "bucketize " .. dt .. " " .. kind)
    end
  end
end)
