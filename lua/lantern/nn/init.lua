--- lantern.nn: modules, containers, layers, losses, nn.init and nn.functional.
--
--     local lt = require "lantern"
--     local nn = lt.nn
--     local Net = nn.Module:extend("Net")
--     function Net:__init() nn.Module.__init(self); self.fc = nn.Linear(4, 2) end
--     function Net:forward(x) return self.fc(x):relu() end
--     local net = Net()
--     for name, p in net:named_parameters() do print(name, p) end
--
-- Conventions (see ../shared/DESIGN.md): dims and indices are 1-based in Lua; names in
-- state_dict and repr are PyTorch's ("0.weight", "layers.1.bias"); options go in a trailing
-- table (nn.Linear(4, 2, {bias = false})).
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"

local nn = {}

nn.Module = mod.Module
nn.Parameter = mod.Parameter
nn.NONE = mod.NONE
nn.isinstance = mod.isinstance
nn.is_module = mod.is_module
--- An ordered dict: nn.OrderedDict{{"conv", c}, {"relu", r}} (keeps insertion order in pairs).
nn.OrderedDict = mod.odict
--- Ordered keys of a state_dict (or any table): insertion order, then the rest sorted.
nn.keys = mod.ordered_keys

for _, file in ipairs { "containers", "linear", "activation", "dropout", "embedding", "conv",
  "norm", "loss", "rnn", "attention" } do
  for k, v in pairs(require("lantern.nn." .. file)) do
    if k:sub(1, 1) ~= "_" then nn[k] = v end
  end
end

nn.init = require "lantern.nn.initfn"
nn.functional = require "lantern.nn.functional"
nn.F = nn.functional

nn.utils = {
  skip_init = mod.skip_init,
}
for k, v in pairs(require "lantern.nn.summary") do nn.utils[k] = v end
-- Training utilities (clip_grad_norm_, ...) may be provided by the optim side.
do
  local name = "lantern.nn.clip"
  if package.preload[name] or (package.searchpath and package.searchpath(name, package.path)) then
    for k, v in pairs(require(name)) do nn.utils[k] = v end
  end
end

nn._util = util
return nn
