-- Cases for the convolution, pooling and norm kernels of the table: conv, conv_backward, pool,
-- pool_backward, batch_norm, batch_norm_backward, row_norm, row_norm_backward, resample and
-- resample_backward (interpolate's steps). Every result is
-- compared with a plain-Lua reference written from the definitions (loops over the windows,
-- no im2col), gradients with central differences of that reference.
local assert = require "luassert"   -- a required file does not see busted's assert
local D = require "device.support"
local lt, numel, values, check = D.lt, D.numel, D.values, D.check
local distinct, make, input, numgrad, check_grad = D.distinct, D.make, D.input, D.numgrad,
  D.check_grad
local case, FLOATS, tol_of = D.case, D.FLOATS, D.tol_of

-- x's layouts for these kernels: broadcast inputs are covered by the elementwise cases
local KINDS = { "contiguous", "noncontig", "strided" }

-- float32 results are compared with a double reference computed from the float32 inputs
local function ftol(dt) return dt == "float32" and 1e-4 or 1e-10 end

-- gradient of sum(w * op(leaf)) for a leaf with t's values, layout and dtype
local function grad_of(op, t, w)
  local x = t:detach():requires_grad_()
  local y = op(x)
  ;(y * make(w, y.shape, y.dtype)):sum():backward()
  return x.grad
end

-- checks op's gradient for the leaf vals (shape, layout kind, dtype dt) against the reference
local function check_grad_dt(op, ref, vals, shape, kind, dt, what)
  if dt == "float64" then return check_grad(op, ref, vals, shape, kind, what) end
  local t, v = input(vals, shape, dt, kind)
  local ny = numel(op(t:detach()).shape)
  local w = distinct(ny)
  local wr = values(make(w, { ny }, dt))   -- the cotangent as the kernel sees it
  check(grad_of(op, t, w), shape, dt, numgrad(ref, v, wr), 1e-3, (what or "") .. " gradient")
end

local function pair(v) return type(v) == "table" and v or { v, v } end

-- ------------------------------------------------------------ convolution references

-- conv2d of x (N, C, H, W) with w (O, C/groups, KH, KW), b (O) or nil; o: stride, padding,
-- dilation (pairs), groups. Flat values in, flat values and the shape out.
local function ref_conv2d(x, xs, w, ws, b, o)
  local N, C, H, W = xs[1], xs[2], xs[3], xs[4]
  local O, Cg, KH, KW = ws[1], ws[2], ws[3], ws[4]
  local s, p, d, G = pair(o.stride or 1), pair(o.padding or 0), pair(o.dilation or 1), o.groups or 1
  local OH = (H + 2 * p[1] - d[1] * (KH - 1) - 1) // s[1] + 1
  local OW = (W + 2 * p[2] - d[2] * (KW - 1) - 1) // s[2] + 1
  local Og, y = O // G, {}
  for n = 0, N - 1 do
    for oc = 0, O - 1 do
      local g = oc // Og
      for oh = 0, OH - 1 do
        for ow = 0, OW - 1 do
          local acc = b and b[oc + 1] or 0
          for ci = 0, Cg - 1 do
            local c = g * Cg + ci
            for ki = 0, KH - 1 do
              local ih = oh * s[1] - p[1] + ki * d[1]
              if ih >= 0 and ih < H then
                for kj = 0, KW - 1 do
                  local iw = ow * s[2] - p[2] + kj * d[2]
                  if iw >= 0 and iw < W then
                    acc = acc + x[((n * C + c) * H + ih) * W + iw + 1] *
                      w[((oc * Cg + ci) * KH + ki) * KW + kj + 1]
                  end
                end
              end
            end
          end
          y[((n * O + oc) * OH + oh) * OW + ow + 1] = acc
        end
      end
    end
  end
  return y, { N, O, OH, OW }
end

-- conv_transpose2d of x (N, Cin, H, W) with w (Cin, Cout/groups, KH, KW): every input value
-- spreads over its window of the output (the adjoint of conv2d's gather).
local function ref_convt2d(x, xs, w, ws, b, o)
  local N, Cin, H, W = xs[1], xs[2], xs[3], xs[4]
  local Og, KH, KW = ws[2], ws[3], ws[4]
  local s, p, d, G = pair(o.stride or 1), pair(o.padding or 0), pair(o.dilation or 1), o.groups or 1
  local op = pair(o.output_padding or 0)
  local OH = (H - 1) * s[1] - 2 * p[1] + d[1] * (KH - 1) + op[1] + 1
  local OW = (W - 1) * s[2] - 2 * p[2] + d[2] * (KW - 1) + op[2] + 1
  local Cout, Cig, y = Og * G, Cin // G, {}
  for n = 0, N - 1 do
    for c = 0, Cout - 1 do
      for i = 0, OH * OW - 1 do y[(n * Cout + c) * OH * OW + i + 1] = b and b[c + 1] or 0 end
    end
  end
  for n = 0, N - 1 do
    for ci = 0, Cin - 1 do
      local g = ci // Cig
      for ih = 0, H - 1 do
        for iw = 0, W - 1 do
          local v = x[((n * Cin + ci) * H + ih) * W + iw + 1]
          for oc = 0, Og - 1 do
            for ki = 0, KH - 1 do
              local oh = ih * s[1] - p[1] + ki * d[1]
              if oh >= 0 and oh < OH then
                for kj = 0, KW - 1 do
                  local ow = iw * s[2] - p[2] + kj * d[2]
                  if ow >= 0 and ow < OW then
                    local at = ((n * Cout + g * Og + oc) * OH + oh) * OW + ow + 1
                    y[at] = y[at] + v * w[((ci * Og + oc) * KH + ki) * KW + kj + 1]
                  end
                end
              end
            end
          end
        end
      end
    end
  end
  return y, { N, Cout, OH, OW }
end

-- A convolution setting: x's and w's shapes (1-d ones get H = KH = 1 in the reference), the
-- options, whether it is transposed and has a bias.
local CONVS = {
  { what = "groups 2, stride (2,1), padding (1,0), dilation (1,2)", x = { 2, 4, 5, 6 },
    w = { 6, 2, 3, 2 }, o = { stride = { 2, 1 }, padding = { 1, 0 }, dilation = { 1, 2 },
    groups = 2 }, bias = true },
  { what = "batch of 1, 1x1 (the image is its own columns)", x = { 1, 3, 4, 5 },
    w = { 2, 3, 1, 1 }, o = {}, bias = true },
  { what = "several chunks of one sample (large image)", x = { 2, 8, 24, 24 },
    w = { 2, 8, 3, 3 }, o = { padding = 1 }, bias = false, nograd = true },
  { what = "conv1d, stride 2, padding 1", x = { 2, 3, 7 }, w = { 4, 3, 3 },
    o = { stride = 2, padding = 1 }, bias = true },
  { what = "transposed, groups 2, stride 2, padding 1, output_padding 1", x = { 2, 4, 3, 4 },
    w = { 4, 3, 3, 2 }, o = { stride = 2, padding = 1, output_padding = 1, groups = 2 },
    bias = true, transposed = true },
  { what = "transposed, batch of 1, dilation 2", x = { 1, 2, 3, 3 }, w = { 2, 2, 2, 2 },
    o = { dilation = 2 }, bias = false, transposed = true },
  { what = "conv_transpose1d, stride 3", x = { 2, 3, 4 }, w = { 3, 2, 2 }, o = { stride = 3 },
    bias = true, transposed = true },
}

-- the op and the reference of a setting, both as functions of (x, w, b)
local function conv_pair(cv)
  local oned = #cv.x == 3
  local name = (cv.transposed and "conv_transpose" or "conv") .. (oned and "1d" or "2d")
  local ref = cv.transposed and ref_convt2d or ref_conv2d
  local o = cv.o
  if oned then   -- the reference sees a 1-d op as a 2-d one of height 1
    local function first(v, dflt) return { dflt, type(v) == "table" and v[1] or v or dflt } end
    o = { stride = first(cv.o.stride, 1), padding = first(cv.o.padding, 0),
      dilation = first(cv.o.dilation, 1), output_padding = first(cv.o.output_padding, 0),
      groups = cv.o.groups }
  end
  local xs = oned and { cv.x[1], cv.x[2], 1, cv.x[3] } or cv.x
  local ws = oned and { cv.w[1], cv.w[2], 1, cv.w[3] } or cv.w
  local function op(x, w, b) return lt[name](x, w, b, cv.o) end
  local function rf(x, w, b)
    local y, ys = ref(x, xs, w, ws, b, o)
    if oned then ys = { ys[1], ys[2], ys[4] } end
    return y, ys
  end
  return op, rf
end

local function conv_inputs(cv)
  local nb = cv.transposed and cv.w[2] * (cv.o.groups or 1) or cv.w[1]
  return distinct(numel(cv.x)), distinct(numel(cv.w)), cv.bias and distinct(nb) or nil, nb
end

case("conv", "conv1d/2d and the transposed ones against the definition, float32/64, layouts",
  function()
    for _, cv in ipairs(CONVS) do
      local op, rf = conv_pair(cv)
      local xv, wv, bv, nb = conv_inputs(cv)
      for _, dt in ipairs(FLOATS) do
        for _, kind in ipairs(KINDS) do
          local x, xr = input(xv, cv.x, dt, kind)
          local w, wr = input(wv, cv.w, dt, kind == "contiguous" and kind or "noncontig")
          local b = bv and make(bv, { nb }, dt) or nil
          local want, ys = rf(xr, wr, b and values(b))
          check(op(x, w, b), ys, dt, want, ftol(dt), cv.what .. " " .. dt .. " " .. kind)
        end
      end
    end
    -- unbatched input: the batch of one without its dim
    local cv = CONVS[1]
    local op = conv_pair(cv)
    local xv, wv, bv = conv_inputs(cv)
    local shape = { table.unpack(cv.x, 2) }
    local one = {}
    for k, v in pairs(cv) do one[k] = v end
    one.x = { 1, table.unpack(shape) }
    local _, rf1 = conv_pair(one)
    local want, ys = rf1({ table.unpack(xv, 1, numel(one.x)) }, wv, bv)
    table.remove(ys, 1)
    check(op(make({ table.unpack(xv, 1, numel(one.x)) }, shape, "float64"),
      make(wv, cv.w, "float64"), make(bv, { #bv }, "float64")), ys, "float64", want, 1e-10,
      "unbatched")
  end)

case("conv_backward", "gradients of input, weight and bias against central differences",
  function()
    for _, cv in ipairs(CONVS) do
      if not cv.nograd then
        local op, rf = conv_pair(cv)
        local xv, wv, bv, nb = conv_inputs(cv)
        for _, dt in ipairs(FLOATS) do
          local xt, xr = input(xv, cv.x, dt, "contiguous")
          local wt, wr = input(wv, cv.w, dt, "contiguous")
          local bt = bv and make(bv, { nb }, dt) or nil
          local br = bt and values(bt)
          for _, kind in ipairs(dt == "float64" and KINDS or { "noncontig" }) do
            check_grad_dt(function(x) return op(x, wt, bt) end,
              function(x) return (rf(x, wr, br)) end, xr, cv.x, kind, dt,
              cv.what .. " dx " .. dt .. " " .. kind)
          end
          check_grad_dt(function(w) return op(xt, w, bt) end,
            function(w) return (rf(xr, w, br)) end, wr, cv.w, "contiguous", dt,
            cv.what .. " dw " .. dt)
          if bt then
            check_grad_dt(function(b) return op(xt, wt, b) end,
              function(b) return (rf(xr, wr, b)) end, br, { nb }, "contiguous", dt,
              cv.what .. " db " .. dt)
          end
        end
      end
    end
  end)

-- ------------------------------------------------------------ pooling references

local function out_size(n, k, s, p, d, ceil)
  local num = n + 2 * p - d * (k - 1) - 1
  local o = (ceil and -((-num) // s) or num // s) + 1
  if ceil and (o - 1) * s >= n + p then o = o - 1 end
  return o
end

-- The pool `kind` ("max", "avg", "adaptive_avg", "adaptive_max") of each (H, W) plane of x
-- (P planes, flat): values, 1-based indices (max kinds), and (OH, OW). o: kernel, stride,
-- padding, dilation (pairs), ceil_mode, count_include_pad, divisor_override; or out (pair) for
-- the adaptive kinds.
local function ref_pool(kind, x, P, H, W, o)
  local OH, OW
  local adaptive = kind:match("^adaptive") ~= nil
  local k, s, p, d
  if adaptive then
    OH, OW = o.out[1], o.out[2]
  else
    k, s, p = pair(o.kernel), pair(o.stride or o.kernel), pair(o.padding or 0)
    d = pair(kind == "max" and o.dilation or 1)
    OH = out_size(H, k[1], s[1], p[1], d[1], o.ceil_mode)
    OW = out_size(W, k[2], s[2], p[2], d[2], o.ceil_mode)
  end
  -- the taps of output o along an axis: positions (in the input) and the padded window size
  local function taps(axis, oi)
    local n = axis == 1 and H or W
    local t = {}
    if adaptive then
      local no = axis == 1 and OH or OW
      for i = (oi * n) // no, -((-(oi + 1) * n) // no) - 1 do t[#t + 1] = i end
      return t, #t
    end
    local lo = oi * s[axis] - p[axis]
    for i = 0, k[axis] - 1 do
      local at = lo + i * d[axis]
      if at >= 0 and at < n then t[#t + 1] = at end
    end
    return t, math.min(lo + k[axis], n + p[axis]) - lo
  end
  local y, idx = {}, {}
  for pl = 0, P - 1 do
    for oh = 0, OH - 1 do
      local rows, rpad = taps(1, oh)
      for ow = 0, OW - 1 do
        local cols, cpad = taps(2, ow)
        local at = (pl * OH + oh) * OW + ow + 1
        if kind:match("max") then
          local m, mi = -math.huge, rows[1] * W + cols[1]
          for _, ih in ipairs(rows) do
            for _, iw in ipairs(cols) do
              local v = x[(pl * H + ih) * W + iw + 1]
              if v > m or v ~= v then m, mi = v, ih * W + iw end
            end
          end
          y[at], idx[at] = m, mi + 1
        else
          local sum = 0
          for _, ih in ipairs(rows) do
            for _, iw in ipairs(cols) do sum = sum + x[(pl * H + ih) * W + iw + 1] end
          end
          local div = #rows * #cols
          if not adaptive then
            if o.divisor_override then div = o.divisor_override
            elseif o.count_include_pad ~= false then div = rpad * cpad end
          end
          y[at] = (#rows == 0 or #cols == 0) and 0 or sum / div
        end
      end
    end
  end
  return y, idx, OH, OW
end

-- A pool setting: kind, x's shape (1-d: (N, C, L)), the options as the kernels take them; `big`
-- ones are too large for central differences (their backward is the index scatter of the rest).
local POOLS = {
  { kind = "max", x = { 2, 3, 6, 8 }, o = { kernel = 2 }, what = "2x2 stride 2" },
  { kind = "max", x = { 1, 2, 7, 9 }, o = { kernel = 2 }, what = "2x2, odd sizes" },
  { kind = "max", x = { 2, 2, 7, 9 }, o = { kernel = 2, ceil_mode = true },
    what = "2x2, ceil_mode" },
  { kind = "max", x = { 2, 2, 7, 8 }, o = { kernel = { 3, 2 }, stride = { 2, 1 },
    padding = { 1, 1 }, dilation = { 2, 1 } }, what = "3x2, stride, padding, dilation" },
  { kind = "max", x = { 2, 3, 9 }, o = { kernel = 3, stride = 2, padding = 1 },
    what = "max_pool1d" },
  { kind = "avg", x = { 2, 2, 6, 7 }, o = { kernel = 3, stride = 2, padding = 1 },
    what = "3x3 counting the padding" },
  { kind = "avg", x = { 2, 2, 6, 7 }, o = { kernel = 3, stride = 2, padding = 1,
    count_include_pad = false, ceil_mode = true }, what = "3x3 without the padding, ceil" },
  { kind = "avg", x = { 1, 2, 5, 5 }, o = { kernel = 2, divisor_override = 3 },
    what = "divisor_override" },
  { kind = "avg", x = { 2, 3, 8 }, o = { kernel = 3, stride = 2, padding = 1 },
    what = "avg_pool1d" },
  { kind = "adaptive_avg", x = { 2, 3, 7, 5 }, o = { out = { 3, 2 } }, what = "7x5 -> 3x2" },
  { kind = "adaptive_avg", x = { 2, 2, 10 }, o = { out = { 1, 4 } }, what = "1-d 10 -> 4" },
  { kind = "adaptive_max", x = { 2, 3, 7, 5 }, o = { out = { 3, 2 } }, what = "7x5 -> 3x2" },
  { kind = "adaptive_max", x = { 1, 2, 9 }, o = { out = { 1, 4 } }, what = "1-d 9 -> 4" },
  -- float32 max pools other than 2x2 gather each tap for 256 outputs at once: whole rows,
  -- columns of wide rows in chunks, strides 1, 2 and others
  { kind = "max", x = { 1, 2, 9, 11 }, o = { kernel = 3, stride = 2, padding = 1 },
    what = "3x3 stride 2 padding 1" },
  { kind = "max", x = { 1, 1, 3, 600 }, o = { kernel = { 1, 3 }, stride = 1, padding = { 0, 1 } },
    what = "rows wider than a chunk", big = true },
  { kind = "max", x = { 1, 1, 40, 20 }, o = { kernel = 2, stride = 1 }, what = "chunks of rows",
    big = true },
  { kind = "max", x = { 1, 2, 10, 10 }, o = { kernel = 3, stride = 3, padding = 1, ceil_mode = true },
    what = "stride 3, ceil_mode" },
}

-- the op (returns out and, for max kinds, 1-based indices) and the reference of a setting
local function pool_pair(pc)
  local oned = #pc.x == 3
  local sd = oned and "1d" or "2d"
  local o, ro = pc.o, pc.o
  -- the H dim of a 1-d pool: a window of one row, no padding
  local function one(v, dflt, h) return { h or 1, type(v) == "table" and v[1] or v or dflt } end
  if oned then
    ro = { kernel = one(o.kernel), stride = o.stride and one(o.stride),
      padding = one(o.padding, 0, 0), dilation = one(o.dilation, 1), ceil_mode = o.ceil_mode,
      count_include_pad = o.count_include_pad, divisor_override = o.divisor_override,
      out = o.out and { 1, o.out[2] } }
  end
  local function op(x)
    if pc.kind == "max" then
      return lt["max_pool" .. sd](x, { kernel_size = o.kernel, stride = o.stride,
        padding = o.padding, dilation = o.dilation, ceil_mode = o.ceil_mode,
        return_indices = true })
    elseif pc.kind == "avg" then
      return lt["avg_pool" .. sd](x, { kernel_size = o.kernel, stride = o.stride,
        padding = o.padding, ceil_mode = o.ceil_mode, count_include_pad = o.count_include_pad,
        divisor_override = o.divisor_override })
    elseif pc.kind == "adaptive_avg" then
      return lt["adaptive_avg_pool" .. sd](x, oned and o.out[2] or o.out)
    end
    return lt["adaptive_max_pool" .. sd](x, oned and o.out[2] or o.out, true)
  end
  local H, W = oned and 1 or pc.x[3], pc.x[#pc.x]
  local P = pc.x[1] * pc.x[2]
  local function rf(x)
    local y, idx, OH, OW = ref_pool(pc.kind, x, P, H, W, ro)
    local ys = oned and { pc.x[1], pc.x[2], OW } or { pc.x[1], pc.x[2], OH, OW }
    return y, idx, ys
  end
  return op, rf
end

case("pool", "max, avg, adaptive avg and max pools, 1-d and 2-d, against the definition",
  function()
    for _, pc in ipairs(POOLS) do
      local op, rf = pool_pair(pc)
      local xv = distinct(numel(pc.x))
      for _, dt in ipairs(FLOATS) do
        for _, kind in ipairs(KINDS) do
          local x, xr = input(xv, pc.x, dt, kind)
          local want, widx, ys = rf(xr)
          local y, idx = op(x)
          local what = pc.kind .. " " .. pc.what .. " " .. dt .. " " .. kind
          check(y, ys, dt, want, tol_of(dt), what)
          if pc.kind:match("max") then check(idx, ys, "int64", widx, 0, what .. " indices") end
        end
      end
    end
  end)

case("pool", "max pools: ties give the first maximum, NaN wins (the last one), -inf kept",
  function()
    for _, dt in ipairs(FLOATS) do
      for _, pc in ipairs({ POOLS[1], POOLS[2], POOLS[4], POOLS[12], POOLS[14], POOLS[15],
        POOLS[16], POOLS[17] }) do
        local n = numel(pc.x)
        local xv = {}
        for i = 1, n do xv[i] = (i * 7) % 5 - 2 end   -- many ties
        xv[3], xv[10], xv[11], xv[n] = 0 / 0, -math.huge, 0 / 0, 0 / 0
        local op, rf = pool_pair(pc)
        local x = make(xv, pc.x, dt)
        local want, widx, ys = rf(values(x))
        local y, idx = op(x)
        check(y, ys, dt, want, 0, pc.what .. " " .. dt)
        check(idx, ys, "int64", widx, 0, pc.what .. " indices " .. dt)
      end
    end
  end)

case("pool", "the same bits with one thread and with several", function()
  local keep = lt.get_num_threads()
  local x = lt.randn({ 8, 16, 30, 30 })
  local runs = {}
  for r, nt in ipairs({ 1, 3 }) do
    lt.set_num_threads(nt)
    local xg = x:clone():requires_grad_()
    local y, idx = lt.max_pool2d(xg, { kernel_size = 2, return_indices = true })
    local a = lt.avg_pool2d(xg, { kernel_size = 3, stride = 2, padding = 1 })
    ;(y:sum() + (a * a):sum()):backward()
    runs[r] = { y, idx, a, xg.grad }
  end
  lt.set_num_threads(keep)
  for i = 1, 4 do assert.is_true(lt.equal(runs[1][i], runs[2][i]), "output " .. i) end
end)

case("pool_backward", "gradients of every pool kind against central differences", function()
  for _, pc in ipairs(POOLS) do
    if pc.big then goto next end
    local op, rf = pool_pair(pc)
    local xv = distinct(numel(pc.x))
    for _, dt in ipairs(FLOATS) do
      for _, kind in ipairs(dt == "float64" and KINDS or { "contiguous" }) do
        check_grad_dt(function(x) return (op(x)) end, function(x) return (rf(x)) end, xv, pc.x,
          kind, dt, pc.kind .. " " .. pc.what .. " " .. dt .. " " .. kind)
      end
    end
    ::next::
  end
end)

case("pool_backward", "2x2 max pool: the gradient goes to the recorded index, -0 becomes +0",
  function()
    for _, dt in ipairs(FLOATS) do
      local xv = {}
      for i = 1, 2 * 5 * 7 do xv[i] = (i * 3) % 4 end   -- ties: the first maximum gets it
      local x = make(xv, { 1, 2, 5, 7 }, dt):requires_grad_()
      local y, idx = lt.max_pool2d(x, { kernel_size = 2, return_indices = true })
      local g = {}
      for i = 1, numel(y.shape) do g[i] = i % 3 == 0 and -0.0 or i end
      y:backward(make(g, y.shape, dt))
      local want = {}
      for i = 1, #xv do want[i] = 0 end
      local iv = values(idx)
      for i = 1, #iv do
        local plane = (i - 1) // 6   -- 2 x 3 outputs per plane
        want[plane * 35 + iv[i]] = g[i] + 0.0
      end
      check(x.grad, { 1, 2, 5, 7 }, dt, want, 0, "2x2 backward " .. dt)
      for i, v in ipairs(values(x.grad)) do
        assert.is_true(1 / v ~= -math.huge or want[i] ~= 0, "no negative zero at " .. i)
      end
    end
  end)

-- ------------------------------------------------------------ norm references

-- batch norm of x (N, C, L) flat: y, the batch mean and biased variance per channel
local function ref_batch_norm(x, N, C, L, w, b, eps, mean, var)
  local M = N * L
  local bm, bv = {}, {}
  for c = 1, C do
    local s = 0
    for n = 0, N - 1 do for l = 1, L do s = s + x[(n * C + c - 1) * L + l] end end
    bm[c] = s / M
    local q = 0
    for n = 0, N - 1 do for l = 1, L do q = q + (x[(n * C + c - 1) * L + l] - bm[c]) ^ 2 end end
    bv[c] = q / M
  end
  mean, var = mean or bm, var or bv
  local y = {}
  for n = 0, N - 1 do
    for c = 1, C do
      for l = 1, L do
        local at = (n * C + c - 1) * L + l
        y[at] = (x[at] - mean[c]) / math.sqrt(var[c] + eps) * (w and w[c] or 1) + (b and b[c] or 0)
      end
    end
  end
  return y, bm, bv
end

-- row norms of R rows of D values: "layer", "rms", or "group" (rows = (n, group) blocks of
-- Cg*L values; w, b per channel)
local function ref_row_norm(kind, x, R, Dn, w, b, eps, G, Cg, L)
  local y = {}
  for r = 0, R - 1 do
    local mu, q = 0, 0
    if kind ~= "rms" then
      for i = 1, Dn do mu = mu + x[r * Dn + i] end
      mu = mu / Dn
    end
    for i = 1, Dn do q = q + (x[r * Dn + i] - mu) ^ 2 end
    local rs = 1 / math.sqrt(q / Dn + eps)
    for i = 1, Dn do
      local k = kind == "group" and (r % G) * Cg + (i - 1) // L + 1 or i
      y[r * Dn + i] = (x[r * Dn + i] - mu) * rs * (w and w[k] or 1) + (b and b[k] or 0)
    end
  end
  return y
end

local BNS = { { 4, 3 }, { 3, 2, 5 }, { 2, 3, 2, 3 }, { 1, 2, 2, 2 } }

local function bn_dims(shape)
  local L = 1
  for i = 3, #shape do L = L * shape[i] end
  return shape[1], shape[2], L
end

case("batch_norm", "training (running stats updated) and eval, with and without affine",
  function()
    for _, dt in ipairs(FLOATS) do
      for _, shape in ipairs(BNS) do
        local N, C, L = bn_dims(shape)
        for _, kind in ipairs(KINDS) do
          local x, xr = input(distinct(numel(shape)), shape, dt, kind)
          local w, b = make(distinct(C), { C }, dt), make(distinct(C), { C }, dt)
          local rm0, rv0 = distinct(C), {}
          for c = 1, C do rv0[c] = 0.5 + c / 4 end
          local rm, rv = make(rm0, { C }, dt), make(rv0, { C }, dt)
          local rm0v, rv0v = values(rm), values(rv)
          local what = table.concat(shape, "x") .. " " .. dt .. " " .. kind
          local want, bm, bv = ref_batch_norm(xr, N, C, L, values(w), values(b), 1e-5)
          check(lt.batch_norm(x, rm, rv, w, b, true, 0.25, 1e-5), shape, dt, want, ftol(dt),
            "training " .. what)
          local wm, wv = {}, {}
          for c = 1, C do
            wm[c] = 0.75 * rm0v[c] + 0.25 * bm[c]
            wv[c] = 0.75 * rv0v[c] + 0.25 * bv[c] * (N * L) / (N * L - 1)
          end
          check(rm, { C }, dt, wm, ftol(dt), "running_mean " .. what)
          check(rv, { C }, dt, wv, ftol(dt), "running_var " .. what)
          local ev = ref_batch_norm(xr, N, C, L, nil, nil, 1e-3, values(rm), values(rv))
          check(lt.batch_norm(x, rm, rv, nil, nil, false, 0.1, 1e-3), shape, dt, ev, ftol(dt),
            "eval " .. what)
          check(lt.batch_norm(x, nil, nil, nil, nil, true, 0.1, 1e-5), shape, dt,
            (ref_batch_norm(xr, N, C, L, nil, nil, 1e-5)), ftol(dt), "no running stats " .. what)
        end
      end
    end
  end)

case("batch_norm_backward", "gradients of input, weight and bias in training and eval",
  function()
    for _, dt in ipairs(FLOATS) do
      for _, shape in ipairs(BNS) do
        local N, C, L = bn_dims(shape)
        local xv, wv, bv = distinct(numel(shape)), distinct(C), distinct(C)
        local xt = make(xv, shape, dt)
        local wt, bt = make(wv, { C }, dt), make(bv, { C }, dt)
        local xr, wr, br = values(xt), values(wt), values(bt)
        local rm, rv = make(distinct(C), { C }, dt), lt.ones({ C }, { dtype = dt })
        local rmv, rvv = values(rm), values(rv)
        local what = table.concat(shape, "x") .. " " .. dt
        for _, kind in ipairs(dt == "float64" and KINDS or { "noncontig" }) do
          check_grad_dt(function(x) return lt.batch_norm(x, nil, nil, wt, bt, true, 0.1, 1e-5) end,
            function(x) return (ref_batch_norm(x, N, C, L, wr, br, 1e-5)) end, xr, shape, kind,
            dt, "training dx " .. what .. " " .. kind)
        end
        check_grad_dt(function(x) return lt.batch_norm(x, rm, rv, wt, bt, false, 0.1, 1e-5) end,
          function(x) return (ref_batch_norm(x, N, C, L, wr, br, 1e-5, rmv, rvv)) end, xr, shape,
          "contiguous", dt, "eval dx " .. what)
        check_grad_dt(function(w) return lt.batch_norm(xt, nil, nil, w, bt, true, 0.1, 1e-5) end,
          function(w) return (ref_batch_norm(xr, N, C, L, w, br, 1e-5)) end, wr, { C },
          "contiguous", dt, "dw " .. what)
        check_grad_dt(function(b) return lt.batch_norm(xt, nil, nil, wt, b, true, 0.1, 1e-5) end,
          function(b) return (ref_batch_norm(xr, N, C, L, wr, b, 1e-5)) end, br, { C },
          "contiguous", dt, "db " .. what)
      end
    end
  end)

-- A row-norm setting: the op on (x, w, b), the reference on flat values, shapes.
local ROWNORMS = {
  { what = "layer_norm over the last dim", x = { 3, 5 }, p = { 5 },
    op = function(x, w, b) return lt.layer_norm(x, { 5 }, w, b, 1e-5) end,
    ref = function(x, w, b) return ref_row_norm("layer", x, 3, 5, w, b, 1e-5) end },
  { what = "layer_norm over two dims, batch of 1", x = { 1, 2, 3, 4 }, p = { 3, 4 },
    op = function(x, w, b) return lt.layer_norm(x, { 3, 4 }, w, b, 1e-3) end,
    ref = function(x, w, b) return ref_row_norm("layer", x, 2, 12, w, b, 1e-3) end },
  { what = "rms_norm", x = { 2, 3, 4 }, p = { 4 }, nobias = true,
    op = function(x, w) return lt.rms_norm(x, { 4 }, w, 1e-6) end,
    ref = function(x, w) return ref_row_norm("rms", x, 6, 4, w, nil, 1e-6) end },
  { what = "group_norm, 2 groups of 2 channels", x = { 2, 4, 3 }, p = { 4 },
    op = function(x, w, b) return lt.group_norm(x, 2, w, b, 1e-5) end,
    ref = function(x, w, b) return ref_row_norm("group", x, 4, 6, w, b, 1e-5, 2, 2, 3) end },
  { what = "group_norm, 3 groups, 2-d images", x = { 1, 3, 2, 2 }, p = { 3 },
    op = function(x, w, b) return lt.group_norm(x, 3, w, b, 1e-5) end,
    ref = function(x, w, b) return ref_row_norm("group", x, 3, 4, w, b, 1e-5, 3, 1, 4) end },
}

case("row_norm", "layer, rms and group norm, with and without affine, float32/64, layouts",
  function()
    for _, rn in ipairs(ROWNORMS) do
      for _, dt in ipairs(FLOATS) do
        for _, kind in ipairs(KINDS) do
          local x, xr = input(distinct(numel(rn.x)), rn.x, dt, kind)
          local w = make(distinct(numel(rn.p)), rn.p, dt)
          local b = not rn.nobias and make(distinct(numel(rn.p)), rn.p, dt) or nil
          local what = rn.what .. " " .. dt .. " " .. kind
          check(rn.op(x, w, b), rn.x, dt, rn.ref(xr, values(w), b and values(b)), ftol(dt), what)
          check(rn.op(x, nil, nil), rn.x, dt, rn.ref(xr, nil, nil), ftol(dt), "plain " .. what)
        end
      end
    end
  end)

case("row_norm_backward", "gradients of input, weight and bias against central differences",
  function()
    for _, rn in ipairs(ROWNORMS) do
      for _, dt in ipairs(FLOATS) do
        local xt = make(distinct(numel(rn.x)), rn.x, dt)
        local wt = make(distinct(numel(rn.p)), rn.p, dt)
        local bt = not rn.nobias and make(distinct(numel(rn.p)), rn.p, dt) or nil
        local xr, wr, br = values(xt), values(wt), bt and values(bt)
        local what = rn.what .. " " .. dt
        for _, kind in ipairs(dt == "float64" and KINDS or { "noncontig" }) do
          check_grad_dt(function(x) return rn.op(x, wt, bt) end,
            function(x) return rn.ref(x, wr, br) end, xr, rn.x, kind, dt, "dx " .. what)
        end
        check_grad_dt(function(x) return rn.op(x, nil, nil) end,
          function(x) return rn.ref(x, nil, nil) end, xr, rn.x, "contiguous", dt,
          "dx plain " .. what)
        check_grad_dt(function(w) return rn.op(xt, w, bt) end,
          function(w) return rn.ref(xr, w, br) end, wr, rn.p, "contiguous", dt, "dw " .. what)
        if bt then
          check_grad_dt(function(b) return rn.op(xt, wt, b) end,
            function(b) return rn.ref(xr, wr, b) end, br, rn.p, "contiguous", dt, "db " .. what)
        end
      end
    end
  end)

-- ------------------------------------------------------------ resample (interpolate's steps)

-- y[o, j, i] = x[o, i0[j], i] (1 - w1[j]) + x[o, i1[j], i] w1[j] (or x[o, i0[j], i]), x as
-- (O, Nin, In) around dim d of shape; 1-based positions
local function ref_resample(xv, shape, d, i0, i1, w1)
  local O, In = 1, 1
  for k = 1, d - 1 do O = O * shape[k] end
  for k = d + 1, #shape do In = In * shape[k] end
  local Nin, out = shape[d], {}
  for o = 0, O - 1 do
    for j = 1, #i0 do
      for i = 1, In do
        local a = xv[(o * Nin + i0[j] - 1) * In + i]
        out[#out + 1] = w1 and a * (1 - w1[j]) + xv[(o * Nin + i1[j] - 1) * In + i] * w1[j] or a
      end
    end
  end
  return out
end

local RESAMPLE = {
  -- shape, dim, i0, i1, w1
  { { 2, 3, 4 }, 3, { 1, 1, 2, 2, 3, 3, 4, 4 }, { 2, 2, 3, 3, 4, 4, 4, 4 },
    { 0, 0.25, 0.75, 0.25, 0.75, 0.25, 0.75, 0 } },
  { { 2, 3, 4 }, 2, { 1, 2, 3, 1, 3 }, { 2, 3, 3, 2, 1 }, { 0.5, 0.1, 0, 0.9, 1 } },
  { { 3, 4 }, 1, { 3, 1 }, { 2, 2 }, { 0.3, 0.6 } },
  { { 2, 3, 4 }, 2, { 1, 1, 2, 3, 3, 3 } },   -- nearest: i0 only
  { { 2, 3, 4 }, 3, { 4, 1 } },
  { { 0, 3, 4 }, 3, { 1, 2 }, { 2, 3 }, { 0.5, 0.5 } },
}

local function run_resample(x, c)
  local dt = x.dtype
  local i1 = c[4] and make(c[4], { #c[4] }, "int64") or nil
  local w1 = c[5] and make(c[5], { #c[5] }, dt) or nil
  return lt.resample(x, c[2], make(c[3], { #c[3] }, "int64"), i1, w1)
end

local function out_shape(c)
  local s = {}
  for k, n in ipairs(c[1]) do s[k] = k == c[2] and #c[3] or n end
  return s
end

case("resample", "linear and nearest along every dim against the definition, float32/64, layouts",
  function()
    for _, dt in ipairs(FLOATS) do
      for _, c in ipairs(RESAMPLE) do
        for _, kind in ipairs(KINDS) do
          local x, xv = input(distinct(numel(c[1])), c[1], dt, kind)
          local w1 = c[5] and values(make(c[5], { #c[5] }, dt)) or nil
          check(run_resample(x, c), out_shape(c), dt, ref_resample(xv, c[1], c[2], c[3], c[4], w1),
            ftol(dt), ("resample %s dim %d %s %s"):format(table.concat(c[1], "x"), c[2], dt, kind))
        end
      end
    end
    local x = lt.randn(2, 3)
    local function fails(pattern, ...)
      local ok, err = pcall(lt.resample, x, ...)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    local i = lt.tensor({ 1, 2 }, { dtype = "int64" })
    fails("i0 holds 4, out of range", 2, lt.tensor({ 1, 4 }, { dtype = "int64" }))
    fails("i1 holds 0, out of range", 2, i, lt.tensor({ 0, 1 }, { dtype = "int64" }), lt.zeros(2))
    fails("i1 and w1 go together", 2, i, i)
    fails("w1 takes no gradient", 2, i, i, lt.zeros(2):requires_grad_())
    fails("expected w1 of dtype float32 and shape %[2%]", 2, i, i, lt.zeros(3))
    local ok, err = pcall(lt.resample, x:long(), 2, i)
    assert.is_false(ok)
    assert.matches("expected a float32 or float64 input, got int64", tostring(err))
  end)

case("resample_backward", "gradients along every dim against central differences", function()
  for _, c in ipairs(RESAMPLE) do
    if numel(c[1]) > 0 then
      for _, kind in ipairs(KINDS) do
        check_grad(function(x) return run_resample(x, c) end, function(v)
          return ref_resample(v, c[1], c[2], c[3], c[4], c[5])
        end, distinct(numel(c[1])), c[1], kind,
          ("resample %s dim %d %s"):format(table.concat(c[1], "x"), c[2], kind))
      end
    end
  end
end)
