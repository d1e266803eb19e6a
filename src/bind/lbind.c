/*
** lbind.c -- shared helpers of the Lua binding and the module entry points.
*/
#include <lualib.h>
#include <stdlib.h>

#include "lbind.h"
#include "../generator.h"

/* The name a binding function was registered under (upvalue 2, set by ltL_register), or NULL
** for a function registered otherwise (metamethods, t_index). */
static const char *registered_name(lua_State *L) {
  return lua_type(L, lua_upvalueindex(2)) == LUA_TSTRING ? lua_tostring(L, lua_upvalueindex(2))
                                                          : NULL;
}

const char *ltL_opname(lua_State *L) {
  const char *name = registered_name(L);
  if (name) return name;
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name) return ar.name;
  return "?";
}

/* Core ops allocate through lt_empty, whose messages say "empty: ..."; the user called another
** function (ones, clone, x:expand(...):contiguous()), so its name replaces that prefix. */
int ltL_raise(lua_State *L, lt_ctx *ctx) {
  const char *op = registered_name(L);
  if (op && strncmp(ctx->err, "empty: ", 7) == 0 && strcmp(op, "empty") != 0)
    lua_pushfstring(L, "%s: %s", op, ctx->err + 7);
  else
    lua_pushstring(L, ctx->err);
  return lua_error(L);
}

const char ltL_tensor_tag = 'T';

static ltL_state *state_of(lua_State *L) { return ltL_state_in(LTL_CTX(L)); }

ltL_state *ltL_state_of(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  lt_ctx *ctx = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return ltL_state_in(ctx);
}

/* Bytes are reported in slices (256 KiB at least, so small ops stay cheap); lmem.c decides
** how large a slice is and what it does to the collector. */
static void gc_account(lua_State *L, ltL_state *st, size_t nbytes) {
  st->pending += nbytes;
  st->clock += nbytes;
  if (st->pending >= st->slice) {
    size_t kb = st->pending / 1024;
    st->pending = 0;
    ltL_gc_slice(L, st, kb);
  }
}

void ltL_gc_account(lua_State *L, size_t nbytes) {
  ltL_state *st = state_of(L);
  if (st) gc_account(L, st, nbytes);
}

/* No user values: a slot costs ~50 ns per tensor in allocation and collection. */
static void push_in(lua_State *L, ltL_state *st, lt_tensor *t) {
  ltL_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->tag = &ltL_tensor_tag;
  box->t = t;
  box->scope = 0;
  box->born = st ? LTL_BORN(st->clock) : 0;
  if (st)
    lua_rawgeti(L, LUA_REGISTRYINDEX, st->tensor_mt_ref);
  else
    luaL_getmetatable(L, LTL_TENSOR_MT);
  lua_setmetatable(L, -2);
  if (st && st->nscopes) ltL_scope_track(L, st, box);
  /* every tensor struct counts (a view's too: with tiny tensors the structs are most of the
  ** memory, and an under-paced collector lets garbage outgrow the recycling lists, which makes
  ** ops several times slower); a storage counts the first time a handle to it is made. (Not
  ** "when only this tensor holds it": a recorded op that saves its output for the backward,
  ** relu or exp, holds it twice, and 20000 relus of 128 x 512 with grad then went uncounted,
  ** let 200 MB of garbage pile up and ran 7x slower, on fresh pages.) */
  if (st) {
    size_t n = sizeof(lt_tensor);
    lt_storage *s = t->storage;
    if (!s->gc_counted && !s->deleter) {
      s->gc_counted = true;
      n += s->nbytes + sizeof(lt_storage);
    }
    gc_account(L, st, n);
  }
}

void ltL_push(lua_State *L, lt_tensor *t) { push_in(L, state_of(L), t); }

void ltL_push_ctx(lua_State *L, lt_ctx *ctx, lt_tensor *t) { push_in(L, ltL_state_in(ctx), t); }

/* A view whose base's history changed since it was made is brought up to date before any op
** sees it, so that an op's "requires grad?" test is right (the engine also refreshes views it
** records; this covers the ops that decide not to record). A failure is left for the op. */
static void refresh_stale(lua_State *L, lt_tensor *t) {
  /* from the registry: a host's C function calling lantern_to_tensor has other upvalues */
  if (lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx") == LUA_TUSERDATA)
    (void)ltG_refresh_view(lua_touserdata(L, -1), t);
  lua_pop(L, 1);
}

lt_tensor *ltL_test(lua_State *L, int idx) {
  ltL_box *box = ltL_testbox(L, idx);
  if (!box) return NULL;
  lt_tensor *t = box->t;
  if (!t) ltL_released_error(L, idx);
  if (t->base && t->base_epoch != t->base->view_epoch) refresh_stale(L, t);
  return t;
}

lt_tensor *ltL_check(lua_State *L, int idx) {
  lt_tensor *t = ltL_test(L, idx);
  if (!t)
    luaL_error(L, "%s: bad argument #%d (Tensor expected, got %s)", ltL_opname(L), idx,
               luaL_typename(L, idx));
  return t;
}

lt_tensor *ltL_checkoperand(lua_State *L, int idx, const lt_tensor *like, lt_tensor **owned) {
  *owned = NULL;
  lt_tensor *t = ltL_test(L, idx);
  if (t) return t;
  lt_ctx *ctx = LTL_CTX(L);
  lt_dtype dt;
  double v;
  if (lua_isboolean(L, idx)) {
    dt = LT_BOOL;
    v = lua_toboolean(L, idx);
  } else if (lua_isinteger(L, idx)) {
    if (!like || !lt_dtype_is_float(like->dtype)) {
      /* written as an integer: doubles lose integers above 2^53 */
      LTL_TRY(L, ctx, lt_empty(ctx, owned, LT_INT64, 0, NULL));
      *(int64_t *)ltB_ptr(*owned) = (int64_t)lua_tointeger(L, idx);
      return *owned;
    }
    dt = like->dtype;
    v = (double)lua_tointeger(L, idx);
  } else if (lua_type(L, idx) == LUA_TNUMBER) {
    dt = like && lt_dtype_is_float(like->dtype) ? like->dtype : LT_FLOAT32;
    v = lua_tonumber(L, idx);
  } else {
    luaL_error(L, "%s: bad argument #%d (Tensor or number expected, got %s)", ltL_opname(L),
               idx, luaL_typename(L, idx));
    return NULL;
  }
  LTL_TRY(L, ctx, lt_full(ctx, owned, dt, 0, NULL, v));
  return *owned;
}

int ltL_checkdim(lua_State *L, int idx, int ndim) {
  lua_Integer d = luaL_checkinteger(L, idx);
  int n = ndim > 0 ? ndim : 1;
  if (d == 0 || d < -n || d > n)
    return luaL_error(L, "%s: dimension %d out of range (expected 1..%d or -%d..-1 for a %d-d "
                      "tensor)", ltL_opname(L), (int)d, n, n, ndim);
  return (int)(d > 0 ? d - 1 : d + n);
}

int ltL_optdim(lua_State *L, int idx, int ndim, int def0) {
  if (lua_isnoneornil(L, idx)) return def0;
  return ltL_checkdim(L, idx, ndim);
}

/* One size at stack index idx (the position-th); raises naming the op. */
static int64_t size_at(lua_State *L, int idx, int position) {
  int isint;
  lua_Integer v = lua_tointegerx(L, idx, &isint);
  if (!isint) {
    if (lua_type(L, idx) == LUA_TNUMBER)
      luaL_error(L, "%s: size at position %d must be an integer, got %s", ltL_opname(L),
                 position, lua_tostring(L, idx));
    luaL_error(L, "%s: size at position %d must be an integer, got %s", ltL_opname(L),
               position, luaL_typename(L, idx));
  }
  return (int64_t)v;
}

int ltL_checksizes(lua_State *L, int idx, int64_t *size, int *next) {
  int n = 0;
  if (lua_istable(L, idx) && !ltL_test(L, idx)) {
    lua_Integer len = luaL_len(L, idx);
    if (len > LT_MAX_DIMS)
      luaL_error(L, "%s: too many dimensions (%d, at most %d)", ltL_opname(L), (int)len,
                 LT_MAX_DIMS);
    n = (int)len;
    for (int i = 0; i < n; i++) {
      lua_geti(L, idx, i + 1);
      size[i] = size_at(L, -1, i + 1);
      lua_pop(L, 1);
    }
    *next = idx + 1;
    return n;
  }
  while (lua_type(L, idx + n) == LUA_TNUMBER) {
    if (n >= LT_MAX_DIMS)
      luaL_error(L, "%s: too many dimensions (at most %d)", ltL_opname(L), LT_MAX_DIMS);
    size[n] = size_at(L, idx + n, n + 1);
    n++;
  }
  *next = idx + n;
  return n;
}

lt_dtype ltL_optdtype(lua_State *L, int idx, lt_dtype def) {
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "%s: dtype must be a string (float32, float64, int64 or bool), got %s",
               ltL_opname(L), luaL_typename(L, idx));
  const char *name = lua_tostring(L, idx);
  int dt = lt_dtype_parse(name);
  if (dt < 0)
    luaL_error(L, "%s: unknown dtype '%s' (expected float32, float64, int64 or bool)",
               ltL_opname(L), name);
  return (lt_dtype)dt;
}

static int opt_field(lua_State *L, int idx, const char *name) {
  if (!lua_istable(L, idx)) return 0;
  if (lua_getfield(L, idx, name) == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

bool ltL_optbool_field(lua_State *L, int idx, const char *name, bool def) {
  if (!opt_field(L, idx, name)) return def;
  if (!lua_isboolean(L, -1))
    luaL_error(L, "%s: option '%s' must be a boolean, got %s", ltL_opname(L), name,
               luaL_typename(L, -1));
  bool v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

double ltL_optnum_field(lua_State *L, int idx, const char *name, double def) {
  if (!opt_field(L, idx, name)) return def;
  if (lua_type(L, -1) != LUA_TNUMBER)
    luaL_error(L, "%s: option '%s' must be a number, got %s", ltL_opname(L), name,
               luaL_typename(L, -1));
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

lt_dtype ltL_optdtype_field(lua_State *L, int idx, lt_dtype def) {
  if (!opt_field(L, idx, "dtype")) return def;
  lt_dtype dt = ltL_optdtype(L, -1, def);
  lua_pop(L, 1);
  return dt;
}

lt_generator *ltL_checkgen(lua_State *L, int idx) {
  lt_generator **g = luaL_checkudata(L, idx, LTL_GEN_MT);
  return *g;
}

lt_generator *ltL_optgen_field(lua_State *L, int idx) {
  if (!opt_field(L, idx, "generator")) return NULL;
  lt_generator **g = luaL_testudata(L, -1, LTL_GEN_MT);
  if (!g)
    luaL_error(L, "%s: option 'generator' must be a lantern Generator, got %s", ltL_opname(L),
               luaL_typename(L, -1));
  lua_pop(L, 1);   /* the options table keeps the generator alive */
  return *g;
}

void ltL_apply_requires_grad(lua_State *L, int opts, lt_tensor *t) {
  if (ltL_optbool_field(L, opts, "requires_grad", false)) {
    lt_ctx *ctx = LTL_CTX(L);
    LTL_TRY(L, ctx, lt_set_requires_grad(ctx, t, true));
  }
}

void ltL_register(lua_State *L, const ltL_Reg *regs) {
  /* stack: module, methods; ctx userdata is fetched from the registry */
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  for (; regs->name; regs++) {
    if (regs->where & LTL_FN) {
      lua_pushvalue(L, -1);
      lua_pushstring(L, regs->name);
      lua_pushcclosure(L, regs->fn, 2);
      lua_setfield(L, -4, regs->name);
    }
    if (regs->where & LTL_METHOD) {
      lua_pushvalue(L, -1);
      lua_pushstring(L, regs->name);
      lua_pushcclosure(L, regs->fn, 2);
      lua_setfield(L, -3, regs->name);
    }
  }
  lua_pop(L, 1);
}

/* ------------------------------------------------------------ options tables */

/* Edit distance of two short strings counting insertions, deletions, substitutions and swaps
** of neighbours (the commonest typo): the rule of lua/lantern/options.lua, so that a typo gets
** the same suggestion from a C function as from a Lua one. */
#define OPT_MAXLEN 64
static int opt_distance(const char *a, size_t la, const char *b, size_t lb) {
  int rows[3][OPT_MAXLEN + 1];
  int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int v = prev[j] + 1;
      if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
      if (prev[j - 1] + cost < v) v = prev[j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < v)
        v = prev2[j - 2] + 1;
      cur[j] = v;
    }
    int *t = prev2;
    prev2 = prev;
    prev = cur;
    cur = t;
  }
  return prev[lb];
}

/* The known name nearest to key, or NULL when none is close (more than a third of the longer
** name differs). A key longer than OPT_MAXLEN is farther than that from any option name. */
static const char *opt_nearest(const char *key, size_t lk, const char *const *known) {
  const char *best = NULL;
  int bestd = 0;
  if (lk > OPT_MAXLEN) return NULL;
  for (const char *const *k = known; *k; k++) {
    size_t lb = strlen(*k);
    if (lb > OPT_MAXLEN) continue;
    int d = opt_distance(key, lk, *k, lb);
    if (!best || d < bestd) best = *k, bestd = d;
  }
  if (!best) return NULL;
  size_t longer = lk > strlen(best) ? lk : strlen(best);
  int limit = (int)(longer / 3) > 1 ? (int)(longer / 3) : 1;
  return bestd <= limit ? best : NULL;
}

static int opt_unknown(lua_State *L, const char *op, const char *const *known) {
  /* stack: ..., key, value */
  lua_pop(L, 1);
  bool is_str = lua_type(L, -1) == LUA_TSTRING;
  size_t lk;
  const char *key = luaL_tolstring(L, -1, &lk);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_where(L, 1);   /* the caller's position, as luaL_error and lantern.options give */
  luaL_addvalue(&b);
  lua_pushfstring(L, "%s: unknown option '%s'", op, key);
  luaL_addvalue(&b);
  const char *near = is_str ? opt_nearest(key, lk, known) : NULL;
  if (near) {
    lua_pushfstring(L, " (did you mean '%s'?)", near);
    luaL_addvalue(&b);
  } else if (known[0]) {
    luaL_addstring(&b, " (expected one of ");
    for (const char *const *k = known; *k; k++) {
      if (k != known) luaL_addstring(&b, ", ");
      luaL_addstring(&b, *k);
    }
    luaL_addchar(&b, ')');
  }
  luaL_pushresult(&b);
  return lua_error(L);
}

void ltL_checkopts(lua_State *L, int idx, const char *op, const char *const *known) {
  if (idx == 0 || !lua_istable(L, idx) || ltL_test(L, idx)) return;
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    bool ok = false;
    if (lua_type(L, -2) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -2);
      for (const char *const *n = known; *n && !ok; n++) ok = strcmp(*n, k) == 0;
    }
    if (!ok) opt_unknown(L, op, known);
    lua_pop(L, 1);
  }
}

void ltL_nomore(lua_State *L, int n) {
  const char *op = ltL_opname(L);
  for (int i = n + 1; i <= lua_gettop(L); i++) {
    if (lua_isnil(L, i)) continue;
    if (lua_istable(L, i) && !ltL_test(L, i)) {
      lua_pushnil(L);
      while (lua_next(L, i)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING)
          luaL_error(L, "%s: unknown option '%s' (%s takes no options)", op,
                     lua_tostring(L, -1), op);
      }
    }
    luaL_error(L, "%s: unexpected argument #%d (%s): %s takes %d argument%s", op, i,
               luaL_typename(L, i), op, n, n == 1 ? "" : "s");
  }
}

/* ------------------------------------------------------------ entry points */

static int ctx_gc(lua_State *L) {
  lt_ctx *ctx = lua_touserdata(L, 1);
  ltB_generator_free(ctx->gen);
  ctx->gen = NULL;
  ltL_state *st = ltL_state_in(ctx);
  ltL_pool_remove(L, st->pool);
  st->pool = NULL;
  return 0;
}

#define FAMILY(f) extern void f(lua_State *L);
FAMILY(ltL_open_creation)
FAMILY(ltL_open_random)
FAMILY(ltL_open_elementwise)
FAMILY(ltL_open_shape)
FAMILY(ltL_open_reduce)
FAMILY(ltL_open_linalg)
FAMILY(ltL_open_nn)
FAMILY(ltL_open_serial)
FAMILY(ltL_open_optim)
FAMILY(ltL_open_data)
FAMILY(ltL_open_device)
FAMILY(ltL_open_repl)
#undef FAMILY

int luaopen_lantern_core(lua_State *L) {
  /* one context per Lua state, kept in the registry and as upvalue 1 of every function */
  if (lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx") == LUA_TNIL) {
    lua_pop(L, 1);
    lt_ctx *ctx = lua_newuserdatauv(L, sizeof(lt_ctx) + sizeof(ltL_state), 0);
    ltL_state *st = ltL_state_in(ctx);
    memset(st, 0, sizeof *st);
    st->slice = LTL_SLICE_MIN;
    st->span = LTL_SLICE_MAX;   /* no lifetimes seen yet */
    if (ltB_ctx_init(ctx)) return luaL_error(L, "lantern: out of memory");
    lua_newtable(L);
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
    st->pool = ltL_pool_install(L);
    ltL_gc_rebase(L, st);
  }
  lua_pop(L, 1);
  lua_newtable(L);                                 /* module */
  {
    lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
    ltL_state *st = (ltL_state *)((lt_ctx *)lua_touserdata(L, -1) + 1);
    lua_pop(L, 1);
    if (luaL_newmetatable(L, LTL_TENSOR_MT)) {
      lua_pushvalue(L, -1);
      st->tensor_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_pop(L, 1);
  }
  lua_newtable(L);                                 /* methods */
  ltL_open_tensor(L);
  ltL_open_mem(L);
  ltL_open_autograd(L);
  void (*families[])(lua_State *) = {
      ltL_open_creation, ltL_open_random, ltL_open_elementwise, ltL_open_shape, ltL_open_reduce,
      ltL_open_linalg,   ltL_open_nn,     ltL_open_serial,      ltL_open_optim, ltL_open_data,
      ltL_open_repl,     ltL_open_device,
  };
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) families[i](L);
  lua_setfield(L, -2, "Tensor");                   /* module.Tensor = methods */
  luaL_getmetatable(L, LTL_TENSOR_MT);
  lua_setfield(L, -2, "_tensor_mt");
  return 1;
}

extern const char *const lantern_lua_sources[];

static int load_embedded(lua_State *L) {
  const char *src = lua_tostring(L, lua_upvalueindex(1));
  const char *name = lua_tostring(L, 1);
  if (luaL_loadbuffer(L, src, strlen(src), name) != LUA_OK) return lua_error(L);
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

void lantern_open(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_lantern_core);
  lua_setfield(L, -2, "lantern.core");
  for (int i = 0; lantern_lua_sources[i]; i += 2) {
    lua_pushstring(L, lantern_lua_sources[i + 1]);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, lantern_lua_sources[i]);
  }
  lua_pop(L, 1);
}

/* A host's C function has its own upvalues, so the state comes from the registry; its
** tensors are paced and scoped like the binding's own. */
void lantern_push_tensor(lua_State *L, lt_tensor *t) {
  push_in(L, ltL_state_of(L), lt_retain(t));
}
/* Never raises (a host may call it outside a protected call): a released handle is no tensor. */
lt_tensor *lantern_to_tensor(lua_State *L, int idx) {
  ltL_box *box = ltL_testbox(L, idx);
  return box && box->t ? ltL_test(L, idx) : NULL;
}
