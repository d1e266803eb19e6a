/*
** cpu/winograd.c -- 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3):
** each 2x2 block of output comes from a 4x4 block of input (a tile) in 16 products rather than
** 36. In matrix form (Lavin and Gray), per input channel c and output channel o:
**
**   U = G g G^T  (the 3x3 weight g to 4x4)     V = B^T d B  (each 4x4 tile d of the image)
**   M[xi] = sum over c of V[xi][t][c] U[xi][o][c]   for each of the 16 positions xi: 16 GEMMs
**   y = A^T M A  (each tile's 4x4 M to its 2x2 block of output)
**
** so 2.25 times fewer multiply-adds go through the GEMMs than through im2col's one, for a few
** adds per element on either side. On the small images of CIFAR-sized networks PyTorch's
** oneDNN runs at the GEMM's peak rate, which an im2col convolution cannot beat; this path
** does. It serves the forward pass and the input gradient (the same convolution of dy with the
** weights turned half a turn and their channels swapped, padded by 2 - p); the weight gradient
** stays with im2col.
**
** The transforms run with the channels last, so that their loops are as long as the channel
** count whatever the image size (with the planes' own layout, an 8 x 8 image gave loops of 4
** tiles, and the transforms took twice the GEMMs' time): a chunk's input is padded and turned
** channels-last first, and its output turned back last, eight channels at a time. The tiles of
** a chunk's samples lie side by side (t = sample, tile row, tile column), so that the GEMMs are
** tall on small images. Every element is written by one task in a fixed order and the GEMMs do
** not depend on the thread count, so neither do the bits.
*/
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"

/* floats of a chunk's buffers (4 MiB): as many samples as fit go together (16 MiB chunks ran
** 5-10% slower); one sample may take up to WG_SAMPLE_MAX (16 MiB) alone */
#define WG_BUDGET ((int64_t)1 << 20)
#define WG_SAMPLE_MAX ((int64_t)1 << 22)

/* The floats one sample takes in a chunk's buffers: V and M (16 per tile and channel), the
** padded input and the output tiles (ltC_winograd_conv). */
static int64_t sample_floats(int64_t TT, int64_t Hp, int64_t Wp, int64_t C, int64_t O) {
  return 16 * TT * (C + O) + Hp * Wp * C + 4 * TT * O;
}

bool ltC_winograd_fits(const ltK_conv_geom *g, lt_dtype dt) {
  /* Fewer than 16 channels on either side make the GEMMs too thin to pay for the transforms
  ** (one thread, Zen 4, forward: 3 -> 16 on 32 x 32, batch 64, 1.1 ms by im2col against 3.1;
  ** 16 -> 8 2.7 against 3.7). The input gradient pads by 2 - p. */
  if (dt != LT_FLOAT32 || g->transposed || g->groups != 1 || g->kh != 3 || g->kw != 3 ||
      g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->ph > 2 || g->pw > 2 ||
      g->C < 16 || g->O < 16 || g->OH < 1 || g->OW < 1)
    return false;
  /* one sample's buffers must fit a chunk (larger images stay with im2col) */
  int64_t TT = ((g->OH + 1) / 2) * ((g->OW + 1) / 2);
  int64_t Hp = 2 * ((g->OH + 1) / 2) + 2, Wp = 2 * ((g->OW + 1) / 2) + 2;
  return sample_floats(TT, Hp, Wp, g->C, g->O) <= WG_SAMPLE_MAX;
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
  int64_t TH, TW, TT;  /* tile rows and columns of an image, tiles of an image */
  int64_t Hp, Wp;      /* the padded input: 2 TH + 2 by 2 TW + 2 */
  int64_t T;           /* tiles of the chunk */
  const float *x;      /* the chunk's first image (input) */
  float *y;            /* the chunk's first output plane */
  const float *bias;   /* may be NULL */
  float *X;            /* the chunk's input padded, channels last: (cnt, Hp, Wp, C) */
  float *V;            /* (16, T, C) */
  float *M;            /* (16, T, O) */
  float *Y;            /* the chunk's output in tiles, channels last: (cnt, 2 TH, 2 TW, O) */
} wg_job;

#define WG_INLINE static inline __attribute__((always_inline))

/* Task (n, r): row r of sample n's padded input, channels last. Blocks of 8 channels read 8
** image rows along and write 8 floats per column. */
WG_INLINE void pad_row(const wg_job *j, int64_t n, int64_t r) {
  const int64_t C = j->C, Wp = j->Wp, ir = r - j->ph;
  float *dst = j->X + (n * j->Hp + r) * Wp * C;
  if (ir < 0 || ir >= j->H) {
    memset(dst, 0, (size_t)(Wp * C) * sizeof(float));
    return;
  }
  int64_t lo = j->pw, hi = j->pw + j->W < Wp ? j->pw + j->W : Wp;
  memset(dst, 0, (size_t)(lo * C) * sizeof(float));
  memset(dst + hi * C, 0, (size_t)((Wp - hi) * C) * sizeof(float));
  const int64_t HW = j->H * j->W;
  const float *src = j->x + n * C * HW + ir * j->W - lo;
  int64_t c0 = 0;
  for (; c0 + 8 <= C; c0 += 8) {
    const float *s = src + c0 * HW;
    for (int64_t q = lo; q < hi; q++) {
      float *d = dst + q * C + c0;
      for (int k = 0; k < 8; k++) d[k] = s[k * HW + q];
    }
  }
  for (; c0 < C; c0++)
    for (int64_t q = lo; q < hi; q++) dst[q * C + c0] = src[c0 * HW + q];
}

/* Tile t of the chunk: V[xi][t][c] = (B^T d B)[xi] for each channel c, d its 4x4 input. */
WG_INLINE void input_tile(const wg_job *j, int64_t t) {
  const int64_t C = j->C, T = j->T, n = t / j->TT, th = t % j->TT / j->TW, tw = t % j->TW;
  const int64_t rs = j->Wp * C;   /* from one padded row to the next */
  const float *d = j->X + ((n * j->Hp + 2 * th) * j->Wp + 2 * tw) * C;
  float *v = j->V + t * C;
  const int64_t xs = T * C;       /* from one xi to the next */
#pragma GCC ivdep
  for (int64_t c = 0; c < C; c++) {
    float r[4][4];
    for (int i = 0; i < 4; i++) {   /* along the row: d B */
      const float *p = d + i * rs + c;
      float p0 = p[0], p1 = p[C], p2 = p[2 * C], p3 = p[3 * C];
      r[i][0] = p0 - p2;
      r[i][1] = p1 + p2;
      r[i][2] = p2 - p1;
      r[i][3] = p1 - p3;
    }
    for (int k = 0; k < 4; k++) {   /* down the columns: B^T (d B) */
      v[(0 * 4 + k) * xs + c] = r[0][k] - r[2][k];
      v[(1 * 4 + k) * xs + c] = r[1][k] + r[2][k];
      v[(2 * 4 + k) * xs + c] = r[2][k] - r[1][k];
      v[(3 * 4 + k) * xs + c] = r[1][k] - r[3][k];
    }
  }
}

/* Tile t of the chunk: its 2x2 of output for each channel o, A^T M A, into Y. */
WG_INLINE void output_tile(const wg_job *j, int64_t t) {
  const int64_t O = j->O, T = j->T, n = t / j->TT, th = t % j->TT / j->TW, tw = t % j->TW;
  const int64_t ys = 2 * j->TW * O;   /* from one row of Y to the next */
  const float *m = j->M + t * O;
  const int64_t ms = T * O;
  float *y = j->Y + ((n * 2 * j->TH + 2 * th) * 2 * j->TW + 2 * tw) * O;
#pragma GCC ivdep
  for (int64_t o = 0; o < O; o++) {
    float s0[4], s1[4];
    for (int q = 0; q < 4; q++) {
      float a = m[q * ms + o], b = m[(4 + q) * ms + o];
      float c = m[(8 + q) * ms + o], d = m[(12 + q) * ms + o];
      s0[q] = a + b + c;
      s1[q] = b - c - d;
    }
    y[o] = s0[0] + s0[1] + s0[2];
    y[O + o] = s0[1] - s0[2] - s0[3];
    y[ys + o] = s1[0] + s1[1] + s1[2];
    y[ys + O + o] = s1[1] - s1[2] - s1[3];
  }
}

/* Task (n, o-block): the output planes of sample n for channels o0 .. o0 + 7 from Y, + bias. */
WG_INLINE void unpad_block(const wg_job *j, int64_t n, int64_t o0) {
  const int64_t O = j->O, OH = j->OH, OW = j->OW, Wy = 2 * j->TW;
  const int64_t nk = O - o0 < 8 ? O - o0 : 8;
  const float *src = j->Y + n * 2 * j->TH * Wy * O + o0;
  float *dst = j->y + (n * O + o0) * OH * OW;
  float bv[8];
  for (int k = 0; k < nk; k++) bv[k] = j->bias ? j->bias[o0 + k] : 0;
  for (int64_t r = 0; r < OH; r++)
    for (int64_t q = 0; q < OW; q++) {
      const float *s = src + (r * Wy + q) * O;
      for (int k = 0; k < nk; k++) dst[k * OH * OW + r * OW + q] = s[k] + bv[k];
    }
}

/* The four passes over task ranges, one set per instruction set level. */
#define WG_RANGES(SFX)                                                                    \
  static void pad_rows##SFX(int64_t b, int64_t e, void *ud) {                             \
    const wg_job *j = ud;                                                                 \
    for (int64_t t = b; t < e; t++) pad_row(j, t / j->Hp, t % j->Hp);                     \
  }                                                                                       \
  static void input_tiles##SFX(int64_t b, int64_t e, void *ud) {                          \
    for (int64_t t = b; t < e; t++) input_tile(ud, t);                                    \
  }                                                                                       \
  static void output_tiles##SFX(int64_t b, int64_t e, void *ud) {                         \
    for (int64_t t = b; t < e; t++) output_tile(ud, t);                                   \
  }                                                                                       \
  static void unpad_blocks##SFX(int64_t b, int64_t e, void *ud) {                         \
    const wg_job *j = ud;                                                                 \
    int64_t nb8 = (j->O + 7) / 8;                                                         \
    for (int64_t t = b; t < e; t++) unpad_block(j, t / nb8, t % nb8 * 8);                 \
  }                                                                                       \
  static const ltK_range_fn passes##SFX[4] = {pad_rows##SFX, input_tiles##SFX,            \
                                              output_tiles##SFX, unpad_blocks##SFX};

WG_RANGES(_base)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
WG_RANGES(_avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
WG_RANGES(_avx512)
LT_ISA_END
#endif

static const ltK_range_fn *passes_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return passes_avx512;
    case LT_ISA_AVX2: return passes_avx2;
    default: break;
  }
#endif
  return passes_base;
}

/* ------------------------------------------------------------ the driver */

int ltC_winograd_conv(lt_ctx *ctx, const char *name, int64_t N, int64_t C, int64_t H,
                      int64_t W, int64_t O, int64_t ph, int64_t pw, const float *x,
                      const float *w, bool flip, const float *bias, float *y) {
  wg_job j = {.C = C, .H = H, .W = W, .O = O, .OH = H + 2 * ph - 2, .OW = W + 2 * pw - 2,
              .ph = ph, .pw = pw, .bias = bias};
  j.TH = (j.OH + 1) / 2;
  j.TW = (j.OW + 1) / 2;
  j.TT = j.TH * j.TW;
  j.Hp = 2 * j.TH + 2;
  j.Wp = 2 * j.TW + 2;
  /* floats per sample of the chunk's buffers */
  const int64_t per = sample_floats(j.TT, j.Hp, j.Wp, C, O);
  int64_t nb = WG_BUDGET / per;   /* samples per chunk: at least one (ltC_winograd_fits) */
  if (nb < 1) nb = 1;
  if (nb > N) nb = N;
  const int64_t nU = 16 * O * C, nX = nb * j.Hp * j.Wp * C, nV = 16 * nb * j.TT * C;
  const int64_t nM = 16 * nb * j.TT * O, nY = nb * 4 * j.TT * O, total = nU + nX + nV + nM + nY;
  size_t got, need = (size_t)total * sizeof(float);
  float *U = ltB_cache_alloc(need, &got);
  if (!U)
    return ltB_fail(ctx, "%s: out of memory for a %lld-element work buffer", name,
                    (long long)total);
  j.X = U + nU;
  j.V = j.X + nX;
  j.M = j.V + nV;
  j.Y = j.M + nM;
  weight_transform(w, O, C, flip, U);
  const ltK_range_fn *pass = passes_for_isa();
  int nt = ctx->num_threads < 1 ? 1 : ctx->num_threads;
  ltC_blas_single();
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    int64_t cnt = N - n0 < nb ? N - n0 : nb;
    j.T = cnt * j.TT;
    j.x = x + n0 * C * H * W;
    j.y = y + n0 * O * j.OH * j.OW;
    ltB_parallel_for(ctx, cnt * j.Hp, ltC_grain(j.Wp * C), pass[0], &j);
    ltB_parallel_for(ctx, j.T, ltC_grain(32 * C), pass[1], &j);
    /* M[xi] (T, O) = V[xi] (T, C) @ U[xi]^T */
    for (int xi = 0; xi < 16; xi++)
      ltC_blas_gemm(ctx, nt, LT_FLOAT32, false, true, j.T, O, C, 1.0, j.V + xi * j.T * C, C,
                    U + xi * O * C, C, 0.0, j.M + xi * j.T * O, O);
    ltB_parallel_for(ctx, j.T, ltC_grain(32 * O), pass[2], &j);
    ltB_parallel_for(ctx, cnt * ((O + 7) / 8), ltC_grain(8 * j.OH * j.OW), pass[3], &j);
  }
  ltB_cache_free(U, need);
  return 0;
}
