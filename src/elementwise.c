/*
** elementwise.c -- the binary op family: tensor-tensor and tensor-number ops, their in-place
** forms and backward functions, and isclose/allclose/equal. Unary ops and clamp are in unary.c,
** where in where.c; what the three share is in elementwise.h.
**
** Type promotion follows PyTorch: bool < int64 < float32 < float64; a zero-dim tensor (or a Lua
** number) takes part only when it is of a higher category (bool < integer < float) than the
** dimensioned operand, and then a number gives the default dtype of its category (int64,
** float32). A number never widens a float tensor. Integer true division gives float32.
**
** Numbers are passed to the kernels as zero-dim tensors that live on the C stack
** (ltO_ew_scalar_box), so `x + 2` allocates nothing but its output. They are never retained or
** saved: a node that needs the number keeps it in its extra data and rebuilds the box during
** backward.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "elementwise.h"

/* ============================================================ names and dtype rules */

static const char *const binop_names[LT_NBINOP] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt",
    "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "atan2", "fmod", "remainder",
    "div", "div", "floor_divide"};


/* "add" -> "add_" in buf (of 40 bytes): the in-place op's name for its messages. Built with
** memcpy, not snprintf, which would cost more than a small in-place op itself. */
const char *ltO_ew_inplace_name(char *buf, const char *base) {
  size_t k = strlen(base);
  if (k > 38) k = 38;
  memcpy(buf, base, k);
  buf[k] = '_';
  buf[k + 1] = '\0';
  return buf;
}

/* bool 0, integer 1, float 2 */
static int category(lt_dtype dt) {
  return dt == LT_BOOL ? 0 : dt == LT_INT64 ? 1 : 2;
}

lt_dtype lt_result_type(const lt_tensor *a, const lt_tensor *b) {
  bool za = a->ndim == 0, zb = b->ndim == 0;
  if (za == zb) return lt_promote(a->dtype, b->dtype);
  const lt_tensor *t = za ? b : a, *z = za ? a : b;
  return category(z->dtype) > category(t->dtype) ? z->dtype : t->dtype;
}

/* Result dtype of a tensor of dtype t with a Lua number. */
lt_dtype ltO_ew_scalar_result(lt_dtype t, bool s_is_int) {
  int c = s_is_int ? 1 : 2;
  if (c > category(t)) return c == 1 ? LT_INT64 : LT_FLOAT32;
  return t;
}

/* PyTorch's can_cast for in-place results: never float->integer, never non-bool->bool. */
bool ltO_ew_can_cast(lt_dtype from, lt_dtype to) { return category(from) <= category(to); }

static bool binop_diff(enum lt_binop op) {
  switch (op) {
    case LT_ADD: case LT_SUB: case LT_MUL: case LT_DIV: case LT_POW: case LT_MAXIMUM:
    case LT_MINIMUM: case LT_ATAN2: case LT_FMOD: case LT_REMAINDER: case LT_DIV_TRUNC:
    case LT_DIV_FLOOR: case LT_FLOOR_DIVIDE:
      return true;
    default:
      return false;
  }
}

/* The ops whose integer form divides, which a zero divisor makes an error (a SIGFPE in C). */
static bool int_divides(enum lt_binop op) {
  return op == LT_FMOD || op == LT_REMAINDER || op == LT_DIV_TRUNC || op == LT_DIV_FLOOR ||
         op == LT_FLOOR_DIVIDE;
}

/* From the promoted dtype r: the dtype the kernel computes in and the output's dtype. */
static int binop_dtypes(lt_ctx *ctx, const char *name, enum lt_binop op, lt_dtype r,
                        lt_dtype *compute, lt_dtype *out) {
  switch (op) {
    case LT_SUB:
      if (r == LT_BOOL)
        return ltB_fail(ctx, "%s: subtraction, the `-` operator, with two bool tensors is not "
                        "supported. Use logical_xor() instead (or logical_not() to invert a "
                        "mask).", name);
      break;
    case LT_DIV:
    case LT_ATAN2:
      if (!lt_dtype_is_float(r)) r = LT_FLOAT32;
      break;
    case LT_POW:
    case LT_FMOD:
    case LT_REMAINDER:
    case LT_DIV_TRUNC:
    case LT_DIV_FLOOR:
    case LT_FLOOR_DIVIDE:
      if (r == LT_BOOL) return ltB_fail(ctx, "%s: not implemented for bool tensors", name);
      break;
    case LT_EQ: case LT_NE: case LT_LT: case LT_LE: case LT_GT: case LT_GE:
      *compute = r;
      *out = LT_BOOL;
      return 0;
    case LT_LAND: case LT_LOR: case LT_LXOR:
      *compute = LT_BOOL;
      *out = LT_BOOL;
      return 0;
    default:
      break;
  }
  *compute = r;
  *out = r;
  return 0;
}

/* ============================================================ helpers */

lt_tensor *ltO_ew_scalar_init(ltO_ew_scalar_box *sb, lt_dtype dt, double v) {
  memset(&sb->s, 0, sizeof sb->s);
  sb->s.refcount = 1;
  sb->s.data = &sb->v;
  sb->s.nbytes = sizeof sb->v;
  sb->s.device = LT_CPU;
  ltB_tensor_header(&sb->t, &sb->s, dt, 0, 0);
  switch (dt) {
    case LT_FLOAT32: sb->v.f32 = (float)v; break;
    case LT_FLOAT64: sb->v.f64 = v; break;
    case LT_INT64:
      sb->v.i64 = v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX
                : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
      break;
    default: sb->v.b = v != 0; break;
  }
  return &sb->t;
}

static bool same_view(const lt_tensor *a, const lt_tensor *b) {
  if (a->storage != b->storage || a->offset != b->offset || a->dtype != b->dtype ||
      !ltB_same_shape(a, b))
    return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->size[i] > 1 && a->stride[i] != b->stride[i]) return false;
  return true;
}

/* A plain copy of t's values (contiguous, no autograd). */
int ltO_ew_data_clone(lt_ctx *ctx, lt_tensor **out, lt_tensor *t) {
  if (ltO_empty_as(ctx, out, t, t->dtype, t->ndim, t->size)) return -1;
  ltK_kernels(t)->copy(ctx, *out, t);
  return 0;
}

int ltO_ew_unaliased(lt_ctx *ctx, lt_tensor *dst, lt_tensor *src, bool always,
                     lt_tensor **clone) {
  *clone = NULL;
  if (src->storage != dst->storage || (!always && same_view(dst, src))) return 0;
  return ltO_ew_data_clone(ctx, clone, src);
}

/* new ref of t converted to dt (t itself when it already has it); no autograd */
int ltO_ew_as_dtype(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt) {
  if (t->dtype == dt) {
    *out = lt_retain(t);
    return 0;
  }
  if (ltO_empty_as(ctx, out, t, dt, t->ndim, t->size)) return -1;
  ltK_kernels(t)->copy(ctx, *out, t);
  return 0;
}

/* grad (broadcast shape) -> summed to (nd,size), negated if asked, converted to dt. */
int ltO_ew_finish_grad(lt_ctx *ctx, lt_tensor **out, lt_tensor *full, int nd,
                       const int64_t *size, lt_dtype dt, bool negate) {
  lt_tensor *s, *t;
  if (ltO_sum_to(ctx, &s, full, nd, size)) return -1;
  if (negate) {
    int rc = lt_unary(ctx, &t, LT_NEG, s, 0, 0);
    lt_release(s);
    if (rc) return -1;
    s = t;
  }
  int rc = ltO_ew_as_dtype(ctx, &t, s, dt);
  lt_release(s);
  if (rc) return -1;
  *out = t;
  return 0;
}

/* Fused gradient formula out = f(g, a, b) in g's float dtype over g's shape. */
static int ternary(lt_ctx *ctx, lt_tensor **out, enum ltK_ternary_op op, lt_tensor *g,
                   lt_tensor *a, lt_tensor *b) {
  lt_tensor *ca = NULL, *cb = NULL, *o = NULL;
  int rc = -1;
  if (ltO_ew_as_dtype(ctx, &ca, a, g->dtype) || ltO_ew_as_dtype(ctx, &cb, b, g->dtype))
    goto done;
  if (ltO_empty_as(ctx, &o, g, g->dtype, g->ndim, g->size)) goto done;
  ltK_kernels(o)->ternary(ctx, op, o, g, ca, cb);
  *out = o;
  rc = 0;
done:
  lt_release(ca);
  lt_release(cb);
  return rc;
}

/* Whether f(g, y) may be written over g: g is held by its one reference (the engine's), shares
** its storage with nothing (so not with y either), is dense, of the result's dtype and shape,
** and outside any graph. */
static bool grad_reusable(const lt_tensor *g, const lt_tensor *y, lt_dtype dt) {
  int64_t n;
  if (g->refcount != 1 || g->storage->refcount != 1 || g->base || g->requires_grad ||
      g->grad_fn || g->dtype != dt || y->storage->device != g->storage->device ||
      y->storage->device_index != g->storage->device_index || y->ndim > g->ndim ||
      !ltB_dense(g, &n))
    return false;
  for (int i = 0; i < y->ndim; i++) {
    int64_t ys = y->size[y->ndim - 1 - i];
    if (ys != 1 && ys != g->size[g->ndim - 1 - i]) return false;
  }
  return true;
}

/* out = f(g, y) for a private binary op (gradient formulas), in dtype dt over g's shape. */
int ltO_ew_grad_binary(lt_ctx *ctx, lt_tensor **out, enum ltK_ew_op op, lt_tensor *g,
                       lt_tensor *y, lt_dtype dt, double p0, double p1) {
  if (grad_reusable(g, y, dt)) {
    ltK_kernels(g)->binary(ctx, op, g, g, y, dt, p0, p1);
    *out = lt_retain(g);
    return 0;
  }
  int nd;
  int64_t size[LT_MAX_DIMS];
  if (ltB_broadcast_shapes(ctx, "backward", g->ndim, g->size, y->ndim, y->size, &nd, size))
    return -1;
  if (ltO_empty_as(ctx, out, g, dt, nd, size)) return -1;
  ltK_kernels(*out)->binary(ctx, op, *out, g, y, dt, p0, p1);
  return 0;
}

/* ============================================================ questions about every element
** The op layer reads no tensor data: such a question is a reduction on the tensor's device, and
** only its one-byte answer comes to the host, through the device's to_host (as item() does). */

/* The element of a fresh one-element bool tensor, on the host. */
static int read_bool(lt_ctx *ctx, const lt_tensor *t, bool *v) {
  void *host;
  if (ltD_storage_host_bytes(ctx, t->storage, sizeof(uint8_t), &host)) return -1;
  *v = *(const uint8_t *)(host ? host : ltB_ptr(t)) != 0;
  free(host);
  return 0;
}

/* *res = op (LT_RALL or LT_RANY) over every element of t, each taken as true when non-zero,
** on t's device. */
int ltO_reduce_bool(lt_ctx *ctx, const char *name, enum lt_redop op, const lt_tensor *t,
                    bool *res) {
  bool mask[LT_MAX_DIMS];
  for (int d = 0; d < LT_MAX_DIMS; d++) mask[d] = true;
  lt_tensor *r;
  if (ltO_empty_as(ctx, &r, t, LT_BOOL, 0, NULL)) return -1;
  int rc = ltK_kernels(t)->reduce(ctx, name, op, r, t, mask);
  if (!rc) rc = read_bool(ctx, r, res);
  lt_release(r);
  return rc;
}

/* Whether t (int64 or bool) holds a zero, which integer division would divide by: whether not
** all of its elements are non-zero, one pass on its device. */
static int has_zero(lt_ctx *ctx, const char *name, const lt_tensor *t, bool *found) {
  bool all_nonzero;
  if (ltO_reduce_bool(ctx, name, LT_RALL, t, &all_nonzero)) return -1;
  *found = !all_nonzero;
  return 0;
}

/* The error of an integer division whose divisor b holds a zero; 0 when it holds none. */
static int check_divisor(lt_ctx *ctx, const char *name, const lt_tensor *b) {
  bool zero;
  if (has_zero(ctx, name, b, &zero)) return -1;
  if (zero) return ltB_fail(ctx, "%s: ZeroDivisionError (integer division by zero)", name);
  return 0;
}

/* ============================================================ binary: autograd */

/* Which operand of a binary op is a number (boxed on the C stack, its value kept as s). */
enum bin_scalar { BIN_TENSORS, BIN_A_NUMBER, BIN_B_NUMBER };

typedef struct {
  enum lt_binop op;
  enum bin_scalar scal;
  double s;
  lt_dtype da, db;
  int na, nb;
  int64_t sa[LT_MAX_DIMS], sb[LT_MAX_DIMS];
} bin_extra;

static void bin_needs(enum lt_binop op, bool ga, bool gb, bool *need_a, bool *need_b) {
  bool both = op == LT_POW || op == LT_MAXIMUM || op == LT_MINIMUM || op == LT_ATAN2;
  *need_a = (ga && both) || (gb && (both || op == LT_MUL || op == LT_DIV || op == LT_FMOD ||
                                    op == LT_REMAINDER));
  *need_b = (ga && (both || op == LT_MUL || op == LT_DIV)) ||
            (gb && (both || op == LT_DIV || op == LT_FMOD || op == LT_REMAINDER));
}

static int binary_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                           lt_tensor **gin) {
  const bin_extra *e = self->extra;
  lt_tensor *g0 = gout[0], *g = NULL, *a = NULL, *b = NULL, *fa = NULL, *fb = NULL;
  ltO_ew_scalar_box boxa, boxb;
  bool ga = ltG_needs_input_grad(self, 0), gb = ltG_needs_input_grad(self, 1);
  bool need_a, need_b, neg_b = false;
  int rc = -1;
  if (!g0) return 0;
  if (!lt_dtype_is_float(g0->dtype)) return ltB_fail(ctx, "%s: gradient of dtype %s",
                                                     self->type->name,
                                                     lt_dtype_name(g0->dtype));
  lt_dtype gdt = lt_dtype_is_float(self->out_dtype) ? self->out_dtype : g0->dtype;
  if (ltO_ew_as_dtype(ctx, &g, g0, gdt)) return -1;
  bin_needs(e->op, ga, gb, &need_a, &need_b);
  if (e->scal == BIN_A_NUMBER)
    a = ltO_ew_scalar_init(&boxa, g->dtype, e->s);
  else if (need_a && ltG_saved_get(ctx, self, 0, &a))
    goto done;
  if (e->scal == BIN_B_NUMBER)
    b = ltO_ew_scalar_init(&boxb, g->dtype, e->s);
  else if (need_b && ltG_saved_get(ctx, self, 1, &b))
    goto done;
  switch (e->op) {
    case LT_ADD:
      if (ga) fa = lt_retain(g);
      if (gb) fb = lt_retain(g);
      break;
    case LT_SUB:
      if (ga) fa = lt_retain(g);
      if (gb) fb = lt_retain(g);
      neg_b = true;
      break;
    case LT_MUL:
      if (ga && lt_binary(ctx, &fa, LT_MUL, g, b)) goto done;
      if (gb && lt_binary(ctx, &fb, LT_MUL, g, a)) goto done;
      break;
    case LT_DIV:
      if (ga && lt_binary(ctx, &fa, LT_DIV, g, b)) goto done;
      if (gb && ternary(ctx, &fb, LT_T_DIV_B, g, a, b)) goto done;
      break;
    case LT_POW:
      if (ga && ternary(ctx, &fa, LT_T_POW_A, g, a, b)) goto done;
      if (gb && ternary(ctx, &fb, LT_T_POW_B, g, a, b)) goto done;
      break;
    case LT_MAXIMUM:
      if (ga && ternary(ctx, &fa, LT_T_MAX_A, g, a, b)) goto done;
      if (gb && ternary(ctx, &fb, LT_T_MAX_B, g, a, b)) goto done;
      break;
    case LT_MINIMUM:
      if (ga && ternary(ctx, &fa, LT_T_MIN_A, g, a, b)) goto done;
      if (gb && ternary(ctx, &fb, LT_T_MIN_B, g, a, b)) goto done;
      break;
    case LT_ATAN2:
      if (ga && ternary(ctx, &fa, LT_T_ATAN2_A, g, a, b)) goto done;
      if (gb && ternary(ctx, &fb, LT_T_ATAN2_B, g, a, b)) goto done;
      break;
    case LT_FMOD:
      if (ga) fa = lt_retain(g);
      if (gb && ternary(ctx, &fb, LT_T_FMOD_B, g, a, b)) goto done;
      break;
    case LT_REMAINDER:
      if (ga) fa = lt_retain(g);
      if (gb && ternary(ctx, &fb, LT_T_REM_B, g, a, b)) goto done;
      break;
    case LT_DIV_TRUNC:
    case LT_DIV_FLOOR:   /* piecewise constant: PyTorch's DivBackward2 gives zeros */
      if (ga && ltO_full_as(ctx, &fa, g, g->dtype, g->ndim, g->size, 0.0)) goto done;
      if (gb && ltO_full_as(ctx, &fb, g, g->dtype, g->ndim, g->size, 0.0)) goto done;
      break;
    default:
      break;
  }
  if (fa && ltO_ew_finish_grad(ctx, &gin[0], fa, e->na, e->sa, e->da, false)) goto done;
  if (fb && ltO_ew_finish_grad(ctx, &gin[1], fb, e->nb, e->sb, e->db, neg_b)) goto done;
  rc = 0;
done:
  lt_release(fa);
  lt_release(fb);
  lt_release(g);
  return rc;
}

LT_EW_NODE_TYPE(add_type, "AddBackward0", binary_backward);
LT_EW_NODE_TYPE(sub_type, "SubBackward0", binary_backward);
LT_EW_NODE_TYPE(rsub_type, "RsubBackward1", binary_backward);
LT_EW_NODE_TYPE(mul_type, "MulBackward0", binary_backward);
LT_EW_NODE_TYPE(div_type, "DivBackward0", binary_backward);
LT_EW_NODE_TYPE(pow0_type, "PowBackward0", binary_backward);
LT_EW_NODE_TYPE(pow1_type, "PowBackward1", binary_backward);
LT_EW_NODE_TYPE(pow2_type, "PowBackward2", binary_backward);
LT_EW_NODE_TYPE(max_type, "MaximumBackward0", binary_backward);
LT_EW_NODE_TYPE(min_type, "MinimumBackward0", binary_backward);
LT_EW_NODE_TYPE(atan2_type, "Atan2Backward0", binary_backward);
LT_EW_NODE_TYPE(fmod0_type, "FmodBackward0", binary_backward);
LT_EW_NODE_TYPE(fmod1_type, "FmodBackward1", binary_backward);
LT_EW_NODE_TYPE(rem0_type, "RemainderBackward0", binary_backward);
LT_EW_NODE_TYPE(rem1_type, "RemainderBackward1", binary_backward);
LT_EW_NODE_TYPE(div_round_type, "DivBackward2", binary_backward);

/* PyTorch 1.13 records floor_divide with a node whose backward raises; so does Lantern, so that
** a program that differentiates through `//` fails here as it would there. */
static int floor_divide_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                                 lt_tensor **gin) {
  (void)self, (void)gout, (void)gin;
  return ltB_fail(ctx, "floor_divide: the derivative for 'floor_divide' is not implemented "
                  "(use div(other, {rounding_mode = \"floor\"}), whose gradient is zero)");
}
LT_EW_NODE_TYPE(floor_divide_type, "NotImplemented", floor_divide_backward);

static const ltG_node_type *bin_type(enum lt_binop op, enum bin_scalar scal) {
  switch (op) {
    case LT_ADD: return &add_type;
    case LT_SUB: return scal == BIN_A_NUMBER ? &rsub_type : &sub_type;
    case LT_MUL: return &mul_type;
    case LT_DIV: return &div_type;
    case LT_POW:
      return scal == BIN_B_NUMBER ? &pow0_type : scal == BIN_A_NUMBER ? &pow2_type : &pow1_type;
    case LT_MAXIMUM: return &max_type;
    case LT_MINIMUM: return &min_type;
    case LT_ATAN2: return &atan2_type;
    case LT_FMOD: return scal == BIN_B_NUMBER ? &fmod0_type : &fmod1_type;
    case LT_DIV_TRUNC: case LT_DIV_FLOOR: return &div_round_type;
    case LT_FLOOR_DIVIDE: return &floor_divide_type;
    default: return scal == BIN_B_NUMBER ? &rem0_type : &rem1_type;
  }
}

/* Records out = a op b. save_a/save_b replace a/b as the saved values (in-place ops pass
** copies taken before the write). */
static int record_binary(lt_ctx *ctx, enum lt_binop op, lt_tensor *a, lt_tensor *b,
                         enum bin_scalar scal, double s, lt_tensor *out, lt_tensor *save_a,
                         lt_tensor *save_b) {
  lt_tensor *ins[2] = {a, b};
  lt_node *node;
  if (ltG_record(ctx, bin_type(op, scal), 2, ins, 1, &out, sizeof(bin_extra), 2, &node))
    return -1;
  if (!node) return 0;
  bin_extra *e = node->extra;
  e->op = op;
  e->scal = scal;
  e->s = s;
  e->da = a->dtype;
  e->db = b->dtype;
  e->na = a->ndim;
  e->nb = b->ndim;
  memcpy(e->sa, a->size, sizeof e->sa);
  memcpy(e->sb, b->size, sizeof e->sb);
  bool need_a, need_b;
  bin_needs(op, ltG_needs_input_grad(node, 0), ltG_needs_input_grad(node, 1), &need_a, &need_b);
  if (need_a && scal != BIN_A_NUMBER && ltG_save(node, 0, save_a ? save_a : a, false))
    return ltB_fail(ctx, "%s: out of memory", binop_names[op]);
  if (need_b && scal != BIN_B_NUMBER && ltG_save(node, 1, save_b ? save_b : b, false))
    return ltB_fail(ctx, "%s: out of memory", binop_names[op]);
  return 0;
}

/* ============================================================ binary: forward */

static int binary_run(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a,
                      lt_tensor *b, enum bin_scalar scal, double s);

static bool is_cpu_scalar(const lt_tensor *t) {
  return t->ndim == 0 && t->storage->device == LT_CPU;
}

/* a op b, where a (BIN_A_NUMBER) or b (BIN_B_NUMBER) may be a stack number with value s. A number, or a
** 0-dim cpu tensor, goes with a tensor on any device, as in PyTorch: it is copied there (one
** element) so that the device's kernel sees operands of its own. */
static int binary_impl(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a,
                       lt_tensor *b, enum bin_scalar scal, double s) {
  if (ltD_same_device(a, b)) return binary_run(ctx, out, op, a, b, scal, s);
  lt_tensor **sc = is_cpu_scalar(a) ? &a : is_cpu_scalar(b) ? &b : NULL;
  if (!sc) return ltD_fail_devices(ctx, binop_names[op], a, b);
  const lt_tensor *other = sc == &a ? b : a;
  lt_tensor *moved;
  if (lt_to_device(ctx, &moved, *sc, other->storage->device, other->storage->device_index))
    return -1;
  *sc = moved;
  int rc = binary_run(ctx, out, op, a, b, scal, s);
  lt_release(moved);
  return rc;
}

static int binary_run(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a,
                      lt_tensor *b, enum bin_scalar scal, double s) {
  const char *name = binop_names[op];
  int nd = a->ndim;
  const int64_t *size = a->size;
  int64_t bsize[LT_MAX_DIMS];
  bool same = ltB_same_shape(a, b);
  if (!same) {
    if (ltB_broadcast_shapes(ctx, name, a->ndim, a->size, b->ndim, b->size, &nd, bsize))
      return -1;
    size = bsize;
  }
  lt_dtype compute = a->dtype, odt = a->dtype;
  /* arithmetic on two floats of one dtype stays in it: the common case needs no promotion */
  bool plain = a->dtype == b->dtype && lt_dtype_is_float(a->dtype) && op <= LT_DIV;
  if (!plain && binop_dtypes(ctx, name, op, lt_result_type(a, b), &compute, &odt)) return -1;
  if (int_divides(op) && compute == LT_INT64 && check_divisor(ctx, name, b)) return -1;
  lt_tensor *o;
  if (ltO_empty_as(ctx, &o, scal == BIN_A_NUMBER ? b : a, odt, nd, size)) return -1;
  /* small, dense and of one dtype: a flat loop, each operand either walking with the output
  ** (the same shape) or a single element (a number, or a one-element tensor) */
  int64_t n = ltB_shape_numel(nd, size), na, nb;
  if (plain && n < LT_PAR_MIN && ltB_dense(a, &na) && ltB_dense(b, &nb) &&
      (same || na == 1 || nb == 1))
    ltK_kernels(a)->binary_flat(op, odt, n, ltB_ptr(o), ltB_ptr(a), na == n && (same || nb == 1),
                                ltB_ptr(b), nb == n && (same || na == 1));
  else
    ltK_kernels(a)->binary(ctx, op, o, a, b, compute, 0, 0);
  if (binop_diff(op) && ctx->grad_enabled && (a->requires_grad || b->requires_grad) &&
      record_binary(ctx, op, a, b, scal, s, o, NULL, NULL)) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

/* The small op's path: arithmetic on dense float tensors of one dtype and device, too small to
** split and with nothing to record, where u has t's shape or is 0-dim, its element read at every
** position (a number's box, or a 0-dim tensor). It is binary_run's flat case without the
** broadcasting, promotion and device steps that cannot apply, which are a tenth of a 16-element
** a + b called from Lua (most of the rest is the Lua VM's userdata and finaliser). */
static bool small_ok(lt_ctx *ctx, enum lt_binop op, const lt_tensor *t, const lt_tensor *u,
                     int64_t *n) {
  if (op > LT_DIV || t->dtype != u->dtype || (t->dtype != LT_FLOAT32 && t->dtype != LT_FLOAT64) ||
      (ctx->grad_enabled && (t->requires_grad || u->requires_grad)) || !ltD_same_device(t, u))
    return false;
  /* shapes and strides in one pass (an empty tensor may take the long path: its strides need
  ** not follow its sizes); unsigned, as the sizes of an empty tensor may overflow a product */
  bool scalar = u->ndim == 0;
  if (!scalar && u->ndim != t->ndim) return false;
  uint64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    int64_t m = t->size[i];
    if (!scalar && (u->size[i] != m || (m != 1 && (uint64_t)u->stride[i] != s))) return false;
    if (m != 1 && (uint64_t)t->stride[i] != s) return false;
    s *= (uint64_t)m;
  }
  *n = (int64_t)s;
  return s < LT_PAR_MIN;
}

/* out = a op b where one of them is t (small_ok's) and the other u. */
static int small_run(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a, lt_tensor *b,
                     const lt_tensor *t, int64_t n) {
  lt_tensor *o;
  if (t->storage->device == LT_CPU) {
    size_t nbytes = (size_t)n * ltB_esize(t->dtype);
    o = ltB_new_dense(t->dtype, t->ndim, t->size, nbytes);
    if (!o) return ltB_fail(ctx, "%s: out of memory allocating %zu bytes", binop_names[op], nbytes);
  } else if (ltO_empty_as(ctx, &o, t, t->dtype, t->ndim, t->size)) {
    return -1;
  }
  ltK_kernels(t)->binary_flat(op, t->dtype, n, ltB_ptr(o), ltB_ptr(a), a->ndim == t->ndim,
                              ltB_ptr(b), b->ndim == t->ndim);
  *out = o;
  return 0;
}

int lt_binary(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a, lt_tensor *b) {
  if (op < 0 || op >= LT_NBINOP) return ltB_fail(ctx, "binary: unknown op %d", op);
  if (!a || !b) return ltB_fail(ctx, "%s: missing operand", binop_names[op]);
  int64_t n;
  if (small_ok(ctx, op, a, b, &n)) return small_run(ctx, out, op, a, b, a, n);
  return binary_impl(ctx, out, op, a, b, BIN_TENSORS, 0);
}

/* Checks of a tensor-number op; fills the number's box in the compute dtype. */
static int scalar_operand(lt_ctx *ctx, const char *name, enum lt_binop op, lt_tensor *a, double s,
                          bool s_is_int, bool reverse, ltO_ew_scalar_box *box) {
  lt_dtype compute = LT_FLOAT32, odt = LT_FLOAT32;
  if (binop_dtypes(ctx, name, op, ltO_ew_scalar_result(a->dtype, s_is_int), &compute, &odt))
    return -1;
  if (op == LT_POW && !reverse && compute == LT_INT64 && s < 0)
    return ltB_fail(ctx, "%s: integers to negative integer powers are not allowed", name);
  if (int_divides(op) && !reverse && compute == LT_INT64 && s == 0)
    return ltB_fail(ctx, "%s: ZeroDivisionError (integer division by zero)", name);
  ltO_ew_scalar_init(box, compute, s);
  return 0;
}

int lt_binary_scalar(lt_ctx *ctx, lt_tensor **out, enum lt_binop op, lt_tensor *a, double s,
                     bool s_is_int, bool reverse) {
  if (op < 0 || op >= LT_NBINOP) return ltB_fail(ctx, "binary: unknown op %d", op);
  if (!a) return ltB_fail(ctx, "%s: missing operand", binop_names[op]);
  ltO_ew_scalar_box box;
  if (scalar_operand(ctx, binop_names[op], op, a, s, s_is_int, reverse, &box)) return -1;
  lt_tensor *x = reverse ? &box.t : a, *y = reverse ? a : &box.t;
  int64_t n;
  if (small_ok(ctx, op, a, &box.t, &n)) return small_run(ctx, out, op, x, y, a, n);
  return binary_impl(ctx, out, op, x, y, reverse ? BIN_A_NUMBER : BIN_B_NUMBER, s);
}

/* ============================================================ binary: in place */

static int binary_inplace(lt_ctx *ctx, enum lt_binop op, lt_tensor *a, lt_tensor *b,
                          enum bin_scalar scal, double s) {
  char name[40], bufa[256], bufb[256];
  ltO_ew_inplace_name(name, binop_names[op]);
  if (!ltB_same_shape(a, b)) {
    int nd;
    int64_t size[LT_MAX_DIMS];
    if (ltB_broadcast_shapes(ctx, name, a->ndim, a->size, b->ndim, b->size, &nd, size))
      return -1;
    bool ok = nd == a->ndim;
    for (int i = 0; ok && i < nd; i++) ok = size[i] == a->size[i];
    if (!ok)
      return ltB_fail(ctx, "%s: output with shape %s doesn't match the broadcast shape %s", name,
                      LT_SHAPE(a, bufa), ltB_sizes_str(nd, size, bufb, sizeof bufb));
  }
  lt_dtype compute = LT_FLOAT32, odt = LT_FLOAT32;
  if (binop_dtypes(ctx, name, op, lt_result_type(a, b), &compute, &odt)) return -1;
  if (!ltO_ew_can_cast(odt, a->dtype))
    return ltB_fail(ctx, "%s: result type %s can't be cast to the desired output type %s", name,
                    lt_dtype_name(odt), lt_dtype_name(a->dtype));
  if (odt != LT_BOOL) compute = a->dtype;
  if (ltB_check_inplace_from(ctx, name, a, b)) return -1;
  bool grad = ctx->grad_enabled && (a->requires_grad || b->requires_grad);
  if (grad && !binop_diff(op))
    return ltB_fail(ctx, "%s: in-place %s on a tensor that requires grad is not supported "
                    "(the result is not differentiable)", name, binop_names[op]);
  if (int_divides(op) && compute == LT_INT64 && scal != BIN_B_NUMBER &&
      check_divisor(ctx, name, b))
    return -1;
  bool need_a = false, need_b = false;
  if (grad) bin_needs(op, a->requires_grad, b->requires_grad, &need_a, &need_b);
  lt_tensor *bk = b, *bcopy = NULL, *aold = NULL;
  if (scal != BIN_B_NUMBER && ltO_ew_unaliased(ctx, a, b, need_b, &bcopy)) return -1;
  if (bcopy) bk = bcopy;
  if (need_a && ltO_ew_data_clone(ctx, &aold, a)) {
    lt_release(bcopy);
    return -1;
  }
  ltK_kernels(a)->binary(ctx, op, a, a, bk, compute, 0, 0);
  ltB_bump_version(a);
  int rc = 0;
  if (grad) rc = record_binary(ctx, op, a, b, scal, s, a, aold, bcopy ? bcopy : b);
  lt_release(aold);
  lt_release(bcopy);
  return rc;
}

int lt_binary_(lt_ctx *ctx, enum lt_binop op, lt_tensor *a, lt_tensor *b) {
  if (op < 0 || op >= LT_NBINOP) return ltB_fail(ctx, "binary_: unknown op %d", op);
  if (!a || !b) return ltB_fail(ctx, "%s_: missing operand", binop_names[op]);
  return binary_inplace(ctx, op, a, b, BIN_TENSORS, 0);
}

int lt_binary_scalar_(lt_ctx *ctx, enum lt_binop op, lt_tensor *a, double s) {
  if (op < 0 || op >= LT_NBINOP) return ltB_fail(ctx, "binary_: unknown op %d", op);
  if (!a) return ltB_fail(ctx, "%s_: missing operand", binop_names[op]);
  char name[40];
  ltO_ew_inplace_name(name, binop_names[op]);
  ltO_ew_scalar_box box;
  bool s_is_int = s == floor(s) && fabs(s) < 9.2e18;
  if (scalar_operand(ctx, name, op, a, s, s_is_int, false, &box)) return -1;
  return binary_inplace(ctx, op, a, &box.t, BIN_B_NUMBER, s);
}

/* ============================================================ comparisons of whole tensors */

int lt_isclose(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, lt_tensor *b, double rtol,
               double atol, bool equal_nan) {
  if (!a || !b) return ltB_fail(ctx, "isclose: missing operand");
  if (ltD_check_devices(ctx, "isclose", a, b)) return -1;
  if (!(rtol >= 0) || !(atol >= 0))
    return ltB_fail(ctx, "isclose: rtol and atol must be non-negative (got rtol=%g, atol=%g)",
                    rtol, atol);
  int nd;
  int64_t size[LT_MAX_DIMS];
  if (ltB_broadcast_shapes(ctx, "isclose", a->ndim, a->size, b->ndim, b->size, &nd, size))
    return -1;
  lt_dtype r = lt_promote(a->dtype, b->dtype);
  if (!lt_dtype_is_float(r) && (rtol > 0 || atol > 0)) r = LT_FLOAT64;
  if (ltO_empty_as(ctx, out, a, LT_BOOL, nd, size)) return -1;
  ltK_kernels(*out)->binary(ctx, equal_nan ? LT_EW_ISCLOSE_NAN : LT_EW_ISCLOSE, *out, a, b, r, rtol,
                            atol);
  return 0;
}

int lt_allclose(lt_ctx *ctx, bool *res, lt_tensor *a, lt_tensor *b, double rtol, double atol,
                bool equal_nan) {
  lt_tensor *c;
  if (!a || !b) return ltB_fail(ctx, "allclose: missing operand");
  if (ltD_check_devices(ctx, "allclose", a, b)) return -1;
  int nd;
  int64_t size[LT_MAX_DIMS];
  if (ltB_broadcast_shapes(ctx, "allclose", a->ndim, a->size, b->ndim, b->size, &nd, size))
    return -1;
  if (lt_isclose(ctx, &c, a, b, rtol, atol, equal_nan)) return -1;
  int rc = ltO_reduce_bool(ctx, "allclose", LT_RALL, c, res);
  lt_release(c);
  return rc;
}

int lt_equal(lt_ctx *ctx, bool *res, lt_tensor *a, lt_tensor *b) {
  if (!a || !b) return ltB_fail(ctx, "equal: missing operand");
  if (ltD_check_devices(ctx, "equal", a, b)) return -1;
  if (!ltB_same_shape(a, b)) {
    *res = false;
    return 0;
  }
  lt_tensor *c;
  if (ltO_empty_as(ctx, &c, a, LT_BOOL, a->ndim, a->size)) return -1;
  ltK_kernels(c)->binary(ctx, LT_EQ, c, a, b, lt_promote(a->dtype, b->dtype), 0, 0);
  int rc = ltO_reduce_bool(ctx, "equal", LT_RALL, c, res);
  lt_release(c);
  return rc;
}

/* ============================================================ addcmul, addcdiv, lerp */

static bool addc_operand_fits(const lt_tensor *s, const lt_tensor *t, bool inplace) {
  if (t->dtype != s->dtype || !ltD_same_device(s, t)) return false;
  return !inplace || t->storage != s->storage || same_view(s, t);
}

int ltO_addc(lt_ctx *ctx, lt_tensor **out, enum ltK_addc_op op, lt_tensor *s, lt_tensor *a,
             lt_tensor *b, double p, bool inplace) {
  const ltK_backend *k = ltK_kernels(s);
  if (!k->addc || !lt_dtype_is_float(s->dtype) || !addc_operand_fits(s, a, inplace) ||
      (b && !addc_operand_fits(s, b, inplace)))
    return 0;
  if (ctx->grad_enabled && (s->requires_grad || a->requires_grad || (b && b->requires_grad)))
    return 0;
  int nd, nd2;
  int64_t size[LT_MAX_DIMS], size2[LT_MAX_DIMS];
  lt_tensor *probe = b ? b : a;
  /* the separate ops then report a mismatch in their own words */
  if (ltB_broadcast_shapes(ctx, "addc", s->ndim, s->size, a->ndim, a->size, &nd, size) ||
      ltB_broadcast_shapes(ctx, "addc", nd, size, probe->ndim, probe->size, &nd2, size2))
    return 0;
  if (inplace) {
    bool same = nd2 == s->ndim;
    for (int i = 0; same && i < nd2; i++) same = size2[i] == s->size[i];
    /* the in-place rules of the separate ops (a view of a leaf that requires grad, ...),
    ** which then say what is wrong */
    if (!same || ltB_has_internal_overlap(s) || ltB_check_inplace_from(ctx, "addc", s, a) ||
        (b && ltB_check_inplace_from(ctx, "addc", s, b)))
      return 0;
    k->addc(ctx, op, s, s, a, b, p);
    ltB_bump_version(s);
    *out = s;
    return 1;
  }
  if (ltO_empty_as(ctx, out, s, s->dtype, nd2, size2)) return -1;
  k->addc(ctx, op, *out, s, a, b, p);
  return 1;
}
