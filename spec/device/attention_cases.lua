-- Cases for the fused attention kernels of the table: sdpa and sdpa_backward, reached through
-- lt.scaled_dot_product_attention. The reference is the definition in plain Lua (scores, a
-- softmax per row, the weighted sum of values); gradients are central differences of it.
local D = require "device.support"
local lt, numel, values, check = D.lt, D.numel, D.values, D.check
local distinct, make, input, check_grad = D.distinct, D.make, D.input, D.check_grad
local case, FLOATS = D.case, D.FLOATS

local KINDS = { "contiguous", "noncontig", "strided" }
local function ftol(dt) return dt == "float32" and 1e-5 or 1e-10 end

-- softmax(q k^T scale + mask) v per batch entry of flat row-major values; p: B, L, S, E, Ev,
-- mask (flat (L, S) values shared by the batch, or nil), bool (the mask's kind), causal, scale
local function ref_sdpa(q, k, v, p)
  local B, L, S, E, Ev = p.B, p.L, p.S, p.E, p.Ev
  local scale, out = p.scale or 1 / math.sqrt(E), {}
  for b = 0, B - 1 do
    for i = 0, L - 1 do
      local s, mx = {}, -math.huge
      for j = 0, S - 1 do
        local acc = 0
        for e = 1, E do acc = acc + q[(b * L + i) * E + e] * k[(b * S + j) * E + e] end
        acc = acc * scale
        local m = p.mask and p.mask[i * S + j + 1]
        if (p.causal and j > i) or (p.bool and m == 0) then
          acc = -math.huge
        elseif m and not p.bool then
          acc = acc + m
        end
        s[j] = acc
        if acc > mx then mx = acc end
      end
      local sum = 0
      for j = 0, S - 1 do
        s[j] = math.exp(s[j] - mx)
        sum = sum + s[j]
      end
      for e = 1, Ev do
        local acc = 0
        for j = 0, S - 1 do acc = acc + s[j] / sum * v[(b * S + j) * Ev + e] end
        out[(b * L + i) * Ev + e] = acc
      end
    end
  end
  return out
end

-- settings: sizes, and how the mask is made on the device (bool masks hold 1/0 in `mask`)
local SETTINGS = {
  { what = "L != S, Ev != E", B = 2, L = 3, S = 5, E = 4, Ev = 3 },
  { what = "causal", B = 2, L = 4, S = 4, E = 3, Ev = 2, causal = true },
  { what = "causal, L > S, scale", B = 1, L = 5, S = 3, E = 2, Ev = 2, causal = true, scale = 0.5 },
  { what = "bool mask", B = 2, L = 3, S = 4, E = 2, Ev = 3, bool = true,
    mask = { 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1 } },
  { what = "float mask", B = 2, L = 2, S = 3, E = 3, Ev = 2, mask = distinct(6) },
  { what = "one query, one key", B = 3, L = 1, S = 1, E = 2, Ev = 2 },
}

local function mask_of(p, dt)
  if not p.mask then return nil end
  local m = make(p.mask, { p.L, p.S }, p.bool and "float64" or dt)
  return p.bool and m:ne(0) or m
end

local function op_of(p, mask)
  return function(q, k, v)
    return lt.scaled_dot_product_attention(q, k, v, mask, p.causal, p.scale)
  end
end

case("sdpa", "values against the definition: masks, causal, float32/64, layouts", function()
  for _, p in ipairs(SETTINGS) do
    local qs, ks, vs = { p.B, p.L, p.E }, { p.B, p.S, p.E }, { p.B, p.S, p.Ev }
    for _, dt in ipairs(FLOATS) do
      for _, kind in ipairs(KINDS) do
        local q, qr = input(distinct(numel(qs)), qs, dt, kind)
        local k, kr = input(distinct(numel(ks)), ks, dt, kind)
        local v, vr = input(distinct(numel(vs)), vs, dt, kind)
        local out = op_of(p, mask_of(p, dt))(q, k, v)
        check(out, { p.B, p.L, p.Ev }, dt, ref_sdpa(qr, kr, vr, p), ftol(dt),
          p.what .. " " .. dt .. " " .. kind)
      end
    end
  end
end)

case("sdpa_backward", "gradients of q, k and v against central differences", function()
  for _, p in ipairs(SETTINGS) do
    local qs, ks, vs = { p.B, p.L, p.E }, { p.B, p.S, p.E }, { p.B, p.S, p.Ev }
    local qt = make(distinct(numel(qs)), qs, "float64")
    local kt = make(distinct(numel(ks)), ks, "float64")
    local vt = make(distinct(numel(vs)), vs, "float64")
    local qr, kr, vr = values(qt), values(kt), values(vt)
    local op = op_of(p, mask_of(p, "float64"))
    for _, kind in ipairs(KINDS) do
      local what = p.what .. " " .. kind
      check_grad(function(q) return op(q, kt, vt) end,
        function(q) return ref_sdpa(q, kr, vr, p) end, qr, qs, kind, "dq " .. what)
      check_grad(function(k) return op(qt, k, vt) end,
        function(k) return ref_sdpa(qr, k, vr, p) end, kr, ks, kind, "dk " .. what)
      check_grad(function(v) return op(qt, kt, v) end,
        function(v) return ref_sdpa(qr, kr, v, p) end, vr, vs, kind, "dv " .. what)
    end
  end
end)
