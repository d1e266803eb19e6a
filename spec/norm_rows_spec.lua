-- The float32 vector kernels of layer_norm, rms_norm, group_norm and batch_norm (src/cpu/norm.c):
-- forward, dx, dweight and dbias give the same bits at every ISA level the CPU supports and at 1
-- and 2 threads (the sums run in fixed lanes: double, or float for the backward of layer and rms
-- norm with a weight), match the float64 norms within float32
-- rounding for lengths around the lane count, and treat constant rows, huge values, NaN and
-- infinities as the float64 kernels do.
local lt = require "lantern"
local support = require "support"

-- every result of both norms, with and without affine parameters, as hex floats; one line per
-- thread count
local NORMS = [[
local lt = require "lantern"
lt.manual_seed(5)
local cases = {}
for _, d in ipairs { 1, 7, 8, 9, 17, 128, 1000, 4097 } do
  cases[#cases + 1] = { x = lt.randn(6, d) * 3 + 0.5, g = lt.randn(6, d), w = lt.randn(d), b = lt.randn(d) }
end
-- rows enough for several chunks of the fused dx + dweight pass, split between threads
cases[#cases + 1] = { x = lt.randn(300, 33) * 3 + 0.5, g = lt.randn(300, 33), w = lt.randn(33), b = lt.randn(33) }
local planes = {}
-- batch norm planes under 16 values walk rows in blocks of 256 columns: C = 300 and (40, 10)
-- take two blocks, (2, 3000) twelve, split between the threads by block as well as by row
for _, shape in ipairs { { 3, 6, 1 }, { 2, 6, 7, 3 }, { 4, 4, 17 }, { 2, 8, 32, 32 }, { 40, 4, 5 },
  { 20, 300 }, { 6, 40, 10 }, { 2, 3000 } } do
  local C = shape[2]
  planes[#planes + 1] = { x = lt.randn(table.unpack(shape)) * 2 - 1, g = lt.randn(table.unpack(shape)),
    C = C, w = lt.randn(C), b = lt.randn(C) }
end
for _, threads in ipairs { 1, 2 } do
  lt.set_num_threads(threads)
  local out = {}
  local function emit(t) for _, v in ipairs(t:reshape(-1):tolist()) do out[#out + 1] = string.format("%a", v) end end
  for _, c in ipairs(cases) do
    local d = c.x:size(2)
    for _, affine in ipairs { "wb", "w", "b", "" } do
      local x = c.x:clone():requires_grad_()
      local w = affine:find("w") and c.w:clone():requires_grad_() or nil
      local b = affine:find("b") and c.b:clone():requires_grad_() or nil
      local y = lt.layer_norm(x, d, w, b)
      y:backward(c.g)
      emit(y); emit(x.grad)
      if w then emit(w.grad) end
      if b then emit(b.grad) end
      if affine ~= "b" then
        local x2 = c.x:clone():requires_grad_()
        local w2 = w and c.w:clone():requires_grad_() or nil
        local y2 = lt.rms_norm(x2, d, w2, 1e-6)
        y2:backward(c.g)
        emit(y2); emit(x2.grad)
        if w2 then emit(w2.grad) end
      end
    end
  end
  for _, gc in ipairs(planes) do
    local x0, g, C, w0, b0 = gc.x, gc.g, gc.C, gc.w, gc.b
    for _, affine in ipairs { true, false } do
      local x = x0:clone():requires_grad_()
      local w = affine and w0:clone():requires_grad_() or nil
      local b = affine and b0:clone():requires_grad_() or nil
      local y = lt.group_norm(x, 2, w, b)
      y:backward(g)
      emit(y); emit(x.grad)
      if w then emit(w.grad); emit(b.grad) end
      local x2 = x0:clone():requires_grad_()
      local w2 = affine and w0:clone():requires_grad_() or nil
      local b2 = affine and b0:clone():requires_grad_() or nil
      local rm, rv = lt.zeros(C), lt.ones(C)
      local y2 = lt.batch_norm(x2, rm, rv, w2, b2, true, 0.1, 1e-5)
      y2:backward(g)
      emit(y2); emit(x2.grad); emit(rm); emit(rv)
      if w2 then emit(w2.grad); emit(b2.grad) end
    end
  end
  print(table.concat(out, " "))
end
]]

local function run(env) return support.run_lua(NORMS, env) end

describe("float32 layer_norm and rms_norm", function()
  it("give the same bits at every ISA level the CPU supports and at 1 and 2 threads", function()
    local base, err = run("LANTERN_ISA=sse4")
    assert.are.equal("", err)
    local one, two = base:match("^([^\n]*)\n([^\n]*)\n$")
    assert.truthy(one and #one > 10000, base:sub(1, 200))
    assert.is_true(one == two, "results depend on the number of threads")
    local levels = support.isa_levels()
    for _, isa in ipairs { "avx2", "avx512" } do
      if levels[isa] then
        local out, e = run("LANTERN_ISA=" .. isa)
        assert.are.equal("", e)
        assert.is_true(out == base, isa .. " results differ from sse4's")
      end
    end
  end)

  -- |a - b| <= 4 ulp of float32 relative to the row's scale: normalised values are O(1)
  local function close(a, b, scale, what)
    local err = (a:double() - b):abs():max():item()
    assert.is_true(err <= 4 * 2 ^ -23 * scale, string.format("%s: %g (scale %g)", what, err, scale))
  end

  it("are within float32 rounding of the float64 norms", function()
    lt.manual_seed(9)
    for _, d in ipairs { 1, 5, 8, 9, 64, 100, 1023 } do
      local rows = d == 64 and 100 or 8   -- 100: several chunks of the fused dx + dweight pass
      local x, g = lt.randn(rows, d) * 10 - 3, lt.randn(rows, d)
      local w, b = lt.randn(d), lt.randn(d)
      local x32, w32, b32 = x:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
      local x64, w64, b64 = x:double():requires_grad_(), w:double():requires_grad_(), b:double():requires_grad_()
      local y32, y64 = lt.layer_norm(x32, d, w32, b32), lt.layer_norm(x64, d, w64, b64)
      y32:backward(g)
      y64:backward(g:double())
      local s = y64:abs():max():item() + 1
      close(y32, y64, s, "layer_norm " .. d)
      close(x32.grad, x64.grad, x64.grad:abs():max():item() * math.sqrt(d) + 1e-30, "dx " .. d)
      close(w32.grad, w64.grad, (g:abs() * 4):sum(1):max():item(), "dw " .. d)
      close(b32.grad, b64.grad, g:abs():sum(1):max():item(), "db " .. d)
      -- with the weight's gradient (the fused float pass) and without (dx alone: the same kernel)
      for _, wgrad in ipairs { true, false } do
        local r32, r64 = x:clone():requires_grad_(), x:double():requires_grad_()
        local v32, v64 = w:clone(), w:double()
        if wgrad then v32:requires_grad_(); v64:requires_grad_() end
        local q32, q64 = lt.rms_norm(r32, d, v32, 1e-6), lt.rms_norm(r64, d, v64, 1e-6)
        q32:backward(g)
        q64:backward(g:double())
        close(q32, q64, q64:abs():max():item() + 1, "rms_norm " .. d)
        -- float32 arithmetic rounds the terms rstd * g * w, which cancel where g lies along x
        -- (always at d = 1): the error's scale is theirs, not the result's
        local terms = (g:double() * w:double()):abs():div(
          (x:double():pow(2):mean(2, true) + 1e-6):sqrt()):max():item()
        local dx_scale = math.max(r64.grad:abs():max():item(), terms) * math.sqrt(d) + 1e-30
        close(r32.grad, r64.grad, dx_scale, "rms dx " .. d)
        if wgrad then
          close(v32.grad, v64.grad, (g:abs() * 4):sum(1):max():item(), "rms dw " .. d)
        end
      end
    end
  end)

  it("group_norm and batch_norm are within float32 rounding of float64", function()
    lt.manual_seed(12)
    for _, shape in ipairs { { 5, 4, 1 }, { 3, 6, 9 }, { 2, 8, 16, 5 }, { 4, 2, 33 }, { 40, 4, 5 }, { 20, 300 }, { 6, 40, 10 } } do
      local C = shape[2]
      local x, g = lt.randn(table.unpack(shape)) * 5 + 2, lt.randn(table.unpack(shape))
      local w, b = lt.randn(C), lt.randn(C)
      local function run(dt, f)
        local xx = x:to(dt):clone():requires_grad_()
        local ww, bb = w:to(dt):clone():requires_grad_(), b:to(dt):clone():requires_grad_()
        local rm, rv = lt.zeros(C, { dtype = dt }), lt.ones(C, { dtype = dt })
        local y = f(xx, ww, bb, rm, rv)
        y:backward(g:to(dt))
        return { y, xx.grad, ww.grad, bb.grad, rm, rv }
      end
      for name, f in pairs {
        group_norm = function(xx, ww, bb) return lt.group_norm(xx, 2, ww, bb) end,
        batch_norm = function(xx, ww, bb, rm, rv) return lt.batch_norm(xx, rm, rv, ww, bb, true, 0.1, 1e-5) end,
      } do
        local a, r = run("float32", f), run("float64", f)
        local m = x:numel() // C
        local scales = { 8, 8 * math.sqrt(m), 4 * m, 4 * m, 8, 8 }
        for i = 1, 6 do
          close(a[i], r[i], scales[i], string.format("%s %s result %d", name, table.concat(shape, "x"), i))
        end
      end
    end
  end)

  it("give dx the same bits whether or not the weight and bias want gradients", function()
    lt.manual_seed(13)
    for _, d in ipairs { 9, 128, 300 } do
      local x, g, w, b = lt.randn(70, d), lt.randn(70, d), lt.randn(d), lt.randn(d)
      for _, f in ipairs { "layer_norm", "rms_norm" } do
        local got = {}
        for _, wants in ipairs { true, false } do
          local xx, ww, bb = x:clone():requires_grad_(), w:clone(), b:clone()
          if wants then ww:requires_grad_(); bb:requires_grad_() end
          local y = f == "layer_norm" and lt.layer_norm(xx, d, ww, bb) or lt.rms_norm(xx, d, ww)
          y:backward(g)
          got[#got + 1] = xx.grad
        end
        assert.is_true(lt.equal(got[1], got[2]), f .. " " .. d)
      end
    end
  end)

  it("treat constant rows, huge values, NaN and infinities as the float64 kernels", function()
    local inf, nan = 1 / 0, 0 / 0
    local rows = {
      { 2, 2, 2, 2, 2, 2, 2, 2, 2 },           -- variance 0: (x - mean) * 1/sqrt(eps) = 0
      { 1e30, -1e30, 3e29, 1, 0, 0, 0, 0, 5 },  -- squares overflow float, not double
      { 1, 2, nan, 4, 5, 6, 7, 8, 9 },
      { 1, 2, 3, inf, 5, 6, 7, 8, 9 },
      { -0.0, 0.0, -0.0, 0.0, 1e-40, -1e-40, 0, 0, 0 },
    }
    for r, row in ipairs(rows) do
      local x = lt.tensor({ row }, { dtype = "float32" })
      for _, f in ipairs { "layer_norm", "rms_norm" } do
        -- one eps for both dtypes (rms_norm's default depends on the dtype)
        local function norm(t)
          if f == "rms_norm" then return lt.rms_norm(t, 9, nil, 1e-6) end
          return lt.layer_norm(t, 9, nil, nil, 1e-5)
        end
        local a = norm(x):reshape(-1):tolist()
        local b = norm(x:double()):float():reshape(-1):tolist()
        for i = 1, 9 do
          local ok = (b[i] ~= b[i] and a[i] ~= a[i]) or a[i] == b[i] or
              math.abs(a[i] - b[i]) <= 4e-7 * math.abs(b[i])
          assert.is_true(ok, string.format("%s row %d element %d: %s, float64 gives %s", f, r, i,
            tostring(a[i]), tostring(b[i])))
        end
        -- the backward with a weight (the float32 kernel): NaN where float64 has NaN, else
        -- within float32 rounding of the terms rstd * dy * w
        local w, dy = lt.tensor({ { 0.5, -1, 2, 1, -0.25, 3, 1, -2, 0.75 } }), lt.ones(1, 9)
        local function dx_of(t, ww)
          t = t:clone():requires_grad_()
          ww = ww:reshape(9):clone():requires_grad_()
          local y = f == "rms_norm" and lt.rms_norm(t, 9, ww, 1e-6)
            or lt.layer_norm(t, 9, ww, nil, 1e-5)
          y:backward(dy:to(t.dtype))
          return t.grad
        end
        local ga = dx_of(x, w):reshape(-1):tolist()
        local g64 = dx_of(x:double(), w:double())
        local gb = g64:reshape(-1):tolist()
        local scale = 0
        for i = 1, 9 do if gb[i] == gb[i] then scale = math.max(scale, math.abs(gb[i])) end end
        for i = 1, 9 do
          local ok = (gb[i] ~= gb[i] and ga[i] ~= ga[i]) or
              (gb[i] == gb[i] and math.abs(ga[i] - gb[i]) <= 1e-5 * (scale + 1e-30))
          assert.is_true(ok, string.format("%s backward row %d element %d: %s, float64 gives %s",
            f, r, i, tostring(ga[i]), tostring(gb[i])))
        end
      end
    end
  end)
end)
