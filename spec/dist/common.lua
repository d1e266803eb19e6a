-- Shared by the worker scripts of spec/distributed_spec.lua (run under mpirun, one per rank):
-- each worker fills a table of results and writes it as a Lua chunk to $DIST_OUT/rank<r>.lua,
-- which the spec reads and checks. Floats are written with 17 digits, so values round-trip
-- exactly and bitwise comparisons across ranks are possible.
local lt = require "lantern"
local M = {}

local function ser(v, out)
  local ty = type(v)
  if ty == "table" then
    out[#out + 1] = "{"
    local n = #v
    for i = 1, n do ser(v[i], out) out[#out + 1] = "," end
    for k, x in pairs(v) do
      if not (math.type(k) == "integer" and k >= 1 and k <= n) then
        out[#out + 1] = "[" .. string.format("%q", k) .. "]="
        ser(x, out)
        out[#out + 1] = ","
      end
    end
    out[#out + 1] = "}"
  elseif ty == "number" then
    if math.type(v) == "integer" then out[#out + 1] = tostring(v)
    elseif v ~= v then out[#out + 1] = "0/0"
    elseif v == math.huge then out[#out + 1] = "math.huge"
    elseif v == -math.huge then out[#out + 1] = "-math.huge"
    else out[#out + 1] = string.format("%.17g", v) end
  elseif ty == "string" then out[#out + 1] = string.format("%q", v)
  elseif ty == "boolean" then out[#out + 1] = tostring(v)
  elseif lt.is_tensor(v) then ser(v:tolist(), out)
  else out[#out + 1] = "nil" end
end

function M.write(rank, results)
  local out = { "return " }
  ser(results, out)
  local path = assert(os.getenv("DIST_OUT"), "DIST_OUT is not set") .. "/rank" .. rank .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(table.concat(out), "\n")
  f:close()
end

-- The message of the error fn raises (without its position), or "no error".
function M.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  if ok then return "no error" end
  return (tostring(err):gsub("^[^:]*:%d+: ", ""))
end

-- The values of a module's parameters, flattened into one list.
function M.params(module)
  local out = {}
  for _, p in ipairs(module:parameters()) do
    for _, v in ipairs(p:detach():reshape(-1):double():tolist()) do out[#out + 1] = v end
  end
  return out
end

return M
