-- One rank of bench/ddp.lua: trains the demo CNN (examples/fashion_mnist.lua's network, Adam)
-- on synthetic 28x28 images, global batch 64 split over the ranks, one thread per rank, and
-- rank 0 prints "images_per_s <n>". A world of one trains the plain module (no DDP).
--   mpirun -np N bin/lantern bench/ddp_worker.lua [steps]
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional
local dist = lt.distributed

local STEPS, WARM, BATCH = tonumber(arg[1]) or 40, 5, 64
local rank, world = dist.init()
lt.set_num_threads(1)
lt.manual_seed(0)
local model = nn.Sequential(
  nn.Conv2d(1, 16, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
  nn.Conv2d(16, 32, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
  nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
local net = world > 1 and nn.parallel.DistributedDataParallel(model) or model
local opt = lt.optim.Adam(net:parameters(), { lr = 1e-3 })
local per = BATCH // world
local X = lt.randn(per, 1, 28, 28)
local Y = lt.randint(1, 11, { per })

local function step()
  local loss = F.cross_entropy(net(X), Y)
  opt:zero_grad()
  loss:backward()
  opt:step()
end
for _ = 1, WARM do step() end
dist.barrier()
local t0 = lt.clock()
for _ = 1, STEPS do step() end
dist.barrier()
local dt = lt.clock() - t0
if rank == 0 then print(string.format("images_per_s %.1f", STEPS * BATCH / dt)) end
