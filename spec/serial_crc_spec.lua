-- The zip CRC-32 that lt.save writes and lt.load checks (src/serial/crc32.c folds with
-- carry-less multiplies, on 128 or 512 bits, where the CPU has them) is zlib's, whatever the
-- length, alignment and running value; and a checkpoint whose records span its folding
-- threshold loads back.
local lt = require "lantern"
local cc = require "c.ccutil"

describe("serial: the zip CRC-32", function()
  -- at each vector level: zlib alone (sse4), 128-bit folds (avx2), 512-bit folds (avx512,
  -- where the CPU has VPCLMULQDQ); for a level the CPU lacks Lantern says so on stderr and
  -- runs the highest it has
  it("equals zlib's on every length, offset and start value, at every vector level", function()
    local exe = cc.build("spec/c/crc32_check.c")
    for _, isa in ipairs { "sse4", "avx2", "avx512" } do
      local out, err, code = cc.run("/usr/bin/env", { "LANTERN_ISA=" .. isa, exe })
      assert.are.equal(0, code, isa .. ": " .. out .. err)
      assert.are.equal("ok\n", out, isa)
    end
    os.remove(exe)
  end)

  -- the table-driven CRC, computed here in Lua, over each stored entry lt.save wrote
  local tbl = {}
  for i = 0, 255 do
    local c = i
    for _ = 1, 8 do c = (c & 1 == 1) and (0xEDB88320 ~ (c >> 1)) or (c >> 1) end
    tbl[i] = c
  end
  local function crc32(s, i, j)
    local c = 0xFFFFFFFF
    for k = i, j do c = tbl[(c ~ s:byte(k)) & 0xff] ~ (c >> 8) end
    return c ~ 0xFFFFFFFF
  end

  it("is what lt.save writes for records short and long, and they load back", function()
    local path = os.tmpname()
    local sd = {}
    for i, n in ipairs { 1, 63, 64, 65, 255, 256, 257, 1000, 65536 + 7 } do
      sd["t" .. i] = lt.arange(1, n + 1):float()
    end
    lt.save(sd, path)
    local f = assert(io.open(path, "rb"))
    local z = f:read("a")
    f:close()
    local pos, seen = 1, 0
    while string.unpack("<I4", z, pos) == 0x04034b50 do
      local method, crc, csize = string.unpack("<I2", z, pos + 8), string.unpack("<I4", z, pos + 14),
        string.unpack("<I4", z, pos + 18)
      local nl, xl = string.unpack("<I2", z, pos + 26), string.unpack("<I2", z, pos + 28)
      local data = pos + 30 + nl + xl
      assert.are.equal(0, method)
      assert.are.equal(crc32(z, data, data + csize - 1), crc, z:sub(pos + 30, pos + 29 + nl))
      seen = seen + 1
      pos = data + csize
    end
    assert.is_true(seen >= 10)   -- data.pkl, the nine records, the version
    local back = lt.load(path)
    for k, v in pairs(sd) do assert.is_true(lt.equal(v, back[k]), k) end
    os.remove(path)
  end)
end)
