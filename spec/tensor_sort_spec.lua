-- sort, argsort and topk: PyTorch's answers (spec/fixtures/sort.lua, gen_sort.py) for ties,
-- NaN, signed zeros and infinities over dtypes, dims and layouts, with the gradients; a plain
-- Lua reference on rows long enough for every path of the kernel (insertion, radix, the heap of
-- topk and its vector pass over float rows); threads; float64 gradchecks; errors.
local lt = require "lantern"
local support = require "spec.support"
local fx = dofile("spec/fixtures/sort.lua")

-- Exact comparison, where NaN equals NaN and the sign of a zero counts.
local function same(a, b)
  if b ~= b then return a ~= a end
  if a ~= b then return false end
  if b == 0 and math.type(b) == "float" then return 1 / a == 1 / b end
  return true
end

local function check_list(got, want, what)
  assert.are.equal(#want, #got, what .. ": element count")
  for i = 1, #want do
    if not same(got[i], want[i]) then
      error(string.format("%s: element %d is %s, expected %s", what, i, tostring(got[i]),
        tostring(want[i])), 2)
    end
  end
end

local function flat(t) return t:reshape(-1):tolist() end

-- x as a tensor of the case's dtype and shape, contiguous or with its dims laid out in reverse
-- order in memory (the same values, every stride different)
local function make(c, layout)
  local t = lt.tensor(c.x, { dtype = c.dtype }):reshape(c.shape)
  if layout == "permuted" and #c.shape > 1 then
    local rev, back = {}, {}
    for d = #c.shape, 1, -1 do rev[#rev + 1] = d end
    for d = 1, #c.shape do back[rev[d]] = d end
    t = t:permute(rev):contiguous():permute(back)
    assert.is_false(t:is_contiguous())
  end
  return t
end

local function plus1(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v + 1 end
  return out
end

describe("sort against PyTorch", function()
  for _, layout in ipairs({ "contiguous", "permuted" }) do
    it("values, indices and gradient of every case (" .. layout .. ")", function()
      for _, c in ipairs(fx.sort) do
        local what = string.format("%s %s dim %d %s %s", c.name, c.dtype, c.dim,
          c.descending and "descending" or "ascending", layout)
        local x = make(c, layout)
        local float = c.dtype == "float32" or c.dtype == "float64"
        if float then x:requires_grad_() end
        local v, i = x:sort(c.dim, c.descending)
        assert.are.same(c.shape, v:size())
        assert.are.equal(c.dtype, v.dtype)
        assert.are.equal("int64", i.dtype)
        check_list(flat(v), c.values, what .. " values")
        check_list(flat(i), plus1(c.indices), what .. " indices")
        check_list(flat(x:detach():argsort({ dim = c.dim, descending = c.descending })),
          plus1(c.indices), what .. " argsort")
        if float then
          assert.are.equal("SortBackward0", v.grad_fn)
          local g = lt.arange(1, v:numel() + 1, { dtype = c.dtype }):reshape(c.shape)
          v:backward(g)
          check_list(flat(x.grad), c.grad, what .. " gradient")
        end
      end
    end)
  end
end)

describe("topk against PyTorch", function()
  for _, layout in ipairs({ "contiguous", "permuted" }) do
    it("values, indices and gradient of every case (" .. layout .. ")", function()
      for _, c in ipairs(fx.topk) do
        local what = string.format("%s k %d dim %d %s %s", c.dtype, c.k, c.dim,
          c.largest and "largest" or "smallest", layout)
        local x = make(c, layout)
        local float = c.dtype ~= "int64"
        if float then x:requires_grad_() end
        local v, i = x:topk(c.k, c.dim, c.largest)
        local want = { c.shape[1], c.shape[2] }
        want[c.dim] = c.k
        assert.are.same(want, v:size())
        check_list(flat(v), c.values, what .. " values")
        check_list(flat(i), plus1(c.indices), what .. " indices")
        if float and c.k > 0 then
          assert.are.equal("TopkBackward0", v.grad_fn)
          v:backward(lt.arange(1, v:numel() + 1, { dtype = c.dtype }):reshape(want))
          check_list(flat(x.grad), c.grad, what .. " gradient")
        end
      end
    end)
  end
end)

-- ------------------------------------------------------------ a plain Lua reference

-- NaN the largest, -0 equal to +0, ties by position: the order the kernel promises
local function rank(v)
  if v ~= v then return math.huge, 1 end
  if type(v) == "boolean" then return v and 1 or 0, 0 end
  return v, 0
end

local function ref_order(row, desc)
  local pos = {}
  for i = 1, #row do pos[i] = i end
  table.sort(pos, function(p, q)
    local a, an = rank(row[p])
    local b, bn = rank(row[q])
    if an ~= bn then
      if desc then return an > bn end
      return an < bn
    end
    if a ~= b then
      if desc then return a > b end
      return a < b
    end
    return p < q
  end)
  return pos
end

-- rows of a 2-d list along dim 2
local function rows_of(t)
  local out = {}
  for r, row in ipairs(t:tolist()) do out[r] = row end
  return out
end

-- n values of dtype with ties, NaN (floats), signed zeros and wide magnitudes mixed in
local function values_for(dtype, n, seed)
  local g = lt.Generator(seed)
  local u = lt.rand(n, { generator = g, dtype = "float64" }):tolist()
  local out = {}
  for i = 1, n do
    local r = u[i]
    if dtype == "bool" then
      out[i] = r < 0.5
    elseif dtype == "int64" then
      -- small ties, and values whose keys differ in every byte
      out[i] = r < 0.5 and math.floor(r * 20) - 5 or math.floor((r - 0.75) * 2 ^ 62)
    else
      local v = r < 0.3 and math.floor(r * 30) - 4.0 or (r - 0.5) * 10 ^ math.floor(r * 40 - 20)
      if i % 97 == 0 then v = 0 / 0 end
      if i % 89 == 0 then v = -0.0 end
      if i % 83 == 0 then v = -1 / 0 end
      out[i] = v
    end
  end
  return out
end

describe("sort and topk against a plain reference", function()
  local lengths = { 1, 2, 31, 32, 33, 200, 256, 257, 1000, 5000 }

  for _, dtype in ipairs({ "float32", "float64", "int64", "bool" }) do
    it("sort and topk of rows of every length, both orders (" .. dtype .. ")", function()
      for _, n in ipairs(lengths) do
        local vals = values_for(dtype, 2 * n, n)
        local t = lt.tensor(vals, { dtype = dtype }):reshape(2, n)
        -- float32 rounds the values; the reference orders what the tensor holds
        local rows = rows_of(t)
        for _, desc in ipairs({ false, true }) do
          local v, i = t:sort(2, desc)
          local vr, ir = rows_of(v), rows_of(i)
          for r = 1, 2 do
            local want = ref_order(rows[r], desc)
            check_list(ir[r], want, dtype .. " n " .. n .. " row " .. r .. " indices")
            local wv = {}
            for p, q in ipairs(want) do wv[p] = rows[r][q] end
            check_list(vr[r], wv, dtype .. " n " .. n .. " row " .. r .. " values")
          end
          -- topk: through the heap for k <= n / 8, the sort otherwise; the same first k
          for _, k in ipairs({ 1, math.max(1, n // 8), math.max(1, n // 8 + 1), n }) do
            local tv, ti = t:topk(k, 2, desc)
            local tvr, tir = rows_of(tv), rows_of(ti)
            for r = 1, 2 do
              local want = ref_order(rows[r], desc)
              local wi, wv = {}, {}
              for p = 1, k do wi[p], wv[p] = want[p], rows[r][want[p]] end
              local what = string.format("%s n %d k %d %s row %d", dtype, n, k,
                desc and "largest" or "smallest", r)
              check_list(tir[r], wi, what .. " topk indices")
              check_list(tvr[r], wv, what .. " topk values")
            end
          end
        end
      end
    end)
  end

  it("topk of a float row passes blocks of 16 only where nothing in them can enter", function()
    -- the threshold sits on a tie: equal values later in the row must not displace earlier
    -- ones; a NaN or a larger value inside a block must be found in any lane of it
    for _, dtype in ipairs({ "float32", "float64" }) do
      local n = 16 * 40
      local vals = {}
      for i = 1, n do vals[i] = (i % 5 == 0) and 7.0 or -(i % 13) end
      vals[16 * 20 + 3], vals[16 * 31 + 15], vals[16 * 35] = 9.0, 0 / 0, 8.0
      local t = lt.tensor(vals, { dtype = dtype })
      for _, k in ipairs({ 1, 3, 10, 50 }) do
        local v, i = t:topk(k)
        local want = ref_order(vals, true)
        local wi, wv = {}, {}
        for p = 1, k do wi[p], wv[p] = want[p], vals[want[p]] end
        check_list(i:tolist(), wi, dtype .. " k " .. k .. " indices")
        check_list(v:tolist(), wv, dtype .. " k " .. k .. " values")
        local sv, si = t:topk(k, 1, false)
        local up = ref_order(vals, false)
        for p = 1, k do wi[p], wv[p] = up[p], vals[up[p]] end
        check_list(si:tolist(), wi, dtype .. " smallest k " .. k .. " indices")
        check_list(sv:tolist(), wv, dtype .. " smallest k " .. k .. " values")
      end
    end
  end)

  it("rows along a dim with a stride, and 0-d, empty and zero-k results", function()
    local t = lt.tensor(values_for("float32", 3 * 70, 7)):reshape(70, 3)
    local v, i = t:sort(1, true)
    local tv, ti = t:t():contiguous():sort(2, true)
    check_list(flat(v:t()), flat(tv), "strided rows, values")   -- NaN among them
    assert.is_true(i:t():equal(ti))
    local kv, ki = t:topk(5, 1)
    check_list(flat(kv), flat(v:narrow(1, 1, 5)), "strided topk values")
    assert.is_true(ki:equal(i:narrow(1, 1, 5)))

    local s, si = lt.tensor(2.5):sort()
    assert.are.same({}, s:size())
    assert.are.equal(2.5, s:item())
    assert.are.equal(1, si:item())
    local e, ei = lt.zeros(3, 0):sort(2)
    assert.are.same({ 3, 0 }, e:size())
    assert.are.same({ 3, 0 }, ei:size())
    local z, zi = lt.randn(4, 6):topk(0)
    assert.are.same({ 4, 0 }, z:size())
    assert.are.equal("int64", zi.dtype)
  end)

  it("gives the same result on one thread and on several", function()
    local t = lt.tensor(values_for("float32", 512 * 300, 11)):reshape(512, 300)
    local before = lt.get_num_threads()
    lt.set_num_threads(1)
    local v1, i1 = t:sort(2)
    local k1, ki1 = t:topk(20, 1)
    lt.set_num_threads(2)
    local v2, i2 = t:sort(2)
    local k2, ki2 = t:topk(20, 1)
    lt.set_num_threads(before)
    assert.is_true(i1:equal(i2))
    assert.is_true(ki1:equal(ki2))
    check_list(flat(v2), flat(v1), "sort values")
    check_list(flat(k2), flat(k1), "topk values")
  end)
end)

describe("sort and topk gradients", function()
  local gradcheck = lt.autograd.gradcheck
  local function input(...)
    local n, shape = 1, { ... }
    for _, s in ipairs(shape) do n = n * s end
    local v = {}
    for i = 1, n do v[i] = ((i * 37) % 101) / 17 - 2.9 end
    return lt.tensor(v, { dtype = "float64" }):reshape(shape):requires_grad_()
  end

  it("float64 finite differences for every dim, order and layout", function()
    local x = input(3, 4, 5)
    for d = 1, 3 do
      for _, desc in ipairs({ false, true }) do
        assert.is_true(gradcheck(function(t) return (t:sort(d, desc)) end, { x }))
        assert.is_true(gradcheck(function(t) return (t:transpose(1, 3):sort(d, desc)) end, { x }))
        assert.is_true(gradcheck(function(t) return (t:topk(2, d, desc)) end, { x }))
        assert.is_true(gradcheck(function(t) return (t:transpose(1, 3):topk(3, d, desc)) end,
          { x }))
      end
    end
  end)

  it("indices carry no gradient, integer inputs no node", function()
    local x = input(4, 5)
    local _, i = x:sort()
    assert.is_false(i.requires_grad)
    assert.is_nil(x:argsort().grad_fn)
    local iv = lt.tensor({ 3, 1, 2 }, { dtype = "int64" }):sort()
    assert.is_nil(iv.grad_fn)
  end)
end)

describe("sort and topk arguments", function()
  local x = lt.randn(3, 4)

  it("take positional arguments or an options table, with lt.* forms", function()
    local a, ai = x:sort(1, true)
    local b, bi = x:sort({ dim = 1, descending = true, stable = true })
    local c, ci = lt.sort(x, 1, true)
    assert.is_true(a:equal(b) and a:equal(c) and ai:equal(bi) and ai:equal(ci))
    assert.is_true(lt.argsort(x, 1, true):equal(ai))
    local d, di = x:sort()   -- the last dim, ascending
    local e, ei = x:sort(-1, false)
    assert.is_true(d:equal(e) and di:equal(ei))
    local t1, i1 = x:topk(2, 1, false, true)
    local t2, i2 = x:topk(2, { dim = 1, largest = false, sorted = false })
    local t3, i3 = lt.topk(x, 2, 1, false)
    assert.is_true(t1:equal(t2) and t1:equal(t3) and i1:equal(i2) and i1:equal(i3))
  end)

  it("refuse bad arguments, naming the op and what was expected", function()
    support.expect_error(function() return x:topk(5) end, "topk", "k out of range", "k = 5",
      "4 elements")
    support.expect_error(function() return x:topk(-1) end, "topk", "negative", "-1")
    support.expect_error(function() return x:topk(1.5) end, "topk", "k must be an integer")
    support.expect_error(function() return x:topk() end, "topk", "k must be an integer", "no value")
    support.expect_error(function() return x:sort(3) end, "sort", "dimension 3 out of range")
    support.expect_error(function() return x:sort(0) end, "sort", "dimension 0 is not valid")
    support.expect_error(function() return x:sort(1, "yes") end, "sort", "descending",
      "boolean")
    support.expect_error(function() return x:argsort({ reverse = true }) end, "argsort",
      "unknown option 'reverse'")
    support.expect_error(function() return x:sort({ stable = 1 }) end, "sort", "stable",
      "boolean")
    support.expect_error(function() return x:topk(1, { dim = 1, largest = 1 }) end, "topk",
      "largest", "boolean")
    support.expect_error(function() return x:sort({ dim = { 1, 2 } }) end, "sort",
      "expected one dim")
  end)
end)

describe("searchsorted and bucketize", function()
  -- the 1-based insertion position of v in the ascending list s, in sort's order
  local function ref_pos(s, v, right)
    local r = 1
    for i = 1, #s do
      local a, an = rank(s[i])
      local b, bn = rank(v)
      local below = an < bn or (an == bn and a < b)
      local equal = an == bn and a == b
      if below or (right and equal) then r = i + 1 end
    end
    return r
  end

  it("gives the positions of the plain reference for both sides, dtypes and layouts", function()
    for _, dtype in ipairs({ "float32", "float64", "int64" }) do
      for _, n in ipairs({ 1, 2, 7, 64, 300 }) do
        local seq = lt.tensor(values_for(dtype, 3 * n, n + 1), { dtype = dtype }):reshape(3, n)
        seq = seq:sort(2)
        local vals = lt.tensor(values_for(dtype, 3 * 40, n + 2), { dtype = dtype }):reshape(3, 40)
        vals = vals:narrow(2, 1, 20) * 1   -- ties with the sequence: some values are its own
        vals = lt.cat({ vals, seq:narrow(2, 1, math.min(n, 5)) }, 2)
        local srows, vrows = rows_of(seq), rows_of(vals)
        for _, right in ipairs({ false, true }) do
          -- rows against rows, the sequence's rows strided, the values transposed and back
          local got = {
            lt.searchsorted(seq, vals, { right = right }),
            lt.searchsorted(seq:t():contiguous():t(), vals, { side = right and "right" or "left" }),
            lt.searchsorted(seq, vals:t():contiguous():t(), { right = right }),
          }
          for r = 1, 3 do
            local want = {}
            for i, v in ipairs(vrows[r]) do want[i] = ref_pos(srows[r], v, right) end
            for k, g in ipairs(got) do
              check_list(rows_of(g)[r], want, string.format("%s n %d right %s row %d form %d",
                dtype, n, tostring(right), r, k))
            end
          end
          -- one sequence for every row of values, and a number
          local one = lt.searchsorted(seq[2], vals, { right = right })
          for r = 1, 3 do
            local want = {}
            for i, v in ipairs(vrows[r]) do want[i] = ref_pos(srows[2], v, right) end
            check_list(rows_of(one)[r], want, dtype .. " shared sequence row " .. r)
          end
          local v1 = vrows[1][1]
          if v1 == v1 then
            local p = lt.searchsorted(seq[1], v1, { right = right })
            assert.are.same({}, p:size())
            assert.are.equal(ref_pos(srows[1], v1, right), p:item())
          end
        end
      end
    end
  end)

  it("places NaN last and -0 with +0, as sort orders them, and bucketizes", function()
    local s = lt.tensor({ -1.0, -0.0, 0.0, 2.0, 0 / 0 })
    check_list(lt.searchsorted(s, lt.tensor({ 0.0, -0.0, 0 / 0, 3.0, -5.0 })):tolist(),
      { 2, 2, 5, 5, 1 }, "left")
    check_list(lt.searchsorted(s, lt.tensor({ 0.0, -0.0, 0 / 0, 3.0, -5.0 }), { right = true })
      :tolist(), { 4, 4, 6, 5, 1 }, "right")
    -- positions into a sorted copy put each element at its own rank
    local x = lt.tensor(values_for("float32", 500, 3))
    local sorted = x:sort()
    local pos = lt.searchsorted(sorted, x, { right = true })
    local back, xs = sorted:gather(1, pos - 1):tolist(), x:tolist()
    for i = 1, #xs do   -- equal values (-0 and +0 among them), or both NaN
      assert.is_true(back[i] == xs[i] or (back[i] ~= back[i] and xs[i] ~= xs[i]), "element " .. i)
    end
    -- mixed dtypes compare in the common one; bucketize takes the arguments the other way
    check_list(lt.searchsorted(lt.tensor({ 1, 2, 3 }), lt.tensor({ 2.5, 2.0 })):tolist(), { 3, 2 },
      "int64 sequence, float values")
    local b = lt.tensor({ 1.0, 3.0, 5.0 })
    local v = lt.tensor({ { 0.0, 1.0, 4.0 }, { 5.0, 6.0, 3.0 } })
    assert.is_true(lt.bucketize(v, b):equal(lt.searchsorted(b, v)))
    local right = { right = true }
    assert.is_true(lt.bucketize(v, b, right):equal(lt.searchsorted(b, v, right)))
    check_list(lt.bucketize(v, b):reshape(-1):tolist(), { 1, 1, 3, 3, 4, 2 }, "bucketize")
    assert.are.same({ 0 }, lt.searchsorted(b, lt.zeros(0)):size())
  end)

  it("refuse bad arguments, naming the op and what was expected", function()
    local s = lt.tensor({ 1.0, 2.0, 3.0 })
    support.expect_error(function() return lt.searchsorted(lt.zeros(2, 3), lt.zeros(3, 1)) end,
      "searchsorted", "1-d or have the values' leading dims", "[2, 3]", "[3, 1]")
    support.expect_error(function() return lt.searchsorted(lt.tensor(1.0), lt.zeros(3)) end,
      "searchsorted", "at least one dimension")
    support.expect_error(function() return lt.searchsorted(s, 2, { side = "middle" }) end,
      "searchsorted", "side must be \"left\" or \"right\"", "middle")
    support.expect_error(function()
      return lt.searchsorted(s, 2, { side = "left", right = true })
    end,
      "searchsorted", "can't be set to opposites")
    support.expect_error(function() return lt.bucketize(s, s, { sid = "left" }) end,
      "bucketize", "unknown option 'sid'")
    support.expect_error(function() return lt.searchsorted(s, "x") end, "searchsorted",
      "Tensor or number expected")
    support.expect_error(function() return lt.searchsorted(s, 2, true) end, "searchsorted",
      "options table expected")
  end)
end)

describe("unique", function()
  -- the distinct values of a list in the order sort gives them (NaN last, one of them; -0 and
  -- +0 one value), with each element's 1-based group and the groups' sizes
  local function ref_unique(list)
    local order = ref_order(list, false)
    local vals, counts, group = {}, {}, {}
    for _, p in ipairs(order) do
      local v, last = list[p], vals[#vals]
      local same = #vals > 0 and (v == last or (v ~= v and last ~= last))
      if not same then
        vals[#vals + 1] = v
        counts[#counts + 1] = 0
      end
      counts[#counts] = counts[#counts] + 1
      group[p] = #vals
    end
    return vals, group, counts
  end

  it("gives the reference's values, inverse and counts over dtypes, shapes and layouts", function()
    for _, dtype in ipairs({ "float32", "float64", "int64", "bool" }) do
      for _, n in ipairs({ 1, 2, 40, 600 }) do
        local t = lt.tensor(values_for(dtype, n, n + 7), { dtype = dtype })
        local views = { t }
        if n % 20 == 0 then views[2] = t:reshape(n // 20, 20):t() end
        for k, x in ipairs(views) do
          local what = dtype .. " n " .. n .. " view " .. k
          local list = x:reshape(-1):tolist()
          local want_v, want_g, want_c = ref_unique(list)
          local v, inv, c = x:unique({ return_inverse = true, return_counts = true })
          check_list(v:tolist(), want_v, what .. " values")
          assert.are.same(x:size(), inv:size(), what)
          check_list(inv:reshape(-1):tolist(), want_g, what .. " inverse")
          check_list(c:tolist(), want_c, what .. " counts")
          check_list(lt.unique(x):tolist(), want_v, what .. " values alone")
          local _, c2 = lt.unique(x, { return_counts = true })
          check_list(c2:tolist(), want_c, what .. " counts without inverse")
        end
      end
    end
  end)

  -- 1024 elements and more with at most an eighth as many distinct values are hashed on the
  -- cpu (unique_few in src/cpu/sort.c), more are sorted: both must give the reference's answer
  it("hashes few distinct values: the same answer, table growth, the fallback past its room",
    function()
    local cases = {   -- n, distinct values drawn from
      { 1031, 7 }, { 5000, 300 }, { 40000, 3000 }, { 4000, 2000 }, { 3000, 376 },
    }
    for _, dtype in ipairs({ "float32", "float64", "int64", "bool" }) do
      for _, c in ipairs(cases) do
        local n, k = c[1], c[2]
        local g = lt.Generator(n + k)
        local u = lt.randint(0, k, { n }, { generator = g }):tolist()
        local list = {}
        for i = 1, n do
          local v = u[i]
          if dtype == "bool" then
            list[i] = v % 2 == 1
          elseif dtype == "int64" then
            list[i] = (v - k // 2) * 2 ^ 40 + v   -- keys that differ in high and low bytes
          else
            list[i] = (v - k / 2) / 4
            if i % 61 == 0 then list[i] = 0 / 0 end
            if i % 53 == 0 then list[i] = -0.0 end
            if i % 59 == 0 then list[i] = 1 / 0 end
          end
        end
        local x = lt.tensor(list, { dtype = dtype })
        local views = { x }
        if n % 8 == 0 then views[2] = x:reshape(n // 8, 8):t() end
        for vi, t in ipairs(views) do
          local what = dtype .. " n " .. n .. " of " .. k .. " view " .. vi
          local want_v, want_g, want_c = ref_unique(t:reshape(-1):tolist())
          local v, inv, cnt = t:unique({ return_inverse = true, return_counts = true })
          check_list(v:tolist(), want_v, what .. " values")
          assert.are.same(t:size(), inv:size(), what)
          check_list(inv:reshape(-1):tolist(), want_g, what .. " inverse")
          check_list(cnt:tolist(), want_c, what .. " counts")
          check_list(lt.unique(t):tolist(), want_v, what .. " values alone")
          local _, c2 = lt.unique(t, { return_counts = true })
          check_list(c2:tolist(), want_c, what .. " counts without inverse")
        end
      end
    end
  end)

  it("takes 0-d and empty inputs, and refuses a dim", function()
    local v, inv = lt.tensor(5.0):unique({ return_inverse = true })
    assert.are.same({ 5.0 }, v:tolist())
    assert.are.same({}, inv:size())
    assert.are.equal(1, inv:item())
    local ev, ei, ec = lt.zeros({ 0, 3 }):unique({ return_inverse = true, return_counts = true })
    assert.are.same({ 0 }, ev:size())
    assert.are.same({ 0, 3 }, ei:size())
    assert.are.same({ 0 }, ec:size())
    support.expect_error(function() return lt.randn(3):unique({ dim = 1 }) end, "unique",
      "dim is not supported")
    support.expect_error(function() return lt.randn(3):unique({ counts = true }) end, "unique",
      "unknown option 'counts'")
  end)
end)
