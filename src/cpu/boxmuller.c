/*
** cpu/boxmuller.c -- standard normals from pairs of uniform draws (Box-Muller), for the random
** fills (random.c).
**
** z0 = r cos(2 pi b), z1 = r sin(2 pi b), r = sqrt(-2 log a), for the draws a = 1 - u1 in
** (0, 1] and b = u2 in [0, 1) of each pair, in double. libm's log, sin and cos one pair at a
** time made randn of 1M floats take 17 ms on one thread (PyTorch: 3.2); here they are
** polynomials, in plain C at the baseline and in AVX2 and AVX-512 intrinsics that do the same
** operations in the same order (no fused multiply-adds), so every level and thread count gives
** the same bits: 3.5 ms. The results are within a few ulp of libm's Box-Muller (which rounds
** 2 pi u2 first; spec/tensor_creation_spec.lua compares them), so float32 values are libm's
** rounded but where a double lies within those few ulp of a float rounding boundary.
*/
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"
#ifdef LT_ISA_DISPATCH
#include <immintrin.h>
#endif

#define BM_INLINE static inline __attribute__((always_inline))

/* The series' coefficients, for Horner's rule from the first: the scalar code and the vector
** template (boxmuller_vec.h) take the same ones. log: 2/(2k + 1), k = 11 .. 1 (R below); sin:
** (-1)^k / (2k + 1)!, k = 9 .. 1; cos: (-1)^(k + 1) / (2k)!, k = 9 .. 2. */
static const double bm_log_c[11] = {2.0 / 23, 2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13,
                                    2.0 / 11, 2.0 / 9,  2.0 / 7,  2.0 / 5,  2.0 / 3};
static const double bm_sin_c[9] = {-1.0 / 121645100408832000.0, 1.0 / 355687428096000.0,
                                   -1.0 / 1307674368000.0,       1.0 / 6227020800.0,
                                   -1.0 / 39916800.0,            1.0 / 362880.0,
                                   -1.0 / 5040.0,                1.0 / 120.0,
                                   -1.0 / 6.0};
static const double bm_cos_c[8] = {1.0 / 6402373705728000.0, -1.0 / 20922789888000.0,
                                   1.0 / 87178291200.0,      -1.0 / 479001600.0,
                                   1.0 / 3628800.0,          -1.0 / 40320.0,
                                   1.0 / 720.0,              -1.0 / 24.0};

/* log(a) for a in (0, 1] (a normal double): a = m 2^e with m in [sqrt(1/2), sqrt(2)), and
** log(m) = log(1 + f) = 2 atanh(s) = f - s (f - R), s = f / (2 + f), R = 2 (s^2/3 + s^4/5 +
** ...), |s| < 0.172: eleven terms of the series leave less than 2^-60 of f. Written as the
** vector levels compute it (the exponent through the bits of 2^52 + it: AVX2 has no packed
** int64 conversion). */
BM_INLINE double bm_log(double a) {
  uint64_t b;
  memcpy(&b, &a, sizeof b);
  uint64_t eb = (b >> 52) | 0x4330000000000000ULL;
  uint64_t mb = (b & 0x000fffffffffffffULL) | 0x3fe0000000000000ULL;
  double ef, m;   /* a = m 2^(ef) with m in [1/2, 1) */
  memcpy(&ef, &eb, sizeof ef);
  memcpy(&m, &mb, sizeof m);
  ef = ef - (0x1p52 + 1022.0);
  double low = m < 0.70710678118654752440 ? 1.0 : 0.0;   /* then m in [sqrt(1/2), sqrt(2)) */
  m = m + m * low;
  ef = ef - low;
  double f = m - 1.0, s = f / (2.0 + f), s2 = s * s;
  double R = bm_log_c[0];
  for (int q = 1; q < 11; q++) R = R * s2 + bm_log_c[q];
  R = R * s2;
  /* ln 2 in two parts, the first with 32 trailing zero bits: ef times it is exact */
  return ef * 6.93147180369123816490e-01 + ((f - s * (f - R)) + ef * 1.90821492927058770002e-10);
}

/* sin and cos of 2 pi b for b in [0, 1): b = k/4 + t exactly, |t| <= 1/8, and the quadrant k
** swaps and negates the sine and cosine of 2 pi t (|2 pi t| <= pi/4, Taylor series to the
** 19th and 18th powers: under 2^-60 there). Selections and signs in doubles, as the vector
** levels make them. */
BM_INLINE void bm_sincos2pi(double b, double *sn, double *cs) {
  double k = (4.0 * b + 0x1p52) - 0x1p52;   /* 4b to the nearest integer, 0 .. 4 */
  double x = (b - 0.25 * k) * 6.28318530717958647693, x2 = x * x;
  double S = bm_sin_c[0];
  for (int q = 1; q < 9; q++) S = S * x2 + bm_sin_c[q];
  double sx = x + x * (x2 * S);
  double Cp = bm_cos_c[0];
  for (int q = 1; q < 8; q++) Cp = Cp * x2 + bm_cos_c[q];
  double cx = 1.0 - (0.5 * x2 + x2 * x2 * Cp);
  /* bits 0 and 1 of k (4 counts as 0): k = 0: (sin, cos) = (sx, cx); 1: (cx, -sx);
  ** 2: (-sx, -cx); 3: (-cx, sx) */
  double h = trunc(0.5 * k), odd = k - 2.0 * h, two = h - 2.0 * trunc(0.5 * h);
  double s0 = odd > 0.5 ? cx : sx, c0 = odd > 0.5 ? sx : cx;
  *sn = s0 * (1.0 - 2.0 * two);
  *cs = c0 * (1.0 - 2.0 * fabs(odd - two));
}

/* z[2i], z[2i + 1] from the draws u[2i], u[2i + 1], for i < pairs */
static void normal_block_sse4(double *z, int64_t pairs) {
  for (int64_t i = 0; i < pairs; i++) {
    double r = sqrt(-2.0 * bm_log(z[2 * i])), sn, cs;
    bm_sincos2pi(z[2 * i + 1], &sn, &cs);
    z[2 * i] = r * cs;
    z[2 * i + 1] = r * sn;
  }
}

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
#define BM_FN normal_block_avx2
#define W 4
#define VD __m256d
#define VI __m256i
#define VM __m256d
#define VCASTI _mm256_castpd_si256
#define VCASTD _mm256_castsi256_pd
#define VOR _mm256_or_si256
#define VAND _mm256_and_si256
#define VSRL _mm256_srli_epi64
#define VSET1I _mm256_set1_epi64x
#define VSET1 _mm256_set1_pd
#define VADD _mm256_add_pd
#define VSUB _mm256_sub_pd
#define VMUL _mm256_mul_pd
#define VDIV _mm256_div_pd
#define VSQRT _mm256_sqrt_pd
#define VTRUNC(v) _mm256_round_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#define VABS(v) _mm256_andnot_pd(_mm256_set1_pd(-0.0), v)
#define VLT(a, b) _mm256_cmp_pd(a, b, _CMP_LT_OQ)
#define VGT(a, b) _mm256_cmp_pd(a, b, _CMP_GT_OQ)
#define VBLEND(a, b, m) _mm256_blendv_pd(a, b, m)
/* (a0 b0 a1 b1), (a2 b2 a3 b3) <-> a, b */
#define DEINTERLEAVE(p, a, b)                                                         \
  do {                                                                                \
    __m256d lo_ = _mm256_loadu_pd(p), hi_ = _mm256_loadu_pd((p) + 4);                 \
    a = _mm256_permute4x64_pd(_mm256_unpacklo_pd(lo_, hi_), 0xd8);                    \
    b = _mm256_permute4x64_pd(_mm256_unpackhi_pd(lo_, hi_), 0xd8);                    \
  } while (0)
#define INTERLEAVE(p, a, b)                                                           \
  do {                                                                                \
    __m256d a_ = _mm256_permute4x64_pd(a, 0xd8), b_ = _mm256_permute4x64_pd(b, 0xd8); \
    _mm256_storeu_pd(p, _mm256_unpacklo_pd(a_, b_));                                  \
    _mm256_storeu_pd((p) + 4, _mm256_unpackhi_pd(a_, b_));                            \
  } while (0)
#include "boxmuller_vec.h"
LT_ISA_END
LT_ISA_BEGIN_AVX512
#define BM_FN normal_block_avx512
#define W 8
#define VD __m512d
#define VI __m512i
#define VM __mmask8
#define VCASTI _mm512_castpd_si512
#define VCASTD _mm512_castsi512_pd
#define VOR _mm512_or_si512
#define VAND _mm512_and_si512
#define VSRL _mm512_srli_epi64
#define VSET1I _mm512_set1_epi64
#define VSET1 _mm512_set1_pd
#define VADD _mm512_add_pd
#define VSUB _mm512_sub_pd
#define VMUL _mm512_mul_pd
#define VDIV _mm512_div_pd
#define VSQRT _mm512_sqrt_pd
#define VTRUNC(v) _mm512_roundscale_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
#define VABS(v) _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(v), \
                                                     _mm512_set1_epi64(INT64_MAX)))
#define VLT(a, b) _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ)
#define VGT(a, b) _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ)
#define VBLEND(a, b, m) _mm512_mask_blend_pd(m, a, b)
#define DEINTERLEAVE(p, a, b)                                                           \
  do {                                                                                  \
    __m512d lo_ = _mm512_loadu_pd(p), hi_ = _mm512_loadu_pd((p) + 8);                   \
    a = _mm512_permutex2var_pd(lo_, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), hi_); \
    b = _mm512_permutex2var_pd(lo_, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), hi_); \
  } while (0)
#define INTERLEAVE(p, a, b)                                                                \
  do {                                                                                     \
    __m512d a_ = (a), b_ = (b);                                                            \
    _mm512_storeu_pd(p, _mm512_permutex2var_pd(a_, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), b_)); \
    _mm512_storeu_pd((p) + 8,                                                             \
                     _mm512_permutex2var_pd(a_, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), b_)); \
  } while (0)
#include "boxmuller_vec.h"
LT_ISA_END
#endif

void ltC_normal_block(double *z, int64_t pairs) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: normal_block_avx512(z, pairs); return;
    case LT_ISA_AVX2: normal_block_avx2(z, pairs); return;
    default: break;
  }
#endif
  normal_block_sse4(z, pairs);
}
