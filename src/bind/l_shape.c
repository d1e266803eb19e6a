/*
** l_shape.c -- Lua binding of views, shape ops and indexing ops.
**
** Positions are Lua's: dims, narrow's start and select's index count from 1 and negative
** values count from the end (-1 is the last). Index tensors given to index_select, gather,
** scatter, index_add and one_hot hold 1-based positions; the core takes them as they are with
** base 1, so no conversion pass is needed and error messages quote the user's own values.
*/
#include <stdlib.h>
#include <string.h>

#include "lbind.h"

/* Lua dim (1-based, negative from the end) to the core's form (0-based, negative kept so the
** core wraps it and names the op in its message). */
static int dim_arg(lua_State *L, int idx, const char *op) {
  lua_Integer d = luaL_checkinteger(L, idx);
  if (d == 0)
    luaL_error(L, "%s: dimension 0 is not valid (dimensions count from 1; -1 is the last)", op);
  if (d > LT_MAX_DIMS + 1 || d < -(LT_MAX_DIMS + 1))
    luaL_error(L, "%s: dimension %d out of range", op, (int)d);
  return (int)(d > 0 ? d - 1 : d);
}

static int optdim_arg(lua_State *L, int idx, const char *op, int def) {
  if (lua_isnoneornil(L, idx)) return def;
  return dim_arg(L, idx, op);
}

/* Lua position (1-based, negative from the end) to the core's 0-based/negative form. */
static int64_t pos_arg(lua_State *L, int idx, const char *op, const char *what) {
  lua_Integer i = luaL_checkinteger(L, idx);
  if (i == 0)
    luaL_error(L, "%s: %s 0 is not valid (positions count from 1; -1 is the last)", op, what);
  return i > 0 ? i - 1 : i;
}

/* Sizes from idx on (varargs or one table); returns the count. */
static int sizes_arg(lua_State *L, int idx, int64_t *size) {
  int next;
  return ltL_checksizes(L, idx, size, &next);
}

/* The value of a one-element tensor as a double (read on the host). */
static double item(lua_State *L, lt_tensor *t) {
  lt_tensor *h = ltL_host(L, t);
  const void *p = lt_data(h);
  double v;
  switch (h->dtype) {
    case LT_FLOAT32: v = *(const float *)p; break;
    case LT_FLOAT64: v = *(const double *)p; break;
    case LT_INT64: v = (double)*(const int64_t *)p; break;
    default: v = *(const bool *)p; break;
  }
  lt_release(h);
  return v;
}

/* A scalar fill value: number, boolean, or a one-element tensor without grad. */
static double value_arg(lua_State *L, int idx, const char *op) {
  if (lua_isboolean(L, idx)) return lua_toboolean(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_tonumber(L, idx);
  lt_tensor *v = ltL_test(L, idx);
  if (v && lt_numel(v) == 1) {
    if (v->requires_grad && lt_is_grad_enabled(LTL_CTX(L)))
      luaL_error(L, "%s: a value tensor that requires grad is not supported here", op);
    return item(L, v);
  }
  return luaL_error(L, "%s: bad argument #%d (number, boolean or one-element tensor expected, "
                    "got %s)", op, idx, luaL_typename(L, idx));
}

/* Borrowed tensors of the list at idx, in a scratch userdata pushed on the stack. */
static lt_tensor **list_arg(lua_State *L, int idx, const char *op, int *n) {
  if (!lua_istable(L, idx) || ltL_test(L, idx))
    luaL_error(L, "%s: expected a list of tensors, got %s", op, luaL_typename(L, idx));
  lua_Integer len = luaL_len(L, idx);
  if (len > 1000000) luaL_error(L, "%s: too many tensors (%d)", op, (int)len);
  lt_tensor **ts = lua_newuserdatauv(L, (size_t)(len ? len : 1) * sizeof *ts, 0);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, idx, i);
    ts[i - 1] = ltL_test(L, -1);
    if (!ts[i - 1])
      luaL_error(L, "%s: element %d of the list is not a tensor (got %s)", op, (int)i,
                 luaL_typename(L, -1));
    lua_pop(L, 1);   /* the list keeps it alive */
  }
  *n = (int)len;
  return ts;
}

#define PUSH_RESULT(call)          \
  do {                             \
    lt_ctx *ctx_ = LTL_CTX(L);     \
    lt_tensor *r_ = NULL;          \
    LTL_TRY(L, ctx_, (call));      \
    ltL_push(L, r_);               \
    return 1;                      \
  } while (0)
#define OUT (&r_)
#define CTX ctx_

/* ------------------------------------------------------------ views */

static int l_view(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t sz[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, sz);
  PUSH_RESULT(lt_view(CTX, OUT, t, n, sz));
}

static int l_view_as(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_tensor *t = ltL_check(L, 1), *o = ltL_check(L, 2);
  PUSH_RESULT(lt_view(CTX, OUT, t, o->ndim, o->size));
}

static int l_reshape(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t sz[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, sz);
  PUSH_RESULT(lt_reshape(CTX, OUT, t, n, sz));
}

static int l_reshape_as(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_tensor *t = ltL_check(L, 1), *o = ltL_check(L, 2);
  PUSH_RESULT(lt_reshape(CTX, OUT, t, o->ndim, o->size));
}

static int l_flatten(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int s = optdim_arg(L, 2, "flatten", 0), e = optdim_arg(L, 3, "flatten", -1);
  PUSH_RESULT(lt_flatten(CTX, OUT, t, s, e));
}

static int l_unflatten(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "unflatten");
  int64_t sz[LT_MAX_DIMS];
  int n = sizes_arg(L, 3, sz);
  PUSH_RESULT(lt_unflatten(CTX, OUT, t, d, n, sz));
}

static int l_squeeze(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = optdim_arg(L, 2, "squeeze", LT_SQUEEZE_ALL);
  PUSH_RESULT(lt_squeeze(CTX, OUT, t, d));
}

static int l_unsqueeze(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "unsqueeze");
  PUSH_RESULT(lt_unsqueeze(CTX, OUT, t, d));
}

static int l_transpose(lua_State *L) {
  LTL_NOMORE(L, 3);
  lt_tensor *t = ltL_check(L, 1);
  int a = dim_arg(L, 2, "transpose"), b = dim_arg(L, 3, "transpose");
  PUSH_RESULT(lt_transpose(CTX, OUT, t, a, b));
}

static int l_t(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_tensor *t = ltL_check(L, 1);
  if (t->ndim > 2)
    return luaL_error(L, "t: expects a tensor with <= 2 dimensions, but self is %dD (use "
                      "transpose or permute)", t->ndim);
  PUSH_RESULT(lt_transpose(CTX, OUT, t, 0, t->ndim == 2 ? 1 : 0));
}

static int l_permute(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t p64[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, p64);
  if (n != t->ndim)
    return luaL_error(L, "permute: number of dims don't match (got %d dims for a %d-d tensor)",
                      n, t->ndim);
  int p[LT_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    if (p64[i] == 0 || p64[i] > n || p64[i] < -n)
      return luaL_error(L, "permute: dimension %d out of range (expected 1..%d or -%d..-1)",
                        (int)p64[i], n, n);
    p[i] = (int)(p64[i] > 0 ? p64[i] - 1 : p64[i]);
  }
  PUSH_RESULT(lt_permute(CTX, OUT, t, p));
}

static int l_expand(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t sz[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, sz);
  PUSH_RESULT(lt_expand(CTX, OUT, t, n, sz));
}

/* broadcast_to(sizes): expand, its messages under this name */
static int l_broadcast_to(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *r;
  int64_t sz[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, sz);
  if (lt_expand(ctx, &r, t, n, sz)) {
    const char *m = strncmp(ctx->err, "expand: ", 8) == 0 ? ctx->err + 8 : ctx->err;
    lua_pushfstring(L, "broadcast_to: %s", m);
    return lua_error(L);
  }
  ltL_push(L, r);
  return 1;
}

static int l_expand_as(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_tensor *t = ltL_check(L, 1), *o = ltL_check(L, 2);
  PUSH_RESULT(lt_expand(CTX, OUT, t, o->ndim, o->size));
}

static int l_narrow(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "narrow");
  int64_t start = pos_arg(L, 3, "narrow", "start");
  int64_t len = luaL_checkinteger(L, 4);
  PUSH_RESULT(lt_narrow(CTX, OUT, t, d, start, len));
}

static int l_select(lua_State *L) {
  LTL_NOMORE(L, 3);
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "select");
  int64_t i = pos_arg(L, 3, "select", "index");
  PUSH_RESULT(lt_select(CTX, OUT, t, d, i));
}

/* ------------------------------------------------------------ cat / stack / split */

static int l_cat(lua_State *L) {
  int n;
  int d = optdim_arg(L, 2, "cat", 0);
  lt_tensor **ts = list_arg(L, 1, "cat", &n);
  PUSH_RESULT(lt_cat(CTX, OUT, n, ts, d));
}

static int l_stack(lua_State *L) {
  int n;
  int d = optdim_arg(L, 2, "stack", 0);
  lt_tensor **ts = list_arg(L, 1, "stack", &n);
  PUSH_RESULT(lt_stack(CTX, OUT, n, ts, d));
}

/* Integers at idx, one or a list, into v (at most LT_MAX_DIMS); returns the count. */
static int ints_arg(lua_State *L, int idx, const char *op, const char *what, int64_t *v) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    int isint;
    v[0] = lua_tointegerx(L, idx, &isint);
    if (!isint) luaL_error(L, "%s: %s must be integers, got a fractional number", op, what);
    return 1;
  }
  if (!lua_istable(L, idx) || ltL_test(L, idx))
    luaL_error(L, "%s: %s must be an integer or a list of integers, got %s", op, what,
               luaL_typename(L, idx));
  lua_Integer n = luaL_len(L, idx);
  if (n > LT_MAX_DIMS) luaL_error(L, "%s: %d %s given, at most %d", op, (int)n, what, LT_MAX_DIMS);
  for (int i = 0; i < (int)n; i++) {
    int isint;
    lua_geti(L, idx, i + 1);
    v[i] = lua_tointegerx(L, -1, &isint);
    if (!isint) luaL_error(L, "%s: %s must be integers, got %s", op, what, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  return (int)n;
}

/* A Lua dim (1-based, negative from the end) of a rank-nd tensor as 0-based. */
static int wrap_dim(lua_State *L, int64_t d, int nd, const char *op) {
  int n = nd > 0 ? nd : 1;
  if (d == 0 || d > n || d < -n)
    luaL_error(L, "%s: dimension %d out of range (expected 1..%d or -%d..-1)", op, (int)d, n, n);
  return (int)(d > 0 ? d - 1 : d + n);
}

/* roll(shifts, dims): the elements moved along each dim by its shift, those that fall off the
** end coming back at the start; without dims, over the flattened tensor. Made of narrow and
** cat, so it has their gradient. */
static int l_roll(lua_State *L) {
  LTL_NOMORE(L, 3);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *x;
  int64_t sh[LT_MAX_DIMS], dm[LT_MAX_DIMS];
  int ns = ints_arg(L, 2, "roll", "shifts", sh), nd = 0;
  if (!lua_isnoneornil(L, 3)) nd = ints_arg(L, 3, "roll", "dims", dm);
  if (nd == 0 && ns != 1)
    luaL_error(L, "roll: without dims, shifts must be one number, got %d", ns);
  if (nd > 0 && ns != nd)
    luaL_error(L, "roll: shifts and dimensions must align. shifts: %d, dims: %d", ns, nd);
  if (nd == 0) {   /* the flattened tensor, shaped back */
    int64_t all = -1;
    LTL_TRY(L, ctx, lt_reshape(ctx, &x, t, 1, &all));
    ltL_push(L, x);
  } else {
    x = lt_retain(t);
    ltL_push(L, x);
  }
  bool moved = false;
  for (int i = 0; i < (nd ? nd : 1); i++) {
    int d = nd ? wrap_dim(L, dm[i], x->ndim, "roll") : 0;
    int64_t n = x->ndim ? x->size[d] : 1;
    if (x->ndim == 0 || n == 0) continue;
    int64_t s = ((sh[i] % n) + n) % n;
    if (s == 0) continue;
    moved = true;
    lt_tensor *parts[2], *y;
    LTL_TRY(L, ctx, lt_narrow(ctx, &parts[0], x, d, n - s, s));
    ltL_push(L, parts[0]);
    LTL_TRY(L, ctx, lt_narrow(ctx, &parts[1], x, d, 0, n - s));
    ltL_push(L, parts[1]);
    LTL_TRY(L, ctx, lt_cat(ctx, &y, 2, parts, d));
    ltL_push(L, y);
    x = y;
  }
  lt_tensor *r;
  if (!moved) {   /* a fresh copy all the same, as PyTorch returns */
    LTL_TRY(L, ctx, lt_clone(ctx, &r, t));
    ltL_push(L, r);
  } else if (nd == 0) {
    LTL_TRY(L, ctx, lt_reshape(ctx, &r, x, t->ndim, t->size));
    ltL_push(L, r);
  }
  return 1;
}

/* movedim(source, destination) (also moveaxis): the dims at source moved to destination, the
** others keeping their order in the places left; a permute. */
static int l_movedim(lua_State *L) {
  LTL_NOMORE(L, 3);
  lt_tensor *t = ltL_check(L, 1);
  int64_t src[LT_MAX_DIMS], dst[LT_MAX_DIMS];
  int n = ints_arg(L, 2, "movedim", "source", src);
  int m = ints_arg(L, 3, "movedim", "destination", dst);
  if (n != m)
    luaL_error(L, "movedim: Invalid source or destination dims: source (%d dims) should "
               "contain the same number of dims as destination (%d dims)", n, m);
  int nd = t->ndim, perm[LT_MAX_DIMS];
  bool used_src[LT_MAX_DIMS] = {false}, used_dst[LT_MAX_DIMS] = {false};
  for (int d = 0; d < nd; d++) perm[d] = -1;
  for (int i = 0; i < n; i++) {
    int a = wrap_dim(L, src[i], nd, "movedim"), b = wrap_dim(L, dst[i], nd, "movedim");
    if (used_src[a]) luaL_error(L, "movedim: repeated dim in source (%d)", (int)src[i]);
    if (used_dst[b]) luaL_error(L, "movedim: repeated dim in destination (%d)", (int)dst[i]);
    used_src[a] = used_dst[b] = true;
    perm[b] = a;
  }
  for (int d = 0, next = 0; d < nd; d++) {   /* the rest, in order, into the free places */
    if (perm[d] >= 0) continue;
    while (used_src[next]) next++;
    perm[d] = next++;
  }
  PUSH_RESULT(lt_permute(CTX, OUT, t, perm));
}

/* meshgrid(t1, t2, ... | {t1, t2, ...}, {indexing = "ij" | "xy"}): N 1-d (or 0-d) tensors
** as N views of their N-d grid, expanded; "xy" swaps the first two dims (Cartesian). */
static int l_meshgrid(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  static const char *const known[] = {"indexing", NULL};
  int top = lua_gettop(L), opts = 0;
  if (top >= 1 && lua_istable(L, top) && !ltL_test(L, top)) {   /* a list or the options */
    bool list = lua_geti(L, top, 1) != LUA_TNIL;
    lua_pop(L, 1);
    if (!list) opts = top;
  }
  bool xy = false;
  if (opts) {
    ltL_checkopts(L, opts, "meshgrid", known);
    lua_getfield(L, opts, "indexing");
    const char *ix = lua_tostring(L, -1);
    if (ix && strcmp(ix, "xy") == 0)
      xy = true;
    else if (ix && strcmp(ix, "ij") != 0)
      luaL_error(L, "meshgrid: indexing must be \"ij\" or \"xy\", got %s", ix);
    else if (!ix && !lua_isnil(L, -1))
      luaL_error(L, "meshgrid: indexing must be a string, got %s", luaL_typename(L, -1));
    lua_pop(L, 1);
    top = opts - 1;
  }
  lt_tensor *in[LT_MAX_DIMS];
  int n = 0;
  if (top == 1 && lua_istable(L, 1) && !ltL_test(L, 1)) {
    lt_tensor **ts = list_arg(L, 1, "meshgrid", &n);
    if (n > LT_MAX_DIMS) luaL_error(L, "meshgrid: at most %d tensors, got %d", LT_MAX_DIMS, n);
    for (int i = 0; i < n; i++) in[i] = ts[i];
  } else {
    if (top > LT_MAX_DIMS) luaL_error(L, "meshgrid: at most %d tensors, got %d", LT_MAX_DIMS, top);
    for (int i = 1; i <= top; i++) in[n++] = ltL_check(L, i);
  }
  if (n == 0) luaL_error(L, "meshgrid: expects a non-empty list of tensors");
  int64_t size[LT_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    if (in[i]->ndim > 1)
      luaL_error(L, "meshgrid: expects 0-d or 1-d tensors, got a %d-d tensor at position %d",
                 in[i]->ndim, i + 1);
    if (in[i]->dtype != in[0]->dtype)
      luaL_error(L, "meshgrid: expects all tensors to have the same dtype");
    size[i] = in[i]->ndim ? in[i]->size[0] : 1;
  }
  int sw = xy && n >= 2;   /* "xy": the first two inputs' dims swapped */
  if (sw) {
    int64_t s0 = size[0];
    size[0] = size[1];
    size[1] = s0;
  }
  for (int i = 0; i < n; i++) {
    int at = sw && i < 2 ? 1 - i : i;   /* the dim input i runs along */
    int64_t shape[LT_MAX_DIMS];
    for (int d = 0; d < n; d++) shape[d] = d == at ? size[d] : 1;
    lt_tensor *v, *e;
    LTL_TRY(L, ctx, lt_reshape(ctx, &v, in[i], n, shape));
    ltL_push(L, v);
    LTL_TRY(L, ctx, lt_expand(ctx, &e, v, n, size));
    lua_pop(L, 1);
    ltL_push(L, e);
  }
  return n;
}

/* Pushes a table of narrow views of t along d with the given lengths. */
static int push_pieces(lua_State *L, lt_tensor *t, int d, int n, const int64_t *len) {
  lt_ctx *ctx = LTL_CTX(L);
  lua_createtable(L, n, 0);
  int64_t start = 0;
  for (int i = 0; i < n; i++) {
    lt_tensor *r;
    LTL_TRY(L, ctx, lt_narrow(ctx, &r, t, d, start, len[i]));
    ltL_push(L, r);
    lua_rawseti(L, -2, i + 1);
    start += len[i];
  }
  return 1;
}

/* Wrapped 0-based dim of t, raising with op's name. */
static int wrap(lua_State *L, int d, int ndim, const char *op) {
  lt_ctx *ctx = LTL_CTX(L);
  int w;
  if (ndim == 0) luaL_error(L, "%s: cannot be applied to a 0-dim tensor", op);
  LTL_TRY(L, ctx, ltB_wrap_dim(ctx, op, d, ndim, &w));
  return w;
}

/* Lengths of equal pieces of `each` (last one shorter) covering size. */
static int64_t *even_pieces(lua_State *L, int64_t size, int64_t each, int *n) {
  int64_t cnt = each > 0 ? (size + each - 1) / each : 1;
  if (size == 0) cnt = 1;
  if (cnt > 10000000) luaL_error(L, "split: too many pieces");
  int64_t *len = lua_newuserdatauv(L, (size_t)cnt * sizeof *len, 0);
  for (int64_t i = 0; i < cnt; i++) len[i] = size - i * each < each ? size - i * each : each;
  if (size == 0) len[0] = 0;
  *n = (int)cnt;
  return len;
}

static int l_split(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = wrap(L, optdim_arg(L, 3, "split", 0), t->ndim, "split");
  int64_t size = t->size[d];
  int n;
  int64_t *len;
  if (lua_istable(L, 2)) {
    n = (int)luaL_len(L, 2);
    len = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *len, 0);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
      lua_geti(L, 2, i + 1);
      int isint;
      len[i] = lua_tointegerx(L, -1, &isint);
      lua_pop(L, 1);
      if (!isint || len[i] < 0)
        return luaL_error(L, "split: split sizes must be non-negative integers (entry %d)",
                          i + 1);
      sum += len[i];
    }
    if (sum != size)
      return luaL_error(L, "split: split sizes must sum exactly to %I (the size of dimension "
                        "%d), but they sum to %I", (lua_Integer)size, d + 1, (lua_Integer)sum);
  } else {
    int64_t each = luaL_checkinteger(L, 2);
    if (each < 0 || (each == 0 && size != 0))
      return luaL_error(L, "split: split_size must be positive (got %I for dimension %d of "
                        "size %I)", (lua_Integer)each, d + 1, (lua_Integer)size);
    len = even_pieces(L, size, each, &n);
  }
  return push_pieces(L, t, d, n, len);
}

static int l_chunk(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  lua_Integer chunks = luaL_checkinteger(L, 2);
  int d = wrap(L, optdim_arg(L, 3, "chunk", 0), t->ndim, "chunk");
  if (chunks <= 0)
    return luaL_error(L, "chunk: number of chunks must be greater than 0 (got %d)",
                      (int)chunks);
  int64_t size = t->size[d];
  int n;
  int64_t *len;
  if (size == 0) {
    /* PyTorch gives `chunks` empty pieces for an empty dimension */
    n = (int)(chunks < 10000000 ? chunks : 10000000);
    len = lua_newuserdatauv(L, (size_t)n * sizeof *len, 0);
    for (int i = 0; i < n; i++) len[i] = 0;
  } else {
    len = even_pieces(L, size, size / chunks + (size % chunks != 0), &n);
  }
  return push_pieces(L, t, d, n, len);
}

static int l_unbind(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = wrap(L, optdim_arg(L, 2, "unbind", 0), t->ndim, "unbind");
  lt_ctx *ctx = LTL_CTX(L);
  int64_t n = t->size[d];
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    lt_tensor *r;
    LTL_TRY(L, ctx, lt_select(ctx, &r, t, d, i));
    ltL_push(L, r);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ------------------------------------------------------------ copies */

static int l_repeat(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t rep[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, rep);
  PUSH_RESULT(lt_repeat(CTX, OUT, t, n, rep));
}

/* tile: repeat with missing leading repeats taken as 1 */
static int l_tile(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t given[LT_MAX_DIMS], rep[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, given), m = n < t->ndim ? t->ndim : n;
  for (int i = 0; i < m; i++) rep[i] = i < m - n ? 1 : given[i - (m - n)];
  PUSH_RESULT(lt_repeat(CTX, OUT, t, m, rep));
}

static int l_flip(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t d64[LT_MAX_DIMS];
  int n = sizes_arg(L, 2, d64), ds[LT_MAX_DIMS];
  for (int i = 0; i < n; i++) {
    if (d64[i] == 0 || d64[i] > LT_MAX_DIMS || d64[i] < -LT_MAX_DIMS)
      return luaL_error(L, "flip: dimension %d out of range", (int)d64[i]);
    ds[i] = (int)(d64[i] > 0 ? d64[i] - 1 : d64[i]);
  }
  PUSH_RESULT(lt_flip(CTX, OUT, t, n, ds));
}

static int l_tril(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t k = luaL_optinteger(L, 2, 0);
  PUSH_RESULT(lt_tril(CTX, OUT, t, k));
}

static int l_triu(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t k = luaL_optinteger(L, 2, 0);
  PUSH_RESULT(lt_triu(CTX, OUT, t, k));
}

/* ------------------------------------------------------------ indexing */

static int l_index_select(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "index_select");
  lt_tensor *idx = ltL_check(L, 3);
  PUSH_RESULT(lt_index_select(CTX, OUT, t, d, idx, 1));
}

static int l_index_add(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "index_add");
  lt_tensor *idx = ltL_check(L, 3), *src = ltL_check(L, 4);
  PUSH_RESULT(lt_index_add(CTX, OUT, t, d, idx, src, 1));
}

static int l_index_add_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "index_add_");
  lt_tensor *idx = ltL_check(L, 3), *src = ltL_check(L, 4);
  LTL_RETURN_SELF(L, ctx, lt_index_add_(ctx, t, d, idx, src, 1));
}

static int l_gather(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "gather");
  lt_tensor *idx = ltL_check(L, 3);
  PUSH_RESULT(lt_gather(CTX, OUT, t, d, idx, 1));
}

static int l_scatter(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "scatter");
  lt_tensor *idx = ltL_check(L, 3), *src = ltL_test(L, 4);
  if (src) PUSH_RESULT(lt_scatter(CTX, OUT, t, d, idx, src, 1));
  double v = value_arg(L, 4, "scatter");
  PUSH_RESULT(lt_scatter_value(CTX, OUT, t, d, idx, v, 1));
}

static int l_scatter_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "scatter_");
  lt_tensor *idx = ltL_check(L, 3), *src = ltL_test(L, 4);
  if (src) {
    LTL_TRY(L, ctx, lt_scatter_(ctx, t, d, idx, src, 1));
  } else {
    double v = value_arg(L, 4, "scatter_");
    LTL_TRY(L, ctx, lt_scatter_value_(ctx, t, d, idx, v, 1));
  }
  lua_settop(L, 1);
  return 1;
}

static int l_scatter_add(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "scatter_add");
  lt_tensor *idx = ltL_check(L, 3), *src = ltL_check(L, 4);
  PUSH_RESULT(lt_scatter_add(CTX, OUT, t, d, idx, src, 1));
}

static int l_scatter_add_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  int d = dim_arg(L, 2, "scatter_add_");
  lt_tensor *idx = ltL_check(L, 3), *src = ltL_check(L, 4);
  LTL_RETURN_SELF(L, ctx, lt_scatter_add_(ctx, t, d, idx, src, 1));
}

static int l_masked_fill(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1), *mask = ltL_check(L, 2);
  lt_tensor *vt = ltL_test(L, 3);
  if (vt && (vt->requires_grad && lt_is_grad_enabled(LTL_CTX(L)))) {
    /* a differentiable value: where(mask, value, t) in t's dtype carries both gradients */
    char a[256];
    if (vt->ndim != 0)
      return luaL_error(L, "masked_fill: only supports a 0-dimension value tensor, but got "
                        "tensor with %d dimension(s) (shape %s)", vt->ndim, LT_SHAPE(vt, a));
    lt_ctx *ctx = LTL_CTX(L);
    if (mask->dtype != LT_BOOL)
      return luaL_error(L, "masked_fill: mask must be a bool tensor (got %s)",
                        lt_dtype_name(mask->dtype));
    lt_tensor *v, *r;
    LTL_TRY(L, ctx, lt_to_dtype(ctx, &v, vt, t->dtype));
    int rc = lt_where(ctx, &r, mask, v, t);
    lt_release(v);
    if (rc) return ltL_raise(L, ctx);
    ltL_push(L, r);
    return 1;
  }
  double v = value_arg(L, 3, "masked_fill");
  PUSH_RESULT(lt_masked_fill(CTX, OUT, t, mask, v));
}

static int l_masked_fill_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *mask = ltL_check(L, 2);
  double v = value_arg(L, 3, "masked_fill_");
  LTL_RETURN_SELF(L, ctx, lt_masked_fill_(ctx, t, mask, v));
}

static int l_masked_select(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1), *mask = ltL_check(L, 2);
  PUSH_RESULT(lt_masked_select(CTX, OUT, t, mask));
}

/* nonzero({as_tuple=}) and argwhere: the 1-based positions of the non-zero elements as a
** (count, ndim) int64 tensor, or with as_tuple one (count) tensor per dim, returned in order
** (a 0-d input gives one, of ones). */
static int l_nonzero(lua_State *L) {
  static const char *const known[] = {"as_tuple", NULL};
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *r;
  bool as_tuple = false;
  if (!lua_isnoneornil(L, 2)) {
    if (!lua_istable(L, 2) || ltL_test(L, 2))
      luaL_error(L, "nonzero: bad argument #2 (options table expected, got %s)",
                 luaL_typename(L, 2));
    ltL_checkopts(L, 2, "nonzero", known);
    as_tuple = ltL_optbool_field(L, 2, "as_tuple", false);
  }
  LTL_TRY(L, ctx, lt_nonzero(ctx, &r, t, 1));
  ltL_push(L, r);
  if (!as_tuple) return 1;
  int nd = t->ndim ? t->ndim : 1;
  for (int d = 0; d < nd; d++) {
    lt_tensor *c;
    if (t->ndim) {
      LTL_TRY(L, ctx, lt_select(ctx, &c, r, 1, d));
      ltL_push(L, c);
    } else {   /* PyTorch's one tensor of zeros: a position per non-zero element (0 or 1) */
      LTL_TRY(L, ctx, lt_empty_on(ctx, &c, LT_INT64, 1, r->size, lt_device(r),
                                  lt_device_index(r)));
      ltL_push(L, c);
      LTL_TRY(L, ctx, lt_fill_(ctx, c, 1));
    }
  }
  return nd;
}

static int l_argwhere(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_tensor *t = ltL_check(L, 1);
  PUSH_RESULT(lt_nonzero(CTX, OUT, t, 1));
}

static int l_one_hot(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  int64_t n = luaL_optinteger(L, 2, -1);
  PUSH_RESULT(lt_one_hot(CTX, OUT, t, n, 1));
}

/* ------------------------------------------------------------ registration */

void ltL_open_shape(lua_State *L) {
  static const ltL_Reg regs[] = {
      {"view", l_view, LTL_METHOD},
      {"view_as", l_view_as, LTL_METHOD},
      {"reshape", l_reshape, LTL_FN | LTL_METHOD},
      {"reshape_as", l_reshape_as, LTL_METHOD},
      {"flatten", l_flatten, LTL_FN | LTL_METHOD},
      {"unflatten", l_unflatten, LTL_FN | LTL_METHOD},
      {"squeeze", l_squeeze, LTL_FN | LTL_METHOD},
      {"unsqueeze", l_unsqueeze, LTL_FN | LTL_METHOD},
      {"transpose", l_transpose, LTL_FN | LTL_METHOD},
      {"swapaxes", l_transpose, LTL_FN | LTL_METHOD},
      {"swapdims", l_transpose, LTL_FN | LTL_METHOD},
      {"t", l_t, LTL_FN | LTL_METHOD},
      {"permute", l_permute, LTL_FN | LTL_METHOD},
      {"expand", l_expand, LTL_METHOD},
      {"broadcast_to", l_broadcast_to, LTL_FN | LTL_METHOD},
      {"roll", l_roll, LTL_FN | LTL_METHOD},
      {"movedim", l_movedim, LTL_FN | LTL_METHOD},
      {"moveaxis", l_movedim, LTL_FN | LTL_METHOD},
      {"meshgrid", l_meshgrid, LTL_FN},
      {"expand_as", l_expand_as, LTL_METHOD},
      {"narrow", l_narrow, LTL_FN | LTL_METHOD},
      {"select", l_select, LTL_FN | LTL_METHOD},
      {"cat", l_cat, LTL_FN},
      {"concat", l_cat, LTL_FN},
      {"stack", l_stack, LTL_FN},
      {"split", l_split, LTL_FN | LTL_METHOD},
      {"chunk", l_chunk, LTL_FN | LTL_METHOD},
      {"unbind", l_unbind, LTL_FN | LTL_METHOD},
      {"repeat", l_repeat, LTL_METHOD},          /* a Lua keyword: x["repeat"](x, ...) */
      {"repeat_tensor", l_repeat, LTL_METHOD},
      {"tile", l_tile, LTL_FN | LTL_METHOD},
      {"flip", l_flip, LTL_FN | LTL_METHOD},
      {"tril", l_tril, LTL_FN | LTL_METHOD},
      {"triu", l_triu, LTL_FN | LTL_METHOD},
      {"index_select", l_index_select, LTL_FN | LTL_METHOD},
      {"index_add", l_index_add, LTL_FN | LTL_METHOD},
      {"index_add_", l_index_add_, LTL_METHOD},
      {"gather", l_gather, LTL_FN | LTL_METHOD},
      {"scatter", l_scatter, LTL_FN | LTL_METHOD},
      {"scatter_", l_scatter_, LTL_METHOD},
      {"scatter_add", l_scatter_add, LTL_FN | LTL_METHOD},
      {"scatter_add_", l_scatter_add_, LTL_METHOD},
      {"masked_fill", l_masked_fill, LTL_FN | LTL_METHOD},
      {"masked_fill_", l_masked_fill_, LTL_METHOD},
      {"masked_select", l_masked_select, LTL_FN | LTL_METHOD},
      {"nonzero", l_nonzero, LTL_FN | LTL_METHOD},
      {"argwhere", l_argwhere, LTL_FN | LTL_METHOD},
      {"one_hot", l_one_hot, LTL_FN | LTL_METHOD},
      {NULL, NULL, 0},
  };
  ltL_register(L, regs);
}
