/*
** l_creation.c -- making tensors from Lua: lt.tensor{...}, zeros/ones/empty/full (and their
** _like forms), arange, linspace and eye. The random constructors, the in-place random fills
** and the Generator userdata are in l_random.c; l_creation.h is what the two share.
**
** Options come as a trailing table: {dtype=, requires_grad=, device="cpu", generator=}; a key
** a function does not take is an error naming the nearest one it does. Random values are
** drawn in row-major logical order, so the same seed gives the same tensor whatever the
** thread count. randperm returns 1..n (Lantern positions are 1-based); randint/random_ return
** values in [low, high) exactly as PyTorch (they are values, not positions).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lbind.h"
#include "../generator.h"
#include "l_creation.h"

/* ------------------------------------------------------------ helpers */

/* Index of the trailing options table among args [first, top] (0 if none). */
int ltL_cr_opts_index(lua_State *L, int first) {
  int top = lua_gettop(L);
  if (top >= first && lua_istable(L, top) && !ltL_test(L, top)) return top;
  return 0;
}

void ltL_cr_check_sizes(lua_State *L, const char *op, int n, const int64_t *size) {
  for (int i = 0; i < n; i++)
    if (size[i] < 0)
      luaL_error(L, "%s: negative dimension %d at position %d", op, (int)size[i], i + 1);
}

const char *const ltL_cr_opts_new[] = {"dtype", "requires_grad", "device", NULL};
const char *const ltL_cr_opts_random[] = {"dtype", "requires_grad", "device", "generator", NULL};
const char *const ltL_cr_opts_gen[] = {"generator", NULL};

/* Refuses keys outside `known` in the options table at opts (0: none), and a device that is no
** device or is not available, before anything is made. */
void ltL_cr_check_opts(lua_State *L, int opts, const char *op, const char *const *known) {
  if (!opts) return;
  ltL_checkopts(L, opts, op, known);
  if (lua_getfield(L, opts, "device") != LUA_TNIL) {
    lt_devtype type;
    int index;
    lt_ctx *ctx = LTL_CTX(L);
    ltL_checkdevice(L, lua_gettop(L), op, &type, &index);
    if (lt_device_check(ctx, op, type, index)) ltL_raise(L, ctx);
  }
  lua_pop(L, 1);
}

/* The new tensor on the stack top is moved to the options' device, and gets
** {requires_grad=true}. Values are made on the host and then moved: random fills draw from the
** host's generator whatever the device, so a seed gives the same values everywhere. */
void ltL_cr_finish(lua_State *L, int opts) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_devtype type = ctx->default_device;
  int index = ctx->default_index;
  if (opts && lua_getfield(L, opts, "device") != LUA_TNIL)
    ltL_checkdevice(L, -1, ltL_opname(L), &type, &index);
  if (opts) lua_pop(L, 1);
  if (type != LT_CPU) {
    ltL_move(L, -1, ltL_opname(L), type, index);
    lua_remove(L, -2);
  }
  if (opts) ltL_apply_requires_grad(L, opts, ltL_check(L, -1));
}

/* Pushes t (taking the reference) and finishes it as above. */
void ltL_cr_push(lua_State *L, lt_tensor *t, int opts) {
  ltL_push(L, t);
  ltL_cr_finish(L, opts);
}

lt_dtype ltL_cr_opt_dtype(lua_State *L, int opts, lt_dtype def) {
  return opts ? ltL_optdtype_field(L, opts, def) : def;
}

lt_generator *ltL_cr_opt_gen(lua_State *L, int opts) {
  return opts ? ltL_optgen_field(L, opts) : NULL;
}

void ltL_cr_check_float(lua_State *L, const char *op, lt_dtype dt) {
  if (!lt_dtype_is_float(dt))
    luaL_error(L, "%s: expected a floating point dtype (float32 or float64), got %s", op,
               lt_dtype_name(dt));
}

/* ------------------------------------------------------------ lt.tensor */

enum { K_BOOL = 0, K_INT = 1, K_FLOAT = 2 };

typedef struct {
  int ndim;
  int64_t size[LT_MAX_DIMS];
  int kind;
  int path[LT_MAX_DIMS + 1];   /* 1-based position being visited, for messages */
} nest_info;

static const char *path_str(const nest_info *ni, int depth, char *buf, size_t n) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < depth && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "[%d]", ni->path[i]);
  return buf;
}

/* Value of a one-element tensor used as a scalar inside a nested table, read from a copy on
** the host where it lives on a device (as item() reads it). */
static bool tensor_scalar(lua_State *L, int idx, double *v, int *kind) {
  lt_tensor *t = ltL_test(L, idx);
  if (!t || lt_numel(t) != 1) return false;
  lt_tensor *h = ltL_host(L, t);
  const char *p = lt_data(h);
  switch (h->dtype) {
    case LT_FLOAT32: *v = *(const float *)p; *kind = K_FLOAT; break;
    case LT_FLOAT64: *v = *(const double *)p; *kind = K_FLOAT; break;
    case LT_INT64: *v = (double)*(const int64_t *)p; *kind = K_INT; break;
    default: *v = *(const bool *)p; *kind = K_BOOL; break;
  }
  lt_release(h);
  return true;
}

/* Pass 1: checks the value at the top of the stack against the shape at depth d. */
static void scan(lua_State *L, nest_info *ni, int d) {
  char buf[256];
  int idx = lua_gettop(L);
  bool is_table = lua_istable(L, idx) && !ltL_test(L, idx);
  if (d == ni->ndim) {
    double v;
    int kind;
    if (lua_isboolean(L, idx)) {
      kind = K_BOOL;
    } else if (lua_type(L, idx) == LUA_TNUMBER) {
      kind = lua_isinteger(L, idx) ? K_INT : K_FLOAT;
    } else if (tensor_scalar(L, idx, &v, &kind)) {
      /* ok */
    } else if (is_table) {
      luaL_error(L, "tensor: ragged nested table: element %s is a table but the elements "
                 "before it are numbers", path_str(ni, d, buf, sizeof buf));
      return;
    } else {
      lt_tensor *t = ltL_test(L, idx);
      char sb[256];
      if (d == 0)
        luaL_error(L, "tensor: bad argument #1 (nested table, number or boolean expected, got "
                   "%s)", t ? "a tensor with several elements" : luaL_typename(L, idx));
      else if (t)
        luaL_error(L, "tensor: element %s is a tensor of shape %s; only one-element tensors "
                   "can be used as numbers", path_str(ni, d, buf, sizeof buf), LT_SHAPE(t, sb));
      else
        luaL_error(L, "tensor: element %s is a %s; expected a number or boolean",
                   path_str(ni, d, buf, sizeof buf), luaL_typename(L, idx));
      return;
    }
    if (kind > ni->kind) ni->kind = kind;
    return;
  }
  if (!is_table) {
    luaL_error(L, "tensor: ragged nested table: element %s is a %s but a table of %d "
               "entries was expected", path_str(ni, d, buf, sizeof buf), luaL_typename(L, idx),
               (int)ni->size[d]);
    return;
  }
  int64_t n = (int64_t)lua_rawlen(L, idx);
  if (n != ni->size[d]) {
    luaL_error(L, "tensor: ragged nested table: element %s has %d entries but %d were expected "
               "(from the first element at that depth)", d ? path_str(ni, d, buf, sizeof buf)
               : "(the outer table)", (int)n, (int)ni->size[d]);
    return;
  }
  luaL_checkstack(L, 4, "tensor: nesting too deep");
  for (int64_t i = 0; i < n; i++) {
    ni->path[d] = (int)(i + 1);
    lua_rawgeti(L, idx, i + 1);
    scan(L, ni, d + 1);
    lua_pop(L, 1);
  }
}

/* Pass 2: writes the values in row-major order into p (no errors possible here). */
static void fill(lua_State *L, const nest_info *ni, int d, lt_dtype dt, char **p) {
  int idx = lua_gettop(L);
  if (d == ni->ndim) {
    double v = 0;
    int kind;
    bool is_int = false;
    lua_Integer iv = 0;
    if (lua_isboolean(L, idx)) {
      v = lua_toboolean(L, idx);
    } else if (lua_isinteger(L, idx)) {
      iv = lua_tointeger(L, idx);
      v = (double)iv;
      is_int = true;
    } else if (lua_type(L, idx) == LUA_TNUMBER) {
      v = lua_tonumber(L, idx);
    } else {
      tensor_scalar(L, idx, &v, &kind);
    }
    switch (dt) {
      case LT_FLOAT32: *(float *)*p = (float)v; break;
      case LT_FLOAT64: *(double *)*p = v; break;
      case LT_INT64: *(int64_t *)*p = is_int ? (int64_t)iv : (int64_t)v; break;
      default: *(bool *)*p = v != 0; break;
    }
    *p += lt_dtype_size(dt);
    return;
  }
  for (int64_t i = 0; i < ni->size[d]; i++) {
    lua_rawgeti(L, idx, i + 1);
    fill(L, ni, d + 1, dt, p);
    lua_pop(L, 1);
  }
}

/* lt.tensor(data, {dtype=, requires_grad=}): data is a nested table, a number, a boolean or a
** tensor (copied). Lua integers give int64, any float gives float32, booleans give bool. */
static int l_tensor(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  int opts = lua_istable(L, 2) ? 2 : 0;
  if (!lua_isnoneornil(L, 2) && !opts)
    return luaL_error(L, "tensor: bad argument #2 (options table expected, got %s)",
                      luaL_typename(L, 2));
  ltL_cr_check_opts(L, opts, "tensor", ltL_cr_opts_new);
  lt_tensor *src = ltL_test(L, 1), *t;
  if (src) {   /* a copy, detached from the graph */
    lt_dtype dt = ltL_cr_opt_dtype(L, opts, src->dtype);
    LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, src->ndim, src->size));
    bool old = lt_set_grad_enabled(ctx, false);
    int rc = lt_copy_(ctx, t, src);
    lt_set_grad_enabled(ctx, old);
    if (rc) {
      lt_release(t);
      return ltL_raise(L, ctx);
    }
    ltL_cr_push(L, t, opts);
    return 1;
  }
  if (lua_isnoneornil(L, 1))
    return luaL_error(L, "tensor: bad argument #1 (nested table, number or boolean expected, "
                      "got %s)", luaL_typename(L, 1));
  nest_info ni;
  memset(&ni, 0, sizeof ni);
  /* shape from the first element at each depth */
  lua_pushvalue(L, 1);
  while (lua_istable(L, -1) && !ltL_test(L, -1)) {
    if (ni.ndim == LT_MAX_DIMS)
      return luaL_error(L, "tensor: nested table is deeper than %d dimensions", LT_MAX_DIMS);
    int64_t n = (int64_t)lua_rawlen(L, -1);
    ni.size[ni.ndim++] = n;
    if (n == 0) break;
    lua_rawgeti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  ni.kind = K_BOOL;
  int64_t numel = ltB_shape_numel(ni.ndim, ni.size);
  if (numel == 0) ni.kind = K_FLOAT;   /* tensor{} is an empty float32 tensor */
  lua_pushvalue(L, 1);
  scan(L, &ni, 0);
  lua_pop(L, 1);
  lt_dtype def = ni.kind == K_FLOAT ? LT_FLOAT32 : ni.kind == K_INT ? LT_INT64 : LT_BOOL;
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, def);
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, ni.ndim, ni.size));
  char *p = lt_data(t);
  lua_pushvalue(L, 1);
  fill(L, &ni, 0, dt, &p);
  lua_pop(L, 1);
  ltL_cr_push(L, t, opts);
  return 1;
}

/* ------------------------------------------------------------ filled constructors */

int ltL_cr_size_args(lua_State *L, const char *op, const char *const *known, int64_t *size,
                     int *opts) {
  int next;
  int n = ltL_checksizes(L, 1, size, &next);
  if (!lua_isnoneornil(L, next) && !lua_istable(L, next))
    luaL_error(L, "%s: bad argument #%d (size or options table expected, got %s)", op, next,
               luaL_typename(L, next));
  *opts = lua_istable(L, next) ? next : 0;
  ltL_cr_check_opts(L, *opts, op, known);
  ltL_cr_check_sizes(L, op, n, size);
  return n;
}

static int filled(lua_State *L, const char *op, double v, bool uninit) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t size[LT_MAX_DIMS];
  int opts;
  int n = ltL_cr_size_args(L, op, ltL_cr_opts_new, size, &opts);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, LT_FLOAT32);
  lt_tensor *t;
  if (uninit)
    LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  else
    LTL_TRY(L, ctx, lt_full(ctx, &t, dt, n, size, v));
  ltL_cr_push(L, t, opts);
  return 1;
}

static int l_zeros(lua_State *L) { return filled(L, "zeros", 0.0, false); }
static int l_ones(lua_State *L) { return filled(L, "ones", 1.0, false); }
static int l_empty(lua_State *L) { return filled(L, "empty", 0.0, true); }

/* Fill value at idx: its Lua type picks the default dtype as in PyTorch's full. */
static double fill_value(lua_State *L, const char *op, int idx, lt_dtype *def) {
  if (lua_isboolean(L, idx)) {
    *def = LT_BOOL;
    return lua_toboolean(L, idx);
  }
  if (lua_isinteger(L, idx)) {
    *def = LT_INT64;
    return (double)lua_tointeger(L, idx);
  }
  if (lua_type(L, idx) == LUA_TNUMBER) {
    *def = LT_FLOAT32;
    return lua_tonumber(L, idx);
  }
  luaL_error(L, "%s: bad argument #%d (fill value must be a number or boolean, got %s)", op,
             idx, luaL_typename(L, idx));
  return 0;
}

/* full({sizes}, value, opts) or full(s1, s2, ..., value, opts) */
static int l_full(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t size[LT_MAX_DIMS];
  int n, vidx;
  if (lua_istable(L, 1) && !ltL_test(L, 1)) {
    int next;
    n = ltL_checksizes(L, 1, size, &next);
    vidx = next;
  } else {
    int k = 0;
    while (lua_type(L, 1 + k) == LUA_TNUMBER) k++;
    if (lua_isboolean(L, 1 + k)) {
      n = k;
      vidx = 1 + k;
    } else {
      if (k == 0)
        return luaL_error(L, "full: expected sizes and a fill value, e.g. full({2, 3}, 7.5)");
      n = k - 1;
      vidx = k;
    }
    if (n > LT_MAX_DIMS) return luaL_error(L, "full: too many dimensions");
    for (int i = 0; i < n; i++) {
      int isint;
      size[i] = lua_tointegerx(L, 1 + i, &isint);
      if (!isint) return luaL_error(L, "full: size at position %d must be an integer", i + 1);
    }
  }
  if (lua_isnoneornil(L, vidx)) return luaL_error(L, "full: missing the fill value");
  lt_dtype def;
  double v = fill_value(L, "full", vidx, &def);
  int opts = lua_istable(L, vidx + 1) ? vidx + 1 : 0;
  ltL_cr_check_opts(L, opts, "full", ltL_cr_opts_new);
  ltL_cr_check_sizes(L, "full", n, size);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, def);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_full(ctx, &t, dt, n, size, v));
  ltL_cr_push(L, t, opts);
  return 1;
}

/* ------------------------------------------------------------ _like constructors */

/* What a _like constructor puts in its new tensor. */
enum like_kind { LIKE_ZEROS, LIKE_ONES, LIKE_EMPTY, LIKE_FULL, LIKE_RAND, LIKE_RANDN };

static int like(lua_State *L, const char *op, enum like_kind kind) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *src = ltL_check(L, 1), *t;
  int opts = ltL_cr_opts_index(L, 2);
  bool random = kind == LIKE_RAND || kind == LIKE_RANDN;
  ltL_cr_check_opts(L, opts, op, random ? ltL_cr_opts_random : ltL_cr_opts_new);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, src->dtype);
  double v = kind == LIKE_ONES ? 1.0 : 0.0;
  if (kind == LIKE_FULL) {   /* full_like(t, value, opts) */
    lt_dtype ignored;
    v = fill_value(L, op, 2, &ignored);
  }
  if (random) ltL_cr_check_float(L, op, dt);
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, src->ndim, src->size));
  ltL_push(L, t);
  int rc = 0;
  switch (kind) {
    case LIKE_ZEROS: case LIKE_ONES: case LIKE_FULL: rc = lt_fill_(ctx, t, v); break;
    case LIKE_RAND: rc = ltO_uniform_(ctx, t, 0.0, 1.0, ltL_cr_opt_gen(L, opts)); break;
    case LIKE_RANDN: rc = ltO_normal_(ctx, t, 0.0, 1.0, ltL_cr_opt_gen(L, opts)); break;
    case LIKE_EMPTY: break;
  }
  if (rc) return ltL_raise(L, ctx);
  ltL_cr_finish(L, opts);
  return 1;
}

static int l_zeros_like(lua_State *L) { return like(L, "zeros_like", LIKE_ZEROS); }
static int l_ones_like(lua_State *L) { return like(L, "ones_like", LIKE_ONES); }
static int l_empty_like(lua_State *L) { return like(L, "empty_like", LIKE_EMPTY); }
static int l_full_like(lua_State *L) { return like(L, "full_like", LIKE_FULL); }
static int l_rand_like(lua_State *L) { return like(L, "rand_like", LIKE_RAND); }
static int l_randn_like(lua_State *L) { return like(L, "randn_like", LIKE_RANDN); }

/* Reads (low?, high) from idx: returns the index after them. */
int ltL_cr_low_high(lua_State *L, const char *op, int idx, int64_t *lo, int64_t *hi) {
  int k = 0;
  while (k < 2 && lua_type(L, idx + k) == LUA_TNUMBER) k++;
  if (k == 0) luaL_error(L, "%s: expected (low?, high, ...), got %s", op,
                         luaL_typename(L, idx));
  for (int i = 0; i < k; i++)
    if (!lua_isinteger(L, idx + i))
      luaL_error(L, "%s: bounds must be integers (argument #%d is %s)", op, idx + i,
                 lua_tostring(L, idx + i));
  *lo = k == 2 ? lua_tointeger(L, idx) : 0;
  *hi = lua_tointeger(L, idx + k - 1);
  if (*lo >= *hi)
    luaL_error(L, "%s: expected low < high, got low=%d high=%d", op, (int)*lo, (int)*hi);
  return idx + k;
}

/* randint_like(t, low?, high, opts) */
static int l_randint_like(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *src = ltL_check(L, 1), *t;
  int64_t lo, hi;
  ltL_cr_low_high(L, "randint_like", 2, &lo, &hi);
  int opts = ltL_cr_opts_index(L, 2);
  ltL_cr_check_opts(L, opts, "randint_like", ltL_cr_opts_random);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, src->dtype);
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, src->ndim, src->size));
  ltL_push(L, t);
  LTL_TRY(L, ctx, ltO_randint_(ctx, t, lo, hi, ltL_cr_opt_gen(L, opts)));
  ltL_cr_finish(L, opts);
  return 1;
}

/* ------------------------------------------------------------ ranges */

/* arange(end) / arange(start, end) / arange(start, end, step), then options */
static int l_arange(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  int k = 0;
  bool any_float = false;
  while (k < 3 && lua_type(L, 1 + k) == LUA_TNUMBER) {
    if (!lua_isinteger(L, 1 + k)) any_float = true;
    k++;
  }
  if (k == 0) return luaL_error(L, "arange: expected (start?, end, step?), got %s",
                                luaL_typename(L, 1));
  double start = 0, end, step = 1;
  if (k == 1) {
    end = lua_tonumber(L, 1);
  } else {
    start = lua_tonumber(L, 1);
    end = lua_tonumber(L, 2);
    if (k == 3) step = lua_tonumber(L, 3);
  }
  int opts = lua_istable(L, 1 + k) ? 1 + k : 0;
  ltL_cr_check_opts(L, opts, "arange", ltL_cr_opts_new);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, any_float ? LT_FLOAT32 : LT_INT64);
  lt_tensor *t;
  if (!any_float && dt == LT_INT64) {   /* exact beyond 2^53 */
    lua_Integer a = k == 1 ? 0 : lua_tointeger(L, 1), b = lua_tointeger(L, k == 1 ? 1 : 2),
                c = k == 3 ? lua_tointeger(L, 3) : 1;
    LTL_TRY(L, ctx, lt_arange_int(ctx, &t, (int64_t)a, (int64_t)b, (int64_t)c));
  } else {
    LTL_TRY(L, ctx, lt_arange(ctx, &t, start, end, step, dt));
  }
  ltL_cr_push(L, t, opts);
  return 1;
}

/* linspace(start, end, steps, opts) */
static int l_linspace(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  double start = luaL_checknumber(L, 1), end = luaL_checknumber(L, 2);
  lua_Integer steps = luaL_checkinteger(L, 3);
  int opts = lua_istable(L, 4) ? 4 : 0;
  ltL_cr_check_opts(L, opts, "linspace", ltL_cr_opts_new);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, LT_FLOAT32);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_linspace(ctx, &t, start, end, (int64_t)steps, dt));
  ltL_cr_push(L, t, opts);
  return 1;
}

/* eye(n, m?, opts) */
static int l_eye(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lua_Integer n = luaL_checkinteger(L, 1), m = n;
  int opts = 0;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    m = luaL_checkinteger(L, 2);
    opts = lua_istable(L, 3) ? 3 : 0;
  } else {
    opts = lua_istable(L, 2) ? 2 : 0;
  }
  ltL_cr_check_opts(L, opts, "eye", ltL_cr_opts_new);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, LT_FLOAT32);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_eye(ctx, &t, (int64_t)n, (int64_t)m, dt));
  ltL_cr_push(L, t, opts);
  return 1;
}

void ltL_open_creation(lua_State *L) {
  static const ltL_Reg regs[] = {
      {"tensor", l_tensor, LTL_FN},
      {"zeros", l_zeros, LTL_FN},
      {"ones", l_ones, LTL_FN},
      {"empty", l_empty, LTL_FN},
      {"full", l_full, LTL_FN},
      {"zeros_like", l_zeros_like, LTL_FN},
      {"ones_like", l_ones_like, LTL_FN},
      {"empty_like", l_empty_like, LTL_FN},
      {"full_like", l_full_like, LTL_FN},
      {"rand_like", l_rand_like, LTL_FN},
      {"randn_like", l_randn_like, LTL_FN},
      {"randint_like", l_randint_like, LTL_FN},
      {"arange", l_arange, LTL_FN},
      {"linspace", l_linspace, LTL_FN},
      {"eye", l_eye, LTL_FN},
      {NULL, NULL, 0},
  };
  ltL_register(L, regs);
}
