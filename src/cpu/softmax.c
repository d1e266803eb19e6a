/*
** cpu/softmax.c -- cpu kernels of softmax and log_softmax along one dim, forward
** (`softmax`) and backward (`softmax_backward`): a row kernel for any layout, vectorised for
** contiguous float32 rows, and a column kernel for float32 data whose dim is not innermost.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"

/* What a row kernel is told: the dtype of its rows and which of the pair it computes. */
typedef struct sm_mode {
  lt_dtype dt;
  bool log_;
} sm_mode;


/* operands: y, x */
#define SOFTMAX_ROW(T, EXP, LOG)                                                     \
  {                                                                                  \
    T *y = (T *)p[0];                                                                \
    const T *x = (const T *)p[1];                                                    \
    int64_t ys = it->rs[0], xs = it->rs[1], n = it->n;                               \
    T m = -INFINITY;                                                                 \
    if (xs == 1)                                                                     \
      for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;                       \
    else                                                                             \
      for (int64_t i = 0; i < n; i++) m = x[i * xs] > m ? x[i * xs] : m;             \
    double sum = 0;                                                                  \
    if (!log_) {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                              \
        T v = EXP(x[i * xs] - m);                                                    \
        y[i * ys] = v;                                                               \
        sum += v;                                                                    \
      }                                                                              \
      T inv = (T)(1.0 / sum);                                                        \
      for (int64_t i = 0; i < n; i++) y[i * ys] *= inv;                              \
    } else {                                                                         \
      for (int64_t i = 0; i < n; i++) sum += EXP(x[i * xs] - m);                     \
      T ls = (T)LOG(sum);                                                            \
      for (int64_t i = 0; i < n; i++) y[i * ys] = (x[i * xs] - m) - ls;              \
    }                                                                                \
  }

#ifdef LT_VEC4
/* The hot case: a contiguous float32 row (n > 0). Sums run in float lanes, flushed to double
** every 256 elements. */
static void softmax_f32(float *y, const float *x, int64_t n, bool log_) {
  bool nan;
  float m = lt_cpu_extreme_f32(x, n, true, &nan);
  if (nan) m = NAN;
  const v4f vm = v4splat(m);
  double sum = 0;
  int64_t i = 0;
  while (i < n) {
    v4f s0 = v4splat(0), s1 = v4splat(0);
    int64_t end = lt_cpu_min(n, i + 256);
    for (; i + 8 <= end; i += 8) {
      v4f e0 = exp4(v4load(x + i) - vm), e1 = exp4(v4load(x + i + 4) - vm);
      if (!log_) {
        v4store(y + i, e0);
        v4store(y + i + 4, e1);
      }
      s0 += e0;
      s1 += e1;
    }
    for (; i < end; i += 4) {   /* tail: padding lanes are exp(-inf) = 0 */
      int64_t k = lt_cpu_min(4, end - i);
      float xm[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, t[4];
      for (int64_t j = 0; j < k; j++) xm[j] = x[i + j] - m;
      v4f e = exp4(v4load(xm));
      v4store(t, e);
      if (!log_) memcpy(y + i, t, (size_t)k * sizeof *t);
      s0 += e;
    }
    sum += v4hsum(s0 + s1);
  }
  if (!log_) {
    float inv = (float)(1.0 / sum);
    for (i = 0; i < n; i++) y[i] *= inv;
  } else {
    float ls = (float)log(sum);
    for (i = 0; i < n; i++) y[i] = (x[i] - m) - ls;
  }
}
#endif

static void softmax_row(const lt_rowit *it, char **p, void *ud) {
  const sm_mode *mode = ud;
  bool log_ = mode->log_;
#ifdef LT_VEC4
  if (mode->dt == LT_FLOAT32 && it->rs[0] == 1 && it->rs[1] == 1 && it->n >= 16) {
    softmax_f32((float *)p[0], (const float *)p[1], it->n, log_);
    return;
  }
#endif
  if (mode->dt == LT_FLOAT32)
    SOFTMAX_ROW(float, expf, log)
  else
    SOFTMAX_ROW(double, exp, log)
}

/* operands: gi, y, g. softmax: gi = y (g - sum(g y)); log_softmax: gi = g - exp(y) sum(g). */
#define SOFTMAX_BACK_ROW(T, EXP)                                                     \
  {                                                                                  \
    T *gi = (T *)p[0];                                                               \
    const T *y = (const T *)p[1], *g = (const T *)p[2];                              \
    int64_t is = it->rs[0], ys = it->rs[1], gs = it->rs[2], n = it->n;               \
    double acc = 0;                                                                  \
    if (!log_) {                                                                     \
      for (int64_t i = 0; i < n; i++) acc += (double)g[i * gs] * y[i * ys];          \
      T dot = (T)acc;                                                                \
      for (int64_t i = 0; i < n; i++) gi[i * is] = y[i * ys] * (g[i * gs] - dot);    \
    } else {                                                                         \
      for (int64_t i = 0; i < n; i++) acc += g[i * gs];                              \
      T sg = (T)acc;                                                                 \
      for (int64_t i = 0; i < n; i++) gi[i * is] = g[i * gs] - EXP(y[i * ys]) * sg;  \
    }                                                                                \
  }

#ifdef LT_VEC4
/* Contiguous float32 rows: sum(g y) or sum(g) in float lanes flushed to double. */
static void softmax_back_f32(float *gi, const float *y, const float *g, int64_t n, bool log_) {
  double acc = 0;
  int64_t i = 0;
  while (i < n) {
    v4f s0 = v4splat(0), s1 = v4splat(0);
    int64_t end = lt_cpu_min(n, i + 256);
    for (; i + 8 <= end; i += 8) {
      v4f g0 = v4load(g + i), g1 = v4load(g + i + 4);
      if (!log_) {
        g0 *= v4load(y + i);
        g1 *= v4load(y + i + 4);
      }
      s0 += g0;
      s1 += g1;
    }
    for (; i < end; i++) acc += log_ ? g[i] : (double)g[i] * y[i];
    acc += v4hsum(s0 + s1);
  }
  float a = (float)acc;
  if (!log_) {
    for (i = 0; i < n; i++) gi[i] = y[i] * (g[i] - a);
    return;
  }
  const v4f va = v4splat(a);
  for (i = 0; i + 4 <= n; i += 4) v4store(gi + i, v4load(g + i) - exp4(v4load(y + i)) * va);
  for (; i < n; i++) gi[i] = g[i] - expf(y[i]) * a;
}
#endif

static void softmax_back_row(const lt_rowit *it, char **p, void *ud) {
  const sm_mode *mode = ud;
  bool log_ = mode->log_;
#ifdef LT_VEC4
  if (mode->dt == LT_FLOAT32 && it->rs[0] == 1 && it->rs[1] == 1 && it->rs[2] == 1) {
    softmax_back_f32((float *)p[0], (const float *)p[1], (const float *)p[2], it->n, log_);
    return;
  }
#endif
  if (mode->dt == LT_FLOAT32)
    SOFTMAX_BACK_ROW(float, expf)
  else
    SOFTMAX_BACK_ROW(double, exp)
}

/* Softmax along a middle dim of contiguous float32 data viewed as [outer, n, inner]: blocks
** of 64 neighbouring columns are processed together so that every pass reads whole rows
** (cross entropy over the class dim of [N, C, H, W] takes this path). Columns past the last
** multiple of 4 go through the scalar row kernel. */
#ifdef LT_VEC4
#define SMCOLS 64

typedef struct smcol {
  float *out;             /* y (forward) or gi (backward) */
  const float *a, *b;     /* x (forward) or y, g (backward) */
  int64_t outer, n, inner, nb;   /* nb: column blocks per outer index (+1 for the tail) */
  bool log_, back;
} smcol;

static void smcol_block(const smcol *c, int64_t o, int64_t j0, int64_t w) {
  int64_t n = c->n, in = c->inner, base = o * n * in + j0, nv = w / 4;
  const float *A = c->a + base, *B = c->b ? c->b + base : NULL;
  float *Y = c->out + base;
  v4f acc[SMCOLS / 4], m[SMCOLS / 4];
  double sum[SMCOLS];
  for (int64_t k = 0; k < w; k++) sum[k] = 0;
  if (!c->back) {
    for (int64_t k = 0; k < nv; k++) m[k] = v4splat(-INFINITY);
    for (int64_t i = 0; i < n; i++)
      for (int64_t k = 0; k < nv; k++) {
        v4f v = v4load(A + i * in + 4 * k);
        m[k] = v4sel(v > m[k], v, m[k]);
      }
  }
  /* sums in float lanes, flushed to double every 256 rows */
  for (int64_t i0 = 0; i0 < n; i0 += 256) {
    int64_t i1 = lt_cpu_min(n, i0 + 256);
    for (int64_t k = 0; k < nv; k++) acc[k] = v4splat(0);
    for (int64_t i = i0; i < i1; i++)
      for (int64_t k = 0; k < nv; k++) {
        int64_t off = i * in + 4 * k;
        v4f t;
        if (!c->back) {
          t = exp4(v4load(A + off) - m[k]);
          if (!c->log_) v4store(Y + off, t);
        } else {
          t = v4load(B + off);
          if (!c->log_) t *= v4load(A + off);
        }
        acc[k] += t;
      }
    for (int64_t k = 0; k < nv; k++)
      for (int l = 0; l < 4; l++) sum[4 * k + l] += acc[k][l];
  }
  for (int64_t k = 0; k < nv; k++) {
    v4f sv;
    for (int l = 0; l < 4; l++) {
      double sl = sum[4 * k + l];
      sv[l] = !c->back ? (c->log_ ? (float)log(sl) : (float)(1.0 / sl)) : (float)sl;
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t off = i * in + 4 * k;
      v4f r;
      if (!c->back)
        r = c->log_ ? (v4load(A + off) - m[k]) - sv : v4load(Y + off) * sv;
      else if (!c->log_)
        r = v4load(A + off) * (v4load(B + off) - sv);
      else
        r = v4load(B + off) - exp4(v4load(A + off)) * sv;
      v4store(Y + off, r);
    }
  }
}

static void smcol_run(int64_t u0, int64_t u1, void *ud) {
  const smcol *c = ud;
  int64_t full = c->inner / 4 * 4;
  for (int64_t u = u0; u < u1; u++) {
    int64_t o = u / c->nb, b = u % c->nb, j0 = b * SMCOLS;
    if (j0 < full) {
      smcol_block(c, o, j0, lt_cpu_min(SMCOLS, full - j0));
      continue;
    }
    for (int64_t j = full; j < c->inner; j++) {   /* leftover columns: strided rows */
      int64_t base = o * c->n * c->inner + j;
      lt_rowit it;
      memset(&it, 0, sizeof it);
      it.n = c->n;
      it.rs[0] = it.rs[1] = it.rs[2] = c->inner;
      char *p[3] = {(char *)(c->out + base), (char *)(c->a + base),
                    c->b ? (char *)(c->b + base) : NULL};
      sm_mode mode = {LT_FLOAT32, c->log_};
      if (c->back)
        softmax_back_row(&it, p, &mode);
      else
        softmax_row(&it, p, &mode);
    }
  }
}

/* Runs the column kernel when it applies (float32, dim not innermost); returns false if not. */
static bool smcol_try(lt_ctx *ctx, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                      int dim, bool log_, bool back) {
  if (out->dtype != LT_FLOAT32 || out->ndim == 0) return false;
  int64_t inner = 1, outer = 1;
  for (int d = dim + 1; d < out->ndim; d++) inner *= out->size[d];
  for (int d = 0; d < dim; d++) outer *= out->size[d];
  if (inner < 4 || !lt_is_contiguous(out) || !lt_is_contiguous(a) || (b && !lt_is_contiguous(b)))
    return false;
  int64_t full = inner / 4 * 4;
  smcol c = {lt_data(out), lt_data(a), b ? lt_data(b) : NULL, outer, out->size[dim], inner,
             (full + SMCOLS - 1) / SMCOLS + (full < inner), log_, back};
  lt_parallel_for(ctx, outer * c.nb, lt_cpu_grain(c.n * SMCOLS * 4), smcol_run, &c);
  return true;
}
#endif

void lt_cpu_softmax(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool log_) {
#ifdef LT_VEC4
  if (x->ndim > 0 && dim < x->ndim - 1 && smcol_try(ctx, y, x, NULL, dim, log_, false)) return;
#endif
  const lt_tensor *ops[2] = {y, x};
  lt_rowit it;
  lt_rowit_init(&it, 2, ops, dim);
  sm_mode mode = {x->dtype, log_};
  lt_rows_run(ctx, &it, softmax_row, &mode);
}

void lt_cpu_softmax_backward(lt_ctx *ctx, lt_tensor *gi, const lt_tensor *y, const lt_tensor *g,
                             int dim, bool log_) {
#ifdef LT_VEC4
  if (y->ndim > 0 && dim < y->ndim - 1 && smcol_try(ctx, gi, y, g, dim, log_, true)) return;
#endif
  const lt_tensor *ops[3] = {gi, y, g};
  lt_rowit it;
  lt_rowit_init(&it, 3, ops, dim);
  sm_mode mode = {y->dtype, log_};
  lt_rows_run(ctx, &it, softmax_back_row, &mode);
}
