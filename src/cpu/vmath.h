/*
** cpu/vmath.h -- float32 transcendentals written so that a loop calling them vectorises.
**
** Every function is branch-free (all paths computed, then selected) and built from +, -, *, /,
** comparisons and integer operations on the float's bits, so GCC turns a loop of calls into
** 4, 8 or 16 lanes at whatever ISA level the calling kernel is compiled for (binary.c, unary.c,
** ternary.c and softmax.c instantiate their float32 kernels for SSE4.2, AVX2+FMA and AVX-512).
** Those files are built with -ffp-contract=fast, so the AVX2 and AVX-512 builds fuse a * b + c
** into one FMA (a third faster here, and one rounding fewer) while the SSE4.2 build, which has
** no FMA, rounds both: levels may differ in the last bit, each within the bounds below. A level
** is chosen once per process and the scalar tail of every loop is compiled with its loop, so
** results never depend on the number of threads or on where a row is cut.
**
** Accuracy, measured against float64 libm of the same float32 input (spec/isa_spec.lua sweeps
** millions of inputs at every level; units of the last place of the float32 result):
**   exp 1.1, expm1 1.5, log 1, log1p 2.1, tanh 1.5, sigmoid 2.3, silu 2.4, softplus 2.6,
**   erf 2.4, erf' 2.1, sin, cos and tan 0.501 (|x| <= 2^24; the kernels call libm beyond),
**   atan, atan2, asin, acos and log2 0.501, fmod exact (|a / b| < 2^29; libm beyond),
**   gelu (erf form) 8 (7.2 near x = -9), 4 for x > -0.5 (3.6, from the float evaluation of
**   its one rational; PyTorch 1.13's vectorised GELU is 9.7 there and 550 on [-3, -0.5]); from
**   AVX2 up, |x| < 4 takes gelu.c's tables instead (2.4 over every float32 in (-4, 4), 1.8
**   for x > -0.5, tools/check_gelu.c; 5.4 with the rest to -5), and at AVX-512
**   gelu_avx512.c's (2.3, 1.7),
**   gelu (tanh form) 3 for x > -0.5, 16 for x > -3; below, the float32 rounding of its cubic
**   argument, magnified by the exponential, dominates (PyTorch's 0.5 x (1 + tanh z) loses
**   every digit there instead). Gradients: within 1e-6 relative plus 1e-7 absolute of the
**   float64 formulas (their zero crossings make an ulp bound meaningless).
** NaN in gives NaN out, infinities and signed zeros give libm's results, and subnormal inputs
** and results are kept (never flushed). The float64 kernels call libm (the *_double wrappers).
*/
#ifndef LT_CPU_VMATH_H
#define LT_CPU_VMATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define LT_VM_INLINE static inline __attribute__((always_inline))

LT_VM_INLINE uint32_t vm_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
LT_VM_INLINE float vm_from(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
/* 2^k for k in [-126, 127], built in the exponent field */
LT_VM_INLINE float vm_pow2i(int32_t k) { return vm_from((uint32_t)(k + 127) << 23); }
LT_VM_INLINE float vm_copysign(float mag, float sgn) {
  return vm_from((vm_bits(mag) & 0x7fffffffu) | (vm_bits(sgn) & 0x80000000u));
}

/* Constants of the reductions. LN2_HI has 9 significant bits, so k * LN2_HI is exact for the
** |k| <= 2^15 used here; LN2_HI + LN2_LO is ln 2 to 2^-33. */
#define VM_LOG2E 1.44269504088896341f
#define VM_LN2_HI 0.693359375f
#define VM_LN2_LO -2.12194440e-4f
#define VM_ROUND_MAGIC 12582912.0f   /* 1.5 * 2^23: x + it - it rounds x to an integer */
#define VM_EXP_MIN -104.0f           /* e^x rounds to 0 below (half the smallest subnormal) */
#define VM_EXP_MAX 89.0f             /* and to +inf above */

/* e^x = p * 2^k with p in [0.7, 1.42], for x already clamped to [-2^14, 2^14]: Cody-Waite
** reduction x = k ln2 + r, |r| <= 0.347, and Taylor to degree 7 (truncation 5e-9). */
LT_VM_INLINE float vm_exp_parts(float x, int32_t *k) {
  float kf = x * VM_LOG2E + VM_ROUND_MAGIC;
  *k = (int32_t)(vm_bits(kf) - vm_bits(VM_ROUND_MAGIC));
  kf -= VM_ROUND_MAGIC;
  float r = x - kf * VM_LN2_HI;
  r = r - kf * VM_LN2_LO;
  float p = 1.98412698e-4f;
  p = p * r + 1.38888889e-3f;
  p = p * r + 8.33333333e-3f;
  p = p * r + 4.16666667e-2f;
  p = p * r + 1.66666667e-1f;
  p = p * r + 0.5f;
  p = p * r;
  return 1.0f + (r + r * p);
}

/* p * 2^k for k in [-252, 254] with one rounding: two exact scalings by normal powers of two
** (the second rounds into the subnormals, or overflows to inf, as the exact product would). */
LT_VM_INLINE float vm_scale(float p, int32_t k) {
  int32_t k1 = k >> 1;   /* GCC shifts negative values arithmetically; no division in scalar code */
  return p * vm_pow2i(k1) * vm_pow2i(k - k1);
}

LT_VM_INLINE float vm_exp_float(float x) {
  float c = x < VM_EXP_MIN ? VM_EXP_MIN : x;   /* NaN passes both clamps */
  c = c > VM_EXP_MAX ? VM_EXP_MAX : c;
  int32_t k;
  float p = vm_exp_parts(c, &k);
  return vm_scale(p, k);
}

/* e^x * 2^64 for x <= 0 (x >= -148 keeps it out of the subnormals), so that a product with it
** can be rounded once at the end by a final * 2^-64. */
#define VM_X2P64_MIN -148.0f
LT_VM_INLINE float vm_exp_x2p64(float x) {
  float c = x < VM_X2P64_MIN ? VM_X2P64_MIN : x;
  c = c > 0.0f ? 0.0f : c;
  int32_t k;
  float p = vm_exp_parts(c, &k);
  float r = vm_scale(p, k + 64);
  return x < VM_X2P64_MIN ? 0.0f : r;
}

/* expm1: e^x - 1 = 2^k (e^r - 1) + (2^k - 1), x = k ln2 + r, with k = 0 for |x| < ln2 (so
** that no small result is a sum of two larger roundings) and e^r - 1 = r + r^2 Q(r) (Taylor to
** degree 10 on |r| < ln2, relative truncation 6e-10); the halves are combined so that only one
** sum rounds:   k >= 0: 2^k (q + (1 - 2^-k)),   k < 0: 2^k q + (2^k - 1)
** both exact in their last step's operands for |k| <= 24 and rounding to +-1's neighbourhood
** beyond. 2^k is built as 2 * 2^(k-1) so that k = 128 (x near 88.7) stays representable. */
#define VM_EXPM1_MIN -30.0f   /* e^x - 1 rounds to -1 below */
#define VM_LN2 0.693147181f
LT_VM_INLINE float vm_expm1_float(float x) {
  float c = x < VM_EXPM1_MIN ? VM_EXPM1_MIN : x;
  c = c > VM_EXP_MAX ? VM_EXP_MAX : c;
  float kf = (c * VM_LOG2E + VM_ROUND_MAGIC) - VM_ROUND_MAGIC;
  kf = fabsf(c) < VM_LN2 ? 0.0f : kf;
  int32_t k = (int32_t)(vm_bits(kf + VM_ROUND_MAGIC) - vm_bits(VM_ROUND_MAGIC));
  float r = c - kf * VM_LN2_HI;
  r = r - kf * VM_LN2_LO;
  float p = 2.50521084e-8f;
  p = p * r + 2.75573192e-7f;
  p = p * r + 2.75573192e-6f;
  p = p * r + 2.48015873e-5f;
  p = p * r + 1.98412698e-4f;
  p = p * r + 1.38888889e-3f;
  p = p * r + 8.33333333e-3f;
  p = p * r + 4.16666667e-2f;
  p = p * r + 1.66666667e-1f;
  p = p * r + 0.5f;
  float q = r + (r * r) * p;   /* e^r - 1 */
  float h = vm_pow2i(k - 1), s = h + h;
  int32_t kc = k > 25 ? 25 : k;
  float pos = ((q + (1.0f - vm_pow2i(-kc))) * 2.0f) * h;
  float neg = s * q + (s - 1.0f);
  float y = k >= 0 ? pos : neg;
  return x == 0.0f ? x : y;   /* -0 stays -0; NaN went through as NaN */
}

/* log(1 + f) - f + f^2/2 for f = m - 1, m in [sqrt(1/2), sqrt 2): with s = f / (2 + f),
** log(1 + f) = f - (f^2/2 - s (f^2/2 + R)), R = 2 s^2/3 + 2 s^4/5 + ... (|s| < 0.172, Taylor
** to s^8, truncation 2e-9), so the only sizeable rounding is the final subtraction from f. */
LT_VM_INLINE float vm_log_tail(float f, float *hfsq) {
  float h = 0.5f * (f * f);
  float s = f / (2.0f + f);
  float z = s * s;
  float R = 2.0f / 9;
  R = R * z + 2.0f / 7;
  R = R * z + 2.0f / 5;
  R = R * z + 2.0f / 3;
  R = R * z;
  *hfsq = h;
  return s * (h + R);
}

/* Splits u > 0 (normal) as 2^e * m with m in [sqrt(1/2), sqrt 2). */
#define VM_SQRT_HALF_BITS 0x3f3504f3u
LT_VM_INLINE float vm_split(float u, int32_t *e) {
  uint32_t b = vm_bits(u) - VM_SQRT_HALF_BITS;
  *e = (int32_t)b >> 23;
  return vm_from((b & 0x7fffffu) + VM_SQRT_HALF_BITS);
}

LT_VM_INLINE float vm_log_float(float x) {
  bool sub = x < 0x1p-126f;   /* subnormals (and the cases replaced below) scaled by 2^23 */
  float u = sub ? x * 0x1p23f : x;
  int32_t e;
  float m = vm_split(u, &e);
  float ef = (float)(sub ? e - 23 : e);
  float f = m - 1.0f, hfsq;
  float t = vm_log_tail(f, &hfsq);
  float y = ef * VM_LN2_HI - ((hfsq - (t + ef * VM_LN2_LO)) - f);
  y = x == INFINITY ? x : y;
  y = x == 0.0f ? -INFINITY : y;
  return x < 0.0f || x != x ? NAN : y;
}

/* log1p: u = 1 + x split as above; when e != 0 the rounding of 1 + x is put back as
** c = (x - (u - 1)) / u (or (1 - (u - x)) / u for u >= 2, where u - 1 can round), and when
** e = 0 (x in [-0.29, 0.41]) f is x itself. For finite x > -1. */
LT_VM_INLINE float vm_log1p_finite(float x, float u) {
  int32_t e;
  float m = vm_split(u, &e);
  float c = e > 0 ? 1.0f - (u - x) : x - (u - 1.0f);
  c = e == 0 ? 0.0f : c / u;
  float f = e == 0 ? x : m - 1.0f;
  float ef = (float)e, hfsq;
  float t = vm_log_tail(f, &hfsq);
  return ef * VM_LN2_HI - ((hfsq - (t + (ef * VM_LN2_LO + c))) - f);
}

LT_VM_INLINE float vm_log1p_float(float x) {
  float u = 1.0f + x;
  bool ok = u > 0.0f && u < INFINITY;   /* keeps the split's input normal */
  float y = vm_log1p_finite(ok ? x : 0.0f, ok ? u : 1.0f);
  y = x == INFINITY ? x : y;
  y = x == -1.0f ? -INFINITY : y;
  y = x == 0.0f ? x : y;   /* keeps -0 */
  return x < -1.0f || x != x ? NAN : y;
}

/* tanh: x + x^3 P(x^2) for |x| < 0.55 (P fitted to relative error 1.1e-9), 1 - 2 / (e^2|x| + 1)
** above, where the subtracted part is at most 1/2 so that its rounding costs half an ulp. */
#define VM_TANH_SMALL 0.55f
#define VM_TANH_BIG 10.0f   /* tanh is 1 in float32 from 9.01 */
LT_VM_INLINE float vm_tanh_float(float x) {
  float ax = fabsf(x);
  float s = x * x;
  float p = -6.282472141e-3f;
  p = p * s + 2.107775803e-2f;
  p = p * s + -5.385385801e-2f;
  p = p * s + 1.333260169e-1f;
  p = p * s + -3.333331805e-1f;
  float small = x + x * (s * p);
  float e = vm_exp_float(2.0f * (ax < VM_TANH_BIG ? ax : VM_TANH_BIG));
  float big = vm_copysign(1.0f - 2.0f / (e + 1.0f), x);
  float y = ax < VM_TANH_SMALL || ax != ax ? small : big;
  return x == 0.0f ? x : y;   /* -0 + (-0 * p) would be +0 */
}

/* 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: the exponential never overflows. */
LT_VM_INLINE float vm_sigmoid_float(float x) {
  float e = vm_exp_float(-fabsf(x));
  float y = (x >= 0.0f ? 1.0f : e) / (1.0f + e);   /* one division, the numerator selected */
  return x != x ? x : y;
}

/* x sigmoid(x) = x / (1 + e^-x); below x = -80, where e^-x nears overflow, x e^x with e^x
** carried scaled by 2^64 and rounded once at the end, so that results in the subnormals round
** as the exact product would. One exponential either way, its argument selected. */
#define VM_SILU_TAIL -80.0f
LT_VM_INLINE float vm_silu_float(float x) {
  bool tail = x < VM_SILU_TAIL;
  float c = tail ? x : -x;
  c = c < VM_X2P64_MIN ? VM_X2P64_MIN : c;
  c = c > VM_EXP_MAX ? VM_EXP_MAX : c;   /* NaN passes */
  int32_t k;
  float p = vm_exp_parts(c, &k);
  float e = vm_scale(p, tail ? k + 64 : k);
  e = x < VM_X2P64_MIN ? 0.0f : e;   /* -inf * 0 is NaN, as -inf / (1 + e^inf) */
  return tail ? (x * e) * 0x1p-64f : x / (1.0f + e);
}

/* d/dx x sigmoid(x) = s (1 + x (1 - s)), 1 - s = sigmoid(-x) computed without cancellation. */
LT_VM_INLINE float vm_silu_grad_float(float g, float x) {
  float e = vm_exp_float(-fabsf(x));
  float big = 1.0f / (1.0f + e), small = e * big;   /* sigmoid(|x|), sigmoid(-|x|) */
  bool pos = x >= 0.0f;
  float s = pos ? big : small, s1 = pos ? small : big;
  return g * (s * (1.0f + x * s1));
}

/* softplus(x) = log(1 + e^(beta x)) / beta, x itself once beta x > threshold (PyTorch's rule),
** taken as max(z, 0) + log1p(e^-|z|), z = beta x: the exponential never overflows and log1p's
** argument stays in [0, 1]. */
LT_VM_INLINE float vm_softplus_float(float x, float beta, float threshold) {
  float z = x * beta;
  float e = vm_exp_float(-fabsf(z));
  float l = vm_log1p_finite(e, 1.0f + e);
  float y = ((z > 0.0f ? z : 0.0f) + l) / beta;
  return z > threshold || z != z ? x : y;
}
LT_VM_INLINE float vm_softplus_grad_float(float g, float x, float beta, float threshold) {
  float z = x * beta;
  return z > threshold ? g : g * vm_sigmoid_float(z);
}

/* ---------------------------------------------------------------- sin, cos, tan */

/* x - k pi/2 in float64 (k the nearest integer to x 2/pi; its low two bits, the quadrant, in
** *q) for |x| <= VM_TRIG_MAX. pi/2 is cut in three: the first two parts have 29 significant
** bits, so their products with k (24 bits) are exact, and x - k P1 is exact as well; the third
** carries pi/2 to 2^-112. All three are below pi/2's true digits, so every step subtracts a
** positive product and -0 stays -0. The float64 remainder is then within 2^-80 of the true
** one, far below a float32 ulp of the result even where x nears a multiple of pi/2. */
#define VM_TRIG_MAX 16777216.0f   /* 2^24; beyond, and for inf and NaN, callers use libm */
#define VM_TRIG_MAGIC 0x1.8p52    /* 1.5 * 2^52: k + it - it rounds k to an integer */
LT_VM_INLINE double vm_trig_reduce(float xf, uint32_t *q) {
  double x = xf;
  double k = x * 0x1.45f306dc9c883p-1 + VM_TRIG_MAGIC;   /* 2 / pi */
  uint64_t kb;
  memcpy(&kb, &k, sizeof kb);
  *q = (uint32_t)kb;
  k -= VM_TRIG_MAGIC;
  double r = x - k * 0x1.921fb54p+0;
  r = r - k * 0x1.10b4611p-30;
  return r - k * 0x1.4c4c6628b80dcp-59;
}
/* sin r and cos r for |r| <= pi/4 + 2^-20, Taylor to degree 11 and 12 in float64 (truncation
** below 1e-11 relative), so the float32 result is the float64 value rounded once: within
** 0.501 ulp (every float32 up to 2^24 checked). r (1 + r^2 P) keeps -0. */
LT_VM_INLINE double vm_sin_poly(double r, double r2) {
  double p = -2.505210838544172e-08;
  p = p * r2 + 2.7557319223985893e-06;
  p = p * r2 - 1.984126984126984e-04;
  p = p * r2 + 8.333333333333333e-03;
  p = p * r2 - 1.6666666666666666e-01;
  return r * (1.0 + r2 * p);
}
LT_VM_INLINE double vm_cos_poly(double r2) {
  double p = 2.08767569878681e-09;
  p = p * r2 - 2.755731922398589e-07;
  p = p * r2 + 2.48015873015873e-05;
  p = p * r2 - 1.388888888888889e-03;
  p = p * r2 + 4.1666666666666664e-02;
  p = p * r2 - 0.5;
  return 1.0 + r2 * p;
}
/* v with its sign flipped where bit 1 of q is set */
LT_VM_INLINE double vm_flip_q2(double v, uint32_t q) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  b ^= (uint64_t)(q & 2) << 62;
  memcpy(&v, &b, sizeof v);
  return v;
}
/* Whether vm_sin_float and the others below take x: NaN, inf and |x| > 2^24 go to libm. */
LT_VM_INLINE bool vm_trig_in_float(float x) { return fabsf(x) <= VM_TRIG_MAX; }
/* Whether they take all of x[0], x[s], ... x[(n-1) s] (s in bytes). An int and &: a bool and
** && left the loop scalar. */
LT_VM_INLINE bool vm_trig_block_ok_float(const char *x, int64_t s, int64_t n) {
  int ok = 1;
  if (s == (int64_t)sizeof(float)) {
    const float *v = (const float *)x;
    for (int64_t i = 0; i < n; i++) ok &= vm_trig_in_float(v[i]);
  } else {
    for (int64_t i = 0; i < n; i++) ok &= vm_trig_in_float(*(const float *)(x + i * s));
  }
  return ok;
}
/* sin x: quadrant q gives sin r, cos r, -sin r, -cos r */
LT_VM_INLINE float vm_sin_float(float x) {
  uint32_t q;
  double r = vm_trig_reduce(x, &q), r2 = r * r;
  double s = vm_sin_poly(r, r2), c = vm_cos_poly(r2);
  return (float)vm_flip_q2(q & 1 ? c : s, q);
}
/* cos x: cos r, -sin r, -cos r, sin r */
LT_VM_INLINE float vm_cos_float(float x) {
  uint32_t q;
  double r = vm_trig_reduce(x, &q), r2 = r * r;
  double s = vm_sin_poly(r, r2), c = vm_cos_poly(r2);
  return (float)vm_flip_q2(q & 1 ? s : c, q + 1);
}
/* tan x: sin r / cos r, or -cos r / sin r in the odd quadrants; one division in float64 */
LT_VM_INLINE float vm_tan_float(float x) {
  uint32_t q;
  double r = vm_trig_reduce(x, &q), r2 = r * r;
  double s = vm_sin_poly(r, r2), c = vm_cos_poly(r2);
  return (float)((q & 1 ? -c : s) / (q & 1 ? s : c));
}

/* ---------------------------------------------------------------- atan, atan2, asin, acos */

/* atan(a / b) in [0, pi/2] for a, b >= 0 given in float64 (from float32 values, so a / b
** neither overflows nor underflows; b may be 0, not both). One division leaves |u| <= tan(pi/8):
**   a / b <= tan(pi/8):  atan u, u = a / b
**   a / b <= tan(3pi/8): pi/4 + atan u, u = (a - b) / (a + b)   (a - b, a + b exact here)
**   beyond:              pi/2 + atan u, u = -b / a
** and atan u = u + u^3 P(u^2), P fitted by tools/fit_atan.py (relative error 2.6e-11 in
** float64), so a float32 result is the float64 value rounded once: within 0.501 ulp. NaN in a
** or b gives NaN. */
#define VM_TAN_PI8 0.41421356237309503
#define VM_TAN_3PI8 2.4142135623730949
#define VM_PI_D 3.141592653589793116
LT_VM_INLINE double vm_atan_core(double a, double b) {
  bool mid = a > VM_TAN_PI8 * b, high = a > VM_TAN_3PI8 * b;
  double num = high ? -b : mid ? a - b : a;
  double den = high ? a : mid ? a + b : b;
  double off = high ? VM_PI_D / 2 : mid ? VM_PI_D / 4 : 0.0;
  double u = num / den, v = u * u;
  double p = 0.047670934619903793;
  p = p * v - 0.084881242368976789;
  p = p * v + 0.11046973760134483;
  p = p * v - 0.14282209103523133;
  p = p * v + 0.1999991179435022;
  p = p * v - 0.33333332603050819;
  return off + (u + u * (v * p));
}
LT_VM_INLINE float vm_atan_float(float x) {
  return vm_copysign((float)vm_atan_core(fabs((double)x), 1.0), x);
}
/* atan2 as C's, special values included: both zero gives 0 or pi, both infinite pi/4 or
** 3pi/4, with y's sign; x's sign bit (so -0 too) picks pi - angle. */
LT_VM_INLINE float vm_atan2_float(float y, float x) {
  double ay = fabs((double)y), ax = fabs((double)x);
  bool zeros = (ay == 0.0) & (ax == 0.0), infs = (ay == INFINITY) & (ax == INFINITY);
  double a = zeros ? 0.0 : infs ? 1.0 : ay, b = zeros | infs ? 1.0 : ax;
  double t = vm_atan_core(a, b);
  t = vm_bits(x) >> 31 ? VM_PI_D - t : t;
  return vm_copysign((float)t, y);
}
/* asin x = atan2(x, sqrt(1 - x^2)) and acos x = atan2(sqrt(1 - x^2), x), with 1 - x^2 as
** (1 - x)(1 + x), exact in float64; |x| > 1 gives sqrt of a negative, NaN. */
LT_VM_INLINE float vm_asin_float(float x) {
  double a = fabs((double)x);
  return vm_copysign((float)vm_atan_core(a, sqrt((1.0 - a) * (1.0 + a))), x);
}
LT_VM_INLINE float vm_acos_float(float x) {
  double xd = x, s = sqrt((1.0 - xd) * (1.0 + xd));
  double t = vm_atan_core(s, fabs(xd));
  return (float)(vm_bits(x) >> 31 ? VM_PI_D - t : t);
}

/* ---------------------------------------------------------------- fmod */

/* fmod(a, b), exact as C's, for |a| < 2^29 |b| with b finite. In float64 the quotient's integer
** part q has at most 29 bits, so q |b| (53 bits) and |a| - q |b| are exact. And the division
** never rounds across an integer: for float32 a and b, |a| - k |b| is 0 or a multiple of b's
** last place, so a / b is k or at least 2^-24 away from it, while float64's spacing below 2^29
** is at most 2^-24 (half of it bounds the rounding). The sign is a's. */
#define VM_FMOD_QMAX 536870912.0   /* 2^29 */
LT_VM_INLINE float vm_fmod_float(float a, float b) {
  double x = fabs((double)a), y = fabs((double)b);
  double r = x - trunc(x / y) * y;
  return vm_copysign((float)r, a);
}
/* Whether vm_fmod_float takes every pair a[i sa], b[i sb] (strides in bytes) of n: libm for
** a block with a zero, infinite or NaN divisor, an infinite or NaN dividend, or a quotient of
** 2^29 or more. */
LT_VM_INLINE bool vm_fmod_block_ok_float(const char *a, int64_t sa, const char *b, int64_t sb,
                                         int64_t n) {
  int ok = 1;
  if (sa == (int64_t)sizeof(float) && sb == (int64_t)sizeof(float)) {
    const float *x = (const float *)a, *y = (const float *)b;
    for (int64_t i = 0; i < n; i++) {
      double ay = fabs((double)y[i]);
      ok &= (fabs((double)x[i]) < VM_FMOD_QMAX * ay) & (ay < INFINITY);
    }
  } else if (sa == (int64_t)sizeof(float) && sb == 0) {   /* one divisor */
    const float *x = (const float *)a;
    double ay = fabs((double)*(const float *)b), lim = VM_FMOD_QMAX * ay;
    for (int64_t i = 0; i < n; i++) ok &= fabs((double)x[i]) < lim;
    ok &= ay < INFINITY;
  } else {
    for (int64_t i = 0; i < n; i++) {
      double ay = fabs((double)*(const float *)(b + i * sb));
      ok &= (fabs((double)*(const float *)(a + i * sa)) < VM_FMOD_QMAX * ay) & (ay < INFINITY);
    }
  }
  return ok;
}

/* ---------------------------------------------------------------- log2 */

/* log2 x = k + ln(m) / ln 2 for x = m 2^k, m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23
** first), with ln m = 2 atanh t, t = (m - 1) / (m + 1), |t| <= 0.172, summed to t^13 in float64
** (truncation 1.3e-12 relative): one rounding to float32, within 0.501 ulp; x = 1 gives +0. */
LT_VM_INLINE float vm_log2_float(float x) {
  bool sub = x < 0x1p-126f;
  uint32_t u = vm_bits(sub ? x * 0x1p23f : x);
  int32_t k = (int32_t)((u >> 23) & 0xffu) - 127 - (sub ? 23 : 0);
  float m = vm_from((u & 0x7fffffu) | 0x3f800000u);   /* [1, 2) */
  bool big = m > 1.41421356f;
  m = big ? m * 0.5f : m;
  k += big;
  double md = m, t = (md - 1.0) / (md + 1.0), t2 = t * t;
  double p = 1.0 / 13;
  p = p * t2 + 1.0 / 11;
  p = p * t2 + 1.0 / 9;
  p = p * t2 + 1.0 / 7;
  p = p * t2 + 1.0 / 5;
  p = p * t2 + 1.0 / 3;
  double ln_m = 2.0 * (t + t * (t2 * p));
  float r = (float)((double)k + ln_m * 1.4426950408889634074);
  r = x == INFINITY ? x : r;
  r = x == 0.0f ? -INFINITY : r;
  return x < 0.0f || x != x ? NAN : r;
}

/* ---------------------------------------------------------------- erf and GELU (erf form) */

/* exp(hi + lo) * 2^64 for hi in [-128, 0] and |lo| <= 2^-12 |hi| (lo added to the reduced
** argument). */
LT_VM_INLINE float vm_exp_hilo_x2p64(float hi, float lo) {
  float kf = hi * VM_LOG2E + VM_ROUND_MAGIC;
  int32_t k = (int32_t)(vm_bits(kf) - vm_bits(VM_ROUND_MAGIC));
  kf -= VM_ROUND_MAGIC;
  float r = hi - kf * VM_LN2_HI;
  r = r - kf * VM_LN2_LO;
  r = r + lo;
  float p = 1.98412698e-4f;
  p = p * r + 1.38888889e-3f;
  p = p * r + 8.33333333e-3f;
  p = p * r + 4.16666667e-2f;
  p = p * r + 1.66666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * vm_from((uint32_t)(k + 127 + 64) << 23);
}

/* exp(-f t^2) * 2^64 (f = 1/2 or 1), 0 once f t^2 > 128; t^2 exact as a hi + lo pair (t split
** into 12-bit halves): the rounding of t * t would be magnified by t^2 in the exponential. */
#define VM_SPLIT12_MASK 0xfffff000u   /* keeps a float's top 12 significant bits: squares exactly */
LT_VM_INLINE float vm_exp_neg_sq_x2p64(float t, float f) {
  float th = vm_from(vm_bits(t) & VM_SPLIT12_MASK), tl = t - th;
  float hi = -f * (th * th), lo = -f * (tl * (t + th));
  bool in = hi >= -128.0f;   /* false for NaN and infinities */
  float e = vm_exp_hilo_x2p64(in ? hi : 0.0f, in ? lo : 0.0f);
  return in ? e : 0.0f;
}

/* erf(t) = t P(t^2) for |t| < 0.71 (P fitted to relative error 1.4e-9). */
LT_VM_INLINE float vm_erf_small(float t) {
  float s = t * t;
  float pe = -6.749761209e-04f;
  pe = pe * s + 5.114383763e-03f;
  pe = pe * s + -2.683464594e-02f;
  pe = pe * s + 1.128337710e-01f;
  pe = pe * s + -3.761261881e-01f;
  pe = pe * s + 1.128379166e+00f;
  return t * pe;
}

/* erfc(t) / exp(-t^2) = u H(u), u = 1 / (1 + 0.3125 t), for t >= 0.7 (H fitted to 1.6e-8). */
LT_VM_INLINE float vm_erfc_scaled(float t) {
  float u = 1.0f / (1.0f + 0.3125f * t);
  float h = 3.793032525e-02f;
  h = h * u + -2.786755925e-01f;
  h = h * u + 6.720597949e-01f;
  h = h * u + -6.614680286e-01f;
  h = h * u + 6.104951526e-01f;
  h = h * u + -1.094732482e-01f;
  h = h * u + 2.205755338e-01f;
  h = h * u + 1.546114694e-01f;
  h = h * u + 1.776992532e-01f;
  h = h * u + 1.762453246e-01f;
  return u * h;
}

#define VM_RSQRT_2PI 0.398942280f
#define VM_2_RSQRTPI 1.12837917f
#define VM_ERF_SMALL 0.7f   /* vm_erf_small's range; vm_erfc_scaled's fit starts here */
#define VM_ERF_ONE 4.0f     /* erf is +-1 in float32 from |x| = 3.92 */

/* erf(x): x P(x^2) below 0.7, 1 - erfc(|x|) with its sign above. There erfc's absolute error
** is what counts, so e^(-x^2) takes the rounded square (it costs erf at most 0.2 ulp) and, its
** argument being in [-16, 0], one scaling by 2^k. */
LT_VM_INLINE float vm_erf_float(float x) {
  float ax = fabsf(x);
  float axc = ax < VM_ERF_ONE ? ax : VM_ERF_ONE;   /* NaN becomes 4 here, and NaN at the end */
  int32_t k;
  float p = vm_exp_parts(-(axc * axc), &k);
  float big = 1.0f - vm_erfc_scaled(axc) * (p * vm_pow2i(k));
  float y = ax < VM_ERF_SMALL ? vm_erf_small(x) : vm_copysign(big, x);
  return x != x ? x : y;
}

/* d/dx erf(x) = 2/sqrt(pi) e^(-x^2), the square exact as above. */
LT_VM_INLINE float vm_erf_grad_float(float g, float x) {
  float e = vm_exp_neg_sq_x2p64(x, 1.0f);
  float ge = (g * VM_2_RSQRTPI) * e;
  return x != x ? x : ge * 0x1p-64f;
}

/* GELU x Phi(x), Phi(x) = erfc(-x / sqrt2) / 2, from one fit over the whole line (no pieces to
** select between, so the vector loop computes one path):
**   erfc(|x| / sqrt2) / 2 = e^(-x^2/2) P(|x|) / Q(|x|),
** P/Q a (4,5) rational in |x| itself (P/Q -> 1/(|x| sqrt(2 pi)) as |x| grows), fitted for
** |x| <= 14.8 (x Phi(x) underflows to -0 below -14.2) to relative error 6e-9, with all
** coefficients positive; its float evaluation adds up to 3 ulp. Taking |x| rather than
** |x| / sqrt2 matters: erfc magnifies a rounded argument t by 2t^2 (190 ulp near x = -13), while
** P/Q barely notices it. e^(-x^2/2) has the square exact (x split into 12-bit halves,
** x^2 = hi + lo) and is carried scaled by 2^64, so the tail down to x = -16 stays normal until
** the last product, which rounds once into the subnormals as libm would. */
#define VM_GELU_XMAX 16.0f   /* beyond, x Phi(x) is x or x * 0 */
#define VM_GELU_P0 4.815412521e+01f
#define VM_GELU_P1 4.227883530e+01f
#define VM_GELU_P2 1.769708633e+01f
#define VM_GELU_P3 3.930202246e+00f
#define VM_GELU_P4 3.989466727e-01f
#define VM_GELU_Q0 9.630825043e+01f   /* Q is monic: Q5 = 1 */
#define VM_GELU_Q1 1.614005737e+02f
#define VM_GELU_Q2 1.160186005e+02f
#define VM_GELU_Q3 4.534598923e+01f
#define VM_GELU_Q4 9.852154732e+00f
/* e^(-R/2) - 1 = R (E1 + E2 R + ... + E6 R^5) for |R| <= 0.72 (minimax, 4e-9 relative) */
#define VM_GELU_E1 -0.5f
#define VM_GELU_E2 1.249999795e-01f
#define VM_GELU_E3 -2.083312106e-02f
#define VM_GELU_E4 2.604291748e-03f
#define VM_GELU_E5 -2.616092322e-04f
#define VM_GELU_E6 2.157632347e-05f
#define VM_2P64_EXP_BITS (127u + 64u)   /* exponent field of 2^64 */

/* Phi(-|x|) * 2^64, and e^(-x^2/2) * 2^64 in *e64; both 0 for |x| >= 16 and NaN. */
LT_VM_INLINE float vm_gelu_tail64(float x, float *e64) {
  float ax = fabsf(x);
  bool in = ax < VM_GELU_XMAX;
  float a = in ? ax : VM_GELU_XMAX;
  float p = VM_GELU_P4;
  p = p * a + VM_GELU_P3;
  p = p * a + VM_GELU_P2;
  p = p * a + VM_GELU_P1;
  p = p * a + VM_GELU_P0;
  float q = a + VM_GELU_Q4;
  q = q * a + VM_GELU_Q3;
  q = q * a + VM_GELU_Q2;
  q = q * a + VM_GELU_Q1;
  q = q * a + VM_GELU_Q0;
  /* x^2 / 2 = k ln2 + R/2, |R/2| <= ln2/2 */
  float th = vm_from(vm_bits(a) & VM_SPLIT12_MASK), tl = a - th;
  float hi = th * th, lo = tl * (a + th);
  float kf = (hi + lo) * (0.5f * VM_LOG2E) + VM_ROUND_MAGIC;
  uint32_t kb = vm_bits(kf);
  kf -= VM_ROUND_MAGIC;
  float R = (hi - kf * (2.0f * VM_LN2_HI)) + (lo - kf * (2.0f * VM_LN2_LO));
  float em = VM_GELU_E6;
  em = em * R + VM_GELU_E5;
  em = em * R + VM_GELU_E4;
  em = em * R + VM_GELU_E3;
  em = em * R + VM_GELU_E2;
  em = em * R + VM_GELU_E1;
  em = em * R;
  /* 2^(64 - k), k <= 185 */
  float sc = vm_from((vm_bits(VM_ROUND_MAGIC) + VM_2P64_EXP_BITS - kb) << 23);
  sc = in ? sc : 0.0f;
  float e = sc + sc * em;
  *e64 = e;
  return (p / q) * e;
}

/* x Phi(-|x|) rounds once after the 2^-64; above zero x (1 - Phi(-x)). NaN and -inf give NaN,
** +inf gives +inf, -0 gives -0, as 0.5 * x * erfc(-x / sqrt2) does. */
LT_VM_INLINE float vm_gelu_float(float x) {
  float e;
  float t = vm_gelu_tail64(x, &e);
  float yn = (x * t) * 0x1p-64f, yp = x * (1.0f - t * 0x1p-64f);
  return x < 0.0f ? yn : yp;
}

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
LT_VM_INLINE float vm_gelu_grad_float(float g, float x) {
  float e;
  float t = vm_gelu_tail64(x, &e) * 0x1p-64f;
  float cdf = x < 0.0f ? t : 1.0f - t;
  return g * (cdf + x * VM_RSQRT_2PI * (e * 0x1p-64f));
}
/* Both of the above from one tail: the value, and d/dx in *d (the bits of
** vm_gelu_grad_float(1, x)). */
LT_VM_INLINE float vm_gelu_pair_float(float x, float *d) {
  float e;
  float t = vm_gelu_tail64(x, &e);
  float yn = (x * t) * 0x1p-64f, yp = x * (1.0f - t * 0x1p-64f), ts = t * 0x1p-64f;
  float cdf = x < 0.0f ? ts : 1.0f - ts;
  *d = cdf + x * VM_RSQRT_2PI * (e * 0x1p-64f);
  return x < 0.0f ? yn : yp;
}
/* ---------------------------------------------------------------- GELU (tanh form) */

/* 0.5 x (1 + tanh z), z = k (x + c x^3), is x sigmoid(2z): no cancellation for x < 0, where
** 1 + tanh z loses every digit. The gradient 0.5 (1 + t) + 0.5 x (1 - t^2) z' becomes
** s + 2 x s (1 - s) z' with s = sigmoid(2z) and 1 - s = sigmoid(-2z) computed apart. */
#define VM_GELU_TANH_K 0.797884561f   /* sqrt(2 / pi) */
#define VM_GELU_TANH_C 0.044715f
LT_VM_INLINE float vm_gelu_tanh_z2(float x) {
  return 2.0f * (VM_GELU_TANH_K * (x + VM_GELU_TANH_C * (x * x * x)));
}
LT_VM_INLINE float vm_gelu_tanh_float(float x) {
  float z2 = vm_gelu_tanh_z2(x);
  return x * vm_sigmoid_float(z2);   /* -inf * 0 is NaN, as 0.5 x (1 + tanh z) gives */
}
#define VM_GELU_TANH_XMAX 1e4f   /* sigmoid(2z) is 0 or 1 in float32 long before */
LT_VM_INLINE float vm_gelu_tanh_grad_float(float g, float xin) {
  float x = xin < -VM_GELU_TANH_XMAX ? -VM_GELU_TANH_XMAX : xin;
  x = x > VM_GELU_TANH_XMAX ? VM_GELU_TANH_XMAX : x;   /* NaN passes */
  float z2 = vm_gelu_tanh_z2(x);
  float e = vm_exp_float(-fabsf(z2));
  float big = 1.0f / (1.0f + e), small = e * big;
  bool pos = z2 >= 0.0f;
  float s = pos ? big : small, s1 = pos ? small : big;
  float dz = VM_GELU_TANH_K * (1.0f + 3.0f * VM_GELU_TANH_C * (x * x));
  float r = g * (s + 2.0f * x * (s * s1) * dz);
  return fabsf(xin) == INFINITY ? NAN : r;   /* as the tanh formula: 0.5 x (1 - t^2) z' = inf 0 */
}

/* ---------------------------------------------------------------- float64: libm */

LT_VM_INLINE double vm_exp_double(double x) { return exp(x); }
LT_VM_INLINE double vm_expm1_double(double x) { return expm1(x); }
LT_VM_INLINE double vm_log_double(double x) { return log(x); }
LT_VM_INLINE double vm_log1p_double(double x) { return log1p(x); }
LT_VM_INLINE double vm_tanh_double(double x) { return tanh(x); }
LT_VM_INLINE double vm_erf_double(double x) { return erf(x); }
LT_VM_INLINE bool vm_trig_block_ok_double(const char *x, int64_t s, int64_t n) {
  (void)x, (void)s, (void)n;
  return true;
}
LT_VM_INLINE bool vm_trig_in_double(double x) { (void)x; return true; }
LT_VM_INLINE double vm_sin_double(double x) { return sin(x); }
LT_VM_INLINE double vm_cos_double(double x) { return cos(x); }
LT_VM_INLINE double vm_tan_double(double x) { return tan(x); }
LT_VM_INLINE double vm_atan_double(double x) { return atan(x); }
LT_VM_INLINE double vm_atan2_double(double y, double x) { return atan2(y, x); }
LT_VM_INLINE double vm_asin_double(double x) { return asin(x); }
LT_VM_INLINE double vm_acos_double(double x) { return acos(x); }
LT_VM_INLINE double vm_fmod_double(double a, double b) { return fmod(a, b); }
LT_VM_INLINE double vm_log2_double(double x) { return log2(x); }
LT_VM_INLINE bool vm_fmod_block_ok_double(const char *a, int64_t sa, const char *b, int64_t sb,
                                          int64_t n) {
  (void)a, (void)sa, (void)b, (void)sb, (void)n;
  return false;   /* float64 has no vector form: libm */
}
LT_VM_INLINE double vm_sigmoid_double(double x) { return 1.0 / (1.0 + exp(-x)); }
LT_VM_INLINE double vm_silu_double(double x) { return x / (1.0 + exp(-x)); }
LT_VM_INLINE double vm_silu_grad_double(double g, double x) {
  double s = 1.0 / (1.0 + exp(-x));
  return g * s * (1.0 + x * (1.0 - s));
}
LT_VM_INLINE double vm_softplus_double(double x, double beta, double threshold) {
  return x * beta > threshold ? x : log1p(exp(x * beta)) / beta;
}
LT_VM_INLINE double vm_softplus_grad_double(double g, double x, double beta, double threshold) {
  return x * beta > threshold ? g : g * (1.0 - 1.0 / (1.0 + exp(x * beta)));
}
LT_VM_INLINE double vm_erf_grad_double(double g, double x) {
  return g * 1.12837916709551257390 * exp(-x * x);
}
/* float64 keeps libm: erfc has no cancellation on the negative side. */
LT_VM_INLINE double vm_gelu_double(double x) { return 0.5 * x * erfc(-x * 0.70710678118654752440); }
LT_VM_INLINE double vm_gelu_grad_double(double g, double x) {
  return g * (0.5 * erfc(-x * 0.70710678118654752440) +
              x * 0.39894228040143267794 * exp(-0.5 * x * x));
}
/* the tanh form as x sigmoid(2z), as for float32 (1 + tanh z cancels for x < 0) */
#define VM_GELU_TANH_K_D 0.79788456080286535588
LT_VM_INLINE double vm_gelu_pair_double(double x, double *d) {
  *d = vm_gelu_grad_double(1.0, x);
  return vm_gelu_double(x);
}
LT_VM_INLINE double vm_gelu_tanh_double(double x) {
  double z2 = 2.0 * (VM_GELU_TANH_K_D * (x + 0.044715 * (x * x * x)));
  return x / (1.0 + exp(-z2));
}
LT_VM_INLINE double vm_gelu_tanh_grad_double(double g, double x) {
  double z2 = 2.0 * (VM_GELU_TANH_K_D * (x + 0.044715 * (x * x * x)));
  double e = exp(-fabs(z2)), big = 1.0 / (1.0 + e), small = e / (1.0 + e);
  double s = z2 >= 0 ? big : small, s1 = z2 >= 0 ? small : big;
  double dz = VM_GELU_TANH_K_D * (1.0 + 3.0 * 0.044715 * (x * x));
  double r = g * (s + 2.0 * x * (s * s1) * dz);
  return isinf(x) ? NAN : r;
}

#endif
