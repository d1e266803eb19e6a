/*
** elementwise.h -- what the elementwise op files share (elementwise.c: binary ops and the
** whole-tensor comparisons; unary.c: unary ops and clamp; where.c): PyTorch's dtype rules,
** numbers boxed on the C stack, and the helpers the backward functions are written with.
** Op layer only: nothing here touches tensor data.
*/
#ifndef LT_ELEMENTWISE_H
#define LT_ELEMENTWISE_H

#include "core.h"

/* A zero-dim tensor on the C stack holding one number: never retained, never saved. */
typedef struct {
  lt_tensor t;
  lt_storage s;
  union {
    double f64;
    float f32;
    int64_t i64;
    uint8_t b;
  } v;
} ltO_ew_scalar_box;

/* A graph node type with no op-specific resources to release. */
#define LT_EW_NODE_TYPE(var, type_name, fn) \
  static const ltG_node_type var = {.name = (type_name), .backward = (fn), .release = NULL}

/* The box's tensor, holding v in dtype dt (int64 saturates, NaN gives 0). */
lt_tensor *ltO_ew_scalar_init(ltO_ew_scalar_box *sb, lt_dtype dt, double v);
/* "add" -> "add_" in buf (of 40 bytes): the in-place op's name for its messages. */
const char *ltO_ew_inplace_name(char *buf, const char *base);
/* Result dtype of a tensor of dtype t with a Lua number (integral when s_is_int). */
lt_dtype ltO_ew_scalar_result(lt_dtype t, bool s_is_int);
/* PyTorch's can_cast for in-place results: never float->integer, never non-bool->bool. */
bool ltO_ew_can_cast(lt_dtype from, lt_dtype to);
/* A plain copy of t's values (contiguous, no autograd). */
int ltO_ew_data_clone(lt_ctx *ctx, lt_tensor **out, lt_tensor *t);
/* *res = op (LT_RALL or LT_RANY) over every element of t, each taken as true when non-zero,
** on t's device: only the one-byte answer comes to the host. name is for messages. */
int ltO_reduce_bool(lt_ctx *ctx, const char *name, enum lt_redop op, const lt_tensor *t,
                    bool *res);
/* For an in-place write of dst from src: *clone is NULL and src is read as it is, or, when src
** lies in dst's memory in other places (or at all, with always), *clone is a plain copy of
** src's values to read instead (the caller releases it), so that no element is read after
** being written. */
int ltO_ew_unaliased(lt_ctx *ctx, lt_tensor *dst, lt_tensor *src, bool always,
                     lt_tensor **clone);
/* The one-pass addcmul/addcdiv/lerp of the kernel table's addc entry (b NULL for
** LT_LERP_SCALAR), into a fresh *out or, with inplace, into s (*out is then s, not retained).
** It applies only where nothing is recorded, every operand has s's float dtype and device, the
** device has the entry, the shapes broadcast (to s's, in place) and an in-place s shares no
** memory with the other operands but as the very same view. Returns 1 when done, 0 when it
** does not apply (the caller then runs the separate ops, which raise what is wrong), -1 on
** error. */
int ltO_addc(lt_ctx *ctx, lt_tensor **out, enum ltK_addc_op op, lt_tensor *s, lt_tensor *a,
             lt_tensor *b, double p, bool inplace);
/* New ref of t converted to dt (t itself when it already has it); no autograd. */
int ltO_ew_as_dtype(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_dtype dt);
/* grad (broadcast shape) -> summed to (nd,size), negated if asked, converted to dt. */
int ltO_ew_finish_grad(lt_ctx *ctx, lt_tensor **out, lt_tensor *full, int nd,
                       const int64_t *size, lt_dtype dt, bool negate);
/* out = f(g, y) for a private binary op (gradient formulas), in dtype dt over g's shape. The
** result is written over g itself where nothing but the caller's reference holds g (a backward
** formula's incoming gradient, which the engine drops after the call): no fresh buffer, and one
** the cache still holds. The caller must not read g afterwards. */
int ltO_ew_grad_binary(lt_ctx *ctx, lt_tensor **out, enum ltK_ew_op op, lt_tensor *g,
                       lt_tensor *y, lt_dtype dt, double p0, double p1);

#endif
