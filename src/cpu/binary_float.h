/*
** cpu/binary_float.h -- template: the binary element formulas of one float type and the
** kernel body that runs them. Included by binary.c with LT_T (float or double) and LT_S (libm's
** suffix: f or nothing); the body is always inlined into one kernel per ISA level.
*/
#define TF(n) LT_EW_PASTE(n##_, LT_T)   /* name_float / name_double */
#define M(f) LT_EW_PASTE(f, LT_S)        /* libm: fmodf / fmod */
#define VM(f) TF(vm_##f)                 /* vmath.h */
#define P TF(ewp)

#define LT_LT LT_T
#define LT_LOT LT_T
#define LT_LNAME TF(bloop)
#define LT_LP P
#include "ew_loop2.h"
#define LT_LT LT_T
#define LT_LOT ltC_u8
#define LT_LNAME TF(bloop_u8)
#define LT_LP P
#include "ew_loop2.h"

/* Every formula has the loop's signature; most ignore the parameters. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* Python-style remainder from a fmod: the result has the sign of the divisor. */
LT_EW_INLINE LT_T TF(rem_of)(LT_T r, LT_T y) { return r != 0 && ((r < 0) != (y < 0)) ? r + y : r; }
LT_EW_INLINE LT_T TF(rem)(LT_T x, LT_T y) { return TF(rem_of)(M(fmod)(x, y), y); }

/* Python's float floor division, which PyTorch's rounding_mode="floor" follows: x - fmod(x, y)
** is an exact multiple of y, so dividing it by y and stepping down when fmod's sign differs
** from y's avoids the rounding of floor(x / y) (1 // 0.1 is 9, floor(1 / 0.1) is 10); the
** quotient is then snapped to the integer it approximates. A zero divisor gives IEEE x / y and
** a zero quotient keeps the sign of x / y. */
static inline LT_T TF(floordiv)(LT_T x, LT_T y) {
  if (y == 0) return x / y;
  LT_T m = M(fmod)(x, y);
  LT_T q = (x - m) / y;
  if (m != 0 && ((m < 0) != (y < 0))) q -= 1;
  if (q == 0) return M(copysign)(0, x / y);
  LT_T f = M(floor)(q);
  return q - f > (LT_T)0.5 ? f + 1 : f;
}

LT_EW_INLINE LT_T TF(b_add)(LT_T x, LT_T y, const P *p) { return x + y; }
LT_EW_INLINE LT_T TF(b_sub)(LT_T x, LT_T y, const P *p) { return x - y; }
LT_EW_INLINE LT_T TF(b_mul)(LT_T x, LT_T y, const P *p) { return x * y; }
LT_EW_INLINE LT_T TF(b_div)(LT_T x, LT_T y, const P *p) { return x / y; }
LT_EW_INLINE LT_T TF(b_pow)(LT_T x, LT_T y, const P *p) { return M(pow)(x, y); }
LT_EW_INLINE LT_T TF(b_sq)(LT_T x, LT_T y, const P *p) { return x * x; }
LT_EW_INLINE LT_T TF(b_cube)(LT_T x, LT_T y, const P *p) { return x * x * x; }
LT_EW_INLINE LT_T TF(b_first)(LT_T x, LT_T y, const P *p) { return x; }
LT_EW_INLINE LT_T TF(b_sqrt)(LT_T x, LT_T y, const P *p) { return M(sqrt)(x); }
LT_EW_INLINE LT_T TF(b_recip)(LT_T x, LT_T y, const P *p) { return 1 / x; }
LT_EW_INLINE LT_T TF(b_rsqrt)(LT_T x, LT_T y, const P *p) { return 1 / M(sqrt)(x); }
LT_EW_INLINE LT_T TF(b_rsq)(LT_T x, LT_T y, const P *p) { return 1 / (x * x); }
LT_EW_INLINE LT_T TF(b_max)(LT_T x, LT_T y, const P *p) { return (x > y || x != x) ? x : y; }
LT_EW_INLINE LT_T TF(b_min)(LT_T x, LT_T y, const P *p) { return (x < y || x != x) ? x : y; }
LT_EW_INLINE ltC_u8 TF(b_eq)(LT_T x, LT_T y, const P *p) { return x == y; }
LT_EW_INLINE ltC_u8 TF(b_ne)(LT_T x, LT_T y, const P *p) { return x != y; }
LT_EW_INLINE ltC_u8 TF(b_lt)(LT_T x, LT_T y, const P *p) { return x < y; }
LT_EW_INLINE ltC_u8 TF(b_le)(LT_T x, LT_T y, const P *p) { return x <= y; }
LT_EW_INLINE ltC_u8 TF(b_gt)(LT_T x, LT_T y, const P *p) { return x > y; }
LT_EW_INLINE ltC_u8 TF(b_ge)(LT_T x, LT_T y, const P *p) { return x >= y; }
LT_EW_INLINE LT_T TF(b_atan2)(LT_T x, LT_T y, const P *p) { return VM(atan2)(x, y); }
LT_EW_INLINE LT_T TF(b_fmod)(LT_T x, LT_T y, const P *p) { return M(fmod)(x, y); }
LT_EW_INLINE LT_T TF(b_rem)(LT_T x, LT_T y, const P *p) { return TF(rem)(x, y); }
LT_EW_INLINE LT_T TF(b_vfmod)(LT_T x, LT_T y, const P *p) { return VM(fmod)(x, y); }
LT_EW_INLINE LT_T TF(b_vrem)(LT_T x, LT_T y, const P *p) { return TF(rem_of)(VM(fmod)(x, y), y); }
LT_EW_INLINE LT_T TF(b_divtrunc)(LT_T x, LT_T y, const P *p) { return M(trunc)(x / y); }
LT_EW_INLINE LT_T TF(b_divfloor)(LT_T x, LT_T y, const P *p) { return TF(floordiv)(x, y); }
/* |x - y| <= atol + |rtol * y|, q0 = rtol, q1 = atol */
LT_EW_INLINE ltC_u8 TF(b_isclose)(LT_T x, LT_T y, const P *p) {
  return x == y || (isfinite(x - y) && M(fabs)(x - y) <= p->q1 + M(fabs)(p->q0 * y));
}
LT_EW_INLINE ltC_u8 TF(b_isclose_nan)(LT_T x, LT_T y, const P *p) {
  return (x != x && y != y) || TF(b_isclose)(x, y, p);
}

/* gradient formulas: x = incoming gradient, y = saved input (or output) */
LT_EW_INLINE LT_T TF(g_clamp)(LT_T x, LT_T y, const P *p) {
  return (y >= p->q0 && y <= p->q1) ? x : 0;
}
LT_EW_INLINE LT_T TF(g_abs)(LT_T x, LT_T y, const P *p) { return y > 0 ? x : (y < 0 ? -x : 0); }
LT_EW_INLINE LT_T TF(g_log)(LT_T x, LT_T y, const P *p) { return x / y; }
LT_EW_INLINE LT_T TF(g_log1p)(LT_T x, LT_T y, const P *p) { return x / (y + 1); }
LT_EW_INLINE LT_T TF(g_sqrt)(LT_T x, LT_T y, const P *p) { return x / (y + y); }
LT_EW_INLINE LT_T TF(g_rsqrt)(LT_T x, LT_T y, const P *p) { return -(LT_T)0.5 * x * y * y * y; }
/* element by element, as unary_float.h's u_sin (see bin_blocked) */
LT_EW_INLINE LT_T TF(g_sin)(LT_T x, LT_T y, const P *p) {
  return x * (VM(trig_in)(y) ? VM(cos)(y) : M(cos)(y));
}
LT_EW_INLINE LT_T TF(g_cos)(LT_T x, LT_T y, const P *p) {
  return -x * (VM(trig_in)(y) ? VM(sin)(y) : M(sin)(y));
}
LT_EW_INLINE LT_T TF(g_vsin)(LT_T x, LT_T y, const P *p) { return x * VM(cos)(y); }
LT_EW_INLINE LT_T TF(g_vcos)(LT_T x, LT_T y, const P *p) { return -x * VM(sin)(y); }
LT_EW_INLINE LT_T TF(g_tanh)(LT_T x, LT_T y, const P *p) { return x * (1 - y * y); }
LT_EW_INLINE LT_T TF(g_sigmoid)(LT_T x, LT_T y, const P *p) { return x * y * (1 - y); }
LT_EW_INLINE LT_T TF(g_relu)(LT_T x, LT_T y, const P *p) { return y > 0 ? x : 0; }
LT_EW_INLINE LT_T TF(g_gelu)(LT_T x, LT_T y, const P *p) { return VM(gelu_grad)(x, y); }
LT_EW_INLINE LT_T TF(g_gelu_tanh)(LT_T x, LT_T y, const P *p) { return VM(gelu_tanh_grad)(x, y); }
LT_EW_INLINE LT_T TF(g_silu)(LT_T x, LT_T y, const P *p) { return VM(silu_grad)(x, y); }
LT_EW_INLINE LT_T TF(g_reciprocal)(LT_T x, LT_T y, const P *p) { return -x * y * y; }
LT_EW_INLINE LT_T TF(g_square)(LT_T x, LT_T y, const P *p) { return (x + x) * y; }
LT_EW_INLINE LT_T TF(g_expm1)(LT_T x, LT_T y, const P *p) { return x * (y + 1); }
LT_EW_INLINE LT_T TF(g_log2)(LT_T x, LT_T y, const P *p) {
  return x / (y * (LT_T)0.69314718055994530942);
}
LT_EW_INLINE LT_T TF(g_erf)(LT_T x, LT_T y, const P *p) { return VM(erf_grad)(x, y); }
LT_EW_INLINE LT_T TF(g_leaky_relu)(LT_T x, LT_T y, const P *p) { return y > 0 ? x : x * p->q0; }
LT_EW_INLINE LT_T TF(g_elu)(LT_T x, LT_T y, const P *p) {
  return y > 0 ? x : x * p->q0 * VM(exp)(y);
}
LT_EW_INLINE LT_T TF(g_softplus)(LT_T x, LT_T y, const P *p) {
  return VM(softplus_grad)(x, y, p->q0, p->q1);
}
LT_EW_INLINE LT_T TF(g_tan)(LT_T x, LT_T y, const P *p) { return x * (1 + y * y); }
LT_EW_INLINE LT_T TF(g_asin)(LT_T x, LT_T y, const P *p) { return x / M(sqrt)(1 - y * y); }
LT_EW_INLINE LT_T TF(g_acos)(LT_T x, LT_T y, const P *p) { return -x / M(sqrt)(1 - y * y); }
LT_EW_INLINE LT_T TF(g_atan)(LT_T x, LT_T y, const P *p) { return x / (1 + y * y); }
/* PyTorch 1.13's (its vector path, where its scalar one differs): a sixth (rounded to float)
** strictly inside (-3, 3), else 0; hardswish's 0 below -3, x/3 + 1/2 on [-3, 3), 1 above, NaN
** at NaN */
LT_EW_INLINE LT_T TF(g_hardsigmoid)(LT_T x, LT_T y, const P *p) {
  return y > -3 && y < 3 ? x * (LT_T)(1.0f / 6.0f) : 0;
}
LT_EW_INLINE LT_T TF(g_hardswish)(LT_T x, LT_T y, const P *p) {
  return y < -3 ? 0 : y < 3 ? x * (y / 3 + (LT_T)0.5) : y == y ? x : y;
}

#pragma GCC diagnostic pop

/* pow, with the exponents that have a cheaper form when the exponent is one scalar: the forms
** PyTorch uses (so -0 ^ -0.5 is -inf, as 1 / sqrt(-0), where libm's pow gives +inf). A switch,
** not a chain of ifs: GCC predicted the chain's later arms cold and left their loops scalar
** (x^3 of 1M floats took 870 us, x^2 112). */
LT_EW_INLINE void TF(bin_pow)(char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,
                              const P *p) {
  LT_T e = sb == 0 ? *(const LT_T *)d[2] : 0;
  switch (sb == 0 ? ltC_pow_form(e) : LT_POW_ANY) {
    case LT_POW_1: TF(bloop)(d, so, sa, sb, n, p, TF(b_first)); break;
    case LT_POW_2: TF(bloop)(d, so, sa, sb, n, p, TF(b_sq)); break;
    case LT_POW_3: TF(bloop)(d, so, sa, sb, n, p, TF(b_cube)); break;
    case LT_POW_HALF: TF(bloop)(d, so, sa, sb, n, p, TF(b_sqrt)); break;
    case LT_POW_M1: TF(bloop)(d, so, sa, sb, n, p, TF(b_recip)); break;
    case LT_POW_MHALF: TF(bloop)(d, so, sa, sb, n, p, TF(b_rsqrt)); break;
    case LT_POW_M2: TF(bloop)(d, so, sa, sb, n, p, TF(b_rsq)); break;
    default: TF(bloop)(d, so, sa, sb, n, p, TF(b_pow)); break;
  }
}

/* fmod, remainder and the gradients of sin and cos: vmath's vector form on blocks whose
** operands all lie in its range, a loop with libm calls on a block that holds one outside
** (rare: for fmod a zero or non-finite divisor or a quotient of 2^29 or more, libm's exact
** fmod then; for sin and cos an input beyond 2^24, inf or NaN, the vector form still taken
** where it applies), so that the loops of the vector forms have no call in them. */
#define BLK 256
#define BLOCKED(fast, slow)                        \
  do {                                             \
    if (ok)                                        \
      TF(bloop)(db, so, sa, sb, m, p, TF(fast));   \
    else                                           \
      TF(bloop)(db, so, sa, sb, m, p, TF(slow));   \
  } while (0)
LT_EW_INLINE void TF(bin_blocked)(int op, char **d, int64_t so, int64_t sa, int64_t sb,
                                  int64_t n, const P *p) {
  for (int64_t i0 = 0; i0 < n; i0 += BLK) {
    int64_t m = n - i0 < BLK ? n - i0 : BLK;
    char *db[3] = {d[0] + i0 * so, d[1] + i0 * sa, d[2] + i0 * sb};
    bool ok = op == LT_FMOD || op == LT_REMAINDER ? VM(fmod_block_ok)(db[1], sa, db[2], sb, m)
                                                  : VM(trig_block_ok)(db[2], sb, m);
    switch (op) {
      case LT_FMOD: BLOCKED(b_vfmod, b_fmod); break;
      case LT_REMAINDER: BLOCKED(b_vrem, b_rem); break;
      case LT_EW_BW + LT_SIN: BLOCKED(g_vsin, g_sin); break;
      default: BLOCKED(g_vcos, g_cos); break;
    }
  }
}
#undef BLOCKED
#undef BLK

LT_EW_INLINE void TF(bin_body)(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,
                               double p0, double p1) {
  const P prm = {(LT_T)p0, (LT_T)p1}, *p = &prm;
#define L(f) TF(bloop)(d, so, sa, sb, n, p, TF(f)); break
#define LB(f) TF(bloop_u8)(d, so, sa, sb, n, p, TF(f)); break
  switch (op) {
    case LT_ADD: L(b_add);
    case LT_SUB: L(b_sub);
    case LT_MUL: L(b_mul);
    case LT_DIV: L(b_div);
    case LT_POW: TF(bin_pow)(d, so, sa, sb, n, p); break;
    case LT_MAXIMUM: L(b_max);
    case LT_MINIMUM: L(b_min);
    case LT_EQ: LB(b_eq);
    case LT_NE: LB(b_ne);
    case LT_LT: LB(b_lt);
    case LT_LE: LB(b_le);
    case LT_GT: LB(b_gt);
    case LT_GE: LB(b_ge);
    case LT_ATAN2: L(b_atan2);
    case LT_FMOD:
    case LT_REMAINDER: TF(bin_blocked)(op, d, so, sa, sb, n, p); break;
    case LT_DIV_TRUNC: L(b_divtrunc);
    case LT_DIV_FLOOR:
    case LT_FLOOR_DIVIDE: L(b_divfloor);
    case LT_EW_ISCLOSE: LB(b_isclose);
    case LT_EW_ISCLOSE_NAN: LB(b_isclose_nan);
    case LT_EW_BW_CLAMP: L(g_clamp);
    case LT_EW_BW + LT_ABS: L(g_abs);
    case LT_EW_BW + LT_EXP: L(b_mul);   /* g * exp(x), the saved output */
    case LT_EW_BW + LT_LOG: L(g_log);
    case LT_EW_BW + LT_LOG1P: L(g_log1p);
    case LT_EW_BW + LT_SQRT: L(g_sqrt);
    case LT_EW_BW + LT_RSQRT: L(g_rsqrt);
    case LT_EW_BW + LT_SIN:
    case LT_EW_BW + LT_COS: TF(bin_blocked)(op, d, so, sa, sb, n, p); break;
    case LT_EW_BW + LT_TANH: L(g_tanh);
    case LT_EW_BW + LT_SIGMOID: L(g_sigmoid);
    case LT_EW_BW + LT_RELU: L(g_relu);
    case LT_EW_BW + LT_GELU: L(g_gelu);
    case LT_EW_BW + LT_GELU_TANH: L(g_gelu_tanh);
    case LT_EW_BW + LT_SILU: L(g_silu);
    case LT_EW_BW + LT_RECIPROCAL: L(g_reciprocal);
    case LT_EW_BW + LT_SQUARE: L(g_square);
    case LT_EW_BW + LT_EXPM1: L(g_expm1);
    case LT_EW_BW + LT_LOG2: L(g_log2);
    case LT_EW_BW + LT_ERF: L(g_erf);
    case LT_EW_BW + LT_LEAKY_RELU: L(g_leaky_relu);
    case LT_EW_BW + LT_ELU: L(g_elu);
    case LT_EW_BW + LT_SOFTPLUS: L(g_softplus);
    case LT_EW_BW + LT_TAN: L(g_tan);
    case LT_EW_BW + LT_ASIN: L(g_asin);
    case LT_EW_BW + LT_ACOS: L(g_acos);
    case LT_EW_BW + LT_ATAN: L(g_atan);
    case LT_EW_BW + LT_HARDSIGMOID: L(g_hardsigmoid);
    case LT_EW_BW + LT_HARDSWISH: L(g_hardswish);
    default: break;
  }
#undef L
#undef LB
}

#undef TF
#undef M
#undef VM
#undef P
