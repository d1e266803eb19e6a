/*
** cpu/range.c -- cpu kernels of the deterministic fills of creation.c: arange (double and
** exact integer forms) and linspace, each into a fresh 1-d contiguous tensor, computed as
** PyTorch's cpu kernels compute them so the values agree bit for bit.
*/
#include "cpu.h"

static void put(char *p, lt_dtype dt, double v) {
  switch (dt) {
    case LT_FLOAT32: *(float *)p = (float)v; break;
    case LT_FLOAT64: *(double *)p = v; break;
    case LT_INT64: *(int64_t *)p = (int64_t)v; break;
    case LT_BOOL: *(bool *)p = v != 0; break;
    default: break;
  }
}

/* Integers that int64 holds exactly as doubles step exactly; beyond them go through double. */
#define EXACT_INT_LIMIT 9.0e18

void ltC_arange(lt_tensor *t, double start, double step) {
  int64_t n = lt_numel(t);
  switch (t->dtype) {
    case LT_FLOAT32: {   /* computed in double, as PyTorch's cpu kernel does */
      float *f = ltB_ptr(t);
      for (int64_t i = 0; i < n; i++) f[i] = (float)(start + step * (double)i);
      break;
    }
    case LT_FLOAT64: {
      double *d = ltB_ptr(t);
      for (int64_t i = 0; i < n; i++) d[i] = start + step * (double)i;
      break;
    }
    default: {
      int64_t *q = ltB_ptr(t);
      if (start == trunc(start) && step == trunc(step) && fabs(start) < EXACT_INT_LIMIT &&
          fabs(step) < EXACT_INT_LIMIT) {
        int64_t s0 = (int64_t)start, st = (int64_t)step;
        for (int64_t i = 0; i < n; i++) q[i] = s0 + st * i;
      } else {
        for (int64_t i = 0; i < n; i++) q[i] = (int64_t)(start + step * (double)i);
      }
      break;
    }
  }
}

void ltC_arange_int(lt_tensor *t, int64_t start, int64_t step) {
  int64_t n = lt_numel(t), *q = ltB_ptr(t);
  for (int64_t i = 0; i < n; i++) q[i] = (int64_t)((uint64_t)start + (uint64_t)step * (uint64_t)i);
}

void ltC_linspace(lt_tensor *t, double start, double end) {
  int64_t steps = lt_numel(t), half = steps / 2;
  lt_dtype dt = t->dtype;
  char *p = ltB_ptr(t);
  if (steps == 1) {
    put(p, dt, start);
  } else if (dt == LT_FLOAT32) {
    /* float arithmetic, filled from both ends with fused multiply-adds */
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
      put(p + i * (int64_t)ltB_esize(dt), dt,
          i < half ? fma(st, (double)i, s) : fma(-st, (double)(steps - i - 1), e));
  }
}
