/*
** cpu/thin_vec.h -- template: thin_gemm.c's kernels at one vector level. Included once per
** level with
**   TV, TW           the vector type and its floats
**   TMASK, TMASK_OF  the type of a ragged last vector's mask and the mask of its n floats
**   TLOAD, TSTORE    (p, ragged, mask) loads and stores, masked when ragged
**   TZERO, TSET1, TADD, TFMA
**   TR4              rows of C a block takes when a row is four vectors
**   TNN, TTN         the names of the two entry points
*/

/* R rows of the result C (N columns): C[r] (+)= sum over k of A(r, k) B[k], A(r, k) at
** A[r * ars + k * aks] (nn: rows of A; tn: columns of A); the last of a row's NV vectors
** masked when ragged */
THIN_INLINE void TV_PASTE(rows_, TW)(int R, int NV, int64_t K, int64_t N, const float *A,
                                     int64_t ars, int64_t aks, const float *B, float *C,
                                     bool add, bool ragged, TMASK last) {
  TV acc[8][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) acc[r][q] = TZERO();
  for (int64_t k = 0; k < K; k++) {
    TV b[4];
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) b[q] = TLOAD(B + k * N + TW * q, q == NV - 1 && ragged, last);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
      TV a = TSET1(A[r * ars + k * aks]);
#pragma GCC unroll 4
      for (int q = 0; q < NV; q++) acc[r][q] = TFMA(a, b[q], acc[r][q]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; r++)
#pragma GCC unroll 4
    for (int q = 0; q < NV; q++) {
      float *c = C + r * N + TW * q;
      bool rg = q == NV - 1 && ragged;
      TV v = add ? TADD(TLOAD(c, rg, last), acc[r][q]) : acc[r][q];
      TSTORE(c, v, rg, last);
    }
}

/* all Mr rows of C: blocks of R (R * NV accumulators, at most 16), then the rest one at a time */
THIN_INLINE void TV_PASTE(all_, TW)(int R, int NV, int64_t Mr, int64_t K, int64_t N,
                                    const float *A, int64_t ars, int64_t aks, const float *B,
                                    float *C, bool add) {
  bool ragged = N % TW != 0;
  TMASK last = TMASK_OF(N % TW);
  int64_t m = 0;
  for (; m + R <= Mr; m += R)
    TV_PASTE(rows_, TW)(R, NV, K, N, A + m * ars, ars, aks, B, C + m * N, add, ragged, last);
  for (; m < Mr; m++)
    TV_PASTE(rows_, TW)(1, NV, K, N, A + m * ars, ars, aks, B, C + m * N, add, ragged, last);
}

/* the block of rows by the vectors a row takes */
#define TV_BY_WIDTH(NV, ...)                                  \
  switch (NV) {                                               \
    case 1: TV_PASTE(all_, TW)(8, 1, __VA_ARGS__); break;     \
    case 2: TV_PASTE(all_, TW)(6, 2, __VA_ARGS__); break;     \
    case 3: TV_PASTE(all_, TW)(4, 3, __VA_ARGS__); break;     \
    default: TV_PASTE(all_, TW)(TR4, 4, __VA_ARGS__); break;  \
  }

static void TNN(int64_t T, int64_t K, int64_t N, const float *A, const float *B, float *M) {
  TV_BY_WIDTH((N + TW - 1) / TW, T, K, N, A, K, 1, B, M, false)
}

static void TTN(int64_t T, int64_t Mr, int64_t N, const float *A, const float *B, float *C,
                bool add) {
  TV_BY_WIDTH((N + TW - 1) / TW, Mr, T, N, A, 1, Mr, B, C, add)
}

#undef TV_BY_WIDTH
#undef TV
#undef TW
#undef TMASK
#undef TMASK_OF
#undef TLOAD
#undef TSTORE
#undef TZERO
#undef TSET1
#undef TADD
#undef TFMA
#undef TR4
#undef TNN
#undef TTN
