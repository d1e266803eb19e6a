/*
** random.c -- the op layer of the random fills, whose device kernels (cpu/random.c) draw from
** the host's generator (generator.c) in logical (row-major) order.
*/
#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "generator.h"

static const ltG_node_type uniform_type = {"UniformBackward0", ltO_zero_backward, NULL};
static const ltG_node_type normal_type = {"NormalBackward0", ltO_zero_backward, NULL};
static const ltG_node_type random_type = {"RandomBackward0", ltO_zero_backward, NULL};
static const ltG_node_type bernoulli_type = {"BernoulliBackward2", ltO_zero_backward, NULL};

/* Whether a fill of t goes ahead: t may be written in place and has elements. */
static int fill_begins(lt_ctx *ctx, const char *op, lt_tensor *t, bool *any) {
  if (ltB_check_inplace(ctx, op, t)) return -1;
  *any = lt_numel(t) > 0;
  return 0;
}

/* After the kernel: a t that requires grad is recorded with `type` (its gradient to the old
** values is zero). */
static int fill_ends(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *t) {
  ltB_bump_version(t);
  return ltG_record_overwrite(ctx, type, t);
}

int ltO_uniform_(lt_ctx *ctx, lt_tensor *t, double lo, double hi, lt_generator *gen) {
  if (!(lo <= hi)) return ltB_fail(ctx, "uniform_: expects from <= to, got from=%g to=%g", lo, hi);
  bool any;
  if (fill_begins(ctx, "uniform_", t, &any)) return -1;
  if (!any) return 0;
  ltK_kernels(t)->uniform(t, lo, hi, gen ? gen : ctx->gen);
  return fill_ends(ctx, &uniform_type, t);
}

int ltO_normal_(lt_ctx *ctx, lt_tensor *t, double mean, double std, lt_generator *gen) {
  if (!(std >= 0)) return ltB_fail(ctx, "normal_: expects std >= 0.0, got std=%g", std);
  bool any;
  if (fill_begins(ctx, "normal_", t, &any)) return -1;
  if (!any) return 0;
  ltK_kernels(t)->normal(ctx, t, mean, std, gen ? gen : ctx->gen);
  return fill_ends(ctx, &normal_type, t);
}

int ltO_randint_(lt_ctx *ctx, lt_tensor *t, int64_t lo, int64_t hi, lt_generator *gen) {
  if (lo >= hi)
    return ltB_fail(ctx, "random_: expects from < to, got from=%lld to=%lld", (long long)lo,
                    (long long)hi);
  bool any;
  if (fill_begins(ctx, "random_", t, &any)) return -1;
  if (!any) return 0;
  ltK_kernels(t)->randint(t, lo, hi, gen ? gen : ctx->gen);
  return fill_ends(ctx, &random_type, t);
}

int ltO_bernoulli_(lt_ctx *ctx, lt_tensor *t, double prob, lt_generator *gen) {
  if (!(prob >= 0 && prob <= 1))
    return ltB_fail(ctx, "bernoulli_: expects p to be in [0, 1], but got p=%g",
                    prob != prob ? NAN : prob);
  bool any;
  if (fill_begins(ctx, "bernoulli_", t, &any)) return -1;
  if (!any) return 0;
  ltK_kernels(t)->bernoulli(t, prob, gen ? gen : ctx->gen);
  return fill_ends(ctx, &bernoulli_type, t);
}

int ltO_randperm(lt_ctx *ctx, lt_tensor **out, int64_t n, lt_generator *gen) {
  if (n < 0) return ltB_fail(ctx, "randperm: n must be non-negative, got %lld", (long long)n);
  lt_tensor *t;
  if (lt_empty(ctx, &t, LT_INT64, 1, &n)) return -1;
  ltK_kernels(t)->randperm(t, gen ? gen : ctx->gen);
  *out = t;
  return 0;
}
