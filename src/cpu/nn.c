/*
** cpu/nn.c -- cpu kernels of dropout and the class-index losses (cross_entropy, nll_loss).
**
** Losses: rows i = (n, s) of an input seen as (N, C, S), C class scores at stride S. The fused
** cross_entropy is nll_loss(log_softmax(x)) with label smoothing in one pass; its backward
** recomputes the softmax from the saved input and per-row log-sum-exp:
**   loss_i  = (1-ls) * w[t] * (lse - x[t]) + ls/C * sum_c w[c] * (lse - x[c])
**   dx[c]   = a_i * w[t] * (p[c] - [c == t]) + b_i * (W * p[c] - w[c])
** with a_i, b_i the reduction's coefficients for the two terms and W = sum(w) (C without
** weights). Ignored rows (target == ignore) contribute nothing.
*/
#include <stdlib.h>

#include "../cpu_isa.h"
#include "../generator.h"
#include "cpu.h"
#include "vmath.h"

/* ============================================================ dropout */

void ltC_dropout(lt_tensor *y, lt_tensor *mask, const lt_tensor *x, double p,
                 lt_generator *g) {
  int64_t n = lt_numel(x);
  double keep = 1 - p, scale = p < 1 ? 1 / keep : 0;
  if (x->dtype == LT_FLOAT32) {
    float *m = ltB_ptr(mask), *yy = ltB_ptr(y), fs = (float)scale;
    const float *xx = ltB_ptr(x);
    for (int64_t i = 0; i < n; i++) {
      m[i] = ltB_next_double(g) < keep ? fs : 0.0f;
      yy[i] = xx[i] * m[i];
    }
  } else {
    double *m = ltB_ptr(mask), *yy = ltB_ptr(y);
    const double *xx = ltB_ptr(x);
    for (int64_t i = 0; i < n; i++) {
      m[i] = ltB_next_double(g) < keep ? scale : 0.0;
      yy[i] = xx[i] * m[i];
    }
  }
}

/* ============================================================ class-index losses
** Rows run in parallel; each row's terms land in per-row slots that are then summed in row
** order, so the loss is the same at every thread count. Contiguous float32 rows of the fused
** cross_entropy (S == 1) take vector kernels, one per ISA level: the row maximum, then
** e^(x - max) in float (vmath.h's exponential, within 2 ulp) summed in double lanes; other rows
** take the scalar double loops. */

#define CE_LANES 16
#define CE_INLINE static inline __attribute__((always_inline))

static inline double elem(const void *p, lt_dtype dt, int64_t i) {
  return dt == LT_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static inline void set_elem(void *p, lt_dtype dt, int64_t i, double v) {
  if (dt == LT_FLOAT32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}

/* Log-sum-exp of the row at off (NaN if it holds one; -inf if every score is -inf). */
static double row_lse(const void *x, lt_dtype dt, int64_t C, int64_t S, int64_t off) {
  double m = -INFINITY, sum = 0;
  for (int64_t c = 0; c < C; c++) {
    double v = elem(x, dt, off + c * S);
    if (v > m || v != v) m = v;
  }
  if (m == -INFINITY || m != m) return m;
  for (int64_t c = 0; c < C; c++) sum += exp(elem(x, dt, off + c * S) - m);
  return m + log(sum);
}

/* The same for a contiguous float32 row, as the vector kernel computes it: the exponentials of
** a block of CE_LANES in float, each added to its double lane in the same loop, lanes totalled
** in a fixed order. (With the exponentials stored first and added in a second loop, GCC 12 left
** the adds scalar: cross_entropy over 512 x 1000 took 665 us against 320.) */
CE_INLINE double f32_row_lse(const float *x, int64_t C) {
  if (C == 0) return -INFINITY;
  bool nan;
  float m = ltC_extreme_f32(x, C, true, &nan);
  if (nan) return NAN;
  if (m == -INFINITY) return m;
  double l[CE_LANES] = {0};
  int64_t c = 0;
  for (; c + CE_LANES <= C; c += CE_LANES)
    for (int k = 0; k < CE_LANES; k++) l[k] += (double)vm_exp_float(x[c + k] - m);
  for (int k = 0; c < C; c++, k++) l[k] += (double)vm_exp_float(x[c] - m);
  double s = 0;
  for (int k = 0; k < CE_LANES; k++) s += l[k];
  return (double)m + log(s);
}

/* The same for n <= CE_LANES contiguous rows of C < CE_LANES scores, one row per lane: each
** row gets f32_row_lse's maximum, exponentials and order of sums (a lane of l[] per class, summed
** from 0 in class order), so its bits do not depend on its neighbours. Row by row, ten classes
** filled ten lanes of a vector and a row's reductions ran across it: 128 x 10 took 6 us. */
CE_INLINE void f32_rows_lse(double *out, const float *x, int64_t C, int n) {
  float t[CE_LANES][CE_LANES], m[CE_LANES];   /* t[c][r]: class c of row r */
  double s[CE_LANES];
  for (int r = 0; r < CE_LANES; r++)
    for (int64_t c = 0; c < C; c++) t[c][r] = r < n ? x[r * C + c] : 0.0f;
  for (int r = 0; r < CE_LANES; r++) {
    m[r] = -INFINITY;
    s[r] = 0;
  }
  for (int64_t c = 0; c < C; c++)
    for (int r = 0; r < CE_LANES; r++) m[r] = t[c][r] > m[r] ? t[c][r] : m[r];
  for (int64_t c = 0; c < C; c++)
    for (int r = 0; r < CE_LANES; r++) s[r] += (double)vm_exp_float(t[c][r] - m[r]);
  /* rows whose sum is NaN (a NaN score, or inf - inf) or whose maximum is -inf take the row
  ** kernel, which gives them its own NaN or -inf */
  for (int r = 0; r < n; r++)
    out[r] = m[r] == -INFINITY || s[r] != s[r] ? f32_row_lse(x + r * C, C)
                                               : (double)m[r] + log(s[r]);
}

/* dx of a contiguous float32 row: caw (p - [c == t]) + cb (W p - w[c]), p = e^(x - lse). lse
** comes as a float pair hi + lo: where p is near 1 (x within a factor 2 of lse), x - hi is
** exact, so p - 1 keeps its digits (with lse rounded to float it lost |lse| * 2^-24). */
CE_INLINE void f32_row_grad(float *d, const float *x, int64_t C, float hi, float lo, float caw,
                            float cb, float W, const float *w, int64_t t) {
  if (cb == 0) {
    for (int64_t c = 0; c < C; c++) d[c] = caw * vm_exp_float((x[c] - hi) - lo);
  } else if (!w) {
    for (int64_t c = 0; c < C; c++) {
      float p = vm_exp_float((x[c] - hi) - lo);
      d[c] = caw * p + cb * (W * p - 1.0f);
    }
  } else {
    for (int64_t c = 0; c < C; c++) {
      float p = vm_exp_float((x[c] - hi) - lo);
      d[c] = caw * p + cb * (W * p - w[c]);
    }
  }
  d[t] -= caw;
}

/* The cb == 0 case of f32_row_grad for n <= CE_LANES contiguous rows of C < CE_LANES classes,
** one row per lane, each element as the row kernel computes it; a row with t[r] < 0 (an ignored
** target) is zeros. */
CE_INLINE void f32_rows_grad(float *d, const float *x, int64_t C, int n, const float *hi,
                             const float *lo, const float *caw, const int64_t *t) {
  float p[CE_LANES][CE_LANES];   /* p[c][r]: class c of row r */
  for (int r = 0; r < CE_LANES; r++)
    for (int64_t c = 0; c < C; c++) p[c][r] = r < n ? x[r * C + c] : 0.0f;
  for (int64_t c = 0; c < C; c++)
    for (int r = 0; r < CE_LANES; r++) p[c][r] = caw[r] * vm_exp_float((p[c][r] - hi[r]) - lo[r]);
  for (int r = 0; r < n; r++) {
    if (t[r] < 0) {
      for (int64_t c = 0; c < C; c++) d[r * C + c] = 0.0f;
      continue;
    }
    for (int64_t c = 0; c < C; c++) d[r * C + c] = p[c][r];
    d[r * C + t[r]] -= caw[r];
  }
}

typedef struct ce_kernels {
  double (*lse)(const float *x, int64_t C);
  void (*lse_rows)(double *out, const float *x, int64_t C, int n);
  void (*grad)(float *d, const float *x, int64_t C, float hi, float lo, float caw, float cb,
               float W, const float *w, int64_t t);
  void (*grad_rows)(float *d, const float *x, int64_t C, int n, const float *hi,
                    const float *lo, const float *caw, const int64_t *t);
} ce_kernels;

#define DEF_CE(SUF)                                                                           \
  static double lse_##SUF(const float *x, int64_t C) { return f32_row_lse(x, C); }           \
  static void lse_rows_##SUF(double *out, const float *x, int64_t C, int n) {                 \
    f32_rows_lse(out, x, C, n);                                                               \
  }                                                                                           \
  static void grad_##SUF(float *d, const float *x, int64_t C, float hi, float lo, float caw,  \
                         float cb, float W, const float *w, int64_t t) {                      \
    f32_row_grad(d, x, C, hi, lo, caw, cb, W, w, t);                                          \
  }                                                                                           \
  static void grad_rows_##SUF(float *d, const float *x, int64_t C, int n, const float *hi,    \
                              const float *lo, const float *caw, const int64_t *t) {          \
    f32_rows_grad(d, x, C, n, hi, lo, caw, t);                                                \
  }
DEF_CE(sse4)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_CE(avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_CE(avx512)
LT_ISA_END
#endif

static ce_kernels ce_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512:
      return (ce_kernels){.lse = lse_avx512, .lse_rows = lse_rows_avx512, .grad = grad_avx512,
                          .grad_rows = grad_rows_avx512};
    case LT_ISA_AVX2:
      return (ce_kernels){.lse = lse_avx2, .lse_rows = lse_rows_avx2, .grad = grad_avx2,
                          .grad_rows = grad_rows_avx2};
    default: break;
  }
#endif
  return (ce_kernels){.lse = lse_sse4, .lse_rows = lse_rows_sse4, .grad = grad_sse4,
                      .grad_rows = grad_rows_sse4};
}

/* One forward or backward over the rows. */
typedef struct ce_job {
  const ltK_class_loss *a;
  lt_dtype dt;
  bool fast;                /* contiguous float32 rows of cross_entropy: the vector kernels */
  ce_kernels k;
  const int64_t *t;
  const void *x, *w;
  double *lse;
  double *rowloss;          /* forward: nll (R), smooth (R) */
  void *dx;                 /* backward */
  const void *g;
  lt_dtype gdt;
  double W;
} ce_job;

static void loss_rows(int64_t i0, int64_t i1, void *ud) {
  const ce_job *j = ud;
  const ltK_class_loss *a = j->a;
  const int64_t C = a->C, S = a->S, R = a->N * a->S;
  bool few = j->fast && C < CE_LANES;   /* rows side by side (S is 1: row i at i C) */
  for (int64_t i = i0; few && i < i1; i += CE_LANES)
    j->k.lse_rows(j->lse + i, (const float *)j->x + i * C, C, (int)ltC_min(CE_LANES, i1 - i));
  for (int64_t i = i0; i < i1; i++) {
    int64_t n = i / S, s = i % S, off = n * C * S + s;
    double nll = 0, smooth = 0;
    if (a->logits && !few)
      j->lse[i] = j->fast ? j->k.lse((const float *)j->x + off, C) : row_lse(j->x, j->dt, C, S, off);
    if (j->t[i] != a->ignore) {
      int64_t k = j->t[i] - a->base;
      double wt = j->w ? elem(j->w, j->dt, k) : 1.0;
      double l = a->logits ? j->lse[i] : 0.0;
      nll = wt * (l - elem(j->x, j->dt, off + k * S));
      if (a->logits && a->ls > 0)
        for (int64_t c = 0; c < C; c++)
          smooth += (j->w ? elem(j->w, j->dt, c) : 1.0) * (l - elem(j->x, j->dt, off + c * S));
    }
    j->rowloss[i] = nll;
    j->rowloss[R + i] = smooth;
  }
}

static ce_job job_of(const lt_tensor *x, const lt_tensor *target, const lt_tensor *weight,
                     const ltK_class_loss *a) {
  return (ce_job){.a = a, .dt = x->dtype, .t = ltB_ptr(target), .x = ltB_ptr(x),
                  .w = weight ? ltB_ptr(weight) : NULL, .k = ce_for_isa(),
                  .fast = x->dtype == LT_FLOAT32 && a->S == 1 && a->logits};
}

int ltC_class_loss(lt_ctx *ctx, lt_tensor *y, lt_tensor *lse_t, const lt_tensor *x,
                   const lt_tensor *target, const lt_tensor *weight, ltK_class_loss *a) {
  const int64_t N = a->N, C = a->C, S = a->S, R = N * S;
  const double ls = a->ls;
  double *rowloss = malloc((size_t)(R ? R : 1) * 2 * sizeof *rowloss);
  if (!rowloss) return ltB_fail(ctx, "%s: out of memory", a->logits ? "cross_entropy" : "nll_loss");
  ce_job j = job_of(x, target, weight, a);
  j.lse = lse_t ? ltB_ptr(lse_t) : NULL;
  j.rowloss = rowloss;
  ltB_parallel_for(ctx, R, ltC_grain(3 * C), loss_rows, &j);
  double sum_nll = 0, sum_smooth = 0, sum_w = 0, kept = 0;
  for (int64_t i = 0; i < R; i++) {
    sum_nll += rowloss[i];
    sum_smooth += rowloss[R + i];
    if (j.t[i] != a->ignore) {
      sum_w += j.w ? elem(j.w, j.dt, j.t[i] - a->base) : 1.0;
      kept += 1;
    }
  }
  /* mean: both terms are divided by the total weight of the kept targets (their count
  ** without weights), as PyTorch */
  a->dn = sum_w;
  a->ds = j.w ? sum_w : kept;
  lt_dtype dt = x->dtype;
  void *yd = ltB_ptr(y);
  switch (a->reduction) {
    case LT_REDUCTION_NONE:
      for (int64_t i = 0; i < R; i++)
        set_elem(yd, dt, i, (1 - ls) * rowloss[i] + ls / (double)C * rowloss[R + i]);
      break;
    case LT_REDUCTION_SUM:
      set_elem(yd, dt, 0, (1 - ls) * sum_nll + ls / (double)C * sum_smooth);
      break;
    case LT_REDUCTION_MEAN:
      set_elem(yd, dt, 0,
               (1 - ls) * sum_nll / a->dn + (ls > 0 ? ls / (double)C * sum_smooth / a->ds : 0));
      break;
  }
  free(rowloss);
  return 0;
}

/* Row i's coefficients: ca and cb of the two terms (the reduction's share of the incoming
** gradient), the target's weight wt and class tc; false for an ignored row. */
static bool row_coeffs(const ce_job *j, int64_t i, double *ca, double *cb, double *wt,
                       int64_t *tc) {
  const ltK_class_loss *a = j->a;
  if (j->t[i] == a->ignore) return false;
  *tc = j->t[i] - a->base;
  double g = elem(j->g, j->gdt, a->reduction == LT_REDUCTION_NONE ? i : 0);
  *ca = (1 - a->ls) * g;
  *cb = a->ls / (double)a->C * g;
  if (a->reduction == LT_REDUCTION_MEAN) {
    *ca /= a->dn;
    *cb /= a->ds;
  }
  *wt = j->w ? elem(j->w, j->dt, *tc) : 1.0;
  return true;
}

/* lse as the float pair hi + lo of f32_row_grad */
static void lse_pair(double lse, float *hi, float *lo) {
  *hi = (float)lse;
  *lo = (float)(lse - (double)*hi);
  if (*hi != *hi || *hi == INFINITY || *hi == -INFINITY) *lo = 0;   /* inf - inf would be NaN */
}

/* Rows of fewer classes than lanes without label smoothing, CE_LANES at a time. A row whose
** smoothing coefficient is not 0 all the same (0 times an infinite incoming gradient is NaN)
** is left to the block as ignored and written by the row kernel after it, as it would be alone. */
static void grad_row_blocks(const ce_job *j, int64_t i0, int64_t i1) {
  const int64_t C = j->a->C;
  for (int64_t i = i0; i < i1; i += CE_LANES) {
    int n = (int)ltC_min(CE_LANES, i1 - i);
    float hi[CE_LANES] = {0}, lo[CE_LANES] = {0}, caw[CE_LANES] = {0}, cb[CE_LANES] = {0};
    int64_t tc[CE_LANES], tblock[CE_LANES];   /* tblock: -1 where the block writes zeros */
    for (int r = 0; r < n; r++) {
      double ca, cbd, wt;
      tblock[r] = -1;
      if (!row_coeffs(j, i + r, &ca, &cbd, &wt, &tc[r])) continue;
      lse_pair(j->lse[i + r], &hi[r], &lo[r]);
      caw[r] = (float)(ca * wt);
      cb[r] = (float)cbd;
      if (cb[r] == 0) tblock[r] = tc[r];
    }
    float *d = (float *)j->dx + i * C;
    const float *x = (const float *)j->x + i * C;
    j->k.grad_rows(d, x, C, n, hi, lo, caw, tblock);
    for (int r = 0; r < n; r++)
      if (cb[r] != 0)
        j->k.grad(d + r * C, x + r * C, C, hi[r], lo[r], caw[r], cb[r], (float)j->W, j->w, tc[r]);
  }
}

static void grad_rows(int64_t i0, int64_t i1, void *ud) {
  const ce_job *j = ud;
  const ltK_class_loss *a = j->a;
  const int64_t C = a->C, S = a->S;
  const lt_dtype dt = j->dt;
  if (j->fast && C < CE_LANES && a->ls == 0) {
    grad_row_blocks(j, i0, i1);
    return;
  }
  for (int64_t i = i0; i < i1; i++) {
    int64_t n = i / S, s = i % S, off = n * C * S + s, tc;
    double ca, cb, wt;
    if (!row_coeffs(j, i, &ca, &cb, &wt, &tc)) {
      for (int64_t c = 0; c < C; c++) set_elem(j->dx, dt, off + c * S, 0.0);
      continue;
    }
    if (j->fast) {
      float hi, lo;
      lse_pair(j->lse[i], &hi, &lo);
      j->k.grad((float *)j->dx + off, (const float *)j->x + off, C, hi, lo, (float)(ca * wt),
                (float)cb, (float)j->W, j->w, tc);
      continue;
    }
    for (int64_t c = 0; c < C; c++) {
      double v;
      if (a->logits) {
        double p = exp(elem(j->x, dt, off + c * S) - j->lse[i]);
        double wc = j->w ? elem(j->w, dt, c) : 1.0;
        v = ca * wt * (p - (c == tc)) + (cb != 0 ? cb * (j->W * p - wc) : 0.0);
      } else {
        v = c == tc ? -ca * wt : 0.0;
      }
      set_elem(j->dx, dt, off + c * S, v);
    }
  }
}

void ltC_class_loss_backward(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *gt,
                             const lt_tensor *x, const lt_tensor *target,
                             const lt_tensor *weight, const lt_tensor *lse,
                             const ltK_class_loss *a) {
  ce_job j = job_of(x, target, weight, a);
  j.lse = lse ? (double *)ltB_ptr(lse) : NULL;
  j.dx = ltB_ptr(dx);
  j.g = ltB_ptr(gt);
  j.gdt = gt->dtype;
  for (int64_t c = 0; c < a->C; c++) j.W += j.w ? elem(j.w, j.dt, c) : 1.0;
  ltB_parallel_for(ctx, a->N * a->S, ltC_grain(3 * a->C), grad_rows, &j);
}
