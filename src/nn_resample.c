/*
** nn_resample.c -- the op layer of one dim's resampling (lt_resample, ResampleBackward0), the
** step interpolate takes per spatial dim: arguments checked here, the device's resample kernels
** (cpu/resample.c) compute the values and the input's gradient.
*/
#include <string.h>

#include "backend.h"

typedef struct rs_extra {
  ltK_resample g;
  int dim, ndim;
  int64_t size[LT_MAX_DIMS];   /* x's */
} rs_extra;

/* saved: 0 i0, 1 i1, 2 w1 (contiguous; i1 and w1 NULL for nearest) */
static int resample_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                             lt_tensor **grad_in) {
  rs_extra *ex = self->extra;
  if (!grad_out[0] || !ltG_needs_input_grad(self, 0)) return 0;
  lt_tensor *i0, *i1, *w1, *gc = NULL, *dx = NULL;
  if (ltG_saved_get(ctx, self, 0, &i0) || ltG_saved_get(ctx, self, 1, &i1) ||
      ltG_saved_get(ctx, self, 2, &w1))
    return -1;
  if (lt_contiguous(ctx, &gc, grad_out[0])) return -1;
  if (ltO_full_as(ctx, &dx, gc, gc->dtype, ex->ndim, ex->size, 0.0)) {
    lt_release(gc);
    return -1;
  }
  ltK_resample g = ex->g;
  g.i0 = i0;
  g.i1 = i1;
  g.w1 = w1;
  ltK_kernels(dx)->resample_backward(ctx, dx, gc, &g);
  lt_release(gc);
  grad_in[0] = dx;
  return 0;
}

static const ltG_node_type resample_type = {"ResampleBackward0", resample_backward, NULL};

/* 0 when t is a 1-d int64 tensor of n positions in [base, base + hi) on x's device */
static int check_positions(lt_ctx *ctx, const char *what, const lt_tensor *x, const lt_tensor *t,
                           int64_t n, int64_t hi, int64_t base) {
  char b[256];
  if (ltD_check_devices(ctx, "resample", x, t)) return -1;
  if (t->dtype != LT_INT64 || t->ndim != 1 || t->size[0] != n)
    return ltB_fail(ctx, "resample: expected %s of dtype int64 and shape [%lld], got %s %s", what,
                    (long long)n, lt_dtype_name(t->dtype), LT_SHAPE(t, b));
  int64_t bad, max;
  if (!ltK_kernels(t)->index_range(ctx, t, base, base + hi, NULL, &bad, &max))
    return ltB_fail(ctx, "resample: %s holds %lld, out of range for a dim of size %lld", what,
                    (long long)bad, (long long)hi);
  return 0;
}

int lt_resample(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int dim, lt_tensor *i0,
                lt_tensor *i1, lt_tensor *w1, int64_t index_base) {
  char b1[256], b2[256];
  if (!x || !i0) return ltB_fail(ctx, "resample: missing input or positions");
  if (!lt_dtype_is_float(x->dtype))
    return ltB_fail(ctx, "resample: expected a float32 or float64 input, got %s",
                    lt_dtype_name(x->dtype));
  if (dim < 0 || dim >= x->ndim)
    return ltB_fail(ctx, "resample: dim %d out of range for an input of shape %s", dim + 1,
                    LT_SHAPE(x, b1));
  if ((i1 == NULL) != (w1 == NULL))
    return ltB_fail(ctx, "resample: i1 and w1 go together (linear) or are both absent (nearest)");
  int64_t n = i0->ndim == 1 ? i0->size[0] : -1, Nin = x->size[dim];
  if (n < 0 || (n > 0 && Nin == 0))
    return ltB_fail(ctx, "resample: expected 1-d positions into a dim of size %lld, got %s",
                    (long long)Nin, LT_SHAPE(i0, b1));
  if (check_positions(ctx, "i0", x, i0, n, Nin, index_base) ||
      (i1 && check_positions(ctx, "i1", x, i1, n, Nin, index_base)))
    return -1;
  lt_tensor *ws[1] = {w1};
  if (w1 && ltG_needs_grad(ctx, 1, ws))
    return ltB_fail(ctx, "resample: w1 takes no gradient (detach it, or interpolate with "
                    "index_select and products)");
  if (w1 && (ltD_check_devices(ctx, "resample", x, w1) || w1->dtype != x->dtype ||
             w1->ndim != 1 || w1->size[0] != n))
    return ltB_fail(ctx, "resample: expected w1 of dtype %s and shape [%lld], got %s %s",
                    lt_dtype_name(x->dtype), (long long)n, lt_dtype_name(w1->dtype),
                    LT_SHAPE(w1, b2));
  ltK_resample g = {.O = 1, .Nin = Nin, .Nout = n, .inner = 1, .base = index_base};
  int64_t size[LT_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) {
    size[d] = d == dim ? n : x->size[d];
    if (d < dim) g.O *= x->size[d];
    if (d > dim) g.inner *= x->size[d];
  }
  lt_tensor *xc = NULL, *c0 = NULL, *c1 = NULL, *cw = NULL, *y = NULL;
  if (lt_contiguous(ctx, &xc, x) || lt_contiguous(ctx, &c0, i0) ||
      (i1 && lt_contiguous(ctx, &c1, i1)) || (w1 && lt_contiguous(ctx, &cw, w1)) ||
      ltO_empty_as(ctx, &y, x, x->dtype, x->ndim, size))
    goto fail;
  g.i0 = c0;
  g.i1 = c1;
  g.w1 = cw;
  if (lt_numel(y) > 0) ltK_kernels(x)->resample(ctx, y, xc, &g);
  lt_node *node;
  if (ltG_record(ctx, &resample_type, 1, &x, 1, &y, sizeof(rs_extra), 3, &node)) goto fail;
  if (node) {
    rs_extra *ex = node->extra;
    ex->g = g;
    ex->g.i0 = ex->g.i1 = ex->g.w1 = NULL;   /* from the saved slots */
    ex->dim = dim;
    ex->ndim = x->ndim;
    memcpy(ex->size, x->size, (size_t)x->ndim * sizeof(int64_t));
    if (ltG_save(node, 0, c0, false) || ltG_save(node, 1, c1, false) ||
        ltG_save(node, 2, cw, false)) {
      ltB_fail(ctx, "resample: out of memory saving tensors for backward");
      goto fail;
    }
  }
  lt_release(xc);
  lt_release(c0);
  lt_release(c1);
  lt_release(cw);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(c0);
  lt_release(c1);
  lt_release(cw);
  lt_release(y);
  return -1;
}
