/*
** cpu/search.c -- cpu kernels of the arg searches: the first best element along a dim
** (`search_dim`: max/min with indices, argmax/argmin along a dim) and over a whole contiguous
** tensor (`search_flat`: argmax/argmin without a dim, chunked for threads). The first
** occurrence wins and NaN counts as the largest and the smallest.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu.h"

/* Index of the first largest (smallest) of x[0], x[s], ... x[(n-1)s]; the first NaN wins. */
#define FIND_BEST(T, ISNAN)                                                          \
  {                                                                                  \
    const T *x = (const T *)p;                                                       \
    T b = x[0];                                                                      \
    int64_t bi = 0;                                                                  \
    if (ISNAN(b)) return 0;                                                          \
    for (int64_t i = 1; i < n; i++) {                                                \
      T v = x[i * s];                                                                \
      if (ISNAN(v)) return i;                                                        \
      if (is_max ? v > b : v < b) {                                                  \
        b = v;                                                                       \
        bi = i;                                                                      \
      }                                                                              \
    }                                                                                \
    return bi;                                                                       \
  }

#define NOT_NAN(v) 0

static int64_t find_best(lt_dtype dt, bool is_max, const char *p, int64_t s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: FIND_BEST(float, isnan)
    case LT_FLOAT64: FIND_BEST(double, isnan)
    case LT_INT64: FIND_BEST(int64_t, NOT_NAN)
    default: FIND_BEST(uint8_t, NOT_NAN)
  }
}

/* Whether element j beats element i (i before j) under find_best's rule. */
static bool beats(lt_dtype dt, bool is_max, const char *p, int64_t i, int64_t j) {
  double a, b;
  switch (dt) {
    case LT_FLOAT32: a = ((const float *)p)[i]; b = ((const float *)p)[j]; break;
    case LT_FLOAT64: a = ((const double *)p)[i]; b = ((const double *)p)[j]; break;
    case LT_INT64: {
      int64_t x = ((const int64_t *)p)[i], y = ((const int64_t *)p)[j];
      return is_max ? y > x : y < x;
    }
    default: a = ((const uint8_t *)p)[i]; b = ((const uint8_t *)p)[j]; break;
  }
  if (a != a) return false;
  if (b != b) return true;
  return is_max ? b > a : b < a;
}

typedef struct search_ud {
  lt_dtype dt;
  bool is_max, want_val;
  int64_t base;
} search_ud;

/* operands: idx (int64), x, [values] */
static void search_row(const ltC_rowit *it, char **p, void *ud) {
  const search_ud *s = ud;
  int64_t bi = find_best(s->dt, s->is_max, p[1], it->rs[1], it->n);
  *(int64_t *)p[0] = bi + s->base;
  if (s->want_val) memcpy(p[2], p[1] + bi * it->rs[1] * it->es[1], (size_t)it->es[1]);
}

typedef struct flat_ud {
  lt_dtype dt;
  bool is_max;
  const char *x;
  int64_t n;
  int64_t *best;   /* per chunk */
} flat_ud;

static void flat_chunk(int64_t c0, int64_t c1, void *ud) {
  const flat_ud *f = ud;
  int64_t es = (int64_t)lt_dtype_size(f->dt);
  for (int64_t c = c0; c < c1; c++) {
    int64_t b = c * LT_CPU_CHUNK, n = ltC_min(LT_CPU_CHUNK, f->n - b);
    f->best[c] = b + find_best(f->dt, f->is_max, f->x + b * es, 1, n);
  }
}

/* Index of the best element of the contiguous x (n > 0), chunked for threads. */

void ltC_search_dim(lt_ctx *ctx, bool is_max, lt_tensor *idx, lt_tensor *values,
                    const lt_tensor *a, int dim, int64_t base) {
  const lt_tensor *ops[3] = {idx, a, values};
  ltC_rowit it;
  ltC_rowit_init(&it, values ? 3 : 2, ops, dim);
  search_ud s = {a->dtype, is_max, values != NULL, base};
  ltC_rows_run(ctx, &it, search_row, &s);
}

int ltC_search_flat(lt_ctx *ctx, const char *name, bool is_max, lt_tensor *out,
                    const lt_tensor *a, int64_t base) {
  int64_t n = lt_numel(a), nc = (n + LT_CPU_CHUNK - 1) / LT_CPU_CHUNK, one;
  const char *x = lt_data(a);
  flat_ud f = {a->dtype, is_max, x, n, nc > 1 ? malloc((size_t)nc * sizeof(int64_t)) : &one};
  if (!f.best) return ltB_fail(ctx, "%s: out of memory", name);
  ltB_parallel_for(ctx, nc, 2, flat_chunk, &f);
  int64_t b = f.best[0];
  for (int64_t c = 1; c < nc; c++)
    if (beats(a->dtype, is_max, x, b, f.best[c])) b = f.best[c];
  if (nc > 1) free(f.best);
  *(int64_t *)lt_data(out) = b + base;
  return 0;
}
