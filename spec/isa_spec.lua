-- Runtime ISA dispatch of the float32 elementwise kernels (src/cpu_isa.c) and the vectorised
-- exact GELU. Each level the CPU supports runs the elementwise family in a child process with
-- LANTERN_ISA set; ISO C forbids contracting a * b + c into an FMA, so every level must give
-- the very same bits as the SSE4 baseline.
local lt = require "lantern"

local support = require "support"
local sh = support.sh

local function cpu_flags()
  local f = io.open("/proc/cpuinfo")
  local s = f and f:read("a") or ""
  if f then f:close() end
  local flags = {}
  for w in (s:match("\nflags%s*:([^\n]*)") or ""):gmatch("%S+") do flags[w] = true end
  return flags
end

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

local function run_family(isa)
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(FAMILY)
  f:close()
  local errf = os.tmpname()
  local out = sh(string.format("LANTERN_ISA=%s bin/lantern %s 2>%s", isa, script, errf))
  local ef = io.open(errf)
  local err = ef:read("a")
  ef:close()
  os.remove(script)
  os.remove(errf)
  return out, err
end

describe("ISA dispatch", function()
  local flags = cpu_flags()
  local supported = {
    sse4 = true,
    avx2 = flags.avx2 and flags.fma or false,
    avx512 = flags.avx2 and flags.fma and flags.avx512f and flags.avx512bw and flags.avx512dq and
        flags.avx512vl or false,
  }
  local baseline, berr = run_family("sse4")

  it("runs the elementwise family at the baseline", function()
    assert.are.equal("", berr)
    local n = tonumber(baseline:match("^(%d+) values\n"))
    assert.is_true(n ~= nil and n > 100000, baseline:sub(1, 200))
  end)

  for _, isa in ipairs { "avx2", "avx512" } do
    it("gives the baseline's bits under LANTERN_ISA=" .. isa .. " (or says the CPU lacks it)",
      function()
        local out, err = run_family(isa)
        if supported[isa] then
          assert.are.equal("", err)
          assert.is_true(out == baseline, isa .. " results differ from sse4's")
        else
          assert.are.equal("lantern: LANTERN_ISA=" .. isa .. ": this CPU does not support " ..
            isa .. "; using " .. (supported.avx2 and "avx2" or "sse4") .. "\n", err)
          assert.is_true(out == baseline)
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
    assert.is_true(out == baseline)
  end)
end)

describe("float32 gelu (exact form)", function()
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

  it("is within 3 ulp for x > -0.5, where most activations lie", function()
    assert.is_true(max_ulps(lt.linspace(-0.5, 18, 1 << 21)) <= 3)
  end)

  it("treats NaN, infinities, zeros, subnormals and the far tails as float64 gelu does", function()
    local x = lt.tensor({ 0 / 0, 1 / 0, -1 / 0, 0.0, -0.0, 1e-40, -1e-40, 16, -16, -14, -13.5,
      1e30, -1e30 })
    local y, ref = x:gelu():tolist(), x:double():gelu():float():tolist()
    for i = 1, #y do
      assert.are.equal(string.format("%a", ref[i]), string.format("%a", y[i]))
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
