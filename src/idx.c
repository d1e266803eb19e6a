/*
** idx.c -- reader for the IDX files of MNIST-style datasets, gzipped or not (zlib reads both).
** Layout: two zero bytes, a type code, the rank; then each size as a big-endian u32; then the
** values, big-endian, row-major.
*/
#include <zlib.h>

#include "core.h"
#include "idx.h"

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Type codes of the format and their element sizes. */
static int code_size(int code) {
  switch (code) {
    case 0x08: case 0x09: return 1;   /* u8, i8 */
    case 0x0B: return 2;              /* i16 */
    case 0x0C: case 0x0D: return 4;   /* i32, f32 */
    case 0x0E: return 8;              /* f64 */
    default: return 0;
  }
}

static double decode(const unsigned char *p, int code) {
  switch (code) {
    case 0x08: return p[0];
    case 0x09: return (signed char)p[0];
    case 0x0B: return (int16_t)(p[0] << 8 | p[1]);
    case 0x0C: return (int32_t)be32(p);
    case 0x0D: {
      uint32_t u = be32(p);
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    default: {
      uint64_t u = (uint64_t)be32(p) << 32 | be32(p + 4);
      double d;
      memcpy(&d, &u, 8);
      return d;
    }
  }
}

int ltS_read_idx(lt_ctx *ctx, lt_tensor **out, const char *path, lt_dtype dt) {
  gzFile f = gzopen(path, "rb");
  if (!f) return ltB_fail(ctx, "read_idx: cannot open '%s'", path);
  unsigned char hdr[4];
  int rc = -1;
  unsigned char *buf = NULL;
  char *vals = NULL;
  size_t got = 0, nbytes = 0, vbytes = 0;
  lt_tensor *t = NULL;
  if (gzread(f, hdr, 4) != 4 || hdr[0] || hdr[1] || !code_size(hdr[2]) || hdr[3] == 0 ||
      hdr[3] > LT_MAX_DIMS) {
    ltB_fail(ctx, "read_idx: '%s' is not an IDX file (bad magic)", path);
    goto done;
  }
  int ndim = hdr[3], es = code_size(hdr[2]);
  int64_t size[LT_MAX_DIMS], n = 1;
  for (int i = 0; i < ndim; i++) {
    unsigned char b[4];
    if (gzread(f, b, 4) != 4) {
      ltB_fail(ctx, "read_idx: '%s' is truncated in its header", path);
      goto done;
    }
    size[i] = be32(b);
    if (size[i] && n > ((int64_t)1 << 40) / size[i]) {
      ltB_fail(ctx, "read_idx: '%s' declares an implausible size", path);
      goto done;
    }
    n *= size[i];
  }
  nbytes = (size_t)n * (size_t)es;
  buf = ltB_cache_alloc(nbytes ? nbytes : 1, &got);
  if (!buf) {
    ltB_fail(ctx, "read_idx: out of memory reading '%s'", path);
    goto done;
  }
  for (size_t off = 0; off < nbytes;) {
    unsigned chunk = nbytes - off > (1u << 30) ? (1u << 30) : (unsigned)(nbytes - off);
    int r = gzread(f, buf + off, chunk);
    if (r <= 0) {
      ltB_fail(ctx, "read_idx: '%s' is truncated: expected %zu data bytes, got %zu", path,
               nbytes, off);
      goto done;
    }
    off += (size_t)r;
  }
  /* decoded on the host, then copied into a tensor of the default device */
  size_t des = lt_dtype_size(dt);
  vbytes = (size_t)n * des;
  vals = ltB_cache_alloc(vbytes ? vbytes : 1, &got);
  if (!vals) {
    ltB_fail(ctx, "read_idx: out of memory reading '%s'", path);
    goto done;
  }
  for (int64_t i = 0; i < n; i++) {
    double v = decode(buf + i * es, hdr[2]);
    switch (dt) {
      case LT_FLOAT32: ((float *)vals)[i] = (float)v; break;
      case LT_FLOAT64: ((double *)vals)[i] = v; break;
      case LT_INT64: ((int64_t *)vals)[i] = (int64_t)v; break;
      default: vals[i * des] = v != 0; break;
    }
  }
  lt_tensor *host;
  if (lt_from_blob(ctx, &host, vals, dt, ndim, size, NULL, NULL, NULL)) goto done;
  int crc = lt_clone(ctx, &t, host);
  lt_release(host);
  if (crc) goto done;
  *out = t;
  rc = 0;
done:
  if (buf) ltB_cache_free(buf, nbytes ? nbytes : 1);
  if (vals) ltB_cache_free(vals, vbytes ? vbytes : 1);
  gzclose(f);
  return rc;
}
