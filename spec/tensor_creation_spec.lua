-- Creating tensors: lt.tensor from nested tables, zeros/ones/empty/full and the _like forms,
-- arange/linspace/eye (values checked against PyTorch), random constructors and fills,
-- generators (reproducibility, state save/restore), rough statistics, and bad input.
local lt = require "lantern"

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local function stats(t)
  local v = t:reshape(-1):tolist()
  local n, s, s2 = #v, 0, 0
  for i = 1, n do s = s + v[i] end
  local mean = s / n
  for i = 1, n do s2 = s2 + (v[i] - mean) ^ 2 end
  return mean, math.sqrt(s2 / (n - 1)), v
end

describe("lt.tensor", function()
  it("infers int64, float32 and bool like PyTorch", function()
    local i = lt.tensor({ 1, 2, 3 })
    assert.are.equal("int64", i.dtype)
    assert.are.same({ 1, 2, 3 }, i:tolist())
    assert.are.equal(math.type(i:tolist()[1]), "integer")
    local f = lt.tensor({ 1, 2.5, 3 })
    assert.are.equal("float32", f.dtype)
    assert.are.same({ 1.0, 2.5, 3.0 }, f:tolist())
    assert.are.equal("float32", lt.tensor({ 1.0, 2.0 }).dtype)
    local b = lt.tensor({ true, false })
    assert.are.equal("bool", b.dtype)
    assert.are.same({ true, false }, b:tolist())
    assert.are.equal("int64", lt.tensor({ true, 2 }).dtype)
    assert.are.same({ 1, 2 }, lt.tensor({ true, 2 }):tolist())
  end)

  it("builds nested shapes and scalars", function()
    local t = lt.tensor({ { { 1, 2 }, { 3, 4 }, { 5, 6 } }, { { 7, 8 }, { 9, 10 }, { 11, 12 } } })
    assert.are.same({ 2, 3, 2 }, t:size())
    assert.are.same({ { { 1, 2 }, { 3, 4 }, { 5, 6 } }, { { 7, 8 }, { 9, 10 }, { 11, 12 } } },
      t:tolist())
    local s = lt.tensor(3.5)
    assert.are.same({}, s:size())
    assert.are.equal(3.5, s:item())
    assert.are.equal("int64", lt.tensor(7).dtype)
    assert.are.equal(true, lt.tensor(true):item())
    assert.are.same({ 0 }, lt.tensor({}):size())
    assert.are.equal("float32", lt.tensor({}).dtype)
    assert.are.same({ 2, 0 }, lt.tensor({ {}, {} }):size())
    -- one-element tensors can stand for numbers
    assert.are.same({ 1.5, 2.0 }, lt.tensor({ lt.tensor(1.5), lt.tensor({ 2.0 }) }):tolist())
  end)

  it("keeps int64 values exact and honours dtype and requires_grad", function()
    local big = lt.tensor({ 9007199254740993, -9223372036854775807 })
    assert.are.same({ 9007199254740993, -9223372036854775807 }, big:tolist())
    local d = lt.tensor({ 1, 2 }, { dtype = "float64" })
    assert.are.equal("float64", d.dtype)
    assert.are.same({ 1.0, 2.0 }, d:tolist())
    assert.are.same({ 1, -2 }, lt.tensor({ 1.7, -2.7 }, { dtype = "int64" }):tolist())
    assert.are.same({ true, false, true }, lt.tensor({ 2, 0, -1 }, { dtype = "bool" }):tolist())
    local g = lt.tensor({ 1.0 }, { requires_grad = true })
    assert.is_true(g.requires_grad)
    assert.is_true(g.is_leaf)
    assert.is_false(lt.tensor({ 1.0 }).requires_grad)
  end)

  it("copies a tensor argument, detached", function()
    local a = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local c = lt.tensor(a)
    assert.is_false(c.requires_grad)
    c:fill_(5)
    assert.are.same({ 1.0, 2.0 }, a:tolist())
    assert.are.equal("float64", lt.tensor(a, { dtype = "float64" }).dtype)
  end)

  it("rejects ragged tables and non-numbers, naming the position", function()
    local e = err_of(lt.tensor, { { 1, 2 }, { 3 } })
    assert.matches("tensor: ragged", e)
    assert.matches("[2]", e, 1, true)
    e = err_of(lt.tensor, { 1, { 2 } })
    assert.matches("tensor: ragged.*%[2%]", e)
    e = err_of(lt.tensor, { { 1 }, 2 })
    assert.matches("tensor: ragged.*%[2%]", e)
    e = err_of(lt.tensor, { { 1, 2 }, { 3, "x" } })
    assert.matches("tensor: element [2][2] is a string", e, 1, true)
    e = err_of(lt.tensor, { 1, {} })
    assert.matches("tensor: ragged", e)
    e = err_of(lt.tensor, "abc")
    assert.matches("tensor: bad argument #1", e)
    e = err_of(lt.tensor, nil)
    assert.matches("tensor: bad argument #1", e)
    e = err_of(lt.tensor, { lt.zeros(2) })
    assert.matches("tensor: element [1] is a tensor of shape [2]", e, 1, true)
    e = err_of(lt.tensor, { 1 }, { dtype = "float16" })
    assert.matches("unknown dtype", e)
    e = err_of(lt.tensor, { 1, 2 }, { requires_grad = true })
    assert.matches("floating point", e)
    e = err_of(lt.tensor, { 1 }, 5)
    assert.matches("tensor: bad argument #2", e)
  end)
end)

describe("filled constructors", function()
  it("zeros, ones, empty and full with sizes as varargs or a table", function()
    assert.are.same({ { 0.0, 0.0, 0.0 }, { 0.0, 0.0, 0.0 } }, lt.zeros(2, 3):tolist())
    assert.are.same({ { 1.0, 1.0 } }, lt.ones({ 1, 2 }):tolist())
    assert.are.same({ 2, 3, 4 }, lt.empty(2, 3, 4):size())
    assert.are.equal("float64", lt.zeros(2, { dtype = "float64" }).dtype)
    assert.are.equal("int64", lt.ones({ 2 }, { dtype = "int64" }).dtype)
    assert.are.same({}, lt.zeros():size())
    assert.is_true(lt.zeros(2, { requires_grad = true }).requires_grad)
    assert.are.same({ { 7.5, 7.5 } }, lt.full({ 1, 2 }, 7.5):tolist())
    assert.are.same({ { 7.5, 7.5 } }, lt.full(1, 2, 7.5):tolist())
    assert.are.equal("int64", lt.full({ 2 }, 7).dtype)
    assert.are.equal("float32", lt.full({ 2 }, 7.0).dtype)
    assert.are.equal("bool", lt.full({ 2 }, true).dtype)
    assert.are.same({ true, true }, lt.full(2, true):tolist())
    assert.are.same({ 7.0, 7.0 }, lt.full({ 2 }, 7, { dtype = "float64" }):tolist())
    assert.are.same({}, lt.full({}, 2.0):size())
  end)

  it("_like forms copy shape and dtype", function()
    local x = lt.zeros(2, 3, { dtype = "float64" })
    local o = lt.ones_like(x)
    assert.are.same({ 2, 3 }, o:size())
    assert.are.equal("float64", o.dtype)
    assert.are.same({ { 1.0, 1.0, 1.0 }, { 1.0, 1.0, 1.0 } }, o:tolist())
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, lt.zeros_like(x, { dtype = "int64" }):tolist())
    assert.are.same({ 2, 3 }, lt.empty_like(x):size())
    assert.are.same({ { 4.0, 4.0, 4.0 }, { 4.0, 4.0, 4.0 } }, lt.full_like(x, 4):tolist())
    assert.are.equal("float64", lt.rand_like(x).dtype)
    assert.are.same({ 2, 3 }, lt.randn_like(x):size())
    local ri = lt.randint_like(lt.zeros(100, { dtype = "int64" }), 3, 6)
    for _, v in ipairs(ri:tolist()) do assert.is_true(v >= 3 and v < 6) end
    assert.is_true(lt.zeros_like(x, { requires_grad = true }).requires_grad)
    assert.matches("rand_like: expected a floating point dtype",
      err_of(lt.rand_like, lt.zeros(2, { dtype = "int64" })))
  end)

  it("rejects negative sizes and bad arguments, naming the op", function()
    assert.matches("zeros: negative dimension %-1 at position 2", err_of(lt.zeros, 2, -1))
    assert.matches("ones: negative dimension", err_of(lt.ones, { -3 }))
    assert.matches("empty: negative dimension", err_of(lt.empty, -1))
    assert.matches("full: negative dimension", err_of(lt.full, { -1 }, 2.0))
    assert.matches("rand: negative dimension", err_of(lt.rand, 3, -2))
    assert.matches("size at position 2 must be an integer", err_of(lt.zeros, 2, 1.5))
    assert.matches("full: missing the fill value", err_of(lt.full, { 2 }))
    assert.matches("full: .*fill value must be", err_of(lt.full, { 2 }, "x"))
    assert.matches("zeros: bad argument", err_of(lt.zeros, 2, "x"))
  end)
end)

describe("ranges", function()
  it("arange like PyTorch (integers give int64, any float gives float32)", function()
    assert.are.same({ 0, 1, 2, 3, 4 }, lt.arange(5):tolist())
    assert.are.equal("int64", lt.arange(5).dtype)
    assert.are.same({ 2, 3, 4 }, lt.arange(2, 5):tolist())
    assert.are.same({ 10, 7, 4, 1 }, lt.arange(10, 0, -3):tolist())
    assert.are.same({ -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0 }, lt.arange(-1.5, 2.25, 0.5):tolist())
    assert.are.equal("float32", lt.arange(0, 1, 0.5).dtype)
    -- from PyTorch: torch.arange(0, 1, 0.1) and torch.arange(0, 1, 0.3)
    assert.are.same({ 0.0, 0.10000000149011612, 0.20000000298023224, 0.30000001192092896,
      0.4000000059604645, 0.5, 0.6000000238418579, 0.699999988079071, 0.800000011920929,
      0.8999999761581421 }, lt.arange(0, 1, 0.1):tolist())
    assert.are.same({ 0.0, 0.30000001192092896, 0.6000000238418579, 0.8999999761581421 },
      lt.arange(0, 1, 0.3):tolist())
    assert.are.same({ 1.0, 2.0 }, lt.arange(1, 2.5):tolist())
    assert.are.equal("float64", lt.arange(5, { dtype = "float64" }).dtype)
    assert.are.same({ 0 }, lt.arange(0):size())
    assert.are.same({ 0 }, lt.arange(3, 3):size())
    assert.are.same({ 9007199254740993 }, lt.arange(9007199254740993, 9007199254740994):tolist())
  end)

  it("arange rejects a zero step, an inconsistent sign and bool", function()
    assert.matches("arange: step must be nonzero", err_of(lt.arange, 0, 5, 0))
    assert.matches("arange: upper bound and larger bound inconsistent with step sign",
      err_of(lt.arange, 0, 5, -1))
    assert.matches("arange: upper bound", err_of(lt.arange, 5, 0))
    assert.matches("arange: not implemented for dtype bool", err_of(lt.arange, 3, { dtype = "bool" }))
    assert.matches("arange: expected", err_of(lt.arange))
    assert.matches("arange: unsupported range", err_of(lt.arange, 0, 1 / 0))
  end)

  it("linspace matches PyTorch bit for bit", function()
    -- torch.linspace(-1, 1, 7) and torch.linspace(0, 1, 10) (float32)
    assert.are.same({ -1.0, -0.6666666269302368, -0.3333333134651184, -2.9802322387695312e-08,
      0.3333333134651184, 0.6666666269302368, 1.0 }, lt.linspace(-1, 1, 7):tolist())
    assert.are.same({ 0.0, 0.1111111119389534, 0.2222222238779068, 0.3333333432674408,
      0.4444444477558136, 0.5555555820465088, 0.6666666865348816, 0.7777777910232544,
      0.8888888955116272, 1.0 }, lt.linspace(0, 1, 10):tolist())
    assert.are.same({ 0, 3, 6, 10 }, lt.linspace(0, 10, 4, { dtype = "int64" }):tolist())
    assert.are.same({ 3.0, 1.5, 0.0, -1.5, -3.0 }, lt.linspace(3, -3, 5, { dtype = "float64" }):tolist())
    assert.are.same({ 2.0 }, lt.linspace(2, 5, 1):tolist())
    assert.are.same({ 0 }, lt.linspace(2, 5, 0):size())
    assert.matches("linspace: number of steps must be non%-negative", err_of(lt.linspace, 0, 1, -1))
  end)

  it("eye", function()
    assert.are.same({ { 1.0, 0.0 }, { 0.0, 1.0 } }, lt.eye(2):tolist())
    assert.are.same({ { 1.0, 0.0, 0.0 }, { 0.0, 1.0, 0.0 } }, lt.eye(2, 3):tolist())
    assert.are.same({ { 1, 0 }, { 0, 1 }, { 0, 0 } }, lt.eye(3, 2, { dtype = "int64" }):tolist())
    assert.are.same({ { true, false }, { false, true } }, lt.eye(2, { dtype = "bool" }):tolist())
    assert.are.same({ 0, 3 }, lt.eye(0, 3):size())
    assert.matches("eye: n and m must be non%-negative", err_of(lt.eye, -1))
    assert.is_true(lt.eye(2, { requires_grad = true }).requires_grad)
  end)
end)

describe("random tensors", function()
  it("are reproducible from a seed and independent of other generators", function()
    lt.manual_seed(123)
    local a = lt.rand(5):tolist()
    local an = lt.randn(3):tolist()
    lt.manual_seed(123)
    assert.are.same(a, lt.rand(5):tolist())
    assert.are.same(an, lt.randn(3):tolist())
    assert.are.equal(123, lt.initial_seed())
    local g = lt.Generator(123)
    assert.are.same(a, lt.rand(5, { generator = g }):tolist())
    -- using g does not advance the default generator
    lt.manual_seed(5)
    local g2 = lt.Generator(99)
    local x1 = lt.rand(4):tolist()
    lt.manual_seed(5)
    lt.rand(10, { generator = g2 })
    assert.are.same(x1, lt.rand(4):tolist())
    -- different seeds differ
    assert.are_not.same(lt.rand(4, { generator = lt.Generator(1) }):tolist(),
      lt.rand(4, { generator = lt.Generator(2) }):tolist())
  end)

  it("depend only on the shape's element count and the state, not on strides", function()
    local g = lt.Generator(11)
    local a = lt.randn(2, 3, { generator = g }):reshape(-1):tolist()
    g:manual_seed(11)
    local t = lt.empty(3, 2):t()   -- a transposed (2, 3) view
    t:normal_(0, 1, { generator = g })
    assert.are.same(a, t:contiguous():reshape(-1):tolist())
  end)

  -- a dense target of 8192 elements or more takes its draws in blocks of 32768 and transforms
  -- them over the worker pool: the values must be the one-thread loop's, which a strided target
  -- always takes, in float64 and float32, for odd counts and a mean and std, and the generator
  -- must end in the same state
  it("normal_ gives the same values on a dense tensor at any thread count", function()
    local before = lt.get_num_threads()
    for _, dt in ipairs { "float64", "float32" } do
      for _, n in ipairs { 8191, 8193, 70001 } do
        local g = lt.Generator(7)
        lt.set_num_threads(1)
        local t = lt.empty(1, n, { dtype = dt }):t()   -- strided: the one-thread loop
        t:normal_(0.5, 2, { generator = g })
        local want, next_want = t:reshape(-1), lt.rand(3, { generator = g }):tolist()
        for _, threads in ipairs { 1, 2 } do
          lt.set_num_threads(threads)
          g:manual_seed(7)
          local got = lt.empty(n, { dtype = dt }):normal_(0.5, 2, { generator = g })
          assert.is_true(got:eq(want):all():item(), dt .. " " .. n .. " at " .. threads)
          assert.are.same(next_want, lt.rand(3, { generator = g }):tolist())
        end
      end
    end
    lt.set_num_threads(before)
  end)

  -- Box-Muller's log, sin and cos are Lantern's own vector polynomials (cpu/random.c): each
  -- pair must be libm's r cos(2 pi u2), r sin(2 pi u2), r = sqrt(-2 log(1 - u1)), of the draws
  -- that rand takes from the same generator, to within a few ulp (libm rounds 2 pi u2 first,
  -- which moves its result by up to about 2^-51 r), and be the same at every ISA level
  it("normal's pairs are libm's Box-Muller of the generator's draws", function()
    local n = 100002
    local d = lt.rand(n, { generator = lt.Generator(42), dtype = "float64" }):tolist()
    local z = lt.randn(n, { generator = lt.Generator(42), dtype = "float64" }):tolist()
    for i = 1, n, 2 do
      local r = math.sqrt(-2 * math.log(1 - d[i]))
      local c, s = r * math.cos(2 * math.pi * d[i + 1]), r * math.sin(2 * math.pi * d[i + 1])
      local tol = 2 ^ -49 * math.max(1, r)
      if math.abs(z[i] - c) > tol or math.abs(z[i + 1] - s) > tol then
        error(string.format("pair %d: %.17g %.17g, libm %.17g %.17g", i, z[i], z[i + 1], c, s))
      end
    end
  end)

  it("normal gives the same bits at every ISA level the CPU supports", function()
    local support = require "support"
    local SCRIPT = [[
local lt = require "lantern"
local g = lt.Generator(3)
local out = {}
for _, n in ipairs { 1, 7, 16, 33, 1001, 40001 } do
  for _, v in ipairs(lt.randn(n, { generator = g, dtype = "float64" }):tolist()) do out[#out + 1] = string.format("%a", v) end
end
print(table.concat(out, " "))
]]
    local base = support.run_lua(SCRIPT, "LANTERN_ISA=sse4")
    assert.truthy(#base > 1000, base:sub(1, 200))
    for isa, ok in pairs(support.isa_levels()) do
      if ok then assert.are.equal(base, (support.run_lua(SCRIPT, "LANTERN_ISA=" .. isa)), isa) end
    end
  end)

  it("get_state / set_state restore a sequence", function()
    lt.manual_seed(42)
    lt.rand(3)
    local st = lt.get_rng_state()
    assert.are.equal("int64", st.dtype)
    assert.are.same({ 5 }, st:size())
    local first = lt.randn(6):tolist()
    lt.rand(100)
    lt.set_rng_state(st)
    assert.are.same(first, lt.randn(6):tolist())
    local g = lt.Generator(3)
    local gs = g:get_state()
    local v = lt.rand(4, { generator = g }):tolist()
    g:set_state(gs)
    assert.are.same(v, lt.rand(4, { generator = g }):tolist())
    assert.are.equal(3, g:initial_seed())
    local s = g:seed()
    assert.are.equal("integer", math.type(s))
    assert.is_true(s >= 0)
    assert.are.equal(s, g:initial_seed())
    assert.are.equal("integer", math.type(lt.seed()))
    assert.matches("set_state: expected an int64 tensor of 5 elements",
      err_of(lt.set_rng_state, lt.zeros(3)))
    assert.matches("set_state: expected an int64 tensor", err_of(g.set_state, g, lt.zeros(5)))
    assert.matches("seed must be an integer", err_of(lt.manual_seed, 1.5))
    assert.are.equal(lt.default_generator, lt.manual_seed(1))
    assert.matches("Generator", tostring(g))
  end)

  it("rand and randn have the right dtype, range and rough statistics", function()
    lt.manual_seed(0)
    local u = lt.rand(100000)
    assert.are.equal("float32", u.dtype)
    local m, s, v = stats(u)
    assert.is_true(math.abs(m - 0.5) < 0.01, "mean " .. m)
    assert.is_true(math.abs(s - math.sqrt(1 / 12)) < 0.01, "std " .. s)
    for i = 1, #v do assert(v[i] >= 0 and v[i] < 1) end
    local n = lt.randn(100000, { dtype = "float64" })
    assert.are.equal("float64", n.dtype)
    m, s = stats(n)
    assert.is_true(math.abs(m) < 0.02, "mean " .. m)
    assert.is_true(math.abs(s - 1) < 0.02, "std " .. s)
    assert.matches("rand: expected a floating point dtype", err_of(lt.rand, 2, { dtype = "int64" }))
    assert.matches("randn: expected a floating point dtype", err_of(lt.randn, 2, { dtype = "bool" }))
    assert.is_true(lt.randn(2, { requires_grad = true }).requires_grad)
    assert.are.same({ 2, 3 }, lt.randn({ 2, 3 }):size())
  end)

  it("normal, uniform_, normal_, bernoulli_ and random_", function()
    lt.manual_seed(1)
    local m, s = stats(lt.normal(3, 2, { 100000 }))
    assert.is_true(math.abs(m - 3) < 0.05 and math.abs(s - 2) < 0.05)
    local u = lt.empty(100000):uniform_(-2, 4)
    local _, _, v = stats(u)
    m, s = stats(u)
    assert.is_true(math.abs(m - 1) < 0.05 and math.abs(s - math.sqrt(3)) < 0.05)
    for i = 1, #v do assert(v[i] >= -2 and v[i] < 4) end
    local x = lt.zeros(100000, { dtype = "float64" })
    assert.are.equal(x, x:normal_(-1, 0.5))
    m, s = stats(x)
    assert.is_true(math.abs(m + 1) < 0.02 and math.abs(s - 0.5) < 0.02)
    m = stats(lt.zeros(100000):bernoulli_(0.3))
    assert.is_true(math.abs(m - 0.3) < 0.01)
    local bb = lt.zeros(1000, { dtype = "bool" }):bernoulli_(0.5):tolist()
    assert.are.equal("boolean", type(bb[1]))
    local r = lt.zeros(10000, { dtype = "int64" }):random_(5, 8):tolist()
    local seen = {}
    for i = 1, #r do
      assert(r[i] >= 5 and r[i] < 8)
      seen[r[i]] = true
    end
    assert.is_true(seen[5] and seen[6] and seen[7])
    for _, y in ipairs(lt.zeros(1000):random_(3):tolist()) do assert(y >= 0 and y < 3 and y == math.floor(y)) end
    assert.matches("uniform_: expected a floating point dtype",
      err_of(function() lt.zeros(2, { dtype = "int64" }):uniform_() end))
    assert.matches("normal_: expects std >= 0", err_of(function() lt.zeros(2):normal_(0, -1) end))
    assert.matches("bernoulli_: expects p to be in %[0, 1%], but got p=2", err_of(function() lt.zeros(2):bernoulli_(2) end))
    local leaf = lt.zeros(2, { requires_grad = true })
    assert.matches("leaf Variable that requires grad", err_of(function() leaf:uniform_() end))
  end)

  it("bernoulli draws with per-element probabilities", function()
    lt.manual_seed(3)
    local p = lt.full({ 50000 }, 0.25, { dtype = "float64" })
    local b = lt.bernoulli(p)
    assert.are.equal("float64", b.dtype)
    assert.is_true(math.abs(stats(b) - 0.25) < 0.01)
    assert.are.same({ 0.0, 1.0 }, lt.bernoulli(lt.tensor({ 0.0, 1.0 })):tolist())
    assert.matches("bernoulli: probabilities must be in %[0, 1%]", err_of(lt.bernoulli, lt.tensor({ 1.5 })))
  end)

  describe("multinomial", function()
    -- counts of each category (1-based) in the int64 tensor t
    local function counts(t, n)
      local c = {}
      for i = 1, n do c[i] = 0 end
      for _, v in ipairs(t:reshape(-1):tolist()) do c[v] = c[v] + 1 end
      return c
    end

    it("draws with replacement in proportion to the weights, never a zero weight", function()
      lt.manual_seed(21)
      for _, dt in ipairs({ "float32", "float64" }) do
        local w = { 0.0, 1.0, 0.0, 3.0, 6.0, 0.0 }   -- unnormalised, zeros at both ends
        local draws = lt.tensor(w, { dtype = dt }):multinomial(100000, true)
        assert.are.equal("int64", draws.dtype)
        assert.are.same({ 100000 }, draws:size())
        local c = counts(draws, 6)
        for i, wi in ipairs(w) do
          local p = wi / 10
          local sd = math.sqrt(100000 * p * (1 - p))
          assert.is_true(math.abs(c[i] - 100000 * p) <= 5 * sd + 1e-9,
            string.format("%s category %d: %d draws, expected about %g", dt, i, c[i], 1e5 * p))
        end
      end
      -- rows draw from their own weights
      local rows = lt.tensor({ { 1.0, 0.0, 0.0 }, { 0.0, 0.0, 2.0 } })
        :multinomial(7, { replacement = true })
      assert.are.same({ { 1, 1, 1, 1, 1, 1, 1 }, { 3, 3, 3, 3, 3, 3, 3 } }, rows:tolist())
    end)

    it("draws without replacement as one draw after another from the weights left", function()
      lt.manual_seed(22)
      local p = { 0.1, 0.2, 0.7 }
      local s = lt.tensor(p):expand(40000, 3):contiguous():multinomial(2)
      assert.are.same({ 40000, 2 }, s:size())
      local first, second = counts(s:select(2, 1), 3), counts(s:select(2, 2), 3)
      for i = 1, 3 do
        local want2 = 0   -- P(second = i) = sum over j ~= i of p_j p_i / (1 - p_j)
        for j = 1, 3 do if j ~= i then want2 = want2 + p[j] * p[i] / (1 - p[j]) end end
        for _, c in ipairs({ { first[i], p[i] }, { second[i], want2 } }) do
          local sd = math.sqrt(40000 * c[2] * (1 - c[2]))
          assert.is_true(math.abs(c[1] - 40000 * c[2]) <= 5 * sd,
            string.format("category %d: %d, expected about %g", i, c[1], 40000 * c[2]))
        end
      end
      for _, row in ipairs(s:narrow(1, 1, 200):tolist()) do assert.are_not.equal(row[1], row[2]) end
      -- every category once; zero weights after the others, in position order
      local all = lt.tensor({ 0.0, 5.0, 0.0, 1.0, 0.0 }):multinomial(5):tolist()
      assert.are.same({ 1, 3, 5 }, { all[3], all[4], all[5] })
      table.sort(all)
      assert.are.same({ 1, 2, 3, 4, 5 }, all)
    end)

    it("follows its generator, the same at any thread count", function()
      local w = lt.rand(300, 50) + 0.01
      local before = lt.get_num_threads()
      local res = {}
      for _, nt in ipairs({ 1, 2 }) do
        lt.set_num_threads(nt)
        res[nt] = { w:multinomial(5, { generator = lt.Generator(7) }),
          w:multinomial(9, true, { generator = lt.Generator(7) }) }
      end
      lt.set_num_threads(before)
      assert.is_true(res[1][1]:equal(res[2][1]))
      assert.is_true(res[1][2]:equal(res[2][2]))
      local again = w:multinomial(5, { generator = lt.Generator(7) })
      assert.is_true(again:equal(res[1][1]))
      assert.is_false(w:multinomial(5, { generator = lt.Generator(8) }):equal(res[1][1]))
    end)

    it("refuses what PyTorch refuses, with its messages", function()
      local function err(f) local ok, e = pcall(f); assert.is_false(ok); return tostring(e) end
      local t = lt.tensor({ 1.0, 2.0 })
      assert.matches("contains either `inf`, `nan` or element < 0",
        err(function() return lt.tensor({ 1.0, -1.0 }):multinomial(1) end))
      assert.matches("contains either `inf`, `nan` or element < 0",
        err(function() return lt.tensor({ 1.0, 0 / 0 }):multinomial(1, true) end))
      assert.matches("contains either `inf`, `nan` or element < 0",
        err(function() return lt.tensor({ 1.0, 1 / 0 }):multinomial(1) end))
      assert.matches("sum of probabilities <= 0",
        err(function() return lt.tensor({ { 1.0, 0.0 }, { 0.0, 0.0 } }):multinomial(1) end))
      assert.matches("cannot sample n_sample > prob_dist.size%(%-1%) samples without replacement",
        err(function() return t:multinomial(3) end))
      assert.matches("cannot sample n_sample <= 0 samples",
        err(function() return t:multinomial(0) end))
      assert.matches("prob_dist must be 1 or 2 dim, got 3%-d",
        err(function() return lt.ones(2, 2, 2):multinomial(1) end))
      assert.matches("only supports floating%-point dtypes for input, got: int64",
        err(function() return lt.tensor({ 1, 2 }):multinomial(1) end))
      assert.matches("unknown option 'replace'",
        err(function() return t:multinomial(1, { replace = true }) end))
      assert.matches("num_samples must be an integer",
        err(function() return t:multinomial(1.5) end))
      assert.are.same({ 0, 2 }, lt.zeros(0, 3):multinomial(2):size())
    end)
  end)

  -- randint's draws are the generator's xoshiro256** words, rejected above the largest multiple
  -- of the span and reduced modulo it (cpu/random.c computes the modulo by a multiply): the
  -- values of that rule in plain Lua, for spans small and large
  it("randint gives the generator's words reduced modulo the span", function()
    local function rotl(x, k) return (x << k) | (x >> (64 - k)) end
    local function umod(a, n)   -- a as an unsigned 64-bit integer, 0 < n < 2^62
      local r = a - (((a >> 1) // n) << 1) * n
      while not math.ult(r, n) do r = r - n end
      return r
    end
    for _, span in ipairs { 2, 3, 10, 1000, 65537, (1 << 31) + 11, (1 << 40) + 3 } do
      local g = lt.Generator(span)
      local s = g:get_state():tolist()
      local got = lt.randint(-5, span - 5, { 3000 }, { generator = g }):tolist()
      local limit = -1 - umod(-1, span)
      for i = 1, #got do
        local r
        repeat
          r = rotl(s[2] * 5, 7) * 9
          local t = s[2] << 17
          s[3], s[4] = s[3] ~ s[1], s[4] ~ s[2]
          s[2], s[1] = s[2] ~ s[3], s[1] ~ s[4]
          s[3], s[4] = s[3] ~ t, rotl(s[4], 45)
        until math.ult(r, limit)
        assert.are.equal(umod(r, span) - 5, got[i], "span " .. span .. ", draw " .. i)
      end
    end
  end)

  -- bounds far from zero and the full int64 range: the span is taken in integers (as doubles,
  -- bounds near 2^62 gave values past hi, and the full range's span divided by zero)
  it("randint keeps within bounds near the ends of int64", function()
    local lo = 1 << 62
    local r = lt.randint(lo, lo + 3000, { 5000 })
    assert.is_true(r:min():item() >= lo and r:max():item() < lo + 3000)
    assert.is_true(r:max():item() - r:min():item() > 2900)
    local full = lt.randint(math.mininteger, math.maxinteger, { 1000 })
    assert.is_true(full:lt(0):sum():item() > 400 and full:gt(0):sum():item() > 400)
    local top = lt.randint(math.maxinteger - 1, math.maxinteger, { 10 }):tolist()
    for _, v in ipairs(top) do assert.are.equal(math.maxinteger - 1, v) end
  end)

  it("randint and randperm", function()
    lt.manual_seed(9)
    local r = lt.randint(10, { 20000 })
    assert.are.equal("int64", r.dtype)
    local m, _, v = stats(r)
    for i = 1, #v do assert(v[i] >= 0 and v[i] < 10) end
    assert.is_true(math.abs(m - 4.5) < 0.1)
    local r2 = lt.randint(-3, 3, { 2, 50 }, { dtype = "float32" })
    assert.are.equal("float32", r2.dtype)
    assert.are.same({ 2, 50 }, r2:size())
    for _, y in ipairs(r2:reshape(-1):tolist()) do assert(y >= -3 and y < 3) end
    assert.matches("randint: expected low < high", err_of(lt.randint, 5, 5, { 2 }))
    assert.matches("randint: expected a size table", err_of(lt.randint, 5, 3))
    -- randperm: the positions 1..n in random order
    local p = lt.randperm(50)
    assert.are.equal("int64", p.dtype)
    local sorted = p:tolist()
    table.sort(sorted)
    for i = 1, 50 do assert.are.equal(i, sorted[i]) end
    assert.are.same({ 0 }, lt.randperm(0):size())
    assert.are.equal("float64", lt.randperm(3, { dtype = "float64" }).dtype)
    local g = lt.Generator(4)
    local p1 = lt.randperm(20, { generator = g }):tolist()
    g:manual_seed(4)
    assert.are.same(p1, lt.randperm(20, { generator = g }):tolist())
    assert.matches("randperm: n must be non%-negative", err_of(lt.randperm, -1))
  end)
end)
