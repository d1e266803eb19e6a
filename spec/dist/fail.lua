-- Worker of spec/distributed_spec.lua (mpirun -np 2): rank 1 raises while rank 0 waits in a
-- collective that rank 1 never joins. The job must end (rank 1's failed exit aborts it) with
-- rank 1's message, instead of leaving rank 0 blocked.
local lt = require "lantern"
local dist = lt.distributed
local rank = dist.init()
dist.barrier()
if rank == 1 then error("rank 1 fails on purpose") end
dist.all_reduce(lt.ones(4))
print("rank 0 should never get here")
