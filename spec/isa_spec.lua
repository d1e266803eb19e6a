-- Runtime ISA dispatch of the float32 kernels (src/cpu_isa.c) and the vectorised
-- transcendentals of src/cpu/vmath.h. Each level the CPU supports runs in a child process with
-- LANTERN_ISA set: the elementwise family must agree across levels (the AVX2 and AVX-512 builds
-- fuse multiply-adds, so the last bit may differ), every vectorised function must stay within
-- its documented ulp bound of float64 libm over millions of inputs, edge values included, and
-- results must not depend on the number of threads.
local lt = require "lantern"

local support = require "support"
local sh = support.sh

-- Prints every result of the family as hex floats: forward and backward of the unary ops,
-- binary ops with their gradients, on values that include the edge cases.
local FAMILY = [[
local lt = require "lantern"
local base = { 0/0, 1/0, -1/0, 0.0, -0.0, 1e-40, -1e-40, 1e-30, 3.5, -3.5, 16, -16, 88, -88 }
local x = lt.cat({ lt.tensor(base), lt.linspace(-9, 9, 4099) })
local pos = x:abs() + 0.25
local unit = lt.linspace(-0.99, 0.99, 997)
local out = {}
-- a NaN's sign bit is no part of its value (IEEE leaves it to the operation), so NaNs print alike
local function emit(t) for _, v in ipairs(t:reshape(-1):tolist()) do out[#out + 1] = v ~= v and "nan" or string.format("%a", v) end end
local function fwd_bwd(f, input)
  local a = input:detach():requires_grad_()
  local y = f(a)
  y:sum():backward()
  emit(y); emit(a.grad)
end
for _, name in ipairs { "neg", "abs", "sign", "exp", "tanh", "sigmoid", "relu", "silu", "square",
  "floor", "ceil", "round", "trunc", "expm1", "erf", "sin", "cos", "atan" } do
  fwd_bwd(function(a) return a[name](a) end, x)
end
fwd_bwd(function(a) return a:gelu() end, x)
fwd_bwd(function(a) return a:gelu("tanh") end, x)
for _, name in ipairs { "log", "log1p", "sqrt", "rsqrt", "reciprocal", "log2" } do
  fwd_bwd(function(a) return a[name](a) end, pos)
end
for _, name in ipairs { "asin", "acos", "tan" } do fwd_bwd(function(a) return a[name](a) end, unit) end
local y = x:flip(1) * 0.5 + 0.125
for _, op in ipairs { "add", "sub", "mul", "div", "maximum", "minimum", "atan2", "fmod", "remainder" } do
  local a, b = x:detach():requires_grad_(), y:detach():requires_grad_()
  local r = a[op](a, b)
  if op ~= "fmod" and op ~= "remainder" then r:sum():backward(); emit(a.grad); emit(b.grad) end
  emit(r)
end
fwd_bwd(function(a) return a:pow(pos:detach()) end, pos)
emit((x:lt(y)):float()); emit((x:eq(y)):float())
emit(x:clamp(-2, 3))
print(#out .. " values")
print(table.concat(out, " "))
]]

local run_script = support.run_lua

-- runs script at every ISA level the CPU supports; each run must print exactly "same"
local function prints_same_at_every_level(script)
  local supported = support.isa_levels()
  for _, isa in ipairs { "sse4", "avx2", "avx512" } do
    if supported[isa] then
      local out, err = run_script(script, "LANTERN_ISA=" .. isa)
      assert.are.equal("", err)
      assert.are.equal("same\n", out, isa)
    end
  end
end

local function run_family(isa) return run_script(FAMILY, "LANTERN_ISA=" .. isa) end

describe("ISA dispatch", function()
  local supported = support.isa_levels()
  local baseline, berr = run_family("sse4")

  it("runs the elementwise family at the baseline", function()
    assert.are.equal("", berr)
    local n = tonumber(baseline:match("^(%d+) values\n"))
    assert.is_true(n ~= nil and n > 100000, baseline:sub(1, 200))
  end)

  -- the values of two runs of FAMILY agree: same NaNs, infinities and zeros' signs, others
  -- within 2e-6 relative (a few ulp of a fused multiply-add) or 1e-7 absolute (gradients that
  -- cross zero)
  local function agree(a, b)
    local va, vb = {}, {}
    for w in a:gmatch("%S+") do va[#va + 1] = w end
    for w in b:gmatch("%S+") do vb[#vb + 1] = w end
    if #va ~= #vb then return false, "lengths " .. #va .. " and " .. #vb end
    for i = 3, #va do   -- after "<n> values"
      local x, y = tonumber(va[i]), tonumber(vb[i])
      if va[i] ~= vb[i] then
        local ok = x and y and x == x and y == y and math.abs(x) ~= math.huge and
            math.abs(y) ~= math.huge and math.abs(x - y) <= 2e-6 * math.max(math.abs(x), math.abs(y)) + 1e-7
        if not ok then return false, string.format("value %d: %s vs %s", i - 2, va[i], vb[i]) end
      end
    end
    return true
  end

  for _, isa in ipairs { "avx2", "avx512" } do
    it("agrees with the baseline under LANTERN_ISA=" .. isa .. " (or says the CPU lacks it)",
      function()
        local out, err = run_family(isa)
        if supported[isa] then
          assert.are.equal("", err)
          local ok, why = agree(out, baseline)
          assert.is_true(ok, isa .. " results differ from sse4's: " .. tostring(why))
        else
          assert.are.equal("lantern: LANTERN_ISA=" .. isa .. ": this CPU does not support " ..
            isa .. "; using " .. (supported.avx2 and "avx2" or "sse4") .. "\n", err)
          local ok, why = agree(out, baseline)
          assert.is_true(ok, tostring(why))
        end
      end)
  end

  it("reports the level in use through lt.isa()", function()
    local best = supported.avx512 and "avx512" or supported.avx2 and "avx2" or "sse4"
    local function isa_of(env)
      return (sh(env .. " bin/lantern -e 'print(require(\"lantern\").isa())' 2>/dev/null"):gsub("%s+$", ""))
    end
    assert.are.equal(best, isa_of("env -u LANTERN_ISA"))
    assert.are.equal("sse4", isa_of("LANTERN_ISA=sse4"))
  end)

  it("names the accepted values when LANTERN_ISA is not one of them", function()
    local out, err = run_family("avx3")
    assert.truthy(err:find("LANTERN_ISA=avx3: expected one of sse4, avx2, avx512; using ", 1, true), err)
    local ok, why = agree(out, baseline)
    assert.is_true(ok, tostring(why))
  end)
end)

describe("float32 unary ops in place", function()
  -- an in-place op's output is its input: a kernel that reads its input again after storing
  -- (GELU's scalar pass over lanes its tables do not serve did) would compute from its results
  it("give the values of the out-of-place ops at every ISA level the CPU supports", function()
    local INPLACE = [[
local lt = require "lantern"
lt.manual_seed(3)
local x = lt.cat({ lt.randn(20000) * 6, lt.tensor({ 0 / 0, 1 / 0, -1 / 0, 0.0, -0.0, 1e-40, 4, -4, 90, -90 }) })
local pos = x:abs() + 0.25
local unit = x:tanh() * 0.99
local function bits(t)
  local r = {}
  for i, v in ipairs(t:tolist()) do r[i] = v ~= v and "nan" or string.format("%a", v) end
  return table.concat(r, " ")
end
local bad = {}
local function check(name, input, ...)
  local want = input[name](input, ...)
  local got = input:clone()
  got[name .. "_"](got, ...)
  if bits(got) ~= bits(want) then bad[#bad + 1] = name end
end
for _, name in ipairs { "neg", "abs", "sign", "exp", "tanh", "sigmoid", "relu", "silu", "square",
  "floor", "ceil", "round", "trunc", "expm1", "erf", "sin", "cos", "atan", "gelu", "elu",
  "leaky_relu" } do
  check(name, x)
end
check("gelu", x, "tanh")
for _, name in ipairs { "log", "log1p", "sqrt", "rsqrt", "reciprocal", "log2" } do check(name, pos) end
for _, name in ipairs { "asin", "acos", "tan" } do check(name, unit) end
print(#bad == 0 and "same" or table.concat(bad, " "))
]]
    prints_same_at_every_level(INPLACE)
  end)

  -- With nothing to record, addcmul, addcdiv and lerp run in one pass (src/cpu/addc.c); with
  -- a gradient to record they are the separate binary ops. Both must give the same bits, at
  -- every level, for every path of the kernel: dense rows (with a tail), a broadcast operand,
  -- transposed operands, edge values, fresh results and in place.
  it("addcmul, addcdiv and lerp in one pass have the bits of their separate steps", function()
    local ADDC = [[
local lt = require "lantern"
local bad = {}
local function hex(t)
  local r = {}
  for i, v in ipairs(t:reshape(-1):tolist()) do r[i] = v ~= v and "nan" or string.format("%a", v) end
  return table.concat(r, " ")
end
local edge = { 0/0, 1/0, -1/0, 0.0, -0.0, 1e-40, -1e-40, 1e-30, 3.5, -3.5, 88, -88, 0.5, -0.5, 1, 2 }
for _, dt in ipairs { "float32", "float64" } do
  lt.manual_seed(3)
  local n = 37 * 29
  local function vals(k)   -- edge values first, then normals, shaped 37 x 29
    local e = lt.tensor(edge, { dtype = dt }):roll(k)
    return lt.cat({ e, lt.randn(n - #edge, { dtype = dt }) * 3 }):reshape(37, 29)
  end
  local s, a, b = vals(0), vals(5), vals(11)
  local w = lt.cat({ lt.tensor({ 0.5, -0.5, 0.49, 0/0, 1.5, -2 }, { dtype = dt }),
    lt.rand(n - 6, { dtype = dt }) * 3 - 1 }):reshape(37, 29)
  local layouts = {
    dense = { s, a, b, w },
    broadcast = { s, a:narrow(1, 1, 1), b, w:narrow(1, 1, 1) },
    transposed = { s, a:t():contiguous():t(), b:t():contiguous():t(), w:t():contiguous():t() },
  }
  for lname, L in pairs(layouts) do
    local S, A, B, W = L[1], L[2], L[3], L[4]
    local calls = {
      { "addcmul", function(x) return x:addcmul(A, B, -0.75) end,
        function(x) return x:addcmul_(A, B, -0.75) end },
      { "addcmul1", function(x) return x:addcmul(A, B) end, function(x) return x:addcmul_(A, B) end },
      { "addcdiv", function(x) return x:addcdiv(A, B, 1.25) end,
        function(x) return x:addcdiv_(A, B, 1.25) end },
      { "lerp0.3", function(x) return x:lerp(A, 0.3) end, function(x) return x:lerp_(A, 0.3) end },
      { "lerp0.8", function(x) return x:lerp(A, 0.8) end, function(x) return x:lerp_(A, 0.8) end },
      { "lerp-0.6", function(x) return x:lerp(A, -0.6) end, function(x) return x:lerp_(A, -0.6) end },
      { "lerpT", function(x) return x:lerp(A, W) end, function(x) return x:lerp_(A, W) end },
    }
    for _, c in ipairs(calls) do
      local rec = S:clone():requires_grad_()
      local y = c[2](rec)
      if not y.grad_fn then bad[#bad + 1] = c[1] .. " not recorded" end
      local want = hex(y:detach())
      local fresh = lt.no_grad(function() return c[2](S) end)
      if hex(fresh) ~= want then bad[#bad + 1] = dt .. " " .. lname .. " " .. c[1] end
      local into = S:clone()
      lt.no_grad(function() return c[3](into) end)
      if hex(into) ~= want then bad[#bad + 1] = dt .. " " .. lname .. " " .. c[1] .. "_" end
    end
  end
end
print(#bad == 0 and "same" or table.concat(bad, "; "))
]]
    prints_same_at_every_level(ADDC)
  end)
end)

describe("norm over a whole tensor", function()
  -- a 2-norm of all of a contiguous float tensor sums the squares in one pass
  -- (src/cpu/reduce.c, ltC_sumsq): the bits of squaring into a tensor and summing it, at every
  -- level, at 1 and 2 threads, around the 32768-element chunks and the 256-float blocks, with
  -- edge values (its gradient: grad_reduce_spec and the device suite's sumsq case)
  it("has the bits of the square summed, at every ISA level the CPU supports", function()
    local NORM = [[
local lt = require "lantern"
lt.manual_seed(5)
local bad = {}
local function hex(v) return v ~= v and "nan" or string.format("%a", v) end
for _, threads in ipairs { 1, 2 } do
  lt.set_num_threads(threads)
  for _, n in ipairs { 1, 7, 255, 256, 257, 32768, 32769, 100003 } do
    for _, dt in ipairs { "float32", "float64" } do
      local x = (lt.randn(n) * 3):to(dt)
      local cases = { x, x:view(1, n), x * 1e18, x * 1e-22 }
      if n > 300 then
        local e = x:clone()
        e[3] = 1 / 0
        cases[#cases + 1] = e
        e = x:clone()
        e[n - 2] = 0 / 0
        cases[#cases + 1] = e
      end
      for k, c in ipairs(cases) do
        local want = (c * c):sum():sqrt()
        local got = c:norm()
        if hex(got:item()) ~= hex(want:item()) or got.dtype ~= dt or got:dim() ~= 0 then
          bad[#bad + 1] = string.format("%s n %d case %d threads %d", dt, n, k, threads)
        end
        local kept = c:norm(2, nil, true)
        if kept:dim() ~= c:dim() or hex(kept:reshape(-1)[1]:item()) ~= hex(want:item()) then
          bad[#bad + 1] = string.format("keepdim %s n %d case %d", dt, n, k)
        end
      end
    end
  end
end
print(#bad == 0 and "same" or table.concat(bad, ", "))
]]
    prints_same_at_every_level(NORM)
  end)
end)

describe("float32 gelu (exact form)", function()
  -- the AVX2 tables' entries are picked by vpermilps, or by vpshufb on AMD Zen 1 and 2
  -- (LANTERN_LOOKUP forces either): the same bits both ways, forward and recorded derivative
  it("gives the same bits with either lookup at AVX2, and names LANTERN_LOOKUP's values", function()
    local GELU = [[
local lt = require "lantern"
local x = lt.cat({ lt.linspace(-4.5, 4.5, 1 << 20), lt.tensor({ 0 / 0, 1 / 0, -1 / 0, -0.0, 1e-40 }) })
local a = x:detach():requires_grad_()
a:gelu():sum():backward()
local out = {}
for i, v in ipairs(x:gelu():tolist()) do out[i] = v ~= v and "nan" or string.format("%a", v) end
for _, v in ipairs(a.grad:tolist()) do out[#out + 1] = v ~= v and "nan" or string.format("%a", v) end
print(#out, table.concat(out, " "))
]]
    local _, err = run_script(GELU, "LANTERN_LOOKUP=words")
    assert.truthy(err:find("LANTERN_LOOKUP=words: expected bytes or lanes; using ", 1, true), err)
    if not support.isa_levels().avx2 then return end   -- the SSE level has no tables
    local lanes, e1 = run_script(GELU, "LANTERN_ISA=avx2 LANTERN_LOOKUP=lanes")
    local bytes, e2 = run_script(GELU, "LANTERN_ISA=avx2 LANTERN_LOOKUP=bytes")
    assert.are.equal("", e1 .. e2)
    assert.truthy(#lanes > 1000000, lanes:sub(1, 100))
    assert.is_true(lanes == bytes, "vpshufb and vpermilps lookups differ")
  end)

  -- error in units of the last place of the float32 result, against float64 gelu (libm erfc) of
  -- the same float32 inputs
  local function max_ulps(x)
    local y = x:gelu():double()
    local ref = x:double():gelu()
    local e = ref:float():double():abs():log2():floor():clamp(-126, 128)
    local ulp = ((e - 23) * math.log(2)):exp()
    return ((y - ref):abs() / ulp):max():item()
  end

  it("is within 8 ulp of the exact value over a dense sweep", function()
    assert.is_true(max_ulps(lt.linspace(-18, 18, 1 << 22)) <= 8)
    assert.is_true(max_ulps(lt.linspace(-1, 1, 1 << 21)) <= 8)
    -- magnitudes from 1e-30 to 1e3, both signs
    local m = (lt.linspace(-30, 3, 1 << 20) * math.log(10)):exp()
    assert.is_true(max_ulps(lt.cat({ m, -m })) <= 8)
  end)

  it("is within its bounds at the edges of the tables' intervals and of their range", function()
    -- each edge e, the float32 on either side of it, both signs: the intervals' edges (k/8 at
    -- the AVX-512 level, 1, 2, 3 at AVX2), 4 where the scalar formula takes over above, 2^-125
    -- where it takes over below at AVX2
    local xs = {}
    local edges = { 2 ^ -125 }
    for k = 1, 32 do edges[#edges + 1] = k / 8 end
    for _, e in ipairs(edges) do
      for _, v in ipairs { e * (1 - 2 ^ -24), e, e * (1 + 2 ^ -23) } do
        xs[#xs + 1] = v
        xs[#xs + 1] = -v
      end
    end
    assert.is_true(max_ulps(lt.tensor(xs)) <= 4)
  end)

  it("is within 4 ulp for x > -0.5, where most activations lie", function()
    assert.is_true(max_ulps(lt.linspace(-0.5, 18, 1 << 21)) <= 4)
  end)

  it("treats NaN, infinities, zeros, subnormals and the far tails as float64 gelu does", function()
    -- 16 is where the fit's argument stops (beyond, x or x * 0), -14.2 a tail result a few
    -- subnormal ulps deep
    local x = lt.tensor({ 0 / 0, 1 / 0, -1 / 0, 0.0, -0.0, 1e-40, -1e-40, 16, -16, -14, -13.5,
      1e30, -1e30, 15.99, -15.99, 16.5, -16.5, 3.4e38, -3.4e38, -14.2, 1e-38, -1e-38, 1e-45, -1e-45 })
    local y, ref = x:gelu():tolist(), x:double():gelu():float():tolist()
    for i = 1, #y do
      assert.are.equal(string.format("%a", ref[i]), string.format("%a", y[i]))
    end
  end)

  it("gives each element the value it has alone, whatever its neighbours", function()
    -- the tables serve |x| < 4 and the scalar formula the rest, chosen per value: a block
    -- that holds one wide value must not change the others (nor a row cut elsewhere)
    lt.manual_seed(7)
    local x = lt.cat({ lt.randn(3000) * 3, lt.tensor({ 0 / 0, 1 / 0, -1 / 0, 4, -4, 1e-40, -0.0 }),
      lt.randn(1000) })
    x = x:index_select(1, lt.randperm(x:size(1)))
    local y = x:gelu():tolist()
    local xs = x:tolist()
    for i = 1, #xs, 7 do
      local alone = lt.tensor({ xs[i] }):gelu():tolist()[1]
      local a, b = string.format("%a", alone), string.format("%a", y[i])
      if alone ~= alone then a, b = "nan", y[i] ~= y[i] and "nan" or b end
      assert.are.equal(a, b)
    end
    -- every other element, a strided input, goes through blocks on the stack: same bits, and
    -- the same gradient when recorded
    local function bits(t)
      local r = {}
      for k, v in ipairs(t:tolist()) do r[k] = v ~= v and "nan" or string.format("%a", v) end
      return table.concat(r, " ")
    end
    local s = x:narrow(1, 1, 4006):reshape(-1, 2):select(2, 1)
    assert.are.equal(bits(s:contiguous():gelu()), bits(s:gelu()))
    local as, ac = s:detach():requires_grad_(), s:contiguous():requires_grad_()
    as:gelu():sum():backward()
    ac:gelu():sum():backward()
    assert.are.equal(bits(ac.grad), bits(as.grad))
  end)

  -- A recorded gelu computes its derivative in the same pass and keeps it for the backward
  -- (src/unary.c, ltC_unary_pair): its values must be those of the unrecorded op, and the
  -- gradient must not depend on the input after the forward.
  it("gives the same values recorded or not, and keeps its derivative, not its input", function()
    for _, dt in ipairs { "float32", "float64" } do
      local x = lt.cat({ lt.tensor({ 0 / 0, 1 / 0, -1 / 0, 0.0, -0.0, 1e-40, 20, -20 }),
        lt.linspace(-16, 16, 40001) }):to(dt)
      local a = x:clone():requires_grad_()
      local y = a:gelu()
      local plain = x:gelu()
      assert.is_true(y:detach():eq(plain):logical_or(plain:isnan():logical_and(y:detach():isnan())):all():item())
      local g = lt.randn(x:size(1)):to(dt)
      local b = x:clone():requires_grad_()
      local yb = b:gelu()
      b:detach():zero_()   -- the leaf's data changes after the forward; its gradient does not
      yb:backward(g)
      y:backward(g)
      local function hex(t)
        local r = {}
        for i, v in ipairs(t:tolist()) do r[i] = v ~= v and "nan" or string.format("%a", v) end
        return table.concat(r, " ")
      end
      assert.is_true(hex(a.grad) == hex(b.grad))
      local ref = x:double():requires_grad_()
      ref:gelu():backward(g:double())
      local err = (a.grad:double() - ref.grad):abs()
      local fin = ref.grad:isfinite()
      local tol = dt == "float32" and 1e-6 or 1e-14
      assert.is_true((err - (ref.grad:abs() * tol + tol / 10)):masked_fill(fin:logical_not(), 0):max():item() <= 0)
    end
  end)

  it("has the gradient of float64 gelu within float rounding", function()
    local x = lt.linspace(-12, 12, 1 << 18)
    local a = x:clone():requires_grad_()
    a:gelu():sum():backward()
    local b = x:double():requires_grad_()
    b:gelu():sum():backward()
    local err = (a.grad:double() - b.grad):abs()
    assert.is_true((err - (b.grad:abs() * 1e-6 + 1e-7)):max():item() <= 0)
  end)
end)

-- Every vectorised float32 function against float64 libm of the same inputs (the float64
-- kernels call libm), at one ISA level: a dense sweep, magnitudes from 1e-30 to 1e30 of both
-- signs and the edge values; prints "name max_ulp bad" per function, bad counting NaN,
-- infinity and zero-sign mismatches, then "grad name max_excess" for the backward formulas.
local ACCURACY = [[
local lt = require "lantern"
local edges = { 0/0, 1/0, -1/0, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.1754944e-38,
  -1.1754944e-38, 3.4028235e38, -3.4028235e38, 1, -1, 0.5, -0.5, 88.72, 88.73, 89, -87.33,
  -87.34, -103.9, -104, -105, 9.01, -9.01, 3.92, -3.92, 16, -16, 20, 20.5, -13, 0.55, -0.55,
  0.6931, -0.6931, 0.7, -0.7, 0.41421, -0.29289, 1e-8, -1e-8 }
local mags = (lt.linspace(-30, 30, 1 << 20) * math.log(10)):exp()
local x = lt.cat({ lt.tensor(edges), lt.linspace(-30, 30, 1 << 21), mags, -mags })
local function ulp_report(name, y, ref, keep)
  local rf = ref:float()
  local bad = y:isnan():ne(rf:isnan()):sum():item()
  local inf = rf:abs():eq(1 / 0)
  bad = bad + y:ne(rf):logical_and(inf):sum():item()
  local zero = rf:eq(0)
  bad = bad + (y:reciprocal():ne(rf:reciprocal())):logical_and(zero):logical_and(y:eq(0)):sum():item()
  local fin = rf:isfinite()
  if keep then fin = fin:logical_and(keep) end
  local e = rf:double():abs():log2():floor():clamp(-126, 128)
  local ulp = ((e - 23) * math.log(2)):exp()
  local err = lt.where(fin, (y:double() - ref):abs() / ulp, 0):max():item()
  print(string.format("%s %.4f %d", name, err, bad))
end
local fns = {
  exp = function(t) return t:exp() end, expm1 = function(t) return t:expm1() end,
  log = function(t) return t:log() end, log1p = function(t) return t:log1p() end,
  tanh = function(t) return t:tanh() end, sigmoid = function(t) return t:sigmoid() end,
  silu = function(t) return t:silu() end, softplus = function(t) return t:softplus() end,
  erf = function(t) return t:erf() end, gelu = function(t) return t:gelu() end,
  gelu_tanh = function(t) return t:gelu("tanh") end,
  elu = function(t) return t:elu() end,
  sin = function(t) return t:sin() end, cos = function(t) return t:cos() end,
  tan = function(t) return t:tan() end, atan = function(t) return t:atan() end,
  asin = function(t) return t:asin() end, acos = function(t) return t:acos() end,
  log2 = function(t) return t:log2() end,
}
-- finite edges of sin, cos and tan, in a first block of their own: a block holding NaN, inf or
-- |x| > 2^24 goes to libm whole (src/cpu/unary_float.h)
local trig_edges = lt.cat({ lt.tensor({ 0.0, -0.0, 1e-45, -1e-45, 1e-40, -1e-40, 1.1754944e-38,
  1e-8, -1e-8, 0.7853982, 0.7853981, 1.5707963, -1.5707964, 3.1415927, -3.1415927, 4.712389,
  6.2831855, 16777216, -16777216, 16777214, 8388607.5, 1e5, 12582912 }), lt.linspace(-40, 40, 1001) })
local names = {}
for name in pairs(fns) do names[#names + 1] = name end
table.sort(names)
for _, name in ipairs(names) do
  local f = fns[name]
  local input = x
  if name == "log" or name == "log2" then input = lt.cat({ x, x:abs() }) end
  if name == "log1p" or name == "asin" or name == "acos" then
    input = lt.cat({ x, lt.linspace(-1, 1, 1 << 21) })
  end
  local trig = name == "sin" or name == "cos" or name == "tan"
  if trig then   -- every block in range; then x, whose blocks with NaN, inf or huge go to libm
    input = lt.cat({ trig_edges, x:narrow(1, #edges + 1, x:size(1) - #edges) })
    input = input:masked_select(input:abs():le(16777216))
    ulp_report(name .. "_libm", f(x), f(x:double()))   -- NaN, inf and zero signs only
  end
  local y, ref = f(input), f(input:double())
  ulp_report(name, y, ref)
  if name == "gelu" or name == "gelu_tanh" then
    ulp_report(name .. ">-0.5", y, ref, input:gt(-0.5))
    ulp_report(name .. ">-3", y, ref, input:gt(-3))
  end
end
-- atan2 over every pair of edge values, then pairs from the sweep and the magnitudes
do
  local e = lt.tensor(edges)
  local n = e:size(1)
  local ey = e:reshape(n, 1):expand(n, n):reshape(-1)
  local ex = e:reshape(1, n):expand(n, n):reshape(-1)
  local a = lt.cat({ ey, x, mags })
  local b = lt.cat({ ex, x:flip(1) * 0.37, -mags:roll(12345) })
  ulp_report("atan2", lt.atan2(a, b), lt.atan2(a:double(), b:double()))
  -- fmod is exact; remainder adds the divisor once, rounded as float32. Pairs in the vector
  -- form's range (|a / b| < 2^29) and out of it (libm), in blocks of both kinds
  local r = lt.randn(1 << 20) * 100
  a, b = lt.cat({ a, r, r * 1e6 }), lt.cat({ b, r:roll(1) * 0.01, r:flip(1) })
  ulp_report("fmod", a:fmod(b), a:double():fmod(b:double()))
  ulp_report("remainder", a:remainder(b), a:double():remainder(b:double()))
end
-- backward: g * f'(x) with g = 1 against the float64 gradient, the excess over
-- 1e-6 |ref| + 1e-7 (<= 0 passes)
local xs = lt.linspace(-12, 12, 1 << 20)
for _, name in ipairs(names) do
  if name ~= "log" and name ~= "log1p" and name ~= "asin" and name ~= "acos" and name ~= "log2" then
    local a = xs:clone():requires_grad_()
    fns[name](a):sum():backward()
    local b = xs:double():requires_grad_()
    fns[name](b):sum():backward()
    local excess = ((a.grad:double() - b.grad):abs() - (b.grad:abs() * 1e-6 + 1e-7)):max():item()
    print(string.format("grad %s %.3g", name, excess))
  end
end
]]

-- the documented bounds (src/cpu/vmath.h), in ulp
local BOUNDS = {
  exp = 1.1, expm1 = 1.5, log = 1, log1p = 2.1, tanh = 1.5, sigmoid = 2.3, silu = 2.4,
  softplus = 2.6, erf = 2.4, elu = 1.5, gelu = 8, ["gelu>-0.5"] = 4, ["gelu>-3"] = 8,
  ["gelu_tanh>-0.5"] = 3, ["gelu_tanh>-3"] = 16, sin = 0.501, cos = 0.501, tan = 0.501,
  atan = 0.501, asin = 0.501, acos = 0.501, atan2 = 0.501, fmod = 0, remainder = 0.501, log2 = 0.501,
}


describe("vectorised float32 functions", function()
  local supported = support.isa_levels()
  local levels = { "sse4" }
  if supported.avx2 then levels[#levels + 1] = "avx2" end
  if supported.avx512 then levels[#levels + 1] = "avx512" end
  for _, isa in ipairs(levels) do
    it("stay within their ulp bounds of float64 libm, edge values as libm, at " .. isa, function()
      local out, err = run_script(ACCURACY, "LANTERN_ISA=" .. isa)
      assert.are.equal("", err)
      local seen = 0
      for name, ulps, bad in out:gmatch("([%w_>%-%.]+) ([%d%.]+) (%d+)\n") do
        seen = seen + 1
        assert.are.equal("0", bad, name .. ": NaN, infinity or zero sign differs from libm")
        if BOUNDS[name] then
          assert.is_true(tonumber(ulps) <= BOUNDS[name],
            string.format("%s at %s: %s ulp, bound %g", name, isa, ulps, BOUNDS[name]))
        end
      end
      assert.are.equal(29, seen, out)
      local grads = 0
      for name, excess in out:gmatch("grad ([%w_]+) (%S+)\n") do
        grads = grads + 1
        assert.is_true(tonumber(excess) <= 0, name .. "'s gradient at " .. isa .. ": " .. excess)
      end
      assert.are.equal(14, grads, out)
    end)
  end
end)

-- softmax, log_softmax, their gradients and float32 sums over rows of many lengths and over
-- a middle dim, printed as hex floats, with 1 and with 2 threads
local ROWS = [[
local lt = require "lantern"
lt.manual_seed(7)
local out = {}
local function emit(t) for _, v in ipairs(t:reshape(-1):tolist()) do out[#out + 1] = string.format("%a", v) end end
local inputs = {}
for _, n in ipairs { 1, 7, 16, 33, 257, 1000, 5000, 70000 } do inputs[#inputs + 1] = lt.randn(3, n) * 4 end
inputs[#inputs + 1] = lt.randn(5, 300, 7) * 4
local g = {}
for i, x in ipairs(inputs) do g[i] = lt.randn(table.unpack(x:size())) end
for _, threads in ipairs { 1, 2 } do
  lt.set_num_threads(threads)
  for i, x in ipairs(inputs) do
    local dim = x:dim() == 3 and 2 or -1
    for _, f in ipairs { "softmax", "log_softmax" } do
      local a = x:clone():requires_grad_()
      local y = a[f](a, dim)
      y:backward(g[i])
      emit(y); emit(a.grad)
    end
    emit(x:sum(dim)); emit(x:mean()); emit(x:exp():sum())
  end
  print(table.concat(out, " "))
  out = {}
end
]]

describe("float32 softmax and sums", function()
  it("give the same bits with 1 and with 2 threads", function()
    local out, err = run_script(ROWS, "")
    assert.are.equal("", err)
    local one, two = out:match("^([^\n]*)\n([^\n]*)\n$")
    assert.truthy(one and #one > 1000, out:sub(1, 200))
    assert.is_true(one == two, "results depend on the number of threads")
  end)

  it("are within float32 rounding of the float64 results", function()
    lt.manual_seed(3)
    for _, shape in ipairs { { 4, 1 }, { 4, 15 }, { 4, 16 }, { 4, 1000 }, { 2, 40000 }, { 3, 50, 9 } } do
      local x = lt.randn(table.unpack(shape)) * 5
      local dim = #shape == 3 and 2 or -1
      for _, f in ipairs { "softmax", "log_softmax" } do
        local a, b = x:clone():requires_grad_(), x:double():requires_grad_()
        local ya, yb = a[f](a, dim), b[f](b, dim)
        local g = lt.randn(table.unpack(shape))
        ya:backward(g)
        yb:backward(g:double())
        local function check(u, v, what)
          local excess = ((u:double() - v):abs() - (v:abs() * 2e-6 + 1e-6)):max():item()
          assert.is_true(excess <= 0, string.format("%s %s %s: %g", f, table.concat(shape, "x"), what, excess))
        end
        check(ya, yb, "forward")
        check(a.grad, b.grad, "backward")
      end
    end
  end)
end)

describe("float32 softmax edge rows", function()
  -- masked entries (-inf, also every third one of a row long enough for the vector loops),
  -- infinities, NaN, signed zeros and terms that underflow: the same NaNs, infinities and zeros
  -- as float64 softmax, other values within float rounding, forward and backward
  it("match float64 softmax and log_softmax", function()
    local inf, nan = 1 / 0, 0 / 0
    local rows = {
      { 1.5, -inf, 2, -inf, 3 }, { -inf, -inf, -inf }, { nan, 1, 2 }, { inf, 1, 2 }, { inf, -inf },
      { 0.5, -1e30, 5 }, { -0.0, 0.0 }, { 88.5, -88.5, 0.5 }, { -200.5, 0.5, -103.9, -104.1, -150.5 },
    }
    local long = {}
    for i = 1, 40 do long[i] = (i % 3 == 0) and -inf or (i * 0.37) % 5 end
    rows[#rows + 1] = long
    local function same(u, v, what)
      u, v = u:reshape(-1):tolist(), v:float():reshape(-1):tolist()
      assert.are.equal(#v, #u)
      for i = 1, #u do
        local a, b = u[i], v[i]
        local ok
        if b ~= b then ok = a ~= a
        elseif b == 0 or math.abs(b) == inf then ok = a == b
        else ok = math.abs(a - b) <= 2e-6 * math.abs(b) + 1e-30 end
        assert.is_true(ok, string.format("%s, element %d: %s, float64 gives %s", what, i, tostring(a), tostring(b)))
      end
    end
    -- each row as a row (the row kernel) and as 5 equal columns (the column kernel)
    for r, row in ipairs(rows) do
      for _, f in ipairs { "softmax", "log_softmax" } do
        for _, cols in ipairs { false, true } do
          local x = lt.tensor(row):reshape(1, -1)
          local g = lt.linspace(-1, 1, #row):reshape(1, -1)
          local dim = 2
          if cols then
            x, g, dim = x:t():expand(#row, 5):contiguous(), g:t():expand(#row, 5):contiguous(), 1
          end
          local what = string.format("%s row %d%s", f, r, cols and " as columns" or "")
          local a, b = x:clone():requires_grad_(), x:double():requires_grad_()
          local ya, yb = a[f](a, dim), b[f](b, dim)
          same(ya, yb, what)
          ya:backward(g)
          yb:backward(g:double())
          same(a.grad, b.grad, what .. ", backward")
        end
      end
    end
  end)
end)

describe("float32 sums", function()
  it("give the same bits at every ISA level the CPU supports", function()
    local SUMS = [[
local lt = require "lantern"
lt.manual_seed(11)
local out = {}
-- lengths around the lane groups and the 256-element float32 blocks (255 .. 289)
for _, n in ipairs { 1, 7, 8, 9, 31, 33, 100, 255, 256, 257, 287, 289, 784, 1000, 32769, 1 << 20 } do
  local x = lt.randn(n) * 3 + 1
  out[#out + 1] = string.format("%a %a %a", x:sum():item(), x:mean():item(), x:reshape(-1, 1):sum(1):item())
  if n >= 1000 then
    out[#out + 1] = string.format("%a", x:narrow(1, 1, 1000):reshape(10, 100):sum(2):sum():item())
    -- column sums: 100 rows of 10, passes of 8 rows and a last one of 4
    for _, v in ipairs(x:narrow(1, 1, 1000):reshape(100, 10):sum(1):tolist()) do out[#out + 1] = string.format("%a", v) end
  end
  -- magnitudes from 2^-40 to 2^40 (rows whose tails end in every lane group)
  local w = lt.randn(n) * lt.pow(2, (lt.rand(n) * 80 - 40):floor())
  out[#out + 1] = string.format("%a %a", w:sum():item(), w:double():sum():item())
end
-- many short rows at once (from AVX-512 four at a time), with edge values in some rows
for _, n in ipairs { 1, 5, 16, 31, 32, 33, 49, 63, 64, 65 } do
  local x = lt.randn(37, n) * 5
  x[3][1] = -0.0
  x[5]:fill_(-0.0)
  x[6][n] = 1 / 0
  x[7][1] = 0 / 0
  x[9][n] = 3e38
  x[9][1] = 3e38
  for _, v in ipairs(x:sum(2):tolist()) do out[#out + 1] = v ~= v and "nan" or string.format("%a", v) end
  for _, v in ipairs(x:mean(2):tolist()) do out[#out + 1] = v ~= v and "nan" or string.format("%a", v) end
end
-- partials of eight that overflow, taken again in double
for _, shape in ipairs { { 256 }, { 64, 300 }, { 9, 40 } } do
  local t = lt.full(shape, 3e38) * lt.rand(table.unpack(shape))
  out[#out + 1] = string.format("%a %a", t:sum():item(), t:mean(1):sum():item())
end
print(table.concat(out, " "))
]]
    local supported = support.isa_levels()
    local base, err = run_script(SUMS, "LANTERN_ISA=sse4")
    assert.are.equal("", err)
    assert.truthy(#base > 100, base)
    for _, isa in ipairs { "avx2", "avx512" } do
      if supported[isa] then
        local out = run_script(SUMS, "LANTERN_ISA=" .. isa)
        assert.are.equal(base, out, isa)
      end
    end
  end)
end)

describe("float32 sums", function()
  -- README's bound: within 7 * 2^-24 * sum(|x|) of the exact sum, then rounded to float32.
  -- A long run of equal values makes a plain float32 accumulation drift far past it: each add
  -- rounds the same way (4M times 0.1 in 32 float lanes: 40 off, against a bound of 0.2).
  it("are within the documented bound of float64", function()
    lt.manual_seed(5)
    local cases = {
      { lt.rand(1 << 20), nil }, { lt.randn(1000003) * 3 + 1, nil }, { lt.rand(64, 4099), 2 },
      { lt.rand(300, 70), 1 }, { lt.rand(4, 1001, 33), 2 }, { lt.randn(257) * 1e3, nil },
      { lt.full(1 << 22, 0.1), nil }, { lt.full({ 2, 70001 }, 0.1), 2 }, { lt.full({ 9000, 3, 16 }, 0.1), 1 },
    }
    for i, c in ipairs(cases) do
      local x, dim = c[1], c[2]
      local got = (dim and x:sum(dim) or x:sum()):double()
      local ref = dim and x:double():sum(dim) or x:double():sum()
      local abs = dim and x:double():abs():sum(dim) or x:double():abs():sum()
      local bound = abs * (7 * 2 ^ -24) + ref:abs() * 2 ^ -24
      local excess = ((got - ref):abs() - bound):max():item()
      assert.is_true(excess <= 0, string.format("case %d: %g past the bound", i, excess))
      local m = (dim and x:mean(dim) or x:mean()):double()
      local n = x:numel() / ref:numel()
      assert.is_true(((m - ref / n):abs() - bound / n):max():item() <= 0, "mean, case " .. i)
    end
  end)
end)

describe("largest and smallest of float rows", function()
  -- amax/amin over all elements and along rows (cpu/extreme.c at each level), float32 and
  -- float64, rows of every length around the vector widths, with signed zeros, infinities,
  -- subnormals and NaN at every position of a block: each level must give the bits of a
  -- plain-Lua reference (+0 above -0) and so of every other level.
  it("give the reference's bits at every ISA level the CPU supports", function()
    local EXTREMES = [[
local lt = require "lantern"
lt.manual_seed(3)
local function key(v) return v ~= v and "nan" or v == 0 and (1 / v > 0 and "+0" or "-0") or string.format("%a", v) end
local function ref(list, is_max)
  local m
  for _, v in ipairs(list) do
    if v ~= v then return 0 / 0 end
    if m == nil or (is_max and (v > m or (v == 0 and m == 0 and 1 / m < 0)))
        or (not is_max and (v < m or (v == 0 and m == 0 and 1 / m > 0))) then m = v end
  end
  return m
end
local bad = {}
local out = {}
for _, dt in ipairs { "float32", "float64" } do
  for _, n in ipairs { 1, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000 } do
    for trial = 1, 6 do
      local v = (lt.randn(n, { dtype = "float64" }) * 1e3):tolist()
      if trial == 2 then for i = 1, n do v[i] = (i % 2 == 0) and 0.0 or -0.0 end end
      if trial == 3 then for i = 1, n do v[i] = -0.0 end v[(n * 7) // 9 + 1] = 0.0 end
      if trial == 4 then v[(n * 5) // 7 + 1] = 0 / 0 end
      if trial == 5 then v[n] = 1 / 0; v[1] = -1 / 0; v[(n + 1) // 2] = 1e-310 end
      if trial == 6 then for i = 1, n do v[i] = -1e-42 * i end end
      local t = lt.tensor(v, { dtype = dt })
      local list = t:tolist()
      for _, is_max in ipairs { true, false } do
        local name = is_max and "amax" or "amin"
        local want = key(ref(list, is_max))
        local got = { key(t[name](t):item()), key(t:reshape(1, n)[name](t:reshape(1, n), 2):item()),
          key(t:reshape(n, 1)[name](t:reshape(n, 1), 1):item()) }
        -- as columns of a matrix (the column fold), and along a strided row
        local cols = t:reshape(n, 1):expand(n, 40):contiguous()
        for _, c in ipairs(cols[name](cols, 1):narrow(1, 1, 3):tolist()) do got[#got + 1] = key(c) end
        got[#got + 1] = key(cols:t()[name](cols:t(), 2)[2]:item())
        for _, g in ipairs(got) do
          if g ~= want then bad[#bad + 1] = string.format("%s %s n=%d trial %d: %s, want %s", dt, name, n, trial, g, want) end
        end
        out[#out + 1] = got[1]
      end
    end
  end
end
print(#bad == 0 and "ok" or table.concat(bad, "\n"))
print(table.concat(out, " "))
]]
    local supported = support.isa_levels()
    local base, err = run_script(EXTREMES, "LANTERN_ISA=sse4")
    assert.are.equal("", err)
    assert.are.equal("ok", base:match("^[^\n]*"))
    for _, isa in ipairs { "avx2", "avx512" } do
      if supported[isa] then
        local out = run_script(EXTREMES, "LANTERN_ISA=" .. isa)
        assert.are.equal(base, out, isa)
      end
    end
  end)
end)

describe("float32 convolution", function()
  -- Image rows of every width against kernels, paddings, strides and dilations: the AVX2 row
  -- copies of im2col (whole vectors that run on into the next row) and row sums of col2im
  -- must give the bits of the baseline's scalar loops, and those must be float32 rounding of
  -- float64.
  local CONV = [[
local lt = require "lantern"
lt.manual_seed(5)
local out, worst = {}, 0
local function emit(t) for _, v in ipairs(t:reshape(-1):tolist()) do out[#out + 1] = string.format("%a", v) end end
local function close(a, b)
  local err = ((a:double() - b):abs():max() / (b:abs():max() + 1e-30)):item()
  if err > worst then worst = err end
end
for _, W in ipairs { 1, 3, 7, 8, 9, 16, 17, 28, 33 } do
  for _, k in ipairs { 1, 3, 5 } do
    for _, p in ipairs { 0, 1, 2, 4 } do
      for _, s in ipairs { 1, 2 } do
        for _, d in ipairs { 1, 2 } do
          local eff = d * (k - 1) + 1
          if W + 2 * p >= eff and 5 + 2 * p >= eff then
            local o = { padding = p, stride = s, dilation = d }
            local x64, w64, b64 = lt.randn(2, 2, 5, W):double(), lt.randn(3, 2, k, k):double(), lt.randn(3):double()
            local res = {}
            for _, dt in ipairs { "float", "double" } do
              local x, w, b = x64[dt](x64):requires_grad_(), w64[dt](w64):requires_grad_(), b64[dt](b64):requires_grad_()
              local y = lt.conv2d(x, w, b, o)
              local g = lt.linspace(-1, 1, y:numel()):reshape_as(y):to(y.dtype)
              y:backward(g)
              local z = lt.conv_transpose2d(y:detach(), w:detach(), nil, { padding = p, stride = s, dilation = d })
              res[dt] = { y:detach(), x.grad, w.grad, b.grad, z }
            end
            for i, t in ipairs(res.float) do emit(t); close(t, res.double[i]) end
          end
        end
      end
    end
  end
end
print(string.format("worst %.3g", worst))
print(#out .. " values " .. table.concat(out, " "))
]]

  -- the products stay with OpenBLAS at every level: Lantern's own GEMM (sgemm_spec.lua), which
  -- needs AVX2, would otherwise replace it above the baseline where OpenBLAS lacks FMA
  it("gives the baseline's bits at every ISA level, within float32 rounding of float64", function()
    local supported = support.isa_levels()
    local base, err = run_script(CONV, "LANTERN_GEMM=openblas LANTERN_ISA=sse4")
    assert.are.equal("", err)
    local worst, n = base:match("^worst (%S+)\n(%d+) values ")
    assert.truthy(n and tonumber(n) > 50000, base:sub(1, 200))
    assert.is_true(tonumber(worst) < 1e-5, "float32 vs float64: " .. tostring(worst))
    for _, isa in ipairs { "avx2", "avx512" } do
      if supported[isa] then
        local out = run_script(CONV, "LANTERN_GEMM=openblas LANTERN_ISA=" .. isa)
        assert.is_true(out == base, isa .. " convolution differs from sse4's")
      end
    end
  end)

  it("gives the same bits with 1 and with 3 threads, when the columns are cut between them", function()
    -- 4 samples in one chunk, 100 tasks (25 kernel positions x 4 samples) cut at a task that
    -- is not the first of its row: each thread's filler starts its counters mid-row
    local THREADS = [[
local lt = require "lantern"
lt.manual_seed(9)
local x, w = lt.randn(4, 1, 28, 28), lt.randn(6, 1, 5, 5)
local out = {}
for _, th in ipairs { 1, 3 } do
  lt.set_num_threads(th)
  local xr = x:clone():requires_grad_()
  local y = lt.conv2d(xr, w, nil, { padding = 2 })
  y:backward(lt.linspace(-1, 1, y:numel()):reshape_as(y))
  local r = {}
  for _, t in ipairs { y, xr.grad } do
    for _, v in ipairs(t:reshape(-1):tolist()) do r[#r + 1] = string.format("%a", v) end
  end
  out[#out + 1] = table.concat(r, " ")
end
print(#out[1] > 10000 and out[1] == out[2] and "same" or "differ")
]]
    prints_same_at_every_level(THREADS)
  end)
end)

describe("cross_entropy over few classes", function()
  -- fewer classes than lanes: 16 rows side by side (src/cpu/nn.c); each row's loss and gradient
  -- must be the bits the row has alone, and within float32 rounding of float64, at every level
  it("gives each row its own bits and float64's values at every ISA level", function()
    local FEW = [[
local lt = require "lantern"
local F = lt.nn.functional
lt.manual_seed(5)
local ok = true
for _, C in ipairs { 2, 10, 15 } do
  local x, t = lt.randn(40, C) * 3, lt.randint(1, C + 1, { 40 })
  local a, b = x:clone():requires_grad_(), x:double():requires_grad_()
  local la, lb = F.cross_entropy(a, t, { reduction = "none" }), F.cross_entropy(b, t, { reduction = "none" })
  la:sum():backward()
  lb:sum():backward()
  ok = ok and (la:double() - lb):abs():max():item() <= 2e-6 * (lb:abs():max():item() + 1)
  ok = ok and (a.grad:double() - b.grad):abs():max():item() <= 1e-6
  for i = 1, 40, 3 do
    local ai = x:narrow(1, i, 1):clone():requires_grad_()
    local li = F.cross_entropy(ai, t:narrow(1, i, 1), { reduction = "none" })
    li:sum():backward()
    ok = ok and string.format("%a", li[1]:item()) == string.format("%a", la[i]:item())
    ok = ok and (ai.grad - a.grad:narrow(1, i, 1)):abs():max():item() == 0
  end
end
print(ok and "same" or "differ")
]]
    prints_same_at_every_level(FEW)
  end)
end)

describe("softmax over short rows", function()
  -- rows of fewer than 16 elements run 16 side by side (src/cpu/softmax.c): each row's values
  -- and gradients must be the bits the row kernel gives it alone, at every level, edge values
  -- (NaN, infinities, masked rows, signed zeros) included
  it("gives each row the row kernel's bits at every ISA level", function()
    local SHORT = [[
local lt = require "lantern"
lt.manual_seed(6)
local inf, nan = 1 / 0, 0 / 0
-- every NaN here comes from 0/0 or inf - inf, one bit pattern: printed as it is
local function hex(t)
  local r = {}
  for k, v in ipairs(t:reshape(-1):tolist()) do r[k] = string.format("%a", v) end
  return table.concat(r, " ")
end
local ok = true
for _, n in ipairs { 2, 5, 10, 15 } do
  local x, g = lt.randn(37, n) * 4, lt.randn(37, n)
  x[2][1], x[3][n], x[4][1], x[36][n] = nan, inf, -inf, nan
  x[5] = -inf
  x[6] = -lt.rand(n) - 1
  x[6][n] = -0.0   -- the largest: a zero maximum of either sign
  x[7][1] = 88.5
  g[8][1], g[9][n], g[35][1] = inf, -inf, inf
  for _, f in ipairs { "softmax", "log_softmax" } do
    for _, summed in ipairs { false, true } do   -- the gradient of a sum arrives expanded
      local a = x:clone():requires_grad_()
      local y = a[f](a, 2)
      if summed then y:sum():backward() else y:backward(g) end
      for i = 1, 37 do
        local ai = x:narrow(1, i, 1):clone():requires_grad_()
        local yi = ai[f](ai, 2)
        if summed then yi:sum():backward() else yi:backward(g:narrow(1, i, 1)) end
        ok = ok and hex(yi) == hex(y:narrow(1, i, 1)) and hex(ai.grad) == hex(a.grad:narrow(1, i, 1))
      end
    end
  end
end
print(ok and "same" or "differ")
]]
    prints_same_at_every_level(SHORT)
  end)
end)
