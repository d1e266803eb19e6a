-- lt.data: datasets, loaders, splits and file readers.
local lt = require "lantern"
local data = lt.data

describe("TensorDataset and DataLoader", function()
  local X = lt.arange(1, 11):float():unsqueeze(2)   -- 10 x 1: values 1..10
  local Y = lt.arange(1, 11)

  it("batches in order with a short last batch, or drops it", function()
    local dl = data.DataLoader(data.TensorDataset(X, Y), { batch_size = 4 })
    assert.are.equal(3, #dl)
    local sizes, firsts = {}, {}
    for xb, yb in dl:iter() do
      sizes[#sizes + 1] = xb:size(1)
      firsts[#firsts + 1] = yb[1]:item()
      assert.are.same(xb:reshape(-1):tolist(), yb:float():tolist())
    end
    assert.are.same({ 4, 4, 2 }, sizes)
    assert.are.same({ 1, 5, 9 }, firsts)
    local dl2 = data.DataLoader(data.TensorDataset(X, Y), { batch_size = 4, drop_last = true })
    assert.are.equal(2, #dl2)
    local n = 0
    for _ in dl2:iter() do n = n + 1 end
    assert.are.equal(2, n)
  end)

  it("shuffles reproducibly with a seeded generator and covers every sample once", function()
    local function order(seed)
      local dl = data.DataLoader(data.TensorDataset(X, Y),
        { batch_size = 3, shuffle = true, generator = lt.Generator(seed) })
      local out = {}
      for _, yb in dl:iter() do for _, v in ipairs(yb:tolist()) do out[#out + 1] = v end end
      return out
    end
    local a, b, c = order(7), order(7), order(8)
    assert.are.same(a, b)
    assert.are_not.same(a, c)
    table.sort(a)
    assert.are.same(Y:tolist(), a)
  end)

  it("uses a custom collate and a Lua Dataset", function()
    local Squares = data.Dataset:extend("Squares")
    function Squares:len() return 5 end
    function Squares:get(i) return i, i * i end
    local dl = data.DataLoader(Squares(), { batch_size = 2, collate_fn = function(samples)
      local s = 0
      for _, smp in ipairs(samples) do s = s + smp[2] end
      return { s }
    end })
    local sums = {}
    for s in dl:iter() do sums[#sums + 1] = s end
    assert.are.same({ 5, 25, 25 }, sums)
    local dl2 = data.DataLoader(Squares(), { batch_size = 5 })
    local i, sq = dl2:iter()()
    assert.are.same({ 1, 2, 3, 4, 5 }, i:tolist())
    assert.are.same({ 1, 4, 9, 16, 25 }, sq:tolist())
  end)

  it("a Dataset subclass gets its constructor arguments in __init", function()
    local Range = data.Dataset:extend("Range")
    function Range:__init(n, scale) self.n, self.scale = n, scale end
    function Range:len() return self.n end
    function Range:get(i) return i * self.scale end
    local r = Range(4, 10)
    assert.are.equal(4, #r)
    assert.are.equal(30, r:get(3))
    local dl = data.DataLoader(r, { batch_size = 4 })
    assert.are.same({ 10, 20, 30, 40 }, dl:iter()():tolist())
  end)

  it("random_split partitions the dataset; Subset indexes through", function()
    local parts = data.random_split(data.TensorDataset(X, Y), { 7, 3 }, { generator = lt.Generator(1) })
    assert.are.equal(7, #parts[1])
    assert.are.equal(3, #parts[2])
    local seen = {}
    for _, p in ipairs(parts) do
      for i = 1, #p do
        local _, y = p:get(i)
        seen[#seen + 1] = y:item()
      end
    end
    table.sort(seen)
    assert.are.same(Y:tolist(), seen)
    local fr = data.random_split(data.TensorDataset(X, Y), { 0.5, 0.5 })
    assert.are.equal(5, #fr[1])
    assert.has_error(function() data.random_split(data.TensorDataset(X, Y), { 3, 3 }) end,
      "random_split: Sum of input lengths does not equal the length of the input dataset!")
  end)

  it("rejects bad arguments", function()
    assert.has_error(function() data.TensorDataset(lt.ones(3), lt.ones(4)) end)
    assert.has_error(function() data.DataLoader(data.TensorDataset(X), { batch_size = 0 }) end)
  end)
end)

describe("readers", function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)

  it("reads IDX files, plain and gzipped", function()
    -- u8 tensor 2x3 with values 0..5
    local bytes = string.char(0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 2, 3, 4, 250)
    local f = io.open(dir .. "/a.idx", "wb") f:write(bytes) f:close()
    local t = data.read_idx(dir .. "/a.idx")
    assert.are.same({ 2, 3 }, t:size())
    assert.are.equal("float32", t.dtype)
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 250 } }, t:tolist())
    os.execute("gzip -c " .. dir .. "/a.idx > " .. dir .. "/a.idx.gz")
    assert.is_true(lt.equal(t, data.read_idx(dir .. "/a.idx.gz")))
    local lab = io.open(dir .. "/l.idx", "wb") lab:write(string.char(0, 0, 8, 1, 0, 0, 0, 3, 9, 0, 7)) lab:close()
    local l = data.read_idx(dir .. "/l.idx")
    assert.are.equal("int64", l.dtype)
    assert.are.same({ 9, 0, 7 }, l:tolist())
  end)

  it("reports truncated and malformed IDX files", function()
    local f = io.open(dir .. "/bad.idx", "wb") f:write(string.char(0, 0, 8, 1, 0, 0, 0, 9, 1, 2)) f:close()
    local ok, err = pcall(data.read_idx, dir .. "/bad.idx")
    assert.is_false(ok)
    assert.matches("truncated", err)
    f = io.open(dir .. "/bad2.idx", "wb") f:write("hello world") f:close()
    ok, err = pcall(data.read_idx, dir .. "/bad2.idx")
    assert.is_false(ok)
    assert.matches("not an IDX file", err)
    ok, err = pcall(data.read_idx, dir .. "/missing.idx")
    assert.matches("cannot open", err)
  end)

  it("reads CSV with a header, quotes and numbers", function()
    local f = io.open(dir .. "/a.csv", "w")
    f:write('x,y,name\n1,2.5,"a, b"\n3,-4,"say ""hi"""\n')
    f:close()
    local rows, header = data.read_csv(dir .. "/a.csv", { header = true })
    assert.are.same({ "x", "y", "name" }, header)
    assert.are.same({ { 1, 2.5, "a, b" }, { 3, -4, 'say "hi"' } }, rows)
    f = io.open(dir .. "/n.csv", "w") f:write("1,2\n3,4\n") f:close()
    local t = data.read_csv(dir .. "/n.csv", { numeric = true })
    assert.are.same({ { 1, 2 }, { 3, 4 } }, t:tolist())
    local ok, err = pcall(data.read_csv, dir .. "/a.csv", { numeric = true, header = true })
    assert.is_false(ok)
    assert.matches("not a number", err)
  end)
end)
