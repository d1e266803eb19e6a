/*
** autograd.c -- graph recording, saved tensors and the backward engine.
**
** Ownership: a non-leaf tensor owns its grad_fn; a node owns the nodes its edges point to and
** the detached aliases it saved. A leaf's AccumulateGrad node owns the leaf, and the leaf points
** back weakly. Nothing points from a node to its outputs except weak retain_grad slots, so the
** graph never forms a cycle and dies with the last tensor that reaches it.
*/
#include <stdlib.h>

#include "core.h"

/* ------------------------------------------------------------ hooks */

void lt_hooks_free(lt_hook *h) {
  while (h) {
    lt_hook *n = h->next;
    if (h->free_ud) h->free_ud(h->ud);
    free(h);
    h = n;
  }
}

/* Runs hooks (those matching output_nr, or all when output_nr < 0) on *g, replacing it. */
static int run_hooks(lt_ctx *ctx, lt_hook *h, int output_nr, lt_tensor **g) {
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

void lt_node_retain(lt_node *n) { n->refcount++; }

static void node_free_saved(lt_node *n) {
  for (int i = 0; i < n->n_saved; i++) {
    lt_release(n->saved[i].t);
    n->saved[i].t = NULL;
  }
}

void lt_node_release(lt_node *n) {
  /* iterative over long chains so that freeing a deep graph cannot overflow the C stack */
  lt_node *stack_small[64];
  lt_node **stack = stack_small;
  size_t cap = 64, top = 0;
  if (!n || --n->refcount > 0) return;
  stack[top++] = n;
  while (top) {
    lt_node *x = stack[--top];
    if (x->type->release) x->type->release(x);
    node_free_saved(x);
    lt_hooks_free(x->pre_hooks);
    free(x->retain);
    for (int i = 0; i < x->n_in; i++) {
      lt_node *c = x->next[i].node;
      if (!c || --c->refcount > 0) continue;
      if (top == cap) {
        lt_node **bigger = malloc(2 * cap * sizeof *bigger);
        if (!bigger) {   /* cannot grow: free this subtree recursively instead */
          c->refcount = 1;
          lt_node_release(c);
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

/* A zeroed node with its arrays; seq 0 (node_new numbers it). */
static lt_node *node_new_raw(const lt_node_type *type, int n_in, int n_out, size_t extra_size,
                             int n_saved) {
  size_t sz = sizeof(lt_node) + (size_t)n_in * sizeof(lt_edge) +
              (size_t)n_saved * sizeof(lt_saved);
  sz = (sz + 15) & ~(size_t)15;
  lt_node *n = calloc(1, sz + extra_size);
  if (!n) return NULL;
  n->type = type;
  n->n_in = n_in;
  n->n_out = n_out;
  n->next = (lt_edge *)(n + 1);
  n->n_saved = n_saved;
  n->saved = (lt_saved *)(n->next + n_in);
  n->extra = extra_size ? (char *)n + sz : NULL;
  return n;
}

static lt_node *node_new(lt_ctx *ctx, const lt_node_type *type, int n_in, int n_out,
                         size_t extra_size, int n_saved) {
  lt_node *n = node_new_raw(type, n_in, n_out, extra_size, n_saved);
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
  if (run_hooks(ctx, leaf->hooks, -1, &g)) {
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
        g->dtype == leaf->dtype && lt_is_contiguous(g) && lt_same_shape(g, leaf)) {
      ng = lt_retain(g);
    } else {
      lt_tensor *tmp;
      rc = lt_to_dtype(ctx, &tmp, g, leaf->dtype);
      if (!rc) {
        rc = lt_empty_as(ctx, &ng, leaf, leaf->dtype, leaf->ndim, leaf->size);
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

static const lt_node_type accumulate_type = {"AccumulateGrad", accumulate, accumulate_release};

static lt_node *grad_accumulator(lt_ctx *ctx, lt_tensor *leaf) {
  if (leaf->grad_acc) {
    lt_node_retain(leaf->grad_acc);
    return leaf->grad_acc;
  }
  lt_node *n = node_new(ctx, &accumulate_type, 0, 1, sizeof(acc_extra), 0);
  if (!n) return NULL;
  n->refcount = 1;
  ((acc_extra *)n->extra)->leaf = lt_retain(leaf);
  n->out_dtype = leaf->dtype;
  leaf->grad_acc = n;
  return n;
}

bool lt_needs_grad(const lt_ctx *ctx, int n, lt_tensor *const *inputs) {
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

void lt_drop_grad_fn(lt_tensor *t) {
  if (!t->grad_fn) return;
  clear_retain_slot(t);
  lt_node_release(t->grad_fn);
  t->grad_fn = NULL;
}

/* ------------------------------------------------------------ views written in place
**
** A write through a view v of a base b (PyTorch's CopySlices): the op's own node fn is kept by a
** CopySlices node that becomes b's grad_fn. Its backward takes b's gradient, runs fn on the
** part v covers, puts the gradient of v's old values back in that part and passes the whole to
** b's old history; fn's other inputs get their gradients as usual. v's grad_fn becomes a view
** of b's new history (AsStridedBackward0), and so does, when next used, every other view of b
** (their base_epoch no longer matches). A base is contiguous, so a view's place in it is its
** sizes, strides and offset. */

typedef struct {
  int ndim, base_ndim;
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS], offset;
  int64_t base_size[LT_MAX_DIMS];
} view_geom;

static void geom_of(view_geom *g, const lt_tensor *v, const lt_tensor *base) {
  g->ndim = v->ndim;
  memcpy(g->size, v->size, sizeof g->size);
  memcpy(g->stride, v->stride, sizeof g->stride);
  g->offset = v->offset - base->offset;
  g->base_ndim = base->ndim;
  memcpy(g->base_size, base->size, sizeof g->base_size);
}

/* The part of contiguous t (of the base's shape) that the view covers. */
static lt_tensor *geom_alias(const view_geom *g, const lt_tensor *t) {
  return lt_alias(t, g->ndim, g->size, g->stride, t->offset + g->offset);
}

/* AsStridedBackward0: the view's gradient placed in zeros of the base's shape. Expanded dims
** (stride 0) are summed first, so no element of the base is written twice. */
static int as_strided_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                               lt_tensor **gi) {
  const view_geom *g = self->extra;
  if (!go[0] || !lt_needs_input_grad(self, 0)) return 0;
  view_geom once = *g;
  for (int d = 0; d < once.ndim; d++)
    if (once.stride[d] == 0) once.size[d] = 1;
  lt_tensor *src, *z, *slot = NULL;
  if (lt_sum_to(ctx, &src, go[0], once.ndim, once.size)) return -1;
  int rc = lt_full_as(ctx, &z, go[0], go[0]->dtype, g->base_ndim, g->base_size, 0.0);
  if (!rc && !(slot = geom_alias(&once, z))) rc = lt_fail(ctx, "AsStridedBackward0: out of memory");
  if (!rc) lt_kernels(z)->copy(ctx, slot, src);
  lt_release(slot);
  lt_release(src);
  if (rc) {
    lt_release(z);
    return -1;
  }
  gi[0] = z;
  return 0;
}

static const lt_node_type as_strided_type = {"AsStridedBackward0", as_strided_backward, NULL};

typedef struct {
  view_geom g;
  lt_node *fn;   /* the in-place op's node (owned) */
} slices_extra;

static int copy_slices_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go,
                                lt_tensor **gi) {
  slices_extra *e = self->extra;
  lt_node *fn = e->fn;
  if (self->released)
    return lt_fail(ctx, "CopySlices: Trying to backward through the graph a second time; "
                   "specify retain_graph=true");
  if (!go[0]) return 0;
  lt_tensor *res = NULL, *slot = NULL, *part = NULL;
  lt_tensor **fgi = calloc((size_t)fn->n_in, sizeof *fgi);
  int rc = fgi ? 0 : lt_fail(ctx, "CopySlices: out of memory");
  /* res: the base's gradient; part: a copy of the slice the view covers, for fn */
  if (!rc) rc = lt_empty_as(ctx, &res, go[0], go[0]->dtype, e->g.base_ndim, e->g.base_size);
  if (!rc) {
    lt_kernels(res)->copy(ctx, res, go[0]);
    if (!(slot = geom_alias(&e->g, res))) rc = lt_fail(ctx, "CopySlices: out of memory");
  }
  if (!rc) rc = lt_empty_as(ctx, &part, res, res->dtype, slot->ndim, slot->size);
  if (!rc) {
    lt_kernels(part)->copy(ctx, part, slot);
    rc = fn->type->backward(ctx, fn, &part, fgi);
  }
  if (!rc) {
    /* the view's old values: their gradient replaces the slice (none: zero) */
    if (fgi[0] && !lt_same_shape(fgi[0], slot))
      rc = lt_fail(ctx, "CopySlices: %s returned a gradient of another shape than the view",
                   fn->type->name);
    else if (fgi[0])
      lt_kernels(slot)->copy(ctx, slot, fgi[0]);
    else
      lt_kernels(slot)->fill(ctx, slot, 0.0);
  }
  if (!rc) {
    if (lt_needs_input_grad(self, 0)) {
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

static void copy_slices_release(lt_node *self) {
  slices_extra *e = self->extra;
  lt_node_release(e->fn);
  e->fn = NULL;
}

static const lt_node_type copy_slices_type = {"CopySlices", copy_slices_backward,
                                              copy_slices_release};

void lt_set_view_base(lt_tensor *view, lt_tensor *in) {
  lt_tensor *b = in->base ? in->base : in;
  lt_release(view->base);
  view->base = lt_retain(b);
  view->base_epoch = b->view_epoch;
}

/* Edge to t's history: its grad_fn, or its AccumulateGrad for a leaf; no node when t needs no
** grad. -1 on out-of-memory. */
static int edge_of(lt_ctx *ctx, lt_tensor *t, lt_edge *e) {
  e->node = NULL;
  e->input_nr = 0;
  if (!t || !t->requires_grad) return 0;
  if (t->grad_fn) {
    e->node = t->grad_fn;
    e->input_nr = t->output_nr;
    lt_node_retain(t->grad_fn);
    return 0;
  }
  e->node = grad_accumulator(ctx, t);
  return e->node ? 0 : -1;
}

/* A new AsStridedBackward0 node for view t over `history` (its base's grad_fn to be), with
** t's retain_grad slot; refcount 1. NULL on out-of-memory. */
static lt_node *view_node(lt_tensor *t, lt_edge history) {
  lt_node *n = node_new_raw(&as_strided_type, 1, 1, sizeof(view_geom), 0);
  if (!n) return NULL;
  n->refcount = 1;
  geom_of(n->extra, t, t->base);
  n->out_dtype = t->dtype;
  if (t->retains_grad) {
    n->retain = calloc(1, sizeof *n->retain);
    if (!n->retain) {
      lt_node_release(n);
      return NULL;
    }
  }
  n->next[0] = history;
  if (history.node) lt_node_retain(history.node);
  return n;
}

/* Makes n (from view_node) t's grad_fn. */
static void install_view_node(lt_tensor *t, lt_node *n) {
  lt_drop_grad_fn(t);
  if (n->retain) n->retain[0] = t;
  t->grad_fn = n;   /* takes the creation reference */
  t->output_nr = 0;
  t->requires_grad = true;
  t->base_epoch = t->base->view_epoch;
}

/* Makes t's grad_fn an AsStridedBackward0 of its base's current history. */
static int view_of_base(lt_ctx *ctx, lt_tensor *t) {
  lt_edge history;
  if (edge_of(ctx, t->base, &history)) return -1;
  lt_node *n = view_node(t, history);
  if (history.node) lt_node_release(history.node);   /* n holds its own reference */
  if (!n) return -1;
  n->seq = ++ctx->seq;
  install_view_node(t, n);
  return 0;
}

int lt_refresh_view(lt_ctx *ctx, lt_tensor *t) {
  lt_tensor *b = t->base;
  if (!b || t->base_epoch == b->view_epoch || !ctx->grad_enabled) return 0;
  if (!(t->requires_grad || b->requires_grad)) return 0;
  if (!lt_is_contiguous(b))   /* its place in the base cannot be described: refuse, not guess */
    return lt_fail(ctx, "autograd: a view of a non-contiguous tensor was used after the tensor "
                   "was modified in place; take the view again, or clone() the tensor first");
  return view_of_base(ctx, t) ? lt_fail(ctx, "autograd: out of memory") : 0;
}

/* The write of node fn into view v becomes part of v's base's history (see above). Every node
** is made before b or v changes, so running out of memory leaves both as they were. */
static int rebase_write(lt_ctx *ctx, lt_node *fn, lt_tensor *v) {
  lt_tensor *b = v->base;
  lt_node *cs = node_new(ctx, &copy_slices_type, fn->n_in, 1, sizeof(slices_extra), 1);
  if (!cs) {
    fn->refcount = 1;
    lt_node_release(fn);
    return -1;
  }
  slices_extra *e = cs->extra;
  geom_of(&e->g, v, b);
  e->fn = fn;
  fn->refcount = 1;   /* owned by cs from here on */
  cs->out_dtype = b->dtype;
  cs->refcount = 1;   /* until b holds it */
  for (int i = 1; i < fn->n_in; i++) {
    cs->next[i] = fn->next[i];
    if (cs->next[i].node) lt_node_retain(cs->next[i].node);
  }
  lt_node *vn = NULL;
  bool keep_slot = b->retains_grad && b->grad_fn;   /* b keeps its retain_grad slot on cs */
  if (edge_of(ctx, b, &cs->next[0]) ||
      (keep_slot && !(cs->retain = calloc(1, sizeof *cs->retain))) ||
      !(vn = view_node(v, (lt_edge){cs, 0}))) {
    lt_node_release(cs);
    return -1;
  }
  vn->seq = ++ctx->seq;
  lt_drop_grad_fn(b);
  if (keep_slot) cs->retain[0] = b;
  b->grad_fn = cs;   /* takes the creation reference */
  b->output_nr = 0;
  b->requires_grad = true;
  b->view_epoch++;
  install_view_node(v, vn);
  return 0;
}

int lt_record(lt_ctx *ctx, const lt_node_type *type, int n_in, lt_tensor *const *inputs,
              int n_out, lt_tensor *const *outputs, size_t extra_size, int n_saved,
              lt_node **node) {
  *node = NULL;
  if (!ctx->grad_enabled) return 0;
  for (int i = 0; i < n_in; i++)   /* a view whose base's history changed since it was made */
    if (inputs[i] && lt_refresh_view(ctx, inputs[i])) return -1;
  if (!lt_needs_grad(ctx, n_in, inputs)) return 0;
  /* a view op's own output is marked as a view only after it is recorded, so an output that
  ** is already a view here is being written in place: the write goes into its base's history */
  lt_tensor *written_view = NULL;
  for (int i = 0; i < n_out; i++) {
    if (!outputs[i]->is_view) continue;
    if (n_out == 1 && outputs[i]->base && lt_is_contiguous(outputs[i]->base))
      written_view = outputs[i];
    else if (!outputs[i]->requires_grad)
      return lt_fail_view_write(ctx, type->name);
  }
  lt_node *n = node_new(ctx, type, n_in, n_out, extra_size, n_saved);
  if (!n) return lt_fail(ctx, "%s: out of memory recording the graph", type->name);
  for (int i = 0; i < n_in; i++) {
    lt_tensor *t = inputs[i];
    if (!t || !t->requires_grad) continue;
    if (t->grad_fn) {
      n->next[i].node = t->grad_fn;
      n->next[i].input_nr = t->output_nr;
      lt_node_retain(t->grad_fn);
    } else {
      n->next[i].node = grad_accumulator(ctx, t);
      if (!n->next[i].node) {
        n->refcount = 1;
        lt_node_release(n);
        return lt_fail(ctx, "%s: out of memory recording the graph", type->name);
      }
    }
  }
  n->out_dtype = outputs[0]->dtype;
  if (written_view) {
    if (rebase_write(ctx, n, written_view))
      return lt_fail(ctx, "%s: out of memory recording the graph", type->name);
    *node = n;   /* the caller fills in fn's data; CopySlices owns it */
    return 0;
  }
  /* an in-place op on a tensor with retain_grad: the new node keeps its slot */
  for (int i = 0; i < n_out && !n->retain; i++) {
    if (outputs[i]->retains_grad && outputs[i]->grad_fn) {
      n->retain = calloc((size_t)n_out, sizeof *n->retain);
      if (!n->retain) {
        n->refcount = 1;
        lt_node_release(n);
        return lt_fail(ctx, "%s: out of memory recording the graph", type->name);
      }
    }
  }
  for (int i = 0; i < n_out; i++) {
    lt_tensor *o = outputs[i];
    lt_node_retain(n);
    if (o->grad_fn) {   /* in-place op: the new node takes over */
      if (o->retains_grad) n->retain[i] = o;
      lt_drop_grad_fn(o);
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

int lt_zero_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  if (!go[0] || !lt_needs_input_grad(self, 0)) return 0;
  return lt_full_as(ctx, &gi[0], go[0], go[0]->dtype, go[0]->ndim, go[0]->size, 0.0);
}

int lt_record_overwrite(lt_ctx *ctx, const lt_node_type *type, lt_tensor *t) {
  if (!ctx->grad_enabled || !t->requires_grad) return 0;
  lt_node *n;
  return lt_record(ctx, type, 1, &t, 1, &t, 0, 0, &n);
}

int lt_save(lt_node *node, int i, const lt_tensor *t, bool is_output) {
  lt_saved *s = &node->saved[i];
  lt_release(s->t);
  s->t = NULL;
  if (!t) return 0;
  s->t = lt_alias(t, t->ndim, t->size, t->stride, t->offset);
  if (!s->t) return -1;
  s->version = t->storage->version;
  s->was_output = is_output;
  return 0;
}

int lt_saved_get(lt_ctx *ctx, lt_node *node, int i, lt_tensor **t) {
  if (node->released)
    return lt_fail(ctx, "%s: Trying to backward through the graph a second time (or directly "
                   "access saved tensors after they have already been freed). Saved "
                   "intermediate values of the graph are freed when you call backward() or "
                   "autograd.grad(). Specify retain_graph=true if you need to backward through "
                   "the graph a second time or if you need to access saved tensors after "
                   "calling backward.", node->type->name);
  lt_saved *s = &node->saved[i];
  if (s->t && s->t->storage->version != s->version) {
    char buf[256];
    return lt_fail(ctx, "one of the variables needed for gradient computation has been "
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

int lt_sum_to(lt_ctx *ctx, lt_tensor **out, lt_tensor *grad, int ndim, const int64_t *size) {
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
    return lt_fail(ctx, "requires_grad_: you can only change requires_grad flags of leaf "
                   "variables. If you want to use a computed variable in a subgraph that "
                   "doesn't require differentiation use var_no_grad = var:detach().");
  }
  if (on && !lt_dtype_is_float(t->dtype))
    return lt_fail(ctx, "requires_grad_: only Tensors of floating point dtype can require "
                   "gradients (got %s)", lt_dtype_name(t->dtype));
  t->requires_grad = on;
  return 0;
}

int lt_set_grad(lt_ctx *ctx, lt_tensor *t, lt_tensor *g) {
  if (g && !lt_same_shape(g, t)) {
    char a[256], b[256];
    return lt_fail(ctx, "grad: assigned grad has shape %s but the tensor has shape %s",
                   LT_SHAPE(g, a), LT_SHAPE(t, b));
  }
  if (g && g == t)   /* t would own itself and never be freed */
    return lt_fail(ctx, "grad: can't assign a tensor as its own grad");
  if (g && g->dtype != t->dtype)
    return lt_fail(ctx, "grad: assigned grad has dtype %s but the tensor has dtype %s",
                   lt_dtype_name(g->dtype), lt_dtype_name(t->dtype));
  lt_retain(g);
  lt_release(t->grad);
  t->grad = g;
  return 0;
}

int lt_add_hook(lt_ctx *ctx, lt_tensor *t, lt_grad_hook_fn fn, void *ud,
                void (*free_ud)(void *)) {
  if (lt_refresh_view(ctx, t)) return -1;   /* on the view's current node, not a dead one */
  if (!t->requires_grad)
    return lt_fail(ctx, "register_hook: cannot register a hook on a tensor that doesn't require "
                   "gradient");
  lt_hook *h = calloc(1, sizeof *h);
  if (!h) return lt_fail(ctx, "register_hook: out of memory");
  h->fn = fn;
  h->ud = ud;
  h->free_ud = free_ud;
  h->output_nr = t->output_nr;
  lt_hook **list = t->grad_fn ? &t->grad_fn->pre_hooks : &t->hooks;
  while (*list) list = &(*list)->next;   /* hooks run in registration order */
  *list = h;
  return 0;
}

int lt_retain_grad(lt_ctx *ctx, lt_tensor *t) {
  if (lt_refresh_view(ctx, t)) return -1;
  if (!t->requires_grad)
    return lt_fail(ctx, "retain_grad: can't retain_grad on Tensor that has requires_grad=false");
  if (!t->grad_fn) return 0;   /* leaves keep their grad anyway */
  lt_node *n = t->grad_fn;
  if (!n->retain) {
    n->retain = calloc((size_t)n->n_out, sizeof *n->retain);
    if (!n->retain) return lt_fail(ctx, "retain_grad: out of memory");
  }
  n->retain[t->output_nr] = t;
  t->retains_grad = true;
  return 0;
}

/* ------------------------------------------------------------ engine */

typedef struct {
  lt_node **v;
  size_t n, cap;
} node_vec;

static int vec_push(node_vec *v, lt_node *x) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 64;
    lt_node **nv = realloc(v->v, cap * sizeof *nv);
    if (!nv) return -1;
    v->v = nv;
    v->cap = cap;
  }
  v->v[v->n++] = x;
  return 0;
}

/* Max-heap on seq: the newest node runs first, as in PyTorch's CPU engine. */
static int heap_push(node_vec *h, lt_node *x) {
  if (vec_push(h, x)) return -1;
  size_t i = h->n - 1;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h->v[p]->seq >= h->v[i]->seq) break;
    lt_node *t = h->v[p];
    h->v[p] = h->v[i];
    h->v[i] = t;
    i = p;
  }
  return 0;
}

static lt_node *heap_pop(node_vec *h) {
  lt_node *top = h->v[0];
  h->v[0] = h->v[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < h->n && h->v[l]->seq > h->v[m]->seq) m = l;
    if (r < h->n && h->v[r]->seq > h->v[m]->seq) m = r;
    if (m == i) break;
    lt_node *t = h->v[m];
    h->v[m] = h->v[i];
    h->v[i] = t;
    i = m;
  }
  return top;
}

/* Adds g into slot *acc (taking a reference to g). */
static int accumulate_into(lt_ctx *ctx, lt_tensor **acc, lt_tensor *g) {
  if (!*acc) {
    *acc = lt_retain(g);
    return 0;
  }
  lt_tensor *sum;
  if (lt_binary(ctx, &sum, LT_ADD, *acc, g)) return -1;
  lt_release(*acc);
  *acc = sum;
  return 0;
}

typedef struct {
  lt_node *node;
  int output_nr;
} capture;

static int engine_fail(lt_ctx *ctx, const char *what) {
  return lt_fail(ctx, "backward: %s", what);
}

int lt_backward(lt_ctx *ctx, int n_roots, lt_tensor *const *roots, lt_tensor *const *seeds,
                bool retain_graph, int n_inputs, lt_tensor *const *inputs,
                lt_tensor **results, bool allow_unused) {
  node_vec all = {0}, ready = {0}, todo = {0};
  capture *caps = NULL;
  lt_edge *root_edges = NULL;
  lt_tensor **root_grads = NULL;
  lt_tensor **gin = NULL;
  int rc = -1;
  bool old_mode = ctx->grad_enabled;

  for (int i = 0; i < n_inputs; i++) results[i] = NULL;
  root_edges = calloc((size_t)(n_roots ? n_roots : 1), sizeof *root_edges);
  root_grads = calloc((size_t)(n_roots ? n_roots : 1), sizeof *root_grads);
  caps = calloc((size_t)(n_inputs ? n_inputs : 1), sizeof *caps);
  if (!root_edges || !root_grads || !caps) {
    engine_fail(ctx, "out of memory");
    goto done;
  }

  /* 1. validate roots and make their seed gradients */
  for (int i = 0; i < n_roots; i++) {
    lt_tensor *r = roots[i];
    if (lt_refresh_view(ctx, r)) goto done;
    if (!r->requires_grad) {
      lt_fail(ctx, "backward: element %d of tensors does not require grad and does not have a "
              "grad_fn", i);
      goto done;
    }
    lt_tensor *s = seeds ? seeds[i] : NULL;
    if (!s) {
      if (lt_numel(r) != 1) {
        char buf[256];
        lt_fail(ctx, "backward: grad can be implicitly created only for scalar outputs (got "
                "shape %s); pass a gradient of the same shape", LT_SHAPE(r, buf));
        goto done;
      }
      if (lt_full_as(ctx, &root_grads[i], r, r->dtype, r->ndim, r->size, 1.0)) goto done;
    } else {
      if (!lt_same_shape(s, r)) {
        char a[256], b[256];
        lt_fail(ctx, "backward: Mismatch in shape: grad_output has a shape of %s and output "
                "has a shape of %s", LT_SHAPE(s, a), LT_SHAPE(r, b));
        goto done;
      }
      if (lt_to_dtype(ctx, &root_grads[i], s, r->dtype)) goto done;
    }
    if (r->grad_fn) {
      root_edges[i].node = r->grad_fn;
      root_edges[i].input_nr = r->output_nr;
      lt_node_retain(r->grad_fn);
    } else {
      root_edges[i].node = grad_accumulator(ctx, r);
      if (!root_edges[i].node) {
        engine_fail(ctx, "out of memory");
        goto done;
      }
    }
  }
  for (int i = 0; i < n_inputs; i++) {
    lt_tensor *t = inputs[i];
    if (!t->requires_grad) {
      lt_fail(ctx, "grad: One of the differentiated Tensors (input %d) does not require grad",
              i + 1);
      goto done;
    }
    caps[i].node = t->grad_fn ? t->grad_fn : t->grad_acc;
    caps[i].output_nr = t->grad_fn ? t->output_nr : 0;
  }

  /* 2. discover the graph and count each node's incoming edges. A node whose scratch belongs
  ** to another pass is part of a backward that is running (a hook started this one): sharing
  ** its buffers and counts would drop gradients, so that is refused. */
  for (int i = 0; i < n_roots; i++) {
    lt_node *n = root_edges[i].node;
    if (n->eng_buf && n->eng_owner != &all) goto reentrant;
    if (n->eng_buf) continue;
    n->eng_buf = calloc((size_t)n->n_out, sizeof(lt_tensor *));
    n->eng_owner = &all;
    if (!n->eng_buf || vec_push(&all, n) || vec_push(&todo, n)) {
      engine_fail(ctx, "out of memory");
      goto done;
    }
    lt_node_retain(n);
  }
  while (todo.n) {
    lt_node *n = todo.v[--todo.n];
    for (int i = 0; i < n->n_in; i++) {
      lt_node *c = n->next[i].node;
      if (!c) continue;
      if (c->eng_buf && c->eng_owner != &all) goto reentrant;
      c->eng_deps++;
      if (c->eng_buf) continue;
      c->eng_buf = calloc((size_t)c->n_out, sizeof(lt_tensor *));
      c->eng_owner = &all;
      if (!c->eng_buf || vec_push(&all, c) || vec_push(&todo, c)) {
        engine_fail(ctx, "out of memory");
        goto done;
      }
      lt_node_retain(c);
    }
  }

  /* 3. seed and run, newest node first, with grad mode off */
  ctx->grad_enabled = false;
  for (int i = 0; i < n_roots; i++) {
    lt_node *n = root_edges[i].node;
    if (accumulate_into(ctx, &n->eng_buf[root_edges[i].input_nr], root_grads[i])) goto done;
  }
  for (int i = 0; i < n_roots; i++) {
    lt_node *n = root_edges[i].node;
    if (n->eng_deps == 0) {   /* roots with no incoming edge; several roots may share one */
      n->eng_deps = -1;       /* queued */
      if (heap_push(&ready, n)) goto done;
    }
  }
  while (ready.n) {
    lt_node *n = heap_pop(&ready);
    bool any = false;
    for (int o = 0; o < n->n_out; o++) {
      if (!n->eng_buf[o]) continue;
      if (n->pre_hooks && run_hooks(ctx, n->pre_hooks, o, &n->eng_buf[o])) goto done;
      if (n->retain && n->retain[o]) {
        lt_tensor *rt = n->retain[o];
        if (!rt->grad) {
          if (lt_clone(ctx, &rt->grad, n->eng_buf[o])) goto done;
        } else if (lt_binary_(ctx, LT_ADD, rt->grad, n->eng_buf[o])) {
          goto done;
        }
      }
      any = true;
    }
    for (int k = 0; k < n_inputs; k++) {
      if (caps[k].node == n && n->eng_buf[caps[k].output_nr] && !results[k])
        results[k] = lt_retain(n->eng_buf[caps[k].output_nr]);
    }
    bool skip = n_inputs > 0 && n->type == &accumulate_type;
    free(gin);
    gin = calloc((size_t)(n->n_in ? n->n_in : 1), sizeof *gin);
    if (!gin) {
      engine_fail(ctx, "out of memory");
      goto done;
    }
    if (any && !skip) {
      if (n->type->backward(ctx, n, n->eng_buf, gin)) {
        for (int i = 0; i < n->n_in; i++) lt_release(gin[i]);
        goto done;
      }
    }
    for (int o = 0; o < n->n_out; o++) {
      lt_release(n->eng_buf[o]);
      n->eng_buf[o] = NULL;
    }
    if (!retain_graph && n->n_saved) {
      node_free_saved(n);
      n->released = true;
    }
    for (int i = 0; i < n->n_in; i++) {
      lt_node *c = n->next[i].node;
      int bad = 0;
      if (c && gin[i]) bad = accumulate_into(ctx, &c->eng_buf[n->next[i].input_nr], gin[i]);
      lt_release(gin[i]);
      gin[i] = NULL;
      if (bad) goto done;
      if (c && --c->eng_deps == 0) {
        c->eng_deps = -1;
        if (heap_push(&ready, c)) goto done;
      }
    }
  }
  for (int k = 0; k < n_inputs; k++) {
    if (!results[k] && !allow_unused) {
      lt_fail(ctx, "grad: One of the differentiated Tensors (input %d) appears to not have "
              "been used in the graph. Set allow_unused=true if this is the desired behavior.",
              k + 1);
      goto done;
    }
  }
  rc = 0;
  goto done;

reentrant:
  engine_fail(ctx, "the graph is already running a backward pass (a hook or Function called "
              "backward on a graph that shares nodes with the pass that runs it)");
done:
  ctx->grad_enabled = old_mode;
  if (rc) {
    for (int k = 0; k < n_inputs; k++) {
      lt_release(results[k]);
      results[k] = NULL;
    }
  }
  for (size_t i = 0; i < all.n; i++) {
    lt_node *n = all.v[i];
    for (int o = 0; o < n->n_out; o++) lt_release(n->eng_buf[o]);
    free(n->eng_buf);
    n->eng_buf = NULL;
    n->eng_owner = NULL;
    n->eng_deps = 0;
  }
  for (size_t i = 0; i < all.n; i++) lt_node_release(all.v[i]);
  for (int i = 0; i < n_roots; i++) {
    if (root_edges && root_edges[i].node) lt_node_release(root_edges[i].node);
    if (root_grads) lt_release(root_grads[i]);
  }
  free(gin);
  free(all.v);
  free(ready.v);
  free(todo.v);
  free(caps);
  free(root_edges);
  free(root_grads);
  return rc;
}
