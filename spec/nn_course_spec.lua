-- The course unit "Modules, parameters, buffers and initialization" (seeds/003) done in Lua:
-- its exercises, its self-test answers and its closed-book reproduction are acceptance cases.
local lt = require "lantern"
local nn = lt.nn

local function keys(sd) return nn.keys(sd) end
local function names(iter)
  local out = {}
  for name in iter do out[#out + 1] = name end
  return out
end
local function same_values(a, b)
  assert.are.same(a:double():reshape(-1):tolist(), b:double():reshape(-1):tolist())
end

-- Saves a state_dict and reads it back: through a real .pt file when the checkpoint code is
-- there (lt.save / lt.load), else an in-memory deep copy, which is what the file holds.
local function save_and_reload(sd)
  if rawget(lt, "save") or package.searchpath("lantern.serialization", package.path) then
    local ok = pcall(require, "lantern.serialization")
    if ok and lt.save then
      local path = os.tmpname()
      lt.save(sd, path)
      local back = lt.load(path)
      os.remove(path)
      return back
    end
  end
  local copy = nn.OrderedDict()
  for k, v in pairs(sd) do copy[k] = v:clone() end
  return copy
end

-------------------------------------------------------------------------------- StatefulModule
-- The "Module State" example of the PyTorch modules note, transliterated.
local StatefulModule = nn.Module:extend("StatefulModule")
function StatefulModule:__init()
  nn.Module.__init(self)
  -- assigning a tensor (nn.Parameter for readers of PyTorch code) registers a parameter
  self.param1 = nn.Parameter(lt.randn(2))
  -- the string-based way
  self:register_parameter("param2", nn.Parameter(lt.randn(3)))
  -- reserves "param3" as a parameter; absent from state_dict
  self:register_parameter("param3", nil)
  self.param_list = nn.ParameterList { lt.randn(2), lt.randn(2), lt.randn(2) }
  -- a plain map: keys sorted, as PyTorch does for a dict
  self.param_dict = nn.ParameterDict { foo = lt.randn(3), bar = lt.randn(4) }
  self:register_buffer("buffer1", lt.randn(4), true)
  self:register_buffer("buffer2", lt.randn(5), false)
  self:register_buffer("buffer3", nil)
  self.linear = nn.Linear(2, 3)
end
function StatefulModule:forward(x)
  return self.linear(x * self.param1 + self.param_list[1]) + self.param2:sum() + self.buffer1:sum()
end

describe("self-test: the StatefulModule", function()
  it("has exactly the state_dict keys the unit predicts", function()
    local m = StatefulModule()
    assert.are.same({ "param1", "param2", "buffer1", "param_list.0", "param_list.1", "param_list.2",
      "param_dict.bar", "param_dict.foo", "linear.weight", "linear.bias" }, keys(m:state_dict()))
  end)

  it("leaves out the non-persistent buffer and the names reserved with nil", function()
    local m = StatefulModule()
    local sd = m:state_dict()
    assert.is_nil(sd.buffer2)
    assert.is_nil(sd.param3)
    assert.is_nil(sd.buffer3)
    assert.is_nil(m.param3)
    assert.is_nil(m.buffer3)
    -- buffer2 is still a buffer of the module (moved by `to`), just not saved
    assert.are.same({ "buffer1", "buffer2" }, names(m:named_buffers()))
    m:double()
    assert.are.equal("float64", m.buffer2.dtype)
  end)

  it("parameters() sees the parameters and submodule parameters, never the buffers", function()
    local m = StatefulModule()
    assert.are.same({ "param1", "param2", "param_list.0", "param_list.1", "param_list.2",
      "param_dict.bar", "param_dict.foo", "linear.weight", "linear.bias" }, names(m:named_parameters()))
  end)

  it("saves, reloads into a fresh instance and reproduces predictions exactly", function()
    local m = StatefulModule()
    local x = lt.randn(5, 2)
    local y = m(x)
    local sd = save_and_reload(m:state_dict())
    local fresh = StatefulModule()
    assert.are_not.same(y:tolist(), fresh(x):tolist())
    local r = fresh:load_state_dict(sd)
    assert.are.same({}, r.missing_keys)
    assert.are.same({}, r.unexpected_keys)
    assert.are.same(y:tolist(), fresh(x):tolist())
    same_values(m.buffer1, fresh.buffer1)
    -- the non-persistent buffer was not saved, so it keeps the fresh instance's value
    assert.are_not.same(m.buffer2:tolist(), fresh.buffer2:tolist())
  end)
end)

describe("self-test: load_state_dict needs a constructed model", function()
  it("attaches names to the live instance's structure; mismatched names fail unless allowed", function()
    local sd = StatefulModule():state_dict()
    local other = nn.Sequential(nn.Linear(2, 3))
    local ok, err = pcall(other.load_state_dict, other, sd)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('Missing key(s) in state_dict: "0.weight", "0.bias". ', 1, true))
    assert.is_truthy(tostring(err):find('Unexpected key(s) in state_dict: "param1", "param2", "buffer1"', 1, true))
    local r = other:load_state_dict(sd, { strict = false })
    assert.are.same({ "0.weight", "0.bias" }, r.missing_keys)
    assert.are.equal(10, #r.unexpected_keys)
  end)
end)

describe("self-test: BatchNorm statistics live in persistent buffers", function()
  it("are saved, moved by `to`, updated in train mode, frozen in eval, never trained", function()
    local bn = nn.BatchNorm2d(3)
    assert.are.same({ "weight", "bias", "running_mean", "running_var", "num_batches_tracked" }, keys(bn:state_dict()))
    assert.are.same({ "weight", "bias" }, names(bn:named_parameters()))
    local x = lt.randn(4, 3, 5, 5) + 2
    bn(x)
    assert.is_true(bn.running_mean:min():item() > 0.1)   -- moved towards the batch mean (~2)
    local frozen = bn.running_mean:clone()
    bn:eval()
    bn(x)
    same_values(frozen, bn.running_mean)
    bn:double()
    assert.are.equal("float64", bn.running_var.dtype)
    assert.are.equal("int64", bn.num_batches_tracked.dtype)
  end)
end)

-------------------------------------------------------------------------------- apply with xavier
-- "Modules as Building Blocks": MyLinear, DynamicNet, apply(init_weights).
local MyLinear = nn.Module:extend("MyLinear")
function MyLinear:__init(in_features, out_features)
  nn.Module.__init(self)
  self.weight = nn.Parameter(lt.randn(in_features, out_features))
  self.bias = nn.Parameter(lt.randn(out_features))
end
function MyLinear:forward(input) return input:matmul(self.weight) + self.bias end

local DynamicNet = nn.Module:extend("DynamicNet")
function DynamicNet:__init(num_layers)
  nn.Module.__init(self)
  local layers = {}
  for i = 1, num_layers do layers[i] = MyLinear(4, 4) end
  self.linears = nn.ModuleList(layers)
  self.activations = nn.ModuleDict { { "relu", nn.ReLU() }, { "lrelu", nn.LeakyReLU() } }
  self.final = MyLinear(4, 1)
end
function DynamicNet:forward(x, act)
  for _, linear in ipairs(self.linears:children()) do x = linear(x) end
  x = self.activations[act](x)
  return self.final(x)
end

describe("apply with an init function per layer type", function()
  it("reaches every submodule and the module itself, so each type gets its own init", function()
    local net = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
      nn.Linear(4 * 6 * 6, 10))
    local visited = {}
    net:apply(function(m)
      visited[#visited + 1] = m:type_name()
      lt.no_grad(function()
        if nn.isinstance(m, nn.Linear) then
          nn.init.xavier_uniform_(m.weight)
          m.bias:fill_(0.0)
        elseif nn.isinstance(m, nn.Conv2d) then
          nn.init.xavier_normal_(m.weight)
          nn.init.zeros_(m.bias)
        elseif nn.isinstance(m, nn.BatchNorm2d) then
          nn.init.constant_(m.weight, 0.5)
        end
      end)
    end)
    assert.are.same({ "Conv2d", "BatchNorm2d", "ReLU", "Flatten", "Linear", "Sequential" }, visited)
    local lin = net[5]
    local bound = math.sqrt(6 / (144 + 10))
    assert.is_true(lin.weight:abs():max():item() <= bound)
    assert.is_true(lin.weight:abs():max():item() > 0.5 * bound)
    assert.are.equal(0, lin.bias:abs():sum():item())
    assert.are.equal(0, net[1].bias:abs():sum():item())
    assert.are.same({ 0.5, 0.5, 0.5, 0.5 }, net[2].weight:tolist())
    -- a named_parameters loop only sees names and tensors, not the layer types
    local n = #net:parameters()
    assert.are.equal(6, n)
  end)

  it("DynamicNet: ModuleList/ModuleDict children, to(), apply", function()
    local net = DynamicNet(3)
    assert.are.same({ "linears.0.weight", "linears.0.bias", "linears.1.weight", "linears.1.bias",
      "linears.2.weight", "linears.2.bias", "final.weight", "final.bias" }, names(net:named_parameters()))
    net:apply(function(m)
      if nn.isinstance(m, MyLinear) then
        lt.no_grad(function()
          nn.init.xavier_normal_(m.weight)
          m.bias:fill_(0.0)
        end)
      end
    end)
    assert.are.equal(0, net.final.bias:item())
    local x = lt.randn(2, 4)
    assert.are.same({ 2, 1 }, net(x, "relu"):size())
    net:to("float64")
    assert.are.equal("float64", net(x:double(), "lrelu").dtype)
  end)
end)

-------------------------------------------------------------------------------- skip_init + orthogonal_
describe("skip_init followed by orthogonal_", function()
  it("constructs without default init, then orthogonal_ gives W W^T = I", function()
    local m = nn.utils.skip_init(nn.Linear, 5, 3)
    nn.init.orthogonal_(m.weight)
    local w = m.weight:double()
    local wwt = w:matmul(w:t())
    local err = (wwt - lt.eye(3, { dtype = "float64" })):abs():max():item()
    assert.is_true(err < 1e-5)
    assert.is_true(m.weight.requires_grad)
    -- tall matrices: W^T W = I, gain scales
    local t = lt.empty(6, 2)
    nn.init.orthogonal_(t, 2)
    local tt = t:double():t():matmul(t:double())
    assert.is_true((tt - lt.eye(2, { dtype = "float64" }) * 4):abs():max():item() < 1e-5)
  end)
end)

-------------------------------------------------------------------------------- exercises 01
-- Learn PyTorch 01, task 2: a Module subclass with Parameter weight and bias, state_dict check;
-- task 5: save the state_dict, reload into a new instance, compare predictions.
local LinearRegressionModel = nn.Module:extend("LinearRegressionModel")
function LinearRegressionModel:__init()
  nn.Module.__init(self)
  self.weights = nn.Parameter(lt.randn(1))
  self.bias = nn.Parameter(lt.randn(1))
end
function LinearRegressionModel:forward(x) return self.weights * x + self.bias end

describe("exercises: Learn PyTorch 01 tasks 2 and 5", function()
  it("task 2: parameters registered and visible in state_dict", function()
    lt.manual_seed(42)
    local m = LinearRegressionModel()
    assert.are.same({ "weights", "bias" }, keys(m:state_dict()))
    assert.are.equal(2, #m:parameters())
    -- a few SGD steps on y = 0.7 x + 0.3 move the parameters towards the truth
    local x = lt.arange(0, 1, 0.02):unsqueeze(2)
    local y = x * 0.7 + 0.3
    local loss_fn = nn.L1Loss()
    local first
    for _ = 1, 200 do
      m:zero_grad()
      local loss = loss_fn(m(x), y)
      first = first or loss:item()
      loss:backward()
      lt.no_grad(function()
        for _, p in ipairs(m:parameters()) do p:sub_(p.grad * 0.01) end
      end)
    end
    assert.is_true(loss_fn(m(x), y):item() < first)
  end)

  it("task 5: save, reload into a new instance, predictions match", function()
    local m = LinearRegressionModel()
    local x = lt.randn(10, 1)
    local sd = save_and_reload(m:state_dict())
    local loaded = LinearRegressionModel()
    loaded:load_state_dict(sd)
    m:eval()
    loaded:eval()
    assert.are.same(m(x):tolist(), loaded(x):tolist())
  end)
end)

-------------------------------------------------------------------------------- Learn the Basics
describe("Learn the Basics: Build the Neural Network", function()
  local NeuralNetwork = nn.Module:extend("NeuralNetwork")
  function NeuralNetwork:__init()
    nn.Module.__init(self)
    self.flatten = nn.Flatten()
    self.linear_relu_stack = nn.Sequential(nn.Linear(28 * 28, 512), nn.ReLU(), nn.Linear(512, 512),
      nn.ReLU(), nn.Linear(512, 10))
  end
  function NeuralNetwork:forward(x)
    return self.linear_relu_stack(self.flatten(x))
  end

  it("builds, calls through model(X) and names its parameters with dots", function()
    local model = NeuralNetwork()
    local X = lt.rand(1, 28, 28)
    local logits = model(X)
    assert.are.same({ 1, 10 }, logits:size())
    local pred = nn.Softmax(2)(logits)
    assert.is_true(math.abs(pred:sum():item() - 1) < 1e-5)
    local shapes = {}
    for name, p in model:named_parameters() do shapes[#shapes + 1] = name .. " " .. table.concat(p:size(), "x") end
    assert.are.same({ "linear_relu_stack.0.weight 512x784", "linear_relu_stack.0.bias 512",
      "linear_relu_stack.2.weight 512x512", "linear_relu_stack.2.bias 512",
      "linear_relu_stack.4.weight 10x512", "linear_relu_stack.4.bias 10" }, shapes)
    assert.are.equal([[
NeuralNetwork(
  (flatten): Flatten(start_dim=2, end_dim=-1)
  (linear_relu_stack): Sequential(
    (0): Linear(in_features=784, out_features=512, bias=True)
    (1): ReLU()
    (2): Linear(in_features=512, out_features=512, bias=True)
    (3): ReLU()
    (4): Linear(in_features=512, out_features=10, bias=True)
  )
)]], tostring(model))
  end)
end)

-------------------------------------------------------------------------------- Extending nn
describe("Extending nn: the Linear example with register_parameter and nn.init", function()
  local MyLin = nn.Module:extend("MyLin")
  function MyLin:__init(input_features, output_features, bias)
    nn.Module.__init(self)
    self.input_features = input_features
    self.output_features = output_features
    self.weight = nn.Parameter(lt.empty(output_features, input_features))
    if bias ~= false then
      self.bias = nn.Parameter(lt.empty(output_features))
    else
      self:register_parameter("bias", nil)
    end
    nn.init.uniform_(self.weight, -0.1, 0.1)
    if self.bias ~= nil then nn.init.uniform_(self.bias, -0.1, 0.1) end
  end
  function MyLin:forward(input) return nn.functional.linear(input, self.weight, self.bias) end
  function MyLin:extra_repr()
    return string.format("input_features=%d, output_features=%d, bias=%s", self.input_features,
      self.output_features, tostring(self.bias ~= nil))
  end

  it("registers, initialises in range and prints its extra_repr", function()
    local m = MyLin(4, 3)
    assert.is_true(m.weight:abs():max():item() <= 0.1)
    assert.are.same({ "weight", "bias" }, keys(m:state_dict()))
    assert.are.equal("MyLin(input_features=4, output_features=3, bias=true)", tostring(m))
    local nb = MyLin(4, 3, false)
    assert.are.same({ "weight" }, keys(nb:state_dict()))
    local x = lt.randn(2, 4, { requires_grad = true })
    m(x):sum():backward()
    assert.are.same({ 3, 4 }, m.weight.grad:size())
  end)
end)

-------------------------------------------------------------------------------- closed book
describe("reproduce closed-book", function()
  it("Linear + persistent running-mean buffer + ParameterList: predict keys, save, reload", function()
    local Tracker = nn.Module:extend("Tracker")
    function Tracker:__init()
      nn.Module.__init(self)
      self.linear = nn.Linear(3, 2)
      self:register_buffer("running_mean", lt.zeros(3))
      self.scales = nn.ParameterList { lt.ones(2), lt.ones(2) }
    end
    function Tracker:forward(x)
      if self.training then
        lt.no_grad(function()
          self.running_mean:mul_(0.9):add_(x:mean(1) * 0.1)
        end)
      end
      return self.linear(x - self.running_mean) * self.scales[1] * self.scales[2]
    end
    local m = Tracker()
    assert.are.same({ "running_mean", "linear.weight", "linear.bias", "scales.0", "scales.1" },
      keys(m:state_dict()))
    for _ = 1, 3 do m(lt.randn(8, 3) + 1) end
    local sd = save_and_reload(m:state_dict())
    local fresh = Tracker()
    fresh:load_state_dict(sd)
    same_values(m.running_mean, fresh.running_mean)
    m:eval()
    fresh:eval()
    local x = lt.randn(4, 3)
    assert.are.same(m(x):tolist(), fresh(x):tolist())
  end)
end)
