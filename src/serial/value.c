/*
** value.c -- the value tree of the checkpoint readers and writers: its arena, file dtypes and
** element conversion, byte sources, materialisation of storages and tensors, CRC-32 and the
** atomic output file.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "serial.h"

/* ============================================================ file dtypes */

static const struct {
  const char *name;
  size_t size;
  bool is_float;
} fdt_info[LT_F_N] = {
  [LT_F_F32] = {"float32", 4, true},  [LT_F_F64] = {"float64", 8, true},
  [LT_F_F16] = {"float16", 2, true},  [LT_F_BF16] = {"bfloat16", 2, true},
  [LT_F_I64] = {"int64", 8, false},   [LT_F_I32] = {"int32", 4, false},
  [LT_F_I16] = {"int16", 2, false},   [LT_F_I8] = {"int8", 1, false},
  [LT_F_U8] = {"uint8", 1, false},    [LT_F_BOOL] = {"bool", 1, false},
  [LT_F_U16] = {"uint16", 2, false},  [LT_F_U32] = {"uint32", 4, false},
  [LT_F_U64] = {"uint64", 8, false},
};

const char *lt_fdtype_name(lt_fdtype f) { return (unsigned)f < LT_F_N ? fdt_info[f].name : "?"; }
size_t lt_fdtype_size(lt_fdtype f) { return (unsigned)f < LT_F_N ? fdt_info[f].size : 0; }

int lt_fdtype_parse(const char *name) {
  for (int i = 0; i < LT_F_N; i++)
    if (strcmp(name, fdt_info[i].name) == 0) return i;
  return -1;
}

lt_fdtype lt_fdtype_of(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT64: return LT_F_F64;
    case LT_INT64: return LT_F_I64;
    case LT_BOOL: return LT_F_BOOL;
    default: return LT_F_F32;
  }
}

lt_dtype lt_fdtype_default(lt_fdtype f) {
  switch (f) {
    case LT_F_F32: case LT_F_F16: case LT_F_BF16: return LT_FLOAT32;
    case LT_F_F64: return LT_FLOAT64;
    case LT_F_BOOL: return LT_BOOL;
    default: return LT_INT64;
  }
}

void lt_load_opts_init(lt_load_opts *o) {
  for (int i = 0; i < LT_F_N; i++) o->map[i] = -1;
  o->verify_crc = true;
}

static lt_dtype target_dtype(const lt_load_opts *o, lt_fdtype f) {
  return o && (unsigned)f < LT_F_N && o->map[f] >= 0 ? (lt_dtype)o->map[f] : lt_fdtype_default(f);
}

/* ============================================================ element conversion */

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {                                   /* subnormal: normalise */
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) {
        man <<= 1;
        exp--;
      }
      u = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);      /* inf / nan */
  } else {
    u = sign | ((exp - 15 + 127) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void lt_swap_bytes(void *p, size_t n, size_t sz) {
  uint8_t *b = p;
  if (sz < 2) return;
  for (size_t i = 0; i < n; i++, b += sz)
    for (size_t j = 0; j < sz / 2; j++) {
      uint8_t t = b[j];
      b[j] = b[sz - 1 - j];
      b[sz - 1 - j] = t;
    }
}

#define CHUNK 512

int lt_convert_elems(lt_ctx *ctx, const char *op, void *dst, lt_dtype dt, const void *src,
                     lt_fdtype f, size_t n) {
  const uint8_t *p = src;
  size_t es = lt_dtype_size(dt), fs = fdt_info[f].size;
  uint8_t *q = dst;
  if (fdt_info[f].is_float) {
    double buf[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
      size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
      const uint8_t *s = p + i0 * fs;
      for (size_t j = 0; j < m; j++) {
        switch (f) {
          case LT_F_F32: { float v; memcpy(&v, s + 4 * j, 4); buf[j] = v; break; }
          case LT_F_F64: memcpy(&buf[j], s + 8 * j, 8); break;
          case LT_F_F16: { uint16_t h; memcpy(&h, s + 2 * j, 2); buf[j] = half_to_float(h); break; }
          default: { uint16_t h; memcpy(&h, s + 2 * j, 2); buf[j] = bf16_to_float(h); break; }
        }
      }
      uint8_t *o = q + i0 * es;
      for (size_t j = 0; j < m; j++) {
        double v = buf[j];
        switch (dt) {
          case LT_FLOAT32: { float x = (float)v; memcpy(o + 4 * j, &x, 4); break; }
          case LT_FLOAT64: memcpy(o + 8 * j, &v, 8); break;
          case LT_INT64: {
            if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
              return lt_fail(ctx, "%s: %s value %g does not fit in int64", op,
                             fdt_info[f].name, v);
            int64_t x = (int64_t)v;
            memcpy(o + 8 * j, &x, 8);
            break;
          }
          default: o[j] = v != 0; break;
        }
      }
    }
    return 0;
  }
  int64_t buf[CHUNK];
  for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
    size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
    const uint8_t *s = p + i0 * fs;
    for (size_t j = 0; j < m; j++) {
      switch (f) {
        case LT_F_I64: memcpy(&buf[j], s + 8 * j, 8); break;
        case LT_F_I32: { int32_t v; memcpy(&v, s + 4 * j, 4); buf[j] = v; break; }
        case LT_F_I16: { int16_t v; memcpy(&v, s + 2 * j, 2); buf[j] = v; break; }
        case LT_F_I8: buf[j] = (int8_t)s[j]; break;
        case LT_F_U8: buf[j] = s[j]; break;
        case LT_F_BOOL: buf[j] = s[j] != 0; break;
        case LT_F_U16: { uint16_t v; memcpy(&v, s + 2 * j, 2); buf[j] = v; break; }
        case LT_F_U32: { uint32_t v; memcpy(&v, s + 4 * j, 4); buf[j] = v; break; }
        default: {
          uint64_t v;
          memcpy(&v, s + 8 * j, 8);
          if (v > (uint64_t)INT64_MAX && dt == LT_INT64)
            return lt_fail(ctx, "%s: uint64 value %llu does not fit in int64", op,
                           (unsigned long long)v);
          buf[j] = v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
          break;
        }
      }
    }
    uint8_t *o = q + i0 * es;
    for (size_t j = 0; j < m; j++) {
      int64_t v = buf[j];
      switch (dt) {
        case LT_FLOAT32: { float x = (float)v; memcpy(o + 4 * j, &x, 4); break; }
        case LT_FLOAT64: { double x = (double)v; memcpy(o + 8 * j, &x, 8); break; }
        case LT_INT64: memcpy(o + 8 * j, &v, 8); break;
        default: o[j] = v != 0; break;
      }
    }
  }
  return 0;
}

/* ============================================================ arena and nodes */

typedef struct blk {
  struct blk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} blk;

typedef struct skey { const char *key; size_t len; lt_sval *v; } skey;

struct lt_sdoc {
  blk *blocks;
  lt_sval *root, *meta;
  lt_sval **tensors;
  size_t nt, ct;
  lt_sval **stor;              /* storage nodes in order of first appearance */
  size_t ns, cs;
  skey *map;                   /* open-addressing hash of storage keys */
  size_t mapcap;
  lt_sval *flat;               /* the TENSORS node, if any */
};

lt_sdoc *lt_sdoc_new(void) { return calloc(1, sizeof(lt_sdoc)); }

void lt_sdoc_free(lt_sdoc *d) {
  if (!d) return;
  for (size_t i = 0; i < d->nt; i++) lt_release(d->tensors[i]->u.ten->t);
  for (size_t i = 0; i < d->ns; i++)
    if (d->stor[i]->u.stor->st) lt_storage_release(d->stor[i]->u.stor->st);
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

void *lt_sdoc_alloc(lt_sdoc *d, size_t n) {
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

lt_sval *lt_sdoc_root(const lt_sdoc *d) { return d->root; }
void lt_sdoc_set_root(lt_sdoc *d, lt_sval *root) { d->root = root; }
lt_sval *lt_sdoc_meta(const lt_sdoc *d) { return d->meta; }
void lt_sdoc_set_meta(lt_sdoc *d, lt_sval *meta) { d->meta = meta; }
lt_sval *lt_sdoc_flat(lt_sdoc *d, size_t n) {
  if (d->flat) return NULL;
  lt_sval *v = lt_sv_new(d, LT_SV_TENSORS);
  if (!v) return NULL;
  v->u.flat.e = calloc(n ? n : 1, sizeof *v->u.flat.e);
  if (!v->u.flat.e) return NULL;
  v->u.flat.n = n;
  d->flat = v;
  return v;
}

size_t lt_sdoc_loaded_bytes(const lt_sdoc *d) {
  size_t total = 0;
  for (size_t i = 0; i < d->ns; i++)
    if (d->stor[i]->u.stor->st) total += d->stor[i]->u.stor->st->nbytes;
  for (size_t i = 0; d->flat && i < d->flat->u.flat.n; i++)
    if (d->flat->u.flat.e[i].t) total += d->flat->u.flat.e[i].t->storage->nbytes;
  return total;
}

lt_sval *lt_sv_new(lt_sdoc *d, lt_skind kind) {
  lt_sval *v = lt_sdoc_alloc(d, sizeof *v);
  if (v) v->kind = kind;
  return v;
}

lt_sval *lt_sv_int(lt_sdoc *d, int64_t x) {
  lt_sval *v = lt_sv_new(d, LT_SV_INT);
  if (v) v->u.i = x;
  return v;
}

lt_sval *lt_sv_float(lt_sdoc *d, double x) {
  lt_sval *v = lt_sv_new(d, LT_SV_FLOAT);
  if (v) v->u.f = x;
  return v;
}

lt_sval *lt_sv_bool(lt_sdoc *d, bool x) {
  lt_sval *v = lt_sv_new(d, LT_SV_BOOL);
  if (v) v->u.b = x;
  return v;
}

lt_sval *lt_sv_str(lt_sdoc *d, lt_skind kind, const char *p, size_t n) {
  lt_sval *v = lt_sv_new(d, kind);
  if (!v) return NULL;
  char *s = lt_sdoc_alloc(d, n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, p, n);
  s[n] = 0;
  v->u.s.p = s;
  v->u.s.n = n;
  return v;
}

/* Grows an arena array of pointers to hold one more (doubling; the old copy stays in the
** arena, so total waste is bounded by the final size). */
static lt_sval **grow(lt_sdoc *d, lt_sval **a, size_t n, size_t *cap) {
  if (n < *cap) return a;
  size_t nc = *cap ? *cap * 2 : 4;
  lt_sval **b = lt_sdoc_alloc(d, nc * sizeof *b);
  if (!b) return NULL;
  if (n) memcpy(b, a, n * sizeof *b);
  *cap = nc;
  return b;
}

int lt_sv_push(lt_sdoc *d, lt_sval *seq, lt_sval *item) {
  size_t cap = seq->u.seq.cap;
  lt_sval **v = grow(d, seq->u.seq.v, seq->u.seq.n, &cap);
  if (!v) return -1;
  seq->u.seq.v = v;
  seq->u.seq.cap = cap;
  v[seq->u.seq.n++] = item;
  return 0;
}

int lt_stensor_dims(lt_sdoc *d, lt_stensor *t, int ndim) {
  int64_t *p = lt_sdoc_alloc(d, 2 * (size_t)(ndim > 0 ? ndim : 1) * sizeof *p);
  if (!p) return -1;
  t->ndim = ndim;
  t->size = p;
  t->stride = p + (ndim > 0 ? ndim : 1);
  return 0;
}

int lt_sv_set(lt_sdoc *d, lt_sval *dict, lt_sval *k, lt_sval *v) {
  size_t cap = dict->u.dict.cap, cap2 = cap;
  lt_sval **ks = grow(d, dict->u.dict.k, dict->u.dict.n, &cap);
  if (!ks) return -1;
  lt_sval **vs = grow(d, dict->u.dict.v, dict->u.dict.n, &cap2);
  if (!vs) return -1;
  dict->u.dict.k = ks;
  dict->u.dict.v = vs;
  dict->u.dict.cap = cap;
  ks[dict->u.dict.n] = k;
  vs[dict->u.dict.n++] = v;
  return 0;
}

static int push_ptr(lt_sval ***a, size_t *n, size_t *cap, lt_sval *v) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    lt_sval **b = realloc(*a, nc * sizeof *b);
    if (!b) return -1;
    *a = b;
    *cap = nc;
  }
  (*a)[(*n)++] = v;
  return 0;
}

int lt_sdoc_add_tensor(lt_sdoc *d, lt_sval *t) { return push_ptr(&d->tensors, &d->nt, &d->ct, t); }

lt_sval *lt_sv_tensor(lt_sdoc *d, lt_tensor *t, bool requires_grad) {
  lt_sval *v = lt_sv_new(d, LT_SV_TENSOR);
  if (!v) return NULL;
  v->u.ten = lt_sdoc_alloc(d, sizeof *v->u.ten);
  if (!v->u.ten || lt_sdoc_add_tensor(d, v) != 0) return NULL;
  v->u.ten->t = lt_retain(t);
  v->requires_grad = requires_grad;
  return v;
}

static uint64_t hash_key(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

static int map_put(skey *map, size_t cap, const char *key, size_t len, lt_sval *v) {
  size_t i = hash_key(key, len) & (cap - 1);
  while (map[i].key) i = (i + 1) & (cap - 1);
  map[i].key = key;
  map[i].len = len;
  map[i].v = v;
  return 0;
}

lt_sval *lt_sdoc_storage(lt_sdoc *d, const char *key, size_t keylen, bool *created) {
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
  lt_sval *v = lt_sv_new(d, LT_SV_STORAGE);
  if (!v) return NULL;
  lt_sstorage *s = lt_sdoc_alloc(d, sizeof *s);
  char *k = lt_sdoc_alloc(d, keylen + 1);
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

size_t lt_sdoc_nstorages(const lt_sdoc *d) { return d->ns; }
lt_sval *lt_sdoc_storage_at(const lt_sdoc *d, size_t i) { return d->stor[i]; }

/* ============================================================ sources */

int lt_src_open(lt_ctx *ctx, const char *op, lt_src *s, const char *path) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
  s->name = path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lt_fail(ctx, "%s: cannot open '%s': %s", op, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    int e = S_ISDIR(st.st_mode) ? EISDIR : errno;
    close(fd);
    return lt_fail(ctx, "%s: cannot read '%s': %s", op, path, strerror(e));
  }
  s->fd = fd;
  s->size = (uint64_t)st.st_size;
  return 0;
}

void lt_src_mem(lt_src *s, const void *mem, size_t n, const char *name) {
  s->mem = mem;
  s->fd = -1;
  s->size = n;
  s->name = name;
}

void lt_src_close(lt_src *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

int lt_src_read(lt_ctx *ctx, const char *op, const lt_src *s, uint64_t off, void *dst, size_t n,
                const char *what) {
  if (off > s->size || n > s->size - off)
    return lt_fail(ctx, "%s: %s: file is truncated (%s needs bytes %llu..%llu, file has %llu)",
                   op, s->name, what, (unsigned long long)off, (unsigned long long)(off + n),
                   (unsigned long long)s->size);
  if (s->mem) {
    if (n) memcpy(dst, s->mem + off, n);
    return 0;
  }
  uint8_t *p = dst;
  while (n > 0) {
    size_t want = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
    ssize_t got = pread(s->fd, p, want, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return lt_fail(ctx, "%s: %s: read error in %s: %s", op, s->name, what,
                     got < 0 ? strerror(errno) : "unexpected end of file");
    p += got;
    off += (uint64_t)got;
    n -= (size_t)got;
  }
  return 0;
}

/* ============================================================ materialisation */

static bool same_layout(lt_fdtype f, lt_dtype dt) {
  return (f == LT_F_F32 && dt == LT_FLOAT32) || (f == LT_F_F64 && dt == LT_FLOAT64) ||
         (f == LT_F_I64 && dt == LT_INT64) || (f == LT_F_BOOL && dt == LT_BOOL);
}

static const char *rec_name(const lt_sstorage *s) { return s->rec_name ? s->rec_name : s->key; }

/* A storage's record must hold exactly its storage: numel elements of the file type, plus at
** most one element's worth less a byte (PyTorch writes a typed storage's whole untyped buffer,
** whose byte count it divides down to get numel). The storage's own numel is the reference,
** not the views on it, which may use only part of it. Checked for every storage before any
** memory is allocated, so a record that claims gigabytes behind a storage of a few bytes is
** refused without being read, and a record that claims less than its storage is too. */
int lt_record_check(lt_ctx *ctx, const char *op, lt_sstorage *s, const lt_src *src,
                    const lt_load_opts *o) {
  if (!s->have_rec)
    return lt_fail(ctx, "%s: %s: storage '%s' has no data record", op, src->name, s->key);
  if (s->untyped) {   /* a raw UntypedStorage no view typed: bytes */
    s->fdt = LT_F_U8;
    s->untyped = false;
  }
  size_t fs = lt_fdtype_size(s->fdt), es = lt_dtype_size(target_dtype(o, s->fdt));
  uint64_t need, outb;
  if (s->numel < 0 || __builtin_mul_overflow((uint64_t)s->numel, fs, &need) ||
      __builtin_mul_overflow((uint64_t)s->numel, es, &outb) || outb > (uint64_t)SIZE_MAX / 2)
    return lt_fail(ctx, "%s: %s: storage '%s' declares %lld %s elements, a size that overflows "
                   "(huge declared size)", op, src->name, s->key, (long long)s->numel,
                   lt_fdtype_name(s->fdt));
  if (s->rec_len < need)
    return lt_fail(ctx, "%s: %s: storage '%s' needs %llu bytes (%lld %s elements) but its record "
                   "holds only %llu (record %s)", op, src->name, s->key,
                   (unsigned long long)need, (long long)s->numel, lt_fdtype_name(s->fdt),
                   (unsigned long long)s->rec_len, rec_name(s));
  if (s->rec_len - need >= fs)
    return lt_fail(ctx, "%s: %s: storage '%s' needs %llu bytes (%lld %s elements) but its record "
                   "%s declares %llu (expected %llu%s; refusing to read a record larger than "
                   "its storage)", op, src->name, s->key, (unsigned long long)need,
                   (long long)s->numel, lt_fdtype_name(s->fdt), rec_name(s),
                   (unsigned long long)s->rec_len, (unsigned long long)need,
                   fs > 1 ? " plus at most one partial element" : "");
  return 0;
}

/* The window makes a file of a million one-byte tensors cost a few reads instead of a million
** syscalls; a memory source needs none. */
#define WIN_CAP ((size_t)256 << 10)
#define SCRATCH_CAP ((size_t)1 << 20)

void lt_rload_init(lt_rload *r, const lt_src *src, size_t nrecords) {
  memset(r, 0, sizeof *r);
  r->src = src;
  if (!src->mem && nrecords > 1) r->win = malloc(WIN_CAP);   /* without it, just slower */
}

void lt_rload_free(lt_rload *r) {
  free(r->win);
  free(r->scratch);
  memset(r, 0, sizeof *r);
}

/* Reads of at most a quarter window go through it; bigger ones go straight to dst. */
static int src_read(lt_ctx *ctx, const char *op, lt_rload *m, uint64_t off, void *dst, size_t n,
                    const char *what) {
  const lt_src *src = m->src;
  if (!m->win || n > WIN_CAP / 4) return lt_src_read(ctx, op, src, off, dst, n, what);
  if (off < m->woff || off - m->woff > m->wlen || n > m->wlen - (off - m->woff)) {
    if (off > src->size || n > src->size - off)   /* the error names the real range */
      return lt_src_read(ctx, op, src, off, dst, n, what);
    size_t k = src->size - off < WIN_CAP ? (size_t)(src->size - off) : WIN_CAP;
    m->wlen = 0;
    if (lt_src_read(ctx, op, src, off, m->win, k, what)) return -1;
    m->woff = off;
    m->wlen = k;
  }
  if (n) memcpy(dst, m->win + (off - m->woff), n);
  return 0;
}

/* One record read front to back: stored bytes at pos, or a deflate stream. */
typedef struct recrd {
  lt_rload *m;
  uint64_t pos;
  bool deflated;
  lt_zin z;
} recrd;

static int rec_read(lt_ctx *ctx, const char *op, recrd *r, void *dst, size_t n) {
  if (r->deflated) return lt_zin_read(ctx, op, &r->z, dst, n);
  if (src_read(ctx, op, r->m, r->pos, dst, n, "storage data")) return -1;
  r->pos += n;
  return 0;
}

int lt_record_load(lt_ctx *ctx, const char *op, lt_rload *m, lt_sstorage *s,
                   const lt_load_opts *o, bool big) {
  size_t fs = lt_fdtype_size(s->fdt);
  lt_dtype dt = target_dtype(o, s->fdt);
  size_t es = lt_dtype_size(dt);
  uint64_t need = (uint64_t)s->numel * fs, outb = (uint64_t)s->numel * es;   /* checked */
  lt_storage *st = lt_storage_new((size_t)outb);
  if (!st)
    return lt_fail(ctx, "%s: out of memory allocating %llu bytes for storage '%s'", op,
                   (unsigned long long)outb, s->key);
  recrd r = {.m = m, .pos = s->rec_off, .deflated = s->rec_deflated};
  if (r.deflated &&
      lt_zin_open(ctx, op, &r.z, m->src, rec_name(s), s->rec_off, s->rec_csize, s->rec_len)) {
    lt_storage_release(st);
    return -1;
  }
  uint32_t crc = 0;
  int rc = 0;
  if (same_layout(s->fdt, dt)) {
    rc = rec_read(ctx, op, &r, st->data, (size_t)need);
    if (rc == 0 && s->check_crc) crc = lt_crc32(0, st->data, (size_t)need);
    if (rc == 0 && big) lt_swap_bytes(st->data, (size_t)s->numel, fs);
    if (rc == 0 && dt == LT_BOOL) {
      uint8_t *b = st->data;
      for (size_t i = 0; i < (size_t)need; i++) b[i] = b[i] != 0;
    }
  } else {
    size_t want = need < SCRATCH_CAP ? (size_t)need : SCRATCH_CAP;
    if (want < 4096) want = 4096;   /* then most small storages share the first buffer */
    if (m->scap < want) {
      uint8_t *b = realloc(m->scratch, want);
      if (b) {
        m->scratch = b;
        m->scap = want;
      } else {
        rc = lt_fail(ctx, "%s: out of memory", op);
      }
    }
    size_t per = m->scap / fs;                  /* elements per chunk */
    for (uint64_t i = 0; rc == 0 && i < (uint64_t)s->numel; i += per) {
      size_t k = (uint64_t)s->numel - i < per ? (size_t)((uint64_t)s->numel - i) : per;
      rc = rec_read(ctx, op, &r, m->scratch, k * fs);
      if (rc) break;
      if (s->check_crc) crc = lt_crc32(crc, m->scratch, k * fs);
      if (big) lt_swap_bytes(m->scratch, k, fs);
      rc = lt_convert_elems(ctx, op, (uint8_t *)st->data + i * es, dt, m->scratch, s->fdt, k);
    }
  }
  /* the CRC covers the whole record, including the partial element past the storage (rare);
  ** a deflate stream is read to its end either way, to be sure it ends where it says */
  if (rc == 0 && (s->check_crc || r.deflated) && s->rec_len > need) {
    uint8_t tail[8];   /* less than one element (lt_record_check) */
    size_t k = (size_t)(s->rec_len - need);
    rc = rec_read(ctx, op, &r, tail, k);
    if (rc == 0) crc = lt_crc32(crc, tail, k);
  }
  if (rc == 0 && r.deflated) rc = lt_zin_finish(ctx, op, &r.z);
  if (rc == 0 && s->check_crc && crc != s->rec_crc)
    rc = lt_fail(ctx, "%s: %s: CRC-32 mismatch in the record of storage '%s' (file is "
                 "corrupted)", op, m->src->name, s->key);
  if (r.deflated) lt_zin_close(&r.z);
  if (rc) {
    lt_storage_release(st);
    return -1;
  }
  s->st = st;
  s->dt = dt;
  return 0;
}

static int wrap_tensor(lt_ctx *ctx, const char *op, lt_sval *v) {
  lt_stensor *ts = v->u.ten;
  lt_sstorage *s = ts->storage->u.stor;
  int64_t numel = 1, hi = ts->offset;
  bool overflow = false;
  for (int i = 0; i < ts->ndim; i++) {
    if (ts->size[i] < 0 || ts->stride[i] < 0)
      return lt_fail(ctx, "%s: tensor on storage '%s' has a negative size or stride", op,
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
    lt_sizes_str(ts->ndim, ts->size, sz, sizeof sz);
    if (overflow)
      return lt_fail(ctx, "%s: tensor of shape %s on storage '%s' spans more elements than fit "
                     "in 64 bits (huge declared size)", op, sz, s->key);
    if (offset < 0)
      return lt_fail(ctx, "%s: tensor of shape %s on storage '%s' has a negative offset", op,
                     sz, s->key);
    return lt_fail(ctx, "%s: tensor of shape %s at offset %lld needs a storage of %lld elements "
                   "but storage '%s' has %lld (storage too small)", op, sz,
                   (long long)ts->offset, (long long)hi + 1, s->key, (long long)s->numel);
  }
  if (numel == 0 && offset > s->numel) offset = 0;
  lt_tensor *t = lt_tensor_wrap(s->st, s->dt, ts->ndim, ts->size, ts->stride, offset);
  if (!t) return lt_fail(ctx, "%s: out of memory", op);
  if (v->requires_grad && lt_dtype_is_float(s->dt)) t->requires_grad = true;
  ts->t = t;
  return 0;
}

static int cmp_rec_off(const void *a, const void *b) {
  const lt_sstorage *x = *(lt_sstorage *const *)a, *y = *(lt_sstorage *const *)b;
  return (x->rec_off > y->rec_off) - (x->rec_off < y->rec_off);
}

int lt_sdoc_materialize(lt_ctx *ctx, const char *op, lt_sdoc *d, const lt_src *src,
                        const lt_load_opts *o, bool big_endian) {
  for (size_t i = 0; i < d->ns; i++)
    if (lt_record_check(ctx, op, d->stor[i]->u.stor, src, o) != 0) return -1;
  lt_rload m;
  lt_rload_init(&m, src, d->ns);
  lt_sstorage **ord = NULL;
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
    rc = lt_record_load(ctx, op, &m, ord ? ord[i] : d->stor[i]->u.stor, o, big_endian);
  free(ord);
  lt_rload_free(&m);
  for (size_t i = 0; rc == 0 && i < d->nt; i++)
    if (!d->tensors[i]->u.ten->t) rc = wrap_tensor(ctx, op, d->tensors[i]);
  return rc;
}

/* ============================================================ CRC-32 */

/* zlib's (it is linked for deflate anyway, and is faster than a table loop). */
uint32_t lt_crc32(uint32_t crc, const void *data, size_t n) {
  const Bytef *p = data;
  uLong c = crc;
  while (n > 0) {
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, p, k);
    p += k;
    n -= k;
  }
  return (uint32_t)c;
}

/* ============================================================ atomic output file */

/* Numbers the named temporaries of this process; atomic because several lua_States may save
** from different threads at once. */
static unsigned afile_counter;

/* The directory holding path, malloc'd ("." when path has no slash). */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, slash ? path : ".", n);
  d[n] = '\0';
  return d;
}

/* A process killed while it held a named temporary (the fallback below, the instant between
** link and rename, or a Lantern that predates unnamed temporaries) leaves `base.tmp-PID-n`
** behind for good, so each save of path removes those whose PID no longer exists. Only ESRCH
** proves that: EPERM is a live process of another user, and a live writer's file must stay.
** Names that do not match the pattern exactly are never touched. The PIDs are this PID
** namespace's, so a directory shared with another container or host can lose a live named
** temporary of theirs: that save then fails at its rename, and no file is torn. */
static void remove_stale_tmps(const char *dir, const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t nb = strlen(base);
  if (nb == 0) return;
  DIR *d = opendir(dir);
  if (!d) return;
  long long self = getpid();
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *s = de->d_name;
    if (strncmp(s, base, nb) != 0 || strncmp(s + nb, ".tmp-", 5) != 0) continue;
    s += nb + 5;
    long long pid = 0;
    const char *q = s;
    for (; *q >= '0' && *q <= '9' && pid <= INT_MAX; q++) pid = pid * 10 + (*q - '0');
    if (q == s || *q != '-' || pid <= 0 || pid > INT_MAX || pid == self) continue;
    const char *c = ++q;
    while (*q >= '0' && *q <= '9') q++;
    if (q == c || *q != '\0') continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    /* Best effort: a file we may not remove is no reason to fail the save. */
    (void)unlinkat(dirfd(d), de->d_name, 0);
  }
  closedir(d);
}

/* LANTERN_NO_O_TMPFILE=1 makes every save take the named-temporary path, as on a filesystem
** without O_TMPFILE, so that path (and its stale-file cleanup) can be exercised anywhere; the
** specs use it. */
static bool unnamed_disabled(void) {
  const char *e = getenv("LANTERN_NO_O_TMPFILE");
  return e && *e && strcmp(e, "0") != 0;
}

/* An unnamed file in dir (Linux O_TMPFILE): it has no directory entry until commit links one,
** so the kernel reclaims it when the process dies however it dies. The mode goes through the
** umask (and a default ACL) exactly as open(O_CREAT) does, so the result gets the same
** permissions as before. Fails with EOPNOTSUPP where it cannot work. */
static int open_unnamed(const char *dir) {
#ifdef O_TMPFILE
  int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  /* Commit links the file through /proc/self/fd, the only way that needs no privilege; where
  ** /proc is not mounted that would fail after the whole file was written, so find out now. */
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  struct stat a, b;
  if (fstat(fd, &a) != 0 || stat(proc, &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    close(fd);
    errno = EOPNOTSUPP;
    return -1;
  }
  return fd;
#else
  (void)dir;
  errno = EOPNOTSUPP;
  return -1;
#endif
}

int lt_afile_open(lt_ctx *ctx, const char *op, lt_afile *a, const char *path) {
  memset(a, 0, sizeof *a);
  size_t n = strlen(path);
  a->path = malloc(n + 1);
  a->tmp = malloc(n + 64);
  a->dir = dir_of(path);
  if (!a->path || !a->tmp || !a->dir) {
    free(a->path);
    free(a->tmp);
    free(a->dir);
    return lt_fail(ctx, "%s: out of memory", op);
  }
  memcpy(a->path, path, n + 1);
  remove_stale_tmps(a->dir, path);
  int fd = -1, e = EOPNOTSUPP;
  if (!unnamed_disabled()) {
    fd = open_unnamed(a->dir);
    e = errno;
  }
  /* EISDIR and EINVAL are what kernels and filesystems without O_TMPFILE answer; any other
  ** error (no such directory, no permission, no space) would stop a named file too. */
  if (fd < 0 && (e == EOPNOTSUPP || e == EISDIR || e == EINVAL)) {
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
      unsigned c = __atomic_fetch_add(&afile_counter, 1, __ATOMIC_RELAXED);
      snprintf(a->tmp, n + 64, "%s.tmp-%ld-%u", path, (long)getpid(), c);
      fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0 && errno != EEXIST) break;
    }
    e = errno;
    a->named = fd >= 0;
  }
  if (fd < 0) {
    free(a->path);
    free(a->tmp);
    free(a->dir);
    memset(a, 0, sizeof *a);
    return lt_fail(ctx, "%s: cannot create a file next to '%s': %s", op, path, strerror(e));
  }
  a->f = fdopen(fd, "wb");
  if (!a->f) {
    close(fd);
    if (a->named) unlink(a->tmp);
    free(a->path);
    free(a->tmp);
    free(a->dir);
    memset(a, 0, sizeof *a);
    return lt_fail(ctx, "%s: out of memory", op);
  }
  return 0;
}

/* Gives the unnamed file a unique name next to path. linkat cannot replace an existing file,
** so the name is a fresh temporary and rename then replaces path in one step; the temporary
** exists only between these two calls. */
static int link_unnamed(lt_afile *a) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(a->f));
  size_t n = strlen(a->path);
  for (int tries = 0; tries < 100; tries++) {
    unsigned c = __atomic_fetch_add(&afile_counter, 1, __ATOMIC_RELAXED);
    snprintf(a->tmp, n + 64, "%s.tmp-%ld-%u", a->path, (long)getpid(), c);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, a->tmp, AT_SYMLINK_FOLLOW) == 0) {
      a->named = true;
      return 0;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

/* Makes the rename durable: until the directory reaches the disk, a crash can bring back the
** old file. Best effort only, since every reader already sees the new file and some
** filesystems refuse fsync on a directory; failing the save now would be a lie. */
static void sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

int lt_afile_commit(lt_ctx *ctx, const char *op, lt_afile *a) {
  /* The data must be on disk before the rename publishes it, or a crash could leave path
  ** naming a file with missing blocks. */
  int bad = fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0;
  int e = errno;
  if (bad && e == 0) e = EIO; /* ferror from an earlier fwrite whose errno is gone */
  if (!bad && !a->named && link_unnamed(a) != 0) {
    bad = 1;
    e = errno;
  }
  if (fclose(a->f) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  a->f = NULL;
  if (!bad && rename(a->tmp, a->path) != 0) {
    bad = 1;
    e = errno;
  }
  if (bad) {
    if (a->named) unlink(a->tmp);
    lt_fail(ctx, "%s: cannot write '%s': %s", op, a->path, strerror(e));
  } else {
    sync_dir(a->dir);
  }
  free(a->tmp);
  free(a->path);
  free(a->dir);
  memset(a, 0, sizeof *a);
  return bad ? -1 : 0;
}

void lt_afile_abort(lt_afile *a) {
  if (a->f) fclose(a->f);
  if (a->named && a->tmp) unlink(a->tmp);
  free(a->tmp);
  free(a->path);
  free(a->dir);
  memset(a, 0, sizeof *a);
}
