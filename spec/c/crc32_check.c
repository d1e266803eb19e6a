/*
** crc32_check.c -- Lantern's zip CRC-32 (src/serial/crc32.c) gives zlib's value: every length
** from 0 to 4096 and random ones up to 1 MiB, at every offset within a cache line, from zero
** and from other running values, and continued across the cut when the data comes in two calls
** (as a checkpoint's records are read). Prints "ok" and exits 0 on success.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

uint32_t ltS_crc32(uint32_t crc, const void *data, size_t n);   /* src/serial/serial.h */

static int check(const unsigned char *p, size_t n, uint32_t c0) {
  uint32_t want = (uint32_t)crc32(c0, p, (uInt)n), got = ltS_crc32(c0, p, n);
  if (got == want) return 0;
  printf("length %zu from %08x: %08x, zlib %08x\n", n, c0, got, want);
  return 1;
}

int main(void) {
  size_t cap = (1u << 20) + 64;
  unsigned char *buf = malloc(cap);
  if (!buf) return 2;
  uint64_t s = 88172645463325252u;
  for (size_t i = 0; i < cap; i++) {   /* xorshift bytes */
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    buf[i] = (unsigned char)s;
  }
  int bad = 0;
  for (size_t n = 0; n <= 4096 && !bad; n++) bad |= check(buf + n % 64, n, n % 3 ? 0 : 0x12345678u);
  for (int t = 0; t < 400 && !bad; t++) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    size_t n = (size_t)(s % (1u << 20)), off = (size_t)(s >> 40) % 64;
    size_t cut = n ? (size_t)(s >> 20) % n : 0;
    uint32_t c0 = (uint32_t)(s >> 32);
    bad |= check(buf + off, n, c0);
    uint32_t two = ltS_crc32(ltS_crc32(c0, buf + off, cut), buf + off + cut, n - cut);
    if (!bad && two != (uint32_t)crc32(c0, buf + off, (uInt)n)) {
      printf("length %zu cut at %zu: %08x\n", n, cut, two);
      bad = 1;
    }
  }
  /* an all-zero and an all-ones run: no shortcut may depend on the bytes */
  for (size_t i = 0; i < 8192; i++) buf[i] = 0;
  bad |= check(buf, 8192, 0) | check(buf, 8192, 0xffffffffu);
  for (size_t i = 0; i < 8192; i++) buf[i] = 0xff;
  bad |= check(buf, 8192, 0) | check(buf, 8192, 0xffffffffu);
  free(buf);
  if (!bad) puts("ok");
  return bad;
}
