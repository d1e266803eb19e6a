/*
** cpu/attention.c -- cpu kernels of fused scaled-dot-product attention (`sdpa`,
** `sdpa_backward`): FlashAttention-2's schedule, with a GEMM per block product.
**
** Shape letters, per batch entry: Q (L, E), K (S, E), V (S, Ev), O (L, Ev), lse (L).
** Forward: queries go in blocks of BR rows, keys in blocks of BC. For one query block, each key
** block's scores tile T = scale Q K^T (BR x BC) is a GEMM; the mask is added, and an online
** softmax keeps each row's running max m and sum l, rescaling the accumulator (O itself, a GEMM
** with beta = 1 adds P V) when m grows. At the end O /= l and lse = m + log l is kept, so the
** (L, S) matrix of weights never exists: a task holds one tile.
** Backward, per batch entry: D = rowsum(dO * O); for each key block and each query block that
** can see it, P = exp(T - lse) is recomputed from the tile and
**   dV += P^T dO,   dP = dO V^T,   dS = P (dP - D),   dQ += scale dS K,   dK += scale dS^T Q.
** Dropout multiplies each weight by Z (0, or 1/(1-p) where kept) after the row sums: the forward
** adds (P Z) V, and the backward takes dV += (P Z)^T dO and dS = P (dP Z - D), D being the same
** rowsum(dO * O) of the dropped output. Z is a hash of the seed and the weight's place, never
** stored (see dropout).
**
** Accuracy: the tiles' GEMMs are the composed form's products, blocked; the exponentials are
** vmath.h's (1.1 ulp); each row's sum is kept in double across blocks. Measured against the
** float64 composed formula on unit-normal float32 inputs, causal, (L, S, E) from (64, 64, 32) to
** (512, 512, 64): the largest error of the output is 3.8e-7 of its largest value, of dq, dk, dv
** 6.7e-7 (with BLAS tiles 3.3e-7 and 4.9e-7; the float32 composed form had 1.8e-7 and 7.3e-7 on
** other draws); spec/sdpa_spec.lua holds it to 2e-6 at every vector level.
**
** The tiles' products: float32 from AVX2 up goes to tile_mm.c's register kernel, which reads
** the operands in place (K and V transposed once per key block) and, under causal, skips the
** strips of each product that the triangle zeroes; float64, and float32 below AVX2, call BLAS on
** the whole tile. On 64 x 64 tiles at E = 32, OpenBLAS ran 35-46 GFLOP/s on this project's
** machine (AMD EPYC, one thread) and tile_mm 44-72; an auto-vectorised loop kernel had run 21.
** Blocks of 32 and 128 measured within the noise of 64 at T = 64..512 (with BLAS).
**
** Threads: the forward's tasks are (batch entry, query block), the backward's batch entries
** (or, with fewer entries than threads, blocks in two passes: see bwd_split_range);
** every output element is written by one task in a fixed order, so the bits do not depend on
** the thread count. GEMMs run single-threaded inside the tasks (one thread budget).
*/
#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "vmath.h"

/* Query rows and keys per block: a float32 tile is 16 KiB and the Q and K blocks for head dims
** up to 64 as much each, so a task's working set stays in L2 between the GEMMs that share it. */
#define BR 64
#define BC 64
#define LANES 16   /* lanes of the row max and sums: one fixed order at every vector width */
#define AT_INLINE static inline __attribute__((always_inline))

/* ================================================================ blocks */

/* One operand matrix of a batch entry: element (i, j) at p + (i * ld + j) elements. */
typedef struct mat {
  char *p;
  int64_t ld;
} mat;

/* The element offset of batch entry b (row-major over the batch dims) in t. */
static int64_t batch_offset(const lt_tensor *t, const ltK_sdpa_geom *g, int64_t b) {
  int64_t off = 0;
  for (int d = g->nbd - 1; d >= 0; d--) {
    off += (b % g->batch[d]) * t->stride[d];
    b /= g->batch[d];
  }
  return off;
}

/* Batch entry b of t (nbd + 2 dims, unit stride along the last); a one-row matrix gets its
** width as leading dim, which BLAS wants at least that large. */
static mat mat_of(const lt_tensor *t, const ltK_sdpa_geom *g, int64_t b) {
  int64_t rows = t->size[g->nbd], cols = t->size[g->nbd + 1];
  int64_t ld = rows > 1 ? t->stride[g->nbd] : cols;
  size_t es = lt_dtype_size(t->dtype);
  return (mat){.p = (char *)lt_data(t) + batch_offset(t, g, b) * (int64_t)es,
               .ld = ld > 1 ? ld : 1};
}

static char *row_at(const mat *m, int64_t i, size_t es) {
  return m->p + (size_t)(i * m->ld) * es;
}

/* rows i0..i0+n-1 of m (cols wide) = 0 */
static void zero_rows(const mat *m, int64_t i0, int64_t n, int64_t cols, size_t es) {
  if (m->ld == cols) {
    memset(row_at(m, i0, es), 0, (size_t)(n * cols) * es);
    return;
  }
  for (int64_t i = i0; i < i0 + n; i++) memset(row_at(m, i, es), 0, (size_t)cols * es);
}

/* C (m x n, ldc) = alpha op(A) op(B) + beta C; k = 0 leaves beta C (zeros for beta = 0). */
static void gemm(lt_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const char *a, int64_t lda, const char *b, int64_t ldb, double beta, char *c,
                 int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0)
      for (int64_t i = 0; i < m; i++)
        memset(c + (size_t)(i * ldc) * lt_dtype_size(dt), 0, (size_t)n * lt_dtype_size(dt));
    return;
  }
  if (dt == LT_FLOAT32 && ltC_sgemm(ta, tb, m, n, k, (float)alpha, (const float *)a, lda,
                                    (const float *)b, ldb, (float)beta, NULL, (float *)c, ldc))
    return;
  enum CBLAS_TRANSPOSE A = ta ? CblasTrans : CblasNoTrans, B = tb ? CblasTrans : CblasNoTrans;
  if (dt == LT_FLOAT32)
    cblas_sgemm(CblasRowMajor, A, B, (int)m, (int)n, (int)k, (float)alpha, (const float *)a,
                (int)lda, (const float *)b, (int)ldb, (float)beta, (float *)c, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, A, B, (int)m, (int)n, (int)k, alpha, (const double *)a, (int)lda,
                (const double *)b, (int)ldb, beta, (double *)c, (int)ldc);
}

/* ================================================================ tiles
** A tile holds rows i0.. (nr of them) against keys j0.. (nc), row r at t + r * BC. */

typedef struct tile_pos {
  int64_t i0, j0, nr, nc;
} tile_pos;

/* The mask's part of a tile: a bool mask's false is -inf, a float mask is added. mk is the
** mask's batch entry (element strides ms_r, ms_c). (Causal needs no pass: row_width.) */
#define DEF_MASK_TILE(NAME, T)                                                                 \
  static void NAME(T *t, tile_pos p, const char *mk, lt_dtype mdt, int64_t ms_r,               \
                   int64_t ms_c) {                                                             \
    for (int64_t r = 0; r < p.nr; r++) {                                                       \
      T *row = t + r * BC;                                                                     \
      int64_t i = p.i0 + r;                                                                    \
      if (mdt == LT_BOOL) {                                                                    \
        const bool *m = (const bool *)mk + i * ms_r + p.j0 * ms_c;                             \
        for (int64_t c = 0; c < p.nc; c++)                                                     \
          if (!m[c * ms_c]) row[c] = -INFINITY;                                                \
      } else {                                                                                 \
        const T *m = (const T *)mk + i * ms_r + p.j0 * ms_c;                                   \
        for (int64_t c = 0; c < p.nc; c++) row[c] += m[c * ms_c];                              \
      }                                                                                        \
    }                                                                                          \
  }
DEF_MASK_TILE(mask_tile_f32, float)
DEF_MASK_TILE(mask_tile_f64, double)

/* Under causal, row r of a tile has keys before column lim0 + r (lim0 = i0 + 1 - j0; nc
** without causal): its max and exponentials stop there and the rest of the row becomes 0. */
AT_INLINE int64_t row_width(int64_t lim0, int64_t r, int64_t nc) {
  int64_t w = lim0 + r;
  return w < 0 ? 0 : w > nc ? nc : w;
}

/* nc rounded up to whole blocks of LANES: the exponential loops run to it (a row has BC floats
** of room; the lanes past nc may hold anything, and are computed and then replaced by 0) */
AT_INLINE int64_t whole_blocks(int64_t nc) { return (nc + LANES - 1) / LANES * LANES; }

/* The online-softmax step of a forward tile: per row, m grows to the tile's max, the tile
** becomes P = exp(T - m), l = l e^(m_old - m) + rowsum(P), and the accumulator row o (Ev wide,
** at o + r * ldo) is scaled by e^(m_old - m). A row with no key taking part so far keeps
** m = -inf, and its exponentials are taken against 0 so that they give 0, not NaN. */
AT_INLINE void fwd_tile_f32(float *t, int64_t nr, int64_t nc, int64_t lim0, float *m, double *l,
                            float *o, int64_t ldo, int64_t ev) {
  for (int64_t r = 0; r < nr; r++) {
    float *row = t + r * BC;
    float lm[LANES];
    for (int k = 0; k < LANES; k++) lm[k] = -INFINITY;
    int64_t c = 0, w = row_width(lim0, r, nc);
    for (; c + LANES <= w; c += LANES)
      for (int k = 0; k < LANES; k++) lm[k] = row[c + k] > lm[k] ? row[c + k] : lm[k];
    for (int k = 0; c + k < w; k++) lm[k] = row[c + k] > lm[k] ? row[c + k] : lm[k];
    float mx = m[r];
    for (int k = 0; k < LANES; k++) mx = lm[k] > mx ? lm[k] : mx;
    float ref = mx == -INFINITY ? 0.0f : mx;
    float acc[LANES] = {0};
    /* whole blocks, lanes past w made 0: no remainder loops, whose narrow stores, read back
    ** a vector at a time, stalled the sum */
    int64_t ncb = whole_blocks(nc);
    for (c = 0; c < ncb; c++) {
      float e = vm_exp_float(row[c] - ref);
      row[c] = c < w ? e : 0.0f;
    }
    for (c = 0; c < ncb; c += LANES)
      for (int k = 0; k < LANES; k++) acc[k] += row[c + k];
    double s = 0;
    for (int k = 0; k < LANES; k++) s += acc[k];
    float alpha = vm_exp_float(m[r] - ref);
    l[r] = l[r] * alpha + s;
    m[r] = mx;
    if (alpha != 1.0f) {
      float *orow = o + r * ldo;
      for (int64_t e = 0; e < ev; e++) orow[e] *= alpha;
    }
  }
}

static void fwd_tile_f64(double *t, int64_t nr, int64_t nc, int64_t lim0, double *m, double *l,
                         double *o, int64_t ldo, int64_t ev) {
  for (int64_t r = 0; r < nr; r++) {
    double *row = t + r * BC, mx = m[r], s = 0;
    int64_t w = row_width(lim0, r, nc);
    for (int64_t c = 0; c < w; c++) mx = row[c] > mx ? row[c] : mx;
    double ref = mx == -INFINITY ? 0.0 : mx;
    for (int64_t c = 0; c < nc; c++) {
      row[c] = c < w ? exp(row[c] - ref) : 0;
      s += row[c];
    }
    double alpha = exp(m[r] - ref);
    l[r] = l[r] * alpha + s;
    m[r] = mx;
    if (alpha != 1.0) {
      double *orow = o + r * ldo;
      for (int64_t e = 0; e < ev; e++) orow[e] *= alpha;
    }
  }
}

/* Backward tiles: P = exp(T - lse) (a row with no key taking part has lse = -inf and gets NaN,
** as the composed form's weights are), then dS = P (dP - D) into dP. */
AT_INLINE void bwd_p_f32(float *t, int64_t nr, int64_t nc, int64_t lim0, const float *lse) {
  for (int64_t r = 0; r < nr; r++) {
    float *row = t + r * BC, ls = lse[r];
    int64_t w = row_width(lim0, r, nc), ncb = whole_blocks(nc);
    for (int64_t c = 0; c < ncb; c++) {   /* whole blocks, as fwd_tile_f32 */
      float e = vm_exp_float(row[c] - ls);
      row[c] = c < w ? e : 0.0f;
    }
  }
}

AT_INLINE void bwd_ds_f32(float *dp, const float *p, int64_t nr, int64_t nc, const float *d) {
  for (int64_t r = 0; r < nr; r++) {
    float *drow = dp + r * BC, dr = d[r];
    const float *prow = p + r * BC;
    for (int64_t c = 0; c < nc; c++) drow[c] = prow[c] * (drow[c] - dr);
  }
}

static void bwd_p_f64(double *t, int64_t nr, int64_t nc, int64_t lim0, const double *lse) {
  for (int64_t r = 0; r < nr; r++) {
    int64_t w = row_width(lim0, r, nc);
    for (int64_t c = 0; c < nc; c++) t[r * BC + c] = c < w ? exp(t[r * BC + c] - lse[r]) : 0;
  }
}

static void bwd_ds_f64(double *dp, const double *p, int64_t nr, int64_t nc, const double *d) {
  for (int64_t r = 0; r < nr; r++)
    for (int64_t c = 0; c < nc; c++) dp[r * BC + c] = p[r * BC + c] * (dp[r * BC + c] - d[r]);
}

/* x . y over n floats, in double lanes (one chain per lane, so the loop vectorises) */
AT_INLINE double dot_f32(const float *x, const float *y, int64_t n) {
  double acc[LANES] = {0}, s = 0;
  int64_t e = 0;
  for (; e + LANES <= n; e += LANES)
    for (int k = 0; k < LANES; k++) acc[k] += (double)x[e + k] * y[e + k];
  for (int k = 0; e + k < n; k++) acc[k] += (double)x[e + k] * y[e + k];
  for (int k = 0; k < LANES; k++) s += acc[k];
  return s;
}

/* ================================================================ one set per ISA level */

typedef struct tile_kernels {
  void (*fwd)(float *t, int64_t nr, int64_t nc, int64_t lim0, float *m, double *l, float *o,
              int64_t ldo, int64_t ev);
  void (*bwd_p)(float *t, int64_t nr, int64_t nc, int64_t lim0, const float *lse);
  void (*bwd_ds)(float *dp, const float *p, int64_t nr, int64_t nc, const float *d);
  double (*dot)(const float *x, const float *y, int64_t n);
} tile_kernels;

#define DEF_TILE_LEVEL(SUF)                                                                    \
  static void fwd_##SUF(float *t, int64_t nr, int64_t nc, int64_t lim0, float *m, double *l,   \
                        float *o, int64_t ldo, int64_t ev) {                                   \
    fwd_tile_f32(t, nr, nc, lim0, m, l, o, ldo, ev);                                           \
  }                                                                                            \
  static void bwd_p_##SUF(float *t, int64_t nr, int64_t nc, int64_t lim0, const float *lse) {  \
    bwd_p_f32(t, nr, nc, lim0, lse);                                                           \
  }                                                                                            \
  static void bwd_ds_##SUF(float *dp, const float *p, int64_t nr, int64_t nc, const float *d) { \
    bwd_ds_f32(dp, p, nr, nc, d);                                                              \
  }                                                                                            \
  static double dot_##SUF(const float *x, const float *y, int64_t n) { return dot_f32(x, y, n); }

DEF_TILE_LEVEL(sse4)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_TILE_LEVEL(avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_TILE_LEVEL(avx512)
LT_ISA_END
#endif

static tile_kernels tile_kernels_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512:
      return (tile_kernels){.fwd = fwd_avx512, .bwd_p = bwd_p_avx512, .bwd_ds = bwd_ds_avx512,
                            .dot = dot_avx512};
    case LT_ISA_AVX2:
      return (tile_kernels){.fwd = fwd_avx2, .bwd_p = bwd_p_avx2, .bwd_ds = bwd_ds_avx2,
                            .dot = dot_avx2};
    default: break;
  }
#endif
  return (tile_kernels){.fwd = fwd_sse4, .bwd_p = bwd_p_sse4, .bwd_ds = bwd_ds_sse4,
                        .dot = dot_sse4};
}

/* ================================================================ dropout
** Counter-based, so forward and backward, every thread and block order, draw the same mask
** without storing it: row (b, i) gets a 32-bit key, splitmix64's output for the counter
** b * L + i from the seed, and weight j of the row is kept when murmur3's 32-bit finalizer of
** key + j * 0x9e3779b9 (a bijection of j) is >= ceil(p 2^32). 32-bit, so that the loops
** vectorise on every level. */

AT_INLINE uint64_t drop_hash(uint64_t seed, uint64_t n) {
  uint64_t z = seed + (n + 1) * 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

AT_INLINE uint32_t drop_mix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  return h ^ (h >> 16);
}

/* A row's dropout: its key, the keep threshold and the kept weights' scale 1/(1-p) (0 where
** p rounds every weight out). */
typedef struct drop_row {
  uint32_t key, thresh;
  float keep_f;
  double keep;
} drop_row;

static drop_row drop_row_at(const ltK_sdpa_geom *g, int64_t b, int64_t i) {
  uint64_t t = (uint64_t)ceil(g->dropout_p * 0x1.0p32);
  bool none = t > UINT32_MAX;   /* p within 2^-32 of 1: nothing is kept */
  double keep = none ? 0.0 : 1.0 / (1.0 - g->dropout_p);
  return (drop_row){.key = (uint32_t)drop_hash(g->seed, (uint64_t)b * (uint64_t)g->L + (uint64_t)i),
                    .thresh = none ? 0 : (uint32_t)t, .keep_f = (float)keep, .keep = keep};
}

/* the scale of weight j of the row */
AT_INLINE bool drop_kept(const drop_row *d, int64_t j) {
  return drop_mix(d->key + (uint32_t)j * 0x9e3779b9u) >= d->thresh;
}

/* drop_fwd: the forward's weights tile t of batch entry b times the dropout scales.
** drop_bwd: from P (in p) and dO V^T (in dp), dS = P (dP Z - D) into dp and P Z (what the
** forward multiplied V by) into p. KEEP: the drop_row field of T's scale. */
#define DEF_DROP_TILES(SUF, T, KEEP)                                                           \
  static void drop_fwd_##SUF(const ltK_sdpa_geom *g, int64_t b, tile_pos p, char *t) {         \
    for (int64_t r = 0; r < p.nr; r++) {                                                       \
      drop_row d = drop_row_at(g, b, p.i0 + r);                                                \
      T *row = (T *)t + r * BC;                                                                \
      for (int64_t c = 0; c < p.nc; c++) row[c] *= drop_kept(&d, p.j0 + c) ? d.KEEP : (T)0;   \
    }                                                                                          \
  }                                                                                            \
  static void drop_bwd_##SUF(const ltK_sdpa_geom *g, int64_t b, tile_pos t, char *p, char *dp, \
                             const char *d) {                                                  \
    for (int64_t r = 0; r < t.nr; r++) {                                                       \
      drop_row dr = drop_row_at(g, b, t.i0 + r);                                               \
      T *pp = (T *)p + r * BC, *dd = (T *)dp + r * BC, rd = ((const T *)d)[t.i0 + r];           \
      for (int64_t c = 0; c < t.nc; c++) {                                                     \
        T z = drop_kept(&dr, t.j0 + c) ? dr.KEEP : (T)0;                                       \
        dd[c] = pp[c] * (dd[c] * z - rd);                                                      \
        pp[c] *= z;                                                                            \
      }                                                                                        \
    }                                                                                          \
  }
DEF_DROP_TILES(f32, float, keep_f)
DEF_DROP_TILES(f64, double, keep)

/* ================================================================ drivers */

typedef struct sdpa_job {
  const ltK_sdpa_geom *g;
  lt_dtype dt;
  size_t es;
  const lt_tensor *q, *k, *v, *mask, *out, *lse, *dout;
  lt_tensor *dq, *dk, *dv;
  int64_t nqb, nkb;       /* query and key blocks per batch entry */
  char *d;                /* the split backward's D, (batch, L) */
  tile_kernels tk;
  bool own_mm;            /* float32 tiles multiply in tile_mm.c's kernel, not BLAS */
  atomic_bool oom;
} sdpa_job;

/* The mask's batch entry b and its element strides along L and S (NULL: no mask). */
static const char *mask_at(const sdpa_job *j, int64_t b, int64_t *ms_r, int64_t *ms_c) {
  const lt_tensor *m = j->mask;
  if (!m) return NULL;
  int nbd = j->g->nbd;
  *ms_r = m->stride[nbd];
  *ms_c = m->stride[nbd + 1];
  return (const char *)lt_data(m) + batch_offset(m, j->g, b) * (int64_t)lt_dtype_size(m->dtype);
}

/* The lim0 of row_width for tile p. */
static int64_t causal_lim0(const ltK_sdpa_geom *g, tile_pos p) {
  return g->causal ? p.i0 + 1 - p.j0 : p.nc;
}

/* C (m x n) = alpha op(A) B (+ C when acc), op(A) = A^T when ta. tile_mm.c's kernel skips what
** the band makes zero; BLAS computes it all (the callers never read the rest). */
static void tile_prod(const sdpa_job *j, bool ta, int64_t m, int64_t n, int64_t k, double alpha,
                      const char *a, int64_t lda, const char *b, int64_t ldb, bool acc, char *c,
                      int64_t ldc, ltC_band band) {
  if (j->own_mm)
    ltC_tile_mm(m, n, k, (float)alpha, (const float *)a, ta ? 1 : lda, ta ? lda : 1,
                (const float *)b, ldb, acc, (float *)c, ldc, band);
  else
    gemm(j->dt, ta, false, m, n, k, alpha, a, lda, b, ldb, acc ? 1.0 : 0.0, c, ldc);
}

/* A key block's K and V as the kernel reads them in Q K^T and dO V^T: transposed (E x nc and
** Ev x nc), made once per (batch entry, key block). Unused with BLAS. */
typedef struct kv_pack {
  float *kt, *vt;
  int64_t b, j0;   /* the block they hold; b = -1: none yet (a task's pack serves the forward,
                    ** which packs K alone, or the backward, which packs both, never the two) */
} kv_pack;

static size_t pack_floats(const ltK_sdpa_geom *g, bool with_v) {
  return (size_t)(g->E + (with_v ? g->Ev : 0)) * BC;
}

static kv_pack pack_at(char *s, const ltK_sdpa_geom *g) {
  float *kt = (float *)s;
  return (kv_pack){.kt = kt, .vt = kt + g->E * BC, .b = -1, .j0 = -1};
}

static void pack_block(const sdpa_job *j, kv_pack *pk, const mat *K, const mat *V, int64_t b,
                       int64_t j0, int64_t nc) {
  if (!j->own_mm || (pk->b == b && pk->j0 == j0)) return;
  ltC_tile_transpose((const float *)row_at(K, j0, j->es), nc, j->g->E, K->ld, pk->kt);
  if (V) ltC_tile_transpose((const float *)row_at(V, j0, j->es), nc, j->g->Ev, V->ld, pk->vt);
  pk->b = b, pk->j0 = j0;
}

/* The scores tile of query rows p.i0.. against keys p.j0..: scale Q K^T, masked. pk holds the
** key block when the kernel is ours. */
static void scores_tile(const sdpa_job *j, const mat *Q, const mat *K, const kv_pack *pk,
                        const char *mk, int64_t ms_r, int64_t ms_c, tile_pos p, char *t) {
  const ltK_sdpa_geom *g = j->g;
  if (j->own_mm)
    ltC_tile_mm(p.nr, p.nc, g->E, (float)g->scale, (const float *)row_at(Q, p.i0, j->es), Q->ld,
                1, pk->kt, p.nc, false, (float *)t, BC,
                (ltC_band){LTC_BAND_N_UPTO, causal_lim0(g, p)});
  else
    gemm(j->dt, false, true, p.nr, p.nc, g->E, g->scale, row_at(Q, p.i0, j->es), Q->ld,
         row_at(K, p.j0, j->es), K->ld, 0.0, t, BC);
  if (!mk) return;
  if (j->dt == LT_FLOAT32)
    mask_tile_f32((float *)t, p, mk, j->mask->dtype, ms_r, ms_c);
  else
    mask_tile_f64((double *)t, p, mk, j->mask->dtype, ms_r, ms_c);
}

/* The keys a query block can see: all, or under causal those j < i0 + nr. */
static int64_t keys_seen(const ltK_sdpa_geom *g, int64_t i0, int64_t nr) {
  return g->causal ? ltC_min(g->S, i0 + nr) : g->S;
}

/* One forward task: query block qb of batch entry b. s: a tile, then l and m of BR rows, then
** the key block's pack. */
static void fwd_block(const sdpa_job *j, int64_t b, int64_t qb, char *s) {
  const ltK_sdpa_geom *g = j->g;
  mat Q = mat_of(j->q, g, b), K = mat_of(j->k, g, b), V = mat_of(j->v, g, b);
  int64_t i0 = qb * BR, nr = ltC_min(BR, g->L - i0), ev = g->Ev, ms_r = 0, ms_c = 0;
  const char *mk = mask_at(j, b, &ms_r, &ms_c);
  char *o = (char *)lt_data(j->out) + (size_t)((b * g->L + i0) * ev) * j->es;
  char *lse = (char *)lt_data(j->lse) + (size_t)(b * g->L + i0) * j->es;
  double *l = (double *)(s + (size_t)BR * BC * j->es);
  char *m = (char *)(l + BR);
  kv_pack pk = pack_at(m + BR * sizeof(double), g);
  memset(o, 0, (size_t)(nr * ev) * j->es);
  for (int64_t r = 0; r < nr; r++) {
    l[r] = 0;
    if (j->dt == LT_FLOAT32)
      ((float *)m)[r] = -INFINITY;
    else
      ((double *)m)[r] = -INFINITY;
  }
  int64_t kend = keys_seen(g, i0, nr);
  for (int64_t j0 = 0; j0 < kend; j0 += BC) {
    tile_pos p = {.i0 = i0, .j0 = j0, .nr = nr, .nc = ltC_min(BC, kend - j0)};
    pack_block(j, &pk, &K, NULL, b, j0, p.nc);
    scores_tile(j, &Q, &K, &pk, mk, ms_r, ms_c, p, s);
    if (j->dt == LT_FLOAT32)
      j->tk.fwd((float *)s, nr, p.nc, causal_lim0(g, p), (float *)m, l, (float *)o, ev, ev);
    else
      fwd_tile_f64((double *)s, nr, p.nc, causal_lim0(g, p), (double *)m, l, (double *)o, ev,
                   ev);
    if (g->dropout_p > 0) (j->dt == LT_FLOAT32 ? drop_fwd_f32 : drop_fwd_f64)(g, b, p, s);
    tile_prod(j, false, nr, ev, p.nc, 1.0, s, BC, row_at(&V, j0, j->es), V.ld, true, o, ev,
              (ltC_band){LTC_BAND_K_UPTO, causal_lim0(g, p)});
  }
  /* l = 0 (no key took part) makes the row NaN, as the composed form's softmax; with no keys
  ** at all (S = 0) the composed form's product is an empty sum, 0 */
  for (int64_t r = 0; r < nr; r++) {
    double inv = 1.0 / l[r], none = g->S == 0 ? 0.0 : NAN;
    if (j->dt == LT_FLOAT32) {
      float *orow = (float *)o + r * ev, fi = (float)inv;
      for (int64_t e = 0; e < ev; e++) orow[e] = l[r] > 0 ? orow[e] * fi : (float)none;
      ((float *)lse)[r] = ((float *)m)[r] + (float)log(l[r]);
    } else {
      double *orow = (double *)o + r * ev;
      for (int64_t e = 0; e < ev; e++) orow[e] = l[r] > 0 ? orow[e] * inv : none;
      ((double *)lse)[r] = ((double *)m)[r] + log(l[r]);
    }
  }
}

/* A task's scratch, its tiles on 64-byte lines, so that the exponentials' vector loop stores
** whole vectors where the row sums read them back (it peels lanes to reach a line otherwise).
** With the whole-block loops of fwd_tile_f32, causal attention over 16 x 4 heads of 64 x 32 on
** the Zen 4 EPYC, one thread: forward 553 -> 530 us, with backward 1326 -> 1282 (alignment
** alone: 541 and 1300). From malloc, aligned here (*base is what to free): glibc's
** aligned_alloc left pieces that a transformer's training loop never gave back (its resident
** memory grew 51 KB a step, spec/memory_spec.lua). */
static char *scratch_alloc(size_t bytes, void **base) {
  char *p = malloc(bytes + 63);
  *base = p;
  return p ? (char *)(((uintptr_t)p + 63) & ~(uintptr_t)63) : NULL;
}

/* (m is kept in doubles' room, so that the pack after it is aligned for floats) */
static size_t fwd_scratch(const ltK_sdpa_geom *g, size_t es) {
  return (size_t)BR * BC * es + 2 * BR * sizeof(double) + pack_floats(g, false) * sizeof(float);
}

static void fwd_range(int64_t u0, int64_t u1, void *ud) {
  sdpa_job *j = ud;
  void *base;
  char *s = scratch_alloc(fwd_scratch(j->g, j->es), &base);
  if (!s) {
    atomic_store(&j->oom, true);
    return;
  }
  for (int64_t u = u0; u < u1; u++) fwd_block(j, u / j->nqb, u % j->nqb, s);
  free(base);
}

/* D[i] = dO[i] . O[i] for the rows of batch entry b (sums in double). */
static void row_dots(const sdpa_job *j, int64_t b, const mat *dO, char *d) {
  const ltK_sdpa_geom *g = j->g;
  const char *o = (const char *)lt_data(j->out) + (size_t)(b * g->L * g->Ev) * j->es;
  for (int64_t i = 0; i < g->L; i++) {
    double acc = 0;
    if (j->dt == LT_FLOAT32) {
      const float *x = (const float *)o + i * g->Ev, *y = (const float *)row_at(dO, i, j->es);
      ((float *)d)[i] = (float)j->tk.dot(x, y, g->Ev);
    } else {
      const double *x = (const double *)o + i * g->Ev, *y = (const double *)row_at(dO, i, j->es);
      for (int64_t e = 0; e < g->Ev; e++) acc += x[e] * y[e];
      ((double *)d)[i] = acc;
    }
  }
}

/* Batch entry b's operands as the backward reads them. */
typedef struct bwd_mats {
  mat Q, K, V, dO, dQ, dK, dV;
  const char *mk, *lse;
  int64_t ms_r, ms_c;
  int64_t b;   /* the batch entry */
} bwd_mats;

static bwd_mats bwd_mats_of(const sdpa_job *j, int64_t b) {
  const ltK_sdpa_geom *g = j->g;
  size_t es = j->es;
  int64_t L = g->L;
  bwd_mats m = {
      .Q = mat_of(j->q, g, b), .K = mat_of(j->k, g, b), .V = mat_of(j->v, g, b),
      .dO = mat_of(j->dout, g, b),
      .dQ = mat_of(j->dq, g, b), .dK = mat_of(j->dk, g, b), .dV = mat_of(j->dv, g, b),
      .lse = (const char *)lt_data(j->lse) + (size_t)(b * L) * es,
      .b = b,
  };
  m.mk = mask_at(j, b, &m.ms_r, &m.ms_c);
  return m;
}

/* What a backward pass over tiles adds to: dQ, or dK and dV, or all three. */
enum { GRAD_Q = 1, GRAD_KV = 2, GRAD_ALL = GRAD_Q | GRAD_KV };

/* Whether tile t has a key some row of it sees. */
static bool tile_seen(const ltK_sdpa_geom *g, tile_pos t) {
  return !g->causal || t.j0 <= t.i0 + t.nr - 1;
}

/* The backward of tile t: P recomputed, dP and dS, then its parts of dV and dK (GRAD_KV) and of
** dQ (GRAD_Q), each added in the order the caller walks the tiles. d: D of the entry's rows;
** s: the P and dS tiles; pk: room for the key block's pack. */
static void bwd_tile(const sdpa_job *j, const bwd_mats *m, tile_pos t, const char *d, int want,
                     char *s, kv_pack *pk) {
  const ltK_sdpa_geom *g = j->g;
  size_t es = j->es;
  int64_t i0 = t.i0, j0 = t.j0, nc = t.nc, E = g->E, ev = g->Ev, lim0 = causal_lim0(g, t);
  ltC_band upto = {LTC_BAND_K_UPTO, lim0}, from = {LTC_BAND_K_FROM, lim0};
  char *p = s, *dp = s + (size_t)BR * BC * es;
  pack_block(j, pk, &m->K, &m->V, m->b, j0, nc);
  scores_tile(j, &m->Q, &m->K, pk, m->mk, m->ms_r, m->ms_c, t, p);
  if (j->dt == LT_FLOAT32)
    j->tk.bwd_p((float *)p, t.nr, nc, lim0, (const float *)m->lse + i0);
  else
    bwd_p_f64((double *)p, t.nr, nc, lim0, (const double *)m->lse + i0);
  bool drop = g->dropout_p > 0;
  if ((want & GRAD_KV) && !drop)
    tile_prod(j, true, nc, ev, t.nr, 1.0, p, BC, row_at(&m->dO, i0, es), m->dO.ld, true,
              row_at(&m->dV, j0, es), m->dV.ld, from);
  if (j->own_mm)   /* dP = dO V^T */
    ltC_tile_mm(t.nr, nc, ev, 1.0f, (const float *)row_at(&m->dO, i0, es), m->dO.ld, 1, pk->vt,
                nc, false, (float *)dp, BC, (ltC_band){LTC_BAND_N_UPTO, lim0});
  else
    gemm(j->dt, false, true, t.nr, nc, ev, 1.0, row_at(&m->dO, i0, es), m->dO.ld,
         row_at(&m->V, j0, es), m->V.ld, 0.0, dp, BC);
  if (drop) {   /* dS, and P Z for dV (the weights that multiplied V) */
    (j->dt == LT_FLOAT32 ? drop_bwd_f32 : drop_bwd_f64)(g, m->b, t, p, dp, d);
    if (want & GRAD_KV)
      tile_prod(j, true, nc, ev, t.nr, 1.0, p, BC, row_at(&m->dO, i0, es), m->dO.ld, true,
                row_at(&m->dV, j0, es), m->dV.ld, from);
  } else if (j->dt == LT_FLOAT32) {
    j->tk.bwd_ds((float *)dp, (const float *)p, t.nr, nc, (const float *)d + i0);
  } else {
    bwd_ds_f64((double *)dp, (const double *)p, t.nr, nc, (const double *)d + i0);
  }
  if (want & GRAD_Q)
    tile_prod(j, false, t.nr, E, nc, g->scale, dp, BC, row_at(&m->K, j0, es), m->K.ld, true,
              row_at(&m->dQ, i0, es), m->dQ.ld, upto);
  if (want & GRAD_KV)
    tile_prod(j, true, nc, E, t.nr, g->scale, dp, BC, row_at(&m->Q, i0, es), m->Q.ld, true,
              row_at(&m->dK, j0, es), m->dK.ld, from);
}

static tile_pos tile_at(const ltK_sdpa_geom *g, int64_t i0, int64_t j0) {
  return (tile_pos){.i0 = i0, .j0 = j0, .nr = ltC_min(BR, g->L - i0),
                    .nc = ltC_min(BC, g->S - j0)};
}

/* One backward task: batch entry b, every tile, key blocks outer. s: two tiles, then D, then
** the key block's pack. */
static void bwd_entry(const sdpa_job *j, int64_t b, char *s) {
  const ltK_sdpa_geom *g = j->g;
  size_t es = j->es;
  bwd_mats m = bwd_mats_of(j, b);
  char *d = s + (size_t)(2 * BR * BC) * es;
  kv_pack pk = pack_at(d + (size_t)g->L * sizeof(double), g);
  zero_rows(&m.dQ, 0, g->L, g->E, es);
  zero_rows(&m.dK, 0, g->S, g->E, es);
  zero_rows(&m.dV, 0, g->S, g->Ev, es);
  row_dots(j, b, &m.dO, d);
  for (int64_t j0 = 0; j0 < g->S; j0 += BC)
    for (int64_t i0 = 0; i0 < g->L; i0 += BR) {
      tile_pos t = tile_at(g, i0, j0);
      if (tile_seen(g, t)) bwd_tile(j, &m, t, d, GRAD_ALL, s, &pk);
    }
}

static void bwd_range(int64_t b0, int64_t b1, void *ud) {
  sdpa_job *j = ud;
  /* D in doubles' room, so that the pack after it is aligned for floats */
  void *base;
  char *s = scratch_alloc((size_t)(2 * BR * BC) * j->es + (size_t)j->g->L * sizeof(double) +
                              pack_floats(j->g, true) * sizeof(float),
                          &base);
  if (!s) {
    atomic_store(&j->oom, true);
    return;
  }
  for (int64_t b = b0; b < b1; b++) bwd_entry(j, b, s);
  free(base);
}

/* With fewer batch entries than threads the backward splits in two passes over blocks: one
** task per (entry, key block) for dK and dV, then one per (entry, query block) for dQ, after
** D of every row (j->d). Each gradient gets the same additions in the same order as in
** bwd_entry, so the bits do not change; the price is dP and dS computed twice. */
static void bwd_dots(int64_t b0, int64_t b1, void *ud) {
  sdpa_job *j = ud;
  for (int64_t b = b0; b < b1; b++) {
    mat dO = mat_of(j->dout, j->g, b);
    row_dots(j, b, &dO, j->d + (size_t)(b * j->g->L) * j->es);
  }
}

static void bwd_split_range(int64_t u0, int64_t u1, void *ud, bool keys) {
  sdpa_job *j = ud;
  const ltK_sdpa_geom *g = j->g;
  size_t es = j->es;
  void *base;
  char *s =
      scratch_alloc((size_t)(2 * BR * BC) * es + pack_floats(g, true) * sizeof(float), &base);
  if (!s) {
    atomic_store(&j->oom, true);
    return;
  }
  kv_pack pk = pack_at(s + (size_t)(2 * BR * BC) * es, g);
  int64_t per = keys ? j->nkb : j->nqb;
  for (int64_t u = u0; u < u1; u++) {
    int64_t b = u / per, blk = u % per;
    bwd_mats m = bwd_mats_of(j, b);
    const char *d = j->d + (size_t)(b * g->L) * es;
    if (keys) {
      int64_t j0 = blk * BC, nc = ltC_min(BC, g->S - j0);
      zero_rows(&m.dK, j0, nc, g->E, es);
      zero_rows(&m.dV, j0, nc, g->Ev, es);
      for (int64_t i0 = 0; i0 < g->L; i0 += BR) {
        tile_pos t = tile_at(g, i0, j0);
        if (tile_seen(g, t)) bwd_tile(j, &m, t, d, GRAD_KV, s, &pk);
      }
    } else {
      int64_t i0 = blk * BR;
      zero_rows(&m.dQ, i0, ltC_min(BR, g->L - i0), g->E, es);
      for (int64_t j0 = 0; j0 < g->S; j0 += BC) {
        tile_pos t = tile_at(g, i0, j0);
        if (tile_seen(g, t)) bwd_tile(j, &m, t, d, GRAD_Q, s, &pk);
      }
    }
  }
  free(base);
}

static void bwd_keys_range(int64_t u0, int64_t u1, void *ud) {
  bwd_split_range(u0, u1, ud, true);
}
static void bwd_queries_range(int64_t u0, int64_t u1, void *ud) {
  bwd_split_range(u0, u1, ud, false);
}

static int64_t batch_count(const ltK_sdpa_geom *g) {
  int64_t n = 1;
  for (int d = 0; d < g->nbd; d++) n *= g->batch[d];
  return n;
}

int ltC_sdpa(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *out, lt_tensor *lse,
             const lt_tensor *q, const lt_tensor *k, const lt_tensor *v, const lt_tensor *mask) {
  int64_t nb = batch_count(g);
  if (nb == 0 || g->L == 0) return 0;
  sdpa_job j = {.g = g, .dt = q->dtype, .es = lt_dtype_size(q->dtype), .q = q, .k = k, .v = v,
                .mask = mask, .out = out, .lse = lse, .nqb = (g->L + BR - 1) / BR,
                .tk = tile_kernels_for_isa(), .own_mm = q->dtype == LT_FLOAT32 && ltC_tile_mm_ok()};
  atomic_init(&j.oom, false);
  ltC_blas_single();
  int64_t work = BR * (g->S * (g->E + g->Ev) + 1);   /* multiply-adds of a task */
  ltB_parallel_for(ctx, nb * j.nqb, ltC_grain(work), fwd_range, &j);
  if (atomic_load(&j.oom))
    return ltB_fail(ctx, "scaled_dot_product_attention: out of memory for a work tile");
  return 0;
}

int ltC_sdpa_backward(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *dq, lt_tensor *dk,
                      lt_tensor *dv, const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                      const lt_tensor *mask, const lt_tensor *out, const lt_tensor *lse,
                      const lt_tensor *dout) {
  int64_t nb = batch_count(g);
  if (nb == 0) return 0;
  sdpa_job j = {.g = g, .dt = q->dtype, .es = lt_dtype_size(q->dtype), .q = q, .k = k, .v = v,
                .mask = mask, .out = out, .lse = lse, .dout = dout, .dq = dq, .dk = dk, .dv = dv,
                .tk = tile_kernels_for_isa(), .own_mm = q->dtype == LT_FLOAT32 && ltC_tile_mm_ok()};
  atomic_init(&j.oom, false);
  ltC_blas_single();
  j.nqb = (g->L + BR - 1) / BR;
  j.nkb = (g->S + BC - 1) / BC;
  if (nb >= ctx->num_threads || (j.nqb <= 1 && j.nkb <= 1)) {
    int64_t work = g->L * g->S * (2 * g->E + 2 * g->Ev) + 1;
    ltB_parallel_for(ctx, nb, ltC_grain(work), bwd_range, &j);
  } else {
    j.d = malloc((size_t)(nb * g->L) * j.es + 1);
    if (!j.d)
      return ltB_fail(ctx, "scaled_dot_product_attention: out of memory for %lld row sums",
                      (long long)(nb * g->L));
    ltB_parallel_for(ctx, nb, 1, bwd_dots, &j);
    ltB_parallel_for(ctx, nb * j.nkb, 1, bwd_keys_range, &j);
    ltB_parallel_for(ctx, nb * j.nqb, 1, bwd_queries_range, &j);
    free(j.d);
  }
  if (atomic_load(&j.oom))
    return ltB_fail(ctx, "scaled_dot_product_attention: out of memory for a work tile");
  return 0;
}
