/*
** cpu/gelu.c -- float32 GELU (erf form), and its derivative for a recorded forward, at the
** AVX2+FMA level (the AVX-512 level runs the same code).
**
** Why a table: vmath.h's vm_gelu_float is one rational fit times an exponential over the whole
** line, about 30 multiplies and a division per vector, where PyTorch's shorter form is 550 ulp
** off. Here |x| < 4, nearly every activation, takes Phi(-|x|) from one of eight degree-7
** polynomials in |x| - c on the eight intervals [k/2, k/2 + 1/2) (c their centres), each
** coefficient picked for its lane by one vpermps: 7 multiply-adds (Estrin's scheme) and 8
** permutes per vector.
** Then x Phi(x) is x p for x < 0 and x (1 - p) above, with p = Phi(-|x|), so that the tail
** keeps its relative accuracy. The derivative Phi(x) + x phi(x) takes phi(|x|) from eight more
** polynomials. The fits (tools/fit_gelu_tables.py, relative minimax-like with mpmath's erfc as
** reference) are 5e-9 relative; evaluated in float32, Phi(-|x|) is within 2.0 ulp and phi
** within 1.7 (the script's own measure), which keeps gelu inside vmath.h's bounds (8 ulp, 4
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

/* [coefficient j][interval k] of Phi(-a) and of phi(a), a in [k/2, k/2 + 1/2), in a - (k/2 + 1/4) */
static const float cdf_tab[8][8] __attribute__((aligned(32))) = {
    {4.012936652e-01f, 2.266273499e-01f, 1.056497768e-01f, 4.005915672e-02f,
     1.222447306e-02f, 2.979763318e-03f, 5.770250573e-04f, 8.841728413e-05f},
    {-3.866681159e-01f, -3.011374176e-01f, -1.826490909e-01f, -8.627732098e-02f,
     -3.173965216e-02f, -9.093562141e-03f, -2.029048046e-03f, -3.525956708e-04f},
    {4.833349958e-02f, 1.129265204e-01f, 1.141556799e-01f, 7.549266517e-02f,
     3.570710868e-02f, 1.250364631e-02f, 3.297201823e-03f, 6.611169083e-04f},
    {6.041685492e-02f, 2.195790596e-02f, -1.712332852e-02f, -2.965779044e-02f,
     -2.149038576e-02f, -9.946099482e-03f, -3.233803436e-03f, -7.676298264e-04f},
    {-1.183051243e-02f, -2.293679677e-02f, -1.367519703e-02f, 3.923475742e-04f,
     6.137005519e-03f, 4.754208960e-03f, 2.078040503e-03f, 6.094681448e-04f},
    {-8.469485678e-03f, 1.478775230e-04f, 5.986270495e-03f, 4.309890326e-03f,
     4.618351813e-04f, -1.122260815e-03f, -8.653423283e-04f, -3.419765853e-04f},
    {1.901354641e-03f, 3.003757913e-03f, 5.838780198e-04f, -1.287690015e-03f,
     -9.874788811e-04f, -1.251457870e-04f, 1.886536047e-04f, 1.324425102e-04f},
    {9.193150909e-04f, -3.462807799e-04f, -8.012189646e-04f, -1.763940236e-04f,
     2.610388619e-04f, 1.754802797e-04f, 1.241442806e-05f, -2.981971375e-05f},
};
static const float pdf_tab[8][8] __attribute__((aligned(32))) = {
    {3.866681159e-01f, 3.011374176e-01f, 1.826490909e-01f, 8.627732098e-02f,
     3.173965216e-02f, 9.093562141e-03f, 2.029048046e-03f, 3.525956708e-04f},
    {-9.666702896e-02f, -2.258530706e-01f, -2.283113599e-01f, -1.509853154e-01f,
     -7.141421735e-02f, -2.500729635e-02f, -6.594405975e-03f, -1.322233700e-03f},
    {-1.812506318e-01f, -6.587384641e-02f, 5.137001723e-02f, 8.897349238e-02f,
     6.447118521e-02f, 2.983825281e-02f, 9.701382369e-03f, 2.302889246e-03f},
    {4.732654989e-02f, 9.175273776e-02f, 5.469953641e-02f, -1.572714187e-03f,
     -2.454857342e-02f, -1.901596785e-02f, -8.311723359e-03f, -2.437876770e-03f},
    {4.235105962e-02f, -7.327084895e-04f, -2.993310243e-02f, -2.155598626e-02f,
     -2.310593612e-03f, 5.613800138e-03f, 4.328229930e-03f, 1.709895325e-03f},
    {-1.158179808e-02f, -1.823718101e-02f, -3.454425139e-03f, 7.856927812e-03f,
     5.946963094e-03f, 7.157459040e-04f, -1.150037278e-03f, -7.945221150e-04f},
    {-6.481738295e-03f, 2.338385209e-03f, 5.631138105e-03f, 1.318887225e-03f,
     -1.808931702e-03f, -1.260709832e-03f, -1.066764889e-04f, 2.085842716e-04f},
    {1.859685057e-03f, 2.302594716e-03f, -5.275320727e-04f, -1.419185079e-03f,
     -2.427984291e-04f, 3.882662859e-04f, 2.030362812e-04f, -1.250652872e-06f},
};

/* the polynomial of table t at u, interval idx per lane, by Estrin's scheme: a Horner chain of
** seven multiply-adds is longer than the out-of-order window hides, and the loop ran at half
** speed on it */
GELU_INLINE __m256 table_poly(const float (*t)[8], __m256i idx, __m256 u, __m256 u2, __m256 u4) {
  __m256 c[8];
  for (int j = 0; j < 8; j++) c[j] = _mm256_permutevar8x32_ps(_mm256_load_ps(t[j]), idx);
  __m256 p01 = _mm256_fmadd_ps(c[1], u, c[0]), p23 = _mm256_fmadd_ps(c[3], u, c[2]);
  __m256 p45 = _mm256_fmadd_ps(c[5], u, c[4]), p67 = _mm256_fmadd_ps(c[7], u, c[6]);
  __m256 lo = _mm256_fmadd_ps(p23, u2, p01), hi = _mm256_fmadd_ps(p67, u2, p45);
  return _mm256_fmadd_ps(hi, u4, lo);
}

/* y = gelu(x) and, when want_d, d = gelu'(x), for the lanes of x with |x| < 4; *inr gets the
** mask of those lanes (NaN is not one). */
GELU_INLINE __m256 gelu_vec(__m256 x, bool want_d, __m256 *d, int *inr) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 a = _mm256_and_ps(x, absmask);
  *inr = _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(GELU_XMAX), _CMP_LT_OQ));
  /* interval k = floor(2a) (exact), u = a - (k/2 + 1/4) (exact: a and the centre are close) */
  __m256i idx = _mm256_cvttps_epi32(_mm256_add_ps(a, a));
  __m256 ctr = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idx), _mm256_set1_ps(0.5f), _mm256_set1_ps(0.25f));
  __m256 u = _mm256_sub_ps(a, ctr), u2 = _mm256_mul_ps(u, u), u4 = _mm256_mul_ps(u2, u2);
  __m256 p = table_poly(cdf_tab, idx, u, u2, u4);         /* Phi(-|x|) */
  __m256 q = _mm256_sub_ps(_mm256_set1_ps(1.0f), p);      /* Phi(|x|) */
  /* the sign bit picks: x < 0 (and -0) takes x p, the rest x (1 - p) */
  __m256 y = _mm256_blendv_ps(_mm256_mul_ps(x, q), _mm256_mul_ps(x, p), x);
  if (want_d) {
    __m256 cdf = _mm256_blendv_ps(q, p, x);
    *d = _mm256_fmadd_ps(x, table_poly(pdf_tab, idx, u, u2, u4), cdf);
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
    for (; i + 8 <= n; i += 8) gelu_block(yf + i, df ? df + i : NULL, xf + i, 8);
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
