-- Helpers shared by specs.
local support = {}

--- Resident set size of this process in KiB (Linux).
function support.rss_kb()
  local f = assert(io.open("/proc/self/statm"))
  local _, res = f:read("n", "n")
  f:close()
  return res * 4
end

return support
