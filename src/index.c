/*
** index.c -- indexing ops: index_select, index_add, gather, scatter, scatter_add,
** masked_fill, masked_select, one_hot; each forward with its backward right after it.
**
** Index tensors are int64 and hold positions counted from `base`: 0 for C callers (PyTorch's
** convention), 1 from Lua. Every index is range-checked in a first pass before anything is
** written, so a bad index fails the call cleanly (naming the op, the value and the size) and
** leaves in-place targets untouched.
**
** Kernels go through lt_iter. Gather-like ops iterate over the output with the source
** "restrided" (stride 0 along dim, the index supplying the offset). Scatter-like ops iterate
** over every position except along dim and walk dim inside the kernel, so that two threads
** never write the same destination element.
*/
#include "core.h"

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
static void iter_serial(const lt_iter *it, lt_row_fn kernel, void *ud) {
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

/* lt_empty whose failure message names op. */
static int new_out(lt_ctx *ctx, const char *op, lt_tensor **out, lt_dtype dt, int ndim,
                   const int64_t *size) {
  if (lt_empty(ctx, out, dt, ndim, size) == 0) return 0;
  char msg[sizeof ctx->err];
  memcpy(msg, ctx->err, sizeof msg);
  return lt_fail(ctx, "%s: %s", op, msg);
}

/* A fill value must be representable in an integer dtype (converting it would be undefined). */
static int check_value(lt_ctx *ctx, const char *op, lt_dtype dt, double v) {
  if (dt == LT_INT64 && !(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    return lt_fail(ctx, "%s: value %g cannot be converted to int64", op, v);
  return 0;
}

static int need_int64(lt_ctx *ctx, const char *op, const char *what, const lt_tensor *t) {
  if (t->dtype != LT_INT64)
    return lt_fail(ctx, "%s: %s must be an int64 tensor (got %s)", op, what,
                   lt_dtype_name(t->dtype));
  return 0;
}

static int need_bool_mask(lt_ctx *ctx, const char *op, const lt_tensor *m) {
  if (m->dtype != LT_BOOL)
    return lt_fail(ctx, "%s: mask must be a bool tensor (got %s); compare to get one, e.g. "
                   "x:gt(0)", op, lt_dtype_name(m->dtype));
  return 0;
}

/* ------------------------------------------------------------ index range scan */

typedef struct {
  int64_t lo, hi;       /* valid values [lo, hi) */
  int64_t min, max;
  int64_t bad;
  bool has_bad, any;
} scan_ud;

static void scan_row(char **data, const int64_t *st, int64_t n, void *ud) {
  scan_ud *s = ud;
  for (int64_t i = 0; i < n; i++) {
    int64_t v = *(const int64_t *)(data[0] + i * st[0]);
    if (!s->any) {
      s->min = s->max = v;
      s->any = true;
    }
    if (v < s->min) s->min = v;
    if (v > s->max) s->max = v;
    if (!s->has_bad && (v < s->lo || v >= s->hi)) {
      s->has_bad = true;
      s->bad = v;
    }
  }
}

static void scan_index(const lt_tensor *index, int64_t lo, int64_t hi, scan_ud *s) {
  memset(s, 0, sizeof *s);
  s->lo = lo;
  s->hi = hi;
  lt_tensor g = geom(index);
  lt_tensor *ops[1] = {&g};
  lt_iter it;
  lt_iter_init(&it, 1, ops, g.ndim, g.size);
  iter_serial(&it, scan_row, s);
}

/* Fails naming op, the first out-of-range value and the valid range. */
static int check_index(lt_ctx *ctx, const char *op, const lt_tensor *index, int64_t base,
                       int dim, int64_t size) {
  scan_ud s;
  scan_index(index, base, base + size, &s);
  if (!s.has_bad) return 0;
  if (size == 0)
    return lt_fail(ctx, "%s: index %lld is out of range for dimension %d of size 0", op,
                   (long long)s.bad, dim + 1);
  return lt_fail(ctx, "%s: index %lld is out of range for dimension %d of size %lld (valid "
                 "positions %lld..%lld)", op, (long long)s.bad, dim + 1, (long long)size,
                 (long long)base, (long long)(base + size - 1));
}

/* ------------------------------------------------------------ kernels */

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

/* Runs the gather kernel: out (geometry go) from src restrided as `gs` with index `gi`, all
** of go's shape; dstride is src's element stride along the indexed dim. */
static void run_gather(lt_ctx *ctx, lt_tensor *go, lt_tensor *gs, lt_tensor *gi,
                       int64_t dstride, int64_t base) {
  lt_tensor *ops[3] = {go, gs, gi};
  lt_iter it;
  lt_iter_init(&it, 3, ops, go->ndim, go->size);
  gather_ud u = {go->dtype, dstride * (int64_t)lt_dtype_size(go->dtype), base};
  lt_iter_run(ctx, &it, gather_row, &u);
}

/* self[.., index[.., k, ..] - base, ..] (=|+=) src[.., k, ..] for k < K, over rows of
** (self, index, src) restrided to the iteration shape with dim collapsed to size 1. */
enum { SCAT_SET, SCAT_ADD };
typedef struct {
  lt_dtype dt;
  int mode;
  int64_t K, sst, ist, rst, base;   /* byte strides along dim: self, index, src */
} scat_ud;

/* k outer, i inner: for a fixed k the row's destinations are distinct, and each destination
** still sees its k in increasing order (the last write wins for scatter). The inner loop then
** walks the row contiguously, which matters when dim is an outer dimension. */
#define SCAT_LOOP(T, STMT)                                                      \
  do {                                                                          \
    for (int64_t k = 0; k < u->K; k++) {                                        \
      const char *pi = data[1] + k * u->ist, *pr = data[2] + k * u->rst;        \
      if (st[1] == 0) {   /* one index for the whole row (index_add) */         \
        char *ps = data[0] + (*(const int64_t *)pi - u->base) * u->sst;         \
        for (int64_t i = 0; i < n; i++) {                                       \
          T *d = (T *)(ps + i * st[0]);                                         \
          const T *s = (const T *)(pr + i * st[2]);                             \
          STMT;                                                                 \
        }                                                                       \
      } else {                                                                  \
        for (int64_t i = 0; i < n; i++) {                                       \
          int64_t v = *(const int64_t *)(pi + i * st[1]) - u->base;             \
          T *d = (T *)(data[0] + i * st[0] + v * u->sst);                       \
          const T *s = (const T *)(pr + i * st[2]);                             \
          STMT;                                                                 \
        }                                                                       \
      }                                                                         \
    }                                                                           \
  } while (0)

static void scatter_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const scat_ud *u = ud;
  if (u->mode == SCAT_SET) {
    switch (u->dt) {
      case LT_FLOAT32: SCAT_LOOP(float, *d = *s); break;
      case LT_FLOAT64: SCAT_LOOP(double, *d = *s); break;
      case LT_INT64: SCAT_LOOP(int64_t, *d = *s); break;
      case LT_BOOL: SCAT_LOOP(bool, *d = *s); break;
      default: break;
    }
  } else {
    switch (u->dt) {
      case LT_FLOAT32: SCAT_LOOP(float, *d += *s); break;
      case LT_FLOAT64: SCAT_LOOP(double, *d += *s); break;
      case LT_INT64: SCAT_LOOP(int64_t, *d += *s); break;
      case LT_BOOL: SCAT_LOOP(bool, *d = *d || *s); break;
      default: break;
    }
  }
}

/* Scatter along d over the iteration shape `shape` (rank nd, already >= 1): `index` is either
** an index of that shape (index_1d false) or a 1-d index applied along d (index_add). `src` is
** a tensor whose positions cover the shape, or (src_value) a 0-d value written everywhere.
** Arguments are already checked. */
static void run_scatter(lt_ctx *ctx, lt_tensor *self, int d, const lt_tensor *index,
                        bool index_1d, const lt_tensor *src, bool src_value, int nd,
                        const int64_t *shape, int mode, int64_t base) {
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, shape, (size_t)nd * sizeof *sz);
  int64_t K = sz[d];
  if (K == 0 || lt_shape_numel(nd, sz) == 0) return;
  sz[d] = 1;
  int64_t es = (int64_t)lt_dtype_size(self->dtype);
  lt_tensor gs = geom(self), gi = geom(index), gr = geom(src);
  int64_t sst = gs.stride[d] * es;
  int64_t ist = (index_1d ? gi.stride[0] : gi.stride[d]) * 8;
  int64_t rst = src_value ? 0 : gr.stride[d] * es;
  memcpy(gs.size, sz, sizeof sz);
  gs.ndim = nd;
  if (index_1d) {
    gi.ndim = nd;
    for (int i = 0; i < nd; i++) gi.stride[i] = 0;
  }
  memcpy(gi.size, sz, sizeof sz);
  if (!src_value) memcpy(gr.size, sz, sizeof sz);
  lt_tensor *ops[3] = {&gs, &gi, &gr};
  lt_iter it;
  lt_iter_init(&it, 3, ops, nd, sz);
  scat_ud u = {self->dtype, mode, K, sst, ist, rst, base};
  lt_iter_run(ctx, &it, scatter_row, &u);
}

/* ------------------------------------------------------------ index_select / index_add */

typedef struct {
  int ndim;
  int64_t size[LT_MAX_DIMS];
  int dim;
  int64_t base;
} idx_extra;

static void put_idx(idx_extra *e, const lt_tensor *t, int dim, int64_t base) {
  e->ndim = t->ndim;
  memcpy(e->size, t->size, sizeof e->size);
  e->dim = dim;
  e->base = base;
}

/* Zeros of the saved input shape with grad scattered in along dim. */
static int zeros_scatter_add(lt_ctx *ctx, lt_tensor **out, const idx_extra *e, lt_tensor *index,
                             bool index_1d, lt_tensor *grad) {
  lt_tensor *z;
  if (lt_full(ctx, &z, grad->dtype, e->ndim, e->size, 0.0)) return -1;
  lt_tensor gg = geom(grad);
  run_scatter(ctx, z, e->dim, index, index_1d, grad, false, gg.ndim, gg.size, SCAT_ADD, e->base);
  *out = z;
  return 0;
}

static int index_select_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                                 lt_tensor **gi) {
  lt_tensor *index;
  if (lt_saved_get(ctx, self, 0, &index)) return -1;
  return zeros_scatter_add(ctx, &gi[0], self->extra, index, true, go[0]);
}

static const lt_node_type index_select_type = {"IndexSelectBackward0", index_select_backward,
                                               NULL};

static int check_index_1d(lt_ctx *ctx, const char *op, const lt_tensor *index) {
  char a[256];
  if (need_int64(ctx, op, "index", index)) return -1;
  if (index->ndim > 1)
    return lt_fail(ctx, "%s: index must be a 0-d or 1-d tensor (got shape %s)", op,
                   LT_SHAPE(index, a));
  return 0;
}

int lt_index_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                    int64_t base) {
  int d;
  if (check_index_1d(ctx, "index_select", index) ||
      lt_wrap_dim(ctx, "index_select", dim, t->ndim, &d))
    return -1;
  lt_tensor gt = geom(t);
  if (check_index(ctx, "index_select", index, base, d, gt.size[d])) return -1;
  int64_t n = lt_numel(index);
  if (t->ndim == 0 && n != 1)   /* a 0-d input gives a 0-d result: one index only */
    return lt_fail(ctx, "index_select: a 0-d input takes exactly one index (got %lld)",
                   (long long)n);
  lt_tensor *r;
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, t->size, sizeof sz);
  if (t->ndim > 0) sz[d] = n;
  if (new_out(ctx, "index_select", &r, t->dtype, t->ndim, sz)) return -1;
  if (n > 0 && lt_numel(r) > 0) {
    lt_tensor gr = geom(r), gs = gt, gi = geom(index);
    memcpy(gs.size, gr.size, sizeof gs.size);
    gs.stride[d] = 0;
    int64_t ist = gi.stride[0];
    gi.ndim = gr.ndim;
    memcpy(gi.size, gr.size, sizeof gi.size);
    for (int i = 0; i < gi.ndim; i++) gi.stride[i] = 0;
    gi.stride[d] = ist;
    run_gather(ctx, &gr, &gs, &gi, gt.stride[d], base);
  }
  lt_node *node;
  if (lt_record(ctx, &index_select_type, 1, &t, 1, &r, sizeof(idx_extra), 1, &node)) {
    lt_release(r);
    return -1;
  }
  if (node) {
    put_idx(node->extra, t, d, base);
    if (lt_save(node, 0, index, false)) {
      lt_release(r);
      return lt_fail(ctx, "index_select: out of memory");
    }
  }
  *out = r;
  return 0;
}

/* IndexAddBackward0: self's gradient passes through; src's is grad gathered at index. */
static int index_add_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                              lt_tensor **gi) {
  idx_extra *e = self->extra;
  if (lt_needs_input_grad(self, 0)) gi[0] = lt_retain(go[0]);
  if (lt_needs_input_grad(self, 1)) {
    lt_tensor *index;
    if (lt_saved_get(ctx, self, 0, &index)) return -1;
    lt_tensor *g;
    if (lt_index_select(ctx, &g, go[0], e->dim, index, e->base)) return -1;
    int rc = lt_reshape(ctx, &gi[1], g, e->ndim, e->size);   /* src may be 0-d */
    lt_release(g);
    if (rc) return -1;
  }
  return 0;
}

static const lt_node_type index_add_type = {"IndexAddBackward0", index_add_backward, NULL};

/* Checks index_add arguments; d gets the wrapped dim. */
static int index_add_check(lt_ctx *ctx, const char *op, lt_tensor *t, int dim,
                           lt_tensor *index, lt_tensor *src, int64_t base, int *d) {
  char a[256], b[256];
  if (check_index_1d(ctx, op, index) || lt_wrap_dim(ctx, op, dim, t->ndim, d)) return -1;
  if (src->dtype != t->dtype)
    return lt_fail(ctx, "%s: self (%s) and source (%s) must have the same dtype", op,
                   lt_dtype_name(t->dtype), lt_dtype_name(src->dtype));
  lt_tensor gt = geom(t), gsrc = geom(src);
  bool ok = gsrc.ndim == gt.ndim && gsrc.size[*d] == lt_numel(index);
  for (int i = 0; ok && i < gt.ndim; i++)
    if (i != *d && gsrc.size[i] != gt.size[i]) ok = false;
  if (!ok)
    return lt_fail(ctx, "%s: source of shape %s does not match self of shape %s with %lld "
                   "indices along dimension %d", op, LT_SHAPE(src, a), LT_SHAPE(t, b),
                   (long long)lt_numel(index), *d + 1);
  return check_index(ctx, op, index, base, *d, gt.size[*d]);
}

static int index_add_record(lt_ctx *ctx, const char *op, lt_tensor *in, lt_tensor *src,
                            lt_tensor *r, lt_tensor *index, int d, int64_t base) {
  lt_tensor *ins[2] = {in, src};
  lt_node *node;
  if (lt_record(ctx, &index_add_type, 2, ins, 1, &r, sizeof(idx_extra), 1, &node)) return -1;
  if (node) {
    put_idx(node->extra, src, d, base);
    if (lt_save(node, 0, index, false)) return lt_fail(ctx, "%s: out of memory", op);
  }
  return 0;
}

int lt_index_add(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                 lt_tensor *src, int64_t base) {
  int d;
  if (index_add_check(ctx, "index_add", t, dim, index, src, base, &d)) return -1;
  lt_tensor *r;
  if (new_out(ctx, "index_add", &r, t->dtype, t->ndim, t->size)) return -1;
  lt_kernels(r)->copy(ctx, r, t);
  lt_tensor gsrc = geom(src);
  run_scatter(ctx, r, d, index, true, src, false, gsrc.ndim, gsrc.size, SCAT_ADD, base);
  if (index_add_record(ctx, "index_add", t, src, r, index, d, base)) {
    lt_release(r);
    return -1;
  }
  *out = r;
  return 0;
}

int lt_index_add_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, lt_tensor *src,
                  int64_t base) {
  int d;
  if (index_add_check(ctx, "index_add_", t, dim, index, src, base, &d) ||
      lt_check_inplace_from(ctx, "index_add_", t, src))
    return -1;
  lt_tensor gsrc = geom(src);
  run_scatter(ctx, t, d, index, true, src, false, gsrc.ndim, gsrc.size, SCAT_ADD, base);
  lt_bump_version(t);
  return index_add_record(ctx, "index_add_", t, src, t, index, d, base);
}

/* ------------------------------------------------------------ gather */

static int gather_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  lt_tensor *index;
  if (lt_saved_get(ctx, self, 0, &index)) return -1;
  return zeros_scatter_add(ctx, &gi[0], self->extra, index, false, go[0]);
}

static const lt_node_type gather_type = {"GatherBackward0", gather_backward, NULL};

/* Shape rules shared by gather and scatter: same rank, index no larger than self apart from
** dim (and no larger than src anywhere, when src is a tensor). */
static int check_gs_shapes(lt_ctx *ctx, const char *op, const lt_tensor *t, int d,
                           const lt_tensor *index, const lt_tensor *src) {
  char a[256], b[256];
  lt_tensor gt = geom(t), gi = geom(index);
  if (gi.ndim != gt.ndim)
    return lt_fail(ctx, "%s: index tensor must have the same number of dimensions as the "
                   "input tensor (index shape %s, input shape %s)", op, LT_SHAPE(index, a),
                   LT_SHAPE(t, b));
  for (int i = 0; i < gt.ndim; i++)
    if (i != d && gi.size[i] > gt.size[i])
      return lt_fail(ctx, "%s: size of index %s does not fit input %s apart from dimension "
                     "%d (index size %lld > %lld in dimension %d)", op, LT_SHAPE(index, a),
                     LT_SHAPE(t, b), d + 1, (long long)gi.size[i], (long long)gt.size[i],
                     i + 1);
  if (src) {
    lt_tensor gr = geom(src);
    bool ok = gr.ndim == gi.ndim;
    for (int i = 0; ok && i < gi.ndim; i++) ok = gi.size[i] <= gr.size[i];
    if (!ok)
      return lt_fail(ctx, "%s: index of shape %s does not fit source of shape %s (index must "
                     "be no larger than source in every dimension)", op, LT_SHAPE(index, a),
                     LT_SHAPE(src, b));
  }
  return 0;
}

int lt_gather(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
              int64_t base) {
  int d;
  if (need_int64(ctx, "gather", "index", index) ||
      lt_wrap_dim(ctx, "gather", dim, t->ndim, &d) ||
      check_gs_shapes(ctx, "gather", t, d, index, NULL))
    return -1;
  lt_tensor gt = geom(t);
  if (check_index(ctx, "gather", index, base, d, gt.size[d])) return -1;
  lt_tensor *r;
  if (new_out(ctx, "gather", &r, t->dtype, index->ndim, index->size)) return -1;
  if (lt_numel(r) > 0) {
    lt_tensor gr = geom(r), gs = gt, gi = geom(index);
    memcpy(gs.size, gi.size, sizeof gs.size);
    gs.stride[d] = 0;
    run_gather(ctx, &gr, &gs, &gi, gt.stride[d], base);
  }
  lt_node *node;
  if (lt_record(ctx, &gather_type, 1, &t, 1, &r, sizeof(idx_extra), 1, &node)) {
    lt_release(r);
    return -1;
  }
  if (node) {
    put_idx(node->extra, t, d, base);
    if (lt_save(node, 0, index, false)) {
      lt_release(r);
      return lt_fail(ctx, "gather: out of memory");
    }
  }
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ scatter / scatter_add */

/* ScatterBackward0 (src tensor), ScatterBackward1 (value), ScatterAddBackward0:
** self's gradient is grad with the overwritten positions zeroed (scatter) or grad (add);
** src's gradient is grad gathered at index. */
typedef struct {
  idx_extra in;
  int src_ndim;
  int64_t src_size[LT_MAX_DIMS];
  bool add;
} scat_extra;

/* src's gradient: grad gathered at index, placed in the leading corner of zeros shaped like
** src when src is larger than index (only that corner was read). */
static int scatter_src_grad(lt_ctx *ctx, lt_tensor **out, const scat_extra *e, lt_tensor *grad,
                            lt_tensor *index) {
  lt_tensor *g;
  if (lt_gather(ctx, &g, grad, e->in.dim, index, e->in.base)) return -1;
  if (lt_numel(g) == lt_shape_numel(e->src_ndim, e->src_size)) {
    int rc = lt_reshape(ctx, out, g, e->src_ndim, e->src_size);
    lt_release(g);
    return rc;
  }
  lt_tensor *z;
  if (lt_full(ctx, &z, g->dtype, e->src_ndim, e->src_size, 0.0)) {
    lt_release(g);
    return -1;
  }
  lt_tensor gz = geom(z), gg = geom(g);
  lt_tensor *corner = lt_alias(z, gz.ndim, gg.size, gz.stride, z->offset);
  if (!corner) {
    lt_release(g);
    lt_release(z);
    return lt_fail(ctx, "scatter backward: out of memory");
  }
  lt_kernels(z)->copy(ctx, corner, g);
  lt_release(corner);
  lt_release(g);
  *out = z;
  return 0;
}

static int scatter_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  scat_extra *e = self->extra;
  lt_tensor *index;
  if (lt_saved_get(ctx, self, 0, &index)) return -1;
  if (lt_needs_input_grad(self, 0)) {
    if (e->add) {
      gi[0] = lt_retain(go[0]);
    } else {
      if (lt_clone(ctx, &gi[0], go[0])) return -1;
      lt_tensor *zero;
      if (lt_full(ctx, &zero, go[0]->dtype, 0, NULL, 0.0)) return -1;
      lt_tensor gg = geom(index);
      run_scatter(ctx, gi[0], e->in.dim, index, false, zero, true, gg.ndim, gg.size,
                  SCAT_SET, e->in.base);
      lt_release(zero);
    }
  }
  if (self->n_in > 1 && lt_needs_input_grad(self, 1))
    return scatter_src_grad(ctx, &gi[1], e, go[0], index);
  return 0;
}

static const lt_node_type scatter_src_type = {"ScatterBackward0", scatter_backward, NULL};
static const lt_node_type scatter_value_type = {"ScatterBackward1", scatter_backward, NULL};
static const lt_node_type scatter_add_type = {"ScatterAddBackward0", scatter_backward, NULL};

/* One entry for the six scatter variants. src NULL: scatter of `value`. out NULL: in place. */
static int scatter_impl(lt_ctx *ctx, const char *op, lt_tensor **out, lt_tensor *t, int dim,
                        lt_tensor *index, lt_tensor *src, double value, bool add,
                        int64_t base) {
  int d;
  if (need_int64(ctx, op, "index", index) || lt_wrap_dim(ctx, op, dim, t->ndim, &d) ||
      check_gs_shapes(ctx, op, t, d, index, src))
    return -1;
  if (src && src->dtype != t->dtype)
    return lt_fail(ctx, "%s: self (%s) and src (%s) must have the same dtype", op,
                   lt_dtype_name(t->dtype), lt_dtype_name(src->dtype));
  lt_tensor gt = geom(t);
  if (check_index(ctx, op, index, base, d, gt.size[d])) return -1;
  if (!out && lt_check_inplace_from(ctx, op, t, src)) return -1;
  if (!src && check_value(ctx, op, t->dtype, value)) return -1;
  lt_tensor *val = NULL;
  if (!src) {
    if (lt_full(ctx, &val, t->dtype, 0, NULL, value)) return -1;
  }
  lt_tensor *r = t;
  if (out) {
    if (new_out(ctx, op, &r, t->dtype, t->ndim, t->size)) {
      lt_release(val);
      return -1;
    }
    lt_kernels(r)->copy(ctx, r, t);
  }
  lt_tensor gi = geom(index);
  run_scatter(ctx, r, d, index, false, src ? src : val, !src, gi.ndim, gi.size,
              add ? SCAT_ADD : SCAT_SET, base);
  lt_release(val);
  if (!out) lt_bump_version(t);
  const lt_node_type *type = add ? &scatter_add_type : src ? &scatter_src_type
                                                           : &scatter_value_type;
  lt_tensor *ins[2] = {t, src};
  lt_node *node;
  if (lt_record(ctx, type, src ? 2 : 1, ins, 1, &r, sizeof(scat_extra), 1, &node)) {
    if (out) lt_release(r);
    return -1;
  }
  if (node) {
    scat_extra *e = node->extra;
    put_idx(&e->in, t, d, base);
    e->add = add;
    if (src) {
      e->src_ndim = src->ndim;
      memcpy(e->src_size, src->size, sizeof e->src_size);
    }
    if (lt_save(node, 0, index, false)) {
      if (out) lt_release(r);
      return lt_fail(ctx, "%s: out of memory", op);
    }
  }
  if (out) *out = r;
  return 0;
}

int lt_scatter(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
               lt_tensor *src, int64_t base) {
  return scatter_impl(ctx, "scatter", out, t, dim, index, src, 0, false, base);
}

int lt_scatter_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, lt_tensor *src,
                int64_t base) {
  return scatter_impl(ctx, "scatter_", NULL, t, dim, index, src, 0, false, base);
}

int lt_scatter_value(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                     double value, int64_t base) {
  return scatter_impl(ctx, "scatter", out, t, dim, index, NULL, value, false, base);
}

int lt_scatter_value_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, double value,
                      int64_t base) {
  return scatter_impl(ctx, "scatter_", NULL, t, dim, index, NULL, value, false, base);
}

int lt_scatter_add(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                   lt_tensor *src, int64_t base) {
  return scatter_impl(ctx, "scatter_add", out, t, dim, index, src, 0, true, base);
}

int lt_scatter_add_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, lt_tensor *src,
                    int64_t base) {
  return scatter_impl(ctx, "scatter_add_", NULL, t, dim, index, src, 0, true, base);
}

/* ------------------------------------------------------------ masked_fill */

typedef struct {
  lt_dtype dt;
  float f;
  double v;
  int64_t i;
  bool b;
} mfill_ud;

/* Contiguous rows, branch-free: the mask becomes an all-ones/all-zeros word that selects
** the value's bits or the source's (a data-dependent branch mispredicts on random masks). */
#define MFILL_BITS(U, W)                                                              \
  static void mfill_bits##W(char *o, const char *s, const bool *m, U vb, int64_t n) { \
    for (int64_t k = 0; k < n; k++) {                                               \
      U x, mk = (U)0 - (U)m[k];                                                     \
      memcpy(&x, s + k * (int64_t)sizeof(U), sizeof(U));                            \
      x = (x & ~mk) | (vb & mk);                                                    \
      memcpy(o + k * (int64_t)sizeof(U), &x, sizeof(U));                            \
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

/* out[...] = mask[...] ? value : src[...], all broadcast to out's shape. */
static void run_mfill(lt_ctx *ctx, lt_tensor *out, lt_tensor *src, lt_tensor *mask, double v) {
  lt_tensor *ops[3] = {out, src, mask};
  lt_iter it;
  lt_iter_init(&it, 3, ops, out->ndim, out->size);
  mfill_ud u = {out->dtype, (float)v, v, (int64_t)v, v != 0};
  lt_iter_run(ctx, &it, mfill_row, &u);
}

typedef struct { int ndim; int64_t size[LT_MAX_DIMS]; } mshape_extra;

static int masked_fill_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                                lt_tensor **gi) {
  mshape_extra *e = self->extra;
  lt_tensor *mask, *g;
  if (lt_saved_get(ctx, self, 0, &mask)) return -1;
  if (lt_masked_fill(ctx, &g, go[0], mask, 0.0)) return -1;
  int rc = lt_sum_to(ctx, &gi[0], g, e->ndim, e->size);
  lt_release(g);
  return rc;
}

static const lt_node_type masked_fill_type = {"MaskedFillBackward0", masked_fill_backward,
                                              NULL};

static int record_masked(lt_ctx *ctx, const lt_node_type *type, const char *op, lt_tensor *in,
                         lt_tensor *r, lt_tensor *mask, int ndim, const int64_t *size) {
  lt_node *node;
  if (lt_record(ctx, type, 1, &in, 1, &r, sizeof(mshape_extra), 1, &node)) return -1;
  if (node) {
    mshape_extra *e = node->extra;
    e->ndim = ndim;
    memcpy(e->size, size, (size_t)ndim * sizeof *size);
    if (lt_save(node, 0, mask, false)) return lt_fail(ctx, "%s: out of memory", op);
  }
  return 0;
}

int lt_masked_fill(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_tensor *mask, double v) {
  int nd;
  int64_t sz[LT_MAX_DIMS] = {0};
  if (need_bool_mask(ctx, "masked_fill", mask) ||
      check_value(ctx, "masked_fill", t->dtype, v) ||
      lt_broadcast_shapes(ctx, "masked_fill", t->ndim, t->size, mask->ndim, mask->size, &nd,
                          sz))
    return -1;
  lt_tensor *r;
  if (new_out(ctx, "masked_fill", &r, t->dtype, nd, sz)) return -1;
  run_mfill(ctx, r, t, mask, v);
  if (record_masked(ctx, &masked_fill_type, "masked_fill", t, r, mask, t->ndim, t->size)) {
    lt_release(r);
    return -1;
  }
  *out = r;
  return 0;
}

int lt_masked_fill_(lt_ctx *ctx, lt_tensor *t, lt_tensor *mask, double v) {
  int nd;
  int64_t sz[LT_MAX_DIMS] = {0};
  char a[256], b[256];
  if (need_bool_mask(ctx, "masked_fill_", mask) ||
      check_value(ctx, "masked_fill_", t->dtype, v) ||
      lt_broadcast_shapes(ctx, "masked_fill_", t->ndim, t->size, mask->ndim, mask->size, &nd,
                          sz))
    return -1;
  bool same = nd == t->ndim;
  for (int i = 0; same && i < nd; i++) same = sz[i] == t->size[i];
  if (!same)
    return lt_fail(ctx, "masked_fill_: mask of shape %s cannot be broadcast to the shape %s "
                   "of the tensor written in place", LT_SHAPE(mask, a), LT_SHAPE(t, b));
  if (lt_check_inplace_fill(ctx, "masked_fill_", t)) return -1;
  run_mfill(ctx, t, t, mask, v);
  lt_bump_version(t);
  return record_masked(ctx, &masked_fill_type, "masked_fill_", t, t, mask, t->ndim, t->size);
}

/* ------------------------------------------------------------ masked_select */

typedef struct { int64_t count; } count_ud;

static void count_row(char **data, const int64_t *st, int64_t n, void *ud) {
  count_ud *c = ud;
  for (int64_t i = 0; i < n; i++) c->count += *(const bool *)(data[0] + i * st[0]);
}

/* Packs: when mask (operand 1) is set, copies operand 0's element to the next slot of out
** (pack) or the next element of out into operand 0 (unpack). Serial: order matters. */
typedef struct { char *next; size_t es; bool unpack; } pack_ud;

static void pack_row(char **data, const int64_t *st, int64_t n, void *ud) {
  pack_ud *p = ud;
  for (int64_t i = 0; i < n; i++) {
    if (!*(const bool *)(data[1] + i * st[1])) continue;
    if (p->unpack)
      memcpy(data[0] + i * st[0], p->next, p->es);
    else
      memcpy(p->next, data[0] + i * st[0], p->es);
    p->next += p->es;
  }
}

/* MaskedSelectBackward0: the gradient goes back to the selected positions of the broadcast
** input (zeros elsewhere), then is summed to the input's shape. */
typedef struct {
  mshape_extra in;
  int bnd;
  int64_t bsize[LT_MAX_DIMS];
} msel_extra;

static int masked_select_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                                  lt_tensor **gi) {
  msel_extra *e = self->extra;
  lt_tensor *mask, *z, *g;
  if (lt_saved_get(ctx, self, 0, &mask)) return -1;
  if (lt_full(ctx, &z, go[0]->dtype, e->bnd, e->bsize, 0.0)) return -1;
  if (lt_contiguous(ctx, &g, go[0])) {
    lt_release(z);
    return -1;
  }
  lt_tensor *ops[2] = {z, mask};
  lt_iter it;
  lt_iter_init(&it, 2, ops, z->ndim, z->size);
  pack_ud p = {lt_data(g), lt_dtype_size(g->dtype), true};
  iter_serial(&it, pack_row, &p);
  lt_release(g);
  int rc = lt_sum_to(ctx, &gi[0], z, e->in.ndim, e->in.size);
  lt_release(z);
  return rc;
}

static const lt_node_type masked_select_type = {"MaskedSelectBackward0",
                                                masked_select_backward, NULL};

int lt_masked_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_tensor *mask) {
  int nd;
  int64_t sz[LT_MAX_DIMS] = {0};
  if (need_bool_mask(ctx, "masked_select", mask) ||
      lt_broadcast_shapes(ctx, "masked_select", t->ndim, t->size, mask->ndim, mask->size, &nd,
                          sz))
    return -1;
  lt_iter it;
  lt_tensor *mops[1] = {mask};
  lt_iter_init(&it, 1, mops, nd, sz);
  count_ud c = {0};
  iter_serial(&it, count_row, &c);
  lt_tensor *r;
  if (new_out(ctx, "masked_select", &r, t->dtype, 1, &c.count)) return -1;
  lt_tensor *ops[2] = {t, mask};
  lt_iter_init(&it, 2, ops, nd, sz);
  pack_ud p = {lt_data(r), lt_dtype_size(t->dtype), false};
  iter_serial(&it, pack_row, &p);
  lt_node *node;
  if (lt_record(ctx, &masked_select_type, 1, &t, 1, &r, sizeof(msel_extra), 1, &node)) {
    lt_release(r);
    return -1;
  }
  if (node) {
    msel_extra *e = node->extra;
    e->in.ndim = t->ndim;
    memcpy(e->in.size, t->size, sizeof e->in.size);
    e->bnd = nd;
    memcpy(e->bsize, sz, (size_t)nd * sizeof *sz);
    if (lt_save(node, 0, mask, false)) {
      lt_release(r);
      return lt_fail(ctx, "masked_select: out of memory");
    }
  }
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ one_hot */

typedef struct { int64_t *out, C, base, j; } onehot_ud;

static void onehot_row(char **data, const int64_t *st, int64_t n, void *ud) {
  onehot_ud *u = ud;
  for (int64_t i = 0; i < n; i++, u->j++)
    u->out[u->j * u->C + *(const int64_t *)(data[0] + i * st[0]) - u->base] = 1;
}

int lt_one_hot(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t num_classes, int64_t base) {
  if (need_int64(ctx, "one_hot", "class values", t)) return -1;
  if (t->ndim >= LT_MAX_DIMS)
    return lt_fail(ctx, "one_hot: input already has the maximum of %d dimensions",
                   LT_MAX_DIMS);
  scan_ud s;
  if (num_classes < 0) {
    if (num_classes != -1)
      return lt_fail(ctx, "one_hot: num_classes must be positive or -1 (got %lld)",
                     (long long)num_classes);
    if (lt_numel(t) == 0)
      return lt_fail(ctx, "one_hot: can not infer total number of classes from empty tensor");
    scan_index(t, base, INT64_MAX, &s);
    if (s.has_bad && s.bad < base)
      return lt_fail(ctx, "one_hot: class values must be at least %lld (got %lld)",
                     (long long)base, (long long)s.bad);
    if (s.has_bad || s.max - base >= INT64_MAX / 16)
      return lt_fail(ctx, "one_hot: class value %lld is too large", (long long)s.max);
    num_classes = s.max - base + 1;
  } else {
    if (num_classes >= INT64_MAX / 16)
      return lt_fail(ctx, "one_hot: num_classes %lld is too large", (long long)num_classes);
    scan_index(t, base, base + num_classes, &s);
    if (s.has_bad)
      return lt_fail(ctx, "one_hot: class value %lld is out of range for %lld classes (valid "
                     "%lld..%lld)", (long long)s.bad, (long long)num_classes, (long long)base,
                     (long long)(base + num_classes - 1));
  }
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, t->size, (size_t)t->ndim * sizeof *sz);
  sz[t->ndim] = num_classes;
  lt_tensor *r;
  if (new_out(ctx, "one_hot", &r, LT_INT64, t->ndim + 1, sz)) return -1;
  memset(lt_data(r), 0, (size_t)lt_numel(r) * sizeof(int64_t));
  if (lt_numel(r) > 0) {
    lt_tensor g = geom(t);
    lt_tensor *ops[1] = {&g};
    lt_iter it;
    lt_iter_init(&it, 1, ops, g.ndim, g.size);
    onehot_ud u = {lt_data(r), num_classes, base, 0};
    iter_serial(&it, onehot_row, &u);
  }
  *out = r;
  return 0;
}
