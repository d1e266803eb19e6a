-- lt.cuda and the CUDA plugin (src/cuda/, build/lantern/cuda.so). On a machine without a GPU
-- (these), the no-device behaviour: nothing crashes, lt.cuda says why, to("cuda") names what is
-- missing. With a device (LANTERN_DEVICE=cuda on the GPU machine, tools/gpu-check.sh), the
-- plugin's kernels against the cpu's. Tagged cuda; each half skips itself on the other machine.
local lt = require "lantern"
local support = require "support"

local here = (os.getenv("PWD") or ".")
local build = os.getenv("LANTERN_BUILD") or "build"

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- runs `bin/lantern -e code` with the plugin path env; its output
local function run_with_plugin(plugin, code)
  local cmd = string.format("LANTERN_CUDA_PLUGIN=%q bin/lantern -e %q 2>&1", plugin, code)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

local REASON = 'print(require("lantern").cuda.unavailable_reason())'

describe("lt.cuda #cuda", function()
  it("answers without loading anything at require time, and agrees with itself", function()
    local n = lt.cuda.device_count()
    assert.are.equal("integer", math.type(n))
    assert.are.equal(n > 0, lt.cuda.is_available())
    if n > 0 then
      assert.is_nil(lt.cuda.unavailable_reason())
    else
      assert.matches("^the CUDA", lt.cuda.unavailable_reason())
    end
  end)

  describe("without a CUDA device", function()
    if lt.cuda.is_available() then return end

    it("reports false, 0 and why; to(\"cuda\") names the same reason", function()
      assert.is_false(lt.cuda.is_available())
      assert.are.equal(0, lt.cuda.device_count())
      local why = lt.cuda.unavailable_reason()
      assert.is_string(why)
      local x = lt.ones(2)
      support.expect_error(function() x:to("cuda") end,
        "to: device 'cuda:0' is not available: Lantern's CUDA plugin is not loaded: " .. why)
      support.expect_error(function() lt.zeros(3, { device = "cuda:1" }) end,
        "zeros: device 'cuda:1' is not available: Lantern's CUDA plugin is not loaded: " .. why)
      assert.are.same({}, lt.cuda.memory_stats())
      lt.cuda.synchronize()   -- no-ops without a device
      lt.cuda.empty_cache()
      assert.are.same({ 1, 1 }, x:tolist(), "the cpu tensor is untouched")
    end)

    it("builds the plugin where nvcc is, and then it loads or says what the machine lacks",
      function()
        if not exists("/usr/local/cuda/bin/nvcc") then return pending("no nvcc here") end
        if build ~= "build" then return pending("sanitizer builds skip the plugin") end
        assert.is_true(exists(here .. "/build/lantern/cuda.so"), "make builds build/lantern/cuda.so")
        assert.matches("the CUDA runtime found no usable driver or device", lt.cuda.unavailable_reason(),
          1, true)
      end)

    it("says the plugin is not built, or not loadable, with its path", function()
      local out = run_with_plugin("/nonexistent/cuda.so", REASON)
      assert.matches("the CUDA plugin is not built (no /nonexistent/cuda.so; run `make cuda`", out,
        1, true)
      local bogus = os.tmpname()
      local f = assert(io.open(bogus, "w"))
      f:write("not an ELF file\n")
      f:close()
      out = run_with_plugin(bogus, REASON ..
        ' print(pcall(function() return require("lantern").ones(1):to("cuda") end))')
      os.remove(bogus)
      assert.matches("the CUDA plugin " .. bogus .. " could not be loaded", out, 1, true)
      assert.matches("false\tto: device 'cuda:0' is not available", out, 1, true)
      out = run_with_plugin("/usr/lib/x86_64-linux-gnu/libz.so.1", REASON)
      assert.matches("is not Lantern's CUDA plugin (no lantern_cuda_init)", out, 1, true)
    end)
  end)

  describe("on a CUDA device", function()
    if not lt.cuda.is_available() then return end

    it("moves tensors both ways and copies, fills, converts on the device", function()
      local x = lt.randn(3, 4)
      local d = x:to("cuda")
      assert.are.equal("cuda:0", d.device)
      assert.are.same(x:tolist(), d:cpu():tolist())
      assert.are.same(x:t():tolist(), d:t():contiguous():cpu():tolist())
      assert.are.same(x:double():tolist(), d:double():cpu():tolist())
      local z = lt.zeros(2, 3, { device = "cuda" })
      assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, z:cpu():tolist())
      z:fill_(2.5)
      assert.are.same({ { 2.5, 2.5, 2.5 }, { 2.5, 2.5, 2.5 } }, z:cpu():tolist())
    end)

    it("computes float32 elementwise ops as the cpu does", function()
      local a, b = lt.randn(64, 33), lt.randn(33)
      local da, db = a:to("cuda"), b:to("cuda")
      local function close(want, got)
        assert.is_true(lt.allclose(want, got:cpu(), 1e-5, 1e-6))
      end
      close(a + b, da + db)
      close(a * b, da * db)
      close(a - 2, da - 2)
      close(a / b, da / db)
      close(a:exp(), da:exp())
      close(a:tanh(), da:tanh())
      close(a:relu(), da:relu())
      local big = lt.randn(300, 300)
      close(big:sigmoid() * big, big:to("cuda"):sigmoid() * big:to("cuda"))
    end)

    it("raises '<op>: not implemented on cuda' for an entry without a kernel", function()
      local d = lt.randn(4, 4):to("cuda")
      support.expect_error(function() return d:sum() end, "not implemented on cuda")
      support.expect_error(function() return d:softmax(1):cpu() end,
        "softmax: not implemented on cuda")
      -- the pending failure is reported once; the device goes on working
      assert.are.same(lt.ones(2):tolist(), lt.ones(2):to("cuda"):cpu():tolist())
    end)

    it("reuses cached blocks", function()
      lt.cuda.synchronize()
      local before = lt.cuda.memory_stats()
      for _ = 1, 10 do
        local t = lt.zeros(1000, { device = "cuda" })
        t:free()
      end
      local after = lt.cuda.memory_stats()
      assert.is_true(after.num_cache_hits >= before.num_cache_hits + 9)
      lt.cuda.empty_cache()
      assert.is_true(lt.cuda.memory_stats().reserved_bytes <= after.reserved_bytes)
    end)
  end)
end)
