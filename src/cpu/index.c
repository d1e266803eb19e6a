/*
** cpu/index.c -- cpu kernels of the indexing family: index range scans, gather (index_select,
** gather, embedding), scatter (scatter, scatter_add, index_add, their backwards), masked_fill
** and the order-dependent masked_select / masked_scatter pair.
**
** Kernels go through ltB_iter. Gather iterates over the output with the source "restrided"
** (stride 0 along dim, the index supplying the offset). Scatter iterates over every position
** except along dim and walks dim inside the kernel, so that two threads never write the same
** destination element.
*/
#include "../cpu_isa.h"
#include "cpu.h"

/* A struct copy of t for iterator geometry, seen as 1-d of size 1 when 0-d. Never released. */
static lt_tensor geom(const lt_tensor *t) {
  lt_tensor g = *t;
  if (g.ndim == 0) {
    g.ndim = 1;
    g.size[0] = 1;
    g.stride[0] = 1;
  }
  return g;
}

/* Runs kernel over the iterator's rows in order on this thread (for order-dependent work). */
static void iter_serial(const ltB_iter *it, ltK_row_fn kernel, void *ud) {
  if (it->numel == 0) return;
  int nd = it->ndim, nops = it->nops;
  int64_t idx[LT_MAX_DIMS] = {0}, rst[LT_ITER_MAX];
  int64_t rows = it->numel / it->size[nd - 1];
  for (int k = 0; k < nops; k++) rst[k] = it->stride[k][nd - 1];
  for (int64_t row = 0; row < rows; row++) {
    char *p[LT_ITER_MAX];
    for (int k = 0; k < nops; k++) {
      p[k] = it->data[k];
      for (int d = 0; d < nd - 1; d++) p[k] += idx[d] * it->stride[k][d];
    }
    kernel(p, rst, it->size[nd - 1], ud);
    for (int d = nd - 2; d >= 0; d--) {
      if (++idx[d] < it->size[d]) break;
      idx[d] = 0;
    }
  }
}

/* Serial iteration over t alone, in row-major order. */
static void walk1(const lt_tensor *t, ltK_row_fn kernel, void *ud) {
  lt_tensor g = geom(t);
  lt_tensor *ops[1] = {&g};
  ltB_iter it;
  ltB_iter_init(&it, 1, ops, g.ndim, g.size);
  iter_serial(&it, kernel, ud);
}

/* ------------------------------------------------------------ index range scan */

typedef struct {
  int64_t lo, hi;       /* valid values [lo, hi) */
  const int64_t *skip;
  int64_t max, bad;
  bool has_bad;
} range_ud;

/* The smallest and largest of x[0, n) into *mn and *mx (which hold the running ones), at each
** vector level (AVX-512 has 64-bit minima and maxima; below it GCC compares and blends). */
#define MINMAX_BODY                                    \
  int64_t a = *mn, b = *mx;                            \
  for (int64_t i = 0; i < n; i++) {                    \
    a = x[i] < a ? x[i] : a;                           \
    b = x[i] > b ? x[i] : b;                           \
  }                                                    \
  *mn = a;                                             \
  *mx = b;

static void minmax_sse4(const int64_t *x, int64_t n, int64_t *mn, int64_t *mx) { MINMAX_BODY }
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static void minmax_avx2(const int64_t *x, int64_t n, int64_t *mn, int64_t *mx) { MINMAX_BODY }
LT_ISA_END
LT_ISA_BEGIN_AVX512
static void minmax_avx512(const int64_t *x, int64_t n, int64_t *mn, int64_t *mx) { MINMAX_BODY }
LT_ISA_END
#endif

static void minmax(const int64_t *x, int64_t n, int64_t *mn, int64_t *mx) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: minmax_avx512(x, n, mn, mx); return;
    case LT_ISA_AVX2: minmax_avx2(x, n, mn, mx); return;
    default: break;
  }
#endif
  minmax_sse4(x, n, mn, mx);
}

/* The row's smallest and largest values but skip's, in locals, so that GCC vectorises the
** contiguous case without a skip (the scan ran at 2 ns an element, 65% of a gather along the
** last dim); only a row that holds a bad value is walked again for its first one. */
static void range_row(char **data, const int64_t *st, int64_t n, void *ud) {
  range_ud *s = ud;
  int64_t mn = INT64_MAX, mx = INT64_MIN, skip = s->skip ? *s->skip : 0;
  bool has_skip = s->skip != NULL;
  const char *p = data[0];
  if (!has_skip && st[0] == (int64_t)sizeof(int64_t)) {
    minmax((const int64_t *)p, n, &mn, &mx);
  } else {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = *(const int64_t *)(p + i * st[0]);
      if (has_skip && v == skip) continue;
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
  }
  if (mx > s->max) s->max = mx;
  if (s->has_bad || (mn >= s->lo && mx < s->hi) || mn > mx) return;
  for (int64_t i = 0; i < n; i++) {   /* the first bad one, in order */
    int64_t v = *(const int64_t *)(p + i * st[0]);
    if ((!has_skip || v != skip) && (v < s->lo || v >= s->hi)) {
      s->has_bad = true;
      s->bad = v;
      return;
    }
  }
}

/* A large contiguous index without a skip: its smallest and largest values in parts over the
** pool (the scan ran on one thread before the op it guards, a quarter of a gather along the last
** dim of 1024 x 1024 at one thread, half of it at two). Only an index that holds a bad value is
** walked again, in order, for the first. */
#define RANGE_PARTS 64
typedef struct {
  const int64_t *x;
  int64_t n;
  int64_t mn[RANGE_PARTS], mx[RANGE_PARTS];
} range_job;

static void range_parts(int64_t p0, int64_t p1, void *ud) {
  range_job *j = ud;
  for (int64_t p = p0; p < p1; p++) {
    int64_t a = j->n * p / RANGE_PARTS, b = j->n * (p + 1) / RANGE_PARTS;
    j->mn[p] = INT64_MAX;
    j->mx[p] = INT64_MIN;
    minmax(j->x + a, b - a, &j->mn[p], &j->mx[p]);
  }
}

static bool range_parallel(lt_ctx *ctx, const lt_tensor *index, int64_t lo, int64_t hi,
                           int64_t *max) {
  range_job j = {.x = ltB_ptr(index), .n = lt_numel(index)};
  ltB_parallel_for(ctx, RANGE_PARTS, 1, range_parts, &j);
  int64_t mn = INT64_MAX, mx = INT64_MIN;
  for (int p = 0; p < RANGE_PARTS; p++) {
    mn = j.mn[p] < mn ? j.mn[p] : mn;
    mx = j.mx[p] > mx ? j.mx[p] : mx;
  }
  *max = mx;
  return mn >= lo && mx < hi;
}

bool ltC_index_range(lt_ctx *ctx, const lt_tensor *index, int64_t lo, int64_t hi,
                     const int64_t *skip, int64_t *bad, int64_t *max) {
  if (!skip && ctx->num_threads > 1 && lt_numel(index) >= 4 * LT_PAR_MIN &&
      lt_is_contiguous(index) && range_parallel(ctx, index, lo, hi, max))
    return true;
  range_ud s = {.lo = lo, .hi = hi, .skip = skip, .max = INT64_MIN};
  walk1(index, range_row, &s);
  *bad = s.bad;
  *max = s.max;
  return !s.has_bad;
}

/* ------------------------------------------------------------ gather */

/* out[i] = src[i + (index[i] - base) * dst] over rows of (out, restrided src, index). */
typedef struct { lt_dtype dt; int64_t dstride, base; } gather_ud;

#define GATHER_LOOP(T)                                                                    \
  do {                                                                                    \
    if (st[2] == 0) {   /* one index for the whole row: a strided row copy */             \
      const char *s = data[1] + (*(const int64_t *)data[2] - g->base) * g->dstride;       \
      if (st[0] == (int64_t)sizeof(T) && st[1] == (int64_t)sizeof(T)) {                   \
        memcpy(data[0], s, (size_t)n * sizeof(T));                                        \
      } else {                                                                            \
        for (int64_t i = 0; i < n; i++)                                                   \
          *(T *)(data[0] + i * st[0]) = *(const T *)(s + i * st[1]);                      \
      }                                                                                   \
    } else {                                                                              \
      for (int64_t i = 0; i < n; i++) {                                                   \
        int64_t v = *(const int64_t *)(data[2] + i * st[2]) - g->base;                    \
        *(T *)(data[0] + i * st[0]) = *(const T *)(data[1] + i * st[1] + v * g->dstride); \
      }                                                                                   \
    }                                                                                     \
  } while (0)

static void gather_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const gather_ud *g = ud;
  switch (g->dt) {
    case LT_FLOAT32: GATHER_LOOP(float); break;
    case LT_FLOAT64: GATHER_LOOP(double); break;
    case LT_INT64: GATHER_LOOP(int64_t); break;
    case LT_BOOL: GATHER_LOOP(bool); break;
    default: break;
  }
}

/* index_select and embedding: out and src contiguous, the index expanded along every dim but
** dim, so each (outer position, index) pair copies one contiguous block of the dims after dim.
** The general walk pays per row of the iterator; this path pays one memcpy per block. */
typedef struct {
  char *out;
  const char *src;
  const char *idx;
  int64_t n, V, block, istride, base;   /* block in bytes, istride in bytes */
  int64_t es;                            /* element size */
} blocks_job;

/* blocks of one element (index_select along the last dim, as nearest upsampling does): typed
** loads and stores, a whole output row at a time when the index is dense, where a memcpy call
** per element cost 2.9 ns */
#define COPY_ELEMS(T)                                                                   \
  for (int64_t r = b; r < e;) {                                                         \
    const T *srow = (const T *)j->src + a * j->V;                                       \
    T *o = (T *)j->out + r;                                                             \
    if (k == 0 && r + j->n <= e && j->istride == (int64_t)sizeof(int64_t)) {           \
      const int64_t *ix = (const int64_t *)j->idx;                                      \
      for (int64_t i = 0; i < j->n; i++) o[i] = srow[ix[i] - j->base];                  \
      r += j->n;                                                                        \
      a++;                                                                              \
      continue;                                                                         \
    }                                                                                   \
    *o = srow[*(const int64_t *)(j->idx + k * j->istride) - j->base];                   \
    r++;                                                                                \
    if (++k == j->n) {                                                                  \
      k = 0;                                                                            \
      a++;                                                                              \
    }                                                                                   \
  }

static void copy_blocks(int64_t b, int64_t e, void *ud) {
  const blocks_job *j = ud;
  int64_t a = b / j->n, k = b % j->n;   /* block r = a * n + k, stepped without dividing */
  switch (j->block == j->es ? j->block : 0) {   /* one element a block */
    case 8: COPY_ELEMS(int64_t) return;
    case 4: COPY_ELEMS(int32_t) return;
    case 1: COPY_ELEMS(uint8_t) return;
    default: break;
  }
  for (int64_t r = b; r < e; r++) {
    int64_t v = *(const int64_t *)(j->idx + k * j->istride) - j->base;
    memcpy(j->out + r * j->block, j->src + (a * j->V + v) * j->block, (size_t)j->block);
    if (++k == j->n) {
      k = 0;
      a++;
    }
  }
}

static bool gather_blocks(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src, int dim,
                          const lt_tensor *index, int64_t base) {
  int64_t n;
  if (out->ndim == 0 || !ltB_dense(out, &n) || !ltB_dense(src, &n) || index->ndim != out->ndim)
    return false;
  for (int d = 0; d < out->ndim; d++)
    if (d != dim && (index->stride[d] != 0 || src->size[d] != out->size[d])) return false;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; d++) outer *= out->size[d];
  for (int d = dim + 1; d < out->ndim; d++) inner *= out->size[d];
  int64_t es = (int64_t)ltB_esize(out->dtype);
  blocks_job j = {ltB_ptr(out), ltB_ptr(src), ltB_ptr(index), out->size[dim], src->size[dim],
                  inner * es, index->stride[dim] * (int64_t)sizeof(int64_t), base, es};
  ltB_parallel_for(ctx, outer * j.n, ltC_grain(inner), copy_blocks, &j);
  return true;
}

/* gather along the last dim of a dense out and index (torch.gather(x, -1, idx): a class's
** score, a top-k's values): each row picks from its row of src, whose last dim is unit-strided
** and whose rows lie equally apart. The general walk took the rows as its inner loop there (the
** source's stride along dim is 0 in its view), 2 ns an element against PyTorch's 0.5. */
typedef struct {
  lt_dtype dt;
  char *out;
  const char *src;
  const int64_t *idx;
  int64_t n, srow, base;   /* elements a row; src's row stride in bytes */
} rows_job;

#define PICK_ROWS(T)                                                          \
  for (int64_t r = r0; r < r1; r++) {                                         \
    T *o = (T *)j->out + r * j->n;                                            \
    const T *x = (const T *)(j->src + r * j->srow);                           \
    const int64_t *ix = j->idx + r * j->n;                                    \
    for (int64_t i = 0; i < j->n; i++) o[i] = x[ix[i] - j->base];             \
  }

static void pick_rows(int64_t r0, int64_t r1, void *ud) {
  const rows_job *j = ud;
  switch (ltB_esize(j->dt)) {
    case 8: PICK_ROWS(int64_t) break;
    case 4: PICK_ROWS(int32_t) break;
    default: PICK_ROWS(uint8_t) break;
  }
}

static bool gather_last(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src, int dim,
                        const lt_tensor *index, int64_t base) {
  int last = out->ndim - 1;
  if (out->ndim == 0 || dim != last || !lt_is_contiguous(out) || !lt_is_contiguous(index) ||
      src->stride[last] != 1)
    return false;
  /* src's rows at out's positions must lie srow apart: its strides over the leading dims
  ** (those of size 1 aside) those of a contiguous block of rows srow long */
  int64_t rows = 1, srow = 0, want = 0;
  for (int d = last - 1; d >= 0; d--) {
    rows *= out->size[d];
    if (out->size[d] == 1) continue;
    if (want == 0)
      srow = src->stride[d];
    else if (src->stride[d] != want)
      return false;
    want = src->stride[d] * out->size[d];
  }
  int64_t es = (int64_t)ltB_esize(out->dtype);
  rows_job j = {out->dtype, ltB_ptr(out), ltB_ptr(src), (const int64_t *)ltB_ptr(index),
                out->size[last], srow * es, base};
  ltB_parallel_for(ctx, rows, ltC_grain(j.n), pick_rows, &j);
  return true;
}

void ltC_gather(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src, int dim,
                const lt_tensor *index, int64_t base) {
  if (lt_numel(out) == 0 || gather_blocks(ctx, out, src, dim, index, base) ||
      gather_last(ctx, out, src, dim, index, base))
    return;
  lt_tensor go = geom(out), gs = geom(src), gi = geom(index);
  int64_t dstride = gs.stride[dim] * (int64_t)lt_dtype_size(out->dtype);
  memcpy(gs.size, go.size, sizeof gs.size);
  gs.stride[dim] = 0;
  lt_tensor *ops[3] = {&go, &gs, &gi};
  ltB_iter it;
  ltB_iter_init(&it, 3, ops, go.ndim, go.size);
  gather_ud u = {out->dtype, dstride, base};
  ltB_iter_run(ctx, &it, gather_row, &u);
}

/* ------------------------------------------------------------ scatter */

/* self[.., index[.., k, ..] - base, ..] (=|+=) src[.., k, ..] for k < K, over rows of
** (self, index, src) restrided to the iteration shape with dim collapsed to size 1. */
typedef struct {
  lt_dtype dt;
  bool add;
  int64_t K, sst, ist, rst, base;   /* byte strides along dim: self, index, src */
} scat_ud;

/* k outer, i inner: for a fixed k the row's destinations are distinct, and each destination
** still sees its k in increasing order (the last write wins for scatter). The inner loop then
** walks the row contiguously, which matters when dim is an outer dimension; a row that is
** contiguous in self and src (index_add, index_select's and embedding's backward) is a plain
** loop the compiler vectorises, each element still updated in k order. */
#define SCAT_LOOP(T, OP)                                                        \
  do {                                                                          \
    for (int64_t k = 0; k < u->K; k++) {                                        \
      const char *pi = data[1] + k * u->ist, *pr = data[2] + k * u->rst;        \
      if (st[1] == 0) {   /* one index for the whole row (index_add) */         \
        char *ps = data[0] + (*(const int64_t *)pi - u->base) * u->sst;         \
        if (st[0] == (int64_t)sizeof(T) && st[2] == (int64_t)sizeof(T)) {       \
          T *d = (T *)ps;                                                       \
          const T *s = (const T *)pr;                                           \
          for (int64_t i = 0; i < n; i++) OP(d[i], s[i]);                       \
        } else {                                                                \
          for (int64_t i = 0; i < n; i++)                                       \
            OP(*(T *)(ps + i * st[0]), *(const T *)(pr + i * st[2]));           \
        }                                                                       \
      } else {                                                                  \
        for (int64_t i = 0; i < n; i++) {                                       \
          int64_t v = *(const int64_t *)(pi + i * st[1]) - u->base;             \
          OP(*(T *)(data[0] + i * st[0] + v * u->sst), *(const T *)(pr + i * st[2])); \
        }                                                                       \
      }                                                                         \
    }                                                                           \
  } while (0)

#define SCAT_SET(d, s) ((d) = (s))
#define SCAT_ADD(d, s) ((d) += (s))
#define SCAT_OR(d, s) ((d) = (d) || (s))

static void scatter_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const scat_ud *u = ud;
  if (!u->add) {
    switch (u->dt) {
      case LT_FLOAT32: SCAT_LOOP(float, SCAT_SET); break;
      case LT_FLOAT64: SCAT_LOOP(double, SCAT_SET); break;
      case LT_INT64: SCAT_LOOP(int64_t, SCAT_SET); break;
      case LT_BOOL: SCAT_LOOP(bool, SCAT_SET); break;
      default: break;
    }
  } else {
    switch (u->dt) {
      case LT_FLOAT32: SCAT_LOOP(float, SCAT_ADD); break;
      case LT_FLOAT64: SCAT_LOOP(double, SCAT_ADD); break;
      case LT_INT64: SCAT_LOOP(int64_t, SCAT_ADD); break;
      case LT_BOOL: SCAT_LOOP(bool, SCAT_OR); break;
      default: break;
    }
  }
}

/* index_add and scatter along the last dim of a dense self and src, with one index for every
** row (index_select's backward: nearest upsampling's gradient) or a contiguous index of src's
** shape (scatter_add): row by row, each row's K values into its own row of self in k order,
** as the general walk adds them. That walk takes the other dims as its inner loop, a stride
** apart: 4 ms for 2M floats with a shared index, 10.5 ms for scatter_add of 1M. */
typedef struct {
  lt_dtype dt;
  bool add;
  char *self;
  const char *src;
  const int64_t *idx;
  int64_t K, V, istride, irow, base;   /* index strides in elements: along dim, a row */
} last_job;

#define SCAT_LAST(T, OP)                                                      \
  for (int64_t r = r0; r < r1; r++) {                                         \
    T *d = (T *)j->self + r * j->V;                                           \
    const T *x = (const T *)j->src + r * j->K;                                \
    const int64_t *ix = j->idx + r * j->irow;                                 \
    for (int64_t k = 0; k < j->K; k++)                                        \
      OP(d[ix[k * j->istride] - j->base], x[k]);                              \
  }

static void scatter_last(int64_t r0, int64_t r1, void *ud) {
  const last_job *j = ud;
  if (!j->add) {
    switch (j->dt) {
      case LT_FLOAT32: SCAT_LAST(float, SCAT_SET) break;
      case LT_FLOAT64: SCAT_LAST(double, SCAT_SET) break;
      case LT_INT64: SCAT_LAST(int64_t, SCAT_SET) break;
      case LT_BOOL: SCAT_LAST(bool, SCAT_SET) break;
      default: break;
    }
  } else {
    switch (j->dt) {
      case LT_FLOAT32: SCAT_LAST(float, SCAT_ADD) break;
      case LT_FLOAT64: SCAT_LAST(double, SCAT_ADD) break;
      case LT_INT64: SCAT_LAST(int64_t, SCAT_ADD) break;
      case LT_BOOL: SCAT_LAST(bool, SCAT_OR) break;
      default: break;
    }
  }
}

static bool scatter_last_dim(lt_ctx *ctx, lt_tensor *self, int dim, const lt_tensor *index,
                             const lt_tensor *src, bool accumulate, int64_t base) {
  int nd = self->ndim;
  if (nd < 1 || dim != nd - 1 || src->ndim != nd || index->ndim != nd ||
      !lt_is_contiguous(self) || !lt_is_contiguous(src))
    return false;
  bool shared = true;   /* one index row for all (else a contiguous index, src's shape) */
  for (int d = 0; d < nd - 1; d++) {
    if (self->size[d] != src->size[d] || index->size[d] != src->size[d]) return false;
    shared &= index->stride[d] == 0;
  }
  if (index->size[dim] != src->size[dim] || (!shared && !lt_is_contiguous(index))) return false;
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; d++) rows *= src->size[d];
  last_job j = {self->dtype, accumulate, ltB_ptr(self), ltB_ptr(src), ltB_ptr(index),
                src->size[dim], self->size[dim], shared ? index->stride[dim] : 1,
                shared ? 0 : src->size[dim], base};
  ltB_parallel_for(ctx, rows, ltC_grain(j.K), scatter_last, &j);
  return true;
}

/* The iteration shape is index's; a 0-d src under a larger index is one value read at every
** position (a 0-d src under a 0-d or one-element index reads its one element either way). */
void ltC_scatter(lt_ctx *ctx, lt_tensor *self, int dim, const lt_tensor *index,
                 const lt_tensor *src, bool accumulate, int64_t base) {
  if (scatter_last_dim(ctx, self, dim, index, src, accumulate, base)) return;
  lt_tensor gs = geom(self), gi = geom(index), gr = geom(src);
  bool src_value = src->ndim == 0;
  int nd = gi.ndim;
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, gi.size, (size_t)nd * sizeof *sz);
  int64_t K = sz[dim];
  if (K == 0 || ltB_shape_numel(nd, sz) == 0) return;
  sz[dim] = 1;
  int64_t es = (int64_t)lt_dtype_size(self->dtype);
  int64_t sst = gs.stride[dim] * es;
  int64_t ist = gi.stride[dim] * (int64_t)sizeof(int64_t);
  int64_t rst = src_value ? 0 : gr.stride[dim] * es;
  memcpy(gs.size, sz, sizeof sz);
  gs.ndim = nd;
  memcpy(gi.size, sz, sizeof sz);
  if (!src_value) memcpy(gr.size, sz, sizeof sz);
  lt_tensor *ops[3] = {&gs, &gi, &gr};
  ltB_iter it;
  ltB_iter_init(&it, 3, ops, nd, sz);
  scat_ud u = {self->dtype, accumulate, K, sst, ist, rst, base};
  ltB_iter_run(ctx, &it, scatter_row, &u);
}

/* ------------------------------------------------------------ masked_fill */

typedef struct {
  lt_dtype dt;
  float f;
  double v;
  int64_t i;
  bool b;
} mfill_ud;

/* Contiguous rows, branch-free: the mask becomes an all-ones/all-zeros word that selects the
** value's bits or the source's (a data-dependent branch mispredicts on random masks), through
** typed pointers, which GCC vectorises (through char pointers, which may alias, the loop stayed
** scalar: 590 us for 1M floats, against 160 for where). */
#define MFILL_BITS(U, W)                                                              \
  static void mfill_bits##W(char *o, const char *s, const bool *m, U vb, int64_t n) { \
    const U *src = (const U *)s;                                                    \
    U *dst = (U *)o;                                                                \
    const uint8_t *mb = (const uint8_t *)m;                                         \
    for (int64_t k = 0; k < n; k++) {                                               \
      U mk = (U)0 - (U)mb[k];                                                       \
      dst[k] = (src[k] & ~mk) | (vb & mk);                                          \
    }                                                                               \
  }
MFILL_BITS(uint32_t, 32)
MFILL_BITS(uint64_t, 64)

#define MFILL_LOOP(T, VAL, W, U)                                                         \
  do {                                                                                   \
    const T val_ = (VAL);                                                                \
    if (st[0] == (int64_t)sizeof(T) && st[1] == (int64_t)sizeof(T) && st[2] == 1) {      \
      U vb_;                                                                             \
      memcpy(&vb_, &val_, sizeof vb_);                                                   \
      mfill_bits##W(data[0], data[1], (const bool *)data[2], vb_, n);                    \
    } else {                                                                             \
      for (int64_t k = 0; k < n; k++) {                                                  \
        T x_ = *(const T *)(data[1] + k * st[1]);                                        \
        *(T *)(data[0] + k * st[0]) = *(const bool *)(data[2] + k * st[2]) ? val_ : x_;  \
      }                                                                                  \
    }                                                                                    \
  } while (0)

static void mfill_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const mfill_ud *u = ud;
  switch (u->dt) {
    case LT_FLOAT32: MFILL_LOOP(float, u->f, 32, uint32_t); break;
    case LT_FLOAT64: MFILL_LOOP(double, u->v, 64, uint64_t); break;
    case LT_INT64: MFILL_LOOP(int64_t, u->i, 64, uint64_t); break;
    case LT_BOOL:
      for (int64_t k = 0; k < n; k++) {
        bool x_ = *(const bool *)(data[1] + k * st[1]);
        *(bool *)(data[0] + k * st[0]) = *(const bool *)(data[2] + k * st[2]) ? u->b : x_;
      }
      break;
    default: break;
  }
}

void ltC_masked_fill(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src,
                     const lt_tensor *mask, double v) {
  lt_tensor *ops[3] = {out, (lt_tensor *)src, (lt_tensor *)mask};
  ltB_iter it;
  ltB_iter_init(&it, 3, ops, out->ndim, out->size);
  mfill_ud u = {out->dtype, (float)v, v, (int64_t)v, v != 0};
  ltB_iter_run(ctx, &it, mfill_row, &u);
}

/* ------------------------------------------------------------ masked_select / masked_scatter */

typedef struct { int64_t count; } count_ud;

static void count_row(char **data, const int64_t *st, int64_t n, void *ud) {
  count_ud *c = ud;
  for (int64_t i = 0; i < n; i++) c->count += *(const bool *)(data[0] + i * st[0]);
}

int64_t ltC_mask_count(const lt_tensor *mask) {
  count_ud c = {0};
  walk1(mask, count_row, &c);
  return c.count;
}

/* Packs: when mask (operand 1) is set, copies operand 0's element to the next slot of the
** packed buffer (select) or the next packed element into operand 0 (scatter). Serial: the
** packed order is the row-major order of the set elements. */
typedef struct { char *next, *end; size_t es; bool unpack; } pack_ud;

/* Elements of 8, 4 or 1 bytes without a branch on the mask (set and clear at random, as in
** nonzero's masks, the branch missed half the time: 19 ns a selected element): every element
** is written to the next slot and the slot advances when the mask is set; once the slots run
** out the writes go to a scratch element. Unpacking reads the next slot (or zero past the end)
** and keeps it where the mask is set. */
#define PACK_LOOP(T)                                                                   \
  {                                                                                    \
    T *nx = (T *)p->next, *end = (T *)p->end, scratch;                                 \
    for (int64_t i = 0; i < n; i++) {                                                  \
      bool m = *(const bool *)(data[1] + i * st[1]);                                   \
      T *x = (T *)(data[0] + i * st[0]);                                               \
      if (p->unpack) {                                                                 \
        T v = nx < end ? *nx : (T)0;                                                   \
        *x = m ? v : *x;                                                               \
      } else {                                                                         \
        *(nx < end ? nx : &scratch) = *x;                                              \
      }                                                                                \
      nx += m;                                                                         \
    }                                                                                  \
    p->next = (char *)nx;                                                              \
    return;                                                                            \
  }

static void pack_row(char **data, const int64_t *st, int64_t n, void *ud) {
  pack_ud *p = ud;
  switch (p->es) {
    case 8: PACK_LOOP(uint64_t)
    case 4: PACK_LOOP(uint32_t)
    case 1: PACK_LOOP(uint8_t)
    default: break;
  }
  for (int64_t i = 0; i < n; i++) {
    if (!*(const bool *)(data[1] + i * st[1])) continue;
    if (p->unpack)
      memcpy(data[0] + i * st[0], p->next, p->es);
    else
      memcpy(p->next, data[0] + i * st[0], p->es);
    p->next += p->es;
  }
}

static void run_pack(lt_tensor *t, const lt_tensor *mask, const lt_tensor *packed,
                     bool unpack) {
  lt_tensor gt = geom(t), gm = geom(mask);
  lt_tensor *ops[2] = {&gt, &gm};
  ltB_iter it;
  ltB_iter_init(&it, 2, ops, gt.ndim, gt.size);
  size_t es = ltB_esize(t->dtype);
  char *start = ltB_ptr(packed);
  pack_ud p = {start, start + (size_t)ltB_shape_numel(packed->ndim, packed->size) * es, es,
               unpack};
  iter_serial(&it, pack_row, &p);
}

void ltC_masked_select(lt_tensor *out, const lt_tensor *src, const lt_tensor *mask) {
  run_pack((lt_tensor *)src, mask, out, false);
}

void ltC_masked_scatter(lt_tensor *dst, const lt_tensor *mask, const lt_tensor *src) {
  run_pack(dst, mask, src, true);
}
