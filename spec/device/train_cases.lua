-- Cases for the training kernels: dropout, the class-index losses (class_loss and its
-- backward), the random fills (uniform, normal, randint, bernoulli, randperm), the deterministic
-- ones (arange, arange_int, linspace; eye through fill) and the fused optimiser steps. The random fills are checked against a plain-Lua xoshiro256** generator
-- seeded as Lantern's (splitmix64), value by value and state word by state word, and for their
-- distribution; each optimiser step against its formula in Lua.
local assert = require "luassert"   -- a required file does not see busted's assert
local D = require "device.support"
local F = require "lantern.nn.functional"
local core = require "lantern.core"
local lt, numel, values, each = D.lt, D.numel, D.values, D.each
local check, close_list, distinct, ints, make = D.check, D.close_list, D.distinct, D.ints,
  D.make
local layout, LAYOUTS, input, check_grad = D.layout, D.LAYOUTS, D.input, D.check_grad
local case, FLOATS, tol_of = D.case, D.FLOATS, D.tol_of

local function expect_error(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.matches(pattern, tostring(err))
end

-- ------------------------------------------------------------ reference generator
-- xoshiro256** over Lua's wrapping 64-bit integers (>> is a logical shift), seeded through
-- splitmix64 as lt.Generator(seed) is.

local function rotl(x, k) return (x << k) | (x >> (64 - k)) end

local function ref_gen(seed)
  local s, x = {}, seed
  for i = 1, 4 do
    x = x + 0x9e3779b97f4a7c15
    local z = x
    z = (z ~ (z >> 30)) * 0xbf58476d1ce4e5b9
    z = (z ~ (z >> 27)) * 0x94d049bb133111eb
    s[i] = z ~ (z >> 31)
  end
  return { s = s, seed = seed }
end

local function next_u64(g)
  local s = g.s
  local r = rotl(s[2] * 5, 7) * 9
  local t = s[2] << 17
  s[3] = s[3] ~ s[1]
  s[4] = s[4] ~ s[2]
  s[2] = s[2] ~ s[3]
  s[1] = s[1] ~ s[4]
  s[3] = s[3] ~ t
  s[4] = rotl(s[4], 45)
  return r
end

local function next_double(g) return (next_u64(g) >> 11) * 2.0 ^ -53 end

-- unsigned a mod n for 0 < n < 2^62
local function umod(a, n) return ((a >> 1) % n * 2 + (a & 1)) % n end

local function next_below(g, n)
  local limit = -1 - umod(-1, n)   -- UINT64_MAX - UINT64_MAX % n
  local r
  repeat r = next_u64(g) until math.ult(r, limit)
  return umod(r, n)
end

-- n standard normal samples, Box-Muller over pairs as Lantern draws them
local function normals(g, n)
  local out = {}
  for i = 1, n, 2 do
    local u1 = 1.0 - next_double(g)
    local u2 = next_double(g)
    local r = math.sqrt(-2.0 * math.log(u1))
    out[i] = r * math.cos(2.0 * math.pi * u2)
    if i + 1 <= n then out[i + 1] = r * math.sin(2.0 * math.pi * u2) end
  end
  return out
end

-- the generator's five state words agree with the reference's
local function same_state(gen, ref, what)
  local w = gen:get_state():tolist()
  assert.are.same({ ref.s[1], ref.s[2], ref.s[3], ref.s[4], ref.seed }, w, what .. ": state")
end

local function mean_var(v)
  local s, ss = 0, 0
  for _, e in ipairs(v) do s = s + e end
  local m = s / #v
  for _, e in ipairs(v) do ss = ss + (e - m) ^ 2 end
  return m, ss / (#v - 1)
end

-- a tensor of shape {rows, cols} that is a transposed (non-contiguous) view, for fills that
-- must go in logical order whatever the strides
local function transposed(rows, cols, dt)
  return lt.zeros({ cols, rows }, { dtype = dt }):t()
end

-- ------------------------------------------------------------ random fills

case("uniform", "values, logical order and state of a seeded fill; range and moments", function()
  for _, dt in ipairs(FLOATS) do
    for _, target in ipairs({ "contiguous", "transposed" }) do
      local g, ref = lt.Generator(42), ref_gen(42)
      local t = target == "contiguous" and lt.empty({ 3, 5 }, { dtype = dt }) or
        transposed(3, 5, dt)
      t:uniform_(-2, 3, { generator = g })
      local want = {}
      for i = 1, 15 do want[i] = -2 + 5 * next_double(ref) end
      check(t, { 3, 5 }, dt, want, dt == "float32" and 1e-7 or 0, "uniform_ " .. target)
      same_state(g, ref, "uniform_ " .. target)
    end
  end
  -- the default generator is seeded the same way
  lt.manual_seed(7)
  local ref = ref_gen(7)
  local want = {}
  for i = 1, 6 do want[i] = next_double(ref) end
  check(lt.rand({ 6 }, { dtype = "float64" }), { 6 }, "float64", want, 0, "rand after seed")
  -- the same seed, the same values; the state advances one draw per element
  local a = lt.rand({ 1000 }, { generator = lt.Generator(3) })
  local b = lt.rand({ 1000 }, { generator = lt.Generator(3) })
  assert.are.same(values(a), values(b))
  local v = values(lt.rand({ 20000 }, { dtype = "float64", generator = lt.Generator(11) }))
  local lo, hi = math.huge, -math.huge
  for _, e in ipairs(v) do lo, hi = math.min(lo, e), math.max(hi, e) end
  assert.is_true(lo >= 0 and hi < 1, "in [0, 1)")
  local m, var = mean_var(v)
  assert.is_true(math.abs(m - 0.5) < 0.01 and math.abs(var - 1 / 12) < 0.003, "moments")
  check(lt.empty({ 0, 4 }):uniform_(), { 0, 4 }, "float32", {}, 0, "empty")
  check(lt.tensor(0.0):uniform_(5, 5), {}, "float32", { 5 }, 0, "0-d, from == to")
  expect_error("uniform_: expects from <= to", function() lt.empty({ 2 }):uniform_(2, 1) end)
end)

case("normal", "values and state of a seeded fill, odd sizes, moments", function()
  for _, dt in ipairs(FLOATS) do
    for _, n in ipairs({ 7, 300, 513 }) do   -- odd counts and counts past a draw chunk
      local g, ref = lt.Generator(1234), ref_gen(1234)
      local t = lt.empty({ n }, { dtype = dt }):normal_(1.5, 0.5, { generator = g })
      local z = normals(ref, n)
      local want = {}
      for i = 1, n do want[i] = 1.5 + 0.5 * z[i] end
      check(t, { n }, dt, want, dt == "float32" and 1e-7 or 1e-15, "normal_ " .. n)
      same_state(g, ref, "normal_ " .. n)
    end
  end
  local g, ref = lt.Generator(9), ref_gen(9)
  local t = transposed(4, 3, "float64"):normal_(0, 1, { generator = g })
  check(t, { 4, 3 }, "float64", normals(ref, 12), 1e-15, "normal_ transposed")
  local v = values(lt.randn({ 20000 }, { dtype = "float64", generator = lt.Generator(5) }))
  local m, var = mean_var(v)
  assert.is_true(math.abs(m) < 0.03 and math.abs(var - 1) < 0.05, "moments")
  check(lt.tensor(0.0):normal_(3, 0), {}, "float32", { 3 }, 0, "std 0")
  expect_error("normal_: expects std >= 0.0", function() lt.empty({ 2 }):normal_(0, -1) end)
end)

case("randint", "values, bounds and state over dtypes; spread over the range", function()
  for _, dt in ipairs({ "int64", "float32", "float64" }) do
    local g, ref = lt.Generator(77), ref_gen(77)
    local t = transposed(3, 4, dt):random_(-3, 9, { generator = g })
    local want = {}
    for i = 1, 12 do want[i] = -3 + next_below(ref, 12) end
    check(t, { 3, 4 }, dt, want, 0, "random_ " .. dt)
    same_state(g, ref, "random_ " .. dt)
  end
  local g, ref = lt.Generator(8), ref_gen(8)
  local want = {}
  for i = 1, 5 do want[i] = next_below(ref, 1000003) end
  check(lt.randint(0, 1000003, { 5 }, { generator = g }), { 5 }, "int64", want, 0, "large span")
  local seen, v = {}, values(lt.randint(0, 6, { 6000 }, { generator = lt.Generator(2) }))
  for _, e in ipairs(v) do seen[e] = (seen[e] or 0) + 1 end
  for k = 0, 5 do assert.is_true(seen[k] > 850 and seen[k] < 1150, "face " .. k) end
  assert.are.same(6, #(function() local r = {} for k in pairs(seen) do r[#r + 1] = k end return r end)())
  check(lt.zeros({ 0 }, { dtype = "int64" }):random_(0, 3), { 0 }, "int64", {}, 0, "empty")
end)

case("bernoulli", "values and state of a seeded fill; p = 0, 1 and the frequency", function()
  for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
    local g, ref = lt.Generator(31), ref_gen(31)
    local t = transposed(5, 4, dt):bernoulli_(0.3, { generator = g })
    local want = {}
    for i = 1, 20 do
      local b = next_double(ref) < 0.3
      if dt == "bool" then want[i] = b else want[i] = b and 1 or 0 end
    end
    check(t, { 5, 4 }, dt, want, 0, "bernoulli_ " .. dt)
    same_state(g, ref, "bernoulli_ " .. dt)
  end
  local ones = values(lt.empty({ 50 }):bernoulli_(1))
  local zeros = values(lt.empty({ 50 }):bernoulli_(0))
  for i = 1, 50 do assert.is_true(ones[i] == 1 and zeros[i] == 0) end
  local v = values(lt.empty({ 20000 }):bernoulli_(0.25, { generator = lt.Generator(4) }))
  local m = mean_var(v)
  assert.is_true(math.abs(m - 0.25) < 0.015, "frequency")
  expect_error("bernoulli_: expects p to be in %[0, 1%]", function()
    lt.empty({ 2 }):bernoulli_(1.5)
  end)
end)

case("randperm", "Fisher-Yates order and state; every position once", function()
  for _, n in ipairs({ 0, 1, 2, 10, 257 }) do
    local g, ref = lt.Generator(19), ref_gen(19)
    local p = {}
    for i = 1, n do p[i] = i - 1 end
    for i = n - 1, 1, -1 do
      local j = next_below(ref, i + 1)
      p[i + 1], p[j + 1] = p[j + 1], p[i + 1]
    end
    for i = 1, n do p[i] = p[i] + 1 end   -- the Lua API counts positions from 1
    check(lt.randperm(n, { generator = g }), { n }, "int64", p, 0, "randperm " .. n)
    same_state(g, ref, "randperm " .. n)
  end
  local v = values(lt.randperm(500, { generator = lt.Generator(6) }))
  table.sort(v)
  for i = 1, 500 do assert.are.equal(i, v[i]) end
  expect_error("randperm: n must be non%-negative", lt.randperm, -1)
end)

-- ------------------------------------------------------------ deterministic fills

case("arange", "float and integer dtypes, fractional and negative steps, empty ranges", function()
  for _, dt in ipairs({ "float32", "float64", "int64" }) do
    for _, r in ipairs({ { 0, 5, 1 }, { 2.5, -1, -0.75 }, { -3, 7, 2.5 }, { 0.5, 5, 1.5 },
      { 1e15, 1e15 + 7, 3 }, { 4, 4, 1 } }) do
      local n = math.max(0, math.ceil((r[2] - r[1]) / r[3]))
      local want = {}
      for i = 0, n - 1 do
        local v = r[1] + r[3] * i
        if dt == "int64" then
          v = (r[1] == math.floor(r[1]) and r[3] == math.floor(r[3])) and
            math.tointeger(r[1]) + math.tointeger(r[3]) * i or (v < 0 and math.ceil(v) or math.floor(v))
        end
        want[#want + 1] = v
      end
      local t = lt.arange(r[1] + 0.0, r[2] + 0.0, r[3] + 0.0, { dtype = dt })
      check(t, { n }, dt, want, dt == "float32" and 1e-7 or 0,
        ("arange %s %s"):format(dt, table.concat(r, ",")))
    end
  end
  expect_error("arange: step must be nonzero", lt.arange, 0, 1, 0)
end)

case("arange_int", "exact int64 ranges beyond 2^53, negative steps", function()
  local big = (1 << 62) + 1
  check(lt.arange(big, big + 10, 3), { 4 }, "int64", { big, big + 3, big + 6, big + 9 }, 0,
    "beyond 2^53")
  check(lt.arange(5, -4, -2), { 5 }, "int64", { 5, 3, 1, -1, -3 }, 0, "negative step")
  check(lt.arange(6), { 6 }, "int64", { 0, 1, 2, 3, 4, 5 }, 0, "arange(n)")
  check(lt.arange(3, 3), { 0 }, "int64", {}, 0, "empty")
end)

case("linspace", "both ends exact, float and int64 dtypes, one and no steps", function()
  for _, dt in ipairs(FLOATS) do
    for _, r in ipairs({ { 0, 1, 5 }, { -2, 3, 8 }, { 10, -10, 21 }, { 1, 2, 2 } }) do
      local want = {}
      local st = (r[2] - r[1]) / (r[3] - 1)
      for i = 0, r[3] - 1 do want[i + 1] = i < r[3] // 2 and r[1] + st * i or r[2] - st * (r[3] - 1 - i) end
      local t = lt.linspace(r[1], r[2], r[3], { dtype = dt })
      check(t, { r[3] }, dt, want, dt == "float32" and 1e-6 or 1e-15, "linspace " .. dt)
      local v = values(t)
      assert.are.equal(r[1], v[1])
      assert.are.equal(r[2], v[#v])
    end
  end
  check(lt.linspace(-3.7, 8.2, 5, { dtype = "int64" }), { 5 }, "int64", { -3, 0, 2, 5, 8 }, 0,
    "int64 truncates the ends first")
  check(lt.linspace(2.5, 9, 1, { dtype = "float64" }), { 1 }, "float64", { 2.5 }, 0, "one step")
  check(lt.linspace(0, 1, 0), { 0 }, "float32", {}, 0, "no steps")
end)

case("fill", "eye: the diagonal of a zero matrix, over dtypes and shapes", function()
  for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
    for _, nm in ipairs({ { 3, 3 }, { 2, 4 }, { 4, 2 }, { 0, 3 }, { 1, 1 } }) do
      local want = {}
      for i = 1, nm[1] do
        for j = 1, nm[2] do
          local v = i == j and 1 or 0
          if dt == "bool" then v = v == 1 end
          want[#want + 1] = v
        end
      end
      check(lt.eye(nm[1], nm[2], { dtype = dt }), nm, dt, want, 0, "eye " .. dt)
    end
  end
end)

-- ------------------------------------------------------------ dropout

-- the mask a dropout with probability p draws from the reference generator
local function ref_mask(ref, n, p)
  local keep, m = 1 - p, {}
  for i = 1, n do m[i] = next_double(ref) < keep and (p < 1 and 1 / keep or 0) or 0 end
  return m
end

case("dropout", "mask from the generator in logical order, scaling, p = 1, eval; backward",
  function()
    local shape = { 3, 4 }
    for _, dt in ipairs(FLOATS) do
      for _, kind in ipairs(LAYOUTS) do
        local x, xv = input(distinct(12), shape, dt, kind)
        local g, ref = lt.Generator(23), ref_gen(23)
        local y = F.dropout(x, 0.4, true, { generator = g })
        local m = ref_mask(ref, 12, 0.4)
        local want = {}
        for i = 1, 12 do want[i] = xv[i] * m[i] end
        check(y, shape, dt, want, tol_of(dt), "dropout " .. dt .. " " .. kind)
        same_state(g, ref, "dropout " .. kind)
      end
    end
    local x = make(distinct(6), { 6 }, "float64")
    check(F.dropout(x, 1, true), { 6 }, "float64", { 0, 0, 0, 0, 0, 0 }, 0, "p = 1")
    assert.are.equal(x, F.dropout(x, 0.5, false), "eval returns the input")
    assert.are.equal(x, F.dropout(x, 0, true), "p = 0 returns the input")
    check(F.dropout(lt.zeros({ 0, 3 }), 0.5, true), { 0, 3 }, "float32", {}, 0, "empty")
    -- the gradient is the mask
    for _, kind in ipairs(LAYOUTS) do
      local m = ref_mask(ref_gen(5), 12, 0.3)
      check_grad(function(a) return F.dropout(a, 0.3, true, { generator = lt.Generator(5) }) end,
        function(a)
          local r = {}
          for i = 1, #a do r[i] = a[i] * m[i] end
          return r
        end, distinct(12), shape, kind, "dropout " .. kind)
    end
    expect_error("dropout: expected a float32 or float64 input", F.dropout,
      lt.ones({ 2 }, { dtype = "int64" }), 0.5, true)
  end)

-- ------------------------------------------------------------ class-index losses

-- loss of x (flat, shape (C), (N, C) or (N, C, d...)) for 1-based targets t (flat), options o:
-- weight (list), ignore (value), reduction, ls, logits
local function ref_loss(x, shape, t, o)
  local C = #shape == 1 and shape[1] or shape[2]
  local N = #shape == 1 and 1 or shape[1]
  local S = 1
  for d = 3, #shape do S = S * shape[d] end
  local w = o.weight or {}
  local function wt(c) return o.weight and w[c] or 1 end
  local rows, sum_nll, sum_sm, sum_w, kept = {}, 0, 0, 0, 0
  for n = 1, N do
    for s = 1, S do
      local i = (n - 1) * S + s
      local function xv(c) return x[(n - 1) * C * S + (c - 1) * S + s] end
      local lse = 0
      if o.logits then
        local m = -math.huge
        for c = 1, C do m = math.max(m, xv(c)) end
        local e = 0
        for c = 1, C do e = e + math.exp(xv(c) - m) end
        lse = m + math.log(e)
      end
      local nll, sm = 0, 0
      if t[i] ~= o.ignore then
        nll = wt(t[i]) * (lse - xv(t[i]))
        if o.logits and o.ls > 0 then
          for c = 1, C do sm = sm + wt(c) * (lse - xv(c)) end
        end
        sum_w, kept = sum_w + wt(t[i]), kept + 1
      end
      rows[i] = (1 - o.ls) * nll + o.ls / C * sm
      sum_nll, sum_sm = sum_nll + nll, sum_sm + sm
    end
  end
  if o.reduction == "none" then return rows end
  if o.reduction == "sum" then return { (1 - o.ls) * sum_nll + o.ls / C * sum_sm } end
  local v = (1 - o.ls) * sum_nll / sum_w
  if o.ls > 0 then v = v + o.ls / C * sum_sm / (o.weight and sum_w or kept) end
  return { v }
end

-- the input shapes and target counts the losses take
local LOSS_SHAPES = { { { 5 }, {} }, { { 4, 5 }, { 4 } }, { { 2, 5, 3 }, { 2, 3 } } }

local function loss_configs()
  local cfgs = {}
  for _, logits in ipairs({ true, false }) do
    for _, reduction in ipairs({ "none", "mean", "sum" }) do
      for _, weighted in ipairs({ false, true }) do
        for _, ls in ipairs(logits and { 0, 0.2 } or { 0 }) do
          cfgs[#cfgs + 1] = { logits = logits, reduction = reduction, weighted = weighted,
            ls = ls }
        end
      end
    end
  end
  return cfgs
end

local function run_loss(x, target, cfg, weight)
  local opts = { reduction = cfg.reduction, weight = weight, ignore_index = cfg.ignore }
  if cfg.logits then
    opts.label_smoothing = cfg.ls
    return F.cross_entropy(x, target, opts)
  end
  return F.nll_loss(x, target, opts)
end

local function targets(tshape, C, ignore)
  local t = ints(math.max(numel(tshape), 1), 1, C)
  if ignore and #t > 1 then t[2] = ignore end
  return t
end

case("class_loss", "cross_entropy and nll_loss: shapes, reductions, weights, smoothing, ignore",
  function()
    for _, dt in ipairs(FLOATS) do
      for _, sh in ipairs(LOSS_SHAPES) do
        local shape, tshape = sh[1], sh[2]
        local C = #shape == 1 and shape[1] or shape[2]
        for _, cfg in ipairs(loss_configs()) do
          for _, kind in ipairs({ "contiguous", "noncontig" }) do
            cfg.ignore = #tshape > 0 and 3 or nil
            local x, xv = input(distinct(numel(shape)), shape, dt, kind)
            local tv = targets(tshape, C, cfg.ignore)
            local target = make(tv, tshape, "int64")
            local wv = cfg.weighted and distinct(C) or nil
            if wv then for c = 1, C do wv[c] = math.abs(wv[c]) + 0.5 end end
            local weight = wv and make(wv, { C }, dt) or nil
            local wlist = weight and values(weight) or nil
            local want = ref_loss(xv, shape, tv, { weight = wlist, ignore = cfg.ignore or -100,
              reduction = cfg.reduction, ls = cfg.ls, logits = cfg.logits })
            local oshape = cfg.reduction == "none" and tshape or {}
            check(run_loss(x, target, cfg, weight), oshape, dt, want, tol_of(dt) * 10,
              ("%s %s %s w=%s ls=%g %s %s"):format(cfg.logits and "cross_entropy" or "nll_loss",
                cfg.reduction, table.concat(shape, "x"), tostring(cfg.weighted), cfg.ls, dt, kind))
          end
        end
      end
    end
    -- NaN logits give NaN losses; a -inf logit is a class of probability 0
    local x = lt.tensor({ { 0 / 0, 1.0, 2.0 }, { -math.huge, 0.0, 0.0 } }, { dtype = "float64" })
    local l = F.cross_entropy(x, lt.tensor({ 2, 2 }, { dtype = "int64" }), { reduction = "none" })
    check(l, { 2 }, "float64", { 0 / 0, math.log(2) }, 1e-12, "NaN and -inf logits")
    -- every target ignored: the mean over no kept target is 0/0
    local none = F.cross_entropy(lt.zeros({ 1, 3 }), lt.tensor({ 1 }, { dtype = "int64" }),
      { ignore_index = 1 })
    assert.is_true(D.is_nan(values(none)[1]), "mean over no kept target is NaN")
    check(F.cross_entropy(lt.zeros({ 0, 3 }), lt.zeros({ 0 }, { dtype = "int64" }),
      { reduction = "sum" }), {}, "float32", { 0 }, 0, "empty batch")
  end)

-- ------------------------------------------------------------ regression losses

-- the loss of input x against target t per element, as F's formulas (d = x - t)
local REGRESSION = {
  { name = "mse_loss", f = function(x, t) return (x - t) * (x - t) end },
  { name = "l1_loss", f = function(x, t) return math.abs(x - t) end },
  { name = "smooth_l1_loss", p = "beta", v = 0.5, f = function(x, t, b)
    local d = x - t
    local a = math.abs(d)
    return a < b and 0.5 * d * d / b or a - 0.5 * b
  end },
  { name = "huber_loss", p = "delta", v = 0.7, f = function(x, t, b)
    local d = x - t
    local a = math.abs(d)
    return a < b and 0.5 * d * d or b * (a - 0.5 * b)
  end },
  { name = "binary_cross_entropy_with_logits", f = function(x, t)
    return (1 - t) * x + math.log(1 + math.exp(-math.abs(x))) + math.max(-x, 0)
  end },
}

local function ref_regression(k, xv, tv, reduction)
  local out, s = {}, 0
  for i = 1, #xv do
    out[i] = k.f(xv[i], tv[i], k.v)
    s = s + out[i]
  end
  if reduction == "none" then return out end
  if reduction == "sum" then return { s } end
  return { #xv > 0 and s / #xv or 0 / 0 }
end

local function run_regression(k, x, t, reduction)
  local o = { reduction = reduction }
  if k.p then o[k.p] = k.v end
  return F[k.name](x, t, o)
end

case("regression_loss", "mse, l1, smooth_l1, huber, bce of logits: shapes, layouts, reductions, chunks",
  function()
    for _, dt in ipairs(FLOATS) do
      for _, shape in ipairs({ {}, { 5 }, { 3, 4 }, { 2, 3, 4 }, { 0, 3 }, { 40000 } }) do
        for _, kind in ipairs(numel(shape) > 100 and { "contiguous" } or { "contiguous", "noncontig" }) do
          local x, xv = input(distinct(numel(shape)), shape, dt, kind)
          local t, tv = input(distinct(numel(shape)), shape, dt, "contiguous")
          for _, k in ipairs(REGRESSION) do
            for _, r in ipairs({ "none", "mean", "sum" }) do
              local want = ref_regression(k, xv, tv, r)
              local tol = tol_of(dt) * (r == "none" and 10 or 10 * math.max(1, numel(shape)))
              local what = ("%s %s %s %s %s"):format(k.name, r, table.concat(shape, "x"), dt, kind)
              local got = run_regression(k, x, t, r)
              if r == "mean" and numel(shape) == 0 then
                assert.is_true(D.is_nan(values(got)[1]), what)
              else
                check(got, r == "none" and shape or {}, dt, want, tol, what)
              end
            end
          end
        end
      end
    end
    -- a NaN input gives a NaN loss; equal values a zero one (the distances); a logit far past
    -- its target's side costs its size, one on the right side nothing (bce)
    for _, k in ipairs(REGRESSION) do
      local l = run_regression(k, lt.tensor({ 0 / 0, 2.0, 120.0, -120.0 }),
        lt.tensor({ 1.0, 2.0, 0.0, 0.0 }), "none")
      local v = values(l)
      assert.is_true(D.is_nan(v[1]), k.name)
      if k.p or k.name:match("^m") or k.name:match("^l1") then
        assert.are.equal(0, v[2], k.name)
      else
        assert.are.same({ 120, 0 }, { v[3], v[4] }, k.name)
      end
    end
  end)

case("regression_loss_backward", "gradients to input and target against central differences",
  function()
    for _, shape in ipairs({ {}, { 5 }, { 3, 4 }, { 2, 3, 4 } }) do
      local xv, tv = distinct(numel(shape)), distinct(numel(shape))
      for _, k in ipairs(REGRESSION) do
        for _, r in ipairs({ "none", "mean", "sum" }) do
          for _, kind in ipairs({ "contiguous", "noncontig" }) do
            local what = ("%s %s %s %s"):format(k.name, r, table.concat(shape, "x"), kind)
            local tt = make(tv, shape, "float64")
            check_grad(function(x) return run_regression(k, x, tt, r) end,
              function(x) return ref_regression(k, x, tv, r) end, xv, shape, kind, what)
            local xx = make(xv, shape, "float64")
            check_grad(function(t) return run_regression(k, xx, t, r) end,
              function(t) return ref_regression(k, xv, t, r) end, tv, shape, kind,
              what .. " (target)")
          end
        end
      end
    end
    -- a float32 input's gradient is float32 and reads a non-contiguous incoming gradient
    local x = lt.tensor({ { 1.0, 2.0 }, { 3.0, 5.0 } }, { requires_grad = true })
    local l = F.mse_loss(x, lt.zeros(2, 2), { reduction = "none" })
    l:backward(lt.tensor({ { 1.0, 3.0 }, { 2.0, 4.0 } }):t())
    check(x.grad, { 2, 2 }, "float32", { 2, 8, 18, 40 }, 1e-6, "incoming gradient per element")
  end)

case("class_loss_backward", "gradients of every configuration against central differences",
  function()
    for _, sh in ipairs(LOSS_SHAPES) do
      local shape, tshape = sh[1], sh[2]
      local C = #shape == 1 and shape[1] or shape[2]
      for _, cfg in ipairs(loss_configs()) do
        cfg.ignore = #tshape > 0 and 3 or nil
        local tv = targets(tshape, C, cfg.ignore)
        local target = make(tv, tshape, "int64")
        local wv = cfg.weighted and distinct(C) or nil
        if wv then for c = 1, C do wv[c] = math.abs(wv[c]) + 0.5 end end
        local weight = wv and make(wv, { C }, "float64") or nil
        for _, kind in ipairs({ "contiguous", "noncontig" }) do
          check_grad(function(x) return run_loss(x, target, cfg, weight) end, function(x)
            return ref_loss(x, shape, tv, { weight = wv, ignore = cfg.ignore or -100,
              reduction = cfg.reduction, ls = cfg.ls, logits = cfg.logits })
          end, distinct(numel(shape)), shape, kind,
            ("%s %s %s w=%s ls=%g"):format(cfg.logits and "cross_entropy" or "nll_loss",
              cfg.reduction, table.concat(shape, "x"), tostring(cfg.weighted), cfg.ls))
        end
      end
    end
    -- a float32 input's gradient is float32 and reads a non-contiguous incoming gradient
    local x = lt.zeros({ 3, 4 }, { requires_grad = true })
    local l = F.cross_entropy(x, lt.tensor({ 1, 2, 3 }, { dtype = "int64" }), { reduction = "none" })
    l:backward(lt.tensor({ { 1.0, 9.0 }, { 2.0, 9.0 }, { 3.0, 9.0 } }):select(2, 1))
    check(x.grad, { 3, 4 }, "float32", { -0.75, 0.25, 0.25, 0.25, 0.5, -1.5, 0.5, 0.5,
      0.75, 0.75, -2.25, 0.75 }, 1e-6, "incoming gradient per row")
  end)

-- ------------------------------------------------------------ optimiser steps

-- p, g and state as float tensors of dtype dt with the values given
local function tensors(dt, ...)
  local r = {}
  for i, v in ipairs({ ... }) do r[i] = make(v, { #v }, dt) end
  return table.unpack(r)
end

local function positive(n)
  local v = distinct(n)
  for i = 1, n do v[i] = math.abs(v[i]) + 0.1 end
  return v
end

-- runs `steps` fused steps and the Lua formula side by side; `lua_step(i, s)` updates the
-- plain state s (p, g and buffers, lists) for element i
local function compare(dt, name, n, steps, fused, lua_step, state)
  for step = 1, steps do
    fused(step)
    for i = 1, n do lua_step(i, state, step) end
  end
  for k, t in pairs(state.tensors) do
    close_list(values(t), state[k], dt == "float32" and 2e-5 or 1e-12, name .. " " .. k)
  end
end

local function sign(maximize) return maximize and -1 or 1 end

case("sgd_step", "plain, momentum, dampening, nesterov, weight decay, maximize", function()
  for _, dt in ipairs(FLOATS) do
    for _, o in ipairs({
      { lr = 0.1, momentum = 0, dampening = 0, weight_decay = 0 },
      { lr = 0.05, momentum = 0.9, dampening = 0, weight_decay = 0.01 },
      { lr = 0.05, momentum = 0.8, dampening = 0.3, weight_decay = 0, nesterov = false,
        maximize = true },
      { lr = 0.02, momentum = 0.7, dampening = 0, weight_decay = 0.1, nesterov = true },
    }) do
      local n = 7
      local pv, gv = distinct(n), distinct(n)
      local p, g, buf = tensors(dt, pv, gv, distinct(n))
      local st = { p = values(p), buf = {}, tensors = { p = p } }
      if o.momentum ~= 0 then st.tensors.buf = buf end
      local gl = values(g)
      compare(dt, "SGD", n, 3, function(step)
        local opts = { lr = o.lr, momentum = o.momentum, dampening = o.dampening,
          weight_decay = o.weight_decay, nesterov = o.nesterov, maximize = o.maximize,
          first = step == 1 }
        core._sgd_step(p, g, o.momentum ~= 0 and buf or nil, opts)
      end, function(i, s, step)
        local d = sign(o.maximize) * gl[i]
        if o.weight_decay ~= 0 then d = d + o.weight_decay * s.p[i] end
        if o.momentum ~= 0 then
          s.buf[i] = step == 1 and d or s.buf[i] * o.momentum + d * (1 - o.dampening)
          d = o.nesterov and d + o.momentum * s.buf[i] or s.buf[i]
        end
        s.p[i] = s.p[i] - o.lr * d
      end, st)
    end
  end
  -- a gradient that is the parameter itself is read from a copy
  local p = lt.tensor({ 1.0, 2.0 }, { dtype = "float64" })
  core._sgd_step(p, p, nil, { lr = 0.5 })
  check(p, { 2 }, "float64", { 0.5, 1.0 }, 0, "p.grad = p")
  local q = lt.zeros({ 4 }, { dtype = "float64" })
  expect_error("SGD: momentum_buffer shares memory with the parameter", core._sgd_step, q,
    lt.ones({ 4 }, { dtype = "float64" }), q, { lr = 1, momentum = 0.9 })
  expect_error("SGD: gradient must be a contiguous float64 tensor of shape %[4%]",
    core._sgd_step, q, lt.ones({ 3 }), nil, { lr = 1 })
  core._sgd_step(lt.zeros({ 0 }), lt.zeros({ 0 }), nil, { lr = 1 })
end)

case("adam_step", "Adam and AdamW, amsgrad, weight decay, maximize, several steps", function()
  for _, dt in ipairs(FLOATS) do
    for _, o in ipairs({
      { lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0 },
      { lr = 1e-2, beta1 = 0.8, beta2 = 0.99, eps = 1e-6, weight_decay = 0.1, amsgrad = true },
      { lr = 3e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.05,
        decoupled = true, maximize = true },
      { lr = 3e-3, beta1 = 0.5, beta2 = 0.9, eps = 1e-8, weight_decay = 0.05, decoupled = true,
        amsgrad = true },
    }) do
      local n = 6
      local p, g = tensors(dt, distinct(n), distinct(n))
      local m, v, vmax = lt.zeros({ n }, { dtype = dt }), lt.zeros({ n }, { dtype = dt }),
        lt.zeros({ n }, { dtype = dt })
      local gl = values(g)
      local st = { p = values(p), m = {}, v = {}, vmax = {}, tensors = { p = p, m = m, v = v } }
      for i = 1, n do st.m[i], st.v[i], st.vmax[i] = 0, 0, 0 end
      if o.amsgrad then st.tensors.vmax = vmax end
      compare(dt, "Adam", n, 3, function(step)
        core._adam_step(p, g, m, v, o.amsgrad and vmax or nil, { lr = o.lr, beta1 = o.beta1,
          beta2 = o.beta2, eps = o.eps, weight_decay = o.weight_decay, amsgrad = o.amsgrad,
          maximize = o.maximize, decoupled = o.decoupled, step = step })
      end, function(i, s, step)
        local gr = sign(o.maximize) * gl[i]
        if o.weight_decay ~= 0 then
          if o.decoupled then s.p[i] = s.p[i] * (1 - o.lr * o.weight_decay)
          else gr = gr + o.weight_decay * s.p[i] end
        end
        s.m[i] = s.m[i] * o.beta1 + gr * (1 - o.beta1)
        s.v[i] = s.v[i] * o.beta2 + (1 - o.beta2) * gr * gr
        local bc1, bc2 = 1 - o.beta1 ^ step, 1 - o.beta2 ^ step
        local sq = s.v[i]
        if o.amsgrad then
          s.vmax[i] = math.max(s.vmax[i], s.v[i])
          sq = s.vmax[i]
        end
        local denom = math.sqrt(sq) / math.sqrt(bc2) + o.eps
        s.p[i] = s.p[i] - o.lr / bc1 * s.m[i] / denom
      end, st)
    end
  end
  expect_error("Adam: step must be >= 1", core._adam_step, lt.zeros({ 2 }), lt.zeros({ 2 }),
    lt.zeros({ 2 }), lt.zeros({ 2 }), nil, { lr = 1, step = 0 })
end)

case("rmsprop_step", "plain, centered, momentum, weight decay, maximize", function()
  for _, dt in ipairs(FLOATS) do
    for _, o in ipairs({
      { lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0 },
      { lr = 1e-2, alpha = 0.9, eps = 1e-6, weight_decay = 0.1, momentum = 0, centered = true },
      { lr = 5e-3, alpha = 0.95, eps = 1e-8, weight_decay = 0, momentum = 0.9, centered = true,
        maximize = true },
      { lr = 5e-3, alpha = 0.95, eps = 1e-8, weight_decay = 0.01, momentum = 0.5 },
    }) do
      local n = 5
      local p, g = tensors(dt, distinct(n), distinct(n))
      local sq, ga, buf = lt.zeros({ n }, { dtype = dt }), lt.zeros({ n }, { dtype = dt }),
        lt.zeros({ n }, { dtype = dt })
      local gl = values(g)
      local st = { p = values(p), sq = {}, ga = {}, buf = {}, tensors = { p = p, sq = sq } }
      for i = 1, n do st.sq[i], st.ga[i], st.buf[i] = 0, 0, 0 end
      if o.centered then st.tensors.ga = ga end
      if o.momentum > 0 then st.tensors.buf = buf end
      compare(dt, "RMSprop", n, 3, function()
        core._rmsprop_step(p, g, sq, o.centered and ga or nil, o.momentum > 0 and buf or nil,
          { lr = o.lr, alpha = o.alpha, eps = o.eps, weight_decay = o.weight_decay,
            momentum = o.momentum, centered = o.centered, maximize = o.maximize })
      end, function(i, s)
        local gr = sign(o.maximize) * gl[i]
        if o.weight_decay ~= 0 then gr = gr + o.weight_decay * s.p[i] end
        s.sq[i] = s.sq[i] * o.alpha + (1 - o.alpha) * gr * gr
        local avg
        if o.centered then
          s.ga[i] = s.ga[i] * o.alpha + gr * (1 - o.alpha)
          avg = math.sqrt(s.sq[i] - s.ga[i] * s.ga[i]) + o.eps
        else
          avg = math.sqrt(s.sq[i]) + o.eps
        end
        if o.momentum > 0 then
          s.buf[i] = s.buf[i] * o.momentum + gr / avg
          s.p[i] = s.p[i] - o.lr * s.buf[i]
        else
          s.p[i] = s.p[i] - o.lr * gr / avg
        end
      end, st)
    end
  end
end)

case("adagrad_step", "learning-rate decay over steps, weight decay, maximize", function()
  for _, dt in ipairs(FLOATS) do
    for _, o in ipairs({
      { lr = 1e-1, lr_decay = 0, weight_decay = 0, eps = 1e-10 },
      { lr = 1e-1, lr_decay = 0.05, weight_decay = 0.1, eps = 1e-10, maximize = true },
    }) do
      local n = 6
      local p, g, sum = tensors(dt, distinct(n), distinct(n), positive(n))
      local gl = values(g)
      local st = { p = values(p), sum = values(sum), tensors = { p = p, sum = sum } }
      compare(dt, "Adagrad", n, 3, function(step)
        core._adagrad_step(p, g, sum, { lr = o.lr, lr_decay = o.lr_decay,
          weight_decay = o.weight_decay, eps = o.eps, maximize = o.maximize, step = step })
      end, function(i, s, step)
        local gr = sign(o.maximize) * gl[i]
        if o.weight_decay ~= 0 then gr = gr + o.weight_decay * s.p[i] end
        local clr = o.lr / (1 + (step - 1) * o.lr_decay)
        s.sum[i] = s.sum[i] + gr * gr
        s.p[i] = s.p[i] - clr * gr / (math.sqrt(s.sum[i]) + o.eps)
      end, st)
    end
  end
  local p = lt.zeros({ 3 }, { dtype = "float64" })
  expect_error("Adagrad: sum shares memory with the parameter", core._adagrad_step, p,
    lt.ones({ 3 }, { dtype = "float64" }), p, { lr = 1, step = 1 })
end)

return {}
