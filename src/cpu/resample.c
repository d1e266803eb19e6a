/*
** cpu/resample.c -- cpu kernels of one dim's resampling (`resample` and its backward), the
** steps of interpolate: x as (O, Nin, In), y as (O, Nout, In), output row j of each o read from
** source rows i0[j] and i1[j] with weights 1 - w1[j] and w1[j] (ltK_resample; nearest: i0[j]
** alone). Values are computed in the tensors' dtype, as PyTorch's upsampling kernels do.
**
** Forward runs over output rows (or, where inner == 1, over whole planes, the rows being single
** values); backward over the o slabs, each adding its outputs into the source rows in output
** order, so the gradient does not depend on the thread count.
*/
#include <string.h>

#include "cpu.h"

typedef struct rs_job {
  const ltK_resample *g;
  const char *x;
  char *y;
  const int64_t *i0, *i1;
  const void *w1;
} rs_job;

#define RS_ROWS(T)                                                                         \
  {                                                                                        \
    const ltK_resample *g = j->g;                                                          \
    const int64_t In = g->inner, Nin = g->Nin, Nout = g->Nout, base = g->base;                  \
    const T *w1 = j->w1;                                                                   \
    for (int64_t u = u0; u < u1; u++) {                                                    \
      int64_t o = u / Nout, r = u % Nout;                                                  \
      const T *a = (const T *)j->x + (o * Nin + j->i0[r] - base) * In;                      \
      T *y = (T *)j->y + u * In;                                                            \
      if (!w1) {                                                                           \
        memcpy(y, a, (size_t)In * sizeof(T));                                               \
        continue;                                                                          \
      }                                                                                    \
      const T *b = (const T *)j->x + (o * Nin + j->i1[r] - base) * In;                      \
      T w = w1[r], v = (T)1 - w;                                                           \
      for (int64_t i = 0; i < In; i++) y[i] = a[i] * v + b[i] * w;                          \
    }                                                                                      \
  }

/* inner == 1: planes o0..o1, each a gather of Nout values from its Nin */
#define RS_PLANES(T)                                                                       \
  {                                                                                        \
    const ltK_resample *g = j->g;                                                          \
    const int64_t Nin = g->Nin, Nout = g->Nout, base = g->base;                            \
    const T *w1 = j->w1;                                                                   \
    for (int64_t o = u0; o < u1; o++) {                                                    \
      const T *x = (const T *)j->x + o * Nin;                                              \
      T *y = (T *)j->y + o * Nout;                                                         \
      if (!w1)                                                                             \
        for (int64_t r = 0; r < Nout; r++) y[r] = x[j->i0[r] - base];                      \
      else                                                                                 \
        for (int64_t r = 0; r < Nout; r++)                                                 \
          y[r] = x[j->i0[r] - base] * ((T)1 - w1[r]) + x[j->i1[r] - base] * w1[r];         \
    }                                                                                      \
  }

/* slabs o0..o1 of dx += the map's transpose applied to dy; single-value rows (inner == 1) in
** their own loops, a row loop per value costing more than the value */
#define RS_BACK(T)                                                                         \
  {                                                                                        \
    const ltK_resample *g = j->g;                                                          \
    const int64_t In = g->inner, Nin = g->Nin, Nout = g->Nout, base = g->base;             \
    const int64_t *i0 = j->i0, *i1 = j->i1;                                                \
    const T *w1 = j->w1;                                                                   \
    for (int64_t o = u0; o < u1; o++) {                                                    \
      T *dx = (T *)j->y + o * Nin * In;                                                    \
      const T *dy = (const T *)j->x + o * Nout * In;                                       \
      if (In == 1 && !w1) {                                                                \
        for (int64_t r = 0; r < Nout; r++) dx[i0[r] - base] += dy[r];                      \
      } else if (In == 1) {                                                                \
        for (int64_t r = 0; r < Nout; r++) {                                               \
          dx[i0[r] - base] += dy[r] * ((T)1 - w1[r]);                                      \
          dx[i1[r] - base] += dy[r] * w1[r];                                               \
        }                                                                                  \
      } else {                                                                             \
        for (int64_t r = 0; r < Nout; r++) {                                               \
          const T *d = dy + r * In;                                                        \
          T *a = dx + (i0[r] - base) * In;                                                 \
          if (!w1) {                                                                       \
            for (int64_t i = 0; i < In; i++) a[i] += d[i];                                 \
            continue;                                                                      \
          }                                                                                \
          T *b = dx + (i1[r] - base) * In, w = w1[r], v = (T)1 - w;                        \
          for (int64_t i = 0; i < In; i++) a[i] += d[i] * v;                               \
          for (int64_t i = 0; i < In; i++) b[i] += d[i] * w;                               \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }

/* NAME_f32 and NAME_f64: range callbacks running BODY for each type */
#define DEF_TYPED(NAME, BODY)                                                              \
  static void NAME##_f32(int64_t u0, int64_t u1, void *ud) {                               \
    const rs_job *j = ud;                                                                  \
    BODY(float)                                                                            \
  }                                                                                        \
  static void NAME##_f64(int64_t u0, int64_t u1, void *ud) {                               \
    const rs_job *j = ud;                                                                  \
    BODY(double)                                                                           \
  }
DEF_TYPED(rows, RS_ROWS)
DEF_TYPED(planes, RS_PLANES)
DEF_TYPED(back, RS_BACK)

static rs_job job_of(const ltK_resample *g) {
  return (rs_job){.g = g, .i0 = ltB_ptr(g->i0), .i1 = g->i1 ? ltB_ptr(g->i1) : NULL,
                  .w1 = g->w1 ? ltB_ptr(g->w1) : NULL};
}

void ltC_resample(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, const ltK_resample *g) {
  rs_job j = job_of(g);
  j.x = ltB_ptr(x);
  j.y = ltB_ptr(y);
  bool f32 = x->dtype == LT_FLOAT32;
  if (g->inner == 1)
    ltB_parallel_for(ctx, g->O, ltC_grain(2 * g->Nout), f32 ? planes_f32 : planes_f64, &j);
  else
    ltB_parallel_for(ctx, g->O * g->Nout, ltC_grain(2 * g->inner), f32 ? rows_f32 : rows_f64, &j);
}

void ltC_resample_backward(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *dy,
                           const ltK_resample *g) {
  rs_job j = job_of(g);
  j.x = ltB_ptr(dy);
  j.y = ltB_ptr(dx);
  ltB_parallel_for(ctx, g->O, ltC_grain(2 * g->Nout * g->inner),
                   dx->dtype == LT_FLOAT32 ? back_f32 : back_f64, &j);
}
