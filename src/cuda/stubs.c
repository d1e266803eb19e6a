/*
** stubs.c -- every compute entry of the kernel table as a stub, so that an op whose kernel the
** plugin lacks fails with "<op>: not implemented on cuda" instead of calling NULL. An int entry
** fails at once; a void entry (the table says those never fail) pends the message, reported by
** the next allocation, copy to the host or synchronize (internal.h), and leaves its output
** unwritten. Entries that answer a question (has_nan, mask_count, index_range) pend and give
** the answer that makes the op go on to a stub or an allocation that reports it.
*/
#include "internal.h"

/* A stub's parameters are the entry's signature, and it reads none of them. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define NI "%s: not implemented on cuda"
#define PEND(op) ltc_pend(NI, op)
#define FAIL(ctx, op) ltc_host->fail(ctx, NI, op)

static void s_matmul(lt_ctx *ctx, int nb, const int64_t *batch, double alpha, const lt_tensor *a,
                     ltK_mat_dims da, const lt_tensor *b, ltK_mat_dims db, double beta,
                     lt_tensor *c, ltK_mat_dims dc) { PEND("matmul"); }
static bool s_matmul_ready(const lt_tensor *t, ltK_mat_dims d) { return true; }
static int s_reduce(lt_ctx *ctx, const char *name, enum lt_redop op, lt_tensor *out,
                    const lt_tensor *a, const bool *mask) { return FAIL(ctx, name); }
static void s_prod_backward(lt_tensor *gi, const lt_tensor *x, const lt_tensor *g, int64_t rows,
                            int64_t n) { PEND("prod backward"); }
static bool s_has_nan(const lt_tensor *t) { PEND("isnan check"); return false; }
static void s_search_dim(lt_ctx *ctx, bool is_max, lt_tensor *idx, lt_tensor *values,
                         const lt_tensor *a, int dim, int64_t base) {
  PEND(is_max ? "max/argmax" : "min/argmin");
}
static int s_search_flat(lt_ctx *ctx, const char *name, bool is_max, lt_tensor *out,
                         const lt_tensor *a, int64_t base) { return FAIL(ctx, name); }
static void s_softmax(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool log_) {
  PEND(log_ ? "log_softmax" : "softmax");
}
static void s_softmax_backward(lt_ctx *ctx, lt_tensor *gi, const lt_tensor *y,
                               const lt_tensor *g, int dim, bool log_) {
  PEND("softmax backward");
}
static void s_cumsum(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool reverse) {
  PEND("cumsum");
}
static void s_searchsorted(lt_ctx *ctx, lt_tensor *out, const lt_tensor *sorted,
                           const lt_tensor *values, bool right, int64_t base) {
  PEND("searchsorted");
}
static int s_sort(lt_ctx *ctx, const char *name, lt_tensor *values, lt_tensor *indices,
                  const lt_tensor *a, int dim, bool descending, int64_t base) {
  return FAIL(ctx, name);
}
static bool s_index_range(lt_ctx *ctx, const lt_tensor *index, int64_t lo, int64_t hi,
                          const int64_t *skip, int64_t *bad, int64_t *max) {
  PEND("indexing");
  *bad = lo;
  *max = INT64_MIN;
  return true;
}
static void s_gather(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src, int dim,
                     const lt_tensor *index, int64_t base) { PEND("gather"); }
static void s_scatter(lt_ctx *ctx, lt_tensor *self, int dim, const lt_tensor *index,
                      const lt_tensor *src, bool accumulate, int64_t base) { PEND("scatter"); }
static void s_masked_fill(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src,
                          const lt_tensor *mask, double v) { PEND("masked_fill"); }
static int64_t s_mask_count(const lt_tensor *mask) { PEND("masked_select"); return 0; }
static void s_masked_select(lt_tensor *out, const lt_tensor *src, const lt_tensor *mask) {
  PEND("masked_select");
}
static void s_masked_scatter(lt_tensor *dst, const lt_tensor *mask, const lt_tensor *src) {
  PEND("masked_scatter");
}
static int s_conv(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *y,
                  const lt_tensor *x, const lt_tensor *w, const lt_tensor *b) {
  return FAIL(ctx, name);
}
static int s_conv_backward(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *dx,
                           lt_tensor *dw, lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                           const lt_tensor *dy) { return FAIL(ctx, name); }
static void s_pool(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *y, lt_tensor *idx,
                   const lt_tensor *x) { PEND("pooling"); }
static void s_pool_backward(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *dx,
                            const lt_tensor *dy, const lt_tensor *idx) {
  PEND("pooling backward");
}
static void s_batch_norm(lt_ctx *ctx, lt_tensor *y, lt_tensor *mean, lt_tensor *invstd,
                         const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
                         lt_tensor *running_mean, lt_tensor *running_var, bool training,
                         double momentum, double eps) { PEND("batch_norm"); }
static int s_batch_norm_backward(lt_ctx *ctx, lt_tensor *dx, lt_tensor *dw, lt_tensor *db,
                                 const lt_tensor *x, const lt_tensor *w, const lt_tensor *dy,
                                 const lt_tensor *mean, const lt_tensor *invstd,
                                 bool training) { return FAIL(ctx, "batch_norm backward"); }
static void s_row_norm(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *y, lt_tensor *mean,
                       lt_tensor *rstd, const lt_tensor *x, const lt_tensor *w,
                       const lt_tensor *b) { PEND("layer_norm/rms_norm/group_norm"); }
static int s_row_norm_backward(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *dx, lt_tensor *dw,
                               lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                               const lt_tensor *dy, const lt_tensor *mean,
                               const lt_tensor *rstd) { return FAIL(ctx, "norm backward"); }
static int s_sdpa(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *out, lt_tensor *lse,
                  const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                  const lt_tensor *mask) { return FAIL(ctx, "scaled_dot_product_attention"); }
static int s_sdpa_backward(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *dq, lt_tensor *dk,
                           lt_tensor *dv, const lt_tensor *q, const lt_tensor *k,
                           const lt_tensor *v, const lt_tensor *mask, const lt_tensor *out,
                           const lt_tensor *lse, const lt_tensor *dout) {
  return FAIL(ctx, "scaled_dot_product_attention backward");
}
static void s_dropout(lt_tensor *y, lt_tensor *mask, const lt_tensor *x, double p,
                      lt_generator *g) { PEND("dropout"); }
static int s_class_loss(lt_ctx *ctx, lt_tensor *y, lt_tensor *lse, const lt_tensor *x,
                        const lt_tensor *target, const lt_tensor *weight, ltK_class_loss *a) {
  return FAIL(ctx, a->logits ? "cross_entropy" : "nll_loss");
}
static void s_class_loss_backward(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *g,
                                  const lt_tensor *x, const lt_tensor *target,
                                  const lt_tensor *weight, const lt_tensor *lse,
                                  const ltK_class_loss *a) {
  PEND("loss backward");
}
static void s_resample(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, const ltK_resample *g) {
  PEND("interpolate");
}
static void s_resample_backward(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *dy,
                                const ltK_resample *g) { PEND("interpolate backward"); }
static int s_regression_loss(lt_ctx *ctx, int kind, lt_tensor *out, double *sum,
                             const lt_tensor *a, const lt_tensor *b, double p) {
  return FAIL(ctx, "regression loss");
}
static void s_regression_loss_backward(lt_ctx *ctx, int kind, int side, lt_tensor *da,
                                       const lt_tensor *g, double scale, const lt_tensor *a,
                                       const lt_tensor *b, double p) {
  PEND("regression loss backward");
}
static void s_uniform(lt_tensor *t, double lo, double hi, lt_generator *g) { PEND("uniform_"); }
static void s_normal(lt_ctx *ctx, lt_tensor *t, double mean, double std, lt_generator *g) {
  (void)ctx;
  PEND("normal_");
}
static void s_randint(lt_tensor *t, int64_t lo, int64_t hi, lt_generator *g) { PEND("randint"); }
static void s_bernoulli(lt_tensor *t, double p, lt_generator *g) { PEND("bernoulli"); }
static void s_randperm(lt_tensor *t, lt_generator *g) { PEND("randperm"); }
static void s_sgd_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                       const lt_sgd_opts *o) { PEND("SGD step"); }
static void s_adam_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m,
                        lt_tensor *v, lt_tensor *vmax, const lt_adam_opts *o) { PEND("Adam step"); }
static void s_rmsprop_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                           lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o) {
  PEND("RMSprop step");
}
static void s_adagrad_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                           const lt_adagrad_opts *o) { PEND("Adagrad step"); }
static void s_arange(lt_tensor *t, double start, double step) { PEND("arange"); }
static void s_arange_int(lt_tensor *t, int64_t start, int64_t step) { PEND("arange"); }
static void s_linspace(lt_tensor *t, double start, double end) { PEND("linspace"); }
static void s_copy(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src) { PEND("copy"); }
static void s_fill(lt_ctx *ctx, lt_tensor *dst, double v) { PEND("fill"); }
static void s_binary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                     lt_dtype compute, double p0, double p1) { PEND("binary op"); }
static void s_binary_flat(int op, lt_dtype dt, int64_t n, void *out, const void *a, int sa,
                          const void *b, int sb) { PEND("binary op"); }
static void s_unary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, double p0,
                    double p1) { PEND("unary op"); }
static void s_ternary(lt_ctx *ctx, enum ltK_ternary_op op, lt_tensor *out, const lt_tensor *g,
                      const lt_tensor *a, const lt_tensor *b) { PEND("gradient of a binary op"); }
static void s_where(lt_ctx *ctx, lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                    const lt_tensor *b) { PEND("where"); }

/* unary_pair, addc, unique_few, addmm_row and sumsq stay NULL: the op layer then runs the separate
** ops those entries stand for, which the plugin has. */
void ltc_stub_entries(ltK_backend *b) {
  *b = (ltK_backend){
      .copy = s_copy, .fill = s_fill, .binary = s_binary, .binary_flat = s_binary_flat,
      .unary = s_unary, .ternary = s_ternary, .where = s_where, .matmul = s_matmul, .matmul_ready = s_matmul_ready,
      .reduce = s_reduce, .prod_backward = s_prod_backward, .has_nan = s_has_nan,
      .search_dim = s_search_dim, .search_flat = s_search_flat, .softmax = s_softmax,
      .softmax_backward = s_softmax_backward, .cumsum = s_cumsum, .sort = s_sort,
      .searchsorted = s_searchsorted,
      .index_range = s_index_range, .gather = s_gather, .scatter = s_scatter,
      .masked_fill = s_masked_fill, .mask_count = s_mask_count,
      .masked_select = s_masked_select, .masked_scatter = s_masked_scatter, .conv = s_conv,
      .conv_backward = s_conv_backward, .pool = s_pool, .pool_backward = s_pool_backward,
      .batch_norm = s_batch_norm, .batch_norm_backward = s_batch_norm_backward,
      .row_norm = s_row_norm, .row_norm_backward = s_row_norm_backward,
      .sdpa = s_sdpa, .sdpa_backward = s_sdpa_backward,
      .dropout = s_dropout, .class_loss = s_class_loss,
      .class_loss_backward = s_class_loss_backward,
      .resample = s_resample, .resample_backward = s_resample_backward,
      .regression_loss = s_regression_loss,
      .regression_loss_backward = s_regression_loss_backward, .uniform = s_uniform,
      .normal = s_normal, .randint = s_randint, .bernoulli = s_bernoulli,
      .randperm = s_randperm, .sgd_step = s_sgd_step, .adam_step = s_adam_step,
      .rmsprop_step = s_rmsprop_step, .adagrad_step = s_adagrad_step, .arange = s_arange,
      .arange_int = s_arange_int, .linspace = s_linspace,
  };
}
