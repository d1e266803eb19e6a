/*
** nn_norm.c -- normalisation layers: batch_norm, layer_norm, group_norm, rms_norm, forward and
** backward (NativeBatchNormBackward0, NativeLayerNormBackward0, NativeGroupNormBackward0,
** RmsNormBackward0).
**
** Shape letters: batch_norm sees x as (N, C, L) with L = prod(spatial dims) and normalises each
** channel over M = N*L values. layer_norm and rms_norm see x as (R, D) rows of D = prod
** (normalized_shape). group_norm sees x as (N, G, Cg*L): each (n, group) block is contiguous.
** Statistics accumulate in double for both dtypes and are saved as float64 (C) or (R) tensors;
** xhat = (x - mean) * invstd is recomputed in backward rather than saved.
**
** With g = dy * weight, every backward is the same identity on one normalised set of m values:
**     dx = invstd * (g - mean(g) - xhat * mean(g * xhat))
** (rms_norm: dx = r * (g - x * r^2 * mean(g * x)), no mean subtraction).
*/
#include <math.h>
#include <stdlib.h>

#include "core.h"

/* ------------------------------------------------------------ shared helpers */

static int check_float(lt_ctx *ctx, const char *op, const lt_tensor *x) {
  if (!lt_dtype_is_float(x->dtype))
    return lt_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                   lt_dtype_name(x->dtype));
  return 0;
}

/* Checks an optional per-feature tensor t: same dtype as x and `n` elements (shape checked by
** the caller where it matters). */
static int check_param(lt_ctx *ctx, const char *op, const char *what, const lt_tensor *t,
                       const lt_tensor *x, int64_t n) {
  char bt[256], bx[256];
  if (!t) return 0;
  if (t->dtype != x->dtype)
    return lt_fail(ctx, "%s: %s has dtype %s but input has dtype %s", op, what,
                   lt_dtype_name(t->dtype), lt_dtype_name(x->dtype));
  if (t->ndim != 1 || t->size[0] != n)
    return lt_fail(ctx, "%s: expected 1-d %s with %lld elements for input of shape %s, got %s of "
                   "shape %s", op, what, (long long)n, LT_SHAPE(x, bx), what, LT_SHAPE(t, bt));
  return 0;
}

/* Contiguous copies (new refs) of the optional tensors; NULL stays NULL. */
static int contig_opt(lt_ctx *ctx, lt_tensor **out, lt_tensor *t) {
  *out = NULL;
  return t ? lt_contiguous(ctx, out, t) : 0;
}

/* Element i of a float tensor's data as double. */
static inline double ld(const void *p, lt_dtype dt, int64_t i) {
  return dt == LT_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* grad_out[0] converted to dt and made contiguous (new ref). */
static int grad_contig(lt_ctx *ctx, lt_tensor *go, lt_dtype dt, lt_tensor **out) {
  lt_tensor *t = go;
  if (go->dtype != dt) {
    if (lt_to_dtype(ctx, &t, go, dt)) return -1;
  } else {
    lt_retain(t);
  }
  int rc = lt_contiguous(ctx, out, t);
  lt_release(t);
  return rc;
}

static int new_f64(lt_ctx *ctx, lt_tensor **t, int64_t n) {
  return lt_empty(ctx, t, LT_FLOAT64, 1, &n);
}

/* Sum and sum of squared deviations of n values at p with stride s (two passes, double). */
#define DEF_MOMENTS(NAME, T)                                                                   \
  static void NAME(const T *p, int64_t n, double *mean, double *m2) {                          \
    double s = 0;                                                                              \
    for (int64_t i = 0; i < n; i++) s += p[i];                                                 \
    double mu = n ? s / (double)n : 0, q = 0;                                                  \
    for (int64_t i = 0; i < n; i++) {                                                          \
      double d = (double)p[i] - mu;                                                            \
      q += d * d;                                                                              \
    }                                                                                          \
    *mean = mu;                                                                                \
    *m2 = q;                                                                                   \
  }
DEF_MOMENTS(moments_f32, float)
DEF_MOMENTS(moments_f64, double)

static void moments(lt_dtype dt, const void *p, int64_t n, double *mean, double *m2) {
  if (dt == LT_FLOAT32)
    moments_f32(p, n, mean, m2);
  else
    moments_f64(p, n, mean, m2);
}

/* y[i] = x[i] * a + b over n values */
static void affine_row(lt_dtype dt, const void *x, void *y, int64_t n, double a, double b) {
  if (dt == LT_FLOAT32) {
    const float *xs = x;
    float *ys = y, fa = (float)a, fb = (float)b;
    for (int64_t i = 0; i < n; i++) ys[i] = xs[i] * fa + fb;
  } else {
    const double *xs = x;
    double *ys = y;
    for (int64_t i = 0; i < n; i++) ys[i] = xs[i] * a + b;
  }
}

static inline char *at(const void *p, lt_dtype dt, int64_t i) {
  return (char *)p + (size_t)i * lt_dtype_size(dt);
}

/* Backward prologue shared by every norm (saved: 0 x (contiguous), 1 weight, 2 mean, 3 invstd
** or rstd, both f64): the saved tensors into sv, grad_out[0] as x's dtype, contiguous, into *dy
** (new ref), and which of x, weight, bias want a gradient. */
static int norm_bwd_begin(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                          lt_tensor *sv[4], lt_tensor **dy, bool need[3]) {
  for (int i = 0; i < 4; i++)
    if (lt_saved_get(ctx, self, i, &sv[i])) return -1;
  if (grad_contig(ctx, grad_out[0], sv[0]->dtype, dy)) return -1;
  need[0] = lt_needs_input_grad(self, 0);
  need[1] = self->n_in > 1 && lt_needs_input_grad(self, 1);
  need[2] = self->n_in > 2 && lt_needs_input_grad(self, 2);
  return 0;
}

/* Hands dx, dw, db to the inputs the node has (rms_norm has no bias). */
static void norm_bwd_out(const lt_node *self, lt_tensor **grad_in, lt_tensor *dx, lt_tensor *dw,
                         lt_tensor *db) {
  grad_in[0] = dx;
  if (self->n_in > 1) grad_in[1] = dw;
  if (self->n_in > 2) grad_in[2] = db;
}

/* The n double sums v into contiguous float tensor t, rounded to its dtype. */
static void store_sums(lt_tensor *t, const double *v, int64_t n) {
  for (int64_t k = 0; k < n; k++) {
    if (t->dtype == LT_FLOAT32)
      ((float *)lt_data(t))[k] = (float)v[k];
    else
      ((double *)lt_data(t))[k] = v[k];
  }
}

/* ============================================================ batch_norm */

typedef struct bn_job {
  lt_dtype dt;
  int64_t N, C, L;
  const void *x, *w, *b, *dy;
  void *y, *dx;
  double *mean, *invstd;    /* (C) */
  double *sum_dy, *sum_dy_xhat;   /* (C), backward */
  bool training;
  double eps;
  double *var;                     /* (C), training forward */
} bn_job;

/* Per channel: batch statistics (training) over N*L values; var is the biased variance. */
#define DEF_BN_STATS(NAME, T)                                                                  \
  static void NAME(int64_t c0, int64_t c1, void *ud) {                                         \
    bn_job *j = ud;                                                                            \
    double M = (double)(j->N * j->L);                                                          \
    for (int64_t c = c0; c < c1; c++) {                                                        \
      double s = 0, q = 0;                                                                     \
      for (int64_t n = 0; n < j->N; n++) {                                                     \
        const T *p = (const T *)j->x + (n * j->C + c) * j->L;                                  \
        for (int64_t l = 0; l < j->L; l++) s += p[l];                                          \
      }                                                                                        \
      double mean = s / M;                                                                     \
      for (int64_t n = 0; n < j->N; n++) {                                                     \
        const T *p = (const T *)j->x + (n * j->C + c) * j->L;                                  \
        for (int64_t l = 0; l < j->L; l++) {                                                   \
          double d = (double)p[l] - mean;                                                      \
          q += d * d;                                                                          \
        }                                                                                      \
      }                                                                                        \
      j->mean[c] = mean;                                                                       \
      j->var[c] = q / M;                                                                       \
      j->invstd[c] = 1.0 / sqrt(q / M + j->eps);                                               \
    }                                                                                          \
  }
DEF_BN_STATS(bn_stats_f32, float)
DEF_BN_STATS(bn_stats_f64, double)

/* y = x * scale[c] + shift[c], planes (n, c) */
static void bn_apply(int64_t p0, int64_t p1, void *ud) {
  bn_job *j = ud;
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % j->C;
    double w = j->w ? ld(j->w, j->dt, c) : 1.0, b = j->b ? ld(j->b, j->dt, c) : 0.0;
    double scale = j->invstd[c] * w;
    affine_row(j->dt, at(j->x, j->dt, p * j->L), at(j->y, j->dt, p * j->L), j->L, scale,
               b - j->mean[c] * scale);
  }
}

/* Per channel: sum(dy) and sum(dy * xhat). */
static void bn_grad_sums(int64_t c0, int64_t c1, void *ud) {
  bn_job *j = ud;
  for (int64_t c = c0; c < c1; c++) {
    double s = 0, sx = 0, mu = j->mean[c];
    for (int64_t n = 0; n < j->N; n++) {
      int64_t off = (n * j->C + c) * j->L;
      if (j->dt == LT_FLOAT32) {
        const float *x = (const float *)j->x + off, *dy = (const float *)j->dy + off;
        for (int64_t l = 0; l < j->L; l++) {
          s += dy[l];
          sx += (double)dy[l] * ((double)x[l] - mu);
        }
      } else {
        const double *x = (const double *)j->x + off, *dy = (const double *)j->dy + off;
        for (int64_t l = 0; l < j->L; l++) {
          s += dy[l];
          sx += dy[l] * (x[l] - mu);
        }
      }
    }
    j->sum_dy[c] = s;
    j->sum_dy_xhat[c] = sx * j->invstd[c];
  }
}

/* dx planes: training  dx = w*invstd*(dy - sum_dy/M - xhat*sum_dy_xhat/M)
**            eval      dx = w*invstd*dy */
static void bn_dx(int64_t p0, int64_t p1, void *ud) {
  bn_job *j = ud;
  double M = (double)(j->N * j->L);
  for (int64_t p = p0; p < p1; p++) {
    int64_t c = p % j->C;
    double w = j->w ? ld(j->w, j->dt, c) : 1.0, is = j->invstd[c], mu = j->mean[c];
    double k = w * is;
    /* dx = k*dy + a*x + b with a = -k*is*sxh/M, b = -k*sdy/M - a*mu */
    double a = 0, b = 0;
    if (j->training) {
      a = -k * is * j->sum_dy_xhat[c] / M;
      b = -k * j->sum_dy[c] / M - a * mu;
    }
    int64_t off = p * j->L;
    if (j->dt == LT_FLOAT32) {
      const float *x = (const float *)j->x + off, *dy = (const float *)j->dy + off;
      float *dx = (float *)j->dx + off, fk = (float)k, fa = (float)a, fb = (float)b;
      for (int64_t l = 0; l < j->L; l++) dx[l] = fk * dy[l] + fa * x[l] + fb;
    } else {
      const double *x = (const double *)j->x + off, *dy = (const double *)j->dy + off;
      double *dx = (double *)j->dx + off;
      for (int64_t l = 0; l < j->L; l++) dx[l] = k * dy[l] + a * x[l] + b;
    }
  }
}

typedef struct bn_extra {
  bool training;
  double eps;
} bn_extra;

/* saved: 0 x (contiguous), 1 weight, 2 mean (f64), 3 invstd (f64) */
static int batch_norm_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                               lt_tensor **grad_in) {
  bn_extra *ex = self->extra;
  if (!grad_out[0]) return 0;
  lt_tensor *sv[4], *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL, *sums = NULL;
  bool need[3];
  if (norm_bwd_begin(ctx, self, grad_out, sv, &dy, need)) return -1;
  lt_tensor *x = sv[0], *w = sv[1], *mean = sv[2], *invstd = sv[3];
  lt_dtype dt = x->dtype;
  int64_t N = x->size[0], C = x->size[1], L = 1;
  for (int i = 2; i < x->ndim; i++) L *= x->size[i];
  if (new_f64(ctx, &sums, 2 * C)) goto fail;
  bn_job j = {dt, N, C, L, lt_data(x), w ? lt_data(w) : NULL, NULL, lt_data(dy), NULL, NULL,
              lt_data(mean), lt_data(invstd), lt_data(sums), (double *)lt_data(sums) + C,
              ex->training, ex->eps, NULL};
  int64_t per = N * L > 0 ? N * L : 1;
  lt_parallel_for(ctx, C, (16384 + per - 1) / per, bn_grad_sums, &j);
  if (need[0]) {
    if (lt_empty(ctx, &dx, dt, x->ndim, x->size)) goto fail;
    j.dx = lt_data(dx);
    int64_t lper = L > 0 ? L : 1;
    lt_parallel_for(ctx, N * C, (16384 + lper - 1) / lper, bn_dx, &j);
  }
  if (need[1]) {
    if (lt_empty(ctx, &dw, dt, w->ndim, w->size)) goto fail;
    store_sums(dw, j.sum_dy_xhat, C);
  }
  if (need[2]) {
    int64_t c1 = C;
    if (lt_empty(ctx, &db, dt, 1, &c1)) goto fail;
    store_sums(db, j.sum_dy, C);
  }
  lt_release(sums);
  lt_release(dy);
  norm_bwd_out(self, grad_in, dx, dw, db);
  return 0;
fail:
  lt_release(sums);
  lt_release(dy);
  lt_release(dx);
  lt_release(dw);
  lt_release(db);
  return -1;
}

static const lt_node_type batch_norm_type = {"NativeBatchNormBackward0", batch_norm_backward,
                                             NULL};

/* Writes v into element c of a 1-d float tensor t (any stride). */
static void put1(lt_tensor *t, int64_t c, double v) {
  char *p = at(lt_data(t), t->dtype, c * t->stride[0]);
  if (t->dtype == LT_FLOAT32)
    *(float *)p = (float)v;
  else
    *(double *)p = v;
}
static double get1(const lt_tensor *t, int64_t c) {
  return ld(lt_data(t), t->dtype, c * t->stride[0]);
}

int lt_batch_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *running_mean,
                  lt_tensor *running_var, lt_tensor *weight, lt_tensor *bias, bool training,
                  double momentum, double eps) {
  const char *op = "batch_norm";
  char bx[256], bt[256];
  if (check_float(ctx, op, x)) return -1;
  if (x->ndim < 2)
    return lt_fail(ctx, "%s: expected an input of at least 2 dimensions (N, C, ...), got input "
                   "of shape %s", op, LT_SHAPE(x, bx));
  int64_t N = x->size[0], C = x->size[1], L = 1;
  for (int i = 2; i < x->ndim; i++) L *= x->size[i];
  if (check_param(ctx, op, "weight", weight, x, C) || check_param(ctx, op, "bias", bias, x, C) ||
      check_param(ctx, op, "running_mean", running_mean, x, C) ||
      check_param(ctx, op, "running_var", running_var, x, C))
    return -1;
  lt_tensor *rs[2] = {running_mean, running_var};
  for (int i = 0; i < 2; i++)
    if (rs[i] && rs[i]->ndim != 1)
      return lt_fail(ctx, "%s: expected %s to be 1-d with %lld elements, got shape %s", op,
                     i ? "running_var" : "running_mean", (long long)C, LT_SHAPE(rs[i], bt));
  if (!running_mean != !running_var)
    return lt_fail(ctx, "%s: running_mean and running_var must be given together", op);
  if (!training && !running_mean)
    return lt_fail(ctx, "%s: running_mean and running_var are required when training is "
                   "false", op);
  if (training && N * L == 1)
    return lt_fail(ctx, "%s: expected more than 1 value per channel when training, got input "
                   "of shape %s", op, LT_SHAPE(x, bx));
  if (!(eps >= 0)) return lt_fail(ctx, "%s: eps must be non-negative, got %g", op, eps);
  if (training && running_mean)
    for (int i = 0; i < 2; i++)
      if (lt_check_inplace(ctx, op, rs[i])) return -1;

  lt_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *mean = NULL, *invstd = NULL;
  if (lt_contiguous(ctx, &xc, x) || contig_opt(ctx, &wc, weight) || contig_opt(ctx, &bc, bias) ||
      lt_empty(ctx, &y, x->dtype, x->ndim, x->size) || new_f64(ctx, &mean, C) ||
      new_f64(ctx, &invstd, 2 * C))
    goto fail;
  bn_job j = {x->dtype, N, C, L, lt_data(xc), wc ? lt_data(wc) : NULL, bc ? lt_data(bc) : NULL,
              NULL, lt_data(y), NULL, lt_data(mean), lt_data(invstd), NULL, NULL, training,
              eps, (double *)lt_data(invstd) + C};
  int64_t M = N * L;
  if (training) {
    lt_parallel_for(ctx, C, (16384 + (M ? M : 1) - 1) / (M ? M : 1),
                    x->dtype == LT_FLOAT32 ? bn_stats_f32 : bn_stats_f64, &j);
    if (running_mean) {
      double unbias = M > 1 ? (double)M / (double)(M - 1) : 1.0;
      for (int64_t c = 0; c < C; c++) {
        double var = j.var[c];
        put1(running_mean, c, (1 - momentum) * get1(running_mean, c) + momentum * j.mean[c]);
        put1(running_var, c,
             (1 - momentum) * get1(running_var, c) + momentum * var * unbias);
      }
      lt_bump_version(running_mean);
      lt_bump_version(running_var);
    }
  } else {
    for (int64_t c = 0; c < C; c++) {
      j.mean[c] = get1(running_mean, c);
      j.invstd[c] = 1.0 / sqrt(get1(running_var, c) + eps);
    }
  }
  lt_parallel_for(ctx, N * C, (16384 + L - 1) / (L ? L : 1), bn_apply, &j);
  lt_tensor *ins[3] = {x, weight, bias};
  lt_node *node;
  if (lt_record(ctx, &batch_norm_type, 3, ins, 1, &y, sizeof(bn_extra), 4, &node)) goto fail;
  if (node) {
    bn_extra *ex = node->extra;
    ex->training = training;
    ex->eps = eps;
    if (lt_save(node, 0, xc, false) || lt_save(node, 1, wc, false) ||
        lt_save(node, 2, mean, false) || lt_save(node, 3, invstd, false)) {
      lt_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(invstd);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(invstd);
  lt_release(y);
  return -1;
}

/* ============================================================ row norms
** layer_norm (kind LN), rms_norm (RMS) on rows of D; group_norm (GN) on (n, group) blocks of
** D = Cg*L values whose channel is g*Cg + i/L. */

enum { NORM_LN, NORM_RMS, NORM_GN };

typedef struct row_job {
  int kind;
  lt_dtype dt;
  int64_t R, D;          /* rows, values per row */
  int64_t G, Cg, L;      /* group_norm: groups, channels per group, spatial size */
  const void *x, *w, *b, *dy;
  void *y, *dx;
  double *mean, *rstd;   /* (R) */
  double eps;
} row_job;

/* Index of the weight element for value i of row r. */
static inline int64_t widx(const row_job *j, int64_t r, int64_t i) {
  return j->kind == NORM_GN ? (r % j->G) * j->Cg + i / j->L : i;
}

static void row_forward(int64_t r0, int64_t r1, void *ud) {
  row_job *j = ud;
  for (int64_t r = r0; r < r1; r++) {
    const char *x = at(j->x, j->dt, r * j->D);
    char *y = at(j->y, j->dt, r * j->D);
    double mu, rs;
    if (j->kind == NORM_RMS) {
      double q = 0;
      for (int64_t i = 0; i < j->D; i++) {
        double v = ld(x, j->dt, i);
        q += v * v;
      }
      mu = 0;
      rs = 1.0 / sqrt(q / (double)j->D + j->eps);
    } else {
      double m2;
      moments(j->dt, x, j->D, &mu, &m2);
      rs = 1.0 / sqrt(m2 / (double)j->D + j->eps);
    }
    j->mean[r] = mu;
    j->rstd[r] = rs;
    if (j->kind == NORM_GN) {
      /* per channel: y = x*(rs*w) + (b - mu*rs*w) */
      for (int64_t c = 0; c < j->Cg; c++) {
        int64_t ch = (r % j->G) * j->Cg + c;
        double w = j->w ? ld(j->w, j->dt, ch) : 1.0, b = j->b ? ld(j->b, j->dt, ch) : 0.0;
        affine_row(j->dt, at(x, j->dt, c * j->L), at(y, j->dt, c * j->L), j->L, rs * w,
                   b - mu * rs * w);
      }
    } else if (!j->w && !j->b) {
      affine_row(j->dt, x, y, j->D, rs, -mu * rs);
    } else if (j->dt == LT_FLOAT32) {
      const float *xs = (const float *)x, *w = j->w, *b = j->b;
      float *ys = (float *)y, fm = (float)mu, fr = (float)rs;
      for (int64_t i = 0; i < j->D; i++) {
        float v = (xs[i] - fm) * fr;
        if (w) v *= w[i];
        if (b) v += b[i];
        ys[i] = v;
      }
    } else {
      const double *xs = (const double *)x, *w = j->w, *b = j->b;
      double *ys = (double *)y;
      for (int64_t i = 0; i < j->D; i++) {
        double v = (xs[i] - mu) * rs;
        if (w) v *= w[i];
        if (b) v += b[i];
        ys[i] = v;
      }
    }
  }
}

/* dx for rows: g = dy*w; LN/GN: dx = rs*(g - mean(g) - xhat*mean(g*xhat));
** RMS: dx = rs*(g - x*rs^2*mean(g*x)). */
static void row_dx(int64_t r0, int64_t r1, void *ud) {
  row_job *j = ud;
  for (int64_t r = r0; r < r1; r++) {
    const char *x = at(j->x, j->dt, r * j->D), *dy = at(j->dy, j->dt, r * j->D);
    char *dx = at(j->dx, j->dt, r * j->D);
    double mu = j->mean[r], rs = j->rstd[r], sg = 0, sgx = 0;
    for (int64_t i = 0; i < j->D; i++) {
      double g = ld(dy, j->dt, i);
      if (j->w) g *= ld(j->w, j->dt, widx(j, r, i));
      sg += g;
      sgx += g * (ld(x, j->dt, i) - mu);
    }
    double D = (double)j->D;
    /* dx = rs*g + a*x + b */
    double a, b;
    if (j->kind == NORM_RMS) {
      a = -rs * rs * rs * sgx / D;
      b = 0;
    } else {
      a = -rs * rs * rs * sgx / D;
      b = -rs * sg / D - a * mu;
    }
    for (int64_t i = 0; i < j->D; i++) {
      double g = ld(dy, j->dt, i);
      if (j->w) g *= ld(j->w, j->dt, widx(j, r, i));
      double v = rs * g + a * ld(x, j->dt, i) + b;
      if (j->dt == LT_FLOAT32)
        ((float *)dx)[i] = (float)v;
      else
        ((double *)dx)[i] = v;
    }
  }
}

typedef struct row_extra {
  int kind;
  int64_t R, D, G, Cg, L;
  double eps;
  int wdim;
  int64_t wsize[LT_MAX_DIMS];   /* shape of weight/bias */
} row_extra;

/* saved: 0 x (contiguous), 1 weight, 2 mean, 3 rstd */
static int row_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                        lt_tensor **grad_in) {
  row_extra *ex = self->extra;
  if (!grad_out[0]) return 0;
  lt_tensor *sv[4], *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  double *acc = NULL;
  bool need[3];
  if (norm_bwd_begin(ctx, self, grad_out, sv, &dy, need)) return -1;
  lt_tensor *x = sv[0], *w = sv[1], *mean = sv[2], *rstd = sv[3];
  lt_dtype dt = x->dtype;
  row_job j = {ex->kind, dt, ex->R, ex->D, ex->G, ex->Cg, ex->L, lt_data(x),
               w ? lt_data(w) : NULL, NULL, lt_data(dy), NULL, NULL, lt_data(mean),
               lt_data(rstd), ex->eps};
  if (need[0]) {
    if (lt_empty(ctx, &dx, dt, x->ndim, x->size)) goto fail;
    j.dx = lt_data(dx);
    int64_t per = ex->D > 0 ? 3 * ex->D : 1;
    lt_parallel_for(ctx, ex->R, (16384 + per - 1) / per, row_dx, &j);
  }
  if (need[1] || need[2]) {
    /* weight index space: D (LN/RMS) or C = G*Cg (GN) */
    int64_t nw = ex->kind == NORM_GN ? ex->G * ex->Cg : ex->D;
    acc = calloc((size_t)(2 * nw + 1), sizeof *acc);
    if (!acc) {
      lt_fail(ctx, "%s: out of memory", self->type->name);
      goto fail;
    }
    double *aw = acc, *ab = acc + nw;
    for (int64_t r = 0; r < ex->R; r++) {
      const char *xr = at(j.x, dt, r * ex->D), *dyr = at(j.dy, dt, r * ex->D);
      double mu = j.mean[r], rs = j.rstd[r];
      for (int64_t i = 0; i < ex->D; i++) {
        double g = ld(dyr, dt, i);
        int64_t k = widx(&j, r, i);
        aw[k] += g * (ld(xr, dt, i) - mu) * rs;
        ab[k] += g;
      }
    }
    lt_tensor *res[2] = {NULL, NULL};
    for (int t = 0; t < 2; t++) {
      if (!need[1 + t]) continue;
      if (lt_empty(ctx, &res[t], dt, ex->wdim, ex->wsize)) {
        lt_release(res[0]);
        goto fail;
      }
      store_sums(res[t], t ? ab : aw, nw);
    }
    dw = res[0];
    db = res[1];
  }
  free(acc);
  lt_release(dy);
  norm_bwd_out(self, grad_in, dx, dw, db);
  return 0;
fail:
  free(acc);
  lt_release(dy);
  lt_release(dx);
  return -1;
}

static const lt_node_type layer_norm_type = {"NativeLayerNormBackward0", row_backward, NULL};
static const lt_node_type group_norm_type = {"NativeGroupNormBackward0", row_backward, NULL};
static const lt_node_type rms_norm_type = {"RmsNormBackward0", row_backward, NULL};

/* Runs a row norm whose job geometry is filled in ex; records the node. */
static int row_norm(lt_ctx *ctx, const char *op, const lt_node_type *type, row_extra *ex0,
                    lt_tensor **out, lt_tensor *x, lt_tensor *weight, lt_tensor *bias) {
  lt_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
  if (lt_contiguous(ctx, &xc, x) || contig_opt(ctx, &wc, weight) || contig_opt(ctx, &bc, bias) ||
      lt_empty(ctx, &y, x->dtype, x->ndim, x->size) || new_f64(ctx, &mean, ex0->R) ||
      new_f64(ctx, &rstd, ex0->R))
    goto fail;
  row_job j = {ex0->kind, x->dtype, ex0->R, ex0->D, ex0->G, ex0->Cg, ex0->L, lt_data(xc),
               wc ? lt_data(wc) : NULL, bc ? lt_data(bc) : NULL, NULL, lt_data(y), NULL,
               lt_data(mean), lt_data(rstd), ex0->eps};
  int64_t per = ex0->D > 0 ? 3 * ex0->D : 1;
  lt_parallel_for(ctx, ex0->R, (16384 + per - 1) / per, row_forward, &j);
  lt_tensor *ins[3] = {x, weight, bias};
  lt_node *node;
  if (lt_record(ctx, type, ex0->kind == NORM_RMS ? 2 : 3, ins, 1, &y, sizeof(row_extra), 4,
                &node))
    goto fail;
  if (node) {
    *(row_extra *)node->extra = *ex0;
    if (lt_save(node, 0, xc, false) || lt_save(node, 1, wc, false) ||
        lt_save(node, 2, mean, false) || lt_save(node, 3, rstd, false)) {
      lt_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(rstd);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(rstd);
  lt_release(y);
  return -1;
}

/* Checks normalized_shape against x's trailing dims and weight/bias shapes; fills R, D. */
static int trailing_setup(lt_ctx *ctx, const char *op, lt_tensor *x, int nd,
                          const int64_t *nshape, lt_tensor *w, lt_tensor *b, row_extra *ex) {
  char bx[256], bn[256], bt[256];
  if (check_float(ctx, op, x)) return -1;
  if (nd < 1 || nd > LT_MAX_DIMS)
    return lt_fail(ctx, "%s: expected normalized_shape to be at least 1-dimensional, i.e., "
                   "containing at least one element", op);
  bool ok = x->ndim >= nd;
  for (int i = 0; ok && i < nd; i++) ok = x->size[x->ndim - nd + i] == nshape[i];
  if (!ok)
    return lt_fail(ctx, "%s: given normalized_shape=%s, expected input with shape [*, %s, but "
                   "got input of shape %s", op, lt_sizes_str(nd, nshape, bn, sizeof bn),
                   lt_sizes_str(nd, nshape, bt, sizeof bt) + 1, LT_SHAPE(x, bx));
  lt_tensor *ps[2] = {w, b};
  for (int i = 0; i < 2; i++) {
    lt_tensor *t = ps[i];
    if (!t) continue;
    if (t->dtype != x->dtype)
      return lt_fail(ctx, "%s: %s has dtype %s but input has dtype %s", op,
                     i ? "bias" : "weight", lt_dtype_name(t->dtype), lt_dtype_name(x->dtype));
    bool same = t->ndim == nd;
    for (int k = 0; same && k < nd; k++) same = t->size[k] == nshape[k];
    if (!same)
      return lt_fail(ctx, "%s: expected %s of shape %s (normalized_shape), got %s", op,
                     i ? "bias" : "weight", lt_sizes_str(nd, nshape, bn, sizeof bn),
                     LT_SHAPE(t, bt));
  }
  memset(ex, 0, sizeof *ex);
  ex->D = lt_shape_numel(nd, nshape);
  ex->R = ex->D ? lt_numel(x) / ex->D : 0;
  if (ex->D == 0) ex->R = lt_shape_numel(x->ndim - nd, x->size);
  ex->G = 1;
  ex->Cg = 1;
  ex->L = 1;
  ex->wdim = nd;
  memcpy(ex->wsize, nshape, (size_t)nd * sizeof(int64_t));
  return 0;
}

int lt_layer_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int nd, const int64_t *nshape,
                  lt_tensor *weight, lt_tensor *bias, double eps) {
  row_extra ex;
  if (trailing_setup(ctx, "layer_norm", x, nd, nshape, weight, bias, &ex)) return -1;
  if (!(eps >= 0)) return lt_fail(ctx, "layer_norm: eps must be non-negative, got %g", eps);
  ex.kind = NORM_LN;
  ex.eps = eps;
  return row_norm(ctx, "layer_norm", &layer_norm_type, &ex, out, x, weight, bias);
}

int lt_rms_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int nd, const int64_t *nshape,
                lt_tensor *weight, double eps) {
  row_extra ex;
  if (trailing_setup(ctx, "rms_norm", x, nd, nshape, weight, NULL, &ex)) return -1;
  if (eps < 0) eps = x->dtype == LT_FLOAT32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
  ex.kind = NORM_RMS;
  ex.eps = eps;
  return row_norm(ctx, "rms_norm", &rms_norm_type, &ex, out, x, weight, NULL);
}

int lt_group_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int64_t num_groups,
                  lt_tensor *weight, lt_tensor *bias, double eps) {
  const char *op = "group_norm";
  char bx[256];
  if (check_float(ctx, op, x)) return -1;
  if (x->ndim < 2)
    return lt_fail(ctx, "%s: expected an input of at least 2 dimensions (N, C, ...), got input "
                   "of shape %s", op, LT_SHAPE(x, bx));
  int64_t N = x->size[0], C = x->size[1], L = 1;
  for (int i = 2; i < x->ndim; i++) L *= x->size[i];
  if (num_groups < 1 || C % num_groups != 0)
    return lt_fail(ctx, "%s: expected number of channels in input to be divisible by "
                   "num_groups, but got input of shape %s and num_groups=%lld", op,
                   LT_SHAPE(x, bx), (long long)num_groups);
  if (check_param(ctx, op, "weight", weight, x, C) || check_param(ctx, op, "bias", bias, x, C))
    return -1;
  if (!(eps >= 0)) return lt_fail(ctx, "%s: eps must be non-negative, got %g", op, eps);
  row_extra ex;
  memset(&ex, 0, sizeof ex);
  ex.kind = NORM_GN;
  ex.eps = eps;
  ex.G = num_groups;
  ex.Cg = C / num_groups;
  ex.L = L;
  ex.R = N * num_groups;
  ex.D = ex.Cg * L;
  ex.wdim = 1;
  ex.wsize[0] = C;
  if (weight) {
    ex.wdim = weight->ndim;
    memcpy(ex.wsize, weight->size, (size_t)weight->ndim * sizeof(int64_t));
  }
  return row_norm(ctx, op, &group_norm_type, &ex, out, x, weight, bias);
}
