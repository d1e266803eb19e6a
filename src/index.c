/*
** index.c -- the op layer of the indexing ops: index_select, index_add, gather, scatter,
** scatter_add, masked_fill, masked_select, one_hot; each forward with its backward right after
** it. The device's kernels (cpu/index.c) do the reading and writing.
**
** Index tensors are int64 and hold positions counted from `base`: 0 for C callers (PyTorch's
** convention), 1 from Lua. Every index is range-checked (the index_range kernel) before
** anything is written, so a bad index fails the call cleanly (naming the op, the value and the
** size) and leaves in-place targets untouched.
**
** index_select and index_add reach the gather and scatter kernels with their 1-d index
** expanded along every other dim (stride 0), a view of the index's storage.
*/
#include "backend.h"
#include "elementwise.h"

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

/* lt_empty whose failure message names op. */
static int new_out(lt_ctx *ctx, const char *op, lt_tensor **out, const lt_tensor *like,
                   lt_dtype dt, int ndim, const int64_t *size) {
  if (ltO_empty_as(ctx, out, like, dt, ndim, size) == 0) return 0;
  char msg[sizeof ctx->err];
  memcpy(msg, ctx->err, sizeof msg);
  return ltB_fail(ctx, "%s: %s", op, msg);
}

/* A fill value must be representable in an integer dtype (converting it would be undefined). */
static int check_value(lt_ctx *ctx, const char *op, lt_dtype dt, double v) {
  if (dt == LT_INT64 && !(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    return ltB_fail(ctx, "%s: value %g cannot be converted to int64", op, v);
  return 0;
}

static int need_int64(lt_ctx *ctx, const char *op, const char *what, const lt_tensor *t) {
  if (t->dtype != LT_INT64)
    return ltB_fail(ctx, "%s: %s must be an int64 tensor (got %s)", op, what,
                    lt_dtype_name(t->dtype));
  return 0;
}

static int need_bool_mask(lt_ctx *ctx, const char *op, const lt_tensor *m) {
  if (m->dtype != LT_BOOL)
    return ltB_fail(ctx, "%s: mask must be a bool tensor (got %s); compare to get one, e.g. "
                    "x:gt(0)", op, lt_dtype_name(m->dtype));
  return 0;
}

/* ------------------------------------------------------------ index range check */

/* Fails naming op, the first out-of-range value and the valid range. */
static int check_index(lt_ctx *ctx, const char *op, const lt_tensor *index, int64_t base,
                       int dim, int64_t size) {
  int64_t bad, max;
  if (ltK_kernels(index)->index_range(ctx, index, base, base + size, NULL, &bad, &max)) return 0;
  if (size == 0)
    return ltB_fail(ctx, "%s: index %lld is out of range for dimension %d of size 0", op,
                    (long long)bad, dim + 1);
  return ltB_fail(ctx, "%s: index %lld is out of range for dimension %d of size %lld (valid "
                  "positions %lld..%lld)", op, (long long)bad, dim + 1, (long long)size,
                  (long long)base, (long long)(base + size - 1));
}

/* A 0-d or 1-d index seen along dim d of a rank-nd shape `size` (stride 0 elsewhere; nd 0:
** the index's one element). NULL on OOM, with the message set. */
static lt_tensor *index_along(lt_ctx *ctx, const char *op, const lt_tensor *index, int d,
                              int nd, const int64_t *size) {
  int64_t st[LT_MAX_DIMS] = {0};
  if (nd > 0) st[d] = index->ndim ? index->stride[0] : 1;
  lt_tensor *v = ltB_alias(index, nd, size, st, index->offset);
  if (!v) ltB_fail(ctx, "%s: out of memory", op);
  return v;
}

/* t viewed with the broadcast shape (nd, sz) it is known to broadcast to (no autograd). */
static lt_tensor *broadcast_view(lt_ctx *ctx, const char *op, const lt_tensor *t, int nd,
                                 const int64_t *sz) {
  int64_t st[LT_MAX_DIMS] = {0};
  int lead = nd - t->ndim;
  for (int i = lead; i < nd; i++) st[i] = t->size[i - lead] == sz[i] ? t->stride[i - lead] : 0;
  lt_tensor *v = ltB_alias(t, nd, sz, st, t->offset);
  if (!v) ltB_fail(ctx, "%s: out of memory", op);
  return v;
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

/* Zeros of the saved input shape with grad scattered in along dim: index has grad's shape, or
** (index_1d) is index_select's index, expanded to it. */
static int zeros_scatter_add(lt_ctx *ctx, lt_tensor **out, const idx_extra *e, lt_tensor *index,
                             bool index_1d, lt_tensor *grad) {
  lt_tensor *z, *ix = index;
  if (index_1d && !(ix = index_along(ctx, "index_select backward", index, e->dim, grad->ndim,
                                     grad->size)))
    return -1;
  if (ltO_full_as(ctx, &z, grad, grad->dtype, e->ndim, e->size, 0.0)) {
    if (index_1d) lt_release(ix);
    return -1;
  }
  ltK_kernels(z)->scatter(ctx, z, e->dim, ix, grad, true, e->base);
  if (index_1d) lt_release(ix);
  *out = z;
  return 0;
}

static int index_select_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                                 lt_tensor **gi) {
  lt_tensor *index;
  if (ltG_saved_get(ctx, self, 0, &index)) return -1;
  return zeros_scatter_add(ctx, &gi[0], self->extra, index, true, go[0]);
}

static const ltG_node_type index_select_type = {"IndexSelectBackward0", index_select_backward,
                                               NULL};

static int check_index_1d(lt_ctx *ctx, const char *op, const lt_tensor *index) {
  char a[256];
  if (need_int64(ctx, op, "index", index)) return -1;
  if (index->ndim > 1)
    return ltB_fail(ctx, "%s: index must be a 0-d or 1-d tensor (got shape %s)", op,
                    LT_SHAPE(index, a));
  return 0;
}

int lt_index_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                    int64_t base) {
  if (ltD_check_devices(ctx, "index_select", t, index)) return -1;
  int d;
  if (check_index_1d(ctx, "index_select", index) ||
      ltB_wrap_dim(ctx, "index_select", dim, t->ndim, &d))
    return -1;
  lt_tensor gt = geom(t);
  if (check_index(ctx, "index_select", index, base, d, gt.size[d])) return -1;
  int64_t n = lt_numel(index);
  if (t->ndim == 0 && n != 1)   /* a 0-d input gives a 0-d result: one index only */
    return ltB_fail(ctx, "index_select: a 0-d input takes exactly one index (got %lld)",
                    (long long)n);
  lt_tensor *r;
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, t->size, sizeof sz);
  if (t->ndim > 0) sz[d] = n;
  if (new_out(ctx, "index_select", &r, t, t->dtype, t->ndim, sz)) return -1;
  lt_tensor *ix = index_along(ctx, "index_select", index, d, r->ndim, r->size);
  if (!ix) {
    lt_release(r);
    return -1;
  }
  ltK_kernels(r)->gather(ctx, r, t, d, ix, base);
  lt_release(ix);
  lt_node *node;
  if (ltG_record(ctx, &index_select_type, 1, &t, 1, &r, sizeof(idx_extra), 1, &node)) {
    lt_release(r);
    return -1;
  }
  if (node) {
    put_idx(node->extra, t, d, base);
    if (ltG_save(node, 0, index, false)) {
      lt_release(r);
      return ltB_fail(ctx, "index_select: out of memory");
    }
  }
  *out = r;
  return 0;
}

/* IndexAddBackward0: self's gradient passes through; src's is grad gathered at index. */
static int index_add_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                              lt_tensor **gi) {
  idx_extra *e = self->extra;
  if (ltG_needs_input_grad(self, 0)) gi[0] = lt_retain(go[0]);
  if (ltG_needs_input_grad(self, 1)) {
    lt_tensor *index;
    if (ltG_saved_get(ctx, self, 0, &index)) return -1;
    lt_tensor *g;
    if (lt_index_select(ctx, &g, go[0], e->dim, index, e->base)) return -1;
    int rc = lt_reshape(ctx, &gi[1], g, e->ndim, e->size);   /* src may be 0-d */
    lt_release(g);
    if (rc) return -1;
  }
  return 0;
}

static const ltG_node_type index_add_type = {"IndexAddBackward0", index_add_backward, NULL};

/* Checks index_add arguments; d gets the wrapped dim. */
static int index_add_check(lt_ctx *ctx, const char *op, lt_tensor *t, int dim,
                           lt_tensor *index, lt_tensor *src, int64_t base, int *d) {
  char a[256], b[256];
  if (check_index_1d(ctx, op, index) || ltB_wrap_dim(ctx, op, dim, t->ndim, d)) return -1;
  if (src->dtype != t->dtype)
    return ltB_fail(ctx, "%s: self (%s) and source (%s) must have the same dtype", op,
                    lt_dtype_name(t->dtype), lt_dtype_name(src->dtype));
  lt_tensor gt = geom(t), gsrc = geom(src);
  bool ok = gsrc.ndim == gt.ndim && gsrc.size[*d] == lt_numel(index);
  for (int i = 0; ok && i < gt.ndim; i++)
    if (i != *d && gsrc.size[i] != gt.size[i]) ok = false;
  if (!ok)
    return ltB_fail(ctx, "%s: source of shape %s does not match self of shape %s with %lld "
                    "indices along dimension %d", op, LT_SHAPE(src, a), LT_SHAPE(t, b),
                    (long long)lt_numel(index), *d + 1);
  return check_index(ctx, op, index, base, *d, gt.size[*d]);
}

/* self[.., index[k] - base, ..] += src[.., k, ..]: the device's scatter-add with the index
** expanded to src's shape. */
static int run_index_add(lt_ctx *ctx, const char *op, lt_tensor *self, int d,
                         const lt_tensor *index, const lt_tensor *src, int64_t base) {
  lt_tensor *ix = index_along(ctx, op, index, d, src->ndim, src->size);
  if (!ix) return -1;
  ltK_kernels(self)->scatter(ctx, self, d, ix, src, true, base);
  lt_release(ix);
  return 0;
}

static int index_add_record(lt_ctx *ctx, const char *op, lt_tensor *in, lt_tensor *src,
                            lt_tensor *r, lt_tensor *index, int d, int64_t base) {
  lt_tensor *ins[2] = {in, src};
  lt_node *node;
  if (ltG_record(ctx, &index_add_type, 2, ins, 1, &r, sizeof(idx_extra), 1, &node)) return -1;
  if (node) {
    put_idx(node->extra, src, d, base);
    if (ltG_save(node, 0, index, false)) return ltB_fail(ctx, "%s: out of memory", op);
  }
  return 0;
}

int lt_index_add(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
                 lt_tensor *src, int64_t base) {
  if (ltD_check_devices(ctx, "index_add", t, index) || ltD_check_devices(ctx, "index_add", t, src))
    return -1;
  int d;
  if (index_add_check(ctx, "index_add", t, dim, index, src, base, &d)) return -1;
  lt_tensor *r;
  if (new_out(ctx, "index_add", &r, t, t->dtype, t->ndim, t->size)) return -1;
  ltK_kernels(r)->copy(ctx, r, t);
  if (run_index_add(ctx, "index_add", r, d, index, src, base) ||
      index_add_record(ctx, "index_add", t, src, r, index, d, base)) {
    lt_release(r);
    return -1;
  }
  *out = r;
  return 0;
}

int lt_index_add_(lt_ctx *ctx, lt_tensor *t, int dim, lt_tensor *index, lt_tensor *src,
                  int64_t base) {
  if (ltD_check_devices(ctx, "index_add_", t, index) ||
      ltD_check_devices(ctx, "index_add_", t, src))
    return -1;
  int d;
  if (index_add_check(ctx, "index_add_", t, dim, index, src, base, &d) ||
      ltB_check_inplace_from(ctx, "index_add_", t, src))
    return -1;
  /* a source in t's memory is read as it was (a row added in may be one written before) */
  lt_tensor *clone;
  if (ltO_ew_unaliased(ctx, t, src, true, &clone)) return -1;
  int rc = run_index_add(ctx, "index_add_", t, d, index, clone ? clone : src, base);
  lt_release(clone);
  if (rc) return -1;
  ltB_bump_version(t);
  return index_add_record(ctx, "index_add_", t, src, t, index, d, base);
}

/* ------------------------------------------------------------ gather */

static int gather_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  lt_tensor *index;
  if (ltG_saved_get(ctx, self, 0, &index)) return -1;
  return zeros_scatter_add(ctx, &gi[0], self->extra, index, false, go[0]);
}

static const ltG_node_type gather_type = {"GatherBackward0", gather_backward, NULL};

/* Shape rules shared by gather and scatter: same rank, index no larger than self apart from
** dim (and no larger than src anywhere, when src is a tensor). */
static int check_gs_shapes(lt_ctx *ctx, const char *op, const lt_tensor *t, int d,
                           const lt_tensor *index, const lt_tensor *src) {
  char a[256], b[256];
  lt_tensor gt = geom(t), gi = geom(index);
  if (gi.ndim != gt.ndim)
    return ltB_fail(ctx, "%s: index tensor must have the same number of dimensions as the "
                    "input tensor (index shape %s, input shape %s)", op, LT_SHAPE(index, a),
                    LT_SHAPE(t, b));
  for (int i = 0; i < gt.ndim; i++)
    if (i != d && gi.size[i] > gt.size[i])
      return ltB_fail(ctx, "%s: size of index %s does not fit input %s apart from dimension "
                      "%d (index size %lld > %lld in dimension %d)", op, LT_SHAPE(index, a),
                      LT_SHAPE(t, b), d + 1, (long long)gi.size[i], (long long)gt.size[i],
                      i + 1);
  if (src) {
    lt_tensor gr = geom(src);
    bool ok = gr.ndim == gi.ndim;
    for (int i = 0; ok && i < gi.ndim; i++) ok = gi.size[i] <= gr.size[i];
    if (!ok)
      return ltB_fail(ctx, "%s: index of shape %s does not fit source of shape %s (index must "
                      "be no larger than source in every dimension)", op, LT_SHAPE(index, a),
                      LT_SHAPE(src, b));
  }
  return 0;
}

int lt_gather(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, lt_tensor *index,
              int64_t base) {
  if (ltD_check_devices(ctx, "gather", t, index)) return -1;
  int d;
  if (need_int64(ctx, "gather", "index", index) ||
      ltB_wrap_dim(ctx, "gather", dim, t->ndim, &d) ||
      check_gs_shapes(ctx, "gather", t, d, index, NULL))
    return -1;
  lt_tensor gt = geom(t);
  if (check_index(ctx, "gather", index, base, d, gt.size[d])) return -1;
  lt_tensor *r;
  if (new_out(ctx, "gather", &r, t, t->dtype, index->ndim, index->size)) return -1;
  ltK_kernels(r)->gather(ctx, r, t, d, index, base);
  lt_node *node;
  if (ltG_record(ctx, &gather_type, 1, &t, 1, &r, sizeof(idx_extra), 1, &node)) {
    lt_release(r);
    return -1;
  }
  if (node) {
    put_idx(node->extra, t, d, base);
    if (ltG_save(node, 0, index, false)) {
      lt_release(r);
      return ltB_fail(ctx, "gather: out of memory");
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
  if (lt_numel(g) == ltB_shape_numel(e->src_ndim, e->src_size)) {
    int rc = lt_reshape(ctx, out, g, e->src_ndim, e->src_size);
    lt_release(g);
    return rc;
  }
  lt_tensor *z;
  if (ltO_full_as(ctx, &z, g, g->dtype, e->src_ndim, e->src_size, 0.0)) {
    lt_release(g);
    return -1;
  }
  lt_tensor gz = geom(z), gg = geom(g);
  lt_tensor *corner = ltB_alias(z, gz.ndim, gg.size, gz.stride, z->offset);
  if (!corner) {
    lt_release(g);
    lt_release(z);
    return ltB_fail(ctx, "scatter backward: out of memory");
  }
  ltK_kernels(z)->copy(ctx, corner, g);
  lt_release(corner);
  lt_release(g);
  *out = z;
  return 0;
}

static int scatter_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  scat_extra *e = self->extra;
  lt_tensor *index;
  if (ltG_saved_get(ctx, self, 0, &index)) return -1;
  if (ltG_needs_input_grad(self, 0)) {
    if (e->add) {
      gi[0] = lt_retain(go[0]);
    } else {
      if (lt_clone(ctx, &gi[0], go[0])) return -1;
      lt_tensor *zero;
      if (ltO_full_as(ctx, &zero, go[0], go[0]->dtype, 0, NULL, 0.0)) return -1;
      ltK_kernels(gi[0])->scatter(ctx, gi[0], e->in.dim, index, zero, false, e->in.base);
      lt_release(zero);
    }
  }
  if (self->n_in > 1 && ltG_needs_input_grad(self, 1))
    return scatter_src_grad(ctx, &gi[1], e, go[0], index);
  return 0;
}

static const ltG_node_type scatter_src_type = {"ScatterBackward0", scatter_backward, NULL};
static const ltG_node_type scatter_value_type = {"ScatterBackward1", scatter_backward, NULL};
static const ltG_node_type scatter_add_type = {"ScatterAddBackward0", scatter_backward, NULL};

/* One entry for the six scatter variants. src NULL: scatter of `value`. out NULL: in place. */
static int scatter_impl(lt_ctx *ctx, const char *op, lt_tensor **out, lt_tensor *t, int dim,
                        lt_tensor *index, lt_tensor *src, double value, bool add,
                        int64_t base) {
  if (ltD_check_devices(ctx, op, t, index) || (src && ltD_check_devices(ctx, op, t, src)))
    return -1;
  int d;
  if (need_int64(ctx, op, "index", index) || ltB_wrap_dim(ctx, op, dim, t->ndim, &d) ||
      check_gs_shapes(ctx, op, t, d, index, src))
    return -1;
  if (src && src->dtype != t->dtype)
    return ltB_fail(ctx, "%s: self (%s) and src (%s) must have the same dtype", op,
                    lt_dtype_name(t->dtype), lt_dtype_name(src->dtype));
  lt_tensor gt = geom(t);
  if (check_index(ctx, op, index, base, d, gt.size[d])) return -1;
  if (!out && ltB_check_inplace_from(ctx, op, t, src)) return -1;
  if (!src && check_value(ctx, op, t->dtype, value)) return -1;
  lt_tensor *val = NULL;
  if (!src) {
    if (ltO_full_as(ctx, &val, t, t->dtype, 0, NULL, value)) return -1;
  }
  lt_tensor *r = t;
  if (out) {
    if (new_out(ctx, op, &r, t, t->dtype, t->ndim, t->size)) {
      lt_release(val);
      return -1;
    }
    ltK_kernels(r)->copy(ctx, r, t);
  }
  lt_tensor *clone = NULL;   /* a source in t's memory, written in place, is read as it was */
  if (!out && src && ltO_ew_unaliased(ctx, t, src, true, &clone)) {
    lt_release(val);
    return -1;
  }
  ltK_kernels(r)->scatter(ctx, r, d, index, clone ? clone : src ? src : val, add, base);
  lt_release(clone);
  lt_release(val);
  if (!out) ltB_bump_version(t);
  const ltG_node_type *type = add ? &scatter_add_type : src ? &scatter_src_type
                                                           : &scatter_value_type;
  lt_tensor *ins[2] = {t, src};
  lt_node *node;
  if (ltG_record(ctx, type, src ? 2 : 1, ins, 1, &r, sizeof(scat_extra), 1, &node)) {
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
    if (ltG_save(node, 0, index, false)) {
      if (out) lt_release(r);
      return ltB_fail(ctx, "%s: out of memory", op);
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

typedef struct { int ndim; int64_t size[LT_MAX_DIMS]; } mshape_extra;

static int masked_fill_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                                lt_tensor **gi) {
  mshape_extra *e = self->extra;
  lt_tensor *mask, *g;
  if (ltG_saved_get(ctx, self, 0, &mask)) return -1;
  if (lt_masked_fill(ctx, &g, go[0], mask, 0.0)) return -1;
  int rc = ltO_sum_to(ctx, &gi[0], g, e->ndim, e->size);
  lt_release(g);
  return rc;
}

static const ltG_node_type masked_fill_type = {"MaskedFillBackward0", masked_fill_backward,
                                              NULL};

static int record_masked(lt_ctx *ctx, const ltG_node_type *type, const char *op, lt_tensor *in,
                         lt_tensor *r, lt_tensor *mask, int ndim, const int64_t *size) {
  lt_node *node;
  if (ltG_record(ctx, type, 1, &in, 1, &r, sizeof(mshape_extra), 1, &node)) return -1;
  if (node) {
    mshape_extra *e = node->extra;
    e->ndim = ndim;
    memcpy(e->size, size, (size_t)ndim * sizeof *size);
    if (ltG_save(node, 0, mask, false)) return ltB_fail(ctx, "%s: out of memory", op);
  }
  return 0;
}

int lt_masked_fill(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_tensor *mask, double v) {
  if (ltD_check_devices(ctx, "masked_fill", t, mask)) return -1;
  int nd;
  int64_t sz[LT_MAX_DIMS] = {0};
  if (need_bool_mask(ctx, "masked_fill", mask) ||
      check_value(ctx, "masked_fill", t->dtype, v) ||
      ltB_broadcast_shapes(ctx, "masked_fill", t->ndim, t->size, mask->ndim, mask->size, &nd,
                           sz))
    return -1;
  lt_tensor *r;
  if (new_out(ctx, "masked_fill", &r, t, t->dtype, nd, sz)) return -1;
  ltK_kernels(r)->masked_fill(ctx, r, t, mask, v);
  if (record_masked(ctx, &masked_fill_type, "masked_fill", t, r, mask, t->ndim, t->size)) {
    lt_release(r);
    return -1;
  }
  *out = r;
  return 0;
}

int lt_masked_fill_(lt_ctx *ctx, lt_tensor *t, lt_tensor *mask, double v) {
  if (ltD_check_devices(ctx, "masked_fill_", t, mask)) return -1;
  int nd;
  int64_t sz[LT_MAX_DIMS] = {0};
  char a[256], b[256];
  if (need_bool_mask(ctx, "masked_fill_", mask) ||
      check_value(ctx, "masked_fill_", t->dtype, v) ||
      ltB_broadcast_shapes(ctx, "masked_fill_", t->ndim, t->size, mask->ndim, mask->size, &nd,
                           sz))
    return -1;
  bool same = nd == t->ndim;
  for (int i = 0; same && i < nd; i++) same = sz[i] == t->size[i];
  if (!same)
    return ltB_fail(ctx, "masked_fill_: mask of shape %s cannot be broadcast to the shape %s "
                    "of the tensor written in place", LT_SHAPE(mask, a), LT_SHAPE(t, b));
  if (ltB_check_inplace_fill(ctx, "masked_fill_", t)) return -1;
  ltK_kernels(t)->masked_fill(ctx, t, t, mask, v);
  ltB_bump_version(t);
  return record_masked(ctx, &masked_fill_type, "masked_fill_", t, t, mask, t->ndim, t->size);
}

/* ------------------------------------------------------------ masked_select */

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
  lt_tensor *mask, *z, *g, *m = NULL;
  if (ltG_saved_get(ctx, self, 0, &mask)) return -1;
  if (ltO_full_as(ctx, &z, go[0], go[0]->dtype, e->bnd, e->bsize, 0.0)) return -1;
  if (lt_contiguous(ctx, &g, go[0])) {
    lt_release(z);
    return -1;
  }
  m = broadcast_view(ctx, "masked_select backward", mask, z->ndim, z->size);
  int rc = m ? 0 : -1;
  if (m) {
    ltK_kernels(z)->masked_scatter(z, m, g);
    rc = ltO_sum_to(ctx, &gi[0], z, e->in.ndim, e->in.size);
  }
  lt_release(m);
  lt_release(g);
  lt_release(z);
  return rc;
}

static const ltG_node_type masked_select_type = {"MaskedSelectBackward0",
                                                masked_select_backward, NULL};

int lt_masked_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_tensor *mask) {
  if (ltD_check_devices(ctx, "masked_select", t, mask)) return -1;
  int nd;
  int64_t sz[LT_MAX_DIMS] = {0};
  if (need_bool_mask(ctx, "masked_select", mask) ||
      ltB_broadcast_shapes(ctx, "masked_select", t->ndim, t->size, mask->ndim, mask->size, &nd,
                           sz))
    return -1;
  lt_tensor *tb = NULL, *mb = NULL, *r = NULL;
  if (!(tb = broadcast_view(ctx, "masked_select", t, nd, sz)) ||
      !(mb = broadcast_view(ctx, "masked_select", mask, nd, sz)))
    goto fail;
  int64_t count = ltK_kernels(t)->mask_count(mb);
  if (new_out(ctx, "masked_select", &r, t, t->dtype, 1, &count)) goto fail;
  ltK_kernels(t)->masked_select(r, tb, mb);
  lt_release(tb);
  lt_release(mb);
  tb = mb = NULL;
  lt_node *node;
  if (ltG_record(ctx, &masked_select_type, 1, &t, 1, &r, sizeof(msel_extra), 1, &node)) goto fail;
  if (node) {
    msel_extra *e = node->extra;
    e->in.ndim = t->ndim;
    memcpy(e->in.size, t->size, sizeof e->in.size);
    e->bnd = nd;
    memcpy(e->bsize, sz, (size_t)nd * sizeof *sz);
    if (ltG_save(node, 0, mask, false)) {
      ltB_fail(ctx, "masked_select: out of memory");
      goto fail;
    }
  }
  *out = r;
  return 0;
fail:
  lt_release(tb);
  lt_release(mb);
  lt_release(r);
  return -1;
}

/* ------------------------------------------------------------ one_hot */

int lt_one_hot(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t num_classes, int64_t base) {
  if (need_int64(ctx, "one_hot", "class values", t)) return -1;
  if (t->ndim >= LT_MAX_DIMS)
    return ltB_fail(ctx, "one_hot: input already has the maximum of %d dimensions",
                    LT_MAX_DIMS);
  int64_t bad, max;
  const ltK_backend *k = ltK_kernels(t);
  if (num_classes < 0) {
    if (num_classes != -1)
      return ltB_fail(ctx, "one_hot: num_classes must be positive or -1 (got %lld)",
                      (long long)num_classes);
    if (lt_numel(t) == 0)
      return ltB_fail(ctx, "one_hot: can not infer total number of classes from empty tensor");
    bool ok = k->index_range(ctx, t, base, INT64_MAX, NULL, &bad, &max);
    if (!ok && bad < base)
      return ltB_fail(ctx, "one_hot: class values must be at least %lld (got %lld)",
                      (long long)base, (long long)bad);
    if (!ok || max - base >= INT64_MAX / 16)
      return ltB_fail(ctx, "one_hot: class value %lld is too large", (long long)max);
    num_classes = max - base + 1;
  } else {
    if (num_classes >= INT64_MAX / 16)
      return ltB_fail(ctx, "one_hot: num_classes %lld is too large", (long long)num_classes);
    if (!k->index_range(ctx, t, base, base + num_classes, NULL, &bad, &max))
      return ltB_fail(ctx, "one_hot: class value %lld is out of range for %lld classes (valid "
                      "%lld..%lld)", (long long)bad, (long long)num_classes, (long long)base,
                      (long long)(base + num_classes - 1));
  }
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, t->size, (size_t)t->ndim * sizeof *sz);
  sz[t->ndim] = num_classes;
  /* zeros with a 1 scattered along the new last dim at each class: the index is t with a
  ** trailing dim of size 1 */
  int64_t isz[LT_MAX_DIMS] = {0}, ist[LT_MAX_DIMS] = {0};
  memcpy(isz, t->size, (size_t)t->ndim * sizeof *isz);
  memcpy(ist, t->stride, (size_t)t->ndim * sizeof *ist);
  isz[t->ndim] = 1;
  lt_tensor *r = NULL, *one = NULL, *ix = ltB_alias(t, t->ndim + 1, isz, ist, t->offset);
  if (!ix) return ltB_fail(ctx, "one_hot: out of memory");
  if (ltO_full_as(ctx, &r, t, LT_INT64, t->ndim + 1, sz, 0.0) ||
      ltO_full_as(ctx, &one, t, LT_INT64, 0, NULL, 1.0)) {
    lt_release(ix);
    lt_release(r);
    return -1;
  }
  k->scatter(ctx, r, t->ndim, ix, one, false, base);
  lt_release(ix);
  lt_release(one);
  *out = r;
  return 0;
}

/* The positions (from base) of t's non-zero elements in row-major order, as an int64
** (count, ndim) tensor on t's device: for each dim, the grid of positions along it (an arange
** seen with stride 0 across the other dims) masked by t != 0. A 0-d t gives (count, 0). */
int lt_nonzero(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t base) {
  lt_tensor *mask = NULL, *cols[LT_MAX_DIMS] = {NULL}, *r = NULL;
  int nd = t->ndim, rc = -1;
  if (t->dtype == LT_BOOL)
    mask = lt_retain(t);
  else if (lt_binary_scalar(ctx, &mask, LT_NE, t, 0, true, false))
    return -1;
  if (nd == 0) {
    int64_t sz[2] = {ltK_kernels(mask)->mask_count(mask), 0};
    rc = ltO_empty_as(ctx, out, t, LT_INT64, 2, sz);
    lt_release(mask);
    return rc;
  }
  for (int d = 0; d < nd; d++) {
    lt_tensor *pos = NULL, *grid = NULL;
    int64_t st[LT_MAX_DIMS] = {0};
    st[d] = 1;
    if (ltO_empty_as(ctx, &pos, t, LT_INT64, 1, &t->size[d])) goto done;
    ltK_kernels(pos)->arange_int(pos, base, 1);
    grid = ltB_alias(pos, nd, t->size, st, 0);
    lt_release(pos);
    if (!grid) {
      ltB_fail(ctx, "nonzero: out of memory");
      goto done;
    }
    int e = lt_masked_select(ctx, &cols[d], grid, mask);
    lt_release(grid);
    if (e) goto done;
  }
  if (lt_stack(ctx, &r, nd, cols, 1)) goto done;
  *out = r;
  rc = 0;
done:
  for (int d = 0; d < nd; d++) lt_release(cols[d]);
  lt_release(mask);
  return rc;
}
