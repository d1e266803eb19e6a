/*
** cpu/ternary.c -- cpu kernels of the three-operand elementwise ops: the fused gradient
** formulas of the binary ops (ltC_ternary) and where (ltC_where).
*/
#include <math.h>

#include "../cpu_isa.h"
#include "ew.h"

#define LT_T float
#define LT_S f
#include "ternary_float.h"
#undef LT_T
#undef LT_S
#define LT_T double
#define LT_S
#include "ternary_float.h"
#undef LT_T
#undef LT_S

typedef void (*ter_kernel)(enum ltK_ternary_op op, char **d, const int64_t *st, int64_t n);

static void ter_f32(enum ltK_ternary_op op, char **d, const int64_t *st, int64_t n) {
  ter_body_float(op, d, st, n);
}
static void ter_f64(enum ltK_ternary_op op, char **d, const int64_t *st, int64_t n) {
  ter_body_double(op, d, st, n);
}
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static void ter_f32_avx2(enum ltK_ternary_op op, char **d, const int64_t *st, int64_t n) {
  ter_body_float(op, d, st, n);
}
LT_ISA_END
LT_ISA_BEGIN_AVX512
static void ter_f32_avx512(enum ltK_ternary_op op, char **d, const int64_t *st, int64_t n) {
  ter_body_float(op, d, st, n);
}
LT_ISA_END
#endif

static ter_kernel ter_kernel_for(lt_dtype dt) {
  if (dt != LT_FLOAT32) return ter_f64;
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return ter_f32_avx512;
    case LT_ISA_AVX2: return ter_f32_avx2;
    default: break;
  }
#endif
  return ter_f32;
}

typedef struct {
  enum ltK_ternary_op op;
  ter_kernel k;
} ter_job;

static void ter_row(char **d, const int64_t *st, int64_t n, void *ud) {
  const ter_job *j = ud;
  j->k(j->op, d, st, n);
}

void ltC_ternary(lt_ctx *ctx, enum ltK_ternary_op op, lt_tensor *out, const lt_tensor *g,
                 const lt_tensor *a, const lt_tensor *b) {
  ter_job j = {op, ter_kernel_for(out->dtype)};
  lt_tensor *ops[4] = {out, (lt_tensor *)g, (lt_tensor *)a, (lt_tensor *)b};
  ltB_iter it;
  ltB_iter_init(&it, 4, ops, out->ndim, out->size);
  ltB_iter_run_ew(ctx, &it, ter_row, &j);
}

/* ================================================================ where */

/* operands: out, cond (bool), a, b; elements of es bytes copied as that many-byte integers */
LT_EW_INLINE void where_loop(char **d, const int64_t *st, int64_t n, size_t es) {
  if (st[0] == (int64_t)es && st[1] == 1 && st[2] == (int64_t)es && st[3] == (int64_t)es) {
    const ltC_u8 *c = (const ltC_u8 *)d[1];
    for (int64_t i = 0; i < n; i++)
      memcpy(d[0] + i * (int64_t)es, (c[i] ? d[2] : d[3]) + i * (int64_t)es, es);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    bool c = *(const ltC_u8 *)(d[1] + i * st[1]) != 0;
    memcpy(d[0] + i * st[0], c ? d[2] + i * st[2] : d[3] + i * st[3], es);
  }
}

static void where_row(char **d, const int64_t *st, int64_t n, void *ud) {
  switch (*(const size_t *)ud) {
    case 1: where_loop(d, st, n, 1); break;
    case 4: where_loop(d, st, n, 4); break;
    default: where_loop(d, st, n, 8); break;
  }
}

/* out = cond ? a : b; a and b already have out's dtype, cond is bool. */
void ltC_where(lt_ctx *ctx, lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
               const lt_tensor *b) {
  size_t es = lt_dtype_size(out->dtype);
  lt_tensor *ops[4] = {out, (lt_tensor *)cond, (lt_tensor *)a, (lt_tensor *)b};
  ltB_iter it;
  ltB_iter_init(&it, 4, ops, out->ndim, out->size);
  ltB_iter_run_ew(ctx, &it, where_row, &es);
}
