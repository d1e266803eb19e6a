/*
** optim.h -- fused optimiser updates (optim.c). Each takes a parameter, its gradient and its
** state tensors (NULL when the option that needs them is off) and updates them in place:
** optim.c checks them, the device's *_step kernels (cpu/optim.c) compute.
*/
#ifndef LT_OPTIM_H
#define LT_OPTIM_H

#include "core.h"

/* The option structs and the four steps (lt_sgd_step, lt_adam_step, lt_rmsprop_step,
** lt_adagrad_step) are public API: include/lantern_ops.h, included through core.h. */

#endif
