/*
** random.c -- the op layer of the random fills, whose device kernels (cpu/random.c) draw from
** the host's generator (generator.c) in logical (row-major) order, and of multinomial, made of
** other ops (so that it runs on every device that has them).
*/
#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "elementwise.h"
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

/* Whether every weight is >= 0 (the smallest, which NaN fails) and finite, and every row's
** total > 0: the totals (the rows' sums, from the running sums when there are any) must then
** be finite too, which an infinite weight is not. */
static int check_weights(lt_ctx *ctx, lt_tensor *p, lt_tensor *total, bool *finite,
                         bool *positive) {
  lt_tensor *t[4] = {NULL};
  int rc = -1;
  bool nonneg = true;
  if (lt_numel(p) > 0 && (lt_reduce(ctx, &t[0], LT_RAMIN, p, 0, NULL, false) ||
                          lt_binary_scalar(ctx, &t[1], LT_GE, t[0], 0, true, false) ||
                          ltO_reduce_bool(ctx, "multinomial", LT_RALL, t[1], &nonneg)))
    goto done;
  if (lt_binary_scalar(ctx, &t[2], LT_LT, total, INFINITY, false, false) ||
      ltO_reduce_bool(ctx, "multinomial", LT_RALL, t[2], finite))
    goto done;
  *finite = *finite && nonneg;
  if (lt_binary_scalar(ctx, &t[3], LT_GT, total, 0, true, false) ||
      ltO_reduce_bool(ctx, "multinomial", LT_RALL, t[3], positive))
    goto done;
  rc = 0;
done:
  for (int i = 0; i < 4; i++) lt_release(t[i]);
  return rc;
}

/* The draws with replacement: each inverts its row's running sum cdf at a uniform draw scaled
** to the row's total, the first category whose running sum passes it (searchsorted, right).
** A draw that rounds up to the total goes to the last category of positive weight. */
static int with_replacement(lt_ctx *ctx, lt_tensor **out, lt_tensor *p, lt_tensor *cdf,
                            lt_tensor *total, int64_t num, lt_generator *gen, int64_t base) {
  int64_t size[2] = {p->size[0], num};
  lt_tensor *t[4] = {NULL};
  int rc = -1;
  if (lt_empty_on(ctx, &t[0], LT_FLOAT64, p->ndim, size + 2 - p->ndim, lt_device(p),
                  lt_device_index(p)) ||
      ltO_uniform_(ctx, t[0], 0, 1, gen) || lt_binary(ctx, &t[1], LT_MUL, t[0], total) ||
      lt_searchsorted(ctx, &t[2], cdf, t[1], true, base) ||
      lt_searchsorted(ctx, &t[3], cdf, total, false, base) ||
      lt_binary(ctx, out, LT_MINIMUM, t[2], t[3]))
    goto done;
  rc = 0;
done:
  for (int i = 0; i < 4; i++) lt_release(t[i]);
  return rc;
}

/* The draws without replacement, by a race of exponentials: with E_i = -log U_i, the num
** smallest E_i / p_i (topk) are categories drawn one after another in proportion to the
** weights left. U in [0, 1) makes log U < 0, so a zero weight's key is -inf, never NaN: zero
** weights come last, in position order. */
static int without_replacement(lt_ctx *ctx, lt_tensor **out, lt_tensor *p, int64_t num,
                               lt_generator *gen, int64_t base) {
  lt_tensor *t[4] = {NULL};
  int rc = -1;
  if (lt_empty_on(ctx, &t[0], LT_FLOAT64, p->ndim, p->size, lt_device(p), lt_device_index(p)) ||
      ltO_uniform_(ctx, t[0], 0, 1, gen) || lt_unary(ctx, &t[1], LT_LOG, t[0], 0, 0) ||
      lt_binary(ctx, &t[2], LT_DIV, t[1], p) ||   /* -E_i / p_i: the largest win */
      lt_topk(ctx, &t[3], out, t[2], num, p->ndim - 1, true, base))
    goto done;
  rc = 0;
done:
  for (int i = 0; i < 4; i++) lt_release(t[i]);
  return rc;
}

int ltO_multinomial(lt_ctx *ctx, lt_tensor **out, lt_tensor *probs, int64_t num,
                    bool replacement, lt_generator *gen, int64_t base) {
  if (probs->ndim != 1 && probs->ndim != 2)
    return ltB_fail(ctx, "multinomial: prob_dist must be 1 or 2 dim, got %d-d", probs->ndim);
  if (!lt_dtype_is_float(probs->dtype))
    return ltB_fail(ctx, "multinomial only supports floating-point dtypes for input, got: %s",
                    lt_dtype_name(probs->dtype));
  if (num <= 0) return ltB_fail(ctx, "multinomial: cannot sample n_sample <= 0 samples");
  int last = probs->ndim - 1;
  int64_t n = probs->size[last];
  if (!replacement && num > n)
    return ltB_fail(ctx, "multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
                    "without replacement (%lld samples, %lld categories)", (long long)num,
                    (long long)n);
  if (n == 0)
    return ltB_fail(ctx, "multinomial: invalid multinomial distribution (sum of probabilities "
                    "<= 0)");
  lt_tensor *d = NULL, *p = NULL, *cdf = NULL, *total = NULL;
  bool finite = true, positive = true;
  int rc = -1;
  /* the row totals: the running sums' last column with replacement, which needs them */
  if (lt_detach(ctx, &d, probs) || lt_to_dtype(ctx, &p, d, LT_FLOAT64) ||
      (replacement ? lt_cumsum(ctx, &cdf, p, last) || lt_narrow(ctx, &total, cdf, last, n - 1, 1)
                   : lt_reduce(ctx, &total, LT_RSUM, p, 1, &last, true)))
    goto done;
  if (check_weights(ctx, p, total, &finite, &positive)) goto done;
  if (!finite) {
    ltB_fail(ctx, "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
    goto done;
  }
  if (!positive) {
    ltB_fail(ctx, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    goto done;
  }
  rc = replacement ? with_replacement(ctx, out, p, cdf, total, num, gen, base)
                   : without_replacement(ctx, out, p, num, gen, base);
done:
  lt_release(d);
  lt_release(p);
  lt_release(cdf);
  lt_release(total);
  return rc;
}
