-- The fused cross_entropy's row kernels (src/cpu/nn.c): contiguous float32 rows take vector
-- kernels (float exponentials summed in double lanes), other rows the double loops; rows run
-- in parallel. Against the float64 loss for class counts around the lane count, with weights,
-- label smoothing, ignored targets and every reduction; the same bits at 1 and 2 threads; and
-- masked (-inf), infinite and NaN scores as float64 gives them.
local lt = require "lantern"
local F = lt.nn.functional

local function check(got, want, what)
  -- NaN where float64 has NaN (a mean over no kept target is 0/0), and only there
  local gn, wn = got:double():isnan(), want:isnan()
  assert.is_true(gn:eq(wn):all():item(), what .. ": NaNs differ")
  got, want = got:double():masked_fill(wn, 0), want:masked_fill(wn, 0)
  local scale = want:abs():max():item() + 1e-3
  local err = (got:double() - want):abs():max():item()
  assert.is_true(err <= 2e-6 * scale, string.format("%s: %g (scale %g)", what, err, scale))
end

describe("cross_entropy rows", function()
  local saved
  before_each(function() saved = lt.get_num_threads() end)
  after_each(function() lt.set_num_threads(saved) end)

  it("match float64 for class counts around the lane count, every option", function()
    lt.manual_seed(6)
    for _, C in ipairs { 1, 7, 16, 17, 65, 1000, 40000 } do
      local N = C > 1000 and 3 or 37
      local x = lt.randn(N, C) * 4
      local t = lt.randint(1, C + 1, { N })
      local w = lt.rand(C) + 0.5
      if N > 2 then t[2] = 1 end
      for _, o in ipairs {
        {}, { reduction = "sum" }, { reduction = "none" }, { weight = w },
        { label_smoothing = 0.1 }, { weight = w, label_smoothing = 0.2, reduction = "none" },
        { ignore_index = 1 },
      } do
        local o64 = {}
        for k, v in pairs(o) do o64[k] = k == "weight" and v:double() or v end
        local a, b = x:clone():requires_grad_(), x:double():requires_grad_()
        local la, lb = F.cross_entropy(a, t, o), F.cross_entropy(b, t, o64)
        local what = string.format("C %d %s", C, (next(o)) or "mean")
        check(la, lb, what)
        local g = lt.rand(table.unpack(la.shape)) + 0.5
        la:backward(g)
        lb:backward(g:double())
        check(a.grad, b.grad, what .. " backward")
      end
    end
  end)

  it("give the same bits at 1 and at 2 threads", function()
    lt.manual_seed(2)
    local x, t = lt.randn(300, 513), lt.randint(1, 514, { 300 })
    local function run(nt)
      lt.set_num_threads(nt)
      local a = x:clone():requires_grad_()
      local l = F.cross_entropy(a, t, { label_smoothing = 0.05 })
      l:backward()
      return l:item(), a.grad
    end
    local l1, g1 = run(1)
    local l2, g2 = run(2)
    assert.are.equal(string.format("%a", l1), string.format("%a", l2))
    assert.are.equal(0, (g1 - g2):abs():max():item())
  end)

  it("treat masked, infinite and NaN scores as float64", function()
    local inf, nan = 1 / 0, 0 / 0
    local rows = {
      { 1.5, -inf, 2, -inf, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -inf },
      { 0.5, 1, 2, 3, nan, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2 },
      { 0.5, 1, 2, 3, inf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2 },
      { 100, -100, 88.5, -88.5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2 },
    }
    for r, row in ipairs(rows) do
      local x = lt.tensor({ row }, { dtype = "float32" })
      local t = lt.tensor({ 1 })
      local a, b = x:clone():requires_grad_(), x:double():requires_grad_()
      local la, lb = F.cross_entropy(a, t), F.cross_entropy(b, t)
      la:backward()
      lb:backward()
      local pairs_ = { { la:reshape(1), lb:reshape(1) }, { a.grad:reshape(-1), b.grad:reshape(-1) } }
      for _, p in ipairs(pairs_) do
        local u, v = p[1]:tolist(), p[2]:float():tolist()
        for i = 1, #v do
          -- a probability's float exponential of a float argument: 2^-24 of |x - lse| relative
          local ok = (v[i] ~= v[i] and u[i] ~= u[i]) or u[i] == v[i] or
              math.abs(u[i] - v[i]) <= 4e-6 * math.abs(v[i]) + 1e-7
          assert.is_true(ok, string.format("row %d element %d: %s, float64 gives %s", r, i,
            tostring(u[i]), tostring(v[i])))
        end
      end
    end
  end)

  -- fewer classes than vector lanes: rows side by side, one per lane
  it("of few classes treat masked, infinite and NaN scores as float64, beside ordinary rows", function()
    local inf, nan = 1 / 0, 0 / 0
    local rows = {
      { 1.5, -inf, 2, -inf, 3 }, { 0.5, 1, nan, 3, 2 }, { 0.5, 1, 2, 3, inf },
      { 100, -100, 88.5, -88.5, 0 }, { -inf, -inf, -inf, -inf, -inf }, { nan, -inf, -inf, -inf, -inf },
      { -inf, -inf, 7, -inf, -inf }, { 0.25, -1, 2, 0, 1 },
    }
    for k = 1, 11 do rows[#rows + 1] = { k / 3, -k, k % 4, 1, -2 } end   -- 19 rows: two blocks
    local x = lt.tensor(rows, { dtype = "float32" })
    local t = lt.randint(1, 6, { #rows })
    t[7] = 3
    for _, o in ipairs { { reduction = "none" }, { reduction = "none", ignore_index = 2 } } do
      local a, b = x:clone():requires_grad_(), x:double():requires_grad_()
      local la, lb = F.cross_entropy(a, t, o), F.cross_entropy(b, t, o)
      la:sum():backward()
      lb:sum():backward()
      for _, p in ipairs { { la, lb }, { a.grad:reshape(-1), b.grad:reshape(-1) } } do
        local u, v = p[1]:tolist(), p[2]:float():tolist()
        for i = 1, #v do
          local ok = (v[i] ~= v[i] and u[i] ~= u[i]) or u[i] == v[i] or
              math.abs(u[i] - v[i]) <= 4e-6 * math.abs(v[i]) + 1e-7
          assert.is_true(ok, string.format("element %d: %s, float64 gives %s", i, tostring(u[i]),
            tostring(v[i])))
        end
      end
    end
  end)

  it("of few classes give each row the row kernel's bits", function()
    -- padded with -inf scores to 16 classes, a row takes the row kernel, whose log-sum-exp, loss
    -- and gradient over the real classes are the same numbers; NaN, infinite and masked scores
    -- and infinite incoming gradients included (0 x inf makes the smoothing term NaN)
    local inf, nan = 1 / 0, 0 / 0
    local function hex(t)
      local r = {}
      for k, v in ipairs(t:reshape(-1):tolist()) do r[k] = string.format("%a", v) end
      return table.concat(r, " ")
    end
    lt.manual_seed(8)
    for _, C in ipairs { 1, 3, 10, 15 } do
      local x, t = lt.randn(37, C) * 3, lt.randint(1, C + 1, { 37 })
      x[2][1], x[3][C], x[5][1] = nan, inf, -inf
      x[4] = -inf
      local g = lt.rand(37) + 0.5
      g[6], g[7] = inf, -inf
      local function run(input)
        local a = input:clone():requires_grad_()
        local l = F.cross_entropy(a, t, { reduction = "none" })
        l:backward(g)
        return hex(l), hex(a.grad:narrow(2, 1, C))
      end
      local l1, g1 = run(x)
      local l2, g2 = run(lt.cat({ x, lt.full({ 37, 16 - C }, -inf) }, 2))
      assert.are.equal(l2, l1, "loss, C " .. C)
      assert.are.equal(g2, g1, "gradient, C " .. C)
    end
  end)

  -- (N, C, d1, d2) float32 input moves its classes last and takes the vector rows
  it("of spatial inputs match float64 for every reduction and option, with the gradient", function()
    lt.manual_seed(1)
    local x = lt.randn(3, 5, 4, 2)
    local t = lt.randint(1, 6, { 3, 4, 2 })
    t[1][1][1] = 3
    local w = lt.rand(5)
    for _, r in ipairs { "none", "mean", "sum" } do
      for _, o in ipairs { {}, { weight = w }, { ignore_index = 3 }, { label_smoothing = 0.2 },
        { weight = w, ignore_index = 3, label_smoothing = 0.1 } } do
        local a, b = x:clone():requires_grad_(), x:double():requires_grad_()
        local la = F.cross_entropy(a, t, { reduction = r, weight = o.weight, ignore_index = o.ignore_index,
          label_smoothing = o.label_smoothing })
        local lb = F.cross_entropy(b, t, { reduction = r, weight = o.weight and o.weight:double(),
          ignore_index = o.ignore_index, label_smoothing = o.label_smoothing })
        assert.are.same(lb:size(), la:size())
        assert.is_true((la:double() - lb):abs():max():item() < 1e-5, r)
        la:sum():backward()
        lb:sum():backward()
        assert.is_true((a.grad:double() - b.grad):abs():max():item() < 1e-5, r)
      end
    end
  end)
end)

describe("regression losses", function()
  -- the fused kernels (and binary_cross_entropy_with_logits's) sum chunks of 16384 elements in
  -- double lanes and add the chunks in order
  it("give the same bits at 1 and at 2 threads and stay within float32 rounding of float64", function()
    lt.manual_seed(4)
    local x, t = lt.randn(300, 333) * 3, lt.rand(300, 333)
    local threads = lt.get_num_threads()
    for _, f in ipairs { F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss,
      F.binary_cross_entropy_with_logits } do
      for _, r in ipairs { "mean", "sum" } do
        local got = {}
        for n = 1, 2 do
          lt.set_num_threads(n)
          local a = x:clone():requires_grad_()
          local l = f(a, t, { reduction = r })
          l:backward()
          got[n] = { l:item(), a.grad:clone() }
        end
        lt.set_num_threads(threads)
        assert.are.equal(got[1][1], got[2][1])
        assert.is_true(got[1][2]:equal(got[2][2]))
        local want = f(x:double(), t:double(), { reduction = r }):item()
        assert.is_true(math.abs(got[1][1] - want) <= math.abs(want) * 2 ^ -22, r)
      end
    end
  end)

  -- PyTorch's edge values: l1's gradient is 0 at a NaN or zero difference (smooth_l1's and
  -- huber's NaN), |-0| is +0; the target's gradient is l1's and bce's negated (-0 for a +0),
  -- the others' formula at target - input
  it("give PyTorch's values at zero and NaN differences", function()
    local a = lt.tensor({ 0 / 0, -0.0, 1.0 }):requires_grad_()
    F.l1_loss(a, lt.zeros(3), { reduction = "sum" }):backward()
    assert.are.same({ 0, 0, 1 }, a.grad:tolist())
    local s = lt.tensor({ 0 / 0, 1.0 }):requires_grad_()
    F.smooth_l1_loss(s, lt.zeros(2), { reduction = "sum" }):backward()
    local g = s.grad:tolist()
    assert.is_true(g[1] ~= g[1] and g[2] == 1)
    local l = F.l1_loss(lt.tensor({ -0.0 }), lt.tensor({ 0.0 }), { reduction = "none" })
    assert.are.equal("0x0p+0", string.format("%a", l[1]:item()))
    local function zero_sign(f, a, b)
      local t = lt.tensor({ b }):requires_grad_()
      f(lt.tensor({ a }), t, { reduction = "sum" }):backward()
      return string.format("%a", t.grad[1]:item())
    end
    assert.are.equal("0x0p+0", zero_sign(F.mse_loss, 0.0, 0.0))
    assert.are.equal("-0x0p+0", zero_sign(F.mse_loss, 0.0, -0.0))
    assert.are.equal("-0x0p+0", zero_sign(F.l1_loss, 1.0, 1.0))
    assert.are.equal("-0x0p+0", zero_sign(F.binary_cross_entropy_with_logits, 0.0, 0.5))
  end)
end)
