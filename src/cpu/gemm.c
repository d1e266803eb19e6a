/*
** cpu/gemm.c -- the cpu matrix-product kernels: OpenBLAS for float32/float64, plain loops for
** int64, behind the table's matmul (a broadcast batch of products).
**
** Every product is one routine underneath: C[s] = alpha * A[s] @ B[s] + beta * C[s] over a
** (possibly broadcast) batch s, where each operand is described by raw element strides. A
** transposed view is just a matrix with its row and column strides swapped, so transposes never
** copy: they become BLAS transpose flags. Batches fold into one big GEMM when the memory layout
** allows it -- (B,T,K)x(K,N) is a single (B*T,K)x(K,N) call and the weight gradient of that
** product is a single (K,B*T)x(B*T,N) call -- and otherwise run one GEMM per batch entry.
** Broadcast batch dims of C are reduced inside the same loop (beta = 1 accumulation).
*/
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "../core.h"

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

/* OpenBLAS's pthread build keeps its workers busy-waiting for 2^28 TSC cycles (~0.1 s) after
** each threaded call, so a training loop at 2 threads burned a third core's worth of CPU and a
** pure-Lua loop after a matmul cost twice its time. The timeout is read from the environment
** only when OpenBLAS starts its pool, in its constructor, before Lantern can act. So, once and
** unless the user chose a timeout, Lantern has OpenBLAS read a short one and stops the pool; the
** next threaded call restarts it (OpenBLAS does the same after fork) with workers that poll for
** 2^BLAS_SPIN_LOG2 cycles, tens of microseconds, then sleep. Those two entry points are
** internal to OpenBLAS, so they are weak: a build without them is left as it is. */
#define BLAS_SPIN_LOG2 "16"
extern void openblas_read_env(void) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));

static void quiet_blas_workers(void) {
  if (!openblas_read_env || !blas_thread_shutdown_) return;
  if (openblas_get_parallel() != 1 || getenv("OPENBLAS_THREAD_TIMEOUT")) return;   /* 1: pthreads */
  /* unset again at once, so child processes see the environment the user gave */
  if (setenv("OPENBLAS_THREAD_TIMEOUT", BLAS_SPIN_LOG2, 0) != 0) return;
  openblas_read_env();
  unsetenv("OPENBLAS_THREAD_TIMEOUT");
  blas_thread_shutdown_();
}

/* One thread budget for OpenBLAS and Lantern's loops: follow ctx before every call. */
static void blas_threads(lt_ctx *ctx) {
  static pthread_once_t quiet = PTHREAD_ONCE_INIT;
  pthread_once(&quiet, quiet_blas_workers);
  int nt = ctx->num_threads < 1 ? 1 : ctx->num_threads;
  if (openblas_get_num_threads() != nt) openblas_set_num_threads(nt);
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

/* y = alpha * M x + beta * y with M (rows x cols) strided: a BLAS gemv. Returns false if the
** layout does not suit BLAS. */
static bool blas_gemv(lt_ctx *ctx, lt_dtype dt, const mat_t *M, double alpha, const char *x,
                      int incx, double beta, char *y, int incy) {
  int64_t ld;
  int kind = layout(M->rows, M->cols, M->rs, M->cs, &ld);
  if (!kind || !incx || !incy) return false;
  blas_threads(ctx);
  /* row-major M: NoTrans over (rows x cols); column-major M: its transpose is row-major */
  enum CBLAS_TRANSPOSE tr = kind == 1 ? CblasNoTrans : CblasTrans;
  int r = (int)(kind == 1 ? M->rows : M->cols), c = (int)(kind == 1 ? M->cols : M->rows);
  if (dt == LT_FLOAT32)
    cblas_sgemv(CblasRowMajor, tr, r, c, (float)alpha, (const float *)M->p, (int)ld,
                (const float *)x, incx, (float)beta, (float *)y, incy);
  else
    cblas_dgemv(CblasRowMajor, tr, r, c, alpha, (const double *)M->p, (int)ld,
                (const double *)x, incx, beta, (double *)y, incy);
  return true;
}

/* C (m x n) = alpha * A (m x k) @ B (k x n) + beta * C, all strided, pointers at batch 0. */
static void gemm_raw(lt_ctx *ctx, lt_dtype dt, int64_t m, int64_t n, int64_t k, double alpha,
                     const mat_t *A, const mat_t *B, double beta, const mat_t *C) {
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
      blas_threads(ctx);
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
    if (ix && iy && blas_gemv(ctx, dt, A, alpha, B->p, ix, beta, C->p, iy)) return;
  } else if (m == 1) {      /* C[0,:] = B^T @ A[0,:] */
    mat_t bt = mat_transposed(B);
    int ix = vec_inc(k, A->cs), iy = vec_inc(n, C->cs);
    if (ix && iy && blas_gemv(ctx, dt, &bt, alpha, A->p, ix, beta, C->p, iy)) return;
  } else {
    int64_t lda, ldb, ldc;
    int kc = layout(m, n, C->rs, C->cs, &ldc);
    const mat_t *a = A, *b = B;
    mat_t at, bt;
    int64_t mm = m, nn = n;
    if (kc == 2) {   /* column-major C: compute C^T = B^T A^T, which is row-major */
      at = mat_transposed(B);
      bt = mat_transposed(A);
      a = &at;
      b = &bt;
      mm = n;
      nn = m;
    }
    int ka = kc ? layout(a->rows, a->cols, a->rs, a->cs, &lda) : 0;
    int kb = kc ? layout(b->rows, b->cols, b->rs, b->cs, &ldb) : 0;
    if (kc && ka && kb) {
      blas_threads(ctx);
      enum CBLAS_TRANSPOSE ta = ka == 1 ? CblasNoTrans : CblasTrans;
      enum CBLAS_TRANSPOSE tb = kb == 1 ? CblasNoTrans : CblasTrans;
      if (dt == LT_FLOAT32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)mm, (int)nn, (int)k, (float)alpha,
                    (const float *)a->p, (int)lda, (const float *)b->p, (int)ldb, (float)beta,
                    (float *)C->p, (int)ldc);
      else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)mm, (int)nn, (int)k, alpha,
                    (const double *)a->p, (int)lda, (const double *)b->p, (int)ldb, beta,
                    (double *)C->p, (int)ldc);
      return;
    }
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

/* C[s] = alpha * A[s] @ B[s] + beta * C[s] for every s in batch shape S (nb dims). Where C is
** broadcast along a batch dim (bst 0) the products over that dim are summed into it. */
static void batched(lt_ctx *ctx, lt_dtype dt, int nb, const int64_t *S, int64_t m, int64_t n,
                    int64_t k, double alpha, const mat_t *A, const mat_t *B, double beta,
                    const mat_t *C) {
  int64_t P = ltB_shape_numel(nb, S);
  if (P == 0 || m == 0 || n == 0) return;
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
        gemm_raw(ctx, dt, P * m, n, k, alpha, &a2, B, beta, &c2);
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
        gemm_raw(ctx, dt, m, n, P * k, alpha, &a2, &b2, beta, C);
        return;
      }
    }
  }
  size_t es = lt_dtype_size(dt);
  int64_t idx[LT_MAX_DIMS] = {0};
  for (int64_t s = 0; s < P; s++) {
    int64_t oa = 0, ob = 0, oc = 0;
    bool first = true;   /* first product landing on this C entry */
    for (int d = 0; d < nb; d++) {
      oa += idx[d] * A->bst[d];
      ob += idx[d] * B->bst[d];
      oc += idx[d] * C->bst[d];
      if (C->bst[d] == 0 && idx[d] != 0) first = false;
    }
    mat_t a = *A, b = *B, c = *C;
    a.p += oa * (int64_t)es;
    b.p += ob * (int64_t)es;
    c.p += oc * (int64_t)es;
    gemm_raw(ctx, dt, m, n, k, alpha, &a, &b, first ? beta : 1.0, &c);
    for (int d = nb - 1; d >= 0; d--) {
      if (++idx[d] < S[d]) break;
      idx[d] = 0;
    }
  }
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

/* The table's batched product over the nb batch dims `batch`. */
void ltC_matmul(lt_ctx *ctx, int nb, const int64_t *batch, double alpha, const lt_tensor *a,
                ltK_mat_dims da, const lt_tensor *b, ltK_mat_dims db, double beta, lt_tensor *c,
                ltK_mat_dims dc) {
  mat_t A = describe(a, da.has_rows, da.has_cols, nb, da.transposed);
  mat_t B = describe(b, db.has_rows, db.has_cols, nb, db.transposed);
  mat_t C = describe(c, dc.has_rows, dc.has_cols, nb, false);
  batched(ctx, c->dtype, nb, batch, C.rows, C.cols, A.cols, alpha, &A, &B, beta, &C);
}
