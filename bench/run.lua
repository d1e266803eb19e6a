-- `make bench`: Lantern beside PyTorch (Debian's python3-torch via /usr/bin/python3) on the same
-- work and thread count, printed as ratios. Usage: bin/lantern bench/run.lua [threads] [names...]
--
-- This machine's speed drifts by up to 2x over seconds (shared cores), so a figure taken now
-- and its counterpart taken a minute later can disagree by more than the effect measured. Each
-- benchmark therefore runs in rounds that alternate Lantern and PyTorch (a PyTorch process
-- serving requests on a pipe), and each side keeps its best round; within a round, timeit keeps
-- the fastest call. The bare OpenBLAS ceiling runs in this process, beside Lantern's matmul.
local lt = require "lantern"

local threads = tonumber(arg[1]) or 1
local only = {}
for i = 2, #arg do only[#only + 1] = arg[i] end
local ROUNDS = tonumber(os.getenv("LANTERN_BENCH_ROUNDS")) or 3
lt.set_num_threads(threads)

local function want(name)
  if #only == 0 then return true end
  for _, o in ipairs(only) do if name:sub(1, #o) == o then return true end end
  return false
end

local wall = lt.clock

-- Seconds of the fastest of fn's calls made within min_time (at least 3, after warm-up calls).
local function timeit(fn, min_time, warm)
  min_time, warm = min_time or 0.3, warm or 3
  for _ = 1, warm do fn() end
  local best, n, start = math.huge, 0, wall()
  repeat
    local t0 = wall()
    fn()
    local t = wall() - t0
    if t < best then best = t end
    n = n + 1
  until n >= 3 and wall() - start > min_time
  return best
end

-- group(name, fn): fn(report) measures Lantern's side of one benchmark group; report(metric,
-- value, higher_is_better). PyTorch's bench/torch_bench.py has a group of the same name.
local groups = {}
local function group(name, fn, rounds, cpu)
  if want(name) then groups[#groups + 1] = { name = name, fn = fn, rounds = rounds, cpu = cpu } end
end

-- Runs this process (all its threads) on CPU `cpu`, or on every CPU when cpu is nil.
local function pin(cpu)
  local f = io.open("/proc/self/stat")
  local pid = f and f:read("n")
  if f then f:close() end
  if not pid then return end
  os.execute(string.format("taskset -a -p -c %s %d >/dev/null 2>&1", cpu or "0-1023", pid))
end

local bare_ok, bare = pcall(require, "bench.bare")   -- build/bench/bare.so, built by `make bench`

----------------------------------------------------------------------- core

-- rounds here are short (0.3 s a side), so more of them cost little and steady the ratio; both
-- sides run on the same CPU (a shared machine's cores are not equally fast at every moment)
group("small_add", function(report)
  local a, b = lt.randn(16), lt.randn(16)
  local n = 20000
  report("small_add_ns", timeit(function()
    for _ = 1, n do local _ = a + b end
  end) / n * 1e9, false)
end, 2 * ROUNDS, 0)

group("add_16m", function(report)
  local a, b = lt.randn(16 * 1048576), lt.randn(16 * 1048576)
  report("add_16m_gbs", 3 * 4 * 16 * 1048576 / timeit(function() local _ = a + b end) / 1e9, true)
end)

group("gemm", function(report)
  for _, n in ipairs { 256, 512, 1024 } do
    local a, b = lt.randn(n, n), lt.randn(n, n)
    local name = "gemm_" .. n .. "_gflops"
    report(name, 2 * n ^ 3 / timeit(function() local _ = a:mm(b) end) / 1e9, true)
    if bare_ok then report(name .. "_bare", 2 * n ^ 3 / bare.sgemm(n, 0.3, threads) / 1e9, true) end
  end
end)

----------------------------------------------------------------------- autograd

group("mlp_small", function(report)
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
end)

group("mlp_784", function(report)
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
end)

----------------------------------------------------------------------- activations, models

-- the vectorised float32 kernels on 1M floats (softmax: 1024 rows of 1024)
group("act_1m", function(report)
  local x, m = lt.randn(1 << 20), lt.randn(1024, 1024)
  report("gelu_1m_us", timeit(function() local _ = x:gelu() end) * 1e6, false)
  report("gelu_tanh_1m_us", timeit(function() local _ = x:gelu("tanh") end) * 1e6, false)
  report("softmax_1m_us", timeit(function() local _ = m:softmax(-1) end) * 1e6, false)
end)

-- char-level MLP: Embedding(65, 32) over 16 positions, flattened to 512, two hidden layers of
-- 512 (ReLU), 65 logits; batch 128, SGD with momentum
group("char_mlp", function(report)
  lt.manual_seed(0)
  local nn, F = lt.nn, lt.nn.functional
  local emb = nn.Embedding(65, 32)
  local mlp = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
    nn.Linear(512, 65))
  local params = emb:parameters()
  for _, p in ipairs(mlp:parameters()) do params[#params + 1] = p end
  local opt = lt.optim.SGD(params, { lr = 0.01, momentum = 0.9 })
  local x, y = lt.randint(1, 66, { 128, 16 }), lt.randint(1, 66, { 128 })
  report("char_mlp_ms", timeit(function()
    local loss = F.cross_entropy(mlp(emb(x):reshape(128, 512)), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
  end, 1.0) * 1e3, false)
end)

-- the 2-layer GPT of bench/mem/gpt.lua (d_model 128, 4 heads, context 64, vocab 65, batch 16,
-- AdamW): one training step on a fresh random batch
local function gpt_model()
  local nn = lt.nn
  local C = { vocab = 65, T = 64, d = 128, nh = 4, layers = 2 }
  local Attn = nn.Module:extend("BenchAttention")
  function Attn:__init()
    nn.Module.__init(self)
    self.qkv, self.proj = nn.Linear(C.d, 3 * C.d), nn.Linear(C.d, C.d)
  end
  function Attn:forward(x)
    local B, T, D = x:size(1), x:size(2), x:size(3)
    local hd = D // C.nh
    local qkv = self.qkv(x):split(D, 3)
    local q = qkv[1]:view(B, T, C.nh, hd):transpose(2, 3)
    local k = qkv[2]:view(B, T, C.nh, hd):transpose(2, 3)
    local v = qkv[3]:view(B, T, C.nh, hd):transpose(2, 3)
    -- fused (PyTorch 1.13 has no scaled_dot_product_attention: its twin keeps the composed form)
    local att = lt.nn.functional.scaled_dot_product_attention(q, k, v, { is_causal = true })
    return self.proj(att:transpose(2, 3):contiguous():view(B, T, D))
  end
  local Block = nn.Module:extend("BenchBlock")
  function Block:__init()
    nn.Module.__init(self)
    self.ln1, self.attn, self.ln2 = nn.LayerNorm(C.d), Attn(), nn.LayerNorm(C.d)
    self.mlp = nn.Sequential(nn.Linear(C.d, 4 * C.d), nn.GELU(), nn.Linear(4 * C.d, C.d))
  end
  function Block:forward(x)
    x = x + self.attn(self.ln1(x))
    return x + self.mlp(self.ln2(x))
  end
  local GPT = nn.Module:extend("BenchGPT")
  function GPT:__init()
    nn.Module.__init(self)
    self.tok, self.pos = nn.Embedding(C.vocab, C.d), nn.Embedding(C.T, C.d)
    local blocks = {}
    for i = 1, C.layers do blocks[i] = Block() end
    self.blocks = nn.ModuleList(blocks)
    self.ln_f, self.head = nn.LayerNorm(C.d), nn.Linear(C.d, C.vocab, { bias = false })
  end
  function GPT:forward(idx)
    local x = self.tok(idx) + self.pos(lt.arange(1, idx:size(2) + 1))
    for _, b in pairs(self.blocks) do x = b(x) end
    return self.head(self.ln_f(x))
  end
  return GPT(), C
end

group("gpt", function(report)
  lt.manual_seed(0)
  local model, C = gpt_model()
  local opt = lt.optim.AdamW(model:parameters(), { lr = 3e-4, weight_decay = 0.01 })
  local F = lt.nn.functional
  local B = 16
  report("gpt_step_ms", timeit(function()
    local seq = lt.randint(1, C.vocab + 1, { B, C.T + 1 })
    local logits = model(seq:narrow(2, 1, C.T))
    local loss = F.cross_entropy(logits:reshape(B * C.T, C.vocab), seq:narrow(2, 2, C.T):reshape(B * C.T))
    opt:zero_grad()
    loss:backward()
    opt:step()
  end, 2.0) * 1e3, false)
end)

-- process CPU time (all threads) per second of wall time over 200 steps of the mlp_784 step:
-- 1.0 when no thread spins while waiting
group("train_cpu", function(report)
  lt.manual_seed(0)
  local nn, F = lt.nn, lt.nn.functional
  local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
    nn.Linear(512, 10))
  local opt = lt.optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
  local x, y = lt.randn(128, 784), lt.randint(1, 11, { 128 })
  local function step()
    local loss = F.cross_entropy(model(x), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
  end
  for _ = 1, 10 do step() end
  local c0, w0 = os.clock(), wall()
  for _ = 1, 200 do step() end
  local c1, w1 = os.clock(), wall()
  report("train_cpu_per_wall", (c1 - c0) / (w1 - w0), false)
  report("train_step_ms", (w1 - w0) / 200 * 1e3, false)
end)

-- benchmarks of later layers register themselves in bench/more/*.lua
for _, name in ipairs { "lenet", "serial" } do
  local path = "bench/more/" .. name .. ".lua"
  local f = io.open(path)
  if f then
    f:close()
    dofile(path)(group, timeit)
  end
end

----------------------------------------------------------------------- PyTorch side

-- A PyTorch process that runs the group named on each line it reads and answers with
-- `metric value` lines and then `end`. Lua's popen is one-way, so requests go through a FIFO.
local function start_torch()
  if not os.execute("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") then return nil end
  local fifo = os.tmpname()
  os.remove(fifo)
  if not os.execute("mkfifo " .. fifo) then return nil end
  -- OpenBLAS inside PyTorch ignores torch.set_num_threads; give it the same thread count too
  local from = io.popen(string.format(
    "OPENBLAS_NUM_THREADS=%d /usr/bin/python3 bench/torch_bench.py --serve %d < %s 2>/dev/null",
    threads, threads, fifo))
  local to = io.open(fifo, "w")   -- blocks until the shell above opens the other end
  os.remove(fifo)
  to:setvbuf("line")
  -- importing torch takes seconds of CPU: no round starts before it is done
  if from:read("l") ~= "ready" then
    to:close()
    from:close()
    return nil
  end
  return {
    run = function(name)
      to:write(name, "\n")
      local out = {}
      for line in from:lines() do
        if line == "end" then return out end
        local k, v = line:match("^(%S+) (%S+)$")
        if k then out[k] = tonumber(v) end
      end
      return out
    end,
    close = function()
      to:close()
      from:close()
    end,
  }
end

local torch_proc = start_torch()
io.stderr:write(torch_proc and "" or "PyTorch not found: its column stays empty\n")

-- Values: each side's best over the rounds. Ratios: the median over rounds of the ratio within
-- a round, whose two halves ran seconds apart; the ratio of the two bests could pair a fast
-- moment of one side with a slow moment of the other.
local results, torch, order, higher_better, ratios, bare_ratios = {}, {}, {}, {}, {}, {}
-- a PyTorch-only figure has no Lantern report to say which way is better: said here, so that
-- its best round is kept (a rate's slowest round would flatter Lantern)
higher_better.add_16m_out_gbs = true
-- PyTorch-only figures measured against a Lantern one: the per-round ratio pairs them (Lantern's
-- `a + b` reuses a freed buffer, which is what PyTorch's kept `out=` does by hand)
local against = { add_16m_out_gbs = "add_16m_gbs" }
local function keep(tbl, name, v)
  local old = tbl[name]
  if old == nil or (higher_better[name] and v > old) or (not higher_better[name] and v < old) then
    tbl[name] = v
  end
end

for _, g in ipairs(groups) do
  if g.cpu then
    pin(g.cpu)
    if torch_proc then torch_proc.run("pin " .. g.cpu) end
  end
  for round = 1, g.rounds or ROUNDS do
    local mine = {}
    g.fn(function(name, value, hb)
      if higher_better[name] == nil then
        higher_better[name] = hb
        if not name:match("_bare$") then order[#order + 1] = name end
      end
      keep(results, name, value)
      mine[name] = value
      local of = name:match("^(.*)_bare$")   -- the bare call runs right after Lantern's
      if of and mine[of] then
        bare_ratios[of] = bare_ratios[of] or {}
        table.insert(bare_ratios[of], mine[of] / value)
      end
      io.stderr:write(string.format("  round %d lantern %-22s %12.4g\n", round, name, value))
    end)
    if torch_proc then
      for name, value in pairs(torch_proc.run(g.name)) do
        keep(torch, name, value)
        local m = mine[against[name] or name]
        if m then
          ratios[name] = ratios[name] or {}
          table.insert(ratios[name], higher_better[name] and m / value or value / m)
        end
        io.stderr:write(string.format("  round %d pytorch %-22s %12.4g\n", round, name, value))
      end
    end
  end
  if g.cpu then
    pin(nil)
    if torch_proc then torch_proc.run("pin") end
  end
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) // 2] or (xs[n // 2] + xs[n // 2 + 1]) / 2
end
if torch_proc then torch_proc.close() end

print(string.format("\nLantern vs PyTorch, %d thread(s), %d alternating rounds (small_add: %d): best " ..
  "value of each side, median of the per-round ratios%s", threads, ROUNDS, 2 * ROUNDS,
  torch_proc and "" or " (PyTorch not installed: its column is empty)"))
local cpuinfo = io.open("/proc/cpuinfo")
local model_name = cpuinfo and cpuinfo:read("a"):match("model name%s*:%s*([^\n]+)") or "?"
if cpuinfo then cpuinfo:close() end
print(string.format("Lantern's vector level: %s (lt.isa(); LANTERN_ISA overrides); CPU: %s", lt.isa(), model_name))
local gemm_by, blas_core = lt.gemm()
print(string.format("float32 GEMM: %s (lt.gemm(); LANTERN_GEMM overrides); OpenBLAS's kernels: %s", gemm_by,
  blas_core))
print(string.format("%-22s %12s %12s %10s  %s", "benchmark", "lantern", "pytorch", "ratio", "note"))
for _, name in ipairs(order) do
  local v, t = results[name], torch[name]
  local ratio = ""
  if ratios[name] then ratio = string.format("%.2fx", median(ratios[name])) end   -- > 1: Lantern better
  local note, b = "", results[name .. "_bare"]
  if b then note = string.format("bare OpenBLAS %.4g (%.1f%%)", b, 100 * median(bare_ratios[name])) end
  print(string.format("%-22s %12.4g %12s %10s  %s", name, v, t and string.format("%.4g", t) or "-", ratio, note))
end
-- PyTorch-only figures (a variant Lantern has no counterpart for)
local seen = {}
for _, name in ipairs(order) do seen[name] = true end
local extra = {}
for name in pairs(torch) do if not seen[name] then extra[#extra + 1] = name end end
table.sort(extra)
for _, name in ipairs(extra) do
  local of = against[name]
  local ratio = ratios[name] and string.format("%.2fx", median(ratios[name])) or ""
  print(string.format("%-22s %12s %12.4g %10s  %s", name, of and results[of] and
    string.format("%.4g", results[of]) or "-", torch[name], ratio, of and "Lantern: " .. of or ""))
end
print("ratio > 1: Lantern is faster (times: pytorch/lantern; rates: lantern/pytorch)")
