--- Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict.
-- Children are named "0", "1", ... (PyTorch's names, in state_dict and repr); Lua indexing is
-- 1-based, so c[1] is the child "0" and c[-1] the last one.
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"

local Module, NONE, is_module = mod.Module, mod.NONE, mod.is_module
local is_tensor, typename = util.is_tensor, util.typename

local C = {}

-- Collects {name, value} pairs from the accepted forms of a "named" argument: an array of
-- {name, value} pairs, an ordered dict (nn.OrderedDict), or a plain map (keys sorted, since Lua
-- tables have no order).
local function named_pairs(t)
  local out = {}
  if #t > 0 and type(t[1]) == "table" and not is_module(t[1]) and #t[1] == 2 then
    for _, kv in ipairs(t) do out[#out + 1] = { kv[1], kv[2] } end
    return out
  end
  for _, k in ipairs(mod.ordered_keys(t)) do out[#out + 1] = { k, t[k] } end
  return out
end

local function is_named_table(t)
  if type(t) ~= "table" or is_module(t) or is_tensor(t) then return false end
  if #t > 0 then return type(t[1]) == "table" and not is_module(t[1]) and not is_tensor(t[1]) end
  return next(t) ~= nil or getmetatable(t) ~= nil
end

-- 1-based (negatives from the end) -> 1-based position, or an error naming the index.
local function norm_index(self, i, n, level)
  if math.type(i) ~= "integer" then
    if type(i) == "number" and i == math.floor(i) then i = math.tointeger(i)
    else error("index " .. tostring(i) .. " is not an integer", level + 1) end
  end
  local j = i < 0 and n + i + 1 or i
  if j < 1 or j > n or i == 0 then error("index " .. i .. " is out of range", level + 1) end
  return j
end

-- Re-registers a list of modules under the names "0".."n-1".
local function renumber(self, list)
  local reg = self._modules
  for _, k in ipairs({ table.unpack(reg.keys) }) do reg:remove(k) end
  for i, m in ipairs(list) do reg:set(tostring(i - 1), m) end
end

local function module_values(self)
  local out = {}
  for _, k in ipairs(self._modules.keys) do out[#out + 1] = self._modules.vals[k] end
  return out
end

---------------------------------------------------------------------------------------------
--- Containers. Their children are named `"0"`, `"1"`, ... as in PyTorch (in `state_dict` and
-- the repr), while Lua indexing is 1-based: `c[1]` is the child named `"0"`, `c[-1]` the last,
-- `#c` the count, and `for i, m in pairs(c)` visits them in order.
-- @section containers

--- A list of modules, registered as children but not called as a whole:
-- `nn.ModuleList{nn.Linear(4, 4), nn.Linear(4, 2)}`; iterate over it in forward. Has
-- `append`, `extend`, `insert`, `remove` (`pop`) and `slice`; `l[i] = m` replaces one.
-- @type ModuleList
local ModuleList = Module:extend("ModuleList")
C.ModuleList = ModuleList

function ModuleList:__init(modules)
  Module.__init(self)
  if modules ~= nil then self:extend(modules) end
end

function ModuleList:__len() return #self._modules.keys end

function ModuleList:__getitem(i)
  local reg = self._modules
  local j = norm_index(self, i, #reg.keys, 3)
  local v = reg.vals[reg.keys[j]]
  if v == NONE then return nil end
  return v
end

function ModuleList:__setitem(i, m)
  local reg = self._modules
  local j = norm_index(self, i, #reg.keys, 3)
  if m ~= nil and not is_module(m) then error(typename(m) .. " is not a Module subclass", 3) end
  reg:set(reg.keys[j], m == nil and NONE or m)
end

function ModuleList:__pairs()
  local i = 0
  return function()
    i = i + 1
    if i > #self._modules.keys then return nil end
    return i, self[i]
  end, self, nil
end

--- Adds `m` at the end (named by its position).
-- @param m a Module
-- @return the list
function ModuleList:append(m)
  self:add_module(tostring(#self._modules.keys), m)
  return self
end

--- Appends every module of a list (or of another container).
-- @param modules a table of modules or a ModuleList / Sequential
-- @return the list
function ModuleList:extend(modules)
  if is_module(modules) then
    if modules.__len == nil then
      error(self:type_name() .. ".extend should be called with an iterable, but got " ..
        modules:type_name(), 2)
    end
    local list = {}
    for i = 1, #modules do list[i] = modules[i] end
    modules = list
  end
  if type(modules) ~= "table" then
    error(self:type_name() .. ".extend should be called with a table of modules, but got " ..
      typename(modules), 2)
  end
  for i, m in ipairs(modules) do
    if not is_module(m) then error(self:type_name() .. ": item " .. i .. " (" .. typename(m) ..
      ") is not a Module subclass", 2) end
  end
  for _, m in ipairs(modules) do self:append(m) end
  return self
end

--- Makes `m` element `i` (1-based; `#l + 1` appends; negative from the end); later ones
-- shift and are renamed.
-- @int i
-- @param m a Module
-- @return the list
function ModuleList:insert(i, m)
  if not is_module(m) then error(typename(m) .. " is not a Module subclass", 2) end
  local list = module_values(self)
  local n = #list
  if i < 0 then i = n + i + 1 end
  if i < 1 then i = 1 elseif i > n + 1 then i = n + 1 end
  table.insert(list, i, m)
  renumber(self, list)
  return self
end

--- Removes element `i` (PyTorch's `del l[i]`) and renumbers the rest; returns it. Also
-- `l:pop(i)`.
-- @int i 1-based, negative from the end
-- @return the module removed
function ModuleList:remove(i)
  local list = module_values(self)
  local j = norm_index(self, i, #list, 2)
  local m = table.remove(list, j)
  renumber(self, list)
  if m == NONE then return nil end
  return m
end
ModuleList.pop = ModuleList.remove

--- A new container of the same class with elements `i`..`j` (inclusive, 1-based, negative
-- from the end; PyTorch's `l[i:j]`).
-- @int[opt=1] i
-- @int[opt=-1] j
function ModuleList:slice(i, j)
  local n = #self._modules.keys
  i = i or 1
  j = j or n
  if i < 0 then i = n + i + 1 end
  if j < 0 then j = n + j + 1 end
  local list = {}
  for k = math.max(i, 1), math.min(j, n) do list[#list + 1] = self[k] end
  return self:class()(list)
end

function ModuleList:forward()
  error("ModuleList is not callable: iterate over it and call its modules", 2)
end

-- [2.x] runs of identical children print once as "(0-2): 3 x Child(...)".
function ModuleList:_child_repr_lines()
  local reprs, names = {}, {}
  for _, k in ipairs(self._modules.keys) do
    local v = self._modules.vals[k]
    reprs[#reprs + 1] = v == NONE and "None" or tostring(v)
    names[#names + 1] = k
  end
  local lines, i = {}, 1
  while i <= #reprs do
    local j = i
    while j < #reprs and reprs[j + 1] == reprs[i] do j = j + 1 end
    local s
    if j > i then
      s = "(" .. names[i] .. "-" .. names[j] .. "): " .. (j - i + 1) .. " x " .. reprs[i]
    else
      s = "(" .. names[i] .. "): " .. reprs[i]
    end
    lines[#lines + 1] = mod.addindent(s, 2)
    i = j + 1
  end
  return lines
end

--- Modules called in a chain: `forward(x, ...)` passes x through each child in turn (the
-- extra arguments go to every child). Children come as arguments, as one list, or named:
-- `nn.Sequential(nn.OrderedDict{{"fc", nn.Linear(4, 2)}, {"act", nn.ReLU()}})` or
-- `nn.Sequential{{"fc", ...}, {"act", ...}}`. Has ModuleList's `append`, `extend`, `insert`,
-- `remove` (`pop`); `s:slice(i, j)` keeps the children's names.
-- @type Sequential
-- @usage local net = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
-- net(lt.randn(32, 784)).shape   --> {32, 10}
-- print(net[1])                  --> Linear(in_features=784, out_features=128, bias=True)
local Sequential = Module:extend("Sequential")
C.Sequential = Sequential

-- Sequential(m1, m2, ...), Sequential({m1, m2}) or Sequential(named) where named is an array of
-- {name, module} pairs or an nn.OrderedDict.
function Sequential:__init(...)
  Module.__init(self)
  local n = select("#", ...)
  local first = ...
  if n == 1 and is_named_table(first) then
    for _, kv in ipairs(named_pairs(first)) do self:add_module(kv[1], kv[2]) end
    return
  end
  local list = { ... }
  if n == 1 and type(first) == "table" and not is_module(first) then list = first end
  for i, m in ipairs(list) do
    if not is_module(m) then
      error("Sequential: argument " .. i .. " (" .. typename(m) .. ") is not a Module subclass", 2)
    end
    self:add_module(tostring(i - 1), m)
  end
end

Sequential.__len = ModuleList.__len
Sequential.__getitem = ModuleList.__getitem
Sequential.__setitem = ModuleList.__setitem
Sequential.__pairs = ModuleList.__pairs
Sequential.append = ModuleList.append
Sequential.extend = ModuleList.extend
Sequential.insert = ModuleList.insert
Sequential.remove = ModuleList.remove
Sequential.pop = ModuleList.remove

--- A new Sequential with children `i`..`j` (inclusive, 1-based, negative from the end),
-- keeping their names.
-- @int[opt=1] i
-- @int[opt=-1] j
function Sequential:slice(i, j)
  local n = #self._modules.keys
  i = i or 1
  j = j or n
  if i < 0 then i = n + i + 1 end
  if j < 0 then j = n + j + 1 end
  local pairs_ = {}
  for k = math.max(i, 1), math.min(j, n) do
    local key = self._modules.keys[k]
    pairs_[#pairs_ + 1] = { key, self._modules.vals[key] }
  end
  local s = Sequential()
  for _, kv in ipairs(pairs_) do s:add_module(kv[1], kv[2]) end
  return s
end

function Sequential:forward(input, ...)
  local reg = self._modules
  for _, k in ipairs(reg.keys) do
    local m = reg.vals[k]
    if m ~= NONE then input = m(input, ...) end
  end
  return input
end

--- Modules by name, registered as children: `nn.ModuleDict{{"enc", e}, {"dec", d}}` (an
-- array of `{key, module}` pairs or an `nn.OrderedDict` keeps its order; a plain Lua map is
-- taken in sorted key order). `d.enc` or `d["enc"]` reads one, `pairs(d)` visits them in
-- order, `#d` counts them.
-- @type ModuleDict
local ModuleDict = Module:extend("ModuleDict")
C.ModuleDict = ModuleDict

-- ModuleDict(map): an array of {key, module} pairs or an nn.OrderedDict keep their order; a
-- plain Lua map is taken in sorted key order.
function ModuleDict:__init(modules)
  Module.__init(self)
  if modules ~= nil then self:update(modules) end
end

--- Adds (or replaces) the named modules of `modules` (pairs, ordered dict, map or another
-- ModuleDict).
-- @param modules
-- @return the dict
function ModuleDict:update(modules)
  if type(modules) ~= "table" or is_module(modules) and not modules:isinstance(ModuleDict) then
    error("ModuleDict.update should be called with a table of named modules, but got " ..
      typename(modules), 2)
  end
  local list
  if is_module(modules) then list = modules:items() else list = named_pairs(modules) end
  for _, kv in ipairs(list) do
    if not is_module(kv[2]) then
      error("ModuleDict: value for key '" .. tostring(kv[1]) .. "' (" .. typename(kv[2]) ..
        ") is not a Module subclass", 2)
    end
  end
  for _, kv in ipairs(list) do self:add_module(kv[1], kv[2]) end
  return self
end

function ModuleDict:__len() return #self._modules.keys end
--- The keys in order (a list and an iterator). `d:values()` gives the modules,
-- `d:items()` `{key, module}` pairs, `d:contains(key)` whether a key is present,
-- `d:pop(key)` removes and returns one, `d:clear()` removes all.
function ModuleDict:keys() return mod.value_list({ table.unpack(self._modules.keys) }) end
--- The modules in key order (a list and an iterator).
function ModuleDict:values()
  local out = {}
  for _, k in ipairs(self._modules.keys) do out[#out + 1] = self[k] end
  return mod.value_list(out)
end
--- `{key, module}` pairs in order (a list and an iterator).
function ModuleDict:items()
  local out = {}
  for _, k in ipairs(self._modules.keys) do out[#out + 1] = { k, self[k] } end
  return mod.named_list(out)
end
--- Whether `key` is present.
-- @string key
-- @treturn boolean
function ModuleDict:contains(key) return self._modules:has(key) end
--- Removes `key` and returns its module; raises when absent.
-- @string key
function ModuleDict:pop(key)
  local v = self[key]
  if not self._modules:has(key) then error("ModuleDict.pop: no key '" .. tostring(key) .. "'", 2) end
  self._modules:remove(key)
  return v
end
--- Removes every module.
function ModuleDict:clear()
  for _, k in ipairs({ table.unpack(self._modules.keys) }) do self._modules:remove(k) end
end
function ModuleDict:__pairs()
  local keys, i = { table.unpack(self._modules.keys) }, 0
  return function()
    i = i + 1
    local k = keys[i]
    if k == nil then return nil end
    return k, self[k]
  end, self, nil
end
function ModuleDict:forward()
  error("ModuleDict is not callable: index it and call its modules", 2)
end

--- A list of parameters, registered under the names `"0"`, `"1"`, ...:
-- `nn.ParameterList{lt.randn(3), lt.randn(4)}`; `p[i]` (1-based), `p[i] = t`, `#p`,
-- `p:append(t)`, `p:extend(list)`. Not callable.
-- @type ParameterList
local ParameterList = Module:extend("ParameterList")
C.ParameterList = ParameterList

local function param_str(p, typename_style)
  local size = table.concat(util.sizes(p), "x")
  local dt = typename_style and util.legacy_typename(p) or ("torch." .. p.dtype)
  return "Parameter containing: [" .. dt .. " of size " .. size .. "]"
end

function util.legacy_typename(p)
  local names = {
    float32 = "torch.FloatTensor", float64 = "torch.DoubleTensor", int64 = "torch.LongTensor",
    bool = "torch.BoolTensor", float16 = "torch.HalfTensor", int32 = "torch.IntTensor",
  }
  return names[p.dtype] or ("torch." .. p.dtype)
end

function ParameterList:__init(values)
  Module.__init(self)
  rawget(self, util.ST).attrs._size = 0
  if values ~= nil then self:extend(values) end
end

function ParameterList:__len() return self._size end

local function as_param(v)
  if is_tensor(v) and not mod.marked[v] then
    return mod.Parameter(v, util.is_float(v))
  end
  return v
end

function ParameterList:__getitem(i)
  local j = norm_index(self, i, self._size, 3)
  return self[tostring(j - 1)]
end

function ParameterList:__setitem(i, v)
  local j = norm_index(self, i, self._size, 3)
  local name = tostring(j - 1)
  v = as_param(v)
  if is_tensor(v) then
    self._modules:remove(name)
    local st = rawget(self, util.ST)
    st.attrs[name] = nil
    st.params:set(name, v)
  else
    self:delattr(name)
    rawget(self, util.ST).attrs[name] = v
  end
end

--- Adds `v` at the end (a tensor becomes a parameter).
-- @param v
-- @return the list
function ParameterList:append(v)
  local n = self._size
  local st = rawget(self, util.ST)
  st.attrs._size = n + 1
  local name = tostring(n)
  v = as_param(v)
  if is_tensor(v) then st.params:set(name, v) else st.attrs[name] = v end
  return self
end

--- Appends every value of a list.
-- @tab values
-- @return the list
function ParameterList:extend(values)
  if type(values) ~= "table" or is_module(values) and values.__len == nil then
    error("ParameterList.extend should be called with a table, but got " .. typename(values), 2)
  end
  local n = #values
  for i = 1, n do self:append(values[i]) end
  return self
end

function ParameterList:__pairs()
  local i = 0
  return function()
    i = i + 1
    if i > self._size then return nil end
    return i, self[i]
  end, self, nil
end

function ParameterList:extra_repr()
  local lines = {}
  for i = 1, self._size do
    local v = self[i]
    if is_tensor(v) then
      lines[#lines + 1] = "  (" .. (i - 1) .. "): " .. param_str(v, false)
    else
      lines[#lines + 1] = "  (" .. (i - 1) .. "): Object of type: " .. typename(v)
    end
  end
  return table.concat(lines, "\n")
end

function ParameterList:forward() error("ParameterList should not be called.", 2) end

--- Parameters by name: `nn.ParameterDict{{"scale", lt.ones(3)}}` (pairs, ordered dict or a
-- map taken in sorted order); `d.scale`, `d:setitem(key, t)`, `d:get(key, default)`,
-- `d:update(values)`, `d:keys()`, `d:values()`, `d:items()`, `d:contains(key)`, `d:pop(key)`,
-- `pairs(d)` in order. Not callable.
-- @type ParameterDict
local ParameterDict = Module:extend("ParameterDict")
C.ParameterDict = ParameterDict

function ParameterDict:__init(values)
  Module.__init(self)
  rawget(self, util.ST).attrs._objkeys = {}
  if values ~= nil then self:update(values) end
end

-- Keys in order: the parameters (registration order), then keys holding non-tensor values.
local function pd_keys(self)
  local st = rawget(self, util.ST)
  local out = {}
  for _, k in ipairs(st.params.keys) do out[#out + 1] = k end
  for _, k in ipairs(st.attrs._objkeys) do
    if st.attrs[k] ~= nil and not st.params:has(k) then out[#out + 1] = k end
  end
  return out
end

--- Sets `key` to `v` (PyTorch's `d[key] = v`): a tensor becomes a parameter.
-- @string key
-- @param v
function ParameterDict:setitem(key, v)
  if type(key) ~= "string" then
    error("ParameterDict: keys must be strings, got " .. typename(key), 2)
  end
  local st = rawget(self, util.ST)
  v = as_param(v)
  if st.cls[key] ~= nil or key == "training" or key:sub(1, 1) == "_" or key:find(".", 1, true)
    or key == "" then
    error("ParameterDict: invalid key '" .. key .. "'", 2)
  end
  if is_tensor(v) then
    st.attrs[key] = nil
    st.params:set(key, v)
  else
    st.params:remove(key)
    st.attrs[key] = v
    local ok = st.attrs._objkeys
    local known = false
    for _, k in ipairs(ok) do if k == key then known = true break end end
    if not known then ok[#ok + 1] = key end
  end
end

--- The value of `key`, or `default`.
-- @string key
-- @param[opt] default
function ParameterDict:get(key, default)
  local v = self[key]
  if v == nil then return default end
  return v
end

--- Sets every `{key, value}` of `values`.
-- @param values pairs, an ordered dict, a map or another ParameterDict
-- @return the dict
function ParameterDict:update(values)
  if type(values) ~= "table" then
    error("ParameterDict.update should be called with a table, but got " .. typename(values), 2)
  end
  local list
  if is_module(values) then
    list = values:items()
  else
    list = named_pairs(values)
  end
  for _, kv in ipairs(list) do
    if type(kv[1]) ~= "string" then
      error("ParameterDict: keys must be strings, got " .. typename(kv[1]), 2)
    end
  end
  for _, kv in ipairs(list) do self:setitem(kv[1], kv[2]) end
  return self
end

function ParameterDict:__len() return #pd_keys(self) end
--- The keys in order (a list and an iterator).
function ParameterDict:keys() return mod.value_list(pd_keys(self)) end
--- The values in key order (a list and an iterator).
function ParameterDict:values()
  local out = {}
  for _, k in ipairs(pd_keys(self)) do out[#out + 1] = self[k] end
  return mod.value_list(out)
end
--- `{key, value}` pairs in order (a list and an iterator).
function ParameterDict:items()
  local out = {}
  for _, k in ipairs(pd_keys(self)) do out[#out + 1] = { k, self[k] } end
  return mod.named_list(out)
end
--- Whether `key` is present.
-- @string key
-- @treturn boolean
function ParameterDict:contains(key) return self[key] ~= nil and (rawget(self, util.ST).params:has(key)
  or rawget(self, util.ST).attrs[key] ~= nil) end
--- Removes `key` and returns its value; raises when absent.
-- @string key
function ParameterDict:pop(key)
  if not self:contains(key) then error("ParameterDict.pop: no key '" .. tostring(key) .. "'", 2) end
  local v = self[key]
  self:delattr(key)
  return v
end
function ParameterDict:__pairs()
  local keys, i = pd_keys(self), 0
  return function()
    i = i + 1
    local k = keys[i]
    if k == nil then return nil end
    return k, self[k]
  end, self, nil
end

function ParameterDict:extra_repr()
  local lines = {}
  for _, k in ipairs(pd_keys(self)) do
    local v = self[k]
    if is_tensor(v) then
      lines[#lines + 1] = "  (" .. k .. "): " .. param_str(v, true)
    else
      lines[#lines + 1] = "  (" .. k .. "): Object of type: " .. typename(v)
    end
  end
  return table.concat(lines, "\n")
end

function ParameterDict:forward() error("ParameterDict should not be called.", 2) end

return C
