/*
** elementwise.c -- the compute entries with CUDA kernels (kernels.cu): copy and fill of every
** dtype, any layout; binary and unary float32 ops, any layout, broadcasting. Others (and other
** dtypes) pend "<op>: not implemented on cuda" (internal.h says when it is reported).
*/
#include <cuda_runtime_api.h>

#include "internal.h"
#include "kern.h"

_Static_assert(LTC_MAX_DIMS == LT_MAX_DIMS, "kern.h's LTC_MAX_DIMS is LT_MAX_DIMS");
_Static_assert((int)LTC_F32 == (int)LT_FLOAT32 && (int)LTC_F64 == (int)LT_FLOAT64 &&
               (int)LTC_I64 == (int)LT_INT64 && (int)LTC_BOOL == (int)LT_BOOL,
               "kern.h's dtypes are lt_dtype's");

/* Operand k of g: t viewed in g's shape (right-aligned; size-1 and missing dims stride 0). */
static void set_operand(ltc_geom *g, int k, const lt_tensor *t) {
  int lead = g->ndim - t->ndim;
  for (int d = 0; d < g->ndim; d++) {
    int td = d - lead;
    g->stride[k][d] = td < 0 || t->size[td] == 1 ? 0 : t->stride[td];
  }
  g->data[k] = ltB_ptr(t);
}

static ltc_geom geom_of(const lt_tensor *out) {
  ltc_geom g = {.ndim = out->ndim, .numel = 1};
  for (int d = 0; d < out->ndim; d++) {
    g.size[d] = out->size[d];
    g.numel *= out->size[d];
  }
  set_operand(&g, 0, out);
  return g;
}

static void cuda_copy(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src) {
  (void)ctx;
  ltc_geom g = geom_of(dst);
  set_operand(&g, 1, src);
  ltc_pend_err("copy", ltc_copy(&g, (enum ltc_dtype)dst->dtype, (enum ltc_dtype)src->dtype));
}

static void cuda_fill(lt_ctx *ctx, lt_tensor *dst, double v) {
  (void)ctx;
  ltc_geom g = geom_of(dst);
  ltc_pend_err("fill", ltc_fill(&g, (enum ltc_dtype)dst->dtype, v));
}

static const char *const binop_names[LT_NBINOP] = {
    [LT_ADD] = "add", [LT_SUB] = "sub", [LT_MUL] = "mul", [LT_DIV] = "div", [LT_POW] = "pow",
    [LT_MAXIMUM] = "maximum", [LT_MINIMUM] = "minimum",
};
/* the core's op -> the kernel's, +1 (0: no kernel) */
static const int binop_kernel[LT_NBINOP] = {
    [LT_ADD] = LTC_ADD + 1, [LT_SUB] = LTC_SUB + 1, [LT_MUL] = LTC_MUL + 1,
    [LT_DIV] = LTC_DIV + 1, [LT_POW] = LTC_POW + 1, [LT_MAXIMUM] = LTC_MAX + 1,
    [LT_MINIMUM] = LTC_MIN + 1,
};

static const char *binop_name(int op) {
  return op >= 0 && op < LT_NBINOP && binop_names[op] ? binop_names[op] : "binary op";
}

static bool binop_ok(int op, lt_dtype dt) {
  if (op < 0 || op >= LT_NBINOP || !binop_kernel[op] || dt != LT_FLOAT32) {
    ltc_pend("%s: not implemented on cuda for %s (float32 add, sub, mul, div, pow, maximum "
             "and minimum are)", binop_name(op), dt == LT_FLOAT32 ? "this op" : "this dtype");
    return false;
  }
  return true;
}

static void cuda_binary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a,
                        const lt_tensor *b, lt_dtype compute, double p0, double p1) {
  (void)ctx, (void)p0, (void)p1;   /* the ops with parameters are not on cuda yet */
  if (!binop_ok(op, out->dtype) || a->dtype != LT_FLOAT32 || b->dtype != LT_FLOAT32 ||
      compute != LT_FLOAT32) {
    if (out->dtype == LT_FLOAT32 && op >= 0 && op < LT_NBINOP && binop_kernel[op])
      ltc_pend("%s: not implemented on cuda for mixed dtypes", binop_name(op));
    return;
  }
  ltc_geom g = geom_of(out);
  set_operand(&g, 1, a);
  set_operand(&g, 2, b);
  ltc_pend_err(binop_name(op), ltc_binary_f32((enum ltc_binop)(binop_kernel[op] - 1), &g));
}

static void cuda_binary_flat(int op, lt_dtype dt, int64_t n, void *out, const void *a, int sa,
                             const void *b, int sb) {
  if (!binop_ok(op, dt)) return;
  ltc_pend_err(binop_name(op), ltc_binary_flat_f32((enum ltc_binop)(binop_kernel[op] - 1), n,
                                                   out, a, sa, b, sb));
}

static const int unop_kernel[LT_NUNOP] = {
    [LT_NEG] = LTC_NEG + 1, [LT_ABS] = LTC_ABS + 1, [LT_EXP] = LTC_EXP + 1,
    [LT_LOG] = LTC_LOG + 1, [LT_SQRT] = LTC_SQRT + 1, [LT_RSQRT] = LTC_RSQRT + 1,
    [LT_SIN] = LTC_SIN + 1, [LT_COS] = LTC_COS + 1, [LT_TANH] = LTC_TANH + 1,
    [LT_SIGMOID] = LTC_SIGMOID + 1, [LT_RELU] = LTC_RELU + 1,
    [LT_RECIPROCAL] = LTC_RECIPROCAL + 1, [LT_SQUARE] = LTC_SQUARE + 1,
};

static void cuda_unary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, double p0,
                       double p1) {
  (void)ctx, (void)p0, (void)p1;
  if (op < 0 || op >= LT_NUNOP || !unop_kernel[op] || out->dtype != LT_FLOAT32 ||
      a->dtype != LT_FLOAT32) {
    ltc_pend("unary op %d: not implemented on cuda for this op or dtype (float32 neg, abs, exp, "
             "log, sqrt, rsqrt, sin, cos, tanh, sigmoid, relu, reciprocal, square are)", op);
    return;
  }
  ltc_geom g = geom_of(out);
  set_operand(&g, 1, a);
  ltc_pend_err("unary", ltc_unary_f32((enum ltc_unop)(unop_kernel[op] - 1), &g));
}

void ltc_fill_entries(ltK_backend *b) {
  b->copy = cuda_copy;
  b->fill = cuda_fill;
  b->binary = cuda_binary;
  b->binary_flat = cuda_binary_flat;
  b->unary = cuda_unary;
}
