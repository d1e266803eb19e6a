/*
** nn_misc.c -- embedding (EmbeddingBackward0) and dropout (MulBackward0, as PyTorch's CPU
** dropout is input * mask).
**
** Shape letters: V rows of the embedding table, D its width, I = number of indices.
*/
#include <math.h>
#include <stdlib.h>

#include "core.h"
#include "random.h"

/* ============================================================ embedding */

typedef struct emb_extra {
  int64_t V, D, padding_idx, base;
  int wdim;
  int64_t wsize[2];
} emb_extra;

typedef struct emb_job {
  const int64_t *idx;
  int64_t base, D;
  size_t es;
  const char *w;
  char *y;
} emb_job;

static void emb_rows(int64_t b, int64_t e, void *ud) {
  const emb_job *j = ud;
  size_t row = (size_t)j->D * j->es;
  for (int64_t i = b; i < e; i++)
    memcpy(j->y + (size_t)i * row, j->w + (size_t)(j->idx[i] - j->base) * row, row);
}

/* saved: 0 indices (contiguous) */
static int embedding_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                              lt_tensor **grad_in) {
  emb_extra *ex = self->extra;
  if (!grad_out[0] || !lt_needs_input_grad(self, 0)) return 0;
  lt_tensor *idx, *dy = NULL, *dw = NULL, *go = grad_out[0];
  if (lt_saved_get(ctx, self, 0, &idx)) return -1;
  lt_dtype dt = self->out_dtype;
  if (go->dtype != dt) {
    if (lt_to_dtype(ctx, &go, grad_out[0], dt)) return -1;
  } else {
    lt_retain(go);
  }
  int rc = lt_contiguous(ctx, &dy, go);
  lt_release(go);
  if (rc) return -1;
  if (lt_empty(ctx, &dw, dt, ex->wdim, ex->wsize)) {
    lt_release(dy);
    return -1;
  }
  int64_t I = lt_numel(idx), D = ex->D;
  const int64_t *ix = lt_data(idx);
  memset(lt_data(dw), 0, (size_t)(ex->V * D) * lt_dtype_size(dt));
  for (int64_t i = 0; i < I; i++) {
    int64_t r = ix[i] - ex->base;
    if (r == ex->padding_idx) continue;
    if (dt == LT_FLOAT32) {
      float *d = (float *)lt_data(dw) + r * D;
      const float *s = (const float *)lt_data(dy) + i * D;
      for (int64_t k = 0; k < D; k++) d[k] += s[k];
    } else {
      double *d = (double *)lt_data(dw) + r * D;
      const double *s = (const double *)lt_data(dy) + i * D;
      for (int64_t k = 0; k < D; k++) d[k] += s[k];
    }
  }
  lt_release(dy);
  grad_in[0] = dw;
  return 0;
}

static const lt_node_type embedding_type = {"EmbeddingBackward0", embedding_backward, NULL};

int lt_embedding(lt_ctx *ctx, lt_tensor **out, lt_tensor *weight, lt_tensor *indices,
                 int64_t padding_idx, int64_t index_base) {
  const char *op = "embedding";
  char bw[256], bi[256];
  if (!lt_dtype_is_float(weight->dtype))
    return lt_fail(ctx, "%s: expected a float32 or float64 weight, got %s", op,
                   lt_dtype_name(weight->dtype));
  if (weight->ndim != 2)
    return lt_fail(ctx, "%s: expected a 2-d weight (num_embeddings, embedding_dim), got weight "
                   "of shape %s", op, LT_SHAPE(weight, bw));
  if (indices->dtype != LT_INT64)
    return lt_fail(ctx, "%s: expected indices of dtype int64, got %s (shape %s)", op,
                   lt_dtype_name(indices->dtype), LT_SHAPE(indices, bi));
  if (indices->ndim + 1 > LT_MAX_DIMS)
    return lt_fail(ctx, "%s: indices of shape %s have too many dimensions", op,
                   LT_SHAPE(indices, bi));
  int64_t V = weight->size[0], D = weight->size[1];
  if (padding_idx >= V)
    return lt_fail(ctx, "%s: padding_idx %lld must be within num_embeddings (%lld)", op,
                   (long long)(padding_idx + index_base), (long long)V);
  lt_tensor *ic = NULL, *wc = NULL, *y = NULL;
  if (lt_contiguous(ctx, &ic, indices)) return -1;
  int64_t I = lt_numel(ic);
  const int64_t *ix = lt_data(ic);
  for (int64_t i = 0; i < I; i++) {
    if (ix[i] < index_base || ix[i] - index_base >= V) {
      lt_fail(ctx, "%s: index %lld is out of range for a weight of shape %s (valid indices are "
              "%lld..%lld)", op, (long long)ix[i], LT_SHAPE(weight, bw), (long long)index_base,
              (long long)(V - 1 + index_base));
      lt_release(ic);
      return -1;
    }
  }
  int64_t size[LT_MAX_DIMS];
  memcpy(size, indices->size, (size_t)indices->ndim * sizeof(int64_t));
  size[indices->ndim] = D;
  if (lt_contiguous(ctx, &wc, weight) || lt_empty(ctx, &y, weight->dtype, indices->ndim + 1, size))
    goto fail;
  emb_job j = {ix, index_base, D, lt_dtype_size(weight->dtype), lt_data(wc), lt_data(y)};
  lt_parallel_for(ctx, I, (16384 + D) / (D + 1), emb_rows, &j);
  lt_node *node;
  if (lt_record(ctx, &embedding_type, 1, &weight, 1, &y, sizeof(emb_extra), 1, &node)) goto fail;
  if (node) {
    emb_extra *ex = node->extra;
    ex->V = V;
    ex->D = D;
    ex->padding_idx = padding_idx < 0 ? -1 : padding_idx;
    ex->base = index_base;
    ex->wdim = 2;
    ex->wsize[0] = V;
    ex->wsize[1] = D;
    if (lt_save(node, 0, ic, false)) {
      lt_fail(ctx, "%s: out of memory saving indices for backward", op);
      goto fail;
    }
  }
  lt_release(ic);
  lt_release(wc);
  *out = y;
  return 0;
fail:
  lt_release(ic);
  lt_release(wc);
  lt_release(y);
  return -1;
}

/* ============================================================ dropout */

/* saved: 0 mask (0 or 1/(1-p), contiguous, x's dtype and shape) */
static int dropout_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                            lt_tensor **grad_in) {
  if (!grad_out[0] || !lt_needs_input_grad(self, 0)) return 0;
  lt_tensor *mask, *dy = NULL, *dx = NULL, *go = grad_out[0];
  if (lt_saved_get(ctx, self, 0, &mask)) return -1;
  lt_dtype dt = mask->dtype;
  if (go->dtype != dt) {
    if (lt_to_dtype(ctx, &go, grad_out[0], dt)) return -1;
  } else {
    lt_retain(go);
  }
  int rc = lt_contiguous(ctx, &dy, go);
  lt_release(go);
  if (rc) return -1;
  if (lt_empty(ctx, &dx, dt, mask->ndim, mask->size)) {
    lt_release(dy);
    return -1;
  }
  int64_t n = lt_numel(mask);
  if (dt == LT_FLOAT32) {
    const float *m = lt_data(mask), *g = lt_data(dy);
    float *d = lt_data(dx);
    for (int64_t i = 0; i < n; i++) d[i] = g[i] * m[i];
  } else {
    const double *m = lt_data(mask), *g = lt_data(dy);
    double *d = lt_data(dx);
    for (int64_t i = 0; i < n; i++) d[i] = g[i] * m[i];
  }
  lt_release(dy);
  grad_in[0] = dx;
  return 0;
}

static const lt_node_type dropout_type = {"MulBackward0", dropout_backward, NULL};

int lt_dropout(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, double p, bool training,
               lt_generator *gen) {
  const char *op = "dropout";
  if (!(p >= 0 && p <= 1))
    return lt_fail(ctx, "%s: dropout probability has to be between 0 and 1, but got %g", op, p);
  if (!lt_dtype_is_float(x->dtype))
    return lt_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                   lt_dtype_name(x->dtype));
  if (!training || p == 0 || lt_numel(x) == 0) {
    *out = lt_retain(x);
    return 0;
  }
  lt_tensor *xc = NULL, *mask = NULL, *y = NULL;
  if (lt_contiguous(ctx, &xc, x) || lt_empty(ctx, &mask, x->dtype, x->ndim, x->size) ||
      lt_empty(ctx, &y, x->dtype, x->ndim, x->size))
    goto fail;
  lt_generator *g = gen ? gen : ctx->gen;
  int64_t n = lt_numel(x);
  double keep = 1 - p, scale = p < 1 ? 1 / keep : 0;
  if (x->dtype == LT_FLOAT32) {
    float *m = lt_data(mask), *yy = lt_data(y), fs = (float)scale;
    const float *xx = lt_data(xc);
    for (int64_t i = 0; i < n; i++) {
      m[i] = lt_next_double(g) < keep ? fs : 0.0f;
      yy[i] = xx[i] * m[i];
    }
  } else {
    double *m = lt_data(mask), *yy = lt_data(y);
    const double *xx = lt_data(xc);
    for (int64_t i = 0; i < n; i++) {
      m[i] = lt_next_double(g) < keep ? scale : 0.0;
      yy[i] = xx[i] * m[i];
    }
  }
  lt_node *node;
  if (lt_record(ctx, &dropout_type, 1, &x, 1, &y, 0, 1, &node)) goto fail;
  if (node && lt_save(node, 0, mask, false)) {
    lt_fail(ctx, "%s: out of memory saving the mask for backward", op);
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
