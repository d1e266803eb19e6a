-- Tensor printing: tostring(t) must equal PyTorch's repr exactly (fixtures from
-- spec/fixtures/gen_print.py), plus print options and non-contiguous inputs.
local lt = require "lantern"
local P = require "lantern.print"
local cases = require "fixtures.print_cases"

local function build(expr)
  local fn = assert(load("return " .. expr, "case", "t", { lt = lt }))
  return fn()
end

describe("tensor printing matches PyTorch", function()
  for _, c in ipairs(cases) do
    it(c.name, function()
      local t = build(c.expr)
      assert.are.equal(c.expected, P.tensor(t))
      assert.are.equal(c.expected, tostring(t))
    end)
  end
end)

describe("tensor printing", function()
  after_each(function() P.reset_printoptions() end)

  it("prints non-contiguous views like their contiguous copies", function()
    local x = lt.tensor({ { 1.5, -2.0, 3.25 }, { 4.0, 5.5, -6.0 } })
    local xt = x:t()
    assert.is_false(xt:is_contiguous())
    assert.are.equal(P.tensor(xt:contiguous()), P.tensor(xt))
    assert.are.equal("tensor([[ 1.5000,  4.0000],\n        [-2.0000,  5.5000],\n" ..
      "        [ 3.2500, -6.0000]])", P.tensor(xt))
    local big = lt.arange(0.0, 3000.0):reshape(50, 60):t()
    assert.are.equal(P.tensor(big:contiguous()), P.tensor(big))
  end)

  it("prefixes parameters", function()
    local w = lt.tensor({ 1.0, 2.0 }, { requires_grad = true })
    assert.are.equal("Parameter containing:\ntensor([1., 2.], requires_grad=True)",
      P.tensor(w, { parameter = true }))
  end)

  it("honours set_printoptions", function()
    P.set_printoptions({ precision = 2 })
    assert.are.equal("tensor([0.12, 1.50])", P.tensor(lt.tensor({ 0.125, 1.5 })))
    P.set_printoptions({ sci_mode = true })
    assert.are.equal("tensor([1.25e-01, 1.50e+00])", P.tensor(lt.tensor({ 0.125, 1.5 })))
    P.reset_printoptions()
    P.set_printoptions({ threshold = 5, edgeitems = 2 })
    assert.are.equal("tensor([0, 1,  ..., 8, 9])", P.tensor(lt.arange(10)))
    P.set_printoptions({ profile = "full" })
    assert.are.equal(P.tensor(lt.arange(10)), "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])")
    assert.has_error(function() P.set_printoptions({ profile = "nope" }) end)
    local ok, err = pcall(P.set_printoptions, { precison = 2 })
    assert.is_false(ok)
    assert.matches("unknown option 'precison'", err)
  end)

  it("formats sizes", function()
    assert.are.equal("torch.Size([2, 3])", P.size(lt.zeros(2, 3)))
    assert.are.equal("torch.Size([])", P.size(lt.tensor(1.0)))
  end)
end)
