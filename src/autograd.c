/*
** autograd.c -- graph recording and saved tensors: nodes, AccumulateGrad, gradient hooks,
** ltG_record/ltG_save and the public autograd API. Writes through views (CopySlices) are in
** autograd_views.c, the backward engine in autograd_engine.c; autograd.h is what they share.
**
** Ownership: a non-leaf tensor owns its grad_fn; a node owns the nodes its edges point to and
** the detached aliases it saved. A leaf's AccumulateGrad node owns the leaf, and the leaf points
** back weakly. Nothing points from a node to its outputs except weak retain_grad slots, so the
** graph never forms a cycle and dies with the last tensor that reaches it.
*/
#include <stdlib.h>

#include "autograd.h"
#include "backend.h"

/* ------------------------------------------------------------ hooks */

void ltG_hooks_free(ltG_hook *h) {
  while (h) {
    ltG_hook *n = h->next;
    if (h->free_ud) h->free_ud(h->ud);
    free(h);
    h = n;
  }
}

/* Runs hooks (those matching output_nr, or all when output_nr < 0) on *g, replacing it. */
int ltG_run_hooks(lt_ctx *ctx, ltG_hook *h, int output_nr, lt_tensor **g) {
  for (; h; h = h->next) {
    if (output_nr >= 0 && h->output_nr != output_nr) continue;
    lt_tensor *rep = NULL;
    if (h->fn(ctx, h->ud, *g, &rep)) return -1;
    if (rep) {
      lt_release(*g);
      *g = rep;
    }
  }
  return 0;
}

/* ------------------------------------------------------------ nodes */

void ltG_node_retain(lt_node *n) { n->refcount++; }

void ltG_node_free_saved(lt_node *n) {
  for (int i = 0; i < n->n_saved; i++) {
    lt_release(n->saved[i].t);
    n->saved[i].t = NULL;
  }
}

void ltG_node_release(lt_node *n) {
  /* iterative over long chains so that freeing a deep graph cannot overflow the C stack */
  lt_node *stack_small[64];
  lt_node **stack = stack_small;
  size_t cap = 64, top = 0;
  if (!n || --n->refcount > 0) return;
  stack[top++] = n;
  while (top) {
    lt_node *x = stack[--top];
    if (x->type->release) x->type->release(x);
    ltG_node_free_saved(x);
    ltG_hooks_free(x->pre_hooks);
    free(x->retain);
    for (int i = 0; i < x->n_in; i++) {
      lt_node *c = x->next[i].node;
      if (!c || --c->refcount > 0) continue;
      if (top == cap) {
        lt_node **bigger = malloc(2 * cap * sizeof *bigger);
        if (!bigger) {   /* cannot grow: free this subtree recursively instead */
          c->refcount = 1;
          ltG_node_release(c);
          continue;
        }
        memcpy(bigger, stack, top * sizeof *stack);
        if (stack != stack_small) free(stack);
        stack = bigger;
        cap *= 2;
      }
      stack[top++] = c;
    }
    free(x);
  }
  if (stack != stack_small) free(stack);
}

/* A zeroed node with its arrays; seq 0 (ltG_node_new numbers it). */
lt_node *ltG_node_new_raw(const ltG_node_type *type, int n_in, int n_out,
                          size_t extra_size, int n_saved) {
  size_t sz = sizeof(lt_node) + (size_t)n_in * sizeof(ltG_edge) +
              (size_t)n_saved * sizeof(ltG_saved);
  sz = (sz + 15) & ~(size_t)15;
  lt_node *n = calloc(1, sz + extra_size);
  if (!n) return NULL;
  n->type = type;
  n->n_in = n_in;
  n->n_out = n_out;
  n->next = (ltG_edge *)(n + 1);
  n->n_saved = n_saved;
  n->saved = (ltG_saved *)(n->next + n_in);
  n->extra = extra_size ? (char *)n + sz : NULL;
  return n;
}

lt_node *ltG_node_new(lt_ctx *ctx, const ltG_node_type *type, int n_in, int n_out,
                      size_t extra_size, int n_saved) {
  lt_node *n = ltG_node_new_raw(type, n_in, n_out, extra_size, n_saved);
  if (n) n->seq = ++ctx->seq;
  return n;
}

/* AccumulateGrad: the sink of a leaf. extra holds the leaf (strong). */
typedef struct { lt_tensor *leaf; } acc_extra;

static int accumulate(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  (void)gin;
  lt_tensor *leaf = ((acc_extra *)self->extra)->leaf;
  if (!gout[0]) return 0;
  lt_tensor *g = lt_retain(gout[0]);
  if (ltG_run_hooks(ctx, leaf->hooks, -1, &g)) {
    lt_release(g);
    return -1;
  }
  int rc = 0;
  if (!leaf->grad) {
    lt_tensor *ng;
    /* steal the incoming gradient when nothing else can see it: only the engine's buffer
    ** (and our reference) hold it, and no other view shares its storage */
    long owners = g == gout[0] ? 2 : 1;
    if (g->refcount == owners && g->storage->refcount == 1 && !g->grad_fn &&
        g->dtype == leaf->dtype && lt_is_contiguous(g) && ltB_same_shape(g, leaf)) {
      ng = lt_retain(g);
    } else {
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

static void accumulate_release(lt_node *self) {
  lt_tensor *leaf = ((acc_extra *)self->extra)->leaf;
  if (leaf->grad_acc == self) leaf->grad_acc = NULL;
  lt_release(leaf);
}

static const ltG_node_type accumulate_type = {"AccumulateGrad", accumulate, accumulate_release};

bool ltG_is_accumulator(const lt_node *n) { return n->type == &accumulate_type; }

lt_node *ltG_grad_accumulator(lt_ctx *ctx, lt_tensor *leaf) {
  if (leaf->grad_acc) {
    ltG_node_retain(leaf->grad_acc);
    return leaf->grad_acc;
  }
  lt_node *n = ltG_node_new(ctx, &accumulate_type, 0, 1, sizeof(acc_extra), 0);
  if (!n) return NULL;
  n->refcount = 1;
  ((acc_extra *)n->extra)->leaf = lt_retain(leaf);
  n->out_dtype = leaf->dtype;
  leaf->grad_acc = n;
  return n;
}

bool ltG_needs_grad(const lt_ctx *ctx, int n, lt_tensor *const *inputs) {
  if (!ctx->grad_enabled) return false;
  for (int i = 0; i < n; i++)
    if (inputs[i] && inputs[i]->requires_grad) return true;
  return false;
}

/* The weak retain_grad slot of t's grad_fn, cleared when it points at t. */
static void clear_retain_slot(lt_tensor *t) {
  lt_node *n = t->grad_fn;
  if (n && n->retain && t->output_nr < n->n_out && n->retain[t->output_nr] == t)
    n->retain[t->output_nr] = NULL;
}

void ltG_drop_grad_fn(lt_tensor *t) {
  if (!t->grad_fn) return;
  clear_retain_slot(t);
  ltG_node_release(t->grad_fn);
  t->grad_fn = NULL;
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

int ltG_zero_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  if (!go[0] || !ltG_needs_input_grad(self, 0)) return 0;
  return ltO_full_as(ctx, &gi[0], go[0], go[0]->dtype, go[0]->ndim, go[0]->size, 0.0);
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

int ltG_sum_to(lt_ctx *ctx, lt_tensor **out, lt_tensor *grad, int ndim, const int64_t *size) {
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
