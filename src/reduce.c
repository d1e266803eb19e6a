/*
** reduce.c -- the op layer of the reductions and their gradients (the folds run in the
** device's `reduce` kernel, cpu/reduce.c):
**
**   lt_reduce            sum mean prod amax amin all any over a set of dims (or all), keepdim
**   lt_max / lt_min      full reductions; ties share the gradient (MaxBackward1)
**
** The other members of the family: search.c (max/min along a dim, argmax/argmin),
** reduce_composed.c (var, std, norm, logsumexp), softmax.c, scan.c (cumsum).
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "reduce.h"

/* ================================================================ dims and shapes */

int ltO_red_mask(lt_ctx *ctx, const char *op, const lt_tensor *a, int ndims, const int *dims,
                 bool *mask) {
  for (int d = 0; d < LT_MAX_DIMS; d++) mask[d] = false;
  if (ndims < 0 || ndims > LT_MAX_DIMS)
    return ltB_fail(ctx, "%s: %d dims given, at most %d supported", op, ndims, LT_MAX_DIMS);
  if (ndims == 0 || !dims) {
    for (int d = 0; d < a->ndim; d++) mask[d] = true;
    return 0;
  }
  bool seen[LT_MAX_DIMS] = {false};
  for (int i = 0; i < ndims; i++) {
    int d;
    if (ltB_wrap_dim(ctx, op, dims[i], a->ndim, &d)) return -1;
    if (seen[d]) return ltB_fail(ctx, "%s: dim %d appears multiple times in the list of dims", op,
                                 d + 1);
    seen[d] = true;
    if (a->ndim > 0) mask[d] = true;
  }
  return 0;
}

int ltO_red_shape(const lt_tensor *a, const bool *mask, bool keepdim, int64_t *size) {
  int n = 0;
  for (int d = 0; d < a->ndim; d++) {
    if (!mask[d])
      size[n++] = a->size[d];
    else if (keepdim)
      size[n++] = 1;
  }
  return n;
}

int64_t ltO_red_count(const lt_tensor *a, const bool *mask) {
  int64_t n = 1;
  for (int d = 0; d < a->ndim; d++)
    if (mask[d]) n *= a->size[d];
  return n;
}

void ltO_red_extra_fill(ltO_red_extra *e, const lt_tensor *a, const bool *mask, bool keepdim) {
  e->ndim = a->ndim;
  for (int d = 0; d < a->ndim; d++) {
    e->size[d] = a->size[d];
    e->mask[d] = mask[d];
  }
  e->keepdim = keepdim;
  e->count = ltO_red_count(a, mask);
}

int ltO_red_extra_dims(const ltO_red_extra *e, int *dims) {
  int n = 0;
  for (int d = 0; d < e->ndim; d++)
    if (e->mask[d]) dims[n++] = d;
  return n == e->ndim ? 0 : n;
}

lt_tensor *ltO_red_view(const lt_tensor *t, const ltO_red_extra *e, bool expand) {
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  int j = 0;
  for (int d = 0; d < e->ndim; d++) {
    if (e->mask[d]) {
      size[d] = expand ? e->size[d] : 1;
      stride[d] = 0;
      if (e->keepdim) j++;
    } else {
      if (j >= t->ndim) return NULL;
      size[d] = e->size[d];
      stride[d] = t->stride[j++];
    }
  }
  if (j != t->ndim) return NULL;
  return ltB_alias(t, e->ndim, size, stride, t->offset);
}

int ltO_red_oom(lt_ctx *ctx, const char *op) { return ltB_fail(ctx, "%s: out of memory", op); }

/* ================================================================ gradients */

static int sum_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const ltO_red_extra *e = self->extra;
  if (!gout[0]) return 0;
  gin[0] = ltO_red_view(gout[0], e, true);
  return gin[0] ? 0 : ltO_red_oom(ctx, self->type->name);
}

/* The incoming gradient divided by the count, then broadcast into a dense tensor (PyTorch's is
** dense too: a hook may edit it in place): the same value in every element, without a division
** per element over the broadcast (a mean over 7 x 7 planes of 32 x 512 took 0.8 ms to divide, a
** row of 49 at a time; the copy of the broadcast takes 0.14) */
static int mean_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const ltO_red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *q, *v;
  if (lt_binary_scalar(ctx, &q, LT_DIV, gout[0], (double)e->count, false, false)) return -1;
  v = ltO_red_view(q, e, true);
  lt_release(q);
  if (!v) return ltO_red_oom(ctx, self->type->name);
  int rc = lt_contiguous(ctx, &gin[0], v);
  lt_release(v);
  return rc;
}

/* Copies t (shape of the input of e) into a new contiguous [M, N] buffer: row m holds the
** elements folded into output m (kept dims and reduced dims each in natural order). */
static int rows_perm(const ltO_red_extra *e, const lt_tensor *t, int64_t *size, int64_t *stride) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int d = 0; d < e->ndim; d++)
      if (e->mask[d] == (pass == 1)) {
        size[n] = t->size[d];
        stride[n++] = t->stride[d];
      }
  return n;
}

static int rows_gather(lt_ctx *ctx, lt_tensor **out, const ltO_red_extra *e, lt_tensor *t) {
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  int n = rows_perm(e, t, size, stride);
  lt_tensor *v = ltB_alias(t, n, size, stride, t->offset), *o = NULL;
  if (!v) return ltO_red_oom(ctx, "gather");
  int rc = ltO_empty_as(ctx, &o, t, t->dtype, n, size);
  if (!rc) rc = lt_copy_(ctx, o, v);
  lt_release(v);
  if (rc) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

/* Inverse of rows_gather: a tensor shaped like the input of e from contiguous rows. */
static int rows_scatter(lt_ctx *ctx, lt_tensor **out, const ltO_red_extra *e, lt_tensor *rows) {
  lt_tensor *o = NULL;
  if (ltO_empty_as(ctx, &o, rows, rows->dtype, e->ndim, e->size)) return -1;
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS], cst[LT_MAX_DIMS];
  int n = rows_perm(e, o, size, stride);
  ltB_contiguous_strides(n, size, cst);
  lt_tensor *dv = ltB_alias(o, n, size, stride, o->offset);
  lt_tensor *sv = ltB_alias(rows, n, size, cst, rows->offset);
  int rc = (dv && sv) ? lt_copy_(ctx, dv, sv) : ltO_red_oom(ctx, "scatter");
  lt_release(dv);
  lt_release(sv);
  if (rc) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

/* Gradient of a product: the rows of elements folded into each output, gathered into one
** contiguous [M, N] buffer, go through the device's prod_backward kernel and are scattered
** back to the input's shape. */
static int prod_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const ltO_red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *X = NULL, *G = NULL, *Gc = NULL, *GI = NULL;
  if (ltG_saved_get(ctx, self, 0, &x)) return -1;
  int rc = -1;
  if (rows_gather(ctx, &X, e, x)) goto done;
  if (lt_to_dtype(ctx, &Gc, gout[0], x->dtype)) goto done;
  if (lt_contiguous(ctx, &G, Gc)) goto done;
  if (ltO_empty_as(ctx, &GI, x, x->dtype, X->ndim, X->size)) goto done;
  {
    int64_t N = e->count, M = N ? lt_numel(X) / N : lt_numel(G);
    ltK_kernels(x)->prod_backward(GI, X, G, M, N);
  }
  rc = rows_scatter(ctx, &gin[0], e, GI);
done:
  lt_release(X);
  lt_release(G);
  lt_release(Gc);
  lt_release(GI);
  return rc;
}

/* Gradient of amax/amin/max()/min(): split evenly among the elements equal to the result
** (NaN results: among the NaNs). */
static int amax_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const ltO_red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (ltG_saved_get(ctx, self, 0, &x) || ltG_saved_get(ctx, self, 1, &y)) return -1;
  lt_tensor *yk = ltO_red_view(y, e, false), *gk = ltO_red_view(gout[0], e, false);
  lt_tensor *mask = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL, *cnt = NULL, *scale = NULL;
  int rc = -1, dims[LT_MAX_DIMS], nd = ltO_red_extra_dims(e, dims);
  if (!yk || !gk) {
    ltO_red_oom(ctx, self->type->name);
    goto done;
  }
  if (lt_binary(ctx, &mask, LT_EQ, x, yk)) goto done;
  if (ltK_kernels(y)->has_nan(y)) {   /* (x == y) | (isnan(x) & isnan(y)) */
    if (lt_unary(ctx, &n1, LT_ISNAN, x, 0, 0) || lt_unary(ctx, &n2, LT_ISNAN, yk, 0, 0) ||
        lt_binary_(ctx, LT_LAND, n1, n2) || lt_binary_(ctx, LT_LOR, mask, n1))
      goto done;
  }
  if (lt_reduce(ctx, &cnt, LT_RSUM, mask, nd, dims, true)) goto done;
  if (lt_binary(ctx, &scale, LT_DIV, gk, cnt)) goto done;
  if (lt_binary(ctx, &n3, LT_MUL, mask, scale)) goto done;
  if (n3->dtype != gout[0]->dtype) {
    rc = lt_to_dtype(ctx, &gin[0], n3, gout[0]->dtype);
    goto done;
  }
  gin[0] = lt_retain(n3);
  rc = 0;
done:
  lt_release(yk);
  lt_release(gk);
  lt_release(mask);
  lt_release(n1);
  lt_release(n2);
  lt_release(n3);
  lt_release(cnt);
  lt_release(scale);
  return rc;
}

static const ltG_node_type sum0_type = {"SumBackward0", sum_backward, NULL};
static const ltG_node_type sum1_type = {"SumBackward1", sum_backward, NULL};
static const ltG_node_type mean0_type = {"MeanBackward0", mean_backward, NULL};
static const ltG_node_type mean1_type = {"MeanBackward1", mean_backward, NULL};
static const ltG_node_type prod0_type = {"ProdBackward0", prod_backward, NULL};
static const ltG_node_type prod1_type = {"ProdBackward1", prod_backward, NULL};
static const ltG_node_type amax_type = {"AmaxBackward0", amax_backward, NULL};
static const ltG_node_type amin_type = {"AminBackward0", amax_backward, NULL};
static const ltG_node_type max1_type = {"MaxBackward1", amax_backward, NULL};
static const ltG_node_type min1_type = {"MinBackward1", amax_backward, NULL};

static const char *const red_names[LT_NREDOP] = {"sum", "mean", "prod", "amax", "amin",
                                                 "all", "any"};

int ltO_reduce_as(lt_ctx *ctx, lt_tensor **out, enum lt_redop op, lt_tensor *a, int ndims,
                  const int *dims, bool keepdim, const char *name, const ltG_node_type *type) {
  if ((unsigned)op >= LT_NREDOP) return ltB_fail(ctx, "reduce: unknown reduction %d", op);
  if (!name) name = red_names[op];
  bool mask[LT_MAX_DIMS];
  if (ltO_red_mask(ctx, name, a, ndims, dims, mask)) return -1;
  bool fl = lt_dtype_is_float(a->dtype);
  lt_dtype odt = a->dtype;
  switch (op) {
    case LT_RSUM: case LT_RPROD: odt = fl ? a->dtype : LT_INT64; break;
    case LT_RMEAN:
      if (!fl)
        return ltB_fail(ctx, "%s(): could not infer output dtype. Input dtype must be either a "
                        "floating point or complex dtype. Got: %s", name,
                        lt_dtype_name(a->dtype));
      break;
    case LT_RALL: case LT_RANY: odt = LT_BOOL; break;
    default: break;
  }
  if (op == LT_RAMAX || op == LT_RAMIN) {
    if ((ndims == 0 || !dims) && lt_numel(a) == 0)
      return ltB_fail(ctx, "%s(): Expected reduction dim to be specified for input.numel() == 0. "
                      "Specify the reduction dim with the 'dim' argument.", name);
    for (int d = 0; d < a->ndim; d++)
      if (mask[d] && a->size[d] == 0)
        return ltB_fail(ctx, "%s(): Expected reduction dim %d to have non-zero size.", name,
                        d + 1);
  }
  int64_t osize[LT_MAX_DIMS];
  int ond = ltO_red_shape(a, mask, keepdim, osize);
  lt_tensor *o;
  if (ltO_empty_as(ctx, &o, a, odt, ond, osize)) return -1;
  if (ltK_kernels(a)->reduce(ctx, name, op, o, a, mask)) {
    lt_release(o);
    return -1;
  }
  if (fl && op != LT_RALL && op != LT_RANY && ltG_needs_grad(ctx, 1, &a)) {
    bool all = ndims == 0 || !dims;
    if (!type) {
      switch (op) {
        case LT_RSUM: type = all ? &sum0_type : &sum1_type; break;
        case LT_RMEAN: type = all ? &mean0_type : &mean1_type; break;
        case LT_RPROD: type = all ? &prod0_type : &prod1_type; break;
        case LT_RAMAX: type = &amax_type; break;
        default: type = &amin_type; break;
      }
    }
    int nsave = (op == LT_RSUM || op == LT_RMEAN) ? 0 : 2;
    lt_node *node;
    if (ltG_record(ctx, type, 1, &a, 1, &o, sizeof(ltO_red_extra), nsave, &node)) {
      lt_release(o);
      return -1;
    }
    if (node) {
      ltO_red_extra_fill(node->extra, a, mask, keepdim);
      if (nsave && (ltG_save(node, 0, a, false) || ltG_save(node, 1, o, true))) {
        lt_release(o);
        return ltO_red_oom(ctx, name);
      }
    }
  }
  *out = o;
  return 0;
}

int lt_reduce(lt_ctx *ctx, lt_tensor **out, enum lt_redop op, lt_tensor *a, int ndims,
              const int *dims, bool keepdim) {
  return ltO_reduce_as(ctx, out, op, a, ndims, dims, keepdim, NULL, NULL);
}

int lt_max(lt_ctx *ctx, lt_tensor **out, lt_tensor *a) {
  return ltO_reduce_as(ctx, out, LT_RAMAX, a, 0, NULL, false, "max", &max1_type);
}

int lt_min(lt_ctx *ctx, lt_tensor **out, lt_tensor *a) {
  return ltO_reduce_as(ctx, out, LT_RAMIN, a, 0, NULL, false, "min", &min1_type);
}
