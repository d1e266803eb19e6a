/*
** cpu/addc.c -- addcmul, addcdiv and lerp in one pass over their operands, where the separate
** binary ops they are made of take three or four (1M floats, one thread, Zen 4: addcmul_ 0.64
** -> 0.16 ms). Compiled without contraction into fused multiply-adds (this file is not among
** the Makefile's VMATH_OBJ), so that each value has the bits of those ops run one at a time:
** the op layer still runs them where it records gradients, and both paths must agree.
*/
#include <stdbool.h>

#include "../cpu_isa.h"
#include "ew.h"

typedef struct {
  enum ltK_addc_op op;
  double p;
  bool near;   /* LT_LERP_SCALAR: |p| < 0.5, decided in double as the op layer decides it */
} addc_job;

#define LT_T float
#include "addc_float.h"
#undef LT_T
#define LT_T double
#include "addc_float.h"
#undef LT_T

typedef void (*addc_row)(char **d, const int64_t *st, int64_t n, void *ud);

static void row_f32(char **d, const int64_t *st, int64_t n, void *ud) {
  addc_body_float(ud, d, st, n);
}
static void row_f64(char **d, const int64_t *st, int64_t n, void *ud) {
  addc_body_double(ud, d, st, n);
}
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static void row_f32_avx2(char **d, const int64_t *st, int64_t n, void *ud) {
  addc_body_float(ud, d, st, n);
}
static void row_f64_avx2(char **d, const int64_t *st, int64_t n, void *ud) {
  addc_body_double(ud, d, st, n);
}
LT_ISA_END
LT_ISA_BEGIN_AVX512
static void row_f32_avx512(char **d, const int64_t *st, int64_t n, void *ud) {
  addc_body_float(ud, d, st, n);
}
static void row_f64_avx512(char **d, const int64_t *st, int64_t n, void *ud) {
  addc_body_double(ud, d, st, n);
}
LT_ISA_END
#endif

static addc_row row_for(lt_dtype dt) {
  bool f32 = dt == LT_FLOAT32;
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return f32 ? row_f32_avx512 : row_f64_avx512;
    case LT_ISA_AVX2: return f32 ? row_f32_avx2 : row_f64_avx2;
    default: break;
  }
#endif
  return f32 ? row_f32 : row_f64;
}

void ltC_addc(lt_ctx *ctx, enum ltK_addc_op op, lt_tensor *out, const lt_tensor *s,
              const lt_tensor *a, const lt_tensor *b, double p) {
  addc_job j = {op, p, p < 0.5 && p > -0.5};
  lt_tensor *ops[4] = {out, (lt_tensor *)s, (lt_tensor *)a, (lt_tensor *)b};
  ltB_iter it;
  ltB_iter_init(&it, op == LT_LERP_SCALAR ? 3 : 4, ops, out->ndim, out->size);
  ltB_iter_run_ew(ctx, &it, row_for(out->dtype), &j);
}
