/*
** search.c -- the op layer of the searches (the device's `search_dim` and `search_flat`
** kernels, cpu/search.c, find the elements):
**
**   lt_max_dim/min_dim   values + int64 indices along one dim (MaxBackward0)
**   lt_argmax/argmin     over all dims (flattened index) or along one dim
**   lt_sort/topk         the first k of each row in order, with indices (the device's `sort`)
**   lt_searchsorted      where values go in sorted rows (the device's `searchsorted`)
**   lt_unique            the distinct values, made of sort, comparisons and masked selects
*/
#include <stdint.h>

#include "reduce.h"

/* A view of t (the output of a single-dim op) with the input's shape: along dim it has the
** input's size and stride 0. */
static lt_tensor *dim_view(const lt_tensor *t, int ndim, const int64_t *size, int dim,
                           bool keepdim) {
  int64_t st[LT_MAX_DIMS];
  int j = 0;
  for (int d = 0; d < ndim; d++) {
    if (d == dim) {
      st[d] = 0;
      if (keepdim) j++;
    } else {
      st[d] = t->stride[j++];
    }
  }
  return ltB_alias(t, ndim, size, st, t->offset);
}

/* The gradient goes to the position of each row's winner: g scattered along dim into zeros. */
static int maxdim_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *gout,
                           lt_tensor **gin) {
  const ltO_dim_extra *e = self->extra;
  if (!gout[0]) return 0;
  lt_tensor *idx, *gi = NULL, *iv = NULL, *gv = NULL;
  if (ltG_saved_get(ctx, self, 0, &idx)) return -1;
  int rc = -1;
  if (ltO_full_as(ctx, &gi, gout[0], gout[0]->dtype, e->ndim, e->size, 0.0)) goto done;
  if (e->ndim > 0 && !e->keepdim) {
    if (lt_unsqueeze(ctx, &iv, idx, e->dim) || lt_unsqueeze(ctx, &gv, gout[0], e->dim))
      goto done;
  } else {
    iv = lt_retain(idx);
    gv = lt_retain(gout[0]);
  }
  if (lt_scatter_(ctx, gi, e->dim, iv, gv, e->base)) goto done;
  gin[0] = gi;
  gi = NULL;
  rc = 0;
done:
  lt_release(gi);
  lt_release(iv);
  lt_release(gv);
  return rc;
}

/* Records values = an op of a along dim that took the elements at positions idx (from base),
** when a is float: the gradient goes back to them (maxdim_backward). */
static int record_positions(lt_ctx *ctx, const char *op, const ltG_node_type *type, lt_tensor *a,
                            lt_tensor *values, lt_tensor *idx, int dim, bool keepdim,
                            int64_t base) {
  if (!lt_dtype_is_float(a->dtype)) return 0;
  lt_node *node;
  if (ltG_record(ctx, type, 1, &a, 1, &values, sizeof(ltO_dim_extra), 1, &node)) return -1;
  if (!node) return 0;
  ltO_dim_extra *e = node->extra;
  e->ndim = a->ndim;
  for (int k = 0; k < a->ndim; k++) e->size[k] = a->size[k];
  e->dim = dim;
  e->keepdim = keepdim;
  e->base = base;
  if (ltG_save(node, 0, idx, false)) return ltO_red_oom(ctx, op);
  return 0;
}

static const ltG_node_type max0_type = {"MaxBackward0", maxdim_backward, NULL};
static const ltG_node_type min0_type = {"MinBackward0", maxdim_backward, NULL};

/* max/min/argmax/argmin along dim: values (may be NULL) and indices. */
static int search_dim(lt_ctx *ctx, const char *op, bool is_max, lt_tensor **values,
                      lt_tensor **indices, lt_tensor *a, int dim, bool keepdim, int64_t base) {
  int d;
  if (ltB_wrap_dim(ctx, op, dim, a->ndim, &d)) return -1;
  if (a->ndim && a->size[d] == 0)
    return ltB_fail(ctx, "%s(): Expected reduction dim %d to have non-zero size.", op, d + 1);
  bool mask[LT_MAX_DIMS] = {false};
  if (a->ndim) mask[d] = true;
  int64_t osize[LT_MAX_DIMS];
  int ond = ltO_red_shape(a, mask, keepdim, osize);
  lt_tensor *idx = NULL, *val = NULL, *iv = NULL, *vv = NULL;
  int rc = -1;
  if (ltO_empty_as(ctx, &idx, a, LT_INT64, ond, osize)) goto fail;
  if (values && ltO_empty_as(ctx, &val, a, a->dtype, ond, osize)) goto fail;
  iv = dim_view(idx, a->ndim, a->size, d, keepdim);
  if (!iv || (values && !(vv = dim_view(val, a->ndim, a->size, d, keepdim)))) {
    ltO_red_oom(ctx, op);
    goto fail;
  }
  ltK_kernels(a)->search_dim(ctx, is_max, iv, vv, a, d, base);
  lt_release(iv);
  lt_release(vv);
  iv = vv = NULL;
  if (values && record_positions(ctx, op, is_max ? &max0_type : &min0_type, a, val, idx, d,
                                  keepdim, base))
    goto fail;
  if (values) *values = val;
  *indices = idx;
  return 0;
fail:
  lt_release(iv);
  lt_release(vv);
  lt_release(idx);
  lt_release(val);
  return rc;
}

int lt_max_dim(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int dim,
               bool keepdim, int64_t base) {
  return search_dim(ctx, "max", true, values, indices, a, dim, keepdim, base);
}

int lt_min_dim(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int dim,
               bool keepdim, int64_t base) {
  return search_dim(ctx, "min", false, values, indices, a, dim, keepdim, base);
}

static int arg_search(lt_ctx *ctx, const char *op, bool is_max, lt_tensor **out, lt_tensor *a,
                      const int *dim, bool keepdim, int64_t base) {
  if (dim) return search_dim(ctx, op, is_max, NULL, out, a, *dim, keepdim, base);
  int64_t n = lt_numel(a);
  if (n == 0)
    return ltB_fail(ctx, "%s(): Expected reduction dim to be specified for input.numel() == 0.",
                    op);
  int64_t osize[LT_MAX_DIMS];
  int ond = keepdim ? a->ndim : 0;
  for (int d = 0; d < ond; d++) osize[d] = 1;
  lt_tensor *c, *o;
  if (lt_contiguous(ctx, &c, a)) return -1;
  if (ltO_empty_as(ctx, &o, a, LT_INT64, ond, osize)) {
    lt_release(c);
    return -1;
  }
  int rc = ltK_kernels(c)->search_flat(ctx, op, is_max, o, c, base);
  lt_release(c);
  if (rc) {
    lt_release(o);
    return -1;
  }
  *out = o;
  return 0;
}

int lt_argmax(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const int *dim, bool keepdim,
              int64_t base) {
  return arg_search(ctx, "argmax", true, out, a, dim, keepdim, base);
}

int lt_argmin(lt_ctx *ctx, lt_tensor **out, lt_tensor *a, const int *dim, bool keepdim,
              int64_t base) {
  return arg_search(ctx, "argmin", false, out, a, dim, keepdim, base);
}

static const ltG_node_type sort_type = {"SortBackward0", maxdim_backward, NULL};
static const ltG_node_type topk_type = {"TopkBackward0", maxdim_backward, NULL};

/* The first k along dim in order (k < 0: all of them): values (NULL for argsort) and indices,
** a's shape but k along dim. The gradient, as max's along a dim, goes back to the positions. */
static int sort_dim(lt_ctx *ctx, const char *op, const ltG_node_type *type, lt_tensor **values,
                    lt_tensor **indices, lt_tensor *a, int64_t k, int dim, bool descending,
                    int64_t base) {
  int d;
  if (ltB_wrap_dim(ctx, op, dim, a->ndim, &d)) return -1;
  int64_t n = a->ndim ? a->size[d] : 1;
  if (k < 0) k = n;
  if (k > n)
    return ltB_fail(ctx, "%s: selected index k out of range (k = %lld, but dim %d has %lld "
                    "elements)", op, (long long)k, d + 1, (long long)n);
  int64_t osize[LT_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) osize[i] = i == d ? k : a->size[i];
  lt_tensor *idx = NULL, *val = NULL;
  if (ltO_empty_as(ctx, &idx, a, LT_INT64, a->ndim, osize) ||
      (values && ltO_empty_as(ctx, &val, a, a->dtype, a->ndim, osize)))
    goto fail;
  if (lt_numel(idx) > 0 && ltK_kernels(a)->sort(ctx, op, val, idx, a, d, descending, base))
    goto fail;
  if (values && record_positions(ctx, op, type, a, val, idx, d, true, base)) goto fail;
  if (values) *values = val;
  *indices = idx;
  return 0;
fail:
  lt_release(idx);
  lt_release(val);
  return -1;
}

int lt_sort(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int dim,
            bool descending, int64_t base) {
  return sort_dim(ctx, "sort", &sort_type, values, indices, a, -1, dim, descending, base);
}

int lt_argsort(lt_ctx *ctx, lt_tensor **indices, lt_tensor *a, int dim, bool descending,
               int64_t base) {
  return sort_dim(ctx, "argsort", &sort_type, NULL, indices, a, -1, dim, descending, base);
}

int lt_topk(lt_ctx *ctx, lt_tensor **values, lt_tensor **indices, lt_tensor *a, int64_t k,
            int dim, bool largest, int64_t base) {
  if (k < 0) return ltB_fail(ctx, "topk: k must not be negative, got %lld", (long long)k);
  return sort_dim(ctx, "topk", &topk_type, values, indices, a, k, dim, largest, base);
}

/* Where each value goes in sorted's last dim: sorted is 1-d, or has values' leading dims. The
** two are compared in their common dtype. */
int lt_searchsorted(lt_ctx *ctx, lt_tensor **out, lt_tensor *sorted, lt_tensor *values,
                    bool right, int64_t base) {
  char sb[128], vb[128];
  if (sorted->ndim == 0)
    return ltB_fail(ctx, "searchsorted: the sorted sequence must have at least one dimension, "
                    "got a 0-d tensor");
  bool lead = sorted->ndim == 1;
  if (!lead && sorted->ndim == values->ndim) {
    lead = true;
    for (int d = 0; d < sorted->ndim - 1; d++) lead = lead && sorted->size[d] == values->size[d];
  }
  if (!lead)
    return ltB_fail(ctx, "searchsorted: the sorted sequence must be 1-d or have the values' "
                    "leading dims, got sorted %s and values %s", LT_SHAPE(sorted, sb),
                    LT_SHAPE(values, vb));
  if (lt_device(sorted) != lt_device(values) ||
      lt_device_index(sorted) != lt_device_index(values))
    return ltB_fail(ctx, "searchsorted: expected the sorted sequence and the values on one "
                    "device");
  lt_dtype dt = lt_result_type(sorted, values);
  lt_tensor *s = NULL, *v = NULL, *se = NULL, *o = NULL;
  int rc = -1;
  if (lt_to_dtype(ctx, &s, sorted, dt) || lt_to_dtype(ctx, &v, values, dt)) goto done;
  /* sorted with the values' leading dims: stride 0 where a 1-d sequence serves every row */
  int64_t size[LT_MAX_DIMS], st[LT_MAX_DIMS];
  int nd = values->ndim ? values->ndim : 1;
  for (int d = 0; d < nd - 1; d++) {
    size[d] = values->size[d];
    st[d] = sorted->ndim == 1 ? 0 : s->stride[d];
  }
  size[nd - 1] = s->size[s->ndim - 1];
  st[nd - 1] = s->stride[s->ndim - 1];
  if (!(se = ltB_alias(s, nd, size, st, s->offset))) {
    ltO_red_oom(ctx, "searchsorted");
    goto done;
  }
  if (ltO_empty_as(ctx, &o, values, LT_INT64, values->ndim, values->size)) goto done;
  if (lt_numel(o) > 0) ltK_kernels(v)->searchsorted(ctx, o, se, v, right, base);
  *out = o;
  o = NULL;
  rc = 0;
done:
  lt_release(s);
  lt_release(v);
  lt_release(se);
  lt_release(o);
  return rc;
}

/* new (bool, n) = whether each of the n sorted values v differs from the one before it (the
** first does); NaNs count as equal to each other, so that they make one group, the last. */
static int group_starts(lt_ctx *ctx, lt_tensor **new_, lt_tensor *v, int64_t n) {
  lt_tensor *t[8] = {NULL};
  int rc = -1;
  int64_t one = 1;
  if (ltO_full_as(ctx, &t[0], v, LT_BOOL, 1, &one, 1.0)) goto done;
  if (n == 1) {
    *new_ = t[0];
    return 0;
  }
  if (lt_narrow(ctx, &t[1], v, 0, 1, n - 1) || lt_narrow(ctx, &t[2], v, 0, 0, n - 1) ||
      lt_binary(ctx, &t[3], LT_EQ, t[1], t[2]))
    goto done;
  if (lt_dtype_is_float(v->dtype)) {   /* a NaN after a NaN joins its group */
    lt_tensor *same;
    if (lt_unary(ctx, &t[4], LT_ISNAN, t[1], 0, 0) || lt_unary(ctx, &t[6], LT_ISNAN, t[2], 0, 0) ||
        lt_binary(ctx, &t[7], LT_LAND, t[4], t[6]) || lt_binary(ctx, &same, LT_LOR, t[3], t[7]))
      goto done;
    lt_release(t[3]);
    t[3] = same;
  }
  if (lt_unary(ctx, &t[5], LT_LNOT, t[3], 0, 0)) goto done;
  lt_tensor *parts[2] = {t[0], t[5]};
  if (lt_cat(ctx, new_, 2, parts, 0)) goto done;
  rc = 0;
done:
  for (int i = 0; i < 8; i++) lt_release(t[i]);
  return rc;
}

/* Inputs at least this long try the backend's unique_few first, with room for an eighth of
** their length in distinct values, up to UNIQUE_FEW_MAX (its scratch is then about 5 MB). */
#define UNIQUE_FEW_MIN 1024
#define UNIQUE_FEW_MAX 65536

/* lt_unique through unique_few: 1 when done, 0 when x (t flattened) has too many distinct
** values for it, -1 on error. */
static int unique_few(lt_ctx *ctx, lt_tensor **values, lt_tensor **inverse, lt_tensor **counts,
                      lt_tensor *t, lt_tensor *x, int64_t base) {
  int64_t n = lt_numel(x), cap = n / 8 < UNIQUE_FEW_MAX ? n / 8 : UNIQUE_FEW_MAX;
  lt_tensor *v = NULL, *c = NULL, *inv = NULL, *vh = NULL, *ch = NULL;
  lt_tensor *rv = NULL, *rc_ = NULL, *ri = NULL;
  int rc = -1;
  if (ltO_empty_as(ctx, &v, t, t->dtype, 1, &cap) ||
      (counts && ltO_empty_as(ctx, &c, t, LT_INT64, 1, &cap)) ||
      (inverse && ltO_empty_as(ctx, &inv, t, LT_INT64, 1, &n)))
    goto done;
  int64_t m = ltK_kernels(t)->unique_few(ctx, x, cap, v, c, inv, base);
  if (m == -2) {
    ltB_fail(ctx, "unique: out of memory");
    goto done;
  }
  if (m < 0) {
    rc = 0;
    goto done;
  }
  /* copies of the first m: a view would keep the room for cap alive */
  if (lt_narrow(ctx, &vh, v, 0, 0, m) || lt_clone(ctx, &rv, vh) ||
      (counts && (lt_narrow(ctx, &ch, c, 0, 0, m) || lt_clone(ctx, &rc_, ch))) ||
      (inverse && lt_reshape(ctx, &ri, inv, t->ndim, t->size)))
    goto done;
  *values = rv;
  if (counts) *counts = rc_;
  if (inverse) *inverse = ri;
  rv = rc_ = ri = NULL;
  rc = 1;
done:
  lt_release(v);
  lt_release(c);
  lt_release(inv);
  lt_release(vh);
  lt_release(ch);
  lt_release(rv);
  lt_release(rc_);
  lt_release(ri);
  return rc;
}

/* The distinct values of t, ascending (NaN last, one of them), and optionally where each
** element's value is among them (inverse, t's shape, counted from base) and how many of each
** (counts): t flattened and sorted, group starts marked, their values selected; inverse is
** each sorted element's group number scattered back to its place; counts the gaps between
** the groups' starts. Where the device can, few distinct values are hashed instead
** (unique_few: 1M int64 of 1000 values, 18 -> ~3 ms). No gradient (as PyTorch's). */
int lt_unique(lt_ctx *ctx, lt_tensor **values, lt_tensor **inverse, lt_tensor **counts,
              lt_tensor *t, int64_t base) {
  int64_t n = lt_numel(t), all = -1;
  lt_tensor *x[12] = {NULL};
  int rc = -1;
  if (lt_detach(ctx, &x[0], t) || lt_reshape(ctx, &x[1], x[0], 1, &all)) goto done;
  if (n == 0) {
    int64_t zero = 0;
    if (ltO_empty_as(ctx, values, t, t->dtype, 1, &zero)) goto done;
    if (inverse && ltO_empty_as(ctx, inverse, t, LT_INT64, t->ndim, t->size)) goto fail_values;
    if (counts && ltO_empty_as(ctx, counts, t, LT_INT64, 1, &zero)) goto fail_inverse;
    rc = 0;
    goto done;
  }
  if (n >= UNIQUE_FEW_MIN && ltK_kernels(t)->unique_few && lt_is_contiguous(x[1])) {
    rc = unique_few(ctx, values, inverse, counts, t, x[1], base);
    if (rc != 0) {
      rc = rc < 0 ? -1 : 0;
      goto done;
    }
    rc = -1;
  }
  /* x[2] sorted values, x[3] their positions (from 0), x[4] group starts */
  if (lt_sort(ctx, &x[2], &x[3], x[1], 0, false, 0) || group_starts(ctx, &x[4], x[2], n) ||
      lt_masked_select(ctx, values, x[2], x[4]))
    goto done;
  if (inverse) {   /* group numbers from base: the running count of starts, + base - 1 */
    if (lt_cumsum(ctx, &x[5], x[4], 0) ||
        (base != 1 && lt_binary_scalar_(ctx, LT_ADD, x[5], (double)(base - 1))) ||
        ltO_empty_as(ctx, &x[6], t, LT_INT64, 1, &n) ||
        lt_scatter_(ctx, x[6], 0, x[3], x[5], 0) ||
        lt_reshape(ctx, inverse, x[6], t->ndim, t->size))
      goto fail_values;
  }
  if (counts) {   /* the next group's start (n after the last) minus each start */
    int64_t m = lt_numel(*values), one = 1;
    lt_tensor *parts[2];
    if (lt_arange_int(ctx, &x[7], 0, n, 1) || lt_to_device(ctx, &x[8], x[7], lt_device(t),
                                                           lt_device_index(t)) ||
        lt_masked_select(ctx, &x[9], x[8], x[4]) ||
        lt_narrow(ctx, &x[10], x[9], 0, 1, m - 1) ||
        ltO_full_as(ctx, &x[11], t, LT_INT64, 1, &one, (double)n))
      goto fail_inverse;
    parts[0] = x[10];
    parts[1] = x[11];
    lt_tensor *ends = NULL;
    int e = lt_cat(ctx, &ends, 2, parts, 0) || lt_binary(ctx, counts, LT_SUB, ends, x[9]);
    lt_release(ends);
    if (e) goto fail_inverse;
  }
  rc = 0;
  goto done;
fail_inverse:
  if (inverse) {
    lt_release(*inverse);
    *inverse = NULL;
  }
fail_values:
  lt_release(*values);
  *values = NULL;
done:
  for (int i = 0; i < 12; i++) lt_release(x[i]);
  return rc;
}
