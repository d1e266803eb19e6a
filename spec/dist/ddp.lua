-- Worker of spec/distributed_spec.lua (mpirun -np 2): DistributedDataParallel against one
-- process training on the whole batch. Each rank starts from its own random parameters
-- (overwritten by rank 0's at construction), trains on its half of every batch, and records
-- its parameters; rank 0 also trains the single-process reference from rank 0's start.
local lt = require "lantern"
local common = dofile("spec/dist/common.lua")
local nn, F = lt.nn, lt.nn.functional
local dist = lt.distributed

local rank, world = dist.init()
local STEPS, BATCH = 12, 8
local R = { rank = rank }

local function net(seed)
  lt.manual_seed(seed)
  return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))
end

-- the same data on every rank: batches of BATCH rows; rank r trains on rows r*half+1..
lt.manual_seed(123)
local X, Y = lt.randn(STEPS, BATCH, 5), lt.randn(STEPS, BATCH, 3)
local half = BATCH // world

local function make_opt(kind, params)
  if kind == "sgd" then return lt.optim.SGD(params, { lr = 0.05, momentum = 0.9 }) end
  return lt.optim.Adam(params, { lr = 0.01 })
end

local function train(kind, model, forward, rows_of, clip)
  local opt = make_opt(kind, model:parameters())
  for s = 1, STEPS do
    local xb, yb = rows_of(X[s]), rows_of(Y[s])
    local loss = F.mse_loss(forward(xb), yb)
    opt:zero_grad()
    loss:backward()
    if clip then nn.utils.clip_grad_norm_(model:parameters(), 0.5) end
    opt:step()
  end
end

local function mine(t) return t:narrow(1, rank * half + 1, half) end
local function all(t) return t end

for _, case in ipairs { { "sgd", false, 25 }, { "adam", false, 25 }, { "sgd", true, 0.0005 } } do
  local kind, clip, cap = case[1], case[2], case[3]
  local key = kind .. (clip and "_clip" or "")
  local model = net(100 + rank)           -- a different start on each rank
  local before = common.params(model)
  local ddp = nn.parallel.DistributedDataParallel(model, { bucket_cap_mb = cap })
  local after_wrap = common.params(model)
  train(kind, model, function(x) return ddp(x) end, mine, clip)
  local res = { before = before, after_wrap = after_wrap, final = common.params(model),
    buckets = #ddp._ddp.buckets }
  if rank == 0 then
    local ref = net(100)
    train(kind, ref, function(x) return ref(x) end, all, clip)
    res.reference = common.params(ref)
  end
  R[key] = res
end

-- no_sync: two micro-batches per rank, the first without averaging; the gradients then equal
-- the single process's over all four micro-batches (each loss weighted by 1/world)
do
  local model = net(7)
  local ddp = nn.parallel.DistributedDataParallel(model)
  local x, y = X[1], Y[1]
  local q = half // 2
  local function micro(k) return (rank * 2 + k) * q + 1 end
  ddp:no_sync(function()
    F.mse_loss(ddp(x:narrow(1, micro(0), q)), y:narrow(1, micro(0), q)):backward()
  end)
  local local_only = model[1].weight.grad:clone()
  F.mse_loss(ddp(x:narrow(1, micro(1), q)), y:narrow(1, micro(1), q)):backward()
  local grads = {}
  for _, p in ipairs(model:parameters()) do
    for _, v in ipairs(p.grad:reshape(-1):double():tolist()) do grads[#grads + 1] = v end
  end
  R.no_sync = { grads = grads, local_first = local_only:reshape(-1):double():tolist() }
  if rank == 0 then
    local ref = net(7)
    for k = 0, 2 * world - 1 do
      (F.mse_loss(ref(x:narrow(1, k * q + 1, q)), y:narrow(1, k * q + 1, q)) / world):backward()
    end
    local rg = {}
    for _, p in ipairs(ref:parameters()) do
      for _, v in ipairs(p.grad:reshape(-1):double():tolist()) do rg[#rg + 1] = v end
    end
    R.no_sync.reference = rg
  end
end

-- made and trained inside release scopes (lt.tidy): the wrapper's buffers outlive them
do
  local model = net(11 + rank)
  local ddp
  lt.tidy(function() ddp = nn.parallel.DistributedDataParallel(model) end)   -- not returned
  local opt = lt.optim.SGD(model:parameters(), { lr = 0.1 })
  R.tidy_error = common.error_of(function()
    for s = 1, 3 do
      lt.tidy(function()
        local loss = F.mse_loss(ddp(mine(X[s])), mine(Y[s]))
        opt:zero_grad(); loss:backward(); opt:step()
      end)
    end
  end)
  R.tidy = common.params(model)
end

-- names: ddp.module's state_dict has the module's keys, the wrapper's has them under module.
do
  local model = net(1)
  local ddp = nn.parallel.DistributedDataParallel(model)
  local keys, wkeys = {}, {}
  for _, k in ipairs(nn.keys(ddp.module:state_dict())) do keys[#keys + 1] = k end
  for _, k in ipairs(nn.keys(ddp:state_dict())) do wkeys[#wkeys + 1] = k end
  R.keys, R.wrapper_keys, R.same_module = keys, wkeys, ddp.module == model
end

-- a parameter without a gradient: the next forward says which
do
  local Two = nn.Module:extend("Two")
  function Two:__init() nn.Module.__init(self); self.a = nn.Linear(2, 2); self.b = nn.Linear(2, 2) end
  function Two:forward(x) return self.a(x) end
  lt.manual_seed(3)
  local ddp = nn.parallel.DistributedDataParallel(Two())
  ddp(lt.ones(1, 2)):sum():backward()
  R.unused = common.error_of(function() return ddp(lt.ones(1, 2)) end)
  R.not_module = common.error_of(function() return nn.parallel.DistributedDataParallel(42) end)
  R.bad_option = common.error_of(function()
    return nn.parallel.DistributedDataParallel(nn.Linear(1, 1), { bucket_cap = 1 })
  end)
end

common.write(rank, R)
