/*
** shape.c -- views (view, reshape, transpose, permute, expand, narrow, select, squeeze,
** unsqueeze, flatten, unflatten) and the shape ops that copy (cat, stack, repeat, flip,
** tril/triu), each with its backward right after it.
**
** A view shares its input's storage (lt_alias) and only changes sizes, strides and offset; it
** never copies. Its backward maps the output gradient back onto the input's geometry.
*/
#include <stdio.h>

#include "core.h"

typedef struct { int ndim; int64_t size[LT_MAX_DIMS]; } shape_extra;

static void put_shape(shape_extra *e, const lt_tensor *t) {
  e->ndim = t->ndim;
  memcpy(e->size, t->size, sizeof e->size);
}

/* Records a one-input, one-output node for a view/copy; on failure releases *out. */
static int record1(lt_ctx *ctx, const lt_node_type *type, lt_tensor *in, lt_tensor **out,
                   size_t extra, int nsaved, lt_node **node) {
  if (lt_record(ctx, type, 1, &in, 1, out, extra, nsaved, node)) {
    lt_release(*out);
    *out = NULL;
    return -1;
  }
  if ((*out)->storage == in->storage) {
    (*out)->is_view = true;
    (*out)->grad_view = in->requires_grad || in->grad_view;
    lt_set_view_base(*out, in);
  }
  return 0;
}

/* Records a view whose backward needs only the input's shape. */
static int record_shape(lt_ctx *ctx, const lt_node_type *type, lt_tensor *in, lt_tensor **out) {
  lt_node *n;
  if (record1(ctx, type, in, out, sizeof(shape_extra), 0, &n)) return -1;
  if (n) put_shape(n->extra, in);
  return 0;
}

/* lt_empty whose failure message names op. */
static int new_out(lt_ctx *ctx, const char *op, lt_tensor **out, const lt_tensor *like,
                   lt_dtype dt, int ndim, const int64_t *size) {
  if (lt_empty_as(ctx, out, like, dt, ndim, size) == 0) return 0;
  char msg[sizeof ctx->err];
  memcpy(msg, ctx->err, sizeof msg);
  return lt_fail(ctx, "%s: %s", op, msg);
}

static int alias_fail(lt_ctx *ctx, const char *op) {
  return lt_fail(ctx, "%s: out of memory", op);
}

/* Shared by backward functions: grad reshaped to the saved input shape. */
static int reshape_back(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  shape_extra *e = self->extra;
  return lt_reshape(ctx, &gi[0], go[0], e->ndim, e->size);
}

/* ------------------------------------------------------------ view / reshape */

/* Resolves a requested shape (one entry may be -1) against numel; the error names op. */
static int infer_shape(lt_ctx *ctx, const char *op, int64_t numel, int ndim, const int64_t *in,
                       int64_t *outsz) {
  if (ndim < 0 || ndim > LT_MAX_DIMS)
    return lt_fail(ctx, "%s: %d dimensions requested, at most %d supported", op, ndim,
                   LT_MAX_DIMS);
  int infer = -1;
  int64_t prod = 1;
  char buf[256];
  for (int i = 0; i < ndim; i++) {
    if (in[i] == -1) {
      if (infer >= 0) return lt_fail(ctx, "%s: only one dimension can be inferred (shape %s)",
                                     op, lt_sizes_str(ndim, in, buf, sizeof buf));
      infer = i;
    } else if (in[i] < 0) {
      return lt_fail(ctx, "%s: invalid shape dimension %lld in shape %s", op,
                     (long long)in[i], lt_sizes_str(ndim, in, buf, sizeof buf));
    } else {
      prod *= in[i];
    }
    outsz[i] = in[i];
  }
  if (infer >= 0) {
    if (prod == 0)
      return lt_fail(ctx, "%s: cannot reshape tensor of %lld elements into shape %s because "
                     "the unspecified dimension size -1 can be any value and is ambiguous", op,
                     (long long)numel, lt_sizes_str(ndim, in, buf, sizeof buf));
    if (numel % prod == 0) {
      outsz[infer] = numel / prod;
      prod = numel;
    }
  }
  if (prod != numel)
    return lt_fail(ctx, "%s: shape %s is invalid for input of size %lld", op,
                   lt_sizes_str(ndim, in, buf, sizeof buf), (long long)numel);
  return 0;
}

/* Strides that let (nd, nsz) view a tensor of geometry (od, osz, ost) without copying, or
** false. Old dims are taken in chunks that are contiguous with each other; each chunk must be
** covered exactly by a run of new dims, which then stride inside it. */
static bool view_strides(int od, const int64_t *osz, const int64_t *ost, int nd,
                         const int64_t *nsz, int64_t *nst) {
  if (lt_shape_numel(od, osz) == 0 || od == 0) {
    lt_contiguous_strides(nd, nsz, nst);
    return true;
  }
  int v = nd - 1;
  int64_t base = ost[od - 1], tnum = 1, vnum = 1;
  for (int d = od - 1; d >= 0; d--) {
    tnum *= osz[d];
    bool chunk_end = d == 0 || (osz[d - 1] != 1 && ost[d - 1] != tnum * base);
    if (!chunk_end) continue;
    while (v >= 0 && (vnum < tnum || nsz[v] == 1)) {
      nst[v] = vnum * base;
      vnum *= nsz[v];
      v--;
    }
    if (vnum != tnum) return false;
    if (d > 0) {
      base = ost[d - 1];
      tnum = 1;
      vnum = 1;
    }
  }
  return v == -1;
}

static const lt_node_type view_type = {"ViewBackward0", reshape_back, NULL};

static int view_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim,
                     const int64_t *size, const char *op, bool *not_viewable) {
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  if (infer_shape(ctx, op, lt_numel(t), ndim, size, sz)) return -1;
  if (!view_strides(t->ndim, t->size, t->stride, ndim, sz, st)) {
    if (not_viewable) {
      *not_viewable = true;
      return -1;
    }
    char a[256], b[256], c[256];
    return lt_fail(ctx, "%s: view size is not compatible with input tensor's size and stride "
                   "(at least one dimension spans across two contiguous subspaces): input "
                   "shape %s with strides %s, requested shape %s. Use .reshape(...) instead.",
                   op, LT_SHAPE(t, a), lt_sizes_str(t->ndim, t->stride, b, sizeof b),
                   lt_sizes_str(ndim, sz, c, sizeof c));
  }
  lt_tensor *r = lt_alias(t, ndim, sz, st, t->offset);
  if (!r) return alias_fail(ctx, op);
  if (record_shape(ctx, &view_type, t, &r)) return -1;
  *out = r;
  return 0;
}

int lt_view(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim, const int64_t *size) {
  return view_impl(ctx, out, t, ndim, size, "view", NULL);
}

int lt_reshape(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim, const int64_t *size) {
  bool copy = false;
  if (view_impl(ctx, out, t, ndim, size, "reshape", &copy) == 0) return 0;
  if (!copy) return -1;
  lt_tensor *c;
  if (lt_contiguous(ctx, &c, t)) return -1;
  int rc = view_impl(ctx, out, c, ndim, size, "reshape", NULL);
  lt_release(c);
  return rc;
}

int lt_flatten(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int start, int end) {
  int s, e;
  if (lt_wrap_dim(ctx, "flatten", start, t->ndim, &s) ||
      lt_wrap_dim(ctx, "flatten", end, t->ndim, &e))
    return -1;
  if (s > e)
    return lt_fail(ctx, "flatten: start_dim (%d) cannot come after end_dim (%d)", s + 1, e + 1);
  if (t->ndim == 0) {
    int64_t one = 1;
    return lt_reshape(ctx, out, t, 1, &one);
  }
  int64_t sz[LT_MAX_DIMS] = {0};
  int n = 0;
  for (int i = 0; i < s; i++) sz[n++] = t->size[i];
  int64_t m = 1;
  for (int i = s; i <= e; i++) m *= t->size[i];
  sz[n++] = m;
  for (int i = e + 1; i < t->ndim; i++) sz[n++] = t->size[i];
  return lt_reshape(ctx, out, t, n, sz);
}

int lt_unflatten(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, int n,
                 const int64_t *sizes) {
  int d;
  if (lt_wrap_dim(ctx, "unflatten", dim, t->ndim, &d)) return -1;
  if (t->ndim == 0) return lt_fail(ctx, "unflatten: cannot unflatten a 0-d tensor");
  if (n < 1) return lt_fail(ctx, "unflatten: sizes must be non-empty");
  if (t->ndim - 1 + n > LT_MAX_DIMS)
    return lt_fail(ctx, "unflatten: result would have more than %d dimensions", LT_MAX_DIMS);
  int64_t part[LT_MAX_DIMS] = {0};
  if (infer_shape(ctx, "unflatten", t->size[d], n, sizes, part)) {
    char a[256], b[256], msg[1024];
    snprintf(msg, sizeof msg, "%s", ctx->err);
    return lt_fail(ctx, "%s (unflatten of dimension %d of size %lld in a tensor of shape %s "
                   "into sizes %s)", msg, d + 1, (long long)t->size[d], LT_SHAPE(t, a),
                   lt_sizes_str(n, sizes, b, sizeof b));
  }
  int64_t sz[LT_MAX_DIMS] = {0};
  int k = 0;
  for (int i = 0; i < d; i++) sz[k++] = t->size[i];
  for (int i = 0; i < n; i++) sz[k++] = part[i];
  for (int i = d + 1; i < t->ndim; i++) sz[k++] = t->size[i];
  return lt_view(ctx, out, t, k, sz);
}

/* ------------------------------------------------------------ transpose / permute */

typedef struct { int d0, d1; } transpose_extra;

static int transpose_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                              lt_tensor **gi) {
  transpose_extra *e = self->extra;
  return lt_transpose(ctx, &gi[0], go[0], e->d0, e->d1);
}

static const lt_node_type transpose_type = {"TransposeBackward0", transpose_backward, NULL};

int lt_transpose(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int d0, int d1) {
  int a, b;
  if (lt_wrap_dim(ctx, "transpose", d0, t->ndim, &a) ||
      lt_wrap_dim(ctx, "transpose", d1, t->ndim, &b))
    return -1;
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  memcpy(sz, t->size, sizeof sz);
  memcpy(st, t->stride, sizeof st);
  if (t->ndim > 0) {
    sz[a] = t->size[b];
    sz[b] = t->size[a];
    st[a] = t->stride[b];
    st[b] = t->stride[a];
  }
  lt_tensor *r = lt_alias(t, t->ndim, sz, st, t->offset);
  if (!r) return alias_fail(ctx, "transpose");
  lt_node *n;
  if (record1(ctx, &transpose_type, t, &r, sizeof(transpose_extra), 0, &n)) return -1;
  if (n) *(transpose_extra *)n->extra = (transpose_extra){a, b};
  *out = r;
  return 0;
}

typedef struct { int ndim; int inv[LT_MAX_DIMS]; } permute_extra;

static int permute_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  permute_extra *e = self->extra;
  return lt_permute(ctx, &gi[0], go[0], e->inv);
}

static const lt_node_type permute_type = {"PermuteBackward0", permute_backward, NULL};

int lt_permute(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, const int *perm) {
  int p[LT_MAX_DIMS] = {0};
  bool seen[LT_MAX_DIMS] = {false};
  for (int i = 0; i < t->ndim; i++) {
    if (lt_wrap_dim(ctx, "permute", perm[i], t->ndim, &p[i])) return -1;
    if (seen[p[i]]) return lt_fail(ctx, "permute: dimension %d repeats in the permutation",
                                   p[i] + 1);
    seen[p[i]] = true;
  }
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  for (int i = 0; i < t->ndim; i++) {
    sz[i] = t->size[p[i]];
    st[i] = t->stride[p[i]];
  }
  lt_tensor *r = lt_alias(t, t->ndim, sz, st, t->offset);
  if (!r) return alias_fail(ctx, "permute");
  lt_node *n;
  if (record1(ctx, &permute_type, t, &r, sizeof(permute_extra), 0, &n)) return -1;
  if (n) {
    permute_extra *e = n->extra;
    e->ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) e->inv[p[i]] = i;
  }
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ expand */

static int expand_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  shape_extra *e = self->extra;
  return lt_sum_to(ctx, &gi[0], go[0], e->ndim, e->size);
}

static const lt_node_type expand_type = {"ExpandBackward0", expand_backward, NULL};

int lt_expand(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim, const int64_t *size) {
  char a[256], b[256];
  if (ndim < t->ndim || ndim > LT_MAX_DIMS)
    return lt_fail(ctx, "expand: the number of sizes provided (%d) must be greater or equal to "
                   "the number of dimensions in the tensor (%d) and at most %d", ndim, t->ndim,
                   LT_MAX_DIMS);
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int td = i - lead;
    if (td < 0) {
      if (size[i] < 0)
        return lt_fail(ctx, "expand: the expanded size %lld is not allowed in a leading, "
                       "non-existing dimension %d (target sizes %s, tensor sizes %s)",
                       (long long)size[i], i + 1, lt_sizes_str(ndim, size, a, sizeof a),
                       LT_SHAPE(t, b));
      sz[i] = size[i];
      st[i] = 0;
    } else if (size[i] == -1 || size[i] == t->size[td]) {
      sz[i] = t->size[td];
      st[i] = t->stride[td];
    } else if (t->size[td] == 1 && size[i] >= 0) {
      sz[i] = size[i];
      st[i] = 0;
    } else {
      return lt_fail(ctx, "expand: the expanded size of the tensor (%lld) must match the "
                     "existing size (%lld) at non-singleton dimension %d. Target sizes: %s. "
                     "Tensor sizes: %s", (long long)size[i], (long long)t->size[td], i + 1,
                     lt_sizes_str(ndim, size, a, sizeof a), LT_SHAPE(t, b));
    }
  }
  /* the element count of a view must fit in int64, or it wraps (to 0 for [2^62, 4]) and every
  ** op after would see an empty tensor */
  int64_t n = 1;
  bool empty = false;
  for (int i = 0; i < ndim; i++) empty = empty || sz[i] == 0;
  for (int i = 0; i < ndim && !empty; i++) {
    if (n > INT64_MAX / sz[i])
      return lt_fail(ctx, "expand: the target sizes %s hold more elements than int64 counts "
                     "(numel: integer multiplication overflow)", lt_sizes_str(ndim, sz, a,
                     sizeof a));
    n *= sz[i];
  }
  lt_tensor *r = lt_alias(t, ndim, sz, st, t->offset);
  if (!r) return alias_fail(ctx, "expand");
  if (record_shape(ctx, &expand_type, t, &r)) return -1;
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ narrow / select */

/* Gradient of a view into a region: zeros of the input's shape with grad copied into the
** region, which `region` cuts out of the zeros the same way the forward cut the input. */
typedef struct {
  shape_extra in;
  int dim;
  int64_t start, len;   /* narrow: [start, start+len); select: index in start, len = -1 */
} region_extra;

static int region_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  region_extra *e = self->extra;
  lt_tensor *z, *r;
  if (lt_full_as(ctx, &z, go[0], go[0]->dtype, e->in.ndim, e->in.size, 0.0)) return -1;
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, z->size, sizeof sz);
  int nd = z->ndim;
  int64_t off = z->offset + e->start * z->stride[e->dim];
  int64_t st[LT_MAX_DIMS] = {0};
  memcpy(st, z->stride, sizeof st);
  if (e->len >= 0) {
    sz[e->dim] = e->len;
  } else {
    for (int i = e->dim; i < nd - 1; i++) {
      sz[i] = sz[i + 1];
      st[i] = st[i + 1];
    }
    nd--;
  }
  r = lt_alias(z, nd, sz, st, off);
  if (!r) {
    lt_release(z);
    return alias_fail(ctx, self->type->name);
  }
  lt_kernels(z)->copy(ctx, r, go[0]);
  lt_release(r);
  gi[0] = z;
  return 0;
}

static const lt_node_type slice_type = {"SliceBackward0", region_backward, NULL};
static const lt_node_type select_type = {"SelectBackward0", region_backward, NULL};

static int record_region(lt_ctx *ctx, const lt_node_type *type, lt_tensor *t, lt_tensor **r,
                         int dim, int64_t start, int64_t len) {
  lt_node *n;
  if (record1(ctx, type, t, r, sizeof(region_extra), 0, &n)) return -1;
  if (n) {
    region_extra *e = n->extra;
    put_shape(&e->in, t);
    e->dim = dim;
    e->start = start;
    e->len = len;
  }
  return 0;
}

/* Lua-facing position (1-based, or the negative value as given) of a 0-based index. */
static long long lua_pos(int64_t i) { return (long long)(i >= 0 ? i + 1 : i); }

int lt_narrow(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, int64_t start, int64_t len) {
  int d;
  char a[256];
  if (t->ndim == 0) return lt_fail(ctx, "narrow: cannot be applied to a 0-dim tensor");
  if (lt_wrap_dim(ctx, "narrow", dim, t->ndim, &d)) return -1;
  int64_t size = t->size[d];
  if (start < -size || start > size)
    return lt_fail(ctx, "narrow: start %lld out of range for dimension %d of size %lld "
                   "(tensor of shape %s)", lua_pos(start), d + 1, (long long)size,
                   LT_SHAPE(t, a));
  if (start < 0) start += size;
  if (len < 0) return lt_fail(ctx, "narrow: length must be non-negative (got %lld)",
                              (long long)len);
  if (start + len > size)
    return lt_fail(ctx, "narrow: start (%lld) + length (%lld) exceeds dimension size (%lld) "
                   "of dimension %d (tensor of shape %s)", (long long)start + 1,
                   (long long)len, (long long)size, d + 1, LT_SHAPE(t, a));
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, t->size, sizeof sz);
  sz[d] = len;
  lt_tensor *r = lt_alias(t, t->ndim, sz, t->stride, t->offset + start * t->stride[d]);
  if (!r) return alias_fail(ctx, "narrow");
  if (record_region(ctx, &slice_type, t, &r, d, start, len)) return -1;
  *out = r;
  return 0;
}

int lt_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, int64_t index) {
  int d;
  char a[256];
  if (t->ndim == 0)
    return lt_fail(ctx, "select: cannot index a 0-dim tensor (it holds a single value)");
  if (lt_wrap_dim(ctx, "select", dim, t->ndim, &d)) return -1;
  int64_t size = t->size[d];
  if (index < -size || index >= size)
    return lt_fail(ctx, "select: index %lld out of range for dimension %d of size %lld "
                   "(tensor of shape %s)", lua_pos(index), d + 1, (long long)size,
                   LT_SHAPE(t, a));
  if (index < 0) index += size;
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  int k = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (i == d) continue;
    sz[k] = t->size[i];
    st[k++] = t->stride[i];
  }
  lt_tensor *r = lt_alias(t, k, sz, st, t->offset + index * t->stride[d]);
  if (!r) return alias_fail(ctx, "select");
  if (record_region(ctx, &select_type, t, &r, d, index, -1)) return -1;
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ squeeze / unsqueeze */

static const lt_node_type squeeze_all_type = {"SqueezeBackward0", reshape_back, NULL};
static const lt_node_type squeeze_dim_type = {"SqueezeBackward1", reshape_back, NULL};
static const lt_node_type unsqueeze_type = {"UnsqueezeBackward0", reshape_back, NULL};

int lt_squeeze(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim) {
  int d = -1;
  if (dim != -1000 && lt_wrap_dim(ctx, "squeeze", dim, t->ndim, &d)) return -1;
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  int k = 0;
  for (int i = 0; i < t->ndim; i++) {
    bool drop = t->size[i] == 1 && (dim == -1000 || i == d);
    if (drop) continue;
    sz[k] = t->size[i];
    st[k++] = t->stride[i];
  }
  lt_tensor *r = lt_alias(t, k, sz, st, t->offset);
  if (!r) return alias_fail(ctx, "squeeze");
  if (record_shape(ctx, dim == -1000 ? &squeeze_all_type : &squeeze_dim_type, t, &r))
    return -1;
  *out = r;
  return 0;
}

int lt_unsqueeze(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim) {
  int d;
  if (t->ndim >= LT_MAX_DIMS)
    return lt_fail(ctx, "unsqueeze: tensor already has the maximum of %d dimensions",
                   LT_MAX_DIMS);
  if (lt_wrap_dim(ctx, "unsqueeze", dim, t->ndim + 1, &d)) return -1;
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  int k = 0;
  for (int i = 0; i <= t->ndim; i++) {
    if (i == d) {
      sz[k] = 1;
      st[k++] = d < t->ndim ? t->size[d] * t->stride[d] : 1;
    }
    if (i < t->ndim) {
      sz[k] = t->size[i];
      st[k++] = t->stride[i];
    }
  }
  lt_tensor *r = lt_alias(t, k, sz, st, t->offset);
  if (!r) return alias_fail(ctx, "unsqueeze");
  if (record_shape(ctx, &unsqueeze_type, t, &r)) return -1;
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ cat / stack */

/* Per-input data of CatBackward0/StackBackward0 (n entries follow the header). */
typedef struct {
  int64_t start, len;    /* cat: region along dim; stack: start = position */
  lt_dtype dt;
  bool skip;             /* cat: a legacy empty 1-d input that took no part */
} part_info;

typedef struct {
  int dim, n;
  part_info part[];
} parts_extra;

static int parts_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi,
                          bool stack) {
  parts_extra *e = self->extra;
  for (int i = 0; i < e->n; i++) {
    if (!lt_needs_input_grad(self, i)) continue;
    part_info *p = &e->part[i];
    lt_tensor *g;
    int rc;
    if (p->skip) {
      int64_t zero = 0;
      rc = lt_full_as(ctx, &gi[i], go[0], p->dt, 1, &zero, 0.0);
      if (rc) return -1;
      continue;
    }
    if (stack)
      rc = lt_select(ctx, &g, go[0], e->dim, p->start);
    else
      rc = lt_narrow(ctx, &g, go[0], e->dim, p->start, p->len);
    if (rc) return -1;
    rc = lt_to_dtype(ctx, &gi[i], g, p->dt);
    lt_release(g);
    if (rc) return -1;
  }
  return 0;
}

static int cat_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  return parts_backward(ctx, self, go, gi, false);
}

static int stack_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  return parts_backward(ctx, self, go, gi, true);
}

static const lt_node_type cat_type = {"CatBackward0", cat_backward, NULL};
static const lt_node_type stack_type = {"StackBackward0", stack_backward, NULL};

static bool legacy_empty(const lt_tensor *t) { return t->ndim == 1 && t->size[0] == 0; }

int lt_cat(lt_ctx *ctx, lt_tensor **out, int n, lt_tensor *const *ts, int dim) {
  char a[256], b[256];
  if (n < 1) return lt_fail(ctx, "cat: expected a non-empty list of tensors");
  int ref = -1;   /* first input that takes part */
  for (int i = 0; i < n; i++) {
    if (ts[i]->ndim == 0)
      return lt_fail(ctx, "cat: zero-dimensional tensor (at position %d) cannot be "
                     "concatenated", i + 1);
    if (ref < 0 && !legacy_empty(ts[i])) ref = i;
  }
  if (ref < 0) ref = 0;
  const lt_tensor *r0 = ts[ref];
  int d;
  if (lt_wrap_dim(ctx, "cat", dim, r0->ndim, &d)) return -1;
  lt_dtype dt = ts[0]->dtype;
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const lt_tensor *t = ts[i];
    if (lt_check_devices(ctx, "cat", r0, t)) return -1;
    dt = lt_promote(dt, t->dtype);
    if (legacy_empty(t) && i != ref) continue;
    if (t->ndim != r0->ndim)
      return lt_fail(ctx, "cat: tensors must have the same number of dimensions: tensor %d "
                     "has shape %s but tensor %d has shape %s", ref + 1, LT_SHAPE(r0, a),
                     i + 1, LT_SHAPE(t, b));
    for (int k = 0; k < t->ndim; k++)
      if (k != d && t->size[k] != r0->size[k])
        return lt_fail(ctx, "cat: sizes of tensors must match except in dimension %d: "
                       "expected size %lld but got size %lld in dimension %d for tensor %d "
                       "in the list (shapes %s and %s)", d + 1, (long long)r0->size[k],
                       (long long)t->size[k], k + 1, i + 1, LT_SHAPE(r0, a), LT_SHAPE(t, b));
    total += t->size[d];
  }
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, r0->size, sizeof sz);
  sz[d] = total;
  lt_tensor *r;
  if (new_out(ctx, "cat", &r, r0, dt, r0->ndim, sz)) return -1;
  lt_node *node = NULL;
  if (lt_record(ctx, &cat_type, n, ts, 1, &r, sizeof(parts_extra) + (size_t)n * sizeof(part_info),
                0, &node)) {
    lt_release(r);
    return -1;
  }
  parts_extra *e = node ? node->extra : NULL;
  if (e) {
    e->dim = d;
    e->n = n;
  }
  int64_t pos = 0;
  for (int i = 0; i < n; i++) {
    const lt_tensor *t = ts[i];
    bool skip = legacy_empty(t) && i != ref;
    if (e) e->part[i] = (part_info){pos, skip ? 0 : t->size[d], t->dtype, skip};
    if (skip || t->size[d] == 0) continue;
    int64_t psz[LT_MAX_DIMS] = {0};
    memcpy(psz, r->size, sizeof psz);
    psz[d] = t->size[d];
    lt_tensor *v = lt_alias(r, r->ndim, psz, r->stride, r->offset + pos * r->stride[d]);
    if (!v) {
      lt_release(r);
      return alias_fail(ctx, "cat");
    }
    lt_kernels(r)->copy(ctx, v, t);
    lt_release(v);
    pos += t->size[d];
  }
  *out = r;
  return 0;
}

int lt_stack(lt_ctx *ctx, lt_tensor **out, int n, lt_tensor *const *ts, int dim) {
  char a[256], b[256];
  if (n < 1) return lt_fail(ctx, "stack: expected a non-empty list of tensors");
  const lt_tensor *r0 = ts[0];
  if (r0->ndim >= LT_MAX_DIMS)
    return lt_fail(ctx, "stack: inputs already have the maximum of %d dimensions",
                   LT_MAX_DIMS);
  int d;
  if (lt_wrap_dim(ctx, "stack", dim, r0->ndim + 1, &d)) return -1;
  lt_dtype dt = r0->dtype;
  for (int i = 1; i < n; i++) {
    if (lt_check_devices(ctx, "stack", r0, ts[i])) return -1;
    if (!lt_same_shape(ts[i], r0))
      return lt_fail(ctx, "stack: expects each tensor to be equal size, but got %s at entry 1 "
                     "and %s at entry %d", LT_SHAPE(r0, a), LT_SHAPE(ts[i], b), i + 1);
    dt = lt_promote(dt, ts[i]->dtype);
  }
  int64_t sz[LT_MAX_DIMS] = {0};
  int k = 0;
  for (int i = 0; i <= r0->ndim; i++) {
    if (i == d) sz[k++] = n;
    if (i < r0->ndim) sz[k++] = r0->size[i];
  }
  lt_tensor *r;
  if (new_out(ctx, "stack", &r, r0, dt, k, sz)) return -1;
  lt_node *node = NULL;
  if (lt_record(ctx, &stack_type, n, ts, 1, &r,
                sizeof(parts_extra) + (size_t)n * sizeof(part_info), 0, &node)) {
    lt_release(r);
    return -1;
  }
  parts_extra *e = node ? node->extra : NULL;
  if (e) {
    e->dim = d;
    e->n = n;
  }
  /* each input is the slice r[..., i, ...] along d */
  int64_t psz[LT_MAX_DIMS] = {0}, pst[LT_MAX_DIMS] = {0};
  int m = 0;
  for (int i = 0; i < r->ndim; i++) {
    if (i == d) continue;
    psz[m] = r->size[i];
    pst[m++] = r->stride[i];
  }
  for (int i = 0; i < n; i++) {
    if (e) e->part[i] = (part_info){i, 1, ts[i]->dtype, false};
    lt_tensor *v = lt_alias(r, m, psz, pst, r->offset + i * r->stride[d]);
    if (!v) {
      lt_release(r);
      return alias_fail(ctx, "stack");
    }
    lt_kernels(r)->copy(ctx, v, ts[i]);
    lt_release(v);
  }
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ repeat */

typedef struct {
  shape_extra in;
  int n;
  int64_t rep[LT_MAX_DIMS];
} repeat_extra;

/* Geometry interleaving each repeated dim as (repeat, size); dims with repeat 1 stay single.
** Returns the number of dims, or -1 if more than LT_MAX_DIMS would be needed. */
static int repeat_geometry(int n, const int64_t *rep, const int64_t *insz, int64_t *sz,
                           int *rdims, int *nr) {
  int k = 0;
  *nr = 0;
  for (int i = 0; i < n; i++) {
    if (rep[i] != 1) {
      if (k >= LT_MAX_DIMS) return -1;
      rdims[(*nr)++] = k;
      sz[k++] = rep[i];
    }
    if (k >= LT_MAX_DIMS) return -1;
    sz[k++] = insz[i];
  }
  return k;
}

static int repeat_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  repeat_extra *e = self->extra;
  int64_t insz[LT_MAX_DIMS] = {0}, sz[LT_MAX_DIMS] = {0};
  int lead = e->n - e->in.ndim, rdims[LT_MAX_DIMS] = {0}, nr;
  for (int i = 0; i < e->n; i++) insz[i] = i < lead ? 1 : e->in.size[i - lead];
  int k = repeat_geometry(e->n, e->rep, insz, sz, rdims, &nr);
  lt_tensor *v, *s;
  if (lt_reshape(ctx, &v, go[0], k, sz)) return -1;
  int rc = nr ? lt_reduce(ctx, &s, LT_RSUM, v, nr, rdims, false) : 0;
  if (!nr) s = lt_retain(v);
  lt_release(v);
  if (rc) return -1;
  rc = lt_reshape(ctx, &gi[0], s, e->in.ndim, e->in.size);
  lt_release(s);
  return rc;
}

static const lt_node_type repeat_type = {"RepeatBackward0", repeat_backward, NULL};

int lt_repeat(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int n, const int64_t *rep) {
  char a[256], b[256];
  if (n < t->ndim)
    return lt_fail(ctx, "repeat: number of dimensions of repeat dims (%d) can not be smaller "
                   "than number of dimensions of tensor (%d)", n, t->ndim);
  if (n > LT_MAX_DIMS) return lt_fail(ctx, "repeat: at most %d dimensions", LT_MAX_DIMS);
  int64_t insz[LT_MAX_DIMS] = {0}, inst[LT_MAX_DIMS] = {0}, osz[LT_MAX_DIMS] = {0};
  int lead = n - t->ndim;
  for (int i = 0; i < n; i++) {
    if (rep[i] < 0)
      return lt_fail(ctx, "repeat: repeats %s must be non-negative (tensor of shape %s)",
                     lt_sizes_str(n, rep, a, sizeof a), LT_SHAPE(t, b));
    insz[i] = i < lead ? 1 : t->size[i - lead];
    inst[i] = i < lead ? 0 : t->stride[i - lead];
    if (rep[i] > 0 && insz[i] > INT64_MAX / rep[i])
      return lt_fail(ctx, "repeat: repeats %s on a tensor of shape %s overflow the size",
                     lt_sizes_str(n, rep, a, sizeof a), LT_SHAPE(t, b));
    osz[i] = insz[i] * rep[i];
  }
  int64_t gsz[LT_MAX_DIMS] = {0}, gst[LT_MAX_DIMS] = {0};
  int rdims[LT_MAX_DIMS] = {0}, nr;
  int k = repeat_geometry(n, rep, insz, gsz, rdims, &nr);
  if (k < 0)
    return lt_fail(ctx, "repeat: repeats %s on a tensor of shape %s need more than %d "
                   "internal dimensions", lt_sizes_str(n, rep, a, sizeof a), LT_SHAPE(t, b),
                   LT_MAX_DIMS);
  lt_tensor *r;
  if (new_out(ctx, "repeat", &r, t, t->dtype, n, osz)) return -1;
  /* source: t seen through the interleaved geometry with stride 0 along repeat dims */
  for (int i = 0, j = 0; i < n; i++) {
    if (rep[i] != 1) gst[j++] = 0;
    gst[j++] = inst[i];
  }
  lt_tensor *src = lt_alias(t, k, gsz, gst, t->offset);
  lt_tensor *dst = lt_alias(r, k, gsz, NULL, r->offset);
  if (!src || !dst) {
    lt_release(src);
    lt_release(dst);
    lt_release(r);
    return alias_fail(ctx, "repeat");
  }
  lt_kernels(r)->copy(ctx, dst, src);
  lt_release(src);
  lt_release(dst);
  lt_node *node;
  if (record1(ctx, &repeat_type, t, &r, sizeof(repeat_extra), 0, &node)) return -1;
  if (node) {
    repeat_extra *e = node->extra;
    put_shape(&e->in, t);
    e->n = n;
    memcpy(e->rep, rep, (size_t)n * sizeof *rep);
  }
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ flip */

typedef struct { int n; int dims[LT_MAX_DIMS]; } flip_extra;

static int flip_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  flip_extra *e = self->extra;
  return lt_flip(ctx, &gi[0], go[0], e->n, e->dims);
}

static const lt_node_type flip_type = {"FlipBackward0", flip_backward, NULL};

int lt_flip(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int n, const int *dims) {
  int ds[LT_MAX_DIMS] = {0};
  bool seen[LT_MAX_DIMS] = {false};
  if (n < 0 || n > LT_MAX_DIMS) return lt_fail(ctx, "flip: bad number of dims %d", n);
  for (int i = 0; i < n; i++) {
    if (lt_wrap_dim(ctx, "flip", dims[i], t->ndim, &ds[i])) return -1;
    if (t->ndim > 0 && seen[ds[i]])
      return lt_fail(ctx, "flip: dimension %d appears multiple times in the list of dims",
                     ds[i] + 1);
    seen[ds[i]] = true;
  }
  lt_tensor *r;
  if (new_out(ctx, "flip", &r, t, t->dtype, t->ndim, t->size)) return -1;
  /* read t backwards along the flipped dims (a negative-stride source, internal only) */
  int64_t st[LT_MAX_DIMS] = {0}, off = t->offset;
  memcpy(st, t->stride, sizeof st);
  if (lt_numel(t) > 0)
    for (int i = 0; i < t->ndim; i++)
      if (seen[i]) {
        off += (t->size[i] - 1) * t->stride[i];
        st[i] = -t->stride[i];
      }
  lt_tensor *src = lt_alias(t, t->ndim, t->size, st, off);
  if (!src) {
    lt_release(r);
    return alias_fail(ctx, "flip");
  }
  lt_kernels(r)->copy(ctx, r, src);
  lt_release(src);
  lt_node *node;
  if (record1(ctx, &flip_type, t, &r, sizeof(flip_extra), 0, &node)) return -1;
  if (node) {
    flip_extra *e = node->extra;
    e->n = n;
    memcpy(e->dims, ds, (size_t)n * sizeof *ds);
  }
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ tril / triu */

typedef struct { int64_t k; bool upper; } tri_extra;

static int tri_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t k, bool upper);

static int tri_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  tri_extra *e = self->extra;
  return tri_impl(ctx, &gi[0], go[0], e->k, e->upper);
}

static const lt_node_type tril_type = {"TrilBackward0", tri_backward, NULL};
static const lt_node_type triu_type = {"TriuBackward0", tri_backward, NULL};

/* Zeroes the elements of contiguous r outside the kept triangle: tril keeps j - i <= k,
** triu keeps j - i >= k. Zero bits are 0 in every dtype. */
static void tri_zero(lt_tensor *r, int64_t k, bool upper) {
  int64_t rows = r->size[r->ndim - 2], cols = r->size[r->ndim - 1];
  int64_t mats = rows > 0 && cols > 0 ? lt_numel(r) / (rows * cols) : 0;
  size_t es = lt_dtype_size(r->dtype);
  char *p = lt_data(r);
  for (int64_t m = 0; m < mats; m++) {
    for (int64_t i = 0; i < rows; i++) {
      char *row = p + (size_t)((m * rows + i) * cols) * es;
      /* kept columns: tril [0, i+k], triu [i+k, cols) */
      int64_t lo = upper ? 0 : i + k + 1, hi = upper ? i + k : cols;
      if (lo < 0) lo = 0;
      if (hi > cols) hi = cols;
      if (lo < hi) memset(row + (size_t)lo * es, 0, (size_t)(hi - lo) * es);
    }
  }
}

static int tri_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t k, bool upper) {
  const char *op = upper ? "triu" : "tril";
  char a[256];
  if (t->ndim < 2)
    return lt_fail(ctx, "%s: input tensor must have at least 2 dimensions (got shape %s)", op,
                   LT_SHAPE(t, a));
  /* beyond +-(rows + cols) every diagonal offset selects the same elements */
  int64_t lim = t->size[t->ndim - 2] + t->size[t->ndim - 1] + 1;
  if (k > lim) k = lim;
  if (k < -lim) k = -lim;
  lt_tensor *r;
  if (new_out(ctx, op, &r, t, t->dtype, t->ndim, t->size)) return -1;
  lt_kernels(r)->copy(ctx, r, t);
  tri_zero(r, k, upper);
  lt_node *node;
  if (record1(ctx, upper ? &triu_type : &tril_type, t, &r, sizeof(tri_extra), 0, &node))
    return -1;
  if (node) *(tri_extra *)node->extra = (tri_extra){k, upper};
  *out = r;
  return 0;
}

int lt_tril(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t k) {
  return tri_impl(ctx, out, t, k, false);
}

int lt_triu(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t k) {
  return tri_impl(ctx, out, t, k, true);
}
