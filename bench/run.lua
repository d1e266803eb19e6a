-- `make bench`: Lantern beside PyTorch (Debian's python3-torch via /usr/bin/python3) on the same
-- work and thread count, printed as ratios. Usage: bin/lantern bench/run.lua [threads] [names...]
local lt = require "lantern"

local threads = tonumber(arg[1]) or 1
local only = {}
for i = 2, #arg do only[#only + 1] = arg[i] end
lt.set_num_threads(threads)

local function want(name)
  if #only == 0 then return true end
  for _, o in ipairs(only) do if name:sub(1, #o) == o then return true end end
  return false
end

local wall = lt.clock

local function timeit(fn, min_time, warm)
  min_time, warm = min_time or 0.3, warm or 3
  for _ = 1, warm do fn() end
  local n, t0 = 0, wall()
  while true do
    fn()
    n = n + 1
    local t = wall() - t0
    if t > min_time and n >= 3 then return t / n end
  end
end

local results, order, higher_better = {}, {}, {}
local function report(name, value, hb)
  results[name] = value
  order[#order + 1] = name
  higher_better[name] = hb
  io.stderr:write(string.format("  lantern %-22s %12.4g\n", name, value))
end


----------------------------------------------------------------------- core

if want("small_add") then
  local a, b = lt.randn(16), lt.randn(16)
  local n = 20000
  report("small_add_ns", timeit(function()
    for _ = 1, n do local _ = a + b end
  end) / n * 1e9, false)
end

if want("add_16m") then
  local a, b = lt.randn(16 * 1048576), lt.randn(16 * 1048576)
  report("add_16m_gbs", 3 * 4 * 16 * 1048576 / timeit(function() local _ = a + b end) / 1e9, true)
end

if want("gemm") then
  for _, n in ipairs { 256, 512, 1024 } do
    local a, b = lt.randn(n, n), lt.randn(n, n)
    report("gemm_" .. n .. "_gflops", 2 * n ^ 3 / timeit(function() local _ = a:mm(b) end) / 1e9, true)
  end
end

----------------------------------------------------------------------- autograd

if want("mlp_small") then
  lt.manual_seed(0)
  local w1 = lt.randn(16, 32, { requires_grad = true })
  local b1 = lt.zeros(32, { requires_grad = true })
  local w2 = lt.randn(32, 1, { requires_grad = true })
  local b2 = lt.zeros(1, { requires_grad = true })
  local x, y = lt.randn(8, 16), lt.randn(8, 1)
  report("mlp_small_us", timeit(function()
    local h = (x:matmul(w1) + b1):relu()
    local loss = ((h:matmul(w2) + b2 - y) ^ 2):mean()
    loss:backward()
    w1.grad, b1.grad, w2.grad, b2.grad = nil, nil, nil, nil
  end, 0.5) * 1e6, false)
end

if want("mlp_784") then
  lt.manual_seed(0)
  local sizes = { 784, 512, 512, 10 }
  local ws, bs, params = {}, {}, {}
  for i = 1, 3 do
    ws[i] = (lt.randn(sizes[i], sizes[i + 1]) * 0.05):requires_grad_()
    bs[i] = lt.zeros(sizes[i + 1], { requires_grad = true })
    params[#params + 1] = ws[i]
    params[#params + 1] = bs[i]
  end
  local opt = lt.optim.SGD(params, { lr = 0.01, momentum = 0.9 })
  local F = lt.nn.functional
  local x = lt.randn(128, 784)
  local y = lt.randint(1, 11, { 128 })
  local step = function()
    local h = x
    for i = 1, 3 do
      h = h:matmul(ws[i]) + bs[i]
      if i < 3 then h = h:relu() end
    end
    local loss = F.cross_entropy(h, y)
    opt:zero_grad()
    loss:backward()
    opt:step()
  end
  report("mlp_784_ms", timeit(step, 1.0) * 1e3, false)
  -- the eight GEMMs of the step alone (forward 3, backward 5), for reference
  local a1, a2, a3 = lt.randn(128, 784), lt.randn(128, 512), lt.randn(128, 512)
  local g3, g2 = lt.randn(128, 10), lt.randn(128, 512)
  report("mlp_784_gemms_ms", timeit(function()
    local _ = a1:mm(ws[1]:detach()); _ = a2:mm(ws[2]:detach()); _ = a3:mm(ws[3]:detach())
    _ = a3:t():mm(g3); _ = g3:mm(ws[3]:detach():t())
    _ = a2:t():mm(g2); _ = g2:mm(ws[2]:detach():t())
    _ = a1:t():mm(g2)
  end, 1.0) * 1e3, false)
end


-- benchmarks of later layers register themselves in bench/more/*.lua
for _, name in ipairs { "lenet", "serial" } do
  local path = "bench/more/" .. name .. ".lua"
  local f = io.open(path)
  if f then
    f:close()
    dofile(path)(want, report, timeit)
  end
end

----------------------------------------------------------------------- PyTorch side

local function read_lines(cmd)
  local p = io.popen(cmd)
  local out = {}
  for line in p:lines() do
    local k, v = line:match("^(%S+) (%S+)$")
    if k then out[k] = tonumber(v) end
  end
  p:close()
  return out
end

local torch = {}
local has_torch = os.execute("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1")
local names = table.concat(only, " ")
if has_torch then
  io.stderr:write("running PyTorch ...\n")
  -- OpenBLAS inside PyTorch ignores torch.set_num_threads; give it the same thread count too
  torch = read_lines(string.format("OPENBLAS_NUM_THREADS=%d /usr/bin/python3 bench/torch_bench.py %d %s 2>/dev/null",
    threads, threads, names))
end
local bare = {}
if os.execute("test -x build/gemm_bare") then
  bare = read_lines("build/gemm_bare " .. threads)
end

print(string.format("\nLantern vs PyTorch, %d thread(s)%s", threads,
  has_torch and "" or " (PyTorch not installed: its column is empty)"))
print(string.format("%-22s %12s %12s %10s  %s", "benchmark", "lantern", "pytorch", "ratio", "note"))
for _, name in ipairs(order) do
  local v, t = results[name], torch[name]
  local ratio = ""
  if t then
    -- ratio > 1 means Lantern is better
    ratio = string.format("%.2fx", higher_better[name] and v / t or t / v)
  end
  local note = ""
  if bare[name] then note = string.format("bare OpenBLAS %.4g (%.1f%%)", bare[name], 100 * v / bare[name]) end
  print(string.format("%-22s %12.4g %12s %10s  %s", name, v, t and string.format("%.4g", t) or "-", ratio, note))
end
print("ratio > 1: Lantern is faster (times: pytorch/lantern; rates: lantern/pytorch)")
