/*
** cpu/random.c -- cpu kernels of the random fills. The generator lives on the host (random.c
** owns it); these kernels draw from it in order and write the values to t's elements in
** logical (row-major) order, so a result depends only on the generator state and the shape,
** never on strides or thread count.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "../generator.h"

/* Values are drawn a chunk at a time, as one long draw would give them: the chunk is even, so
** normal's Box-Muller pairs never straddle two chunks. */
#define DRAW_CHUNK 256

/* A chunk of draws: doubles, or for randint int64 (ints), whose full range a double lacks */
typedef union draw_val {
  double d;
  int64_t i;
} draw_val;
typedef void (*draw_fn)(lt_generator *g, draw_val *out, int64_t n, const void *params);

static void put(char *p, lt_dtype dt, double v) {
  switch (dt) {
    case LT_FLOAT32: *(float *)p = (float)v; break;
    case LT_FLOAT64: *(double *)p = v; break;
    case LT_INT64: *(int64_t *)p = (int64_t)v; break;
    case LT_BOOL: *(bool *)p = v != 0; break;
    default: break;
  }
}

static void fill_logical(lt_tensor *t, lt_generator *g, draw_fn draw, const void *params,
                         bool ints) {
  int64_t n = lt_numel(t), es = (int64_t)ltB_esize(t->dtype);
  char *base = ltB_ptr(t);
  bool dense = lt_is_contiguous(t);
  int64_t idx[LT_MAX_DIMS] = {0};
  draw_val buf[DRAW_CHUNK];
  for (int64_t done = 0; done < n; done += DRAW_CHUNK) {
    int64_t m = ltC_min(DRAW_CHUNK, n - done);
    draw(g, buf, m, params);
    if (dense && t->dtype == LT_FLOAT32 && !ints) {   /* the common cases, loops GCC vectorises */
      float *o = (float *)base + done;
      for (int64_t i = 0; i < m; i++) o[i] = (float)buf[i].d;
      continue;
    }
    if (dense && t->dtype == LT_INT64 && ints) {
      int64_t *o = (int64_t *)base + done;
      for (int64_t i = 0; i < m; i++) o[i] = buf[i].i;
      continue;
    }
    for (int64_t i = 0; i < m; i++) {
      int64_t off = done + i;
      if (!dense) {
        off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
        for (int d = t->ndim - 1; d >= 0; d--) {
          if (++idx[d] < t->size[d]) break;
          idx[d] = 0;
        }
      }
      if (ints && t->dtype == LT_INT64)
        *(int64_t *)(base + off * es) = buf[i].i;
      else
        put(base + off * es, t->dtype, ints ? (double)buf[i].i : buf[i].d);
    }
  }
}

static void draw_uniform(lt_generator *g, draw_val *out, int64_t n, const void *params) {
  const double *p = params;
  for (int64_t i = 0; i < n; i++) out[i].d = p[0] + (p[1] - p[0]) * ltB_next_double(g);
}

/* n standard normals scaled (p: mean, std): the draws of (n + 1) / 2 pairs (n <= DRAW_CHUNK) */
static void draw_normal(lt_generator *g, draw_val *out, int64_t n, const void *params) {
  const double *p = params;
  double z[DRAW_CHUNK];   /* the draws, then in place their normals */
  int64_t pairs = (n + 1) / 2;
  for (int64_t i = 0; i < pairs; i++) ltB_normal_draws(g, z + 2 * i);
  ltC_normal_block(z, pairs);
  for (int64_t i = 0; i < n; i++) out[i].d = p[0] + p[1] * z[i];
}

/* randint's values: lo + ltB_next_below(span) in integers, its two divisions by the span made
** once a chunk: the rejection limit, and r % span as r - q span with q from a multiply by m =
** floor((2^64 - 1) / span), which is at most one short (r m / 2^64 > r / span - 1, as 2^64 -
** span m <= span): randint of 1M took 6.0 ms against PyTorch's 3.3. */
typedef struct randint_params {
  int64_t lo;
  uint64_t span;
} randint_params;

static void draw_randint(lt_generator *g, draw_val *out, int64_t n, const void *params) {
  const randint_params *p = params;
  uint64_t span = p->span, limit = UINT64_MAX - UINT64_MAX % span, magic = UINT64_MAX / span;
  for (int64_t i = 0; i < n; i++) {
    uint64_t r;
    do r = ltB_next_u64(g); while (r >= limit);
    uint64_t rem = r - (uint64_t)(((unsigned __int128)r * magic) >> 64) * span;
    rem -= span & -(uint64_t)(rem >= span);   /* a mask, not a branch: which it is varies */
    out[i].i = (int64_t)((uint64_t)p->lo + rem);
  }
}

static void draw_bernoulli(lt_generator *g, draw_val *out, int64_t n, const void *params) {
  const double *p = params;
  for (int64_t i = 0; i < n; i++) out[i].d = ltB_next_double(g) < p[0] ? 1.0 : 0.0;
}

void ltC_uniform(lt_tensor *t, double lo, double hi, lt_generator *g) {
  const double p[2] = {lo, hi};
  fill_logical(t, g, draw_uniform, p, false);
}

/* normal_ on a dense tensor of NORMAL_PAR elements or more: this thread takes the generator's
** draws in order, a block at a time, and the Box-Muller transform of each pair, whose log, sin
** and cos cost several times the two draws, runs over the pool (randn of 256 x 1024 took 5.6
** ms on one thread with libm's). The formulas are draw_normal's, so the values are those of
** the one-thread loop at any thread count. */
#define NORMAL_PAR 8192
#define NORMAL_BLOCK 32768   /* draws per block (even: pairs never straddle two) */

typedef struct {
  double *u;         /* the block's draws: 1 - u1, u2 for each pair, then their normals */
  char *out;         /* the block's first element */
  lt_dtype dt;
  int64_t es, n;     /* element size, elements in the block */
  double mean, std;
} normal_job;

static void normal_pairs(int64_t p0, int64_t p1, void *ud) {
  const normal_job *j = ud;
  double *z = j->u + 2 * p0;
  ltC_normal_block(z, p1 - p0);
  int64_t m = ltC_min(2 * (p1 - p0), j->n - 2 * p0);
  for (int64_t i = 0; i < m; i++) put(j->out + (2 * p0 + i) * j->es, j->dt, j->mean + j->std * z[i]);
}

void ltC_normal(lt_ctx *ctx, lt_tensor *t, double mean, double std, lt_generator *g) {
  const double p[2] = {mean, std};
  int64_t n = lt_numel(t), es = (int64_t)ltB_esize(t->dtype);
  double *u = n >= NORMAL_PAR && lt_is_contiguous(t) && ctx->num_threads > 1
                  ? malloc(NORMAL_BLOCK * sizeof *u) : NULL;
  if (!u) {   /* (out of memory too: the one-thread loop needs none) */
    fill_logical(t, g, draw_normal, p, false);
    return;
  }
  char *base = ltB_ptr(t);
  for (int64_t done = 0; done < n; done += NORMAL_BLOCK) {
    int64_t m = ltC_min(NORMAL_BLOCK, n - done), pairs = (m + 1) / 2;
    for (int64_t i = 0; i < 2 * pairs; i += 2) ltB_normal_draws(g, u + i);
    normal_job j = {.u = u, .out = base + done * es, .dt = t->dtype, .es = es, .n = m,
                    .mean = mean, .std = std};
    ltB_parallel_for(ctx, pairs, 512, normal_pairs, &j);
  }
  free(u);
}

/* The span in integers: as doubles, bounds near 2^62 gave values past hi, and the full range's
** span (2^64 - 1, rounded to 2^64) a division by zero. */
void ltC_randint(lt_tensor *t, int64_t lo, int64_t hi, lt_generator *g) {
  const randint_params p = {lo, (uint64_t)hi - (uint64_t)lo};
  fill_logical(t, g, draw_randint, &p, true);
}

void ltC_bernoulli(lt_tensor *t, double prob, lt_generator *g) {
  const double p[1] = {prob};
  fill_logical(t, g, draw_bernoulli, p, false);
}

void ltC_randperm(lt_tensor *t, lt_generator *g) {
  int64_t n = lt_numel(t), *p = ltB_ptr(t);
  for (int64_t i = 0; i < n; i++) p[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {   /* Fisher-Yates */
    int64_t j = (int64_t)ltB_next_below(g, (uint64_t)i + 1);
    int64_t tmp = p[i];
    p[i] = p[j];
    p[j] = tmp;
  }
}
