-- Two lua_States in two pthreads use Lantern at the same time (spec/c/two_states.c): every
-- result equals the one computed alone, so random generators, grad mode and the thread budget
-- are per state and the shared buffer cache is thread-safe.
local cc = require "c.ccutil"

describe("two lua_States in two threads", function()
  it("compute the same results as one state alone", function()
    local exe = cc.build("spec/c/two_states.c", "-pthread")
    local out, err, code = cc.run(exe, { cc.sanitized() and 10 or 60 })
    os.remove(exe)
    assert.are.equal(0, code, "two_states failed:\n" .. out .. err)
    local r0 = out:match("reference 0: ([^\n]+)")
    local r1 = out:match("reference 1: ([^\n]+)")
    assert.truthy(r0 and r1, out)
    -- thread 0 records a graph and gets gradients; thread 1 has grad mode off
    local f0 = {}
    for w in r0:gmatch("%S+") do f0[#f0 + 1] = w end
    assert.are.equal("true", f0[2])
    assert.are.equal("true", f0[5])
    assert.truthy(r1:find("^%S+ false false "), r1)
    assert.truthy(out:find("\nok: 2 threads x %d+ iterations\n"), out)
    assert.are.equal("", err)
  end)
end)

describe("the worker pool", function()
  it("runs every element of every job once when jobs change their size and thread count", function()
    local exe = cc.build("spec/c/pool_parts.c", "-pthread")
    local out, err, code = cc.run(exe, { cc.sanitized() and 5000 or 20000 })
    os.remove(exe)
    assert.are.equal(0, code, "pool_parts failed:\n" .. out .. err)
    assert.truthy(out:find("^ok: %d+ jobs\n"), out)
  end)
end)

describe("the worker pool's runs", function()
  it("start each thread at the front of its own run and take the others' from the back", function()
    local exe = cc.build("spec/c/pool_runs.c", "-pthread")
    local out, err, code = cc.run(exe, {})
    os.remove(exe)
    assert.are.equal(0, code, "pool_runs failed:\n" .. out .. err)
    assert.are.equal("ok\n", out)
    assert.are.equal("", err)
  end)
end)
