-- Every public function and Tensor method called with random arguments (tensors of several
-- shapes and dtypes, numbers, strings, tables, nil, booleans): each call must either return or
-- raise a Lua error with a message; nothing may crash (the sanitizer build runs this too).
local lt = require "lantern"

local pool = {
  function() return lt.randn(3, 4) end, function() return lt.randn(4) end,
  function() return lt.tensor { 1, 2, 3 } end, function() return lt.tensor(true) end,
  function() return lt.randn(2, 3):t() end, function() return lt.zeros(0, 3) end,
  function() return lt.randn(1) end, function() return lt.randn(2, 1, 3) end,
  function() return lt.ones(3, 4, { dtype = "float64" }) end,
  function() return lt.tensor { 0, 1, 2 } end, function() return lt.randn(3, 4):gt(0) end,
  function() return lt.randn(3, { requires_grad = true }) end,
  function() return 0 end, function() return -1 end, function() return 2 end,
  function() return 1.5 end, function() return "x" end, function() return {} end,
  function() return { 1, 2 } end, function() return nil end, function() return true end,
  function() return 1e300 end, function() return -1000 end, function() return { dim = 1 } end,
}
local n_tensors = 12

-- functions that allocate what their arguments ask (a random size could be terabytes), change
-- process-wide state, or touch files are left out
local skip = {
  empty = true, full = true, zeros = true, ones = true, rand = true, randn = true, randint = true,
  arange = true, linspace = true, eye = true, randperm = true, normal = true, set_num_threads = true,
  empty_cache = true, no_grad = true, enable_grad = true, manual_seed = true, seed = true,
  set_grad_enabled = true, set_rng_state = true, save = true, load = true, save_module = true,
  load_module = true, set_printoptions = true, repeat_tensor = true, tile = true,
  ["repeat"] = true, expand = true, new_full = true,
}

local function entry_points()
  local list = {}
  for k, v in pairs(lt.Tensor) do
    if type(v) == "function" and not skip[k] then list[#list + 1] = { "method", k } end
  end
  for k, v in pairs(lt) do
    if type(v) == "function" and type(k) == "string" and k:sub(1, 1) ~= "_" and not skip[k] then
      list[#list + 1] = { "function", k }
    end
  end
  table.sort(list, function(a, b) return a[1] .. a[2] < b[1] .. b[2] end)
  return list
end

describe("API fuzz", function()
  it("answers random calls with a result or a Lua error, never a crash", function()
    local list = entry_points()
    assert.is_true(#list > 150)
    local rng = lt.Generator(1234)
    local function pick(n) return lt.randint(1, n + 1, { 1 }, { generator = rng }):item() end
    local errors, calls = 0, 0
    for _ = 1, 3000 do
      local e = list[pick(#list)]
      local na = pick(5) - 1
      local args = {}
      for i = 1, na do args[i] = pool[pick(#pool)]() end
      local ok, err
      if e[1] == "method" then
        ok, err = pcall(lt.Tensor[e[2]], pool[pick(n_tensors)](), table.unpack(args, 1, na))
      else
        ok, err = pcall(lt[e[2]], table.unpack(args, 1, na))
      end
      calls = calls + 1
      if not ok then
        errors = errors + 1
        assert.are.equal("string", type(err), e[2] .. " raised a non-string error")
        assert.is_true(#err > 0)
      end
    end
    lt.set_grad_enabled(true)
    assert.are.equal(3000, calls)
    assert.is_true(errors > 0 and errors < calls)
  end)
end)
