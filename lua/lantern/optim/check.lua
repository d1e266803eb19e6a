--- Argument checks shared by the optimisers and the schedulers (internal).
-- Errors name the op and point at the user's line: the first frame outside these modules, so
-- a check can sit at any depth below the function the user called.
-- @module lantern.optim.check
local lt = require "lantern"
local options = require "lantern.options"
local U = require "lantern.nn.util"

local M = {}

local internal = {}

--- Marks the chunk `source` (a `debug.getinfo` source) as part of the optimiser modules.
function M.internal_source(source) internal[source] = true end
M.internal_source(debug.getinfo(1, "S").source)

-- The `error` level, counted from the function that calls `user_level`, of the user's frame.
local function user_level()
  if not (debug and debug.getinfo) then return 2 end
  local level = 3
  while true do
    local info = debug.getinfo(level, "S")
    if not info then return 2 end
    if info.what ~= "C" and not internal[info.source] then return level - 1 end
    level = level + 1
  end
end

--- Raises `string.format(fmt, ...)` at the user's line.
function M.fail(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  error(msg, user_level())
end

--- `lantern.options.check` with the error at the user's line; returns opts or {}.
function M.options(op, opts, known)
  local checked = options.check(op, opts, known, user_level() + 1)
  return checked   -- not a tail call, which would take this frame out of the level count
end

--- A value's type for messages: "Tensor", a module's class name, or the Lua type.
function M.typename(v)
  if lt.is_tensor(v) then return "Tensor" end
  if type(v) == "table" and U.is_module and U.is_module(v) then return "module " .. v:type_name() end
  return type(v)
end

--- A value for messages: numbers and strings as written, other values by type.
function M.show(v)
  if type(v) == "number" then return tostring(v) end
  if type(v) == "string" then return string.format("%q", v) end
  return M.typename(v)
end

--- v as a Lua integer when it is a number with an integral value, else nil.
function M.integer(v)
  if type(v) ~= "number" then return nil end
  return math.tointeger(v)
end

--- "[2, 3]" for a tensor's shape.
function M.shape(t)
  return "[" .. table.concat(t.shape, ", ") .. "]"
end

return M
