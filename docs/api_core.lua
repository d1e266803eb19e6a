--- Tensors, autograd and neural networks for Lua 5.4: `local lt = require "lantern"`.
--
-- `lt` holds the tensor functions (written in C, documented by the stubs of docs/api_core.lua,
-- which is never loaded) and a few written in Lua. Every function here that takes a tensor
-- first is also a method of it where PyTorch has one (`lt.add(x, y)` is `x:add(y)`); the
-- `lantern.Tensor` page lists the methods of their own and the properties. Submodules load on
-- first use: `lt.nn` (with `lt.nn.functional`, `lt.nn.init` and `lt.nn.utils`), `lt.optim`
-- (with `lt.optim.lr_scheduler`), `lt.data`, `lt.autograd`, `lt.serialization`,
-- `lt.safetensors`, `lt.warnings` and `lt.utils`; `lt.Tensor` is the table of tensor methods.
--
-- Conventions:
--
-- * Options come as a trailing table: `lt.zeros(2, 3, {dtype = "float64", requires_grad = true})`;
--   an unknown option is an error naming the nearest known one.
-- * Sizes are given as separate numbers or as one table: `lt.zeros(2, 3)` or `lt.zeros({2, 3})`.
-- * Dtypes are `"float32"` (the default), `"float64"`, `"int64"` and `"bool"` (also `"float"`,
--   `"double"`, `"long"`). Lua integers make int64 tensors, Lua floats float32, and a Lua
--   number never widens a float tensor (PyTorch's promotion).
-- * **Positions are 1-based**: dims, indices and index tensors count from 1; negative values
--   count from the end (-1 is the last). `lt.randperm`, `max`'s indices and `argmax` return
--   1-based positions.
-- * Errors are Lua errors naming the op and the shapes or dtypes involved; a failed call leaves
--   its inputs unchanged.
-- @module lantern
-- @alias lt
local lt = {}

---------------------------------------------------------------------------------------------
--- Making tensors.
-- @section creation

--- A tensor from Lua data (copied).
-- `data` is a rectangular nested table, a number, a boolean or a tensor. Lua integers give
-- int64, any float gives float32, booleans give bool, unless `opts.dtype` says otherwise; a
-- ragged table or a value that is not a number names its position in the error.
-- @param data nested table, number, boolean or Tensor
-- @tparam[opt] table opts `{dtype=, requires_grad=, device="cpu"}`
-- @treturn Tensor
-- @usage local x = lt.tensor{{1.5, 2}, {3, 4}}   -- float32, 2x2
function lt.tensor(data, opts) end

--- A tensor of zeros. Also `lt.ones` (ones) and `lt.empty` (uninitialised memory from the
-- buffer cache).
-- @param ... sizes, as numbers or one table
-- @tparam[opt] table opts `{dtype=, requires_grad=}`
-- @treturn Tensor
-- @usage lt.zeros(2, 3); lt.ones({4}, {dtype = "int64"})
function lt.zeros(...) end

--- A tensor filled with `value`; its Lua type picks the dtype (integer: int64, float:
-- float32, boolean: bool) unless `opts.dtype` is given.
-- @tparam table|number sizes a table of sizes, or the sizes as numbers before `value`
-- @param value number or boolean
-- @tparam[opt] table opts `{dtype=, requires_grad=}`
-- @treturn Tensor
-- @usage lt.full({2, 2}, 7)
function lt.full(sizes, value, opts) end

--- Tensors shaped like `t`: `lt.zeros_like(t)`, `lt.ones_like(t)`, `lt.empty_like(t)`,
-- `lt.full_like(t, value)`, `lt.rand_like(t)`, `lt.randn_like(t)`,
-- `lt.randint_like(t, low?, high)`.
-- @tparam Tensor t
-- @tparam[opt] table opts `{dtype=, requires_grad=}` (dtype defaults to t's), and
-- `generator=` for the random ones
-- @treturn Tensor
function lt.zeros_like(t, opts) end

--- Values from `start` to before `stop` in steps of `step`, like PyTorch's arange (these are
-- values, not positions: `lt.arange(3)` is `{0, 1, 2}`).
-- Forms: `arange(stop)`, `arange(start, stop)`, `arange(start, stop, step)`.
-- @number start
-- @number stop
-- @number[opt=1] step
-- @tparam[opt] table opts `{dtype=, requires_grad=}`
-- @treturn Tensor int64 when every bound is an integer, float32 otherwise
function lt.arange(start, stop, step, opts) end

--- `steps` evenly spaced values from `start` to `stop`, both included.
-- @number start
-- @number stop
-- @int steps
-- @tparam[opt] table opts `{dtype=, requires_grad=}`
-- @treturn Tensor
function lt.linspace(start, stop, steps, opts) end

--- The identity matrix, `n` x `m` (m defaults to n).
-- @int n
-- @int[opt] m
-- @tparam[opt] table opts `{dtype=, requires_grad=}`
-- @treturn Tensor
function lt.eye(n, m, opts) end

--- A copy with its own storage (contiguous), recorded by autograd (`CloneBackward0`).
-- Method: `x:clone`.
-- @tparam Tensor x
-- @treturn Tensor
function lt.clone(x) end

--- Whether `v` is a Tensor (a released one included; `lt.is_released(v)` tells those).
-- @param v
-- @treturn boolean
function lt.is_tensor(v) end

--- The number of elements of `x` (also `x:numel()`, `x:nelement()`).
-- @tparam Tensor x
-- @treturn int
function lt.numel(x) end

--- Whether `x`'s dtype is float32 or float64 (also `x:is_floating_point()`).
-- @tparam Tensor x
-- @treturn boolean
function lt.is_floating_point(x) end

---------------------------------------------------------------------------------------------
--- Random numbers. Each `lua_State` has its own default generator (xoshiro256**, so the
-- sequences differ from PyTorch's); values are drawn in row-major order, so a seed gives the
-- same tensor whatever the thread count.
-- @section random

--- Uniform values in [0, 1). `lt.randn` draws from the standard normal distribution.
-- @param ... sizes, as numbers or one table
-- @tparam[opt] table opts `{dtype=, requires_grad=, generator=}`
-- @treturn Tensor
-- @usage lt.rand(2, 3); lt.randn({4}, {generator = g})
function lt.rand(...) end

--- Random integers in [low, high) (values, as PyTorch's randint).
-- @int[opt=0] low
-- @int high
-- @tab sizes
-- @tparam[opt] table opts `{dtype=, generator=}`
-- @treturn Tensor int64
function lt.randint(low, high, sizes, opts) end

--- A random ordering of the positions 1..n.
-- @int n
-- @tparam[opt] table opts `{dtype=, generator=}`
-- @treturn Tensor int64
-- @usage lt.randperm(4)   --> e.g. tensor([3, 1, 4, 2])
function lt.randperm(n, opts) end

--- Normal values with the given mean and standard deviation.
-- @number mean
-- @number std
-- @tab sizes
-- @tparam[opt] table opts `{dtype=, generator=}`
-- @treturn Tensor
function lt.normal(mean, std, sizes, opts) end

--- 1 with probability `probs[i]`, elementwise, in `probs`' dtype; `x:bernoulli(p)` draws a
-- tensor of x's shape and dtype with probability `p` (PyTorch's `Tensor.bernoulli(p)`).
-- @tparam Tensor probs
-- @tparam[opt] table opts `{generator=}`
-- @treturn Tensor
function lt.bernoulli(probs, opts) end

--- `num_samples` categories drawn from each row of the weights `probs` (1-D or 2-D, float,
-- finite, >= 0, not all zero in a row; they need not sum to 1), as 1-based positions. With
-- replacement each draw is independent; without, each is drawn from the weights left, so a
-- row's draws are distinct (zero weights come last, in position order). Lantern's own random
-- stream: the same seed gives other draws than PyTorch's.
-- Method: `probs:multinomial(...)`.
-- @tparam Tensor probs
-- @int num_samples
-- @tparam[opt=false] boolean replacement
-- @tparam[opt] table opts `{replacement=, generator=}`
-- @treturn Tensor int64, `(num_samples)` or `(rows, num_samples)`
-- @usage local next_id = logits:softmax(-1):multinomial(1)
function lt.multinomial(probs, num_samples, replacement, opts) end

--- Seeds the default generator of this Lua state. `lt.seed()` seeds it non-deterministically
-- and returns the seed; `lt.initial_seed()` returns the last seed;
-- `lt.get_rng_state()` returns the state as an int64 tensor (which `lt.save` writes) and
-- `lt.set_rng_state(state)` restores it.
-- @int seed
-- @usage lt.manual_seed(0)
-- local s = lt.get_rng_state(); local a = lt.rand(3); lt.set_rng_state(s)   -- lt.rand(3) == a
function lt.manual_seed(seed) end

--- A new random generator, to pass as `{generator = g}`.
-- @int[opt] seed (default 67280421310721, PyTorch's)
-- @return a Generator with methods `g:manual_seed(n)`, `g:seed()`, `g:initial_seed()`,
-- `g:get_state()` and `g:set_state(s)`
function lt.Generator(seed) end

--- The default generator of this Lua state, as a Generator (`lt.manual_seed(n)` is
-- `lt.default_generator:manual_seed(n)`).
-- @table default_generator

---------------------------------------------------------------------------------------------
--- Arithmetic. Every binary op takes a tensor or a number on either side and broadcasts as
-- PyTorch does; the operators `+ - * / // % ^` and unary `-` call them. Each has an in-place
-- method form with a trailing underscore (`x:add_(y)`), which writes into x and returns it.
-- @section arithmetic

--- `x + alpha * y`. Also `lt.sub` (`lt.subtract`), `lt.mul` (`lt.multiply`), `lt.pow`,
-- `lt.maximum`, `lt.minimum`, `lt.atan2` (`lt.arctan2`), `lt.fmod` (the sign of the dividend,
-- C's fmod) and `lt.remainder` (the sign of the divisor, Lua's and Python's `%`). `pow` by one
-- number takes PyTorch's forms for the exponents 1, 2, 3, 0.5, -1, -0.5 and -2 (`x*x*x`,
-- `sqrt(x)`, `1/sqrt(x)`...), in its gradient too, so `-0 ^ -0.5` is -inf as in PyTorch.
-- In place: `x:add_(y)`, `x:sub_(y)` (`x:subtract_`), `x:mul_(y)` (`x:multiply_`),
-- `x:pow_(y)`, `x:atan2_(y)`, `x:fmod_(y)`, `x:remainder_(y)`; each is also a function,
-- `lt.add_(x, y)`.
-- Methods: `x:add`, `x:sub`, `x:subtract`, `x:mul`, `x:multiply`, `x:pow`,
-- `x:maximum`, `x:minimum`, `x:atan2`, `x:arctan2`, `x:fmod`, `x:remainder`.
-- @param x Tensor or number
-- @param y Tensor or number
-- @tparam[opt] table opts `{alpha=1}` (add and sub; alpha may also be the number itself)
-- @treturn Tensor
-- @usage lt.add(x, y, {alpha = 2}); x + 1; 2 ^ x; lt.tensor{7, -7} % 3   --> [1, 2]
function lt.add(x, y, opts) end

--- True division (integers give float32), or with `rounding_mode` the quotient rounded toward
-- zero (`"trunc"`) or down (`"floor"`), when integer inputs stay integer and an integer
-- division by zero raises `ZeroDivisionError`; a rounded quotient has a zero gradient.
-- Also `lt.divide` (the same) and `lt.true_divide` (no rounding_mode). `lt.floor_divide`
-- (`x // y`) is floor division, as PyTorch 1.13 (no gradient: backward through it raises).
-- In place: `x:div_(y)`, `x:divide_(y)`, `x:true_divide_(y)`, `x:floor_divide_(y)`.
-- Methods: `x:div`, `x:divide`, `x:true_divide`, `x:floor_divide`.
-- @param x Tensor or number
-- @param y Tensor or number
-- @tparam[opt] table opts `{rounding_mode = nil | "trunc" | "floor"}`
-- @treturn Tensor
-- @usage lt.tensor{7, -7}:div(2, {rounding_mode = "floor"})   --> tensor([ 3, -4])
function lt.div(x, y, opts) end

--- Elementwise math, one tensor in, one out: `lt.abs` (`lt.absolute`), `lt.neg`
-- (`lt.negative`), `lt.sign`, `lt.sqrt`, `lt.rsqrt`, `lt.square`, `lt.exp`, `lt.expm1`,
-- `lt.log`, `lt.log1p`, `lt.log2`, `lt.sin`, `lt.cos`, `lt.tan`, `lt.asin` (`lt.arcsin`),
-- `lt.acos` (`lt.arccos`), `lt.atan` (`lt.arctan`), `lt.tanh`, `lt.sigmoid`, `lt.erf`,
-- `lt.reciprocal`, `lt.floor`, `lt.ceil`, `lt.round` (half to even), `lt.trunc` (`lt.fix`).
-- In place: `x:abs_()`, `x:neg_()` (`x:negative_`), `x:sign_()`, `x:sqrt_()`, `x:rsqrt_()`,
-- `x:square_()`, `x:exp_()`, `x:expm1_()`, `x:log_()`, `x:log1p_()`, `x:log2_()`, `x:sin_()`,
-- `x:cos_()`, `x:tan_()`, `x:asin_()`, `x:acos_()`, `x:atan_()`, `x:tanh_()`, `x:sigmoid_()`,
-- `x:erf_()`, `x:reciprocal_()`, `x:floor_()`, `x:ceil_()`, `x:round_()`, `x:trunc_()`; each
-- also `lt.exp_(x)`, ...
-- Methods: `x:exp`, `x:abs`, `x:absolute`, `x:neg`, `x:negative`, `x:sign`,
-- `x:sqrt`, `x:rsqrt`, `x:square`, `x:expm1`, `x:log`, `x:log1p`, `x:log2`,
-- `x:sin`, `x:cos`, `x:tan`, `x:asin`, `x:arcsin`, `x:acos`, `x:arccos`,
-- `x:atan`, `x:arctan`, `x:tanh`, `x:sigmoid`, `x:erf`, `x:reciprocal`,
-- `x:floor`, `x:ceil`, `x:round`, `x:trunc`, `x:fix`.
-- @tparam Tensor x
-- @treturn Tensor
function lt.exp(x) end

--- Activations: `lt.relu`, `lt.silu`, `lt.gelu(x, approximate)` (`"none"`, the default, or
-- `"tanh"`), `lt.elu(x, alpha=1)`, `lt.leaky_relu(x, negative_slope=0.01)`,
-- `lt.softplus(x, beta=1, threshold=20)`, `lt.hardsigmoid`, `lt.hardswish`; the parameters
-- may also come as an options table (`lt.elu(x, {alpha = 0.5})`). In place: `x:relu_()`,
-- `x:silu_()`, `x:gelu_()`, `x:elu_()`, `x:leaky_relu_()`, `x:hardsigmoid_()`,
-- `x:hardswish_()`.
-- Methods: `x:relu`, `x:silu`, `x:gelu`, `x:elu`, `x:leaky_relu`, `x:softplus`,
-- `x:hardsigmoid`, `x:hardswish`.
-- @tparam Tensor x
-- @param[opt] ... the activation's parameters
-- @treturn Tensor
function lt.relu(x, ...) end

--- Comparisons, giving bool tensors: `lt.eq`, `lt.ne` (`lt.not_equal`), `lt.lt`
-- (`lt.less`), `lt.le` (`lt.less_equal`), `lt.gt` (`lt.greater`), `lt.ge`
-- (`lt.greater_equal`); logical `lt.logical_and`, `lt.logical_or`, `lt.logical_xor`,
-- `lt.logical_not`; `lt.isnan`, `lt.isfinite`. In place (keeping x's dtype): `x:eq_(y)`,
-- `x:ne_(y)`, `x:lt_(y)`, `x:le_(y)`, `x:gt_(y)`, `x:ge_(y)`, `x:logical_and_(y)`,
-- `x:logical_or_(y)`, `x:logical_xor_(y)`, `x:logical_not_()`.
-- Methods: `x:eq`, `x:ne`, `x:not_equal`, `x:lt`, `x:less`, `x:le`,
-- `x:less_equal`, `x:gt`, `x:greater`, `x:ge`, `x:greater_equal`, `x:logical_and`,
-- `x:logical_or`, `x:logical_xor`, `x:logical_not`, `x:isnan`, `x:isfinite`.
-- @param x Tensor or number
-- @param y Tensor or number
-- @treturn Tensor bool
function lt.eq(x, y) end

--- Limits values to [min, max]; either bound may be nil, a number or a tensor. Also `lt.clip`;
-- in place `x:clamp_(min, max)` (`x:clip_`).
-- Methods: `x:clamp`, `x:clip`.
-- @tparam Tensor x
-- @param min
-- @param max
-- @treturn Tensor
-- @usage lt.clamp(x, 0, 1); lt.clamp(x, {min = 0})
function lt.clamp(x, min, max) end

--- Picks `a` where `cond` is true and `b` elsewhere (broadcasting; a and b may be numbers).
-- The method form is PyTorch's: `a:where(cond, b)`.
-- Method: `x:where`.
-- @tparam Tensor cond bool
-- @param a
-- @param b
-- @treturn Tensor
function lt.where(cond, a, b) end

--- `start + w (end - start)` (for |w| < 0.5, else `end - (end - start) (1 - w)`, PyTorch's
-- form), with `weight` a number or a tensor. Also `lt.addcmul(x, t1, t2, {value=1})` (`x +
-- value t1 t2`) and `lt.addcdiv(x, t1, t2, {value=1})` (`x + value t1 / t2`; `value` may also be
-- a plain number); all three are made of the binary ops and have their gradients. In place:
-- `x:lerp_`, `x:addcmul_`, `x:addcdiv_`.
-- Methods: `x:lerp`, `x:addcmul`, `x:addcdiv`.
-- @tparam Tensor start
-- @tparam Tensor end_
-- @param weight number or Tensor
-- @treturn Tensor
-- @usage ema:lerp_(param, 0.001)   -- an exponential moving average
function lt.lerp(start, end_, weight) end

--- Whether all elements are close: `|x - y| <= atol + rtol * |y|`. `lt.isclose` gives the
-- elementwise bool tensor; `lt.equal(x, y)` asks for the same shape and values.
-- Methods: `x:allclose`, `x:isclose`, `x:equal`.
-- @tparam Tensor x
-- @tparam Tensor y
-- @tparam[opt] table opts `{rtol=1e-5, atol=1e-8, equal_nan=false}` (or rtol, atol, equal_nan
-- as arguments)
-- @treturn boolean
function lt.allclose(x, y, opts) end

---------------------------------------------------------------------------------------------
--- Reductions. Dims are 1-based (negative from the end); a reduction takes its dims as a
-- number, a list or nothing (all dims), then keepdim as a boolean or an options table:
-- `x:sum()`, `x:sum(2)`, `x:sum(2, true)`, `x:sum({1, 2}, true)`, `x:sum({dim = 2, keepdim = true})`.
-- `sum`, `mean`, `prod`, `softmax`, `log_softmax` and `cumsum` also take `{dtype=}` (the input
-- is converted first, as in PyTorch).
-- @section reduce

--- Sum of elements. Also `lt.mean`, `lt.prod`, `lt.amax`, `lt.amin`, `lt.all`, `lt.any`
-- (bool results), `lt.logsumexp`.
-- Methods: `x:sum`, `x:mean`, `x:prod`, `x:amax`, `x:amin`, `x:all`, `x:any`,
-- `x:logsumexp`.
-- @tparam Tensor x
-- @param[opt] dim number or list of dims (all when absent)
-- @param[opt] keepdim boolean or `{dim=, keepdim=, dtype=}`
-- @treturn Tensor
function lt.sum(x, dim, keepdim) end

--- Largest value; with a dim, the values and their 1-based positions along it; with a second
-- tensor, the elementwise maximum. Also `lt.min`; `lt.argmax` / `lt.argmin` give positions
-- (of the flattened tensor without a dim).
-- Methods: `x:max`, `x:min`, `x:argmax`, `x:argmin`.
-- @tparam Tensor x
-- @param[opt] dim
-- @param[opt] keepdim
-- @treturn Tensor values
-- @treturn[opt] Tensor indices (int64, 1-based) when a dim is given
-- @usage local values, idx = x:max(2)
function lt.max(x, dim, keepdim) end

--- Variance with Bessel's correction by default. Also `lt.std`. PyTorch's positional forms
-- `var(dim, unbiased, keepdim)` and `var(unbiased)` work too.
-- Methods: `x:var`, `x:std`.
-- @tparam Tensor x
-- @param[opt] dim
-- @tparam[opt] table opts `{dim=, correction=1, unbiased=true, keepdim=false}`
-- @treturn Tensor
function lt.var(x, dim, opts) end

--- The p-norm (`p` a number, `"fro"`, `"inf"` or `"-inf"`).
-- Method: `x:norm`.
-- @tparam Tensor x
-- @param[opt=2] p
-- @param[opt] dim
-- @param[opt] keepdim (or `{p=, dim=, keepdim=}` in place of all three)
-- @treturn Tensor
function lt.norm(x, p, dim, keepdim) end

--- Softmax along `dim` (required). Also `lt.log_softmax` and `lt.cumsum` (cumulative sum
-- along `dim`).
-- Methods: `x:softmax`, `x:log_softmax`, `x:cumsum`.
-- @tparam Tensor x
-- @param dim number or `{dim=, dtype=}`
-- @treturn Tensor
function lt.softmax(x, dim) end

--- Sorted along `dim` (default the last): the values and their 1-based positions. NaN counts
-- as the largest (last ascending, first descending); the sort is stable, equal elements keep
-- their order (so `stable` changes nothing). Every dtype; the values' gradient goes back to
-- the positions. Also `lt.argsort` (the positions alone).
-- Methods: `x:sort`, `x:argsort`.
-- @tparam Tensor x
-- @param[opt=-1] dim number, or `{dim=, descending=false, stable=}` in place of both
-- @tparam[opt=false] boolean descending
-- @treturn Tensor values
-- @treturn Tensor indices (int64, 1-based)
-- @usage local sorted, order = x:sort(2, true)
function lt.sort(x, dim, descending) end

--- The `k` largest (or smallest) along `dim` (default the last), in order, with their 1-based
-- positions; ties go to the earlier position and NaN counts as the largest. `k` may be 0 up
-- to the dim's size. The values come sorted whatever `sorted` says (PyTorch leaves the order
-- unspecified then). A few of a long row are found without sorting it.
-- Method: `x:topk`.
-- @tparam Tensor x
-- @int k
-- @param[opt=-1] dim number, or `{dim=, largest=true, sorted=true}` in place of the rest
-- @tparam[opt=true] boolean largest
-- @tparam[opt=true] boolean sorted
-- @treturn Tensor values
-- @treturn Tensor indices (int64, 1-based)
-- @usage local probs, ids = logits:softmax(-1):topk(5)
function lt.topk(x, k, dim, largest, sorted) end

--- The distinct values of `x` (all its elements), ascending in sort's order: -0 and +0 are
-- one value, NaNs one value, last (PyTorch keeps each NaN apart). With `return_inverse`, also
-- where each element's value is among them (1-based, `x`'s shape); with `return_counts`, how
-- many elements each has; returned in that order. The values always come sorted; `dim` is not
-- supported.
-- Method: `x:unique`.
-- @tparam Tensor x
-- @tparam[opt] table opts `{sorted=true, return_inverse=false, return_counts=false}`
-- @treturn Tensor values
-- @treturn[opt] Tensor inverse (int64)
-- @treturn[opt] Tensor counts (int64)
-- @usage local words, ids = tokens:unique({return_inverse = true})
function lt.unique(x, opts) end

--- Where each of `values` would go in `sorted`'s last dim (ascending, in sort's order: NaN
-- last): the 1-based position before every equal element, or after them with `right` (or
-- `side = "right"`), from 1 to n + 1. `sorted` is 1-D (one sequence for all values) or has the
-- values' leading dims (a sequence per row); the two compare in their common dtype; `values`
-- may be a number. Also `lt.bucketize(values, boundaries, opts)`, the same with the arguments
-- the other way round.
-- @tparam Tensor sorted
-- @param values Tensor or number
-- @tparam[opt] table opts `{right=false, side="left"}`
-- @treturn Tensor int64, values' shape
-- @usage lt.searchsorted(lt.tensor{1, 3, 5}, lt.tensor{3, 4})   --> tensor([2, 3])
function lt.searchsorted(sorted, values, opts) end

---------------------------------------------------------------------------------------------
--- Matrix products (float32/float64 GEMM through OpenBLAS, transposes passed as flags).
-- @section linalg

--- Matrix product with PyTorch's rules for every rank: 1-D operands are vectors, batched and
-- broadcast for 3-D and more. Also `lt.mm` (2-D x 2-D), `lt.bmm` (3-D batches), `lt.mv`
-- (matrix x vector), `lt.dot` (vector . vector), `lt.outer` (`lt.ger`, vector outer product).
-- Methods: `x:matmul`, `x:mm`, `x:bmm`, `x:mv`, `x:dot`, `x:outer`, `x:ger`.
-- @tparam Tensor a
-- @tparam Tensor b
-- @treturn Tensor
-- @usage x:matmul(w); lt.mm(a, b); lt.outer(u, v)
function lt.matmul(a, b) end

--- `beta * input + alpha * (mat1 @ mat2)`.
-- Method: `x:addmm`.
-- @tparam Tensor input
-- @tparam Tensor mat1
-- @tparam Tensor mat2
-- @tparam[opt] table opts `{beta=1, alpha=1}`
-- @treturn Tensor
function lt.addmm(input, mat1, mat2, opts) end

---------------------------------------------------------------------------------------------
--- Shapes, views and indexing. Dims and positions are 1-based; index tensors hold 1-based
-- positions. A view shares its base's storage, so writing through it writes the base.
-- @section shape

--- Joins tensors along an existing dim. `lt.stack(tensors, dim)` joins along a new dim. Also
-- `lt.concat`.
-- @tab tensors
-- @int[opt=1] dim
-- @treturn Tensor
function lt.cat(tensors, dim) end

--- Splits into views of `size` elements (the last one shorter) or of the listed sizes along
-- `dim`. `lt.chunk(x, n, dim)` makes n pieces; `lt.unbind(x, dim)` gives the slices without
-- the dim.
-- Methods: `x:split`, `x:chunk`, `x:unbind`.
-- @tparam Tensor x
-- @param size number or list of sizes
-- @int[opt=1] dim
-- @treturn table of Tensor views
function lt.split(x, size, dim) end

--- Shape functions that are also methods: `lt.reshape(x, sizes...)` (a view when possible,
-- else a copy), `lt.flatten(x, start=1, end=-1)`, `lt.unflatten(x, dim, sizes)`,
-- `lt.squeeze(x, dim?)`, `lt.unsqueeze(x, dim)`, `lt.permute(x, dims...)`,
-- `lt.transpose(x, d1, d2)` (`lt.swapaxes`, `lt.swapdims`), `lt.t(x)` (2-D or less),
-- `lt.narrow(x, dim, start, length)` (1-based start), `lt.select(x, dim, index)`,
-- `lt.flip(x, dims)`, `lt.tile(x, reps)`, `lt.tril(x, k=0)`, `lt.triu(x, k=0)`. The views
-- (`narrow`, `select`, `transpose`, `permute`, `squeeze`, `unsqueeze`, `flatten` when
-- contiguous) share storage; `flip`, `tile`, `tril` and `triu` copy.
-- Methods: `x:reshape`, `x:flatten`, `x:unflatten`, `x:squeeze`, `x:unsqueeze`,
-- `x:permute`, `x:transpose`, `x:swapaxes`, `x:swapdims`, `x:t`, `x:narrow`,
-- `x:select`, `x:flip`, `x:tile`, `x:tril`, `x:triu`.
-- @tparam Tensor x
-- @param ...
-- @treturn Tensor
-- @usage x:reshape(2, -1); x:narrow(1, 2, 3); x:permute(2, 1); x:flatten(2)
function lt.reshape(x, ...) end

--- The elements moved by `shifts` along `dims` (numbers or lists of the same length), those
-- that fall off the end coming back at the start; without `dims`, over the flattened tensor.
-- Also `lt.movedim(x, source, destination)` (also `moveaxis`: the dims at source moved to
-- destination, the others in order; a view), `lt.broadcast_to(x, sizes)` (`expand`) and
-- `lt.meshgrid(t1, t2, ..., {indexing = "ij"})` (N 1-D tensors as N expanded views of their
-- grid; "xy" swaps the first two dims; the tensors may also come as one list).
-- Methods: `x:roll`, `x:movedim`, `x:moveaxis`, `x:broadcast_to`.
-- @tparam Tensor x
-- @param shifts number or list
-- @param[opt] dims number or list (1-based)
-- @treturn Tensor
-- @usage x:roll(1, 2); x:movedim(1, -1); local gx, gy = lt.meshgrid(xs, ys, {indexing = "xy"})
function lt.roll(x, shifts, dims) end

--- Gathers along `dim` at the 1-based positions in `index`. Also `lt.index_select(x, dim,
-- idx)`, `lt.scatter(x, dim, index, src_or_value)`, `lt.scatter_add(x, dim, index, src)`,
-- `lt.index_add(x, dim, index, src)`, `lt.masked_fill(x, mask, value)` and
-- `lt.masked_select(x, mask)`; in place `x:scatter_(...)`, `x:scatter_add_(...)`,
-- `x:index_add_(...)`, `x:masked_fill_(mask, value)`.
-- Methods: `x:gather`, `x:index_select`, `x:scatter`, `x:scatter_add`,
-- `x:index_add`, `x:masked_fill`, `x:masked_select`.
-- @tparam Tensor x
-- @int dim
-- @tparam Tensor index int64, 1-based
-- @treturn Tensor
function lt.gather(x, dim, index) end

--- The 1-based positions of the non-zero elements (NaN counts, -0 does not), in row-major
-- order, as an int64 `(count, x:dim())` tensor; with `{as_tuple = true}`, one `(count)` tensor
-- per dim, returned in order (`local rows, cols = m:nonzero({as_tuple = true})`). Also
-- `lt.argwhere(x)` (the same as the default form) and `lt.count_nonzero(x, dims)` (how many,
-- over `dims` or all, int64).
-- Methods: `x:nonzero`, `x:argwhere`, `x:count_nonzero`.
-- @tparam Tensor x
-- @tparam[opt] table opts `{as_tuple=false}`
-- @treturn Tensor int64
-- @usage lt.tensor{{0, 3}, {2, 0}}:nonzero()   --> tensor([[1, 2], [2, 1]])
function lt.nonzero(x, opts) end

--- One-hot encoding of 1-based class positions.
-- Method: `x:one_hot`.
-- @tparam Tensor index int64, values in 1..num_classes
-- @int[opt] num_classes (default: the largest value)
-- @treturn Tensor int64 with a new last dim
function lt.one_hot(index, num_classes) end

---------------------------------------------------------------------------------------------
--- Neural-network kernels, wrapped by `lt.nn.functional` (prefer those). `nil` stands for an
-- absent optional tensor; per-dim values are a number or a table of one number per dim.
-- @section nn

--- 2-D convolution of `(N, C_in, H, W)` input with `(C_out, C_in / groups, kH, kW)` weights
-- (im2col and GEMM). Also `lt.conv1d` (`(N, C, L)` input), `lt.conv_transpose1d` and
-- `lt.conv_transpose2d` (options `{stride, padding, output_padding, groups, dilation}`).
-- @tparam Tensor x (N, C, H, W)
-- @tparam Tensor w (out, C/groups, kH, kW)
-- @tparam ?Tensor b or nil
-- @tparam[opt] table opts `{stride=1, padding=0, dilation=1, groups=1}`; padding may be
-- `"valid"` or `"same"`
-- @treturn Tensor
function lt.conv2d(x, w, b, opts) end

--- Max pooling over `(N, C, H, W)` or `(C, H, W)` input. Also `lt.max_pool1d`,
-- `lt.avg_pool1d`, `lt.avg_pool2d` (options `{kernel_size, stride, padding, ceil_mode,
-- count_include_pad=true, divisor_override}`), `lt.adaptive_avg_pool1d(x, size)`,
-- `lt.adaptive_avg_pool2d(x, size)`, `lt.adaptive_max_pool1d(x, size, return_indices)` and
-- `lt.adaptive_max_pool2d(x, size, return_indices)` (size a number or `{h, w}`, -1 keeping
-- the input's). Indices, when asked for, are 1-based flat positions in each input plane.
-- @tparam Tensor x
-- @tparam table opts `{kernel_size=, stride=kernel_size, padding=0, dilation=1,
-- ceil_mode=false, return_indices=false}` (kernel_size may instead be argument 2)
-- @treturn Tensor
-- @treturn[opt] Tensor indices
function lt.max_pool2d(x, opts) end

--- Normalisation kernels: `lt.batch_norm(x, running_mean, running_var, weight, bias,
-- training, momentum, eps)` (running statistics updated in place when training),
-- `lt.layer_norm(x, shape, weight, bias, eps)`, `lt.group_norm(x, groups, weight, bias, eps)`,
-- `lt.rms_norm(x, shape, weight, eps)` (eps nil: the dtype's epsilon).
-- @tparam Tensor x
-- @param ... as listed
-- @return Tensor
function lt.layer_norm(x, ...) end

--- Rows of `weight` at the 1-based positions in `indices`.
-- @tparam Tensor indices int64
-- @tparam Tensor weight (num, dim)
-- @int[opt] padding_idx 1-based (negative from the end)
-- @treturn Tensor
function lt.embedding(indices, weight, padding_idx) end

--- Zeroes elements with probability p and scales the rest by 1/(1-p); returns x itself when
-- not training or p == 0.
-- @tparam Tensor x
-- @number[opt=0.5] p
-- @bool[opt=true] training
-- @tparam[opt] table opts `{generator=}`
-- @treturn Tensor
function lt.dropout(x, p, training, opts) end

--- Fused scaled-dot-product attention, `softmax(q k^T * scale + mask) v` over the last two
-- dims, with the `(L, S)` weights never stored (the backward recomputes them); leading dims
-- broadcast. A bool mask marks the positions that take part, a float one (q's dtype) is
-- added; is_causal keeps key j <= query i and excludes a mask. dropout_p drops weights (the
-- kept ones scaled by `1/(1-p)`) with a mask hashed from one draw of the generator, which the
-- backward recomputes.
-- @tparam Tensor q `(*, L, E)`
-- @tparam Tensor k `(*, S, E)`
-- @tparam Tensor v `(*, S, Ev)`
-- @tparam[opt] Tensor attn_mask broadcasts to `(*, L, S)`
-- @bool[opt=false] is_causal
-- @number[opt] scale default `1/sqrt(E)`
-- @number[opt=0] dropout_p
-- @tparam[opt] table opts `{generator=}`
-- @treturn Tensor `(*, L, Ev)`
function lt.scaled_dot_product_attention(q, k, v, attn_mask, is_causal, scale, dropout_p, opts) end

--- Cross entropy of `(N, C)` (or `(N, C, d...)`) logits against 1-based class indices, one
-- fused log-softmax and NLL pass. `lt.nll_loss(log_probs, target, opts)` takes
-- log-probabilities. `F.cross_entropy` adds class probabilities as targets.
-- @tparam Tensor logits
-- @tparam Tensor target int64, 1-based
-- @tparam[opt] table opts `{weight=, ignore_index=-100, reduction="mean", label_smoothing=0}`
-- (`nll_loss`: no `label_smoothing`)
-- @treturn Tensor
function lt.cross_entropy(logits, target, opts) end

--- One dim of `F.interpolate`'s linear modes: output row `j` along `dim` is x's row `i0[j]`
-- times `1 - w1[j]` plus row `i1[j]` times `w1[j]`, or x's row `i0[j]` where `i1` and `w1` are
-- nil (nearest); one pass each way, the gradient reaching x.
-- @tparam Tensor x float32 or float64
-- @int dim 1-based
-- @tparam Tensor i0 int64 1-d, 1-based positions along `dim`
-- @tparam[opt] Tensor i1 int64, the same length
-- @tparam[opt] Tensor w1 x's dtype, the same length; a constant (one that requires grad is an
-- error)
-- @treturn Tensor x's shape with `dim` of `#i0`
function lt.resample(x, dim, i0, i1, w1) end

--- Mean squared error of input against target (one shape, one float dtype), in one fused pass
-- each way (the gradient reaches both); `lt.l1_loss(input, target, opts)` is the absolute
-- error, `lt.smooth_l1_loss(input, target, opts)` takes `beta` (> 0, default 1) and
-- `lt.huber_loss(input, target, opts)` takes `delta` (> 0, default 1);
-- `lt.binary_cross_entropy_with_logits(input, target, opts)` is the binary cross entropy of
-- logits, without weights. `F.mse_loss` and the others call them, and take other shapes (and
-- BCE's weights) through the elementwise ops.
-- @tparam Tensor input
-- @tparam Tensor target
-- @tparam[opt] table opts `{reduction="mean"}` (`"mean"`, `"sum"` or `"none"`)
-- @treturn Tensor
function lt.mse_loss(input, target, opts) end

---------------------------------------------------------------------------------------------
--- Autograd mode, threads, memory and printing.
-- @section runtime

--- Turns gradient recording on or off for this Lua state; returns the previous mode.
-- `lt.is_grad_enabled()` reads it; `lt.no_grad(fn, ...)` runs fn with it off.
-- @bool on
-- @treturn boolean previous mode
function lt.set_grad_enabled(on) end

--- Sets the number of threads Lantern's parallel loops use (default: the number of cores).
-- Elementwise ops and reductions on 32K elements or more split across the threads; matrix
-- products are cut into blocks (a batch into its entries) over the same threads, OpenBLAS
-- itself running on one. `lt.get_num_threads()` reads it.
-- @int n >= 1
function lt.set_num_threads(n) end

--- The vector instruction level the float32 elementwise kernels run at: `"sse4"` (x86-64-v2),
-- `"avx2"` (AVX2 + FMA) or `"avx512"`, the best this CPU supports, chosen once at start; the
-- environment variable `LANTERN_ISA` picks a lower one (for tests and comparisons).
-- @treturn string
function lt.isa() end

--- Which float32 matrix product runs: `"openblas"`, or `"lantern"` (Lantern's own packed GEMM at
-- the vector level of `lt.isa()`), chosen once at start: Lantern's where the kernel set OpenBLAS
-- runs is below that level (OpenBLAS falls back to its generic "Prescott" set, without FMA, on
-- processors newer than its tables; its "Haswell" set is AVX2 on an AVX-512 machine).
-- `LANTERN_GEMM=openblas` or `lantern` forces either. float64 products always use OpenBLAS.
-- @treturn string `"lantern"` or `"openblas"`
-- @treturn string the kernel set OpenBLAS chose for this CPU, e.g. `"Haswell"`, `"SkylakeX"`
function lt.gemm() end

--- The canonical name of a device: `lt.device("cpu:0")` is `"cpu"`, `lt.device("cuda")` is
-- `"cuda"`, `lt.device("cuda:1")` is `"cuda:1"`. Devices are strings, as dtypes are; a name
-- that is no device raises (`device: unknown device 'tpu' (known: cpu, cuda)`). The device
-- need not be available, as with `torch.device`.
-- @string name
-- @treturn string
function lt.device(name) end

--- Where creation functions (`zeros`, `randn`, `tensor`, `arange`, ...) put tensors from now on
-- in this Lua state, as `torch.set_default_device`; `"cpu"` to begin with. An option
-- `{device=}` still wins. The device must be available.
-- @string name a device name
function lt.set_default_device(name) end

--- The device creation functions use (see `set_default_device`).
-- @treturn string
function lt.get_default_device() end

--- Statistics of the buffer cache behind every tensor (process-wide).
-- `lt.reset_peak_memory_stats()` starts `peak_in_use` again from `in_use`.
-- @treturn table `{in_use=, cached=, peak_in_use=, fresh_allocs=, reused=, full_collections=}`
-- (bytes and counts; full_collections counts the collections Lantern started for tensor
-- memory)
function lt.memory_stats() end

--- Returns every cached buffer to the system.
function lt.empty_cache() end

--- Settings of the buffer cache: blocks unused for `release_after` seconds go back to the
-- system (0 keeps them until `lt.empty_cache()`), and at most `max_cached` bytes stay cached.
-- @tparam table opts `{release_after=, max_cached=}`
-- @treturn table the previous settings
function lt.set_cache_options(opts) end

--- Takes `t` out of every release scope (`lt.tidy`), so it outlives them; other values pass
-- through unchanged.
-- @param t a tensor (or anything)
-- @return t
function lt.keep(t) end

--- Whether the handle `t` was released (by `t:free()`, a `<close>` variable or the end of a
-- `lt.tidy` scope); a released handle raises when used.
-- @tparam Tensor t
-- @treturn boolean
function lt.is_released(t) end

--- A monotonic wall clock in seconds, for timing.
-- @treturn number
function lt.clock() end

---------------------------------------------------------------------------------------------
--- Submodules and functions that load on first use.
-- @section lazy

--- Saves `obj` (tensors, nested tables, numbers, strings, booleans) in PyTorch's `torch.save`
-- format; the same function as `lt.serialization.save`. `lt.load(path, opts)` reads such
-- files (`lt.serialization.load`), `lt.save_module(m, path)` and `lt.load_module(m, path)`
-- save and load a module's state_dict atomically, in `.pt` or `.safetensors` format by the
-- extension; `lt.safetensors` is `lt.serialization.safetensors`.
-- @param obj
-- @string path
-- @usage lt.save(model:state_dict(), "model.pt"); model:load_state_dict(lt.load("model.pt"))
function lt.save(obj, path) end

--- Where warnings go: `true` (stderr, the default), `false` (nowhere) or a function that
-- receives each warning's text; returns the previous setting. `lt.get_warnings()` reads it.
-- The same functions as `lt.warnings.set` and `lt.warnings.get`.
-- @param v boolean or function
function lt.set_warnings(v) end

--- The submodules, each loaded when first read: `lt.nn` (layers, `lt.nn.functional`,
-- `lt.nn.init`, `lt.nn.utils`), `lt.optim` (optimisers, `lt.optim.lr_scheduler`), `lt.data`
-- (datasets and loaders), `lt.autograd` (`grad`, custom `Function`, `gradcheck`),
-- `lt.serialization` (PyTorch checkpoints, safetensors), `lt.warnings`, `lt.utils` (the
-- progress bar `lt.utils.progress`), `lt.distributed` (many processes, over MPI),
-- `lt.cuda` (the CUDA plugin: `is_available`, `device_count`, `unavailable_reason`,
-- `memory_stats`, `empty_cache`, `synchronize`), and
-- `lt.Tensor`, the table of tensor methods (add one to
-- give every tensor a method).
-- @table submodules

return lt
