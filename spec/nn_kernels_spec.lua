-- The nn kernels of the C core (src/nn_*.c through src/bind/l_nn.c): outputs and gradients
-- against PyTorch fixtures (spec/fixtures/gen_nn_kernels.py), float64 gradchecks, layout
-- variants and bad-input errors.
local lt = require "lantern"
local support = require "support"
local cases = dofile("spec/fixtures/nn_kernels.lua")

local function mk(spec, dtype)
  local t = lt.tensor(spec.data, dtype and { dtype = dtype } or nil)
  return t:reshape(spec.shape)
end

local function flat(t)
  local n = t:numel()
  local l = t:reshape({ n }):tolist()
  return l
end

-- Checks that tensor `a` has the fixture's shape and values: |a - e| <= rtol * (|e| + scale),
-- where scale is the largest |e| (sums that cancel to about zero are held to the tensor's scale).
local function assert_close(a, e, rtol, what)
  assert(a ~= nil, what .. ": missing")
  local sa = a:size()
  assert.are.same(e.shape, sa, what .. ": shape")
  local av, ev = flat(a), e.data
  local scale = 0
  for i = 1, #ev do scale = math.max(scale, math.abs(ev[i])) end
  local worst, wi = 0, nil
  for i = 1, #ev do
    local err = math.abs(av[i] - ev[i]) / (math.abs(ev[i]) + 0.1 * scale + 1e-30)
    if err ~= err then err = math.huge end
    if err > worst then worst, wi = err, i end
  end
  if worst > rtol then
    error(string.format("%s: element %d is %.10g, expected %.10g (relative error %.3g > %g)",
      what, wi, av[wi], ev[wi], worst, rtol), 2)
  end
end

local function assert_equal_ints(a, e, what)
  assert.are.same(e.shape, a:size(), what .. ": shape")
  assert.are.same(e.data, flat(a), what)
end

-- Calls the op of case c on tensors T; returns the output and (max pools) the indices.
local function call(c, T)
  local op = c.op
  if op:find("^conv") then
    return lt[op](T.x, T.w, T.b, c.opts)
  elseif op:find("^max_pool") then
    local o = {}
    for k, v in pairs(c.opts) do o[k] = v end
    o.return_indices = true
    return lt[op](T.x, o)
  elseif op:find("^avg_pool") then
    return lt[op](T.x, c.opts)
  elseif op:find("^adaptive_max") then
    return lt[op](T.x, c.output_size, true)
  elseif op:find("^adaptive") then
    return lt[op](T.x, c.output_size)
  elseif op == "batch_norm" then
    return lt.batch_norm(T.x, T.rm, T.rv, T.w, T.b, c.training, c.momentum, c.eps)
  elseif op == "layer_norm" then
    return lt.layer_norm(T.x, c.normalized_shape, T.w, T.b, c.eps)
  elseif op == "group_norm" then
    return lt.group_norm(T.x, c.num_groups, T.w, T.b, c.eps)
  elseif op == "rms_norm" then
    return lt.rms_norm(T.x, c.normalized_shape, T.w, c.eps)
  elseif op == "embedding" then
    return lt.embedding(T.indices, T.w, c.padding_idx)
  elseif op == "cross_entropy" or op == "nll_loss" then
    return lt[op](T.x, T.target, { weight = T.w, reduction = c.reduction,
      ignore_index = c.ignore_index, label_smoothing = c.label_smoothing })
  end
  error("unknown op " .. op)
end

local node_names = {
  conv1d = "ConvolutionBackward0", conv2d = "ConvolutionBackward0",
  conv_transpose1d = "ConvolutionBackward0", conv_transpose2d = "ConvolutionBackward0",
  max_pool1d = "MaxPool2DWithIndicesBackward0", max_pool2d = "MaxPool2DWithIndicesBackward0",
  avg_pool1d = "AvgPool2DBackward0", avg_pool2d = "AvgPool2DBackward0",
  adaptive_avg_pool1d = "AdaptiveAvgPool2DBackward0",
  adaptive_avg_pool2d = "AdaptiveAvgPool2DBackward0",
  adaptive_max_pool2d = "AdaptiveMaxPool2DBackward0",
  batch_norm = "NativeBatchNormBackward0", layer_norm = "NativeLayerNormBackward0",
  group_norm = "NativeGroupNormBackward0", rms_norm = "RmsNormBackward0",
  embedding = "EmbeddingBackward0",
  cross_entropy = "NllLossBackward0", nll_loss = "NllLossBackward0",
}

local function run_case(c, dtype, rtol)
  local T = {}
  for k, v in pairs(c.t) do
    if k == "indices" or k == "target" then
      T[k] = mk(v)
    else
      T[k] = mk(v, dtype)
    end
  end
  for _, k in ipairs(c.diff) do T[k]:requires_grad_(true) end
  local y, idx = call(c, T)
  assert.are.equal(dtype, y.dtype)
  assert.are.equal(node_names[c.op], y.grad_fn)
  assert_close(y, c.expect.y, rtol, c.op .. " " .. c.name .. " output")
  if c.expect.indices then assert_equal_ints(idx, c.expect.indices, c.op .. " indices") end
  if c.expect.rm then
    assert_close(T.rm, c.expect.rm, rtol, "running_mean")
    assert_close(T.rv, c.expect.rv, rtol, "running_var")
  end
  local gy = mk(c.expect.gy, dtype)
  local loss = (y * gy):sum()
  loss:backward()
  for _, k in ipairs(c.diff) do
    assert_close(T[k].grad, c.expect["g" .. k], rtol, c.op .. " " .. c.name .. " grad of " .. k)
  end
end

describe("nn kernels match PyTorch", function()
  for _, c in ipairs(cases) do
    it(c.op .. " " .. c.name .. " (float32)", function() run_case(c, "float32", 1e-5) end)
    it(c.op .. " " .. c.name .. " (float64)", function() run_case(c, "float64", 1e-10) end)
  end
end)

-------------------------------------------------------------------------------- gradcheck
local function rnd(...)
  return lt.randn({ ... }, { dtype = "float64", requires_grad = true })
end

describe("nn kernels gradcheck (float64)", function()
  local gc = lt.autograd.gradcheck
  before_each(function() lt.manual_seed(7) end)

  it("conv2d with stride, padding, dilation, groups and bias", function()
    local x, w, b = rnd(2, 4, 5, 6), rnd(6, 2, 2, 3), rnd(6)
    assert.is_true(gc(function(x_, w_, b_)
      return lt.conv2d(x_, w_, b_, { stride = { 2, 1 }, padding = { 1, 2 }, dilation = { 1, 2 }, groups = 2 })
    end, { x, w, b }))
  end)
  it("conv2d padding='same' with an even kernel", function()
    local x, w = rnd(1, 2, 4, 5), rnd(2, 2, 2, 4)
    assert.is_true(gc(function(x_, w_) return lt.conv2d(x_, w_, nil, { padding = "same" }) end, { x, w }))
  end)
  it("conv1d", function()
    local x, w, b = rnd(2, 3, 7), rnd(2, 3, 3), rnd(2)
    assert.is_true(gc(function(x_, w_, b_) return lt.conv1d(x_, w_, b_, { stride = 2, padding = 1 }) end, { x, w, b }))
  end)
  it("conv_transpose2d", function()
    local x, w, b = rnd(2, 4, 3, 3), rnd(4, 1, 3, 2), rnd(2)
    assert.is_true(gc(function(x_, w_, b_)
      return lt.conv_transpose2d(x_, w_, b_, { stride = 2, padding = 1, output_padding = 1, groups = 2 })
    end, { x, w, b }))
  end)
  it("conv_transpose1d", function()
    local x, w = rnd(1, 2, 4), rnd(2, 3, 3)
    assert.is_true(gc(function(x_, w_) return lt.conv_transpose1d(x_, w_, nil, { stride = 2, dilation = 2 }) end, { x, w }))
  end)
  it("max_pool2d and max_pool1d", function()
    local x = rnd(2, 2, 5, 6)
    assert.is_true(gc(function(x_) return lt.max_pool2d(x_, { kernel_size = 3, stride = 2, padding = 1, ceil_mode = true }) end, { x }))
    assert.is_true(gc(function(x_) return lt.max_pool2d(x_, 2) end, { x }))
    local y = rnd(2, 3, 7)
    assert.is_true(gc(function(y_) return lt.max_pool1d(y_, { kernel_size = 2, dilation = 2 }) end, { y }))
  end)
  it("avg_pool2d, avg_pool1d", function()
    local x = rnd(2, 2, 5, 6)
    assert.is_true(gc(function(x_)
      return lt.avg_pool2d(x_, { kernel_size = 3, stride = 2, padding = 1, ceil_mode = true, count_include_pad = false })
    end, { x }))
    assert.is_true(gc(function(x_) return lt.avg_pool1d(x_:reshape({ 4, 5, 6 }), 3) end, { x }))
  end)
  it("adaptive pools", function()
    local x = rnd(2, 2, 5, 7)
    assert.is_true(gc(function(x_) return lt.adaptive_avg_pool2d(x_, { 3, 4 }) end, { x }))
    assert.is_true(gc(function(x_) return lt.adaptive_max_pool2d(x_, { 2, 3 }) end, { x }))
    assert.is_true(gc(function(x_) return lt.adaptive_avg_pool1d(x_:reshape({ 4, 5, 7 }), 3) end, { x }))
  end)
  it("batch_norm training and eval", function()
    local x, w, b = rnd(4, 3, 5), rnd(3), rnd(3)
    assert.is_true(gc(function(x_, w_, b_) return lt.batch_norm(x_, nil, nil, w_, b_, true) end, { x, w, b }))
    local rm, rv = lt.zeros(3, { dtype = "float64" }), lt.ones(3, { dtype = "float64" })
    assert.is_true(gc(function(x_, w_, b_) return lt.batch_norm(x_, rm, rv, w_, b_, false) end, { x, w, b }))
    -- planes of 16 values and more take the per-plane loops, shorter ones the row walk
    local x2 = rnd(2, 3, 17)
    assert.is_true(gc(function(x_, w_, b_) return lt.batch_norm(x_, nil, nil, w_, b_, true) end, { x2, w, b }))
    assert.is_true(gc(function(x_, w_, b_) return lt.batch_norm(x_, rm, rv, w_, b_, false) end, { x2, w, b }))
    local x1 = rnd(5, 3)
    assert.is_true(gc(function(x_, w_, b_) return lt.batch_norm(x_, nil, nil, w_, b_, true) end, { x1, w, b }))
  end)
  -- in eval and in training, where the running statistics stay as they were (as PyTorch)
  it("batch_norm of empty planes gives an empty result", function()
    local bn = lt.nn.BatchNorm1d(3)
    for _, training in ipairs { false, true } do
      bn:train(training)
      local x = lt.randn(2, 3, 0):requires_grad_()
      local y = bn(x)
      assert.are.same({ 2, 3, 0 }, y:size())
      y:sum():backward()
      assert.are.same({ 2, 3, 0 }, x.grad:size())
      assert.are.same({ 0, 0, 0 }, bn.running_mean:tolist())
      assert.are.same({ 1, 1, 1 }, bn.running_var:tolist())
    end
    assert.are.same({ 0, 3 }, lt.nn.functional.batch_norm(lt.randn(0, 3), nil, nil, nil, nil, true):size())
  end)
  it("layer_norm, group_norm, rms_norm", function()
    local x = rnd(3, 4, 5)
    local w, b = rnd(4, 5), rnd(4, 5)
    assert.is_true(gc(function(x_, w_, b_) return lt.layer_norm(x_, { 4, 5 }, w_, b_) end, { x, w, b }))
    local gw, gb = rnd(4), rnd(4)
    assert.is_true(gc(function(x_, w_, b_) return lt.group_norm(x_, 2, w_, b_) end, { x, gw, gb }))
    local rw = rnd(5)
    assert.is_true(gc(function(x_, w_) return lt.rms_norm(x_, 5, w_, 1e-6) end, { x, rw }))
  end)
  it("cross_entropy and nll_loss", function()
    local x, w = rnd(4, 5, 3), lt.rand(5, { dtype = "float64" }) + 0.5
    local t = lt.tensor({ { 1, 5, -100 }, { 2, 2, 4 }, { 3, 1, 5 }, { -100, 4, 4 } })
    for _, r in ipairs({ "mean", "sum", "none" }) do
      assert.is_true(gc(function(x_)
        return lt.cross_entropy(x_, t, { weight = w, reduction = r, label_smoothing = 0.15 })
      end, { x }))
      assert.is_true(gc(function(x_) return lt.nll_loss(x_, t, { weight = w, reduction = r }) end, { x }))
    end
  end)
  it("embedding", function()
    local w = rnd(5, 3)
    local idx = lt.tensor({ { 1, 5, 2 }, { 2, 2, 4 } })
    assert.is_true(gc(function(w_) return lt.embedding(idx, w_) end, { w }))
  end)
end)

-------------------------------------------------------------------------------- layouts
local function max_abs_diff(a, b)
  return (a - b):abs():max():item()
end

-- im2col convolutions take several samples per GEMM where a sample's column side (O x L) is
-- small, and one where it holds 32768 elements or more (src/cpu/conv.c, SAMPLE_ALONE): both
-- against shifted slices times the weight's taps, forward and every gradient, at 1 and 2
-- threads; the transposed convolution is checked as the adjoint, <conv(x), y> = <x, convT(y)>
describe("im2col convolutions, few and many samples per GEMM", function()
  -- conv2d of x (N, C, H, W) with w (O, C, 3, 3), padding 1, stride 1, from its nine taps
  local function by_taps(x, w, b)
    local N, C, H, W, O = x:size(1), x:size(2), x:size(3), x:size(4), w:size(1)
    local xp = lt.nn.functional.pad(x, { 1, 1, 1, 1 })
    local y
    for ki = 1, 3 do
      for kj = 1, 3 do
        local xs = xp:narrow(3, ki, H):narrow(4, kj, W):permute(2, 1, 3, 4):reshape(C, N * H * W)
        local t = w:select(4, kj):select(3, ki):matmul(xs)
        y = y and y + t or t
      end
    end
    return (y + b:view(O, 1)):reshape(O, N, H, W):permute(2, 1, 3, 4)
  end
  it("agree with the taps summed, forward and gradients", function()
    local before = lt.get_num_threads()
    finally(function() lt.set_num_threads(before) end)
    lt.manual_seed(21)
    -- 2 x 64 x 32 x 32 is a large column side (65536 per sample, one per GEMM; 3 channels keep
    -- it off the Winograd path); 3 x 8 x 10 x 10 a small one (chunks of samples)
    for _, sh in ipairs { { 2, 3, 64, 32 }, { 3, 2, 8, 10 } } do
      local N, C, O, S = table.unpack(sh)
      for _, threads in ipairs { 1, 2 } do
        lt.set_num_threads(threads)
        local x = lt.randn({ N, C, S, S }, { dtype = "float64", requires_grad = true })
        local w = lt.randn({ O, C, 3, 3 }, { dtype = "float64", requires_grad = true })
        local b = lt.randn({ O }, { dtype = "float64", requires_grad = true })
        local g = lt.randn(N, O, S, S):double()
        local y = lt.conv2d(x, w, b, { padding = 1 })
        y:backward(g)
        local gx, gw, gb = x.grad, w.grad, b.grad
        x.grad, w.grad, b.grad = nil, nil, nil
        local r = by_taps(x, w, b)
        r:backward(g)
        local label = table.concat(sh, "x") .. " threads " .. threads
        assert.is_true((y - r):abs():max():item() < 1e-11, label .. " forward")
        assert.is_true((gx - x.grad):abs():max():item() < 1e-10, label .. " input gradient")
        assert.is_true((gw - w.grad):abs():max():item() < 1e-9, label .. " weight gradient")
        assert.is_true((gb - b.grad):abs():max():item() < 1e-9, label .. " bias gradient")
        local yt = lt.randn(N, O, S, S):double()
        local lhs = (lt.conv2d(x, w, nil, { padding = 1 }) * yt):sum():item()
        local rhs = (x * lt.conv_transpose2d(yt, w, nil, { padding = 1 })):sum():item()
        assert.is_true(math.abs(lhs - rhs) < 1e-9 * math.abs(lhs), label .. " transposed")
      end
    end
  end)
end)

describe("nn kernels layouts", function()
  before_each(function() lt.manual_seed(11) end)

  it("conv2d on a non-contiguous input equals the contiguous result, gradients too", function()
    local base = lt.randn(2, 3, 6, 7)
    local xt = base:transpose(3, 4):detach():requires_grad_(true)    -- (2,3,7,6), strided
    local xc = xt:contiguous():detach():requires_grad_(true)
    local w = lt.randn(4, 3, 3, 3)
    local y1 = lt.conv2d(xt, w, nil, { padding = 1 })
    local y2 = lt.conv2d(xc, w, nil, { padding = 1 })
    assert.is_true(max_abs_diff(y1, y2) < 1e-6)
    local g = lt.randn(y1:size())
    local l1, l2 = (y1 * g):sum(), (y2 * g):sum()
    l1:backward()
    l2:backward()
    assert.is_true(max_abs_diff(xt.grad, xc.grad) < 1e-6)
  end)

  it("float32 conv2d of stride 2 is the stride-1 result at every other position", function()
    -- im2col's rows are all that differ (from AVX2 up, stride 2 takes the even elements of
    -- whole vectors, with stretches ending inside a row and at its end): with Lantern's GEMM,
    -- whose sums do not depend on the product's width, the results agree bit for bit, and
    -- within rounding with OpenBLAS's; 5x5 kernels keep the stride-1 product off Winograd's
    local CHECK = [[
local lt = require "lantern"
lt.set_num_threads(1)
lt.manual_seed(11)
local exact = lt.gemm() == "lantern"
local bad = {}
for _, c in ipairs { { 9, 0, 1 }, { 15, 2, 1 }, { 20, 1, 1 }, { 33, 2, 1 }, { 40, 3, 1 },
                     { 21, 2, 2 } } do
  local hw, pad, dil = c[1], c[2], c[3]
  local x = lt.randn(2, 3, hw, hw)
  local w = lt.randn(4, 3, 5, 5)
  local y2 = lt.conv2d(x, w, nil, { stride = 2, padding = pad, dilation = dil })
  local y1 = lt.conv2d(x, w, nil, { stride = 1, padding = pad, dilation = dil })
  local sub = y1:index_select(3, lt.arange(1, y1:size(3) + 1, 2))
                :index_select(4, lt.arange(1, y1:size(4) + 1, 2))
  local same = sub:dim() == y2:dim() and sub:numel() == y2:numel() and
               (exact and lt.equal(sub, y2) or (sub - y2):abs():max():item() < 1e-4)
  if not same then bad[#bad + 1] = hw .. "/" .. pad .. "/" .. dil end
end
print(#bad == 0 and (exact and "same bits" or "close") or table.concat(bad, ", "))
]]
    local out, err = support.run_lua(CHECK, "")
    assert.are.equal("", err)
    assert.truthy(out == "same bits\n" or out == "close\n", out)
    if support.isa_levels().avx2 then
      out, err = support.run_lua(CHECK, "LANTERN_GEMM=lantern LANTERN_ISA=avx2")
      assert.are.equal("", err)
      assert.are.equal("same bits\n", out)
    end
  end)

  it("a batch split into chunks gives the per-sample results", function()
    -- 1296 column elements per sample: 70 samples run as chunks of 50 and 20
    local x = lt.randn(70, 4, 6, 6):requires_grad_(true)
    local w = lt.randn(5, 4, 3, 3):requires_grad_(true)
    local b = lt.randn(5)
    local y = lt.conv2d(x, w, b, { padding = 1 })
    local g = lt.randn(y:size())
    local loss = (y * g):sum()
    loss:backward()
    local w2 = w:detach():requires_grad_(true)
    for n = 1, 70 do
      local xn = x:narrow(1, n, 1):detach():requires_grad_(true)
      local yn = lt.conv2d(xn, w2, b, { padding = 1 })
      if n == 1 or n == 50 or n == 51 or n == 70 then
        assert.is_true(max_abs_diff(y:narrow(1, n, 1), yn) < 1e-5)
      end
      local ln = (yn * g:narrow(1, n, 1)):sum()
      ln:backward()
      if n % 10 == 1 then
        assert.is_true(max_abs_diff(x.grad:narrow(1, n, 1), xn.grad) < 1e-5)
      end
    end
    assert.is_true(max_abs_diff(w.grad, w2.grad) / w2.grad:abs():max():item() < 1e-5)
  end)

  it("conv_transpose2d over several chunks gives the per-sample results", function()
    local x = lt.randn(70, 4, 5, 5):requires_grad_(true)
    local w = lt.randn(4, 3, 3, 3):requires_grad_(true)
    local y = lt.conv_transpose2d(x, w, nil, { stride = 2 })
    local loss = y:pow(2):sum()
    loss:backward()
    local w2 = w:detach():requires_grad_(true)
    for _, n in ipairs({ 1, 33, 70 }) do
      local xn = x:narrow(1, n, 1):detach():requires_grad_(true)
      local yn = lt.conv_transpose2d(xn, w2, nil, { stride = 2 })
      assert.is_true(max_abs_diff(y:narrow(1, n, 1), yn) < 1e-5)
      local ln = yn:pow(2):sum()
      ln:backward()
      assert.is_true(max_abs_diff(x.grad:narrow(1, n, 1), xn.grad) < 1e-4)
    end
  end)

  it("convolutions split over threads match the single-thread results", function()
    local old = lt.get_num_threads()
    local function run(threads, transposed)
      lt.set_num_threads(threads)
      lt.manual_seed(3)
      local x = lt.randn(9, 8, 16, 16, { dtype = "float64" }):requires_grad_(true)
      local w = lt.randn(8, 8, 3, 3, { dtype = "float64" }):requires_grad_(true)
      local b = lt.randn(8, { dtype = "float64" }):requires_grad_(true)
      local f = transposed and lt.conv_transpose2d or lt.conv2d
      local y = f(x, w, b, { padding = 1, stride = transposed and 2 or 1 })
      local loss = y:pow(2):sum()
      loss:backward()
      return y:detach(), x.grad, w.grad, b.grad
    end
    for _, tr in ipairs({ false, true }) do
      local r1 = { run(1, tr) }
      local r3 = { run(3, tr) }
      for i = 1, 4 do
        assert.is_true(max_abs_diff(r1[i], r3[i]) <= 1e-9 * r1[i]:abs():max():item())
      end
    end
    lt.set_num_threads(old)
  end)

  it("avg_pool2d's 2x2 path gives the generic loops' bits, forward and backward", function()
    -- divisor_override = 4 divides by the same 4 but takes the generic window loops
    local inf, nan = 1 / 0, 0 / 0
    for _, dt in ipairs { "float32", "float64" } do
      for _, shape in ipairs { { 2, 3, 8, 8 }, { 1, 2, 7, 9 }, { 3, 1, 2, 2 } } do
        local x = lt.randn(table.unpack(shape)):to(dt) * 3
        x[1][1][1][1], x[1][1][1][2], x[1][1][2][1] = -0.0, inf, nan
        local g = lt.randn(shape[1], shape[2], shape[3] // 2, shape[4] // 2):to(dt)
        g[1][1][1][1] = -0.0
        local res = {}
        for i, o in ipairs { { kernel_size = 2 }, { kernel_size = 2, divisor_override = 4 } } do
          local xi = x:clone():requires_grad_()
          local y = lt.avg_pool2d(xi, o)
          y:backward(g)
          res[i] = { y, xi.grad }
        end
        for k = 1, 2 do
          local a, b = res[1][k]:reshape(-1):tolist(), res[2][k]:reshape(-1):tolist()
          for e = 1, #a do
            local same = string.format("%a", a[e]) == string.format("%a", b[e]) or
                (a[e] ~= a[e] and b[e] ~= b[e])
            assert.is_true(same, string.format("%s %s %s element %d: %s vs %s", dt,
              table.concat(shape, "x"), k == 1 and "forward" or "backward", e, a[e], b[e]))
          end
        end
      end
    end
  end)

  it("a gradient that is an expanded view (from sum) works", function()
    local x = lt.randn(2, 2, 4, 4):requires_grad_(true)
    lt.max_pool2d(x, 2):sum():backward()
    assert.are.equal(16.0, x.grad:sum():item())   -- one per output element
  end)

  it("max pools without grad or indices give the same values as with them", function()
    local x = lt.randn(2, 3, 9, 8)
    for _, o in ipairs({ { kernel_size = 2 }, { kernel_size = 3, stride = 2, padding = 1, dilation = 1 } }) do
      local plain = lt.no_grad(function() return lt.max_pool2d(x, o) end)
      local oi = { return_indices = true }
      for k, v in pairs(o) do oi[k] = v end
      local with = lt.max_pool2d(x, oi)
      assert.are.equal(0, max_abs_diff(plain, with))
    end
    local a = lt.no_grad(function() return lt.adaptive_max_pool2d(x, { 4, 3 }) end)
    local b = lt.adaptive_max_pool2d(x, { 4, 3 }, true)
    assert.are.equal(0, max_abs_diff(a, b))
  end)

  it("max_pool2d propagates NaN and returns its index", function()
    local x = lt.tensor({ { { { 1, 0 / 0 }, { 3, 2 } } } })
    local y, i = lt.max_pool2d(x, { kernel_size = 2, return_indices = true })
    assert.is_true(y:item() ~= y:item())
    assert.are.equal(2, i:item())
    -- two NaNs: the last one wins (as PyTorch); ties: the first one wins
    local nan = 0 / 0
    local x2 = lt.tensor({ { { { nan, 1, 5, 5 }, { nan, 0, 2, 5 } } } })
    for _, o in ipairs({ { kernel_size = 2, return_indices = true },
                         { kernel_size = 2, stride = 2, padding = 1, return_indices = true } }) do
      local _, i2 = lt.max_pool2d(x2, o)
      local idx = i2:reshape({ -1 }):tolist()
      if o.padding then
        assert.are.same({ 1, 3, 4, 5, 7, 8 }, idx)   -- from PyTorch 1.13
      else
        assert.are.same({ 5, 3 }, idx)   -- from PyTorch 1.13
      end
    end
  end)

  it("batch_norm eval without grad uses the running statistics", function()
    local x = lt.randn(4, 3)
    local rm, rv = lt.tensor({ 1.0, 2.0, 3.0 }), lt.tensor({ 4.0, 1.0, 0.25 })
    local y = lt.batch_norm(x, rm, rv, nil, nil, false, 0.1, 0)
    local want = (x - rm) / rv:sqrt()
    assert.is_true(max_abs_diff(y, want) < 1e-6)
  end)

  it("dropout: identity when not training or p = 0, scaled mask otherwise", function()
    local x = lt.ones(1000)
    assert.are.equal(1000, lt.dropout(x, 0.5, false):sum():item())
    assert.are.equal(1000, lt.dropout(x, 0, true):sum():item())
    local xr = lt.ones(1000, { requires_grad = true })
    local g = lt.Generator and lt.Generator(3) or nil
    local y = lt.dropout(xr, 0.25, true, g and { generator = g } or nil)
    local vals = flat(y)
    local kept = 0
    for _, v in ipairs(vals) do
      assert.is_true(v == 0 or math.abs(v - 1 / 0.75) < 1e-6)
      if v ~= 0 then kept = kept + 1 end
    end
    assert.is_true(kept > 650 and kept < 850)
    y:sum():backward()
    assert.is_true(max_abs_diff(xr.grad, y:detach()) == 0)
    assert.are.equal(0, lt.dropout(x, 1, true):sum():item())
  end)

  it("dropout with a seeded generator is reproducible", function()
    if not lt.Generator then return pending("lt.Generator not available") end
    local x = lt.ones(64)
    local a = lt.dropout(x, 0.5, true, { generator = lt.Generator(5) })
    local b = lt.dropout(x, 0.5, true, { generator = lt.Generator(5) })
    assert.are.equal(0, max_abs_diff(a, b))
  end)

  it("embedding with a negative padding_idx counts from the end", function()
    local w = lt.randn(4, 2):requires_grad_(true)
    local y = lt.embedding(lt.tensor({ 4, 1, 4 }), w, -1)
    y:sum():backward()
    assert.are.same({ { 1, 1 }, { 0, 0 }, { 0, 0 }, { 0, 0 } }, w.grad:tolist())
  end)
end)

-------------------------------------------------------------------------------- errors
local function fails(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.is_truthy(tostring(err):find(pattern, 1, true), "error was: " .. tostring(err))
  return tostring(err)
end

describe("nn kernels reject bad input", function()
  local x4 = lt.randn(2, 3, 8, 8)

  it("conv2d", function()
    fails("conv2d: expected 3-d (unbatched) or 4-d (batched) input", lt.conv2d, lt.randn(2, 3), lt.randn(4, 3, 3, 3))
    local e = fails("conv2d: given groups=1", lt.conv2d, x4, lt.randn(4, 2, 3, 3))
    assert.is_truthy(e:find("[2, 3, 8, 8]", 1, true))
    fails("Kernel size can't be greater than actual input size", lt.conv2d, lt.randn(1, 1, 3, 3), lt.randn(1, 1, 5, 5))
    fails("conv2d: non-positive stride", lt.conv2d, x4, lt.randn(4, 3, 3, 3), nil, { stride = 0 })
    fails("conv2d: negative padding", lt.conv2d, x4, lt.randn(4, 3, 3, 3), nil, { padding = -1 })
    fails("conv2d: given weight of shape", lt.conv2d, x4, lt.randn(4, 3, 3, 3), lt.randn(5))
    fails("conv2d: input (float32), weight (float64)", lt.conv2d, x4, lt.randn(4, 3, 3, 3, { dtype = "float64" }))
    fails("conv2d: expected 4-d weight", lt.conv2d, x4, lt.randn(4, 3, 3))
    fails("conv2d: given groups=2, expected weight to be divisible by 2", lt.conv2d, lt.randn(1, 4, 5, 5), lt.randn(3, 2, 3, 3), nil, { groups = 2 })
    fails("padding='same' is not supported for strided convolutions", lt.conv2d, x4, lt.randn(4, 3, 3, 3), nil, { padding = "same", stride = 2 })
    fails("conv2d: stride must have 2 values", lt.conv2d, x4, lt.randn(4, 3, 3, 3), nil, { stride = { 1, 2, 3 } })
    fails("conv2d: expected a float32 or float64 input", lt.conv2d, lt.ones(1, 1, 3, 3, { dtype = "int64" }), lt.randn(1, 1, 1, 1))
  end)

  it("conv1d and conv_transpose2d", function()
    fails("conv1d: expected 2-d (unbatched) or 3-d (batched) input", lt.conv1d, x4, lt.randn(2, 3, 3))
    fails("conv_transpose2d: output padding must be", lt.conv_transpose2d, x4, lt.randn(3, 2, 3, 3), nil, { output_padding = 1 })
    fails("conv_transpose2d: given transposed=1", lt.conv_transpose2d, x4, lt.randn(4, 2, 3, 3))
  end)

  it("pooling", function()
    fails("max_pool2d: pad should be at most half of kernel size", lt.max_pool2d, x4, { kernel_size = 2, padding = 2 })
    fails("max_pool2d: expected 3-d (unbatched) or 4-d (batched) input", lt.max_pool2d, lt.randn(8, 8), 2)
    fails("max_pool2d: kernel_size is required", lt.max_pool2d, x4, {})
    fails("is too small", lt.max_pool2d, lt.randn(1, 1, 2, 2), 3)
    fails("avg_pool2d: kernel_size must be greater than zero", lt.avg_pool2d, x4, 0)
    fails("avg_pool2d: divisor must be not zero", lt.avg_pool2d, x4, 2, { divisor_override = 0 })
    fails("adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0", lt.adaptive_avg_pool2d, x4, { -2, 3 })
    fails("adaptive_avg_pool2d: expected input to have non-zero size", lt.adaptive_avg_pool2d, lt.randn(2, 0, 4, 4), 2)
  end)

  it("normalisation", function()
    local rm, rv = lt.zeros(3), lt.ones(3)
    fails("batch_norm: expected more than 1 value per channel when training", lt.batch_norm, lt.randn(1, 3), rm, rv, nil, nil, true)
    fails("batch_norm: expected 1-d running_mean with 3 elements", lt.batch_norm, lt.randn(4, 3), lt.zeros(4), rv, nil, nil, true)
    fails("batch_norm: running_mean and running_var are required", lt.batch_norm, lt.randn(4, 3), nil, nil, nil, nil, false)
    fails("batch_norm: expected an input of at least 2 dimensions", lt.batch_norm, lt.randn(3), rm, rv)
    fails("layer_norm: given normalized_shape=[4]", lt.layer_norm, lt.randn(3, 5), { 4 })
    fails("layer_norm: expected weight of shape [5]", lt.layer_norm, lt.randn(3, 5), 5, lt.randn(4))
    fails("group_norm: expected number of channels in input to be divisible by num_groups", lt.group_norm, lt.randn(2, 6, 3), 4)
    fails("rms_norm: given normalized_shape=[2, 3]", lt.rms_norm, lt.randn(3, 2), { 2, 3 })
  end)

  it("embedding and dropout", function()
    local w = lt.randn(5, 3)
    fails("embedding: index 6 is out of range", lt.embedding, lt.tensor({ 1, 6 }), w)
    fails("embedding: index 0 is out of range", lt.embedding, lt.tensor({ 0 }), w)
    fails("embedding: expected indices of dtype int64", lt.embedding, lt.randn(2), w)
    fails("embedding: padding_idx 6 must be within num_embeddings", lt.embedding, lt.tensor({ 1 }), w, 6)
    fails("embedding: expected a 2-d weight", lt.embedding, lt.tensor({ 1 }), lt.randn(5))
    fails("dropout: dropout probability has to be between 0 and 1, but got 1.5", lt.dropout, w, 1.5)
  end)

  it("losses", function()
    local x = lt.randn(4, 3)
    fails("cross_entropy: target 4 is out of bounds for 3 classes", lt.cross_entropy, x, lt.tensor({ 1, 2, 3, 4 }))
    fails("cross_entropy: target 0 is out of bounds", lt.cross_entropy, x, lt.tensor({ 1, 2, 3, 0 }))
    fails("cross_entropy: expected target of shape [4] (class indices) for input of shape [4, 3]", lt.cross_entropy, x, lt.tensor({ 1, 2 }))
    fails("cross_entropy: expected a target of dtype int64", lt.cross_entropy, x, lt.randn(4))
    fails("nll_loss: weight tensor should be defined either for all 3 classes", lt.nll_loss, x, lt.tensor({ 1, 2, 3, 1 }), { weight = lt.ones(4) })
    fails("cross_entropy: reduction must be 'mean', 'sum' or 'none'", lt.cross_entropy, x, lt.tensor({ 1, 2, 3, 1 }), { reduction = "avg" })
    fails("cross_entropy: label_smoothing must be between 0.0 and 1.0", lt.cross_entropy, x, lt.tensor({ 1, 2, 3, 1 }), { label_smoothing = 2 })
  end)

  it("a failed call leaves the running statistics untouched", function()
    local rm, rv = lt.zeros(3), lt.ones(3)
    pcall(lt.batch_norm, lt.randn(4, 3), rm, rv, lt.randn(4), nil, true)
    assert.are.same({ 0, 0, 0 }, rm:tolist())
    assert.are.same({ 1, 1, 1 }, rv:tolist())
  end)
end)
