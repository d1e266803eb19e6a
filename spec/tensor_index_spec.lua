-- Indexing ops: index_select, index_add, gather, scatter, scatter_add, masked_fill,
-- masked_select, one_hot. Index tensors hold 1-based positions (Lua's convention), so
-- index_select(1, lt.tensor{1}) picks the first row. Values are hand-computed.
local lt = require "lantern"

local function seq(...)
  local sz = { ... }
  local n = 1
  for _, s in ipairs(sz) do n = n * s end
  return lt.arange(n, { dtype = "float32" }):reshape(sz)
end

local function err_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(err)
end

local I = function(t) return lt.tensor(t) end   -- Lua integers: an int64 tensor

describe("index_select", function()
  it("picks 1-based positions along a dim, repeats allowed", function()
    local x = seq(3, 4)
    assert.are.same({ { 8, 9, 10, 11 }, { 0, 1, 2, 3 }, { 8, 9, 10, 11 } },
      x:index_select(1, I { 3, 1, 3 }):tolist())
    assert.are.same({ { 1, 0 }, { 5, 4 }, { 9, 8 } }, x:index_select(2, I { 2, 1 }):tolist())
    assert.are.same({ { 3 }, { 7 }, { 11 } }, lt.index_select(x, -1, I { 4 }):tolist())
    assert.are.same({ 1, 4 }, x:index_select(1, I(2)):size())     -- a 0-d index
    assert.are.same({ 0, 4 }, x:index_select(1, lt.zeros(0, { dtype = "int64" })):size())
  end)

  it("gives the same values on non-contiguous inputs and indices", function()
    local x = seq(4, 3):t()                       -- [3,4], strides {1,3}
    local idx = I { 4, 1, 2, 3 }:narrow(1, 1, 3)  -- {4, 1, 2}
    assert.are.same(x:contiguous():index_select(2, idx:contiguous()):tolist(),
      x:index_select(2, idx):tolist())
    assert.are.same({ { 9, 0, 3 }, { 10, 1, 4 }, { 11, 2, 5 } }, x:index_select(2, idx):tolist())
    local e = lt.tensor({ 1.0, 2.0 }):expand(3, 2)
    assert.are.same({ { 2, 1 }, { 2, 1 }, { 2, 1 } }, e:index_select(2, I { 2, 1 }):tolist())
    -- an expanded (stride-0) index
    local ie = I { 2 }:expand(3)
    assert.are.same({ { 1, 1, 1 }, { 4, 4, 4 } }, seq(2, 3):index_select(2, ie):tolist())
  end)

  it("works for every dtype", function()
    assert.are.same({ 30, 10 }, I { 10, 20, 30 }:index_select(1, I { 3, 1 }):tolist())
    assert.are.same({ true, false }, lt.tensor({ false, true }):index_select(1, I { 2, 1 })
      :tolist())
    local d = lt.tensor({ 0.5, 1.5 }, { dtype = "float64" }):index_select(1, I { 2 })
    assert.are.equal("float64", d.dtype)
    assert.are.same({ 1.5 }, d:tolist())
  end)

  it("rejects bad indices naming the op, the value and the size", function()
    local x = seq(3, 4)
    local err = err_of(x.index_select, x, 1, I { 1, 4 })
    assert.matches("index_select: index 4 is out of range for dimension 1 of size 3", err)
    assert.matches("valid positions 1..3", err)
    assert.matches("index_select: index 0 is out of range", err_of(x.index_select, x, 2, I { 0 }))
    assert.matches("index_select: index %-1 is out of range",
      err_of(x.index_select, x, 2, I { -1 }))
    assert.matches("index_select: index must be an int64 tensor %(got float32%)",
      err_of(x.index_select, x, 1, lt.tensor({ 1.0 })))
    assert.matches("index_select: index must be a 0%-d or 1%-d tensor",
      err_of(x.index_select, x, 1, I { { 1 } }))
    assert.matches("index_select: dimension 3 out of range",
      err_of(x.index_select, x, 3, I { 1 }))
  end)
end)

describe("index_add", function()
  it("adds rows of src at 1-based positions, accumulating repeats", function()
    local x = lt.zeros(3, 2)
    local src = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 }, { 5.0, 6.0 } })
    assert.are.same({ { 3, 4 }, { 0, 0 }, { 6, 8 } }, x:index_add(1, I { 3, 1, 3 }, src):tolist())
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 0, 0 } }, x:tolist())   -- out of place
    x:index_add_(2, I { 2, 2 }, lt.ones(3, 2))
    assert.are.same({ { 0, 2 }, { 0, 2 }, { 0, 2 } }, x:tolist())
    assert.matches("index_add_: index 3 is out of range for dimension 2 of size 2",
      err_of(x.index_add_, x, 2, I { 3, 1 }, lt.ones(3, 2)))
    assert.are.same({ { 0, 2 }, { 0, 2 }, { 0, 2 } }, x:tolist())   -- untouched on error
    assert.matches("index_add: source of shape %[3, 3%] does not match",
      err_of(x.index_add, x, 2, I { 1, 2 }, lt.ones(3, 3)))
  end)
end)

describe("gather", function()
  it("reads self at the index along dim", function()
    local x = lt.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } })
    assert.are.same({ { 1, 1 }, { 4, 3 } }, x:gather(2, I { { 1, 1 }, { 2, 1 } }):tolist())
    assert.are.same({ { 1, 4 }, { 3, 2 } }, x:gather(1, I { { 1, 2 }, { 2, 1 } }):tolist())
    -- index smaller than self in the other dims
    assert.are.same({ { 2 } }, x:gather(2, I { { 2 } }):tolist())
    assert.are.same({}, lt.tensor(3.0):gather(1, I(1)):size())
  end)

  it("matches a contiguous copy on transposed inputs and indices", function()
    local x = seq(3, 4):t()                        -- [4,3]
    local idx = I { { 3, 1, 2, 1 }, { 2, 2, 3, 1 } }:t()   -- [4,2]
    local expect = x:contiguous():gather(2, idx:contiguous()):tolist()
    assert.are.same(expect, x:gather(2, idx):tolist())
    assert.are.same({ { 8, 4 }, { 1, 5 }, { 6, 10 }, { 3, 3 } }, expect)
  end)

  it("along the last dim, picks from each row whatever the layout of self", function()
    -- the row path (out and index contiguous, self's rows equally apart) against a plain
    -- reference: self narrowed, larger than the index in the other dims, with size-1 dims,
    -- permuted so that its rows are not equally apart, every dtype
    local base = lt.arange(0, 5 * 7 * 9):reshape(5, 7, 9)
    local selves = {
      base, base:narrow(3, 2, 6), base:narrow(2, 2, 4), base:permute(2, 1, 3),
      base:narrow(1, 3, 1), base:permute(3, 2, 1):contiguous():permute(3, 2, 1),
    }
    for k, x in ipairs(selves) do
      for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
        local xs = x:to(dt)
        local sz = xs:size()
        local isz = { sz[1], math.max(1, sz[2] - 1), 11 }
        local idx = lt.randint(1, sz[3] + 1, isz)
        local got, xv, iv = xs:gather(3, idx):tolist(), xs:tolist(), idx:tolist()
        for a = 1, isz[1] do
          for b = 1, isz[2] do
            for c = 1, isz[3] do
              assert.are.equal(xv[a][b][iv[a][b][c]], got[a][b][c],
                string.format("self %d %s at %d %d %d", k, dt, a, b, c))
            end
          end
        end
      end
    end
  end)

  it("rejects bad input naming gather", function()
    local x = seq(2, 3)
    -- the first bad index in row-major order, from a row scanned whole
    local big = I({ { 1, 2, 3 }, { 1, 9, -7 } })
    assert.matches("gather: index 9 is out of range", err_of(x.gather, x, 2, big))
    local err = err_of(x.gather, x, 2, I { { 1, 4 } })
    assert.matches("gather: index 4 is out of range for dimension 2 of size 3", err)
    assert.matches("gather: index tensor must have the same number of dimensions",
      err_of(x.gather, x, 2, I { 1 }))
    assert.matches("gather: size of index %[3, 1%] does not fit input %[2, 3%]",
      err_of(x.gather, x, 2, I { { 1 }, { 1 }, { 1 } }))
    assert.matches("gather: index must be an int64 tensor",
      err_of(x.gather, x, 2, lt.tensor({ { true } })))
  end)
end)

describe("scatter / scatter_add", function()
  it("scatter writes src (or a value) at the index along dim", function()
    local x = lt.zeros(3, 3)
    local src = seq(2, 3) + 1
    assert.are.same({ { 1, 0, 0 }, { 0, 2, 6 }, { 4, 5, 3 } },
      x:scatter(1, I { { 1, 2, 3 }, { 3, 3, 2 } }, src):tolist())
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } }, x:tolist())
    assert.are.same({ { 0, 7, 0 }, { 7, 0, 0 }, { 0, 0, 7 } },
      x:scatter(2, I { { 2 }, { 1 }, { 3 } }, 7):tolist())
    -- index smaller than src: only its leading corner is read
    assert.are.same({ { 0, 0, 0 }, { 1, 0, 0 }, { 0, 0, 0 } },
      x:scatter(1, I { { 2 } }, seq(2, 3) + 1):tolist())
    x:scatter_(2, I { { 3 }, { 3 }, { 3 } }, 1.5)
    assert.are.same({ { 0, 0, 1.5 }, { 0, 0, 1.5 }, { 0, 0, 1.5 } }, x:tolist())
  end)

  it("scatter_add accumulates repeated positions", function()
    local x = lt.zeros(2, 4)
    local r = x:scatter_add(2, I { { 1, 1, 4 }, { 2, 3, 2 } }, lt.ones(2, 3))
    assert.are.same({ { 2, 0, 0, 1 }, { 0, 2, 1, 0 } }, r:tolist())
    x:scatter_add_(1, I { { 1, 2, 1, 2 }, { 1, 1, 1, 1 } }, seq(2, 4))
    assert.are.same({ { 4, 5, 8, 7 }, { 0, 1, 0, 3 } }, x:tolist())
    local ii = I { 1, 1, 2 }
    assert.are.same({ 7, 3 }, I { 0, 0 }:scatter_add(1, ii, I { 3, 4, 3 }):tolist())
  end)

  it("reads non-contiguous self, index and src", function()
    local self = lt.zeros(3, 2):t()                   -- [2,3] non-contiguous
    local idx = I { { 3, 1 }, { 2, 3 } }:t()          -- [[3,2],[1,3]]
    local src = seq(2, 2):t()                         -- [[0,2],[1,3]]
    local r = self:scatter_add(2, idx, src)
    local c = self:contiguous():scatter_add(2, idx:contiguous(), src:contiguous())
    assert.are.same(c:tolist(), r:tolist())
    assert.are.same({ { 0, 2, 0 }, { 1, 0, 3 } }, r:tolist())
    self:scatter_(2, idx, src)                        -- in place through strides
    assert.are.same({ { 0, 2, 0 }, { 1, 0, 3 } }, self:tolist())
  end)

  -- a dense self and src with an index of src's shape along the last dim go row by row: the
  -- same adds in the same order as the general walk a strided self takes
  it("along the last dim with a full index, gives the general walk's bits", function()
    lt.manual_seed(6)
    for _, shape in ipairs { { 3, 5, 9 }, { 40, 33 }, { 4, 1, 7 } } do
      local n = #shape
      local V = shape[n] + 2
      local sshape = { table.unpack(shape) }
      sshape[n] = V
      local idx = lt.randint(1, V + 1, shape)
      local src = lt.randn(table.unpack(shape))
      local perm = {}
      for d = n, 1, -1 do perm[#perm + 1] = d end
      local rev = {}
      for d = n, 1, -1 do rev[#rev + 1] = sshape[d] end
      for _, add in ipairs { true, false } do
        local fast = lt.zeros(sshape)
        local walk = lt.zeros(rev):permute(table.unpack(perm))   -- self not contiguous
        if add then
          fast:scatter_add_(n, idx, src)
          walk:scatter_add_(n, idx, src)
        else
          fast:scatter_(n, idx, src)
          walk:scatter_(n, idx, src)
        end
        assert.are.same(walk:tolist(), fast:tolist(), table.concat(shape, "x"))
        assert.is_false(walk:is_contiguous())
      end
      -- against a Lua loop for the sums
      if n == 2 then
        local want = lt.zeros(sshape):tolist()
        local iv, sv = idx:tolist(), src:tolist()
        for r = 1, shape[1] do
          for k = 1, shape[2] do
            local v = want[r][iv[r][k]]
            want[r][iv[r][k]] = (string.unpack("f", string.pack("f", v + sv[r][k])))
          end
        end
        assert.are.same(want, lt.zeros(sshape):scatter_add(2, idx, src):tolist())
      end
    end
  end)

  it("rejects bad input and leaves in-place targets untouched", function()
    local x = lt.zeros(2, 3)
    local err = err_of(x.scatter_add_, x, 2, I { { 1, 5 } }, lt.ones(1, 2))
    assert.matches("scatter_add_: index 5 is out of range for dimension 2 of size 3", err)
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, x:tolist())
    assert.matches("scatter: index of shape %[1, 3%] does not fit source of shape %[1, 2%]",
      err_of(x.scatter, x, 2, I { { 1, 2, 3 } }, lt.ones(1, 2)))
    assert.matches("scatter: self %(float32%) and src %(float64%) must have the same dtype",
      err_of(x.scatter, x, 2, I { { 1 } }, lt.ones(1, 1, { dtype = "float64" })))
    assert.matches("scatter_add: index must be an int64 tensor",
      err_of(x.scatter_add, x, 2, lt.ones(1, 1), lt.ones(1, 1)))
  end)
end)

-- A source that lies in the destination's memory is read as it was before the write, as the
-- binary in-place ops and copy_ read theirs: row 3 gets row 2's old value, not its new one
describe("in-place index ops with a source in the destination", function()
  local function rows() return lt.arange(1, 7, { dtype = "float64" }):reshape(6, 1) end
  it("index_add_, scatter_add_ and scatter_", function()
    local x = rows()
    x:index_add_(1, lt.tensor { 2, 3 }, x:narrow(1, 1, 2))
    assert.are.same({ 1, 3, 5, 4, 5, 6 }, x:reshape(-1):tolist())
    local y = rows()
    y:scatter_add_(1, lt.tensor { { 2 }, { 3 } }, y:narrow(1, 1, 2))
    assert.are.same({ 1, 3, 5, 4, 5, 6 }, y:reshape(-1):tolist())
    local z = rows()
    z:scatter_(1, lt.tensor { { 2 }, { 3 } }, z:narrow(1, 1, 2))
    assert.are.same({ 1, 1, 2, 4, 5, 6 }, z:reshape(-1):tolist())
  end)
end)

describe("masked_fill / masked_select", function()
  it("masked_fill writes the value where the (broadcast) mask is true", function()
    local x = seq(2, 3)
    local m = lt.tensor({ { true, false, true }, { false, false, true } })
    assert.are.same({ { -1, 1, -1 }, { 3, 4, -1 } }, x:masked_fill(m, -1):tolist())
    assert.are.same({ { 9, 1, 9 }, { 9, 4, 9 } },
      x:masked_fill(lt.tensor({ true, false, true }), 9):tolist())
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, x:tolist())
    -- a mask that broadcasts self up
    assert.are.same({ { 5, 1 }, { 1, 5 } },
      lt.tensor({ 1.0 }):masked_fill(lt.tensor({ { true, false }, { false, true } }), 5):tolist())
    -- int64 and bool tensors; a 0-d tensor value
    assert.are.same({ 7, 2 }, I { 1, 2 }:masked_fill(lt.tensor({ true, false }), 7):tolist())
    assert.are.same({ true, true }, lt.tensor({ false, true })
      :masked_fill(lt.tensor({ true, false }), true):tolist())
    assert.are.same({ 2.5, 1 }, lt.ones(2):masked_fill(lt.tensor({ true, false }),
      lt.tensor(2.5)):tolist())
  end)

  it("masked_fill_ writes in place, also through a view", function()
    local x = seq(2, 3)
    x:t():masked_fill_(lt.tensor({ { true, false }, { false, false }, { false, true } }), 0)
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 0 } }, x:tolist())
    local err = err_of(x.masked_fill_, x, lt.tensor({ { true }, { true }, { true } }), 0)
    assert.matches("masked_fill_", err)
    assert.matches("masked_fill: mask must be a bool tensor %(got int64%)",
      err_of(x.masked_fill, x, I { 1, 0, 1 }, 0))
  end)

  it("masked_select returns the selected elements in row-major order", function()
    local x = seq(2, 3)
    local m = lt.tensor({ { true, false, true }, { false, true, true } })
    assert.are.same({ 0, 2, 4, 5 }, x:masked_select(m):tolist())
    assert.are.same({ 0, 3 }, x:t():masked_select(lt.tensor({ { true, true }, { false, false },
      { false, false } })):tolist())
    assert.are.same({ 1, 4 }, x:masked_select(lt.tensor({ false, true, false })):tolist())
    assert.are.same({ 0 }, x:masked_select(lt.zeros(2, 3, { dtype = "bool" })):size())
    assert.matches("masked_select: shapes %[2, 3%] and %[2%] cannot be broadcast",
      err_of(x.masked_select, x, lt.tensor({ true, false })))
  end)
end)

describe("nonzero / argwhere / count_nonzero", function()
  -- the 1-based positions of the non-zero elements of a flat row-major list of shape sz
  local function ref_positions(vals, sz)
    local out, idx = {}, {}
    for d = 1, #sz do idx[d] = 1 end
    for _, v in ipairs(vals) do
      if v ~= 0 and v ~= false then out[#out + 1] = { table.unpack(idx) } end
      for d = #sz, 1, -1 do
        idx[d] = idx[d] + 1
        if idx[d] <= sz[d] then break end
        idx[d] = 1
      end
    end
    return out
  end

  it("gives the reference's positions in row-major order, any layout and dtype", function()
    for _, sz in ipairs({ { 7 }, { 3, 5 }, { 2, 3, 4 }, { 2, 1, 3, 2 }, { 0, 3 }, { 300, 70 } }) do
      local n = 1
      for _, v in ipairs(sz) do n = n * v end
      local vals = {}
      for i = 1, n do
        local r = (i * 7919) % 11
        vals[i] = r < 5 and 0 or r == 5 and 0 / 0 or r == 6 and -0.0 or r - 7
      end
      for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
        local src = {}
        for i, v in ipairs(vals) do
          src[i] = (dt == "int64" or dt == "bool") and (v ~= v and 3 or math.tointeger(v) or 0) or v
        end
        local t = lt.tensor(#src > 0 and src or { 0 }, { dtype = dt == "bool" and "int64" or dt })
        t = n > 0 and t:reshape(sz) or lt.zeros(sz, { dtype = dt == "bool" and "int64" or dt })
        if dt == "bool" then t = t:ne(0) end
        local flat = n > 0 and t:reshape(-1):tolist() or {}
        local want = ref_positions(flat, sz)
        local layouts = { t }
        if #sz >= 2 then layouts[2] = t:transpose(1, #sz):contiguous():transpose(1, #sz) end
        for k, x in ipairs(layouts) do
          local what = dt .. " {" .. table.concat(sz, ",") .. "} layout " .. k
          local got = x:nonzero()
          assert.are.same({ #want, #sz }, got:size(), what)
          assert.are.same(want, got:tolist(), what)
          assert.is_true(lt.argwhere(x):equal(got), what)
          local cols = { x:nonzero({ as_tuple = true }) }
          assert.are.equal(#sz, #cols, what)
          for d = 1, #sz do assert.is_true(cols[d]:equal(got:select(2, d)), what) end
          assert.are.equal(#want, x:count_nonzero():item(), what)
        end
      end
    end
  end)

  it("handles 0-d inputs, NaN and -0 as PyTorch does", function()
    assert.are.same({ 1, 0 }, lt.tensor(3.0):nonzero():size())
    assert.are.same({ 0, 0 }, lt.tensor(0.0):nonzero():size())
    assert.are.same({ 1 }, lt.tensor(3.0):nonzero({ as_tuple = true }):tolist())
    assert.are.same({ { 1 } }, lt.tensor({ 0 / 0, 0, -0.0 }):nonzero():tolist())
  end)

  it("count_nonzero over dims as a sum of the non-zero mask", function()
    local x = lt.tensor({ { { 0, 1, 2 }, { 0, 0, 3 } }, { { 4, 0, 0 }, { 5, 6, 0 } } })
    assert.are.same({ { 1, 1, 1 }, { 1, 1, 1 } }, x:count_nonzero(1):tolist())
    assert.are.same({ 3, 3 }, x:count_nonzero({ 1, 3 }):tolist())
    assert.are.same({ { 2, 1 }, { 1, 2 } }, lt.count_nonzero(x, { dim = 3 }):tolist())
    assert.are.equal("int64", x:float():count_nonzero().dtype)
    assert.matches("count_nonzero: takes dims only", err_of(x.count_nonzero, x, 1, true))
    assert.matches("nonzero: unknown option 'tuple'", err_of(x.nonzero, x, { tuple = true }))
  end)
end)

describe("one_hot", function()
  it("encodes 1-based classes as int64 rows", function()
    assert.are.same({ { 1, 0, 0 }, { 0, 0, 1 } }, I { 1, 3 }:one_hot():tolist())
    assert.are.same({ { 0, 1, 0, 0 } }, I { 2 }:one_hot(4):tolist())
    local o = lt.one_hot(I { { 1, 2 }, { 2, 1 } }, 2)
    assert.are.equal("int64", o.dtype)
    assert.are.same({ 2, 2, 2 }, o:size())
    assert.are.same({ { 0, 1 }, { 1, 0 } }, o:tolist()[2])
    assert.are.same({ 1, 0, 0 }, I(1):one_hot(3):tolist())
  end)

  it("rejects out-of-range classes and empty inputs without num_classes", function()
    assert.matches("one_hot: class value 4 is out of range for 3 classes",
      err_of(lt.one_hot, I { 1, 4 }, 3))
    assert.matches("one_hot: class value 0 is out of range", err_of(lt.one_hot, I { 0 }, 3))
    assert.matches("one_hot: class values must be at least 1 %(got 0%)",
      err_of(lt.one_hot, I { 0 }))
    assert.matches("one_hot: can not infer total number of classes from empty tensor",
      err_of(lt.one_hot, lt.zeros(0, { dtype = "int64" })))
    assert.matches("one_hot: class values must be an int64 tensor",
      err_of(lt.one_hot, lt.tensor({ 1.0 })))
  end)
end)

describe("large inputs (the parallel path)", function()
  it("agree with a single-threaded run", function()
    local old = lt.get_num_threads()
    lt.manual_seed(3)
    local x = lt.randn(300, 200)
    local idx = lt.randint(1, 301, { 300, 200 })
    local cols = lt.randint(1, 201, { 300, 150 })
    local m = x:gt(0.3)
    local function run()
      return {
        x:gather(1, idx), x:gather(2, cols), x:index_select(1, idx:select(2, 1)),
        lt.zeros(300, 200):scatter_add(1, idx, x), x:scatter(2, cols, 0.0),
        x:masked_fill(m, 7), x:t():masked_fill(m:t(), -7), x:masked_select(m),
        x:index_add(1, idx:select(2, 2), x),
      }
    end
    lt.set_num_threads(2)
    local par = run()
    lt.set_num_threads(1)
    local ser = run()
    lt.set_num_threads(old)
    for i = 1, #par do
      assert.are.same(ser[i]:size(), par[i]:size())
      assert.is_true(ser[i]:sub(par[i]):abs():max():item() < 1e-3, "result " .. i)
    end
    -- spot values: gather along dim 1 and the masked count
    local g = par[1]
    assert.are.equal(x:tolist()[idx:tolist()[17][5]][5], g:tolist()[17][5])
    assert.are.equal(m:sum():item(), par[8]:numel())
  end)
end)

-- a large contiguous index is range-checked in parts over the pool (src/cpu/index.c): it
-- passes when every value is in range, and names the first bad value in order when one is not,
-- wherever it lies; one_hot learns the largest value from the same scan
describe("range checks of large indices at 2 threads", function()
  it("pass in range and name the first bad value in order", function()
    local old = lt.get_num_threads()
    finally(function() lt.set_num_threads(old) end)
    lt.set_num_threads(2)
    lt.manual_seed(4)
    local n = 300000
    local x = lt.randn(n)
    local idx = lt.randint(1, n + 1, { n })
    assert.is_true(lt.equal(x:gather(1, idx), x:index_select(1, idx)))
    for _, at in ipairs { 1, 4000, n // 2, n } do
      local bad = idx:clone()
      bad[at] = n + 7
      if at < n then bad[n] = -3 end   -- a later bad value must not be the one named
      local ok, err = pcall(function() return x:gather(1, bad) end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("gather: index " .. (n + 7) .. " is out of range", 1, true),
        tostring(err))
    end
    local classes = lt.randint(1, 11, { 140000 })   -- over the 131072 the parts need
    classes[50000] = 17
    assert.are.same({ 140000, 17 }, classes:one_hot():size())
  end)
end)

describe("short rows", function()
  it("index_select picks blocks of several elements that are not element-sized words", function()
    -- blocks of two float32s (8 bytes) at 4-byte alignment, and of three bools
    local x = lt.arange(11):float():narrow(1, 2, 10):view(5, 2)
    local r = x:index_select(1, lt.tensor({ 5, 1, 3 }, { dtype = "int64" }))
    assert.are.same({ { 9, 10 }, { 1, 2 }, { 5, 6 } }, r:tolist())
    local b = lt.tensor({ { true, false, true }, { false, false, true } })
    assert.are.same({ { false, false, true }, { true, false, true } },
      b:index_select(1, lt.tensor({ 2, 1 }, { dtype = "int64" })):tolist())
  end)

  it("copies a broadcast into an empty tensor", function()
    local d = lt.zeros(3, 0)
    d:copy_(lt.tensor(2.0))
    assert.are.same({ 3, 0 }, { d:size(1), d:size(2) })
    lt.zeros(5, 4, 0):copy_(lt.zeros(5, 1, 0))
  end)

  it("index_add along the last dim adds repeated indices in order", function()
    local self = lt.zeros(2, 3)
    local src = lt.tensor({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 } }):float()
    self:index_add_(2, lt.tensor({ 1, 3, 1, 2 }, { dtype = "int64" }), src)
    assert.are.same({ { 4, 4, 2 }, { 12, 8, 6 } }, self:tolist())
  end)
end)

describe("packing by a mask", function()
  it("selects, scatters and finds positions for masks set and clear at random", function()
    lt.manual_seed(4)
    for _, dt in ipairs({ "float32", "float64", "int64", "bool" }) do
      local x = (lt.randn(37, 41) * 10):to(dt)
      local m = lt.rand(37, 41):gt(0.5)
      m[37][41] = false   -- the last slots run out before the last element
      local xs, ms = x:reshape(-1):tolist(), m:reshape(-1):tolist()
      local want = {}
      for i = 1, #xs do if ms[i] then want[#want + 1] = xs[i] end end
      assert.are.same(want, x:masked_select(m):tolist(), dt)
      if dt == "float32" or dt == "float64" then
        -- the gradient unpacks a source exactly as long as the set elements
        local xg = x:clone():requires_grad_()
        local g = lt.arange(1, #want + 1):to(dt)
        xg:masked_select(m):backward(g)
        local got, k = xg.grad:reshape(-1):tolist(), 0
        for i = 1, #xs do
          if ms[i] then k = k + 1 end
          assert.are.equal(ms[i] and k or 0, got[i], dt)
        end
      end
    end
    local m = lt.tensor({ { false, true, false }, { true, false, false } })
    assert.are.same({ { 1, 2 }, { 2, 1 } }, m:nonzero():tolist())
  end)
end)
