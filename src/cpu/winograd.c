/*
** cpu/winograd.c -- 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3):
** each 2x2 block of output comes from a 4x4 block of input (a tile) in 16 products rather than
** 36. In matrix form (Lavin and Gray), per input channel c and output channel o:
**
**   U = G g G^T  (the 3x3 weight g to 4x4)     V = B^T d B  (each 4x4 tile d of the image)
**   M[xi] = sum over c of U[xi][o][c] V[xi][c][t]   for each of the 16 positions xi: 16 GEMMs
**   y = A^T M A  (each tile's 4x4 M to its 2x2 block of output)
**
** so 2.25 times fewer multiply-adds go through the GEMMs than through im2col's one, for a few
** adds per element on either side. On the small images of CIFAR-sized networks (64 -> 64
** channels on 8 x 8, batch 64) PyTorch's oneDNN runs at the GEMM's peak rate, which an im2col
** convolution cannot beat; this path can. It serves the forward pass and the input gradient
** (the same convolution of dy with the weights turned half a turn and their channels swapped,
** padded by 2 - p); the weight gradient stays with im2col.
**
** The images of a chunk have their tiles side by side (t = sample, tile row, tile column), so
** that the GEMMs are wide on small images. Rows of a plane are transformed along their length
** (even and odd columns apart, so that the loops over tile columns read contiguous floats), then
** the tile rows down the plane. Every element is written by one task in a fixed order and the
** GEMMs do not depend on the thread count, so neither do the bits.
*/
#include <stdatomic.h>
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"

/* tiles of a chunk: V and M then take at most WG_BUDGET floats each (4 MiB) */
#define WG_BUDGET ((int64_t)1 << 20)

bool ltC_winograd_fits(const ltK_conv_geom *g, lt_dtype dt) {
  /* Few channels make the GEMMs thin, and narrow images the loops over a row's tiles short,
  ** so that the transforms cost more than the products save. One thread, Zen 4, forward
  ** (input gradient and weight gradient), im2col against this, best of alternated runs:
  ** 64 -> 64 channels on 16 x 16, batch 64: 13.2 (14.0) -> 9.7 (9.8) ms; on 24 x 24 28.7
  ** (30.0) -> 23.6 (24.5); batch 32 on 32 x 32 28.1 (26.9) -> 19.1 (20.0); 128 -> 128 on
  ** 12 x 12, batch 32: 16.4 (16.5) -> 10.7 (10.5); but 64 -> 64 on 12 x 12 8.2 against 8.3,
  ** on 8 x 8 3.9 against 3.9, 128 -> 128 on 8 x 8 6.7 against 7.0. The input gradient pads by
  ** 2 - p. */
  if (dt != LT_FLOAT32 || g->transposed || g->groups != 1 || g->kh != 3 || g->kw != 3 ||
      g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->ph > 2 || g->pw > 2 ||
      g->C < 32 || g->O < 32 || g->OH < 1 ||
      !(g->OW >= 16 || (g->OW >= 12 && g->C >= 96 && g->O >= 96)))
    return false;
  /* one image's tiles must fit the budget */
  int64_t tiles = ((g->OH + 1) / 2) * ((g->OW + 1) / 2), ch = g->C > g->O ? g->C : g->O;
  return 16 * ch * tiles <= WG_BUDGET;
}

/* ------------------------------------------------------------ transforms */

/* U[xi][o][c] = (G g G^T)[xi] for the 3x3 g of (o, c): w[o][c], or with flip w[c][o] turned
** half a turn (w then has (C, O) channels: the forward weight, seen by the input gradient). */
static void weight_transform(const float *w, int64_t O, int64_t C, bool flip, float *U) {
  for (int64_t o = 0; o < O; o++)
    for (int64_t c = 0; c < C; c++) {
      double g[3][3], t[4][3];
      const float *s = flip ? w + (c * O + o) * 9 : w + (o * C + c) * 9;
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) g[i][j] = flip ? s[(2 - i) * 3 + (2 - j)] : s[i * 3 + j];
      for (int j = 0; j < 3; j++) {
        t[0][j] = g[0][j];
        t[1][j] = 0.5 * (g[0][j] + g[1][j] + g[2][j]);
        t[2][j] = 0.5 * (g[0][j] - g[1][j] + g[2][j]);
        t[3][j] = g[2][j];
      }
      for (int a = 0; a < 4; a++) {
        double u[4] = {t[a][0], 0.5 * (t[a][0] + t[a][1] + t[a][2]),
                       0.5 * (t[a][0] - t[a][1] + t[a][2]), t[a][2]};
        for (int b = 0; b < 4; b++) U[((a * 4 + b) * O + o) * C + c] = (float)u[b];
      }
    }
}

typedef struct wg_job {
  int64_t C, H, W, O, OH, OW, ph, pw;
  int64_t TH, TW, T;   /* tile rows and columns of an image; tiles of the chunk */
  int64_t TWP;         /* TW rounded up to 8: the scratch loops run whole vectors */
  const float *x;      /* the chunk's first image (input) */
  float *y;            /* the chunk's first output plane */
  const float *bias;   /* may be NULL */
  float *V, *M;        /* 16 x (C or O) x T */
  atomic_bool oom;     /* a task found no room for its plane scratch */
} wg_job;

/* Per-task scratch of a plane: a padded input row, the even and odd columns of the padded
** rows, the four row transforms; the output side reuses it for its rows and padded plane. */
static int64_t plane_floats(const wg_job *j) {
  int64_t Hp = 2 * j->TH + 2, K = j->TWP + 8;
  int64_t in = (2 * K) + 2 * Hp * K + 4 * Hp * j->TWP, out = 4 * j->TWP + 4 * j->TH * j->TWP;
  return in > out ? in : out;
}

#define WG_INLINE static inline __attribute__((always_inline))

/* Plane (n, c) of the chunk's input: its tiles into V[xi][c][t]. */
WG_INLINE void input_plane(const wg_job *j, int64_t n, int64_t c, float *buf) {
  const int64_t TH = j->TH, TW = j->TW, TWP = j->TWP, Hp = 2 * TH + 2, K = TWP + 8, Wp = 2 * K;
  const float *img = j->x + (n * j->C + c) * j->H * j->W;
  float *P = buf, *E = P + Wp, *Od = E + Hp * K, *R = Od + Hp * K;
  /* padded rows r (image row r - ph), split: E[r][k] = column 2k, Od[r][k] = column 2k + 1 */
  int64_t lo = j->pw, hi = j->pw + j->W < Wp ? j->pw + j->W : Wp;   /* image columns in P */
  for (int64_t r = 0; r < Hp; r++) {
    int64_t ir = r - j->ph;
    float *restrict er = E + r * K, *restrict orow = Od + r * K;
    if (ir < 0 || ir >= j->H) {
      for (int64_t k = 0; k < K; k++) er[k] = orow[k] = 0;
      continue;
    }
    const float *src = img + ir * j->W;
    for (int64_t q = 0; q < lo; q++) P[q] = 0;
    for (int64_t q = lo; q < hi; q++) P[q] = src[q - lo];
    for (int64_t q = hi; q < Wp; q++) P[q] = 0;
#pragma GCC ivdep
    for (int64_t k = 0; k < K; k++) {
      er[k] = P[2 * k];
      orow[k] = P[2 * k + 1];
    }
  }
  /* along each row: R_k[r][tw] = (d B)[k] of the row's 4 columns from 2 tw */
  float *R0 = R, *R1 = R0 + Hp * TWP, *R2 = R1 + Hp * TWP, *R3 = R2 + Hp * TWP;
  for (int64_t r = 0; r < Hp; r++) {
    const float *er = E + r * K, *orow = Od + r * K;
    float *restrict r0 = R0 + r * TWP, *restrict r1 = R1 + r * TWP;
    float *restrict r2 = R2 + r * TWP, *restrict r3 = R3 + r * TWP;
#pragma GCC ivdep
    for (int64_t tw = 0; tw < TWP; tw++) {
      float p0 = er[tw], p1 = orow[tw], p2 = er[tw + 1], p3 = orow[tw + 1];
      r0[tw] = p0 - p2;
      r1[tw] = p1 + p2;
      r2[tw] = p2 - p1;
      r3[tw] = p1 - p3;
    }
  }
  /* down each tile row: V[a*4 + k] = (B^T R_k)[a] of rows 2 th .. 2 th + 3 */
  const int64_t xs = j->C * j->T;   /* V's stride from one xi to the next */
  float *v = j->V + c * j->T + n * TH * TW;
  const float *Rk[4] = {R0, R1, R2, R3};
  for (int64_t th = 0; th < TH; th++) {
    /* whole vectors run on into the next tile rows' columns, which they then overwrite; a
    ** row too near the plane's end stops at its own */
    int64_t nw = (TH - th) * TW < TWP ? TW : TWP;
    for (int k = 0; k < 4; k++) {
      const float *q0 = Rk[k] + 2 * th * TWP, *q1 = q0 + TWP, *q2 = q1 + TWP, *q3 = q2 + TWP;
      float *restrict v0 = v + k * xs + th * TW, *restrict v1 = v0 + 4 * xs;
      float *restrict v2 = v1 + 4 * xs, *restrict v3 = v2 + 4 * xs;
#pragma GCC ivdep
      for (int64_t tw = 0; tw < nw; tw++) {
        v0[tw] = q0[tw] - q2[tw];
        v1[tw] = q1[tw] + q2[tw];
        v2[tw] = q2[tw] - q1[tw];
        v3[tw] = q1[tw] - q3[tw];
      }
    }
  }
}

/* Plane (n, o) of the chunk's output: y = A^T M A of each tile, + bias. */
WG_INLINE void output_plane(const wg_job *j, int64_t n, int64_t o, float *buf) {
  const int64_t TH = j->TH, TW = j->TW, TWP = j->TWP, Wp = 2 * TWP, ms = j->O * j->T;
  float *restrict ye0 = buf, *restrict yo0 = ye0 + TWP, *restrict ye1 = yo0 + TWP;
  float *restrict yo1 = ye1 + TWP, *restrict Y = yo1 + TWP;   /* Y: 2 TH x 2 TWP */
  const float *m = j->M + o * j->T + n * TH * TW;
  for (int64_t th = 0; th < TH; th++) {
    const float *mt = m + th * TW;
    /* whole vectors: the columns past TW read the next tiles of M (M has TWP to spare at its
    ** end) into columns of Y that are not copied out */
#pragma GCC ivdep
    for (int64_t tw = 0; tw < TWP; tw++) {
      float s0[4], s1[4];
      for (int q = 0; q < 4; q++) {
        float a = mt[q * ms + tw], b = mt[(4 + q) * ms + tw];
        float c = mt[(8 + q) * ms + tw], d = mt[(12 + q) * ms + tw];
        s0[q] = a + b + c;
        s1[q] = b - c - d;
      }
      ye0[tw] = s0[0] + s0[1] + s0[2];
      yo0[tw] = s0[1] - s0[2] - s0[3];
      ye1[tw] = s1[0] + s1[1] + s1[2];
      yo1[tw] = s1[1] - s1[2] - s1[3];
    }
    float *y0 = Y + 2 * th * Wp, *y1 = y0 + Wp;
#pragma GCC ivdep
    for (int64_t tw = 0; tw < TWP; tw++) {
      y0[2 * tw] = ye0[tw];
      y0[2 * tw + 1] = yo0[tw];
      y1[2 * tw] = ye1[tw];
      y1[2 * tw + 1] = yo1[tw];
    }
  }
  float bv = j->bias ? j->bias[o] : 0;
  float *dst = j->y + (n * j->O + o) * j->OH * j->OW;
  for (int64_t r = 0; r < j->OH; r++) {
    float *restrict d = dst + r * j->OW;
    const float *yr = Y + r * Wp;
#pragma GCC ivdep
    for (int64_t q = 0; q < j->OW; q++) d[q] = yr[q] + bv;
  }
}

/* Task ranges over (sample, channel) planes, with one scratch per range. */
#define WG_RANGES(SUFFIX)                                                    \
  static void input_planes##SUFFIX(int64_t b, int64_t e, void *ud) {        \
    wg_job *j = ud;                                                          \
    size_t got, need = (size_t)plane_floats(j) * sizeof(float);              \
    float *buf = ltB_cache_alloc(need, &got);                                \
    if (!buf) {                                                              \
      atomic_store(&j->oom, true);                                           \
      return;                                                                \
    }                                                                        \
    for (int64_t t = b; t < e; t++) input_plane(j, t / j->C, t % j->C, buf); \
    ltB_cache_free(buf, need);                                               \
  }                                                                          \
  static void output_planes##SUFFIX(int64_t b, int64_t e, void *ud) {       \
    wg_job *j = ud;                                                          \
    size_t got, need = (size_t)plane_floats(j) * sizeof(float);              \
    float *buf = ltB_cache_alloc(need, &got);                                \
    if (!buf) {                                                              \
      atomic_store(&j->oom, true);                                           \
      return;                                                                \
    }                                                                        \
    for (int64_t t = b; t < e; t++) output_plane(j, t / j->O, t % j->O, buf); \
    ltB_cache_free(buf, need);                                               \
  }

WG_RANGES(_base)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
WG_RANGES(_avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
WG_RANGES(_avx512)
LT_ISA_END
#endif

static void ranges_for(ltK_range_fn *in, ltK_range_fn *out) {
  *in = input_planes_base;
  *out = output_planes_base;
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512:
      *in = input_planes_avx512;
      *out = output_planes_avx512;
      break;
    case LT_ISA_AVX2:
      *in = input_planes_avx2;
      *out = output_planes_avx2;
      break;
    default: break;
  }
#endif
}

/* ------------------------------------------------------------ the driver */

int ltC_winograd_conv(lt_ctx *ctx, const char *name, int64_t N, int64_t C, int64_t H,
                      int64_t W, int64_t O, int64_t ph, int64_t pw, const float *x,
                      const float *w, bool flip, const float *bias, float *y) {
  wg_job j = {.C = C, .H = H, .W = W, .O = O, .OH = H + 2 * ph - 2, .OW = W + 2 * pw - 2,
              .ph = ph, .pw = pw, .bias = bias, .oom = false};
  j.TH = (j.OH + 1) / 2;
  j.TW = (j.OW + 1) / 2;
  j.TWP = (j.TW + 7) / 8 * 8;
  const int64_t TT = j.TH * j.TW, ch = C > O ? C : O;
  /* samples per chunk: as many as the budget holds (at least one; ltC_winograd_fits) */
  int64_t nb = WG_BUDGET / (16 * ch * TT);
  if (nb < 1) nb = 1;
  if (nb > N) nb = N;
  int64_t nU = 16 * O * C, nV = 16 * C * nb * TT, nM = 16 * O * nb * TT + j.TWP;
  size_t got, need = (size_t)(nU + nV + nM) * sizeof(float);
  float *U = ltB_cache_alloc(need, &got);
  if (!U)
    return ltB_fail(ctx, "%s: out of memory for a %lld-element work buffer", name,
                    (long long)(nU + nV + nM));
  j.V = U + nU;
  j.M = j.V + nV;
  weight_transform(w, O, C, flip, U);
  int nt = ctx->num_threads < 1 ? 1 : ctx->num_threads;
  ltK_range_fn in_fn, out_fn;
  ranges_for(&in_fn, &out_fn);
  ltC_blas_single();
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    int64_t cnt = N - n0 < nb ? N - n0 : nb;
    j.T = cnt * TT;
    j.x = x + n0 * C * H * W;
    j.y = y + n0 * O * j.OH * j.OW;
    ltB_parallel_for(ctx, cnt * C, ltC_grain(16 * TT), in_fn, &j);
    for (int xi = 0; xi < 16; xi++)
      ltC_blas_gemm(ctx, nt, LT_FLOAT32, false, false, O, j.T, C, 1.0, U + xi * O * C, C,
                    j.V + xi * C * j.T, j.T, 0.0, j.M + xi * O * j.T, j.T);
    ltB_parallel_for(ctx, cnt * O, ltC_grain(16 * TT), out_fn, &j);
  }
  ltB_cache_free(U, need);
  if (atomic_load(&j.oom))
    return ltB_fail(ctx, "%s: out of memory for a plane's work buffer", name);
  return 0;
}
