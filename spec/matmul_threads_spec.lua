-- Matrix products over several threads: OpenBLAS stays on one thread and a large product is cut
-- into blocks of C (or a batch into its entries) over Lantern's pool. Every element of every
-- block is checked against the float64 product and against the one-thread result, for shapes
-- that split rows, columns, both, or cannot split; transposed operands; gemv in both layouts;
-- batches run entry by entry, folded, reduced into a broadcast C; int64; and addmm's beta.
local lt = require "lantern"

-- max |got - want| over every element, both converted to float64
local function maxdiff(got, want) return (got:double() - want:double()):abs():max():item() end

-- the float32 product's rounding: each of the k terms and partial sums rounds at 2^-24
local function tol(k, scale) return 4 * k * 2 ^ -24 * scale end

describe("matmul over several threads", function()
  local saved
  before_each(function()
    saved = lt.get_num_threads()
    lt.manual_seed(7)
  end)
  after_each(function() lt.set_num_threads(saved) end)

  -- product of a and b at nt threads
  local function at(nt, f, ...)
    lt.set_num_threads(nt)
    local r = f(...)
    lt.set_num_threads(saved)
    return r
  end

  for _, s in ipairs {
    { 128, 784, 512 },   -- wider than tall: columns split
    { 1000, 64, 40 },    -- taller than wide: rows split
    { 37, 513, 1029 },   -- ragged blocks
    { 17, 100000, 17 },  -- too narrow to split either way: one call
    { 2, 3, 4 },         -- too small for a second thread
    { 600, 600, 600 },
  } do
    local m, k, n = s[1], s[2], s[3]
    it(string.format("(%d x %d) @ (%d x %d) with each operand transposed or not", m, k, k, n),
      function()
        local a, b = lt.randn(m, k), lt.randn(k, n)
        local at_, bt_ = a:t():contiguous(), b:t():contiguous()
        local want = a:double():mm(b:double())
        local mm = function(x, y) return x:mm(y) end
        for _, pair in ipairs { { a, b }, { at_:t(), b }, { a, bt_:t() }, { at_:t(), bt_:t() } } do
          local two = at(4, mm, pair[1], pair[2])
          local one = at(1, mm, pair[1], pair[2])
          assert.are.same({ m, n }, two.shape)
          local t = tol(k, math.sqrt(k) * 4)
          assert.is_true(maxdiff(two, want) <= t, "vs float64: " .. maxdiff(two, want))
          assert.is_true(maxdiff(two, one) <= t, "vs one thread: " .. maxdiff(two, one))
        end
      end)
  end

  it("float64 products split the same way", function()
    local a, b = lt.randn(300, 200, { dtype = "float64" }), lt.randn(200, 500, { dtype = "float64" })
    local two = at(2, a.mm, a, b)
    -- the reference: sums in a fixed order, row by row
    local want = lt.zeros(300, 500, { dtype = "float64" })
    for i = 1, 200 do want:add_(a:select(2, i):unsqueeze(2) * b:select(1, i):unsqueeze(1)) end
    assert.is_true(maxdiff(two, want) < 1e-11)
  end)

  it("matrix-vector products cut the result in both layouts", function()
    local m, v, w = lt.randn(3000, 300), lt.randn(300), lt.randn(3000)
    local mv = function(x, y) return x:mv(y) end
    local y1 = at(2, mv, m, v)
    local y2 = at(2, mv, m:t(), w)   -- a column-major matrix: BLAS's transposed gemv
    assert.is_true(maxdiff(y1, m:double():mv(v:double())) <= tol(300, 60))
    assert.is_true(maxdiff(y2, m:double():t():mv(w:double())) <= tol(3000, 200))
    assert.are.same({ 3000 }, y1.shape)
    assert.are.same({ 300 }, y2.shape)
  end)

  it("batches: entries over threads, folded rows, a reduced C, uneven counts", function()
    local bmm = function(x, y) return x:bmm(y) end
    local matmul = function(x, y) return x:matmul(y) end
    for _, P in ipairs { 8, 3, 1 } do   -- 8: entries over threads; 3: each product split
      local q, k = lt.randn(P, 200, 64), lt.randn(P, 64, 300)
      local two = at(2, bmm, q, k)
      assert.is_true(maxdiff(two, q:double():bmm(k:double())) <= tol(64, 40), "P " .. P)
    end
    -- (B, T, K) @ (K, N): the batch folds into the rows of one product
    local x, w = lt.randn(4, 100, 96), lt.randn(96, 80)
    assert.is_true(maxdiff(at(2, matmul, x, w), x:double():matmul(w:double())) <= tol(96, 40))
    -- the gradient of a weight shared by the batch sums every entry's product into one C
    local wg = lt.randn(96, 80, { requires_grad = true })
    local g = lt.randn(4, 100, 80)
    lt.set_num_threads(2)
    local y = x:matmul(wg)
    y:backward(g)
    lt.set_num_threads(saved)
    local want = x:double():reshape(400, 96):t():mm(g:double():reshape(400, 80))
    assert.is_true(maxdiff(wg.grad, want) <= tol(400, 80))
  end)

  it("int64 batches over threads", function()
    local a, b = lt.randint(-9, 10, { 16, 20, 30 }), lt.randint(-9, 10, { 16, 30, 25 })
    local two = at(2, a.bmm, a, b)
    local want = a:double():bmm(b:double())
    assert.are.equal("int64", two.dtype)
    assert.are.equal(0, maxdiff(two, want))
  end)

  it("addmm starts every block from beta * input", function()
    local input, a, b = lt.randn(256, 384), lt.randn(256, 128), lt.randn(128, 384)
    local two = at(2, function() return lt.addmm(input, a, b, { beta = 0.5, alpha = 2 }) end)
    local want = input:double() * 0.5 + a:double():mm(b:double()) * 2
    assert.is_true(maxdiff(two, want) <= tol(128, 100))
  end)

  -- a bias row (n elements at unit stride, 1-D or 1 x n) is read where each block of C is
  -- stored; any other input, or a product BLAS does not take (one row, an empty inner dim), is
  -- copied into C first. Both give the bits of a full input copied into C.
  it("addmm from a bias row: the bits of the bias copied into every row, at 1 and 2 threads",
    function()
    for _, dt in ipairs { "float32", "float64" } do
      for _, s in ipairs { { 256, 128, 384 }, { 300, 600, 70 }, { 1, 40, 30 }, { 5, 0, 9 } } do
        local m, k, n = s[1], s[2], s[3]
        local a, b = lt.randn(m, k, { dtype = dt }), lt.randn(n, k, { dtype = dt }):t()
        local wide = lt.randn(n, 2, { dtype = dt })
        for _, bias in ipairs { lt.randn(n, { dtype = dt }), lt.randn(1, n, { dtype = dt }),
                                wide:select(2, 1) } do
          local full = bias:reshape(1, n):expand(m, n):contiguous()
          for _, nt in ipairs { 1, 2 } do
            for _, ab in ipairs { { 1, 1 }, { 0.5, -2 } } do
              local f = function(i) return lt.addmm(i, a, b, { beta = ab[1], alpha = ab[2] }) end
              local got, want = at(nt, f, bias), at(nt, f, full)
              assert.is_true(lt.equal(got, want),
                string.format("%s %dx%dx%d bias %s at %d threads", dt, m, k, n,
                  table.concat(bias.shape, "x"), nt))
            end
          end
        end
      end
    end
  end)
end)
