/*
** cpu/norm.c -- cpu kernels of the norms: batch norm (`batch_norm`, `batch_norm_backward`) and
** the row norms, layer, rms and group norm (`row_norm`, `row_norm_backward`).
**
** Shape letters: batch norm sees x as (N, C, L) with L = prod(spatial dims) and normalises each
** channel over M = N*L values; the row norms see x as R rows of D values (ltK_norm_geom; group
** norm's rows are the (n, group) blocks of Cg*L values). Statistics accumulate in double for both
** dtypes and are kept as float64; xhat = (x - mean) * invstd is recomputed in backward. Layer
** and rms norm rows of float32 have vector kernels, compiled for each ISA level.
**
** With g = dy * weight, every backward is the same identity on one normalised set of m values:
**     dx = invstd * (g - mean(g) - xhat * mean(g * xhat))
** (rms_norm: dx = r * (g - x * r^2 * mean(g * x)), no mean subtraction). A channel or a row is
** one task's, so results are the same whatever the thread count.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"

/* Element steps per parallel task. */
#define NORM_GRAIN 16384

static int64_t grain_of(int64_t per) {
  int64_t p = per > 0 ? per : 1;
  return (NORM_GRAIN + p - 1) / p;
}

/* Element i of a float tensor's data as double. */
static inline double ld(const void *p, lt_dtype dt, int64_t i) {
  return dt == LT_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* Sum and sum of squared deviations of n float64 values (two passes). */
static void moments_f64(const double *p, int64_t n, double *mean, double *m2) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += p[i];
  double mu = n ? s / (double)n : 0, q = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = p[i] - mu;
    q += d * d;
  }
  *mean = mu;
  *m2 = q;
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

/* The n double sums v into contiguous float tensor t, rounded to its dtype. */
static void store_sums(lt_tensor *t, const double *v, int64_t n) {
  for (int64_t k = 0; k < n; k++) {
    if (t->dtype == LT_FLOAT32)
      ((float *)ltB_ptr(t))[k] = (float)v[k];
    else
      ((double *)ltB_ptr(t))[k] = v[k];
  }
}

/* Writes v into element c of a 1-d float tensor t (any stride). */
static void put1(lt_tensor *t, int64_t c, double v) {
  char *p = at(ltB_ptr(t), t->dtype, c * t->stride[0]);
  if (t->dtype == LT_FLOAT32)
    *(float *)p = (float)v;
  else
    *(double *)p = v;
}
static double get1(const lt_tensor *t, int64_t c) {
  return ld(ltB_ptr(t), t->dtype, c * t->stride[0]);
}

typedef struct bn_job {
  lt_dtype dt;
  int64_t N, C, L;
  const void *x, *w, *b, *dy;
  void *y, *dx;
  double *mean, *invstd;    /* (C) */
  double *sum_dy, *sum_dy_xhat;   /* (C), backward */
  bool training;
  double eps;
  lt_tensor *running_mean, *running_var;   /* training forward, may be NULL */
  double momentum;
} bn_job;

/* Channel c's statistics from its mean and sum of squared deviations q over M values, and
** the running statistics' momentum update with the unbiased variance. */
static void bn_finish_stats(bn_job *j, int64_t c, double mean, double q, double M) {
  j->mean[c] = mean;
  j->invstd[c] = 1.0 / sqrt(q / M + j->eps);
  if (j->running_mean) {
    double unbias = M > 1 ? M / (M - 1) : 1.0, mo = j->momentum;
    put1(j->running_mean, c, (1 - mo) * get1(j->running_mean, c) + mo * mean);
    put1(j->running_var, c, (1 - mo) * get1(j->running_var, c) + mo * (q / M) * unbias);
  }
}

/* Per channel: batch statistics (training) over N*L values (each channel its own elements, so
** in parallel); float32 channels take the vector kernel below. */
static void bn_stats_f64(int64_t c0, int64_t c1, void *ud) {
  bn_job *j = ud;
  double M = (double)(j->N * j->L);
  for (int64_t c = c0; c < c1; c++) {
    double s = 0, q = 0;
    for (int64_t n = 0; n < j->N; n++) {
      const double *p = (const double *)j->x + (n * j->C + c) * j->L;
      for (int64_t l = 0; l < j->L; l++) s += p[l];
    }
    double mean = s / M;
    for (int64_t n = 0; n < j->N; n++) {
      const double *p = (const double *)j->x + (n * j->C + c) * j->L;
      for (int64_t l = 0; l < j->L; l++) {
        double d = p[l] - mean;
        q += d * d;
      }
    }
    bn_finish_stats(j, c, mean, q, M);
  }
}

/* Channel c's coefficients: forward y = x*a + b (k unused), backward dx = k*dy + a*x + b,
** in training  k = w*invstd, a = -k*invstd*sum_dy_xhat/M, b = -k*sum_dy/M - a*mean
** (in eval a = b = 0): dx = w*invstd*(dy - sum_dy/M - xhat*sum_dy_xhat/M). */
static void bn_coefs(const bn_job *j, int64_t c, bool bwd, double *k, double *a, double *b) {
  double w = j->w ? ld(j->w, j->dt, c) : 1.0, is = j->invstd[c], mu = j->mean[c];
  double M = (double)(j->N * j->L);
  if (!bwd) {
    *k = 0;
    *a = is * w;
    *b = (j->b ? ld(j->b, j->dt, c) : 0.0) - mu * *a;
    return;
  }
  *k = w * is;
  *a = j->training ? -*k * is * j->sum_dy_xhat[c] / M : 0;
  *b = j->training ? -*k * j->sum_dy[c] / M - *a * mu : 0;
}

/* y = x * a[c] + b[c], planes (n, c) */
static void bn_apply(int64_t p0, int64_t p1, void *ud) {
  bn_job *j = ud;
  for (int64_t p = p0; p < p1; p++) {
    double k, a, b;
    bn_coefs(j, p % j->C, false, &k, &a, &b);
    affine_row(j->dt, at(j->x, j->dt, p * j->L), at(j->y, j->dt, p * j->L), j->L, a, b);
  }
}

/* Per channel: sum(dy) and sum(dy * xhat); float32 channels take the vector kernel below. */
static void bn_grad_sums_f64(int64_t c0, int64_t c1, void *ud) {
  bn_job *j = ud;
  for (int64_t c = c0; c < c1; c++) {
    double s = 0, sx = 0, mu = j->mean[c];
    for (int64_t n = 0; n < j->N; n++) {
      int64_t off = (n * j->C + c) * j->L;
      const double *x = (const double *)j->x + off, *dy = (const double *)j->dy + off;
      for (int64_t l = 0; l < j->L; l++) {
        s += dy[l];
        sx += dy[l] * (x[l] - mu);
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
  for (int64_t p = p0; p < p1; p++) {
    double k, a, b;
    bn_coefs(j, p % j->C, true, &k, &a, &b);
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

/* ------------------------------------------------------------ batch norm over short planes
** With fewer than BN_SHORT_L values per plane (BatchNorm1d's (N, C) input has L = 1) the loops
** above make a call per handful of values. These walk x a row of C*L values at a time instead,
** channels in blocks of at most BN_COLS columns with a double accumulator per column; each
** column still sums its values in order of n, so the result is the same at any thread count. */
#define BN_SHORT_L 16
#define BN_COLS 256

/* acc[i] += p[i] over w columns, or (p[i] - mu[i])^2 where mu is given */
static void col_sums(lt_dtype dt, const void *p, int64_t w, const double *mu, double *acc) {
  if (dt == LT_FLOAT32) {
    const float *x = p;
    if (mu)
      for (int64_t i = 0; i < w; i++) acc[i] += ((double)x[i] - mu[i]) * ((double)x[i] - mu[i]);
    else
      for (int64_t i = 0; i < w; i++) acc[i] += x[i];
  } else {
    const double *x = p;
    if (mu)
      for (int64_t i = 0; i < w; i++) acc[i] += (x[i] - mu[i]) * (x[i] - mu[i]);
    else
      for (int64_t i = 0; i < w; i++) acc[i] += x[i];
  }
}

/* acc[i] += dy[i], accx[i] += dy[i] * (x[i] - mu[i]) over w columns */
static void col_dots(lt_dtype dt, const void *dyp, const void *xp, int64_t w, const double *mu,
                     double *acc, double *accx) {
  if (dt == LT_FLOAT32) {
    const float *dy = dyp, *x = xp;
    for (int64_t i = 0; i < w; i++) {
      acc[i] += dy[i];
      accx[i] += (double)dy[i] * ((double)x[i] - mu[i]);
    }
  } else {
    const double *dy = dyp, *x = xp;
    for (int64_t i = 0; i < w; i++) {
      acc[i] += dy[i];
      accx[i] += dy[i] * (x[i] - mu[i]);
    }
  }
}

/* The L columns of each of nc channels totalled into v[c]. */
static void fold_cols(const double *acc, int64_t nc, int64_t L, double *v) {
  for (int64_t c = 0; c < nc; c++) {
    double t = 0;
    for (int64_t l = 0; l < L; l++) t += acc[c * L + l];
    v[c] = t;
  }
}

/* Channel c's value spread over its L columns. */
static void spread_cols(const double *v, int64_t nc, int64_t L, double *col) {
  for (int64_t c = 0; c < nc; c++)
    for (int64_t l = 0; l < L; l++) col[c * L + l] = v[c];
}

static void bn_short_stats(int64_t c0, int64_t c1, void *ud) {
  bn_job *j = ud;
  int64_t L = j->L, row = j->C * L, bc = BN_COLS / L;
  double M = (double)(j->N * L);
  for (int64_t cb = c0; cb < c1; cb += bc) {
    int64_t nc = c1 - cb < bc ? c1 - cb : bc, w = nc * L;
    double acc[BN_COLS] = {0}, mu[BN_COLS], mean[BN_COLS], q[BN_COLS];
    for (int64_t n = 0; n < j->N; n++) col_sums(j->dt, at(j->x, j->dt, n * row + cb * L), w, NULL, acc);
    fold_cols(acc, nc, L, mean);
    for (int64_t c = 0; c < nc; c++) mean[c] /= M;
    spread_cols(mean, nc, L, mu);
    for (int64_t i = 0; i < w; i++) acc[i] = 0;
    for (int64_t n = 0; n < j->N; n++) col_sums(j->dt, at(j->x, j->dt, n * row + cb * L), w, mu, acc);
    fold_cols(acc, nc, L, q);
    for (int64_t c = 0; c < nc; c++) bn_finish_stats(j, cb + c, mean[c], q[c], M);
  }
}

/* Units u0..u1 of y = x*a + b (apply) or dx = dy*k + x*a + b (backward): unit u is row
** u % N of channel block u / N, so that few rows of many channels still split between threads;
** the per-channel coefficients are spread over the block's columns once per run of rows, and
** float32 rows take float coefficients so that the loop vectorises. */
static int64_t bn_short_blocks(const bn_job *j) {
  int64_t bc = BN_COLS / j->L;
  return (j->C + bc - 1) / bc;
}

static void bn_short_rows(int64_t u0, int64_t u1, void *ud) {
  bn_job *j = ud;
  bool bwd = j->dx != NULL;
  int64_t L = j->L, row = j->C * L, bc = BN_COLS / L;
  for (int64_t u = u0; u < u1;) {
    int64_t cb = u / j->N * bc, n0 = u % j->N, n1 = n0 + (u1 - u < j->N - n0 ? u1 - u : j->N - n0);
    u += n1 - n0;
    int64_t nc = j->C - cb < bc ? j->C - cb : bc, w = nc * L;
    double kc[BN_COLS], ac[BN_COLS], bcol[BN_COLS];   /* each channel's, on its L columns */
    for (int64_t c = 0; c < nc; c++) {
      double k, a, b;
      bn_coefs(j, cb + c, bwd, &k, &a, &b);
      for (int64_t l = 0; l < L; l++) kc[c * L + l] = k, ac[c * L + l] = a, bcol[c * L + l] = b;
    }
    const void *src = bwd ? j->dy : j->x;
    void *dst = bwd ? j->dx : j->y;
    if (j->dt == LT_FLOAT32) {
      float fk[BN_COLS], fa[BN_COLS], fb[BN_COLS];
      for (int64_t i = 0; i < w; i++) fk[i] = (float)kc[i], fa[i] = (float)ac[i], fb[i] = (float)bcol[i];
      for (int64_t n = n0; n < n1; n++) {
        const float *x = (const float *)j->x + n * row + cb * L;
        float *o = (float *)dst + n * row + cb * L;
        if (bwd) {
          const float *dy = (const float *)src + n * row + cb * L;
          for (int64_t i = 0; i < w; i++) o[i] = fk[i] * dy[i] + fa[i] * x[i] + fb[i];
        } else {
          for (int64_t i = 0; i < w; i++) o[i] = x[i] * fa[i] + fb[i];
        }
      }
    } else {
      for (int64_t n = n0; n < n1; n++) {
        const double *x = (const double *)j->x + n * row + cb * L;
        double *o = (double *)dst + n * row + cb * L;
        if (bwd) {
          const double *dy = (const double *)src + n * row + cb * L;
          for (int64_t i = 0; i < w; i++) o[i] = kc[i] * dy[i] + ac[i] * x[i] + bcol[i];
        } else {
          for (int64_t i = 0; i < w; i++) o[i] = x[i] * ac[i] + bcol[i];
        }
      }
    }
  }
}

static void bn_short_grad_sums(int64_t c0, int64_t c1, void *ud) {
  bn_job *j = ud;
  int64_t L = j->L, row = j->C * L, bc = BN_COLS / L;
  for (int64_t cb = c0; cb < c1; cb += bc) {
    int64_t nc = c1 - cb < bc ? c1 - cb : bc, w = nc * L;
    double acc[BN_COLS] = {0}, accx[BN_COLS] = {0}, mu[BN_COLS], s[BN_COLS], sx[BN_COLS];
    spread_cols(j->mean + cb, nc, L, mu);
    for (int64_t n = 0; n < j->N; n++) {
      int64_t off = n * row + cb * L;
      col_dots(j->dt, at(j->dy, j->dt, off), at(j->x, j->dt, off), w, mu, acc, accx);
    }
    fold_cols(acc, nc, L, s);
    fold_cols(accx, nc, L, sx);
    for (int64_t c = 0; c < nc; c++) {
      j->sum_dy[cb + c] = s[c];
      j->sum_dy_xhat[cb + c] = sx[c] * j->invstd[cb + c];
    }
  }
}

typedef struct row_job {
  enum ltK_norm_kind kind;
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
  return j->kind == LT_NORM_GROUP ? (r % j->G) * j->Cg + i / j->L : i;
}

/* ------------------------------------------------------------ float32 vector kernels
** One set per ISA level, for layer, rms and group norm rows and for batch norm's channel sums.
** Their sums (except f32_rows_dxw's, below) run in NORM_LANES double lanes (lane = index mod
** NORM_LANES within each contiguous run, totalled in a fixed order): GCC vectorises them, keeps
** double accumulation, and the result is the same at every vector width and thread count. The
** per-element formulas are those of the generic loops. Sixteen lanes (two AVX-512 vectors of
** doubles) make each sum a chain of D/16 dependent adds: LayerNorm(128) over 1024 rows on the
** Zen 4 EPYC, one thread, forward 78 -> 69 us, with backward 226 -> 181 (eight lanes before). */
#define NORM_LANES 16
#define NORM_INLINE static inline __attribute__((always_inline))

NORM_INLINE double lanes_total(const double *l) {
  return (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) +
         (((l[8] + l[9]) + (l[10] + l[11])) + ((l[12] + l[13]) + (l[14] + l[15])));
}

/* l += x (sq false) or x^2, lane by lane */
NORM_INLINE void f32_sum_into(double *l, const float *x, int64_t n, bool sq) {
  int64_t i = 0;
  for (; i + NORM_LANES <= n; i += NORM_LANES)
    for (int k = 0; k < NORM_LANES; k++) {
      double v = x[i + k];
      l[k] += sq ? v * v : v;
    }
  for (int k = 0; i < n; i++, k++) {
    double v = x[i];
    l[k] += sq ? v * v : v;
  }
}

/* l += (x - mu)^2 */
NORM_INLINE void f32_m2_into(double *l, const float *x, int64_t n, double mu) {
  int64_t i = 0;
  for (; i + NORM_LANES <= n; i += NORM_LANES)
    for (int k = 0; k < NORM_LANES; k++) {
      double d = (double)x[i + k] - mu;
      l[k] += d * d;
    }
  for (int k = 0; i < n; i++, k++) {
    double d = (double)x[i] - mu;
    l[k] += d * d;
  }
}

/* lg += dy, lgx += dy (x - mu) */
typedef float norm_v8f __attribute__((vector_size(32)));
typedef double norm_v8d __attribute__((vector_size(64)));

NORM_INLINE void f32_dot_into(double *lg, double *lgx, const float *dy, const float *x, int64_t n,
                              double mu) {
  int64_t i = 0;
  if (n >= NORM_LANES) {
    /* spelled in vectors of eight lanes: GCC 12 left the loop below scalar where it was inlined
    ** with short-lived lanes (GroupNorm's channel sums), at 5x PyTorch's time; same sums */
    norm_v8d g0, g1, q0, q1, m = (norm_v8d){0} + mu;
    memcpy(&g0, lg, sizeof g0);
    memcpy(&g1, lg + 8, sizeof g1);
    memcpy(&q0, lgx, sizeof q0);
    memcpy(&q1, lgx + 8, sizeof q1);
    for (; i + NORM_LANES <= n; i += NORM_LANES) {
      norm_v8f a0, a1, b0, b1;
      memcpy(&a0, dy + i, sizeof a0);
      memcpy(&a1, dy + i + 8, sizeof a1);
      memcpy(&b0, x + i, sizeof b0);
      memcpy(&b1, x + i + 8, sizeof b1);
      norm_v8d d0 = __builtin_convertvector(a0, norm_v8d), d1 = __builtin_convertvector(a1, norm_v8d);
      g0 += d0;
      g1 += d1;
      q0 += d0 * (__builtin_convertvector(b0, norm_v8d) - m);
      q1 += d1 * (__builtin_convertvector(b1, norm_v8d) - m);
    }
    memcpy(lg, &g0, sizeof g0);
    memcpy(lg + 8, &g1, sizeof g1);
    memcpy(lgx, &q0, sizeof q0);
    memcpy(lgx + 8, &q1, sizeof q1);
  }
  for (int k = 0; i < n; i++, k++) {
    double g = dy[i];
    lg[k] += g;
    lgx[k] += g * ((double)x[i] - mu);
  }
}

NORM_INLINE double f32_sum(const float *x, int64_t n, bool sq) {
  double l[NORM_LANES] = {0};
  f32_sum_into(l, x, n, sq);
  return lanes_total(l);
}

NORM_INLINE double f32_m2(const float *x, int64_t n, double mu) {
  double l[NORM_LANES] = {0};
  f32_m2_into(l, x, n, mu);
  return lanes_total(l);
}

/* y = x * a + b over n values */
NORM_INLINE void f32_affine(float *y, const float *x, int64_t n, float a, float b) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * a + b;
}

NORM_INLINE void f32_row_forward(const row_job *j, int64_t r) {
  const int64_t D = j->D;
  const float *x = (const float *)j->x + r * D, *w = j->w, *b = j->b;
  float *y = (float *)j->y + r * D;
  double mu = 0, rs;
  if (j->kind == LT_NORM_RMS) {
    rs = 1.0 / sqrt(f32_sum(x, D, true) / (double)D + j->eps);
  } else {
    mu = D ? f32_sum(x, D, false) / (double)D : 0;
    rs = 1.0 / sqrt(f32_m2(x, D, mu) / (double)D + j->eps);
  }
  j->mean[r] = mu;
  j->rstd[r] = rs;
  if (j->kind == LT_NORM_GROUP) {   /* per channel: y = x*(rs*w) + (b - mu*rs*w) */
    for (int64_t c = 0; c < j->Cg; c++) {
      int64_t ch = (r % j->G) * j->Cg + c;
      double wc = w ? w[ch] : 1.0, bc = b ? b[ch] : 0.0;
      f32_affine(y + c * j->L, x + c * j->L, j->L, (float)(rs * wc), (float)(bc - mu * rs * wc));
    }
    return;
  }
  float fm = (float)mu, fr = (float)rs;
  if (w && b)
    for (int64_t i = 0; i < D; i++) y[i] = (x[i] - fm) * fr * w[i] + b[i];
  else if (w)
    for (int64_t i = 0; i < D; i++) y[i] = (x[i] - fm) * fr * w[i];
  else if (b)
    for (int64_t i = 0; i < D; i++) y[i] = (x[i] - fm) * fr + b[i];
  else
    f32_affine(y, x, D, (float)rs, (float)(-mu * rs));
}

/* dx of one row: dx = rs*g + a*x + b, g = dy*w; w group norm's, one per channel (layer and rms
** norm with a weight take f32_rows_dxw, below), a constant pointer test at each call, so that
** each loop has no branch */
NORM_INLINE void f32_row_dx_w(const row_job *j, int64_t r, bool has_w, double *aw, double *ab) {
  const int64_t D = j->D;
  const float *x = (const float *)j->x + r * D, *dy = (const float *)j->dy + r * D;
  const float *w = has_w ? (const float *)j->w : NULL;
  float *dx = (float *)j->dx + r * D;
  double mu = j->mean[r], rs = j->rstd[r];
  double lg[NORM_LANES] = {0}, lgx[NORM_LANES] = {0};
  bool group = j->kind == LT_NORM_GROUP;
  int64_t runs = group ? j->Cg : 1, len = group ? j->L : D;
  for (int64_t c = 0; c < runs; c++) {
    if (group && w) {   /* the channel's weight scales its whole run */
      double l1[NORM_LANES] = {0}, l2[NORM_LANES] = {0};
      double wc = w[(r % j->G) * j->Cg + c];
      f32_dot_into(l1, l2, dy + c * len, x + c * len, len, mu);
      for (int k = 0; k < NORM_LANES; k++) {
        lg[k] += wc * l1[k];
        lgx[k] += wc * l2[k];
      }
      if (aw) {   /* the channel's dw and db terms are these sums */
        int64_t ch = (r % j->G) * j->Cg + c;
        aw[ch] += lanes_total(l2) * rs;
        ab[ch] += lanes_total(l1);
      }
    } else {
      f32_dot_into(lg, lgx, dy + c * len, x + c * len, len, mu);
    }
  }
  double sg = lanes_total(lg), sgx = lanes_total(lgx), Dd = (double)D;
  double a = -rs * rs * rs * sgx / Dd;
  double bb = j->kind == LT_NORM_RMS ? 0 : -rs * sg / Dd - a * mu;
  for (int64_t c = 0; c < runs; c++) {
    const float *xc = x + c * len, *dyc = dy + c * len;
    float *dxc = dx + c * len;
    if (group) {
      double k = rs * (w ? (double)w[(r % j->G) * j->Cg + c] : 1.0);
      for (int64_t i = 0; i < len; i++) dxc[i] = (float)(k * (double)dyc[i] + a * (double)xc[i] + bb);
    } else if (aw) {   /* layer norm with a bias and no weight: db in the same pass */
      for (int64_t i = 0; i < len; i++) {
        double d = dyc[i], xv = xc[i];
        dxc[i] = (float)(rs * d + a * xv + bb);
        aw[i] += d * (xv - mu) * rs;
        ab[i] += d;
      }
    } else {
      for (int64_t i = 0; i < len; i++)
        dxc[i] = (float)(rs * (double)dyc[i] + a * (double)xc[i] + bb);
    }
  }
}

/* dw (aw) and db (ab): sums over the rows, in row order */
NORM_INLINE void f32_rows_dw(const row_job *j, double *aw, double *ab) {
  const int64_t D = j->D;
  for (int64_t r = 0; r < j->R; r++) {
    const float *x = (const float *)j->x + r * D, *dy = (const float *)j->dy + r * D;
    double mu = j->mean[r], rs = j->rstd[r];
    if (j->kind == LT_NORM_GROUP) {   /* one weight per channel: its run's sums */
      for (int64_t c = 0; c < j->Cg; c++) {
        double lg[NORM_LANES] = {0}, lgx[NORM_LANES] = {0};
        int64_t ch = (r % j->G) * j->Cg + c;
        f32_dot_into(lg, lgx, dy + c * j->L, x + c * j->L, j->L, mu);
        aw[ch] += lanes_total(lgx) * rs;
        ab[ch] += lanes_total(lg);
      }
      continue;
    }
    /* four rows per pass over the accumulators when they share a kind: the same sums in the
    ** same order, a quarter of the accumulator traffic */
    if (r + 4 <= j->R) {
      const float *x1 = x + D, *x2 = x + 2 * D, *x3 = x + 3 * D;
      const float *d1 = dy + D, *d2 = dy + 2 * D, *d3 = dy + 3 * D;
      double m1 = j->mean[r + 1], m2 = j->mean[r + 2], m3 = j->mean[r + 3];
      double s1 = j->rstd[r + 1], s2 = j->rstd[r + 2], s3 = j->rstd[r + 3];
      for (int64_t i = 0; i < D; i++) {
        double g0 = dy[i], g1 = d1[i], g2 = d2[i], g3 = d3[i];
        aw[i] = (((aw[i] + g0 * ((double)x[i] - mu) * rs) + g1 * ((double)x1[i] - m1) * s1) +
                 g2 * ((double)x2[i] - m2) * s2) + g3 * ((double)x3[i] - m3) * s3;
        ab[i] = (((ab[i] + g0) + g1) + g2) + g3;
      }
      r += 3;
      continue;
    }
    for (int64_t i = 0; i < D; i++) {
      double gv = dy[i];
      aw[i] += gv * ((double)x[i] - mu) * rs;
      ab[i] += gv;
    }
  }
}

/* batch norm, channels c0..c1: statistics over the N planes of L values each */
NORM_INLINE void f32_bn_stats(bn_job *j, int64_t c0, int64_t c1) {
  double M = (double)(j->N * j->L);
  for (int64_t c = c0; c < c1; c++) {
    double l[NORM_LANES] = {0}, q[NORM_LANES] = {0};
    for (int64_t n = 0; n < j->N; n++)
      f32_sum_into(l, (const float *)j->x + (n * j->C + c) * j->L, j->L, false);
    double mean = lanes_total(l) / M;
    for (int64_t n = 0; n < j->N; n++)
      f32_m2_into(q, (const float *)j->x + (n * j->C + c) * j->L, j->L, mean);
    bn_finish_stats(j, c, mean, lanes_total(q), M);
  }
}

/* batch norm backward, channels c0..c1: sum(dy) and sum(dy * xhat) */
NORM_INLINE void f32_bn_grad_sums(bn_job *j, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; c++) {
    double lg[NORM_LANES] = {0}, lgx[NORM_LANES] = {0};
    for (int64_t n = 0; n < j->N; n++) {
      int64_t off = (n * j->C + c) * j->L;
      f32_dot_into(lg, lgx, (const float *)j->dy + off, (const float *)j->x + off, j->L,
                   j->mean[c]);
    }
    j->sum_dy[c] = lanes_total(lg);
    j->sum_dy_xhat[c] = lanes_total(lgx) * j->invstd[c];
  }
}

/* Layer and rms norm backward with a weight, in float32 arithmetic: dx of rows r0..r1, and
** their dweight and dbias terms added into fw and fb (D floats each) unless fw is NULL. The
** double lanes above cost this backward 1.7x PyTorch's time (LayerNorm(128) over 1024 rows,
** one thread, Zen 4 EPYC: about 140 us against 86), half of it converting to double and back;
** PyTorch's kernel sums in float32 too. The sums run in sixteen float lanes totalled by halves,
** then the tail in order, so the bits are the same at every vector width. With xh = (x - mean)
** rstd (the mean rounded to float, as the forward has it) and g = dy w, dx = rstd (g - mean(g)
** - xh mean(g xh)) (rms norm: no mean(g)). */
typedef float norm_v16f __attribute__((vector_size(64)));
typedef float norm_v4f __attribute__((vector_size(16)));

/* (vectors go by pointer: by value, a 64-byte vector's ABI differs between the levels) */
#define V16_AT(v, p) memcpy(&(v), (p), sizeof(norm_v16f))
#define V16_PUT(p, v) memcpy((p), &(v), sizeof(norm_v16f))

NORM_INLINE float v16_total(const norm_v16f *pv) {
  norm_v16f v = *pv;
  norm_v8f h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  norm_v4f q =
      __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  return (q[0] + q[2]) + (q[1] + q[3]);
}

NORM_INLINE void f32_rows_dxw(const row_job *j, int64_t r0, int64_t r1, float *fw, float *fb) {
  const int64_t D = j->D, V = D / 16 * 16;
  const float *w = j->w;
  bool rms = j->kind == LT_NORM_RMS;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = (const float *)j->x + r * D, *dy = (const float *)j->dy + r * D;
    float *dx = (float *)j->dx + r * D;
    float mu = (float)j->mean[r], rs = (float)j->rstd[r];
    norm_v16f s1 = {0}, s2 = {0};
    for (int64_t i = 0; i < V; i += 16) {
      norm_v16f d, wv, xv;
      V16_AT(d, dy + i);
      V16_AT(wv, w + i);
      V16_AT(xv, x + i);
      norm_v16f g = d * wv, xh = (xv - mu) * rs;
      s1 += g;
      s2 += g * xh;
    }
    float t1 = v16_total(&s1), t2 = v16_total(&s2);
    for (int64_t i = V; i < D; i++) {
      float g = dy[i] * w[i];
      t1 += g;
      t2 += g * ((x[i] - mu) * rs);
    }
    float m1 = rms ? 0.0f : t1 / (float)D, m2 = t2 / (float)D;
    for (int64_t i = 0; i < V; i += 16) {
      norm_v16f d, wv, xv, aw, ab;
      V16_AT(d, dy + i);
      V16_AT(wv, w + i);
      V16_AT(xv, x + i);
      if (fw) {
        V16_AT(aw, fw + i);
        V16_AT(ab, fb + i);
      }
      norm_v16f xh = (xv - mu) * rs, v = rs * ((d * wv - m1) - xh * m2);
      V16_PUT(dx + i, v);
      if (!fw) continue;
      aw += d * xh;
      ab += d;
      V16_PUT(fw + i, aw);
      V16_PUT(fb + i, ab);
    }
    for (int64_t i = V; i < D; i++) {
      float d = dy[i], xh = (x[i] - mu) * rs;
      dx[i] = rs * ((d * w[i] - m1) - xh * m2);
      if (!fw) continue;
      fw[i] += d * xh;
      fb[i] += d;
    }
  }
}

#define DEF_NORM_F32(SUF)                                                              \
  static void fwd_##SUF(const row_job *j, int64_t r0, int64_t r1) {                   \
    for (int64_t r = r0; r < r1; r++) f32_row_forward(j, r);                           \
  }                                                                                    \
  static void dx_##SUF(const row_job *j, int64_t r0, int64_t r1, double *aw, double *ab) { \
    for (int64_t r = r0; r < r1; r++) {                                                \
      if (j->w)                                                                        \
        f32_row_dx_w(j, r, true, aw, ab);                                              \
      else                                                                             \
        f32_row_dx_w(j, r, false, aw, ab);                                             \
    }                                                                                  \
  }                                                                                    \
  static void dxw_##SUF(const row_job *j, int64_t r0, int64_t r1, float *fw, float *fb) { \
    f32_rows_dxw(j, r0, r1, fw, fb);                                                   \
  }                                                                                    \
  static void dw_##SUF(const row_job *j, double *aw, double *ab) { f32_rows_dw(j, aw, ab); } \
  static void bn_stats_##SUF(bn_job *j, int64_t c0, int64_t c1) { f32_bn_stats(j, c0, c1); } \
  static void bn_sums_##SUF(bn_job *j, int64_t c0, int64_t c1) { f32_bn_grad_sums(j, c0, c1); }

DEF_NORM_F32(sse4)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_NORM_F32(avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_NORM_F32(avx512)
LT_ISA_END
#endif

typedef struct norm_f32_kernels {
  void (*fwd)(const row_job *j, int64_t r0, int64_t r1);
  void (*dx)(const row_job *j, int64_t r0, int64_t r1, double *aw, double *ab);
  void (*dxw)(const row_job *j, int64_t r0, int64_t r1, float *fw, float *fb);
  void (*dw)(const row_job *j, double *aw, double *ab);
  void (*bn_stats)(bn_job *j, int64_t c0, int64_t c1);
  void (*bn_sums)(bn_job *j, int64_t c0, int64_t c1);
} norm_f32_kernels;

static norm_f32_kernels norm_f32_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512:
      return (norm_f32_kernels){fwd_avx512, dx_avx512, dxw_avx512, dw_avx512, bn_stats_avx512,
                                bn_sums_avx512};
    case LT_ISA_AVX2:
      return (norm_f32_kernels){fwd_avx2, dx_avx2, dxw_avx2, dw_avx2, bn_stats_avx2, bn_sums_avx2};
    default: break;
  }
#endif
  return (norm_f32_kernels){fwd_sse4, dx_sse4, dxw_sse4, dw_sse4, bn_stats_sse4, bn_sums_sse4};
}

static void bn_stats_f32(int64_t c0, int64_t c1, void *ud) {
  norm_f32_for_isa().bn_stats(ud, c0, c1);
}
static void bn_grad_sums_f32(int64_t c0, int64_t c1, void *ud) {
  norm_f32_for_isa().bn_sums(ud, c0, c1);
}

/* Rows of float64 (float32 rows take the vector kernels above). */
static void row_forward(int64_t r0, int64_t r1, void *ud) {
  row_job *j = ud;
  if (j->dt == LT_FLOAT32) {
    norm_f32_for_isa().fwd(j, r0, r1);
    return;
  }
  const double *w = j->w, *b = j->b;
  for (int64_t r = r0; r < r1; r++) {
    const double *x = (const double *)j->x + r * j->D;
    double *y = (double *)j->y + r * j->D;
    double mu = 0, rs;
    if (j->kind == LT_NORM_RMS) {
      double q = 0;
      for (int64_t i = 0; i < j->D; i++) q += x[i] * x[i];
      rs = 1.0 / sqrt(q / (double)j->D + j->eps);
    } else {
      double m2;
      moments_f64(x, j->D, &mu, &m2);
      rs = 1.0 / sqrt(m2 / (double)j->D + j->eps);
    }
    j->mean[r] = mu;
    j->rstd[r] = rs;
    if (j->kind == LT_NORM_GROUP) {
      /* per channel: y = x*(rs*w) + (b - mu*rs*w) */
      for (int64_t c = 0; c < j->Cg; c++) {
        int64_t ch = (r % j->G) * j->Cg + c;
        double wc = w ? w[ch] : 1.0, bc = b ? b[ch] : 0.0;
        affine_row(LT_FLOAT64, x + c * j->L, y + c * j->L, j->L, rs * wc, bc - mu * rs * wc);
      }
    } else if (!w && !b) {
      affine_row(LT_FLOAT64, x, y, j->D, rs, -mu * rs);
    } else {
      for (int64_t i = 0; i < j->D; i++) {
        double v = (x[i] - mu) * rs;
        if (w) v *= w[i];
        if (b) v += b[i];
        y[i] = v;
      }
    }
  }
}

/* Whether float32 rows take f32_rows_dxw: layer and rms norm with a weight. */
static bool f32_dxw(const row_job *j) { return j->kind != LT_NORM_GROUP && j->w; }

/* dx for rows: g = dy*w; LN/GN: dx = rs*(g - mean(g) - xhat*mean(g*xhat));
** RMS: dx = rs*(g - x*rs^2*mean(g*x)). */
static void row_dx(int64_t r0, int64_t r1, void *ud) {
  row_job *j = ud;
  if (j->dt == LT_FLOAT32 && f32_dxw(j)) {   /* the dx of the fused pass, whatever is asked */
    norm_f32_for_isa().dxw(j, r0, r1, NULL, NULL);
    return;
  }
  if (j->dt == LT_FLOAT32) {
    norm_f32_for_isa().dx(j, r0, r1, NULL, NULL);
    return;
  }
  const double *w = j->w;
  for (int64_t r = r0; r < r1; r++) {
    const double *x = (const double *)j->x + r * j->D, *dy = (const double *)j->dy + r * j->D;
    double *dx = (double *)j->dx + r * j->D;
    double mu = j->mean[r], rs = j->rstd[r], sg = 0, sgx = 0;
    for (int64_t i = 0; i < j->D; i++) {
      double g = w ? dy[i] * w[widx(j, r, i)] : dy[i];
      sg += g;
      sgx += g * (x[i] - mu);
    }
    double D = (double)j->D;
    /* dx = rs*g + a*x + b */
    double a = -rs * rs * rs * sgx / D;
    double b = j->kind == LT_NORM_RMS ? 0 : -rs * sg / D - a * mu;
    for (int64_t i = 0; i < j->D; i++) {
      double g = w ? dy[i] * w[widx(j, r, i)] : dy[i];
      dx[i] = rs * g + a * x[i] + b;
    }
  }
}


/* ------------------------------------------------------------ entries */

/* x as (N, C, L) */
static void bn_dims(const lt_tensor *x, int64_t *N, int64_t *C, int64_t *L) {
  *N = x->size[0];
  *C = x->size[1];
  *L = 1;
  for (int i = 2; i < x->ndim; i++) *L *= x->size[i];
}

void ltC_batch_norm(lt_ctx *ctx, lt_tensor *y, lt_tensor *mean, lt_tensor *invstd,
                    const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
                    lt_tensor *running_mean, lt_tensor *running_var, bool training,
                    double momentum, double eps) {
  bn_job j = {
      .dt = x->dtype,
      .x = ltB_ptr(x),
      .w = w ? ltB_ptr(w) : NULL,
      .b = b ? ltB_ptr(b) : NULL,
      .y = ltB_ptr(y),
      .mean = ltB_ptr(mean),
      .invstd = ltB_ptr(invstd),
      .training = training,
      .eps = eps,
      .running_mean = training ? running_mean : NULL,
      .running_var = training ? running_var : NULL,
      .momentum = momentum,
  };
  bn_dims(x, &j.N, &j.C, &j.L);
  bool shortp = j.L > 0 && j.L < BN_SHORT_L;   /* L == 0: no values, the per-plane loops */
  if (training) {
    ltB_parallel_for(ctx, j.C, grain_of(j.N * j.L),
                     shortp ? bn_short_stats : j.dt == LT_FLOAT32 ? bn_stats_f32 : bn_stats_f64, &j);
  } else {
    for (int64_t c = 0; c < j.C; c++) {
      j.mean[c] = get1(running_mean, c);
      j.invstd[c] = 1.0 / sqrt(get1(running_var, c) + eps);
    }
  }
  if (shortp)
    ltB_parallel_for(ctx, j.N * bn_short_blocks(&j), grain_of(BN_COLS), bn_short_rows, &j);
  else
    ltB_parallel_for(ctx, j.N * j.C, grain_of(j.L), bn_apply, &j);
}

int ltC_batch_norm_backward(lt_ctx *ctx, lt_tensor *dx, lt_tensor *dw, lt_tensor *db,
                            const lt_tensor *x, const lt_tensor *w, const lt_tensor *dy,
                            const lt_tensor *mean, const lt_tensor *invstd, bool training) {
  bn_job j = {
      .dt = x->dtype,
      .x = ltB_ptr(x),
      .w = w ? ltB_ptr(w) : NULL,
      .dy = ltB_ptr(dy),
      .dx = dx ? ltB_ptr(dx) : NULL,
      .mean = ltB_ptr(mean),
      .invstd = ltB_ptr(invstd),
      .training = training,
  };
  bn_dims(x, &j.N, &j.C, &j.L);
  double *sums = malloc((size_t)(2 * j.C + 1) * sizeof *sums);
  if (!sums)
    return ltB_fail(ctx, "batch_norm: out of memory for %lld channel sums", (long long)j.C);
  j.sum_dy = sums;
  j.sum_dy_xhat = sums + j.C;
  bool shortp = j.L > 0 && j.L < BN_SHORT_L;   /* L == 0: no values, the per-plane loops */
  ltB_parallel_for(ctx, j.C, grain_of(j.N * j.L),
                   shortp ? bn_short_grad_sums
                          : j.dt == LT_FLOAT32 ? bn_grad_sums_f32 : bn_grad_sums_f64, &j);
  if (dx && shortp)
    ltB_parallel_for(ctx, j.N * bn_short_blocks(&j), grain_of(BN_COLS), bn_short_rows, &j);
  else if (dx)
    ltB_parallel_for(ctx, j.N * j.C, grain_of(j.L), bn_dx, &j);
  if (dw) store_sums(dw, j.sum_dy_xhat, j.C);
  if (db) store_sums(db, j.sum_dy, j.C);
  free(sums);
  return 0;
}

static row_job row_job_of(const ltK_norm_geom *g, const lt_tensor *x, const lt_tensor *w,
                          const lt_tensor *mean, const lt_tensor *rstd) {
  return (row_job){
      .kind = g->kind,
      .dt = x->dtype,
      .R = g->R, .D = g->D, .G = g->G, .Cg = g->Cg, .L = g->L,
      .x = ltB_ptr(x),
      .w = w ? ltB_ptr(w) : NULL,
      .mean = ltB_ptr(mean),
      .rstd = ltB_ptr(rstd),
      .eps = g->eps,
  };
}

void ltC_row_norm(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *y, lt_tensor *mean,
                  lt_tensor *rstd, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b) {
  row_job j = row_job_of(g, x, w, mean, rstd);
  j.b = b ? ltB_ptr(b) : NULL;
  j.y = ltB_ptr(y);
  ltB_parallel_for(ctx, g->R, grain_of(3 * g->D), row_forward, &j);
}

/* float64 dw (aw) and db (ab): sums over the rows, in row order */
static void f64_rows_dw(const row_job *j, double *aw, double *ab) {
  for (int64_t r = 0; r < j->R; r++) {
    const double *xr = (const double *)j->x + r * j->D, *dyr = (const double *)j->dy + r * j->D;
    double mu = j->mean[r], rs = j->rstd[r];
    for (int64_t i = 0; i < j->D; i++) {
      int64_t k = widx(j, r, i);
      aw[k] += dyr[i] * (xr[i] - mu) * rs;
      ab[k] += dyr[i];
    }
  }
}

/* float32 dx with a weight gradient: dx, dw and db in one pass over x and dy (a second pass for
** the sums read them again, on one thread: LayerNorm(768) over 4096 rows, one thread, backward
** 6.3 ms against PyTorch's 3.6; GroupNorm(8, 64) over 32 x 64 x 32 x 32 4.9 against 2.1). The
** rows go in chunks of a size set by R alone, each chunk's sums into its own partial, the
** partials added in chunk order: the same result at every thread count. Group norm needs its
** weight here, whose per-channel runs give the sums. Layer and rms norm with a weight take
** f32_rows_dxw, whose partials are floats (a chunk's rows), added in double. */
#define DW_CHUNKS 64
#define DW_CHUNK_MIN 32

typedef struct {
  row_job *j;
  int64_t chunk, nw;
  double *part;   /* (chunks, 2, nw) */
  float *fsum;    /* (chunks, 2, nw): f32_rows_dxw's sums of a block of rows, or NULL */
} dxw_job;

static void row_dx_dw(int64_t c0, int64_t c1, void *ud) {
  const dxw_job *q = ud;
  const int64_t nw = q->nw;
  for (int64_t c = c0; c < c1; c++) {
    int64_t r0 = c * q->chunk, r1 = r0 + q->chunk < q->j->R ? r0 + q->chunk : q->j->R;
    double *aw = q->part + c * 2 * nw, *ab = aw + nw;
    if (!q->fsum) {
      norm_f32_for_isa().dx(q->j, r0, r1, aw, ab);
      continue;
    }
    /* DW_CHUNK_MIN rows at a time in floats, each block's sums then added in double, so that
    ** a long chunk (R / DW_CHUNKS rows) does not sum in float */
    float *f = q->fsum + c * 2 * nw;
    for (int64_t b = r0; b < r1; b += DW_CHUNK_MIN) {
      memset(f, 0, (size_t)(2 * nw) * sizeof *f);
      norm_f32_for_isa().dxw(q->j, b, b + DW_CHUNK_MIN < r1 ? b + DW_CHUNK_MIN : r1, f, f + nw);
      for (int64_t i = 0; i < nw; i++) {
        aw[i] += f[i];
        ab[i] += f[nw + i];
      }
    }
  }
}

static bool fused_dx_dw(lt_ctx *ctx, row_job *j, int64_t nw, double *aw, double *ab) {
  int64_t chunk = (j->R + DW_CHUNKS - 1) / DW_CHUNKS;
  if (chunk < DW_CHUNK_MIN) chunk = DW_CHUNK_MIN;
  int64_t n = (j->R + chunk - 1) / chunk;
  double *part = calloc((size_t)(n * 2 * nw + 1), sizeof *part);
  float *fsum = f32_dxw(j) ? malloc((size_t)(n * 2 * nw + 1) * sizeof *fsum) : NULL;
  if (!part || (f32_dxw(j) && !fsum)) {
    free(part);
    free(fsum);
    return false;
  }
  dxw_job q = {j, chunk, nw, part, fsum};
  ltB_parallel_for(ctx, n, 1, row_dx_dw, &q);
  for (int64_t c = 0; c < n; c++)
    for (int64_t i = 0; i < nw; i++) {
      aw[i] += part[c * 2 * nw + i];
      ab[i] += part[c * 2 * nw + nw + i];
    }
  free(part);
  free(fsum);
  return true;
}

int ltC_row_norm_backward(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *dx, lt_tensor *dw,
                          lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                          const lt_tensor *dy, const lt_tensor *mean, const lt_tensor *rstd) {
  row_job j = row_job_of(g, x, w, mean, rstd);
  j.dy = ltB_ptr(dy);
  const char *op = g->kind == LT_NORM_GROUP ? "group_norm"
                   : g->kind == LT_NORM_RMS ? "rms_norm" : "layer_norm";
  /* weight index space: D (layer, rms) or C = G*Cg (group) */
  int64_t nw = g->kind == LT_NORM_GROUP ? g->G * g->Cg : g->D;
  double *acc = NULL;
  if (dw || db) {
    acc = calloc((size_t)(2 * nw + 1), sizeof *acc);
    if (!acc) return ltB_fail(ctx, "%s: out of memory for %lld weight sums", op, (long long)nw);
  }
  double *aw = acc, *ab = acc ? acc + nw : NULL;
  if (dx) j.dx = ltB_ptr(dx);
  if (dx && acc && j.dt == LT_FLOAT32 && (g->kind != LT_NORM_GROUP || j.w)) {
    if (!fused_dx_dw(ctx, &j, nw, aw, ab)) {
      free(acc);
      return ltB_fail(ctx, "%s: out of memory for the weight sums' partials", op);
    }
  } else {
    if (dx) ltB_parallel_for(ctx, g->R, grain_of(3 * g->D), row_dx, &j);
    if (!acc) return 0;
    if (j.dt == LT_FLOAT32)
      norm_f32_for_isa().dw(&j, aw, ab);
    else
      f64_rows_dw(&j, aw, ab);
  }
  if (dw) store_sums(dw, aw, nw);
  if (db) store_sums(db, ab, nw);
  free(acc);
  return 0;
}

