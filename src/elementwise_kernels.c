/*
** elementwise_kernels.c -- cpu kernels of the elementwise family: binary, unary, ternary
** (fused gradient formulas) and where.
**
** Every kernel is a row function for lt_iter: one pass over the innermost (collapsed) dim with
** byte strides. Typed kernels exist per compute dtype; each op is one loop with four stride
** patterns (all contiguous, scalar right, scalar left, strided) so the compiler vectorises the
** common cases. Operands whose dtype differs from the compute dtype go through small on-stack
** blocks (convert, compute, convert back), so mixed dtypes cost no allocation.
**
** The float32 kernels are compiled three times, for SSE4.2 (the build's baseline), AVX2+FMA and
** AVX-512 (cpu_isa.c picks one at run time). The build is ISO C, so GCC never fuses a multiply
** and an add on its own: every level computes the same roundings and gives the same bits.
*/
#include <math.h>
#include <string.h>

#include "core.h"
#include "cpu_isa.h"

typedef uint8_t u8;

/* glibc's libmvec (linked through -lm) has SIMD versions of the float math functions; telling
** the compiler lets it vectorise exp/tanh/sigmoid/... loops (glibc declares them itself only
** under -ffast-math). Accuracy stays within a few ulp. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(_OPENMP) && !defined(__FAST_MATH__) && \
    defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 35)
#define LT_SIMD_DECL(f) _Pragma("omp declare simd notinbranch") extern __typeof__(f) f;
LT_SIMD_DECL(expf) LT_SIMD_DECL(exp) LT_SIMD_DECL(logf) LT_SIMD_DECL(log)
LT_SIMD_DECL(log1pf) LT_SIMD_DECL(log1p) LT_SIMD_DECL(expm1f) LT_SIMD_DECL(expm1)
LT_SIMD_DECL(log2f) LT_SIMD_DECL(log2) LT_SIMD_DECL(sinf) LT_SIMD_DECL(sin)
LT_SIMD_DECL(cosf) LT_SIMD_DECL(cos) LT_SIMD_DECL(tanf) LT_SIMD_DECL(tan)
LT_SIMD_DECL(tanhf) LT_SIMD_DECL(tanh) LT_SIMD_DECL(asinf) LT_SIMD_DECL(asin)
LT_SIMD_DECL(acosf) LT_SIMD_DECL(acos) LT_SIMD_DECL(atanf) LT_SIMD_DECL(atan)
LT_SIMD_DECL(erff) LT_SIMD_DECL(erf) LT_SIMD_DECL(erfcf) LT_SIMD_DECL(erfc)
#endif
#endif

/* ================================================================ conversion */

static inline int64_t f2i(double x) {
  if (x != x) return 0;
  if (x >= 9.2233720368547758e18) return INT64_MAX;
  if (x <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)x;
}

#define CV(TS, TD, EXPR)                                             \
  for (int64_t i = 0; i < n; i++) {                                  \
    TS v = *(const TS *)(src + i * ss);                              \
    *(TD *)(dst + i * ds) = (EXPR);                                  \
  }                                                                  \
  break

/* dst[i*ds] = (dd) src[i*ss] for n elements, strides in bytes. */
static void convert(const char *src, int64_t ss, lt_dtype sd, char *dst, int64_t ds,
                    lt_dtype dd, int64_t n) {
  switch (sd * LT_NDTYPE + dd) {
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT32: CV(float, float, v);
    case LT_FLOAT32 * LT_NDTYPE + LT_FLOAT64: CV(float, double, (double)v);
    case LT_FLOAT32 * LT_NDTYPE + LT_INT64: CV(float, int64_t, f2i(v));
    case LT_FLOAT32 * LT_NDTYPE + LT_BOOL: CV(float, u8, v != 0);
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT32: CV(double, float, (float)v);
    case LT_FLOAT64 * LT_NDTYPE + LT_FLOAT64: CV(double, double, v);
    case LT_FLOAT64 * LT_NDTYPE + LT_INT64: CV(double, int64_t, f2i(v));
    case LT_FLOAT64 * LT_NDTYPE + LT_BOOL: CV(double, u8, v != 0);
    case LT_INT64 * LT_NDTYPE + LT_FLOAT32: CV(int64_t, float, (float)v);
    case LT_INT64 * LT_NDTYPE + LT_FLOAT64: CV(int64_t, double, (double)v);
    case LT_INT64 * LT_NDTYPE + LT_INT64: CV(int64_t, int64_t, v);
    case LT_INT64 * LT_NDTYPE + LT_BOOL: CV(int64_t, u8, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_FLOAT32: CV(u8, float, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_FLOAT64: CV(u8, double, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_INT64: CV(u8, int64_t, v != 0);
    case LT_BOOL * LT_NDTYPE + LT_BOOL: CV(u8, u8, v != 0);
    default: break;
  }
}

/* ================================================================ binary loops */

#define SZ(T) ((int64_t)sizeof(T))

/* o = EXPR(x, y) over a row; x from operand 1, y from operand 2. */
#define BLOOP(T, OT, EXPR)                                                          \
  do {                                                                              \
    OT *o_ = (OT *)d[0];                                                            \
    const T *a_ = (const T *)d[1], *b_ = (const T *)d[2];                           \
    if (so == SZ(OT) && sa == SZ(T) && sb == SZ(T)) {                               \
      _Pragma("GCC ivdep")                                                          \
      for (int64_t i = 0; i < n; i++) {                                             \
        T x = a_[i], y = b_[i];                                                     \
        (void)x, (void)y;                                                           \
        o_[i] = (EXPR);                                                             \
      }                                                                             \
    } else if (so == SZ(OT) && sa == SZ(T) && sb == 0) {                            \
      const T y = *b_;                                                              \
      (void)y;                                                                      \
      _Pragma("GCC ivdep")                                                          \
      for (int64_t i = 0; i < n; i++) {                                             \
        T x = a_[i];                                                                \
        o_[i] = (EXPR);                                                             \
      }                                                                             \
    } else if (so == SZ(OT) && sa == 0 && sb == SZ(T)) {                            \
      const T x = *a_;                                                              \
      _Pragma("GCC ivdep")                                                          \
      for (int64_t i = 0; i < n; i++) {                                             \
        T y = b_[i];                                                                \
        (void)y;                                                                    \
        o_[i] = (EXPR);                                                             \
      }                                                                             \
    } else {                                                                        \
      for (int64_t i = 0; i < n; i++) {                                             \
        T x = *(const T *)(d[1] + i * sa), y = *(const T *)(d[2] + i * sb);         \
        (void)x, (void)y;                                                           \
        *(OT *)(d[0] + i * so) = (EXPR);                                            \
      }                                                                             \
    }                                                                               \
  } while (0)

typedef void (*bin_kernel)(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,
                           double p0, double p1);

/* Float kernels, T = float/double, S = function suffix (f or nothing). */
#define FLOAT_BINARY(NAME, T, S)                                                        \
  static void NAME(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n,     \
                   double p0, double p1) {                                              \
    const T q0 = (T)p0, q1 = (T)p1;                                                     \
    const T one = 1, zero = 0, half = (T)0.5;                                           \
    switch (op) {                                                                       \
      case LT_ADD: BLOOP(T, T, x + y); break;                                           \
      case LT_SUB: BLOOP(T, T, x - y); break;                                           \
      case LT_MUL: BLOOP(T, T, x * y); break;                                           \
      case LT_DIV: BLOOP(T, T, x / y); break;                                           \
      case LT_POW:                                                                      \
        if (sb == 0) {                                                                  \
          T e = *(const T *)d[2];                                                       \
          if (e == 2) { BLOOP(T, T, x * x); break; }                                    \
          if (e == 1) { BLOOP(T, T, x); break; }                                        \
          if (e == half) { BLOOP(T, T, sqrt##S(x)); break; }                            \
          if (e == -1) { BLOOP(T, T, one / x); break; }                                 \
          if (e == 3) { BLOOP(T, T, x * x * x); break; }                                \
        }                                                                               \
        BLOOP(T, T, pow##S(x, y));                                                      \
        break;                                                                          \
      case LT_MAXIMUM: BLOOP(T, T, (x > y || x != x) ? x : y); break;                   \
      case LT_MINIMUM: BLOOP(T, T, (x < y || x != x) ? x : y); break;                   \
      case LT_EQ: BLOOP(T, u8, x == y); break;                                          \
      case LT_NE: BLOOP(T, u8, x != y); break;                                          \
      case LT_LT: BLOOP(T, u8, x < y); break;                                           \
      case LT_LE: BLOOP(T, u8, x <= y); break;                                          \
      case LT_GT: BLOOP(T, u8, x > y); break;                                           \
      case LT_GE: BLOOP(T, u8, x >= y); break;                                          \
      case LT_ATAN2: BLOOP(T, T, atan2##S(x, y)); break;                                \
      case LT_FMOD: BLOOP(T, T, fmod##S(x, y)); break;                                  \
      case LT_REMAINDER:                                                                \
        BLOOP(T, T, rem_##T(x, y));                                                     \
        break;                                                                          \
      case LT_DIV_TRUNC: BLOOP(T, T, trunc##S(x / y)); break;                           \
      case LT_DIV_FLOOR:                                                                \
      case LT_FLOOR_DIVIDE: BLOOP(T, T, floordiv_##T(x, y)); break;                     \
      case LT_EW_ISCLOSE:                                                               \
      case LT_EW_ISCLOSE_NAN: {                                                         \
        bool en = op == LT_EW_ISCLOSE_NAN;                                              \
        BLOOP(T, u8, x == y || (en && x != x && y != y) ||                              \
                         (isfinite(x - y) && fabs##S(x - y) <= q1 + fabs##S(q0 * y)));  \
        break;                                                                          \
      }                                                                                 \
      /* gradient formulas: x = incoming gradient, y = saved input (or output) */       \
      case LT_EW_BW_CLAMP: BLOOP(T, T, (y >= q0 && y <= q1) ? x : zero); break;         \
      case LT_EW_BW + LT_ABS: BLOOP(T, T, y > 0 ? x : (y < 0 ? -x : zero)); break;      \
      case LT_EW_BW + LT_EXP: BLOOP(T, T, x * y); break;                                \
      case LT_EW_BW + LT_LOG: BLOOP(T, T, x / y); break;                                \
      case LT_EW_BW + LT_LOG1P: BLOOP(T, T, x / (y + one)); break;                      \
      case LT_EW_BW + LT_SQRT: BLOOP(T, T, x / (y + y)); break;                         \
      case LT_EW_BW + LT_RSQRT: BLOOP(T, T, -half * x * y * y * y); break;              \
      case LT_EW_BW + LT_SIN: BLOOP(T, T, x * cos##S(y)); break;                        \
      case LT_EW_BW + LT_COS: BLOOP(T, T, -x * sin##S(y)); break;                       \
      case LT_EW_BW + LT_TANH: BLOOP(T, T, x * (one - y * y)); break;                   \
      case LT_EW_BW + LT_SIGMOID: BLOOP(T, T, x * y * (one - y)); break;                \
      case LT_EW_BW + LT_RELU: BLOOP(T, T, y > 0 ? x : zero); break;                    \
      case LT_EW_BW + LT_GELU: BLOOP(T, T, gelu_grad_##T(x, y)); break;                 \
      case LT_EW_BW + LT_GELU_TANH: {                                                   \
        const T k = (T)0.79788456080286535588, c = (T)0.044715;                         \
        BLOOP(T, T, gelu_tanh_grad_##T(x, y, k, c));                                    \
        break;                                                                          \
      }                                                                                 \
      case LT_EW_BW + LT_SILU:                                                          \
        BLOOP(T, T, x * (one / (one + exp##S(-y))) * (one + y * (one - one / (one + exp##S(-y))))); \
        break;                                                                          \
      case LT_EW_BW + LT_RECIPROCAL: BLOOP(T, T, -x * y * y); break;                    \
      case LT_EW_BW + LT_SQUARE: BLOOP(T, T, (x + x) * y); break;                       \
      case LT_EW_BW + LT_EXPM1: BLOOP(T, T, x * (y + one)); break;                      \
      case LT_EW_BW + LT_LOG2: {                                                        \
        const T ln2 = (T)0.69314718055994530942;                                        \
        BLOOP(T, T, x / (y * ln2));                                                     \
        break;                                                                          \
      }                                                                                 \
      case LT_EW_BW + LT_ERF: {                                                         \
        const T k = (T)1.12837916709551257390;                                          \
        BLOOP(T, T, x * k * exp##S(-y * y));                                            \
        break;                                                                          \
      }                                                                                 \
      case LT_EW_BW + LT_LEAKY_RELU: BLOOP(T, T, y > 0 ? x : x * q0); break;            \
      case LT_EW_BW + LT_ELU: BLOOP(T, T, y > 0 ? x : x * q0 * exp##S(y)); break;       \
      case LT_EW_BW + LT_SOFTPLUS:                                                      \
        BLOOP(T, T, y * q0 > q1 ? x : x * (one - one / (one + exp##S(y * q0))));       \
        break;                                                                          \
      case LT_EW_BW + LT_TAN: BLOOP(T, T, x * (one + y * y)); break;                    \
      case LT_EW_BW + LT_ASIN: BLOOP(T, T, x / sqrt##S(one - y * y)); break;            \
      case LT_EW_BW + LT_ACOS: BLOOP(T, T, -x / sqrt##S(one - y * y)); break;           \
      case LT_EW_BW + LT_ATAN: BLOOP(T, T, x / (one + y * y)); break;                   \
      default: break;                                                                   \
    }                                                                                   \
  }

/* Python-style remainder: the result has the sign of the divisor. */
static inline float rem_float(float x, float y) {
  float r = fmodf(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}
static inline double rem_double(double x, double y) {
  double r = fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return r;
}

/* Python's float floor division, which PyTorch's rounding_mode="floor" follows: x - fmod(x, y)
** is an exact multiple of y, so dividing it by y and stepping down when fmod's sign differs
** from y's avoids the rounding of floor(x / y) (1 // 0.1 is 9, floor(1 / 0.1) is 10); the
** quotient is then snapped to the integer it approximates. A zero divisor gives IEEE x / y and
** a zero quotient keeps the sign of x / y. */
#define FLOORDIV(T, S)                                                    \
  static inline T floordiv_##T(T x, T y) {                                \
    if (y == 0) return x / y;                                             \
    T m = fmod##S(x, y);                                                  \
    T q = (x - m) / y;                                                    \
    if (m != 0 && ((m < 0) != (y < 0))) q -= 1;                           \
    if (q == 0) return copysign##S(0, x / y);                             \
    T f = floor##S(q);                                                    \
    return q - f > (T)0.5 ? f + 1 : f;                                    \
  }
FLOORDIV(float, f)
FLOORDIV(double, )

static inline float gelu_tanh_grad_float(float g, float x, float k, float c) {
  float inner = k * (x + c * x * x * x);
  float t = tanhf(inner);
  float dinner = k * (1.0f + 3.0f * c * x * x);
  return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner);
}
static inline double gelu_tanh_grad_double(double g, double x, double k, double c) {
  double inner = k * (x + c * x * x * x);
  double t = tanh(inner);
  double dinner = k * (1.0 + 3.0 * c * x * x);
  return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner);
}

/* ---------------------------------------------------------------- GELU, exact (erf) form */

/* float64 keeps libm: erfc has no cancellation on the negative side. */
static inline double gelu_double(double x) { return 0.5 * x * erfc(-x * 0.70710678118654752440); }
static inline double gelu_grad_double(double g, double x) {
  return g * (0.5 * erfc(-x * 0.70710678118654752440) +
              x * 0.39894228040143267794 * exp(-0.5 * x * x));
}

/* float32 in plain arithmetic that vectorises (a libm call per element kept GELU scalar, 15% of
** a GPT step), and more accurate than erfcf(-x * r2), which rounds x / sqrt(2) first: erfc
** magnifies that rounding by 2t^2, to 190 ulp near x = -13. Here x^2 / 2 is exact (split of x
** into 12-bit halves) and enters exp as a hi + lo pair. Within 7 ulp of the exact GELU of the
** float input (spec/isa_spec.lua sweeps them densely), 3 ulp for x > -0.5.
**   |x| < 1:  x * (1 + erf(x / sqrt 2)) / 2, erf(t) = t * P(t^2)
**   else:     erfc(t) = exp(-t^2) * u * H(u), u = 1 / (1 + 0.3125 t), t = |x| / sqrt 2
** (P and H fitted to relative error 1.4e-9 and 1.6e-8). erfc is carried scaled by 2^64 so that
** the tail down to x = -16 stays normal until the last product, which rounds once into the
** subnormals as libm would; beyond |x| = 16 the result is x * 0 or x. NaN and -inf give NaN,
** +inf gives +inf, -0 gives -0, as 0.5 * x * erfcf(...) does. */
static inline __attribute__((always_inline)) uint32_t f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline __attribute__((always_inline)) float f32_from(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* exp(hi + lo) * 2^64 for hi in [-128, 0] and |lo| <= 2^-12 |hi|: Cody-Waite reduction by a
** ln 2 whose high part has 9 bits (so k * LN2_HI is exact), lo added to the reduced argument,
** Taylor degree 7 on |r| <= 0.35, the power of two built in the exponent bits. */
static inline __attribute__((always_inline)) float exp_hilo_x2p64(float hi, float lo) {
  const float magic = 12582912.0f;   /* 1.5 * 2^23: adding it rounds to an integer */
  float kf = hi * 1.44269504f + magic;
  int32_t k = (int32_t)(f32_bits(kf) - f32_bits(magic));
  kf -= magic;
  float r = hi - kf * 0.693359375f;
  r = r - kf * -2.12194440e-4f;
  r = r + lo;
  float p = 1.98412698e-4f;
  p = p * r + 1.38888889e-3f;
  p = p * r + 8.33333333e-3f;
  p = p * r + 4.16666667e-2f;
  p = p * r + 1.66666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * f32_from((uint32_t)(k + 127 + 64) << 23);
}

/* *cdf = Phi(x), *pdf_scaled = exp(-x^2/2) * 2^64 and the return value x * Phi(x). */
static inline __attribute__((always_inline)) float gelu_parts_float(float x, float *cdf,
                                                                    float *e_scaled) {
  float ax = fabsf(x);
  bool finite_part = ax < 16.0f;   /* false for NaN too */
  float xs = finite_part ? x : 0.0f;
  float xh = f32_from(f32_bits(xs) & 0xfffff000u), xl = xs - xh;
  float e = exp_hilo_x2p64(-0.5f * (xh * xh), -0.5f * (xl * (xs + xh)));
  float t = fabsf(xs) * 0.707106781f;
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
  float q_all = (u * h) * e;
  float q = finite_part ? q_all : 0.0f;   /* erfc(t) * 2^64 */
  float s = t * t;
  float pe = -6.749761209e-04f;
  pe = pe * s + 5.114383763e-03f;
  pe = pe * s + -2.683464594e-02f;
  pe = pe * s + 1.128337710e-01f;
  pe = pe * s + -3.761261881e-01f;
  pe = pe * s + 1.128379166e+00f;
  float et = t * pe;   /* erf(t), for t < 0.71 */
  /* every value is computed and then selected: a conditional multiply could trap in ISO C's
  ** floating-point model, so GCC would keep the branch and not vectorise the loop */
  float net = -et;
  float c_small = 0.5f + 0.5f * (x < 0 ? net : et);
  float qd = q * 0x1p-64f;
  float c_neg = 0.5f * qd, c_pos = 1.0f - c_neg;
  float c_big = x < 0 ? c_neg : c_pos;
  *cdf = ax < 1.0f ? c_small : c_big;
  *e_scaled = finite_part ? e : 0.0f;
  float y_small = x * c_small, y_neg = (0.5f * x * q) * 0x1p-64f, y_pos = x * c_pos;
  float y_big = x < 0 ? y_neg : y_pos;
  return ax < 1.0f ? y_small : y_big;
}

static inline __attribute__((always_inline)) float gelu_float(float x) {
  float c, e;
  return gelu_parts_float(x, &c, &e);
}

/* d/dx x Phi(x) = Phi(x) + x phi(x) */
static inline __attribute__((always_inline)) float gelu_grad_float(float g, float x) {
  float c, e;
  (void)gelu_parts_float(x, &c, &e);
  return g * (c + x * 0.398942280f * (e * 0x1p-64f));
}

FLOAT_BINARY(bin_f32, float, f)
FLOAT_BINARY(bin_f64, double, )
#ifdef LT_ISA_DISPATCH
#pragma GCC push_options
#pragma GCC target("avx2,fma")
FLOAT_BINARY(bin_f32_avx2, float, f)
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,prefer-vector-width=512")
FLOAT_BINARY(bin_f32_avx512, float, f)
#pragma GCC pop_options
#endif

/* Integer arithmetic wraps (two's complement) like PyTorch instead of being undefined. */
#define WADD(x, y) ((int64_t)((uint64_t)(x) + (uint64_t)(y)))
#define WSUB(x, y) ((int64_t)((uint64_t)(x) - (uint64_t)(y)))
#define WMUL(x, y) ((int64_t)((uint64_t)(x) * (uint64_t)(y)))

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
  if (y == -1) return WSUB(0, x);   /* INT64_MIN / -1 wraps instead of trapping */
  return x / y;
}
/* Floor division: C's truncating quotient, one lower when the signs differ and it is inexact. */
static inline int64_t ifloordiv(int64_t x, int64_t y) {
  int64_t q = idiv(x, y);
  if (y != 0 && y != -1 && x % y != 0 && ((x < 0) != (y < 0))) q--;
  return q;
}

static void bin_i64(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n, double p0,
                    double p1) {
  (void)p0;
  (void)p1;
  switch (op) {
    case LT_ADD: BLOOP(int64_t, int64_t, WADD(x, y)); break;
    case LT_SUB: BLOOP(int64_t, int64_t, WSUB(x, y)); break;
    case LT_MUL: BLOOP(int64_t, int64_t, WMUL(x, y)); break;
    case LT_DIV: BLOOP(int64_t, int64_t, idiv(x, y)); break;
    case LT_POW: BLOOP(int64_t, int64_t, ipow(x, y)); break;
    case LT_MAXIMUM: BLOOP(int64_t, int64_t, x > y ? x : y); break;
    case LT_MINIMUM: BLOOP(int64_t, int64_t, x < y ? x : y); break;
    case LT_EQ: BLOOP(int64_t, u8, x == y); break;
    case LT_NE: BLOOP(int64_t, u8, x != y); break;
    case LT_LT: BLOOP(int64_t, u8, x < y); break;
    case LT_LE: BLOOP(int64_t, u8, x <= y); break;
    case LT_GT: BLOOP(int64_t, u8, x > y); break;
    case LT_GE: BLOOP(int64_t, u8, x >= y); break;
    case LT_FMOD: BLOOP(int64_t, int64_t, ifmod(x, y)); break;
    case LT_REMAINDER: BLOOP(int64_t, int64_t, irem(x, y)); break;
    case LT_DIV_TRUNC: BLOOP(int64_t, int64_t, idiv(x, y)); break;
    case LT_DIV_FLOOR:
    case LT_FLOOR_DIVIDE: BLOOP(int64_t, int64_t, ifloordiv(x, y)); break;
    case LT_EW_ISCLOSE:
    case LT_EW_ISCLOSE_NAN: BLOOP(int64_t, u8, x == y); break;
    default: break;
  }
}

static void bin_b8(int op, char **d, int64_t so, int64_t sa, int64_t sb, int64_t n, double p0,
                   double p1) {
  (void)p0;
  (void)p1;
  switch (op) {
    case LT_ADD:
    case LT_MAXIMUM:
    case LT_LOR: BLOOP(u8, u8, (x != 0) | (y != 0)); break;
    case LT_MUL:
    case LT_MINIMUM:
    case LT_LAND: BLOOP(u8, u8, (x != 0) & (y != 0)); break;
    case LT_LXOR:
    case LT_NE: BLOOP(u8, u8, (x != 0) ^ (y != 0)); break;
    case LT_EQ:
    case LT_EW_ISCLOSE:
    case LT_EW_ISCLOSE_NAN: BLOOP(u8, u8, (x != 0) == (y != 0)); break;
    case LT_LT: BLOOP(u8, u8, (x == 0) & (y != 0)); break;
    case LT_LE: BLOOP(u8, u8, (x == 0) | (y != 0)); break;
    case LT_GT: BLOOP(u8, u8, (x != 0) & (y == 0)); break;
    case LT_GE: BLOOP(u8, u8, (x != 0) | (y == 0)); break;
    default: break;
  }
}

static bin_kernel bin_f32_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (lt_cpu_isa()) {
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

/* ================================================================ binary driver */

typedef struct {
  int op;
  lt_dtype dto, dta, dtb, dtc, dtr;   /* out, a, b, compute, what the kernel writes */
  double p0, p1;
  bin_kernel k;
  bool direct;                        /* no conversion needed */
} bin_job;

#define BLK 256

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
  if (st != 0) convert(src, st, dt, (char *)block, ec, dtc, m);
  *p = (char *)block;
  *s = st != 0 ? ec : 0;
}

/* Runs one row whose operands need converting, through stack blocks. Kept out of line: its
** 6 KB of blocks would otherwise enlarge (and probe) the frame of every small op. */
static __attribute__((noinline)) void bin_row_convert(char **d, const int64_t *st, int64_t n,
                                                      const bin_job *j) {
  double ba[BLK], bb[BLK], bo[BLK];
  int64_t ec = (int64_t)lt_dtype_size(j->dtc);
  int64_t er = (int64_t)lt_dtype_size(j->dtr);
  bool ca = j->dta == j->dtc, cb = j->dtb == j->dtc, co = j->dto == j->dtr;
  if (!ca && st[1] == 0) convert(d[1], 0, j->dta, (char *)ba, 0, j->dtc, 1);
  if (!cb && st[2] == 0) convert(d[2], 0, j->dtb, (char *)bb, 0, j->dtc, 1);
  for (int64_t i0 = 0; i0 < n; i0 += BLK) {
    int64_t m = n - i0 < BLK ? n - i0 : BLK;
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
    if (!co) convert((char *)bo, er, j->dtr, d[0] + i0 * st[0], st[0], j->dto, m);
  }
}

/* Runs one row. */
static void bin_row(char **d, const int64_t *st, int64_t n, void *ud) {
  const bin_job *j = ud;
  if (j->direct)
    j->k(j->op, d, st[0], st[1], st[2], n, j->p0, j->p1);
  else
    bin_row_convert(d, st, n, j);
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
  return lt_shape_numel(t->ndim, t->size) == 1 ? 0 : -1;
}

void lt_cpu_binary_p(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a,
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
  int64_t n = lt_shape_numel(out->ndim, out->size);
  if (n == 0) return;
  /* small and simple: one row without building an iterator */
  if (n < LT_PAR_MIN && lt_is_contiguous(out)) {
    int ra = row_stride(a, out), rb = row_stride(b, out);
    if (ra >= 0 && rb >= 0) {
      char *d[3] = {lt_ptr(out), lt_ptr(a), lt_ptr(b)};
      int64_t st[3] = {(int64_t)lt_esize(out->dtype), ra * (int64_t)lt_esize(a->dtype),
                       rb * (int64_t)lt_esize(b->dtype)};
      bin_row(d, st, n, &j);
      return;
    }
  }
  lt_tensor *ops[3] = {out, (lt_tensor *)a, (lt_tensor *)b};
  lt_iter it;
  lt_iter_init(&it, 3, ops, out->ndim, out->size);
  lt_iter_run(ctx, &it, bin_row, &j);
}

void lt_cpu_binary_flat(int op, lt_dtype dt, int64_t n, void *out, const void *a, int sa,
                        const void *b, int sb) {
  char *d[3] = {out, (char *)a, (char *)b};
  int64_t es = (int64_t)lt_esize(dt);
  bin_kernel_for(dt)(op, d, es, sa * es, sb * es, n, 0, 0);
}

void lt_cpu_binary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                   lt_dtype compute) {
  lt_cpu_binary_p(ctx, op, out, a, b, compute, 0, 0);
}

/* ================================================================ unary */

#define ULOOP(T, OT, EXPR)                                                 \
  do {                                                                     \
    if (so == SZ(OT) && sa == SZ(T)) {                                     \
      OT *o_ = (OT *)d[0];                                                 \
      const T *a_ = (const T *)d[1];                                       \
      _Pragma("GCC ivdep")                                                 \
      for (int64_t i = 0; i < n; i++) {                                    \
        T x = a_[i];                                                       \
        o_[i] = (EXPR);                                                    \
      }                                                                    \
    } else {                                                               \
      for (int64_t i = 0; i < n; i++) {                                    \
        T x = *(const T *)(d[1] + i * sa);                                 \
        *(OT *)(d[0] + i * so) = (EXPR);                                   \
      }                                                                    \
    }                                                                      \
  } while (0)

typedef void (*un_kernel)(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0,
                          double p1);

#define FLOAT_UNARY(NAME, T, S)                                                         \
  static void NAME(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0,      \
                   double p1) {                                                         \
    const T q0 = (T)p0, q1 = (T)p1;                                                     \
    const T one = 1, zero = 0, half = (T)0.5;                                           \
    switch (op) {                                                                       \
      case LT_NEG: ULOOP(T, T, -x); break;                                              \
      case LT_ABS: ULOOP(T, T, fabs##S(x)); break;                                      \
      case LT_SIGN: ULOOP(T, T, (T)((x > 0) - (x < 0))); break;                         \
      case LT_EXP: ULOOP(T, T, exp##S(x)); break;                                       \
      case LT_LOG: ULOOP(T, T, log##S(x)); break;                                       \
      case LT_LOG1P: ULOOP(T, T, log1p##S(x)); break;                                   \
      case LT_SQRT: ULOOP(T, T, sqrt##S(x)); break;                                     \
      case LT_RSQRT: ULOOP(T, T, one / sqrt##S(x)); break;                              \
      case LT_SIN: ULOOP(T, T, sin##S(x)); break;                                       \
      case LT_COS: ULOOP(T, T, cos##S(x)); break;                                       \
      case LT_TANH: ULOOP(T, T, tanh##S(x)); break;                                     \
      case LT_SIGMOID: ULOOP(T, T, one / (one + exp##S(-x))); break;                    \
      case LT_RELU: ULOOP(T, T, (x > 0 || x != x) ? x : zero); break;                   \
      case LT_GELU: ULOOP(T, T, gelu_##T(x)); break;                                    \
      case LT_GELU_TANH: {                                                              \
        const T k = (T)0.79788456080286535588, c = (T)0.044715;                         \
        ULOOP(T, T, half * x * (one + tanh##S(k * (x + c * x * x * x))));               \
        break;                                                                          \
      }                                                                                 \
      case LT_SILU: ULOOP(T, T, x / (one + exp##S(-x))); break;                         \
      case LT_LNOT: ULOOP(T, u8, x == 0); break;                                        \
      case LT_ISNAN: ULOOP(T, u8, x != x); break;                                       \
      case LT_ISFINITE: ULOOP(T, u8, isfinite(x) != 0); break;                          \
      case LT_RECIPROCAL: ULOOP(T, T, one / x); break;                                  \
      case LT_SQUARE: ULOOP(T, T, x * x); break;                                        \
      case LT_FLOOR: ULOOP(T, T, floor##S(x)); break;                                   \
      case LT_CEIL: ULOOP(T, T, ceil##S(x)); break;                                     \
      case LT_ROUND: ULOOP(T, T, rint##S(x)); break;                                    \
      case LT_TRUNC: ULOOP(T, T, trunc##S(x)); break;                                   \
      case LT_EXPM1: ULOOP(T, T, expm1##S(x)); break;                                   \
      case LT_LOG2: ULOOP(T, T, log2##S(x)); break;                                     \
      case LT_ERF: ULOOP(T, T, erf##S(x)); break;                                       \
      case LT_LEAKY_RELU: ULOOP(T, T, x > 0 ? x : x * q0); break;                       \
      case LT_ELU: ULOOP(T, T, x > 0 ? x : q0 * expm1##S(x)); break;                    \
      case LT_SOFTPLUS: ULOOP(T, T, x * q0 > q1 ? x : log1p##S(exp##S(x * q0)) / q0); break; \
      case LT_TAN: ULOOP(T, T, tan##S(x)); break;                                       \
      case LT_ASIN: ULOOP(T, T, asin##S(x)); break;                                     \
      case LT_ACOS: ULOOP(T, T, acos##S(x)); break;                                     \
      case LT_ATAN: ULOOP(T, T, atan##S(x)); break;                                     \
      case LT_UCLAMP:                                                                   \
        if (q0 != q0 || q1 != q1) {                                                     \
          const T nan_ = (T)NAN;                                                        \
          ULOOP(T, T, ((void)x, nan_));                                                       \
          break;                                                                        \
        }                                                                               \
        ULOOP(T, T, clamp_##T(x, q0, q1));                                              \
        break;                                                                          \
      default: break;                                                                   \
    }                                                                                   \
  }

/* NaN stays NaN; min > max gives max, as in PyTorch. */
static inline float clamp_float(float x, float lo, float hi) {
  float r = x < lo ? lo : x;
  return r > hi ? hi : r;
}
static inline double clamp_double(double x, double lo, double hi) {
  double r = x < lo ? lo : x;
  return r > hi ? hi : r;
}

FLOAT_UNARY(un_f32, float, f)
FLOAT_UNARY(un_f64, double, )
#ifdef LT_ISA_DISPATCH
#pragma GCC push_options
#pragma GCC target("avx2,fma")
FLOAT_UNARY(un_f32_avx2, float, f)
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,prefer-vector-width=512")
FLOAT_UNARY(un_f32_avx512, float, f)
#pragma GCC pop_options
#endif

static void un_i64(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0, double p1) {
  switch (op) {
    case LT_NEG: ULOOP(int64_t, int64_t, WSUB(0, x)); break;
    case LT_ABS: ULOOP(int64_t, int64_t, x < 0 ? WSUB(0, x) : x); break;
    case LT_SIGN: ULOOP(int64_t, int64_t, (int64_t)((x > 0) - (x < 0))); break;
    case LT_RELU: ULOOP(int64_t, int64_t, x > 0 ? x : 0); break;
    case LT_SQUARE: ULOOP(int64_t, int64_t, WMUL(x, x)); break;
    case LT_FLOOR:
    case LT_CEIL:
    case LT_ROUND:
    case LT_TRUNC: ULOOP(int64_t, int64_t, x); break;
    case LT_LNOT: ULOOP(int64_t, u8, x == 0); break;
    case LT_ISNAN: ULOOP(int64_t, u8, ((void)x, 0)); break;
    case LT_ISFINITE: ULOOP(int64_t, u8, ((void)x, 1)); break;
    case LT_UCLAMP: {
      /* bounds arrive as doubles; an absent bound is +-inf */
      int64_t lo = f2i(p0), hi = f2i(p1);
      ULOOP(int64_t, int64_t, (x < lo ? lo : x) > hi ? hi : (x < lo ? lo : x));
      break;
    }
    default: break;
  }
}

static void un_b8(int op, char **d, int64_t so, int64_t sa, int64_t n, double p0, double p1) {
  (void)p0;
  (void)p1;
  switch (op) {
    case LT_SIGN:
    case LT_ABS:
    case LT_RELU:
    case LT_FLOOR:
    case LT_CEIL:
    case LT_ROUND:
    case LT_TRUNC:
    case LT_SQUARE: ULOOP(u8, u8, x != 0); break;
    case LT_LNOT: ULOOP(u8, u8, x == 0); break;
    case LT_ISNAN: ULOOP(u8, u8, ((void)x, 0)); break;
    case LT_ISFINITE: ULOOP(u8, u8, ((void)x, 1)); break;
    default: break;
  }
}

static un_kernel un_f32_for_isa(void) {
#ifdef LT_ISA_DISPATCH
  switch (lt_cpu_isa()) {
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

typedef struct {
  int op;
  lt_dtype dto, dta, dtc, dtr;
  double p0, p1;
  un_kernel k;
  bool direct;
} un_job;

static void un_row(char **d, const int64_t *st, int64_t n, void *ud) {
  const un_job *j = ud;
  if (j->direct) {
    j->k(j->op, d, st[0], st[1], n, j->p0, j->p1);
    return;
  }
  double ba[BLK], bo[BLK];
  int64_t ec = (int64_t)lt_dtype_size(j->dtc), er = (int64_t)lt_dtype_size(j->dtr);
  bool ca = j->dta == j->dtc, co = j->dto == j->dtr;
  for (int64_t i0 = 0; i0 < n; i0 += BLK) {
    int64_t m = n - i0 < BLK ? n - i0 : BLK;
    char *p[2];
    int64_t s[2];
    if (ca) {
      p[1] = d[1] + i0 * st[1];
      s[1] = st[1];
    } else {
      convert(d[1] + i0 * st[1], st[1], j->dta, (char *)ba, ec, j->dtc, m);
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
    if (!co) convert((char *)bo, er, j->dtr, d[0] + i0 * st[0], st[0], j->dto, m);
  }
}

/* Unary ops compute in the output's dtype, except the bool-valued ones (isnan, isfinite,
** logical_not) which compute in the input's dtype. */
void lt_cpu_unary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, double p0,
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
  bool dense = lt_dense(out, &n);
  if (n == 0) return;
  if (n < LT_PAR_MIN && dense && lt_dense(a, &na) && lt_same_shape(a, out)) {
    char *d[2] = {lt_ptr(out), lt_ptr(a)};
    int64_t st[2] = {(int64_t)lt_esize(out->dtype), (int64_t)lt_esize(a->dtype)};
    un_row(d, st, n, &j);
    return;
  }
  lt_tensor *ops[2] = {out, (lt_tensor *)a};
  lt_iter it;
  lt_iter_init(&it, 2, ops, out->ndim, out->size);
  lt_iter_run(ctx, &it, un_row, &j);
}

/* ================================================================ ternary (gradients) */

#define TLOOP(T, EXPR)                                                                 \
  do {                                                                                 \
    if (st[0] == SZ(T) && st[1] == SZ(T) && st[2] == SZ(T) && st[3] == SZ(T)) {        \
      T *o_ = (T *)d[0];                                                               \
      const T *g_ = (const T *)d[1], *a_ = (const T *)d[2], *b_ = (const T *)d[3];     \
      _Pragma("GCC ivdep")                                                             \
      for (int64_t i = 0; i < n; i++) {                                                \
        T g = g_[i], x = a_[i], y = b_[i];                                             \
        o_[i] = (EXPR);                                                                \
      }                                                                                \
    } else if (st[0] == SZ(T) && st[1] == SZ(T) && st[2] == SZ(T) && st[3] == 0) {     \
      T *o_ = (T *)d[0];                                                               \
      const T *g_ = (const T *)d[1], *a_ = (const T *)d[2];                            \
      const T y = *(const T *)d[3];                                                    \
      _Pragma("GCC ivdep")                                                             \
      for (int64_t i = 0; i < n; i++) {                                                \
        T g = g_[i], x = a_[i];                                                        \
        o_[i] = (EXPR);                                                                \
      }                                                                                \
    } else {                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                \
        T g = *(const T *)(d[1] + i * st[1]), x = *(const T *)(d[2] + i * st[2]),      \
          y = *(const T *)(d[3] + i * st[3]);                                          \
        *(T *)(d[0] + i * st[0]) = (EXPR);                                             \
      }                                                                                \
    }                                                                                  \
  } while (0)

#define FLOAT_TERNARY(NAME, T, S)                                                       \
  static void NAME(int op, char **d, const int64_t *st, int64_t n) {                    \
    const T one = 1, zero = 0, half = (T)0.5;                                           \
    switch (op) {                                                                       \
      case LT_T_DIV_B: TLOOP(T, -g * x / (y * y)); break;                               \
      case LT_T_POW_A: TLOOP(T, y == 0 ? zero : g * y * pow##S(x, y - one)); break;     \
      case LT_T_POW_B:                                                                  \
        TLOOP(T, (x == 0 && y >= 0) ? zero : g * pow##S(x, y) * log##S(x));             \
        break;                                                                          \
      case LT_T_ATAN2_A: TLOOP(T, g * y / (x * x + y * y)); break;                      \
      case LT_T_ATAN2_B: TLOOP(T, -g * x / (x * x + y * y)); break;                     \
      case LT_T_MAX_A: TLOOP(T, x == y ? g * half : (x < y ? zero : g)); break;         \
      case LT_T_MAX_B: TLOOP(T, x == y ? g * half : (x > y ? zero : g)); break;         \
      case LT_T_MIN_A: TLOOP(T, x == y ? g * half : (x > y ? zero : g)); break;         \
      case LT_T_MIN_B: TLOOP(T, x == y ? g * half : (x < y ? zero : g)); break;         \
      case LT_T_FMOD_B: TLOOP(T, -g * trunc##S(x / y)); break;                          \
      case LT_T_REM_B: TLOOP(T, -g * floor##S(x / y)); break;                           \
      default: break;                                                                   \
    }                                                                                   \
  }

FLOAT_TERNARY(ter_f32, float, f)
FLOAT_TERNARY(ter_f64, double, )
#ifdef LT_ISA_DISPATCH
#pragma GCC push_options
#pragma GCC target("avx2,fma")
FLOAT_TERNARY(ter_f32_avx2, float, f)
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,prefer-vector-width=512")
FLOAT_TERNARY(ter_f32_avx512, float, f)
#pragma GCC pop_options
#endif

typedef void (*ter_kernel)(int op, char **d, const int64_t *st, int64_t n);

static ter_kernel ter_kernel_for(lt_dtype dt) {
  if (dt != LT_FLOAT32) return ter_f64;
#ifdef LT_ISA_DISPATCH
  switch (lt_cpu_isa()) {
    case LT_ISA_AVX512: return ter_f32_avx512;
    case LT_ISA_AVX2: return ter_f32_avx2;
    default: break;
  }
#endif
  return ter_f32;
}

typedef struct {
  int op;
  ter_kernel k;
} ter_job;

static void ter_row(char **d, const int64_t *st, int64_t n, void *ud) {
  const ter_job *j = ud;
  j->k(j->op, d, st, n);
}

void lt_cpu_ternary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *g, const lt_tensor *a,
                    const lt_tensor *b) {
  ter_job j = {op, ter_kernel_for(out->dtype)};
  lt_tensor *ops[4] = {out, (lt_tensor *)g, (lt_tensor *)a, (lt_tensor *)b};
  lt_iter it;
  lt_iter_init(&it, 4, ops, out->ndim, out->size);
  lt_iter_run(ctx, &it, ter_row, &j);
}

/* ================================================================ where */

#define WLOOP(T)                                                                       \
  do {                                                                                 \
    if (st[0] == SZ(T) && st[1] == 1 && st[2] == SZ(T) && st[3] == SZ(T)) {            \
      T *o_ = (T *)d[0];                                                               \
      const u8 *c_ = (const u8 *)d[1];                                                 \
      const T *a_ = (const T *)d[2], *b_ = (const T *)d[3];                            \
      _Pragma("GCC ivdep")                                                             \
      for (int64_t i = 0; i < n; i++) o_[i] = c_[i] ? a_[i] : b_[i];                   \
    } else {                                                                           \
      for (int64_t i = 0; i < n; i++)                                                  \
        *(T *)(d[0] + i * st[0]) = *(const u8 *)(d[1] + i * st[1])                     \
                                       ? *(const T *)(d[2] + i * st[2])                \
                                       : *(const T *)(d[3] + i * st[3]);               \
    }                                                                                  \
  } while (0)

static void where_row(char **d, const int64_t *st, int64_t n, void *ud) {
  switch (*(const size_t *)ud) {
    case 1: WLOOP(uint8_t); break;
    case 4: WLOOP(uint32_t); break;
    default: WLOOP(uint64_t); break;
  }
}

/* out = cond ? a : b; a and b already have out's dtype, cond is bool. */
void lt_cpu_where(lt_ctx *ctx, lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                  const lt_tensor *b) {
  size_t es = lt_dtype_size(out->dtype);
  lt_tensor *ops[4] = {out, (lt_tensor *)cond, (lt_tensor *)a, (lt_tensor *)b};
  lt_iter it;
  lt_iter_init(&it, 4, ops, out->ndim, out->size);
  lt_iter_run(ctx, &it, where_row, &es);
}
