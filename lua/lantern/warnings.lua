--- Warnings: the cases where PyTorch issues a UserWarning (a loss whose target only matches the
-- input by broadcasting, kl_div's 'mean' reduction, initialising an empty tensor). Lua 5.4's
-- own `warn` is off unless the host turns it on, so a warning would go unseen; Lantern writes
-- its warnings to stderr itself, as `file:line: warning: op: message`, naming the line of the
-- caller's code (the first frame outside Lantern's Lua files). Like Python's default filter,
-- a message is shown once per call site, so a training loop warns once, not every step.
--
--     lt.set_warnings(false)   -- off
--     lt.set_warnings(true)    -- on, to stderr (the default)
--     lt.set_warnings(fn)      -- fn(text) receives each warning instead (e.g. `warn`)
--     lt.get_warnings()        -- the current setting
-- @module lantern.warnings
local options = require "lantern.options"

local M = {}

local setting = true
local seen = {}

--- Sets where warnings go: true (stderr), false (nowhere) or a function that receives the
-- text. Returns the previous setting. Also `lt.set_warnings(v)`.
-- @param v boolean or function
-- @return the previous setting
-- @usage local old = lt.set_warnings(false)   -- quiet
-- lt.set_warnings(function(text) log:write(text, "\n") end)
function M.set(v)
  if type(v) ~= "boolean" and type(v) ~= "function" then
    error("set_warnings: expected true, false or a function, got " .. type(v), 2)
  end
  local old = setting
  setting = v
  return old
end

--- The current setting: true, false or the handler function. Also `lt.get_warnings()`.
function M.get() return setting end

--- Issues `message` (already prefixed with the op's name) for the caller's call site, unless
-- warnings are off or this site has shown this message before. Lantern's own code calls it;
-- so may a library built on Lantern.
-- @string message
function M.warn(message)
  if setting == false then return end
  local level = options.user_level(2)
  local info = level and debug.getinfo(level, "Sl")
  local where = info and (info.short_src .. ":" .. (info.currentline or "?")) or "?"
  local key = where .. "\0" .. message
  if seen[key] then return end
  seen[key] = true
  local text = where .. ": warning: " .. message
  if setting == true then
    io.stderr:write(text, "\n")
  else
    setting(text)
  end
end

-- Forgets which call sites have warned (for specs that warn from one line several times).
function M._reset() seen = {} end

return M
