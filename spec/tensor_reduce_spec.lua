-- Reductions: sum mean prod amax amin all any, max/min (full and along a dim), argmax/argmin,
-- var/std, norm, logsumexp, softmax/log_softmax, cumsum. Hand-computed values, PyTorch
-- fixtures over every dims subset and three layouts, dtype rules and bad-input errors.
local lt = require "lantern"

local function flat(t)
  if t.dtype == "bool" then return t:reshape(-1):tolist() end
  return t:double():reshape(-1):tolist()
end

-- compares tensor a with a flat list (or tensor) b elementwise, NaN equal to NaN
local function close(a, b, tol)
  tol = tol or 1e-6
  local x = flat(a)
  local y = lt.is_tensor(b) and flat(b) or b
  assert.are.equal(#y, #x, "element count")
  for i = 1, #x do
    local u, v = x[i], y[i]
    if type(v) == "boolean" then
      if u ~= v then error(string.format("element %d: %s vs %s", i, tostring(u), tostring(v)), 2) end
    elseif v ~= v then
      if u == u then error(string.format("element %d: %g vs nan", i, u), 2) end
    elseif v == math.huge or v == -math.huge then
      if u ~= v then error(string.format("element %d: %g vs %g", i, u, v), 2) end
    elseif math.abs(u - v) > tol * (1 + math.abs(v)) then
      error(string.format("element %d: %.17g vs %.17g", i, u, v), 2)
    end
  end
end

local function shape(t) return t.shape end

local function errmsg(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

describe("sum/mean/prod/amax/amin/all/any by hand", function()
  local x = lt.tensor({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })

  it("reduce over all dims to a 0-dim tensor", function()
    local s = x:sum()
    assert.are.same({}, shape(s))
    assert.are.equal(21, s:item())
    assert.are.equal(3.5, x:mean():item())
    assert.are.equal(720, x:prod():item())
    assert.are.equal(6, x:amax():item())
    assert.are.equal(1, x:amin():item())
    assert.is_true(x:all():item())
    assert.is_true(x:any():item())
  end)

  it("reduce along one dim, with and without keepdim", function()
    close(x:sum(1), { 5, 7, 9 })
    assert.are.same({ 3 }, shape(x:sum(1)))
    close(x:sum(2), { 6, 15 })
    assert.are.same({ 2, 1 }, shape(x:sum(2, true)))
    close(x:sum(-1, true), { 6, 15 })
    close(x:mean(1), { 2.5, 3.5, 4.5 })
    close(x:prod(2), { 6, 120 })
    close(x:amax(1), { 4, 5, 6 })
    close(x:amin(2), { 1, 4 })
  end)

  it("accepts a list of dims, an options table and keepdim for all dims", function()
    close(x:sum({ 1, 2 }), { 21 })
    assert.are.same({}, shape(x:sum({ 1, 2 })))
    assert.are.same({ 1, 1 }, shape(x:sum({ 1, 2 }, true)))
    assert.are.same({ 1, 1 }, shape(x:sum(nil, true)))
    assert.are.same({ 1, 3 }, shape(x:sum({ dim = 1, keepdim = true })))
    assert.are.same({ 2, 1 }, shape(x:mean(2, { keepdim = true })))
    close(x:sum({ dim = { 2, 1 } }), { 21 })
    close(lt.sum(x, 1), { 5, 7, 9 })
    close(lt.mean(x), { 3.5 })
  end)

  it("reduces size-1 and leading dims (the ltO_sum_to patterns)", function()
    local y = lt.ones(1, 3, 1, 2)
    close(y:sum(1), { 1, 1, 1, 1, 1, 1 })
    assert.are.same({ 3, 1, 2 }, shape(y:sum(1)))
    assert.are.same({ 1, 3, 1, 1 }, shape(y:sum({ 3, 4 }, true)))
    close(y:sum({ 1, 3 }, true), { 1, 1, 1, 1, 1, 1 })
    local z = lt.arange(24):double():reshape(2, 3, 4)
    close(z:sum({ 1, 2 }), { 60, 66, 72, 78 })
    close(z:sum({ 1, 3 }), { 60, 92, 124 })
  end)

  it("handles all/any truthiness of floats, ints and bools", function()
    local f = lt.tensor({ { 0.0, 1.0 }, { 0.0, 0.0 } })
    close(f:any(2), { true, false })
    close(f:all(1), { false, false })
    local b = lt.tensor({ true, false, true })
    assert.is_false(b:all():item())
    assert.is_true(b:any():item())
    assert.are.equal("bool", lt.tensor({ 1, 2 }):all().dtype)
    local nan = lt.tensor({ 0 / 0, 1.0 })
    assert.is_true(nan:all():item())
  end)

  it("reduces empty dims to the identity", function()
    local e = lt.zeros(2, 0)
    close(e:sum(2), { 0, 0 })
    close(e:prod(2), { 1, 1 })
    close(e:mean(2), { 0 / 0, 0 / 0 })
    close(e:all(2), { true, true })
    close(e:any(2), { false, false })
    assert.are.same({ 0 }, shape(e:sum(1)))
  end)

  it("works on 0-dim tensors with dim 1 or -1", function()
    local s = lt.tensor(5.0)
    assert.are.equal(5, s:sum():item())
    assert.are.equal(5, s:sum(1):item())
    assert.are.same({}, shape(s:sum(-1, true)))
  end)
end)

describe("dtype rules", function()
  it("sums integers and bools to int64", function()
    local i = lt.tensor({ 1, 2, 3 })
    assert.are.equal("int64", i:sum().dtype)
    assert.are.equal(6, i:sum():item())
    assert.are.equal("int64", lt.tensor({ true, true, false }):sum().dtype)
    assert.are.equal(2, lt.tensor({ true, true, false }):sum():item())
    assert.are.equal("int64", lt.tensor({ true, true }):prod().dtype)
    assert.are.equal("bool", lt.tensor({ true, false }):amax().dtype)
    assert.are.equal("float32", lt.tensor({ 1.5 }):sum().dtype)
    assert.are.equal("float64", lt.tensor({ 1.5 }, { dtype = "float64" }):sum().dtype)
  end)

  it("sums int64 exactly beyond 2^53", function()
    local big = lt.tensor({ 9007199254740993, 1 })
    assert.are.equal(9007199254740994, big:sum():item())
  end)

  it("refuses the mean of an integer tensor as PyTorch does", function()
    local msg = errmsg(function() return lt.tensor({ 1, 2 }):mean() end)
    assert.matches("mean%(%)", msg)
    assert.matches("int64", msg)
  end)

  it("accumulates long float32 sums accurately", function()
    local n = 1000003
    local s = lt.ones(n):sum():item()
    assert.are.equal(n, s)
    local t = lt.full({ n }, 0.1):sum():item()
    assert.is_true(math.abs(t - n * 0.1) < 1e-2, tostring(t))
    -- sum over a long leading dim (column mode, chunked)
    local c = lt.full({ 200000, 3 }, 0.1):sum(1)
    close(c, { 20000, 20000, 20000 }, 1e-6)
  end)

  it("gives the same bits with 1 or 2 threads", function()
    local old = lt.get_num_threads()
    local x = lt.randn(300000)
    local y = lt.randn(700, 500):t()
    lt.set_num_threads(1)
    local a1, b1, c1 = x:sum():item(), y:sum(1), y:sum(2)
    lt.set_num_threads(2)
    local a2, b2, c2 = x:sum():item(), y:sum(1), y:sum(2)
    lt.set_num_threads(old)
    assert.are.equal(a1, a2)
    assert.is_true(lt.equal(b1, b2))
    assert.is_true(lt.equal(c1, c2))
  end)

  -- one wide matrix of at most 1024 rows reduced down its rows is a single block of columns
  -- at one thread; at two the columns are cut into narrower blocks (the narrow kernel takes
  -- blocks of 256 or fewer: 300 columns split into 160 and 140). A column whose float32
  -- partials overflow is summed again alone, so the others keep their bits wherever the
  -- blocks fall.
  it("gives the same bits down the rows of one wide matrix at 1 or 2 threads", function()
    local old = lt.get_num_threads()
    finally(function() lt.set_num_threads(old) end)
    for _, cols in ipairs({ 1000, 300, 37 * 16 + 5 }) do
      local x = lt.randn(1000, cols) * 1e3
      x[7][5] = 1 / 0
      x[9][9] = 3e38   -- both in the first block: at two threads the second keeps its passes
      x[10][9] = 3e38
      local xi = (x * 10):to("int64")
      local function all()
        return { x:sum(1), x:mean(1), x:amax(1), x:amin(1), x:prod(1), x:sum(1, true), xi:sum(1),
          xi:amax(1), (x:narrow(2, 2, cols - 1)):sum(1) }
      end
      lt.set_num_threads(1)
      local one = all()
      lt.set_num_threads(2)
      local two = all()
      for k = 1, #one do assert.is_true(lt.equal(one[k], two[k]), cols .. " case " .. k) end
      -- and the sums are right, against float64's (the overflowing column is inf in both)
      local want = x:double():sum(1)
      local fin = want:lt(3e38)
      local err = (two[1]:double() - want):abs():masked_fill(fin:logical_not(), 0)
      assert.is_true(err:max():item() <= 1e-6 * x:abs():masked_fill(x:abs():gt(1e30), 0):sum(1):max():item())
      assert.are.equal(1 / 0, two[1][5]:item())
      assert.are.equal(1 / 0, two[1][9]:item())
    end
  end)
end)

-- Reference reduction in plain Lua over a contiguous copy: every element is folded into the
-- output its kept coordinates name.
local function ref_reduce(x, dims, op)
  local sh = x.shape
  local nd = #sh
  local red = {}
  for _, d in ipairs(dims) do red[d < 0 and d + nd + 1 or d] = true end
  local vals = x:contiguous():reshape(-1):tolist()
  local oshape, ostride = {}, {}
  for d = 1, nd do if not red[d] then oshape[#oshape + 1] = sh[d] end end
  local acc, cnt = {}, {}
  local idx = {}
  for d = 1, nd do idx[d] = 0 end
  for i = 1, #vals do
    local o, mul = 0, 1
    for d = nd, 1, -1 do
      if not red[d] then
        o = o + idx[d] * mul
        mul = mul * sh[d]
      end
    end
    o = o + 1
    local v = vals[i]
    if type(v) == "boolean" then v = v and 1 or 0 end
    local a = acc[o]
    if a == nil then
      if op == "all" or op == "any" then acc[o] = v ~= 0 else acc[o] = v end
    elseif op == "sum" or op == "mean" then acc[o] = a + v
    elseif op == "prod" then acc[o] = a * v
    elseif op == "amax" then acc[o] = (v ~= v or a ~= a) and 0 / 0 or math.max(a, v)
    elseif op == "amin" then acc[o] = (v ~= v or a ~= a) and 0 / 0 or math.min(a, v)
    elseif op == "all" then acc[o] = a and v ~= 0
    elseif op == "any" then acc[o] = a or v ~= 0
    end
    cnt[o] = (cnt[o] or 0) + 1
    for d = nd, 1, -1 do
      idx[d] = idx[d] + 1
      if idx[d] < sh[d] then break end
      idx[d] = 0
    end
  end
  if op == "mean" then for k, v in pairs(acc) do acc[k] = v / cnt[k] end end
  return acc, oshape
end

describe("kernel modes (inner, column, chunked) against a plain Lua reference", function()
  local function check(x, label)
    local nd = x:dim()
    local sets = {}
    for mask = 1, (1 << nd) - 1 do
      local d = {}
      for k = 1, nd do if mask & (1 << (k - 1)) ~= 0 then d[#d + 1] = k end end
      sets[#sets + 1] = d
    end
    local ops = x.dtype == "float64" and { "sum", "mean", "prod", "amax", "amin", "all", "any" }
      or { "sum", "prod", "amax", "amin", "all", "any" }
    for _, d in ipairs(sets) do
      for _, op in ipairs(ops) do
        local want, oshape = ref_reduce(x, d, op)
        local got = x[op](x, d)
        assert.are.same(oshape, got.shape)
        local ok, err = pcall(close, got, want, 1e-9)
        if not ok then error(label .. " " .. op .. " dims {" .. table.concat(d, ",") .. "}: " .. err) end
      end
    end
  end

  it("cover long kept dims, short runs, leading dims and chunked partials", function()
    local function data(n, int)
      local v = {}
      for i = 1, n do v[i] = int and ((i * 7919) % 23 - 11) or (((i * 7919) % 1009) / 500 - 1) end
      return v
    end
    local function make(shape, dtype)
      local n = 1
      for _, s in ipairs(shape) do n = n * s end
      return lt.tensor(data(n, dtype == "int64"), { dtype = dtype }):reshape(shape)
    end
    for _, dt in ipairs({ "float64", "int64" }) do
      check(make({ 50, 40 }, dt), dt .. " [50,40]")
      check(make({ 40, 50 }, dt):t(), dt .. " [40,50]^T")
      check(make({ 7, 3, 33 }, dt), dt .. " [7,3,33]")
      check(make({ 33, 7, 3 }, dt):permute(2, 3, 1), dt .. " [33,7,3] permuted")
      check(make({ 2, 20, 17 }, dt):transpose(1, 3), dt .. " [2,20,17]^T")
      check(make({ 1100, 20 }, dt), dt .. " [1100,20]")
      check(make({ 20, 1, 18 }, dt), dt .. " [20,1,18]")
      check(make({ 6, 40 }, dt):narrow(2, 3, 30), dt .. " narrowed")
    end
    -- chunked inner reduction (N > 32768) and chunked column reduction
    local big = make({ 2, 40000 }, "float64")
    close(big:sum(2), ref_reduce(big, { 2 }, "sum"), 1e-9)
    close(big:t():sum(1), ref_reduce(big, { 2 }, "sum"), 1e-9)
    close(big:amax(2), ref_reduce(big, { 2 }, "amax"), 0)
    local tall = make({ 3000, 24 }, "float64")
    close(tall:sum(1), ref_reduce(tall, { 1 }, "sum"), 1e-9)
    close(tall:amin(1), ref_reduce(tall, { 1 }, "amin"), 0)
    -- NaN propagates through every mode
    local n = make({ 40, 50 }, "float64")
    n[3][7] = 0 / 0
    close(n:amax(1), ref_reduce(n, { 1 }, "amax"), 0)
    close(n:amin(2), ref_reduce(n, { 2 }, "amin"), 0)
    close(n:t():amax(2), ref_reduce(n, { 1 }, "amax"), 0)
    local f = make({ 40, 50 }, "float64"):float()
    f[5][9] = 0 / 0
    close(f:amax(2), ref_reduce(f, { 2 }, "amax"), 0)
    close(f:amin(1), ref_reduce(f, { 1 }, "amin"), 0)
  end)

  -- a float32 partial of eight can overflow where the sum in double is finite: such sums are
  -- taken again with every element in double (rows, whole tensors and columns), while a sum
  -- with an infinity or a NaN in it stays one
  it("sum float32 values whose partials of eight would overflow as float64 does", function()
    local big = 3e38
    local x = lt.zeros(128)
    x[1], x[33], x[65], x[97] = big, big, -big, -big
    assert.are.equal(0, x:sum():item())
    for _, c in ipairs { { { 256 }, nil }, { { 64, 300 }, 2 }, { { 8, 16 }, 1 }, { { 3, 17, 40 }, 2 } } do
      local t = lt.full(c[1], big)
      local m = c[2] and t:mean(c[2]) or t:mean()
      local want = t:double():mean(c[2])
      assert.is_true((m:double() - want):abs():max():item() <= big * 1e-6, table.concat(c[1], "x"))
    end
    assert.are.equal(1 / 0, lt.tensor({ 1 / 0, 1 }):sum():item())
    local n = lt.tensor({ 0 / 0, 1 }):sum():item()
    assert.is_true(n ~= n)
    assert.are.equal(1 / 0, lt.full({ 8, 16 }, 1 / 0):sum(1)[3]:item())
  end)

  -- float32 column sums add eight rows per pass in float32 and the passes in float64: within
  -- README's bound of the float64 sum at every row count (a row skipped or counted twice is far
  -- outside it), and each leading position's columns get the bits of that slice summed alone
  it("sum float32 columns within the documented bound of float64", function()
    lt.manual_seed(8)
    for _, rows in ipairs { 1, 2, 3, 4, 5, 7, 8, 9, 17, 1023, 40001 } do
      for _, cols in ipairs { 1, 3, 17, 384 } do
        if rows * cols <= 400000 then
          local x = lt.randn(rows, cols) * 100
          local ref, abs = x:double():sum(1), x:double():abs():sum(1)
          local bound = abs * (7 * 2 ^ -24) + ref:abs() * 2 ^ -24
          local excess = ((x:sum(1):double() - ref):abs() - bound):max():item()
          assert.is_true(excess <= 0, rows .. "x" .. cols .. ": " .. excess)
          excess = ((x:mean(1):double() - ref / rows):abs() - bound / rows):max():item()
          assert.is_true(excess <= 0, rows .. "x" .. cols .. " mean: " .. excess)
          local x3 = lt.randn(2, rows, cols)
          local s3 = x3:sum(2)
          for i = 1, 2 do
            assert.are.same(x3[i]:contiguous():sum(1):tolist(), s3[i]:tolist(), rows .. "x" .. cols)
          end
        end
      end
    end
  end)
  -- a run of evenly spaced rows no wider than 256 columns is summed 16, 8, 4 or 1 columns at a
  -- time across all rows; rows that are not evenly spaced (two reduced dims that do not merge)
  -- take a call per eight rows: in the same order the two give the same bits
  it("sum narrow column blocks with the bits of the pass-by-pass walk", function()
    lt.manual_seed(21)
    for _, w in ipairs { 8, 12, 16, 17, 31, 64, 200, 256, 300 } do   -- column mode from 8
      for _, b in ipairs { 1, 5, 9, 700 } do
        local x = lt.randn(3, 2, b, w) * 10
        local walked = x:sum({ 1, 3 })
        local even = x:permute(2, 1, 3, 4):contiguous():reshape(2, 3 * b, w)
        assert.are.same(walked:tolist(), even:sum(2):tolist(), w .. " columns, " .. b .. " rows")
        local ref = even:double():sum(2)
        local bound = even:double():abs():sum(2) * (7 * 2 ^ -24) + ref:abs() * 2 ^ -24
        assert.is_true(((even:sum(2):double() - ref):abs() - bound):max():item() <= 0)
      end
    end
  end)
end)

describe("float32 sums and means of rows", function()
  -- rows taken a block at a time (whole contiguous rows) give each row the bits of its sum
  -- alone, whatever the row length (around the 32 lanes), the kept dims' layout or the threads
  it("give each row the bits of that row summed alone", function()
    local function bits(v) return string.format("%a", v) end
    local before = lt.get_num_threads()
    for _, nt in ipairs({ 1, 2 }) do
      lt.set_num_threads(nt)
      for _, n in ipairs({ 1, 5, 31, 32, 33, 100, 257 }) do
        local x = lt.randn(6, 70, n) * 1e3
        local views = { x, x:permute(2, 1, 3), x:narrow(1, 2, 3) }
        for k, v in ipairs(views) do
          for _, op in ipairs({ "sum", "mean" }) do
            local got = v[op](v, 3)
            local rows = v:reshape(-1, n)
            local flat = got:reshape(-1):tolist()
            for r = 1, rows:size(1), 7 do
              local alone = rows[r][op](rows[r])
              assert.are.equal(bits(alone:item()), bits(flat[r]),
                string.format("%s n %d view %d row %d threads %d", op, n, k, r, nt))
            end
          end
        end
      end
    end
    lt.set_num_threads(before)
  end)
end)

describe("non-contiguous inputs", function()
  it("match a contiguous copy for every reduction", function()
    local base = lt.randn(4, 5, 6, { dtype = "float64" })
    local views = {
      base:transpose(1, 3),
      base:narrow(2, 2, 3),
      base:permute(2, 3, 1),
      base:select(2, 3),
      lt.randn(3, 1, 4, { dtype = "float64" }):expand(3, 5, 4),
    }
    for _, v in ipairs(views) do
      local c = v:contiguous()
      for d = 1, v:dim() do
        close(v:sum(d), c:sum(d), 1e-12)
        close(v:mean(d, true), c:mean(d, true), 1e-12)
        close(v:prod(d), c:prod(d), 1e-12)
        close(v:amax(d), c:amax(d), 0)
        close(v:var(d), c:var(d), 1e-10)
        close(v:norm(2, d), c:norm(2, d), 1e-12)
        close(v:logsumexp(d), c:logsumexp(d), 1e-12)
        close(v:softmax(d), c:softmax(d), 1e-12)
        close(v:log_softmax(d), c:log_softmax(d), 1e-12)
        close(v:cumsum(d), c:cumsum(d), 1e-12)
        local v1, i1 = v:max(d)
        local v2, i2 = c:max(d)
        close(v1, v2, 0)
        close(i1, i2, 0)
      end
      close(v:sum({ 1, v:dim() }), c:sum({ 1, v:dim() }), 1e-12)
      close(v:sum(), c:sum(), 1e-12)
      assert.are.equal(c:argmax():item(), v:argmax():item())
    end
  end)
end)

describe("PyTorch fixtures", function()
  local cases = dofile("spec/fixtures/reduce.lua")

  local function build(c)
    local n = 1
    for _, s in ipairs(c.shape) do n = n * s end
    local vals = {}
    for i = 0, n - 1 do
      if c.dtype == "int64" then
        vals[i + 1] = (i * 37) % 101 - 50
      else
        vals[i + 1] = ((i * 37) % 101) / 8 - 6
      end
    end
    local x = lt.tensor(vals, { dtype = c.dtype }):reshape(c.shape)
    local function rev(t)
      local p = {}
      for d = t:dim(), 1, -1 do p[#p + 1] = d end
      return t:permute(p)
    end
    if c.view == "perm" then
      x = rev(x)
    elseif c.view == "narrow" then
      x = rev(x:narrow(-1, 2, x.shape[x:dim()] - 1))
    end
    return x
  end

  local function run(c, x)
    local a = c.args
    local op = c.op
    if op == "max_dim" then return { x:max(a.dim, a.keepdim) } end
    if op == "min_dim" then return { x:min(a.dim, a.keepdim) } end
    if op == "max" or op == "min" then return { x[op](x) } end
    if op == "argmax" or op == "argmin" then
      if a.dim then return { x[op](x, a.dim, a.keepdim) } end
      return { x[op](x) }
    end
    if op == "softmax" or op == "log_softmax" or op == "cumsum" then return { x[op](x, a.dim) } end
    if op == "norm" then return { x:norm(a.p, a.dims, a.keepdim) } end
    if op == "var" or op == "std" then return { x[op](x, a.dims, { keepdim = a.keepdim }) } end
    return { x[op](x, a.dims, a.keepdim) }
  end

  it("agree on " .. #cases .. " cases", function()
    for k, c in ipairs(cases) do
      local x = build(c)
      local ok, outs = pcall(run, c, x)
      if not ok then error(string.format("case %d (%s %s %s): %s", k, c.op, c.dtype, c.view, outs)) end
      for j, o in ipairs(outs) do
        local want = c.out[j]
        if c.op:match("^arg") or j == 2 then   -- torch's 0-based indices
          for i = 1, #want do want[i] = want[i] + 1 end
        end
        local tol = c.dtype == "float32" and 1e-5 or 1e-12
        local ok2, err = pcall(close, o, want, tol)
        if not ok2 then
          error(string.format("case %d (%s %s %s dims=%s keepdim=%s) output %d: %s", k, c.op,
                c.dtype, c.view, table.concat(c.args.dims or { c.args.dim or 0 }, ","),
                tostring(c.args.keepdim), j, err))
        end
        assert.are.same(c.oshape[j], o.shape, "shape of case " .. k)
        assert.are.equal(c.odtype[j], o.dtype, "dtype of case " .. k)
      end
    end
  end)
end)

describe("max/min/argmax/argmin", function()
  local x = lt.tensor({ { 1.0, 5.0, 5.0 }, { 7.0, 0.0, 7.0 } })

  it("returns a 0-dim tensor without dim", function()
    local m = x:max()
    assert.are.same({}, m.shape)
    assert.are.equal(7, m:item())
    assert.are.equal(0, x:min():item())
  end)

  it("returns values and 1-based indices along a dim, first of ties", function()
    local v, i = x:max(2)
    close(v, { 5, 7 })
    close(i, { 2, 1 })
    assert.are.equal("int64", i.dtype)
    local v2, i2 = x:min(1, true)
    assert.are.same({ 1, 3 }, v2.shape)
    close(v2, { 1, 0, 5 })
    close(i2, { 1, 2, 1 })
    local v3, i3 = x:max({ dim = -1, keepdim = true })
    assert.are.same({ 2, 1 }, v3.shape)
    close(i3, { 2, 1 })
  end)

  it("gives 1-based argmax/argmin over all dims or along a dim", function()
    assert.are.equal(4, x:argmax():item())    -- flattened position of the first 7
    assert.are.equal(5, x:argmin():item())
    close(x:argmax(2), { 2, 1 })
    close(x:argmin(1), { 1, 2, 1 })
    assert.are.same({ 2, 1 }, x:argmax(2, true).shape)
    assert.are.same({ 1, 1 }, x:argmax(nil, true).shape)
  end)

  it("treats NaN as the largest and smallest value", function()
    local n = lt.tensor({ 1.0, 0 / 0, 3.0 })
    assert.is_true(n:max():item() ~= n:max():item())
    assert.are.equal(2, n:argmax():item())
    assert.are.equal(2, n:argmin():item())
    local _, i = n:max(1)
    assert.are.equal(2, i:item())
  end)

  it("works on int64 and bool", function()
    local i = lt.tensor({ { 3, -2 }, { 4, 9 } })
    local v, idx = i:max(1)
    close(v, { 4, 9 })
    close(idx, { 2, 2 })
    assert.are.equal("int64", v.dtype)
    assert.are.equal(-2, i:min():item())
    assert.are.equal(2, lt.tensor({ false, true }):argmax():item())
  end)

  it("with a tensor argument is elementwise maximum/minimum", function()
    local a, b = lt.tensor({ 1.0, 5.0 }), lt.tensor({ 3.0, 2.0 })
    close(a:max(b), { 3, 5 })
    close(a:min(b), { 1, 2 })
  end)

  -- a dim other than the last of a contiguous tensor is searched a block of columns at a
  -- time; the same tensor with that dim moved last takes the row search: same answers
  it("along an outer dim, answers as along the last one (ties, NaN, dtypes, blocks)", function()
    lt.manual_seed(13)
    for _, dt in ipairs { "float32", "float64", "int64" } do
      for _, shape in ipairs { { 50, 300 }, { 3, 40, 9 }, { 7, 5 }, { 1, 2, 600 } } do
        local x = (lt.randn(table.unpack(shape)) * 3):round():to(dt)   -- many ties
        if dt ~= "int64" then
          local flat = x:view(-1)
          for i = 1, flat:numel(), 37 do flat[i] = 0 / 0 end
        end
        local dim = #shape - 1
        local moved = x:movedim(dim, -1):contiguous()
        for _, f in ipairs { "max", "min" } do
          local v, i = x[f](x, dim)
          local mv, mi = moved[f](moved, -1)
          assert.are.same(mi:tolist(), i:tolist(), f .. " " .. dt .. " " .. table.concat(shape, "x"))
          assert.is_true(v:equal(mv) or v:isnan():any():item(), f .. " values")
          assert.are.same(mi:tolist(), x[f == "max" and "argmax" or "argmin"](x, dim):tolist())
        end
      end
    end
  end)

  -- contiguous float rows of 16 or more take two vectorised passes (the extreme, then its
  -- first position); strided rows the element loop: both give the rule's answer, the first
  -- NaN, else the first of the equal best values, -0 and +0 counting as equal
  it("along contiguous rows, answers as the element rule (ties, NaN, signed zeros)", function()
    lt.manual_seed(17)
    local function hex(v) return v ~= v and "nan" or string.format("%a", v) end
    local function rule(row, is_max)
      local bi = 1
      if row[1] ~= row[1] then return 1 end
      for i = 2, #row do
        local v = row[i]
        if v ~= v then return i end
        if (is_max and v > row[bi]) or (not is_max and v < row[bi]) then bi = i end
      end
      return bi
    end
    for _, dt in ipairs { "float32", "float64" } do
      for _, n in ipairs { 15, 16, 17, 40, 1000 } do
        local x = (lt.randn(24, n) * 2):round():to(dt)   -- many ties and zeros
        x[3]:fill_(0)
        x[3][n - 1] = -0.0
        x[4]:fill_(-0.0)
        x[4][n] = 0.0
        x[5][n] = 0 / 0
        x[6][1] = 0 / 0
        x[7]:fill_(1 / 0)
        x[8][n // 2] = -1 / 0
        local strided = x:t():contiguous():t()   -- the same rows, not contiguous
        local rows = x:tolist()
        for _, f in ipairs { "max", "min" } do
          local v, i = x[f](x, 2)
          local sv, si = strided[f](strided, 2)
          assert.are.same(si:tolist(), i:tolist(), f .. " " .. dt .. " " .. n)
          local vl, svl = v:tolist(), sv:tolist()
          for r = 1, #rows do
            assert.are.equal(rule(rows[r], f == "max"), i[r]:item(), f .. " row " .. r)
            assert.are.equal(hex(svl[r]), hex(vl[r]), f .. " value row " .. r)
            assert.are.equal(hex(rows[r][i[r]:item()]), hex(vl[r]))
          end
          assert.are.same(i:tolist(), x[f == "max" and "argmax" or "argmin"](x, 2):tolist())
          local flat = x:reshape(-1)
          local want = rule(flat:tolist(), f == "max")
          assert.are.equal(want, flat[f == "max" and "argmax" or "argmin"](flat):item())
        end
      end
    end
  end)

  it("finds the first best across chunks of a long tensor", function()
    local t = lt.zeros(100000)
    t[70001] = 2
    t[90001] = 2
    assert.are.equal(70001, t:argmax():item())
    t[3] = -1
    assert.are.equal(3, t:argmin():item())
  end)
end)

describe("var/std", function()
  local x = lt.tensor({ { 1.0, 2.0, 3.0, 4.0 }, { 2.0, 4.0, 6.0, 8.0 } }, { dtype = "float64" })

  it("are unbiased by default", function()
    close(x:var(2), { 5 / 3, 20 / 3 })
    close(x:std(2), { math.sqrt(5 / 3), math.sqrt(20 / 3) })
    close(x:var(), { 37.5 / 7 }, 1e-12)
  end)

  it("take correction, unbiased and keepdim", function()
    close(x:var(2, { correction = 0 }), { 1.25, 5 })
    close(x:var(2, { unbiased = false }), { 1.25, 5 })
    close(x:var(2, false), { 1.25, 5 })
    close(x:var(2, { correction = 2 }), { 2.5, 10 })
    assert.are.same({ 2, 1 }, x:std(2, { keepdim = true }).shape)
    assert.are.same({ 1, 4 }, x:var(1, true, true).shape)
    close(x:var(1), { 0.5, 2, 4.5, 8 })
    close(x:var({ dim = 1, correction = 0 }), { 0.25, 1, 2.25, 4 })
  end)

  it("give nan for too few elements", function()
    local one = lt.tensor({ 3.0 })
    assert.is_true(one:var():item() ~= one:var():item())
    assert.are.equal(0, one:var({ correction = 0 }):item())
  end)

  it("refuse integer tensors", function()
    local msg = errmsg(function() return lt.tensor({ 1, 2 }):var() end)
    assert.matches("var", msg)
    assert.matches("floating point", msg)
    assert.matches("std", errmsg(function() return lt.tensor({ 1, 2 }):std() end))
  end)
end)

describe("norm", function()
  local x = lt.tensor({ { 3.0, -4.0 }, { 0.0, 1.0 } })

  it("defaults to the 2-norm over all elements", function()
    close(x:norm(), { math.sqrt(26) })
    close(x:norm(2, 2), { 5, 1 })
    close(x:norm(1), { 8 })
    close(x:norm(1, 1), { 3, 5 })
    close(x:norm(math.huge), { 4 })
    close(x:norm("inf", 2), { 4, 1 })
    close(x:norm(-math.huge, 2), { 3, 0 })
    close(x:norm(0), { 3 })
    close(x:norm(3, 2), { (27 + 64) ^ (1 / 3), 1 })
    close(x:norm("fro"), { math.sqrt(26) })
    assert.are.same({ 2, 1 }, x:norm(2, 2, true).shape)
    assert.are.same({ 1, 2 }, x:norm({ p = 1, dim = 1, keepdim = true }).shape)
  end)

  -- a whole contiguous tensor takes the one-pass sum of squares, others the squares summed
  it("gives the same 2-norm over everything, contiguous, transposed or empty", function()
    local y = lt.randn(50, 70)
    local want = y:double():pow(2):sum():sqrt():item()
    close(y:norm(), { want }, 1e-6)
    close(y:t():norm(), { want }, 1e-6)
    assert.are.equal(y:norm():item(), (y * y):sum():sqrt():item())
    assert.are.equal(0, lt.zeros(0, 3):norm():item())
    assert.are.same({}, lt.zeros(0, 3):norm().shape)
    assert.are.equal(5, lt.tensor(-5.0):norm():item())
  end)

  it("refuses integer tensors and bad p", function()
    assert.matches("norm", errmsg(function() return lt.tensor({ 1, 2 }):norm() end))
    assert.matches("norm", errmsg(function() return x:norm("nuc") end))
  end)
end)

describe("logsumexp", function()
  it("is stable for large values and all -inf", function()
    local x = lt.tensor({ { 1000.0, 1000.0 }, { -math.huge, -math.huge } })
    close(x:logsumexp(2), { 1000 + math.log(2), -math.huge }, 1e-6)
    close(lt.tensor({ math.huge, 1.0 }):logsumexp(1), { math.huge })
    close(lt.tensor({ 1.0, 2.0, 3.0 }, { dtype = "float64" }):logsumexp(1),
      { math.log(math.exp(1) + math.exp(2) + math.exp(3)) }, 1e-12)
    assert.are.same({ 2, 1 }, x:logsumexp(2, true).shape)
  end)

  it("promotes integers to float32 and gives -inf over empty dims", function()
    local r = lt.tensor({ 1, 2 }):logsumexp(1)
    assert.are.equal("float32", r.dtype)
    close(r, { 2.3132617 }, 1e-6)
    close(lt.zeros(2, 0):logsumexp(2), { -math.huge, -math.huge })
  end)
end)

describe("softmax/log_softmax", function()
  it("normalises along the given dim, stably", function()
    local x = lt.tensor({ { 1.0, 2.0, 3.0 }, { 1000.0, 1000.0, 1000.0 } })
    local e = { math.exp(1), math.exp(2), math.exp(3) }
    local s = e[1] + e[2] + e[3]
    close(x:softmax(2), { e[1] / s, e[2] / s, e[3] / s, 1 / 3, 1 / 3, 1 / 3 })
    close(x:log_softmax(-1), { 1 - math.log(s) - 0, 2 - math.log(s), 3 - math.log(s),
      -math.log(3), -math.log(3), -math.log(3) }, 1e-5)
    close(x:softmax(1):sum(1), { 1, 1, 1 })
    close(lt.softmax(x, 2):sum(2), { 1, 1 })
  end)

  it("float32 kernels (vectorised exp, column blocks) match float64 to float precision", function()
    local shapes = { { 5, 37 }, { 3, 7, 5, 3 }, { 2, 300, 70 }, { 4, 1030 }, { 2, 3, 4 } }
    for _, sh in ipairs(shapes) do
      local x = lt.randn(sh) * 6
      local xd = x:double()
      for d = 1, #sh do
        close(x:softmax(d), xd:softmax(d), 2e-6)
        close(x:log_softmax(d), xd:log_softmax(d), 2e-6)
        local v = x:transpose(1, #sh)   -- non-contiguous input
        close(v:softmax(d), xd:transpose(1, #sh):softmax(d), 2e-6)
      end
    end
    -- exp over the whole float range: tiny, huge and -inf differences
    local w = lt.tensor({ { -200.0, 0.0, 80.0, 88.0 }, { -math.huge, -87.5, -86.0, 1.0 } })
    close(w:softmax(2), w:double():softmax(2), 1e-6)
    close(w:log_softmax(2), w:double():log_softmax(2), 1e-6)
    close(w:softmax(1), w:double():softmax(1), 1e-6)
  end)

  it("rows of -inf give nan as PyTorch; one -inf gives 0", function()
    local r = lt.tensor({ -math.huge, 0.0 }):softmax(1)
    close(r, { 0, 1 })
    local n = lt.tensor({ -math.huge, -math.huge }):softmax(1)
    assert.is_true(n[1]:item() ~= n[1]:item())
  end)

  it("need a dim and a float tensor", function()
    assert.matches("softmax: dim is required", errmsg(function() return lt.ones(2):softmax() end))
    assert.matches("softmax.*int64", errmsg(function() return lt.tensor({ 1, 2 }):softmax(1) end))
    assert.matches("log_softmax: dimension 3 out of range",
      errmsg(function() return lt.ones(2, 2):log_softmax(3) end))
  end)
end)

describe("cumsum", function()
  it("runs along a dim; integers give int64", function()
    local x = lt.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    close(x:cumsum(2), { 1, 3, 6, 4, 9, 15 })
    close(x:cumsum(1), { 1, 2, 3, 5, 7, 9 })
    assert.are.equal("int64", lt.tensor({ true, true }):cumsum(1).dtype)
    close(lt.tensor({ true, true }):cumsum(1), { 1, 2 })
  end)

  -- along a dim that is not the last, dense tensors scan blocks of 256 columns at once
  -- (src/cpu/scan.c): the same bits as scanning each column alone, at 1 and 2 threads
  it("gives a column's own scan along an outer dim, forward and for the gradient", function()
    lt.manual_seed(3)
    local old = lt.get_num_threads()
    finally(function() lt.set_num_threads(old) end)
    for _, threads in ipairs({ 1, 2 }) do
      lt.set_num_threads(threads)
      for _, dt in ipairs({ "float32", "float64", "int64" }) do
        local x = (lt.randn(3, 50, 600) * 1000):to(dt)
        local want = x:transpose(2, 3):contiguous():cumsum(3):transpose(2, 3)
        assert.is_true(lt.equal(x:cumsum(2), want:contiguous()), dt)
      end
      local x = lt.randn(3, 50, 600):requires_grad_()
      local g = lt.randn(3, 50, 600)
      x:cumsum(2):backward(g)
      assert.is_true(lt.equal(x.grad, g:flip(2):transpose(2, 3):contiguous():cumsum(3)
        :transpose(2, 3):flip(2):contiguous()))
    end
  end)
end)

describe("bad input", function()
  local x = lt.ones(2, 3)

  it("names the op and the dim when a dim is out of range", function()
    local msg = errmsg(function() return x:sum(3) end)
    assert.matches("sum", msg)
    assert.matches("dimension 3 out of range", msg)
    assert.matches("mean: dimension %-3 out of range", errmsg(function() return x:mean(-3) end))
    assert.matches("amax: dimension 5", errmsg(function() return x:amax({ 1, 5 }) end))
    assert.matches("max: dimension 4", errmsg(function() return x:max(4) end))
    assert.matches("argmin: dimension 3", errmsg(function() return x:argmin(3) end))
    assert.matches("std: dimension 3", errmsg(function() return x:std(3) end))
    assert.matches("norm: dimension 3", errmsg(function() return x:norm(2, 3) end))
    assert.matches("logsumexp: dimension 3", errmsg(function() return x:logsumexp(3) end))
    assert.matches("cumsum: dimension 3", errmsg(function() return x:cumsum(3) end))
  end)

  it("rejects dim 0, repeated dims and non-integer dims", function()
    assert.matches("sum: dimension 0 is not valid", errmsg(function() return x:sum(0) end))
    assert.matches("prod: dim 1 appears multiple times", errmsg(function() return x:prod({ 1, -2 }) end))
    assert.matches("sum: dim must be an integer", errmsg(function() return x:sum(1.5) end))
    assert.matches("any: keepdim must be a boolean", errmsg(function() return x:any(1, 1) end))
    assert.matches("max: expected one dim", errmsg(function() return x:max({ 1, 2 }) end))
  end)

  it("rejects max/min/amax of empty tensors and empty dims", function()
    assert.matches("max%(%): Expected reduction dim to be specified",
      errmsg(function() return lt.zeros(0):max() end))
    assert.matches("amax%(%): Expected reduction dim 2 to have non%-zero size",
      errmsg(function() return lt.zeros(2, 0):amax(2) end))
    assert.matches("min%(%): Expected reduction dim 2",
      errmsg(function() return lt.zeros(2, 0):min(2) end))
    assert.matches("argmax%(%)", errmsg(function() return lt.zeros(0):argmax() end))
  end)

  it("leaves the input untouched after an error", function()
    local y = lt.tensor({ 1.0, 2.0 })
    pcall(function() return y:sum(2) end)
    close(y, { 1, 2 })
  end)
end)
