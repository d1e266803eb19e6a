/*
** creation.c -- the op layer of ranges and identity matrices: arange, linspace, eye, computed
** by the device's arange/linspace kernels (cpu/range.c) and its fill. (Filled and copied
** tensors -- full, clone, contiguous, to_dtype -- live in copy.c; random ones in random.c.)
*/
#include <math.h>

#include "backend.h"

int lt_arange(lt_ctx *ctx, lt_tensor **out, double start, double end, double step, lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return ltB_fail(ctx, "arange: unknown dtype %d", (int)dt);
  if (dt == LT_BOOL) return ltB_fail(ctx, "arange: not implemented for dtype bool");
  if (!isfinite(start) || !isfinite(end) || !isfinite(step))
    return ltB_fail(ctx, "arange: unsupported range %g to %g with step %g", start, end, step);
  if (step == 0) return ltB_fail(ctx, "arange: step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return ltB_fail(ctx, "arange: upper bound and larger bound inconsistent with step sign "
                    "(start=%g, end=%g, step=%g)", start, end, step);
  double cnt = ceil((end - start) / step);
  if (!(cnt >= 0) || cnt > 9.0e15)
    return ltB_fail(ctx, "arange: invalid number of elements %g (start=%g, end=%g, step=%g)",
                    cnt, start, end, step);
  int64_t n = (int64_t)cnt;
  lt_tensor *t;
  if (lt_empty(ctx, &t, dt, 1, &n)) return -1;
  ltK_kernels(t)->arange(t, start, step);
  *out = t;
  return 0;
}

int lt_arange_int(lt_ctx *ctx, lt_tensor **out, int64_t start, int64_t end, int64_t step) {
  if (step == 0) return ltB_fail(ctx, "arange: step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start))
    return ltB_fail(ctx, "arange: upper bound and larger bound inconsistent with step sign "
                    "(start=%lld, end=%lld, step=%lld)", (long long)start, (long long)end,
                    (long long)step);
  /* ceil((end - start) / step) without overflow: the span fits in an unsigned 64-bit int */
  uint64_t span = step > 0 ? (uint64_t)end - (uint64_t)start : (uint64_t)start - (uint64_t)end;
  uint64_t st = step > 0 ? (uint64_t)step : 0 - (uint64_t)step;
  uint64_t cnt = span / st + (span % st != 0);
  if (cnt > (uint64_t)INT64_MAX / 16)
    return ltB_fail(ctx, "arange: too many elements (start=%lld, end=%lld, step=%lld)",
                    (long long)start, (long long)end, (long long)step);
  int64_t n = (int64_t)cnt;
  lt_tensor *t;
  if (lt_empty(ctx, &t, LT_INT64, 1, &n)) return -1;
  ltK_kernels(t)->arange_int(t, start, step);
  *out = t;
  return 0;
}

int lt_linspace(lt_ctx *ctx, lt_tensor **out, double start, double end, int64_t steps,
                lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return ltB_fail(ctx, "linspace: unknown dtype %d", (int)dt);
  if (dt == LT_BOOL) return ltB_fail(ctx, "linspace: not implemented for dtype bool");
  if (steps < 0) return ltB_fail(ctx, "linspace: number of steps must be non-negative, got %lld",
                                 (long long)steps);
  lt_tensor *t;
  if (lt_empty(ctx, &t, dt, 1, &steps)) return -1;
  ltK_kernels(t)->linspace(t, start, end);
  *out = t;
  return 0;
}

int lt_eye(lt_ctx *ctx, lt_tensor **out, int64_t n, int64_t m, lt_dtype dt) {
  if ((unsigned)dt >= LT_NDTYPE) return ltB_fail(ctx, "eye: unknown dtype %d", (int)dt);
  if (n < 0 || m < 0)
    return ltB_fail(ctx, "eye: n and m must be non-negative, got n=%lld m=%lld", (long long)n,
                    (long long)m);
  int64_t size[2] = {n, m};
  lt_tensor *t;
  if (lt_full(ctx, &t, dt, 2, size, 0.0)) return -1;
  /* ones on the diagonal: a view of stride m + 1 filled by the device */
  int64_t k = n < m ? n : m, dstride = m + 1;
  lt_tensor *diag = ltB_alias(t, 1, &k, &dstride, t->offset);
  if (!diag) {
    lt_release(t);
    return ltB_fail(ctx, "eye: out of memory");
  }
  ltK_kernels(t)->fill(ctx, diag, 1.0);
  lt_release(diag);
  *out = t;
  return 0;
}
