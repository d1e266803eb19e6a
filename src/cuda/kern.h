/*
** kern.h -- the launchers of the CUDA kernels (kernels.cu), callable from the plugin's C code.
** The .cu side does not see core.h: it gets plain geometry (elements, not bytes) and its own op
** codes, which elementwise.c maps from the core's.
*/
#ifndef LTC_KERN_H
#define LTC_KERN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LTC_MAX_DIMS 16   /* LT_MAX_DIMS (checked in elementwise.c) */
#define LTC_NOPS 3

/* the core's dtypes, in lt_dtype's order (checked in elementwise.c) */
enum ltc_dtype { LTC_F32, LTC_F64, LTC_I64, LTC_BOOL };

enum ltc_binop { LTC_ADD, LTC_SUB, LTC_MUL, LTC_DIV, LTC_MAX, LTC_MIN, LTC_POW, LTC_NBINOP };

enum ltc_unop {
  LTC_NEG, LTC_ABS, LTC_EXP, LTC_LOG, LTC_SQRT, LTC_RSQRT, LTC_SIN, LTC_COS, LTC_TANH,
  LTC_SIGMOID, LTC_RELU, LTC_RECIPROCAL, LTC_SQUARE, LTC_NUNOP
};

/* Operand k of an elementwise kernel: data[k] + sum of index[d] * stride[k][d]; operand 0 is
** the output, and numel = the product of size. */
typedef struct ltc_geom {
  int ndim;
  int64_t numel;
  int64_t size[LTC_MAX_DIMS];
  int64_t stride[LTC_NOPS][LTC_MAX_DIMS];
  void *data[LTC_NOPS];
} ltc_geom;

/* Each returns a cudaError_t (0: launched). */
int ltc_copy(const ltc_geom *g, enum ltc_dtype out, enum ltc_dtype src);
int ltc_fill(const ltc_geom *g, enum ltc_dtype out, double v);
int ltc_binary_f32(enum ltc_binop op, const ltc_geom *g);
int ltc_unary_f32(enum ltc_unop op, const ltc_geom *g);
/* out[i] = op(a[i * sa], b[i * sb]) over n dense float32s */
int ltc_binary_flat_f32(enum ltc_binop op, int64_t n, float *out, const float *a, int sa,
                        const float *b, int sb);

#ifdef __cplusplus
}
#endif

#endif
