/*
** cpu/conv_dw.c -- depthwise convolutions (groups = input channels = output channels, float32),
** computed directly: each output plane is its input plane convolved with that channel's own
** kh x kw kernel. Through im2col every group is a GEMM of one row, far too thin to be fast (a
** 3x3 depthwise layer of 32x64x32x32 took 5.3 ms, PyTorch 14.8, this 0.9).
**
** A plane is first copied into a zero-padded grid, its columns split into sw phases (column c
** of the grid goes to phase c % sw, position c / sw), so that every tap of the kernel reads a
** contiguous run of the grid for any stride: output (oh, ow) with tap (ki, kj) reads grid row
** oh sh + ki dh, column ow sw + kj dw, that is phase (kj dw) % sw at ow + (kj dw) / sw. Outputs
** are computed DW_VEC at a time in registers, over all the taps. The grid has room past the last
** column for a whole block, so the blocks need no tail.
**
**   forward      y = the grid of x read with strides (sh, sw) and dilations (dh, dw)
**   input grad   dx = the grid of dy upsampled by the strides (zeros between), padded by
**                (k - 1) d - p, read with stride 1 by the kernel turned half a turn
**   weight grad  dw[t] = sum over samples and outputs of dy times the grid of x at tap t
**
** Tasks are planes (channels for the weight gradient, whose sum over samples then runs in one
** fixed order), so the bits do not depend on the thread count.
*/
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"

#define DW_VEC 16          /* outputs per block: one AVX-512 vector, two AVX2, four SSE */
#define DW_MAX_TAPS 128    /* kernels up to 11 x 11 (larger ones take im2col) */
#define DW_MAX_PLANE ((int64_t)1 << 22)   /* grid floats of one plane */

/* A plane's grid: the source (SH x SW, read as upsampled by uh, uw: element (r, c) is
** src[r / uh][c / uw] where both divide, else 0) placed at (pt, pl), read for an output of
** OH x OW. Hp rows; each of the sw phases has Wq columns. */
typedef struct dw_geom {
  int64_t SH, SW, uh, uw, pt, pl;
  int64_t OH, OW, kh, kw, sh, sw, dh, dw;
  int64_t Hp, Wq;
  int64_t ntaps;
  int64_t off[DW_MAX_TAPS];   /* each tap's offset in the grid from its block's first read */
} dw_geom;

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t dw_round(int64_t n) { return (n + DW_VEC - 1) / DW_VEC * DW_VEC; }

static void dw_geom_init(dw_geom *q) {
  q->Hp = (q->OH - 1) * q->sh + (q->kh - 1) * q->dh + 1;
  /* every block's reads (up to the last tap's phase offset past a whole number of blocks),
  ** which covers the (OW - 1) sw + (kw - 1) dw + 1 grid columns the outputs read; whole
  ** vectors per phase row (dw_fill) */
  q->Wq = dw_round(dw_round(q->OW) + (q->kw - 1) * q->dw / q->sw + 1);
  q->ntaps = q->kh * q->kw;
  for (int64_t ki = 0; ki < q->kh; ki++) {
    for (int64_t kj = 0; kj < q->kw; kj++) {
      int64_t c = kj * q->dw;
      q->off[ki * q->kw + kj] = (c % q->sw * q->Hp + ki * q->dh) * q->Wq + c / q->sw;
    }
  }
}

static int64_t dw_grid_floats(const dw_geom *q) { return q->sw * q->Hp * q->Wq; }
/* the padded row of a stride above 2 (dw_fill); strides 1 and 2 fill the grid directly */
static int64_t dw_tmp_floats(const dw_geom *q) { return q->sw > 2 ? q->sw * q->Wq + DW_VEC : 0; }

/* DW_VEC floats as one GCC vector (lowered to two AVX2 or four SSE registers): written as
** loops over DW_VEC lanes, the blocks below came out scalar or vector depending on details. */
typedef float dw_v __attribute__((vector_size(DW_VEC * sizeof(float))));
typedef float dw_vu __attribute__((vector_size(DW_VEC * sizeof(float)), aligned(4), may_alias));

typedef int32_t dw_vi __attribute__((vector_size(DW_VEC * sizeof(int32_t))));

/* Grid row pr of the source (uw = 1) into row, sw * Wq floats: zeros, the source row at
** column pl, zeros. */
static inline __attribute__((always_inline)) void dw_padded_row(const dw_geom *q,
                                                                const float *srow, float *row) {
  const int64_t n = q->sw * q->Wq, pl = q->pl;
  int64_t lo = pl < 0 ? 0 : pl > n ? n : pl;       /* grid columns [lo, hi) hold the source */
  int64_t hi = pl + q->SW > n ? n : pl + q->SW;
  hi = hi < lo ? lo : hi;
  for (int64_t c = 0; c < lo; c++) row[c] = 0;
  for (int64_t c = lo; c < hi; c++) row[c] = srow[c - pl];
  for (int64_t c = hi; c < n; c++) row[c] = 0;
}

/* Lane masks read at an offset: DW_VEC lanes from dw_lanes_lt + DW_VEC - k keep lanes < k, from
** dw_lanes_ge + DW_VEC - k lanes >= k (vector compares of lane numbers came out scalar). */
typedef int32_t dw_viu __attribute__((vector_size(DW_VEC * sizeof(int32_t)), aligned(4), may_alias));
static const int32_t dw_lanes_lt[2 * DW_VEC] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                -1, -1, -1, -1, -1, -1, -1, -1};
static const int32_t dw_lanes_ge[2 * DW_VEC] = {[DW_VEC] = -1, -1, -1, -1, -1, -1, -1, -1,
                                                -1, -1, -1, -1, -1, -1, -1, -1};

/* Phase row d (Wq floats, a multiple of DW_VEC) of source row sr for stride 2: d[j] =
** src[sr][2 j + s] where 2 j + s lies in [0, SW), else 0. A block of DW_VEC takes the even
** lanes of two vectors read straight from the plane, lanes outside the row zeroed by a mask
** (they read the neighbouring rows, so only a block whose reads stay inside the plane does
** this; the others, and blocks wholly outside the row, are done lane by lane or zeroed). A
** padded copy of the row read back at once had stalled every load on the stores it spans, and
** the zero fills had become memset calls: together 3/4 of a stride-2 forward. */
static inline __attribute__((always_inline)) void dw_phase_row(const float *plane, int64_t SH,
                                                               int64_t SW, int64_t sr, int64_t s,
                                                               int64_t Wq, float *d,
                                                               dw_vi even) {
  int64_t jlo = s >= 0 ? 0 : (1 - s) / 2, jhi = SW - s <= 0 ? 0 : (SW - 1 - s) / 2 + 1;
  const float *srow = plane + sr * SW;
  for (int64_t j0 = 0; j0 < Wq; j0 += DW_VEC) {
    int64_t p = 2 * j0 + s, at = sr * SW + p;   /* the block's first read, in row and plane */
    if (j0 + DW_VEC <= jlo || j0 >= jhi) {
      *(dw_vu *)(d + j0) = (dw_v){0};
    } else if (at >= 0 && at + 2 * DW_VEC <= SH * SW) {
      dw_v a = *(const dw_vu *)(srow + p), b = *(const dw_vu *)(srow + p + DW_VEC);
      int64_t lo = jlo - j0 < 0 ? 0 : jlo - j0, hi = jhi - j0 > DW_VEC ? DW_VEC : jhi - j0;
      dw_vi keep = *(const dw_viu *)(dw_lanes_ge + DW_VEC - lo) &
                   *(const dw_viu *)(dw_lanes_lt + DW_VEC - hi);
      *(dw_vu *)(d + j0) = (dw_v)((dw_vi)__builtin_shuffle(a, b, even) & keep);
    } else {
      for (int64_t j = j0; j < j0 + DW_VEC; j++) d[j] = j >= jlo && j < jhi ? srow[2 * j + s] : 0;
    }
  }
}

/* The grid of one source plane, row by row: small loops inline rather than memcpy and memset
** calls (a 32 x 32 plane's rows made calls a tenth of a convolution). Stride 2 splits each row
** into its two phases straight from the source (dw_phase_row); a larger stride pads the row
** into tmp (sw Wq floats), then splits it. */
static inline __attribute__((always_inline)) void dw_fill(const dw_geom *q, const float *src,
                                                          float *grid, float *tmp) {
  const int64_t Wq = q->Wq, sw = q->sw, Hp = q->Hp;
  dw_vi even;
  for (int v = 0; v < DW_VEC; v++) even[v] = 2 * v;
  for (int64_t pr = 0; pr < Hp; pr++) {
    int64_t sr = pr - q->pt;
    bool in = q->uh == 1 ? sr >= 0 && sr < q->SH
                         : sr >= 0 && sr % q->uh == 0 && sr / q->uh < q->SH;
    if (!in) {
      for (int64_t r = 0; r < sw; r++) {
        float *dst = grid + (r * Hp + pr) * Wq;
        for (int64_t j = 0; j < Wq; j += DW_VEC) *(dw_vu *)(dst + j) = (dw_v){0};
      }
      continue;
    }
    const int64_t si = q->uh == 1 ? sr : sr / q->uh;   /* the source row */
    const float *srow = src + si * q->SW;
    float *dst = grid + pr * Wq;
    if (q->uw != 1) {   /* the input gradient's (sw = 1): column t lands on t uw + pl */
      const int64_t uw = q->uw, pl = q->pl;
      int64_t tlo = pl >= 0 ? 0 : (-pl + uw - 1) / uw, thi = floor_div(Wq - 1 - pl, uw) + 1;
      thi = thi > q->SW ? q->SW : thi;
      for (int64_t j = 0; j < Wq; j++) dst[j] = 0;
      for (int64_t t = tlo; t < thi; t++) dst[t * uw + pl] = srow[t];
    } else if (sw == 1) {
      dw_padded_row(q, srow, dst);
    } else if (sw == 2) {
      for (int64_t r = 0; r < 2; r++)
        dw_phase_row(src, q->SH, q->SW, si, r - q->pl, Wq, grid + (r * Hp + pr) * Wq, even);
    } else {
      dw_padded_row(q, srow, tmp);
      for (int64_t r = 0; r < sw; r++) {
        float *d = grid + (r * Hp + pr) * Wq;
        for (int64_t j = 0; j < Wq; j++) d[j] = tmp[j * sw + r];
      }
    }
  }
}

/* One block of DW_VEC outputs in each of R rows (R = 1..4) starting at out, bias + the kernel
** over the grid from base (row r at base + r step): R independent sums, so that the adds of
** one do not wait on the last (a single chain ran at the add's latency). */
static inline __attribute__((always_inline)) void dw_block_fwd(const float *base, int64_t step,
                                                               const int64_t *off,
                                                               const float *w, int64_t K,
                                                               float bias, float *out,
                                                               int64_t OW, int64_t m, int R) {
  dw_v acc[4];
  for (int r = 0; r < R; r++) acc[r] = (dw_v){0} + bias;
  for (int64_t t = 0; t < K; t++) {
    const float *s = base + off[t];
    for (int r = 0; r < R; r++) acc[r] += w[t] * *(const dw_vu *)(s + r * step);
  }
  for (int r = 0; r < R; r++) {
    if (m == DW_VEC) {
      *(dw_vu *)(out + r * OW) = acc[r];
    } else {
      for (int64_t v = 0; v < m; v++) out[r * OW + v] = acc[r][v];
    }
  }
}

/* out (OH x OW) = bias + the kernel w (taps in off's order) over the grid */
static inline __attribute__((always_inline)) void dw_plane_fwd(const dw_geom *q,
                                                               const float *grid,
                                                               const float *w, float bias,
                                                               float *out) {
  const int64_t OH = q->OH, OW = q->OW, K = q->ntaps, step = q->sh * q->Wq;
  const int64_t *off = q->off;
  int64_t oh = 0;
  for (; oh + 4 <= OH; oh += 4) {
    for (int64_t ow0 = 0; ow0 < OW; ow0 += DW_VEC) {
      int64_t m = OW - ow0 < DW_VEC ? OW - ow0 : DW_VEC;
      dw_block_fwd(grid + oh * step + ow0, step, off, w, K, bias, out + oh * OW + ow0, OW, m, 4);
    }
  }
  for (; oh < OH; oh++) {
    for (int64_t ow0 = 0; ow0 < OW; ow0 += DW_VEC) {
      int64_t m = OW - ow0 < DW_VEC ? OW - ow0 : DW_VEC;
      dw_block_fwd(grid + oh * step + ow0, step, off, w, K, bias, out + oh * OW + ow0, OW, m, 1);
    }
  }
}

/* acc[t] += sum over the plane of dy times the grid at tap t, in DW_VEC lanes. dy is the
** plane padded to rows of OWr (a multiple of DW_VEC), so that the blocks need no scalar tail;
** tap by tap, so that the lanes stay in registers. */
static inline __attribute__((always_inline)) void dw_plane_wgrad(const dw_geom *q,
                                                                 const float *grid,
                                                                 const float *dy, int64_t OWr,
                                                                 float *acc) {
  const int64_t OH = q->OH, K = q->ntaps, step = q->sh * q->Wq, full = q->OW / DW_VEC * DW_VEC;
  /* the last block's lanes past OW read grid columns that may hold inf or NaN: 0 * inf is NaN,
  ** so those products are masked off rather than trusted to the zeros of dy */
  dw_vi keep;
  for (int v = 0; v < DW_VEC; v++) keep[v] = full + v < q->OW ? -1 : 0;
  for (int64_t t = 0; t < K; t++) {
    dw_v a[4] = {{0}, {0}, {0}, {0}};   /* four sums, as dw_block_fwd's rows */
    const float *tap = grid + q->off[t];
    for (int64_t oh = 0; oh < OH; oh++) {
      const float *s = tap + oh * step, *g = dy + oh * OWr;
      for (int64_t ow0 = 0; ow0 < full; ow0 += DW_VEC)
        a[oh & 3] += *(const dw_vu *)(g + ow0) * *(const dw_vu *)(s + ow0);
      if (full < OWr) {
        dw_v prod = *(const dw_vu *)(g + full) * *(const dw_vu *)(s + full);
        a[oh & 3] += (dw_v)((dw_vi)prod & keep);
      }
    }
    *(dw_vu *)(acc + t * DW_VEC) += (a[0] + a[1]) + (a[2] + a[3]);
  }
}

#define DEF_DW(SUF)                                                                          \
  static void fill_##SUF(const dw_geom *q, const float *src, float *grid, float *tmp) {     \
    dw_fill(q, src, grid, tmp);                                                             \
  }                                                                                          \
  static void fwd_##SUF(const dw_geom *q, const float *grid, const float *w, float bias,    \
                        float *out) {                                                       \
    dw_plane_fwd(q, grid, w, bias, out);                                                    \
  }                                                                                          \
  static void wgrad_##SUF(const dw_geom *q, const float *grid, const float *dy, int64_t OWr, \
                          float *acc) {                                                     \
    dw_plane_wgrad(q, grid, dy, OWr, acc);                                                  \
  }
DEF_DW(sse4)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_DW(avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_DW(avx512)
LT_ISA_END
#endif

typedef void (*dw_fill_fn)(const dw_geom *, const float *, float *, float *);
typedef void (*dw_fwd_fn)(const dw_geom *, const float *, const float *, float, float *);
typedef void (*dw_wgrad_fn)(const dw_geom *, const float *, const float *, int64_t, float *);

static void dw_kernels(dw_fill_fn *fill, dw_fwd_fn *fwd, dw_wgrad_fn *wgrad) {
  *fill = fill_sse4, *fwd = fwd_sse4, *wgrad = wgrad_sse4;
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: *fill = fill_avx512, *fwd = fwd_avx512, *wgrad = wgrad_avx512; break;
    case LT_ISA_AVX2: *fill = fill_avx2, *fwd = fwd_avx2, *wgrad = wgrad_avx2; break;
    default: break;
  }
#endif
}

/* ------------------------------------------------------------ drivers */

enum dw_kind { DW_FWD, DW_DX, DW_DW };

typedef struct dw_job {
  enum dw_kind kind;
  const ltK_conv_geom *g;
  dw_geom q;
  const float *src, *w, *bias, *dy;   /* src: x, or dy for DW_DX */
  float *out;                         /* y, dx or dw */
  float *wflip;                       /* DW_DX: each channel's kernel turned half a turn */
  float *scratch;                     /* per part: the grid, a padded row, then DW_DW's
                                      ** accumulators and its padded dy plane */
  int64_t tasks, parts, part_floats;
  dw_fill_fn fill;
  dw_fwd_fn fwd;
  dw_wgrad_fn wgrad;
} dw_job;

static void dw_task(const dw_job *j, int64_t task, float *grid) {
  const ltK_conv_geom *g = j->g;
  const dw_geom *q = &j->q;
  const int64_t K = q->ntaps, in_plane = q->SH * q->SW, out_plane = q->OH * q->OW;
  if (j->kind == DW_DW) {   /* task = channel: its kernel's gradient over every sample */
    int64_t c = task, OWr = dw_round(q->OW);
    float *tmp = grid + dw_grid_floats(q), *acc = tmp + dw_tmp_floats(q);
    float *dyp = acc + K * DW_VEC;
    memset(acc, 0, (size_t)(K * DW_VEC) * sizeof(float));
    for (int64_t n = 0; n < g->N; n++) {
      j->fill(q, j->src + (n * g->C + c) * in_plane, grid, tmp);
      const float *d = j->dy + (n * g->C + c) * out_plane;
      for (int64_t oh = 0; oh < q->OH; oh++) {
        memcpy(dyp + oh * OWr, d + oh * q->OW, (size_t)q->OW * sizeof(float));
        memset(dyp + oh * OWr + q->OW, 0, (size_t)(OWr - q->OW) * sizeof(float));
      }
      j->wgrad(q, grid, dyp, OWr, acc);
    }
    for (int64_t t = 0; t < K; t++) {
      float s = 0;
      for (int v = 0; v < DW_VEC; v++) s += acc[t * DW_VEC + v];
      j->out[c * K + t] = s;
    }
    return;
  }
  int64_t c = task % g->C;   /* task = plane (n, c) */
  const float *w = j->kind == DW_DX ? j->wflip + c * K : j->w + c * K;
  float bias = j->bias ? j->bias[c] : 0.0f;
  j->fill(q, j->src + task * in_plane, grid, grid + dw_grid_floats(q));
  j->fwd(q, grid, w, bias, j->out + task * out_plane);
}

static void dw_parts(int64_t b, int64_t e, void *ud) {
  const dw_job *j = ud;
  for (int64_t p = b; p < e; p++) {
    float *grid = j->scratch + p * j->part_floats;
    int64_t t0 = j->tasks * p / j->parts, t1 = j->tasks * (p + 1) / j->parts;
    for (int64_t t = t0; t < t1; t++) dw_task(j, t, grid);
  }
}

static int dw_run(lt_ctx *ctx, const char *name, dw_job *j) {
  dw_geom_init(&j->q);
  dw_kernels(&j->fill, &j->fwd, &j->wgrad);
  int nt = ctx->num_threads < 1 ? 1 : ctx->num_threads;
  /* small work stays on the calling thread, in one part */
  if ((double)j->tasks * (double)(j->q.OH * j->q.OW) * (double)j->q.ntaps < 2e5) nt = 1;
  j->parts = j->tasks < nt ? j->tasks : nt;
  if (j->parts < 1) return 0;
  j->part_floats = dw_grid_floats(&j->q) + dw_tmp_floats(&j->q) +
                   (j->kind == DW_DW ? j->q.ntaps * DW_VEC + j->q.OH * dw_round(j->q.OW) : 0);
  int64_t K = j->q.ntaps, flip = j->kind == DW_DX ? j->g->C * K : 0;
  size_t got;
  float *mem = ltB_cache_alloc((size_t)(j->parts * j->part_floats + flip) * sizeof(float), &got);
  if (!mem)
    return ltB_fail(ctx, "%s: out of memory for a %lld-element work buffer", name,
                    (long long)(j->parts * j->part_floats + flip));
  j->scratch = mem;
  if (flip) {
    j->wflip = mem + j->parts * j->part_floats;
    for (int64_t c = 0; c < j->g->C; c++)
      for (int64_t t = 0; t < K; t++) j->wflip[c * K + t] = j->w[c * K + (K - 1 - t)];
  }
  if (j->parts == 1)
    dw_parts(0, 1, j);
  else
    ltB_parallel_for(ctx, j->parts, 1, dw_parts, j);
  ltB_cache_free(mem, got);
  return 0;
}

/* the grid geometry of the forward pass (also the weight gradient's) */
static dw_geom fwd_geom(const ltK_conv_geom *g) {
  return (dw_geom){.SH = g->H, .SW = g->W, .uh = 1, .uw = 1, .pt = g->ph, .pl = g->pw,
                   .OH = g->OH, .OW = g->OW, .kh = g->kh, .kw = g->kw, .sh = g->sh,
                   .sw = g->sw, .dh = g->dh, .dw = g->dw};
}

/* the input gradient's: dy upsampled by the strides, padded by (k - 1) d - p before */
static dw_geom dx_geom(const ltK_conv_geom *g) {
  return (dw_geom){.SH = g->OH, .SW = g->OW, .uh = g->sh, .uw = g->sw,
                   .pt = (g->kh - 1) * g->dh - g->ph, .pl = (g->kw - 1) * g->dw - g->pw,
                   .OH = g->H, .OW = g->W, .kh = g->kh, .kw = g->kw, .sh = 1, .sw = 1,
                   .dh = g->dh, .dw = g->dw};
}

bool ltC_dw_fits(const ltK_conv_geom *g, lt_dtype dt) {
  if (dt != LT_FLOAT32 || g->transposed || g->groups < 2 || g->groups != g->C ||
      g->O != g->C || g->kh * g->kw > DW_MAX_TAPS || g->OH < 1 || g->OW < 1)
    return false;
  dw_geom f = fwd_geom(g), b = dx_geom(g);
  dw_geom_init(&f);
  dw_geom_init(&b);
  return dw_grid_floats(&f) <= DW_MAX_PLANE && dw_grid_floats(&b) <= DW_MAX_PLANE;
}

int ltC_dw_conv(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, float *y, const float *x,
                const float *w, const float *bias) {
  dw_job j = {.kind = DW_FWD, .g = g, .q = fwd_geom(g), .src = x, .w = w, .bias = bias,
              .out = y, .tasks = g->N * g->C};
  return dw_run(ctx, name, &j);
}

int ltC_dw_backward(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, float *dx, float *dw,
                    const float *x, const float *w, const float *dy) {
  if (dx) {
    dw_job j = {.kind = DW_DX, .g = g, .q = dx_geom(g), .src = dy, .w = w, .out = dx,
                .tasks = g->N * g->C};
    if (dw_run(ctx, name, &j)) return -1;
  }
  if (dw) {
    dw_job j = {.kind = DW_DW, .g = g, .q = fwd_geom(g), .src = x, .dy = dy, .out = dw,
                .tasks = g->C};
    if (dw_run(ctx, name, &j)) return -1;
  }
  return 0;
}
