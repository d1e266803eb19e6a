--- Tensor functions of `lantern` that are written in C (the core and its binding).
--
-- LDoc cannot read C, so this file holds documentation stubs for the functions that
-- `require "lantern"` gets from `lantern.core`; it is never loaded. Every function here is
-- also a `Tensor` method where PyTorch has one (`lt.add(x, y)` is `x:add(y)`); see the
-- `lantern.Tensor` page for methods and properties.
--
-- Conventions:
--
-- * Options come as a trailing table: `lt.zeros(2, 3, {dtype = "float64", requires_grad = true})`.
-- * Sizes are given as separate numbers or as one table: `lt.zeros(2, 3)` or `lt.zeros({2, 3})`.
-- * Dtypes are `"float32"` (the default), `"float64"`, `"int64"` and `"bool"` (also `"float"`,
--   `"double"`, `"long"`). Lua integers make int64 tensors, Lua floats float32.
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
-- int64, any float gives float32, booleans give bool, unless `opts.dtype` says otherwise.
-- @param data nested table, number, boolean or Tensor
-- @tparam[opt] table opts `{dtype=, requires_grad=}`
-- @treturn Tensor
-- @usage local x = lt.tensor{{1.5, 2}, {3, 4}}   -- float32, 2x2
function lt.tensor(data, opts) end

--- A tensor of zeros. Also `lt.ones`, `lt.empty` (uninitialised memory from the buffer cache).
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

--- Tensors shaped like `t`: `lt.zeros_like`, `lt.ones_like`, `lt.empty_like`,
-- `lt.full_like(t, value)`, `lt.rand_like`, `lt.randn_like`, `lt.randint_like(t, low?, high)`.
-- @tparam Tensor t
-- @tparam[opt] table opts `{dtype=, requires_grad=}` (dtype defaults to t's)
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

---------------------------------------------------------------------------------------------
--- Random numbers. Each `lua_State` has its own default generator; values are drawn in
-- row-major order, so a seed gives the same tensor whatever the thread count.
-- @section random

--- Uniform values in [0, 1). `lt.randn` draws from the standard normal distribution.
-- @param ... sizes, as numbers or one table
-- @tparam[opt] table opts `{dtype=, requires_grad=, generator=}`
-- @treturn Tensor
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

--- 1 with probability `probs[i]`, elementwise; same dtype as `probs`.
-- @tparam Tensor probs
-- @tparam[opt] table opts `{generator=}`
-- @treturn Tensor
function lt.bernoulli(probs, opts) end

--- Seeds the default generator of this Lua state. `lt.seed()` seeds it non-deterministically
-- and returns the seed; `lt.initial_seed()` returns the last seed;
-- `lt.get_rng_state()` / `lt.set_rng_state(state)` save and restore it.
-- @int seed
function lt.manual_seed(seed) end

--- A new random generator, to pass as `{generator = g}`.
-- @int[opt] seed (default 67280421310721, PyTorch's)
-- @return a Generator with methods `manual_seed`, `seed`, `initial_seed`, `get_state`, `set_state`
function lt.Generator(seed) end

---------------------------------------------------------------------------------------------
--- Elementwise operations. Every binary op takes a tensor or a number on either side and
-- broadcasts as PyTorch does; the operators `+ - * / % ^` and unary `-` call them. Each has
-- an in-place method form with a trailing underscore (`x:add_(y)`).
-- @section elementwise

--- `x + alpha * y`. Also `lt.sub` (`lt.subtract`), `lt.mul` (`lt.multiply`), `lt.div`
-- (`lt.divide`, `lt.true_divide`), `lt.pow`, `lt.remainder` (sign of the divisor, Lua's `%`),
-- `lt.fmod` (sign of the dividend), `lt.atan2` (`lt.arctan2`), `lt.maximum`, `lt.minimum`.
-- @param x Tensor or number
-- @param y Tensor or number
-- @tparam[opt] table opts `{alpha=1}` (add and sub)
-- @treturn Tensor
function lt.add(x, y, opts) end

--- Elementwise math, one tensor in, one out: `abs` (`absolute`), `neg` (`negative`), `sign`,
-- `sqrt`, `rsqrt`, `square`, `exp`, `expm1`, `log`, `log1p`, `log2`, `sin`, `cos`, `tan`,
-- `asin` (`arcsin`), `acos` (`arccos`), `atan` (`arctan`), `tanh`, `sigmoid`, `erf`,
-- `reciprocal`, `floor`, `ceil`, `round`, `trunc` (`fix`).
-- @tparam Tensor x
-- @treturn Tensor
function lt.exp(x) end

--- Activations: `relu`, `silu`, `softplus`, `elu(x, alpha=1)`, `leaky_relu(x, slope=0.01)`,
-- `gelu(x, approximate="none"|"tanh")`.
-- @tparam Tensor x
-- @treturn Tensor
function lt.relu(x) end

--- Comparisons, giving bool tensors: `eq`, `ne` (`not_equal`), `lt` (`less`), `le`
-- (`less_equal`), `gt` (`greater`), `ge` (`greater_equal`); logical `logical_and`,
-- `logical_or`, `logical_xor`, `logical_not`; `isnan`, `isfinite`.
-- @param x Tensor or number
-- @param y Tensor or number
-- @treturn Tensor bool
function lt.eq(x, y) end

--- Limits values to [min, max]; either bound may be nil, a number or a tensor. Also `clip`.
-- @tparam Tensor x
-- @param min
-- @param max
-- @treturn Tensor
-- @usage lt.clamp(x, 0, 1); lt.clamp(x, {min = 0})
function lt.clamp(x, min, max) end

--- Picks `a` where `cond` is true and `b` elsewhere (broadcasting; a and b may be numbers).
-- @tparam Tensor cond bool
-- @param a
-- @param b
-- @treturn Tensor
function lt.where(cond, a, b) end

--- Whether all elements are close: `|x - y| <= atol + rtol * |y|`. `lt.isclose` gives the
-- elementwise bool tensor; `lt.equal` asks for the same shape and values.
-- @tparam Tensor x
-- @tparam Tensor y
-- @tparam[opt] table opts `{rtol=1e-5, atol=1e-8, equal_nan=false}`
-- @treturn boolean
function lt.allclose(x, y, opts) end

---------------------------------------------------------------------------------------------
--- Reductions. Dims are 1-based (negative from the end); a reduction takes its dims as a
-- number, a list or nothing (all dims), then keepdim as a boolean or an options table:
-- `x:sum()`, `x:sum(2)`, `x:sum(2, true)`, `x:sum({1, 2}, true)`, `x:sum({dim = 2, keepdim = true})`.
-- @section reduce

--- Sum of elements. Also `mean`, `prod`, `amax`, `amin`, `all`, `any`, `logsumexp`.
-- @tparam Tensor x
-- @param[opt] dim number or list of dims (all when absent)
-- @param[opt] keepdim boolean or `{dim=, keepdim=}`
-- @treturn Tensor
function lt.sum(x, dim, keepdim) end

--- Largest value; with a dim, the values and their 1-based positions along it; with a second
-- tensor, the elementwise maximum. Also `lt.min`; `lt.argmax` / `lt.argmin` give positions.
-- @tparam Tensor x
-- @param[opt] dim
-- @param[opt] keepdim
-- @treturn Tensor values
-- @treturn[opt] Tensor indices (int64, 1-based) when a dim is given
function lt.max(x, dim, keepdim) end

--- Variance with Bessel's correction by default. Also `lt.std`.
-- @tparam Tensor x
-- @param[opt] dim
-- @tparam[opt] table opts `{correction=1, unbiased=true, keepdim=false}`
-- @treturn Tensor
function lt.var(x, dim, opts) end

--- The p-norm (`p` a number, `"fro"`, `"inf"` or `"-inf"`).
-- @tparam Tensor x
-- @param[opt=2] p
-- @param[opt] dim
-- @param[opt] keepdim
-- @treturn Tensor
function lt.norm(x, p, dim, keepdim) end

--- Softmax along `dim` (required). Also `lt.log_softmax`, `lt.cumsum`.
-- @tparam Tensor x
-- @param dim number or `{dim=}`
-- @treturn Tensor
function lt.softmax(x, dim) end

---------------------------------------------------------------------------------------------
--- Matrix products (OpenBLAS).
-- @section linalg

--- Matrix product with PyTorch's broadcasting rules for 1-D and batched operands. Also
-- `lt.mm` (2-D), `lt.bmm` (3-D), `lt.mv`, `lt.dot`, `lt.outer` (`lt.ger`).
-- @tparam Tensor a
-- @tparam Tensor b
-- @treturn Tensor
function lt.matmul(a, b) end

--- `beta * input + alpha * (mat1 @ mat2)`.
-- @tparam Tensor input
-- @tparam Tensor mat1
-- @tparam Tensor mat2
-- @tparam[opt] table opts `{beta=1, alpha=1}`
-- @treturn Tensor
function lt.addmm(input, mat1, mat2, opts) end

---------------------------------------------------------------------------------------------
--- Shapes, views and indexing. Dims and positions are 1-based; index tensors hold 1-based
-- positions.
-- @section shape

--- Joins tensors along an existing dim. `lt.stack` joins along a new dim. Also `lt.concat`.
-- @tab tensors
-- @int[opt=1] dim
-- @treturn Tensor
function lt.cat(tensors, dim) end

--- Splits into pieces of `size` (or of the listed sizes) along `dim`. `lt.chunk(x, n, dim)`
-- makes n pieces; `lt.unbind(x, dim)` removes the dim.
-- @tparam Tensor x
-- @param size number or list of sizes
-- @int[opt=1] dim
-- @treturn table of Tensor views
function lt.split(x, size, dim) end

--- Shape functions that are also methods: `reshape(x, sizes...)`, `flatten(x, start=1, end=-1)`,
-- `unflatten(x, dim, sizes)`, `squeeze(x, dim?)`, `unsqueeze(x, dim)`, `permute(x, dims...)`,
-- `transpose(x, d1, d2)` (`swapaxes`, `swapdims`), `t(x)`, `narrow(x, dim, start, length)`,
-- `select(x, dim, index)`, `flip(x, dims)`, `tile(x, reps)`, `tril(x, k=0)`, `triu(x, k=0)`.
-- @tparam Tensor x
-- @param ...
-- @treturn Tensor
function lt.reshape(x, ...) end

--- Gathers along `dim` at the 1-based positions in `index`. Also `index_select(x, dim, idx)`,
-- `scatter(x, dim, index, src)`, `scatter_add`, `index_add(x, dim, index, src)`,
-- `masked_fill(x, mask, value)`, `masked_select(x, mask)`.
-- @tparam Tensor x
-- @int dim
-- @tparam Tensor index int64, 1-based
-- @treturn Tensor
function lt.gather(x, dim, index) end

--- One-hot encoding of 1-based class positions.
-- @tparam Tensor index int64, values in 1..num_classes
-- @int[opt] num_classes (default: the largest value)
-- @treturn Tensor int64 with a new last dim
function lt.one_hot(index, num_classes) end

---------------------------------------------------------------------------------------------
--- Neural-network kernels, wrapped by `lt.nn.functional` (prefer those). `nil` stands for an
-- absent optional tensor; per-dim values are a number or a table of one number per dim.
-- @section nn

--- 2-D convolution (`lt.conv1d` for 1-D; `lt.conv_transpose1d`, `lt.conv_transpose2d`).
-- @tparam Tensor x (N, C, H, W)
-- @tparam Tensor w (out, C/groups, kH, kW)
-- @tparam ?Tensor b or nil
-- @tparam[opt] table opts `{stride=1, padding=0, dilation=1, groups=1}`; padding may be
-- `"valid"` or `"same"`
-- @treturn Tensor
function lt.conv2d(x, w, b, opts) end

--- Max pooling (`lt.max_pool1d`; `lt.avg_pool1d`, `lt.avg_pool2d`; `lt.adaptive_avg_pool1d/2d`,
-- `lt.adaptive_max_pool1d/2d`). Indices, when asked for, are 1-based flat positions in each
-- input plane.
-- @tparam Tensor x
-- @tparam table opts `{kernel_size=, stride=kernel_size, padding=0, dilation=1,
-- ceil_mode=false, return_indices=false}`
-- @treturn Tensor
-- @treturn[opt] Tensor indices
function lt.max_pool2d(x, opts) end

--- Normalisation kernels: `batch_norm(x, running_mean, running_var, weight, bias, training,
-- momentum, eps)`, `layer_norm(x, shape, weight, bias, eps)`, `group_norm(x, groups, weight,
-- bias, eps)`, `rms_norm(x, shape, weight, eps)`.
-- @tparam Tensor x
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

---------------------------------------------------------------------------------------------
--- Autograd, threads and memory.
-- @section runtime

--- Turns gradient recording on or off for this Lua state; returns the previous mode.
-- `lt.is_grad_enabled()` reads it; `lt.no_grad(fn, ...)` runs fn with it off.
-- @bool on
-- @treturn boolean previous mode
function lt.set_grad_enabled(on) end

--- Sets the thread budget shared by Lantern's parallel loops and OpenBLAS.
-- `lt.get_num_threads()` reads it.
-- @int n >= 1
function lt.set_num_threads(n) end

--- Statistics of the buffer cache behind every tensor (process-wide).
-- @treturn table `{in_use=, cached=, peak_in_use=, fresh_allocs=, reused=}` (bytes and counts)
function lt.memory_stats() end

--- Returns every cached buffer to the system.
function lt.empty_cache() end

--- Whether `v` is a Tensor.
-- @param v
-- @treturn boolean
function lt.is_tensor(v) end

--- A monotonic wall clock in seconds, for timing.
-- @treturn number
function lt.clock() end

return lt
