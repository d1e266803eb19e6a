/*
** cpu/optim.c -- cpu kernels of the fused optimiser updates: one pass over each parameter,
** following PyTorch's single-tensor update formulas step by step (same operation order, scalars
** cast to the parameter's dtype), so Lantern and PyTorch agree to rounding. optim.c has checked
** that every buffer is contiguous, of the parameter's shape and dtype, and shares no memory
** with another (the loops read and write through restrict pointers).
**
** Each update is written once as a macro body over element type T, instantiated for float and
** double; the body reads like PyTorch's Python source line by line.
*/
#include <math.h>

#include "cpu.h"
#include "../optim.h"

/* The option flags are copied to locals first: read through `o` inside the loop they block
** unswitching and vectorisation (a 10x difference measured on SGD). */
#define SGD_BODY(T)                                                                    \
  do {                                                                                 \
    T *restrict P = ltB_ptr(p);                                                        \
    const T *restrict G = ltB_ptr(g);                                                  \
    T *restrict B = buf ? (T *)ltB_ptr(buf) : NULL;                                    \
    const T wd = (T)o->weight_decay, mom = (T)o->momentum, damp1 = (T)(1 - o->dampening); \
    const T nlr = (T)(-o->lr), sgn = o->maximize ? (T)-1 : (T)1;                       \
    const bool decay = o->weight_decay != 0, first = o->first, nesterov = o->nesterov; \
    if (!B) {                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                \
        T d = sgn * G[i];                                                              \
        if (decay) d = d + wd * P[i];                                                  \
        P[i] = P[i] + nlr * d;                                                         \
      }                                                                                \
    } else if (first) {                                                                \
      for (int64_t i = 0; i < n; i++) {                                                \
        T d = sgn * G[i];                                                              \
        if (decay) d = d + wd * P[i];                                                  \
        B[i] = d;                                                                      \
        P[i] = P[i] + nlr * (nesterov ? d + mom * d : d);                              \
      }                                                                                \
    } else {                                                                           \
      for (int64_t i = 0; i < n; i++) {                                                \
        T d = sgn * G[i];                                                              \
        if (decay) d = d + wd * P[i];                                                  \
        T bv = B[i] * mom + d * damp1;                                                 \
        B[i] = bv;                                                                     \
        P[i] = P[i] + nlr * (nesterov ? d + mom * bv : bv);                            \
      }                                                                                \
    }                                                                                  \
  } while (0)

#define ADAM_BODY(T, SQRT)                                                              \
  do {                                                                                  \
    T *restrict P = ltB_ptr(p), *restrict M = ltB_ptr(m), *restrict V = ltB_ptr(v);    \
    T *restrict VM = vmax ? (T *)ltB_ptr(vmax) : NULL;                                  \
    const T *restrict G = ltB_ptr(g);                                                   \
    const bool maximize = o->maximize, decay = o->weight_decay != 0;                    \
    const bool decoupled = o->decoupled;                                                \
    const T b1 = (T)o->beta1, b2 = (T)o->beta2, omb1 = (T)(1 - o->beta1),              \
            omb2 = (T)(1 - o->beta2), wd = (T)o->weight_decay, eps = (T)o->eps;        \
    const T decayf = (T)(1 - o->lr * o->weight_decay);                                 \
    const T nstep = (T)(-step_size), bc2s = (T)bc2_sqrt;                               \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T grad = maximize ? -G[i] : G[i];                                                 \
      if (decay) {                                                                      \
        if (decoupled) P[i] = P[i] * decayf;                                            \
        else grad = grad + wd * P[i];                                                   \
      }                                                                                 \
      M[i] = M[i] * b1 + grad * omb1;                                                   \
      V[i] = V[i] * b2 + omb2 * grad * grad;                                            \
      T denom;                                                                          \
      if (VM) {                                                                         \
        VM[i] = VM[i] > V[i] ? VM[i] : V[i];                                            \
        denom = SQRT(VM[i]) / bc2s + eps;                                               \
      } else {                                                                          \
        denom = SQRT(V[i]) / bc2s + eps;                                                \
      }                                                                                 \
      P[i] = P[i] + nstep * M[i] / denom;                                               \
    }                                                                                   \
  } while (0)

#define RMSPROP_BODY(T, SQRT)                                                           \
  do {                                                                                  \
    T *P = ltB_ptr(p), *S = ltB_ptr(sq);                                                \
    T *GA = gavg ? (T *)ltB_ptr(gavg) : NULL, *B = buf ? (T *)ltB_ptr(buf) : NULL;     \
    const T *G = ltB_ptr(g);                                                            \
    const T a = (T)o->alpha, oma = (T)(1 - o->alpha), wd = (T)o->weight_decay;         \
    const T eps = (T)o->eps, mom = (T)o->momentum, nlr = (T)(-o->lr);                  \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T grad = o->maximize ? -G[i] : G[i];                                              \
      if (o->weight_decay != 0) grad = grad + wd * P[i];                                \
      S[i] = S[i] * a + oma * grad * grad;                                              \
      T avg;                                                                            \
      if (GA) {                                                                         \
        GA[i] = GA[i] * a + grad * oma;                                                 \
        avg = SQRT(S[i] + (T)(-1) * GA[i] * GA[i]) + eps;                               \
      } else {                                                                          \
        avg = SQRT(S[i]) + eps;                                                         \
      }                                                                                 \
      if (B) {                                                                          \
        B[i] = B[i] * mom + grad / avg;                                                 \
        P[i] = P[i] + nlr * B[i];                                                       \
      } else {                                                                          \
        P[i] = P[i] + nlr * grad / avg;                                                 \
      }                                                                                 \
    }                                                                                   \
  } while (0)

#define ADAGRAD_BODY(T, SQRT)                                                           \
  do {                                                                                  \
    T *P = ltB_ptr(p), *S = ltB_ptr(sum);                                               \
    const T *G = ltB_ptr(g);                                                            \
    const T wd = (T)o->weight_decay, eps = (T)o->eps, nclr = (T)(-clr);                \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T grad = o->maximize ? -G[i] : G[i];                                              \
      if (o->weight_decay != 0) grad = grad + wd * P[i];                                \
      S[i] = S[i] + grad * grad;                                                        \
      T std = SQRT(S[i]) + eps;                                                         \
      P[i] = P[i] + nclr * grad / std;                                                  \
    }                                                                                   \
  } while (0)

void ltC_sgd_step(lt_tensor *p, const lt_tensor *g, lt_tensor *buf, const lt_sgd_opts *o) {
  int64_t n = lt_numel(p);
  if (p->dtype == LT_FLOAT32) SGD_BODY(float);
  else SGD_BODY(double);
}

void ltC_adam_step(lt_tensor *p, const lt_tensor *g, lt_tensor *m, lt_tensor *v,
                   lt_tensor *vmax, const lt_adam_opts *o) {
  int64_t n = lt_numel(p);
  double bc1 = 1 - pow(o->beta1, o->step), bc2 = 1 - pow(o->beta2, o->step);
  double step_size = o->lr / bc1, bc2_sqrt = sqrt(bc2);
  if (p->dtype == LT_FLOAT32) ADAM_BODY(float, sqrtf);
  else ADAM_BODY(double, sqrt);
}

void ltC_rmsprop_step(lt_tensor *p, const lt_tensor *g, lt_tensor *sq, lt_tensor *gavg,
                      lt_tensor *buf, const lt_rmsprop_opts *o) {
  int64_t n = lt_numel(p);
  if (p->dtype == LT_FLOAT32) RMSPROP_BODY(float, sqrtf);
  else RMSPROP_BODY(double, sqrt);
}

void ltC_adagrad_step(lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                      const lt_adagrad_opts *o) {
  int64_t n = lt_numel(p);
  double clr = o->lr / (1 + (o->step - 1) * o->lr_decay);
  if (p->dtype == LT_FLOAT32) ADAGRAD_BODY(float, sqrtf);
  else ADAGRAD_BODY(double, sqrt);
}
