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
** does. It serves the forward pass, the input gradient (the same convolution of dy with the
** weights turned half a turn and their channels swapped, padded by 2 - p) and the weight
** gradient (sum over tiles of (A dy A^T)(B^T d B), then G^T dU G).
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
#ifdef LT_ISA_DISPATCH
#include <immintrin.h>
#endif

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
  if (dt != LT_FLOAT32 || g->groups != 1 || g->kh != 3 || g->kw != 3 ||
      g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1 || g->ph > 2 || g->pw > 2 ||
      g->C < 16 || g->O < 16 || g->OH < 1 || g->OW < 1)
    return false;
  /* the sizes this path computes: no zeros after the image beyond ph, pw (the C API's
  ** padding_extra, a transposed convolution's output_padding) */
  if (g->OH != g->H + 2 * g->ph - 2 || g->OW != g->W + 2 * g->pw - 2) return false;
  /* one sample's buffers must fit a chunk, either way round (the input gradient and a
  ** transposed convolution go from the column side to the image side), and so must the
  ** transformed weights; larger ones stay with im2col */
  int64_t th = (g->OH + 1) / 2, tw = (g->OW + 1) / 2, ih = (g->H + 1) / 2, iw = (g->W + 1) / 2;
  int64_t fwd = sample_floats(th * tw, 2 * th + 2, 2 * tw + 2, g->C, g->O);
  int64_t back = sample_floats(ih * iw, 2 * ih + 2, 2 * iw + 2, g->O, g->C);
  return fwd <= WG_SAMPLE_MAX && back <= WG_SAMPLE_MAX && 16 * g->O * g->C <= WG_SAMPLE_MAX;
}

/* ------------------------------------------------------------ transforms */

/* The weights' transforms, both ways, over output channels o in tasks. */
typedef struct wt_job {
  const float *src;
  float *dst;
  int64_t O, C;
  bool flip;
  bool ct;   /* weight_rows: U as (16, C, O), for the thin products */
} wt_job;

/* U[xi][o][c] = (G g G^T)[xi] for the 3x3 g of (o, c): w[o][c], or with flip w[c][o] turned
** half a turn (w then has (C, O) channels: the forward weight, seen by the input gradient). */
static void weight_rows(int64_t ob, int64_t oe, void *ud) {
  const wt_job *j = ud;
  const int64_t O = j->O, C = j->C;
  for (int64_t o = ob; o < oe; o++)
    for (int64_t c = 0; c < C; c++) {
      double g[3][3], t[4][3];
      const float *s = j->flip ? j->src + (c * O + o) * 9 : j->src + (o * C + c) * 9;
      for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++) g[i][k] = j->flip ? s[(2 - i) * 3 + (2 - k)] : s[i * 3 + k];
      for (int k = 0; k < 3; k++) {
        t[0][k] = g[0][k];
        t[1][k] = 0.5 * (g[0][k] + g[1][k] + g[2][k]);
        t[2][k] = 0.5 * (g[0][k] - g[1][k] + g[2][k]);
        t[3][k] = g[2][k];
      }
      for (int a = 0; a < 4; a++) {
        double u[4] = {t[a][0], 0.5 * (t[a][0] + t[a][1] + t[a][2]),
                       0.5 * (t[a][0] - t[a][1] + t[a][2]), t[a][2]};
        for (int b = 0; b < 4; b++)
          j->dst[j->ct ? ((a * 4 + b) * C + c) * O + o : ((a * 4 + b) * O + o) * C + c] = (float)u[b];
      }
    }
}

/* The weight gradient's last step: dw[o][c] = G^T dU[o][c] G, dU (16, O, C) in src, dw (O,
** C, 3, 3) in dst. */
static void weight_grad_rows(int64_t ob, int64_t oe, void *ud) {
  const wt_job *j = ud;
  const int64_t O = j->O, C = j->C;
  for (int64_t o = ob; o < oe; o++)
    for (int64_t c = 0; c < C; c++) {
      double u[4][4], h[3][4];
      for (int x = 0; x < 16; x++) u[x / 4][x % 4] = j->src[(x * O + o) * C + c];
      for (int b = 0; b < 4; b++) {
        h[0][b] = u[0][b] + 0.5 * (u[1][b] + u[2][b]);
        h[1][b] = 0.5 * (u[1][b] - u[2][b]);
        h[2][b] = 0.5 * (u[1][b] + u[2][b]) + u[3][b];
      }
      float *g = j->dst + (o * C + c) * 9;
      for (int i = 0; i < 3; i++) {
        g[i * 3 + 0] = (float)(h[i][0] + 0.5 * (h[i][1] + h[i][2]));
        g[i * 3 + 1] = (float)(0.5 * (h[i][1] - h[i][2]));
        g[i * 3 + 2] = (float)(0.5 * (h[i][1] + h[i][2]) + h[i][3]);
      }
    }
}

static void weights_run(lt_ctx *ctx, ltK_range_fn fn, const float *src, float *dst, int64_t O,
                        int64_t C, bool flip, bool ct) {
  wt_job j = {src, dst, O, C, flip, ct};
  ltB_parallel_for(ctx, O, ltC_grain(64 * C), fn, &j);
}

typedef struct wg_job {
  int64_t C, H, W, O, OH, OW, ph, pw;
  int64_t TH, TW, TT;  /* tile rows and columns of an image, tiles of an image */
  int64_t Hp, Wp;      /* the padded input: 2 TH + 2 by 2 TW + 2 */
  int64_t T;           /* tiles of the chunk */
  const float *x;      /* the chunk's first image (input) */
  float *y;            /* the chunk's first output plane */
  const float *bias;   /* may be NULL */
  const float *dy;     /* the weight gradient's: the chunk's first dy plane */
  float *X;            /* the chunk's input padded, channels last: (cnt, Hp, Wp, C) */
  float *V;            /* (16, T, C) */
  float *M;            /* (16, T, O); the weight gradient's transformed dy */
  float *Y;            /* the chunk's output in tiles, channels last: (cnt, 2 TH, 2 TW, O); the
                       ** weight gradient's dy */
  const float *U;      /* fused_block's: the weights (16, C, O), and its products */
  ltC_thin_nn_fn nn;
} wg_job;

#define WG_INLINE static inline __attribute__((always_inline))

/* dst[i * ds + k] = src[k * ss + i] + add[i] for i, k < 8 (add may be NULL): an 8 x 8 block
** of floats turned over, in registers from AVX2 up (the element loops took a tenth of a 64 ->
** 64 convolution's step on 8 x 8 images at two threads). */
static void turn8_scalar(float *dst, int64_t ds, const float *src, int64_t ss, const float *add) {
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 8; k++) dst[i * ds + k] = src[k * ss + i] + (add ? add[i] : 0);
}
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static void turn8_avx2(float *dst, int64_t ds, const float *src, int64_t ss, const float *add) {
  __m256 r[8], t[8], u[8];
  for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(src + k * ss);
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; i++) {
    __m256 lo = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    __m256 hi = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    if (add) {
      lo = _mm256_add_ps(lo, _mm256_set1_ps(add[i]));
      hi = _mm256_add_ps(hi, _mm256_set1_ps(add[i + 4]));
    }
    _mm256_storeu_ps(dst + i * ds, lo);
    _mm256_storeu_ps(dst + (i + 4) * ds, hi);
  }
}
LT_ISA_END
#endif

typedef void (*turn8_fn)(float *dst, int64_t ds, const float *src, int64_t ss, const float *add);

/* Row ir of an image of Cn channels (H x W planes) as one row of a channels-last buffer Wd
** columns wide that holds the image's columns from column `off`, zeros around them (a row ir
** outside the image is all zeros). Blocks of 8 channels read 8 image rows along and write 8
** floats per column. */
WG_INLINE void row_to_channels_last(const float *img, int64_t Cn, int64_t H, int64_t W,
                                    int64_t ir, float *dst, int64_t Wd, int64_t off,
                                    turn8_fn turn8) {
  if (ir < 0 || ir >= H) {
    memset(dst, 0, (size_t)(Wd * Cn) * sizeof(float));
    return;
  }
  int64_t lo = off, hi = off + W < Wd ? off + W : Wd;
  memset(dst, 0, (size_t)(lo * Cn) * sizeof(float));
  memset(dst + hi * Cn, 0, (size_t)((Wd - hi) * Cn) * sizeof(float));
  const int64_t HW = H * W;
  const float *src = img + ir * W - lo;
  int64_t c0 = 0;
  for (; c0 + 8 <= Cn; c0 += 8) {
    const float *s = src + c0 * HW;
    int64_t q = lo;
    for (; q + 8 <= hi; q += 8) turn8(dst + q * Cn + c0, Cn, s + q, HW, NULL);
    for (; q < hi; q++) {
      float *d = dst + q * Cn + c0;
      for (int k = 0; k < 8; k++) d[k] = s[k * HW + q];
    }
  }
  for (; c0 < Cn; c0++)
    for (int64_t q = lo; q < hi; q++) dst[q * Cn + c0] = src[c0 * HW + q];
}

/* Task (n, r): row r of sample n's padded input X. */
WG_INLINE void pad_row(const wg_job *j, int64_t n, int64_t r, turn8_fn turn8) {
  row_to_channels_last(j->x + n * j->C * j->H * j->W, j->C, j->H, j->W, r - j->ph,
                       j->X + (n * j->Hp + r) * j->Wp * j->C, j->Wp, j->pw, turn8);
}

/* Task (n, r): row r of sample n's dy, channels last, into Y (2 TH x 2 TW, zeros past it). */
WG_INLINE void dy_row(const wg_job *j, int64_t n, int64_t r, turn8_fn turn8) {
  const int64_t Wy = 2 * j->TW;
  row_to_channels_last(j->dy + n * j->O * j->OH * j->OW, j->O, j->OH, j->OW, r,
                       j->Y + (n * 2 * j->TH + r) * Wy * j->O, Wy, 0, turn8);
}

/* Tile t of the chunk: M[xi][t][o] = (A e A^T)[xi] for each channel o, e its 2x2 of dy (the
** weight gradient's counterpart of the output transform). */
WG_INLINE void dy_tile(const wg_job *j, int64_t t) {
  const int64_t O = j->O, T = j->T, n = t / j->TT, th = t % j->TT / j->TW, tw = t % j->TW;
  const int64_t ys = 2 * j->TW * O;
  const float *e = j->Y + ((n * 2 * j->TH + 2 * th) * 2 * j->TW + 2 * tw) * O;
  float *q = j->M + t * O;
  const int64_t ms = T * O;
#pragma GCC ivdep
  for (int64_t o = 0; o < O; o++) {
    float a[2][4];
    for (int r = 0; r < 2; r++) {   /* along the row: e A^T */
      float e0 = e[r * ys + o], e1 = e[r * ys + O + o];
      a[r][0] = e0;
      a[r][1] = e0 + e1;
      a[r][2] = e0 - e1;
      a[r][3] = -e1;
    }
    for (int k = 0; k < 4; k++) {   /* down the columns: A (e A^T) */
      q[(0 * 4 + k) * ms + o] = a[0][k];
      q[(1 * 4 + k) * ms + o] = a[0][k] + a[1][k];
      q[(2 * 4 + k) * ms + o] = a[0][k] - a[1][k];
      q[(3 * 4 + k) * ms + o] = -a[1][k];
    }
  }
}

/* Tile t of the chunk: v[xi * xs + c] = (B^T d B)[xi] for each channel c, d its 4x4 input
** (v = V + t C and xs = T C: the tile's row of each V[xi]). */
WG_INLINE void input_tile(const wg_job *j, int64_t t, float *v, int64_t xs) {
  const int64_t C = j->C, n = t / j->TT, th = t % j->TT / j->TW, tw = t % j->TW;
  const int64_t rs = j->Wp * C;   /* from one padded row to the next */
  const float *d = j->X + ((n * j->Hp + 2 * th) * j->Wp + 2 * tw) * C;
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

/* Tile t of the chunk: its 2x2 of output for each channel o, A^T m A, into Y, from m[xi * ms
** + o] (m = M + t O and ms = T O: the tile's row of each M[xi]). */
WG_INLINE void output_tile(const wg_job *j, int64_t t, const float *m, int64_t ms) {
  const int64_t O = j->O, n = t / j->TT, th = t % j->TT / j->TW, tw = t % j->TW;
  const int64_t ys = 2 * j->TW * O;   /* from one row of Y to the next */
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

/* Block k of FUSED tiles of the chunk, the thin products' way (both sides at most
** LT_THIN_SIDE channels): its V and M rows in a buffer of the stack, not in the chunk's V and
** M, so that they never leave L1 between the input transform, the 16 products and the output
** transform (through the chunk's buffers, 1.5 MB each for 16 channels on 32 x 32, they went to
** L3 and back twice). */
#define FUSED 8
#define LT_THIN_SIDE 64
WG_INLINE void fused_block(const wg_job *j, int64_t k) {
  float v[16 * FUSED * LT_THIN_SIDE], m[16 * FUSED * LT_THIN_SIDE];
  const int64_t C = j->C, O = j->O, t0 = k * FUSED;
  const int64_t nt = j->T - t0 < FUSED ? j->T - t0 : FUSED;
  for (int64_t t = 0; t < nt; t++) input_tile(j, t0 + t, v + t * C, FUSED * C);
  for (int xi = 0; xi < 16; xi++)
    j->nn(nt, C, O, v + xi * FUSED * C, j->U + xi * C * O, m + xi * FUSED * O);
  for (int64_t t = 0; t < nt; t++) output_tile(j, t0 + t, m + t * O, FUSED * O);
}

/* Task (n, o-block): the output planes of sample n for channels o0 .. o0 + 7 from Y, + bias. */
WG_INLINE void unpad_block(const wg_job *j, int64_t n, int64_t o0, turn8_fn turn8) {
  const int64_t O = j->O, OH = j->OH, OW = j->OW, Wy = 2 * j->TW;
  const int64_t nk = O - o0 < 8 ? O - o0 : 8;
  const float *src = j->Y + n * 2 * j->TH * Wy * O + o0;
  float *dst = j->y + (n * O + o0) * OH * OW;
  float bv[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int k = 0; k < nk; k++) bv[k] = j->bias ? j->bias[o0 + k] : 0;
  for (int64_t r = 0; r < OH; r++) {
    int64_t q = 0;
    /* 8 pixels of 8 channels at a time: each channel's 8 pixels plus its bias */
    if (nk == 8)
      for (; q + 8 <= OW; q += 8) turn8(dst + r * OW + q, OH * OW, src + (r * Wy + q) * O, O, bv);
    for (; q < OW; q++) {
      const float *s = src + (r * Wy + q) * O;
      for (int k = 0; k < nk; k++) dst[k * OH * OW + r * OW + q] = s[k] + bv[k];
    }
  }
}

/* The four passes over task ranges, one set per instruction set level. */
#define WG_RANGES(SFX, TURN)                                                                  \
  static void pad_rows##SFX(int64_t b, int64_t e, void *ud) {                             \
    const wg_job *j = ud;                                                                 \
    for (int64_t t = b; t < e; t++) pad_row(j, t / j->Hp, t % j->Hp, TURN);               \
  }                                                                                       \
  static void input_tiles##SFX(int64_t b, int64_t e, void *ud) {                          \
    const wg_job *j = ud;                                                                 \
    for (int64_t t = b; t < e; t++) input_tile(j, t, j->V + t * j->C, j->T * j->C);       \
  }                                                                                       \
  static void output_tiles##SFX(int64_t b, int64_t e, void *ud) {                         \
    const wg_job *j = ud;                                                                 \
    for (int64_t t = b; t < e; t++) output_tile(j, t, j->M + t * j->O, j->T * j->O);      \
  }                                                                                       \
  static void fused_tiles##SFX(int64_t b, int64_t e, void *ud) {                          \
    for (int64_t k = b; k < e; k++) fused_block(ud, k);                                   \
  }                                                                                       \
  static void unpad_blocks##SFX(int64_t b, int64_t e, void *ud) {                         \
    const wg_job *j = ud;                                                                 \
    int64_t nb8 = (j->O + 7) / 8;                                                         \
    for (int64_t t = b; t < e; t++) unpad_block(j, t / nb8, t % nb8 * 8, TURN);           \
  }                                                                                       \
  static void dy_rows##SFX(int64_t b, int64_t e, void *ud) {                              \
    const wg_job *j = ud;                                                                 \
    for (int64_t t = b; t < e; t++) dy_row(j, t / (2 * j->TH), t % (2 * j->TH), TURN);    \
  }                                                                                       \
  static void dy_tiles##SFX(int64_t b, int64_t e, void *ud) {                             \
    for (int64_t t = b; t < e; t++) dy_tile(ud, t);                                       \
  }                                                                                       \
  static const ltK_range_fn passes##SFX[7] = {pad_rows##SFX,     input_tiles##SFX,        \
                                              output_tiles##SFX, unpad_blocks##SFX,       \
                                              dy_rows##SFX,      dy_tiles##SFX,           \
                                              fused_tiles##SFX};

WG_RANGES(_base, turn8_scalar)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
WG_RANGES(_avx2, turn8_avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
WG_RANGES(_avx512, turn8_avx2)
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

/* ------------------------------------------------------------ the drivers */

/* The job's geometry, its buffers carved from one block of the buffer cache after 16 O C
** floats for the weights (*U); returns the samples per chunk, 0 when out of memory (ctx's
** error set). *got and *need are for ltB_cache_free. */
static int64_t wg_setup(lt_ctx *ctx, const char *name, wg_job *j, int64_t N, float **U,
                        size_t *need, size_t *got) {
  j->OH = j->H + 2 * j->ph - 2;
  j->OW = j->W + 2 * j->pw - 2;
  j->TH = (j->OH + 1) / 2;
  j->TW = (j->OW + 1) / 2;
  j->TT = j->TH * j->TW;
  j->Hp = 2 * j->TH + 2;
  j->Wp = 2 * j->TW + 2;
  const int64_t C = j->C, O = j->O;
  int64_t nb = WG_BUDGET / sample_floats(j->TT, j->Hp, j->Wp, C, O);
  if (nb < 1) nb = 1;   /* one sample fits WG_SAMPLE_MAX (ltC_winograd_fits) */
  if (nb > N) nb = N > 0 ? N : 1;
  const int64_t nU = 16 * O * C, nX = nb * j->Hp * j->Wp * C, nV = 16 * nb * j->TT * C;
  const int64_t nM = 16 * nb * j->TT * O, nY = nb * 4 * j->TT * O;
  const int64_t total = nU + nX + nV + nM + nY;
  *need = (size_t)total * sizeof(float);
  if (!(*U = ltB_cache_alloc(*need, got))) {
    ltB_fail(ctx, "%s: out of memory for a %lld-element work buffer", name, (long long)total);
    return 0;
  }
  j->X = *U + nU;
  j->V = j->X + nX;
  j->M = j->V + nV;
  j->Y = j->M + nM;
  return nb;
}

/* The 16 GEMMs of a chunk, one per position xi: c[xi] (m, n) = op(a[xi]) @ op(b[xi]) (+ beta
** c[xi]), the matrices xi apart by as, bs, cs floats. They go to the threads whole, each on one
** thread, rather than each cut over all of them: one parallel region instead of 16 (at two
** threads the pool's waits were a sixth of a 64 -> 64 convolution on 8 x 8 images). A GEMM's
** bits do not depend on how it is cut, so the result is the same. */
typedef struct gemm16_job {
  lt_ctx *ctx;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc, as, bs, cs;
  const float *a, *b;
  float *c;
  double beta;
  ltC_thin_nn_fn nn;   /* or one of these, when the channels are few (thin_products) */
  ltC_thin_tn_fn tn;
} gemm16_job;

static void gemm16_range(int64_t b, int64_t e, void *ud) {
  const gemm16_job *g = ud;
  for (int64_t xi = b; xi < e; xi++) {
    const float *a = g->a + xi * g->as, *bb = g->b + xi * g->bs;
    float *c = g->c + xi * g->cs;
    if (g->nn)
      g->nn(g->m, g->k, g->n, a, bb, c);
    else if (g->tn)
      g->tn(g->k, g->m, g->n, a, bb, c, g->beta != 0);
    else
      ltC_blas_gemm(g->ctx, 1, LT_FLOAT32, g->ta, g->tb, g->m, g->n, g->k, 1.0, a, g->lda, bb,
                    g->ldb, g->beta, NULL, c, g->ldc);
  }
}

/* Whether the 16 products take the thin kernels (thin_gemm.c): their small side (the output
** channels forward, the input channels for the weight gradient) fits the registers. With 16
** channels a side the packed GEMM spent as long packing and turning its operands as
** multiplying them. One thread, Zen 4, batch 64, forward and both gradients: 16 -> 16 on
** 32 x 32 15.0 -> 9.5 ms (PyTorch 16.2), 32 -> 32 on 16 x 16 8.1 -> 7.1 (9.5), 64 -> 64 on
** 8 x 8 5.8 -> 5.0 (8.1); a ResNet-20 training step 208 -> 168 ms (PyTorch 215). */
static bool thin_products(int64_t side) {
  return side <= ltC_thin_max();
}

/* Chunk [n0, n0 + cnt) of x, padded channels last into X. */
static void chunk_pad(lt_ctx *ctx, wg_job *j, const ltK_range_fn *pass, const float *x,
                      int64_t n0, int64_t cnt) {
  j->T = cnt * j->TT;
  j->x = x + n0 * j->C * j->H * j->W;
  ltB_parallel_for(ctx, cnt * j->Hp, ltC_grain(j->Wp * j->C), pass[0], j);
}

/* The chunk's tiles, padded and then transformed into V. */
static void chunk_tiles(lt_ctx *ctx, wg_job *j, const ltK_range_fn *pass, const float *x,
                        int64_t n0, int64_t cnt) {
  chunk_pad(ctx, j, pass, x, n0, cnt);
  ltB_parallel_for(ctx, j->T, ltC_grain(32 * j->C), pass[1], j);
}

int ltC_winograd_conv(lt_ctx *ctx, const char *name, int64_t N, int64_t C, int64_t H,
                      int64_t W, int64_t O, int64_t ph, int64_t pw, const float *x,
                      const float *w, bool flip, const float *bias, float *y) {
  wg_job j = {.C = C, .H = H, .W = W, .O = O, .ph = ph, .pw = pw, .bias = bias};
  float *U;
  size_t need, got;
  int64_t nb = wg_setup(ctx, name, &j, N, &U, &need, &got);
  if (nb == 0) return -1;
  /* both sides within the thin products' reach: transforms and products fused, tile block
  ** by tile block (U as (16, C, O)) */
  bool thin = thin_products(O), fused = thin && C <= LT_THIN_SIDE;
  weights_run(ctx, weight_rows, w, U, O, C, flip, thin);
  j.U = U;
  j.nn = thin ? ltC_thin_nn() : NULL;
  const ltK_range_fn *pass = passes_for_isa();
  ltC_blas_single();
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    int64_t cnt = N - n0 < nb ? N - n0 : nb;
    j.y = y + n0 * O * j.OH * j.OW;
    if (fused) {
      chunk_pad(ctx, &j, pass, x, n0, cnt);
      ltB_parallel_for(ctx, (j.T + FUSED - 1) / FUSED, ltC_grain(FUSED * 16 * C * O), pass[6],
                       &j);
    } else {
      chunk_tiles(ctx, &j, pass, x, n0, cnt);
      /* M[xi] (T, O) = V[xi] (T, C) @ U[xi]^T (thin: U[xi] is already (C, O)) */
      gemm16_job g = {ctx, false, true, j.T, O, C, C, C, O, j.T * C, O * C, j.T * O,
                      j.V, U, j.M, 0.0, j.nn, NULL};
      ltB_parallel_for(ctx, 16, 1, gemm16_range, &g);
      ltB_parallel_for(ctx, j.T, ltC_grain(32 * O), pass[2], &j);
    }
    ltB_parallel_for(ctx, cnt * ((O + 7) / 8), ltC_grain(8 * j.OH * j.OW), pass[3], &j);
  }
  ltB_cache_free(U, need);
  return 0;
}

int ltC_winograd_dw(lt_ctx *ctx, const char *name, int64_t N, int64_t C, int64_t H,
                    int64_t W, int64_t O, int64_t ph, int64_t pw, const float *x,
                    const float *dy, float *dw) {
  if (N == 0) {
    memset(dw, 0, (size_t)(O * C * 9) * sizeof(float));
    return 0;
  }
  wg_job j = {.C = C, .H = H, .W = W, .O = O, .ph = ph, .pw = pw};
  float *dU;
  size_t need, got;
  int64_t nb = wg_setup(ctx, name, &j, N, &dU, &need, &got);
  if (nb == 0) return -1;
  const ltK_range_fn *pass = passes_for_isa();
  bool thin = thin_products(C);
  ltC_blas_single();
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    int64_t cnt = N - n0 < nb ? N - n0 : nb;
    chunk_tiles(ctx, &j, pass, x, n0, cnt);
    j.dy = dy + n0 * O * j.OH * j.OW;
    ltB_parallel_for(ctx, cnt * 2 * j.TH, ltC_grain(2 * j.TW * O), pass[4], &j);
    ltB_parallel_for(ctx, j.T, ltC_grain(32 * O), pass[5], &j);
    /* dU[xi] (O, C) (+)= Q[xi]^T (O, T) @ V[xi] (T, C), summed over the chunks */
    gemm16_job g = {ctx, true, false, O, C, j.T, O, C, C, j.T * O, j.T * C, O * C,
                    j.M, j.V, dU, n0 == 0 ? 0.0 : 1.0, NULL, thin ? ltC_thin_tn() : NULL};
    ltB_parallel_for(ctx, 16, 1, gemm16_range, &g);
  }
  weights_run(ctx, weight_grad_rows, dU, dw, O, C, false, false);
  ltB_cache_free(dU, need);
  return 0;
}
