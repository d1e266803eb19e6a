--- Datasets and loaders (`lt.data`, PyTorch's `torch.utils.data`): Dataset, TensorDataset,
-- Subset, random_split, DataLoader, and readers for IDX (MNIST-style) and CSV files. Samples
-- are indexed from 1.
--
--     local ds = lt.data.TensorDataset(x, y)
--     local train, val = table.unpack(lt.data.random_split(ds, {0.9, 0.1}))
--     local loader = lt.data.DataLoader(train, {batch_size = 64, shuffle = true})
--     for xb, yb in loader:iter() do ... end   -- #loader batches
-- @module lantern.data
local lt = require "lantern"
local core = require "lantern.core"
local check = require("lantern.options").check

local data = {}

local function class(name, parent)
  local cls = setmetatable({ __name = name }, { __index = parent,
    __call = function(c, ...) return c.new(c, ...) end })
  cls.__index = cls
  cls.__len = function(self) return self:len() end
  return cls
end

--- The base class of datasets: a subclass defines `len()` and `get(i)` (1-based, returning
-- the sample's values), and `#ds` is its length.
-- @type Dataset
-- @usage local Squares = lt.data.Dataset:extend("Squares")
-- function Squares:__init(n) self.n = n end
-- function Squares:len() return self.n end
-- function Squares:get(i) return lt.tensor{i * 1.0}, lt.tensor{i * i * 1.0} end
-- local loader = lt.data.DataLoader(Squares(100), {batch_size = 10})
local Dataset = class("Dataset")
data.Dataset = Dataset
--- Declares a dataset class; constructing it calls its `__init` with the arguments.
-- @string name
-- @return the class
function Dataset:extend(name)
  local cls = class(name, self)
  -- a subclass is constructed with its arguments passed to its __init (if it has one)
  cls.new = function(c, ...)
    local o = setmetatable({}, c)
    if o.__init then o:__init(...) end
    return o
  end
  return cls
end
function Dataset.new(cls, t) return setmetatable(t or {}, cls) end
--- The number of samples (defined by each subclass; the base raises).
function Dataset:len() error(self.__name .. ": len() not implemented", 2) end
--- Sample i (1-based) as one or more values, tensors or numbers (defined by each
-- subclass; the base raises). `TensorDataset` and `Subset` also have `ds:get_batch(idx)`,
-- which gathers a batch from an int64 tensor of positions in one `index_select` per tensor.
function Dataset:get() error(self.__name .. ": get(i) not implemented", 2) end

---------------------------------------------------------------------------------------------
--- Datasets, splits and batching.
-- @section datasets

--- Samples from tensors of the same first size: sample i is `(t1[i], t2[i], ...)`; batches
-- are gathered in one `index_select` per tensor.
-- @function TensorDataset
-- @param ... tensors
-- @usage local ds = lt.data.TensorDataset(images, labels)
local TensorDataset = class("TensorDataset", Dataset)
data.TensorDataset = TensorDataset
function TensorDataset.new(cls, ...)
  local tensors = table.pack(...)
  if tensors.n == 0 then error("TensorDataset: needs at least one tensor", 2) end
  local n = tensors[1]:size(1)
  for i = 1, tensors.n do
    if not lt.is_tensor(tensors[i]) then error("TensorDataset: argument " .. i .. " is not a tensor", 2) end
    if tensors[i]:size(1) ~= n then
      error(string.format("TensorDataset: size mismatch between tensors (%d vs %d in dimension 1)", n, tensors[i]:size(1)), 2)
    end
  end
  return setmetatable({ tensors = tensors, n = n }, cls)
end
function TensorDataset:len() return self.n end
function TensorDataset:get(i)
  local out = {}
  for k = 1, self.tensors.n do out[k] = self.tensors[k][i] end
  return table.unpack(out, 1, self.tensors.n)
end
function TensorDataset:get_batch(idx)   -- idx: int64 tensor of 1-based positions
  local out = {}
  for k = 1, self.tensors.n do out[k] = self.tensors[k]:index_select(1, idx) end
  return out
end

--- A view of some samples of a dataset.
-- @function Subset
-- @param dataset
-- @tab indices 1-based positions in dataset
local Subset = class("Subset", Dataset)
data.Subset = Subset
function Subset.new(cls, dataset, indices)
  return setmetatable({ dataset = dataset, indices = indices }, cls)
end
function Subset:len() return #self.indices end
function Subset:get(i) return self.dataset:get(self.indices[i]) end
function Subset:get_batch(idx)
  if not self.dataset.get_batch then return nil end
  local map = idx:tolist()
  for k, v in ipairs(map) do map[k] = self.indices[v] end
  return self.dataset:get_batch(lt.tensor(map))
end

local function dataset_len(ds)
  if type(ds.len) == "function" then return ds:len() end
  return #ds
end

--- Splits a dataset into Subsets of random, non-overlapping samples.
-- @param dataset
-- @tab lengths counts that sum to the length, or fractions that sum to 1 (the remainder
-- goes round-robin to the first ones)
-- @tparam[opt] table opts `{generator=}`
-- @treturn table a list of Subsets
function data.random_split(dataset, lengths, opts)
  opts = check("random_split", opts, { "generator" })
  local n = dataset_len(dataset)
  local counts, total = {}, 0
  local fractional = true
  for _, l in ipairs(lengths) do if l >= 1 or math.type(l) == "integer" then fractional = false end end
  if fractional then
    for i, f in ipairs(lengths) do counts[i] = math.floor(n * f) total = total + counts[i] end
    local i = 1
    while total < n do counts[i] = counts[i] + 1; total = total + 1; i = i % #counts + 1 end
  else
    for i, c in ipairs(lengths) do counts[i] = c total = total + c end
  end
  if total ~= n then
    error("random_split: Sum of input lengths does not equal the length of the input dataset!", 2)
  end
  local perm = lt.randperm(n, { generator = opts.generator }):tolist()
  local out, pos = {}, 0
  for i, c in ipairs(counts) do
    local idx = {}
    for k = 1, c do idx[k] = perm[pos + k] end
    pos = pos + c
    out[i] = Subset(dataset, idx)
  end
  return out
end

--- Stacks a list of samples (each a table of tensors or numbers) into batch tensors: one
-- `lt.stack` per field (numbers become a tensor). DataLoader's default `collate_fn`.
-- @tab samples
-- @treturn table one batch tensor per field
function data.default_collate(samples)
  local first = samples[1]
  local out = {}
  for k = 1, #first do
    local col = {}
    for i, s in ipairs(samples) do col[i] = s[k] end
    if lt.is_tensor(first[k]) then
      out[k] = lt.stack(col, 1)
    else
      out[k] = lt.tensor(col)
    end
  end
  return out
end

--- Batches of a dataset: `for xb, yb in loader:iter() do ... end`, `#loader` batches. The
-- last batch is shorter unless `drop_last`. A dataset with `get_batch` (TensorDataset,
-- Subset of one) is batched without collating single samples.
-- @type DataLoader
local DataLoader = class("DataLoader")
data.DataLoader = DataLoader
--- Makes a loader (called as `lt.data.DataLoader(dataset, opts)`).
-- @param cls
-- @param dataset a Dataset (or any table with `len` or `#`, and `get`)
-- @tparam[opt] table opts `batch_size` (1), `shuffle` (false: a new order each `iter()`),
-- `drop_last` (false), `generator` (for the shuffle), `collate_fn` (default
-- `data.default_collate`), `sampler` (the positions to visit: an object with `indices()` and
-- `#`, such as a `DistributedSampler`; not with shuffle)
-- @usage local loader = lt.data.DataLoader(ds, {batch_size = 32, shuffle = true, generator = g})
function DataLoader.new(cls, dataset, opts)
  opts = check("DataLoader", opts, { "batch_size", "shuffle", "drop_last", "generator", "collate_fn",
    "sampler" })
  if opts.sampler and opts.shuffle then error("DataLoader: sampler option is mutually exclusive with shuffle", 2) end
  local self = setmetatable({
    dataset = dataset,
    batch_size = opts.batch_size or 1,
    shuffle = opts.shuffle or false,
    drop_last = opts.drop_last or false,
    generator = opts.generator,
    collate_fn = opts.collate_fn,
    sampler = opts.sampler,
  }, cls)
  if math.type(self.batch_size) ~= "integer" or self.batch_size < 1 then
    error("DataLoader: batch_size should be a positive integer value, but got batch_size=" .. tostring(opts.batch_size), 2)
  end
  return self
end

--- The number of batches (also `#loader`).
-- @treturn int
function DataLoader:len()
  local n = self.sampler and #self.sampler or dataset_len(self.dataset)
  if self.drop_last then return n // self.batch_size end
  return (n + self.batch_size - 1) // self.batch_size
end

--- An iterator over the batches; each call draws a new order when shuffling. Each batch is
-- returned as several values (`xb, yb`).
-- @return iterator function
function DataLoader:iter()
  local ds = self.dataset
  local n = self.sampler and #self.sampler or dataset_len(ds)
  local order
  if self.sampler then
    order = lt.tensor(self.sampler:indices(), { dtype = "int64" })
  elseif self.shuffle then
    order = lt.randperm(n, { generator = self.generator })
  else
    order = lt.arange(1, n + 1)
  end
  local nb = self:len()
  local b = 0
  local fast = ds.get_batch and not self.collate_fn
  return function()
    b = b + 1
    if b > nb then return nil end
    local start = (b - 1) * self.batch_size
    local len = math.min(self.batch_size, n - start)
    local idx = order:narrow(1, start + 1, len)
    if fast then
      local batch = ds:get_batch(idx)
      if batch then return table.unpack(batch) end
    end
    local samples = {}
    local list = idx:tolist()
    for i, k in ipairs(list) do samples[i] = table.pack(ds:get(k)) end
    local collate = self.collate_fn or data.default_collate
    return table.unpack(collate(samples))
  end
end

-- readers ---------------------------------------------------------------------

---------------------------------------------------------------------------------------------
--- Readers.
-- @section readers

--- Reads an IDX file (MNIST-style, gzipped or not, bounded by the sizes the file claims).
-- @string path
-- @tparam[opt] table opts `{dtype=}` (default float32, and int64 for 1-d label files)
-- @treturn Tensor
-- @usage local images = lt.data.read_idx("train-images-idx3-ubyte.gz")   -- {60000, 28, 28}
function data.read_idx(path, opts)
  opts = check("read_idx", opts, { "dtype" })
  local t = core._read_idx(path, opts.dtype or "float32")
  if not opts.dtype and t:dim() == 1 then t = t:long() end
  return t
end

local function split_csv_line(line, sep)
  local fields, pos = {}, 1
  while true do
    if line:sub(pos, pos) == '"' then
      local buf, i = {}, pos + 1
      while true do
        local c = line:sub(i, i)
        if c == "" then break end
        if c == '"' then
          if line:sub(i + 1, i + 1) == '"' then buf[#buf + 1] = '"'; i = i + 2
          else i = i + 1; break end
        else buf[#buf + 1] = c; i = i + 1 end
      end
      fields[#fields + 1] = table.concat(buf)
      pos = i
      if line:sub(pos, pos) == sep then pos = pos + 1 else return fields end
    else
      local e = line:find(sep, pos, true)
      if not e then fields[#fields + 1] = line:sub(pos) return fields end
      fields[#fields + 1] = line:sub(pos, e - 1)
      pos = e + 1
    end
  end
end

--- Reads a CSV file (quoted fields, `""` escapes; gzip by the `.gz` extension).
-- @string path
-- @tparam[opt] table opts `sep` (`","`), `header` (false: with true the first line is the
-- header), `numeric` (false: with true the rows form a tensor, every field must be a number
-- and every row as long), `dtype` (`"float32"`, for numeric)
-- @return the rows (a list of lists of strings and numbers) or, with numeric, a tensor
-- @return the header (a list of strings), when `header`
function data.read_csv(path, opts)
  opts = check("read_csv", opts, { "sep", "header", "numeric", "dtype" })
  local sep = opts.sep or ","
  local f
  if path:match("%.gz$") then f = io.popen("gzip -dc '" .. path:gsub("'", "'\\''") .. "'")
  else f = io.open(path, "r") end
  if not f then error("read_csv: cannot open '" .. path .. "'", 2) end
  local rows, header = {}, nil
  local lineno = 0
  for line in f:lines() do
    lineno = lineno + 1
    line = line:gsub("\r$", "")
    if line ~= "" then
      local fields = split_csv_line(line, sep)
      if opts.header and not header then
        header = fields
      else
        for i, v in ipairs(fields) do
          local num = tonumber(v)
          if num then fields[i] = num
          elseif opts.numeric then
            f:close()
            error(string.format("read_csv: '%s' line %d field %d is not a number: %q", path, lineno, i, v), 2)
          end
        end
        if opts.numeric and #rows > 0 and #fields ~= #rows[1] then
          f:close()
          error(string.format("read_csv: '%s' line %d has %d fields, expected %d", path, lineno, #fields, #rows[1]), 2)
        end
        rows[#rows + 1] = fields
      end
    end
  end
  f:close()
  if opts.numeric then
    return lt.tensor(rows, { dtype = opts.dtype or "float32" }), header
  end
  return rows, header
end

data.DistributedSampler = require("lantern.data.sampler").DistributedSampler

return data
