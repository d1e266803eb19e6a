-- nn.Module: the seed's behaviours (registration by assignment, the buffer opt-out, traversal
-- order, state_dict, strict loading, `to`, train/eval, zero_grad) and PyTorch's semantics for
-- names, errors, containers and repr (../shared/reference/torch_semantics.md §1-4, §8).
local lt = require "lantern"
local nn = lt.nn

local function names(iter)
  local out = {}
  for name in iter do out[#out + 1] = name end
  return out
end

local function keys(sd) return nn.keys(sd) end

-- Runs fn, expects an error whose message contains `text` (plain).
local support = require "support"
local expect_error = support.expect_error

local function same_values(a, b)
  assert.are.same(a:double():reshape(-1):tolist(), b:double():reshape(-1):tolist())
end

-------------------------------------------------------------------------------- the worked example
-- torch_semantics.md §2 "Worked example (observed with 1.13)".
local Block = nn.Module:extend("Block")
function Block:__init()
  nn.Module.__init(self)
  self.lin = nn.Linear(2, 2)
  self:register_buffer("stat", lt.zeros(2))
  self:register_buffer("tmp", lt.zeros(2), false)
  self:register_buffer("none_buf", nil)
  self:register_parameter("none_param", nil)
end
function Block:forward(x) return self.lin(x) + self.stat end

local Net = nn.Module:extend("Net")
function Net:__init()
  nn.Module.__init(self)
  self.scale = nn.Parameter(lt.ones(1))
  self.blocks = nn.ModuleList { Block(), Block() }
  self.heads = nn.ModuleDict { { "b", nn.Linear(2, 1) }, { "a", nn.Linear(2, 1, { bias = false }) } }
  self.plist = nn.ParameterList { lt.zeros(3), lt.zeros(1) }
  self.pdict = nn.ParameterDict { z = nn.Parameter(lt.zeros(1)), y = nn.Parameter(lt.zeros(2)) }
  self.seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.BatchNorm1d(2))
  self.empty = nil
  self:register_buffer("step", lt.tensor(0))
  self.tied = self.seq[1]
end

describe("traversal order (the worked example)", function()
  local net = Net()

  it("named_parameters lists each parameter once, pre-order, with dotted names", function()
    assert.are.same({ "scale", "blocks.0.lin.weight", "blocks.0.lin.bias", "blocks.1.lin.weight",
      "blocks.1.lin.bias", "heads.b.weight", "heads.b.bias", "heads.a.weight", "plist.0", "plist.1",
      "pdict.y", "pdict.z", "seq.0.weight", "seq.0.bias", "seq.2.weight", "seq.2.bias" },
      names(net:named_parameters()))
    assert.are.equal(16, #net:parameters())
  end)

  it("honours recurse=false and prefix", function()
    assert.are.same({ "scale" }, names(net:named_parameters { recurse = false }))
    local n = names(net:named_parameters("model"))
    assert.are.equal("model.scale", n[1])
    assert.are.equal("model.blocks.0.lin.weight", n[2])
  end)

  it("named_buffers includes non-persistent buffers and skips nil ones", function()
    assert.are.same({ "step", "blocks.0.stat", "blocks.0.tmp", "blocks.1.stat", "blocks.1.tmp",
      "seq.2.running_mean", "seq.2.running_var", "seq.2.num_batches_tracked" },
      names(net:named_buffers()))
  end)

  it("named_children keeps a module registered twice; named_modules removes it", function()
    assert.are.same({ "blocks", "heads", "plist", "pdict", "seq", "tied" }, names(net:named_children()))
    assert.are.same({ "", "blocks", "blocks.0", "blocks.0.lin", "blocks.1", "blocks.1.lin", "heads",
      "heads.b", "heads.a", "plist", "pdict", "seq", "seq.0", "seq.1", "seq.2" },
      names(net:named_modules()))
    local all = names(net:named_modules { remove_duplicate = false })
    assert.are.equal("tied", all[#all])
    local pre = names(net:named_modules { prefix = "m" })
    assert.are.equal("m", pre[1])
    assert.are.equal("m.blocks", pre[2])
  end)

  it("yields the module itself first", function()
    local first
    for _, m in net:named_modules() do first = m break end
    assert.are.equal(net, first)
    assert.are.equal(net, net:modules()[1])
  end)

  it("state_dict: params, persistent buffers, then children; tied module repeated", function()
    assert.are.same({ "scale", "step", "blocks.0.stat", "blocks.0.lin.weight", "blocks.0.lin.bias",
      "blocks.1.stat", "blocks.1.lin.weight", "blocks.1.lin.bias", "heads.b.weight", "heads.b.bias",
      "heads.a.weight", "plist.0", "plist.1", "pdict.y", "pdict.z", "seq.0.weight", "seq.0.bias",
      "seq.2.weight", "seq.2.bias", "seq.2.running_mean", "seq.2.running_var",
      "seq.2.num_batches_tracked", "tied.weight", "tied.bias" }, keys(net:state_dict()))
  end)

  it("pairs over a state_dict follows its order", function()
    local sd = net:state_dict()
    local seen = {}
    for k in pairs(sd) do seen[#seen + 1] = k end
    assert.are.same(keys(sd), seen)
  end)

  it("state_dict values are detached aliases of the parameters", function()
    local sd = net:state_dict()
    local w = sd["blocks.0.lin.weight"]
    assert.is_false(w.requires_grad)
    lt.no_grad(function() net.blocks[1].lin.weight:fill_(3) end)
    assert.are.equal(3, w[1][1]:item())
  end)

  it("records PyTorch's _metadata versions", function()
    local md = getmetatable(net:state_dict()).__metadata
    assert.are.same({ version = 1 }, md[""])
    assert.are.same({ version = 2 }, md["seq.2"])
    assert.are.same({ version = 1 }, md["tied"])
  end)

  it("parameters() is both an array and an iterator", function()
    local ps = net:parameters()
    local n = 0
    for p in ps do n = n + 1; assert.is_true(lt.is_tensor(p)) end
    assert.are.equal(16, n)
    n = 0
    for _ in ps do n = n + 1 end   -- restartable
    assert.are.equal(16, n)
    assert.is_true(lt.is_tensor(ps[16]))
  end)
end)

-------------------------------------------------------------------------------- registration
describe("registration by assignment", function()
  it("registers any tensor as a trainable parameter and a module as a child", function()
    local m = nn.Module()
    m.w = lt.randn(3)
    m.child = nn.Linear(1, 1)
    m.note = "plain"
    m.count = 3
    assert.are.same({ "w" }, names(m:named_parameters { recurse = false }))
    assert.is_true(m.w.requires_grad)
    assert.are.same({ "child" }, names(m:named_children()))
    assert.are.equal("plain", m.note)
    assert.are.equal(3, m.count)
    assert.are.same({ "w", "child.weight", "child.bias" }, keys(m:state_dict()))
  end)

  it("keeps the tensor object and respects nn.Parameter(t, false)", function()
    local m = nn.Module()
    local t = lt.randn(2)
    m.a = t
    assert.is_true(rawequal(m.a, t))
    m.frozen = nn.Parameter(lt.randn(2), false)
    assert.is_false(m.frozen.requires_grad)
    m.ids = lt.tensor { 1, 2 }      -- integer tensors cannot require grad
    assert.is_false(m.ids.requires_grad)
    assert.are.same({ "a", "frozen", "ids" }, names(m:named_parameters()))
  end)

  it("re-assigning keeps the position; moving between kinds appends", function()
    local m = nn.Module()
    m.a = lt.zeros(1)
    m.b = lt.zeros(1)
    m:register_buffer("c", lt.zeros(1))
    m.a = lt.ones(1)
    assert.are.same({ "a", "b" }, names(m:named_parameters()))
    assert.are.equal(1, m.a:item())
    -- a buffer's name updates the buffer
    m.c = lt.full({ 1 }, 5)
    assert.are.same({ "c" }, names(m:named_buffers()))
    assert.are.same({ "a", "b" }, names(m:named_parameters()))
    assert.are.equal(5, m.c:item())
    -- a module replaces a parameter of the same name
    m.a = nn.Identity()
    assert.are.same({ "b" }, names(m:named_parameters()))
    assert.are.same({ "a" }, names(m:named_children()))
    -- delete and re-add appends
    m:delattr("b")
    m.b = lt.zeros(1)
    m.z = lt.zeros(1)
    assert.are.same({ "b", "z" }, names(m:named_parameters()))
  end)

  it("names registered with nil are reserved and absent from state_dict", function()
    local m = nn.Module()
    m:register_parameter("w", nil)
    m:register_buffer("b", nil)
    m:add_module("c", nil)
    assert.is_nil(m.w)
    assert.is_nil(m.b)
    assert.is_nil(m.c)
    assert.are.same({}, keys(m:state_dict()))
    assert.are.same({}, names(m:named_parameters()))
    -- the slot keeps its kind: a number cannot go there
    expect_error(function() m.w = 3 end, "cannot assign 'integer' as parameter 'w'")
    -- assigning nil to a registered parameter keeps the slot
    m.v = lt.zeros(2)
    m.v = nil
    assert.is_nil(m.v)
    assert.is_true(m._parameters:has("v"))
    assert.are.equal("(c): None", tostring(m):match("%(c%): None"))
  end)

  it("rejects bad names with PyTorch's messages", function()
    local m = nn.Module()
    expect_error(function() m:register_parameter("a.b", lt.zeros(1)) end, 'parameter name can\'t contain "."')
    expect_error(function() m:register_parameter("", lt.zeros(1)) end, 'parameter name can\'t be empty string ""')
    expect_error(function() m:register_buffer("a.b", lt.zeros(1)) end, 'buffer name can\'t contain "."')
    expect_error(function() m:register_buffer("", lt.zeros(1)) end, 'buffer name can\'t be empty string ""')
    expect_error(function() m:register_buffer("forward", lt.zeros(1)) end, "attribute 'forward' already exists")
    expect_error(function() m:register_parameter("training", nil) end, "attribute 'training' already exists")
    expect_error(function() m:register_buffer(3, lt.zeros(1)) end, "buffer name should be a string. Got integer")
    expect_error(function() m:add_module("x", 3) end, "integer is not a Module subclass")
    expect_error(function() m:add_module("a.b", nn.Identity()) end, 'module name can\'t contain ".", got: a.b')
    expect_error(function() m:add_module("", nn.Identity()) end, 'module name can\'t be empty string ""')
    expect_error(function() m.to = lt.zeros(1) end, "attribute 'to' already exists")
    expect_error(function() m["a.b"] = nn.Identity() end, 'module name can\'t contain "."')
    m.p = lt.zeros(1)
    expect_error(function() m:register_buffer("p", lt.zeros(1)) end, "attribute 'p' already exists")
    assert.are.same({}, names(m:named_buffers()))
  end)

  it("refuses a non-leaf tensor as a parameter", function()
    local m = nn.Module()
    local x = lt.randn(2, { requires_grad = true })
    expect_error(function() m.w = x * 2 end, "Cannot assign non-leaf Tensor to parameter 'w'")
    assert.are.same({}, names(m:named_parameters()))
  end)

  it("refuses registration before Module.__init", function()
    local Bad = nn.Module:extend("Bad")
    function Bad:__init() self.w = lt.zeros(1) end
    expect_error(function() Bad() end, "cannot assign parameters before Module.__init__() call")
    local Bad2 = nn.Module:extend("Bad2")
    function Bad2:__init() self.c = nn.Identity() end
    expect_error(function() Bad2() end, "cannot assign module before Module.__init__() call")
  end)

  it("finds plain fields and methods before registries, without shadowing", function()
    local m = nn.Linear(2, 3)
    assert.are.equal(2, m.in_features)
    assert.are.equal("function", type(m.forward))
    assert.is_true(m.training)
    assert.is_nil(rawget(m, "weight"))   -- the raw table holds no registered value
  end)
end)

describe("register_buffer: the opt-out", function()
  it("keeps buffers out of parameters() but in state_dict", function()
    local m = nn.Module()
    m.w = lt.zeros(2)
    m:register_buffer("running", lt.zeros(2))
    assert.are.same({ "w" }, names(m:named_parameters()))
    assert.are.same({ "running" }, names(m:named_buffers()))
    assert.are.same({ "w", "running" }, keys(m:state_dict()))
    assert.is_false(m.running.requires_grad)
  end)

  it("raises for a tensor that requires grad and leaves the module unchanged", function()
    local m = nn.Module()
    m:register_buffer("ok", lt.zeros(1))
    local t = lt.zeros(2, { requires_grad = true })
    expect_error(function() m:register_buffer("bad", t) end, "register_buffer")
    expect_error(function() m:register_buffer("bad", t) end, "requires grad")
    assert.are.same({ "ok" }, names(m:named_buffers()))
    assert.are.same({ "ok" }, keys(m:state_dict()))
    expect_error(function() m.ok = t end, "requires grad")
    assert.is_false(m.ok.requires_grad)
  end)

  it("non-persistent buffers are moved by `to` but absent from state_dict", function()
    local m = nn.Module()
    m:register_buffer("keep", lt.zeros(2))
    m:register_buffer("scratch", lt.zeros(2), false)
    assert.are.same({ "keep" }, keys(m:state_dict()))
    m:double()
    assert.are.equal("float64", m.scratch.dtype)
    assert.are.equal("float64", m.keep.dtype)
    -- re-registering updates persistence
    m:register_buffer("scratch", lt.zeros(1))
    assert.are.same({ "keep", "scratch" }, keys(m:state_dict()))
  end)

  it("rejects non-tensors", function()
    local m = nn.Module()
    expect_error(function() m:register_buffer("b", 3) end, "cannot assign 'integer' object to buffer 'b'")
  end)
end)

-------------------------------------------------------------------------------- state_dict / load
describe("load_state_dict", function()
  local function model()
    return nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
  end

  it("round-trips into a fresh instance in place", function()
    local a, b = model(), model()
    local w_before = b[1].weight
    local r = b:load_state_dict(a:state_dict())
    assert.are.same({}, r.missing_keys)
    assert.are.same({}, r.unexpected_keys)
    assert.are.equal("<All keys matched successfully>", tostring(r))
    assert.is_true(rawequal(w_before, b[1].weight))   -- same object, copied in place
    assert.is_true(b[1].weight.requires_grad)
    same_values(a[1].weight, b[1].weight)
    local x = lt.randn(4, 3)
    same_values(a(x), b(x))
  end)

  it("raises with every missing, unexpected and mis-shaped key in PyTorch's format", function()
    local m = model()
    local sd = nn.OrderedDict {
      { "0.weight", lt.zeros(5, 5) }, { "0.bias", lt.zeros(2) }, { "1.weight", lt.zeros(1, 2) },
      { "extra", lt.zeros(1) },
    }
    local before = m[1].weight:clone()
    local err = expect_error(function() m:load_state_dict(sd) end,
      "Error(s) in loading state_dict for Sequential:\n" ..
      "\tMissing key(s) in state_dict: \"1.bias\". \n" ..
      "\tUnexpected key(s) in state_dict: \"extra\". \n" ..
      "\tsize mismatch for 0.weight: copying a param with shape torch.Size([5, 5]) from checkpoint, " ..
      "the shape in current model is torch.Size([2, 3]).")
    assert.is_truthy(err)
    -- nothing was copied, not even the keys that matched
    same_values(before, m[1].weight)
  end)

  it("strict=false returns the missing and unexpected keys", function()
    local m = model()
    local sd = m:state_dict()
    sd["1.bias"] = nil
    sd["junk"] = lt.zeros(1)
    sd["0.junk"] = lt.zeros(1)
    local r = m:load_state_dict(sd, { strict = false })
    assert.are.same({ "1.bias" }, r.missing_keys)
    assert.are.same({ "junk", "0.junk" }, r.unexpected_keys)
    assert.are.equal("_IncompatibleKeys(missing_keys=['1.bias'], unexpected_keys=['junk', '0.junk'])",
      tostring(r))
  end)

  it("strict=false still raises for a size mismatch and leaves the module unchanged", function()
    local m = model()
    local before = m[2].weight:clone()
    local sd = m:state_dict()
    sd["0.weight"] = lt.zeros(3, 3)
    sd["1.weight"] = lt.ones(1, 2)
    expect_error(function() m:load_state_dict(sd, false) end,
      "size mismatch for 0.weight: copying a param with shape torch.Size([3, 3]) from checkpoint, " ..
      "the shape in current model is torch.Size([2, 3]).")
    same_values(before, m[2].weight)
  end)

  it("keeps dtype and requires_grad, converting the input", function()
    local m = nn.Linear(2, 2):double()
    m.weight:requires_grad_(false)
    m:load_state_dict({ weight = lt.ones(2, 2), bias = lt.tensor { 1, 2 } })   -- float32, int64
    assert.are.equal("float64", m.weight.dtype)
    assert.are.equal("float64", m.bias.dtype)
    assert.is_false(m.weight.requires_grad)
    assert.is_true(m.bias.requires_grad)
    assert.are.same({ 1, 2 }, m.bias:tolist())
  end)

  it("reports non-tensor values and non-table arguments", function()
    local m = nn.Linear(2, 2)
    expect_error(function() m:load_state_dict({ weight = { 1, 2 }, bias = lt.zeros(2) }) end,
      'While copying the parameter named "weight", expected torch.Tensor or Tensor-like object ' ..
      "from checkpoint but received table")
    expect_error(function() m:load_state_dict(3) end, "Expected state_dict to be dict-like, got integer.")
  end)

  it("treats keys of reserved and non-persistent names as unexpected", function()
    local m = nn.Module()
    m:register_parameter("w", nil)
    m:register_buffer("tmp", lt.zeros(1), false)
    expect_error(function() m:load_state_dict({ w = lt.zeros(1) }) end,
      'Unexpected key(s) in state_dict: "w". ')
    local r = m:load_state_dict({ w = lt.zeros(1), tmp = lt.zeros(1) }, { strict = false })
    assert.are.same({ "tmp", "w" }, r.unexpected_keys)
  end)

  it("loads BatchNorm checkpoints without num_batches_tracked when no metadata says version 2", function()
    local bn = nn.BatchNorm1d(2)
    bn.num_batches_tracked:fill_(7)
    bn:load_state_dict({ weight = lt.ones(2), bias = lt.zeros(2), running_mean = lt.zeros(2),
      running_var = lt.ones(2) })
    assert.are.equal(0, bn.num_batches_tracked:item())
    local sd = bn:state_dict()
    sd.num_batches_tracked = nil
    expect_error(function() bn:load_state_dict(sd) end, 'Missing key(s) in state_dict: "num_batches_tracked". ')
  end)

  it("copies every key of a shared parameter (the last one wins)", function()
    local lin = nn.Linear(1, 1)
    local s = nn.Sequential(lin, lin)
    s:load_state_dict({ ["0.weight"] = lt.full({ 1, 1 }, 1), ["0.bias"] = lt.zeros(1),
      ["1.weight"] = lt.full({ 1, 1 }, 2), ["1.bias"] = lt.zeros(1) })
    assert.are.equal(2, lin.weight:item())
  end)
end)

-------------------------------------------------------------------------------- to, modes, grads
describe("to", function()
  it("converts parameters, buffers and gradients in place; integer buffers keep their dtype", function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    m(lt.randn(4, 2)):sum():backward()
    local g = m[1].weight.grad:clone()
    assert.are.equal(m, m:to("float64"))
    assert.are.equal("float64", m[1].weight.dtype)
    assert.is_true(m[1].weight.requires_grad)
    assert.is_true(m[1].weight.is_leaf)
    assert.are.equal("float64", m[1].weight.grad.dtype)
    same_values(g, m[1].weight.grad)
    assert.are.equal("float64", m[2].running_mean.dtype)
    assert.are.equal("int64", m[2].num_batches_tracked.dtype)
    m:float()
    assert.are.equal("float32", m[1].weight.grad.dtype)
    m:to("cpu")
    m:to { dtype = "float64" }
    assert.are.equal("float64", m[1].bias.dtype)
  end)

  it("refuses integer dtypes", function()
    local m = nn.Linear(1, 1)
    expect_error(function() m:to("int64") end,
      "nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=int64")
    assert.are.equal("float32", m.weight.dtype)
  end)
end)

describe("train and eval", function()
  it("set training recursively and return the module", function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert.is_true(m.training)
    assert.are.equal(m, m:eval())
    assert.is_false(m[2][1].training)
    m:train()
    assert.is_true(m[2][1].training)
    expect_error(function() m:train("yes") end, "training mode is expected to be boolean")
  end)

  it("change only Dropout and BatchNorm", function()
    lt.manual_seed(1)
    local lin = nn.Linear(4, 4)
    local x = lt.randn(8, 4)
    local y_train = lin(x)
    lin:eval()
    same_values(y_train, lin(x))

    local drop = nn.Dropout(0.5)
    local ones = lt.ones(1000)
    local yt = drop(ones)
    local zeros = (yt:eq(0)):sum():item()
    assert.is_true(zeros > 350 and zeros < 650)
    assert.is_true(math.abs(yt:max():item() - 2) < 1e-6)
    drop:eval()
    same_values(ones, drop(ones))

    local bn = nn.BatchNorm1d(4)
    local xb = lt.randn(16, 4) * 3 + 1
    local out = bn(xb)
    -- training: normalised with the batch statistics
    assert.is_true(out:mean(1):abs():max():item() < 1e-5)
    assert.are.equal(1, bn.num_batches_tracked:item())
    local rm = bn.running_mean:clone()
    bn:eval()
    local o1 = bn(xb)
    local o2 = bn(xb)
    same_values(o1, o2)
    same_values(rm, bn.running_mean)             -- frozen in eval
    assert.are.equal(1, bn.num_batches_tracked:item())
  end)
end)

describe("zero_grad", function()
  it("sets every gradient to nil", function()
    local m = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    m(lt.randn(5, 3)):sum():backward()
    for _, p in ipairs(m:parameters()) do assert.is_not_nil(p.grad) end
    m:zero_grad()
    for _, p in ipairs(m:parameters()) do assert.is_nil(p.grad) end
  end)

  it("zeroes in place with set_to_none=false", function()
    local m = nn.Linear(2, 1)
    m(lt.randn(3, 2)):sum():backward()
    m:zero_grad(false)
    assert.are.same({ { 0, 0 } }, m.weight.grad:tolist())
  end)
end)

-------------------------------------------------------------------------------- misc methods
describe("apply, requires_grad_, get_submodule", function()
  it("apply visits children first, then the module", function()
    local inner = nn.Sequential(nn.ReLU(), nn.Tanh())
    local outer = nn.Sequential(nn.Linear(1, 1), inner)
    local seen = {}
    outer:apply(function(m) seen[#seen + 1] = m:type_name() end)
    assert.are.same({ "Linear", "ReLU", "Tanh", "Sequential", "Sequential" }, seen)
  end)

  it("requires_grad_ touches parameters only", function()
    local m = nn.BatchNorm1d(2)
    m:requires_grad_(false)
    assert.is_false(m.weight.requires_grad)
    m:requires_grad_()
    assert.is_true(m.bias.requires_grad)
    assert.is_false(m.running_mean.requires_grad)
  end)

  it("get_submodule / get_parameter / get_buffer follow dotted paths", function()
    local net = Net()
    assert.are.equal(net.blocks[2].lin, net:get_submodule("blocks.1.lin"))
    assert.are.equal(net, net:get_submodule(""))
    assert.are.equal(net.seq[1].weight, net:get_parameter("seq.0.weight"))
    assert.are.equal(net.seq[3].running_mean, net:get_buffer("seq.2.running_mean"))
    expect_error(function() net:get_submodule("blocks.7") end, "ModuleList has no attribute `7`")
    expect_error(function() net:get_parameter("seq.0.nope") end, "Linear has no attribute `nope`")
  end)

  it("calls forward through __call and reports a missing forward", function()
    local M = nn.Module:extend("NoForward")
    expect_error(function() M()(1) end, 'Module [NoForward] is missing the required "forward" function')
  end)
end)

describe("class system", function()
  it("supports subclasses of subclasses", function()
    local Base = nn.Module:extend("Base")
    function Base:__init(n)
      nn.Module.__init(self)
      self.lin = nn.Linear(n, n)
    end
    function Base:forward(x) return self.lin(x) end
    local Derived = Base:extend("Derived")
    function Derived:__init(n)
      Base.__init(self, n)
      self.scale = lt.ones(1)
    end
    function Derived:forward(x) return Base.forward(self, x) * self.scale end
    local d = Derived(3)
    assert.are.same({ "scale", "lin.weight", "lin.bias" }, keys(d:state_dict()))
    assert.is_true(d:isinstance(Base))
    assert.is_true(nn.isinstance(d, nn.Module))
    assert.is_false(nn.isinstance(d, nn.Linear))
    assert.are.same({ 2, 3 }, d(lt.randn(2, 3)):size())
    assert.are.equal("Derived(\n  (lin): Linear(in_features=3, out_features=3, bias=True)\n)", tostring(d))
  end)
end)

-------------------------------------------------------------------------------- containers
describe("containers", function()
  it("Sequential: 1-based indexing, PyTorch names, append, remove renumbers, slicing", function()
    local a, b, c = nn.Linear(1, 2), nn.ReLU(), nn.Linear(2, 1)
    local s = nn.Sequential(a, b, c)
    assert.are.equal(3, #s)
    assert.are.equal(a, s[1])
    assert.are.equal(c, s[-1])
    expect_error(function() return s[5] end, "index 5 is out of range")
    assert.are.same({ "0", "1", "2" }, names(s:named_children()))
    s:remove(1)
    assert.are.same({ "0", "1" }, names(s:named_children()))
    assert.are.equal(b, s[1])
    s:append(nn.Tanh())
    assert.are.same({ "0", "1", "2" }, names(s:named_children()))
    local t = s:slice(2, 3)
    assert.are.equal(2, #t)
    assert.are.equal(c, t[1])
    local x = lt.randn(4, 1)
    local full = nn.Sequential(a, b, c)
    same_values(c(b(a(x))), full(x))
  end)

  it("Sequential from named modules keeps the given order and names", function()
    local s = nn.Sequential(nn.OrderedDict { { "conv", nn.Linear(2, 2) }, { "act", nn.ReLU() } })
    assert.are.same({ "conv", "act" }, names(s:named_children()))
    local s2 = nn.Sequential { { "fc1", nn.Linear(2, 3) }, { "fc2", nn.Linear(3, 1) } }
    assert.are.same({ "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" }, keys(s2:state_dict()))
    assert.are.equal(s2.fc1, s2[1])
  end)

  it("ModuleList insert/remove renumber", function()
    local l = nn.ModuleList { nn.ReLU(), nn.Tanh() }
    local s = nn.Sigmoid()
    l:insert(1, s)
    assert.are.equal(s, l[1])
    assert.are.same({ "0", "1", "2" }, names(l:named_children()))
    assert.are.equal("Tanh", l[3]:type_name())
    l:remove(2)
    assert.are.equal("Tanh", l[2]:type_name())
    l:extend { nn.ReLU() }
    assert.are.equal(3, #l)
    local n = 0
    for i, m in pairs(l) do n = n + 1; assert.are.equal(l[i], m) end
    assert.are.equal(3, n)
    expect_error(function() l[9] = nn.ReLU() end, "index 9 is out of range")
  end)

  it("ModuleDict keeps insertion order and indexes by key", function()
    local d = nn.ModuleDict { { "z", nn.ReLU() }, { "a", nn.Tanh() } }
    assert.are.same({ "z", "a" }, d:keys())
    assert.are.equal("Tanh", d.a:type_name())
    assert.are.equal("ReLU", d["z"]:type_name())
    d.new = nn.Identity()
    assert.are.same({ "z", "a", "new" }, d:keys())
    local sorted = nn.ModuleDict { b = nn.ReLU(), a = nn.ReLU() }   -- a plain map: sorted keys
    assert.are.same({ "a", "b" }, sorted:keys())
  end)

  it("ParameterList wraps tensors as parameters and indexes from 1", function()
    local pl = nn.ParameterList { lt.zeros(2), lt.ones(3) }
    assert.are.equal(2, #pl)
    assert.is_true(pl[1].requires_grad)
    assert.are.same({ 3 }, pl[2]:size())
    pl:append(lt.zeros(1))
    assert.are.same({ "0", "1", "2" }, names(pl:named_parameters()))
    pl[1] = lt.full({ 4 }, 2)
    assert.are.same({ 4 }, pl[1]:size())
    expect_error(function() pl(1) end, "ParameterList should not be called.")
  end)

  it("ParameterDict: sorted keys from a plain map, given order from pairs", function()
    local pd = nn.ParameterDict { z = lt.zeros(1), a = lt.zeros(1) }
    assert.are.same({ "a", "z" }, pd:keys())
    local pd2 = nn.ParameterDict { { "z", lt.zeros(1) }, { "a", lt.zeros(1) } }
    assert.are.same({ "z", "a" }, pd2:keys())
    assert.is_true(pd2.z.requires_grad)
    expect_error(function() nn.ParameterDict { { 1, lt.zeros(1) } } end, "keys must be strings")
  end)
end)

-------------------------------------------------------------------------------- repr
describe("tostring (PyTorch's repr)", function()
  it("prints the tree with each layer's extra_repr", function()
    local Model = nn.Module:extend("Model")
    function Model:__init()
      nn.Module.__init(self)
      self.conv = nn.Conv2d(3, 8, 3, { stride = 2, padding = 1, bias = false })
      self.bn = nn.BatchNorm2d(8)
      self.body = nn.Sequential(nn.Linear(8, 4), nn.ReLU { inplace = true }, nn.Dropout(0.1))
      self.layers = nn.ModuleList { nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2) }
      self.emb = nn.Embedding(10, 4, { padding_idx = 1 })
      self.ln = nn.LayerNorm(4)
      self.heads = nn.ModuleDict { { "cls", nn.Linear(4, 2) } }
      self.pl = nn.ParameterList { lt.zeros(2, 3) }
      self.empty_seq = nn.Sequential()
    end
    function Model:extra_repr() return "custom=1\nsecond=line" end
    assert.are.equal([[
Model(
  custom=1
  second=line
  (conv): Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)
  (bn): BatchNorm2d(8, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
  (body): Sequential(
    (0): Linear(in_features=8, out_features=4, bias=True)
    (1): ReLU(inplace=True)
    (2): Dropout(p=0.1, inplace=False)
  )
  (layers): ModuleList(
    (0-2): 3 x Linear(in_features=4, out_features=4, bias=True)
    (3): Linear(in_features=4, out_features=2, bias=True)
  )
  (emb): Embedding(10, 4, padding_idx=1)
  (ln): LayerNorm((4,), eps=1e-05, elementwise_affine=True)
  (heads): ModuleDict(
    (cls): Linear(in_features=4, out_features=2, bias=True)
  )
  (pl): ParameterList(  (0): Parameter containing: [torch.float32 of size 2x3])
  (empty_seq): Sequential()
)]], tostring(Model()))
  end)

  it("prints the built-in extra_repr strings", function()
    assert.are.equal("Linear(in_features=1, out_features=2, bias=False)", tostring(nn.Linear(1, 2, { bias = false })))
    assert.are.equal("Conv1d(4, 4, kernel_size=(3,), stride=(1,), groups=2)", tostring(nn.Conv1d(4, 4, 3, { groups = 2 })))
    assert.are.equal("BatchNorm1d(5, eps=1e-05, momentum=None, affine=False, track_running_stats=False)",
      tostring(nn.BatchNorm1d(5, { momentum = false, affine = false, track_running_stats = false })))
    assert.are.equal("Embedding(5, 3)", tostring(nn.Embedding(5, 3)))
    assert.are.equal("LayerNorm((2, 3), eps=1e-05, elementwise_affine=False)",
      tostring(nn.LayerNorm({ 2, 3 }, { elementwise_affine = false })))
    assert.are.equal("GELU(approximate='none')", tostring(nn.GELU()))
    assert.are.equal("Softmax(dim=-1)", tostring(nn.Softmax(-1)))
    assert.are.equal("LeakyReLU(negative_slope=0.01)", tostring(nn.LeakyReLU()))
    assert.are.equal("Identity()", tostring(nn.Identity()))
    assert.are.equal("Flatten(start_dim=2, end_dim=-1)", tostring(nn.Flatten()))
    assert.are.equal("Tanh()", tostring(nn.Tanh()))
    assert.are.equal("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)",
      tostring(nn.MaxPool2d(2)))
    assert.are.equal("AvgPool2d(kernel_size=2, stride=2, padding=0)", tostring(nn.AvgPool2d(2)))
    assert.are.equal("ModuleList()", tostring(nn.ModuleList()))
    assert.are.equal("ParameterList(\n    (0): Parameter containing: [torch.float32 of size 2]\n" ..
      "    (1): Parameter containing: [torch.float64 of size 3]\n)",
      tostring(nn.ParameterList { lt.zeros(2), lt.zeros(3, { dtype = "float64" }) }))
    assert.are.equal("ParameterDict(  (a): Parameter containing: [torch.DoubleTensor of size 2])",
      tostring(nn.ParameterDict { a = lt.zeros(2, { dtype = "float64" }) }))
  end)
end)

-------------------------------------------------------------------------------- skip_init
describe("nn.utils.skip_init", function()
  it("constructs without running the default initialisation", function()
    local calls = 0
    local L = nn.Linear:extend("CountingLinear")
    function L:reset_parameters()
      calls = calls + 1
      nn.Linear.reset_parameters(self)
    end
    L(2, 2)
    assert.are.equal(1, calls)
    local m = nn.utils.skip_init(L, 2, 2)
    assert.are.equal(1, calls)
    assert.are.same({ 2, 2 }, m.weight:size())
    assert.is_true(m.weight.requires_grad)
  end)
end)

describe("to keeps sharing", function()
  it("converts a parameter shared by two modules once", function()
    local a = nn.Linear(2, 2)
    local b = nn.Module()
    b.w = a.weight
    local s = nn.Sequential(a, b)
    s:double()
    assert.is_true(rawequal(a.weight, b.w))
    assert.are.equal("float64", b.w.dtype)
    assert.are.same({ "0.weight", "0.bias" }, names(s:named_parameters()))
  end)
end)

describe("deepcopy", function()
  it("gives an independent module with equal values and kept sharing", function()
    local lin = nn.Linear(2, 2)
    local s = nn.Sequential(lin, nn.BatchNorm1d(2), lin)
    s.extra = { 1, 2 }
    local c = s:deepcopy()
    assert.are.same(nn.keys(s:state_dict()), nn.keys(c:state_dict()))
    assert.is_true(rawequal(c[1], c[3]))
    assert.is_false(rawequal(c[1], s[1]))
    assert.is_false(rawequal(c[1].weight, s[1].weight))
    assert.are.same(s[1].weight:tolist(), c[1].weight:tolist())
    assert.is_true(c[1].weight.requires_grad)
    lt.no_grad(function() c[1].weight:fill_(0) end)
    assert.are_not.same(s[1].weight:tolist(), c[1].weight:tolist())
    assert.are.same({ 1, 2 }, c.extra)
    assert.is_false(rawequal(s.extra, c.extra))
    assert.are.equal("int64", c[2].num_batches_tracked.dtype)
  end)
end)

describe("forward hooks", function()
  local function Scale(k)
    local S = nn.Module:extend("Scale")
    function S:forward(x, y) return x * k + (y or 0) end
    return S()
  end

  it("pre-hooks see the arguments and may replace them; hooks see input and output", function()
    local m = Scale(2)
    local log = {}
    m:register_forward_pre_hook(function(mod, input)
      assert.are.equal(m, mod)
      log[#log + 1] = "pre1:" .. input.n
      return { input[1] + 1, input[2], n = 2 }      -- replaces both arguments
    end)
    m:register_forward_pre_hook(function(_, input)
      log[#log + 1] = "pre2:" .. input[1]:item()
      return nil                                     -- keeps them
    end)
    m:register_forward_hook(function(_, input, output)
      log[#log + 1] = "post:" .. input[1]:item() .. ":" .. output:item()
      return output * 10                             -- replaces the output
    end)
    local out = m(lt.tensor(1.0), lt.tensor(0.5))
    -- (1 + 1) * 2 + 0.5 = 4.5, then times 10
    assert.are.equal(45, out:item())
    assert.are.same({ "pre1:2", "pre2:2.0", "post:2.0:4.5" }, log)
  end)

  it("a pre-hook returning one value passes it as the only argument", function()
    local m = Scale(3)
    m:register_forward_pre_hook(function() return lt.tensor(2.0) end)
    assert.are.equal(6, m(lt.tensor(100.0), lt.tensor(100.0)):item())
  end)

  it("remove() unregisters a hook; hooks on children run inside containers", function()
    local inner = Scale(2)
    local seq = nn.Sequential(inner, Scale(3))
    local calls = 0
    local h = inner:register_forward_hook(function() calls = calls + 1 end)
    assert.are.equal(6, seq(lt.tensor(1.0)):item())
    assert.are.equal(1, calls)
    h:remove()
    h:remove()                                       -- a second remove is harmless
    seq(lt.tensor(1.0))
    assert.are.equal(1, calls)
  end)

  it("gradients flow through an output a hook replaced", function()
    local lin = nn.Linear(2, 1)
    lin:register_forward_hook(function(_, _, out) return out * 3 end)
    local x = lt.ones(1, 2)
    lin(x):sum():backward()
    assert.is_true(lt.allclose(lin.weight.grad, lt.full({ 1, 2 }, 3.0)))
  end)

  it("rejects a hook that cannot be called", function()
    expect_error(function() Scale(1):register_forward_hook(42) end,
      "register_forward_hook: hook must be callable, got int")
  end)
end)

describe("forward hooks and deepcopy", function()
  it("a deep copy keeps the hooks; removing the original's leaves the copy's", function()
    local lin = nn.Linear(2, 2)
    local calls = 0
    local h = lin:register_forward_hook(function() calls = calls + 1 end)
    local copy = lin:deepcopy()
    h:remove()
    lin(lt.ones(1, 2))
    copy(lt.ones(1, 2))
    assert.are.equal(1, calls)
  end)
end)

describe("full backward hooks", function()
  it("see the output and argument gradients, and may replace the latter", function()
    lt.manual_seed(1)
    local lin = nn.Linear(3, 2)
    local seen
    lin:register_full_backward_hook(function(m, gi, go)
      assert.are.equal(lin, m)
      seen = { gi = gi, go = go }
      return { gi[1] * 10 }
    end)
    local x = lt.randn(4, 3, { requires_grad = true })
    local y = lin(x)
    assert.are.equal("BackwardHookFunctionBackward", y.grad_fn)
    local g = lt.randn(4, 2)
    y:backward(g)
    assert.are.equal(1, seen.go.n)
    assert.is_true(lt.allclose(seen.go[1], g))
    local expect = g:mm(lin.weight:detach())              -- d(x W^T + b)/dx
    assert.is_true(lt.allclose(seen.gi[1], expect, 1e-5, 1e-6))
    assert.is_true(lt.allclose(x.grad, expect * 10, 1e-5, 1e-5))
    assert.is_true(lt.allclose(lin.weight.grad, g:t():mm(x:detach()), 1e-5, 1e-6))   -- untouched
  end)

  it("give nil for arguments that need no gradient, one entry per tensor argument", function()
    local bil = nn.Bilinear(2, 3, 1)
    local seen
    bil:register_full_backward_hook(function(_, gi, go) seen = { gi = gi, go = go } end)
    local a = lt.randn(5, 2, { requires_grad = true })
    bil(a, lt.randn(5, 3)):sum():backward()
    assert.are.equal(2, seen.gi.n)
    assert.are.same({ 5, 2 }, seen.gi[1]:size())
    assert.is_nil(seen.gi[2])
    seen = nil
    local lin = nn.Linear(2, 1)
    lin:register_full_backward_hook(function(_, gi, go) seen = { gi = gi, go = go } end)
    lin(lt.randn(3, 2)):sum():backward()                   -- only the weights need gradients
    assert.are.equal(1, seen.gi.n)
    assert.is_nil(seen.gi[1])
    assert.are.same({ 3, 1 }, seen.go[1]:size())
  end)

  it("run in registration order, can be removed, and leave every return value in place", function()
    local lstm = nn.LSTM(2, 3)
    local order = {}
    local h1 = lstm:register_full_backward_hook(function() order[#order + 1] = 1 end)
    lstm:register_full_backward_hook(function() order[#order + 1] = 2 end)
    local out, hc = lstm(lt.randn(4, 1, 2, { requires_grad = true }))
    assert.are.same({ 4, 1, 3 }, out:size())
    assert.are.same({ 1, 1, 3 }, hc[2]:size())
    out:sum():backward()
    assert.are.same({ 1, 2 }, order)
    h1:remove()
    lstm(lt.randn(4, 1, 2, { requires_grad = true })):sum():backward()
    assert.are.same({ 1, 2, 2 }, order)
    -- no hook runs when nothing needs a gradient
    lt.no_grad(function() lstm(lt.randn(4, 1, 2)) end)
    assert.are.same({ 1, 2, 2 }, order)
  end)
end)

describe("full backward hooks, PyTorch's edge cases", function()
  local Mixed = nn.Module:extend("Mixed")
  function Mixed:forward(a, s, b) return a:detach() * 0 + 1, a * s + b * 2 end

  it("number gradients by argument and return position", function()
    local m = Mixed()
    local seen
    m:register_full_backward_hook(function(_, gi, go) seen = { gi = gi, go = go } end)
    local a = lt.ones(2, { requires_grad = true })
    local b = lt.ones(2, { requires_grad = true })
    local _, o2 = m(a, 3, b)
    o2:sum():backward()
    assert.are.equal(3, seen.gi.n)
    assert.are.same({ 3, 3 }, seen.gi[1]:tolist())
    assert.is_nil(seen.gi[2])
    assert.are.same({ 2, 2 }, seen.gi[3]:tolist())
    assert.are.equal(2, seen.go.n)
    assert.is_nil(seen.go[1])
    assert.are.same({ 1, 1 }, seen.go[2]:tolist())
  end)

  it("the hooks of the call run even if removed before backward; a wrong length is an error", function()
    local lin = nn.Linear(3, 2)
    local calls = 0
    local h = lin:register_full_backward_hook(function() calls = calls + 1 end)
    local y = lin(lt.randn(4, 3, { requires_grad = true }))
    h:remove()
    y:sum():backward()
    assert.are.equal(1, calls)
    lin:register_full_backward_hook(function() return {} end)
    local ok, err = pcall(function() lin(lt.randn(4, 3, { requires_grad = true })):sum():backward() end)
    assert.is_false(ok)
    assert.matches("invalid number of grad_input, got 0, but expected 1", err)
  end)

  it("run once per pass through the outputs, and not for gradients that bypass them", function()
    local l = nn.LSTM(3, 4)
    local calls = 0
    l:register_full_backward_hook(function(_, _, go)
      assert.is_not_nil(go[1])
      calls = calls + 1
    end)
    local out, hc = l(lt.randn(5, 2, 3, { requires_grad = true }))
    out:sum():backward({ retain_graph = true })
    hc[1]:sum():backward()            -- h_n is inside a table: the hook does not see it (PyTorch alike)
    assert.are.equal(1, calls)
  end)
end)

describe("forward hooks on a forward with several values", function()
  it("see them packed and may replace them all", function()
    local l = nn.LSTM(2, 3)
    local seen
    l:register_forward_hook(function(_, _, output)
      seen = output
      return { output[1] * 0, output[2] }
    end)
    local out, hc = l(lt.randn(4, 1, 2))
    assert.are.equal(2, seen.n)
    assert.are.equal(0, out:abs():sum():item())
    assert.are.same({ 1, 1, 3 }, hc[1]:size())
  end)
end)
