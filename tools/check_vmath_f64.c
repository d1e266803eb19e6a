/*
** tools/check_vmath_f64.c -- the float32 functions vmath.h computes in float64 and rounds once,
** against float64 libm: sin, cos and tan over every float32 x with |x| <= 2^24 (their range;
** the kernels call libm beyond), atan and log2 over every float32, asin and acos over every
** one in [-1, 1], all both signs, and atan2 over a grid of 5 billion pairs and the special
** values: about 12 minutes a level. Too slow for the suite
** (spec/isa_spec.lua sweeps millions of inputs instead); run it after changing a reduction or
** a polynomial, once per level the kernels are built for (the AVX2 and AVX-512 builds fuse
** multiply-adds):
**   cc -O3 -march=x86-64-v2 -fno-math-errno -fno-trapping-math -ffp-contract=fast -Isrc \
**     tools/check_vmath_f64.c -lm -o build/check_vmath_f64 && build/check_vmath_f64
** and again with -march=x86-64-v3. Prints each function's largest error in float32 ulp of the
** float64 result, where it lies, and how many results differ from libm in NaN-ness or in the
** sign of a zero.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu/vmath.h"
#include "ulp.h"

enum { B = 1 << 16 };

typedef double (*fn64)(double);

/* kept out of line, so that each loop vectorises as the kernels' do */
#define DEF_RUN(F)                                                                    \
  __attribute__((noinline)) static void run_##F(float *y, const float *x) {           \
    for (int i = 0; i < B; i++) y[i] = vm_##F##_float(x[i]);                          \
  }
DEF_RUN(sin)
DEF_RUN(cos)
DEF_RUN(tan)
DEF_RUN(log2)
DEF_RUN(atan)
DEF_RUN(asin)
DEF_RUN(acos)
static float atan2_x;   /* run_atan2's second operand */
__attribute__((noinline)) static void run_atan2(float *y, const float *x) {
  for (int i = 0; i < B; i++) y[i] = vm_atan2_float(x[i], atan2_x);
}
static double ref_atan2(double y) { return atan2(y, (double)atan2_x); }

typedef struct worst { double ulp; float at; long bad; } worst;

/* every float32 from 0 to the one with bits top, both signs, every step-th */
static void sweep(void (*run)(float *, const float *), fn64 ref, uint32_t top, uint32_t step,
                  worst *w) {
  static float x[B], y[B];
  for (uint32_t sign = 0; sign < 2; sign++) {
    for (uint64_t b0 = 0; b0 < top; b0 += (uint64_t)B * step) {
      uint64_t left = (top - b0 + step - 1) / step;
      int n = left < (uint64_t)B ? (int)left : B;
      for (int k = 0; k < B; k++) {
        uint32_t u = (uint32_t)(b0 + (uint64_t)(k < n ? k : 0) * step) | sign << 31;
        memcpy(&x[k], &u, sizeof u);
      }
      run(y, x);
      for (int k = 0; k < n; k++) {
        double r = ref((double)x[k]);
        float rf = (float)r;
        if (isnan(r) != isnan(y[k]) || (rf == 0 && signbit(rf) != signbit(y[k]))) w->bad++;
        if (!isfinite(rf)) continue;
        double e = fabs((double)y[k] - r) / ulp_of(rf);
        if (e > w->ulp) w->ulp = e, w->at = x[k];
      }
    }
  }
}

static void report(const char *name, const worst *w) {
  printf("%s: %.4f ulp (at %a), %ld NaN or zero-sign differences\n", name, w->ulp, w->at,
         w->bad);
}

static void check(const char *name, void (*run)(float *, const float *), fn64 ref,
                  uint32_t top) {
  worst w = {0, 0, 0};
  sweep(run, ref, top, 1, &w);
  report(name, &w);
}

int main(void) {
  const uint32_t two24 = 0x4b800000u + 1, one = 0x3f800000u + 1, all = 0x7f800000u + 2;
  check("sin", run_sin, sin, two24);
  check("cos", run_cos, cos, two24);
  check("tan", run_tan, tan, two24);
  check("atan", run_atan, atan, all);   /* every float, inf and one NaN */
  check("log2", run_log2, log2, all);
  check("asin", run_asin, asin, one);
  check("acos", run_acos, acos, one);
  /* atan2(y, x): every 4099th y against x of both signs at every 1048583rd float, then every
  ** 61st y against the special values */
  worst w = {0, 0, 0};
  for (uint64_t xb = 0; xb <= 0x7f800001u; xb += 1048583) {
    for (uint32_t sign = 0; sign < 2; sign++) {
      uint32_t u = (uint32_t)xb | sign << 31;
      memcpy(&atan2_x, &u, sizeof u);
      sweep(run_atan2, ref_atan2, all, 4099, &w);
    }
  }
  float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 0x1p-149f};
  for (int i = 0; i < 8; i++) {
    atan2_x = specials[i];
    sweep(run_atan2, ref_atan2, all, 61, &w);
  }
  report("atan2", &w);
  return 0;
}
