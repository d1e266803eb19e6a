/*
** copy.c -- the ops built on the copy and fill kernels (cpu/copy.c on the cpu): full, fill_,
** copy_, clone, contiguous, to_dtype, detach.
*/
#include "backend.h"
#include "elementwise.h"

int lt_full(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim, const int64_t *size, double v) {
  lt_tensor *t;
  if (lt_empty(ctx, &t, dt, ndim, size)) return -1;
  ltK_kernels(t)->fill(ctx, t, v);
  *out = t;
  return 0;
}

int ltO_full_as(lt_ctx *ctx, lt_tensor **out, const lt_tensor *like, lt_dtype dt, int ndim,
                const int64_t *size, double v) {
  lt_tensor *t;
  if (ltO_empty_as(ctx, &t, like, dt, ndim, size)) return -1;
  ltK_kernels(t)->fill(ctx, t, v);
  *out = t;
  return 0;
}

static const ltG_node_type fill_type = {"FillBackward2", ltO_zero_backward, NULL};
static const ltG_node_type zero_type = {"ZeroBackward0", ltO_zero_backward, NULL};

static int fill_as(lt_ctx *ctx, const char *op, const ltG_node_type *type, lt_tensor *t,
                   double v) {
  if (ltB_check_inplace_fill(ctx, op, t)) return -1;
  ltK_kernels(t)->fill(ctx, t, v);
  ltB_bump_version(t);
  return ltG_record_overwrite(ctx, type, t);
}

int lt_fill_(lt_ctx *ctx, lt_tensor *t, double v) {
  return fill_as(ctx, "fill_", &fill_type, t, v);
}
int lt_zero_(lt_ctx *ctx, lt_tensor *t) { return fill_as(ctx, "zero_", &zero_type, t, 0.0); }

/* CopyBackwards: the gradient flows to the source (summed over broadcast dims). */
typedef struct { int ndim; int64_t size[LT_MAX_DIMS]; lt_dtype dt; } copy_extra;

static int copy_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  copy_extra *e = self->extra;
  if (ltO_zero_backward(ctx, self, go, gi)) return -1;   /* the overwritten values: none */
  if (!ltG_needs_input_grad(self, 1)) return 0;
  lt_tensor *s;
  if (ltO_sum_to(ctx, &s, go[0], e->ndim, e->size)) return -1;
  int rc = lt_to_dtype(ctx, &gi[1], s, e->dt);
  lt_release(s);
  return rc;
}

static const ltG_node_type copy_type = {"CopyBackwards", copy_backward, NULL};

static int copy_impl(lt_ctx *ctx, const char *op, lt_tensor *dst, lt_tensor *src,
                     bool overlap_ok) {
  int nd;
  int64_t sz[LT_MAX_DIMS];
  if (ltB_broadcast_shapes(ctx, op, src->ndim, src->size, dst->ndim, dst->size, &nd, sz))
    return -1;
  if (nd != dst->ndim) nd = -1;
  for (int i = 0; i < nd; i++)
    if (sz[i] != dst->size[i]) nd = -1;
  if (nd < 0) {
    char a[256], b[256];
    return ltB_fail(ctx, "%s: source of shape %s cannot be broadcast to destination of shape "
                    "%s", op, LT_SHAPE(src, a), LT_SHAPE(dst, b));
  }
  if (overlap_ok ? ltB_check_fill_from(ctx, op, dst, src)
                 : ltB_check_inplace_from(ctx, op, dst, src))
    return -1;
  lt_tensor *clone;   /* x:copy_(x:t()) reads x as it was */
  if (ltO_ew_unaliased(ctx, dst, src, false, &clone)) return -1;
  int rc = ltD_copy_across(ctx, dst, clone ? clone : src);
  lt_release(clone);
  if (rc) return -1;
  ltB_bump_version(dst);
  /* as in PyTorch, dst keeps requiring grad: its old values get a zero gradient */
  lt_tensor *ins[2] = {dst, src};
  lt_node *n;
  if (ltG_record(ctx, &copy_type, 2, ins, 1, &dst, sizeof(copy_extra), 0, &n)) return -1;
  if (n) {
    copy_extra *e = n->extra;
    e->ndim = src->ndim;
    memcpy(e->size, src->size, sizeof e->size);
    e->dt = src->dtype;
  }
  return 0;
}

int lt_copy_(lt_ctx *ctx, lt_tensor *dst, lt_tensor *src) {
  return copy_impl(ctx, "copy_", dst, src, false);
}

int lt_fill_tensor_(lt_ctx *ctx, lt_tensor *dst, lt_tensor *value) {
  if (value->ndim != 0) {
    char b[256];
    return ltB_fail(ctx, "fill_: only supports a 0-dimension value tensor, but got a value of "
                    "shape %s", LT_SHAPE(value, b));
  }
  return copy_impl(ctx, "fill_", dst, value, true);
}

/* CloneBackward0 / ToCopyBackward0: gradient passes through (converted back to the dtype). */
typedef struct { lt_dtype dt; } cast_extra;

static int cast_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  cast_extra *e = self->extra;
  return lt_to_dtype(ctx, &gi[0], go[0], e->dt);
}

static const ltG_node_type clone_type = {"CloneBackward0", cast_backward, NULL};
static const ltG_node_type tocopy_type = {"ToCopyBackward0", cast_backward, NULL};

/* A new contiguous tensor of dtype dt holding t's values, recorded with `type`. */
static int copy_as(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt,
                   const ltG_node_type *type) {
  lt_tensor *r;
  if (ltO_empty_as(ctx, &r, t, dt, t->ndim, t->size)) return -1;
  ltK_kernels(r)->copy(ctx, r, t);
  if (lt_dtype_is_float(dt)) {
    lt_node *n;
    if (ltG_record(ctx, type, 1, &t, 1, &r, sizeof(cast_extra), 0, &n)) {
      lt_release(r);
      return -1;
    }
    if (n) ((cast_extra *)n->extra)->dt = t->dtype;
  }
  *out = r;
  return 0;
}

int lt_clone(lt_ctx *ctx, lt_tensor **out, lt_tensor *t) {
  return copy_as(ctx, out, t, t->dtype, &clone_type);
}

int lt_contiguous(lt_ctx *ctx, lt_tensor **out, lt_tensor *t) {
  if (lt_is_contiguous(t)) {
    *out = lt_retain(t);
    return 0;
  }
  return copy_as(ctx, out, t, t->dtype, &clone_type);
}

int ltO_dense_as(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt) {
  lt_tensor *c;
  if (lt_to_dtype(ctx, &c, t, dt)) return -1;
  int rc = lt_contiguous(ctx, out, c);
  lt_release(c);
  return rc;
}

int lt_to_dtype(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return ltB_fail(ctx, "to: unknown dtype %d", (int)dt);
  if (t->dtype == dt) {
    *out = lt_retain(t);
    return 0;
  }
  return copy_as(ctx, out, t, dt, &tocopy_type);
}

int lt_detach(lt_ctx *ctx, lt_tensor **out, lt_tensor *t) {
  lt_tensor *r = ltB_alias(t, t->ndim, t->size, t->stride, t->offset);
  if (!r) return ltB_fail(ctx, "detach: out of memory");
  *out = r;
  return 0;
}
