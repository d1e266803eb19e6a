/*
** cpu/copy.c -- the cpu copy kernel (dtype conversion and broadcasting of the source to the
** destination's shape) and the fill kernel.
*/
#include "../core.h"

typedef struct { lt_dtype dst, src; } copy_types;

/* One loop per (dst, src) dtype pair; LOOP expands into a strided conversion loop. */
#define LOOP(TD, TS, CONV)                                                   \
  do {                                                                       \
    if (sd == (int64_t)sizeof(TD) && ss == (int64_t)sizeof(TS)) {            \
      TD *d = (TD *)data[0];                                                 \
      const TS *s = (const TS *)data[1];                                     \
      for (int64_t i = 0; i < n; i++) d[i] = CONV(s[i]);                     \
    } else {                                                                 \
      for (int64_t i = 0; i < n; i++)                                        \
        *(TD *)(data[0] + i * sd) = CONV(*(const TS *)(data[1] + i * ss));   \
    }                                                                        \
  } while (0)

#define AS_IS(x) (x)
#define TO_BOOL(x) ((x) != 0)

static void copy_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const copy_types *ct = ud;
  int64_t sd = st[0], ss = st[1];
  /* dense rows of one dtype (a bias broadcast down the rows of addmm's C): libc's copy is wider
  ** than the build's baseline vectors */
  if (ct->dst == ct->src && sd == ss && sd == (int64_t)lt_dtype_size(ct->dst)) {
    memmove(data[0], data[1], (size_t)(n * sd));
    return;
  }
  switch (ct->dst * LT_NDTYPE + ct->src) {
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT32: LOOP(float, float, AS_IS); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT64: LOOP(float, double, (float)); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_INT64: LOOP(float, int64_t, (float)); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_BOOL: LOOP(float, bool, (float)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT32: LOOP(double, float, (double)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT64: LOOP(double, double, AS_IS); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_INT64: LOOP(double, int64_t, (double)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_BOOL: LOOP(double, bool, (double)); break;
    case LT_INT64 * LT_NDTYPE + LT_FLOAT32: LOOP(int64_t, float, (int64_t)); break;
    case LT_INT64 * LT_NDTYPE + LT_FLOAT64: LOOP(int64_t, double, (int64_t)); break;
    case LT_INT64 * LT_NDTYPE + LT_INT64: LOOP(int64_t, int64_t, AS_IS); break;
    case LT_INT64 * LT_NDTYPE + LT_BOOL: LOOP(int64_t, bool, (int64_t)); break;
    case LT_BOOL * LT_NDTYPE + LT_FLOAT32: LOOP(bool, float, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_FLOAT64: LOOP(bool, double, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_INT64: LOOP(bool, int64_t, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_BOOL: LOOP(bool, bool, AS_IS); break;
    default: break;
  }
}

void ltC_copy(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src) {
  if (dst->dtype == src->dtype && lt_is_contiguous(dst) && lt_is_contiguous(src) &&
      ltB_same_shape(dst, src)) {
    size_t n = (size_t)lt_numel(dst) * lt_dtype_size(dst->dtype);
    if (n) memmove(lt_data(dst), lt_data(src), n);
    return;
  }
  lt_tensor *ops[2] = {dst, (lt_tensor *)src};
  ltB_iter it;
  ltB_iter_init(&it, 2, ops, dst->ndim, dst->size);
  copy_types ct = {dst->dtype, src->dtype};
  ltB_iter_run(ctx, &it, copy_row, &ct);
}

typedef struct { lt_dtype dt; double v; } fill_args;

static void fill_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const fill_args *fa = ud;
  int64_t s = st[0];
  switch (fa->dt) {
    case LT_FLOAT32: {
      float v = (float)fa->v;
      if (s == 4) {
        float *d = (float *)data[0];
        for (int64_t i = 0; i < n; i++) d[i] = v;
      } else {
        for (int64_t i = 0; i < n; i++) *(float *)(data[0] + i * s) = v;
      }
      break;
    }
    case LT_FLOAT64:
      for (int64_t i = 0; i < n; i++) *(double *)(data[0] + i * s) = fa->v;
      break;
    case LT_INT64:
      for (int64_t i = 0; i < n; i++) *(int64_t *)(data[0] + i * s) = (int64_t)fa->v;
      break;
    case LT_BOOL:
      for (int64_t i = 0; i < n; i++) *(bool *)(data[0] + i * s) = fa->v != 0;
      break;
    default: break;
  }
}

void ltC_fill(lt_ctx *ctx, lt_tensor *dst, double v) {
  lt_tensor *ops[1] = {dst};
  ltB_iter it;
  ltB_iter_init(&it, 1, ops, dst->ndim, dst->size);
  fill_args fa = {dst->dtype, v};
  ltB_iter_run(ctx, &it, fill_row, &fa);
}
