/*
** cpu/copy.c -- the cpu copy kernel (dtype conversion and broadcasting of the source to the
** destination's shape, transposes by blocks) and the fill kernel.
*/
#include "../core.h"
#include "cpu.h"

typedef struct { lt_dtype dst, src; } copy_types;

/* One loop per (dst, src) dtype pair; LOOP expands into a strided conversion loop. */
#define LOOP(TD, TS, CONV)                                                   \
  do {                                                                       \
    if (sd == (int64_t)sizeof(TD) && ss == (int64_t)sizeof(TS)) {            \
      TD *d = (TD *)data[0];                                                 \
      const TS *s = (const TS *)data[1];                                     \
      for (int64_t i = 0; i < n; i++) d[i] = CONV(s[i]);                     \
    } else {                                                                 \
      for (int64_t i = 0; i < n; i++)                                        \
        *(TD *)(data[0] + i * sd) = CONV(*(const TS *)(data[1] + i * ss));   \
    }                                                                        \
  } while (0)

#define AS_IS(x) (x)
#define TO_BOOL(x) ((x) != 0)

/* n copies of the es-byte value at v, dense from d */
static void fill_bits(char *d, const char *v, int64_t n, int64_t es) {
  if (es == 8) {
    uint64_t b;
    memcpy(&b, v, 8);
    for (int64_t i = 0; i < n; i++) ((uint64_t *)d)[i] = b;
  } else if (es == 4) {
    uint32_t b;
    memcpy(&b, v, 4);
    for (int64_t i = 0; i < n; i++) ((uint32_t *)d)[i] = b;
  } else {
    for (int64_t i = 0; i < n; i++) memcpy(d + i * es, v, (size_t)es);
  }
}

static void copy_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const copy_types *ct = ud;
  int64_t sd = st[0], ss = st[1];
  /* dense rows of one dtype (a bias broadcast down the rows of addmm's C): libc's copy is wider
  ** than the build's baseline vectors */
  if (ct->dst == ct->src && sd == ss && sd == (int64_t)lt_dtype_size(ct->dst)) {
    memmove(data[0], data[1], (size_t)(n * sd));
    return;
  }
  /* a row read backwards (flip): a loop the compiler can vectorise with a permute, where the
  ** strided loop below took 0.6 ns an element */
  if (ct->dst == ct->src && sd == -ss && sd == (int64_t)lt_dtype_size(ct->dst) && sd >= 4) {
    if (sd == 8)
      for (int64_t i = 0; i < n; i++) ((uint64_t *)data[0])[i] = ((const uint64_t *)data[1])[-i];
    else
      for (int64_t i = 0; i < n; i++) ((uint32_t *)data[0])[i] = ((const uint32_t *)data[1])[-i];
    return;
  }
  /* one value broadcast along a dense row (a sum's gradient made contiguous): a fill, which
  ** vectorises, where the strided loop below took 0.45 ns an element */
  if (ct->dst == ct->src && ss == 0 && sd == (int64_t)lt_dtype_size(ct->dst)) {
    fill_bits(data[0], data[1], n, sd);
    return;
  }
  switch (ct->dst * LT_NDTYPE + ct->src) {
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT32: LOOP(float, float, AS_IS); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT64: LOOP(float, double, (float)); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_INT64: LOOP(float, int64_t, (float)); break;
    case LT_FLOAT32 * LT_NDTYPE + LT_BOOL: LOOP(float, bool, (float)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT32: LOOP(double, float, (double)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT64: LOOP(double, double, AS_IS); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_INT64: LOOP(double, int64_t, (double)); break;
    case LT_FLOAT64 * LT_NDTYPE + LT_BOOL: LOOP(double, bool, (double)); break;
    case LT_INT64 * LT_NDTYPE + LT_FLOAT32: LOOP(int64_t, float, (int64_t)); break;
    case LT_INT64 * LT_NDTYPE + LT_FLOAT64: LOOP(int64_t, double, (int64_t)); break;
    case LT_INT64 * LT_NDTYPE + LT_INT64: LOOP(int64_t, int64_t, AS_IS); break;
    case LT_INT64 * LT_NDTYPE + LT_BOOL: LOOP(int64_t, bool, (int64_t)); break;
    case LT_BOOL * LT_NDTYPE + LT_FLOAT32: LOOP(bool, float, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_FLOAT64: LOOP(bool, double, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_INT64: LOOP(bool, int64_t, TO_BOOL); break;
    case LT_BOOL * LT_NDTYPE + LT_BOOL: LOOP(bool, bool, AS_IS); break;
    default: break;
  }
}

/* ------------------------------------------------------------ transposes
** A copy into a dense tensor from one that runs with unit stride along another dimension (a
** transpose made contiguous): row by row, each element read lies a source row away from the
** last, a cache line apiece, and a 512 x 512 float32 transpose took 428 us (PyTorch 120), one
** of 2048 x 2048 24 ms (4.8). Here the plane of those two dimensions goes in square blocks: a
** block reads a line of the source per row it writes, each line used whole (70 us and 2.5 ms
** with float32's 8 x 8 register blocks, 150 us and 5.9 ms with the element loops below). */
#define TB 16
#define T_ROWS 64   /* rows of the plane per task */
#define T_MIN 4096  /* elements: smaller copies keep the row loop */

typedef struct {
  char *dst;
  const char *src;
  size_t es;
  int64_t rows, cols;   /* the plane: rows along the source's unit dimension, cols along the last */
  int64_t drs, scs;     /* destination stride of a row, source stride of a column (elements) */
  int nout;             /* the other dimensions, outermost first */
  int64_t osize[LT_MAX_DIMS], ods[LT_MAX_DIMS], oss[LT_MAX_DIMS];
  int64_t rtasks;       /* tasks per plane */
  bool f32;
} tcopy_job;

#define TCOPY_BLOCK(T)                                                          \
  for (int64_t j0 = 0; j0 < j->cols; j0 += TB) {                               \
    int64_t j1 = j0 + TB < j->cols ? j0 + TB : j->cols;                        \
    for (int64_t i0 = r0; i0 < r1; i0 += TB) {                                 \
      int64_t i1 = i0 + TB < r1 ? i0 + TB : r1;                                \
      for (int64_t i = i0; i < i1; i++) {                                      \
        T *dr = (T *)d + i * j->drs;                                           \
        const T *sc = (const T *)sp + i;                                       \
        for (int64_t c = j0; c < j1; c++) dr[c] = sc[c * j->scs];              \
      }                                                                        \
    }                                                                          \
  }

static void tcopy_range(int64_t t0, int64_t t1, void *ud) {
  const tcopy_job *j = ud;
  for (int64_t t = t0; t < t1; t++) {
    int64_t plane = t / j->rtasks, r0 = t % j->rtasks * T_ROWS;
    int64_t r1 = r0 + T_ROWS < j->rows ? r0 + T_ROWS : j->rows;
    int64_t doff = 0, soff = 0, rest = plane;
    for (int k = j->nout - 1; k >= 0; k--) {
      int64_t ix = rest % j->osize[k];
      rest /= j->osize[k];
      doff += ix * j->ods[k];
      soff += ix * j->oss[k];
    }
    char *d = j->dst + (size_t)doff * j->es;
    const char *sp = j->src + (size_t)soff * j->es;
    /* float32 by 8 x 8 blocks in vector registers where the CPU has AVX2 (the plane's columns
    ** are the source's rows) */
    if (j->es == 4 && j->f32 &&
        ltC_transpose_f32((const float *)sp + r0, j->cols, r1 - r0, j->scs,
                          (float *)d + r0 * j->drs, j->drs))
      continue;
    switch (j->es) {
      case 1: TCOPY_BLOCK(uint8_t) break;
      case 4: TCOPY_BLOCK(uint32_t) break;
      default: TCOPY_BLOCK(uint64_t) break;
    }
  }
}

/* The transposed copy when it applies: same dtype and shape, dst dense, src's last stride not
** 1 (nor 0: a broadcast along the last dim, as nearest upsampling's expand, reads one element
** per pair of columns, and through the blocks took 2.3 ms for 2M floats) and another
** dimension's 1. */
static bool copy_transposed(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src) {
  int nd = dst->ndim, last = nd - 1, d = -1;
  int64_t n;
  if (dst->dtype != src->dtype || nd < 2 || src->ndim != nd || !ltB_same_shape(dst, src) ||
      !ltB_dense(dst, &n) || n < T_MIN || src->stride[last] == 1 || src->stride[last] == 0 ||
      dst->size[last] < 2)
    return false;
  for (int k = last - 1; k >= 0 && d < 0; k--)
    if (src->stride[k] == 1 && src->size[k] > 1) d = k;
  if (d < 0) return false;
  tcopy_job j = {.dst = ltB_ptr(dst), .src = ltB_ptr(src), .es = ltB_esize(dst->dtype),
                 .rows = dst->size[d], .cols = dst->size[last], .drs = dst->stride[d],
                 .scs = src->stride[last], .f32 = dst->dtype == LT_FLOAT32};
  for (int k = 0; k < last; k++)
    if (k != d) {
      j.osize[j.nout] = dst->size[k];
      j.ods[j.nout] = dst->stride[k];
      j.oss[j.nout++] = src->stride[k];
    }
  j.rtasks = (j.rows + T_ROWS - 1) / T_ROWS;
  int64_t tasks = n / (j.rows * j.cols) * j.rtasks;
  int64_t per = T_ROWS * j.cols;   /* elements a task copies */
  ltB_parallel_for(ctx, tasks, (LT_PAR_MIN + per - 1) / per, tcopy_range, &j);
  return true;
}

/* ------------------------------------------------------------ short rows
** A copy of one dtype whose innermost dim is a few elements long (a broadcast of (H, 1, W, 1)
** to (H, 2, W, 2), as nearest upsampling makes; a narrow slice made contiguous; a padded
** image's rows): a kernel call per row of 2 cost 4 ns, 4.4 ms for 2M floats, and a libc copy
** per row of 32 most of `F.pad`'s time. Here each run of rows (ltB_iter_runs) goes in one
** loop. */
#define SHORT_ROW 64

#define SHORT_LOOP(T)                                                                  \
  if (ds == (int64_t)sizeof(T) && ss == (int64_t)sizeof(T)) {                          \
    for (int64_t i = 0; i < m; i++, d += step[0], s += step[1])                        \
      for (int64_t c = 0; c < inner; c++) ((T *)d)[c] = ((const T *)s)[c];             \
  } else if (ds == (int64_t)sizeof(T) && ss == 0) {   /* one value along each row */    \
    for (int64_t i = 0; i < m; i++, d += step[0], s += step[1])                        \
      fill_bits(d, s, inner, sizeof(T));                                               \
  } else if (ds == (int64_t)sizeof(T) && ss == -(int64_t)sizeof(T)) {   /* flip */     \
    for (int64_t i = 0; i < m; i++, d += step[0], s += step[1])                        \
      for (int64_t c = 0; c < inner; c++) ((T *)d)[c] = ((const T *)s)[-c];            \
  } else {                                                                             \
    for (int64_t i = 0; i < m; i++, d += step[0], s += step[1])                        \
      for (int64_t c = 0; c < inner; c++) *(T *)(d + c * ds) = *(const T *)(s + c * ss); \
  }

static void copy_short_run(char **ptr, const int64_t *step, int64_t m, void *ud) {
  const ltB_iter *it = ud;
  int nd = it->ndim;
  int64_t inner = it->size[nd - 1], ds = it->stride[0][nd - 1], ss = it->stride[1][nd - 1];
  char *d = ptr[0];
  const char *s = ptr[1];
  switch (it->esize[0]) {
    case 8: SHORT_LOOP(uint64_t) break;
    case 4: SHORT_LOOP(uint32_t) break;
    case 2: SHORT_LOOP(uint16_t) break;
    default: SHORT_LOOP(uint8_t) break;
  }
}

static void copy_short_rows(int64_t r0, int64_t r1, void *ud) {
  ltB_iter_runs(ud, r0, r1, copy_short_run, ud);
}

/* ------------------------------------------------------------ dense copies
** One dtype, both sides contiguous: libc's copy, cut into blocks over the pool. One core moved
** 16 MB in 1.22 ms on the Intel Xeon here at one thread and at two alike (clone, copy_, and
** cat and stack, which copy each piece into a dense slice); two cores take about half. Ranges
** that overlap keep a single memmove. */
#define DENSE_BLOCK ((int64_t)1 << 16)   /* bytes per task */
#define DENSE_GRAIN 4                     /* tasks per thread at least: 256 KB */

typedef struct { char *d; const char *s; int64_t n; } dense_copy;

static void dense_copy_range(int64_t b, int64_t e, void *ud) {
  const dense_copy *c = ud;
  int64_t lo = b * DENSE_BLOCK, hi = ltC_min(e * DENSE_BLOCK, c->n);
  memcpy(c->d + lo, c->s + lo, (size_t)(hi - lo));
}

static void copy_dense(lt_ctx *ctx, char *d, const char *s, int64_t n) {
  uintptr_t a = (uintptr_t)d, b = (uintptr_t)s;
  if (a < b + (uintptr_t)n && b < a + (uintptr_t)n) {
    memmove(d, s, (size_t)n);
    return;
  }
  dense_copy c = {d, s, n};
  ltB_parallel_for(ctx, (n + DENSE_BLOCK - 1) / DENSE_BLOCK, DENSE_GRAIN, dense_copy_range, &c);
}

void ltC_copy(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src) {
  if (dst->dtype == src->dtype && lt_is_contiguous(dst) && lt_is_contiguous(src) &&
      ltB_same_shape(dst, src)) {
    int64_t n = lt_numel(dst) * (int64_t)lt_dtype_size(dst->dtype);
    if (n) copy_dense(ctx, lt_data(dst), lt_data(src), n);
    return;
  }
  if (copy_transposed(ctx, dst, src)) return;
  lt_tensor *ops[2] = {dst, (lt_tensor *)src};
  ltB_iter it;
  ltB_iter_init(&it, 2, ops, dst->ndim, dst->size);
  if (it.numel == 0) return;
  if (dst->dtype == src->dtype && it.ndim >= 2 && it.size[it.ndim - 1] <= SHORT_ROW) {
    int64_t inner = it.size[it.ndim - 1];
    ltB_parallel_for(ctx, it.numel / inner, (LT_PAR_MIN + inner - 1) / inner, copy_short_rows,
                     &it);
    return;
  }
  copy_types ct = {dst->dtype, src->dtype};
  ltB_iter_run_ew(ctx, &it, copy_row, &ct);
}

typedef struct { lt_dtype dt; double v; } fill_args;

static void fill_row(char **data, const int64_t *st, int64_t n, void *ud) {
  const fill_args *fa = ud;
  int64_t s = st[0];
  switch (fa->dt) {
    case LT_FLOAT32: {
      float v = (float)fa->v;
      if (s == 4) {
        float *d = (float *)data[0];
        for (int64_t i = 0; i < n; i++) d[i] = v;
      } else {
        for (int64_t i = 0; i < n; i++) *(float *)(data[0] + i * s) = v;
      }
      break;
    }
    case LT_FLOAT64:
      for (int64_t i = 0; i < n; i++) *(double *)(data[0] + i * s) = fa->v;
      break;
    case LT_INT64:
      for (int64_t i = 0; i < n; i++) *(int64_t *)(data[0] + i * s) = (int64_t)fa->v;
      break;
    case LT_BOOL:
      for (int64_t i = 0; i < n; i++) *(bool *)(data[0] + i * s) = fa->v != 0;
      break;
    default: break;
  }
}

void ltC_fill(lt_ctx *ctx, lt_tensor *dst, double v) {
  lt_tensor *ops[1] = {dst};
  ltB_iter it;
  ltB_iter_init(&it, 1, ops, dst->ndim, dst->size);
  fill_args fa = {dst->dtype, v};
  ltB_iter_run_ew(ctx, &it, fill_row, &fa);
}
