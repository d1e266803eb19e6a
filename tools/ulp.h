/*
** tools/ulp.h -- the unit in the last place that the accuracy checkers (check_*.c) measure
** errors in.
*/
#ifndef LT_TOOLS_ULP_H
#define LT_TOOLS_ULP_H
#include <math.h>

/* Spacing of float32 at r; the subnormal spacing below 2^-126. */
static double ulp_of(float r) {
  int e;
  float a = fabsf(r);
  if (a < 0x1p-126f) return 0x1p-149;
  frexpf(a, &e);
  return ldexp(1.0, e - 24);
}
#endif
