--- Ordered dict tables shared by state_dicts (nn) and checkpoint files (serialization).
-- An ordered dict is a plain Lua table (`t[key]` is the value) whose metatable records the key
-- order in `__order` (new keys are appended by __newindex) and, for state_dicts, PyTorch's
-- `_metadata` in `__metadata`. `pairs(t)` walks `__order` (skipping removed and repeated keys),
-- then any keys added with rawset, sorted as strings.
-- @module lantern.ordered
local M = {}

function M.pairs(t)
  local mt = getmetatable(t)
  local order, i, seen, extra = mt.__order, 0, {}, nil
  return function()
    while true do
      i = i + 1
      local k
      if i <= #order then
        k = order[i]
      else
        if extra == nil then
          extra = {}
          for kk in next, t do if not seen[kk] then extra[#extra + 1] = kk end end
          table.sort(extra, function(a, b) return tostring(a) < tostring(b) end)
        end
        k = extra[i - #order]
        if k == nil then return nil end
      end
      if not seen[k] then
        seen[k] = true
        local v = rawget(t, k)
        if v ~= nil then return k, v end
      end
    end
  end, t, nil
end

function M.newindex(t, k, v)
  rawset(t, k, v)
  if v ~= nil then
    local order = getmetatable(t).__order
    order[#order + 1] = k
  end
end

--- Makes `t` an ordered dict with key order `keys` and metadata `meta`; `name` is
-- "OrderedDict" (the default) or "dict" (how a writer should store it).
function M.make(t, keys, meta, name)
  return setmetatable(t or {}, {
    __name = name or "OrderedDict",
    __pairs = M.pairs, __newindex = M.newindex,
    __order = keys or {}, __metadata = meta,
  })
end

return M
