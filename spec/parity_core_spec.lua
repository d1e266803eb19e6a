-- PyTorch parity of the C core and its binding (issue 12): in-place writes into expanded
-- tensors, div's rounding_mode, floor_divide, remainder and the // and % operators, unknown
-- options of the C functions, bad values for bernoulli and pooling, messages that name the op
-- the user called, size lists that print, and the row-iteration hint of x[i].
-- PyTorch's answers come from spec/fixtures/parity_core.lua (gen_parity_core.py).
local lt = require "lantern"
local options = require "lantern.options"
local fx = dofile("spec/fixtures/parity_core.lua")

local OVERLAP = "unsupported operation: more than one element of the written-to tensor refers " ..
  "to a single memory location. Please clone() the tensor before performing the operation."

local function err_of(fn, ...)
  local ok, e = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

local function has(msg, part)
  assert.is_truthy(msg:find(part, 1, true), "message '" .. msg .. "' lacks '" .. part .. "'")
end

-- the message without the "file:line: " position luaL_error puts in front
local function bare(msg) return (msg:gsub("^[^:]*:%d+: ", "")) end

-- Exact comparison of numbers, where NaN equals NaN and the sign of a zero counts.
local function same_number(a, b)
  if b ~= b then return a ~= a end
  if a ~= b then return false end
  if b == 0 and math.type(b) == "float" then return 1 / a == 1 / b end
  return true
end

local function flat(v, out)
  out = out or {}
  if type(v) == "table" then
    for _, e in ipairs(v) do flat(e, out) end
  else
    out[#out + 1] = v
  end
  return out
end

local function same_values(got, want, what)
  local g, w = flat(got), flat(want)
  assert.are.equal(#w, #g, what .. ": element count")
  for i = 1, #w do
    local a, b = g[i], w[i]
    if type(b) == "boolean" then
      assert.are.equal(b, a, what .. ": element " .. i)
    elseif not same_number(a, b) then
      error(string.format("%s: element %d: got %s, want %s", what, i, tostring(a), tostring(b)), 2)
    end
  end
end

------------------------------------------------------------------------------------------------
-- Writes into a destination in which several elements share one memory location, as PyTorch
-- 1.13 decides them (fixture `overlap`):
--
--   refused (the message below; nothing is written)     accepted (one value everywhere)
--   copy_ (also from a broadcast row or a 0-d tensor)    fill_, zero_
--   add_ mul_ div_ (any rounding) floor_divide_          masked_fill_ (PyTorch warns that it is
--   remainder_ clamp_ neg_ exp_ (every unary and           deprecated)
--   binary in-place op)                                  x[i] = number or 0-d tensor (fill_)
--   index_add_ scatter_ (tensor or value) scatter_add_
--   uniform_ normal_ bernoulli_ random_
--   narrow(...):copy_, x[i] = row into an expanded row
--
-- A dim of size 1 or a tensor with no elements shares nothing; a leaf that requires grad is
-- named first (PyTorch's order). PyTorch calls other strided overlaps "too hard" and lets them
-- through; expansion is the only way Lantern makes overlapping views.
------------------------------------------------------------------------------------------------

local T = lt.tensor
local writes = {
  ["copy_"] = function(e) e:copy_(T { { 1., 2, 3 }, { 4, 5, 6 } }) end,
  ["copy_ from a broadcast row"] = function(e) e:copy_(T { 1., 2, 3 }) end,
  ["copy_ from a 0-d tensor"] = function(e) e:copy_(T(5.)) end,
  ["fill_"] = function(e) e:fill_(7) end,
  ["zero_"] = function(e) e:zero_() end,
  ["add_"] = function(e) e:add_(1) end,
  ["mul_"] = function(e) e:mul_(2) end,
  ["div_"] = function(e) e:div_(2) end,
  ["div_ floor"] = function(e) e:div_(2, { rounding_mode = "floor" }) end,
  ["floor_divide_"] = function(e) e:floor_divide_(2) end,
  ["remainder_"] = function(e) e:remainder_(2) end,
  ["clamp_"] = function(e) e:clamp_(0, 1) end,
  ["neg_"] = function(e) e:neg_() end,
  ["exp_"] = function(e) e:exp_() end,
  ["index_add_"] = function(e) e:index_add_(1, T { 1 }, lt.ones(1, 3)) end,
  ["scatter_"] = function(e) e:scatter_(1, T { { 1, 2, 1 } }, lt.ones(1, 3)) end,
  ["scatter_ value"] = function(e) e:scatter_(1, T { { 1, 2, 1 } }, 2.0) end,
  ["scatter_add_"] = function(e) e:scatter_add_(1, T { { 1, 2, 1 } }, lt.ones(1, 3)) end,
  ["uniform_"] = function(e) e:uniform_() end,
  ["normal_"] = function(e) e:normal_() end,
  ["bernoulli_"] = function(e) e:bernoulli_(0.5) end,
  ["random_"] = function(e) e:random_(0, 10) end,
  ["narrow copy_"] = function(e) e:narrow(1, 1, 2):copy_(lt.ones(2, 3)) end,
  ["select copy_"] = function(e) e:select(1, 2):copy_(T { 1., 2, 3 }) end,
  ["masked_fill_"] = function(e)
    e:masked_fill_(T { { true, false, false }, { false, false, true } }, 1.0)
  end,
  ["setitem of a number"] = function(e) e[2] = 5.0 end,
  ["setitem of a number into an expanded row"] = function(e) e[1] = 5.0 end,
  ["setitem of a 0-d tensor into an expanded row"] = function(e) e[1] = T(3.) end,
  ["setitem of a row into an expanded row"] = function(e) e[1] = lt.arange(4.0) end,
}

-- the op a refused case's message names
local refused_op = {
  ["narrow copy_"] = "copy_", ["setitem of a row into an expanded row"] = "copy_",
}

describe("in-place writes into expanded tensors (PyTorch 1.13's table)", function()
  for _, c in ipairs(fx.overlap) do
    it(c.name .. (c.ok and " is accepted" or " is refused"), function()
      local write = assert(writes[c.name], "no Lantern form of " .. c.name)
      local b = c.wide and lt.zeros(3, 1) or lt.zeros(3)
      local e = c.wide and b:expand(3, 4) or b:expand(2, 3)
      local ok, msg = pcall(write, e)
      if c.ok then
        assert.is_true(ok, tostring(msg))
        same_values(b:reshape(-1):tolist(), c.base, c.name)
      else
        assert.is_false(ok, c.name .. " wrote through an expanded tensor")
        has(msg, c.msg)
        -- the message names the op the user called
        local op = refused_op[c.name] or c.name:match("^([%w_]+_)")
        has(msg, op .. ": " .. OVERLAP)
        same_values(b:tolist(), { 0, 0, 0 }, c.name .. " left its input")
      end
    end)
  end

  it("covers every case of the fixture", function()
    local n = 0
    for _ in pairs(writes) do n = n + 1 end
    assert.are.equal(#fx.overlap, n)
  end)

  it("lets a dim of size 1 and an empty tensor through: they share no element", function()
    local b = lt.zeros(1, 3)
    b:expand(1, 3):copy_(lt.ones(1, 3))
    assert.are.same({ { 1, 1, 1 } }, b:tolist())
    local z = lt.zeros(0, 1)
    z:expand(0, 4):copy_(lt.ones(0, 4))
    z:expand(0, 4):add_(1)
    assert.are.same({ 0, 4 }, z:expand(0, 4):size())
    local s = lt.zeros(1)
    s:expand(1):add_(2)
    assert.are.same({ 2 }, s:tolist())
  end)

  it("names a leaf that requires grad before the overlap, as PyTorch", function()
    local x = lt.zeros(3, { requires_grad = true })
    local msg = err_of(function() x:expand(2, 3):copy_(lt.ones(2, 3)) end)
    has(msg, fx.leaf_before_overlap)
    -- a non-leaf gets the overlap error, and neither it nor the source changes
    local h = x * 1
    local src = lt.ones(2, 3)
    has(err_of(function() h:expand(2, 3):copy_(src) end), "copy_: " .. OVERLAP)
    assert.are.same({ 0, 0, 0 }, h:tolist())
    assert.are.same({ { 1, 1, 1 }, { 1, 1, 1 } }, src:tolist())
    -- under no_grad the overlap is still refused
    lt.no_grad(function()
      has(err_of(function() x:expand(2, 3):mul_(2) end), "mul_: " .. OVERLAP)
    end)
  end)

  it("refuses the write through views of an expanded tensor that still overlap", function()
    local b = lt.zeros(3)
    local e = b:expand(4, 3)
    has(err_of(function() e:t():add_(1) end), "add_: " .. OVERLAP)
    has(err_of(function() e:narrow(1, 2, 2):fill_(1):add_(1) end), "add_: " .. OVERLAP)
    has(err_of(function() e:unsqueeze(1):copy_(lt.ones(1, 4, 3)) end), "copy_: " .. OVERLAP)
    -- fill_ went through (a fill is allowed), the refused add_ did not
    assert.are.same({ 1, 1, 1 }, b:tolist())
    -- one row of the expansion shares nothing: writing it is fine
    e[2]:copy_(T { 4., 5, 6 })
    assert.are.same({ 4, 5, 6 }, b:tolist())
  end)
end)

------------------------------------------------------------------------------------------------
-- Division: div(other, {rounding_mode=}), floor_divide, remainder, // and %.
------------------------------------------------------------------------------------------------

local function operand(v, kind)
  if kind == "int" or kind == "float" then return v end
  return lt.tensor(v, { dtype = kind })
end

-- Runs case c; an in-place op runs on a copy of the first operand, which it returns as `t`
-- beside the untouched original `x`.
local function run_division(c)
  local x, y = operand(c.a, c.ak), operand(c.b, c.bk)
  local opts = c.mode and { rounding_mode = c.mode } or nil
  if c.op == "div" then return pcall(lt.div, x, y, opts) end
  if c.op == "//" then return pcall(function() return x // y end) end
  if c.op == "%" then return pcall(function() return x % y end) end
  if c.op:sub(-1) == "_" then
    local t = x:clone()
    local ok, r
    if c.op == "div_" then
      ok, r = pcall(t.div_, t, y, opts)
    else
      ok, r = pcall(t[c.op], t, y)
    end
    return ok, r, t, x
  end
  return pcall(lt[c.op], x, y)
end

-- What Lantern says where PyTorch says `torch_msg`.
local function lantern_phrase(torch_msg)
  if torch_msg:find("ZeroDivisionError", 1, true) then return "ZeroDivisionError" end
  if torch_msg:find("not implemented for 'Bool'", 1, true) then
    return "not implemented for bool tensors"
  end
  if torch_msg:find("can't be cast to the desired output type", 1, true) then
    return "can't be cast to the desired output type"
  end
  if torch_msg:find("rounding_mode to be one of", 1, true) then
    return "expected rounding_mode to be one of nil, 'trunc' or 'floor', but got 'round'"
  end
  error("no Lantern phrase for PyTorch's '" .. torch_msg .. "'")
end

local OPNAME = { div = "div", div_ = "div_", ["//"] = "floor_divide", ["%"] = "remainder" }

describe("division against PyTorch", function()
  for i, c in ipairs(fx.division) do
    local what = string.format("%d: %s(%s, %s%s)", i, c.op, c.ak, c.bk,
      c.mode and ", rounding_mode=" .. c.mode or "")
    it(what, function()
      local ok, r, t, x = run_division(c)
      if c.err then
        assert.is_false(ok, what .. " should fail: " .. c.err)
        local msg = tostring(r)
        has(msg, lantern_phrase(c.err))
        has(msg, (OPNAME[c.op] or c.op) .. ": ")
        if t then same_values(t:tolist(), x:tolist(), "the tensor of a refused in-place op") end
        return
      end
      assert.is_true(ok, tostring(r))
      assert.are.equal(c.dtype, r.dtype, what .. ": dtype")
      same_values(r:tolist(), c.out, what)
      if t then assert.are.equal(t, r, "an in-place op returns its tensor") end
    end)
  end

  it("leaves the tensor of a refused in-place division unchanged", function()
    local x = T { 7, -7 }
    has(err_of(function() x:div_(T { 1, 0 }, { rounding_mode = "floor" }) end), "ZeroDivisionError")
    has(err_of(function() x:floor_divide_(0) end), "floor_divide_: ZeroDivisionError")
    has(err_of(function() x:div_(2) end), "div_: result type float32 can't be cast")
    assert.are.same({ 7, -7 }, x:tolist())
  end)

  it("wraps the one overflowing integer quotient instead of trapping", function()
    -- INT64_MIN / -1 is a SIGFPE in C (and crashes PyTorch 1.13); Lantern wraps like its other
    -- integer arithmetic
    local m = T { math.mininteger, 9 }
    assert.are.same({ math.mininteger, -9 }, (m // -1):tolist())
    assert.are.same({ math.mininteger, -9 }, m:div(-1, { rounding_mode = "trunc" }):tolist())
    assert.are.same({ 0, 0 }, (m % -1):tolist())
  end)

  it("checks the options of div", function()
    local x = T { 7.0 }
    has(err_of(function() return x:div(2, { rounding_mod = "floor" }) end),
      "div: unknown option 'rounding_mod' (did you mean 'rounding_mode'?)")
    has(err_of(function() return x:div(2, "floor") end), "div: bad argument #3")
    has(err_of(function() return x:div(2, { rounding_mode = 1 }) end),
      "div: expected rounding_mode to be one of nil, 'trunc' or 'floor', but got number")
    has(err_of(function() return x:true_divide(2, { rounding_mode = "floor" }) end),
      "true_divide: unknown option 'rounding_mode'")
    assert.are.same({ 3.5 }, x:div(2, { rounding_mode = nil }):tolist())
    assert.are.same({ 3.0 }, x:divide(2, { rounding_mode = "floor" }):tolist())
    assert.are.same({ 3.0 }, lt.floor_divide(x, 2):tolist())
  end)

  it("broadcasts and takes non-contiguous operands", function()
    local a = T { { 7, -7, 8 }, { -8, 9, -9 } }
    local b = T { { 2 }, { -3 } }
    assert.are.same({ { 3, -4, 4 }, { 2, -3, 3 } }, (a // b):tolist())
    assert.are.same({ { 3, -3, 4 }, { 2, -3, 3 } }, a:div(b, { rounding_mode = "trunc" }):tolist())
    assert.are.same({ { 1, 1, 0 }, { -2, 0, 0 } }, (a % b):tolist())
    local at = a:t()   -- 3 x 2, strided
    assert.are.same({ { 3, 2 }, { -4, -3 }, { 4, 3 } }, (at // b:t()):tolist())
    local big = lt.arange(-50000, 50000):double() / 7   -- the threaded path
    local q = big:div(0.25, { rounding_mode = "floor" })
    local want = (big / 0.25):floor()
    assert.is_true(q:equal(want))
  end)
end)

describe("division autograd", function()
  local g = fx.grads
  local function leaf(v) return lt.tensor(v, { dtype = "float64", requires_grad = true }) end

  it("div with a rounding mode has a zero gradient (DivBackward2), as PyTorch", function()
    for _, mode in ipairs({ "trunc", "floor" }) do
      local x, y = leaf { 7.0, -7.0 }, leaf { 2.0, 3.0 }
      local z = x:div(y, { rounding_mode = mode })
      assert.are.equal(g[mode .. "_fn"], z.grad_fn)
      z:sum():backward()
      same_values(x.grad:tolist(), g[mode .. "_dx"], mode .. " dx")
      same_values(y.grad:tolist(), g[mode .. "_dy"], mode .. " dy")
      assert.are.equal(g[mode .. "_scalar_fn"], x:div(2, { rounding_mode = mode }).grad_fn)
      -- in place on a non-leaf
      local h = x * 1
      h:div_(2, { rounding_mode = mode })
      assert.are.equal("DivBackward2", h.grad_fn)
    end
  end)

  it("floor_divide records a node whose backward fails, as PyTorch's NotImplemented", function()
    local x = leaf { 7.0, -7.0 }
    local z = x // 2
    assert.are.equal(g.floor_divide_requires_grad, z.requires_grad)
    assert.are.equal(g.floor_divide_fn, z.grad_fn)
    assert.are.equal("NotImplemented", lt.floor_divide(x, leaf { 2.0, 3.0 }).grad_fn)
    local msg = err_of(function() z:sum():backward() end)
    has(msg, "floor_divide: the derivative for 'floor_divide' is not implemented")
    assert.is_nil(x.grad)
    -- % is remainder, which has a gradient
    assert.are.equal(g.remainder_fn, x:remainder(leaf { 2.0, 3.0 }).grad_fn)
  end)

  it("passes float64 finite-difference gradchecks of div with a rounding mode and of %", function()
    local gradcheck = lt.autograd.gradcheck
    -- quotients kept away from integers, where the rounded forms are constant
    local x = leaf { { 7.5, -7.5, 3.3 }, { 1.1, -2.6, 9.7 } }
    local y = leaf { 2.0, 3.0, 1.5 }
    for _, mode in ipairs({ "trunc", "floor" }) do
      local o = { rounding_mode = mode }
      assert.is_true(gradcheck(function(a, b) return a:div(b, o) end, { x, y }))
      assert.is_true(gradcheck(function(a) return a:div(0.4, o) end, { x }))
      assert.is_true(gradcheck(function(a) return a:t():div(y:detach():view(3, 1), o) end, { x }))
    end
    assert.is_true(gradcheck(function(a, b) return a % b end, { x, y }))
    assert.is_true(gradcheck(function(a) return a % 0.7 end, { x }))
    assert.is_true(gradcheck(function(b) return 3.7 % b end, { y }))
  end)
end)

------------------------------------------------------------------------------------------------
-- Unknown options of the C functions
------------------------------------------------------------------------------------------------

describe("options tables of the C functions", function()
  local x = lt.ones(2, 3)
  local x4 = lt.ones(1, 1, 4, 4)
  local w = lt.ones(1, 1, 2, 2)
  local cases = {
    { "zeros", function(o) return lt.zeros(2, o) end, "dtyp", "dtype" },
    { "ones", function(o) return lt.ones({ 2 }, o) end, "require_grad", "requires_grad" },
    { "empty", function(o) return lt.empty(2, o) end, "devise", "device" },
    { "full", function(o) return lt.full({ 2 }, 1.5, o) end, "dtpye", "dtype" },
    { "tensor", function(o) return lt.tensor({ 1, 2 }, o) end, "dtyp", "dtype" },
    { "zeros_like", function(o) return lt.zeros_like(x, o) end, "dtyp", "dtype" },
    { "rand_like", function(o) return lt.rand_like(x, o) end, "generatr", "generator" },
    { "randint_like", function(o) return lt.randint_like(x, 5, o) end, "dtyp", "dtype" },
    { "arange", function(o) return lt.arange(5, o) end, "dtyp", "dtype" },
    { "linspace", function(o) return lt.linspace(0, 1, 5, o) end, "dtyp", "dtype" },
    { "eye", function(o) return lt.eye(3, o) end, "dtyp", "dtype" },
    { "rand", function(o) return lt.rand(2, o) end, "generater", "generator" },
    { "randn", function(o) return lt.randn(2, o) end, "dtyp", "dtype" },
    { "randint", function(o) return lt.randint(0, 5, { 2 }, o) end, "dtyp", "dtype" },
    { "randperm", function(o) return lt.randperm(4, o) end, "dtyp", "dtype" },
    { "normal", function(o) return lt.normal(0, 1, { 2 }, o) end, "generatr", "generator" },
    { "bernoulli", function(o) return lt.bernoulli(lt.full({ 2 }, 0.5), o) end, "generatr", "generator" },
    { "uniform_", function(o) return lt.zeros(2):uniform_(0, 1, o) end, "generatr", "generator" },
    { "normal_", function(o) return lt.zeros(2):normal_(0, 1, o) end, "generatr", "generator" },
    { "bernoulli_", function(o) return lt.zeros(2):bernoulli_(0.5, o) end, "generatr", "generator" },
    { "random_", function(o) return lt.zeros(2):random_(0, 5, o) end, "generatr", "generator" },
    { "sum", function(o) return x:sum(o) end, "keepdm", "keepdim" },
    { "mean", function(o) return x:mean(2, o) end, "dtyp", "dtype" },
    { "prod", function(o) return x:prod(o) end, "dims", "dim" },
    { "amax", function(o) return x:amax(o) end, "keep_dim", "keepdim" },
    { "max", function(o) return x:max(o) end, "dims", "dim" },
    { "argmax", function(o) return x:argmax(o) end, "keepdims", "keepdim" },
    { "var", function(o) return x:var(o) end, "corection", "correction" },
    { "std", function(o) return x:std(1, o) end, "unbaised", "unbiased" },
    { "norm", function(o) return x:norm(o) end, "dims", "dim" },
    { "logsumexp", function(o) return x:logsumexp(o) end, "keepdm", "keepdim" },
    { "softmax", function(o) return x:softmax(2, o) end, "dtyp", "dtype" },
    { "cumsum", function(o) return x:cumsum(1, o) end, "dtyp", "dtype" },
    { "add", function(o) return x:add(1, o) end, "alpah", "alpha" },
    { "sub_", function(o) return x:clone():sub_(1, o) end, "alpah", "alpha" },
    { "div", function(o) return x:div(2, o) end, "rounding_mod", "rounding_mode" },
    { "clamp", function(o) o.min = 0 return x:clamp(o) end, "mins", "min" },
    { "isclose", function(o) return x:isclose(x, o) end, "atoll", "atol" },
    { "allclose", function(o) return x:allclose(x, o) end, "equal_nans", "equal_nan" },
    { "softplus", function(o) return x:softplus(o) end, "treshold", "threshold" },
    { "gelu", function(o) return x:gelu(o) end, "approximat", "approximate" },
    { "leaky_relu", function(o) return x:leaky_relu(o) end, "negative_slop", "negative_slope" },
    { "to", function(o) return x:to(o) end, "dtyp", "dtype" },
    { "addmm", function(o) return lt.addmm(lt.ones(2, 2), x, x:t(), o) end, "betta", "beta" },
    { "conv2d", function(o) return lt.conv2d(x4, w, nil, o) end, "strid", "stride" },
    { "conv_transpose2d", function(o) return lt.conv_transpose2d(x4, w, nil, o) end,
      "output_pading", "output_padding" },
    { "max_pool2d", function(o) return lt.max_pool2d(x4, 2, o) end, "dilatation", "dilation" },
    { "avg_pool2d", function(o) return lt.avg_pool2d(x4, 2, o) end, "ceilmode", "ceil_mode" },
    { "adaptive_max_pool2d", function(o) return lt.adaptive_max_pool2d(x4, 2, o) end,
      "return_indice", "return_indices" },
    { "dropout", function(o) return lt.dropout(x, 0.5, true, o) end, "generatr", "generator" },
    { "cross_entropy", function(o) return lt.cross_entropy(x, T { 1, 2 }, o) end,
      "label_smooting", "label_smoothing" },
    { "nll_loss", function(o) return lt.nll_loss(x, T { 1, 2 }, o) end, "ignore_idx", "ignore_index" },
    { "backward", function(o) return lt.ones(2, { requires_grad = true }):sum():backward(o) end,
      "retain_grap", "retain_graph" },
    { "grad", function(o)
      local a = lt.ones(2, { requires_grad = true })
      return lt.autograd.grad({ (a * 2):sum() }, { a }, o)
    end, "allow_unsed", "allow_unused" },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " refuses '" .. c[3] .. "' and suggests '" .. c[4] .. "'", function()
      local msg = err_of(c[2], { [c[3]] = true })
      has(msg, string.format("%s: unknown option '%s' (did you mean '%s'?)", c[1], c[3], c[4]))
      -- an empty options table is fine
      local ok, e = pcall(c[2], {})
      assert.is_true(ok, tostring(e))
    end)
  end

  it("lists the known options when none is near, and names non-string keys", function()
    has(err_of(lt.zeros, 2, { colour = "red" }),
      "zeros: unknown option 'colour' (expected one of dtype, requires_grad, device)")
    has(err_of(lt.zeros, 2, { "float64" }),
      "zeros: unknown option '1' (expected one of dtype, requires_grad, device)")
    has(err_of(function() return x:sum({ dim = 1, [2.5] = 1 }) end), "sum: unknown option '2.5'")
  end)

  it("suggests exactly what lantern.options suggests", function()
    -- the C checker mirrors options.lua's nearest-name rule; compare them on many typos
    local lists = {
      { "zeros", { "dtype", "requires_grad", "device" }, function(o) return lt.zeros(1, o) end },
      { "max_pool2d", { "kernel_size", "stride", "padding", "dilation", "ceil_mode",
        "return_indices" }, function(o) return lt.max_pool2d(x4, 2, o) end },
      { "cross_entropy", { "weight", "ignore_index", "reduction", "label_smoothing" },
        function(o) return lt.cross_entropy(x, T { 1, 2 }, o) end },
    }
    local rng = lt.Generator(7)
    local letters = "abcdefghijklmnopqrstuvwxyz_"
    local function pick(n) return lt.randint(1, n + 1, { 1 }, { generator = rng }):item() end
    local compared = 0
    for _, l in ipairs(lists) do
      local op, known, call = l[1], l[2], l[3]
      for _ = 1, 60 do
        -- a known name with one to three random edits
        local s = known[pick(#known)]
        for _ = 1, pick(3) do
          local i, kind, k = pick(#s + 1), pick(4), pick(#letters)
          local ch = letters:sub(k, k)
          if kind == 1 then
            s = s:sub(1, i - 1) .. ch .. s:sub(i)
          elseif kind == 2 and #s > 1 then
            s = s:sub(1, i - 1) .. s:sub(i + 1)
          elseif kind == 3 then
            s = s:sub(1, i - 1) .. ch .. s:sub(i + 1)
          elseif #s > 2 and i < #s then
            s = s:sub(1, i - 1) .. s:sub(i + 1, i + 1) .. s:sub(i, i) .. s:sub(i + 2)
          end
        end
        local is_known = false
        for _, k in ipairs(known) do is_known = is_known or k == s end
        if not is_known then
          local ok1, c_msg = pcall(call, { [s] = 1 })
          local ok2, lua_msg = pcall(options.check, op, { [s] = 1 }, known, 1)
          assert.is_false(ok1)
          assert.is_false(ok2)
          assert.are.equal(bare(lua_msg), bare(c_msg))
          compared = compared + 1
        end
      end
    end
    assert.is_true(compared > 100)
  end)

  it("refuses before changing anything", function()
    local t = lt.ones(3)
    err_of(function() t:add_(1, { alfa = 2 }) end)
    err_of(function() t:uniform_(0, 1, { gen = lt.Generator(1) }) end)
    err_of(function() t:div_(2, { round = "floor" }) end)
    assert.are.same({ 1, 1, 1 }, t:tolist())
  end)

  it("accepts device = 'cpu' and refuses devices that are not there or are no device", function()
    assert.are.same({ 0, 0 }, lt.zeros(2, { device = "cpu" }):tolist())
    has(err_of(lt.ones, 2, { device = "cuda" }), "ones: device 'cuda:0' is not available")
    has(err_of(lt.ones, 2, { device = "npu" }), "ones: unknown device 'npu' (known: cpu, cuda)")
    has(err_of(lt.tensor, { 1 }, { device = {} }), "string expected, got table")
  end)

  it("reductions take dtype = as PyTorch: the input is converted first", function()
    local i = T { { 1, 2 }, { 3, 4 } }
    local m = i:mean({ dtype = "float64" })
    assert.are.equal("float64", m.dtype)
    assert.are.equal(2.5, m:item())
    assert.are.equal("float64", lt.ones(2):sum({ dtype = "float64" }).dtype)
    assert.are.same({ 3, 7 }, T { { 1.5, 2.5 }, { 3.5, 4.5 } }:sum(2, { dtype = "int64" }):tolist())
    assert.are.same({ { 1, 2 }, { 4, 6 } }, i:cumsum({ dim = 1, dtype = "float32" }):tolist())
    assert.are.equal("float32", i:cumsum({ dim = 1, dtype = "float32" }).dtype)
    assert.are.equal("float64", lt.ones(2, 2):softmax(2, { dtype = "float64" }).dtype)
    -- the gradient flows back through the conversion to the input's dtype
    local x = lt.ones(2, { requires_grad = true })
    x:sum({ dtype = "float64" }):backward()
    assert.are.equal("float32", x.grad.dtype)
    assert.are.same({ 1, 1 }, x.grad:tolist())
  end)

  it("adaptive_max_pool honours {return_indices = false}", function()
    assert.are.equal(1, select("#", lt.adaptive_max_pool2d(x4, 2, { return_indices = false })))
    assert.are.equal(2, select("#", lt.adaptive_max_pool2d(x4, 2, { return_indices = true })))
  end)
end)

------------------------------------------------------------------------------------------------
-- Bad values
------------------------------------------------------------------------------------------------

describe("bad values are refused with PyTorch's message", function()
  local F = lt.nn.functional
  local x4 = lt.ones(1, 1, 4, 4)
  local runs = {
    ["bernoulli(2)"] = { "bernoulli", function() return lt.ones(3):bernoulli(2.0) end },
    ["bernoulli_(2)"] = { "bernoulli_", function() return lt.ones(3):bernoulli_(2.0) end },
    ["bernoulli_(-0.5)"] = { "bernoulli_", function() return lt.ones(3):bernoulli_(-0.5) end },
    ["avg_pool2d stride 0"] = { "avg_pool2d", function() return F.avg_pool2d(x4, 2, 0) end },
    ["max_pool2d stride 0"] = { "max_pool2d", function() return F.max_pool2d(x4, 2, 0) end },
    ["avg_pool2d stride (1, 0)"] = { "avg_pool2d", function() return F.avg_pool2d(x4, 2, { 1, 0 }) end },
    ["avg_pool2d stride -1"] = { "avg_pool2d", function() return F.avg_pool2d(x4, 2, -1) end },
    ["max_pool2d stride -1"] = { "max_pool2d", function() return F.max_pool2d(x4, 2, -1) end },
    ["avg_pool2d padding -1"] = { "avg_pool2d", function() return F.avg_pool2d(x4, 2, 1, -1) end },
    ["max_pool2d padding 2"] = { "max_pool2d", function() return F.max_pool2d(x4, 2, 1, 2) end },
    ["max_pool2d dilation 0"] = { "max_pool2d", function() return F.max_pool2d(x4, 2, 1, 0, 0) end },
  }
  for _, m in ipairs(fx.messages) do
    it(m.name, function()
      local r = assert(runs[m.name], "no Lantern form of " .. m.name)
      has(err_of(r[2]), r[1] .. ": " .. m.phrase)
    end)
  end

  it("the pooling kernels themselves refuse a zero stride (lt.avg_pool1d, lt.max_pool1d)", function()
    local x = lt.ones(1, 1, 4)
    has(err_of(lt.avg_pool1d, x, { kernel_size = 2, stride = 0 }), "avg_pool1d: stride should not be zero")
    has(err_of(lt.max_pool1d, x, { kernel_size = 2, stride = 0 }), "max_pool1d: stride should not be zero")
    has(err_of(lt.max_pool2d, x4, 2, { stride = { 2, 0 } }), "max_pool2d: stride should not be zero")
    -- the default stride is the kernel size
    assert.are.same({ 1, 1, 2, 2 }, lt.avg_pool2d(x4, { kernel_size = 2 }):size())
  end)

  it("bernoulli(p) draws a tensor of the input's shape and dtype", function()
    same_values(lt.ones(3):bernoulli(0.0):tolist(), fx.bernoulli_p0, "bernoulli(0)")
    local b = lt.ones(200, { dtype = "int64" }):bernoulli(1.0)
    assert.are.equal("int64", b.dtype)
    assert.are.equal(200, b:sum():item())
    local g1, g2 = lt.Generator(3), lt.Generator(3)
    assert.is_true(lt.zeros(50):bernoulli(0.5, { generator = g1 })
      :equal(lt.zeros(50):bernoulli(0.5, { generator = g2 })))
    has(err_of(function() return lt.ones(3):bernoulli(0 / 0) end), "but got p=nan")
    has(err_of(function() return lt.ones(3):bernoulli("x") end), "bernoulli: bad argument #2")
    local t = lt.full({ 3 }, 0.25)
    err_of(function() t:bernoulli_(1.5) end)
    assert.are.same({ 0.25, 0.25, 0.25 }, t:tolist())
  end)
end)

------------------------------------------------------------------------------------------------
-- Messages name the function the user called
------------------------------------------------------------------------------------------------

describe("messages name the function the user called", function()
  it("sizes and dtypes of the constructors", function()
    has(err_of(lt.zeros, 2.5), "zeros: size at position 1 must be an integer, got 2.5")
    has(err_of(lt.ones, { 2, "x" }), "ones: size at position 2 must be an integer, got string")
    has(err_of(lt.zeros, 3, { dtype = "float16" }),
      "zeros: unknown dtype 'float16' (expected float32, float64, int64 or bool)")
    has(err_of(lt.rand, 2, { dtype = 5 }), "rand: dtype must be a string")
    has(err_of(lt.ones, 2 ^ 62, 2 ^ 62), "ones: size overflows")
    has(err_of(lt.full, { 1 << 62, 1 << 62 }, 1), "full: size overflows")
    has(err_of(function() return lt.ones(3):view(1.5, 2) end), "view: size at position 1 must be an integer")
    has(err_of(lt.zeros, 2, { requires_grad = 1 }), "zeros: option 'requires_grad' must be a boolean, got number")
    has(err_of(lt.rand, 2, { generator = 1 }), "rand: option 'generator' must be a lantern Generator")
  end)

  it("expand refuses sizes whose element count overflows int64, as PyTorch", function()
    has(err_of(function() return lt.zeros(1):expand(1 << 62, 4) end),
      "expand: the target sizes [4611686018427387904, 4] hold more elements than int64 counts")
    assert.are.same({ 0, 1 << 62, 4 }, lt.zeros(1):expand(0, 1 << 62, 4):size())
  end)

  it("the allocation inside another op carries that op's name", function()
    -- 2^62 elements overflow before any allocation, so this also runs under the sanitizers
    local big = lt.zeros(1):expand(1 << 60, 4)
    has(err_of(function() return big:contiguous() end), "contiguous: size overflows")
    has(err_of(function() return big:clone() end), "clone: size overflows")
    has(err_of(lt.zeros_like, big), "zeros_like: size overflows")
    has(err_of(function() return big + 1 end), "add: size overflows")
    has(err_of(lt.empty, 1 << 62, 4), "empty: size overflows")
  end)

  -- #nosan: AddressSanitizer aborts on a 4 TiB request instead of returning NULL
  it("an expanded tensor too large to clone names clone #nosan", function()
    has(err_of(function() return lt.zeros(1):expand(1 << 40):clone() end),
      "clone: out of memory allocating 4398046511104 bytes")
  end)

  it("x[0] says positions count from 1", function()
    local x = lt.ones(3, 2)
    has(err_of(function() return x[0] end),
      "index: index 0 is out of range (positions count from 1: expected 1..3 or -3..-1)")
    has(err_of(function() x[0] = 1 end), "index: index 0 is out of range (positions count from 1")
    assert.are.same({ { 1, 1 }, { 1, 1 }, { 1, 1 } }, x:tolist())
    assert.are.same({ 1, 1 }, x[-3]:tolist())
  end)

  it("an index past the end names the row-iteration idiom (what ipairs(x) runs into)", function()
    local x = lt.ones(3, 2)
    local want = "index: index 4 is out of range for dimension 1 of size 3 (expected 1..3 or " ..
      "-3..-1; to iterate over rows use: for i, row in pairs(x))"
    has(err_of(function() return x[4] end), want)
    has(err_of(function() return x[-4] end), "index: index -4 is out of range")
    local rows = 0
    local msg = err_of(function() for _ in ipairs(x) do rows = rows + 1 end end)
    assert.are.equal(3, rows)
    has(msg, want)
  end)
end)

------------------------------------------------------------------------------------------------
-- Size lists
------------------------------------------------------------------------------------------------

describe("size lists", function()
  it("print as PyTorch's torch.Size does, in Lua's braces", function()
    local x = lt.zeros(5, 2)
    assert.are.equal("{5, 2}", tostring(x:size()))
    assert.are.equal("{5, 2}", tostring(x.shape))
    assert.are.equal("{3}", tostring(lt.zeros(3).shape))
    assert.are.equal("{}", tostring(lt.tensor(1.5):size()))
    assert.are.equal("{0, 4}", tostring(lt.zeros(0, 4).shape))
    assert.are.equal("{2, 1}", tostring(x:stride()))
    assert.are.equal("size {5, 2}", "size " .. tostring(x.shape))
  end)

  it("stay plain arrays", function()
    local x = lt.zeros(5, 2, 3)
    local s = x:size()
    assert.are.equal(3, #s)
    assert.are.equal(5, s[1])
    assert.are.equal(3, s[-1 + 4])
    assert.is_nil(s[4])
    local got = {}
    for i, v in ipairs(s) do got[i] = v end
    assert.are.same({ 5, 2, 3 }, got)
    assert.are.same({ 5, 2, 3 }, { table.unpack(s) })
    assert.are.same({ 5, 2, 3 }, x.shape)
    assert.are.same(x:size(), x.shape)
    assert.are.equal(x:size(2), s[2])
    assert.are.same({ 5, 2, 3 }, lt.zeros(s):size())
    assert.are.same({ 3, 5, 2 }, lt.ones(x.shape[3], x.shape[1], x.shape[2]):size())
    -- a fresh table each time, which the caller may change
    s[1] = 9
    assert.are.equal(5, x:size(1))
    assert.are.equal("{9, 2, 3}", tostring(s))
  end)

  it("share one metatable that has only __tostring", function()
    local mt = getmetatable(lt.zeros(2):size())
    assert.are.equal(mt, getmetatable(lt.ones(3, 4).shape))
    assert.are.equal(mt, getmetatable(lt.ones(3, 4):stride()))
    local keys = {}
    for k in pairs(mt) do keys[#keys + 1] = k end
    assert.are.same({ "__tostring" }, keys)
  end)
end)
