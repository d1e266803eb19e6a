/*
** shape.c -- views (view, reshape, transpose, permute, expand, narrow, select, squeeze,
** unsqueeze, flatten, unflatten), each with its backward right after it. The shape ops that
** copy (cat, stack, repeat, flip, tril/triu) are in shape_copy.c; shape.h is what they share.
**
** A view shares its input's storage (ltB_alias) and only changes sizes, strides and offset; it
** never copies. Its backward maps the output gradient back onto the input's geometry.
*/
#include <stdio.h>

#include "autograd.h"
#include "backend.h"
#include "shape.h"

void ltO_shape_put(ltO_shape_extra *e, const lt_tensor *t) {
  e->ndim = t->ndim;
  memcpy(e->size, t->size, sizeof e->size);
}

/* Records a one-input, one-output node for a view/copy; on failure releases *out. */
int ltO_shape_record1(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *in, lt_tensor **out,
                      size_t extra, int nsaved, lt_node **node) {
  if (ltG_record(ctx, type, 1, &in, 1, out, extra, nsaved, node)) {
    lt_release(*out);
    *out = NULL;
    return -1;
  }
  if ((*out)->storage == in->storage) {
    (*out)->is_view = true;
    (*out)->grad_view = in->requires_grad || in->grad_view;
    ltG_set_view_base(*out, in);
  }
  return 0;
}

/* Records a view whose backward needs only the input's shape. */
static int record_shape(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *in, lt_tensor **out) {
  lt_node *n;
  if (ltO_shape_record1(ctx, type, in, out, sizeof(ltO_shape_extra), 0, &n)) return -1;
  if (n) ltO_shape_put(n->extra, in);
  return 0;
}

/* lt_empty whose failure message names op. */
int ltO_shape_new_out(lt_ctx *ctx, const char *op, lt_tensor **out, const lt_tensor *like,
                      lt_dtype dt, int ndim, const int64_t *size) {
  if (ltO_empty_as(ctx, out, like, dt, ndim, size) == 0) return 0;
  char msg[sizeof ctx->err];
  memcpy(msg, ctx->err, sizeof msg);
  return ltB_fail(ctx, "%s: %s", op, msg);
}

int ltO_shape_oom(lt_ctx *ctx, const char *op) {
  return ltB_fail(ctx, "%s: out of memory", op);
}

/* Shared by backward functions: grad reshaped to the saved input shape. */
static int reshape_back(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  ltO_shape_extra *e = self->extra;
  return lt_reshape(ctx, &gi[0], go[0], e->ndim, e->size);
}

/* ------------------------------------------------------------ view / reshape */

/* Resolves a requested shape (one entry may be -1) against numel; the error names op. */
static int infer_shape(lt_ctx *ctx, const char *op, int64_t numel, int ndim, const int64_t *in,
                       int64_t *outsz) {
  if (ndim < 0 || ndim > LT_MAX_DIMS)
    return ltB_fail(ctx, "%s: %d dimensions requested, at most %d supported", op, ndim,
                    LT_MAX_DIMS);
  int infer = -1;
  int64_t prod = 1;
  char buf[256];
  for (int i = 0; i < ndim; i++) {
    if (in[i] == -1) {
      if (infer >= 0) return ltB_fail(ctx, "%s: only one dimension can be inferred (shape %s)",
                                      op, ltB_sizes_str(ndim, in, buf, sizeof buf));
      infer = i;
    } else if (in[i] < 0) {
      return ltB_fail(ctx, "%s: invalid shape dimension %lld in shape %s", op,
                      (long long)in[i], ltB_sizes_str(ndim, in, buf, sizeof buf));
    } else {
      prod *= in[i];
    }
    outsz[i] = in[i];
  }
  if (infer >= 0) {
    if (prod == 0)
      return ltB_fail(ctx, "%s: cannot reshape tensor of %lld elements into shape %s because "
                      "the unspecified dimension size -1 can be any value and is ambiguous", op,
                      (long long)numel, ltB_sizes_str(ndim, in, buf, sizeof buf));
    if (numel % prod == 0) {
      outsz[infer] = numel / prod;
      prod = numel;
    }
  }
  if (prod != numel)
    return ltB_fail(ctx, "%s: shape %s is invalid for input of size %lld", op,
                    ltB_sizes_str(ndim, in, buf, sizeof buf), (long long)numel);
  return 0;
}

/* Strides that let (nd, nsz) view a tensor of geometry (od, osz, ost) without copying, or
** false. Old dims are taken in chunks that are contiguous with each other; each chunk must be
** covered exactly by a run of new dims, which then stride inside it. */
static bool view_strides(int od, const int64_t *osz, const int64_t *ost, int nd,
                         const int64_t *nsz, int64_t *nst) {
  if (ltB_shape_numel(od, osz) == 0 || od == 0) {
    ltB_contiguous_strides(nd, nsz, nst);
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

static const ltG_node_type view_type = {"ViewBackward0", reshape_back, NULL};

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
    return ltB_fail(ctx, "%s: view size is not compatible with input tensor's size and stride "
                    "(at least one dimension spans across two contiguous subspaces): input "
                    "shape %s with strides %s, requested shape %s. Use .reshape(...) instead.",
                    op, LT_SHAPE(t, a), ltB_sizes_str(t->ndim, t->stride, b, sizeof b),
                    ltB_sizes_str(ndim, sz, c, sizeof c));
  }
  lt_tensor *r = ltB_alias(t, ndim, sz, st, t->offset);
  if (!r) return ltO_shape_oom(ctx, op);
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
  if (ltB_wrap_dim(ctx, "flatten", start, t->ndim, &s) ||
      ltB_wrap_dim(ctx, "flatten", end, t->ndim, &e))
    return -1;
  if (s > e)
    return ltB_fail(ctx, "flatten: start_dim (%d) cannot come after end_dim (%d)", s + 1, e + 1);
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
  if (ltB_wrap_dim(ctx, "unflatten", dim, t->ndim, &d)) return -1;
  if (t->ndim == 0) return ltB_fail(ctx, "unflatten: cannot unflatten a 0-d tensor");
  if (n < 1) return ltB_fail(ctx, "unflatten: sizes must be non-empty");
  if (t->ndim - 1 + n > LT_MAX_DIMS)
    return ltB_fail(ctx, "unflatten: result would have more than %d dimensions", LT_MAX_DIMS);
  int64_t part[LT_MAX_DIMS] = {0};
  if (infer_shape(ctx, "unflatten", t->size[d], n, sizes, part)) {
    char a[256], b[256], msg[1024];
    snprintf(msg, sizeof msg, "%s", ctx->err);
    return ltB_fail(ctx, "%s (unflatten of dimension %d of size %lld in a tensor of shape %s "
                    "into sizes %s)", msg, d + 1, (long long)t->size[d], LT_SHAPE(t, a),
                    ltB_sizes_str(n, sizes, b, sizeof b));
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

static const ltG_node_type transpose_type = {"TransposeBackward0", transpose_backward, NULL};

int lt_transpose(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int d0, int d1) {
  int a, b;
  if (ltB_wrap_dim(ctx, "transpose", d0, t->ndim, &a) ||
      ltB_wrap_dim(ctx, "transpose", d1, t->ndim, &b))
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
  lt_tensor *r = ltB_alias(t, t->ndim, sz, st, t->offset);
  if (!r) return ltO_shape_oom(ctx, "transpose");
  lt_node *n;
  if (ltO_shape_record1(ctx, &transpose_type, t, &r, sizeof(transpose_extra), 0, &n)) return -1;
  if (n) *(transpose_extra *)n->extra = (transpose_extra){a, b};
  *out = r;
  return 0;
}

typedef struct { int ndim; int inv[LT_MAX_DIMS]; } permute_extra;

static int permute_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  permute_extra *e = self->extra;
  return lt_permute(ctx, &gi[0], go[0], e->inv);
}

static const ltG_node_type permute_type = {"PermuteBackward0", permute_backward, NULL};

int lt_permute(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, const int *perm) {
  int p[LT_MAX_DIMS] = {0};
  bool seen[LT_MAX_DIMS] = {false};
  for (int i = 0; i < t->ndim; i++) {
    if (ltB_wrap_dim(ctx, "permute", perm[i], t->ndim, &p[i])) return -1;
    if (seen[p[i]]) return ltB_fail(ctx, "permute: dimension %d repeats in the permutation",
                                    p[i] + 1);
    seen[p[i]] = true;
  }
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  for (int i = 0; i < t->ndim; i++) {
    sz[i] = t->size[p[i]];
    st[i] = t->stride[p[i]];
  }
  lt_tensor *r = ltB_alias(t, t->ndim, sz, st, t->offset);
  if (!r) return ltO_shape_oom(ctx, "permute");
  lt_node *n;
  if (ltO_shape_record1(ctx, &permute_type, t, &r, sizeof(permute_extra), 0, &n)) return -1;
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
  ltO_shape_extra *e = self->extra;
  return ltO_sum_to(ctx, &gi[0], go[0], e->ndim, e->size);
}

static const ltG_node_type expand_type = {"ExpandBackward0", expand_backward, NULL};

int lt_expand(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int ndim, const int64_t *size) {
  char a[256], b[256];
  if (ndim < t->ndim || ndim > LT_MAX_DIMS)
    return ltB_fail(ctx, "expand: the number of sizes provided (%d) must be greater or equal to "
                    "the number of dimensions in the tensor (%d) and at most %d", ndim, t->ndim,
                    LT_MAX_DIMS);
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int td = i - lead;
    if (td < 0) {
      if (size[i] < 0)
        return ltB_fail(ctx, "expand: the expanded size %lld is not allowed in a leading, "
                        "non-existing dimension %d (target sizes %s, tensor sizes %s)",
                        (long long)size[i], i + 1, ltB_sizes_str(ndim, size, a, sizeof a),
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
      return ltB_fail(ctx, "expand: the expanded size of the tensor (%lld) must match the "
                      "existing size (%lld) at non-singleton dimension %d. Target sizes: %s. "
                      "Tensor sizes: %s", (long long)size[i], (long long)t->size[td], i + 1,
                      ltB_sizes_str(ndim, size, a, sizeof a), LT_SHAPE(t, b));
    }
  }
  /* the element count of a view must fit in int64, or it wraps (to 0 for [2^62, 4]) and every
  ** op after would see an empty tensor */
  int64_t n = 1;
  bool empty = false;
  for (int i = 0; i < ndim; i++) empty = empty || sz[i] == 0;
  for (int i = 0; i < ndim && !empty; i++) {
    if (n > INT64_MAX / sz[i])
      return ltB_fail(ctx, "expand: the target sizes %s hold more elements than int64 counts "
                      "(numel: integer multiplication overflow)", ltB_sizes_str(ndim, sz, a,
                      sizeof a));
    n *= sz[i];
  }
  lt_tensor *r = ltB_alias(t, ndim, sz, st, t->offset);
  if (!r) return ltO_shape_oom(ctx, "expand");
  if (record_shape(ctx, &expand_type, t, &r)) return -1;
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ narrow / select */

/* Gradient of a view into a region: zeros of the input's shape with grad copied into the
** region, which `region` cuts out of the zeros the same way the forward cut the input. */
typedef struct {
  ltO_shape_extra in;
  int dim;
  int64_t start, len;   /* narrow: [start, start+len); select: index in start, len = -1 */
} region_extra;

/* The region of z (the input's shape) that the forward cut out, as a view. */
static lt_tensor *region_of(const region_extra *e, lt_tensor *z) {
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  memcpy(sz, z->size, sizeof sz);
  memcpy(st, z->stride, sizeof st);
  int nd = z->ndim;
  int64_t off = z->offset + e->start * z->stride[e->dim];
  if (e->len >= 0) {
    sz[e->dim] = e->len;
  } else {
    for (int i = e->dim; i < nd - 1; i++) {
      sz[i] = sz[i + 1];
      st[i] = st[i + 1];
    }
    nd--;
  }
  return ltB_alias(z, nd, sz, st, off);
}

static int region_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  region_extra *e = self->extra;
  lt_tensor *z;
  if (ltO_full_as(ctx, &z, go[0], go[0]->dtype, e->in.ndim, e->in.size, 0.0)) return -1;
  lt_tensor *r = region_of(e, z);
  if (!r) {
    lt_release(z);
    return ltO_shape_oom(ctx, self->type->name);
  }
  ltK_kernels(z)->copy(ctx, r, go[0]);
  lt_release(r);
  gi[0] = z;
  return 0;
}

/* The pieces of a split (or any narrows of one tensor) add into one gradient: no zeros of the
** whole input per piece, and no whole-input sums of them. */
static int region_backward_into(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor *acc) {
  lt_tensor *r = region_of(self->extra, acc);
  if (!r) return ltO_shape_oom(ctx, self->type->name);
  ltK_kernels(acc)->binary(ctx, LT_ADD, r, r, go[0], acc->dtype, 0, 0);
  lt_release(r);
  return 0;
}

static const ltG_node_type slice_type = {"SliceBackward0", region_backward, NULL};
static const ltG_node_type select_type = {"SelectBackward0", region_backward, NULL};

ltG_backward_into_fn ltO_backward_into_of(const ltG_node_type *type) {
  return type == &slice_type || type == &select_type ? region_backward_into : NULL;
}

static int record_region(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *t, lt_tensor **r,
                         int dim, int64_t start, int64_t len) {
  lt_node *n;
  if (ltO_shape_record1(ctx, type, t, r, sizeof(region_extra), 0, &n)) return -1;
  if (n) {
    region_extra *e = n->extra;
    ltO_shape_put(&e->in, t);
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
  if (t->ndim == 0) return ltB_fail(ctx, "narrow: cannot be applied to a 0-dim tensor");
  if (ltB_wrap_dim(ctx, "narrow", dim, t->ndim, &d)) return -1;
  int64_t size = t->size[d];
  if (start < -size || start > size)
    return ltB_fail(ctx, "narrow: start %lld out of range for dimension %d of size %lld "
                    "(tensor of shape %s)", lua_pos(start), d + 1, (long long)size,
                    LT_SHAPE(t, a));
  if (start < 0) start += size;
  if (len < 0) return ltB_fail(ctx, "narrow: length must be non-negative (got %lld)",
                               (long long)len);
  if (start + len > size)
    return ltB_fail(ctx, "narrow: start (%lld) + length (%lld) exceeds dimension size (%lld) "
                    "of dimension %d (tensor of shape %s)", (long long)start + 1,
                    (long long)len, (long long)size, d + 1, LT_SHAPE(t, a));
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, t->size, sizeof sz);
  sz[d] = len;
  lt_tensor *r = ltB_alias(t, t->ndim, sz, t->stride, t->offset + start * t->stride[d]);
  if (!r) return ltO_shape_oom(ctx, "narrow");
  if (record_region(ctx, &slice_type, t, &r, d, start, len)) return -1;
  *out = r;
  return 0;
}

int lt_select(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim, int64_t index) {
  int d;
  char a[256];
  if (t->ndim == 0)
    return ltB_fail(ctx, "select: cannot index a 0-dim tensor (it holds a single value)");
  if (ltB_wrap_dim(ctx, "select", dim, t->ndim, &d)) return -1;
  int64_t size = t->size[d];
  if (index < -size || index >= size)
    return ltB_fail(ctx, "select: index %lld out of range for dimension %d of size %lld "
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
  lt_tensor *r = ltB_alias(t, k, sz, st, t->offset + index * t->stride[d]);
  if (!r) return ltO_shape_oom(ctx, "select");
  if (record_region(ctx, &select_type, t, &r, d, index, -1)) return -1;
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ squeeze / unsqueeze */

static const ltG_node_type squeeze_all_type = {"SqueezeBackward0", reshape_back, NULL};
static const ltG_node_type squeeze_dim_type = {"SqueezeBackward1", reshape_back, NULL};
static const ltG_node_type unsqueeze_type = {"UnsqueezeBackward0", reshape_back, NULL};

int lt_squeeze(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim) {
  int d = -1;
  if (dim != LT_SQUEEZE_ALL && ltB_wrap_dim(ctx, "squeeze", dim, t->ndim, &d)) return -1;
  int64_t sz[LT_MAX_DIMS] = {0}, st[LT_MAX_DIMS] = {0};
  int k = 0;
  for (int i = 0; i < t->ndim; i++) {
    bool drop = t->size[i] == 1 && (dim == LT_SQUEEZE_ALL || i == d);
    if (drop) continue;
    sz[k] = t->size[i];
    st[k++] = t->stride[i];
  }
  lt_tensor *r = ltB_alias(t, k, sz, st, t->offset);
  if (!r) return ltO_shape_oom(ctx, "squeeze");
  if (record_shape(ctx, dim == LT_SQUEEZE_ALL ? &squeeze_all_type : &squeeze_dim_type, t, &r))
    return -1;
  *out = r;
  return 0;
}

int lt_unsqueeze(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int dim) {
  int d;
  if (t->ndim >= LT_MAX_DIMS)
    return ltB_fail(ctx, "unsqueeze: tensor already has the maximum of %d dimensions",
                    LT_MAX_DIMS);
  if (ltB_wrap_dim(ctx, "unsqueeze", dim, t->ndim + 1, &d)) return -1;
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
  lt_tensor *r = ltB_alias(t, k, sz, st, t->offset);
  if (!r) return ltO_shape_oom(ctx, "unsqueeze");
  if (record_shape(ctx, &unsqueeze_type, t, &r)) return -1;
  *out = r;
  return 0;
}
