/*
** lantern_ops.h -- the op layer of Lantern as a C API: what a host with no Lua calls.
**
** Include it after (or instead of) lantern.h, which it includes. Link with the static library
** and the core's own libraries; no Lua library is needed when the host calls only lt_*:
**
**     cc host.c -Iinclude build/liblantern.a -lopenblas -lz -lm -lpthread
**
** Contract of every function here (the rules of lantern.h, spelled out for ops)
** -------------------------------------------------------------------------------
** - Status: 0 on success, -1 on failure with the message in lt_errmsg(ctx), which names the op,
**   the shapes or dtypes involved and what was expected. On failure nothing was written: no
**   *out is set, and the inputs (in-place ops' targets included) hold their old values.
** - Ownership: tensor arguments are borrowed (the op takes its own references where it keeps
**   one, e.g. for autograd). Each `lt_tensor **out` receives one new reference that the caller
**   drops with lt_release(); an op that may return its input (lt_contiguous on a contiguous
**   tensor, lt_to_dtype to the same dtype, dropout in eval mode) returns a new reference to it.
** - Ops ending in `_` write into their first tensor argument in place.
** - Autograd: while grad mode is on (lt_set_grad_enabled) and an input requires grad, ops
**   record the graph that lt_backward runs; a host that only infers turns grad mode off.
** - Positions count from 0; a negative dim counts from the end (-1 is the last). Index tensors
**   are int64 holding positions counted from `base` (pass 0 from C; the Lua binding passes 1).
**   Error messages name dims as the Lua binding counts them, from 1.
** - Shapes are given as (ndim, const int64_t *size); ndim <= LT_MAX_DIMS.
** - Every output lives on its inputs' device; inputs of one op share a device.
**
** Op codes are append-only: their values reach the binding and never renumber.
*/
#ifndef LANTERN_OPS_H
#define LANTERN_OPS_H

#include "lantern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ op codes */

/* Binary ops of lt_binary and its scalar / in-place forms. */
enum lt_binop {
  LT_ADD, LT_SUB, LT_MUL, LT_DIV, LT_POW, LT_MAXIMUM, LT_MINIMUM,
  LT_EQ, LT_NE, LT_LT, LT_LE, LT_GT, LT_GE, LT_LAND, LT_LOR, LT_LXOR,
  LT_ATAN2, LT_FMOD, LT_REMAINDER,
  LT_DIV_TRUNC, LT_DIV_FLOOR,   /* div with rounding_mode "trunc" / "floor" (zero gradient) */
  LT_FLOOR_DIVIDE,              /* floor_divide, `//`: DIV_FLOOR with no derivative (PyTorch) */
  LT_NBINOP
};

/* Unary ops of lt_unary; p0 and p1 are the parameters noted (0 otherwise). */
enum lt_unop {
  LT_NEG, LT_ABS, LT_SIGN, LT_EXP, LT_LOG, LT_LOG1P, LT_SQRT, LT_RSQRT, LT_SIN, LT_COS,
  LT_TANH, LT_SIGMOID, LT_RELU, LT_GELU, LT_SILU, LT_LNOT, LT_ISNAN, LT_ISFINITE,
  LT_RECIPROCAL, LT_SQUARE, LT_FLOOR, LT_CEIL, LT_ROUND, LT_TRUNC, LT_EXPM1, LT_LOG2,
  LT_ERF, LT_LEAKY_RELU /* p0 = slope */, LT_ELU /* p0 = alpha */, LT_GELU_TANH,
  LT_SOFTPLUS /* p0 = beta, p1 = threshold */, LT_TAN, LT_ASIN, LT_ACOS, LT_ATAN,
  LT_HARDSIGMOID, LT_HARDSWISH, LT_NUNOP
};

/* Reductions of lt_reduce. */
enum lt_redop { LT_RSUM, LT_RMEAN, LT_RPROD, LT_RAMAX, LT_RAMIN, LT_RALL, LT_RANY, LT_NREDOP };

/* How a loss folds its per-element values (PyTorch's reduction 'none', 'mean', 'sum'). */
enum lt_reduction { LT_REDUCTION_NONE, LT_REDUCTION_MEAN, LT_REDUCTION_SUM };

/* lt_squeeze's dim that drops every dim of size 1. */
#define LT_SQUEEZE_ALL (-1000)

/* ==================================================== creation and copies */

/* New contiguous tensor of dtype dt and shape (ndim, size) with every element v. */
LT_API int lt_full(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim, const int64_t *size,
                   double v);
/* t[...] = v; t[...] = 0. */
LT_API int lt_fill_(lt_ctx *ctx, lt_tensor *t, double v);
LT_API int lt_zero_(lt_ctx *ctx, lt_tensor *t);
/* 1-d [start, end) by step (step != 0), computed in double. */
LT_API int lt_arange(lt_ctx *ctx, lt_tensor **out, double start, double end, double step,
                     lt_dtype dt);
/* int64 arange with exact integer arithmetic (any int64 range). */
LT_API int lt_arange_int(lt_ctx *ctx, lt_tensor **out, int64_t start, int64_t end, int64_t step);
/* steps values from start to end inclusive (steps >= 0). */
LT_API int lt_linspace(lt_ctx *ctx, lt_tensor **out, double start, double end, int64_t steps,
                       lt_dtype dt);
/* n x m with ones on the diagonal. */
LT_API int lt_eye(lt_ctx *ctx, lt_tensor **out, int64_t n, int64_t m, lt_dtype dt);
/* dst[...] = src[...], src broadcast to dst's shape and converted to its dtype. */
LT_API int lt_copy_(lt_ctx *ctx, lt_tensor *dst, lt_tensor *src);
/* dst = the value of the 0-d tensor `value`, recorded as copy_ is (PyTorch's fill_(Tensor),
** which x[i] = v runs): unlike copy_ it accepts an expanded dst. */
LT_API int lt_fill_tensor_(lt_ctx *ctx, lt_tensor *dst, lt_tensor *value);
/* A contiguous copy with its own storage (differentiable). */
LT_API int lt_clone(lt_ctx *ctx, lt_tensor **out, lt_tensor *t);
/* t itself (a new reference) when contiguous, else a contiguous copy. */
LT_API int lt_contiguous(lt_ctx *ctx, lt_tensor **out, lt_tensor *t);
/* t converted to dt; t itself (a new reference) when it already has dt. */
LT_API int lt_to_dtype(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt);
/* A view of t's storage with no history (requires_grad off). */
LT_API int lt_detach(lt_ctx *ctx, lt_tensor **out, lt_tensor *t);

/* ============================================================ elementwise */

/* out = a op b with broadcasting and PyTorch's promotion; comparisons give bool. */
LT_API int lt_binary(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a,
                     lt_tensor *b);
/* out = a op s (s op a when reverse); s_is_int: s is an integer (it then never makes an int64
** tensor float). A number never widens a float tensor. */
LT_API int lt_binary_scalar(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a,
                            double s, bool s_is_int, bool reverse);
/* a = a op b (b broadcasts to a's shape; the result must fit a's dtype). */
LT_API int lt_binary_(lt_ctx *ctx, enum lt_binop op, lt_tensor *a, lt_tensor *b);
LT_API int lt_binary_scalar_(lt_ctx *ctx, enum lt_binop op, lt_tensor *a, double s);
/* out = op(a) with the parameters p0, p1 of enum lt_unop. */
LT_API int lt_unary(lt_ctx *ctx, lt_tensor **out, enum lt_unop op, lt_tensor *a, double p0,
                    double p1);
LT_API int lt_unary_(lt_ctx *ctx, enum lt_unop op, lt_tensor *a, double p0, double p1);
/* out = min(max(a, *lo), *hi); lo or hi NULL: no bound on that side. */
LT_API int lt_clamp(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const double *lo,
                    const double *hi);
LT_API int lt_clamp_(lt_ctx *ctx, lt_tensor *a, const double *lo, const double *hi);
/* out = cond ? a : b (cond bool; the three broadcast together). */
LT_API int lt_where(lt_ctx *ctx, lt_tensor **out, lt_tensor *cond, lt_tensor *a, lt_tensor *b);
/* |a - b| <= atol + rtol * |b| elementwise (bool tensor). */
LT_API int lt_isclose(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b, double rtol,
                      double atol, bool equal_nan);
/* *res = every element isclose. */
LT_API int lt_allclose(lt_ctx *ctx, bool *res, lt_tensor *a, lt_tensor *b, double rtol,
                       double atol, bool equal_nan);
/* *res = same shape and equal values. */
LT_API int lt_equal(lt_ctx *ctx, bool *res, lt_tensor *a, lt_tensor *b);
/* PyTorch's result dtype of a op b (zero-dim tensors join only with a higher category). */
LT_API lt_dtype lt_result_type(const lt_tensor *a, const lt_tensor *b);

/* ======================================================= views and shape
** Views share t's storage; the rest copy. */

/* t with shape (ndim, size), one size may be -1: a view (fails when strides do not allow it);
** reshape copies when they do not. */
LT_API int lt_view(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim, const int64_t *size);
LT_API int lt_reshape(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim,
                      const int64_t *size);
/* Swaps dims d0 and d1; permute reorders every dim (perm has t's rank). */
LT_API int lt_transpose(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int d0, int d1);
LT_API int lt_permute(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, const int *perm);
/* Broadcasts dims of size 1 to (ndim, size) with stride 0 (-1 keeps a size). */
LT_API int lt_expand(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim, const int64_t *size);
/* len elements of dim from start; select drops dim at index. */
LT_API int lt_narrow(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, int64_t start,
                     int64_t len);
LT_API int lt_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, int64_t index);
/* Drops dim when its size is 1 (LT_SQUEEZE_ALL: every dim of size 1); unsqueeze inserts one. */
LT_API int lt_squeeze(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim);
LT_API int lt_unsqueeze(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim);
/* Joins n tensors along an existing dim (cat) or a new one (stack). */
LT_API int lt_cat(lt_ctx *ctx, lt_tensor **out, int n, lt_tensor *const *ts, int dim);
LT_API int lt_stack(lt_ctx *ctx, lt_tensor **out, int n, lt_tensor *const *ts, int dim);
/* flatten dims [start, end] into one (a view when possible); unflatten splits dim into sizes
** (one may be -1); repeat tiles (n >= ndim repeats); flip reverses dims (copies);
** tril/triu keep the elements with j - i <= k / j - i >= k of the last two dims */
LT_API int lt_flatten(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int start, int end);
LT_API int lt_unflatten(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, int n,
                        const int64_t *sizes);
LT_API int lt_repeat(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int n,
                     const int64_t *repeats);
LT_API int lt_flip(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int n, const int *dims);
LT_API int lt_tril(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t k);
LT_API int lt_triu(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t k);

/* ================================================================ indexing
** Out-of-range indices fail before any write. */

/* out = t's slices along dim at index (1-d). */
LT_API int lt_index_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim,
                           lt_tensor *index, int64_t base);
/* t (a copy, or t itself in place) with src's slices added at index along dim. */
LT_API int lt_index_add(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                        lt_tensor *src, int64_t base);
LT_API int lt_index_add_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, lt_tensor *src,
                         int64_t base);
/* out[p] = t[p with p[dim] = index[p]] (out has index's shape). */
LT_API int lt_gather(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                     int64_t base);
/* t[p with p[dim] = index[p]] = src[p] (or value; _add: +=), into a copy or in place. */
LT_API int lt_scatter(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                      lt_tensor *src, int64_t base);
LT_API int lt_scatter_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, lt_tensor *src,
                       int64_t base);
LT_API int lt_scatter_value(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim,
                            lt_tensor *index, double value, int64_t base);
LT_API int lt_scatter_value_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, double value,
                             int64_t base);
LT_API int lt_scatter_add(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                          lt_tensor *src, int64_t base);
LT_API int lt_scatter_add_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, lt_tensor *src,
                           int64_t base);
/* mask is bool and broadcasts against t (in place: to t's shape) */
LT_API int lt_masked_fill(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_tensor *mask, double v);
LT_API int lt_masked_fill_(lt_ctx *ctx, lt_tensor *t, lt_tensor *mask, double v);
/* 1-d: t's elements where mask is set, in row-major order. */
LT_API int lt_masked_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_tensor *mask);
/* int64 (count, ndim): the positions (from base) of t's non-zero elements, row-major. */
LT_API int lt_nonzero(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t base);
/* int64 classes (from base) to an int64 tensor of shape [..., num_classes]; -1 infers it */
LT_API int lt_one_hot(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t num_classes,
                      int64_t base);

/* ============================================================== reductions
** dims NULL / ndims 0 means all dims; keepdim keeps them with size 1. */

LT_API int lt_reduce(lt_ctx *ctx, lt_tensor **out, enum lt_redop op, lt_tensor *a, int ndims,
                     const int *dims, bool keepdim);
/* Full max/min (0-dim result; gradient shared among ties as PyTorch's MaxBackward1). */
LT_API int lt_max(lt_ctx *ctx, lt_tensor **out, lt_tensor *a);
LT_API int lt_min(lt_ctx *ctx, lt_tensor **out, lt_tensor *a);
/* Along one dim: values and int64 indices counted from `base`; the first occurrence wins and
** NaN counts as the largest and the smallest. */
LT_API int lt_max_dim(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a,
                      int dim, bool keepdim, int64_t base);
LT_API int lt_min_dim(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a,
                      int dim, bool keepdim, int64_t base);
/* int64 indices (from base) along *dim, or into the flattened tensor when dim is NULL. */
LT_API int lt_argmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const int *dim, bool keepdim,
                     int64_t base);
LT_API int lt_argmin(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const int *dim, bool keepdim,
                     int64_t base);
/* a sorted along dim, ascending or descending: values and int64 indices counted from base.
** NaN counts as the largest; the sort is stable (equal elements keep their order). */
LT_API int lt_sort(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int dim,
                   bool descending, int64_t base);
/* The indices of lt_sort alone. */
LT_API int lt_argsort(lt_ctx *ctx, lt_tensor **indices, lt_tensor *a, int dim, bool descending,
                      int64_t base);
/* The k largest (smallest) along dim, in order, with their indices; k at most the dim's size.
** Ties are taken in position order. */
LT_API int lt_topk(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int64_t k,
                   int dim, bool largest, int64_t base);
/* t's distinct values, ascending (NaNs as one value, last), and optionally (inverse, counts
** may be NULL) where each element's value is among them (t's shape, counted from base) and
** how many elements each has. */
LT_API int lt_unique(lt_ctx *ctx, lt_tensor **values, lt_tensor **inverse, lt_tensor **counts,
                     lt_tensor *t, int64_t base);
/* int64 positions (from base) where each value of `values` would go in sorted's last dim,
** which is ascending (NaN the largest): before every equal element, or after them when right.
** sorted is 1-d or has the values' leading dims; the two are compared in their common dtype. */
LT_API int lt_searchsorted(lt_ctx *ctx, lt_tensor **out, lt_tensor *sorted, lt_tensor *values,
                           bool right, int64_t base);
/* sum((x - mean)^2) / max(0, N - correction); PyTorch's default correction is 1. */
LT_API int lt_var(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
                  double correction, bool keepdim);
LT_API int lt_std(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
                  double correction, bool keepdim);
/* Vector p-norm over dims: p = 2, 1, 0 (count), +-INFINITY (max/min |x|) or any other p. */
LT_API int lt_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, double p, int ndims,
                   const int *dims, bool keepdim);
/* log(sum(exp(x))), shifted by the max; integer inputs give float32. */
LT_API int lt_logsumexp(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
                        bool keepdim);
/* softmax / log_softmax along dim (float inputs). */
LT_API int lt_softmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim);
LT_API int lt_log_softmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim);
/* Running sum along dim; integer and bool inputs give int64. */
LT_API int lt_cumsum(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim);

/* ========================================================== linear algebra */

/* PyTorch's matmul: 1-d and 2-d products, batch dims broadcast. */
LT_API int lt_matmul(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b);
/* (n,k) @ (k,m); bmm (B,n,k) @ (B,k,m); mv (n,k) @ (k); dot and outer of two 1-d tensors. */
LT_API int lt_mm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b);
LT_API int lt_bmm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b);
LT_API int lt_mv(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *v);
LT_API int lt_dot(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b);
LT_API int lt_outer(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b);
/* out = beta * input + alpha * (a @ b), a (n,k), b (k,m); input broadcasts to (n,m). A linear
** layer is lt_addmm(ctx, &y, bias, x, weight_t, 1, 1) with weight_t a transposed view. */
LT_API int lt_addmm(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *a, lt_tensor *b,
                    double beta, double alpha);

/* ============================================================== nn kernels
** Spatial arrays are in the op's dimension order (1-d ops use index 0 only). Optional tensors
** (bias, weight, running stats) may be NULL. */

typedef struct lt_conv_args {
  int64_t stride[2], padding[2], dilation[2];
  int64_t padding_extra[2];    /* more zeros after each dim ('same' with an even kernel); conv */
  int64_t output_padding[2];   /* transposed convolutions only */
  int64_t groups;
} lt_conv_args;
/* stride 1, padding 0, dilation 1, groups 1 */
LT_API void lt_conv_args_init(lt_conv_args *a);
/* x (N,C,L) or (C,L); w (O, C/groups, k) */
LT_API int lt_conv1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w, lt_tensor *b,
                     const lt_conv_args *a);
/* x (N,C,H,W) or (C,H,W); w (O, C/groups, kh, kw) */
LT_API int lt_conv2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w, lt_tensor *b,
                     const lt_conv_args *a);
/* w (C, O/groups, k...) */
LT_API int lt_conv_transpose1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w,
                               lt_tensor *b, const lt_conv_args *a);
LT_API int lt_conv_transpose2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w,
                               lt_tensor *b, const lt_conv_args *a);

typedef struct lt_pool_args {
  int64_t kernel[2], stride[2] /* PyTorch's default is the kernel size */, padding[2],
      dilation[2] /* max only */;
  bool ceil_mode, count_include_pad /* avg only */;
  int64_t divisor_override;    /* avg only; 0: none */
} lt_pool_args;
/* dilation 1, count_include_pad, rest 0: the caller sets kernel and stride (>= 1) */
LT_API void lt_pool_args_init(lt_pool_args *a);
/* indices (may be NULL): int64 flat 0-based positions inside each input plane */
LT_API int lt_max_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                         const lt_pool_args *a);
LT_API int lt_max_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                         const lt_pool_args *a);
LT_API int lt_avg_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const lt_pool_args *a);
LT_API int lt_avg_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const lt_pool_args *a);
/* Pools to an output of osize (2-d: osize[2]). */
LT_API int lt_adaptive_avg_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int64_t osize);
LT_API int lt_adaptive_avg_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x,
                                  const int64_t *osize);
LT_API int lt_adaptive_max_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices,
                                  lt_tensor *x, int64_t osize);
LT_API int lt_adaptive_max_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices,
                                  lt_tensor *x, const int64_t *osize);

/* x (N,C,...); training: batch statistics, running stats (if given) updated in place with
** the unbiased variance; eval: running stats (required) */
LT_API int lt_batch_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *running_mean,
                         lt_tensor *running_var, lt_tensor *weight, lt_tensor *bias,
                         bool training, double momentum, double eps);
/* normalises over the trailing nd dims, which must equal nshape; weight/bias of shape nshape */
LT_API int lt_layer_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int nd,
                         const int64_t *nshape, lt_tensor *weight, lt_tensor *bias, double eps);
/* x (N,C,...) in num_groups groups of channels; weight/bias (C) */
LT_API int lt_group_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int64_t num_groups,
                         lt_tensor *weight, lt_tensor *bias, double eps);
/* eps < 0: the dtype's machine epsilon (PyTorch's eps=None) */
LT_API int lt_rms_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int nd, const int64_t *nshape,
                       lt_tensor *weight, double eps);

/* out = weight[indices - index_base]; padding_idx (0-based row, < 0: none) gets no gradient */
LT_API int lt_embedding(lt_ctx *ctx, lt_tensor **out, lt_tensor *weight, lt_tensor *indices,
                        int64_t padding_idx, int64_t index_base);
/* softmax(q k^T * scale + mask) v over the last two dims, fused: the (L, S) weights are never
** stored (the backward recomputes them). q (*, L, E), k (*, S, E), v (*, S, Ev) share one float
** dtype, their leading dims broadcast; *out is (*, L, Ev). attn_mask (NULL: none) broadcasts
** to (*, L, S): bool (true: the position takes part) or q's dtype (added to the scores).
** is_causal keeps key j <= query i and excludes attn_mask. scale NULL: 1/sqrt(E). A query row
** with no key taking part gives NaN, as the composed form. dropout_p in [0, 1] drops weights
** (the kept ones scaled by 1/(1-p)); the mask comes from one draw of gen (NULL: the context's
** generator) and is never stored: the backward recomputes it. attn_mask gets no gradient. */
LT_API int lt_scaled_dot_product_attention(lt_ctx *ctx, lt_tensor **out, lt_tensor *q,
                                           lt_tensor *k, lt_tensor *v, lt_tensor *attn_mask,
                                           bool is_causal, const double *scale, double dropout_p,
                                           lt_generator *gen);
/* not training or p == 0: *out is x itself (new reference); gen NULL: the context's generator */
LT_API int lt_dropout(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, double p, bool training,
                      lt_generator *gen);
/* Class-index losses on x (C), (N, C) or (N, C, d...) with an int64 target of x's shape less
** the class dim; classes count from index_base; weight (C) may be NULL. The fused
** cross_entropy is nll_loss(log_softmax(x)) with label smoothing (PyTorch's formulas). */
LT_API int lt_cross_entropy(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *target,
                            lt_tensor *weight, int64_t ignore_index,
                            enum lt_reduction reduction, double label_smoothing,
                            int64_t index_base);
LT_API int lt_nll_loss(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *target,
                       lt_tensor *weight, int64_t ignore_index, enum lt_reduction reduction,
                       int64_t index_base);

/* x resampled along dim (0-based) to the n = numel(i0) positions i0 (int64, counted from
** index_base): linear (w1 given, x's float dtype, of n: each output row is x's row i0[j] times
** 1 - w1[j] plus row i1[j] times w1[j]) or nearest (i1 and w1 NULL). The steps of interpolate,
** one dim at a time; the gradient reaches x. */
LT_API int lt_resample(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int dim, lt_tensor *i0,
                       lt_tensor *i1, lt_tensor *w1, int64_t index_base);

/* The elementwise losses of input against target (same shape, one float dtype): mean squared
** error, mean absolute error, smooth L1 (p = beta > 0), Huber (p = delta > 0) and binary cross
** entropy of logits, folded by reduction, as PyTorch's mse_loss, l1_loss, smooth_l1_loss,
** huber_loss and binary_cross_entropy_with_logits (without weights). One pass over the
** elements each way; the gradient reaches input and target. */
enum lt_regression { LT_MSE, LT_L1, LT_SMOOTH_L1, LT_HUBER, LT_BCE_LOGITS };
LT_API int lt_regression_loss(lt_ctx *ctx, lt_tensor **out, enum lt_regression kind,
                              lt_tensor *input, lt_tensor *target, enum lt_reduction reduction,
                              double p);

/* ======================================================= optimiser steps
** One fused update of parameter p (in place) from its gradient g and its state tensors (zeros
** of p's shape and dtype made by the caller; NULL when the option that needs them is off),
** with PyTorch's formulas. p, g and the state are float, contiguous and share no memory. */

typedef struct lt_sgd_opts {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
  bool first;   /* the momentum buffer is new: it takes the gradient as is */
} lt_sgd_opts;

typedef struct lt_adam_opts {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize;
  bool decoupled;   /* AdamW: weight decay applied to the parameter, not the gradient */
  double step;      /* already incremented for this update */
} lt_adam_opts;

typedef struct lt_rmsprop_opts {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
} lt_rmsprop_opts;

typedef struct lt_adagrad_opts {
  double lr, lr_decay, weight_decay, eps;
  bool maximize;
  double step;      /* already incremented */
} lt_adagrad_opts;

/* buf: momentum buffer (momentum != 0) */
LT_API int lt_sgd_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                       const lt_sgd_opts *o);
/* m, v: moments; vmax: amsgrad's running max */
LT_API int lt_adam_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m,
                        lt_tensor *v, lt_tensor *vmax, const lt_adam_opts *o);
/* sq: square average; gavg: centered's gradient average; buf: momentum buffer */
LT_API int lt_rmsprop_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                           lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o);
/* sum: the running sum of squared gradients */
LT_API int lt_adagrad_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                           const lt_adagrad_opts *o);

/* ============================================================ checkpoints
** A checkpoint as a C host sees it: a list of named tensors in file order. Names are
** NUL-terminated UTF-8 copies owned by the list; tensors are cpu tensors, one reference each
** held by the list (lt_retain one to keep it past lt_named_free). Element types without a
** Lantern dtype load as PyTorch's loader would convert them for Lantern: float16/bfloat16 as
** float32, every integer type as int64. */

typedef struct lt_named_tensor {
  char *name;
  lt_tensor *tensor;
} lt_named_tensor;

/* Every tensor of a safetensors file; *list (an array of *n) is the caller's. */
LT_API int lt_load_safetensors(lt_ctx *ctx, const char *path, lt_named_tensor **list, size_t *n);
/* A torch.save file (zip or legacy) whose object is a flat dict of string -> tensor, such as a
** module's state_dict (a safetensors file is read as well); any other object is an error. */
LT_API int lt_load_state_dict(lt_ctx *ctx, const char *path, lt_named_tensor **list,
                              size_t *n);
/* The tensor named `name` (borrowed), or NULL. */
LT_API lt_tensor *lt_named_find(const lt_named_tensor *list, size_t n, const char *name);
/* Releases every tensor and name and the array (NULL is ignored). */
LT_API void lt_named_free(lt_named_tensor *list, size_t n);
/* Writes n named tensors as a safetensors file at path, atomically. Names are unique and not
** "__metadata__"; the tensors are not changed. */
LT_API int lt_save_safetensors(lt_ctx *ctx, const char *path, const lt_named_tensor *list,
                               size_t n);

#ifdef __cplusplus
}
#endif
#endif
