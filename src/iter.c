/*
** iter.c -- broadcasting and the strided row iterator (its parallel loop is in parallel.c).
*/
#include "core.h"

int ltB_broadcast_shapes(lt_ctx *ctx, const char *op, int na, const int64_t *sa, int nb,
                         const int64_t *sb, int *ndim, int64_t *size) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char bufa[256], bufb[256];
      return ltB_fail(ctx, "%s: shapes %s and %s cannot be broadcast (size %lld vs %lld at "
                      "dimension %d)", op, ltB_sizes_str(na, sa, bufa, sizeof bufa),
                      ltB_sizes_str(nb, sb, bufb, sizeof bufb), (long long)da, (long long)db,
                      i + 1);
    }
    size[i] = da == 1 ? db : da;
  }
  *ndim = n;
  return 0;
}

void ltB_iter_init(ltB_iter *it, int nops, lt_tensor *const *ops, int ndim, const int64_t *size) {
  it->nops = nops;
  it->numel = ltB_shape_numel(ndim, size);
  /* byte strides of each operand aligned to the right, 0 along broadcast dims */
  int64_t st[LT_ITER_MAX][LT_MAX_DIMS];
  for (int k = 0; k < nops; k++) {
    const lt_tensor *t = ops[k];
    int64_t es = (int64_t)ltB_esize(t->dtype);
    for (int d = 0; d < ndim; d++) {
      int td = t->ndim - ndim + d;
      st[k][d] = (td >= 0 && t->size[td] != 1) ? t->stride[td] * es : 0;
    }
    it->data[k] = ltB_ptr(t);
  }
  /* drop size-1 dims, then merge dim d into d+1 when every operand is contiguous across */
  int n = 0;
  int64_t sz[LT_MAX_DIMS];
  for (int d = 0; d < ndim; d++) {
    if (size[d] == 1) continue;
    sz[n] = size[d];
    for (int k = 0; k < nops; k++) st[k][n] = st[k][d];
    n++;
  }
  int m = 0;
  for (int d = 0; d < n; d++) {
    if (m > 0) {
      bool merge = true;
      for (int k = 0; k < nops && merge; k++)
        merge = it->stride[k][m - 1] == st[k][d] * sz[d];   /* the merged dim so far */
      if (merge) {
        it->size[m - 1] *= sz[d];
        for (int k = 0; k < nops; k++) it->stride[k][m - 1] = st[k][d];
        continue;
      }
    }
    it->size[m] = sz[d];
    for (int k = 0; k < nops; k++) it->stride[k][m] = st[k][d];
    m++;
  }
  if (m == 0) {   /* a single element */
    it->size[0] = it->numel ? 1 : 0;
    for (int k = 0; k < nops; k++) it->stride[k][0] = 0;
    m = 1;
  }
  it->ndim = m;
}

/* Runs rows [r0, r1) of the iterator, where a row is one pass over the innermost dim. */
static void run_rows(const ltB_iter *it, int64_t r0, int64_t r1, ltK_row_fn kernel, void *ud) {
  int nd = it->ndim, nops = it->nops;
  int64_t inner = it->size[nd - 1];
  int64_t rst[LT_ITER_MAX];
  for (int k = 0; k < nops; k++) rst[k] = it->stride[k][nd - 1];
  int64_t idx[LT_MAX_DIMS];
  int64_t r = r0;
  for (int d = nd - 2; d >= 0; d--) {
    idx[d] = r % it->size[d];
    r /= it->size[d];
  }
  char *ptr[LT_ITER_MAX];
  for (int64_t row = r0; row < r1; row++) {
    for (int k = 0; k < nops; k++) {
      char *p = it->data[k];
      for (int d = 0; d < nd - 1; d++) p += idx[d] * it->stride[k][d];
      ptr[k] = p;
    }
    kernel(ptr, rst, inner, ud);
    for (int d = nd - 2; d >= 0; d--) {
      if (++idx[d] < it->size[d]) break;
      idx[d] = 0;
    }
  }
}

typedef struct {
  const ltB_iter *it;
  ltK_row_fn kernel;
  void *ud;
} iter_job;

/* Splits a long single row into contiguous chunks so that 1-d work parallelises too. */
static void run_chunk(int64_t b, int64_t e, void *ud) {
  iter_job *j = ud;
  const ltB_iter *it = j->it;
  if (it->ndim == 1) {
    char *ptr[LT_ITER_MAX];
    int64_t st[LT_ITER_MAX];
    for (int k = 0; k < it->nops; k++) {
      st[k] = it->stride[k][0];
      ptr[k] = it->data[k] + b * st[k];
    }
    j->kernel(ptr, st, e - b, j->ud);
    return;
  }
  run_rows(it, b, e, j->kernel, j->ud);
}

void ltB_iter_run(lt_ctx *ctx, const ltB_iter *it, ltK_row_fn kernel, void *ud) {
  if (it->numel == 0) return;
  int64_t rows = it->numel / it->size[it->ndim - 1];
  if (it->ndim == 1) {
    int64_t st[LT_ITER_MAX];
    for (int k = 0; k < it->nops; k++) st[k] = it->stride[k][0];
    if (it->numel < LT_PAR_MIN || ctx->num_threads <= 1) {
      char *ptr[LT_ITER_MAX];
      for (int k = 0; k < it->nops; k++) ptr[k] = it->data[k];
      kernel(ptr, st, it->numel, ud);
      return;
    }
    iter_job j = {it, kernel, ud};
    ltB_parallel_for(ctx, it->numel, LT_PAR_MIN / 2, run_chunk, &j);
    return;
  }
  if (it->numel < LT_PAR_MIN || ctx->num_threads <= 1 || rows < 2) {
    run_rows(it, 0, rows, kernel, ud);
    return;
  }
  iter_job j = {it, kernel, ud};
  int64_t inner = it->size[it->ndim - 1];
  int64_t grain = (LT_PAR_MIN / 2 + inner - 1) / inner;
  ltB_parallel_for(ctx, rows, grain, run_chunk, &j);
}
