/*
** l_autograd.c -- backward, autograd.grad, grad mode, tensor hooks and the node behind
** lt.autograd.Function (the only place where the backward pass calls into Lua, with hooks).
*/
#include <stdio.h>
#include <stdlib.h>

#include "lbind.h"

/* Collects tensors from a tensor or a list of tensors at idx into a new array (borrowed). */
static lt_tensor **check_list(lua_State *L, int idx, int *n, bool allow_nil) {
  lt_tensor *one = ltL_test(L, idx);
  if (one || (allow_nil && lua_isnoneornil(L, idx))) {
    lt_tensor **v = lua_newuserdatauv(L, sizeof *v, 0);
    v[0] = one;
    *n = one ? 1 : 0;
    return v;
  }
  luaL_checktype(L, idx, LUA_TTABLE);
  int k = (int)luaL_len(L, idx);
  lt_tensor **v = lua_newuserdatauv(L, (size_t)(k ? k : 1) * sizeof *v, 0);
  for (int i = 0; i < k; i++) {
    lua_geti(L, idx, i + 1);
    v[i] = allow_nil && !lua_toboolean(L, -1) ? NULL : ltL_check(L, -1);
    lua_pop(L, 1);
  }
  *n = k;
  return v;
}

/* t:backward(gradient?, {retain_graph=false}) -- the gradient may also be the options. */
static int l_backward(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  int opts = 3;
  lt_tensor *seed = ltL_test(L, 2);
  if (!seed && lua_istable(L, 2)) opts = 2;
  else if (!seed && !lua_isnoneornil(L, 2))
    return luaL_error(L, "backward: gradient must be a Tensor, got %s", luaL_typename(L, 2));
  static const char *const known[] = {"retain_graph", NULL};
  ltL_checkopts(L, opts, "backward", known);
  bool retain = ltL_optbool_field(L, opts, "retain_graph", false);
  void *old = ctx->host;
  ctx->host = L;
  int rc = lt_backward(ctx, 1, &t, &seed, retain, 0, NULL, NULL, false);
  ctx->host = old;
  if (rc) return ltL_raise(L, ctx);
  return 0;
}

/* lt.autograd.grad(outputs, inputs, {grad_outputs=, retain_graph=, allow_unused=}) */
static int l_grad(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  int no, ni, ng = 0;
  lt_tensor **outs = check_list(L, 1, &no, false);
  lt_tensor **ins = check_list(L, 2, &ni, false);
  lt_tensor **seeds = NULL;
  if (lua_istable(L, 3)) {
    static const char *const known[] = {"grad_outputs", "retain_graph", "allow_unused", NULL};
    ltL_checkopts(L, 3, "grad", known);
    if (lua_getfield(L, 3, "grad_outputs") != LUA_TNIL) {
      seeds = check_list(L, lua_gettop(L), &ng, true);
      if (ng != no)
        return luaL_error(L, "grad: grad_outputs has %d entries but outputs has %d", ng, no);
    }
  }
  bool retain = ltL_optbool_field(L, 3, "retain_graph", false);
  bool allow_unused = ltL_optbool_field(L, 3, "allow_unused", false);
  lt_tensor **res = lua_newuserdatauv(L, (size_t)(ni ? ni : 1) * sizeof *res, 0);
  void *old = ctx->host;
  ctx->host = L;
  int rc = lt_backward(ctx, no, outs, seeds, retain, ni, ins, res, allow_unused);
  ctx->host = old;
  if (rc) return ltL_raise(L, ctx);
  lua_createtable(L, ni, 0);
  for (int i = 0; i < ni; i++) {
    if (res[i]) {
      lt_tensor *r;
      /* hand out a tensor the caller owns alone */
      if (res[i]->refcount > 1 || res[i]->grad_fn) {
        int e = lt_detach(ctx, &r, res[i]);
        lt_release(res[i]);
        if (e) return ltL_raise(L, ctx);
      } else {
        r = res[i];
      }
      ltL_push(L, r);
    } else {
      lua_pushboolean(L, 0);   /* placeholder for an unused input (false, not a hole) */
    }
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  lua_pushboolean(L, lt_set_grad_enabled(LTL_CTX(L), lua_toboolean(L, 1)));
  return 1;
}

static int l_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, lt_is_grad_enabled(LTL_CTX(L)));
  return 1;
}

/* ------------------------------------------------------------ Lua callbacks */

typedef struct {
  lua_State *main;   /* for luaL_unref at release time */
  int ref;
} lua_ref;

static void unref(void *ud) {
  lua_ref *r = ud;
  luaL_unref(r->main, LUA_REGISTRYINDEX, r->ref);
  free(r);
}

/* The registry reference is taken first: if it raises (out of memory), nothing is leaked. */
static lua_ref *make_ref(lua_State *L, int idx) {
  lua_pushvalue(L, idx);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_ref *r = malloc(sizeof *r);
  if (!r) {
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    luaL_error(L, "out of memory");
  }
  r->ref = ref;
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  r->main = lua_tothread(L, -1);
  lua_pop(L, 1);
  return r;
}

/* Callbacks run inside the C engine, which a Lua error must never unwind through: the tensors
** are pushed (which allocates, so may raise) inside the protected call, by this trampoline. */
typedef struct {
  int ref;                    /* registry slot of the Lua function */
  int n;
  lt_tensor *const *args;     /* NULL entries are passed as nil */
} lua_callback;

static int callback_body(lua_State *L) {
  const lua_callback *c = lua_touserdata(L, 1);
  luaL_checkstack(L, c->n + 1, "too many gradients");
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->ref);
  for (int i = 0; i < c->n; i++) {
    if (c->args[i])
      lantern_push_tensor(L, c->args[i]);
    else
      lua_pushnil(L);
  }
  lua_call(L, c->n, 1);
  return 1;
}

/* Calls the function with the tensors; leaves its one result on the stack, or fails ctx with
** "<who>: <message>" and leaves the stack as it was. */
static int run_callback(lt_ctx *ctx, lua_State *L, const lua_callback *c, const char *who) {
  if (!lua_checkstack(L, 3)) return ltB_fail(ctx, "%s: Lua stack overflow", who);
  lua_pushcfunction(L, callback_body);
  lua_pushlightuserdata(L, (void *)c);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    ltB_fail(ctx, "%s: %s", who, msg ? msg : "error object is not a string");
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

static int hook_call(lt_ctx *ctx, void *ud, lt_tensor *grad, lt_tensor **replace) {
  lua_State *L = ctx->host;
  lua_ref *r = ud;
  if (!L) return ltB_fail(ctx, "register_hook: hook ran outside a Lua backward call");
  lua_callback c = {r->ref, 1, &grad};
  if (run_callback(ctx, L, &c, "hook")) return -1;
  lt_tensor *rep = ltL_test(L, -1);
  if (rep) {
    if (!ltB_same_shape(rep, grad)) {
      char a[256], b[256];
      lua_pop(L, 1);
      return ltB_fail(ctx, "hook: returned a gradient of shape %s, expected %s",
                      LT_SHAPE(rep, a), LT_SHAPE(grad, b));
    }
    *replace = lt_retain(rep);
  } else if (!lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return ltB_fail(ctx, "hook: must return nil or a Tensor");
  }
  lua_pop(L, 1);
  return 0;
}

static int l_register_hook(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_ref *r = make_ref(L, 2);
  if (ltG_add_hook(ctx, t, hook_call, r, unref)) {
    unref(r);
    return ltL_raise(L, ctx);
  }
  return 0;
}

/* A Lua autograd.Function: backward calls `bw(ctxobj, grad1, grad2, ...)` and expects one
** gradient (or nil) per input. The node type is per node, so grad_fn names the class. */
typedef struct {
  ltG_node_type type;
  char name[64];
  lua_ref *fn;      /* the Lua backward wrapper */
  int n_in;
} fn_extra;

static int fn_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  fn_extra *e = self->extra;
  lua_State *L = ctx->host;
  if (!L) return ltB_fail(ctx, "%s: backward ran outside a Lua backward call", e->name);
  if (self->released)
    return ltB_fail(ctx, "%s: Trying to backward through the graph a second time; specify "
                    "retain_graph=true", e->name);
  lua_callback c = {e->fn->ref, self->n_out, go};
  if (run_callback(ctx, L, &c, e->name)) return -1;
  /* the wrapper returns a table of n_in gradients (false/nil for none) */
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return ltB_fail(ctx, "%s: backward must return gradients", e->name);
  }
  for (int i = 0; i < e->n_in; i++) {
    lua_geti(L, -1, i + 1);
    lt_tensor *g = ltL_test(L, -1);
    if (g && ltG_needs_input_grad(self, i)) gi[i] = lt_retain(g);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return 0;
}

static void fn_release(lt_node *self) {
  fn_extra *e = self->extra;
  if (e->fn) unref(e->fn);
  e->fn = NULL;
}

/* core._function_record(name, backward_wrapper, inputs, outputs): connects outputs to the
** inputs through a node that calls the wrapper. Returns whether a node was recorded. */
static int l_function_record(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int ni, no;
  lt_tensor **ins = check_list(L, 3, &ni, true);
  lt_tensor **outs = check_list(L, 4, &no, false);
  if (no == 0) return luaL_error(L, "%s: forward must return at least one Tensor", name);
  static const ltG_node_type tmpl = {"FunctionBackward", fn_backward, fn_release};
  lua_ref *fn = make_ref(L, 2);   /* before the node exists: a node never lacks its function */
  lt_node *n;
  if (ltG_record(ctx, &tmpl, ni, ins, no, outs, sizeof(fn_extra), 0, &n)) {
    unref(fn);
    return ltL_raise(L, ctx);
  }
  if (!n) {
    unref(fn);
    lua_pushboolean(L, 0);
    return 1;
  }
  fn_extra *e = n->extra;
  e->type = tmpl;
  snprintf(e->name, sizeof e->name, "%sBackward", name);
  e->type.name = e->name;
  e->n_in = ni;
  e->fn = fn;
  n->type = &e->type;
  lua_pushboolean(L, 1);
  return 1;
}

static const ltL_Reg autograd_regs[] = {
    {"backward", l_backward, LTL_METHOD},
    {"register_hook", l_register_hook, LTL_METHOD},
    {"_grad", l_grad, LTL_FN},
    {"set_grad_enabled", l_set_grad_enabled, LTL_FN},
    {"is_grad_enabled", l_is_grad_enabled, LTL_FN},
    {"_function_record", l_function_record, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_autograd(lua_State *L) { ltL_register(L, autograd_regs); }
