--- Layers, containers and losses (`lt.nn`), with PyTorch's names, constructor arguments,
-- parameter names, default initialisation and repr.
--
--     local lt = require "lantern"
--     local nn = lt.nn
--     local Net = nn.Module:extend("Net")
--     function Net:__init() nn.Module.__init(self); self.fc = nn.Linear(4, 2) end
--     function Net:forward(x) return self.fc(x):relu() end
--     local net = Net()
--     for name, p in net:named_parameters() do print(name, p) end
--
-- Conventions: dims and indices are 1-based in Lua; names in state_dict and repr are
-- PyTorch's (`0.weight`, `layers.1.bias`); required arguments are positional and the rest go
-- in a trailing options table (`nn.Linear(4, 2, {bias = false})`), where an unknown key is an
-- error. Layers that take `dtype` make their parameters in it (`{dtype = "float64"}`).
-- Shapes below use N for the batch, C for channels, L for a sequence length and `*` for any
-- number of dims.
--
-- Also here: `nn.functional` (also `nn.F`: the same ops as functions), `nn.init`
-- (initialisers) and `nn.utils` (gradient clipping, parameter vectors, `summary`).
-- @module lantern.nn
local lt = require "lantern"
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"

local nn = {}

nn.Module = mod.Module
nn.Parameter = mod.Parameter
--- The value that stands for a registered name with no value (PyTorch's None in
-- `_parameters`), found when reading a module's registries directly.
-- @table NONE
nn.NONE = mod.NONE
--- Whether `v` is a module instance of `cls` or of a subclass (false for anything else,
-- where `m:isinstance(cls)` needs a module).
-- @function isinstance
-- @param v
-- @param cls a class (`nn.Linear`)
-- @treturn boolean
nn.isinstance = mod.isinstance
--- Whether `v` is a module instance.
-- @function is_module
-- @param v
-- @treturn boolean
nn.is_module = mod.is_module
--- An ordered dict: `nn.OrderedDict{{"conv", c}, {"relu", r}}` keeps insertion order in
-- `pairs` (as state_dicts do); `nn.Sequential(nn.OrderedDict{...})` names its children.
-- @function OrderedDict
-- @tab[opt] pairs a list of `{key, value}` pairs
nn.OrderedDict = mod.odict
--- Ordered keys of a state_dict (or any table): insertion order, then the rest sorted.
-- @local
nn.keys = mod.ordered_keys

for _, file in ipairs { "containers", "linear", "activation", "dropout", "embedding", "conv",
  "norm", "loss", "rnn", "attention" } do
  for k, v in pairs(require("lantern.nn." .. file)) do
    if k:sub(1, 1) ~= "_" then nn[k] = v end
  end
end

nn.parallel = require "lantern.nn.parallel"
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
