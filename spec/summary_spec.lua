-- nn.utils.summary and nn.utils.count_parameters: the text torchinfo prints (the figures of
-- torchinfo's README for its example network), per-layer shapes and counts and the totals
-- against PyTorch (fixtures from spec/fixtures/gen_summary.py), and the model left as it was.
local lt = require "lantern"
local nn = lt.nn
local F = nn.functional
local fx = dofile("spec/fixtures/summary.lua")

local support = require "support"
local expect_error = support.expect_error

-- torchinfo's README example (SingleInputNet)
local Net = nn.Module:extend("Net")
function Net:__init()
  nn.Module.__init(self)
  self.conv1 = nn.Conv2d(1, 10, 5)
  self.conv2 = nn.Conv2d(10, 20, 5)
  self.conv2_drop = nn.Dropout2d()
  self.fc1 = nn.Linear(320, 50)
  self.fc2 = nn.Linear(50, 10)
end
function Net:forward(x)
  x = F.relu(F.max_pool2d(self.conv1(x), 2))
  x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
  x = x:view(-1, 320)
  x = F.relu(self.fc1(x))
  return F.log_softmax(self.fc2(x), 2)
end

local Tagger = nn.Module:extend("Tagger")
function Tagger:__init()
  nn.Module.__init(self)
  self.emb = nn.Embedding(10, 4)
  self.lstm = nn.LSTM(4, 6, { batch_first = true })
  self.blocks = nn.ModuleList { nn.Linear(6, 6), nn.Linear(6, 3) }
  self.blocks[1].weight:requires_grad_(false)
end
function Tagger:forward(x)
  local h = self.emb(x)
  local o = self.lstm(h)
  o = self.blocks[1](o)
  o = self.blocks[1](o)
  return self.blocks[2](o)
end

local function deep()
  local m = nn.Sequential(
    nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1 }), nn.BatchNorm2d(8), nn.ReLU()),
    nn.Sequential(nn.Sequential(nn.Conv2d(8, 4, 1), nn.Sequential(nn.ReLU(), nn.Flatten()))),
    nn.Linear(4 * 8 * 8, 5))
  m[1][2]:requires_grad_(false)
  return m
end

local models = {
  Net = function() return Net(), { 7, 1, 28, 28 }, nil end,
  Tagger = function() return Tagger(), { 2, 5 }, "int64" end,
  Deep = function() return deep(), { 2, 3, 8, 8 }, nil end,
}

describe("nn.utils.summary", function()
  it("prints torchinfo's table, with the figures of torchinfo's README for its example", function()
    lt.manual_seed(0)
    local s = nn.utils.summary(Net(), { 7, 1, 28, 28 })
    local expected = table.concat({
      "==========================================================================================",
      "Layer (type (var_name):depth-idx)        Output Shape              Param #",
      "==========================================================================================",
      "Net (Net)                                [7, 10]                   --",
      "├─Conv2d (conv1): 1-1                    [7, 10, 24, 24]           260",
      "├─Conv2d (conv2): 1-2                    [7, 20, 8, 8]             5,020",
      "├─Dropout2d (conv2_drop): 1-3            [7, 20, 8, 8]             --",
      "├─Linear (fc1): 1-4                      [7, 50]                   16,050",
      "├─Linear (fc2): 1-5                      [7, 10]                   510",
      "==========================================================================================",
      "Total params: 21,840",
      "Trainable params: 21,840",
      "Non-trainable params: 0",
      "Total mult-adds (M): 3.41",
      "==========================================================================================",
      "Input size (MB): 0.02",
      "Forward/backward pass size (MB): 0.40",
      "Params size (MB): 0.09",
      "Estimated Total Size (MB): 0.51",
      "==========================================================================================",
    }, "\n")
    assert.are.equal(expected, tostring(s))
    assert.are.equal(expected, s.text)
    assert.are.equal(21840, s.total_params)
    assert.are.equal(21840, s.trainable_params)
  end)

  for _, case in ipairs(fx) do
    it("gives PyTorch's shapes and counts and torchinfo's estimates for " .. case.label, function()
      local model, size, dtype = models[case.label]()
      local s = nn.utils.summary(model, size, { dtypes = dtype })
      -- PyTorch's hooks list a call when it ends, the summary when it begins: compare as sets
      local function key(r)
        return string.format("%s|%s|%s|%d|%d", r.name, r.class, table.concat(r.output or {}, "x"),
          r.num_params, r.trainable_params)
      end
      local want, got = {}, {}
      for _, c in ipairs(case.calls) do want[#want + 1] = key(c) end
      for _, r in ipairs(s.rows) do if r.output then got[#got + 1] = key(r) end end
      table.sort(want)
      table.sort(got)
      assert.are.same(want, got)
      assert.are.equal(case.total_params, s.total_params)
      assert.are.equal(case.trainable_params, s.trainable_params)
      assert.are.equal(case.param_bytes, s.param_bytes)
      assert.are.equal(case.input_bytes, s.input_bytes)
      assert.are.equal(case.output_bytes, s.output_bytes)
      assert.are.equal(case.mult_adds, s.total_mult_adds)
      assert.are.equal(s.input_bytes + s.output_bytes + s.param_bytes, s.total_bytes)
    end)
  end

  it("marks frozen counts, calls again, and containers never called", function()
    local text = tostring(nn.utils.summary(Tagger(), { 2, 5 }, { dtypes = "int64" }))
    local rows = {}
    for line in text:gmatch("[^\n]+") do rows[#rows + 1] = line end
    assert.are.same({
      "Tagger (Tagger)                          [2, 5, 3]                 --",
      "├─Embedding (emb): 1-1                   [2, 5, 4]                 40",
      "├─LSTM (lstm): 1-2                       [2, 5, 6]                 288",
      "├─ModuleList (blocks): 1-3               --                        --",
      "│    └─Linear (0): 2-1                   [2, 5, 6]                 42",
      "│    └─Linear (0): 2-2                   [2, 5, 6]                 (recursive)",
      "│    └─Linear (1): 2-3                   [2, 5, 3]                 21",
    }, { table.unpack(rows, 4, 10) })
    assert.are.equal("Non-trainable params: 36", rows[14])
    -- a layer with no trainable parameter shows its count in parentheses
    text = tostring(nn.utils.summary(deep(), { 2, 3, 8, 8 }))
    assert.truthy(text:find("│    └─BatchNorm2d (1): 2-2              [2, 8, 8, 8]              (16)\n", 1, true), text)
  end)

  it("hides rows past depth and shows all the parameters of a container at the last depth", function()
    local s = nn.utils.summary(deep(), { 2, 3, 8, 8 })
    local text = tostring(s)
    -- depth 3 (the default): the inner container holds no parameters itself
    assert.truthy(text:find("│    └─Sequential (0): 2-4               [2, 256]                  --\n", 1, true), text)
    assert.truthy(text:find("│    │    └─Conv2d (0): 3-1              [2, 4, 8, 8]              36\n", 1, true), text)
    assert.falsy(text:find("ReLU (0)", 1, true), text)   -- depth 4
    text = tostring(nn.utils.summary(deep(), { 2, 3, 8, 8 }, { depth = 2 }))
    assert.truthy(text:find("│    └─Sequential (0): 2-4               [2, 256]                  36\n", 1, true), text)
    assert.falsy(text:find("Conv2d (0): 3-1", 1, true), text)
    text = tostring(nn.utils.summary(deep(), { 2, 3, 8, 8 }, { depth = 0 }))
    assert.truthy(text:find("\nSequential (Sequential)                  [2, 5]                    1,561\n", 1, true), text)
    -- the totals do not depend on what is shown
    assert.truthy(text:find("\nTotal params: 1,561\nTrainable params: 1,545\nNon-trainable params: 16\n", 1, true), text)
  end)

  it("takes example tensors and several inputs", function()
    local Two = nn.Module:extend("Two")
    function Two:__init()
      nn.Module.__init(self)
      self.a = nn.Linear(3, 4)
      self.b = nn.Linear(5, 4)
    end
    function Two:forward(x, y) return self.a(x) + self.b(y) end
    local s = nn.utils.summary(Two(), { { 2, 3 }, { 2, 5 } })
    assert.are.same({ 2, 4 }, s.rows[1].output)
    assert.are.equal(2 * 3 * 4 + 2 * 5 * 4, s.input_bytes)
    s = nn.utils.summary(Two():double(), { lt.zeros(6, 3, { dtype = "float64" }), lt.zeros(6, 5, { dtype = "float64" }) })
    assert.are.equal(6 * 8 * 8, s.input_bytes)
    assert.are.same({ 6, 4 }, s.rows[2].output)
    s = nn.utils.summary(nn.Linear(3, 2), lt.randn(4, 3))
    assert.are.same({ 4, 2 }, s.rows[1].output)
    assert.are.equal(8, s.total_params)
    -- float64 inputs from sizes
    s = nn.utils.summary(nn.Linear(3, 2):double(), { 4, 3 }, { dtypes = { "float64" } })
    assert.are.equal(4 * 3 * 8, s.input_bytes)
  end)

  it("leaves modes, running statistics and hooks as they were", function()
    local m = deep()
    m:train()
    m[1]:eval()
    local mean = m[1][2].running_mean:clone()
    nn.utils.summary(m, { 2, 3, 8, 8 })
    assert.is_true(m.training)
    assert.is_false(m[1].training)
    assert.is_false(m[1][2].training)
    assert.is_true(m[2].training)
    -- eval mode by default: BatchNorm's running statistics are not updated
    assert.is_true(lt.equal(mean, m[1][2].running_mean))
    -- mode = "train" runs in training mode, and still restores the modes
    nn.utils.summary(m, { 2, 3, 8, 8 }, { mode = "train" })
    assert.is_false(lt.equal(mean, m[1][2].running_mean))
    assert.is_false(m[1].training)
    -- no hook is left behind: a second summary lists each call once
    local a = nn.utils.summary(m, { 2, 3, 8, 8 })
    assert.are.equal(12, #a.rows)
    -- the forward pass runs without recording gradients
    local calls = 0
    m[3]:register_forward_hook(function(_, _, out)
      calls = calls + 1
      assert.is_nil(out.grad_fn)
    end)
    nn.utils.summary(m, { 2, 3, 8, 8 })
    assert.are.equal(1, calls)
  end)

  it("restores the model when the forward pass fails", function()
    local m = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(5, 2))
    m:train()
    local err = expect_error(function() nn.utils.summary(m, { 2, 3 }) end,
      "summary: the forward pass of Sequential failed:")
    assert.truthy(err:find("linear", 1, true) or err:find("Linear", 1, true), err)
    assert.is_true(m.training and m[2].training)
    -- the hooks are gone: the fixed model summarises with one row per call
    m[3] = nn.Linear(4, 2)
    assert.are.equal(4, #nn.utils.summary(m, { 2, 3 }).rows)
  end)

  it("refuses bad arguments naming summary", function()
    expect_error(function() nn.utils.summary({}, { 1, 3 }) end, "summary: expected a Module, got table")
    expect_error(function() nn.utils.summary(nn.Linear(3, 2), "1x3") end,
      "summary: input_size must be a table of sizes")
    expect_error(function() nn.utils.summary(nn.Linear(3, 2), { 1, 2.5 }) end,
      "summary: input 1: size 2 must be a non-negative integer, got 2.5")
    expect_error(function() nn.utils.summary(nn.Linear(3, 2), { 1, 3 }, { depht = 1 }) end,
      "summary: unknown option 'depht' (did you mean 'depth'?)")
    expect_error(function() nn.utils.summary(nn.Linear(3, 2), { 1, 3 }, { mode = "test" }) end,
      "summary: mode must be 'eval', 'train' or 'same', got 'test'")
    expect_error(function() nn.utils.summary(nn.Linear(3, 2), { 1, 3 }, { dtypes = "half" }) end,
      "summary: dtypes: unknown dtype 'half'")
    expect_error(function() nn.utils.summary(nn.Linear(3, 2), { 1, 3 }, { depth = -1 }) end,
      "summary: depth must be a non-negative integer, got -1")
  end)
end)

describe("nn.utils.count_parameters", function()
  it("counts each parameter once, all or only the trainable ones", function()
    local lin = nn.Linear(4, 3)
    assert.are.equal(15, nn.utils.count_parameters(lin))
    local shared = nn.Sequential(lin, nn.ReLU(), lin)
    assert.are.equal(15, nn.utils.count_parameters(shared))
    lin.bias:requires_grad_(false)
    assert.are.equal(12, nn.utils.count_parameters(shared, { trainable_only = true }))
    assert.are.equal(15, nn.utils.count_parameters(shared:parameters()))
    assert.are.equal(3, nn.utils.count_parameters(lin.bias))
    assert.are.equal(391, nn.utils.count_parameters(Tagger()))
    assert.are.equal(355, nn.utils.count_parameters(Tagger(), { trainable_only = true }))
    expect_error(function() nn.utils.count_parameters(5) end,
      "count_parameters: expected a Module or a list of tensors, got integer")
    expect_error(function() nn.utils.count_parameters({ lin.weight, "w" }) end,
      "count_parameters: parameter 2 is a string, not a Tensor")
    expect_error(function() nn.utils.count_parameters(lin, { trainable = true }) end,
      "count_parameters: unknown option 'trainable'")
  end)
end)
