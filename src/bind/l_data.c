/*
** l_data.c -- binding of the dataset file readers used by lua/lantern/data.
** core._read_idx(path, dtype) -> tensor
*/
#include "lbind.h"
#include "../idx.h"

static int l_read_idx(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *path = luaL_checkstring(L, 1);
  lt_dtype dt = ltL_optdtype(L, 2, LT_FLOAT32);
  lt_tensor *t;
  LTL_TRY(L, ctx, ltS_read_idx(ctx, &t, path, dt));
  ltL_push(L, t);
  return 1;
}

static const ltL_Reg data_regs[] = {
    {"_read_idx", l_read_idx, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_data(lua_State *L) { ltL_register(L, data_regs); }
