/*
** nn_pool.c -- pooling: max_pool1d/2d (with indices), avg_pool1d/2d, adaptive_avg_pool1d/2d,
** adaptive_max_pool1d/2d, forward and backward.
**
** Shape letters: P = N*C independent planes of H x W input and OH x OW output. A 1-d op is the
** 2-d kernel with H = kh = 1. Indices are flat positions ih*W + iw inside a plane (0-based
** here; the Lua binding shows them 1-based). Every kernel runs planes in parallel.
*/
#include <math.h>
#include <stdlib.h>

#include "core.h"

typedef struct pool_geom {
  int64_t P, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool count_include_pad;
  int64_t divisor;   /* 0: none */
} pool_geom;

typedef struct pool_job {
  const pool_geom *g;
  const void *src;
  void *dst;
  int64_t *idx;
} pool_job;

static void run_planes(lt_ctx *ctx, const pool_geom *g, int64_t work, lt_range_fn fn,
                       pool_job *j) {
  int64_t per = work > 0 ? work : 1;
  lt_parallel_for(ctx, g->P, (16384 + per - 1) / per, fn, j);
}

/* Range callback NAME: PLANE(g, src, dst, idx) on each plane of [b, e). A forward plane reads
** H*W values and writes OH*OW (and as many indices, when asked for); a backward plane reads
** OH*OW gradients and writes H*W. Every kernel below is a plane function run through this. */
#define DEF_PLANES(NAME, T, PLANE, FWD)                                                        \
  static void NAME(int64_t b, int64_t e, void *ud) {                                           \
    const pool_job *j = ud;                                                                    \
    const pool_geom *g = j->g;                                                                 \
    int64_t ni = g->H * g->W, no = g->OH * g->OW;                                              \
    int64_t ns = (FWD) ? ni : no, nd = (FWD) ? no : ni;                                        \
    for (int64_t p = b; p < e; p++)                                                            \
      PLANE(g, (const T *)j->src + p * ns, (T *)j->dst + p * nd,                               \
            j->idx ? j->idx + p * no : NULL);                                                  \
  }

/* ------------------------------------------------------------ windows */

/* One axis of an output's window: input positions lo, lo + step, ... below hi. pad_n counts the
** window's positions inside the padded input (avg pool's count_include_pad divisor). */
typedef struct pool_span {
  int64_t lo, hi, step, pad_n;
} pool_span;

/* Span of output o along the rows (cols false) or columns. Windowed pools clip to the input and
** start at the first tap inside it (padding is -inf for max, skipped for avg); avg pools are
** never dilated (pool_setup sets d = 1), so their step is 1. Adaptive pools use PyTorch's
** floor/ceil bounds, never empty. Called with constant flags, so it inlines to each kernel's
** own arithmetic. */
static inline pool_span pool_span_at(const pool_geom *g, bool adaptive, bool cols, int64_t o) {
  int64_t n = cols ? g->W : g->H;
  if (adaptive) {
    int64_t no = cols ? g->OW : g->OH;
    int64_t lo = (o * n) / no, hi = ((o + 1) * n + no - 1) / no;
    return (pool_span){lo, hi, 1, hi - lo};
  }
  int64_t k = cols ? g->kw : g->kh, s = cols ? g->sw : g->sh;
  int64_t pad = cols ? g->pw : g->ph, d = cols ? g->dw : g->dh;
  int64_t lo = o * s - pad, hi = lo + (k - 1) * d + 1;
  int64_t pad_n = (hi < n + pad ? hi : n + pad) - lo;
  if (hi > n) hi = n;
  while (lo < 0) lo += d;
  return (pool_span){lo, hi, d, pad_n};
}

/* Divisor of an avg window r x c, as PyTorch computes it: the override, else the window size
** with or without the padding (adaptive windows hold no padding). */
static inline int64_t pool_divisor(const pool_geom *g, bool adaptive, pool_span r, pool_span c) {
  if (adaptive) return (r.hi - r.lo) * (c.hi - c.lo);
  if (g->divisor) return g->divisor;
  return g->count_include_pad ? r.pad_n * c.pad_n : (r.hi - r.lo) * (c.hi - c.lo);
}

/* Window reductions over rows r and columns c of a plane W wide:
**   window_max: the max and, in *at, its flat position: the first of equal maxima, or the last
**               NaN (a NaN wins, as in PyTorch); an empty window gives -inf at (r.lo, c.lo).
**   window_sum, window_add: the sum, and dx += v; avg windows have step 1 (see pool_span_at). */
#define DEF_WINDOW_OPS(SUF, T)                                                                 \
  static inline T window_max_##SUF(const T *in, int64_t W, pool_span r, pool_span c,           \
                                   int64_t *at) {                                              \
    T m = -(T)INFINITY;                                                                        \
    int64_t best = r.lo * W + c.lo;                                                            \
    for (int64_t ih = r.lo; ih < r.hi; ih += r.step)                                           \
      for (int64_t iw = c.lo; iw < c.hi; iw += c.step) {                                       \
        T v = in[ih * W + iw];                                                                 \
        if (v > m || isnan(v)) {                                                               \
          m = v;                                                                               \
          best = ih * W + iw;                                                                  \
        }                                                                                      \
      }                                                                                        \
    *at = best;                                                                                \
    return m;                                                                                  \
  }                                                                                            \
  static inline T window_sum_##SUF(const T *in, int64_t W, pool_span r, pool_span c) {         \
    T s = 0;                                                                                   \
    for (int64_t ih = r.lo; ih < r.hi; ih++)                                                   \
      for (int64_t iw = c.lo; iw < c.hi; iw++) s += in[ih * W + iw];                           \
    return s;                                                                                  \
  }                                                                                            \
  static inline void window_add_##SUF(T *dx, int64_t W, pool_span r, pool_span c, T v) {       \
    for (int64_t ih = r.lo; ih < r.hi; ih++)                                                   \
      for (int64_t iw = c.lo; iw < c.hi; iw++) dx[ih * W + iw] += v;                           \
  }
DEF_WINDOW_OPS(f32, float)
DEF_WINDOW_OPS(f64, double)

/* ------------------------------------------------------------ max pools */

/* Max pool (AD false) or adaptive max pool (AD true) forward; indices only when asked for. */
#define DEF_MAX_FWD(NAME, SUF, T, AD)                                                          \
  static inline void NAME##_plane(const pool_geom *g, const T *in, T *out, int64_t *ix) {      \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                   \
      pool_span r = pool_span_at(g, AD, false, oh);                                            \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                 \
        pool_span c = pool_span_at(g, AD, true, ow);                                           \
        int64_t at;                                                                            \
        out[oh * g->OW + ow] = window_max_##SUF(in, g->W, r, c, &at);                          \
        if (ix) ix[oh * g->OW + ow] = at;                                                      \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  DEF_PLANES(NAME, T, NAME##_plane, true)
DEF_MAX_FWD(maxpool_fwd_f32, f32, float, false)
DEF_MAX_FWD(maxpool_fwd_f64, f64, double, false)
DEF_MAX_FWD(admax_fwd_f32, f32, float, true)
DEF_MAX_FWD(admax_fwd_f64, f64, double, true)

/* 2x2, stride 2, no padding or dilation: the common case, without the window bookkeeping and
** with selects instead of branches (same NaN rule: a NaN wins, the last one seen). */
#define DEF_MAXPOOL_2X2(NAME, T)                                                               \
  static inline void NAME##_plane(const pool_geom *g, const T *in, T *out, int64_t *ix) {      \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                   \
      const T *r0 = in + 2 * oh * g->W, *r1 = r0 + g->W;                                       \
      T *o = out + oh * g->OW;                                                                 \
      if (!ix) {                                                                               \
        for (int64_t ow = 0; ow < g->OW; ow++) {                                               \
          T a = r0[2 * ow], c = r0[2 * ow + 1], d = r1[2 * ow], f = r1[2 * ow + 1];            \
          T m = ((c > a) | (c != c)) ? c : a;                                                  \
          m = ((d > m) | (d != d)) ? d : m;                                                    \
          o[ow] = ((f > m) | (f != f)) ? f : m;                                                \
        }                                                                                      \
        continue;                                                                              \
      }                                                                                        \
      int64_t *io = ix + oh * g->OW;                                                           \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                 \
        T a = r0[2 * ow], c = r0[2 * ow + 1], d = r1[2 * ow], f = r1[2 * ow + 1];              \
        T m = ((c > a) | (c != c)) ? c : a;                                                    \
        m = ((d > m) | (d != d)) ? d : m;                                                      \
        m = ((f > m) | (f != f)) ? f : m;                                                      \
        o[ow] = m;                                                                             \
        /* position of the max: the first equal element, or the last NaN (arithmetic,          \
        ** not branches: which element wins is random) */                                      \
        int64_t off;                                                                           \
        if (m == m) {                                                                          \
          int64_t ea = a == m, ec = c == m, ed = d == m;                                       \
          int64_t o3 = g->W + 1 - ed;                                                          \
          int64_t o2 = o3 + ec * (1 - o3);                                                     \
          off = o2 * (1 - ea);                                                                 \
        } else {                                                                               \
          off = f != f ? g->W + 1 : d != d ? g->W : c != c ? 1 : 0;                            \
        }                                                                                      \
        io[ow] = 2 * oh * g->W + 2 * ow + off;                                                 \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  DEF_PLANES(NAME, T, NAME##_plane, true)
DEF_MAXPOOL_2X2(maxpool2x2_f32, float)
DEF_MAXPOOL_2X2(maxpool2x2_f64, double)

/* dx plane = 0, then dx[idx] += dy (shared by max and adaptive max pooling). */
#define DEF_INDEX_BWD(NAME, T)                                                                 \
  static inline void NAME##_plane(const pool_geom *g, const T *dy, T *dx, int64_t *ix) {       \
    memset(dx, 0, (size_t)(g->H * g->W) * sizeof(T));                                          \
    for (int64_t o = 0; o < g->OH * g->OW; o++) dx[ix[o]] += dy[o];                            \
  }                                                                                            \
  DEF_PLANES(NAME, T, NAME##_plane, false)
DEF_INDEX_BWD(index_bwd_f32, float)
DEF_INDEX_BWD(index_bwd_f64, double)

/* ------------------------------------------------------------ avg pools */

/* Avg pool (AD false) or adaptive avg pool (AD true), forward and backward. */
#define DEF_AVG_FWD(NAME, SUF, T, AD)                                                          \
  static inline void NAME##_plane(const pool_geom *g, const T *in, T *out, int64_t *ix) {      \
    (void)ix;                                                                                  \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                   \
      pool_span r = pool_span_at(g, AD, false, oh);                                            \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                 \
        pool_span c = pool_span_at(g, AD, true, ow);                                           \
        /* a window all padding would be 0 / 0 without count_include_pad */                    \
        if (r.lo >= r.hi || c.lo >= c.hi)                                                      \
          out[oh * g->OW + ow] = 0;                                                            \
        else                                                                                   \
          out[oh * g->OW + ow] =                                                               \
              window_sum_##SUF(in, g->W, r, c) / (T)pool_divisor(g, AD, r, c);                 \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  DEF_PLANES(NAME, T, NAME##_plane, true)
DEF_AVG_FWD(avgpool_fwd_f32, f32, float, false)
DEF_AVG_FWD(avgpool_fwd_f64, f64, double, false)
DEF_AVG_FWD(adavg_fwd_f32, f32, float, true)
DEF_AVG_FWD(adavg_fwd_f64, f64, double, true)

#define DEF_AVG_BWD(NAME, SUF, T, AD)                                                          \
  static inline void NAME##_plane(const pool_geom *g, const T *dy, T *dx, int64_t *ix) {       \
    (void)ix;                                                                                  \
    memset(dx, 0, (size_t)(g->H * g->W) * sizeof(T));                                          \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                   \
      pool_span r = pool_span_at(g, AD, false, oh);                                            \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                 \
        pool_span c = pool_span_at(g, AD, true, ow);                                           \
        window_add_##SUF(dx, g->W, r, c, dy[oh * g->OW + ow] / (T)pool_divisor(g, AD, r, c));  \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  DEF_PLANES(NAME, T, NAME##_plane, false)
DEF_AVG_BWD(avgpool_bwd_f32, f32, float, false)
DEF_AVG_BWD(avgpool_bwd_f64, f64, double, false)
DEF_AVG_BWD(adavg_bwd_f32, f32, float, true)
DEF_AVG_BWD(adavg_bwd_f64, f64, double, true)

/* ------------------------------------------------------------ autograd */

typedef struct pool_extra {
  pool_geom g;
  int ndim;
  int64_t size[4];   /* input shape */
  int kind;          /* POOL_* */
} pool_extra;

enum { POOL_MAX, POOL_AVG, POOL_ADAVG, POOL_ADMAX };

/* Saved slot 0: indices (max kinds). */
static int pool_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                         lt_tensor **grad_in) {
  pool_extra *ex = self->extra;
  if (!grad_out[0] || !lt_needs_input_grad(self, 0)) return 0;
  lt_tensor *idx = NULL, *dy = NULL, *dx = NULL;
  if ((ex->kind == POOL_MAX || ex->kind == POOL_ADMAX) && lt_saved_get(ctx, self, 0, &idx))
    return -1;
  lt_dtype dt = self->out_dtype;
  if (lt_dense_as(ctx, &dy, grad_out[0], dt)) return -1;
  if (lt_empty(ctx, &dx, dt, ex->ndim, ex->size)) {
    lt_release(dy);
    return -1;
  }
  pool_job j = {&ex->g, lt_data(dy), lt_data(dx), idx ? lt_data(idx) : NULL};
  bool f = dt == LT_FLOAT32;
  const pool_geom *g = &ex->g;
  switch (ex->kind) {
    case POOL_MAX:
    case POOL_ADMAX:
      run_planes(ctx, g, g->H * g->W + g->OH * g->OW, f ? index_bwd_f32 : index_bwd_f64, &j);
      break;
    case POOL_AVG:
      run_planes(ctx, g, g->H * g->W + g->OH * g->OW * g->kh * g->kw,
                 f ? avgpool_bwd_f32 : avgpool_bwd_f64, &j);
      break;
    default:
      run_planes(ctx, g, 2 * g->H * g->W + g->OH * g->OW, f ? adavg_bwd_f32 : adavg_bwd_f64,
                 &j);
      break;
  }
  lt_release(dy);
  grad_in[0] = dx;
  return 0;
}

static const lt_node_type maxpool_type = {"MaxPool2DWithIndicesBackward0", pool_backward, NULL};
static const lt_node_type avgpool_type = {"AvgPool2DBackward0", pool_backward, NULL};
static const lt_node_type adavg_type = {"AdaptiveAvgPool2DBackward0", pool_backward, NULL};
static const lt_node_type admax_type = {"AdaptiveMaxPool2DBackward0", pool_backward, NULL};

/* Checks x: float, sd+1 or sd+2 dims with non-zero non-batch sizes. Fills P, H, W. */
static int pool_input(lt_ctx *ctx, const char *op, int sd, const lt_tensor *x, pool_geom *g) {
  char bx[256];
  if (!lt_dtype_is_float(x->dtype))
    return lt_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                   lt_dtype_name(x->dtype));
  if (x->ndim != sd + 1 && x->ndim != sd + 2)
    return lt_fail(ctx, "%s: expected %d-d (unbatched) or %d-d (batched) input %s, got input "
                   "of shape %s", op, sd + 1, sd + 2, sd == 1 ? "(N,C,L)" : "(N,C,H,W)",
                   LT_SHAPE(x, bx));
  for (int i = x->ndim == sd + 2 ? 1 : 0; i < x->ndim; i++)
    if (x->size[i] == 0)
      return lt_fail(ctx, "%s: expected input to have non-zero size for non-batch dimensions, "
                     "got input of shape %s", op, LT_SHAPE(x, bx));
  g->P = 1;
  for (int i = 0; i < x->ndim - sd; i++) g->P *= x->size[i];
  g->H = sd == 2 ? x->size[x->ndim - 2] : 1;
  g->W = x->size[x->ndim - 1];
  return 0;
}

static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d,
                             bool ceil_mode) {
  int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + pad) o--;
  return o;
}

/* Geometry of a windowed pool from args. */
static int pool_setup(lt_ctx *ctx, const char *op, int sd, bool is_max, const lt_tensor *x,
                      const lt_pool_args *a, pool_geom *g) {
  char bx[256];
  memset(g, 0, sizeof *g);
  if (pool_input(ctx, op, sd, x, g)) return -1;
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};
  for (int i = 0; i < sd; i++) {
    int jj = 2 - sd + i;
    k[jj] = a->kernel[i];
    s[jj] = a->stride[i];
    p[jj] = a->padding[i];
    d[jj] = is_max ? a->dilation[i] : 1;
    if (k[jj] < 1)
      return lt_fail(ctx, "%s: kernel_size must be greater than zero, got %lld", op,
                     (long long)k[jj]);
    /* a zero stride would never advance the window (and divides the output size by zero) */
    if (s[jj] == 0) return lt_fail(ctx, "%s: stride should not be zero", op);
    if (s[jj] < 0)
      return lt_fail(ctx, "%s: stride should be greater than zero, but got %lld", op,
                     (long long)s[jj]);
    if (d[jj] < 1)
      return lt_fail(ctx, "%s: dilation should be greater than zero, but got %lld", op,
                     (long long)d[jj]);
    if (p[jj] < 0)
      return lt_fail(ctx, "%s: pad must be non-negative, but got pad=%lld", op,
                     (long long)p[jj]);
    if (p[jj] > k[jj] / 2)
      return lt_fail(ctx, "%s: pad should be at most half of kernel size, but got pad=%lld "
                     "and kernel_size=%lld", op, (long long)p[jj], (long long)k[jj]);
  }
  if (!is_max && a->divisor_override < 0)
    return lt_fail(ctx, "%s: divisor must be not zero", op);
  g->kh = k[0]; g->kw = k[1];
  g->sh = s[0]; g->sw = s[1];
  g->ph = p[0]; g->pw = p[1];
  g->dh = d[0]; g->dw = d[1];
  g->OH = pool_out_size(g->H, k[0], p[0], s[0], d[0], a->ceil_mode);
  g->OW = pool_out_size(g->W, k[1], p[1], s[1], d[1], a->ceil_mode);
  g->count_include_pad = a->count_include_pad;
  g->divisor = is_max ? 0 : a->divisor_override;
  if (g->OH < 1 || g->OW < 1) {
    int64_t os[2] = {g->OH, g->OW};
    char bo[128];
    return lt_fail(ctx, "%s: given input of shape %s, the calculated output size %s is too "
                   "small", op, LT_SHAPE(x, bx), lt_sizes_str(sd, os + 2 - sd, bo, sizeof bo));
  }
  return 0;
}

/* Output shape: x's leading dims then the pooled spatial sizes. */
static void pool_out_shape(const lt_tensor *x, int sd, const pool_geom *g, int64_t *size) {
  for (int i = 0; i < x->ndim - sd; i++) size[i] = x->size[i];
  if (sd == 2) size[x->ndim - 2] = g->OH;
  size[x->ndim - 1] = g->OW;
}

/* Runs a pooling forward and records it. kind picks kernel and node type. */
static int pool_run(lt_ctx *ctx, const char *op, int kind, int sd, lt_tensor *x,
                    const pool_geom *g, lt_tensor **out, lt_tensor **indices) {
  int64_t size[4];
  pool_out_shape(x, sd, g, size);
  /* indices are made when asked for or needed by backward */
  bool want_idx = (kind == POOL_MAX || kind == POOL_ADMAX) && (indices || lt_needs_grad(ctx, 1, &x));
  lt_tensor *xc = NULL, *y = NULL, *ix = NULL;
  if (lt_contiguous(ctx, &xc, x) || lt_empty(ctx, &y, x->dtype, x->ndim, size) ||
      (want_idx && lt_empty(ctx, &ix, LT_INT64, x->ndim, size))) {
    lt_release(xc);
    lt_release(y);
    return -1;
  }
  pool_job j = {g, lt_data(xc), lt_data(y), ix ? lt_data(ix) : NULL};
  bool f = x->dtype == LT_FLOAT32;
  const lt_node_type *type;
  switch (kind) {
    case POOL_MAX:
      type = &maxpool_type;
      if (g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 &&
          g->dh == 1 && g->dw == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W)
        run_planes(ctx, g, g->OH * g->OW * 4, f ? maxpool2x2_f32 : maxpool2x2_f64, &j);
      else
        run_planes(ctx, g, g->OH * g->OW * g->kh * g->kw, f ? maxpool_fwd_f32 : maxpool_fwd_f64,
                   &j);
      break;
    case POOL_AVG:
      type = &avgpool_type;
      run_planes(ctx, g, g->OH * g->OW * g->kh * g->kw, f ? avgpool_fwd_f32 : avgpool_fwd_f64,
                 &j);
      break;
    case POOL_ADAVG:
      type = &adavg_type;
      run_planes(ctx, g, g->H * g->W + g->OH * g->OW, f ? adavg_fwd_f32 : adavg_fwd_f64, &j);
      break;
    default:
      type = &admax_type;
      run_planes(ctx, g, g->H * g->W + g->OH * g->OW, f ? admax_fwd_f32 : admax_fwd_f64, &j);
      break;
  }
  lt_release(xc);
  lt_node *node;
  if (lt_record(ctx, type, 1, &x, 1, &y, sizeof(pool_extra), want_idx ? 1 : 0, &node)) {
    lt_release(y);
    lt_release(ix);
    return -1;
  }
  if (node) {
    pool_extra *ex = node->extra;
    ex->g = *g;
    ex->kind = kind;
    ex->ndim = x->ndim;
    memcpy(ex->size, x->size, (size_t)x->ndim * sizeof(int64_t));
    if (want_idx && lt_save(node, 0, ix, false)) {
      lt_release(y);
      lt_release(ix);
      return lt_fail(ctx, "%s: out of memory saving indices for backward", op);
    }
  }
  *out = y;
  if (indices)
    *indices = ix;
  else
    lt_release(ix);
  return 0;
}

static int max_pool(lt_ctx *ctx, const char *op, int sd, lt_tensor **out, lt_tensor **indices,
                    lt_tensor *x, const lt_pool_args *a) {
  pool_geom g;
  if (pool_setup(ctx, op, sd, true, x, a, &g)) return -1;
  return pool_run(ctx, op, POOL_MAX, sd, x, &g, out, indices);
}

static int avg_pool(lt_ctx *ctx, const char *op, int sd, lt_tensor **out, lt_tensor *x,
                    const lt_pool_args *a) {
  pool_geom g;
  if (pool_setup(ctx, op, sd, false, x, a, &g)) return -1;
  return pool_run(ctx, op, POOL_AVG, sd, x, &g, out, NULL);
}

static int adaptive_pool(lt_ctx *ctx, const char *op, int kind, int sd, lt_tensor **out,
                         lt_tensor **indices, lt_tensor *x, const int64_t *osize) {
  pool_geom g;
  memset(&g, 0, sizeof g);
  if (pool_input(ctx, op, sd, x, &g)) return -1;
  for (int i = 0; i < sd; i++)
    if (osize[i] < 0)
      return lt_fail(ctx, "%s: elements of output_size must be greater than or equal to 0, got "
                     "%lld", op, (long long)osize[i]);
  g.OH = sd == 2 ? osize[0] : 1;
  g.OW = osize[sd - 1];
  return pool_run(ctx, op, kind, sd, x, &g, out, indices);
}

int lt_max_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                  const lt_pool_args *a) {
  return max_pool(ctx, "max_pool1d", 1, out, indices, x, a);
}
int lt_max_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                  const lt_pool_args *a) {
  return max_pool(ctx, "max_pool2d", 2, out, indices, x, a);
}
int lt_avg_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const lt_pool_args *a) {
  return avg_pool(ctx, "avg_pool1d", 1, out, x, a);
}
int lt_avg_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const lt_pool_args *a) {
  return avg_pool(ctx, "avg_pool2d", 2, out, x, a);
}
int lt_adaptive_avg_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int64_t osize) {
  return adaptive_pool(ctx, "adaptive_avg_pool1d", POOL_ADAVG, 1, out, NULL, x, &osize);
}
int lt_adaptive_avg_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const int64_t *osize) {
  return adaptive_pool(ctx, "adaptive_avg_pool2d", POOL_ADAVG, 2, out, NULL, x, osize);
}
int lt_adaptive_max_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                           int64_t osize) {
  return adaptive_pool(ctx, "adaptive_max_pool1d", POOL_ADMAX, 1, out, indices, x, &osize);
}
int lt_adaptive_max_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                           const int64_t *osize) {
  return adaptive_pool(ctx, "adaptive_max_pool2d", POOL_ADMAX, 2, out, indices, x, osize);
}

void lt_pool_args_init(lt_pool_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 0; i < 2; i++) a->dilation[i] = 1;
  a->count_include_pad = true;
}
