/*
** cpu/regress.c -- cpu kernels of the elementwise losses (`regression_loss` and its backward):
** mse, l1, smooth_l1, huber and binary cross entropy of logits, of contiguous input a and
** target b elementwise, d = a - b:
**
**   kind        loss                                      dloss/da                  dloss/db
**   mse         d^2                                       2 d                       (at b - a)
**   l1          |d|                                       sign(d)                   -dloss/da
**   smooth_l1   |d| < p ? d^2 / (2p) : |d| - p/2          |d| < p ? d/p : sign(d)   (at b - a)
**   huber       |d| < p ? d^2 / 2 : p (|d| - p/2)         |d| < p ? d : p sign(d)   (at b - a)
**   bce_logits  (1 - b) a + log1p(e^-|a|) + max(-a, 0)    sigmoid(a) - b            -a
**
** As PyTorch: |d| of -0 is +0; l1's sign(d) is 0 for a zero or a NaN d, smooth_l1's and
** huber's NaN (they pass d through). Values are computed in the tensors' dtype
** (float32 exponentials and logarithms from vmath.h, within 2 ulp); the reduced forms sum
** chunks of REG_CHUNK elements in double lanes (lane = index mod REG_LANES) and add the chunks
** in order, so the sum does not depend on the thread count. Float32 loops are compiled for
** each ISA level.
*/
#include <math.h>
#include <stdlib.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "vmath.h"

#define REG_CHUNK 16384
#define REG_LANES 16
#define REG_INLINE static inline __attribute__((always_inline))

#define SIGN(d) ((d) > 0 ? 1 : (d) < 0 ? -1 : (d))       /* a zero's or NaN's own value */
#define SIGN0(d) ((d) > 0 ? 1 : (d) < 0 ? -1 : 0)        /* 0 for both (l1's, as PyTorch) */

/* log(1 + e^-|a|): e^-|a| is in (0, 1] (NaN for a NaN a, whose loss is NaN through (1 - b) a
** anyway), so the finite log1p serves; composed with vm_log1p_float's special cases, GCC 12
** did not vectorise the loop at all (25 ns an element). */
REG_INLINE float softplus_neg_float(float aa) {
  float e = vm_exp_float(-aa);
  return vm_log1p_finite(e, 1.0f + e);
}
REG_INLINE float sigmoid_float(float x) { return vm_sigmoid_float(x); }
REG_INLINE double softplus_neg_double(double aa) { return log1p(exp(-aa)); }
REG_INLINE double sigmoid_double(double x) { return 1 / (1 + exp(-x)); }

/* The formulas of the table above for one type T. */
#define DEF_FORMULAS(T)                                                                    \
  REG_INLINE T loss_##T(int kind, T a, T b, T p) {                                         \
    T d = a - b, ad = d <= 0 ? (T)0 - d : d;                                               \
    switch (kind) {                                                                        \
      case LT_MSE: return d * d;                                                           \
      case LT_L1: return ad;                                                               \
      case LT_SMOOTH_L1: return ad < p ? (T)0.5 * d * d / p : ad - (T)0.5 * p;             \
      case LT_HUBER: return ad < p ? (T)0.5 * d * d : p * (ad - (T)0.5 * p);               \
      default: {                                                                           \
        T aa = a < 0 ? -a : a;                                                             \
        return ((T)1 - b) * a + (softplus_neg_##T(aa) + (a < 0 ? -a : (T)0));              \
      }                                                                                    \
    }                                                                                      \
  }                                                                                        \
  /* the target side as PyTorch: l1's and bce's the negation, the others' their formula at   \
  ** b - a (which differ from the negation only in the sign of a zero) */                   \
  REG_INLINE T grad_##T(int kind, int side, T a, T b, T p) {                               \
    T d = side && kind != LT_L1 ? b - a : a - b, ad = d <= 0 ? (T)0 - d : d;               \
    switch (kind) {                                                                        \
      case LT_MSE: return 2 * d;                                                           \
      case LT_L1: return side ? -(T)SIGN0(d) : (T)SIGN0(d);                                \
      case LT_SMOOTH_L1: return ad < p ? d / p : SIGN(d);                                  \
      case LT_HUBER: return ad < p ? d : p * SIGN(d);                                      \
      default: return side ? -a : sigmoid_##T(a) - b;                                      \
    }                                                                                      \
  }
DEF_FORMULAS(float)
DEF_FORMULAS(double)

/* One loop per kind (and side), so that each vectorises without a switch inside. */
#define PER_KIND(kind, BODY)                                                               \
  switch (kind) {                                                                          \
    case LT_MSE: { const int K = LT_MSE; BODY; } break;                                    \
    case LT_L1: { const int K = LT_L1; BODY; } break;                                      \
    case LT_SMOOTH_L1: { const int K = LT_SMOOTH_L1; BODY; } break;                        \
    case LT_HUBER: { const int K = LT_HUBER; BODY; } break;                                \
    default: { const int K = LT_BCE_LOGITS; BODY; } break;                                 \
  }
#define PER_SIDE(side, BODY)                                                               \
  if (side) {                                                                              \
    const int S = 1;                                                                       \
    BODY;                                                                                  \
  } else {                                                                                 \
    const int S = 0;                                                                       \
    BODY;                                                                                  \
  }

/* Sum of the losses of n elements (one chunk) in double lanes; each element's loss; the
** gradient of one side. */
#define DEF_KERNELS(SUF, T)                                                                \
  static double sum_##SUF(int kind, const T *a, const T *b, int64_t n, T p) {              \
    double l[REG_LANES] = {0};                                                             \
    int64_t i = 0;                                                                         \
    PER_KIND(kind, {                                                                       \
      for (; i + REG_LANES <= n; i += REG_LANES)                                           \
        for (int k = 0; k < REG_LANES; k++) l[k] += (double)loss_##T(K, a[i + k], b[i + k], p); \
      for (int k = 0; i < n; i++, k++) l[k] += (double)loss_##T(K, a[i], b[i], p);         \
    })                                                                                     \
    double s = 0;                                                                          \
    for (int k = 0; k < REG_LANES; k++) s += l[k];                                         \
    return s;                                                                              \
  }                                                                                        \
  static void each_##SUF(int kind, T *o, const T *a, const T *b, int64_t n, T p) {         \
    PER_KIND(kind, for (int64_t i = 0; i < n; i++) o[i] = loss_##T(K, a[i], b[i], p))      \
  }                                                                                        \
  static void grad_##SUF(int kind, int side, T *o, const T *g, int64_t gs, T c, const T *a, \
                         const T *b, int64_t n, T p) {                                     \
    if (gs)                                                                                \
      PER_KIND(kind, PER_SIDE(side, for (int64_t i = 0; i < n; i++)                        \
                                        o[i] = c * g[i] * grad_##T(K, S, a[i], b[i], p)))  \
    else                                                                                   \
      PER_KIND(kind, PER_SIDE(side, for (int64_t i = 0; i < n; i++)                        \
                                        o[i] = c * grad_##T(K, S, a[i], b[i], p)))         \
  }

DEF_KERNELS(f64, double)
DEF_KERNELS(f32_sse4, float)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_KERNELS(f32_avx2, float)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_KERNELS(f32_avx512, float)
LT_ISA_END
#endif

typedef struct f32_kernels {
  double (*sum)(int kind, const float *a, const float *b, int64_t n, float p);
  void (*each)(int kind, float *o, const float *a, const float *b, int64_t n, float p);
  void (*grad)(int kind, int side, float *o, const float *g, int64_t gs, float c,
               const float *a, const float *b, int64_t n, float p);
} f32_kernels;

static f32_kernels f32_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return (f32_kernels){sum_f32_avx512, each_f32_avx512, grad_f32_avx512};
    case LT_ISA_AVX2: return (f32_kernels){sum_f32_avx2, each_f32_avx2, grad_f32_avx2};
    default: break;
  }
#endif
  return (f32_kernels){sum_f32_sse4, each_f32_sse4, grad_f32_sse4};
}

typedef struct reg_job {
  int kind, side;
  bool f32;
  f32_kernels k;
  const void *a, *b, *g;
  void *o;
  int64_t n, gs;   /* gs: 1 when g has a value per element, 0 for one value */
  double p, c, *part;
} reg_job;

static void sum_chunks(int64_t c0, int64_t c1, void *ud) {
  reg_job *j = ud;
  for (int64_t c = c0; c < c1; c++) {
    int64_t i = c * REG_CHUNK, m = ltC_min(REG_CHUNK, j->n - i);
    j->part[c] = j->f32 ? j->k.sum(j->kind, (const float *)j->a + i, (const float *)j->b + i, m,
                                   (float)j->p)
                        : sum_f64(j->kind, (const double *)j->a + i, (const double *)j->b + i, m,
                                  j->p);
  }
}

static void each_range(int64_t i0, int64_t i1, void *ud) {
  reg_job *j = ud;
  if (j->f32)
    j->k.each(j->kind, (float *)j->o + i0, (const float *)j->a + i0, (const float *)j->b + i0,
              i1 - i0, (float)j->p);
  else
    each_f64(j->kind, (double *)j->o + i0, (const double *)j->a + i0, (const double *)j->b + i0,
             i1 - i0, j->p);
}

static void grad_range(int64_t i0, int64_t i1, void *ud) {
  reg_job *j = ud;
  int64_t gi = j->gs * i0;
  if (j->f32) {
    /* one incoming value: fold it into the coefficient, in float as a product would round */
    float c = j->gs ? (float)j->c : (float)j->c * *(const float *)j->g;
    j->k.grad(j->kind, j->side, (float *)j->o + i0, (const float *)j->g + gi, j->gs, c,
              (const float *)j->a + i0, (const float *)j->b + i0, i1 - i0, (float)j->p);
  } else {
    double c = j->gs ? j->c : j->c * *(const double *)j->g;
    grad_f64(j->kind, j->side, (double *)j->o + i0, (const double *)j->g + gi, j->gs, c,
             (const double *)j->a + i0, (const double *)j->b + i0, i1 - i0, j->p);
  }
}

static reg_job job_of(int kind, const lt_tensor *a, const lt_tensor *b, double p) {
  return (reg_job){.kind = kind, .f32 = a->dtype == LT_FLOAT32, .k = f32_for_isa(),
                   .a = ltB_ptr(a), .b = ltB_ptr(b), .n = lt_numel(a), .p = p};
}

int ltC_regression_loss(lt_ctx *ctx, int kind, lt_tensor *out, double *sum, const lt_tensor *a,
                        const lt_tensor *b, double p) {
  reg_job j = job_of(kind, a, b, p);
  if (out) {
    j.o = ltB_ptr(out);
    ltB_parallel_for(ctx, j.n, ltC_grain(4), each_range, &j);
    return 0;
  }
  int64_t nc = (j.n + REG_CHUNK - 1) / REG_CHUNK;
  double one;
  j.part = nc > 1 ? malloc((size_t)nc * sizeof *j.part) : &one;
  if (!j.part) return ltB_fail(ctx, "regression loss: out of memory for %lld partial sums",
                               (long long)nc);
  ltB_parallel_for(ctx, nc, 1, sum_chunks, &j);
  double s = 0;
  for (int64_t c = 0; c < nc; c++) s += j.part[c];
  if (nc > 1) free(j.part);
  *sum = s;
  return 0;
}

void ltC_regression_loss_backward(lt_ctx *ctx, int kind, int side, lt_tensor *da,
                                  const lt_tensor *g, double scale, const lt_tensor *a,
                                  const lt_tensor *b, double p) {
  reg_job j = job_of(kind, a, b, p);
  j.side = side;
  j.o = ltB_ptr(da);
  j.g = ltB_ptr(g);
  j.gs = lt_numel(g) == j.n && j.n != 1 ? 1 : 0;
  j.c = scale;
  ltB_parallel_for(ctx, j.n, ltC_grain(4), grad_range, &j);
}
