-- Memory loops for spec/memory_spec.lua, each run in a fresh process:
--   lua5.4 spec/mem/loops.lua <loop> <gen|inc|host> <steps>
-- "host" leaves the collector in the mode the process started with (a C host sets it).
-- Prints one line: the loop's reference size, its peak, RSS early and late, and whether the
-- collector is still in the mode it started in.
--
-- The reference is what one step needs: the bytes in use at the peak of a step run with the
-- collector stopped (the live state plus everything the step allocates), so a collector that
-- keeps garbage within a small factor of it is what the spec asks for.
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional

local name, mode, steps = arg[1], arg[2], tonumber(arg[3]) or 200
if mode == "gen" then collectgarbage("generational")
elseif mode == "inc" then collectgarbage("incremental") end
lt.manual_seed(1)
lt.set_num_threads(1)

local function rss_kb()
  local f = assert(io.open("/proc/self/statm"))
  local _, res = f:read("n", "n")
  f:close()
  return res * 4
end

local function trainer(model, opt, x, y, lossfn)
  return function()
    local loss = lossfn(model(x), y)
    opt:zero_grad()
    loss:backward()
    opt:step()
  end
end

local loops = {}

function loops.two_tensors()
  return function()
    local a = lt.ones(256, 1024)
    local b = lt.ones(256, 1024)
    return a, b
  end
end

-- Ops that save their output for the backward (relu, exp, tanh): the output's storage is held
-- by the tensor and by the graph when its handle is made, and must still pace the collector.
function loops.saved_outputs()
  local x = lt.randn(256, 1024):requires_grad_()
  return function()
    local a, b = x:relu(), x:exp()
    local c, d = x:tanh(), x:sigmoid()
    return a, b, c, d
  end
end

function loops.mlp()
  local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                              nn.Linear(512, 10))
  local opt = lt.optim.Adam(model:parameters(), { lr = 1e-3 })
  return trainer(model, opt, lt.randn(128, 784), lt.randint(1, 11, { 128 }), F.cross_entropy)
end

-- The demo's CNN (examples/fashion_mnist.lua) at its batch size.
function loops.cnn()
  local model = nn.Sequential(
    nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
  local opt = lt.optim.Adam(model:parameters(), { lr = 1e-3 })
  return trainer(model, opt, lt.randn(64, 1, 28, 28), lt.randint(1, 11, { 64 }), F.cross_entropy)
end

-- A 2-layer causal transformer language model (token and position embeddings, pre-norm
-- encoder layers with GELU, a tied-free output head), trained with AdamW.
function loops.transformer()
  local V, D, T, B = 65, 64, 32, 8
  local LM = nn.Module:extend("LM")
  function LM:__init()
    LM.super.__init(self)
    self.tok = nn.Embedding(V, D)
    self.pos = nn.Embedding(T, D)
    self.blocks = nn.ModuleList({
      nn.TransformerEncoderLayer(D, 4, { dim_feedforward = 4 * D, dropout = 0, activation = "gelu",
                                         batch_first = true, norm_first = true }),
      nn.TransformerEncoderLayer(D, 4, { dim_feedforward = 4 * D, dropout = 0, activation = "gelu",
                                         batch_first = true, norm_first = true }),
    })
    self.norm = nn.LayerNorm(D)
    self.head = nn.Linear(D, V)
    self.mask = lt.ones(T, T, { dtype = "bool" }):triu(1)
  end
  function LM:forward(idx)
    local x = self.tok(idx) + self.pos(lt.arange(1, T + 1))
    for i = 1, #self.blocks do x = self.blocks[i](x, { src_mask = self.mask }) end
    return self.head(self.norm(x))
  end
  local model = LM()
  local opt = lt.optim.AdamW(model:parameters(), { lr = 3e-4 })
  local idx = lt.randint(1, V + 1, { B, T })
  local tgt = lt.randint(1, V + 1, { B * T })
  return trainer(model, opt, idx, tgt, function(out, y) return F.cross_entropy(out:view(B * T, V), y) end)
end

local make = assert(loops[name], "unknown loop " .. tostring(name))
local step = make()
for _ = 1, 3 do step() end

collectgarbage()
collectgarbage("stop")
lt.reset_peak_memory_stats()
step()
local reference = lt.memory_stats().peak_in_use
collectgarbage("restart")
collectgarbage()

local before = collectgarbage("isrunning")
local early_at = math.max(1, steps // 5)
local rss_early
lt.reset_peak_memory_stats()
local full0 = lt.memory_stats().full_collections
for i = 1, steps do
  step()
  if i == early_at then rss_early = rss_kb() end
end
local st = lt.memory_stats()
local rss_late = rss_kb()
-- collectgarbage(m) returns the previous mode: it must still be the one the run started in
local kept = true
if mode == "gen" then kept = collectgarbage("generational") == "generational"
elseif mode == "inc" then kept = collectgarbage("incremental") == "incremental" end
print(string.format("reference=%d peak=%d rss_early=%d rss_late=%d full=%d mode_kept=%s running=%s",
  reference, st.peak_in_use, rss_early, rss_late, st.full_collections - full0, tostring(kept),
  tostring(before)))
