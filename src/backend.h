/*
** backend.h -- the op layer's way to its tensors' kernels and devices: the registry of kernel
** tables, allocation on a device, the one-device rule and copies between devices. Included by
** the op layer (ops, autograd, serialisation, the binding), never by the kernels or by the
** base (tensor.c, iter.c, alloc.c), so kernels cannot reach ops through it.
*/
#ifndef LT_BACKEND_H
#define LT_BACKEND_H

#include "core.h"

/* "cpu" for the cpu, "cuda:0" for the others, as PyTorch prints a tensor's device; returns buf. */
char *ltD_device_name(lt_devtype type, int index, char *buf, size_t n);
/* The table of a kind of device (NULL: none registered); the registry is in backend.c. */
const ltK_backend *ltD_backend_of(lt_devtype device);
/* Registers the kernel table of a kind of device (a plugin's, or a test's); a NULL table or the
** cpu's kind is ignored: the cpu's is built in, and a table stays while tensors may use it. */
void ltD_backend_register(lt_devtype type, const ltK_backend *b);

extern const ltK_backend *ltD_backends[LT_NDEVTYPE];
/* The kernel table of t's device: a tensor exists only on a device whose table is registered. */
static inline const ltK_backend *ltK_kernels(const lt_tensor *t) {
  return ltD_backends[t->storage->device];
}

/* New empty tensor on `like`'s device: the op layer's outputs live where their inputs do. */
int ltO_empty_as(lt_ctx *ctx, lt_tensor **out, const lt_tensor *like, lt_dtype dt, int ndim,
                 const int64_t *size);
/* The same filled with v (copy.c). */
int ltO_full_as(lt_ctx *ctx, lt_tensor **out, const lt_tensor *like, lt_dtype dt, int ndim,
                const int64_t *size, double v);
/* PyTorch's error for tensors of one op on two devices, prefixed with the op. */
int ltD_fail_devices(lt_ctx *ctx, const char *op, const lt_tensor *a, const lt_tensor *b);
static inline bool ltD_same_device(const lt_tensor *a, const lt_tensor *b) {
  return a->storage->device == b->storage->device &&
         a->storage->device_index == b->storage->device_index;
}
/* 0 when a and b are on one device, else the error above. */
int ltD_check_devices(lt_ctx *ctx, const char *op, const lt_tensor *a, const lt_tensor *b);
/* The first nbytes of a storage as the host sees them: *host is NULL for a cpu storage (read
** its data), else a malloc'ed copy the caller frees. */
int ltD_storage_host_bytes(lt_ctx *ctx, const lt_storage *s, size_t nbytes, void **host);
/* dst (any device) gets src's values (any device), converted and broadcast as ltC_copy. */
int ltD_copy_across(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src);

#endif
