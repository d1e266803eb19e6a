/*
** attention.c -- the op layer of fused scaled-dot-product attention,
** lt_scaled_dot_product_attention, and its backward (ScaledDotProductAttentionBackward0). The
** arguments are checked here and the operands viewed over one broadcast batch shape; the
** device's `sdpa` and `sdpa_backward` kernels (cpu/attention.c) compute. The forward saves each
** row's log-sum-exp, not the weights: the backward recomputes them block by block, and with
** dropout the same mask from the seed the forward drew.
*/
#include <limits.h>
#include <math.h>

#include "backend.h"
#include "generator.h"

#define OP "scaled_dot_product_attention"

enum { SDPA_Q, SDPA_K, SDPA_V, SDPA_NIN };
/* saved slots: the three operands as the kernel read them, the mask, out and lse */
enum { SAVED_MASK = SDPA_NIN, SAVED_OUT, SAVED_LSE, SAVED_N };

typedef struct sdpa_extra {
  ltK_sdpa_geom g;
  int ndim[SDPA_NIN];                 /* the inputs' own shapes, for their gradients */
  int64_t size[SDPA_NIN][LT_MAX_DIMS];
} sdpa_extra;

/* ------------------------------------------------------------ checks */

static int check_operands(lt_ctx *ctx, lt_tensor *const in[SDPA_NIN]) {
  static const char *const names[SDPA_NIN] = {"query", "key", "value"};
  char b0[256], b1[256], b2[256];
  for (int i = 0; i < SDPA_NIN; i++) {
    if (!lt_dtype_is_float(in[i]->dtype) || in[i]->dtype != in[0]->dtype)
      return ltB_fail(ctx, "%s: expected query, key and value of one float dtype, got %s, %s "
                      "and %s", OP, lt_dtype_name(in[0]->dtype), lt_dtype_name(in[1]->dtype),
                      lt_dtype_name(in[2]->dtype));
    if (in[i]->ndim < 2)
      return ltB_fail(ctx, "%s: expected %s with at least 2 dims (*, %s), got shape %s", OP,
                      names[i], i == SDPA_Q ? "L, E" : i == SDPA_K ? "S, E" : "S, Ev",
                      LT_SHAPE(in[i], b0));
    if (i > 0 && ltD_check_devices(ctx, OP, in[0], in[i])) return -1;
  }
  const lt_tensor *q = in[SDPA_Q], *k = in[SDPA_K], *v = in[SDPA_V];
  if (k->size[k->ndim - 1] != q->size[q->ndim - 1] || v->size[v->ndim - 2] != k->size[k->ndim - 2])
    return ltB_fail(ctx, "%s: expected query (*, L, E), key (*, S, E) and value (*, S, Ev), got "
                    "%s, %s and %s", OP, LT_SHAPE(q, b0), LT_SHAPE(k, b1), LT_SHAPE(v, b2));
  /* a row is one BLAS leading dimension, an int */
  if (q->size[q->ndim - 1] > INT_MAX || v->size[v->ndim - 1] > INT_MAX)
    return ltB_fail(ctx, "%s: expected E and Ev below 2^31, got query %s and value %s", OP,
                    LT_SHAPE(q, b0), LT_SHAPE(v, b2));
  return 0;
}

/* The broadcast of the inputs' leading dims into g->nbd, g->batch. */
static int batch_shape(lt_ctx *ctx, lt_tensor *const in[SDPA_NIN], ltK_sdpa_geom *g) {
  int nbd = 0;
  for (int i = 0; i < SDPA_NIN; i++)
    if (in[i]->ndim - 2 > nbd) nbd = in[i]->ndim - 2;
  g->nbd = nbd;
  for (int d = 0; d < nbd; d++) {
    int64_t n = 1;
    for (int i = 0; i < SDPA_NIN; i++) {
      int td = d - (nbd - (in[i]->ndim - 2));
      int64_t s = td >= 0 ? in[i]->size[td] : 1;
      if (s == 1) continue;
      if (n != 1 && s != n) {
        char b0[256], b1[256], b2[256];
        return ltB_fail(ctx, "%s: the batch dims of query %s, key %s and value %s do not "
                        "broadcast", OP, LT_SHAPE(in[0], b0), LT_SHAPE(in[1], b1),
                        LT_SHAPE(in[2], b2));
      }
      n = s;
    }
    g->batch[d] = n;
  }
  return 0;
}

/* The full shape (batch, rows, cols) of an operand, or of the mask. */
static int full_shape(const ltK_sdpa_geom *g, int64_t rows, int64_t cols, int64_t *size) {
  memcpy(size, g->batch, sizeof(int64_t) * (size_t)g->nbd);
  size[g->nbd] = rows;
  size[g->nbd + 1] = cols;
  return g->nbd + 2;
}

static int check_mask(lt_ctx *ctx, const lt_tensor *m, const lt_tensor *q,
                      const ltK_sdpa_geom *g, bool is_causal) {
  char b0[256], b1[256];
  if (is_causal)
    return ltB_fail(ctx, "%s: attn_mask and is_causal cannot both be set (is_causal is the "
                    "mask of the upper triangle)", OP);
  if (ltD_check_devices(ctx, OP, q, m)) return -1;
  if (m->dtype != LT_BOOL && m->dtype != q->dtype)
    return ltB_fail(ctx, "%s: expected a bool attn_mask or one of query's dtype %s, got %s", OP,
                    lt_dtype_name(q->dtype), lt_dtype_name(m->dtype));
  int64_t size[LT_MAX_DIMS];
  int nd = full_shape(g, g->L, g->S, size);
  bool ok = m->ndim <= nd;
  for (int d = 0; ok && d < m->ndim; d++) {
    int64_t s = m->size[m->ndim - 1 - d];
    ok = s == 1 || s == size[nd - 1 - d];
  }
  if (!ok)
    return ltB_fail(ctx, "%s: attn_mask of shape %s does not broadcast to %s (*, L, S)", OP,
                    LT_SHAPE(m, b0), ltB_sizes_str(nd, size, b1, sizeof b1));
  return 0;
}

/* ------------------------------------------------------------ operand views */

/* Whether the kernel can read t's matrices as they lie: unit stride along the last dim, rows
** apart by at least a row (what a BLAS leading dimension may be). */
static bool kernel_ready(const lt_tensor *t) {
  int64_t rows = t->size[t->ndim - 2], cols = t->size[t->ndim - 1];
  int64_t rs = t->stride[t->ndim - 2], cs = t->stride[t->ndim - 1];
  return (cols <= 1 || cs == 1) && (rows <= 1 || (rs >= cols && rs <= INT_MAX));
}

/* *out = t viewed over the full shape (batch, rows, cols): stride 0 along broadcast dims, a
** contiguous copy first when `matrix` (an operand of the GEMMs) and the kernel cannot read it. */
static int full_view(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, const ltK_sdpa_geom *g,
                     int64_t rows, int64_t cols, bool matrix) {
  lt_tensor *src;
  if (matrix && !kernel_ready(t)) {
    if (lt_contiguous(ctx, &src, t)) return -1;
  } else {
    src = lt_retain(t);
  }
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  int nd = full_shape(g, rows, cols, size);
  for (int d = 0; d < nd; d++) {
    int td = d - (nd - src->ndim);
    stride[d] = td >= 0 && src->size[td] != 1 ? src->stride[td] : 0;
  }
  *out = ltB_alias(src, nd, size, stride, src->offset);
  lt_release(src);
  if (!*out) return ltB_fail(ctx, "%s: out of memory", OP);
  return 0;
}

static void release_all(lt_tensor **t, int n) {
  for (int i = 0; i < n; i++) {
    lt_release(t[i]);
    t[i] = NULL;
  }
}

/* ------------------------------------------------------------ backward */

/* A fresh tensor of t's shape whose dims lie in memory in the order of t's strides, the last
** dim last (broadcast dims outermost): the gradient of heads split out of one (B, T, H E)
** tensor as (B, H, T, E) views then lies as (B, T, H, E), and the backward of the split's view
** and transpose needs no copy. A contiguous t gives a contiguous tensor. */
static int empty_in_order(lt_ctx *ctx, lt_tensor **out, const lt_tensor *t) {
  int nd = t->ndim, ord[LT_MAX_DIMS];
  for (int d = 0; d < nd; d++) ord[d] = d;
  for (int i = 1; i < nd - 1; i++)   /* stable insertion sort of the leading dims */
    for (int j = i; j > 0; j--) {
      int64_t a = t->stride[ord[j - 1]], b = t->stride[ord[j]];
      if ((a == 0 ? INT64_MAX : a) >= (b == 0 ? INT64_MAX : b)) break;
      int x = ord[j - 1];
      ord[j - 1] = ord[j];
      ord[j] = x;
    }
  int64_t psize[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  for (int d = 0; d < nd; d++) psize[d] = t->size[ord[d]];
  lt_tensor *dense;
  if (ltO_empty_as(ctx, &dense, t, t->dtype, nd, psize)) return -1;
  for (int d = 0; d < nd; d++) stride[ord[d]] = dense->stride[d];
  *out = ltB_alias(dense, nd, t->size, stride, dense->offset);
  lt_release(dense);
  return *out ? 0 : ltB_fail(ctx, "%s: out of memory", OP);
}

static int sdpa_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const sdpa_extra *e = self->extra;
  const ltK_sdpa_geom *g = &e->g;
  if (!gout[0]) return 0;
  lt_tensor *sv[SAVED_N], *dout = NULL, *d[SDPA_NIN] = {NULL, NULL, NULL};
  for (int i = 0; i < SAVED_N; i++)
    if (ltG_saved_get(ctx, self, i, &sv[i])) return -1;
  lt_dtype dt = sv[SDPA_Q]->dtype;
  const int64_t cols[SDPA_NIN] = {g->E, g->E, g->Ev}, rows[SDPA_NIN] = {g->L, g->S, g->S};
  lt_tensor *g32;   /* the kernel reads dout's rows where they lie, as it reads q, k and v */
  if (lt_to_dtype(ctx, &g32, gout[0], dt)) return -1;
  int rc = full_view(ctx, &dout, g32, g, g->L, g->Ev, true);
  lt_release(g32);
  if (rc) return -1;
  for (int i = 0; i < SDPA_NIN; i++) {
    int64_t size[LT_MAX_DIMS];
    int nd = full_shape(g, rows[i], cols[i], size);
    /* broadcast inputs get a dense gradient over the batch (ltO_sum_to folds it) */
    bool bcast = false;
    for (int k = 0; k < nd - 2; k++) bcast |= sv[i]->stride[k] == 0 && sv[i]->size[k] > 1;
    if (bcast ? ltO_empty_as(ctx, &d[i], sv[SDPA_Q], dt, nd, size)
              : empty_in_order(ctx, &d[i], sv[i]))
      goto fail;
  }
  if (ltK_kernels(sv[SDPA_Q])->sdpa_backward(ctx, g, d[SDPA_Q], d[SDPA_K], d[SDPA_V],
                                             sv[SDPA_Q], sv[SDPA_K], sv[SDPA_V], sv[SAVED_MASK],
                                             sv[SAVED_OUT], sv[SAVED_LSE], dout))
    goto fail;
  lt_release(dout);
  dout = NULL;
  for (int i = 0; i < SDPA_NIN; i++) {
    if (!ltG_needs_input_grad(self, i)) continue;
    if (ltO_sum_to(ctx, &gin[i], d[i], e->ndim[i], e->size[i])) {
      for (int j = 0; j < i; j++) {
        lt_release(gin[j]);
        gin[j] = NULL;
      }
      goto fail;
    }
  }
  release_all(d, SDPA_NIN);
  return 0;
fail:
  lt_release(dout);
  release_all(d, SDPA_NIN);
  return -1;
}

static const ltG_node_type sdpa_type = {"ScaledDotProductAttentionBackward0", sdpa_backward,
                                        NULL};

/* ------------------------------------------------------------ forward */

int lt_scaled_dot_product_attention(lt_ctx *ctx, lt_tensor **out, lt_tensor *q, lt_tensor *k,
                                    lt_tensor *v, lt_tensor *attn_mask, bool is_causal,
                                    const double *scale, double dropout_p, lt_generator *gen) {
  lt_tensor *in[SDPA_NIN] = {q, k, v};
  if (check_operands(ctx, in)) return -1;
  if (!(dropout_p >= 0 && dropout_p <= 1))
    return ltB_fail(ctx, "%s: dropout_p must be in [0, 1], got %g", OP, dropout_p);
  ltK_sdpa_geom g = {.L = q->size[q->ndim - 2], .S = k->size[k->ndim - 2],
                     .E = q->size[q->ndim - 1], .Ev = v->size[v->ndim - 1],
                     .causal = is_causal, .dropout_p = dropout_p};
  /* one draw per call: the mask's seed (the kernels hash it with each weight's index) */
  if (dropout_p > 0) g.seed = ltB_next_u64(gen ? gen : ctx->gen);
  g.scale = scale ? *scale : 1.0 / sqrt((double)g.E);
  if (batch_shape(ctx, in, &g)) return -1;
  if (attn_mask && check_mask(ctx, attn_mask, q, &g, is_causal)) return -1;
  lt_tensor *sv[SAVED_N] = {NULL}, *y;
  const int64_t cols[SDPA_NIN] = {g.E, g.E, g.Ev}, rows[SDPA_NIN] = {g.L, g.S, g.S};
  for (int i = 0; i < SDPA_NIN; i++)
    if (full_view(ctx, &sv[i], in[i], &g, rows[i], cols[i], true)) goto fail;
  if (attn_mask && full_view(ctx, &sv[SAVED_MASK], attn_mask, &g, g.L, g.S, false)) goto fail;
  int64_t size[LT_MAX_DIMS];
  int nd = full_shape(&g, g.L, g.Ev, size);
  if (ltO_empty_as(ctx, &sv[SAVED_OUT], q, q->dtype, nd, size) ||
      ltO_empty_as(ctx, &sv[SAVED_LSE], q, q->dtype, nd - 1, size))
    goto fail;
  if (ltK_kernels(q)->sdpa(ctx, &g, sv[SAVED_OUT], sv[SAVED_LSE], sv[SDPA_Q], sv[SDPA_K],
                           sv[SDPA_V], sv[SAVED_MASK]))
    goto fail;
  y = lt_retain(sv[SAVED_OUT]);
  lt_node *node;
  if (ltG_record(ctx, &sdpa_type, SDPA_NIN, in, 1, &y, sizeof(sdpa_extra), SAVED_N, &node)) {
    lt_release(y);
    goto fail;
  }
  if (node) {
    sdpa_extra *e = node->extra;
    e->g = g;
    for (int i = 0; i < SDPA_NIN; i++) {
      e->ndim[i] = in[i]->ndim;
      memcpy(e->size[i], in[i]->size, sizeof e->size[i]);
    }
    for (int i = 0; i < SAVED_N; i++)
      if (ltG_save(node, i, sv[i], i == SAVED_OUT)) {
        lt_release(y);
        ltB_fail(ctx, "%s: out of memory saving tensors for backward", OP);
        goto fail;
      }
  }
  release_all(sv, SAVED_N);
  *out = y;
  return 0;
fail:
  release_all(sv, SAVED_N);
  return -1;
}
