--- Dropout layers: active in training mode only (m:train() / m:eval()).
-- @module lantern.nn
local util = require "lantern.nn.util"
local mod = require "lantern.nn.module"
local F = require "lantern.nn.functional"
local check = require("lantern.options").check

local Module = mod.Module
local D = {}

local function init_common(self, name, p, inplace)
  if type(p) == "table" then
    check(name, p, { "p", "inplace" })
    p, inplace = p.p, p.inplace
  end
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or p < 0 or p > 1 then
    error(name .. ": dropout probability has to be between 0 and 1, but got " .. tostring(p),
      util.user_level())
  end
  self.p = p
  self.inplace = inplace or false
end

local function repr(self)
  return "p=" .. util.num_str(self.p) .. ", inplace=" .. util.bool_str(self.inplace)
end

---------------------------------------------------------------------------------------------
--- Dropout and embeddings.
-- @section dropout

--- Zeroes each element with probability `p` and scales the rest by `1/(1-p)` in training
-- mode; the identity in eval mode. Setting `m.generator = g` draws the masks from
-- generator g.
--
-- Shapes: output as input.
-- @function Dropout
-- @number[opt=0.5] p (or `{p=, inplace=}`)
-- @bool[opt=false] inplace accepted for PyTorch code
-- @usage local drop = nn.Dropout(0.2)
-- drop:eval(); drop(x)   -- x itself
local Dropout = Module:extend("Dropout")
D.Dropout = Dropout
function Dropout:__init(p, inplace)
  Module.__init(self)
  init_common(self, "Dropout", p, inplace)
end
function Dropout:forward(x)
  if not util.is_tensor(x) then error("Dropout: expected a Tensor input, got " .. util.typename(x), 2) end
  local g = self.generator
  return F.dropout(x, self.p, self.training, g and { generator = g } or nil)
end
Dropout.extra_repr = repr

--- Zeroes whole channels with probability `p` (and scales the rest by `1/(1-p)`) in
-- training mode. 4-D input is `(N, C, H, W)`; 3-D input is read as `(N, C, L)`, as PyTorch
-- 1.13 does.
--
-- Shapes: output as input.
-- @function Dropout2d
-- @number[opt=0.5] p (or `{p=, inplace=}`)
-- @bool[opt=false] inplace
local Dropout2d = Module:extend("Dropout2d")
D.Dropout2d = Dropout2d
function Dropout2d:__init(p, inplace)
  Module.__init(self)
  init_common(self, "Dropout2d", p, inplace)
end
function Dropout2d:forward(x)
  if not util.is_tensor(x) then error("Dropout2d: expected a Tensor input, got " .. util.typename(x), 2) end
  local nd = x:dim()
  if nd ~= 3 and nd ~= 4 then
    error("Dropout2d: expected 3D or 4D input, got input of size " .. util.shape_str(x), 2)
  end
  local g = self.generator
  return F.dropout2d(x, self.p, self.training, g and { generator = g } or nil)
end
Dropout2d.extra_repr = repr

return D
