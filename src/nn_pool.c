/*
** nn_pool.c -- the op layer of the pools: max_pool1d/2d (with indices), avg_pool1d/2d,
** adaptive_avg_pool1d/2d, adaptive_max_pool1d/2d and their backward. Arguments are checked here
** and turned into an ltK_pool_geom (core.h); the device's `pool` and `pool_backward` kernels
** (cpu/pool.c) compute. Indices are 0-based flat positions ih*W + iw inside a plane (the Lua
** binding shows them 1-based).
*/
#include <math.h>
#include <stdlib.h>

#include "backend.h"

/* The two spatial dims of the geometry; a 1-d op uses only SP_W (H = 1). */
enum { SP_H, SP_W, SP_DIMS };

typedef struct pool_extra {
  ltK_pool_geom g;
  int ndim;
  int64_t size[LT_MAX_DIMS];   /* input shape */
} pool_extra;

static bool is_max_kind(enum ltK_pool_kind k) {
  return k == LT_POOL_MAX || k == LT_POOL_ADAPTIVE_MAX;
}

/* Saved slot 0: indices (max kinds). */
static int pool_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                         lt_tensor **grad_in) {
  pool_extra *ex = self->extra;
  if (!grad_out[0] || !ltG_needs_input_grad(self, 0)) return 0;
  lt_tensor *idx = NULL, *dy = NULL, *dx = NULL;
  if (is_max_kind(ex->g.kind) && ltG_saved_get(ctx, self, 0, &idx)) return -1;
  lt_dtype dt = self->out_dtype;
  if (ltO_dense_as(ctx, &dy, grad_out[0], dt)) return -1;
  if (ltO_empty_as(ctx, &dx, dy, dt, ex->ndim, ex->size)) {
    lt_release(dy);
    return -1;
  }
  ltK_kernels(dy)->pool_backward(ctx, &ex->g, dx, dy, idx);
  lt_release(dy);
  grad_in[0] = dx;
  return 0;
}

static const ltG_node_type maxpool_type = {"MaxPool2DWithIndicesBackward0", pool_backward, NULL};
static const ltG_node_type avgpool_type = {"AvgPool2DBackward0", pool_backward, NULL};
static const ltG_node_type adavg_type = {"AdaptiveAvgPool2DBackward0", pool_backward, NULL};
static const ltG_node_type admax_type = {"AdaptiveMaxPool2DBackward0", pool_backward, NULL};

/* Checks x: float, sd+1 or sd+2 dims with non-zero non-batch sizes. Fills P, H, W. */
static int pool_input(lt_ctx *ctx, const char *op, int sd, const lt_tensor *x, ltK_pool_geom *g) {
  char bx[256];
  if (!lt_dtype_is_float(x->dtype))
    return ltB_fail(ctx, "%s: expected a float32 or float64 input, got %s", op,
                    lt_dtype_name(x->dtype));
  if (x->ndim != sd + 1 && x->ndim != sd + 2)
    return ltB_fail(ctx, "%s: expected %d-d (unbatched) or %d-d (batched) input %s, got input "
                    "of shape %s", op, sd + 1, sd + 2, sd == 1 ? "(N,C,L)" : "(N,C,H,W)",
                    LT_SHAPE(x, bx));
  for (int i = x->ndim == sd + 2 ? 1 : 0; i < x->ndim; i++)
    if (x->size[i] == 0)
      return ltB_fail(ctx, "%s: expected input to have non-zero size for non-batch dimensions, "
                      "got input of shape %s", op, LT_SHAPE(x, bx));
  g->P = 1;
  for (int i = 0; i < x->ndim - sd; i++) g->P *= x->size[i];
  g->H = sd == 2 ? x->size[x->ndim - 2] : 1;
  g->W = x->size[x->ndim - 1];
  return 0;
}

static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d,
                             bool ceil_mode) {
  int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (o - 1) * s >= in + pad) o--;
  return o;
}

/* Geometry of a windowed pool from args. */
static int pool_setup(lt_ctx *ctx, const char *op, int sd, bool is_max, const lt_tensor *x,
                      const lt_pool_args *a, ltK_pool_geom *g) {
  char bx[256];
  memset(g, 0, sizeof *g);
  if (pool_input(ctx, op, sd, x, g)) return -1;
  int64_t k[SP_DIMS] = {1, 1}, s[SP_DIMS] = {1, 1}, p[SP_DIMS] = {0, 0}, d[SP_DIMS] = {1, 1};
  for (int i = 0; i < sd; i++) {
    int jj = SP_DIMS - sd + i;
    k[jj] = a->kernel[i];
    s[jj] = a->stride[i];
    p[jj] = a->padding[i];
    d[jj] = is_max ? a->dilation[i] : 1;
    if (k[jj] < 1)
      return ltB_fail(ctx, "%s: kernel_size must be greater than zero, got %lld", op,
                      (long long)k[jj]);
    /* a zero stride would never advance the window (and divides the output size by zero) */
    if (s[jj] == 0) return ltB_fail(ctx, "%s: stride should not be zero", op);
    if (s[jj] < 0)
      return ltB_fail(ctx, "%s: stride should be greater than zero, but got %lld", op,
                      (long long)s[jj]);
    if (d[jj] < 1)
      return ltB_fail(ctx, "%s: dilation should be greater than zero, but got %lld", op,
                      (long long)d[jj]);
    if (p[jj] < 0)
      return ltB_fail(ctx, "%s: pad must be non-negative, but got pad=%lld", op,
                      (long long)p[jj]);
    if (p[jj] > k[jj] / 2)
      return ltB_fail(ctx, "%s: pad should be at most half of kernel size, but got pad=%lld "
                      "and kernel_size=%lld", op, (long long)p[jj], (long long)k[jj]);
  }
  if (!is_max && a->divisor_override < 0)
    return ltB_fail(ctx, "%s: divisor must be not zero", op);
  g->kind = is_max ? LT_POOL_MAX : LT_POOL_AVG;
  g->kh = k[SP_H]; g->kw = k[SP_W];
  g->sh = s[SP_H]; g->sw = s[SP_W];
  g->ph = p[SP_H]; g->pw = p[SP_W];
  g->dh = d[SP_H]; g->dw = d[SP_W];
  g->OH = pool_out_size(g->H, k[SP_H], p[SP_H], s[SP_H], d[SP_H], a->ceil_mode);
  g->OW = pool_out_size(g->W, k[SP_W], p[SP_W], s[SP_W], d[SP_W], a->ceil_mode);
  g->count_include_pad = a->count_include_pad;
  g->divisor = is_max ? 0 : a->divisor_override;
  if (g->OH < 1 || g->OW < 1) {
    int64_t os[SP_DIMS] = {g->OH, g->OW};
    char bo[128];
    return ltB_fail(ctx, "%s: given input of shape %s, the calculated output size %s is too "
                    "small", op, LT_SHAPE(x, bx),
                    ltB_sizes_str(sd, os + SP_DIMS - sd, bo, sizeof bo));
  }
  return 0;
}

/* Output shape: x's leading dims then the pooled spatial sizes. */
static void pool_out_shape(const lt_tensor *x, int sd, const ltK_pool_geom *g, int64_t *size) {
  for (int i = 0; i < x->ndim - sd; i++) size[i] = x->size[i];
  if (sd == 2) size[x->ndim - 2] = g->OH;
  size[x->ndim - 1] = g->OW;
}

/* Runs a pooling forward of g (its kind picks the node type) and records it. */
static int pool_run(lt_ctx *ctx, const char *op, int sd, lt_tensor *x, const ltK_pool_geom *g,
                    lt_tensor **out, lt_tensor **indices) {
  static const ltG_node_type *const types[] = {
      [LT_POOL_MAX] = &maxpool_type,
      [LT_POOL_AVG] = &avgpool_type,
      [LT_POOL_ADAPTIVE_AVG] = &adavg_type,
      [LT_POOL_ADAPTIVE_MAX] = &admax_type,
  };
  int64_t size[LT_MAX_DIMS];
  pool_out_shape(x, sd, g, size);
  /* indices are made when asked for or needed by backward */
  bool want_idx = is_max_kind(g->kind) && (indices || ltG_needs_grad(ctx, 1, &x));
  lt_tensor *xc = NULL, *y = NULL, *ix = NULL;
  if (lt_contiguous(ctx, &xc, x) || ltO_empty_as(ctx, &y, x, x->dtype, x->ndim, size) ||
      (want_idx && ltO_empty_as(ctx, &ix, x, LT_INT64, x->ndim, size))) {
    lt_release(xc);
    lt_release(y);
    return -1;
  }
  ltK_kernels(x)->pool(ctx, g, y, ix, xc);
  lt_release(xc);
  lt_node *node;
  if (ltG_record(ctx, types[g->kind], 1, &x, 1, &y, sizeof(pool_extra), want_idx ? 1 : 0,
                 &node)) {
    lt_release(y);
    lt_release(ix);
    return -1;
  }
  if (node) {
    pool_extra *ex = node->extra;
    ex->g = *g;
    ex->ndim = x->ndim;
    memcpy(ex->size, x->size, (size_t)x->ndim * sizeof(int64_t));
    if (want_idx && ltG_save(node, 0, ix, false)) {
      lt_release(y);
      lt_release(ix);
      return ltB_fail(ctx, "%s: out of memory saving indices for backward", op);
    }
  }
  *out = y;
  if (indices)
    *indices = ix;
  else
    lt_release(ix);
  return 0;
}

static int max_pool(lt_ctx *ctx, const char *op, int sd, lt_tensor **out, lt_tensor **indices,
                    lt_tensor *x, const lt_pool_args *a) {
  ltK_pool_geom g;
  if (pool_setup(ctx, op, sd, true, x, a, &g)) return -1;
  return pool_run(ctx, op, sd, x, &g, out, indices);
}

static int avg_pool(lt_ctx *ctx, const char *op, int sd, lt_tensor **out, lt_tensor *x,
                    const lt_pool_args *a) {
  ltK_pool_geom g;
  if (pool_setup(ctx, op, sd, false, x, a, &g)) return -1;
  return pool_run(ctx, op, sd, x, &g, out, NULL);
}

static int adaptive_pool(lt_ctx *ctx, const char *op, enum ltK_pool_kind kind, int sd,
                         lt_tensor **out, lt_tensor **indices, lt_tensor *x, const int64_t *osize) {
  ltK_pool_geom g;
  memset(&g, 0, sizeof g);
  if (pool_input(ctx, op, sd, x, &g)) return -1;
  for (int i = 0; i < sd; i++)
    if (osize[i] < 0)
      return ltB_fail(ctx, "%s: elements of output_size must be greater than or equal to 0, got "
                      "%lld", op, (long long)osize[i]);
  g.OH = sd == 2 ? osize[0] : 1;
  g.OW = osize[sd - 1];
  g.kind = kind;
  return pool_run(ctx, op, sd, x, &g, out, indices);
}

int lt_max_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                  const lt_pool_args *a) {
  return max_pool(ctx, "max_pool1d", 1, out, indices, x, a);
}
int lt_max_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                  const lt_pool_args *a) {
  return max_pool(ctx, "max_pool2d", 2, out, indices, x, a);
}
int lt_avg_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const lt_pool_args *a) {
  return avg_pool(ctx, "avg_pool1d", 1, out, x, a);
}
int lt_avg_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const lt_pool_args *a) {
  return avg_pool(ctx, "avg_pool2d", 2, out, x, a);
}
int lt_adaptive_avg_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, int64_t osize) {
  return adaptive_pool(ctx, "adaptive_avg_pool1d", LT_POOL_ADAPTIVE_AVG, 1, out, NULL, x, &osize);
}
int lt_adaptive_avg_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor *x, const int64_t *osize) {
  return adaptive_pool(ctx, "adaptive_avg_pool2d", LT_POOL_ADAPTIVE_AVG, 2, out, NULL, x, osize);
}
int lt_adaptive_max_pool1d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                           int64_t osize) {
  return adaptive_pool(ctx, "adaptive_max_pool1d", LT_POOL_ADAPTIVE_MAX, 1, out, indices, x, &osize);
}
int lt_adaptive_max_pool2d(lt_ctx *ctx, lt_tensor **out, lt_tensor **indices, lt_tensor *x,
                           const int64_t *osize) {
  return adaptive_pool(ctx, "adaptive_max_pool2d", LT_POOL_ADAPTIVE_MAX, 2, out, indices, x, osize);
}

void lt_pool_args_init(lt_pool_args *a) {
  memset(a, 0, sizeof *a);
  for (int i = 0; i < SP_DIMS; i++) a->dilation[i] = 1;
  a->count_include_pad = true;
}
