/*
** l_optim.c -- bindings of the fused optimiser updates used by lua/lantern/optim.
** core._sgd_step(p, g, buf|nil, opts)   opts: lr momentum dampening weight_decay nesterov
**                                            maximize first
** core._adam_step(p, g, m, v, vmax|nil, opts)   opts: lr beta1 beta2 eps weight_decay amsgrad
**                                                   maximize decoupled step
** core._rmsprop_step(p, g, sq, gavg|nil, buf|nil, opts)
** core._adagrad_step(p, g, sum, opts)
*/
#include "lbind.h"
#include "../optim.h"

static lt_tensor *opt_tensor(lua_State *L, int idx) {
  return lua_isnoneornil(L, idx) ? NULL : ltL_check(L, idx);
}

#define NUM(o, name) ltL_optnum_field(L, (o), name, 0)
#define FLAG(o, name) ltL_optbool_field(L, (o), name, false)

static int l_sgd_step(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *p = ltL_check(L, 1), *g = ltL_check(L, 2), *buf = opt_tensor(L, 3);
  luaL_checktype(L, 4, LUA_TTABLE);
  static const char *const known[] = {"lr", "momentum", "dampening", "weight_decay",
                                      "nesterov", "maximize", "first", NULL};
  ltL_checkopts(L, 4, "_sgd_step", known);
  lt_sgd_opts o = {NUM(4, "lr"), NUM(4, "momentum"), NUM(4, "dampening"),
                   NUM(4, "weight_decay"), FLAG(4, "nesterov"), FLAG(4, "maximize"),
                   FLAG(4, "first")};
  LTL_TRY(L, ctx, lt_sgd_step(ctx, p, g, buf, &o));
  return 0;
}

static int l_adam_step(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *p = ltL_check(L, 1), *g = ltL_check(L, 2), *m = ltL_check(L, 3);
  lt_tensor *v = ltL_check(L, 4), *vmax = opt_tensor(L, 5);
  luaL_checktype(L, 6, LUA_TTABLE);
  static const char *const known[] = {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad",
                                      "maximize", "decoupled", "step", NULL};
  ltL_checkopts(L, 6, "_adam_step", known);
  lt_adam_opts o = {NUM(6, "lr"), NUM(6, "beta1"), NUM(6, "beta2"), NUM(6, "eps"),
                    NUM(6, "weight_decay"), FLAG(6, "amsgrad"), FLAG(6, "maximize"),
                    FLAG(6, "decoupled"), NUM(6, "step")};
  LTL_TRY(L, ctx, lt_adam_step(ctx, p, g, m, v, vmax, &o));
  return 0;
}

static int l_rmsprop_step(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *p = ltL_check(L, 1), *g = ltL_check(L, 2), *sq = ltL_check(L, 3);
  lt_tensor *gavg = opt_tensor(L, 4), *buf = opt_tensor(L, 5);
  luaL_checktype(L, 6, LUA_TTABLE);
  static const char *const known[] = {"lr", "alpha", "eps", "weight_decay", "momentum",
                                      "centered", "maximize", NULL};
  ltL_checkopts(L, 6, "_rmsprop_step", known);
  lt_rmsprop_opts o = {NUM(6, "lr"), NUM(6, "alpha"), NUM(6, "eps"), NUM(6, "weight_decay"),
                       NUM(6, "momentum"), FLAG(6, "centered"), FLAG(6, "maximize")};
  LTL_TRY(L, ctx, lt_rmsprop_step(ctx, p, g, sq, gavg, buf, &o));
  return 0;
}

static int l_adagrad_step(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *p = ltL_check(L, 1), *g = ltL_check(L, 2), *sum = ltL_check(L, 3);
  luaL_checktype(L, 4, LUA_TTABLE);
  static const char *const known[] = {"lr", "lr_decay", "weight_decay", "eps", "maximize",
                                      "step", NULL};
  ltL_checkopts(L, 4, "_adagrad_step", known);
  lt_adagrad_opts o = {NUM(4, "lr"), NUM(4, "lr_decay"), NUM(4, "weight_decay"), NUM(4, "eps"),
                       FLAG(4, "maximize"), NUM(4, "step")};
  LTL_TRY(L, ctx, lt_adagrad_step(ctx, p, g, sum, &o));
  return 0;
}

static const ltL_Reg optim_regs[] = {
    {"_sgd_step", l_sgd_step, LTL_FN},
    {"_adam_step", l_adam_step, LTL_FN},
    {"_rmsprop_step", l_rmsprop_step, LTL_FN},
    {"_adagrad_step", l_adagrad_step, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_optim(lua_State *L) { ltL_register(L, optim_regs); }
