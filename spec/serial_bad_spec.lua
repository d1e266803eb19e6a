-- Hostile and broken files: every one gives a clear error naming the loader, never a crash,
-- and loading never runs code.
local lt = require "lantern"
local U = require "serial_util"
local ser = require "lantern.serialization"

local function bad(name) return U.dir .. "bad/" .. name end

-- safetensors bytes from a header (string) and a data buffer
local function st(header, data)
  return string.pack("<I8", #header) .. header .. (data or "")
end

local F32x2 = string.pack("<ff", 1, 2)

describe("serial: hostile .pt files", function()
  it("refuses a pickle that names os.system, without running it", function()
    U.raises(function() lt.load(bad("os_system.pt")) end,
      "load: pickle refers to forbidden global 'os.system'", "loading never runs code")
    U.raises(function() lt.load(bad("builtins_eval.pt")) end, "'builtins.eval'")
  end)

  it("explains that a whole pickled model cannot be loaded", function()
    U.raises(function() lt.load(bad("whole_model.pt")) end,
      "forbidden global 'torch.nn.modules.linear.Linear'", "save its state_dict() instead")
  end)

  it("refuses opcodes outside the data-only set, naming them", function()
    U.raises(function() lt.load(bad("inst.pt")) end, "load: unsupported pickle opcode 0x69 (INST)")
  end)

  it("rejects tensors whose storage is too small, short records and huge sizes", function()
    U.raises(function() lt.load(bad("storage_too_small.pt")) end,
      "load: tensor of shape [10]", "storage too small")
    U.raises(function() lt.load(bad("record_short.pt")) end,
      "load:", "storage '0' needs 40 bytes (10 float32 elements) but its record holds only 8")
    U.raises(function() lt.load(bad("huge_numel.pt")) end, "load:", "storage '0' declares",
      "4611686018427387904")
    U.raises(function() lt.load(bad("huge_shape.pt")) end, "load:", "[1099511627776, 1099511627776]")
    U.raises(function() lt.load(bad("missing_record.pt")) end,
      "load:", "storage '0' has no record archive/data/0")
  end)

  it("recognises TorchScript archives", function()
    U.raises(function() lt.load(bad("torchscript.pt")) end, "is a TorchScript archive")
  end)

  it("reports truncated files", function()
    local b = U.read(U.path("mlp.pt"))
    for _, n in ipairs { #b - 1, #b - 30, #b // 2, 100, 3, 0 } do
      local err = U.raises(function() ser.loads(b:sub(1, n)) end, "load: ")
      assert.truthy(err:find("truncated") or err:find("not a zip") or err:find("empty")
        or err:find("corrupted"), err)
    end
    local l = U.read(U.path("legacy.pt"))
    for _, n in ipairs { #l - 1, #l - 9, 40 } do
      U.raises(function() ser.loads(l:sub(1, n)) end, "load: ", "truncated")
    end
  end)

  it("reports a corrupted zip directory", function()
    local b = U.read(U.path("mlp.pt"))
    local cd = b:find("PK\1\2", 1, true)
    -- the local-header offset of the first central entry points past the end of the file
    local c1 = b:sub(1, cd + 41) .. string.pack("<I4", 0x7fffff00) .. b:sub(cd + 46)
    U.raises(function() ser.loads(c1) end, "load: ", "corrupted zip directory")
    -- a broken central-directory signature
    local c2 = b:sub(1, cd - 1) .. "PK\9\9" .. b:sub(cd + 4)
    U.raises(function() ser.loads(c2) end, "load: ", "corrupted zip directory")
    -- the zip64 end record claims a central directory beyond the file
    local z = b:find("PK\6\6", 1, true)
    local c3 = b:sub(1, z + 47) .. string.pack("<I8", 1 << 50) .. b:sub(z + 56)
    U.raises(function() ser.loads(c3) end, "load: ", "corrupted zip directory")
    -- sizes in the directory larger than the file
    local c4 = b:sub(1, cd + 19) .. string.pack("<I4I4", 0x7fffffff, 0x7fffffff) .. b:sub(cd + 28)
    U.raises(function() ser.loads(c4) end, "load: ")
  end)

  it("rejects files that are not checkpoints at all", function()
    U.raises(function() ser.loads("hello world, this is text") end,
      "load: <bytes> is not a PyTorch checkpoint")
    U.raises(function() lt.load("/nonexistent/file.pt") end, "load: cannot open '/nonexistent/file.pt'")
    U.raises(function() lt.load("spec") end, "load: cannot read 'spec'")
    -- a legacy-looking stream without the magic number
    U.raises(function() ser.loads("\128\2K\1.") end, "load: ", "legacy magic number")
  end)
end)

describe("serial: hostile safetensors files", function()
  local function sl(bytes) return function() ser.safetensors.loads(bytes) end end

  it("rejects overlapping, out-of-range, holed and trailing offsets", function()
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},' ..
      '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}', F32x2 .. "\0\0\0\0")),
      "safetensors.load: ", "tensor 'b' has data_offsets [4, 12] but the previous tensor ends at 8")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', "\0\0\0\0")),
      "safetensors.load: ", "tensors cover 8 bytes but the data buffer holds 4",
      "out of range")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},' ..
      '"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}', F32x2 .. "\0\0\0\0")),
      "tensor 'b' has data_offsets [8, 12]")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', F32x2 .. "\0")),
      "trailing bytes")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', F32x2)),
      "tensor 'a' has data_offsets [8, 0]")
  end)

  it("rejects sizes that do not match the shape, and huge declared sizes", function()
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', F32x2)),
      "tensor 'a' of dtype F32 and shape [3] needs 12 bytes but its data_offsets [0, 8] span 8")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[1099511627776,1099511627776,1099511627776],' ..
      '"data_offsets":[0,8]}}', F32x2)), "overflows (huge declared size)")
    U.raises(sl(string.pack("<I8", 1 << 62) .. "{}"), "header length 4611686018427387904 exceeds the limit")
    U.raises(sl(string.pack("<I8", 1000) .. "{}"), "header length 1000 exceeds the file size")
    U.raises(sl("\1\2\3"), "file too small")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[99999999999999999999999],"data_offsets":[0,8]}}',
      F32x2)), "integer too large")
  end)

  it("rejects bad headers: metadata, dtypes, JSON, UTF-8, duplicates", function()
    U.raises(sl(st('{"__metadata__":{"a":1}}')), "__metadata__ value of 'a' is not a string")
    U.raises(sl(st('{"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}}', F32x2)),
      "tensor 'a' has unknown dtype 'F7'")
    U.raises(sl(st('{"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}}', F32x2)),
      "tensor 'a' has unsupported dtype 'F8_E4M3'")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}', F32x2)),
      "invalid header JSON")
    U.raises(sl(st(' {"a":1}')), "header does not start with '{'")
    U.raises(sl(st('{"\255":1}')), "header is not valid UTF-8")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},' ..
      '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', F32x2)), "tensor name 'a' appears twice")
    U.raises(sl(st('{"a":{"dtype":"F32","data_offsets":[0,8]}}', F32x2)), "tensor 'a' lacks a shape")
    U.raises(sl(st('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x', F32x2)),
      "trailing characters")
  end)

  it("accepts what the format allows: escapes, unknown fields, empty and 0-dim tensors", function()
    local t, md = ser.safetensors.loads(st('{"__metadata__":{"k\\u00e9":"v\\n"},' ..
      '"s\\"q":{"dtype":"F32","shape":[],"data_offsets":[0,4],"extra":[1,{"x":null}]},' ..
      '"e":{"dtype":"I64","shape":[0,3],"data_offsets":[4,4]}}   ', string.pack("<f", 2.5)))
    assert.equal(2.5, t['s"q']:item())
    assert.same({ 0, 3 }, t.e:size())
    assert.same({ ["k\u{e9}"] = "v\n" }, md)
  end)
end)
