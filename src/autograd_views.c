/*
** autograd_views.c -- in-place writes through views in the graph (PyTorch's CopySlices and
** AsStridedBackward0), and the refresh of a view's history once its base was rewritten.
*/
#include <stdlib.h>

#include "autograd.h"
#include "backend.h"

/* A write through a view v of a base b (PyTorch's CopySlices): the op's own node fn is kept by a
** CopySlices node that becomes b's grad_fn. Its backward takes b's gradient, runs fn on the
** part v covers, puts the gradient of v's old values back in that part and passes the whole to
** b's old history; fn's other inputs get their gradients as usual. v's grad_fn becomes a view
** of b's new history (AsStridedBackward0), and so does, when next used, every other view of b
** (their base_epoch no longer matches). A base is contiguous, so a view's place in it is its
** sizes, strides and offset. */

static void geom_of(ltG_view_geom *g, const lt_tensor *v, const lt_tensor *base) {
  g->ndim = v->ndim;
  memcpy(g->size, v->size, sizeof g->size);
  memcpy(g->stride, v->stride, sizeof g->stride);
  g->offset = v->offset - base->offset;
  g->base_ndim = base->ndim;
  memcpy(g->base_size, base->size, sizeof g->base_size);
}

static void copy_slices_release(lt_node *self) {
  ltG_slices_extra *e = self->extra;
  ltG_node_release(e->fn);
  e->fn = NULL;
}

/* Their backward formulas run ops: autograd_builtin.c has them, the engine finds them. */
const ltG_node_type ltG_as_strided_type = {"AsStridedBackward0", NULL, NULL};
const ltG_node_type ltG_copy_slices_type = {"CopySlices", NULL, copy_slices_release};

void ltG_set_view_base(lt_tensor *view, lt_tensor *in) {
  lt_tensor *b = in->base ? in->base : in;
  lt_release(view->base);
  view->base = lt_retain(b);
  view->base_epoch = b->view_epoch;
}

/* Edge to t's history: its grad_fn, or its AccumulateGrad for a leaf; no node when t needs no
** grad. -1 on out-of-memory. */
static int edge_of(lt_ctx *ctx, lt_tensor *t, ltG_edge *e) {
  e->node = NULL;
  e->input_nr = 0;
  if (!t || !t->requires_grad) return 0;
  if (t->grad_fn) {
    e->node = t->grad_fn;
    e->input_nr = t->output_nr;
    ltG_node_retain(t->grad_fn);
    return 0;
  }
  e->node = ltG_grad_accumulator(ctx, t);
  return e->node ? 0 : -1;
}

/* A new AsStridedBackward0 node for view t over `history` (its base's grad_fn to be), with
** t's retain_grad slot; refcount 1. NULL on out-of-memory. */
static lt_node *view_node(lt_tensor *t, ltG_edge history) {
  lt_node *n = ltG_node_new_raw(&ltG_as_strided_type, 1, 1, sizeof(ltG_view_geom), 0);
  if (!n) return NULL;
  n->refcount = 1;
  geom_of(n->extra, t, t->base);
  n->out_dtype = t->dtype;
  if (t->retains_grad) {
    n->retain = calloc(1, sizeof *n->retain);
    if (!n->retain) {
      ltG_node_release(n);
      return NULL;
    }
  }
  n->next[0] = history;
  if (history.node) ltG_node_retain(history.node);
  return n;
}

/* Makes n (from view_node) t's grad_fn. */
static void install_view_node(lt_tensor *t, lt_node *n) {
  ltG_drop_grad_fn(t);
  if (n->retain) n->retain[0] = t;
  t->grad_fn = n;   /* takes the creation reference */
  t->output_nr = 0;
  t->requires_grad = true;
  t->base_epoch = t->base->view_epoch;
}

/* Makes t's grad_fn an AsStridedBackward0 of its base's current history. */
static int view_of_base(lt_ctx *ctx, lt_tensor *t) {
  ltG_edge history;
  if (edge_of(ctx, t->base, &history)) return -1;
  lt_node *n = view_node(t, history);
  if (history.node) ltG_node_release(history.node);   /* n holds its own reference */
  if (!n) return -1;
  n->seq = ++ctx->seq;
  install_view_node(t, n);
  return 0;
}

int ltG_refresh_view(lt_ctx *ctx, lt_tensor *t) {
  lt_tensor *b = t->base;
  if (!b || t->base_epoch == b->view_epoch || !ctx->grad_enabled) return 0;
  if (!(t->requires_grad || b->requires_grad)) return 0;
  if (!lt_is_contiguous(b))   /* its place in the base cannot be described: refuse, not guess */
    return ltB_fail(ctx, "autograd: a view of a non-contiguous tensor was used after the tensor "
                    "was modified in place; take the view again, or clone() the tensor first");
  return view_of_base(ctx, t) ? ltB_fail(ctx, "autograd: out of memory") : 0;
}

/* The write of node fn into view v becomes part of v's base's history (see above). Every node
** is made before b or v changes, so running out of memory leaves both as they were. */
int ltG_rebase_write(lt_ctx *ctx, lt_node *fn, lt_tensor *v) {
  lt_tensor *b = v->base;
  lt_node *cs = ltG_node_new(ctx, &ltG_copy_slices_type, fn->n_in, 1, sizeof(ltG_slices_extra), 1);
  if (!cs) {
    fn->refcount = 1;
    ltG_node_release(fn);
    return -1;
  }
  ltG_slices_extra *e = cs->extra;
  geom_of(&e->g, v, b);
  e->fn = fn;
  fn->refcount = 1;   /* owned by cs from here on */
  cs->out_dtype = b->dtype;
  cs->refcount = 1;   /* until b holds it */
  for (int i = 1; i < fn->n_in; i++) {
    cs->next[i] = fn->next[i];
    if (cs->next[i].node) ltG_node_retain(cs->next[i].node);
  }
  lt_node *vn = NULL;
  bool keep_slot = b->retains_grad && b->grad_fn;   /* b keeps its retain_grad slot on cs */
  if (edge_of(ctx, b, &cs->next[0]) ||
      (keep_slot && !(cs->retain = calloc(1, sizeof *cs->retain))) ||
      !(vn = view_node(v, (ltG_edge){cs, 0}))) {
    ltG_node_release(cs);
    return -1;
  }
  vn->seq = ++ctx->seq;
  ltG_drop_grad_fn(b);
  if (keep_slot) cs->retain[0] = b;
  b->grad_fn = cs;   /* takes the creation reference */
  b->output_nr = 0;
  b->requires_grad = true;
  b->view_epoch++;
  install_view_node(v, vn);
  return 0;
}
