/*
** copy.c -- copy with dtype conversion and broadcasting, fill, and the ops built on them:
** full, fill_, copy_, clone, contiguous, to_dtype, detach.
*/
#include "core.h"

typedef struct { lt_dtype dst, src; } copy_types;

/* One loop per (dst, src) dtype pair; LOOP expands into a strided conversion loop. */
#define LOOP(TD, TS, CONV)                                                   \
  do {                                                                       \
    if (sd == (int64_t)sizeof(TD) && ss == (int64_t)sizeof(TS)) {            \
      TD *d = (TD *)data[0];                                                 \
      const TS *s = (const TS *)data[1];                                     \
      for (int64_t i = 0; i < n; i++) d[i] = CONV(s[i]);                     \
    } else {                                                                 \
      for (int64_t i = 0; i < n; i++)                                        \
        *(TD *)(data[0] + i * sd) = CONV(*(const TS *)(data[1] + i * ss));   \
    }                                                                        \
  } while (0)

#define AS_IS(x) (x)
#define TO_BOOL(x) ((x) != 0)

static void copy_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const copy_types *ct = ud;
  int64_t sd = st[0], ss = st[1];
  switch (ct->dst * LT_NDTYPE + ct->src) {
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT32: LOOP(float, float, AS_IS); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT64: LOOP(float, double, (float)); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_INT64: LOOP(float, int64_t, (float)); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_BOOL: LOOP(float, bool, (float)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT32: LOOP(double, float, (double)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT64: LOOP(double, double, AS_IS); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_INT64: LOOP(double, int64_t, (double)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_BOOL: LOOP(double, bool, (double)); break;
    case LT_INT64 * LT_NDTYPE + LT_FLOAT32: LOOP(int64_t, float, (int64_t)); break;
    case LT_INT64 * LT_NDTYPE + LT_FLOAT64: LOOP(int64_t, double, (int64_t)); break;
    case LT_INT64 * LT_NDTYPE + LT_INT64: LOOP(int64_t, int64_t, AS_IS); break;
    case LT_INT64 * LT_NDTYPE + LT_BOOL: LOOP(int64_t, bool, (int64_t)); break;
    case LT_BOOL * LT_NDTYPE + LT_FLOAT32: LOOP(bool, float, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_FLOAT64: LOOP(bool, double, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_INT64: LOOP(bool, int64_t, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_BOOL: LOOP(bool, bool, AS_IS); break;
    default: break;
  }
}

void lt_cpu_copy(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src) {
  if (dst->dtype == src->dtype && lt_is_contiguous(dst) && lt_is_contiguous(src) &&
      lt_same_shape(dst, src)) {
    size_t n = (size_t)lt_numel(dst) * lt_dtype_size(dst->dtype);
    if (n) memmove(lt_data(dst), lt_data(src), n);
    return;
  }
  lt_tensor *ops[2] = {dst, (lt_tensor *)src};
  lt_iter it;
  lt_iter_init(&it, 2, ops, dst->ndim, dst->size);
  copy_types ct = {dst->dtype, src->dtype};
  lt_iter_run(ctx, &it, copy_row, &ct);
}

typedef struct { lt_dtype dt; double v; } fill_args;

static void fill_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const fill_args *fa = ud;
  int64_t s = st[0];
  switch (fa->dt) {
    case LT_FLOAT32: {
      float v = (float)fa->v;
      if (s == 4) {
        float *d = (float *)data[0];
        for (int64_t i = 0; i < n; i++) d[i] = v;
      } else {
        for (int64_t i = 0; i < n; i++) *(float *)(data[0] + i * s) = v;
      }
      break;
    }
    case LT_FLOAT64:
      for (int64_t i = 0; i < n; i++) *(double *)(data[0] + i * s) = fa->v;
      break;
    case LT_INT64:
      for (int64_t i = 0; i < n; i++) *(int64_t *)(data[0] + i * s) = (int64_t)fa->v;
      break;
    case LT_BOOL:
      for (int64_t i = 0; i < n; i++) *(bool *)(data[0] + i * s) = fa->v != 0;
      break;
    default: break;
  }
}

void lt_cpu_fill(lt_ctx *ctx, lt_tensor *dst, double v) {
  lt_tensor *ops[1] = {dst};
  lt_iter it;
  lt_iter_init(&it, 1, ops, dst->ndim, dst->size);
  fill_args fa = {dst->dtype, v};
  lt_iter_run(ctx, &it, fill_row, &fa);
}

/* ------------------------------------------------------------ ops */

int lt_full(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim, const int64_t *size, double v) {
  lt_tensor *t;
  if (lt_empty(ctx, &t, dt, ndim, size)) return -1;
  lt_kernels(t)->fill(ctx, t, v);
  *out = t;
  return 0;
}

static const lt_node_type fill_type = {"FillBackward2", lt_zero_backward, NULL};
static const lt_node_type zero_type = {"ZeroBackward0", lt_zero_backward, NULL};

static int fill_as(lt_ctx *ctx, const char *op, const lt_node_type *type, lt_tensor *t,
                   double v) {
  if (lt_check_inplace_fill(ctx, op, t)) return -1;
  lt_kernels(t)->fill(ctx, t, v);
  lt_bump_version(t);
  return lt_record_overwrite(ctx, type, t);
}

int lt_fill_(lt_ctx *ctx, lt_tensor *t, double v) { return fill_as(ctx, "fill_", &fill_type, t, v); }
int lt_zero_(lt_ctx *ctx, lt_tensor *t) { return fill_as(ctx, "zero_", &zero_type, t, 0.0); }

/* CopyBackwards: the gradient flows to the source (summed over broadcast dims). */
typedef struct { int ndim; int64_t size[LT_MAX_DIMS]; lt_dtype dt; } copy_extra;

static int copy_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  copy_extra *e = self->extra;
  if (lt_zero_backward(ctx, self, go, gi)) return -1;   /* the overwritten values: none */
  if (!lt_needs_input_grad(self, 1)) return 0;
  lt_tensor *s;
  if (lt_sum_to(ctx, &s, go[0], e->ndim, e->size)) return -1;
  int rc = lt_to_dtype(ctx, &gi[1], s, e->dt);
  lt_release(s);
  return rc;
}

static const lt_node_type copy_type = {"CopyBackwards", copy_backward, NULL};

static int copy_impl(lt_ctx *ctx, const char *op, lt_tensor *dst, lt_tensor *src,
                     bool overlap_ok) {
  int nd;
  int64_t sz[LT_MAX_DIMS];
  if (lt_broadcast_shapes(ctx, op, src->ndim, src->size, dst->ndim, dst->size, &nd, sz))
    return -1;
  if (nd != dst->ndim) nd = -1;
  for (int i = 0; i < nd; i++)
    if (sz[i] != dst->size[i]) nd = -1;
  if (nd < 0) {
    char a[256], b[256];
    return lt_fail(ctx, "%s: source of shape %s cannot be broadcast to destination of shape "
                   "%s", op, LT_SHAPE(src, a), LT_SHAPE(dst, b));
  }
  if (overlap_ok ? lt_check_fill_from(ctx, op, dst, src)
                 : lt_check_inplace_from(ctx, op, dst, src))
    return -1;
  lt_kernels(dst)->copy(ctx, dst, src);
  lt_bump_version(dst);
  /* as in PyTorch, dst keeps requiring grad: its old values get a zero gradient */
  lt_tensor *ins[2] = {dst, src};
  lt_node *n;
  if (lt_record(ctx, &copy_type, 2, ins, 1, &dst, sizeof(copy_extra), 0, &n)) return -1;
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
    return lt_fail(ctx, "fill_: only supports a 0-dimension value tensor, but got a value of "
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

static const lt_node_type clone_type = {"CloneBackward0", cast_backward, NULL};
static const lt_node_type tocopy_type = {"ToCopyBackward0", cast_backward, NULL};

/* A new contiguous tensor of dtype dt holding t's values, recorded with `type`. */
static int copy_as(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt,
                   const lt_node_type *type) {
  lt_tensor *r;
  if (lt_empty(ctx, &r, dt, t->ndim, t->size)) return -1;
  lt_kernels(r)->copy(ctx, r, t);
  if (lt_dtype_is_float(dt)) {
    lt_node *n;
    if (lt_record(ctx, type, 1, &t, 1, &r, sizeof(cast_extra), 0, &n)) {
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

int lt_dense_as(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt) {
  lt_tensor *c;
  if (lt_to_dtype(ctx, &c, t, dt)) return -1;
  int rc = lt_contiguous(ctx, out, c);
  lt_release(c);
  return rc;
}

int lt_to_dtype(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return lt_fail(ctx, "to: unknown dtype %d", (int)dt);
  if (t->dtype == dt) {
    *out = lt_retain(t);
    return 0;
  }
  return copy_as(ctx, out, t, dt, &tocopy_type);
}

int lt_detach(lt_ctx *ctx, lt_tensor **out, lt_tensor *t) {
  lt_tensor *r = lt_alias(t, t->ndim, t->size, t->stride, t->offset);
  if (!r) return lt_fail(ctx, "detach: out of memory");
  *out = r;
  return 0;
}
