/*
** safetensors_save.c -- the safetensors writer. It produces the reference implementation's
** bytes: tensors sorted by dtype (descending, the reference's enum order) then name, compact
** JSON with __metadata__ first, space padding to a multiple of 8. The reader is safetensors.c.
*/
#include <stdlib.h>

#include "serial.h"
#include "safetensors.h"

typedef struct { char *p; size_t n, cap; bool oom; } sbuf;

static void sput(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->cap - b->n < n + 1) {
    size_t nc = b->cap ? b->cap : 256;
    while (nc - b->n < n + 1) nc *= 2;
    char *q = realloc(b->p, nc);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

static void sputs(sbuf *b, const char *s) { sput(b, s, strlen(s)); }

/* A JSON string the way serde_json writes it. */
static void sjson(sbuf *b, const char *s, size_t n) {
  sputs(b, "\"");
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)s[i];
    const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b"
                    : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                    : c == '\t' ? "\\t" : NULL;
    if (esc) {
      sputs(b, esc);
    } else if (c < 0x20) {
      char u[8];
      snprintf(u, sizeof u, "\\u%04x", c);
      sputs(b, u);
    } else {
      sput(b, (const char *)&c, 1);
    }
  }
  sputs(b, "\"");
}

typedef struct went {
  const char *name;
  size_t nlen;
  lt_tensor *t;
  int rank;
  const char *dtname;
} went;

static int cmp_went(const void *a, const void *b) {
  const went *x = a, *y = b;
  if (x->rank != y->rank) return y->rank - x->rank;   /* descending dtype */
  size_t n = x->nlen < y->nlen ? x->nlen : y->nlen;
  int c = memcmp(x->name, y->name, n);
  return c ? c : (x->nlen > y->nlen) - (x->nlen < y->nlen);
}

static int cmp_meta(const void *a, const void *b) {
  const ltS_sval *const *x = a, *const *y = b;
  size_t n = x[0]->u.s.n < y[0]->u.s.n ? x[0]->u.s.n : y[0]->u.s.n;
  int c = memcmp(x[0]->u.s.p, y[0]->u.s.p, n);
  return c ? c : (x[0]->u.s.n > y[0]->u.s.n) - (x[0]->u.s.n < y[0]->u.s.n);
}

/* Copies t's elements in C order into dst (any strides). */
static void gather(const lt_tensor *t, uint8_t *dst) {
  size_t es = lt_dtype_size(t->dtype);
  int64_t n = lt_numel(t);
  if (n == 0) return;
  if (lt_is_contiguous(t)) {
    memcpy(dst, lt_data(t), (size_t)n * es);
    return;
  }
  int64_t idx[LT_MAX_DIMS] = {0};
  const uint8_t *base = lt_data(t);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    memcpy(dst + (size_t)i * es, base + off * (int64_t)es, es);
    for (int d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->size[d]) break;
      idx[d] = 0;
    }
  }
}

enum {
  ST_LEN_BYTES = 8,   /* the little-endian header length before the JSON */
  ST_ALIGN = 8,       /* the header is padded with spaces to a multiple of this */
};

/* The tensors' entries in the order the reference writes them; NULL on out-of-memory. */
static went *sorted_entries(const ltS_sval *tensors) {
  size_t ne = tensors->u.dict.n;
  went *e = calloc(ne ? ne : 1, sizeof *e);
  if (!e) return NULL;
  for (size_t i = 0; i < ne; i++) {
    const ltS_sval *k = tensors->u.dict.k[i], *v = tensors->u.dict.v[i];
    e[i].name = k->u.s.p;
    e[i].nlen = k->u.s.n;
    e[i].t = v->u.ten->t;
    lt_dtype dt = e[i].t->dtype;
    int q = dt == LT_FLOAT64 ? LT_ST_F64 : dt == LT_INT64 ? LT_ST_I64
          : dt == LT_BOOL ? LT_ST_BOOL : LT_ST_F32;
    e[i].rank = ltS_st_dtypes[q].rank;
    e[i].dtname = ltS_st_dtypes[q].name;
  }
  qsort(e, ne, sizeof *e, cmp_went);
  return e;
}

/* "__metadata__":{...} with its keys sorted (string -> string pairs) */
static void put_metadata(sbuf *b, const ltS_sval *meta) {
  size_t nm = meta->u.dict.n;
  ltS_sval **mp = malloc((nm ? nm : 1) * 2 * sizeof *mp);
  if (!mp) b->oom = true;
  for (size_t i = 0; mp && i < nm; i++) {
    mp[2 * i] = meta->u.dict.k[i];
    mp[2 * i + 1] = meta->u.dict.v[i];
  }
  if (mp) qsort(mp, nm, 2 * sizeof *mp, cmp_meta);
  sputs(b, "\"__metadata__\":{");
  for (size_t i = 0; mp && i < nm; i++) {
    if (i) sputs(b, ",");
    sjson(b, mp[2 * i]->u.s.p, mp[2 * i]->u.s.n);
    sputs(b, ":");
    sjson(b, mp[2 * i + 1]->u.s.p, mp[2 * i + 1]->u.s.n);
  }
  sputs(b, "}");
  free(mp);
}

/* name:{"dtype":..,"shape":[..],"data_offsets":[off,end]}; *off moves to end */
static void put_entry(sbuf *b, const went *e, uint64_t *off) {
  char num[64];
  const lt_tensor *t = e->t;
  sjson(b, e->name, e->nlen);
  sputs(b, ":{\"dtype\":\"");
  sputs(b, e->dtname);
  sputs(b, "\",\"shape\":[");
  for (int d = 0; d < t->ndim; d++) {
    snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t->size[d]);
    sputs(b, num);
  }
  uint64_t nb = (uint64_t)lt_numel(t) * lt_dtype_size(t->dtype);
  snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)*off,
           (unsigned long long)(*off + nb));
  sputs(b, num);
  *off += nb;
}

/* the JSON header, padded; b->oom on out-of-memory */
static void put_header(sbuf *b, const went *e, size_t ne, const ltS_sval *meta) {
  sputs(b, "{");
  if (meta) {
    put_metadata(b, meta);
    if (ne) sputs(b, ",");
  }
  uint64_t off = 0;
  for (size_t i = 0; i < ne; i++) {
    if (i) sputs(b, ",");
    put_entry(b, &e[i], &off);
  }
  sputs(b, "}");
  while (b->n % ST_ALIGN) sputs(b, " ");
}

static bool write_header(ltS_afile *a, const sbuf *b) {
  uint8_t hn[ST_LEN_BYTES];
  for (int i = 0; i < ST_LEN_BYTES; i++) hn[i] = (uint8_t)((uint64_t)b->n >> (8 * i));
  return ltS_afile_write(a, hn, sizeof hn) && ltS_afile_write(a, b->p, b->n);
}

/* Writes t's bytes in C order; a device tensor from a copy on the host. Fails (with the
** message set) when that copy or a buffer cannot be made; *bad on a short write. */
static int write_tensor(lt_ctx *ctx, const char *op, ltS_afile *a, lt_tensor *t, bool *bad) {
  size_t nb = (size_t)lt_numel(t) * lt_dtype_size(t->dtype);
  if (!nb) return 0;
  lt_tensor *host = NULL;
  if (t->storage->device != LT_CPU) {
    bool grad = lt_set_grad_enabled(ctx, false);
    int rc = lt_to_device(ctx, &host, t, LT_CPU, 0);
    lt_set_grad_enabled(ctx, grad);
    if (rc) return -1;
    t = host;
  }
  int rc = 0;
  if (lt_is_contiguous(t)) {
    *bad = !ltS_afile_write(a, lt_data(t), nb);
  } else {
    uint8_t *tmp = malloc(nb);
    if (tmp) {
      gather(t, tmp);
      *bad = !ltS_afile_write(a, tmp, nb);
      free(tmp);
    } else {
      rc = ltB_fail(ctx, "%s: out of memory", op);
    }
  }
  lt_release(host);
  return rc;
}

int ltS_st_save(lt_ctx *ctx, const char *path, ltS_sval *tensors, ltS_sval *meta) {
  const char *op = "safetensors.save";
  const uint16_t one = 1;
  if (*(const uint8_t *)&one != 1)
    return ltB_fail(ctx, "%s: writing on a big-endian host is not supported", op);
  size_t ne = tensors->u.dict.n;
  went *e = sorted_entries(tensors);
  if (!e) return ltB_fail(ctx, "%s: out of memory", op);
  sbuf b = {0};
  put_header(&b, e, ne, meta);
  ltS_afile a;
  int rc = -1;
  if (b.oom) {
    ltB_fail(ctx, "%s: out of memory", op);
    goto done;
  }
  if (ltS_afile_open(ctx, op, &a, path)) goto done;
  bool bad = !write_header(&a, &b);
  for (size_t i = 0; !bad && i < ne; i++)
    if (write_tensor(ctx, op, &a, e[i].t, &bad)) {
      ltS_afile_abort(&a);
      goto done;
    }
  if (bad) {
    ltS_afile_abort(&a);
    ltB_fail(ctx, "%s: write error on '%s'", op, path);
    goto done;
  }
  rc = ltS_afile_commit(ctx, op, &a);
done:
  free(b.p);
  free(e);
  return rc;
}
