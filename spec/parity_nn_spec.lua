-- Issue 12, PyTorch parity on the Lua side, against spec/fixtures/gen_parity_nn.py: unknown
-- options are errors (naming the op, the key and the nearest known one), losses warn where
-- PyTorch warns and raise where it raises, custom Function backwards are checked as PyTorch
-- checks them, and the hints for model.forward(x) and integer input.
local lt = require "lantern"
local nn, F = lt.nn, lt.nn.functional
local warnings = require "lantern.warnings"
local fx = require "fixtures.parity_nn"

local function mk(t, dtype)
  local x
  if #t.shape == 0 then
    x = lt.tensor(t.data[1], { dtype = t.dtype or dtype or "float64" })
  else
    x = lt.tensor(t.data, { dtype = t.dtype or dtype or "float64" }):reshape(t.shape)
  end
  return x
end

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

-- a and the fixture tensor ref agree in shape and, elementwise, to rtol relative to max|ref|.
local function close(a, ref, what, rtol)
  rtol = rtol or 1e-12
  assert.is_true(lt.is_tensor(a), what .. ": expected a tensor")
  assert.are.same(ref.shape, a:size(), what .. ": shape")
  local got = a:double():reshape(-1):tolist()
  local scale = 0
  for _, v in ipairs(ref.data) do scale = math.max(scale, math.abs(v)) end
  for i, v in ipairs(ref.data) do
    if math.abs(got[i] - v) > rtol * (scale + 1e-300) + 1e-300 then
      error(string.format("%s: element %d is %.17g, PyTorch gives %.17g", what, i, got[i], v), 2)
    end
  end
end

-- Runs fn(...) with the warnings it issues captured (each call site starts unseen); returns the
-- warning texts without their "file:line: warning: " and fn's pcall results, packed.
local function capture(fn, ...)
  local got = {}
  warnings._reset()
  local old = lt.set_warnings(function(text) got[#got + 1] = text end)
  local res = table.pack(pcall(fn, ...))
  lt.set_warnings(old)
  warnings._reset()
  local msgs = {}
  for i, t in ipairs(got) do msgs[i] = t:match("^.-:%d+: warning: (.*)$") or t end
  return msgs, res, got
end

-- The code as a function of a chunk named "case" (not a tail call, so that an error raised at
-- the caller's level names the chunk's line).
local function run_lua(code)
  local env = setmetatable({ lt = lt, nn = nn, F = F }, { __index = _G })
  return assert(load("local r = " .. code .. "\nreturn r", "=case", "t", env))
end

-------------------------------------------------------------------------------- unknown options
describe("parity: unknown options are errors", function()
  it("every PyTorch TypeError case names the op, the key and the nearest known key", function()
    assert.is_true(#fx.unknown_options >= 30)
    for _, c in ipairs(fx.unknown_options) do
      assert.matches("^TypeError:", c.torch, nil, false, c.lua)
      local ok, err = pcall(run_lua(c.lua))
      assert.is_false(ok, c.lua .. " should raise")
      local want = c.op .. ": unknown option '" .. c.key .. "'"
      if c.near then
        want = want .. " (did you mean '" .. c.near .. "'?)"
        assert.are.equal("case:1: " .. want, err, c.lua)
      else
        -- no known name is close: the message lists them all
        assert.are.equal(1, select(2, err:gsub("^case:1: " .. want:gsub("%p", "%%%0") ..
          " %(expected one of [%w_, ]+%)$", "")), c.lua .. " -> " .. err)
      end
    end
  end)

  it("the same calls with the key spelt right succeed", function()
    for _, c in ipairs(fx.unknown_options) do
      if c.near then
        local code = c.lua:gsub("([{,] *)" .. c.key:gsub("%p", "%%%0") .. " =", "%1" .. c.near .. " =")
        assert.are_not.equal(c.lua, code)
        local ok, err = pcall(run_lua(code))
        assert.is_true(ok, code .. ": " .. tostring(err))
      end
    end
  end)

  -- Calls with no PyTorch twin (Lantern-only options, or names PyTorch 1.13 lacks).
  local LANTERN_ONLY = {
    { "F.scaled_dot_product_attention(lt.zeros(1, 2, 4), lt.zeros(1, 2, 4), lt.zeros(1, 2, 4), {is_casual = true})",
      "scaled_dot_product_attention", "is_casual", "is_causal" },
    { "F.dropout(lt.ones(3), 0.5, true, {generatr = lt.Generator()})", "dropout", "generatr", "generator" },
    { "F.dropout2d(lt.ones(1, 2, 3), 0.5, true, {generatr = lt.Generator()})", "dropout2d", "generatr", "generator" },
    { "F.embedding(lt.tensor{1}, lt.ones(3, 2), {max_nrom = 1})", "embedding", "max_nrom", "max_norm" },
    { "F.conv_transpose2d(lt.ones(1, 1, 3, 3), lt.ones(1, 1, 2, 2), nil, {strid = 2})", "conv_transpose2d", "strid", "stride" },
    { "F.kl_div(lt.zeros(2), lt.ones(2), {log_targt = true})", "kl_div", "log_targt", "log_target" },
    { "F.nll_loss(lt.zeros(2, 3), lt.tensor{1, 2}, {weigth = lt.ones(3)})", "nll_loss", "weigth", "weight" },
    { "F.binary_cross_entropy(lt.rand(2), lt.rand(2), {weigth = lt.ones(2)})", "binary_cross_entropy", "weigth", "weight" },
    { "F.huber_loss(lt.zeros(2), lt.zeros(2), {detla = 2})", "huber_loss", "detla", "delta" },
    { "F.l1_loss(lt.zeros(2), lt.zeros(2), {reduce_ = false})", "l1_loss", "reduce_", "reduce" },
    { "nn.Softmax{dm = 1}", "Softmax", "dm", "dim" },
    { "nn.GELU{aproximate = 'tanh'}", "GELU", "aproximate", "approximate" },
    { "nn.Dropout2d{pp = 0.1}", "Dropout2d", "pp", "p" },
    { "nn.BatchNorm2d(3, {track_running_stat = false})", "BatchNorm2d", "track_running_stat", "track_running_stats" },
    { "nn.RMSNorm(3, {ep = 1e-3})", "RMSNorm", "ep", "eps" },
    { "nn.KLDivLoss{log_targt = true}", "KLDivLoss", "log_targt", "log_target" },
    { "nn.NLLLoss{ignore_indx = 1}", "NLLLoss", "ignore_indx", "ignore_index" },
    { "nn.HuberLoss{detla = 2}", "HuberLoss", "detla", "delta" },
    { "nn.Linear(2, 2, {dtyp = 'float64'})", "Linear", "dtyp", "dtype" },
    { "nn.Embedding.from_pretrained(lt.ones(3, 2), {freze = false})", "Embedding.from_pretrained", "freze", "freeze" },
    { "nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8}), 1, {nrom = nn.LayerNorm(4)})",
      "TransformerEncoder", "nrom", "norm" },
    { "nn.MultiheadAttention(4, 2)(lt.zeros(3, 4), lt.zeros(3, 4), lt.zeros(3, 4), {need_weight = false})",
      "MultiheadAttention", "need_weight", "need_weights" },
    { "nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8})(lt.zeros(3, 4), {src_msk = lt.zeros(3, 3)})",
      "TransformerEncoderLayer", "src_msk", "src_mask" },
    { "nn.Linear(2, 2):to{dtyp = 'float64'}", "Module:to", "dtyp", "dtype" },
    { "nn.Linear(2, 2):parameters{recurs = false}", "parameters", "recurs", "recurse" },
    { "nn.Linear(2, 2):buffers{recurs = false}", "buffers", "recurs", "recurse" },
    { "nn.Linear(2, 2):named_modules{prefx = 'a'}", "named_modules", "prefx", "prefix" },
    { "nn.Linear(2, 2):named_buffers{prefx = 'a'}", "named_buffers", "prefx", "prefix" },
    { "nn.Linear(2, 2):register_buffer('b', lt.zeros(1), {persistant = false})", "register_buffer", "persistant", "persistent" },
    { "nn.init.trunc_normal_(lt.empty(3), {mea = 1})", "init.trunc_normal_", "mea", "mean" },
    { "nn.init.xavier_uniform_(lt.empty(3, 3), {gian = 2})", "init.xavier_uniform_", "gian", "gain" },
    { "nn.init.sparse_(lt.empty(3, 3), {sparsty = 0.5})", "init.sparse_", "sparsty", "sparsity" },
    { "nn.init.uniform_(lt.empty(3), {generatr = lt.Generator()})", "init.uniform_", "generatr", "generator" },
    { "lt.autograd.backward(lt.ones(2):requires_grad_():sum(), {retain_grph = true})", "backward", "retain_grph", "retain_graph" },
    { "lt.data.read_csv('/nonexistent.csv', {seperator = ';'})", "read_csv", "seperator", nil },
    { "lt.data.read_idx('/nonexistent.idx', {dtyp = 'float64'})", "read_idx", "dtyp", "dtype" },
    { "lt.load('/nonexistent.pt', {verify_cr = false})", "load", "verify_cr", "verify_crc" },
    { "lt.serialization.loads('', {map_dtyp = {}})", "loads", "map_dtyp", "map_dtype" },
    { "lt.safetensors.load('/nonexistent.safetensors', {verify = false})", "safetensors.load", "verify", nil },
    { "lt.load_module(nn.Linear(2, 2), '/nonexistent.pt', {stict = false})", "load_module", "stict", "strict" },
  }

  it("Lantern's own options and the names PyTorch 1.13 lacks are checked too", function()
    for _, c in ipairs(LANTERN_ONLY) do
      local code, op, key, near = c[1], c[2], c[3], c[4]
      local ok, err = pcall(run_lua(code))
      assert.is_false(ok, code)
      local want = "case:1: " .. op .. ": unknown option '" .. key .. "'"
      if near then
        assert.are.equal(want .. " (did you mean '" .. near .. "'?)", err, code)
      else
        assert.are.equal(want, err:sub(1, #want), code)
        assert.matches("%(expected one of ", err, nil, false, code)
      end
    end
  end)

  it("create_graph = false is accepted, true is refused by name", function()
    local x = lt.ones(2):requires_grad_()
    local g = lt.autograd.grad((x * 2):sum(), x, { create_graph = false })
    assert.are.same({ 2, 2 }, g[1]:tolist())
    local ok, err = pcall(lt.autograd.grad, (x * 2):sum(), x, { create_graph = true })
    assert.is_false(ok)
    assert.matches("grad: create_graph = true is not supported", err, nil, true)
    lt.autograd.backward((x * 3):sum(), { create_graph = false })
    assert.are.same({ 3, 3 }, x.grad:tolist())
    ok, err = pcall(lt.autograd.backward, (x * 3):sum(), { create_graph = true })
    assert.matches("backward: create_graph = true is not supported", err, nil, true)
  end)

  it("options that are not a table are refused", function()
    local function fails(code, pattern)
      local ok, err = pcall(run_lua(code))
      assert.is_false(ok, code)
      assert.matches(pattern, err, nil, false, code)
    end
    fails("nn.Linear(2, 3, false)", "^case:1: Linear: options must be a table")
    fails("F.mse_loss(lt.zeros(2), lt.zeros(2), 'sum')", "^case:1: mse_loss: options must be a table, got string")
    fails("lt.data.DataLoader(lt.data.TensorDataset(lt.zeros(4)), 2)", "^case:1: DataLoader: options must be a table, got number")
    fails("F.dropout(lt.ones(2), 0.5, true, true)", "^case:1: dropout: options must be a table, got boolean")
  end)

  it("a refused option changes nothing", function()
    local m = nn.Linear(2, 2)
    local before = m.weight:clone()
    local ok = pcall(m.load_state_dict, m, { weight = lt.zeros(2, 2), bias = lt.zeros(2) }, { stricct = true })
    assert.is_false(ok)
    assert.is_true(lt.equal(before, m.weight))
    local e = nn.Embedding(4, 2)
    local w0 = e.weight:clone()
    assert.is_false(pcall(F.embedding, lt.tensor{ 1, 2 }, e.weight, { max_nrom = 0.01 }))
    assert.is_true(lt.equal(w0, e.weight))
  end)

  it("accepts the options PyTorch has and that have no effect here", function()
    -- the nested-tensor fast path of TransformerEncoder, and non_blocking moves
    local layer = nn.TransformerEncoderLayer(4, 2, { dim_feedforward = 8 })
    local enc = nn.TransformerEncoder(layer, 2, { enable_nested_tensor = false, mask_check = false })
    assert.are.same({ 3, 4 }, enc(lt.zeros(3, 4)):size())
    local m = nn.Linear(2, 2):to{ dtype = "float64", non_blocking = true }
    assert.are.equal("float64", m.weight.dtype)
    -- a device other than the cpu is refused by name
    local ok, err = pcall(nn.Linear, 2, 2, { device = "cuda" })
    assert.is_false(ok)
    assert.matches("Linear: to: device 'cuda:0' is not available", err, nil, true)
    assert.are.equal("cpu", nn.Linear(2, 2, { device = "cpu" }).weight.device)
  end)

  it("a table after kernel_size is a size unless it has option names", function()
    local p = fx.pool_tables
    local x = mk(p.input)
    close(F.avg_pool2d(x, 2, { 1, 1 }), p.avg_pool2d, "avg_pool2d(x, 2, {1, 1})")
    close(F.max_pool2d(x, 2, { 1, 2 }), p.max_pool2d, "max_pool2d(x, 2, {1, 2})")
    close(nn.MaxPool2d(2, { 2, 1 })(x), p.MaxPool2d, "MaxPool2d(2, {2, 1})")
    close(nn.AvgPool2d(3, { 1, 2 }, 1)(x), p.AvgPool2d, "AvgPool2d(3, {1, 2}, 1)")
    local conv = nn.Conv2d(2, 3, 3, { 2, 1 }, { dtype = "float64" })
    assert.are.same({ 2, 1 }, conv.stride)
    lt.no_grad(function()
      conv.weight:copy_(mk(p.conv_weight))
      conv.bias:copy_(mk(p.conv_bias))
    end)
    close(conv(x), p.Conv2d, "Conv2d(2, 3, 3, {2, 1})")
    -- positional values, then the options table
    local c2 = nn.Conv2d(2, 3, 3, 2, 1, { bias = false })
    assert.are.same({ 2, 2 }, c2.stride)
    assert.are.same({ 1, 1 }, c2.padding)
    assert.is_nil(c2.bias)
    local ok, err = pcall(nn.Conv2d, 2, 3, 3, 2, { stride = 1 })
    assert.is_false(ok)
    assert.matches("Conv2d: option 'stride' given twice", err, nil, true)
  end)
end)

-------------------------------------------------------------------------------- losses
describe("parity: losses whose target differs in shape", function()
  it("warn, raise and compute as PyTorch does", function()
    assert.is_true(#fx.losses >= 50)
    local shape_warnings = 0
    for _, c in ipairs(fx.losses) do
      local x, y = mk(c.input), mk(c.target)
      for _, r in ipairs(c.results) do
        local what = c.fn .. "(" .. shape_str(c.input.shape) .. ", " .. shape_str(c.target.shape) ..
          ", " .. r.reduction .. ")"
        local msgs, res = capture(F[c.fn], x, y, { reduction = r.reduction })
        if r.error then
          assert.is_false(res[1], what .. " should raise")
          local err = res[2]
          local bare = err:gsub("^[^:]*:%d+: ", "")
          assert.are.equal(c.fn .. ": ", bare:sub(1, #c.fn + 2), what)
          local torch_msg = r.error:match("^%w+: (.*)$")
          if r.error:match("^ValueError") then
            -- the same sentence, shapes written as Lantern writes them
            assert.is_truthy(err:lower():find(torch_msg:lower(), 1, true), what .. ": " .. err)
          else
            -- not broadcastable: both shapes and the mismatch, named by the loss
            assert.is_truthy(err:find(shape_str(c.input.shape), 1, true), err)
            assert.is_truthy(err:find(shape_str(c.target.shape), 1, true), err)
            assert.matches("cannot be broadcast %(size %d+ vs %d+ at dimension %d+%)", err)
          end
          -- PyTorch warns before it raises; Lantern only raises
          assert.are.same({}, msgs, what)
        else
          assert.is_true(res[1], what .. ": " .. tostring(res[2]))
          close(res[2], r.value, what)
          local want = {}
          for _, w in ipairs(r.warnings) do
            if w:find("Using a target size", 1, true) then
              want[#want + 1] = c.fn .. ": " .. w
              shape_warnings = shape_warnings + 1
            else
              assert.matches("'mean' divides the total loss", w, nil, true)
              want[#want + 1] = "kl_div"
            end
          end
          for i, m in ipairs(msgs) do
            if want[i] == "kl_div" then
              assert.matches("^kl_div: reduction 'mean' divides the total loss", m)
              msgs[i] = "kl_div"
            end
          end
          assert.are.same(want, msgs, what)
        end
      end
    end
    assert.is_true(shape_warnings >= 20)
  end)

  it("the loss modules warn too, at the caller's line", function()
    for _, cls in ipairs { "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss" } do
      local loss = nn[cls]()
      local line
      local msgs, res, texts = capture(function()
        line = debug.getinfo(1, "l").currentline; local r = loss(lt.zeros(4, 3), lt.ones(4, 1))
        return r
      end)
      assert.is_true(res[1])
      assert.are.equal(1, #msgs, cls)
      assert.matches("^%S*parity_nn_spec%.lua:" .. line .. ": warning: ", texts[1])
      assert.matches("Using a target size ({4, 1}) that is different to the input size ({4, 3})",
        msgs[1], nil, true)
    end
  end)

  it("names mse_loss and both shapes when they do not broadcast", function()
    local ok, err = pcall(F.mse_loss, lt.zeros(4, 3), lt.zeros(4, 2))
    assert.is_false(ok)
    assert.matches("mse_loss: input of shape [4, 3] and target of shape [4, 2] cannot be broadcast " ..
      "(size 3 vs 2 at dimension 2)", err, nil, true)
    ok, err = pcall(nn.L1Loss(), lt.zeros(4, 3), lt.zeros(5, 3))
    assert.is_false(ok)
    assert.matches("l1_loss: input of shape [4, 3] and target of shape [5, 3] cannot be broadcast " ..
      "(size 4 vs 5 at dimension 1)", err, nil, true)
  end)

  it("kl_div warns for 'mean' only", function()
    local x, y = lt.zeros(2, 3), lt.ones(2, 3)
    assert.are.equal(1, #capture(F.kl_div, x, y))
    assert.are.equal(1, #capture(nn.KLDivLoss(), x, y))
    assert.are.equal(0, #capture(F.kl_div, x, y, { reduction = "batchmean" }))
    assert.are.equal(0, #capture(nn.KLDivLoss{ reduction = "sum" }, x, y))
  end)
end)

-------------------------------------------------------------------------------- warnings
describe("parity: lantern warnings", function()
  after_each(function()
    lt.set_warnings(true)
    warnings._reset()
  end)

  it("are shown once per call site and message", function()
    local got = {}
    warnings._reset()
    lt.set_warnings(function(t) got[#got + 1] = t end)
    for _ = 1, 3 do F.mse_loss(lt.zeros(4, 3), lt.ones(4, 1)) end
    assert.are.equal(1, #got)
    F.mse_loss(lt.zeros(4, 3), lt.ones(4, 1))               -- another line
    assert.are.equal(2, #got)
    for _, t in ipairs { lt.ones(1, 3), lt.ones(3), lt.ones(1, 3) } do F.mse_loss(lt.zeros(4, 3), t) end
    assert.are.equal(4, #got)                                -- one per message on this line
  end)

  it("are switched off and on with lt.set_warnings, and read with lt.get_warnings", function()
    assert.are.equal(true, lt.get_warnings())
    local got = {}
    local h = function(t) got[#got + 1] = t end
    assert.are.equal(true, lt.set_warnings(h))
    assert.are.equal(h, lt.get_warnings())
    assert.are.equal(h, lt.set_warnings(false))
    assert.are.equal(false, lt.get_warnings())
    F.mse_loss(lt.zeros(4, 3), lt.ones(4, 1))
    nn.init.kaiming_uniform_(lt.empty(0, 3))
    lt.set_warnings(h)
    assert.are.same({}, got)
    nn.init.kaiming_uniform_(lt.empty(0, 3))
    assert.are.equal(1, #got)
    assert.matches("init.kaiming_uniform_: Initializing zero-element tensors is a no-op", got[1], nil, true)
    local ok, err = pcall(lt.set_warnings, "off")
    assert.is_false(ok)
    assert.matches("set_warnings: expected true, false or a function, got string", err, nil, true)
  end)

  it("go to stderr by default, naming the script's line", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
local lt = require "lantern"
local F = lt.nn.functional
local loss = lt.nn.MSELoss()
for _ = 1, 5 do loss(lt.zeros(4, 3), lt.ones(4, 1)) end
F.l1_loss(lt.zeros(2), lt.ones(1))
lt.set_warnings(false)
F.l1_loss(lt.zeros(3), lt.ones(1))
print("done")
]])
    f:close()
    local p = assert(io.popen("bin/lantern " .. script .. " 2>&1"))
    local out = p:read("a")
    p:close()
    os.remove(script)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    local name = script:match("[^/]+$")
    assert.are.equal(3, #lines, out)
    assert.matches(name .. ":4: warning: mse_loss: Using a target size ({4, 1}) that is different " ..
      "to the input size ({4, 3}). This will likely lead to incorrect results due to broadcasting. " ..
      "Please ensure they have the same size.", lines[1], nil, true)
    assert.matches(name .. ":5: warning: l1_loss: Using a target size ({1})", lines[2], nil, true)
    assert.are.equal("done", lines[3])
  end)
end)

-------------------------------------------------------------------------------- Function backward
describe("parity: custom Function backward results", function()
  local BACKWARDS = {
    string = function() return "oops" end,
    table = function(_, g) return { g } end,
    number = function() return 3.0 end,
    wrong_shape = function() return lt.ones(2, { dtype = "float64" }) end,
    broadcast_shape = function() return lt.ones(2, 3, { dtype = "float64" }) end,
    keepdim_shape = function() return lt.ones(1, { dtype = "float64" }) * 5 end,
    extra_gradient = function(_, g) return g * 3, g end,
    extra_none = function(_, g) return g * 3, nil end,
    non_tensor_argument = function(_, g) return g * 3, lt.ones(1, { dtype = "float64" }) end,
    ["nil"] = function() return nil end,
  }
  local MESSAGES = {
    string = "TripleBackward: backward returned a string at position 1 (expected a Tensor or nil)",
    table = "TripleBackward: backward returned a table at position 1 (expected a Tensor or nil)",
    number = "TripleBackward: backward returned a number at position 1 (expected a Tensor or nil)",
    wrong_shape = "TripleBackward: backward returned a gradient of shape [2] at position 1, but input 1 has shape [3]",
    keepdim_shape = "TripleBackward: backward returned a gradient of shape [1] at position 1, but input 1 has shape [3]",
    extra_gradient = "TripleBackward: backward returned 2 gradients, but forward took 1 arguments (the gradient at position 2 has no input)",
    non_tensor_argument = "TripleBackward: backward returned a gradient at position 2, but argument 2 of forward was not a Tensor (return nil there)",
  }

  it("raise where PyTorch raises, naming the Function and the position", function()
    assert.are.equal(10, #fx.functions)
    for _, c in ipairs(fx.functions) do
      local Triple = lt.autograd.Function:extend("Triple")
      function Triple.forward(_, x) return x * 3 end
      Triple.backward = BACKWARDS[c.name]
      local x = lt.tensor({ 1, 2, 3 }, { dtype = "float64" }):requires_grad_()
      local ok, err = pcall(function()
        local y = c.name == "non_tensor_argument" and Triple.apply(x, 2.0) or Triple.apply(x)
        y:sum():backward()
      end)
      if c.error then
        assert.is_false(ok, c.name .. " should raise like " .. c.error)
        assert.are.equal(MESSAGES[c.name], err, c.name)
        assert.is_nil(x.grad, c.name .. ": the gradient is left untouched")
      else
        assert.is_true(ok, c.name .. ": " .. tostring(err))
        if c.grad then close(x.grad, c.grad, c.name) else assert.is_nil(x.grad, c.name) end
      end
    end
  end)
end)

-------------------------------------------------------------------------------- newcomer hints
describe("parity: hints for common slips", function()
  it("integer input to a layer with weights suggests :float()", function()
    for _, c in ipairs(fx.float_input) do
      assert.matches("^RuntimeError", c.torch)   -- PyTorch refuses it too, less plainly
      local m = run_lua(c.ctor)()
      local x = lt.ones(c.shape, { dtype = "int64" })
      local name = c.ctor:match("^nn%.(%w+)")
      local ok, err = pcall(function()
        if name == "Bilinear" then return m(x, x) end
        return m(x)
      end)
      assert.is_false(ok, c.ctor)
      assert.matches(name .. ": expected a floating-point input, got int64 (convert it with x:float())",
        err, nil, true)
      -- the layer in float64 suggests float64
      m:double()
      ok, err = pcall(function()
        if name == "Bilinear" then return m(x, x) end
        return m(x)
      end)
      assert.matches(name .. ": expected a floating-point input, got int64 (convert it with x:double())",
        err, nil, true)
      -- the right dtype works
      local y = name == "Bilinear" and m(x:double(), x:double()) or m(x:double())
      assert.are.equal("float64", y.dtype)
    end
    local ok, err = pcall(nn.Linear(2, 3), lt.ones(4, 2, { dtype = "float64" }))
    assert.is_false(ok)
    assert.matches("Linear: input is float64 but the layer's weight is float32 (convert the input " ..
      "with x:float(), or the layer with m:double())", err, nil, true)
    ok, err = pcall(F.embedding, lt.ones(2), lt.ones(3, 2))
    assert.is_false(ok)
    assert.matches("embedding: expected indices of dtype int64, got float32 (convert them with x:long())",
      err, nil, true)
  end)

  it("model.forward(x) suggests model(x)", function()
    local x = lt.randn(1, 2)
    local ok, err = pcall(function() local r = nn.Linear(2, 3).forward(x); return r end)
    assert.is_false(ok)
    assert.matches("Linear.forward: expected the module as self, got Tensor (call the module, model(x), " ..
      "or model:forward(x) with ':', not model.forward(x))", err, nil, true)
    local Net = nn.Module:extend("Net")
    function Net:__init() nn.Module.__init(self); self.fc = nn.Linear(2, 1) end
    function Net:forward(input) return self.fc(input) end
    local net = Net()
    ok, err = pcall(function() local r = net.forward(x); return r end)
    assert.is_false(ok)
    assert.matches("^%S*parity_nn_spec%.lua:%d+: Net%.forward: expected the module as self, got Tensor", err)
    ok, err = pcall(function() local r = nn.Sequential(nn.ReLU()).forward(); return r end)
    assert.matches("Sequential.forward: expected the module as self, got nil", err, nil, true)
    -- the right calls, and a subclass reaching its parent's forward, are untouched
    assert.are.same({ 1, 1 }, net(x):size())
    assert.are.same({ 1, 1 }, net:forward(x):size())
    -- a forward defined again (as in a REPL session) is checked too
    function Net:forward(input) return self.fc(input) * 2 end
    assert.are.equal(2 * net.fc(x):item(), net(x):item())
    ok, err = pcall(function() local r = net.forward(x); return r end)
    assert.matches("Net.forward: expected the module as self, got Tensor", err, nil, true)
    -- a forward set on one instance is what calling that instance runs
    net.forward = function(_, input) return input end
    assert.are.equal(x, net(x))
    local Sub = nn.Linear:extend("Sub")
    function Sub:forward(input) return nn.Linear.forward(self, input) * 2 end
    assert.are.same({ 1, 3 }, Sub(2, 3)(x):size())
  end)
end)

-------------------------------------------------------------------------------- max_norm, clip
describe("parity: options that were ignored", function()
  it("Embedding max_norm renormalises the rows looked up, as PyTorch", function()
    for _, c in ipairs(fx.embedding_max_norm) do
      local e = nn.Embedding(6, 3, { max_norm = c.max_norm, norm_type = c.norm_type, dtype = "float64" })
      assert.are.equal(c["repr"], tostring(e))
      lt.no_grad(function() e.weight:copy_(mk(c.weight)) end)
      local out = e(mk(c.indices))
      local what = "max_norm=" .. c.max_norm .. ", norm_type=" .. c.norm_type
      close(out, c.out, what .. " output")
      close(e.weight, c.weight_after, what .. " weight after")
      ;(out * mk(c.g)):sum():backward()
      close(e.weight.grad, c.grad, what .. " weight grad")
    end
  end)

  it("clip_grad_norm_ takes the norm type as its third argument", function()
    for _, c in ipairs(fx.clip_norm_type) do
      local ps = {}
      for i, g in ipairs(c.grads) do
        ps[i] = lt.zeros(g.shape, { dtype = "float64" }):requires_grad_()
        ps[i].grad = mk(g)
      end
      local total = nn.utils.clip_grad_norm_(ps, 1.0, c.norm_type)
      close(total:reshape(1), { shape = { 1 }, data = c.total.data }, "total", 1e-9)
      for i, g in ipairs(c.clipped) do close(ps[i].grad, g, "clipped " .. i, 1e-9) end
    end
  end)
end)
