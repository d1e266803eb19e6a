--- The Tensor: a view (dtype, sizes, strides, offset) on reference-counted storage.
--
-- Documentation stubs for the methods and properties written in C (never loaded). Most
-- functions of `lantern` are also methods: `x:add(y)`, `x:sum(2)`, `x:matmul(w)`, and the
-- in-place forms end with an underscore (`x:add_(y)`, `x:zero_()`). The operators
-- `+ - * / % ^`, unary `-`, `#x` (size of dim 1) and `x[i]` work as in PyTorch, with 1-based
-- positions. `tostring(x)` pretty-prints like PyTorch.
--
-- Properties (read with `x.name`): `shape` (a table of sizes), `dtype` (`"float32"`, ...),
-- `device` (`"cpu"`), `ndim`, `requires_grad` (writable on leaves), `grad` (writable),
-- `grad_fn` (the node that made x, or nil), `is_leaf`, `data` (a detached view; assigning it
-- replaces the contents).
-- @classmod lantern.Tensor
local Tensor = {}

--- Sizes.
-- @int[opt] dim 1-based (negative from the end)
-- @return a table of sizes, or the size of `dim`
-- @usage lt.zeros(2, 3):size()      --> {2, 3}
-- lt.zeros(2, 3):size(-1)           --> 3
function Tensor:size(dim) end

--- Strides in elements (`x:stride(dim)` for one). Also `x:dim()` (`ndimension`), `x:numel()`
-- (`nelement`), `x:element_size()`, `x:storage_offset()`, `x:is_contiguous()`,
-- `x:is_floating_point()`.
-- @int[opt] dim
-- @return table or number
function Tensor:stride(dim) end

--- The value of a one-element tensor as a Lua number (integer for int64) or boolean.
-- @return number or boolean
function Tensor:item() end

--- The values as nested Lua tables.
-- @treturn table
function Tensor:tolist() end

--- Element `i` along dim 1 (a view with one dim fewer); `x[i] = v` assigns. 1-based,
-- negative from the end.
-- @function __index
-- @int i

--- A new view with other sizes on the same storage (contiguous layout needed); one size may
-- be -1. `x:reshape(...)` copies when a view is impossible; `x:view_as(y)`, `x:reshape_as(y)`.
-- @param ... sizes, as numbers or one table
-- @treturn Tensor
function Tensor:view(...) end

--- A view broadcasting size-1 dims to the given sizes (-1 keeps a size). `x:expand_as(y)`.
-- `x:repeat_tensor(...)` copies with repetition (PyTorch's `repeat`, a Lua keyword; also
-- reachable as `x["repeat"](x, ...)`).
-- @param ... sizes
-- @treturn Tensor
function Tensor:expand(...) end

--- Converts: `x:to("float64")`, `x:to({dtype=, device="cpu"})`, `x:to(other)`; shortcuts
-- `x:float()`, `x:double()`, `x:long()`, `x:bool()`, `x:cpu()`. Returns x itself when nothing
-- changes.
-- @param what dtype name, device name, options table or tensor
-- @treturn Tensor
function Tensor:to(what) end

--- A contiguous copy (x itself when already contiguous). `x:clone()` always copies.
-- @treturn Tensor
function Tensor:contiguous() end

--- In place: `x:fill_(v)`, `x:zero_()`, `x:copy_(src)` (broadcasting), and the random fills
-- `x:uniform_(a=0, b=1)`, `x:normal_(mean=0, std=1)`, `x:bernoulli_(p)`, `x:random_(...)`.
-- @param src
-- @treturn Tensor x
function Tensor:copy_(src) end

--- Computes the gradients of this tensor with respect to the graph's leaves and accumulates
-- them into their `.grad`.
-- @tparam[opt] Tensor gradient the seed (needed unless x has one element)
-- @tparam[opt] table opts `{retain_graph=false}`
function Tensor:backward(gradient, opts) end

--- Marks a leaf as requiring a gradient (or not).
-- @bool[opt=true] on
-- @treturn Tensor x
function Tensor:requires_grad_(on) end

--- A view that shares storage but is out of the graph. `x:detach_()` detaches in place.
-- @treturn Tensor
function Tensor:detach() end

--- Keeps `.grad` for a non-leaf tensor after backward.
function Tensor:retain_grad() end

--- Registers `fn(grad)` to run when this tensor's gradient is computed; a returned tensor
-- replaces the gradient.
-- @func fn
function Tensor:register_hook(fn) end

return Tensor
