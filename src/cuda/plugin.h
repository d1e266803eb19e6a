/*
** plugin.h -- the bridge between core.so and the CUDA plugin (build/lantern/cuda.so).
**
** core.so hides its internal symbols (-fvisibility=hidden), so the plugin calls none of them.
** Instead core.so dlopens the plugin on the first use of a "cuda" device (ltD_cuda_load, from
** lt_device_check) and calls the one function it exports, LT_CUDA_INIT, with the few core
** functions it needs (ltD_cuda_host). The plugin fills a whole ltK_backend, every entry (those
** it has no kernel for with a stub that reports "<op>: not implemented on cuda"), and a few
** extras lt.cuda reads. Both sides compile this header and core.h; the sizes in ltD_cuda_host
** refuse a plugin built against another core.h.
*/
#ifndef LT_CUDA_PLUGIN_H
#define LT_CUDA_PLUGIN_H

#include <stddef.h>

#include "../core.h"

#define LT_CUDA_ABI 2
#define LT_CUDA_INIT "lantern_cuda_init"
#define LT_CUDA_WHY_MAX 512

/* What core.so lends the plugin. */
typedef struct ltD_cuda_host {
  int abi;                     /* LT_CUDA_ABI */
  size_t backend_size;         /* sizeof(ltK_backend) and sizeof(lt_tensor) on the core's side */
  size_t tensor_size;
  int (*fail)(lt_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
} ltD_cuda_host;

/* The caching allocator's figures for one device, as lt.cuda.memory_stats() shows them. */
typedef struct ltD_cuda_stats {
  size_t allocated;            /* bytes in blocks handed out (their size class) */
  size_t reserved;             /* bytes held from cudaMalloc: handed out plus cached */
  size_t peak_allocated;
  size_t n_cuda_malloc;        /* calls of cudaMalloc */
  size_t n_cache_hits;         /* allocations served from the cache */
  size_t n_free_retries;       /* out-of-memory retries after freeing the cache */
} ltD_cuda_stats;

/* What the plugin gives back: the kernel table, then the extras. */
typedef struct ltD_cuda_plugin {
  ltK_backend table;
  int (*stats)(int index, ltD_cuda_stats *out);   /* 0, or -1 for a bad index */
  void (*empty_cache)(void);                     /* returns cached blocks to the driver */
  int (*synchronize)(lt_ctx *ctx);               /* waits for every device's work */
} ltD_cuda_plugin;

/* 0 with *out filled, or -1 with why (a sentence naming what is missing) filled. */
typedef int (*ltD_cuda_init_fn)(const ltD_cuda_host *host, ltD_cuda_plugin *out, char *why,
                                size_t why_size);

/* -- the core's side (src/cuda_plugin.c) */
/* Loads the plugin once (later calls return the first answer) and registers its table: the
** table, or NULL when no CUDA device can be used; ltD_cuda_why() then says why. Thread-safe. */
const ltK_backend *ltD_cuda_load(void);
const char *ltD_cuda_why(void);
/* The loaded plugin's extras, or NULL. */
const ltD_cuda_plugin *ltD_cuda_plugin_of(void);

#endif
