-- Idle threads sleep: after matmuls (blocks on Lantern's pool, OpenBLAS on one thread) and large
-- elementwise ops, a pure-Lua loop on the main thread is the only thing that runs. Counted in CPU ticks
-- (USER_HZ, 100 a second): the process's ticks minus the main thread's own are what every other
-- thread used during the loop. OpenBLAS's default busy-wait of ~0.1 s after each threaded call
-- showed up here as ~10 ticks; a worker that polls tens of microseconds shows as none.
local lt = require "lantern"

-- utime + stime, fields 14 and 15 of a /proc stat line (after the parenthesised name)
local function ticks(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  local fields = {}
  for w in s:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = w end
  return tonumber(fields[12]) + tonumber(fields[13])
end

-- Runs Lua arithmetic until the main thread has used `want` ticks of CPU (a count of CPU
-- used, not of elapsed time, so a slow or loaded machine only makes it take longer).
local function busy_main(want)
  local m0 = ticks("/proc/thread-self/stat")
  local s = 0
  repeat
    for i = 1, 100000 do s = s + i % 7 end
  until ticks("/proc/thread-self/stat") - m0 >= want
  return s
end

-- OpenBLAS's own threads, started when the library loads, poll for about 0.1 s before they
-- first sleep (README, Performance); a spec run alone, in a fresh process, would count that. This
-- waits until a stretch of Lua shows them asleep, for at most 20 stretches.
local function openblas_settled()
  for _ = 1, 20 do
    local p0, m0 = ticks("/proc/self/stat"), ticks("/proc/thread-self/stat")
    busy_main(5)
    local p1, m1 = ticks("/proc/self/stat"), ticks("/proc/thread-self/stat")
    if (p1 - p0) - (m1 - m0) == 0 then return true end
  end
  return false
end

-- CPU ticks of each of this process's threads, by thread id
local function thread_ticks()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("n")
  f:close()
  local ls = assert(io.popen("ls /proc/" .. pid .. "/task"))
  local t = {}
  for tid in ls:lines() do
    local ok, n = pcall(ticks, "/proc/" .. pid .. "/task/" .. tid .. "/stat")
    if ok then t[tid] = n end
  end
  ls:close()
  return t
end

describe("idle threads", function()
  local saved
  setup(function() assert.is_true(openblas_settled(), "OpenBLAS's threads never went idle") end)
  before_each(function() saved = lt.get_num_threads() end)
  after_each(function() lt.set_num_threads(saved) end)

  it("include a worker the job did not call, which sleeps while the others work", function()
    -- three workers started, then jobs of two threads: the third is woken by each job and must
    -- go back to sleep, not poll until the job ends
    lt.set_num_threads(4)
    local a, b = lt.randn(1024, 1024), lt.randn(1024, 1024)
    local _ = a:matmul(b)
    lt.set_num_threads(2)
    local x, y = lt.randn(2048, 2048), lt.randn(2048, 2048)
    local before = thread_ticks()
    local c
    for _ = 1, 4 do c = x:matmul(y) end
    local after = thread_ticks()
    assert.is_true(math.abs(c[7][9]:item() - (x[7] * y:select(2, 9)):sum():item()) < 1e-2)
    local used = {}
    for tid, n in pairs(after) do
      if before[tid] then used[#used + 1] = n - before[tid] end
    end
    table.sort(used, function(p, q) return p > q end)
    -- the caller and one worker did the products; every other thread used (almost) nothing
    assert.is_true(used[2] >= 10, string.format("second busiest thread used %d ticks", used[2]))
    assert.is_true((used[3] or 0) <= 3, string.format("a third thread used %d ticks " ..
      "(the busiest two: %d, %d)", used[3] or 0, used[1], used[2]))
  end)

  for _, nt in ipairs { 1, 2 } do
    it("use no CPU while the main thread runs Lua after parallel work, at " .. nt .. " threads",
      function()
        lt.set_num_threads(nt)
        lt.manual_seed(0)
        local a, b = lt.randn(256, 256), lt.randn(256, 256)
        local x = lt.randn(1 << 21)
        local main, others = 0, 0
        -- rounds of parallel work, each followed by Lua: a pool that spins ~0.1 s after each
        -- job would keep a core busy through most of every Lua stretch
        for _ = 1, 4 do
          local c = a:matmul(b)
          local y = x * 2 + 1
          -- the work happened
          assert.is_true(math.abs(c[1][1]:item() - (a[1] * b:select(2, 1)):sum():item()) < 1e-3)
          assert.are.equal(x[7]:item() * 2 + 1, y[7]:item())
          -- counted over the Lua stretches only: the parallel work itself uses other threads
          local p0, m0 = ticks("/proc/self/stat"), ticks("/proc/thread-self/stat")
          busy_main(10)
          local p1, m1 = ticks("/proc/self/stat"), ticks("/proc/thread-self/stat")
          main, others = main + (m1 - m0), others + (p1 - p0) - (m1 - m0)
        end
        assert.is_true(main >= 40)
        -- each reading rounds on its own, so threads that used nothing can show a tick or two per
        -- stretch; a spinning pool shows about ten per stretch
        assert.is_true(others <= 6, string.format("other threads used %d ticks while the main " ..
          "thread used %d", others, main))
      end)
  end
end)
