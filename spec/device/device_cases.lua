-- Cases for the device entries of the table: how many devices there are, their memory, and
-- copies between a device and the host. The cpu is the host and fills only device_count; the
-- others are also run on the cpu machines through the mock device of spec/device_api_spec.lua.
local D = require "device.support"
local assert = require "luassert"   -- a required file does not see busted's assert
local lt, DEVICE, case, check, distinct, make = D.lt, D.DEVICE, D.case, D.check, D.distinct, D.make

local function kind(dev) return dev:match("^[^:]*") end

case("device_count", "tensors on every device of the kind, none past the last", function()
  local name = kind(DEVICE)
  local t = lt.zeros(2, { device = DEVICE })
  assert.are.equal(name == "cpu" and "cpu" or name .. ":0", t.device)
  if name ~= "cpu" then
    local ok, err = pcall(lt.zeros, 1, { device = name .. ":4096" })
    assert.is_false(ok)
    assert.matches("not available: %d+ " .. name .. " device", tostring(err))
  end
end)

-- the transfer entries, on a device that has them
local function transfers(what)
  return function()
    local vals = distinct(12)
    for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
      local x = make(vals, { 3, 4 }, "float64")
      x = dt == "bool" and x:gt(0) or x:to(dt)
      local want = D.values(x)
      local d = x:to(DEVICE)
      assert.are.equal(lt.device(DEVICE) == "cpu" and "cpu" or DEVICE:find(":") and DEVICE or
        DEVICE .. ":0", d.device)
      check(d:cpu(), { 3, 4 }, dt, want, 0, what .. " " .. dt)
      check(x:t():to(DEVICE):cpu(), { 4, 3 }, dt, D.values(x:t()), 0, what .. " transposed " .. dt)
      local back = lt.zeros(3, 4, { dtype = dt })
      back:copy_(d)
      check(back, { 3, 4 }, dt, want, 0, what .. " copy_ " .. dt)
    end
    local empty = lt.zeros(0, 3):to(DEVICE)
    assert.are.same({ 0, 3 }, empty:cpu().shape)
  end
end

for _, entry in ipairs({ "alloc", "release", "to_host", "from_host" }) do
  case(entry, "values through the host and back, every dtype, views, empty", transfers(entry))
end
