/*
** random.c -- generators and random fills. Fills go element by element in logical (row-major)
** order, so a result depends only on the generator state and the shape, never on strides or
** thread count.
*/
#include <math.h>
#include <stdlib.h>

#include "random.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

lt_generator *lt_generator_new(uint64_t seed) {
  lt_generator *g = malloc(sizeof *g);
  if (g) lt_generator_seed(g, seed);
  return g;
}

void lt_generator_free(lt_generator *g) { free(g); }

void lt_generator_seed(lt_generator *g, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) g->s[i] = splitmix64(&x);
  g->seed = seed;
}

void lt_generator_get_state(const lt_generator *g, uint64_t *w) {
  for (int i = 0; i < 4; i++) w[i] = g->s[i];
  w[4] = g->seed;
}

void lt_generator_set_state(lt_generator *g, const uint64_t *w) {
  for (int i = 0; i < 4; i++) g->s[i] = w[i];
  g->seed = w[4];
  if (!(g->s[0] | g->s[1] | g->s[2] | g->s[3])) lt_generator_seed(g, g->seed);
}

uint64_t lt_next_below(lt_generator *g, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = lt_next_u64(g); while (r >= limit);
  return r % n;
}

void lt_fill_normal(lt_generator *g, double *out, int64_t n) {
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = 1.0 - lt_next_double(g);   /* (0, 1] keeps log finite */
    double u2 = lt_next_double(g);
    double r = sqrt(-2.0 * log(u1));
    out[i] = r * cos(2.0 * M_PI * u2);
    if (i + 1 < n) out[i + 1] = r * sin(2.0 * M_PI * u2);
  }
}


static void put(char *p, lt_dtype dt, double v) {
  switch (dt) {
    case LT_FLOAT32: *(float *)p = (float)v; break;
    case LT_FLOAT64: *(double *)p = v; break;
    case LT_INT64: *(int64_t *)p = (int64_t)v; break;
    case LT_BOOL: *(bool *)p = v != 0; break;
    default: break;
  }
}

/* Visits t's elements in row-major logical order, writing values from src[]. */
static void scatter_logical(lt_tensor *t, const double *src) {
  int64_t n = lt_numel(t);
  size_t es = lt_dtype_size(t->dtype);
  char *base = lt_data(t);
  if (lt_is_contiguous(t)) {
    for (int64_t i = 0; i < n; i++) put(base + i * (int64_t)es, t->dtype, src[i]);
    return;
  }
  int64_t idx[LT_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    put(base + off * (int64_t)es, t->dtype, src[i]);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->size[d]) break;
      idx[d] = 0;
    }
  }
}

static const lt_node_type uniform_type = {"UniformBackward0", lt_zero_backward, NULL};
static const lt_node_type normal_type = {"NormalBackward0", lt_zero_backward, NULL};
static const lt_node_type random_type = {"RandomBackward0", lt_zero_backward, NULL};
static const lt_node_type bernoulli_type = {"BernoulliBackward2", lt_zero_backward, NULL};

/* Draws n values with draw() into a scratch buffer, then writes them into t; a t that requires
** grad is recorded with `type` (its gradient to the old values is zero). */
static int fill_with(lt_ctx *ctx, const char *op, const lt_node_type *type, lt_tensor *t,
                     lt_generator *g,
                     void (*draw)(lt_generator *, double *, int64_t, const double *),
                     const double *params) {
  if (lt_check_inplace(ctx, op, t)) return -1;
  int64_t n = lt_numel(t);
  if (n == 0) return 0;
  size_t got;
  double *buf = lt_cache_alloc((size_t)n * sizeof(double), &got);
  if (!buf) return lt_fail(ctx, "%s: out of memory", op);
  draw(g ? g : ctx->gen, buf, n, params);
  scatter_logical(t, buf);
  lt_cache_free(buf, (size_t)n * sizeof(double));
  lt_bump_version(t);
  return lt_record_overwrite(ctx, type, t);
}

static void draw_uniform(lt_generator *g, double *out, int64_t n, const double *p) {
  for (int64_t i = 0; i < n; i++) out[i] = p[0] + (p[1] - p[0]) * lt_next_double(g);
}

static void draw_normal(lt_generator *g, double *out, int64_t n, const double *p) {
  lt_fill_normal(g, out, n);
  for (int64_t i = 0; i < n; i++) out[i] = p[0] + p[1] * out[i];
}

static void draw_randint(lt_generator *g, double *out, int64_t n, const double *p) {
  uint64_t span = (uint64_t)(p[1] - p[0]);
  for (int64_t i = 0; i < n; i++) out[i] = p[0] + (double)lt_next_below(g, span);
}

static void draw_bernoulli(lt_generator *g, double *out, int64_t n, const double *p) {
  for (int64_t i = 0; i < n; i++) out[i] = lt_next_double(g) < p[0] ? 1.0 : 0.0;
}

int lt_uniform_(lt_ctx *ctx, lt_tensor *t, double lo, double hi, lt_generator *gen) {
  if (!(lo <= hi)) return lt_fail(ctx, "uniform_: expects from <= to, got from=%g to=%g", lo, hi);
  double p[2] = {lo, hi};
  return fill_with(ctx, "uniform_", &uniform_type, t, gen, draw_uniform, p);
}

int lt_normal_(lt_ctx *ctx, lt_tensor *t, double mean, double std, lt_generator *gen) {
  if (!(std >= 0)) return lt_fail(ctx, "normal_: expects std >= 0.0, got std=%g", std);
  double p[2] = {mean, std};
  return fill_with(ctx, "normal_", &normal_type, t, gen, draw_normal, p);
}

int lt_randint_(lt_ctx *ctx, lt_tensor *t, int64_t lo, int64_t hi, lt_generator *gen) {
  if (lo >= hi)
    return lt_fail(ctx, "random_: expects from < to, got from=%lld to=%lld", (long long)lo,
                   (long long)hi);
  double p[2] = {(double)lo, (double)hi};
  return fill_with(ctx, "random_", &random_type, t, gen, draw_randint, p);
}

int lt_bernoulli_(lt_ctx *ctx, lt_tensor *t, double prob, lt_generator *gen) {
  if (!(prob >= 0 && prob <= 1))
    return lt_fail(ctx, "bernoulli_: expects p to be in [0, 1], but got p=%g",
                   prob != prob ? NAN : prob);
  double p[1] = {prob};
  return fill_with(ctx, "bernoulli_", &bernoulli_type, t, gen, draw_bernoulli, p);
}

int lt_randperm(lt_ctx *ctx, lt_tensor **out, int64_t n, lt_generator *gen) {
  if (n < 0) return lt_fail(ctx, "randperm: n must be non-negative, got %lld", (long long)n);
  lt_tensor *t;
  if (lt_empty(ctx, &t, LT_INT64, 1, &n)) return -1;
  int64_t *p = lt_data(t);
  lt_generator *g = gen ? gen : ctx->gen;
  for (int64_t i = 0; i < n; i++) p[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {   /* Fisher-Yates */
    int64_t j = (int64_t)lt_next_below(g, (uint64_t)i + 1);
    int64_t tmp = p[i];
    p[i] = p[j];
    p[j] = tmp;
  }
  *out = t;
  return 0;
}
