--- nn.Module, the base class of every layer, and its helpers (`nn.Parameter`,
-- `nn.isinstance`, `nn.is_module`), with PyTorch's registration, traversal, state_dict and
-- repr semantics (see ../shared/reference/torch_semantics.md §0-4).
--
-- An instance is a proxy: its raw table holds only a private state record, so that every
-- assignment reaches __newindex and every read reaches __index. Parameters, buffers and
-- children live in ordered registries; plain fields live in `attrs`. As the seed specifies,
-- assigning ANY tensor to a new name registers a parameter (register_buffer is the opt-out).
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local check = require("lantern.options").check

local M = {}

local is_tensor, typename, torch_size = util.is_tensor, util.typename, util.torch_size
local NONE = util.NONE
local ST = util.ST               -- key of the private state record in an instance's raw table
M.NONE = NONE

-- ordered maps -----------------------------------------------------------------------------
-- keys: array in insertion order; vals: key -> value (NONE stands for a registered nil).
local OMap = {}
OMap.__index = OMap
local function omap() return setmetatable({ keys = {}, vals = {} }, OMap) end
-- Tensors stored in a module outlive any release scope (lt.tidy) they were made in.
function OMap:set(k, v)
  lt.keep(v)
  if self.vals[k] == nil then self.keys[#self.keys + 1] = k end
  self.vals[k] = v
end
function OMap:remove(k)
  if self.vals[k] == nil then return false end
  self.vals[k] = nil
  for i, kk in ipairs(self.keys) do
    if kk == k then table.remove(self.keys, i) break end
  end
  return true
end
function OMap:has(k) return self.vals[k] ~= nil end
function OMap:len() return #self.keys end
-- Iterates (key, value) over a snapshot of the keys, so the loop body may modify the map.
function OMap:items()
  local ks, i = table.move(self.keys, 1, #self.keys, 1, {}), 0
  return function()
    while true do
      i = i + 1
      local k = ks[i]
      if k == nil then return nil end
      local v = self.vals[k]
      if v ~= nil then return k, v end
    end
  end
end
M.omap = omap

-- iterables -----------------------------------------------------------------------------
-- Traversal results are arrays that are also callable iterators, so both
-- `for name, p in m:named_parameters() do` and `#m:parameters()` / `ipairs(...)` work.
-- The cursor restarts whenever the generic `for` calls with a nil control value (its start).
local ValueList = {}
ValueList.__index = ValueList
ValueList.__call = function(self, _, ctrl)
  if ctrl == nil then self._i = 0 end
  local i = (self._i or 0) + 1
  self._i = i
  return self[i]
end
local NamedList = {}
NamedList.__index = NamedList
NamedList.__call = function(self, _, ctrl)
  if ctrl == nil then self._i = 0 end
  local i = (self._i or 0) + 1
  self._i = i
  local e = self[i]
  if e == nil then return nil end
  return e[1], e[2]
end
local function value_list(t) return setmetatable(t or {}, ValueList) end
local function named_list(t) return setmetatable(t or {}, NamedList) end
M.value_list, M.named_list = value_list, named_list

-- ordered dicts -----------------------------------------------------------------------------
-- state_dict() returns a plain Lua table (sd[key] is the tensor) whose metatable records the
-- key order (`__order`, iterated by pairs through __pairs; new keys are appended by
-- __newindex) and PyTorch's `_metadata` (`__metadata`: module path -> {version = n}).
local ordered = require "lantern.ordered"
-- New ordered dict, optionally from an array of {key, value} pairs.
local function odict(pairs_list)
  local t = ordered.make({})
  for _, kv in ipairs(pairs_list or {}) do t[kv[1]] = kv[2] end
  return t
end
M.odict = odict

-- Keys of a table in a deterministic order: an ordered dict's insertion order (keys whose value
-- is still set), then any other keys sorted as strings.
local function ordered_keys(t)
  local mt = getmetatable(t)
  local keys, seen = {}, {}
  if type(mt) == "table" and type(mt.__order) == "table" then
    for _, k in ipairs(mt.__order) do
      if not seen[k] and rawget(t, k) ~= nil then seen[k] = true; keys[#keys + 1] = k end
    end
  end
  local rest = {}
  for k in next, t do if not seen[k] then rest[#rest + 1] = k end end
  table.sort(rest, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(rest) do keys[#keys + 1] = k end
  return keys
end
M.ordered_keys = ordered_keys

--- The base class of layers and models (PyTorch's `nn.Module`). A model is a subclass:
--
--     local Net = nn.Module:extend("Net")
--     function Net:__init(n)
--       nn.Module.__init(self)              -- the parent's __init first
--       self.fc = nn.Linear(n, 2)           -- a Module: registered as a child
--       self.scale = lt.ones(2)             -- a tensor: registered as a parameter
--       self:register_buffer("steps", lt.zeros(1))
--     end
--     function Net:forward(x) return self.fc(x) * self.scale end
--     local net = Net(4)                    -- calls __init(4)
--     local y = net(lt.randn(3, 4))         -- calls forward (with the hooks)
--
-- Assigning a tensor to an attribute registers a parameter (any tensor, not only
-- `nn.Parameter`; floating ones are made to require grad), a Module registers a child,
-- assigning to a buffer's name updates the buffer, and anything else is a plain field;
-- assigning nil to a registered name keeps the name with no value (absent from
-- `state_dict`). `m.training` is the mode. `tostring(m)` is PyTorch's repr, with the
-- `extra_repr()` a layer defines. Layers with parameters define `reset_parameters()`,
-- which their constructor calls. Registered names and keys follow PyTorch (`0.weight`,
-- `layers.1.bias`), so a state_dict moves between Lantern and PyTorch unchanged.
-- @type Module
local Module = {}
M.Module = Module
Module.__name = "Module"
Module._version = 1

local function state(self)
  local st = rawget(self, ST)
  if st == nil then error("nn.Module: not a module instance (called with '.' instead of ':'?)", 3) end
  return st
end

local function is_module(v) return type(v) == "table" and rawget(v, ST) ~= nil end
M.is_module = is_module
util.is_module = is_module

-- Names the private registries as PyTorch does, for code that reads them.
local SPECIAL = {
  _parameters = "params", _buffers = "buffers", _modules = "modules",
  _non_persistent_buffers_set = "nonpersist",
}

-- `model.forward(x)` (a '.' for ':') hands forward the tensor as self and no input, which
-- fails far from the slip (indexing a tensor for the module's fields). Reading `forward` from an
-- instance gives the class's function behind a check of self that names the slip and the fix;
-- calling the module, model(x), reaches the function directly and pays nothing for it.
local forward_checks = setmetatable({}, { __mode = "k" })   -- class -> {function, wrapper}
local function checked_forward(cls, fn)
  local c = forward_checks[cls]
  if c and c[1] == fn then return c[2] end
  if type(fn) ~= "function" then return fn end
  local name = cls.__name
  local w = function(self, ...)
    if type(self) ~= "table" or rawget(self, ST) == nil then
      error(name .. ".forward: expected the module as self, got " .. typename(self) ..
        " (call the module, model(x), or model:forward(x) with ':', not model.forward(x))", 2)
    end
    return fn(self, ...)
  end
  forward_checks[cls] = { fn, w }
  return w
end

local function inst_index(self, k)
  local st = rawget(self, ST)
  if type(k) == "number" then
    local f = st.cls.__getitem
    if f then return f(self, k) end
  end
  local v = st.attrs[k]
  if v ~= nil then return v end
  if st.params then
    v = st.params.vals[k]
    if v ~= nil then if v == NONE then return nil end return v end
    v = st.buffers.vals[k]
    if v ~= nil then if v == NONE then return nil end return v end
    v = st.modules.vals[k]
    if v ~= nil then if v == NONE then return nil end return v end
  end
  local sp = SPECIAL[k]
  if sp then return st[sp] end
  v = st.cls[k]
  if k == "forward" then return checked_forward(st.cls, v) end
  return v
end

-- Whether `name` exists as an attribute of another kind than `kind` (PyTorch's hasattr check,
-- which also sees class members such as methods and `training`).
local function attr_exists(self, st, name, kind)
  if name == "training" then return true end
  if st.attrs[name] ~= nil then return true end
  if st.params and kind ~= "parameter" and st.params:has(name) then return true end
  if st.buffers and kind ~= "buffer" and st.buffers:has(name) then return true end
  if st.modules and kind ~= "module" and st.modules:has(name) then return true end
  if st.cls[name] ~= nil then return true end
  return false
end

-- Tensors handed over by nn.Parameter (or already registered) keep their requires_grad flag;
-- any other tensor assigned to a module becomes trainable if its dtype allows it.
local marked = setmetatable({}, { __mode = "k" })
M.marked = marked

local function check_name(self, st, kind, name)
  if type(name) ~= "string" then
    error(kind .. " name should be a string. Got " .. typename(name), 3)
  end
  if name:find(".", 1, true) then error(kind .. ' name can\'t contain "."', 3) end
  if name == "" then error(kind .. ' name can\'t be empty string ""', 3) end
  if attr_exists(self, st, name, kind) then
    error("attribute '" .. name .. "' already exists", 3)
  end
end

local function prepare_parameter(name, param)
  if param.grad_fn ~= nil then
    error("Cannot assign non-leaf Tensor to parameter '" .. name .. "'. Model parameters must " ..
      "be created explicitly. To express '" .. name .. "' as a function of another Tensor, " ..
      "compute the value in the forward() method.", 3)
  end
  if not marked[param] then
    if util.is_float(param) and not param.requires_grad then param:requires_grad_(true) end
    marked[param] = true
  end
  return param
end

--- Registers `param` as a parameter named `name` (`self.name = param` does the same). nil
-- reserves the name with no value.
-- @string name
-- @tparam ?Tensor param a leaf tensor, or nil
function Module:register_parameter(name, param)
  local st = state(self)
  if not st.params then error("cannot assign parameter before Module.__init__() call", 2) end
  check_name(self, st, "parameter", name)
  if param == nil or param == NONE then
    st.params:set(name, NONE)
    return
  end
  if not is_tensor(param) then
    error("cannot assign '" .. typename(param) .. "' object to parameter '" .. name ..
      "' (Tensor or nil required)", 2)
  end
  st.params:set(name, prepare_parameter(name, param))
end

local function check_buffer_tensor(name, tensor, level)
  if tensor.requires_grad then
    error("register_buffer: tensor for buffer '" .. name .. "' requires grad; a buffer is " ..
      "state that is not trained (pass t:detach(), or assign it as a parameter)", level + 1)
  end
end

--- Registers a buffer: state saved in `state_dict` but not trained (BatchNorm's running
-- statistics). Assigning a tensor to the name later updates the buffer.
-- @string name
-- @tparam ?Tensor tensor must not require grad; nil reserves the name
-- @param[opt=true] persistent false keeps it out of `state_dict` (also `{persistent = false}`)
function Module:register_buffer(name, tensor, persistent)
  local st = state(self)
  if not st.buffers then error("cannot assign buffer before Module.__init__() call", 2) end
  if type(persistent) == "table" then
    persistent = check("register_buffer", persistent, { "persistent" }).persistent
  end
  if persistent == nil then persistent = true end
  check_name(self, st, "buffer", name)
  if tensor ~= nil and tensor ~= NONE and not is_tensor(tensor) then
    error("cannot assign '" .. typename(tensor) .. "' object to buffer '" .. name ..
      "' (Tensor or nil required)", 2)
  end
  if tensor ~= nil and tensor ~= NONE then check_buffer_tensor(name, tensor, 2) end
  st.buffers:set(name, tensor == nil and NONE or tensor)
  st.nonpersist[name] = (not persistent) or nil
end

--- Registers `module` as a child named `name` (`self.name = module` does the same). Also
-- `m:register_module(name, module)`.
-- @string name
-- @param module a Module, or nil to reserve the name
function Module:add_module(name, module)
  local st = state(self)
  if not st.modules then error("cannot assign module before Module.__init__() call", 2) end
  if module ~= nil and module ~= NONE and not is_module(module) then
    error(typename(module) .. " is not a Module subclass", 2)
  end
  if type(name) ~= "string" then error("module name should be a string. Got " .. typename(name), 2) end
  if attr_exists(self, st, name, "module") then error("attribute '" .. name .. "' already exists", 2) end
  if name:find(".", 1, true) then error('module name can\'t contain ".", got: ' .. name, 2) end
  if name == "" then error('module name can\'t be empty string ""', 2) end
  st.modules:set(name, module == nil and NONE or module)
end
Module.register_module = Module.add_module

local function inst_newindex(self, k, v)
  local st = rawget(self, ST)
  if type(k) == "number" then
    local f = st.cls.__setitem
    if f then return f(self, k, v) end
  end
  if is_tensor(v) then
    if st.buffers and st.buffers:has(k) then
      check_buffer_tensor(k, v, 2)
      st.buffers:set(k, v)
      return
    end
    if not st.params then error("cannot assign parameters before Module.__init__() call", 2) end
    if type(k) ~= "string" then error("parameter name should be a string. Got " .. typename(k), 2) end
    if k == "training" or (st.cls[k] ~= nil) then error("attribute '" .. k .. "' already exists", 2) end
    if k:find(".", 1, true) then error('parameter name can\'t contain "."', 2) end
    if k == "" then error('parameter name can\'t be empty string ""', 2) end
    prepare_parameter(k, v)
    st.attrs[k] = nil
    st.modules:remove(k)
    st.params:set(k, v)
    return
  end
  if is_module(v) then
    if not st.modules then error("cannot assign module before Module.__init__() call", 2) end
    if type(k) ~= "string" then error("module name should be a string. Got " .. typename(k), 2) end
    if k == "training" or (st.cls[k] ~= nil) then error("attribute '" .. k .. "' already exists", 2) end
    if k:find(".", 1, true) then error('module name can\'t contain ".", got: ' .. k, 2) end
    if k == "" then error('module name can\'t be empty string ""', 2) end
    st.attrs[k] = nil
    if st.params then
      st.params:remove(k)
      st.buffers:remove(k)
      st.nonpersist[k] = nil
    end
    st.modules:set(k, v)
    return
  end
  if st.params then
    local which = (st.params:has(k) and st.params) or (st.buffers:has(k) and st.buffers)
      or (st.modules:has(k) and st.modules)
    if which then
      if v == nil or v == NONE then which:set(k, NONE) return end
      local what = which == st.params and "parameter" or which == st.buffers and "buffer"
        or "child module"
      local expected = which == st.modules and "Module or nil expected" or "Tensor or nil expected"
      error("cannot assign '" .. typename(v) .. "' as " .. what .. " '" .. tostring(k) ..
        "' (" .. expected .. ")", 2)
    end
  end
  if v == NONE then v = nil end
  st.attrs[k] = v
end

--- Removes a registered name or plain attribute (Python's `del m.name`).
-- @string name
function Module:delattr(name)
  local st = state(self)
  if st.params and st.params:remove(name) then return end
  if st.buffers and st.buffers:remove(name) then st.nonpersist[name] = nil return end
  if st.modules and st.modules:remove(name) then return end
  if st.attrs[name] == nil then
    error("'" .. st.cls.__name .. "' object has no attribute '" .. tostring(name) .. "'", 2)
  end
  st.attrs[name] = nil
end

-- forward hooks -----------------------------------------------------------------------------
-- m:register_forward_pre_hook(fn): fn(module, input) runs before forward; `input` is the table
-- of forward's arguments (with its count in `n`), and a non-nil return replaces them (a table
-- is unpacked, any other value becomes the one argument).
-- m:register_forward_hook(fn): fn(module, input, output) runs after forward; a non-nil return
-- replaces the output. Both return a handle whose remove() unregisters the hook; hooks run in
-- registration order, as in PyTorch.
local hook_ids = 0

local function add_hook(self, field, fn, what)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn)
      and getmetatable(fn).__call) then
    error(what .. ": hook must be callable, got " .. typename(fn), 3)
  end
  local st = state(self)
  local list = st[field]
  if not list then
    list = omap()
    st[field] = list
  end
  hook_ids = hook_ids + 1
  local id = hook_ids
  list:set(id, fn)
  return {
    id = id,
    remove = function()
      list:remove(id)
      if list:len() == 0 and st[field] == list then st[field] = nil end
    end,
  }
end

--- Registers `fn(module, input)`, called before `forward`; `input` is the table of
-- forward's arguments (with its count in `input.n`), and a non-nil return replaces them (a
-- table is unpacked, any other value becomes the one argument).
-- @func fn
-- @return a handle whose `remove()` unregisters the hook
function Module:register_forward_pre_hook(fn)
  return add_hook(self, "pre_hooks", fn, "register_forward_pre_hook")
end

--- Registers `fn(module, input, output)`, called after `forward`, with `output` the value
-- forward returned (the packed table of them when it returns several, as LSTM and
-- MultiheadAttention do); a non-nil return replaces it (them). Hooks run in registration
-- order (those registered when the module was called) and survive `deepcopy`.
-- @func fn
-- @return a handle whose `remove()` unregisters the hook
-- @usage local h = lin:register_forward_hook(function(m, input, output) return output * 0.5 end)
-- h.remove()
function Module:register_forward_hook(fn)
  return add_hook(self, "fwd_hooks", fn, "register_forward_hook")
end

--- Registers `fn(module, grad_input, grad_output)`, called when the gradients with respect
-- to the module's arguments have been computed, if the gradient reached the module through
-- its outputs. Both tables follow positions, with their length in `n`: `grad_input[i]` is
-- the gradient of argument i (nil for a non-tensor argument or one that needs no gradient),
-- `grad_output[i]` that of forward's return value i. A table returned (of the same length)
-- replaces grad_input, and the outputs show `grad_fn == "BackwardHookFunctionBackward"`, as in
-- PyTorch.
-- @func fn
-- @return a handle whose `remove()` unregisters the hook
function Module:register_full_backward_hook(fn)
  return add_hook(self, "bw_hooks", fn, "register_full_backward_hook")
end

-- Identity functions around a module call with backward hooks: HookOut, on the outputs, sees
-- the output gradients first; HookIn, on the arguments, runs once the module's own backward
-- has produced the argument gradients, and calls the hooks. With no argument that requires
-- grad, HookOut calls them itself with a grad_input of nils.
local HookIn, HookOut
local function hook_functions()
  if HookIn then return end
  local Function = require("lantern.autograd").Function
  local function run_hooks(call, grad_input)
    for _, hook in ipairs(call.hooks) do
      local r = hook(call.module, grad_input, call.grad_output)
      if r ~= nil then
        if type(r) ~= "table" or is_tensor(r) then
          error("full backward hook must return nil or a table of gradients, got " .. typename(r), 0)
        end
        local n = r.n or #r
        if n ~= call.n_in then
          error("Backward hook returned an invalid number of grad_input, got " .. n ..
            ", but expected " .. call.n_in, 0)
        end
        grad_input = r
        grad_input.n = n
      end
    end
    call.grad_output = nil   -- one call per pass through the outputs
    return grad_input
  end
  local function pass_through(ctx, call, slots, ...)
    ctx.call, ctx.slots = call, slots
    return ...
  end
  -- the gradients that came through, placed at their positions among n
  local function spread(slots, n, ...)
    local got, t = table.pack(...), { n = n }
    for k, slot in ipairs(slots) do t[slot] = got[k] end
    return t
  end
  HookIn = Function:extend("BackwardHookFunction")
  HookIn.forward = pass_through
  function HookIn.backward(ctx, ...)
    local call = ctx.call
    if call.grad_output == nil then return nil, nil, ... end   -- not reached through the outputs
    local gi = run_hooks(call, spread(ctx.slots, call.n_in, ...))
    local out = {}
    for k, slot in ipairs(ctx.slots) do out[k] = gi[slot] end
    return nil, nil, table.unpack(out, 1, #ctx.slots)
  end
  HookOut = Function:extend("BackwardHookFunction")
  HookOut.forward = pass_through
  function HookOut.backward(ctx, ...)
    local call = ctx.call
    call.grad_output = spread(ctx.slots, call.n_out, ...)
    if not call.has_input then run_hooks(call, { n = call.n_in }) end
    return nil, nil, ...
  end
end

-- Passes the tensors among the packed values that require grad through f (HookIn or HookOut),
-- in place; returns their positions.
local function wrap_tensors(f, call, vals)
  local slots, ts = {}, {}
  for i = 1, vals.n do
    if is_tensor(vals[i]) and vals[i].requires_grad then
      slots[#slots + 1] = i
      ts[#ts + 1] = vals[i]
    end
  end
  if #ts > 0 then
    local out = table.pack(f.apply(call, slots, table.unpack(ts)))
    for k, i in ipairs(slots) do vals[i] = out[k] end
  end
  return slots
end

-- Forward hooks see forward's return value, or the packed table of its values when it returns
-- several; what a hook returns replaces it (them).
local function run_forward_hooks(self, st, input, output)
  for _, hook in st.fwd_hooks:items() do
    local r = hook(self, input, output.n == 1 and output[1] or output)
    if r ~= nil then
      if output.n == 1 then
        output[1] = r
      elseif type(r) == "table" and not is_tensor(r) and getmetatable(r) == nil then
        output = r
        output.n = r.n or #r
      else
        error("forward hook: forward returned " .. output.n .. " values, so a replacement " ..
          "must be a table of them, got " .. typename(r), 0)
      end
    end
  end
  return output
end

-- What self:forward would find, without the check of self (a module call passes itself).
-- A plain field set on the instance wins, as with any method.
local function forward_of(st)
  local f = st.attrs.forward
  if f == nil then f = st.cls.forward end
  return f
end

local function call_with_hooks(self, st, ...)
  local input = table.pack(...)
  if st.pre_hooks then
    for _, hook in st.pre_hooks:items() do
      local r = hook(self, input)
      if r ~= nil then
        if type(r) == "table" and not is_tensor(r) and getmetatable(r) == nil then
          input = r
          input.n = input.n or #r
        else
          input = table.pack(r)
        end
      end
    end
  end
  local call
  if st.bw_hooks and lt.is_grad_enabled() then
    hook_functions()
    call = { module = self, n_in = input.n, hooks = {} }
    for _, hook in st.bw_hooks:items() do call.hooks[#call.hooks + 1] = hook end
    call.has_input = #wrap_tensors(HookIn, call, input) > 0
  end
  local output = table.pack(forward_of(st)(self, table.unpack(input, 1, input.n)))
  if st.fwd_hooks then output = run_forward_hooks(self, st, input, output) end
  if call then
    call.n_out = output.n
    wrap_tensors(HookOut, call, output)
  end
  return table.unpack(output, 1, output.n)
end

local inst_call = function(self, ...)
  local st = rawget(self, ST)
  if st.pre_hooks or st.fwd_hooks or st.bw_hooks then return call_with_hooks(self, st, ...) end
  return forward_of(st)(self, ...)
end

local repr -- defined below

local function make_instance_mt(cls)
  return {
    __index = inst_index, __newindex = inst_newindex, __call = inst_call,
    __tostring = function(self) return repr(self) end, __name = cls.__name, __class = cls,
    __len = function(self)
      local f = rawget(self, ST).cls.__len
      if f then return f(self) end
      return 0
    end,
    __pairs = function(self)
      local f = rawget(self, ST).cls.__pairs
      if f then return f(self) end
      return next, {}, nil
    end,
  }
end

local function construct(cls, ...)
  local st = { cls = cls, attrs = {} }
  local self = setmetatable({ [ST] = st }, cls.__imt)
  self:__init(...)
  return self
end

--- Declares a subclass: `local Net = nn.Module:extend("Net")` (also of any layer,
-- `nn.Linear:extend("MyLinear")`). Define `Net:__init(...)` (calling the parent's
-- `__init` first) and `Net:forward(...)`; `Net(...)` constructs, `net(...)` calls forward.
-- The class has `Net.super`, the parent.
-- @param parent the class being extended (the receiver of `:extend`)
-- @string name the class name, shown by `tostring` and errors
-- @return the class
function Module.extend(parent, name)
  if type(parent) ~= "table" or rawget(parent, "__imt") == nil then
    error("Module.extend: call it on a class, as nn.Module:extend(\"Name\")", 2)
  end
  name = name or "Module"
  if type(name) ~= "string" then error("Module.extend: class name must be a string", 2) end
  local cls = { __name = name, super = parent }
  cls.__imt = make_instance_mt(cls)
  return setmetatable(cls, {
    __index = parent, __call = construct,
    __tostring = function() return "<class '" .. name .. "'>" end, __name = "class",
  })
end
Module.__imt = make_instance_mt(Module)
setmetatable(Module, {
  __call = construct, __tostring = function() return "<class 'Module'>" end, __name = "class",
})

--- Initialises the registries and `training = true`; a subclass's `__init` calls it (or its
-- parent's) first, as Python's `super().__init__()`.
function Module:__init()
  local st = state(self)
  if st.params then return end   -- already initialised (a diamond of __init calls)
  st.params, st.buffers, st.modules, st.nonpersist = omap(), omap(), omap(), {}
  st.attrs.training = true
end

--- Whether `self` is an instance of `cls` (or of a subclass of it). `nn.isinstance(v, cls)`
-- also takes values that are not modules.
-- @param cls a class
-- @treturn boolean
function Module:isinstance(cls)
  local c = state(self).cls
  while c do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end
-- nn.isinstance(v, cls), documented in nn/init.lua: true for a module instance of cls.
function M.isinstance(v, cls) return is_module(v) and Module.isinstance(v, cls) end

--- The instance's class (`net:class() == Net`).
function Module:class() return state(self).cls end
--- The class name (`"Linear"`).
-- @treturn string
function Module:type_name() return state(self).cls.__name end

--- The computation, defined by every subclass; call the module (`m(x)`) rather than
-- forward, so that its hooks run. `model.forward(x)` (a `.` for `:`) raises naming the slip.
-- @param ... the inputs
function Module:forward()
  error('Module [' .. state(self).cls.__name .. '] is missing the required "forward" function', 2)
end

-- traversal -----------------------------------------------------------------------------
-- Options may be given positionally as in PyTorch or as one table.
local function named_modules_list(self, memo, prefix, remove_duplicate, out)
  if memo ~= nil and memo[self] then return end
  if remove_duplicate then memo[self] = true end
  out[#out + 1] = { prefix, self }
  local st = state(self)
  for name, child in st.modules:items() do
    if child ~= NONE then
      named_modules_list(child, memo, prefix == "" and name or (prefix .. "." .. name),
        remove_duplicate, out)
    end
  end
end

-- Whether a table argument is an options table: a plain table with a string key (a memo set
-- is keyed by modules, a state_dict destination holds tensors or has a metatable).
local function string_keyed(t)
  if type(t) ~= "table" or getmetatable(t) ~= nil or is_module(t) then return false end
  for k, v in pairs(t) do
    if type(k) ~= "string" or is_tensor(v) then return false end
  end
  return next(t) ~= nil
end

--- Every module of the tree, this one first (named `""`), then each child's subtree in
-- registration order, as `{name, module}` pairs; a module registered twice comes once. The
-- result is a list and an iterator: `for name, m in net:named_modules() do`. Options
-- positional as in PyTorch or as one table.
-- @param[opt] memo a set of modules to skip (or `{memo=, prefix=, remove_duplicate=}`)
-- @string[opt] prefix put before every name
-- @bool[opt=true] remove_duplicate
-- @usage for name, m in net:named_modules() do print(name, m:type_name()) end
function Module:named_modules(memo, prefix, remove_duplicate)
  if string_keyed(memo) then
    check("named_modules", memo, { "memo", "prefix", "remove_duplicate" })
    memo, prefix, remove_duplicate = memo.memo, memo.prefix, memo.remove_duplicate
  elseif type(memo) == "string" then
    memo, prefix = nil, memo
  end
  if remove_duplicate == nil then remove_duplicate = true end
  local out = {}
  named_modules_list(self, remove_duplicate and (memo or {}) or nil, prefix or "", remove_duplicate, out)
  return named_list(out)
end

--- The modules of `named_modules()`, without names (a list and an iterator).
function Module:modules()
  local out = {}
  for _, e in ipairs(self:named_modules()) do out[#out + 1] = e[2] end
  return value_list(out)
end

--- The direct children as `{name, module}` pairs, in registration order (a list and an
-- iterator); `m:children()` without names.
function Module:named_children()
  local out, seen = {}, {}
  for name, child in state(self).modules:items() do
    if child ~= NONE and not seen[child] then
      seen[child] = true
      out[#out + 1] = { name, child }
    end
  end
  return named_list(out)
end

--- The direct children, in registration order (a list and an iterator).
function Module:children()
  local out = {}
  for _, e in ipairs(self:named_children()) do out[#out + 1] = e[2] end
  return value_list(out)
end

local function named_members(self, field, prefix, recurse, remove_duplicate)
  if type(prefix) == "table" then
    check("named_" .. field:gsub("params", "parameters"), prefix,
      { "prefix", "recurse", "remove_duplicate" })
    prefix, recurse, remove_duplicate = prefix.prefix, prefix.recurse, prefix.remove_duplicate
  end
  prefix = prefix or ""
  if recurse == nil then recurse = true end
  if remove_duplicate == nil then remove_duplicate = true end
  local mods
  if recurse then
    mods = self:named_modules(nil, prefix, remove_duplicate)
  else
    mods = { { prefix, self } }
  end
  local out, seen = {}, {}
  for _, e in ipairs(mods) do
    local mprefix, m = e[1], e[2]
    for k, v in state(m)[field]:items() do
      if v ~= NONE and not (remove_duplicate and seen[v]) then
        seen[v] = true
        out[#out + 1] = { mprefix == "" and k or (mprefix .. "." .. k), v }
      end
    end
  end
  return named_list(out)
end

--- Every parameter of the tree as `{name, tensor}` pairs with PyTorch's dotted names
-- (`fc.weight`), a shared tensor once; a list and an iterator. `m:parameters()` gives the
-- tensors alone (what an optimiser takes); `m:named_buffers()` and `m:buffers()` the
-- buffers.
-- @string[opt] prefix put before every name (or `{prefix=, recurse=, remove_duplicate=}`)
-- @bool[opt=true] recurse false: this module's own only
-- @bool[opt=true] remove_duplicate
-- @usage for name, p in net:named_parameters() do print(name, p.shape) end
-- local opt = lt.optim.SGD(net:parameters(), {lr = 0.1})
function Module:named_parameters(prefix, recurse, remove_duplicate)
  return named_members(self, "params", prefix, recurse, remove_duplicate)
end
--- The parameter tensors of the tree, each shared tensor once (a list and an iterator):
-- what an optimiser takes.
-- @param[opt=true] recurse false: this module's own only (or `{recurse=}`)
function Module:parameters(recurse)
  if type(recurse) == "table" then recurse = check("parameters", recurse, { "recurse" }).recurse end
  local out = {}
  for _, e in ipairs(named_members(self, "params", "", recurse)) do out[#out + 1] = e[2] end
  return value_list(out)
end
--- Every buffer of the tree as `{name, tensor}` pairs (a list and an iterator), as
-- `named_parameters` for parameters.
-- @string[opt] prefix (or `{prefix=, recurse=, remove_duplicate=}`)
-- @bool[opt=true] recurse
-- @bool[opt=true] remove_duplicate
function Module:named_buffers(prefix, recurse, remove_duplicate)
  return named_members(self, "buffers", prefix, recurse, remove_duplicate)
end
--- The buffer tensors of the tree (a list and an iterator).
-- @param[opt=true] recurse
function Module:buffers(recurse)
  if type(recurse) == "table" then recurse = check("buffers", recurse, { "recurse" }).recurse end
  local out = {}
  for _, e in ipairs(named_members(self, "buffers", "", recurse)) do out[#out + 1] = e[2] end
  return value_list(out)
end

local function get_path(self, target, what)
  if target == "" then return self end
  local mod = self
  for item in target:gmatch("[^.]+") do
    local st = state(mod)
    local child = st.modules and st.modules.vals[item]
    if child == nil then
      error(st.cls.__name .. " has no attribute `" .. item .. "`", 3)
    end
    if child == NONE then error("`" .. item .. "` is not an nn.Module", 3) end
    mod = child
  end
  return mod
end

--- The module at a dotted path (`"layers.0"`); raises naming the missing part.
-- `m:get_parameter("fc.weight")` and `m:get_buffer("bn.running_mean")` find a parameter or
-- buffer the same way.
-- @string target
function Module:get_submodule(target)
  if type(target) ~= "string" then error("get_submodule: target must be a string", 2) end
  return get_path(self, target)
end

local function get_leaf(self, target, field, kind)
  if type(target) ~= "string" then error("get_" .. kind .. ": target must be a string", 3) end
  local mod_path, name = target:match("^(.*)%.([^.]*)$")
  if not mod_path then mod_path, name = "", target end
  local mod = get_path(self, mod_path)
  local st = state(mod)
  local v = st[field] and st[field].vals[name]
  if v == nil then
    local other = kind == "parameter" and st.params or st.buffers
    error(st.cls.__name .. " has no attribute `" .. name .. "`", 3)
  end
  if v == NONE then return nil end
  return v
end
--- The parameter at a dotted path (`"fc.weight"`).
-- @string target
function Module:get_parameter(target) return get_leaf(self, target, "params", "parameter") end
--- The buffer at a dotted path (`"bn.running_mean"`).
-- @string target
function Module:get_buffer(target) return get_leaf(self, target, "buffers", "buffer") end

--- Sets training mode (true by default) on this module and every descendant; Dropout and
-- BatchNorm behave differently in each. `m:eval()` is `m:train(false)`.
-- @bool[opt=true] mode
-- @return the module
function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then error("training mode is expected to be boolean", 2) end
  state(self).attrs.training = mode
  for _, child in ipairs(self:children()) do child:train(mode) end
  return self
end
--- Evaluation mode: `m:train(false)`.
-- @return the module
function Module:eval() return self:train(false) end

--- Sets `requires_grad` on every parameter (true by default): false freezes them.
-- @bool[opt=true] flag
-- @return the module
function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(flag) end
  return self
end

--- Clears the gradients of every parameter: to nil (the default, as PyTorch 2) or, with
-- false, to zeros.
-- @param[opt=true] set_to_none boolean or `{set_to_none=}`
function Module:zero_grad(set_to_none)
  if type(set_to_none) == "table" then
    set_to_none = check("zero_grad", set_to_none, { "set_to_none" }).set_to_none
  end
  if set_to_none == nil then set_to_none = true end
  for _, p in ipairs(self:parameters()) do
    local g = p.grad
    if g ~= nil then
      if set_to_none then
        p.grad = nil
      else
        if g.grad_fn ~= nil then g = g:detach(); p.grad = g end
        lt.no_grad(function() g:zero_() end)
      end
    end
  end
end

--- Calls `fn(module)` on every descendant (children first) and on this module, as PyTorch's
-- apply (for custom initialisation).
-- @func fn
-- @return the module
function Module:apply(fn)
  for _, child in ipairs(self:children()) do child:apply(fn) end
  fn(self)
  return self
end

-- fn(tensor) -> tensor, applied to every parameter, gradient and buffer (children first).
-- A parameter whose tensor changes is replaced by a new leaf with the same requires_grad,
-- carrying the converted gradient. A tensor shared by several modules (or names) is converted
-- once, so the sharing survives.
function Module:_apply(fn, memo)
  memo = memo or {}
  for _, child in ipairs(self:children()) do child:_apply(fn, memo) end
  local st = state(self)
  lt.no_grad(function()
    for k, p in st.params:items() do
      if p ~= NONE then
        local np = memo[p]
        if np == nil then
          local new = fn(p)
          if rawequal(new, p) then
            np = p
          else
            np = new:detach()
            if p.requires_grad then np:requires_grad_(true) end
            local g = p.grad
            if g ~= nil then np.grad = fn(g) end
            marked[np] = true
          end
          memo[p] = np
        end
        if not rawequal(np, p) then st.params:set(k, np) end
      end
    end
    for k, b in st.buffers:items() do
      if b ~= NONE then
        local nb = memo[b]
        if nb == nil then
          nb = fn(b)
          memo[b] = nb
        end
        st.buffers:set(k, nb)
      end
    end
  end)
  return self
end

local DTYPES = {
  float32 = "float32", float = "float32", float64 = "float64", double = "float64",
  float16 = "float16", half = "float16", bfloat16 = "bfloat16",
  int64 = "int64", long = "int64", int32 = "int32", int = "int32", int16 = "int16",
  int8 = "int8", uint8 = "uint8", bool = "bool",
}
local FLOAT_DTYPES = { float32 = true, float64 = true, float16 = true, bfloat16 = true }

--- Converts the parameters and buffers: `m:to("float64")`, `m:to("cpu")`,
-- `m:to({dtype=, device=})`, `m:to(tensor)` (its dtype); `m:float()`, `m:double()` and
-- `m:cpu()` are shortcuts. Gradients move with their parameters, integer buffers keep their
-- dtype, and a tensor shared by several modules stays shared.
-- @param ... dtype, device, options table or tensor
-- @return the module
function Module:to(...)
  local dtype, device
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    if type(a) == "string" then
      if DTYPES[a] then dtype = DTYPES[a] else device = a end
    elseif is_tensor(a) then
      dtype, device = a.dtype, a.device
    elseif type(a) == "table" then
      check("Module:to", a, { "dtype", "device", "non_blocking" })
      if a.dtype then
        dtype = DTYPES[a.dtype] or error("Module:to: unknown dtype '" .. tostring(a.dtype) .. "'", 2)
      end
      device = a.device or device
    elseif a ~= nil then
      error("Module:to: expected a dtype or device name, a tensor or an options table, got " ..
        typename(a), 2)
    end
  end
  if dtype and not FLOAT_DTYPES[dtype] then
    error("nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=" ..
      dtype, 2)
  end
  if device and device ~= "cpu" and not device:match("^cpu") then
    -- Let the core decide whether the device exists; fail before touching anything.
    local ok, err = pcall(function() return lt.zeros(1):to(device) end)
    if not ok then error("Module:to: " .. tostring(err), 2) end
  end
  return self:_apply(function(t)
    if dtype and util.is_float(t) and t.dtype ~= dtype then t = t:to(dtype) end
    if device and t.device ~= device then t = t:to(device) end
    return t
  end)
end
function Module:float() return self:to("float32") end
function Module:double() return self:to("float64") end
function Module:cpu() return self:to("cpu") end

-- state_dict -----------------------------------------------------------------------------
local function save_rec(self, dest, prefix, keep_vars)
  local st = state(self)
  local md = getmetatable(dest).__metadata
  if md then md[prefix:sub(1, -2)] = { version = st.cls._version or 1 } end
  for k, p in st.params:items() do
    if p ~= NONE then dest[prefix .. k] = keep_vars and p or p:detach() end
  end
  for k, b in st.buffers:items() do
    if b ~= NONE and not st.nonpersist[k] then dest[prefix .. k] = keep_vars and b or b:detach() end
  end
  if st.cls.get_extra_state ~= nil then dest[prefix .. "_extra_state"] = self:get_extra_state() end
  for name, child in st.modules:items() do
    if child ~= NONE then save_rec(child, dest, prefix .. name .. ".", keep_vars) end
  end
end

--- The parameters and persistent buffers by dotted name, as an ordered table (insertion
-- order in `pairs`) with PyTorch's metadata, so `lt.save(m:state_dict(), "m.pt")` writes what
-- `torch.load` reads. Values are detached aliases (they share memory with the module).
-- @param[opt] destination a table to fill (or `{destination=, prefix=, keep_vars=}`)
-- @string[opt] prefix put before every key
-- @bool[opt=false] keep_vars true: the parameters themselves, not detached
-- @treturn table
function Module:state_dict(destination, prefix, keep_vars)
  if string_keyed(destination) then
    check("state_dict", destination, { "destination", "prefix", "keep_vars" })
    destination, prefix, keep_vars = destination.destination, destination.prefix, destination.keep_vars
  end
  local dest = destination or odict()
  local mt = getmetatable(dest)
  if mt and mt.__order and mt.__metadata == nil then mt.__metadata = {} end
  if not mt then
    ordered.make(dest, {}, {})
  end
  save_rec(self, dest, prefix or "", keep_vars or false)
  return dest
end

local function quoted_list(keys)
  local q = {}
  for i, k in ipairs(keys) do q[i] = '"' .. k .. '"' end
  return table.concat(q, ", ")
end

-- The per-module step of load_state_dict: works out missing/unexpected keys and the copies to
-- make, without changing anything. Subclasses may override it (BatchNorm does) and call it.
function Module:_load_from_state_dict(sd, keys, prefix, local_metadata, missing, unexpected,
                                      errors, copies)
  local st = state(self)
  local localstate, order = {}, {}
  for k, p in st.params:items() do
    if p ~= NONE then localstate[k] = p; order[#order + 1] = k end
  end
  for k, b in st.buffers:items() do
    if b ~= NONE and not st.nonpersist[k] then localstate[k] = b; order[#order + 1] = k end
  end
  for _, name in ipairs(order) do
    local key = prefix .. name
    local param, input = localstate[name], sd[key]
    if input == nil then
      missing[#missing + 1] = key
    elseif not is_tensor(input) then
      errors[#errors + 1] = 'While copying the parameter named "' .. key .. '", expected ' ..
        "torch.Tensor or Tensor-like object from checkpoint but received " .. typename(input)
    else
      if param:dim() == 0 and input:dim() == 1 and input:numel() >= 1 then input = input[1] end
      if not util.same_shape(param, input) then
        errors[#errors + 1] = "size mismatch for " .. key .. ": copying a param with shape " ..
          torch_size(input) .. " from checkpoint, the shape in current model is " ..
          torch_size(param) .. "."
      else
        copies[#copies + 1] = { param, input, key }
      end
    end
  end
  local has_extra = st.cls.set_extra_state ~= nil
  local extra_key = prefix .. "_extra_state"
  if has_extra then
    if sd[extra_key] ~= nil then
      copies[#copies + 1] = { self, sd[extra_key], extra_key, extra = true }
    else
      missing[#missing + 1] = extra_key
    end
  end
  for _, key in ipairs(keys) do
    if key:sub(1, #prefix) == prefix and not (has_extra and key == extra_key) then
      local rest = key:sub(#prefix + 1)
      local head = rest:match("^([^.]*)%.")
      if head then
        if not st.modules:has(head) then unexpected[#unexpected + 1] = key end
      elseif localstate[rest] == nil then
        unexpected[#unexpected + 1] = key
      end
    end
  end
end

local Incompatible = {
  __tostring = function(r)
    if #r.missing_keys == 0 and #r.unexpected_keys == 0 then return "<All keys matched successfully>" end
    local function l(t)
      local q = {}
      for i, k in ipairs(t) do q[i] = "'" .. k .. "'" end
      return "[" .. table.concat(q, ", ") .. "]"
    end
    return "_IncompatibleKeys(missing_keys=" .. l(r.missing_keys) .. ", unexpected_keys=" ..
      l(r.unexpected_keys) .. ")"
  end,
}

--- Copies a state_dict into the module's tensors. Every check is made before anything is
-- copied, so a failed load leaves the module unchanged; errors use PyTorch's text and list
-- every missing and unexpected key and every shape mismatch.
-- @tparam table sd from `state_dict()`, `lt.load` or a PyTorch checkpoint
-- @param[opt=true] strict false: missing and unexpected keys are allowed (also
-- `{strict = false}`)
-- @return `{missing_keys=, unexpected_keys=}` (printing as PyTorch's `_IncompatibleKeys`)
function Module:load_state_dict(sd, strict)
  if type(strict) == "table" then strict = check("load_state_dict", strict, { "strict" }).strict end
  if strict == nil then strict = true end
  if type(sd) ~= "table" or is_module(sd) then
    error("Expected state_dict to be dict-like, got " .. typename(sd) .. ".", 2)
  end
  local keys = ordered_keys(sd)
  local vals = {}
  for _, k in ipairs(keys) do vals[k] = sd[k] end
  local mt = getmetatable(sd)
  local metadata = type(mt) == "table" and type(mt.__metadata) == "table" and mt.__metadata or nil
  local missing, unexpected, errors, copies = {}, {}, {}, {}
  local function load(module, prefix, mkeys)
    local local_md = metadata and metadata[prefix:sub(1, -2)] or {}
    module:_load_from_state_dict(vals, mkeys, prefix, local_md, missing, unexpected, errors, copies)
    for name, child in state(module).modules:items() do
      if child ~= NONE then
        local cp = prefix .. name .. "."
        local ck = {}
        for _, k in ipairs(mkeys) do if k:sub(1, #cp) == cp then ck[#ck + 1] = k end end
        load(child, cp, ck)
      end
    end
  end
  load(self, "", keys)
  if strict then
    if #unexpected > 0 then
      table.insert(errors, 1, "Unexpected key(s) in state_dict: " .. quoted_list(unexpected) .. ". ")
    end
    if #missing > 0 then
      table.insert(errors, 1, "Missing key(s) in state_dict: " .. quoted_list(missing) .. ". ")
    end
  end
  if #errors > 0 then
    error("Error(s) in loading state_dict for " .. state(self).cls.__name .. ":\n\t" ..
      table.concat(errors, "\n\t"), 2)
  end
  lt.no_grad(function()
    for _, c in ipairs(copies) do
      if c.extra then
        c[1]:set_extra_state(c[2])
      else
        local ok, err = pcall(c[1].copy_, c[1], c[2])
        if not ok then
          error('While copying the parameter named "' .. c[3] .. '", whose dimensions in the ' ..
            "model are " .. torch_size(c[1]) .. " and whose dimensions in the checkpoint are " ..
            torch_size(c[2]) .. ", an exception occurred : " .. tostring(err) .. ".", 3)
        end
      end
    end
  end)
  return setmetatable({ missing_keys = missing, unexpected_keys = unexpected }, Incompatible)
end

-- repr -----------------------------------------------------------------------------
local function addindent(s, n)
  local lines = {}
  for line in (s .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
  if #lines <= 1 then return s end
  local pad = string.rep(" ", n)
  for i = 2, #lines do lines[i] = pad .. lines[i] end
  return table.concat(lines, "\n")
end
M.addindent = addindent

--- The text inside a layer's parentheses in `tostring(m)` (`in_features=4, ...`); a layer
-- overrides it. Empty by default.
-- @treturn string
function Module:extra_repr() return "" end

-- Lines "(key): child" for the children; containers may override it (ModuleList compresses).
function Module:_child_repr_lines()
  local lines = {}
  for key, child in state(self).modules:items() do
    local s = child == NONE and "None" or repr(child)
    lines[#lines + 1] = "(" .. key .. "): " .. addindent(s, 2)
  end
  return lines
end

repr = function(self)
  local extra = self:extra_repr()
  local extra_lines = {}
  if extra ~= nil and extra ~= "" then
    for line in (extra .. "\n"):gmatch("(.-)\n") do extra_lines[#extra_lines + 1] = line end
  end
  local child_lines = self:_child_repr_lines()
  local lines = {}
  for _, l in ipairs(extra_lines) do lines[#lines + 1] = l end
  for _, l in ipairs(child_lines) do lines[#lines + 1] = l end
  local s = state(self).cls.__name .. "("
  if #lines > 0 then
    if #extra_lines == 1 and #child_lines == 0 then
      s = s .. extra_lines[1]
    else
      s = s .. "\n  " .. table.concat(lines, "\n  ") .. "\n"
    end
  end
  return s .. ")"
end
M.repr = repr
Module.__repr = repr

--- An independent copy (Python's `copy.deepcopy(m)`): new tensors with the same values,
-- dtypes and requires_grad (gradients are not copied), children copied recursively; sharing
-- inside the module (tied parameters, a module registered twice) is kept, and so are hooks.
-- Plain fields are copied shallowly (tables one level deep).
-- @param[opt] memo table of originals to copies already made
function Module:deepcopy(memo)
  memo = memo or {}
  if memo[self] then return memo[self] end
  local st = state(self)
  local nst = { cls = st.cls, attrs = {} }
  local new = setmetatable({ [ST] = nst }, st.cls.__imt)
  memo[self] = new
  for _, field in ipairs { "pre_hooks", "fwd_hooks", "bw_hooks" } do   -- the copy keeps the hooks
    if st[field] then
      nst[field] = omap()
      for id, fn in st[field]:items() do nst[field]:set(id, fn) end
    end
  end
  local function copy_tensor(t)
    if t == NONE then return NONE end
    local c = memo[t]
    if c == nil then
      c = lt.no_grad(function() return t:detach():clone() end)
      if t.requires_grad then c:requires_grad_(true) end
      if marked[t] then marked[c] = true end
      memo[t] = c
    end
    return c
  end
  for k, v in pairs(st.attrs) do
    if is_tensor(v) then
      v = copy_tensor(v)
    elseif type(v) == "table" and getmetatable(v) == nil then
      local c = {}
      for kk, vv in pairs(v) do c[kk] = vv end
      v = c
    end
    nst.attrs[k] = v
  end
  if st.params then
    nst.params, nst.buffers, nst.modules, nst.nonpersist = omap(), omap(), omap(), {}
    for k, v in pairs(st.nonpersist) do nst.nonpersist[k] = v end
    for k, p in st.params:items() do nst.params:set(k, copy_tensor(p)) end
    for k, b in st.buffers:items() do nst.buffers:set(k, copy_tensor(b)) end
    for k, m in st.modules:items() do
      nst.modules:set(k, m == NONE and NONE or m:deepcopy(memo))
    end
  end
  return new
end

---------------------------------------------------------------------------------------------
--- Helpers.
-- @section helpers

--- A leaf sharing `data`'s storage, marked trainable, for readers of PyTorch code: in
-- Lantern any tensor assigned to a module is registered as a parameter, but one from
-- `nn.Parameter` keeps its `requires_grad` as given.
-- @tparam[opt] Tensor data (default: an empty tensor)
-- @bool[opt=true] requires_grad
-- @treturn Tensor
function M.Parameter(data, requires_grad)
  if data == nil then data = lt.empty(0) end
  if not is_tensor(data) then
    error("nn.Parameter: expected a Tensor, got " .. typename(data), 2)
  end
  if requires_grad == nil then requires_grad = true end
  local p = data:detach()
  if requires_grad then
    if not util.is_float(p) then
      error("nn.Parameter: Only Tensors of floating point and complex dtype can require " ..
        "gradients (got " .. p.dtype .. ")", 2)
    end
    p:requires_grad_(true)
  end
  marked[p] = true
  return p
end

-- skip_init -----------------------------------------------------------------------------
-- How deep skip_init calls are nested: while above 0, layers leave their parameters as
-- lt.empty made them.
M.skip_depth = 0
--- Constructs a module without its default initialisation (`nn.utils.skip_init`): the
-- parameters are allocated but left as they come from `lt.empty`, for weights that are
-- loaded or initialised next.
-- @param cls a Module class (`nn.Linear`)
-- @param ... the constructor's arguments
-- @return the module
function M.skip_init(cls, ...)
  if type(cls) ~= "table" or rawget(cls, "__imt") == nil then
    error("skip_init: expected a Module class, got " .. typename(cls), 2)
  end
  M.skip_depth = M.skip_depth + 1
  local ok, res = pcall(cls, ...)
  M.skip_depth = M.skip_depth - 1
  if not ok then error(res, 2) end
  return res
end

-- Layers call this at the end of __init instead of reset_parameters().
function Module:_init_parameters()
  if M.skip_depth == 0 and self.reset_parameters then self:reset_parameters() end
end

return M
