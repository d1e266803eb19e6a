-- float32 3x3 convolutions of stride 1 (transposed or not) with 16 channels and more on each
-- side go through Winograd's F(2x2, 3x3) on the cpu (src/cpu/winograd.c): the forward pass and
-- both gradients. Each must match the same convolution in float64 (which takes im2col) within float32
-- rounding, for every padding it takes, odd and tiny output sizes, batches cut into several
-- chunks, with and without bias; and give the same bits at any thread count.
local lt = require "lantern"
local F = lt.nn.functional
local support = require "support"

local rel_err = support.rel_err

local cases = {
  -- N, C, O, H, W, padding
  { 2, 32, 32, 16, 16, 1 },
  { 3, 16, 24, 17, 19, 1 },      -- odd output sizes: the last tiles hang over the edge
  { 2, 48, 32, 18, 20, 0 },      -- no padding (the input gradient pads by 2)
  { 2, 32, 16, 14, 15, 2 },      -- padding 2 (the input gradient pads by 0)
  { 40, 32, 32, 16, 16, 1 },     -- more samples than one chunk holds (12 here)
  { 5, 64, 64, 8, 8, 1 },        -- CIFAR's last stage
  { 3, 17, 33, 4, 4, 1 },        -- channel counts off the blocks of 8, tiny images
  { 2, 16, 16, 1, 2, 1 },        -- one row of output, one tile
  { 1, 33, 35, 3, 31, 0 },       -- one row of tiles
}

describe("Winograd convolutions (cpu, float32)", function()
  after_each(function() lt.set_num_threads(1) end)

  for _, c in ipairs(cases) do
    local N, C, O, H, W, p = table.unpack(c)
    it(("match float64 im2col: %d x %d -> %d on %d x %d, padding %d"):format(N, C, O, H, W, p),
      function()
      lt.manual_seed(N * 1000 + C + H)
      local x, w, b = lt.randn(N, C, H, W), lt.randn(O, C, 3, 3), lt.randn(O)
      for _, bias in ipairs({ b, false }) do
        local bb = bias or nil
        local y = F.conv2d(x, w, bb, { padding = p })
        local want = F.conv2d(x:double(), w:double(), bb and bb:double(), { padding = p })
        assert.are.same(want:size(), y:size())
        assert.is_true(rel_err(y, want) < 1e-5, "forward")
      end
      -- the input gradient (Winograd) and the weight gradient (im2col) for a random dy
      local xr, wr = x:clone():requires_grad_(), w:clone():requires_grad_()
      local y = F.conv2d(xr, wr, b, { padding = p })
      local g = lt.randn(y:size())
      y:backward(g)
      local x64 = x:double():requires_grad_()
      local w64 = w:double():requires_grad_()
      F.conv2d(x64, w64, b:double(), { padding = p }):backward(g:double())
      assert.is_true(rel_err(xr.grad, x64.grad) < 1e-5, "input gradient")
      -- the weight gradient sums over every sample and position: float32 sums of thousands
      assert.is_true(rel_err(wr.grad, w64.grad) < 2e-5, "weight gradient")
    end)
  end

  -- a transposed convolution of stride 1 is the input gradient of a convolution, and its own
  -- gradients the forward and weight gradient: the same path
  for _, c in ipairs({ { 2, 32, 16, 9, 10, 1 }, { 3, 16, 24, 8, 8, 0 }, { 2, 24, 32, 12, 7, 2 } }) do
    local N, C, O, H, W, p = table.unpack(c)
    it(("transposed: %d x %d -> %d on %d x %d, padding %d"):format(N, C, O, H, W, p), function()
      lt.manual_seed(N + C + H)
      local x, w, b = lt.randn(N, C, H, W), lt.randn(C, O, 3, 3), lt.randn(O)
      local xr, wr = x:clone():requires_grad_(), w:clone():requires_grad_()
      local y = F.conv_transpose2d(xr, wr, b, { padding = p })
      local x64, w64 = x:double():requires_grad_(), w:double():requires_grad_()
      local want = F.conv_transpose2d(x64, w64, b:double(), { padding = p })
      assert.are.same(want:size(), y:size())
      assert.is_true(rel_err(y, want) < 1e-5, "forward")
      local g = lt.randn(y:size())
      y:backward(g)
      want:backward(g:double())
      assert.is_true(rel_err(xr.grad, x64.grad) < 1e-5, "input gradient")
      assert.is_true(rel_err(wr.grad, w64.grad) < 2e-5, "weight gradient")
    end)
  end

  -- PyTorch's own float64 numbers for such convolutions (spec/fixtures/gen_conv_winograd.py)
  it("matches PyTorch's conv2d and conv_transpose2d, values and gradients", function()
    local fixtures = dofile("spec/fixtures/conv_winograd.lua")
    assert.are.equal(4, #fixtures)
    for i, c in ipairs(fixtures) do
      local what = c.kind .. " case " .. i
      local x = lt.tensor(c.x):reshape(c.x_shape):requires_grad_()
      local w = lt.tensor(c.w):reshape(c.w_shape):requires_grad_()
      local b = lt.tensor(c.b):requires_grad_()
      local y = F[c.kind](x, w, b, { padding = c.padding })
      assert.are.same(c.y_shape, y:size())
      y:backward(lt.tensor(c.g):reshape(c.y_shape))
      local function want(list, shape) return lt.tensor(list, { dtype = "float64" }):reshape(shape) end
      assert.is_true(rel_err(y, want(c.y, c.y_shape)) < 1e-5, what .. " output")
      assert.is_true(rel_err(x.grad, want(c.dx, c.x_shape)) < 1e-5, what .. " input gradient")
      assert.is_true(rel_err(w.grad, want(c.dw, c.w_shape)) < 2e-5, what .. " weight gradient")
      assert.is_true(rel_err(b.grad, want(c.db, { #c.db })) < 1e-5, what .. " bias gradient")
    end
  end)

  it("gives the same bits at one and two threads", function()
    lt.manual_seed(7)
    local x, w, b = lt.randn(6, 32, 18, 17), lt.randn(40, 32, 3, 3), lt.randn(40)
    local function run()
      local xr, wr = x:clone():requires_grad_(), w:clone():requires_grad_()
      local y = F.conv2d(xr, wr, b, { padding = 1 })
      y:backward(y:detach() * 0.5)
      return y:detach(), xr.grad, wr.grad
    end
    lt.set_num_threads(1)
    local y1, g1, w1 = run()
    lt.set_num_threads(2)
    local y2, g2, w2 = run()
    assert.is_true(lt.equal(y1, y2))
    assert.is_true(lt.equal(g1, g2))
    assert.is_true(lt.equal(w1, w2))
  end)

  -- the 16 products of a chunk go to the thin kernels (src/cpu/thin_gemm.c) where the small side
  -- fits the registers: at most 64 channels at AVX-512, 32 at AVX2; the packed GEMM otherwise
  -- and below AVX2. Channel counts on and off the vector widths, at every level.
  it("match float64 at every ISA level the CPU supports", function()
    local SCRIPT = [[
local lt = require "lantern"
local F = lt.nn.functional
local function rel(got, want)
  local scale = want:abs():max():item()
  return (got:double() - want):abs():max():item() / (scale > 0 and scale or 1)
end
lt.manual_seed(21)
local worst = 0
for _, c in ipairs { { 16, 16 }, { 24, 17 }, { 33, 40 }, { 64, 48 }, { 20, 65 }, { 70, 16 } } do
  local C, O = c[1], c[2]
  local x, w = lt.randn(3, C, 9, 10):requires_grad_(), lt.randn(O, C, 3, 3):requires_grad_()
  local y = F.conv2d(x, w, nil, { padding = 1 })
  local g = lt.randn(y:size())
  y:backward(g)
  local x64, w64 = x:detach():double():requires_grad_(), w:detach():double():requires_grad_()
  local y64 = F.conv2d(x64, w64, nil, { padding = 1 })
  y64:backward(g:double())
  worst = math.max(worst, rel(y, y64), rel(x.grad, x64.grad), rel(w.grad, w64.grad) / 2)
end
print(lt.isa(), worst)
]]
    for isa, ok in pairs(support.isa_levels()) do
      if ok then
        local out, err = support.run_lua(SCRIPT, "LANTERN_ISA=" .. isa)
        local level, worst = out:match("^(%S+)%s+(%S+)")
        assert.are.equal(isa, level, out .. err)
        assert.is_true(tonumber(worst) < 1e-5, isa .. ": " .. out)
      end
    end
  end)

  it("agrees with the float64 convolution on an nn.Conv2d layer's gradients", function()
    lt.manual_seed(11)
    local conv = lt.nn.Conv2d(32, 32, 3, { padding = 1 })
    local x = lt.randn(4, 32, 16, 16):requires_grad_()
    conv(x):square():sum():backward()
    local conv64 = lt.nn.Conv2d(32, 32, 3, { padding = 1 }):double()
    conv64.weight = lt.nn.Parameter(conv.weight:detach():double())
    conv64.bias = lt.nn.Parameter(conv.bias:detach():double())
    local x64 = x:detach():double():requires_grad_()
    conv64(x64):square():sum():backward()
    assert.is_true(rel_err(x.grad, x64.grad) < 1e-5)
    assert.is_true(rel_err(conv.weight.grad, conv64.weight.grad) < 1e-5)
  end)
end)
