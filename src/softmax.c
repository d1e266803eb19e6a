/*
** softmax.c -- the op layer of softmax and log_softmax along one dim (the device's `softmax`
** and `softmax_backward` kernels, cpu/softmax.c, compute them).
*/
#include <stdint.h>

#include "reduce.h"

/* The cpu column kernel reads float32 data whose dim is not innermost as [outer, n, inner],
** and the short-row kernel rows of fewer than 16 elements 16 at a time; both need it
** contiguous (the gradient of a sum arrives expanded). Other layouts go row by row and may be
** strided. */
static bool wants_dense(const lt_tensor *t, int dim) {
  return t->dtype == LT_FLOAT32 && t->ndim > 0 &&
         (dim < t->ndim - 1 || (t->size[dim] >= 2 && t->size[dim] < 16));
}

static int softmax_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                            lt_tensor **gin) {
  const ltO_dim_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *y, *g = NULL, *gi;
  if (ltG_saved_get(ctx, self, 0, &y)) return -1;
  if (lt_to_dtype(ctx, &g, gout[0], y->dtype)) return -1;
  if (ltO_empty_as(ctx, &gi, y, y->dtype, y->ndim, y->size)) {
    lt_release(g);
    return -1;
  }
  if (wants_dense(y, e->dim) && lt_is_contiguous(y)) {
    lt_tensor *gc;
    if (lt_contiguous(ctx, &gc, g)) {
      lt_release(g);
      lt_release(gi);
      return -1;
    }
    lt_release(g);
    g = gc;
  }
  ltK_kernels(y)->softmax_backward(ctx, gi, y, g, e->dim, e->log_);
  lt_release(g);
  gin[0] = gi;
  return 0;
}

static const ltG_node_type softmax_type = {"SoftmaxBackward0", softmax_backward, NULL};
static const ltG_node_type log_softmax_type = {"LogSoftmaxBackward0", softmax_backward, NULL};

static int softmax_impl(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim, bool log_) {
  const char *op = log_ ? "log_softmax" : "softmax";
  int d;
  if (ltB_wrap_dim(ctx, op, dim, a->ndim, &d)) return -1;
  if (!lt_dtype_is_float(a->dtype))
    return ltB_fail(ctx, "%s: expected a floating point tensor, got %s", op,
                    lt_dtype_name(a->dtype));
  lt_tensor *y, *x;
  if (ltO_empty_as(ctx, &y, a, a->dtype, a->ndim, a->size)) return -1;
  if (wants_dense(a, d)) {
    if (lt_contiguous(ctx, &x, a)) {
      lt_release(y);
      return -1;
    }
  } else {
    x = lt_retain(a);
  }
  ltK_kernels(a)->softmax(ctx, y, x, d, log_);
  lt_release(x);
  lt_node *node;
  if (ltG_record(ctx, log_ ? &log_softmax_type : &softmax_type, 1, &a, 1, &y,
                 sizeof(ltO_dim_extra), 1, &node)) {
    lt_release(y);
    return -1;
  }
  if (node) {
    ltO_dim_extra *e = node->extra;
    e->dim = d;
    e->log_ = log_;
    if (ltG_save(node, 0, y, true)) {
      lt_release(y);
      return ltO_red_oom(ctx, op);
    }
  }
  *out = y;
  return 0;
}

int lt_softmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim) {
  return softmax_impl(ctx, out, a, dim, false);
}

int lt_log_softmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim) {
  return softmax_impl(ctx, out, a, dim, true);
}
