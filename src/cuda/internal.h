/*
** internal.h -- what the plugin's C files share (none of it leaves cuda.so).
*/
#ifndef LTC_INTERNAL_H
#define LTC_INTERNAL_H

#include "plugin.h"

/* The core functions lent at init (plugin.h). */
extern const ltD_cuda_host *ltc_host;

/* A kernel entry that cannot fail (a void entry) records its failure here; the next entry that
** can (alloc, to_host, from_host, synchronize) reports it, as CUDA reports an asynchronous
** error at the next synchronising call. Per thread, as the core's states are. */
void ltc_pend(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* -1 with the pending message set into ctx (and cleared), or 0 when none. */
int ltc_take_pending(lt_ctx *ctx);
/* -1 with "<op>: CUDA error: <text>" for a failed runtime call `err`, else 0. */
int ltc_check(lt_ctx *ctx, const char *op, int err);
/* The same for a void entry: pends it. */
void ltc_pend_err(const char *op, int err);

/* -- alloc.c: the caching allocator and the device entries */
int ltc_device_count(void);
int ltc_alloc(lt_ctx *ctx, int index, size_t nbytes, void **data);
void ltc_release(int index, void *data, size_t nbytes);
int ltc_to_host(lt_ctx *ctx, int index, void *host, const void *src, size_t nbytes);
int ltc_from_host(lt_ctx *ctx, int index, void *dst, const void *host, size_t nbytes);
int ltc_stats(int index, ltD_cuda_stats *out);
void ltc_empty_cache(void);
int ltc_synchronize(lt_ctx *ctx);
int ltc_alloc_init(char *why, size_t why_size);

/* -- elementwise.c: the compute entries with kernels */
void ltc_fill_entries(ltK_backend *b);

/* -- stubs.c: every compute entry as a stub reporting "<op>: not implemented on cuda" */
void ltc_stub_entries(ltK_backend *b);

#endif
