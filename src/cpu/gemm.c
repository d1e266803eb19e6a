/*
** cpu/gemm.c -- the cpu matrix-product kernels: OpenBLAS for float32/float64, plain loops for
** int64, behind the table's matmul (a broadcast batch of products).
**
** Every product is one routine underneath: C[s] = alpha * A[s] @ B[s] + beta * C[s] over a
** (possibly broadcast) batch s, where each operand is described by raw element strides. A
** transposed view is just a matrix with its row and column strides swapped, so transposes never
** copy: they become BLAS transpose flags. Batches fold into one big GEMM when the memory layout
** allows it -- (B,T,K)x(K,N) is a single (B*T,K)x(K,N) call and the weight gradient of that
** product is a single (K,B*T)x(B*T,N) call -- and otherwise run one GEMM per batch entry (the
** entries spread over the pool when each has its own C).
** Broadcast batch dims of C are reduced inside the same loop (beta = 1 accumulation).
*/
#include <cblas.h>
#include <string.h>
#include <limits.h>
#include <stdint.h>

#include "cpu.h"

/* ------------------------------------------------------------ matrix descriptors */

/* A batch of matrices in memory: element [s][i][j] lives at p + sum(s[d]*bst[d]) + i*rs + j*cs
** (element strides, bytes come from the dtype). bst is aligned to the batch shape of the
** product; 0 marks a broadcast (or reduced) batch dim. */
typedef struct {
  char *p;
  int64_t rows, cols;
  int64_t rs, cs;
  int64_t bst[LT_MAX_DIMS];
} mat_t;

/* Describes t as a batch of matrices over nb batch dims. has_r / has_c: whether t has a row /
** column dim (a vector gets the missing one with size 1). trans: describe t's transpose. */
static mat_t describe(const lt_tensor *t, bool has_r, bool has_c, int nb, bool trans) {
  mat_t d;
  int tb = t->ndim - (int)has_r - (int)has_c;
  d.p = lt_data(t);
  d.rows = has_r ? t->size[tb] : 1;
  d.rs = has_r ? t->stride[tb] : 0;
  d.cols = has_c ? t->size[t->ndim - 1] : 1;
  d.cs = has_c ? t->stride[t->ndim - 1] : 0;
  for (int i = 0; i < nb; i++) {
    int td = i - (nb - tb);
    d.bst[i] = (td >= 0 && t->size[td] != 1) ? t->stride[td] : 0;
  }
  if (trans) {
    int64_t x = d.rows;
    d.rows = d.cols;
    d.cols = x;
    x = d.rs;
    d.rs = d.cs;
    d.cs = x;
  }
  return d;
}

/* BLAS layout of one (rows x cols) matrix with strides (rs, cs): 1 row-major, 2 column-major,
** 0 neither (or a leading dimension too large for BLAS's int). *ld gets the leading dim. */
static int layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t *ld) {
  int64_t l;
  int kind = 0;
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= cols)) {
    l = rows == 1 ? cols : rs;
    kind = 1;
  } else if ((rows == 1 || rs == 1) && (cols == 1 || cs >= rows)) {
    l = cols == 1 ? rows : cs;
    kind = 2;
  } else {
    return 0;
  }
  if (l < 1) l = 1;
  if (l > INT_MAX) return 0;
  *ld = l;
  return kind;
}

static bool fits_int(int64_t x) { return x >= 0 && x <= INT_MAX; }

/* Increment for a BLAS vector of n elements with element stride st (0 if unusable). */
static int vec_inc(int64_t n, int64_t st) {
  if (n <= 1) return 1;
  return (st >= 1 && st <= INT_MAX) ? (int)st : 0;
}

/* ------------------------------------------------------------ BLAS on Lantern's pool
** OpenBLAS always runs on one thread; a large product is cut into a grid of blocks of C that
** Lantern's pool runs, one single-threaded BLAS call each. One pool for all of Lantern's
** parallel work: OpenBLAS's own workers poll for a while after each threaded call, so at two
** threads they competed with Lantern's workers for the same cores between the GEMMs of a
** training step (an MLP step cost 1.4x its GEMMs alone at 2 threads, 1.1x at 1), and an idle
** Lantern could leave them spinning. */

/* Work (multiply-adds) below which one more thread does not pay for its wake-up. */
#define GEMM_PAR_MACS (1 << 17)
/* Blocks of C start at multiples of this many rows or columns (a multiple of every BLAS
** kernel's register tile, so that only the last block has a ragged edge). */
#define GEMM_BLOCK_ALIGN 16

void ltC_blas_single(void) {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

typedef struct {
  lt_dtype dt;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  double alpha, beta;
  const char *a, *b, *bias;
  char *c;
  int64_t bm, bn, pn;   /* block size and the number of block columns */
} gemm_job;

/* C[i0:i1, j0:j1] of the job, one BLAS call */
static void gemm_block(const gemm_job *j, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  size_t es = lt_dtype_size(j->dt);
  const char *a = j->a + (size_t)(j->ta ? i0 : i0 * j->lda) * es;
  const char *b = j->b + (size_t)(j->tb ? j0 * j->ldb : j0) * es;
  char *c = j->c + (size_t)(i0 * j->ldc + j0) * es;
  const char *bias = j->bias ? j->bias + (size_t)j0 * es : NULL;
  enum CBLAS_TRANSPOSE A = j->ta ? CblasTrans : CblasNoTrans, B = j->tb ? CblasTrans : CblasNoTrans;
  int m = (int)(i1 - i0), n = (int)(j1 - j0), k = (int)j->k;
  if (j->dt == LT_FLOAT32 &&
      ltC_sgemm(j->ta, j->tb, m, n, k, (float)j->alpha, (const float *)a, j->lda,
                (const float *)b, j->ldb, (float)j->beta, (const float *)bias, (float *)c, j->ldc))
    return;
  /* For beta = 0 OpenBLAS zeroes C in a pass of its own before adding the product, at a third
  ** of memset's speed (512 x 512: 88 us against 20, one thread); the product's own kernel
  ** then adds to C either way, so zeroing here and passing beta = 1 gives the same bits. */
  double beta = j->beta;
  if (bias) {   /* OpenBLAS reads beta's term from C: the bias goes there first */
    for (int i = 0; i < m; i++) memcpy(c + (size_t)(i * j->ldc) * es, bias, (size_t)n * es);
  } else if (beta == 0) {
    for (int i = 0; i < m; i++) memset(c + (size_t)(i * j->ldc) * es, 0, (size_t)n * es);
    beta = 1;
  }
  if (j->dt == LT_FLOAT32)
    cblas_sgemm(CblasRowMajor, A, B, m, n, k, (float)j->alpha, (const float *)a, (int)j->lda,
                (const float *)b, (int)j->ldb, (float)beta, (float *)c, (int)j->ldc);
  else
    cblas_dgemm(CblasRowMajor, A, B, m, n, k, j->alpha, (const double *)a, (int)j->lda,
                (const double *)b, (int)j->ldb, beta, (double *)c, (int)j->ldc);
}

static void gemm_blocks(int64_t t0, int64_t t1, void *ud) {
  const gemm_job *j = ud;
  for (int64_t t = t0; t < t1; t++) {
    int64_t i0 = t / j->pn * j->bm, j0 = t % j->pn * j->bn;
    gemm_block(j, i0, ltC_min(i0 + j->bm, j->m), j0, ltC_min(j0 + j->bn, j->n));
  }
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t aligned_share(int64_t len, int64_t parts) {
  return ceil_div(ceil_div(len, parts), GEMM_BLOCK_ALIGN) * GEMM_BLOCK_ALIGN;
}

/* Threads worth using for w multiply-adds, at most nt. */
static int par_threads(int nt, double w) {
  double most = w / GEMM_PAR_MACS;
  return most < nt ? (most < 1 ? 1 : (int)most) : nt;
}

/* The whole product, blocks of it over up to nt of the pool's threads. */
void ltC_blas_gemm(lt_ctx *ctx, int nt, lt_dtype dt, bool ta, bool tb, int64_t m, int64_t n,
                   int64_t k, double alpha, const void *a, int64_t lda, const void *b,
                   int64_t ldb, double beta, const void *bias, void *c, int64_t ldc) {
  gemm_job j = {.dt = dt, .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
                .ldc = ldc, .alpha = alpha, .beta = beta, .a = a, .b = b,
                .bias = beta != 0 ? bias : NULL, .c = c, .bm = m, .bn = n, .pn = 1};
  ltC_blas_single();
  nt = par_threads(nt, (double)m * (double)n * (double)k);
  /* the grid pm x pn = nt whose blocks repack the least: each block packs its rows of A and its
  ** columns of B, so the grid packs A pn times and B pm times */
  for (; nt > 1; nt--) {
    double best = -1;
    for (int pm = 1; pm <= nt; pm++) {
      if (nt % pm) continue;
      int pn = nt / pm;
      if ((pm > 1 && m < (int64_t)pm * GEMM_BLOCK_ALIGN) ||
          (pn > 1 && n < (int64_t)pn * GEMM_BLOCK_ALIGN))
        continue;
      double cost = (double)pn * (double)m + (double)pm * (double)n;
      if (best < 0 || cost < best) {
        best = cost;
        j.bm = pm > 1 ? aligned_share(m, pm) : m;
        j.bn = pn > 1 ? aligned_share(n, pn) : n;
      }
    }
    if (best >= 0) break;
  }
  j.pn = ceil_div(n, j.bn);
  int64_t blocks = ceil_div(m, j.bm) * j.pn;
  if (blocks > 1)
    ltB_parallel_for(ctx, blocks, 1, gemm_blocks, &j);
  else
    gemm_block(&j, 0, m, 0, n);
}

/* ------------------------------------------------------------ the 2-D kernel */

/* C = beta * C (beta 0 writes zeros, ignoring NaN in C). */
#define SCALE_C(T)                                                              \
  do {                                                                          \
    for (int64_t i = 0; i < m; i++)                                             \
      for (int64_t j = 0; j < n; j++) {                                         \
        T *c = (T *)C->p + i * C->rs + j * C->cs;                               \
        *c = beta == 0 ? (T)0 : (T)beta * *c;                                   \
      }                                                                         \
  } while (0)

/* Strided fallback: used for int64, and for float layouts BLAS cannot take. i-p-j order keeps
** the innermost loop running along a row of B and C. */
#define NAIVE(T)                                                                \
  do {                                                                          \
    SCALE_C(T);                                                                 \
    const T al = (T)alpha;                                                      \
    for (int64_t i = 0; i < m; i++) {                                           \
      T *crow = (T *)C->p + i * C->rs;                                          \
      const T *arow = (const T *)A->p + i * A->rs;                              \
      for (int64_t q = 0; q < k; q++) {                                         \
        const T av = al * arow[q * A->cs];                                      \
        const T *brow = (const T *)B->p + q * B->rs;                            \
        if (C->cs == 1 && B->cs == 1) {                                         \
          for (int64_t j = 0; j < n; j++) crow[j] += av * brow[j];              \
        } else {                                                                \
          for (int64_t j = 0; j < n; j++) crow[j * C->cs] += av * brow[j * B->cs]; \
        }                                                                       \
      }                                                                         \
    }                                                                           \
  } while (0)

static void gemm_naive(lt_dtype dt, int64_t m, int64_t n, int64_t k, double alpha,
                       const mat_t *A, const mat_t *B, double beta, const mat_t *C) {
  switch (dt) {
    case LT_FLOAT32: NAIVE(float); break;
    case LT_FLOAT64: NAIVE(double); break;
    case LT_INT64: NAIVE(int64_t); break;
    default: break;
  }
}

static void scale_c(lt_dtype dt, int64_t m, int64_t n, double beta, const mat_t *C) {
  if (beta == 1) return;
  switch (dt) {
    case LT_FLOAT32: SCALE_C(float); break;
    case LT_FLOAT64: SCALE_C(double); break;
    case LT_INT64: SCALE_C(int64_t); break;
    default: break;
  }
}

static mat_t mat_transposed(const mat_t *x) {
  mat_t t = *x;
  t.rows = x->cols;
  t.cols = x->rows;
  t.rs = x->cs;
  t.cs = x->rs;
  return t;
}

/* y = alpha * op(M) x + beta * y, M row-major (r x c, leading dim ld): y's elements cut into
** ranges over the pool, as the GEMM's blocks. */
typedef struct {
  lt_dtype dt;
  bool trans;
  int64_t r, c, ld, incx, incy, chunk;
  double alpha, beta;
  const char *m, *x;
  char *y;
} gemv_job;

static void gemv_ranges(int64_t t0, int64_t t1, void *ud) {
  const gemv_job *j = ud;
  size_t es = lt_dtype_size(j->dt);
  int64_t ny = j->trans ? j->c : j->r;
  for (int64_t t = t0; t < t1; t++) {
    int64_t y0 = t * j->chunk, y1 = ltC_min(y0 + j->chunk, ny);
    /* the rows y0..y1 of M, or (transposed) its columns */
    const char *m = j->m + (size_t)(j->trans ? y0 : y0 * j->ld) * es;
    char *y = j->y + (size_t)(y0 * j->incy) * es;
    int r = (int)(j->trans ? j->r : y1 - y0), c = (int)(j->trans ? y1 - y0 : j->c);
    enum CBLAS_TRANSPOSE tr = j->trans ? CblasTrans : CblasNoTrans;
    if (j->dt == LT_FLOAT32)
      cblas_sgemv(CblasRowMajor, tr, r, c, (float)j->alpha, (const float *)m, (int)j->ld,
                  (const float *)j->x, (int)j->incx, (float)j->beta, (float *)y, (int)j->incy);
    else
      cblas_dgemv(CblasRowMajor, tr, r, c, j->alpha, (const double *)m, (int)j->ld,
                  (const double *)j->x, (int)j->incx, j->beta, (double *)y, (int)j->incy);
  }
}

/* y = alpha * M x + beta * y with M (rows x cols) strided: a BLAS gemv. Returns false if the
** layout does not suit BLAS. */
static bool blas_gemv(lt_ctx *ctx, int nt, lt_dtype dt, const mat_t *M, double alpha,
                      const char *x, int incx, double beta, char *y, int incy) {
  int64_t ld;
  int kind = layout(M->rows, M->cols, M->rs, M->cs, &ld);
  if (!kind || !incx || !incy) return false;
  ltC_blas_single();
  /* row-major M: NoTrans over (rows x cols); column-major M: its transpose is row-major */
  gemv_job j = {.dt = dt, .trans = kind != 1, .r = kind == 1 ? M->rows : M->cols,
                .c = kind == 1 ? M->cols : M->rows, .ld = ld, .incx = incx, .incy = incy,
                .alpha = alpha, .beta = beta, .m = M->p, .x = x, .y = y};
  int64_t ny = j.trans ? j.c : j.r;
  nt = par_threads(nt, (double)j.r * (double)j.c);
  j.chunk = nt > 1 ? aligned_share(ny, nt) : ny;
  int64_t parts = ceil_div(ny, j.chunk);
  if (parts > 1)
    ltB_parallel_for(ctx, parts, 1, gemv_ranges, &j);
  else
    gemv_ranges(0, 1, &j);
  return true;
}

/* C = alpha * A @ B + beta * (bias in every row, or C) by ltC_blas_gemm, when C is row-major and
** A and B have BLAS layouts (m, n, k >= 1 and within int); false (nothing done) otherwise. */
static bool blas_rows(lt_ctx *ctx, int nt, lt_dtype dt, int64_t m, int64_t n, int64_t k,
                      double alpha, const mat_t *A, const mat_t *B, double beta, const void *bias,
                      const mat_t *C) {
  int64_t lda, ldb, ldc;
  if (layout(m, n, C->rs, C->cs, &ldc) != 1) return false;
  int ka = layout(A->rows, A->cols, A->rs, A->cs, &lda);
  int kb = ka ? layout(B->rows, B->cols, B->rs, B->cs, &ldb) : 0;
  if (!kb) return false;
  ltC_blas_gemm(ctx, nt, dt, ka != 1, kb != 1, m, n, k, alpha, A->p, lda, B->p, ldb, beta, bias,
                C->p, ldc);
  return true;
}

/* C (m x n) = alpha * A (m x k) @ B (k x n) + beta * C, all strided, pointers at batch 0. */
static void gemm_raw(lt_ctx *ctx, int nt, lt_dtype dt, int64_t m, int64_t n, int64_t k,
                     double alpha, const mat_t *A, const mat_t *B, double beta, const mat_t *C) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    scale_c(dt, m, n, beta, C);
    return;
  }
  bool is_float = dt == LT_FLOAT32 || dt == LT_FLOAT64;
  if (!is_float || !fits_int(m) || !fits_int(n) || !fits_int(k)) {
    gemm_naive(dt, m, n, k, alpha, A, B, beta, C);
    return;
  }
  if (m == 1 && n == 1) {   /* dot product */
    int ia = vec_inc(k, A->cs), ib = vec_inc(k, B->rs);
    if (ia && ib) {
      ltC_blas_single();
      if (dt == LT_FLOAT32) {
        float d = cblas_sdot((int)k, (const float *)A->p, ia, (const float *)B->p, ib);
        float *c = (float *)C->p;
        *c = beta == 0 ? (float)alpha * d : (float)alpha * d + (float)beta * *c;
      } else {
        double d = cblas_ddot((int)k, (const double *)A->p, ia, (const double *)B->p, ib);
        double *c = (double *)C->p;
        *c = beta == 0 ? alpha * d : alpha * d + beta * *c;
      }
      return;
    }
  } else if (n == 1) {      /* C[:,0] = A @ B[:,0] */
    int ix = vec_inc(k, B->rs), iy = vec_inc(m, C->rs);
    if (ix && iy && blas_gemv(ctx, nt, dt, A, alpha, B->p, ix, beta, C->p, iy)) return;
  } else if (m == 1) {      /* C[0,:] = B^T @ A[0,:] */
    mat_t bt = mat_transposed(B);
    int ix = vec_inc(k, A->cs), iy = vec_inc(n, C->cs);
    if (ix && iy && blas_gemv(ctx, nt, dt, &bt, alpha, A->p, ix, beta, C->p, iy)) return;
  } else {
    if (blas_rows(ctx, nt, dt, m, n, k, alpha, A, B, beta, NULL, C)) return;
    /* column-major C: compute C^T = B^T A^T, which is row-major */
    mat_t at = mat_transposed(B), bt = mat_transposed(A), ct = mat_transposed(C);
    if (blas_rows(ctx, nt, dt, n, m, k, alpha, &at, &bt, beta, NULL, &ct)) return;
  }
  gemm_naive(dt, m, n, k, alpha, A, B, beta, C);
}

/* Whether a matrix suits BLAS as it is (always true for non-float dtypes, which use loops). */
static bool mat_ok(lt_dtype dt, const mat_t *x) {
  int64_t ld;
  if (dt != LT_FLOAT32 && dt != LT_FLOAT64) return true;
  return layout(x->rows, x->cols, x->rs, x->cs, &ld) != 0;
}

/* ------------------------------------------------------------ batched products */

/* Whether the non-trivial batch dims followed by an inner dim (len, st) step through memory as
** one arithmetic sequence; *stride gets the step. */
static bool fold(int nb, const int64_t *S, const int64_t *bst, int64_t len, int64_t st,
                 int64_t *stride) {
  int64_t sz[LT_MAX_DIMS + 1], sd[LT_MAX_DIMS + 1];
  int q = 0;
  for (int d = 0; d < nb; d++)
    if (S[d] != 1) {
      sz[q] = S[d];
      sd[q++] = bst[d];
    }
  if (len != 1) {
    sz[q] = len;
    sd[q++] = st;
  }
  if (q == 0) {
    *stride = st;
    return true;
  }
  for (int i = 0; i + 1 < q; i++)
    if (sd[i] != sd[i + 1] * sz[i + 1]) return false;
  *stride = sd[q - 1];
  return true;
}

static bool all_broadcast(int nb, const int64_t *S, const int64_t *bst) {
  for (int d = 0; d < nb; d++)
    if (S[d] != 1 && bst[d] != 0) return false;
  return true;
}

static bool broadcast_any(int nb, const int64_t *S, const int64_t *bst) {
  for (int d = 0; d < nb; d++)
    if (S[d] != 1 && bst[d] == 0) return true;
  return false;
}

typedef struct {
  lt_ctx *ctx;
  lt_dtype dt;
  int nb;
  const int64_t *S;
  int64_t m, n, k;
  double alpha, beta;
  const mat_t *A, *B, *C;
  int nt;   /* threads for each product */
} batch_job;

/* The products of batch entries s0..s1 (in row-major order of S), one after another. */
static void batch_entries(int64_t s0, int64_t s1, void *ud) {
  const batch_job *j = ud;
  size_t es = lt_dtype_size(j->dt);
  int64_t idx[LT_MAX_DIMS] = {0};
  int64_t r = s0;
  for (int d = j->nb - 1; d >= 0; d--) {
    idx[d] = r % j->S[d];
    r /= j->S[d];
  }
  for (int64_t s = s0; s < s1; s++) {
    int64_t oa = 0, ob = 0, oc = 0;
    bool first = true;   /* first product landing on this C entry */
    for (int d = 0; d < j->nb; d++) {
      oa += idx[d] * j->A->bst[d];
      ob += idx[d] * j->B->bst[d];
      oc += idx[d] * j->C->bst[d];
      if (j->C->bst[d] == 0 && idx[d] != 0) first = false;
    }
    mat_t a = *j->A, b = *j->B, c = *j->C;
    a.p += oa * (int64_t)es;
    b.p += ob * (int64_t)es;
    c.p += oc * (int64_t)es;
    gemm_raw(j->ctx, j->nt, j->dt, j->m, j->n, j->k, j->alpha, &a, &b, first ? j->beta : 1.0, &c);
    for (int d = j->nb - 1; d >= 0; d--) {
      if (++idx[d] < j->S[d]) break;
      idx[d] = 0;
    }
  }
}

/* C[s] = alpha * A[s] @ B[s] + beta * C[s] for every s in batch shape S (nb dims). Where C is
** broadcast along a batch dim (bst 0) the products over that dim are summed into it. */
static void batched(lt_ctx *ctx, lt_dtype dt, int nb, const int64_t *S, int64_t m, int64_t n,
                    int64_t k, double alpha, const mat_t *A, const mat_t *B, double beta,
                    const mat_t *C) {
  int64_t P = ltB_shape_numel(nb, S);
  if (P == 0 || m == 0 || n == 0) return;
  int nt = ctx->num_threads < 1 ? 1 : ctx->num_threads;
  if (P > 1) {
    int64_t sa, sb, sc;
    /* B shared by every batch entry: the batch folds into the rows of A and C */
    if (all_broadcast(nb, S, B->bst) && !all_broadcast(nb, S, C->bst) &&
        fold(nb, S, A->bst, m, A->rs, &sa) && fold(nb, S, C->bst, m, C->rs, &sc)) {
      mat_t a2 = *A, c2 = *C;
      a2.rows = c2.rows = P * m;
      a2.rs = sa;
      c2.rs = sc;
      if (mat_ok(dt, &a2) && mat_ok(dt, &c2)) {
        gemm_raw(ctx, nt, dt, P * m, n, k, alpha, &a2, B, beta, &c2);
        return;
      }
    }
    /* C shared by every entry (a reduced gradient): the batch folds into the inner dim */
    if (all_broadcast(nb, S, C->bst) && fold(nb, S, A->bst, k, A->cs, &sa) &&
        fold(nb, S, B->bst, k, B->rs, &sb)) {
      mat_t a2 = *A, b2 = *B;
      a2.cols = b2.rows = P * k;
      a2.cs = sa;
      b2.rs = sb;
      if (mat_ok(dt, &a2) && mat_ok(dt, &b2)) {
        gemm_raw(ctx, nt, dt, m, n, P * k, alpha, &a2, &b2, beta, C);
        return;
      }
    }
  }
  batch_job j = {.ctx = ctx, .dt = dt, .nb = nb, .S = S, .m = m, .n = n, .k = k,
                 .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C, .nt = 1};
  /* entries to threads when each has its own C and they share out evenly enough; otherwise
  ** one product at a time, each over every thread */
  if (nt > 1 && !broadcast_any(nb, S, C->bst) && P >= nt && (P % nt == 0 || P >= 4 * nt)) {
    double w = (double)m * (double)n * (double)k;
    int64_t grain = w >= GEMM_PAR_MACS ? 1 : (int64_t)(GEMM_PAR_MACS / (w > 1 ? w : 1));
    ltC_blas_single();
    ltB_parallel_for(ctx, P, grain, batch_entries, &j);
    return;
  }
  j.nt = nt;
  batch_entries(0, P, &j);
}

/* The table's layout query: whether every matrix of t is laid out for BLAS. */
bool ltC_matmul_ready(const lt_tensor *t, ltK_mat_dims d) {
  if (t->dtype != LT_FLOAT32 && t->dtype != LT_FLOAT64) return true;
  mat_t m = describe(t, d.has_rows, d.has_cols, 0, false);
  int64_t ld;
  if (!layout(m.rows, m.cols, m.rs, m.cs, &ld)) return false;
  if (m.rows > 1 && m.rs > INT_MAX) return false;
  if (m.cols > 1 && m.cs > INT_MAX) return false;
  return true;
}

/* The table's addmm_row: a float product of BLAS layouts (gemm_raw's general case, C
** row-major) reads the bias where its blocks are stored. Copied into C first, the bias was
** written and read back once more (a GPT step's forward products took 3-8% longer than the
** plain product so). */
bool ltC_addmm_row(lt_ctx *ctx, double alpha, const lt_tensor *a, const lt_tensor *b,
                   double beta, const lt_tensor *bias, lt_tensor *c) {
  mat_t A = describe(a, true, true, 0, false), B = describe(b, true, true, 0, false);
  mat_t C = describe(c, true, true, 0, false);
  int64_t m = C.rows, n = C.cols, k = A.cols;
  return (c->dtype == LT_FLOAT32 || c->dtype == LT_FLOAT64) && m > 1 && n > 1 && k > 0 &&
         fits_int(m) && fits_int(n) && fits_int(k) &&
         blas_rows(ctx, ctx->num_threads < 1 ? 1 : ctx->num_threads, c->dtype, m, n, k, alpha, &A,
                   &B, beta, lt_data(bias), &C);
}

/* The table's batched product over the nb batch dims `batch`. */
void ltC_matmul(lt_ctx *ctx, int nb, const int64_t *batch, double alpha, const lt_tensor *a,
                ltK_mat_dims da, const lt_tensor *b, ltK_mat_dims db, double beta, lt_tensor *c,
                ltK_mat_dims dc) {
  mat_t A = describe(a, da.has_rows, da.has_cols, nb, da.transposed);
  mat_t B = describe(b, db.has_rows, db.has_cols, nb, db.transposed);
  mat_t C = describe(c, dc.has_rows, dc.has_cols, nb, false);
  batched(ctx, c->dtype, nb, batch, C.rows, C.cols, A.cols, alpha, &A, &B, beta, &C);
}
