/*
** linalg.c -- matrix products: mm, bmm, matmul, addmm, mv, dot, outer and their backward
** functions, all one batched product of the device's kernel table (cpu/gemm.c on the cpu).
** Each operand is passed with the matrix dims it has; a vector lacks one. A transposed dense
** input stays a transposed view (the kernel reads it with swapped strides), and so does the
** gradient made for it.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* ------------------------------------------------------------ operand preparation */

/* t itself (new ref) when BLAS can read it, else a contiguous copy made without recording. */
static int ready(lt_ctx *ctx, lt_tensor *t, bool has_r, bool has_c, lt_tensor **out) {
  if (ltK_kernels(t)->matmul_ready(t, (ltK_mat_dims){.has_rows = has_r, .has_cols = has_c})) {
    *out = lt_retain(t);
    return 0;
  }
  bool old = ctx->grad_enabled;
  ctx->grad_enabled = false;
  int rc = lt_contiguous(ctx, out, t);
  ctx->grad_enabled = old;
  return rc;
}

/* Whether t is dense with its last two dims swapped (a transposed contiguous matrix batch). */
static bool transposed_dense(const lt_tensor *t) {
  if (t->ndim < 2) return false;
  int64_t sz[LT_MAX_DIMS], st[LT_MAX_DIMS];
  memcpy(sz, t->size, sizeof sz);
  memcpy(st, t->stride, sizeof st);
  int r = t->ndim - 2, c = t->ndim - 1;
  int64_t x = sz[r];
  sz[r] = sz[c];
  sz[c] = x;
  x = st[r];
  st[r] = st[c];
  st[c] = x;
  if (sz[r] == 1 || sz[c] == 1) return false;   /* nothing to gain */
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (sz[i] != 1 && st[i] != s) return false;
    s *= sz[i];
  }
  return true;
}

/* New uninitialised tensor of shape (ndim,size); with `transposed` its last two dims are laid
** out column-major (so a gradient matches a transposed-view parameter and needs no copy). */
static int empty_layout(lt_ctx *ctx, lt_tensor **out, const lt_tensor *like, lt_dtype dt,
                        int ndim, const int64_t *size, bool transposed) {
  if (!transposed) return ltO_empty_as(ctx, out, like, dt, ndim, size);
  int64_t sz[LT_MAX_DIMS], st[LT_MAX_DIMS];
  memcpy(sz, size, (size_t)ndim * sizeof *sz);
  sz[ndim - 2] = size[ndim - 1];
  sz[ndim - 1] = size[ndim - 2];
  lt_tensor *t;
  if (ltO_empty_as(ctx, &t, like, dt, ndim, sz)) return -1;
  memcpy(st, t->stride, (size_t)ndim * sizeof *st);
  int64_t x = st[ndim - 2];
  st[ndim - 2] = st[ndim - 1];
  st[ndim - 1] = x;
  *out = ltB_alias(t, ndim, size, st, t->offset);
  lt_release(t);
  if (!*out) return ltB_fail(ctx, "matmul: out of memory");
  return 0;
}

/* ------------------------------------------------------------ the product node */

typedef struct {
  bool a_r, a_c, b_r, b_c, o_r, o_c;   /* which matrix dims each operand has */
  bool a_t, b_t;                       /* input was a transposed dense matrix batch */
  int off;                             /* index of `a` among the inputs (addmm: 1) */
  double alpha, beta;
  lt_dtype dt;
  int a_nd, b_nd, in_nd;
  int64_t a_size[LT_MAX_DIMS], b_size[LT_MAX_DIMS], in_size[LT_MAX_DIMS];
} mm_extra;

static ltK_mat_dims dims(bool has_rows, bool has_cols, bool transposed) {
  return (ltK_mat_dims){.has_rows = has_rows, .has_cols = has_cols, .transposed = transposed};
}

/* Runs out = alpha * a @ b + beta * out over out's batch dims. */
static void mm_compute(lt_ctx *ctx, const mm_extra *e, lt_tensor *a, lt_tensor *b,
                       lt_tensor *out, double alpha, double beta) {
  int nb = out->ndim - (int)e->o_r - (int)e->o_c;
  ltK_kernels(out)->matmul(ctx, nb, out->size, alpha, a, dims(e->a_r, e->a_c, false), b,
                           dims(e->b_r, e->b_c, false), beta, out, dims(e->o_r, e->o_c, false));
}

static int mm_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const mm_extra *e = self->extra;
  lt_tensor *a = NULL, *b = NULL, *g = NULL;
  bool need_in = e->off > 0 && ltG_needs_input_grad(self, 0);
  bool need_a = ltG_needs_input_grad(self, e->off);
  bool need_b = ltG_needs_input_grad(self, e->off + 1);
  if (need_b && ltG_saved_get(ctx, self, 0, &a)) return -1;
  if (need_a && ltG_saved_get(ctx, self, 1, &b)) return -1;
  if (ready(ctx, gout[0], e->o_r, e->o_c, &g)) return -1;
  int nb = g->ndim - (int)e->o_r - (int)e->o_c;
  int rc = 0;
  if (need_in) {
    lt_tensor *s;
    rc = ltO_sum_to(ctx, &s, gout[0], e->in_nd, e->in_size);
    if (!rc && e->beta != 1) {
      rc = lt_binary_scalar(ctx, &gin[0], LT_MUL, s, e->beta, false, false);
      lt_release(s);
    } else if (!rc) {
      gin[0] = s;
    }
  }
  if (!rc && need_a) {   /* dA = dC @ B^T, summed over A's broadcast batch dims */
    lt_tensor *ga;
    rc = empty_layout(ctx, &ga, g, e->dt, e->a_nd, e->a_size, e->a_t);
    if (!rc) {
      ltK_kernels(ga)->matmul(ctx, nb, g->size, e->alpha, g, dims(e->o_r, e->o_c, false), b,
                              dims(e->b_r, e->b_c, true), 0.0, ga, dims(e->a_r, e->a_c, false));
      gin[e->off] = ga;
    }
  }
  if (!rc && need_b) {   /* dB = A^T @ dC, summed over B's broadcast batch dims */
    lt_tensor *gb;
    rc = empty_layout(ctx, &gb, g, e->dt, e->b_nd, e->b_size, e->b_t);
    if (!rc) {
      ltK_kernels(gb)->matmul(ctx, nb, g->size, e->alpha, a, dims(e->a_r, e->a_c, true), g,
                              dims(e->o_r, e->o_c, false), 0.0, gb, dims(e->b_r, e->b_c, false));
      gin[e->off + 1] = gb;
    }
  }
  lt_release(g);
  return rc;
}

/* Node names follow what PyTorch shows as grad_fn for each form of the product. */
static const ltG_node_type mm_type = {"MmBackward0", mm_backward, NULL};
static const ltG_node_type bmm_type = {"BmmBackward0", mm_backward, NULL};
static const ltG_node_type addmm_type = {"AddmmBackward0", mm_backward, NULL};
static const ltG_node_type dot_type = {"DotBackward0", mm_backward, NULL};
static const ltG_node_type mv_type = {"MvBackward0", mm_backward, NULL};
static const ltG_node_type vm_type = {"SqueezeBackward3", mm_backward, NULL};
static const ltG_node_type batched_type = {"UnsafeViewBackward0", mm_backward, NULL};
static const ltG_node_type matbatch_type = {"CloneBackward0", mm_backward, NULL};
static const ltG_node_type matbatch_flat_type = {"TransposeBackward0", mm_backward, NULL};
static const ltG_node_type outer_type = {"MulBackward0", mm_backward, NULL};

static int check_dtypes(lt_ctx *ctx, const char *op, const lt_tensor *a, const lt_tensor *b) {
  char sa[256], sb[256];
  if (ltD_check_devices(ctx, op, a, b)) return -1;
  if (a->dtype != b->dtype)
    return ltB_fail(ctx, "%s: expected both operands to have the same dtype, got %s %s and %s %s",
                    op, lt_dtype_name(a->dtype), LT_SHAPE(a, sa), lt_dtype_name(b->dtype),
                    LT_SHAPE(b, sb));
  if (a->dtype == LT_BOOL)
    return ltB_fail(ctx, "%s: not implemented for bool tensors (shapes %s and %s)", op,
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  return 0;
}

/* Whether addmm's input t is one row of the product's n columns at unit stride, the same in
** every row: a Linear layer's bias, which the kernels can read as they store the product. */
static bool bias_row(const lt_tensor *t, int64_t n) {
  if (t->ndim == 0 || t->size[t->ndim - 1] != n || (t->ndim == 2 && t->size[0] != 1))
    return false;
  return n == 1 || t->stride[t->ndim - 1] == 1;
}

/* Computes the product described by e into a new tensor of shape (ndim,size), optionally
** starting from beta * input (addmm), and records `type`. */
static int mm_run(lt_ctx *ctx, lt_tensor **out, const ltG_node_type *type, mm_extra e,
                  lt_tensor *input, lt_tensor *a, lt_tensor *b, int ndim, const int64_t *size) {
  lt_tensor *ar = NULL, *br = NULL, *o = NULL;
  e.dt = a->dtype;
  e.a_t = transposed_dense(a);
  e.b_t = transposed_dense(b);
  e.a_nd = a->ndim;
  e.b_nd = b->ndim;
  memcpy(e.a_size, a->size, sizeof e.a_size);
  memcpy(e.b_size, b->size, sizeof e.b_size);
  if (input) {
    e.in_nd = input->ndim;
    memcpy(e.in_size, input->size, sizeof e.in_size);
  }
  if (ready(ctx, a, e.a_r, e.a_c, &ar)) return -1;
  if (ready(ctx, b, e.b_r, e.b_c, &br)) goto fail;
  if (ltO_empty_as(ctx, &o, a, e.dt, ndim, size)) goto fail;
  const ltK_backend *K = ltK_kernels(o);
  if (!(input && e.beta != 0 && K->addmm_row && bias_row(input, size[1]) &&
        K->addmm_row(ctx, e.alpha, ar, br, e.beta, input, o))) {
    double beta = 0;
    if (input && e.beta != 0) {
      K->copy(ctx, o, input);
      beta = e.beta;
    }
    mm_compute(ctx, &e, ar, br, o, input ? e.alpha : 1.0, beta);
  }

  lt_tensor *ins[3];
  int n_in = 0;
  if (input) ins[n_in++] = input;
  ins[n_in++] = a;
  ins[n_in++] = b;
  lt_node *node;
  if (ltG_record(ctx, type, n_in, ins, 1, &o, sizeof e, 2, &node)) goto fail;
  if (node) {
    *(mm_extra *)node->extra = e;
    if ((ltG_needs_input_grad(node, e.off + 1) && ltG_save(node, 0, ar, false)) ||
        (ltG_needs_input_grad(node, e.off) && ltG_save(node, 1, br, false))) {
      ltB_fail(ctx, "%s: out of memory saving for backward", type->name);
      goto fail;
    }
  }
  lt_release(ar);
  lt_release(br);
  *out = o;
  return 0;
fail:
  lt_release(ar);
  lt_release(br);
  lt_release(o);
  return -1;
}

static mm_extra flags(bool a_r, bool a_c, bool b_r, bool b_c, bool o_r, bool o_c) {
  mm_extra e;
  memset(&e, 0, sizeof e);
  e.a_r = a_r;
  e.a_c = a_c;
  e.b_r = b_r;
  e.b_c = b_c;
  e.o_r = o_r;
  e.o_c = o_c;
  e.alpha = 1;
  e.beta = 1;
  return e;
}

/* ------------------------------------------------------------ the ops */

int lt_mm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 2 || b->ndim != 2)
    return ltB_fail(ctx, "mm: expected two 2-D matrices, got shapes %s and %s", LT_SHAPE(a, sa),
                    LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "mm", a, b)) return -1;
  if (a->size[1] != b->size[0])
    return ltB_fail(ctx, "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                    "%lldx%lld; shapes %s and %s)", (long long)a->size[0],
                    (long long)a->size[1], (long long)b->size[0], (long long)b->size[1],
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  int64_t size[2] = {a->size[0], b->size[1]};
  return mm_run(ctx, out, &mm_type, flags(1, 1, 1, 1, 1, 1), NULL, a, b, 2, size);
}

int lt_bmm(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 3 || b->ndim != 3)
    return ltB_fail(ctx, "bmm: expected two 3-D tensors, got shapes %s and %s", LT_SHAPE(a, sa),
                    LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "bmm", a, b)) return -1;
  if (a->size[0] != b->size[0] || a->size[2] != b->size[1])
    return ltB_fail(ctx, "bmm: shapes %s and %s cannot be multiplied (expected batch2 of shape "
                    "[%lld, %lld, *])", LT_SHAPE(a, sa), LT_SHAPE(b, sb), (long long)a->size[0],
                    (long long)a->size[2]);
  int64_t size[3] = {a->size[0], a->size[1], b->size[2]};
  return mm_run(ctx, out, &bmm_type, flags(1, 1, 1, 1, 1, 1), NULL, a, b, 3, size);
}

int lt_mv(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *v) {
  char sa[256], sb[256];
  if (a->ndim != 2 || v->ndim != 1)
    return ltB_fail(ctx, "mv: expected a 2-D matrix and a 1-D vector, got shapes %s and %s",
                    LT_SHAPE(a, sa), LT_SHAPE(v, sb));
  if (check_dtypes(ctx, "mv", a, v)) return -1;
  if (a->size[1] != v->size[0])
    return ltB_fail(ctx, "mv: shapes %s and %s cannot be multiplied (%lld vs %lld)",
                    LT_SHAPE(a, sa), LT_SHAPE(v, sb), (long long)a->size[1],
                    (long long)v->size[0]);
  return mm_run(ctx, out, &mv_type, flags(1, 1, 1, 0, 1, 0), NULL, a, v, 1, a->size);
}

int lt_dot(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 1 || b->ndim != 1)
    return ltB_fail(ctx, "dot: expected two 1-D tensors, got shapes %s and %s", LT_SHAPE(a, sa),
                    LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "dot", a, b)) return -1;
  if (a->size[0] != b->size[0])
    return ltB_fail(ctx, "dot: shapes %s and %s have different numbers of elements",
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  return mm_run(ctx, out, &dot_type, flags(0, 1, 1, 0, 0, 0), NULL, a, b, 0, NULL);
}

int lt_outer(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  if (a->ndim != 1 || b->ndim != 1)
    return ltB_fail(ctx, "outer: expected two 1-D tensors, got shapes %s and %s",
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "outer", a, b)) return -1;
  int64_t size[2] = {a->size[0], b->size[0]};
  return mm_run(ctx, out, &outer_type, flags(1, 0, 0, 1, 1, 1), NULL, a, b, 2, size);
}

int lt_addmm(lt_ctx *ctx, lt_tensor **out, lt_tensor *input, lt_tensor *a, lt_tensor *b,
             double beta, double alpha) {
  char sa[256], sb[256], si[256], sp[256];
  if (a->ndim != 2 || b->ndim != 2)
    return ltB_fail(ctx, "addmm: expected two 2-D matrices, got shapes %s and %s",
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "addmm", a, b) || check_dtypes(ctx, "addmm", input, a)) return -1;
  if (a->size[1] != b->size[0])
    return ltB_fail(ctx, "addmm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                    "%lldx%lld; shapes %s and %s)", (long long)a->size[0],
                    (long long)a->size[1], (long long)b->size[0], (long long)b->size[1],
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  int64_t size[2] = {a->size[0], b->size[1]};
  int nd;
  int64_t bs[LT_MAX_DIMS];
  if (input->ndim > 2 ||
      ltB_broadcast_shapes(ctx, "addmm", input->ndim, input->size, 2, size, &nd, bs) ||
      bs[0] != size[0] || bs[1] != size[1])
    return ltB_fail(ctx, "addmm: input of shape %s cannot be broadcast to the product's shape "
                    "%s (from %s and %s)", LT_SHAPE(input, si),
                    ltB_sizes_str(2, size, sp, sizeof sp),
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (input->dtype == LT_INT64 && (alpha != (double)(int64_t)alpha ||
                                   beta != (double)(int64_t)beta))
    return ltB_fail(ctx, "addmm: alpha and beta must be integers for int64 tensors");
  mm_extra e = flags(1, 1, 1, 1, 1, 1);
  e.off = 1;
  e.alpha = alpha;
  e.beta = beta;
  return mm_run(ctx, out, &addmm_type, e, input, a, b, 2, size);
}

int lt_matmul(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b) {
  char sa[256], sb[256];
  int da = a->ndim, db = b->ndim;
  if (da == 0 || db == 0)
    return ltB_fail(ctx, "matmul: both arguments need to be at least 1-D, got shapes %s and %s",
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  if (check_dtypes(ctx, "matmul", a, b)) return -1;
  if (da == 1 && db == 1) return lt_dot(ctx, out, a, b);
  int64_t ka = a->size[da - 1], kb = db >= 2 ? b->size[db - 2] : b->size[0];
  if (ka != kb)
    return ltB_fail(ctx, "matmul: shapes %s and %s cannot be multiplied (%lld columns vs %lld "
                    "rows)", LT_SHAPE(a, sa), LT_SHAPE(b, sb), (long long)ka, (long long)kb);
  int nba = da > 2 ? da - 2 : 0, nbb = db > 2 ? db - 2 : 0, nb;
  int64_t size[LT_MAX_DIMS + 2];
  if (ltB_broadcast_shapes(ctx, "matmul", nba, a->size, nbb, b->size, &nb, size)) {
    /* name the full shapes, not just the batch parts */
    return ltB_fail(ctx, "matmul: batch dimensions of shapes %s and %s cannot be broadcast",
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  }
  int nd = nb;
  if (da >= 2) size[nd++] = a->size[da - 2];
  if (db >= 2) size[nd++] = b->size[db - 1];
  if (nd > LT_MAX_DIMS)
    return ltB_fail(ctx, "matmul: result of shapes %s and %s has too many dimensions",
                    LT_SHAPE(a, sa), LT_SHAPE(b, sb));
  const ltG_node_type *type;
  if (da == 2 && db == 2)
    type = &mm_type;
  else if (da == 2 && db == 1)
    type = &mv_type;
  else if (da == 1 && db == 2)
    type = &vm_type;
  else if (da == 2)   /* PyTorch folds and returns out^T^T.contiguous(): a copy unless flat */
    type = (a->size[0] == 1 || b->size[db - 1] == 1) ? &matbatch_flat_type : &matbatch_type;
  else
    type = &batched_type;
  return mm_run(ctx, out, type, flags(da >= 2, 1, 1, db >= 2, da >= 2, db >= 2), NULL, a, b,
                nd, size);
}
