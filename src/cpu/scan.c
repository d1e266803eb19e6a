/*
** cpu/scan.c -- cpu kernel of the running sum along one dim (`cumsum`), forward or from the
** end (its gradient). Floats accumulate in double, integers and bools in wrapping int64.
*/
#include <stdint.h>

#include "cpu.h"

typedef struct scan_mode {
  lt_dtype dt;   /* the input's */
  bool rev;
} scan_mode;

/* operands: y, x (forward: reverse = 0) or gi, g (backward: sums from the end) */
#define CUMSUM_ROW(TO, TI, ACC)                                                      \
  {                                                                                  \
    TO *y = (TO *)p[0];                                                              \
    const TI *x = (const TI *)p[1];                                                  \
    ACC s = 0;                                                                       \
    if (!rev)                                                                        \
      for (int64_t i = 0; i < n; i++) {                                              \
        s += (ACC)x[i * xs];                                                         \
        y[i * ys] = (TO)s;                                                           \
      }                                                                              \
    else                                                                             \
      for (int64_t i = n - 1; i >= 0; i--) {                                         \
        s += (ACC)x[i * xs];                                                         \
        y[i * ys] = (TO)s;                                                           \
      }                                                                              \
    return;                                                                          \
  }

static void cumsum_row(const ltC_rowit *it, char **p, void *ud) {
  const scan_mode *mode = ud;
  bool rev = mode->rev;
  int64_t n = it->n, ys = it->rs[0], xs = it->rs[1];
  switch (mode->dt) {
    case LT_FLOAT32: CUMSUM_ROW(float, float, double)
    case LT_FLOAT64: CUMSUM_ROW(double, double, double)
    case LT_INT64: CUMSUM_ROW(int64_t, int64_t, uint64_t)
    default: CUMSUM_ROW(int64_t, uint8_t, uint64_t)
  }
}

void ltC_cumsum(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool reverse) {
  const lt_tensor *ops[2] = {y, x};
  ltC_rowit it;
  ltC_rowit_init(&it, 2, ops, dim);
  scan_mode mode = {x->dtype, reverse};
  ltC_rows_run(ctx, &it, cumsum_row, &mode);
}
