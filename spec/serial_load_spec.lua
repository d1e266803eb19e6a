-- lt.load / lt.safetensors.load on files written by PyTorch 1.13 (spec/fixtures/gen_serial.py):
-- values, dtypes, shapes, strides, offsets, storage sharing, containers and key order.
local lt = require "lantern"
local U = require "serial_util"
local ser = require "lantern.serialization"
local expected = require "fixtures.serial_expected"

describe("serial: lt.load of torch.save files", function()
  local names = {}
  for name in pairs(expected.files) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it("loads " .. name .. " as PyTorch wrote it", function()
      U.check(expected.files[name], lt.load(U.path(name)), name)
    end)
  end

  it("keeps views of one storage sharing memory, with their strides and offsets", function()
    local v = lt.load(U.path("views.pt"))
    assert.equal(lt._storage_id(v.base), lt._storage_id(v.t))
    assert.equal(lt._storage_id(v.base), lt._storage_id(v.cols))
    assert.same({ 1, 4 }, v.t:stride())
    assert.equal(4, v.row:storage_offset())
    assert.equal(1, v.cols:storage_offset())
    assert.same({ 0, 1 }, v.exp:stride())
    -- writing through one view shows in the others
    v.base:fill_(0)
    assert.same({ 0, 0, 0, 0 }, v.row:tolist())
    assert.same({ { 0, 0 }, { 0, 0 }, { 0, 0 } }, v.cols:tolist())
    assert.are_not.equal(lt._storage_id(v.base), lt._storage_id(v.alone))
    assert.equal(lt._storage_id(v.ia), lt._storage_id(v.ib))
  end)

  it("writes in place through a loaded view with interleaved strides, in bounds", function()
    -- sizes [2, 3, 4] with strides [12, 4, 3] on 30 elements: legal, non-overlapping, but
    -- dims 1-2 and 2-3 each look mergeable when compared with the wrong outer stride
    local p = U.tmpname()
    lt.save({ t = lt.arange(30):float():narrow(1, 1, 24):view(2, 3, 4), base_len = 30 }, p)
    local bytes = U.read(p)
    local patched, n = bytes:gsub("K\x0cK\x04K\x01\x87", "K\x0cK\x04K\x03\x87")
    assert.equal(1, n)
    U.write(p, patched)
    local w = lt.load(p, { verify_crc = false }).t
    U.cleanup()
    assert.same({ 12, 4, 3 }, w:stride())
    assert.equal(348, w:sum():item())
    w:fill_(7)
    assert.equal(7 * 24, w:sum():item())
    w:add_(1)
    assert.same({ 8, 8, 8, 8 }, w[2][3]:tolist())
    assert.equal(8 * 24, w:sum():item())
  end)

  it("converts float16/bfloat16 to float32 and small integers to int64, exactly", function()
    local d = lt.load(U.path("dtypes.pt"))
    assert.equal("float32", d.f16.dtype)
    assert.same({ 0.5, -1.0, 65504.0, 5.9604644775390625e-08, -math.huge, 0.0999755859375 },
      d.f16:tolist())
    assert.same({ 1.0, -3.140625, 1.0002555517425873e+30, 0.0078125 }, d.bf16:tolist())
    assert.equal("int64", d.i32.dtype)
    assert.same({ { 2147483647, -2147483648 }, { 7, -7 } }, d.i32:tolist())
    assert.same({ -128, 127, -1 }, d.i8:tolist())
    assert.same({ 0, 255, 128 }, d.u8:tolist())
    assert.same({ true, false, true }, d.bool:tolist())
    assert.equal(4.25, d.scalar:item())
    assert.same({ 0, 3 }, d.empty:size())
  end)

  it("maps file dtypes to other Lantern dtypes on request (map_dtype)", function()
    local d = lt.load(U.path("dtypes.pt"), { map_dtype = { float16 = "float64", uint8 = "float32",
      int32 = "float64", float32 = "float64" } })
    assert.equal("float64", d.f16.dtype)
    assert.equal(65504.0, d.f16:tolist()[3])
    assert.equal("float32", d.u8.dtype)
    assert.same({ 0, 255, 128 }, d.u8:tolist())
    assert.equal("float64", d.i32.dtype)
    assert.equal("float64", d.f32.dtype)
    assert.equal(1.5, d.f32:tolist()[1])
    assert.equal("float32", d.bf16.dtype)   -- not mapped: the default
    U.raises(function() lt.load(U.path("dtypes.pt"), { map_dtype = { float8 = "float32" } }) end,
      "load: map_dtype: unknown file dtype 'float8'")
    U.raises(function() lt.load(U.path("dtypes.pt"), { map_dtype = { float16 = "half" } }) end,
      "load: map_dtype: unknown Lantern dtype 'half'")
  end)

  it("turns Python containers into tagged Lua tables", function()
    local n = lt.load(U.path("nested.pt"))
    assert.equal(3, n.epoch)
    assert.equal("integer", math.type(n.epoch))
    assert.equal(0.5, n.lr)
    assert.equal("float", math.type(n.lr))
    assert.equal("list", getmetatable(n.flags).__name)
    assert.equal(ser.None, n.flags[3])
    assert.equal("tuple", getmetatable(n.tup).__name)
    assert.same({ 1, 2.5, "x" }, { n.tup[1], n.tup[2], n.tup[3] })
    assert.equal("int key", n.nested[1])    -- integer keys stay integers (0-based as in Python)
    assert.equal("zero key", n.nested[0])
    assert.is_nil(n.none)                   -- None values leave the key out
    assert.equal("\0\255ab", n.bytes)
    assert.equal(2 ^ 70, n.huge)            -- beyond 64 bits: a float
    assert.equal(n.same_twice[1], n.same_twice[2])   -- one Python object: one Lua value
    assert.equal("bottom", n.deep[1][1][1][1][1])
    assert.equal(0, #n.empty_tuple)
  end)

  it("reads an optimizer state_dict (int keys, tuples, floats, None, 0-dim step)", function()
    local a = lt.load(U.path("adam.pt"))
    local g = a.param_groups[1]
    assert.equal(0.01, g.lr)
    assert.equal("tuple", getmetatable(g.betas).__name)
    assert.same({ 0.9, 0.99 }, { g.betas[1], g.betas[2] })
    assert.same({ 0, 1, 2, 3 }, { g.params[1], g.params[2], g.params[3], g.params[4] })
    assert.is_false(g.amsgrad)
    assert.is_nil(g.foreach)
    local s0 = a.state[0]
    assert.equal(0, s0.step:dim())
    assert.equal(3, s0.step:item())
    assert.same({ 8, 5 }, s0.exp_avg:size())
    assert.same({ 3 }, a.state[3].exp_avg_sq:size())
  end)

  it("keeps state_dict order and _metadata so nn's load_state_dict sees them", function()
    local sd = lt.load(U.path("cnn.pt"))
    assert.same(expected.models.cnn.keys, U.keys(sd))
    local md = ser.metadata(sd)
    assert.equal(2, md["1"].version)    -- BatchNorm's _version
    assert.equal(1, md[""].version)
    assert.equal("int64", sd["1.num_batches_tracked"].dtype)
  end)

  it("reads a Parameter with requires_grad, and a bare legacy-format file", function()
    local p = lt.load(U.path("param.pt"))
    assert.is_true(p.requires_grad)
    local l = lt.load(U.path("legacy.pt"))
    assert.same({ 2.0, 3.0 }, l.v1:tolist())
    assert.equal(lt._storage_id(l.v1), lt._storage_id(l.v2))
  end)

  it("accepts deflated, unaligned, big-endian, protocol-4 and archive/-folder files", function()
    local ref = lt.load(U.path("views.pt"))
    for _, f in ipairs { "deflated.pt", "unaligned.pt", "bigendian.pt" } do
      local v = lt.load(U.path(f))
      for k, t in pairs(ref) do assert.same(t:tolist(), v[k]:tolist(), f .. " " .. k) end
    end
    assert.same({ 3, 1, 4 }, lt.load(U.path("archive.pt")).x:tolist())
    assert.same({ { 1, 2 } }, lt.load(U.path("proto4.pt")).w:tolist())
  end)

  it("loads from bytes in memory too (ser.loads)", function()
    local v = ser.loads(U.read(U.path("mlp.pt")))
    assert.same({ 8, 5 }, v["0.weight"]:size())
  end)

  it("can skip CRC checks but checks them by default", function()
    local b = U.read(U.path("archive.pt"))
    -- flip one byte of the x storage (3, 1, 4 as int64): its record follows a 64-byte boundary
    local i = b:find("\3\0\0\0\0\0\0\0\1\0\0\0", 1, true)
    assert.truthy(i)
    local bad = b:sub(1, i - 1) .. "\5" .. b:sub(i + 1)
    U.raises(function() ser.loads(bad) end, "CRC-32 mismatch", "storage '0'")
    assert.same({ 5, 1, 4 }, ser.loads(bad, { verify_crc = false }).x:tolist())
  end)
end)

describe("serial: lt.safetensors.load", function()
  it("reads every dtype and the metadata", function()
    local t, md = lt.safetensors.load(U.path("dtypes.safetensors"))
    U.check(expected.files["dtypes.safetensors"], t, "dtypes.safetensors")
    assert.same({ format = "pt" }, md)
  end)

  it("gives the same tensors as the .pt files of the models", function()
    for _, m in ipairs { "mlp", "cnn", "lstm", "transformer" } do
      local a = lt.load(U.path(m .. ".pt"))
      local b = lt.safetensors.load(U.path(m .. ".safetensors"))
      local n = 0
      for k, t in pairs(a) do
        n = n + 1
        assert.equal(t.dtype, b[k].dtype)
        assert.same(U.flat(t), U.flat(b[k]), m .. " " .. k)
      end
      assert.equal(n, #U.keys(b))
    end
  end)

  it("lt.load also opens safetensors files", function()
    local t = lt.load(U.path("mlp.safetensors"))
    assert.same({ 3 }, t["2.bias"]:size())
  end)
end)
