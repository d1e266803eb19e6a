-- The engine adds the gradients of narrow and select pieces (split, chunk, unbind, indexing)
-- straight into their input's gradient when that gradient is the engine's own, instead of a
-- zero tensor of the whole input per piece and whole-input sums. Every case checks values
-- against gradients worked out by hand, including the cases where the gradient so far is not
-- the engine's alone: a seed the caller holds, a retained gradient, a hook's view of it.
local lt = require "lantern"

local function same(a, b, what)
  assert.are.same(a.shape, b.shape, what)
  assert.is_true((a - b):abs():max():item() <= 1e-12, what .. ": " .. (a - b):abs():max():item())
end

describe("piece gradients", function()
  it("of a split used whole, in part, twice and beside other uses of the input", function()
    lt.manual_seed(1)
    local x0 = lt.randn(6, 5, { dtype = "float64" })
    local w = lt.randn(6, 5, { dtype = "float64" })
    local x = x0:clone():requires_grad_()
    local h = x * 1   -- a non-leaf input: its gradient slot is the engine's
    local p = h:split(2)
    local loss = (p[1] * w:narrow(1, 1, 2)):sum() + (p[2] * 3):sum() + (p[3] ^ 2):sum() +
        (p[2]:select(2, 3) * 5):sum() + (h * w):sum()
    loss:backward()
    -- the same gradient by hand: d/dh of each term, summed
    local want = w:clone()
    want:narrow(1, 1, 2):add_(w:narrow(1, 1, 2))
    want:narrow(1, 3, 2):add_(3)
    want:narrow(1, 3, 2):select(2, 3):add_(5)
    want:narrow(1, 5, 2):add_(x0:narrow(1, 5, 2) * 2)
    same(x.grad, want, "split")
  end)

  it("chunk, unbind and indexing pieces of a leaf and of a non-leaf", function()
    for _, leaf in ipairs { true, false } do
      local x = lt.arange(1, 25, { dtype = "float64" }):reshape(4, 6):requires_grad_()
      local h = leaf and x or x * 1
      local c = h:chunk(3, 2)
      local u = h:unbind(1)
      local loss = (c[1] * 2):sum() + (c[3] * c[3]):sum() + (u[2] * 7):sum() + h[4][6] * 11
      loss:backward()
      local want = lt.zeros(4, 6, { dtype = "float64" })
      want:narrow(2, 1, 2):add_(2)
      want:narrow(2, 5, 2):copy_(x:detach():narrow(2, 5, 2) * 2)
      want[2]:add_(7)
      want[4][6]:add_(11)
      same(x.grad, want, leaf and "leaf" or "non-leaf")
    end
  end)

  it("leave a seed the caller holds untouched", function()
    local x = lt.randn(4, 3, { requires_grad = true })
    local h = x * 1
    -- h + c passes the seed itself on as h's gradient; the piece's gradient must not land in it
    local r = h + h:narrow(1, 2, 2):sum()
    local seed = lt.ones(4, 3)
    r:backward(seed)
    assert.are.equal(4 * 3, seed:sum():item())   -- still all ones
    local want = lt.ones(4, 3)
    want:narrow(1, 2, 2):add_(12)
    same(x.grad, want, "seeded")
  end)

  it("keep a retained gradient and a hook's view of the gradient as they were", function()
    local x = lt.randn(4, 3, { requires_grad = true })
    local h = x * 2
    h:retain_grad()
    local hooked
    local k = x * 1
    k:register_hook(function(g) hooked = g; return g end)
    local loss = (h:narrow(1, 1, 2) * 3):sum() + (h:narrow(1, 3, 2) * 4):sum() + h:sum() +
        k:narrow(1, 1, 1):sum() + (k * 2):sum()
    loss:backward()
    local hg = lt.ones(4, 3)
    hg:narrow(1, 1, 2):add_(3)
    hg:narrow(1, 3, 2):add_(4)
    same(h.grad, hg, "retained")
    local kg = lt.full({ 4, 3 }, 2.0)
    kg:narrow(1, 1, 1):add_(1)
    same(hooked, kg, "hooked")
    same(x.grad, hg * 2 + kg, "leaf")
  end)

end)
