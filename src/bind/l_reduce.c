/*
** l_reduce.c -- Lua binding of reductions, max/min/argmax, var/std, norm, logsumexp, softmax,
** log_softmax, cumsum, and sort, argsort, topk, unique, searchsorted and bucketize.
**
** Dims are Lua's (1-based, negative from the end) and are handed to the core as 0-based (or
** still negative) so that the core checks them and names the op in its message. A reduction
** takes its dims as a number, a list of numbers or nothing (all dims), then keepdim as a
** boolean or an options table; the whole tail may also be one options table:
**     x:sum()   x:sum(2)   x:sum(2, true)   x:sum({1, 2}, true)   x:sum({dim = 2, keepdim = true})
** sum, mean, prod, softmax, log_softmax and cumsum also take {dtype=}: the input is converted to
** it first, as in PyTorch. An options table holds only the keys its op takes.
** Indices returned by max/min/argmax/argmin/sort/argsort/topk are 1-based, like every position
** in Lua.
*/
#include <math.h>
#include <string.h>

#include "lbind.h"

/* Lua dim to the core's form (0-based, negative kept). */
static int dim_value(lua_State *L, int idx, const char *op) {
  int isint;
  lua_Integer d = lua_tointegerx(L, idx, &isint);
  if (!isint)
    luaL_error(L, "%s: dim must be an integer, got %s", op,
               lua_type(L, idx) == LUA_TNUMBER ? "a fractional number" : luaL_typename(L, idx));
  if (d == 0)
    luaL_error(L, "%s: dimension 0 is not valid (dimensions count from 1; -1 is the last)", op);
  if (d > LT_MAX_DIMS || d < -LT_MAX_DIMS)
    luaL_error(L, "%s: dimension %d out of range", op, (int)d);
  return (int)(d > 0 ? d - 1 : d);
}

/* An options table (rather than a list of dims): a non-tensor table without element [1]. */
static bool is_opts(lua_State *L, int idx) {
  if (!lua_istable(L, idx) || ltL_test(L, idx)) return false;
  bool list = lua_geti(L, idx, 1) != LUA_TNIL;
  lua_pop(L, 1);
  return !list;
}

/* Dims at idx: nil (all), a number or a list. Returns the count (0 = all). */
static int dims_value(lua_State *L, int idx, const char *op, int *dims) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    dims[0] = dim_value(L, idx, op);
    return 1;
  }
  if (!lua_istable(L, idx) || ltL_test(L, idx))
    luaL_error(L, "%s: dim must be a number or a list of numbers, got %s", op,
               luaL_typename(L, idx));
  lua_Integer n = luaL_len(L, idx);
  if (n > LT_MAX_DIMS) luaL_error(L, "%s: %d dims given, at most %d", op, (int)n, LT_MAX_DIMS);
  for (int i = 0; i < (int)n; i++) {
    lua_geti(L, idx, i + 1);
    dims[i] = dim_value(L, -1, op);
    lua_pop(L, 1);
  }
  return (int)n;
}

/* Dims from field `dim` of the options table at idx. */
static int dims_field(lua_State *L, int idx, const char *op, int *dims) {
  lua_getfield(L, idx, "dim");
  int n = dims_value(L, lua_gettop(L), op, dims);
  lua_pop(L, 1);
  return n;
}

static bool bool_arg(lua_State *L, int idx, const char *op, const char *what) {
  if (!lua_isboolean(L, idx))
    luaL_error(L, "%s: %s must be a boolean, got %s", op, what, luaL_typename(L, idx));
  return lua_toboolean(L, idx);
}

static const char *const OPTS_DIM_KEEPDIM[] = {"dim", "keepdim", NULL};
static const char *const OPTS_WITH_DTYPE[] = {"dim", "keepdim", "dtype", NULL};
static const char *const OPTS_ALONG_DIM[] = {"dim", "dtype", NULL};
static const char *const OPTS_VAR[] = {"dim", "keepdim", "correction", "unbiased", NULL};
static const char *const OPTS_NORM[] = {"p", "dim", "keepdim", NULL};

/* The tail (dims?, keepdim|opts?) starting at idx. *opts is the options table's index or 0;
** its keys must be among `known`. */
typedef struct rargs {
  int ndims;
  int dims[LT_MAX_DIMS];
  bool keepdim;
  int opts;
} rargs;

static void reduce_args(lua_State *L, int idx, const char *op, const char *const *known,
                        rargs *r) {
  r->opts = 0;
  r->keepdim = false;
  if (is_opts(L, idx)) {
    r->opts = idx;
    ltL_checkopts(L, idx, op, known);
    r->ndims = dims_field(L, idx, op, r->dims);
  } else {
    r->ndims = dims_value(L, idx, op, r->dims);
    if (is_opts(L, idx + 1)) {
      r->opts = idx + 1;
      ltL_checkopts(L, idx + 1, op, known);
    } else if (!lua_isnoneornil(L, idx + 1))
      r->keepdim = bool_arg(L, idx + 1, op, "keepdim");
  }
  if (r->opts) r->keepdim = ltL_optbool_field(L, r->opts, "keepdim", r->keepdim);
}

/* Exactly one dim from rargs (for ops that reduce along one dim). */
static int one_dim(lua_State *L, const rargs *r, const char *op) {
  if (r->ndims != 1) luaL_error(L, "%s: expected one dim, got %d", op, r->ndims);
  return r->dims[0];
}

/* a converted to the options' dtype (anchored on the stack), or a itself without one. */
static lt_tensor *with_dtype(lua_State *L, lt_tensor *a, int opts) {
  if (!opts) return a;
  lt_ctx *ctx = LTL_CTX(L);
  lt_dtype dt = ltL_optdtype_field(L, opts, a->dtype);
  if (dt == a->dtype) return a;
  lt_tensor *c;
  LTL_TRY(L, ctx, lt_to_dtype(ctx, &c, a, dt));
  ltL_push(L, c);
  return c;
}

static int reduction(lua_State *L, int op, const char *name) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *out;
  rargs r;
  bool takes_dtype = op == LT_RSUM || op == LT_RMEAN || op == LT_RPROD;
  reduce_args(L, 2, name, takes_dtype ? OPTS_WITH_DTYPE : OPTS_DIM_KEEPDIM, &r);
  if (takes_dtype) a = with_dtype(L, a, r.opts);
  LTL_TRY(L, ctx, lt_reduce(ctx, &out, op, a, r.ndims, r.dims, r.keepdim));
  ltL_push(L, out);
  return 1;
}

/* count_nonzero(dims?): the number of non-zero elements over the dims (all without), int64. */
static int l_count_nonzero(lua_State *L) {
  static const char *const known[] = {"dim", NULL};
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *ne, *out;
  rargs r;
  reduce_args(L, 2, "count_nonzero", known, &r);
  if (!lua_isnoneornil(L, 3) && !r.opts)
    luaL_error(L, "count_nonzero: takes dims only, not keepdim (got %s)", luaL_typename(L, 3));
  LTL_TRY(L, ctx, lt_binary_scalar(ctx, &ne, LT_NE, a, 0, true, false));
  ltL_push(L, ne);
  LTL_TRY(L, ctx, lt_reduce(ctx, &out, LT_RSUM, ne, r.ndims, r.dims, false));
  ltL_push(L, out);
  return 1;
}

static int l_sum(lua_State *L) { return reduction(L, LT_RSUM, "sum"); }
static int l_mean(lua_State *L) { return reduction(L, LT_RMEAN, "mean"); }
static int l_prod(lua_State *L) { return reduction(L, LT_RPROD, "prod"); }
static int l_amax(lua_State *L) { return reduction(L, LT_RAMAX, "amax"); }
static int l_amin(lua_State *L) { return reduction(L, LT_RAMIN, "amin"); }
static int l_all(lua_State *L) { return reduction(L, LT_RALL, "all"); }
static int l_any(lua_State *L) { return reduction(L, LT_RANY, "any"); }

/* max()/min(): full; (dim, keepdim?): values, indices; (tensor): elementwise maximum. */
static int maxmin(lua_State *L, bool is_max) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *name = is_max ? "max" : "min";
  lt_tensor *a = ltL_check(L, 1), *out, *idx;
  lt_tensor *b = ltL_test(L, 2);
  if (b) {
    LTL_TRY(L, ctx, lt_binary(ctx, &out, is_max ? LT_MAXIMUM : LT_MINIMUM, a, b));
    ltL_push(L, out);
    return 1;
  }
  rargs r;
  reduce_args(L, 2, name, OPTS_DIM_KEEPDIM, &r);
  if (r.ndims == 0) {
    LTL_TRY(L, ctx, is_max ? lt_max(ctx, &out, a) : lt_min(ctx, &out, a));
    ltL_push(L, out);
    return 1;
  }
  int d = one_dim(L, &r, name);
  LTL_TRY(L, ctx, is_max ? lt_max_dim(ctx, &out, &idx, a, d, r.keepdim, 1)
                         : lt_min_dim(ctx, &out, &idx, a, d, r.keepdim, 1));
  ltL_push(L, out);
  ltL_push(L, idx);
  return 2;
}

static int l_max(lua_State *L) { return maxmin(L, true); }
static int l_min(lua_State *L) { return maxmin(L, false); }

static int argsearch(lua_State *L, bool is_max) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *name = is_max ? "argmax" : "argmin";
  lt_tensor *a = ltL_check(L, 1), *out;
  rargs r;
  reduce_args(L, 2, name, OPTS_DIM_KEEPDIM, &r);
  int d = r.ndims ? one_dim(L, &r, name) : 0;
  const int *dp = r.ndims ? &d : NULL;
  LTL_TRY(L, ctx, is_max ? lt_argmax(ctx, &out, a, dp, r.keepdim, 1)
                         : lt_argmin(ctx, &out, a, dp, r.keepdim, 1));
  ltL_push(L, out);
  return 1;
}

static int l_argmax(lua_State *L) { return argsearch(L, true); }
static int l_argmin(lua_State *L) { return argsearch(L, false); }

/* The tail of sort, argsort and topk from idx: (dim?, flag?, flag2?) or an options table in
** place of any of them, of keys `known` ({dim, flag, flag2, more...}). dim defaults to -1. */
static int sort_args(lua_State *L, int idx, const char *op, const char *const *known, bool *flag,
                     bool *flag2) {
  int d = -1, opts = 0, npos = flag2 ? 3 : 2;
  for (int i = 0; i < npos && !opts; i++) {
    if (is_opts(L, idx + i)) {
      opts = idx + i;
    } else if (!lua_isnoneornil(L, idx + i)) {
      if (i == 0)
        d = dim_value(L, idx, op);
      else
        *(i == 1 ? flag : flag2) = bool_arg(L, idx + i, op, known[i]);
    }
  }
  if (!opts) return d;
  ltL_checkopts(L, opts, op, known);
  int dims[LT_MAX_DIMS];
  int nd = dims_field(L, opts, op, dims);
  if (nd > 1) luaL_error(L, "%s: expected one dim, got %d", op, nd);
  if (nd == 1) d = dims[0];
  *flag = ltL_optbool_field(L, opts, known[1], *flag);
  if (flag2) *flag2 = ltL_optbool_field(L, opts, known[2], *flag2);
  for (int i = flag2 ? 3 : 2; known[i]; i++) {   /* accepted, and a boolean: stable */
    lua_getfield(L, opts, known[i]);
    if (!lua_isnil(L, -1)) bool_arg(L, -1, op, known[i]);
    lua_pop(L, 1);
  }
  return d;
}

/* sort(dim=-1, descending=false) or {dim=, descending=, stable=}: values, indices. The sort is
** always stable, so `stable` changes nothing. */
static int l_sort(lua_State *L) {
  static const char *const known[] = {"dim", "descending", "stable", NULL};
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *out, *idx;
  bool desc = false;
  int d = sort_args(L, 2, "sort", known, &desc, NULL);
  LTL_TRY(L, ctx, lt_sort(ctx, &out, &idx, a, d, desc, 1));
  ltL_push(L, out);
  ltL_push(L, idx);
  return 2;
}

static int l_argsort(lua_State *L) {
  static const char *const known[] = {"dim", "descending", "stable", NULL};
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *idx;
  bool desc = false;
  int d = sort_args(L, 2, "argsort", known, &desc, NULL);
  LTL_TRY(L, ctx, lt_argsort(ctx, &idx, a, d, desc, 1));
  ltL_push(L, idx);
  return 1;
}

/* unique({sorted=, return_inverse=, return_counts=}): the distinct values, then the inverse
** (1-based) and the counts when asked, in PyTorch's order. Always sorted; no dim. */
static int l_unique(lua_State *L) {
  static const char *const known[] = {"sorted", "return_inverse", "return_counts", "dim", NULL};
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *vals, *inv = NULL, *cnt = NULL;
  bool want_inv = false, want_cnt = false;
  if (!lua_isnoneornil(L, 2)) {
    if (!is_opts(L, 2))
      luaL_error(L, "unique: bad argument #2 (options table expected, got %s)",
                 luaL_typename(L, 2));
    ltL_checkopts(L, 2, "unique", known);
    ltL_optbool_field(L, 2, "sorted", true);   /* checked; the values always come sorted */
    want_inv = ltL_optbool_field(L, 2, "return_inverse", false);
    want_cnt = ltL_optbool_field(L, 2, "return_counts", false);
    lua_getfield(L, 2, "dim");
    if (!lua_isnil(L, -1)) luaL_error(L, "unique: dim is not supported (the whole tensor only)");
    lua_pop(L, 1);
  }
  LTL_TRY(L, ctx, lt_unique(ctx, &vals, want_inv ? &inv : NULL, want_cnt ? &cnt : NULL, a, 1));
  ltL_push(L, vals);
  if (want_inv) ltL_push(L, inv);
  if (want_cnt) ltL_push(L, cnt);
  return 1 + want_inv + want_cnt;
}

/* topk(k, dim=-1, largest=true, sorted=true) or (k, {dim=, largest=, sorted=}): values,
** indices. They come sorted whatever `sorted` says (PyTorch leaves the order unspecified). */
static int l_topk(lua_State *L) {
  static const char *const known[] = {"dim", "largest", "sorted", NULL};
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *out, *idx;
  int isint;
  lua_Integer k = lua_tointegerx(L, 2, &isint);
  if (!isint)
    luaL_error(L, "topk: k must be an integer, got %s",
               lua_type(L, 2) == LUA_TNUMBER ? "a fractional number" : luaL_typename(L, 2));
  bool largest = true, sorted = true;
  int d = sort_args(L, 3, "topk", known, &largest, &sorted);
  LTL_TRY(L, ctx, lt_topk(ctx, &out, &idx, a, (int64_t)k, d, largest, 1));
  ltL_push(L, out);
  ltL_push(L, idx);
  return 2;
}

/* {right=, side=} of searchsorted and bucketize at idx (0: none): whether to go after equal
** elements. `side` is "left" or "right", and may not contradict `right`. */
static bool side_right(lua_State *L, int idx, const char *op) {
  static const char *const known[] = {"right", "side", NULL};
  if (!idx) return false;
  ltL_checkopts(L, idx, op, known);
  bool right = ltL_optbool_field(L, idx, "right", false);
  lua_getfield(L, idx, "side");
  if (!lua_isnil(L, -1)) {
    const char *side = lua_tostring(L, -1);
    if (lua_type(L, -1) != LUA_TSTRING || (strcmp(side, "left") && strcmp(side, "right")))
      luaL_error(L, "%s: side must be \"left\" or \"right\", got %s", op,
                 lua_type(L, -1) == LUA_TSTRING ? side : luaL_typename(L, -1));
    bool r = strcmp(side, "right") == 0;
    lua_getfield(L, idx, "right");
    if (!lua_isnil(L, -1) && r != right)
      luaL_error(L, "%s: side and right can't be set to opposites, got side %s with right %s",
                 op, side, right ? "true" : "false");
    lua_pop(L, 1);
    right = r;
  }
  lua_pop(L, 1);
  return right;
}

/* searchsorted(sorted, values, {right=, side=}) and bucketize(values, boundaries, opts): the
** 1-based positions at which the values would be inserted (1 to n + 1). values may be a
** number. */
static int search_sorted(lua_State *L, int sorted_at, const char *op) {
  lt_ctx *ctx = LTL_CTX(L);
  int values_at = 3 - sorted_at;
  lt_tensor *sorted = ltL_check(L, sorted_at), *owned, *out;
  int opts = lua_isnoneornil(L, 3) ? 0 : 3;
  if (opts && (!lua_istable(L, 3) || ltL_test(L, 3)))
    luaL_error(L, "%s: bad argument #3 (options table expected, got %s)", op, luaL_typename(L, 3));
  bool right = side_right(L, opts, op);
  lt_tensor *values = ltL_checkoperand(L, values_at, sorted, &owned);
  if (owned) ltL_push(L, owned);   /* anchored on the stack */
  LTL_TRY(L, ctx, lt_searchsorted(ctx, &out, sorted, values, right, 1));
  ltL_push(L, out);
  return 1;
}

static int l_searchsorted(lua_State *L) { return search_sorted(L, 1, "searchsorted"); }
static int l_bucketize(lua_State *L) { return search_sorted(L, 2, "bucketize"); }

/* var/std(dim?, opts?) with opts {correction=1, unbiased=true, keepdim=false}; also
** PyTorch's positional (dim, unbiased, keepdim) and (unbiased). */
static int varstd(lua_State *L, bool is_std) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *name = is_std ? "std" : "var";
  lt_tensor *a = ltL_check(L, 1), *out;
  double correction = 1;
  rargs r;
  r.ndims = 0;
  r.keepdim = false;
  r.opts = 0;
  if (lua_isboolean(L, 2)) {
    correction = lua_toboolean(L, 2) ? 1 : 0;
  } else if (is_opts(L, 2)) {
    r.opts = 2;
    r.ndims = dims_field(L, 2, name, r.dims);
  } else {
    r.ndims = dims_value(L, 2, name, r.dims);
    if (is_opts(L, 3)) {
      r.opts = 3;
    } else if (!lua_isnoneornil(L, 3)) {
      correction = bool_arg(L, 3, name, "unbiased") ? 1 : 0;
      if (!lua_isnoneornil(L, 4)) r.keepdim = bool_arg(L, 4, name, "keepdim");
    }
  }
  if (r.opts) {
    ltL_checkopts(L, r.opts, name, OPTS_VAR);
    r.keepdim = ltL_optbool_field(L, r.opts, "keepdim", false);
    correction = ltL_optbool_field(L, r.opts, "unbiased", true) ? 1 : 0;
    correction = ltL_optnum_field(L, r.opts, "correction", correction);
  }
  LTL_TRY(L, ctx, is_std ? lt_std(ctx, &out, a, r.ndims, r.dims, correction, r.keepdim)
                         : lt_var(ctx, &out, a, r.ndims, r.dims, correction, r.keepdim));
  ltL_push(L, out);
  return 1;
}

static int l_var(lua_State *L) { return varstd(L, false); }
static int l_std(lua_State *L) { return varstd(L, true); }

/* p as a number or "fro" / "inf" / "-inf". */
static double p_value(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx)) return 2;
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_tonumber(L, idx);
  if (lua_type(L, idx) == LUA_TSTRING) {
    const char *s = lua_tostring(L, idx);
    if (strcmp(s, "fro") == 0) return 2;
    if (strcmp(s, "inf") == 0) return INFINITY;
    if (strcmp(s, "-inf") == 0) return -INFINITY;
    luaL_error(L, "norm: unsupported p '%s' (expected a number, 'fro', 'inf' or '-inf')", s);
  }
  return luaL_error(L, "norm: p must be a number or a string, got %s", luaL_typename(L, idx));
}

/* norm(p=2, dim?, keepdim?) or norm({p=, dim=, keepdim=}) */
static int l_norm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *out;
  double p;
  rargs r;
  if (is_opts(L, 2)) {
    reduce_args(L, 2, "norm", OPTS_NORM, &r);
    lua_getfield(L, 2, "p");
    p = p_value(L, lua_gettop(L));
    lua_pop(L, 1);
  } else {
    p = p_value(L, 2);
    reduce_args(L, 3, "norm", OPTS_NORM, &r);
  }
  LTL_TRY(L, ctx, lt_norm(ctx, &out, a, p, r.ndims, r.dims, r.keepdim));
  ltL_push(L, out);
  return 1;
}

static int l_logsumexp(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *out;
  rargs r;
  reduce_args(L, 2, "logsumexp", OPTS_DIM_KEEPDIM, &r);
  LTL_TRY(L, ctx, lt_logsumexp(ctx, &out, a, r.ndims, r.dims, r.keepdim));
  ltL_push(L, out);
  return 1;
}

/* x:op(dim, {dtype=}) or x:op({dim=, dtype=}) for the ops along one required dim. */
typedef int (*dim_op)(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim);

static int along_dim(lua_State *L, const char *name, dim_op op) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *out;
  rargs r;
  if (lua_isnoneornil(L, 2))
    luaL_error(L, "%s: dim is required (for example x:%s(-1))", name, name);
  reduce_args(L, 2, name, OPTS_ALONG_DIM, &r);
  if (r.ndims != 1) luaL_error(L, "%s: expected one dim, got %d", name, r.ndims);
  a = with_dtype(L, a, r.opts);
  LTL_TRY(L, ctx, op(ctx, &out, a, r.dims[0]));
  ltL_push(L, out);
  return 1;
}

static int l_softmax(lua_State *L) { return along_dim(L, "softmax", lt_softmax); }
static int l_log_softmax(lua_State *L) { return along_dim(L, "log_softmax", lt_log_softmax); }
static int l_cumsum(lua_State *L) { return along_dim(L, "cumsum", lt_cumsum); }

#define BOTH (LTL_FN | LTL_METHOD)

static const ltL_Reg reduce_regs[] = {
    {"sum", l_sum, BOTH},
    {"mean", l_mean, BOTH},
    {"prod", l_prod, BOTH},
    {"amax", l_amax, BOTH},
    {"amin", l_amin, BOTH},
    {"all", l_all, BOTH},
    {"any", l_any, BOTH},
    {"max", l_max, BOTH},
    {"min", l_min, BOTH},
    {"argmax", l_argmax, BOTH},
    {"argmin", l_argmin, BOTH},
    {"count_nonzero", l_count_nonzero, BOTH},
    {"var", l_var, BOTH},
    {"std", l_std, BOTH},
    {"norm", l_norm, BOTH},
    {"logsumexp", l_logsumexp, BOTH},
    {"softmax", l_softmax, BOTH},
    {"log_softmax", l_log_softmax, BOTH},
    {"cumsum", l_cumsum, BOTH},
    {"sort", l_sort, BOTH},
    {"argsort", l_argsort, BOTH},
    {"topk", l_topk, BOTH},
    {"unique", l_unique, BOTH},
    {"searchsorted", l_searchsorted, LTL_FN},
    {"bucketize", l_bucketize, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_reduce(lua_State *L) { ltL_register(L, reduce_regs); }
