-- Views and shape ops: view, reshape, flatten, unflatten, squeeze, unsqueeze, transpose, t,
-- permute, expand, narrow, select, cat, stack, split, chunk, unbind, repeat, flip, tril, triu.
-- Values are hand-computed; views must share memory; non-contiguous inputs (transposed,
-- narrowed, expanded) must give the values of a contiguous copy; bad input raises naming the op.
local lt = require "lantern"

-- 0..n-1 shaped as given, float32
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

describe("view", function()
  it("reinterprets the shape and infers -1", function()
    local x = seq(2, 3)
    assert.are.same({ { 0, 1 }, { 2, 3 }, { 4, 5 } }, x:view(3, 2):tolist())
    assert.are.same({ 6 }, x:view(-1):size())
    assert.are.same({ 3, 2 }, x:view({ -1, 2 }):size())
    assert.are.same({ 1, 2, 1, 3 }, x:view(1, 2, 1, 3):size())
    assert.are.same({}, lt.tensor({ 7.0 }):view():size())
    assert.are.same({ 2, 3 }, x:view_as(lt.zeros(2, 3)):size())
  end)

  it("shares storage with its base (a write through the view changes the base)", function()
    local x = seq(2, 3)
    local v = x:view(6)
    v:narrow(1, 2, 2):fill_(-1)
    assert.are.same({ { 0, -1, -1 }, { 3, 4, 5 } }, x:tolist())
    x:select(1, 2):fill_(9)
    assert.are.same({ 0, -1, -1, 9, 9, 9 }, v:tolist())
  end)

  it("views a non-contiguous tensor when the strides allow it", function()
    local x = seq(4, 6):narrow(2, 2, 3)          -- [4,3] with strides {6,1}
    local v = x:view(2, 2, 3)
    assert.are.same({ { { 1, 2, 3 }, { 7, 8, 9 } }, { { 13, 14, 15 }, { 19, 20, 21 } } },
      v:tolist())
    assert.are.same({ 12, 6, 1 }, v:stride())
    -- an expanded tensor keeps stride 0 through a view that splits the expanded dim
    local e = lt.tensor({ 1.0, 2.0 }):view(1, 2):expand(4, 2)
    local ev = e:view(2, 2, 2)
    assert.are.same({ 0, 0, 1 }, ev:stride())
    assert.are.same({ { { 1, 2 }, { 1, 2 } }, { { 1, 2 }, { 1, 2 } } }, ev:tolist())
  end)

  it("refuses a view that would need a copy, suggesting reshape", function()
    local x = seq(2, 3):t()
    local err = err_of(x.view, x, 6)
    assert.matches("view", err)
    assert.matches("view size is not compatible with input tensor's size and stride", err)
    assert.matches("reshape", err)
    assert.matches("%[3, 2%]", err)
  end)

  it("rejects incompatible sizes naming the shape and numel", function()
    local x = seq(2, 3)
    local err = err_of(x.view, x, 4, 2)
    assert.matches("view: shape %[4, 2%] is invalid for input of size 6", err)
    assert.matches("only one dimension can be inferred", err_of(x.view, x, -1, -1))
    assert.matches("invalid shape dimension %-3", err_of(x.view, x, -3, 2))
    assert.matches("ambiguous", err_of(lt.zeros(0).view, lt.zeros(0), 0, -1))
  end)
end)

describe("reshape", function()
  it("is a view when possible and copies otherwise", function()
    local x = seq(2, 3)
    local r = x:reshape(3, 2)
    r:select(1, 1):fill_(100)
    assert.are.equal(100, x:tolist()[1][1])      -- shares memory
    local t = seq(2, 3):t()                       -- [[0,3],[1,4],[2,5]]
    local c = t:reshape(6)
    assert.are.same({ 0, 3, 1, 4, 2, 5 }, c:tolist())
    c:fill_(0)
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, t:tolist())   -- a copy
    assert.are.same({ 2, 3 }, lt.reshape(lt.zeros(6), 2, -1):size())
    assert.are.same({ 3, 2 }, seq(6):reshape_as(lt.zeros(3, 2)):size())
  end)

  it("errors naming reshape", function()
    assert.matches("reshape: shape %[5%] is invalid for input of size 6",
      err_of(seq(6).reshape, seq(6), 5))
  end)
end)

describe("flatten / unflatten", function()
  it("flattens a range of dims (1-based, inclusive)", function()
    local x = seq(2, 3, 4)
    assert.are.same({ 24 }, x:flatten():size())
    assert.are.same({ 2, 12 }, x:flatten(2):size())
    assert.are.same({ 6, 4 }, x:flatten(1, 2):size())
    assert.are.same({ 2, 3, 4 }, x:flatten(2, 2):size())
    assert.are.same({ 1 }, lt.tensor(3.0):flatten():size())
    assert.are.same({ 0, 3, 1, 4, 2, 5 }, seq(2, 3):t():flatten():tolist())
    assert.matches("flatten", err_of(x.flatten, x, 3, 2))
  end)

  it("unflattens one dim into sizes", function()
    local x = seq(2, 12)
    assert.are.same({ 2, 3, 4 }, x:unflatten(2, { 3, 4 }):size())
    assert.are.same({ 2, 2, 6 }, x:unflatten(-1, { 2, -1 }):size())
    assert.are.same(x:unflatten(2, { 3, 4 }):tolist(), seq(2, 3, 4):tolist())
    assert.matches("unflatten", err_of(x.unflatten, x, 2, { 5, 2 }))
  end)
end)

describe("squeeze / unsqueeze", function()
  it("removes size-1 dims (all, or the one given)", function()
    local x = lt.zeros(1, 3, 1, 2)
    assert.are.same({ 3, 2 }, x:squeeze():size())
    assert.are.same({ 3, 1, 2 }, x:squeeze(1):size())
    assert.are.same({ 1, 3, 2 }, x:squeeze(-2):size())
    assert.are.same({ 1, 3, 1, 2 }, x:squeeze(2):size())   -- size 3: unchanged
    assert.are.same({}, lt.zeros(1, 1):squeeze():size())
  end)

  it("inserts a size-1 dim (range ndim+1, negative from the end)", function()
    local x = seq(2, 3)
    assert.are.same({ 1, 2, 3 }, x:unsqueeze(1):size())
    assert.are.same({ 2, 1, 3 }, x:unsqueeze(2):size())
    assert.are.same({ 2, 3, 1 }, x:unsqueeze(3):size())
    assert.are.same({ 2, 3, 1 }, x:unsqueeze(-1):size())
    assert.are.same({ 1, 2, 3 }, x:unsqueeze(-3):size())
    assert.are.same({ { { 0, 1, 2 } }, { { 3, 4, 5 } } }, x:unsqueeze(2):tolist())
    -- strides as PyTorch gives them on a transposed input
    assert.are.same({ 1, 6, 3 }, lt.ones(2, 3):t():unsqueeze(2):stride())
    assert.matches("unsqueeze: dimension 4 out of range", err_of(x.unsqueeze, x, 4))
    assert.matches("squeeze: dimension 3 out of range", err_of(x.squeeze, x, 3))
  end)
end)

describe("transpose / t / permute", function()
  it("swaps dims without copying", function()
    local x = seq(2, 3)
    local y = x:transpose(1, 2)
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, y:tolist())
    assert.are.same({ 1, 3 }, y:stride())
    assert.is_false(y:is_contiguous())
    y:select(1, 1):fill_(7)
    assert.are.same({ { 7, 1, 2 }, { 7, 4, 5 } }, x:tolist())
    assert.are.same(y:tolist(), x:t():tolist())
    assert.are.same(y:tolist(), lt.transpose(x, -1, -2):tolist())
    assert.are.same({ 3 }, lt.zeros(3):t():size())
    assert.matches("t: expects a tensor with <= 2 dimensions", err_of(lt.zeros(2, 2, 2).t,
      lt.zeros(2, 2, 2)))
    assert.matches("transpose: dimension 3 out of range", err_of(x.transpose, x, 1, 3))
  end)

  it("permutes dims (varargs or a table)", function()
    local x = seq(2, 3, 4)
    local p = x:permute(3, 1, 2)
    assert.are.same({ 4, 2, 3 }, p:size())
    assert.are.same({ 1, 12, 4 }, p:stride())
    assert.are.equal(x:tolist()[2][3][4], p:tolist()[4][2][3])
    assert.are.equal(x:tolist()[1][2][3], p:tolist()[3][1][2])
    assert.are.same(p:tolist(), x:permute({ -1, 1, 2 }):tolist())
    assert.matches("permute: number of dims don't match", err_of(x.permute, x, 1, 2))
    assert.matches("permute: dimension 1 repeats", err_of(x.permute, x, 1, 1, 2))
  end)
end)

-- contiguous() of a view that runs with unit stride along another dimension than the last (a
-- transpose or permute) copies the plane of those two dimensions in square blocks (8 x 8 in
-- vector registers for float32 from AVX2 up): shapes that are not multiples of the blocks,
-- views with an offset, expanded outer dimensions, every dtype, one thread and two
describe("contiguous copies of transposed views", function()
  -- the flat list of x's elements in row-major order, from its storage positions: x is a view of
  -- 0, 1, 2, ... (storage position p holds p, or its bool or integer form)
  local function expected(x, conv)
    local size, stride, out = x:size(), x:stride(), {}
    local idx = {}
    for k = 1, #size do idx[k] = 0 end
    for _ = 1, x:numel() do
      local p = x:storage_offset()
      for k = 1, #size do p = p + idx[k] * stride[k] end
      out[#out + 1] = conv(p)
      for k = #size, 1, -1 do
        idx[k] = idx[k] + 1
        if idx[k] < size[k] then break end
        idx[k] = 0
      end
    end
    return out
  end
  local function flat(t) return t:reshape(-1):tolist() end
  local function same(p) return p end
  local cases = {
    { "2-d, 67 x 131", function(b) return b(67 * 131):reshape(67, 131):t() end },
    { "a permute of 3 dims", function(b)
      return b(6 * 50 * 40):reshape(6, 50, 40):permute(3, 2, 1) end },
    { "a narrowed 4-d transpose", function(b)
      return b(4 * 3 * 20 * 70):reshape(4, 3, 20, 70):narrow(4, 2, 60):transpose(3, 4) end },
    { "an expanded outer dim", function(b)
      return b(70 * 90):reshape(1, 70, 90):expand(3, 70, 90):transpose(2, 3) end },
    { "a column of 1 and a row of 8000", function(b)
      return b(8000):reshape(8000, 1):t():t():t() end },
  }
  local kinds = {
    { "float32", function(n) return lt.arange(n, { dtype = "float32" }) end, same },
    { "float64", function(n) return lt.arange(n, { dtype = "float64" }) end, same },
    { "int64", function(n) return lt.arange(n) end, same },
    { "bool", function(n) return lt.arange(n):remainder(3):eq(0) end,
      function(p) return p % 3 == 0 end },
  }
  for _, c in ipairs(cases) do
    for _, k in ipairs(kinds) do
      it(c[1] .. ", " .. k[1], function()
        local before = lt.get_num_threads()
        for _, threads in ipairs { 1, 2 } do
          lt.set_num_threads(threads)
          local x = c[2](k[2])
          local y = x:contiguous()
          assert.is_true(y:is_contiguous())
          assert.are.same(x:size(), y:size())
          assert.are.same(expected(x, k[3]), flat(y))
        end
        lt.set_num_threads(before)
      end)
    end
  end
end)

-- dense copies of one dtype are cut into 64 KB blocks over the pool (src/cpu/copy.c): every
-- byte arrives, at the sizes around a block and around the 256 KB a thread takes at least; a
-- copy between overlapping parts of one storage reads the source as it was (the op layer
-- copies such a source first; the kernel's own check is a second line)
describe("dense copies", function()
  it("copy every element at 1 and 2 threads, with clone, copy_ and cat", function()
    local before = lt.get_num_threads()
    finally(function() lt.set_num_threads(before) end)
    for _, threads in ipairs { 1, 2 } do
      lt.set_num_threads(threads)
      for _, n in ipairs { 16383, 16384, 65535, 65537, 131072 + 5, 1000003 } do
        local x = lt.arange(n, { dtype = "float32" })
        local y = x:clone()
        assert.is_true(lt.equal(x, y), n .. " clone")
        local z = lt.zeros(n):copy_(x)
        assert.are.equal(n - 1, z[n]:item())
        assert.is_true(lt.equal(x, z), n .. " copy_")
        local c = lt.cat({ x, x * 2 }, 1)
        assert.is_true(lt.equal(c:narrow(1, n + 1, n), x * 2), n .. " cat")
        local d = lt.arange(n):to("float64"):clone()
        assert.are.equal((n - 1) * n / 2, d:sum():item())
      end
      local n = 300000
      local base = lt.arange(n + 70000, { dtype = "float32" })
      base:narrow(1, 1, n):copy_(base:narrow(1, 70001, n))   -- overlapping, forward
      assert.is_true(lt.equal(base:narrow(1, 1, n), lt.arange(70000, n + 70000, { dtype = "float32" })))
      base = lt.arange(n + 70000, { dtype = "float32" })
      base:narrow(1, 70001, n):copy_(base:narrow(1, 1, n))   -- overlapping, backward
      assert.is_true(lt.equal(base:narrow(1, 70001, n), lt.arange(0, n, { dtype = "float32" })))
    end
  end)

  -- short rows that repeat one value (an expanded (N, C, 1, 1) made contiguous) are filled
  it("fill short rows from a broadcast value, every dtype", function()
    for _, dt in ipairs { "float32", "float64", "int64", "bool" } do
      local g = (lt.arange(6 * 5) % 3):reshape(6, 5, 1, 1):to(dt)
      local e = g:expand(6, 5, 7, 7):contiguous()
      assert.are.same({ 6, 5, 7, 7 }, e:size())
      local flat, src = e:reshape(-1):tolist(), g:reshape(-1):tolist()
      for i = 1, #flat do assert.are.equal(src[(i - 1) // 49 + 1], flat[i], dt .. " " .. i) end
      local t = g:reshape(6, 5, 1):expand(6, 5, 3):transpose(1, 2):contiguous()   -- rows of 3
      local g2 = g:reshape(6, 5)
      for _, ijk in ipairs { { 1, 3, 2 }, { 5, 6, 3 }, { 2, 1, 1 } } do
        assert.are.equal(g2[ijk[2]][ijk[1]]:item(), t[ijk[1]][ijk[2]][ijk[3]]:item())
      end
    end
  end)
end)

describe("expand", function()
  it("broadcasts size-1 dims with stride 0 and adds leading dims", function()
    local x = lt.tensor({ { 1.0 }, { 2.0 } })
    local e = x:expand(2, 3)
    assert.are.same({ { 1, 1, 1 }, { 2, 2, 2 } }, e:tolist())
    assert.are.same({ 1, 0 }, e:stride())
    assert.are.same({ 3, 2, 3 }, x:expand(3, -1, 3):size())
    assert.are.same({ 0, 1, 0 }, x:expand(3, -1, 3):stride())
    assert.are.same({ 2, 4 }, x:expand_as(lt.zeros(2, 4)):size())
    -- shares memory
    x:fill_(5)
    assert.are.same({ { 5, 5, 5 }, { 5, 5, 5 } }, e:tolist())
  end)

  it("errors naming expand and both shapes", function()
    local x = lt.zeros(3)
    local err = err_of(x.expand, x, 2, 4)
    assert.matches("expand: the expanded size of the tensor %(4%) must match the existing " ..
      "size %(3%) at non%-singleton dimension 2", err)
    assert.matches("Target sizes: %[2, 4%]", err)
    assert.matches("Tensor sizes: %[3%]", err)
    assert.matches("expand", err_of(lt.zeros(2, 3).expand, lt.zeros(2, 3), 3))
    assert.matches("expand", err_of(x.expand, x, -1, 3))
  end)
end)

describe("narrow / select", function()
  it("narrow takes a 1-based start and a length, as a view", function()
    local x = seq(3, 4)
    local n = x:narrow(2, 2, 2)
    assert.are.same({ { 1, 2 }, { 5, 6 }, { 9, 10 } }, n:tolist())
    assert.are.equal(1, n:storage_offset())
    assert.are.same({ { 8, 9, 10, 11 } }, x:narrow(1, -1, 1):tolist())
    assert.are.same({ 3, 0 }, x:narrow(2, 5, 0):size())
    n:fill_(0)
    assert.are.same({ 0, 0, 0, 0 }, { x:tolist()[1][2], x:tolist()[1][3], x:tolist()[2][2],
      x:tolist()[3][3] })
  end)

  it("select drops the dim, index 1-based or negative", function()
    local x = seq(3, 4)
    assert.are.same({ 4, 5, 6, 7 }, x:select(1, 2):tolist())
    assert.are.same({ 3, 7, 11 }, x:select(2, -1):tolist())
    assert.are.same({ 3, 7, 11 }, lt.select(x, 2, 4):tolist())
    assert.are.same({}, x:select(1, 1):select(1, 1):size())
    -- on a transposed input
    assert.are.same({ 1, 5, 9 }, x:t():select(1, 2):tolist())
  end)

  it("rejects bad positions naming the op, the value and the size", function()
    local x = seq(3, 4)
    local err = err_of(x.select, x, 1, 4)
    assert.matches("select: index 4 out of range for dimension 1 of size 3", err)
    assert.matches("select: index %-4 out of range", err_of(x.select, x, 1, -4))
    assert.matches("select: index 0 is not valid", err_of(x.select, x, 1, 0))
    assert.matches("narrow: start %(4%) %+ length %(2%) exceeds dimension size %(4%)",
      err_of(x.narrow, x, 2, 4, 2))
    assert.matches("narrow: start 6 out of range", err_of(x.narrow, x, 2, 6, 0))
    assert.matches("narrow: length must be non%-negative", err_of(x.narrow, x, 2, 1, -1))
    assert.matches("select: cannot index a 0%-dim tensor", err_of(lt.tensor(1.0).select,
      lt.tensor(1.0), 1, 1))
  end)
end)

describe("cat / stack", function()
  it("concatenates along a dim", function()
    local a, b = seq(2, 2), seq(2, 3)
    assert.are.same({ { 0, 1, 0, 1, 2 }, { 2, 3, 3, 4, 5 } }, lt.cat({ a, b }, 2):tolist())
    assert.are.same({ { 0, 1 }, { 2, 3 }, { 0, 1 }, { 2, 3 } }, lt.cat({ a, a }):tolist())
    assert.are.same({ 2, 7 }, lt.cat({ a, b, a }, -1):size())
    -- legacy empty 1-d inputs are skipped
    assert.are.same({ 2, 2 }, lt.cat({ lt.zeros(0), a }):size())
    -- dtypes promote
    local m = lt.cat({ lt.tensor({ 1, 2 }), lt.tensor({ 0.5 }) })
    assert.are.equal("float32", m.dtype)
    assert.are.same({ 1, 2, 0.5 }, m:tolist())
  end)

  it("reads non-contiguous inputs correctly", function()
    local t = seq(2, 3):t()                  -- [[0,3],[1,4],[2,5]]
    local e = lt.tensor({ { 9.0 } }):expand(3, 2)
    assert.are.same({ { 0, 3, 9, 9 }, { 1, 4, 9, 9 }, { 2, 5, 9, 9 } },
      lt.cat({ t, e }, 2):tolist())
    assert.are.same(lt.cat({ t:contiguous(), e:contiguous() }, 2):tolist(),
      lt.cat({ t, e }, 2):tolist())
  end)

  it("stacks along a new dim", function()
    local a, b = lt.tensor({ 1.0, 2.0 }), lt.tensor({ 3.0, 4.0 })
    assert.are.same({ { 1, 2 }, { 3, 4 } }, lt.stack({ a, b }):tolist())
    assert.are.same({ { 1, 3 }, { 2, 4 } }, lt.stack({ a, b }, 2):tolist())
    assert.are.same({ { 1, 3 }, { 2, 4 } }, lt.stack({ a, b }, -1):tolist())
    assert.are.same({ 3, 2 }, lt.stack({ lt.tensor(1.0), lt.tensor(2.0), lt.tensor(3.0) })
      :view(3, 1):expand(3, 2):size())
  end)

  it("errors name the op and the shapes", function()
    local err = err_of(lt.cat, { lt.zeros(2, 3), lt.zeros(2, 4) })
    assert.matches("cat: sizes of tensors must match except in dimension 1", err)
    assert.matches("%[2, 3%]", err)
    assert.matches("%[2, 4%]", err)
    assert.matches("tensor 2", err)
    assert.matches("cat: tensors must have the same number of dimensions",
      err_of(lt.cat, { lt.zeros(2, 3), lt.zeros(3) }))
    assert.matches("cat: zero%-dimensional tensor", err_of(lt.cat, { lt.tensor(1.0) }))
    assert.matches("cat: expected a non%-empty list", err_of(lt.cat, {}))
    assert.matches("cat: element 2 of the list is not a tensor", err_of(lt.cat, { lt.zeros(1),
      3 }))
    assert.matches("cat: dimension 3 out of range", err_of(lt.cat, { lt.zeros(2, 2) }, 3))
    local serr = err_of(lt.stack, { lt.zeros(2, 3), lt.zeros(3, 2) })
    assert.matches("stack: expects each tensor to be equal size, but got %[2, 3%] at entry 1 " ..
      "and %[3, 2%] at entry 2", serr)
  end)
end)

describe("split / chunk / unbind", function()
  it("split by size or by a table of sizes returns views", function()
    local x = seq(5, 2)
    local p = x:split(2)
    assert.are.equal(3, #p)
    assert.are.same({ { 0, 1 }, { 2, 3 } }, p[1]:tolist())
    assert.are.same({ { 8, 9 } }, p[3]:tolist())
    local q = x:split({ 1, 4 })
    assert.are.same({ 1, 2 }, q[1]:size())
    assert.are.same({ 4, 2 }, q[2]:size())
    local c = x:split(1, 2)
    assert.are.same({ 0, 2, 4, 6, 8 }, c[1]:view(-1):tolist())
    q[1]:fill_(-1)
    assert.are.same({ -1, -1 }, x:tolist()[1])
    assert.matches("split: split sizes must sum exactly to 5", err_of(x.split, x, { 1, 2 }))
    assert.matches("split: split_size must be positive", err_of(x.split, x, 0))
  end)

  it("chunk splits into at most n pieces", function()
    local sizes = function(list)
      local r = {}
      for i, t in ipairs(list) do r[i] = t:size(1) end
      return r
    end
    assert.are.same({ 2, 2, 1 }, sizes(lt.arange(5):chunk(3)))
    assert.are.same({ 2, 2, 2 }, sizes(lt.arange(6):chunk(4)))
    assert.are.same({ 0, 0, 0 }, sizes(lt.zeros(0):chunk(3)))
    assert.matches("chunk: number of chunks must be greater than 0",
      err_of(lt.arange(5).chunk, lt.arange(5), 0))
  end)

  it("unbind returns the selects along a dim", function()
    local x = seq(2, 3)
    local u = x:unbind(2)
    assert.are.equal(3, #u)
    assert.are.same({ 1, 4 }, u[2]:tolist())
    assert.are.same({ 3, 4, 5 }, x:unbind()[2]:tolist())
  end)
end)

describe("repeat / tile / flip / tril / triu", function()
  -- `repeat` is a Lua keyword: x["repeat"](x, ...) works, and so do repeat_tensor and tile
  it("repeat tiles the tensor and adds leading dims", function()
    local x = lt.tensor({ { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 1, 2, 1, 2 }, { 3, 4, 3, 4 }, { 1, 2, 1, 2 }, { 3, 4, 3, 4 } },
      x:repeat_tensor(2, 2):tolist())
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 1, 2 }, { 3, 4 } }, x["repeat"](x, 2, 1):tolist())
    assert.are.same({ 3, 2, 2 }, x:repeat_tensor({ 3, 1, 1 }):size())
    assert.are.same({ { { 1, 2, 1, 2 } }, { { 1, 2, 1, 2 } } },
      lt.tensor({ 1, 2 }):repeat_tensor(2, 1, 2):tolist())
    assert.are.same({ 0, 2 }, x:repeat_tensor(0, 1):size())
    -- a non-contiguous source
    assert.are.same({ { 1, 3, 1, 3 }, { 2, 4, 2, 4 } }, x:t():repeat_tensor(1, 2):tolist())
    assert.matches("repeat: number of dimensions of repeat dims %(1%) can not be smaller",
      err_of(x.repeat_tensor, x, 2))
    assert.matches("repeat: repeats", err_of(x.repeat_tensor, x, 1, -1))
  end)

  it("tile pads missing repeats with leading ones", function()
    local x = lt.tensor({ { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 1, 2, 1, 2 }, { 3, 4, 3, 4 } }, x:tile(2):tolist())
    assert.are.same({ 2, 4, 2 }, x:tile(2, 2, 1):size())
  end)

  it("flip reverses the given dims (a copy)", function()
    local x = seq(2, 3)
    assert.are.same({ { 3, 4, 5 }, { 0, 1, 2 } }, x:flip(1):tolist())
    assert.are.same({ { 2, 1, 0 }, { 5, 4, 3 } }, x:flip({ 2 }):tolist())
    assert.are.same({ { 5, 4, 3 }, { 2, 1, 0 } }, x:flip(1, -1):tolist())
    assert.are.same({ { 3, 0 }, { 4, 1 }, { 5, 2 } }, x:t():flip(2):tolist())
    local f = x:flip(1)
    f:fill_(0)
    assert.are.equal(5, x:tolist()[2][3])
    assert.matches("flip: dimension 1 appears multiple times", err_of(x.flip, x, 1, 1))
    assert.matches("flip: dimension 3 out of range", err_of(x.flip, x, 3))
  end)

  it("tril / triu keep a triangle of the last two dims", function()
    local x = seq(3, 3) + 1
    assert.are.same({ { 1, 0, 0 }, { 4, 5, 0 }, { 7, 8, 9 } }, x:tril():tolist())
    assert.are.same({ { 1, 2, 3 }, { 0, 5, 6 }, { 0, 0, 9 } }, x:triu():tolist())
    assert.are.same({ { 1, 2, 0 }, { 4, 5, 6 }, { 7, 8, 9 } }, x:tril(1):tolist())
    assert.are.same({ { 0, 0, 0 }, { 4, 0, 0 }, { 7, 8, 0 } }, x:tril(-1):tolist())
    assert.are.same({ { 0, 0, 3 }, { 0, 0, 0 }, { 0, 0, 0 } }, x:triu(2):tolist())
    assert.are.same(x:tolist(), x:tril(100):tolist())
    assert.are.same({ { 1, 0, 0 }, { 2, 5, 0 }, { 3, 6, 9 } }, x:t():tril():tolist())
    local b = lt.ones(2, 2, 3, { dtype = "int64" }):triu()
    assert.are.same({ { 1, 1, 1 }, { 0, 1, 1 } }, b:tolist()[2])
    assert.matches("tril: input tensor must have at least 2 dimensions",
      err_of(lt.zeros(3).tril, lt.zeros(3)))
  end)
end)

describe("views of non-contiguous tensors", function()
  it("chain views over transposed, narrowed and expanded inputs", function()
    local base = seq(4, 5)
    local v = base:t():narrow(1, 2, 3):select(2, 2)       -- column 2..4 of row 2
    assert.are.same({ 6, 7, 8 }, v:tolist())
    v:fill_(0)
    assert.are.same({ 5, 0, 0, 0, 9 }, base:tolist()[2])
    local e = lt.tensor({ 1.0, 2.0, 3.0 }):expand(2, 3):t()
    assert.are.same({ { 1, 1 }, { 2, 2 }, { 3, 3 } }, e:tolist())
    assert.are.same({ { 1, 1 }, { 2, 2 }, { 3, 3 } }, e:contiguous():tolist())
    assert.are.same(e:contiguous():reshape(6):tolist(), e:reshape(6):tolist())
    assert.are.same(e:contiguous():permute(2, 1):tolist(), e:permute(2, 1):tolist())
    assert.are.same(e:contiguous():unsqueeze(2):tolist(), e:unsqueeze(2):tolist())
  end)
end)
