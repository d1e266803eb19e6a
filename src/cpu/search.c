/*
** cpu/search.c -- cpu kernels of the arg searches: the first best element along a dim
** (`search_dim`: max/min with indices, argmax/argmin along a dim) and over a whole contiguous
** tensor (`search_flat`: argmax/argmin without a dim, chunked for threads). The first
** occurrence wins and NaN counts as the largest and the smallest.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* find_best (below) element by element, any dtype and stride. */
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

static int64_t find_best_loop(lt_dtype dt, bool is_max, const char *p, int64_t s, int64_t n) {
  switch (dt) {
    case LT_FLOAT32: FIND_BEST(float, isnan)
    case LT_FLOAT64: FIND_BEST(double, isnan)
    case LT_INT64: FIND_BEST(int64_t, NOT_NAN)
    default: FIND_BEST(uint8_t, NOT_NAN)
  }
}

/* The first position of the best of a contiguous float row, in two passes that vectorise: the
** row's extreme by extreme.c's integer keys, then the first element equal to it, or the first
** NaN where there is one (the element loop's answer: among equal values, -0 and +0 included,
** the first). The loop, one compare and branch per element, took 1.4 ms for the maxima of 1024
** rows of 1024 floats, where amax took 0.15. */
#define FIRST_BLOCK 16
#define FIRST_OF(T, HIT)                                                             \
  {                                                                                  \
    const T *x = (const T *)p;                                                       \
    for (int64_t i0 = 0; i0 < n; i0 += FIRST_BLOCK) {                                \
      int w = (int)ltC_min(FIRST_BLOCK, n - i0), hit = 0;                            \
      for (int k = 0; k < w; k++) hit |= HIT(x[i0 + k]);                             \
      if (hit)                                                                       \
        for (int k = 0; k < w; k++)                                                  \
          if (HIT(x[i0 + k])) return i0 + k;                                        \
    }                                                                                \
    return 0;                                                                        \
  }
#define IS_M(v) ((v) == m)
#define IS_NAN(v) ((v) != (v))

static int64_t first_f32(const char *p, int64_t n, float m, bool nan) {
  if (nan) FIRST_OF(float, IS_NAN)
  FIRST_OF(float, IS_M)
}

static int64_t first_f64(const char *p, int64_t n, double m, bool nan) {
  if (nan) FIRST_OF(double, IS_NAN)
  FIRST_OF(double, IS_M)
}

static int64_t find_best_dense(lt_dtype dt, bool is_max, const char *p, int64_t n) {
  bool nan;
  if (dt == LT_FLOAT32) {
    float m = ltC_extreme_f32((const float *)p, n, is_max, &nan);
    return first_f32(p, n, m, nan);
  }
  double m = ltC_extreme_f64((const double *)p, n, is_max, &nan);
  return first_f64(p, n, m, nan);
}

/* Index of the first largest (smallest) of x[0], x[s], ... x[(n-1)s]; the first NaN wins. */
static int64_t find_best(lt_dtype dt, bool is_max, const char *p, int64_t s, int64_t n) {
  if (s == 1 && n >= FIRST_BLOCK && (dt == LT_FLOAT32 || dt == LT_FLOAT64))
    return find_best_dense(dt, is_max, p, n);
  return find_best_loop(dt, is_max, p, s, n);
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

/* A dim other than the last of a contiguous tensor, seen as (outer, n, inner): the rows of n
** lie inner elements apart, so find_best would touch a cache line per element and reuse it
** only inner rows later (argmax down the rows of 1024 x 1024 took 3.3 ms). These keep the best
** so far of SEARCH_COLS neighbouring columns and walk the n rows once, by the same rule (the
** first NaN wins and stays, else a strictly better value), as selects that vectorise (the
** conditions joined by & and |: with && and || GCC kept a branch per element). */
#define SEARCH_COLS 256
typedef struct cols_job {
  lt_dtype dt;
  bool is_max;
  const char *x;
  int64_t *idx;
  char *val;
  int64_t n, inner, nb, base;   /* nb: column blocks per outer position */
} cols_job;

#define SEARCH_COLS_T(T, I)                                                                \
  for (int64_t u = u0; u < u1; u++) {                                                      \
    int64_t o = u / j->nb, c0 = u % j->nb * SEARCH_COLS;                                   \
    int64_t w = ltC_min(SEARCH_COLS, j->inner - c0);                                       \
    const T *x = (const T *)j->x + o * j->n * j->inner + c0;                               \
    T b[SEARCH_COLS];                                                                      \
    I bi[SEARCH_COLS]; /* the index in a lane as wide as the value's, so the selects vectorise */ \
    for (int64_t c = 0; c < w; c++) b[c] = x[c], bi[c] = 0;                                \
    for (int64_t i = 1; i < j->n; i++) {                                                   \
      const T *r = x + i * j->inner;                                                       \
      if (j->is_max)                                                                       \
        for (int64_t c = 0; c < w; c++) {                                                  \
          T v = r[c];                                                                      \
          bool take = (b[c] == b[c]) & ((v != v) | (v > b[c]));                            \
          b[c] = take ? v : b[c];                                                          \
          bi[c] = take ? (I)i : bi[c];                                                     \
        }                                                                                  \
      else                                                                                 \
        for (int64_t c = 0; c < w; c++) {                                                  \
          T v = r[c];                                                                      \
          bool take = (b[c] == b[c]) & ((v != v) | (v < b[c]));                            \
          b[c] = take ? v : b[c];                                                          \
          bi[c] = take ? (I)i : bi[c];                                                     \
        }                                                                                  \
    }                                                                                      \
    int64_t at = o * j->inner + c0;                                                        \
    for (int64_t c = 0; c < w; c++) j->idx[at + c] = bi[c] + j->base;                      \
    if (j->val) memcpy((T *)j->val + at, b, (size_t)w * sizeof(T));                        \
  }

static void search_cols(int64_t u0, int64_t u1, void *ud) {
  const cols_job *j = ud;
  switch (j->dt) {
    case LT_FLOAT32: SEARCH_COLS_T(float, int32_t) break;
    case LT_FLOAT64: SEARCH_COLS_T(double, int64_t) break;
    default: SEARCH_COLS_T(int64_t, int64_t) break;
  }
}

/* Whether t (the op layer's view of an output: a's shape, stride 0 along d) is laid out
** densely over the other dims, in order. */
static bool dense_but(const lt_tensor *t, int d) {
  int64_t run = 1;
  for (int k = t->ndim - 1; k >= 0; k--) {
    if (k == d || t->size[k] == 1) continue;
    if (t->stride[k] != run) return false;
    run *= t->size[k];
  }
  return true;
}

static bool search_dim_cols(lt_ctx *ctx, bool is_max, lt_tensor *idx, lt_tensor *values,
                            const lt_tensor *a, int dim, int64_t base) {
  if (dim >= a->ndim - 1 || !lt_is_contiguous(a) || !dense_but(idx, dim) ||
      (values && !dense_but(values, dim)) ||
      (a->dtype != LT_FLOAT32 && a->dtype != LT_FLOAT64 && a->dtype != LT_INT64))
    return false;
  int64_t outer = 1, inner = 1, n = a->size[dim];
  for (int d = 0; d < dim; d++) outer *= a->size[d];
  for (int d = dim + 1; d < a->ndim; d++) inner *= a->size[d];
  if (n == 0 || n > INT32_MAX || inner < 8) return false;
  cols_job j = {a->dtype, is_max, lt_data(a), lt_data(idx), values ? lt_data(values) : NULL,
                n, inner, (inner + SEARCH_COLS - 1) / SEARCH_COLS, base};
  ltB_parallel_for(ctx, outer * j.nb, ltC_grain(n * SEARCH_COLS), search_cols, &j);
  return true;
}

void ltC_search_dim(lt_ctx *ctx, bool is_max, lt_tensor *idx, lt_tensor *values,
                    const lt_tensor *a, int dim, int64_t base) {
  if (search_dim_cols(ctx, is_max, idx, values, a, dim, base)) return;
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
