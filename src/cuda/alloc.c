/*
** alloc.c -- the device entries: a caching allocator over cudaMalloc, and copies to and from
** the host.
**
** A request is rounded to its size class (512 bytes up to 1 MiB, then 2 MiB steps, as PyTorch's
** small and large pools) and served from a cached block of that class when there is one, so a
** training loop that frees and reallocates tensors of the same shapes stops calling cudaMalloc
** after its first step. A released block goes back to the cache, never to the driver, until
** empty_cache, or an out-of-memory cudaMalloc, which frees the device's cache and retries once.
** Not done: splitting a large cached block for a smaller request, and running Lua's collector
** before the retry (the plugin does not see the lua_State).
*/
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define SMALL_STEP ((size_t)512)
#define SMALL_MAX ((size_t)1 << 20)
#define LARGE_STEP ((size_t)2 << 20)
#define MAX_DEVICES 64
#define MIB (1024.0 * 1024.0)

typedef struct cached {
  struct cached *next;
  void *data;
  size_t size;   /* its size class */
} cached;

typedef struct pool {
  cached *free_blocks;   /* cached blocks, any class (searched for an exact class) */
  ltD_cuda_stats st;
} pool;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pool pools[MAX_DEVICES];
static int ndevices;

static size_t size_class(size_t n) {
  if (n == 0) n = 1;
  size_t step = n <= SMALL_MAX ? SMALL_STEP : LARGE_STEP;
  return (n + step - 1) / step * step;
}

int ltc_alloc_init(char *why, size_t why_size) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    snprintf(why, why_size, "the CUDA runtime found no usable driver or device (%s: %s)",
             cudaGetErrorName(e), cudaGetErrorString(e));
    return -1;
  }
  if (n <= 0) {
    snprintf(why, why_size, "no CUDA device is present");
    return -1;
  }
  ndevices = n > MAX_DEVICES ? MAX_DEVICES : n;
  return 0;
}

int ltc_device_count(void) { return ndevices; }

/* Frees device `index`'s cached blocks (lock held). */
static void drop_cache(int index) {
  pool *p = &pools[index];
  cudaSetDevice(index);
  while (p->free_blocks) {
    cached *c = p->free_blocks;
    p->free_blocks = c->next;
    cudaFree(c->data);
    p->st.reserved -= c->size;
    free(c);
  }
}

int ltc_alloc(lt_ctx *ctx, int index, size_t nbytes, void **data) {
  if (ltc_take_pending(ctx)) return -1;
  size_t size = size_class(nbytes);
  pthread_mutex_lock(&lock);
  pool *p = &pools[index];
  for (cached **at = &p->free_blocks; *at; at = &(*at)->next) {
    if ((*at)->size != size) continue;
    cached *c = *at;
    *at = c->next;
    *data = c->data;
    free(c);
    p->st.n_cache_hits++;
    goto got;
  }
  cudaSetDevice(index);
  cudaError_t e = cudaMalloc(data, size);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();   /* clear it: it is not sticky, and the retry may succeed */
    drop_cache(index);
    p->st.n_free_retries++;
    e = cudaMalloc(data, size);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t allocated = p->st.allocated, reserved = p->st.reserved;
    pthread_mutex_unlock(&lock);
    if (e == cudaErrorMemoryAllocation)
      return ltc_host->fail(ctx, "CUDA out of memory. Tried to allocate %.2f MiB (device %d; "
                            "%.2f MiB allocated by Lantern, %.2f MiB reserved)",
                            (double)size / MIB, index, (double)allocated / MIB,
                            (double)reserved / MIB);
    return ltc_check(ctx, "alloc", e);
  }
  p->st.n_cuda_malloc++;
  p->st.reserved += size;
got:
  p->st.allocated += size;
  if (p->st.allocated > p->st.peak_allocated) p->st.peak_allocated = p->st.allocated;
  pthread_mutex_unlock(&lock);
  return 0;
}

void ltc_release(int index, void *data, size_t nbytes) {
  cached *c = malloc(sizeof *c);
  size_t size = size_class(nbytes);
  pthread_mutex_lock(&lock);
  pool *p = &pools[index];
  p->st.allocated -= size;
  if (c) {
    *c = (cached){.next = p->free_blocks, .data = data, .size = size};
    p->free_blocks = c;
  } else {   /* no host memory to remember it by: give it back */
    cudaSetDevice(index);
    cudaFree(data);
    p->st.reserved -= size;
  }
  pthread_mutex_unlock(&lock);
}

/* cudaMemcpy on the legacy default stream waits for the kernels queued before it, so the
** host sees their results. */
int ltc_to_host(lt_ctx *ctx, int index, void *host, const void *src, size_t nbytes) {
  if (ltc_take_pending(ctx)) return -1;
  if (nbytes == 0) return 0;
  cudaSetDevice(index);
  return ltc_check(ctx, "to_host", cudaMemcpy(host, src, nbytes, cudaMemcpyDeviceToHost));
}

int ltc_from_host(lt_ctx *ctx, int index, void *dst, const void *host, size_t nbytes) {
  if (ltc_take_pending(ctx)) return -1;
  if (nbytes == 0) return 0;
  cudaSetDevice(index);
  return ltc_check(ctx, "from_host", cudaMemcpy(dst, host, nbytes, cudaMemcpyHostToDevice));
}

int ltc_stats(int index, ltD_cuda_stats *out) {
  if (index < 0 || index >= ndevices) return -1;
  pthread_mutex_lock(&lock);
  *out = pools[index].st;
  pthread_mutex_unlock(&lock);
  return 0;
}

void ltc_empty_cache(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < ndevices; i++) drop_cache(i);
  pthread_mutex_unlock(&lock);
}

int ltc_synchronize(lt_ctx *ctx) {
  if (ltc_take_pending(ctx)) return -1;
  for (int i = 0; i < ndevices; i++) {
    cudaSetDevice(i);
    if (ltc_check(ctx, "synchronize", cudaDeviceSynchronize())) return -1;
  }
  return 0;
}
