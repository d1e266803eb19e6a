/*
** l_device.c -- devices from Lua: names as strings, as dtypes are ("cpu", "cuda:0"), lt.device,
** t:cpu(), and the kernel-table listing the per-device op suite checks.
*/
#include <string.h>

#include "lbind.h"

int ltL_cuda(lua_State *L);   /* l_cuda.c: lt._cuda, behind lt.cuda */

void ltL_checkdevice(lua_State *L, int idx, const char *op, lt_devtype *type, int *index) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *name = luaL_checkstring(L, idx);
  if (lt_device_parse(ctx, op, name, type, index)) ltL_raise(L, ctx);
}

int ltL_move(lua_State *L, int idx, const char *op, lt_devtype type, int index) {
  lt_ctx *ctx = LTL_CTX(L);
  idx = lua_absindex(L, idx);
  lt_tensor *t = ltL_check(L, idx), *r;
  if (lt_device_check(ctx, op, type, index) || lt_to_device(ctx, &r, t, type, index))
    return ltL_raise(L, ctx);
  if (r == t) {
    lt_release(r);
    lua_pushvalue(L, idx);
  } else {
    ltL_push(L, r);
  }
  return 1;
}

lt_tensor *ltL_host(lua_State *L, lt_tensor *t) {
  if (t->storage->device == LT_CPU) return lt_retain(t);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *h;
  bool grad = lt_set_grad_enabled(ctx, false);
  int rc = lt_to_device(ctx, &h, t, LT_CPU, 0);
  lt_set_grad_enabled(ctx, grad);
  if (rc) ltL_raise(L, ctx);
  return h;
}

/* lt.device(name): the device's canonical name ("cpu:0" is "cpu"); an unknown name raises. It
** need not be available: lt.device("cuda") works on a machine without a GPU, as in PyTorch. */
static int l_device(lua_State *L) {
  lt_devtype type;
  int index;
  ltL_checkdevice(L, 1, "device", &type, &index);
  char name[32];
  ltD_device_name(type, index, name, sizeof name);
  if (!strchr(lua_tostring(L, 1), ':')) name[strcspn(name, ":")] = '\0';   /* "cuda" stays */
  lua_pushstring(L, name);
  return 1;
}

/* lt.set_default_device(name): where creation functions (zeros, randn, tensor, ...) put
** tensors from now on in this state, as torch.set_default_device; "cpu" by default. */
static int l_set_default_device(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_devtype type;
  int index;
  ltL_checkdevice(L, 1, "set_default_device", &type, &index);
  if (lt_device_check(ctx, "set_default_device", type, index)) return ltL_raise(L, ctx);
  ctx->default_device = type;
  ctx->default_index = index;
  return 0;
}

static int l_get_default_device(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  char name[32];
  lua_pushstring(L, ltD_device_name(ctx->default_device, ctx->default_index, name, sizeof name));
  return 1;
}

static int t_cpu(lua_State *L) {
  LTL_NOMORE(L, 1);
  return ltL_move(L, 1, "cpu", LT_CPU, 0);
}

/* lt._kernel_names(device = "cpu"): the entries of a device's kernel table that it fills, in
** the table's order, and every entry a table has, for the per-device op suite
** (spec/device_ops_spec.lua). */
static int l_kernel_names(lua_State *L) {
  lt_devtype type = LT_CPU;
  int index = 0;
  if (!lua_isnoneornil(L, 1)) ltL_checkdevice(L, 1, "_kernel_names", &type, &index);
  const ltK_backend *b = ltD_backend_of(type);
  if (!b)
    return luaL_error(L, "_kernel_names: device '%s' has no kernel table", lua_tostring(L, 1));
  lua_newtable(L);
  int n = 0;
  for (int i = 0; ltC_backend_entries[i]; i++) {
    /* the entries follow the name as pointers of one size (cpu/backend.c asserts it) */
    void (*fn)(void);
    memcpy(&fn, (const char *)b + sizeof(const char *) + (size_t)i * sizeof fn, sizeof fn);
    if (!fn) continue;
    lua_pushstring(L, ltC_backend_entries[i]);
    lua_rawseti(L, -2, ++n);
  }
  lua_newtable(L);
  for (int i = 0; ltC_backend_entries[i]; i++) {
    lua_pushstring(L, ltC_backend_entries[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 2;
}

static const ltL_Reg device_regs[] = {
    {"device", l_device, LTL_FN},
    {"set_default_device", l_set_default_device, LTL_FN},
    {"get_default_device", l_get_default_device, LTL_FN},
    {"cpu", t_cpu, LTL_METHOD},
    {"_kernel_names", l_kernel_names, LTL_FN},
    {"_cuda", ltL_cuda, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_device(lua_State *L) { ltL_register(L, device_regs); }
