--- Lantern: tensors, autograd and neural networks for Lua 5.4.
-- `local lt = require "lantern"` returns the core's functions plus the Lua half. Submodules
-- (`lt.nn`, `lt.optim`, `lt.data`, `lt.autograd`, `lt.utils`, ...) load on first use.
-- @module lantern
local core = require "lantern.core"

local lt = core
package.loaded["lantern"] = lt   -- submodules require "lantern" while this file runs

lt.__version = "0.1.0"

-- name -> module that provides it; a module listed with a field name provides that field
local lazy = {
  autograd = { "lantern.autograd" },
  nn = { "lantern.nn" },
  optim = { "lantern.optim" },
  data = { "lantern.data" },
  serialization = { "lantern.serialization" },
  safetensors = { "lantern.serialization", "safetensors" },
  save = { "lantern.serialization", "save" },
  load = { "lantern.serialization", "load" },
  save_module = { "lantern.serialization", "save_module" },
  load_module = { "lantern.serialization", "load_module" },
  warnings = { "lantern.warnings" },
  set_warnings = { "lantern.warnings", "set" },
  get_warnings = { "lantern.warnings", "get" },
  utils = { "lantern.utils" },
  distributed = { "lantern.distributed" },
  cuda = { "lantern.cuda" },
}

setmetatable(lt, {
  __index = function(t, k)
    local entry = lazy[k]
    if entry then
      local mod = require(entry[1])
      local v = mod
      if entry[2] then v = rawget(t, k) or mod[entry[2]] end
      rawset(t, k, v)
      return v
    end
  end,
})

local mt = core._tensor_mt

local print_mod = require "lantern.print"
local print_tensor = print_mod.tensor
mt.__tostring = function(t)
  if core.is_released(t) then return "tensor(<released>)" end
  return print_tensor(t)
end
lt.set_printoptions = print_mod.set_printoptions

--- `for i, row in pairs(x) do ... end` visits the rows of `x` (its slices along dim 1, the
-- views `x[i]`) with their 1-based positions, as Python's `for row in x` does; `ipairs` stops
-- with an error past the last row, since `x[#x + 1]` is out of range. A 0-dim tensor has no
-- rows, as in PyTorch. (The reference shows it on the Tensor page.)
-- @usage for i, row in pairs(lt.zeros(5, 2)) do print(i, row.shape) end   -- 1 {2} ... 5 {2}
-- @local
mt.__pairs = function(t)
  local ndim = t:dim()
  if ndim == 0 then
    error("pairs: iteration over a 0-dim tensor (it has no rows; x:item() gives its value)", 2)
  end
  local n = t:size(1)
  return function(x, i)
    i = i + 1
    if i > n then return nil end
    return i, x[i]
  end, t, 0
end

---------------------------------------------------------------------------------------------
--- Gradient mode and release scopes (written in Lua).
-- @section scopes

--- Runs `fn(...)` with gradient recording off, restoring the mode even if fn raises, and
-- returns what fn returns. Parameter updates and evaluation go inside it.
-- @func fn
-- @param ... fn's arguments
-- @return fn's results
-- @usage local y = lt.no_grad(function() return model(x) end)   -- y.grad_fn == nil
function lt.no_grad(fn, ...)
  local old = core.set_grad_enabled(false)
  local res = table.pack(pcall(fn, ...))
  core.set_grad_enabled(old)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- Runs `fn(...)` with gradient recording on, restoring the mode even if fn raises (inside
-- `lt.no_grad`, a part that must record).
-- @func fn
-- @param ... fn's arguments
-- @return fn's results
function lt.enable_grad(fn, ...)
  local old = core.set_grad_enabled(true)
  local res = table.pack(pcall(fn, ...))
  core.set_grad_enabled(old)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

--- Runs `fn(...)` in a release scope: when it returns (or raises), every tensor handle made
-- inside it is dropped, except those it returns (also inside returned tables) and those passed
-- to `lt.keep`. Returned handles belong to the enclosing scope, if any. Dropping a handle
-- releases its reference at once, so memory goes back to the cache without the collector; a
-- tensor that something else still holds (a view, the autograd graph, a module) lives on.
-- Parameters and buffers registered in a Module and optimiser state are kept automatically.
-- @func fn
-- @param ... fn's arguments
-- @return fn's results
-- @usage for step = 1, steps do
--   lt.tidy(function()
--     local loss = F.mse_loss(model(x), y)
--     opt:zero_grad(); loss:backward(); opt:step()
--   end)
-- end
function lt.tidy(fn, ...)
  if type(fn) ~= "function" then
    error("tidy: bad argument #1 (function expected, got " .. type(fn) .. ")", 2)
  end
  local id = core._scope_begin()
  local res = table.pack(pcall(fn, ...))
  if res[1] then
    core._scope_end(id, table.unpack(res, 2, res.n))
    return table.unpack(res, 2, res.n)
  end
  core._scope_end(id)
  error(res[2], 0)
end

return lt
