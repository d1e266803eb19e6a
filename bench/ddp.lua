-- `make bench`: data-parallel training of the demo CNN. Images/s of 2 processes x 1 thread
-- (nn.parallel.DistributedDataParallel over Open MPI) against 1 process x 1 thread (the
-- scaling efficiency: the speed-up over the ideal 2x), and the same split in PyTorch
-- (DistributedDataParallel over gloo) when /usr/bin/python3 has torch. Usage:
--   bin/lantern bench/ddp.lua [steps]
-- The cores here are shared, so each side keeps its best of ROUNDS rounds, alternated.
local steps = tonumber(arg[1]) or 30
local ROUNDS = tonumber(os.getenv("LANTERN_BENCH_ROUNDS")) or 3

local function rate(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  local v = out:match("images_per_s ([%d%.]+)")
  if not ok or not v then return nil, out end
  return tonumber(v)
end

local mpirun = "OPENBLAS_NUM_THREADS=1 timeout 300 mpirun --oversubscribe --allow-run-as-root " ..
  "-x OPENBLAS_NUM_THREADS -x LANTERN_BUILD -np %d bin/lantern bench/ddp_worker.lua " .. steps
local torch = "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 timeout 300 /usr/bin/python3 bench/ddp_torch.py %d " .. steps
local have_mpirun = os.execute("command -v mpirun > /dev/null 2>&1")
local have_torch = os.execute("/usr/bin/python3 -c 'import torch.distributed' > /dev/null 2>&1")

if not have_mpirun then
  print("ddp: skipped (mpirun is missing: apt-get install libopenmpi-dev openmpi-bin)")
  return
end
local best = {}
local function keep(k, v) if v and (not best[k] or v > best[k]) then best[k] = v end end
for _ = 1, ROUNDS do
  for _, np in ipairs { 1, 2 } do
    local v, err = rate(string.format(mpirun, np))
    if not v then error("ddp: the Lantern run on " .. np .. " ranks failed:\n" .. err) end
    keep("lt" .. np, v)
    if have_torch then keep("pt" .. np, (rate(string.format(torch, np)))) end
  end
end

local function line(name, one, two)
  if not (one and two) then return name .. ": did not run" end
  return string.format("%-28s 1x1 %7.0f img/s | 2x1 %7.0f img/s | scaling %.2fx (efficiency %.0f%%)",
    name, one, two, two / one, 50 * two / one)
end
print(string.format("ddp: demo CNN, global batch 64, %d steps, best of %d rounds", steps, ROUNDS))
print(line("Lantern DDP (Open MPI)", best.lt1, best.lt2))
if have_torch then
  print(line("PyTorch DDP (gloo)", best.pt1, best.pt2))
  if best.lt2 and best.pt2 then
    print(string.format("%-28s %.2fx PyTorch's images/s on 2 processes", "Lantern / PyTorch", best.lt2 / best.pt2))
  end
else
  print("PyTorch DDP (gloo): skipped (no torch in /usr/bin/python3)")
end
