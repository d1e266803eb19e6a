/*
** l_linalg.c -- the matrix product family: matmul, mm, bmm, mv, dot, outer, addmm.
** Each is both lt.name(a, b) and a:name(b).
*/
#include "lbind.h"

typedef int (*binop_fn)(lt_ctx *, lt_tensor **, lt_tensor *, lt_tensor *);

static int product(lua_State *L, binop_fn fn) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *b = ltL_check(L, 2), *r;
  LTL_TRY(L, ctx, fn(ctx, &r, a, b));
  ltL_push(L, r);
  return 1;
}

static int l_matmul(lua_State *L) { return product(L, lt_matmul); }
static int l_mm(lua_State *L) { return product(L, lt_mm); }
static int l_bmm(lua_State *L) { return product(L, lt_bmm); }
static int l_mv(lua_State *L) { return product(L, lt_mv); }
static int l_dot(lua_State *L) { return product(L, lt_dot); }
static int l_outer(lua_State *L) { return product(L, lt_outer); }

/* addmm(input, mat1, mat2, {beta=1, alpha=1}) = beta * input + alpha * mat1 @ mat2 */
static int l_addmm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *in = ltL_check(L, 1), *a = ltL_check(L, 2), *b = ltL_check(L, 3), *r;
  if (!lua_isnoneornil(L, 4) && !lua_istable(L, 4))
    return luaL_error(L, "addmm: bad argument #4 (options table {beta=, alpha=} expected, "
                      "got %s)", luaL_typename(L, 4));
  static const char *const known[] = {"beta", "alpha", NULL};
  ltL_checkopts(L, 4, "addmm", known);
  double beta = ltL_optnum_field(L, 4, "beta", 1.0);
  double alpha = ltL_optnum_field(L, 4, "alpha", 1.0);
  LTL_TRY(L, ctx, lt_addmm(ctx, &r, in, a, b, beta, alpha));
  ltL_push(L, r);
  return 1;
}

void ltL_open_linalg(lua_State *L) {
  static const ltL_Reg regs[] = {
      {"matmul", l_matmul, LTL_FN | LTL_METHOD},
      {"mm", l_mm, LTL_FN | LTL_METHOD},
      {"bmm", l_bmm, LTL_FN | LTL_METHOD},
      {"mv", l_mv, LTL_FN | LTL_METHOD},
      {"dot", l_dot, LTL_FN | LTL_METHOD},
      {"outer", l_outer, LTL_FN | LTL_METHOD},
      {"ger", l_outer, LTL_FN | LTL_METHOD},
      {"addmm", l_addmm, LTL_FN | LTL_METHOD},
      {NULL, NULL, 0},
  };
  ltL_register(L, regs);
}
