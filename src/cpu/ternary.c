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

/* operands: out, cond (bool), a, b; elements of es bytes copied as that many-byte integers.
** Both sources are read and the condition picks one, without a branch: GCC makes the
** contiguous loop a blend of vectors, where a branch per element on a random mask missed half
** the time (3.3 ns an element over 1M floats). */
#define WHERE_LOOP(T)                                                                      \
  {                                                                                        \
    const ltC_u8 *c = (const ltC_u8 *)d[1];                                                \
    const char *pa = d[2], *pb = d[3];                                                     \
    char *po = d[0];                                                                       \
    const int64_t s0 = st[0], sc = st[1], sa = st[2], sb = st[3], es = sizeof(T);          \
    if (s0 == es && sc == 1 && (sa == es || sa == 0) && (sb == es || sb == 0)) {           \
      /* contiguous, or one side a broadcast value (a gradient's zero, where(m, x, 0)) */  \
      const T *ta = (const T *)pa, *tb = (const T *)pb;                                    \
      T *to = (T *)po;                                                                     \
      if (sa == es && sb == es)                                                            \
        for (int64_t i = 0; i < n; i++) {                                                  \
          T x = ta[i], y = tb[i];                                                          \
          to[i] = c[i] ? x : y;                                                            \
        }                                                                                  \
      else if (sa == es)                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                  \
          T x = ta[i], y = tb[0];                                                          \
          to[i] = c[i] ? x : y;                                                            \
        }                                                                                  \
      else if (sb == es)                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                  \
          T x = ta[0], y = tb[i];                                                          \
          to[i] = c[i] ? x : y;                                                            \
        }                                                                                  \
      else                                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                  \
          T x = ta[0], y = tb[0];                                                          \
          to[i] = c[i] ? x : y;                                                            \
        }                                                                                  \
      return;                                                                              \
    }                                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                      \
      T x, y;                                                                              \
      memcpy(&x, pa + i * sa, sizeof x);                                                   \
      memcpy(&y, pb + i * sb, sizeof y);                                                   \
      x = c[i * sc] ? x : y;                                                               \
      memcpy(po + i * s0, &x, sizeof x);                                                   \
    }                                                                                      \
  }

static void where_1(char **d, const int64_t *st, int64_t n) WHERE_LOOP(uint8_t)
static void where_4(char **d, const int64_t *st, int64_t n) WHERE_LOOP(uint32_t)
static void where_8(char **d, const int64_t *st, int64_t n) WHERE_LOOP(uint64_t)

static void where_row(char **d, const int64_t *st, int64_t n, void *ud) {
  switch (*(const size_t *)ud) {
    case 1: where_1(d, st, n); break;
    case 4: where_4(d, st, n); break;
    default: where_8(d, st, n); break;
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
