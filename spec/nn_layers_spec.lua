-- Every layer and loss against PyTorch (fixtures from spec/fixtures/gen_nn_layers.py): outputs,
-- input gradients and parameter gradients in float32 (rtol 1e-5) and float64 (rtol 1e-9), a
-- float64 gradcheck per case, bad-input errors, default initialisation, nn.init and dropout.
local lt = require "lantern"
local nn = lt.nn
local F = nn.functional
local cases = require "fixtures.nn_layers"

local function mk(t, dtype)
  local x
  if #t.shape == 0 then
    x = lt.tensor(t.data[1], { dtype = t.dtype })
  else
    x = lt.tensor(t.data, { dtype = t.dtype }):reshape(t.shape)
  end
  if dtype and t.dtype == "float64" then x = x:to(dtype) end
  return x
end

-- |a - r| <= rtol * (|r| + max|r|) elementwise (relative to the element and the tensor's scale).
local function check(a, ref, rtol, what)
  assert.is_true(lt.is_tensor(a), what .. ": expected a tensor")
  local want = ref.shape
  local got = a:size()
  if #got ~= #want then error(what .. ": shape " .. table.concat(got, "x") .. " vs " .. table.concat(want, "x"), 2) end
  for i = 1, #want do
    if got[i] ~= want[i] then error(what .. ": shape " .. table.concat(got, "x") .. " vs " .. table.concat(want, "x"), 2) end
  end
  local x = a:double():reshape(-1):tolist()
  if ref.dtype ~= "float64" then
    if ref.dtype == "bool" then x = a:reshape(-1):tolist() else x = a:reshape(-1):tolist() end
    for i = 1, #x do
      if x[i] ~= ref.data[i] then error(string.format("%s: element %d is %s, expected %s", what, i, tostring(x[i]), tostring(ref.data[i])), 2) end
    end
    return
  end
  local scale = 0
  for i = 1, #ref.data do scale = math.max(scale, math.abs(ref.data[i])) end
  for i = 1, #x do
    local r = ref.data[i]
    if not (math.abs(x[i] - r) <= rtol * (math.abs(r) + scale)) then
      error(string.format("%s: element %d is %.10g, expected %.10g (rtol %g)", what, i, x[i], r, rtol), 2)
    end
  end
end

local env = setmetatable({ nn = nn, lt = lt, F = F }, { __index = _G })

local function build(c, dtype)
  local m = assert(load("return " .. c.ctor, c.name, "t", env))()
  m:to(dtype)
  local sd = nn.OrderedDict()
  for _, kv in ipairs(c.state) do sd[kv[1]] = mk(kv[2]) end
  m:load_state_dict(sd)
  if not c.train then m:eval() end
  local fwd = assert(load("local m, x = ...; " .. c.fwd, c.name .. " fwd", "t", env))
  return m, fwd
end

local function inputs(c, dtype)
  local xs = {}
  for i, t in ipairs(c.inputs) do
    xs[i] = mk(t, dtype)
    if c.rg[i] then xs[i]:requires_grad_(true) end
  end
  return xs
end

local function run_case(c, dtype, rtol)
  local m, fwd = build(c, dtype)
  local xs = inputs(c, dtype)
  local outs = fwd(m, xs)
  assert.are.equal(#c.outs, #outs, c.name .. ": number of outputs")
  local total
  for i, ref in ipairs(c.outs) do
    check(outs[i], ref, rtol, c.name .. " output " .. i)
    if ref.dtype == "float64" then
      local term = (outs[i] * mk(c.g[i], dtype)):sum()
      total = total and (total + term) or term
    end
  end
  if total and total.requires_grad then total:backward() end
  for i, g in ipairs(c.xgrad) do
    if g then check(xs[i].grad, g, rtol, c.name .. " grad of input " .. i) end
  end
  local seen = {}
  for name, p in m:named_parameters() do seen[name] = p end
  for _, kv in ipairs(c.pgrad) do
    local p = seen[kv[1]]
    assert.is_truthy(p, c.name .. ": no parameter " .. kv[1])
    check(p.grad, kv[2], rtol, c.name .. " grad of " .. kv[1])
  end
  if c.after then
    local bufs = {}
    for name, b in m:named_buffers() do bufs[name] = b end
    for _, kv in ipairs(c.after) do check(bufs[kv[1]], kv[2], rtol, c.name .. " buffer " .. kv[1] .. " after forward") end
  end
end

describe("layers and losses against PyTorch", function()
  for _, c in ipairs(cases) do
    it(c.name .. " (float32)", function() run_case(c, "float32", 1e-5) end)
    it(c.name .. " (float64)", function() run_case(c, "float64", 1e-9) end)
  end
end)

describe("float64 gradcheck", function()
  for _, c in ipairs(cases) do
    if c.gradcheck then
      it(c.name, function()
        local m, fwd = build(c, "float64")
        local xs = inputs(c, "float64")
        local diff = {}
        for i, x in ipairs(xs) do if c.rg[i] then diff[#diff + 1] = x end end
        for _, p in ipairs(m:parameters()) do diff[#diff + 1] = p end
        if #diff == 0 then return end
        local function fn()
          local outs = fwd(m, xs)
          local flat = {}
          for i, o in ipairs(outs) do
            if c.outs[i].dtype == "float64" then flat[#flat + 1] = o:reshape(-1) end
          end
          return lt.cat(flat, 1)
        end
        assert.is_true(lt.autograd.gradcheck(fn, diff))
      end)
    end
  end
end)

-------------------------------------------------------------------------------- bad input
local support = require "support"
local expect_error = support.expect_error

local function snapshot(m)
  local s = {}
  for k, v in pairs(m:state_dict()) do s[k] = v:clone() end
  return s
end
local function unchanged(m, s)
  for k, v in pairs(m:state_dict()) do
    assert.are.same(s[k]:double():reshape(-1):tolist(), v:double():reshape(-1):tolist(), k)
  end
end

describe("bad input gives clear errors and leaves the module unchanged", function()
  it("wrong rank or feature count", function()
    local lin = nn.Linear(4, 2)
    local s = snapshot(lin)
    expect_error(function() lin(lt.randn(3, 5)) end, "Linear", "[3, 5]", "in_features=4")
    expect_error(function() lin(lt.tensor(1.0)) end, "Linear")
    expect_error(function() lin("x") end, "Linear: expected a Tensor input")
    unchanged(lin, s)
    local conv = nn.Conv2d(3, 4, 3)
    expect_error(function() conv(lt.randn(3, 5)) end, "conv2d", "4D", "[3, 5]")
    expect_error(function() conv(lt.randn(1, 2, 5, 5)) end, "conv2d", "3 channels", "2 channels")
    expect_error(function() nn.Conv1d(2, 2, 3)(lt.randn(1, 3, 5)) end, "conv1d", "channels")
    expect_error(function() nn.ConvTranspose2d(2, 3, 3)(lt.randn(1, 3, 4, 4)) end, "conv_transpose2d", "channels")
    local bn = nn.BatchNorm2d(3)
    s = snapshot(bn)
    expect_error(function() bn(lt.randn(2, 3, 4)) end, "BatchNorm2d", "expected 4D input (got 3D input")
    expect_error(function() bn(lt.randn(2, 4, 3, 3)) end, "BatchNorm2d", "3 channels", "[2, 4, 3, 3]")
    expect_error(function() nn.BatchNorm1d(3)(lt.randn(2, 3, 4, 5)) end, "BatchNorm1d", "expected 2D or 3D input")
    expect_error(function() nn.BatchNorm1d(3)(lt.randn(1, 3)) end, "Expected more than 1 value per channel when training")
    expect_error(function() bn(lt.randn(1, 3, 1, 1)) end, "Expected more than 1 value per channel when training")
    unchanged(bn, s)
    assert.are.equal(0, bn.num_batches_tracked:item())
    expect_error(function() nn.LayerNorm(4)(lt.randn(2, 5)) end, "layer_norm", "normalized_shape")
    expect_error(function() nn.GroupNorm(2, 4)(lt.randn(2, 6, 3)) end, "GroupNorm", "4 channels")
    expect_error(function() nn.RMSNorm(3)(lt.randn(2, 4)) end, "rms_norm")
    expect_error(function() nn.MaxPool2d(2)(lt.randn(4)) end, "max_pool2d", "3D or 4D")
    expect_error(function() nn.AvgPool2d(2)(lt.randn(4, 4)) end, "avg_pool2d")
    expect_error(function() nn.LSTM(3, 4)(lt.randn(5, 2, 4)) end, "LSTM", "input_size")
    expect_error(function() nn.GRU(3, 4)(lt.randn(5, 2, 3), lt.randn(2, 2, 4)) end, "GRU", "hidden size")
    expect_error(function() nn.MultiheadAttention(8, 2)(lt.randn(3, 1, 6), lt.randn(3, 1, 6), lt.randn(3, 1, 6)) end,
      "MultiheadAttention", "embedding dimension of 8")
    expect_error(function() nn.Embedding(5, 2)(lt.tensor { 1.5 }) end, "embedding")
    expect_error(function() nn.Embedding(5, 2)(lt.tensor { 6 }) end, "embedding")
  end)

  it("bad constructor arguments", function()
    expect_error(function() nn.Conv2d(3, 4, 3, { groups = 2 }) end, "Conv2d", "divisible by groups")
    expect_error(function() nn.Conv2d(3, 4, 3, { stride = 2, padding = "same" }) end, "padding='same'")
    expect_error(function() nn.Conv2d(3, 4, 3, { padding = "full" }) end, "Invalid padding string")
    expect_error(function() nn.Dropout(1.5) end, "dropout probability has to be between 0 and 1")
    expect_error(function() nn.Embedding(5, 2, { padding_idx = 6 }) end, "Padding_idx must be within num_embeddings")
    expect_error(function() nn.MultiheadAttention(6, 4) end, "embed_dim must be divisible by num_heads")
    expect_error(function() nn.GroupNorm(3, 4) end, "divisible by num_groups")
    expect_error(function() nn.MSELoss { reduction = "avg" } end, "reduction must be 'mean', 'sum' or 'none'")
  end)

  it("load_state_dict with a wrong shape", function()
    local conv = nn.Conv2d(2, 3, 3)
    local s = snapshot(conv)
    local sd = conv:state_dict()
    sd.weight = lt.zeros(3, 2, 5, 5)
    expect_error(function() conv:load_state_dict(sd) end,
      "size mismatch for weight: copying a param with shape torch.Size([3, 2, 5, 5]) from checkpoint, " ..
      "the shape in current model is torch.Size([3, 2, 3, 3]).")
    unchanged(conv, s)
  end)

  it("losses with mismatched targets", function()
    expect_error(function() F.cross_entropy(lt.randn(3, 4), lt.tensor { 1, 2 }) end, "cross_entropy", "target")
    expect_error(function() F.cross_entropy(lt.randn(3, 4), lt.tensor { 1, 2, 5 }) end, "out of bounds")
    -- the target's sizes compared one by one, the class dim skipped
    local ok, err = pcall(F.cross_entropy, lt.randn(2, 4, 5), lt.ones(2, 6, { dtype = "int64" }))
    assert.is_false(ok)
    assert.matches("cross_entropy: expected target of shape [2, 5] (class indices) for input of shape "
      .. "[2, 4, 5], got target of shape [2, 6]", err, 1, true)
    ok, err = pcall(F.cross_entropy, lt.randn(2, 4, 5), lt.ones(2, 5, 1, { dtype = "int64" }))
    assert.is_false(ok)
    assert.matches("got target of shape [2, 5, 1]", err, 1, true)
    ok = pcall(F.cross_entropy, lt.randn(2, 4, 5), lt.ones(2, 5, { dtype = "int64" }))
    assert.is_true(ok)
    expect_error(function() F.nll_loss(lt.randn(3, 4), lt.randn(3)) end, "nll_loss", "int64")
    expect_error(function() F.binary_cross_entropy(lt.rand(3), lt.rand(4)) end, "binary_cross_entropy", "target size")
    expect_error(function() F.binary_cross_entropy_with_logits(lt.rand(3), lt.rand(2, 3)) end, "target size")
    expect_error(function() nn.MSELoss()(lt.randn(2), 3) end, "MSELoss: expected target to be a Tensor")
  end)
end)

-------------------------------------------------------------------------------- initialisation
local function bounds(t)
  return t:min():item(), t:max():item()
end

describe("default initialisation draws from PyTorch's distributions", function()
  it("Linear and Conv: U(+-1/sqrt(fan_in)) for weight and bias", function()
    lt.manual_seed(3)
    local lin = nn.Linear(400, 30)
    local lo, hi = bounds(lin.weight)
    assert.is_true(lo >= -0.05 and hi <= 0.05)
    assert.is_true(hi > 0.049 and lo < -0.049)
    lo, hi = bounds(lin.bias)
    assert.is_true(lo >= -0.05 and hi <= 0.05)
    local std = lin.weight:std():item()
    assert.is_true(math.abs(std - 0.05 / math.sqrt(3)) < 0.002)
    local conv = nn.Conv2d(4, 6, 3, { groups = 2 })
    local b = 1 / math.sqrt(18)
    lo, hi = bounds(conv.weight)
    assert.is_true(lo >= -b and hi <= b and hi > 0.8 * b)
    lo, hi = bounds(conv.bias)
    assert.is_true(lo >= -b and hi <= b)
    local ct = nn.ConvTranspose2d(4, 6, 3, { groups = 2 })   -- fan_in from dim 2: 3 * 9
    lo, hi = bounds(ct.weight)
    assert.is_true(hi <= 1 / math.sqrt(27) and hi > 0.8 / math.sqrt(27))
  end)

  it("Embedding N(0,1) with the padding row zeroed; norms ones and zeros", function()
    lt.manual_seed(4)
    local e = nn.Embedding(200, 50, { padding_idx = -1 })
    assert.are.equal(200, e.padding_idx)
    assert.are.equal(0, e.weight[200]:abs():sum():item())
    assert.is_true(math.abs(e.weight:std():item() - 1) < 0.03)
    local bn = nn.BatchNorm1d(3)
    assert.are.same({ 1, 1, 1 }, bn.weight:tolist())
    assert.are.same({ 0, 0, 0 }, bn.bias:tolist())
    assert.are.same({ 0, 0, 0 }, bn.running_mean:tolist())
    assert.are.same({ 1, 1, 1 }, bn.running_var:tolist())
    assert.are.equal("int64", bn.num_batches_tracked.dtype)
    assert.are.same({ 1, 1 }, nn.LayerNorm(2).weight:tolist())
  end)

  -- "name:AxB" for each parameter, each checked to lie within +-bound
  local function shapes_within(m, bound)
    local names = {}
    for n, p in m:named_parameters() do
      names[#names + 1] = n .. ":" .. table.concat(p:size(), "x")
      local lo, hi = bounds(p)
      assert.is_true(lo >= -bound and hi <= bound)
    end
    return names
  end

  it("LSTM/GRU U(+-1/sqrt(hidden)) with PyTorch's names and shapes", function()
    local names = shapes_within(nn.LSTM(3, 16, { num_layers = 2, bidirectional = true }), 0.25)
    assert.are.same({ "weight_ih_l0:64x3", "weight_hh_l0:64x16", "bias_ih_l0:64", "bias_hh_l0:64",
      "weight_ih_l0_reverse:64x3", "weight_hh_l0_reverse:64x16", "bias_ih_l0_reverse:64", "bias_hh_l0_reverse:64",
      "weight_ih_l1:64x32", "weight_hh_l1:64x16", "bias_ih_l1:64", "bias_hh_l1:64",
      "weight_ih_l1_reverse:64x32", "weight_hh_l1_reverse:64x16", "bias_ih_l1_reverse:64",
      "bias_hh_l1_reverse:64" }, names)
  end)

  it("LSTM proj_size: PyTorch's names, shapes, order and checks", function()
    local l = nn.LSTM(3, 16, { num_layers = 2, proj_size = 4 })
    local names = shapes_within(l, 0.25)
    assert.are.same({ "weight_ih_l0:64x3", "weight_hh_l0:64x4", "bias_ih_l0:64", "bias_hh_l0:64",
      "weight_hr_l0:4x16", "weight_ih_l1:64x4", "weight_hh_l1:64x4", "bias_ih_l1:64", "bias_hh_l1:64",
      "weight_hr_l1:4x16" }, names)
    local out, hc = l(lt.randn(5, 2, 3))
    assert.are.same({ 5, 2, 4 }, out:size())
    assert.are.same({ 2, 2, 4 }, hc[1]:size())
    assert.are.same({ 2, 2, 16 }, hc[2]:size())
    assert.are.equal("LSTM(3, 16, proj_size=4, num_layers=2)", tostring(l))
    assert.has_error(function() nn.GRU(3, 4, { proj_size = 2 }) end,
      "GRU: proj_size argument is only supported for LSTM, not RNN or GRU")
    assert.has_error(function() nn.LSTM(3, 4, { proj_size = 4 }) end,
      "LSTM: proj_size has to be smaller than hidden_size")
    assert.has_error(function() l(lt.randn(5, 2, 3), { lt.zeros(2, 2, 16), lt.zeros(2, 2, 16) }) end,
      "LSTM: Expected hidden size (2, 2, 4), got [2, 2, 16]")
  end)

  it("MultiheadAttention and TransformerEncoderLayer use PyTorch's names", function()
    local t = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    assert.are.same({ "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
      "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
      "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias" }, nn.keys(t:state_dict()))
    assert.are.same({ 0 }, { t.self_attn.in_proj_bias:abs():sum():item() })
    assert.are.equal(0, t.self_attn.out_proj.bias:abs():sum():item())
    local b = math.sqrt(6 / (24 + 8))
    local lo, hi = bounds(t.self_attn.in_proj_weight)
    assert.is_true(lo >= -b and hi <= b)
  end)

  it("MultiheadAttention add_bias_kv registers bias_k and bias_v where PyTorch does", function()
    lt.manual_seed(5)
    local m = nn.MultiheadAttention(64, 4, { add_bias_kv = true, add_zero_attn = true })
    assert.are.same({ "in_proj_weight", "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
      "out_proj.bias" }, nn.keys(m:state_dict()))
    assert.are.same({ 1, 1, 64 }, m.bias_k:size())
    -- xavier_normal_ on (1, 1, 64): fan_in = fan_out = 64, std = 1/8
    local std = lt.cat({ m.bias_k:reshape(-1), m.bias_v:reshape(-1) }):std():item()
    assert.is_true(std > 0.09 and std < 0.16, std)
    local x = lt.randn(3, 2, 64)
    local _, w = m(x, x, x)
    assert.are.same({ 2, 3, 5 }, w:size())   -- three keys, bias_k and the zero key
  end)
end)

describe("nn.init", function()
  local init = nn.init

  it("calculate_gain", function()
    assert.are.equal(1, init.calculate_gain("linear"))
    assert.are.equal(1, init.calculate_gain("conv2d"))
    assert.are.equal(1, init.calculate_gain("sigmoid"))
    assert.is_true(math.abs(init.calculate_gain("tanh") - 5 / 3) < 1e-15)
    assert.is_true(math.abs(init.calculate_gain("relu") - math.sqrt(2)) < 1e-15)
    assert.is_true(math.abs(init.calculate_gain("leaky_relu") - 1.4141428569978354) < 1e-15)
    assert.is_true(math.abs(init.calculate_gain("leaky_relu", math.sqrt(5)) - 0.5773502691896257) < 1e-15)
    assert.are.equal(0.75, init.calculate_gain("selu"))
    expect_error(function() init.calculate_gain("foo") end, "Unsupported nonlinearity foo")
    expect_error(function() init.calculate_gain("leaky_relu", true) end, "not a valid number")
  end)

  it("fan rules", function()
    local fi, fo = init._calculate_fan_in_and_fan_out(lt.empty(8, 3, 3, 5))
    assert.are.same({ 45, 120 }, { fi, fo })
    expect_error(function() init.xavier_uniform_(lt.empty(3)) end,
      "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    expect_error(function() init.kaiming_uniform_(lt.empty(3, 3), 0, "fan_avg") end,
      "Mode fan_avg not supported, please use one of ['fan_in', 'fan_out']")
  end)

  it("xavier and kaiming bounds and spreads", function()
    lt.manual_seed(5)
    local w = lt.empty(300, 200)
    init.xavier_uniform_(w, 2)
    local a = 2 * math.sqrt(6 / 500)
    local lo, hi = bounds(w)
    assert.is_true(lo >= -a and hi <= a and hi > 0.99 * a)
    init.xavier_normal_(w)
    assert.is_true(math.abs(w:std():item() - math.sqrt(2 / 500)) < 0.002)
    init.kaiming_uniform_(w, { nonlinearity = "relu" })
    local bound = math.sqrt(2) * math.sqrt(3 / 200)
    lo, hi = bounds(w)
    assert.is_true(lo >= -bound and hi <= bound and hi > 0.99 * bound)
    init.kaiming_normal_(w, 0, "fan_out", "relu")
    assert.is_true(math.abs(w:std():item() - math.sqrt(2 / 300)) < 0.002)
    -- a no-op that warns, as PyTorch does
    local z, got = lt.empty(0, 3), {}
    local old = lt.set_warnings(function(t) got[#got + 1] = t end)
    local ok = pcall(init.kaiming_uniform_, z)
    lt.set_warnings(old)
    assert.is_true(ok)
    assert.are.equal(1, #got)
    assert.matches("warning: init.kaiming_uniform_: Initializing zero-element tensors is a no-op",
      got[1], nil, true)
  end)

  it("uniform_, normal_, constant_, zeros_, ones_, eye_, dirac_", function()
    local t = lt.empty(1000)
    init.uniform_(t, -2, 3)
    local lo, hi = bounds(t)
    assert.is_true(lo >= -2 and hi <= 3)
    init.normal_(t, 5, 0.1)
    assert.is_true(math.abs(t:mean():item() - 5) < 0.02)
    init.constant_(t, 0.25)
    assert.are.equal(0.25, t:max():item())
    init.zeros_(t)
    assert.are.equal(0, t:abs():max():item())
    init.ones_(t)
    assert.are.equal(1000, t:sum():item())
    local e = lt.empty(3, 5)
    init.eye_(e)
    assert.are.same({ { 1, 0, 0, 0, 0 }, { 0, 1, 0, 0, 0 }, { 0, 0, 1, 0, 0 } }, e:tolist())
    expect_error(function() init.eye_(lt.empty(2, 2, 2)) end, "Only tensors with 2 dimensions are supported")
    local d = lt.empty(4, 2, 3, 3)
    init.dirac_(d, 2)
    assert.are.equal(4, d:sum():item())
    assert.are.equal(1, d[1][1][2][2]:item())
    assert.are.equal(1, d[4][2][2][2]:item())
    -- a dirac conv is the identity
    local x = lt.randn(1, 2, 5, 5)
    local y = F.conv2d(x, lt.empty(2, 2, 3, 3):zero_() + init.dirac_(lt.empty(2, 2, 3, 3)), nil, { padding = 1 })
    assert.is_true((y - x):abs():max():item() < 1e-6)
  end)

  it("runs under no_grad on parameters that require grad", function()
    local lin = nn.Linear(3, 3)
    init.orthogonal_(lin.weight)
    init.trunc_normal_(lin.bias, 0, 0.02)
    assert.is_true(lin.weight.requires_grad)
    assert.is_true(lin.weight.is_leaf)
    assert.is_nil(lin.weight.grad_fn)
  end)

  it("orthogonal_ gives (semi-)orthogonal matrices, including conv shapes", function()
    for _, shape in ipairs({ { 200, 100 }, { 100, 200 }, { 6, 3, 2, 2 } }) do
      local w = lt.empty(shape)
      init.orthogonal_(w, 2)
      local m = w:double():reshape(shape[1], -1)
      local prod, n
      if m:size(1) >= m:size(2) then prod, n = m:t():matmul(m), m:size(2) else prod, n = m:matmul(m:t()), m:size(1) end
      local err = (prod - lt.eye(n, { dtype = "float64" }) * 4):abs():max():item()
      assert.is_true(err < 1e-4, "orthogonality error " .. err)
    end
    expect_error(function() init.orthogonal_(lt.empty(3)) end, "Only tensors with 2 or more dimensions")
  end)

  it("trunc_normal_ stays within [a, b] with the truncated spread", function()
    lt.manual_seed(6)
    local t = lt.empty(20000)
    init.trunc_normal_(t)
    local lo, hi = bounds(t)
    assert.is_true(lo >= -2 and hi <= 2)
    assert.is_true(math.abs(t:std():item() - 0.8796) < 0.02)
    init.trunc_normal_(t, 1, 0.5, 0.5, 3)
    lo, hi = bounds(t)
    assert.is_true(lo >= 0.5 and hi <= 3)
    -- erfinv matches a few known values
    local x = lt.tensor({ -0.9, -0.5, 0, 0.3, 0.999 }, { dtype = "float64" })
    local want = { -1.1630871536766743, -0.4769362762044699, 0, 0.27246271472675443, 2.3267537655135246 }
    local got = init._erfinv(x):tolist()
    for i = 1, 5 do assert.is_true(math.abs(got[i] - want[i]) < 1e-10, "erfinv " .. i) end
  end)

  it("accepts a generator for reproducible draws", function()
    local g1, g2 = lt.Generator(), lt.Generator()
    g1:manual_seed(9)
    g2:manual_seed(9)
    local a, b = lt.empty(5, 4), lt.empty(5, 4)
    init.kaiming_uniform_(a, { a = math.sqrt(5), generator = g1 })
    init.kaiming_uniform_(b, { a = math.sqrt(5), generator = g2 })
    assert.are.same(a:tolist(), b:tolist())
    init.xavier_normal_(a, 1, { generator = g1 })
    init.xavier_normal_(b, 1, { generator = g2 })
    assert.are.same(a:tolist(), b:tolist())
    init.orthogonal_(a, 1, { generator = g1 })
    init.orthogonal_(b, 1, { generator = g2 })
    assert.are.same(a:tolist(), b:tolist())
  end)
end)

-------------------------------------------------------------------------------- dropout
describe("Dropout", function()
  it("zeroes with probability p, scales by 1/(1-p), and passes gradients through the mask", function()
    lt.manual_seed(11)
    local d = nn.Dropout(0.25)
    local x = lt.ones(4000, { requires_grad = true })
    local y = d(x)
    local kept = y:ne(0):sum():item()
    assert.is_true(math.abs(kept / 4000 - 0.75) < 0.03)
    assert.is_true(math.abs(y:max():item() - 1 / 0.75) < 1e-6)
    y:sum():backward()
    local g, yv = x.grad:tolist(), y:detach():tolist()
    for i = 1, 4000, 97 do assert.are.equal(yv[i], g[i]) end
    d:eval()
    assert.are.same(x:detach():tolist(), d(x):detach():tolist())
    assert.are.same({ 0, 0 }, nn.Dropout(1.0)(lt.ones(2)):tolist())
    assert.are.same({ 1, 1 }, nn.Dropout(0)(lt.ones(2)):tolist())
  end)

  it("Dropout2d zeroes whole channels", function()
    lt.manual_seed(12)
    local y = nn.Dropout2d(0.5)(lt.ones(8, 16, 3, 3))
    local per = y:sum(4):sum(3):reshape(-1):tolist()
    for _, v in ipairs(per) do assert.is_true(v == 0 or math.abs(v - 18) < 1e-5) end
  end)

  it("F.dropout2d is the module's function, and unbatched input drops per channel", function()
    lt.manual_seed(3)
    local a = nn.Dropout2d(0.25)(lt.ones(4, 6, 2, 2))
    lt.manual_seed(3)
    assert.is_true(lt.equal(a, F.dropout2d(lt.ones(4, 6, 2, 2), 0.25)))
    local y = F.dropout2d(lt.ones(4, 8, 3), 0.5)   -- (N, C, L): one draw per sample and channel
    local kept = 0
    for n = 1, 4 do
      for c = 1, 8 do
        local s = y[n][c]:sum():item()
        assert.is_true(s == 0 or s == 6)
        if s == 6 then kept = kept + 1 end
      end
    end
    assert.is_true(kept > 4 and kept < 28)
    assert.are.equal(F.dropout2d(lt.ones(2, 3, 4), 0.5, false):sum():item(), 24)
    assert.has_error(function() F.dropout2d(lt.ones(3, 4), 0.5) end,
      "dropout2d: expected 3D or 4D input, got input of size [3, 4]")
  end)

  it("is reproducible from a generator", function()
    local d = nn.Dropout(0.5)
    local g = lt.Generator()
    d.generator = g
    g:manual_seed(1)
    local a = d(lt.ones(50)):tolist()
    g:manual_seed(1)
    assert.are.same(a, d(lt.ones(50)):tolist())
  end)
end)

-------------------------------------------------------------------------------- functional
describe("nn.functional mirrors the modules", function()
  it("F.linear, F.conv2d, F.max_pool2d, F.batch_norm, F.layer_norm, F.embedding", function()
    local lin = nn.Linear(3, 2)
    local x = lt.randn(4, 3)
    assert.are.same(lin(x):tolist(), F.linear(x, lin.weight, lin.bias):tolist())
    local conv = nn.Conv2d(2, 3, 3, { padding = 1 })
    local xi = lt.randn(1, 2, 4, 4)
    assert.are.same(conv(xi):tolist(), F.conv2d(xi, conv.weight, conv.bias, { padding = 1 }):tolist())
    assert.are.same(nn.MaxPool2d(2)(xi):tolist(), F.max_pool2d(xi, 2):tolist())
    local rm, rv = lt.zeros(2), lt.ones(2)
    local bn = F.batch_norm(xi, rm, rv, nil, nil, true, 0.5, 1e-5)
    assert.is_true(bn:mean():abs():item() < 1e-5)
    assert.is_true(rm:abs():sum():item() > 0)   -- running statistics updated in place
    local ln = F.layer_norm(x, { 3 })
    assert.is_true(ln:mean(2):abs():max():item() < 1e-5)
    local w = lt.randn(5, 2)
    assert.are.same(w[3]:tolist(), F.embedding(lt.tensor { 3 }, w)[1]:tolist())
    assert.are.same(F.relu(x):tolist(), x:relu():tolist())
    local sdpa = F.scaled_dot_product_attention(lt.randn(2, 3, 4), lt.randn(2, 5, 4), lt.randn(2, 5, 4))
    assert.are.same({ 2, 3, 4 }, sdpa:size())
    local padded = F.pad(lt.ones(2, 2), { 1, 0, 0, 2 })
    assert.are.same({ 4, 3 }, padded:size())
    assert.are.equal(4, padded:sum():item())
  end)

  it("F.linear takes one addmm from the bias for 2-D and contiguous 3-D input, as PyTorch 1.13",
    function()
      lt.manual_seed(4)
      local w, b = lt.randn(6, 5, { dtype = "float64" }), lt.randn(6, { dtype = "float64" })
      local function same(t) return t end
      local function turned(t) return t:permute(3, 2, 1) end   -- (5, 7, 2) -> non-contiguous (2, 7, 5)
      for _, case in ipairs {
        { x = lt.randn(7, 5, { dtype = "float64" }), view = same, fn = "AddmmBackward0" },
        { x = lt.randn(2, 7, 5, { dtype = "float64" }), view = same, fn = "ViewBackward0" },
        { x = lt.randn(5, 7, 2, { dtype = "float64" }), view = turned, fn = "AddBackward0" },
        { x = lt.randn(2, 2, 3, 5, { dtype = "float64" }), view = same, fn = "AddBackward0" },
      } do
        local x, wr, br = case.x:clone():requires_grad_(), w:clone():requires_grad_(),
            b:clone():requires_grad_()
        local y = F.linear(case.view(x), wr, br)
        assert.are.equal(case.fn, y.grad_fn)
        -- the composed formula, on copies
        local x2, w2, b2 = case.x:clone():requires_grad_(), w:clone():requires_grad_(),
            b:clone():requires_grad_()
        local y2 = case.view(x2):matmul(w2:t()) + b2
        assert.are.same(y2.shape, y.shape)
        assert.is_true((y - y2):abs():max():item() < 1e-12)
        local g = lt.randn(table.unpack(y.shape)):double()
        y:backward(g)
        y2:backward(g)
        for _, p in ipairs { { x, x2 }, { wr, w2 }, { br, b2 } } do
          assert.is_true((p[1].grad - p[2].grad):abs():max():item() < 1e-12)
        end
      end
      -- float64 gradcheck through the addmm path
      local gc = lt.autograd.gradcheck
      assert.is_true(gc(function(x_, w_, b_) return F.linear(x_, w_, b_) end,
        { lt.randn(2, 3, 5, { dtype = "float64", requires_grad = true }),
          w:clone():requires_grad_(), b:clone():requires_grad_() }))
    end)

  it("pads with a constant: the value around the (cropped) input, and the gradient inside", function()
    local x = lt.tensor({ { 1.0, 2.0, 3.0 }, { 4.0, 5.0, 6.0 } })
    assert.are.same({ { 9, 9, 9, 9, 9 }, { 9, 1, 2, 3, 9 }, { 9, 4, 5, 6, 9 } },
      F.pad(x, { 1, 1, 1, 0 }, "constant", 9):tolist())
    -- a negative amount crops first; three dims at once; integers keep their dtype
    assert.are.same({ { 2, 3, 0, 0 } }, F.pad(x, { -1, 2, 0, -1 }):tolist())
    local y = F.pad(lt.arange(1, 5):view(1, 2, 2), { 0, 1, 1, 0, 1, 1 }, "constant", -1)
    assert.are.equal("int64", y.dtype)
    assert.are.same({ { { -1, -1, -1 }, { -1, -1, -1 }, { -1, -1, -1 } },
                      { { -1, -1, -1 }, { 1, 2, -1 }, { 3, 4, -1 } },
                      { { -1, -1, -1 }, { -1, -1, -1 }, { -1, -1, -1 } } }, y:tolist())
    local xg = lt.randn(2, 3, 4, { dtype = "float64", requires_grad = true })
    local g = lt.randn(2, 5, 7, { dtype = "float64" })
    F.pad(xg, { 2, 1, 0, 2 }, "constant", 0.5):backward(g)
    assert.are.same(g:narrow(2, 1, 3):narrow(3, 3, 4):tolist(), xg.grad:tolist())
    assert.is_true(lt.autograd.gradcheck(function(x_) return F.pad(x_, { 1, 2, -1, 1 }) end,
      { lt.randn(2, 3, 4, { dtype = "float64", requires_grad = true }) }))
  end)

  it("pads by reflection, replication and wrapping, and checks the amounts", function()
    local x = lt.tensor({ { 1.0, 2.0, 3.0 } })
    assert.are.same({ { 3, 2, 1, 2, 3, 2 } }, F.pad(x, { 2, 1 }, "reflect"):tolist())
    assert.are.same({ { 1, 1, 1, 2, 3, 3 } }, F.pad(x, { 2, 1 }, "replicate"):tolist())
    assert.are.same({ { 2, 3, 1, 2, 3, 1 } }, F.pad(x, { 2, 1 }, "circular"):tolist())
    local function fails(fn, text)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.truthy(tostring(err):find(text, 1, true), err)
    end
    fails(function() F.pad(x, { 3, 0 }, "reflect") end, "padding size should be less than the corresponding input dimension")
    fails(function() F.pad(x, { 4, 0 }, "circular") end, "wrapping around more than once")
    -- a negative amount crops first, then the other side is padded from what is left
    local y = lt.tensor({ { 1.0, 2.0, 3.0, 4.0 } })
    assert.are.same({ { 2, 3, 4, 2, 3 } }, F.pad(y, { -1, 2 }, "circular"):tolist())
    assert.are.same({ { 2, 3, 4, 4 } }, F.pad(y, { -1, 1 }, "replicate"):tolist())
    assert.are.same({ { 2, 3, 4, 3 } }, F.pad(y, { -1, 1 }, "reflect"):tolist())
    fails(function() F.pad(x, { 1, 1 }, "mirror") end, "pad: mode must be one of")
    fails(function() F.pad(x, { 1, 1 }, "reflect", 5) end, "doesn't take in value argument")
    fails(function() nn.Conv2d(1, 1, 3, { padding_mode = "mirror" }) end, "padding_mode must be one of")
    fails(function() nn.ConvTranspose2d(1, 1, 3, { padding_mode = "reflect" }) end,
      'Only "zeros" padding mode is supported for ConvTranspose2d')
    assert.truthy(tostring(nn.Conv2d(1, 1, 3, { padding = 1, padding_mode = "circular" })):find("padding_mode=circular", 1, true))
  end)

  it("losses agree between functional and module forms, with legacy reduction flags", function()
    local a, b = lt.randn(3, 4), lt.randn(3, 4)
    assert.are.equal(nn.MSELoss()(a, b):item(), F.mse_loss(a, b):item())
    assert.are.equal(F.mse_loss(a, b, { reduction = "sum" }):item(), F.mse_loss(a, b, { size_average = false }):item())
    assert.are.same({ 3, 4 }, F.l1_loss(a, b, { reduce = false }):size())
    -- numerically stable forms: huge logits give finite losses
    local big = lt.tensor { { 1000.0, -1000.0 } }
    assert.are.equal(0, F.cross_entropy(big, lt.tensor { 1 }):item())
    local bce = F.binary_cross_entropy_with_logits(lt.tensor { 200.0, -200.0 }, lt.tensor { 0.0, 1.0 })
    assert.is_true(math.abs(bce:item() - 200) < 1e-3)
    assert.is_true(math.abs(F.binary_cross_entropy(lt.tensor { 0.0 }, lt.tensor { 1.0 }):item() - 100) < 1e-4)
  end)
end)
