/*
** cpu/gelu.c -- float32 GELU (erf form), and its derivative for a recorded forward, at the
** AVX2+FMA level (gelu_avx512.c has the AVX-512 level's).
**
** Why a table: vmath.h's vm_gelu_float is one rational fit times an exponential over the whole
** line, about 30 multiplies and a division per vector, where PyTorch's shorter form is 550 ulp
** off. Here |x| < 4, nearly every activation, takes G(|x|) = |x| Phi(-|x|) from one of four
** degree-9 polynomials, one per interval [k, k + 1), each coefficient picked for its lane by
** one in-lane vpermilps (vpshufb on Zen 1 and 2, see pick) from a table that holds the four
** intervals in both 128-bit halves; then gelu(x) is max(x, 0) - G(|x|): x - G above 0 and -G
** below, one rounding, no product.
** On AMD's Zen 3 the permutes and the multiply-adds issue to the same two pipes, two a cycle,
** and bound the loop: ten permutes, nine multiply-adds and two products a vector. Eight
** half-width intervals need the lane-crossing vpermps, which issues at one a cycle: that
** version of this kernel ran 1.7 times longer. Tabulating Phi(-|x|) and multiplying by x cost
** two more operations of that kind (the product and a blend), 11% of the loop.
** The polynomials are anchored at the right end of each interval but the first (u = |x| - b,
** b = 2, 3, 4), where the derivatives alternate in sign, so that the leading terms of the sum
** have one sign and the float32 evaluation does not cancel (centred, it lost 10 ulp on [3, 4));
** the first interval keeps u = |x| and a zero constant term, so that G keeps its relative
** accuracy down to the subnormals. The derivative, G'(|x|) below 0 and 1 - G'(x) above, takes
** G' from four more polynomials. The fits (tools/fit_gelu_tables.py, relative minimax-like
** with mpmath as reference) are 1e-8 relative; evaluated in float32, G is within 1.9 ulp and
** G' within half the gradient tolerance (the script's own measures), which keeps gelu inside
** vmath.h's bounds (8 ulp, 4 for x > -0.5) as spec/isa_spec.lua asserts.
**
** Lanes with |x| >= 4, NaN or infinite take vm_gelu_float, and so do those with 0 < |x| <
** 2^-125, where x/2 is subnormal and x - G would round twice where x Phi(x) rounds once: the
** choice depends on the value only, never on the neighbours a lane shares a vector with, so
** results do not depend on the thread count or on where a row is cut. A tail shorter than a
** vector goes through masked loads and stores of the same vector code.
*/
#include <immintrin.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "vmath.h"

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2

#define GELU_XMAX 4.0f       /* the tables cover |x| < 4 */
#define GELU_XMIN 0x1p-125f  /* and |x| >= 2^-125, where x/2 is normal (0 itself is in range) */
#define GELU_INLINE static inline __attribute__((always_inline))

/* [coefficient j][lane] of G(a) = a Phi(-a) and of G'(a) in u = a - b_k for a in [k, k + 1),
** anchors b_k = 0, 2, 3, 4; the four intervals twice, one copy per 128-bit half */
static const float g_tab[10][8] __attribute__((aligned(32))) = {
    {0.000000000e+00f, 4.550026357e-02f, 4.049694166e-03f, 1.266849722e-04f,
     0.000000000e+00f, 4.550026357e-02f, 4.049694166e-03f, 1.266849722e-04f},
    {5.000000000e-01f, -8.523179591e-02f, -1.194564719e-02f, -5.036497605e-04f,
     5.000000000e-01f, -8.523179591e-02f, -1.194564719e-02f, -5.036497605e-04f},
    {-3.989422619e-01f, 5.399104208e-02f, 1.551145781e-02f, 9.368071333e-04f,
     -3.989422619e-01f, 5.399104208e-02f, 1.551145781e-02f, 9.368071333e-04f},
    {-8.149769428e-07f, 1.199416374e-06f, -1.107982919e-02f, -1.070705126e-03f,
     -8.149769428e-07f, 1.199416374e-06f, -1.107982919e-02f, -1.070705126e-03f},
    {6.649960577e-02f, -1.798728667e-02f, 4.060679115e-03f, 8.248586673e-04f,
     6.649960577e-02f, -1.798728667e-02f, 4.060679115e-03f, 8.248586673e-04f},
    {-5.345215686e-05f, 9.043501690e-03f, -9.352657798e-06f, -4.386937653e-04f,
     -5.345215686e-05f, 9.043501690e-03f, -9.352657798e-06f, -4.386937653e-04f},
    {-9.794810787e-03f, -3.221358056e-04f, -8.043276612e-04f, 1.455580496e-04f,
     -9.794810787e-03f, -3.221358056e-04f, -8.043276612e-04f, 1.455580496e-04f},
    {-3.638121416e-04f, -8.865447016e-04f, 3.089828824e-04f, -2.143001620e-05f,
     -3.638121416e-04f, -8.865447016e-04f, 3.089828824e-04f, -2.143001620e-05f},
    {1.641253475e-03f, 5.987108452e-04f, -1.108889192e-04f, -8.244253877e-06f,
     1.641253475e-03f, 5.987108452e-04f, -1.108889192e-04f, -8.244253877e-06f},
    {-3.304610145e-04f, 1.989821758e-04f, -6.780346303e-05f, 1.044915371e-05f,
     -3.304610145e-04f, 1.989821758e-04f, -6.780346303e-05f, 1.044915371e-05f},
};
static const float dg_tab[10][8] __attribute__((aligned(32))) = {
    {5.000000000e-01f, -8.523180336e-02f, -1.194564719e-02f, -5.036496441e-04f,
     5.000000000e-01f, -8.523180336e-02f, -1.194564719e-02f, -5.036496441e-04f},
    {-7.978842258e-01f, 1.079819947e-01f, 3.102292493e-02f, 1.873629517e-03f,
     -7.978842258e-01f, 1.079819947e-01f, 3.102292493e-02f, 1.873629517e-03f},
    {-9.744886484e-06f, 2.117227268e-06f, -3.323936835e-02f, -3.211721545e-03f,
     -9.744886484e-06f, 2.117227268e-06f, -3.323936835e-02f, -3.211721545e-03f},
    {2.660663724e-01f, -7.196059823e-02f, 1.624329947e-02f, 3.303688718e-03f,
     2.660663724e-01f, -7.196059823e-02f, 1.624329947e-02f, 3.303688718e-03f},
    {-5.869126180e-04f, 4.516943917e-02f, -4.613790225e-05f, -2.169871936e-03f,
     -5.869126180e-04f, 4.516943917e-02f, -4.613790225e-05f, -2.169871936e-03f},
    {-5.791856349e-02f, -2.052189084e-03f, -4.830032121e-03f, 9.474480175e-04f,
     -5.791856349e-02f, -2.052189084e-03f, -4.830032121e-03f, 9.474480175e-04f},
    {-3.881660290e-03f, -6.386679132e-03f, 2.146751620e-03f, -1.317114948e-05f,
     -3.881660290e-03f, -6.386679132e-03f, 2.146751620e-03f, -1.317114948e-05f},
    {1.435557660e-02f, 4.625037778e-03f, -9.118627640e-04f, 8.106692985e-05f,
     1.435557660e-02f, 4.625037778e-03f, -9.118627640e-04f, 8.106692985e-05f},
    {-3.582147881e-03f, 1.707921969e-03f, -6.280487287e-04f, 1.789718954e-04f,
     -3.582147881e-03f, 1.707921969e-03f, -6.280487287e-04f, 1.789718954e-04f},
    {1.258204866e-04f, -1.778114529e-05f, -4.978906418e-06f, 2.037172999e-05f,
     1.258204866e-04f, -1.778114529e-05f, -4.978906418e-06f, 2.037172999e-05f},
};

/* Each lane's entry of a row of four (twice): vpermilps picks it by the interval in sel, or,
** when bytes, vpshufb by the entry's four byte indices in sel (see pick_bytes). The same bits
** either way; AMD Zen 1 and 2 issue vpermilps with a variable control at one per two cycles and
** vpshufb at two a cycle (on Zen 2, alternating runs: GELU on 1M floats 973-995 -> 849-861
** us); on Zen 3 an earlier round found the byte form slower (ltB_cpu_byte_lookup chooses). */
GELU_INLINE __m256 pick(const float *row, __m256i sel, bool bytes) {
  if (!bytes) return _mm256_permutevar_ps(_mm256_load_ps(row), sel);
  return _mm256_castsi256_ps(_mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)row), sel));
}

/* the byte indices 4k, 4k + 1, 4k + 2, 4k + 3 of entry k in each 32-bit lane (k < 4) */
GELU_INLINE __m256i pick_bytes(__m256i k) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                          0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
  const __m256i within = _mm256_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
                                          0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
  return _mm256_or_si256(_mm256_shuffle_epi8(_mm256_slli_epi32(k, 2), spread), within);
}

/* the polynomial of table t at u, interval idx per lane (vpermilps reads its low two bits), as
** c0 + u (c1 + c2 u) + u^3 H(u), H's even and odd halves by Horner's rule in u^2: the first
** interval's G (0.5 u - 0.4 u^2 + ...) cancels 3-fold near u = 1, which cost 3.7 ulp when the
** whole sum was split into even and odd halves; this way the partial sums add without
** cancelling, for one product (u^3) more. */
GELU_INLINE __m256 table_poly(const float (*t)[8], __m256i sel, bool bytes, __m256 u,
                              __m256 u2) {
#define GELU_C(j) pick(t[j], sel, bytes)
  __m256 u3 = _mm256_mul_ps(u2, u);
  __m256 low = _mm256_fmadd_ps(u, _mm256_fmadd_ps(GELU_C(2), u, GELU_C(1)), GELU_C(0));
  __m256 he = GELU_C(9), ho = GELU_C(8);
  for (int j = 7; j >= 3; j -= 2) he = _mm256_fmadd_ps(he, u2, GELU_C(j));
  for (int j = 6; j >= 4; j -= 2) ho = _mm256_fmadd_ps(ho, u2, GELU_C(j));
#undef GELU_C
  return _mm256_fmadd_ps(u3, _mm256_fmadd_ps(ho, u, he), low);
}

/* y = gelu(x) and, when want_d, d = gelu'(x), for the lanes of x the tables serve (|x| < 4, and
** |x| = 0 or >= 2^-125); *inr gets the mask of those lanes (NaN is not one). */
GELU_INLINE __m256 gelu_vec(__m256 x, bool want_d, bool bytes, __m256 *d, int *inr) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 a = _mm256_and_ps(x, absmask);
  /* out: |x| >= 4 or NaN, or 0 < |x| < 2^-125 (float compares: they issue beside the FMAs;
  ** GCC rebuilt the integer ones' constants in the loop through a broadcast, which does not) */
  __m256 big = _mm256_cmp_ps(a, _mm256_set1_ps(GELU_XMAX), _CMP_NLT_UQ);
  __m256 tiny = _mm256_and_ps(_mm256_cmp_ps(a, _mm256_set1_ps(GELU_XMIN), _CMP_LT_OQ),
                              _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_GT_OQ));
  *inr = ~_mm256_movemask_ps(_mm256_or_ps(big, tiny)) & 0xff;
  /* interval k = floor(a), anchor k + min(k, 1); u = a - b_k is exact (a and b_k are within a
  ** factor of two, or b_k = 0) */
  __m256i idx = _mm256_cvttps_epi32(a);
  __m256 k = _mm256_cvtepi32_ps(idx);
  __m256 u = _mm256_sub_ps(a, _mm256_add_ps(k, _mm256_min_ps(k, _mm256_set1_ps(1.0f))));
  __m256 u2 = _mm256_mul_ps(u, u);
  __m256i sel = bytes ? pick_bytes(idx) : idx;
  __m256 g = table_poly(g_tab, sel, bytes, u, u2);   /* G(|x|) = |x| Phi(-|x|) */
  /* max(0, x) - G: x - G above 0, -G below, one rounding either way; the sign bit of x or-ed
  ** in keeps gelu(-0) = -0 whichever zero max returns */
  const __m256 signmask = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
  __m256 y = _mm256_sub_ps(_mm256_max_ps(_mm256_setzero_ps(), x), g);
  y = _mm256_or_ps(y, _mm256_and_ps(x, signmask));
  if (want_d) {   /* gelu' is G'(|x|) below 0, 1 - G'(x) above */
    __m256 dg = table_poly(dg_tab, sel, bytes, u, u2);
    *d = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), dg), dg, x);
  }
  return y;
}

/* one vector of up to 8 elements at x (w of them: masked when w < 8) into y and d */
GELU_INLINE void gelu_block(float *y, float *d, const float *x, int w, bool bytes) {
  __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256 v = w == 8 ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, m);
  __m256 dv = _mm256_setzero_ps();
  int inr;
  __m256 yv = gelu_vec(v, d != NULL, bytes, &dv, &inr);
  if (w == 8) {
    _mm256_storeu_ps(y, yv);
    if (d) _mm256_storeu_ps(d, dv);
  } else {
    _mm256_maskstore_ps(y, m, yv);
    if (d) _mm256_maskstore_ps(d, m, dv);
  }
  if (((inr | ~((1 << w) - 1)) & 0xff) != 0xff) {   /* a lane outside the tables */
    float xs[8];   /* the input as loaded: y may be x (gelu_ in place) */
    _mm256_storeu_ps(xs, v);
    for (int k = 0; k < w; k++) {
      if (inr >> k & 1) continue;
      if (d)
        y[k] = vm_gelu_pair_float(xs[k], &d[k]);
      else
        y[k] = vm_gelu_float(xs[k]);
    }
  }
}

/* n contiguous floats; two loops, as GCC does not take the test of d out of one */
GELU_INLINE void gelu_run(float *y, float *d, const float *x, int64_t n, bool bytes) {
  int64_t i = 0;
  if (d)
    for (; i + 8 <= n; i += 8) gelu_block(y + i, d + i, x + i, 8, bytes);
  else
    for (; i + 8 <= n; i += 8) gelu_block(y + i, NULL, x + i, 8, bytes);
  if (i < n) gelu_block(y + i, d ? d + i : NULL, x + i, (int)(n - i), bytes);
}

/* gelu_block as functions that can be passed (it is always inlined where it is called) */
static void gelu_block_lanes(float *y, float *d, const float *x, int w) {
  gelu_block(y, d, x, w, false);
}
static void gelu_block_bytes(float *y, float *d, const float *x, int w) {
  gelu_block(y, d, x, w, true);
}

void ltC_gelu_avx2(char *y, int64_t sy, char *d, int64_t sd, const char *x, int64_t sx,
                   int64_t n) {
  const int64_t es = (int64_t)sizeof(float);
  const bool bytes = ltB_cpu_byte_lookup();
  if (sy == es && sx == es && (!d || sd == es)) {
    if (bytes)
      gelu_run((float *)y, (float *)d, (const float *)x, n, true);
    else
      gelu_run((float *)y, (float *)d, (const float *)x, n, false);
    return;
  }
  ltC_block_strided(bytes ? gelu_block_bytes : gelu_block_lanes, 8, y, sy, d, sd, x, sx, n);
}

LT_ISA_END
#endif
