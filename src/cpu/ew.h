/*
** cpu/ew.h -- what the elementwise kernels (binary.c, unary.c, ternary.c) share: dtype
** conversion through small blocks, integer arithmetic that wraps, and the parameters every
** element formula receives.
**
** Each kernel is a row function for ltB_iter over the innermost (collapsed) dim with byte
** strides. A loop (ew_loop2.h, ew_loop1.h) takes an element formula, a small always-inlined
** function, and has one body per stride pattern (all contiguous, scalar right, scalar left,
** strided) so the compiler vectorises the common ones with the formula inlined.
*/
#ifndef LT_CPU_EW_H
#define LT_CPU_EW_H

#include <stdint.h>

#include "../core.h"
#include "vmath.h"

#define LT_EW_INLINE static inline __attribute__((always_inline))
/* elements per on-stack conversion block */
#define LT_EW_BLK 256
/* elements per on-stack block of a strided row (ew_loop1.h, ew_loop2.h): the element loops ran
** one element at a time, exp of a transposed float32 input at 3.5 ns an element */
#define LT_EW_GATHER 64

typedef uint8_t ltC_u8;

/* The formulas' parameters (clamp bounds, slopes, isclose tolerances) in the compute type. */
typedef struct ewp_float { float q0, q1; } ewp_float;
typedef struct ewp_double { double q0, q1; } ewp_double;
typedef struct ewp_int64_t { int64_t q0, q1; } ewp_int64_t;
typedef struct ewp_lt_u8 { int q0, q1; } ewp_lt_u8;

/* dst[i*ds] = (dd) src[i*ss] for n elements, strides in bytes. */
void ltC_ew_convert(const char *src, int64_t ss, lt_dtype sd, char *dst, int64_t ds, lt_dtype dd,
                    int64_t n);

/* float to int64 as C would, but total: NaN gives 0, out-of-range values saturate. */
static inline int64_t ltC_ew_f2i(double x) {
  if (x != x) return 0;
  if (x >= 9.2233720368547758e18) return INT64_MAX;
  if (x <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)x;
}

/* Integer arithmetic wraps (two's complement) like PyTorch instead of being undefined. */
LT_EW_INLINE int64_t ltC_ew_wadd(int64_t x, int64_t y) {
  return (int64_t)((uint64_t)x + (uint64_t)y);
}
LT_EW_INLINE int64_t ltC_ew_wsub(int64_t x, int64_t y) {
  return (int64_t)((uint64_t)x - (uint64_t)y);
}
LT_EW_INLINE int64_t ltC_ew_wmul(int64_t x, int64_t y) {
  return (int64_t)((uint64_t)x * (uint64_t)y);
}

/* The exponents of pow with a cheaper form, as PyTorch's kernel has (x, x*x, x*x*x, sqrt x,
** 1/x, 1/sqrt x, 1/(x*x)); LT_POW_ANY for any other (libm's pow). */
enum { LT_POW_ANY, LT_POW_1, LT_POW_2, LT_POW_3, LT_POW_HALF, LT_POW_M1, LT_POW_MHALF, LT_POW_M2 };
static inline int ltC_pow_form(double e) {
  return e == 1 ? LT_POW_1 : e == 2 ? LT_POW_2 : e == 3 ? LT_POW_3 : e == 0.5 ? LT_POW_HALF
       : e == -1 ? LT_POW_M1 : e == -0.5 ? LT_POW_MHALF : e == -2 ? LT_POW_M2 : LT_POW_ANY;
}

/* Token pasting for the templates included once per type. */
#define LT_EW_PASTE_(a, b) a##b
#define LT_EW_PASTE(a, b) LT_EW_PASTE_(a, b)

#endif
