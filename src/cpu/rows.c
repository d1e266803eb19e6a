/*
** cpu/rows.c -- the row walker of the single-dim cpu kernels (softmax, search, cumsum): rows
** along one dim, the other dims collapsed where every operand is contiguous across them.
*/
#include "cpu.h"

void ltC_rowit_init(ltC_rowit *it, int nops, const lt_tensor *const *ops, int dim) {
  const lt_tensor *t0 = ops[0];
  it->nops = nops;
  it->n = t0->ndim ? t0->size[dim] : 1;
  for (int k = 0; k < nops; k++) {
    it->base[k] = lt_data(ops[k]);
    it->rs[k] = t0->ndim ? ops[k]->stride[dim] : 0;
    it->es[k] = (int64_t)lt_dtype_size(ops[k]->dtype);
  }
  int m = 0;
  it->nrows = 1;
  for (int d = 0; d < t0->ndim; d++) {
    if (d == dim) continue;
    it->nrows *= t0->size[d];
    if (t0->size[d] == 1) continue;
    if (m > 0) {
      bool merge = true;
      for (int k = 0; k < nops && merge; k++)
        merge = it->st[k][m - 1] == ops[k]->stride[d] * t0->size[d];
      if (merge) {
        it->size[m - 1] *= t0->size[d];
        for (int k = 0; k < nops; k++) it->st[k][m - 1] = ops[k]->stride[d];
        continue;
      }
    }
    it->size[m] = t0->size[d];
    for (int k = 0; k < nops; k++) it->st[k][m] = ops[k]->stride[d];
    m++;
  }
  it->nd = m;
}

static void rowit_ptrs(const ltC_rowit *it, int64_t r, char **p) {
  int64_t off[LT_ROW_MAXOP] = {0, 0, 0, 0};
  for (int d = it->nd - 1; d >= 0; d--) {
    int64_t i = r % it->size[d];
    r /= it->size[d];
    for (int k = 0; k < it->nops; k++) off[k] += i * it->st[k][d];
  }
  for (int k = 0; k < it->nops; k++) p[k] = it->base[k] + off[k] * it->es[k];
}

typedef struct rowjob {
  const ltC_rowit *it;
  ltC_row_fn fn;
  void *ud;
} rowjob;

static void rowjob_run(int64_t r0, int64_t r1, void *ud) {
  const rowjob *j = ud;
  const ltC_rowit *it = j->it;
  char *p[LT_ROW_MAXOP];
  int64_t idx[LT_MAX_DIMS], r = r0;
  for (int d = it->nd - 1; d >= 0; d--) {
    idx[d] = r % it->size[d];
    r /= it->size[d];
  }
  rowit_ptrs(it, r0, p);
  for (r = r0; r < r1; r++) {
    j->fn(it, p, j->ud);
    for (int d = it->nd - 1; d >= 0; d--) {   /* next row: odometer over the other dims */
      for (int k = 0; k < it->nops; k++) p[k] += it->st[k][d] * it->es[k];
      if (++idx[d] < it->size[d]) break;
      for (int k = 0; k < it->nops; k++) p[k] -= it->size[d] * it->st[k][d] * it->es[k];
      idx[d] = 0;
    }
  }
}

void ltC_rows_run(lt_ctx *ctx, const ltC_rowit *it, ltC_row_fn fn, void *ud) {
  if (it->nrows == 0) return;
  rowjob j = {it, fn, ud};
  ltB_parallel_for(ctx, it->nrows, ltC_grain(it->n * 4), rowjob_run, &j);
}
