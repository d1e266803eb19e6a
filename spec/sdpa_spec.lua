-- Fused scaled-dot-product attention (src/attention.c, src/cpu/attention.c, through
-- lt.scaled_dot_product_attention and F.scaled_dot_product_attention): values and gradients
-- against float64 references of PyTorch's composed formula (spec/fixtures/gen_sdpa.py), against
-- Lantern's own composed form, layouts, thread counts, edge sizes, gradchecks and errors.
local lt = require "lantern"
local support = require "spec.support"
local F = lt.nn.functional
local cases = dofile("spec/fixtures/sdpa.lua")
local sdpa = lt.scaled_dot_product_attention

local function mk(spec, dtype)
  return lt.tensor(spec.data, { dtype = dtype }):reshape(spec.shape)
end

local function flat(t) return t:reshape({ t:numel() }):tolist() end

-- |a - e| <= rtol * (|e| + 0.1 * max|e| + 0.01) element by element (e a fixture or a tensor):
-- the floor holds values that are zero in exact arithmetic (one key's gradient) to rtol / 100.
local function assert_close(a, e, rtol, what)
  local is_t = lt.is_tensor(e)
  local ev = is_t and flat(e) or e.data
  local shape = is_t and e:size() or e.shape
  assert.are.same(shape, a:size(), what .. ": shape")
  local av, scale = flat(a), 0
  for i = 1, #ev do scale = math.max(scale, math.abs(ev[i])) end
  for i = 1, #ev do
    local err = math.abs(av[i] - ev[i]) / (math.abs(ev[i]) + 0.1 * scale + 1e-2)
    if not (err <= rtol) then
      error(string.format("%s: element %d is %.10g, expected %.10g (relative error %.3g > %g)",
        what, i, av[i], ev[i], err, rtol), 2)
    end
  end
end

-- The composed form, as F.scaled_dot_product_attention computed it before the fused op.
local function composed(q, k, v, mask, causal, scale)
  local L, S = q:size(-2), k:size(-2)
  local s = q:matmul(k:transpose(-2, -1)) * (scale or 1 / math.sqrt(q:size(-1)))
  if causal then s = s:masked_fill(lt.ones(L, S, { dtype = "bool" }):triu(1), -math.huge) end
  if mask ~= nil then
    s = mask.dtype == "bool" and s:masked_fill(mask:logical_not(), -math.huge) or s + mask
  end
  return s:softmax(-1):matmul(v)
end

local function case_mask(c, dtype)
  if not c.mask then return nil end
  local m = mk(c.mask, dtype)
  if c.mask_bool then return m:ne(0) end
  return m
end

describe("scaled_dot_product_attention (fused)", function()
  for _, dtype in ipairs { "float32", "float64" } do
    local rtol = dtype == "float32" and 2e-5 or 1e-10
    for _, c in ipairs(cases) do
      it(string.format("matches the composed float64 reference: %s (%s)", c.name, dtype), function()
        local q, k, v = mk(c.q, dtype), mk(c.k, dtype), mk(c.v, dtype)
        for _, t in ipairs { q, k, v } do t.requires_grad = true end
        local out = sdpa(q, k, v, case_mask(c, dtype), c.is_causal, c.scale)
        assert.are.equal("ScaledDotProductAttentionBackward0", out.grad_fn)
        assert_close(out, c.out, rtol, "out")
        local loss = (out * mk(c.gy, dtype)):sum()
        loss:backward()
        assert_close(q.grad, c.gq, rtol, "grad q")
        assert_close(k.grad, c.gk, rtol, "grad k")
        assert_close(v.grad, c.gv, rtol, "grad v")
      end)
    end
  end

  it("F.scaled_dot_product_attention returns the fused output alone, as composed", function()
    lt.manual_seed(3)
    local q, k, v = lt.randn(2, 4, 9, 16), lt.randn(2, 4, 11, 16), lt.randn(2, 4, 11, 8)
    local m = lt.randn(9, 11)
    -- against the composed form in float64 (the float32 one is itself off by as much); float32
    -- scores carry about 1e-6 of absolute error (scaled 16-term dots), which exp passes on
    local qd, kd, vd = q:double(), k:double(), v:double()
    local out, extra = F.scaled_dot_product_attention(q, k, v, { attn_mask = m })
    assert.is_nil(extra)
    assert_close(out, composed(qd, kd, vd, m:double()), 2e-6, "float mask")
    -- every row keeps its first key
    local bm = lt.cat({ lt.ones(2, 1, 9, 1, { dtype = "bool" }), lt.rand(2, 1, 9, 10):gt(0.2) }, 4)
    assert_close(F.scaled_dot_product_attention(q, k, v, { attn_mask = bm }),
      composed(qd, kd, vd, bm), 2e-6, "bool mask")
    assert_close(F.scaled_dot_product_attention(q, k, v, { is_causal = true, scale = 0.7 }),
      composed(qd, kd, vd, nil, true, 0.7), 4e-6, "causal, scale")
  end)

  it("stays close to the composed form on long float32 rows (several blocks each way)", function()
    lt.manual_seed(4)
    local q, k, v = lt.randn(2, 300, 32), lt.randn(2, 257, 32), lt.randn(2, 257, 48)
    local ref = composed(q:double(), k:double(), v:double(), nil, true)
    local fused = sdpa(q, k, v, nil, true)
    local old = composed(q, k, v, nil, true)
    local ef = (fused:double() - ref):abs():max():item()
    local eo = (old:double() - ref):abs():max():item()
    assert.is_true(ef < 2e-6, "fused error " .. ef)
    assert.is_true(eo < 2e-6, "composed error " .. eo)
  end)

  it("reads transposed heads (the GPT layout) as their contiguous copies", function()
    lt.manual_seed(5)
    local B, T, H, hd = 3, 20, 4, 8
    local qkv = lt.randn(B, T, 3 * H * hd):split(H * hd, 3)
    local function heads(t) return t:view(B, T, H, hd):transpose(2, 3) end
    local q, k, v = heads(qkv[1]), heads(qkv[2]), heads(qkv[3])
    assert.is_false(q:is_contiguous())
    local a = sdpa(q, k, v, nil, true)
    local b = sdpa(q:contiguous(), k:contiguous(), v:contiguous(), nil, true)
    assert_close(a, b, 1e-6, "strided")
    -- a key matrix read with a column stride other than 1 is copied first
    local kt = lt.randn(B, H, hd, T):transpose(3, 4)
    assert_close(sdpa(q, kt, v), composed(q, kt, v), 2e-6, "column stride")
  end)

  it("gives the same bits at every thread count", function()
    lt.manual_seed(6)
    -- 5 entries: one task each; 1 entry: the two-pass backward over blocks from 2 threads on
    for _, nb in ipairs { 5, 1 } do
      local q = lt.randn(nb, 130, 16, { requires_grad = true })
      local k = lt.randn(nb, 150, 16, { requires_grad = true })
      local v = lt.randn(nb, 150, 8, { requires_grad = true })
      local gy = lt.randn(nb, 130, 8)
      local saved = lt.get_num_threads()
      local res = {}
      for _, n in ipairs { 1, 2, 3 } do
        lt.set_num_threads(n)
        q.grad, k.grad, v.grad = nil, nil, nil
        local out = sdpa(q, k, v, nil, nb == 1)
        local loss = (out * gy):sum()
        loss:backward()
        res[n] = { flat(out), flat(q.grad), flat(k.grad), flat(v.grad) }
      end
      lt.set_num_threads(saved)
      assert.are.same(res[1], res[2])
      assert.are.same(res[1], res[3])
    end
  end)

  it("gives NaN rows where no key takes part, as the composed form", function()
    local q, k, v = lt.randn(1, 3, 4), lt.randn(1, 5, 4), lt.randn(1, 5, 2)
    local m = lt.ones(3, 5, { dtype = "bool" })
    m[2] = false
    local out = sdpa(q, k, v, m)
    local ref = composed(q, k, v, m)
    for i = 1, 3 do
      for j = 1, 2 do
        local a, r = out[1][i][j]:item(), ref[1][i][j]:item()
        if i == 2 then
          assert.is_true(a ~= a and r ~= r)
        else
          assert.is_true(math.abs(a - r) < 1e-6)
        end
      end
    end
  end)

  it("handles empty and one-long sequences", function()
    local e = sdpa(lt.randn(2, 0, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 3))
    assert.are.same({ 2, 0, 3 }, e:size())
    local q = lt.randn(2, 3, 4, { requires_grad = true })
    local z = sdpa(q, lt.randn(2, 0, 4), lt.randn(2, 0, 3))
    assert.are.same({ 2, 3, 3 }, z:size())
    assert.are.equal(0, z:abs():sum():item())   -- an empty sum, as q @ k^T @ v gives
    z:sum():backward()
    assert.are.equal(0, q.grad:abs():sum():item())
    local v1 = lt.randn(1, 1, 3)
    local one = sdpa(lt.randn(1, 1, 4), lt.randn(1, 1, 4), v1)
    assert.are.same(v1:tolist(), one:tolist())   -- one key: weight 1
    local ev = sdpa(lt.randn(2, 3, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 0))
    assert.are.same({ 2, 3, 0 }, ev:size())
  end)

  it("passes float64 gradchecks", function()
    lt.manual_seed(7)
    local function r(...) return lt.randn({ ... }, { dtype = "float64", requires_grad = true }) end
    local gc = lt.autograd.gradcheck
    assert.is_true(gc(function(q, k, v) return sdpa(q, k, v) end,
      { r(2, 3, 4), r(2, 5, 4), r(2, 5, 3) }))
    assert.is_true(gc(function(q, k, v) return sdpa(q, k, v, nil, true) end,
      { r(1, 2, 4, 3), r(1, 2, 4, 3), r(1, 2, 4, 2) }))
    local bm = lt.tensor({ { true, false, true }, { false, true, true } })
    assert.is_true(gc(function(q, k, v) return sdpa(q, k, v, bm, false, 0.5) end,
      { r(2, 2, 3), r(2, 3, 3), r(2, 3, 2) }))
    local fm = lt.randn(1, 4, { dtype = "float64" })
    -- broadcast batch: q (3, L, E) against one k and v, whose gradients sum over the batch
    assert.is_true(gc(function(q, k, v) return sdpa(q, k, v, fm) end,
      { r(3, 2, 2), r(4, 2), r(4, 3) }))
  end)

  it("raises naming scaled_dot_product_attention and the shapes", function()
    local q, k, v = lt.randn(2, 3, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 6)
    local ee = support.expect_error
    ee(function() sdpa(q, lt.randn(2, 5, 3), v) end, "scaled_dot_product_attention", "[2, 3, 4]",
      "[2, 5, 3]", "(*, S, E)")
    ee(function() sdpa(q, k, lt.randn(2, 4, 6)) end, "scaled_dot_product_attention", "[2, 4, 6]")
    ee(function() sdpa(q, k:double(), v) end, "scaled_dot_product_attention", "float32", "float64")
    ee(function() sdpa(lt.ones(2, 3, 4, { dtype = "int64" }), k, v) end, "one float dtype")
    ee(function() sdpa(lt.randn(4), k, v) end, "at least 2 dims", "[4]")
    ee(function() sdpa(lt.randn(3, 3, 4), k, v) end, "batch dims", "[3, 3, 4]", "[2, 5, 4]")
    ee(function() sdpa(q, k, v, lt.ones(3, 5, { dtype = "bool" }), true) end,
      "scaled_dot_product_attention", "is_causal")
    ee(function() sdpa(q, k, v, lt.ones(4, 5, { dtype = "bool" })) end, "attn_mask of shape [4, 5]",
      "[2, 3, 5]")
    ee(function() sdpa(q, k, v, lt.ones(3, 5, { dtype = "int64" })) end, "attn_mask", "int64")
    local bm = lt.ones(3, 5, { dtype = "bool" })
    ee(function() F.scaled_dot_product_attention(q, k, v, { attn_mask = bm, is_causal = true }) end,
      "scaled_dot_product_attention", "is_causal")
    -- a failed call leaves its inputs as they were
    assert.are.same({ 2, 3, 4 }, q:size())
  end)

  it("refuses a backward after an input it saved was changed in place", function()
    local q = lt.randn(1, 3, 4, { requires_grad = true })
    local k, v = lt.randn(1, 3, 4), lt.randn(1, 3, 4)
    local out = sdpa(q, k, v)
    k:add_(1)
    support.expect_error(function() out:sum():backward() end, "modified by an inplace operation",
      "ScaledDotProductAttentionBackward0")
  end)

  it("F with dropout or a float mask needing grad checks its operands as the fused op", function()
    local q, k, v = lt.randn(2, 3, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 6)
    local ee = support.expect_error
    local function fd(q_, k_, v_, o)
      o = o or {}
      o.dropout_p = o.dropout_p or 0.5
      return F.scaled_dot_product_attention(q_, k_, v_, o)
    end
    ee(function() fd(q, lt.randn(2, 5, 3), v) end, "scaled_dot_product_attention", "[2, 3, 4]",
      "[2, 5, 3]", "(*, S, E)")
    ee(function() fd(q, k, lt.randn(2, 4, 6)) end, "scaled_dot_product_attention", "[2, 4, 6]")
    ee(function() fd(lt.ones(2, 3, 4, { dtype = "int64" }), k, v) end,
      "scaled_dot_product_attention", "one float dtype", "int64")
    ee(function() fd(q, lt.randn(4), v) end, "scaled_dot_product_attention", "at least 2 dims",
      "[4]")
    ee(function() fd(lt.randn(3, 3, 4), k, v) end, "scaled_dot_product_attention", "batch dims")
    ee(function() fd(q, k, v, { attn_mask = lt.zeros(3, 5, { dtype = "float64" }) }) end,
      "scaled_dot_product_attention", "attn_mask", "float64")
    ee(function() fd(q, k, v, { attn_mask = lt.zeros(7, 2, 3, 5) }) end,
      "scaled_dot_product_attention", "attn_mask of shape [7, 2, 3, 5]", "[2, 3, 5]")
    local gm = lt.zeros(3, 4, { requires_grad = true })
    ee(function() F.scaled_dot_product_attention(q, k, v, { attn_mask = gm }) end,
      "scaled_dot_product_attention", "attn_mask of shape [3, 4]")
    for _, p in ipairs { -0.1, 1.5, "x" } do
      ee(function() F.scaled_dot_product_attention(q, k, v, { dropout_p = p }) end,
        "scaled_dot_product_attention", "dropout_p")
    end
    -- the fused op's own checks of dropout (the C API takes any double)
    for _, p in ipairs { -0.5, 1.5, 0 / 0 } do
      ee(function() lt.scaled_dot_product_attention(q, k, v, nil, false, nil, p) end,
        "scaled_dot_product_attention: dropout_p must be in [0, 1]")
    end
    ee(function() lt.scaled_dot_product_attention(q, k, v, nil, false, nil, 0.1, { generatr = 1 }) end,
      "scaled_dot_product_attention", "generatr")
    ee(function() F.scaled_dot_product_attention(q, k, v, { is_casual = true }) end,
      "scaled_dot_product_attention", "is_casual")
  end)

  it("F gives a float attn_mask that requires grad its gradient, as PyTorch does", function()
    lt.manual_seed(12)
    local q = lt.randn(2, 5, 4, { dtype = "float64", requires_grad = true })
    local k, v = lt.randn(2, 7, 4, { dtype = "float64" }), lt.randn(2, 7, 3, { dtype = "float64" })
    local m = lt.randn(5, 7, { dtype = "float64", requires_grad = true })
    local gy = lt.randn(2, 5, 3, { dtype = "float64" })
    local out = F.scaled_dot_product_attention(q, k, v, { attn_mask = m })
    assert.is_true(out.requires_grad)
    ;(out * gy):sum():backward()
    local gm, gq = m.grad, q.grad
    m.grad, q.grad = nil, nil
    local ref = composed(q, k, v, m)
    ;(ref * gy):sum():backward()
    assert_close(out, ref, 1e-12, "out")
    assert_close(gm, m.grad, 1e-12, "grad mask")
    assert_close(gq, q.grad, 1e-12, "grad q")
    assert.is_true(lt.autograd.gradcheck(function(m_)
      return F.scaled_dot_product_attention(q:detach(), k, v, { attn_mask = m_ })
    end, { m:detach():requires_grad_() }))
    -- the fused op itself gives the mask none, as documented; under no_grad F takes it too
    m.grad = nil
    sdpa(q, k, v, m):sum():backward()
    assert.is_nil(m.grad)
    lt.no_grad(function()
      local y = F.scaled_dot_product_attention(q, k, v, { attn_mask = m })
      assert_close(y, ref, 1e-12, "no_grad")
      assert.is_false(y.requires_grad)
    end)
  end)

  it("matches the composed form on odd sizes, causal with L ~= S (top-left triangle)", function()
    lt.manual_seed(13)
    local sizes_ = { { 1, 1 }, { 1, 300 }, { 300, 1 }, { 7, 300 }, { 300, 7 }, { 65, 129 },
      { 130, 63 } }
    for _, dtype in ipairs { "float64", "float32" } do
      local tol = dtype == "float64" and 1e-11 or 2e-5
      for _, c in ipairs(sizes_) do
        for _, causal in ipairs { false, true } do
          local L, S = c[1], c[2]
          local o = { dtype = dtype, requires_grad = true }
          local q, k, v = lt.randn(2, L, 5, o), lt.randn(2, S, 5, o), lt.randn(2, S, 3, o)
          local m = not causal and lt.randn(L, S, { dtype = dtype }) or nil
          local gy = lt.randn(2, L, 3, { dtype = dtype })
          local what = string.format("%s L=%d S=%d causal=%s", dtype, L, S, tostring(causal))
          local a = sdpa(q, k, v, m, causal)
          ;(a * gy):sum():backward()
          local ga = { q.grad, k.grad, v.grad }
          q.grad, k.grad, v.grad = nil, nil, nil
          local b = composed(q, k, v, m, causal)
          ;(b * gy):sum():backward()
          -- against the largest value or 1: with S = 1, dk is 0 exactly and float32 noise
          local function near(x, e, name)
            local err = (x - e):abs():max():item() / math.max(e:abs():max():item(), 1)
            assert.is_true(err <= tol, string.format("%s %s: error %.3g", what, name, err))
          end
          near(a, b, "out")
          near(ga[1], q.grad, "dq")
          near(ga[2], k.grad, "dk")
          near(ga[3], v.grad, "dv")
        end
      end
    end
  end)

  -- Below AVX2 the float32 tiles multiply in OpenBLAS; from AVX2 up in src/cpu/tile_mm.c, which
  -- skips what the causal triangle zeroes, strip by strip: sizes around its strips of 6 rows and
  -- panels of 16 columns, several blocks of 64 each way, head dims from 1 to 80, the GPT layout.
  it("matches the float64 composed form at every vector level (BLAS tiles or tile_mm.c's)", function()
    local script = [[
local lt = require "lantern"
lt.manual_seed(21)
local function composed(q, k, v, mask, causal)
  local L, S = q:size(-2), k:size(-2)
  local s = q:matmul(k:transpose(-2, -1)) * (1 / math.sqrt(q:size(-1)))
  if causal then s = s:masked_fill(lt.ones(L, S, { dtype = "bool" }):triu(1), -math.huge) end
  if mask then s = s + mask end
  return s:softmax(-1):matmul(v)
end
local worst = 0
for _, c in ipairs { { 1, 1, 1, 1 }, { 5, 7, 3, 17 }, { 6, 6, 16, 16 }, { 13, 29, 33, 9 },
  { 64, 64, 32, 32 }, { 70, 130, 24, 40 }, { 130, 70, 80, 8 }, { 65, 65, 64, 64 } } do
  local L, S, E, Ev = c[1], c[2], c[3], c[4]
  for _, kind in ipairs { "none", "causal", "float", "gpt" } do
    local B, H = 2, 3
    local q, k, v
    if kind == "gpt" then   -- heads read transposed out of one (B, T, 3 H E) tensor
      S = L
      local qkv = lt.randn(B, L, 3 * H * E):split(H * E, 3)
      local function heads(t) return t:view(B, L, H, E):transpose(2, 3):detach():requires_grad_() end
      q, k, v = heads(qkv[1]), heads(qkv[2]), heads(qkv[3])
    else
      q, k = lt.randn(B, H, L, E, { requires_grad = true }), lt.randn(B, H, S, E, { requires_grad = true })
      v = lt.randn(B, H, S, Ev, { requires_grad = true })
    end
    local mask = kind == "float" and lt.randn(L, S) or nil
    local causal = kind == "causal" or kind == "gpt"
    local gy = lt.randn(B, H, L, v:size(4))
    local out = lt.scaled_dot_product_attention(q, k, v, mask, causal)
    out:backward(gy)
    local function d64(t) return t:detach():double():requires_grad_() end
    local qd, kd, vd = d64(q), d64(k), d64(v)
    local ref = composed(qd, kd, vd, mask and mask:double(), causal)
    ref:backward(gy:double())
    for _, pair in ipairs { { out, ref }, { q.grad, qd.grad }, { k.grad, kd.grad }, { v.grad, vd.grad } } do
      local e = pair[2]
      local err = (pair[1]:double() - e):abs():max():item() / math.max(e:abs():max():item(), 1)
      worst = math.max(worst, err)
    end
  end
end
print(string.format("%.3g", worst))
]]
    local levels = support.isa_levels()
    for _, isa in ipairs { "sse4", "avx2", "avx512" } do
      if levels[isa] then
        local out, err = support.run_lua(script, "LANTERN_ISA=" .. isa)
        assert.are.equal("", err)
        local worst = tonumber(out:match("^(%S+)\n$"))
        assert.is_truthy(worst, isa .. ": " .. out)
        assert.is_true(worst <= 2e-6, string.format("%s: largest error %.3g", isa, worst))
      end
    end
  end)

  -- tile_mm.c's AVX-512 strips (panels of 32 columns) run each element's chain of
  -- multiply-adds as its AVX2 strips (panels of 16) do: the two levels agree to the bit
  it("gives the same bits from tile_mm.c at AVX2 and AVX-512", function()
    local levels = support.isa_levels()
    if not (levels.avx2 and levels.avx512) then return end
    local script = [[
local lt = require "lantern"
lt.manual_seed(23)
local out = {}
for i, c in ipairs { { 6, 31, 16, 17 }, { 13, 32, 24, 32 }, { 64, 33, 32, 40 }, { 70, 65, 64, 48 },
  { 65, 130, 8, 80 } } do
  local L, S, E, Ev = c[1], c[2], c[3], c[4]
  for _, causal in ipairs { false, true } do
    local q = lt.randn(2, L, E, { requires_grad = true })
    local k = lt.randn(2, S, E, { requires_grad = true })
    local v = lt.randn(2, S, Ev, { requires_grad = true })
    local y = lt.scaled_dot_product_attention(q, k, v, nil, causal)
    y:backward(lt.randn(2, L, Ev))
    local key = i .. tostring(causal)
    out[key .. "y"], out[key .. "q"] = y:detach(), q.grad
    out[key .. "k"], out[key .. "v"] = k.grad, v.grad
  end
end
lt.save(out, os.getenv("SDPA_BITS_OUT"))
]]
    local files = {}
    for _, isa in ipairs { "avx2", "avx512" } do
      local path = os.tmpname()
      local _, err = support.run_lua(script, "LANTERN_ISA=" .. isa .. " SDPA_BITS_OUT=" .. path)
      assert.are.equal("", err)
      files[isa] = lt.load(path)
      os.remove(path)
    end
    local n = 0
    for key, t in pairs(files.avx2) do
      assert.is_true(lt.equal(t, files.avx512[key]), key)
      n = n + 1
    end
    assert.are.equal(40, n)
  end)

  it("gives the same bits at 1 and 2 threads with masks and causal L ~= S", function()
    lt.manual_seed(14)
    local saved = lt.get_num_threads()
    for _, nb in ipairs { 1, 3 } do
      for _, cfg in ipairs { { 130, 300, "causal" }, { 300, 130, "causal" }, { 129, 70, "float" },
        { 65, 200, "bool" } } do
        local L, S, kind = cfg[1], cfg[2], cfg[3]
        local q = lt.randn(nb, L, 16, { requires_grad = true })
        local k = lt.randn(nb, S, 16, { requires_grad = true })
        local v = lt.randn(nb, S, 8, { requires_grad = true })
        local m = kind == "float" and lt.randn(L, S) or kind == "bool" and lt.rand(nb, L, S):gt(0.3)
          or nil
        local gy = lt.randn(nb, L, 8)
        local res = {}
        for _, n in ipairs { 1, 2 } do
          lt.set_num_threads(n)
          q.grad, k.grad, v.grad = nil, nil, nil
          local out = sdpa(q, k, v, m, kind == "causal")
          ;(out * gy):sum():backward()
          res[n] = { flat(out), flat(q.grad), flat(k.grad), flat(v.grad) }
        end
        lt.set_num_threads(saved)
        assert.are.same(res[1], res[2])
      end
    end
  end)

  -- dropout inside the fused op: with q = k = 0 every weight is 1/S, and with v the identity
  -- the output is the mask itself (Z / S); the same seed gives the same mask for other operands
  local function mask_of(seed, B, L, S, p, causal, dt)
    lt.manual_seed(seed)
    local q, k = lt.zeros(B, L, 4, { dtype = dt }), lt.zeros(B, S, 4, { dtype = dt })
    local v = lt.eye(S, { dtype = dt }):expand(B, S, S)
    local o = F.scaled_dot_product_attention(q, k, v, { dropout_p = p, is_causal = causal })
    if causal then   -- row i sees keys 1..i: its weights are 1/i
      local n = lt.arange(1, L + 1, { dtype = dt }):clamp(nil, S):reshape(L, 1)
      return o * n
    end
    return o * S
  end

  it("drops weights inside the fused op, with the mask its probe reveals", function()
    for _, dt in ipairs { "float64", "float32" } do
      for _, causal in ipairs { false, true } do
        local B, L, S, p = 2, 70, 130, 0.3
        local z = mask_of(5, B, L, S, p, causal, dt)
        -- kept weights carry 1/(1-p), dropped ones 0
        local kept = z:ne(0)
        assert.is_true((z:masked_fill(kept:logical_not(), 1 / (1 - p)) - 1 / (1 - p)):abs():max():item() < 1e-5)
        lt.manual_seed(1)
        local q, k, v = lt.randn(B, L, 16, { dtype = dt }), lt.randn(B, S, 16, { dtype = dt }),
            lt.randn(B, S, 24, { dtype = dt })
        lt.manual_seed(5)
        local o = F.scaled_dot_product_attention(q, k, v, { dropout_p = p, is_causal = causal })
        local scores = q:double():matmul(k:double():transpose(2, 3)) / 4
        if causal then scores = scores:masked_fill(lt.ones(L, S, { dtype = "bool" }):triu(1), -math.huge) end
        local want = (scores:softmax(-1) * z:double()):matmul(v:double())
        local tol = dt == "float64" and 1e-12 or 2e-6
        assert.is_true((o:double() - want):abs():max():item() < tol * want:abs():max():item(),
          dt .. (causal and " causal" or ""))
      end
    end
  end)

  it("keeps about 1 - p of the weights, draws one seed per call, and p = 1 drops them all", function()
    local z = mask_of(3, 2, 70, 130, 0.3, false, "float32")
    local kept = z:ne(0):double():mean():item()
    -- 18200 weights: the kept fraction's deviation is 0.0034
    assert.is_true(math.abs(kept - 0.7) < 0.02, "kept " .. kept)
    local other = mask_of(4, 2, 70, 130, 0.3, false, "float32")
    assert.is_true(other:ne(z):any():item())
    local q, k, v = lt.randn(2, 5, 4, { requires_grad = true }), lt.randn(2, 5, 4), lt.randn(2, 5, 4)
    local all = F.scaled_dot_product_attention(q, k, v, { dropout_p = 1 })
    assert.are.equal(0, all:abs():max():item())
    all:sum():backward()
    assert.are.equal(0, q.grad:abs():max():item())
    -- a generator of its own: the same seed, the same mask; the context's stream is untouched
    local g1, g2 = lt.Generator(), lt.Generator()
    g1:manual_seed(11)
    g2:manual_seed(11)
    lt.manual_seed(2)
    local before = lt.rand(1):item()
    lt.manual_seed(2)
    local a = F.scaled_dot_product_attention(q, k, v, { dropout_p = 0.5, generator = g1 })
    local b = F.scaled_dot_product_attention(q, k, v, { dropout_p = 0.5, generator = g2 })
    assert.are.same(a:tolist(), b:tolist())
    assert.are.equal(before, lt.rand(1):item())
    assert.are_not.same(a:tolist(), F.scaled_dot_product_attention(q, k, v):tolist())
  end)

  it("has the gradient of its forward with dropout (the backward redraws the mask)", function()
    local saved = lt.get_num_threads()
    for _, nt in ipairs { 1, 2 } do   -- 2: one batch entry, so the backward splits into blocks
      lt.set_num_threads(nt)
      for _, c in ipairs { { 2, 9, 11, false }, { 1, 70, 67, true } } do
        local B, L, S, causal = c[1], c[2], c[3], c[4]
        local function f(q_, k_, v_)
          lt.manual_seed(9)
          return F.scaled_dot_product_attention(q_, k_, v_, { dropout_p = 0.4, is_causal = causal })
        end
        local q = lt.randn(B, L, 3, { dtype = "float64", requires_grad = true })
        local k = lt.randn(B, S, 3, { dtype = "float64", requires_grad = true })
        local v = lt.randn(B, S, 2, { dtype = "float64", requires_grad = true })
        assert.is_true(lt.autograd.gradcheck(f, { q, k, v }), string.format("%d x %d at %d", L, S, nt))
      end
    end
    lt.set_num_threads(saved)
  end)

  it("gives the same bits with dropout at 1 and 2 threads", function()
    local saved = lt.get_num_threads()
    lt.manual_seed(6)
    local q, k, v = lt.randn(1, 3, 150, 32), lt.randn(1, 3, 150, 32), lt.randn(1, 3, 150, 32)
    local res = {}
    for _, nt in ipairs { 1, 2 } do
      lt.set_num_threads(nt)
      local qq = q:clone():requires_grad_()
      lt.manual_seed(7)
      local o = F.scaled_dot_product_attention(qq, k, v, { dropout_p = 0.2, is_causal = true })
      o:sum():backward()
      res[nt] = { o, qq.grad }
    end
    lt.set_num_threads(saved)
    assert.are.equal(0, (res[1][1] - res[2][1]):abs():max():item())
    assert.are.equal(0, (res[1][2] - res[2][2]):abs():max():item())
  end)
end)

describe("MultiheadAttention and TransformerEncoderLayer on the fused op", function()
  local nn = lt.nn

  it("gives the same output with and without need_weights", function()
    lt.manual_seed(8)
    local mha = nn.MultiheadAttention(16, 4, { batch_first = true })
    local x = lt.randn(2, 7, 16)
    local kpm = lt.zeros(2, 7, { dtype = "bool" })
    kpm[1][7] = true
    local am = lt.randn(7, 7)
    for _, opts in ipairs {
      {}, { is_causal = true }, { key_padding_mask = kpm },
      { attn_mask = am, key_padding_mask = kpm },
    } do
      local with = mha(x, x, x, opts)
      local o2 = {}
      for key, val in pairs(opts) do o2[key] = val end
      o2.need_weights = false
      local without, w = mha(x, x, x, o2)
      assert.is_nil(w)
      assert_close(without, with, 2e-6, "need_weights = false")
    end
  end)

  it("gives a learned float attn_mask the same gradient with and without need_weights", function()
    lt.manual_seed(15)
    local mha = nn.MultiheadAttention(8, 2, { batch_first = true })
    local x = lt.randn(2, 5, 8)
    local am = lt.randn(5, 5, { requires_grad = true })
    local grads = {}
    for _, need in ipairs { true, false } do
      am.grad = nil
      local out = mha(x, x, x, { attn_mask = am, need_weights = need })
      out:sum():backward()
      grads[#grads + 1] = am.grad
    end
    assert.is_not_nil(grads[2], "need_weights = false: no gradient for attn_mask")
    assert_close(grads[2], grads[1], 1e-5, "attn_mask grad")
  end)

  it("trains a TransformerEncoderLayer through the fused path (gradients match)", function()
    lt.manual_seed(9)
    local layer = nn.TransformerEncoderLayer(16, 2,
      { dim_feedforward = 32, dropout = 0, batch_first = true })
    local x = lt.randn(3, 6, 16)
    layer(x):sum():backward()
    local g = layer.self_attn.in_proj_weight.grad:clone()
    layer:zero_grad()
    -- the composed path: need_weights = true through self_attn itself
    local sa = layer.self_attn(x, x, x)
    local ref = layer.norm1(x + sa)
    ref = layer.norm2(ref + layer:_ff_block(ref))
    ref:sum():backward()
    assert_close(g, layer.self_attn.in_proj_weight.grad, 1e-5, "in_proj_weight.grad")
  end)
end)
