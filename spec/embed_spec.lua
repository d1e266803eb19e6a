-- examples/embed: a C host linked with liblantern.a loads a PyTorch checkpoint and runs it for
-- 10,000 ticks with no Lua files on disk, no Lua heap growth and no fresh tensor allocations
-- in steady state; its outputs match PyTorch's (spec/fixtures/embed_expected.lua, written by
-- examples/embed/make_model.py).
local cc = require "c.ccutil"
local expected = require "fixtures.embed_expected"

describe("examples/embed (C host with liblantern.a)", function()
  local exe

  setup(function()
    exe = cc.build("examples/embed/embed.c")
  end)
  teardown(function() if exe then os.remove(exe) end end)

  it("runs the checkpoint for 10,000 ticks with PyTorch's results and a flat memory", function()
    local out, err, code = cc.run(exe, { cc.abspath("examples/embed/model.pt"), expected.ticks })
    assert.are.equal(0, code, "embed failed:\n" .. out .. err)
    local ticks = tonumber(out:match("ticks: (%d+)"))
    assert.are.equal(expected.ticks, ticks)
    local last, sums = {}, {}
    for v in out:match("last: ([^\n]+)"):gmatch("%S+") do last[#last + 1] = tonumber(v) end
    for v in out:match("sums: ([^\n]+)"):gmatch("%S+") do sums[#sums + 1] = tonumber(v) end
    assert.are.equal(4, #last)
    assert.are.equal(4, #sums)
    for k = 1, 4 do
      assert.is_true(math.abs(last[k] - expected.last[k]) <= 1e-6 + 1e-5 * math.abs(expected.last[k]),
        string.format("last[%d] = %.9g, PyTorch %.9g", k, last[k], expected.last[k]))
      assert.is_true(math.abs(sums[k] - expected.sums[k]) <= 1e-3,
        string.format("sums[%d] = %.12g, PyTorch %.12g", k, sums[k], expected.sums[k]))
    end
    -- steady state: no fresh tensor memory, no Lua heap growth (embed also exits 1 otherwise)
    assert.are.equal("0", out:match("fresh allocations in steady state: (%d+)"))
    local kb_warm, kb_end = out:match("lua heap KB: ([%d.]+) after warm%-up, ([%d.]+) at end")
    assert.truthy(kb_warm, out)
    assert.is_true(tonumber(kb_end) <= tonumber(kb_warm) + 8, out)
    assert.truthy(out:find("time per tick: [%d.]+ us"), out)
  end)

  it("reports a missing checkpoint and exits with status 1", function()
    local out, err, code = cc.run(exe, { "/nonexistent/model.pt", 2000 })
    assert.are.equal(1, code, out .. err)
    assert.truthy(err:find("/nonexistent/model.pt", 1, true), err)
    assert.are.equal("", out)
  end)
end)
