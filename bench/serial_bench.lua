-- Checkpoint throughput: lt.save / lt.load (torch.save's zip format) and safetensors save/load
-- of a ~100 MB float32 state_dict (50 tensors of 512 x 1024), in MB/s. PyTorch's side is
-- bench/serial_bench.py (same work, same names).
--   standalone:  bin/lantern bench/serial_bench.lua [dir]
--   from bench/run.lua: dofile("bench/serial_bench.lua")(group, timeit)
local lt = require "lantern"

local N_TENSORS, ROWS, COLS = 50, 512, 1024
local MB = N_TENSORS * ROWS * COLS * 4 / 1e6

local function state_dict()
  local sd = lt.nn and lt.nn.OrderedDict and lt.nn.OrderedDict() or {}
  lt.manual_seed(0)
  for i = 1, N_TENSORS do sd["layers." .. (i - 1) .. ".weight"] = lt.randn(ROWS, COLS) end
  return sd
end

local function tmpdir(dir) return dir or os.getenv("TMPDIR") or "/tmp" end

-- Registers the two groups: "serial" (.pt) and "st_" (safetensors, Lantern only).
local function bench(group, timeit, dir)
  group("serial", function(report)
    local sd, pt = state_dict(), tmpdir(dir) .. "/lantern_bench.pt"
    report("serial_save_mbs", MB / timeit(function() lt.save(sd, pt) end, 1.0, 1), true)
    report("serial_load_mbs", MB / timeit(function() lt.load(pt) end, 1.0, 1), true)
    os.remove(pt)
  end)
  group("st_", function(report)
    local flat, st = {}, tmpdir(dir) .. "/lantern_bench.safetensors"
    for k, v in pairs(state_dict()) do flat[k] = v end
    report("st_save_mbs", MB / timeit(function() lt.safetensors.save(flat, st) end, 1.0, 1), true)
    report("st_load_mbs", MB / timeit(function() lt.safetensors.load(st) end, 1.0, 1), true)
    os.remove(st)
  end)
end

if arg and arg[0] and arg[0]:match("serial_bench%.lua$") then
  local function timeit(fn, min_time, warm)   -- the fastest call, as in bench/run.lua
    for _ = 1, warm or 1 do fn() end
    local best, n, start = math.huge, 0, lt.clock()
    repeat
      local t0 = lt.clock()
      fn()
      best = math.min(best, lt.clock() - t0)
      n = n + 1
    until n >= 3 and lt.clock() - start > (min_time or 1)
    return best
  end
  local function report(name, v) print(string.format("%s %.6g", name, v)) end
  bench(function(_, fn) fn(report) end, timeit, arg[1])
  return
end

return bench
