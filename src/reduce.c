/*
** reduce.c -- reductions and their gradients.
**
**   lt_reduce            sum mean prod amax amin all any over a set of dims (or all), keepdim
**   lt_max / lt_min      full reductions; ties share the gradient (MaxBackward1)
**   lt_max_dim/min_dim   values + int64 indices along one dim (MaxBackward0)
**   lt_argmax/argmin     over all dims (flattened index) or along one dim
**   lt_var / lt_std      with `correction`; lt_norm (any p); lt_logsumexp (stable)
**   lt_softmax, lt_log_softmax, lt_cumsum along one dim
**
** Kernel plan of lt_reduce. The input is split into two index spaces: the kept dims (one output
** element each) and the reduced dims "R" (the elements folded into one output). Size-1 dims
** are dropped; each space is sorted by stride and collapsed where contiguous. Then either
**  - inner mode (an R dim moves fastest in memory): every output folds its R elements with a
**    row kernel, unit-stride in the common case; or
**  - column mode (a kept dim moves fastest): a block of neighbouring outputs is accumulated
**    row by row, acc[j] += x[r][j], which vectorises across outputs (sum over the batch dim).
** Long reductions are cut into fixed-size chunks of R whose partial results are combined in
** chunk order, so results depend on the shape only, never on the number of threads; float
** sums accumulate in double inside a chunk.
**
** Single-dim ops (softmax, max along a dim, cumsum, ...) walk "rows": one row per position of
** the other dims, of length size[dim] and stride stride[dim] (rowit below), rows in parallel.
** var/std/norm/logsumexp are composed from lt_reduce and elementwise ops (computed with grad
** mode off, then recorded as one node).
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core.h"

typedef union acc {
  double d;
  int64_t i;
  uint64_t u;   /* integer sums and products wrap instead of overflowing */
} acc_t;

#define CHUNK 32768   /* R elements per partial result in inner mode */
#define COLW 2048     /* outputs per block in column mode */

static int64_t absi(int64_t x) { return x < 0 ? -x : x; }
static int64_t mini(int64_t a, int64_t b) { return a < b ? a : b; }

/* ================================================================ dims and shapes */

/* Marks the reduced dims of a (ndims 0 or dims NULL: all). Dims may be negative. */
static int dims_mask(lt_ctx *ctx, const char *op, const lt_tensor *a, int ndims, const int *dims,
                     bool *mask) {
  for (int d = 0; d < LT_MAX_DIMS; d++) mask[d] = false;
  if (ndims < 0 || ndims > LT_MAX_DIMS)
    return lt_fail(ctx, "%s: %d dims given, at most %d supported", op, ndims, LT_MAX_DIMS);
  if (ndims == 0 || !dims) {
    for (int d = 0; d < a->ndim; d++) mask[d] = true;
    return 0;
  }
  bool seen[LT_MAX_DIMS] = {false};
  for (int i = 0; i < ndims; i++) {
    int d;
    if (lt_wrap_dim(ctx, op, dims[i], a->ndim, &d)) return -1;
    if (seen[d]) return lt_fail(ctx, "%s: dim %d appears multiple times in the list of dims", op,
                                d + 1);
    seen[d] = true;
    if (a->ndim > 0) mask[d] = true;
  }
  return 0;
}

/* Output shape of a reduction; returns its rank. */
static int out_shape(const lt_tensor *a, const bool *mask, bool keepdim, int64_t *size) {
  int n = 0;
  for (int d = 0; d < a->ndim; d++) {
    if (!mask[d])
      size[n++] = a->size[d];
    else if (keepdim)
      size[n++] = 1;
  }
  return n;
}

/* Number of elements folded into each output. */
static int64_t reduced_count(const lt_tensor *a, const bool *mask) {
  int64_t n = 1;
  for (int d = 0; d < a->ndim; d++)
    if (mask[d]) n *= a->size[d];
  return n;
}

/* What a reduction node remembers about its input. */
typedef struct red_extra {
  int ndim;
  int64_t size[LT_MAX_DIMS];
  bool mask[LT_MAX_DIMS];
  bool keepdim;
  int dim;        /* single-dim ops */
  double p;       /* norm's p; var/std's denominator */
  int64_t count;  /* elements per output */
} red_extra;

static void extra_fill(red_extra *e, const lt_tensor *a, const bool *mask, bool keepdim) {
  e->ndim = a->ndim;
  for (int d = 0; d < a->ndim; d++) {
    e->size[d] = a->size[d];
    e->mask[d] = mask[d];
  }
  e->keepdim = keepdim;
  e->count = reduced_count(a, mask);
}

/* The reduced dims as a list (for calling lt_reduce again); 0 means all. */
static int extra_dims(const red_extra *e, int *dims) {
  int n = 0;
  for (int d = 0; d < e->ndim; d++)
    if (e->mask[d]) dims[n++] = d;
  return n == e->ndim ? 0 : n;
}

/* A view of t -- shaped like the op's output -- with the input's rank: reduced dims get size
** 1 (expand=false) or their input size with stride 0 (expand=true). NULL on OOM or shape
** mismatch. */
static lt_tensor *kview(const lt_tensor *t, const red_extra *e, bool expand) {
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  int j = 0;
  for (int d = 0; d < e->ndim; d++) {
    if (e->mask[d]) {
      size[d] = expand ? e->size[d] : 1;
      stride[d] = 0;
      if (e->keepdim) j++;
    } else {
      if (j >= t->ndim) return NULL;
      size[d] = e->size[d];
      stride[d] = t->stride[j++];
    }
  }
  if (j != t->ndim) return NULL;
  return lt_alias(t, e->ndim, size, stride, t->offset);
}

static int oom(lt_ctx *ctx, const char *op) { return lt_fail(ctx, "%s: out of memory", op); }

/* ================================================================ float32 vector helpers
** Four-lane GCC/clang vector extensions (SSE on x86-64, NEON on arm64), with scalar
** fallbacks. exp4 reduces x = n ln2 + r (|r| <= ln2/2, two-part ln2) and sums the Taylor
** series of e^r to degree 7 (truncation 5e-9, a few ulp in all); for x < -87 it gives 0
** (denormal results flushed), NaN stays NaN. It is meant for x <= 88 (softmax feeds x <= 0). */
#if defined(__GNUC__)
#define LT_VEC4 1
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));

static inline v4f v4load(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v4store(float *p, v4f v) { memcpy(p, &v, sizeof v); }
static inline v4f v4splat(float x) { return (v4f){x, x, x, x}; }
static inline v4f v4sel(v4i m, v4f a, v4f b) { return (v4f)((m & (v4i)a) | (~m & (v4i)b)); }
static inline double v4hsum(v4f v) { return ((double)v[0] + v[1]) + ((double)v[2] + v[3]); }

static inline v4f exp4(v4f v) {
  const v4f lo = v4splat(-87.0f), hi = v4splat(88.0f), magic = v4splat(12582912.0f);
  v4f c = v4sel(v < lo, lo, v);
  c = v4sel(c > hi, hi, c);
  v4f fn = (c * v4splat(1.44269504088896341f) + magic) - magic;   /* round to nearest */
  v4f r = c - fn * v4splat(0.693145751953125f);
  r = r - fn * v4splat(1.428606765330187045e-06f);
  v4f q = v4splat(1.0f / 5040);
  q = q * r + v4splat(1.0f / 720);
  q = q * r + v4splat(1.0f / 120);
  q = q * r + v4splat(1.0f / 24);
  q = q * r + v4splat(1.0f / 6);
  q = q * r + v4splat(0.5f);
  q = q * r + v4splat(1.0f);
  q = q * r + v4splat(1.0f);
  v4u e = (v4u)(__builtin_convertvector(fn, v4i) + 127) << 23;   /* 2^n */
  return v4sel(v < lo, v4splat(0.0f), q * (v4f)e);
}

#endif

/* The largest (is_max) or smallest of x[0..n), n >= 1, ignoring NaNs; *nan tells if any. */
static float extreme_f32(const float *x, int64_t n, bool is_max, bool *nan) {
  int64_t i = 0;
  float m = x[0];
  bool seen = false;
#ifdef LT_VEC4
  if (n >= 8) {
    v4f m0 = v4load(x), m1 = v4load(x + 4);
    v4i bad = (m0 != m0) | (m1 != m1);
    m0 = v4sel(m0 != m0, v4splat(is_max ? -INFINITY : INFINITY), m0);
    m1 = v4sel(m1 != m1, v4splat(is_max ? -INFINITY : INFINITY), m1);
    for (i = 8; i + 8 <= n; i += 8) {
      v4f a = v4load(x + i), b = v4load(x + i + 4);
      bad |= (a != a) | (b != b);
      if (is_max) {
        m0 = v4sel(a > m0, a, m0);
        m1 = v4sel(b > m1, b, m1);
      } else {
        m0 = v4sel(a < m0, a, m0);
        m1 = v4sel(b < m1, b, m1);
      }
    }
    m0 = is_max ? v4sel(m1 > m0, m1, m0) : v4sel(m1 < m0, m1, m0);
    m = m0[0];
    for (int k = 1; k < 4; k++) m = (is_max ? m0[k] > m : m0[k] < m) ? m0[k] : m;
    seen = bad[0] | bad[1] | bad[2] | bad[3];
  }
#endif
  for (; i < n; i++) {
    float v = x[i];
    if (v != v) seen = true;
    else if (m != m || (is_max ? v > m : v < m)) m = v;
  }
  *nan = seen;
  return m;
}

/* ================================================================ fold kernels */

static acc_t acc_init(int op, bool fl) {
  acc_t a;
  switch (op) {
    case LT_RPROD: if (fl) a.d = 1.0; else a.u = 1; break;
    case LT_RAMAX: if (fl) a.d = -INFINITY; else a.i = INT64_MIN; break;
    case LT_RAMIN: if (fl) a.d = INFINITY; else a.i = INT64_MAX; break;
    case LT_RALL: a.i = 1; break;
    case LT_RANY: a.i = 0; break;
    default: if (fl) a.d = 0.0; else a.u = 0; break;
  }
  return a;
}

static acc_t acc_combine(int op, bool fl, acc_t a, acc_t b) {
  switch (op) {
    case LT_RPROD: if (fl) a.d *= b.d; else a.u *= b.u; break;
    case LT_RAMAX:
      if (fl) {
        if (b.d > a.d || b.d != b.d) a.d = b.d;   /* NaN wins and stays */
      } else if (b.i > a.i) {
        a.i = b.i;
      }
      break;
    case LT_RAMIN:
      if (fl) {
        if (b.d < a.d || b.d != b.d) a.d = b.d;
      } else if (b.i < a.i) {
        a.i = b.i;
      }
      break;
    case LT_RALL: a.i = a.i && b.i; break;
    case LT_RANY: a.i = a.i || b.i; break;
    default: if (fl) a.d += b.d; else a.u += b.u; break;
  }
  return a;
}

/* Sum of n strided elements, accumulated in double over 8 (contiguous) or 4 lanes so the
** compiler vectorises it and long float32 sums stay accurate; one body for both dtypes. */
#define DEF_SUM(NAME, T)                                                              \
  static double NAME(const T *x, int64_t s, int64_t n) {                              \
    double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                           \
    int64_t i = 0;                                                                    \
    if (s == 1)                                                                       \
      for (; i + 8 <= n; i += 8)                                                      \
        for (int k = 0; k < 8; k++) a[k] += x[i + k];                                 \
    else                                                                              \
      for (; i + 4 <= n; i += 4)                                                      \
        for (int k = 0; k < 4; k++) a[k] += x[(i + k) * s];                           \
    double t = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));    \
    for (; i < n; i++) t += x[i * s];                                                 \
    return t;                                                                         \
  }
DEF_SUM(sum_f32, float)
DEF_SUM(sum_f64, double)

/* all/any over a row, shared by the float and integer folds: stop at the first deciding element */
#define FOLD_ALL_ANY                                                                 \
  case LT_RALL:                                                                      \
    if (acc->i)                                                                      \
      for (int64_t i = 0; i < n; i++)                                                \
        if (x[i * s] == 0) { acc->i = 0; break; }                                    \
    return;                                                                          \
  case LT_RANY:                                                                      \
    if (!acc->i)                                                                     \
      for (int64_t i = 0; i < n; i++)                                                \
        if (x[i * s] != 0) { acc->i = 1; break; }                                    \
    return;

/* acc = fold(acc, x[0], x[s], ..., x[(n-1)s]) for an input of dtype dt (s in elements). */
#define FOLD_FLOAT(T, SUMF)                                                          \
  {                                                                                  \
    const T *x = (const T *)p;                                                       \
    switch (op) {                                                                    \
      case LT_RSUM: case LT_RMEAN: acc->d += SUMF(x, s, n); return;                  \
      case LT_RPROD: {                                                               \
        double v = acc->d;                                                           \
        for (int64_t i = 0; i < n; i++) v *= x[i * s];                               \
        acc->d = v;                                                                  \
        return;                                                                      \
      }                                                                              \
      case LT_RAMAX: {                                                               \
        T m = (T)acc->d;                                                             \
        for (int64_t i = 0; i < n; i++) {                                            \
          T v = x[i * s];                                                            \
          if (v > m || v != v) m = v;                                                \
        }                                                                            \
        acc->d = m;                                                                  \
        return;                                                                      \
      }                                                                              \
      case LT_RAMIN: {                                                               \
        T m = (T)acc->d;                                                             \
        for (int64_t i = 0; i < n; i++) {                                            \
          T v = x[i * s];                                                            \
          if (v < m || v != v) m = v;                                                \
        }                                                                            \
        acc->d = m;                                                                  \
        return;                                                                      \
      }                                                                              \
      FOLD_ALL_ANY                                                                   \
    }                                                                                \
    return;                                                                          \
  }

#define FOLD_INT(T)                                                                  \
  {                                                                                  \
    const T *x = (const T *)p;                                                       \
    switch (op) {                                                                    \
      case LT_RSUM: case LT_RMEAN: {                                                 \
        uint64_t v = acc->u;                                                         \
        for (int64_t i = 0; i < n; i++) v += (uint64_t)x[i * s];                     \
        acc->u = v;                                                                  \
        return;                                                                      \
      }                                                                              \
      case LT_RPROD: {                                                               \
        uint64_t v = acc->u;                                                         \
        for (int64_t i = 0; i < n; i++) v *= (uint64_t)x[i * s];                     \
        acc->u = v;                                                                  \
        return;                                                                      \
      }                                                                              \
      case LT_RAMAX: {                                                               \
        int64_t m = acc->i;                                                          \
        for (int64_t i = 0; i < n; i++)                                              \
          if ((int64_t)x[i * s] > m) m = (int64_t)x[i * s];                          \
        acc->i = m;                                                                  \
        return;                                                                      \
      }                                                                              \
      case LT_RAMIN: {                                                               \
        int64_t m = acc->i;                                                          \
        for (int64_t i = 0; i < n; i++)                                              \
          if ((int64_t)x[i * s] < m) m = (int64_t)x[i * s];                          \
        acc->i = m;                                                                  \
        return;                                                                      \
      }                                                                              \
      FOLD_ALL_ANY                                                                   \
    }                                                                                \
    return;                                                                          \
  }

static void fold_row(int op, lt_dtype dt, acc_t *acc, const char *p, int64_t s, int64_t n) {
  if (dt == LT_FLOAT32 && s == 1 && n >= 16 && (op == LT_RAMAX || op == LT_RAMIN)) {
    bool nan;
    float m = extreme_f32((const float *)p, n, op == LT_RAMAX, &nan);
    acc_t b;
    b.d = nan ? NAN : m;
    *acc = acc_combine(op, true, *acc, b);
    return;
  }
  switch (dt) {
    case LT_FLOAT32: FOLD_FLOAT(float, sum_f32)
    case LT_FLOAT64: FOLD_FLOAT(double, sum_f64)
    case LT_INT64: FOLD_INT(int64_t)
    default: FOLD_INT(uint8_t)
  }
}

/* acc[j] = fold(acc[j], x[j*s]) for j < n: one input row into a block of outputs. Float
** accumulators live in ad, integer ones (and all/any flags) in ai; plain typed arrays so that
** the loops vectorise. */
#define COL_FLOAT(T)                                                                 \
  {                                                                                  \
    const T *x = (const T *)p;                                                       \
    switch (op) {                                                                    \
      case LT_RSUM: case LT_RMEAN:                                                   \
        if (s == 1)                                                                  \
          for (int64_t j = 0; j < n; j++) ad[j] += x[j];                             \
        else                                                                         \
          for (int64_t j = 0; j < n; j++) ad[j] += x[j * s];                         \
        return;                                                                      \
      case LT_RPROD:                                                                 \
        for (int64_t j = 0; j < n; j++) ad[j] *= x[j * s];                           \
        return;                                                                      \
      case LT_RAMAX:                                                                 \
        for (int64_t j = 0; j < n; j++) {                                            \
          double v = x[j * s], a = ad[j];                                            \
          ad[j] = (v > a || v != v) ? v : a;                                         \
        }                                                                            \
        return;                                                                      \
      case LT_RAMIN:                                                                 \
        for (int64_t j = 0; j < n; j++) {                                            \
          double v = x[j * s], a = ad[j];                                            \
          ad[j] = (v < a || v != v) ? v : a;                                         \
        }                                                                            \
        return;                                                                      \
      case LT_RALL:                                                                  \
        for (int64_t j = 0; j < n; j++) ai[j] &= x[j * s] != 0;                      \
        return;                                                                      \
      case LT_RANY:                                                                  \
        for (int64_t j = 0; j < n; j++) ai[j] |= x[j * s] != 0;                      \
        return;                                                                      \
    }                                                                                \
    return;                                                                          \
  }

#define COL_INT(T)                                                                   \
  {                                                                                  \
    const T *x = (const T *)p;                                                       \
    uint64_t *au = (uint64_t *)ai;                                                   \
    switch (op) {                                                                    \
      case LT_RSUM: case LT_RMEAN:                                                   \
        for (int64_t j = 0; j < n; j++) au[j] += (uint64_t)x[j * s];                 \
        return;                                                                      \
      case LT_RPROD:                                                                 \
        for (int64_t j = 0; j < n; j++) au[j] *= (uint64_t)x[j * s];                 \
        return;                                                                      \
      case LT_RAMAX:                                                                 \
        for (int64_t j = 0; j < n; j++) {                                            \
          int64_t v = (int64_t)x[j * s];                                             \
          ai[j] = v > ai[j] ? v : ai[j];                                             \
        }                                                                            \
        return;                                                                      \
      case LT_RAMIN:                                                                 \
        for (int64_t j = 0; j < n; j++) {                                            \
          int64_t v = (int64_t)x[j * s];                                             \
          ai[j] = v < ai[j] ? v : ai[j];                                             \
        }                                                                            \
        return;                                                                      \
      case LT_RALL:                                                                  \
        for (int64_t j = 0; j < n; j++) ai[j] &= x[j * s] != 0;                      \
        return;                                                                      \
      case LT_RANY:                                                                  \
        for (int64_t j = 0; j < n; j++) ai[j] |= x[j * s] != 0;                      \
        return;                                                                      \
    }                                                                                \
    return;                                                                          \
  }

static void fold_col(int op, lt_dtype dt, double *restrict ad, int64_t *restrict ai,
                     const char *p, int64_t s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32:
      if (s == 1 && (op == LT_RSUM || op == LT_RMEAN)) {   /* the lt_sum_to hot path */
        const float *x = (const float *)p;
        for (int64_t j = 0; j < n; j++) ad[j] += x[j];
        return;
      }
      COL_FLOAT(float)
    case LT_FLOAT64: COL_FLOAT(double)
    case LT_INT64: COL_INT(int64_t)
    default: COL_INT(uint8_t)
  }
}

/* ================================================================ reduction plan */

typedef struct plan {
  int op;
  lt_dtype dt, odt;
  bool fl;                /* accumulate in double (float input, not all/any) */
  const char *in;
  char *out;
  int64_t ies, oes;       /* element sizes */
  int nk, nr;             /* kept / reduced dims after collapsing */
  int64_t ks[LT_MAX_DIMS], kis[LT_MAX_DIMS], kos[LT_MAX_DIMS];
  int64_t rs[LT_MAX_DIMS], ris[LT_MAX_DIMS];
  int64_t nout, N;
  bool col;               /* column mode */
  int64_t L, W, nb;       /* column mode: innermost kept size, block width, blocks per row */
  int64_t cr, nchunk;     /* R indices per chunk, chunks per output */
  acc_t *part;            /* [nout][nchunk] partial results when nchunk > 1 */
} plan;

static void plan_finalize(const plan *p, acc_t a, char *dst) {
  double v = 0;
  switch (p->op) {
    case LT_RALL: case LT_RANY: *(uint8_t *)dst = a.i != 0; return;
    case LT_RMEAN: v = a.d / (double)p->N; break;
    default:
      if (!p->fl) {
        if (p->odt == LT_BOOL)
          *(uint8_t *)dst = a.i != 0;
        else
          *(int64_t *)dst = a.i;
        return;
      }
      v = a.d;
  }
  if (p->odt == LT_FLOAT32)
    *(float *)dst = (float)v;
  else
    *(double *)dst = v;
}

/* plan_finalize for w accumulators of column mode (ad: float kind, ai: integer kind) into
** dst with an element stride of ds. */
static void plan_finalize_block(const plan *p, const double *ad, const int64_t *ai, int64_t w,
                                char *dst, int64_t ds) {
  if (p->op == LT_RALL || p->op == LT_RANY || (!p->fl && p->odt == LT_BOOL)) {
    uint8_t *o = (uint8_t *)dst;
    for (int64_t j = 0; j < w; j++) o[j * ds] = ai[j] != 0;
  } else if (!p->fl) {
    int64_t *o = (int64_t *)dst;
    for (int64_t j = 0; j < w; j++) o[j * ds] = ai[j];
  } else {
    bool mean = p->op == LT_RMEAN;
    if (p->odt == LT_FLOAT32) {
      float *o = (float *)dst;
      for (int64_t j = 0; j < w; j++)
        o[j * ds] = (float)(mean ? ad[j] / (double)p->N : ad[j]);
    } else {
      double *o = (double *)dst;
      for (int64_t j = 0; j < w; j++) o[j * ds] = mean ? ad[j] / (double)p->N : ad[j];
    }
  }
}

/* Sorts dims by |stride| (largest first, stable) and merges neighbours that are contiguous in
** s1 and (when given) s2. Returns the new count. */
static int collapse(int n, int64_t *size, int64_t *s1, int64_t *s2) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && absi(s1[j - 1]) < absi(s1[j]); j--) {
      int64_t t = size[j]; size[j] = size[j - 1]; size[j - 1] = t;
      t = s1[j]; s1[j] = s1[j - 1]; s1[j - 1] = t;
      if (s2) { t = s2[j]; s2[j] = s2[j - 1]; s2[j - 1] = t; }
    }
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0 && s1[m - 1] == s1[i] * size[i] && (!s2 || s2[m - 1] == s2[i] * size[i])) {
      size[m - 1] *= size[i];
      s1[m - 1] = s1[i];
      if (s2) s2[m - 1] = s2[i];
      continue;
    }
    size[m] = size[i];
    s1[m] = s1[i];
    if (s2) s2[m] = s2[i];
    m++;
  }
  return m;
}

static void plan_build(plan *p, int op, const lt_tensor *a, const bool *mask, lt_tensor *out) {
  p->op = op;
  p->dt = a->dtype;
  p->odt = out->dtype;
  p->fl = lt_dtype_is_float(a->dtype) && op != LT_RALL && op != LT_RANY;
  p->in = lt_data(a);
  p->out = lt_data(out);
  p->ies = (int64_t)lt_dtype_size(a->dtype);
  p->oes = (int64_t)lt_dtype_size(out->dtype);
  p->part = NULL;
  /* the output is contiguous over the kept dims in their natural order */
  int64_t kos[LT_MAX_DIMS], run = 1;
  for (int d = a->ndim - 1; d >= 0; d--)
    if (!mask[d]) {
      kos[d] = run;
      run *= a->size[d];
    }
  p->nk = p->nr = 0;
  for (int d = 0; d < a->ndim; d++) {
    if (a->size[d] == 1) continue;
    if (mask[d]) {
      p->rs[p->nr] = a->size[d];
      p->ris[p->nr++] = a->stride[d];
    } else {
      p->ks[p->nk] = a->size[d];
      p->kis[p->nk] = a->stride[d];
      p->kos[p->nk++] = kos[d];
    }
  }
  p->nk = collapse(p->nk, p->ks, p->kis, p->kos);
  p->nr = collapse(p->nr, p->rs, p->ris, NULL);
  p->nout = lt_shape_numel(p->nk, p->ks);
  p->N = lt_shape_numel(p->nr, p->rs);
  if (p->nr == 0 && p->nk > 0) {   /* nothing to fold: one pass in column mode */
    p->rs[0] = 1;
    p->ris[0] = 0;
    p->nr = 1;
  }
  /* column mode when a kept dim moves fastest (and is long enough to amortise a call per
  ** input row), or when the innermost R run is too short for per-output folding to pay off */
  p->col = p->nk > 0 && p->nr > 0 &&
           ((absi(p->kis[p->nk - 1]) < absi(p->ris[p->nr - 1]) && p->ks[p->nk - 1] >= 8) ||
            (p->rs[p->nr - 1] < 16 && p->ks[p->nk - 1] >= 16));
  if (p->col) {
    p->L = p->ks[p->nk - 1];
    p->W = mini(p->L, COLW);
    p->nb = (p->L + p->W - 1) / p->W;
    p->cr = CHUNK / p->W > 1024 ? CHUNK / p->W : 1024;
  } else {
    p->L = p->W = p->nb = 1;
    p->cr = CHUNK;
  }
  p->nchunk = p->N > p->cr ? (p->N + p->cr - 1) / p->cr : 1;
}

/* Walks the first nk kept dims in order, tracking input and output offsets (elements). */
typedef struct kcount {
  int64_t idx[LT_MAX_DIMS];
  int64_t ioff, ooff;
} kcount;

static void kc_init(kcount *c, const plan *p, int nk, int64_t o) {
  c->ioff = c->ooff = 0;
  for (int d = nk - 1; d >= 0; d--) {
    c->idx[d] = o % p->ks[d];
    o /= p->ks[d];
    c->ioff += c->idx[d] * p->kis[d];
    c->ooff += c->idx[d] * p->kos[d];
  }
}

static void kc_next(kcount *c, const plan *p, int nk) {
  for (int d = nk - 1; d >= 0; d--) {
    c->ioff += p->kis[d];
    c->ooff += p->kos[d];
    if (++c->idx[d] < p->ks[d]) return;
    c->ioff -= p->ks[d] * p->kis[d];
    c->ooff -= p->ks[d] * p->kos[d];
    c->idx[d] = 0;
  }
}

/* Folds R elements [r0, r1) of the output whose first element is at base. */
static void fold_span(const plan *p, acc_t *acc, const char *base, int64_t r0, int64_t r1) {
  if (r0 >= r1) return;
  if (p->nr == 0) {
    fold_row(p->op, p->dt, acc, base, 0, 1);
    return;
  }
  int nr = p->nr;
  int64_t inner = p->rs[nr - 1], is = p->ris[nr - 1];
  if (nr == 1) {
    fold_row(p->op, p->dt, acc, base + r0 * is * p->ies, is, r1 - r0);
    return;
  }
  /* odometer over the outer R dims, one division per span */
  int64_t idx[LT_MAX_DIMS], q = r0 / inner, i = r0 % inner, off = 0;
  for (int d = nr - 2; d >= 0; d--) {
    idx[d] = q % p->rs[d];
    q /= p->rs[d];
    off += idx[d] * p->ris[d];
  }
  for (int64_t r = r0; r < r1;) {
    int64_t n = mini(inner - i, r1 - r);
    fold_row(p->op, p->dt, acc, base + (off + i * is) * p->ies, is, n);
    r += n;
    i = 0;
    for (int d = nr - 2; d >= 0; d--) {
      off += p->ris[d];
      if (++idx[d] < p->rs[d]) break;
      off -= p->rs[d] * p->ris[d];
      idx[d] = 0;
    }
  }
}

/* Inner mode: unit u is chunk (u % nchunk) of output (u / nchunk). */
static void run_inner(int64_t u0, int64_t u1, void *ud) {
  const plan *p = ud;
  int64_t c = u0 % p->nchunk;
  kcount kc;
  kc_init(&kc, p, p->nk, u0 / p->nchunk);
  for (int64_t u = u0; u < u1; u++) {
    acc_t acc = acc_init(p->op, p->fl);
    int64_t r0 = c * p->cr;
    fold_span(p, &acc, p->in + kc.ioff * p->ies, r0, mini(p->N, r0 + p->cr));
    if (p->nchunk == 1)
      plan_finalize(p, acc, p->out + kc.ooff * p->oes);
    else
      p->part[u] = acc;
    if (++c == p->nchunk) {
      c = 0;
      kc_next(&kc, p, p->nk);
    }
  }
}

/* Column mode: unit u is chunk c of column block b of outer kept position q. */
static void run_col(int64_t u0, int64_t u1, void *ud) {
  const plan *p = ud;
  double ad[COLW];
  int64_t ai[COLW];
  int nk1 = p->nk - 1;
  int64_t cis = p->kis[nk1], cos_ = p->kos[nk1];
  int64_t ridx[LT_MAX_DIMS];
  acc_t a0 = acc_init(p->op, p->fl);
  for (int64_t u = u0; u < u1; u++) {
    int64_t c = u % p->nchunk, t = u / p->nchunk, b = t % p->nb, q = t / p->nb;
    kcount kc;
    kc_init(&kc, p, nk1, q);
    int64_t j0 = b * p->W, w = mini(p->W, p->L - j0);
    for (int64_t j = 0; j < w; j++) {
      ad[j] = a0.d;
      ai[j] = a0.i;
    }
    int64_t r0 = c * p->cr, r1 = mini(p->N, r0 + p->cr);
    const char *base = p->in + (kc.ioff + j0 * cis) * p->ies;
    /* odometer over R starting at r0 */
    int64_t off = 0, rr = r0;
    for (int d = p->nr - 1; d >= 0; d--) {
      ridx[d] = rr % p->rs[d];
      rr /= p->rs[d];
      off += ridx[d] * p->ris[d];
    }
    for (int64_t r = r0; r < r1; r++) {
      fold_col(p->op, p->dt, ad, ai, base + off * p->ies, cis, w);
      for (int d = p->nr - 1; d >= 0; d--) {
        off += p->ris[d];
        if (++ridx[d] < p->rs[d]) break;
        off -= p->rs[d] * p->ris[d];
        ridx[d] = 0;
      }
    }
    if (p->nchunk == 1) {
      plan_finalize_block(p, ad, ai, w, p->out + (kc.ooff + j0 * cos_) * p->oes, cos_);
      continue;
    }
    int64_t o = q * p->L + j0;
    for (int64_t j = 0; j < w; j++) {
      acc_t a;
      if (p->fl)
        a.d = ad[j];
      else
        a.i = ai[j];
      p->part[(o + j) * p->nchunk + c] = a;
    }
  }
}

/* Combines each output's partial results in chunk order. */
static void run_combine(int64_t o0, int64_t o1, void *ud) {
  const plan *p = ud;
  kcount kc;
  kc_init(&kc, p, p->nk, o0);
  for (int64_t o = o0; o < o1; o++) {
    const acc_t *pp = p->part + o * p->nchunk;
    acc_t a = pp[0];
    for (int64_t c = 1; c < p->nchunk; c++) a = acc_combine(p->op, p->fl, a, pp[c]);
    plan_finalize(p, a, p->out + kc.ooff * p->oes);
    kc_next(&kc, p, p->nk);
  }
}

static int64_t grain_for(int64_t work_per_unit) {
  if (work_per_unit < 1) work_per_unit = 1;
  return (LT_PAR_MIN + work_per_unit - 1) / work_per_unit;
}

/* Runs reduction op of a over mask into the (already shaped) contiguous tensor out. */
static int reduce_kernel(lt_ctx *ctx, const char *name, int op, const lt_tensor *a,
                         const bool *mask, lt_tensor *out) {
  plan p;
  plan_build(&p, op, a, mask, out);
  if (p.nout == 0) return 0;
  if (p.nchunk > 1) {
    p.part = malloc((size_t)(p.nout * p.nchunk) * sizeof *p.part);
    if (!p.part) return oom(ctx, name);
  }
  int64_t span = mini(p.N, p.cr);
  if (p.col) {
    int64_t units = p.nout / p.L * p.nb * p.nchunk;
    lt_parallel_for(ctx, units, grain_for(span * p.W), run_col, &p);
  } else {
    lt_parallel_for(ctx, p.nout * p.nchunk, grain_for(span), run_inner, &p);
  }
  if (p.part) {
    lt_parallel_for(ctx, p.nout, grain_for(p.nchunk * 4), run_combine, &p);
    free(p.part);
  }
  return 0;
}

/* ================================================================ lt_reduce + gradients */

static int sum_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const red_extra *e = self->extra;
  if (!gout[0]) return 0;
  gin[0] = kview(gout[0], e, true);
  return gin[0] ? 0 : oom(ctx, self->type->name);
}

static int mean_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *v = kview(gout[0], e, true);
  if (!v) return oom(ctx, self->type->name);
  int rc = lt_binary_scalar(ctx, &gin[0], LT_DIV, v, (double)e->count, false, false);
  lt_release(v);
  return rc;
}

/* Copies t (shape of the input of e) into a new contiguous [M, N] buffer: row m holds the
** elements folded into output m (kept dims and reduced dims each in natural order). */
static int rows_perm(const red_extra *e, const lt_tensor *t, int64_t *size, int64_t *stride) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < e->ndim; d++)
      if (e->mask[d] == (pass == 1)) {
        size[n] = t->size[d];
        stride[n++] = t->stride[d];
      }
  return n;
}

static int rows_gather(lt_ctx *ctx, lt_tensor **out, const red_extra *e, lt_tensor *t) {
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  int n = rows_perm(e, t, size, stride);
  lt_tensor *v = lt_alias(t, n, size, stride, t->offset), *o = NULL;
  if (!v) return oom(ctx, "gather");
  int rc = lt_empty(ctx, &o, t->dtype, n, size);
  if (!rc) rc = lt_copy_(ctx, o, v);
  lt_release(v);
  if (rc) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

/* Inverse of rows_gather: a tensor shaped like the input of e from contiguous rows. */
static int rows_scatter(lt_ctx *ctx, lt_tensor **out, const red_extra *e, lt_tensor *rows) {
  lt_tensor *o = NULL;
  if (lt_empty(ctx, &o, rows->dtype, e->ndim, e->size)) return -1;
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS], cst[LT_MAX_DIMS];
  int n = rows_perm(e, o, size, stride);
  lt_contiguous_strides(n, size, cst);
  lt_tensor *dv = lt_alias(o, n, size, stride, o->offset);
  lt_tensor *sv = lt_alias(rows, n, size, cst, rows->offset);
  int rc = (dv && sv) ? lt_copy_(ctx, dv, sv) : oom(ctx, "scatter");
  lt_release(dv);
  lt_release(sv);
  if (rc) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

/* Gradient of a product over each row of X (M rows of N), given one incoming gradient per
** row: g * prod(others), with zeros handled exactly (one zero: only it gets a gradient). */
#define PROD_GRAD(T)                                                                 \
  {                                                                                  \
    const T *x = (const T *)lt_data(X);                                              \
    const T *g = (const T *)lt_data(G);                                              \
    T *gi = (T *)lt_data(GI);                                                        \
    for (int64_t m = 0; m < M; m++) {                                                \
      const T *xr = x + m * N;                                                       \
      T *gr = gi + m * N;                                                            \
      int64_t zeros = 0, zi = 0;                                                     \
      double nz = 1.0;                                                               \
      for (int64_t j = 0; j < N; j++) {                                              \
        if (xr[j] == 0) {                                                            \
          zeros++;                                                                   \
          zi = j;                                                                    \
        } else {                                                                     \
          nz *= xr[j];                                                               \
        }                                                                            \
      }                                                                              \
      double gm = g[m];                                                              \
      if (zeros == 0) {                                                              \
        for (int64_t j = 0; j < N; j++) gr[j] = (T)(gm * (nz / xr[j]));              \
      } else {                                                                       \
        for (int64_t j = 0; j < N; j++) gr[j] = 0;                                   \
        if (zeros == 1) gr[zi] = (T)(gm * nz);                                       \
      }                                                                              \
    }                                                                                \
  }

static int prod_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *X = NULL, *G = NULL, *Gc = NULL, *GI = NULL;
  if (lt_saved_get(ctx, self, 0, &x)) return -1;
  int rc = -1;
  if (rows_gather(ctx, &X, e, x)) goto done;
  if (lt_to_dtype(ctx, &Gc, gout[0], x->dtype)) goto done;
  if (lt_contiguous(ctx, &G, Gc)) goto done;
  if (lt_empty(ctx, &GI, x->dtype, X->ndim, X->size)) goto done;
  {
    int64_t N = e->count, M = N ? lt_numel(X) / N : lt_numel(G);
    if (N > 0) {
      if (x->dtype == LT_FLOAT32)
        PROD_GRAD(float)
      else
        PROD_GRAD(double)
    }
  }
  rc = rows_scatter(ctx, &gin[0], e, GI);
done:
  lt_release(X);
  lt_release(G);
  lt_release(Gc);
  lt_release(GI);
  return rc;
}

/* Whether a float tensor holds a NaN (non-contiguous: assumed yes). */
static bool has_nan(const lt_tensor *t) {
  if (!lt_dtype_is_float(t->dtype)) return false;
  if (!lt_is_contiguous(t)) return true;
  int64_t n = lt_numel(t);
  if (t->dtype == LT_FLOAT32) {
    const float *x = lt_data(t);
    for (int64_t i = 0; i < n; i++)
      if (x[i] != x[i]) return true;
  } else {
    const double *x = lt_data(t);
    for (int64_t i = 0; i < n; i++)
      if (x[i] != x[i]) return true;
  }
  return false;
}

/* Gradient of amax/amin/max()/min(): split evenly among the elements equal to the result
** (NaN results: among the NaNs). */
static int amax_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (lt_saved_get(ctx, self, 0, &x) || lt_saved_get(ctx, self, 1, &y)) return -1;
  lt_tensor *yk = kview(y, e, false), *gk = kview(gout[0], e, false);
  lt_tensor *mask = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL, *cnt = NULL, *scale = NULL;
  int rc = -1, dims[LT_MAX_DIMS], nd = extra_dims(e, dims);
  if (!yk || !gk) {
    oom(ctx, self->type->name);
    goto done;
  }
  if (lt_binary(ctx, &mask, LT_EQ, x, yk)) goto done;
  if (has_nan(y)) {   /* (x == y) | (isnan(x) & isnan(y)) */
    if (lt_unary(ctx, &n1, LT_ISNAN, x, 0, 0) || lt_unary(ctx, &n2, LT_ISNAN, yk, 0, 0) ||
        lt_binary_(ctx, LT_LAND, n1, n2) || lt_binary_(ctx, LT_LOR, mask, n1))
      goto done;
  }
  if (lt_reduce(ctx, &cnt, LT_RSUM, mask, nd, dims, true)) goto done;
  if (lt_binary(ctx, &scale, LT_DIV, gk, cnt)) goto done;
  if (lt_binary(ctx, &n3, LT_MUL, mask, scale)) goto done;
  if (n3->dtype != gout[0]->dtype) {
    rc = lt_to_dtype(ctx, &gin[0], n3, gout[0]->dtype);
    goto done;
  }
  gin[0] = lt_retain(n3);
  rc = 0;
done:
  lt_release(yk);
  lt_release(gk);
  lt_release(mask);
  lt_release(n1);
  lt_release(n2);
  lt_release(n3);
  lt_release(cnt);
  lt_release(scale);
  return rc;
}

static const lt_node_type sum0_type = {"SumBackward0", sum_backward, NULL};
static const lt_node_type sum1_type = {"SumBackward1", sum_backward, NULL};
static const lt_node_type mean0_type = {"MeanBackward0", mean_backward, NULL};
static const lt_node_type mean1_type = {"MeanBackward1", mean_backward, NULL};
static const lt_node_type prod0_type = {"ProdBackward0", prod_backward, NULL};
static const lt_node_type prod1_type = {"ProdBackward1", prod_backward, NULL};
static const lt_node_type amax_type = {"AmaxBackward0", amax_backward, NULL};
static const lt_node_type amin_type = {"AminBackward0", amax_backward, NULL};
static const lt_node_type max1_type = {"MaxBackward1", amax_backward, NULL};
static const lt_node_type min1_type = {"MinBackward1", amax_backward, NULL};

static const char *const red_names[LT_NREDOP] = {"sum", "mean", "prod", "amax", "amin",
                                                 "all", "any"};

/* The reduction behind lt_reduce, lt_max and lt_min; `name` is used in messages and `type`
** (NULL: by op) for the graph node. */
static int reduce_impl(lt_ctx *ctx, lt_tensor **out, int op, lt_tensor *a, int ndims,
                       const int *dims, bool keepdim, const char *name,
                       const lt_node_type *type) {
  if ((unsigned)op >= LT_NREDOP) return lt_fail(ctx, "reduce: unknown reduction %d", op);
  if (!name) name = red_names[op];
  bool mask[LT_MAX_DIMS];
  if (dims_mask(ctx, name, a, ndims, dims, mask)) return -1;
  bool fl = lt_dtype_is_float(a->dtype);
  lt_dtype odt = a->dtype;
  switch (op) {
    case LT_RSUM: case LT_RPROD: odt = fl ? a->dtype : LT_INT64; break;
    case LT_RMEAN:
      if (!fl)
        return lt_fail(ctx, "%s(): could not infer output dtype. Input dtype must be either a "
                       "floating point or complex dtype. Got: %s", name,
                       lt_dtype_name(a->dtype));
      break;
    case LT_RALL: case LT_RANY: odt = LT_BOOL; break;
    default: break;
  }
  if (op == LT_RAMAX || op == LT_RAMIN) {
    if ((ndims == 0 || !dims) && lt_numel(a) == 0)
      return lt_fail(ctx, "%s(): Expected reduction dim to be specified for input.numel() == 0. "
                     "Specify the reduction dim with the 'dim' argument.", name);
    for (int d = 0; d < a->ndim; d++)
      if (mask[d] && a->size[d] == 0)
        return lt_fail(ctx, "%s(): Expected reduction dim %d to have non-zero size.", name,
                       d + 1);
  }
  int64_t osize[LT_MAX_DIMS];
  int ond = out_shape(a, mask, keepdim, osize);
  lt_tensor *o;
  if (lt_empty(ctx, &o, odt, ond, osize)) return -1;
  if (reduce_kernel(ctx, name, op, a, mask, o)) {
    lt_release(o);
    return -1;
  }
  if (fl && op != LT_RALL && op != LT_RANY && lt_needs_grad(ctx, 1, &a)) {
    bool all = ndims == 0 || !dims;
    if (!type) {
      switch (op) {
        case LT_RSUM: type = all ? &sum0_type : &sum1_type; break;
        case LT_RMEAN: type = all ? &mean0_type : &mean1_type; break;
        case LT_RPROD: type = all ? &prod0_type : &prod1_type; break;
        case LT_RAMAX: type = &amax_type; break;
        default: type = &amin_type; break;
      }
    }
    int nsave = (op == LT_RSUM || op == LT_RMEAN) ? 0 : 2;
    lt_node *node;
    if (lt_record(ctx, type, 1, &a, 1, &o, sizeof(red_extra), nsave, &node)) {
      lt_release(o);
      return -1;
    }
    if (node) {
      extra_fill(node->extra, a, mask, keepdim);
      if (nsave && (lt_save(node, 0, a, false) || lt_save(node, 1, o, true))) {
        lt_release(o);
        return oom(ctx, name);
      }
    }
  }
  *out = o;
  return 0;
}

int lt_reduce(lt_ctx *ctx, lt_tensor **out, int op, lt_tensor *a, int ndims, const int *dims,
              bool keepdim) {
  return reduce_impl(ctx, out, op, a, ndims, dims, keepdim, NULL, NULL);
}

int lt_max(lt_ctx *ctx, lt_tensor **out, lt_tensor *a) {
  return reduce_impl(ctx, out, LT_RAMAX, a, 0, NULL, false, "max", &max1_type);
}

int lt_min(lt_ctx *ctx, lt_tensor **out, lt_tensor *a) {
  return reduce_impl(ctx, out, LT_RAMIN, a, 0, NULL, false, "min", &min1_type);
}

/* ================================================================ rows along one dim */

#define ROW_MAXOP 4

typedef struct rowit {
  int nops, nd;
  int64_t n, nrows;              /* row length, number of rows */
  int64_t rs[ROW_MAXOP];         /* element strides along the row */
  int64_t es[ROW_MAXOP];         /* element sizes */
  char *base[ROW_MAXOP];
  int64_t size[LT_MAX_DIMS];     /* the other dims, collapsed */
  int64_t st[ROW_MAXOP][LT_MAX_DIMS];
} rowit;

/* Rows along `dim` of ops[0]'s shape; every operand has that shape (views with stride 0 are
** fine). A 0-d shape is one row of one element. */
static void rowit_init(rowit *it, int nops, lt_tensor *const *ops, int dim) {
  const lt_tensor *t0 = ops[0];
  it->nops = nops;
  it->n = t0->ndim ? t0->size[dim] : 1;
  for (int k = 0; k < nops; k++) {
    it->base[k] = lt_data(ops[k]);
    it->rs[k] = t0->ndim ? ops[k]->stride[dim] : 0;
    it->es[k] = (int64_t)lt_dtype_size(ops[k]->dtype);
  }
  int m = 0;
  it->nrows = 1;
  for (int d = 0; d < t0->ndim; d++) {
    if (d == dim) continue;
    it->nrows *= t0->size[d];
    if (t0->size[d] == 1) continue;
    if (m > 0) {
      bool merge = true;
      for (int k = 0; k < nops && merge; k++)
        merge = it->st[k][m - 1] == ops[k]->stride[d] * t0->size[d];
      if (merge) {
        it->size[m - 1] *= t0->size[d];
        for (int k = 0; k < nops; k++) it->st[k][m - 1] = ops[k]->stride[d];
        continue;
      }
    }
    it->size[m] = t0->size[d];
    for (int k = 0; k < nops; k++) it->st[k][m] = ops[k]->stride[d];
    m++;
  }
  it->nd = m;
}

static void rowit_ptrs(const rowit *it, int64_t r, char **p) {
  int64_t off[ROW_MAXOP] = {0, 0, 0, 0};
  for (int d = it->nd - 1; d >= 0; d--) {
    int64_t i = r % it->size[d];
    r /= it->size[d];
    for (int k = 0; k < it->nops; k++) off[k] += i * it->st[k][d];
  }
  for (int k = 0; k < it->nops; k++) p[k] = it->base[k] + off[k] * it->es[k];
}

typedef void (*row_fn)(const rowit *it, char **p, void *ud);

typedef struct rowjob {
  const rowit *it;
  row_fn fn;
  void *ud;
} rowjob;

static void rowjob_run(int64_t r0, int64_t r1, void *ud) {
  const rowjob *j = ud;
  const rowit *it = j->it;
  char *p[ROW_MAXOP];
  int64_t idx[LT_MAX_DIMS], r = r0;
  for (int d = it->nd - 1; d >= 0; d--) {
    idx[d] = r % it->size[d];
    r /= it->size[d];
  }
  rowit_ptrs(it, r0, p);
  for (r = r0; r < r1; r++) {
    j->fn(it, p, j->ud);
    for (int d = it->nd - 1; d >= 0; d--) {   /* next row: odometer over the other dims */
      for (int k = 0; k < it->nops; k++) p[k] += it->st[k][d] * it->es[k];
      if (++idx[d] < it->size[d]) break;
      for (int k = 0; k < it->nops; k++) p[k] -= it->size[d] * it->st[k][d] * it->es[k];
      idx[d] = 0;
    }
  }
}

static void rows_run(lt_ctx *ctx, const rowit *it, row_fn fn, void *ud) {
  if (it->nrows == 0) return;
  rowjob j = {it, fn, ud};
  lt_parallel_for(ctx, it->nrows, grain_for(it->n * 4), rowjob_run, &j);
}

/* A view of t (the output of a single-dim op) with the input's shape: along dim it has the
** input's size and stride 0. */
static lt_tensor *dim_view(const lt_tensor *t, int ndim, const int64_t *size, int dim,
                           bool keepdim) {
  int64_t st[LT_MAX_DIMS];
  int j = 0;
  for (int d = 0; d < ndim; d++) {
    if (d == dim) {
      st[d] = 0;
      if (keepdim) j++;
    } else {
      st[d] = t->stride[j++];
    }
  }
  return lt_alias(t, ndim, size, st, t->offset);
}

static int single_dim(lt_ctx *ctx, const char *op, const lt_tensor *a, int dim, int *out) {
  return lt_wrap_dim(ctx, op, dim, a->ndim, out);
}

static int64_t row_len(const lt_tensor *a, int dim) { return a->ndim ? a->size[dim] : 1; }

/* ============================================================ max/min/argmax along a dim */

/* Index of the first largest (smallest) of x[0], x[s], ... x[(n-1)s]; the first NaN wins. */
#define FIND_BEST(T, ISNAN)                                                          \
  {                                                                                  \
    const T *x = (const T *)p;                                                       \
    T b = x[0];                                                                      \
    int64_t bi = 0;                                                                  \
    if (ISNAN(b)) return 0;                                                          \
    for (int64_t i = 1; i < n; i++) {                                                \
      T v = x[i * s];                                                                \
      if (ISNAN(v)) return i;                                                        \
      if (is_max ? v > b : v < b) {                                                  \
        b = v;                                                                       \
        bi = i;                                                                      \
      }                                                                              \
    }                                                                                \
    return bi;                                                                       \
  }

#define NOT_NAN(v) 0

static int64_t find_best(lt_dtype dt, bool is_max, const char *p, int64_t s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: FIND_BEST(float, isnan)
    case LT_FLOAT64: FIND_BEST(double, isnan)
    case LT_INT64: FIND_BEST(int64_t, NOT_NAN)
    default: FIND_BEST(uint8_t, NOT_NAN)
  }
}

/* Whether element j beats element i (i before j) under find_best's rule. */
static bool beats(lt_dtype dt, bool is_max, const char *p, int64_t i, int64_t j) {
  double a, b;
  switch (dt) {
    case LT_FLOAT32: a = ((const float *)p)[i]; b = ((const float *)p)[j]; break;
    case LT_FLOAT64: a = ((const double *)p)[i]; b = ((const double *)p)[j]; break;
    case LT_INT64: {
      int64_t x = ((const int64_t *)p)[i], y = ((const int64_t *)p)[j];
      return is_max ? y > x : y < x;
    }
    default: a = ((const uint8_t *)p)[i]; b = ((const uint8_t *)p)[j]; break;
  }
  if (a != a) return false;
  if (b != b) return true;
  return is_max ? b > a : b < a;
}

typedef struct search_ud {
  lt_dtype dt;
  bool is_max, want_val;
  int64_t base;
} search_ud;

/* operands: idx (int64), x, [values] */
static void search_row(const rowit *it, char **p, void *ud) {
  const search_ud *s = ud;
  int64_t bi = find_best(s->dt, s->is_max, p[1], it->rs[1], it->n);
  *(int64_t *)p[0] = bi + s->base;
  if (s->want_val) memcpy(p[2], p[1] + bi * it->rs[1] * it->es[1], (size_t)it->es[1]);
}

typedef struct flat_ud {
  lt_dtype dt;
  bool is_max;
  const char *x;
  int64_t n;
  int64_t *best;   /* per chunk */
} flat_ud;

static void flat_chunk(int64_t c0, int64_t c1, void *ud) {
  const flat_ud *f = ud;
  int64_t es = (int64_t)lt_dtype_size(f->dt);
  for (int64_t c = c0; c < c1; c++) {
    int64_t b = c * CHUNK, n = mini(CHUNK, f->n - b);
    f->best[c] = b + find_best(f->dt, f->is_max, f->x + b * es, 1, n);
  }
}

/* Index of the best element of the contiguous x (n > 0), chunked for threads. */
static int flat_best(lt_ctx *ctx, const char *op, lt_dtype dt, bool is_max, const char *x,
                     int64_t n, int64_t *out) {
  int64_t nc = (n + CHUNK - 1) / CHUNK;
  int64_t one;
  flat_ud f = {dt, is_max, x, n, nc > 1 ? malloc((size_t)nc * sizeof(int64_t)) : &one};
  if (!f.best) return oom(ctx, op);
  lt_parallel_for(ctx, nc, 2, flat_chunk, &f);
  int64_t b = f.best[0];
  for (int64_t c = 1; c < nc; c++)
    if (beats(dt, is_max, x, b, f.best[c])) b = f.best[c];
  if (nc > 1) free(f.best);
  *out = b;
  return 0;
}

typedef struct dim_extra {
  int ndim;
  int64_t size[LT_MAX_DIMS];
  int dim;
  bool keepdim;
  bool log_;      /* softmax: log_softmax */
  int64_t base;   /* max_dim: indices count from base */
} dim_extra;

/* operands: gi (input shape, zeroed), g view, idx view */
static void scatter_row(const rowit *it, char **p, void *ud) {
  int64_t i = *(const int64_t *)p[2] - *(const int64_t *)ud;
  memcpy(p[0] + i * it->rs[0] * it->es[0], p[1], (size_t)it->es[0]);
}

static int maxdim_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                           lt_tensor **gin) {
  const dim_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *idx, *gi;
  if (lt_saved_get(ctx, self, 0, &idx)) return -1;
  if (lt_empty(ctx, &gi, gout[0]->dtype, e->ndim, e->size)) return -1;
  memset(lt_data(gi), 0, (size_t)lt_numel(gi) * lt_dtype_size(gi->dtype));
  lt_tensor *gv = dim_view(gout[0], e->ndim, e->size, e->dim, e->keepdim);
  lt_tensor *iv = dim_view(idx, e->ndim, e->size, e->dim, e->keepdim);
  if (!gv || !iv) {
    lt_release(gv);
    lt_release(iv);
    lt_release(gi);
    return oom(ctx, self->type->name);
  }
  lt_tensor *ops[3] = {gi, gv, iv};
  rowit it;
  rowit_init(&it, 3, ops, e->dim);
  int64_t base = e->base;
  rows_run(ctx, &it, scatter_row, &base);
  lt_release(gv);
  lt_release(iv);
  gin[0] = gi;
  return 0;
}

static const lt_node_type max0_type = {"MaxBackward0", maxdim_backward, NULL};
static const lt_node_type min0_type = {"MinBackward0", maxdim_backward, NULL};

/* max/min/argmax/argmin along dim: values (may be NULL) and indices. */
static int search_dim(lt_ctx *ctx, const char *op, bool is_max, lt_tensor **values,
                      lt_tensor **indices, lt_tensor *a, int dim, bool keepdim, int64_t base) {
  int d;
  if (single_dim(ctx, op, a, dim, &d)) return -1;
  if (row_len(a, d) == 0)
    return lt_fail(ctx, "%s(): Expected reduction dim %d to have non-zero size.", op, d + 1);
  bool mask[LT_MAX_DIMS] = {false};
  if (a->ndim) mask[d] = true;
  int64_t osize[LT_MAX_DIMS];
  int ond = out_shape(a, mask, keepdim, osize);
  lt_tensor *idx = NULL, *val = NULL, *iv = NULL, *vv = NULL;
  int rc = -1;
  if (lt_empty(ctx, &idx, LT_INT64, ond, osize)) goto fail;
  if (values && lt_empty(ctx, &val, a->dtype, ond, osize)) goto fail;
  iv = dim_view(idx, a->ndim, a->size, d, keepdim);
  if (!iv || (values && !(vv = dim_view(val, a->ndim, a->size, d, keepdim)))) {
    oom(ctx, op);
    goto fail;
  }
  {
    lt_tensor *ops[3] = {iv, a, vv};
    rowit it;
    rowit_init(&it, values ? 3 : 2, ops, d);
    search_ud s = {a->dtype, is_max, values != NULL, base};
    rows_run(ctx, &it, search_row, &s);
  }
  lt_release(iv);
  lt_release(vv);
  iv = vv = NULL;
  if (values && lt_dtype_is_float(a->dtype)) {
    lt_node *node;
    if (lt_record(ctx, is_max ? &max0_type : &min0_type, 1, &a, 1, &val, sizeof(dim_extra), 1,
                  &node))
      goto fail;
    if (node) {
      dim_extra *e = node->extra;
      e->ndim = a->ndim;
      for (int k = 0; k < a->ndim; k++) e->size[k] = a->size[k];
      e->dim = d;
      e->keepdim = keepdim;
      e->base = base;
      if (lt_save(node, 0, idx, false)) {
        oom(ctx, op);
        goto fail;
      }
    }
  }
  if (values) *values = val;
  *indices = idx;
  return 0;
fail:
  lt_release(iv);
  lt_release(vv);
  lt_release(idx);
  lt_release(val);
  return rc;
}

int lt_max_dim(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int dim,
               bool keepdim, int64_t base) {
  return search_dim(ctx, "max", true, values, indices, a, dim, keepdim, base);
}

int lt_min_dim(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int dim,
               bool keepdim, int64_t base) {
  return search_dim(ctx, "min", false, values, indices, a, dim, keepdim, base);
}

static int arg_search(lt_ctx *ctx, const char *op, bool is_max, lt_tensor **out, lt_tensor *a,
                      const int *dim, bool keepdim, int64_t base) {
  if (dim) return search_dim(ctx, op, is_max, NULL, out, a, *dim, keepdim, base);
  int64_t n = lt_numel(a);
  if (n == 0)
    return lt_fail(ctx, "%s(): Expected reduction dim to be specified for input.numel() == 0.",
                   op);
  int64_t osize[LT_MAX_DIMS];
  int ond = keepdim ? a->ndim : 0;
  for (int d = 0; d < ond; d++) osize[d] = 1;
  lt_tensor *c, *o;
  if (lt_contiguous(ctx, &c, a)) return -1;
  int64_t best = 0;
  int rc = flat_best(ctx, op, a->dtype, is_max, lt_data(c), n, &best);
  lt_release(c);
  if (rc) return -1;
  if (lt_empty(ctx, &o, LT_INT64, ond, osize)) return -1;
  *(int64_t *)lt_data(o) = best + base;
  *out = o;
  return 0;
}

int lt_argmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const int *dim, bool keepdim,
              int64_t base) {
  return arg_search(ctx, "argmax", true, out, a, dim, keepdim, base);
}

int lt_argmin(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const int *dim, bool keepdim,
              int64_t base) {
  return arg_search(ctx, "argmin", false, out, a, dim, keepdim, base);
}

/* ================================================================ softmax, log_softmax */

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
  float m = extreme_f32(x, n, true, &nan);
  if (nan) m = NAN;
  const v4f vm = v4splat(m);
  double sum = 0;
  int64_t i = 0;
  while (i < n) {
    v4f s0 = v4splat(0), s1 = v4splat(0);
    int64_t end = mini(n, i + 256);
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
      int64_t k = mini(4, end - i);
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

static void softmax_row(const rowit *it, char **p, void *ud) {
  const int *mode = ud;
  bool log_ = mode[1];
#ifdef LT_VEC4
  if (mode[0] == LT_FLOAT32 && it->rs[0] == 1 && it->rs[1] == 1 && it->n >= 16) {
    softmax_f32((float *)p[0], (const float *)p[1], it->n, log_);
    return;
  }
#endif
  if (mode[0] == LT_FLOAT32)
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
    int64_t end = mini(n, i + 256);
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

static void softmax_back_row(const rowit *it, char **p, void *ud) {
  const int *mode = ud;
  bool log_ = mode[1];
#ifdef LT_VEC4
  if (mode[0] == LT_FLOAT32 && it->rs[0] == 1 && it->rs[1] == 1 && it->rs[2] == 1) {
    softmax_back_f32((float *)p[0], (const float *)p[1], (const float *)p[2], it->n, log_);
    return;
  }
#endif
  if (mode[0] == LT_FLOAT32)
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
    int64_t i1 = mini(n, i0 + 256);
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
      smcol_block(c, o, j0, mini(SMCOLS, full - j0));
      continue;
    }
    for (int64_t j = full; j < c->inner; j++) {   /* leftover columns: strided rows */
      int64_t base = o * c->n * c->inner + j;
      rowit it;
      memset(&it, 0, sizeof it);
      it.n = c->n;
      it.rs[0] = it.rs[1] = it.rs[2] = c->inner;
      char *p[3] = {(char *)(c->out + base), (char *)(c->a + base),
                    c->b ? (char *)(c->b + base) : NULL};
      int mode[2] = {LT_FLOAT32, c->log_};
      if (c->back)
        softmax_back_row(&it, p, mode);
      else
        softmax_row(&it, p, mode);
    }
  }
}

/* Runs the column kernel when it applies (float32, dim not innermost); returns false if not. */
static bool smcol_try(lt_ctx *ctx, lt_tensor *out, lt_tensor *a, lt_tensor *b, int dim,
                      bool log_, bool back) {
  if (out->dtype != LT_FLOAT32 || out->ndim == 0) return false;
  int64_t inner = 1, outer = 1;
  for (int d = dim + 1; d < out->ndim; d++) inner *= out->size[d];
  for (int d = 0; d < dim; d++) outer *= out->size[d];
  if (inner < 4 || !lt_is_contiguous(out) || !lt_is_contiguous(a) || (b && !lt_is_contiguous(b)))
    return false;
  int64_t full = inner / 4 * 4;
  smcol c = {lt_data(out), lt_data(a), b ? lt_data(b) : NULL, outer, out->size[dim], inner,
             (full + SMCOLS - 1) / SMCOLS + (full < inner), log_, back};
  lt_parallel_for(ctx, outer * c.nb, grain_for(c.n * SMCOLS * 4), smcol_run, &c);
  return true;
}
#endif

static int softmax_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                            lt_tensor **gin) {
  const dim_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *y, *g = NULL, *gi;
  if (lt_saved_get(ctx, self, 0, &y)) return -1;
  if (lt_to_dtype(ctx, &g, gout[0], y->dtype)) return -1;
  if (lt_empty(ctx, &gi, y->dtype, y->ndim, y->size)) {
    lt_release(g);
    return -1;
  }
#ifdef LT_VEC4
  if (y->dtype == LT_FLOAT32 && y->ndim > 0 && e->dim < y->ndim - 1 && lt_is_contiguous(y)) {
    lt_tensor *gc;
    if (lt_contiguous(ctx, &gc, g)) {
      lt_release(g);
      lt_release(gi);
      return -1;
    }
    bool done = smcol_try(ctx, gi, y, gc, e->dim, e->log_, true);
    lt_release(gc);
    if (done) {
      lt_release(g);
      gin[0] = gi;
      return 0;
    }
  }
#endif
  lt_tensor *ops[3] = {gi, y, g};
  rowit it;
  rowit_init(&it, 3, ops, e->dim);
  int mode[2] = {(int)y->dtype, e->log_};
  rows_run(ctx, &it, softmax_back_row, mode);
  lt_release(g);
  gin[0] = gi;
  return 0;
}

static const lt_node_type softmax_type = {"SoftmaxBackward0", softmax_backward, NULL};
static const lt_node_type log_softmax_type = {"LogSoftmaxBackward0", softmax_backward, NULL};

static int softmax_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim, bool log_) {
  const char *op = log_ ? "log_softmax" : "softmax";
  int d;
  if (single_dim(ctx, op, a, dim, &d)) return -1;
  if (!lt_dtype_is_float(a->dtype))
    return lt_fail(ctx, "%s: expected a floating point tensor, got %s", op,
                   lt_dtype_name(a->dtype));
  lt_tensor *y;
  if (lt_empty(ctx, &y, a->dtype, a->ndim, a->size)) return -1;
  bool done = false;
#ifdef LT_VEC4
  if (a->dtype == LT_FLOAT32 && a->ndim > 0 && d < a->ndim - 1) {
    lt_tensor *ac;
    if (lt_contiguous(ctx, &ac, a)) {
      lt_release(y);
      return -1;
    }
    done = smcol_try(ctx, y, ac, NULL, d, log_, false);
    lt_release(ac);
  }
#endif
  if (!done) {
    lt_tensor *ops[2] = {y, a};
    rowit it;
    rowit_init(&it, 2, ops, d);
    int mode[2] = {(int)a->dtype, log_};
    rows_run(ctx, &it, softmax_row, mode);
  }
  lt_node *node;
  if (lt_record(ctx, log_ ? &log_softmax_type : &softmax_type, 1, &a, 1, &y,
                sizeof(dim_extra), 1, &node)) {
    lt_release(y);
    return -1;
  }
  if (node) {
    dim_extra *e = node->extra;
    e->dim = d;
    e->log_ = log_;
    if (lt_save(node, 0, y, true)) {
      lt_release(y);
      return oom(ctx, op);
    }
  }
  *out = y;
  return 0;
}

int lt_softmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim) {
  return softmax_impl(ctx, out, a, dim, false);
}

int lt_log_softmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim) {
  return softmax_impl(ctx, out, a, dim, true);
}

/* ================================================================ cumsum */

/* operands: y, x (forward: reverse = 0) or gi, g (backward: sums from the end) */
#define CUMSUM_ROW(TO, TI, ACC)                                                      \
  {                                                                                  \
    TO *y = (TO *)p[0];                                                              \
    const TI *x = (const TI *)p[1];                                                  \
    ACC s = 0;                                                                       \
    if (!rev)                                                                        \
      for (int64_t i = 0; i < n; i++) {                                              \
        s += (ACC)x[i * xs];                                                         \
        y[i * ys] = (TO)s;                                                           \
      }                                                                              \
    else                                                                             \
      for (int64_t i = n - 1; i >= 0; i--) {                                         \
        s += (ACC)x[i * xs];                                                         \
        y[i * ys] = (TO)s;                                                           \
      }                                                                              \
    return;                                                                          \
  }

static void cumsum_row(const rowit *it, char **p, void *ud) {
  const int *mode = ud;
  bool rev = mode[1];
  int64_t n = it->n, ys = it->rs[0], xs = it->rs[1];
  switch (mode[0]) {
    case LT_FLOAT32: CUMSUM_ROW(float, float, double)
    case LT_FLOAT64: CUMSUM_ROW(double, double, double)
    case LT_INT64: CUMSUM_ROW(int64_t, int64_t, uint64_t)
    default: CUMSUM_ROW(int64_t, uint8_t, uint64_t)
  }
}

static int cumsum_rows(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int d, bool rev) {
  lt_dtype odt = lt_dtype_is_float(a->dtype) ? a->dtype : LT_INT64;
  lt_tensor *y;
  if (lt_empty(ctx, &y, odt, a->ndim, a->size)) return -1;
  lt_tensor *ops[2] = {y, a};
  rowit it;
  rowit_init(&it, 2, ops, d);
  int mode[2] = {(int)a->dtype, rev};
  rows_run(ctx, &it, cumsum_row, mode);
  *out = y;
  return 0;
}

static int cumsum_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                           lt_tensor **gin) {
  const dim_extra *e = self->extra;
  if (!gout[0]) return 0;
  return cumsum_rows(ctx, &gin[0], gout[0], e->dim, true);
}

static const lt_node_type cumsum_type = {"CumsumBackward0", cumsum_backward, NULL};

int lt_cumsum(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim) {
  int d;
  if (single_dim(ctx, "cumsum", a, dim, &d)) return -1;
  lt_tensor *y;
  if (cumsum_rows(ctx, &y, a, d, false)) return -1;
  lt_node *node;
  if (lt_record(ctx, &cumsum_type, 1, &a, 1, &y, sizeof(dim_extra), 0, &node)) {
    lt_release(y);
    return -1;
  }
  if (node) ((dim_extra *)node->extra)->dim = d;
  *out = y;
  return 0;
}

/* ================================================================ composed reductions */

/* Sets t[i] = 0 wherever ref[i] == 0: t is a fresh contiguous float tensor and ref has as
** many elements, in the same order. */
static int zero_where_zero(lt_ctx *ctx, lt_tensor *t, lt_tensor *ref) {
  lt_tensor *rc_;
  if (!lt_is_contiguous(t) || lt_numel(t) != lt_numel(ref) || t->dtype != ref->dtype)
    return lt_fail(ctx, "%s: internal layout mismatch", "backward");
  if (lt_contiguous(ctx, &rc_, ref)) return -1;
  int64_t n = lt_numel(t);
  if (t->dtype == LT_FLOAT32) {
    float *x = lt_data(t);
    const float *r = lt_data(rc_);
    for (int64_t i = 0; i < n; i++)
      if (r[i] == 0) x[i] = 0;
  } else {
    double *x = lt_data(t);
    const double *r = lt_data(rc_);
    for (int64_t i = 0; i < n; i++)
      if (r[i] == 0) x[i] = 0;
  }
  lt_release(rc_);
  return 0;
}

/* t (contiguous float): non-finite elements become 0. */
static void zero_nonfinite(lt_tensor *t) {
  int64_t n = lt_numel(t);
  if (t->dtype == LT_FLOAT32) {
    float *x = lt_data(t);
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(x[i])) x[i] = 0;
  } else {
    double *x = lt_data(t);
    for (int64_t i = 0; i < n; i++)
      if (!isfinite(x[i])) x[i] = 0;
  }
}

/* Releases up to 8 temporaries. */
static void drop(lt_tensor **ts, int n) {
  for (int i = 0; i < n; i++) {
    lt_release(ts[i]);
    ts[i] = NULL;
  }
}

/* Records a composed reduction: node with input a, output o, saves a and o. */
static int record_composed(lt_ctx *ctx, const lt_node_type *type, lt_tensor *a, lt_tensor *o,
                           const bool *mask, bool keepdim, double p, const char *op) {
  lt_node *node;
  if (lt_record(ctx, type, 1, &a, 1, &o, sizeof(red_extra), 2, &node)) return -1;
  if (node) {
    red_extra *e = node->extra;
    extra_fill(e, a, mask, keepdim);
    e->p = p;
    if (lt_save(node, 0, a, false) || lt_save(node, 1, o, true)) return oom(ctx, op);
  }
  return 0;
}

/* var/std gradient: g * (x - mean) * 2/den (var) or g * (x - mean) / (den * std) (std, 0 where
** std == 0, as PyTorch). */
static int var_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const red_extra *e = self->extra;
  bool is_std = self->type->name[0] == 'S';
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (lt_saved_get(ctx, self, 0, &x) || lt_saved_get(ctx, self, 1, &y)) return -1;
  lt_tensor *t[6] = {NULL};   /* mean, diff, gk, scale, yk, tmp */
  int dims[LT_MAX_DIMS], nd = extra_dims(e, dims), rc = -1;
  if (lt_reduce(ctx, &t[0], LT_RMEAN, x, nd, dims, true)) goto done;
  if (lt_binary(ctx, &t[1], LT_SUB, x, t[0])) goto done;
  if (!(t[2] = kview(gout[0], e, false))) goto nomem;
  if (!is_std) {
    if (lt_binary_scalar(ctx, &t[3], LT_MUL, t[2], 2.0 / e->p, false, false)) goto done;
  } else {
    if (!(t[4] = kview(y, e, false))) goto nomem;
    if (lt_binary_scalar(ctx, &t[5], LT_MUL, t[4], e->p, false, false)) goto done;
    if (lt_binary(ctx, &t[3], LT_DIV, t[2], t[5])) goto done;
    if (zero_where_zero(ctx, t[3], y)) goto done;
  }
  rc = lt_binary(ctx, &gin[0], LT_MUL, t[1], t[3]);
  goto done;
nomem:
  oom(ctx, self->type->name);
done:
  drop(t, 6);
  return rc;
}

static const lt_node_type var_type = {"VarBackward0", var_backward, NULL};
static const lt_node_type std_type = {"StdBackward0", var_backward, NULL};

static int var_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
                    double correction, bool keepdim, bool is_std) {
  const char *op = is_std ? "std" : "var";
  if (!lt_dtype_is_float(a->dtype))
    return lt_fail(ctx, "%s(): std and var only support floating point dtypes, got %s", op,
                   lt_dtype_name(a->dtype));
  if (correction != correction)
    return lt_fail(ctx, "%s(): correction must be a number, got nan", op);
  bool mask[LT_MAX_DIMS];
  if (dims_mask(ctx, op, a, ndims, dims, mask)) return -1;
  double den = (double)reduced_count(a, mask) - correction;
  if (den < 0) den = 0;
  bool old = lt_set_grad_enabled(ctx, false);
  lt_tensor *t[3] = {NULL};   /* mean, diff, out */
  int rc = -1;
  if (lt_reduce(ctx, &t[0], LT_RMEAN, a, ndims, dims, true)) goto done;
  if (lt_binary(ctx, &t[1], LT_SUB, a, t[0])) goto done;
  if (lt_unary_(ctx, LT_SQUARE, t[1], 0, 0)) goto done;
  if (lt_reduce(ctx, &t[2], LT_RSUM, t[1], ndims, dims, keepdim)) goto done;
  if (lt_binary_scalar_(ctx, LT_DIV, t[2], den)) goto done;
  if (is_std && lt_unary_(ctx, LT_SQRT, t[2], 0, 0)) goto done;
  rc = 0;
done:
  lt_set_grad_enabled(ctx, old);
  if (!rc) rc = record_composed(ctx, is_std ? &std_type : &var_type, a, t[2], mask, keepdim,
                                den, op);
  if (!rc) {
    *out = t[2];
    t[2] = NULL;
  }
  drop(t, 3);
  return rc;
}

int lt_var(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
           double correction, bool keepdim) {
  return var_impl(ctx, out, a, ndims, dims, correction, keepdim, false);
}

int lt_std(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
           double correction, bool keepdim) {
  return var_impl(ctx, out, a, ndims, dims, correction, keepdim, true);
}

/* Norm gradient (PyTorch's norm_backward):
**   p = 0: 0;  p = 1: sign(x) g;  p = 2: x g / norm (0 where norm == 0)
**   p = +-inf: sign(x) g / count where |x| == norm (ties share)
**   other p: sign(x) |x|^(p-1) g / norm^(p-1), 0 where x == 0 or norm == 0 */
static int norm_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (lt_saved_get(ctx, self, 0, &x) || lt_saved_get(ctx, self, 1, &y)) return -1;
  double p = e->p;
  lt_tensor *t[8] = {NULL};
  int dims[LT_MAX_DIMS], nd = extra_dims(e, dims), rc = -1;
  if (!(t[0] = kview(gout[0], e, false)) || !(t[1] = kview(y, e, false))) goto nomem;
  if (p == 0) {
    rc = lt_full(ctx, &gin[0], x->dtype, x->ndim, x->size, 0.0);
  } else if (p == 1) {
    if (lt_unary(ctx, &t[2], LT_SIGN, x, 0, 0)) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, t[2], t[0]);
  } else if (p == 2) {
    if (lt_binary(ctx, &t[2], LT_DIV, t[0], t[1])) goto done;
    if (zero_where_zero(ctx, t[2], y)) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, x, t[2]);
  } else if (isinf(p)) {
    if (lt_unary(ctx, &t[2], LT_ABS, x, 0, 0)) goto done;
    if (lt_binary(ctx, &t[3], LT_EQ, t[2], t[1])) goto done;                /* mask */
    if (lt_reduce(ctx, &t[4], LT_RSUM, t[3], nd, dims, true)) goto done;   /* count */
    if (lt_binary(ctx, &t[5], LT_DIV, t[0], t[4])) goto done;              /* g / count */
    if (lt_unary(ctx, &t[6], LT_SIGN, x, 0, 0)) goto done;
    if (lt_binary_(ctx, LT_MUL, t[6], t[3])) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, t[6], t[5]);
  } else {
    if (lt_unary(ctx, &t[2], LT_ABS, x, 0, 0)) goto done;   /* fresh, contiguous */
    {
      int64_t n = lt_numel(t[2]);
      if (t[2]->dtype == LT_FLOAT32) {
        float *v = lt_data(t[2]);
        for (int64_t i = 0; i < n; i++) v[i] = v[i] == 0 ? 0.0f : powf(v[i], (float)(p - 1));
      } else {
        double *v = lt_data(t[2]);
        for (int64_t i = 0; i < n; i++) v[i] = v[i] == 0 ? 0.0 : pow(v[i], p - 1);
      }
    }
    if (lt_unary(ctx, &t[3], LT_SIGN, x, 0, 0)) goto done;
    if (lt_binary_(ctx, LT_MUL, t[2], t[3])) goto done;
    if (lt_binary_scalar(ctx, &t[4], LT_POW, y, p - 1, false, false)) goto done;
    if (!(t[5] = kview(t[4], e, false))) goto nomem;
    if (lt_binary(ctx, &t[6], LT_DIV, t[0], t[5])) goto done;
    if (zero_where_zero(ctx, t[6], y)) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, t[2], t[6]);
  }
  goto done;
nomem:
  oom(ctx, self->type->name);
done:
  drop(t, 8);
  return rc;
}

static const lt_node_type norm_type = {"NormBackward1", norm_backward, NULL};

int lt_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, double p, int ndims, const int *dims,
            bool keepdim) {
  if (!lt_dtype_is_float(a->dtype))
    return lt_fail(ctx, "norm(): input dtype should be floating point, got %s",
                   lt_dtype_name(a->dtype));
  if (p != p) return lt_fail(ctx, "norm(): p must be a number, got nan");
  bool mask[LT_MAX_DIMS];
  if (dims_mask(ctx, "norm", a, ndims, dims, mask)) return -1;
  bool old = lt_set_grad_enabled(ctx, false);
  lt_tensor *t[3] = {NULL};   /* elementwise term, reduced, out */
  int rc = -1;
  if (p == 2) {
    if (lt_unary(ctx, &t[0], LT_SQUARE, a, 0, 0)) goto done;
    if (lt_reduce(ctx, &t[2], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
    if (lt_unary_(ctx, LT_SQRT, t[2], 0, 0)) goto done;
  } else if (p == 1) {
    if (lt_unary(ctx, &t[0], LT_ABS, a, 0, 0)) goto done;
    if (lt_reduce(ctx, &t[2], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
  } else if (isinf(p)) {
    if (lt_unary(ctx, &t[0], LT_ABS, a, 0, 0)) goto done;
    if (reduce_impl(ctx, &t[2], p > 0 ? LT_RAMAX : LT_RAMIN, t[0], ndims, dims, keepdim, "norm",
                    NULL))
      goto done;
  } else if (p == 0) {
    if (lt_binary_scalar(ctx, &t[0], LT_NE, a, 0.0, false, false)) goto done;
    if (lt_reduce(ctx, &t[1], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
    if (lt_to_dtype(ctx, &t[2], t[1], a->dtype)) goto done;
  } else {
    if (lt_unary(ctx, &t[0], LT_ABS, a, 0, 0)) goto done;
    if (lt_binary_scalar_(ctx, LT_POW, t[0], p)) goto done;
    if (lt_reduce(ctx, &t[2], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
    if (lt_binary_scalar_(ctx, LT_POW, t[2], 1.0 / p)) goto done;
  }
  rc = 0;
done:
  lt_set_grad_enabled(ctx, old);
  if (!rc) rc = record_composed(ctx, &norm_type, a, t[2], mask, keepdim, p, "norm");
  if (!rc) {
    *out = t[2];
    t[2] = NULL;
  }
  drop(t, 3);
  return rc;
}

/* logsumexp gradient: g * exp(x - out). */
static int lse_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (lt_saved_get(ctx, self, 0, &x) || lt_saved_get(ctx, self, 1, &y)) return -1;
  lt_tensor *t[3] = {NULL};
  int rc = -1;
  if (!(t[0] = kview(gout[0], e, false)) || !(t[1] = kview(y, e, false))) {
    oom(ctx, self->type->name);
    goto done;
  }
  if (lt_binary(ctx, &t[2], LT_SUB, x, t[1])) goto done;
  if (lt_unary_(ctx, LT_EXP, t[2], 0, 0)) goto done;
  rc = lt_binary(ctx, &gin[0], LT_MUL, t[2], t[0]);
done:
  drop(t, 3);
  return rc;
}

static const lt_node_type lse_type = {"LogsumexpBackward0", lse_backward, NULL};

int lt_logsumexp(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
                 bool keepdim) {
  bool mask[LT_MAX_DIMS];
  if (dims_mask(ctx, "logsumexp", a, ndims, dims, mask)) return -1;
  bool old = lt_set_grad_enabled(ctx, false);
  lt_tensor *t[5] = {NULL};   /* float input, max, exp term, sum, out */
  int rc = -1;
  int64_t osize[LT_MAX_DIMS];
  int ond = out_shape(a, mask, keepdim, osize);
  lt_dtype fdt = lt_dtype_is_float(a->dtype) ? a->dtype : LT_FLOAT32;
  if (lt_to_dtype(ctx, &t[0], a, fdt)) goto done;
  if (reduced_count(a, mask) == 0) {   /* log(0) */
    rc = lt_full(ctx, &t[4], fdt, ond, osize, -INFINITY);
    goto done;
  }
  if (reduce_impl(ctx, &t[1], LT_RAMAX, t[0], ndims, dims, true, "logsumexp", NULL)) goto done;
  zero_nonfinite(t[1]);   /* all -inf (or inf, nan) rows: no shift */
  if (lt_binary(ctx, &t[2], LT_SUB, t[0], t[1])) goto done;
  if (lt_unary_(ctx, LT_EXP, t[2], 0, 0)) goto done;
  if (lt_reduce(ctx, &t[3], LT_RSUM, t[2], ndims, dims, true)) goto done;
  if (lt_unary_(ctx, LT_LOG, t[3], 0, 0)) goto done;
  if (lt_binary_(ctx, LT_ADD, t[3], t[1])) goto done;
  /* t[3] is contiguous with the keepdim shape: view it with the output shape */
  if (!(t[4] = lt_alias(t[3], ond, osize, NULL, t[3]->offset))) {
    oom(ctx, "logsumexp");
    goto done;
  }
  rc = 0;
done:
  lt_set_grad_enabled(ctx, old);
  if (!rc && lt_dtype_is_float(a->dtype))
    rc = record_composed(ctx, &lse_type, a, t[4], mask, keepdim, 0, "logsumexp");
  if (!rc) {
    *out = t[4];
    t[4] = NULL;
  }
  drop(t, 5);
  return rc;
}
