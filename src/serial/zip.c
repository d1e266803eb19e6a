/*
** zip.c -- the zip container of .pt files: a reader (central directory, zip64 end records,
** stored entries) and a writer laid out like PyTorch's (stored entries whose data starts on a
** 64-byte boundary, padded through an "FB" extra field, and zip64 end records).
**
** The reader takes every size and offset from the central directory and checks each one
** against the file size before use; local headers are read only for their name/extra lengths.
*/
#include <stdlib.h>
#include <zlib.h>

#include "serial.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define ALIGN 64

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ============================================================ reader */

static int cmp_entry(const void *a, const void *b) {
  return strcmp(((const ltS_zentry *)a)->name, ((const ltS_zentry *)b)->name);
}

/* Finds the end-of-central-directory record; fills entries, cd size and offset. */
static int find_eocd(lt_ctx *ctx, const char *op, const ltS_src *src, uint64_t *n_entries,
                     uint64_t *cd_size, uint64_t *cd_off) {
  uint64_t size = src->size;
  if (size < 22) return ltB_fail(ctx, "%s: %s: not a zip archive (file too small)", op, src->name);
  size_t tail = size < 65535 + 22 ? (size_t)size : 65535 + 22;
  uint8_t *buf = malloc(tail);
  if (!buf) return ltB_fail(ctx, "%s: out of memory", op);
  if (ltS_src_read(ctx, op, src, size - tail, buf, tail, "end of central directory")) {
    free(buf);
    return -1;
  }
  long pos = -1;
  for (long i = (long)tail - 22; i >= 0; i--)
    if (rd32(buf + i) == SIG_EOCD && (uint64_t)i + 22 + rd16(buf + i + 20) <= tail) {
      pos = i;
      break;
    }
  if (pos < 0) {
    free(buf);
    return ltB_fail(ctx, "%s: %s: not a zip archive or truncated (no end of central directory "
                    "record)", op, src->name);
  }
  const uint8_t *e = buf + pos;
  uint64_t eocd_abs = size - tail + (uint64_t)pos;
  *n_entries = rd16(e + 10);
  *cd_size = rd32(e + 12);
  *cd_off = rd32(e + 16);
  bool disk_split = rd16(e + 4) != 0 || rd16(e + 6) != 0;
  /* zip64: a locator right before the classic record points at the zip64 record */
  if (eocd_abs >= 20) {
    uint8_t loc[20];
    if (ltS_src_read(ctx, op, src, eocd_abs - 20, loc, 20, "zip64 locator")) {
      free(buf);
      return -1;
    }
    if (rd32(loc) == SIG_LOC64) {
      uint64_t off64 = rd64(loc + 8);
      uint8_t r[56];
      if (off64 > size || size - off64 < 56 ||
          ltS_src_read(ctx, op, src, off64, r, 56, "zip64 end record") || rd32(r) != SIG_EOCD64) {
        free(buf);
        return ltB_fail(ctx, "%s: %s: corrupted zip64 end of central directory record", op,
                        src->name);
      }
      *n_entries = rd64(r + 32);
      *cd_size = rd64(r + 40);
      *cd_off = rd64(r + 48);
      disk_split = rd32(r + 16) != 0 || rd32(r + 20) != 0;
    }
  }
  free(buf);
  if (disk_split) return ltB_fail(ctx, "%s: %s: multi-disk zip archives are not supported", op,
                                  src->name);
  if (*cd_off > size || *cd_size > size - *cd_off)
    return ltB_fail(ctx, "%s: %s: corrupted zip directory (central directory at %llu+%llu lies "
                    "outside the %llu-byte file)", op, src->name, (unsigned long long)*cd_off,
                    (unsigned long long)*cd_size, (unsigned long long)size);
  if (*n_entries > *cd_size / 46)
    return ltB_fail(ctx, "%s: %s: corrupted zip directory (%llu entries cannot fit in %llu bytes)",
                    op, src->name, (unsigned long long)*n_entries, (unsigned long long)*cd_size);
  return 0;
}

int ltS_zip_open(lt_ctx *ctx, const char *op, ltS_zip *z, const ltS_src *src) {
  memset(z, 0, sizeof *z);
  z->src = src;
  uint64_t n = 0, cd_size = 0, cd_off = 0;
  if (find_eocd(ctx, op, src, &n, &cd_size, &cd_off)) return -1;
  uint8_t *cd = malloc(cd_size ? (size_t)cd_size : 1);
  z->e = calloc(n ? (size_t)n : 1, sizeof *z->e);
  z->names = malloc(cd_size + 1);
  if (!cd || !z->e || !z->names) {
    free(cd);
    ltS_zip_close(z);
    return ltB_fail(ctx, "%s: out of memory", op);
  }
  int rc = ltS_src_read(ctx, op, src, cd_off, cd, (size_t)cd_size, "central directory");
  size_t p = 0, np = 0;
  for (uint64_t i = 0; rc == 0 && i < n; i++) {
    if (cd_size - p < 46 || rd32(cd + p) != SIG_CENTRAL) {
      rc = ltB_fail(ctx, "%s: %s: corrupted zip directory (bad entry %llu)", op, src->name,
                    (unsigned long long)i);
      break;
    }
    const uint8_t *h = cd + p;
    uint16_t flags = rd16(h + 8), nl = rd16(h + 28), xl = rd16(h + 30), cl = rd16(h + 32);
    if (cd_size - p - 46 < (uint64_t)nl + xl + cl) {
      rc = ltB_fail(ctx, "%s: %s: corrupted zip directory (entry %llu overruns it)", op,
                    src->name, (unsigned long long)i);
      break;
    }
    ltS_zentry *e = &z->e[i];
    e->method = rd16(h + 10);
    e->crc = rd32(h + 16);
    e->csize = rd32(h + 20);
    e->usize = rd32(h + 24);
    uint64_t lho = rd32(h + 42);
    /* zip64 extended information: present fields are those saturated in the header */
    const uint8_t *x = h + 46 + nl, *xe = x + xl;
    while (xe - x >= 4) {
      uint16_t id = rd16(x), len = rd16(x + 2);
      if (xe - x - 4 < len) break;
      if (id == 1) {
        const uint8_t *q = x + 4, *qe = q + len;
        if (e->usize == 0xffffffffu && qe - q >= 8) { e->usize = rd64(q); q += 8; }
        if (e->csize == 0xffffffffu && qe - q >= 8) { e->csize = rd64(q); q += 8; }
        if (lho == 0xffffffffu && qe - q >= 8) { lho = rd64(q); q += 8; }
      }
      x += 4 + len;
    }
    if (memchr(h + 46, 0, nl)) {
      rc = ltB_fail(ctx, "%s: %s: corrupted zip directory (NUL in an entry name)", op, src->name);
      break;
    }
    memcpy(z->names + np, h + 46, nl);
    z->names[np + nl] = 0;
    e->name = z->names + np;   /* names are laid out in directory order */
    np += (size_t)nl + 1;
    if (flags & 1) {
      rc = ltB_fail(ctx, "%s: %s: zip entry %.*s is encrypted", op, src->name, (int)nl,
                    (const char *)h + 46);
      break;
    }
    /* the local header only tells how long its name and extra field are */
    uint8_t lh[30];
    if (lho > src->size || src->size - lho < 30 ||
        ltS_src_read(ctx, op, src, lho, lh, 30, "local header") || rd32(lh) != SIG_LOCAL) {
      rc = ltB_fail(ctx, "%s: %s: corrupted zip directory (entry %.*s points at no local header)",
                    op, src->name, (int)nl, (const char *)h + 46);
      break;
    }
    e->data_off = lho + 30 + rd16(lh + 26) + rd16(lh + 28);
    if (e->data_off > src->size || e->csize > src->size - e->data_off) {
      rc = ltB_fail(ctx, "%s: %s: file is truncated or corrupted (entry %.*s needs bytes "
                    "%llu..%llu, file has %llu)", op, src->name, (int)nl, (const char *)h + 46,
                    (unsigned long long)e->data_off,
                    (unsigned long long)(e->data_off + e->csize), (unsigned long long)src->size);
      break;
    }
    p += 46 + (size_t)nl + xl + cl;
    z->n++;
  }
  free(cd);
  if (rc) {
    ltS_zip_close(z);
    return -1;
  }
  qsort(z->e, z->n, sizeof *z->e, cmp_entry);
  return 0;
}

void ltS_zip_close(ltS_zip *z) {
  free(z->e);
  free(z->names);
  memset(z, 0, sizeof *z);
}

const ltS_zentry *ltS_zip_find(const ltS_zip *z, const char *name) {
  ltS_zentry key = {.name = name};
  return z->n ? bsearch(&key, z->e, z->n, sizeof *z->e, cmp_entry) : NULL;
}

const ltS_zentry *ltS_zip_first(const ltS_zip *z) {
  if (!z->n) return NULL;
  for (size_t i = 0; i < z->n; i++)
    if (z->e[i].name == z->names) return &z->e[i];   /* the first name in the buffer */
  return NULL;
}

int ltS_zip_check_method(lt_ctx *ctx, const char *op, const ltS_src *src, const char *name,
                         unsigned method, uint64_t csize, uint64_t usize) {
  if (method != 0 && method != 8)
    return ltB_fail(ctx, "%s: %s: zip entry %s uses compression method %u (only stored and "
                    "deflated entries are supported)", op, src->name, name, method);
  /* deflate cannot expand more than ~1032:1, so a larger claim is a corrupted directory */
  if ((method == 0 && csize != usize) || (method == 8 && usize / 1032 > csize + 1) ||
      usize > (uint64_t)SIZE_MAX / 2)
    return ltB_fail(ctx, "%s: %s: corrupted zip directory (entry %s has sizes %llu/%llu)", op,
                    src->name, name, (unsigned long long)csize, (unsigned long long)usize);
  return 0;
}

/* Compressed bytes are read in slices of this size, so inflating a record costs this much
** memory beyond its output however large the compressed entry is. */
#define ZIN_CHUNK ((size_t)256 << 10)

int ltS_zin_open(lt_ctx *ctx, const char *op, ltS_zin *z, const ltS_src *src, const char *name,
                 uint64_t off, uint64_t csize, uint64_t usize) {
  memset(z, 0, sizeof *z);
  z->src = src;
  z->name = name;
  z->off = off;
  z->cleft = csize;
  z->uleft = usize;
  z->usize = usize;
  z->incap = csize < ZIN_CHUNK ? (size_t)csize + 1 : ZIN_CHUNK;
  z->in = malloc(z->incap);
  z->zs = calloc(1, sizeof *z->zs);
  if (!z->in || !z->zs) {
    free(z->in);
    free(z->zs);
    memset(z, 0, sizeof *z);
    return ltB_fail(ctx, "%s: out of memory inflating %s", op, name);
  }
  if (inflateInit2(z->zs, -MAX_WBITS) != Z_OK) {
    free(z->in);
    free(z->zs);
    memset(z, 0, sizeof *z);
    return ltB_fail(ctx, "%s: zlib initialisation failed", op);
  }
  return 0;
}

void ltS_zin_close(ltS_zin *z) {
  if (!z->zs) return;
  inflateEnd(z->zs);
  free(z->zs);
  free(z->in);
  memset(z, 0, sizeof *z);
}

static int zin_corrupt(lt_ctx *ctx, const char *op, const ltS_zin *z, const char *why) {
  return ltB_fail(ctx, "%s: %s: deflated zip entry %s is corrupted (%s; its directory entry "
                  "declares %llu bytes)", op, z->src->name, z->name, why,
                  (unsigned long long)z->usize);
}

/* Inflates into dst[0..n); *got is how much came out. Stops at the stream's end, at n, or when
** zlib can make no more progress (the caller decides whether that is an error). Compressed
** bytes are fetched only as zlib asks for them. */
static int zin_pump(lt_ctx *ctx, const char *op, ltS_zin *z, uint8_t *dst, size_t n,
                    size_t *got) {
  z_stream *zs = z->zs;
  *got = 0;
  while (!z->ended && *got < n) {
    if (zs->avail_in == 0 && z->cleft > 0) {
      size_t k = z->cleft < z->incap ? (size_t)z->cleft : z->incap;
      if (ltS_src_read(ctx, op, z->src, z->off, z->in, k, z->name)) return -1;
      z->off += k;
      z->cleft -= k;
      zs->next_in = z->in;
      zs->avail_in = (uInt)k;
    }
    size_t room = n - *got;
    if (room > (1u << 30)) room = 1u << 30;   /* zlib counts in uInt */
    zs->next_out = dst + *got;
    zs->avail_out = (uInt)room;
    uInt in0 = zs->avail_in;
    int zr = inflate(zs, Z_NO_FLUSH);
    size_t out = room - zs->avail_out;
    *got += out;
    if (zr == Z_STREAM_END) {
      z->ended = true;
      break;
    }
    if (zr != Z_OK && zr != Z_BUF_ERROR) return zin_corrupt(ctx, op, z, "bad deflate data");
    /* with room for output, no progress means zlib wants input that the entry lacks */
    if (out == 0 && zs->avail_in == in0 && z->cleft == 0) break;
  }
  return 0;
}

int ltS_zin_read(lt_ctx *ctx, const char *op, ltS_zin *z, void *dst, size_t n) {
  if (n > z->uleft) return zin_corrupt(ctx, op, z, "read past the declared size");
  size_t got;
  if (zin_pump(ctx, op, z, dst, n, &got)) return -1;
  z->uleft -= got;
  if (got < n) return zin_corrupt(ctx, op, z, "the data ends early");
  return 0;
}

int ltS_zin_finish(lt_ctx *ctx, const char *op, ltS_zin *z) {
  if (z->uleft) return zin_corrupt(ctx, op, z, "not all of it was read");
  /* one byte of room: a stream that still produces output is longer than declared, and
  ** stopping there is what keeps a lying size from costing more than it declares */
  uint8_t extra;
  size_t got;
  if (zin_pump(ctx, op, z, &extra, 1, &got)) return -1;
  if (got) return zin_corrupt(ctx, op, z, "it inflates to more bytes than declared");
  if (!z->ended) return zin_corrupt(ctx, op, z, "the deflate stream does not end");
  return 0;
}

int ltS_zip_inflate(lt_ctx *ctx, const char *op, const ltS_src *src, const char *name,
                    uint64_t off, uint64_t csize, uint64_t usize, uint8_t *dst) {
  ltS_zin z;
  if (ltS_zin_open(ctx, op, &z, src, name, off, csize, usize)) return -1;
  int rc = 0;
  for (uint64_t done = 0; rc == 0 && done < usize;) {
    size_t k = usize - done > ((uint64_t)1 << 30) ? (size_t)1 << 30 : (size_t)(usize - done);
    rc = ltS_zin_read(ctx, op, &z, dst + done, k);
    done += k;
  }
  if (rc == 0) rc = ltS_zin_finish(ctx, op, &z);
  ltS_zin_close(&z);
  return rc;
}

int ltS_zip_read_all(lt_ctx *ctx, const char *op, const ltS_zip *z, const ltS_zentry *e,
                     bool verify, uint8_t **out, size_t *n) {
  if (ltS_zip_check_method(ctx, op, z->src, e->name, e->method, e->csize, e->usize)) return -1;
  uint8_t *buf = malloc(e->usize ? (size_t)e->usize : 1);
  if (!buf) return ltB_fail(ctx, "%s: out of memory reading %s", op, e->name);
  if (e->method == 8 ? ltS_zip_inflate(ctx, op, z->src, e->name, e->data_off, e->csize, e->usize,
                                       buf)
                     : ltS_src_read(ctx, op, z->src, e->data_off, buf, (size_t)e->usize, e->name)) {
    free(buf);
    return -1;
  }
  if (verify && ltS_crc32(0, buf, (size_t)e->usize) != e->crc) {
    free(buf);
    return ltB_fail(ctx, "%s: %s: CRC-32 mismatch in zip entry %s (file is corrupted)", op,
                    z->src->name, e->name);
  }
  *out = buf;
  *n = (size_t)e->usize;
  return 0;
}

/* ============================================================ writer */

static uint8_t *wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); return p + 2; }
static uint8_t *wr32(uint8_t *p, uint32_t v) { return wr16(wr16(p, (uint16_t)v), (uint16_t)(v >> 16)); }
static uint8_t *wr64(uint8_t *p, uint64_t v) { return wr32(wr32(p, (uint32_t)v), (uint32_t)(v >> 32)); }

#define DOS_DATE 0x21   /* 1980-01-01 */
#define SAT32 0xffffffffu

void ltS_zw_init(ltS_zwriter *w, ltS_afile *out) {
  memset(w, 0, sizeof *w);
  w->out = out;
}

void ltS_zw_free(ltS_zwriter *w) {
  for (size_t i = 0; i < w->n; i++) free(w->e[i].name);
  free(w->e);
  w->e = NULL;
  w->n = w->cap = 0;
}

static int put(lt_ctx *ctx, const char *op, ltS_zwriter *w, const void *p, size_t n) {
  if (n && !ltS_afile_write(w->out, p, n)) return ltB_fail(ctx, "%s: write error", op);
  return 0;
}

int ltS_zw_add(lt_ctx *ctx, const char *op, ltS_zwriter *w, const char *name, const void *data,
               size_t n) {
  size_t nl = strlen(name);
  if (nl > 0xffff) return ltB_fail(ctx, "%s: zip entry name too long", op);
  if (w->n == w->cap) {
    size_t nc = w->cap ? w->cap * 2 : 16;
    struct ltS_zwent *e = realloc(w->e, nc * sizeof *e);
    if (!e) return ltB_fail(ctx, "%s: out of memory", op);
    w->e = e;
    w->cap = nc;
  }
  char *nm = malloc(nl + 1);
  if (!nm) return ltB_fail(ctx, "%s: out of memory", op);
  memcpy(nm, name, nl + 1);
  bool z64 = (uint64_t)n >= SAT32;
  size_t x64 = z64 ? 20 : 0;
  size_t pad = (ALIGN - (size_t)((w->out->written + 30 + nl + x64 + 4) % ALIGN)) % ALIGN;
  uint32_t crc = ltS_crc32(0, data, n);
  uint8_t h[30 + 20 + 4 + ALIGN], *p = h;
  p = wr32(p, SIG_LOCAL);
  p = wr16(p, z64 ? 45 : 20);
  p = wr16(p, 0);                /* flags */
  p = wr16(p, 0);                /* stored */
  p = wr16(p, 0);                /* time */
  p = wr16(p, DOS_DATE);
  p = wr32(p, crc);
  p = wr32(p, z64 ? SAT32 : (uint32_t)n);
  p = wr32(p, z64 ? SAT32 : (uint32_t)n);
  p = wr16(p, (uint16_t)nl);
  p = wr16(p, (uint16_t)(x64 + 4 + pad));
  w->e[w->n] = (struct ltS_zwent){nm, w->out->written, n, crc};
  w->n++;
  if (put(ctx, op, w, h, (size_t)(p - h)) || put(ctx, op, w, name, nl)) return -1;
  p = h;
  if (z64) {
    p = wr16(p, 1);
    p = wr16(p, 16);
    p = wr64(p, n);
    p = wr64(p, n);
  }
  p = wr16(p, 0x4246);           /* "FB" */
  p = wr16(p, (uint16_t)pad);
  memset(p, 'Z', pad);
  p += pad;
  if (put(ctx, op, w, h, (size_t)(p - h))) return -1;
  return put(ctx, op, w, data, n);
}

int ltS_zw_finish(lt_ctx *ctx, const char *op, ltS_zwriter *w) {
  uint64_t cd_off = w->out->written;
  for (size_t i = 0; i < w->n; i++) {
    struct ltS_zwent *e = &w->e[i];
    bool zs = e->size >= SAT32, zo = e->off >= SAT32;
    size_t xl = zs || zo ? 4 + (zs ? 16 : 0) + (zo ? 8 : 0) : 0;
    size_t nl = strlen(e->name);
    uint8_t h[46 + 28], *p = h;
    p = wr32(p, SIG_CENTRAL);
    p = wr16(p, 3 << 8 | 45);    /* made by: unix, 4.5 */
    p = wr16(p, xl ? 45 : 20);
    p = wr16(p, 0);
    p = wr16(p, 0);
    p = wr16(p, 0);
    p = wr16(p, DOS_DATE);
    p = wr32(p, e->crc);
    p = wr32(p, zs ? SAT32 : (uint32_t)e->size);
    p = wr32(p, zs ? SAT32 : (uint32_t)e->size);
    p = wr16(p, (uint16_t)nl);
    p = wr16(p, (uint16_t)xl);
    p = wr16(p, 0);              /* comment */
    p = wr16(p, 0);              /* disk */
    p = wr16(p, 0);              /* internal attributes */
    p = wr32(p, 0644u << 16);    /* external: -rw-r--r-- */
    p = wr32(p, zo ? SAT32 : (uint32_t)e->off);
    if (put(ctx, op, w, h, (size_t)(p - h)) || put(ctx, op, w, e->name, nl)) return -1;
    p = h;
    if (xl) {
      p = wr16(p, 1);
      p = wr16(p, (uint16_t)(xl - 4));
      if (zs) {
        p = wr64(p, e->size);
        p = wr64(p, e->size);
      }
      if (zo) p = wr64(p, e->off);
      if (put(ctx, op, w, h, (size_t)(p - h))) return -1;
    }
  }
  uint64_t cd_size = w->out->written - cd_off, eocd64 = w->out->written;
  uint8_t t[56 + 20 + 22], *p = t;
  p = wr32(p, SIG_EOCD64);
  p = wr64(p, 44);
  p = wr16(p, 45);
  p = wr16(p, 45);
  p = wr32(p, 0);
  p = wr32(p, 0);
  p = wr64(p, w->n);
  p = wr64(p, w->n);
  p = wr64(p, cd_size);
  p = wr64(p, cd_off);
  p = wr32(p, SIG_LOC64);
  p = wr32(p, 0);
  p = wr64(p, eocd64);
  p = wr32(p, 1);
  p = wr32(p, SIG_EOCD);
  p = wr16(p, 0);
  p = wr16(p, 0);
  p = wr16(p, w->n >= 0xffff ? 0xffff : (uint16_t)w->n);
  p = wr16(p, w->n >= 0xffff ? 0xffff : (uint16_t)w->n);
  p = wr32(p, cd_size >= SAT32 ? SAT32 : (uint32_t)cd_size);
  p = wr32(p, cd_off >= SAT32 ? SAT32 : (uint32_t)cd_off);
  p = wr16(p, 0);
  return put(ctx, op, w, t, (size_t)(p - t));
}
