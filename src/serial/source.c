/*
** source.c -- byte sources (a file read with pread, or a buffer) that every reader goes
** through with bounds checked, and CRC-32: what zip.c and records.c both stand on.
*/
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "serial.h"

/* ============================================================ sources */

int ltS_src_open(lt_ctx *ctx, const char *op, ltS_src *s, const char *path) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
  s->name = path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ltB_fail(ctx, "%s: cannot open '%s': %s", op, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    int e = S_ISDIR(st.st_mode) ? EISDIR : errno;
    close(fd);
    return ltB_fail(ctx, "%s: cannot read '%s': %s", op, path, strerror(e));
  }
  s->fd = fd;
  s->size = (uint64_t)st.st_size;
  return 0;
}

void ltS_src_mem(ltS_src *s, const void *mem, size_t n, const char *name) {
  s->mem = mem;
  s->fd = -1;
  s->size = n;
  s->name = name;
}

void ltS_src_close(ltS_src *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

int ltS_src_read(lt_ctx *ctx, const char *op, const ltS_src *s, uint64_t off, void *dst, size_t n,
                 const char *what) {
  if (off > s->size || n > s->size - off)
    return ltB_fail(ctx, "%s: %s: file is truncated (%s needs bytes %llu..%llu, file has %llu)",
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
      return ltB_fail(ctx, "%s: %s: read error in %s: %s", op, s->name, what,
                      got < 0 ? strerror(errno) : "unexpected end of file");
    p += got;
    off += (uint64_t)got;
    n -= (size_t)got;
  }
  return 0;
}
