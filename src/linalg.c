/*
** linalg.c -- matrix products: the cpu GEMM kernel (OpenBLAS for float32/float64, plain loops
** for int64) and mm, bmm, matmul, addmm, mv, dot, outer with their backward functions.
**
** Every product here is one routine underneath: C[s] = alpha * A[s] @ B[s] + beta * C[s] over a
** (possibly broadcast) batch s, where each operand is described by raw element strides. A
** transposed view is just a matrix with its row and column strides swapped, so transposes never
** copy: they become BLAS transpose flags. Batches fold into one big GEMM when the memory layout
** allows it -- (B,T,K)x(K,N) is a single (B*T,K)x(K,N) call and the weight gradient of that
** product is a single (K,B*T)x(B*T,N) call -- and otherwise run one GEMM per batch entry.
** Broadcast batch dims of a gradient are reduced inside the same loop (beta = 1 accumulation).
*/
#include <cblas.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core.h"

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
  int64_t P = lt_shape_numel(nb, S);
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

/* The backend table's GEMM: C = alpha * op(A) @ op(B) + beta * C for 2-D tensors. */
void lt_cpu_gemm(lt_ctx *ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                 const lt_tensor *a, const lt_tensor *b, double beta, lt_tensor *c) {
  mat_t A = describe(a, true, true, 0, ta);
  mat_t B = describe(b, true, true, 0, tb);
  mat_t C = describe(c, true, true, 0, false);
  gemm_raw(ctx, c->dtype, m, n, k, alpha, &A, &B, beta, &C);
}

/* ------------------------------------------------------------ operand preparation */

/* Whether every matrix of t (has_r/has_c as in describe) is laid out for BLAS. */
static bool blas_ready(const lt_tensor *t, bool has_r, bool has_c) {
  if (t->dtype != LT_FLOAT32 && t->dtype != LT_FLOAT64) return true;
  mat_t d = describe(t, has_r, has_c, 0, false);
  int64_t ld;
  if (!layout(d.rows, d.cols, d.rs, d.cs, &ld)) return false;
  if (d.rows > 1 && d.rs > INT_MAX) return false;
  if (d.cols > 1 && d.cs > INT_MAX) return false;
  return true;
}

/* t itself (new ref) when BLAS can read it, else a contiguous copy made without recording. */
static int ready(lt_ctx *ctx, lt_tensor *t, bool has_r, bool has_c, lt_tensor **out) {
  if (blas_ready(t, has_r, has_c)) {
    *out = lt_retain(t);
    return 0;
  }
  bool old = ctx->grad_enabled;
  ctx->grad_enabled = false;
  int rc = lt_contiguous(ctx, out, t);
  ctx->grad_enabled = old;
  return rc;
}

/* Whether t is dense with its last two dims swapped (a transposed contiguous matrix batch). */
static bool transposed_dense(const lt_tensor *t) {
  if (t->ndim < 2) return false;
  int64_t sz[LT_MAX_DIMS], st[LT_MAX_DIMS];
  memcpy(sz, t->size, sizeof sz);
  memcpy(st, t->stride, sizeof st);
  int r = t->ndim - 2, c = t->ndim - 1;
  int64_t x = sz[r];
  sz[r] = sz[c];
  sz[c] = x;
  x = st[r];
  st[r] = st[c];
  st[c] = x;
  if (sz[r] == 1 || sz[c] == 1) return false;   /* nothing to gain */
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (sz[i] != 1 && st[i] != s) return false;
    s *= sz[i];
  }
  return true;
}

/* New uninitialised tensor of shape (ndim,size); with `transposed` its last two dims are laid
** out column-major (so a gradient matches a transposed-view parameter and needs no copy). */
static int empty_layout(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim,
                        const int64_t *size, bool transposed) {
  if (!transposed) return lt_empty(ctx, out, dt, ndim, size);
  int64_t sz[LT_MAX_DIMS], st[LT_MAX_DIMS];
  memcpy(sz, size, (size_t)ndim * sizeof *sz);
  sz[ndim - 2] = size[ndim - 1];
  sz[ndim - 1] = size[ndim - 2];
  lt_tensor *t;
  if (lt_empty(ctx, &t, dt, ndim, sz)) return -1;
  memcpy(st, t->stride, (size_t)ndim * sizeof *st);
  int64_t x = st[ndim - 2];
  st[ndim - 2] = st[ndim - 1];
  st[ndim - 1] = x;
  *out = lt_alias(t, ndim, size, st, t->offset);
  lt_release(t);
  if (!*out) return lt_fail(ctx, "matmul: out of memory");
  return 0;
}

/* ------------------------------------------------------------ the product node */

typedef struct {
  bool a_r, a_c, b_r, b_c, o_r, o_c;   /* which matrix dims each operand has */
  bool a_t, b_t;                       /* input was a transposed dense matrix batch */
  int off;                             /* index of `a` among the inputs (addmm: 1) */
  double alpha, beta;
  lt_dtype dt;
  int a_nd, b_nd, in_nd;
  int64_t a_size[LT_MAX_DIMS], b_size[LT_MAX_DIMS], in_size[LT_MAX_DIMS];
} mm_extra;

/* Runs out = alpha * a @ b + beta * out over out's batch dims. */
static void mm_compute(lt_ctx *ctx, const mm_extra *e, lt_tensor *a, lt_tensor *b,
                       lt_tensor *out, double alpha, double beta) {
  int nb = out->ndim - (int)e->o_r - (int)e->o_c;
  mat_t A = describe(a, e->a_r, e->a_c, nb, false);
  mat_t B = describe(b, e->b_r, e->b_c, nb, false);
  mat_t C = describe(out, e->o_r, e->o_c, nb, false);
  batched(ctx, out->dtype, nb, out->size, C.rows, C.cols, A.cols, alpha, &A, &B, beta, &C);
}

static int mm_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const mm_extra *e = self->extra;
  lt_tensor *a = NULL, *b = NULL, *g = NULL;
  bool need_in = e->off > 0 && lt_needs_input_grad(self, 0);
  bool need_a = lt_needs_input_grad(self, e->off);
  bool need_b = lt_needs_input_grad(self, e->off + 1);
  if (need_b && lt_saved_get(ctx, self, 0, &a)) return -1;
  if (need_a && lt_saved_get(ctx, self, 1, &b)) return -1;
  if (ready(ctx, gout[0], e->o_r, e->o_c, &g)) return -1;
  int nb = g->ndim - (int)e->o_r - (int)e->o_c;
  int rc = 0;
  if (need_in) {
    lt_tensor *s;
    rc = lt_sum_to(ctx, &s, gout[0], e->in_nd, e->in_size);
    if (!rc && e->beta != 1) {
      rc = lt_binary_scalar(ctx, &gin[0], LT_MUL, s, e->beta, false, false);
      lt_release(s);
    } else if (!rc) {
      gin[0] = s;
    }
  }
  if (!rc && need_a) {   /* dA = dC @ B^T, summed over A's broadcast batch dims */
    lt_tensor *ga;
    rc = empty_layout(ctx, &ga, e->dt, e->a_nd, e->a_size, e->a_t);
    if (!rc) {
      mat_t C = describe(ga, e->a_r, e->a_c, nb, false);
      mat_t A = describe(g, e->o_r, e->o_c, nb, false);
      mat_t B = describe(b, e->b_r, e->b_c, nb, true);
      batched(ctx, e->dt, nb, g->size, C.rows, C.cols, A.cols, e->alpha, &A, &B, 0.0, &C);
      gin[e->off] = ga;
    }
  }
  if (!rc && need_b) {   /* dB = A^T @ dC, summed over B's broadcast batch dims */
    lt_tensor *gb;
    rc = empty_layout(ctx, &gb, e->dt, e->b_nd, e->b_size, e->b_t);
    if (!rc) {
      mat_t C = describe(gb, e->b_r, e->b_c, nb, false);
      mat_t A = describe(a, e->a_r, e->a_c, nb, true);
      mat_t B = describe(g, e->o_r, e->o_c, nb, false);
      batched(ctx, e->dt, nb, g->size, C.rows, C.cols, A.cols, e->alpha, &A, &B, 0.0, &C);
      gin[e->off + 1] = gb;
    }
  }
  lt_release(g);
  return rc;
}

/* Node names follow what PyTorch shows as grad_fn for each form of the product. */
static const lt_node_type mm_type = {"MmBackward0", mm_backward, NULL};
static const lt_node_type bmm_type = {"BmmBackward0", mm_backward, NULL};
static const lt_node_type addmm_type = {"AddmmBackward0", mm_backward, NULL};
static const lt_node_type dot_type = {"DotBackward0", mm_backward, NULL};
static const lt_node_type mv_type = {"MvBackward0", mm_backward, NULL};
static const lt_node_type vm_type = {"SqueezeBackward3", mm_backward, NULL};
static const lt_node_type batched_type = {"UnsafeViewBackward0", mm_backward, NULL};
static const lt_node_type matbatch_type = {"CloneBackward0", mm_backward, NULL};
static const lt_node_type matbatch_flat_type = {"TransposeBackward0", mm_backward, NULL};
static const lt_node_type outer_type = {"MulBackward0", mm_backward, NULL};

static int check_dtypes(lt_ctx *ctx, const char *op, const lt_tensor *a, const lt_tensor *b) {
  char sa[256], sb[256];
  if (a->dtype != b->dtype)
    return lt_fail(ctx, "%s: expected both operands to have the same dtype, got %s %s and %s %s",
                   op, lt_dtype_name(a->dtype), LT_SHAPE(a, sa), lt_dtype_name(b->dtype),
                   LT_SHAPE(b, sb));
  if (a->dtype == LT_BOOL)
    return lt_fail(ctx, "%s: not implemented for bool tensors (shapes %s and %s)", op,
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  return 0;
}

/* Computes the product described by e into a new tensor of shape (ndim,size), optionally
** starting from beta * input (addmm), and records `type`. */
static int mm_run(lt_ctx *ctx, lt_tensor **out, const lt_node_type *type, mm_extra e,
                  lt_tensor *input, lt_tensor *a, lt_tensor *b, int ndim, const int64_t *size) {
  lt_tensor *ar = NULL, *br = NULL, *o = NULL;
  e.dt = a->dtype;
  e.a_t = transposed_dense(a);
  e.b_t = transposed_dense(b);
  e.a_nd = a->ndim;
  e.b_nd = b->ndim;
  memcpy(e.a_size, a->size, sizeof e.a_size);
  memcpy(e.b_size, b->size, sizeof e.b_size);
  if (input) {
    e.in_nd = input->ndim;
    memcpy(e.in_size, input->size, sizeof e.in_size);
  }
  if (ready(ctx, a, e.a_r, e.a_c, &ar)) return -1;
  if (ready(ctx, b, e.b_r, e.b_c, &br)) goto fail;
  if (lt_empty(ctx, &o, e.dt, ndim, size)) goto fail;
  double beta = 0;
  if (input && e.beta != 0) {
    lt_kernels(o)->copy(ctx, o, input);
    beta = e.beta;
  }
  mm_compute(ctx, &e, ar, br, o, input ? e.alpha : 1.0, beta);

  lt_tensor *ins[3];
  int n_in = 0;
  if (input) ins[n_in++] = input;
  ins[n_in++] = a;
  ins[n_in++] = b;
  lt_node *node;
  if (lt_record(ctx, type, n_in, ins, 1, &o, sizeof e, 2, &node)) goto fail;
  if (node) {
    *(mm_extra *)node->extra = e;
    if ((lt_needs_input_grad(node, e.off + 1) && lt_save(node, 0, ar, false)) ||
        (lt_needs_input_grad(node, e.off) && lt_save(node, 1, br, false))) {
      lt_fail(ctx, "%s: out of memory saving for backward", type->name);
      goto fail;
    }
  }
  lt_release(ar);
  lt_release(br);
  *out = o;
  return 0;
fail:
  lt_release(ar);
  lt_release(br);
  lt_release(o);
  return -1;
}

static mm_extra flags(bool a_r, bool a_c, bool b_r, bool b_c, bool o_r, bool o_c) {
  mm_extra e;
  memset(&e, 0, sizeof e);
  e.a_r = a_r;
  e.a_c = a_c;
  e.b_r = b_r;
  e.b_c = b_c;
  e.o_r = o_r;
  e.o_c = o_c;
  e.alpha = 1;
  e.beta = 1;
  return e;
}

/* ------------------------------------------------------------ the ops */

int lt_mm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 2 || b->ndim != 2)
    return lt_fail(ctx, "mm: expected two 2-D matrices, got shapes %s and %s", LT_SHAPE(a, sa),
                   LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "mm", a, b)) return -1;
  if (a->size[1] != b->size[0])
    return lt_fail(ctx, "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                   "%lldx%lld; shapes %s and %s)", (long long)a->size[0],
                   (long long)a->size[1], (long long)b->size[0], (long long)b->size[1],
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  int64_t size[2] = {a->size[0], b->size[1]};
  return mm_run(ctx, out, &mm_type, flags(1, 1, 1, 1, 1, 1), NULL, a, b, 2, size);
}

int lt_bmm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 3 || b->ndim != 3)
    return lt_fail(ctx, "bmm: expected two 3-D tensors, got shapes %s and %s", LT_SHAPE(a, sa),
                   LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "bmm", a, b)) return -1;
  if (a->size[0] != b->size[0] || a->size[2] != b->size[1])
    return lt_fail(ctx, "bmm: shapes %s and %s cannot be multiplied (expected batch2 of shape "
                   "[%lld, %lld, *])", LT_SHAPE(a, sa), LT_SHAPE(b, sb), (long long)a->size[0],
                   (long long)a->size[2]);
  int64_t size[3] = {a->size[0], a->size[1], b->size[2]};
  return mm_run(ctx, out, &bmm_type, flags(1, 1, 1, 1, 1, 1), NULL, a, b, 3, size);
}

int lt_mv(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *v) {
  char sa[256], sb[256];
  if (a->ndim != 2 || v->ndim != 1)
    return lt_fail(ctx, "mv: expected a 2-D matrix and a 1-D vector, got shapes %s and %s",
                   LT_SHAPE(a, sa), LT_SHAPE(v, sb));
  if (check_dtypes(ctx, "mv", a, v)) return -1;
  if (a->size[1] != v->size[0])
    return lt_fail(ctx, "mv: shapes %s and %s cannot be multiplied (%lld vs %lld)",
                   LT_SHAPE(a, sa), LT_SHAPE(v, sb), (long long)a->size[1],
                   (long long)v->size[0]);
  return mm_run(ctx, out, &mv_type, flags(1, 1, 1, 0, 1, 0), NULL, a, v, 1, a->size);
}

int lt_dot(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 1 || b->ndim != 1)
    return lt_fail(ctx, "dot: expected two 1-D tensors, got shapes %s and %s", LT_SHAPE(a, sa),
                   LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "dot", a, b)) return -1;
  if (a->size[0] != b->size[0])
    return lt_fail(ctx, "dot: shapes %s and %s have different numbers of elements",
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  return mm_run(ctx, out, &dot_type, flags(0, 1, 1, 0, 0, 0), NULL, a, b, 0, NULL);
}

int lt_outer(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 1 || b->ndim != 1)
    return lt_fail(ctx, "outer: expected two 1-D tensors, got shapes %s and %s",
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "outer", a, b)) return -1;
  int64_t size[2] = {a->size[0], b->size[0]};
  return mm_run(ctx, out, &outer_type, flags(1, 0, 0, 1, 1, 1), NULL, a, b, 2, size);
}

int lt_addmm(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *a, lt_tensor *b,
             double beta, double alpha) {
  char sa[256], sb[256], si[256], sp[256];
  if (a->ndim != 2 || b->ndim != 2)
    return lt_fail(ctx, "addmm: expected two 2-D matrices, got shapes %s and %s",
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "addmm", a, b) || check_dtypes(ctx, "addmm", input, a)) return -1;
  if (a->size[1] != b->size[0])
    return lt_fail(ctx, "addmm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                   "%lldx%lld; shapes %s and %s)", (long long)a->size[0],
                   (long long)a->size[1], (long long)b->size[0], (long long)b->size[1],
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  int64_t size[2] = {a->size[0], b->size[1]};
  int nd;
  int64_t bs[LT_MAX_DIMS];
  if (input->ndim > 2 ||
      lt_broadcast_shapes(ctx, "addmm", input->ndim, input->size, 2, size, &nd, bs) ||
      bs[0] != size[0] || bs[1] != size[1])
    return lt_fail(ctx, "addmm: input of shape %s cannot be broadcast to the product's shape "
                   "%s (from %s and %s)", LT_SHAPE(input, si),
                   lt_sizes_str(2, size, sp, sizeof sp),
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (input->dtype == LT_INT64 && (alpha != (double)(int64_t)alpha ||
                                   beta != (double)(int64_t)beta))
    return lt_fail(ctx, "addmm: alpha and beta must be integers for int64 tensors");
  mm_extra e = flags(1, 1, 1, 1, 1, 1);
  e.off = 1;
  e.alpha = alpha;
  e.beta = beta;
  return mm_run(ctx, out, &addmm_type, e, input, a, b, 2, size);
}

int lt_matmul(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  int da = a->ndim, db = b->ndim;
  if (da == 0 || db == 0)
    return lt_fail(ctx, "matmul: both arguments need to be at least 1-D, got shapes %s and %s",
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "matmul", a, b)) return -1;
  if (da == 1 && db == 1) return lt_dot(ctx, out, a, b);
  int64_t ka = a->size[da - 1], kb = db >= 2 ? b->size[db - 2] : b->size[0];
  if (ka != kb)
    return lt_fail(ctx, "matmul: shapes %s and %s cannot be multiplied (%lld columns vs %lld "
                   "rows)", LT_SHAPE(a, sa), LT_SHAPE(b, sb), (long long)ka, (long long)kb);
  int nba = da > 2 ? da - 2 : 0, nbb = db > 2 ? db - 2 : 0, nb;
  int64_t size[LT_MAX_DIMS + 2];
  if (lt_broadcast_shapes(ctx, "matmul", nba, a->size, nbb, b->size, &nb, size)) {
    /* name the full shapes, not just the batch parts */
    return lt_fail(ctx, "matmul: batch dimensions of shapes %s and %s cannot be broadcast",
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  }
  int nd = nb;
  if (da >= 2) size[nd++] = a->size[da - 2];
  if (db >= 2) size[nd++] = b->size[db - 1];
  if (nd > LT_MAX_DIMS)
    return lt_fail(ctx, "matmul: result of shapes %s and %s has too many dimensions",
                   LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  const lt_node_type *type;
  if (da == 2 && db == 2)
    type = &mm_type;
  else if (da == 2 && db == 1)
    type = &mv_type;
  else if (da == 1 && db == 2)
    type = &vm_type;
  else if (da == 2)   /* PyTorch folds and returns out^T^T.contiguous(): a copy unless flat */
    type = (a->size[0] == 1 || b->size[db - 1] == 1) ? &matbatch_flat_type : &matbatch_type;
  else
    type = &batched_type;
  return mm_run(ctx, out, type, flags(da >= 2, 1, 1, db >= 2, da >= 2, db >= 2), NULL, a, b,
                nd, size);
}
