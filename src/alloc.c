/*
** alloc.c -- the buffer cache behind every storage.
**
** Freed blocks go to size-class free lists instead of back to the system, so a training loop in
** steady state touches no fresh pages (a first touch costs ~11 us per 4 KiB page here). Size
** classes are powers of two split into four steps, so at most 25% of a block is slack. The cache
** is trimmed only when it exceeds its cap, or on request (lt_empty_cache).
*/
#include <pthread.h>
#include <stdlib.h>

#include "core.h"

#define NCLASS 256
#define ALIGN 64
#define CACHE_CAP ((size_t)4 << 30)

typedef struct block { struct block *next; } block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block *freelist[NCLASS];
static lt_memstats stats;

/* Class index and rounded size for a request: multiples of 64 up to 1 KiB, then four steps
** per power of two. */
static int size_class(size_t n, size_t *rounded) {
  if (n <= 1024) {
    size_t c = (n + ALIGN - 1) / ALIGN;
    if (c == 0) c = 1;
    *rounded = c * ALIGN;
    return (int)c - 1;                       /* classes 0..15 */
  }
  int p = 63 - __builtin_clzll((unsigned long long)(n - 1));   /* 2^p < n <= 2^(p+1) */
  size_t base = (size_t)1 << p;
  size_t q = base / 4;
  size_t j = (n - base + q - 1) / q;         /* 1..4 */
  *rounded = base + j * q;
  int c = 16 + (p - 10) * 4 + (int)(j - 1);
  return c < NCLASS ? c : -1;
}

void *lt_cache_alloc(size_t nbytes, size_t *got) {
  size_t rounded;
  int c = size_class(nbytes, &rounded);
  if (c < 0) return NULL;
  pthread_mutex_lock(&lock);
  block *b = freelist[c];
  if (b) {
    freelist[c] = b->next;
    stats.cached -= rounded;
    stats.reused++;
  } else {
    stats.fresh_allocs++;
  }
  stats.in_use += rounded;
  if (stats.in_use > stats.peak_in_use) stats.peak_in_use = stats.in_use;
  pthread_mutex_unlock(&lock);
  if (!b) {
    b = aligned_alloc(ALIGN, rounded);
    if (!b) {
      pthread_mutex_lock(&lock);
      stats.in_use -= rounded;
      pthread_mutex_unlock(&lock);
      return NULL;
    }
  }
  *got = rounded;
  return b;
}

void lt_cache_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t rounded;
  int c = size_class(nbytes, &rounded);
  pthread_mutex_lock(&lock);
  stats.in_use -= rounded;
  if (stats.cached + rounded <= CACHE_CAP) {
    block *b = p;
    b->next = freelist[c];
    freelist[c] = b;
    stats.cached += rounded;
    p = NULL;
  }
  pthread_mutex_unlock(&lock);
  free(p);
}

void lt_memory_stats(lt_memstats *st) {
  pthread_mutex_lock(&lock);
  *st = stats;
  pthread_mutex_unlock(&lock);
}

void lt_empty_cache(void) {
  block *all[NCLASS];
  pthread_mutex_lock(&lock);
  memcpy(all, freelist, sizeof all);
  memset(freelist, 0, sizeof freelist);
  stats.cached = 0;
  pthread_mutex_unlock(&lock);
  for (int c = 0; c < NCLASS; c++) {
    while (all[c]) {
      block *n = all[c]->next;
      free(all[c]);
      all[c] = n;
    }
  }
}
