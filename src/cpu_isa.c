/*
** cpu_isa.c -- which vector instruction set the float32 kernels use.
**
** The default build targets x86-64-v2 (SSE4.2) so that one binary runs on every x86-64 machine
** of the last decade; the kernels that gain from wider vectors (src/cpu/: the elementwise
** family, softmax, float32 sums) are also compiled for AVX2+FMA and AVX-512, and the widest the
** CPU and OS support is chosen on first use. LANTERN_ISA=sse4|avx2|avx512 forces a level, to
** compare levels or to test each one on a machine that has them all.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_isa.h"

static const char *const names[LT_NISA] = {"sse4", "avx2", "avx512"};
static atomic_int level = -1;   /* -1 until chosen; read by every small op without a call */
static bool byte_lookup;
static pthread_once_t chosen = PTHREAD_ONCE_INIT;

bool ltB_cpu_isa_supported(int lv) {
  switch (lv) {
    case LT_ISA_SSE4: return true;
#ifdef LT_ISA_DISPATCH
    /* __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0) */
    case LT_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case LT_ISA_AVX512:
      return ltB_cpu_isa_supported(LT_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
#endif
    default: return false;
  }
}

const char *ltB_cpu_isa_name(int lv) { return lv >= 0 && lv < LT_NISA ? names[lv] : "?"; }

/* LANTERN_LOOKUP=bytes|lanes over the CPU's own choice (reported on stderr as LANTERN_ISA is) */
static void choose_lookup(void) {
#ifdef LT_ISA_DISPATCH
  byte_lookup = __builtin_cpu_is("znver1") || __builtin_cpu_is("znver2");
#endif
  const char *want = getenv("LANTERN_LOOKUP");
  if (!want || !*want) return;
  if (strcmp(want, "bytes") == 0 || strcmp(want, "lanes") == 0)
    byte_lookup = want[0] == 'b';
  else
    fprintf(stderr, "lantern: LANTERN_LOOKUP=%s: expected bytes or lanes; using %s\n", want,
            byte_lookup ? "bytes" : "lanes");
}

/* A bad LANTERN_ISA cannot be a Lua error (the choice is made inside a kernel, possibly in a
** host without Lua), so it is reported once on stderr and the best level is used instead. */
static int wanted(int best) {
  const char *want = getenv("LANTERN_ISA");
  if (!want || !*want) return best;
  for (int lv = 0; lv < LT_NISA; lv++) {
    if (strcmp(want, names[lv]) != 0) continue;
    if (ltB_cpu_isa_supported(lv)) return lv;
    fprintf(stderr, "lantern: LANTERN_ISA=%s: this CPU does not support %s; using %s\n", want,
            names[lv], names[best]);
    return best;
  }
  fprintf(stderr, "lantern: LANTERN_ISA=%s: expected one of sse4, avx2, avx512; using %s\n", want,
          names[best]);
  return best;
}

static void choose(void) {
#ifdef LT_ISA_DISPATCH
  __builtin_cpu_init();
#endif
  choose_lookup();
  int best = LT_ISA_SSE4;
  for (int lv = LT_ISA_SSE4 + 1; lv < LT_NISA; lv++)
    if (ltB_cpu_isa_supported(lv)) best = lv;
  atomic_store_explicit(&level, wanted(best), memory_order_relaxed);
}

int ltB_cpu_isa(void) {
  int lv = atomic_load_explicit(&level, memory_order_relaxed);
  if (lv >= 0) return lv;
  pthread_once(&chosen, choose);   /* its return orders the store before this load */
  return atomic_load_explicit(&level, memory_order_relaxed);
}

bool ltB_cpu_byte_lookup(void) {
  pthread_once(&chosen, choose);
  return byte_lookup;
}

/* the largest cache of that level among cpu0's data or unified ones in sysfs; 0 when none */
static int64_t sysfs_cache(int want) {
  int64_t best = 0;
  for (int i = 0; i < 8; i++) {
    char path[64], buf[32];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
    FILE *f = fopen(path, "r");
    if (!f) break;
    int level = fgets(buf, sizeof buf, f) ? atoi(buf) : 0;
    fclose(f);
    if (level != want) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
    f = fopen(path, "r");
    bool code = f && fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) == 0;
    if (f) fclose(f);
    if (code) continue;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
    f = fopen(path, "r");
    if (!f) continue;
    char *end = NULL;
    int64_t v = fgets(buf, sizeof buf, f) ? strtoll(buf, &end, 10) : 0;
    fclose(f);
    if (end && (*end == 'K' || *end == 'k')) v *= 1024;
    else if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024;
    if (v > best) best = v;
  }
  return best;
}

int64_t ltB_cache_bytes(int level) {
  int64_t v = level >= 1 && level <= 3 ? sysfs_cache(level) : 0;
  if (v > 0) return v;
  long g = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)   /* glibc: the three come together */
  if (level == 1) g = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  if (level == 2) g = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (level == 3) g = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
  return g > 0 ? (int64_t)g : 0;
}
