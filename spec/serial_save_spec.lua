-- lt.save / lt.safetensors.save / lt.save_module: round trips, the byte layout PyTorch expects,
-- atomic writes, and (where /usr/bin/python3 can import torch) PyTorch reading the files back.
local lt = require "lantern"
local U = require "serial_util"
local ser = require "lantern.serialization"

local function u16(s, i) return s:byte(i) | s:byte(i + 1) << 8 end
local function u32(s, i) return u16(s, i) | u16(s, i + 2) << 16 end

-- Walks the local headers of a zip: {name, data_offset (0-based), size} in file order.
local function zip_entries(bytes)
  local out, pos = {}, 1
  while bytes:sub(pos, pos + 3) == "PK\3\4" do
    local csize, nl, xl = u32(bytes, pos + 18), u16(bytes, pos + 26), u16(bytes, pos + 28)
    local name = bytes:sub(pos + 30, pos + 29 + nl)
    local data = pos - 1 + 30 + nl + xl
    out[#out + 1] = { name = name, offset = data, size = csize }
    pos = data + csize + 1
  end
  return out
end

-- A value exercising every kind the writer knows, with no floats (so that PyTorch 1.13's
-- weights_only loader accepts it).
local function sample_no_floats()
  local base = lt.arange(12, { dtype = "float32" }):reshape(3, 4)
  return {
    base = base,
    t = base:t(),
    row = base:select(1, 2),
    cols = base:narrow(2, 2, 2),
    f64 = lt.tensor({ { 1 / 3, -2.5 } }, { dtype = "float64" }),
    i64 = lt.tensor { math.maxinteger, math.mininteger, 0 },
    flags = lt.tensor { true, false, true },
    scalar = lt.tensor(7.5),
    empty = lt.zeros(0, 3),
    exp = lt.tensor({ 1, 2, 3 }, { dtype = "float32" }):expand(2, 3),
    n = 42,
    big = 1 << 40,
    neg = -70000,
    name = "run \u{2713}",
    ok = true,
    list = { 1, "two", ser.None, { 3, 4 } },
    tup = ser.tuple { 1, "x" },
    nested = { [0] = "zero", [5] = "five" },
    empty_list = ser.list {},
    empty_dict = {},
  }
end

describe("serial: lt.save", function()
  after_each(U.cleanup)

  it("round-trips values, dtypes, views and sharing through lt.load", function()
    local obj = sample_no_floats()
    obj.lr = 0.125
    local p = U.tmpname()
    lt.save(obj, p)
    local back = lt.load(p)
    U.same_value(obj, back)
    assert.same({ 1, 4 }, back.t:stride())
    assert.equal(1, back.cols:storage_offset())
    assert.equal(lt._storage_id(back.base), lt._storage_id(back.t))
    assert.equal(lt._storage_id(back.base), lt._storage_id(back.row))
    assert.are_not.equal(lt._storage_id(back.base), lt._storage_id(back.f64))
    assert.same({ 0, 1 }, back.exp:stride())
    assert.equal("list", getmetatable(back.list).__name)
    assert.equal("tuple", getmetatable(back.tup).__name)
    assert.equal("dict", getmetatable(back.nested).__name)
    assert.equal("float", math.type(back.lr))
  end)

  it("writes files of many MB whole (the disk is handed each 4 MiB as it is written)", function()
    -- records larger than a writeback stretch, and stretches that end inside a record, in
    -- both formats: every byte must come back where it was
    lt.manual_seed(4)
    local obj = { big = lt.randn(3 * 1048576 + 5), mid = lt.randn(1048576 + 7), small = lt.randn(3) }
    for _, ext in ipairs { ".pt", ".safetensors" } do
      local p = U.tmpname(ext)
      lt.save(obj, p)
      local back = lt.load(p)
      for k, v in pairs(obj) do
        assert.is_true(lt.equal(v, back[k]), ext .. " " .. k)
      end
    end
  end)

  it("writes PyTorch's zip layout: archive/ folder, 64-byte aligned records, zip64 end", function()
    local p = U.tmpname()
    local a = lt.tensor({ 1, 2, 3 }, { dtype = "float32" })
    lt.save({ a = a, b = a:narrow(1, 2, 2), c = lt.tensor { 5 } }, p)
    local bytes = U.read(p)
    local e = zip_entries(bytes)
    local names = {}
    for i, x in ipairs(e) do
      names[i] = x.name
      assert.equal(0, x.offset % 64, x.name .. " is not 64-byte aligned")
    end
    assert.same({ "archive/data.pkl", "archive/byteorder", "archive/data/0", "archive/data/1",
      "archive/version" }, names)
    assert.equal("little", bytes:sub(e[2].offset + 1, e[2].offset + e[2].size))
    assert.equal("3\n", bytes:sub(e[5].offset + 1, e[5].offset + e[5].size))
    assert.equal(12, e[3].size)          -- one record for the storage shared by a and b
    assert.truthy(bytes:find("PK\6\6", 1, true))   -- zip64 end of central directory
    assert.truthy(bytes:find("PK\6\7", 1, true))   -- and its locator
    local pkl = bytes:sub(e[1].offset + 1, e[1].offset + e[1].size)
    assert.equal("\128\2", pkl:sub(1, 2))            -- protocol 2
    assert.truthy(pkl:find("ccollections\nOrderedDict\n", 1, true))   -- a state_dict-like table
    assert.truthy(pkl:find("ctorch._utils\n_rebuild_tensor_v2\n", 1, true))
  end)

  it("tells lists from dicts and keeps None, bytes, cycles and shared tables", function()
    local p = U.tmpname()
    local shared = { 1, 2 }
    local cyc = {}
    cyc[1] = cyc
    lt.save({ shared, shared, { [1] = "a", [3] = "c" }, {}, "\255\0raw", cyc,
      { ser.None } }, p)
    local v = lt.load(p)
    assert.equal("list", getmetatable(v).__name)
    assert.equal(v[1], v[2])                          -- one object, written once
    assert.equal("dict", getmetatable(v[3]).__name)   -- keys 1 and 3: not 1..n
    assert.equal("c", v[3][3])
    assert.equal("dict", getmetatable(v[4]).__name)   -- an empty table is a dict
    assert.equal("\255\0raw", v[5])                   -- not UTF-8: saved as bytes
    assert.equal(v[6], v[6][1])                       -- a list that holds itself
    assert.equal(ser.None, v[7][1])
  end)

  it("keeps the order and _metadata of nn state_dicts", function()
    local nn = lt.nn
    local m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    local sd = m:state_dict()
    local p = U.tmpname()
    lt.save(sd, p)
    local back = lt.load(p)
    assert.same(U.keys(sd), U.keys(back))
    assert.equal(2, ser.metadata(back)["1"].version)
    local m2 = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    m2:load_state_dict(back)
    U.same_value(m:state_dict()["2.weight"], m2:state_dict()["2.weight"])
  end)

  it("sorts the keys of plain tables", function()
    local p = U.tmpname()
    lt.save({ b = 1, a = 2, [2] = "x", [1.5] = "y", c = 3 }, p)
    assert.same({ 1.5, 2, "a", "b", "c" }, U.keys(lt.load(p)))
  end)

  it("replaces files atomically and leaves the old file when a save fails", function()
    local p = U.tmpname()
    lt.save({ x = lt.tensor { 1 } }, p)
    lt.save({ x = lt.tensor { 2 } }, p)
    assert.same({ 2 }, lt.load(p).x:tolist())
    U.raises(function() lt.save({ x = lt.tensor { 3 }, f = print }, p) end,
      "save: cannot save a value of type function", '["f"]')
    assert.same({ 2 }, lt.load(p).x:tolist())
    -- no temporary file is left next to it
    local dir, base = p:match("^(.*)/([^/]*)$")
    local ls = io.popen("ls -a '" .. dir .. "'")
    for f in ls:lines() do
      assert.is_nil(f:find(base .. ".tmp", 1, true), "leftover " .. f)
    end
    ls:close()
    U.raises(function() lt.save({}, "/nonexistent-dir/x.pt") end,
      "save: cannot create a file next to '/nonexistent-dir/x.pt'")
  end)

  it("raises clear errors for values it cannot save", function()
    local p = U.tmpname()
    U.raises(function() lt.save(lt.nn.Linear(2, 2), p) end, "save: cannot save a Module",
      "state_dict")
    U.raises(function() lt.save({ [{}] = 1 }, p) end, "has a key of type table")
    local deep = {}
    local t = deep
    for _ = 1, 300 do t[1] = {}; t = t[1] end
    U.raises(function() lt.save(deep, p) end, "save: tables nested deeper than 200 levels")
    local tup = ser.tuple {}
    tup[1] = tup
    U.raises(function() lt.save(tup, p) end, "save: a tuple contains itself")
    U.raises(function() lt.save({}, 42) end, "save: path must be a string")
  end)
end)

describe("serial: lt.safetensors.save", function()
  after_each(U.cleanup)

  it("matches the reference implementation's test vectors byte for byte", function()
    local p = U.tmpname(".safetensors")
    lt.safetensors.save({}, p)
    assert.equal("\8\0\0\0\0\0\0\0{}      ", U.read(p))
    lt.safetensors.save({}, p, { framework = "pt" })
    assert.equal("\40\0\0\0\0\0\0\0" .. '{"__metadata__":{"framework":"pt"}}     ', U.read(p))
    lt.safetensors.save({ attn0 = lt.arange(6, { dtype = "float32" }):reshape(1, 1, 2, 3) }, p)
    local hdr = '{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       '
    assert.equal("\72\0\0\0\0\0\0\0" .. hdr .. string.pack("<ffffff", 0, 1, 2, 3, 4, 5), U.read(p))
  end)

  it("writes the model state_dicts exactly like the reference writer", function()
    for _, m in ipairs { "mlp", "cnn", "lstm", "transformer" } do
      local p = U.tmpname(".safetensors")
      local sd = lt.load(U.path(m .. ".pt"))
      local flat = {}
      for k, v in pairs(sd) do flat[k] = v end
      lt.safetensors.save(flat, p, { format = "pt" })
      assert.equal(U.read(U.path(m .. ".safetensors")), U.read(p), m)
    end
  end)

  it("sorts by dtype then name, makes views contiguous and copies shared tensors", function()
    local p = U.tmpname(".safetensors")
    local base = lt.arange(6, { dtype = "float32" }):reshape(2, 3)
    lt.safetensors.save({ z = base, a = base:t(), i = lt.tensor { 1, 2 }, b = lt.tensor { true },
      d = lt.tensor({ 0.5 }, { dtype = "float64" }) }, p, { b = "2", a = "1" })
    local s = U.read(p)
    local n = string.unpack("<I8", s)
    local hdr = s:sub(9, 8 + n)
    assert.equal('{"__metadata__":{"a":"1","b":"2"},"i":{"dtype":"I64","shape":[2],' ..
      '"data_offsets":[0,16]},"d":{"dtype":"F64","shape":[1],"data_offsets":[16,24]},' ..
      '"a":{"dtype":"F32","shape":[3,2],"data_offsets":[24,48]},"z":{"dtype":"F32",' ..
      '"shape":[2,3],"data_offsets":[48,72]},"b":{"dtype":"BOOL","shape":[1],' ..
      '"data_offsets":[72,73]}}', hdr:gsub(" +$", ""))
    local t, md = lt.safetensors.load(p)
    assert.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, t.a:tolist())
    assert.same({ a = "1", b = "2" }, md)
    assert.are_not.equal(lt._storage_id(t.a), lt._storage_id(t.z))
  end)

  it("lt.save picks safetensors by extension", function()
    local p = U.tmpname(".safetensors")
    lt.save({ w = lt.tensor { 1, 2 } }, p)
    local want = '\56\0\0\0\0\0\0\0{"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}} '
    assert.equal(want, U.read(p):sub(1, #want))
    assert.same({ 1, 2 }, lt.safetensors.load(p).w:tolist())
    U.raises(function() lt.save({ n = 1 }, p) end, "safetensors.save: value of 'n' is a number")
  end)

  it("rejects what safetensors cannot hold", function()
    local p = U.tmpname(".safetensors")
    U.raises(function() lt.safetensors.save({ x = 1 }, p) end,
      "safetensors.save: value of 'x' is a number, expected a tensor")
    U.raises(function() lt.safetensors.save({ lt.tensor { 1 } }, p) end,
      "safetensors.save: tensor names must be strings")
    U.raises(function() lt.safetensors.save({ x = lt.tensor { 1 } }, p, { v = 1 }) end,
      "safetensors.save: metadata keys and values must be strings")
  end)
end)

describe("serial: save_module / load_module", function()
  after_each(U.cleanup)

  it("saves and restores a module through .pt and .safetensors with key checking", function()
    local nn = lt.nn
    lt.manual_seed(1)
    local m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    local x = lt.randn(5, 4)
    for _, ext in ipairs { ".pt", ".pth", ".safetensors" } do
      local p = U.tmpname(ext)
      lt.save_module(m, p)
      local m2 = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
      lt.load_module(m2, p)
      U.same_value(m(x), m2(x), ext)
      local wrong = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 5))
      U.raises(function() lt.load_module(wrong, p) end, "size mismatch for 2.weight")
      local extra = nn.Sequential(nn.Linear(4, 3))
      U.raises(function() lt.load_module(extra, p) end, "Unexpected key(s) in state_dict:",
        '"2.weight"', '"2.bias"')
      local r = lt.load_module(extra, p, { strict = false })
      table.sort(r.unexpected_keys)
      assert.same({ "2.bias", "2.weight" }, r.unexpected_keys)
    end
    local p = U.tmpname(".safetensors")
    lt.save_module(m, p)
    local _, md = lt.safetensors.load(p)
    assert.same({ format = "pt" }, md)
  end)
end)

-- PyTorch reading what Lantern wrote, in one python run for all cases (importing torch is
-- the slow part). For each case the script loads the file with and without weights_only,
-- checks that both agree and that views still share memory, and saves what it loaded with
-- torch.save for Lantern to compare with the original; for the module case it loads a
-- Lantern state_dict into the same PyTorch model and saves the model's output.
local CHECK = [[
import sys, torch, torch.nn as nn

def same(x, y):
    if isinstance(x, torch.Tensor):
        return (isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape and
                x.stride() == y.stride() and x.storage_offset() == y.storage_offset() and
                bool((x == y).all() if x.numel() else True))
    if isinstance(x, dict):
        return type(x) == type(y) and list(x) == list(y) and all(same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return type(x) == type(y) and len(x) == len(y) and all(same(p, q) for p, q in zip(x, y))
    return type(x) == type(y) and x == y

def check_value(src, out, weights_only):
    a = torch.load(src)
    if weights_only:
        b = torch.load(src, weights_only=True)
        assert same(a, b), "weights_only load differs"
    if isinstance(a, dict) and "base" in a:
        ptr = a["base"].storage().data_ptr()
        assert a["t"].storage().data_ptr() == ptr and a["row"].storage().data_ptr() == ptr, "sharing"
        assert a["t"].stride() == (1, 4) and a["row"].storage_offset() == 4, "views"
        assert a["f64"].dtype == torch.float64 and a["i64"].dtype == torch.int64
        assert a["flags"].dtype == torch.bool and a["scalar"].dim() == 0
        assert isinstance(a["tup"], tuple) and isinstance(a["list"], list) and a["list"][2] is None
        assert a["nested"][0] == "zero" and a["name"] == "run \u2713"
    torch.save(a, out)

def check_model(sd_path, x_path, out):
    m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    m.load_state_dict(torch.load(sd_path, weights_only=True))
    x = torch.load(x_path, weights_only=True)["x"]
    with torch.no_grad():
        torch.save({"y": m(x)}, out)

args = sys.argv[1:]
for i in range(0, len(args), 4):
    kind, a1, a2, a3 = args[i:i + 4]
    try:
        if kind == "model":
            check_model(a1, a2, a3)
        else:
            check_value(a1, a2, kind == "weights_only")
        print("OK", i // 4)
    except Exception as e:
        print("FAIL", i // 4, repr(e))
]]

describe("serial: PyTorch reads Lantern's files", function()
  local has = U.has_torch()
  local cases, results = {}, nil

  local function add(name, kind, obj, extra)
    local c = { name = name, kind = kind, obj = obj, src = U.tmpname(), out = U.tmpname() }
    for k, v in pairs(extra or {}) do c[k] = v end
    cases[#cases + 1] = c
    return c
  end

  lt.manual_seed(3)
  local nn = lt.nn
  local model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
  local x = lt.randn(6, 4)
  add("no_floats", "weights_only", sample_no_floats())
  add("floats", "plain", { state = { [0] = { step = lt.tensor(3.0), exp_avg = lt.randn(2, 2) } },
    param_groups = { { lr = 0.001, betas = ser.tuple { 0.9, 0.999 }, eps = 1e-8,
      params = { 0 }, amsgrad = false } } })
  add("model", "model", nil, { xpath = U.tmpname() })

  -- writes every case, runs python once, and returns case name -> python's line
  local function run_all()
    if results then return results end
    local args = {}
    for _, c in ipairs(cases) do
      if c.kind == "model" then
        lt.save_module(model, c.src)
        lt.save({ x = x }, c.xpath)
        for _, a in ipairs { "model", c.src, c.xpath, c.out } do args[#args + 1] = a end
      else
        lt.save(c.obj, c.src)
        for _, a in ipairs { c.kind, c.src, c.out, "-" } do args[#args + 1] = a end
      end
    end
    local _, out = U.python(CHECK, table.unpack(args))
    results = {}
    for i, c in ipairs(cases) do
      results[c.name] = out:match("\n?(%u+ " .. (i - 1) .. "[^\n]*)") or out
    end
    return results
  end

  teardown(function()
    for _, c in ipairs(cases) do
      for _, f in ipairs { c.src, c.out, c.xpath } do os.remove(f) end
    end
    U.cleanup()
  end)

  local function case(name)
    for _, c in ipairs(cases) do if c.name == name then return c end end
  end

  it("torch.load and torch.load(weights_only=True) accept lt.save output", function()
    if not has then return pending("/usr/bin/python3 cannot import torch") end
    local r = run_all().no_floats
    assert(r:find("^OK"), r)
    U.same_value(case("no_floats").obj, lt.load(case("no_floats").out))
  end)

  it("torch.load accepts floats (optimizer-style state)", function()
    if not has then return pending("/usr/bin/python3 cannot import torch") end
    local r = run_all().floats
    assert(r:find("^OK"), r)
    U.same_value(case("floats").obj, lt.load(case("floats").out))
  end)

  it("a module saved by Lantern computes the same outputs in PyTorch", function()
    if not has then return pending("/usr/bin/python3 cannot import torch") end
    local r = run_all().model
    assert(r:find("^OK"), r)
    local y = lt.load(case("model").out).y
    assert.is_true(lt.allclose(y, model(x), 1e-5, 1e-6))
  end)
end)
