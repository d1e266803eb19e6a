/*
** lantern.h -- public C API of Lantern, a tensor and autograd engine for Lua 5.4.
**
** How to use it
** -------------
** A C host either uses the core directly (lt_* functions below and the ops and checkpoint
** functions of lantern_ops.h, no Lua involved) or opens the Lua binding inside a lua_State it owns:
**
**     lua_State *L = luaL_newstate();
**     luaL_openlibs(L);
**     lantern_open(L);                 -- registers the core and preloads the Lua half
**     luaL_dostring(L, "lt = require 'lantern'");
**
** Memory model
** ------------
** A tensor (lt_tensor) is a view -- dtype, sizes, strides (in elements) and an offset -- on a
** reference-counted storage (lt_storage). Views share storage. Every function that returns a
** tensor through an `lt_tensor **out` argument hands the caller one new reference, which the
** caller drops with lt_release(). Functions never steal references from their arguments.
**
** Errors
** ------
** Every core entry point returns 0 on success or -1 on failure; on failure the message is in
** lt_errmsg(ctx) and the inputs are unchanged. Nothing aborts on bad input.
**
** Contexts
** --------
** An lt_ctx holds all per-user mutable state: grad mode, the default random generator, the
** thread budget and the last error message. Use one context per thread (per lua_State).
** The buffer cache behind storages is process-wide and thread-safe.
**
** Positions are 0-based here; the Lua binding converts from Lua's 1-based positions.
** Enum values reach file formats and never renumber.
*/
#ifndef LANTERN_H
#define LANTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LT_API extern __attribute__((visibility("default")))
#define LT_VERSION "0.1.0"
#define LT_MAX_DIMS 16

/* ===================================================================== types */

typedef enum lt_dtype {
  LT_FLOAT32 = 0,
  LT_FLOAT64 = 1,
  LT_INT64 = 2,
  LT_BOOL = 3,
  LT_NDTYPE
} lt_dtype;

/* Kinds of device. A device is a kind and an index ("cuda:1"); the cpu is always "cpu" (index 0).
** Only the cpu's kernels are built in; another kind computes once its plugin registered its
** kernel table. */
typedef enum lt_devtype { LT_CPU = 0, LT_CUDA = 1, LT_NDEVTYPE } lt_devtype;

typedef struct lt_ctx lt_ctx;
typedef struct lt_storage lt_storage;
typedef struct lt_tensor lt_tensor;
typedef struct lt_node lt_node;
typedef struct lt_generator lt_generator;

/* ================================================================== context */

/* New context: grad mode on, default generator seeded with 0, threads = online cores. */
LT_API lt_ctx *lt_ctx_new(void);
/* Frees a context. Tensors made under it stay valid. */
LT_API void lt_ctx_free(lt_ctx *ctx);
/* Message of the last failed call on this context. */
LT_API const char *lt_errmsg(const lt_ctx *ctx);
/* Grad mode: when off, ops record no graph. Returns the previous mode. */
LT_API bool lt_set_grad_enabled(lt_ctx *ctx, bool on);
LT_API bool lt_is_grad_enabled(const lt_ctx *ctx);
/* Threads for Lantern's parallel loops, matrix products included (n >= 1); OpenBLAS itself
** runs on one thread. */
LT_API void lt_set_num_threads(lt_ctx *ctx, int n);
LT_API int lt_get_num_threads(const lt_ctx *ctx);

/* ================================================================== dtypes */

LT_API const char *lt_dtype_name(lt_dtype dt);    /* "float32", ... */
LT_API size_t lt_dtype_size(lt_dtype dt);         /* bytes per element */
LT_API bool lt_dtype_is_float(lt_dtype dt);
/* PyTorch's promotion of two tensor dtypes (bool < int64 < float32 < float64). */
LT_API lt_dtype lt_promote(lt_dtype a, lt_dtype b);
/* Parses a dtype name ("float32", "float", "double", "int64", "long", "bool"); -1 if unknown. */
LT_API int lt_dtype_parse(const char *name);

/* ======================================================= tensor basics */

/* Takes one more reference / drops one (NULL is ignored). */
LT_API lt_tensor *lt_retain(lt_tensor *t);
LT_API void lt_release(lt_tensor *t);

/* New contiguous tensor with uninitialised memory from the buffer cache. */
LT_API int lt_empty(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim, const int64_t *size);
/* Wraps host memory without copying. `deleter(data, ud)` runs when the last view dies
** (NULL: the host keeps ownership and must outlive every view). */
LT_API int lt_from_blob(lt_ctx *ctx, lt_tensor **out, void *data, lt_dtype dt, int ndim,
                        const int64_t *size, const int64_t *stride,
                        void (*deleter)(void *data, void *ud), void *ud);

LT_API int lt_ndim(const lt_tensor *t);
LT_API int64_t lt_size(const lt_tensor *t, int dim);     /* dim in [0, ndim) */
LT_API int64_t lt_stride(const lt_tensor *t, int dim);
LT_API const int64_t *lt_sizes(const lt_tensor *t);
LT_API const int64_t *lt_strides(const lt_tensor *t);
LT_API int64_t lt_numel(const lt_tensor *t);
LT_API lt_dtype lt_type(const lt_tensor *t);
LT_API lt_devtype lt_device(const lt_tensor *t);
/* Which device of its kind t is on (0 for the cpu). */
LT_API int lt_device_index(const lt_tensor *t);
/* Writes t's device as PyTorch names it ("cpu", "cuda:0") into buf; returns buf. */
LT_API char *lt_device_str(const lt_tensor *t, char *buf, size_t n);
/* Parses "cpu", "cuda", "cuda:1": -1 with the message (naming `op`) for a name that is no
** device; the device need not be available. */
LT_API int lt_device_parse(lt_ctx *ctx, const char *op, const char *name, lt_devtype *type,
                           int *index);
/* 0 when tensors can be made on the device, else -1 with a message saying what is missing. */
LT_API int lt_device_check(lt_ctx *ctx, const char *op, lt_devtype type, int index);
/* New contiguous tensor with uninitialised memory on a device. */
LT_API int lt_empty_on(lt_ctx *ctx, lt_tensor **out, lt_dtype dt, int ndim, const int64_t *size,
                       lt_devtype type, int index);
/* t's values on another device (through the host between two devices that are not the cpu);
** t itself (a new reference) when it is there already. Differentiable. */
LT_API int lt_to_device(lt_ctx *ctx, lt_tensor **out, lt_tensor *t, lt_devtype type, int index);
LT_API bool lt_is_contiguous(const lt_tensor *t);
/* Pointer to element [0,...,0] (storage data + offset). Valid while t lives; for a tensor that
** is not on the cpu it is a device address, not to be read by the host. */
LT_API void *lt_data(const lt_tensor *t);
/* Writes "[2, 3]" into buf (always terminated); returns buf. */
LT_API char *lt_shape_str(const lt_tensor *t, char *buf, size_t n);

/* ===================================================== buffer cache */

typedef struct lt_memstats {
  size_t in_use;        /* bytes held by live storages */
  size_t cached;        /* bytes kept in the free lists */
  size_t peak_in_use;
  uint64_t fresh_allocs;  /* calls that went to the system allocator */
  uint64_t reused;        /* calls served from the cache */
} lt_memstats;

LT_API void lt_memory_stats(lt_memstats *st);
/* Returns every cached block to the system. */
LT_API void lt_empty_cache(void);
/* Sets peak_in_use to the bytes in use now. */
LT_API void lt_reset_peak_memory(void);
/* Cache settings, process-wide. *release_after_s: seconds after which blocks that went unused
** return to the system (they go within one to two such intervals; 0 keeps them until
** lt_empty_cache; default 2). *cap_bytes: the most the cache holds (default 4 GiB; lowering it
** frees the excess now). A negative time or a cap of SIZE_MAX leaves that setting; both
** pointers (either may be NULL) receive the previous values. */
LT_API void lt_cache_options(double *release_after_s, size_t *cap_bytes);

/* ======================================================== autograd */

LT_API bool lt_requires_grad(const lt_tensor *t);
/* Sets requires_grad on a leaf (error on a non-leaf turning it off, or an integer dtype). */
LT_API int lt_set_requires_grad(lt_ctx *ctx, lt_tensor *t, bool on);
LT_API bool lt_is_leaf(const lt_tensor *t);
/* Borrowed pointer to the accumulated gradient, or NULL. */
LT_API lt_tensor *lt_grad(const lt_tensor *t);
/* Replaces the gradient (g may be NULL); takes its own reference to g. */
LT_API int lt_set_grad(lt_ctx *ctx, lt_tensor *t, lt_tensor *g);
/* Name of the node that made t ("MulBackward0"), or NULL for a leaf. */
LT_API const char *lt_grad_fn_name(const lt_tensor *t);

/* Runs the backward pass from roots (each with its seed gradient; a NULL seed means ones for
** a one-element root). With n_inputs == 0 gradients accumulate into leaves' .grad; otherwise
** they are returned in results[i] (new refs, NULL when unused and allow_unused) and no .grad
** is touched. */
LT_API int lt_backward(lt_ctx *ctx, int n_roots, lt_tensor *const *roots,
                       lt_tensor *const *seeds, bool retain_graph, int n_inputs,
                       lt_tensor *const *inputs, lt_tensor **results, bool allow_unused);

/* ================================================== embedding in Lua */

struct lua_State;
/* Registers the core as package.preload["lantern.core"] and preloads every Lua module of
** Lantern compiled into the library, so `require "lantern"` needs no files on disk. */
LT_API void lantern_open(struct lua_State *L);
/* The Lua C module entry point (require "lantern.core"). */
LT_API int luaopen_lantern_core(struct lua_State *L);
/* Pushes a Lua tensor userdata holding a new reference to t (t stays the caller's). */
LT_API void lantern_push_tensor(struct lua_State *L, lt_tensor *t);
/* Borrowed tensor at stack index idx, or NULL if it is not a Lantern tensor or was released
** (lt.tidy, free). Never raises. */
LT_API lt_tensor *lantern_to_tensor(struct lua_State *L, int idx);

#ifdef __cplusplus
}
#endif
#endif
