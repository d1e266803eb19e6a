/*
** cpu/gelu_avx512.c -- float32 GELU (erf form), and its derivative for a recorded forward, at
** the AVX-512 level: gelu.c's method, reworked for the wider permutes and the rounding control
** of AVX-512.
**
** gelu(x) = max(x, 0) - |x| P(|x|), P(a) = Phi(-a); |x| < 4, nearly every activation, takes
** P from one of 32 degree-5 polynomials, one per interval [k/8, (k + 1)/8), each coefficient
** picked for its lane by one vpermt2ps from two registers that hold the 32 intervals. gelu.c
** tabulates G(a) = a P(a) instead and subtracts it; here the product and the subtraction are
** one multiply-add, one rounding in all, and a vector costs what it must: on AMD's Zen 5 (the
** only AVX-512 machine measured) about three 512-bit operations issue a cycle whatever their
** kind, so the count of operations is the cost. The count per 16 floats: six permutes and five
** multiply-adds for P, one for gelu, and five others (|x|, the interval, u, max(x, 0), the
** range). Sixteen intervals of degree 6 (vpermps) with a mask test a vector took 10% longer,
** gelu.c's G form with its tests lane by lane 31% longer.
**
** The interval: 2^20 + 4 + |x| rounded down (embedded rounding, no extra operation) holds
** floor(8 |x|) in its low five bits, which vpermt2ps reads, and less 2^20 + 4 it is k/8, the
** interval's left end, from which u = |x| - k/8 is exact. gelu.c anchors its unit intervals
** at their right ends, where the terms of the sum have one sign, because centred or left
** anchors cancelled there; on intervals of 1/8 left anchors cost 0.3 ulp at most (2.30 against
** 1.98 over every float32 in (-4, 4)) and save two operations, 10% of the loop. In the first
** interval u = |x|, so P keeps its relative accuracy and P(0) = 1/2 exactly: for |x| < 2^-125,
** where gelu rounds to a subnormal, max(x, 0) - |x| / 2 in one rounding is what float64 gelu
** rounded to float32 gives, and tiny inputs need no care.
**
** The range: |x| >= 4, infinities and NaN take vm_gelu_float (which keeps a NaN's sign and
** payload). The loop keeps the largest |x| of each block of GELU_BLOCK elements in a register
** (one integer max a vector: as integers NaN is above infinity) and passes over the block
** again, lane by lane, only when it reached 4: a test per vector costs mask operations, which
** Zen 5 issues with the permutes.
** Which formula a lane takes depends on its value only, never on its neighbours or on where a
** row is cut, so results do not depend on the thread count. Fits by tools/fit_gelu_tables.py
** avx512; over every float32 in (-4, 4) (tools/check_gelu.c) gelu is within 2.3 ulp of float64
** gelu, 1.7 for x > -0.5, and gelu' within 0.09 of the gradient tolerance.
*/
#include <immintrin.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "vmath.h"

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX512

#define GELU_XMAX 4.0f     /* the tables cover |x| < 4 */
#define GELU_BLOCK 256     /* elements per range test */
/* Elements ahead of a block whose lines are asked into L1 before it runs. The loop does enough
** arithmetic per line that the hardware's prefetch alone let it wait on memory: 1M floats on one
** thread of the Intel Xeon (family 6 model 207), 323-333 -> 309-316 us (1 KB to 2 KB ahead; 4 KB
** and 8 KB gained less, prefetching the output for writing lost 3-15%). */
#define GELU_AHEAD 512
_Static_assert(GELU_BLOCK <= 256, "ltC_block_strided's buffers hold 256 floats");
#define GELU_INLINE static inline __attribute__((always_inline))

/* [coefficient j][interval k] of P(a) = Phi(-a) and of G'(a) = P(a) - a phi(a) in u = a - k/8
** for a in [k/8, (k + 1)/8) */
/* gelu: worst 1.88 ulp in float32 over the script's sweep, both signs */
static const float p_tab[6][32] __attribute__((aligned(64))) = {
    {5.000000000e-01f, 4.502617717e-01f, 4.012936652e-01f, 3.538302481e-01f,
     3.085375428e-01f, 2.659855187e-01f, 2.266273499e-01f, 1.907869577e-01f,
     1.586552560e-01f, 1.302945167e-01f, 1.056497768e-01f, 8.456572145e-02f,
     6.680720299e-02f, 5.208127946e-02f, 4.005915672e-02f, 3.039636090e-02f,
     2.275013179e-02f, 1.679330692e-02f, 1.222447306e-02f, 8.774475195e-03f,
     6.209665444e-03f, 4.332448356e-03f, 2.979763318e-03f, 2.020137385e-03f,
     1.349898055e-03f, 8.890252793e-04f, 5.770250573e-04f, 3.690784506e-04f,
     2.326290851e-04f, 1.444807276e-04f, 8.841728413e-05f, 5.331234934e-05f},
    {-3.989422917e-01f, -3.958376944e-01f, -3.866681159e-01f, -3.718550801e-01f,
     -3.520653248e-01f, -3.281609714e-01f, -3.011374176e-01f, -2.720550001e-01f,
     -2.419707179e-01f, -2.118766457e-01f, -1.826490909e-01f, -1.550122648e-01f,
     -1.295175999e-01f, -1.065382659e-01f, -8.627732098e-02f, -6.878627837e-02f,
     -5.399096757e-02f, -4.172098637e-02f, -3.173965216e-02f, -2.377190068e-02f,
     -1.752830110e-02f, -1.272418164e-02f, -9.093562141e-03f, -6.398120429e-03f,
     -4.431848414e-03f, -3.022257704e-03f, -2.029047813e-03f, -1.341118594e-03f,
     -8.726824890e-04f, -5.590613582e-04f, -3.525955253e-04f, -2.189315128e-04f},
    {-4.799459674e-08f, 2.473970689e-02f, 4.833327979e-02f, 6.972253323e-02f,
     8.801600337e-02f, 1.025499776e-01f, 1.129262373e-01f, 1.190238148e-01f,
     1.209851801e-01f, 1.191805080e-01f, 1.141556501e-01f, 1.065709740e-01f,
     9.713828564e-02f, 8.656246960e-02f, 7.549279928e-02f, 6.448728591e-02f,
     5.399110541e-02f, 4.432866722e-02f, 3.570720553e-02f, 2.822920121e-02f,
     2.191041969e-02f, 1.670051180e-02f, 1.250365376e-02f, 9.197290987e-03f,
     6.647757255e-03f, 4.722258076e-03f, 3.297181334e-03f, 2.263116883e-03f,
     1.527175540e-03f, 1.013282570e-03f, 6.611033459e-04f, 4.241692659e-04f},
    {6.649188697e-02f, 6.494706124e-02f, 6.042474508e-02f, 5.327044800e-02f,
     4.401921853e-02f, 3.333994374e-02f, 2.196808159e-02f, 1.063553337e-02f,
     6.079128980e-06f, -9.376434609e-03f, -1.712235063e-02f, -2.301086858e-02f,
     -2.698584273e-02f, -2.913578227e-02f, -2.966268919e-02f, -2.884504758e-02f,
     -2.700012922e-02f, -2.444990538e-02f, -2.149359882e-02f, -1.838842221e-02f,
     -1.533877756e-02f, -1.249301992e-02f, -9.946290404e-03f, -7.747501135e-03f,
     -5.908627063e-03f, -4.414671101e-03f, -3.233081894e-03f, -2.321814653e-03f,
     -1.635647845e-03f, -1.130681834e-03f, -7.671819767e-04f, -5.110552302e-04f},
    {-2.033229248e-05f, -6.225896068e-03f, -1.194986887e-02f, -1.676463336e-02f,
     -2.033890225e-02f, -2.246911824e-02f, -2.309404314e-02f, -2.229147404e-02f,
     -2.025874704e-02f, -1.728091016e-02f, -1.369197853e-02f, -9.835037403e-03f,
     -6.026583724e-03f, -2.528972691e-03f, 4.666080640e-04f, 2.846292919e-03f,
     4.569938872e-03f, 5.660078488e-03f, 6.186294369e-03f, 6.247912068e-03f,
     5.957506597e-03f, 5.427016877e-03f, 4.757490940e-03f, 4.032720346e-03f,
     3.316475078e-03f, 2.652615076e-03f, 2.067235764e-03f, 1.571967965e-03f,
     1.167687587e-03f, 8.480784018e-04f, 6.026955671e-04f, 4.193576169e-04f},
    {-9.866397828e-03f, -9.103915654e-03f, -7.662455086e-03f, -5.694368854e-03f,
     -3.401895985e-03f, -1.010597218e-03f, 1.258931006e-03f, 3.216780024e-03f,
     4.723280668e-03f, 5.700095091e-03f, 6.132103968e-03f, 6.060855463e-03f,
     5.571733695e-03f, 4.777371418e-03f, 3.800397972e-03f, 2.757961629e-03f,
     1.749858377e-03f, 8.511982742e-04f, 1.096679771e-04f, -4.532519961e-04f,
     -8.381932275e-04f, -1.062176889e-03f, -1.152436016e-03f, -1.140709501e-03f,
     -1.058641355e-03f, -9.345310973e-04f, -7.914740709e-04f, -6.466848426e-04f,
     -5.117117544e-04f, -3.932200489e-04f, -2.940508712e-04f, -2.143281017e-04f},
};
/* G': worst 0.07 of the gradient tolerance */
static const float dg_tab[5][32] __attribute__((aligned(64))) = {
    {5.000000000e-01f, 4.007820487e-01f, 3.046266437e-01f, 2.143845707e-01f,
     1.325048804e-01f, 6.088492274e-02f, 7.742791786e-04f, -4.726117104e-02f,
     -8.331546932e-02f, -1.080667078e-01f, -1.226615831e-01f, -1.285761446e-01f,
     -1.274691969e-01f, -1.210434064e-01f, -1.109261513e-01f, -9.857790172e-02f,
     -8.523180336e-02f, -7.186378539e-02f, -5.918974429e-02f, -4.768379033e-02f,
     -3.761108592e-02f, -2.906852961e-02f, -2.202753350e-02f, -1.637445949e-02f,
     -1.194564719e-02f, -8.555531502e-03f, -6.017381325e-03f, -4.157197662e-03f,
     -2.821760252e-03f, -1.882117242e-03f, -1.233816496e-03f, -7.950476720e-04f},
    {-7.978830338e-01f, -7.854890227e-01f, -7.491683364e-01f, -6.914173365e-01f,
     -6.161140203e-01f, -5.281342864e-01f, -4.328854382e-01f, -3.358185291e-01f,
     -2.419715673e-01f, -1.555978507e-01f, -7.990988344e-02f, -1.695526019e-02f,
     3.237878159e-02f, 6.825067103e-02f, 9.166944772e-02f, 1.042541787e-01f,
     1.079820618e-01f, 1.049545854e-01f, 9.720297158e-02f, 8.654488623e-02f,
     7.449556887e-02f, 6.222945452e-02f, 5.058313534e-02f, 4.008835927e-02f,
     3.102302924e-02f, 2.346977405e-02f, 1.737374626e-02f, 1.259394549e-02f,
     8.944984525e-03f, 6.228274666e-03f, 4.253162537e-03f, 2.849509707e-03f},
    {-9.432120714e-05f, 9.848668426e-02f, 1.902437061e-01f, 2.690402567e-01f,
     3.300422430e-01f, 3.701544404e-01f, 3.882108033e-01f, 3.850114048e-01f,
     3.630118966e-01f, 3.259452283e-01f, 2.783131897e-01f, 2.248491645e-01f,
     1.700315773e-01f, 1.176972091e-01f, 7.078764588e-02f, 3.123747930e-02f,
     -7.935408576e-06f, -2.287135459e-02f, -3.795685619e-02f, -4.633250460e-02f,
     -4.931644723e-02f, -4.829060286e-02f, -4.455644265e-02f, -3.924104571e-02f,
     -3.324475512e-02f, -2.723028883e-02f, -2.163935825e-02f, -1.672610082e-02f,
     -1.259854995e-02f, -9.260903113e-03f, -6.651030388e-03f, -4.671177361e-03f},
    {2.680397332e-01f, 2.585940957e-01f, 2.313725054e-01f, 1.891494989e-01f,
     1.361263990e-01f, 7.736275345e-02f, 1.841644011e-02f, -3.605598584e-02f,
     -8.192854375e-02f, -1.164096072e-01f, -1.381954253e-01f, -1.473822594e-01f,
     -1.452596337e-01f, -1.339825392e-01f, -1.161887422e-01f, -9.462419897e-02f,
     -7.182233781e-02f, -4.988155887e-02f, -3.033280186e-02f, -1.411240641e-02f,
     -1.609629020e-03f, 7.232471835e-03f, 1.278383285e-02f, 1.562199742e-02f,
     1.638537087e-02f, 1.569796540e-02f, 1.411259919e-02f, 1.207608730e-02f,
     9.918618016e-03f, 7.862949744e-03f, 6.038898136e-03f, 4.505546764e-03f},
    {-1.879490167e-02f, -5.408895016e-02f, -8.388449252e-02f, -1.053337976e-01f,
     -1.166541204e-01f, -1.172323823e-01f, -1.086894125e-01f, -9.162894636e-02f,
     -6.898234785e-02f, -4.374394193e-02f, -1.867471635e-02f, 3.856816562e-03f,
     2.212646231e-02f, 3.516652063e-02f, 4.275342450e-02f, 4.529748857e-02f,
     4.365697503e-02f, 3.895603120e-02f, 3.237387165e-02f, 2.499874681e-02f,
     1.772044972e-02f, 1.117764041e-02f, 5.777439568e-03f, 1.624746132e-03f,
     -1.292106230e-03f, -3.106664401e-03f, -4.028146155e-03f, -4.286734853e-03f,
     -4.096145742e-03f, -3.642837517e-03f, -3.068049438e-03f, -2.471931744e-03f},
};

/* the polynomial of degree deg in table t at u, interval idx per lane (low five bits) */
GELU_INLINE __m512 table_poly(const float (*t)[32], int deg, __m512i idx, __m512 u) {
#define GELU_C(j) _mm512_permutex2var_ps(_mm512_load_ps(t[j]), idx, _mm512_load_ps(t[j] + 16))
  __m512 r = GELU_C(deg);
  for (int j = deg - 1; j >= 0; j--) r = _mm512_fmadd_ps(r, u, GELU_C(j));
#undef GELU_C
  return r;
}

/* y = gelu(x) and, when want_d, d = gelu'(x), for the lanes of x with |x| < 4; *amax keeps
** the largest bits of |x| seen */
GELU_INLINE __m512 gelu_vec(__m512 x, bool want_d, __m512 *d, __m512i *amax) {
  const __m512 magic = _mm512_set1_ps(0x1p20f + 4.0f);
  __m512 a = _mm512_abs_ps(x);
  *amax = _mm512_max_epi32(_mm512_castps_si512(a), *amax);   /* as integers: NaN is above inf */
  /* t = 2^20 + 4 + floor(8 a) / 8, exactly */
  __m512 t = _mm512_add_round_ps(a, magic, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512i idx = _mm512_castps_si512(t);
  __m512 kb = _mm512_sub_ps(t, magic);   /* k/8 */
  __m512 u = _mm512_sub_ps(a, kb);   /* exact */
  __m512 p = table_poly(p_tab, 5, idx, u);
  /* max(0, x) returns x when both are zeros, so that gelu(-0) = -0 + -0 = -0 */
  __m512 y = _mm512_fnmadd_ps(a, p, _mm512_max_ps(_mm512_setzero_ps(), x));
  if (want_d) {   /* gelu' is G'(|x|) below 0 (sign bit set), 1 - G'(x) above */
    __m512 dg = table_poly(dg_tab, 4, idx, u);
    __mmask16 neg = _mm512_movepi32_mask(_mm512_castps_si512(x));
    *d = _mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(1.0f), dg), dg);
  }
  return y;
}

/* the lanes of a block that the tables do not serve, by vmath.h's formula */
static __attribute__((noinline)) void gelu_wide(float *y, float *d, const float *x, int w) {
  for (int k = 0; k < w; k++) {
    float a = fabsf(x[k]);
    if (a < GELU_XMAX) continue;
    if (d)
      y[k] = vm_gelu_pair_float(x[k], &d[k]);
    else
      y[k] = vm_gelu_float(x[k]);
  }
}

/* w <= GELU_BLOCK contiguous elements; y may be x (gelu_ in place) */
GELU_INLINE void gelu_block(float *y, float *d, const float *x, int w) {
  float xs[GELU_BLOCK];
  if (ltC_overlap(y, x, (size_t)w * sizeof(float))) {   /* gelu_wide reads x after the stores */
    memcpy(xs, x, (size_t)w * sizeof(float));
    x = xs;
  }
  __m512i amax = _mm512_setzero_si512();
  __m512 dv = _mm512_setzero_ps();
  int i = 0;
  for (; i + 16 <= w; i += 16) {
    __m512 yv = gelu_vec(_mm512_loadu_ps(x + i), d != NULL, &dv, &amax);
    _mm512_storeu_ps(y + i, yv);
    if (d) _mm512_storeu_ps(d + i, dv);
  }
  if (i < w) {   /* the tail through masked loads and stores (absent lanes read as 0) */
    __mmask16 m = (__mmask16)((1u << (w - i)) - 1);
    __m512 yv = gelu_vec(_mm512_maskz_loadu_ps(m, x + i), d != NULL, &dv, &amax);
    _mm512_mask_storeu_ps(y + i, m, yv);
    if (d) _mm512_mask_storeu_ps(d + i, m, dv);
  }
  if (_mm512_reduce_max_epi32(amax) >= 0x40800000) gelu_wide(y, d, x, w);   /* 4.0f */
}

/* gelu_block as a function that can be passed (it is always inlined where it is called) */
static void gelu_block_out(float *y, float *d, const float *x, int w) { gelu_block(y, d, x, w); }

void ltC_gelu_avx512(char *y, int64_t sy, char *d, int64_t sd, const char *x, int64_t sx,
                     int64_t n) {
  const int64_t es = (int64_t)sizeof(float);
  if (sy == es && sx == es && (!d || sd == es)) {
    float *yf = (float *)y, *df = (float *)d;
    const float *xf = (const float *)x;
    for (int64_t i = 0; i < n; i += GELU_BLOCK) {
      int w = (int)ltC_min(GELU_BLOCK, n - i);
      if (i + GELU_AHEAD + GELU_BLOCK <= n)
        for (int k = 0; k < GELU_BLOCK; k += 16)
          _mm_prefetch((const char *)(xf + i + GELU_AHEAD + k), _MM_HINT_T0);
      if (df)   /* two calls: GCC does not take the test of d out of one loop */
        gelu_block(yf + i, df + i, xf + i, w);
      else
        gelu_block(yf + i, NULL, xf + i, w);
    }
    return;
  }
  ltC_block_strided(gelu_block_out, GELU_BLOCK, y, sy, d, sd, x, sx, n);
}

LT_ISA_END
#endif
