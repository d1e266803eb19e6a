/*
** reduce_composed.c -- reductions composed from lt_reduce and elementwise ops, each computed
** with grad mode off and then recorded as one node; their gradients are written in ops too:
**
**   lt_var / lt_std      with `correction`
**   lt_norm              any p
**   lt_logsumexp         shifted by the max
*/
#include <math.h>
#include <stdint.h>

#include "reduce.h"

/* Sets t[i] = 0 wherever ref[i] == 0 (NaNs included): t is a fresh contiguous float tensor and
** ref has as many elements, in the same order. */
static int zero_where_zero(lt_ctx *ctx, lt_tensor *t, lt_tensor *ref) {
  if (!lt_is_contiguous(t) || lt_numel(t) != lt_numel(ref) || t->dtype != ref->dtype)
    return ltB_fail(ctx, "%s: internal layout mismatch", "backward");
  lt_tensor *z = NULL, *zv = NULL;
  int rc = -1;
  if (!lt_binary_scalar(ctx, &z, LT_EQ, ref, 0.0, false, false) &&
      !lt_reshape(ctx, &zv, z, t->ndim, t->size))
    rc = lt_masked_fill_(ctx, t, zv, 0.0);
  lt_release(z);
  lt_release(zv);
  return rc;
}

/* t (contiguous float): non-finite elements become 0. */
static int zero_nonfinite(lt_ctx *ctx, lt_tensor *t) {
  lt_tensor *fin = NULL;
  int rc = -1;
  if (!lt_unary(ctx, &fin, LT_ISFINITE, t, 0, 0) && !lt_unary_(ctx, LT_LNOT, fin, 0, 0))
    rc = lt_masked_fill_(ctx, t, fin, 0.0);
  lt_release(fin);
  return rc;
}

/* t = |t|^e, 0 where t == 0 (t fresh, contiguous, float, of x's shape): the exponent is a full
** tensor so that every element goes through pow, as the formula's reference does. */
static int pow_nonzero(lt_ctx *ctx, lt_tensor *t, double e) {
  lt_tensor *z = NULL, *ex = NULL;
  int rc = -1;
  if (!lt_binary_scalar(ctx, &z, LT_EQ, t, 0.0, false, false) &&
      !ltO_full_as(ctx, &ex, t, t->dtype, t->ndim, t->size, e) && !lt_binary_(ctx, LT_POW, t, ex))
    rc = lt_masked_fill_(ctx, t, z, 0.0);
  lt_release(z);
  lt_release(ex);
  return rc;
}

/* Releases up to 8 temporaries. */
static void drop(lt_tensor **ts, int n) {
  for (int i = 0; i < n; i++) {
    lt_release(ts[i]);
    ts[i] = NULL;
  }
}

/* Records a composed reduction: node with input a, output o, saves a and o. */
static int record_composed(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *a, lt_tensor *o,
                           const bool *mask, bool keepdim, double p, bool is_std,
                           const char *op) {
  lt_node *node;
  if (ltG_record(ctx, type, 1, &a, 1, &o, sizeof(ltO_red_extra), 2, &node)) return -1;
  if (node) {
    ltO_red_extra *e = node->extra;
    ltO_red_extra_fill(e, a, mask, keepdim);
    e->p = p;
    e->is_std = is_std;
    if (ltG_save(node, 0, a, false) || ltG_save(node, 1, o, true)) return ltO_red_oom(ctx, op);
  }
  return 0;
}

/* var/std gradient: g * (x - mean) * 2/den (var) or g * (x - mean) / (den * std) (std, 0 where
** std == 0, as PyTorch). */
static int var_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const ltO_red_extra *e = self->extra;
  bool is_std = e->is_std;
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (ltG_saved_get(ctx, self, 0, &x) || ltG_saved_get(ctx, self, 1, &y)) return -1;
  lt_tensor *t[6] = {NULL};   /* mean, diff, gk, scale, yk, tmp */
  int dims[LT_MAX_DIMS], nd = ltO_red_extra_dims(e, dims), rc = -1;
  if (lt_reduce(ctx, &t[0], LT_RMEAN, x, nd, dims, true)) goto done;
  if (lt_binary(ctx, &t[1], LT_SUB, x, t[0])) goto done;
  if (!(t[2] = ltO_red_view(gout[0], e, false))) goto nomem;
  if (!is_std) {
    if (lt_binary_scalar(ctx, &t[3], LT_MUL, t[2], 2.0 / e->p, false, false)) goto done;
  } else {
    if (!(t[4] = ltO_red_view(y, e, false))) goto nomem;
    if (lt_binary_scalar(ctx, &t[5], LT_MUL, t[4], e->p, false, false)) goto done;
    if (lt_binary(ctx, &t[3], LT_DIV, t[2], t[5])) goto done;
    if (zero_where_zero(ctx, t[3], y)) goto done;
  }
  rc = lt_binary(ctx, &gin[0], LT_MUL, t[1], t[3]);
  goto done;
nomem:
  ltO_red_oom(ctx, self->type->name);
done:
  drop(t, 6);
  return rc;
}

static const ltG_node_type var_type = {"VarBackward0", var_backward, NULL};
static const ltG_node_type std_type = {"StdBackward0", var_backward, NULL};

static int var_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
                    double correction, bool keepdim, bool is_std) {
  const char *op = is_std ? "std" : "var";
  if (!lt_dtype_is_float(a->dtype))
    return ltB_fail(ctx, "%s(): std and var only support floating point dtypes, got %s", op,
                    lt_dtype_name(a->dtype));
  if (correction != correction)
    return ltB_fail(ctx, "%s(): correction must be a number, got nan", op);
  bool mask[LT_MAX_DIMS];
  if (ltO_red_mask(ctx, op, a, ndims, dims, mask)) return -1;
  double den = (double)ltO_red_count(a, mask) - correction;
  if (den < 0) den = 0;
  bool old = lt_set_grad_enabled(ctx, false);
  lt_tensor *t[3] = {NULL};   /* mean, diff, out */
  int rc = -1;
  if (lt_reduce(ctx, &t[0], LT_RMEAN, a, ndims, dims, true)) goto done;
  if (lt_binary(ctx, &t[1], LT_SUB, a, t[0])) goto done;
  if (lt_unary_(ctx, LT_SQUARE, t[1], 0, 0)) goto done;
  if (lt_reduce(ctx, &t[2], LT_RSUM, t[1], ndims, dims, keepdim)) goto done;
  if (lt_binary_scalar_(ctx, LT_DIV, t[2], den)) goto done;
  if (is_std && lt_unary_(ctx, LT_SQRT, t[2], 0, 0)) goto done;
  rc = 0;
done:
  lt_set_grad_enabled(ctx, old);
  if (!rc) rc = record_composed(ctx, is_std ? &std_type : &var_type, a, t[2], mask, keepdim,
                                den, is_std, op);
  if (!rc) {
    *out = t[2];
    t[2] = NULL;
  }
  drop(t, 3);
  return rc;
}

int lt_var(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
           double correction, bool keepdim) {
  return var_impl(ctx, out, a, ndims, dims, correction, keepdim, false);
}

int lt_std(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
           double correction, bool keepdim) {
  return var_impl(ctx, out, a, ndims, dims, correction, keepdim, true);
}

/* Norm gradient (PyTorch's norm_backward):
**   p = 0: 0;  p = 1: sign(x) g;  p = 2: x g / norm (0 where norm == 0)
**   p = +-inf: sign(x) g / count where |x| == norm (ties share)
**   other p: sign(x) |x|^(p-1) g / norm^(p-1), 0 where x == 0 or norm == 0 */
static int norm_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const ltO_red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (ltG_saved_get(ctx, self, 0, &x) || ltG_saved_get(ctx, self, 1, &y)) return -1;
  double p = e->p;
  lt_tensor *t[8] = {NULL};
  int dims[LT_MAX_DIMS], nd = ltO_red_extra_dims(e, dims), rc = -1;
  if (!(t[0] = ltO_red_view(gout[0], e, false)) || !(t[1] = ltO_red_view(y, e, false))) goto nomem;
  if (p == 0) {
    rc = ltO_full_as(ctx, &gin[0], x, x->dtype, x->ndim, x->size, 0.0);
  } else if (p == 1) {
    if (lt_unary(ctx, &t[2], LT_SIGN, x, 0, 0)) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, t[2], t[0]);
  } else if (p == 2) {
    if (lt_binary(ctx, &t[2], LT_DIV, t[0], t[1])) goto done;
    if (zero_where_zero(ctx, t[2], y)) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, x, t[2]);
  } else if (isinf(p)) {
    if (lt_unary(ctx, &t[2], LT_ABS, x, 0, 0)) goto done;
    if (lt_binary(ctx, &t[3], LT_EQ, t[2], t[1])) goto done;                /* mask */
    if (lt_reduce(ctx, &t[4], LT_RSUM, t[3], nd, dims, true)) goto done;   /* count */
    if (lt_binary(ctx, &t[5], LT_DIV, t[0], t[4])) goto done;              /* g / count */
    if (lt_unary(ctx, &t[6], LT_SIGN, x, 0, 0)) goto done;
    if (lt_binary_(ctx, LT_MUL, t[6], t[3])) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, t[6], t[5]);
  } else {
    if (lt_unary(ctx, &t[2], LT_ABS, x, 0, 0)) goto done;   /* fresh, contiguous */
    if (pow_nonzero(ctx, t[2], p - 1)) goto done;
    if (lt_unary(ctx, &t[3], LT_SIGN, x, 0, 0)) goto done;
    if (lt_binary_(ctx, LT_MUL, t[2], t[3])) goto done;
    if (lt_binary_scalar(ctx, &t[4], LT_POW, y, p - 1, false, false)) goto done;
    if (!(t[5] = ltO_red_view(t[4], e, false))) goto nomem;
    if (lt_binary(ctx, &t[6], LT_DIV, t[0], t[5])) goto done;
    if (zero_where_zero(ctx, t[6], y)) goto done;
    rc = lt_binary(ctx, &gin[0], LT_MUL, t[2], t[6]);
  }
  goto done;
nomem:
  ltO_red_oom(ctx, self->type->name);
done:
  drop(t, 8);
  return rc;
}

static const ltG_node_type norm_type = {"NormBackward1", norm_backward, NULL};

/* The sum of squares of all of a contiguous float tensor in one pass where the backend has it
** (a norm over everything, as clip_grad_norm_ takes of each gradient: squaring into a tensor
** and summing it read and wrote twice as much, 1.9 ms for 4M floats against PyTorch's 0.74).
** *out stays NULL where it does not apply. */
static int whole_sumsq(lt_ctx *ctx, lt_tensor **out, const lt_tensor *a, const bool *mask,
                       bool keepdim) {
  *out = NULL;
  const ltK_backend *K = ltK_kernels(a);
  if (!K->sumsq || lt_numel(a) == 0 || !lt_is_contiguous(a)) return 0;
  int64_t ones[LT_MAX_DIMS];
  for (int d = 0; d < a->ndim; d++) {
    if (!mask[d]) return 0;
    ones[d] = 1;
  }
  if (ltO_empty_as(ctx, out, a, a->dtype, keepdim ? a->ndim : 0, ones)) return -1;
  if (!K->sumsq(ctx, *out, a)) return 0;
  lt_release(*out);
  *out = NULL;
  return -1;
}

int lt_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, double p, int ndims, const int *dims,
            bool keepdim) {
  if (!lt_dtype_is_float(a->dtype))
    return ltB_fail(ctx, "norm(): input dtype should be floating point, got %s",
                    lt_dtype_name(a->dtype));
  if (p != p) return ltB_fail(ctx, "norm(): p must be a number, got nan");
  bool mask[LT_MAX_DIMS];
  if (ltO_red_mask(ctx, "norm", a, ndims, dims, mask)) return -1;
  bool old = lt_set_grad_enabled(ctx, false);
  lt_tensor *t[3] = {NULL};   /* elementwise term, reduced, out */
  int rc = -1;
  if (p == 2) {
    if (whole_sumsq(ctx, &t[2], a, mask, keepdim)) goto done;
    if (!t[2]) {
      if (lt_unary(ctx, &t[0], LT_SQUARE, a, 0, 0)) goto done;
      if (lt_reduce(ctx, &t[2], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
    }
    if (lt_unary_(ctx, LT_SQRT, t[2], 0, 0)) goto done;
  } else if (p == 1) {
    if (lt_unary(ctx, &t[0], LT_ABS, a, 0, 0)) goto done;
    if (lt_reduce(ctx, &t[2], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
  } else if (isinf(p)) {
    if (lt_unary(ctx, &t[0], LT_ABS, a, 0, 0)) goto done;
    if (ltO_reduce_as(ctx, &t[2], p > 0 ? LT_RAMAX : LT_RAMIN, t[0], ndims, dims, keepdim, "norm",
                      NULL))
      goto done;
  } else if (p == 0) {
    if (lt_binary_scalar(ctx, &t[0], LT_NE, a, 0.0, false, false)) goto done;
    if (lt_reduce(ctx, &t[1], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
    if (lt_to_dtype(ctx, &t[2], t[1], a->dtype)) goto done;
  } else {
    if (lt_unary(ctx, &t[0], LT_ABS, a, 0, 0)) goto done;
    if (lt_binary_scalar_(ctx, LT_POW, t[0], p)) goto done;
    if (lt_reduce(ctx, &t[2], LT_RSUM, t[0], ndims, dims, keepdim)) goto done;
    if (lt_binary_scalar_(ctx, LT_POW, t[2], 1.0 / p)) goto done;
  }
  rc = 0;
done:
  lt_set_grad_enabled(ctx, old);
  if (!rc) rc = record_composed(ctx, &norm_type, a, t[2], mask, keepdim, p, false, "norm");
  if (!rc) {
    *out = t[2];
    t[2] = NULL;
  }
  drop(t, 3);
  return rc;
}

/* logsumexp gradient: g * exp(x - out). */
static int lse_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const ltO_red_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *x, *y;
  if (ltG_saved_get(ctx, self, 0, &x) || ltG_saved_get(ctx, self, 1, &y)) return -1;
  lt_tensor *t[3] = {NULL};
  int rc = -1;
  if (!(t[0] = ltO_red_view(gout[0], e, false)) || !(t[1] = ltO_red_view(y, e, false))) {
    ltO_red_oom(ctx, self->type->name);
    goto done;
  }
  if (lt_binary(ctx, &t[2], LT_SUB, x, t[1])) goto done;
  if (lt_unary_(ctx, LT_EXP, t[2], 0, 0)) goto done;
  rc = lt_binary(ctx, &gin[0], LT_MUL, t[2], t[0]);
done:
  drop(t, 3);
  return rc;
}

static const ltG_node_type lse_type = {"LogsumexpBackward0", lse_backward, NULL};

int lt_logsumexp(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int ndims, const int *dims,
                 bool keepdim) {
  bool mask[LT_MAX_DIMS];
  if (ltO_red_mask(ctx, "logsumexp", a, ndims, dims, mask)) return -1;
  bool old = lt_set_grad_enabled(ctx, false);
  lt_tensor *t[5] = {NULL};   /* float input, max, exp term, sum, out */
  int rc = -1;
  int64_t osize[LT_MAX_DIMS];
  int ond = ltO_red_shape(a, mask, keepdim, osize);
  lt_dtype fdt = lt_dtype_is_float(a->dtype) ? a->dtype : LT_FLOAT32;
  if (lt_to_dtype(ctx, &t[0], a, fdt)) goto done;
  if (ltO_red_count(a, mask) == 0) {   /* log(0) */
    rc = ltO_full_as(ctx, &t[4], a, fdt, ond, osize, -INFINITY);
    goto done;
  }
  if (ltO_reduce_as(ctx, &t[1], LT_RAMAX, t[0], ndims, dims, true, "logsumexp", NULL)) goto done;
  if (zero_nonfinite(ctx, t[1])) goto done;   /* all -inf (or inf, nan) rows: no shift */
  if (lt_binary(ctx, &t[2], LT_SUB, t[0], t[1])) goto done;
  if (lt_unary_(ctx, LT_EXP, t[2], 0, 0)) goto done;
  if (lt_reduce(ctx, &t[3], LT_RSUM, t[2], ndims, dims, true)) goto done;
  if (lt_unary_(ctx, LT_LOG, t[3], 0, 0)) goto done;
  if (lt_binary_(ctx, LT_ADD, t[3], t[1])) goto done;
  /* t[3] is contiguous with the keepdim shape: view it with the output shape */
  if (!(t[4] = ltB_alias(t[3], ond, osize, NULL, t[3]->offset))) {
    ltO_red_oom(ctx, "logsumexp");
    goto done;
  }
  rc = 0;
done:
  lt_set_grad_enabled(ctx, old);
  if (!rc && lt_dtype_is_float(a->dtype))
    rc = record_composed(ctx, &lse_type, a, t[4], mask, keepdim, 0, false, "logsumexp");
  if (!rc) {
    *out = t[4];
    t[4] = NULL;
  }
  drop(t, 5);
  return rc;
}
