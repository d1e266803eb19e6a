/*
** device.c -- devices: their names, the registry of kernel tables, the one-device rule of an op,
** and moving tensors between devices.
**
** A device other than the cpu is treated as discrete, as the seed's Module.to describes: its
** memory is not the host's, so data moves only through its table's to_host / from_host, and
** between two such devices through the host. Conversion and broadcasting happen on the device
** that has them in its copy kernel, never in the transfer.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda/plugin.h"

static const char *const kind_names[LT_NDEVTYPE] = {[LT_CPU] = "cpu", [LT_CUDA] = "cuda"};

/* What to tell a user whose device kind has no table. */
static const char *const missing_hint[LT_NDEVTYPE] = {
    [LT_CUDA] = "Lantern's CUDA plugin is not loaded",
};

char *ltD_device_name(lt_devtype type, int index, char *buf, size_t n) {
  if (type == LT_CPU)
    snprintf(buf, n, "cpu");
  else
    snprintf(buf, n, "%s:%d", kind_names[type], index);
  return buf;
}

char *lt_device_str(const lt_tensor *t, char *buf, size_t n) {
  return ltD_device_name(t->storage->device, t->storage->device_index, buf, n);
}

int lt_device_parse(lt_ctx *ctx, const char *op, const char *name, lt_devtype *type,
                    int *index) {
  size_t len = strcspn(name, ":");
  for (int k = 0; k < LT_NDEVTYPE; k++) {
    if (strlen(kind_names[k]) != len || strncmp(name, kind_names[k], len) != 0) continue;
    long ix = 0;
    if (name[len] == ':') {
      char *end;
      const char *digits = name + len + 1;
      ix = strtol(digits, &end, 10);
      if (*digits < '0' || *digits > '9' || *end || ix > 1 << 20 ||
          (k == LT_CPU && ix != 0))
        return ltB_fail(ctx, "%s: invalid device '%s' (expected %s%s)", op, name, kind_names[k],
                        k == LT_CPU ? " or cpu:0" : " or cuda:<index>");
    }
    *type = (lt_devtype)k;
    *index = (int)ix;
    return 0;
  }
  return ltB_fail(ctx, "%s: unknown device '%s' (known: cpu, cuda)", op, name);
}

int lt_device_check(lt_ctx *ctx, const char *op, lt_devtype type, int index) {
  if ((unsigned)type >= LT_NDEVTYPE) return ltB_fail(ctx, "%s: unknown device kind %d", op, type);
  char name[32];
  ltD_device_name(type, index, name, sizeof name);
  const ltK_backend *b = type == LT_CUDA ? ltD_cuda_load() : ltD_backends[type];
  if (!b)
    return ltB_fail(ctx, "%s: device '%s' is not available: %s: %s", op, name, missing_hint[type],
                    type == LT_CUDA ? ltD_cuda_why() : "no kernel table");
  int count = b->device_count();
  if (index < 0 || index >= count)
    return ltB_fail(ctx, "%s: device '%s' is not available: %d %s device%s present", op, name,
                    count, kind_names[type], count == 1 ? "" : "s");
  return 0;
}

int ltD_fail_devices(lt_ctx *ctx, const char *op, const lt_tensor *a, const lt_tensor *b) {
  char da[32], db[32];
  return ltB_fail(ctx, "%s: Expected all tensors to be on the same device, but found at least two "
                  "devices, %s and %s!", op, lt_device_str(a, da, sizeof da),
                  lt_device_str(b, db, sizeof db));
}

int ltD_check_devices(lt_ctx *ctx, const char *op, const lt_tensor *a, const lt_tensor *b) {
  return ltD_same_device(a, b) ? 0 : ltD_fail_devices(ctx, op, a, b);
}

/* ------------------------------------------------------------ memory on a device */

/* The deleter of a device storage: ud is the storage record itself. */
static void release_block(void *data, void *ud) {
  const lt_storage *s = ud;
  ltD_backends[s->device]->release(s->device_index, data, s->nbytes);
}

int lt_empty_on(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim, const int64_t *size,
                lt_devtype type, int index) {
  if (type == LT_CPU) return lt_empty(ctx, out, dt, ndim, size);
  size_t nbytes;
  void *data;
  if (ltB_check_new_shape(ctx, dt, ndim, size, &nbytes) ||
      lt_device_check(ctx, "empty", type, index) ||
      ltD_backends[type]->alloc(ctx, index, nbytes, &data))
    return -1;
  lt_storage *s = ltB_storage_adopt(data, nbytes, release_block, NULL);
  if (!s) {
    ltD_backends[type]->release(index, data, nbytes);
    return ltB_fail(ctx, "empty: out of memory");
  }
  s->deleter_ud = s;
  s->device = type;
  s->device_index = index;
  return ltB_tensor_over(ctx, out, s, dt, ndim, size);
}

int ltO_empty_as(lt_ctx *ctx, lt_tensor **out, const lt_tensor *like, lt_dtype dt, int ndim,
                 const int64_t *size) {
  return lt_empty_on(ctx, out, dt, ndim, size, like->storage->device,
                     like->storage->device_index);
}

/* ------------------------------------------------------------ copies between devices */

/* A contiguous tensor of t's dtype and shape on (type, index), uninitialised. */
static int empty_like_on(lt_ctx *ctx, lt_tensor **out, const lt_tensor *t, lt_dtype dt,
                         lt_devtype type, int index) {
  return lt_empty_on(ctx, out, dt, t->ndim, t->size, type, index);
}

/* src's values, contiguous, on the host (src itself when it is a contiguous cpu tensor). */
static int host_copy_of(lt_ctx *ctx, lt_tensor **out, const lt_tensor *src) {
  if (src->storage->device == LT_CPU && lt_is_contiguous(src)) {
    *out = lt_retain((lt_tensor *)src);
    return 0;
  }
  lt_tensor *dense = NULL, *host = NULL;
  const ltK_backend *sb = ltK_kernels(src);
  if (lt_is_contiguous(src)) {
    dense = lt_retain((lt_tensor *)src);
  } else {
    if (ltO_empty_as(ctx, &dense, src, src->dtype, src->ndim, src->size)) return -1;
    sb->copy(ctx, dense, src);
  }
  if (src->storage->device == LT_CPU) {
    *out = dense;
    return 0;
  }
  if (empty_like_on(ctx, &host, src, src->dtype, LT_CPU, 0) ||
      sb->to_host(ctx, src->storage->device_index, ltB_ptr(host), ltB_ptr(dense),
                  (size_t)lt_numel(src) * ltB_esize(src->dtype))) {
    lt_release(dense);
    lt_release(host);
    return -1;
  }
  lt_release(dense);
  *out = host;
  return 0;
}

int ltD_copy_across(lt_ctx *ctx, lt_tensor *dst, const lt_tensor *src) {
  if (ltD_same_device(dst, src)) {
    ltK_kernels(dst)->copy(ctx, dst, src);
    return 0;
  }
  lt_tensor *host, *staged = NULL;
  if (host_copy_of(ctx, &host, src)) return -1;
  int rc = 0;
  if (dst->storage->device == LT_CPU) {
    ltC_backend.copy(ctx, dst, host);
  } else {
    /* the host's values, in src's shape and dst's dtype, go over; the device broadcasts */
    const ltK_backend *db = ltK_kernels(dst);
    bool direct = dst->dtype == host->dtype && lt_is_contiguous(dst) && ltB_same_shape(dst, host);
    lt_tensor *conv = lt_retain(host);
    if (!direct && host->dtype != dst->dtype) {
      lt_release(conv);
      rc = empty_like_on(ctx, &conv, host, dst->dtype, LT_CPU, 0);
      if (!rc) ltC_backend.copy(ctx, conv, host);
    }
    if (!rc && !direct)
      rc = empty_like_on(ctx, &staged, host, dst->dtype, dst->storage->device,
                         dst->storage->device_index);
    if (!rc) {
      lt_tensor *target = direct ? dst : staged;
      rc = db->from_host(ctx, dst->storage->device_index, ltB_ptr(target), ltB_ptr(conv),
                         (size_t)lt_numel(conv) * ltB_esize(conv->dtype));
    }
    if (!rc && !direct) db->copy(ctx, dst, staged);
    lt_release(conv);
  }
  lt_release(staged);
  lt_release(host);
  return rc;
}

/* ToCopyBackward0 across devices: the gradient goes back to the source's device. */
typedef struct {
  lt_devtype type;
  int index;
} device_extra;

static int to_device_backward(lt_ctx *ctx, lt_node *self, lt_tensor *const *go, lt_tensor **gi) {
  const device_extra *e = self->extra;
  return lt_to_device(ctx, &gi[0], go[0], e->type, e->index);
}

static const ltG_node_type to_device_type = {"ToCopyBackward0", to_device_backward, NULL};

int lt_to_device(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_devtype type, int index) {
  if (t->storage->device == type && t->storage->device_index == index) {
    *out = lt_retain(t);
    return 0;
  }
  if (lt_device_check(ctx, "to", type, index)) return -1;
  lt_tensor *r;
  if (empty_like_on(ctx, &r, t, t->dtype, type, index)) return -1;
  if (ltD_copy_across(ctx, r, t)) {
    lt_release(r);
    return -1;
  }
  lt_node *n;
  if (ltG_record(ctx, &to_device_type, 1, &t, 1, &r, sizeof(device_extra), 0, &n)) {
    lt_release(r);
    return -1;
  }
  if (n) *(device_extra *)n->extra = (device_extra){t->storage->device, t->storage->device_index};
  *out = r;
  return 0;
}

int ltD_storage_host_bytes(lt_ctx *ctx, const lt_storage *s, size_t nbytes, void **host) {
  *host = NULL;
  if (s->device == LT_CPU || nbytes == 0) return 0;
  void *h = malloc(nbytes);
  if (!h) return ltB_fail(ctx, "out of memory copying %zu bytes to the host", nbytes);
  if (ltD_backends[s->device]->to_host(ctx, s->device_index, h, s->data, nbytes)) {
    free(h);
    return -1;
  }
  *host = h;
  return 0;
}
