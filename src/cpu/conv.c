/*
** cpu/conv.c -- cpu kernels of the convolutions (`conv`, `conv_backward`): conv1d/2d and the
** transposed ones, forward and the gradients of input, weight and bias.
**
** Shape letters (ltK_conv_geom): N batch; the "image side" has C channels of H x W; the "column
** side" has O channels of OH x OW, L = OH*OW positions. A convolution maps image side -> column
** side, a transposed convolution maps column side -> image side. g = groups; a group's weight
** block is (Og, K) with K = Cg*kh*kw. 1-d ops are the 2-d kernels with H = kh = 1.
**
** Everything is built from four copy kernels and cblas GEMMs:
**   im2col   image (nb,C,H,W)  -> columns (C*kh*kw, nb*L)     (row r = (c, ki, kj))
**   col2im   columns           -> image, summing overlaps      (adjoint of im2col)
**   gather   (nb,O,L)          -> (O, nb*L)
**   scatter  (O, nb*L)         -> (nb,O,L), adding a bias
** A chunk of nb samples sits side by side in the columns matrix, so one GEMM per group covers
** many small images (LeNet-sized images make per-sample GEMMs far too small to be efficient).
**
**   conv forward      Y_g = W_g @ im2col(x)                     then scatter + bias
**   conv backward     dW_g += G_g @ im2col(x)^T     dx = col2im(W_g^T @ G_g)   (G = gather(dy))
**   transposed fwd    y = col2im(W_g^T @ gather(x))             then + bias
**   transposed bwd    dx = scatter(W_g @ im2col(dy))   dW_g += gather(x)_g @ im2col(dy)^T
**
** The copy kernels give the same bits whatever the thread count (each element is written by one
** task, in a fixed order); the weight gradient is summed per part, and the number of parts
** follows the thread count (see the batch driver).
*/
#include <immintrin.h>
#include <stdlib.h>

#include "../cpu_isa.h"
#include "cpu.h"

/* Samples are processed in chunks whose columns matrix holds at most this many elements (or
** one sample), so that it stays in the L2 cache between im2col and the GEMM that reads it;
** chunks of several samples keep GEMMs on small images from becoming too thin. */
#define COLS_LIMIT ((int64_t)1 << 16)

/* Samples whose column side (O x L) holds at least this many elements go one per chunk: their
** GEMM is wide enough alone, and gathering a chunk's column sides into one matrix and
** scattering it back cost more than the GEMM saved (3 -> 64 channels, 3 x 3 over 32 images of
** 32 x 32: forward and backward 4.9 -> 3.9 ms; few-channel images keep their chunks). */
#define SAMPLE_ALONE ((int64_t)1 << 15)

/* ------------------------------------------------------------ copy kernels */

typedef struct copy_job {
  const ltK_conv_geom *g;
  const void *src;
  void *dst;
  const void *bias;   /* scatter only, may be NULL */
  int64_t nb;         /* samples in this chunk */
} copy_job;

/* Range of column positions ow (in [0, OW)) whose image position ow*s + off lies in [0, W). */
static inline void valid_range(int64_t off, int64_t s, int64_t W, int64_t OW, int64_t *lo,
                               int64_t *hi) {
  /* strides 1 and 2 without dividing: im2col asks twice per task, and on small images (8 x 8)
  ** the four divisions took a quarter of a forward convolution */
  int64_t a = off >= 0 ? 0 : s == 1 ? -off : s == 2 ? (-off + 1) >> 1 : (-off + s - 1) / s;
  int64_t b = off > W - 1 ? 0 : s == 1 ? W - off : s == 2 ? ((W - 1 - off) >> 1) + 1
                                                          : (W - 1 - off) / s + 1;
  if (b > OW) b = OW;
  if (a > b) a = b;
  *lo = a;
  *hi = b;
}

/* One row of columns: dst[ow] = row[ow * sw] for ow in [lo, hi), 0 elsewhere in [0, OW) (row is
** read only inside [lo, hi): it may point before the image row, by the left padding). room is
** how many elements after dst[OW - 1] the task will overwrite later, rest how many elements of
** the chunk's images may be read from row + hi on (the vector filler below uses them). */
#define DEF_FILL_ROW(NAME, T)                                                                  \
  static inline void NAME(T *dst, const T *row, int64_t lo, int64_t hi, int64_t OW,             \
                          int64_t sw, int64_t room, int64_t rest) {                            \
    (void)room, (void)rest;                                                                    \
    for (int64_t ow = 0; ow < lo; ow++) dst[ow] = 0;                                           \
    if (sw == 1) {                                                                             \
      memcpy(dst + lo, row + lo, (size_t)(hi - lo) * sizeof(T)); /* no loop epilogue */        \
    } else {                                                                                   \
      for (int64_t ow = lo; ow < hi; ow++) dst[ow] = row[ow * sw];                             \
    }                                                                                          \
    for (int64_t ow = hi; ow < OW; ow++) dst[ow] = 0;                                          \
  }
DEF_FILL_ROW(fill_row_f32, float)
DEF_FILL_ROW(fill_row_f64, double)

/* Task t = (row r, sample n): fills columns[r, n*L .. n*L+L). */
#define DEF_IM2COL(NAME, T, FILL)                                                              \
  static void NAME(int64_t b, int64_t e, void *ud) {                                           \
    const copy_job *j = ud;                                                                    \
    const ltK_conv_geom *g = j->g;                                                             \
    const int64_t L = g->OH * g->OW, KK = g->kh * g->kw, ld = j->nb * L;                       \
    /* counted on from task b, not divided out per task: the divisions cost more than a row */ \
    int64_t r = b / j->nb, n = b % j->nb;                                                      \
    int64_t c = r / KK, ki = (r / g->kw) % g->kh, kj = r % g->kw;                              \
    const T *end = (const T *)j->src + j->nb * g->C * g->H * g->W;                             \
    for (int64_t t = b; t < e; t++) {                                                          \
      const T *src = (const T *)j->src + (n * g->C + c) * g->H * g->W;                         \
      T *dst = (T *)j->dst + r * ld + n * L;                                                   \
      int64_t off = kj * g->dw - g->pw, lo, hi, oh_lo, oh_hi;                                  \
      valid_range(off, g->sw, g->W, g->OW, &lo, &hi);                                          \
      valid_range(ki * g->dh - g->ph, g->sh, g->H, g->OH, &oh_lo, &oh_hi); /* rows in image */ \
      /* in order, as each fill may run on into what the next overwrites: the padding rows     \
      ** above the image (one stretch of zeros, nothing read), its rows, the padding below */  \
      FILL(dst, src, 0, 0, oh_lo * g->OW, 1, L - oh_lo * g->OW, end - src);                    \
      int64_t room = L - (oh_lo + 1) * g->OW; /* columns of the task after the row's */       \
      const T *row = src + (oh_lo * g->sh - g->ph + ki * g->dh) * g->W + off;                  \
      dst += oh_lo * g->OW;                                                                    \
      for (int64_t oh = oh_lo; oh < oh_hi; oh++, dst += g->OW, room -= g->OW, row += g->sh * g->W) \
        FILL(dst, row, lo, hi, g->OW, g->sw, room, end - (row + hi));                          \
      FILL(dst, src, 0, 0, (g->OH - oh_hi) * g->OW, 1, 0, end - src);                          \
      if (++n < j->nb) continue; /* the next task: the next sample, or the next row r */       \
      n = 0, r++;                                                                              \
      if (++kj < g->kw) continue;                                                              \
      kj = 0;                                                                                  \
      if (++ki < g->kh) continue;                                                              \
      ki = 0, c++;                                                                             \
    }                                                                                          \
  }
DEF_IM2COL(im2col_f32, float, fill_row_f32)
DEF_IM2COL(im2col_f64, double, fill_row_f64)

/* The float32 rows from AVX2 up: image rows are a few dozen floats (LeNet's 28 and 10), where
** a call of memcpy or memset and the zeroing loops cost more than the copy, and the rows are
** many (140,000 in a LeNet step's forward). Every load and store is a whole vector: the last
** store of each stretch runs on into what the next stretch (or the next row) overwrites, and
** the last load reads past the row's valid part, into the image. Where the columns left in the
** task (room) or the image left after the row (rest) are too short for that, each stretch
** takes whole vectors inside it and the rest element by element. (Masked loads and stores
** would need no such care, but they are microcoded on AMD Zen 2: with them, LeNet's step took
** 1.7x as long.) */
#define LT_CONV_INLINE static inline __attribute__((always_inline))
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
/* GCC would turn the zeroing loops back into calls of memset (popped by LT_ISA_END) */
#pragma GCC optimize("no-tree-loop-distribute-patterns")
LT_CONV_INLINE void fill_row_f32_avx2(float *dst, const float *row, int64_t lo, int64_t hi,
                                      int64_t OW, int64_t sw, int64_t room, int64_t rest) {
  if (sw == 2) {
    /* whole vectors as below: the even elements of two loads, in order (shuffle, then the
    ** 64-bit quarters swapped into place); the last load of the stretch reads up to 2 hi + 13 */
    if (room >= 8 && rest >= hi + 14) {
      const __m256 z = _mm256_setzero_ps();
      for (int64_t o = 0; o < lo; o += 8) _mm256_storeu_ps(dst + o, z);
      for (int64_t o = lo; o < hi; o += 8) {
        __m256 e = _mm256_shuffle_ps(_mm256_loadu_ps(row + 2 * o), _mm256_loadu_ps(row + 2 * o + 8),
                                     0x88);
        _mm256_storeu_ps(dst + o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e),
                                                                         0xd8)));
      }
      for (int64_t o = hi; o < OW; o += 8) _mm256_storeu_ps(dst + o, z);
      return;
    }
    for (int64_t o = 0; o < lo; o++) dst[o] = 0;
    for (int64_t o = lo; o < hi; o++) dst[o] = row[2 * o];
    for (int64_t o = hi; o < OW; o++) dst[o] = 0;
    return;
  }
  if (sw != 1) {
    fill_row_f32(dst, row, lo, hi, OW, sw, room, rest);
    return;
  }
  const __m256 z = _mm256_setzero_ps();
  if (room >= 8 && rest >= 8) {
    for (int64_t o = 0; o < lo; o += 8) _mm256_storeu_ps(dst + o, z);
    for (int64_t o = lo; o < hi; o += 8) _mm256_storeu_ps(dst + o, _mm256_loadu_ps(row + o));
    for (int64_t o = hi; o < OW; o += 8) _mm256_storeu_ps(dst + o, z);
    return;
  }
  int64_t o = 0;
  for (; o + 8 <= lo; o += 8) _mm256_storeu_ps(dst + o, z);
  for (; o < lo; o++) dst[o] = 0;
  for (; o + 8 <= hi; o += 8) _mm256_storeu_ps(dst + o, _mm256_loadu_ps(row + o));
  for (; o < hi; o++) dst[o] = row[o];
  for (; o + 8 <= OW; o += 8) _mm256_storeu_ps(dst + o, z);
  for (; o < OW; o++) dst[o] = 0;
}
DEF_IM2COL(im2col_f32_avx2, float, fill_row_f32_avx2)
LT_ISA_END
#endif

static ltK_range_fn im2col_for(lt_dtype dt) {
  if (dt != LT_FLOAT32) return im2col_f64;
#ifdef LT_ISA_DISPATCH
  /* AVX-512 takes these too: the rows are short, a few 8-float vectors each */
  if (ltB_cpu_isa() >= LT_ISA_AVX2) return im2col_f32_avx2;
#endif
  return im2col_f32;
}

/* One row of the image plane: row[ow * sw] += cp[ow] for ow in [lo, hi). */
#define DEF_ADD_ROW(NAME, T)                                                                   \
  static inline void NAME(T *row, const T *cp, int64_t lo, int64_t hi, int64_t sw) {           \
    if (sw == 1) {                                                                             \
      for (int64_t ow = lo; ow < hi; ow++) row[ow] += cp[ow];                                  \
    } else {                                                                                   \
      for (int64_t ow = lo; ow < hi; ow++) row[ow * sw] += cp[ow];                             \
    }                                                                                          \
  }
DEF_ADD_ROW(add_row_f32, float)
DEF_ADD_ROW(add_row_f64, double)

/* Task t = (sample n, channel c): image plane = sum of its columns entries (overwrites). */
#define DEF_COL2IM(NAME, T, ADD)                                                               \
  static void NAME(int64_t b, int64_t e, void *ud) {                                           \
    const copy_job *j = ud;                                                                    \
    const ltK_conv_geom *g = j->g;                                                             \
    const int64_t L = g->OH * g->OW, KK = g->kh * g->kw, ld = j->nb * L;                       \
    for (int64_t t = b; t < e; t++) {                                                          \
      int64_t n = t / g->C, c = t % g->C;                                                      \
      T *dst = (T *)j->dst + (n * g->C + c) * g->H * g->W;                                     \
      memset(dst, 0, (size_t)(g->H * g->W) * sizeof(T));                                       \
      for (int64_t ki = 0; ki < g->kh; ki++)                                                   \
        for (int64_t kj = 0; kj < g->kw; kj++) {                                               \
          const T *col = (const T *)j->src + (c * KK + ki * g->kw + kj) * ld + n * L;          \
          int64_t off = kj * g->dw - g->pw, lo, hi;                                            \
          valid_range(off, g->sw, g->W, g->OW, &lo, &hi);                                      \
          for (int64_t oh = 0; oh < g->OH; oh++) {                                             \
            int64_t ih = oh * g->sh - g->ph + ki * g->dh;                                      \
            if (ih < 0 || ih >= g->H) continue;                                                \
            T *row = dst + ih * g->W + off;                                                    \
            const T *cp = col + oh * g->OW;                                                    \
            ADD(row, cp, lo, hi, g->sw);                                                       \
          }                                                                                    \
        }                                                                                      \
    }                                                                                          \
  }
DEF_COL2IM(col2im_f32, float, add_row_f32)
DEF_COL2IM(col2im_f64, double, add_row_f64)

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
LT_CONV_INLINE void add_row_f32_avx2(float *row, const float *cp, int64_t lo, int64_t hi,
                                     int64_t sw) {
  if (sw != 1) {
    add_row_f32(row, cp, lo, hi, sw);
    return;
  }
  int64_t o = lo;
  for (; o + 8 <= hi; o += 8)
    _mm256_storeu_ps(row + o, _mm256_add_ps(_mm256_loadu_ps(row + o), _mm256_loadu_ps(cp + o)));
  for (; o < hi; o++) row[o] += cp[o];
}
DEF_COL2IM(col2im_f32_avx2, float, add_row_f32_avx2)
LT_ISA_END
#endif

static ltK_range_fn col2im_for(lt_dtype dt) {
  if (dt != LT_FLOAT32) return col2im_f64;
#ifdef LT_ISA_DISPATCH
  if (ltB_cpu_isa() >= LT_ISA_AVX2) return col2im_f32_avx2;
#endif
  return col2im_f32;
}

/* gather: task t = (channel o, sample n): dst[o, n*L..] = src[n, o, ..]. es = element size. */
static void gather_rows(int64_t b, int64_t e, void *ud, size_t es) {
  const copy_job *j = ud;
  const int64_t L = j->g->OH * j->g->OW, O = j->g->O;
  for (int64_t t = b; t < e; t++) {
    int64_t o = t / j->nb, n = t % j->nb;
    memcpy((char *)j->dst + (size_t)((o * j->nb + n) * L) * es,
           (const char *)j->src + (size_t)((n * O + o) * L) * es, (size_t)L * es);
  }
}
static void gather_f32(int64_t b, int64_t e, void *ud) { gather_rows(b, e, ud, 4); }
static void gather_f64(int64_t b, int64_t e, void *ud) { gather_rows(b, e, ud, 8); }

/* scatter: task t = (sample n, channel o): dst[n, o, ..] = src[o, n*L..] (+ bias[o]). */
#define DEF_SCATTER(NAME, T)                                                                   \
  static void NAME(int64_t b, int64_t e, void *ud) {                                           \
    const copy_job *j = ud;                                                                    \
    const int64_t L = j->g->OH * j->g->OW, O = j->g->O;                                        \
    for (int64_t t = b; t < e; t++) {                                                          \
      int64_t n = t / O, o = t % O;                                                            \
      const T *s = (const T *)j->src + (o * j->nb + n) * L;                                    \
      T *d = (T *)j->dst + (n * O + o) * L;                                                    \
      T bv = j->bias ? ((const T *)j->bias)[o] : 0;                                            \
      for (int64_t l = 0; l < L; l++) d[l] = s[l] + bv;                                        \
    }                                                                                          \
  }
DEF_SCATTER(scatter_f32, float)
DEF_SCATTER(scatter_f64, double)

/* y[n, o, :] += bias[o] in place: task t = (n, o). */
#define DEF_ADDBIAS(NAME, T)                                                                   \
  static void NAME(int64_t b, int64_t e, void *ud) {                                           \
    const copy_job *j = ud;                                                                    \
    const int64_t L = j->g->OH * j->g->OW, O = j->g->O;                                        \
    for (int64_t t = b; t < e; t++) {                                                          \
      T *d = (T *)j->dst + t * L;                                                              \
      T bv = ((const T *)j->bias)[t % O];                                                      \
      for (int64_t l = 0; l < L; l++) d[l] += bv;                                              \
    }                                                                                          \
  }
DEF_ADDBIAS(addbias_f32, float)
DEF_ADDBIAS(addbias_f64, double)

/* ------------------------------------------------------------ GEMM */

/* C(m,n) = op(A) @ op(B) + beta*C, row-major with leading dims; pointers in elements of dt;
** over every thread when `par`. Degenerate sizes are handled here, never passed to BLAS. */
static void gemm(lt_ctx *ctx, bool par, lt_dtype dt, bool ta, bool tb, int64_t m, int64_t n,
                 int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                 void *c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0) {
      size_t es = lt_dtype_size(dt);
      for (int64_t i = 0; i < m; i++) memset((char *)c + (size_t)(i * ldc) * es, 0, (size_t)n * es);
    }
    return;
  }
  ltC_blas_gemm(ctx, par ? ctx->num_threads : 1, dt, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta,
                NULL, c, ldc);
}

static inline char *ptr_at(const void *base, lt_dtype dt, int64_t i) {
  return (char *)base + (size_t)i * lt_dtype_size(dt);
}

/* Whether 1x1, stride 1, no padding: the image is its own columns matrix. */
static bool is_pointwise(const ltK_conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&
         g->OH == g->H && g->OW == g->W;
}

/* ------------------------------------------------------------ the batch driver
** The batch is split into P parts run in parallel (one per thread, each with its own scratch
** buffers and single-threaded GEMMs); a part walks its samples in chunks of nb. With one part
** (one thread, or fewer samples than threads) the copy kernels run in parallel and each GEMM
** is cut into blocks over every thread instead. */

enum conv_pass { CONV_FWD, CONV_BWD, CONVT_FWD, CONVT_BWD };

typedef struct conv_work {
  lt_ctx *ctx;
  enum conv_pass kind;
  lt_dtype dt;
  const ltK_conv_geom *g;
  const void *x, *w, *bias, *dy;   /* x: conv input (image side) or convt input (column side) */
  void *y, *dx, *dw;               /* outputs (dx, dw may be NULL) */
  int64_t nb, parts;
  int64_t cols_n, buf_n;           /* scratch elements per part */
  char *scratch;                   /* parts * (cols_n + buf_n) elements */
  char *dw_part;                   /* (parts - 1) * O*K weight-gradient partials */
} conv_work;

/* Runs a copy kernel: over threads when `par`, else in the calling thread. */
static void copy_run(const conv_work *cw, bool par, int64_t ntasks, int64_t work, ltK_range_fn fn,
                     copy_job *j) {
  if (!par) {
    if (ntasks > 0) fn(0, ntasks, j);
    return;
  }
  int64_t grain = work > 0 ? ltC_grain(work) : ntasks;
  ltB_parallel_for(cw->ctx, ntasks, grain, fn, j);
}

static void im2col(const conv_work *cw, bool par, const void *img, void *cols, int64_t nb) {
  const ltK_conv_geom *g = cw->g;
  copy_job j = {.g = g, .src = img, .dst = cols, .nb = nb};
  copy_run(cw, par, g->C * g->kh * g->kw * nb, g->OH * g->OW, im2col_for(cw->dt), &j);
}

static void col2im(const conv_work *cw, bool par, const void *cols, void *img, int64_t nb) {
  const ltK_conv_geom *g = cw->g;
  copy_job j = {.g = g, .src = cols, .dst = img, .nb = nb};
  copy_run(cw, par, nb * g->C, g->H * g->W * g->kh * g->kw, col2im_for(cw->dt), &j);
}

static void gather(const conv_work *cw, bool par, const void *src, void *dst, int64_t nb) {
  const ltK_conv_geom *g = cw->g;
  copy_job j = {.g = g, .src = src, .dst = dst, .nb = nb};
  copy_run(cw, par, nb * g->O, g->OH * g->OW, cw->dt == LT_FLOAT32 ? gather_f32 : gather_f64, &j);
}

static void scatter(const conv_work *cw, bool par, const void *src, void *dst, const void *bias,
                    int64_t nb) {
  const ltK_conv_geom *g = cw->g;
  copy_job j = {.g = g, .src = src, .dst = dst, .bias = bias, .nb = nb};
  copy_run(cw, par, nb * g->O, g->OH * g->OW, cw->dt == LT_FLOAT32 ? scatter_f32 : scatter_f64,
           &j);
}

/* Adds bias[c] to every (n, c) plane of `dst`, seen through geometry gb (its O and OH*OW). */
static void add_bias(const conv_work *cw, bool par, const ltK_conv_geom *gb, void *dst,
                     const void *bias, int64_t nb) {
  copy_job j = {.g = gb, .dst = dst, .bias = bias, .nb = nb};
  copy_run(cw, par, nb * gb->O, gb->OH * gb->OW,
           cw->dt == LT_FLOAT32 ? addbias_f32 : addbias_f64, &j);
}

/* One chunk of cnt samples from n0 within a part: its scratch, and ld = cnt*L, the width of its
** columns matrix (the chunk's samples side by side). */
typedef struct conv_chunk {
  int64_t n0, cnt, ld;
  char *cols, *buf;
  void *dw_acc;    /* the part's weight gradient, or NULL */
  double beta;     /* 0 on the part's first chunk (which overwrites dw_acc), else 1 */
  bool par;
} conv_chunk;

/* The per-group sizes of the GEMMs: Og rows of the weight per group, K = Cg*kh*kw. */
static int64_t group_out(const ltK_conv_geom *g) { return g->O / g->groups; }
static int64_t group_k(const ltK_conv_geom *g) { return g->C / g->groups * g->kh * g->kw; }

/* dst_g (Og, ld) = W_g @ m_g (K, ld), for every group */
static void gemm_w(const conv_work *cw, const conv_chunk *ch, const void *m, void *dst) {
  const lt_dtype dt = cw->dt;
  const int64_t Og = group_out(cw->g), K = group_k(cw->g), ld = ch->ld;
  for (int64_t gi = 0; gi < cw->g->groups; gi++)
    gemm(cw->ctx, ch->par, dt, false, false, Og, ld, K, ptr_at(cw->w, dt, gi * Og * K), K,
         ptr_at(m, dt, gi * K * ld), ld, 0.0, ptr_at(dst, dt, gi * Og * ld), ld);
}

/* dst_g (K, ld) = W_g^T @ m_g (Og, ld), for every group */
static void gemm_wt(const conv_work *cw, const conv_chunk *ch, const void *m, void *dst) {
  const lt_dtype dt = cw->dt;
  const int64_t Og = group_out(cw->g), K = group_k(cw->g), ld = ch->ld;
  for (int64_t gi = 0; gi < cw->g->groups; gi++)
    gemm(cw->ctx, ch->par, dt, true, false, K, ld, Og, ptr_at(cw->w, dt, gi * Og * K), K,
         ptr_at(m, dt, gi * Og * ld), ld, 0.0, ptr_at(dst, dt, gi * K * ld), ld);
}

/* dw_acc_g (Og, K) (+)= a_g (Og, ld) @ cols_g (K, ld)^T, for every group */
static void gemm_dw(const conv_work *cw, const conv_chunk *ch, const void *a, const void *cols) {
  const lt_dtype dt = cw->dt;
  const int64_t Og = group_out(cw->g), K = group_k(cw->g), ld = ch->ld;
  for (int64_t gi = 0; gi < cw->g->groups; gi++)
    gemm(cw->ctx, ch->par, dt, false, true, Og, K, ld, ptr_at(a, dt, gi * Og * ld), ld,
         ptr_at(cols, dt, gi * K * ld), ld, ch->beta, ptr_at(ch->dw_acc, dt, gi * Og * K), K);
}

/* The columns matrix of the chunk's images img: img itself when pointwise, else im2col's. */
static const void *columns(const conv_work *cw, const conv_chunk *ch, const void *img) {
  if (is_pointwise(cw->g)) return img;
  im2col(cw, ch->par, img, ch->cols, ch->cnt);
  return ch->cols;
}

/* The chunk's (cnt, O, L) column-side data src as one (O, cnt*L) matrix: src itself for one
** sample, else gathered into buf. */
static const void *gathered(const conv_work *cw, const conv_chunk *ch, const void *src) {
  if (ch->cnt == 1) return src;
  gather(cw, ch->par, src, ch->buf, ch->cnt);
  return ch->buf;
}

/* where the chunk's image-side and column-side samples start in a tensor's data */
static void *image_at(const conv_work *cw, const void *base, const conv_chunk *ch) {
  return ptr_at(base, cw->dt, ch->n0 * cw->g->C * cw->g->H * cw->g->W);
}
static void *column_at(const conv_work *cw, const void *base, const conv_chunk *ch) {
  return ptr_at(base, cw->dt, ch->n0 * cw->g->O * cw->g->OH * cw->g->OW);
}

/* conv forward: Y_g = W_g @ cols_g, then scatter + bias */
static void conv_fwd_chunk(const conv_work *cw, const conv_chunk *ch) {
  void *ys = column_at(cw, cw->y, ch);
  void *dst = ch->cnt > 1 ? (void *)ch->buf : ys;
  gemm_w(cw, ch, columns(cw, ch, image_at(cw, cw->x, ch)), dst);
  if (ch->cnt > 1)
    scatter(cw, ch->par, dst, ys, cw->bias, ch->cnt);
  else if (cw->bias)
    add_bias(cw, ch->par, cw->g, ys, cw->bias, 1);
}

/* conv backward: dW_g += G_g @ cols_g^T;  dx = col2im(W_g^T @ G_g)  (G = gather(dy)) */
static void conv_bwd_chunk(const conv_work *cw, const conv_chunk *ch) {
  const void *Gm = gathered(cw, ch, column_at(cw, cw->dy, ch));
  if (ch->dw_acc) gemm_dw(cw, ch, Gm, columns(cw, ch, image_at(cw, cw->x, ch)));
  if (cw->dx) {
    void *dxs = image_at(cw, cw->dx, ch);
    bool pw = is_pointwise(cw->g);
    void *cm = pw ? dxs : (void *)ch->cols;
    gemm_wt(cw, ch, Gm, cm);
    if (!pw) col2im(cw, ch->par, cm, dxs, ch->cnt);
  }
}

/* transposed forward: y = col2im(W_g^T @ gather(x)_g), then + bias */
static void convt_fwd_chunk(const conv_work *cw, const conv_chunk *ch) {
  const ltK_conv_geom *g = cw->g;
  void *ys = image_at(cw, cw->y, ch);
  bool pw = is_pointwise(g);
  void *cm = pw ? ys : (void *)ch->cols;
  gemm_wt(cw, ch, gathered(cw, ch, column_at(cw, cw->x, ch)), cm);
  if (!pw) col2im(cw, ch->par, cm, ys, ch->cnt);
  if (cw->bias) {
    ltK_conv_geom gb = *g;   /* the image side as (cnt, C, H*W) planes */
    gb.O = g->C;
    gb.OH = g->H;
    gb.OW = g->W;
    add_bias(cw, ch->par, &gb, ys, cw->bias, ch->cnt);
  }
}

/* transposed backward: dx = scatter(W_g @ im2col(dy)_g); dW_g += gather(x)_g @ cols^T */
static void convt_bwd_chunk(const conv_work *cw, const conv_chunk *ch) {
  const void *cm = columns(cw, ch, image_at(cw, cw->dy, ch));
  if (cw->dx) {
    void *dxs = column_at(cw, cw->dx, ch);
    void *dst = ch->cnt > 1 ? (void *)ch->buf : dxs;
    gemm_w(cw, ch, cm, dst);
    if (ch->cnt > 1) scatter(cw, ch->par, dst, dxs, NULL, ch->cnt);
  }
  if (ch->dw_acc) gemm_dw(cw, ch, gathered(cw, ch, column_at(cw, cw->x, ch)), cm);
}

/* One part: samples [n_begin, n_end) with scratch cols/buf; dw_acc receives this part's
** weight gradient (overwritten by its first chunk). */
static void conv_part(const conv_work *cw, int64_t n_begin, int64_t n_end, char *cols, char *buf,
                      void *dw_acc, bool par) {
  static void (*const pass[])(const conv_work *, const conv_chunk *) = {
      [CONV_FWD] = conv_fwd_chunk, [CONV_BWD] = conv_bwd_chunk,
      [CONVT_FWD] = convt_fwd_chunk, [CONVT_BWD] = convt_bwd_chunk,
  };
  const int64_t L = cw->g->OH * cw->g->OW;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += cw->nb) {
    int64_t cnt = n_end - n0 < cw->nb ? n_end - n0 : cw->nb;
    conv_chunk ch = {.n0 = n0, .cnt = cnt, .ld = cnt * L, .cols = cols, .buf = buf,
                     .dw_acc = dw_acc, .beta = n0 == n_begin ? 0.0 : 1.0, .par = par};
    pass[cw->kind](cw, &ch);
  }
}

/* Part p of P: an even share of the batch and its own scratch. */
static void conv_part_range(int64_t b, int64_t e, void *ud) {
  const conv_work *cw = ud;
  size_t es = lt_dtype_size(cw->dt);
  int64_t OK = cw->g->O * (cw->g->C / cw->g->groups) * cw->g->kh * cw->g->kw;
  for (int64_t p = b; p < e; p++) {
    int64_t n0 = cw->g->N * p / cw->parts, n1 = cw->g->N * (p + 1) / cw->parts;
    char *cols = cw->scratch + (size_t)(p * (cw->cols_n + cw->buf_n)) * es;
    char *buf = cols + (size_t)cw->cols_n * es;
    void *dw_acc = cw->dw;
    if (dw_acc && p > 0) dw_acc = cw->dw_part + (size_t)((p - 1) * OK) * es;
    conv_part(cw, n0, n1, cols, buf, dw_acc, false);
  }
}

/* Runs a forward or backward over the whole batch. */
static int conv_run(conv_work *cw, const char *op) {
  lt_ctx *ctx = cw->ctx;
  const ltK_conv_geom *g = cw->g;
  const int64_t L = g->OH * g->OW, rows = g->C * g->kh * g->kw;
  const int64_t OK = g->O * (g->C / g->groups) * g->kh * g->kw;
  const size_t es = lt_dtype_size(cw->dt);
  const bool pw = is_pointwise(g);
  int nt = ctx->num_threads < 1 ? 1 : ctx->num_threads;
  /* samples per chunk: the columns of a chunk stay under COLS_LIMIT (at least one sample) */
  int64_t nb = rows * L > 0 ? COLS_LIMIT / (rows * L) : g->N;
  if (nb < 1) nb = 1;
  if (nb > g->N) nb = g->N > 0 ? g->N : 1;
  if (pw) nb = 1;   /* the image itself is the (C, L) columns matrix of one sample */
  if (g->O * L >= SAMPLE_ALONE) nb = 1;
  /* parts: one per thread when every thread gets a sample and enough work */
  double flops = 2.0 * (double)g->N * (double)OK * (double)L;
  int64_t parts = 1;
  if (nt > 1 && g->N >= 2 && flops > 2e6) parts = g->N < nt ? g->N : nt;
  if (parts > 1 && nb > (g->N + parts - 1) / parts) nb = (g->N + parts - 1) / parts;
  cw->nb = nb;
  cw->parts = parts;
  cw->cols_n = pw ? 0 : rows * nb * L;
  cw->buf_n = nb > 1 ? g->O * nb * L : 0;
  bool need_dw = cw->dw != NULL && (cw->kind == CONV_BWD || cw->kind == CONVT_BWD);
  int64_t total = parts * (cw->cols_n + cw->buf_n) + (need_dw ? (parts - 1) * OK : 0);
  size_t got = 0;
  if (total > 0) {
    cw->scratch = ltB_cache_alloc((size_t)total * es, &got);
    if (!cw->scratch)
      return ltB_fail(ctx, "%s: out of memory for a %lld-element work buffer", op,
                      (long long)total);
    cw->dw_part = cw->scratch + (size_t)(parts * (cw->cols_n + cw->buf_n)) * es;
  }
  if (need_dw && g->N == 0) memset(cw->dw, 0, (size_t)OK * es);
  ltC_blas_single();
  if (parts == 1) {
    conv_part(cw, 0, g->N, cw->scratch, cw->scratch + (size_t)cw->cols_n * es,
              need_dw ? cw->dw : NULL, nt > 1);
  } else {
    ltB_parallel_for(ctx, parts, 1, conv_part_range, cw);
    if (need_dw) {   /* dw = sum of the parts' partials, in part order */
      for (int64_t p = 1; p < parts; p++) {
        const char *src = cw->dw_part + (size_t)((p - 1) * OK) * es;
        if (cw->dt == LT_FLOAT32) {
          float *d = cw->dw;
          const float *s = (const float *)src;
          for (int64_t i = 0; i < OK; i++) d[i] += s[i];
        } else {
          double *d = cw->dw;
          const double *s = (const double *)src;
          for (int64_t i = 0; i < OK; i++) d[i] += s[i];
        }
      }
    }
  }
  ltB_cache_free(cw->scratch, got);
  return 0;
}

/* Sum of dy (N, C, S) over n and s into db (C), accumulating in double; channels over the
** pool (each one's sum is in the same order whatever the thread count). */
typedef struct bias_job {
  lt_dtype dt;
  const void *dy;
  int64_t N, C, S;
  void *db;
} bias_job;

static void bias_grad_range(int64_t c0, int64_t c1, void *ud) {
  const bias_job *j = ud;
  const lt_dtype dt = j->dt;
  const void *dy = j->dy;
  void *db = j->db;
  const int64_t N = j->N, C = j->C, S = j->S;
  for (int64_t c = c0; c < c1; c++) {
    double acc = 0;
    for (int64_t n = 0; n < N; n++) {
      if (dt == LT_FLOAT32) {   /* eight lanes, so that the loop vectorises */
        const float *p = (const float *)dy + (n * C + c) * S;
        float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t s = 0;
        for (; s + 8 <= S; s += 8)
          for (int k = 0; k < 8; k++) lane[k] += p[s + k];
        for (; s < S; s++) lane[0] += p[s];
        for (int k = 0; k < 8; k++) acc += lane[k];
      } else {
        const double *p = (const double *)dy + (n * C + c) * S;
        for (int64_t s = 0; s < S; s++) acc += p[s];
      }
    }
    if (dt == LT_FLOAT32)
      ((float *)db)[c] = (float)acc;
    else
      ((double *)db)[c] = acc;
  }
}

static void bias_grad(lt_ctx *ctx, lt_dtype dt, const void *dy, int64_t N, int64_t C, int64_t S,
                      void *db) {
  bias_job j = {dt, dy, N, C, S, db};
  ltB_parallel_for(ctx, C, ltC_grain(N * S), bias_grad_range, &j);
}


int ltC_conv(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *y,
             const lt_tensor *x, const lt_tensor *w, const lt_tensor *b) {
  if (ltC_dw_fits(g, x->dtype))
    return ltC_dw_conv(ctx, name, g, ltB_ptr(y), ltB_ptr(x), ltB_ptr(w), b ? ltB_ptr(b) : NULL);
  if (ltC_winograd_fits(g, x->dtype)) {
    const float *bias = b ? ltB_ptr(b) : NULL;
    if (!g->transposed)
      return ltC_winograd_conv(ctx, name, g->N, g->C, g->H, g->W, g->O, g->ph, g->pw,
                               ltB_ptr(x), ltB_ptr(w), false, bias, ltB_ptr(y));
    /* a transposed convolution is the input gradient of the convolution with its weight */
    return ltC_winograd_conv(ctx, name, g->N, g->O, g->OH, g->OW, g->C, 2 - g->ph, 2 - g->pw,
                             ltB_ptr(x), ltB_ptr(w), true, bias, ltB_ptr(y));
  }
  conv_work cw = {
      .ctx = ctx,
      .kind = g->transposed ? CONVT_FWD : CONV_FWD,
      .dt = x->dtype,
      .g = g,
      .x = ltB_ptr(x),
      .w = ltB_ptr(w),
      .bias = b ? ltB_ptr(b) : NULL,
      .y = ltB_ptr(y),
  };
  return conv_run(&cw, name);
}

int ltC_conv_backward(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *dx,
                      lt_tensor *dw, lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                      const lt_tensor *dy) {
  lt_dtype dt = x->dtype;
  /* The gradients of a 3x3 stride-1 convolution are such convolutions too. Its input
  ** gradient convolves dy by the weights turned half a turn with their channels swapped,
  ** padded by 2 - p; its weight gradient sums the image side's tiles against the column
  ** side's. A transposed convolution swaps the sides: its input gradient is the plain
  ** convolution of dy. */
  if (ltC_dw_fits(g, dt)) {
    if (ltC_dw_backward(ctx, name, g, dx ? ltB_ptr(dx) : NULL, dw ? ltB_ptr(dw) : NULL,
                        ltB_ptr(x), ltB_ptr(w), ltB_ptr(dy)))
      return -1;
    dx = dw = NULL;
  }
  if (ltC_winograd_fits(g, dt)) {
    const float *img = ltB_ptr(g->transposed ? dy : x), *col = ltB_ptr(g->transposed ? x : dy);
    int rc = 0;
    if (dx && !g->transposed)
      rc = ltC_winograd_conv(ctx, name, g->N, g->O, g->OH, g->OW, g->C, 2 - g->ph, 2 - g->pw,
                             col, ltB_ptr(w), true, NULL, ltB_ptr(dx));
    else if (dx)
      rc = ltC_winograd_conv(ctx, name, g->N, g->C, g->H, g->W, g->O, g->ph, g->pw, img,
                             ltB_ptr(w), false, NULL, ltB_ptr(dx));
    if (!rc && dw)
      rc = ltC_winograd_dw(ctx, name, g->N, g->C, g->H, g->W, g->O, g->ph, g->pw, img, col,
                           ltB_ptr(dw));
    if (rc) return -1;
    dx = dw = NULL;
  }
  if (dx || dw) {
    conv_work cw = {
        .ctx = ctx,
        .kind = g->transposed ? CONVT_BWD : CONV_BWD,
        .dt = dt,
        .g = g,
        .x = ltB_ptr(x),
        .w = ltB_ptr(w),
        .dy = ltB_ptr(dy),
        .dx = dx ? ltB_ptr(dx) : NULL,
        .dw = dw ? ltB_ptr(dw) : NULL,
    };
    if (conv_run(&cw, name)) return -1;
  }
  if (db) {   /* the bias sits on the output side: the image side of a transposed conv */
    if (g->transposed)
      bias_grad(ctx, dt, ltB_ptr(dy), g->N, g->C, g->H * g->W, ltB_ptr(db));
    else
      bias_grad(ctx, dt, ltB_ptr(dy), g->N, g->O, g->OH * g->OW, ltB_ptr(db));
  }
  return 0;
}
