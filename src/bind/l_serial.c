/*
** l_serial.c -- the Lua side of the checkpoint formats: converts the value trees of
** src/serial/ to Lua values and back. The front end (lt.save, lt.load, lt.safetensors.*,
** lt.save_module, lt.load_module) is lua/lantern/serialization.lua.
**
** Python -> Lua: dict/OrderedDict -> table with string or integer keys (a metatable keeps the
** file's key order in __order and state_dict _metadata in __metadata; None values are left
** out); list -> array (metatable __name "list"); tuple -> array (__name "tuple"); None inside
** a list/tuple -> the sentinel lt.serialization.None; int -> integer; float -> float; str and
** bytes -> string; tensor -> Tensor; bare storage -> 1-D Tensor; dtype -> its name.
** Lua -> Python: the inverse, with untagged tables becoming lists when their keys are exactly
** 1..n (n >= 1) and dicts otherwise (an OrderedDict when every value is a tensor).
*/
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "lbind.h"
#include "../serial/serial.h"

#define DOC_MT "lantern.serial.doc"
#define HELPERS "lantern.serial.helpers"
#define MAXDEPTH 200

typedef struct { ltS_sdoc *d; } docbox;

/* Raises a message that starts with the op (no "file:line:" prefix, like ltL_raise). */
static int raise(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return lua_error(L);
}

static int doc_gc(lua_State *L) {
  docbox *b = luaL_checkudata(L, 1, DOC_MT);
  ltS_sdoc_free(b->d);
  b->d = NULL;
  return 0;
}

/* A userdata that owns a doc, so that a Lua error anywhere frees it (through __gc). */
static docbox *new_doc(lua_State *L) {
  docbox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->d = NULL;
  if (luaL_newmetatable(L, DOC_MT)) {
    lua_pushcfunction(L, doc_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b;
}

static void done_doc(docbox *b) {
  ltS_sdoc_free(b->d);
  b->d = NULL;
}

typedef struct conv {
  ltS_sdoc *d;
  size_t pushed;             /* tensor handles made, for the collector's accounting */
  int memo, helpers;
  const char *op;
  char path[256];
  size_t plen;
} conv;

/* ============================================================ file -> Lua */

static double bigint_value(const ltS_sval *v) {
  const uint8_t *b = (const uint8_t *)v->u.s.p;
  size_t n = v->u.s.n;
  double x = 0;
  for (size_t i = n; i-- > 0;) x = x * 256.0 + b[i];
  if (n && (b[n - 1] & 0x80)) x -= ldexp(1.0, (int)(8 * (n > 128 ? 128 : n)));
  return x;
}

static void push_value(lua_State *L, conv *c, ltS_sval *v, int depth);

static void push_key(lua_State *L, conv *c, ltS_sval *k) {
  switch (k->kind) {
    case LT_SV_STR:
    case LT_SV_BYTES: lua_pushlstring(L, k->u.s.p, k->u.s.n); return;
    case LT_SV_INT: lua_pushinteger(L, k->u.i); return;
    case LT_SV_BOOL: lua_pushboolean(L, k->u.b); return;
    case LT_SV_BIGINT: lua_pushnumber(L, bigint_value(k)); return;
    case LT_SV_FLOAT:
      if (k->u.f != k->u.f) raise(L, "%s: a dict has a NaN key, which Lua cannot hold", c->op);
      lua_pushnumber(L, k->u.f);
      return;
    default:
      raise(L, "%s: a dict has a key of type %s, which is not supported", c->op,
                 k->kind == LT_SV_TUPLE ? "tuple" : k->kind == LT_SV_NONE ? "None" : "object");
  }
}

static void set_meta(lua_State *L, conv *c, const char *field) {
  lua_getfield(L, c->helpers, field);
  lua_setmetatable(L, -2);
}

/* Lua's table constructors take int sizes; a larger file's tables grow as they fill. */
static int size_hint(size_t n) { return n > 1000000 ? 1000000 : (int)n; }

/* Pushes the values that are no object of the file (no memo entry); false for the others. */
static bool push_plain(lua_State *L, conv *c, const ltS_sval *v) {
  switch (v->kind) {
    case LT_SV_NONE: lua_getfield(L, c->helpers, "None"); return true;
    case LT_SV_BOOL: lua_pushboolean(L, v->u.b); return true;
    case LT_SV_INT: lua_pushinteger(L, v->u.i); return true;
    case LT_SV_FLOAT: lua_pushnumber(L, v->u.f); return true;
    case LT_SV_BIGINT: lua_pushnumber(L, bigint_value(v)); return true;
    case LT_SV_STR:
    case LT_SV_BYTES: lua_pushlstring(L, v->u.s.p, v->u.s.n); return true;
    case LT_SV_DTYPE: lua_pushstring(L, ltS_fdtype_name((ltS_fdtype)v->code)); return true;
    case LT_SV_GLOBAL:
      raise(L, "%s: the file holds a bare reference to %s, which has no Lantern value",
                 c->op, v->u.s.p);
      return true;
    default: return false;
  }
}

/* Records the table on top as v's Lua value before its items, so a cycle finds it. */
static void memo_top(lua_State *L, conv *c, ltS_sval *v) {
  lua_pushvalue(L, -1);
  lua_rawsetp(L, c->memo, v);
}

static void push_seq(lua_State *L, conv *c, ltS_sval *v, int depth) {
  size_t n = v->u.seq.n;
  lua_createtable(L, size_hint(n), 0);
  memo_top(L, c, v);
  for (size_t i = 0; i < n; i++) {
    push_value(L, c, v->u.seq.v[i], depth + 1);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  set_meta(L, c, v->kind == LT_SV_LIST ? "list_mt" : "tuple_mt");
}

/* helpers.make_dict(t, keys, meta, ordered) with meta on the top of the stack (or nil);
** leaves t on the top */
static void make_dict(lua_State *L, conv *c, int t, int keys, bool ordered) {
  lua_getfield(L, c->helpers, "make_dict");
  lua_pushvalue(L, t);
  lua_pushvalue(L, keys);
  lua_rotate(L, -4, -1);   /* meta after t and keys */
  lua_pushboolean(L, ordered);
  lua_call(L, 4, 0);
  lua_settop(L, t);
}

static void push_dict(lua_State *L, conv *c, ltS_sval *v, int depth) {
  size_t n = v->u.dict.n;
  lua_createtable(L, 0, size_hint(n));
  int t = lua_gettop(L);
  memo_top(L, c, v);
  lua_createtable(L, size_hint(n), 0);   /* key order */
  int keys = lua_gettop(L);
  lua_Integer nk = 0;
  for (size_t i = 0; i < n; i++) {
    if (v->u.dict.v[i]->kind == LT_SV_NONE) continue;   /* Lua tables cannot hold nil */
    push_key(L, c, v->u.dict.k[i]);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, t) == LUA_TNIL) {   /* a repeated key keeps its first position */
      lua_pushvalue(L, -2);
      lua_rawseti(L, keys, ++nk);
    }
    lua_pop(L, 1);
    push_value(L, c, v->u.dict.v[i], depth + 1);
    lua_rawset(L, t);
  }
  if (v->u.dict.meta && v->u.dict.meta->kind == LT_SV_DICT)
    push_value(L, c, v->u.dict.meta, depth + 1);
  else
    lua_pushnil(L);
  make_dict(L, c, t, keys, v->ordered);
}

/* a safetensors file's flat name -> tensor table; names are unique: no repeated-key check */
static void push_tensors(lua_State *L, conv *c, ltS_sval *v) {
  size_t n = v->u.flat.n;
  lua_createtable(L, 0, size_hint(n));
  int t = lua_gettop(L);
  memo_top(L, c, v);
  lua_createtable(L, size_hint(n), 0);   /* key order */
  int keys = lua_gettop(L);
  for (size_t i = 0; i < n; i++) {   /* three slots at a time: push_value checked ten */
    lua_pushlstring(L, v->u.flat.e[i].name, v->u.flat.e[i].len);
    lua_pushvalue(L, -1);
    lua_rawseti(L, keys, (lua_Integer)i + 1);
    ltL_push(L, lt_retain(v->u.flat.e[i].t));
    c->pushed++;
    lua_rawset(L, t);
  }
  lua_pushnil(L);
  make_dict(L, c, t, keys, true);
}

/* a bare storage becomes a 1-d tensor over it */
static void push_storage(lua_State *L, conv *c, const ltS_sval *v) {
  ltS_sstorage *s = v->u.stor;
  int64_t n = s->numel;
  lt_tensor *t = ltB_tensor_wrap(s->st, s->dt, 1, &n, NULL, 0);
  if (!t) raise(L, "%s: out of memory", c->op);
  ltL_push(L, t);
  c->pushed++;
}

static void push_value(lua_State *L, conv *c, ltS_sval *v, int depth) {
  luaL_checkstack(L, 10, "load: values nested too deeply");
  if (depth > MAXDEPTH)
    raise(L, "%s: values nested deeper than %d levels", c->op, MAXDEPTH);
  if (push_plain(L, c, v)) return;
  if (lua_rawgetp(L, c->memo, v) != LUA_TNIL) return;   /* shared or cyclic object */
  lua_pop(L, 1);
  switch (v->kind) {
    case LT_SV_LIST:
    case LT_SV_TUPLE: push_seq(L, c, v, depth); return;
    case LT_SV_DICT: push_dict(L, c, v, depth); return;
    case LT_SV_TENSORS: push_tensors(L, c, v); return;
    case LT_SV_TENSOR:
      ltL_push(L, lt_retain(v->u.ten->t));
      c->pushed++;
      break;
    case LT_SV_STORAGE: push_storage(L, c, v); break;
    default:
      raise(L, "%s: unexpected value in the file", c->op);
  }
  memo_top(L, c, v);
}

/* Options of the loaders: {map_dtype = {float16 = "float64", ...}, verify_crc = bool}. */
static void check_opts(lua_State *L, int idx, ltS_load_opts *o, const char *op) {
  ltS_load_opts_init(o);
  if (lua_isnoneornil(L, idx)) return;
  luaL_checktype(L, idx, LUA_TTABLE);
  o->verify_crc = ltL_optbool_field(L, idx, "verify_crc", true);
  if (lua_getfield(L, idx, "map_dtype") != LUA_TNIL) {
    if (!lua_istable(L, -1)) raise(L, "%s: option 'map_dtype' must be a table", op);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      const char *from = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
      int f = ltS_fdtype_parse(from);
      if (f < 0)
        raise(L, "%s: map_dtype: unknown file dtype '%s' (expected float32, float64, "
                   "float16, bfloat16, int64, int32, int16, int8, uint8, bool, uint16, uint32 or "
                   "uint64)", op, from);
      const char *to = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
      int dt = lt_dtype_parse(to);
      if (dt < 0)
        raise(L, "%s: map_dtype: unknown Lantern dtype '%s' for %s (expected float32, "
                   "float64, int64 or bool)", op, to, from);
      o->map[f] = (signed char)dt;
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

static void get_helpers(lua_State *L, const char *op) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, HELPERS) != LUA_TTABLE)
    raise(L, "%s: lantern.serialization is not loaded", op);
}

typedef int (*loader_fn)(lt_ctx *, const ltS_src *, const ltS_load_opts *, ltS_sdoc **);

/* Shared by _serial_load and _st_load: (path | nil, bytes | nil, opts). Leaves the doc box,
** helpers and memo on the stack. */
static ltS_sdoc *run_loader(lua_State *L, const char *op, loader_fn fn, conv *c) {
  lt_ctx *ctx = LTL_CTX(L);
  size_t blen = 0;
  const char *bytes = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &blen) : NULL;
  const char *path = bytes ? NULL : luaL_checkstring(L, 1);
  ltS_load_opts o;
  check_opts(L, 3, &o, op);
  lua_settop(L, 3);
  get_helpers(L, op);
  c->helpers = lua_gettop(L);
  lua_newtable(L);
  c->memo = lua_gettop(L);
  docbox *b = new_doc(L);
  ltS_src src;
  if (bytes)
    ltS_src_mem(&src, bytes, blen, "<bytes>");
  else if (ltS_src_open(ctx, op, &src, path))
    ltL_raise(L, ctx);
  int rc = fn(ctx, &src, &o, &b->d);
  ltS_src_close(&src);
  if (rc) ltL_raise(L, ctx);
  /* the collector learns the size of what was loaded */
  size_t total = ltS_sdoc_loaded_bytes(b->d);
  if (total) ltL_gc_account(L, total);
  c->d = b->d;
  c->op = op;
  return b->d;
}

/* push_value under a protected call: (conv, node, helpers, memo). */
static int push_protected(lua_State *L) {
  conv *c = lua_touserdata(L, 1);
  int helpers = c->helpers, memo = c->memo;
  c->helpers = 3;
  c->memo = 4;
  push_value(L, c, lua_touserdata(L, 2), 0);
  c->helpers = helpers;
  c->memo = memo;
  return 1;
}

/* The conversion makes only objects that its result keeps, so a collection during it frees
** nothing and re-traverses the growing tables, which for a file of a million tensors costs
** more than the conversion itself. The collector is stopped around it (when it was running;
** restarted on errors too) and then told of the tensor structs it was not told of meanwhile
** (run_loader told it of the storages). */
static void push_root(lua_State *L, conv *c, ltS_sval *v) {
  bool running = lua_gc(L, LUA_GCISRUNNING);
  size_t pushed = c->pushed;
  if (running) lua_gc(L, LUA_GCSTOP);
  lua_pushcfunction(L, push_protected);
  lua_pushlightuserdata(L, c);
  lua_pushlightuserdata(L, v);
  lua_pushvalue(L, c->helpers);
  lua_pushvalue(L, c->memo);
  int rc = lua_pcall(L, 4, 1, 0);
  if (running) lua_gc(L, LUA_GCRESTART);
  if (rc != LUA_OK) lua_error(L);
  if (running && c->pushed > pushed) ltL_gc_account(L, (c->pushed - pushed) * sizeof(lt_tensor));
}

static int l_serial_load(lua_State *L) {
  conv c = {0};
  ltS_sdoc *d = run_loader(L, "load", ltS_pt_load, &c);
  int box = lua_gettop(L);
  ltS_sval *root = ltS_sdoc_root(d);
  if (!root || root->kind == LT_SV_NONE)
    lua_pushnil(L);
  else
    push_root(L, &c, root);
  done_doc(lua_touserdata(L, box));
  return 1;
}

static int l_st_load(lua_State *L) {
  conv c = {0};
  ltS_sdoc *d = run_loader(L, "safetensors.load", ltS_st_load, &c);
  int box = lua_gettop(L);
  push_root(L, &c, ltS_sdoc_root(d));
  if (ltS_sdoc_meta(d))
    push_root(L, &c, ltS_sdoc_meta(d));
  else
    lua_pushnil(L);
  done_doc(lua_touserdata(L, box));
  return 2;
}

/* ============================================================ Lua -> file */

static ltS_sval *chk(lua_State *L, conv *c, ltS_sval *v) {
  if (!v) raise(L, "%s: out of memory", c->op);
  return v;
}

static const char *where(conv *c) { return c->plen ? c->path : "the top level"; }

static bool valid_utf8(const char *s, size_t n) {
  const uint8_t *p = (const uint8_t *)s;
  for (size_t i = 0; i < n;) {
    uint8_t b = p[i];
    size_t len = b < 0x80 ? 1 : (b & 0xe0) == 0xc0 && b >= 0xc2 ? 2 : (b & 0xf0) == 0xe0 ? 3
               : (b & 0xf8) == 0xf0 && b <= 0xf4 ? 4 : 0;
    if (!len || i + len > n) return false;
    for (size_t k = 1; k < len; k++)
      if ((p[i + k] & 0xc0) != 0x80) return false;
    if (len == 3 && ((b == 0xe0 && p[i + 1] < 0xa0) || (b == 0xed && p[i + 1] >= 0xa0)))
      return false;
    if (len == 4 && ((b == 0xf0 && p[i + 1] < 0x90) || (b == 0xf4 && p[i + 1] >= 0x90)))
      return false;
    i += len;
  }
  return true;
}

/* Appends ".key" or "[i]" to the error path; returns the old length to restore. */
static size_t path_push(lua_State *L, conv *c, int kidx, bool array) {
  size_t old = c->plen;
  char buf[96];
  if (lua_type(L, kidx) == LUA_TSTRING)
    snprintf(buf, sizeof buf, "[\"%.80s\"]", lua_tostring(L, kidx));
  else if (lua_isinteger(L, kidx))
    snprintf(buf, sizeof buf, "[%lld]", (long long)lua_tointeger(L, kidx));
  else
    snprintf(buf, sizeof buf, array ? "[?]" : "[<%s>]", luaL_typename(L, kidx));
  size_t n = strlen(buf);
  if (c->plen + n < sizeof c->path) {
    memcpy(c->path + c->plen, buf, n + 1);
    c->plen += n;
  }
  return old;
}

static void path_pop(conv *c, size_t old) {
  c->plen = old;
  c->path[old] = 0;
}

static ltS_sval *to_sval(lua_State *L, conv *c, int idx, int depth);

static ltS_sval *key_sval(lua_State *L, conv *c, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      return chk(L, c, ltS_sv_str(c->d, valid_utf8(s, n) ? LT_SV_STR : LT_SV_BYTES, s, n));
    }
    case LUA_TNUMBER:
      return chk(L, c, lua_isinteger(L, idx) ? ltS_sv_int(c->d, lua_tointeger(L, idx))
                                             : ltS_sv_float(c->d, lua_tonumber(L, idx)));
    case LUA_TBOOLEAN: return chk(L, c, ltS_sv_bool(c->d, lua_toboolean(L, idx)));
    default:
      raise(L, "%s: a table at %s has a key of type %s (keys must be strings, numbers or "
                 "booleans)", c->op, where(c), luaL_typename(L, idx));
      return NULL;
  }
}

/* The sort classes of a plain table's keys: numbers, then booleans, then strings. */
enum skey_class { SK_NUMBER, SK_BOOLEAN, SK_STRING };

typedef struct skey {
  enum skey_class type;
  double num;
  lua_Integer ival;
  bool isint;
  const char *s;
  size_t n;
  lua_Integer slot;  /* position in the keys table */
} skey;

static int cmp_skey(const void *a, const void *b) {
  const skey *x = a, *y = b;
  if (x->type != y->type) return (int)x->type - (int)y->type;
  if (x->type == SK_NUMBER) {
    if (x->isint && y->isint) return (x->ival > y->ival) - (x->ival < y->ival);
    return (x->num > y->num) - (x->num < y->num);
  }
  if (x->type == SK_BOOLEAN) return (int)x->ival - (int)y->ival;
  size_t n = x->n < y->n ? x->n : y->n;
  int r = memcmp(x->s, y->s, n);
  return r ? r : (x->n > y->n) - (x->n < y->n);
}

/* Sets v = dict[k] with the key at kidx and the value at vidx. */
static void dict_put(lua_State *L, conv *c, ltS_sval *dict, int kidx, int vidx, int depth) {
  ltS_sval *k = key_sval(L, c, kidx);
  size_t old = path_push(L, c, kidx, false);
  ltS_sval *v = to_sval(L, c, vidx, depth + 1);
  path_pop(c, old);
  if (ltS_sv_set(c->d, dict, k, v)) raise(L, "%s: out of memory", c->op);
}

/* What a table is saved as, from its metatable's __name ("list", "tuple", "dict",
** "OrderedDict") and whether it has __pairs. */
typedef struct tkind {
  bool list, tuple, od, dict, has_pairs;
} tkind;

static tkind table_kind(lua_State *L, conv *c, int idx) {
  tkind k = {0};
  const char *name = NULL;   /* a string held by the metatable, so it outlives the pop */
  int name_type = luaL_getmetafield(L, idx, "__name");
  if (name_type == LUA_TSTRING) name = lua_tostring(L, -1);
  if (name_type != LUA_TNIL) lua_pop(L, 1);
  k.has_pairs = luaL_getmetafield(L, idx, "__pairs") != LUA_TNIL;
  if (k.has_pairs) lua_pop(L, 1);
  k.list = name && strcmp(name, "list") == 0;
  k.tuple = name && strcmp(name, "tuple") == 0;
  k.od = name && strcmp(name, "OrderedDict") == 0;
  k.dict = name && strcmp(name, "dict") == 0;
  if (!k.list && !k.tuple && !k.od && !k.dict && lua_getmetatable(L, idx)) {
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "state_dict") == LUA_TFUNCTION)
      raise(L, "%s: cannot save a Module at %s: save m:state_dict() instead (or use "
                 "lt.save_module)", c->op, where(c));
    lua_pop(L, 1);
  }
  return k;
}

/* whether the table's keys are exactly 1..n */
static bool keys_are_1_to_n(lua_State *L, int idx, lua_Integer n) {
  lua_Integer count = 0;
  bool ints = true;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    count++;
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > n)
      ints = false;
  }
  return ints && count == n;
}

/* memo[table at idx] = v, before v's items, so a cycle finds it */
static void memo_table(lua_State *L, conv *c, int idx, ltS_sval *v) {
  lua_pushvalue(L, idx);
  lua_pushlightuserdata(L, v);
  lua_rawset(L, c->memo);
}

static ltS_sval *seq_sval(lua_State *L, conv *c, int idx, lua_Integer n, bool tuple,
                          int depth) {
  ltS_sval *v = chk(L, c, ltS_sv_new(c->d, tuple ? LT_SV_TUPLE : LT_SV_LIST));
  memo_table(L, c, idx, v);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    lua_pushinteger(L, i);
    size_t old = path_push(L, c, -1, true);
    lua_pop(L, 1);
    ltS_sval *item = to_sval(L, c, -1, depth + 1);
    path_pop(c, old);
    lua_pop(L, 1);
    if (ltS_sv_push(c->d, v, item)) raise(L, "%s: out of memory", c->op);
  }
  return v;
}

/* the entries of an ordered table, in the order its __pairs gives */
static void put_pairs(lua_State *L, conv *c, int idx, ltS_sval *v, int depth) {
  luaL_getmetafield(L, idx, "__pairs");
  lua_pushvalue(L, idx);
  lua_call(L, 1, 3);
  int it = lua_gettop(L) - 2;
  for (;;) {
    lua_pushvalue(L, it);
    lua_pushvalue(L, it + 1);
    lua_pushvalue(L, it + 2);
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2)) {
      lua_pop(L, 2);
      break;
    }
    int top = lua_gettop(L);
    dict_put(L, c, v, top - 1, top, depth);
    lua_pop(L, 1);
    lua_replace(L, it + 2);
  }
  lua_pop(L, 3);
}

/* the sort key of the Lua key on the top of the stack (a string stays anchored in keys) */
static void fill_skey(lua_State *L, skey *s, lua_Integer slot) {
  memset(s, 0, sizeof *s);
  s->slot = slot;
  switch (lua_type(L, -1)) {
    case LUA_TNUMBER:
      s->type = SK_NUMBER;
      s->isint = lua_isinteger(L, -1);
      s->ival = s->isint ? lua_tointeger(L, -1) : 0;
      s->num = lua_tonumber(L, -1);
      break;
    case LUA_TBOOLEAN:
      s->type = SK_BOOLEAN;
      s->ival = lua_toboolean(L, -1);
      break;
    default:
      s->type = SK_STRING;
      if (lua_type(L, -1) == LUA_TSTRING) s->s = lua_tolstring(L, -1, &s->n);
      else s->s = "";
  }
}

/* The entries of a plain table with its keys sorted, so that a file does not depend on the
** table's hash order. Returns whether every key is a string and every value a tensor. */
static bool put_sorted(lua_State *L, conv *c, int idx, ltS_sval *v, int depth) {
  lua_newtable(L);
  int keys = lua_gettop(L);
  lua_Integer nk = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, keys, ++nk);
  }
  skey *sk = lua_newuserdatauv(L, (size_t)(nk ? nk : 1) * sizeof *sk, 0);
  for (lua_Integer i = 1; i <= nk; i++) {
    lua_rawgeti(L, keys, i);
    fill_skey(L, &sk[i - 1], i);
    lua_pop(L, 1);
  }
  qsort(sk, (size_t)nk, sizeof *sk, cmp_skey);
  bool all_tensors = nk > 0;
  for (lua_Integer i = 0; i < nk; i++) {
    lua_rawgeti(L, keys, sk[i].slot);
    lua_pushvalue(L, -1);
    lua_rawget(L, idx);
    if (sk[i].type != SK_STRING || !ltL_test(L, -1)) all_tensors = false;
    int top = lua_gettop(L);
    dict_put(L, c, v, top - 1, top, depth);
    lua_pop(L, 2);
  }
  lua_pop(L, 2);
  return all_tensors;
}

/* a state_dict's _metadata, kept by the table's metatable as __metadata */
static void put_metadata(lua_State *L, conv *c, int idx, ltS_sval *v, int depth) {
  if (luaL_getmetafield(L, idx, "__metadata") == LUA_TNIL) return;
  if (lua_istable(L, -1)) {
    size_t old = c->plen;
    ltS_sval *m = to_sval(L, c, -1, depth + 1);
    path_pop(c, old);
    if (m->kind == LT_SV_DICT) {
      m->ordered = true;
      v->u.dict.meta = m;
    }
  }
  lua_pop(L, 1);
}

static ltS_sval *table_sval(lua_State *L, conv *c, int idx, int depth) {
  tkind k = table_kind(L, c, idx);
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  bool tagged = k.list || k.tuple || k.od || k.dict;
  if (!tagged && !k.has_pairs && n > 0) k.list = keys_are_1_to_n(L, idx, n);
  if (k.list || k.tuple) return seq_sval(L, c, idx, n, k.tuple, depth);
  ltS_sval *v = chk(L, c, ltS_sv_new(c->d, LT_SV_DICT));
  memo_table(L, c, idx, v);
  if (k.has_pairs) {
    put_pairs(L, c, idx, v, depth);
  } else {
    bool all_tensors = put_sorted(L, c, idx, v, depth);
    if (!k.dict) k.od = k.od || all_tensors;   /* a state_dict */
  }
  v->ordered = k.od || (k.has_pairs && !k.dict);
  put_metadata(L, c, idx, v, depth);
  return v;
}

static ltS_sval *to_sval(lua_State *L, conv *c, int idx, int depth) {
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 16, "save: tables nested too deeply");
  if (depth > MAXDEPTH)
    raise(L, "%s: tables nested deeper than %d levels (at %s)", c->op, MAXDEPTH, where(c));
  switch (lua_type(L, idx)) {
    case LUA_TNIL: return chk(L, c, ltS_sv_new(c->d, LT_SV_NONE));
    case LUA_TBOOLEAN: return chk(L, c, ltS_sv_bool(c->d, lua_toboolean(L, idx)));
    case LUA_TNUMBER:
      return chk(L, c, lua_isinteger(L, idx) ? ltS_sv_int(c->d, lua_tointeger(L, idx))
                                             : ltS_sv_float(c->d, lua_tonumber(L, idx)));
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      return chk(L, c, ltS_sv_str(c->d, valid_utf8(s, n) ? LT_SV_STR : LT_SV_BYTES, s, n));
    }
    case LUA_TUSERDATA:
    case LUA_TTABLE: {
      lua_getfield(L, c->helpers, "None");
      bool none = lua_rawequal(L, -1, idx);
      lua_pop(L, 1);
      if (none) return chk(L, c, ltS_sv_new(c->d, LT_SV_NONE));
      lua_pushvalue(L, idx);
      if (lua_rawget(L, c->memo) == LUA_TLIGHTUSERDATA) {   /* the same object again */
        ltS_sval *v = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return v;
      }
      lua_pop(L, 1);
      lt_tensor *t = ltL_test(L, idx);
      if (t) {
        ltS_sval *v = chk(L, c, ltS_sv_tensor(c->d, t, lt_requires_grad(t)));
        lua_pushvalue(L, idx);
        lua_pushlightuserdata(L, v);
        lua_rawset(L, c->memo);
        return v;
      }
      if (lua_type(L, idx) == LUA_TTABLE) return table_sval(L, c, idx, depth);
    }
    /* fall through */
    default:
      raise(L, "%s: cannot save a value of type %s (at %s)", c->op, luaL_typename(L, idx),
                 where(c));
      return NULL;
  }
}

static void begin_save(lua_State *L, conv *c, const char *op, docbox **box) {
  get_helpers(L, op);
  c->helpers = lua_gettop(L);
  lua_newtable(L);
  c->memo = lua_gettop(L);
  *box = new_doc(L);
  (*box)->d = ltS_sdoc_new();
  if (!(*box)->d) raise(L, "%s: out of memory", op);
  c->d = (*box)->d;
  c->op = op;
}

/* _serial_save(obj, path) */
static int l_serial_save(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *path = luaL_checkstring(L, 2);
  lua_settop(L, 2);
  conv c = {0};
  docbox *box;
  begin_save(L, &c, "save", &box);
  ltS_sval *root = to_sval(L, &c, 1, 0);
  int rc = ltS_pt_save(ctx, path, root);
  done_doc(box);
  if (rc) ltL_raise(L, ctx);
  return 0;
}

/* _st_save(tensors, path, metadata) */
static int l_st_save(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *op = "safetensors.save";
  luaL_checktype(L, 1, LUA_TTABLE);
  const char *path = luaL_checkstring(L, 2);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  conv c = {0};
  docbox *box;
  begin_save(L, &c, op, &box);
  ltS_sval *dict = chk(L, &c, ltS_sv_new(c.d, LT_SV_DICT));
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      raise(L, "%s: tensor names must be strings, got a %s key", op, luaL_typename(L, -2));
    size_t n;
    const char *name = lua_tolstring(L, -2, &n);
    lt_tensor *t = ltL_test(L, -1);
    if (!t)
      raise(L, "%s: value of '%s' is a %s, expected a tensor (safetensors holds only "
                 "tensors)", op, name, luaL_typename(L, -1));
    if (strcmp(name, "__metadata__") == 0)
      raise(L, "%s: '__metadata__' is reserved and cannot name a tensor", op);
    ltS_sval *k = chk(L, &c, ltS_sv_str(c.d, LT_SV_STR, name, n));
    ltS_sval *v = chk(L, &c, ltS_sv_tensor(c.d, t, false));
    if (ltS_sv_set(c.d, dict, k, v)) raise(L, "%s: out of memory", op);
    lua_pop(L, 1);
  }
  ltS_sval *meta = NULL;
  if (!lua_isnil(L, 3)) {
    meta = chk(L, &c, ltS_sv_new(c.d, LT_SV_DICT));
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        raise(L, "%s: metadata keys and values must be strings (got %s = %s)", op,
                   luaL_typename(L, -2), luaL_typename(L, -1));
      size_t kn, vn;
      const char *ks = lua_tolstring(L, -2, &kn), *vs = lua_tolstring(L, -1, &vn);
      ltS_sval *k = chk(L, &c, ltS_sv_str(c.d, LT_SV_STR, ks, kn));
      ltS_sval *v = chk(L, &c, ltS_sv_str(c.d, LT_SV_STR, vs, vn));
      if (ltS_sv_set(c.d, meta, k, v)) raise(L, "%s: out of memory", op);
      lua_pop(L, 1);
    }
  }
  int rc = ltS_st_save(ctx, path, dict, meta);
  done_doc(box);
  if (rc) ltL_raise(L, ctx);
  return 0;
}

/* _serial_setup(helpers): {None, list_mt, tuple_mt, make_dict(t, keys, meta, ordered)} */
static int l_serial_setup(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, HELPERS);
  return 0;
}

/* _storage_id(t): an opaque value equal for tensors that share memory. */
static int l_storage_id(lua_State *L) {
  lt_tensor *t = ltL_check(L, 1);
  lua_pushlightuserdata(L, t->storage);
  return 1;
}

void ltL_open_serial(lua_State *L) {
  static const ltL_Reg regs[] = {
    {"_serial_load", l_serial_load, LTL_FN},
    {"_serial_save", l_serial_save, LTL_FN},
    {"_st_load", l_st_load, LTL_FN},
    {"_st_save", l_st_save, LTL_FN},
    {"_serial_setup", l_serial_setup, LTL_FN},
    {"_storage_id", l_storage_id, LTL_FN},
    {NULL, NULL, 0},
  };
  ltL_register(L, regs);
}
