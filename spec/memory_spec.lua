-- Tensor memory: reclaimed by the collector without collectgarbage(), served by the cache.
local lt = require "lantern"

local rss_kb = require("support").rss_kb

describe("memory", function()
  it("keeps a flat resident size over 100,000 dropped 1 MB tensors", function()
    for _ = 1, 1000 do lt.ones(262144) end
    local before = rss_kb()
    for i = 1, 100000 do
      local t = lt.empty(262144)   -- 1 MiB of float32
      if i % 1000 == 0 then t:fill_(i) end
    end
    local after = rss_kb()
    assert.is_true(after - before < 64 * 1024, string.format("RSS grew by %d KiB", after - before))
  end)

  it("serves a steady loop from the cache and empties it on request", function()
    local function loop()
      for _ = 1, 400 do
        local a = lt.ones(1000)
        local _ = a + a
      end
      collectgarbage()
    end
    collectgarbage()
    for _ = 1, 3 do loop() end   -- warms the cache up to the loop's high-water mark
    local s0 = lt.memory_stats()
    loop()
    local s1 = lt.memory_stats()
    -- every allocation is served by the cache but for a few while the collector's pace settles
    assert.are.equal(800, (s1.reused - s0.reused) + (s1.fresh_allocs - s0.fresh_allocs))
    assert.is_true(s1.fresh_allocs - s0.fresh_allocs < 80)
    assert.is_true(s1.cached > 0)
    lt.empty_cache()
    assert.are.equal(0, lt.memory_stats().cached)
  end)
end)
