/*
** l_elementwise.c -- Lua binding of the elementwise family: arithmetic (also as the operators
** + - * / // % ^ and unary -), comparisons, logical ops, math functions, activations, clamp,
** where, isclose/allclose/equal, and the in-place forms (trailing underscore).
**
** Every binary op takes a tensor or a number (a boolean for logical ops) on either side:
** lt.sub(2, x), x:sub(2) and 2 - x all work. Numbers never allocate a tensor: they go to the
** core as scalars and follow PyTorch's promotion (a number never widens a float tensor).
*/
#include <math.h>

#include "lbind.h"
#include "../elementwise.h"

/* ============================================================ operands */

/* A zero-dim tensor made from the boolean at idx, anchored on the Lua stack (pushed) so that
** a later error cannot leak it. */
static lt_tensor *bool_operand(lua_State *L, lt_ctx *ctx, int idx) {
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_full(ctx, &t, LT_BOOL, 0, NULL, lua_toboolean(L, idx) ? 1.0 : 0.0));
  ltL_push(L, t);
  return t;
}

/* Integers beyond 2^53 do not survive the trip through a double: they become an exact
** zero-dim int64 tensor instead (anchored on the stack). */
#define EXACT_LIMIT 9007199254740992LL
static bool big_integer(lua_State *L, int idx) {
  if (!lua_isinteger(L, idx)) return false;
  lua_Integer v = lua_tointeger(L, idx);
  return v > EXACT_LIMIT || v < -EXACT_LIMIT;
}

static lt_tensor *int_operand(lua_State *L, lt_ctx *ctx, int idx) {
  lt_tensor *t;
  lua_Integer v = lua_tointeger(L, idx);
  LTL_TRY(L, ctx, lt_empty(ctx, &t, LT_INT64, 0, NULL));
  *(int64_t *)lt_data(t) = (int64_t)v;
  ltL_push(L, t);
  return t;
}

static int bad_operands(lua_State *L, const char *name) {
  return luaL_error(L, "%s: expected a tensor and a tensor or number, got %s and %s", name,
                    luaL_typename(L, 1), luaL_typename(L, 2));
}

/* r = (arg 1) op (arg 2), either of which may be a number (or boolean). */
static lt_tensor *binary_args(lua_State *L, lt_ctx *ctx, enum lt_binop op, const char *name) {
  lt_tensor *a = ltL_test(L, 1), *b = ltL_test(L, 2), *r = NULL;
  if (a && b) {
    LTL_TRY(L, ctx, lt_binary(ctx, &r, op, a, b));
  } else if (a && big_integer(L, 2)) {
    lt_tensor *t = int_operand(L, ctx, 2);
    LTL_TRY(L, ctx, lt_binary(ctx, &r, op, a, t));
  } else if (b && big_integer(L, 1)) {
    lt_tensor *t = int_operand(L, ctx, 1);
    LTL_TRY(L, ctx, lt_binary(ctx, &r, op, t, b));
  } else if (a && lua_type(L, 2) == LUA_TNUMBER) {
    LTL_TRY(L, ctx, lt_binary_scalar(ctx, &r, op, a, lua_tonumber(L, 2), lua_isinteger(L, 2),
                                     false));
  } else if (b && lua_type(L, 1) == LUA_TNUMBER) {
    LTL_TRY(L, ctx, lt_binary_scalar(ctx, &r, op, b, lua_tonumber(L, 1), lua_isinteger(L, 1),
                                     true));
  } else if (a && lua_isboolean(L, 2)) {
    lt_tensor *t = bool_operand(L, ctx, 2);
    LTL_TRY(L, ctx, lt_binary(ctx, &r, op, a, t));
  } else if (b && lua_isboolean(L, 1)) {
    lt_tensor *t = bool_operand(L, ctx, 1);
    LTL_TRY(L, ctx, lt_binary(ctx, &r, op, t, b));
  } else {
    bad_operands(L, name);
  }
  return r;
}

static int binop(lua_State *L, enum lt_binop op, const char *name) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *r = binary_args(L, ctx, op, name);
  ltL_push_ctx(L, ctx, r);
  return 1;
}

/* a op= b; returns a */
static int binop_(lua_State *L, enum lt_binop op, const char *name) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_test(L, 1), *b = ltL_test(L, 2);
  if (!a) return luaL_error(L, "%s: bad argument #1 (Tensor expected, got %s)", name,
                            luaL_typename(L, 1));
  if (b) {
    LTL_TRY(L, ctx, lt_binary_(ctx, op, a, b));
  } else if (big_integer(L, 2)) {
    lt_tensor *t = int_operand(L, ctx, 2);
    LTL_TRY(L, ctx, lt_binary_(ctx, op, a, t));
  } else if (lua_type(L, 2) == LUA_TNUMBER) {
    LTL_TRY(L, ctx, lt_binary_scalar_(ctx, op, a, lua_tonumber(L, 2)));
  } else if (lua_isboolean(L, 2)) {
    lt_tensor *t = bool_operand(L, ctx, 2);
    LTL_TRY(L, ctx, lt_binary_(ctx, op, a, t));
  } else {
    return bad_operands(L, name);
  }
  lua_settop(L, 1);
  return 1;
}

/* ============================================================ add/sub with alpha */

/* Reads alpha from the options table (or number) at idx; 1 when absent. */
static double opt_alpha(lua_State *L, int idx, const char *name) {
  static const char *const known[] = {"alpha", NULL};
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_tonumber(L, idx);
  if (lua_istable(L, idx) && !ltL_test(L, idx)) {
    ltL_checkopts(L, idx, name, known);
    return ltL_optnum_field(L, idx, "alpha", 1.0);
  }
  if (!lua_isnoneornil(L, idx))
    luaL_error(L, "%s: bad argument #%d (options table or number expected, got %s)", name, idx,
               luaL_typename(L, idx));
  return 1.0;
}

/* Replaces argument 2 by alpha * (argument 2). */
static void apply_alpha(lua_State *L, lt_ctx *ctx, double alpha, const char *name) {
  if (alpha == 1.0) return;
  bool alpha_int = alpha == floor(alpha) && fabs(alpha) < 9e15;
  lt_tensor *b = ltL_test(L, 2);
  if (b) {
    lt_tensor *r;
    LTL_TRY(L, ctx, lt_binary_scalar(ctx, &r, LT_MUL, b, alpha, alpha_int, false));
    ltL_push(L, r);
  } else if (lua_type(L, 2) == LUA_TNUMBER) {
    if (lua_isinteger(L, 2) && alpha_int)
      lua_pushinteger(L, lua_tointeger(L, 2) * (lua_Integer)alpha);
    else
      lua_pushnumber(L, lua_tonumber(L, 2) * alpha);
  } else {
    bad_operands(L, name);
  }
  lua_replace(L, 2);
}

static int e_add(lua_State *L) {
  LTL_NOMORE(L, 3);
  if (lua_gettop(L) >= 3) {
    double alpha = opt_alpha(L, 3, "add");
    lua_settop(L, 2);
    apply_alpha(L, LTL_CTX(L), alpha, "add");
  }
  return binop(L, LT_ADD, "add");
}

static int e_sub(lua_State *L) {
  LTL_NOMORE(L, 3);
  if (lua_gettop(L) >= 3) {
    double alpha = opt_alpha(L, 3, "sub");
    lua_settop(L, 2);
    apply_alpha(L, LTL_CTX(L), alpha, "sub");
  }
  return binop(L, LT_SUB, "sub");
}

static int e_add_(lua_State *L) {
  LTL_NOMORE(L, 3);
  if (lua_gettop(L) >= 3) {
    double alpha = opt_alpha(L, 3, "add_");
    lua_settop(L, 2);
    apply_alpha(L, LTL_CTX(L), alpha, "add_");
  }
  return binop_(L, LT_ADD, "add_");
}

static int e_sub_(lua_State *L) {
  LTL_NOMORE(L, 3);
  if (lua_gettop(L) >= 3) {
    double alpha = opt_alpha(L, 3, "sub_");
    lua_settop(L, 2);
    apply_alpha(L, LTL_CTX(L), alpha, "sub_");
  }
  return binop_(L, LT_SUB, "sub_");
}

#define BINOP(fn, op, name)                                                           \
  static int fn(lua_State *L) { LTL_NOMORE(L, 2); return binop(L, op, name); }       \
  static int fn##_(lua_State *L) { LTL_NOMORE(L, 2); return binop_(L, op, name "_"); }

BINOP(e_mul, LT_MUL, "mul")
BINOP(e_floor_divide, LT_FLOOR_DIVIDE, "floor_divide")
BINOP(e_pow, LT_POW, "pow")
BINOP(e_eq, LT_EQ, "eq")
BINOP(e_ne, LT_NE, "ne")
BINOP(e_lt, LT_LT, "lt")
BINOP(e_le, LT_LE, "le")
BINOP(e_gt, LT_GT, "gt")
BINOP(e_ge, LT_GE, "ge")
BINOP(e_land, LT_LAND, "logical_and")
BINOP(e_lor, LT_LOR, "logical_or")
BINOP(e_lxor, LT_LXOR, "logical_xor")
BINOP(e_atan2, LT_ATAN2, "atan2")
BINOP(e_fmod, LT_FMOD, "fmod")
BINOP(e_remainder, LT_REMAINDER, "remainder")

/* div(a, b, {rounding_mode = nil | "trunc" | "floor"}): true division, or the quotient rounded
** toward zero or down (integer inputs then stay integer, as in PyTorch). */
static enum lt_binop div_op(lua_State *L, const char *name) {
  static const char *const known[] = {"rounding_mode", NULL};
  if (lua_gettop(L) < 3) return LT_DIV;
  enum lt_binop op = LT_DIV;
  if (!lua_isnil(L, 3)) {
    if (!lua_istable(L, 3) || ltL_test(L, 3))
      luaL_error(L, "%s: bad argument #3 (options table {rounding_mode=} expected, got %s)",
                 name, luaL_typename(L, 3));
    ltL_checkopts(L, 3, name, known);
    int t = lua_getfield(L, 3, "rounding_mode");
    if (t == LUA_TSTRING && strcmp(lua_tostring(L, -1), "trunc") == 0)
      op = LT_DIV_TRUNC;
    else if (t == LUA_TSTRING && strcmp(lua_tostring(L, -1), "floor") == 0)
      op = LT_DIV_FLOOR;
    else if (t != LUA_TNIL)
      luaL_error(L, "%s: expected rounding_mode to be one of nil, 'trunc' or 'floor', but got %s",
                 name, t == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -1))
                                        : luaL_typename(L, -1));
  }
  lua_settop(L, 2);
  return op;
}

/* true_divide takes no rounding_mode (PyTorch's neither) */
static enum lt_binop true_divide_check(lua_State *L, const char *name) {
  static const char *const none[] = {NULL};
  ltL_checkopts(L, 3, name, none);
  lua_settop(L, 2);
  return LT_DIV;
}

static int e_true_divide(lua_State *L) {
  return binop(L, true_divide_check(L, "true_divide"), "true_divide");
}
static int e_true_divide_(lua_State *L) {
  return binop_(L, true_divide_check(L, "true_divide_"), "true_divide_");
}
static int e_div(lua_State *L) { return binop(L, div_op(L, "div"), "div"); }
static int e_div_(lua_State *L) { return binop_(L, div_op(L, "div_"), "div_"); }
static int e_divide(lua_State *L) { return binop(L, div_op(L, "divide"), "divide"); }
static int e_divide_(lua_State *L) { return binop_(L, div_op(L, "divide_"), "divide_"); }

static int e_maximum(lua_State *L) { LTL_NOMORE(L, 2); return binop(L, LT_MAXIMUM, "maximum"); }
static int e_minimum(lua_State *L) { LTL_NOMORE(L, 2); return binop(L, LT_MINIMUM, "minimum"); }

/* ============================================================ metamethods (hot path) */

#define META(fn, op, name)                                          \
  static int fn(lua_State *L) {                                     \
    lt_ctx *ctx = LTL_CTX(L);                                       \
    ltL_push_ctx(L, ctx, binary_args(L, ctx, op, name));            \
    return 1;                                                       \
  }

META(m_add, LT_ADD, "__add")
META(m_sub, LT_SUB, "__sub")
META(m_mul, LT_MUL, "__mul")
META(m_div, LT_DIV, "__div")
META(m_pow, LT_POW, "__pow")
META(m_mod, LT_REMAINDER, "__mod")
META(m_idiv, LT_FLOOR_DIVIDE, "__idiv")

static int m_unm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *r;
  LTL_TRY(L, ctx, lt_unary(ctx, &r, LT_NEG, a, 0, 0));
  ltL_push(L, r);
  return 1;
}

/* ============================================================ unary */

static int unop(lua_State *L, enum lt_unop op, double p0, double p1) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *r;
  LTL_TRY(L, ctx, lt_unary(ctx, &r, op, a, p0, p1));
  ltL_push(L, r);
  return 1;
}

static int unop_(lua_State *L, enum lt_unop op, double p0, double p1) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1);
  LTL_RETURN_SELF(L, ctx, lt_unary_(ctx, op, a, p0, p1));
}

#define UNOP1(fn, op) \
  static int fn(lua_State *L) { LTL_NOMORE(L, 1); return unop(L, op, 0, 0); }

#define UNOP(fn, op)                                                              \
  static int fn(lua_State *L) { LTL_NOMORE(L, 1); return unop(L, op, 0, 0); }    \
  static int fn##_(lua_State *L) { LTL_NOMORE(L, 1); return unop_(L, op, 0, 0); }

UNOP(e_neg, LT_NEG)
UNOP(e_abs, LT_ABS)
UNOP(e_sign, LT_SIGN)
UNOP(e_exp, LT_EXP)
UNOP(e_log, LT_LOG)
UNOP(e_log1p, LT_LOG1P)
UNOP(e_sqrt, LT_SQRT)
UNOP(e_rsqrt, LT_RSQRT)
UNOP(e_sin, LT_SIN)
UNOP(e_cos, LT_COS)
UNOP(e_tanh, LT_TANH)
UNOP(e_sigmoid, LT_SIGMOID)
UNOP(e_relu, LT_RELU)
UNOP(e_silu, LT_SILU)
UNOP(e_lnot, LT_LNOT)
UNOP1(e_isnan, LT_ISNAN)
UNOP1(e_isfinite, LT_ISFINITE)
UNOP(e_reciprocal, LT_RECIPROCAL)
UNOP(e_square, LT_SQUARE)
UNOP(e_floor, LT_FLOOR)
UNOP(e_ceil, LT_CEIL)
UNOP(e_round, LT_ROUND)
UNOP(e_trunc, LT_TRUNC)
UNOP(e_expm1, LT_EXPM1)
UNOP(e_log2, LT_LOG2)
UNOP(e_erf, LT_ERF)
UNOP(e_tan, LT_TAN)
UNOP(e_asin, LT_ASIN)
UNOP(e_acos, LT_ACOS)
UNOP(e_atan, LT_ATAN)
UNOP(e_hardsigmoid, LT_HARDSIGMOID)
UNOP(e_hardswish, LT_HARDSWISH)

/* A numeric parameter given positionally at idx or as field `field` of an options table at
** idx, which may hold no other key. */
static double param(lua_State *L, int idx, const char *field, double def) {
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_tonumber(L, idx);
  if (lua_isnoneornil(L, idx)) return def;
  if (lua_istable(L, idx)) {
    const char *const known[] = {field, NULL};
    ltL_checkopts(L, idx, ltL_opname(L), known);
    return ltL_optnum_field(L, idx, field, def);
  }
  return luaL_error(L, "%s: bad argument #%d ('%s' must be a number, got %s)", ltL_opname(L),
                    idx, field, luaL_typename(L, idx));
}

/* gelu(x[, approximate]) with approximate 'none' | 'tanh', or {approximate=...} */
static enum lt_unop gelu_op(lua_State *L) {
  const char *approx = "none";
  if (lua_type(L, 2) == LUA_TSTRING) {
    approx = lua_tostring(L, 2);
  } else if (lua_istable(L, 2)) {
    static const char *const known[] = {"approximate", NULL};
    ltL_checkopts(L, 2, ltL_opname(L), known);
    lua_getfield(L, 2, "approximate");
    if (!lua_isnil(L, -1)) approx = luaL_checkstring(L, -1);
    lua_pop(L, 1);
  } else if (!lua_isnoneornil(L, 2)) {
    luaL_error(L, "gelu: approximate must be 'none' or 'tanh', got %s", luaL_typename(L, 2));
  }
  if (strcmp(approx, "none") == 0) return LT_GELU;
  if (strcmp(approx, "tanh") == 0) return LT_GELU_TANH;
  luaL_error(L, "gelu: approximate must be 'none' or 'tanh', got '%s'", approx);
  return LT_GELU;   /* not reached: luaL_error raises */
}

static int e_gelu(lua_State *L) { return unop(L, gelu_op(L), 0, 0); }
static int e_gelu_(lua_State *L) { return unop_(L, gelu_op(L), 0, 0); }

static int e_leaky_relu(lua_State *L) {
  return unop(L, LT_LEAKY_RELU, param(L, 2, "negative_slope", 0.01), 0);
}
static int e_leaky_relu_(lua_State *L) {
  return unop_(L, LT_LEAKY_RELU, param(L, 2, "negative_slope", 0.01), 0);
}
static int e_elu(lua_State *L) { return unop(L, LT_ELU, param(L, 2, "alpha", 1.0), 0); }
static int e_elu_(lua_State *L) { return unop_(L, LT_ELU, param(L, 2, "alpha", 1.0), 0); }

static void softplus_params(lua_State *L, double *beta, double *thr) {
  static const char *const known[] = {"beta", "threshold", NULL};
  if (lua_istable(L, 2)) {
    ltL_checkopts(L, 2, "softplus", known);
    *beta = ltL_optnum_field(L, 2, "beta", 1.0);
    *thr = ltL_optnum_field(L, 2, "threshold", 20.0);
  } else {
    *beta = param(L, 2, "beta", 1.0);
    *thr = param(L, 3, "threshold", 20.0);
  }
}
static int e_softplus(lua_State *L) {
  double beta, thr;
  softplus_params(L, &beta, &thr);
  return unop(L, LT_SOFTPLUS, beta, thr);
}

/* ============================================================ clamp */

/* clamp(x, min, max) with either bound nil, a number or a tensor; or clamp(x, {min=, max=}). */
static int clamp_impl(lua_State *L, bool inplace) {
  const char *name = inplace ? "clamp_" : "clamp";
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *x = ltL_check(L, 1);
  if (lua_istable(L, 2) && !ltL_test(L, 2)) {
    static const char *const known[] = {"min", "max", NULL};
    ltL_checkopts(L, 2, name, known);
    lua_settop(L, 2);
    lua_getfield(L, 2, "min");
    lua_getfield(L, 2, "max");
    lua_remove(L, 2);
  }
  lua_settop(L, 3);
  double lo = 0, hi = 0;
  bool has_lo = false, has_hi = false, tensor_bound = false;
  for (int k = 2; k <= 3; k++) {
    int t = lua_type(L, k);
    if (t == LUA_TNIL) continue;
    if (t == LUA_TNUMBER) {
      if (k == 2) has_lo = true, lo = lua_tonumber(L, k);
      else has_hi = true, hi = lua_tonumber(L, k);
    } else if (ltL_test(L, k)) {
      tensor_bound = true;
    } else {
      return luaL_error(L, "%s: %s must be a number, a tensor or nil, got %s", name,
                        k == 2 ? "min" : "max", luaL_typename(L, k));
    }
  }
  if (lua_isnil(L, 2) && lua_isnil(L, 3))
    return luaL_error(L, "%s: at least one of min and max must be given", name);
  if (!tensor_bound) {
    if (inplace) {
      LTL_TRY(L, ctx, lt_clamp_(ctx, x, has_lo ? &lo : NULL, has_hi ? &hi : NULL));
      lua_settop(L, 1);
      return 1;
    }
    lt_tensor *r;
    LTL_TRY(L, ctx, lt_clamp(ctx, &r, x, has_lo ? &lo : NULL, has_hi ? &hi : NULL));
    ltL_push(L, r);
    return 1;
  }
  /* tensor bounds: maximum with min, then minimum with max */
  lt_tensor *cur = x;
  for (int k = 2; k <= 3; k++) {
    if (lua_isnil(L, k)) continue;
    enum lt_binop op = k == 2 ? LT_MAXIMUM : LT_MINIMUM;
    lt_tensor *bt = ltL_test(L, k), *r;
    if (inplace) {
      if (bt) LTL_TRY(L, ctx, lt_binary_(ctx, op, x, bt));
      else LTL_TRY(L, ctx, lt_binary_scalar_(ctx, op, x, lua_tonumber(L, k)));
      continue;
    }
    if (bt)
      LTL_TRY(L, ctx, lt_binary(ctx, &r, op, cur, bt));
    else
      LTL_TRY(L, ctx, lt_binary_scalar(ctx, &r, op, cur, lua_tonumber(L, k),
                                       lua_isinteger(L, k), false));
    ltL_push(L, r);   /* anchors it; the last one pushed is the result */
    cur = r;
  }
  if (inplace) lua_settop(L, 1);
  return 1;
}

static int e_clamp(lua_State *L) { return clamp_impl(L, false); }
static int e_clamp_(lua_State *L) { return clamp_impl(L, true); }

/* ============================================================ where */

static int where3(lua_State *L, int ic, int ia, int ib) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *cond = ltL_check(L, ic), *owned_a, *owned_b, *r;
  lt_tensor *ta = ltL_test(L, ia), *tb = ltL_test(L, ib);
  lt_tensor *a = ltL_checkoperand(L, ia, tb, &owned_a);
  if (owned_a) ltL_push(L, owned_a);
  lt_tensor *b = ltL_checkoperand(L, ib, ta ? ta : a, &owned_b);
  if (owned_b) ltL_push(L, owned_b);
  LTL_TRY(L, ctx, lt_where(ctx, &r, cond, a, b));
  ltL_push(L, r);
  return 1;
}

/* lt.where(cond, a, b) */
static int e_where(lua_State *L) { return where3(L, 1, 2, 3); }
/* x:where(cond, y) == lt.where(cond, x, y), as Tensor.where in PyTorch */
static int e_where_method(lua_State *L) { return where3(L, 2, 1, 3); }

/* ============================================================ lerp, addcmul, addcdiv */

/* Each result is made of the binary ops in PyTorch's order of evaluation, so it has their
** gradients and rounds as PyTorch's element loops do (but for a fused multiply-add there). With
** nothing to record, the kernel table's addc entry runs those steps in one pass with the same
** bits (ltO_addc), where it applies. A trailing `_` form writes the result into self. */

/* The scalar `value` of addcmul/addcdiv at idx: a number or {value=}; 1 when absent. */
static double value_opt(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) return 1;
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_tonumber(L, idx);
  if (!lua_istable(L, idx) || ltL_test(L, idx))
    luaL_error(L, "%s: bad argument #%d (number or {value=} expected, got %s)", op, idx,
               luaL_typename(L, idx));
  static const char *const known[] = {"value", NULL};
  ltL_checkopts(L, idx, op, known);
  return ltL_optnum_field(L, idx, "value", 1);
}

/* Whether dst op= src gives what dst op src would: src broadcasts to dst's shape and the
** result's dtype is dst's. */
static bool fits_in_place(const lt_tensor *dst, const lt_tensor *src) {
  if (src->ndim > dst->ndim || lt_result_type(dst, src) != dst->dtype) return false;
  for (int i = 1; i <= src->ndim; i++) {
    int64_t ss = src->size[src->ndim - i], ds = dst->size[dst->ndim - i];
    if (ss != ds && ss != 1) return false;
  }
  return true;
}

/* self + (value * t1) op t2 (op: LT_MUL for addcmul, LT_DIV for addcdiv). With nothing to
** record (an optimiser's update under no_grad), the later steps write into the first step's
** fresh result, which is still in cache, rather than making more (1M floats: 0.89 -> 0.3 ms);
** x + y is y + x in floats, so the bits are the same. */
static int addc(lua_State *L, enum lt_binop op, const char *name, bool inplace) {
  LTL_NOMORE(L, 4);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *self = ltL_check(L, 1), *t1 = ltL_check(L, 2), *t2 = ltL_check(L, 3), *p, *r;
  double v = value_opt(L, 4, name);
  if (op == LT_DIV && !lt_dtype_is_float(t1->dtype) && !lt_dtype_is_float(t2->dtype))
    luaL_error(L, "%s: Integer division with addcdiv is no longer supported, and in a future "
               "release addcdiv will perform a true division of tensor1 and tensor2.", name);
  int done = ltO_addc(ctx, &r, op == LT_MUL ? LT_ADDC_MUL : LT_ADDC_DIV, self, t1, t2, v, inplace);
  if (done < 0) return ltL_raise(L, ctx);
  if (done) {
    if (inplace) lua_settop(L, 1);
    else ltL_push(L, r);
    return 1;
  }
  bool record = lt_is_grad_enabled(ctx) &&
                (self->requires_grad || t1->requires_grad || t2->requires_grad);
  if (v == 1) {
    LTL_TRY(L, ctx, lt_binary(ctx, &p, op, t1, t2));
    ltL_push(L, p);
  } else {
    lt_tensor *s;
    LTL_TRY(L, ctx, lt_binary_scalar(ctx, &s, LT_MUL, t1, v, false, true));
    ltL_push(L, s);
    if (!record && fits_in_place(s, t2)) {
      LTL_TRY(L, ctx, lt_binary_(ctx, op, s, t2));
      p = s;
    } else {
      LTL_TRY(L, ctx, lt_binary(ctx, &p, op, s, t2));
      ltL_push(L, p);
    }
  }
  if (inplace) LTL_RETURN_SELF(L, ctx, lt_binary_(ctx, LT_ADD, self, p));
  if (!record && fits_in_place(p, self)) {   /* p, on the stack top, is the result */
    LTL_TRY(L, ctx, lt_binary_(ctx, LT_ADD, p, self));
    return 1;
  }
  LTL_TRY(L, ctx, lt_binary(ctx, &r, LT_ADD, self, p));
  ltL_push(L, r);
  return 1;
}

static int e_addcmul(lua_State *L) { return addc(L, LT_MUL, "addcmul", false); }
static int e_addcmul_(lua_State *L) { return addc(L, LT_MUL, "addcmul_", true); }
static int e_addcdiv(lua_State *L) { return addc(L, LT_DIV, "addcdiv", false); }
static int e_addcdiv_(lua_State *L) { return addc(L, LT_DIV, "addcdiv_", true); }

/* lerp(start, end, weight): start + w (end - start) where |w| < 0.5, else
** end - (end - start) (1 - w), as PyTorch computes it, for a number or a tensor w. */
static int lerp_impl(lua_State *L, bool inplace) {
  lt_ctx *ctx = LTL_CTX(L);
  const char *name = inplace ? "lerp_" : "lerp";
  LTL_NOMORE(L, 3);
  lt_tensor *a = ltL_check(L, 1), *b = ltL_check(L, 2), *d, *lo = NULL, *hi = NULL, *r;
  lt_tensor *w = ltL_test(L, 3);
  if (!w && lua_type(L, 3) != LUA_TNUMBER)
    luaL_error(L, "%s: bad argument #3 (weight: number or Tensor expected, got %s)", name,
               luaL_typename(L, 3));
  if (!lt_dtype_is_float(a->dtype) || !lt_dtype_is_float(b->dtype))
    luaL_error(L, "%s: expected float tensors, got %s and %s (as PyTorch, which has no integer "
               "lerp)", name, lt_dtype_name(a->dtype), lt_dtype_name(b->dtype));
  int done = ltO_addc(ctx, &r, w ? LT_LERP_TENSOR : LT_LERP_SCALAR, a, b, w,
                      w ? 0 : lua_tonumber(L, 3), inplace);
  if (done < 0) return ltL_raise(L, ctx);
  if (done) {
    if (inplace) lua_settop(L, 1);
    else ltL_push(L, r);
    return 1;
  }
  LTL_TRY(L, ctx, lt_binary(ctx, &d, LT_SUB, b, a));
  ltL_push(L, d);
  bool record = lt_is_grad_enabled(ctx) && (a->requires_grad || b->requires_grad);
  if (!w && !record && fits_in_place(d, a) && fits_in_place(d, b)) {
    /* nothing to record: in d, still in cache (as addc); b - d (1 - w) is b + d (w - 1) */
    double wv = lua_tonumber(L, 3);
    bool near = fabs(wv) < 0.5;
    LTL_TRY(L, ctx, lt_binary_scalar_(ctx, LT_MUL, d, near ? wv : wv - 1));
    LTL_TRY(L, ctx, lt_binary_(ctx, LT_ADD, d, near ? a : b));
    r = d;
  } else if (!w) {
    double wv = lua_tonumber(L, 3);
    lt_tensor *t;
    if (fabs(wv) < 0.5) {
      LTL_TRY(L, ctx, lt_binary_scalar(ctx, &t, LT_MUL, d, wv, false, true));
      ltL_push(L, t);
      LTL_TRY(L, ctx, lt_binary(ctx, &r, LT_ADD, a, t));
    } else {
      LTL_TRY(L, ctx, lt_binary_scalar(ctx, &t, LT_MUL, d, 1 - wv, false, true));
      ltL_push(L, t);
      LTL_TRY(L, ctx, lt_binary(ctx, &r, LT_SUB, b, t));
    }
    ltL_push(L, r);
  } else {
    lt_tensor *t, *aw, *near, *omw;
    LTL_TRY(L, ctx, lt_binary(ctx, &t, LT_MUL, w, d));
    ltL_push(L, t);
    LTL_TRY(L, ctx, lt_binary(ctx, &lo, LT_ADD, a, t));
    ltL_push(L, lo);
    LTL_TRY(L, ctx, lt_binary_scalar(ctx, &omw, LT_SUB, w, 1, true, true));   /* 1 - w */
    ltL_push(L, omw);
    LTL_TRY(L, ctx, lt_binary(ctx, &t, LT_MUL, d, omw));
    ltL_push(L, t);
    LTL_TRY(L, ctx, lt_binary(ctx, &hi, LT_SUB, b, t));
    ltL_push(L, hi);
    LTL_TRY(L, ctx, lt_unary(ctx, &aw, LT_ABS, w, 0, 0));
    ltL_push(L, aw);
    LTL_TRY(L, ctx, lt_binary_scalar(ctx, &near, LT_LT, aw, 0.5, false, false));
    ltL_push(L, near);
    LTL_TRY(L, ctx, lt_where(ctx, &r, near, lo, hi));
    ltL_push(L, r);
  }
  if (inplace) {
    LTL_TRY(L, ctx, lt_copy_(ctx, a, r));
    lua_pushvalue(L, 1);
  }
  return 1;
}

static int e_lerp(lua_State *L) { return lerp_impl(L, false); }
static int e_lerp_(lua_State *L) { return lerp_impl(L, true); }

/* ============================================================ closeness */

static void close_params(lua_State *L, double *rtol, double *atol, bool *equal_nan) {
  *rtol = 1e-5;
  *atol = 1e-8;
  *equal_nan = false;
  if (lua_istable(L, 3) && !ltL_test(L, 3)) {
    static const char *const known[] = {"rtol", "atol", "equal_nan", NULL};
    ltL_checkopts(L, 3, ltL_opname(L), known);
    *rtol = ltL_optnum_field(L, 3, "rtol", *rtol);
    *atol = ltL_optnum_field(L, 3, "atol", *atol);
    *equal_nan = ltL_optbool_field(L, 3, "equal_nan", false);
    return;
  }
  if (!lua_isnoneornil(L, 3)) *rtol = luaL_checknumber(L, 3);
  if (!lua_isnoneornil(L, 4)) *atol = luaL_checknumber(L, 4);
  if (!lua_isnoneornil(L, 5)) *equal_nan = lua_toboolean(L, 5);
}

static void two_tensors(lua_State *L, lt_tensor **a, lt_tensor **b) {
  lt_tensor *owned;
  *a = ltL_check(L, 1);
  *b = ltL_checkoperand(L, 2, *a, &owned);
  if (owned) ltL_push(L, owned);
}

static int e_isclose(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  double rtol, atol;
  bool en;
  lt_tensor *a, *b, *r;
  close_params(L, &rtol, &atol, &en);
  two_tensors(L, &a, &b);
  LTL_TRY(L, ctx, lt_isclose(ctx, &r, a, b, rtol, atol, en));
  ltL_push(L, r);
  return 1;
}

static int e_allclose(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  double rtol, atol;
  bool en, res;
  lt_tensor *a, *b;
  close_params(L, &rtol, &atol, &en);
  two_tensors(L, &a, &b);
  LTL_TRY(L, ctx, lt_allclose(ctx, &res, a, b, rtol, atol, en));
  lua_pushboolean(L, res);
  return 1;
}

static int e_equal(lua_State *L) {
  LTL_NOMORE(L, 2);
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *a = ltL_check(L, 1), *b = ltL_check(L, 2);
  bool res;
  LTL_TRY(L, ctx, lt_equal(ctx, &res, a, b));
  lua_pushboolean(L, res);
  return 1;
}

/* ============================================================ registration */

#define BOTH (LTL_FN | LTL_METHOD)

static const ltL_Reg elementwise_regs[] = {
    {"add", e_add, BOTH},
    {"sub", e_sub, BOTH},
    {"subtract", e_sub, BOTH},
    {"mul", e_mul, BOTH},
    {"multiply", e_mul, BOTH},
    {"div", e_div, BOTH},
    {"divide", e_divide, BOTH},
    {"true_divide", e_true_divide, BOTH},
    {"floor_divide", e_floor_divide, BOTH},
    {"pow", e_pow, BOTH},
    {"maximum", e_maximum, BOTH},
    {"minimum", e_minimum, BOTH},
    {"eq", e_eq, BOTH},
    {"ne", e_ne, BOTH},
    {"not_equal", e_ne, BOTH},
    {"lt", e_lt, BOTH},
    {"less", e_lt, BOTH},
    {"le", e_le, BOTH},
    {"less_equal", e_le, BOTH},
    {"gt", e_gt, BOTH},
    {"greater", e_gt, BOTH},
    {"ge", e_ge, BOTH},
    {"greater_equal", e_ge, BOTH},
    {"logical_and", e_land, BOTH},
    {"logical_or", e_lor, BOTH},
    {"logical_xor", e_lxor, BOTH},
    {"atan2", e_atan2, BOTH},
    {"arctan2", e_atan2, BOTH},
    {"fmod", e_fmod, BOTH},
    {"remainder", e_remainder, BOTH},
    {"add_", e_add_, BOTH},
    {"sub_", e_sub_, BOTH},
    {"subtract_", e_sub_, BOTH},
    {"mul_", e_mul_, BOTH},
    {"multiply_", e_mul_, BOTH},
    {"div_", e_div_, BOTH},
    {"divide_", e_divide_, BOTH},
    {"true_divide_", e_true_divide_, BOTH},
    {"floor_divide_", e_floor_divide_, BOTH},
    {"pow_", e_pow_, BOTH},
    {"eq_", e_eq_, BOTH},
    {"ne_", e_ne_, BOTH},
    {"lt_", e_lt_, BOTH},
    {"le_", e_le_, BOTH},
    {"gt_", e_gt_, BOTH},
    {"ge_", e_ge_, BOTH},
    {"logical_and_", e_land_, BOTH},
    {"logical_or_", e_lor_, BOTH},
    {"logical_xor_", e_lxor_, BOTH},
    {"atan2_", e_atan2_, BOTH},
    {"fmod_", e_fmod_, BOTH},
    {"remainder_", e_remainder_, BOTH},
    {"neg", e_neg, BOTH},
    {"negative", e_neg, BOTH},
    {"abs", e_abs, BOTH},
    {"absolute", e_abs, BOTH},
    {"sign", e_sign, BOTH},
    {"exp", e_exp, BOTH},
    {"log", e_log, BOTH},
    {"log1p", e_log1p, BOTH},
    {"sqrt", e_sqrt, BOTH},
    {"rsqrt", e_rsqrt, BOTH},
    {"sin", e_sin, BOTH},
    {"cos", e_cos, BOTH},
    {"tanh", e_tanh, BOTH},
    {"sigmoid", e_sigmoid, BOTH},
    {"relu", e_relu, BOTH},
    {"gelu", e_gelu, BOTH},
    {"silu", e_silu, BOTH},
    {"logical_not", e_lnot, BOTH},
    {"isnan", e_isnan, BOTH},
    {"isfinite", e_isfinite, BOTH},
    {"reciprocal", e_reciprocal, BOTH},
    {"square", e_square, BOTH},
    {"floor", e_floor, BOTH},
    {"ceil", e_ceil, BOTH},
    {"round", e_round, BOTH},
    {"trunc", e_trunc, BOTH},
    {"fix", e_trunc, BOTH},
    {"expm1", e_expm1, BOTH},
    {"log2", e_log2, BOTH},
    {"erf", e_erf, BOTH},
    {"leaky_relu", e_leaky_relu, BOTH},
    {"elu", e_elu, BOTH},
    {"softplus", e_softplus, BOTH},
    {"tan", e_tan, BOTH},
    {"asin", e_asin, BOTH},
    {"arcsin", e_asin, BOTH},
    {"acos", e_acos, BOTH},
    {"arccos", e_acos, BOTH},
    {"atan", e_atan, BOTH},
    {"hardsigmoid", e_hardsigmoid, BOTH},
    {"hardswish", e_hardswish, BOTH},
    {"arctan", e_atan, BOTH},
    {"neg_", e_neg_, BOTH},
    {"negative_", e_neg_, BOTH},
    {"abs_", e_abs_, BOTH},
    {"sign_", e_sign_, BOTH},
    {"exp_", e_exp_, BOTH},
    {"log_", e_log_, BOTH},
    {"log1p_", e_log1p_, BOTH},
    {"sqrt_", e_sqrt_, BOTH},
    {"rsqrt_", e_rsqrt_, BOTH},
    {"sin_", e_sin_, BOTH},
    {"cos_", e_cos_, BOTH},
    {"tanh_", e_tanh_, BOTH},
    {"sigmoid_", e_sigmoid_, BOTH},
    {"relu_", e_relu_, BOTH},
    {"hardsigmoid_", e_hardsigmoid_, BOTH},
    {"hardswish_", e_hardswish_, BOTH},
    {"gelu_", e_gelu_, BOTH},
    {"silu_", e_silu_, BOTH},
    {"logical_not_", e_lnot_, BOTH},
    {"reciprocal_", e_reciprocal_, BOTH},
    {"square_", e_square_, BOTH},
    {"floor_", e_floor_, BOTH},
    {"ceil_", e_ceil_, BOTH},
    {"round_", e_round_, BOTH},
    {"trunc_", e_trunc_, BOTH},
    {"expm1_", e_expm1_, BOTH},
    {"log2_", e_log2_, BOTH},
    {"erf_", e_erf_, BOTH},
    {"leaky_relu_", e_leaky_relu_, BOTH},
    {"elu_", e_elu_, BOTH},
    {"tan_", e_tan_, BOTH},
    {"asin_", e_asin_, BOTH},
    {"acos_", e_acos_, BOTH},
    {"atan_", e_atan_, BOTH},
    {"clamp", e_clamp, BOTH},
    {"clip", e_clamp, BOTH},
    {"clamp_", e_clamp_, BOTH},
    {"clip_", e_clamp_, BOTH},
    {"addcmul", e_addcmul, BOTH},
    {"addcmul_", e_addcmul_, LTL_METHOD},
    {"addcdiv", e_addcdiv, BOTH},
    {"addcdiv_", e_addcdiv_, LTL_METHOD},
    {"lerp", e_lerp, BOTH},
    {"lerp_", e_lerp_, LTL_METHOD},
    {"where", e_where, LTL_FN},
    {"where", e_where_method, LTL_METHOD},
    {"isclose", e_isclose, BOTH},
    {"allclose", e_allclose, BOTH},
    {"equal", e_equal, BOTH},
    {NULL, NULL, 0},
};

void ltL_open_elementwise(lua_State *L) {
  ltL_register(L, elementwise_regs);
  /* each operator carries the name of the op it runs (upvalue 2, as ltL_register gives), which
  ** its messages use */
  static const struct { const char *key, *op; lua_CFunction fn; } meta[] = {
      {"__add", "add", m_add}, {"__sub", "sub", m_sub}, {"__mul", "mul", m_mul},
      {"__div", "div", m_div}, {"__pow", "pow", m_pow}, {"__mod", "remainder", m_mod},
      {"__idiv", "floor_divide", m_idiv}, {"__unm", "neg", m_unm},
  };
  luaL_getmetatable(L, LTL_TENSOR_MT);
  for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
    lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
    lua_pushstring(L, meta[i].op);
    lua_pushcclosure(L, meta[i].fn, 2);
    lua_setfield(L, -2, meta[i].key);
  }
  lua_pop(L, 1);
}
