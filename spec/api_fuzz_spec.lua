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

  -- An option this binding lacks (PyTorch's out=, say) must be an error, not silently dropped.
  -- Each entry point is first called with the first argument pattern it accepts, then again
  -- with an options table appended; that second call must raise.
  it("raises on an options table or argument it does not take", function()
    local function mk() return lt.randn(3, 4) end
    local patterns = {
      function() return { mk() } end, function() return { mk(), mk() } end,
      function() return { mk(), 1 } end, function() return { mk(), 2 } end,
      function() return { mk(), mk(), mk() } end, function() return { mk(), 1, 2 } end,
      function() return { 3, 4 } end, function() return { 3 } end,
    }
    -- taking nothing (status and settings functions, which ignore extra arguments as Lua's own
    -- do), a list of dims whose table form cannot be told from options (flip, permute, roll,
    -- tile, repeat), or a constructor's seed; free is also __close, which Lua calls with two
    local exempt = {
      Generator = true, clock = true, empty_cache = true, gemm = true, get_default_device = true,
      get_num_threads = true, get_rng_state = true, initial_seed = true, is_grad_enabled = true,
      is_released = true, isa = true, keep = true, memory_stats = true, reset_peak_memory_stats = true,
      seed = true, flip = true, permute = true, roll = true, tile = true, free = true,
      ["repeat"] = true, repeat_tensor = true,
    }
    local silent, checked = {}, 0
    for _, e in ipairs(entry_points()) do
      local f = e[1] == "method" and lt.Tensor[e[2]] or lt[e[2]]
      if not exempt[e[2]] then
        for _, p in ipairs(patterns) do
          local args = p()
          if pcall(f, table.unpack(args)) then
            args[#args + 1] = { bogus = 1 }
            checked = checked + 1
            if pcall(f, table.unpack(args)) then silent[#silent + 1] = e[2] end
            break
          end
        end
      end
    end
    lt.set_grad_enabled(true)
    assert.is_true(checked > 150)
    assert.are.same({}, silent)
    local a = lt.ones(2)
    assert.has_error(function() lt.exp(a, { out = a }) end,
      "exp: unknown option 'out' (exp takes no options)")
    assert.has_error(function() lt.mul(a, a, 3) end,
      "mul: unexpected argument #3 (number): mul takes 2 arguments")
    assert.has_error(function() a:add(a, 1, 2) end,
      "add: unexpected argument #4 (number): add takes 3 arguments")
    assert.has_error(function() a:requires_grad_({}) end,
      "requires_grad_: bad argument #2 (boolean expected, got table)")
    assert.are.same({ 2, 2 }, lt.mul(a, a + 1, nil):tolist())   -- nil is no argument
  end)
end)
