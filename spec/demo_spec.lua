-- The main demo, shortened: a few hundred Fashion-MNIST images. The loss must fall and the
-- checkpoint must reload into a fresh model that predicts exactly the same.
local lt = require "lantern"

local data_dir = "/usr/share/datasets/fashion-mnist"
local have_data = io.open(data_dir .. "/train-images-idx3-ubyte.gz") ~= nil

describe("fashion-mnist demo (shortened)", function()
  if not have_data then
    pending("needs the Debian package dataset-fashion-mnist (CI installs it)")
    return
  end

  it("learns, and its checkpoint reloads to the same predictions", function()
    local out = os.tmpname()
    os.remove(out)
    local saved_arg = _G.arg
    _G.arg = { "--limit", "600", "--epochs", "3", "--batch", "32", "--out", out, "--quiet", "--lr", "3e-3" }
    local ok, res = pcall(dofile, "examples/fashion_mnist.lua")
    _G.arg = saved_arg
    assert(ok, res)
    local h = res.history.train
    assert.are.equal(3, #h)
    assert.is_true(h[3][2] < h[1][2], string.format("train loss did not fall: %g -> %g", h[1][2], h[3][2]))
    assert.is_true(res.accuracy > 0.5, "test accuracy " .. res.accuracy)
    -- a fresh model loaded from the checkpoint predicts exactly what the trained one does
    local fresh = res.Net()
    fresh:load_state_dict(lt.load(res.checkpoint).model)
    res.model:eval()
    fresh:eval()
    local x = res.test_inputs:narrow(1, 1, 50)
    local a = lt.no_grad(function() return res.model(x) end)
    local b = lt.no_grad(function() return fresh(x) end)
    assert.is_true(lt.equal(a, b))
    local f = io.open(out .. "/curves.svg")
    assert.is_truthy(f)
    assert.matches("<svg", f:read("a"))
    f:close()
    os.execute("rm -rf '" .. out .. "'")
  end)
end)
