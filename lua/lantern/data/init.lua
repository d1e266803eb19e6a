--- Datasets and loaders: Dataset, TensorDataset, Subset, random_split, DataLoader, and readers
-- for IDX (MNIST-style) and CSV files.
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

--- Base class: subclasses define `len()` and `get(i)` (1-based).
local Dataset = class("Dataset")
data.Dataset = Dataset
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
function Dataset:len() error(self.__name .. ": len() not implemented", 2) end
function Dataset:get() error(self.__name .. ": get(i) not implemented", 2) end

--- TensorDataset(t1, t2, ...): sample i is (t1[i], t2[i], ...); batches are gathered in one
-- index_select per tensor.
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

--- Subset(dataset, indices): a view of some samples (1-based indices).
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

--- random_split(dataset, lengths, {generator=g}): lengths are counts or fractions.
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

--- Stacks a list of samples (each a tuple of tensors or numbers) into batch tensors.
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

--- DataLoader(dataset, {batch_size=1, shuffle=false, drop_last=false, generator=g,
-- collate_fn=fn}). `for xb, yb in loader:iter() do ... end`; `#loader` is the batch count.
local DataLoader = class("DataLoader")
data.DataLoader = DataLoader
function DataLoader.new(cls, dataset, opts)
  opts = check("DataLoader", opts, { "batch_size", "shuffle", "drop_last", "generator", "collate_fn" })
  local self = setmetatable({
    dataset = dataset,
    batch_size = opts.batch_size or 1,
    shuffle = opts.shuffle or false,
    drop_last = opts.drop_last or false,
    generator = opts.generator,
    collate_fn = opts.collate_fn,
  }, cls)
  if math.type(self.batch_size) ~= "integer" or self.batch_size < 1 then
    error("DataLoader: batch_size should be a positive integer value, but got batch_size=" .. tostring(opts.batch_size), 2)
  end
  return self
end

function DataLoader:len()
  local n = dataset_len(self.dataset)
  if self.drop_last then return n // self.batch_size end
  return (n + self.batch_size - 1) // self.batch_size
end

--- Iterates over batches; each call draws a new order when shuffling.
function DataLoader:iter()
  local ds = self.dataset
  local n = dataset_len(ds)
  local order
  if self.shuffle then
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

------------------------------------------------------------------------ readers

--- Reads an IDX file (MNIST-style, gzipped or not) into a tensor of `dtype`
-- (default float32 for images, int64 for 1-d label files).
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

--- Reads a CSV file: returns rows as a list of lists of strings and numbers, and the header
-- (when `header=true`). With `numeric=true` returns a float tensor of the numeric table.
-- Options: sep=",", header=false, numeric=false, dtype="float32", gzip (by extension).
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

return data
