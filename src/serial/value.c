/*
** value.c -- the value tree of the checkpoint readers and writers: its arena, its nodes, the
** storage nodes found by key, and materialisation (every storage loaded, every tensor node
** wrapped). File dtypes and the loading of records are in records.c, byte sources in source.c,
** the atomic output file in afile.c.
*/
#include <stdlib.h>

#include "serial.h"

/* ============================================================ arena and nodes */

typedef struct blk {
  struct blk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} blk;

typedef struct skey { const char *key; size_t len; ltS_sval *v; } skey;

struct ltS_sdoc {
  blk *blocks;
  ltS_sval *root, *meta;
  ltS_sval **tensors;
  size_t nt, ct;
  ltS_sval **stor;              /* storage nodes in order of first appearance */
  size_t ns, cs;
  skey *map;                   /* open-addressing hash of storage keys */
  size_t mapcap;
  ltS_sval *flat;               /* the TENSORS node, if any */
};

ltS_sdoc *ltS_sdoc_new(void) { return calloc(1, sizeof(ltS_sdoc)); }

void ltS_sdoc_free(ltS_sdoc *d) {
  if (!d) return;
  for (size_t i = 0; i < d->nt; i++) lt_release(d->tensors[i]->u.ten->t);
  for (size_t i = 0; i < d->ns; i++)
    if (d->stor[i]->u.stor->st) ltB_storage_release(d->stor[i]->u.stor->st);
  if (d->flat) {
    for (size_t i = 0; i < d->flat->u.flat.n; i++) lt_release(d->flat->u.flat.e[i].t);
    free(d->flat->u.flat.e);
  }
  free(d->tensors);
  free(d->stor);
  free(d->map);
  for (blk *b = d->blocks, *nx; b; b = nx) {
    nx = b->next;
    free(b);
  }
  free(d);
}

void *ltS_sdoc_alloc(ltS_sdoc *d, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  blk *b = d->blocks;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > 32768 ? n : 65536 - sizeof(blk);
    b = malloc(sizeof(blk) + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->used = 0;
    if (n > 32768 && d->blocks) {   /* big block: keep filling the current small one */
      b->next = d->blocks->next;
      d->blocks->next = b;
    } else {
      b->next = d->blocks;
      d->blocks = b;
    }
  }
  void *p = b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

ltS_sval *ltS_sdoc_root(const ltS_sdoc *d) { return d->root; }
void ltS_sdoc_set_root(ltS_sdoc *d, ltS_sval *root) { d->root = root; }
ltS_sval *ltS_sdoc_meta(const ltS_sdoc *d) { return d->meta; }
void ltS_sdoc_set_meta(ltS_sdoc *d, ltS_sval *meta) { d->meta = meta; }
ltS_sval *ltS_sdoc_flat(ltS_sdoc *d, size_t n) {
  if (d->flat) return NULL;
  ltS_sval *v = ltS_sv_new(d, LT_SV_TENSORS);
  if (!v) return NULL;
  v->u.flat.e = calloc(n ? n : 1, sizeof *v->u.flat.e);
  if (!v->u.flat.e) return NULL;
  v->u.flat.n = n;
  d->flat = v;
  return v;
}

size_t ltS_sdoc_loaded_bytes(const ltS_sdoc *d) {
  size_t total = 0;
  for (size_t i = 0; i < d->ns; i++)
    if (d->stor[i]->u.stor->st) total += d->stor[i]->u.stor->st->nbytes;
  for (size_t i = 0; d->flat && i < d->flat->u.flat.n; i++)
    if (d->flat->u.flat.e[i].t) total += d->flat->u.flat.e[i].t->storage->nbytes;
  return total;
}

ltS_sval *ltS_sv_new(ltS_sdoc *d, ltS_skind kind) {
  ltS_sval *v = ltS_sdoc_alloc(d, sizeof *v);
  if (v) v->kind = kind;
  return v;
}

ltS_sval *ltS_sv_int(ltS_sdoc *d, int64_t x) {
  ltS_sval *v = ltS_sv_new(d, LT_SV_INT);
  if (v) v->u.i = x;
  return v;
}

ltS_sval *ltS_sv_float(ltS_sdoc *d, double x) {
  ltS_sval *v = ltS_sv_new(d, LT_SV_FLOAT);
  if (v) v->u.f = x;
  return v;
}

ltS_sval *ltS_sv_bool(ltS_sdoc *d, bool x) {
  ltS_sval *v = ltS_sv_new(d, LT_SV_BOOL);
  if (v) v->u.b = x;
  return v;
}

ltS_sval *ltS_sv_str(ltS_sdoc *d, ltS_skind kind, const char *p, size_t n) {
  ltS_sval *v = ltS_sv_new(d, kind);
  if (!v) return NULL;
  char *s = ltS_sdoc_alloc(d, n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, p, n);
  s[n] = 0;
  v->u.s.p = s;
  v->u.s.n = n;
  return v;
}

/* Grows an arena array of pointers to hold one more (doubling; the old copy stays in the
** arena, so total waste is bounded by the final size). */
static ltS_sval **grow(ltS_sdoc *d, ltS_sval **a, size_t n, size_t *cap) {
  if (n < *cap) return a;
  size_t nc = *cap ? *cap * 2 : 4;
  ltS_sval **b = ltS_sdoc_alloc(d, nc * sizeof *b);
  if (!b) return NULL;
  if (n) memcpy(b, a, n * sizeof *b);
  *cap = nc;
  return b;
}

int ltS_sv_push(ltS_sdoc *d, ltS_sval *seq, ltS_sval *item) {
  size_t cap = seq->u.seq.cap;
  ltS_sval **v = grow(d, seq->u.seq.v, seq->u.seq.n, &cap);
  if (!v) return -1;
  seq->u.seq.v = v;
  seq->u.seq.cap = cap;
  v[seq->u.seq.n++] = item;
  return 0;
}

int ltS_stensor_dims(ltS_sdoc *d, ltS_stensor *t, int ndim) {
  int64_t *p = ltS_sdoc_alloc(d, 2 * (size_t)(ndim > 0 ? ndim : 1) * sizeof *p);
  if (!p) return -1;
  t->ndim = ndim;
  t->size = p;
  t->stride = p + (ndim > 0 ? ndim : 1);
  return 0;
}

int ltS_sv_set(ltS_sdoc *d, ltS_sval *dict, ltS_sval *k, ltS_sval *v) {
  size_t cap = dict->u.dict.cap, cap2 = cap;
  ltS_sval **ks = grow(d, dict->u.dict.k, dict->u.dict.n, &cap);
  if (!ks) return -1;
  ltS_sval **vs = grow(d, dict->u.dict.v, dict->u.dict.n, &cap2);
  if (!vs) return -1;
  dict->u.dict.k = ks;
  dict->u.dict.v = vs;
  dict->u.dict.cap = cap;
  ks[dict->u.dict.n] = k;
  vs[dict->u.dict.n++] = v;
  return 0;
}

static int push_ptr(ltS_sval ***a, size_t *n, size_t *cap, ltS_sval *v) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    ltS_sval **b = realloc(*a, nc * sizeof *b);
    if (!b) return -1;
    *a = b;
    *cap = nc;
  }
  (*a)[(*n)++] = v;
  return 0;
}

int ltS_sdoc_add_tensor(ltS_sdoc *d, ltS_sval *t) {
  return push_ptr(&d->tensors, &d->nt, &d->ct, t);
}

ltS_sval *ltS_sv_tensor(ltS_sdoc *d, lt_tensor *t, bool requires_grad) {
  ltS_sval *v = ltS_sv_new(d, LT_SV_TENSOR);
  if (!v) return NULL;
  v->u.ten = ltS_sdoc_alloc(d, sizeof *v->u.ten);
  if (!v->u.ten || ltS_sdoc_add_tensor(d, v) != 0) return NULL;
  v->u.ten->t = lt_retain(t);
  v->requires_grad = requires_grad;
  return v;
}

static uint64_t hash_key(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

static int map_put(skey *map, size_t cap, const char *key, size_t len, ltS_sval *v) {
  size_t i = hash_key(key, len) & (cap - 1);
  while (map[i].key) i = (i + 1) & (cap - 1);
  map[i].key = key;
  map[i].len = len;
  map[i].v = v;
  return 0;
}

ltS_sval *ltS_sdoc_storage(ltS_sdoc *d, const char *key, size_t keylen, bool *created) {
  *created = false;
  if (d->mapcap) {
    size_t i = hash_key(key, keylen) & (d->mapcap - 1);
    for (; d->map[i].key; i = (i + 1) & (d->mapcap - 1))
      if (d->map[i].len == keylen && memcmp(d->map[i].key, key, keylen) == 0)
        return d->map[i].v;
  }
  if ((d->ns + 1) * 2 > d->mapcap) {            /* rehash */
    size_t nc = d->mapcap ? d->mapcap * 2 : 16;
    skey *m = calloc(nc, sizeof *m);
    if (!m) return NULL;
    for (size_t i = 0; i < d->mapcap; i++)
      if (d->map[i].key) map_put(m, nc, d->map[i].key, d->map[i].len, d->map[i].v);
    free(d->map);
    d->map = m;
    d->mapcap = nc;
  }
  ltS_sval *v = ltS_sv_new(d, LT_SV_STORAGE);
  if (!v) return NULL;
  ltS_sstorage *s = ltS_sdoc_alloc(d, sizeof *s);
  char *k = ltS_sdoc_alloc(d, keylen + 1);
  if (!s || !k) return NULL;
  memcpy(k, key, keylen);
  k[keylen] = 0;
  s->key = k;
  v->u.stor = s;
  if (push_ptr(&d->stor, &d->ns, &d->cs, v) != 0) return NULL;
  map_put(d->map, d->mapcap, k, keylen, v);
  *created = true;
  return v;
}

size_t ltS_sdoc_nstorages(const ltS_sdoc *d) { return d->ns; }
ltS_sval *ltS_sdoc_storage_at(const ltS_sdoc *d, size_t i) { return d->stor[i]; }

/* ============================================================ materialisation */

static int wrap_tensor(lt_ctx *ctx, const char *op, ltS_sval *v) {
  ltS_stensor *ts = v->u.ten;
  ltS_sstorage *s = ts->storage->u.stor;
  int64_t numel = 1, hi = ts->offset;
  bool overflow = false;
  for (int i = 0; i < ts->ndim; i++) {
    if (ts->size[i] < 0 || ts->stride[i] < 0)
      return ltB_fail(ctx, "%s: tensor on storage '%s' has a negative size or stride", op,
                      s->key);
    overflow |= __builtin_mul_overflow(numel, ts->size[i], &numel);
    int64_t span;
    if (ts->size[i] > 0) {
      overflow |= __builtin_mul_overflow(ts->size[i] - 1, ts->stride[i], &span);
      overflow |= __builtin_add_overflow(hi, span, &hi);
    }
  }
  int64_t offset = ts->offset;
  if (overflow || offset < 0 || (numel > 0 && hi >= s->numel)) {
    char sz[256];   /* formatted only here: a million tensors should not pay for messages */
    ltB_sizes_str(ts->ndim, ts->size, sz, sizeof sz);
    if (overflow)
      return ltB_fail(ctx, "%s: tensor of shape %s on storage '%s' spans more elements than fit "
                      "in 64 bits (huge declared size)", op, sz, s->key);
    if (offset < 0)
      return ltB_fail(ctx, "%s: tensor of shape %s on storage '%s' has a negative offset", op,
                      sz, s->key);
    return ltB_fail(ctx, "%s: tensor of shape %s at offset %lld needs a storage of %lld elements "
                    "but storage '%s' has %lld (storage too small)", op, sz,
                    (long long)ts->offset, (long long)hi + 1, s->key, (long long)s->numel);
  }
  if (numel == 0 && offset > s->numel) offset = 0;
  lt_tensor *t = ltB_tensor_wrap(s->st, s->dt, ts->ndim, ts->size, ts->stride, offset);
  if (!t) return ltB_fail(ctx, "%s: out of memory", op);
  if (v->requires_grad && lt_dtype_is_float(s->dt)) t->requires_grad = true;
  ts->t = t;
  return 0;
}

static int cmp_rec_off(const void *a, const void *b) {
  const ltS_sstorage *x = *(ltS_sstorage *const *)a, *y = *(ltS_sstorage *const *)b;
  return (x->rec_off > y->rec_off) - (x->rec_off < y->rec_off);
}

int ltS_sdoc_materialize(lt_ctx *ctx, const char *op, ltS_sdoc *d, const ltS_src *src,
                         const ltS_load_opts *o, bool big_endian) {
  for (size_t i = 0; i < d->ns; i++)
    if (ltS_record_check(ctx, op, d->stor[i]->u.stor, src, o) != 0) return -1;
  ltS_rload m;
  ltS_rload_init(&m, src, d->ns);
  ltS_sstorage **ord = NULL;
  int rc = 0;
  if (m.win) {   /* in file order, so that consecutive small records come from one window */
    ord = malloc(d->ns * sizeof *ord);
    if (ord) {
      bool sorted = true;
      for (size_t i = 0; i < d->ns; i++) {
        ord[i] = d->stor[i]->u.stor;
        sorted &= i == 0 || ord[i - 1]->rec_off <= ord[i]->rec_off;
      }
      if (!sorted) qsort(ord, d->ns, sizeof *ord, cmp_rec_off);
    }
  }
  for (size_t i = 0; rc == 0 && i < d->ns; i++)
    rc = ltS_record_load(ctx, op, &m, ord ? ord[i] : d->stor[i]->u.stor, o, big_endian);
  free(ord);
  ltS_rload_free(&m);
  for (size_t i = 0; rc == 0 && i < d->nt; i++)
    if (!d->tensors[i]->u.ten->t) rc = wrap_tensor(ctx, op, d->tensors[i]);
  return rc;
}
