-- Small helpers shared by the nn files: type tests, names for error messages, option parsing.
local lt = require "lantern"

local U = {}

-- Engine-wide sentinel for a name registered with no value (PyTorch's None entries).
U.NONE = setmetatable({}, { __tostring = function() return "nn.NONE" end, __name = "nn.NONE" })
-- Key of the private state record in a module instance's raw table.
U.ST = setmetatable({}, { __tostring = function() return "<module state>" end })

local tensor_mt
function U.is_tensor(v)
  if type(v) ~= "userdata" then return false end
  if lt.is_tensor then return lt.is_tensor(v) and true or false end
  if tensor_mt == nil then tensor_mt = getmetatable(lt.zeros(1)) end
  return getmetatable(v) == tensor_mt
end
local is_tensor = U.is_tensor

-- Parameters given as a tensor, an iterator (m:parameters() or m:named_parameters()) or a list,
-- as a list. Shared by the optimisers and nn.utils.
function U.param_list(params)
  if lt.is_tensor(params) then return { params } end
  if type(params) == "function" then
    local list = {}
    for a, b in params do list[#list + 1] = lt.is_tensor(b) and b or a end
    return list
  end
  return params
end

local FLOAT = { float32 = true, float64 = true, float16 = true, bfloat16 = true }
function U.is_float(t) return FLOAT[t.dtype] == true end

-- Name of a value's type for error messages: "Tensor (float32)", a module's class name, or the
-- Lua type.
function U.typename(v)
  if is_tensor(v) then return "Tensor" end
  if type(v) == "table" and U.is_module and U.is_module(v) then return v:type_name() end
  if math.type(v) then return math.type(v) == "integer" and "integer" or "number" end
  return type(v)
end

function U.sizes(t)
  local s = t:size()
  if type(s) ~= "table" then s = t.shape end
  return s
end

function U.shape_str(t)
  return "[" .. table.concat(U.sizes(t), ", ") .. "]"
end
function U.torch_size(t) return "torch.Size(" .. U.shape_str(t) .. ")" end
-- A size as x:size() prints it, "{4, 1}": where PyTorch's message shows torch.Size([4, 1]).
function U.size_str(t) return "{" .. table.concat(U.sizes(t), ", ") .. "}" end

function U.same_shape(a, b)
  if a:dim() ~= b:dim() then return false end
  local sa, sb = U.sizes(a), U.sizes(b)
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return true
end

-- A number or a table of n numbers -> table of n numbers (PyTorch's _pair/_single).
function U.ntuple(v, n, what)
  if type(v) == "number" then
    local t = {}
    for i = 1, n do t[i] = v end
    return t
  end
  if type(v) == "table" then
    if #v == 1 and n > 1 then
      local t = {}
      for i = 1, n do t[i] = v[1] end
      return t
    end
    if #v ~= n then
      error((what or "argument") .. ": expected a number or " .. n .. " numbers, got " .. #v, 3)
    end
    return { table.unpack(v, 1, n) }
  end
  error((what or "argument") .. ": expected a number or a table of numbers, got " .. type(v), 3)
end

-- "(3, 3)" / "(3,)" like a Python tuple.
function U.tuple_str(t)
  if type(t) ~= "table" then return tostring(t) end
  local parts = {}
  for i, v in ipairs(t) do parts[i] = U.num_str(v) end
  if #parts == 1 then return "(" .. parts[1] .. ",)" end
  return "(" .. table.concat(parts, ", ") .. ")"
end

-- Numbers printed as Python prints them: 0.1, 1e-05, 2, 0.5.
function U.num_str(v)
  if v == nil then return "None" end
  if type(v) == "boolean" then return v and "True" or "False" end
  if type(v) ~= "number" then return tostring(v) end
  if math.type(v) == "integer" then return tostring(v) end
  if v == math.floor(v) and math.abs(v) < 1e16 then return string.format("%.1f", v) end
  local s
  for prec = 1, 17 do
    s = string.format("%." .. prec .. "g", v)
    if tonumber(s) == v then break end
  end
  return s
end

function U.bool_str(b) return b and "True" or "False" end

-- Whether a trailing argument is an options table rather than a positional value given as a
-- table (a size such as {2, 2}): a plain table that is empty or has a key other than 1..n.
function U.is_options(v)
  if type(v) ~= "table" or getmetatable(v) ~= nil then return false end
  if next(v) == nil then return true end
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > #v then return true end
  end
  return false
end

-- Factory options of the layers that own parameters: {dtype = ..., device = ...}. Lantern's
-- tensors live on the cpu; another device is refused by the core's own check, naming the layer.
function U.factory(opts, where)
  local device = opts.device
  if device ~= nil and device ~= "cpu" then
    local ok, err = pcall(function() return lt.zeros(1):to(device) end)
    if not ok then
      error(where .. ": " .. tostring(err):gsub("^.-:%d+: ", ""), U.user_level())
    end
  end
  return { dtype = opts.dtype or "float32" }
end

-- The level of the caller's own line (outside Lantern) for `error`, counted from the function
-- that calls user_level.
function U.user_level() return (require("lantern.options").user_level(3) or 3) - 1 end

-- Reads an options table field with a type check.
function U.opt(opts, name, default, kind, where)
  if opts == nil then return default end
  local v = opts[name]
  if v == nil then return default end
  if kind and type(v) ~= kind then
    error((where or "nn") .. ": option '" .. name .. "' must be a " .. kind .. ", got " .. type(v), 3)
  end
  return v
end

function U.check_opts(opts, where)
  if opts ~= nil and type(opts) ~= "table" then
    error(where .. ": options must be a table, got " .. type(opts), 3)
  end
  return opts or {}
end

function U.check_tensor(v, where, what)
  if not is_tensor(v) then
    error(where .. ": expected " .. (what or "input") .. " to be a Tensor, got " .. U.typename(v), 3)
  end
  return v
end

function U.check_int(v, where, what, min)
  if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
    error(where .. ": " .. what .. " must be an integer, got " .. tostring(v), 3)
  end
  v = math.tointeger(v)
  if min and v < min then
    error(where .. ": " .. what .. " must be at least " .. min .. ", got " .. v, 3)
  end
  return v
end

return U
