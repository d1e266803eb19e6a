/*
** tensor.c -- contexts, dtypes, storages, tensors, and the autograd graph's lifetime (nodes,
** hooks, a tensor's grad_fn, a leaf's AccumulateGrad node). Tensors and nodes free each other,
** so both lifetimes live here, in the base, which runs no op; recording is in autograd.c and
** what the graph's own nodes compute in backward in autograd_builtin.c.
**
** Ownership: a non-leaf tensor owns its grad_fn; a node owns the nodes its edges point to and
** the detached aliases it saved. A leaf's AccumulateGrad node owns the leaf, and the leaf points
** back weakly. Nothing points from a node to its outputs except weak retain_grad slots, so the
** graph never forms a cycle and dies with the last tensor that reaches it.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "autograd.h"
#include "generator.h"

/* ------------------------------------------------------------ context */

int ltB_ctx_init(lt_ctx *ctx) {
  memset(ctx, 0, sizeof *ctx);
  ctx->grad_enabled = true;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  ctx->num_threads = n > 0 ? (int)n : 1;
  ctx->gen = ltB_generator_new(0);
  return ctx->gen ? 0 : -1;
}

lt_ctx *lt_ctx_new(void) {
  lt_ctx *ctx = malloc(sizeof *ctx);
  if (ctx && ltB_ctx_init(ctx)) {
    free(ctx);
    return NULL;
  }
  return ctx;
}

void lt_ctx_free(lt_ctx *ctx) {
  if (!ctx) return;
  ltB_generator_free(ctx->gen);
  free(ctx);
}

const char *lt_errmsg(const lt_ctx *ctx) { return ctx->err; }

int ltB_fail(lt_ctx *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
  return -1;
}

bool lt_set_grad_enabled(lt_ctx *ctx, bool on) {
  bool old = ctx->grad_enabled;
  ctx->grad_enabled = on;
  return old;
}

bool lt_is_grad_enabled(const lt_ctx *ctx) { return ctx->grad_enabled; }

void lt_set_num_threads(lt_ctx *ctx, int n) { ctx->num_threads = n < 1 ? 1 : n; }
int lt_get_num_threads(const lt_ctx *ctx) { return ctx->num_threads; }

/* ------------------------------------------------------------ dtypes */

static const char *const dtype_names[LT_NDTYPE] = {"float32", "float64", "int64", "bool"};
static const size_t dtype_sizes[LT_NDTYPE] = {4, 8, 8, 1};

const char *lt_dtype_name(lt_dtype dt) {
  return (unsigned)dt < LT_NDTYPE ? dtype_names[dt] : "?";
}
size_t lt_dtype_size(lt_dtype dt) { return (unsigned)dt < LT_NDTYPE ? dtype_sizes[dt] : 0; }
bool lt_dtype_is_float(lt_dtype dt) { return dt == LT_FLOAT32 || dt == LT_FLOAT64; }

/* Ranks along PyTorch's lattice for these four types. */
static int dtype_rank(lt_dtype dt) {
  switch (dt) {
    case LT_BOOL: return 0;
    case LT_INT64: return 1;
    case LT_FLOAT32: return 2;
    default: return 3;
  }
}

lt_dtype lt_promote(lt_dtype a, lt_dtype b) { return dtype_rank(a) >= dtype_rank(b) ? a : b; }

int lt_dtype_parse(const char *name) {
  static const struct { const char *n; lt_dtype dt; } names[] = {
      {"float32", LT_FLOAT32}, {"float", LT_FLOAT32},  {"float64", LT_FLOAT64},
      {"double", LT_FLOAT64},  {"int64", LT_INT64},     {"long", LT_INT64},
      {"bool", LT_BOOL},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].n) == 0) return (int)names[i].dt;
  return -1;
}

/* ------------------------------------------------------------ struct recycling
** Tensors die in bursts (a collector cycle frees thousands), which overflows malloc's small
** per-thread caches and sends every free down its slow path. A per-thread free list of
** tensor and storage structs keeps a small op's bookkeeping off malloc entirely. */

#define RECYCLE_MAX 4096

typedef struct recycled { struct recycled *next; } recycled;
/* initial-exec: a plain TLS load instead of a __tls_get_addr call per access */
#define LT_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static LT_TLS recycled *free_tensors, *free_storages, *free_smalls;
static LT_TLS int n_free_tensors, n_free_storages, n_free_smalls;

/* A thread's lists are freed when it exits, so threads that come and go leak nothing. */
static pthread_key_t recycle_key;
static pthread_once_t recycle_once = PTHREAD_ONCE_INIT;
static LT_TLS bool recycle_registered;

static void drain(recycled **list, int *n) {
  while (*list) {
    recycled *r = *list;
    *list = r->next;
    free(r);
  }
  *n = 0;
}

static void recycle_thread_exit(void *unused) {
  (void)unused;
  drain(&free_tensors, &n_free_tensors);
  drain(&free_storages, &n_free_storages);
  drain(&free_smalls, &n_free_smalls);
}

static void recycle_key_init(void) { pthread_key_create(&recycle_key, recycle_thread_exit); }

static void *take(recycled **list, int *n, size_t size) {
  recycled *r = *list;
  if (!r) return malloc(size);
  *list = r->next;
  (*n)--;
  return r;
}

static void give(recycled **list, int *n, void *p) {
  if (*n >= RECYCLE_MAX) {
    free(p);
    return;
  }
  if (!recycle_registered) {
    pthread_once(&recycle_once, recycle_key_init);
    pthread_setspecific(recycle_key, (void *)1);
    recycle_registered = true;
  }
  recycled *r = p;
  r->next = *list;
  *list = r;
  (*n)++;
}

/* ------------------------------------------------------------ storage */

/* A storage of at most SMALL_BYTES carries its data in its own block, recycled per thread like
** the structs: a small op then never takes the shared buffer cache's lock, and a tiny tensor's
** header and data share cache lines. These blocks are outside lt_memory_stats. */
#define SMALL_BYTES 128
typedef struct {
  lt_storage s;
  _Alignas(64) unsigned char data[SMALL_BYTES];   /* the cache's alignment */
} small_storage;

/* Fills a new storage record for `data` (cache-owned unless inline; no deleter). */
static lt_storage *storage_init(lt_storage *s, void *data, size_t nbytes, bool inline_data) {
  s->data = data;
  s->inline_data = inline_data;
  s->gc_counted = false;
  s->refcount = 1;
  s->nbytes = nbytes;
  s->device = LT_CPU;
  s->device_index = 0;
  s->version = 0;
  s->deleter = NULL;
  s->deleter_ud = NULL;
  return s;
}

static lt_storage *small_storage_new(size_t nbytes) {
  small_storage *b = (small_storage *)free_smalls;
  if (b) {
    free_smalls = free_smalls->next;
    n_free_smalls--;
  } else {
    b = aligned_alloc(_Alignof(small_storage), sizeof *b);
    if (!b) return NULL;
  }
  return storage_init(&b->s, b->data, nbytes, true);
}

lt_storage *ltB_storage_new(size_t nbytes) {
  if (nbytes <= SMALL_BYTES) return small_storage_new(nbytes);
  lt_storage *s = take(&free_storages, &n_free_storages, sizeof *s);
  if (!s) return NULL;
  size_t got = 0;
  void *data = ltB_cache_alloc(nbytes ? nbytes : 1, &got);
  if (!data) {
    give(&free_storages, &n_free_storages, s);
    return NULL;
  }
  return storage_init(s, data, nbytes, false);
}

lt_storage *ltB_storage_adopt(void *data, size_t nbytes, void (*deleter)(void *data, void *ud),
                              void *ud) {
  lt_storage *s = take(&free_storages, &n_free_storages, sizeof *s);
  if (!s) return NULL;
  storage_init(s, data, nbytes, false);
  s->deleter = deleter;
  s->deleter_ud = ud;
  return s;
}

void ltB_storage_release(lt_storage *s) {
  if (!s || --s->refcount > 0) return;
  if (s->inline_data) {   /* the storage is the first member of its small_storage block */
    give(&free_smalls, &n_free_smalls, s);
    return;
  }
  if (s->deleter)
    s->deleter(s->data, s->deleter_ud);
  else
    ltB_cache_free(s->data, s->nbytes ? s->nbytes : 1);
  give(&free_storages, &n_free_storages, s);
}

/* ------------------------------------------------------------ tensor */

int64_t ltB_shape_numel(int ndim, const int64_t *size) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= size[i];
  return n;
}

/* Unsigned: an empty tensor's other sizes may overflow the product (its strides are never used
** to address anything). */
void ltB_contiguous_strides(int ndim, const int64_t *size, int64_t *stride) {
  uint64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    stride[i] = (int64_t)s;
    s *= size[i] > 1 ? (uint64_t)size[i] : 1;
  }
}

lt_tensor *ltB_tensor_wrap(lt_storage *s, lt_dtype dt, int ndim, const int64_t *size,
                           const int64_t *stride, int64_t offset) {
  lt_tensor *t = take(&free_tensors, &n_free_tensors, sizeof *t);
  if (!t) return NULL;
  ltB_tensor_header(t, s, dt, ndim, offset);
  s->refcount++;
  if (ndim > 0) {
    memcpy(t->size, size, (size_t)ndim * sizeof *size);
    if (stride)
      memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
    else
      ltB_contiguous_strides(ndim, size, t->stride);
  }
  return t;
}

lt_tensor *ltB_alias(const lt_tensor *t, int ndim, const int64_t *size, const int64_t *stride,
                     int64_t offset) {
  return ltB_tensor_wrap(t->storage, t->dtype, ndim, size, stride, offset);
}

lt_tensor *lt_retain(lt_tensor *t) {
  if (t) t->refcount++;
  return t;
}

void lt_release(lt_tensor *t) {
  if (!t || --t->refcount > 0) return;
  if (t->grad_fn) ltG_drop_grad_fn(t);   /* also clears the weak retained-grad slot to us */
  if (t->grad) lt_release(t->grad);
  if (t->hooks) ltG_hooks_free(t->hooks);
  if (t->base) lt_release(t->base);
  ltB_storage_release(t->storage);
  give(&free_tensors, &n_free_tensors, t);
}

int ltB_check_new_shape(lt_ctx *ctx, lt_dtype dt, int ndim, const int64_t *size, size_t *nbytes) {
  if ((unsigned)dt >= LT_NDTYPE) return ltB_fail(ctx, "empty: unknown dtype %d", (int)dt);
  if (ndim < 0 || ndim > LT_MAX_DIMS)
    return ltB_fail(ctx, "empty: %d dimensions given, at most %d supported", ndim, LT_MAX_DIMS);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (size[i] < 0)
      return ltB_fail(ctx, "empty: negative dimension %lld at position %d",
                      (long long)size[i], i + 1);
    /* a multiply that reports overflow, not a division per dim (a tenth of a small op) */
    if (__builtin_mul_overflow(n, size[i], &n) || n > INT64_MAX / 16)
      return ltB_fail(ctx, "empty: size overflows");
  }
  *nbytes = (size_t)n * ltB_esize(dt);
  return 0;
}

int ltB_tensor_over(lt_ctx *ctx, lt_tensor **out, lt_storage *s, lt_dtype dt, int ndim,
                    const int64_t *size) {
  lt_tensor *t = ltB_tensor_wrap(s, dt, ndim, size, NULL, 0);
  if (!t) {
    ltB_storage_release(s);
    return ltB_fail(ctx, "empty: out of memory");
  }
  s->refcount--;   /* the tensor now holds the only reference */
  *out = t;
  return 0;
}

/* The storage's one reference handed to the tensor as is, and no shape checks: a small op's
** output costs a third fewer instructions than through lt_empty's checks and ltB_tensor_over's
** reference count round trip. */
lt_tensor *ltB_new_dense(lt_dtype dt, int ndim, const int64_t *size, size_t nbytes) {
  lt_storage *s = ltB_storage_new(nbytes);
  if (!s) return NULL;
  lt_tensor *t = take(&free_tensors, &n_free_tensors, sizeof *t);
  if (!t) {
    ltB_storage_release(s);
    return NULL;
  }
  ltB_tensor_header(t, s, dt, ndim, 0);
  for (int i = 0; i < ndim; i++) t->size[i] = size[i];
  ltB_contiguous_strides(ndim, size, t->stride);
  return t;
}

int lt_empty(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim, const int64_t *size) {
  size_t nbytes;
  if (ltB_check_new_shape(ctx, dt, ndim, size, &nbytes)) return -1;
  lt_tensor *t = ltB_new_dense(dt, ndim, size, nbytes);
  if (!t) return ltB_fail(ctx, "empty: out of memory allocating %zu bytes", nbytes);
  *out = t;
  return 0;
}

/* Host-owned memory: nothing to free. */
static void keep_blob(void *data, void *ud) {
  (void)data;
  (void)ud;
}

int lt_from_blob(lt_ctx *ctx, lt_tensor **out, void *data, lt_dtype dt, int ndim,
                 const int64_t *size, const int64_t *stride,
                 void (*deleter)(void *data, void *ud), void *ud) {
  if ((unsigned)dt >= LT_NDTYPE) return ltB_fail(ctx, "from_blob: unknown dtype %d", (int)dt);
  if (ndim < 0 || ndim > LT_MAX_DIMS) return ltB_fail(ctx, "from_blob: bad rank %d", ndim);
  if (!data) return ltB_fail(ctx, "from_blob: NULL data");
  lt_storage *s = take(&free_storages, &n_free_storages, sizeof *s);
  if (!s) return ltB_fail(ctx, "from_blob: out of memory");
  int64_t extent = 1;   /* elements spanned, for nbytes */
  for (int i = 0; i < ndim; i++) {
    if (size[i] < 0) {
      give(&free_storages, &n_free_storages, s);
      return ltB_fail(ctx, "from_blob: negative size");
    }
    if (size[i] == 0) extent = 0;
  }
  if (extent) {
    int64_t cs[LT_MAX_DIMS];
    ltB_contiguous_strides(ndim, size, cs);
    const int64_t *st = stride ? stride : cs;
    extent = 1;
    for (int i = 0; i < ndim; i++) extent += (size[i] - 1) * (st[i] < 0 ? -st[i] : st[i]);
  }
  storage_init(s, data, (size_t)extent * lt_dtype_size(dt), false);
  s->deleter = deleter ? deleter : keep_blob;
  s->deleter_ud = ud;
  lt_tensor *t = ltB_tensor_wrap(s, dt, ndim, size, stride, 0);
  ltB_storage_release(s);
  if (!t) return ltB_fail(ctx, "from_blob: out of memory");
  *out = t;
  return 0;
}

int lt_ndim(const lt_tensor *t) { return t->ndim; }
int64_t lt_size(const lt_tensor *t, int dim) { return t->size[dim]; }
int64_t lt_stride(const lt_tensor *t, int dim) { return t->stride[dim]; }
const int64_t *lt_sizes(const lt_tensor *t) { return t->size; }
const int64_t *lt_strides(const lt_tensor *t) { return t->stride; }
int64_t lt_numel(const lt_tensor *t) { return ltB_shape_numel(t->ndim, t->size); }
lt_dtype lt_type(const lt_tensor *t) { return t->dtype; }
lt_devtype lt_device(const lt_tensor *t) { return t->storage->device; }
int lt_device_index(const lt_tensor *t) { return t->storage->device_index; }

bool lt_is_contiguous(const lt_tensor *t) {
  int64_t n;
  return ltB_dense(t, &n);
}

void *lt_data(const lt_tensor *t) { return ltB_ptr(t); }

char *ltB_sizes_str(int ndim, const int64_t *size, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)size[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

char *lt_shape_str(const lt_tensor *t, char *buf, size_t n) {
  return ltB_sizes_str(t->ndim, t->size, buf, n);
}

bool ltB_same_shape(const lt_tensor *a, const lt_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->size[i] != b->size[i]) return false;
  return true;
}

int ltB_wrap_dim(lt_ctx *ctx, const char *op, int64_t dim, int ndim, int *out) {
  int n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim >= n)
    return ltB_fail(ctx, "%s: dimension %lld out of range (expected 1..%d or -%d..-1 for a "
                    "%d-d tensor)", op, (long long)(dim >= 0 ? dim + 1 : dim), n, n, ndim);
  *out = (int)(dim < 0 ? dim + n : dim);
  return 0;
}

/* A write through a view of a tensor that requires grad is recorded on the view's base
** (CopySlices, in autograd.c) when the base is a dense non-leaf; the cases PyTorch forbids, and
** views of bases Lantern cannot rewrite (non-contiguous ones), are refused. */
static bool rewritable_base(const lt_tensor *t) {
  return t->base && lt_is_contiguous(t->base);
}

/* PyTorch's has_internal_overlap answers "yes" only for a zero stride on a dim of size > 1 and
** "too hard to tell" (which lets the write go ahead) for other strides; the only overlapping
** views Lantern makes are expansions, and a host's lt_from_blob strides get the same benefit
** of the doubt. */
bool ltB_has_internal_overlap(const lt_tensor *t) {
  bool zero_stride = false;
  for (int i = 0; i < t->ndim; i++) {
    if (t->size[i] == 0) return false;
    if (t->size[i] > 1 && t->stride[i] == 0) zero_stride = true;
  }
  return zero_stride;
}

int ltB_fail_overlap(lt_ctx *ctx, const char *op) {
  return ltB_fail(ctx, "%s: unsupported operation: more than one element of the written-to "
                  "tensor refers to a single memory location. Please clone() the tensor before "
                  "performing the operation.", op);
}

/* The order of the checks is PyTorch's: a leaf that requires grad is named before overlap. */
static int check_inplace(lt_ctx *ctx, const char *op, lt_tensor *t, bool overlap_ok) {
  if (ctx->grad_enabled) {
    if (t->requires_grad && !t->grad_fn)
      return ltB_fail(ctx, "%s: a leaf Variable that requires grad is being used in an "
                      "in-place operation.", op);
    /* (also when the base came to require grad after the view was made) */
    if (t->base && t->base->requires_grad && !t->base->grad_fn)
      return ltB_fail(ctx, "%s: a view of a leaf Variable that requires grad is being used in "
                      "an in-place operation.", op);
  }
  if (!overlap_ok && ltB_has_internal_overlap(t)) return ltB_fail_overlap(ctx, op);
  if (!ctx->grad_enabled) return 0;
  if (t->grad_view) {
    if (!t->requires_grad)
      return ltB_fail(ctx, "%s: A view was created in no_grad mode and is being modified "
                      "inplace with grad mode enabled. Move both the view and the in-place op "
                      "inside the no_grad block, or both outside it.", op);
    if (!rewritable_base(t))
      return ltB_fail(ctx, "%s: an in-place write through a view of a non-contiguous tensor "
                      "that requires grad is not supported; clone() the tensor first", op);
  }
  return 0;
}

int ltB_check_inplace(lt_ctx *ctx, const char *op, lt_tensor *t) {
  return check_inplace(ctx, op, t, false);
}

int ltB_check_inplace_fill(lt_ctx *ctx, const char *op, lt_tensor *t) {
  return check_inplace(ctx, op, t, true);
}

static int check_inplace_from(lt_ctx *ctx, const char *op, lt_tensor *t, const lt_tensor *src,
                              bool overlap_ok) {
  if (check_inplace(ctx, op, t, overlap_ok)) return -1;
  if (ctx->grad_enabled && src && src->requires_grad && t->is_view && !t->requires_grad &&
      !rewritable_base(t))
    return ltB_fail_view_write(ctx, op);
  return 0;
}

int ltB_check_inplace_from(lt_ctx *ctx, const char *op, lt_tensor *t, const lt_tensor *src) {
  return check_inplace_from(ctx, op, t, src, false);
}

int ltB_check_fill_from(lt_ctx *ctx, const char *op, lt_tensor *t, const lt_tensor *src) {
  return check_inplace_from(ctx, op, t, src, true);
}

int ltB_fail_view_write(lt_ctx *ctx, const char *op) {
  return ltB_fail(ctx, "%s: an in-place write of a value that requires grad into a view of a "
                  "non-contiguous tensor is not supported (its gradient could not reach the "
                  "base); clone() the base first or use lt.cat/lt.stack", op);
}

/* ============================================================ the graph's lifetime */

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

/* AccumulateGrad: the sink of a leaf. extra (ltG_ltG_acc_extra) holds the leaf (strong). */
static void accumulate_release(lt_node *self) {
  lt_tensor *leaf = ((ltG_acc_extra *)self->extra)->leaf;
  if (leaf->grad_acc == self) leaf->grad_acc = NULL;
  lt_release(leaf);
}

/* Its backward (accumulate_backward in autograd_builtin.c) runs ops, so the engine supplies it. */
const ltG_node_type ltG_accumulate_type = {"AccumulateGrad", NULL, accumulate_release};

bool ltG_is_accumulator(const lt_node *n) { return n->type == &ltG_accumulate_type; }

lt_node *ltG_grad_accumulator(lt_ctx *ctx, lt_tensor *leaf) {
  if (leaf->grad_acc) {
    ltG_node_retain(leaf->grad_acc);
    return leaf->grad_acc;
  }
  lt_node *n = ltG_node_new(ctx, &ltG_accumulate_type, 0, 1, sizeof(ltG_acc_extra), 0);
  if (!n) return NULL;
  n->refcount = 1;
  ((ltG_acc_extra *)n->extra)->leaf = lt_retain(leaf);
  n->out_dtype = leaf->dtype;
  leaf->grad_acc = n;
  return n;
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

