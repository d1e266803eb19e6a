-- Streaming stores against ordinary ones for `a + b` at sizes around the threshold, and the cost
-- to the next op (a sum) that reads the output. Usage: bin/lantern bench/stream.lua [threads]
-- Prints, per size, the best call of each within 0.3 s; the two settings alternate per size.
local lt = require "lantern"
lt.set_num_threads(tonumber(arg[1]) or 1)

local function timeit(fn)
  fn()
  local best, start = math.huge, lt.clock()
  repeat
    local t0 = lt.clock()
    fn()
    best = math.min(best, lt.clock() - t0)
  until lt.clock() - start > 0.3
  return best
end

print(string.format("threshold %d bytes; %d thread(s)", lt._stream_threshold(),
  lt.get_num_threads()))
for _, m in ipairs { 0.25, 1, 2, 4, 16, 32 } do
  local n = math.floor(m * 1048576)
  local a, b = lt.randn(n), lt.randn(n)
  for _, mode in ipairs { "ordinary", "streamed" } do
    lt._stream_threshold(mode == "streamed" and 1 or 0)   -- 1: every op streams; 0: none
    local t = timeit(function() local _ = a + b end)
    local t2 = timeit(function() local c = a + b; local _ = c:sum() end)
    print(string.format("%6.2fM floats  %-8s  a + b %8.1f us %6.1f GB/s   a + b then sum %8.1f us",
      m, mode, t * 1e6, 12 * n / t / 1e9, t2 * 1e6))
  end
  lt._stream_threshold(-1)
end
