/*
** optim.c -- the op layer of the fused optimiser updates: it checks the parameter, gradient
** and state tensors, then the device's *_step kernel (cpu/optim.c) makes the one pass over
** each parameter, following PyTorch's single-tensor formulas.
**
** All tensors of one update must be contiguous, of the parameter's shape and float dtype; the
** Lua optimisers create their state that way and gradients from backward are contiguous.
*/
#include "backend.h"
#include "optim.h"

static int check_same(lt_ctx *ctx, const char *op, const lt_tensor *p, const lt_tensor *t,
                      const char *what) {
  if (!t) return 0;
  char a[256], b[256];
  if (!ltB_same_shape(p, t) || t->dtype != p->dtype || !lt_is_contiguous(t))
    return ltB_fail(ctx, "%s: %s must be a contiguous %s tensor of shape %s (got %s %s%s)", op,
                    what, lt_dtype_name(p->dtype), LT_SHAPE(p, a), lt_dtype_name(t->dtype),
                    LT_SHAPE(t, b), lt_is_contiguous(t) ? "" : ", non-contiguous");
  return 0;
}

static int check_param(lt_ctx *ctx, const char *op, const lt_tensor *p) {
  if (!lt_dtype_is_float(p->dtype))
    return ltB_fail(ctx, "%s: parameter must be float32 or float64, got %s", op,
                    lt_dtype_name(p->dtype));
  if (!lt_is_contiguous(p)) return ltB_fail(ctx, "%s: parameter must be contiguous", op);
  return 0;
}

/* Whether two contiguous tensors share any byte (from their offsets in one storage). */
static bool overlap(const lt_tensor *a, const lt_tensor *b) {
  if (!a || !b || a->storage != b->storage) return false;
  int64_t ea = (int64_t)ltB_esize(a->dtype), eb = (int64_t)ltB_esize(b->dtype);
  int64_t pa = a->offset * ea, pb = b->offset * eb, na = lt_numel(a) * ea, nb = lt_numel(b) * eb;
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
        return ltB_fail(ctx, "%s: %s shares memory with %s; each needs its own buffer", op,
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

int lt_sgd_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                const lt_sgd_opts *o) {
  if (check_param(ctx, "SGD", p) || check_same(ctx, "SGD", p, g, "gradient") ||
      check_same(ctx, "SGD", p, buf, "momentum_buffer"))
    return -1;
  if (o->momentum != 0 && !buf) return ltB_fail(ctx, "SGD: momentum needs a momentum buffer");
  lt_tensor *gcopy, *bufs[] = {p, buf};
  const char *names[] = {"the parameter", "momentum_buffer"};
  if (separate(ctx, "SGD", &g, &gcopy, bufs, names, 2)) return -1;
  ltK_kernels(p)->sgd_step(ctx, p, g, buf, o);
  lt_release(gcopy);
  ltB_bump_version(p);
  if (buf) ltB_bump_version(buf);
  return 0;
}

int lt_adam_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m, lt_tensor *v,
                 lt_tensor *vmax, const lt_adam_opts *o) {
  const char *op = o->decoupled ? "AdamW" : "Adam";
  if (check_param(ctx, op, p) || check_same(ctx, op, p, g, "gradient") ||
      check_same(ctx, op, p, m, "exp_avg") || check_same(ctx, op, p, v, "exp_avg_sq") ||
      check_same(ctx, op, p, vmax, "max_exp_avg_sq"))
    return -1;
  if (!m || !v || (o->amsgrad && !vmax)) return ltB_fail(ctx, "%s: missing state tensors", op);
  if (o->step < 1) return ltB_fail(ctx, "%s: step must be >= 1", op);
  lt_tensor *gcopy, *bufs[] = {p, m, v, vmax};
  const char *names[] = {"the parameter", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  if (separate(ctx, op, &g, &gcopy, bufs, names, 4)) return -1;
  ltK_kernels(p)->adam_step(ctx, p, g, m, v, vmax, o);
  lt_release(gcopy);
  ltB_bump_version(p);
  return 0;
}

int lt_rmsprop_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                    lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o) {
  if (check_param(ctx, "RMSprop", p) || check_same(ctx, "RMSprop", p, g, "gradient") ||
      check_same(ctx, "RMSprop", p, sq, "square_avg") ||
      check_same(ctx, "RMSprop", p, gavg, "grad_avg") ||
      check_same(ctx, "RMSprop", p, buf, "momentum_buffer"))
    return -1;
  if (!sq || (o->centered && !gavg) || (o->momentum > 0 && !buf))
    return ltB_fail(ctx, "RMSprop: missing state tensors");
  lt_tensor *gcopy, *bufs[] = {p, sq, gavg, buf};
  const char *names[] = {"the parameter", "square_avg", "grad_avg", "momentum_buffer"};
  if (separate(ctx, "RMSprop", &g, &gcopy, bufs, names, 4)) return -1;
  ltK_kernels(p)->rmsprop_step(ctx, p, g, sq, gavg, buf, o);
  lt_release(gcopy);
  ltB_bump_version(p);
  return 0;
}

int lt_adagrad_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                    const lt_adagrad_opts *o) {
  if (check_param(ctx, "Adagrad", p) || check_same(ctx, "Adagrad", p, g, "gradient") ||
      check_same(ctx, "Adagrad", p, sum, "sum"))
    return -1;
  if (!sum) return ltB_fail(ctx, "Adagrad: missing state tensor");
  lt_tensor *gcopy, *bufs[] = {p, sum};
  const char *names[] = {"the parameter", "sum"};
  if (separate(ctx, "Adagrad", &g, &gcopy, bufs, names, 2)) return -1;
  ltK_kernels(p)->adagrad_step(ctx, p, g, sum, o);
  lt_release(gcopy);
  ltB_bump_version(p);
  return 0;
}
