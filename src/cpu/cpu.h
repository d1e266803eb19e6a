/*
** cpu/cpu.h -- helpers shared by the cpu kernels of src/cpu/ (never included by the op layer).
**
** Rows along one dim: single-dim kernels (softmax, search along a dim, cumsum) walk one row per
** position of the other dims, of length size[dim] and stride stride[dim], rows in parallel.
*/
#ifndef LT_CPU_H
#define LT_CPU_H

#include <math.h>
#include <stdint.h>

#include "../core.h"

/* R elements per partial result: long reductions and flat searches are cut into chunks of this
** size, combined in chunk order, so results never depend on the number of threads. */
#define LT_CPU_CHUNK 32768

static inline int64_t ltC_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ltC_max(int64_t a, int64_t b) { return a > b ? a : b; }
/* Whether the n bytes at a and the n bytes at b share any byte. */
static inline bool ltC_overlap(const void *a, const void *b, size_t n) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + n && y < x + n;
}

/* Units of work per parallel task so that each task has about LT_PAR_MIN element steps. */
static inline int64_t ltC_grain(int64_t work_per_unit) {
  if (work_per_unit < 1) work_per_unit = 1;
  return (LT_PAR_MIN + work_per_unit - 1) / work_per_unit;
}

/* ================================================================ BLAS
** Row-major C (m x n) = alpha op(A) @ op(B) + beta C for float32/float64, as cblas_?gemm (op
** transposes when ta / tb; leading dims in elements; m, n, k >= 1 and within int). OpenBLAS runs
** on one thread; a product large enough is cut into blocks of C over up to nt threads of
** Lantern's pool (nt 1 from inside a parallel part). With bias (n elements of dt) and beta
** non-zero, beta's term is beta * bias in every row instead of beta * C: C's previous contents
** are not read. */
void ltC_blas_gemm(lt_ctx *ctx, int nt, lt_dtype dt, bool ta, bool tb, int64_t m, int64_t n,
                   int64_t k, double alpha, const void *a, int64_t lda, const void *b,
                   int64_t ldb, double beta, const void *bias, void *c, int64_t ldc);
/* Sets OpenBLAS to one thread (it never runs threads of its own). Call it before a parallel
** region whose parts call BLAS: setting the count is not safe from two threads at once. */
void ltC_blas_single(void);

/* sgemm.c: Lantern's own float32 GEMM, for when OpenBLAS's kernels are below Lantern's level
** (chosen once; LANTERN_GEMM=openblas|lantern). As cblas_sgemm row-major on one thread; false
** (nothing done, so the caller uses OpenBLAS) when it is not the chosen GEMM or its packing
** buffers cannot be had. bias as ltC_blas_gemm's, given only with beta non-zero. */
bool ltC_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, const float *bias, float *c,
               int64_t ldc);

/* ================================================================ attention tiles (tile_mm.c)
** Which part of a product a causal tile needs, row i of C (lim: the tile's causal_lim0):
** N_UPTO columns j < lim + i (the rest of the row is stored as 0), K_UPTO terms k < lim + i,
** K_FROM terms k >= i - lim + 1 (the others multiply zeros). Strips of rows take the widest
** range any of their rows needs, so a row may get more of its product than it needs, never less. */
enum { LTC_BAND_NONE, LTC_BAND_N_UPTO, LTC_BAND_K_UPTO, LTC_BAND_K_FROM };
typedef struct ltC_band {
  int kind;
  int64_t lim;
} ltC_band;

/* Whether ltC_tile_mm runs here (AVX2+FMA and up; otherwise use BLAS). */
bool ltC_tile_mm_ok(void);
/* C (m x n, ldc) = alpha A B (+ C when acc) in float32, A's (i, k) at a[i ars + k acs], B's
** (k, j) at b[k ldb + j]; band as above. Only when ltC_tile_mm_ok(). */
void ltC_tile_mm(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t ars,
                 int64_t acs, const float *b, int64_t ldb, bool acc, float *c, int64_t ldc,
                 ltC_band band);
/* gelu.c: y = gelu(x) (erf form) over n floats with byte strides, and d = gelu'(x) when d is
** not NULL; AVX2+FMA code. */
void ltC_gelu_avx2(char *y, int64_t sy, char *d, int64_t sd, const char *x, int64_t sx,
                   int64_t n);
/* gelu_avx512.c: the same at the AVX-512 level (its own tables). */
void ltC_gelu_avx512(char *y, int64_t sy, char *d, int64_t sd, const char *x, int64_t sx,
                     int64_t n);
/* The strided form of a kernel on contiguous float blocks: block(y, d, x, w) on w <= bw
** elements (bw <= 256; d may be NULL). The elements pass through blocks on the stack, so each
** takes the path it takes in contiguous data. */
typedef void (*ltC_float_block)(float *y, float *d, const float *x, int w);
static inline void ltC_block_strided(ltC_float_block block, int bw, char *y, int64_t sy, char *d,
                                     int64_t sd, const char *x, int64_t sx, int64_t n) {
  float bx[256], by[256], bd[256];
  for (int64_t i0 = 0; i0 < n; i0 += bw) {
    int w = (int)ltC_min(bw, n - i0);
    for (int k = 0; k < w; k++) bx[k] = *(const float *)(x + (i0 + k) * sx);
    block(by, d ? bd : NULL, bx, w);
    for (int k = 0; k < w; k++) {
      *(float *)(y + (i0 + k) * sy) = by[k];
      if (d) *(float *)(d + (i0 + k) * sd) = bd[k];
    }
  }
}

/* dst (cols x rows, dense) = the transpose of src (rows x cols, leading dim ld). */
void ltC_tile_transpose(const float *src, int64_t rows, int64_t cols, int64_t ld, float *dst);
/* dst[c dld + r] = src[r ld + c] for r < rows, c < cols, by 8 x 8 blocks in AVX2 registers;
** false (nothing written) below AVX2. */
bool ltC_transpose_f32(const float *src, int64_t rows, int64_t cols, int64_t ld, float *dst,
                       int64_t dld);

/* ================================================================ depthwise (conv_dw.c)
** Convolutions whose groups are the input and the output channels (float32, not transposed,
** kernels up to 128 taps): computed directly, per plane. ltC_dw_backward fills dx and dw where
** not NULL (the bias gradient is the caller's). */
bool ltC_dw_fits(const ltK_conv_geom *g, lt_dtype dt);
int ltC_dw_conv(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, float *y, const float *x,
                const float *w, const float *bias);
int ltC_dw_backward(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, float *dx, float *dw,
                    const float *x, const float *w, const float *dy);

/* ================================================================ Winograd (winograd.c)
** Whether a convolution takes the F(2x2, 3x3) path: float32, 3x3, stride and dilation 1, one
** group, padding at most 2, with channels enough that it pays (transposed or not). */
bool ltC_winograd_fits(const ltK_conv_geom *g, lt_dtype dt);
/* y (N, O, H + 2ph - 2, W + 2pw - 2) = the 3x3 convolution of x (N, C, H, W) padded by (ph,
** pw) with w (O, C, 3, 3), or with flip by w (C, O, 3, 3) turned half a turn, + bias (may be
** NULL); all contiguous. -1 (ctx's error naming `name`) when out of memory. */
int ltC_winograd_conv(lt_ctx *ctx, const char *name, int64_t N, int64_t C, int64_t H,
                      int64_t W, int64_t O, int64_t ph, int64_t pw, const float *x,
                      const float *w, bool flip, const float *bias, float *y);
/* dw (O, C, 3, 3) = the gradient of that convolution's weight (not flipped) for dy (N, O,
** H + 2ph - 2, W + 2pw - 2), overwritten; -1 when out of memory. */
int ltC_winograd_dw(lt_ctx *ctx, const char *name, int64_t N, int64_t C, int64_t H,
                    int64_t W, int64_t O, int64_t ph, int64_t pw, const float *x,
                    const float *dy, float *dw);

/* ================================================================ normals (boxmuller.c)
** Replaces each pair of draws z[2i] (in (0, 1]), z[2i + 1] (in [0, 1)), i < pairs, with its
** two standard normals: the same bits at every ISA level. */
void ltC_normal_block(double *z, int64_t pairs);

/* ================================================================ thin products (thin_gemm.c)
** Float32 products with one side of at most ltC_thin_max() floats (0 below AVX2, where the two
** functions below return NULL), all operands row-major and dense; each result element is one
** chain of multiply-adds in order, however the rows are cut. */
int64_t ltC_thin_max(void);
/* M (T x N) = A (T x K) @ B (K x N), N <= ltC_thin_max() */
typedef void (*ltC_thin_nn_fn)(int64_t T, int64_t K, int64_t N, const float *A, const float *B,
                               float *M);
ltC_thin_nn_fn ltC_thin_nn(void);
/* C (Mr x N) = A^T @ B (+ C when add), A (T x Mr), B (T x N), N <= ltC_thin_max() */
typedef void (*ltC_thin_tn_fn)(int64_t T, int64_t Mr, int64_t N, const float *A,
                               const float *B, float *C, bool add);
ltC_thin_tn_fn ltC_thin_tn(void);

/* ================================================================ streaming stores (stream.c)
** Whether an elementwise op whose operands take `bytes` in all should write its output past the
** caches (more than half of L3; never where L3's size is unknown). */
bool ltC_stream_wanted(int64_t bytes);
/* Runs one contiguous output row of an elementwise kernel (d[0] the output, st[0] its element
** size, nops <= 4 operands) in blocks computed into L1 and stored with non-temporal stores.
** run(q, st, m, ud) computes m elements from the pointers q with the row's strides st. */
void ltC_stream_row(char **d, const int64_t *st, int nops, int64_t n, ltK_row_fn run, void *ud);
/* o = a op b over n dense float32s for add, sub, mul and div, computed in registers and stored
** from there past the caches (no L1 block in between: 16M floats at one thread on the Zen 4
** EPYC here, 30.5 -> ~38 GB/s). False, having done nothing, for other ops or below AVX2. */
bool ltC_stream_f32_binary(int op, float *o, const float *a, int64_t sa, const float *b,
                           int64_t sb, int64_t n);

/* ================================================================ rows along one dim */

#define LT_ROW_MAXOP 4

typedef struct ltC_rowit {
  int nops, nd;
  int64_t n, nrows;                 /* row length, number of rows */
  int64_t rs[LT_ROW_MAXOP];         /* element strides along the row */
  int64_t es[LT_ROW_MAXOP];         /* element sizes */
  char *base[LT_ROW_MAXOP];
  int64_t size[LT_MAX_DIMS];        /* the other dims, collapsed */
  int64_t st[LT_ROW_MAXOP][LT_MAX_DIMS];
} ltC_rowit;

typedef void (*ltC_row_fn)(const ltC_rowit *it, char **p, void *ud);

/* Rows along `dim` of ops[0]'s shape; every operand has that shape (views with stride 0 are
** fine). A 0-d shape is one row of one element. */
void ltC_rowit_init(ltC_rowit *it, int nops, const lt_tensor *const *ops, int dim);
/* Calls fn on every row, rows split across threads. */
void ltC_rows_run(lt_ctx *ctx, const ltC_rowit *it, ltC_row_fn fn, void *ud);

/* ================================================================ float32 vector helpers
** Four-lane GCC/clang vector extensions (SSE on x86-64, NEON on arm64), with scalar
** fallbacks. exp4 reduces x = n ln2 + r (|r| <= ln2/2, two-part ln2) and sums the Taylor
** series of e^r to degree 7 (truncation 5e-9, a few ulp in all); for x < -87 it gives 0
** (denormal results flushed), NaN stays NaN. It is meant for x <= 88 (softmax feeds x <= 0). */
#if defined(__GNUC__)
#define LT_VEC4 1
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));

static inline v4f v4load(const float *p) {
  v4f v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void v4store(float *p, v4f v) { memcpy(p, &v, sizeof v); }
static inline v4f v4splat(float x) { return (v4f){x, x, x, x}; }
static inline v4f v4sel(v4i m, v4f a, v4f b) { return (v4f)((m & (v4i)a) | (~m & (v4i)b)); }
static inline double v4hsum(v4f v) { return ((double)v[0] + v[1]) + ((double)v[2] + v[3]); }

static inline v4f exp4(v4f v) {
  const v4f lo = v4splat(-87.0f), hi = v4splat(88.0f), magic = v4splat(12582912.0f);
  v4f c = v4sel(v < lo, lo, v);
  c = v4sel(c > hi, hi, c);
  v4f fn = (c * v4splat(1.44269504088896341f) + magic) - magic;   /* round to nearest */
  v4f r = c - fn * v4splat(0.693145751953125f);
  r = r - fn * v4splat(1.428606765330187045e-06f);
  v4f q = v4splat(1.0f / 5040);
  q = q * r + v4splat(1.0f / 720);
  q = q * r + v4splat(1.0f / 120);
  q = q * r + v4splat(1.0f / 24);
  q = q * r + v4splat(1.0f / 6);
  q = q * r + v4splat(0.5f);
  q = q * r + v4splat(1.0f);
  q = q * r + v4splat(1.0f);
  v4u e = (v4u)(__builtin_convertvector(fn, v4i) + 127) << 23;   /* 2^n */
  return v4sel(v < lo, v4splat(0.0f), q * (v4f)e);
}
#endif

/* A float's bits read as a signed integer, turned into one whose integer order is the floats'
** (-0 just below +0; NaNs beyond the infinities): the magnitude bits of a negative flipped. It
** is its own inverse. Maxima, minima (extreme.c) and sorts (sort.c) compare these. */
static inline int32_t ltC_order32(int32_t u) { return u ^ ((u >> 31) & INT32_MAX); }
static inline int64_t ltC_order64(int64_t u) { return u ^ ((u >> 63) & INT64_MAX); }
/* Whether the bits are a NaN's: magnitude above infinity's. */
static inline bool ltC_isnan_bits32(int32_t u) { return (u & INT32_MAX) > INT32_C(0x7f800000); }

/* extreme.c: the largest (is_max) or smallest of x[0..n), n >= 1, -0 below +0; *nan tells
** whether x holds a NaN (the value returned is then of no use). */
float ltC_extreme_f32(const float *x, int64_t n, bool is_max, bool *nan);
double ltC_extreme_f64(const double *x, int64_t n, bool is_max, bool *nan);
/* Column maxima (minima) of float32 rows, kept in ltC_order32's keys: k[j] starts at
** ltC_extreme_key_start(is_max), each contiguous row x[0, n) folds in through the function
** ltC_extreme_cols_for_isa gives (a NaN wins and stays), and ltC_extreme_key_value gives a
** key's float back. */
typedef void (*ltC_extreme_cols_fn)(int32_t *restrict k, const float *x, int64_t n, bool is_max);
ltC_extreme_cols_fn ltC_extreme_cols_for_isa(void);
static inline int32_t ltC_extreme_key_start(bool is_max) { return is_max ? INT32_MIN : INT32_MAX; }
static inline float ltC_extreme_key_value(int32_t k) {
  union { int32_t i; float f; } u = {ltC_order32(k)};
  return u.f;
}

#endif
