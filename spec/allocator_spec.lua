-- The free-list front Lantern puts on a Lua state's allocator (src/bind/lalloc.c), seen from a C
-- host with its own counting allocator (spec/c/host_alloc.c): blocks are reused, and every block
-- is back with the host's allocator after lua_close, also when the host wraps the allocator
-- again after Lantern loaded.
local cc = require "c.ccutil"

describe("the Lua allocator front", function()
  local exe
  setup(function() exe = cc.build("spec/c/host_alloc.c") end)
  teardown(function() os.remove(exe) end)

  local function run(mode)
    local out, err, code = cc.run(exe, { mode })
    assert.are.equal(0, code, "host_alloc " .. mode .. " failed:\n" .. out .. err)
    local allocations, pooled = out:match("^ok (%d+) (%d)\n")
    assert.truthy(allocations, out)
    return tonumber(allocations), pooled == "1"
  end

  it("returns every block to the host's allocator at lua_close", function()
    local allocations, pooled = run("plain")
    assert.is_true(pooled)
    -- 60,000 tensor results were made; reuse keeps the host's allocations far below that
    assert.is_true(allocations < 30000, "host saw " .. allocations .. " allocations")
  end)

  it("steps aside when the host wraps the allocator after Lantern loaded", function()
    run("wrapped")
  end)
end)
