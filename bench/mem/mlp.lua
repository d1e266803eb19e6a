-- Memory benchmark loop: an MLP 784-512-512-10 trained with Adam on random batches of 128.
--   bin/lantern bench/mem/mlp.lua [threads=2] [steps=300]   (bench/mem.lua runs it)
-- Prints one `mem loop=mlp ...` line (fields: bench/mem/harness.lua).
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(here .. "harness.lua")

local threads, steps = H.args(300)
lt.set_num_threads(threads)
local base_mb = H.rss()

lt.manual_seed(0)
local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
  nn.Linear(512, 10))
local opt = lt.optim.Adam(model:parameters(), { lr = 1e-3 })

H.run { loop = "mlp", threads = threads, steps = steps, base_mb = base_mb, step = function()
  local x, y = lt.randn(128, 784), lt.randint(1, 11, { 128 })   -- a fresh batch each step
  local loss = F.cross_entropy(model(x), y)
  opt:zero_grad()
  loss:backward()
  opt:step()
  return loss:item()
end }
