/*
** cpu/extreme.c -- the largest or smallest of a contiguous float row (amax, amin, max and min
** over all elements or along a dim, a cross_entropy row's max), and the column maxima and
** minima of float32 rows, at each vector level.
**
** The floats are compared as signed integers: the bits, with the magnitude bits flipped for a
** negative (an involution), are in the floats' order with -0 below +0. One body, written so
** that GCC vectorises it (integer max, an OR of NaN tests), is compiled at each level; integer
** maxima have no rounding, so every level gives the same bits however many lanes it has, and so
** does every thread count. The float compare-and-select loop this replaces ran at a quarter of
** PyTorch's speed (3.2M floats: 0.70 against 0.16 ms; float64, scalar, 7.3 against 0.56).
*/
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"

#define EXT_INLINE static inline __attribute__((always_inline))

/* The floats' bits, read as integers of their width (GCC does not vectorise a memcpy from a
** float into an integer, nor a float NaN test, here). */
typedef int32_t __attribute__((may_alias)) bits32;
typedef int64_t __attribute__((may_alias)) bits64;

/* m = the largest (smallest) key of the n floats whose bits are b[0, n); bad = whether there
** was a NaN, whose key counts too: the caller then has no use for m. All in integers, so that
** GCC vectorises it. */
#define EXTREME_LOOP(I, ORDER, ISNAN, CMP)                                         \
  for (int64_t i = 0; i < n; i++) {                                                \
    I k = ORDER(b[i]);                                                             \
    bad |= ISNAN(b[i]);                                                            \
    m = k CMP m ? k : m;                                                           \
  }

/* The float of the largest (smallest) key of x[0, n); *nan says whether x held a NaN. */
#define EXTREME_BODY(F, I, IMIN, IMAX, ORDER, ISNAN)                               \
  I m = is_max ? IMIN : IMAX;                                                      \
  int bad = 0;                                                                     \
  if (is_max)                                                                      \
    EXTREME_LOOP(I, ORDER, ISNAN, >)                                               \
  else                                                                             \
    EXTREME_LOOP(I, ORDER, ISNAN, <)                                               \
  *nan = bad != 0;                                                                 \
  I u = ORDER(m);                                                                  \
  F r;                                                                             \
  memcpy(&r, &u, sizeof r);                                                        \
  return r;

static inline bool isnan_bits64(int64_t u) {
  return (u & INT64_MAX) > INT64_C(0x7ff0000000000000);
}

EXT_INLINE float body_f32(const float *x, int64_t n, bool is_max, bool *nan) {
  const bits32 *b = (const bits32 *)x;
  EXTREME_BODY(float, int32_t, INT32_MIN, INT32_MAX, ltC_order32, ltC_isnan_bits32)
}

EXT_INLINE double body_f64(const double *x, int64_t n, bool is_max, bool *nan) {
  const bits64 *b = (const bits64 *)x;
  EXTREME_BODY(double, int64_t, INT64_MIN, INT64_MAX, ltC_order64, isnan_bits64)
}

/* One row into the column keys; a NaN keys as the far end, so that it wins and stays. The
** fold into doubles with a zero rule that this replaced (reduce.c) took 64 rows of 50257 floats
** 2.5 ms against PyTorch's 0.4. */
#define COLS_LOOP(CMP, NANKEY)                                                     \
  for (int64_t j = 0; j < n; j++) {                                                \
    int32_t key = ltC_isnan_bits32(b[j]) ? NANKEY : ltC_order32(b[j]);             \
    k[j] = key CMP k[j] ? key : k[j];                                              \
  }

EXT_INLINE void body_cols(int32_t *restrict k, const float *x, int64_t n, bool is_max) {
  const bits32 *b = (const bits32 *)x;
  if (is_max) {
    COLS_LOOP(>, INT32_MAX)
  } else {
    COLS_LOOP(<, INT32_MIN)
  }
}

static float f32_sse4(const float *x, int64_t n, bool is_max, bool *nan) {
  return body_f32(x, n, is_max, nan);
}
static double f64_sse4(const double *x, int64_t n, bool is_max, bool *nan) {
  return body_f64(x, n, is_max, nan);
}
static void cols_sse4(int32_t *restrict k, const float *x, int64_t n, bool is_max) {
  body_cols(k, x, n, is_max);
}

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static float f32_avx2(const float *x, int64_t n, bool is_max, bool *nan) {
  return body_f32(x, n, is_max, nan);
}
static double f64_avx2(const double *x, int64_t n, bool is_max, bool *nan) {
  return body_f64(x, n, is_max, nan);
}
static void cols_avx2(int32_t *restrict k, const float *x, int64_t n, bool is_max) {
  body_cols(k, x, n, is_max);
}
LT_ISA_END
LT_ISA_BEGIN_AVX512
static float f32_avx512(const float *x, int64_t n, bool is_max, bool *nan) {
  return body_f32(x, n, is_max, nan);
}
static double f64_avx512(const double *x, int64_t n, bool is_max, bool *nan) {
  return body_f64(x, n, is_max, nan);
}
static void cols_avx512(int32_t *restrict k, const float *x, int64_t n, bool is_max) {
  body_cols(k, x, n, is_max);
}
LT_ISA_END
#endif

float ltC_extreme_f32(const float *x, int64_t n, bool is_max, bool *nan) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return f32_avx512(x, n, is_max, nan);
    case LT_ISA_AVX2: return f32_avx2(x, n, is_max, nan);
    default: break;
  }
#endif
  return f32_sse4(x, n, is_max, nan);
}

double ltC_extreme_f64(const double *x, int64_t n, bool is_max, bool *nan) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return f64_avx512(x, n, is_max, nan);
    case LT_ISA_AVX2: return f64_avx2(x, n, is_max, nan);
    default: break;
  }
#endif
  return f64_sse4(x, n, is_max, nan);
}

ltC_extreme_cols_fn ltC_extreme_cols_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return cols_avx512;
    case LT_ISA_AVX2: return cols_avx2;
    default: break;
  }
#endif
  return cols_sse4;
}
