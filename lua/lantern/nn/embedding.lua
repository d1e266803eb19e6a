--- Embedding: a lookup table indexed by 1-based int64 indices.
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local init = require "lantern.nn.initfn"
local check = require("lantern.options").check

local Module = mod.Module
local E = {}

--- A lookup table: `weight[i]` for each 1-based int64 index i of the input.
--
-- Shapes: input `(*)` int64 indices in 1..num_embeddings, output `(*, embedding_dim)`.
-- Parameter `weight` `(num_embeddings, embedding_dim)`, standard normal. `padding_idx` is a
-- 1-based row (negative from the end) that starts at zero and gets no gradient; with
-- `max_norm` each forward scales the rows it looks up whose norm exceeds max_norm back to it,
-- in place (PyTorch's renormalisation).
-- @function Embedding
-- @int num_embeddings
-- @int embedding_dim
-- @tparam[opt] table opts `padding_idx`, `max_norm`, `norm_type` (2), `dtype`
-- @usage local emb = nn.Embedding(1000, 64)
-- emb(lt.tensor{{1, 2, 3}, {4, 5, 6}}).shape   --> {2, 3, 64}
local Embedding = Module:extend("Embedding")
E.Embedding = Embedding

function Embedding:__init(num_embeddings, embedding_dim, opts)
  Module.__init(self)
  if opts ~= nil and type(opts) ~= "table" then
    error("Embedding: options must be a table, e.g. {padding_idx = 1}", 2)
  end
  opts = check("Embedding", opts, { "padding_idx", "max_norm", "norm_type", "_weight", "dtype",
    "device" })
  self.num_embeddings = util.check_int(num_embeddings, "Embedding", "num_embeddings", 0)
  self.embedding_dim = util.check_int(embedding_dim, "Embedding", "embedding_dim", 0)
  local pidx = opts.padding_idx
  if pidx ~= nil then
    pidx = util.check_int(pidx, "Embedding", "padding_idx")
    if pidx > 0 then
      if pidx > num_embeddings then error("Embedding: Padding_idx must be within num_embeddings", 2) end
    elseif pidx < 0 then
      if pidx < -num_embeddings then error("Embedding: Padding_idx must be within num_embeddings", 2) end
      pidx = num_embeddings + pidx + 1
    else
      error("Embedding: padding_idx is 1-based (got 0)", 2)
    end
  end
  self.padding_idx = pidx
  self.max_norm = opts.max_norm
  self.norm_type = opts.norm_type or 2.0
  if opts._weight ~= nil then
    local w = opts._weight
    if w:dim() ~= 2 or w:size(1) ~= num_embeddings or w:size(2) ~= embedding_dim then
      error("Embedding: Shape of weight does not match num_embeddings and embedding_dim", 2)
    end
    self.weight = w
  else
    self.weight = lt.empty(num_embeddings, embedding_dim, util.factory(opts, "Embedding"))
    self:_init_parameters()
  end
end

function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx ~= nil then
    lt.no_grad(function() self.weight:select(1, self.padding_idx):fill_(0) end)
  end
end

function Embedding:forward(input)
  if not util.is_tensor(input) then
    error("Embedding: expected an int64 Tensor of indices, got " .. util.typename(input), 2)
  end
  if self.max_norm ~= nil then
    return F.embedding(input, self.weight, self.padding_idx,
      { max_norm = self.max_norm, norm_type = self.norm_type })
  end
  return F.embedding(input, self.weight, self.padding_idx)
end

function Embedding:extra_repr()
  local s = self.num_embeddings .. ", " .. self.embedding_dim
  if self.padding_idx ~= nil then s = s .. ", padding_idx=" .. self.padding_idx end
  if self.max_norm ~= nil then s = s .. ", max_norm=" .. util.num_str(self.max_norm) end
  if self.norm_type ~= 2 then s = s .. ", norm_type=" .. util.num_str(self.norm_type) end
  return s
end

--- An Embedding holding `embeddings` as its weight (shared, not copied).
-- @tparam Tensor embeddings `(num_embeddings, embedding_dim)`
-- @tparam[opt] table opts `freeze` (default true: the weight does not require grad),
-- `padding_idx`, `max_norm`, `norm_type`
-- @return an Embedding
-- @usage local emb = nn.Embedding.from_pretrained(vectors, {freeze = false})
function Embedding.from_pretrained(embeddings, opts)
  opts = check("Embedding.from_pretrained", opts, { "freeze", "padding_idx", "max_norm",
    "norm_type" })
  if not util.is_tensor(embeddings) or embeddings:dim() ~= 2 then
    error("Embedding.from_pretrained: embeddings must be a 2-D Tensor", 2)
  end
  local freeze = opts.freeze
  if freeze == nil then freeze = true end
  local w = mod.Parameter(embeddings, not freeze)
  local e = Embedding(embeddings:size(1), embeddings:size(2),
    { _weight = w, padding_idx = opts.padding_idx, max_norm = opts.max_norm,
      norm_type = opts.norm_type })
  return e
end

return E
