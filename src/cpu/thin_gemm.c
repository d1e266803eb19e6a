/*
** cpu/thin_gemm.c -- float32 products with one small side, that side held in registers and
** nothing packed: the 16 products of a Winograd convolution with few channels (winograd.c).
**
**   nn:  M (T x N) = A (T x K) @ B (K x N)             a block of R rows of M at a time: for
**        each k, B's row k (N floats, a few vectors) times each row's A[r][k], broadcast
**   tn:  C (Mr x N) (+)= A^T @ B, A (T x Mr), B (T x N)  a block of R rows of C at a time, the
**        sum running down the T rows of A and B
**
** Both are one kernel, C's row r (+)= sum over k of A(r, k) B's row k, reading A(r, k) with
** strides (a row of A for nn, a column for tn).
**
** N is at most 64 floats (four AVX-512 vectors) or 32 (four AVX2 vectors), so that R rows of
** accumulators and B's row fit the registers. With 16 channels a side, the packed GEMM (sgemm.c)
** spent as long packing and turning its operands (K = 16) as multiplying them. Each element of
** the result is one chain of multiply-adds in k (or t) order, whatever R and the row it starts
** at, so the bits do not depend on how the rows are cut. Below AVX2 there is no such kernel.
*/
#include <stdbool.h>

#include "../cpu_isa.h"
#include "cpu.h"
#ifdef LT_ISA_DISPATCH
#include <immintrin.h>
#endif

#define THIN_INLINE static inline __attribute__((always_inline))

#define TV_PASTE2(a, b) a##b
#define TV_PASTE(a, b) TV_PASTE2(a, b)

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX512
#define TV __m512
#define TW 16
#define TMASK __mmask16
#define TMASK_OF(n) ((__mmask16)((1u << (n)) - 1))
#define TLOAD(p, ragged, m) ((ragged) ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p))
#define TSTORE(p, v, ragged, m) \
  ((ragged) ? _mm512_mask_storeu_ps(p, m, v) : _mm512_storeu_ps(p, v))
#define TZERO _mm512_setzero_ps
#define TSET1 _mm512_set1_ps
#define TADD _mm512_add_ps
#define TFMA _mm512_fmadd_ps
#define TR4 4
#define TNN thin_nn_avx512
#define TTN thin_tn_avx512
#include "thin_vec.h"
LT_ISA_END
LT_ISA_BEGIN_AVX2
/* a ragged last vector through masked loads and stores (microcoded on AMD Zen 2, so only where
** N is not a multiple of 8); four vectors a row take 4 x 4 accumulators with B's row, so two
** rows of C at a time */
#define TV __m256
#define TW 8
#define TMASK __m256i
#define TMASK_OF(n) \
  _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define TLOAD(p, ragged, m) ((ragged) ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p))
#define TSTORE(p, v, ragged, m) \
  ((ragged) ? _mm256_maskstore_ps(p, m, v) : _mm256_storeu_ps(p, v))
#define TZERO _mm256_setzero_ps
#define TSET1 _mm256_set1_ps
#define TADD _mm256_add_ps
#define TFMA _mm256_fmadd_ps
#define TR4 2
#define TNN thin_nn_avx2
#define TTN thin_tn_avx2
#include "thin_vec.h"
LT_ISA_END
#endif

int64_t ltC_thin_max(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return 64;
    case LT_ISA_AVX2: return 32;
    default: break;
  }
#endif
  return 0;
}

ltC_thin_nn_fn ltC_thin_nn(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return thin_nn_avx512;
    case LT_ISA_AVX2: return thin_nn_avx2;
    default: break;
  }
#endif
  return NULL;
}

ltC_thin_tn_fn ltC_thin_tn(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return thin_tn_avx512;
    case LT_ISA_AVX2: return thin_tn_avx2;
    default: break;
  }
#endif
  return NULL;
}
