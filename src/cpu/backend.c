/*
** cpu/backend.c -- the cpu device's kernel table: the one place that names every cpu kernel.
*/
#include "../core.h"

const ltK_backend ltC_backend = {
    .name = "cpu",
    .copy = ltC_copy,
    .fill = ltC_fill,
    .binary = ltC_binary,
    .binary_flat = ltC_binary_flat,
    .unary = ltC_unary,
    .unary_pair = ltC_unary_pair,
    .ternary = ltC_ternary,
    .addc = ltC_addc,
    .where = ltC_where,
    .matmul = ltC_matmul,
    .matmul_ready = ltC_matmul_ready,
    .addmm_row = ltC_addmm_row,
    .reduce = ltC_reduce,
    .sumsq = ltC_sumsq,
    .prod_backward = ltC_prod_backward,
    .has_nan = ltC_has_nan,
    .search_dim = ltC_search_dim,
    .search_flat = ltC_search_flat,
    .softmax = ltC_softmax,
    .softmax_backward = ltC_softmax_backward,
    .cumsum = ltC_cumsum,
    .sort = ltC_sort,
    .searchsorted = ltC_searchsorted,
    .unique_few = ltC_unique_few,
    /* -- indexing, gather/scatter, masked ops, embedding */
    .index_range = ltC_index_range,
    .gather = ltC_gather,
    .scatter = ltC_scatter,
    .masked_fill = ltC_masked_fill,
    .mask_count = ltC_mask_count,
    .masked_select = ltC_masked_select,
    .masked_scatter = ltC_masked_scatter,
    /* -- convolution, pooling, norms */
    .conv = ltC_conv,
    .conv_backward = ltC_conv_backward,
    .pool = ltC_pool,
    .pool_backward = ltC_pool_backward,
    .batch_norm = ltC_batch_norm,
    .batch_norm_backward = ltC_batch_norm_backward,
    .row_norm = ltC_row_norm,
    .row_norm_backward = ltC_row_norm_backward,
    /* -- attention */
    .sdpa = ltC_sdpa,
    .sdpa_backward = ltC_sdpa_backward,
    /* -- dropout, losses, random fills, optimiser steps */
    .dropout = ltC_dropout,
    .class_loss = ltC_class_loss,
    .class_loss_backward = ltC_class_loss_backward,
    .resample = ltC_resample,
    .resample_backward = ltC_resample_backward,
    .regression_loss = ltC_regression_loss,
    .regression_loss_backward = ltC_regression_loss_backward,
    .uniform = ltC_uniform,
    .normal = ltC_normal,
    .randint = ltC_randint,
    .bernoulli = ltC_bernoulli,
    .randperm = ltC_randperm,
    .sgd_step = ltC_sgd_step,
    .adam_step = ltC_adam_step,
    .rmsprop_step = ltC_rmsprop_step,
    .adagrad_step = ltC_adagrad_step,
    .arange = ltC_arange,
    .arange_int = ltC_arange_int,
    .linspace = ltC_linspace,
    /* -- devices: the cpu is the host; its memory comes from the buffer cache (tensor.c) and
    ** needs no transfers, so alloc, release, to_host and from_host stay empty */
    .device_count = ltC_device_count,
};

/* In the struct's order: the per-device op suite (spec/device_ops_spec.lua) asks for a case
** of each, so a kernel added to the table without a test fails the suite. */
const char *const ltC_backend_entries[] = {
    "copy", "fill", "binary", "binary_flat", "unary", "unary_pair", "ternary", "addc", "where",
    "matmul",
    "matmul_ready", "addmm_row", "reduce", "sumsq", "prod_backward",
    "has_nan", "search_dim", "search_flat", "softmax", "softmax_backward", "cumsum",
    "sort", "searchsorted", "unique_few",
    /* -- indexing, gather/scatter, masked ops, embedding */
    "index_range", "gather", "scatter", "masked_fill", "mask_count", "masked_select",
    "masked_scatter",
    /* -- convolution, pooling, norms */
    "conv", "conv_backward", "pool", "pool_backward", "batch_norm", "batch_norm_backward",
    "row_norm", "row_norm_backward",
    /* -- attention */
    "sdpa", "sdpa_backward",
    /* -- dropout, losses, random fills, optimiser steps */
    "dropout", "class_loss", "class_loss_backward", "resample", "resample_backward",
    "regression_loss",
    "regression_loss_backward", "uniform", "normal", "randint",
    "bernoulli", "randperm", "sgd_step", "adam_step", "rmsprop_step", "adagrad_step",
    "arange", "arange_int", "linspace",
    /* -- devices */
    "device_count", "alloc", "release", "to_host", "from_host",
    NULL,
};

/* The cpu as a device: there is one. */
int ltC_device_count(void) { return 1; }

/* A table entry added to the struct but not to the list above fails the build. */
_Static_assert(sizeof(ltK_backend) ==
                   sizeof(const char *) +
                       (sizeof ltC_backend_entries / sizeof *ltC_backend_entries - 1) *
                           sizeof(void (*)(void)),
               "ltC_backend_entries must name every entry of struct ltK_backend");

