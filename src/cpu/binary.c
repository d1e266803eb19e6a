/*
** cpu/binary.c -- cpu kernels of the binary elementwise ops and their fused gradient formulas
** (ltK_backend's `binary` and `binary_flat`).
**
** Typed kernels exist per compute dtype. Operands whose dtype differs from the compute dtype
** go through small on-stack blocks (convert, compute, convert back), so mixed dtypes cost no
** allocation. The float32 kernel is compiled three times, for SSE4.2 (the build's baseline),
** AVX2+FMA and AVX-512 (cpu_isa.c picks one at run time); every level gives the same bits
** (vmath.h says why).
*/
#include <math.h>
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "ew.h"

#define LT_T float
#define LT_S f
#include "binary_float.h"
#undef LT_T
#undef LT_S
#define LT_T double
#define LT_S
#include "binary_float.h"
#undef LT_T
#undef LT_S

typedef void (*bin_kernel)(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,
                           double p0, double p1);

static void bin_f32(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n, double p0,
                    double p1) {
  bin_body_float(op, d, so, sa, sb, n, p0, p1);
}
static void bin_f64(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n, double p0,
                    double p1) {
  bin_body_double(op, d, so, sa, sb, n, p0, p1);
}
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static void bin_f32_avx2(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,
                         double p0, double p1) {
  bin_body_float(op, d, so, sa, sb, n, p0, p1);
}
LT_ISA_END
LT_ISA_BEGIN_AVX512
static void bin_f32_avx512(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,
                           double p0, double p1) {
  bin_body_float(op, d, so, sa, sb, n, p0, p1);
}
LT_ISA_END
#endif

/* ================================================================ integer and bool */

#define LT_LT int64_t
#define LT_LOT int64_t
#define LT_LNAME bloop_i64
#define LT_LP ewp_int64_t
#include "ew_loop2.h"
#define LT_LT int64_t
#define LT_LOT ltC_u8
#define LT_LNAME bloop_i64_u8
#define LT_LP ewp_int64_t
#include "ew_loop2.h"
#define LT_LT ltC_u8
#define LT_LOT ltC_u8
#define LT_LNAME bloop_b8
#define LT_LP ewp_lt_u8
#include "ew_loop2.h"

static inline int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) {
    if (b == 1) return 1;
    if (b == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  uint64_t r = 1, x = (uint64_t)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return (int64_t)r;
}
/* Divisors of zero are rejected before the kernel runs; the guards keep this total. */
static inline int64_t ifmod(int64_t x, int64_t y) {
  if (y == 0 || y == -1) return 0;
  return x % y;
}
static inline int64_t irem(int64_t x, int64_t y) {
  int64_t r = ifmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}
static inline int64_t idiv(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return ltC_ew_wsub(0, x);   /* INT64_MIN / -1 wraps instead of trapping */
  return x / y;
}
/* Floor division: C's truncating quotient, one lower when the signs differ and it is inexact. */
static inline int64_t ifloordiv(int64_t x, int64_t y) {
  int64_t q = idiv(x, y);
  if (y != 0 && y != -1 && x % y != 0 && ((x < 0) != (y < 0))) q--;
  return q;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
typedef const ewp_int64_t ipar;
LT_EW_INLINE int64_t i_add(int64_t x, int64_t y, ipar *p) { return ltC_ew_wadd(x, y); }
LT_EW_INLINE int64_t i_sub(int64_t x, int64_t y, ipar *p) { return ltC_ew_wsub(x, y); }
LT_EW_INLINE int64_t i_mul(int64_t x, int64_t y, ipar *p) { return ltC_ew_wmul(x, y); }
LT_EW_INLINE int64_t i_div(int64_t x, int64_t y, ipar *p) { return idiv(x, y); }
LT_EW_INLINE int64_t i_pow(int64_t x, int64_t y, ipar *p) { return ipow(x, y); }
LT_EW_INLINE int64_t i_max(int64_t x, int64_t y, ipar *p) { return x > y ? x : y; }
LT_EW_INLINE int64_t i_min(int64_t x, int64_t y, ipar *p) { return x < y ? x : y; }
LT_EW_INLINE int64_t i_fmod(int64_t x, int64_t y, ipar *p) { return ifmod(x, y); }
LT_EW_INLINE int64_t i_rem(int64_t x, int64_t y, ipar *p) { return irem(x, y); }
LT_EW_INLINE int64_t i_floordiv(int64_t x, int64_t y, ipar *p) { return ifloordiv(x, y); }
LT_EW_INLINE ltC_u8 i_eq(int64_t x, int64_t y, ipar *p) { return x == y; }
LT_EW_INLINE ltC_u8 i_ne(int64_t x, int64_t y, ipar *p) { return x != y; }
LT_EW_INLINE ltC_u8 i_lt(int64_t x, int64_t y, ipar *p) { return x < y; }
LT_EW_INLINE ltC_u8 i_le(int64_t x, int64_t y, ipar *p) { return x <= y; }
LT_EW_INLINE ltC_u8 i_gt(int64_t x, int64_t y, ipar *p) { return x > y; }
LT_EW_INLINE ltC_u8 i_ge(int64_t x, int64_t y, ipar *p) { return x >= y; }

/* bool operands are 0 or nonzero bytes */
typedef const ewp_lt_u8 bpar;
LT_EW_INLINE ltC_u8 l_or(ltC_u8 x, ltC_u8 y, bpar *p) { return (x != 0) | (y != 0); }
LT_EW_INLINE ltC_u8 l_and(ltC_u8 x, ltC_u8 y, bpar *p) { return (x != 0) & (y != 0); }
LT_EW_INLINE ltC_u8 l_xor(ltC_u8 x, ltC_u8 y, bpar *p) { return (x != 0) ^ (y != 0); }
LT_EW_INLINE ltC_u8 l_eq(ltC_u8 x, ltC_u8 y, bpar *p) { return (x != 0) == (y != 0); }
LT_EW_INLINE ltC_u8 l_lt(ltC_u8 x, ltC_u8 y, bpar *p) { return (x == 0) & (y != 0); }
LT_EW_INLINE ltC_u8 l_le(ltC_u8 x, ltC_u8 y, bpar *p) { return (x == 0) | (y != 0); }
LT_EW_INLINE ltC_u8 l_gt(ltC_u8 x, ltC_u8 y, bpar *p) { return (x != 0) & (y == 0); }
LT_EW_INLINE ltC_u8 l_ge(ltC_u8 x, ltC_u8 y, bpar *p) { return (x != 0) | (y == 0); }
#pragma GCC diagnostic pop

static void bin_i64(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n, double p0,
                    double p1) {
  (void)p0;
  (void)p1;
  const ewp_int64_t p = {0, 0};
#define L(f) bloop_i64(d, so, sa, sb, n, &p, f); break
#define LB(f) bloop_i64_u8(d, so, sa, sb, n, &p, f); break
  switch (op) {
    case LT_ADD: L(i_add);
    case LT_SUB: L(i_sub);
    case LT_MUL: L(i_mul);
    case LT_DIV:
    case LT_DIV_TRUNC: L(i_div);
    case LT_POW: L(i_pow);
    case LT_MAXIMUM: L(i_max);
    case LT_MINIMUM: L(i_min);
    case LT_EQ:
    case LT_EW_ISCLOSE:
    case LT_EW_ISCLOSE_NAN: LB(i_eq);
    case LT_NE: LB(i_ne);
    case LT_LT: LB(i_lt);
    case LT_LE: LB(i_le);
    case LT_GT: LB(i_gt);
    case LT_GE: LB(i_ge);
    case LT_FMOD: L(i_fmod);
    case LT_REMAINDER: L(i_rem);
    case LT_DIV_FLOOR:
    case LT_FLOOR_DIVIDE: L(i_floordiv);
    default: break;
  }
#undef L
#undef LB
}

static void bin_b8(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n, double p0,
                   double p1) {
  (void)p0;
  (void)p1;
  const ewp_lt_u8 p = {0, 0};
#define L(f) bloop_b8(d, so, sa, sb, n, &p, f); break
  switch (op) {
    case LT_ADD:
    case LT_MAXIMUM:
    case LT_LOR: L(l_or);
    case LT_MUL:
    case LT_MINIMUM:
    case LT_LAND: L(l_and);
    case LT_LXOR:
    case LT_NE: L(l_xor);
    case LT_EQ:
    case LT_EW_ISCLOSE:
    case LT_EW_ISCLOSE_NAN: L(l_eq);
    case LT_LT: L(l_lt);
    case LT_LE: L(l_le);
    case LT_GT: L(l_gt);
    case LT_GE: L(l_ge);
    default: break;
  }
#undef L
}

static bin_kernel bin_f32_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return bin_f32_avx512;
    case LT_ISA_AVX2: return bin_f32_avx2;
    default: break;
  }
#endif
  return bin_f32;
}

static bin_kernel bin_kernel_for(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT32: return bin_f32_for_isa();
    case LT_FLOAT64: return bin_f64;
    case LT_INT64: return bin_i64;
    default: return bin_b8;
  }
}

static bool bin_writes_bool(int op) {
  return (op >= LT_EQ && op <= LT_LXOR) || op == LT_EW_ISCLOSE || op == LT_EW_ISCLOSE_NAN;
}

/* ================================================================ driver */

typedef struct {
  int op;
  lt_dtype dto, dta, dtb, dtc, dtr;   /* out, a, b, compute, what the kernel writes */
  double p0, p1;
  bin_kernel k;
  bool direct;                        /* no conversion needed */
  bool stream;                        /* out is written past the caches (stream.c) */
} bin_job;

/* Points *p and *s at m elements of an input row in the compute dtype: the row itself when its
** dtype already is that, else the block (converted here; a broadcast scalar, stride 0, was
** converted once before the loop). */
static inline void stage_operand(char **p, int64_t *s, char *src, int64_t st, bool same,
                                 lt_dtype dt, double *block, int64_t ec, lt_dtype dtc,
                                 int64_t m) {
  if (same) {
    *p = src;
    *s = st;
    return;
  }
  if (st != 0) ltC_ew_convert(src, st, dt, (char *)block, ec, dtc, m);
  *p = (char *)block;
  *s = st != 0 ? ec : 0;
}

/* Runs one row whose operands need converting, through stack blocks. Kept out of line: its
** 6 KB of blocks would otherwise enlarge (and probe) the frame of every small op. */
static __attribute__((noinline)) void bin_row_convert(char **d, const int64_t *st, int64_t n,
                                                      const bin_job *j) {
  double ba[LT_EW_BLK], bb[LT_EW_BLK], bo[LT_EW_BLK];
  int64_t ec = (int64_t)lt_dtype_size(j->dtc);
  int64_t er = (int64_t)lt_dtype_size(j->dtr);
  bool ca = j->dta == j->dtc, cb = j->dtb == j->dtc, co = j->dto == j->dtr;
  if (!ca && st[1] == 0) ltC_ew_convert(d[1], 0, j->dta, (char *)ba, 0, j->dtc, 1);
  if (!cb && st[2] == 0) ltC_ew_convert(d[2], 0, j->dtb, (char *)bb, 0, j->dtc, 1);
  for (int64_t i0 = 0; i0 < n; i0 += LT_EW_BLK) {
    int64_t m = n - i0 < LT_EW_BLK ? n - i0 : LT_EW_BLK;
    char *p[3];
    int64_t s[3];
    stage_operand(&p[1], &s[1], d[1] + i0 * st[1], st[1], ca, j->dta, ba, ec, j->dtc, m);
    stage_operand(&p[2], &s[2], d[2] + i0 * st[2], st[2], cb, j->dtb, bb, ec, j->dtc, m);
    if (co) {
      p[0] = d[0] + i0 * st[0];
      s[0] = st[0];
    } else {
      p[0] = (char *)bo;
      s[0] = er;
    }
    j->k(j->op, p, s[0], s[1], s[2], m, j->p0, j->p1);
    if (!co) ltC_ew_convert((char *)bo, er, j->dtr, d[0] + i0 * st[0], st[0], j->dto, m);
  }
}

static void bin_row_direct(char **d, const int64_t *st, int64_t n, void *ud) {
  const bin_job *j = ud;
  j->k(j->op, d, st[0], st[1], st[2], n, j->p0, j->p1);
}

/* rows shorter than this are not streamed: each streamed row ends with a store fence, and a
** bias added down (32, 64, 32, 32) in rows of 1024 took 800 us streamed, 424 not */
#define STREAM_ROW_MIN 16384

static void bin_row(char **d, const int64_t *st, int64_t n, void *ud) {
  const bin_job *j = ud;
  if (!j->direct)
    bin_row_convert(d, st, n, j);
  else if (j->stream && n >= STREAM_ROW_MIN && st[0] == (int64_t)lt_dtype_size(j->dto)) {
    bool dense32 = j->dto == LT_FLOAT32 && (st[1] == 4 || st[1] == 0) &&
                   (st[2] == 4 || st[2] == 0);
    if (!dense32 || !ltC_stream_f32_binary(j->op, (float *)d[0], (const float *)d[1], st[1] / 4,
                                           (const float *)d[2], st[2] / 4, n))
      ltC_stream_row(d, st, 3, n, bin_row_direct, ud);
  }
  else
    bin_row_direct(d, st, n, ud);
}

/* How an operand of a small op can be read as one row beside out: 1 when it walks with out
** (same sizes and strides over out's dense layout), 0 when it is one broadcast element, -1 when
** it needs the iterator. */
static int row_stride(const lt_tensor *t, const lt_tensor *out) {
  if (t->ndim == out->ndim) {
    int i = 0;
    while (i < t->ndim && t->size[i] == out->size[i] &&
           (t->size[i] == 1 || t->stride[i] == out->stride[i]))
      i++;
    if (i == t->ndim) return 1;
  }
  return ltB_shape_numel(t->ndim, t->size) == 1 ? 0 : -1;
}

static int64_t nbytes(const lt_tensor *t) {
  return ltB_shape_numel(t->ndim, t->size) * (int64_t)ltB_esize(t->dtype);
}

void ltC_binary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a,
                const lt_tensor *b, lt_dtype compute, double p0, double p1) {
  bin_job j;
  j.op = op;
  j.dto = out->dtype;
  j.dta = a->dtype;
  j.dtb = b->dtype;
  j.dtc = (op == LT_LAND || op == LT_LOR || op == LT_LXOR) ? LT_BOOL : compute;
  j.dtr = bin_writes_bool(op) ? LT_BOOL : j.dtc;
  j.p0 = p0;
  j.p1 = p1;
  j.k = bin_kernel_for(j.dtc);
  j.direct = j.dta == j.dtc && j.dtb == j.dtc && j.dto == j.dtr;
  int64_t n = ltB_shape_numel(out->ndim, out->size);
  if (n == 0) return;
  /* not in place: the output's lines are read as an operand anyway, and streamed stores then
  ** only push them out of the cache (a += b on 16M floats, one thread: 34 GB/s streamed, 42
  ** with ordinary stores) */
  j.stream = n >= LT_PAR_MIN && out->storage != a->storage && out->storage != b->storage &&
             ltC_stream_wanted(n * (int64_t)ltB_esize(out->dtype) + nbytes(a) + nbytes(b));
  /* small and simple: one row without building an iterator */
  if (n < LT_PAR_MIN && lt_is_contiguous(out)) {
    int ra = row_stride(a, out), rb = row_stride(b, out);
    if (ra >= 0 && rb >= 0) {
      char *d[3] = {ltB_ptr(out), ltB_ptr(a), ltB_ptr(b)};
      int64_t st[3] = {(int64_t)ltB_esize(out->dtype), ra * (int64_t)ltB_esize(a->dtype),
                       rb * (int64_t)ltB_esize(b->dtype)};
      bin_row(d, st, n, &j);
      return;
    }
  }
  lt_tensor *ops[3] = {out, (lt_tensor *)a, (lt_tensor *)b};
  ltB_iter it;
  ltB_iter_init(&it, 3, ops, out->ndim, out->size);
  ltB_iter_run_ew(ctx, &it, bin_row, &j);
}

void ltC_binary_flat(int op, lt_dtype dt, int64_t n, void *out, const void *a, int sa,
                     const void *b, int sb) {
  char *d[3] = {out, (char *)a, (char *)b};
  int64_t es = (int64_t)ltB_esize(dt);
  bin_kernel_for(dt)(op, d, es, sa * es, sb * es, n, 0, 0);
}

