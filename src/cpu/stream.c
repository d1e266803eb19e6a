/*
** cpu/stream.c -- writing the output of a large elementwise op past the caches.
**
** An ordinary store first reads the line it writes (so it can merge the bytes it does not
** write), then writes it back later: an op whose operands do not fit in the last-level cache
** moves the output through memory twice. Non-temporal stores write whole lines without reading
** them. They are worth it only when the output would not have stayed in the cache anyway: an
** output the next op finds in L3 costs that op twice as long if it went to memory instead (a
** 4 MB copy on the Intel Xeon here: 323 -> 270 us, but reading its result 159 -> 309 us after).
*/
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../cpu_isa.h"
#include "cpu.h"
#ifdef LT_ISA_DISPATCH
#include <immintrin.h>
#endif

/* elements a row is cut into: one block of output lives in L1 between the kernel and the
** store (4 KB, whatever the dtype's size). On the Zen 5 EPYC, alternated runs of a + b on 16M
** floats at one thread, best of eight: 4 KB blocks 45-48 GB/s, 8 KB 42-46, 2 KB 41 (the calls
** per block start to count) */
#define STREAM_BLK_BYTES 4096

static int64_t threshold = -1;

static int64_t default_threshold(void) {
#if defined(__SSE2__)
  /* half of L3, not all of it: it is shared with the other cores (and, on these VMs, other
  ** guests). Where streaming starts to pay, a + b then a sum of its result, ordinary stores
  ** against streamed: on the Intel Xeon (260 MiB L3) operands of 64 MiB in all still came back
  ** from L3 after an op, 128 MiB no longer did; on the Zen 5 EPYC (32 MiB) 12 MiB came back
  ** (204-219 us against 243-304 streamed), 18 MiB broke even (380-406 against 378-527) */
  int64_t l3 = ltB_cache_bytes(3);
  if (l3 > 0) return l3 / 2;
#endif
  return 0;
}

bool ltC_stream_wanted(int64_t bytes) {
  if (threshold < 0) threshold = default_threshold();
  return threshold > 0 && bytes > threshold;
}

int64_t ltB_stream_threshold(int64_t set) {
  if (set == -1 || threshold < 0) threshold = default_threshold();
  if (set >= 0) threshold = set;
  return threshold;
}

#if defined(__SSE2__)
/* dst (16-byte aligned) = src for n bytes, a multiple of 64; src is the L1 block. Sixteen-byte
** stores fill the write-combining buffers as well as wider ones would. While the lines go out,
** one line of each of the next block's inputs in pf (npf of them, NULL-free) is fetched per
** line stored: without that the loads stop while the stores drain, and memory alternates
** between reading and writing (on the Zen 5 EPYC here, a bare C loop of 8 KB blocks ran at 43
** GB/s without, 52 with; streamed straight from registers, 54-60; Lantern's 8 KB blocks went
** from 41 to 46). Kept out of line and on a cache line of its own: where the loop lies matters
** (on that EPYC the same instructions at another 16-byte offset ran at 36.7 GB/s instead of
** 45-47, after an edit elsewhere in the file moved them); one call per block costs nothing. */
__attribute__((noinline, aligned(64))) static void store_lines(char *dst, const char *src,
                                                               int64_t n, char *const *pf,
                                                               int npf) {
  for (int64_t i = 0; i < n; i += 64) {
    for (int k = 0; k < npf; k++) _mm_prefetch(pf[k] + i, _MM_HINT_T0);
    __m128i a = _mm_load_si128((const __m128i *)(src + i));
    __m128i b = _mm_load_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_load_si128((const __m128i *)(src + i + 32));
    __m128i d = _mm_load_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
}
#endif

void ltC_stream_row(char **d, const int64_t *st, int nops, int64_t n, ltK_row_fn run, void *ud) {
  int64_t es = st[0];
#if defined(__SSE2__)
  _Alignas(64) char blk[STREAM_BLK_BYTES];
  char *p[4];
  for (int i = 0; i < nops; i++) p[i] = d[i];
  /* the head up to the first line of out is written in place */
  int64_t head = (int64_t)((64 - (uintptr_t)p[0] % 64) % 64);
  if (head % es != 0) {   /* an element straddles lines: no aligned blocks to be had */
    run(p, st, n, ud);
    return;
  }
  head = ltC_min(head / es, n);
  int64_t per = STREAM_BLK_BYTES / es;
  int64_t i = 0;
  if (head > 0) {
    run(p, st, head, ud);
    i = head;
  }
  while (n - i >= per) {
    char *q[4], *pf[3];
    int npf = 0;
    q[0] = blk;
    for (int k = 1; k < nops; k++) {
      q[k] = p[k] + i * st[k];
      /* inputs laid out as out is span the same lines; others are left to the hardware */
      if (st[k] == es && n - i >= 2 * per) pf[npf++] = q[k] + per * es;
    }
    run(q, st, per, ud);
    store_lines(p[0] + i * es, blk, STREAM_BLK_BYTES, pf, npf);
    i += per;
  }
  _mm_sfence();   /* the streamed lines are visible before whoever waits on this row reads them */
  if (i < n) {
    char *q[4];
    for (int k = 0; k < nops; k++) q[k] = p[k] + i * st[k];
    run(q, st, n - i, ud);
  }
#else
  (void)es;
  run(d, st, n, ud);
#endif
}

/* ---------------------------------------------------------------- straight from registers */

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
/* One op over dense rows, either operand possibly one broadcast value (sa, sb: 1 dense, 0 one
** value: a bias added down a tensor, 2.6x slower through stream_row's blocks); the same IEEE
** operation as the kernels' loops, so the same bits. */
#define STREAM_LOOP(vop, sop)                                                         \
  do {                                                                                \
    for (; i < n && ((uintptr_t)(o + i) & 31); i++) o[i] = a[i * sa] sop b[i * sb];   \
    __m256 va = _mm256_set1_ps(a[0]), vb = _mm256_set1_ps(b[0]);                      \
    for (; i + 16 <= n; i += 16) {                                                    \
      __m256 a0 = sa ? _mm256_loadu_ps(a + i) : va, a1 = sa ? _mm256_loadu_ps(a + i + 8) : va; \
      __m256 b0 = sb ? _mm256_loadu_ps(b + i) : vb, b1 = sb ? _mm256_loadu_ps(b + i + 8) : vb; \
      _mm256_stream_ps(o + i, vop(a0, b0));                                           \
      _mm256_stream_ps(o + i + 8, vop(a1, b1));                                       \
    }                                                                                 \
    for (; i < n; i++) o[i] = a[i * sa] sop b[i * sb];                                \
  } while (0)

static void stream_f32_avx2(int op, float *o, const float *a, int64_t sa, const float *b,
                            int64_t sb, int64_t n) {
  int64_t i = 0;
  switch (op) {
    case LT_ADD: STREAM_LOOP(_mm256_add_ps, +); break;
    case LT_SUB: STREAM_LOOP(_mm256_sub_ps, -); break;
    case LT_MUL: STREAM_LOOP(_mm256_mul_ps, *); break;
    default: STREAM_LOOP(_mm256_div_ps, /); break;
  }
  _mm_sfence();
}
#undef STREAM_LOOP
LT_ISA_END
#endif

bool ltC_stream_f32_binary(int op, float *o, const float *a, int64_t sa, const float *b,
                           int64_t sb, int64_t n) {
#ifdef LT_ISA_DISPATCH
  if ((op == LT_ADD || op == LT_SUB || op == LT_MUL || op == LT_DIV) &&
      ltB_cpu_isa() >= LT_ISA_AVX2) {
    stream_f32_avx2(op, o, a, sa, b, sb, n);
    return true;
  }
#else
  (void)op, (void)o, (void)a, (void)sa, (void)b, (void)sb, (void)n;
#endif
  return false;
}
