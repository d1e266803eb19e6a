/*
** cpu/tile_mm.c -- the float32 products of fused attention's tiles (at most 64 rows by 64
** columns, inner dimension the head size), in AVX2+FMA registers.
**
** Why not OpenBLAS: on tiles this small its packing of both operands and its pass that zeroes
** C for beta = 0 cost as much as a third of the multiply (measured on 64 x 64 tiles at
** E = 32 and 64, AMD EPYC, one thread: OpenBLAS 35-44 GFLOP/s, this kernel 44-58). Here A is
** read in place (either layout: its elements are broadcast one at a time) and B must have unit
** stride along its columns, so the two operands that attention reads transposed (K in Q K^T,
** V in dO V^T) are transposed once per key block into a scratch panel (tile_transpose).
** Causal tiles skip what the triangle makes zero (ltC_band), which BLAS cannot.
**
** The kernel: C rows in strips of MR = 6, columns in panels of 16 (two vectors), 12
** accumulators, one broadcast of A and two loads of B per step of k. Column tails use masked
** loads and stores. Sums run in k order per element, so the bits do not depend on the thread
** count or on where a tile starts. Built for AVX2+FMA and, with panels of 32 columns, for
** AVX-512 (the same sums, so the same bits); below AVX2, attention keeps calling BLAS.
*/
#include <immintrin.h>
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"

#define MR 6
#define NP 16   /* columns per panel */
#define TM_INLINE static inline __attribute__((always_inline))

bool ltC_tile_mm_ok(void) {
#ifdef LT_ISA_DISPATCH
  return ltB_cpu_isa() >= LT_ISA_AVX2;
#else
  return false;
#endif
}

#ifdef LT_ISA_DISPATCH

typedef struct tm_args {
  const float *a;
  int64_t ars, acs;
  const float *b;
  int64_t ldb;
  float *c;
  int64_t ldc;
  float alpha;
  bool acc;
} tm_args;

/* strip(s, mr, n, k0, k1): rows 0..mr-1 of C at s, columns [0, n), sums over k in [k0, k1) */
typedef void (*strip_fn)(const tm_args *s, int mr, int64_t n, int64_t k0, int64_t k1);

/* The product in strips of MR rows, each strip's columns or k cut to what the band keeps. */
TM_INLINE void strips(strip_fn strip, int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t ars, int64_t acs, const float *b, int64_t ldb,
                      bool acc, float *c, int64_t ldc, ltC_band band) {
  for (int64_t i = 0; i < m; i += MR) {
    int mr = (int)ltC_min(MR, m - i);
    int64_t ns = n, k0 = 0, k1 = k, last = i + mr - 1;
    switch (band.kind) {
      case LTC_BAND_N_UPTO: ns = ltC_max(0, ltC_min(n, band.lim + last)); break;
      case LTC_BAND_K_UPTO: k1 = ltC_max(0, ltC_min(k, band.lim + last)); break;
      case LTC_BAND_K_FROM: k0 = ltC_max(0, ltC_min(k, i - band.lim + 1)); break;
      default: break;
    }
    tm_args s = {.a = a + i * ars, .ars = ars, .acs = acs, .b = b, .ldb = ldb,
                 .c = c + i * ldc, .ldc = ldc, .alpha = alpha, .acc = acc};
    strip(&s, mr, ns, k0, k1);
    if (ns < n && !acc)
      for (int r = 0; r < mr; r++) memset(s.c + r * ldc + ns, 0, (size_t)(n - ns) * sizeof(float));
  }
}

LT_ISA_BEGIN_AVX2

/* lanes [0, n) of a vector set, n in [0, 8] (n <= 0: none) */
TM_INLINE __m256i lanes_below(int64_t n) {
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)), idx);
}

/* Rows 0..mr-1 of the strip at s, columns j..j+15 (or the w < 16 of them when masked), sums
** over k in [k0, k1). mr is a constant after inlining, so the accumulators stay in registers. */
TM_INLINE void panel(const tm_args *s, int mr, int64_t j, int64_t k0, int64_t k1, bool masked,
                     int64_t w) {
  __m256 c0[MR], c1[MR];
  __m256i m0 = lanes_below(w), m1 = lanes_below(w - 8);
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    c0[r] = _mm256_setzero_ps();
    c1[r] = _mm256_setzero_ps();
  }
  const float *bp = s->b + j, *ap = s->a;
  for (int64_t p = k0; p < k1; p++) {
    const float *br = bp + p * s->ldb, *ar = ap + p * s->acs;
    __m256 b0 = masked ? _mm256_maskload_ps(br, m0) : _mm256_loadu_ps(br);
    __m256 b1 = masked ? _mm256_maskload_ps(br + 8, m1) : _mm256_loadu_ps(br + 8);
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      if (r < mr) {
        __m256 av = _mm256_broadcast_ss(ar + r * s->ars);
        c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
        c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
      }
    }
  }
  __m256 al = _mm256_set1_ps(s->alpha);
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    if (r < mr) {
      float *cr = s->c + r * s->ldc + j;
      __m256 x0 = _mm256_mul_ps(c0[r], al), x1 = _mm256_mul_ps(c1[r], al);
      if (masked) {
        if (s->acc) {
          x0 = _mm256_add_ps(x0, _mm256_maskload_ps(cr, m0));
          x1 = _mm256_add_ps(x1, _mm256_maskload_ps(cr + 8, m1));
        }
        _mm256_maskstore_ps(cr, m0, x0);
        _mm256_maskstore_ps(cr + 8, m1, x1);
      } else {
        if (s->acc) {
          x0 = _mm256_add_ps(x0, _mm256_loadu_ps(cr));
          x1 = _mm256_add_ps(x1, _mm256_loadu_ps(cr + 8));
        }
        _mm256_storeu_ps(cr, x0);
        _mm256_storeu_ps(cr + 8, x1);
      }
    }
  }
}

TM_INLINE void strip_mr(const tm_args *s, int mr, int64_t n, int64_t k0, int64_t k1) {
  int64_t j = 0;
  for (; j + NP <= n; j += NP) panel(s, mr, j, k0, k1, false, NP);
  if (j < n) panel(s, mr, j, k0, k1, true, n - j);
}

static void strip(const tm_args *s, int mr, int64_t n, int64_t k0, int64_t k1) {
  switch (mr) {
    case 6: strip_mr(s, 6, n, k0, k1); break;
    case 5: strip_mr(s, 5, n, k0, k1); break;
    case 4: strip_mr(s, 4, n, k0, k1); break;
    case 3: strip_mr(s, 3, n, k0, k1); break;
    case 2: strip_mr(s, 2, n, k0, k1); break;
    default: strip_mr(s, 1, n, k0, k1); break;
  }
}

static void tile_mm_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                         int64_t ars, int64_t acs, const float *b, int64_t ldb, bool acc,
                         float *c, int64_t ldc, ltC_band band) {
  strips(strip, m, n, k, alpha, a, ars, acs, b, ldb, acc, c, ldc, band);
}

/* dst[c * dld + r] = src[r * ld + c], 8 x 8 blocks through registers */
static void tile_transpose_avx2(const float *src, int64_t rows, int64_t cols, int64_t ld,
                                float *dst, int64_t dld) {
  int64_t r0 = 0;
  for (; r0 + 8 <= rows; r0 += 8) {
    int64_t c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      __m256 v[8], t[8];
      for (int q = 0; q < 8; q++) v[q] = _mm256_loadu_ps(src + (r0 + q) * ld + c0);
      for (int q = 0; q < 8; q += 2) {
        t[q] = _mm256_unpacklo_ps(v[q], v[q + 1]);
        t[q + 1] = _mm256_unpackhi_ps(v[q], v[q + 1]);
      }
      for (int q = 0; q < 8; q += 4) {
        v[q] = _mm256_shuffle_ps(t[q], t[q + 2], 0x44);
        v[q + 1] = _mm256_shuffle_ps(t[q], t[q + 2], 0xee);
        v[q + 2] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0x44);
        v[q + 3] = _mm256_shuffle_ps(t[q + 1], t[q + 3], 0xee);
      }
      /* v[q] (q < 4) holds columns q and q + 4 of rows 0-3, v[q + 4] those of rows 4-7 */
      for (int q = 0; q < 4; q++) {
        t[q] = _mm256_permute2f128_ps(v[q], v[q + 4], 0x20);
        t[q + 4] = _mm256_permute2f128_ps(v[q], v[q + 4], 0x31);
      }
      for (int q = 0; q < 8; q++) _mm256_storeu_ps(dst + (c0 + q) * dld + r0, t[q]);
    }
    for (; c0 < cols; c0++)
      for (int q = 0; q < 8; q++) dst[c0 * dld + r0 + q] = src[(r0 + q) * ld + c0];
  }
  for (; r0 < rows; r0++)
    for (int64_t c = 0; c < cols; c++) dst[c * dld + r0] = src[r0 * ld + c];
}

LT_ISA_END

/* ------------------------------------------------------------ AVX-512: panels of 32 columns
** The same strips with two 16-lane vectors of B a step: each element's chain of multiply-adds
** is the one the AVX2 code computes, so both levels give the same bits. */
LT_ISA_BEGIN_AVX512

#define NP5 32

TM_INLINE void panel5(const tm_args *s, int mr, int64_t j, int64_t k0, int64_t k1, bool masked,
                      int64_t w) {
  __m512 c0[MR], c1[MR];
  __mmask16 m0 = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1);
  __mmask16 m1 = (__mmask16)(w >= 32 ? 0xffff : w <= 16 ? 0 : (1u << (w - 16)) - 1);
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    c0[r] = _mm512_setzero_ps();
    c1[r] = _mm512_setzero_ps();
  }
  const float *bp = s->b + j, *ap = s->a;
  for (int64_t p = k0; p < k1; p++) {
    const float *br = bp + p * s->ldb, *ar = ap + p * s->acs;
    __m512 b0 = masked ? _mm512_maskz_loadu_ps(m0, br) : _mm512_loadu_ps(br);
    __m512 b1 = masked ? _mm512_maskz_loadu_ps(m1, br + 16) : _mm512_loadu_ps(br + 16);
    _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
      if (r < mr) {
        __m512 av = _mm512_set1_ps(ar[r * s->ars]);
        c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
        c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
      }
    }
  }
  __m512 al = _mm512_set1_ps(s->alpha);
  _Pragma("GCC unroll 6") for (int r = 0; r < MR; r++) {
    if (r < mr) {
      float *cr = s->c + r * s->ldc + j;
      __m512 x0 = _mm512_mul_ps(c0[r], al), x1 = _mm512_mul_ps(c1[r], al);
      if (s->acc) {
        x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, cr));
        x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, cr + 16));
      }
      _mm512_mask_storeu_ps(cr, m0, x0);
      _mm512_mask_storeu_ps(cr + 16, m1, x1);
    }
  }
}

TM_INLINE void strip5_mr(const tm_args *s, int mr, int64_t n, int64_t k0, int64_t k1) {
  int64_t j = 0;
  for (; j + NP5 <= n; j += NP5) panel5(s, mr, j, k0, k1, false, NP5);
  if (j < n) panel5(s, mr, j, k0, k1, true, n - j);
}

static void strip5(const tm_args *s, int mr, int64_t n, int64_t k0, int64_t k1) {
  switch (mr) {
    case 6: strip5_mr(s, 6, n, k0, k1); break;
    case 5: strip5_mr(s, 5, n, k0, k1); break;
    case 4: strip5_mr(s, 4, n, k0, k1); break;
    case 3: strip5_mr(s, 3, n, k0, k1); break;
    case 2: strip5_mr(s, 2, n, k0, k1); break;
    default: strip5_mr(s, 1, n, k0, k1); break;
  }
}

static void tile_mm_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                           int64_t ars, int64_t acs, const float *b, int64_t ldb, bool acc,
                           float *c, int64_t ldc, ltC_band band) {
  strips(strip5, m, n, k, alpha, a, ars, acs, b, ldb, acc, c, ldc, band);
}

LT_ISA_END
#endif

void ltC_tile_mm(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t ars,
                 int64_t acs, const float *b, int64_t ldb, bool acc, float *c, int64_t ldc,
                 ltC_band band) {
#ifdef LT_ISA_DISPATCH
  if (ltB_cpu_isa() >= LT_ISA_AVX512)
    tile_mm_avx512(m, n, k, alpha, a, ars, acs, b, ldb, acc, c, ldc, band);
  else
    tile_mm_avx2(m, n, k, alpha, a, ars, acs, b, ldb, acc, c, ldc, band);
#else   /* never chosen (ltC_tile_mm_ok is false), but it keeps the contract: the whole product */
  (void)band;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float s = 0;
      for (int64_t p = 0; p < k; p++) s += a[i * ars + p * acs] * b[p * ldb + j];
      c[i * ldc + j] = alpha * s + (acc ? c[i * ldc + j] : 0.0f);
    }
#endif
}

void ltC_tile_transpose(const float *src, int64_t rows, int64_t cols, int64_t ld, float *dst) {
#ifdef LT_ISA_DISPATCH
  tile_transpose_avx2(src, rows, cols, ld, dst, rows);
#else
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) dst[c * rows + r] = src[r * ld + c];
#endif
}

bool ltC_transpose_f32(const float *src, int64_t rows, int64_t cols, int64_t ld, float *dst,
                       int64_t dld) {
#ifdef LT_ISA_DISPATCH
  if (!ltC_tile_mm_ok()) return false;
  tile_transpose_avx2(src, rows, cols, ld, dst, dld);
  return true;
#else
  (void)src, (void)rows, (void)cols, (void)ld, (void)dst, (void)dld;
  return false;
#endif
}
