/*
** cpu/reduce.c -- cpu kernels of the reductions: the fold engine behind sum mean prod amax
** amin all any (table entry `reduce`), the rows of a product's gradient (`prod_backward`) and
** the NaN test of amax's gradient (`has_nan`).
**
** Plan of `reduce`. The input is split into two index spaces: the kept dims (one output
** element each) and the reduced dims "R" (the elements folded into one output). Size-1 dims
** are dropped; each space is sorted by stride and collapsed where contiguous. Then either
**  - inner mode (an R dim moves fastest in memory): every output folds its R elements with a
**    row kernel, unit-stride in the common case; or
**  - column mode (a kept dim moves fastest): a block of neighbouring outputs is accumulated
**    row by row, acc[j] += x[r][j], which vectorises across outputs (sum over the batch dim).
** Long reductions are cut into fixed-size chunks of R whose partial results are combined in
** chunk order, so results depend on the shape only, never on the number of threads; float
** sums accumulate in double inside a chunk.
*/
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"

typedef union acc {
  double d;
  int64_t i;
  uint64_t u;   /* integer sums and products wrap instead of overflowing */
} acc_t;

#define CHUNK LT_CPU_CHUNK   /* R elements per partial result in inner mode */
#define COLW 2048            /* outputs per block in column mode */

static int64_t absi(int64_t x) { return x < 0 ? -x : x; }

/* Whether v replaces m as the largest (smallest) so far: a NaN does and then stays, and +0 is
** above -0 (as in cpu/extreme.c, so that a row's result does not depend on its layout). */
#define ABOVE(v, m) ((v) > (m) || (v) != (v) || ((v) == 0 && (m) == 0 && signbit(m) && !signbit(v)))
#define BELOW(v, m) ((v) < (m) || (v) != (v) || ((v) == 0 && (m) == 0 && !signbit(m) && signbit(v)))

/* ================================================================ fold kernels */

static acc_t acc_init(enum lt_redop op, bool fl) {
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

static acc_t acc_combine(enum lt_redop op, bool fl, acc_t a, acc_t b) {
  switch (op) {
    case LT_RPROD: if (fl) a.d *= b.d; else a.u *= b.u; break;
    case LT_RAMAX:
      if (fl) {
        if (ABOVE(b.d, a.d)) a.d = b.d;
      } else if (b.i > a.i) {
        a.i = b.i;
      }
      break;
    case LT_RAMIN:
      if (fl) {
        if (BELOW(b.d, a.d)) a.d = b.d;
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

/* Sum of n strided elements, accumulated in double over SUM_LANES (contiguous) or 4 lanes so
** the compiler vectorises it and long sums stay accurate. 32 lanes are four independent chains
** of 512-bit adds (eight at 256 bits): with 8 each add waited on the last, and a float32 sum of
** 256K elements in cache ran at 30 GB/s where PyTorch's reached 78. */
#define SUM_LANES 32
#define SUM_INLINE static inline __attribute__((always_inline))
#define SUM_STRIDED(T)                                                     \
  for (; i + 4 <= n; i += 4)                                               \
    for (int k = 0; k < 4; k++) a[k] += x[(i + k) * s];
#define SUM_TREE                                                           \
  for (int k = 0; k < 16; k++) a[k] += a[k + 16];   /* a fixed tree, */    \
  for (int k = 0; k < 8; k++) a[k] += a[k + 8];      /* written out so */   \
  for (int k = 0; k < 4; k++) a[k] += a[k + 4];      /* that it stays in */ \
  double t = (a[0] + a[1]) + (a[2] + a[3]);          /* registers */        \
  for (; i < n; i++) t += x[i * s];                                        \
  return t;

/* Every element in the lanes' doubles: float64 sums, and float32 sums whose float partials
** overflowed (sum_f32). F is applied to each element of a contiguous row (the strided branch
** and the tail ignore it): AS_IS, or SQUARE for the sums of squares of norm(), each square
** rounded to T as a squared tensor holds it. That, and the squares in the float32 trees below,
** rely on products not being fused into the adds: this file is built with -std=c11, under which
** GCC contracts nothing (-ffp-contract=off), intrinsics included. */
#define AS_IS(v) (v)
#define SQUARE(v) ((v) * (v))
#define SUM_WIDE(T, F)                                                     \
  double a[SUM_LANES] = {0};                                               \
  int64_t i = 0;                                                           \
  if (s == 1) {                                                            \
    for (; i + SUM_LANES <= n; i += SUM_LANES)                             \
      for (int k = 0; k < SUM_LANES; k++) a[k] += F(x[i + k]);             \
    if (i < n) { /* the tail in the lanes too, through a block of zeros */  \
      T z[SUM_LANES] = {0};                                                \
      memcpy(z, x + i, (size_t)(n - i) * sizeof(T));                       \
      for (int k = 0; k < SUM_LANES; k++) a[k] += F(z[k]);                 \
      i = n;                                                               \
    }                                                                      \
  } else {                                                                 \
    SUM_STRIDED(T)                                                         \
  }                                                                        \
  SUM_TREE

static double sum_f64(const double *x, int64_t s, int64_t n) { SUM_WIDE(double, AS_IS) }

/* Contiguous float32 goes through float lanes first: each lane adds the SUM_BLOCK floats it gets
** from a block of SUM_BLOCK * SUM_LANES as a fixed tree in float32, then that partial joins the
** lane's double. Converting every float to double cost more than reading it (vcvtps2pd: a
** 1M-float sum took 79 us against PyTorch's 45, and 9 us against 2.3 in L2, Zen 4). A tree of 8
** rounds at most three times on any element's path (a sequential run, seven: 1M times 0.1
** summed a float32 ulp off), and it is exact on equal values. Every level adds the same lanes in
** the same order (no FMA), so the bits do not depend on the level. The last block is padded
** with zeros, which change no sum but the sign of a zero partial, and the doubles start at +0. */
#define SUM_BLOCK 8
#define TREE8(r) ((((r)[0] + (r)[1]) + ((r)[2] + (r)[3])) + (((r)[4] + (r)[5]) + ((r)[6] + (r)[7])))
SUM_INLINE double sum_body_f32(const float *x, int64_t s, int64_t n, bool sq) {
  double a[SUM_LANES] = {0};
  int64_t i = 0;
  if (s == 1) {
    for (; i < n; i += SUM_LANES * SUM_BLOCK) {
      const float *b = x + i;
      float z[SUM_LANES * SUM_BLOCK];
      if (n - i < SUM_LANES * SUM_BLOCK) {
        memset(z, 0, sizeof z);
        memcpy(z, b, (size_t)(n - i) * sizeof *z);
        b = z;
      }
      for (int k = 0; k < SUM_LANES; k++) {
        float r[SUM_BLOCK] = {b[k], b[32 + k], b[64 + k], b[96 + k],
                              b[128 + k], b[160 + k], b[192 + k], b[224 + k]};
        if (sq)
          for (int q = 0; q < SUM_BLOCK; q++) r[q] = r[q] * r[q];
        a[k] += TREE8(r);
      }
    }
    i = n;
  } else {
    SUM_STRIDED(float)
  }
  SUM_TREE
}

static double sum_f32_sse4(const float *x, int64_t s, int64_t n) {
  return sum_body_f32(x, s, n, false);
}
#ifdef LT_ISA_DISPATCH
/* The contiguous sum at AVX2 and AVX-512 in intrinsics, lane for lane sum_body_f32's: GCC
** spilled its tree to the stack and stored its tail's block a float at a time before reading it
** back whole (a stall), a fixed cost of about 40 ns a row that made sums over 4096 rows of 100
** floats take 3.7 times PyTorch's. A masked load gives the tail's zeros. */
LT_ISA_BEGIN_AVX2
/* (t0 + t1) + (t2 + t3) of the four doubles of v, the tree's last two steps */
SUM_INLINE double sum_last4(__m256d v) {
  __m128d u = _mm_hadd_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(u) + _mm_cvtsd_f64(_mm_unpackhi_pd(u, u));
}

/* lanes 8g .. 8g + 7 of the block at x: its rows' floats there, summed as TREE8; the last
** block (w < 256 floats left) through masked loads, which give zeros past the end */
SUM_INLINE __m256 block_avx2(const float *x, int g, int64_t w, bool sq) {
  __m256 r[SUM_BLOCK];
  if (w >= SUM_LANES * SUM_BLOCK) {
    for (int q = 0; q < SUM_BLOCK; q++) r[q] = _mm256_loadu_ps(x + 32 * q + 8 * g);
  } else {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int q = 0; q < SUM_BLOCK; q++) {
      int64_t v = w - 32 * q - 8 * g;
      __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(v > 8 ? 8 : v)), iota);
      r[q] = v > 0 ? _mm256_maskload_ps(x + 32 * q + 8 * g, m) : _mm256_setzero_ps();
    }
  }
  if (sq)
    for (int q = 0; q < SUM_BLOCK; q++) r[q] = _mm256_mul_ps(r[q], r[q]);
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(r[0], r[1]), _mm256_add_ps(r[2], r[3])),
                       _mm256_add_ps(_mm256_add_ps(r[4], r[5]), _mm256_add_ps(r[6], r[7])));
}

SUM_INLINE double sum_row_avx2(const float *x, int64_t n, bool sq) {
  __m256d a[8];   /* a[q] holds lanes 4q .. 4q + 3 */
  for (int q = 0; q < 8; q++) a[q] = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += SUM_LANES * SUM_BLOCK)
    for (int g = 0; g < 4; g++) {
      __m256 p = block_avx2(x + i, g, n - i, sq);
      a[2 * g] = _mm256_add_pd(a[2 * g], _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
      a[2 * g + 1] = _mm256_add_pd(a[2 * g + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
  for (int q = 0; q < 4; q++) a[q] = _mm256_add_pd(a[q], a[q + 4]);   /* k += k + 16 */
  a[0] = _mm256_add_pd(a[0], a[2]);                                      /* k += k + 8 */
  a[1] = _mm256_add_pd(a[1], a[3]);
  return sum_last4(_mm256_add_pd(a[0], a[1]));                           /* k += k + 4 */
}

static double sum_f32_avx2(const float *x, int64_t s, int64_t n) {
  return s == 1 ? sum_row_avx2(x, n, false) : sum_body_f32(x, s, n, false);
}

static void sum_rows_avx2(const float *const *x, int rows, int64_t n, double *out) {
  for (int r = 0; r < rows; r++) out[r] = sum_row_avx2(x[r], n, false);
}

static double sumsq_f32_avx2(const float *x, int64_t n) { return sum_row_avx2(x, n, true); }
LT_ISA_END
LT_ISA_BEGIN_AVX512
SUM_INLINE __m512d widen_hi(__m512 v) {
  return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* as block_avx2, lanes 16h .. 16h + 15 */
SUM_INLINE __m512 block_avx512(const float *x, int h, int64_t w, bool sq) {
  __m512 r[SUM_BLOCK];
  if (w >= SUM_LANES * SUM_BLOCK) {
    for (int q = 0; q < SUM_BLOCK; q++) r[q] = _mm512_loadu_ps(x + 32 * q + 16 * h);
  } else {
    for (int q = 0; q < SUM_BLOCK; q++) {
      int64_t v = w - 32 * q - 16 * h;
      __mmask16 m = (__mmask16)(v >= 16 ? 0xffff : v <= 0 ? 0 : (1u << v) - 1);
      r[q] = v > 0 ? _mm512_maskz_loadu_ps(m, x + 32 * q + 16 * h) : _mm512_setzero_ps();
    }
  }
  if (sq)
    for (int q = 0; q < SUM_BLOCK; q++) r[q] = _mm512_mul_ps(r[q], r[q]);
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(r[0], r[1]), _mm512_add_ps(r[2], r[3])),
                       _mm512_add_ps(_mm512_add_ps(r[4], r[5]), _mm512_add_ps(r[6], r[7])));
}

SUM_INLINE double sum_row_avx512(const float *x, int64_t n, bool sq) {
  __m512d a[4];   /* a[q] holds lanes 8q .. 8q + 7 */
  for (int q = 0; q < 4; q++) a[q] = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += SUM_LANES * SUM_BLOCK) {
    __m512 p0 = block_avx512(x + i, 0, n - i, sq), p1 = block_avx512(x + i, 1, n - i, sq);
    a[0] = _mm512_add_pd(a[0], _mm512_cvtps_pd(_mm512_castps512_ps256(p0)));
    a[1] = _mm512_add_pd(a[1], widen_hi(p0));
    a[2] = _mm512_add_pd(a[2], _mm512_cvtps_pd(_mm512_castps512_ps256(p1)));
    a[3] = _mm512_add_pd(a[3], widen_hi(p1));
  }
  a[0] = _mm512_add_pd(a[0], a[2]);   /* k += k + 16 */
  a[1] = _mm512_add_pd(a[1], a[3]);
  a[0] = _mm512_add_pd(a[0], a[1]);   /* k += k + 8 */
  __m256d h = _mm256_add_pd(_mm512_castpd512_pd256(a[0]), _mm512_extractf64x4_pd(a[0], 1));
  __m128d u = _mm_hadd_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd(h, 1));
  return _mm_cvtsd_f64(u) + _mm_cvtsd_f64(_mm_unpackhi_pd(u, u));
}

static double sum_f32_avx512(const float *x, int64_t s, int64_t n) {
  return s == 1 ? sum_row_avx512(x, n, false) : sum_body_f32(x, s, n, false);
}

/* The lanes' doubles of a row of at most 64 floats, a[0] += a[2], a[1] += a[3], a[0] += a[1]
** done: sum_row_avx512's, whose one block holds the row in its first two rows of eight and zeros
** in the rest (a zero added changes a float only in the sign of a zero, and the lanes' doubles
** start from +0, which takes that sign away). The masks are the caller's, the same for all rows. */
SUM_INLINE __m512d short_lanes(const float *x, const __mmask16 *m, bool two) {
  __m512 p0 = _mm512_maskz_loadu_ps(m[0], x), p1 = _mm512_maskz_loadu_ps(m[1], x + 16);
  if (two) {
    p0 = _mm512_add_ps(p0, _mm512_maskz_loadu_ps(m[2], x + 32));
    p1 = _mm512_add_ps(p1, _mm512_maskz_loadu_ps(m[3], x + 48));
  }
  const __m512d z = _mm512_setzero_pd();
  __m512d a0 = _mm512_add_pd(z, _mm512_cvtps_pd(_mm512_castps512_ps256(p0)));
  __m512d a1 = _mm512_add_pd(z, widen_hi(p0));
  __m512d a2 = _mm512_add_pd(z, _mm512_cvtps_pd(_mm512_castps512_ps256(p1)));
  __m512d a3 = _mm512_add_pd(z, widen_hi(p1));
  return _mm512_add_pd(_mm512_add_pd(a0, a2), _mm512_add_pd(a1, a3));
}

/* Rows of at most 64 floats, four at a time: their loads share the masks, and the last steps of
** the four trees (k += k + 4, then (a0 + a1) + (a2 + a3)) run side by side in two vectors, each
** lane the same two doubles added as in sum_row_avx512. Rows of 49 (a mean over 7 x 7 planes)
** took 13 ns each one by one, most of it those steps and the masks. */
static void short_rows_avx512(const float *const *x, int rows, int64_t n, double *out) {
  __mmask16 m[4];
  for (int q = 0; q < 4; q++) {
    int64_t v = n - 16 * q;
    m[q] = (__mmask16)(v >= 16 ? 0xffff : v <= 0 ? 0 : (1u << v) - 1);
  }
  bool two = n > 32;
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    __m512d w0 = short_lanes(x[r], m, two), w1 = short_lanes(x[r + 1], m, two);
    __m512d w2 = short_lanes(x[r + 2], m, two), w3 = short_lanes(x[r + 3], m, two);
    /* h = lanes 0-3 + lanes 4-7 of each row: rows 0, 1 in h01 and rows 2, 3 in h23 */
    __m512d h01 = _mm512_add_pd(_mm512_shuffle_f64x2(w0, w1, 0x44), _mm512_shuffle_f64x2(w0, w1, 0xee));
    __m512d h23 = _mm512_add_pd(_mm512_shuffle_f64x2(w2, w3, 0x44), _mm512_shuffle_f64x2(w2, w3, 0xee));
    /* u = (h0 + h1, h2 + h3) of each row: lanes (r0, r2, r0, r2, r1, r3, r1, r3) */
    __m512d u = _mm512_add_pd(_mm512_unpacklo_pd(h01, h23), _mm512_unpackhi_pd(h01, h23));
    /* t = u0 + u1 of each row, in lanes 0 (row 0), 1 (row 2), 4 (row 1) and 5 (row 3) */
    __m512d t = _mm512_add_pd(u, _mm512_permutex_pd(u, 0x4e));
    double v[8];
    _mm512_storeu_pd(v, t);
    out[r] = v[0];
    out[r + 1] = v[4];
    out[r + 2] = v[1];
    out[r + 3] = v[5];
  }
  for (; r < rows; r++) out[r] = sum_row_avx512(x[r], n, false);
}

static void sum_rows_avx512(const float *const *x, int rows, int64_t n, double *out) {
  if (n <= 2 * SUM_LANES) {
    short_rows_avx512(x, rows, n, out);
    return;
  }
  for (int r = 0; r < rows; r++) out[r] = sum_row_avx512(x[r], n, false);
}

static double sumsq_f32_avx512(const float *x, int64_t n) { return sum_row_avx512(x, n, true); }
LT_ISA_END
#endif
/* A float32 partial of 8 can overflow where the sum in double is finite (8 x 3e38): a sum that
** comes out infinite or NaN is taken again with every element in the lanes' doubles, at the
** baseline, so at every level alike (inputs with an infinity or a NaN pay twice). */
static double sum_f32_wide(const float *x, int64_t s, int64_t n) { SUM_WIDE(float, AS_IS) }

static double sum_f32(const float *x, int64_t s, int64_t n) {
  double t;
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: t = sum_f32_avx512(x, s, n); break;
    case LT_ISA_AVX2: t = sum_f32_avx2(x, s, n); break;
    default: t = sum_f32_sse4(x, s, n); break;
  }
#else
  t = sum_f32_sse4(x, s, n);
#endif
  return isfinite(t) ? t : sum_f32_wide(x, s, n);
}

/* The sums of squares of n contiguous elements, for norm(): the bits of sum_f32 and sum_f64 over
** the squared elements (as a squared tensor holds them), without writing the squares. */
static double sumsq_f32_wide(const float *x, int64_t n) {
  const int64_t s = 1;
  SUM_WIDE(float, SQUARE)
}

static double sumsq_f32(const float *x, int64_t n) {
  double t;
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: t = sumsq_f32_avx512(x, n); break;
    case LT_ISA_AVX2: t = sumsq_f32_avx2(x, n); break;
    default: t = sum_body_f32(x, 1, n, true); break;
  }
#else
  t = sum_body_f32(x, 1, n, true);
#endif
  return isfinite(t) ? t : sumsq_f32_wide(x, n);
}

static double sumsq_f64(const double *x, int64_t n) {
  const int64_t s = 1;
  SUM_WIDE(double, SQUARE)
}

/* sum_f32 of each of `rows` contiguous rows of n, the level chosen once for all of them: rows
** of a few hundred floats (a mean over the last dim) spent a third of their time around the
** sum, in the walk, the fold's switches and the choice of level. */
static void sum_rows_f32(const float *const *x, int rows, int64_t n, double *out) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: sum_rows_avx512(x, rows, n, out); break;
    case LT_ISA_AVX2: sum_rows_avx2(x, rows, n, out); break;
    default:
      for (int r = 0; r < rows; r++) out[r] = sum_f32_sse4(x[r], 1, n);
      break;
  }
#else
  for (int r = 0; r < rows; r++) out[r] = sum_f32_sse4(x[r], 1, n);
#endif
  for (int r = 0; r < rows; r++)
    if (!isfinite(out[r])) out[r] = sum_f32_wide(x[r], 1, n);
}

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
          if (ABOVE(v, m)) m = v;                                                    \
        }                                                                            \
        acc->d = m;                                                                  \
        return;                                                                      \
      }                                                                              \
      case LT_RAMIN: {                                                               \
        T m = (T)acc->d;                                                             \
        for (int64_t i = 0; i < n; i++) {                                            \
          T v = x[i * s];                                                            \
          if (BELOW(v, m)) m = v;                                                    \
        }                                                                            \
        acc->d = m;                                                                  \
        return;                                                                      \
      }                                                                              \
      FOLD_ALL_ANY                                                                   \
      case LT_NREDOP: break;                                                         \
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
      case LT_NREDOP: break;                                                         \
    }                                                                                \
    return;                                                                          \
  }

static void fold_row(enum lt_redop op, lt_dtype dt, acc_t *acc, const char *p, int64_t s,
                     int64_t n) {
  if ((dt == LT_FLOAT32 || dt == LT_FLOAT64) && s == 1 && (op == LT_RAMAX || op == LT_RAMIN)) {
    bool nan, is_max = op == LT_RAMAX;
    double m = dt == LT_FLOAT32 ? ltC_extreme_f32((const float *)p, n, is_max, &nan)
                                : ltC_extreme_f64((const double *)p, n, is_max, &nan);
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

/* ad[j] = x[j s] where ABOVE (CMP >) or BELOW (CMP <) says so, in bitwise ors and copysign,
** which GCC vectorises (signbit and ||, not). */
#define COL_EXTREME(CMP)                                                             \
  for (int64_t j = 0; j < n; j++) {                                                  \
    double v = x[j * s], a = ad[j];                                                  \
    ad[j] = (v CMP a) | (v != v) | ((v == a) & (copysign(1, v) CMP copysign(1, a)))  \
                ? v : a;                                                             \
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
      case LT_RAMAX: COL_EXTREME(>) return;                                         \
      case LT_RAMIN: COL_EXTREME(<) return;                                         \
      case LT_RALL:                                                                  \
        for (int64_t j = 0; j < n; j++) ai[j] &= x[j * s] != 0;                      \
        return;                                                                      \
      case LT_RANY:                                                                  \
        for (int64_t j = 0; j < n; j++) ai[j] |= x[j * s] != 0;                      \
        return;                                                                      \
      case LT_NREDOP: break;                                                         \
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
      case LT_NREDOP: break;                                                         \
    }                                                                                \
    return;                                                                          \
  }

/* The float32 column sums (ltO_sum_to: a bias's gradient) add COL_ROWS rows per pass in
** float32, as the row sums' tree, and that partial to the double accumulators: as in the row
** sums, converting each float to double cost more than reading it (a sum over the middle dim of
** 64 x 128 x 512 took 1.24 ms against PyTorch's 0.75). A last pass of fewer rows pads with zero
** rows, as the row sums' last block; a column's bits depend only on where the passes start,
** which the chunks fix. */
#define COL_ROWS 8
#define DEF_COL_SUM_ROWS(NAME)                                                               \
  static void NAME(double *restrict ad, const float *const *x, int nrows, int64_t n) {       \
    static const float zeros[COLW];                                                          \
    const float *r[COL_ROWS];                                                                \
    for (int k = 0; k < COL_ROWS; k++) r[k] = k < nrows ? x[k] : zeros;                      \
    const float *x0 = r[0], *x1 = r[1], *x2 = r[2], *x3 = r[3];                              \
    const float *x4 = r[4], *x5 = r[5], *x6 = r[6], *x7 = r[7];                              \
    for (int64_t j = 0; j < n; j++)                                                          \
      ad[j] += ((x0[j] + x1[j]) + (x2[j] + x3[j])) + ((x4[j] + x5[j]) + (x6[j] + x7[j]));   \
  }
DEF_COL_SUM_ROWS(col_sum_rows_sse4)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_COL_SUM_ROWS(col_sum_rows_avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_COL_SUM_ROWS(col_sum_rows_avx512)
LT_ISA_END
#endif

/* The same passes over nrows rows a constant stride rs apart, for blocks no wider than
** NARROW_MAX: 16, 8, 4 or 1 columns at a time keep their accumulators in registers across all
** the rows, where a call per pass would load and store them for eight short rows (a sum over
** the middle dim of 256 x 256 x 16 spent a third of its time doing so). Passes start at row 0
** and the last pads with zero rows, so the bits are those of the calls per pass. */
#define NARROW_MAX 256
#define NARROW_TREE(p, j)                                                                    \
  (((p)[0][j] + (p)[1][j]) + ((p)[2][j] + (p)[3][j])) +                                      \
      (((p)[4][j] + (p)[5][j]) + ((p)[6][j] + (p)[7][j]))
#define NARROW_COLS(WD)                                                                      \
  {                                                                                          \
    double a[WD];                                                                            \
    for (int j = 0; j < WD; j++) a[j] = ad[j0 + j];                                          \
    for (int64_t r = 0; r < nrows; r += COL_ROWS) {                                          \
      const float *q[COL_ROWS];                                                              \
      for (int k = 0; k < COL_ROWS; k++) q[k] = r + k < nrows ? x + (r + k) * rs + j0 : zeros; \
      for (int j = 0; j < WD; j++) a[j] += NARROW_TREE(q, j);                                \
    }                                                                                        \
    for (int j = 0; j < WD; j++) ad[j0 + j] = a[j];                                          \
    j0 += WD;                                                                                \
  }
#define DEF_COL_SUM_NARROW(NAME)                                                             \
  static void NAME(double *restrict ad, const float *x, int64_t rs, int64_t nrows, int64_t w) { \
    static const float zeros[16];                                                            \
    int64_t j0 = 0;                                                                          \
    while (j0 + 16 <= w) NARROW_COLS(16)                                                     \
    if (j0 + 8 <= w) NARROW_COLS(8)                                                          \
    if (j0 + 4 <= w) NARROW_COLS(4)                                                          \
    while (j0 < w) NARROW_COLS(1)                                                            \
  }
DEF_COL_SUM_NARROW(col_sum_narrow_sse4)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_COL_SUM_NARROW(col_sum_narrow_avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_COL_SUM_NARROW(col_sum_narrow_avx512)
LT_ISA_END
#endif

typedef void (*col_sum_narrow_fn)(double *restrict ad, const float *x, int64_t rs, int64_t nrows,
                                  int64_t w);
static col_sum_narrow_fn col_sum_narrow_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return col_sum_narrow_avx512;
    case LT_ISA_AVX2: return col_sum_narrow_avx2;
    default: break;
  }
#endif
  return col_sum_narrow_sse4;
}

typedef void (*col_sum_fn)(double *restrict ad, const float *const *x, int nrows, int64_t n);
static col_sum_fn col_sum_rows_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return col_sum_rows_avx512;
    case LT_ISA_AVX2: return col_sum_rows_avx2;
    default: break;
  }
#endif
  return col_sum_rows_sse4;
}

static void fold_col(enum lt_redop op, lt_dtype dt, double *restrict ad, int64_t *restrict ai,
                     const char *p, int64_t s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32:
      COL_FLOAT(float)
    case LT_FLOAT64: COL_FLOAT(double)
    case LT_INT64: COL_INT(int64_t)
    default: COL_INT(uint8_t)
  }
}

/* ================================================================ reduction plan */

typedef struct plan {
  enum lt_redop op;
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

static void plan_build(plan *p, enum lt_redop op, const lt_tensor *a, const bool *mask,
                       lt_tensor *out) {
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
  p->nout = ltB_shape_numel(p->nk, p->ks);
  p->N = ltB_shape_numel(p->nr, p->rs);
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
    p->W = ltC_min(p->L, COLW);
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
    int64_t n = ltC_min(inner - i, r1 - r);
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

/* Inner mode for sums and means of whole contiguous float32 rows: blocks of rows at a time
** through sum_rows_f32, each output the bits fold_span gives it (0 + the row's sum). */
#define ROWS_BLOCK 64
static void run_row_sums(const plan *p, int64_t u0, int64_t u1) {
  kcount kc;
  kc_init(&kc, p, p->nk, u0);
  const float *rows[ROWS_BLOCK];
  char *dst[ROWS_BLOCK];
  double sums[ROWS_BLOCK];
  for (int64_t u = u0; u < u1;) {
    int m = (int)ltC_min(ROWS_BLOCK, u1 - u);
    for (int r = 0; r < m; r++, kc_next(&kc, p, p->nk)) {
      rows[r] = (const float *)(p->in + kc.ioff * p->ies);
      dst[r] = p->out + kc.ooff * p->oes;
    }
    sum_rows_f32(rows, m, p->N, sums);
    for (int r = 0; r < m; r++) {
      acc_t a = {.d = 0.0 + sums[r]};
      plan_finalize(p, a, dst[r]);
    }
    u += m;
  }
}

/* Inner mode: unit u is chunk (u % nchunk) of output (u / nchunk). */
static void run_inner(int64_t u0, int64_t u1, void *ud) {
  const plan *p = ud;
  if (p->nchunk == 1 && p->nr == 1 && p->ris[0] == 1 && p->dt == LT_FLOAT32 &&
      (p->op == LT_RSUM || p->op == LT_RMEAN)) {
    run_row_sums(p, u0, u1);
    return;
  }
  int64_t c = u0 % p->nchunk;
  kcount kc;
  kc_init(&kc, p, p->nk, u0 / p->nchunk);
  for (int64_t u = u0; u < u1; u++) {
    acc_t acc = acc_init(p->op, p->fl);
    int64_t r0 = c * p->cr;
    fold_span(p, &acc, p->in + kc.ioff * p->ies, r0, ltC_min(p->N, r0 + p->cr));
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

/* Column mode's walk over the R positions of a chunk: r_start gives the offset (elements) of
** position r0 and sets the R dims' indices, r_next moves both on by one position. */
static int64_t r_start(const plan *p, int64_t r0, int64_t *ridx) {
  int64_t off = 0;
  for (int d = p->nr - 1; d >= 0; d--) {
    ridx[d] = r0 % p->rs[d];
    r0 /= p->rs[d];
    off += ridx[d] * p->ris[d];
  }
  return off;
}

static inline void r_next(const plan *p, int64_t *ridx, int64_t *off) {
  for (int d = p->nr - 1; d >= 0; d--) {
    *off += p->ris[d];
    if (++ridx[d] < p->rs[d]) return;
    *off -= p->rs[d] * p->ris[d];
    ridx[d] = 0;
  }
}

/* Column j of a block alone over rows [r0, r1), element by element in double: a float32 column
** whose 8-row partials overflowed. Only that column, so that the others keep their bits whatever
** columns share their block (its width follows the thread count: split_columns). */
static void refold_column(const plan *p, acc_t a0, double *ad, int64_t *ai, const char *base,
                          int64_t cis, int64_t j, int64_t r0, int64_t r1) {
  int64_t ridx[LT_MAX_DIMS], off = r_start(p, r0, ridx);
  ad[j] = a0.d;
  ai[j] = a0.i;
  for (int64_t r = r0; r < r1; r++, r_next(p, ridx, &off))
    fold_col(p->op, p->dt, ad + j, ai + j, base + (off + j * cis) * p->ies, cis, 1);
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
  bool unit_sum = p->dt == LT_FLOAT32 && cis == 1 && (p->op == LT_RSUM || p->op == LT_RMEAN);
  col_sum_fn sums = unit_sum ? col_sum_rows_for_isa() : NULL;
  col_sum_narrow_fn narrow = unit_sum && p->nr == 1 && p->W <= NARROW_MAX ? col_sum_narrow_for_isa() : NULL;
  /* float32 maxima and minima of contiguous rows fold as extreme.c's keys, decoded per block */
  bool is_max = p->op == LT_RAMAX;
  bool keyed = p->dt == LT_FLOAT32 && cis == 1 && (is_max || p->op == LT_RAMIN);
  ltC_extreme_cols_fn keys = keyed ? ltC_extreme_cols_for_isa() : NULL;
  int32_t kd[COLW];
  for (int64_t u = u0; u < u1; u++) {
    int64_t c = u % p->nchunk, t = u / p->nchunk, b = t % p->nb, q = t / p->nb;
    kcount kc;
    kc_init(&kc, p, nk1, q);
    int64_t j0 = b * p->W, w = ltC_min(p->W, p->L - j0);
    for (int64_t j = 0; j < w; j++) {
      ad[j] = a0.d;
      ai[j] = a0.i;
      kd[j] = ltC_extreme_key_start(is_max);
    }
    int64_t r0 = c * p->cr, r1 = ltC_min(p->N, r0 + p->cr);
    const char *base = p->in + (kc.ioff + j0 * cis) * p->ies;
    int64_t off = r_start(p, r0, ridx);
    const float *rows[COL_ROWS];
    int nrows = 0;
    if (sums && narrow)
      narrow(ad, (const float *)(base + off * p->ies), p->ris[0], r1 - r0, w);
    else
      for (int64_t r = r0; r < r1; r++) {
        if (sums)
          rows[nrows++] = (const float *)(base + off * p->ies);
        else if (keys)
          keys(kd, (const float *)(base + off * p->ies), w, is_max);
        else
          fold_col(p->op, p->dt, ad, ai, base + off * p->ies, cis, w);
        if (nrows == COL_ROWS || (nrows && r + 1 == r1)) {
          sums(ad, rows, nrows, w);
          nrows = 0;
        }
        r_next(p, ridx, &off);
      }
    if (keys)
      for (int64_t j = 0; j < w; j++) ad[j] = ltC_extreme_key_value(kd[j]);
    if (sums)   /* an 8-row float32 partial overflowed (as sum_f32): that column row by row */
      for (int64_t j = 0; j < w; j++)
        if (!isfinite(ad[j])) refold_column(p, a0, ad, ai, base, cis, j, r0, r1);
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

/* Column mode with fewer units than threads (a sum down the rows of one wide matrix is one
** unit): narrower blocks of columns, so that every thread gets some (a float32 sum over the
** first dim of 1024 x 1024 took 0.149 ms at one thread and at two alike). A column's bits do
** not depend on the block it sits in: the row chunks that fix them were set from the full
** width, and a column whose float32 partials overflow is summed again alone (refold_column),
** so the result is the same at every thread count. */
static void split_columns(plan *p, int nt) {
  int64_t outer = p->nout / p->L * p->nchunk;   /* units per block of columns */
  if (nt < 2 || outer * p->nb >= nt || p->N * p->L < LT_PAR_MIN) return;
  int64_t nb = (nt + outer - 1) / outer;
  int64_t w = ((p->L + nb - 1) / nb + 15) / 16 * 16;
  if (w >= p->W) return;
  p->W = w;
  p->nb = (p->L + w - 1) / w;
}

/* ================================================================ table entries */

int ltC_reduce(lt_ctx *ctx, const char *name, enum lt_redop op, lt_tensor *out,
               const lt_tensor *a, const bool *mask) {
  plan p;
  plan_build(&p, op, a, mask, out);
  if (p.nout == 0) return 0;
  if (p.nchunk > 1) {
    p.part = malloc((size_t)(p.nout * p.nchunk) * sizeof *p.part);
    if (!p.part) return ltB_fail(ctx, "%s: out of memory", name);
  }
  int64_t span = ltC_min(p.N, p.cr);
  if (p.col) {
    split_columns(&p, ctx->num_threads);
    int64_t units = p.nout / p.L * p.nb * p.nchunk;
    ltB_parallel_for(ctx, units, ltC_grain(span * p.W), run_col, &p);
  } else {
    ltB_parallel_for(ctx, p.nout * p.nchunk, ltC_grain(span), run_inner, &p);
  }
  if (p.part) {
    ltB_parallel_for(ctx, p.nout, ltC_grain(p.nchunk * 4), run_combine, &p);
    free(p.part);
  }
  return 0;
}

/* The sum of squares of a whole contiguous float tensor (norm()): the chunks, partials and
** order of combining of ltC_reduce's sum, so the bits of summing a squared copy. */
typedef struct sumsq_job {
  const char *x;
  lt_dtype dt;
  int64_t n;
  double *part;
} sumsq_job;

static void sumsq_range(int64_t c0, int64_t c1, void *ud) {
  const sumsq_job *j = ud;
  for (int64_t c = c0; c < c1; c++) {
    int64_t i0 = c * CHUNK, m = ltC_min(CHUNK, j->n - i0);
    j->part[c] = 0.0 + (j->dt == LT_FLOAT32 ? sumsq_f32((const float *)j->x + i0, m)
                                             : sumsq_f64((const double *)j->x + i0, m));
  }
}

int ltC_sumsq(lt_ctx *ctx, lt_tensor *out, const lt_tensor *a) {
  int64_t n = lt_numel(a), nchunk = n > CHUNK ? (n + CHUNK - 1) / CHUNK : 1;
  double one, *part = nchunk > 1 ? malloc((size_t)nchunk * sizeof *part) : &one;
  if (!part) return ltB_fail(ctx, "norm: out of memory");
  sumsq_job j = {lt_data(a), a->dtype, n, part};
  ltB_parallel_for(ctx, nchunk, ltC_grain(ltC_min(n, CHUNK)), sumsq_range, &j);
  double t = part[0];
  for (int64_t c = 1; c < nchunk; c++) t += part[c];
  if (part != &one) free(part);
  if (out->dtype == LT_FLOAT32)
    *(float *)lt_data(out) = (float)t;
  else
    *(double *)lt_data(out) = t;
  return 0;
}

/* Gradient of a product over each row of x (rows of n), given one incoming gradient per row:
** g * prod(others), with zeros handled exactly (one zero: only it gets a gradient). */
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

void ltC_prod_backward(lt_tensor *GI, const lt_tensor *X, const lt_tensor *G, int64_t M,
                       int64_t N) {
  if (N <= 0) return;
  if (X->dtype == LT_FLOAT32)
    PROD_GRAD(float)
  else
    PROD_GRAD(double)
}

bool ltC_has_nan(const lt_tensor *t) {
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
