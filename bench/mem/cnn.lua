-- Memory benchmark loop: the demo CNN of examples/fashion_mnist.lua trained with Adam on random
-- batches of 64 images shaped like Fashion-MNIST's (1x28x28, 10 classes).
--   bin/lantern bench/mem/cnn.lua [threads=2] [steps=300]   (bench/mem.lua runs it)
-- Prints one `mem loop=cnn ...` line (fields: bench/mem/harness.lua).
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local H = dofile(here .. "harness.lua")

local threads, steps = H.args(300)
lt.set_num_threads(threads)
local base_mb = H.rss()

lt.manual_seed(0)
local Net = nn.Module:extend("Net")   -- as in examples/fashion_mnist.lua
function Net:__init()
  nn.Module.__init(self)
  self.features = nn.Sequential(
    nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2))
  self.classifier = nn.Sequential(
    nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
end
function Net:forward(x) return self.classifier(self.features(x)) end

local model = Net()
local opt = lt.optim.Adam(model:parameters(), { lr = 1e-3 })
model:train()

H.run { loop = "cnn", threads = threads, steps = steps, base_mb = base_mb, step = function()
  local x, y = lt.randn(64, 1, 28, 28), lt.randint(1, 11, { 64 })   -- a fresh batch each step
  local loss = F.cross_entropy(model(x), y)
  opt:zero_grad()
  loss:backward()
  opt:step()
  return loss:item()
end }
