-- Lantern's own float32 GEMM (src/cpu/sgemm.c), which replaces OpenBLAS where OpenBLAS runs a
-- kernel set below the CPU's vector level, or Intel's AVX-512 set on AMD. LANTERN_GEMM=lantern
-- forces it, so it is tested on every machine with AVX2, at each vector level the CPU has:
-- products of every shape class (edges of the register tiles and of the packed blocks, both
-- transposes, strided and batched operands, alpha and beta) against float64, and bits that do
-- not depend on the thread count.
local support = require "support"

local CHECK = [[
local lt = require "lantern"
assert(lt.gemm() == "lantern", "lt.gemm() is " .. tostring(lt.gemm()))
lt.manual_seed(3)
local bad = {}
-- |c - exact| within k float32 roundings of the sum of |a_ik b_kj|, element by element
local function check(what, c, a, b, k, extra)
  local exact = a:double():matmul(b:double())
  local scale = a:double():abs():matmul(b:double():abs())
  if extra then exact, scale = extra(exact, scale) end
  local excess = ((c:double() - exact):abs() - scale * (k * 1.2e-7) - 1e-30):max():item()
  if excess > 0 then bad[#bad + 1] = what end
end
-- sizes around the tiles (12 x 32 and 6 x 16), the inner blocks (256, cut into equal parts), the
-- packed rows (32 strips) and columns (256 to 2048, by the size of L2); B is read in place when A
-- has few strips or, at AVX-512, a block is at most 16K floats (400 x 40 x 70), and packed
-- otherwise (128 x 512 x 784 at up to six threads, most of 100 x 2100 x 300, and every B
-- transposed); with B transposed, a C of at most 1024 elements and an inner dimension of at least 8
-- (m + n) take dot products of rows (6 x 25 x 3001, 5 x 3 x 70, 9 x 6 x 2500, 17 x 9 x 3001, 33 x
-- 31 x 600; stretches of 1024), a larger C or a shorter one the tiles (41 x 25 x 600, 32 x 32 x
-- 400); half-height and half-width tiles take a last strip of at most 6 rows or panel of at most 16
-- columns (18 x 48 x 40, 7 x 47 x 33), and at AVX-512 one of 7 or 8 rows an 8-row tile (128 x 512 x
-- 784, 20 x 40 x 50, 7 x 47 x 33)
local shapes = { { 1, 1, 1 }, { 5, 7, 3 }, { 6, 16, 8 }, { 12, 32, 256 }, { 13, 33, 257 },
  { 11, 17, 255 }, { 128, 512, 784 }, { 100, 65, 512 }, { 400, 40, 70 }, { 3, 2100, 20 },
  { 37, 2049, 513 }, { 100, 2100, 300 }, { 6, 25, 3001 }, { 5, 3, 70 }, { 9, 6, 2500 },
  { 17, 9, 3001 }, { 33, 31, 600 }, { 41, 25, 600 }, { 32, 32, 400 }, { 18, 48, 40 },
  { 7, 47, 33 }, { 20, 40, 50 } }
for _, s in ipairs(shapes) do
  local m, n, k = s[1], s[2], s[3]
  for _, ta in ipairs { false, true } do
    for _, tb in ipairs { false, true } do
      local a = ta and lt.randn(k, m):t() or lt.randn(m, k)
      local b = tb and lt.randn(n, k):t() or lt.randn(k, n)
      check(string.format("%dx%dx%d %s %s", m, n, k, ta, tb), a:matmul(b), a, b, k)
    end
  end
end
-- operands inside larger rows (leading dimension above the width)
local big = lt.randn(70, 90)
local a, b = big:narrow(2, 3, 41), big:narrow(1, 5, 41):narrow(2, 7, 50)
check("strided", a:matmul(b), a, b, 41)
-- a batch, and a broadcast batch
local ba, bb = lt.randn(3, 20, 30), lt.randn(3, 30, 25)
check("bmm", ba:matmul(bb), ba, bb, 30)
local w = lt.randn(30, 9)
check("broadcast", ba:matmul(w), ba, w, 30)
-- addmm: beta scales the input, beta = 0 ignores NaN in it
local c0 = lt.randn(37, 45)
local x, y = lt.randn(37, 300), lt.randn(300, 45)
check("addmm", lt.addmm(c0, x, y, { beta = 0.5, alpha = 2 }), x, y, 300, function(e, s)
  return e * 2 + c0:double() * 0.5, s * 2 + c0:double():abs() * 0.5
end)
local nan = lt.full({ 37, 45 }, 0 / 0)
check("beta 0", lt.addmm(nan, x, y, { beta = 0 }), x, y, 300)
-- addmm with a bias row (a Linear's bias, read where the tiles store) gives the bits of the same
-- bias copied into every row of C first (a full input, which the kernel reads as C): one inner
-- block and several, dot products of rows, A and B transposed or not, tile edges, and at 1 and
-- 2 threads (blocks of columns start the bias at their own column)
for _, s in ipairs { { 37, 45, 300 }, { 64, 96, 128 }, { 13, 33, 257 }, { 6, 25, 3001 },
                     { 100, 2100, 300 }, { 7, 47, 33 }, { 256, 520, 300 } } do
  local m, n, k = s[1], s[2], s[3]
  for _, ta in ipairs { false, true } do
    for _, ab in ipairs { { 1, 1 }, { 0.5, 2 } } do
      local a = ta and lt.randn(k, m):t() or lt.randn(m, k)
      local b, bias = lt.randn(n, k):t(), lt.randn(n)
      local full = bias:expand(m, n):contiguous()
      for _, nt in ipairs { 1, 2 } do
        lt.set_num_threads(nt)
        local row = lt.addmm(bias, a, b, { beta = ab[1], alpha = ab[2] })
        local want = lt.addmm(full, a, b, { beta = ab[1], alpha = ab[2] })
        if not lt.equal(row, want) then
          bad[#bad + 1] = string.format("bias row %dx%dx%d %s at %d threads", m, n, k, ta, nt)
        end
      end
    end
  end
end
-- the linear layer's backward: both transposed products
local lin = lt.nn.Linear(300, 45)
local inp = x:detach():requires_grad_()
local out = lin(inp)
out:sum():backward()
local ones = lt.ones(37, 45)
check("dinput", inp.grad, ones, lin.weight:detach(), 45)
check("dweight", lin.weight.grad, ones:t(), x, 37)
-- the same bits at 1 and 2 threads (the product is cut into blocks of C between threads)
local p, q = lt.randn(256, 300), lt.randn(300, 520)
lt.set_num_threads(1)
local one = p:matmul(q)
lt.set_num_threads(2)
local two = p:matmul(q)
if not lt.equal(one, two) then bad[#bad + 1] = "threads" end
print(#bad == 0 and "same" or table.concat(bad, ", "))
]]

describe("Lantern's float32 GEMM", function()
  local supported = support.isa_levels()

  it("matches float64 products at every level from AVX2 up, whatever the thread count", function()
    local ran = 0
    for _, isa in ipairs { "avx2", "avx512" } do
      if supported[isa] then
        local out, err = support.run_lua(CHECK, "LANTERN_GEMM=lantern LANTERN_ISA=" .. isa)
        assert.are.equal("", err)
        assert.are.equal("same\n", out, isa)
        ran = ran + 1
      end
    end
    if not supported.avx2 then pending("this CPU has no AVX2") end
    assert.is_true(ran >= 1)
  end)

  it("is chosen by LANTERN_GEMM, and reports a bad value", function()
    local show = 'local lt = require "lantern"; print((lt.gemm()))'
    local out, err = support.run_lua(show, "LANTERN_GEMM=openblas")
    assert.are.equal("openblas\n", out)
    assert.are.equal("", err)
    local dflt = support.run_lua(show, "")
    out, err = support.run_lua(show, "LANTERN_GEMM=mkl")
    assert.are.equal(dflt, out)
    assert.matches("LANTERN_GEMM=mkl: expected openblas or lantern; using " .. dflt:gsub("\n", ""), err)
    out, err = support.run_lua(show, "LANTERN_GEMM=lantern LANTERN_ISA=sse4")
    assert.are.equal("openblas\n", out)
    assert.matches("LANTERN_GEMM=lantern needs AVX2%+FMA %(vector level sse4%); using openblas", err)
    if supported.avx2 then
      out, err = support.run_lua(show, "LANTERN_GEMM=lantern")
      assert.are.equal("lantern\n", out)
      assert.are.equal("", err)
    end
  end)

  it("is Lantern's by default where OpenBLAS's kernels are below the CPU or tuned for Intel's",
    function()
    if os.getenv("LANTERN_GEMM") or os.getenv("LANTERN_ISA") then
      pending("LANTERN_GEMM or LANTERN_ISA is set")
      return
    end
    local lt = require "lantern"
    local which, core = lt.gemm()
    local fresh = support.run_lua('local lt = require "lantern"; print((lt.gemm()))', "")
    local f = io.open("/proc/cpuinfo")
    local amd = f and f:read("a"):match("vendor_id%s*:%s*AuthenticAMD") ~= nil
    if f then f:close() end
    local c, isa = core:lower(), lt.isa()
    local base = { prescott = 1, core2 = 1, penryn = 1, dunnington = 1, nehalem = 1, atom = 1,
      sandybridge = 1, opteron = 1, opteron_sse3 = 1, barcelona = 1, bobcat = 1, bulldozer = 1,
      nano = 1 }
    local avx2 = { haswell = 1, zen = 1, piledriver = 1, steamroller = 1, excavator = 1 }
    local intel512 = { skylakex = 1, cooperlake = 1, sapphirerapids = 1 }
    local want = "openblas"
    if isa ~= "sse4" and base[c] then want = "lantern" end
    if isa == "avx512" and (avx2[c] or (amd and intel512[c])) then want = "lantern" end
    assert.are.equal(want, which, core .. " on " .. isa .. (amd and " (AMD)" or ""))
    assert.are.equal(want .. "\n", fresh)   -- a fresh process chooses the same
  end)

  it("names OpenBLAS's kernel set", function()
    local lt = require "lantern"
    local which, core = lt.gemm()
    assert.is_true(which == "lantern" or which == "openblas")
    assert.is_string(core)
    assert.is_true(#core > 0)
    assert.are_not.equal("?", core)   -- OpenBLAS answered
  end)
end)
