/*
** nn_regress.c -- the op layer of the elementwise losses (mse_loss, l1_loss, smooth_l1_loss,
** huber_loss, binary_cross_entropy_with_logits): arguments checked here, the device's
** regression_loss kernels (cpu/regress.c, which has the formulas) compute the loss and,
** backward, the gradients of input and target.
*/
#include <math.h>

#include "backend.h"

typedef struct reg_extra {
  int kind;
  enum lt_reduction reduction;
  double p;
} reg_extra;

static const char *const reg_names[] = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                                         "binary_cross_entropy_with_logits"};

/* saved: 0 input, 1 target (contiguous copies) */
static int reg_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                        lt_tensor **grad_in) {
  reg_extra *ex = self->extra;
  if (!grad_out[0]) return 0;
  lt_tensor *a, *b, *gc = NULL;
  if (ltG_saved_get(ctx, self, 0, &a) || ltG_saved_get(ctx, self, 1, &b)) return -1;
  if (lt_contiguous(ctx, &gc, grad_out[0])) return -1;
  int64_t n = lt_numel(a);
  double scale = ex->reduction == LT_REDUCTION_MEAN ? 1.0 / (double)n : 1.0;
  for (int side = 0; side < 2; side++) {
    if (!ltG_needs_input_grad(self, side)) continue;
    if (ltO_empty_as(ctx, &grad_in[side], a, a->dtype, a->ndim, a->size)) {
      lt_release(gc);
      return -1;
    }
    ltK_kernels(a)->regression_loss_backward(ctx, ex->kind, side, grad_in[side], gc, scale, a,
                                             b, ex->p);
  }
  lt_release(gc);
  return 0;
}

static const ltG_node_type reg_types[] = {
    {"MseLossBackward0", reg_backward, NULL},
    {"L1LossBackward0", reg_backward, NULL},
    {"SmoothL1LossBackward0", reg_backward, NULL},
    {"HuberLossBackward0", reg_backward, NULL},
    {"BinaryCrossEntropyWithLogitsBackward0", reg_backward, NULL},
};

int lt_regression_loss(lt_ctx *ctx, lt_tensor **out, enum lt_regression kind, lt_tensor *input,
                       lt_tensor *target, enum lt_reduction reduction, double p) {
  if ((unsigned)kind > LT_BCE_LOGITS) return ltB_fail(ctx, "regression_loss: unknown kind %d", (int)kind);
  const char *op = reg_names[kind];
  char ba[256], bb[256];
  if (!input || !target) return ltB_fail(ctx, "%s: missing input or target", op);
  if (ltD_check_devices(ctx, op, input, target)) return -1;
  if (!lt_dtype_is_float(input->dtype) || target->dtype != input->dtype)
    return ltB_fail(ctx, "%s: expected input and target of one float dtype, got %s and %s", op,
                    lt_dtype_name(input->dtype), lt_dtype_name(target->dtype));
  if (!ltB_same_shape(input, target))
    return ltB_fail(ctx, "%s: expected target of the input's shape %s, got %s", op,
                    LT_SHAPE(input, ba), LT_SHAPE(target, bb));
  if (reduction != LT_REDUCTION_NONE && reduction != LT_REDUCTION_MEAN &&
      reduction != LT_REDUCTION_SUM)
    return ltB_fail(ctx, "%s: unknown reduction %d", op, (int)reduction);
  if ((kind == LT_SMOOTH_L1 || kind == LT_HUBER) && !(p > 0))
    return ltB_fail(ctx, "%s: %s must be positive, got %g", op,
                    kind == LT_HUBER ? "delta" : "beta", p);
  lt_tensor *a = NULL, *b = NULL, *y = NULL;
  bool none = reduction == LT_REDUCTION_NONE;
  double sum = 0;
  if (lt_contiguous(ctx, &a, input) || lt_contiguous(ctx, &b, target) ||
      ltO_empty_as(ctx, &y, input, input->dtype, none ? input->ndim : 0, input->size) ||
      ltK_kernels(a)->regression_loss(ctx, kind, none ? y : NULL, &sum, a, b, p))
    goto fail;
  if (!none) {
    int64_t n = lt_numel(a);
    double v = reduction == LT_REDUCTION_SUM ? sum : n ? sum / (double)n : NAN;
    ltK_kernels(y)->fill(ctx, y, v);
  }
  lt_tensor *ins[2] = {input, target};
  lt_node *node;
  if (ltG_record(ctx, &reg_types[kind], 2, ins, 1, &y, sizeof(reg_extra), 2, &node)) goto fail;
  if (node) {
    *(reg_extra *)node->extra = (reg_extra){kind, reduction, p};
    if (ltG_save(node, 0, a, false) || ltG_save(node, 1, b, false)) {
      ltB_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  lt_release(a);
  lt_release(b);
  *out = y;
  return 0;
fail:
  lt_release(a);
  lt_release(b);
  lt_release(y);
  return -1;
}
