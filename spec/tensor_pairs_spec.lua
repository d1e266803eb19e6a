-- for i, row in pairs(x): the rows of a tensor (views x[i]) with their 1-based positions
-- (lua/lantern/init.lua).
local lt = require "lantern"

describe("pairs over a tensor", function()
  it("visits the rows in order with 1-based positions", function()
    local x = lt.arange(10):view(5, 2)
    local seen, sums = {}, {}
    for i, row in pairs(x) do
      seen[#seen + 1] = i
      assert.are.same({ 2 }, row:size())
      sums[i] = row:sum():item()
    end
    assert.are.same({ 1, 2, 3, 4, 5 }, seen)
    assert.are.same({ 1, 5, 9, 13, 17 }, sums)
  end)

  it("gives views: writing a row writes the tensor", function()
    local x = lt.zeros(3, 2)
    for i, row in pairs(x) do row:fill_(i) end
    assert.are.same({ { 1, 1 }, { 2, 2 }, { 3, 3 } }, x:tolist())
  end)

  it("gives 0-dim tensors for a 1-dim tensor, and nothing for an empty one", function()
    local vals = {}
    for i, v in pairs(lt.tensor { 7, 8, 9 }) do vals[i] = v:item() end
    assert.are.same({ 7, 8, 9 }, vals)
    local n = 0
    for _ in pairs(lt.zeros(0, 3)) do n = n + 1 end
    assert.are.equal(0, n)
  end)

  it("refuses a 0-dim tensor, which has no rows", function()
    local ok, err = pcall(function() for _ in pairs(lt.tensor(3)) do end end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("pairs: iteration over a 0-dim tensor", 1, true), err)
  end)
end)
