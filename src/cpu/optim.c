/*
** cpu/optim.c -- cpu kernels of the fused optimiser updates: one pass over each parameter,
** following PyTorch's single-tensor update formulas step by step (same operation order, scalars
** cast to the parameter's dtype), so Lantern and PyTorch agree to rounding. optim.c has checked
** that every buffer is contiguous, of the parameter's shape and dtype, and shares no memory
** with another (the loops read and write through restrict pointers).
**
** Each update is written once as a loop over element type T whose option flags are constants
** (one loop per combination, chosen by a switch), so that every loop vectorises; the float32
** loops are compiled for each ISA level. Large parameters are cut into ranges over the pool;
** every element is computed alone, so results are the same at every level and thread count.
*/
#include <math.h>

#include "../cpu_isa.h"
#include "../optim.h"
#include "cpu.h"

/* One update over a parameter: its buffers as raw pointers, its options, the step's scalars. */
typedef struct opt_job {
  char *p, *s1, *s2, *s3;   /* parameter and up to three state buffers (NULL when absent) */
  const char *g;
  const void *o;            /* the lt_*_opts */
  double k1, k2;            /* per-step scalars (Adam: step size and sqrt of bias correction 2) */
  int variant;              /* the combination of option flags, as the switch numbers it */
  void (*range)(const struct opt_job *j, int64_t i0, int64_t i1);
} opt_job;

/* ------------------------------------------------------------ the update loops */

/* SGD; MODE 0: no momentum buffer, 1: first step (buffer = d), 2: later steps. */
#define SGD_LOOP(T, MODE, DECAY, NESTEROV)                                                \
  for (int64_t i = i0; i < i1; i++) {                                                     \
    T d = sgn * G[i];                                                                     \
    if (DECAY) d = d + wd * P[i];                                                         \
    if ((MODE) == 0) {                                                                    \
      P[i] = P[i] + nlr * d;                                                              \
    } else if ((MODE) == 1) {                                                             \
      B[i] = d;                                                                           \
      P[i] = P[i] + nlr * ((NESTEROV) ? d + mom * d : d);                                 \
    } else {                                                                              \
      T bv = B[i] * mom + d * damp1;                                                      \
      B[i] = bv;                                                                          \
      P[i] = P[i] + nlr * ((NESTEROV) ? d + mom * bv : bv);                               \
    }                                                                                     \
  }

#define DEF_SGD(T, SUF)                                                                   \
  static void sgd_##SUF(const opt_job *j, int64_t i0, int64_t i1) {                       \
    const lt_sgd_opts *o = j->o;                                                          \
    T *restrict P = (T *)j->p, *restrict B = (T *)j->s1;                                  \
    const T *restrict G = (const T *)j->g;                                                \
    const T wd = (T)o->weight_decay, mom = (T)o->momentum, damp1 = (T)(1 - o->dampening); \
    const T nlr = (T)(-o->lr), sgn = o->maximize ? (T)-1 : (T)1;                          \
    switch (j->variant) {                                                                 \
      case 0: SGD_LOOP(T, 0, 0, 0) break;                                                 \
      case 1: SGD_LOOP(T, 0, 1, 0) break;                                                 \
      case 2: SGD_LOOP(T, 1, 0, 0) break;                                                 \
      case 3: SGD_LOOP(T, 1, 1, 0) break;                                                 \
      case 4: SGD_LOOP(T, 1, 0, 1) break;                                                 \
      case 5: SGD_LOOP(T, 1, 1, 1) break;                                                 \
      case 6: SGD_LOOP(T, 2, 0, 0) break;                                                 \
      case 7: SGD_LOOP(T, 2, 1, 0) break;                                                 \
      case 8: SGD_LOOP(T, 2, 0, 1) break;                                                 \
      default: SGD_LOOP(T, 2, 1, 1) break;                                                \
    }                                                                                     \
  }

/* Adam / AdamW; DECAY 0: none, 1: L2 (grad + wd p), 2: decoupled (p * (1 - lr wd)). */
#define ADAM_LOOP(T, SQRT, DECAY, AMSGRAD)                                                \
  for (int64_t i = i0; i < i1; i++) {                                                     \
    T grad = sgn * G[i];                                                                  \
    if ((DECAY) == 2) P[i] = P[i] * decayf;                                               \
    if ((DECAY) == 1) grad = grad + wd * P[i];                                            \
    M[i] = M[i] * b1 + grad * omb1;                                                       \
    V[i] = V[i] * b2 + omb2 * grad * grad;                                                \
    T denom;                                                                              \
    if (AMSGRAD) {                                                                        \
      VM[i] = VM[i] > V[i] ? VM[i] : V[i];                                                \
      denom = SQRT(VM[i]) / bc2s + eps;                                                   \
    } else {                                                                              \
      denom = SQRT(V[i]) / bc2s + eps;                                                    \
    }                                                                                     \
    P[i] = P[i] + nstep * M[i] / denom;                                                   \
  }

#define DEF_ADAM(T, SQRT, SUF)                                                            \
  static void adam_##SUF(const opt_job *j, int64_t i0, int64_t i1) {                      \
    const lt_adam_opts *o = j->o;                                                         \
    T *restrict P = (T *)j->p, *restrict M = (T *)j->s1, *restrict V = (T *)j->s2;        \
    T *restrict VM = (T *)j->s3;                                                          \
    const T *restrict G = (const T *)j->g;                                                \
    const T b1 = (T)o->beta1, b2 = (T)o->beta2, omb1 = (T)(1 - o->beta1),                 \
            omb2 = (T)(1 - o->beta2), wd = (T)o->weight_decay, eps = (T)o->eps;           \
    const T decayf = (T)(1 - o->lr * o->weight_decay), sgn = o->maximize ? (T)-1 : (T)1;  \
    const T nstep = (T)(-j->k1), bc2s = (T)j->k2;                                         \
    switch (j->variant) {                                                                 \
      case 0: ADAM_LOOP(T, SQRT, 0, 0) break;                                             \
      case 1: ADAM_LOOP(T, SQRT, 0, 1) break;                                             \
      case 2: ADAM_LOOP(T, SQRT, 1, 0) break;                                             \
      case 3: ADAM_LOOP(T, SQRT, 1, 1) break;                                             \
      case 4: ADAM_LOOP(T, SQRT, 2, 0) break;                                             \
      default: ADAM_LOOP(T, SQRT, 2, 1) break;                                            \
    }                                                                                     \
  }

#define RMSPROP_LOOP(T, SQRT, DECAY, CENTERED, MOMENTUM)                                  \
  for (int64_t i = i0; i < i1; i++) {                                                     \
    T grad = sgn * G[i];                                                                  \
    if (DECAY) grad = grad + wd * P[i];                                                   \
    S[i] = S[i] * a + oma * grad * grad;                                                  \
    T avg;                                                                                \
    if (CENTERED) {                                                                       \
      GA[i] = GA[i] * a + grad * oma;                                                     \
      avg = SQRT(S[i] + (T)(-1) * GA[i] * GA[i]) + eps;                                   \
    } else {                                                                              \
      avg = SQRT(S[i]) + eps;                                                             \
    }                                                                                     \
    if (MOMENTUM) {                                                                       \
      B[i] = B[i] * mom + grad / avg;                                                     \
      P[i] = P[i] + nlr * B[i];                                                           \
    } else {                                                                              \
      P[i] = P[i] + nlr * grad / avg;                                                     \
    }                                                                                     \
  }

#define DEF_RMSPROP(T, SQRT, SUF)                                                         \
  static void rmsprop_##SUF(const opt_job *j, int64_t i0, int64_t i1) {                   \
    const lt_rmsprop_opts *o = j->o;                                                      \
    T *restrict P = (T *)j->p, *restrict S = (T *)j->s1, *restrict GA = (T *)j->s2;       \
    T *restrict B = (T *)j->s3;                                                           \
    const T *restrict G = (const T *)j->g;                                                \
    const T a = (T)o->alpha, oma = (T)(1 - o->alpha), wd = (T)o->weight_decay;            \
    const T eps = (T)o->eps, mom = (T)o->momentum, nlr = (T)(-o->lr);                     \
    const T sgn = o->maximize ? (T)-1 : (T)1;                                             \
    switch (j->variant) {                                                                 \
      case 0: RMSPROP_LOOP(T, SQRT, 0, 0, 0) break;                                       \
      case 1: RMSPROP_LOOP(T, SQRT, 0, 0, 1) break;                                       \
      case 2: RMSPROP_LOOP(T, SQRT, 0, 1, 0) break;                                       \
      case 3: RMSPROP_LOOP(T, SQRT, 0, 1, 1) break;                                       \
      case 4: RMSPROP_LOOP(T, SQRT, 1, 0, 0) break;                                       \
      case 5: RMSPROP_LOOP(T, SQRT, 1, 0, 1) break;                                       \
      case 6: RMSPROP_LOOP(T, SQRT, 1, 1, 0) break;                                       \
      default: RMSPROP_LOOP(T, SQRT, 1, 1, 1) break;                                      \
    }                                                                                     \
  }

#define ADAGRAD_LOOP(T, SQRT, DECAY)                                                      \
  for (int64_t i = i0; i < i1; i++) {                                                     \
    T grad = sgn * G[i];                                                                  \
    if (DECAY) grad = grad + wd * P[i];                                                   \
    S[i] = S[i] + grad * grad;                                                            \
    T std = SQRT(S[i]) + eps;                                                             \
    P[i] = P[i] + nclr * grad / std;                                                      \
  }

#define DEF_ADAGRAD(T, SQRT, SUF)                                                         \
  static void adagrad_##SUF(const opt_job *j, int64_t i0, int64_t i1) {                   \
    const lt_adagrad_opts *o = j->o;                                                      \
    T *restrict P = (T *)j->p, *restrict S = (T *)j->s1;                                  \
    const T *restrict G = (const T *)j->g;                                                \
    const T wd = (T)o->weight_decay, eps = (T)o->eps, nclr = (T)(-j->k1);                 \
    const T sgn = o->maximize ? (T)-1 : (T)1;                                             \
    if (j->variant) {                                                                     \
      ADAGRAD_LOOP(T, SQRT, 1)                                                            \
    } else {                                                                              \
      ADAGRAD_LOOP(T, SQRT, 0)                                                            \
    }                                                                                     \
  }

#define DEF_ALL(T, SQRT, SUF) \
  DEF_SGD(T, SUF)             \
  DEF_ADAM(T, SQRT, SUF)      \
  DEF_RMSPROP(T, SQRT, SUF)   \
  DEF_ADAGRAD(T, SQRT, SUF)

DEF_ALL(double, sqrt, f64)
DEF_ALL(float, sqrtf, sse4)
#ifdef LT_ISA_DISPATCH
LT_ISA_BEGIN_AVX2
DEF_ALL(float, sqrtf, avx2)
LT_ISA_END
LT_ISA_BEGIN_AVX512
DEF_ALL(float, sqrtf, avx512)
LT_ISA_END
#endif

typedef struct opt_kernels {
  void (*sgd)(const opt_job *j, int64_t i0, int64_t i1);
  void (*adam)(const opt_job *j, int64_t i0, int64_t i1);
  void (*rmsprop)(const opt_job *j, int64_t i0, int64_t i1);
  void (*adagrad)(const opt_job *j, int64_t i0, int64_t i1);
} opt_kernels;

static opt_kernels kernels_for(lt_dtype dt) {
  if (dt == LT_FLOAT64) return (opt_kernels){sgd_f64, adam_f64, rmsprop_f64, adagrad_f64};
#ifdef LT_ISA_DISPATCH
  switch (ltB_cpu_isa()) {
    case LT_ISA_AVX512: return (opt_kernels){sgd_avx512, adam_avx512, rmsprop_avx512, adagrad_avx512};
    case LT_ISA_AVX2: return (opt_kernels){sgd_avx2, adam_avx2, rmsprop_avx2, adagrad_avx2};
    default: break;
  }
#endif
  return (opt_kernels){sgd_sse4, adam_sse4, rmsprop_sse4, adagrad_sse4};
}

/* ------------------------------------------------------------ entries */

static void job_range(int64_t i0, int64_t i1, void *ud) {
  const opt_job *j = ud;
  j->range(j, i0, i1);
}

static void run(lt_ctx *ctx, const lt_tensor *p, opt_job *j) {
  ltB_parallel_for(ctx, lt_numel(p), LT_PAR_MIN, job_range, j);
}

static char *data_or_null(const lt_tensor *t) { return t ? (char *)ltB_ptr(t) : NULL; }

void ltC_sgd_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                  const lt_sgd_opts *o) {
  int mode = !buf ? 0 : o->first ? 1 : 2, decay = o->weight_decay != 0;
  opt_job j = {.p = ltB_ptr(p), .s1 = data_or_null(buf), .g = ltB_ptr(g), .o = o,
               .variant = mode == 0 ? decay : mode * 4 - 2 + decay + 2 * o->nesterov,
               .range = kernels_for(p->dtype).sgd};
  run(ctx, p, &j);
}

void ltC_adam_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m, lt_tensor *v,
                   lt_tensor *vmax, const lt_adam_opts *o) {
  double bc1 = 1 - pow(o->beta1, o->step), bc2 = 1 - pow(o->beta2, o->step);
  int decay = o->weight_decay == 0 ? 0 : o->decoupled ? 2 : 1;
  opt_job j = {.p = ltB_ptr(p), .s1 = ltB_ptr(m), .s2 = ltB_ptr(v), .s3 = data_or_null(vmax),
               .g = ltB_ptr(g), .o = o, .k1 = o->lr / bc1, .k2 = sqrt(bc2),
               .variant = decay * 2 + (vmax != NULL), .range = kernels_for(p->dtype).adam};
  run(ctx, p, &j);
}

void ltC_rmsprop_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                      lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o) {
  opt_job j = {.p = ltB_ptr(p), .s1 = ltB_ptr(sq), .s2 = data_or_null(gavg),
               .s3 = data_or_null(buf), .g = ltB_ptr(g), .o = o,
               .variant = (o->weight_decay != 0) * 4 + (gavg != NULL) * 2 + (buf != NULL),
               .range = kernels_for(p->dtype).rmsprop};
  run(ctx, p, &j);
}

void ltC_adagrad_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                      const lt_adagrad_opts *o) {
  opt_job j = {.p = ltB_ptr(p), .s1 = ltB_ptr(sum), .g = ltB_ptr(g), .o = o,
               .k1 = o->lr / (1 + (o->step - 1) * o->lr_decay),
               .variant = o->weight_decay != 0, .range = kernels_for(p->dtype).adagrad};
  run(ctx, p, &j);
}
