/*
** cpu/softmax.c -- cpu kernels of softmax and log_softmax along one dim, forward
** (`softmax`) and backward (`softmax_backward`): a row kernel for any layout, a short-row
** kernel for contiguous float32 rows of fewer than SM_LANES elements (the row kernel's bits, 16
** rows at a time), and a column kernel for contiguous float32 data whose dim is not innermost.
**
** The float32 kernels are compiled for each ISA level (cpu_isa.c picks one) with vmath.h's
** exponential. Their sums run in SM_LANES float lanes (lane = index mod SM_LANES), flushed to
** double every SM_FLUSH elements in lane order: the same order at every vector width, for
** strided and contiguous rows alike, so the results are bit-identical at every level and, rows
** being independent, for every thread count.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "vmath.h"

#define SM_LANES 16
#define SM_FLUSH 256   /* elements per float partial sum before it joins the double total */
#define SM_INLINE static inline __attribute__((always_inline))

/* What a row kernel is told: the dtype of its rows and which of the pair it computes. */
typedef struct sm_mode {
  lt_dtype dt;
  bool log_;
} sm_mode;

/* ================================================================ float32 rows */

/* The largest of x[0], x[xs], ..., found as the largest of int32 keys that order like the
** floats (a negative float's magnitude bits flipped): GCC vectorises an integer maximum, and
** the largest float does not depend on the order it is looked for in. A NaN may or may not win;
** either way it reaches every output, through x - max or through its exponential and the sum. */
SM_INLINE int32_t sm_key(float v) {
  int32_t b = (int32_t)vm_bits(v);
  return b ^ ((b >> 31) & INT32_MAX);   /* GCC shifts negative values arithmetically */
}
SM_INLINE float sm_max_f32(const float *x, int64_t xs, int64_t n) {
  int32_t m = INT32_MIN;
  for (int64_t i = 0; i < n; i++) {
    int32_t k = sm_key(x[i * xs]);
    m = k > m ? k : m;
  }
  return vm_from((uint32_t)sm_key(vm_from((uint32_t)m)));   /* the key map is its own inverse */
}

/* e^x * 2^64 for x <= 0 (NaN passes): one scaling, no result subnormal (e^-104 * 2^64 is
** 2^-86), and a sum of them cannot overflow; below -104 (masked entries' -inf among them),
** where e^x rounds to 0 even before the division by a sum >= 1, the term is 0. */
#define SM_EXP_MIN -104.0f
#define SM_X2P64_EXP 64
#define SM_LN_2P64 44.361419555836500   /* ln 2^64 */
SM_INLINE float sm_exp_x2p64(float x) {
  float c = x < SM_EXP_MIN ? SM_EXP_MIN : x;
  int32_t k;
  float p = vm_exp_parts(c, &k);
  float e = p * vm_pow2i(k + SM_X2P64_EXP);
  return x < SM_EXP_MIN ? 0.0f : e;
}

/* sum of v[0], v[vs], ... (of g[i] v[i] when dot) in the fixed lane order */
SM_INLINE double sm_sum_f32(const float *v, int64_t vs, const float *g, int64_t gs, int64_t n,
                            bool dot) {
  double total = 0;
  for (int64_t i0 = 0; i0 < n; i0 += SM_FLUSH) {
    int64_t end = ltC_min(n, i0 + SM_FLUSH), i = i0;
    float acc[SM_LANES] = {0};
    if (dot)
      for (; i + SM_LANES <= end; i += SM_LANES)
        for (int k = 0; k < SM_LANES; k++) acc[k] += g[(i + k) * gs] * v[(i + k) * vs];
    else
      for (; i + SM_LANES <= end; i += SM_LANES)
        for (int k = 0; k < SM_LANES; k++) acc[k] += v[(i + k) * vs];
    for (int k = 0; i + k < end; k++)
      acc[k] += dot ? g[(i + k) * gs] * v[(i + k) * vs] : v[(i + k) * vs];
    double s = 0;
    for (int k = 0; k < SM_LANES; k++) s += acc[k];
    total += s;
  }
  return total;
}

/* y = softmax(x) or log_softmax(x) over n >= 1 elements; e^(x - max) * 2^64 goes through y. */
SM_INLINE void sm_forward_f32(float *y, int64_t ys, const float *x, int64_t xs, int64_t n,
                              bool log_) {
  float m = sm_max_f32(x, xs, n);
  for (int64_t i = 0; i < n; i++) y[i * ys] = sm_exp_x2p64(x[i * xs] - m);
  double sum = sm_sum_f32(y, ys, NULL, 0, n, false);
  if (!log_) {
    float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i * ys] *= inv;
  } else {
    float ls = (float)(log(sum) - SM_LN_2P64);
    for (int64_t i = 0; i < n; i++) y[i * ys] = (x[i * xs] - m) - ls;
  }
}

/* softmax: gi = y (g - sum(g y)); log_softmax: gi = g - exp(y) sum(g) */
SM_INLINE void sm_backward_f32(float *gi, int64_t is, const float *y, int64_t ys, const float *g,
                               int64_t gs, int64_t n, bool log_) {
  if (!log_) {
    float dot = (float)sm_sum_f32(y, ys, g, gs, n, true);
    for (int64_t i = 0; i < n; i++) gi[i * is] = y[i * ys] * (g[i * gs] - dot);
  } else {
    float sg = (float)sm_sum_f32(g, gs, NULL, 0, n, false);
    /* y <= 0: e^y rides the forward's scaled exponential, the 2^-64 applied after the product */
    for (int64_t i = 0; i < n; i++)
      gi[i * is] = g[i * gs] - (sm_exp_x2p64(y[i * ys]) * sg) * 0x1p-64f;
  }
}

/* One row of either direction; contiguous rows get the unit strides as constants, so that
** their loops vectorise. operands: forward y, x; backward gi, y, g. */
SM_INLINE void sm_row_f32(const ltC_rowit *it, char **p, bool log_, bool back) {
  int64_t n = it->n;
  bool unit = it->rs[0] == 1 && it->rs[1] == 1 && (!back || it->rs[2] == 1);
  if (!back && unit)
    sm_forward_f32((float *)p[0], 1, (const float *)p[1], 1, n, log_);
  else if (!back)
    sm_forward_f32((float *)p[0], it->rs[0], (const float *)p[1], it->rs[1], n, log_);
  else if (unit)
    sm_backward_f32((float *)p[0], 1, (const float *)p[1], 1, (const float *)p[2], 1, n, log_);
  else
    sm_backward_f32((float *)p[0], it->rs[0], (const float *)p[1], it->rs[1],
                    (const float *)p[2], it->rs[2], n, log_);
}

/* ================================================================ float32 columns */

/* Softmax along a middle dim of contiguous float32 data viewed as [outer, n, inner]: blocks
** of SMCOLS neighbouring columns are processed together so that every pass reads whole rows
** (cross entropy over the class dim of [N, C, H, W] takes this path). */
#define SMCOLS 64

typedef struct smcol {
  float *out;             /* y (forward) or gi (backward) */
  const float *a, *b;     /* x (forward) or y, g (backward) */
  int64_t outer, n, inner, nb;   /* nb: column blocks per outer index */
  bool log_, back;
} smcol;

SM_INLINE void smcol_block(const smcol *c, int64_t o, int64_t j0, int64_t w) {
  int64_t n = c->n, in = c->inner, base = o * n * in + j0;
  const float *A = c->a + base, *B = c->b ? c->b + base : NULL;
  float *Y = c->out + base;
  float m[SMCOLS], acc[SMCOLS], sv[SMCOLS];
  double sum[SMCOLS];
  for (int64_t k = 0; k < w; k++) sum[k] = 0;
  if (!c->back) {   /* each column's largest, as sm_max_f32 finds it */
    int32_t mk[SMCOLS];
    for (int64_t k = 0; k < w; k++) mk[k] = INT32_MIN;
    for (int64_t i = 0; i < n; i++) {
      const float *a = A + i * in;
      for (int64_t k = 0; k < w; k++) {
        int32_t key = sm_key(a[k]);
        mk[k] = key > mk[k] ? key : mk[k];
      }
    }
    for (int64_t k = 0; k < w; k++) m[k] = vm_from((uint32_t)sm_key(vm_from((uint32_t)mk[k])));
  }
  /* per column: the rows' terms in row order, in float, flushed to double every SM_FLUSH; one
  ** loop per mode, so that none holds a branch or a conditional store */
  bool fwd_soft = !c->back && !c->log_, fwd_log = !c->back && c->log_;
  for (int64_t i0 = 0; i0 < n; i0 += SM_FLUSH) {
    int64_t i1 = ltC_min(n, i0 + SM_FLUSH);
    for (int64_t k = 0; k < w; k++) acc[k] = 0;
    for (int64_t i = i0; i < i1; i++) {
      const float *a = A + i * in, *b = B ? B + i * in : NULL;
      float *y = Y + i * in;
      if (fwd_soft)
        for (int64_t k = 0; k < w; k++) {
          float t = sm_exp_x2p64(a[k] - m[k]);
          y[k] = t;
          acc[k] += t;
        }
      else if (fwd_log)
        for (int64_t k = 0; k < w; k++) acc[k] += sm_exp_x2p64(a[k] - m[k]);
      else if (!c->log_)
        for (int64_t k = 0; k < w; k++) acc[k] += b[k] * a[k];
      else
        for (int64_t k = 0; k < w; k++) acc[k] += b[k];
    }
    for (int64_t k = 0; k < w; k++) sum[k] += acc[k];
  }
  for (int64_t k = 0; k < w; k++)
    sv[k] = fwd_soft  ? (float)(1.0 / sum[k])
            : fwd_log ? (float)(log(sum[k]) - SM_LN_2P64)
                      : (float)sum[k];
  for (int64_t i = 0; i < n; i++) {
    const float *a = A + i * in, *b = B ? B + i * in : NULL;
    float *y = Y + i * in;
    if (fwd_log)
      for (int64_t k = 0; k < w; k++) y[k] = (a[k] - m[k]) - sv[k];
    else if (fwd_soft)
      for (int64_t k = 0; k < w; k++) y[k] *= sv[k];
    else if (!c->log_)
      for (int64_t k = 0; k < w; k++) y[k] = a[k] * (b[k] - sv[k]);
    else
      for (int64_t k = 0; k < w; k++) y[k] = b[k] - (sm_exp_x2p64(a[k]) * sv[k]) * 0x1p-64f;
  }
}

SM_INLINE void smcol_span(const smcol *c, int64_t u0, int64_t u1) {
  for (int64_t u = u0; u < u1; u++) {
    int64_t o = u / c->nb, j0 = u % c->nb * SMCOLS;
    smcol_block(c, o, j0, ltC_min(SMCOLS, c->inner - j0));
  }
}

/* ================================================================ float32 short rows */

/* Rows of fewer than SM_LANES contiguous elements, SM_LANES rows side by side, one per lane:
** each row gets the row kernel's maximum, terms, sum (its terms in lane order, each lane one
** term added to 0 in float, the lanes totalled in double) and last step, so its bits do not
** depend on its neighbours. Row by row, ten elements filled ten lanes of a vector and every
** reduction ran across them (log_softmax of 128 x 10: 6 us). */
typedef struct smfew {
  float *out;             /* y (forward) or gi (backward) */
  const float *a, *b;     /* x (forward) or y, g (backward) */
  int64_t rows, n;
  bool log_, back;
} smfew;

SM_INLINE void smfew_block(const smfew *c, int64_t r0, int r) {
  int64_t n = c->n;
  float A[SM_LANES][SM_LANES], B[SM_LANES][SM_LANES], Y[SM_LANES][SM_LANES];   /* [i][row] */
  float m[SM_LANES], sv[SM_LANES];
  double s[SM_LANES];
  const float *a = c->a + r0 * n, *b = c->b ? c->b + r0 * n : NULL;
  for (int k = 0; k < SM_LANES; k++) {
    for (int64_t i = 0; i < n; i++) A[i][k] = k < r ? a[k * n + i] : 0.0f;
    if (b)
      for (int64_t i = 0; i < n; i++) B[i][k] = k < r ? b[k * n + i] : 0.0f;
    s[k] = 0;
  }
  if (!c->back) {
    int32_t mk[SM_LANES];
    for (int k = 0; k < SM_LANES; k++) mk[k] = INT32_MIN;
    for (int64_t i = 0; i < n; i++)
      for (int k = 0; k < SM_LANES; k++) {
        int32_t key = sm_key(A[i][k]);
        mk[k] = key > mk[k] ? key : mk[k];
      }
    for (int k = 0; k < SM_LANES; k++) m[k] = vm_from((uint32_t)sm_key(vm_from((uint32_t)mk[k])));
    for (int64_t i = 0; i < n; i++)
      for (int k = 0; k < SM_LANES; k++) {
        float t = sm_exp_x2p64(A[i][k] - m[k]);
        Y[i][k] = t;
        s[k] += (double)(0.0f + t);
      }
    if (!c->log_) {
      for (int k = 0; k < SM_LANES; k++) sv[k] = (float)(1.0 / s[k]);
      for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < SM_LANES; k++) Y[i][k] *= sv[k];
    } else {
      for (int k = 0; k < SM_LANES; k++) sv[k] = (float)(log(s[k]) - SM_LN_2P64);
      for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < SM_LANES; k++) Y[i][k] = (A[i][k] - m[k]) - sv[k];
    }
  } else if (!c->log_) {   /* a: y, b: g */
    for (int64_t i = 0; i < n; i++)
      for (int k = 0; k < SM_LANES; k++) s[k] += (double)(0.0f + B[i][k] * A[i][k]);
    for (int k = 0; k < SM_LANES; k++) sv[k] = (float)s[k];
    for (int64_t i = 0; i < n; i++)
      for (int k = 0; k < SM_LANES; k++) Y[i][k] = A[i][k] * (B[i][k] - sv[k]);
  } else {
    for (int64_t i = 0; i < n; i++)
      for (int k = 0; k < SM_LANES; k++) s[k] += (double)(0.0f + B[i][k]);
    for (int k = 0; k < SM_LANES; k++) sv[k] = (float)s[k];
    for (int64_t i = 0; i < n; i++)
      for (int k = 0; k < SM_LANES; k++)
        Y[i][k] = B[i][k] - (sm_exp_x2p64(A[i][k]) * sv[k]) * 0x1p-64f;
  }
  float *y = c->out + r0 * n;
  for (int k = 0; k < r; k++)
    for (int64_t i = 0; i < n; i++) y[k * n + i] = Y[i][k];
}

/* blocks [u0, u1) of SM_LANES rows */
SM_INLINE void smfew_span(const smfew *c, int64_t u0, int64_t u1) {
  for (int64_t u = u0; u < u1; u++) {
    int64_t r0 = u * SM_LANES;
    smfew_block(c, r0, (int)ltC_min(SM_LANES, c->rows - r0));
  }
}

/* ================================================================ one kernel per ISA level */

typedef struct sm_kernels {
  void (*row)(const ltC_rowit *it, char **p, bool log_, bool back);
  void (*cols)(const smcol *c, int64_t u0, int64_t u1);
  void (*few)(const smfew *c, int64_t u0, int64_t u1);
} sm_kernels;

static void row_sse4(const ltC_rowit *it, char **p, bool log_, bool back) {
  sm_row_f32(it, p, log_, back);
}
static void cols_sse4(const smcol *c, int64_t u0, int64_t u1) { smcol_span(c, u0, u1); }
static void few_sse4(const smfew *c, int64_t u0, int64_t u1) { smfew_span(c, u0, u1); }
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static void row_avx2(const ltC_rowit *it, char **p, bool log_, bool back) {
  sm_row_f32(it, p, log_, back);
}
static void cols_avx2(const smcol *c, int64_t u0, int64_t u1) { smcol_span(c, u0, u1); }
static void few_avx2(const smfew *c, int64_t u0, int64_t u1) { smfew_span(c, u0, u1); }
LT_ISA_END
LT_ISA_BEGIN_AVX512
static void row_avx512(const ltC_rowit *it, char **p, bool log_, bool back) {
  sm_row_f32(it, p, log_, back);
}
static void cols_avx512(const smcol *c, int64_t u0, int64_t u1) { smcol_span(c, u0, u1); }
static void few_avx512(const smfew *c, int64_t u0, int64_t u1) { smfew_span(c, u0, u1); }
LT_ISA_END
#endif

static sm_kernels sm_kernels_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512:
      return (sm_kernels){.row = row_avx512, .cols = cols_avx512, .few = few_avx512};
    case LT_ISA_AVX2: return (sm_kernels){.row = row_avx2, .cols = cols_avx2, .few = few_avx2};
    default: break;
  }
#endif
  return (sm_kernels){.row = row_sse4, .cols = cols_sse4, .few = few_sse4};
}

/* ================================================================ float64 rows */

/* operands: y, x */
static void sm_forward_f64(const ltC_rowit *it, char **p, bool log_) {
  double *y = (double *)p[0];
  const double *x = (const double *)p[1];
  int64_t ys = it->rs[0], xs = it->rs[1], n = it->n;
  double m = -INFINITY, sum = 0;
  for (int64_t i = 0; i < n; i++) m = x[i * xs] > m ? x[i * xs] : m;
  if (!log_) {
    for (int64_t i = 0; i < n; i++) {
      double v = exp(x[i * xs] - m);
      y[i * ys] = v;
      sum += v;
    }
    double inv = 1.0 / sum;
    for (int64_t i = 0; i < n; i++) y[i * ys] *= inv;
  } else {
    for (int64_t i = 0; i < n; i++) sum += exp(x[i * xs] - m);
    double ls = log(sum);
    for (int64_t i = 0; i < n; i++) y[i * ys] = (x[i * xs] - m) - ls;
  }
}

/* operands: gi, y, g */
static void sm_backward_f64(const ltC_rowit *it, char **p, bool log_) {
  double *gi = (double *)p[0];
  const double *y = (const double *)p[1], *g = (const double *)p[2];
  int64_t is = it->rs[0], ys = it->rs[1], gs = it->rs[2], n = it->n;
  double acc = 0;
  if (!log_) {
    for (int64_t i = 0; i < n; i++) acc += g[i * gs] * y[i * ys];
    for (int64_t i = 0; i < n; i++) gi[i * is] = y[i * ys] * (g[i * gs] - acc);
  } else {
    for (int64_t i = 0; i < n; i++) acc += g[i * gs];
    for (int64_t i = 0; i < n; i++) gi[i * is] = g[i * gs] - exp(y[i * ys]) * acc;
  }
}

/* ================================================================ drivers */

typedef struct sm_job {
  sm_mode mode;
  bool back;
  sm_kernels k;
} sm_job;

static void sm_row(const ltC_rowit *it, char **p, void *ud) {
  const sm_job *j = ud;
  if (j->mode.dt == LT_FLOAT32)
    j->k.row(it, p, j->mode.log_, j->back);
  else if (!j->back)
    sm_forward_f64(it, p, j->mode.log_);
  else
    sm_backward_f64(it, p, j->mode.log_);
}

/* A parallel run of the column kernel (col set) or the short-row kernel (few set). */
typedef struct sm_span_job {
  const smcol *col;
  const smfew *few;
  sm_kernels k;
} sm_span_job;

static void sm_span_run(int64_t u0, int64_t u1, void *ud) {
  const sm_span_job *j = ud;
  if (j->col)
    j->k.cols(j->col, u0, u1);
  else
    j->k.few(j->few, u0, u1);
}

/* Runs the column kernel when it applies (float32, dim not innermost); returns false if not. */
static bool smcol_try(lt_ctx *ctx, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                      int dim, bool log_, bool back) {
  if (out->dtype != LT_FLOAT32 || out->ndim == 0 || dim >= out->ndim - 1) return false;
  int64_t inner = 1, outer = 1;
  for (int d = dim + 1; d < out->ndim; d++) inner *= out->size[d];
  for (int d = 0; d < dim; d++) outer *= out->size[d];
  if (inner < 4 || !lt_is_contiguous(out) || !lt_is_contiguous(a) || (b && !lt_is_contiguous(b)))
    return false;
  smcol c = {.out = lt_data(out), .a = lt_data(a), .b = b ? lt_data(b) : NULL, .outer = outer,
             .n = out->size[dim], .inner = inner, .nb = (inner + SMCOLS - 1) / SMCOLS,
             .log_ = log_, .back = back};
  sm_span_job j = {.col = &c, .k = sm_kernels_for_isa()};
  ltB_parallel_for(ctx, outer * c.nb, ltC_grain(c.n * SMCOLS * 4), sm_span_run, &j);
  return true;
}

/* Runs the short-row kernel when it applies (contiguous float32, dim innermost of 2 to
** SM_LANES - 1 elements, more than one row); returns false if not. */
static bool smfew_try(lt_ctx *ctx, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                      int dim, bool log_, bool back) {
  if (out->dtype != LT_FLOAT32 || out->ndim == 0 || dim != out->ndim - 1) return false;
  int64_t n = out->size[dim], rows = n ? lt_numel(out) / n : 0;
  if (n < 2 || n >= SM_LANES || rows < 2 || !lt_is_contiguous(out) || !lt_is_contiguous(a) ||
      (b && !lt_is_contiguous(b)))
    return false;
  smfew c = {.out = lt_data(out), .a = lt_data(a), .b = b ? lt_data(b) : NULL, .rows = rows,
             .n = n, .log_ = log_, .back = back};
  sm_span_job j = {.few = &c, .k = sm_kernels_for_isa()};
  ltB_parallel_for(ctx, (rows + SM_LANES - 1) / SM_LANES, ltC_grain(SM_LANES * n * 4),
                   sm_span_run, &j);
  return true;
}

static void sm_run(lt_ctx *ctx, int nops, const lt_tensor *const *ops, int dim, bool log_,
                   bool back) {
  ltC_rowit it;
  ltC_rowit_init(&it, nops, ops, dim);
  sm_job j = {.mode = {ops[0]->dtype, log_}, .back = back, .k = sm_kernels_for_isa()};
  ltC_rows_run(ctx, &it, sm_row, &j);
}

void ltC_softmax(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool log_) {
  if (smfew_try(ctx, y, x, NULL, dim, log_, false) || smcol_try(ctx, y, x, NULL, dim, log_, false))
    return;
  const lt_tensor *ops[2] = {y, x};
  sm_run(ctx, 2, ops, dim, log_, false);
}

void ltC_softmax_backward(lt_ctx *ctx, lt_tensor *gi, const lt_tensor *y, const lt_tensor *g,
                          int dim, bool log_) {
  if (smfew_try(ctx, gi, y, g, dim, log_, true) || smcol_try(ctx, gi, y, g, dim, log_, true))
    return;
  const lt_tensor *ops[3] = {gi, y, g};
  sm_run(ctx, 3, ops, dim, log_, true);
}
