-- The core's layers (docs/architecture.md): the base and graph recording run no op, the cpu
-- kernels call neither ops nor the graph, and the op layer reaches kernels only through the
-- table. Read from the sources, so a call across a layer fails here before it ships.
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  -- comments and strings say what they like
  return (s:gsub("/%*.-%*/", ""):gsub("//[^\n]*", ""):gsub('"[^"\n]*"', '""'))
end

local function files(pattern)
  local p = assert(io.popen("ls " .. pattern .. " 2>/dev/null"))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

-- The op layer's public functions: what include/lantern_ops.h declares.
local OPS = {}
for name in read("include/lantern_ops.h"):gmatch("\n[%w_ %*]-[%s%*](lt_[%w_]+)%(") do
  OPS[name] = true
end

-- The names of `prefix` (a Lua pattern) that src uses, and the lantern_ops.h functions it calls.
local function crossings(path, prefixes, no_ops)
  local src, bad = read(path), {}
  for id in src:gmatch("[%w_]+") do
    for _, p in ipairs(prefixes) do
      if id:match(p) then bad[#bad + 1] = id end
    end
    if no_ops and OPS[id] then bad[#bad + 1] = id end
  end
  table.sort(bad)
  local seen, out = {}, {}
  for _, b in ipairs(bad) do
    if not seen[b] then seen[b], out[#out + 1] = true, b end
  end
  return out
end

local BASE = { "src/tensor.c", "src/iter.c", "src/alloc.c", "src/parallel.c", "src/generator.c",
               "src/cpu_isa.c" }
local RECORDING = { "src/autograd.c", "src/autograd_views.c" }

describe("the core's layers", function()
  it("knows the op layer's functions", function()
    local n = 0
    for _ in pairs(OPS) do n = n + 1 end
    assert.is_true(n > 80, n .. " functions")
    assert.is_true(OPS.lt_binary and OPS.lt_reduce and OPS.lt_matmul and true or false)
  end)

  it("cpu kernels call no op, graph, device, serial or binding function", function()
    local list = files("src/cpu/*.c src/cpu/*.h")
    assert.is_true(#list > 10)
    for _, f in ipairs(list) do
      assert.are.same({}, crossings(f, { "^ltO_", "^ltG_", "^ltD_", "^ltS_", "^ltL_" }, true), f)
    end
  end)

  it("the base and graph recording run no op and call no kernel", function()
    for _, group in ipairs { BASE, RECORDING } do
      for _, f in ipairs(group) do
        assert.are.same({}, crossings(f, { "^ltO_", "^ltC_", "^ltS_", "^ltL_" }, true), f)
      end
    end
  end)

  -- device.c moves storages between devices and so hands their addresses to the tables
  it("the op layer reads and writes no tensor data", function()
    local skip = { ["src/device.c"] = true }
    for _, group in ipairs { BASE, RECORDING } do
      for _, f in ipairs(group) do skip[f] = true end
    end
    for _, f in ipairs(files("src/*.c")) do
      if not skip[f] then
        local src = read(f)
        assert.is_nil(src:match("lt_data%s*%(") or src:match("%->data[^_%w]"), f)
      end
    end
  end)

  it("the op layer reaches the cpu kernels only through the table", function()
    local skip = { ["src/backend.c"] = true, ["src/device.c"] = true, ["src/cpu_isa.c"] = true }
    local n = 0
    for _, f in ipairs(files("src/*.c")) do
      if not skip[f] then
        n = n + 1
        assert.are.same({}, crossings(f, { "^ltC_" }, false), f)
      end
    end
    assert.is_true(n > 20)
  end)
end)
