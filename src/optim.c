/*
** optim.c -- fused optimiser updates: one pass over each parameter in C, following PyTorch's
** single-tensor update formulas step by step (same operation order, scalars cast to the
** parameter's dtype), so Lantern and PyTorch agree to rounding.
**
** All tensors of one update must be contiguous, of the parameter's shape and float dtype; the
** Lua optimisers create their state that way and gradients from backward are contiguous.
*/
#include <math.h>

#include "core.h"
#include "optim.h"

static int check_same(lt_ctx *ctx, const char *op, const lt_tensor *p, const lt_tensor *t,
                      const char *what) {
  if (!t) return 0;
  char a[256], b[256];
  if (!lt_same_shape(p, t) || t->dtype != p->dtype || !lt_is_contiguous(t))
    return lt_fail(ctx, "%s: %s must be a contiguous %s tensor of shape %s (got %s %s%s)", op,
                   what, lt_dtype_name(p->dtype), LT_SHAPE(p, a), lt_dtype_name(t->dtype),
                   LT_SHAPE(t, b), lt_is_contiguous(t) ? "" : ", non-contiguous");
  return 0;
}

static int check_param(lt_ctx *ctx, const char *op, const lt_tensor *p) {
  if (!lt_dtype_is_float(p->dtype))
    return lt_fail(ctx, "%s: parameter must be float32 or float64, got %s", op,
                   lt_dtype_name(p->dtype));
  if (!lt_is_contiguous(p)) return lt_fail(ctx, "%s: parameter must be contiguous", op);
  return 0;
}

/* Whether two contiguous tensors share any byte. */
static bool overlap(const lt_tensor *a, const lt_tensor *b) {
  if (!a || !b || a->storage != b->storage) return false;
  const char *pa = lt_ptr(a), *pb = lt_ptr(b);
  size_t na = (size_t)lt_numel(a) * lt_esize(a->dtype), nb = (size_t)lt_numel(b) * lt_esize(b->dtype);
  return na && nb && pa < pb + nb && pb < pa + na;
}

/* The update loops read and write through restrict pointers, so their buffers must not share
** memory. State that shares memory (with the parameter or other state) is an error; a gradient
** that does (`p.grad = p`) is read from a copy, stored in *copy for the caller to release. */
static int separate(lt_ctx *ctx, const char *op, const lt_tensor **g, lt_tensor **copy,
                    lt_tensor *const *bufs, const char *const *names, int n) {
  *copy = NULL;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (overlap(bufs[i], bufs[j]))
        return lt_fail(ctx, "%s: %s shares memory with %s; each needs its own buffer", op,
                       names[j], names[i]);
  for (int i = 0; i < n; i++)
    if (overlap(*g, bufs[i])) {
      bool was = lt_set_grad_enabled(ctx, false);
      int rc = lt_clone(ctx, copy, (lt_tensor *)*g);
      lt_set_grad_enabled(ctx, was);
      if (rc) return -1;
      *g = *copy;
      break;
    }
  return 0;
}

/* Each update is written once as a macro body over element type T, instantiated for float and
** double; the body reads like PyTorch's Python source line by line. */

/* The option flags are copied to locals first: read through `o` inside the loop they block
** unswitching and vectorisation (a 10x difference measured on SGD). */
#define SGD_BODY(T)                                                                    \
  do {                                                                                 \
    T *restrict P = lt_data(p);                                                        \
    const T *restrict G = lt_data(g);                                                  \
    T *restrict B = buf ? (T *)lt_data(buf) : NULL;                                    \
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

int lt_sgd_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                const lt_sgd_opts *o) {
  if (check_param(ctx, "SGD", p) || check_same(ctx, "SGD", p, g, "gradient") ||
      check_same(ctx, "SGD", p, buf, "momentum_buffer"))
    return -1;
  if (o->momentum != 0 && !buf) return lt_fail(ctx, "SGD: momentum needs a momentum buffer");
  lt_tensor *gcopy, *bufs[] = {p, buf};
  const char *names[] = {"the parameter", "momentum_buffer"};
  if (separate(ctx, "SGD", &g, &gcopy, bufs, names, 2)) return -1;
  int64_t n = lt_numel(p);
  if (p->dtype == LT_FLOAT32) SGD_BODY(float);
  else SGD_BODY(double);
  lt_release(gcopy);
  lt_bump_version(p);
  if (buf) lt_bump_version(buf);
  return 0;
}

#define ADAM_BODY(T, SQRT)                                                              \
  do {                                                                                  \
    T *restrict P = lt_data(p), *restrict M = lt_data(m), *restrict V = lt_data(v);    \
    T *restrict VM = vmax ? (T *)lt_data(vmax) : NULL;                                  \
    const T *restrict G = lt_data(g);                                                   \
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

int lt_adam_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m, lt_tensor *v,
                 lt_tensor *vmax, const lt_adam_opts *o) {
  const char *op = o->decoupled ? "AdamW" : "Adam";
  if (check_param(ctx, op, p) || check_same(ctx, op, p, g, "gradient") ||
      check_same(ctx, op, p, m, "exp_avg") || check_same(ctx, op, p, v, "exp_avg_sq") ||
      check_same(ctx, op, p, vmax, "max_exp_avg_sq"))
    return -1;
  if (!m || !v || (o->amsgrad && !vmax)) return lt_fail(ctx, "%s: missing state tensors", op);
  if (o->step < 1) return lt_fail(ctx, "%s: step must be >= 1", op);
  lt_tensor *gcopy, *bufs[] = {p, m, v, vmax};
  const char *names[] = {"the parameter", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  if (separate(ctx, op, &g, &gcopy, bufs, names, 4)) return -1;
  int64_t n = lt_numel(p);
  double bc1 = 1 - pow(o->beta1, o->step), bc2 = 1 - pow(o->beta2, o->step);
  double step_size = o->lr / bc1, bc2_sqrt = sqrt(bc2);
  if (p->dtype == LT_FLOAT32) ADAM_BODY(float, sqrtf);
  else ADAM_BODY(double, sqrt);
  lt_release(gcopy);
  lt_bump_version(p);
  return 0;
}

#define RMSPROP_BODY(T, SQRT)                                                           \
  do {                                                                                  \
    T *P = lt_data(p), *S = lt_data(sq);                                                \
    T *GA = gavg ? (T *)lt_data(gavg) : NULL, *B = buf ? (T *)lt_data(buf) : NULL;     \
    const T *G = lt_data(g);                                                            \
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

int lt_rmsprop_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                    lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o) {
  if (check_param(ctx, "RMSprop", p) || check_same(ctx, "RMSprop", p, g, "gradient") ||
      check_same(ctx, "RMSprop", p, sq, "square_avg") ||
      check_same(ctx, "RMSprop", p, gavg, "grad_avg") ||
      check_same(ctx, "RMSprop", p, buf, "momentum_buffer"))
    return -1;
  if (!sq || (o->centered && !gavg) || (o->momentum > 0 && !buf))
    return lt_fail(ctx, "RMSprop: missing state tensors");
  lt_tensor *gcopy, *bufs[] = {p, sq, gavg, buf};
  const char *names[] = {"the parameter", "square_avg", "grad_avg", "momentum_buffer"};
  if (separate(ctx, "RMSprop", &g, &gcopy, bufs, names, 4)) return -1;
  int64_t n = lt_numel(p);
  if (p->dtype == LT_FLOAT32) RMSPROP_BODY(float, sqrtf);
  else RMSPROP_BODY(double, sqrt);
  lt_release(gcopy);
  lt_bump_version(p);
  return 0;
}

#define ADAGRAD_BODY(T, SQRT)                                                           \
  do {                                                                                  \
    T *P = lt_data(p), *S = lt_data(sum);                                               \
    const T *G = lt_data(g);                                                            \
    const T wd = (T)o->weight_decay, eps = (T)o->eps, nclr = (T)(-clr);                \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T grad = o->maximize ? -G[i] : G[i];                                              \
      if (o->weight_decay != 0) grad = grad + wd * P[i];                                \
      S[i] = S[i] + grad * grad;                                                        \
      T std = SQRT(S[i]) + eps;                                                         \
      P[i] = P[i] + nclr * grad / std;                                                  \
    }                                                                                   \
  } while (0)

int lt_adagrad_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                    const lt_adagrad_opts *o) {
  if (check_param(ctx, "Adagrad", p) || check_same(ctx, "Adagrad", p, g, "gradient") ||
      check_same(ctx, "Adagrad", p, sum, "sum"))
    return -1;
  if (!sum) return lt_fail(ctx, "Adagrad: missing state tensor");
  lt_tensor *gcopy, *bufs[] = {p, sum};
  const char *names[] = {"the parameter", "sum"};
  if (separate(ctx, "Adagrad", &g, &gcopy, bufs, names, 2)) return -1;
  int64_t n = lt_numel(p);
  double clr = o->lr / (1 + (o->step - 1) * o->lr_decay);
  if (p->dtype == LT_FLOAT32) ADAGRAD_BODY(float, sqrtf);
  else ADAGRAD_BODY(double, sqrt);
  lt_release(gcopy);
  lt_bump_version(p);
  return 0;
}
