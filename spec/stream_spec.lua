-- Elementwise ops whose operands exceed half of L3 write their output with non-temporal
-- stores in blocks (src/cpu/stream.c). The threshold is lowered here (lt._stream_threshold) so
-- that rows of every shape take that path: each result must equal, bit for bit, the one the
-- ordinary stores give, whatever the output's alignment, the row's length, the dtype, the
-- operands' strides or the number of threads.
local lt = require "lantern"

local function bits_equal(a, b)
  -- NaN == NaN for this purpose; the ops below never make one from these inputs
  return a.dtype == b.dtype and lt.equal(a, b)
end

-- every case returns a fresh tensor; `inplace` ones write into a view of a bigger tensor
local function cases(n, dtype)
  lt.manual_seed(n)
  local a = lt.randn(n + 7, { dtype = dtype })
  local b = lt.randn(n + 7, { dtype = dtype })
  local m = lt.randn(n // 64, 64, { dtype = dtype })
  local bias = lt.randn(64, { dtype = dtype })
  local list = {}
  for off = 0, 3 do
    local x, y = a:narrow(1, 1 + off, n), b:narrow(1, 1 + off, n)
    list[#list + 1] = { "add+" .. off, function() return x + y end }
    -- dense float32 add, sub, mul and div stream from registers (AVX2 and up), the rest in blocks
    list[#list + 1] = { "sub+" .. off, function() return x - y end }
    list[#list + 1] = { "mul+" .. off, function() return x * y end }
    list[#list + 1] = { "div+" .. off, function() return x / y end }
    list[#list + 1] = { "mul scalar+" .. off, function() return x * 3 end }
    list[#list + 1] = { "exp+" .. off, function() return x:exp() end }
    list[#list + 1] = { "relu+" .. off, function() return x:relu() end }
    list[#list + 1] = { "add_ into view+" .. off, function()
      local d = lt.zeros(n + 7, { dtype = dtype })
      d:narrow(1, 1 + off, n):add_(y)
      return d
    end }
  end
  list[#list + 1] = { "bias down rows", function() return m + bias end }
  list[#list + 1] = { "strided input", function() return m:t() * 2 end }
  list[#list + 1] = { "sub from scalar", function() return 1 - a end }
  if dtype == "float32" then
    list[#list + 1] = { "gelu", function() return a:gelu() end }
    list[#list + 1] = { "tanh", function() return a:tanh() end }
  end
  return list
end

describe("streaming stores of large elementwise outputs", function()
  after_each(function()
    lt._stream_threshold(-1)
    lt.set_num_threads(1)
  end)

  it("has a threshold that can be read, set and restored", function()
    local dflt = lt._stream_threshold()
    assert.is_true(math.type(dflt) == "integer" and dflt >= 0)
    assert.are.equal(12345, lt._stream_threshold(12345))
    assert.are.equal(12345, lt._stream_threshold())
    assert.are.equal(dflt, lt._stream_threshold(-1))
    assert.has_error(function() lt._stream_threshold(-5) end)
  end)

  -- the L3 that counts is the one a core shares (the kernel's word for cpu0), not the whole
  -- chip's: glibc reports 384 MiB on the EPYC here, where a core reaches 32 MiB
  it("defaults to half of the L3 cpu0 shares, as the kernel reports it", function()
    local l3
    for i = 0, 7 do
      local f = io.open("/sys/devices/system/cpu/cpu0/cache/index" .. i .. "/level")
      if not f then break end
      local level = f:read("n")
      f:close()
      if level == 3 then
        local g = assert(io.open("/sys/devices/system/cpu/cpu0/cache/index" .. i .. "/size"))
        local num, unit = g:read("l"):match("^(%d+)([KM]?)")
        g:close()
        l3 = math.tointeger(num) * (unit == "K" and 1024 or unit == "M" and 1048576 or 1)
      end
    end
    if not l3 then   -- no sysfs: glibc's figure, as getconf prints it
      local g = io.popen("getconf LEVEL3_CACHE_SIZE 2>/dev/null")
      l3 = math.tointeger(tonumber(g:read("l") or "")) or 0
      g:close()
    end
    assert.are.equal(l3 // 2, lt._stream_threshold(-1))
  end)

  for _, dtype in ipairs { "float32", "float64" } do
    for _, n in ipairs { 32768, 32768 + 5, 100003, 262144 + 1000 } do
      for _, threads in ipairs { 1, 2 } do
        it(("gives the ordinary stores' bits: %s, %d elements, %d threads"):format(
            dtype, n, threads), function()
          lt.set_num_threads(threads)
          for _, c in ipairs(cases(n, dtype)) do
            lt._stream_threshold(0)
            local want = c[2]()
            lt._stream_threshold(1)
            local got = c[2]()
            assert(bits_equal(want, got), c[1] .. " differs when streamed")
          end
        end)
      end
    end
  end
end)
