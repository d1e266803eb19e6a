-- Run by spec/c/mock_device.c (see spec/device_api_spec.lua): the device API on a mock "cuda"
-- with two devices whose memory is its own. Prints one "ok <name>" line per check; any failure
-- raises, and the host exits non-zero.
local lt = require "lantern"
local nn = lt.nn

local function check(name, fn)
  fn()
  print("ok " .. name)
end

local function same(a, b, what)
  local x, y = a.device == "cpu" and a or a:cpu(), b.device == "cpu" and b or b:cpu()
  assert(x.dtype == y.dtype, what .. ": dtype " .. x.dtype .. " vs " .. y.dtype)
  assert(lt.equal(x, y), what .. ": values differ:\n" .. tostring(x) .. "\n" .. tostring(y))
end

local function raises(fn, text)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error containing " .. text)
  err = tostring(err)
  assert(err:find(text, 1, true), "error '" .. err .. "' lacks '" .. text .. "'")
end

lt.manual_seed(1)

check("names", function()
  assert(lt.zeros(2, 3, { device = "cuda" }).device == "cuda:0")
  assert(lt.zeros(2, { device = "cuda:1" }).device == "cuda:1")
  assert(lt.ones(2):to("cuda:1").device == "cuda:1")
  raises(function() lt.zeros(2, { device = "cuda:2" }) end,
    "zeros: device 'cuda:2' is not available: 2 cuda devices present")
  raises(function() lt.zeros(2):to("tpu") end, "to: unknown dtype or device 'tpu'")
end)

check("round trip", function()
  for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
    local x = (lt.randn(3, 4) * 3):to(dt)
    local y = x:to("cuda")
    assert(y.device == "cuda:0" and y.dtype == dt)
    same(y:cpu(), x, "round trip " .. dt)
    same(x:t():to("cuda"):cpu(), x:t(), "non-contiguous " .. dt)
    same(x:to("cuda"):to("cuda:1"):cpu(), x, "device to device " .. dt)
  end
  local x = lt.randn(2, 5)
  same(x:to("cuda", "float64"):cpu(), x:double(), "dtype with the move")
  same(x:to({ device = "cuda", dtype = "float64" }):cpu(), x:double(), "options table")
  local y = x:to("cuda")
  assert(rawequal(y:to("cuda:0"), y), "to() of a tensor already there returns it")
end)

check("ops stay on the device", function()
  local x, w = lt.randn(4, 3), lt.randn(3, 2)
  local cx, cw = x:to("cuda"), w:to("cuda")
  local r = (cx * 2 + 1):matmul(cw):softmax(2)
  assert(r.device == "cuda:0")
  same(r, (x * 2 + 1):matmul(w):softmax(2), "chain")
  same(cx:sum(1), x:sum(1), "sum")
  assert(math.abs(cx:sum():item() - x:sum():item()) < 1e-5, "item through the host")
  same(lt.cat({ cx, cx }, 1), lt.cat({ x, x }, 1), "cat")
  same(cx:argmax(2), x:argmax(2), "argmax")
  same(cx:cumsum(1), x:cumsum(1), "cumsum")
  same(lt.where(cx:gt(0), cx, cx * 0), lt.where(x:gt(0), x, x * 0), "where")
  local s = tostring(cx)
  assert(s:find("device='cuda:0'", 1, true), s)
  assert(#cx:tolist() == 4)
end)

check("mixing devices", function()
  local a, b = lt.ones(3), lt.ones(3):to("cuda")
  local text = "Expected all tensors to be on the same device, but found at least two devices, "
  raises(function() return a + b end, "add: " .. text .. "cpu and cuda:0!")
  raises(function() return b * a end, text .. "cuda:0 and cpu!")
  raises(function() return b + lt.ones(3):to("cuda:1") end, "cuda:0 and cuda:1!")
  raises(function() return lt.ones(2, 3):matmul(lt.ones(3, 2):to("cuda")) end, text)
  raises(function() return lt.cat({ a, b }) end, "cat: " .. text)
  raises(function() return lt.stack({ b, a }) end, "stack: " .. text)
  raises(function() return lt.where(a:gt(0), a, b) end, "where: " .. text)
  -- a number stays a number whatever the device
  same(b + 1, a + 1, "number operand")
end)

check("copy_ across devices", function()
  local x = lt.randn(2, 3)
  local d = lt.zeros(2, 3, { device = "cuda" })
  d:copy_(x)
  same(d, x, "host to device")
  local h = lt.zeros(2, 3, { dtype = "float64" })
  h:copy_(d)
  same(h, x:double(), "device to host with conversion")
  local row = lt.zeros(4, 3, { device = "cuda:1" })
  row:copy_(lt.arange(3):float())
  same(row, lt.arange(3):float():expand(4, 3):contiguous(), "broadcast on the device")
end)

check("autograd across devices", function()
  local w = lt.randn(3, { requires_grad = true })
  local y = (w:to("cuda") * 2):sum()
  assert(y.device == "cuda:0")
  y:backward()
  assert(w.grad.device == "cpu")
  same(w.grad, lt.ones(3) * 2, "gradient back to the host")
  local p = lt.randn(3, { device = "cuda", requires_grad = true })
  assert(p.is_leaf and p.device == "cuda:0")
  ;(p * p):sum():backward()
  assert(p.grad.device == "cuda:0", "a device leaf's gradient stays on the device")
  same(p.grad, p:detach() * 2, "device gradient")
end)

check("Module:to", function()
  local m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
  local x = lt.randn(5, 3)
  local want = m:forward(x)
  m:to("cuda")
  for name, p in pairs(m:state_dict()) do assert(p.device == "cuda:0", name) end
  local out = m:forward(x:to("cuda"))
  assert(out.device == "cuda:0")
  same(out, want, "forward on the device")
  out:sum():backward()
  for _, p in ipairs(m:parameters()) do assert(p.grad.device == "cuda:0") end
  local opt = lt.optim.SGD(m:parameters(), { lr = 0.1 })
  opt:step()
  m:to("cpu")
  for _, p in ipairs(m:parameters()) do
    assert(p.device == "cpu" and p.grad.device == "cpu", "gradients move with parameters")
  end
  raises(function() m:to("cuda:5") end, "not available")
end)

check("save through the host", function()
  local path = os.tmpname()
  local t = lt.randn(3, 2)
  lt.save({ w = t:to("cuda"), n = 3 }, path)
  local back = lt.load(path)
  os.remove(path)
  assert(back.w.device == "cpu")
  same(back.w, t, "checkpoint")
  local from_host = select(2, mock_transfers())
  local view = t:to("cuda"):t()
  local sp = path .. ".safetensors"
  lt.save({ v = view }, sp)
  same(lt.load(sp).v, t:t(), "safetensors of a device view")
  os.remove(sp)
  -- a .pt file keeps views sharing storage: both come back from one copy of it
  local base = lt.arange(6):float():to("cuda")
  lt.save({ a = base, b = base:view(2, 3):t() }, path)
  local both = lt.load(path)
  os.remove(path)
  same(both.b, lt.arange(6):float():view(2, 3):t(), "view of a device storage")
  both.a[1] = 100
  assert(both.b[1][1]:item() == 100, "the views share their storage after loading")
  assert(select(2, mock_transfers()) > from_host)
  lt.save({ w = t, list = { t, 2 } }, path)
  local placed = lt.load(path, { map_location = "cuda:1" })
  os.remove(path)
  assert(placed.w.device == "cuda:1" and placed.list[1].device == "cuda:1")
  assert(rawequal(placed.w, placed.list[1]), "a shared tensor stays shared")
  same(placed.w, t, "map_location")
end)

check("memory", function()
  for _ = 1, 50 do local _ = lt.randn(256, 256, { device = "cuda" }) * 2 end
  collectgarbage()
  collectgarbage()
  local to_host, from_host = mock_transfers()
  assert(to_host > 0 and from_host > 0)
end)

collectgarbage()
collectgarbage()
print("device bytes live " .. mock_bytes())
