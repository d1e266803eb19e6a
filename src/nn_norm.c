/*
** nn_norm.c -- the op layer of the norms: batch_norm, layer_norm, group_norm, rms_norm and their
** backward (NativeBatchNormBackward0, NativeLayerNormBackward0, NativeGroupNormBackward0,
** RmsNormBackward0). Arguments are checked here; the device's `batch_norm`, `row_norm` kernels
** and their backward (cpu/norm.c) compute. Statistics are float64 (C) or (R) tensors, saved for
** backward with x, so xhat is recomputed there rather than saved.
*/
#include <math.h>
#include <stdlib.h>

#include "backend.h"

/* ------------------------------------------------------------ shared helpers */

static int check_float(lt_ctx *ctx, const char *op, const lt_tensor *x) {
  if (!lt_dtype_is_float(x->dtype))
    return ltB_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                    lt_dtype_name(x->dtype));
  return 0;
}

/* Checks an optional per-feature tensor t: same dtype as x and `n` elements (shape checked by
** the caller where it matters). */
static int check_param(lt_ctx *ctx, const char *op, const char *what, const lt_tensor *t,
                       const lt_tensor *x, int64_t n) {
  char bt[256], bx[256];
  if (!t) return 0;
  if (ltD_check_devices(ctx, op, x, t)) return -1;
  if (t->dtype != x->dtype)
    return ltB_fail(ctx, "%s: %s has dtype %s but input has dtype %s", op, what,
                    lt_dtype_name(t->dtype), lt_dtype_name(x->dtype));
  if (t->ndim != 1 || t->size[0] != n)
    return ltB_fail(ctx, "%s: expected 1-d %s with %lld elements for input of shape %s, got %s of "
                    "shape %s", op, what, (long long)n, LT_SHAPE(x, bx), what, LT_SHAPE(t, bt));
  return 0;
}

/* Contiguous copies (new refs) of the optional tensors; NULL stays NULL. */
static int contig_opt(lt_ctx *ctx, lt_tensor **out, lt_tensor *t) {
  *out = NULL;
  return t ? lt_contiguous(ctx, out, t) : 0;
}

/* grad_out[0] converted to dt and made contiguous (new ref). */
static int grad_contig(lt_ctx *ctx, lt_tensor *go, lt_dtype dt, lt_tensor **out) {
  lt_tensor *t = go;
  if (go->dtype != dt) {
    if (lt_to_dtype(ctx, &t, go, dt)) return -1;
  } else {
    lt_retain(t);
  }
  int rc = lt_contiguous(ctx, out, t);
  lt_release(t);
  return rc;
}

static int new_f64(lt_ctx *ctx, lt_tensor **t, const lt_tensor *like, int64_t n) {
  return ltO_empty_as(ctx, t, like, LT_FLOAT64, 1, &n);
}

/* Backward prologue shared by every norm (saved: 0 x (contiguous), 1 weight, 2 mean, 3 invstd
** or rstd, both f64): the saved tensors into sv, grad_out[0] as x's dtype, contiguous, into *dy
** (new ref), and which of x, weight, bias want a gradient. */
static int norm_bwd_begin(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                          lt_tensor *sv[4], lt_tensor **dy, bool need[3]) {
  for (int i = 0; i < 4; i++)
    if (ltG_saved_get(ctx, self, i, &sv[i])) return -1;
  if (grad_contig(ctx, grad_out[0], sv[0]->dtype, dy)) return -1;
  need[0] = ltG_needs_input_grad(self, 0);
  need[1] = self->n_in > 1 && ltG_needs_input_grad(self, 1);
  need[2] = self->n_in > 2 && ltG_needs_input_grad(self, 2);
  return 0;
}

/* Hands dx, dw, db to the inputs the node has (rms_norm has no bias). */
static void norm_bwd_out(const lt_node *self, lt_tensor **grad_in, lt_tensor *dx, lt_tensor *dw,
                         lt_tensor *db) {
  grad_in[0] = dx;
  if (self->n_in > 1) grad_in[1] = dw;
  if (self->n_in > 2) grad_in[2] = db;
}

/* ============================================================ batch_norm */

typedef struct bn_extra {
  bool training;
  double eps;
} bn_extra;

/* saved: 0 x (contiguous), 1 weight, 2 mean (f64), 3 invstd (f64) */
static int batch_norm_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                               lt_tensor **grad_in) {
  bn_extra *ex = self->extra;
  if (!grad_out[0]) return 0;
  lt_tensor *sv[4], *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  bool need[3];
  if (norm_bwd_begin(ctx, self, grad_out, sv, &dy, need)) return -1;
  lt_tensor *x = sv[0], *w = sv[1], *mean = sv[2], *invstd = sv[3];
  lt_dtype dt = x->dtype;
  if (need[0] && ltO_empty_as(ctx, &dx, x, dt, x->ndim, x->size)) goto fail;
  if (need[1] && ltO_empty_as(ctx, &dw, x, dt, w->ndim, w->size)) goto fail;
  if (need[2] && ltO_empty_as(ctx, &db, x, dt, 1, &x->size[1])) goto fail;
  if (ltK_kernels(x)->batch_norm_backward(ctx, dx, dw, db, x, w, dy, mean, invstd, ex->training))
    goto fail;
  lt_release(dy);
  norm_bwd_out(self, grad_in, dx, dw, db);
  return 0;
fail:
  lt_release(dy);
  lt_release(dx);
  lt_release(dw);
  lt_release(db);
  return -1;
}

static const ltG_node_type batch_norm_type = {"NativeBatchNormBackward0", batch_norm_backward,
                                             NULL};

int lt_batch_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *running_mean,
                  lt_tensor *running_var, lt_tensor *weight, lt_tensor *bias, bool training,
                  double momentum, double eps) {
  const char *op = "batch_norm";
  char bx[256], bt[256];
  if (check_float(ctx, op, x)) return -1;
  if (x->ndim < 2)
    return ltB_fail(ctx, "%s: expected an input of at least 2 dimensions (N, C, ...), got input "
                    "of shape %s", op, LT_SHAPE(x, bx));
  int64_t N = x->size[0], C = x->size[1], L = 1;
  for (int i = 2; i < x->ndim; i++) L *= x->size[i];
  if (check_param(ctx, op, "weight", weight, x, C) || check_param(ctx, op, "bias", bias, x, C) ||
      check_param(ctx, op, "running_mean", running_mean, x, C) ||
      check_param(ctx, op, "running_var", running_var, x, C))
    return -1;
  lt_tensor *rs[2] = {running_mean, running_var};
  for (int i = 0; i < 2; i++)
    if (rs[i] && rs[i]->ndim != 1)
      return ltB_fail(ctx, "%s: expected %s to be 1-d with %lld elements, got shape %s", op,
                      i ? "running_var" : "running_mean", (long long)C, LT_SHAPE(rs[i], bt));
  if (!running_mean != !running_var)
    return ltB_fail(ctx, "%s: running_mean and running_var must be given together", op);
  if (!training && !running_mean)
    return ltB_fail(ctx, "%s: running_mean and running_var are required when training is "
                    "false", op);
  if (training && N * L == 1)
    return ltB_fail(ctx, "%s: expected more than 1 value per channel when training, got input "
                    "of shape %s", op, LT_SHAPE(x, bx));
  if (!(eps >= 0)) return ltB_fail(ctx, "%s: eps must be non-negative, got %g", op, eps);
  if (training && running_mean)
    for (int i = 0; i < 2; i++)
      if (ltB_check_inplace(ctx, op, rs[i])) return -1;

  lt_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *mean = NULL, *invstd = NULL;
  if (lt_contiguous(ctx, &xc, x) || contig_opt(ctx, &wc, weight) || contig_opt(ctx, &bc, bias) ||
      ltO_empty_as(ctx, &y, x, x->dtype, x->ndim, x->size) || new_f64(ctx, &mean, x, C) ||
      new_f64(ctx, &invstd, x, C))
    goto fail;
  ltK_kernels(x)->batch_norm(ctx, y, mean, invstd, xc, wc, bc, running_mean, running_var,
                             training, momentum, eps);
  if (training && running_mean) {
    ltB_bump_version(running_mean);
    ltB_bump_version(running_var);
  }
  lt_tensor *ins[3] = {x, weight, bias};
  lt_node *node;
  if (ltG_record(ctx, &batch_norm_type, 3, ins, 1, &y, sizeof(bn_extra), 4, &node)) goto fail;
  if (node) {
    bn_extra *ex = node->extra;
    ex->training = training;
    ex->eps = eps;
    if (ltG_save(node, 0, xc, false) || ltG_save(node, 1, wc, false) ||
        ltG_save(node, 2, mean, false) || ltG_save(node, 3, invstd, false)) {
      ltB_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(invstd);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(invstd);
  lt_release(y);
  return -1;
}

/* ============================================================ row norms
** layer_norm and rms_norm on rows of D; group_norm on (n, group) blocks of D = Cg*L values
** (ltK_norm_geom). */

typedef struct row_extra {
  ltK_norm_geom g;
  int wdim;
  int64_t wsize[LT_MAX_DIMS];   /* shape of weight/bias */
} row_extra;

/* saved: 0 x (contiguous), 1 weight, 2 mean, 3 rstd */
static int row_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                        lt_tensor **grad_in) {
  row_extra *ex = self->extra;
  if (!grad_out[0]) return 0;
  lt_tensor *sv[4], *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  bool need[3];
  if (norm_bwd_begin(ctx, self, grad_out, sv, &dy, need)) return -1;
  lt_tensor *x = sv[0], *w = sv[1], *mean = sv[2], *rstd = sv[3];
  lt_dtype dt = x->dtype;
  if ((need[0] && ltO_empty_as(ctx, &dx, x, dt, x->ndim, x->size)) ||
      (need[1] && ltO_empty_as(ctx, &dw, x, dt, ex->wdim, ex->wsize)) ||
      (need[2] && ltO_empty_as(ctx, &db, x, dt, ex->wdim, ex->wsize)))
    goto fail;
  if (ltK_kernels(x)->row_norm_backward(ctx, &ex->g, dx, dw, db, x, w, dy, mean, rstd)) goto fail;
  lt_release(dy);
  norm_bwd_out(self, grad_in, dx, dw, db);
  return 0;
fail:
  lt_release(dy);
  lt_release(dx);
  lt_release(dw);
  lt_release(db);
  return -1;
}

static const ltG_node_type layer_norm_type = {"NativeLayerNormBackward0", row_backward, NULL};
static const ltG_node_type group_norm_type = {"NativeGroupNormBackward0", row_backward, NULL};
static const ltG_node_type rms_norm_type = {"RmsNormBackward0", row_backward, NULL};

/* Runs a row norm of the geometry in ex0 and records the node. */
static int row_norm(lt_ctx *ctx, const char *op, const ltG_node_type *type, row_extra *ex0,
                    lt_tensor **out, lt_tensor *x, lt_tensor *weight, lt_tensor *bias) {
  if ((weight && ltD_check_devices(ctx, op, x, weight)) ||
      (bias && ltD_check_devices(ctx, op, x, bias)))
    return -1;
  lt_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL, *mean = NULL, *rstd = NULL;
  if (lt_contiguous(ctx, &xc, x) || contig_opt(ctx, &wc, weight) || contig_opt(ctx, &bc, bias) ||
      ltO_empty_as(ctx, &y, x, x->dtype, x->ndim, x->size) || new_f64(ctx, &mean, x, ex0->g.R) ||
      new_f64(ctx, &rstd, x, ex0->g.R))
    goto fail;
  ltK_kernels(x)->row_norm(ctx, &ex0->g, y, mean, rstd, xc, wc, bc);
  lt_tensor *ins[3] = {x, weight, bias};
  lt_node *node;
  if (ltG_record(ctx, type, ex0->g.kind == LT_NORM_RMS ? 2 : 3, ins, 1, &y, sizeof(row_extra), 4,
                 &node))
    goto fail;
  if (node) {
    *(row_extra *)node->extra = *ex0;
    if (ltG_save(node, 0, xc, false) || ltG_save(node, 1, wc, false) ||
        ltG_save(node, 2, mean, false) || ltG_save(node, 3, rstd, false)) {
      ltB_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(rstd);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(mean);
  lt_release(rstd);
  lt_release(y);
  return -1;
}

/* Checks normalized_shape against x's trailing dims and weight/bias shapes; fills R, D. */
static int trailing_setup(lt_ctx *ctx, const char *op, lt_tensor *x, int nd,
                          const int64_t *nshape, lt_tensor *w, lt_tensor *b, row_extra *ex) {
  char bx[256], bn[256], bt[256];
  if (check_float(ctx, op, x)) return -1;
  if (nd < 1 || nd > LT_MAX_DIMS)
    return ltB_fail(ctx, "%s: expected normalized_shape to be at least 1-dimensional, i.e., "
                    "containing at least one element", op);
  bool ok = x->ndim >= nd;
  for (int i = 0; ok && i < nd; i++) ok = x->size[x->ndim - nd + i] == nshape[i];
  if (!ok)
    return ltB_fail(ctx, "%s: given normalized_shape=%s, expected input with shape [*, %s, but "
                    "got input of shape %s", op, ltB_sizes_str(nd, nshape, bn, sizeof bn),
                    ltB_sizes_str(nd, nshape, bt, sizeof bt) + 1, LT_SHAPE(x, bx));
  lt_tensor *ps[2] = {w, b};
  for (int i = 0; i < 2; i++) {
    lt_tensor *t = ps[i];
    if (!t) continue;
    if (t->dtype != x->dtype)
      return ltB_fail(ctx, "%s: %s has dtype %s but input has dtype %s", op,
                      i ? "bias" : "weight", lt_dtype_name(t->dtype), lt_dtype_name(x->dtype));
    bool same = t->ndim == nd;
    for (int k = 0; same && k < nd; k++) same = t->size[k] == nshape[k];
    if (!same)
      return ltB_fail(ctx, "%s: expected %s of shape %s (normalized_shape), got %s", op,
                      i ? "bias" : "weight", ltB_sizes_str(nd, nshape, bn, sizeof bn),
                      LT_SHAPE(t, bt));
  }
  memset(ex, 0, sizeof *ex);
  int64_t D = ltB_shape_numel(nd, nshape);
  ex->g = (ltK_norm_geom){
      .D = D,
      .R = D ? lt_numel(x) / D : ltB_shape_numel(x->ndim - nd, x->size),
      .G = 1, .Cg = 1, .L = 1,
  };
  ex->wdim = nd;
  memcpy(ex->wsize, nshape, (size_t)nd * sizeof(int64_t));
  return 0;
}

int lt_layer_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int nd, const int64_t *nshape,
                  lt_tensor *weight, lt_tensor *bias, double eps) {
  row_extra ex;
  if (trailing_setup(ctx, "layer_norm", x, nd, nshape, weight, bias, &ex)) return -1;
  if (!(eps >= 0)) return ltB_fail(ctx, "layer_norm: eps must be non-negative, got %g", eps);
  ex.g.kind = LT_NORM_LAYER;
  ex.g.eps = eps;
  return row_norm(ctx, "layer_norm", &layer_norm_type, &ex, out, x, weight, bias);
}

int lt_rms_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int nd, const int64_t *nshape,
                lt_tensor *weight, double eps) {
  row_extra ex;
  if (trailing_setup(ctx, "rms_norm", x, nd, nshape, weight, NULL, &ex)) return -1;
  if (eps < 0) eps = x->dtype == LT_FLOAT32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
  ex.g.kind = LT_NORM_RMS;
  ex.g.eps = eps;
  return row_norm(ctx, "rms_norm", &rms_norm_type, &ex, out, x, weight, NULL);
}

int lt_group_norm(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int64_t num_groups,
                  lt_tensor *weight, lt_tensor *bias, double eps) {
  const char *op = "group_norm";
  char bx[256];
  if (check_float(ctx, op, x)) return -1;
  if (x->ndim < 2)
    return ltB_fail(ctx, "%s: expected an input of at least 2 dimensions (N, C, ...), got input "
                    "of shape %s", op, LT_SHAPE(x, bx));
  int64_t N = x->size[0], C = x->size[1], L = 1;
  for (int i = 2; i < x->ndim; i++) L *= x->size[i];
  if (num_groups < 1 || C % num_groups != 0)
    return ltB_fail(ctx, "%s: expected number of channels in input to be divisible by "
                    "num_groups, but got input of shape %s and num_groups=%lld", op,
                    LT_SHAPE(x, bx), (long long)num_groups);
  if (check_param(ctx, op, "weight", weight, x, C) || check_param(ctx, op, "bias", bias, x, C))
    return -1;
  if (!(eps >= 0)) return ltB_fail(ctx, "%s: eps must be non-negative, got %g", op, eps);
  row_extra ex;
  memset(&ex, 0, sizeof ex);
  ex.g = (ltK_norm_geom){
      .kind = LT_NORM_GROUP,
      .R = N * num_groups,
      .D = C / num_groups * L,
      .G = num_groups, .Cg = C / num_groups, .L = L,
      .eps = eps,
  };
  ex.wdim = 1;
  ex.wsize[0] = C;
  if (weight) {
    ex.wdim = weight->ndim;
    memcpy(ex.wsize, weight->size, (size_t)weight->ndim * sizeof(int64_t));
  }
  return row_norm(ctx, op, &group_norm_type, &ex, out, x, weight, bias);
}
