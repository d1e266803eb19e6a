/*
** records.c -- a checkpoint's data: file dtypes and their conversion, and records checked and
** read into storages (through source.c's byte sources and zip.c's entries).
*/
#include <stdlib.h>
#include <string.h>

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

const char *ltS_fdtype_name(ltS_fdtype f) { return (unsigned)f < LT_F_N ? fdt_info[f].name : "?"; }
size_t ltS_fdtype_size(ltS_fdtype f) { return (unsigned)f < LT_F_N ? fdt_info[f].size : 0; }

int ltS_fdtype_parse(const char *name) {
  for (int i = 0; i < LT_F_N; i++)
    if (strcmp(name, fdt_info[i].name) == 0) return i;
  return -1;
}

ltS_fdtype ltS_fdtype_of(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT64: return LT_F_F64;
    case LT_INT64: return LT_F_I64;
    case LT_BOOL: return LT_F_BOOL;
    default: return LT_F_F32;
  }
}

lt_dtype ltS_fdtype_default(ltS_fdtype f) {
  switch (f) {
    case LT_F_F32: case LT_F_F16: case LT_F_BF16: return LT_FLOAT32;
    case LT_F_F64: return LT_FLOAT64;
    case LT_F_BOOL: return LT_BOOL;
    default: return LT_INT64;
  }
}

void ltS_load_opts_init(ltS_load_opts *o) {
  for (int i = 0; i < LT_F_N; i++) o->map[i] = -1;
  o->verify_crc = true;
}

static lt_dtype target_dtype(const ltS_load_opts *o, ltS_fdtype f) {
  return o && (unsigned)f < LT_F_N && o->map[f] >= 0 ? (lt_dtype)o->map[f] : ltS_fdtype_default(f);
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

void ltS_swap_bytes(void *p, size_t n, size_t sz) {
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

int ltS_convert_elems(lt_ctx *ctx, const char *op, void *dst, lt_dtype dt, const void *src,
                      ltS_fdtype f, size_t n) {
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
              return ltB_fail(ctx, "%s: %s value %g does not fit in int64", op,
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
            return ltB_fail(ctx, "%s: uint64 value %llu does not fit in int64", op,
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

/* ============================================================ materialisation */

static bool same_layout(ltS_fdtype f, lt_dtype dt) {
  return (f == LT_F_F32 && dt == LT_FLOAT32) || (f == LT_F_F64 && dt == LT_FLOAT64) ||
         (f == LT_F_I64 && dt == LT_INT64) || (f == LT_F_BOOL && dt == LT_BOOL);
}

static const char *rec_name(const ltS_sstorage *s) { return s->rec_name ? s->rec_name : s->key; }

/* A storage's record must hold exactly its storage: numel elements of the file type, plus at
** most one element's worth less a byte (PyTorch writes a typed storage's whole untyped buffer,
** whose byte count it divides down to get numel). The storage's own numel is the reference,
** not the views on it, which may use only part of it. Checked for every storage before any
** memory is allocated, so a record that claims gigabytes behind a storage of a few bytes is
** refused without being read, and a record that claims less than its storage is too. */
int ltS_record_check(lt_ctx *ctx, const char *op, ltS_sstorage *s, const ltS_src *src,
                     const ltS_load_opts *o) {
  if (!s->have_rec)
    return ltB_fail(ctx, "%s: %s: storage '%s' has no data record", op, src->name, s->key);
  if (s->untyped) {   /* a raw UntypedStorage no view typed: bytes */
    s->fdt = LT_F_U8;
    s->untyped = false;
  }
  size_t fs = ltS_fdtype_size(s->fdt), es = lt_dtype_size(target_dtype(o, s->fdt));
  uint64_t need, outb;
  if (s->numel < 0 || __builtin_mul_overflow((uint64_t)s->numel, fs, &need) ||
      __builtin_mul_overflow((uint64_t)s->numel, es, &outb) || outb > (uint64_t)SIZE_MAX / 2)
    return ltB_fail(ctx, "%s: %s: storage '%s' declares %lld %s elements, a size that overflows "
                    "(huge declared size)", op, src->name, s->key, (long long)s->numel,
                    ltS_fdtype_name(s->fdt));
  if (s->rec_len < need)
    return ltB_fail(ctx, "%s: %s: storage '%s' needs %llu bytes (%lld %s elements) but its record "
                    "holds only %llu (record %s)", op, src->name, s->key,
                    (unsigned long long)need, (long long)s->numel, ltS_fdtype_name(s->fdt),
                    (unsigned long long)s->rec_len, rec_name(s));
  if (s->rec_len - need >= fs)
    return ltB_fail(ctx, "%s: %s: storage '%s' needs %llu bytes (%lld %s elements) but its record "
                    "%s declares %llu (expected %llu%s; refusing to read a record larger than "
                    "its storage)", op, src->name, s->key, (unsigned long long)need,
                    (long long)s->numel, ltS_fdtype_name(s->fdt), rec_name(s),
                    (unsigned long long)s->rec_len, (unsigned long long)need,
                    fs > 1 ? " plus at most one partial element" : "");
  return 0;
}

/* The window makes a file of a million one-byte tensors cost a few reads instead of a million
** syscalls; a memory source needs none. */
#define WIN_CAP ((size_t)256 << 10)
#define SCRATCH_CAP ((size_t)1 << 20)

void ltS_rload_init(ltS_rload *r, const ltS_src *src, size_t nrecords) {
  memset(r, 0, sizeof *r);
  r->src = src;
  if (!src->mem && nrecords > 1) r->win = malloc(WIN_CAP);   /* without it, just slower */
}

void ltS_rload_free(ltS_rload *r) {
  free(r->win);
  free(r->scratch);
  memset(r, 0, sizeof *r);
}

/* Reads of at most a quarter window go through it; bigger ones go straight to dst. */
static int src_read(lt_ctx *ctx, const char *op, ltS_rload *m, uint64_t off, void *dst, size_t n,
                    const char *what) {
  const ltS_src *src = m->src;
  if (!m->win || n > WIN_CAP / 4) return ltS_src_read(ctx, op, src, off, dst, n, what);
  if (off < m->woff || off - m->woff > m->wlen || n > m->wlen - (off - m->woff)) {
    if (off > src->size || n > src->size - off)   /* the error names the real range */
      return ltS_src_read(ctx, op, src, off, dst, n, what);
    size_t k = src->size - off < WIN_CAP ? (size_t)(src->size - off) : WIN_CAP;
    m->wlen = 0;
    if (ltS_src_read(ctx, op, src, off, m->win, k, what)) return -1;
    m->woff = off;
    m->wlen = k;
  }
  if (n) memcpy(dst, m->win + (off - m->woff), n);
  return 0;
}

/* One record read front to back: stored bytes at pos, or a deflate stream. */
typedef struct recrd {
  ltS_rload *m;
  uint64_t pos;
  bool deflated;
  ltS_zin z;
} recrd;

static int rec_read(lt_ctx *ctx, const char *op, recrd *r, void *dst, size_t n) {
  if (r->deflated) return ltS_zin_read(ctx, op, &r->z, dst, n);
  if (src_read(ctx, op, r->m, r->pos, dst, n, "storage data")) return -1;
  r->pos += n;
  return 0;
}

int ltS_record_load(lt_ctx *ctx, const char *op, ltS_rload *m, ltS_sstorage *s,
                    const ltS_load_opts *o, bool big) {
  size_t fs = ltS_fdtype_size(s->fdt);
  lt_dtype dt = target_dtype(o, s->fdt);
  size_t es = lt_dtype_size(dt);
  uint64_t need = (uint64_t)s->numel * fs, outb = (uint64_t)s->numel * es;   /* checked */
  lt_storage *st = ltB_storage_new((size_t)outb);
  if (!st)
    return ltB_fail(ctx, "%s: out of memory allocating %llu bytes for storage '%s'", op,
                    (unsigned long long)outb, s->key);
  recrd r = {.m = m, .pos = s->rec_off, .deflated = s->rec_deflated};
  if (r.deflated &&
      ltS_zin_open(ctx, op, &r.z, m->src, rec_name(s), s->rec_off, s->rec_csize, s->rec_len)) {
    ltB_storage_release(st);
    return -1;
  }
  uint32_t crc = 0;
  int rc = 0;
  if (same_layout(s->fdt, dt)) {
    rc = rec_read(ctx, op, &r, st->data, (size_t)need);
    if (rc == 0 && s->check_crc) crc = ltS_crc32(0, st->data, (size_t)need);
    if (rc == 0 && big) ltS_swap_bytes(st->data, (size_t)s->numel, fs);
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
        rc = ltB_fail(ctx, "%s: out of memory", op);
      }
    }
    size_t per = m->scap / fs;                  /* elements per chunk */
    for (uint64_t i = 0; rc == 0 && i < (uint64_t)s->numel; i += per) {
      size_t k = (uint64_t)s->numel - i < per ? (size_t)((uint64_t)s->numel - i) : per;
      rc = rec_read(ctx, op, &r, m->scratch, k * fs);
      if (rc) break;
      if (s->check_crc) crc = ltS_crc32(crc, m->scratch, k * fs);
      if (big) ltS_swap_bytes(m->scratch, k, fs);
      rc = ltS_convert_elems(ctx, op, (uint8_t *)st->data + i * es, dt, m->scratch, s->fdt, k);
    }
  }
  /* the CRC covers the whole record, including the partial element past the storage (rare);
  ** a deflate stream is read to its end either way, to be sure it ends where it says */
  if (rc == 0 && (s->check_crc || r.deflated) && s->rec_len > need) {
    uint8_t tail[8];   /* less than one element (ltS_record_check) */
    size_t k = (size_t)(s->rec_len - need);
    rc = rec_read(ctx, op, &r, tail, k);
    if (rc == 0) crc = ltS_crc32(crc, tail, k);
  }
  if (rc == 0 && r.deflated) rc = ltS_zin_finish(ctx, op, &r.z);
  if (rc == 0 && s->check_crc && crc != s->rec_crc)
    rc = ltB_fail(ctx, "%s: %s: CRC-32 mismatch in the record of storage '%s' (file is "
                  "corrupted)", op, m->src->name, s->key);
  if (r.deflated) ltS_zin_close(&r.z);
  if (rc) {
    ltB_storage_release(st);
    return -1;
  }
  s->st = st;
  s->dt = dt;
  return 0;
}
