/*
** cpu/backend.c -- the cpu device's kernel table: the one place that names every cpu kernel.
*/
#include "../core.h"

const lt_backend lt_cpu_backend = {
    .name = "cpu",
    .copy = lt_cpu_copy,
    .fill = lt_cpu_fill,
    .binary = lt_cpu_binary,
    .binary_flat = lt_cpu_binary_flat,
    .unary = lt_cpu_unary,
    .matmul = lt_cpu_matmul,
    .matmul_ready = lt_cpu_matmul_ready,
    .reduce = lt_cpu_reduce,
    .prod_backward = lt_cpu_prod_backward,
    .has_nan = lt_cpu_has_nan,
    .search_dim = lt_cpu_search_dim,
    .search_flat = lt_cpu_search_flat,
    .softmax = lt_cpu_softmax,
    .softmax_backward = lt_cpu_softmax_backward,
    .cumsum = lt_cpu_cumsum,
    /* -- indexing, gather/scatter, masked ops, embedding */
    .index_range = lt_cpu_index_range,
    .gather = lt_cpu_gather,
    .scatter = lt_cpu_scatter,
    .masked_fill = lt_cpu_masked_fill,
    .mask_count = lt_cpu_mask_count,
    .masked_select = lt_cpu_masked_select,
    .masked_scatter = lt_cpu_masked_scatter,
    /* -- convolution, pooling, norms */
    .conv = lt_cpu_conv,
    .conv_backward = lt_cpu_conv_backward,
    .pool = lt_cpu_pool,
    .pool_backward = lt_cpu_pool_backward,
    .batch_norm = lt_cpu_batch_norm,
    .batch_norm_backward = lt_cpu_batch_norm_backward,
    .row_norm = lt_cpu_row_norm,
    .row_norm_backward = lt_cpu_row_norm_backward,
    /* -- dropout, losses, random fills, optimiser steps */
    .dropout = lt_cpu_dropout,
    .class_loss = lt_cpu_class_loss,
    .class_loss_backward = lt_cpu_class_loss_backward,
    .uniform = lt_cpu_uniform,
    .normal = lt_cpu_normal,
    .randint = lt_cpu_randint,
    .bernoulli = lt_cpu_bernoulli,
    .randperm = lt_cpu_randperm,
    .sgd_step = lt_cpu_sgd_step,
    .adam_step = lt_cpu_adam_step,
    .rmsprop_step = lt_cpu_rmsprop_step,
    .adagrad_step = lt_cpu_adagrad_step,
    .arange = lt_cpu_arange,
    .arange_int = lt_cpu_arange_int,
    .linspace = lt_cpu_linspace,
    /* -- devices: the cpu is the host; its memory comes from the buffer cache (tensor.c) and
    ** needs no transfers, so alloc, release, to_host and from_host stay empty */
    .device_count = lt_cpu_device_count,
};

/* In the struct's order: the per-device op suite (spec/device_ops_spec.lua) asks for a case
** of each, so a kernel added to the table without a test fails the suite. */
const char *const lt_backend_entries[] = {
    "copy", "fill", "binary", "binary_flat", "unary", "matmul", "matmul_ready", "reduce",
    "prod_backward",
    "has_nan", "search_dim", "search_flat", "softmax", "softmax_backward", "cumsum",
    /* -- indexing, gather/scatter, masked ops, embedding */
    "index_range", "gather", "scatter", "masked_fill", "mask_count", "masked_select",
    "masked_scatter",
    /* -- convolution, pooling, norms */
    "conv", "conv_backward", "pool", "pool_backward", "batch_norm", "batch_norm_backward",
    "row_norm", "row_norm_backward",
    /* -- dropout, losses, random fills, optimiser steps */
    "dropout", "class_loss", "class_loss_backward", "uniform", "normal", "randint",
    "bernoulli", "randperm", "sgd_step", "adam_step", "rmsprop_step", "adagrad_step",
    "arange", "arange_int", "linspace",
    /* -- devices */
    "device_count", "alloc", "release", "to_host", "from_host",
    NULL,
};

/* The cpu as a device: there is one. */
int lt_cpu_device_count(void) { return 1; }

/* A table entry added to the struct but not to the list above fails the build. */
_Static_assert(sizeof(lt_backend) ==
                   sizeof(const char *) +
                       (sizeof lt_backend_entries / sizeof *lt_backend_entries - 1) *
                           sizeof(void (*)(void)),
               "lt_backend_entries must name every entry of struct lt_backend");

