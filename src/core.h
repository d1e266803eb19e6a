/*
** core.h -- internal definitions shared by the C core (never included by hosts).
**
** Shape letters and conventions: dims are 0-based; strides and offsets count elements;
** every op returns 0 or -1 (message in ctx->err) and leaves its inputs untouched on failure.
*/
#ifndef LT_CORE_H
#define LT_CORE_H

#include <stdarg.h>
#include <string.h>

#include "lantern.h"
#include "lantern_ops.h"   /* the op layer's API: every op declared once */

/* ============================================================ context */

struct lt_ctx {
  char err[1024];
  bool grad_enabled;
  int num_threads;
  lt_generator *gen;   /* default generator */
  uint64_t seq;        /* creation order of graph nodes; backward runs newest first */
  void *host;          /* the binding's current lua_State while it runs backward */
  lt_devtype default_device;   /* where creation functions put tensors (memset: the cpu) */
  int default_index;
};

/* Initialises a context in memory the caller owns (lt_ctx_new allocates one); -1 on OOM. */
int ltB_ctx_init(lt_ctx *ctx);

/* Formats the error message into ctx and returns -1, so callers write `return ltB_fail(...)`. */
int ltB_fail(lt_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ============================================================ storage */

struct lt_storage {
  long refcount;
  void *data;
  size_t nbytes;
  lt_devtype device;
  int device_index;
  uint32_t version;     /* bumped by every in-place write to any view of it */
  void (*deleter)(void *data, void *ud);   /* NULL: block belongs to the buffer cache */
  void *deleter_ud;
  bool inline_data;     /* data lives in this storage's own block (small storages) */
  bool gc_counted;      /* its bytes were reported to a Lua collector's pacing (bind/lbind.c) */
};

lt_storage *ltB_storage_new(size_t nbytes);           /* NULL on out-of-memory */
/* A storage record for memory that deleter(data, ud) frees when the last view dies (a host's
** blob, a device's block); NULL on out-of-memory. */
lt_storage *ltB_storage_adopt(void *data, size_t nbytes, void (*deleter)(void *data, void *ud),
                              void *ud);
void ltB_storage_release(lt_storage *s);

/* Buffer cache (alloc.c). Blocks are 64-byte aligned. */
void *ltB_cache_alloc(size_t nbytes, size_t *got);
void ltB_cache_free(void *p, size_t nbytes);
/* Bytes held by live blocks now, read without the lock (the collector pacing polls it). */
size_t ltB_cache_in_use(void);

/* ============================================================ tensor */

/* The bytes of a new tensor of that dtype and shape, or -1 with the message (bad dtype, rank,
** negative or overflowing sizes). */
int ltB_check_new_shape(lt_ctx *ctx, lt_dtype dt, int ndim, const int64_t *size, size_t *nbytes);
/* *out = a contiguous tensor over the fresh storage s (taking its reference; s is released on
** failure). */
int ltB_tensor_over(lt_ctx *ctx, lt_tensor **out, lt_storage *s, lt_dtype dt, int ndim,
                    const int64_t *size);

typedef struct ltG_hook ltG_hook;
void ltG_hooks_free(ltG_hook *h);

struct lt_tensor {
  long refcount;
  lt_storage *storage;
  lt_dtype dtype;
  int ndim;
  int64_t offset;
  int64_t size[LT_MAX_DIMS];
  int64_t stride[LT_MAX_DIMS];
  /* autograd */
  bool requires_grad;
  bool retains_grad;
  bool grad_view;       /* a view of a tensor that requires grad: in-place writes refused */
  bool is_view;         /* made by a view op (shares its input's storage) */
  int output_nr;        /* which output of grad_fn this is */
  lt_tensor *grad;
  lt_node *grad_fn;     /* strong; NULL for a leaf */
  lt_node *grad_acc;    /* weak: the AccumulateGrad node of a leaf, cleared when it dies */
  ltG_hook *hooks;       /* gradient hooks of a leaf (a non-leaf's live on its grad_fn) */
  /* views and in-place autograd (PyTorch's CopySlices) */
  lt_tensor *base;      /* a view's root base (strong); NULL for a tensor that is no view */
  uint32_t base_epoch;  /* the base's view_epoch when this view's grad_fn was made */
  uint32_t view_epoch;  /* a base: bumped each time a write through a view rewrites its graph */
};

/* Element size and data pointer, inline for hot paths (lt_dtype_size/lt_data are the API). */
static inline size_t ltB_esize(lt_dtype dt) { return dt == LT_BOOL ? 1 : dt == LT_FLOAT32 ? 4 : 8; }
static inline void *ltB_ptr(const lt_tensor *t) {
  return (char *)t->storage->data + t->offset * (int64_t)ltB_esize(t->dtype);
}
/* Row-major with no gaps; sets *n to the element count. lt_is_contiguous is the API form. */
static inline bool ltB_dense(const lt_tensor *t, int64_t *n) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->size[i] != 1 && t->stride[i] != s) {
      for (int j = i; j >= 0; j--) s *= t->size[j];   /* a zero size makes it dense after all */
      *n = s;
      return s == 0;
    }
    s *= t->size[i];
  }
  *n = s;
  return true;
}

/* Sets every field of t but the size and stride arrays, of which only [0, ndim) is ever read:
** one reference, over s (whose count it leaves alone), no autograd state. A recycled struct
** or a 0-dim one on the stack is set this way rather than zeroed whole (344 bytes). */
static inline void ltB_tensor_header(lt_tensor *t, lt_storage *s, lt_dtype dt, int ndim,
                                     int64_t offset) {
  t->requires_grad = t->retains_grad = t->grad_view = t->is_view = false;
  t->output_nr = 0;
  t->grad = NULL;
  t->grad_fn = t->grad_acc = NULL;
  t->hooks = NULL;
  t->base = NULL;
  t->base_epoch = t->view_epoch = 0;
  t->refcount = 1;
  t->storage = s;
  t->dtype = dt;
  t->ndim = ndim;
  t->offset = offset;
}
/* A new contiguous cpu tensor of nbytes (the caller checked the shape and computed them),
** uninitialised; NULL on out-of-memory. lt_empty without the checks, for hot paths. */
lt_tensor *ltB_new_dense(lt_dtype dt, int ndim, const int64_t *size, size_t nbytes);
/* A new tensor struct viewing `s` (retains s). Sizes/strides copied. NULL on OOM. */
lt_tensor *ltB_tensor_wrap(lt_storage *s, lt_dtype dt, int ndim, const int64_t *size,
                           const int64_t *stride, int64_t offset);
/* A view of t with new geometry, sharing storage, no autograd info. */
lt_tensor *ltB_alias(const lt_tensor *t, int ndim, const int64_t *size, const int64_t *stride,
                     int64_t offset);
void ltB_contiguous_strides(int ndim, const int64_t *size, int64_t *stride);
int64_t ltB_shape_numel(int ndim, const int64_t *size);
bool ltB_same_shape(const lt_tensor *a, const lt_tensor *b);
/* Writes "[2, 3]" for a size list. */
char *ltB_sizes_str(int ndim, const int64_t *size, char *buf, size_t n);
#define LT_SHAPE(t, buf) lt_shape_str((t), (buf), sizeof(buf))

/* The checks every in-place write runs before it changes anything (its caller then bumps the
** version counter): a leaf that requires grad may not be written while grad mode is on, nor a
** destination in which several elements share one memory location (an expanded tensor, as
** PyTorch's has_internal_overlap), which would make the result depend on the write order. */
int ltB_check_inplace(lt_ctx *ctx, const char *op, lt_tensor *t);
/* The same for writes of one value everywhere (fill_, zero_, masked_fill_, x[i] = number):
** PyTorch accepts them on an expanded tensor, whose result is well defined. */
int ltB_check_inplace_fill(lt_ctx *ctx, const char *op, lt_tensor *t);
/* Whether several elements of t (numel > 0) share a memory location: a zero stride on a dim of
** size > 1. ltB_fail_overlap is the error of a write into such a tensor. */
bool ltB_has_internal_overlap(const lt_tensor *t);
int ltB_fail_overlap(lt_ctx *ctx, const char *op);
/* The same for writing `src` into t: also refuses a src that requires grad when t is a view of
** a tensor that does not (the gradient could not reach the base). */
int ltB_check_inplace_from(lt_ctx *ctx, const char *op, lt_tensor *t, const lt_tensor *src);
/* ... and for writing one value `src` everywhere (which may alias, as ltB_check_inplace_fill). */
int ltB_check_fill_from(lt_ctx *ctx, const char *op, lt_tensor *t, const lt_tensor *src);
/* The error of such a write; ltG_record raises it for in-place paths that check no source. */
int ltB_fail_view_write(lt_ctx *ctx, const char *op);
static inline void ltB_bump_version(lt_tensor *t) { t->storage->version++; }

/* Normalises a possibly negative 0-based dim for a tensor of rank ndim (ndim 0 allows -1,0). */
int ltB_wrap_dim(lt_ctx *ctx, const char *op, int64_t dim, int ndim, int *out);

/* ======================================================= elementwise iteration
** Torch7-style apply: the iterator broadcasts up to LT_ITER_MAX operands to one shape,
** collapses dimensions that are contiguous in every operand, and calls a kernel on rows:
** kernel(data, strides, n, ud) where data[k] points at operand k's first element of the row
** and strides[k] is its byte stride along the row. Operand 0 is the output. */
#define LT_ITER_MAX 4

typedef void (*ltK_row_fn)(char **data, const int64_t *strides, int64_t n, void *ud);

typedef struct ltB_iter {
  int nops;
  int ndim;                          /* after collapsing; innermost is ndim-1 */
  int64_t size[LT_MAX_DIMS];
  int64_t stride[LT_ITER_MAX][LT_MAX_DIMS];   /* bytes */
  char *data[LT_ITER_MAX];
  int64_t esize[LT_ITER_MAX];        /* bytes per element */
  int64_t numel;
} ltB_iter;

/* Builds an iterator over ops[0..nops) viewed with shape (ndim,size): each operand must be
** broadcastable to it (checked by the caller). */
void ltB_iter_init(ltB_iter *it, int nops, lt_tensor *const *ops, int ndim, const int64_t *size);
/* Runs kernel over every row; splits across threads when numel >= LT_PAR_MIN. */
void ltB_iter_run(lt_ctx *ctx, const ltB_iter *it, ltK_row_fn kernel, void *ud);
/* ltB_iter_run for a kernel each of whose output elements depends on the same position of
** the inputs alone (elementwise): when an operand walks its rows across memory (a transposed
** input), it is called on pieces of rows, a block of neighbouring rows at a time. */
void ltB_iter_run_ew(lt_ctx *ctx, const ltB_iter *it, ltK_row_fn kernel, void *ud);
#define LT_PAR_MIN 32768
/* Walks rows [r0, r1) of an iterator of two dims or more in runs along dim ndim-2: run(ptr,
** step, m, ud) gets the pointers of a run's first row (its own copy, to advance at will), each
** operand's byte step from one row to the next and the m rows before the next carry. For
** kernels that take rows of a few elements in one loop instead of a call apiece. */
typedef void (*ltB_runs_fn)(char **ptr, const int64_t *step, int64_t m, void *ud);
void ltB_iter_runs(const ltB_iter *it, int64_t r0, int64_t r1, ltB_runs_fn run, void *ud);

/* Broadcast shape of a and b into (ndim,size); error names op and both shapes. */
int ltB_broadcast_shapes(lt_ctx *ctx, const char *op, int na, const int64_t *sa, int nb,
                         const int64_t *sb, int *ndim, int64_t *size);

/* Parallel for over [0,n) in chunks (OpenMP when enabled and n is large enough). */
typedef void (*ltK_range_fn)(int64_t begin, int64_t end, void *ud);
void ltB_parallel_for(lt_ctx *ctx, int64_t n, int64_t grain, ltK_range_fn fn, void *ud);

/* ======================================================= device kernel table
** Every op reaches its kernels through the table of its tensors' device; only cpu exists.
** A CUDA backend fills the same table. Kernels get already-checked arguments, never call ops
** and never fail except for out-of-memory (the int entries: 0 or -1 with the message set). */

/* (enum lt_redop, the kernel's reduce `op`, is public: lantern_ops.h) */

/* The matrix dims an operand of a product has (a vector lacks one), and whether the kernel reads
** it transposed. */
typedef struct ltK_mat_dims {
  bool has_rows, has_cols, transposed;
} ltK_mat_dims;

/* -- convolution, pooling, norms: the geometry their kernels get, filled by the op layer
** (nn_conv.c, nn_pool.c, nn_norm.c) once every argument is checked. */
/* A convolution maps the image side (N, C, H, W) to the column side (N, O, OH, OW), a transposed
** one the column side to the image side; a 1-d op has H = kh = 1. */
typedef struct ltK_conv_geom {
  int64_t N, C, H, W;                       /* image side */
  int64_t O, OH, OW;                        /* column side */
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;   /* ph, pw: zeros before each spatial dim */
  int64_t groups;
  bool transposed;
} ltK_conv_geom;

enum ltK_pool_kind { LT_POOL_MAX, LT_POOL_AVG, LT_POOL_ADAPTIVE_AVG, LT_POOL_ADAPTIVE_MAX };

/* P = N*C planes of H x W in and OH x OW out; a 1-d op has H = kh = 1. Adaptive kinds use
** only the sizes. */
typedef struct ltK_pool_geom {
  enum ltK_pool_kind kind;
  int64_t P, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool count_include_pad;
  int64_t divisor;   /* avg: divisor_override, 0 for none */
} ltK_pool_geom;

enum ltK_norm_kind { LT_NORM_LAYER, LT_NORM_RMS, LT_NORM_GROUP };

/* Rows of D values normalised one by one: layer and rms norm over the trailing dims, group norm
** over (n, group) blocks of D = Cg*L values whose channel is group*Cg + i/L. */
typedef struct ltK_norm_geom {
  enum ltK_norm_kind kind;
  int64_t R, D;
  int64_t G, Cg, L;   /* group norm; 1 otherwise */
  double eps;
} ltK_norm_geom;

/* -- attention: the geometry of one scaled-dot-product attention (attention.c fills it).
** Per entry of the nbd broadcast batch dims `batch`: q (L, E), k (S, E), v (S, Ev); every
** operand the kernels get has nbd + 2 dims (stride 0 along the broadcast ones), and q, k, v
** and dout have unit stride along the last. causal: key j > query i takes no part. */
typedef struct ltK_sdpa_geom {
  int nbd;
  int64_t batch[LT_MAX_DIMS];
  int64_t L, S, E, Ev;
  double scale;
  bool causal;
  /* dropout of the weights: weight (b, i, j) is kept, scaled by 1/(1-p), when a hash of seed
  ** and its index ((b * L + i) * S + j) falls at or above p; the backward recomputes the same */
  double dropout_p;
  uint64_t seed;
} ltK_sdpa_geom;

/* -- dropout, losses, random fills, optimiser steps: the arguments their kernels get. */
/* (enum lt_reduction, how a loss folds its values, is public: lantern_ops.h) */

/* A class-index loss over x seen as (N, C, S): C class scores at stride S per row (n, s),
** classes counted from base, rows whose target is `ignore` left out; logits: cross_entropy
** (log-softmax inside, label smoothing ls), else nll_loss on log-probabilities. The forward
** kernel sets dn and ds, the mean's denominators of the nll and smoothing terms. */
typedef struct ltK_class_loss {
  int64_t N, C, S, base, ignore;
  enum lt_reduction reduction;
  double ls;
  bool logits;
  double dn, ds;
} ltK_class_loss;

/* One dim's resampling (interpolate): x seen as (O, Nin, I), y as (O, Nout, I), both
** contiguous (I = inner), one float dtype; i0, i1 (int64, Nout, counted from base, in range) the source
** positions of each output row and w1 (Nout, x's dtype) the weight of i1:
**   y[o, j, :] = x[o, i0[j], :] (1 - w1[j]) + x[o, i1[j], :] w1[j]
** or y[o, j, :] = x[o, i0[j], :] where i1 and w1 are NULL (nearest). */
typedef struct ltK_resample {
  int64_t O, Nin, Nout, inner, base;
  const lt_tensor *i0, *i1, *w1;
} ltK_resample;

/* the fused optimiser steps' options, defined in optim.h */
typedef struct lt_sgd_opts lt_sgd_opts;
typedef struct lt_adam_opts lt_adam_opts;
typedef struct lt_rmsprop_opts lt_rmsprop_opts;
typedef struct lt_adagrad_opts lt_adagrad_opts;

/* The private op codes that the elementwise op files (elementwise.c, unary.c, where.c) pass
** to the binary, unary and ternary kernels (fused gradient formulas, isclose, clamp). The
** private codes follow the public ones, so a kernel's switch can never mistake one for the
** other. The binary and unary entries take an int because they take codes of both sets (an
** lt_binop or an ltK_ew_op; an lt_unop or LT_UCLAMP); the ternary entry takes only its own. */
enum ltK_ew_op {
  LT_EW_BW = LT_NBINOP,                /* + lt_unop: g * d op(y)/dy from (g, saved y) */
  LT_EW_BW_CLAMP = LT_EW_BW + LT_NUNOP,   /* p0 <= y <= p1 ? g : 0 */
  LT_EW_ISCLOSE, LT_EW_ISCLOSE_NAN
};
enum { LT_UCLAMP = LT_NUNOP /* unary clamp, p0 = lo, p1 = hi (+-inf when absent) */ };
/* the fused two-operand gradient formulas of the ternary kernel */
enum ltK_ternary_op { LT_T_DIV_B, LT_T_POW_A, LT_T_POW_B, LT_T_ATAN2_A, LT_T_ATAN2_B, LT_T_MAX_A,
                      LT_T_MAX_B, LT_T_MIN_A, LT_T_MIN_B, LT_T_FMOD_B, LT_T_REM_B };
/* the one-pass forms of addcmul, addcdiv and lerp (the addc entry) */
enum ltK_addc_op { LT_ADDC_MUL, LT_ADDC_DIV, LT_LERP_SCALAR, LT_LERP_TENSOR };

typedef struct ltK_backend {
  const char *name;
  /* dst[...] = src[...] with dtype conversion and broadcasting of src to dst's shape */
  void (*copy)(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src);
  void (*fill)(lt_ctx *ctx, lt_tensor *dst, double v);
  /* out = op(a, b) elementwise, a and b already broadcastable to out; compute in out's
  ** dtype except comparisons, which compute in the `compute` dtype and write bool. p0 and p1
  ** are the parameters of the ops that take them (isclose's rtol and atol, the clamp bounds
  ** of the fused gradient formulas, the ltK_ew_op codes); 0 for the others */
  void (*binary)(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                 lt_dtype compute, double p0, double p1);
  /* out[i] = op(a[i * sa], b[i * sb]) for i < n < LT_PAR_MIN over flat buffers of dtype dt,
  ** with sa, sb 1 (a dense operand) or 0 (a single element), for add, sub, mul and div on
  ** floats: the small op's path, with nothing to broadcast or convert */
  void (*binary_flat)(int op, lt_dtype dt, int64_t n, void *out, const void *a, int sa,
                      const void *b, int sb);
  void (*unary)(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, double p0, double p1);
  /* out = f(a) and dout = f'(a) in one pass, for the ops whose derivative shares most of the
  ** value's work (gelu, erf form); out and dout of a's float dtype and shape. NULL where a
  ** backend has none: the op layer then saves a and the backward recomputes */
  void (*unary_pair)(lt_ctx *ctx, int op, lt_tensor *out, lt_tensor *dout, const lt_tensor *a);
  /* out = f(g, a, b) for the fused two-operand gradient formulas of the binary ops (the LT_T_*
  ** codes), all of out's float dtype and broadcast to out's shape */
  void (*ternary)(lt_ctx *ctx, enum ltK_ternary_op op, lt_tensor *out, const lt_tensor *g,
                  const lt_tensor *a, const lt_tensor *b);
  /* out = s + p a b (LT_ADDC_MUL), s + p a / b (LT_ADDC_DIV), s + p (a - s) where |p| < 0.5
  ** else a - (a - s)(1 - p) (LT_LERP_SCALAR; b unused), the same with the weight b in place
  ** of p (LT_LERP_TENSOR); one float dtype, all broadcast to out's shape, out possibly s. Each
  ** value has the bits of those steps run as separate binary ops. NULL where a backend has
  ** none: the op layer then runs the separate ops */
  void (*addc)(lt_ctx *ctx, enum ltK_addc_op op, lt_tensor *out, const lt_tensor *s,
               const lt_tensor *a, const lt_tensor *b, double p);
  /* out = cond ? a : b elementwise, cond bool, a and b of out's dtype, all broadcast to out */
  void (*where)(lt_ctx *ctx, lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
                const lt_tensor *b);
  /* c[s] = alpha * a[s] @ b[s] + beta * c[s] for every s of the nb batch dims `batch`, a and b
  ** broadcast over them and c's batch dims of size 1 summed into (a gradient); each operand
  ** with the matrix dims it has, a or b read transposed when marked */
  void (*matmul)(lt_ctx *ctx, int nb, const int64_t *batch, double alpha, const lt_tensor *a,
                 ltK_mat_dims da, const lt_tensor *b, ltK_mat_dims db, double beta, lt_tensor *c,
                 ltK_mat_dims dc);
  /* whether matmul reads every matrix of t as laid out (else the op passes a contiguous copy) */
  bool (*matmul_ready)(const lt_tensor *t, ltK_mat_dims d);
  /* c = alpha * a @ b + beta * bias in every row of c (addmm with a Linear layer's bias): a, b,
  ** c 2-D as matmul_ready has them, bias c's n columns at unit stride, beta non-zero; the bits
  ** of copying bias into c and calling matmul with beta. False (nothing written) for a layout
  ** the backend does not take this way, and NULL where it has none: the op layer then does
  ** just that */
  bool (*addmm_row)(lt_ctx *ctx, double alpha, const lt_tensor *a, const lt_tensor *b,
                    double beta, const lt_tensor *bias, lt_tensor *c);
  /* out = op folded over the dims of a marked in mask; out is contiguous with the kept dims
  ** in order (keepdim or not), of the dtype the op layer chose; `name` is for messages */
  int (*reduce)(lt_ctx *ctx, const char *name, enum lt_redop op, lt_tensor *out,
                const lt_tensor *a, const bool *mask);
  /* out (one element, a's dtype) = the sum of the squares of a's elements (a contiguous,
  ** float32 or float64, not empty): the bits of reduce's sum over a squared copy of a, without
  ** writing one; -1 on OOM. NULL where the backend has none: the op layer squares and sums */
  int (*sumsq)(lt_ctx *ctx, lt_tensor *out, const lt_tensor *a);
  /* gi[m][j] = g[m] * (the product of x[m][k] for k != j) over `rows` contiguous rows of n
  ** (x, g, gi contiguous, one float dtype; zeros handled exactly) */
  void (*prod_backward)(lt_tensor *gi, const lt_tensor *x, const lt_tensor *g, int64_t rows,
                        int64_t n);
  /* whether a float tensor holds a NaN (a non-contiguous one: assumed to) */
  bool (*has_nan)(const lt_tensor *t);
  /* the first best element along dim of a (size > 0): idx (int64) gets its index + base and
  ** values (may be NULL) its value; idx and values have a's shape with stride 0 along dim */
  void (*search_dim)(lt_ctx *ctx, bool is_max, lt_tensor *idx, lt_tensor *values,
                     const lt_tensor *a, int dim, int64_t base);
  /* the same over all of the contiguous a (numel > 0): out's one int64 element gets it */
  int (*search_flat)(lt_ctx *ctx, const char *name, bool is_max, lt_tensor *out,
                     const lt_tensor *a, int64_t base);
  /* y = softmax or log_softmax of x along dim (y fresh, x's float dtype and shape) */
  void (*softmax)(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool log_);
  /* gi from the forward's output y and the gradient g (y's dtype and shape) */
  void (*softmax_backward)(lt_ctx *ctx, lt_tensor *gi, const lt_tensor *y, const lt_tensor *g,
                           int dim, bool log_);
  /* y = running sum of x along dim, from the end when reverse; y is float for a float x (its
  ** dtype), int64 otherwise */
  void (*cumsum)(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool reverse);
  /* the first k of each row of a along dim in ascending (descending) order, NaN the largest,
  ** ties in position order: indices (int64) get their positions + base and values (may be
  ** NULL) their values; both have a's shape but k along dim (k = their size there, <= a's);
  ** `name` is for messages (out of memory) */
  int (*sort)(lt_ctx *ctx, const char *name, lt_tensor *values, lt_tensor *indices,
              const lt_tensor *a, int dim, bool descending, int64_t base);
  /* out (int64, values' shape) = where each value goes in its row of sorted (the last dim,
  ** ascending in sort's order): the first position whose element is not below it (after every
  ** equal one when right), + base. sorted has values' leading dims (stride 0 where shared) and
  ** its own length along the last; both one dtype; a 0-d values is one row of one */
  void (*searchsorted)(lt_ctx *ctx, lt_tensor *out, const lt_tensor *sorted,
                       const lt_tensor *values, bool right, int64_t base);
  /* The distinct values of x (contiguous, 1-d, not empty) in sort's order and equality (-0 as
  ** +0, every NaN one value, the largest), when there are at most cap of them: values[0, m)
  ** (x's dtype, cap long) gets each class's first element, counts[0, m) (int64, cap long; may
  ** be NULL) their sizes, inverse[i] (int64, x's length; may be NULL) the class of x[i] + base.
  ** Returns m; -1 when x has more than cap distinct values (the outputs then hold nothing of
  ** use); -2 when out of memory. NULL where a backend has none: the op layer sorts instead */
  int64_t (*unique_few)(lt_ctx *ctx, const lt_tensor *x, int64_t cap, lt_tensor *values,
                        lt_tensor *counts, lt_tensor *inverse, int64_t base);
  /* -- indexing, gather/scatter, masked ops, embedding */
  /* whether each value of the int64 index but those equal to *skip (skip may be NULL) is in
  ** [lo, hi): *max gets the largest (INT64_MIN: none) and, when false, *bad the first value
  ** that is not (row-major) */
  bool (*index_range)(lt_ctx *ctx, const lt_tensor *index, int64_t lo, int64_t hi,
                      const int64_t *skip, int64_t *bad, int64_t *max);
  /* out[p] = src[p with p[dim] = index[p] - base]: index (int64, in range) has out's shape, src
  ** out's rank (index_select and embedding pass an index expanded along the other dims) */
  void (*gather)(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src, int dim,
                 const lt_tensor *index, int64_t base);
  /* self[p with p[dim] = index[p] - base] = src[p] (+= if accumulate) over index's positions in
  ** order (repeats allowed: the last write wins); src covers them or is 0-d, one value for all */
  void (*scatter)(lt_ctx *ctx, lt_tensor *self, int dim, const lt_tensor *index,
                  const lt_tensor *src, bool accumulate, int64_t base);
  /* out = mask ? v : src, src and the bool mask broadcast to out's shape, v fits out's dtype */
  void (*masked_fill)(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src, const lt_tensor *mask,
                      double v);
  /* the number of true elements of a bool tensor */
  int64_t (*mask_count)(const lt_tensor *mask);
  /* out (1-d, contiguous, mask_count long) = src's elements where mask (src's shape) is set */
  void (*masked_select)(lt_tensor *out, const lt_tensor *src, const lt_tensor *mask);
  /* its reverse: dst's elements where mask (dst's shape) is set get src's (1-d) in turn */
  void (*masked_scatter)(lt_tensor *dst, const lt_tensor *mask, const lt_tensor *src);
  /* -- convolution, pooling, norms */
  /* y = conv(x, w) (+ b, may be NULL) of geometry g, transposed or not: x, w, b contiguous,
  ** y fresh, one float dtype; -1 only when a work buffer cannot be had (`name` for it) */
  int (*conv)(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *y,
              const lt_tensor *x, const lt_tensor *w, const lt_tensor *b);
  /* the gradients of that y for dy (contiguous, y's shape) into fresh dx, dw, db (x's, w's
  ** and the bias's shapes; any may be NULL) */
  int (*conv_backward)(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *dx,
                       lt_tensor *dw, lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                       const lt_tensor *dy);
  /* y = the pool g of each plane of x (contiguous), y fresh; max kinds also write idx (int64,
  ** y's shape; may be NULL): the flat position ih*W + iw of each max in its plane */
  void (*pool)(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *y, lt_tensor *idx,
               const lt_tensor *x);
  /* dx (fresh, the input's shape) = the gradient of that pool for dy (contiguous, y's shape);
  ** max kinds route it through the forward's idx */
  void (*pool_backward)(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *dx, const lt_tensor *dy,
                        const lt_tensor *idx);
  /* y = batch norm of x (N, C, ...) with the batch's statistics (training) or the running ones;
  ** mean, invstd (fresh float64 (C)) get those used; training updates running_mean/var (may be
  ** NULL, any stride) by momentum with the unbiased variance. x, w, b contiguous, y fresh */
  void (*batch_norm)(lt_ctx *ctx, lt_tensor *y, lt_tensor *mean, lt_tensor *invstd,
                     const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
                     lt_tensor *running_mean, lt_tensor *running_var, bool training,
                     double momentum, double eps);
  /* its gradients for dy (contiguous) into fresh dx, dw, db (any may be NULL); -1 on OOM */
  int (*batch_norm_backward)(lt_ctx *ctx, lt_tensor *dx, lt_tensor *dw, lt_tensor *db,
                             const lt_tensor *x, const lt_tensor *w, const lt_tensor *dy,
                             const lt_tensor *mean, const lt_tensor *invstd, bool training);
  /* y = layer, rms or group norm g of the rows of x (contiguous; w, b contiguous, may be
  ** NULL), y fresh; mean, rstd (fresh float64 (R)) get each row's statistics */
  void (*row_norm)(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *y, lt_tensor *mean,
                   lt_tensor *rstd, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b);
  /* its gradients for dy (contiguous) into fresh dx, dw, db (any may be NULL); -1 on OOM */
  int (*row_norm_backward)(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *dx, lt_tensor *dw,
                           lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                           const lt_tensor *dy, const lt_tensor *mean, const lt_tensor *rstd);
  /* -- attention */
  /* out (fresh, contiguous (*, L, Ev)) = softmax(q k^T scale + mask) v of geometry g, lse
  ** (fresh, contiguous (*, L), q's dtype) each row's log-sum-exp; mask (may be NULL) bool
  ** (true: takes part) or q's dtype (added). A row with no key taking part gives NaN, S = 0
  ** gives zeros. -1 only when a work tile cannot be had */
  int (*sdpa)(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *out, lt_tensor *lse,
              const lt_tensor *q, const lt_tensor *k, const lt_tensor *v, const lt_tensor *mask);
  /* its gradients for dout (out's shape) into fresh dq, dk, dv of the batch shape, from the
  ** forward's out and lse (the weights are recomputed); dout, dq, dk, dv have unit stride along
  ** their last dim and any strides elsewhere (as q, k, v); -1 as the forward */
  int (*sdpa_backward)(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *dq, lt_tensor *dk,
                       lt_tensor *dv, const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                       const lt_tensor *mask, const lt_tensor *out, const lt_tensor *lse,
                       const lt_tensor *dout);
  /* -- dropout, losses, random fills, optimiser steps */
  /* y = x * mask, mask[i] = 1/(1-p) with probability 1-p (one draw of g each, in order) or 0;
  ** y, mask, x contiguous of x's float dtype */
  void (*dropout)(lt_tensor *y, lt_tensor *mask, const lt_tensor *x, double p, lt_generator *g);
  /* the loss a of x (contiguous) for target (int64, in range, N*S): y gets each row's (none) or
  ** the reduced 0-d value, lse (float64, N*S; logits only) each row's log-sum-exp; -1 on OOM */
  int (*class_loss)(lt_ctx *ctx, lt_tensor *y, lt_tensor *lse, const lt_tensor *x,
                    const lt_tensor *target, const lt_tensor *weight, ltK_class_loss *a);
  /* dx (fresh, x's shape) = its gradient for g (contiguous: y's shape) from the saved x, lse */
  void (*class_loss_backward)(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *g,
                              const lt_tensor *x, const lt_tensor *target,
                              const lt_tensor *weight, const lt_tensor *lse,
                              const ltK_class_loss *a);
  /* y = the resampling g of x (ltK_resample), y fresh */
  void (*resample)(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, const ltK_resample *g);
  /* dx (zeroed, x's shape) += its transpose applied to dy (y's shape, contiguous): each source
  ** row gets its outputs' gradients in output order, the same at any thread count */
  void (*resample_backward)(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *dy,
                            const ltK_resample *g);
  /* the regression loss `kind` (enum lt_regression; p its beta or delta) of a (input) and b
  ** (target), contiguous, one float dtype and shape: each element's into out (a's shape) or,
  ** out NULL, their sum into *sum, the same at any thread count; -1 only on OOM */
  int (*regression_loss)(lt_ctx *ctx, int kind, lt_tensor *out, double *sum,
                         const lt_tensor *a, const lt_tensor *b, double p);
  /* da (fresh, a's shape) = scale * g * dloss/da (side 0) or dloss/db (side 1), g contiguous:
  ** one value per element of a, or a single value for all */
  void (*regression_loss_backward)(lt_ctx *ctx, int kind, int side, lt_tensor *da,
                                   const lt_tensor *g, double scale, const lt_tensor *a,
                                   const lt_tensor *b, double p);
  /* random fills of t (any layout) in row-major order from g, which advances on the host:
  ** uniform in [lo, hi), normal, integers in [lo, hi), bernoulli(p) as 1/0, a permutation
  ** of 0..n-1 (t int64, 1-d, contiguous) */
  void (*uniform)(lt_tensor *t, double lo, double hi, lt_generator *g);
  void (*normal)(lt_ctx *ctx, lt_tensor *t, double mean, double std, lt_generator *g);
  void (*randint)(lt_tensor *t, int64_t lo, int64_t hi, lt_generator *g);
  void (*bernoulli)(lt_tensor *t, double p, lt_generator *g);
  void (*randperm)(lt_tensor *t, lt_generator *g);
  /* one fused update of parameter p from gradient g and its state (optim.h): all contiguous,
  ** p's shape and float dtype, no two sharing memory; state not used may be NULL */
  void (*sgd_step)(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                   const lt_sgd_opts *o);
  void (*adam_step)(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m, lt_tensor *v,
                    lt_tensor *vmax, const lt_adam_opts *o);
  void (*rmsprop_step)(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                       lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o);
  void (*adagrad_step)(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                       const lt_adagrad_opts *o);
  /* deterministic fills of a fresh 1-d contiguous t: t[i] = start + step * i (in double; exact
  ** for integral int64), the same in wrapping int64, and linspace from start to end */
  void (*arange)(lt_tensor *t, double start, double step);
  void (*arange_int)(lt_tensor *t, int64_t start, int64_t step);
  void (*linspace)(lt_tensor *t, double start, double end);
  /* -- devices: memory, and copies between a device and the host (the op layer moves data
  ** between two devices through the host, as for a discrete device) */
  /* how many devices of this kind are present */
  int (*device_count)(void);
  /* nbytes of memory on device `index` into *data; 0, or -1 with the message */
  int (*alloc)(lt_ctx *ctx, int index, size_t nbytes, void **data);
  void (*release)(int index, void *data, size_t nbytes);
  /* nbytes from device memory to the host, or back (contiguous both sides); to_host returns
  ** after the device's pending work on src is done */
  int (*to_host)(lt_ctx *ctx, int index, void *host, const void *src, size_t nbytes);
  int (*from_host)(lt_ctx *ctx, int index, void *dst, const void *host, size_t nbytes);
} ltK_backend;

extern const ltK_backend ltC_backend;
/* The entries' names in the struct's order, NULL-terminated (cpu/backend.c). */
extern const char *const ltC_backend_entries[];
/* cpu kernels behind the table, in src/cpu/ (binary/unary in binary.c and unary.c)
** (the table itself in cpu/backend.c) */
void ltC_copy(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src);
void ltC_fill(lt_ctx *ctx, lt_tensor *dst, double v);
void ltC_binary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, const lt_tensor *b,
                lt_dtype compute, double p0, double p1);
void ltC_binary_flat(int op, lt_dtype dt, int64_t n, void *out, const void *a, int sa,
                     const void *b, int sb);
void ltC_unary(lt_ctx *ctx, int op, lt_tensor *out, const lt_tensor *a, double p0, double p1);
void ltC_unary_pair(lt_ctx *ctx, int op, lt_tensor *out, lt_tensor *dout, const lt_tensor *a);
void ltC_ternary(lt_ctx *ctx, enum ltK_ternary_op op, lt_tensor *out, const lt_tensor *g,
                 const lt_tensor *a, const lt_tensor *b);
void ltC_addc(lt_ctx *ctx, enum ltK_addc_op op, lt_tensor *out, const lt_tensor *s,
              const lt_tensor *a, const lt_tensor *b, double p);
void ltC_where(lt_ctx *ctx, lt_tensor *out, const lt_tensor *cond, const lt_tensor *a,
               const lt_tensor *b);
void ltC_matmul(lt_ctx *ctx, int nb, const int64_t *batch, double alpha, const lt_tensor *a,
                ltK_mat_dims da, const lt_tensor *b, ltK_mat_dims db, double beta, lt_tensor *c,
                ltK_mat_dims dc);
bool ltC_matmul_ready(const lt_tensor *t, ltK_mat_dims d);
bool ltC_addmm_row(lt_ctx *ctx, double alpha, const lt_tensor *a, const lt_tensor *b,
                   double beta, const lt_tensor *bias, lt_tensor *c);
int ltC_reduce(lt_ctx *ctx, const char *name, enum lt_redop op, lt_tensor *out,
               const lt_tensor *a, const bool *mask);
int ltC_sumsq(lt_ctx *ctx, lt_tensor *out, const lt_tensor *a);
void ltC_prod_backward(lt_tensor *gi, const lt_tensor *x, const lt_tensor *g, int64_t rows,
                       int64_t n);
bool ltC_has_nan(const lt_tensor *t);
void ltC_search_dim(lt_ctx *ctx, bool is_max, lt_tensor *idx, lt_tensor *values,
                    const lt_tensor *a, int dim, int64_t base);
int ltC_search_flat(lt_ctx *ctx, const char *name, bool is_max, lt_tensor *out,
                    const lt_tensor *a, int64_t base);
void ltC_softmax(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool log_);
void ltC_softmax_backward(lt_ctx *ctx, lt_tensor *gi, const lt_tensor *y, const lt_tensor *g,
                          int dim, bool log_);
void ltC_cumsum(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, int dim, bool reverse);
int ltC_sort(lt_ctx *ctx, const char *name, lt_tensor *values, lt_tensor *indices,
             const lt_tensor *a, int dim, bool descending, int64_t base);
int64_t ltC_unique_few(lt_ctx *ctx, const lt_tensor *x, int64_t cap, lt_tensor *values,
                       lt_tensor *counts, lt_tensor *inverse, int64_t base);
void ltC_searchsorted(lt_ctx *ctx, lt_tensor *out, const lt_tensor *sorted,
                      const lt_tensor *values, bool right, int64_t base);
/* -- indexing, gather/scatter, masked ops, embedding */
bool ltC_index_range(lt_ctx *ctx, const lt_tensor *index, int64_t lo, int64_t hi,
                     const int64_t *skip, int64_t *bad, int64_t *max);
void ltC_gather(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src, int dim,
                const lt_tensor *index, int64_t base);
void ltC_scatter(lt_ctx *ctx, lt_tensor *self, int dim, const lt_tensor *index,
                 const lt_tensor *src, bool accumulate, int64_t base);
void ltC_masked_fill(lt_ctx *ctx, lt_tensor *out, const lt_tensor *src,
                     const lt_tensor *mask, double v);
int64_t ltC_mask_count(const lt_tensor *mask);
void ltC_masked_select(lt_tensor *out, const lt_tensor *src, const lt_tensor *mask);
void ltC_masked_scatter(lt_tensor *dst, const lt_tensor *mask, const lt_tensor *src);
/* -- convolution, pooling, norms (cpu/conv.c, cpu/pool.c, cpu/norm.c) */
int ltC_conv(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *y,
             const lt_tensor *x, const lt_tensor *w, const lt_tensor *b);
int ltC_conv_backward(lt_ctx *ctx, const char *name, const ltK_conv_geom *g, lt_tensor *dx,
                      lt_tensor *dw, lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                      const lt_tensor *dy);
void ltC_pool(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *y, lt_tensor *idx,
              const lt_tensor *x);
void ltC_pool_backward(lt_ctx *ctx, const ltK_pool_geom *g, lt_tensor *dx, const lt_tensor *dy,
                       const lt_tensor *idx);
void ltC_batch_norm(lt_ctx *ctx, lt_tensor *y, lt_tensor *mean, lt_tensor *invstd,
                    const lt_tensor *x, const lt_tensor *w, const lt_tensor *b,
                    lt_tensor *running_mean, lt_tensor *running_var, bool training,
                    double momentum, double eps);
int ltC_batch_norm_backward(lt_ctx *ctx, lt_tensor *dx, lt_tensor *dw, lt_tensor *db,
                            const lt_tensor *x, const lt_tensor *w, const lt_tensor *dy,
                            const lt_tensor *mean, const lt_tensor *invstd, bool training);
void ltC_row_norm(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *y, lt_tensor *mean,
                  lt_tensor *rstd, const lt_tensor *x, const lt_tensor *w, const lt_tensor *b);
int ltC_row_norm_backward(lt_ctx *ctx, const ltK_norm_geom *g, lt_tensor *dx, lt_tensor *dw,
                          lt_tensor *db, const lt_tensor *x, const lt_tensor *w,
                          const lt_tensor *dy, const lt_tensor *mean, const lt_tensor *rstd);
/* -- attention (cpu/attention.c) */
int ltC_sdpa(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *out, lt_tensor *lse,
             const lt_tensor *q, const lt_tensor *k, const lt_tensor *v, const lt_tensor *mask);
int ltC_sdpa_backward(lt_ctx *ctx, const ltK_sdpa_geom *g, lt_tensor *dq, lt_tensor *dk,
                      lt_tensor *dv, const lt_tensor *q, const lt_tensor *k, const lt_tensor *v,
                      const lt_tensor *mask, const lt_tensor *out, const lt_tensor *lse,
                      const lt_tensor *dout);
/* -- dropout, losses, random fills, optimiser steps */
void ltC_dropout(lt_tensor *y, lt_tensor *mask, const lt_tensor *x, double p,
                 lt_generator *g);
int ltC_class_loss(lt_ctx *ctx, lt_tensor *y, lt_tensor *lse, const lt_tensor *x,
                   const lt_tensor *target, const lt_tensor *weight, ltK_class_loss *a);
void ltC_class_loss_backward(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *g,
                             const lt_tensor *x, const lt_tensor *target,
                             const lt_tensor *weight, const lt_tensor *lse,
                             const ltK_class_loss *a);
void ltC_resample(lt_ctx *ctx, lt_tensor *y, const lt_tensor *x, const ltK_resample *g);
void ltC_resample_backward(lt_ctx *ctx, lt_tensor *dx, const lt_tensor *dy,
                           const ltK_resample *g);
int ltC_regression_loss(lt_ctx *ctx, int kind, lt_tensor *out, double *sum, const lt_tensor *a,
                        const lt_tensor *b, double p);
void ltC_regression_loss_backward(lt_ctx *ctx, int kind, int side, lt_tensor *da,
                                  const lt_tensor *g, double scale, const lt_tensor *a,
                                  const lt_tensor *b, double p);
void ltC_uniform(lt_tensor *t, double lo, double hi, lt_generator *g);
void ltC_normal(lt_ctx *ctx, lt_tensor *t, double mean, double std, lt_generator *g);
void ltC_randint(lt_tensor *t, int64_t lo, int64_t hi, lt_generator *g);
void ltC_bernoulli(lt_tensor *t, double p, lt_generator *g);
void ltC_randperm(lt_tensor *t, lt_generator *g);
void ltC_sgd_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *buf,
                  const lt_sgd_opts *o);
void ltC_adam_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *m, lt_tensor *v,
                   lt_tensor *vmax, const lt_adam_opts *o);
void ltC_rmsprop_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sq,
                      lt_tensor *gavg, lt_tensor *buf, const lt_rmsprop_opts *o);
void ltC_adagrad_step(lt_ctx *ctx, lt_tensor *p, const lt_tensor *g, lt_tensor *sum,
                      const lt_adagrad_opts *o);
void ltC_arange(lt_tensor *t, double start, double step);
void ltC_arange_int(lt_tensor *t, int64_t start, int64_t step);
void ltC_linspace(lt_tensor *t, double start, double end);
int ltC_device_count(void);

/* The op codes (enum lt_binop, lt_unop, append-only) are public: lantern_ops.h. */

/* ============================================================ autograd
** A node is one recorded op. It holds edges to the nodes of its differentiable inputs and
** tensors saved for backward (saved as detached aliases plus the storage version at save
** time, so a node never keeps its own output's graph alive). backward() gets one gradient
** per output (NULL = zero) and writes one new-reference gradient per input (NULL = none).
** It runs with grad mode off and may call any core op. */

typedef struct ltG_edge {
  lt_node *node;
  int input_nr;
} ltG_edge;

typedef int (*ltG_backward_fn)(lt_ctx *ctx, lt_node *self, lt_tensor *const *grad_out,
                               lt_tensor **grad_in);

typedef struct ltG_node_type {
  const char *name;          /* "MulBackward0" */
  ltG_backward_fn backward;
  void (*release)(lt_node *self);   /* frees op-specific resources in extra (may be NULL) */
} ltG_node_type;

typedef struct ltG_saved {
  lt_tensor *t;              /* detached alias, or NULL */
  uint32_t version;
  bool was_output;
  const char *owner;         /* for the error message */
} ltG_saved;

typedef int (*ltG_grad_hook_fn)(lt_ctx *ctx, void *ud, lt_tensor *grad, lt_tensor **replace);

struct ltG_hook {
  ltG_grad_hook_fn fn;
  void *ud;
  void (*free_ud)(void *ud);
  int output_nr;             /* for hooks on a node's output */
  struct ltG_hook *next;
};

struct lt_node {
  long refcount;
  const ltG_node_type *type;
  uint64_t seq;
  int n_in;                  /* edges (one per differentiable input) */
  int n_out;
  ltG_edge *next;
  int n_saved;
  ltG_saved *saved;
  bool released;             /* saved tensors already freed by a backward pass */
  ltG_hook *pre_hooks;        /* run on an output's grad before backward (tensor hooks) */
  lt_tensor **retain;        /* weak per-output tensors with retains_grad (n_out), or NULL */
  /* per-output input metadata so gradients can be zero-filled / reduced */
  lt_dtype out_dtype;
  /* engine scratch, valid during one backward pass */
  int eng_deps;
  lt_tensor **eng_buf;
  const void *eng_owner;     /* the pass that set eng_buf (a hook may start another pass) */
  void *extra;               /* op-specific data (extra_size bytes, zeroed) */
};

/* If grad mode is on and any input requires grad: creates a node of `type` with one edge per
** input (inputs may be NULL), `extra_size` bytes of zeroed op data and `n_saved` save slots,
** makes outputs[i] its output i (requires_grad, grad_fn, output_nr), and stores it in *node.
** Otherwise *node = NULL. Returns -1 only on out-of-memory. */
int ltG_record(lt_ctx *ctx, const ltG_node_type *type, int n_in, lt_tensor *const *inputs,
               int n_out, lt_tensor *const *outputs, size_t extra_size, int n_saved,
               lt_node **node);
/* Whether any of the inputs would be recorded (grad mode on and requires_grad). */
bool ltG_needs_grad(const lt_ctx *ctx, int n, lt_tensor *const *inputs);
/* Saves t (may be NULL) in slot i of node. `is_output`: t is an output of this node. */
int ltG_save(lt_node *node, int i, const lt_tensor *t, bool is_output);
/* Fetches saved slot i (borrowed), checking it was not modified in place or freed. */
int ltG_saved_get(lt_ctx *ctx, lt_node *node, int i, lt_tensor **t);
void ltG_node_retain(lt_node *n);
void ltG_node_release(lt_node *n);
/* Makes t a tensor without history: releases its grad_fn and clears the weak retain_grad slot
** that points at t (any other path leaves the slot dangling once t dies). */
void ltG_drop_grad_fn(lt_tensor *t);
/* Whether input edge i of node needs a gradient. */
static inline bool ltG_needs_input_grad(const lt_node *n, int i) { return n->next[i].node != NULL; }

/* Reduces grad (broadcast result) back to shape (ndim,size) by summing; new ref in *out. */
int ltO_sum_to(lt_ctx *ctx, lt_tensor **out, lt_tensor *grad, int ndim, const int64_t *size);
/* Adds a hook on tensor t's gradient (leaf: before accumulation; non-leaf: before its node). */
int ltG_add_hook(lt_ctx *ctx, lt_tensor *t, ltG_grad_hook_fn fn, void *ud, void (*free_ud)(void *));
int ltG_retain_grad(lt_ctx *ctx, lt_tensor *t);

/* ================================================================= ops
** The ops themselves are the public API in include/lantern_ops.h (included above); what
** follows are the op layer's internal helpers. All ops run the autograd recording when needed. */

/* After an in-place overwrite (fill_, zero_, the random fills) of t: its values no longer
** depend on its history, so when t requires grad it gets a node of `type` whose gradient to
** that history is zero, as in PyTorch. -1 only on out-of-memory. */
int ltG_record_overwrite(lt_ctx *ctx, const ltG_node_type *type, lt_tensor *t);
/* A view made by a view op: records its root base for in-place autograd. */
void ltG_set_view_base(lt_tensor *view, lt_tensor *in);
/* A view whose base's graph was rewritten through another view gets its grad_fn remade from
** the base (AsStridedBackward0), as PyTorch does; 0 or -1 on out-of-memory. */
int ltG_refresh_view(lt_ctx *ctx, lt_tensor *t);
/* The backward of such nodes: a zero gradient for input 0. */
int ltO_zero_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi);
/* t as a contiguous tensor of dtype dt (t itself when it already is one): the form a kernel's
** backward reads an incoming gradient in. */
int ltO_dense_as(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt);


#endif
