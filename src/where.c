/*
** where.c -- where(cond, a, b): the forward in the promoted dtype of a and b, and its backward,
** which routes the gradient to a where cond holds and to b elsewhere.
*/
#include "backend.h"
#include "elementwise.h"

typedef struct {
  lt_dtype da, db;
  int na, nb;
  int64_t sa[LT_MAX_DIMS], sb[LT_MAX_DIMS];
} where_extra;

static int where_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout, lt_tensor **gin) {
  const where_extra *e = self->extra;
  lt_tensor *g = gout[0], *cond, *full = NULL;
  if (!g) return 0;
  if (ltG_saved_get(ctx, self, 0, &cond)) return -1;
  ltO_ew_scalar_box zero;
  lt_tensor *z = ltO_ew_scalar_init(&zero, g->dtype, 0.0);
  for (int k = 0; k < 2; k++) {
    if (!ltG_needs_input_grad(self, k)) continue;
    if (ltO_empty_as(ctx, &full, g, g->dtype, g->ndim, g->size)) return -1;
    ltK_kernels(full)->where(ctx, full, cond, k == 0 ? g : z, k == 0 ? z : g);
    int rc = ltO_ew_finish_grad(ctx, &gin[k], full, k == 0 ? e->na : e->nb,
                                k == 0 ? e->sa : e->sb, k == 0 ? e->da : e->db, false);
    lt_release(full);
    if (rc) return -1;
  }
  return 0;
}

LT_EW_NODE_TYPE(where_type, "WhereBackward0", where_backward);

int lt_where(lt_ctx *ctx, lt_tensor **out, lt_tensor *cond, lt_tensor *a, lt_tensor *b) {
  if (!cond || !a || !b) return ltB_fail(ctx, "where: missing operand");
  if (cond->dtype != LT_BOOL)
    return ltB_fail(ctx, "where: expected condition to be a bool tensor, got %s",
                    lt_dtype_name(cond->dtype));
  int nd, nd2;
  int64_t s1[LT_MAX_DIMS], size[LT_MAX_DIMS];
  if (ltD_check_devices(ctx, "where", cond, a) || ltD_check_devices(ctx, "where", a, b)) return -1;
  if (ltB_broadcast_shapes(ctx, "where", a->ndim, a->size, b->ndim, b->size, &nd, s1)) return -1;
  if (ltB_broadcast_shapes(ctx, "where", cond->ndim, cond->size, nd, s1, &nd2, size)) return -1;
  lt_dtype r = lt_result_type(a, b);
  lt_tensor *ca = NULL, *cb = NULL, *o = NULL;
  if (ltO_ew_as_dtype(ctx, &ca, a, r) || ltO_ew_as_dtype(ctx, &cb, b, r) ||
      ltO_empty_as(ctx, &o, a, r, nd2, size)) {
    lt_release(ca);
    lt_release(cb);
    return -1;
  }
  ltK_kernels(o)->where(ctx, o, cond, ca, cb);
  lt_release(ca);
  lt_release(cb);
  lt_tensor *ins[2] = {a, b};
  if (ltG_needs_grad(ctx, 2, ins)) {
    lt_node *node;
    if (ltG_record(ctx, &where_type, 2, ins, 1, &o, sizeof(where_extra), 1, &node)) {
      lt_release(o);
      return -1;
    }
    if (node) {
      where_extra *e = node->extra;
      e->da = a->dtype;
      e->db = b->dtype;
      e->na = a->ndim;
      e->nb = b->ndim;
      memcpy(e->sa, a->size, sizeof e->sa);
      memcpy(e->sb, b->size, sizeof e->sb);
      if (ltG_save(node, 0, cond, false)) {
        lt_release(o);
        return ltB_fail(ctx, "where: out of memory");
      }
    }
  }
  *out = o;
  return 0;
}
