--- Training utilities (`lt.nn.utils`): gradient clipping, parameters as one vector,
-- construction without initialisation, and model summaries (`nn.utils.summary`,
-- `nn.utils.count_parameters`). `params` is what the optimisers take: a tensor, a list of
-- tensors, `model:parameters()` or `model:named_parameters()`.
-- @module lantern.nn.utils
-- @alias clip
local lt = require "lantern"

local clip = {}

local param_list = require("lantern.nn.util").param_list
local check = require("lantern.options").check

--- Scales the gradients in place so that their joint p-norm is at most `max_norm`; returns
-- the total norm before clipping (a 0-dim tensor), as PyTorch does. Parameters without a
-- gradient are skipped.
-- @param params
-- @number max_norm
-- @param[opt] opts `{norm_type=2, error_if_nonfinite=false}` (`math.huge` for the max norm), or
-- the norm type as a number
-- @treturn Tensor the total norm
-- @usage loss:backward()
-- nn.utils.clip_grad_norm_(model:parameters(), 1.0)
-- opt:step()
function clip.clip_grad_norm_(params, max_norm, opts)
  if type(opts) == "number" then opts = { norm_type = opts } end
  opts = check("clip_grad_norm_", opts, { "norm_type", "error_if_nonfinite" })
  local norm_type = opts.norm_type or 2
  local grads = {}
  for _, p in ipairs(param_list(params)) do
    if p.grad then grads[#grads + 1] = p.grad end
  end
  if #grads == 0 then return lt.tensor(0.0) end
  return lt.no_grad(function()
    local total
    if norm_type == math.huge then
      local m = {}
      for i, g in ipairs(grads) do m[i] = g:abs():amax() end
      total = lt.stack(m):amax()
    else
      local n = {}
      for i, g in ipairs(grads) do n[i] = g:norm(norm_type) end
      total = lt.stack(n):norm(norm_type)
    end
    if opts.error_if_nonfinite and not total:isfinite():item() then
      error(string.format("clip_grad_norm_: the total norm of order %s for gradients is non-finite", tostring(norm_type)), 3)
    end
    local coef = max_norm / (total:item() + 1e-6)
    if coef < 1 then
      for _, g in ipairs(grads) do g:mul_(coef) end
    end
    return total
  end)
end

--- Clamps every gradient in place to `[-clip_value, clip_value]`.
-- @param params
-- @number clip_value
function clip.clip_grad_value_(params, clip_value)
  lt.no_grad(function()
    for _, p in ipairs(param_list(params)) do
      if p.grad then p.grad:clamp_(-clip_value, clip_value) end
    end
  end)
end

--- Concatenates the parameters into one 1-D tensor (a copy), in order.
-- @param params
-- @treturn Tensor
function clip.parameters_to_vector(params)
  local flat = {}
  for i, p in ipairs(param_list(params)) do flat[i] = p:reshape(-1) end
  return lt.cat(flat)
end

--- Copies a 1-D tensor back into the parameters, in order; its length must be their total
-- element count.
-- @tparam Tensor vec
-- @param params
function clip.vector_to_parameters(vec, params)
  local pos = 1
  lt.no_grad(function()
    for _, p in ipairs(param_list(params)) do
      local n = p:numel()
      p:copy_(vec:narrow(1, pos, n):view(p:size()))
      pos = pos + n
    end
  end)
  if pos - 1 ~= vec:numel() then
    error(string.format("vector_to_parameters: vector has %d elements, parameters need %d", vec:numel(), pos - 1), 2)
  end
end

--- Constructs a module without its default initialisation: the parameters are allocated
-- but left as they come from `lt.empty` (PyTorch's `torch.nn.utils.skip_init`), for weights
-- that are loaded or initialised next.
-- @function skip_init
-- @param cls a Module class (`nn.Linear`)
-- @param ... the constructor's arguments
-- @return the module
-- @usage local big = nn.utils.skip_init(nn.Linear, 4096, 4096)
-- big:load_state_dict(lt.load("big.pt"))
return clip
