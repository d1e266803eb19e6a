/*
** unary.c -- the unary op family (math functions, activations, rounding, logical_not, the
** tests isnan/isfinite) and clamp: dtype rules, forward, in-place forms and backward functions.
** A unary backward is one fused kernel call g * f'(x) (or of the saved output), chosen by op.
*/
#include <math.h>

#include "backend.h"
#include "elementwise.h"

static const char *const unop_names[] = {
    "neg", "abs", "sign", "exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "relu", "gelu", "silu", "logical_not", "isnan", "isfinite", "reciprocal",
    "square", "floor", "ceil", "round", "trunc", "expm1", "log2", "erf", "leaky_relu", "elu",
    "gelu", "softplus", "tan", "asin", "acos", "atan", "hardsigmoid", "hardswish"};
/* an op added to enum lt_unop without its name here fails the build */
_Static_assert(sizeof unop_names / sizeof *unop_names == LT_NUNOP, "unop_names: one per lt_unop");

enum unop_rule { U_SAME, U_FLOAT, U_FLOATONLY, U_BOOLOUT };   /* output dtype rule */
enum unop_save { S_NODIFF, S_IN, S_OUT, S_ZERO, S_NEG };      /* what backward needs */

typedef struct {
  enum unop_rule kind;
  enum unop_save save;
  bool bool_ok;      /* U_SAME: defined on bool tensors */
  bool pair;         /* recorded, it saves f'(a) from the backend's unary_pair, not a */
} unop_info;

static const unop_info uinfo[LT_NUNOP] = {
    [LT_NEG] = {U_SAME, S_NEG, false},         [LT_ABS] = {U_SAME, S_IN, false},
    [LT_SIGN] = {U_SAME, S_ZERO, true},        [LT_EXP] = {U_FLOAT, S_OUT, true},
    [LT_LOG] = {U_FLOAT, S_IN, true},          [LT_LOG1P] = {U_FLOAT, S_IN, true},
    [LT_SQRT] = {U_FLOAT, S_OUT, true},        [LT_RSQRT] = {U_FLOAT, S_OUT, true},
    [LT_SIN] = {U_FLOAT, S_IN, true},          [LT_COS] = {U_FLOAT, S_IN, true},
    [LT_TANH] = {U_FLOAT, S_OUT, true},        [LT_SIGMOID] = {U_FLOAT, S_OUT, true},
    [LT_RELU] = {U_SAME, S_OUT, false},        [LT_GELU] = {U_FLOATONLY, S_IN, false, true},
    [LT_SILU] = {U_FLOATONLY, S_IN, false},    [LT_LNOT] = {U_BOOLOUT, S_NODIFF, true},
    [LT_ISNAN] = {U_BOOLOUT, S_NODIFF, true},  [LT_ISFINITE] = {U_BOOLOUT, S_NODIFF, true},
    [LT_RECIPROCAL] = {U_FLOAT, S_OUT, true},  [LT_SQUARE] = {U_SAME, S_IN, true},
    [LT_FLOOR] = {U_SAME, S_ZERO, false},      [LT_CEIL] = {U_SAME, S_ZERO, false},
    [LT_ROUND] = {U_SAME, S_ZERO, false},      [LT_TRUNC] = {U_SAME, S_ZERO, false},
    [LT_EXPM1] = {U_FLOAT, S_OUT, true},       [LT_LOG2] = {U_FLOAT, S_IN, true},
    [LT_ERF] = {U_FLOAT, S_IN, true},          [LT_LEAKY_RELU] = {U_FLOATONLY, S_IN, false},
    [LT_ELU] = {U_FLOATONLY, S_IN, false},     [LT_GELU_TANH] = {U_FLOATONLY, S_IN, false},
    [LT_SOFTPLUS] = {U_FLOATONLY, S_IN, false}, [LT_TAN] = {U_FLOAT, S_OUT, true},
    [LT_ASIN] = {U_FLOAT, S_IN, true},         [LT_ACOS] = {U_FLOAT, S_IN, true},
    [LT_ATAN] = {U_FLOAT, S_IN, true},         [LT_HARDSIGMOID] = {U_FLOATONLY, S_IN, false},
    [LT_HARDSWISH] = {U_FLOATONLY, S_IN, false},
};

static int unary_out_dtype(lt_ctx *ctx, const char *name, enum lt_unop op, lt_dtype in,
                           lt_dtype *out) {
  *out = in;
  const unop_info *u = &uinfo[op];
  switch (u->kind) {
    case U_SAME:
      if (in == LT_BOOL && op == LT_SQUARE) {
        *out = LT_INT64;
        return 0;
      }
      if (in == LT_BOOL && !u->bool_ok) {
        if (op == LT_NEG)
          return ltB_fail(ctx, "%s: negation, the `-` operator, on a bool tensor is not "
                          "supported. If you are trying to invert a mask, use logical_not() "
                          "instead.", name);
        return ltB_fail(ctx, "%s: not implemented for bool tensors", name);
      }
      *out = in;
      return 0;
    case U_FLOAT:
      *out = lt_dtype_is_float(in) ? in : LT_FLOAT32;
      return 0;
    case U_FLOATONLY:
      if (!lt_dtype_is_float(in))
        return ltB_fail(ctx, "%s: not implemented for %s tensors (expected float32 or float64)",
                        name, lt_dtype_name(in));
      *out = in;
      return 0;
    default:
      *out = LT_BOOL;
      return 0;
  }
}

/* ============================================================ unary */

typedef struct {
  enum lt_unop op;
  double p0, p1;
  lt_dtype da;
  bool saved_deriv;   /* the saved tensor is f'(a) (a paired forward), not a */
} un_extra;

static int unary_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const un_extra *e = self->extra;
  lt_tensor *g = gout[0], *s;
  if (!g) return 0;
  switch (uinfo[e->op].save) {
    case S_NEG: {
      lt_tensor *t;
      if (lt_unary(ctx, &t, LT_NEG, g, 0, 0)) return -1;
      int rc = ltO_ew_as_dtype(ctx, &gin[0], t, e->da);
      lt_release(t);
      return rc;
    }
    case S_ZERO:
      return ltO_full_as(ctx, &gin[0], g, e->da, g->ndim, g->size, 0.0);
    default:
      if (ltG_saved_get(ctx, self, 0, &s)) return -1;
      if (e->saved_deriv)
        return ltO_ew_grad_binary(ctx, &gin[0], (enum ltK_ew_op)LT_MUL, g, s, e->da, 0, 0);
      return ltO_ew_grad_binary(ctx, &gin[0], (enum ltK_ew_op)(LT_EW_BW + e->op), g, s, e->da,
                                e->p0, e->p1);
  }
}

static const ltG_node_type un_types[LT_NUNOP] = {
    [LT_NEG] = {"NegBackward0", unary_backward, NULL},
    [LT_ABS] = {"AbsBackward0", unary_backward, NULL},
    [LT_SIGN] = {"SignBackward0", unary_backward, NULL},
    [LT_EXP] = {"ExpBackward0", unary_backward, NULL},
    [LT_LOG] = {"LogBackward0", unary_backward, NULL},
    [LT_LOG1P] = {"Log1PBackward0", unary_backward, NULL},
    [LT_SQRT] = {"SqrtBackward0", unary_backward, NULL},
    [LT_RSQRT] = {"RsqrtBackward0", unary_backward, NULL},
    [LT_SIN] = {"SinBackward0", unary_backward, NULL},
    [LT_COS] = {"CosBackward0", unary_backward, NULL},
    [LT_TANH] = {"TanhBackward0", unary_backward, NULL},
    [LT_SIGMOID] = {"SigmoidBackward0", unary_backward, NULL},
    [LT_RELU] = {"ReluBackward0", unary_backward, NULL},
    [LT_GELU] = {"GeluBackward0", unary_backward, NULL},
    [LT_SILU] = {"SiluBackward0", unary_backward, NULL},
    [LT_RECIPROCAL] = {"ReciprocalBackward0", unary_backward, NULL},
    [LT_SQUARE] = {"PowBackward0", unary_backward, NULL},
    [LT_FLOOR] = {"FloorBackward0", unary_backward, NULL},
    [LT_CEIL] = {"CeilBackward0", unary_backward, NULL},
    [LT_ROUND] = {"RoundBackward0", unary_backward, NULL},
    [LT_TRUNC] = {"TruncBackward0", unary_backward, NULL},
    [LT_EXPM1] = {"Expm1Backward0", unary_backward, NULL},
    [LT_LOG2] = {"Log2Backward0", unary_backward, NULL},
    [LT_ERF] = {"ErfBackward0", unary_backward, NULL},
    [LT_LEAKY_RELU] = {"LeakyReluBackward0", unary_backward, NULL},
    [LT_ELU] = {"EluBackward0", unary_backward, NULL},
    [LT_GELU_TANH] = {"GeluBackward0", unary_backward, NULL},
    [LT_SOFTPLUS] = {"SoftplusBackward0", unary_backward, NULL},
    [LT_TAN] = {"TanBackward0", unary_backward, NULL},
    [LT_ASIN] = {"AsinBackward0", unary_backward, NULL},
    [LT_ACOS] = {"AcosBackward0", unary_backward, NULL},
    [LT_ATAN] = {"AtanBackward0", unary_backward, NULL},
    [LT_HARDSIGMOID] = {"HardsigmoidBackward0", unary_backward, NULL},
    [LT_HARDSWISH] = {"HardswishBackward0", unary_backward, NULL},
};

/* Records out = op(a); save_in replaces a as the saved input (in-place ops), deriv (f'(a) from
** a paired forward) replaces it for the backward's g * f'. */
static int record_unary(lt_ctx *ctx, enum lt_unop op, lt_tensor *a, lt_tensor *out, double p0,
                        double p1, lt_tensor *save_in, lt_tensor *deriv) {
  lt_node *node;
  enum unop_save save = uinfo[op].save;
  int nsaved = (save == S_IN || save == S_OUT) ? 1 : 0;
  if (ltG_record(ctx, &un_types[op], 1, &a, 1, &out, sizeof(un_extra), nsaved, &node)) return -1;
  if (!node) return 0;
  un_extra *e = node->extra;
  e->op = op;
  e->p0 = p0;
  e->p1 = p1;
  e->da = a->dtype;
  e->saved_deriv = deriv != NULL;
  int rc = 0;
  if (deriv)
    rc = ltG_save(node, 0, deriv, false);
  else if (save == S_IN)
    rc = ltG_save(node, 0, save_in ? save_in : a, false);
  if (save == S_OUT) rc = ltG_save(node, 0, out, true);
  return rc ? ltB_fail(ctx, "%s: out of memory", unop_names[op]) : 0;
}

int lt_unary(lt_ctx *ctx, lt_tensor **out, enum lt_unop op, lt_tensor *a, double p0, double p1) {
  if (op < 0 || op >= LT_NUNOP) return ltB_fail(ctx, "unary: unknown op %d", op);
  if (!a) return ltB_fail(ctx, "%s: missing operand", unop_names[op]);
  lt_dtype odt;
  if (unary_out_dtype(ctx, unop_names[op], op, a->dtype, &odt)) return -1;
  lt_tensor *o, *d = NULL;
  bool rec = uinfo[op].save != S_NODIFF && ctx->grad_enabled && a->requires_grad;
  if (ltO_empty_as(ctx, &o, a, odt, a->ndim, a->size)) return -1;
  /* A recorded paired op (gelu) keeps f'(a) from its forward rather than a: the derivative
  ** costs as much as the value again, and most of it is the value's work. (a itself may then
  ** change in place before the backward, which stays right.) */
  if (rec && uinfo[op].pair && ltK_kernels(a)->unary_pair) {
    if (ltO_empty_as(ctx, &d, a, odt, a->ndim, a->size)) {
      lt_release(o);
      return -1;
    }
    ltK_kernels(a)->unary_pair(ctx, op, o, d, a);
  } else {
    ltK_kernels(a)->unary(ctx, op, o, a, p0, p1);
  }
  int rc = rec ? record_unary(ctx, op, a, o, p0, p1, NULL, d) : 0;
  lt_release(d);
  if (rc) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

int lt_unary_(lt_ctx *ctx, enum lt_unop op, lt_tensor *a, double p0, double p1) {
  if (op < 0 || op >= LT_NUNOP) return ltB_fail(ctx, "unary_: unknown op %d", op);
  if (!a) return ltB_fail(ctx, "%s_: missing operand", unop_names[op]);
  char name[40];
  ltO_ew_inplace_name(name, unop_names[op]);
  lt_dtype odt;
  if (unary_out_dtype(ctx, name, op, a->dtype, &odt)) return -1;
  if (!ltO_ew_can_cast(odt, a->dtype))
    return ltB_fail(ctx, "%s: result type %s can't be cast to the desired output type %s", name,
                    lt_dtype_name(odt), lt_dtype_name(a->dtype));
  if (ltB_check_inplace(ctx, name, a)) return -1;
  bool grad = ctx->grad_enabled && a->requires_grad;
  if (grad && uinfo[op].save == S_NODIFF)
    return ltB_fail(ctx, "%s: in-place %s on a tensor that requires grad is not supported "
                    "(the result is not differentiable)", name, unop_names[op]);
  lt_tensor *aold = NULL;
  if (grad && uinfo[op].save == S_IN && ltO_ew_data_clone(ctx, &aold, a)) return -1;
  ltK_kernels(a)->unary(ctx, op, a, a, p0, p1);
  ltB_bump_version(a);
  int rc = grad ? record_unary(ctx, op, a, a, p0, p1, aold, NULL) : 0;
  lt_release(aold);
  return rc;
}

/* ============================================================ clamp */

typedef struct {
  double lo, hi;
  lt_dtype da;
} clamp_extra;

static int clamp_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const clamp_extra *e = self->extra;
  lt_tensor *x;
  if (!gout[0]) return 0;
  if (ltG_saved_get(ctx, self, 0, &x)) return -1;
  return ltO_ew_grad_binary(ctx, &gin[0], LT_EW_BW_CLAMP, gout[0], x, e->da, e->lo, e->hi);
}

LT_EW_NODE_TYPE(clamp_type, "ClampBackward1", clamp_backward);

static int record_clamp(lt_ctx *ctx, lt_tensor *a, lt_tensor *out, double lo, double hi,
                        lt_tensor *save_in) {
  lt_node *node;
  if (ltG_record(ctx, &clamp_type, 1, &a, 1, &out, sizeof(clamp_extra), 1, &node)) return -1;
  if (!node) return 0;
  clamp_extra *e = node->extra;
  e->lo = lo;
  e->hi = hi;
  e->da = a->dtype;
  if (ltG_save(node, 0, save_in ? save_in : a, false)) return ltB_fail(ctx, "clamp: out of memory");
  return 0;
}

static bool is_int_value(double v) { return v == floor(v) && fabs(v) < 9.2e18; }

/* Output dtype of clamp: the tensor's, promoted by the bounds as numbers. */
static lt_dtype clamp_dtype(lt_dtype dt, const double *lo, const double *hi) {
  if (lo) dt = ltO_ew_scalar_result(dt, is_int_value(*lo));
  if (hi) dt = ltO_ew_scalar_result(dt, is_int_value(*hi));
  return dt;
}

int lt_clamp(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const double *lo, const double *hi) {
  if (!a) return ltB_fail(ctx, "clamp: missing operand");
  if (!lo && !hi) return ltB_fail(ctx, "clamp: at least one of min and max must be given");
  double l = lo ? *lo : -INFINITY, h = hi ? *hi : INFINITY;
  lt_dtype odt = clamp_dtype(a->dtype, lo, hi);
  lt_tensor *o;
  if (ltO_empty_as(ctx, &o, a, odt, a->ndim, a->size)) return -1;
  ltK_kernels(a)->unary(ctx, LT_UCLAMP, o, a, l, h);
  if (ctx->grad_enabled && a->requires_grad && record_clamp(ctx, a, o, l, h, NULL)) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

int lt_clamp_(lt_ctx *ctx, lt_tensor *a, const double *lo, const double *hi) {
  if (!a) return ltB_fail(ctx, "clamp_: missing operand");
  if (!lo && !hi) return ltB_fail(ctx, "clamp_: at least one of min and max must be given");
  double l = lo ? *lo : -INFINITY, h = hi ? *hi : INFINITY;
  lt_dtype odt = clamp_dtype(a->dtype, lo, hi);
  if (!ltO_ew_can_cast(odt, a->dtype))
    return ltB_fail(ctx, "clamp_: result type %s can't be cast to the desired output type %s",
                    lt_dtype_name(odt), lt_dtype_name(a->dtype));
  if (ltB_check_inplace(ctx, "clamp_", a)) return -1;
  bool grad = ctx->grad_enabled && a->requires_grad;
  lt_tensor *aold = NULL;
  if (grad && ltO_ew_data_clone(ctx, &aold, a)) return -1;
  ltK_kernels(a)->unary(ctx, LT_UCLAMP, a, a, l, h);
  ltB_bump_version(a);
  int rc = grad ? record_clamp(ctx, a, a, l, h, aold) : 0;
  lt_release(aold);
  return rc;
}
