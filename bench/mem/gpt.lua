-- Memory benchmark loop: a small GPT (2 blocks, d_model 128, 4 heads, context 64, vocab 65)
-- trained with AdamW on random token batches of 16 sequences for next-token prediction.
--   bin/lantern bench/mem/gpt.lua [threads=2] [steps=100]   (bench/mem.lua runs it)
-- Prints one `mem loop=gpt ...` line (fields: bench/mem/harness.lua). bench/mem/torch_mem.py
-- has the same model in PyTorch.
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(here .. "harness.lua")

local threads, steps = H.args(100)
lt.set_num_threads(threads)
local base_mb = H.rss()

local cfg = { vocab = 65, block_size = 64, d_model = 128, n_head = 4, n_layer = 2, batch = 16 }

-- Multi-head self-attention in which position t attends to positions 1..t only.
local CausalSelfAttention = nn.Module:extend("CausalSelfAttention")
function CausalSelfAttention:__init(c)
  nn.Module.__init(self)
  self.n_head = c.n_head
  self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
  self.proj = nn.Linear(c.d_model, c.d_model)
  -- true above the diagonal: the future positions that a query may not see
  self:register_buffer("mask", lt.ones(c.block_size, c.block_size, { dtype = "bool" }):triu(1))
end
function CausalSelfAttention:forward(x)
  local B, T, C = x:size(1), x:size(2), x:size(3)
  local nh = self.n_head
  local hd = C // nh
  local qkv = self.qkv(x):split(C, 3)
  -- (B, T, C) -> (B, nh, T, hd)
  local q = qkv[1]:view(B, T, nh, hd):transpose(2, 3)
  local k = qkv[2]:view(B, T, nh, hd):transpose(2, 3)
  local v = qkv[3]:view(B, T, nh, hd):transpose(2, 3)
  local att = q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(hd))
  att = att:masked_fill(self.mask:narrow(1, 1, T):narrow(2, 1, T), -math.huge):softmax(-1)
  local y = att:matmul(v):transpose(2, 3):contiguous():view(B, T, C)
  return self.proj(y)
end

-- Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x)).
local Block = nn.Module:extend("Block")
function Block:__init(c)
  nn.Module.__init(self)
  self.ln1 = nn.LayerNorm(c.d_model)
  self.attn = CausalSelfAttention(c)
  self.ln2 = nn.LayerNorm(c.d_model)
  self.mlp = nn.Sequential(nn.Linear(c.d_model, 4 * c.d_model), nn.GELU(),
    nn.Linear(4 * c.d_model, c.d_model))
end
function Block:forward(x)
  x = x + self.attn(self.ln1(x))
  return x + self.mlp(self.ln2(x))
end

local GPT = nn.Module:extend("GPT")
function GPT:__init(c)
  nn.Module.__init(self)
  self.tok_emb = nn.Embedding(c.vocab, c.d_model)
  self.pos_emb = nn.Embedding(c.block_size, c.d_model)
  local blocks = {}
  for i = 1, c.n_layer do blocks[i] = Block(c) end
  self.blocks = nn.ModuleList(blocks)
  self.ln_f = nn.LayerNorm(c.d_model)
  self.head = nn.Linear(c.d_model, c.vocab, { bias = false })
end
-- idx: (B, T) int64 token ids (1-based); returns (B, T, vocab) logits
function GPT:forward(idx)
  local T = idx:size(2)
  local x = self.tok_emb(idx) + self.pos_emb(lt.arange(1, T + 1))
  for _, block in pairs(self.blocks) do x = block(x) end
  return self.head(self.ln_f(x))
end

lt.manual_seed(0)
local model = GPT(cfg)
local opt = lt.optim.AdamW(model:parameters(), { lr = 3e-4, weight_decay = 0.01 })
model:train()

local B, T, V = cfg.batch, cfg.block_size, cfg.vocab
H.run { loop = "gpt", threads = threads, steps = steps, base_mb = base_mb, step = function()
  -- a fresh batch of random token sequences; targets are the inputs shifted by one
  local seq = lt.randint(1, V + 1, { B, T + 1 })
  local x, y = seq:narrow(2, 1, T), seq:narrow(2, 2, T)
  local logits = model(x)
  local loss = F.cross_entropy(logits:reshape(B * T, V), y:reshape(B * T))
  opt:zero_grad()
  loss:backward()
  opt:step()
  return loss:item()
end }
