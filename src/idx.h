/* idx.h -- MNIST-style IDX file reader (idx.c). */
#ifndef LT_IDX_H
#define LT_IDX_H
#include "core.h"
/* Reads an IDX file (plain or gzip) into a new contiguous tensor of dtype dt. */
int ltS_read_idx(lt_ctx *ctx, lt_tensor **out, const char *path, lt_dtype dt);
#endif
