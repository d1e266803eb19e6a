/*
** autograd_builtin.c -- what the graph's own nodes compute in backward (AccumulateGrad,
** AsStridedBackward0, CopySlices), and the helpers every op's backward shares (ltO_sum_to,
** ltO_zero_backward). Written in ops, so they run on any device; the engine finds the
** built-in nodes' formulas through ltO_backward_of, which keeps the graph's files free of ops.
*/
#include <stdlib.h>
#include <string.h>

#include "autograd.h"
#include "backend.h"

/* The incoming gradient g as a tensor the leaf may keep (new ref), or NULL: nothing but the
** engine's buffer and our `owners` references hold g, it is outside any graph, contiguous, of
** the leaf's dtype and shape, and no other tensor sees its storage, except the base that g is
** a view of (a reduction's reshape, a product's transpose) when only g holds that base and g
** covers the whole storage: then the leaf gets a tensor of its own over the storage, and the
** base goes when g does. */
static lt_tensor *stealable(lt_tensor *g, long owners, const lt_tensor *leaf) {
  if (g->refcount != owners || g->grad_fn || g->dtype != leaf->dtype || !lt_is_contiguous(g) ||
      !ltB_same_shape(g, leaf))
    return NULL;
  if (g->storage->refcount == 1) return lt_retain(g);
  const lt_tensor *b = g->base;
  if (!b || b->refcount != 1 || b->grad_fn || b->storage != g->storage ||
      g->storage->refcount != 2 || g->offset != 0 ||
      (size_t)lt_numel(g) * ltB_esize(g->dtype) != g->storage->nbytes)
    return NULL;
  return ltB_alias(g, g->ndim, g->size, g->stride, 0);
}

static int accumulate_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  (void)gin;
  lt_tensor *leaf = ((ltG_acc_extra *)self->extra)->leaf;
  if (!gout[0]) return 0;
  lt_tensor *g = lt_retain(gout[0]);
  if (ltG_run_hooks(ctx, leaf->hooks, -1, &g)) {
    lt_release(g);
    return -1;
  }
  int rc = 0;
  if (!leaf->grad) {
    /* steal the incoming gradient when nothing else can see it (a copy of a 512 x 512
    ** weight's gradient is 2-3% of a small MLP's step) */
    lt_tensor *ng = stealable(g, g == gout[0] ? 2 : 1, leaf);
    if (!ng) {
      lt_tensor *tmp;
      rc = lt_to_dtype(ctx, &tmp, g, leaf->dtype);
      if (!rc) {
        rc = ltO_empty_as(ctx, &ng, leaf, leaf->dtype, leaf->ndim, leaf->size);
        if (!rc) {
          rc = lt_copy_(ctx, ng, tmp);
          if (rc) lt_release(ng);
        }
        lt_release(tmp);
      }
    }
    if (!rc) leaf->grad = ng;
  } else {
    rc = lt_binary_(ctx, LT_ADD, leaf->grad, g);
  }
  lt_release(g);
  return rc;
}


/* AsStridedBackward0: the view's gradient placed in zeros of the base's shape. Expanded dims
** (stride 0) are summed first, so no element of the base is written twice. */
static int as_strided_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                               lt_tensor **gi) {
  const ltG_view_geom *g = self->extra;
  if (!go[0] || !ltG_needs_input_grad(self, 0)) return 0;
  ltG_view_geom once = *g;
  for (int d = 0; d < once.ndim; d++)
    if (once.stride[d] == 0) once.size[d] = 1;
  lt_tensor *src, *z, *slot = NULL;
  if (ltO_sum_to(ctx, &src, go[0], once.ndim, once.size)) return -1;
  int rc = ltO_full_as(ctx, &z, go[0], go[0]->dtype, g->base_ndim, g->base_size, 0.0);
  if (!rc && !(slot = ltG_geom_alias(&once, z)))
    rc = ltB_fail(ctx, "AsStridedBackward0: out of memory");
  if (!rc) ltK_kernels(z)->copy(ctx, slot, src);
  lt_release(slot);
  lt_release(src);
  if (rc) {
    lt_release(z);
    return -1;
  }
  gi[0] = z;
  return 0;
}


static int copy_slices_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                                lt_tensor **gi) {
  ltG_slices_extra *e = self->extra;
  lt_node *fn = e->fn;
  if (self->released)
    return ltB_fail(ctx, "CopySlices: Trying to backward through the graph a second time; "
                    "specify retain_graph=true");
  if (!go[0]) return 0;
  lt_tensor *res = NULL, *slot = NULL, *part = NULL;
  lt_tensor **fgi = calloc((size_t)fn->n_in, sizeof *fgi);
  int rc = fgi ? 0 : ltB_fail(ctx, "CopySlices: out of memory");
  /* res: the base's gradient; part: a copy of the slice the view covers, for fn */
  if (!rc) rc = ltO_empty_as(ctx, &res, go[0], go[0]->dtype, e->g.base_ndim, e->g.base_size);
  if (!rc) {
    ltK_kernels(res)->copy(ctx, res, go[0]);
    if (!(slot = ltG_geom_alias(&e->g, res))) rc = ltB_fail(ctx, "CopySlices: out of memory");
  }
  if (!rc) rc = ltO_empty_as(ctx, &part, res, res->dtype, slot->ndim, slot->size);
  if (!rc) {
    ltK_kernels(part)->copy(ctx, part, slot);
    rc = ltO_backward_of(fn->type)(ctx, fn, &part, fgi);
  }
  if (!rc) {
    /* the view's old values: their gradient replaces the slice (none: zero) */
    if (fgi[0] && !ltB_same_shape(fgi[0], slot))
      rc = ltB_fail(ctx, "CopySlices: %s returned a gradient of another shape than the view",
                    fn->type->name);
    else if (fgi[0])
      ltK_kernels(slot)->copy(ctx, slot, fgi[0]);
    else
      ltK_kernels(slot)->fill(ctx, slot, 0.0);
  }
  if (!rc) {
    if (ltG_needs_input_grad(self, 0)) {
      gi[0] = res;
      res = NULL;
    }
    for (int i = 1; i < fn->n_in; i++) {
      gi[i] = fgi[i];
      fgi[i] = NULL;
    }
  }
  if (fgi) {
    for (int i = 0; i < fn->n_in; i++) lt_release(fgi[i]);
    free(fgi);
  }
  lt_release(part);
  lt_release(slot);
  lt_release(res);
  return rc;
}

int ltO_zero_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  if (!go[0] || !ltG_needs_input_grad(self, 0)) return 0;
  return ltO_full_as(ctx, &gi[0], go[0], go[0]->dtype, go[0]->ndim, go[0]->size, 0.0);
}


int ltO_sum_to(lt_ctx *ctx, lt_tensor **out, lt_tensor *grad, int ndim, const int64_t *size) {
  if (grad->ndim == ndim) {
    bool same = true;
    for (int i = 0; i < ndim && same; i++) same = grad->size[i] == size[i];
    if (same) {
      *out = lt_retain(grad);
      return 0;
    }
  }
  int dims[LT_MAX_DIMS], nd = 0, lead = grad->ndim - ndim;
  for (int i = 0; i < grad->ndim; i++)
    if (i < lead || (size[i - lead] == 1 && grad->size[i] != 1)) dims[nd++] = i;
  lt_tensor *s;
  if (nd == 0) {
    s = lt_retain(grad);
  } else if (lt_reduce(ctx, &s, LT_RSUM, grad, nd, dims, true)) {
    return -1;
  }
  int rc = lt_reshape(ctx, out, s, ndim, size);
  lt_release(s);
  return rc;
}


ltG_backward_fn ltO_backward_of(const ltG_node_type *type) {
  if (type->backward) return type->backward;
  if (type == &ltG_accumulate_type) return accumulate_backward;
  if (type == &ltG_as_strided_type) return as_strided_backward;
  if (type == &ltG_copy_slices_type) return copy_slices_backward;
  return NULL;
}
