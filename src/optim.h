/*
** optim.h -- fused optimiser updates (optim.c). Each takes a parameter, its gradient and its
** state tensors (NULL when the option that needs them is off) and updates them in place:
** optim.c checks them, the device's *_step kernels (cpu/optim.c) compute.
*/
#ifndef LT_OPTIM_H
#define LT_OPTIM_H

#include "core.h"

typedef struct lt_sgd_opts {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
  bool first;   /* the momentum buffer is new: it takes the gradient as is */
} lt_sgd_opts;

typedef struct lt_adam_opts {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize;
  bool decoupled;   /* AdamW: weight decay applied to the parameter, not the gradient */
  double step;      /* already incremented for this update */
} lt_adam_opts;

typedef struct lt_rmsprop_opts {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
} lt_rmsprop_opts;

typedef struct lt_adagrad_opts {
  double lr, lr_decay, weight_decay, eps;
  bool maximize;
  double step;      /* already incremented */
} lt_adagrad_opts;

int lt_sgd_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                const lt_sgd_opts *o);
int lt_adam_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m, lt_tensor *v,
                 lt_tensor *vmax, const lt_adam_opts *o);
int lt_rmsprop_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                    lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o);
int lt_adagrad_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                    const lt_adagrad_opts *o);

#endif
