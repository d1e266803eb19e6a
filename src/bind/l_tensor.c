/*
** l_tensor.c -- the Tensor userdata: lifetime, properties, x[i] indexing, conversions.
*/
#include <lualib.h>
#include <time.h>

#include "lbind.h"
#include "../cpu_isa.h"

/* __gc (upvalue: the context). Only ever installed on the Tensor metatable, so the type needs
** no check (a name check here would hash a string for every collected tensor). During a
** slice's collector step the release waits in the state's dead list (lmem.c's ltL_gc_slice).
** A tensor made before the last slice was alive then: the tensor bytes made since, up to the
** bytes in use, are a lower bound of its life (to the KiB), which lmem.c's span keeps the
** longest of. A box keeps the clock in KiB modulo 2^32, so lives are read modulo 4 TiB of
** allocation, and one that reads as 2 TiB or more is taken for a birth after the slice and not
** counted: a life that long says nothing of the temporaries (it is clamped to the bytes in use
** where it is counted). */
static int t_gc(lua_State *L) {
  ltL_box *box = lua_touserdata(L, 1);
  lt_ctx *ctx = LTL_CTX(L);
  ltL_state *st = ltL_state_in(ctx);
  uint32_t kib = st ? LTL_BORN(st->last_clock) - box->born : 0;
  if (box->t && kib != 0 && kib < UINT32_C(1) << 31) {
    uint64_t life = (uint64_t)kib << 10, in_use = ltB_cache_in_use();
    if (life > in_use) life = in_use;
    if (life > st->span) st->span = life;
  }
  if (box->t && st && st->deferring && st->ndead < LTL_DEAD_MAX)
    st->dead[st->ndead++] = box->t;
  else
    lt_release(box->t);
  box->t = NULL;
  return 0;
}

/* Pushes element value at p of dtype dt as a Lua value. */
static void push_elem(lua_State *L, const char *p, lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT32: lua_pushnumber(L, *(const float *)p); break;
    case LT_FLOAT64: lua_pushnumber(L, *(const double *)p); break;
    case LT_INT64: lua_pushinteger(L, *(const int64_t *)p); break;
    case LT_BOOL: lua_pushboolean(L, *(const bool *)p); break;
    default: lua_pushnil(L);
  }
}

static int t_item(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  if (lt_numel(t) != 1) {
    char buf[256];
    return luaL_error(L, "item: a Tensor with %d elements cannot be converted to a number "
                      "(shape %s)", (int)lt_numel(t), LT_SHAPE(t, buf));
  }
  lt_tensor *h = ltL_host(L, t);
  push_elem(L, lt_data(h), h->dtype);
  lt_release(h);
  return 1;
}

static void push_list(lua_State *L, const lt_tensor *t, int dim, const char *p) {
  size_t es = lt_dtype_size(t->dtype);
  if (dim == t->ndim) {
    push_elem(L, p, t->dtype);
    return;
  }
  luaL_checkstack(L, 4, "tolist: nesting too deep");
  lua_createtable(L, (int)t->size[dim], 0);
  for (int64_t i = 0; i < t->size[dim]; i++) {
    push_list(L, t, dim + 1, p + i * t->stride[dim] * (int64_t)es);
    lua_rawseti(L, -2, i + 1);
  }
}

static int t_tolist(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_tensor *h = ltL_host(L, ltL_check(L, 1));
  /* a raise inside push_list (stack overflow) would leak h: it is anchored on the stack first */
  ltL_push(L, h);
  push_list(L, h, 0, lt_data(h));
  lua_remove(L, -2);
  return 1;
}

/* A size list prints as PyTorch's torch.Size does, "{5, 2}" in Lua's braces; it stays a plain
** array (no __index, __len or __eq), so indexing, #, ipairs, table.unpack and deep comparison
** see the numbers alone. */
static int size_tostring(lua_State *L) {
  luaL_Buffer b;
  lua_Integer n = luaL_len(L, 1);
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '{');
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) luaL_addstring(&b, ", ");
    lua_geti(L, 1, i);
    luaL_tolstring(L, -1, NULL);
    luaL_addvalue(&b);
    lua_pop(L, 1);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return 1;
}

/* Pushes {v[0], ..., v[n-1]} with the shared size metatable (by registry integer key: a name
** lookup would hash a string on every x.shape). */
static void push_size_list(lua_State *L, int n, const int64_t *v) {
  ltL_state *st = (ltL_state *)(LTL_CTX(L) + 1);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, st->size_mt_ref);
  lua_setmetatable(L, -2);
}

static int t_size(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, t->size[ltL_checkdim(L, 2, t->ndim)]);
    return 1;
  }
  push_size_list(L, t->ndim, t->size);
  return 1;
}

static int t_stride(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushinteger(L, t->stride[ltL_checkdim(L, 2, t->ndim)]);
    return 1;
  }
  push_size_list(L, t->ndim, t->stride);
  return 1;
}

static int t_dim(lua_State *L) {
  LTL_NOMORE(L, 1);
  lua_pushinteger(L, ltL_check(L, 1)->ndim);
  return 1;
}

static int t_numel(lua_State *L) {
  LTL_NOMORE(L, 1);
  lua_pushinteger(L, lt_numel(ltL_check(L, 1)));
  return 1;
}

static int t_element_size(lua_State *L) {
  LTL_NOMORE(L, 1);
  lua_pushinteger(L, (lua_Integer)lt_dtype_size(ltL_check(L, 1)->dtype));
  return 1;
}

static int t_storage_offset(lua_State *L) {
  LTL_NOMORE(L, 1);
  lua_pushinteger(L, ltL_check(L, 1)->offset);
  return 1;
}

static int t_is_contiguous(lua_State *L) {
  LTL_NOMORE(L, 1);
  lua_pushboolean(L, lt_is_contiguous(ltL_check(L, 1)));
  return 1;
}

static int t_is_floating_point(lua_State *L) {
  LTL_NOMORE(L, 1);
  lua_pushboolean(L, lt_dtype_is_float(ltL_check(L, 1)->dtype));
  return 1;
}

static int t_contiguous(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *r;
  if (lt_is_contiguous(t)) {
    lua_settop(L, 1);
    return 1;
  }
  LTL_TRY(L, ctx, lt_contiguous(ctx, &r, t));
  ltL_push(L, r);
  return 1;
}

static int t_clone(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *r;
  LTL_TRY(L, ctx, lt_clone(ctx, &r, ltL_check(L, 1)));
  ltL_push(L, r);
  return 1;
}

static int t_detach(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *r;
  LTL_TRY(L, ctx, lt_detach(ctx, &r, ltL_check(L, 1)));
  ltL_push(L, r);
  return 1;
}

static int t_detach_(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_tensor *t = ltL_check(L, 1);
  ltG_drop_grad_fn(t);
  t->requires_grad = false;
  lua_settop(L, 1);
  return 1;
}

static int t_requires_grad_(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  if (!lua_isnoneornil(L, 2) && !lua_isboolean(L, 2))
    return luaL_error(L, "requires_grad_: bad argument #2 (boolean expected, got %s)",
                      luaL_typename(L, 2));
  bool on = lua_isnoneornil(L, 2) ? true : lua_toboolean(L, 2);
  LTL_RETURN_SELF(L, ctx, lt_set_requires_grad(ctx, t, on));
}

static int t_retain_grad(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  LTL_TRY(L, ctx, ltG_retain_grad(ctx, ltL_check(L, 1)));
  return 0;
}

static int t_fill_(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  double v = lua_isboolean(L, 2) ? lua_toboolean(L, 2) : luaL_checknumber(L, 2);
  LTL_RETURN_SELF(L, ctx, lt_fill_(ctx, t, v));
}

static int t_zero_(lua_State *L) {
  LTL_NOMORE(L, 1);
  lt_ctx *ctx = LTL_CTX(L);
  LTL_RETURN_SELF(L, ctx, lt_zero_(ctx, ltL_check(L, 1)));
}

static int t_copy_(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *owned;
  lt_tensor *src = ltL_checkoperand(L, 2, t, &owned);
  int rc = lt_copy_(ctx, t, src);
  lt_release(owned);
  if (rc) return ltL_raise(L, ctx);
  lua_settop(L, 1);
  return 1;
}

/* to(dtype) / to(device) / to(device, dtype) / to({dtype=, device=}) / to(other_tensor): the
** dtype converts on the tensor's device, then the values move (a tensor already there is
** returned as it is). */
static int t_to(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *r;
  lt_dtype dt = t->dtype;
  lt_devtype type = t->storage->device;
  int index = t->storage->device_index;
  lt_tensor *other = ltL_test(L, 2);
  if (other) {
    dt = other->dtype;
    type = other->storage->device;
    index = other->storage->device_index;
  } else if (lua_istable(L, 2)) {
    static const char *const known[] = {"dtype", "device", NULL};
    ltL_checkopts(L, 2, "to", known);
    dt = ltL_optdtype_field(L, 2, t->dtype);
    if (lua_getfield(L, 2, "device") != LUA_TNIL)
      ltL_checkdevice(L, lua_gettop(L), "to", &type, &index);
    lua_pop(L, 1);
  } else {
    for (int i = 2; i <= lua_gettop(L); i++) {
      if (lua_isnil(L, i)) continue;
      const char *s = luaL_checkstring(L, i);
      int d = lt_dtype_parse(s);
      if (d >= 0) {
        dt = (lt_dtype)d;
      } else if (lt_device_parse(ctx, "to", s, &type, &index)) {
        return luaL_error(L, "to: unknown dtype or device '%s' (devices: cpu, cuda; dtypes: "
                          "float32, float64, int64, bool)", s);
      }
    }
  }
  lua_settop(L, 1);
  if (dt != t->dtype) {
    LTL_TRY(L, ctx, lt_to_dtype(ctx, &r, t, dt));
    ltL_push(L, r);
    lua_replace(L, 1);
  }
  return ltL_move(L, 1, "to", type, index);
}

static int convert(lua_State *L, lt_dtype dt) {
  LTL_NOMORE(L, 1);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1), *r;
  if (t->dtype == dt) {
    lua_settop(L, 1);
    return 1;
  }
  LTL_TRY(L, ctx, lt_to_dtype(ctx, &r, t, dt));
  ltL_push(L, r);
  return 1;
}

static int t_float(lua_State *L) { return convert(L, LT_FLOAT32); }
static int t_double(lua_State *L) { return convert(L, LT_FLOAT64); }
static int t_long(lua_State *L) { return convert(L, LT_INT64); }
static int t_bool(lua_State *L) { return convert(L, LT_BOOL); }

/* ------------------------------------------------------------ indexing */

/* x[i]: select along dim 1 (1-based, negative from the end). ipairs(x) ends by reading x[n+1],
** which raises here, so that message names the idiom that does iterate over rows. */
static lt_tensor *select_index(lua_State *L, lt_tensor *t, lua_Integer i) {
  lt_ctx *ctx = LTL_CTX(L);
  if (t->ndim == 0) luaL_error(L, "index: cannot index a 0-d tensor");
  int64_t n = t->size[0];
  if (i == 0)
    luaL_error(L, "index: index 0 is out of range (positions count from 1: expected 1..%I or "
               "-%I..-1)", (lua_Integer)n, (lua_Integer)n);
  if (i > n || i < -n)
    luaL_error(L, "index: index %I is out of range for dimension 1 of size %I (expected 1..%I "
               "or -%I..-1; to iterate over rows use: for i, row in pairs(x))", (lua_Integer)i,
               (lua_Integer)n, (lua_Integer)n, (lua_Integer)n);
  lt_tensor *r;
  LTL_TRY(L, ctx, lt_select(ctx, &r, t, 0, i > 0 ? i - 1 : i + n));
  return r;
}

/* A view whose base was written in place since shows its remade history (as PyTorch). */
static void refresh_view(lua_State *L, lt_tensor *t) {
  lt_ctx *ctx = LTL_CTX(L);
  LTL_TRY(L, ctx, ltG_refresh_view(ctx, t));
}

static int push_property(lua_State *L, lt_tensor *t, const char *k) {
  switch (k[0]) {
    case 'g':
      if (strcmp(k, "grad") == 0) {
        if (t->grad)
          ltL_push(L, lt_retain(t->grad));
        else
          lua_pushnil(L);
        return 1;
      }
      if (strcmp(k, "grad_fn") == 0) {
        refresh_view(L, t);
        const char *n = lt_grad_fn_name(t);
        if (n)
          lua_pushstring(L, n);
        else
          lua_pushnil(L);
        return 1;
      }
      break;
    case 'r':
      if (strcmp(k, "requires_grad") == 0) {
        refresh_view(L, t);
        lua_pushboolean(L, t->requires_grad);
        return 1;
      }
      break;
    case 'i':
      if (strcmp(k, "is_leaf") == 0) {
        refresh_view(L, t);
        lua_pushboolean(L, t->grad_fn == NULL);
        return 1;
      }
      break;
    case 's':
      if (strcmp(k, "shape") == 0) {
        lua_settop(L, 1);
        return t_size(L);
      }
      break;
    case 'd':
      if (strcmp(k, "dtype") == 0) {
        lua_pushstring(L, lt_dtype_name(t->dtype));
        return 1;
      }
      if (strcmp(k, "device") == 0) {
        char name[32];
        lua_pushstring(L, lt_device_str(t, name, sizeof name));
        return 1;
      }
      if (strcmp(k, "data") == 0) {
        lt_tensor *r = ltB_alias(t, t->ndim, t->size, t->stride, t->offset);
        if (!r) return luaL_error(L, "data: out of memory");
        ltL_push(L, r);
        return 1;
      }
      break;
    case 'n':
      if (strcmp(k, "ndim") == 0) {
        lua_pushinteger(L, t->ndim);
        return 1;
      }
      break;
    default: break;
  }
  return 0;
}

/* Methods are looked up first, before the tensor argument is checked: this metamethod is only
** ever installed on the Tensor metatable, and every method call comes through here. */
static int t_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNIL) return 1;   /* a method */
    lua_pop(L, 1);
    if (push_property(L, ltL_check(L, 1), lua_tostring(L, 2))) return 1;
    lua_pushnil(L);
    return 1;
  }
  if (lua_isinteger(L, 2)) {
    ltL_push(L, select_index(L, ltL_check(L, 1), lua_tointeger(L, 2)));
    return 1;
  }
  return luaL_error(L, "index: expected an integer position or a field name, got %s",
                    luaL_typename(L, 2));
}

static int t_newindex(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  if (lua_isinteger(L, 2)) {
    lt_tensor *dst = select_index(L, t, lua_tointeger(L, 2)), *owned;
    ltL_push(L, dst);   /* anchor for errors */
    lt_tensor *src = ltL_checkoperand(L, 3, t, &owned);
    /* dst is a view of t: recorded on t (CopySlices). One value (a number, a 0-d tensor) is
    ** PyTorch's fill_, which may write into an expanded row. */
    int rc = src->ndim == 0 ? lt_fill_tensor_(ctx, dst, src) : lt_copy_(ctx, dst, src);
    lt_release(owned);
    if (rc) return ltL_raise(L, ctx);
    return 0;
  }
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "requires_grad") == 0) {
    LTL_TRY(L, ctx, lt_set_requires_grad(ctx, t, lua_toboolean(L, 3)));
    return 0;
  }
  if (strcmp(k, "grad") == 0) {
    lt_tensor *g = lua_isnil(L, 3) ? NULL : ltL_check(L, 3);
    LTL_TRY(L, ctx, lt_set_grad(ctx, t, g));
    return 0;
  }
  if (strcmp(k, "data") == 0) {
    lt_tensor *src = ltL_check(L, 3);
    if (!ltB_same_shape(src, t) || src->dtype != t->dtype) {
      char a[256], b[256];
      return luaL_error(L, "data: assigned tensor %s %s must match %s %s",
                        lt_dtype_name(src->dtype), LT_SHAPE(src, a), lt_dtype_name(t->dtype),
                        LT_SHAPE(t, b));
    }
    bool old = lt_set_grad_enabled(ctx, false);
    int rc = lt_copy_(ctx, t, src);
    lt_set_grad_enabled(ctx, old);
    if (rc) return ltL_raise(L, ctx);
    return 0;
  }
  return luaL_error(L, "Tensor: cannot set field '%s' (settable fields: requires_grad, grad, "
                    "data; tensors carry no custom fields)", k);
}

static int t_len(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  if (t->ndim == 0) return luaL_error(L, "len() of a 0-d tensor");
  lua_pushinteger(L, t->size[0]);
  return 1;
}

/* ------------------------------------------------------------ module functions */

static int l_set_num_threads(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 1) return luaL_error(L, "set_num_threads: expected n >= 1, got %d", (int)n);
  lt_set_num_threads(LTL_CTX(L), (int)n);
  return 0;
}

static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, lt_get_num_threads(LTL_CTX(L)));
  return 1;
}

/* lt.gemm(): which float32 GEMM runs ("lantern" or "openblas") and OpenBLAS's kernel set */
static int l_gemm(lua_State *L) {
  lua_pushstring(L, ltB_sgemm_name());
  lua_pushstring(L, ltB_blas_core());
  return 2;
}

/* The vector instruction level the float32 kernels run at ("sse4", "avx2", "avx512"). */
static int l_isa(lua_State *L) {
  lua_pushstring(L, ltB_cpu_isa_name(ltB_cpu_isa()));
  return 1;
}

/* lt._stream_threshold([bytes]): the operand bytes above which elementwise ops stream their
** output past the caches; with an argument (tests, comparisons) sets it first (0 never, -1 the
** default). */
static int l_stream_threshold(lua_State *L) {
  lua_Integer set = luaL_optinteger(L, 1, -2);
  if (set < -2) luaL_error(L, "_stream_threshold: expected bytes >= -1, got %I", set);
  lua_pushinteger(L, (lua_Integer)ltB_stream_threshold(set == -2 ? -2 : (int64_t)set));
  return 1;
}

/* Monotonic wall clock in seconds, for benchmarks and progress displays. */
static int l_clock(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

static const ltL_Reg tensor_regs[] = {
    {"clock", l_clock, LTL_FN},
    {"item", t_item, LTL_METHOD},
    {"tolist", t_tolist, LTL_METHOD},
    {"size", t_size, LTL_METHOD},
    {"stride", t_stride, LTL_METHOD},
    {"dim", t_dim, LTL_METHOD},
    {"ndimension", t_dim, LTL_METHOD},
    {"numel", t_numel, LTL_METHOD | LTL_FN},
    {"nelement", t_numel, LTL_METHOD},
    {"element_size", t_element_size, LTL_METHOD},
    {"storage_offset", t_storage_offset, LTL_METHOD},
    {"is_contiguous", t_is_contiguous, LTL_METHOD},
    {"is_floating_point", t_is_floating_point, LTL_METHOD | LTL_FN},
    {"contiguous", t_contiguous, LTL_METHOD},
    {"clone", t_clone, LTL_METHOD | LTL_FN},
    {"detach", t_detach, LTL_METHOD},
    {"detach_", t_detach_, LTL_METHOD},
    {"requires_grad_", t_requires_grad_, LTL_METHOD},
    {"retain_grad", t_retain_grad, LTL_METHOD},
    {"fill_", t_fill_, LTL_METHOD},
    {"zero_", t_zero_, LTL_METHOD},
    {"copy_", t_copy_, LTL_METHOD},
    {"to", t_to, LTL_METHOD},
    {"float", t_float, LTL_METHOD},
    {"double", t_double, LTL_METHOD},
    {"long", t_long, LTL_METHOD},
    {"bool", t_bool, LTL_METHOD},
    {"set_num_threads", l_set_num_threads, LTL_FN},
    {"get_num_threads", l_get_num_threads, LTL_FN},
    {"isa", l_isa, LTL_FN},
    {"gemm", l_gemm, LTL_FN},
    {"_stream_threshold", l_stream_threshold, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_tensor(lua_State *L) {
  ltL_state *st = ltL_state_of(L);
  if (!st->size_mt_ref) {
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, size_tostring);
    lua_setfield(L, -2, "__tostring");
    st->size_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  ltL_register(L, tensor_regs);
  luaL_getmetatable(L, LTL_TENSOR_MT);
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  lua_pushvalue(L, -3);   /* methods */
  lua_pushcclosure(L, t_index, 2);
  lua_setfield(L, -2, "__index");
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  lua_pushcclosure(L, t_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  lua_pushcclosure(L, t_gc, 1);
  lua_setfield(L, -2, "__gc");
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  lua_pushcclosure(L, t_len, 1);
  lua_setfield(L, -2, "__len");
  lua_pushliteral(L, "Tensor");
  lua_setfield(L, -2, "__name");
  lua_pop(L, 1);
}
