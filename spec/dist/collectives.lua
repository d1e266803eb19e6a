-- Worker of spec/distributed_spec.lua (mpirun -np 2): every collective, op and dtype, with the
-- inputs below, recording results and error messages for the spec to check.
local lt = require "lantern"
local common = dofile("spec/dist/common.lua")
local dist = lt.distributed
local err = common.error_of

local rank, world = dist.init()
local R = { rank = rank, world = world, initialized = dist.is_initialized() }

local DTYPES = { "float32", "float64", "int64", "bool" }
local OPS = { "sum", "prod", "min", "max", "avg" }

-- rank r's input of each dtype (the spec computes the expected results from the same rule)
local function input(dtype)
  if dtype == "bool" then
    return lt.tensor(rank == 0 and { true, false, true, false } or { true, true, false, false })
  end
  local v = dtype == "int64" and { rank + 1, 3 - 2 * rank, -(rank + 2) }
    or { rank + 1.5, 3 - 2 * rank, -(rank + 2) }
  return lt.tensor(v, { dtype = dtype })
end

local function run(fn)
  local e = err(fn)
  return e
end

R.all_reduce, R.all_reduce_async, R.broadcast, R.reduce, R.all_gather = {}, {}, {}, {}, {}
R.gather, R.scatter = {}, {}
for _, dt in ipairs(DTYPES) do
  R.all_reduce[dt] = {}
  for _, op in ipairs(OPS) do
    local t = input(dt)
    local e = run(function() dist.all_reduce(t, { op = op }) end)
    R.all_reduce[dt][op] = e == "no error" and t:tolist() or e
  end
  -- the non-blocking form: values after wait
  local t = input(dt)
  local w = dist.all_reduce(t, { op = "max", async_op = true })
  w:wait()
  R.all_reduce_async[dt] = { value = t:tolist(), completed = w:is_completed() }
  -- broadcast from rank 1 (not the first), blocking and not
  local b = input(dt)
  dist.broadcast(b, 1)
  local b2 = input(dt)
  dist.broadcast(b2, 1, { async_op = true }):wait()
  R.broadcast[dt] = { b:tolist(), b2:tolist() }
  -- reduce into rank 1; rank 0's tensor stays as it was
  local rd = input(dt)
  dist.reduce(rd, 1, { op = dt == "bool" and "sum" or "prod" })
  R.reduce[dt] = rd:tolist()
  local list = dist.all_gather(input(dt))
  local l2, wk = dist.all_gather(input(dt), { async_op = true })
  wk:wait()
  R.all_gather[dt] = { list[1]:tolist(), list[2]:tolist(), l2[1]:tolist(), l2[2]:tolist() }
  local g = dist.gather(input(dt), 1)
  R.gather[dt] = g and { g[1]:tolist(), g[2]:tolist() } or "none"
  -- scatter from rank 1: rank r receives rank 1's input times (r + 1) (negated for bool)
  local out = input(dt)
  local send
  if rank == 1 then
    local x = input(dt)
    send = dt == "bool" and { x, x:logical_not() } or { x, x * 2 }
  end
  dist.scatter(out, send, 1)
  R.scatter[dt] = out:tolist()
end

-- in place through a non-contiguous view: the base tensor receives the sum
local m = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }) * (rank + 1)
dist.all_reduce(m:t())
R.noncontig = m:tolist()
local m2 = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } }) * (rank + 1)
dist.all_reduce(m2:t(), { async_op = true }):wait()
R.noncontig_async = m2:tolist()
-- a 2-d all_gather keeps each rank's shape
local ag = dist.all_gather(lt.full({ 2, 3 }, rank + 0.25))
R.all_gather_2d = { ag[1]:size(), ag[2]:tolist() }
R.barrier = run(function() dist.barrier() end)
R.barrier_async = run(function() dist.barrier({ async_op = true }):wait() end)

-- mismatches: an error on every rank, after which the ranks are still in step
R.errors = {
  shape = run(function() dist.all_reduce(lt.zeros(rank + 2)) end),
  dtype = run(function() dist.all_reduce(lt.zeros(3, { dtype = rank == 0 and "float32" or "float64" })) end),
  kind = run(function()
    if rank == 0 then dist.all_reduce(lt.zeros(3)) else dist.broadcast(lt.zeros(3), 0) end
  end),
  op = run(function() dist.all_reduce(lt.zeros(3), { op = rank == 0 and "sum" or "max" }) end),
  src = run(function() dist.broadcast(lt.zeros(3), rank) end),
  bad_src = run(function() dist.broadcast(lt.zeros(3), rank == 1 and 5 or 0) end),
  bad_op = run(function() dist.all_reduce(lt.zeros(3), { op = rank == 1 and "mean" or "sum" }) end),
  scatter_list = run(function() dist.scatter(lt.zeros(2), rank == 0 and { lt.zeros(2) } or nil, 0) end),
  gather_2d = run(function() dist.all_gather(lt.zeros(2, rank + 1)) end),
  option = run(function() dist.all_reduce(lt.zeros(3), { opp = "sum" }) end),
}
local after = lt.tensor { rank + 1.0 }
dist.all_reduce(after)
R.after_errors = after:tolist()

common.write(rank, R)
