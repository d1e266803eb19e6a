-- A character-level language model (embedding + GRU + linear) trained on a text corpus from a
-- Debian package: the GNU GPL v3 text that base-files installs in /usr/share/common-licenses.
--   bin/lantern examples/char_model.lua [--steps 300]
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional

local steps = tonumber(arg[1] == "--steps" and arg[2] or nil) or 300
local f = assert(io.open("/usr/share/common-licenses/GPL-3", "r"))
local text = f:read("a"):gsub("%s+", " ")
f:close()

-- vocabulary: the distinct bytes of the corpus, classes 1..V
local vocab, index = {}, {}
for c in text:gmatch(".") do
  if not index[c] then vocab[#vocab + 1] = c; index[c] = #vocab end
end
local codes = {}
for i = 1, #text do codes[i] = index[text:sub(i, i)] end
local data = lt.tensor(codes)

lt.manual_seed(0)
local CharModel = nn.Module:extend("CharModel")
function CharModel:__init(v, e, h)
  nn.Module.__init(self)
  self.emb = nn.Embedding(v, e)
  self.rnn = nn.GRU(e, h, { batch_first = true })
  self.head = nn.Linear(h, v)
end
function CharModel:forward(x, h0)
  local out, h = self.rnn(self.emb(x), h0)
  return self.head(out), h
end

local V, T, B = #vocab, 48, 32
local model = CharModel(V, 32, 128)
local opt = lt.optim.Adam(model:parameters(), { lr = 3e-3 })
local gen = lt.Generator(1)
local t0 = lt.clock()
local last_loss
local bar <close> = lt.utils.progress(steps, { desc = "train", unit = "step", file = io.stdout })
for step = 1, steps do
  local starts = lt.randint(1, data:size(1) - T - 1, { B }, { generator = gen })
  local xs, ys = {}, {}
  for i, s in ipairs(starts:tolist()) do
    xs[i] = data:narrow(1, s, T)
    ys[i] = data:narrow(1, s + 1, T)
  end
  local x, y = lt.stack(xs), lt.stack(ys)
  local logits = model(x)
  local loss = F.cross_entropy(logits:reshape(B * T, V), y:reshape(B * T))
  opt:zero_grad()
  loss:backward()
  lt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
  opt:step()
  last_loss = loss:item()
  bar:set_postfix({ loss = last_loss })
  bar:update(1)
end
bar:close()
print(string.format("trained %d steps in %.1f s, last loss %.3f", steps, lt.clock() - t0, last_loss))

-- sample 200 characters from the model, with a generator of its own so the sample is the same
-- on every run
local out = { "T", "h", "e", " " }
local sample_gen = lt.Generator(2)
lt.no_grad(function()
  local h
  local x = lt.tensor({ { index["T"], index["h"], index["e"], index[" "] } })
  for _ = 1, 200 do
    local logits
    logits, h = model(x, h)
    local probs = (logits:select(2, -1):squeeze(1) / 0.8):softmax(1)
    local pick = probs:multinomial(1, { generator = sample_gen }):item()
    out[#out + 1] = vocab[pick]
    x = lt.tensor({ { pick } })
  end
end)
print("sample: " .. table.concat(out))
