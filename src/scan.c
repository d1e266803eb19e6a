/*
** scan.c -- the op layer of cumsum, the running sum along one dim (the device's `cumsum`
** kernel, cpu/scan.c, computes it); integer and bool inputs give int64.
*/
#include <stdint.h>

#include "reduce.h"

static int cumsum_rows(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int d, bool reverse) {
  lt_dtype odt = lt_dtype_is_float(a->dtype) ? a->dtype : LT_INT64;
  lt_tensor *y;
  if (ltO_empty_as(ctx, &y, a, odt, a->ndim, a->size)) return -1;
  ltK_kernels(a)->cumsum(ctx, y, a, d, reverse);
  *out = y;
  return 0;
}

/* The gradient of a running sum is the running sum of the gradient from the end. */
static int cumsum_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                           lt_tensor **gin) {
  const ltO_dim_extra *e = self->extra;
  if (!gout[0]) return 0;
  return cumsum_rows(ctx, &gin[0], gout[0], e->dim, true);
}

static const ltG_node_type cumsum_type = {"CumsumBackward0", cumsum_backward, NULL};

int lt_cumsum(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, int dim) {
  int d;
  if (ltB_wrap_dim(ctx, "cumsum", dim, a->ndim, &d)) return -1;
  lt_tensor *y;
  if (cumsum_rows(ctx, &y, a, d, false)) return -1;
  lt_node *node;
  if (ltG_record(ctx, &cumsum_type, 1, &a, 1, &y, sizeof(ltO_dim_extra), 0, &node)) {
    lt_release(y);
    return -1;
  }
  if (node) ((ltO_dim_extra *)node->extra)->dim = d;
  *out = y;
  return 0;
}
