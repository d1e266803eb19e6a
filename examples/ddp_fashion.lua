-- The Fashion-MNIST CNN of fashion_mnist.lua trained on several processes with
-- nn.parallel.DistributedDataParallel: each rank trains on its share of every epoch
-- (data.DistributedSampler) and the gradients are averaged over the ranks in each backward.
-- Rank 0 shows the progress bar, prints the results and writes the checkpoint.
--
--   mpirun -np 2 bin/lantern examples/ddp_fashion.lua [--epochs 4] [--batch 64] [--lr 1e-3]
--       [--limit N] [--out runs/ddp_fashion] [--resume] [--threads N] [--seed 0] [--quiet]
--
-- --batch is the global batch: each rank takes batch / ranks samples of it, so the training
-- follows the single-process one. --threads is per rank (default: the cores divided by the
-- ranks on this machine). As root, mpirun needs --allow-run-as-root; with more ranks than
-- cores, --oversubscribe. --resume reads the checkpoint on every rank (on a cluster, put
-- --out on a file system that every machine sees).
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional
local dist = lt.distributed

local opts = { epochs = 4, batch = 64, lr = 1e-3, limit = false, out = "runs/ddp_fashion",
  resume = false, threads = false, seed = 0, quiet = false,
  data = "/usr/share/datasets/fashion-mnist" }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or opts[k] == nil then
      error("ddp_fashion: unknown argument " .. arg[i] .. " (see the header of this file)")
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

local rank, world = dist.init()
local main = rank == 0
local local_ranks = tonumber(os.getenv("OMPI_COMM_WORLD_LOCAL_SIZE") or "") or 1
-- ranks on one machine share its cores: more threads than cores would slow every rank
lt.set_num_threads(opts.threads or math.max(1, lt.get_num_threads() // local_ranks))
if opts.batch % world ~= 0 then
  error(string.format("ddp_fashion: --batch %d does not split over %d ranks", opts.batch, world))
end
local rank_batch = opts.batch // world
if main then os.execute("mkdir -p '" .. opts.out .. "'") end

---------------------------------------------------------------- data

local function load_split(prefix, limit)
  local X = lt.data.read_idx(opts.data .. "/" .. prefix .. "-images-idx3-ubyte.gz")
  local Y = lt.data.read_idx(opts.data .. "/" .. prefix .. "-labels-idx1-ubyte.gz")
  if limit then X, Y = X:narrow(1, 1, limit), Y:narrow(1, 1, limit) end
  X = X:contiguous():div_(255):sub_(0.2860):div_(0.3530):unsqueeze(2)
  return X, Y + 1
end

local Xtr, Ytr = load_split("train", opts.limit)
local Xte, Yte = load_split("t10k", opts.limit and math.max(opts.limit // 5, 100))
local train_ds = lt.data.TensorDataset(Xtr, Ytr)
local sampler = lt.data.DistributedSampler(train_ds, { seed = opts.seed })
local loader = lt.data.DataLoader(train_ds, { batch_size = rank_batch, sampler = sampler })

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
local ckpt_path = opts.out .. "/checkpoint.pt"
local ck
if opts.resume then
  ck = lt.load(ckpt_path)
  model:load_state_dict(ck.model)
end
local ddp = nn.parallel.DistributedDataParallel(model)
local opt = lt.optim.Adam(ddp:parameters(), { lr = opts.lr })
local sched = lt.optim.lr_scheduler.CosineAnnealingLR(opt, opts.epochs * #loader)
local history = { train = {}, test = {} }
local start_epoch = 1
if ck then
  -- the optimiser's state is the same on every rank, since their gradients are
  opt:load_state_dict(ck.optimizer)
  sched:load_state_dict(ck.scheduler)
  history = ck.history or history
  start_epoch = ck.epoch + 1
  if main then print(string.format("resumed from %s after epoch %d", ckpt_path, ck.epoch)) end
end

---------------------------------------------------------------- loops

-- The sums of every rank's values (one allreduce for all of them).
local function summed(...)
  local t = lt.tensor({ ... }, { dtype = "float64" })
  dist.all_reduce(t)
  return table.unpack(t:tolist())
end

-- Each rank evaluates its own slice of the test set; the sums are combined.
local function evaluate(X, Y)
  model:eval()
  local n = X:size(1)
  local per = (n + world - 1) // world
  local first, last = rank * per + 1, math.min(n, (rank + 1) * per)
  local total_loss, correct = 0, 0
  lt.no_grad(function()
    for s = first, last, 1000 do
      local len = math.min(1000, last - s + 1)
      local xb, yb = X:narrow(1, s, len), Y:narrow(1, s, len)
      local logits = model(xb)
      total_loss = total_loss + F.cross_entropy(logits, yb, { reduction = "sum" }):item()
      correct = correct + logits:argmax(2):eq(yb):sum():item()
    end
  end)
  model:train()
  total_loss, correct = summed(total_loss, correct)
  return total_loss / n, correct / n
end

local t_start = lt.clock()
local images_seen, train_time = 0, 0
for epoch = start_epoch, opts.epochs do
  sampler:set_epoch(epoch)
  -- the dropout masks of each rank and epoch, the same after a resume
  lt.manual_seed(opts.seed * 1000003 + epoch * world + rank)
  ddp:train()
  local loss_sum, correct, seen = 0, 0, 0
  local t0 = lt.clock()
  local bar = lt.utils.progress(loader:iter(), { total = #loader, desc = "epoch " .. epoch,
    unit = "batch", file = io.stdout, disable = opts.quiet or not main })
  for xb, yb in bar do
    local logits = ddp(xb)
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
  loss_sum, correct, seen = summed(loss_sum, correct, seen)
  train_time, images_seen = train_time + dt, images_seen + seen
  local test_loss, test_acc = evaluate(Xte, Yte)
  history.train[#history.train + 1] = { epoch, loss_sum / seen, correct / seen }
  history.test[#history.test + 1] = { epoch, test_loss, test_acc }
  if main then
    print(string.format("epoch %d: train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.1f s, %.0f img/s on %d ranks",
      epoch, loss_sum / seen, 100 * correct / seen, test_loss, 100 * test_acc, dt, seen / dt, world))
    lt.save({ epoch = epoch, model = ddp.module:state_dict(), optimizer = opt:state_dict(),
      scheduler = sched:state_dict(), history = history, world = world }, ckpt_path)
  end
end

---------------------------------------------------------------- report

local final = history.test[#history.test]
if main then
  print(string.format("final test accuracy: %.2f%%", 100 * (final and final[3] or 0)))
  if images_seen > 0 then
    print(string.format("training throughput: %.0f images/s (%d ranks x %d threads); total %.1f s",
      images_seen / train_time, world, lt.get_num_threads(), lt.clock() - t_start))
  end
  print("checkpoint: " .. ckpt_path)
end
return { accuracy = final and final[3], history = history, model = model }
