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

#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX512

/* R rows of the result C (N columns): C[r] (+)= sum over k of A(r, k) B[k], A(r, k) at
** A[r * ars + k * aks] (nn: rows of A; tn: columns of A); the last of a row's NV vectors masked
** by last */
THIN_INLINE void rows512(int R, int NV, int64_t K, int64_t N, const float *A, int64_t ars,
                         int64_t aks, const float *B, float *C, bool add, __mmask16 last) {
  __m512 acc[8][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) acc[r][q] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m512 b[4];
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++)
      b[q] = q == NV - 1 ? _mm512_maskz_loadu_ps(last, B + k * N + 16 * q)
                         : _mm512_loadu_ps(B + k * N + 16 * q);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      __m512 a = _mm512_set1_ps(A[r * ars + k * aks]);
#pragma GCC unroll 4
      for (int q = 0; q < NV; q++) acc[r][q] = _mm512_fmadd_ps(a, b[q], acc[r][q]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) {
      float *c = C + r * N + 16 * q;
      __mmask16 m = q == NV - 1 ? last : 0xffff;
      __m512 v = add ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), acc[r][q]) : acc[r][q];
      _mm512_mask_storeu_ps(c, m, v);
    }
}

/* all Mr rows of C: blocks of R (R * NV accumulators, at most 16), then the rest one at a time */
THIN_INLINE void all512(int R, int NV, int64_t Mr, int64_t K, int64_t N, const float *A,
                        int64_t ars, int64_t aks, const float *B, float *C, bool add) {
  __mmask16 last = N % 16 ? (__mmask16)((1u << (N % 16)) - 1) : 0xffff;
  int64_t m = 0;
  for (; m + R <= Mr; m += R) rows512(R, NV, K, N, A + m * ars, ars, aks, B, C + m * N, add, last);
  for (; m < Mr; m++) rows512(1, NV, K, N, A + m * ars, ars, aks, B, C + m * N, add, last);
}

/* the block of rows by the vectors a row takes */
#define BY_WIDTH(ALL, NV, ...)                                \
  switch (NV) {                                               \
    case 1: ALL(8, 1, __VA_ARGS__); break;                    \
    case 2: ALL(6, 2, __VA_ARGS__); break;                    \
    case 3: ALL(4, 3, __VA_ARGS__); break;                    \
    default: ALL(4, 4, __VA_ARGS__); break;                   \
  }

static void thin_nn_avx512(int64_t T, int64_t K, int64_t N, const float *A, const float *B,
                           float *M) {
  BY_WIDTH(all512, (N + 15) / 16, T, K, N, A, K, 1, B, M, false)
}

static void thin_tn_avx512(int64_t T, int64_t Mr, int64_t N, const float *A, const float *B,
                           float *C, bool add) {
  BY_WIDTH(all512, (N + 15) / 16, Mr, T, N, A, 1, Mr, B, C, add)
}

LT_ISA_END
LT_ISA_BEGIN_AVX2

/* as at AVX-512, with 8-float vectors; a ragged last vector through masked loads and stores
** (microcoded on AMD Zen 2, so only where N is not a multiple of 8) */
THIN_INLINE __m256 load8(const float *p, bool ragged, __m256i m) {
  return ragged ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
}

THIN_INLINE void store8(float *p, __m256 v, bool ragged, __m256i m) {
  if (ragged)
    _mm256_maskstore_ps(p, m, v);
  else
    _mm256_storeu_ps(p, v);
}

THIN_INLINE void rows256(int R, int NV, int64_t K, int64_t N, const float *A, int64_t ars,
                         int64_t aks, const float *B, float *C, bool add, bool ragged,
                         __m256i last) {
  __m256 acc[8][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) acc[r][q] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m256 b[4];
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) b[q] = load8(B + k * N + 8 * q, q == NV - 1 && ragged, last);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      __m256 a = _mm256_set1_ps(A[r * ars + k * aks]);
#pragma GCC unroll 4
      for (int q = 0; q < NV; q++) acc[r][q] = _mm256_fmadd_ps(a, b[q], acc[r][q]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) {
      float *c = C + r * N + 8 * q;
      bool rg = q == NV - 1 && ragged;
      __m256 v = add ? _mm256_add_ps(load8(c, rg, last), acc[r][q]) : acc[r][q];
      store8(c, v, rg, last);
    }
}

THIN_INLINE void all256(int R, int NV, int64_t Mr, int64_t K, int64_t N, const float *A,
                        int64_t ars, int64_t aks, const float *B, float *C, bool add) {
  bool ragged = N % 8 != 0;
  __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(N % 8)),
                                    _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  int64_t m = 0;
  for (; m + R <= Mr; m += R)
    rows256(R, NV, K, N, A + m * ars, ars, aks, B, C + m * N, add, ragged, last);
  for (; m < Mr; m++) rows256(1, NV, K, N, A + m * ars, ars, aks, B, C + m * N, add, ragged, last);
}

/* four 8-float vectors take 4 x 4 accumulators with B's row: two rows of C at a time */
#define BY_WIDTH256(ALL, NV, ...)                             \
  switch (NV) {                                               \
    case 1: ALL(8, 1, __VA_ARGS__); break;                    \
    case 2: ALL(6, 2, __VA_ARGS__); break;                    \
    case 3: ALL(4, 3, __VA_ARGS__); break;                    \
    default: ALL(2, 4, __VA_ARGS__); break;                   \
  }

static void thin_nn_avx2(int64_t T, int64_t K, int64_t N, const float *A, const float *B,
                         float *M) {
  BY_WIDTH256(all256, (N + 7) / 8, T, K, N, A, K, 1, B, M, false)
}

static void thin_tn_avx2(int64_t T, int64_t Mr, int64_t N, const float *A, const float *B,
                         float *C, bool add) {
  BY_WIDTH256(all256, (N + 7) / 8, Mr, T, N, A, 1, Mr, B, C, add)
}

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
