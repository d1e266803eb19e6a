-- interpolate (nn.Upsample), pixel_shuffle and pixel_unshuffle: PyTorch's values and input
-- gradients (spec/fixtures/resample.lua, gen_resample.py) in float64 and float32, float64
-- gradchecks, reprs, and the errors of bad arguments.
local lt = require "lantern"
local support = require "spec.support"
local nn = lt.nn
local F = nn.functional
local fx = dofile("spec/fixtures/resample.lua")

local close_list = support.close_list

local function describe_opts(o)
  local parts = {}
  for k, v in pairs(o) do
    parts[#parts + 1] = k .. "=" .. (type(v) == "table" and table.concat(v, "x") or tostring(v))
  end
  table.sort(parts)
  return table.concat(parts, " ")
end

describe("interpolate against PyTorch", function()
  for _, dt in ipairs({ "float64", "float32" }) do
    it("values and input gradients of every case (" .. dt .. ")", function()
      local tol = dt == "float64" and 1e-12 or 2e-6
      for _, c in ipairs(fx.interpolate) do
        local what = table.concat(c.shape, "x") .. " " .. describe_opts(c.opts) .. " " .. dt
        local x = lt.tensor(c.x, { dtype = dt }):reshape(c.shape):requires_grad_()
        local y = F.interpolate(x, c.opts)
        assert.are.same(c.out_shape, y.shape, what)
        close_list(y:detach():double():reshape(-1):tolist(), c.y, tol, what .. " values")
        y:backward(lt.linspace(-1, 1, y:numel(), { dtype = dt }):reshape(c.out_shape))
        close_list(x.grad:double():reshape(-1):tolist(), c.grad, tol * 4, what .. " gradient")
      end
    end)
  end

  it("nn.Upsample gives interpolate's values, with PyTorch's repr", function()
    local x = lt.randn(2, 3, 4, 5)
    local up = nn.Upsample({ scale_factor = 2, mode = "bilinear", align_corners = true })
    assert.is_true(up(x):equal(F.interpolate(x, { scale_factor = 2, mode = "bilinear",
      align_corners = true })))
    assert.are.equal("Upsample(scale_factor=2.0, mode=bilinear)", tostring(up))
    assert.are.equal("Upsample(size=(4, 4), mode=nearest)",
      tostring(nn.Upsample({ size = { 4, 4 } })))
    assert.are.equal("Upsample(scale_factor=(2.0, 3.0), mode=nearest)",
      tostring(nn.Upsample({ scale_factor = { 2, 3 } })))
    assert.are.same({}, up:parameters())
    -- nearest works for integer and bool inputs too
    local i = lt.tensor({ { { 1, 2, 3 } } })
    assert.are.same({ { { 1, 1, 2, 2, 3, 3 } } }, F.interpolate(i, { scale_factor = 2 }):tolist())
  end)

  -- nearest modes select: growing every dim they go last dim first, otherwise first dim first;
  -- either way each output element is the one taken dim by dim in order, and each gradient
  -- the same sum, in another order
  it("nearest gives the dim-by-dim selection whatever the order it takes the dims in", function()
    lt.manual_seed(9)
    local cases = { { { 2, 3, 5, 6 }, { 10, 12 } }, { { 2, 3, 5, 6 }, { 10, 4 } },
      { { 1, 2, 3, 4, 5 }, { 6, 4, 15 } }, { { 2, 2, 7 }, { 14 } } }
    for _, c in ipairs(cases) do
      local shape, size = c[1], c[2]
      local x = lt.randn(table.unpack(shape)):requires_grad_()
      local y = F.interpolate(x, { size = size, mode = "nearest" })
      local g = lt.randn(table.unpack(y:size()))
      y:backward(g)
      local x2 = x:detach():clone():requires_grad_()
      local r = x2
      for i = 1, #size do
        local in_n = shape[2 + i]
        local idx = (lt.arange(size[i]) * in_n // size[i]) + 1
        r = r:index_select(2 + i, idx)
      end
      r:backward(g)
      local what = table.concat(shape, "x") .. " -> " .. table.concat(size, "x")
      assert.is_true(lt.equal(y, r), what)
      assert.is_true((x.grad - x2.grad):abs():max():item() < 1e-5, what .. " gradient")
    end
  end)

  -- nearest-exact with a scale factor whose output size rounds back to the input's: PyTorch
  -- still maps position i to floor((i + 0.5) / scale_factor), with the scale in float32
  it("nearest-exact with an unchanged size still applies its scale", function()
    local function f32(v) return (string.unpack("f", string.pack("f", v))) end
    local x = lt.arange(10, { dtype = "float32" }):reshape(1, 1, 10)
    local y = F.interpolate(x, { scale_factor = 1.09, mode = "nearest-exact" })
    assert.are.same({ 1, 1, 10 }, y:size())
    local sc = f32(1 / 1.09)
    local got = y:reshape(-1):tolist()
    for i = 0, 9 do
      local want = math.min(math.floor(f32((i + 0.5) * sc)), 9)
      assert.are.equal(want, got[i + 1], "position " .. i)
    end
    assert.are.equal(8, got[10])
    local z = F.interpolate(x, { scale_factor = 1.09, mode = "nearest" })   -- nearest: identity
    assert.is_true(lt.equal(z, x))
  end)

  it("has float64 finite-difference gradients in every linear mode", function()
    local gradcheck = lt.autograd.gradcheck
    local function input(...)
      return (lt.randn({ ... }, { dtype = "float64" })):requires_grad_()
    end
    for _, align in ipairs({ false, true }) do
      assert.is_true(gradcheck(function(t)
        return F.interpolate(t, { size = 7, mode = "linear", align_corners = align })
      end, { input(1, 2, 4) }))
      assert.is_true(gradcheck(function(t)
        return F.interpolate(t, { size = { 3, 5 }, mode = "bilinear", align_corners = align })
      end, { input(1, 2, 4, 3) }))
      assert.is_true(gradcheck(function(t)
        return F.interpolate(t, { scale_factor = 1.5, mode = "trilinear", align_corners = align })
      end, { input(1, 1, 2, 2, 3) }))
    end
    assert.is_true(gradcheck(function(t) return F.interpolate(t, { size = { 5, 2 } }) end,
      { input(1, 2, 3, 4) }))
  end)

  it("refuses bad arguments as PyTorch does", function()
    local x = lt.randn(1, 2, 3, 4)
    local function err(o, input)
      local ok, e = pcall(F.interpolate, input or x, o)
      assert.is_false(ok)
      return tostring(e)
    end
    assert.matches("either size or scale_factor should be defined", err({ mode = "nearest" }))
    assert.matches("only one of size or scale_factor should be defined",
      err({ size = 2, scale_factor = 2 }))
    assert.matches("got 4D input, but linear mode needs 3D input",
      err({ size = 2, mode = "linear" }))
    assert.matches("got 3D input, but bilinear mode needs 4D input",
      err({ size = 2, mode = "bilinear" }, lt.randn(1, 2, 3)))
    assert.matches("align_corners option can only be set with the interpolating modes",
      err({ size = 2, align_corners = true }))
    assert.matches("mode must be nearest, nearest%-exact", err({ size = 2, mode = "cubic" }))
    assert.matches("bicubic is not supported", err({ size = 2, mode = "bicubic" }))
    assert.matches("antialias is not supported",
      err({ size = 2, mode = "bilinear", antialias = true }))
    assert.matches("interpolate size: expected a number or 2 numbers, got 3",
      err({ size = { 1, 2, 3 } }))
    assert.matches("scale_factor must be positive", err({ scale_factor = 0 }))
    assert.matches("output size must be positive integers", err({ scale_factor = 0.1 }))
    assert.matches("expected a 3%-D, 4%-D or 5%-D input", err({ size = 2 }, lt.randn(2, 3)))
    assert.matches("unknown option 'scale'", err({ scale = 2 }))
    assert.matches("bilinear mode needs a float input",
      err({ size = 2, mode = "bilinear" }, lt.zeros({ 1, 1, 2, 2 }, { dtype = "int64" })))
  end)
end)

describe("pixel_shuffle and pixel_unshuffle", function()
  it("move channels into space and back as PyTorch does", function()
    for _, c in ipairs(fx.shuffle) do
      local n = 1
      for _, s in ipairs(c.shape) do n = n * s end
      local x = lt.arange(n, { dtype = "float64" }):reshape(c.shape)
      local y = nn.PixelShuffle(c.r)(x)
      assert.are.same(c.out_shape, y.shape)
      close_list(y:reshape(-1):tolist(), c.y, 0, "pixel_shuffle r=" .. c.r)
      close_list(nn.PixelUnshuffle(c.r)(y):reshape(-1):tolist(), c.back, 0, "pixel_unshuffle")
    end
    assert.are.equal("PixelShuffle(upscale_factor=2)", tostring(nn.PixelShuffle(2)))
    assert.are.equal("PixelUnshuffle(downscale_factor=3)", tostring(nn.PixelUnshuffle(3)))
    local ok, e = pcall(F.pixel_shuffle, lt.randn(1, 3, 2, 2), 2)
    assert.is_false(ok)
    assert.matches("channels divide by upscale_factor%^2 = 4", tostring(e))
    ok, e = pcall(F.pixel_unshuffle, lt.randn(1, 3, 3, 2), 2)
    assert.is_false(ok)
    assert.matches("height and width divide by downscale_factor = 2", tostring(e))
    support.expect_error(function() return F.pixel_shuffle(lt.randn(1, 4, 2, 2), 0) end,
      "pixel_shuffle: upscale_factor must be a positive integer, got 0")
    support.expect_error(function() return nn.PixelUnshuffle(1.5)(lt.randn(1, 4, 2, 2)) end,
      "pixel_unshuffle: downscale_factor must be a positive integer, got 1.5")
  end)
end)
