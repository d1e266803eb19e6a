/*
** creation.c -- ranges and identity matrices: arange, linspace, eye. (Filled and copied
** tensors -- full, clone, contiguous, to_dtype -- live in copy.c; random ones in random.c.)
*/
#include <math.h>

#include "core.h"

static void put(char *p, lt_dtype dt, double v) {
  switch (dt) {
    case LT_FLOAT32: *(float *)p = (float)v; break;
    case LT_FLOAT64: *(double *)p = v; break;
    case LT_INT64: *(int64_t *)p = (int64_t)v; break;
    case LT_BOOL: *(bool *)p = v != 0; break;
    default: break;
  }
}

int lt_arange(lt_ctx *ctx, lt_tensor **out, double start, double end, double step, lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return lt_fail(ctx, "arange: unknown dtype %d", (int)dt);
  if (dt == LT_BOOL) return lt_fail(ctx, "arange: not implemented for dtype bool");
  if (!isfinite(start) || !isfinite(end) || !isfinite(step))
    return lt_fail(ctx, "arange: unsupported range %g to %g with step %g", start, end, step);
  if (step == 0) return lt_fail(ctx, "arange: step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return lt_fail(ctx, "arange: upper bound and larger bound inconsistent with step sign "
                   "(start=%g, end=%g, step=%g)", start, end, step);
  double cnt = ceil((end - start) / step);
  if (!(cnt >= 0) || cnt > 9.0e15)
    return lt_fail(ctx, "arange: invalid number of elements %g (start=%g, end=%g, step=%g)",
                   cnt, start, end, step);
  int64_t n = (int64_t)cnt;
  lt_tensor *t;
  if (lt_empty(ctx, &t, dt, 1, &n)) return -1;
  char *p = lt_data(t);
  switch (dt) {
    case LT_FLOAT32: {   /* computed in double, as PyTorch's cpu kernel does */
      float *f = (float *)p;
      for (int64_t i = 0; i < n; i++) f[i] = (float)(start + step * (double)i);
      break;
    }
    case LT_FLOAT64: {
      double *d = (double *)p;
      for (int64_t i = 0; i < n; i++) d[i] = start + step * (double)i;
      break;
    }
    default: {
      int64_t *q = (int64_t *)p;
      if (start == trunc(start) && step == trunc(step) && fabs(start) < 9.0e18 &&
          fabs(step) < 9.0e18) {   /* exact integer arithmetic */
        int64_t s0 = (int64_t)start, st = (int64_t)step;
        for (int64_t i = 0; i < n; i++) q[i] = s0 + st * i;
      } else {
        for (int64_t i = 0; i < n; i++) q[i] = (int64_t)(start + step * (double)i);
      }
      break;
    }
  }
  *out = t;
  return 0;
}

int lt_arange_int(lt_ctx *ctx, lt_tensor **out, int64_t start, int64_t end, int64_t step) {
  if (step == 0) return lt_fail(ctx, "arange: step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return lt_fail(ctx, "arange: upper bound and larger bound inconsistent with step sign "
                   "(start=%lld, end=%lld, step=%lld)", (long long)start, (long long)end,
                   (long long)step);
  /* ceil((end - start) / step) without overflow: the span fits in an unsigned 64-bit int */
  uint64_t span = step > 0 ? (uint64_t)end - (uint64_t)start : (uint64_t)start - (uint64_t)end;
  uint64_t st = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
  uint64_t cnt = span / st + (span % st != 0);
  if (cnt > (uint64_t)INT64_MAX / 16)
    return lt_fail(ctx, "arange: too many elements (start=%lld, end=%lld, step=%lld)",
                   (long long)start, (long long)end, (long long)step);
  int64_t n = (int64_t)cnt;
  lt_tensor *t;
  if (lt_empty(ctx, &t, LT_INT64, 1, &n)) return -1;
  int64_t *q = lt_data(t);
  for (int64_t i = 0; i < n; i++) q[i] = (int64_t)((uint64_t)start + (uint64_t)step * (uint64_t)i);
  *out = t;
  return 0;
}

int lt_linspace(lt_ctx *ctx, lt_tensor **out, double start, double end, int64_t steps,
                lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return lt_fail(ctx, "linspace: unknown dtype %d", (int)dt);
  if (dt == LT_BOOL) return lt_fail(ctx, "linspace: not implemented for dtype bool");
  if (steps < 0) return lt_fail(ctx, "linspace: number of steps must be non-negative, got %lld",
                                (long long)steps);
  lt_tensor *t;
  if (lt_empty(ctx, &t, dt, 1, &steps)) return -1;
  char *p = lt_data(t);
  int64_t half = steps / 2;
  if (steps == 1) {
    put(p, dt, start);
  } else if (dt == LT_FLOAT32) {
    /* float arithmetic, filled from both ends with fused multiply-adds, as PyTorch's cpu
    ** kernel computes it (so the values agree bit for bit) */
    float s = (float)start, e = (float)end, st = (e - s) / (float)(steps - 1);
    float *f = (float *)p;
    for (int64_t i = 0; i < steps; i++)
      f[i] = i < half ? fmaf(st, (float)i, s) : fmaf(-st, (float)(steps - i - 1), e);
  } else if (steps > 1) {
    double s = start, e = end;
    if (dt == LT_INT64) {   /* PyTorch converts the ends to the integer dtype first */
      s = (double)(int64_t)s;
      e = (double)(int64_t)e;
    }
    double st = (e - s) / (double)(steps - 1);
    for (int64_t i = 0; i < steps; i++)
      put(p + i * (int64_t)lt_dtype_size(dt), dt,
          i < half ? fma(st, (double)i, s) : fma(-st, (double)(steps - i - 1), e));
  }
  *out = t;
  return 0;
}

int lt_eye(lt_ctx *ctx, lt_tensor **out, int64_t n, int64_t m, lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return lt_fail(ctx, "eye: unknown dtype %d", (int)dt);
  if (n < 0 || m < 0)
    return lt_fail(ctx, "eye: n and m must be non-negative, got n=%lld m=%lld", (long long)n,
                   (long long)m);
  int64_t size[2] = {n, m};
  lt_tensor *t;
  if (lt_full(ctx, &t, dt, 2, size, 0.0)) return -1;
  char *p = lt_data(t);
  size_t es = lt_dtype_size(dt);
  int64_t k = n < m ? n : m;
  for (int64_t i = 0; i < k; i++) put(p + (i * m + i) * (int64_t)es, dt, 1.0);
  *out = t;
  return 0;
}
