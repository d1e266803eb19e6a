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

#include "cpu.h"
#include "../generator.h"

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

/* ============================================================ class-index losses */

static inline double elem(const void *p, lt_dtype dt, int64_t i) {
  return dt == LT_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static inline void set_elem(void *p, lt_dtype dt, int64_t i, double v) {
  if (dt == LT_FLOAT32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}

/* Log-sum-exp of the row at off. */
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

int ltC_class_loss(lt_ctx *ctx, lt_tensor *y, lt_tensor *lse_t, const lt_tensor *x,
                   const lt_tensor *target, const lt_tensor *weight, ltK_class_loss *a) {
  const int64_t N = a->N, C = a->C, S = a->S, R = N * S;
  const double ls = a->ls;
  double *rowloss = malloc((size_t)(R ? R : 1) * 2 * sizeof *rowloss);
  if (!rowloss) return ltB_fail(ctx, "%s: out of memory", a->logits ? "cross_entropy" : "nll_loss");
  lt_dtype dt = x->dtype;
  const int64_t *t = ltB_ptr(target);
  const void *xd = ltB_ptr(x), *wd = weight ? ltB_ptr(weight) : NULL;
  double *lse = lse_t ? ltB_ptr(lse_t) : NULL;
  double sum_nll = 0, sum_smooth = 0, sum_w = 0, kept = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t i = n * S + s, off = n * C * S + s;
      double nll = 0, smooth = 0;
      if (a->logits) lse[i] = row_lse(xd, dt, C, S, off);
      if (t[i] != a->ignore) {
        int64_t k = t[i] - a->base;
        double wt = wd ? elem(wd, dt, k) : 1.0;
        double l = a->logits ? lse[i] : 0.0;
        nll = wt * (l - elem(xd, dt, off + k * S));
        if (a->logits && ls > 0)
          for (int64_t c = 0; c < C; c++)
            smooth += (wd ? elem(wd, dt, c) : 1.0) * (l - elem(xd, dt, off + c * S));
        sum_w += wt;
        kept += 1;
      }
      rowloss[i] = nll;
      rowloss[R + i] = smooth;
      sum_nll += nll;
      sum_smooth += smooth;
    }
  /* mean: both terms are divided by the total weight of the kept targets (their count
  ** without weights), as PyTorch */
  a->dn = sum_w;
  a->ds = wd ? sum_w : kept;
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

void ltC_class_loss_backward(lt_tensor *dx, const lt_tensor *gt, const lt_tensor *x,
                             const lt_tensor *target, const lt_tensor *weight,
                             const lt_tensor *lse, const ltK_class_loss *a) {
  const int64_t N = a->N, C = a->C, S = a->S;
  lt_dtype dt = x->dtype;
  const int64_t *t = ltB_ptr(target);
  const double *l = lse ? ltB_ptr(lse) : NULL;
  const void *wd = weight ? ltB_ptr(weight) : NULL, *xd = ltB_ptr(x), *gd = ltB_ptr(gt);
  double W = 0;
  for (int64_t c = 0; c < C; c++) W += wd ? elem(wd, dt, c) : 1.0;
  void *d = ltB_ptr(dx);
  memset(d, 0, (size_t)(N * C * S) * ltB_esize(dt));
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t i = n * S + s, off = n * C * S + s;
      if (t[i] == a->ignore) continue;
      int64_t tc = t[i] - a->base;
      double g = elem(gd, gt->dtype, a->reduction == LT_REDUCTION_NONE ? i : 0);
      double ca = (1 - a->ls) * g, cb = a->ls / (double)C * g;
      if (a->reduction == LT_REDUCTION_MEAN) {
        ca /= a->dn;
        cb /= a->ds;
      }
      double wt = wd ? elem(wd, dt, tc) : 1.0;
      for (int64_t c = 0; c < C; c++) {
        double v;
        if (a->logits) {
          double p = exp(elem(xd, dt, off + c * S) - l[i]);
          double wc = wd ? elem(wd, dt, c) : 1.0;
          v = ca * wt * (p - (c == tc)) + (cb != 0 ? cb * (W * p - wc) : 0.0);
        } else {
          v = c == tc ? -ca * wt : 0.0;
        }
        set_elem(d, dt, off + c * S, v);
      }
    }
}
