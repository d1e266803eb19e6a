/*
** reduce.h -- what the op files of the reduction families share (reduce.c, search.c,
** reduce_composed.c, softmax.c, scan.c): the dims of a reduction, the record its graph node
** keeps and the views its gradients are written with. Op layer only: nothing here touches
** tensor data.
*/
#ifndef LT_REDUCE_H
#define LT_REDUCE_H

#include "backend.h"

/* What a reduction node remembers about its input. */
typedef struct ltO_red_extra {
  int ndim;
  int64_t size[LT_MAX_DIMS];
  bool mask[LT_MAX_DIMS];
  bool keepdim;
  bool is_std;    /* var/std: which of the two the node is */
  double p;       /* norm's p; var/std's denominator */
  int64_t count;  /* elements per output */
} ltO_red_extra;

/* Marks the reduced dims of a (ndims 0 or dims NULL: all). Dims may be negative. */
int ltO_red_mask(lt_ctx *ctx, const char *op, const lt_tensor *a, int ndims, const int *dims,
                 bool *mask);
/* Output shape of a reduction; returns its rank. */
int ltO_red_shape(const lt_tensor *a, const bool *mask, bool keepdim, int64_t *size);
/* Number of elements folded into each output. */
int64_t ltO_red_count(const lt_tensor *a, const bool *mask);
void ltO_red_extra_fill(ltO_red_extra *e, const lt_tensor *a, const bool *mask, bool keepdim);
/* The reduced dims as a list (for calling lt_reduce again); 0 means all. */
int ltO_red_extra_dims(const ltO_red_extra *e, int *dims);
/* A view of t -- shaped like the op's output -- with the input's rank: reduced dims get size
** 1 (expand=false) or their input size with stride 0 (expand=true). NULL on OOM or shape
** mismatch. */
lt_tensor *ltO_red_view(const lt_tensor *t, const ltO_red_extra *e, bool expand);
/* The reduction behind lt_reduce, lt_max, lt_min and the composed ops; `name` is used in
** messages and `type` (NULL: by op) for the graph node. */
int ltO_reduce_as(lt_ctx *ctx, lt_tensor **out, enum lt_redop op, lt_tensor *a, int ndims,
                  const int *dims, bool keepdim, const char *name, const ltG_node_type *type);
int ltO_red_oom(lt_ctx *ctx, const char *op);

/* What a node of a single-dim op (max along a dim, softmax, cumsum) remembers. */
typedef struct ltO_dim_extra {
  int ndim;
  int64_t size[LT_MAX_DIMS];
  int dim;
  bool keepdim;
  bool log_;      /* softmax: log_softmax */
  int64_t base;   /* max_dim: indices count from base */
} ltO_dim_extra;

#endif
