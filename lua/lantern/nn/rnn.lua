--- Recurrent layers: RNN, LSTM, GRU with PyTorch's parameter names (weight_ih_l0, weight_hh_l0,
-- bias_ih_l0, bias_hh_l0, ..._reverse), gate order (LSTM: i, f, g, o; GRU: r, z, n), shapes
-- ((L, N, H_in), or (N, L, H_in) with batch_first, or unbatched (L, H_in)) and initialisation
-- (every parameter U(-1/sqrt(hidden), 1/sqrt(hidden))). The input projection of all time steps
-- is one matmul; the recurrence is one matmul and a few elementwise ops per step.
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local init = require "lantern.nn.initfn"
local check = require("lantern.options").check

local Module = mod.Module
local R = {}

---------------------------------------------------------------------------------------------
--- Recurrent layers, with PyTorch's parameter names (`weight_ih_l0`, `weight_hh_l0`,
-- `bias_ih_l0`, `bias_hh_l0`, `..._reverse` for the second direction), gate order (LSTM:
-- i, f, g, o; GRU: r, z, n) and initialisation (every parameter uniform in
-- `(-1/sqrt(hidden_size), 1/sqrt(hidden_size))`), so PyTorch checkpoints load into them.
-- @section rnn

--- The common base of RNN, LSTM and GRU (PyTorch's `nn.RNNBase`); construct those instead.
-- `m:forward(input, hx)` is theirs.
-- @function RNNBase
local RNNBase = Module:extend("RNNBase")
R.RNNBase = RNNBase

local GATES = { LSTM = 4, GRU = 3, RNN_TANH = 1, RNN_RELU = 1 }

function RNNBase:__init(mode, input_size, hidden_size, opts)
  Module.__init(self)
  local name = self:type_name()
  if opts ~= nil and type(opts) ~= "table" then
    error(name .. ": options must be a table, e.g. {num_layers = 2, batch_first = true}", 3)
  end
  local known = { "num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size",
    "dtype", "device" }
  if mode == "RNN_TANH" or mode == "RNN_RELU" then known[#known + 1] = "nonlinearity" end
  opts = check(name, opts, known)
  self.mode = mode
  self.input_size = util.check_int(input_size, name, "input_size", 1)
  self.hidden_size = util.check_int(hidden_size, name, "hidden_size", 1)
  self.num_layers = util.check_int(opts.num_layers or 1, name, "num_layers", 1)
  self.bias = opts.bias ~= false
  self.batch_first = opts.batch_first or false
  self.dropout = opts.dropout or 0
  if type(self.dropout) ~= "number" or self.dropout < 0 or self.dropout > 1 then
    error(name .. ": dropout should be a number in range [0, 1] representing the probability of an element being zeroed", 3)
  end
  self.bidirectional = opts.bidirectional or false
  -- LSTM with projections: h is projected to proj_size by weight_hr after each step
  self.proj_size = util.check_int(opts.proj_size or 0, name, "proj_size", 0)
  if self.proj_size ~= 0 then
    if mode ~= "LSTM" then error(name .. ": proj_size argument is only supported for LSTM, not RNN or GRU", 3) end
    if self.proj_size >= hidden_size then error(name .. ": proj_size has to be smaller than hidden_size", 3) end
  end
  local real_h = self.proj_size > 0 and self.proj_size or hidden_size
  local dirs = self.bidirectional and 2 or 1
  local gate = GATES[mode] * hidden_size
  local f = util.factory(opts, name)
  for layer = 0, self.num_layers - 1 do
    for dir = 0, dirs - 1 do
      local in_size = layer == 0 and input_size or real_h * dirs
      local sfx = "_l" .. layer .. (dir == 1 and "_reverse" or "")
      self["weight_ih" .. sfx] = lt.empty(gate, in_size, f)
      self["weight_hh" .. sfx] = lt.empty(gate, real_h, f)
      if self.bias then
        self["bias_ih" .. sfx] = lt.empty(gate, f)
        self["bias_hh" .. sfx] = lt.empty(gate, f)
      end
      if self.proj_size > 0 then self["weight_hr" .. sfx] = lt.empty(self.proj_size, hidden_size, f) end
    end
  end
  self:_init_parameters()
end

function RNNBase:reset_parameters()
  local stdv = 1 / math.sqrt(self.hidden_size)
  for _, p in ipairs(self:parameters()) do init.uniform_(p, -stdv, stdv) end
end

function RNNBase:extra_repr()
  local s = self.input_size .. ", " .. self.hidden_size
  if self.proj_size ~= 0 then s = s .. ", proj_size=" .. self.proj_size end
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if not self.bias then s = s .. ", bias=False" end
  if self.batch_first then s = s .. ", batch_first=True" end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. util.num_str(self.dropout) end
  if self.bidirectional then s = s .. ", bidirectional=True" end
  if self.mode == "RNN_RELU" then s = s .. ", nonlinearity='relu'" end
  return s
end

-- One direction of one layer over the whole sequence. x: (L, N, in). Returns (L, N, H) and the
-- final state(s).
local function run_direction(self, x, sfx, h, c, reverse)
  local H = self.hidden_size
  local w_ih, w_hh = self["weight_ih" .. sfx], self["weight_hh" .. sfx]
  local w_hr_t = self.proj_size > 0 and self["weight_hr" .. sfx]:t() or nil
  local b_ih, b_hh = self["bias_ih" .. sfx], self["bias_hh" .. sfx]
  local L = x:size(1)
  local mode = self.mode
  -- the input's part of every step in one GEMM (L, N, G*H) that starts from the biases (both,
  -- but for GRU, whose b_hh goes inside r * (.)): one pass over it rather than three
  local bias = b_ih
  if b_hh ~= nil and mode ~= "GRU" then bias = b_ih + b_hh end
  local xw = F.linear(x, w_ih, bias)
  -- a contiguous copy: each step's weight gradient then adds up as it lies, and goes back
  -- through the transpose once, rather than being added into w_hh's gradient transposed, one
  -- strided pass per step (7% of a 2-layer LSTM's training step)
  local w_hh_t = w_hh:t():contiguous()
  local outs = {}
  for step = 1, L do
    local t = reverse and (L - step + 1) or step
    local xt = xw:select(1, t)
    if mode == "LSTM" then
      local gates = xt + h:matmul(w_hh_t)
      local i = gates:narrow(2, 1, H):sigmoid()
      local f = gates:narrow(2, H + 1, H):sigmoid()
      local g = gates:narrow(2, 2 * H + 1, H):tanh()
      local o = gates:narrow(2, 3 * H + 1, H):sigmoid()
      c = f * c + i * g
      h = o * c:tanh()
      if w_hr_t then h = h:matmul(w_hr_t) end
    elseif mode == "GRU" then
      local gh = h:matmul(w_hh_t)
      if b_hh ~= nil then gh = gh + b_hh end
      local r = (xt:narrow(2, 1, H) + gh:narrow(2, 1, H)):sigmoid()
      local z = (xt:narrow(2, H + 1, H) + gh:narrow(2, H + 1, H)):sigmoid()
      local n = (xt:narrow(2, 2 * H + 1, H) + r * gh:narrow(2, 2 * H + 1, H)):tanh()
      h = n + z * (h - n)
    else
      local a = xt + h:matmul(w_hh_t)
      h = mode == "RNN_TANH" and a:tanh() or a:relu()
    end
    outs[t] = h
  end
  return lt.stack(outs, 1), h, c
end

-- forward(input, hx): hx is h0 (RNN, GRU) or {h0, c0} (LSTM), each (layers*dirs, N, H) or
-- (layers*dirs, H) for unbatched input; zeros when absent. Returns output and h_n (GRU, RNN)
-- or output and {h_n, c_n} (LSTM).
function RNNBase:forward(input, hx)
  local name = self:type_name()
  if not util.is_tensor(input) then error(name .. ": expected a Tensor input, got " .. util.typename(input), 2) end
  local nd = input:dim()
  if nd ~= 2 and nd ~= 3 then
    error(name .. ": Expected input to be 2D or 3D, got " .. nd .. "D input of size " ..
      util.shape_str(input), 2)
  end
  if input:size(-1) ~= self.input_size then
    error(name .. ": input.size(-1) must be equal to input_size. Expected " .. self.input_size ..
      ", got " .. input:size(-1), 2)
  end
  local unbatched = nd == 2
  local x = input
  if unbatched then x = x:unsqueeze(2) elseif self.batch_first then x = x:transpose(1, 2) end
  local N = x:size(2)
  local dirs = self.bidirectional and 2 or 1
  local nstate = self.num_layers * dirs
  local H = self.hidden_size
  local real_h = self.proj_size > 0 and self.proj_size or H   -- the size of h (c keeps H)
  local h0, c0
  local is_lstm = self.mode == "LSTM"
  if hx ~= nil then
    if is_lstm then
      if type(hx) ~= "table" or #hx ~= 2 then error(name .. ": hx must be a table {h0, c0}", 2) end
      h0, c0 = hx[1], hx[2]
    else
      h0 = hx
    end
    for i, s in ipairs({ h0, c0 }) do
      local want = i == 1 and real_h or H
      if unbatched then s = s:unsqueeze(2) end
      if s:dim() ~= 3 or s:size(1) ~= nstate or s:size(2) ~= N or s:size(3) ~= want then
        error(name .. ": Expected " .. (i == 1 and "hidden" or "cell") .. " size (" .. nstate ..
          ", " .. N .. ", " .. want .. "), got " .. util.shape_str(s), 2)
      end
    end
    if unbatched then
      h0 = h0:unsqueeze(2)
      if c0 then c0 = c0:unsqueeze(2) end
    end
  else
    h0 = lt.zeros(nstate, N, real_h, { dtype = x.dtype })
    if is_lstm then c0 = lt.zeros(nstate, N, H, { dtype = x.dtype }) end
  end
  local hn, cn = {}, {}
  local layer_in = x
  for layer = 0, self.num_layers - 1 do
    local outs = {}
    for dir = 0, dirs - 1 do
      local k = layer * dirs + dir + 1
      local sfx = "_l" .. layer .. (dir == 1 and "_reverse" or "")
      local out, h, c = run_direction(self, layer_in, sfx, h0:select(1, k), c0 and c0:select(1, k), dir == 1)
      outs[#outs + 1] = out
      hn[k] = h
      cn[k] = c
    end
    layer_in = dirs == 2 and lt.cat(outs, 3) or outs[1]
    if self.dropout > 0 and self.training and layer < self.num_layers - 1 then
      layer_in = F.dropout(layer_in, self.dropout, true)
    end
  end
  local output = layer_in
  local h_n = lt.stack(hn, 1)
  local c_n = is_lstm and lt.stack(cn, 1) or nil
  if unbatched then
    output = output:squeeze(2)
    h_n = h_n:squeeze(2)
    if c_n then c_n = c_n:squeeze(2) end
  elseif self.batch_first then
    output = output:transpose(1, 2)
  end
  if is_lstm then return output, { h_n, c_n } end
  return output, h_n
end

--- Elman RNN: `h_t = tanh(x_t W_ih^T + b_ih + h_(t-1) W_hh^T + b_hh)` (or relu).
--
-- Shapes: input `(L, N, input_size)`, or `(N, L, input_size)` with `batch_first`, or
-- unbatched `(L, input_size)`; output `(L, N, D * H_out)` (batch first as the input) with D = 2
-- when bidirectional; states `(num_layers * D, N, H)` (`(num_layers * D, H)` unbatched).
-- `forward(input, h0)` returns `output, h_n`; h0 defaults to zeros.
-- @function RNN
-- @int input_size
-- @int hidden_size H
-- @tparam[opt] table opts `num_layers` (1), `bias` (true), `batch_first` (false), `dropout`
-- (0: applied to the outputs of every layer but the last, in training mode),
-- `bidirectional` (false), `dtype`, and `nonlinearity` (`"tanh"` or `"relu"`)
local RNN = RNNBase:extend("RNN")
R.RNN = RNN
function RNN:__init(input_size, hidden_size, opts)
  local nl = type(opts) == "table" and opts.nonlinearity or "tanh"
  if nl ~= "tanh" and nl ~= "relu" then error("RNN: Unknown nonlinearity '" .. tostring(nl) .. "'", 2) end
  RNNBase.__init(self, nl == "tanh" and "RNN_TANH" or "RNN_RELU", input_size, hidden_size, opts)
  self.nonlinearity = nl
end

--- Long short-term memory.
--
-- Shapes: input `(L, N, input_size)`, or `(N, L, input_size)` with `batch_first`, or
-- unbatched `(L, input_size)`; output `(L, N, D * H_out)` (batch first as the input) with D = 2
-- when bidirectional; states `(num_layers * D, N, H)` (`(num_layers * D, H)` unbatched).
-- `forward(input, {h0, c0})` returns `output, {h_n, c_n}`; the states default to zeros.
-- With `proj_size` > 0, h (and the output) have proj_size features (`weight_hr_l0` projects
-- them) while c keeps hidden_size.
-- @function LSTM
-- @int input_size
-- @int hidden_size H
-- @tparam[opt] table opts `num_layers` (1), `bias` (true), `batch_first` (false), `dropout`
-- (0: applied to the outputs of every layer but the last, in training mode),
-- `bidirectional` (false), `dtype`, and `proj_size` (0)
-- @usage local lstm = nn.LSTM(10, 20, {num_layers = 2, batch_first = true})
-- local out, state = lstm(lt.randn(4, 7, 10))   -- out {4, 7, 20}; state[1], state[2] {2, 4, 20}
local LSTM = RNNBase:extend("LSTM")
R.LSTM = LSTM
function LSTM:__init(input_size, hidden_size, opts)
  RNNBase.__init(self, "LSTM", input_size, hidden_size, opts)
end

--- Gated recurrent unit.
--
-- Shapes: input `(L, N, input_size)`, or `(N, L, input_size)` with `batch_first`, or
-- unbatched `(L, input_size)`; output `(L, N, D * H_out)` (batch first as the input) with D = 2
-- when bidirectional; states `(num_layers * D, N, H)` (`(num_layers * D, H)` unbatched).
-- `forward(input, h0)` returns `output, h_n`.
-- @function GRU
-- @int input_size
-- @int hidden_size H
-- @tparam[opt] table opts `num_layers` (1), `bias` (true), `batch_first` (false), `dropout`
-- (0: applied to the outputs of every layer but the last, in training mode),
-- `bidirectional` (false), `dtype`
local GRU = RNNBase:extend("GRU")
R.GRU = GRU
function GRU:__init(input_size, hidden_size, opts)
  RNNBase.__init(self, "GRU", input_size, hidden_size, opts)
end

return R
