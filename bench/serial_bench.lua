-- Checkpoint throughput: lt.save / lt.load (torch.save's zip format) and safetensors save/load
-- of a ~100 MB float32 state_dict (50 tensors of 512 x 1024), in MB/s. PyTorch's side is
-- bench/serial_bench.py (same work, same names).
--   standalone:  bin/lantern bench/serial_bench.lua [dir]
--   from bench/run.lua: dofile("bench/serial_bench.lua")(want, report, timeit)
local lt = require "lantern"

local N_TENSORS, ROWS, COLS = 50, 512, 1024
local MB = N_TENSORS * ROWS * COLS * 4 / 1e6

local function bench(want, report, timeit, dir)
  if not (want("serial") or want("st_")) then return end
  dir = dir or os.getenv("TMPDIR") or "/tmp"
  local sd = lt.nn and lt.nn.OrderedDict and lt.nn.OrderedDict() or {}
  lt.manual_seed(0)
  for i = 1, N_TENSORS do sd["layers." .. (i - 1) .. ".weight"] = lt.randn(ROWS, COLS) end
  local pt, st = dir .. "/lantern_bench.pt", dir .. "/lantern_bench.safetensors"
  if want("serial") then
    report("serial_save_mbs", MB / timeit(function() lt.save(sd, pt) end, 1.0, 1), true)
    report("serial_load_mbs", MB / timeit(function() lt.load(pt) end, 1.0, 1), true)
  end
  if want("st_") then
    local flat = {}
    for k, v in pairs(sd) do flat[k] = v end
    report("st_save_mbs", MB / timeit(function() lt.safetensors.save(flat, st) end, 1.0, 1), true)
    report("st_load_mbs", MB / timeit(function() lt.safetensors.load(st) end, 1.0, 1), true)
  end
  os.remove(pt)
  os.remove(st)
end

if arg and arg[0] and arg[0]:match("serial_bench%.lua$") then
  local function timeit(fn, min_time, warm)
    for _ = 1, warm or 1 do fn() end
    local n, t0 = 0, lt.clock()
    while true do
      fn()
      n = n + 1
      local t = lt.clock() - t0
      if t > (min_time or 1) and n >= 3 then return t / n end
    end
  end
  bench(function() return true end, function(name, v) print(string.format("%s %.6g", name, v)) end,
    timeit, arg[1])
  return
end

return bench
