/*
** cpu/sgemm.c -- Lantern's own float32 GEMM, for machines on which OpenBLAS runs kernels below
** the CPU's vector level or tuned for another maker's cores.
**
** Why: OpenBLAS picks its kernels from the CPU's model number, and a processor newer than its
** tables gets the generic SSE3 set. Debian's OpenBLAS 0.3.21 on an Intel Xeon of family 6,
** model 207 (AVX-512 and AMX) reports "Prescott" and multiplies at 26 GFLOP/s on one thread,
** where its own SkylakeX kernels, forced, reach 120-140, its Haswell (AVX2) ones 67-76, and
** this file 145-162. Lantern reads the kernel set OpenBLAS chose (openblas_get_corename) and,
** when its vector level is below the one Lantern's kernels run at (no FMA on an AVX2 machine,
** AVX2 on an AVX-512 one, as where OPENBLAS_CORETYPE=Haswell is set), multiplies here instead.
** LANTERN_GEMM=openblas|lantern forces either, to compare them or to test this one anywhere.
** float64 stays with OpenBLAS.
**
** The method is the usual one for a packed GEMM. C is cut into tiles of MR rows by NR columns
** held in registers; the inner dimension in equal blocks of at most KC. For each, the columns of
** op(B) are packed into panels of NR (k-major, zero-padded), and the rows of op(A) into strips
** of MR, so that the kernel reads both with unit stride whatever the transposes (where the
** layout allows, whole panels and strips are read in place instead: see drive). A strip (MR x
** KC floats, 12 KiB at AVX-512) stays in L1 while the panels of B's block stream past it from
** L2, each panel a tile of C: the strip is the operand the kernel broadcasts, a panel (32 KiB)
** the one it loads whole vectors of, and keeping the panel in L1 instead while the strips
** streamed (the order of the loops before) made a 1024^3 product 10-20% slower here. Ragged
** edges compute a whole tile and store the part that exists with masks, but a last panel of
** at most half a tile's columns or a last strip of at most half its rows runs half the tile
** (N = 10 took as long as N = 32, and a convolution's 6 channels as 12), and one of at most
** two thirds of them two thirds (an MLP's batch of 128 at AVX-512: its forward and dX products
** 2-3% faster).
**
** A long inner dimension against a small C takes dot products of rows instead (by_dots).
** Each element of C is one chain of multiply-adds in k order per block of k, blocks in order
** (or, by dots, one per vector lane and stretch of DOTS_K, the lanes' fixed sum), then C =
** alpha * sum + beta * C (beta = 0 never reads C; addmm's bias row, where given, stands in for
** C in the first block): the bits do not depend on where a tile or a block starts, so on how
** the product is cut over threads.
*/
#include <cblas.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../cpu_isa.h"
#include "cpu.h"

#define KC 256          /* inner block: a strip of A is MR x KC, a panel of B KC x NR */
#define MC_STRIPS 32    /* rows of A per block, in strips of MR (packed or read in place) */
#define NC_MIN 256      /* columns of B per block: KC x nc floats fill half of L2 (choose) */
#define NC_MAX 2048
#define DIRECT_STRIPS 4 /* A of at most this many strips reads B in place (see drive) */
#define DIRECT_FLOATS (1 << 14)   /* and so does a block of B of at most this many floats */
#define DIRECT_STRIDE 1024        /* A whose rows (or columns) lie a multiple of this apart is
                                  ** packed: each would fall in one set of L1 */
#define GEMM_INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------ which GEMM */

static bool use_lantern;
static int64_t nc_cols = 1024;   /* the block's columns for this machine's L2 */
static pthread_once_t chosen = PTHREAD_ONCE_INIT;

static bool named(const char *core, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if (strcasecmp(core, list[i]) == 0) return true;
  return false;
}

/* The vector level at which OpenBLAS's kernel set for x86-64 runs well on this CPU, by the name
** it reports: the sets without FMA (or with AMD's FMA4 only) count as the baseline; a name not
** listed counts as the best level, so that a set newer than this list is trusted. Intel's
** AVX-512 sets count as AVX2 on an AMD CPU: they are scheduled for Intel's cores, and on the
** Zen 4 EPYC here (which OpenBLAS 0.3.21 gives "Cooperlake") they multiplied the MLP step's
** products at 97-103 GFLOP/s on one thread where this file reaches 104-109 (peak 115). */
static int blas_level(const char *core) {
  static const char *const base[] = {"prescott", "core2", "penryn", "dunnington", "nehalem",
                                     "atom", "sandybridge", "opteron", "opteron_sse3",
                                     "barcelona", "bobcat", "bulldozer", "nano", NULL};
  static const char *const avx2[] = {"haswell", "zen", "piledriver", "steamroller", "excavator",
                                     NULL};
  static const char *const intel512[] = {"skylakex", "cooperlake", "sapphirerapids", NULL};
  if (!core) return LT_NISA;
  if (named(core, base)) return LT_ISA_SSE4;
  if (named(core, avx2)) return LT_ISA_AVX2;
#ifdef LT_ISA_DISPATCH
  __builtin_cpu_init();   /* idempotent; __builtin_cpu_is reads what it fills in */
  if (named(core, intel512) && __builtin_cpu_is("amd")) return LT_ISA_AVX2;
#endif
  return LT_NISA;
}

/* A bad LANTERN_GEMM is reported once on stderr (as a bad LANTERN_ISA is) and the default used. */
static void choose(void) {
  /* half of L2 for B's block, the rest for the strips of A and the tiles of C (2 MiB per core
  ** on the Intel Xeons here: 1024 columns; 512 KiB on Zen 2: 256); 1 MiB where not known */
  int64_t l2 = ltB_cache_bytes(2);
  if (l2 <= 0) l2 = 1L << 20;
  int64_t cols = (int64_t)l2 / 2 / (KC * (int64_t)sizeof(float)) / 32 * 32;
  nc_cols = cols < NC_MIN ? NC_MIN : cols > NC_MAX ? NC_MAX : cols;
  int lv = ltB_cpu_isa();
  bool can = lv >= LT_ISA_AVX2;
  use_lantern = can && lv > blas_level(openblas_get_corename());
  const char *want = getenv("LANTERN_GEMM");
  if (!want || !*want) return;
  const char *dflt = use_lantern ? "lantern" : "openblas";
  if (strcmp(want, "openblas") == 0) {
    use_lantern = false;
  } else if (strcmp(want, "lantern") == 0) {
    if (can)
      use_lantern = true;
    else
      fprintf(stderr, "lantern: LANTERN_GEMM=lantern needs AVX2+FMA (vector level %s); using %s\n",
              ltB_cpu_isa_name(ltB_cpu_isa()), dflt);
  } else {
    fprintf(stderr, "lantern: LANTERN_GEMM=%s: expected openblas or lantern; using %s\n", want,
            dflt);
  }
}

static bool lantern_chosen(void) {
  pthread_once(&chosen, choose);
  return use_lantern;
}

const char *ltB_sgemm_name(void) { return lantern_chosen() ? "lantern" : "openblas"; }

const char *ltB_blas_core(void) {
  const char *core = openblas_get_corename();
  return core ? core : "?";
}

#ifdef LT_ISA_DISPATCH

/* ------------------------------------------------------------ packing (any level) */

/* tpose(dst, ld, src, ss, rows, width, kc): dst[k ld + r] = src[r ss + k] for r < rows and
** k < kc, and 0 for rows <= r < width (at most a vector's lanes): the packing of an operand
** whose rows run along k, by in-register transposes (element by element, the packing of B^T
** took 8% of an MLP step) */
typedef void (*tpose_fn)(float *dst, int64_t ld, const float *src, int64_t ss, int rows,
                         int width, int64_t kc);

/* tpose's k past the last whole vector, and its rows when every one is past the end */
GEMM_INLINE void tpose_rest(float *dst, int64_t ld, const float *src, int64_t ss, int rows,
                            int width, int64_t k0, int64_t kc) {
  for (int64_t k = k0; k < kc; k++) {
    int r = 0;
    for (; r < rows; r++) dst[k * ld + r] = src[r * ss + k];
    for (; r < width; r++) dst[k * ld + r] = 0;
  }
}

/* Rows [0, rows) of op(A) (element (i, k) at a[i ars + k acs]), k in [0, kc), into strips of mr:
** strip s holds (s mr + i, k) at pa[s mr kc + k mr + i], rows past the end as zeros. */
GEMM_INLINE void pack_a(tpose_fn tpose, float *pa, const float *a, int64_t ars, int64_t acs,
                        int64_t rows, int64_t kc, int mr) {
  if (ars == 1) {
    /* op(A) column-major (a weight gradient's X^T): each k holds every strip's rows in one run,
    ** so k goes outside and the run is read whole. A strip at a time walked down kc rows a page
    ** or so apart, reading 48 bytes of each: on an MLP step's cold activations this packing
    ** was 4% of the step, and is 3% so */
    for (int64_t k = 0; k < kc; k++) {
      const float *src = a + k * acs;
      float *dst = pa + k * mr;
      int64_t r0 = 0;
      for (; r0 + mr <= rows; r0 += mr, dst += (int64_t)mr * kc)
        memcpy(dst, src + r0, (size_t)mr * sizeof(float));   /* mr is a constant here */
      if (r0 < rows) {
        int64_t i = 0;
        for (; r0 + i < rows; i++) dst[i] = src[r0 + i];
        for (; i < mr; i++) dst[i] = 0;
      }
    }
    return;
  }
  for (int64_t r0 = 0; r0 < rows; r0 += mr, pa += (int64_t)mr * kc) {
    int64_t h = ltC_min(mr, rows - r0);
    const float *s = a + r0 * ars;
    if (acs == 1) {
      tpose(pa, mr, s, ars, (int)h, mr, kc);
      continue;
    }
    for (int64_t i = 0; i < h; i++) {
      const float *src = s + i * ars;
      for (int64_t k = 0; k < kc; k++) pa[k * mr + i] = src[k * acs];
    }
    for (int64_t i = h; i < mr; i++)
      for (int64_t k = 0; k < kc; k++) pa[k * mr + i] = 0;
  }
}

/* Columns [0, cols) of op(B) (element (k, j) at b[k brs + j bcs]), k in [0, kc), into panels of
** nr: panel p holds (k, p nr + j) at pb[p nr kc + k nr + j], columns past the end as zeros. */
GEMM_INLINE void pack_b(tpose_fn tpose, int lanes, float *pb, const float *b, int64_t brs,
                        int64_t bcs, int64_t kc, int64_t cols, int nr) {
  for (int64_t j0 = 0; j0 < cols; j0 += nr, pb += (int64_t)nr * kc) {
    int64_t w = ltC_min(nr, cols - j0);
    const float *s = b + j0 * bcs;
    if (bcs == 1) {
      /* a whole panel's rows by copies of a size known here: GCC compiles a memcpy of a
      ** variable size as rep movsq, which took 18% of a 128 x 784 x 512 product */
      if (w == nr && nr == 32)
        for (int64_t k = 0; k < kc; k++) memcpy(pb + k * 32, s + k * brs, 32 * sizeof(float));
      else if (w == nr && nr == 16)
        for (int64_t k = 0; k < kc; k++) memcpy(pb + k * 16, s + k * brs, 16 * sizeof(float));
      else
        for (int64_t k = 0; k < kc; k++) {
          float *dst = pb + k * nr;
          memcpy(dst, s + k * brs, (size_t)w * sizeof(float));
          if (w < nr) memset(dst + w, 0, (size_t)(nr - w) * sizeof(float));
        }
      continue;
    }
    if (brs == 1) {   /* op(B) column-major: the panel a vector's width of columns at a time */
      for (int j = 0; j < nr; j += lanes) {
        int64_t wl = ltC_min(lanes, w - j);
        tpose(pb + j, nr, s + j * bcs, bcs, wl > 0 ? (int)wl : 0, lanes, kc);
      }
      continue;
    }
    for (int64_t j = 0; j < w; j++) {
      const float *src = s + j * bcs;
      for (int64_t k = 0; k < kc; k++) pb[k * nr + j] = src[k * brs];
    }
    for (int64_t j = w; j < nr; j++)
      for (int64_t k = 0; k < kc; k++) pb[k * nr + j] = 0;
  }
}

/* The tile of rows x cols a strip and a panel leave, run by LOOP(R, V, ...) for the smallest R
** of half, two thirds or all of the MR rows, and V one or two of the panel's vectors of W
** columns (constants, one instance each): the tile loops of both ISA levels. Batches of 128 or
** 512 rows end in a strip of 8 at AVX-512 (12 computed 3% more rows at 128), of 64, 256 or
** 1024 in one of 4 at AVX2. */
#define RUN_TILE(LOOP, MR, W, rows, cols, ...)                                         \
  do {                                                                                 \
    bool one_ = (cols) <= (W);                                                         \
    if ((rows) <= (MR) / 2)                                                            \
      one_ ? LOOP((MR) / 2, 1, __VA_ARGS__) : LOOP((MR) / 2, 2, __VA_ARGS__);          \
    else if ((rows) <= 2 * (MR) / 3)                                                   \
      one_ ? LOOP(2 * (MR) / 3, 1, __VA_ARGS__) : LOOP(2 * (MR) / 3, 2, __VA_ARGS__);  \
    else                                                                               \
      one_ ? LOOP((MR), 1, __VA_ARGS__) : LOOP((MR), 2, __VA_ARGS__);                  \
  } while (0)

/* The loops around a kernel. kern(kc, pa, ars, acs, pb, bs, c, ldc, s, lds, alpha, beta, rows,
** cols) stores one tile, C = alpha * sum + beta * S, reading element (i, k) of A's strip at
** pa[i ars + k acs] (packed: ars 1, acs MR; in place, a whole strip: ars or acs 1), row k of
** B's panel at pb + k bs, and row i of S at s + i lds (S is C itself, or addmm's bias with lds
** 0); pa and pb hold the packed blocks. */
typedef void (*tile_fn)(int64_t kc, const float *pa, int64_t ars, int64_t acs, const float *pb,
                        int64_t bs, float *c, int64_t ldc, const float *s, int64_t lds,
                        float alpha, float beta, int rows, int cols);

GEMM_INLINE void drive(int mr, int nr, tile_fn kern, tpose_fn tpose, int lanes, bool ta, bool tb,
                       int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                       const float *b, int64_t ldb, float beta, const float *bias, float *c,
                       int64_t ldc, float *pa, float *pb) {
  int64_t ars = ta ? 1 : lda, acs = ta ? lda : 1;
  int64_t brs = tb ? 1 : ldb, bcs = tb ? ldb : 1;
  int64_t mc = (int64_t)MC_STRIPS * mr;
  /* The AVX2 tile (6 x 16) does half the multiply-adds of the AVX-512 one (12 x 32) per line of
  ** B and per strip of A it loads, and reads in place pay it less. On the Zen 4 EPYC at
  ** LANTERN_ISA=avx2, B packed whatever its size or stride (unless A is a few strips) and a
  ** column-major A packed where it meets more than 16 panels: the weight gradients of an MLP
  ** (512 x 128 by 128 x 512) 84-89 -> 93-108 GFLOP/s, of a GPT's Linear layers (batch 1024)
  ** 87-101 -> 98-103 (one, 128 x 1024 by 1024 x 128, 104-107 -> 96-103), forward and dX
  ** products within the noise (101-105); AVX-512 was best with both in place (108-113 on all of
  ** these, each product in a loop of its own; a large B is now packed at every level, below). */
  bool wide = mr >= 12;
  /* blocks of k as equal as they can be: 784 = 4 x 196, not 3 x 256 + 16, whose last block
  ** loads and stores every tile of C for 16 multiply-adds */
  int64_t kb = (k + KC - 1) / KC, ks = (k + kb - 1) / kb;
  for (int64_t jc = 0; jc < n; jc += nc_cols) {
    int64_t nc = ltC_min(nc_cols, n - jc);
    for (int64_t pc = 0; pc < k; pc += ks) {
      int64_t kc = ltC_min(ks, k - pc);
      float bt = pc == 0 ? beta : 1.0f;   /* later blocks add to what the first stored */
      bool from_bias = pc == 0 && bias;
      const float *bb = b + pc * brs + jc * bcs;
      /* A of a few strips reuses a packed panel of B too few times to pay for packing it (the
      ** products of a convolution with few channels), and a block of B of at most 64 KiB gains
      ** little from being packed (attention's products of one head; at the AVX-512 tile only:
      ** see wide). With unit column stride, B's whole panels are then read in place and only a
      ** ragged last one is packed. A larger B is packed even where its rows lie close enough
      ** for its panels to stream from L2 in place, as they did in a loop of one product (an
      ** MLP's 128 x 512 x 512: 141 -> 153 GFLOP/s): in a training step B is a weight that the
      ** optimiser has just written (at 2 threads, half the rows of each thread's columns from
      ** the other core). Packing walks those rows as the kernel would, but in a loop of copies
      ** that keeps many misses in flight, where the kernel's first pass over a panel in place
      ** meets one row of misses per twelve multiply-adds. The MLP step at 2 threads on the
      ** Intel Xeon, B read in place (rows 2 KiB apart, and a thread's block of 196 x 256 under
      ** the 64K floats this bound was): 2.02-2.07 ms; packed 1.83-1.86; its products alone
      ** 1.48-1.50 either way. */
      bool direct = bcs == 1 && (m <= (int64_t)DIRECT_STRIPS * mr ||
                                 (wide && kc * nc <= DIRECT_FLOATS));
      int64_t nfull = direct ? nc / nr * nr : 0;
      /* A's whole strips are read in place too, and only a ragged last strip is packed:
      ** row-major (a forward product's X, a backward one's dY) the kernel broadcasts from each
      ** row; column-major (a weight gradient's dY^T) a strip's rows at each k lie side by side,
      ** as packed. Packing was a transpose of all of A, or a copy, for every block of B's
      ** columns: in paired runs on the Zen 4 EPYC a GPT step's forward and dX products were
      ** 2-4% faster without it, its weight gradients 5-12%. Rows a multiple of 4 KiB apart
      ** would fall in one set of L1 (DIRECT_STRIDE). At the AVX2 tile a column-major A that
      ** meets more than 16 panels is packed after all (see wide). */
      bool a_direct = (acs == 1 && ars % DIRECT_STRIDE != 0) ||
                      (ars == 1 && acs % DIRECT_STRIDE != 0 && (wide || nc <= 16 * nr));
      if (!direct)
        pack_b(tpose, lanes, pb, bb, brs, bcs, kc, nc, nr);
      else if (nfull < nc)
        pack_b(tpose, lanes, pb + nfull * kc, bb + nfull, brs, bcs, kc, nc - nfull, nr);
      for (int64_t ic = 0; ic < m; ic += mc) {
        int64_t mh = ltC_min(mc, m - ic), mfull = a_direct ? mh / mr * mr : 0;
        const float *ab = a + ic * ars + pc * acs;
        if (mfull < mh)
          pack_a(tpose, pa + mfull * kc, ab + mfull * ars, ars, acs, mh - mfull, kc, mr);
        for (int64_t ir = 0; ir < mh; ir += mr)
          for (int64_t jr = 0; jr < nc; jr += nr) {
            bool in_place = jr < nfull;
            const float *panel = in_place ? bb + jr : pb + jr * kc;
            float *ct = c + (ic + ir) * ldc + jc + jr;
            bool a_place = ir < mfull;
            kern(kc, a_place ? ab + ir * ars : pa + ir * kc, a_place ? ars : 1,
                 a_place ? acs : mr, panel, in_place ? brs : nr, ct, ldc,
                 from_bias ? bias + jc + jr : ct, from_bias ? 0 : ldc, alpha, bt,
                 (int)ltC_min(mr, mh - ir), (int)ltC_min(nr, nc - jr));
          }
      }
    }
  }
}

/* A long inner dimension against a small C, A row-major and B given as its transpose (a
** convolution's weight gradient: dY (channels x positions) times the columns, transposed):
** packing B would move every element of both operands to use it a few times, so each element
** of C is a dot product of two contiguous rows instead, in blocks that load each row once. */
/* The rows are taken DOTS_K elements at a time, all of C for each stretch, so that the
** stretches of both operands stay in L2 while every block reads them. A block of dots reads a
** float per two multiply-adds where a tile reads one per 24 and packs both operands first, so
** dots gain on a small C only: on the Zen 4 EPYC, one thread, inner dimension about 2000, dots
** against tiles 12 against 17 us for C of 6 x 25, 30 against 79 for 16 x 9, 50 against 54 for
** 32 x 32, 35 against 42 for 12 x 64, even at 48 x 48, 182 against 177 at 64 x 64, and 836
** against 694 at 128 x 128 (a Linear's forward product of 64 x 128 by 1568, which the bound
** on k alone sent here, took 650 us by dots, before they kept their sums in registers, against
** 264). */
#define DOTS_K 1024
#define DOTS_MAX_C 1024   /* elements of C at most */

GEMM_INLINE bool by_dots(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  return !ta && tb && m * n <= DOTS_MAX_C && k >= 8 * (m + n);
}

/* dots(k, a, lda, bt, ldb, c, ldc, alpha, beta, rows, cols): C[0:rows, 0:cols], at most rb x cb,
** from the rows of A and of B^T */
typedef void (*dots_fn)(int64_t k, const float *a, int64_t lda, const float *bt, int64_t ldb,
                        float *c, int64_t ldc, float alpha, float beta, int rows, int cols);

GEMM_INLINE void dot_blocks(dots_fn dots, int rb, int cb, int64_t m, int64_t n, int64_t k,
                            float alpha, const float *a, int64_t lda, const float *bt,
                            int64_t ldb, float beta, float *c, int64_t ldc) {
  for (int64_t p = 0; p < k; p += DOTS_K)
    for (int64_t i = 0; i < m; i += rb)
      for (int64_t j = 0; j < n; j += cb)
        dots(ltC_min(DOTS_K, k - p), a + i * lda + p, lda, bt + j * ldb + p, ldb, c + i * ldc + j,
             ldc, alpha, p == 0 ? beta : 1.0f, (int)ltC_min(rb, m - i), (int)ltC_min(cb, n - j));
}

/* The dots read C for beta's term: a bias is copied into each row of C first. */
GEMM_INLINE void bias_rows(const float *bias, float *c, int64_t ldc, int64_t m, int64_t n) {
  if (bias)
    for (int64_t i = 0; i < m; i++) memcpy(c + i * ldc, bias, (size_t)n * sizeof(float));
}

/* C = alpha * s + beta * C for one element, as the tiles store it (beta 0: C is not read) */
GEMM_INLINE void store_dot(float *c, float s, float alpha, float beta) {
  if (beta == 0)
    *c = alpha * s;
  else if (beta == 1)
    *c = alpha * s + *c;
  else
    *c = alpha * s + beta * *c;
}

/* ------------------------------------------------------------ AVX-512: 12 x 32 tiles */
LT_ISA_BEGIN_AVX512

#define MR5 12
#define NR5 32

/* C = alpha * acc + beta * S on the lanes of m (beta 0: S is not read) */
GEMM_INLINE void store5(float *c, const float *s, __m512 acc, __m512 al, float beta, __mmask16 m) {
  __m512 r;
  if (beta == 0)
    r = _mm512_mul_ps(al, acc);
  else if (beta == 1)
    r = _mm512_fmadd_ps(al, acc, _mm512_maskz_loadu_ps(m, s));
  else
    r = _mm512_fmadd_ps(al, acc, _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(m, s)));
  _mm512_mask_storeu_ps(c, m, r);
}

/* The k loop of a tile for its first R rows and first V vectors of columns (constants where it
** is inlined): a strip of A's last few rows or a panel's last few columns, a convolution's 6 or
** 16 output channels or a classifier's 10 outputs, runs only the multiply-adds it stores,
** each element the same chain as in a whole tile. A strip's rows at k: pa + k acs, side by side. */
GEMM_INLINE void tile5_loop(int R, int V, int64_t kc, const float *pa, int64_t acs,
                            const float *pb, int64_t bs, __m512 lo[MR5], __m512 hi[MR5]) {
  for (int64_t k = 0; k < kc; k++, pa += acs, pb += bs) {
    __m512 b0 = _mm512_loadu_ps(pb), b1 = V > 1 ? _mm512_loadu_ps(pb + 16) : b0;
#pragma GCC unroll 12
    for (int i = 0; i < R; i++) {
      __m512 av = _mm512_set1_ps(pa[i]);
      lo[i] = _mm512_fmadd_ps(av, b0, lo[i]);
      if (V > 1) hi[i] = _mm512_fmadd_ps(av, b1, hi[i]);
    }
  }
}

/* tile5_loop for a whole strip of A read in place, its rows lda apart: four row pointers, the
** others at one and two lda from them (addressing modes, where twelve pointers would spill) */
GEMM_INLINE void tile5_direct(int V, int64_t kc, const float *a, int64_t lda, const float *pb,
                              int64_t bs, __m512 lo[MR5], __m512 hi[MR5]) {
  const float *p0 = a, *p3 = a + 3 * lda, *p6 = a + 6 * lda, *p9 = a + 9 * lda;
  for (int64_t k = 0; k < kc; k++, p0++, p3++, p6++, p9++, pb += bs) {
    __m512 b0 = _mm512_loadu_ps(pb), b1 = V > 1 ? _mm512_loadu_ps(pb + 16) : b0;
#pragma GCC unroll 12
    for (int i = 0; i < MR5; i++) {
      const float *p = i < 3 ? p0 : i < 6 ? p3 : i < 9 ? p6 : p9;
      __m512 av = _mm512_set1_ps(p[(i % 3) * lda]);
      lo[i] = _mm512_fmadd_ps(av, b0, lo[i]);
      if (V > 1) hi[i] = _mm512_fmadd_ps(av, b1, hi[i]);
    }
  }
}

static void tile_avx512(int64_t kc, const float *pa, int64_t ars, int64_t acs, const float *pb,
                        int64_t bs, float *c, int64_t ldc, const float *s, int64_t lds,
                        float alpha, float beta, int rows, int cols) {
  __m512 lo[MR5], hi[MR5];
#pragma GCC unroll 12
  for (int i = 0; i < MR5; i++) lo[i] = hi[i] = _mm512_setzero_ps();
  if (acs == 1)
    cols <= 16 ? tile5_direct(1, kc, pa, ars, pb, bs, lo, hi)
               : tile5_direct(2, kc, pa, ars, pb, bs, lo, hi);
  else
    RUN_TILE(tile5_loop, MR5, 16, rows, cols, kc, pa, acs, pb, bs, lo, hi);
  __m512 al = _mm512_set1_ps(alpha);
  __mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
  __mmask16 m1 = cols >= 32 ? 0xffff : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);
#pragma GCC unroll 12
  for (int i = 0; i < MR5; i++) {
    if (i >= rows) break;
    store5(c + i * ldc, s + i * lds, lo[i], al, beta, m0);
    if (m1) store5(c + i * ldc + 16, s + i * lds + 16, hi[i], al, beta, m1);
  }
}

/* tpose_fn at AVX-512: 16 rows of 16 k at a time, transposed in three rounds of shuffles
** (pairs of rows, then fours within each 128-bit lane, then the lanes) */
static void tpose_avx512(float *dst, int64_t ld, const float *src, int64_t ss, int rows, int width,
                         int64_t kc) {
  __mmask16 keep = (__mmask16)((1u << width) - 1);
  int64_t k = 0;
  if (rows > 0)
    for (; k + 16 <= kc; k += 16) {
      __m512 r[16], t[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_loadu_ps(src + i * ss + k) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
      }
      /* r[4g + q], lane L: rows 4g..4g+3 at k + 4L + q */
#pragma GCC unroll 4
      for (int g = 0; g < 16; g += 4) {
        r[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
        r[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xee);
        r[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        r[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xee);
      }
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++) {
        __m512 c0 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x44);
        __m512 c1 = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xee);
        __m512 c2 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x44);
        __m512 c3 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xee);
        t[q] = _mm512_shuffle_f32x4(c0, c2, 0x88);
        t[4 + q] = _mm512_shuffle_f32x4(c0, c2, 0xdd);
        t[8 + q] = _mm512_shuffle_f32x4(c1, c3, 0x88);
        t[12 + q] = _mm512_shuffle_f32x4(c1, c3, 0xdd);
      }
#pragma GCC unroll 16
      for (int i = 0; i < 16; i++) _mm512_mask_storeu_ps(dst + (k + i) * ld, keep, t[i]);
    }
  tpose_rest(dst, ld, src, ss, rows, width, k, kc);
}

/* C[0:rows, 0:cols] (at most 4 x 4) from dots of rows of A and of B^T, k contiguous in both */
static void dots_avx512(int64_t k, const float *a, int64_t lda, const float *bt, int64_t ldb,
                        float *c, int64_t ldc, float alpha, float beta, int rows, int cols) {
  const float *ar[4], *br[4];
  for (int i = 0; i < 4; i++) {   /* absent rows repeat row 0; their sums are not stored */
    ar[i] = a + (i < rows ? i : 0) * lda;
    br[i] = bt + (i < cols ? i : 0) * ldb;
  }
  __m512 s[4][4];
#pragma GCC unroll 16
  for (int q = 0; q < 16; q++) s[q / 4][q % 4] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p += 16) {
    __mmask16 m = k - p >= 16 ? 0xffff : (__mmask16)((1u << (k - p)) - 1);
    __m512 av[4], bv[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      av[i] = _mm512_maskz_loadu_ps(m, ar[i] + p);
      bv[i] = _mm512_maskz_loadu_ps(m, br[i] + p);
    }
#pragma GCC unroll 16
    for (int q = 0; q < 16; q++) s[q / 4][q % 4] = _mm512_fmadd_ps(av[q / 4], bv[q % 4], s[q / 4][q % 4]);
  }
  /* indices known at compile time, so that s stays in registers: indexed by rows and cols, GCC
  ** kept it on the stack and stored all 16 sums every step of the loop above (3x slower) */
#pragma GCC unroll 16
  for (int q = 0; q < 16; q++)
    if (q / 4 < rows && q % 4 < cols)
      store_dot(c + q / 4 * ldc + q % 4, _mm512_reduce_add_ps(s[q / 4][q % 4]), alpha, beta);
}

static void sgemm_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                         const float *bias, float *c, int64_t ldc, float *pa, float *pb) {
  if (by_dots(ta, tb, m, n, k)) {
    bias_rows(bias, c, ldc, m, n);
    dot_blocks(dots_avx512, 4, 4, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    drive(MR5, NR5, tile_avx512, tpose_avx512, 16, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
          bias, c, ldc, pa, pb);
  }
}

LT_ISA_END

/* ------------------------------------------------------------ AVX2+FMA: 6 x 16 tiles */
LT_ISA_BEGIN_AVX2

#define MR2 6
#define NR2 16

GEMM_INLINE __m256i lanes2(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n < 0 ? 0 : n > 8 ? 8 : n),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

GEMM_INLINE void store2(float *c, const float *s, __m256 acc, __m256 al, float beta, bool full,
                        __m256i m) {
  __m256 r, old = _mm256_setzero_ps();
  if (beta != 0) old = full ? _mm256_loadu_ps(s) : _mm256_maskload_ps(s, m);
  if (beta == 0)
    r = _mm256_mul_ps(al, acc);
  else if (beta == 1)
    r = _mm256_fmadd_ps(al, acc, old);
  else
    r = _mm256_fmadd_ps(al, acc, _mm256_mul_ps(_mm256_set1_ps(beta), old));
  if (full)
    _mm256_storeu_ps(c, r);
  else
    _mm256_maskstore_ps(c, m, r);
}

/* tile5_loop at AVX2 */
GEMM_INLINE void tile2_loop(int R, int V, int64_t kc, const float *pa, int64_t acs,
                            const float *pb, int64_t bs, __m256 lo[MR2], __m256 hi[MR2]) {
  for (int64_t k = 0; k < kc; k++, pa += acs, pb += bs) {
    __m256 b0 = _mm256_loadu_ps(pb), b1 = V > 1 ? _mm256_loadu_ps(pb + 8) : b0;
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
      __m256 av = _mm256_broadcast_ss(pa + i);
      lo[i] = _mm256_fmadd_ps(av, b0, lo[i]);
      if (V > 1) hi[i] = _mm256_fmadd_ps(av, b1, hi[i]);
    }
  }
}

/* tile5_direct at AVX2 */
GEMM_INLINE void tile2_direct(int V, int64_t kc, const float *a, int64_t lda, const float *pb,
                              int64_t bs, __m256 lo[MR2], __m256 hi[MR2]) {
  const float *p0 = a, *p3 = a + 3 * lda;
  for (int64_t k = 0; k < kc; k++, p0++, p3++, pb += bs) {
    __m256 b0 = _mm256_loadu_ps(pb), b1 = V > 1 ? _mm256_loadu_ps(pb + 8) : b0;
#pragma GCC unroll 6
    for (int i = 0; i < MR2; i++) {
      __m256 av = _mm256_broadcast_ss((i < 3 ? p0 : p3) + (i % 3) * lda);
      lo[i] = _mm256_fmadd_ps(av, b0, lo[i]);
      if (V > 1) hi[i] = _mm256_fmadd_ps(av, b1, hi[i]);
    }
  }
}

static void tile_avx2(int64_t kc, const float *pa, int64_t ars, int64_t acs, const float *pb,
                      int64_t bs, float *c, int64_t ldc, const float *s, int64_t lds,
                      float alpha, float beta, int rows, int cols) {
  __m256 lo[MR2], hi[MR2];
#pragma GCC unroll 6
  for (int i = 0; i < MR2; i++) lo[i] = hi[i] = _mm256_setzero_ps();
  if (acs == 1)
    cols <= 8 ? tile2_direct(1, kc, pa, ars, pb, bs, lo, hi)
              : tile2_direct(2, kc, pa, ars, pb, bs, lo, hi);
  else
    RUN_TILE(tile2_loop, MR2, 8, rows, cols, kc, pa, acs, pb, bs, lo, hi);
  __m256 al = _mm256_set1_ps(alpha);
  bool full0 = cols >= 8, full1 = cols >= 16;
  __m256i m0 = lanes2(cols), m1 = lanes2(cols - 8);
#pragma GCC unroll 6
  for (int i = 0; i < MR2; i++) {
    if (i >= rows) break;
    store2(c + i * ldc, s + i * lds, lo[i], al, beta, full0, m0);
    if (cols > 8) store2(c + i * ldc + 8, s + i * lds + 8, hi[i], al, beta, full1, m1);
  }
}

/* tpose_avx512 at AVX2: 8 rows of 8 k at a time */
static void tpose_avx2(float *dst, int64_t ld, const float *src, int64_t ss, int rows, int width,
                       int64_t kc) {
  bool full = width == 8;
  __m256i keep = lanes2(width);
  int64_t k = 0;
  if (rows > 0)
    for (; k + 8 <= kc; k += 8) {
      __m256 r[8], t[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++)
        r[i] = i < rows ? _mm256_loadu_ps(src + i * ss + k) : _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
#pragma GCC unroll 2
      for (int g = 0; g < 8; g += 4) {
        r[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
        r[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
        r[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        r[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
      }
#pragma GCC unroll 4
      for (int q = 0; q < 4; q++) {
        t[q] = _mm256_permute2f128_ps(r[q], r[4 + q], 0x20);
        t[4 + q] = _mm256_permute2f128_ps(r[q], r[4 + q], 0x31);
      }
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) {
        if (full)
          _mm256_storeu_ps(dst + (k + i) * ld, t[i]);
        else   /* a strip of 6 rows: the next k's stores overwrite nothing of this one */
          _mm256_maskstore_ps(dst + (k + i) * ld, keep, t[i]);
      }
    }
  tpose_rest(dst, ld, src, ss, rows, width, k, kc);
}

/* dots_avx512 at AVX2: blocks of 2 x 4 (8 accumulators and 6 operands of 16 registers) */
static void dots_avx2(int64_t k, const float *a, int64_t lda, const float *bt, int64_t ldb,
                      float *c, int64_t ldc, float alpha, float beta, int rows, int cols) {
  const float *ar[2], *br[4];
  for (int i = 0; i < 2; i++) ar[i] = a + (i < rows ? i : 0) * lda;
  for (int i = 0; i < 4; i++) br[i] = bt + (i < cols ? i : 0) * ldb;
  __m256 s[2][4];
#pragma GCC unroll 8
  for (int q = 0; q < 8; q++) s[q / 4][q % 4] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; p += 8) {
    bool full = k - p >= 8;
    __m256i m = lanes2((int)ltC_min(8, k - p));
    __m256 av[2], bv[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
      if (i < 2) av[i] = full ? _mm256_loadu_ps(ar[i] + p) : _mm256_maskload_ps(ar[i] + p, m);
      bv[i] = full ? _mm256_loadu_ps(br[i] + p) : _mm256_maskload_ps(br[i] + p, m);
    }
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) s[q / 4][q % 4] = _mm256_fmadd_ps(av[q / 4], bv[q % 4], s[q / 4][q % 4]);
  }
#pragma GCC unroll 8
  for (int q = 0; q < 8; q++) {   /* constant indices, as dots_avx512 */
    if (q / 4 >= rows || q % 4 >= cols) continue;
    __m256 v = s[q / 4][q % 4];
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    store_dot(c + q / 4 * ldc + q % 4, _mm_cvtss_f32(h), alpha, beta);
  }
}

static void sgemm_avx2(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                       const float *bias, float *c, int64_t ldc, float *pa, float *pb) {
  if (by_dots(ta, tb, m, n, k)) {
    bias_rows(bias, c, ldc, m, n);
    dot_blocks(dots_avx2, 2, 4, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    drive(MR2, NR2, tile_avx2, tpose_avx2, 8, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
          bias, c, ldc, pa, pb);
  }
}

LT_ISA_END

bool ltC_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, const float *bias, float *c,
               int64_t ldc) {
  if (!lantern_chosen()) return false;
  int lv = ltB_cpu_isa();   /* AVX2 at least: the choice needs it */
  int mr = lv >= LT_ISA_AVX512 ? MR5 : MR2, nr = lv >= LT_ISA_AVX512 ? NR5 : NR2;
  /* packing space for the blocks this product has, not the largest: small products (attention
  ** tiles, a bias's gradient) then take a small buffer from the cache */
  size_t kc = (size_t)ltC_min(k, KC), rows = (size_t)ltC_min(m, (int64_t)MC_STRIPS * mr);
  size_t cols = (size_t)ltC_min(n, nc_cols);
  /* pb 64-byte aligned, so that a packed panel's rows never straddle cache lines */
  size_t na = ((rows + mr - 1) / mr * mr * kc + 15) / 16 * 16;
  size_t nb = kc * ((cols + nr - 1) / nr * nr);
  size_t got;
  float *pa = ltB_cache_alloc((na + nb) * sizeof(float), &got);
  if (!pa) return false;
  float *pb = pa + na;
  if (lv >= LT_ISA_AVX512)
    sgemm_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, pa, pb);
  else
    sgemm_avx2(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, bias, c, ldc, pa, pb);
  ltB_cache_free(pa, (na + nb) * sizeof(float));
  return true;
}

#else

bool ltC_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
               int64_t lda, const float *b, int64_t ldb, float beta, const float *bias, float *c,
               int64_t ldc) {
  (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b;
  (void)ldb, (void)beta, (void)bias, (void)c, (void)ldc;
  return false;
}

#endif
