-- Trains a small CNN on Fashion-MNIST (Debian package dataset-fashion-mnist), with a progress
-- bar, per-epoch test evaluation, a checkpoint that can be resumed, and an SVG of the curves.
--
--   bin/lantern examples/fashion_mnist.lua [--epochs 4] [--batch 64] [--lr 1e-3] [--limit N]
--                                          [--out runs/fashion] [--resume] [--threads 2]
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
package.path = here .. "?.lua;" .. package.path
local plot = require "svgplot"

local opts = { epochs = 4, batch = 64, lr = 1e-3, limit = false, out = "runs/fashion",
  resume = false, threads = false, seed = 0, quiet = false,
  data = "/usr/share/datasets/fashion-mnist" }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or opts[k] == nil then
      error("fashion_mnist: unknown argument " .. arg[i] .. " (see the header of this file)")
    end
    if k == "resume" or k == "quiet" then opts[k] = true
    else
      local v = arg[i + 1]
      opts[k] = tonumber(v) or v
      i = i + 1
    end
    i = i + 1
  end
end
if opts.threads then lt.set_num_threads(opts.threads) end
os.execute("mkdir -p '" .. opts.out .. "'")

---------------------------------------------------------------- data

local function load_split(prefix, limit)
  local X = lt.data.read_idx(opts.data .. "/" .. prefix .. "-images-idx3-ubyte.gz")
  local Y = lt.data.read_idx(opts.data .. "/" .. prefix .. "-labels-idx1-ubyte.gz")
  if limit then X, Y = X:narrow(1, 1, limit), Y:narrow(1, 1, limit) end
  -- scale to [0,1], normalise with the training set's statistics, add the channel dim; in
  -- place, so the 188 MB training images are never copied
  X = X:contiguous():div_(255):sub_(0.2860):div_(0.3530):unsqueeze(2)
  return X, Y + 1   -- classes are 1-based in Lantern
end

local Xtr, Ytr = load_split("train", opts.limit)
local Xte, Yte = load_split("t10k", opts.limit and math.max(opts.limit // 5, 100))

---------------------------------------------------------------- model

lt.manual_seed(opts.seed)
local Net = nn.Module:extend("Net")
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
local opt = lt.optim.Adam(model:parameters(), { lr = opts.lr })
local loader_gen = lt.Generator(opts.seed + 1)
local loader = lt.data.DataLoader(lt.data.TensorDataset(Xtr, Ytr),
  { batch_size = opts.batch, shuffle = true, generator = loader_gen })
local steps_per_epoch = #loader
local sched = lt.optim.lr_scheduler.CosineAnnealingLR(opt, opts.epochs * steps_per_epoch)

local ckpt_path = opts.out .. "/checkpoint.pt"
local history = { train = {}, test = {} }
local start_epoch = 1

if opts.resume then
  local ck = lt.load(ckpt_path)
  model:load_state_dict(ck.model)
  opt:load_state_dict(ck.optimizer)
  sched:load_state_dict(ck.scheduler)
  loader_gen:set_state(ck.loader_rng)
  lt.set_rng_state(ck.rng)
  history = ck.history or history
  start_epoch = ck.epoch + 1
  print(string.format("resumed from %s after epoch %d", ckpt_path, ck.epoch))
end

---------------------------------------------------------------- loops

-- Metrics are aggregated over samples, not averaged over batches of unequal size.
local function evaluate(X, Y)
  model:eval()
  local total_loss, correct, n = 0, 0, X:size(1)
  lt.no_grad(function()
    for s = 1, n, 1000 do
      local len = math.min(1000, n - s + 1)
      local xb, yb = X:narrow(1, s, len), Y:narrow(1, s, len)
      local logits = model(xb)
      total_loss = total_loss + F.cross_entropy(logits, yb, { reduction = "sum" }):item()
      correct = correct + logits:argmax(2):eq(yb):sum():item()
    end
  end)
  model:train()
  return total_loss / n, correct / n
end

local t_start = lt.clock()
local images_seen, train_time = 0, 0
for epoch = start_epoch, opts.epochs do
  model:train()
  local loss_sum, correct, seen = 0, 0, 0
  local t0 = lt.clock()
  local bar = lt.utils.progress(loader:iter(), { total = steps_per_epoch, desc = "epoch " .. epoch,
    unit = "batch", file = io.stdout, disable = opts.quiet })
  for xb, yb in bar do
    local logits = model(xb)
    local loss = F.cross_entropy(logits, yb)
    opt:zero_grad()
    loss:backward()
    opt:step()
    sched:step()
    local bs = xb:size(1)
    loss_sum = loss_sum + loss:item() * bs
    correct = correct + logits:argmax(2):eq(yb):sum():item()
    seen = seen + bs
    bar:set_postfix({ loss = loss_sum / seen, acc = correct / seen })
  end
  local dt = lt.clock() - t0
  train_time, images_seen = train_time + dt, images_seen + seen
  local test_loss, test_acc = evaluate(Xte, Yte)
  print(string.format("epoch %d: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.1f s, %.0f img/s",
    epoch, loss_sum / seen, 100 * correct / seen, test_loss, 100 * test_acc, dt, seen / dt))
  history.train[#history.train + 1] = { epoch, loss_sum / seen, correct / seen }
  history.test[#history.test + 1] = { epoch, test_loss, test_acc }
  lt.save({ epoch = epoch, model = model:state_dict(), optimizer = opt:state_dict(),
    scheduler = sched:state_dict(), loader_rng = loader_gen:get_state(), rng = lt.get_rng_state(),
    history = history }, ckpt_path)
end

---------------------------------------------------------------- report

local function series(rows, col)
  local pts = {}
  for _, r in ipairs(rows) do pts[#pts + 1] = { r[1], r[col] } end
  return pts
end
local svg = opts.out .. "/curves.svg"
plot.write(svg, { title = "Fashion-MNIST CNN (Lantern)", panels = {
  { title = "loss", xlabel = "epoch", series = {
    { name = "train", points = series(history.train, 2) },
    { name = "test", points = series(history.test, 2) } } },
  { title = "accuracy", xlabel = "epoch", series = {
    { name = "train", points = series(history.train, 3) },
    { name = "test", points = series(history.test, 3) } } },
} })

local final = history.test[#history.test]
print(string.format("final test accuracy: %.2f%%", 100 * (final and final[3] or 0)))
if images_seen > 0 then
  print(string.format("training throughput: %.0f images/s (%d threads); total %.1f s",
    images_seen / train_time, lt.get_num_threads(), lt.clock() - t_start))
end
print("checkpoint: " .. ckpt_path)
print("curves:     " .. svg)
return { accuracy = final and final[3], history = history, model = model, Net = Net,
  test_inputs = Xte, checkpoint = ckpt_path }
