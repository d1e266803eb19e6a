--- Argument checks shared by the optimisers and the schedulers (internal).
-- Errors name the op and point at the user's line (the first frame outside Lantern's Lua files,
-- lantern.options.user_level), so a check can sit at any depth below the function the user
-- called.
-- @module lantern.optim.check
local lt = require "lantern"
local options = require "lantern.options"
local U = require "lantern.nn.util"

local M = {}

--- Raises `string.format(fmt, ...)` at the user's line.
function M.fail(fmt, ...)
  local msg = select("#", ...) > 0 and string.format(fmt, ...) or fmt
  error(msg, options.user_level(2) or 2)
end

--- `lantern.options.check` with the error at the user's line; returns opts or {}.
function M.options(op, opts, known)
  local checked = options.check(op, opts, known, (options.user_level(2) or 2) + 1)
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
