/*
** cpu/pool.c -- cpu kernels of the pools (`pool`, `pool_backward`): max, avg, adaptive avg and
** adaptive max, 1-d and 2-d, forward (max kinds with indices) and backward.
**
** Shape letters (ltK_pool_geom): P = N*C independent planes of H x W input and OH x OW output.
** A 1-d op is the 2-d kernel with H = kh = 1. Indices are flat positions ih*W + iw inside a
** plane. Every kernel runs planes in parallel; a plane is one task's, so results are the same
** whatever the thread count.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* Element steps per parallel task (planes are grouped up to about this much work). */
#define PLANE_GRAIN 16384

typedef struct pool_job {
  const ltK_pool_geom *g;
  const void *src;
  void *dst;
  int64_t *idx;
} pool_job;

static void run_planes(lt_ctx *ctx, const ltK_pool_geom *g, int64_t work, ltK_range_fn fn,
                       pool_job *j) {
  int64_t per = work > 0 ? work : 1;
  ltB_parallel_for(ctx, g->P, (PLANE_GRAIN + per - 1) / per, fn, j);
}

/* Range callback NAME: PLANE(g, src, dst, idx) on each plane of [b, e). A forward plane reads
** H*W values and writes OH*OW (and as many indices, when asked for); a backward plane reads
** OH*OW gradients and writes H*W. Every kernel below is a plane function run through this. */
#define DEF_PLANES(NAME, T, PLANE, FWD)                                                        \
  static void NAME(int64_t b, int64_t e, void *ud) {                                           \
    const pool_job *j = ud;                                                                    \
    const ltK_pool_geom *g = j->g;                                                                 \
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
static inline pool_span pool_span_at(const ltK_pool_geom *g, bool adaptive, bool cols, int64_t o) {
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
static inline int64_t pool_divisor(const ltK_pool_geom *g, bool adaptive, pool_span r,
                                   pool_span c) {
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
  static inline void NAME##_plane(const ltK_pool_geom *g, const T *in, T *out, int64_t *ix) {      \
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

/* Float32 max pool of any window (3x3 stride 2 padding 1 of ResNet's stem, say), MP_COLS
** outputs at a time (whole output rows where they fit): each tap of the window is gathered for
** all of them (-inf where it falls outside the input, which never wins), then taken where it is
** above the maximum so far or NaN, in the scalar kernel's tap order, as selects that vectorise.
** The branch per tap of window_max missed on random data: 27 ns an output of a 3x3 window. Same
** values and indices (int32 positions: planes under 2^31 values). */
#define MP_COLS 256
static inline void maxpool_rows_f32_plane(const ltK_pool_geom *g, const float *in, float *out,
                                          int64_t *ix) {
  const int64_t W = g->W, OW = g->OW;
  float cand[MP_COLS], m[MP_COLS];
  int32_t pos[MP_COLS], best[MP_COLS];
  /* a chunk: output rows oh0 .. oh0+nr-1, columns c0 .. c0+nc-1 of each */
  int64_t nc = OW < MP_COLS ? OW : MP_COLS, rows = MP_COLS / nc;
  for (int64_t oh0 = 0; oh0 < g->OH; oh0 += rows) {
    int64_t nr = g->OH - oh0 < rows ? g->OH - oh0 : rows;
    for (int64_t c0 = 0; c0 < OW; c0 += nc) {
      int64_t w = OW - c0 < nc ? OW - c0 : nc;
      int n = 0;
      for (int64_t oh = oh0; oh < oh0 + nr; oh++) {
        int64_t rlo = pool_span_at(g, false, false, oh).lo;
        for (int64_t ow = c0; ow < c0 + w; ow++, n++) {
          m[n] = -INFINITY;
          best[n] = (int32_t)(rlo * W + pool_span_at(g, false, true, ow).lo);
        }
      }
      for (int64_t kr = 0; kr < g->kh; kr++)
        for (int64_t k = 0; k < g->kw; k++) {
          int i = 0;
          for (int64_t oh = oh0; oh < oh0 + nr; oh++, i += (int)w) {
            int64_t ih = oh * g->sh - g->ph + kr * g->dh;
            int64_t c = c0 * g->sw - g->pw + k * g->dw, sw = g->sw;
            /* the tap is inside the input for columns j in [jlo, jhi) */
            int64_t jlo = c >= 0 ? 0 : (-c + sw - 1) / sw, jhi = W - c > 0 ? (W - c + sw - 1) / sw : 0;
            if (ih < 0 || ih >= g->H) jlo = jhi = 0;
            if (jhi > w) jhi = w;
            if (jlo > jhi) jlo = jhi;
            float *cd = cand + i;
            int32_t *ps = pos + i;
            int64_t p0 = ih * W + c;   /* taps outside the input wrap in the cast, never read */
            for (int64_t j = 0; j < jlo; j++) cd[j] = -INFINITY;
            for (int64_t j = jhi; j < w; j++) cd[j] = -INFINITY;
            if (jlo < jhi) {   /* stride 1 and 2 as loops of constant stride, which vectorise */
              const float *src = in + ih * W + c + jlo * sw;
              float *dst = cd + jlo;
              int64_t len = jhi - jlo;
              if (sw == 1)
                for (int64_t j = 0; j < len; j++) dst[j] = src[j];
              else if (sw == 2)
                for (int64_t j = 0; j < len; j++) dst[j] = src[2 * j];
              else
                for (int64_t j = 0; j < len; j++) dst[j] = src[j * sw];
            }
            for (int64_t j = 0; j < w; j++) ps[j] = (int32_t)(p0 + j * sw);
          }
          for (i = 0; i < n; i++) {
            bool t = cand[i] > m[i] || cand[i] != cand[i];
            m[i] = t ? cand[i] : m[i];
            best[i] = t ? pos[i] : best[i];
          }
        }
      for (int64_t r = 0, i = 0; r < nr; r++, i += w) {
        memcpy(out + (oh0 + r) * OW + c0, m + i, (size_t)w * sizeof *m);
        if (ix)
          for (int64_t j = 0; j < w; j++) ix[(oh0 + r) * OW + c0 + j] = best[i + j];
      }
    }
  }
}
DEF_PLANES(maxpool_rows_f32, float, maxpool_rows_f32_plane, true)

/* 2x2, stride 2, no padding or dilation: the common case, without the window bookkeeping and
** with selects instead of branches (same NaN rule: a NaN wins, the last one seen). */
#define DEF_MAXPOOL_2X2(NAME, T)                                                               \
  static inline void NAME##_plane(const ltK_pool_geom *g, const T *in, T *out, int64_t *ix) {      \
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
DEF_MAXPOOL_2X2(maxpool2x2_f64, double)

/* float32 2x2: four outputs at a time from two rows of eight inputs, split into even and odd
** columns; the selects are the scalar rule's, in the same order (a, then c, d, f replace the
** max when greater or NaN), so values and indices are the scalar kernel's bit for bit. */
#if defined(LT_VEC4) && (defined(__clang__) || __GNUC__ >= 12)
#define MAX2X2_VEC 1
typedef int64_t v4l __attribute__((vector_size(32)));
static inline void split_even_odd(const float *p, v4f *even, v4f *odd) {
  v4f lo = v4load(p), hi = v4load(p + 4);
  *even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6);
  *odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7);
}
static inline void store_interleaved(float *p, v4f even, v4f odd) {
  v4store(p, __builtin_shufflevector(even, odd, 0, 4, 1, 5));
  v4store(p + 4, __builtin_shufflevector(even, odd, 2, 6, 3, 7));
}
#endif

/* Where the max of a window (a c / d f) is, as an offset from a: 0, 1, W or W + 1. */
static inline int64_t max4_f32(float a, float c, float d, float f, int64_t W, float *max) {
  float m = a;
  int64_t off = 0;
  if ((c > m) | (c != c)) m = c, off = 1;
  if ((d > m) | (d != d)) m = d, off = W;
  if ((f > m) | (f != f)) m = f, off = W + 1;
  *max = m;
  return off;
}

#ifdef MAX2X2_VEC
/* Outputs ow .. ow+3 of one output row (r0, r1: its two input rows; base: r0's offset). */
static inline void max2x2_vec4(const float *r0, const float *r1, float *o, int64_t *io,
                               int64_t base, int64_t ow, int32_t W) {
  const v4i one = {1, 1, 1, 1}, w0 = {W, W, W, W}, w1 = w0 + one;
  v4f a, c, d, f;
  split_even_odd(r0 + 2 * ow, &a, &c);
  split_even_odd(r1 + 2 * ow, &d, &f);
  v4i k = (c > a) | (c != c);
  v4f m = v4sel(k, c, a);
  v4i off = k & one;
  k = (d > m) | (d != d);
  m = v4sel(k, d, m);
  off = (k & w0) | (~k & off);
  k = (f > m) | (f != f);
  m = v4sel(k, f, m);
  off = (k & w1) | (~k & off);
  v4store(o + ow, m);
  if (io) {
    int64_t at = base + 2 * ow;
    v4l pos = __builtin_convertvector(off, v4l) + (v4l){at, at + 2, at + 4, at + 6};
    memcpy(io + ow, &pos, sizeof pos);
  }
}
#endif

static inline void maxpool2x2_f32_plane(const ltK_pool_geom *g, const float *in, float *out,
                                        int64_t *ix) {
  const int64_t W = g->W, OW = g->OW;
  for (int64_t oh = 0; oh < g->OH; oh++) {
    const float *r0 = in + 2 * oh * W, *r1 = r0 + W;
    float *o = out + oh * OW;
    int64_t *io = ix ? ix + oh * OW : NULL, base = 2 * oh * W, ow = 0;
#ifdef MAX2X2_VEC
    if (OW >= 4 && W < INT32_MAX) {
      for (; ow + 4 <= OW; ow += 4) max2x2_vec4(r0, r1, o, io, base, ow, (int32_t)W);
      /* the last few again as one overlapping step: the same values, written twice */
      if (ow < OW) max2x2_vec4(r0, r1, o, io, base, OW - 4, (int32_t)W);
      continue;
    }
#endif
    for (; ow < OW; ow++) {
      int64_t off = max4_f32(r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1], W, &o[ow]);
      if (io) io[ow] = base + 2 * ow + off;
    }
  }
}
DEF_PLANES(maxpool2x2_f32, float, maxpool2x2_f32_plane, true)

/* dx plane = 0, then dx[idx] += dy (shared by max and adaptive max pooling). */
#define DEF_INDEX_BWD(NAME, T)                                                                 \
  static inline void NAME##_plane(const ltK_pool_geom *g, const T *dy, T *dx, int64_t *ix) {       \
    memset(dx, 0, (size_t)(g->H * g->W) * sizeof(T));                                          \
    for (int64_t o = 0; o < g->OH * g->OW; o++) dx[ix[o]] += dy[o];                            \
  }                                                                                            \
  DEF_PLANES(NAME, T, NAME##_plane, false)
DEF_INDEX_BWD(index_bwd_f32, float)
DEF_INDEX_BWD(index_bwd_f64, double)

/* float32 2x2 backward: each input of a window gets dy or zero by its offset from the window's
** first element (windows tile the plane, so every element is written once; the columns and
** rows no window covers are zeroed). dy + 0 turns -0 into +0, as the add into zeros does. */
#ifdef MAX2X2_VEC
/* dx of the windows of outputs ow .. ow+3 of one row (r0, r1: their input rows). */
static inline void max2x2_bwd_vec4(float *r0, float *r1, const float *gy, const int64_t *io,
                                   int64_t base, int64_t ow, int32_t W) {
  const v4f zero = v4splat(0.0f);
  const v4i z = {0, 0, 0, 0}, one = {1, 1, 1, 1}, w0 = {W, W, W, W}, w1 = w0 + one;
  v4f v = v4load(gy + ow) + zero;
  v4l pos;
  memcpy(&pos, io + ow, sizeof pos);
  int64_t at = base + 2 * ow;
  v4i off = __builtin_convertvector(pos - (v4l){at, at + 2, at + 4, at + 6}, v4i);
  store_interleaved(r0 + 2 * ow, v4sel(off == z, v, zero), v4sel(off == one, v, zero));
  store_interleaved(r1 + 2 * ow, v4sel(off == w0, v, zero), v4sel(off == w1, v, zero));
}
#endif

static inline void max2x2_bwd_f32_plane(const ltK_pool_geom *g, const float *dy, float *dx,
                                        int64_t *ix) {
  const int64_t W = g->W, OW = g->OW;
  for (int64_t oh = 0; oh < g->OH; oh++) {
    float *r0 = dx + 2 * oh * W, *r1 = r0 + W;
    const float *gy = dy + oh * OW;
    const int64_t *io = ix + oh * OW, base = 2 * oh * W;
    int64_t ow = 0;
#ifdef MAX2X2_VEC
    if (OW >= 4 && W < INT32_MAX) {
      for (; ow + 4 <= OW; ow += 4) max2x2_bwd_vec4(r0, r1, gy, io, base, ow, (int32_t)W);
      if (ow < OW) max2x2_bwd_vec4(r0, r1, gy, io, base, OW - 4, (int32_t)W);
      ow = OW;
    }
#endif
    for (; ow < OW; ow++) {
      float v = gy[ow] + 0.0f;
      int64_t off = io[ow] - base - 2 * ow;
      r0[2 * ow] = off == 0 ? v : 0.0f;
      r0[2 * ow + 1] = off == 1 ? v : 0.0f;
      r1[2 * ow] = off == W ? v : 0.0f;
      r1[2 * ow + 1] = off == W + 1 ? v : 0.0f;
    }
    for (int64_t iw = 2 * OW; iw < W; iw++) r0[iw] = r1[iw] = 0.0f;
  }
  memset(dx + 2 * g->OH * W, 0, (size_t)((g->H - 2 * g->OH) * W) * sizeof(float));
}
DEF_PLANES(max2x2_bwd_f32, float, max2x2_bwd_f32_plane, false)

/* ------------------------------------------------------------ avg pools */

/* Avg pool (AD false) or adaptive avg pool (AD true), forward and backward. */
#define DEF_AVG_FWD(NAME, SUF, T, AD)                                                          \
  static inline void NAME##_plane(const ltK_pool_geom *g, const T *in, T *out, int64_t *ix) {      \
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
  static inline void NAME##_plane(const ltK_pool_geom *g, const T *dy, T *dx, int64_t *ix) {       \
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

/* 2x2 windows, stride 2, no padding, inside the input: the generic loops' sums in their order
** (row by row from 0) and divisor 4, without the window bookkeeping per output. */
#define DEF_AVG2X2(NAME, T)                                                                    \
  static inline void NAME##_fwd_plane(const ltK_pool_geom *g, const T *in, T *out, int64_t *ix) { \
    (void)ix;                                                                                  \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                   \
      const T *r0 = in + 2 * oh * g->W, *r1 = r0 + g->W;                                       \
      T *o = out + oh * g->OW;                                                                 \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                 \
        T s = 0;                                                                               \
        s += r0[2 * ow];                                                                       \
        s += r0[2 * ow + 1];                                                                   \
        s += r1[2 * ow];                                                                       \
        s += r1[2 * ow + 1];                                                                   \
        o[ow] = s / (T)4;                                                                      \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  DEF_PLANES(NAME##_fwd, T, NAME##_fwd_plane, true)                                            \
  static inline void NAME##_bwd_plane(const ltK_pool_geom *g, const T *dy, T *dx, int64_t *ix) { \
    (void)ix;                                                                                  \
    if (2 * g->OH < g->H || 2 * g->OW < g->W)   /* rows or columns no window covers */         \
      memset(dx, 0, (size_t)(g->H * g->W) * sizeof(T));                                       \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                   \
      T *r0 = dx + 2 * oh * g->W, *r1 = r0 + g->W;                                             \
      const T *d = dy + oh * g->OW;                                                            \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                 \
        T v = (T)0 + d[ow] / (T)4;   /* as 0 += v: -0 becomes +0 */                            \
        r0[2 * ow] = r0[2 * ow + 1] = r1[2 * ow] = r1[2 * ow + 1] = v;                         \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
  DEF_PLANES(NAME##_bwd, T, NAME##_bwd_plane, false)
DEF_AVG2X2(avg2x2_f32, float)
DEF_AVG2X2(avg2x2_f64, double)

/* ------------------------------------------------------------ entries */

/* The common max pool: 2x2 windows, stride 2, no padding or dilation, all inside the input. */
static bool is_max2x2(const ltK_pool_geom *g) {
  return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 &&
         g->dh == 1 && g->dw == 1 && 2 * g->OH <= g->H && 2 * g->OW <= g->W;
}

/* The same windows for avg pool, with the divisor the window's size (no override). */
static bool is_avg2x2(const ltK_pool_geom *g) { return is_max2x2(g) && g->divisor == 0; }

void ltC_pool(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *y, lt_tensor *idx,
              const lt_tensor *x) {
  pool_job j = {.g = g, .src = ltB_ptr(x), .dst = ltB_ptr(y), .idx = idx ? ltB_ptr(idx) : NULL};
  bool f = x->dtype == LT_FLOAT32;
  switch (g->kind) {
    case LT_POOL_MAX:
      if (is_max2x2(g))
        run_planes(ctx, g, g->OH * g->OW * 4, f ? maxpool2x2_f32 : maxpool2x2_f64, &j);
      else
        run_planes(ctx, g, g->OH * g->OW * g->kh * g->kw,
                   !f ? maxpool_fwd_f64
                      : g->H * g->W < INT32_MAX ? maxpool_rows_f32 : maxpool_fwd_f32, &j);
      break;
    case LT_POOL_AVG:
      if (is_avg2x2(g))
        run_planes(ctx, g, g->OH * g->OW * 4, f ? avg2x2_f32_fwd : avg2x2_f64_fwd, &j);
      else
        run_planes(ctx, g, g->OH * g->OW * g->kh * g->kw, f ? avgpool_fwd_f32 : avgpool_fwd_f64,
                   &j);
      break;
    case LT_POOL_ADAPTIVE_AVG:
      run_planes(ctx, g, g->H * g->W + g->OH * g->OW, f ? adavg_fwd_f32 : adavg_fwd_f64, &j);
      break;
    case LT_POOL_ADAPTIVE_MAX:
      run_planes(ctx, g, g->H * g->W + g->OH * g->OW, f ? admax_fwd_f32 : admax_fwd_f64, &j);
      break;
  }
}

void ltC_pool_backward(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *dx, const lt_tensor *dy,
                       const lt_tensor *idx) {
  pool_job j = {.g = g, .src = ltB_ptr(dy), .dst = ltB_ptr(dx), .idx = idx ? ltB_ptr(idx) : NULL};
  bool f = dx->dtype == LT_FLOAT32;
  switch (g->kind) {
    case LT_POOL_MAX:
      if (f && is_max2x2(g)) {
        run_planes(ctx, g, g->H * g->W + g->OH * g->OW, max2x2_bwd_f32, &j);
        break;
      }
      /* fall through */
    case LT_POOL_ADAPTIVE_MAX:
      run_planes(ctx, g, g->H * g->W + g->OH * g->OW, f ? index_bwd_f32 : index_bwd_f64, &j);
      break;
    case LT_POOL_AVG:
      if (is_avg2x2(g))
        run_planes(ctx, g, g->H * g->W + g->OH * g->OW, f ? avg2x2_f32_bwd : avg2x2_f64_bwd, &j);
      else
        run_planes(ctx, g, g->H * g->W + g->OH * g->OW * g->kh * g->kw,
                   f ? avgpool_bwd_f32 : avgpool_bwd_f64, &j);
      break;
    case LT_POOL_ADAPTIVE_AVG:
      run_planes(ctx, g, 2 * g->H * g->W + g->OH * g->OW, f ? adavg_bwd_f32 : adavg_bwd_f64, &j);
      break;
  }
}
