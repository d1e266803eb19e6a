/*
** autograd.h -- what the autograd files share (tensor.c: the nodes' lifetime; autograd.c:
** recording, saved tensors; autograd_views.c: writes through views; autograd_builtin.c: the
** graph's own backward formulas; autograd_engine.c: the backward pass). Internal to them: the
** op layer records through core.h's ltG_record/ltG_save.
*/
#ifndef LT_AUTOGRAD_H
#define LT_AUTOGRAD_H

#include "core.h"

/* Runs hooks (those matching output_nr, or all when output_nr < 0) on *g, replacing it. */
int ltG_run_hooks(lt_ctx *ctx, ltG_hook *h, int output_nr, lt_tensor **g);
/* Releases the node's saved tensors (a backward pass without retain_graph is done with them). */
void ltG_node_free_saved(lt_node *n);
/* A zeroed node with its arrays, refcount 0 and seq 0 (ltG_node_new numbers it); NULL on OOM. */
lt_node *ltG_node_new_raw(const ltG_node_type *type, int n_in, int n_out,
                          size_t extra_size, int n_saved);
/* The same, numbered with the context's next seq (newer nodes run first in backward). */
lt_node *ltG_node_new(lt_ctx *ctx, const ltG_node_type *type, int n_in, int n_out,
                      size_t extra_size, int n_saved);
/* The leaf's AccumulateGrad node, made on first use; a new reference, NULL on OOM. */
lt_node *ltG_grad_accumulator(lt_ctx *ctx, lt_tensor *leaf);
/* Whether n is an AccumulateGrad node (autograd.grad captures their input, never runs them). */
bool ltG_is_accumulator(const lt_node *n);
/* Makes the write of the just-made node fn (refcount 0) into view v part of v's base's history
** (CopySlices), taking fn; -1 on OOM, with fn released and v and its base unchanged. */
int ltG_rebase_write(lt_ctx *ctx, lt_node *fn, lt_tensor *v);

/* AccumulateGrad's extra: the leaf it owns. */
typedef struct { lt_tensor *leaf; } ltG_acc_extra;

/* Where a view lies in its contiguous base: sizes, strides, offset, and the base's shape. */
typedef struct {
  int ndim, base_ndim;
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS], offset;
  int64_t base_size[LT_MAX_DIMS];
} ltG_view_geom;

/* CopySlices' extra: the view's place and the in-place op's node, which it owns. */
typedef struct {
  ltG_view_geom g;
  lt_node *fn;   /* the in-place op's node (owned) */
} ltG_slices_extra;

/* The part of contiguous t (of the base's shape) that the view covers; NULL on OOM. */
static inline lt_tensor *ltG_geom_alias(const ltG_view_geom *g, const lt_tensor *t) {
  return ltB_alias(t, g->ndim, g->size, g->stride, t->offset + g->offset);
}

/* The graph's own node types; their backward is NULL here and comes from ltO_backward_of. */
extern const ltG_node_type ltG_accumulate_type, ltG_as_strided_type, ltG_copy_slices_type;
/* The backward formula of a node type: its own, or the built-in one of the three above. */
ltG_backward_fn ltO_backward_of(const ltG_node_type *type);

/* For one-input nodes whose gradient fills a part of their input (narrow, select): adds that
** part into acc, the input's gradient so far (the engine's own: contiguous, of the input's
** shape and the gradient's dtype, shared with nothing), instead of a fresh tensor that the
** engine would add. */
typedef int (*ltG_backward_into_fn)(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                                    lt_tensor *acc);
/* The type's accumulating backward, or NULL (shape.c). */
ltG_backward_into_fn ltO_backward_into_of(const ltG_node_type *type);

#endif
