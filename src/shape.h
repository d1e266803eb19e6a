/*
** shape.h -- what the shape op files share (shape.c: views; shape_copy.c: cat, stack, repeat,
** flip, tril/triu): recording a one-input node and the messages of a failed allocation.
*/
#ifndef LT_SHAPE_H
#define LT_SHAPE_H

#include "core.h"

/* What a node whose backward needs only its input's shape remembers. */
typedef struct { int ndim; int64_t size[LT_MAX_DIMS]; } ltO_shape_extra;

/* Fills e with t's shape. */
void ltO_shape_put(ltO_shape_extra *e, const lt_tensor *t);
/* Records a one-input, one-output node for a view/copy (an output sharing in's storage is
** marked as its view); on failure releases *out. */
int ltO_shape_record1(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *in, lt_tensor **out,
                      size_t extra, int nsaved, lt_node **node);
/* ltO_empty_as whose failure message names op. */
int ltO_shape_new_out(lt_ctx *ctx, const char *op, lt_tensor **out, const lt_tensor *like,
                      lt_dtype dt, int ndim, const int64_t *size);
/* The out-of-memory error of op; returns -1. */
int ltO_shape_oom(lt_ctx *ctx, const char *op);

#endif
