--- lt.cuda: the CUDA devices, as torch.cuda. The CUDA plugin (build/lantern/cuda.so, `make cuda`)
-- loads on the first call here or the first use of a "cuda" device; without it, a CUDA runtime,
-- a driver or a device, `is_available()` is false, `device_count()` is 0 and
-- `unavailable_reason()` says which is missing.
-- @module lantern.cuda
local core = require "lantern.core"

local M = {}

--- Whether a CUDA device can be used.
-- @treturn boolean
function M.is_available() return core._cuda("count") > 0 end

--- The number of CUDA devices (0 without any).
-- @treturn integer
function M.device_count() return (core._cuda("count")) end

--- Why no CUDA device can be used (the plugin not built, the CUDA runtime library or the
-- driver missing, no device), or nil when one can.
-- @treturn ?string
function M.unavailable_reason()
  local n, why = core._cuda("count")
  if n > 0 then return nil end
  return why or "no CUDA device is present"
end

local function index_of(device)
  if device == nil then return 0 end
  if math.type(device) == "integer" then return device end
  local name = core.device(device)
  return tonumber(name:match(":(%d+)$")) or 0
end

--- The caching allocator's figures for a device (default "cuda:0"): allocated_bytes,
-- reserved_bytes (held from the driver, cached included), peak_allocated_bytes,
-- num_cuda_malloc, num_cache_hits, num_alloc_retries; an empty table without CUDA.
-- @param[opt] device a name ("cuda:1") or a 0-based index
-- @treturn table
function M.memory_stats(device)
  return core._cuda("stats", index_of(device)) or {}
end

--- Returns the allocator's cached, unused blocks to the driver (tensors in use keep theirs).
function M.empty_cache() core._cuda("empty_cache") end

--- Waits until every CUDA device has finished its queued work (nothing without CUDA).
function M.synchronize() core._cuda("synchronize") end

return M
