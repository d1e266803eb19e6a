-- Runs the per-device op suite (spec/device_ops_spec.lua) inside spec/c/mock_device.c with
-- LANTERN_DEVICE=cuda, so every case also runs on a device whose memory is not the host's.
-- A minimal describe/it: prints "ok <name>" or "not ok <name>: <error>" per case and a total.
_G.assert = require "luassert"
local passed, failed = 0, 0
function _G.describe(_, fn) fn() end
function _G.it(name, fn)
  local ok, err = xpcall(fn, debug.traceback)
  if ok then
    passed = passed + 1
  else
    failed = failed + 1
    print("not ok " .. name .. ": " .. tostring(err))
  end
end
dofile(arg[1] or "spec/device_ops_spec.lua")
print(string.format("%d passed, %d failed", passed, failed))
