/*
** nn_conv.c -- the op layer of the convolutions: conv1d, conv2d, conv_transpose1d,
** conv_transpose2d and their backward (ConvolutionBackward0). Arguments are checked here and
** turned into an ltK_conv_geom (core.h); the device's `conv` and `conv_backward` kernels
** (cpu/conv.c) compute.
*/
#include <limits.h>
#include <stdlib.h>

#include "backend.h"

/* The two spatial dims of the geometry; a 1-d op uses only SP_W (H = 1). */
enum { SP_H, SP_W, SP_DIMS };

typedef struct conv_extra {
  ltK_conv_geom g;
  int x_ndim, w_ndim;
  int64_t x_size[LT_MAX_DIMS], w_size[LT_MAX_DIMS];
  const char *op;
} conv_extra;

static int conv_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                         lt_tensor **grad_in) {
  conv_extra *ex = self->extra;
  const ltK_conv_geom *g = &ex->g;
  if (!grad_out[0]) return 0;
  lt_tensor *x, *w, *dy = NULL, *dx = NULL, *dw = NULL, *db = NULL;
  if (ltG_saved_get(ctx, self, 0, &x) || ltG_saved_get(ctx, self, 1, &w)) return -1;
  lt_dtype dt = x->dtype;
  bool need_x = ltG_needs_input_grad(self, 0), need_w = ltG_needs_input_grad(self, 1);
  bool need_b = self->n_in > 2 && ltG_needs_input_grad(self, 2);
  if (ltO_dense_as(ctx, &dy, grad_out[0], dt)) return -1;
  if (need_x && ltO_empty_as(ctx, &dx, x, dt, ex->x_ndim, ex->x_size)) goto fail;
  if (need_w && ltO_empty_as(ctx, &dw, x, dt, ex->w_ndim, ex->w_size)) goto fail;
  if (need_b) {
    int64_t nc = g->transposed ? g->C : g->O;
    if (ltO_empty_as(ctx, &db, x, dt, 1, &nc)) goto fail;
  }
  if ((dx || dw || db) && ltK_kernels(x)->conv_backward(ctx, ex->op, g, dx, dw, db, x, w, dy))
    goto fail;
  lt_release(dy);
  grad_in[0] = dx;
  grad_in[1] = dw;
  if (self->n_in > 2) grad_in[2] = db;
  return 0;
fail:
  lt_release(dy);
  lt_release(dx);
  lt_release(dw);
  lt_release(db);
  return -1;
}

static const ltG_node_type conv_type = {"ConvolutionBackward0", conv_backward, NULL};

/* The per-axis geometry by SP_H, SP_W (a 1-d op has H = 1), gathered once so the size rules
** below read as their formulas. */
typedef struct conv_axes {
  int64_t in[SP_DIMS], k[SP_DIMS], s[SP_DIMS], p[SP_DIMS], pe[SP_DIMS], d[SP_DIMS];
  int64_t opad[SP_DIMS], out[SP_DIMS];
} conv_axes;

/* The checks that need no sizes: dtypes, ranks. sd = spatial dims (1 or 2). */
static int check_tensors(lt_ctx *ctx, const char *op, int sd, bool transposed,
                         const lt_tensor *x, const lt_tensor *w, const lt_tensor *b) {
  char bx[256], bw[256];
  if (!lt_dtype_is_float(x->dtype))
    return ltB_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                    lt_dtype_name(x->dtype));
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
    return ltB_fail(ctx, "%s: input (%s), weight (%s)%s%s must have the same dtype", op,
                    lt_dtype_name(x->dtype), lt_dtype_name(w->dtype), b ? " and bias " : "",
                    b ? lt_dtype_name(b->dtype) : "");
  if (x->ndim != sd + 1 && x->ndim != sd + 2)
    return ltB_fail(ctx, "%s: expected %d-d (unbatched) or %d-d (batched) input %s, got input "
                    "of shape %s", op, sd + 1, sd + 2, sd == 1 ? "(N,C,L)" : "(N,C,H,W)",
                    LT_SHAPE(x, bx));
  if (w->ndim != sd + 2)
    return ltB_fail(ctx, "%s: expected %d-d weight %s, got weight of shape %s", op, sd + 2,
                    transposed ? (sd == 1 ? "(in,out/groups,k)" : "(in,out/groups,kh,kw)")
                              : (sd == 1 ? "(out,in/groups,k)" : "(out,in/groups,kh,kw)"),
                   LT_SHAPE(w, bw));
  return 0;
}

/* groups, stride, dilation and the paddings, each on its own */
static int check_args(lt_ctx *ctx, const char *op, int sd, bool transposed,
                      const lt_conv_args *a) {
  if (a->groups < 1)
    return ltB_fail(ctx, "%s: groups must be a positive integer, got %lld", op,
                    (long long)a->groups);
  for (int i = 0; i < sd; i++) {
    if (a->stride[i] < 1)
      return ltB_fail(ctx, "%s: non-positive stride is not supported (got %lld)", op,
                      (long long)a->stride[i]);
    if (a->dilation[i] < 1)
      return ltB_fail(ctx, "%s: dilation must be positive (got %lld)", op,
                      (long long)a->dilation[i]);
    if (a->padding[i] < 0 || a->padding_extra[i] < 0)
      return ltB_fail(ctx, "%s: negative padding is not supported (got %lld)", op,
                      (long long)(a->padding[i] < 0 ? a->padding[i] : a->padding_extra[i]));
    if (transposed && a->padding_extra[i] != 0)
      return ltB_fail(ctx, "%s: asymmetric padding is not supported", op);
    if (transposed && (a->output_padding[i] < 0 ||
                       (a->output_padding[i] >= a->stride[i] &&
                        a->output_padding[i] >= a->dilation[i])))
      return ltB_fail(ctx, "%s: output padding must be non-negative and smaller than either "
                      "stride or dilation, got output_padding=%lld stride=%lld dilation=%lld",
                      op, (long long)a->output_padding[i], (long long)a->stride[i],
                      (long long)a->dilation[i]);
  }
  return 0;
}

/* The channel counts: *Cimg on the image side, *Ocol on the column side (see ltK_conv_geom),
** checked against the weight, the groups and the bias. Cx = x's channels. */
static int conv_channels(lt_ctx *ctx, const char *op, bool transposed, const lt_tensor *x,
                         const lt_tensor *w, const lt_tensor *b, int64_t G, int64_t Cx,
                         int64_t *Cimg, int64_t *Ocol) {
  char bx[256], bw[256], bb[256];
  if (!transposed) {
    if (w->size[0] % G != 0)
      return ltB_fail(ctx, "%s: given groups=%lld, expected weight to be divisible by %lld at "
                      "dimension 1, but got weight of shape %s", op, (long long)G, (long long)G,
                      LT_SHAPE(w, bw));
    if (w->size[1] * G != Cx)
      return ltB_fail(ctx, "%s: given groups=%lld, weight of shape %s expects input %s to have "
                      "%lld channels, but got %lld channels instead", op, (long long)G,
                      LT_SHAPE(w, bw), LT_SHAPE(x, bx), (long long)(w->size[1] * G),
                      (long long)Cx);
    *Cimg = Cx;
    *Ocol = w->size[0];
  } else {
    if (w->size[0] != Cx)
      return ltB_fail(ctx, "%s: given transposed=1, weight of shape %s expects input %s to have "
                      "%lld channels, but got %lld channels instead", op, LT_SHAPE(w, bw),
                      LT_SHAPE(x, bx), (long long)w->size[0], (long long)Cx);
    if (Cx % G != 0)
      return ltB_fail(ctx, "%s: given groups=%lld, expected weight to be divisible by %lld at "
                      "dimension 1, but got weight of shape %s", op, (long long)G, (long long)G,
                      LT_SHAPE(w, bw));
    *Cimg = w->size[1] * G;
    *Ocol = Cx;
  }
  int64_t nout = transposed ? *Cimg : *Ocol;
  if (b && (b->ndim != 1 || b->size[0] != nout))
    return ltB_fail(ctx, "%s: given weight of shape %s, expected bias to be 1-d with %lld "
                    "elements, but got bias of shape %s", op, LT_SHAPE(w, bw), (long long)nout,
                    LT_SHAPE(b, bb));
  return 0;
}

/* the sd trailing axes from x's spatial sizes xsp, the kernel's ksp and the arguments */
static void fill_axes(conv_axes *ax, int sd, const int64_t *xsp, const int64_t *ksp,
                      const lt_conv_args *a) {
  for (int j = 0; j < SP_DIMS; j++) {
    ax->in[j] = ax->k[j] = ax->s[j] = ax->d[j] = ax->out[j] = 1;
    ax->p[j] = ax->pe[j] = ax->opad[j] = 0;
  }
  for (int i = 0; i < sd; i++) {
    int j = SP_DIMS - sd + i;
    ax->in[j] = xsp[i];
    ax->k[j] = ksp[i];
    ax->s[j] = a->stride[i];
    ax->p[j] = a->padding[i];
    ax->pe[j] = a->padding_extra[i];
    ax->d[j] = a->dilation[i];
    ax->opad[j] = a->output_padding[i];
  }
}

static int64_t dilated_kernel(const conv_axes *ax, int j) {
  return ax->d[j] * (ax->k[j] - 1) + 1;
}

static int64_t padded_input(const conv_axes *ax, int j) {
  return ax->in[j] + 2 * ax->p[j] + ax->pe[j];
}

/* PyTorch's message lists every axis's padded input and dilated kernel, not only the one
** that failed */
static int fail_kernel_too_large(lt_ctx *ctx, const char *op, int sd, const conv_axes *ax,
                                 const lt_tensor *x, const lt_tensor *w) {
  char bx[256], bw[256], bi[128], bk[128];
  int64_t pin[SP_DIMS], pk[SP_DIMS];
  for (int i = 0; i < sd; i++) {
    pin[i] = padded_input(ax, SP_DIMS - sd + i);
    pk[i] = dilated_kernel(ax, SP_DIMS - sd + i);
  }
  return ltB_fail(ctx, "%s: calculated padded input size per channel: %s. Kernel size "
                  "(dilated): %s. Kernel size can't be greater than actual input size "
                  "(input %s, weight %s)", op, ltB_sizes_str(sd, pin, bi, sizeof bi),
                  ltB_sizes_str(sd, pk, bk, sizeof bk), LT_SHAPE(x, bx), LT_SHAPE(w, bw));
}

/* ax->out from the other axes' fields; fails where an output size would not be positive */
static int output_axes(lt_ctx *ctx, const char *op, int sd, bool transposed, conv_axes *ax,
                       const lt_tensor *x, const lt_tensor *w) {
  char bx[256], bw[256];
  for (int j = SP_DIMS - sd; j < SP_DIMS; j++) {
    int64_t ek = dilated_kernel(ax, j);
    if (!transposed) {
      if (padded_input(ax, j) < ek) return fail_kernel_too_large(ctx, op, sd, ax, x, w);
      ax->out[j] = (padded_input(ax, j) - ek) / ax->s[j] + 1;
    } else {
      ax->out[j] = (ax->in[j] - 1) * ax->s[j] - 2 * ax->p[j] + ek + ax->opad[j];
      if (ax->out[j] < 1)
        return ltB_fail(ctx, "%s: computed output size is %lld (input %s, weight %s, stride "
                        "%lld, padding %lld), but it must be positive", op,
                        (long long)ax->out[j], LT_SHAPE(x, bx), LT_SHAPE(w, bw),
                        (long long)ax->s[j], (long long)ax->p[j]);
    }
  }
  return 0;
}

/* Checks arguments and fills the geometry. sd = spatial dims (1 or 2). For a transposed
** convolution the image side is the output. */
static int conv_setup(lt_ctx *ctx, const char *op, int sd, bool transposed, const lt_tensor *x,
                      const lt_tensor *w, const lt_tensor *b, const lt_conv_args *a,
                      ltK_conv_geom *g, int *out_ndim, int64_t *out_size) {
  char bx[256], bw[256];
  if (check_tensors(ctx, op, sd, transposed, x, w, b) || check_args(ctx, op, sd, transposed, a))
    return -1;
  bool batched = x->ndim == sd + 2;
  int64_t N = batched ? x->size[0] : 1, Cx = x->size[batched ? 1 : 0], Cimg, Ocol;
  if (conv_channels(ctx, op, transposed, x, w, b, a->groups, Cx, &Cimg, &Ocol)) return -1;
  conv_axes ax;
  fill_axes(&ax, sd, x->size + (batched ? 2 : 1), w->size + 2, a);
  if (output_axes(ctx, op, sd, transposed, &ax, x, w)) return -1;
  /* the image side is the input of a convolution and the output of a transposed one */
  const int64_t *img = transposed ? ax.out : ax.in, *col = transposed ? ax.in : ax.out;
  *g = (ltK_conv_geom){
      .N = N, .C = Cimg, .H = img[SP_H], .W = img[SP_W],
      .O = Ocol, .OH = col[SP_H], .OW = col[SP_W],
      .kh = ax.k[SP_H], .kw = ax.k[SP_W], .sh = ax.s[SP_H], .sw = ax.s[SP_W],
      .ph = ax.p[SP_H], .pw = ax.p[SP_W], .dh = ax.d[SP_H], .dw = ax.d[SP_W],
      .groups = a->groups, .transposed = transposed,
  };
  /* BLAS takes int sizes */
  int64_t L = g->OH * g->OW;
  if (g->C * g->kh * g->kw > INT_MAX || L > INT_MAX / 2 || g->O > INT_MAX)
    return ltB_fail(ctx, "%s: problem too large for BLAS (input %s, weight %s)", op,
                    LT_SHAPE(x, bx), LT_SHAPE(w, bw));
  int nd = 0;
  if (batched) out_size[nd++] = N;
  out_size[nd++] = transposed ? Cimg : Ocol;
  for (int i = 0; i < sd; i++) out_size[nd++] = ax.out[SP_DIMS - sd + i];
  *out_ndim = nd;
  return 0;
}

static int conv_op(lt_ctx *ctx, lt_tensor **out, const char *op, int sd, bool transposed,
                   lt_tensor *x, lt_tensor *w, lt_tensor *b, const lt_conv_args *a) {
  ltK_conv_geom g;
  int ndim = 0;
  int64_t size[LT_MAX_DIMS] = {0};
  if (!x || !w) return ltB_fail(ctx, "%s: input and weight are required", op);
  if (ltD_check_devices(ctx, op, x, w) || (b && ltD_check_devices(ctx, op, x, b))) return -1;
  if (conv_setup(ctx, op, sd, transposed, x, w, b, a, &g, &ndim, size)) return -1;
  lt_tensor *xc = NULL, *wc = NULL, *bc = NULL, *y = NULL;
  if (lt_contiguous(ctx, &xc, x) || lt_contiguous(ctx, &wc, w) ||
      (b && lt_contiguous(ctx, &bc, b)) || ltO_empty_as(ctx, &y, x, x->dtype, ndim, size))
    goto fail;
  if (ltK_kernels(x)->conv(ctx, op, &g, y, xc, wc, bc)) goto fail;
  lt_tensor *ins[3] = {x, w, b};
  lt_node *node;
  if (ltG_record(ctx, &conv_type, b ? 3 : 2, ins, 1, &y, sizeof(conv_extra), 2, &node))
    goto fail;
  if (node) {
    conv_extra *ex = node->extra;
    ex->g = g;
    ex->op = op;
    ex->x_ndim = x->ndim;
    ex->w_ndim = w->ndim;
    memcpy(ex->x_size, x->size, (size_t)x->ndim * sizeof(int64_t));
    memcpy(ex->w_size, w->size, (size_t)w->ndim * sizeof(int64_t));
    if (ltG_save(node, 0, xc, false) || ltG_save(node, 1, wc, false)) {
      ltB_fail(ctx, "%s: out of memory saving tensors for backward", op);
      goto fail;
    }
  }
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  *out = y;
  return 0;
fail:
  lt_release(xc);
  lt_release(wc);
  lt_release(bc);
  lt_release(y);
  return -1;
}

int lt_conv1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w, lt_tensor *b,
              const lt_conv_args *a) {
  return conv_op(ctx, out, "conv1d", 1, false, x, w, b, a);
}

int lt_conv2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w, lt_tensor *b,
              const lt_conv_args *a) {
  return conv_op(ctx, out, "conv2d", 2, false, x, w, b, a);
}

int lt_conv_transpose1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w, lt_tensor *b,
                        const lt_conv_args *a) {
  return conv_op(ctx, out, "conv_transpose1d", 1, true, x, w, b, a);
}

int lt_conv_transpose2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, lt_tensor *w, lt_tensor *b,
                        const lt_conv_args *a) {
  return conv_op(ctx, out, "conv_transpose2d", 2, true, x, w, b, a);
}

void lt_conv_args_init(lt_conv_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 0; i < SP_DIMS; i++) a->stride[i] = a->dilation[i] = 1;
  a->groups = 1;
}
