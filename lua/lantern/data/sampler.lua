--- Samplers: the order in which a DataLoader visits a dataset (`DataLoader(ds, {sampler = s})`).
-- @module lantern.data
local lt = require "lantern"
local check = require("lantern.options").check

local S = {}

---------------------------------------------------------------------------------------------
--- Samplers.
-- @section samplers

--- Each rank's share of a dataset, for data-parallel training (PyTorch's
-- `DistributedSampler`, same partition): the positions are permuted with a generator seeded
-- with `seed + epoch` when shuffling, padded by repeating from the start up to a multiple of
-- `num_replicas` (or, with `drop_last`, cut down to one), and rank r takes every
-- `num_replicas`-th position from the (r + 1)-th on. Every rank then has `#sampler`
-- positions and the ranks' shares together cover the dataset. Lantern's generator is not
-- PyTorch's, so a shuffled order differs from PyTorch's; unshuffled ones are the same. Call
-- `set_epoch` before each epoch for a new order.
-- @type DistributedSampler
-- @usage local sampler = lt.data.DistributedSampler(train_ds)   -- rank and world from lt.distributed
-- local loader = lt.data.DataLoader(train_ds, {batch_size = 64, sampler = sampler})
-- for epoch = 1, epochs do
--   sampler:set_epoch(epoch)
--   for xb, yb in loader:iter() do ... end
-- end
local DistributedSampler = { __name = "DistributedSampler" }
DistributedSampler.__index = DistributedSampler
DistributedSampler.__len = function(self) return self:len() end
S.DistributedSampler = DistributedSampler

local function dataset_len(ds)
  if type(ds) == "table" and type(ds.len) == "function" then return ds:len() end
  return #ds
end

local function whole(v) return math.type(v) == "integer" end

--- Makes a sampler (called as `lt.data.DistributedSampler(dataset, opts)`).
-- @param cls
-- @param dataset a Dataset (or anything with `len` or `#`)
-- @tparam[opt] table opts `num_replicas` and `rank` (default: lt.distributed's world size
-- and rank), `shuffle` (true), `seed` (0), `drop_last` (false)
function DistributedSampler.new(cls, dataset, opts)
  opts = check("DistributedSampler", opts, { "num_replicas", "rank", "shuffle", "seed", "drop_last" })
  local n, rank = opts.num_replicas, opts.rank
  if n == nil or rank == nil then
    local dist = lt.distributed
    if not dist.is_initialized() then
      error("DistributedSampler: num_replicas and rank are needed when lt.distributed is not " ..
        "initialized", 2)
    end
    n = n or dist.get_world_size()
    rank = rank or dist.get_rank()
  end
  if not whole(n) or n < 1 then
    error("DistributedSampler: num_replicas should be a positive integer, got " .. tostring(n), 2)
  end
  if not whole(rank) or rank < 0 or rank >= n then
    error(string.format("DistributedSampler: Invalid rank %s, rank should be in the interval [0, %d]",
      tostring(rank), n - 1), 2)
  end
  local seed = opts.seed or 0
  if not whole(seed) then error("DistributedSampler: seed should be an integer, got " .. tostring(seed), 2) end
  local self = setmetatable({ dataset = dataset, num_replicas = n, rank = rank,
    shuffle = opts.shuffle ~= false, seed = seed, drop_last = opts.drop_last or false,
    epoch = 0 }, cls)
  local len = dataset_len(dataset)
  if self.drop_last and len % n ~= 0 then
    self.num_samples = -((-(len - n)) // n)   -- ceil((len - n) / n): the tail is dropped
  else
    self.num_samples = -((-len) // n)
  end
  self.total_size = self.num_samples * n
  return self
end
setmetatable(DistributedSampler, { __call = function(c, ...) return c.new(c, ...) end })

--- Sets the epoch, which seeds the next shuffle (`seed + epoch`).
-- @int epoch
function DistributedSampler:set_epoch(epoch)
  if not whole(epoch) then error("set_epoch: epoch should be an integer, got " .. tostring(epoch), 2) end
  self.epoch = epoch
end

--- The number of positions of this rank (also `#sampler`).
-- @treturn int
function DistributedSampler:len() return self.num_samples end

-- This rank's positions (1-based) from `order`, the dataset's positions in visiting order.
function DistributedSampler:_partition(order)
  local idx = {}
  for i = 1, #order do idx[i] = order[i] end
  if not self.drop_last then
    local len = #idx
    for i = len + 1, self.total_size do idx[i] = idx[(i - len - 1) % len + 1] end
  end
  local out = {}
  for i = self.rank + 1, self.total_size, self.num_replicas do out[#out + 1] = idx[i] end
  return out
end

--- This rank's positions in the dataset (1-based), in visiting order.
-- @treturn table a list of `#sampler` integers
function DistributedSampler:indices()
  local len = dataset_len(self.dataset)
  local order
  if self.shuffle then
    order = lt.randperm(len, { generator = lt.Generator(self.seed + self.epoch) }):tolist()
  else
    order = {}
    for i = 1, len do order[i] = i end
  end
  return self:_partition(order)
end

return S
