-- Fuzzing the readers: a few thousand randomly mutated copies of the fixtures go through
-- lt.load / lt.safetensors.load from memory. Each must either load (and then every tensor in
-- the result must be readable) or fail with the loader's own error message. Runs in the
-- sanitizer build too (`make check`), where a bad read or leak fails the suite. Seeded, so a
-- failure reproduces; FUZZ_SEED and FUZZ_N in the environment override the defaults.
local lt = require "lantern"
local U = require "serial_util"
local ser = require "lantern.serialization"

local SEED = tonumber(os.getenv("FUZZ_SEED") or "") or 20240607
local N = tonumber(os.getenv("FUZZ_N") or "") or 400   -- per file

local pt_files = { "mlp.pt", "views.pt", "nested.pt", "legacy.pt", "proto4.pt", "adam.pt",
  "deflated.pt", "dtypes.pt" }
local st_files = { "dtypes.safetensors", "mlp.safetensors" }

local function u16(s, i) return s:byte(i) | s:byte(i + 1) << 8 end
local function u32(s, i) return u16(s, i) | u16(s, i + 2) << 16 end

-- Byte range (1-based, inclusive) of the pickle inside a zip, or of the header of a
-- safetensors file: mutations aim there half of the time.
local function hot_range(bytes)
  if bytes:sub(1, 4) == "PK\3\4" then
    local nl, xl, size = u16(bytes, 27), u16(bytes, 29), u32(bytes, 19)
    local start = 31 + nl + xl
    if size == 0 then   -- sizes only in the central directory: take a guess
      size = math.min(#bytes - start, 512)
    end
    return start, math.min(start + size - 1, #bytes)
  elseif bytes:byte(1) == 0x80 then
    return 1, math.min(#bytes, 400)
  end
  local n = string.unpack("<I8", bytes)
  return 9, math.min(8 + n, #bytes)
end

local INTERESTING = { 0, 1, 0x7f, 0x80, 0xff, 0x28, 0x2e, 0x71, 0x68, 0x58, 0x4b, 0x8a }

local function mutate(bytes, rnd)
  local lo, hi = hot_range(bytes)
  local function pos()
    if rnd(2) == 1 and hi >= lo then return rnd(lo, hi) end
    return rnd(1, #bytes)
  end
  local b = bytes
  for _ = 1, rnd(1, 4) do
    if #b == 0 then break end
    local kind, i = rnd(7), pos()
    if i > #b then i = #b end
    if kind == 1 then       -- flip a bit
      b = b:sub(1, i - 1) .. string.char(b:byte(i) ~ (1 << rnd(0, 7))) .. b:sub(i + 1)
    elseif kind == 2 then   -- an interesting byte
      b = b:sub(1, i - 1) .. string.char(INTERESTING[rnd(#INTERESTING)]) .. b:sub(i + 1)
    elseif kind == 3 then   -- truncate
      b = b:sub(1, i - 1)
    elseif kind == 4 then   -- delete a chunk
      b = b:sub(1, i - 1) .. b:sub(i + rnd(1, 16))
    elseif kind == 5 then   -- insert random bytes
      local ins = {}
      for k = 1, rnd(1, 8) do ins[k] = string.char(rnd(0, 255)) end
      b = b:sub(1, i - 1) .. table.concat(ins) .. b:sub(i)
    elseif kind == 6 then   -- duplicate a chunk
      local j = math.min(#b, i + rnd(1, 32))
      b = b:sub(1, j) .. b:sub(i, j) .. b:sub(j + 1)
    else                    -- a big 32-bit little-endian number
      local v = ({ 0xffffffff, 0x7fffffff, 0x80000000, 0x10000, 1 << 20 })[rnd(5)]
      b = b:sub(1, i - 1) .. string.pack("<I4", v) .. b:sub(i + 4)
    end
  end
  return b
end

-- Touches every tensor reachable from v (reads all elements), guarding against cycles.
local function touch(v, seen)
  if lt.is_tensor(v) then
    if v:numel() <= 1 << 16 then U.flat(v) end
    return
  end
  if type(v) ~= "table" or seen[v] then return end
  seen[v] = true
  for k, x in next, v do touch(k, seen); touch(x, seen) end
end

local function run(files, loader, prefix)
  local rng = math.random
  math.randomseed(SEED)
  local stats = { ok = 0, err = 0 }
  for _, f in ipairs(files) do
    local bytes = U.read(U.path(f))
    for n = 1, N do
      local m = mutate(bytes, rng)
      local opts = { verify_crc = n % 2 == 0 }
      local ok, res = pcall(loader, m, opts)
      if ok then
        stats.ok = stats.ok + 1
        touch(res, {})
      else
        stats.err = stats.err + 1
        assert(type(res) == "string" and res:sub(1, #prefix) == prefix,
          ("%s mutation %d (seed %d): unexpected error %s"):format(f, n, SEED, tostring(res)))
      end
    end
  end
  return stats
end

describe("serial: fuzzing the readers #fuzz", function()
  it("survives mutated .pt files", function()
    local s = run(pt_files, ser.loads, "load: ")
    assert.is_true(s.err > 0 and s.ok > 0, "mutations should both break and spare files")
  end)

  it("survives mutated safetensors files", function()
    local s = run(st_files, ser.safetensors.loads, "safetensors.load: ")
    assert.is_true(s.err > 0)
  end)
end)
