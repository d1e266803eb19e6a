/*
** autograd.c -- recording ops in the graph and saved tensors (ltG_record, ltG_save), and the
** public autograd API. It runs no op: the node lifetime is in tensor.c, writes through views
** (CopySlices) in autograd_views.c, the graph's own backward formulas in autograd_builtin.c and
** the backward engine in autograd_engine.c; autograd.h is what they share.
*/
#include <stdlib.h>

#include "autograd.h"
#include "backend.h"


bool ltG_needs_grad(const lt_ctx *ctx, int n, lt_tensor *const *inputs) {
  if (!ctx->grad_enabled) return false;
  for (int i = 0; i < n; i++)
    if (inputs[i] && inputs[i]->requires_grad) return true;
  return false;
}

int ltG_record(lt_ctx *ctx, const ltG_node_type *type, int n_in, lt_tensor *const *inputs,
               int n_out, lt_tensor *const *outputs, size_t extra_size, int n_saved,
               lt_node **node) {
  *node = NULL;
  if (!ctx->grad_enabled) return 0;
  for (int i = 0; i < n_in; i++)   /* a view whose base's history changed since it was made */
    if (inputs[i] && ltG_refresh_view(ctx, inputs[i])) return -1;
  if (!ltG_needs_grad(ctx, n_in, inputs)) return 0;
  /* a view op's own output is marked as a view only after it is recorded, so an output that
  ** is already a view here is being written in place: the write goes into its base's history */
  lt_tensor *written_view = NULL;
  for (int i = 0; i < n_out; i++) {
    if (!outputs[i]->is_view) continue;
    if (n_out == 1 && outputs[i]->base && lt_is_contiguous(outputs[i]->base))
      written_view = outputs[i];
    else if (!outputs[i]->requires_grad)
      return ltB_fail_view_write(ctx, type->name);
  }
  lt_node *n = ltG_node_new(ctx, type, n_in, n_out, extra_size, n_saved);
  if (!n) return ltB_fail(ctx, "%s: out of memory recording the graph", type->name);
  for (int i = 0; i < n_in; i++) {
    lt_tensor *t = inputs[i];
    if (!t || !t->requires_grad) continue;
    if (t->grad_fn) {
      n->next[i].node = t->grad_fn;
      n->next[i].input_nr = t->output_nr;
      ltG_node_retain(t->grad_fn);
    } else {
      n->next[i].node = ltG_grad_accumulator(ctx, t);
      if (!n->next[i].node) {
        n->refcount = 1;
        ltG_node_release(n);
        return ltB_fail(ctx, "%s: out of memory recording the graph", type->name);
      }
    }
  }
  n->out_dtype = outputs[0]->dtype;
  if (written_view) {
    if (ltG_rebase_write(ctx, n, written_view))
      return ltB_fail(ctx, "%s: out of memory recording the graph", type->name);
    *node = n;   /* the caller fills in fn's data; CopySlices owns it */
    return 0;
  }
  /* an in-place op on a tensor with retain_grad: the new node keeps its slot */
  for (int i = 0; i < n_out && !n->retain; i++) {
    if (outputs[i]->retains_grad && outputs[i]->grad_fn) {
      n->retain = calloc((size_t)n_out, sizeof *n->retain);
      if (!n->retain) {
        n->refcount = 1;
        ltG_node_release(n);
        return ltB_fail(ctx, "%s: out of memory recording the graph", type->name);
      }
    }
  }
  for (int i = 0; i < n_out; i++) {
    lt_tensor *o = outputs[i];
    ltG_node_retain(n);
    if (o->grad_fn) {   /* in-place op: the new node takes over */
      if (o->retains_grad) n->retain[i] = o;
      ltG_drop_grad_fn(o);
    }
    o->grad_fn = n;
    o->output_nr = i;
    o->requires_grad = true;
    o->view_epoch++;   /* views of o made before now must look at its new history */
  }
  /* the outputs own the node now; the creation reference above is not kept */
  *node = n;
  return 0;
}

int ltG_record_overwrite(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *t) {
  if (!ctx->grad_enabled || !t->requires_grad) return 0;
  lt_node *n;
  return ltG_record(ctx, type, 1, &t, 1, &t, 0, 0, &n);
}

int ltG_save(lt_node *node, int i, const lt_tensor *t, bool is_output) {
  ltG_saved *s = &node->saved[i];
  lt_release(s->t);
  s->t = NULL;
  if (!t) return 0;
  s->t = ltB_alias(t, t->ndim, t->size, t->stride, t->offset);
  if (!s->t) return -1;
  s->version = t->storage->version;
  s->was_output = is_output;
  return 0;
}

int ltG_saved_get(lt_ctx *ctx, lt_node *node, int i, lt_tensor **t) {
  if (node->released)
    return ltB_fail(ctx, "%s: Trying to backward through the graph a second time (or directly "
                    "access saved tensors after they have already been freed). Saved "
                    "intermediate values of the graph are freed when you call backward() or "
                    "autograd.grad(). Specify retain_graph=true if you need to backward through "
                    "the graph a second time or if you need to access saved tensors after "
                    "calling backward.", node->type->name);
  ltG_saved *s = &node->saved[i];
  if (s->t && s->t->storage->version != s->version) {
    char buf[256];
    return ltB_fail(ctx, "one of the variables needed for gradient computation has been "
                    "modified by an inplace operation: [%s %s], which is %s of %s, is at "
                    "version %u; expected version %u instead. Hint: the operation that modified "
                    "it ran after this value was saved for %s.",
                    lt_dtype_name(s->t->dtype), LT_SHAPE(s->t, buf),
                    s->was_output ? "output 0" : "an input", node->type->name,
                    s->t->storage->version, s->version, node->type->name);
  }
  *t = s->t;
  return 0;
}

/* ------------------------------------------------------------ public autograd API */

bool lt_requires_grad(const lt_tensor *t) { return t->requires_grad; }
bool lt_is_leaf(const lt_tensor *t) { return t->grad_fn == NULL; }
lt_tensor *lt_grad(const lt_tensor *t) { return t->grad; }

const char *lt_grad_fn_name(const lt_tensor *t) {
  return t->grad_fn ? t->grad_fn->type->name : NULL;
}

int lt_set_requires_grad(lt_ctx *ctx, lt_tensor *t, bool on) {
  if (t->grad_fn) {
    if (on) return 0;
    return ltB_fail(ctx, "requires_grad_: you can only change requires_grad flags of leaf "
                    "variables. If you want to use a computed variable in a subgraph that "
                    "doesn't require differentiation use var_no_grad = var:detach().");
  }
  if (on && !lt_dtype_is_float(t->dtype))
    return ltB_fail(ctx, "requires_grad_: only Tensors of floating point dtype can require "
                    "gradients (got %s)", lt_dtype_name(t->dtype));
  t->requires_grad = on;
  return 0;
}

int lt_set_grad(lt_ctx *ctx, lt_tensor *t, lt_tensor *g) {
  if (g && !ltB_same_shape(g, t)) {
    char a[256], b[256];
    return ltB_fail(ctx, "grad: assigned grad has shape %s but the tensor has shape %s",
                    LT_SHAPE(g, a), LT_SHAPE(t, b));
  }
  if (g && g == t)   /* t would own itself and never be freed */
    return ltB_fail(ctx, "grad: can't assign a tensor as its own grad");
  if (g && g->dtype != t->dtype)
    return ltB_fail(ctx, "grad: assigned grad has dtype %s but the tensor has dtype %s",
                    lt_dtype_name(g->dtype), lt_dtype_name(t->dtype));
  lt_retain(g);
  lt_release(t->grad);
  t->grad = g;
  return 0;
}

int ltG_add_hook(lt_ctx *ctx, lt_tensor *t, ltG_grad_hook_fn fn, void *ud,
                 void (*free_ud)(void *)) {
  if (ltG_refresh_view(ctx, t)) return -1;   /* on the view's current node, not a dead one */
  if (!t->requires_grad)
    return ltB_fail(ctx, "register_hook: cannot register a hook on a tensor that doesn't require "
                    "gradient");
  ltG_hook *h = calloc(1, sizeof *h);
  if (!h) return ltB_fail(ctx, "register_hook: out of memory");
  h->fn = fn;
  h->ud = ud;
  h->free_ud = free_ud;
  h->output_nr = t->output_nr;
  ltG_hook **list = t->grad_fn ? &t->grad_fn->pre_hooks : &t->hooks;
  while (*list) list = &(*list)->next;   /* hooks run in registration order */
  *list = h;
  return 0;
}

int ltG_retain_grad(lt_ctx *ctx, lt_tensor *t) {
  if (ltG_refresh_view(ctx, t)) return -1;
  if (!t->requires_grad)
    return ltB_fail(ctx, "retain_grad: can't retain_grad on Tensor that has requires_grad=false");
  if (!t->grad_fn) return 0;   /* leaves keep their grad anyway */
  lt_node *n = t->grad_fn;
  if (!n->retain) {
    n->retain = calloc((size_t)n->n_out, sizeof *n->retain);
    if (!n->retain) return ltB_fail(ctx, "retain_grad: out of memory");
  }
  n->retain[t->output_nr] = t;
  t->retains_grad = true;
  return 0;
}
