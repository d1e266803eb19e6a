-- Models trained in PyTorch, loaded into the same models written with lt.nn: the outputs must
-- match PyTorch's (spec/fixtures/gen_serial.py saved inputs and outputs) to 1e-5 relative.
-- A model whose layers lt.nn does not have yet is reported pending.
local lt = require "lantern"
local U = require "serial_util"
local expected = require "fixtures.serial_expected"

local nn = lt.nn

local function have(...)
  for _, name in ipairs { ... } do
    if nn[name] == nil then return false, name end
  end
  return true
end

-- |a - b| <= 1e-5 * |b| + 1e-6 elementwise, with the first mismatch in the message
local function close(got, want, what)
  local a, b = U.flat(got), U.flat(lt.tensor(want, { dtype = "float64" }))
  assert.equal(#b, #a, what .. ": number of elements")
  for i = 1, #a do
    local tol = 1e-5 * math.abs(b[i]) + 1e-6
    assert(math.abs(a[i] - b[i]) <= tol,
      ("%s: element %d is %.9g, PyTorch gives %.9g"):format(what, i, a[i], b[i]))
  end
end

local builders = {
  mlp = { needs = { "Sequential", "Linear", "ReLU" }, build = function()
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
  end },
  cnn = { needs = { "Sequential", "Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "Flatten", "Linear" },
    build = function()
      return nn.Sequential(nn.Conv2d(2, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 3))
    end },
  lstm = { needs = { "LSTM" }, build = function()
    return nn.LSTM(3, 4, { batch_first = true })
  end },
  transformer = { needs = { "TransformerEncoderLayer", "ModuleList", "Module" }, build = function()
    local opts = { dim_feedforward = 16, dropout = 0.0, batch_first = true }
    if nn.TransformerEncoder then
      return nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, opts), 2,
        { enable_nested_tensor = false })
    end
    -- PyTorch's TransformerEncoder is a ModuleList named `layers` run in sequence
    local Enc = nn.Module:extend("TransformerEncoder")
    function Enc:__init()
      nn.Module.__init(self)
      self.layers = nn.ModuleList { nn.TransformerEncoderLayer(8, 2, opts),
        nn.TransformerEncoderLayer(8, 2, opts) }
    end
    function Enc:forward(x)
      for _, l in ipairs(self.layers) do x = l(x) end
      return x
    end
    return Enc()
  end },
}

-- Runs model m on its fixture input; returns the list of outputs PyTorch saved.
local function outputs(name, m)
  local x = lt.tensor(expected.models[name].input, { dtype = "float32" })
  if name == "lstm" then
    local out, hc = m(x)
    return { out, hc[1], hc[2] }
  end
  return { m(x) }
end

describe("serial: PyTorch models in Lantern", function()
  for _, name in ipairs { "mlp", "cnn", "lstm", "transformer" } do
    local b = builders[name]
    for _, ext in ipairs { ".pt", ".safetensors" } do
      it(name .. ext .. " gives PyTorch's outputs", function()
        local ok, missing = have(table.unpack(b.needs))
        if not ok then return pending("lt.nn." .. missing .. " does not exist yet") end
        local m = b.build()
        m:eval()
        lt.load_module(m, U.path(name .. ext))   -- strict: every key must line up
        local got = lt.no_grad(outputs, name, m)
        local want = expected.models[name].outputs
        assert.equal(#want, #got)
        for i = 1, #want do close(got[i], want[i], name .. ext .. " output " .. i) end
      end)
    end
  end

  it("state_dict keys of the Lantern models are PyTorch's, in PyTorch's order", function()
    for name, b in pairs(builders) do
      if have(table.unpack(b.needs)) then
        assert.same(expected.models[name].keys, U.keys(b.build():state_dict()), name)
      end
    end
  end)
end)
