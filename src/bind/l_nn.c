/*
** l_nn.c -- Lua binding of the nn kernels (nn_conv.c, nn_pool.c, nn_norm.c, nn_misc.c).
**
** Module functions (lt.name), wrapped by lantern.nn.functional. `nil` stands for an absent
** optional tensor. Per-dim values are a number (same for every dim) or a table of one number
** per spatial dim. Indices are Lua positions (1-based).
**
**   lt.conv1d(x, w, b_or_nil, {stride=1, padding=0, dilation=1, groups=1})
**   lt.conv2d(x, w, b_or_nil, {stride=1, padding=0, dilation=1, groups=1})
**       padding may also be "valid" or "same" (stride 1; an odd total puts the extra zero at
**       the end, as PyTorch)
**   lt.conv_transpose1d(x, w, b_or_nil, {stride=1, padding=0, output_padding=0, groups=1,
**                                        dilation=1})
**   lt.conv_transpose2d(x, w, b_or_nil, {same fields})
**   lt.max_pool1d(x, {kernel_size=, stride=kernel_size, padding=0, dilation=1,
**                     ceil_mode=false, return_indices=false}) -> out[, indices]
**   lt.max_pool2d(x, {same fields}) -> out[, indices]
**       kernel_size may instead be argument 2 with the options table as argument 3.
**       indices: int64, 1-based flat positions inside each input plane (PyTorch's + 1).
**   lt.avg_pool1d(x, {kernel_size=, stride=kernel_size, padding=0, ceil_mode=false,
**                     count_include_pad=true})
**   lt.avg_pool2d(x, {same fields, divisor_override=nil})
**   lt.adaptive_avg_pool1d(x, output_size)
**   lt.adaptive_avg_pool2d(x, output_size)      -- number or {h, w}; -1 keeps the input size
**   lt.adaptive_max_pool1d(x, output_size[, return_indices]) -> out[, indices]
**   lt.adaptive_max_pool2d(x, output_size[, return_indices]) -> out[, indices]
**   lt.batch_norm(x, running_mean, running_var, weight, bias, training=false, momentum=0.1,
**                 eps=1e-5)      -- running stats updated in place when training
**   lt.layer_norm(x, normalized_shape, weight, bias, eps=1e-5)   -- shape: number or table
**   lt.group_norm(x, num_groups, weight, bias, eps=1e-5)
**   lt.rms_norm(x, normalized_shape, weight, eps=nil)            -- nil: dtype's epsilon
**   lt.embedding(indices, weight, padding_idx=nil)   -- 1-based indices and padding_idx
**                                                       (negative padding_idx: from the end)
**   lt.dropout(x, p=0.5, training=true, {generator=})   -- returns x itself when not training
**                                                         or p == 0
**   lt.scaled_dot_product_attention(q, k, v, attn_mask_or_nil, is_causal=false, scale=nil,
**                                   dropout_p=0, {generator=})
**       -- fused, dropout included; nil scale: 1/sqrt(E)
**   lt.resample(x, dim, i0, i1_or_nil, w1_or_nil)   -- one dim of interpolate: output row j is
**       x's row i0[j] * (1 - w1[j]) + row i1[j] * w1[j] (linear) or row i0[j] (nearest)
**   lt.mse_loss(input, target, {reduction="mean"}), lt.l1_loss(same),
**   lt.smooth_l1_loss(input, target, {reduction="mean", beta=1}),
**   lt.huber_loss(input, target, {reduction="mean", delta=1})
**   lt.binary_cross_entropy_with_logits(input, target, {reduction="mean"})   -- no weights
**       -- one float dtype and shape; fused, the gradient reaches input and target
**   lt.cross_entropy(logits, target, {weight=, ignore_index=-100, reduction="mean",
**                    label_smoothing=0})   -- fused log_softmax + nll_loss; int64 target of
**                                             1-based class indices
**   lt.nll_loss(log_probs, target, {weight=, ignore_index=-100, reduction="mean"})
*/
#include <string.h>

#include "lbind.h"

/* Tensor at idx, or NULL for nil/none. */
static lt_tensor *opt_tensor(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) return NULL;
  return ltL_check(L, idx);
}

static int64_t check_int(lua_State *L, int idx, const char *op, const char *what) {
  int isint;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint)
    luaL_error(L, "%s: %s must be an integer or a table of integers, got %s", op, what,
               luaL_typename(L, idx));
  return (int64_t)v;
}

/* Reads the value at stack top (number or table of 1 or n numbers) into out[0..n); pops it. */
static void ints_at_top(lua_State *L, const char *op, const char *what, int n, int64_t *out) {
  if (lua_type(L, -1) == LUA_TTABLE) {
    int len = (int)luaL_len(L, -1);
    if (len != n && len != 1)
      luaL_error(L, "%s: %s must have %d value%s, got %d", op, what, n, n > 1 ? "s" : "", len);
    for (int i = 0; i < n; i++) {
      lua_geti(L, -1, len == 1 ? 1 : i + 1);
      out[i] = check_int(L, -1, op, what);
      lua_pop(L, 1);
    }
  } else {
    int64_t v = check_int(L, -1, op, what);
    for (int i = 0; i < n; i++) out[i] = v;
  }
  lua_pop(L, 1);
}

/* Field `name` of the options table at idx into out[0..n) (def when absent). True if present. */
static bool opt_ints(lua_State *L, int idx, const char *op, const char *name, int n,
                     int64_t def, int64_t *out) {
  for (int i = 0; i < n; i++) out[i] = def;
  if (!lua_istable(L, idx)) return false;
  if (lua_getfield(L, idx, name) == LUA_TNIL) {
    lua_pop(L, 1);
    return false;
  }
  ints_at_top(L, op, name, n, out);
  return true;
}

static void check_opts(lua_State *L, int idx, const char *op) {
  if (!lua_isnoneornil(L, idx) && !lua_istable(L, idx))
    luaL_error(L, "%s: bad argument #%d (options table expected, got %s)", op, idx,
               luaL_typename(L, idx));
}

/* ------------------------------------------------------------ convolution */

typedef int (*conv_fn)(lt_ctx *, lt_tensor **, lt_tensor *, lt_tensor *, lt_tensor *,
                       const lt_conv_args *);

static int conv_common(lua_State *L, const char *op, int sd, bool transposed, conv_fn fn) {
  lt_ctx *ctx = LTL_CTX(L);
  static const char *const known[] = {"stride", "padding", "dilation", "groups", NULL};
  static const char *const known_t[] = {"stride", "padding", "dilation", "groups",
                                        "output_padding", NULL};
  lt_tensor *x = ltL_check(L, 1), *w = ltL_check(L, 2), *b = opt_tensor(L, 3), *r;
  check_opts(L, 4, op);
  ltL_checkopts(L, 4, op, transposed ? known_t : known);
  lt_conv_args a;
  lt_conv_args_init(&a);
  opt_ints(L, 4, op, "stride", sd, 1, a.stride);
  opt_ints(L, 4, op, "dilation", sd, 1, a.dilation);
  if (transposed) opt_ints(L, 4, op, "output_padding", sd, 0, a.output_padding);
  int64_t groups[1];
  opt_ints(L, 4, op, "groups", 1, 1, groups);
  a.groups = groups[0];
  if (lua_istable(L, 4) && lua_getfield(L, 4, "padding") == LUA_TSTRING) {
    const char *mode = lua_tostring(L, -1);
    if (strcmp(mode, "valid") == 0) {
      /* zeros already */
    } else if (strcmp(mode, "same") == 0 && !transposed) {
      for (int i = 0; i < sd; i++)
        if (a.stride[i] != 1)
          return luaL_error(L, "%s: padding='same' is not supported for strided convolutions",
                            op);
      if (w->ndim != sd + 2)
        return luaL_error(L, "%s: expected a %d-d weight for padding='same'", op, sd + 2);
      for (int i = 0; i < sd; i++) {
        int64_t total = a.dilation[i] * (w->size[2 + i] - 1);
        a.padding[i] = total / 2;
        a.padding_extra[i] = total - 2 * (total / 2);
      }
    } else {
      return luaL_error(L, "%s: invalid padding string '%s' (expected 'valid'%s or a number)",
                        op, mode, transposed ? "" : ", 'same'");
    }
    lua_pop(L, 1);
  } else {
    if (lua_istable(L, 4)) lua_pop(L, 1);
    opt_ints(L, 4, op, "padding", sd, 0, a.padding);
  }
  LTL_TRY(L, ctx, fn(ctx, &r, x, w, b, &a));
  ltL_push(L, r);
  return 1;
}

static int l_conv1d(lua_State *L) { return conv_common(L, "conv1d", 1, false, lt_conv1d); }
static int l_conv2d(lua_State *L) { return conv_common(L, "conv2d", 2, false, lt_conv2d); }
static int l_conv_transpose1d(lua_State *L) {
  return conv_common(L, "conv_transpose1d", 1, true, lt_conv_transpose1d);
}
static int l_conv_transpose2d(lua_State *L) {
  return conv_common(L, "conv_transpose2d", 2, true, lt_conv_transpose2d);
}

/* ------------------------------------------------------------ pooling */

/* Pushes a 1-based copy of the 0-based indices ix (ix is also saved for backward, so it is
** not changed); consumes the reference to ix. */
static void push_indices(lua_State *L, lt_tensor *ix) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *r;
  if (lt_empty(ctx, &r, LT_INT64, ix->ndim, ix->size)) {
    lt_release(ix);
    ltL_raise(L, ctx);
  }
  const int64_t *p = lt_data(ix);
  int64_t *q = lt_data(r), n = lt_numel(ix);
  for (int64_t i = 0; i < n; i++) q[i] = p[i] + 1;
  lt_release(ix);
  ltL_push(L, r);
}

/* Kernel size from argument 2 (number or table of ints) or field kernel_size of the options
** table; returns the stack index of the options table. */
static int pool_args(lua_State *L, const char *op, int sd, bool is_max, lt_pool_args *a) {
  lt_pool_args_init(a);
  int opts = 2;
  bool have_k = lua_type(L, 2) == LUA_TNUMBER;
  if (!have_k && lua_istable(L, 2)) {
    int t = lua_getfield(L, 2, "kernel_size");
    lua_pop(L, 1);
    have_k = t == LUA_TNIL && luaL_len(L, 2) > 0;
  }
  if (have_k) {
    lua_pushvalue(L, 2);
    ints_at_top(L, op, "kernel_size", sd, a->kernel);
    opts = 3;
  }
  static const char *const known_max[] = {"kernel_size", "stride", "padding", "dilation",
                                          "ceil_mode", "return_indices", NULL};
  static const char *const known_avg[] = {"kernel_size", "stride", "padding", "ceil_mode",
                                          "count_include_pad", "divisor_override", NULL};
  check_opts(L, opts, op);
  ltL_checkopts(L, opts, op, is_max ? known_max : known_avg);
  if (!have_k && !opt_ints(L, opts, op, "kernel_size", sd, 0, a->kernel))
    luaL_error(L, "%s: kernel_size is required", op);
  /* PyTorch's stride defaults to the kernel size; a stride given as 0 reaches the kernel's
  ** check */
  if (!opt_ints(L, opts, op, "stride", sd, 0, a->stride))
    memcpy(a->stride, a->kernel, sizeof a->stride);
  opt_ints(L, opts, op, "padding", sd, 0, a->padding);
  if (is_max) opt_ints(L, opts, op, "dilation", sd, 1, a->dilation);
  a->ceil_mode = ltL_optbool_field(L, opts, "ceil_mode", false);
  if (!is_max) {
    a->count_include_pad = ltL_optbool_field(L, opts, "count_include_pad", true);
    int64_t dv[1];
    if (opt_ints(L, opts, op, "divisor_override", 1, 0, dv)) {
      if (dv[0] == 0) luaL_error(L, "%s: divisor must be not zero", op);
      a->divisor_override = dv[0];
    }
  }
  return opts;
}

typedef int (*maxpool_fn)(lt_ctx *, lt_tensor **, lt_tensor **, lt_tensor *,
                          const lt_pool_args *);
typedef int (*avgpool_fn)(lt_ctx *, lt_tensor **, lt_tensor *, const lt_pool_args *);

static int max_pool_common(lua_State *L, const char *op, int sd, maxpool_fn fn) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r, *ix = NULL;
  lt_pool_args a;
  int opts = pool_args(L, op, sd, true, &a);
  bool want = ltL_optbool_field(L, opts, "return_indices", false);
  LTL_TRY(L, ctx, fn(ctx, &r, want ? &ix : NULL, x, &a));
  ltL_push(L, r);
  if (!want) return 1;
  push_indices(L, ix);
  return 2;
}

static int avg_pool_common(lua_State *L, const char *op, int sd, avgpool_fn fn) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r;
  lt_pool_args a;
  pool_args(L, op, sd, false, &a);
  LTL_TRY(L, ctx, fn(ctx, &r, x, &a));
  ltL_push(L, r);
  return 1;
}

static int l_max_pool1d(lua_State *L) { return max_pool_common(L, "max_pool1d", 1, lt_max_pool1d); }
static int l_max_pool2d(lua_State *L) { return max_pool_common(L, "max_pool2d", 2, lt_max_pool2d); }
static int l_avg_pool1d(lua_State *L) { return avg_pool_common(L, "avg_pool1d", 1, lt_avg_pool1d); }
static int l_avg_pool2d(lua_State *L) { return avg_pool_common(L, "avg_pool2d", 2, lt_avg_pool2d); }

/* output_size at arg 2: number or table; -1 (or false) keeps the input's size. */
static void adaptive_size(lua_State *L, const char *op, int sd, const lt_tensor *x,
                          int64_t *os) {
  if (lua_istable(L, 2)) {
    int len = (int)luaL_len(L, 2);
    if (len != sd && len != 1)
      luaL_error(L, "%s: output_size must have %d value%s, got %d", op, sd, sd > 1 ? "s" : "",
                 len);
    for (int i = 0; i < sd; i++) {
      lua_geti(L, 2, len == 1 ? 1 : i + 1);
      os[i] = lua_isboolean(L, -1) && !lua_toboolean(L, -1) ? -1
                                                             : check_int(L, -1, op, "output_size");
      lua_pop(L, 1);
    }
  } else {
    int64_t v = check_int(L, 2, op, "output_size");
    for (int i = 0; i < sd; i++) os[i] = v;
  }
  for (int i = 0; i < sd; i++)
    if (os[i] == -1 && x->ndim >= sd) os[i] = x->size[x->ndim - sd + i];
}

static int l_adaptive_avg_pool1d(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r;
  int64_t os[1];
  adaptive_size(L, "adaptive_avg_pool1d", 1, x, os);
  LTL_TRY(L, ctx, lt_adaptive_avg_pool1d(ctx, &r, x, os[0]));
  ltL_push(L, r);
  return 1;
}

static int l_adaptive_avg_pool2d(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r;
  int64_t os[2];
  adaptive_size(L, "adaptive_avg_pool2d", 2, x, os);
  LTL_TRY(L, ctx, lt_adaptive_avg_pool2d(ctx, &r, x, os));
  ltL_push(L, r);
  return 1;
}

static int adaptive_max_common(lua_State *L, const char *op, int sd) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r, *ix = NULL;
  int64_t os[2];
  adaptive_size(L, op, sd, x, os);
  static const char *const known[] = {"return_indices", NULL};
  ltL_checkopts(L, 3, op, known);
  bool want = lua_istable(L, 3) ? ltL_optbool_field(L, 3, "return_indices", false)
                                : lua_toboolean(L, 3);
  if (sd == 1)
    LTL_TRY(L, ctx, lt_adaptive_max_pool1d(ctx, &r, &ix, x, os[0]));
  else
    LTL_TRY(L, ctx, lt_adaptive_max_pool2d(ctx, &r, &ix, x, os));
  ltL_push(L, r);
  if (!want) {
    lt_release(ix);
    return 1;
  }
  push_indices(L, ix);
  return 2;
}

static int l_adaptive_max_pool1d(lua_State *L) {
  return adaptive_max_common(L, "adaptive_max_pool1d", 1);
}
static int l_adaptive_max_pool2d(lua_State *L) {
  return adaptive_max_common(L, "adaptive_max_pool2d", 2);
}

/* ------------------------------------------------------------ normalisation */

static double opt_number(lua_State *L, int idx, const char *op, const char *what, double def) {
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "%s: %s must be a number, got %s", op, what, luaL_typename(L, idx));
  return lua_tonumber(L, idx);
}

static int l_batch_norm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *rm = opt_tensor(L, 2), *rv = opt_tensor(L, 3);
  lt_tensor *w = opt_tensor(L, 4), *b = opt_tensor(L, 5), *r;
  bool training = lua_toboolean(L, 6);
  double momentum = opt_number(L, 7, "batch_norm", "momentum", 0.1);
  double eps = opt_number(L, 8, "batch_norm", "eps", 1e-5);
  LTL_TRY(L, ctx, lt_batch_norm(ctx, &r, x, rm, rv, w, b, training, momentum, eps));
  ltL_push(L, r);
  return 1;
}

/* normalized_shape at idx: number or table of sizes. */
static int norm_shape(lua_State *L, int idx, const char *op, int64_t *shape) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    shape[0] = check_int(L, idx, op, "normalized_shape");
    return 1;
  }
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: normalized_shape must be an integer or a table of integers, got %s", op,
               luaL_typename(L, idx));
  int n = (int)luaL_len(L, idx);
  if (n > LT_MAX_DIMS) luaL_error(L, "%s: normalized_shape has too many dimensions", op);
  for (int i = 0; i < n; i++) {
    lua_geti(L, idx, i + 1);
    shape[i] = check_int(L, -1, op, "normalized_shape");
    lua_pop(L, 1);
  }
  return n;
}

static int l_layer_norm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r;
  int64_t shape[LT_MAX_DIMS];
  int nd = norm_shape(L, 2, "layer_norm", shape);
  lt_tensor *w = opt_tensor(L, 3), *b = opt_tensor(L, 4);
  double eps = opt_number(L, 5, "layer_norm", "eps", 1e-5);
  LTL_TRY(L, ctx, lt_layer_norm(ctx, &r, x, nd, shape, w, b, eps));
  ltL_push(L, r);
  return 1;
}

static int l_rms_norm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r;
  int64_t shape[LT_MAX_DIMS];
  int nd = norm_shape(L, 2, "rms_norm", shape);
  lt_tensor *w = opt_tensor(L, 3);
  double eps = opt_number(L, 4, "rms_norm", "eps", -1);
  if (!lua_isnoneornil(L, 4) && eps < 0)
    return luaL_error(L, "rms_norm: eps must be non-negative, got %f", eps);
  LTL_TRY(L, ctx, lt_rms_norm(ctx, &r, x, nd, shape, w, eps));
  ltL_push(L, r);
  return 1;
}

static int l_group_norm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r;
  int64_t groups = check_int(L, 2, "group_norm", "num_groups");
  lt_tensor *w = opt_tensor(L, 3), *b = opt_tensor(L, 4);
  double eps = opt_number(L, 5, "group_norm", "eps", 1e-5);
  LTL_TRY(L, ctx, lt_group_norm(ctx, &r, x, groups, w, b, eps));
  ltL_push(L, r);
  return 1;
}

/* ------------------------------------------------------------ embedding, dropout */

static int l_embedding(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *ix = ltL_check(L, 1), *w = ltL_check(L, 2), *r;
  int64_t pad = -1;
  if (!lua_isnoneornil(L, 3)) {
    int64_t p = check_int(L, 3, "embedding", "padding_idx");
    int64_t V = w->ndim == 2 ? w->size[0] : 0;
    if (p == 0 || p > V || p < -V)
      return luaL_error(L, "embedding: padding_idx %I must be within num_embeddings (1..%I "
                        "or -%I..-1)", (lua_Integer)p, (lua_Integer)V, (lua_Integer)V);
    pad = p > 0 ? p - 1 : V + p;
  }
  LTL_TRY(L, ctx, lt_embedding(ctx, &r, w, ix, pad, 1));
  ltL_push(L, r);
  return 1;
}

static int l_dropout(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *r;
  double p = opt_number(L, 2, "dropout", "p", 0.5);
  bool training = lua_isnoneornil(L, 3) ? true : lua_toboolean(L, 3);
  static const char *const known[] = {"generator", NULL};
  check_opts(L, 4, "dropout");
  ltL_checkopts(L, 4, "dropout", known);
  lt_generator *g = ltL_optgen_field(L, 4);
  LTL_TRY(L, ctx, lt_dropout(ctx, &r, x, p, training, g));
  ltL_push(L, r);
  return 1;
}

static int l_sdpa(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *q = ltL_check(L, 1), *k = ltL_check(L, 2), *v = ltL_check(L, 3), *r;
  lt_tensor *mask = opt_tensor(L, 4);
  bool causal = lua_toboolean(L, 5);
  double scale = 0;
  bool has_scale = !lua_isnoneornil(L, 6);
  if (has_scale) scale = luaL_checknumber(L, 6);
  double p = luaL_optnumber(L, 7, 0.0);
  static const char *const known[] = {"generator", NULL};
  check_opts(L, 8, "scaled_dot_product_attention");
  ltL_checkopts(L, 8, "scaled_dot_product_attention", known);
  lt_generator *g = ltL_optgen_field(L, 8);
  LTL_TRY(L, ctx, lt_scaled_dot_product_attention(ctx, &r, q, k, v, mask, causal,
                                                  has_scale ? &scale : NULL, p, g));
  ltL_push(L, r);
  return 1;
}

/* ------------------------------------------------------------ losses */

/* The `reduction` field of the options table at idx ("mean" when absent). */
static enum lt_reduction opt_reduction(lua_State *L, int idx, const char *op) {
  enum lt_reduction r = LT_REDUCTION_MEAN;
  if (lua_getfield(L, idx, "reduction") != LUA_TNIL) {
    const char *rs = luaL_checkstring(L, -1);
    if (strcmp(rs, "none") == 0)
      r = LT_REDUCTION_NONE;
    else if (strcmp(rs, "sum") == 0)
      r = LT_REDUCTION_SUM;
    else if (strcmp(rs, "mean") != 0)
      luaL_error(L, "%s: reduction must be 'mean', 'sum' or 'none', got '%s'", op, rs);
  }
  lua_pop(L, 1);
  return r;
}

static int loss_common(lua_State *L, const char *op, bool logits) {
  lt_ctx *ctx = LTL_CTX(L);
  static const char *const known_ce[] = {"weight", "ignore_index", "reduction",
                                         "label_smoothing", NULL};
  static const char *const known_nll[] = {"weight", "ignore_index", "reduction", NULL};
  lt_tensor *x = ltL_check(L, 1), *t = ltL_check(L, 2), *r, *w = NULL;
  check_opts(L, 3, op);
  ltL_checkopts(L, 3, op, logits ? known_ce : known_nll);
  enum lt_reduction reduction = LT_REDUCTION_MEAN;
  int64_t ignore = -100;
  double ls = 0;
  if (lua_istable(L, 3)) {
    if (lua_getfield(L, 3, "weight") != LUA_TNIL) w = ltL_check(L, -1);
    lua_pop(L, 1);   /* the options table keeps it alive */
    reduction = opt_reduction(L, 3, op);
    int64_t ig[1];
    if (opt_ints(L, 3, op, "ignore_index", 1, -100, ig)) ignore = ig[0];
    ls = ltL_optnum_field(L, 3, "label_smoothing", 0.0);
  }
  if (logits)
    LTL_TRY(L, ctx, lt_cross_entropy(ctx, &r, x, t, w, ignore, reduction, ls, 1));
  else
    LTL_TRY(L, ctx, lt_nll_loss(ctx, &r, x, t, w, ignore, reduction, 1));
  ltL_push(L, r);
  return 1;
}

/* lt.mse_loss / l1_loss / smooth_l1_loss / huber_loss / binary_cross_entropy_with_logits
** (input, target, {reduction=, beta= or delta=}) */
static int regression_common(lua_State *L, int kind) {
  static const char *const names[] = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                      "binary_cross_entropy_with_logits"};
  static const char *const known_p[][3] = {
      {"reduction", NULL}, {"reduction", NULL}, {"reduction", "beta", NULL},
      {"reduction", "delta", NULL}, {"reduction", NULL}};
  lt_ctx *ctx = LTL_CTX(L);
  const char *op = names[kind];
  lt_tensor *x = ltL_check(L, 1), *t = ltL_check(L, 2), *r;
  check_opts(L, 3, op);
  ltL_checkopts(L, 3, op, known_p[kind]);
  enum lt_reduction reduction = LT_REDUCTION_MEAN;
  double p = 1.0;
  if (lua_istable(L, 3)) {
    reduction = opt_reduction(L, 3, op);
    if (kind == LT_SMOOTH_L1 || kind == LT_HUBER)
      p = ltL_optnum_field(L, 3, kind == LT_HUBER ? "delta" : "beta", 1.0);
  }
  LTL_TRY(L, ctx, lt_regression_loss(ctx, &r, (enum lt_regression)kind, x, t, reduction, p));
  ltL_push(L, r);
  return 1;
}
static int l_mse_loss(lua_State *L) { return regression_common(L, LT_MSE); }
static int l_l1_loss(lua_State *L) { return regression_common(L, LT_L1); }
static int l_smooth_l1_loss(lua_State *L) { return regression_common(L, LT_SMOOTH_L1); }
static int l_huber_loss(lua_State *L) { return regression_common(L, LT_HUBER); }
static int l_bce_logits(lua_State *L) { return regression_common(L, LT_BCE_LOGITS); }

/* lt.resample(x, dim, i0, i1_or_nil, w1_or_nil): 1-based dim and positions */
static int l_resample(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1), *i0 = ltL_check(L, 3), *r;
  int dim = ltL_checkdim(L, 2, x->ndim);
  lt_tensor *i1 = opt_tensor(L, 4), *w1 = opt_tensor(L, 5);
  LTL_TRY(L, ctx, lt_resample(ctx, &r, x, dim, i0, i1, w1, 1));
  ltL_push(L, r);
  return 1;
}

static int l_cross_entropy(lua_State *L) { return loss_common(L, "cross_entropy", true); }
static int l_nll_loss(lua_State *L) { return loss_common(L, "nll_loss", false); }

void ltL_open_nn(lua_State *L) {
  static const ltL_Reg regs[] = {
      {"conv1d", l_conv1d, LTL_FN},
      {"conv2d", l_conv2d, LTL_FN},
      {"conv_transpose1d", l_conv_transpose1d, LTL_FN},
      {"conv_transpose2d", l_conv_transpose2d, LTL_FN},
      {"max_pool1d", l_max_pool1d, LTL_FN},
      {"max_pool2d", l_max_pool2d, LTL_FN},
      {"avg_pool1d", l_avg_pool1d, LTL_FN},
      {"avg_pool2d", l_avg_pool2d, LTL_FN},
      {"adaptive_avg_pool1d", l_adaptive_avg_pool1d, LTL_FN},
      {"adaptive_avg_pool2d", l_adaptive_avg_pool2d, LTL_FN},
      {"adaptive_max_pool1d", l_adaptive_max_pool1d, LTL_FN},
      {"adaptive_max_pool2d", l_adaptive_max_pool2d, LTL_FN},
      {"batch_norm", l_batch_norm, LTL_FN},
      {"layer_norm", l_layer_norm, LTL_FN},
      {"group_norm", l_group_norm, LTL_FN},
      {"rms_norm", l_rms_norm, LTL_FN},
      {"embedding", l_embedding, LTL_FN},
      {"dropout", l_dropout, LTL_FN},
      {"resample", l_resample, LTL_FN},
      {"scaled_dot_product_attention", l_sdpa, LTL_FN},
      {"cross_entropy", l_cross_entropy, LTL_FN},
      {"nll_loss", l_nll_loss, LTL_FN},
      {"mse_loss", l_mse_loss, LTL_FN},
      {"l1_loss", l_l1_loss, LTL_FN},
      {"smooth_l1_loss", l_smooth_l1_loss, LTL_FN},
      {"huber_loss", l_huber_loss, LTL_FN},
      {"binary_cross_entropy_with_logits", l_bce_logits, LTL_FN},
      {NULL, NULL, 0},
  };
  ltL_register(L, regs);
}
