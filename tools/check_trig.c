/*
** tools/check_trig.c -- vmath.h's float32 sin, cos and tan against float64 libm over every
** float32 x with |x| <= 2^24 (their range; the kernels call libm beyond), both signs: 2.5
** billion inputs, about two minutes a level. Too slow for the suite (spec/isa_spec.lua sweeps millions of
** inputs instead); run it after changing the reduction or the polynomials, once per level
** the kernels are built for (the AVX2 and AVX-512 builds fuse multiply-adds):
**   cc -O3 -march=x86-64-v2 -fno-math-errno -fno-trapping-math -ffp-contract=fast -Isrc \
**     tools/check_trig.c -lm -o build/check_trig && build/check_trig
** and again with -march=x86-64-v3. Prints each function's largest error in float32 ulp of the
** float64 result, where it lies, and how many results differ from libm in NaN-ness or in the
** sign of a zero.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu/vmath.h"

enum { B = 1 << 16 };

typedef float (*fn32)(float);
typedef double (*fn64)(double);

static double ulp_of(float r) {   /* spacing of float32 at r; subnormal spacing below 2^-126 */
  int e;
  float a = fabsf(r);
  if (a < 0x1p-126f) return 0x1p-149;
  frexpf(a, &e);
  return ldexp(1.0, e - 24);
}

/* kept out of line, so that each loop vectorises as the kernels' do */
__attribute__((noinline)) static void run_sin(float *y, const float *x) {
  for (int i = 0; i < B; i++) y[i] = vm_sin_float(x[i]);
}
__attribute__((noinline)) static void run_cos(float *y, const float *x) {
  for (int i = 0; i < B; i++) y[i] = vm_cos_float(x[i]);
}
__attribute__((noinline)) static void run_tan(float *y, const float *x) {
  for (int i = 0; i < B; i++) y[i] = vm_tan_float(x[i]);
}

static void check(const char *name, void (*run)(float *, const float *), fn64 ref) {
  static float x[B], y[B];
  double worst = 0;
  float at = 0;
  long bad = 0;
  const uint32_t top = 0x4b800000u + 1;   /* the bits of 2^24, included */
  for (uint32_t sign = 0; sign < 2; sign++) {
    for (uint32_t b0 = 0; b0 < top; b0 += B) {
      int n = top - b0 < (uint32_t)B ? (int)(top - b0) : B;
      for (int k = 0; k < B; k++) {
        uint32_t u = (b0 + (uint32_t)(k < n ? k : 0)) | sign << 31;
        memcpy(&x[k], &u, sizeof u);
      }
      run(y, x);
      for (int k = 0; k < n; k++) {
        double r = ref((double)x[k]);
        float rf = (float)r;
        if (isnan(r) != isnan(y[k]) || (rf == 0 && signbit(rf) != signbit(y[k]))) bad++;
        if (!isfinite(rf)) continue;
        double e = fabs((double)y[k] - r) / ulp_of(rf);
        if (e > worst) worst = e, at = x[k];
      }
    }
  }
  printf("%s: %.4f ulp (at %a), %ld NaN or zero-sign differences\n", name, worst, at, bad);
}

int main(void) {
  check("sin", run_sin, sin);
  check("cos", run_cos, cos);
  check("tan", run_tan, tan);
  return 0;
}
