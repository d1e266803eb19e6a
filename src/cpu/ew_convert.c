/*
** cpu/ew_convert.c -- dtype conversion of strided runs, for the elementwise kernels' blocks.
*/
#include "ew.h"

/* One loop per (source, destination) pair so that each is a plain typed copy. */
#define LT_EW_CV(TS, TD, EXPR)                   \
  for (int64_t i = 0; i < n; i++) {              \
    TS v = *(const TS *)(src + i * ss);          \
    *(TD *)(dst + i * ds) = (EXPR);              \
  }                                              \
  break

void ltC_ew_convert(const char *src, int64_t ss, lt_dtype sd, char *dst, int64_t ds, lt_dtype dd,
                    int64_t n) {
  switch (sd * LT_NDTYPE + dd) {
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT32: LT_EW_CV(float, float, v);
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT64: LT_EW_CV(float, double, (double)v);
    case LT_FLOAT32 * LT_NDTYPE + LT_INT64: LT_EW_CV(float, int64_t, ltC_ew_f2i(v));
    case LT_FLOAT32 * LT_NDTYPE + LT_BOOL: LT_EW_CV(float, ltC_u8, v != 0);
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT32: LT_EW_CV(double, float, (float)v);
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT64: LT_EW_CV(double, double, v);
    case LT_FLOAT64 * LT_NDTYPE + LT_INT64: LT_EW_CV(double, int64_t, ltC_ew_f2i(v));
    case LT_FLOAT64 * LT_NDTYPE + LT_BOOL: LT_EW_CV(double, ltC_u8, v != 0);
    case LT_INT64 * LT_NDTYPE + LT_FLOAT32: LT_EW_CV(int64_t, float, (float)v);
    case LT_INT64 * LT_NDTYPE + LT_FLOAT64: LT_EW_CV(int64_t, double, (double)v);
    case LT_INT64 * LT_NDTYPE + LT_INT64: LT_EW_CV(int64_t, int64_t, v);
    case LT_INT64 * LT_NDTYPE + LT_BOOL: LT_EW_CV(int64_t, ltC_u8, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_FLOAT32: LT_EW_CV(ltC_u8, float, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_FLOAT64: LT_EW_CV(ltC_u8, double, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_INT64: LT_EW_CV(ltC_u8, int64_t, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_BOOL: LT_EW_CV(ltC_u8, ltC_u8, v != 0);
    default: break;
  }
}
