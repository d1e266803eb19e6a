/*
** nn_misc.c -- the op layer of embedding (EmbeddingBackward0), dropout (MulBackward0, as
** PyTorch's CPU dropout is input * mask) and the class-index losses; their kernels are the
** device's gather/scatter, dropout and class_loss (cpu/index.c, cpu/nn.c).
**
** Shape letters: V rows of the embedding table, D its width, I = number of indices.
*/
#include "backend.h"

/* ============================================================ embedding */

typedef struct emb_extra {
  int64_t V, D, padding_idx, base;
} emb_extra;

/* A 2-d view (rows, cols) with element strides (sr, sc) of t's storage, from t's first element
** plus `skip` elements. */
static int view2(lt_ctx *ctx, const char *op, lt_tensor **out, const lt_tensor *t, int64_t skip,
                 int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  const int64_t size[2] = {rows, cols}, stride[2] = {sr, sc};
  *out = ltB_alias(t, 2, size, stride, t->offset + skip);
  return *out ? 0 : ltB_fail(ctx, "%s: out of memory", op);
}

/* dW = the rows of dy (I, D) summed into the rows their indices name, the padding row zeroed
** (it gets no gradient), through the device's scatter. saved: 0 indices (contiguous). */
static int embedding_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                              lt_tensor **grad_in) {
  emb_extra *ex = self->extra;
  if (!grad_out[0] || !ltG_needs_input_grad(self, 0)) return 0;
  lt_tensor *idx, *dy = NULL, *dw = NULL, *dy2 = NULL, *ix2 = NULL, *pad = NULL;
  if (ltG_saved_get(ctx, self, 0, &idx)) return -1;
  lt_dtype dt = self->out_dtype;
  const int64_t wsize[2] = {ex->V, ex->D}, I = lt_numel(idx), D = ex->D;
  const char *op = "embedding backward";
  if (ltO_dense_as(ctx, &dy, grad_out[0], dt) ||
      ltO_full_as(ctx, &dw, grad_out[0], dt, 2, wsize, 0.0) ||
      view2(ctx, op, &dy2, dy, 0, I, D, D, 1) || view2(ctx, op, &ix2, idx, 0, I, D, 1, 0))
    goto fail;
  ltK_kernels(dw)->scatter(ctx, dw, 0, ix2, dy2, true, ex->base);
  if (ex->padding_idx >= 0) {
    if (view2(ctx, op, &pad, dw, ex->padding_idx * D, 1, D, D, 1)) goto fail;
    ltK_kernels(dw)->fill(ctx, pad, 0.0);
  }
  lt_release(pad);
  lt_release(ix2);
  lt_release(dy2);
  lt_release(dy);
  grad_in[0] = dw;
  return 0;
fail:
  lt_release(ix2);
  lt_release(dy2);
  lt_release(dy);
  lt_release(dw);
  return -1;
}

static const ltG_node_type embedding_type = {"EmbeddingBackward0", embedding_backward, NULL};

/* y[i] = weight[indices[i] - index_base]: the device's gather of weight's rows, the index
** expanded along the embedding dim. */
int lt_embedding(lt_ctx *ctx, lt_tensor **out, lt_tensor *weight, lt_tensor *indices,
                 int64_t padding_idx, int64_t index_base) {
  if (ltD_check_devices(ctx, "embedding", weight, indices)) return -1;
  const char *op = "embedding";
  char bw[256], bi[256];
  if (!lt_dtype_is_float(weight->dtype))
    return ltB_fail(ctx, "%s: expected a float32 or float64 weight, got %s", op,
                    lt_dtype_name(weight->dtype));
  if (weight->ndim != 2)
    return ltB_fail(ctx, "%s: expected a 2-d weight (num_embeddings, embedding_dim), got weight "
                    "of shape %s", op, LT_SHAPE(weight, bw));
  if (indices->dtype != LT_INT64)
    return ltB_fail(ctx, "%s: expected indices of dtype int64, got %s (shape %s)", op,
                    lt_dtype_name(indices->dtype), LT_SHAPE(indices, bi));
  if (indices->ndim + 1 > LT_MAX_DIMS)
    return ltB_fail(ctx, "%s: indices of shape %s have too many dimensions", op,
                    LT_SHAPE(indices, bi));
  int64_t V = weight->size[0], D = weight->size[1];
  if (padding_idx >= V)
    return ltB_fail(ctx, "%s: padding_idx %lld must be within num_embeddings (%lld)", op,
                    (long long)(padding_idx + index_base), (long long)V);
  int64_t bad, max;
  if (!ltK_kernels(indices)->index_range(ctx, indices, index_base, index_base + V, NULL, &bad,
                                         &max))
    return ltB_fail(ctx, "%s: index %lld is out of range for a weight of shape %s (valid "
                    "indices are %lld..%lld)", op, (long long)bad, LT_SHAPE(weight, bw),
                    (long long)index_base, (long long)(V - 1 + index_base));
  lt_tensor *ic = NULL, *y = NULL, *y2 = NULL, *ix2 = NULL;
  int64_t size[LT_MAX_DIMS];
  memcpy(size, indices->size, (size_t)indices->ndim * sizeof(int64_t));
  size[indices->ndim] = D;
  if (lt_contiguous(ctx, &ic, indices) ||
      ltO_empty_as(ctx, &y, weight, weight->dtype, indices->ndim + 1, size))
    goto fail;
  int64_t I = lt_numel(ic);
  if (view2(ctx, op, &y2, y, 0, I, D, D, 1) || view2(ctx, op, &ix2, ic, 0, I, D, 1, 0)) goto fail;
  ltK_kernels(weight)->gather(ctx, y2, weight, 0, ix2, index_base);
  lt_node *node;
  if (ltG_record(ctx, &embedding_type, 1, &weight, 1, &y, sizeof(emb_extra), 1, &node)) goto fail;
  if (node) {
    *(emb_extra *)node->extra = (emb_extra){
        .V = V, .D = D, .padding_idx = padding_idx < 0 ? -1 : padding_idx, .base = index_base};
    if (ltG_save(node, 0, ic, false)) {
      ltB_fail(ctx, "%s: out of memory saving indices for backward", op);
      goto fail;
    }
  }
  lt_release(ix2);
  lt_release(y2);
  lt_release(ic);
  *out = y;
  return 0;
fail:
  lt_release(ix2);
  lt_release(y2);
  lt_release(ic);
  lt_release(y);
  return -1;
}

/* ============================================================ dropout */

/* The gradient is grad * mask. saved: 0 mask (0 or 1/(1-p), contiguous, x's dtype and shape) */
static int dropout_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                            lt_tensor **grad_in) {
  if (!grad_out[0] || !ltG_needs_input_grad(self, 0)) return 0;
  lt_tensor *mask, *dy = NULL;
  if (ltG_saved_get(ctx, self, 0, &mask)) return -1;
  if (ltO_dense_as(ctx, &dy, grad_out[0], mask->dtype)) return -1;
  int rc = lt_binary(ctx, &grad_in[0], LT_MUL, dy, mask);
  lt_release(dy);
  return rc;
}

static const ltG_node_type dropout_type = {"MulBackward0", dropout_backward, NULL};

int lt_dropout(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, double p, bool training,
               lt_generator *gen) {
  const char *op = "dropout";
  if (!(p >= 0 && p <= 1))
    return ltB_fail(ctx, "%s: dropout probability has to be between 0 and 1, but got %g", op, p);
  if (!lt_dtype_is_float(x->dtype))
    return ltB_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                    lt_dtype_name(x->dtype));
  if (!training || p == 0 || lt_numel(x) == 0) {
    *out = lt_retain(x);
    return 0;
  }
  lt_tensor *xc = NULL, *mask = NULL, *y = NULL;
  if (lt_contiguous(ctx, &xc, x) || ltO_empty_as(ctx, &mask, x, x->dtype, x->ndim, x->size) ||
      ltO_empty_as(ctx, &y, x, x->dtype, x->ndim, x->size))
    goto fail;
  ltK_kernels(x)->dropout(y, mask, xc, p, gen ? gen : ctx->gen);
  lt_node *node;
  if (ltG_record(ctx, &dropout_type, 1, &x, 1, &y, 0, 1, &node)) goto fail;
  if (node && ltG_save(node, 0, mask, false)) {
    ltB_fail(ctx, "%s: out of memory saving the mask for backward", op);
    goto fail;
  }
  lt_release(xc);
  lt_release(mask);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(mask);
  lt_release(y);
  return -1;
}

/* ============================================================ cross_entropy, nll_loss
** The op layer of the class-index losses: shapes and targets checked, the device's class_loss
** kernel (cpu/nn.c, which has the formulas) computes the loss and, backward, its gradient. */

typedef struct ce_extra {
  ltK_class_loss a;
  int xdim;
  int64_t xsize[LT_MAX_DIMS];
} ce_extra;

/* saved: 0 input (contiguous), 1 target (contiguous), 2 weight, 3 lse (f64, rows; logits) */
static int ce_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                       lt_tensor **grad_in) {
  ce_extra *ex = self->extra;
  if (!grad_out[0] || !ltG_needs_input_grad(self, 0)) return 0;
  lt_tensor *x, *tg, *w, *lse = NULL, *gc = NULL, *dx = NULL;
  if (ltG_saved_get(ctx, self, 0, &x) || ltG_saved_get(ctx, self, 1, &tg) ||
      ltG_saved_get(ctx, self, 2, &w) || (ex->a.logits && ltG_saved_get(ctx, self, 3, &lse)))
    return -1;
  if (lt_contiguous(ctx, &gc, grad_out[0])) return -1;
  if (ltO_empty_as(ctx, &dx, x, x->dtype, ex->xdim, ex->xsize)) {
    lt_release(gc);
    return -1;
  }
  ltK_kernels(x)->class_loss_backward(ctx, dx, gc, x, tg, w, lse, &ex->a);
  lt_release(gc);
  grad_in[0] = dx;
  return 0;
}

static const ltG_node_type ce_type = {"NllLossBackward0", ce_backward, NULL};

static int class_loss(lt_ctx *ctx, const char *op, bool logits, lt_tensor **out, lt_tensor *x,
                      lt_tensor *target, lt_tensor *weight, int64_t ignore_index,
                      enum lt_reduction reduction, double ls, int64_t base) {
  if (ltD_check_devices(ctx, op, x, target) || (weight && ltD_check_devices(ctx, op, x, weight)))
    return -1;
  char bx[256], bt[256], be[256];
  if (!lt_dtype_is_float(x->dtype))
    return ltB_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                    lt_dtype_name(x->dtype));
  if (x->ndim < 1)
    return ltB_fail(ctx, "%s: expected an input of at least 1 dimension, got a 0-d tensor", op);
  if (target->dtype != LT_INT64)
    return ltB_fail(ctx, "%s: expected a target of dtype int64 (class indices), got %s", op,
                    lt_dtype_name(target->dtype));
  if (reduction != LT_REDUCTION_NONE && reduction != LT_REDUCTION_MEAN &&
      reduction != LT_REDUCTION_SUM)
    return ltB_fail(ctx, "%s: unknown reduction %d", op, (int)reduction);
  if (!(ls >= 0 && ls <= 1))
    return ltB_fail(ctx, "%s: label_smoothing must be between 0.0 and 1.0. Got: %g", op, ls);
  int64_t N, C, S = 1, esize[LT_MAX_DIMS];
  int ed = 0;
  if (x->ndim == 1) {
    N = 1;
    C = x->size[0];
  } else {
    N = x->size[0];
    C = x->size[1];
    esize[ed++] = N;
    for (int i = 2; i < x->ndim; i++) {
      S *= x->size[i];
      esize[ed++] = x->size[i];
    }
  }
  bool ok = target->ndim == ed;
  for (int i = 0; ok && i < ed; i++) ok = target->size[i] == esize[i];
  if (!ok)
    return ltB_fail(ctx, "%s: expected target of shape %s (class indices) for input of shape %s, "
                    "got target of shape %s", op, ltB_sizes_str(ed, esize, be, sizeof be),
                    LT_SHAPE(x, bx), LT_SHAPE(target, bt));
  if (weight && (weight->dtype != x->dtype || weight->ndim != 1 || weight->size[0] != C))
    return ltB_fail(ctx, "%s: weight tensor should be defined either for all %lld classes or no "
                    "classes but got weight tensor of shape %s (%s)", op, (long long)C,
                    LT_SHAPE(weight, bt), lt_dtype_name(weight->dtype));
  int64_t bad, max;
  if (!ltK_kernels(target)->index_range(ctx, target, base, base + C, &ignore_index, &bad, &max))
    return ltB_fail(ctx, "%s: target %lld is out of bounds for %lld classes (class indices are "
                    "%lld..%lld)", op, (long long)bad, (long long)C, (long long)base,
                    (long long)(C - 1 + base));
  ltK_class_loss a = {.N = N, .C = C, .S = S, .base = base, .ignore = ignore_index,
                     .reduction = reduction, .ls = logits ? ls : 0, .logits = logits};
  const int64_t R = N * S;
  lt_tensor *xc = NULL, *tc = NULL, *wc = NULL, *lse = NULL, *y = NULL;
  if (lt_contiguous(ctx, &tc, target) || lt_contiguous(ctx, &xc, x) ||
      (weight && lt_contiguous(ctx, &wc, weight)) ||
      (logits && ltO_empty_as(ctx, &lse, x, LT_FLOAT64, 1, &R)) ||
      ltO_empty_as(ctx, &y, x, x->dtype, reduction == LT_REDUCTION_NONE ? ed : 0, esize) ||
      ltK_kernels(x)->class_loss(ctx, y, lse, xc, tc, wc, &a))
    goto fail;
  lt_node *node;
  if (ltG_record(ctx, &ce_type, 1, &x, 1, &y, sizeof(ce_extra), 4, &node)) goto fail;
  if (node) {
    ce_extra *ex = node->extra;
    ex->a = a;
    ex->xdim = x->ndim;
    memcpy(ex->xsize, x->size, (size_t)x->ndim * sizeof(int64_t));
    if (ltG_save(node, 0, xc, false) || ltG_save(node, 1, tc, false) ||
        ltG_save(node, 2, wc, false) || ltG_save(node, 3, lse, false)) {
      ltB_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  lt_release(xc);
  lt_release(tc);
  lt_release(wc);
  lt_release(lse);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(tc);
  lt_release(wc);
  lt_release(lse);
  lt_release(y);
  return -1;
}

int lt_cross_entropy(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *target,
                     lt_tensor *weight, int64_t ignore_index, enum lt_reduction reduction,
                     double label_smoothing, int64_t index_base) {
  return class_loss(ctx, "cross_entropy", true, out, input, target, weight, ignore_index,
                    reduction, label_smoothing, index_base);
}

int lt_nll_loss(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *target,
                lt_tensor *weight, int64_t ignore_index, enum lt_reduction reduction,
                int64_t index_base) {
  return class_loss(ctx, "nll_loss", false, out, input, target, weight, ignore_index, reduction,
                    0.0, index_base);
}
