-- Shared by bench/mem/{mlp,cnn,gpt}.lua: runs a training loop and prints one line of figures,
--   mem loop=NAME impl=lantern threads=N steps=N step_ms=X base_mb=X early_step=N
--       rss_early_mb=X rss_late_mb=X peak_mb=X lua_mb=X loss_first=X loss_last=X
-- step_ms: median step time over the second half of the steps (steady state); base_mb: RSS
-- after loading Lantern, before the model exists; rss_early_mb / rss_late_mb: RSS right after
-- step early_step and after the last step; peak_mb: the process's peak RSS (VmHWM) at the end;
-- lua_mb: the Lua heap at the end (collectgarbage "count", which only reads it). The collector
-- runs as the stock interpreter set it up: this file never calls collectgarbage otherwise.
-- bench/mem/torch_mem.py prints the same line for PyTorch.
local lt = require "lantern"

local H = {}

-- VmRSS and VmHWM of this process, in MB
function H.rss()
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  local rss = tonumber(s:match("VmRSS:%s*(%d+) kB"))
  local hwm = tonumber(s:match("VmHWM:%s*(%d+) kB"))
  return rss / 1024, hwm / 1024
end

-- Command-line arguments of a loop script: threads (default 2), steps (default `steps`, at
-- least 1).
function H.args(steps)
  local threads = math.tointeger(tonumber(arg and arg[1])) or 2
  return threads, math.max(math.tointeger(tonumber(arg and arg[2])) or steps, 1)
end

-- run{loop=, threads=, steps=, early_step=, base_mb=, step=fn}: step(i) does one training step
-- and returns its loss as a number.
function H.run(o)
  local times, loss_first, loss_last, rss_early = {}, nil, nil, nil
  local early = math.min(o.early_step or 10, o.steps)
  for i = 1, o.steps do
    local t0 = lt.clock()
    local loss = o.step(i)
    times[i] = lt.clock() - t0
    if i == 1 then loss_first = loss end
    loss_last = loss
    if i == early then rss_early = H.rss() end
  end
  local rss_late, peak = H.rss()
  local tail = {}
  for i = o.steps // 2 + 1, o.steps do tail[#tail + 1] = times[i] end
  table.sort(tail)
  local n = #tail
  local median = n % 2 == 1 and tail[(n + 1) // 2] or (tail[n // 2] + tail[n // 2 + 1]) / 2
  print(string.format("mem loop=%s impl=lantern threads=%d steps=%d step_ms=%.3f base_mb=%.1f " ..
    "early_step=%d rss_early_mb=%.1f rss_late_mb=%.1f peak_mb=%.1f lua_mb=%.1f " ..
    "loss_first=%.4f loss_last=%.4f", o.loop, o.threads, o.steps, median * 1e3, o.base_mb, early,
    rss_early, rss_late, peak, collectgarbage("count") / 1024, loss_first, loss_last))
  io.stdout:flush()
end

return H
