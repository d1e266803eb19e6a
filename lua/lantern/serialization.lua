--- Checkpoints: PyTorch's `.pt` format and safetensors, read and written without Python.
--
-- * `lt.save(obj, path)` writes `obj` the way `torch.save` does (a zip holding a protocol-2
--   pickle and raw little-endian storages; a path ending in `.safetensors` writes a flat table
--   of tensors as safetensors instead); `torch.load(path)` and, when `obj` holds no
--   floating-point numbers (only tensors, ints, strings, bools, nil/None), also
--   `torch.load(path, weights_only=True)` of PyTorch 1.13 read it (2.x accepts floats too).
-- * `lt.load(path[, opts])` reads files written by `torch.save` (zip format, and the legacy
--   pre-1.6 stream) and safetensors files. The unpickler is restricted: it builds only
--   tensors, storages, dicts, lists, tuples and scalars and refuses any other global (such as
--   `os.system`) with an error naming it. Loading a file never runs code.
-- * `lt.safetensors.save(tensors, path[, metadata])` / `lt.safetensors.load(path[, opts])`
--   for flat tables of tensors (load returns the tensors and the metadata table or nil).
-- * `lt.save_module(m, path)` / `lt.load_module(m, path[, opts])` write and read a module's
--   state_dict, `.safetensors` by extension and `.pt` otherwise. Every writer is atomic: it
--   writes a temporary file beside `path` and renames it over `path`, so a crash mid-save
--   leaves the old file intact.
--
-- Values, file -> Lua:
--   dict / OrderedDict -> table (string or integer keys as in the file, e.g. optimizer state
--   `{[0] = ...}`); its metatable keeps the file's key order (`__order`, used by `pairs`) and a
--   state_dict's `_metadata` (`__metadata`). Keys whose value is None are absent.
--   list -> array (metatable __name "list"); tuple -> array (__name "tuple"); None inside a
--   list or tuple -> `lt.serialization.None`; None at the top -> nil.
--   int -> integer (beyond 64 bits: float); float -> float; str and bytes -> string;
--   torch.dtype -> its name.
--   Tensors keep shape, strides, storage offset and storage sharing (two views of one
--   storage in the file share memory after loading). float32/float64/int64/bool load as
--   themselves; float16 and bfloat16 load as float32; int32/int16/int8/uint8 (and
--   uint16/32/64 from safetensors) load as int64. `opts.map_dtype = {float16 = "float64",
--   uint8 = "float32", ...}` picks another Lantern dtype per file dtype.
--   `opts.verify_crc = false` skips the zip CRC-32 checks.
-- Values, Lua -> file:
--   tables tagged by a loaded metatable keep their kind (list, tuple, dict, OrderedDict);
--   untagged tables with keys exactly 1..n (n >= 1) become lists, others dicts (an
--   OrderedDict when every value is a tensor, i.e. a state_dict). Dict order: `pairs` order
--   for tables with a `__pairs` metamethod (`state_dict()` results, loaded dicts), otherwise keys
--   sorted (numbers, booleans, then strings). Lua floats become Python floats, integers ints,
--   strings str (bytes when not valid UTF-8), `lt.serialization.None` None.
-- @module lantern.serialization
local core = require "lantern.core"
local ordered_mod = require "lantern.ordered"
local check = require("lantern.options").check
local lt = package.loaded["lantern"] or core

local M = {}

--- The value that stands for Python's None inside lists and tuples.
M.None = setmetatable({}, { __name = "None", __tostring = function() return "None" end })

--- The metatable of a loaded Python list (`__name` `"list"`); `setmetatable(t,
-- lt.serialization.list_mt)` makes an array save as a list. `lt.serialization.tuple_mt` is
-- the same for tuples.
-- @table list_mt
M.list_mt = { __name = "list" }
M.tuple_mt = { __name = "tuple" }

local function make_dict(t, keys, meta, ordered)
  return ordered_mod.make(t, keys, meta, ordered and "OrderedDict" or "dict")
end

--- A new empty ordered dict (keys iterate in insertion order; saved as an OrderedDict).
-- @treturn table
function M.OrderedDict()
  return make_dict({}, {}, nil, true)
end

--- Tags an array as a Python tuple for saving.
-- @tab t
-- @treturn table t
function M.tuple(t) return setmetatable(t, M.tuple_mt) end
--- Tags an array as a Python list for saving (an empty one too).
-- @tab t
-- @treturn table t
function M.list(t) return setmetatable(t, M.list_mt) end
--- Tags a table as a plain Python dict for saving.
-- @tab t
-- @treturn table t
function M.dict(t) return make_dict(t, {}, nil, false) end

--- The file's `_metadata` of a loaded state_dict (module prefix -> `{version = n}`), or nil.
-- @tab t
-- @treturn ?table
function M.metadata(t)
  local mt = getmetatable(t)
  return type(mt) == "table" and mt.__metadata or nil
end

core._serial_setup { None = M.None, list_mt = M.list_mt, tuple_mt = M.tuple_mt,
  make_dict = make_dict }

local function check_path(op, path)
  if type(path) ~= "string" then
    error(op .. ": path must be a string, got " .. type(path), 3)
  end
end

local function is_safetensors(path)
  return path:lower():match("%.safetensors$") ~= nil
end

--- Writes `obj` to `path` in `torch.save`'s format (or, for a path ending in `.safetensors`,
-- a flat table of tensors as safetensors), atomically. Also `lt.save(obj, path)`.
-- @param obj tensors, tables of them, numbers, strings, booleans
-- @string path
-- @usage lt.save({model = model:state_dict(), step = 7}, "ckpt.pt")
function M.save(obj, path)
  check_path("save", path)
  if is_safetensors(path) and type(obj) == "table" then
    local flat = {}
    for k, v in pairs(obj) do flat[k] = v end
    return core._st_save(flat, path, nil)
  end
  core._serial_save(obj, path)
end

--- Reads a torch.save file (zip or legacy) or a safetensors file. See the module notes.
local LOAD_OPTS = { "map_dtype", "verify_crc", "map_location" }

-- Files are read on the host; `map_location` then moves every tensor of the value (a tensor
-- reached twice moves once, so shared entries stay shared; views of one storage become
-- separate tensors on the device).
local function split_location(op, opts)
  if type(opts) ~= "table" or opts.map_location == nil then return opts, nil end
  local loc = opts.map_location
  if type(loc) ~= "string" then
    error(op .. ": map_location must be a device name such as \"cpu\" or \"cuda\", got " ..
      type(loc), 3)
  end
  lt.device(loc)   -- an unknown name fails before the file is read
  local rest = {}
  for k, v in pairs(opts) do
    if k ~= "map_location" then rest[k] = v end
  end
  return rest, loc
end

local function move_all(v, loc, memo)
  if lt.is_tensor(v) then
    if memo[v] == nil then memo[v] = v:to(loc) end
    return memo[v]
  end
  if type(v) ~= "table" or memo[v] then return v end
  memo[v] = true
  for k, x in pairs(v) do rawset(v, k, move_all(x, loc, memo)) end
  return v
end

local function placed(value, loc)
  if loc == nil or lt.device(loc) == "cpu" then return value end
  return move_all(value, loc, {})
end

--- Reads a `torch.save` file (zip or legacy) or a safetensors file; see the module notes for
-- how values map. Also `lt.load(path, opts)`.
-- @string path
-- @tparam[opt] table opts `map_dtype` (file dtype -> Lantern dtype, e.g.
-- `{float16 = "float64"}`), `verify_crc` (true), `map_location` (a device name: every tensor
-- is moved there after reading; default: the cpu)
-- @return the value
-- @usage local sd = lt.load("resnet18.pth")
function M.load(path, opts)
  check_path("load", path)
  check("load", opts, LOAD_OPTS)
  local rest, loc = split_location("load", opts)
  return placed(core._serial_load(path, nil, rest), loc)
end

--- Like `load`, from the bytes of a file held in a string.
-- @string bytes
-- @tparam[opt] table opts as load's
-- @return the value
function M.loads(bytes, opts)
  if type(bytes) ~= "string" then error("loads: bytes must be a string", 2) end
  check("loads", opts, LOAD_OPTS)
  local rest, loc = split_location("loads", opts)
  return placed(core._serial_load(nil, bytes, rest), loc)
end

M.safetensors = {}

--- Writes a flat table name -> tensor (and optional string -> string metadata) as
-- safetensors, byte for byte as the reference implementation does. Also
-- `lt.safetensors.save(tensors, path, metadata)`.
-- @tab tensors
-- @string path
-- @tab[opt] metadata
function M.safetensors.save(tensors, path, metadata)
  check_path("safetensors.save", path)
  if type(tensors) ~= "table" then
    error("safetensors.save: tensors must be a table of name -> tensor, got " .. type(tensors), 2)
  end
  core._st_save(tensors, path, metadata)
end

--- Reads a safetensors file (every check of the reference implementation is made).
-- @string path
-- @tparam[opt] table opts `map_dtype`
-- @return the tensors by name (in file order)
-- @return the metadata table, or nil
function M.safetensors.load(path, opts)
  check_path("safetensors.load", path)
  check("safetensors.load", opts, LOAD_OPTS)
  return core._st_load(path, nil, opts)
end

--- Like `safetensors.load`, from bytes in a string.
-- @string bytes
-- @tparam[opt] table opts
-- @return the tensors, and the metadata or nil
function M.safetensors.loads(bytes, opts)
  if type(bytes) ~= "string" then error("safetensors.loads: bytes must be a string", 2) end
  check("safetensors.loads", opts, LOAD_OPTS)
  return core._st_load(nil, bytes, opts)
end

--- Saves `m:state_dict()` to `path` (`.safetensors` by extension, else `.pt`), atomically:
-- an unnamed temporary file (O_TMPFILE on Linux) named only at the rename, so a save killed
-- midway leaves nothing behind. Also `lt.save_module(m, path)`.
-- @param m a Module
-- @string path
function M.save_module(m, path)
  check_path("save_module", path)
  if type(m) ~= "table" or type(m.state_dict) ~= "function" then
    error("save_module: expected a Module, got " .. type(m), 2)
  end
  local sd = m:state_dict()
  if is_safetensors(path) then
    local flat = {}
    for k, v in pairs(sd) do flat[k] = v end
    core._st_save(flat, path, { format = "pt" })
  else
    core._serial_save(sd, path)
  end
end

--- Loads a state_dict from `path` into `m` with `m:load_state_dict` (full key checking:
-- missing, unexpected and mis-shaped keys raise). Also `lt.load_module(m, path, opts)`.
-- @param m a Module
-- @string path
-- @tparam[opt] table opts `strict` (true; false returns the missing and unexpected keys),
-- `map_dtype`, `verify_crc`
-- @return `{missing_keys=, unexpected_keys=}`
function M.load_module(m, path, opts)
  check_path("load_module", path)
  if type(m) ~= "table" or type(m.load_state_dict) ~= "function" then
    error("load_module: expected a Module, got " .. type(m), 2)
  end
  opts = check("load_module", opts, { "strict", "map_dtype", "verify_crc" })
  local lopts = { map_dtype = opts.map_dtype, verify_crc = opts.verify_crc }
  local sd
  if is_safetensors(path) then
    sd = core._st_load(path, nil, lopts)
  else
    sd = core._serial_load(path, nil, lopts)
  end
  if type(sd) ~= "table" then
    error("load_module: " .. path .. " does not hold a state_dict (got " .. type(sd) .. ")", 2)
  end
  local strict = true
  if opts.strict ~= nil then strict = opts.strict end
  return m:load_state_dict(sd, strict)
end

-- install into lantern
if type(lt) == "table" then
  rawset(lt, "serialization", M)
  rawset(lt, "save", M.save)
  rawset(lt, "load", M.load)
  rawset(lt, "safetensors", M.safetensors)
  rawset(lt, "save_module", M.save_module)
  rawset(lt, "load_module", M.load_module)
end

return M
