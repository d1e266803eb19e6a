/*
** cpu/unary_float.h -- template: the unary element formulas of one float type and the kernel
** body that runs them. Included by unary.c with LT_T (float or double) and LT_S (libm's suffix:
** f or nothing); the body is always inlined into one kernel per ISA level.
*/
#define TF(n) LT_EW_PASTE(n##_, LT_T)   /* name_float / name_double */
#define M(f) LT_EW_PASTE(f, LT_S)        /* libm: sinf / sin */
#define VM(f) TF(vm_##f)                 /* vmath.h */
#define P TF(ewp)

#define LT_LT LT_T
#define LT_LOT LT_T
#define LT_LNAME TF(uloop)
#define LT_LP P
#include "ew_loop1.h"
#define LT_LT LT_T
#define LT_LOT ltC_u8
#define LT_LNAME TF(uloop_u8)
#define LT_LP P
#include "ew_loop1.h"

/* Every formula has the loop's signature; most ignore the parameters. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
LT_EW_INLINE LT_T TF(u_neg)(LT_T x, const P *p) { return -x; }
LT_EW_INLINE LT_T TF(u_abs)(LT_T x, const P *p) { return M(fabs)(x); }
LT_EW_INLINE LT_T TF(u_sign)(LT_T x, const P *p) { return (LT_T)((x > 0) - (x < 0)); }
LT_EW_INLINE LT_T TF(u_exp)(LT_T x, const P *p) { return VM(exp)(x); }
LT_EW_INLINE LT_T TF(u_log)(LT_T x, const P *p) { return VM(log)(x); }
LT_EW_INLINE LT_T TF(u_log1p)(LT_T x, const P *p) { return VM(log1p)(x); }
LT_EW_INLINE LT_T TF(u_sqrt)(LT_T x, const P *p) { return M(sqrt)(x); }
LT_EW_INLINE LT_T TF(u_rsqrt)(LT_T x, const P *p) { return 1 / M(sqrt)(x); }
/* sin, cos, tan element by element: vmath's formula where it applies, so that a value never
** depends on its neighbours (libm's float32 sin is 1 ulp off on about 1% of inputs) */
LT_EW_INLINE LT_T TF(u_sin)(LT_T x, const P *p) { return VM(trig_in)(x) ? VM(sin)(x) : M(sin)(x); }
LT_EW_INLINE LT_T TF(u_cos)(LT_T x, const P *p) { return VM(trig_in)(x) ? VM(cos)(x) : M(cos)(x); }
LT_EW_INLINE LT_T TF(u_tan)(LT_T x, const P *p) { return VM(trig_in)(x) ? VM(tan)(x) : M(tan)(x); }
LT_EW_INLINE LT_T TF(u_vsin)(LT_T x, const P *p) { return VM(sin)(x); }
LT_EW_INLINE LT_T TF(u_vcos)(LT_T x, const P *p) { return VM(cos)(x); }
LT_EW_INLINE LT_T TF(u_vtan)(LT_T x, const P *p) { return VM(tan)(x); }
LT_EW_INLINE LT_T TF(u_asin)(LT_T x, const P *p) { return VM(asin)(x); }
LT_EW_INLINE LT_T TF(u_acos)(LT_T x, const P *p) { return VM(acos)(x); }
LT_EW_INLINE LT_T TF(u_atan)(LT_T x, const P *p) { return VM(atan)(x); }
/* min(max(x + 3, 0), 6) / 6 and x times it, as PyTorch (NaN stays NaN) */
LT_EW_INLINE LT_T TF(u_relu6p3)(LT_T x) {
  LT_T t = x + 3;
  t = t < 0 ? 0 : t;
  return t > 6 ? 6 : t;
}
LT_EW_INLINE LT_T TF(u_hardsigmoid)(LT_T x, const P *p) { return TF(u_relu6p3)(x) / 6; }
LT_EW_INLINE LT_T TF(u_hardswish)(LT_T x, const P *p) { return x * TF(u_relu6p3)(x) / 6; }
LT_EW_INLINE LT_T TF(u_tanh)(LT_T x, const P *p) { return VM(tanh)(x); }
LT_EW_INLINE LT_T TF(u_sigmoid)(LT_T x, const P *p) { return VM(sigmoid)(x); }
LT_EW_INLINE LT_T TF(u_relu)(LT_T x, const P *p) { return (x > 0 || x != x) ? x : 0; }
LT_EW_INLINE LT_T TF(u_gelu)(LT_T x, const P *p) { return VM(gelu)(x); }
LT_EW_INLINE LT_T TF(u_gelu_tanh)(LT_T x, const P *p) { return VM(gelu_tanh)(x); }
LT_EW_INLINE LT_T TF(u_silu)(LT_T x, const P *p) { return VM(silu)(x); }
LT_EW_INLINE ltC_u8 TF(u_lnot)(LT_T x, const P *p) { return x == 0; }
LT_EW_INLINE ltC_u8 TF(u_isnan)(LT_T x, const P *p) { return x != x; }
LT_EW_INLINE ltC_u8 TF(u_isfinite)(LT_T x, const P *p) { return isfinite(x) != 0; }
LT_EW_INLINE LT_T TF(u_reciprocal)(LT_T x, const P *p) { return 1 / x; }
LT_EW_INLINE LT_T TF(u_square)(LT_T x, const P *p) { return x * x; }
LT_EW_INLINE LT_T TF(u_floor)(LT_T x, const P *p) { return M(floor)(x); }
LT_EW_INLINE LT_T TF(u_ceil)(LT_T x, const P *p) { return M(ceil)(x); }
LT_EW_INLINE LT_T TF(u_round)(LT_T x, const P *p) { return M(rint)(x); }
LT_EW_INLINE LT_T TF(u_trunc)(LT_T x, const P *p) { return M(trunc)(x); }
LT_EW_INLINE LT_T TF(u_expm1)(LT_T x, const P *p) { return VM(expm1)(x); }
LT_EW_INLINE LT_T TF(u_log2)(LT_T x, const P *p) { return VM(log2)(x); }
LT_EW_INLINE LT_T TF(u_erf)(LT_T x, const P *p) { return VM(erf)(x); }
LT_EW_INLINE LT_T TF(u_leaky_relu)(LT_T x, const P *p) { return x > 0 ? x : x * p->q0; }
LT_EW_INLINE LT_T TF(u_elu)(LT_T x, const P *p) { return x > 0 ? x : p->q0 * VM(expm1)(x); }
LT_EW_INLINE LT_T TF(u_softplus)(LT_T x, const P *p) { return VM(softplus)(x, p->q0, p->q1); }
/* NaN stays NaN; min > max gives max, as in PyTorch. */
LT_EW_INLINE LT_T TF(u_clamp)(LT_T x, const P *p) {
  LT_T r = x < p->q0 ? p->q0 : x;
  return r > p->q1 ? p->q1 : r;
}
LT_EW_INLINE LT_T TF(u_nan)(LT_T x, const P *p) { return (LT_T)NAN; }
#pragma GCC diagnostic pop

/* sin, cos or tan: vmath's formula on blocks whose inputs all lie in its range, element by
** element on a block that holds one outside (inf, NaN or beyond 2^24: rare), so that the
** formula's loop has no call in it (as binary_float.h's bin_blocked). For float64 both are
** libm and the test folds away. */
#define BLK 256
#define BLOCKED(fast, slow)                     \
  do {                                          \
    if (ok)                                     \
      TF(uloop)(db, so, sa, m, p, TF(fast));    \
    else                                        \
      TF(uloop)(db, so, sa, m, p, TF(slow));    \
  } while (0)
LT_EW_INLINE void TF(un_blocked)(int op, char **d, int64_t so, int64_t sa, int64_t n,
                                 const P *p) {
  for (int64_t i0 = 0; i0 < n; i0 += BLK) {
    int64_t m = n - i0 < BLK ? n - i0 : BLK;
    char *db[2] = {d[0] + i0 * so, d[1] + i0 * sa};
    bool ok = VM(trig_block_ok)(db[1], sa, m);
    switch (op) {   /* a switch: GCC predicted an if chain's later arms cold (bin_pow) */
      case LT_SIN: BLOCKED(u_vsin, u_sin); break;
      case LT_COS: BLOCKED(u_vcos, u_cos); break;
      default: BLOCKED(u_vtan, u_tan); break;
    }
  }
}
#undef BLOCKED
#undef BLK

LT_EW_INLINE void TF(un_body)(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0,
                              double p1) {
  const P prm = {(LT_T)p0, (LT_T)p1}, *p = &prm;
#define L(f) TF(uloop)(d, so, sa, n, p, TF(f)); break
#define LB(f) TF(uloop_u8)(d, so, sa, n, p, TF(f)); break
  switch (op) {
    case LT_NEG: L(u_neg);
    case LT_ABS: L(u_abs);
    case LT_SIGN: L(u_sign);
    case LT_EXP: L(u_exp);
    case LT_LOG: L(u_log);
    case LT_LOG1P: L(u_log1p);
    case LT_SQRT: L(u_sqrt);
    case LT_RSQRT: L(u_rsqrt);
    case LT_SIN:
    case LT_COS:
    case LT_TAN: TF(un_blocked)(op, d, so, sa, n, p); break;
    case LT_TANH: L(u_tanh);
    case LT_SIGMOID: L(u_sigmoid);
    case LT_RELU: L(u_relu);
    case LT_GELU: L(u_gelu);
    case LT_GELU_TANH: L(u_gelu_tanh);
    case LT_SILU: L(u_silu);
    case LT_LNOT: LB(u_lnot);
    case LT_ISNAN: LB(u_isnan);
    case LT_ISFINITE: LB(u_isfinite);
    case LT_RECIPROCAL: L(u_reciprocal);
    case LT_SQUARE: L(u_square);
    case LT_FLOOR: L(u_floor);
    case LT_CEIL: L(u_ceil);
    case LT_ROUND: L(u_round);
    case LT_TRUNC: L(u_trunc);
    case LT_EXPM1: L(u_expm1);
    case LT_LOG2: L(u_log2);
    case LT_ERF: L(u_erf);
    case LT_LEAKY_RELU: L(u_leaky_relu);
    case LT_ELU: L(u_elu);
    case LT_SOFTPLUS: L(u_softplus);
    case LT_ASIN: L(u_asin);
    case LT_ACOS: L(u_acos);
    case LT_ATAN: L(u_atan);
    case LT_HARDSIGMOID: L(u_hardsigmoid);
    case LT_HARDSWISH: L(u_hardswish);
    case LT_UCLAMP:
      if (prm.q0 != prm.q0 || prm.q1 != prm.q1) {
        L(u_nan);
      }
      L(u_clamp);
    default: break;
  }
#undef L
#undef LB
}

#undef TF
#undef M
#undef VM
#undef P
