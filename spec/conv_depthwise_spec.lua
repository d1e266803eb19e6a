-- float32 depthwise convolutions (groups = input channels = output channels) go through the
-- direct kernels of src/cpu/conv_dw.c on the cpu: the forward pass and the input and weight
-- gradients. Each must match the same convolution in float64 (which takes im2col) within
-- float32 rounding, for strides 1 to 3 (the grid's phases), dilations, paddings larger than
-- the kernel's reach, rectangular kernels, odd and wide rows (stride 2's vector split), 1-d
-- convolutions; and give the same bits at any thread count.
local lt = require "lantern"
local F = lt.nn.functional
local rel_err = require("support").rel_err

local cases = {
  -- N, C, H, W, kernel, options
  { 2, 8, 16, 16, { 3, 3 }, { padding = 1 } },
  { 2, 8, 16, 16, { 3, 3 }, { padding = 1, stride = 2 } },
  { 3, 5, 33, 71, { 3, 3 }, { padding = 1, stride = 2 } },      -- wide rows: vector split
  { 2, 4, 40, 66, { 5, 5 }, { padding = 2, stride = 2 } },
  { 2, 6, 9, 11, { 3, 3 }, { padding = 0, stride = 3 } },
  { 1, 3, 17, 40, { 3, 5 }, { padding = { 1, 2 }, stride = { 2, 3 }, dilation = { 2, 1 } } },
  { 2, 6, 12, 12, { 2, 2 }, { padding = 4, stride = 2, dilation = 3 } },   -- padding past reach
  { 2, 4, 8, 8, { 7, 7 }, { padding = 3 } },                     -- ConvNeXt's kernel
  { 2, 3, 7, 7, { 1, 1 }, {} },
  { 2, 4, 5, 70, { 1, 4 }, { padding = { 0, 1 }, stride = { 1, 2 } } },
  { 3, 16, 1, 1, { 3, 3 }, { padding = 1 } },                    -- one pixel
  { 2, 2, 20, 20, { 3, 3 }, { padding = 2, dilation = 2 } },
  -- stride 2 splits rows straight from the plane, masking the lanes outside the row; a block
  -- whose reads would leave the plane goes lane by lane
  { 2, 3, 1, 37, { 1, 3 }, { padding = { 0, 1 }, stride = 2 } },   -- one row: every block
  { 2, 5, 6, 5, { 3, 3 }, { padding = 1, stride = 2 } },            -- plane under two vectors
  { 2, 3, 8, 9, { 3, 3 }, { padding = 1, stride = 2 } },            -- masked on both sides
  { 2, 3, 5, 1, { 3, 1 }, { padding = { 1, 0 }, stride = 2 } },     -- a phase past the row
  { 1, 2, 3, 5, { 1, 3 }, { padding = { 0, 33 }, stride = 2 } },    -- a whole block of padding
  { 2, 4, 32, 32, { 3, 3 }, { padding = 0, stride = 2 } },
  { 1, 3, 9, 48, { 3, 3 }, { padding = 3, stride = 2 } },
}

local function run(N, C, H, W, k, opt, dtype, bias)
  lt.manual_seed(N * 100 + C + H + W)
  local x = lt.randn(N, C, H, W, { dtype = dtype }):requires_grad_()
  local w = lt.randn(C, 1, k[1], k[2], { dtype = dtype }):requires_grad_()
  local b = bias and lt.randn(C, { dtype = dtype }):requires_grad_() or nil
  local o = {}
  for key, v in pairs(opt) do o[key] = v end
  o.groups = C
  local y = F.conv2d(x, w, b, o)
  local g = lt.randn(y:size(), { dtype = dtype })
  y:backward(g)
  return y, x.grad, w.grad, b and b.grad
end

describe("depthwise convolutions (cpu, float32)", function()
  after_each(function() lt.set_num_threads(1) end)

  for _, c in ipairs(cases) do
    local N, C, H, W, k, opt = table.unpack(c)
    local o = {}
    for _, key in ipairs { "stride", "padding", "dilation" } do
      local v = opt[key]
      if v then o[#o + 1] = key .. " " .. (type(v) == "table" and table.concat(v, ",") or v) end
    end
    local name = ("%d x %d x %d x %d, kernel %d x %d %s"):format(N, C, H, W, k[1], k[2],
      table.concat(o, " "))
    it("match float64 im2col: " .. name, function()
      for _, bias in ipairs { true, false } do
        local y, dx, dw, db = run(N, C, H, W, k, opt, "float32", bias)
        local y64, dx64, dw64, db64 = run(N, C, H, W, k, opt, "float64", bias)
        assert.are.same(y64:size(), y:size())
        assert.is_true(rel_err(y, y64) < 1e-5, "forward")
        assert.is_true(rel_err(dx, dx64) < 1e-5, "input gradient")
        assert.is_true(rel_err(dw, dw64) < 2e-5, "weight gradient")
        if bias then assert.is_true(rel_err(db, db64) < 1e-5, "bias gradient") end
      end
    end)
  end

  it("match float64 in 1-d (Conv1d with groups = channels)", function()
    lt.manual_seed(7)
    local x, w = lt.randn(3, 6, 50), lt.randn(6, 1, 5)
    for _, o in ipairs { { padding = 2, groups = 6 }, { stride = 2, dilation = 2, groups = 6 } } do
      local y = F.conv1d(x, w, nil, o)
      local y64 = F.conv1d(x:double(), w:double(), nil, o)
      assert.is_true(rel_err(y, y64) < 1e-5)
    end
  end)

  -- with a stride, the last columns of a row may be read by no output; inf or NaN there must
  -- not reach the weight gradient (its blocks' lanes past the row's end are masked)
  it("keep inf and NaN in columns no output reads out of the weight gradient", function()
    for _, dt in ipairs { "float32", "float64" } do
      local x = lt.ones(1, 2, 3, 20, { dtype = dt })
      x:narrow(4, 20, 1):fill_(0 / 0)
      x:narrow(4, 1, 1):narrow(3, 2, 1):fill_(1 / 0)   -- read: inf reaches its taps
      x:requires_grad_()
      local w = lt.ones(2, 1, 3, 3, { dtype = dt }):requires_grad_()
      F.conv2d(x, w, nil, { groups = 2, stride = 2 }):sum():backward()
      local g = w.grad:reshape(-1):tolist()
      for i = 1, #g do   -- tap (2, 1) of each channel reads the inf; the rest sum nine ones
        local want = (i - 1) % 9 == 3 and 1 / 0 or 9
        assert.are.equal(want, g[i], dt .. " tap " .. i)
      end
    end
  end)

  it("give the same bits at one and two threads", function()
    local function hex(t)
      local r = {}
      for i, v in ipairs(t:reshape(-1):tolist()) do r[i] = string.format("%a", v) end
      return table.concat(r, " ")
    end
    local got = {}
    for _, threads in ipairs { 1, 2 } do
      lt.set_num_threads(threads)
      local y, dx, dw = run(4, 32, 24, 40, { 3, 3 }, { padding = 1, stride = 2 }, "float32", true)
      got[threads] = hex(y) .. "|" .. hex(dx) .. "|" .. hex(dw)
    end
    assert.is_true(got[1] == got[2])
  end)

  it("leave channel multipliers and groups of several channels to im2col, with the same values",
    function()
    lt.manual_seed(3)
    local x = lt.randn(2, 4, 10, 10)
    for _, w in ipairs { lt.randn(8, 1, 3, 3), lt.randn(4, 2, 3, 3) } do
      local g = w:size(2) == 1 and 4 or 2
      local y = F.conv2d(x, w, nil, { padding = 1, groups = g })
      local y64 = F.conv2d(x:double(), w:double(), nil, { padding = 1, groups = g })
      assert.is_true(rel_err(y, y64) < 1e-5)
    end
  end)
end)
