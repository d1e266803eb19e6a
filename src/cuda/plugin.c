/*
** plugin.c -- the CUDA plugin's entry point (plugin.h): checks the core it is loaded into,
** finds the devices, and fills the kernel table: stubs first, then the entries with kernels.
*/
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

const ltD_cuda_host *ltc_host;

static _Thread_local char pending[LT_CUDA_WHY_MAX];

void ltc_pend(const char *fmt, ...) {
  if (pending[0]) return;   /* the first failure is the one to report */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pending, sizeof pending, fmt, ap);
  va_end(ap);
}

int ltc_take_pending(lt_ctx *ctx) {
  if (!pending[0]) return 0;
  ltc_host->fail(ctx, "%s", pending);
  pending[0] = 0;
  return -1;
}

int ltc_check(lt_ctx *ctx, const char *op, int err) {
  if (err == cudaSuccess) return 0;
  return ltc_host->fail(ctx, "%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)err));
}

void ltc_pend_err(const char *op, int err) {
  if (err != cudaSuccess) ltc_pend("%s: CUDA error: %s", op, cudaGetErrorString((cudaError_t)err));
}

__attribute__((visibility("default"))) int lantern_cuda_init(const ltD_cuda_host *host,
                                                             ltD_cuda_plugin *out, char *why,
                                                             size_t why_size) {
  if (host->abi != LT_CUDA_ABI || host->backend_size != sizeof(ltK_backend) ||
      host->tensor_size != sizeof(lt_tensor)) {
    snprintf(why, why_size, "the CUDA plugin was built against another version of Lantern's "
             "core (rebuild it: make cuda)");
    return -1;
  }
  ltc_host = host;
  if (ltc_alloc_init(why, why_size)) return -1;
  memset(out, 0, sizeof *out);
  ltK_backend *b = &out->table;
  b->name = "cuda";
  ltc_stub_entries(b);
  ltc_fill_entries(b);
  b->device_count = ltc_device_count;
  b->alloc = ltc_alloc;
  b->release = ltc_release;
  b->to_host = ltc_to_host;
  b->from_host = ltc_from_host;
  out->stats = ltc_stats;
  out->empty_cache = ltc_empty_cache;
  out->synchronize = ltc_synchronize;
  return 0;
}
