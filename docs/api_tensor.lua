--- The Tensor: a view (dtype, sizes, strides, offset) on reference-counted storage.
--
-- Documentation stubs for the methods and properties written in C (never loaded). Every
-- function of `lantern` that takes a tensor first is also a method, documented there:
-- `x:add(y)` is `lt.add(x, y)`, `x:sum(2)` is `lt.sum(x, 2)`, `x:matmul(w)`, and the in-place
-- forms end with an underscore (`x:add_(y)`, `x:exp_()`). This page lists the methods of their
-- own. `lt.Tensor` is the table of methods: a function added to it is a method of every
-- tensor.
--
-- Operators: `+ - * / // % ^` and unary `-` (`add sub mul div floor_divide remainder pow neg`,
-- with a number on either side), `#x` (the size of dim 1), `x[i]` (the slice along dim 1, a
-- view; `x[i][j]` for an element), `x[i] = v` (writes through, v a number or a tensor that
-- broadcasts), `tostring(x)` and `print(x)` (PyTorch's repr), `pairs(x)` (the rows), and
-- `local x <close> = ...` (released at the end of the block).
--
-- Properties (read with `x.name`): `shape` (a table of sizes), `dtype` (`"float32"`, ...),
-- `device` (`"cpu"`), `ndim`, `requires_grad` (writable on leaves), `grad` (writable, nil
-- to clear), `grad_fn` (the name of the node that made x, e.g. `"MmBackward0"`, or nil),
-- `is_leaf`, `data` (a detached view; assigning a tensor of the same shape and dtype replaces
-- the contents without recording). Tensors carry no other fields.
-- @classmod lantern.Tensor
local Tensor = {}

---------------------------------------------------------------------------------------------
--- Sizes, layout and values.
-- @section layout

--- Sizes.
-- @int[opt] dim 1-based (negative from the end)
-- @return a table of sizes, or the size of `dim`
-- @usage lt.zeros(2, 3):size()      --> {2, 3}
-- lt.zeros(2, 3):size(-1)           --> 3
function Tensor:size(dim) end

--- Strides in elements (`x:stride(dim)` for one). Also `x:dim()` (`x:ndimension()`, the
-- number of dims), `x:numel()` (`x:nelement()`), `x:element_size()` (bytes per element),
-- `x:storage_offset()` (in elements), `x:is_contiguous()`, `x:is_floating_point()`.
-- @int[opt] dim
-- @return table or number
function Tensor:stride(dim) end

--- The value of a one-element tensor as a Lua number (integer for int64) or boolean.
-- @return number or boolean
function Tensor:item() end

--- The values as nested Lua tables (a number for a 0-dim tensor).
-- @treturn table
function Tensor:tolist() end

--- Element `i` along dim 1 (a view with one dim fewer); `x[i] = v` assigns through it. 1-based,
-- negative from the end; `x[0]` and `x[#x + 1]` raise.
-- @function __index
-- @int i

--- `for i, row in pairs(x) do ... end` visits the rows of `x` (its slices along dim 1, the
-- views `x[i]`) with their 1-based positions, as Python's `for row in x` does; `ipairs` stops
-- with an error past the last row, since `x[#x + 1]` is out of range. A 0-dim tensor has no
-- rows, as in PyTorch.
-- @function __pairs
-- @usage for i, row in pairs(lt.zeros(5, 2)) do print(i, row.shape) end   -- 1 {2} ... 5 {2}

---------------------------------------------------------------------------------------------
--- Views and copies.
-- @section views

--- A new view with other sizes on the same storage (contiguous layout needed); one size may
-- be -1. `x:reshape(...)` copies when a view is impossible; `x:view_as(y)` and
-- `x:reshape_as(y)` take y's sizes.
-- @param ... sizes, as numbers or one table
-- @treturn Tensor
function Tensor:view(...) end

--- A view broadcasting size-1 dims to the given sizes (-1 keeps a size). `x:expand_as(y)`.
-- `x:repeat_tensor(...)` copies with repetition: PyTorch's `repeat`, a Lua keyword, so
-- `x:repeat(...)` does not parse; it is also reachable as `x["repeat"](x, ...)`.
-- @param ... sizes
-- @treturn Tensor
function Tensor:expand(...) end

--- Converts and moves: `x:to("float64")`, `x:to("cuda")`, `x:to("cuda:1", "float64")`,
-- `x:to({dtype=, device=})`, `x:to(other)` (its dtype and device); shortcuts `x:float()`,
-- `x:double()`, `x:long()`, `x:bool()`, `x:cpu()`. Returns x itself when nothing changes. A
-- move is differentiable (the gradient goes back to x's device). Between two devices that are
-- not the cpu the values go through the host. A device that is not available raises
-- `to: device 'cuda:0' is not available: ...`.
-- @param what dtype name, device name, options table or tensor
-- @treturn Tensor
function Tensor:to(what) end

--- A contiguous copy (x itself when already contiguous). `x:clone()` always copies.
-- @treturn Tensor
function Tensor:contiguous() end

--- Releases this handle's reference to the tensor now, instead of when the collector finds
-- it (a view, the autograd graph or a module that holds the tensor keeps it alive); using the
-- handle afterwards raises, and freeing twice does nothing. `local x <close> = ...` frees at
-- the end of the block. See `lt.tidy` for whole scopes.
function Tensor:free() end

---------------------------------------------------------------------------------------------
--- Writing in place. Each returns x. Writing into a leaf that requires grad raises unless
-- under `lt.no_grad`.
-- @section inplace

--- Copies `src` into x (broadcasting, converting the dtype). Also `x:fill_(v)` (a number,
-- boolean or one-element tensor), `x:zero_()`, and the random fills `x:uniform_(a=0, b=1)`,
-- `x:normal_(mean=0, std=1)`, `x:bernoulli_(p=0.5)` and `x:random_(from?, to?)` (integers in
-- [from, to); without bounds the range that x's dtype holds exactly), which take a trailing
-- `{generator=}`. `x:index_add_`, `x:scatter_`, `x:scatter_add_`, `x:masked_fill_`,
-- `x:lerp_`, `x:addcmul_` and `x:addcdiv_` are the in-place forms of the `lantern` functions.
-- @param src
-- @treturn Tensor x
function Tensor:copy_(src) end

---------------------------------------------------------------------------------------------
--- Autograd.
-- @section autograd

--- Computes the gradients of this tensor with respect to the graph's leaves and accumulates
-- them into their `.grad`.
-- @tparam[opt] Tensor gradient the seed (needed unless x has one element)
-- @tparam[opt] table opts `{retain_graph=false}` (may come in place of the gradient)
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
