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
    it->esize[k] = es;
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

/* Pointers are stepped along the dim next to the innermost and recomputed only on a carry:
** rows of a few elements (a broadcast copy of (H, 1, W, 1) to (H, 2, W, 2)) cost their
** recomputation more than their work. */
void ltB_iter_runs(const ltB_iter *it, int64_t r0, int64_t r1, ltB_runs_fn run, void *ud) {
  int nd = it->ndim, nops = it->nops;
  int64_t idx[LT_MAX_DIMS], r = r0, step[LT_ITER_MAX];
  for (int d = nd - 2; d >= 0; d--) {
    idx[d] = r % it->size[d];
    r /= it->size[d];
  }
  for (int k = 0; k < nops; k++) step[k] = it->stride[k][nd - 2];
  for (int64_t row = r0; row < r1;) {
    char *ptr[LT_ITER_MAX];
    for (int k = 0; k < nops; k++) {
      ptr[k] = it->data[k];
      for (int d = 0; d < nd - 1; d++) ptr[k] += idx[d] * it->stride[k][d];
    }
    int64_t m = it->size[nd - 2] - idx[nd - 2];
    if (m > r1 - row) m = r1 - row;
    run(ptr, step, m, ud);
    row += m;
    idx[nd - 2] += m;
    for (int d = nd - 2; d > 0 && idx[d] >= it->size[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

typedef struct {
  const ltB_iter *it;
  ltK_row_fn kernel;
  void *ud;
  int64_t rst[LT_ITER_MAX];
} rows_run;

static void run_of_rows(char **ptr, const int64_t *step, int64_t m, void *ud) {
  const rows_run *q = ud;
  int64_t inner = q->it->size[q->it->ndim - 1];
  for (int64_t i = 0; i < m; i++) {
    q->kernel(ptr, q->rst, inner, q->ud);
    for (int k = 0; k < q->it->nops; k++) ptr[k] += step[k];
  }
}

/* Runs rows [r0, r1) of an iterator of two dims or more, a row being one pass over the
** innermost dim. */
static void run_rows(const ltB_iter *it, int64_t r0, int64_t r1, ltK_row_fn kernel, void *ud) {
  rows_run q = {it, kernel, ud, {0}};
  for (int k = 0; k < it->nops; k++) q.rst[k] = it->stride[k][it->ndim - 1];
  ltB_iter_runs(it, r0, r1, run_of_rows, &q);
}

/* Blocks for ltB_iter_run_ew: rows taken BLK_ROWS at a time, each in pieces of BLK_COLS. An
** input whose elements along a row lie a cache line or more apart and a few bytes apart from
** one row to the next (a transposed dense tensor) is first copied, block by block, into rows on
** the stack, reading each line it touches once, and the kernel then reads it as a dense row:
** exp of a transposed 1024 x 1024 float32 took 3.7 ms row by row (PyTorch, whose output keeps
** the input's strides, 0.57), a line read per element, one element at a time. */
#define BLK_ROWS 16
#define BLK_COLS 64

/* input k (not the output, 0) walks its rows across memory, a line or more an element, and
** steps from one row to the next by less: it is copied into rows on the stack */
static bool packed(const ltB_iter *it, int k) {
  int nd = it->ndim;
  int64_t a = it->stride[k][nd - 1], d = it->stride[k][nd - 2], es = it->esize[k];
  if (a < 0) a = -a;
  if (d < 0) d = -d;
  return k > 0 && a >= 64 && d < a && (es == 1 || es == 4 || es == 8);
}

static bool blocked(const ltB_iter *it) {
  int nd = it->ndim;
  if (nd < 2 || it->size[nd - 1] < BLK_COLS || it->size[nd - 2] < 2) return false;
  for (int k = 1; k < it->nops; k++)
    if (packed(it, k)) return true;
  return false;
}

/* n elements of each of nr rows (row i at src[i], elements s bytes apart) into dst, row i at
** dst + i BLK_COLS es: an element of every row at a time, the order the source lies in */
#define GATHER_ROWS(T)                                                       \
  for (int64_t c = 0; c < n; c++)                                            \
    for (int i = 0; i < nr; i++)                                             \
      ((T *)dst)[i * BLK_COLS + c] = *(const T *)(src[i] + c * s);

static void gather_rows(char *dst, char *const *src, int nr, int64_t n, int64_t s, int64_t es) {
  switch (es) {
    case 1: GATHER_ROWS(uint8_t) break;
    case 4: GATHER_ROWS(uint32_t) break;
    default: GATHER_ROWS(uint64_t) break;
  }
}

/* Rows [r0, r1) as run_rows, in blocks of BLK_ROWS rows by BLK_COLS columns */
static void run_blocks(const ltB_iter *it, int64_t r0, int64_t r1, ltK_row_fn kernel, void *ud) {
  int nd = it->ndim, nops = it->nops;
  int64_t inner = it->size[nd - 1];
  int64_t rst[LT_ITER_MAX];
  bool pack[LT_ITER_MAX];
  for (int k = 0; k < nops; k++) {
    rst[k] = it->stride[k][nd - 1];
    pack[k] = packed(it, k);
  }
  _Alignas(64) char buf[LT_ITER_MAX][BLK_ROWS * BLK_COLS * 8];
  char *base[LT_ITER_MAX][BLK_ROWS];
  for (int64_t g = r0; g < r1; g += BLK_ROWS) {
    int nr = (int)(r1 - g < BLK_ROWS ? r1 - g : BLK_ROWS);
    int64_t idx[LT_MAX_DIMS], r = g;
    for (int d = nd - 2; d >= 0; d--) {
      idx[d] = r % it->size[d];
      r /= it->size[d];
    }
    for (int i = 0; i < nr; i++) {
      for (int k = 0; k < nops; k++) {
        char *p = it->data[k];
        for (int d = 0; d < nd - 1; d++) p += idx[d] * it->stride[k][d];
        base[k][i] = p;
      }
      for (int d = nd - 2; d >= 0; d--) {
        if (++idx[d] < it->size[d]) break;
        idx[d] = 0;
      }
    }
    for (int64_t c = 0; c < inner; c += BLK_COLS) {
      int64_t n = inner - c < BLK_COLS ? inner - c : BLK_COLS;
      char *from[BLK_ROWS];
      int64_t st[LT_ITER_MAX];
      for (int k = 0; k < nops; k++) {
        st[k] = pack[k] ? it->esize[k] : rst[k];
        if (!pack[k]) continue;
        for (int i = 0; i < nr; i++) from[i] = base[k][i] + c * rst[k];
        gather_rows(buf[k], from, nr, n, rst[k], it->esize[k]);
      }
      for (int i = 0; i < nr; i++) {
        char *ptr[LT_ITER_MAX];
        for (int k = 0; k < nops; k++)
          ptr[k] = pack[k] ? buf[k] + i * BLK_COLS * it->esize[k] : base[k][i] + c * rst[k];
        kernel(ptr, st, n, ud);
      }
    }
  }
}

typedef struct {
  const ltB_iter *it;
  ltK_row_fn kernel;
  void *ud;
  bool blocks;
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
  if (j->blocks)
    run_blocks(it, b, e, j->kernel, j->ud);
  else
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
    iter_job j = {it, kernel, ud, false};
    ltB_parallel_for(ctx, it->numel, LT_PAR_MIN / 2, run_chunk, &j);
    return;
  }
  if (it->numel < LT_PAR_MIN || ctx->num_threads <= 1 || rows < 2) {
    run_rows(it, 0, rows, kernel, ud);
    return;
  }
  iter_job j = {it, kernel, ud, false};
  int64_t inner = it->size[it->ndim - 1];
  int64_t grain = (LT_PAR_MIN / 2 + inner - 1) / inner;
  ltB_parallel_for(ctx, rows, grain, run_chunk, &j);
}

void ltB_iter_run_ew(lt_ctx *ctx, const ltB_iter *it, ltK_row_fn kernel, void *ud) {
  if (it->numel == 0 || !blocked(it)) {
    ltB_iter_run(ctx, it, kernel, ud);
    return;
  }
  int64_t rows = it->numel / it->size[it->ndim - 1];
  if (it->numel < LT_PAR_MIN || ctx->num_threads <= 1) {
    run_blocks(it, 0, rows, kernel, ud);
    return;
  }
  iter_job j = {it, kernel, ud, true};
  int64_t inner = it->size[it->ndim - 1];
  int64_t grain = (LT_PAR_MIN / 2 + inner - 1) / inner;
  grain = (grain + BLK_ROWS - 1) / BLK_ROWS * BLK_ROWS;
  ltB_parallel_for(ctx, rows, grain, run_chunk, &j);
}
