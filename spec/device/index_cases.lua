-- Cases for the indexing kernels: index_range, gather, scatter, masked_fill, mask_count,
-- masked_select and masked_scatter, reached through index_select, gather, scatter, scatter_add,
-- index_add, one_hot, embedding, masked_fill and masked_select (forward and backward), each
-- against a plain-Lua reference. Indices are 1-based, as the Lua API counts them.
local assert = require "luassert"   -- a required file does not see busted's assert
local D = require "device.support"
local F = require "lantern.nn.functional"
local lt, numel, values, copy_shape, strides, each, flat_pos = D.lt, D.numel, D.values,
  D.copy_shape, D.strides, D.each, D.flat_pos
local check, distinct, ints, make = D.check, D.distinct, D.ints, D.make
local layout, LAYOUTS, input, check_grad = D.layout, D.LAYOUTS, D.input, D.check_grad
local case, FLOATS, tol_of = D.case, D.FLOATS, D.tol_of

local DTYPES = { "float32", "float64", "int64", "bool" }

-- n values for dtype dt (bool as 0/1, which the tensor constructor converts)
local function vals_of(dt, n)
  if dt == "int64" then return ints(n, -50, 50) end
  if dt == "bool" then return ints(n, 0, 1) end
  return distinct(n)
end

-- the logical values a tensor of dtype dt reads back for numbers v
local function as_dtype(dt, v)
  local r = {}
  for i, e in ipairs(v) do
    if dt == "bool" then r[i] = e ~= 0 and e ~= false else r[i] = e end
  end
  return r
end

local function I(v, shape)
  if shape then return make(v, shape, "int64") end
  return lt.tensor(v, { dtype = "int64" })
end

local function expect_error(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.matches(pattern, tostring(err))
end

-- ------------------------------------------------------------ plain-Lua references

-- x (flat, shape) with dim `dim` indexed by the 1-based list idx
local function ref_index_select(x, shape, dim, idx)
  if #shape == 0 then return { x[1] }, {} end
  local oshape = copy_shape(shape)
  oshape[dim] = #idx
  local out = {}
  each(oshape, function(k, p)
    local s = copy_shape(k)
    s[dim] = idx[k[dim]]
    out[p] = x[flat_pos(shape, s)]
  end)
  return out, oshape
end

-- out[p] = x[p with p[dim] = index[p]] over index's shape
local function ref_gather(x, shape, dim, idx, ishape)
  local out = {}
  each(ishape, function(k, p)
    local s = copy_shape(k)
    s[dim] = idx[p]
    out[p] = x[flat_pos(shape, s)]
  end)
  return out
end

-- self with src written (add: added) at p with p[dim] = index[p], in index order
local function ref_scatter(self, shape, dim, idx, ishape, src, sshape, add)
  local out = { table.unpack(self) }
  each(ishape, function(k, p)
    local s = copy_shape(k)
    s[dim] = idx[p]
    local q = flat_pos(shape, s)
    local v = src
    if type(src) == "table" then v = src[flat_pos(sshape, k)] end
    if add then out[q] = out[q] + v else out[q] = v end
  end)
  return out
end

-- ------------------------------------------------------------ index_range

case("index_range", "out-of-range indices name the op, the value and the size; nothing written",
  function()
    local x = lt.arange(1, 7):double():reshape({ 2, 3 })
    expect_error("index_select: index 4 is out of range for dimension 2 of size 3",
      x.index_select, x, 2, I { 1, 4 })
    expect_error("index 0 is out of range", x.index_select, x, 1, I { 0 })
    expect_error("gather: index 3 is out of range for dimension 1 of size 2 %(valid positions 1..2%)",
      x.gather, x, 1, I({ 1, 3, 1 }, { 1, 3 }))
    expect_error("index %-1 is out of range", x.scatter, x, 2, I({ 1, -1 }, { 1, 2 }), 5.0)
    local before = values(x)
    expect_error("scatter_add_: index 9 is out of range", x.scatter_add_, x, 2,
      I({ 1, 9 }, { 1, 2 }), lt.ones({ 1, 2 }, { dtype = "float64" }))
    expect_error("index_add_: index 3 is out of range", x.index_add_, x, 1, I { 1, 3 },
      lt.ones({ 2, 3 }, { dtype = "float64" }))
    assert.are.same(before, values(x), "failed in-place calls leave the input untouched")
    -- the first bad index in row-major order is the one named, whatever the layout
    local idx = I({ 1, 2, 7, 1, 0, 1 }, { 2, 3 }):t()   -- reads 1, 1, 2, 0, 7, 1
    expect_error("index 0 is out", x.gather, x:t():contiguous(), 2, idx)
    expect_error("index 5 is out of range for a weight of shape %[4, 2%] %(valid indices are 1..4%)",
      F.embedding, I { 1, 5 }, lt.zeros({ 4, 2 }))
    -- one_hot infers the class count from the largest value and refuses ones below 1
    check(lt.tensor({ 2, 5, 1 }, { dtype = "int64" }):one_hot(), { 3, 5 }, "int64",
      { 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0 }, 0, "one_hot inferred")
    expect_error("one_hot: class values must be at least 1 %(got 0%)", function()
      return I { 2, 0 }:one_hot()
    end)
    expect_error("one_hot: class value 4 is out of range for 3 classes", function()
      return I { 2, 4 }:one_hot(3)
    end)
    -- targets: the ignored value is skipped, any other outside 1..C is named
    local logits = lt.zeros({ 3, 4 })
    F.cross_entropy(logits, I { 1, -100, 4 })
    expect_error("target 5 is out of bounds for 4 classes", F.cross_entropy, logits, I { 1, 5, 2 })
    expect_error("target 0 is out of bounds", F.nll_loss, logits, I { 0, -100, 2 },
      { ignore_index = -100 })
    expect_error("target %-100 is out of bounds", F.nll_loss, logits, I { 1, -100, 2 },
      { ignore_index = 3 })
    -- empty indices pass
    check(x:index_select(2, I {}), { 2, 0 }, "float64", {}, 0, "empty index")
  end)

-- ------------------------------------------------------------ gather

case("gather", "index_select over dtypes, layouts, 0-d and empty inputs; backward", function()
  local shape = { 3, 4 }
  for _, dt in ipairs(DTYPES) do
    for _, kind in ipairs(LAYOUTS) do
      local t, v = input(vals_of(dt, 12), shape, dt, kind)
      for dim = 1, 2 do
        local idx = dim == 1 and { 3, 1, 3, 2 } or { 4, 4, 1 }
        for _, ik in ipairs({ "contiguous", "strided" }) do
          local it = layout(idx, { #idx }, "int64", ik)
          local want, oshape = ref_index_select(v, shape, dim, idx)
          check(t:index_select(dim, it), oshape, dt, want, 0,
            ("index_select %s %s dim %d, %s index"):format(dt, kind, dim, ik))
        end
      end
    end
  end
  check(lt.tensor(2.5):index_select(1, I { 1 }), {}, "float32", { 2.5 }, 0, "0-d input")
  check(lt.tensor(2.5):index_select(1, lt.tensor(1, { dtype = "int64" })), {}, "float32",
    { 2.5 }, 0, "0-d input and index")
  check(lt.zeros({ 0, 3 }):index_select(2, I { 3, 1 }), { 0, 2 }, "float32", {}, 0, "empty")
  -- backward: repeated indices accumulate
  for _, kind in ipairs(LAYOUTS) do
    check_grad(function(x) return x:index_select(2, I { 2, 4, 2, 2 }) end, function(x)
      return (ref_index_select(x, shape, 2, { 2, 4, 2, 2 }))
    end, distinct(12), shape, kind, "index_select " .. kind)
  end
end)

case("gather", "gather over dtypes, layouts and smaller index shapes; backward", function()
  local shape = { 3, 4 }
  for _, dt in ipairs(DTYPES) do
    for _, kind in ipairs(LAYOUTS) do
      local t, v = input(vals_of(dt, 12), shape, dt, kind)
      for dim = 1, 2 do
        local ishape = { 2, 3 }
        local idx = ints(6, 1, shape[dim])
        for _, ik in ipairs({ "contiguous", "noncontig" }) do
          local it = layout(idx, ishape, "int64", ik)
          check(t:gather(dim, it), ishape, dt, as_dtype(dt, ref_gather(v, shape, dim, idx, ishape)),
            0, ("gather %s %s dim %d %s index"):format(dt, kind, dim, ik))
        end
      end
    end
  end
  check(lt.tensor(4.0):gather(1, lt.tensor(1, { dtype = "int64" })), {}, "float32", { 4 }, 0,
    "0-d")
  check(lt.ones({ 2, 3 }):gather(2, lt.zeros({ 2, 0 }, { dtype = "int64" })), { 2, 0 },
    "float32", {}, 0, "empty index")
  for _, kind in ipairs(LAYOUTS) do
    local idx = { 1, 1, 3, 2, 3, 3, 1, 1, 2 }   -- repeats accumulate backward
    check_grad(function(x) return x:gather(1, I(idx, { 3, 3 })) end, function(x)
      return ref_gather(x, shape, 1, idx, { 3, 3 })
    end, distinct(12), shape, kind, "gather " .. kind)
  end
end)

case("gather", "embedding rows of every dtype-layout of the table, 2-d indices", function()
  for _, dt in ipairs(FLOATS) do
    for _, kind in ipairs({ "contiguous", "noncontig", "strided" }) do
      local w, wv = input(distinct(15), { 5, 3 }, dt, kind)
      local idx = { 5, 1, 5, 2, 2, 4 }
      local want = {}
      for i, r in ipairs(idx) do
        for c = 1, 3 do want[(i - 1) * 3 + c] = wv[(r - 1) * 3 + c] end
      end
      check(F.embedding(I(idx, { 2, 3 }), w), { 2, 3, 3 }, dt, want, 0, "embedding " .. kind)
    end
  end
  check(F.embedding(lt.zeros({ 0 }, { dtype = "int64" }), lt.ones({ 4, 2 })), { 0, 2 },
    "float32", {}, 0, "no indices")
end)

case("gather", "large index_select and embedding (split across threads), both paths", function()
  local shape = { 300, 200 }
  local x = make(distinct(60000), shape, "float32")
  local xv = values(x)
  local idx = ints(400, 1, 300)
  for _, t in ipairs({ x, x:t():contiguous():t() }) do   -- block copies, then the general walk
    local want, oshape = ref_index_select(xv, shape, 1, idx)
    check(t:index_select(1, I(idx)), oshape, "float32", want, 0, "large index_select")
  end
  local e = F.embedding(I(idx, { 20, 20 }), x)
  local want = ref_index_select(xv, shape, 1, idx)
  check(e, { 20, 20, 200 }, "float32", want, 0, "large embedding")
end)

-- ------------------------------------------------------------ scatter

case("scatter", "large index_add with repeats (split across threads), both paths", function()
  local rows, cols, n = 300, 200, 500
  local idx = ints(n, 1, rows)
  local src = make(distinct(n * cols), { n, cols }, "float64")
  local sv = values(src)
  local want = {}
  for i = 1, rows * cols do want[i] = 0 end
  for k = 1, n do
    for c = 1, cols do
      local q = (idx[k] - 1) * cols + c
      want[q] = want[q] + sv[(k - 1) * cols + c]
    end
  end
  local z = lt.zeros({ rows, cols }, { dtype = "float64" })
  check(z:index_add(1, I(idx), src), { rows, cols }, "float64", want, 1e-12, "contiguous rows")
  local zt = lt.zeros({ cols, rows }, { dtype = "float64" }):t()
  check(zt:index_add(1, I(idx), src), { rows, cols }, "float64", want, 1e-12, "strided rows")
end)

case("scatter", "scatter and scatter_add over dtypes and layouts, duplicate indices, values",
  function()
    local shape, ishape = { 3, 4 }, { 2, 4 }
    for _, dt in ipairs(DTYPES) do
      for _, kind in ipairs({ "contiguous", "noncontig", "strided" }) do
        local self, sv = input(vals_of(dt, 12), shape, dt, kind)
        local src, rv = input(vals_of(dt, 8), ishape, dt, "noncontig")
        -- along dim 1 each column's two writes go to distinct rows: a defined scatter
        local idx = { 1, 3, 2, 1, 3, 2, 1, 2 }
        local want = ref_scatter(sv, shape, 1, idx, ishape, rv, ishape, false)
        check(self:scatter(1, I(idx, ishape), src), shape, dt, as_dtype(dt, want), 0,
          "scatter " .. dt .. " " .. kind)
        local wv = ref_scatter(sv, shape, 1, idx, ishape, 1, nil, false)
        check(self:scatter(1, I(idx, ishape), dt == "bool" and true or 1), shape, dt,
          as_dtype(dt, wv), 0, "scatter value " .. dt)
        if dt ~= "bool" then
          local dup = { 2, 2, 4, 1, 2, 2, 2, 2 }   -- along dim 2: repeats accumulate
          local wa = ref_scatter(sv, shape, 2, dup, ishape, rv, ishape, true)
          check(self:scatter_add(2, I(dup, ishape), src), shape, dt, wa, tol_of(dt),
            "scatter_add duplicates " .. dt .. " " .. kind)
          local c = self:clone()
          c:scatter_add_(2, I(dup, ishape), src)
          check(c, shape, dt, wa, tol_of(dt), "scatter_add_ " .. dt)
        end
      end
    end
    -- the last write wins along a row of repeats (k in order)
    local z = lt.zeros({ 1, 3 }):scatter(2, I({ 2, 2, 2 }, { 1, 3 }), lt.tensor({ { 7.0, 8.0, 9.0 } }))
    check(z, { 1, 3 }, "float32", { 0, 9, 0 }, 0, "last write wins")
    -- a source larger than the index: only its leading corner is read
    local big = make(distinct(12), { 3, 4 }, "float64")
    local bv = values(big)
    local wc = ref_scatter({ 0, 0, 0, 0, 0, 0 }, { 2, 3 }, 1, { 2, 1 }, { 1, 2 }, bv, { 3, 4 }, true)
    check(lt.zeros({ 2, 3 }, { dtype = "float64" }):scatter_add(1, I({ 2, 1 }, { 1, 2 }), big),
      { 2, 3 }, "float64", wc, 0, "larger src")
    check(lt.tensor(1.0):scatter(1, lt.tensor(1, { dtype = "int64" }), lt.tensor(5.0)), {},
      "float32", { 5 }, 0, "0-d")
    check(lt.ones({ 2, 2 }):scatter_add(1, lt.zeros({ 0, 2 }, { dtype = "int64" }),
      lt.ones({ 0, 2 })), { 2, 2 }, "float32", { 1, 1, 1, 1 }, 0, "empty index")
  end)

case("scatter", "scatter and scatter_add backward (self and src), index_add forward/backward",
  function()
    local shape, ishape = { 3, 4 }, { 2, 4 }
    local idx = { 1, 3, 2, 1, 3, 2, 1, 2 }
    local src = make(distinct(8), ishape, "float64")
    local sv = values(src)
    for _, kind in ipairs({ "contiguous", "noncontig", "strided" }) do
      check_grad(function(x) return x:scatter(1, I(idx, ishape), src) end, function(x)
        return ref_scatter(x, shape, 1, idx, ishape, sv, ishape, false)
      end, distinct(12), shape, kind, "scatter self " .. kind)
      check_grad(function(x) return x:scatter_add(1, I(idx, ishape), src) end, function(x)
        return ref_scatter(x, shape, 1, idx, ishape, sv, ishape, true)
      end, distinct(12), shape, kind, "scatter_add self " .. kind)
    end
    local base = make(distinct(12), shape, "float64")
    local bv = values(base)
    check_grad(function(s) return base:scatter_add(1, I(idx, ishape), s) end, function(s)
      return ref_scatter(bv, shape, 1, idx, ishape, s, ishape, true)
    end, distinct(8), ishape, "noncontig", "scatter_add src")
    -- index_add: 1-d index along dim, duplicates accumulate
    for _, dt in ipairs({ "float32", "float64", "int64" }) do
      for _, kind in ipairs({ "contiguous", "noncontig", "strided" }) do
        local t, tv = input(vals_of(dt, 12), shape, dt, kind)
        local s, svv = input(vals_of(dt, 9), { 3, 3 }, dt, "noncontig")
        local ix = { 4, 1, 4 }
        local want = { table.unpack(tv) }
        for r = 1, 3 do
          for k = 1, 3 do
            local q = (r - 1) * 4 + ix[k]
            want[q] = want[q] + svv[(r - 1) * 3 + k]
          end
        end
        check(t:index_add(2, I(ix), s), shape, dt, want, tol_of(dt), "index_add " .. dt .. kind)
      end
    end
    check(lt.zeros({ 3 }):index_add(1, lt.tensor(2, { dtype = "int64" }), lt.tensor(4.0)), { 3 },
      "float32", { 0, 4, 0 }, 0, "index_add 0-d source")
    check_grad(function(s) return lt.zeros({ 3, 4 }, { dtype = "float64" }):index_add(2,
      I { 4, 1, 4 }, s) end, function(s)
      local out = {}
      for i = 1, 12 do out[i] = 0 end
      for r = 1, 3 do
        for k, c in ipairs({ 4, 1, 4 }) do
          out[(r - 1) * 4 + c] = out[(r - 1) * 4 + c] + s[(r - 1) * 3 + k]
        end
      end
      return out
    end, distinct(9), { 3, 3 }, "strided", "index_add src")
  end)

case("scatter", "embedding backward: duplicate indices accumulate, padding_idx gets none",
  function()
    local idx = { 2, 4, 2, 1, 2, 3 }
    for _, pad in ipairs({ false, 2, 3 }) do
      -- the padding row reads as a constant: it gets no gradient
      local w0 = distinct(8)
      check_grad(function(w) return F.embedding(I(idx, { 2, 3 }), w, pad or nil) end,
        function(w)
          local out = {}
          for i, r in ipairs(idx) do
            local from = r == pad and w0 or w
            for c = 1, 2 do out[(i - 1) * 2 + c] = from[(r - 1) * 2 + c] end
          end
          return out
        end, w0, { 4, 2 }, "contiguous", "embedding pad " .. tostring(pad))
      local w = lt.ones({ 4, 2 }, { dtype = "float64", requires_grad = true })
      F.embedding(I(idx, { 2, 3 }), w, pad or nil):sum():backward()
      local want = { 1, 1, 3, 3, 1, 1, 1, 1 }
      if pad then want[pad * 2 - 1], want[pad * 2] = 0, 0 end
      check(w.grad, { 4, 2 }, "float64", want, 0, "embedding counts pad " .. tostring(pad))
    end
  end)

case("scatter", "one_hot over layouts, 0-d and empty", function()
  for _, kind in ipairs({ "contiguous", "noncontig", "strided" }) do
    local v = ints(6, 1, 4)
    local t = layout(v, { 2, 3 }, "int64", kind)
    local tv = values(t)
    local want = {}
    for i, c in ipairs(tv) do
      for k = 1, 4 do want[(i - 1) * 4 + k] = k == c and 1 or 0 end
    end
    check(t:one_hot(4), { 2, 3, 4 }, "int64", want, 0, "one_hot " .. kind)
  end
  check(lt.tensor(3, { dtype = "int64" }):one_hot(4), { 4 }, "int64", { 0, 0, 1, 0 }, 0, "0-d")
  check(lt.zeros({ 0 }, { dtype = "int64" }):one_hot(3), { 0, 3 }, "int64", {}, 0, "empty")
end)

-- ------------------------------------------------------------ masked ops

local function mask_vals(n) return ints(n, 0, 1) end

case("masked_fill", "dtypes, layouts, broadcast masks, in place; backward", function()
  local shape = { 2, 3, 4 }
  for _, dt in ipairs(DTYPES) do
    for _, kind in ipairs(LAYOUTS) do
      local t, v = input(vals_of(dt, 24), shape, dt, kind)
      local mv = mask_vals(12)
      local m = make(mv, { 3, 4 }, "bool")   -- broadcast over dim 1
      local fill = dt == "bool" and 1 or -7
      local want = {}
      for i = 1, 24 do
        local mi = mv[(i - 1) % 12 + 1] == 1
        want[i] = mi and fill or v[i]
      end
      want = as_dtype(dt, want)
      check(t:masked_fill(m, fill), shape, dt, want, 0, "masked_fill " .. dt .. " " .. kind)
      if kind ~= "broadcast" then
        local c = t:clone()
        c:masked_fill_(m, fill)
        check(c, shape, dt, want, 0, "masked_fill_ " .. dt)
      end
    end
  end
  -- a mask that broadcasts the input up
  local x = lt.tensor({ 1.0, 2.0, 3.0 })
  local m = make({ 1, 0, 0, 0, 0, 1 }, { 2, 3 }, "bool")
  check(x:masked_fill(m, 0), { 2, 3 }, "float32", { 0, 2, 3, 1, 2, 0 }, 0, "broadcast up")
  check(lt.tensor(2.0):masked_fill(lt.tensor(true), 5), {}, "float32", { 5 }, 0, "0-d")
  check(lt.zeros({ 0, 2 }):masked_fill(lt.zeros({ 0, 2 }, { dtype = "bool" }), 1), { 0, 2 },
    "float32", {}, 0, "empty")
  local nan = lt.tensor({ 0 / 0, 1.0 }):masked_fill(lt.tensor({ true, false }), 3)
  check(nan, { 2 }, "float32", { 3, 1 }, 0, "NaN replaced")
  for _, kind in ipairs(LAYOUTS) do
    local mv = mask_vals(4)
    check_grad(function(a) return a:masked_fill(make(mv, { 4 }, "bool"), 2.5) end, function(a)
      local r = {}
      for i = 1, #a do r[i] = mv[(i - 1) % 4 + 1] == 1 and 2.5 or a[i] end
      return r
    end, distinct(12), { 3, 4 }, kind, "masked_fill " .. kind)
  end
end)

-- masked_select's reference: the set elements in row-major order of the broadcast shape
local function ref_select(v, mv, n, mn)
  local out = {}
  for i = 1, n do
    if mv[(i - 1) % mn + 1] == 1 then out[#out + 1] = v[i] end
  end
  return out
end

case("mask_count", "masked_select sizes: all, none, broadcast and empty masks", function()
  local x = make(distinct(12), { 3, 4 }, "float64")
  check(x:masked_select(lt.ones({ 3, 4 }, { dtype = "bool" })), { 12 }, "float64", values(x), 0,
    "all set")
  check(x:masked_select(lt.zeros({ 4 }, { dtype = "bool" })), { 0 }, "float64", {}, 0, "none")
  local mv = { 1, 0, 1, 1 }
  local r = x:masked_select(make(mv, { 4 }, "bool"))
  assert.are.same({ 9 }, r.shape, "a broadcast mask counts once per position it covers")
  local col = make({ 1, 0, 1 }, { 3, 1 }, "bool")
  assert.are.same({ 8 }, x:masked_select(col).shape)
  check(lt.zeros({ 0, 4 }):masked_select(lt.ones({ 4 }, { dtype = "bool" })), { 0 }, "float32",
    {}, 0, "empty input")
  local big = lt.ones({ 300, 301 }, { dtype = "bool" }):triu()
  assert.are.same({ 300 * 301 - 299 * 300 / 2 }, lt.zeros({ 300, 301 }):masked_select(big).shape)
end)

case("masked_select", "dtypes, layouts and broadcasting, in row-major order", function()
  local shape = { 2, 3, 4 }
  for _, dt in ipairs(DTYPES) do
    for _, kind in ipairs(LAYOUTS) do
      local t, v = input(vals_of(dt, 24), shape, dt, kind)
      local mv = mask_vals(12)
      local want = ref_select(v, mv, 24, 12)
      check(t:masked_select(make(mv, { 3, 4 }, "bool")), { #want }, dt, want, 0,
        "masked_select " .. dt .. " " .. kind)
    end
  end
  local x = lt.tensor({ 1.0, 2.0 })
  check(x:masked_select(make({ 1, 0, 1, 1 }, { 2, 2 }, "bool")), { 3 }, "float32", { 1, 1, 2 },
    0, "input broadcast up")
  check(lt.tensor(3.0):masked_select(lt.tensor(true)), { 1 }, "float32", { 3 }, 0, "0-d")
end)

case("masked_select", "nonzero: 1-based positions of the non-zero elements, row-major", function()
  local shape = { 2, 3, 4 }
  for _, kind in ipairs(LAYOUTS) do
    local t, v = input(mask_vals(24), shape, "int64", kind)
    local want = {}
    each(shape, function(idx, p)
      if v[p] ~= 0 then
        for d = 1, 3 do want[#want + 1] = idx[d] end
      end
    end)
    check(t:nonzero(), { #want // 3, 3 }, "int64", want, 0, "nonzero " .. kind)
    check(t:ne(0):count_nonzero(), {}, "int64", { #want // 3 }, 0, "count_nonzero " .. kind)
  end
end)

case("masked_scatter", "masked_select backward: the gradient back at the set positions",
  function()
    for _, kind in ipairs(LAYOUTS) do
      local mv = mask_vals(12)
      local m = make(mv, { 3, 4 }, "bool")
      check_grad(function(a) return a:masked_select(m) end, function(a)
        return ref_select(a, mv, 24, 12)
      end, distinct(24), { 2, 3, 4 }, kind, "masked_select " .. kind)
    end
    -- an input that the mask broadcasts up: its gradient sums over the broadcast dim
    local mv = { 1, 1, 0, 1, 0, 1 }
    check_grad(function(a) return a:masked_select(make(mv, { 2, 3 }, "bool")) end, function(a)
      return ref_select({ a[1], a[2], a[3], a[1], a[2], a[3] }, mv, 6, 6)
    end, distinct(3), { 3 }, "contiguous", "masked_select broadcast input")
  end)

return {}
