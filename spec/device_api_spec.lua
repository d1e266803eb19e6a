-- The device API (t.device, to, lt.device, {device=} options, Module:to, the one-device rule,
-- checkpoints through the host) on the cpu alone, and on a mock second device that a C host
-- registers (spec/c/mock_device.c runs spec/device/mock_checks.lua), so the device layer is
-- tested here although these machines have no GPU.
local lt = require "lantern"
local cc = require "c.ccutil"
local support = require "support"

describe("devices", function()
  it("names the cpu and parses device names", function()
    local x = lt.ones(2)
    assert.are.equal("cpu", x.device)
    assert.are.equal("cpu", lt.device("cpu"))
    assert.are.equal("cpu", lt.device("cpu:0"))
    assert.are.equal("cuda", lt.device("cuda"))
    assert.are.equal("cuda:1", lt.device("cuda:1"))
    assert.are.equal("cpu", lt.get_default_device())
    support.expect_error(function() lt.set_default_device("cuda") end,
      "set_default_device: device 'cuda:0' is not available")
    support.expect_error(function() lt.device("tpu") end, "device: unknown device 'tpu' (known: cpu, cuda)")
    support.expect_error(function() lt.device("cuda:x") end, "invalid device 'cuda:x'")
    support.expect_error(function() lt.device("cpu:1") end, "invalid device 'cpu:1'")
  end)

  it("moves to the cpu as a no-op and refuses a device that is not there", function()
    local x = lt.randn(3)
    assert.is_true(rawequal(x, x:to("cpu")))
    assert.is_true(rawequal(x, x:cpu()))
    assert.is_true(rawequal(x, x:to({ device = "cpu" })))
    assert.are.equal("float64", x:to("cpu", "float64").dtype)
    support.expect_error(function() x:to("cuda") end, "to: device 'cuda:0' is not available")
    support.expect_error(function() lt.zeros(2, { device = "cuda" }) end,
      "zeros: device 'cuda:0' is not available")
    support.expect_error(function() lt.randn(2, { device = "gpu" }) end,
      "randn: unknown device 'gpu'")
    support.expect_error(function() x:to("tpu") end, "to: unknown dtype or device 'tpu'")
    local m = lt.nn.Linear(2, 2)
    local w = m.weight
    support.expect_error(function() m:to("cuda") end, "not available")
    assert.is_true(rawequal(w, m.weight), "a failed Module:to leaves the module as it was")
  end)

  it("works on a second device registered by a C host", function()
    local exe = cc.build("spec/c/mock_device.c")
    local out, err, code = cc.run(exe, { cc.abspath("spec/device/mock_checks.lua") }, 300)
    os.remove(exe)
    assert.are.equal(0, code, "mock_device failed:\n" .. out .. "\n" .. err)
    for _, name in ipairs({ "names", "round trip", "ops stay on the device", "mixing devices",
      "copy_ across devices", "autograd across devices", "Module:to", "save through the host",
      "memory" }) do
      assert.truthy(out:find("ok " .. name .. "\n", 1, true), "check '" .. name .. "' did not pass:\n" .. out .. err)
    end
    assert.truthy(out:find("device bytes live 0\n", 1, true), "device memory leaked:\n" .. out)
  end)

  it("runs the whole per-device op suite on the mock device", function()
    local exe = cc.build("spec/c/mock_device.c")
    local root = cc.root
    local cmd = string.format("cd %s && LANTERN_DEVICE=cuda LUA_PATH=%s timeout 600 %s %s 2>&1",
      support.shq(root), support.shq(root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" ..
        root .. "/spec/?.lua;;"), support.shq(exe), "spec/device/mock_runner.lua")
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    local ok = p:close()
    os.remove(exe)
    assert.is_true(ok, out)
    local passed, failed = out:match("(%d+) passed, (%d+) failed")
    assert.are.equal("0", failed, out)
    assert.is_true(tonumber(passed) >= 60, out)
  end)
end)
