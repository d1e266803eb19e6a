/*
** cpu/unary.c -- cpu kernels of the unary elementwise ops (ltK_backend's `unary`), clamp
** included.
**
** The float32 kernel is compiled three times, for SSE4.2 (the build's baseline), AVX2+FMA and
** AVX-512 (cpu_isa.c picks one at run time); its transcendentals are vmath.h's, which
** vectorise and give the same bits at every level. Operands whose dtype differs from the
** compute dtype go through small on-stack blocks.
*/
#include <math.h>
#include <string.h>

#include "../cpu_isa.h"
#include "cpu.h"
#include "ew.h"

#define LT_T float
#define LT_S f
#include "unary_float.h"
#undef LT_T
#undef LT_S
#define LT_T double
#define LT_S
#include "unary_float.h"
#undef LT_T
#undef LT_S

typedef void (*un_kernel)(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0,
                          double p1);

static void un_f32(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0, double p1) {
  un_body_float(op, d, so, sa, n, p0, p1);
}
static void un_f64(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0, double p1) {
  un_body_double(op, d, so, sa, n, p0, p1);
}
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
static void un_f32_avx2(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0,
                        double p1) {
  if (op == LT_GELU) {   /* gelu.c's tables */
    ltC_gelu_avx2(d[0], so, NULL, 0, d[1], sa, n);
    return;
  }
  un_body_float(op, d, so, sa, n, p0, p1);
}
LT_ISA_END
LT_ISA_BEGIN_AVX512
static void un_f32_avx512(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0,
                          double p1) {
  if (op == LT_GELU) {
    ltC_gelu_avx512(d[0], so, NULL, 0, d[1], sa, n);
    return;
  }
  un_body_float(op, d, so, sa, n, p0, p1);
}
LT_ISA_END
#endif

/* ================================================================ integer and bool */

#define LT_LT int64_t
#define LT_LOT int64_t
#define LT_LNAME uloop_i64
#define LT_LP ewp_int64_t
#include "ew_loop1.h"
#define LT_LT int64_t
#define LT_LOT ltC_u8
#define LT_LNAME uloop_i64_u8
#define LT_LP ewp_int64_t
#include "ew_loop1.h"
#define LT_LT ltC_u8
#define LT_LOT ltC_u8
#define LT_LNAME uloop_b8
#define LT_LP ewp_lt_u8
#include "ew_loop1.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
typedef const ewp_int64_t ipar;
LT_EW_INLINE int64_t i_neg(int64_t x, ipar *p) { return ltC_ew_wsub(0, x); }
LT_EW_INLINE int64_t i_abs(int64_t x, ipar *p) { return x < 0 ? ltC_ew_wsub(0, x) : x; }
LT_EW_INLINE int64_t i_sign(int64_t x, ipar *p) { return (int64_t)((x > 0) - (x < 0)); }
LT_EW_INLINE int64_t i_relu(int64_t x, ipar *p) { return x > 0 ? x : 0; }
LT_EW_INLINE int64_t i_square(int64_t x, ipar *p) { return ltC_ew_wmul(x, x); }
LT_EW_INLINE int64_t i_same(int64_t x, ipar *p) { return x; }
LT_EW_INLINE int64_t i_clamp(int64_t x, ipar *p) {
  int64_t r = x < p->q0 ? p->q0 : x;
  return r > p->q1 ? p->q1 : r;
}
LT_EW_INLINE ltC_u8 i_lnot(int64_t x, ipar *p) { return x == 0; }
LT_EW_INLINE ltC_u8 i_false(int64_t x, ipar *p) { return 0; }
LT_EW_INLINE ltC_u8 i_true(int64_t x, ipar *p) { return 1; }
typedef const ewp_lt_u8 bpar;
LT_EW_INLINE ltC_u8 b_same(ltC_u8 x, bpar *p) { return x != 0; }
LT_EW_INLINE ltC_u8 b_not(ltC_u8 x, bpar *p) { return x == 0; }
LT_EW_INLINE ltC_u8 b_false(ltC_u8 x, bpar *p) { return 0; }
LT_EW_INLINE ltC_u8 b_true(ltC_u8 x, bpar *p) { return 1; }
#pragma GCC diagnostic pop

static void un_i64(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0, double p1) {
  /* bounds arrive as doubles; an absent bound is +-inf */
  const ewp_int64_t p = {ltC_ew_f2i(p0), ltC_ew_f2i(p1)};
#define L(f) uloop_i64(d, so, sa, n, &p, f); break
#define LB(f) uloop_i64_u8(d, so, sa, n, &p, f); break
  switch (op) {
    case LT_NEG: L(i_neg);
    case LT_ABS: L(i_abs);
    case LT_SIGN: L(i_sign);
    case LT_RELU: L(i_relu);
    case LT_SQUARE: L(i_square);
    case LT_FLOOR:
    case LT_CEIL:
    case LT_ROUND:
    case LT_TRUNC: L(i_same);
    case LT_LNOT: LB(i_lnot);
    case LT_ISNAN: LB(i_false);
    case LT_ISFINITE: LB(i_true);
    case LT_UCLAMP: L(i_clamp);
    default: break;
  }
#undef L
#undef LB
}

static void un_b8(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0, double p1) {
  (void)p0;
  (void)p1;
  const ewp_lt_u8 p = {0, 0};
#define L(f) uloop_b8(d, so, sa, n, &p, f); break
  switch (op) {
    case LT_SIGN:
    case LT_ABS:
    case LT_RELU:
    case LT_FLOOR:
    case LT_CEIL:
    case LT_ROUND:
    case LT_TRUNC:
    case LT_SQUARE: L(b_same);
    case LT_LNOT: L(b_not);
    case LT_ISNAN: L(b_false);
    case LT_ISFINITE: L(b_true);
    default: break;
  }
#undef L
}

static un_kernel un_f32_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return un_f32_avx512;
    case LT_ISA_AVX2: return un_f32_avx2;
    default: break;
  }
#endif
  return un_f32;
}

static un_kernel un_kernel_for(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT32: return un_f32_for_isa();
    case LT_FLOAT64: return un_f64;
    case LT_INT64: return un_i64;
    default: return un_b8;
  }
}

static bool un_writes_bool(int op) {
  return op == LT_LNOT || op == LT_ISNAN || op == LT_ISFINITE;
}

/* ================================================================ driver */

typedef struct {
  int op;
  lt_dtype dto, dta, dtc, dtr;
  double p0, p1;
  un_kernel k;
  bool direct;
  bool stream;   /* out is written past the caches (stream.c) */
} un_job;

static void un_row_direct(char **d, const int64_t *st, int64_t n, void *ud) {
  const un_job *j = ud;
  j->k(j->op, d, st[0], st[1], n, j->p0, j->p1);
}

static void un_row(char **d, const int64_t *st, int64_t n, void *ud) {
  const un_job *j = ud;
  if (j->direct) {
    if (j->stream && st[0] == (int64_t)lt_dtype_size(j->dto))
      ltC_stream_row(d, st, 2, n, un_row_direct, ud);
    else
      un_row_direct(d, st, n, ud);
    return;
  }
  double ba[LT_EW_BLK], bo[LT_EW_BLK];
  int64_t ec = (int64_t)lt_dtype_size(j->dtc), er = (int64_t)lt_dtype_size(j->dtr);
  bool ca = j->dta == j->dtc, co = j->dto == j->dtr;
  for (int64_t i0 = 0; i0 < n; i0 += LT_EW_BLK) {
    int64_t m = n - i0 < LT_EW_BLK ? n - i0 : LT_EW_BLK;
    char *p[2];
    int64_t s[2];
    if (ca) {
      p[1] = d[1] + i0 * st[1];
      s[1] = st[1];
    } else {
      ltC_ew_convert(d[1] + i0 * st[1], st[1], j->dta, (char *)ba, ec, j->dtc, m);
      p[1] = (char *)ba;
      s[1] = ec;
    }
    if (co) {
      p[0] = d[0] + i0 * st[0];
      s[0] = st[0];
    } else {
      p[0] = (char *)bo;
      s[0] = er;
    }
    j->k(j->op, p, s[0], s[1], m, j->p0, j->p1);
    if (!co) ltC_ew_convert((char *)bo, er, j->dtr, d[0] + i0 * st[0], st[0], j->dto, m);
  }
}

/* Unary ops compute in the output's dtype, except the bool-valued ones (isnan, isfinite,
** logical_not) which compute in the input's dtype. */
void ltC_unary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, double p0,
               double p1) {
  un_job j;
  j.op = op;
  j.dto = out->dtype;
  j.dta = a->dtype;
  j.dtc = un_writes_bool(op) ? a->dtype : out->dtype;
  j.dtr = un_writes_bool(op) ? LT_BOOL : j.dtc;
  j.p0 = p0;
  j.p1 = p1;
  j.k = un_kernel_for(j.dtc);
  j.direct = j.dta == j.dtc && j.dto == j.dtr;
  int64_t n, na;
  bool dense = ltB_dense(out, &n);
  if (n == 0) return;
  j.stream = n >= LT_PAR_MIN && out->storage != a->storage &&   /* in place: see binary.c */
             ltC_stream_wanted(n * (int64_t)(ltB_esize(out->dtype) + ltB_esize(a->dtype)));
  if (n < LT_PAR_MIN && dense && ltB_dense(a, &na) && ltB_same_shape(a, out)) {
    char *d[2] = {ltB_ptr(out), ltB_ptr(a)};
    int64_t st[2] = {(int64_t)ltB_esize(out->dtype), (int64_t)ltB_esize(a->dtype)};
    un_row(d, st, n, &j);
    return;
  }
  lt_tensor *ops[2] = {out, (lt_tensor *)a};
  ltB_iter it;
  ltB_iter_init(&it, 2, ops, out->ndim, out->size);
  ltB_iter_run_ew(ctx, &it, un_row, &j);
}

/* ================================================================ value and derivative
** ltC_unary_pair: gelu (erf form), the only paired op, in float32 (per ISA level) and float64.
** The values have the unary kernel's bits; the derivative is the gradient formula's with g = 1
** (float64, and float32 below AVX2) or gelu.c's table of G' (from AVX2 up). */

#define DEF_PAIR(NAME, T, F)                                                                   \
  static void NAME(char **d, const int64_t *st, int64_t n) {                                   \
    if (st[0] == (int64_t)sizeof(T) && st[1] == (int64_t)sizeof(T) &&                          \
        st[2] == (int64_t)sizeof(T)) {                                                         \
      T *y = (T *)d[0], *dy = (T *)d[1];                                                       \
      const T *x = (const T *)d[2];                                                            \
      _Pragma("GCC ivdep") for (int64_t i = 0; i < n; i++) y[i] = F(x[i], &dy[i]);            \
    } else {                                                                                   \
      for (int64_t i = 0; i < n; i++)                                                          \
        *(T *)(d[0] + i * st[0]) = F(*(const T *)(d[2] + i * st[2]), (T *)(d[1] + i * st[1])); \
    }                                                                                          \
  }

typedef void (*pair_kernel)(char **d, const int64_t *st, int64_t n);
DEF_PAIR(gelu_pair_f32, float, vm_gelu_pair_float)
DEF_PAIR(gelu_pair_f64, double, vm_gelu_pair_double)
#ifdef LT_ISA_DISPATCH
/* from AVX2 up: gelu.c's and gelu_avx512.c's tables, which the unpaired kernel uses too */
static void gelu_pair_f32_avx2(char **d, const int64_t *st, int64_t n) {
  ltC_gelu_avx2(d[0], st[0], d[1], st[1], d[2], st[2], n);
}
static void gelu_pair_f32_avx512(char **d, const int64_t *st, int64_t n) {
  ltC_gelu_avx512(d[0], st[0], d[1], st[1], d[2], st[2], n);
}
#endif

static pair_kernel gelu_pair_for(lt_dtype dt) {
  if (dt == LT_FLOAT64) return gelu_pair_f64;
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return gelu_pair_f32_avx512;
    case LT_ISA_AVX2: return gelu_pair_f32_avx2;
    default: break;
  }
#endif
  return gelu_pair_f32;
}

static void pair_row(char **d, const int64_t *st, int64_t n, void *ud) {
  pair_kernel k = *(pair_kernel *)ud;
  k(d, st, n);
}

void ltC_unary_pair(lt_ctx *ctx, int op, lt_tensor *out, lt_tensor *dout, const lt_tensor *a) {
  (void)op;   /* LT_GELU: the op layer pairs no other */
  pair_kernel k = gelu_pair_for(out->dtype);
  lt_tensor *ops[3] = {out, dout, (lt_tensor *)a};
  ltB_iter it;
  ltB_iter_init(&it, 3, ops, out->ndim, out->size);
  ltB_iter_run_ew(ctx, &it, pair_row, &k);
}
