--- MultiheadAttention and TransformerEncoderLayer with PyTorch's parameter names
-- (in_proj_weight, in_proj_bias, out_proj.*; self_attn, linear1, dropout, linear2, norm1, norm2,
-- dropout1, dropout2), shapes and masks.
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local init = require "lantern.nn.initfn"
local linear = require "lantern.nn.linear"
local dropout = require "lantern.nn.dropout"
local norm = require "lantern.nn.norm"
local check = require("lantern.options").check

local Module = mod.Module
local A = {}

---------------------------------------------------------------------------------------------
--- Attention and transformers, with PyTorch's parameter names (`in_proj_weight`,
-- `in_proj_bias`, `out_proj.weight`; `self_attn`, `linear1`, `linear2`, `norm1`, `norm2`),
-- shapes and mask rules, so PyTorch checkpoints load into them.
-- @section attention

--- The Linear that PyTorch uses for MultiheadAttention's `out_proj` (the class name shows
-- in the repr); it is a `Linear` in every other respect.
-- @function NonDynamicallyQuantizableLinear
-- @int in_features
-- @int out_features
-- @tparam[opt] table opts as Linear's
local NDQLinear = linear.Linear:extend("NonDynamicallyQuantizableLinear")
A.NonDynamicallyQuantizableLinear = NDQLinear

--- Multi-head attention (PyTorch's `nn.MultiheadAttention`): the query, key and value are
-- projected by `in_proj_weight` (or `q_proj_weight`, `k_proj_weight`, `v_proj_weight` when
-- `kdim` or `vdim` differ from `embed_dim`), split into `num_heads` heads, combined by
-- scaled dot-product attention and projected by `out_proj`.
--
-- `forward(query, key, value, opts)` with opts `key_padding_mask` `(N, S)`, `attn_mask`
-- `(L, S)` or `(N * num_heads, L, S)`, `need_weights` (true), `average_attn_weights` (true),
-- `is_causal`; boolean masks mark the positions that may *not* be attended, float masks are
-- added to the scores. It returns the output and the attention weights (nil without
-- `need_weights`; averaged over heads, `(N, L, S)`, or per head `(N, num_heads, L, S)`).
--
-- Shapes: query `(L, N, embed_dim)`, key `(S, N, kdim)`, value `(S, N, vdim)` (batch first
-- with `batch_first`; unbatched without N); output `(L, N, embed_dim)`.
-- @function MultiheadAttention
-- @int embed_dim must divide by num_heads
-- @int num_heads
-- @tparam[opt] table opts `dropout` (0, on the attention weights in training), `bias`
-- (true), `add_bias_kv` (false: learned `bias_k`, `bias_v` appended to every sequence),
-- `add_zero_attn` (false: a zero key and value appended), `kdim`, `vdim` (embed_dim),
-- `batch_first` (false), `dtype`
-- @usage local mha = nn.MultiheadAttention(64, 8, {batch_first = true})
-- local x = lt.randn(2, 10, 64)
-- local out, weights = mha(x, x, x)   -- out {2, 10, 64}, weights {2, 10, 10}
local MHA = Module:extend("MultiheadAttention")
A.MultiheadAttention = MHA

function MHA:__init(embed_dim, num_heads, opts)
  Module.__init(self)
  if opts ~= nil and type(opts) ~= "table" then
    error("MultiheadAttention: options must be a table, e.g. {batch_first = true}", 2)
  end
  opts = check("MultiheadAttention", opts, { "dropout", "bias", "add_bias_kv", "add_zero_attn",
    "kdim", "vdim", "batch_first", "dtype", "device" })
  self.embed_dim = util.check_int(embed_dim, "MultiheadAttention", "embed_dim", 1)
  self.num_heads = util.check_int(num_heads, "MultiheadAttention", "num_heads", 1)
  self.kdim = opts.kdim or embed_dim
  self.vdim = opts.vdim or embed_dim
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  self.dropout = opts.dropout or 0.0
  self.batch_first = opts.batch_first or false
  self.head_dim = embed_dim // num_heads
  if self.head_dim * num_heads ~= embed_dim then
    error("MultiheadAttention: embed_dim must be divisible by num_heads", 2)
  end
  local f = util.factory(opts, "MultiheadAttention")
  if not self._qkv_same_embed_dim then
    self.q_proj_weight = lt.empty(embed_dim, embed_dim, f)
    self.k_proj_weight = lt.empty(embed_dim, self.kdim, f)
    self.v_proj_weight = lt.empty(embed_dim, self.vdim, f)
    self:register_parameter("in_proj_weight", nil)
  else
    self.in_proj_weight = lt.empty(3 * embed_dim, embed_dim, f)
    self:register_parameter("q_proj_weight", nil)
    self:register_parameter("k_proj_weight", nil)
    self:register_parameter("v_proj_weight", nil)
  end
  local bias = opts.bias ~= false
  if bias then
    self.in_proj_bias = lt.empty(3 * embed_dim, f)
  else
    self:register_parameter("in_proj_bias", nil)
  end
  if opts.add_bias_kv then
    self.bias_k = lt.empty(1, 1, embed_dim, f)
    self.bias_v = lt.empty(1, 1, embed_dim, f)
  end
  self.out_proj = NDQLinear(embed_dim, embed_dim, { bias = bias, dtype = f.dtype })
  self.add_zero_attn = opts.add_zero_attn or false
  self:_init_parameters()
end

function MHA:reset_parameters()
  if self._qkv_same_embed_dim then
    init.xavier_uniform_(self.in_proj_weight)
  else
    init.xavier_uniform_(self.q_proj_weight)
    init.xavier_uniform_(self.k_proj_weight)
    init.xavier_uniform_(self.v_proj_weight)
  end
  if self.in_proj_bias ~= nil then
    init.constant_(self.in_proj_bias, 0)
    init.constant_(self.out_proj.bias, 0)
  end
  if self.bias_k ~= nil then
    init.xavier_normal_(self.bias_k)
    init.xavier_normal_(self.bias_v)
  end
end

-- Boolean masks mark positions that may NOT be attended (PyTorch's rule for this module); float
-- masks are added to the scores.
local function float_mask(m, dtype)
  if m.dtype == "bool" then
    return lt.zeros(util.sizes(m), { dtype = dtype }):masked_fill(m, -math.huge)
  end
  return m:to(dtype)
end

-- forward(query, key, value, {key_padding_mask, need_weights = true, attn_mask,
-- average_attn_weights = true, is_causal}) -> attn_output, attn_weights (nil when not needed)
function MHA:forward(query, key, value, opts)
  opts = check("MultiheadAttention", opts, { "key_padding_mask", "need_weights", "attn_mask",
    "average_attn_weights", "is_causal" })
  for i, t in ipairs({ query, key or false, value or false }) do
    if not util.is_tensor(t) then
      error("MultiheadAttention: expected query, key and value Tensors (argument " .. i .. " is " ..
        util.typename(t) .. ")", 2)
    end
  end
  local E, H, hd = self.embed_dim, self.num_heads, self.head_dim
  local batched = query:dim() == 3
  if not batched and query:dim() ~= 2 then
    error("MultiheadAttention: query should be unbatched 2D or batched 3D tensor but received " ..
      query:dim() .. "-D query tensor of size " .. util.shape_str(query), 2)
  end
  if key:dim() ~= query:dim() or value:dim() ~= query:dim() then
    error("MultiheadAttention: query, key and value must have the same rank, got " ..
      util.shape_str(query) .. ", " .. util.shape_str(key) .. ", " .. util.shape_str(value), 2)
  end
  if query:size(-1) ~= E then
    error("MultiheadAttention: was expecting embedding dimension of " .. E .. ", but got " ..
      query:size(-1) .. " (query of size " .. util.shape_str(query) .. ")", 2)
  end
  if key:size(-1) ~= self.kdim or value:size(-1) ~= self.vdim then
    error("MultiheadAttention: key/value feature sizes " .. key:size(-1) .. "/" .. value:size(-1) ..
      " do not match kdim=" .. self.kdim .. ", vdim=" .. self.vdim, 2)
  end
  local q, k, v = query, key, value
  local kpm = opts.key_padding_mask
  if not batched then
    q, k, v = q:unsqueeze(2), k:unsqueeze(2), v:unsqueeze(2)
    if kpm ~= nil then kpm = kpm:unsqueeze(1) end
  elseif self.batch_first then
    q, k, v = q:transpose(1, 2), k:transpose(1, 2), v:transpose(1, 2)
  end
  -- (L, N, E) from here on
  local L, N, S = q:size(1), q:size(2), k:size(1)
  local wq, wk, wv, bq, bk, bv
  if self._qkv_same_embed_dim then
    wq = self.in_proj_weight:narrow(1, 1, E)
    wk = self.in_proj_weight:narrow(1, E + 1, E)
    wv = self.in_proj_weight:narrow(1, 2 * E + 1, E)
  else
    wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
  end
  local b = self.in_proj_bias
  if b ~= nil then bq, bk, bv = b:narrow(1, 1, E), b:narrow(1, E + 1, E), b:narrow(1, 2 * E + 1, E) end
  q = F.linear(q, wq, bq)
  k = F.linear(k, wk, bk)
  v = F.linear(v, wv, bv)
  local extra = 0          -- key positions appended by add_bias_kv and add_zero_attn
  if self.bias_k ~= nil then
    k = lt.cat({ k, self.bias_k:expand(1, N, E) }, 1)
    v = lt.cat({ v, self.bias_v:expand(1, N, E) }, 1)
    extra = extra + 1
  end
  -- heads: (L, N, E) -> (N*H, L, hd)
  q = q:reshape(L, N * H, hd):transpose(1, 2)
  k = k:reshape(S + extra, N * H, hd):transpose(1, 2)
  v = v:reshape(S + extra, N * H, hd):transpose(1, 2)
  if self.add_zero_attn then
    local zeros = lt.zeros(N * H, 1, hd, { dtype = k.dtype })
    k = lt.cat({ k, zeros }, 2)
    v = lt.cat({ v, zeros }, 2)
    extra = extra + 1
  end
  local need = opts.need_weights
  if need == nil then need = true end
  local mask
  local am = opts.attn_mask
  -- without weights to return, a causal mask alone is the fused op's is_causal
  local causal = not need and opts.is_causal and am == nil and kpm == nil and extra == 0
  if opts.is_causal and am == nil and not causal then
    am = lt.ones(L, S, { dtype = "bool" }):triu(1)
  end
  if am ~= nil then
    if am:dim() == 2 then
      if am:size(1) ~= L or am:size(2) ~= S then
        error("MultiheadAttention: The shape of the 2D attn_mask is " .. util.torch_size(am) ..
          ", but should be (" .. L .. ", " .. S .. ").", 2)
      end
      am = am:unsqueeze(1)
    elseif am:dim() == 3 then
      if am:size(1) ~= N * H or am:size(2) ~= L or am:size(3) ~= S then
        error("MultiheadAttention: The shape of the 3D attn_mask is " .. util.torch_size(am) ..
          ", but should be (" .. N * H .. ", " .. L .. ", " .. S .. ").", 2)
      end
    else
      error("MultiheadAttention: attn_mask's dimension " .. am:dim() .. " is not supported", 2)
    end
    mask = float_mask(am, q.dtype)
  end
  if kpm ~= nil then
    if kpm:dim() ~= 2 or kpm:size(1) ~= N or kpm:size(2) ~= S then
      error("MultiheadAttention: expecting key_padding_mask shape of (" .. N .. ", " .. S ..
        "), but got " .. util.torch_size(kpm), 2)
    end
    local km = float_mask(kpm, q.dtype):view(N, 1, 1, S):expand(N, H, 1, S):reshape(N * H, 1, S)
    mask = mask and (mask + km) or km
  end
  -- the appended keys are attended everywhere: the masks grow by columns of zeros
  if mask ~= nil and extra > 0 then mask = F.pad(mask, { 0, extra }) end
  S = S + extra
  local out, w
  if need then
    local scores = (q * (1 / math.sqrt(hd))):matmul(k:transpose(2, 3))   -- (N*H, L, S)
    if mask ~= nil then scores = scores + mask end
    w = scores:softmax(-1)
    local wd = w
    if self.dropout > 0 and self.training then wd = F.dropout(w, self.dropout, true) end
    out = wd:matmul(v)                                                   -- (N*H, L, hd)
  else   -- PyTorch's fast path: the fused op, no weights kept
    local p = (self.dropout > 0 and self.training) and self.dropout or 0
    out = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask, is_causal = causal,
      dropout_p = p })
  end
  out = out:transpose(1, 2):reshape(L * N, E)
  out = self.out_proj(out):view(L, N, E)
  local weights
  if need then
    weights = w:view(N, H, L, S)
    local avg = opts.average_attn_weights
    if avg == nil then avg = true end
    if avg then weights = weights:mean(2) end
    if not batched then weights = weights:squeeze(1) end
  end
  if not batched then
    out = out:squeeze(2)
  elseif self.batch_first then
    out = out:transpose(1, 2)
  end
  return out, weights
end

--- One transformer encoder layer (PyTorch's `nn.TransformerEncoderLayer`): self-attention
-- and a feed-forward block (`linear1`, activation, `linear2`), each with dropout, a residual
-- connection and LayerNorm (after each block, or before with `norm_first`).
-- `forward(src, opts)` takes `src_mask`, `src_key_padding_mask` and `is_causal`.
--
-- Shapes: `src` `(S, N, d_model)` (`(N, S, d_model)` with batch_first), output the same.
-- @function TransformerEncoderLayer
-- @int d_model
-- @int nhead
-- @tparam[opt] table opts `dim_feedforward` (2048), `dropout` (0.1), `activation` (`"relu"`,
-- `"gelu"`, a function or a Module), `layer_norm_eps` (1e-5), `batch_first` (false),
-- `norm_first` (false), `bias` (true), `dtype`
local TEL = Module:extend("TransformerEncoderLayer")
A.TransformerEncoderLayer = TEL

local ACT = { relu = F.relu, gelu = F.gelu }

function TEL:__init(d_model, nhead, opts)
  Module.__init(self)
  if opts ~= nil and type(opts) ~= "table" then
    error("TransformerEncoderLayer: options must be a table, e.g. {dim_feedforward = 512}", 2)
  end
  opts = check("TransformerEncoderLayer", opts, { "dim_feedforward", "dropout", "activation",
    "layer_norm_eps", "batch_first", "norm_first", "bias", "dtype", "device" })
  local dff = opts.dim_feedforward or 2048
  local p = opts.dropout
  if p == nil then p = 0.1 end
  local eps = opts.layer_norm_eps or 1e-5
  local bias = opts.bias ~= false
  local f = util.factory(opts, "TransformerEncoderLayer")
  self.self_attn = MHA(d_model, nhead, { dropout = p, bias = bias, batch_first = opts.batch_first, dtype = f.dtype })
  self.linear1 = linear.Linear(d_model, dff, { bias = bias, dtype = f.dtype })
  self.dropout = dropout.Dropout(p)
  self.linear2 = linear.Linear(dff, d_model, { bias = bias, dtype = f.dtype })
  self.norm_first = opts.norm_first or false
  self.norm1 = norm.LayerNorm(d_model, { eps = eps, bias = bias, dtype = f.dtype })
  self.norm2 = norm.LayerNorm(d_model, { eps = eps, bias = bias, dtype = f.dtype })
  self.dropout1 = dropout.Dropout(p)
  self.dropout2 = dropout.Dropout(p)
  local act = opts.activation or "relu"
  if type(act) == "string" then
    local fn = ACT[act]
    if fn == nil then
      error("TransformerEncoderLayer: activation should be relu/gelu, not " .. act, 2)
    end
    self.activation = fn
  else
    self.activation = act   -- a function (plain field) or a Module (registered child)
  end
end

function TEL:_sa_block(x, attn_mask, key_padding_mask, is_causal)
  local out = self.self_attn(x, x, x, { attn_mask = attn_mask, key_padding_mask = key_padding_mask,
    need_weights = false, is_causal = is_causal })
  return self.dropout1(out)
end

function TEL:_ff_block(x)
  return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

-- forward(src, {src_mask, src_key_padding_mask, is_causal})
function TEL:forward(src, opts)
  if not util.is_tensor(src) then
    error("TransformerEncoderLayer: expected a Tensor input, got " .. util.typename(src), 2)
  end
  opts = check("TransformerEncoderLayer", opts, { "src_mask", "src_key_padding_mask", "is_causal" })
  local x = src
  if self.norm_first then
    x = x + self:_sa_block(self.norm1(x), opts.src_mask, opts.src_key_padding_mask, opts.is_causal)
    x = x + self:_ff_block(self.norm2(x))
  else
    x = self.norm1(x + self:_sa_block(x, opts.src_mask, opts.src_key_padding_mask, opts.is_causal))
    x = self.norm2(x + self:_ff_block(x))
  end
  return x
end

--- A stack of `num_layers` copies of `encoder_layer` (deep copies, under `layers.0`,
-- `layers.1`, ... as PyTorch names them) and an optional final norm. `forward(src, opts)`
-- takes `mask`, `src_key_padding_mask` and `is_causal`.
--
-- Shapes: as the layer's.
-- @function TransformerEncoder
-- @param encoder_layer a TransformerEncoderLayer
-- @int num_layers
-- @tparam[opt] table opts `norm` (a Module applied last), and PyTorch's
-- `enable_nested_tensor` and `mask_check` (accepted, no effect)
-- @usage local layer = nn.TransformerEncoderLayer(64, 4, {batch_first = true})
-- local enc = nn.TransformerEncoder(layer, 3)
-- enc(lt.randn(2, 10, 64)).shape   --> {2, 10, 64}
local TE = Module:extend("TransformerEncoder")
A.TransformerEncoder = TE

function TE:__init(encoder_layer, num_layers, opts)
  Module.__init(self)
  if not mod.is_module(encoder_layer) then
    error("TransformerEncoder: encoder_layer must be a Module, got " .. util.typename(encoder_layer), 2)
  end
  num_layers = util.check_int(num_layers, "TransformerEncoder", "num_layers", 1)
  local layers = {}
  for i = 1, num_layers do layers[i] = encoder_layer:deepcopy() end
  local containers = require "lantern.nn.containers"
  self.layers = containers.ModuleList(layers)
  self.num_layers = num_layers
  -- enable_nested_tensor and mask_check steer PyTorch's nested-tensor fast path, which does
  -- not change results; Lantern has no such path, and accepts them for code ported as is.
  opts = check("TransformerEncoder", opts, { "norm", "enable_nested_tensor", "mask_check" })
  local norm_ = opts.norm
  if norm_ ~= nil then self.norm = norm_ else self:add_module("norm", nil) end
end

-- forward(src, {mask, src_key_padding_mask, is_causal})
function TE:forward(src, opts)
  opts = check("TransformerEncoder", opts, { "mask", "src_key_padding_mask", "is_causal" })
  local out = src
  for _, layer in ipairs(self.layers:children()) do
    out = layer(out, { src_mask = opts.mask, src_key_padding_mask = opts.src_key_padding_mask,
      is_causal = opts.is_causal })
  end
  if self.norm ~= nil then out = self.norm(out) end
  return out
end

return A
