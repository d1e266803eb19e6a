--- Options tables: every function that takes one refuses keys it does not know, naming the
-- op, the key and the nearest known key, so a typo (`{bais = false}`) is an error instead of a
-- silently ignored setting.
-- @module lantern.options
local M = {}

-- Edit distance between two short strings (insertions, deletions, substitutions, and swaps of
-- neighbours, which are the commonest typo).
local function distance(a, b)
  local la, lb = #a, #b
  local prev2, prev, cur = {}, {}, {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    cur = { [0] = i }
    local ca = a:byte(i)
    for j = 1, lb do
      local cost = ca == b:byte(j) and 0 or 1
      local v = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
      if i > 1 and j > 1 and ca == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        v = math.min(v, prev2[j - 2] + 1)
      end
      cur[j] = v
    end
    prev2, prev = prev, cur
  end
  return prev[lb]
end

--- The known name nearest to `key`, or nil when none is close (more than a third of the
-- longer name differs).
function M.nearest(key, known)
  local best, bestd
  for _, k in ipairs(known) do
    local d = distance(key, k)
    if not bestd or d < bestd then best, bestd = k, d end
  end
  if best and bestd <= math.max(1, math.max(#key, #best) // 3) then return best end
  return nil
end

-- Lantern's Lua files all live under the directory of this one; a frame whose source starts
-- with it is the library's, any other frame is the caller's code. Embedded in a C host
-- (lantern_open), each file is a chunk named by its module ("lantern.nn.functional").
local SELF = debug.getinfo(1, "S").source
local LIB = SELF:match("^(@.*[/\\])[^/\\]*$")
local function is_lib(src)
  if LIB then return src:sub(1, #LIB) == LIB end
  return SELF == "lantern.options" and src:match("^lantern[%w_%.]*$") ~= nil
end

--- The level, counted as `debug.getinfo` counts from the function that calls user_level, of the
-- first Lua frame at or above level `from` that is not in Lantern's Lua files (the user's line
-- that called into Lantern, however many of Lantern's own calls lie in between), or nil.
function M.user_level(from)
  local level = (from or 2) + 1
  while true do
    local info = debug.getinfo(level, "S")
    if info == nil then return nil end
    local src = info.source
    if info.what ~= "C" and not is_lib(src) then return level - 1 end
    level = level + 1
  end
end

--- Raises unless every key of the options table `opts` is among `known` (an array of names).
-- `op` names the function in the message; `level` is passed to `error` (default: the caller's
-- line outside Lantern, see user_level). Returns opts, or an empty table when opts is nil.
function M.check(op, opts, known, level)
  if opts == nil then return {} end
  level = level or M.user_level(2) or 2
  if type(opts) ~= "table" then
    error(string.format("%s: options must be a table, got %s", op, type(opts)), level)
  end
  for k in pairs(opts) do
    local ok = false
    if type(k) == "string" then
      for _, name in ipairs(known) do
        if name == k then ok = true break end
      end
    end
    if not ok then
      local msg = string.format("%s: unknown option '%s'", op, tostring(k))
      local near = type(k) == "string" and M.nearest(k, known)
      if near then
        msg = msg .. string.format(" (did you mean '%s'?)", near)
      elseif #known > 0 then
        msg = msg .. " (expected one of " .. table.concat(known, ", ") .. ")"
      end
      error(msg, level)
    end
  end
  return opts
end

return M
