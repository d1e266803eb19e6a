/*
** tools/check_gelu.c -- the float32 GELU kernels' tables (src/cpu/gelu.c, gelu_avx512.c)
** against float64 GELU over every float32 in (-4, 4), both signs: 2.2 billion inputs, about 30 s
** a level. Too slow for the suite (spec/isa_spec.lua sweeps millions of inputs instead); run it
** after changing a table or the evaluation:
**   make && cc -O2 -Isrc -Iinclude tools/check_gelu.c build/liblantern.a \
**     -lopenblas -lz -lm -lpthread -o build/check_gelu && build/check_gelu
** For each level the CPU supports it prints the largest error of gelu in float32 ulp of the
** float64 result (all x, and x > -0.5), the largest error of gelu' as a fraction of the
** gradient tolerance (1e-6 relative plus 1e-7), and how many |x| < 2^-120, whose results are
** subnormal or near it, differ from float64 gelu rounded to float32 in any bit.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu_isa.h"
#include "ulp.h"

typedef void (*gelu_fn)(char *y, int64_t sy, char *d, int64_t sd, const char *x, int64_t sx,
                        int64_t n);

static void check(const char *name, gelu_fn fn) {
  enum { B = 1 << 16 };
  static float x[B], y[B], d[B];
  double worst = 0, worst_pos = 0, worst_d = 0;
  float at = 0, at_d = 0;
  long tiny_bad = 0, n = 0;
  for (uint32_t sign = 0; sign < 2; sign++) {
    for (uint32_t b0 = 0; b0 < 0x40800000u; b0 += B) {   /* the bits of [0, 4) */
      for (uint32_t k = 0; k < B; k++) {
        uint32_t bits = (b0 + k) | sign << 31;
        memcpy(&x[k], &bits, sizeof bits);
      }
      fn((char *)y, 4, (char *)d, 4, (const char *)x, 4, B);
      for (int k = 0; k < B; k++) {
        double xd = x[k], phi = 0.5 * erfc(-xd * 0.70710678118654752440);
        double ref = xd * phi, dref = phi + xd * exp(-0.5 * xd * xd) * 0.39894228040143267794;
        float rf = (float)ref;
        double e = fabs((double)y[k] - ref) / ulp_of(rf);
        double ed = fabs((double)d[k] - dref) / (fabs(dref) * 1e-6 + 1e-7);
        if (e > worst) worst = e, at = x[k];
        if (x[k] > -0.5f && e > worst_pos) worst_pos = e;
        if (ed > worst_d) worst_d = ed, at_d = x[k];
        if (fabsf(x[k]) < 0x1p-120f && memcmp(&y[k], &rf, sizeof rf) != 0) tiny_bad++;
        n++;
      }
    }
  }
  printf("%s: %ld inputs; gelu within %.3f ulp (at %a), %.3f for x > -0.5; gelu' within %.3f "
         "of the tolerance (at %a); %ld tiny inputs differ\n",
         name, n, worst, at, worst_pos, worst_d, at_d, tiny_bad);
}

int main(void) {
#ifdef LT_ISA_DISPATCH
  if (ltB_cpu_isa_supported(LT_ISA_AVX2)) check("avx2", ltC_gelu_avx2);
  if (ltB_cpu_isa_supported(LT_ISA_AVX512)) check("avx512", ltC_gelu_avx512);
#else
  puts("no vector levels on this target");
#endif
  return 0;
}
