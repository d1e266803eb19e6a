/*
** shape_copy.c -- the shape ops that make new tensors: cat, stack, repeat, flip and tril/triu,
** each with its backward right after it.
*/
#include <stdio.h>

#include "backend.h"
#include "shape.h"

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
    if (!ltG_needs_input_grad(self, i)) continue;
    part_info *p = &e->part[i];
    lt_tensor *g;
    int rc;
    if (p->skip) {
      int64_t zero = 0;
      rc = ltO_full_as(ctx, &gi[i], go[0], p->dt, 1, &zero, 0.0);
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

static const ltG_node_type cat_type = {"CatBackward0", cat_backward, NULL};
static const ltG_node_type stack_type = {"StackBackward0", stack_backward, NULL};

static bool legacy_empty(const lt_tensor *t) { return t->ndim == 1 && t->size[0] == 0; }

/* Records cat or stack of the n inputs into r along d; *e is the node's parts (NULL when no
** gradient is needed), for the caller to fill. On failure r is released. */
static int record_parts(lt_ctx *ctx, const ltG_node_type *type, int n, lt_tensor *const *ts,
                        lt_tensor *r, int d, parts_extra **e) {
  lt_node *node = NULL;
  if (ltG_record(ctx, type, n, ts, 1, &r, sizeof(parts_extra) + (size_t)n * sizeof(part_info),
                 0, &node)) {
    lt_release(r);
    return -1;
  }
  *e = node ? node->extra : NULL;
  if (*e) {
    (*e)->dim = d;
    (*e)->n = n;
  }
  return 0;
}

int lt_cat(lt_ctx *ctx, lt_tensor **out, int n, lt_tensor *const *ts, int dim) {
  char a[256], b[256];
  if (n < 1) return ltB_fail(ctx, "cat: expected a non-empty list of tensors");
  int ref = -1;   /* first input that takes part */
  for (int i = 0; i < n; i++) {
    if (ts[i]->ndim == 0)
      return ltB_fail(ctx, "cat: zero-dimensional tensor (at position %d) cannot be "
                      "concatenated", i + 1);
    if (ref < 0 && !legacy_empty(ts[i])) ref = i;
  }
  if (ref < 0) ref = 0;
  const lt_tensor *r0 = ts[ref];
  int d;
  if (ltB_wrap_dim(ctx, "cat", dim, r0->ndim, &d)) return -1;
  lt_dtype dt = ts[0]->dtype;
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    const lt_tensor *t = ts[i];
    if (ltD_check_devices(ctx, "cat", r0, t)) return -1;
    dt = lt_promote(dt, t->dtype);
    if (legacy_empty(t) && i != ref) continue;
    if (t->ndim != r0->ndim)
      return ltB_fail(ctx, "cat: tensors must have the same number of dimensions: tensor %d "
                      "has shape %s but tensor %d has shape %s", ref + 1, LT_SHAPE(r0, a),
                      i + 1, LT_SHAPE(t, b));
    for (int k = 0; k < t->ndim; k++)
      if (k != d && t->size[k] != r0->size[k])
        return ltB_fail(ctx, "cat: sizes of tensors must match except in dimension %d: "
                        "expected size %lld but got size %lld in dimension %d for tensor %d "
                        "in the list (shapes %s and %s)", d + 1, (long long)r0->size[k],
                        (long long)t->size[k], k + 1, i + 1, LT_SHAPE(r0, a), LT_SHAPE(t, b));
    total += t->size[d];
  }
  int64_t sz[LT_MAX_DIMS] = {0};
  memcpy(sz, r0->size, sizeof sz);
  sz[d] = total;
  lt_tensor *r;
  if (ltO_shape_new_out(ctx, "cat", &r, r0, dt, r0->ndim, sz)) return -1;
  parts_extra *e;
  if (record_parts(ctx, &cat_type, n, ts, r, d, &e)) return -1;
  int64_t pos = 0;
  for (int i = 0; i < n; i++) {
    const lt_tensor *t = ts[i];
    bool skip = legacy_empty(t) && i != ref;
    if (e) e->part[i] = (part_info){pos, skip ? 0 : t->size[d], t->dtype, skip};
    if (skip || t->size[d] == 0) continue;
    int64_t psz[LT_MAX_DIMS] = {0};
    memcpy(psz, r->size, sizeof psz);
    psz[d] = t->size[d];
    lt_tensor *v = ltB_alias(r, r->ndim, psz, r->stride, r->offset + pos * r->stride[d]);
    if (!v) {
      lt_release(r);
      return ltO_shape_oom(ctx, "cat");
    }
    ltK_kernels(r)->copy(ctx, v, t);
    lt_release(v);
    pos += t->size[d];
  }
  *out = r;
  return 0;
}

int lt_stack(lt_ctx *ctx, lt_tensor **out, int n, lt_tensor *const *ts, int dim) {
  char a[256], b[256];
  if (n < 1) return ltB_fail(ctx, "stack: expected a non-empty list of tensors");
  const lt_tensor *r0 = ts[0];
  if (r0->ndim >= LT_MAX_DIMS)
    return ltB_fail(ctx, "stack: inputs already have the maximum of %d dimensions",
                    LT_MAX_DIMS);
  int d;
  if (ltB_wrap_dim(ctx, "stack", dim, r0->ndim + 1, &d)) return -1;
  lt_dtype dt = r0->dtype;
  for (int i = 1; i < n; i++) {
    if (ltD_check_devices(ctx, "stack", r0, ts[i])) return -1;
    if (!ltB_same_shape(ts[i], r0))
      return ltB_fail(ctx, "stack: expects each tensor to be equal size, but got %s at entry 1 "
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
  if (ltO_shape_new_out(ctx, "stack", &r, r0, dt, k, sz)) return -1;
  parts_extra *e;
  if (record_parts(ctx, &stack_type, n, ts, r, d, &e)) return -1;
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
    lt_tensor *v = ltB_alias(r, m, psz, pst, r->offset + i * r->stride[d]);
    if (!v) {
      lt_release(r);
      return ltO_shape_oom(ctx, "stack");
    }
    ltK_kernels(r)->copy(ctx, v, ts[i]);
    lt_release(v);
  }
  *out = r;
  return 0;
}

/* ------------------------------------------------------------ repeat */

typedef struct {
  ltO_shape_extra in;
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

static const ltG_node_type repeat_type = {"RepeatBackward0", repeat_backward, NULL};

int lt_repeat(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int n, const int64_t *rep) {
  char a[256], b[256];
  if (n < t->ndim)
    return ltB_fail(ctx, "repeat: number of dimensions of repeat dims (%d) can not be smaller "
                    "than number of dimensions of tensor (%d)", n, t->ndim);
  if (n > LT_MAX_DIMS) return ltB_fail(ctx, "repeat: at most %d dimensions", LT_MAX_DIMS);
  int64_t insz[LT_MAX_DIMS] = {0}, inst[LT_MAX_DIMS] = {0}, osz[LT_MAX_DIMS] = {0};
  int lead = n - t->ndim;
  for (int i = 0; i < n; i++) {
    if (rep[i] < 0)
      return ltB_fail(ctx, "repeat: repeats %s must be non-negative (tensor of shape %s)",
                      ltB_sizes_str(n, rep, a, sizeof a), LT_SHAPE(t, b));
    insz[i] = i < lead ? 1 : t->size[i - lead];
    inst[i] = i < lead ? 0 : t->stride[i - lead];
    if (rep[i] > 0 && insz[i] > INT64_MAX / rep[i])
      return ltB_fail(ctx, "repeat: repeats %s on a tensor of shape %s overflow the size",
                      ltB_sizes_str(n, rep, a, sizeof a), LT_SHAPE(t, b));
    osz[i] = insz[i] * rep[i];
  }
  int64_t gsz[LT_MAX_DIMS] = {0}, gst[LT_MAX_DIMS] = {0};
  int rdims[LT_MAX_DIMS] = {0}, nr;
  int k = repeat_geometry(n, rep, insz, gsz, rdims, &nr);
  if (k < 0)
    return ltB_fail(ctx, "repeat: repeats %s on a tensor of shape %s need more than %d "
                    "internal dimensions", ltB_sizes_str(n, rep, a, sizeof a), LT_SHAPE(t, b),
                    LT_MAX_DIMS);
  lt_tensor *r;
  if (ltO_shape_new_out(ctx, "repeat", &r, t, t->dtype, n, osz)) return -1;
  /* source: t seen through the interleaved geometry with stride 0 along repeat dims */
  for (int i = 0, j = 0; i < n; i++) {
    if (rep[i] != 1) gst[j++] = 0;
    gst[j++] = inst[i];
  }
  lt_tensor *src = ltB_alias(t, k, gsz, gst, t->offset);
  lt_tensor *dst = ltB_alias(r, k, gsz, NULL, r->offset);
  if (!src || !dst) {
    lt_release(src);
    lt_release(dst);
    lt_release(r);
    return ltO_shape_oom(ctx, "repeat");
  }
  ltK_kernels(r)->copy(ctx, dst, src);
  lt_release(src);
  lt_release(dst);
  lt_node *node;
  if (ltO_shape_record1(ctx, &repeat_type, t, &r, sizeof(repeat_extra), 0, &node)) return -1;
  if (node) {
    repeat_extra *e = node->extra;
    ltO_shape_put(&e->in, t);
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

static const ltG_node_type flip_type = {"FlipBackward0", flip_backward, NULL};

int lt_flip(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int n, const int *dims) {
  int ds[LT_MAX_DIMS] = {0};
  bool seen[LT_MAX_DIMS] = {false};
  if (n < 0 || n > LT_MAX_DIMS) return ltB_fail(ctx, "flip: bad number of dims %d", n);
  for (int i = 0; i < n; i++) {
    if (ltB_wrap_dim(ctx, "flip", dims[i], t->ndim, &ds[i])) return -1;
    if (t->ndim > 0 && seen[ds[i]])
      return ltB_fail(ctx, "flip: dimension %d appears multiple times in the list of dims",
                      ds[i] + 1);
    seen[ds[i]] = true;
  }
  lt_tensor *r;
  if (ltO_shape_new_out(ctx, "flip", &r, t, t->dtype, t->ndim, t->size)) return -1;
  /* read t backwards along the flipped dims (a negative-stride source, internal only) */
  int64_t st[LT_MAX_DIMS] = {0}, off = t->offset;
  memcpy(st, t->stride, sizeof st);
  if (lt_numel(t) > 0)
    for (int i = 0; i < t->ndim; i++)
      if (seen[i]) {
        off += (t->size[i] - 1) * t->stride[i];
        st[i] = -t->stride[i];
      }
  lt_tensor *src = ltB_alias(t, t->ndim, t->size, st, off);
  if (!src) {
    lt_release(r);
    return ltO_shape_oom(ctx, "flip");
  }
  ltK_kernels(r)->copy(ctx, r, src);
  lt_release(src);
  lt_node *node;
  if (ltO_shape_record1(ctx, &flip_type, t, &r, sizeof(flip_extra), 0, &node)) return -1;
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

static const ltG_node_type tril_type = {"TrilBackward0", tri_backward, NULL};
static const ltG_node_type triu_type = {"TriuBackward0", tri_backward, NULL};

/* r = t with the elements outside the kept triangle zeroed (tril keeps j - i <= k, triu keeps
** j - i >= k), on t's device: a (rows, cols) mask of j - k > i (tril) or j - k < i (triu),
** from two aranges, broadcast over the leading dims. */
static int tri_fill(lt_ctx *ctx, const char *op, lt_tensor *r, const lt_tensor *t, int64_t k,
                    bool upper) {
  int64_t rows = t->size[t->ndim - 2], cols = t->size[t->ndim - 1];
  const ltK_backend *kb = ltK_kernels(r);
  lt_tensor *i1 = NULL, *j1 = NULL, *iv = NULL, *jv = NULL, *mask = NULL;
  int rc = ltO_empty_as(ctx, &i1, t, LT_INT64, 1, &rows);
  if (!rc) rc = ltO_empty_as(ctx, &j1, t, LT_INT64, 1, &cols);
  if (!rc) rc = ltO_empty_as(ctx, &mask, t, LT_BOOL, 2, (int64_t[]){rows, cols});
  if (!rc && (!(iv = ltB_alias(i1, 2, (int64_t[]){rows, 1}, (int64_t[]){1, 0}, 0)) ||
              !(jv = ltB_alias(j1, 2, (int64_t[]){1, cols}, (int64_t[]){0, 1}, 0))))
    rc = ltB_fail(ctx, "%s: out of memory", op);
  if (!rc) {
    kb->arange_int(i1, 0, 1);
    kb->arange_int(j1, -k, 1);
    kb->binary(ctx, upper ? LT_LT : LT_GT, mask, jv, iv, LT_INT64, 0, 0);
    kb->masked_fill(ctx, r, t, mask, 0.0);
  }
  lt_release(mask);
  lt_release(jv);
  lt_release(iv);
  lt_release(j1);
  lt_release(i1);
  return rc;
}

static int tri_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, int64_t k, bool upper) {
  const char *op = upper ? "triu" : "tril";
  char a[256];
  if (t->ndim < 2)
    return ltB_fail(ctx, "%s: input tensor must have at least 2 dimensions (got shape %s)", op,
                    LT_SHAPE(t, a));
  /* beyond +-(rows + cols) every diagonal offset selects the same elements */
  int64_t lim = t->size[t->ndim - 2] + t->size[t->ndim - 1] + 1;
  if (k > lim) k = lim;
  if (k < -lim) k = -lim;
  lt_tensor *r;
  if (ltO_shape_new_out(ctx, op, &r, t, t->dtype, t->ndim, t->size)) return -1;
  if (tri_fill(ctx, op, r, t, k, upper)) {
    lt_release(r);
    return -1;
  }
  lt_node *node;
  if (ltO_shape_record1(ctx, upper ? &triu_type : &tril_type, t, &r, sizeof(tri_extra), 0, &node))
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
