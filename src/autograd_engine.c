/*
** autograd_engine.c -- the backward engine: one pass discovers the graph from the roots, counts
** each node's incoming edges and runs the nodes newest first, summing the gradients that meet.
*/
#include <stdlib.h>

#include "autograd.h"
#include "backend.h"


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
  return ltB_fail(ctx, "backward: %s", what);
}

/* One backward pass: its arguments, the nodes it reached and its scratch. The address of `all`
** marks the nodes whose engine scratch belongs to this pass. */
typedef struct {
  lt_ctx *ctx;
  int n_roots, n_inputs;
  lt_tensor *const *roots, *const *seeds, *const *inputs;
  lt_tensor **results;
  bool retain_graph;
  node_vec all, ready, todo;
  capture *caps;           /* per input: the node and output whose gradient is its result */
  ltG_edge *root_edges;     /* per root: the node its seed enters */
  lt_tensor **root_grads;  /* per root: its seed gradient */
  lt_tensor **gin;         /* the gradients of the running node's inputs */
} pass;

static int pass_alloc(pass *p) {
  p->root_edges = calloc((size_t)(p->n_roots ? p->n_roots : 1), sizeof *p->root_edges);
  p->root_grads = calloc((size_t)(p->n_roots ? p->n_roots : 1), sizeof *p->root_grads);
  p->caps = calloc((size_t)(p->n_inputs ? p->n_inputs : 1), sizeof *p->caps);
  if (!p->root_edges || !p->root_grads || !p->caps) return engine_fail(p->ctx, "out of memory");
  return 0;
}

/* Root i's seed gradient: ones for a one-element root without a seed, else the seed. */
static int seed_of(pass *p, int i) {
  lt_ctx *ctx = p->ctx;
  lt_tensor *r = p->roots[i], *s = p->seeds ? p->seeds[i] : NULL;
  if (!s) {
    if (lt_numel(r) != 1) {
      char buf[256];
      return ltB_fail(ctx, "backward: grad can be implicitly created only for scalar outputs "
                      "(got shape %s); pass a gradient of the same shape", LT_SHAPE(r, buf));
    }
    return ltO_full_as(ctx, &p->root_grads[i], r, r->dtype, r->ndim, r->size, 1.0);
  }
  if (!ltB_same_shape(s, r)) {
    char a[256], b[256];
    return ltB_fail(ctx, "backward: Mismatch in shape: grad_output has a shape of %s and output "
                    "has a shape of %s", LT_SHAPE(s, a), LT_SHAPE(r, b));
  }
  return lt_to_dtype(ctx, &p->root_grads[i], s, r->dtype);
}

/* Checks the roots, makes their seeds and the edges they enter the graph by. */
static int seed_roots(pass *p) {
  lt_ctx *ctx = p->ctx;
  for (int i = 0; i < p->n_roots; i++) {
    lt_tensor *r = p->roots[i];
    if (ltG_refresh_view(ctx, r)) return -1;
    if (!r->requires_grad)
      return ltB_fail(ctx, "backward: element %d of tensors does not require grad and does not "
                      "have a grad_fn", i);
    if (seed_of(p, i)) return -1;
    if (r->grad_fn) {
      p->root_edges[i].node = r->grad_fn;
      p->root_edges[i].input_nr = r->output_nr;
      ltG_node_retain(r->grad_fn);
    } else {
      p->root_edges[i].node = ltG_grad_accumulator(ctx, r);
      if (!p->root_edges[i].node) return engine_fail(ctx, "out of memory");
    }
  }
  return 0;
}

/* autograd.grad: where each input's gradient will be found. */
static int capture_inputs(pass *p) {
  for (int i = 0; i < p->n_inputs; i++) {
    lt_tensor *t = p->inputs[i];
    if (!t->requires_grad)
      return ltB_fail(p->ctx, "grad: One of the differentiated Tensors (input %d) does not "
                      "require grad", i + 1);
    p->caps[i].node = t->grad_fn ? t->grad_fn : t->grad_acc;
    p->caps[i].output_nr = t->grad_fn ? t->output_nr : 0;
  }
  return 0;
}

/* A node whose scratch belongs to another pass is part of a backward that is running (a hook
** started this one): sharing its buffers and counts would drop gradients, so that is refused. */
static bool foreign(const pass *p, const lt_node *n) {
  return n->eng_buf && n->eng_owner != &p->all;
}

static int fail_reentrant(pass *p) {
  return engine_fail(p->ctx, "the graph is already running a backward pass (a hook or "
                     "Function called backward on a graph that shares nodes with the pass "
                     "that runs it)");
}

/* Takes n (not foreign) into the pass on first sight: its scratch, a place in `all` and in the
** walk. */
static int visit(pass *p, lt_node *n) {
  if (n->eng_buf) return 0;
  n->eng_buf = calloc((size_t)n->n_out, sizeof(lt_tensor *));
  n->eng_owner = &p->all;
  if (!n->eng_buf || vec_push(&p->all, n) || vec_push(&p->todo, n))
    return engine_fail(p->ctx, "out of memory");
  ltG_node_retain(n);
  return 0;
}

/* Finds every node reachable from the roots and counts each one's incoming edges. */
static int discover(pass *p) {
  for (int i = 0; i < p->n_roots; i++) {
    lt_node *n = p->root_edges[i].node;
    if (foreign(p, n)) return fail_reentrant(p);
    if (visit(p, n)) return -1;
  }
  while (p->todo.n) {
    lt_node *n = p->todo.v[--p->todo.n];
    for (int i = 0; i < n->n_in; i++) {
      lt_node *c = n->next[i].node;
      if (!c) continue;
      if (foreign(p, c)) return fail_reentrant(p);
      c->eng_deps++;
      if (visit(p, c)) return -1;
    }
  }
  return 0;
}

/* Puts the seeds into their nodes and queues the roots that no edge reaches. */
static int seed_queue(pass *p) {
  for (int i = 0; i < p->n_roots; i++) {
    lt_node *n = p->root_edges[i].node;
    if (accumulate_into(p->ctx, &n->eng_buf[p->root_edges[i].input_nr], p->root_grads[i]))
      return -1;
  }
  for (int i = 0; i < p->n_roots; i++) {
    lt_node *n = p->root_edges[i].node;
    if (n->eng_deps == 0) {   /* roots with no incoming edge; several roots may share one */
      n->eng_deps = -1;       /* queued */
      if (heap_push(&p->ready, n)) return -1;
    }
  }
  return 0;
}

/* The pre-hooks and retain_grad of each output of n with a gradient; *any: whether one has. */
static int outputs_ready(pass *p, lt_node *n, bool *any) {
  *any = false;
  for (int o = 0; o < n->n_out; o++) {
    if (!n->eng_buf[o]) continue;
    if (n->pre_hooks && ltG_run_hooks(p->ctx, n->pre_hooks, o, &n->eng_buf[o])) return -1;
    if (n->retain && n->retain[o]) {
      lt_tensor *rt = n->retain[o];
      if (!rt->grad) {
        if (lt_clone(p->ctx, &rt->grad, n->eng_buf[o])) return -1;
      } else if (lt_binary_(p->ctx, LT_ADD, rt->grad, n->eng_buf[o])) {
        return -1;
      }
    }
    *any = true;
  }
  for (int k = 0; k < p->n_inputs; k++) {
    capture *c = &p->caps[k];
    if (c->node == n && n->eng_buf[c->output_nr] && !p->results[k])
      p->results[k] = lt_retain(n->eng_buf[c->output_nr]);
  }
  return 0;
}

/* Hands n's input gradients on to the nodes they flow into, queueing each that has all. */
static int propagate(pass *p, lt_node *n) {
  for (int i = 0; i < n->n_in; i++) {
    lt_node *c = n->next[i].node;
    int bad = 0;
    if (c && p->gin[i])
      bad = accumulate_into(p->ctx, &c->eng_buf[n->next[i].input_nr], p->gin[i]);
    lt_release(p->gin[i]);
    p->gin[i] = NULL;
    if (bad) return -1;
    if (c && --c->eng_deps == 0) {
      c->eng_deps = -1;
      if (heap_push(&p->ready, c)) return -1;
    }
  }
  return 0;
}

/* The gradient slot of n's only input when n's backward can add into it in place: the slot
** holds a tensor that only the engine references (no other reference, no view, no shared
** storage), contiguous, of the gradient's dtype and outside any graph; else NULL. */
static lt_tensor *slot_for_into(const lt_node *n) {
  if (!ltO_backward_into_of(n->type) || n->n_in != 1 || n->n_out != 1 || !n->next[0].node)
    return NULL;
  lt_tensor *acc = n->next[0].node->eng_buf[n->next[0].input_nr], *g = n->eng_buf[0];
  int64_t cnt;
  if (!acc || !g || acc->refcount != 1 || acc->storage->refcount != 1 || acc->base ||
      acc->grad_fn || acc->requires_grad || g->requires_grad || acc->dtype != g->dtype ||
      acc->storage->device != g->storage->device || !ltB_dense(acc, &cnt))
    return NULL;
  return acc;
}

/* Runs node n (all its gradients are in) and passes its results on. */
static int run_node(pass *p, lt_node *n) {
  bool any;
  if (outputs_ready(p, n, &any)) return -1;
  bool skip = p->n_inputs > 0 && ltG_is_accumulator(n);
  free(p->gin);
  p->gin = calloc((size_t)(n->n_in ? n->n_in : 1), sizeof *p->gin);
  if (!p->gin) return engine_fail(p->ctx, "out of memory");
  lt_tensor *into = any && !skip ? slot_for_into(n) : NULL;
  if (into) {   /* p->gin stays empty: the gradient is already in its slot */
    if (ltO_backward_into_of(n->type)(p->ctx, n, n->eng_buf, into)) return -1;
  } else if (any && !skip && ltO_backward_of(n->type)(p->ctx, n, n->eng_buf, p->gin)) {
    for (int i = 0; i < n->n_in; i++) lt_release(p->gin[i]);
    return -1;
  }
  for (int o = 0; o < n->n_out; o++) {
    lt_release(n->eng_buf[o]);
    n->eng_buf[o] = NULL;
  }
  if (!p->retain_graph && n->n_saved) {
    ltG_node_free_saved(n);
    n->released = true;
  }
  return propagate(p, n);
}

static int check_unused(pass *p, bool allow_unused) {
  for (int k = 0; k < p->n_inputs; k++)
    if (!p->results[k] && !allow_unused)
      return ltB_fail(p->ctx, "grad: One of the differentiated Tensors (input %d) appears to "
                      "not have been used in the graph. Set allow_unused=true if this is the "
                      "desired behavior.", k + 1);
  return 0;
}

/* Frees the pass's scratch; on failure also the results gathered so far. */
static void pass_free(pass *p, int rc) {
  if (rc) {
    for (int k = 0; k < p->n_inputs; k++) {
      lt_release(p->results[k]);
      p->results[k] = NULL;
    }
  }
  for (size_t i = 0; i < p->all.n; i++) {
    lt_node *n = p->all.v[i];
    for (int o = 0; o < n->n_out; o++) lt_release(n->eng_buf[o]);
    free(n->eng_buf);
    n->eng_buf = NULL;
    n->eng_owner = NULL;
    n->eng_deps = 0;
  }
  for (size_t i = 0; i < p->all.n; i++) ltG_node_release(p->all.v[i]);
  for (int i = 0; i < p->n_roots; i++) {
    if (p->root_edges && p->root_edges[i].node) ltG_node_release(p->root_edges[i].node);
    if (p->root_grads) lt_release(p->root_grads[i]);
  }
  free(p->gin);
  free(p->all.v);
  free(p->ready.v);
  free(p->todo.v);
  free(p->caps);
  free(p->root_edges);
  free(p->root_grads);
}

int lt_backward(lt_ctx *ctx, int n_roots, lt_tensor *const *roots, lt_tensor *const *seeds,
                bool retain_graph, int n_inputs, lt_tensor *const *inputs,
                lt_tensor **results, bool allow_unused) {
  pass p = {.ctx = ctx, .n_roots = n_roots, .n_inputs = n_inputs, .roots = roots,
            .seeds = seeds, .inputs = inputs, .results = results,
            .retain_graph = retain_graph};
  bool old_mode = ctx->grad_enabled;
  for (int i = 0; i < n_inputs; i++) results[i] = NULL;
  int rc = pass_alloc(&p) || seed_roots(&p) || capture_inputs(&p) || discover(&p) ? -1 : 0;
  if (!rc) {
    ctx->grad_enabled = false;   /* backward functions run with grad mode off */
    rc = seed_queue(&p);
    while (!rc && p.ready.n) rc = run_node(&p, heap_pop(&p.ready));
    if (!rc) rc = check_unused(&p, allow_unused);
  }
  ctx->grad_enabled = old_mode;
  pass_free(&p, rc);
  return rc;
}
