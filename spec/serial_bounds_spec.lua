-- Loaders are bounded by what a file really holds: a record whose declared size disagrees with
-- the storage that uses it is refused before anything is inflated or read, a deflate stream is
-- never inflated past its declared size, a legacy pickle that claims more bytes than the file
-- has fails without the file being read, and a safetensors file of a million tiny tensors
-- loads in memory proportional to its tensors. The hostile files are built here, in a
-- temporary directory, from files that lt.save writes.
local lt = require "lantern"

-- ------------------------------------------------------------ memory

local function status_kb(field)
  local f = assert(io.open("/proc/self/status"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)"))
end

-- How far resident memory rose above its level before fn ran (KiB), and fn's results. The
-- peak is reset first (/proc/self/clear_refs); where that is impossible and an earlier peak
-- hides fn's, the growth is nil.
local function peak_growth_kb(fn)
  collectgarbage()
  collectgarbage()
  local f = io.open("/proc/self/clear_refs", "w")
  local reset = f and f:write("5") and f:close()
  local before, hwm0 = status_kb("VmRSS"), status_kb("VmHWM")
  local r = table.pack(pcall(fn))
  local growth = status_kb("VmHWM") - before
  if not reset and hwm0 > before then growth = nil end
  return growth, table.unpack(r, 1, r.n)
end

local MiB = 1024   -- in KiB

-- ------------------------------------------------------------ deflate streams

-- Fixed-Huffman deflate (RFC 1951, 3.2.6): enough to write literal data and runs of zeros.
local function bitwriter()
  local w = { out = {}, acc = 0, n = 0 }
  function w.bits(v, k)   -- value of k bits, least significant first
    w.acc = w.acc | (v << w.n)
    w.n = w.n + k
    while w.n >= 8 do
      w.out[#w.out + 1] = string.char(w.acc & 0xff)
      w.acc = w.acc >> 8
      w.n = w.n - 8
    end
  end
  function w.code(c, k)   -- Huffman codes go most significant bit first
    local r = 0
    for i = 0, k - 1 do r = r | (((c >> i) & 1) << (k - 1 - i)) end
    w.bits(r, k)
  end
  function w.block(final) w.bits(final and 1 or 0, 1); w.bits(1, 2) end
  function w.lit(b) if b < 144 then w.code(0x30 + b, 8) else w.code(0x190 + b - 144, 9) end end
  function w.run258() w.code(0xc5, 8); w.code(0, 5) end   -- length 258 at distance 1
  function w.eob() w.code(0, 7) end
  function w.bytes() if w.n > 0 then w.bits(0, 8 - w.n) end return table.concat(w.out) end
  return w
end

local function deflate(s)
  local w = bitwriter()
  w.block(true)
  for i = 1, #s do w.lit(s:byte(i)) end
  w.eob()
  return w.bytes()
end

-- A stream of zeros about 158 times smaller than its output: a first block whose bit length
-- is a multiple of 8, then `reps` copies of one byte-aligned block of 8006 runs. Returns the
-- stream and the number of bytes it inflates to.
local function zeros_stream(reps)
  local a = bitwriter()
  a.block(false)
  a.lit(0)
  for _ = 1, 6 do a.run258() end
  a.eob()
  local b = bitwriter()
  b.block(false)
  for _ = 1, 8006 do b.run258() end
  b.eob()
  local c = bitwriter()
  c.block(true)
  c.eob()
  return a.bytes() .. b.bytes():rep(reps) .. c.bytes(), 1 + 258 * (6 + 8006 * reps)
end

local crc_table
local function crc32(s)
  if not crc_table then
    crc_table = {}
    for i = 0, 255 do
      local c = i
      for _ = 1, 8 do c = (c & 1 == 1) and (0xEDB88320 ~ (c >> 1)) or (c >> 1) end
      crc_table[i] = c
    end
  end
  local c = 0xffffffff
  for i = 1, #s do c = crc_table[(c ~ s:byte(i)) & 0xff] ~ (c >> 8) end
  return c ~ 0xffffffff
end

-- ------------------------------------------------------------ zip files

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- The entries {name=, data=} of a zip that lt.save wrote (zip64 end records, stored entries).
local function unzip(z)
  local e64 = assert(z:find("PK\6\6", 1, true), "no zip64 end record")
  local n, cd = string.unpack("<I8", z, e64 + 32), string.unpack("<I8", z, e64 + 48)
  local out, p = {}, cd + 1
  for _ = 1, n do
    local csize, _, nl, xl, cl = string.unpack("<I4I4I2I2I2", z, p + 20)
    local lho = string.unpack("<I4", z, p + 42)
    local lnl, lxl = string.unpack("<I2I2", z, lho + 27)
    local d0 = lho + 31 + lnl + lxl
    out[#out + 1] = { name = z:sub(p + 46, p + 45 + nl), data = z:sub(d0, d0 + csize - 1) }
    p = p + 46 + nl + xl + cl
  end
  return out
end

-- A classic zip of entries {name=, data=, method=0|8, usize=, crc=} (defaults: stored, the
-- data's own size and CRC).
local function zip(entries)
  local parts, cd, pos = {}, {}, 0
  for _, e in ipairs(entries) do
    local method, usize = e.method or 0, e.usize or #e.data
    local crc = e.crc or crc32(e.data)
    local lh = string.pack("<I4I2I2I2I2I2I4I4I4I2I2", 0x04034b50, 20, 0, method, 0, 0x21, crc,
      #e.data, usize, #e.name, 0) .. e.name
    cd[#cd + 1] = string.pack("<I4I2I2I2I2I2I2I4I4I4I2I2I2I2I2I4I4", 0x02014b50, 20, 20, 0,
      method, 0, 0x21, crc, #e.data, usize, #e.name, 0, 0, 0, 0, 0, pos) .. e.name
    parts[#parts + 1] = lh
    parts[#parts + 1] = e.data
    pos = pos + #lh + #e.data
  end
  local dir = table.concat(cd)
  parts[#parts + 1] = dir
  parts[#parts + 1] = string.pack("<I4I2I2I2I2I4I4I2", 0x06054b50, 0, 0, #entries, #entries,
    #dir, pos, 0)
  return table.concat(parts)
end

local function entry(entries, suffix)
  for _, e in ipairs(entries) do
    if e.name:sub(-#suffix) == suffix then return e end
  end
  error("no entry " .. suffix)
end

-- ------------------------------------------------------------ the spec

local dir

local function tmp(name) return dir .. "/" .. name end

-- A .pt of {w = 4 float32 values} whose entries `edit` may rewrite; returns its path.
local function rewritten(name, edit, obj)
  local path = tmp(name)
  lt.save(obj or { w = lt.tensor { 1, 2, 3, 4 }:float() }, path)
  local es = unzip(read(path))
  edit(es)
  write(path, zip(es))
  return path
end

local function raises(fn, ...)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  err = tostring(err)
  for _, frag in ipairs { ... } do
    assert(err:find(frag, 1, true), ("error %q does not mention %q"):format(err, frag))
  end
  return err
end

describe("serial: loaders are bounded by the file", function()
  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -m 700 '" .. dir .. "'"))
  end)

  teardown(function()
    if dir then os.execute("rm -rf '" .. dir .. "'") end
  end)

  it("refuses a deflated record that declares far more than its storage, inflating nothing",
    function()
      local stream, usize = zeros_stream(130)   -- 1.7 MB that inflate to 256 MiB
      local path = rewritten("bomb.pt", function(es)
        local e = entry(es, "/data/0")
        e.data, e.method, e.usize, e.crc = stream, 8, usize, 0
      end)
      for _, opts in ipairs { { verify_crc = false }, {} } do
        local growth, ok, err = peak_growth_kb(function() return lt.load(path, opts) end)
        assert.is_false(ok)
        assert.truthy(err:find("load: " .. path .. ": storage '0' needs 16 bytes (4 float32 "
          .. "elements) but its record archive/data/0 declares " .. usize, 1, true), err)
        assert.truthy(err:find("refusing to read a record larger than its storage", 1, true), err)
        if growth then
          assert(growth < 64 * MiB, ("peak RSS grew by %d KiB"):format(growth))
        end
      end
    end)

  it("stops inflating at the declared size when the stream runs longer", function()
    local stream = zeros_stream(130)
    local path = rewritten("long.pt", function(es)
      local e = entry(es, "/data/0")
      e.data, e.method, e.usize, e.crc = stream, 8, 16, crc32(("\0"):rep(16))
    end)
    local growth, ok, err = peak_growth_kb(function() return lt.load(path) end)
    assert.is_false(ok)
    assert.truthy(err:find("load: " .. path .. ": deflated zip entry archive/data/0 is corrupted "
      .. "(it inflates to more bytes than declared; its directory entry declares 16 bytes)", 1,
      true), err)
    if growth then assert(growth < 64 * MiB, ("peak RSS grew by %d KiB"):format(growth)) end
  end)

  it("refuses a byteorder record that declares more than 'little' or 'big'", function()
    local stream, usize = zeros_stream(130)
    local path = rewritten("byteorder.pt", function(es)
      local e = entry(es, "/byteorder")
      e.data, e.method, e.usize, e.crc = stream, 8, usize, 0
    end)
    local growth, ok, err = peak_growth_kb(function() return lt.load(path) end)
    assert.is_false(ok)
    assert.truthy(err:find("load: " .. path .. ": byteorder record archive/byteorder declares "
      .. usize .. " bytes (expected 'little' or 'big')", 1, true), err)
    if growth then assert(growth < 64 * MiB, ("peak RSS grew by %d KiB"):format(growth)) end
  end)

  it("refuses stored records larger or smaller than their storage", function()
    local big = rewritten("big.pt", function(es)
      local e = entry(es, "/data/0")
      e.data = e.data .. ("\0"):rep(16)
    end)
    raises(function() lt.load(big) end, "load: " .. big .. ": storage '0' needs 16 bytes "
      .. "(4 float32 elements) but its record archive/data/0 declares 32 (expected 16 plus at "
      .. "most one partial element")
    local short = rewritten("short.pt", function(es)
      local e = entry(es, "/data/0")
      e.data = e.data:sub(1, 12)
    end)
    raises(function() lt.load(short) end, "load: " .. short .. ": storage '0' needs 16 bytes "
      .. "(4 float32 elements) but its record holds only 12 (record archive/data/0)")
    -- PyTorch writes a typed storage's whole buffer and divides its byte count down to the
    -- storage's size, so up to one partial element more is a legitimate record
    local x = lt.load(rewritten("partial.pt", function(es)
      local e = entry(es, "/data/0")
      e.data = e.data .. "\7"
    end))
    assert.same({ 1, 2, 3, 4 }, x.w:tolist())
  end)

  it("loads a storage that its views use only part of", function()
    local base = lt.arange(10):float()
    local path = tmp("views.pt")
    lt.save({ a = base:narrow(1, 3, 2), b = base:narrow(1, 9, 1) }, path)
    local data = entry(unzip(read(path)), "/data/0").data
    assert.equal(40, #data)   -- the whole storage, as torch.save writes it
    local t = lt.load(path)
    assert.same({ 2, 3 }, t.a:tolist())
    assert.same({ 8 }, t.b:tolist())
    assert.equal(2, t.a:storage_offset())
    assert.equal(8, t.b:storage_offset())
  end)

  it("loads deflated records (data.pkl and storages) of the right sizes", function()
    local obj = { w = lt.tensor { { 1, 2, 3 }, { 4, 5, 6 } }, b = lt.tensor { 0.5, -1.5 },
                  n = lt.tensor { true, false, true } }
    local path = rewritten("deflated.pt", function(es)
      for _, e in ipairs(es) do
        if e.name:find("/data/", 1, true) or e.name:sub(-9) == "/data.pkl" then
          e.crc, e.usize = crc32(e.data), #e.data
          e.data, e.method = deflate(e.data), 8
        end
      end
    end, obj)
    for _, opts in ipairs { {}, { verify_crc = false } } do
      local t = lt.load(path, opts)
      assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t.w:tolist())
      assert.equal("int64", t.w.dtype)
      assert.same({ 0.5, -1.5 }, t.b:tolist())
      assert.same({ true, false, true }, t.n:tolist())
    end
    -- a stream shorter than its declared size is corrupted, not zero-filled
    local short = rewritten("deflated_short.pt", function(es)
      local e = entry(es, "/data/0")
      e.crc, e.usize = crc32(e.data), #e.data
      e.data, e.method = deflate(e.data:sub(1, 8)), 8
    end)
    raises(function() lt.load(short) end, "deflated zip entry archive/data/0 is corrupted "
      .. "(the data ends early")
  end)

  it("fails a legacy pickle that claims more bytes than the file, without reading the file",
    function()
      local path = tmp("legacy_claim.pt")
      local magic = string.char(0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19)
      local head = "\x80\x02\x8a\x0a" .. magic .. "." .. "\x80\x02M\xe9\x03." .. "\x80\x02}."
        .. "\x80\x02X\xff\xff\xff\x7f"   -- a 2 GiB string in a 64 MiB file
      local f = assert(io.open(path, "wb"))
      f:write(head)
      local zeros = ("\0"):rep(1 << 20)
      for _ = 1, 64 do f:write(zeros) end
      f:close()
      zeros = nil
      local growth, ok, err = peak_growth_kb(function() return lt.load(path) end)
      assert.is_false(ok)
      assert.truthy(err:find("load: pickle is truncated (legacy pickle", 1, true), err)
      if growth then assert(growth < 16 * MiB, ("peak RSS grew by %d KiB"):format(growth)) end
    end)

  it("loads a safetensors file of a million one-byte tensors in memory proportional to them #nosan",
    function()
      local n = 1000000
      local path = tmp("million.safetensors")
      local chunks, part, hlen = {}, {}, 0
      for i = 0, n - 1 do
        part[#part + 1] = ('%s"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}'):format(
          i == 0 and "{" or ",", i, i, i + 1)
        if #part == 50000 or i == n - 1 then
          chunks[#chunks + 1] = table.concat(part)
          hlen = hlen + #chunks[#chunks]
          part = {}
        end
      end
      local pad = (" "):rep((8 - (hlen + 1) % 8) % 8)
      local f = assert(io.open(path, "wb"))
      f:write(string.pack("<I8", hlen + 1 + #pad))
      for _, c in ipairs(chunks) do f:write(c) end
      f:write("}", pad)
      local cycle = {}
      for v = 0, 250 do cycle[#cycle + 1] = string.char(v) end
      f:write((table.concat(cycle):rep(n // 251 + 1)):sub(1, n))   -- tensor i holds i % 251
      f:close()
      chunks, part, cycle = nil, nil, nil

      local growth, ok, t = peak_growth_kb(function() return lt.safetensors.load(path) end)
      assert(ok, t)
      local count = 0
      for _ in next, t do count = count + 1 end
      assert.equal(n, count)
      local order = getmetatable(t).__order
      assert.equal(n, #order)
      assert.equal("t0", order[1])
      assert.equal("t999999", order[n])
      for _, i in ipairs { 0, 5, 250, 251, 123456, n - 1 } do
        local x = t["t" .. i]
        assert.equal("int64", x.dtype)
        assert.same({ 1 }, x:size())
        assert.equal(i % 251, x:item())
      end
      -- each tensor costs its Lua handle and name, its tensor and storage structs and a few
      -- dozen bytes of the loader's: about 700 bytes, where the loader took over 1.4 KB before
      -- it was bounded (the file holds 69 bytes a tensor)
      if growth then
        assert(growth < n, ("peak RSS grew by %d KiB for %d tensors"):format(growth, n))
      end
      t, order = nil, nil
      collectgarbage()
    end)
end)
