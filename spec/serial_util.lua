-- Helpers shared by spec/serial_*_spec.lua: fixture paths, reading files, comparing a loaded
-- value with its description in spec/fixtures/serial_expected.lua, temporary files and the
-- PyTorch probe.
local lt = require "lantern"
local assert = require "luassert"
local ser = require "lantern.serialization"

local U = {}

U.dir = "spec/fixtures/serial/"

function U.path(name) return U.dir .. name end

function U.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

function U.write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local tmps = {}
function U.tmpname(suffix)
  local n = os.tmpname()
  os.remove(n)
  n = n .. (suffix or ".pt")
  tmps[#tmps + 1] = n
  return n
end

function U.cleanup()
  for _, n in ipairs(tmps) do os.remove(n) end
  tmps = {}
end

-- Flat list of a tensor's values in C order.
function U.flat(t)
  if t:dim() == 0 then return { t:item() } end
  return t:reshape(-1):tolist()
end

-- The keys of a table in pairs() order.
function U.keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  return ks
end

local function same_number(a, b)
  if a ~= a then return b ~= b end
  return a == b and math.type(a) == math.type(b)
end

-- Compares a loaded value v with description d (see gen_serial.py). `share` maps the
-- description's storage groups to storage ids: tensors in one group must share memory, and
-- tensors of different groups must not.
function U.check(d, v, where, share)
  where = where or "value"
  share = share or { ids = {}, groups = {} }
  if type(d) ~= "table" then
    if type(d) == "number" then
      assert(type(v) == "number" and same_number(d, v),
        ("%s: expected %s %s, got %s %s"):format(where, math.type(d), tostring(d),
          math.type(v) or type(v), tostring(v)))
    else
      assert(d == v, ("%s: expected %s, got %s"):format(where, tostring(d), tostring(v)))
    end
    return
  end
  if d.__none then
    assert(v == nil or v == ser.None, where .. ": expected None")
  elseif d.__tensor then
    assert(lt.is_tensor(v), where .. ": expected a tensor, got " .. type(v))
    assert(v.dtype == d.dtype, ("%s: dtype %s, expected %s"):format(where, v.dtype, d.dtype))
    assert.same(d.shape, v:size(), where .. " shape")
    assert.same(d.stride, v:stride(), where .. " stride")
    assert(v:storage_offset() == d.offset, where .. ": storage offset " .. v:storage_offset())
    assert(v.requires_grad == d.requires_grad, where .. ": requires_grad")
    local got = U.flat(v)
    assert(#got == #d.values, where .. ": number of values")
    for i = 1, #got do
      local a, b = d.values[i], got[i]
      if d.dtype == "bool" then a = a == true or a == 1 end
      if d.dtype == "int64" then a = math.tointeger(a) end
      assert(a == b or (a ~= a and b ~= b),
        ("%s: value %d is %s, expected %s"):format(where, i, tostring(b), tostring(a)))
    end
    local id = lt._storage_id(v)
    if share.ids[d.storage] == nil then
      assert(share.groups[id] == nil, where .. ": shares memory with a tensor it should not")
      share.ids[d.storage], share.groups[id] = id, d.storage
    else
      assert(share.ids[d.storage] == id, where .. ": should share memory with an earlier view")
    end
  elseif d.__dict then
    assert(type(v) == "table", where .. ": expected a table, got " .. type(v))
    local order = {}
    for _, kv in ipairs(d.__dict) do
      local k, x = kv[1], kv[2]
      if not (type(x) == "table" and x.__none) then order[#order + 1] = k end
      U.check(x, v[k], where .. "[" .. tostring(k) .. "]", share)
    end
    assert.same(order, U.keys(v), where .. ": key order")
    if d.metadata then U.check(d.metadata, ser.metadata(v), where .. "._metadata", share) end
  elseif d.__list or d.__tuple then
    local items = d.__list or d.__tuple
    assert(type(v) == "table", where .. ": expected an array, got " .. type(v))
    assert(getmetatable(v).__name == (d.__list and "list" or "tuple"), where .. ": kind")
    assert(#v == d.n, where .. ": length " .. #v .. ", expected " .. d.n)
    for i = 1, d.n do
      local x = items[i]
      if type(x) == "table" and x.__none then
        assert(v[i] == ser.None, where .. "[" .. i .. "]: expected None")
      else
        U.check(x, v[i], where .. "[" .. i .. "]", share)
      end
    end
  else
    error(where .. ": bad description")
  end
end

-- Deep equality of two Lua values as the serialisers see them: tensors by dtype, shape,
-- strides and values; tables by keys and values (metatables ignored).
function U.same_value(a, b, where, seen)
  where = where or "value"
  seen = seen or {}
  if lt.is_tensor(a) then
    assert(lt.is_tensor(b), where .. ": expected a tensor, got " .. type(b))
    assert(a.dtype == b.dtype, ("%s: dtype %s vs %s"):format(where, a.dtype, b.dtype))
    assert.same(a:size(), b:size(), where .. " shape")
    assert.same(U.flat(a), U.flat(b), where .. " values")
    return
  end
  if type(a) ~= "table" or a == ser.None then
    if type(a) == "number" then
      assert(type(b) == "number" and same_number(a, b),
        ("%s: %s %s vs %s"):format(where, math.type(a), tostring(a), tostring(b)))
    else
      assert(a == b, ("%s: %s vs %s"):format(where, tostring(a), tostring(b)))
    end
    return
  end
  assert(type(b) == "table", where .. ": expected a table, got " .. type(b))
  if seen[a] then return end
  seen[a] = true
  local n = 0
  for k, v in next, a do
    n = n + 1
    U.same_value(v, rawget(b, k), where .. "[" .. tostring(k) .. "]", seen)
  end
  local m = 0
  for _ in next, b do m = m + 1 end
  assert(n == m, ("%s: %d keys vs %d"):format(where, n, m))
end

-- Python runs without the sanitizer runtime the suite may be preloaded with.
local PY = "env -u LD_PRELOAD -u ASAN_OPTIONS -u LSAN_OPTIONS /usr/bin/python3"

local torch_ok
function U.has_torch()
  if torch_ok == nil then
    torch_ok = os.execute(PY .. ' -c "import torch" >/dev/null 2>&1') == true
  end
  return torch_ok
end

-- Runs a python script (text) with arguments; returns ok, output.
function U.python(script, ...)
  local f = U.tmpname(".py")
  U.write(f, script)
  local args = { PY, f }
  for _, a in ipairs { ... } do args[#args + 1] = "'" .. a:gsub("'", "'\\''") .. "'" end
  local p = io.popen(table.concat(args, " ") .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return ok, out
end

-- Asserts that fn raises an error whose message contains every given fragment (plain text).
function U.raises(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error")
  err = tostring(err)
  for _, frag in ipairs { ... } do
    assert(err:find(frag, 1, true), ("error %q does not mention %q"):format(err, frag))
  end
  return err
end

return U
