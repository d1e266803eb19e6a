/*
** cpu_isa.h -- the vector instruction set the float32 cpu kernels run with, chosen once.
*/
#ifndef LT_CPU_ISA_H
#define LT_CPU_ISA_H

#include <stdbool.h>
#include <stdint.h>

/* Levels in increasing order; each needs what the ones below it need. */
enum { LT_ISA_SSE4, LT_ISA_AVX2, LT_ISA_AVX512, LT_NISA };

/* Kernels of every level exist only on x86-64 (GCC/Clang target attributes). */
#if defined(__x86_64__) && defined(__GNUC__)
#define LT_ISA_DISPATCH 1
#endif

/* Code between LT_ISA_BEGIN_<level> and LT_ISA_END is compiled for that level (functions
** always inlined into it from outside take its instruction set too). */
#define LT_ISA_BEGIN_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define LT_ISA_BEGIN_AVX512                    \
  _Pragma("GCC push_options")                  \
  _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,prefer-vector-width=512\")")
#define LT_ISA_END _Pragma("GCC pop_options")

int ltB_cpu_isa(void);                  /* the level in use: the best supported, or LANTERN_ISA */
bool ltB_cpu_isa_supported(int level);  /* whether this CPU (and OS) can run the level */
const char *ltB_cpu_isa_name(int level);
/* Bytes of the level-1..3 data cache that one core of this CPU uses, as the kernel describes
** cpu0's caches, else as glibc says; 0 where neither knows. (glibc's L3 on AMD is the whole
** chip's, 384 MiB on the Zen 5 EPYC here where a core reaches its complex's 32.) */
int64_t ltB_cache_bytes(int level);
/* Whether AVX2 table lookups pick entries with vpshufb rather than vpermilps: on AMD Zen 1 and 2,
** where vpermilps with a variable control issues at one per two cycles, or by LANTERN_LOOKUP
** (bytes or lanes), so that both forms can be tested anywhere. */
bool ltB_cpu_byte_lookup(void);
/* cpu/sgemm.c: which float32 GEMM runs, "lantern" or "openblas", and the kernel set OpenBLAS
** chose for this CPU (its openblas_get_corename). */
const char *ltB_sgemm_name(void);
/* The operand bytes above which elementwise ops write their output with non-temporal stores
** (cpu/stream.c; 0: never). Setting it (tests): bytes >= 1 streams ops of more than that, 0
** never streams, -1 restores the default, below -1 only reads it; returns the threshold in
** force after the call. */
int64_t ltB_stream_threshold(int64_t set);
const char *ltB_blas_core(void);

#endif
