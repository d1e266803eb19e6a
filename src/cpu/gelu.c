/*
** cpu/gelu.c -- float32 GELU (erf form), and its derivative for a recorded forward, at the
** AVX2+FMA level (the AVX-512 level runs the same code).
**
** Why a table: vmath.h's vm_gelu_float is one rational fit times an exponential over the whole
** line, about 30 multiplies and a division per vector, where PyTorch's shorter form is 550 ulp
** off. Here |x| < 4, nearly every activation, takes Phi(-|x|) from one of four degree-9
** polynomials, one per interval [k, k + 1), each coefficient picked for its lane by one
** in-lane vpermilps from a table that holds the four intervals in both 128-bit halves: ten
** permutes and nine multiply-adds a vector. Eight half-width intervals need
** the lane-crossing vpermps, which on AMD's Zen 3 issues at half the rate and shares a pipe
** with the multiply-adds: the eight-interval version of this kernel ran 1.7 times longer.
** The polynomials are anchored at the right end of each interval but the first (u = |x| - b,
** b = 2, 3, 4), where the derivatives alternate in sign, so that the leading terms of the sum
** have one sign and the float32 evaluation does not cancel (centred, it lost 10 ulp on [3, 4));
** the first interval keeps u = |x|.
** Then x Phi(x) is x p for x < 0 and x - x p above, with p = Phi(-|x|), so that the tail keeps
** its relative accuracy. The derivative Phi(x) + x phi(x) takes phi(|x|) from four more
** polynomials. The fits (tools/fit_gelu_tables.py, relative minimax-like with mpmath's erfc as
** reference) are 1e-8 relative; evaluated in float32, Phi(-|x|) is within 2.4 ulp and phi
** within 2.3 (the script's own measure), which keeps gelu inside vmath.h's bounds (8 ulp, 4
** for x > -0.5) as spec/isa_spec.lua asserts.
**
** Lanes with |x| >= 4, NaN or infinite take vm_gelu_float: the choice depends on the value
** only, never on the neighbours a lane shares a vector with, so results do not depend on the
** thread count or on where a row is cut. A tail shorter than a vector goes through masked
** loads and stores of the same vector code.
*/
#include <immintrin.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "vmath.h"

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2

#define GELU_XMAX 4.0f   /* the tables cover |x| < 4 */
#define GELU_INLINE static inline __attribute__((always_inline))

/* [coefficient j][lane] of Phi(-a) and of phi(a) in u = a - b_k for a in [k, k + 1), anchors
** b_k = 0, 2, 3, 4; the four intervals twice, one copy per 128-bit half */
static const float cdf_tab[10][8] __attribute__((aligned(32))) = {
    {5.000000000e-01f, 2.275013179e-02f, 1.349898055e-03f, 3.167124305e-05f,
     5.000000000e-01f, 2.275013179e-02f, 1.349898055e-03f, 3.167124305e-05f},
    {-3.989422619e-01f, -5.399096385e-02f, -4.431849346e-03f, -1.338301372e-04f,
     -3.989422619e-01f, -5.399096385e-02f, -4.431849346e-03f, -1.338301372e-04f},
    {-5.337752782e-07f, 5.399108306e-02f, 6.647741888e-03f, 2.676644654e-04f,
     -5.337752782e-07f, 5.399108306e-02f, 6.647741888e-03f, 2.676644654e-04f},
    {6.649674475e-02f, -2.699380741e-02f, -5.909603555e-03f, -3.345094447e-04f,
     6.649674475e-02f, -2.699380741e-02f, -5.909603555e-03f, -3.345094447e-04f},
    {-3.886565173e-05f, 4.511306994e-03f, 3.320303746e-03f, 2.904990688e-04f,
     -3.886565173e-05f, 4.511306994e-03f, 3.320303746e-03f, 2.904990688e-04f},
    {-9.836769663e-03f, 2.298446139e-03f, -1.123156631e-03f, -1.793886040e-04f,
     -9.836769663e-03f, 2.298446139e-03f, -1.123156631e-03f, -1.793886040e-04f},
    {-2.927710011e-04f, -1.232004841e-03f, 7.255021046e-05f, 8.890822937e-05f,
     -2.927710011e-04f, -1.232004841e-03f, 7.255021046e-05f, 8.890822937e-05f},
    {1.571050263e-03f, 2.889345924e-04f, 2.652332660e-05f, -1.529480141e-05f,
     1.571050263e-03f, 2.889345924e-04f, 2.652332660e-05f, -1.529480141e-05f},
    {-2.930093906e-04f, 2.583634341e-04f, -9.421196592e-05f, 1.347797570e-05f,
     -2.930093906e-04f, 2.583634341e-04f, -9.421196592e-05f, 1.347797570e-05f},
    {-8.331455319e-06f, 2.101617065e-05f, -1.576386785e-05f, 5.345906629e-06f,
     -8.331455319e-06f, 2.101617065e-05f, -1.576386785e-05f, 5.345906629e-06f},
};
static const float pdf_tab[10][8] __attribute__((aligned(32))) = {
    {3.989422917e-01f, 5.399096757e-02f, 4.431848414e-03f, 1.338302245e-04f,
     3.989422917e-01f, 5.399096757e-02f, 4.431848414e-03f, 1.338302245e-04f},
    {1.364214186e-09f, -1.079819277e-01f, -1.329554524e-02f, -5.353209563e-04f,
     1.364214186e-09f, -1.079819277e-01f, -1.329554524e-02f, -5.353209563e-04f},
    {-1.994711310e-01f, 8.098652959e-02f, 1.772737689e-02f, 1.003724290e-03f,
     -1.994711310e-01f, 8.098652959e-02f, 1.772737689e-02f, 1.003724290e-03f},
    {-7.601551602e-07f, -1.799567603e-02f, -1.329583488e-02f, -1.159893000e-03f,
     -7.601551602e-07f, -1.799567603e-02f, -1.329583488e-02f, -1.159893000e-03f},
    {4.987676069e-02f, -1.123766601e-02f, 5.537344608e-03f, 9.087527869e-04f,
     4.987676069e-02f, -1.123766601e-02f, 5.537344608e-03f, 9.087527869e-04f},
    {-5.088852777e-05f, 8.146292530e-03f, -6.766974111e-04f, -4.956135526e-04f,
     -5.088852777e-05f, 8.146292530e-03f, -6.766974111e-04f, -4.956135526e-04f},
    {-8.145476691e-03f, -6.921900786e-04f, -6.258723442e-04f, 1.785606000e-04f,
     -8.145476691e-03f, -6.921900786e-04f, -6.258723442e-04f, 1.785606000e-04f},
    {-3.311093897e-04f, -6.901245797e-04f, 2.844941337e-04f, -2.917152415e-05f,
     -3.311093897e-04f, -6.901245797e-04f, 2.844941337e-04f, -2.917152415e-05f},
    {1.447573071e-03f, 5.816787598e-04f, -1.277890551e-04f, -1.618526426e-06f,
     1.447573071e-03f, 5.816787598e-04f, -1.277890551e-04f, -1.618526426e-06f},
    {-2.965280437e-04f, 1.800369355e-04f, -6.447410124e-05f, 1.139996675e-05f,
     -2.965280437e-04f, 1.800369355e-04f, -6.447410124e-05f, 1.139996675e-05f},
};

/* the polynomial of table t at u, interval idx per lane (vpermilps reads its low two bits): its
** even and odd halves by Horner's rule in u^2, then even + u odd. One product (u^2) instead of
** Estrin's three: the multiply-adds and the permutes share two pipes on Zen 3, and they bound
** the loop. */
GELU_INLINE __m256 table_poly(const float (*t)[8], __m256i idx, __m256 u, __m256 u2) {
#define GELU_C(j) _mm256_permutevar_ps(_mm256_load_ps(t[j]), idx)
  __m256 pe = GELU_C(8), po = GELU_C(9);
  for (int j = 6; j >= 0; j -= 2) {
    pe = _mm256_fmadd_ps(pe, u2, GELU_C(j));
    po = _mm256_fmadd_ps(po, u2, GELU_C(j + 1));
  }
#undef GELU_C
  return _mm256_fmadd_ps(po, u, pe);
}

/* y = gelu(x) and, when want_d, d = gelu'(x), for the lanes of x with |x| < 4; *inr gets the
** mask of those lanes (NaN is not one). */
GELU_INLINE __m256 gelu_vec(__m256 x, bool want_d, __m256 *d, int *inr) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 a = _mm256_and_ps(x, absmask);
  *inr = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(GELU_XMAX), _CMP_LT_OQ));
  /* interval k = floor(a), anchor k + min(k, 1); u = a - b_k is exact (a and b_k are within a
  ** factor of two, or b_k = 0) */
  __m256i idx = _mm256_cvttps_epi32(a);
  __m256 k = _mm256_cvtepi32_ps(idx);
  __m256 u = _mm256_sub_ps(a, _mm256_add_ps(k, _mm256_min_ps(k, _mm256_set1_ps(1.0f))));
  __m256 u2 = _mm256_mul_ps(u, u);
  __m256 p = table_poly(cdf_tab, idx, u, u2);             /* Phi(-|x|) */
  __m256 q = _mm256_sub_ps(_mm256_set1_ps(1.0f), p);      /* Phi(|x|) */
  /* the sign bit picks: x < 0 (and -0) takes x p, the rest x - x p */
  __m256 y = _mm256_blendv_ps(_mm256_fnmadd_ps(x, p, x), _mm256_mul_ps(x, p), x);
  if (want_d) {
    __m256 cdf = _mm256_blendv_ps(q, p, x);
    *d = _mm256_fmadd_ps(x, table_poly(pdf_tab, idx, u, u2), cdf);
  }
  return y;
}

/* one vector of up to 8 elements at x (w of them: masked when w < 8) into y and d */
GELU_INLINE void gelu_block(float *y, float *d, const float *x, int w) {
  __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 v = w == 8 ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, m);
  __m256 dv = _mm256_setzero_ps();
  int inr;
  __m256 yv = gelu_vec(v, d != NULL, &dv, &inr);
  if (w == 8) {
    _mm256_storeu_ps(y, yv);
    if (d) _mm256_storeu_ps(d, dv);
  } else {
    _mm256_maskstore_ps(y, m, yv);
    if (d) _mm256_maskstore_ps(d, m, dv);
  }
  if (((inr | ~((1 << w) - 1)) & 0xff) != 0xff)   /* a lane outside the tables */
    for (int k = 0; k < w; k++) {
      if (inr >> k & 1) continue;
      if (d)
        y[k] = vm_gelu_pair_float(x[k], &d[k]);
      else
        y[k] = vm_gelu_float(x[k]);
    }
}

void ltC_gelu_avx2(char *y, int64_t sy, char *d, int64_t sd, const char *x, int64_t sx,
                   int64_t n) {
  const int64_t es = (int64_t)sizeof(float);
  if (sy == es && sx == es && (!d || sd == es)) {
    float *yf = (float *)y, *df = (float *)d;
    const float *xf = (const float *)x;
    int64_t i = 0;
    if (df)   /* two loops: GCC does not take the test of d out of one */
      for (; i + 8 <= n; i += 8) gelu_block(yf + i, df + i, xf + i, 8);
    else
      for (; i + 8 <= n; i += 8) gelu_block(yf + i, NULL, xf + i, 8);
    if (i < n) gelu_block(yf + i, df ? df + i : NULL, xf + i, (int)(n - i));
    return;
  }
  /* strided: through blocks on the stack, so that every element takes the same path */
  float bx[8], by[8], bd[8];
  for (int64_t i0 = 0; i0 < n; i0 += 8) {
    int w = (int)ltC_min(8, n - i0);
    for (int k = 0; k < w; k++) bx[k] = *(const float *)(x + (i0 + k) * sx);
    gelu_block(by, d ? bd : NULL, bx, w);
    for (int k = 0; k < w; k++) {
      *(float *)(y + (i0 + k) * sy) = by[k];
      if (d) *(float *)(d + (i0 + k) * sd) = bd[k];
    }
  }
}

LT_ISA_END
#endif
