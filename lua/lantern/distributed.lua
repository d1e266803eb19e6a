--- Many processes (`lt.distributed`, PyTorch's `torch.distributed`): collectives over Open MPI
-- between the processes that `mpirun` starts, on one machine or many. Ranks are MPI's
-- identifiers, 0 to `get_world_size() - 1`; a plain run (no `mpirun`) is a world of one.
--
--     -- mpirun -np 2 bin/lantern script.lua
--     local dist = lt.distributed
--     dist.init()
--     local t = lt.tensor{dist.get_rank() + 1.0}
--     dist.all_reduce(t)                   -- 3 on both ranks
--
-- The collectives work in place on CPU tensors of every dtype (a non-contiguous tensor goes
-- through a contiguous copy). Before each one the ranks compare what they were called with:
-- a different collective, op, source rank, dtype or shape on some rank is an error on every
-- rank, never a hang or a sum over unequal buffers. With `{async_op = true}` a collective
-- returns a `Work` handle at once; its tensors must not be read or written until `work:wait()`.
--
-- The MPI part is its own C module (`lantern/mpi.so`), built by `make` when Open MPI is
-- installed (Debian: `libopenmpi-dev` and `openmpi-bin`). MPI is finalized at exit; a process
-- that ends with an error aborts the whole job instead, so the other ranks do not wait for it.
-- @module lantern.distributed
local lt = require "lantern"
local check = require("lantern.options").check

local dist = {}

local mpi            -- the C module, once init has loaded it
local rank, world = 0, 1

local INSTALL = "install Open MPI (Debian: apt-get install libopenmpi-dev openmpi-bin) and " ..
  "rebuild Lantern (make), which then builds lantern/mpi.so"

local function need_init(op)
  if not (mpi and mpi.is_initialized()) then
    error(op .. ": lt.distributed is not initialized (call lt.distributed.init() first)", 3)
  end
end

--- Joins the world that `mpirun` started (MPI_Init; a plain run is a world of one). Calling
-- it again does nothing. Without Lantern's MPI module it raises, naming what to install.
-- @tparam[opt] table opts `{backend = "mpi"}` (the only one)
-- @treturn int this process's rank
-- @treturn int the world size
-- @usage local rank, world = lt.distributed.init()
function dist.init(opts)
  opts = check("init", opts, { "backend" })
  if opts.backend ~= nil and opts.backend ~= "mpi" then
    error("init: unknown backend '" .. tostring(opts.backend) .. "' (Lantern has \"mpi\")", 2)
  end
  if not mpi then
    local ok, m = pcall(require, "lantern.mpi")
    if not ok then
      error("init: lt.distributed needs Lantern's MPI module, which is not available here; " ..
        INSTALL .. " (" .. tostring(m):gsub("\n.*", "") .. ")", 2)
    end
    mpi = m
  end
  rank, world = mpi.init()
  return rank, world
end

--- Whether `init` ran (and `finalize` did not).
-- @treturn boolean
function dist.is_initialized() return mpi ~= nil and mpi.is_initialized() end

--- This process's rank, 0 to `get_world_size() - 1`.
-- @treturn int
function dist.get_rank()
  need_init("get_rank")
  return rank
end

--- The number of processes.
-- @treturn int
function dist.get_world_size()
  need_init("get_world_size")
  return world
end

--- Leaves MPI (also done at exit); no collective can run afterwards, in this process.
function dist.finalize()
  if mpi then mpi.finalize() end
end

---------------------------------------------------------------------------------------------
--- Collectives. Each takes a trailing options table with `async_op` (default false).
-- @section collectives

--- What a collective started with `{async_op = true}` returns.
-- @type Work
local Work = {}
Work.__index = Work
Work.__name = "Work"

--- Waits until the collective ended; its tensors are then final.
-- @treturn boolean true
function Work:wait()
  if not self.finished then
    self.req:wait()
    self.finished = true
    if self.after then self.after() end
  end
  return true
end

--- Whether the collective ended (without waiting; it also moves MPI's progress on).
-- @treturn boolean
function Work:is_completed()
  if not self.finished and self.req:is_completed() then self:wait() end
  return self.finished
end

-- The contiguous tensor MPI works on, and what copies the result back into t afterwards.
local function dense(t)
  if not lt.is_tensor(t) or t:is_contiguous() then return t, nil end
  local c = lt.no_grad(function() return t:contiguous() end)
  return c, function() lt.no_grad(function() t:copy_(c) end) end
end

-- Runs one collective; the result, if any, is made by `result` once it ended.
local function run(kind, opts, t, big, op, root, copy_back, result)
  local async = opts.async_op
  if async then
    local req = mpi.run(kind, t, big, op, root, true)
    local w = setmetatable({ req = req, finished = false }, Work)
    w.after = copy_back
    return w, result
  end
  mpi.run(kind, t, big, op, root, false)
  if copy_back then copy_back() end
  return result
end

local REDUCE_OPTS = { "op", "async_op" }

--- Reduces `t` over the ranks, in place on every rank: op `"sum"` (default), `"prod"`,
-- `"min"`, `"max"` or `"avg"` (floating-point dtypes). For bool tensors sum and max are a
-- logical or, prod and min a logical and.
-- @tparam Tensor t
-- @tparam[opt] table opts `{op = "sum", async_op = false}`
-- @return nothing, or a `Work` with async_op
-- @usage dist.all_reduce(grad, {op = "avg"})
function dist.all_reduce(t, opts)
  opts = check("all_reduce", opts, REDUCE_OPTS)
  need_init("all_reduce")
  local c, back = dense(t)
  return run("all_reduce", opts, c, nil, opts.op, nil, back)
end

--- Copies rank `src`'s `t` into `t` on every rank, in place.
-- @tparam Tensor t
-- @int src the rank that sends
-- @tparam[opt] table opts `{async_op = false}`
-- @return nothing, or a `Work` with async_op
function dist.broadcast(t, src, opts)
  opts = check("broadcast", opts, { "async_op" })
  need_init("broadcast")
  local c, back = dense(t)
  return run("broadcast", opts, c, nil, nil, src, back)
end

--- Reduces `t` over the ranks into rank `dst`'s `t` (in place there; the others' are left
-- unchanged). Ops as in `all_reduce`.
-- @tparam Tensor t
-- @int dst the rank that receives
-- @tparam[opt] table opts `{op = "sum", async_op = false}`
-- @return nothing, or a `Work` with async_op
function dist.reduce(t, dst, opts)
  opts = check("reduce", opts, REDUCE_OPTS)
  need_init("reduce")
  local c, back = dense(t)
  return run("reduce", opts, c, nil, opts.op, dst, back)
end

-- A tensor of world blocks shaped like t, and the list of its blocks (views).
local function blocks_of(t)
  local size = t:size()
  table.insert(size, 1, world)
  local big = lt.empty(size, { dtype = t.dtype })
  local list = {}
  for i = 1, world do list[i] = big[i] end
  return big, list
end

--- Every rank's `t`, on every rank: a list of world-size tensors, the one of rank r at
-- position r + 1 (the ranks' tensors must have the same dtype and shape).
-- @tparam Tensor t
-- @tparam[opt] table opts `{async_op = false}`
-- @treturn table the tensors (with async_op, also the `Work`: `local list, work = ...`;
-- the list's values are final after `work:wait()`)
-- @usage local all = dist.all_gather(lt.tensor{dist.get_rank()})   -- {tensor{0}, tensor{1}}
function dist.all_gather(t, opts)
  opts = check("all_gather", opts, { "async_op" })
  need_init("all_gather")
  local c = dense(t)
  local big, list = blocks_of(c)
  if opts.async_op then return list, (run("all_gather", opts, c, big)) end
  run("all_gather", opts, c, big)
  return list
end

--- Gathers every rank's `t` at rank `dst`: the list (as `all_gather` returns) there, nil on
-- the other ranks.
-- @tparam Tensor t
-- @int dst the rank that receives
-- @tparam[opt] table opts `{async_op = false}`
-- @treturn ?table the tensors at dst (with async_op, also the `Work`)
function dist.gather(t, dst, opts)
  opts = check("gather", opts, { "async_op" })
  need_init("gather")
  local c = dense(t)
  local big, list
  if rank == dst then big, list = blocks_of(c) end
  if opts.async_op then return list, (run("gather", opts, c, big, nil, dst)) end
  run("gather", opts, c, big, nil, dst)
  return list
end

--- Sends `list[r + 1]` from rank `src` into `t` on each rank r, in place; `list` (world-size
-- tensors shaped like t) is read on rank src only and may be nil elsewhere.
-- @tparam Tensor t
-- @tparam ?table list the tensors to send, at src
-- @int src the rank that sends
-- @tparam[opt] table opts `{async_op = false}`
-- @return nothing, or a `Work` with async_op
function dist.scatter(t, list, src, opts)
  opts = check("scatter", opts, { "async_op" })
  need_init("scatter")
  local c, back = dense(t)
  local big
  if rank == src then
    -- a bad list becomes an error on every rank (the C half compares the ranks' checks)
    if type(list) ~= "table" or #list ~= world then
      big = string.format("scatter: rank %d (src) needs a list of %d tensors, got %s", rank,
        world, type(list) == "table" and #list .. " values" or type(list))
    else
      local ok, s = pcall(lt.stack, list, 1)
      big = ok and s or ("scatter: the list cannot be stacked: " .. tostring(s))
    end
  end
  return run("scatter", opts, c, big, nil, src, back)
end

--- Waits until every rank has called it.
-- @tparam[opt] table opts `{async_op = false}`
-- @return nothing, or a `Work` with async_op
function dist.barrier(opts)
  opts = check("barrier", opts, { "async_op" })
  need_init("barrier")
  return run("barrier", opts)
end

return dist
