/*
** l_creation.c -- making tensors from Lua: lt.tensor{...}, zeros/ones/empty/full (and their
** _like forms), arange, linspace, eye, the random constructors and in-place random fills, and
** the Generator userdata with the default generator's seeding and state functions.
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
#include "../random.h"

/* ------------------------------------------------------------ helpers */

/* Index of the trailing options table among args [first, top] (0 if none). */
static int opts_index(lua_State *L, int first) {
  int top = lua_gettop(L);
  if (top >= first && lua_istable(L, top) && !ltL_test(L, top)) return top;
  return 0;
}

static void check_sizes(lua_State *L, const char *op, int n, const int64_t *size) {
  for (int i = 0; i < n; i++)
    if (size[i] < 0)
      luaL_error(L, "%s: negative dimension %d at position %d", op, (int)size[i], i + 1);
}

static const char *const OPTS_NEW[] = {"dtype", "requires_grad", "device", NULL};
static const char *const OPTS_RANDOM[] = {"dtype", "requires_grad", "device", "generator", NULL};
static const char *const OPTS_GEN[] = {"generator", NULL};

/* Refuses keys outside `known` in the options table at opts (0: none), and a device that is no
** device or is not available, before anything is made. */
static void check_opts(lua_State *L, int opts, const char *op, const char *const *known) {
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
static void finish_new(lua_State *L, int opts) {
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
static void push_new(lua_State *L, lt_tensor *t, int opts) {
  ltL_push(L, t);
  finish_new(L, opts);
}

static lt_dtype opt_dtype(lua_State *L, int opts, lt_dtype def) {
  return opts ? ltL_optdtype_field(L, opts, def) : def;
}

static lt_generator *opt_gen(lua_State *L, int opts) {
  return opts ? ltL_optgen_field(L, opts) : NULL;
}

static void check_float(lua_State *L, const char *op, lt_dtype dt) {
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

/* Value of a one-element tensor used as a scalar inside a nested table. */
static bool tensor_scalar(lua_State *L, int idx, double *v, int *kind) {
  lt_tensor *t = ltL_test(L, idx);
  if (!t || lt_numel(t) != 1) return false;
  const char *p = lt_data(t);
  switch (t->dtype) {
    case LT_FLOAT32: *v = *(const float *)p; *kind = K_FLOAT; break;
    case LT_FLOAT64: *v = *(const double *)p; *kind = K_FLOAT; break;
    case LT_INT64: *v = (double)*(const int64_t *)p; *kind = K_INT; break;
    default: *v = *(const bool *)p; *kind = K_BOOL; break;
  }
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
  check_opts(L, opts, "tensor", OPTS_NEW);
  lt_tensor *src = ltL_test(L, 1), *t;
  if (src) {   /* a copy, detached from the graph */
    lt_dtype dt = opt_dtype(L, opts, src->dtype);
    LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, src->ndim, src->size));
    bool old = lt_set_grad_enabled(ctx, false);
    int rc = lt_copy_(ctx, t, src);
    lt_set_grad_enabled(ctx, old);
    if (rc) {
      lt_release(t);
      return ltL_raise(L, ctx);
    }
    push_new(L, t, opts);
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
  int64_t numel = lt_shape_numel(ni.ndim, ni.size);
  if (numel == 0) ni.kind = K_FLOAT;   /* tensor{} is an empty float32 tensor */
  lua_pushvalue(L, 1);
  scan(L, &ni, 0);
  lua_pop(L, 1);
  lt_dtype def = ni.kind == K_FLOAT ? LT_FLOAT32 : ni.kind == K_INT ? LT_INT64 : LT_BOOL;
  lt_dtype dt = opt_dtype(L, opts, def);
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, ni.ndim, ni.size));
  char *p = lt_data(t);
  lua_pushvalue(L, 1);
  fill(L, &ni, 0, dt, &p);
  lua_pop(L, 1);
  push_new(L, t, opts);
  return 1;
}

/* ------------------------------------------------------------ filled constructors */

static int filled(lua_State *L, const char *op, double v, bool uninit) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t size[LT_MAX_DIMS];
  int next;
  int n = ltL_checksizes(L, 1, size, &next);
  if (!lua_isnoneornil(L, next) && !lua_istable(L, next))
    return luaL_error(L, "%s: bad argument #%d (size or options table expected, got %s)", op,
                      next, luaL_typename(L, next));
  int opts = lua_istable(L, next) ? next : 0;
  check_opts(L, opts, op, OPTS_NEW);
  check_sizes(L, op, n, size);
  lt_dtype dt = opt_dtype(L, opts, LT_FLOAT32);
  lt_tensor *t;
  if (uninit)
    LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  else
    LTL_TRY(L, ctx, lt_full(ctx, &t, dt, n, size, v));
  push_new(L, t, opts);
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
  check_opts(L, opts, "full", OPTS_NEW);
  check_sizes(L, "full", n, size);
  lt_dtype dt = opt_dtype(L, opts, def);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_full(ctx, &t, dt, n, size, v));
  push_new(L, t, opts);
  return 1;
}

/* ------------------------------------------------------------ _like constructors */

static int like(lua_State *L, const char *op, int kind) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *src = ltL_check(L, 1), *t;
  int opts = opts_index(L, 2);
  check_opts(L, opts, op, kind == 4 || kind == 5 ? OPTS_RANDOM : OPTS_NEW);
  lt_dtype dt = opt_dtype(L, opts, src->dtype);
  double v = kind == 1 ? 1.0 : 0.0;
  if (kind == 3) {   /* full_like(t, value, opts) */
    lt_dtype ignored;
    v = fill_value(L, op, 2, &ignored);
  }
  if (kind == 4 || kind == 5) check_float(L, op, dt);
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, src->ndim, src->size));
  ltL_push(L, t);
  int rc = 0;
  switch (kind) {
    case 0: case 1: case 3: rc = lt_fill_(ctx, t, v); break;
    case 4: rc = lt_uniform_(ctx, t, 0.0, 1.0, opt_gen(L, opts)); break;
    case 5: rc = lt_normal_(ctx, t, 0.0, 1.0, opt_gen(L, opts)); break;
    default: break;
  }
  if (rc) return ltL_raise(L, ctx);
  finish_new(L, opts);
  return 1;
}

static int l_zeros_like(lua_State *L) { return like(L, "zeros_like", 0); }
static int l_ones_like(lua_State *L) { return like(L, "ones_like", 1); }
static int l_empty_like(lua_State *L) { return like(L, "empty_like", 2); }
static int l_full_like(lua_State *L) { return like(L, "full_like", 3); }
static int l_rand_like(lua_State *L) { return like(L, "rand_like", 4); }
static int l_randn_like(lua_State *L) { return like(L, "randn_like", 5); }

/* Reads (low?, high) from idx: returns the index after them. */
static int low_high(lua_State *L, const char *op, int idx, int64_t *lo, int64_t *hi) {
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
  low_high(L, "randint_like", 2, &lo, &hi);
  int opts = opts_index(L, 2);
  check_opts(L, opts, "randint_like", OPTS_RANDOM);
  lt_dtype dt = opt_dtype(L, opts, src->dtype);
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, src->ndim, src->size));
  ltL_push(L, t);
  LTL_TRY(L, ctx, lt_randint_(ctx, t, lo, hi, opt_gen(L, opts)));
  finish_new(L, opts);
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
  check_opts(L, opts, "arange", OPTS_NEW);
  lt_dtype dt = opt_dtype(L, opts, any_float ? LT_FLOAT32 : LT_INT64);
  lt_tensor *t;
  if (!any_float && dt == LT_INT64) {   /* exact beyond 2^53 */
    lua_Integer a = k == 1 ? 0 : lua_tointeger(L, 1), b = lua_tointeger(L, k == 1 ? 1 : 2),
                c = k == 3 ? lua_tointeger(L, 3) : 1;
    LTL_TRY(L, ctx, lt_arange_int(ctx, &t, (int64_t)a, (int64_t)b, (int64_t)c));
  } else {
    LTL_TRY(L, ctx, lt_arange(ctx, &t, start, end, step, dt));
  }
  push_new(L, t, opts);
  return 1;
}

/* linspace(start, end, steps, opts) */
static int l_linspace(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  double start = luaL_checknumber(L, 1), end = luaL_checknumber(L, 2);
  lua_Integer steps = luaL_checkinteger(L, 3);
  int opts = lua_istable(L, 4) ? 4 : 0;
  check_opts(L, opts, "linspace", OPTS_NEW);
  lt_dtype dt = opt_dtype(L, opts, LT_FLOAT32);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_linspace(ctx, &t, start, end, (int64_t)steps, dt));
  push_new(L, t, opts);
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
  check_opts(L, opts, "eye", OPTS_NEW);
  lt_dtype dt = opt_dtype(L, opts, LT_FLOAT32);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_eye(ctx, &t, (int64_t)n, (int64_t)m, dt));
  push_new(L, t, opts);
  return 1;
}

/* ------------------------------------------------------------ random constructors */

static int random_new(lua_State *L, const char *op, bool normal) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t size[LT_MAX_DIMS];
  int next;
  int n = ltL_checksizes(L, 1, size, &next);
  if (!lua_isnoneornil(L, next) && !lua_istable(L, next))
    return luaL_error(L, "%s: bad argument #%d (size or options table expected, got %s)", op,
                      next, luaL_typename(L, next));
  int opts = lua_istable(L, next) ? next : 0;
  check_opts(L, opts, op, OPTS_RANDOM);
  check_sizes(L, op, n, size);
  lt_dtype dt = opt_dtype(L, opts, LT_FLOAT32);
  check_float(L, op, dt);
  lt_generator *g = opt_gen(L, opts);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  ltL_push(L, t);
  if (normal)
    LTL_TRY(L, ctx, lt_normal_(ctx, t, 0.0, 1.0, g));
  else
    LTL_TRY(L, ctx, lt_uniform_(ctx, t, 0.0, 1.0, g));
  finish_new(L, opts);
  return 1;
}

static int l_rand(lua_State *L) { return random_new(L, "rand", false); }
static int l_randn(lua_State *L) { return random_new(L, "randn", true); }

/* randint(low?, high, {sizes}, opts) */
static int l_randint(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t lo, hi, size[LT_MAX_DIMS];
  int k = 0;
  while (k < 2 && lua_type(L, 1 + k) == LUA_TNUMBER) k++;
  if (k > 0 && (!lua_istable(L, 1 + k) || ltL_test(L, 1 + k)))
    return luaL_error(L, "randint: expected a size table after the bounds, e.g. "
                      "randint(0, 10, {2, 3}), got %s", luaL_typename(L, 1 + k));
  int at = low_high(L, "randint", 1, &lo, &hi), next;
  int n = ltL_checksizes(L, at, size, &next);
  int opts = lua_istable(L, next) ? next : 0;
  check_opts(L, opts, "randint", OPTS_RANDOM);
  check_sizes(L, "randint", n, size);
  lt_dtype dt = opt_dtype(L, opts, LT_INT64);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  ltL_push(L, t);
  LTL_TRY(L, ctx, lt_randint_(ctx, t, lo, hi, opt_gen(L, opts)));
  finish_new(L, opts);
  return 1;
}

/* randperm(n, opts): a random ordering of the positions 1..n */
static int l_randperm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lua_Integer n = luaL_checkinteger(L, 1);
  int opts = lua_istable(L, 2) ? 2 : 0;
  check_opts(L, opts, "randperm", OPTS_RANDOM);
  lt_dtype dt = opt_dtype(L, opts, LT_INT64);
  if (dt == LT_BOOL) return luaL_error(L, "randperm: dtype bool is not supported");
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_randperm(ctx, &t, (int64_t)n, opt_gen(L, opts)));
  int64_t *p = lt_data(t);
  for (int64_t i = 0; i < n; i++) p[i] += 1;
  if (dt != LT_INT64) {
    lt_tensor *c;
    int rc = lt_to_dtype(ctx, &c, t, dt);
    lt_release(t);
    if (rc) return ltL_raise(L, ctx);
    t = c;
  }
  push_new(L, t, opts);
  return 1;
}

/* normal(mean, std, {sizes}, opts) with number mean and std */
static int l_normal(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  double mean = luaL_checknumber(L, 1), std = luaL_checknumber(L, 2);
  int64_t size[LT_MAX_DIMS];
  int next;
  if (!lua_istable(L, 3) || ltL_test(L, 3))
    return luaL_error(L, "normal: expected (mean, std, {sizes}, opts) with number mean and "
                      "std, got %s as argument #3", luaL_typename(L, 3));
  int n = ltL_checksizes(L, 3, size, &next);
  int opts = lua_istable(L, next) ? next : 0;
  check_opts(L, opts, "normal", OPTS_RANDOM);
  check_sizes(L, "normal", n, size);
  lt_dtype dt = opt_dtype(L, opts, LT_FLOAT32);
  check_float(L, "normal", dt);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  ltL_push(L, t);
  LTL_TRY(L, ctx, lt_normal_(ctx, t, mean, std, opt_gen(L, opts)));
  finish_new(L, opts);
  return 1;
}

/* bernoulli(probs, opts): 1 with probability probs[i], elementwise, same dtype as probs;
** bernoulli(t, p, opts): a tensor of t's shape and dtype with 1 at probability p (PyTorch's
** Tensor.bernoulli(p)). */
static int l_bernoulli(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *pr = ltL_check(L, 1), *c, *t;
  int opts = opts_index(L, 2);
  check_opts(L, opts, "bernoulli", OPTS_GEN);
  lt_generator *g = opt_gen(L, opts);
  if (!g) g = ctx->gen;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    double p = lua_tonumber(L, 2);
    if (!(p >= 0 && p <= 1)) {
      char num[32];
      /* "2" as PyTorch prints it, not Lua's "2.0"; any NaN as "nan" (0/0 has its sign set) */
      snprintf(num, sizeof num, "%g", p != p ? NAN : p);
      return luaL_error(L, "bernoulli: expects p to be in [0, 1], but got p=%s", num);
    }
    LTL_TRY(L, ctx, lt_empty(ctx, &t, pr->dtype, pr->ndim, pr->size));
    ltL_push(L, t);
    LTL_TRY(L, ctx, lt_bernoulli_(ctx, t, p, g));
    return 1;
  }
  if (!lua_isnoneornil(L, 2) && !opts)
    return luaL_error(L, "bernoulli: bad argument #2 (number p or options table expected, got "
                      "%s)", luaL_typename(L, 2));
  check_float(L, "bernoulli", pr->dtype);
  LTL_TRY(L, ctx, lt_to_dtype(ctx, &c, pr, LT_FLOAT64));
  lt_tensor *cc;
  int rc = lt_contiguous(ctx, &cc, c);
  lt_release(c);
  if (rc) return ltL_raise(L, ctx);
  ltL_push(L, cc);   /* anchor */
  const double *p = lt_data(cc);
  int64_t n = lt_numel(cc);
  for (int64_t i = 0; i < n; i++)
    if (!(p[i] >= 0 && p[i] <= 1))
      return luaL_error(L, "bernoulli: probabilities must be in [0, 1], got %f at flat "
                        "position %d", p[i], (int)(i + 1));
  LTL_TRY(L, ctx, lt_empty(ctx, &t, pr->dtype, pr->ndim, pr->size));
  ltL_push(L, t);
  char *o = lt_data(t);
  for (int64_t i = 0; i < n; i++) {
    double b = lt_next_double(g) < p[i] ? 1.0 : 0.0;
    if (pr->dtype == LT_FLOAT32)
      ((float *)o)[i] = (float)b;
    else
      ((double *)o)[i] = b;
  }
  return 1;
}

/* ------------------------------------------------------------ in-place random fills */

/* Optional number at idx (nil or absent: def); an options table there means "absent". */
static double optnum(lua_State *L, int idx, double def) {
  if (lua_isnoneornil(L, idx) || lua_istable(L, idx)) return def;
  return luaL_checknumber(L, idx);
}

static int t_uniform_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  double a = optnum(L, 2, 0.0), b = optnum(L, 3, 1.0);
  int opts = opts_index(L, 2);
  check_opts(L, opts, "uniform_", OPTS_GEN);
  check_float(L, "uniform_", t->dtype);
  LTL_RETURN_SELF(L, ctx, lt_uniform_(ctx, t, a, b, opt_gen(L, opts)));
}

static int t_normal_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  double mean = optnum(L, 2, 0.0), std = optnum(L, 3, 1.0);
  int opts = opts_index(L, 2);
  check_opts(L, opts, "normal_", OPTS_GEN);
  check_float(L, "normal_", t->dtype);
  LTL_RETURN_SELF(L, ctx, lt_normal_(ctx, t, mean, std, opt_gen(L, opts)));
}

static int t_bernoulli_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  double p = optnum(L, 2, 0.5);
  int opts = opts_index(L, 2);
  check_opts(L, opts, "bernoulli_", OPTS_GEN);
  LTL_RETURN_SELF(L, ctx, lt_bernoulli_(ctx, t, p, opt_gen(L, opts)));
}

/* random_(): [0, 2^mantissa] for floats, [0, 2^63) for int64, {0,1} for bool;
** random_(to): [0, to); random_(from, to): [from, to). */
static int t_random_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  int opts = opts_index(L, 2);
  check_opts(L, opts, "random_", OPTS_GEN);
  int64_t lo = 0, hi;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    low_high(L, "random_", 2, &lo, &hi);
  } else {
    switch (t->dtype) {
      case LT_FLOAT32: hi = ((int64_t)1 << 24) + 1; break;
      case LT_FLOAT64: hi = ((int64_t)1 << 53) + 1; break;
      case LT_BOOL: hi = 2; break;
      default: hi = INT64_MAX; break;
    }
  }
  LTL_RETURN_SELF(L, ctx, lt_randint_(ctx, t, lo, hi, opt_gen(L, opts)));
}

/* ------------------------------------------------------------ generators */

/* A Generator userdata boxes an lt_generator*; user value 1 is true when the box owns it
** (the default generator belongs to the context). */
static lt_generator *push_gen(lua_State *L, lt_generator *g, bool owned) {
  lt_generator **box = lua_newuserdatauv(L, sizeof *box, 1);
  *box = g;
  lua_pushboolean(L, owned);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, LTL_GEN_MT);
  return g;
}

static int gen_gc(lua_State *L) {
  lt_generator **box = luaL_checkudata(L, 1, LTL_GEN_MT);
  lua_getiuservalue(L, 1, 1);
  if (lua_toboolean(L, -1) && *box) lt_generator_free(*box);
  *box = NULL;
  return 0;
}

static uint64_t check_seed(lua_State *L, int idx) {
  if (!lua_isinteger(L, idx))
    luaL_error(L, "manual_seed: seed must be an integer, got %s",
               lua_type(L, idx) == LUA_TNUMBER ? "a float" : luaL_typename(L, idx));
  return (uint64_t)lua_tointeger(L, idx);
}

/* lt.Generator(seed?) -- a new generator, seeded with `seed` (default 67280421310721 as
** PyTorch's default_rng_seed_val). */
static int l_generator_new(lua_State *L) {
  uint64_t seed = lua_isnoneornil(L, 1) ? 67280421310721ULL : check_seed(L, 1);
  lt_generator **box = lua_newuserdatauv(L, sizeof *box, 1);
  *box = NULL;
  lua_pushboolean(L, 1);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, LTL_GEN_MT);
  *box = lt_generator_new(seed);
  if (!*box) return luaL_error(L, "Generator: out of memory");
  return 1;
}

/* A non-deterministic seed (time and address entropy), below 2^63 so it stays a positive
** Lua integer. */
static uint64_t fresh_seed(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)(uintptr_t)L << 16) ^ ((uint64_t)(uintptr_t)&ts >> 4);
  static _Thread_local uint64_t counter;
  x += 0x9e3779b97f4a7c15ULL * ++counter;
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 29;
  return x & 0x7fffffffffffffffULL;
}

static int gen_manual_seed(lua_State *L) {
  lt_generator *g = ltL_checkgen(L, 1);
  lt_generator_seed(g, check_seed(L, 2));
  lua_settop(L, 1);
  return 1;
}

static int gen_seed(lua_State *L) {
  lt_generator *g = ltL_checkgen(L, 1);
  uint64_t s = fresh_seed(L);
  lt_generator_seed(g, s);
  lua_pushinteger(L, (lua_Integer)s);
  return 1;
}

static int gen_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)ltL_checkgen(L, 1)->seed);
  return 1;
}

static int push_state(lua_State *L, const lt_generator *g) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t n = LT_GEN_STATE_WORDS;
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, LT_INT64, 1, &n));
  lt_generator_get_state(g, (uint64_t *)lt_data(t));
  ltL_push(L, t);
  return 1;
}

static void set_state(lua_State *L, lt_generator *g, int idx) {
  lt_tensor *t = ltL_check(L, idx);
  if (t->dtype != LT_INT64 || t->ndim != 1 || t->size[0] != LT_GEN_STATE_WORDS) {
    char buf[256];
    luaL_error(L, "set_state: expected an int64 tensor of %d elements (from get_state), got "
               "%s %s", LT_GEN_STATE_WORDS, lt_dtype_name(t->dtype), LT_SHAPE(t, buf));
  }
  uint64_t w[LT_GEN_STATE_WORDS];
  const int64_t *p = lt_data(t);
  for (int i = 0; i < LT_GEN_STATE_WORDS; i++) w[i] = (uint64_t)p[i * t->stride[0]];
  lt_generator_set_state(g, w);
}

static int gen_get_state(lua_State *L) { return push_state(L, ltL_checkgen(L, 1)); }

static int gen_set_state(lua_State *L) {
  set_state(L, ltL_checkgen(L, 1), 2);
  lua_settop(L, 1);
  return 1;
}

static int gen_tostring(lua_State *L) {
  lt_generator *g = ltL_checkgen(L, 1);
  lua_pushfstring(L, "Generator(seed=%I)", (lua_Integer)g->seed);
  return 1;
}

/* The default generator as a (non-owning) Generator userdata, cached in the registry. */
static void push_default_gen(lua_State *L, lt_ctx *ctx) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, "lantern.default_generator") == LUA_TUSERDATA) return;
  lua_pop(L, 1);
  push_gen(L, ctx->gen, false);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "lantern.default_generator");
}

static int l_manual_seed(lua_State *L) {
  lt_generator_seed(LTL_CTX(L)->gen, check_seed(L, 1));
  push_default_gen(L, LTL_CTX(L));
  return 1;
}

static int l_seed(lua_State *L) {
  uint64_t s = fresh_seed(L);
  lt_generator_seed(LTL_CTX(L)->gen, s);
  lua_pushinteger(L, (lua_Integer)s);
  return 1;
}

static int l_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)LTL_CTX(L)->gen->seed);
  return 1;
}

static int l_get_rng_state(lua_State *L) { return push_state(L, LTL_CTX(L)->gen); }

static int l_set_rng_state(lua_State *L) {
  set_state(L, LTL_CTX(L)->gen, 1);
  return 0;
}

static void open_generator(lua_State *L) {
  /* stack: module, methods */
  static const luaL_Reg gen_methods[] = {
      {"manual_seed", gen_manual_seed}, {"seed", gen_seed},
      {"initial_seed", gen_initial_seed}, {"get_state", gen_get_state},
      {"set_state", gen_set_state},     {NULL, NULL},
  };
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  int ctxi = lua_gettop(L);
  if (luaL_newmetatable(L, LTL_GEN_MT)) {
    lua_pushcfunction(L, gen_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushvalue(L, ctxi);
    lua_pushcclosure(L, gen_tostring, 1);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "Generator");
    lua_setfield(L, -2, "__name");
    lua_newtable(L);
    for (const luaL_Reg *r = gen_methods; r->name; r++) {
      lua_pushvalue(L, ctxi);
      lua_pushcclosure(L, r->func, 1);
      lua_setfield(L, -2, r->name);
    }
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);   /* metatable */
  push_default_gen(L, lua_touserdata(L, ctxi));
  lua_setfield(L, -4, "default_generator");
  lua_pop(L, 1);   /* ctx */
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
      {"rand", l_rand, LTL_FN},
      {"randn", l_randn, LTL_FN},
      {"randint", l_randint, LTL_FN},
      {"randperm", l_randperm, LTL_FN},
      {"normal", l_normal, LTL_FN},
      {"bernoulli", l_bernoulli, LTL_FN | LTL_METHOD},
      {"uniform_", t_uniform_, LTL_METHOD},
      {"normal_", t_normal_, LTL_METHOD},
      {"bernoulli_", t_bernoulli_, LTL_METHOD},
      {"random_", t_random_, LTL_METHOD},
      {"Generator", l_generator_new, LTL_FN},
      {"manual_seed", l_manual_seed, LTL_FN},
      {"seed", l_seed, LTL_FN},
      {"initial_seed", l_initial_seed, LTL_FN},
      {"get_rng_state", l_get_rng_state, LTL_FN},
      {"set_rng_state", l_set_rng_state, LTL_FN},
      {NULL, NULL, 0},
  };
  ltL_register(L, regs);
  open_generator(L);
}
