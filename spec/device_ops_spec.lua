-- The per-device op suite (`make test-device`, LANTERN_DEVICE=cpu by default; the normal suite
-- runs it too): every entry of the device's kernel table, reached through the ops that call it,
-- forward and backward over dtypes and layouts (empty, scalar, strided, broadcast,
-- non-contiguous) and edge values, against a reference computed here in plain Lua from the
-- inputs' tolist() values. Gradients are checked against central differences of the Lua
-- reference. A table entry with no case below fails the suite.
--
-- The helpers are in spec/device/support.lua; the cases in spec/device/*_cases.lua, one file per
-- family of kernels.
local D = require "device.support"
local lt, DEVICE, cases = D.lt, D.DEVICE, D.cases

local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local p = assert(io.popen("ls '" .. dir .. "/device'"))
for file in p:lines() do
  local name = file:match("^(.*_cases)%.lua$")
  if name then require("device." .. name) end
end
p:close()

-- ------------------------------------------------------------ the suite

describe("device ops #device (" .. DEVICE .. ")", function()
  it("has a case for every entry of the kernel table", function()
    local names, all = lt._kernel_names(DEVICE)
    assert.is_true(#names >= 14, "kernel table of " .. DEVICE .. " lists " .. #names .. " entries")
    local missing = {}
    for _, n in ipairs(names) do
      if not cases[n] then missing[#missing + 1] = n end
    end
    assert.are.equal("", table.concat(missing, ", "), "kernel entries without a case")
    -- a case may cover an entry this device leaves empty (the cpu has no transfers)
    local known = {}
    for _, n in ipairs(all) do known[n] = true end
    for n in pairs(cases) do assert.is_true(known[n], "a case for an unknown entry " .. n) end
  end)

  it("refuses an unknown device", function()
    local ok, err = pcall(lt._kernel_names, "tpu")
    assert.is_false(ok)
    assert.matches("unknown device 'tpu'", tostring(err))
  end)

  local entries = {}
  for n in pairs(cases) do entries[#entries + 1] = n end
  table.sort(entries)
  for _, n in ipairs(entries) do
    for _, c in ipairs(cases[n]) do
      it(n .. ": " .. c.name, c.fn)
    end
  end
end)
