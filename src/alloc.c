/*
** alloc.c -- the buffer cache behind every storage.
**
** Freed blocks go to size-class free lists instead of back to the system, so a training loop in
** steady state touches no fresh pages (a first touch costs ~11 us per 4 KiB page here). Size
** classes are powers of two split into four steps, so at most 25% of a block is slack.
**
** The cache gives back what the program stopped using: each class remembers the fewest blocks
** it held idle during the current interval (its low-water mark); a block below that mark was
** not needed once in the whole interval, so at the interval's end that many blocks go back to
** the system. A loop that reuses its buffers every step keeps them; a phase that ended releases
** its buffers one to two intervals later. The clock is read once every TICK_EVERY cache calls,
** so the check costs nothing measurable. A hard cap bounds the cache in between.
*/
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core.h"

#define NCLASS 256
#define ALIGN 64
#define TICK_EVERY 64

typedef struct block { struct block *next; } block;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static block *freelist[NCLASS];
static uint32_t count[NCLASS], lowwater[NCLASS];
static lt_memstats stats;
/* read without the lock by ltB_cache_in_use (the collector pacing asks it often) */
static size_t in_use_now;

static size_t cache_cap = (size_t)4 << 30;
static double release_after = 2.0;        /* seconds; 0 disables the ageing */
static uint64_t calls;
static double interval_start;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

static size_t class_size(int c) {
  if (c < 16) return (size_t)(c + 1) * ALIGN;
  int p = 10 + (c - 16) / 4;
  size_t base = (size_t)1 << p;
  return base + (size_t)((c - 16) % 4 + 1) * (base / 4);
}

static void set_in_use(size_t v) {
  stats.in_use = v;
  __atomic_store_n(&in_use_now, v, __ATOMIC_RELAXED);
}

/* Under the lock: at an interval's end, moves every class's idle blocks (its low-water count,
** taken from the cold end of the list) onto *out, to be freed after unlocking. The clock is
** read every TICK_EVERY calls, or now when `now` is set. */
static void age(block **out, bool now) {
  if (release_after <= 0 || (++calls % TICK_EVERY && !now)) return;
  double t = now_s();
  if (t - interval_start < release_after) return;
  interval_start = t;
  for (int c = 0; c < NCLASS; c++) {
    uint32_t drop = lowwater[c], keep = count[c] - drop;
    lowwater[c] = keep;
    if (!drop) continue;
    block **link = &freelist[c];
    for (uint32_t i = 0; i < keep; i++) link = &(*link)->next;
    block *cold = *link;
    *link = NULL;
    count[c] = keep;
    stats.cached -= (size_t)drop * class_size(c);
    while (cold) {
      block *n = cold->next;
      cold->next = *out;
      *out = cold;
      cold = n;
    }
  }
}

static void free_all(block *b) {
  while (b) {
    block *n = b->next;
    free(b);
    b = n;
  }
}

void *ltB_cache_alloc(size_t nbytes, size_t *got) {
  size_t rounded;
  int c = size_class(nbytes, &rounded);
  if (c < 0) return NULL;
  block *aged = NULL;
  pthread_mutex_lock(&lock);
  block *b = freelist[c];
  if (b) {
    freelist[c] = b->next;
    if (--count[c] < lowwater[c]) lowwater[c] = count[c];
    stats.cached -= rounded;
    stats.reused++;
  } else {
    stats.fresh_allocs++;
  }
  set_in_use(stats.in_use + rounded);
  if (stats.in_use > stats.peak_in_use) stats.peak_in_use = stats.in_use;
  age(&aged, false);
  pthread_mutex_unlock(&lock);
  free_all(aged);
  if (!b) {
    b = aligned_alloc(ALIGN, rounded);
    if (!b) {
      pthread_mutex_lock(&lock);
      set_in_use(stats.in_use - rounded);
      pthread_mutex_unlock(&lock);
      return NULL;
    }
  }
  *got = rounded;
  return b;
}

void ltB_cache_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t rounded;
  int c = size_class(nbytes, &rounded);
  block *aged = NULL;
  pthread_mutex_lock(&lock);
  set_in_use(stats.in_use - rounded);
  if (stats.cached + rounded <= cache_cap) {
    block *b = p;
    b->next = freelist[c];
    freelist[c] = b;
    count[c]++;
    stats.cached += rounded;
    p = NULL;
  }
  age(&aged, false);
  pthread_mutex_unlock(&lock);
  free(p);
  free_all(aged);
}

size_t ltB_cache_in_use(void) { return __atomic_load_n(&in_use_now, __ATOMIC_RELAXED); }

void lt_memory_stats(lt_memstats *st) {
  block *aged = NULL;
  pthread_mutex_lock(&lock);
  age(&aged, true);
  *st = stats;
  pthread_mutex_unlock(&lock);
  free_all(aged);
}

void lt_reset_peak_memory(void) {
  pthread_mutex_lock(&lock);
  stats.peak_in_use = stats.in_use;
  pthread_mutex_unlock(&lock);
}

void lt_empty_cache(void) {
  block *all[NCLASS];
  pthread_mutex_lock(&lock);
  memcpy(all, freelist, sizeof all);
  memset(freelist, 0, sizeof freelist);
  memset(count, 0, sizeof count);
  memset(lowwater, 0, sizeof lowwater);
  stats.cached = 0;
  pthread_mutex_unlock(&lock);
  for (int c = 0; c < NCLASS; c++) free_all(all[c]);
}

void lt_cache_options(double *release_after_s, size_t *cap_bytes) {
  block *over = NULL;
  pthread_mutex_lock(&lock);
  if (release_after_s) {
    double old = release_after;
    if (*release_after_s >= 0) release_after = *release_after_s;
    *release_after_s = old;
  }
  if (cap_bytes) {
    size_t old = cache_cap;
    if (*cap_bytes != (size_t)-1) {
      cache_cap = *cap_bytes;
      /* a lowered cap applies now: the largest classes go first */
      for (int c = NCLASS - 1; c >= 0 && stats.cached > cache_cap; c--) {
        while (freelist[c] && stats.cached > cache_cap) {
          block *b = freelist[c];
          freelist[c] = b->next;
          count[c]--;
          if (lowwater[c] > count[c]) lowwater[c] = count[c];
          stats.cached -= class_size(c);
          b->next = over;
          over = b;
        }
      }
    }
    *cap_bytes = old;
  }
  pthread_mutex_unlock(&lock);
  free_all(over);
}
