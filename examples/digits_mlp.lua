-- A short MLP on scikit-learn's 8x8 digits (Debian package python3-sklearn ships the CSV).
--   bin/lantern examples/digits_mlp.lua [--epochs 30]
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional

local epochs = tonumber(arg[1] == "--epochs" and arg[2] or nil) or 30
local path = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
local f = io.open(path)
if not f then
  print("digits data not found at " .. path .. " (install the Debian package python3-sklearn)")
  os.exit(1)
end
f:close()

local all = lt.data.read_csv(path, { numeric = true })     -- 1797 x 65: 64 pixels, label
local X = all:narrow(2, 1, 64) / 16
local Y = all:select(2, 65):long() + 1                      -- classes 1..10
lt.manual_seed(0)
local split = lt.data.random_split(lt.data.TensorDataset(X, Y), { 1500, 297 },
  { generator = lt.Generator(0) })
local train = lt.data.DataLoader(split[1], { batch_size = 32, shuffle = true, generator = lt.Generator(1) })

local model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
local opt = lt.optim.SGD(model:parameters(), { lr = 0.1, momentum = 0.9 })
local t0 = lt.clock()
local bar <close> = lt.utils.progress(epochs, { desc = "train", unit = "epoch", file = io.stdout })
for epoch = 1, epochs do
  local total, n = 0, 0
  for xb, yb in train:iter() do
    local loss = F.cross_entropy(model(xb), yb)
    opt:zero_grad()
    loss:backward()
    opt:step()
    total, n = total + loss:item() * xb:size(1), n + xb:size(1)
  end
  bar:set_postfix({ loss = total / n })
  bar:update(1)
end
bar:close()

local correct, n = 0, #split[2]
lt.no_grad(function()
  for i = 1, n do
    local x, y = split[2]:get(i)
    if model(x:unsqueeze(1)):argmax(2):item() == y:item() then correct = correct + 1 end
  end
end)
print(string.format("test accuracy %.2f%% on %d held-out digits (%.1f s)", 100 * correct / n, n, lt.clock() - t0))
