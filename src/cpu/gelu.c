/*
** cpu/gelu.c -- float32 GELU (erf form), and its derivative for a recorded forward, at the
** AVX2+FMA level (gelu_avx512.c has the AVX-512 level's).
**
** Why a table: vmath.h's vm_gelu_float is one rational fit times an exponential over the whole
** line, about 30 multiplies and a division per vector, where PyTorch's shorter form is 550 ulp
** off. Here |x| < 4, nearly every activation, takes P(|x|) = Phi(-|x|) from one of four
** degree-9 polynomials, one per interval [k, k + 1), each coefficient picked for its lane by
** one in-lane vpermilps (vpshufb on Zen 1 and 2, see pick) from a table that holds the four
** intervals in both 128-bit halves; then gelu(x) is max(x, 0) - |x| P in one multiply-add: one
** rounding, and for tiny x exactly x/2 rounded once (P(0) = 1/2 is the first interval's
** constant term), so subnormal results need no care.
** On AMD's Zen 3 the permutes and the multiply-adds issue to the same two pipes, two a cycle,
** and bound the loop: ten permutes, nine multiply-adds and two products a vector. Eight
** half-width intervals need the lane-crossing vpermps, which issues at one a cycle: that
** version of this kernel ran 1.7 times longer.
** The polynomials are anchored at the right end of each interval but the first (u = |x| - b,
** b = 2, 3, 4), where the derivatives alternate in sign, so that the leading terms of the sum
** have one sign and the float32 evaluation does not cancel (centred, it lost 10 ulp on [3, 4)).
** The derivative, G'(|x|) below 0 and 1 - G'(x) above (G(a) = a P(a)), takes G' from four more
** polynomials. The fits (tools/fit_gelu_tables.py, relative minimax-like with mpmath as
** reference) are 1e-8 relative; evaluated in float32, P is within 1.7 ulp of Phi(-|x|) over the
** fit script's sweep, and gelu within 3.1 ulp of float64 gelu over every float32 in (-4, 4)
** (1.8 for x > -0.5; tools/check_gelu.c; the 2.51 at p_tab is the script's sparser sweep)
** and gelu' within 0.51 of the gradient tolerance, inside vmath.h's bounds (8 ulp, 4 for x >
** -0.5) as spec/isa_spec.lua asserts. Tabulating G = |x| P instead, x - G above 0 and -G below,
** was 2.3 ulp, but x - G rounds twice where x/2 is subnormal, so each vector tested its lanes
** for tiny inputs as well as for the range: 7% longer (Zen 4 at LANTERN_ISA=avx2, 1M floats,
** 517 -> 478 us; with LANTERN_LOOKUP=bytes 555 -> 521).
**
** The range: |x| >= 4, infinities and NaN take vm_gelu_float (which keeps a NaN's sign and
** payload). The loop keeps the largest |x| of each block of GELU_BLOCK elements in a register
** (one integer max a vector: as integers NaN is above infinity) and passes over the block
** again, lane by lane, only when it reached 4. Which formula a lane takes depends on its value
** only, never on its neighbours or on where a row is cut, so results do not depend on the
** thread count. A tail shorter than a vector goes through masked loads and stores of the same
** vector code.
*/
#include <immintrin.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "vmath.h"

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2

#define GELU_XMAX 4.0f       /* the tables cover |x| < 4 */
#define GELU_BLOCK 256       /* elements per range test (ltC_block_strided's buffers hold 256) */
_Static_assert(GELU_BLOCK <= 256, "ltC_block_strided's buffers hold 256 floats");
#define GELU_INLINE static inline __attribute__((always_inline))

/* [coefficient j][lane] of P(a) = Phi(-a) and of G'(a) = P(a) - a phi(a) in u = a - b_k for
** a in [k, k + 1), anchors b_k = 0, 2, 3, 4; the four intervals twice, one copy per 128-bit
** half */
/* p_tab: worst 2.51 ulp of gelu in float32, both signs */
static const float p_tab[10][8] __attribute__((aligned(32))) = {
    {5.000000000e-01f, 2.275013179e-02f, 1.349898055e-03f, 3.167124305e-05f,
     5.000000000e-01f, 2.275013179e-02f, 1.349898055e-03f, 3.167124305e-05f},
    {-3.989422917e-01f, -5.399096385e-02f, -4.431849346e-03f, -1.338301372e-04f,
     -3.989422917e-01f, -5.399096385e-02f, -4.431849346e-03f, -1.338301372e-04f},
    {-3.834311357e-08f, 5.399108306e-02f, 6.647741888e-03f, 2.676644654e-04f,
     -3.834311357e-08f, 5.399108306e-02f, 6.647741888e-03f, 2.676644654e-04f},
    {6.649138778e-02f, -2.699380741e-02f, -5.909603555e-03f, -3.345094447e-04f,
     6.649138778e-02f, -2.699380741e-02f, -5.909603555e-03f, -3.345094447e-04f},
    {-1.014552618e-05f, 4.511306994e-03f, 3.320303746e-03f, 2.904990688e-04f,
     -1.014552618e-05f, 4.511306994e-03f, 3.320303746e-03f, 2.904990688e-04f},
    {-9.922467172e-03f, 2.298446139e-03f, -1.123156631e-03f, -1.793886040e-04f,
     -9.922467172e-03f, 2.298446139e-03f, -1.123156631e-03f, -1.793886040e-04f},
    {-1.434678707e-04f, -1.232004841e-03f, 7.255021046e-05f, 8.890822937e-05f,
     -1.434678707e-04f, -1.232004841e-03f, 7.255021046e-05f, 8.890822937e-05f},
    {1.420130138e-03f, 2.889345924e-04f, 2.652332842e-05f, -1.529480141e-05f,
     1.420130138e-03f, 2.889345924e-04f, 2.652332842e-05f, -1.529480141e-05f},
    {-2.110252826e-04f, 2.583634341e-04f, -9.421196592e-05f, 1.347797570e-05f,
     -2.110252826e-04f, 2.583634341e-04f, -9.421196592e-05f, 1.347797570e-05f},
    {-2.683833736e-05f, 2.101617065e-05f, -1.576386785e-05f, 5.345906629e-06f,
     -2.683833736e-05f, 2.101617065e-05f, -1.576386785e-05f, 5.345906629e-06f},
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
** interval's sum (0.5 - 0.4 u + ..., and G = u P when G was tabulated) cancels near u = 1, which
** cost 3.7 ulp when the whole sum was split into even and odd halves; this way the partial sums
** add without cancelling, for one product (u^3) more. */
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

/* y = gelu(x) and, when want_d, d = gelu'(x), for the lanes of x with |x| < 4; *amax keeps the
** largest bits of |x| seen */
GELU_INLINE __m256 gelu_vec(__m256 x, bool want_d, bool bytes, __m256 *d, __m256i *amax) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 a = _mm256_and_ps(x, absmask);
  *amax = _mm256_max_epi32(_mm256_castps_si256(a), *amax);   /* as integers: NaN is above inf */
  /* interval k = floor(a), anchor k + min(k, 1); u = a - b_k is exact (a and b_k are within a
  ** factor of two, or b_k = 0) */
  __m256i idx = _mm256_cvttps_epi32(a);
  __m256 k = _mm256_cvtepi32_ps(idx);
  __m256 u = _mm256_sub_ps(a, _mm256_add_ps(k, _mm256_min_ps(k, _mm256_set1_ps(1.0f))));
  __m256 u2 = _mm256_mul_ps(u, u);
  __m256i sel = bytes ? pick_bytes(idx) : idx;
  __m256 p = table_poly(p_tab, sel, bytes, u, u2);   /* P(|x|) = Phi(-|x|) */
  /* max(0, x) - |x| P in one rounding: x - |x| P above 0, -|x| P below; max returns x when both
  ** are zeros, so that gelu(-0) = -0 - 0 = -0 */
  __m256 y = _mm256_fnmadd_ps(a, p, _mm256_max_ps(_mm256_setzero_ps(), x));
  if (want_d) {   /* gelu' is G'(|x|) below 0, 1 - G'(x) above */
    __m256 dg = table_poly(dg_tab, sel, bytes, u, u2);
    *d = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), dg), dg, x);
  }
  return y;
}

/* the lanes of a block that the tables do not serve, by vmath.h's formula */
static __attribute__((noinline)) void gelu_wide(float *y, float *d, const float *x, int w) {
  for (int k = 0; k < w; k++) {
    if (!(fabsf(x[k]) < GELU_XMAX)) {   /* NaN too */
      if (d)
        y[k] = vm_gelu_pair_float(x[k], &d[k]);
      else
        y[k] = vm_gelu_float(x[k]);
    }
  }
}

/* w <= GELU_BLOCK contiguous elements; y may be x (gelu_ in place), d never is (a new tensor) */
GELU_INLINE void gelu_block(float *y, float *d, const float *x, int w, bool bytes) {
  float xs[GELU_BLOCK];
  if (ltC_overlap(y, x, (size_t)w * sizeof(float))) {   /* gelu_wide reads x after the stores */
    memcpy(xs, x, (size_t)w * sizeof(float));
    x = xs;
  }
  __m256i amax = _mm256_setzero_si256();
  __m256 dv = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= w; i += 8) {
    __m256 yv = gelu_vec(_mm256_loadu_ps(x + i), d != NULL, bytes, &dv, &amax);
    _mm256_storeu_ps(y + i, yv);
    if (d) _mm256_storeu_ps(d + i, dv);
  }
  if (i < w) {   /* the tail through masked loads and stores (absent lanes read as 0) */
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(w - i),
                                   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 yv = gelu_vec(_mm256_maskload_ps(x + i, m), d != NULL, bytes, &dv, &amax);
    _mm256_maskstore_ps(y + i, m, yv);
    if (d) _mm256_maskstore_ps(d + i, m, dv);
  }
  __m128i h = _mm_max_epi32(_mm256_castsi256_si128(amax), _mm256_extracti128_si256(amax, 1));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  if (_mm_cvtsi128_si32(h) >= 0x40800000) gelu_wide(y, d, x, w);   /* 4.0f */
}

/* gelu_block as functions that can be passed (it is always inlined where it is called) */
static void gelu_block_lanes(float *y, float *d, const float *x, int w) {
  gelu_block(y, d, x, w, false);
}
static void gelu_block_bytes(float *y, float *d, const float *x, int w) {
  gelu_block(y, d, x, w, true);
}

/* n contiguous floats in blocks; GCC does not take the tests of d and bytes out of one loop */
GELU_INLINE void gelu_run(float *y, float *d, const float *x, int64_t n, bool bytes) {
  for (int64_t i = 0; i < n; i += GELU_BLOCK) {
    int w = (int)ltC_min(GELU_BLOCK, n - i);
    if (d)
      gelu_block(y + i, d + i, x + i, w, bytes);
    else
      gelu_block(y + i, NULL, x + i, w, bytes);
  }
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
  ltC_block_strided(bytes ? gelu_block_bytes : gelu_block_lanes, GELU_BLOCK, y, sy, d, sd, x, sx,
                    n);
}

LT_ISA_END
#endif
