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
  lt_tensor *idx, *dy = NULL, *dw = NULL;
  if (lt_saved_get(ctx, self, 0, &idx)) return -1;
  lt_dtype dt = self->out_dtype;
  if (lt_dense_as(ctx, &dy, grad_out[0], dt)) return -1;
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
  lt_tensor *mask, *dy = NULL, *dx = NULL;
  if (lt_saved_get(ctx, self, 0, &mask)) return -1;
  lt_dtype dt = mask->dtype;
  if (lt_dense_as(ctx, &dy, grad_out[0], dt)) return -1;
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

/* ============================================================ cross_entropy, nll_loss
** Rows i = (n, s) of an input seen as (N, C, S): C class scores at stride S. The fused
** cross_entropy is nll_loss(log_softmax(x)) with label smoothing in one pass; its backward
** recomputes the softmax from the saved input and per-row log-sum-exp:
**   loss_i  = (1-ls) * w[t] * (lse - x[t]) + ls/C * sum_c w[c] * (lse - x[c])
**   dx[c]   = a_i * w[t] * (p[c] - [c == t]) + b_i * (W * p[c] - w[c])
** with a_i, b_i the reduction's coefficients for the two terms and W = sum(w) (C without
** weights). Ignored rows (target == ignore_index) contribute nothing. */

typedef struct ce_extra {
  int64_t N, C, S, base, ignore;
  int reduction;
  double ls;
  bool logits;      /* cross_entropy (true) or nll_loss on log-probabilities */
  double dn, ds;    /* mean denominators of the nll and smoothing terms */
  int xdim;
  int64_t xsize[LT_MAX_DIMS];
} ce_extra;

static inline double elem(const void *p, lt_dtype dt, int64_t i) {
  return dt == LT_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

/* Log-sum-exp of row (n, s). */
static double row_lse(const void *x, lt_dtype dt, int64_t C, int64_t S, int64_t off) {
  double m = -INFINITY, sum = 0;
  for (int64_t c = 0; c < C; c++) {
    double v = elem(x, dt, off + c * S);
    if (v > m || v != v) m = v;
  }
  if (m == -INFINITY || m != m) return m;
  for (int64_t c = 0; c < C; c++) sum += exp(elem(x, dt, off + c * S) - m);
  return m + log(sum);
}

/* saved: 0 input (contiguous), 1 target (contiguous), 2 weight, 3 lse (f64, rows; logits) */
static int ce_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                       lt_tensor **grad_in) {
  ce_extra *ex = self->extra;
  if (!grad_out[0] || !lt_needs_input_grad(self, 0)) return 0;
  lt_tensor *x, *tg, *w, *lse = NULL, *gc = NULL, *dx = NULL;
  if (lt_saved_get(ctx, self, 0, &x) || lt_saved_get(ctx, self, 1, &tg) ||
      lt_saved_get(ctx, self, 2, &w) || (ex->logits && lt_saved_get(ctx, self, 3, &lse)))
    return -1;
  lt_dtype dt = x->dtype;
  if (lt_contiguous(ctx, &gc, grad_out[0])) return -1;
  if (lt_empty(ctx, &dx, dt, ex->xdim, ex->xsize)) {
    lt_release(gc);
    return -1;
  }
  const int64_t N = ex->N, C = ex->C, S = ex->S;
  const int64_t *t = lt_data(tg);
  const double *l = lse ? lt_data(lse) : NULL;
  const void *wd = w ? lt_data(w) : NULL;
  double W = 0;
  for (int64_t c = 0; c < C; c++) W += wd ? elem(wd, dt, c) : 1.0;
  void *d = lt_data(dx);
  memset(d, 0, (size_t)(N * C * S) * lt_dtype_size(dt));
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t i = n * S + s, off = n * C * S + s;
      if (t[i] == ex->ignore) continue;
      int64_t tc = t[i] - ex->base;
      double g = ex->reduction == 0 ? elem(lt_data(gc), gc->dtype, i)
                                    : elem(lt_data(gc), gc->dtype, 0);
      double a = (1 - ex->ls) * g, b = ex->ls / (double)C * g;
      if (ex->reduction == 1) {
        a /= ex->dn;
        b /= ex->ds;
      }
      double wt = wd ? elem(wd, dt, tc) : 1.0;
      for (int64_t c = 0; c < C; c++) {
        double v;
        if (ex->logits) {
          double p = exp(elem(lt_data(x), dt, off + c * S) - l[i]);
          double wc = wd ? elem(wd, dt, c) : 1.0;
          v = a * wt * (p - (c == tc)) + (b != 0 ? b * (W * p - wc) : 0.0);
        } else {
          v = c == tc ? -a * wt : 0.0;
        }
        if (dt == LT_FLOAT32)
          ((float *)d)[off + c * S] = (float)v;
        else
          ((double *)d)[off + c * S] = v;
      }
    }
  lt_release(gc);
  grad_in[0] = dx;
  return 0;
}

static const lt_node_type ce_type = {"NllLossBackward0", ce_backward, NULL};

static int class_loss(lt_ctx *ctx, const char *op, bool logits, lt_tensor **out, lt_tensor *x,
                      lt_tensor *target, lt_tensor *weight, int64_t ignore_index, int reduction,
                      double ls, int64_t base) {
  char bx[256], bt[256], be[256];
  if (!lt_dtype_is_float(x->dtype))
    return lt_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                   lt_dtype_name(x->dtype));
  if (x->ndim < 1)
    return lt_fail(ctx, "%s: expected an input of at least 1 dimension, got a 0-d tensor", op);
  if (target->dtype != LT_INT64)
    return lt_fail(ctx, "%s: expected a target of dtype int64 (class indices), got %s", op,
                   lt_dtype_name(target->dtype));
  if (reduction < 0 || reduction > 2)
    return lt_fail(ctx, "%s: unknown reduction %d", op, reduction);
  if (!(ls >= 0 && ls <= 1))
    return lt_fail(ctx, "%s: label_smoothing must be between 0.0 and 1.0. Got: %g", op, ls);
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
    return lt_fail(ctx, "%s: expected target of shape %s (class indices) for input of shape %s, "
                   "got target of shape %s", op, lt_sizes_str(ed, esize, be, sizeof be),
                   LT_SHAPE(x, bx), LT_SHAPE(target, bt));
  if (weight && (weight->dtype != x->dtype || weight->ndim != 1 || weight->size[0] != C))
    return lt_fail(ctx, "%s: weight tensor should be defined either for all %lld classes or no "
                   "classes but got weight tensor of shape %s (%s)", op, (long long)C,
                   LT_SHAPE(weight, bt), lt_dtype_name(weight->dtype));
  lt_tensor *xc = NULL, *tc = NULL, *wc = NULL, *lse = NULL, *y = NULL;
  double *rowloss = NULL;
  if (lt_contiguous(ctx, &tc, target)) return -1;
  const int64_t *t = lt_data(tc), R = N * S;
  for (int64_t i = 0; i < R; i++)
    if (t[i] != ignore_index && (t[i] < base || t[i] - base >= C)) {
      lt_fail(ctx, "%s: target %lld is out of bounds for %lld classes (class indices are "
              "%lld..%lld)", op, (long long)t[i], (long long)C, (long long)base,
              (long long)(C - 1 + base));
      lt_release(tc);
      return -1;
    }
  if (lt_contiguous(ctx, &xc, x) || (weight && lt_contiguous(ctx, &wc, weight)) ||
      (logits && lt_empty(ctx, &lse, LT_FLOAT64, 1, &R)))
    goto fail;
  rowloss = malloc((size_t)(R ? R : 1) * 2 * sizeof *rowloss);
  if (!rowloss) {
    lt_fail(ctx, "%s: out of memory", op);
    goto fail;
  }
  lt_dtype dt = x->dtype;
  const void *xd = lt_data(xc), *wd = wc ? lt_data(wc) : NULL;
  double sum_nll = 0, sum_smooth = 0, sum_w = 0, kept = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t s = 0; s < S; s++) {
      int64_t i = n * S + s, off = n * C * S + s;
      double nll = 0, smooth = 0;
      if (logits) ((double *)lt_data(lse))[i] = row_lse(xd, dt, C, S, off);
      if (t[i] != ignore_index) {
        int64_t k = t[i] - base;
        double wt = wd ? elem(wd, dt, k) : 1.0;
        double l = logits ? ((double *)lt_data(lse))[i] : 0.0;
        nll = wt * (l - elem(xd, dt, off + k * S));
        if (logits && ls > 0)
          for (int64_t c = 0; c < C; c++)
            smooth += (wd ? elem(wd, dt, c) : 1.0) * (l - elem(xd, dt, off + c * S));
        sum_w += wt;
        kept += 1;
      }
      rowloss[i] = nll;
      rowloss[R + i] = smooth;
      sum_nll += nll;
      sum_smooth += smooth;
    }
  /* mean: both terms are divided by the total weight of the kept targets (their count
  ** without weights), as PyTorch */
  double dn = sum_w, ds = wd ? sum_w : kept;
  if (reduction == 0) {
    if (lt_empty(ctx, &y, dt, ed, esize)) goto fail;
    for (int64_t i = 0; i < R; i++) {
      double v = (1 - ls) * rowloss[i] + ls / (double)C * rowloss[R + i];
      if (dt == LT_FLOAT32)
        ((float *)lt_data(y))[i] = (float)v;
      else
        ((double *)lt_data(y))[i] = v;
    }
  } else {
    double v = reduction == 2 ? (1 - ls) * sum_nll + ls / (double)C * sum_smooth
                              : (1 - ls) * sum_nll / dn + (ls > 0 ? ls / (double)C * sum_smooth / ds : 0);
    if (lt_full(ctx, &y, dt, 0, NULL, v)) goto fail;
  }
  lt_node *node;
  if (lt_record(ctx, &ce_type, 1, &x, 1, &y, sizeof(ce_extra), 4, &node)) goto fail;
  if (node) {
    ce_extra *ex = node->extra;
    ex->N = N;
    ex->C = C;
    ex->S = S;
    ex->base = base;
    ex->ignore = ignore_index;
    ex->reduction = reduction;
    ex->ls = logits ? ls : 0;
    ex->logits = logits;
    ex->dn = dn;
    ex->ds = ds;
    ex->xdim = x->ndim;
    memcpy(ex->xsize, x->size, (size_t)x->ndim * sizeof(int64_t));
    if (lt_save(node, 0, xc, false) || lt_save(node, 1, tc, false) ||
        lt_save(node, 2, wc, false) || lt_save(node, 3, lse, false)) {
      lt_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  free(rowloss);
  lt_release(xc);
  lt_release(tc);
  lt_release(wc);
  lt_release(lse);
  *out = y;
  return 0;
fail:
  free(rowloss);
  lt_release(xc);
  lt_release(tc);
  lt_release(wc);
  lt_release(lse);
  lt_release(y);
  return -1;
}

int lt_cross_entropy(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *target,
                     lt_tensor *weight, int64_t ignore_index, int reduction,
                     double label_smoothing, int64_t index_base) {
  return class_loss(ctx, "cross_entropy", true, out, input, target, weight, ignore_index,
                    reduction, label_smoothing, index_base);
}

int lt_nll_loss(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *target,
                lt_tensor *weight, int64_t ignore_index, int reduction, int64_t index_base) {
  return class_loss(ctx, "nll_loss", false, out, input, target, weight, ignore_index, reduction,
                    0.0, index_base);
}
