--- Data parallelism over processes (`nn.parallel`): DistributedDataParallel.
-- @module lantern.nn
local lt = require "lantern"
local mod = require "lantern.nn.module"
local util = require "lantern.nn.util"
local check = require("lantern.options").check

local Module = mod.Module
local P = {}

local MB = 1024 * 1024

---------------------------------------------------------------------------------------------
--- Data parallelism.
-- @section parallel

--- Trains one model on many processes (PyTorch's DDP): `nn.parallel.DistributedDataParallel`
-- wraps a module on every rank of `lt.distributed`, each rank feeding it its own share of the
-- data. At construction rank 0's parameters and buffers are broadcast to the others, so every
-- rank starts from the same model. Forward calls the module. During backward the gradients
-- are averaged over the ranks: they are gathered into buckets of about `bucket_cap_mb` in
-- reverse parameter order, and each bucket's non-blocking allreduce starts as soon as its last
-- gradient is ready, while backward goes on; when the last gradient is in, backward waits for
-- them and writes the averages into `.grad`. After `loss:backward()` the gradients are the
-- same on every rank (bitwise) and equal to one process's gradient of the whole batch's mean
-- loss, so any optimiser, `clip_grad_norm_` and schedulers work unchanged, and the ranks'
-- parameters stay equal.
--
-- `ddp.module` is the wrapped module (save its `state_dict`, which has the module's own keys;
-- the wrapper's own has them under `module.`). Every parameter that requires grad must get a
-- gradient in each backward (an unused one is an error at the next forward, as in PyTorch).
-- With `broadcast_buffers` rank 0's buffers (batch-norm statistics) are broadcast before
-- each forward. Wrap the module after converting it (`:double()`): the hooks belong to its
-- parameters at construction.
-- @function DistributedDataParallel
-- @param module the module to train
-- @tparam[opt] table opts `bucket_cap_mb` (25), `broadcast_buffers` (true)
-- @usage lt.distributed.init()
-- local ddp = nn.parallel.DistributedDataParallel(Net())
-- local opt = lt.optim.SGD(ddp:parameters(), {lr = 0.1, momentum = 0.9})
-- for xb, yb in loader:iter() do          -- a DistributedSampler gives each rank its share
--   local loss = F.cross_entropy(ddp(xb), yb)
--   opt:zero_grad(); loss:backward(); opt:step()
-- end
local DDP = Module:extend("DistributedDataParallel")
P.DistributedDataParallel = DDP

-- Buckets of the parameters that require grad, in reverse order, one dtype each, each of at
-- most cap bytes unless one parameter alone is larger. A slot is a parameter's view of its
-- bucket's flat buffer.
local function make_buckets(named, cap)
  local buckets, cur = {}, nil
  for i = #named, 1, -1 do
    local name, p = named[i][1], named[i][2]
    local bytes = p:numel() * p:element_size()
    if not cur or cur.dtype ~= p.dtype or (cur.bytes + bytes > cap and cur.bytes > 0) then
      cur = { dtype = p.dtype, bytes = 0, numel = 0, members = {} }
      buckets[#buckets + 1] = cur
    end
    cur.members[#cur.members + 1] = { name = name, param = p, offset = cur.numel }
    cur.bytes, cur.numel = cur.bytes + bytes, cur.numel + p:numel()
  end
  -- lt.keep: a wrapper made inside lt.tidy keeps its buffers past the scope
  for _, b in ipairs(buckets) do
    b.buffer = lt.keep(lt.zeros(b.numel, { dtype = b.dtype }))
    for _, m in ipairs(b.members) do
      m.slot = lt.keep(b.buffer:narrow(1, m.offset + 1, m.param:numel()):view(m.param:size()))
    end
    b.pending = #b.members
  end
  return buckets
end

-- The last gradient of this backward is in: waits for every bucket and writes the averages
-- into .grad; returns the average for `last`, whose own accumulation comes right after its
-- hook (the engine then accumulates it into the .grad set to nil here, i.e. copies it).
local function finish(st, last)
  local result
  for _, b in ipairs(st.buckets) do
    b.work:wait()
    b.work = nil
    b.pending = #b.members
    for _, m in ipairs(b.members) do
      local p = m.param
      m.got = false
      if p == last then
        p.grad = nil
        result = m.slot:clone()
      elseif p.grad then
        p.grad:copy_(m.slot)
      else
        p.grad = m.slot:clone()
      end
    end
  end
  st.ready = 0
  return result
end

local function hook_for(st, bucket, member)
  return function(g)
    if not st.armed then return nil end
    local old = member.param.grad
    -- the bucket averages what .grad will hold: earlier gradients (no_sync) plus this one
    if old then member.slot:copy_(old):add_(g) else member.slot:copy_(g) end
    member.got = true
    bucket.pending = bucket.pending - 1
    st.ready = st.ready + 1
    if bucket.pending == 0 then
      bucket.work = st.dist.all_reduce(bucket.buffer, { op = "avg", async_op = true })
    end
    if st.ready == st.nparams then return finish(st, member.param) end
    -- MPI moves a non-blocking collective on only inside its calls
    for _, b in ipairs(st.buckets) do
      if b.work then b.work:is_completed() end
    end
    return nil
  end
end

function DDP:__init(module, opts)
  Module.__init(self)
  opts = check("DistributedDataParallel", opts, { "bucket_cap_mb", "broadcast_buffers" })
  if not mod.is_module(module) then
    error("DistributedDataParallel: expected a Module, got " .. util.typename(module), util.user_level())
  end
  local cap = opts.bucket_cap_mb or 25
  if type(cap) ~= "number" or cap <= 0 then
    error("DistributedDataParallel: bucket_cap_mb should be a positive number, got " .. tostring(cap),
      util.user_level())
  end
  local dist = lt.distributed
  if not dist.is_initialized() then
    error("DistributedDataParallel: lt.distributed is not initialized (call lt.distributed.init() first)",
      util.user_level())
  end
  self.module = module
  lt.no_grad(function()
    for _, p in ipairs(module:parameters()) do dist.broadcast(p, 0) end
    for _, b in ipairs(module:buffers()) do dist.broadcast(b, 0) end
  end)
  local named = {}
  for name, p in module:named_parameters() do
    if p.requires_grad then named[#named + 1] = { name, p } end
  end
  local st = { dist = dist, sync = true, armed = false, ready = 0, nparams = #named,
    broadcast_buffers = opts.broadcast_buffers ~= false,
    buckets = make_buckets(named, cap * MB) }
  for _, b in ipairs(st.buckets) do
    for _, m in ipairs(b.members) do m.param:register_hook(hook_for(st, b, m)) end
  end
  self._ddp = st
end

function DDP:forward(...)
  local st = self._ddp
  if st.ready > 0 then
    -- the reduction cannot finish; it is dropped, so that the ranks can go on after the error
    local missing = {}
    for _, b in ipairs(st.buckets) do
      if b.work then b.work:wait() end
      b.work, b.pending = nil, #b.members
      for _, m in ipairs(b.members) do
        if not m.got then missing[#missing + 1] = m.name end
        m.got = false
      end
    end
    st.ready = 0
    error("DistributedDataParallel: the previous backward did not finish the gradient reduction: " ..
      "parameters " .. table.concat(missing, ", ") .. " got no gradient. Every parameter that " ..
      "requires grad must take part in the loss (or set its requires_grad to false before " ..
      "wrapping)", util.user_level())
  end
  if st.broadcast_buffers then
    local bufs = self.module:buffers()
    if #bufs > 0 then
      lt.no_grad(function() for _, b in ipairs(bufs) do st.dist.broadcast(b, 0) end end)
    end
  end
  st.armed = st.sync
  return self.module(...)
end

--- Runs `fn(...)` with the gradient averaging off: the backward of a forward made inside it
-- only accumulates this rank's gradients, and the next backward outside averages the sum
-- (gradient accumulation over several batches with one reduction).
-- @func fn
-- @param ... fn's arguments
-- @return fn's results
-- @usage ddp:no_sync(function() F.mse_loss(ddp(x1), y1):backward() end)
-- F.mse_loss(ddp(x2), y2):backward()    -- averages the gradients of both batches
function DDP:no_sync(fn, ...)
  local st = self._ddp
  local old = st.sync
  st.sync = false
  local res = table.pack(pcall(fn, ...))
  st.sync = old
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

return P
