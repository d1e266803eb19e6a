/*
** lbind.h -- helpers shared by the Lua binding files (l_*.c).
**
** Every binding function gets the lt_ctx of its lua_State as upvalue 1 (LTL_CTX(L)). Arguments
** are checked with the ltL_check* helpers; a failed core call raises through ltL_raise, the one
** error path. Dims and indices arrive 1-based from Lua and are converted here (ltL_checkdim).
*/
#ifndef LT_LBIND_H
#define LT_LBIND_H

#include <lauxlib.h>
#include <lua.h>

#include "../backend.h"

#define LTL_TENSOR_MT "lantern.Tensor"
#define LTL_GEN_MT "lantern.Generator"
#define LTL_CTX(L) ((lt_ctx *)lua_touserdata((L), lua_upvalueindex(1)))

/* The Tensor userdata: a tag, then the tensor. The tag (the address of ltL_tensor_tag) lets
** ltL_test recognise a tensor with two API calls instead of a metatable comparison; no other
** userdata can hold that address unless it copies it from here. t is NULL once collected or
** released (lmem.c); scope is the serial of the release scope that owns it, 0 for none.
** 24 bytes, so that the userdata is 56 and takes one 64-byte malloc chunk: at 32 (an 80-byte
** chunk) a loop of 16-element adds ran up to 8% slower (alternated runs, which vary by a few
** percent with the build's code layout alone). */
typedef struct ltL_box {
  const void *tag;
  lt_tensor *t;
  uint32_t scope;
  uint32_t born;             /* the state's clock in KiB when the handle was made, modulo 2^32
                             ** (lmem.c's pacing; LTL_BORN) */
} ltL_box;
/* The clock as a box records it. A life is the difference modulo 2^32 KiB, read as unknown
** from 2^31 KiB (2 TiB of tensor allocation) on. */
#define LTL_BORN(clock) ((uint32_t)((clock) >> 10))
extern const char ltL_tensor_tag;
/* The box at idx when it is a Tensor userdata (released or not), else NULL. The size is read
** first: a light userdata or a smaller full userdata has no tag to read. */
static inline ltL_box *ltL_testbox(lua_State *L, int idx) {
  ltL_box *box = lua_touserdata(L, idx);
  if (!box || lua_rawlen(L, idx) != sizeof *box || box->tag != &ltL_tensor_tag) return NULL;
  return box;
}

/* Per-state binding data, kept right after the lt_ctx in the same userdata. The Tensor
** metatable is found by registry integer key, because the name lookup of luaL_setmetatable
** hashes a string on every call, which costs more than a small op itself. */
#define LTL_MAX_SCOPES 64
#define LTL_SLICE_MIN ((size_t)256 * 1024)
#define LTL_SLICE_MAX ((size_t)64 << 20)
#define LTL_DEAD_MAX 64
typedef struct ltL_scope {
  uint32_t serial;           /* never 0, never that of another open scope */
  int list_ref;              /* registry key of the table of boxes made inside it */
  int n;                     /* entries in that table */
} ltL_scope;
typedef struct ltL_state {
  size_t pending;            /* bytes not yet reported to the collector */
  size_t slice;              /* pending bytes that make a slice (lmem.c sets it) */
  size_t gc_limit;           /* cache bytes in use beyond which a full collection runs */
  size_t gc_room;            /* the garbage that limit allows (lmem.c paces steps by it) */
  bool deferring;            /* a slice's step is running: __gc defers its releases to dead */
  uint64_t clock;            /* tensor bytes reported so far */
  uint64_t last_clock;       /* the clock at the last slice */
  uint64_t cycle_clock;      /* the clock when the last incremental cycle ended */
  uint64_t span;             /* the longest life (reported bytes) seen of a collected tensor,
                             ** decaying (lmem.c sizes slices by it) */
  int ndead;
  lt_tensor *dead[LTL_DEAD_MAX];
  uint64_t full_gcs;         /* full collections Lantern started (memory_stats reports them) */
  int tensor_mt_ref;         /* registry integer key of the Tensor metatable */
  struct ltL_pool *pool;     /* the allocator front (lalloc.c), or NULL */
  int nscopes;               /* open release scopes, innermost last */
  uint32_t scope_serial;     /* the last serial given out (wraps) */
  ltL_scope scopes[LTL_MAX_SCOPES];
  int size_mt_ref;           /* registry integer key of the metatable of x:size() lists */
} ltL_state;

/* The binding's state of a ctx: it lies right after the ctx in the same userdata. */
static inline ltL_state *ltL_state_in(lt_ctx *ctx) { return ctx ? (ltL_state *)(ctx + 1) : NULL; }

/* The state of L, found through the registry (valid from any C function). */
ltL_state *ltL_state_of(lua_State *L);

/* lmem.c: what a 256 KiB slice of reported tensor bytes does to the collector; the bookkeeping
** of release scopes; the error for a released tensor. */
void ltL_gc_slice(lua_State *L, ltL_state *st, size_t kb);
void ltL_gc_rebase(lua_State *L, ltL_state *st);
void ltL_scope_track(lua_State *L, ltL_state *st, ltL_box *box);   /* box on the stack top */
int ltL_released_error(lua_State *L, int idx);
void ltL_open_mem(lua_State *L);          /* lmem.c: tidy's primitives, free, memory stats */

/* Raises the ctx's last error as a Lua error (never returns). A message of lt_empty ("empty:
** ...", from the allocation inside another op) is renamed to the running function's name. */
int ltL_raise(lua_State *L, lt_ctx *ctx);
/* The name of the running binding function, for messages: the name it was registered under
** (ltL_register keeps it as upvalue 2), else the name it was called by, else "?". */
const char *ltL_opname(lua_State *L);
/* Raises unless every key of the options table at idx is one of `known` (NULL-terminated):
** "<op>: unknown option 'dtyp' (did you mean 'dtype'?)", with the nearest-name rule of
** lua/lantern/options.lua. Nothing to check when idx is 0 or holds no plain table. */
void ltL_checkopts(lua_State *L, int idx, const char *op, const char *const *known);
/* Raises unless every argument after the first n is nil, so that an option PyTorch has and this
** binding lacks (`out=`, say) is an error rather than silently dropped: "exp: unknown option
** 'out' (exp takes no options)", or "mul: unexpected argument #3 (number): mul takes 2". */
void ltL_nomore(lua_State *L, int n);
#define LTL_NOMORE(L, n) do { if (lua_gettop(L) > (n)) ltL_nomore((L), (n)); } while (0)
/* `if (rc) ltL_raise(...)` in one line. */
#define LTL_TRY(L, ctx, call) do { if ((call) != 0) ltL_raise((L), (ctx)); } while (0)
/* The tail of an in-place method: runs the core call and returns argument 1 (the tensor). */
#define LTL_RETURN_SELF(L, ctx, call) \
  do {                                \
    LTL_TRY((L), (ctx), (call));      \
    lua_settop((L), 1);               \
    return 1;                         \
  } while (0)

/* Pushes a userdata that takes over the reference `t` (caller's reference is consumed). */
void ltL_push(lua_State *L, lt_tensor *t);
/* The same for a function that has its ctx (LTL_CTX) in hand already: one API call fewer. */
void ltL_push_ctx(lua_State *L, lt_ctx *ctx, lt_tensor *t);

/* lalloc.c: a free-list front for the state's allocator, installed when Lantern loads and
** removed (its blocks returned) when Lantern's context is collected. Install returns NULL, and
** changes nothing, when it cannot allocate. */
typedef struct ltL_pool ltL_pool;
ltL_pool *ltL_pool_install(lua_State *L);
void ltL_pool_remove(lua_State *L, ltL_pool *p);
/* Tensor at idx or a Lua error naming the op and argument. */
lt_tensor *ltL_check(lua_State *L, int idx);
/* Tensor at idx or NULL when it is not a tensor. */
lt_tensor *ltL_test(lua_State *L, int idx);
/* Tensor at idx, or a 0-dim tensor made from a number/boolean (new ref in *owned, else NULL).
** `like` picks the dtype for numbers: float numbers take like's float dtype (or float32),
** integers take like's dtype if it is float, else int64. */
lt_tensor *ltL_checkoperand(lua_State *L, int idx, const lt_tensor *like, lt_tensor **owned);

/* 1-based Lua dim (negatives count from the end) to a 0-based dim for a rank-ndim tensor. */
int ltL_checkdim(lua_State *L, int idx, int ndim);
int ltL_optdim(lua_State *L, int idx, int ndim, int def0);   /* def0 is 0-based */
/* Sizes given as integers from idx on, or as one table at idx. Returns the number of dims and
** fills size; *next is the stack index after the sizes (where an options table may be). Its
** errors (and those of the helpers below) name the running function (ltL_opname). */
int ltL_checksizes(lua_State *L, int idx, int64_t *size, int *next);
/* dtype name at idx (string) or def when absent/nil. */
lt_dtype ltL_optdtype(lua_State *L, int idx, lt_dtype def);
/* Reads field `name` of the options table at idx (if idx is a table): type checks included. */
bool ltL_optbool_field(lua_State *L, int idx, const char *name, bool def);
double ltL_optnum_field(lua_State *L, int idx, const char *name, double def);
lt_dtype ltL_optdtype_field(lua_State *L, int idx, lt_dtype def);
/* Generator from options field `generator` (NULL = default). */
lt_generator *ltL_optgen_field(lua_State *L, int idx);
lt_generator *ltL_checkgen(lua_State *L, int idx);
/* Applies {requires_grad=true} of an options table to t. */
void ltL_apply_requires_grad(lua_State *L, int opts, lt_tensor *t);

/* Tells the Lua collector about `nbytes` of tensor memory made outside its heap, so that it
** collects dead tensors at a pace that matches their real size. */
void ltL_gc_account(lua_State *L, size_t nbytes);

/* Registration: every function gets the ctx as upvalue 1 and its name as upvalue 2 (what
** ltL_opname reads, so error messages name the function the user called). `methods` are also
** installed on the Tensor method table. Stack: [..., module table, methods table] on entry and
** exit. */
typedef struct ltL_Reg {
  const char *name;
  lua_CFunction fn;
  int where;   /* LTL_FN: lt.name; LTL_METHOD: t:name(); both by OR */
} ltL_Reg;
#define LTL_FN 1
#define LTL_METHOD 2
void ltL_register(lua_State *L, const ltL_Reg *regs);

/* Per-family registration (one per l_*.c file), called by luaopen_lantern_core with
** [module, methods] on top of the stack. */
void ltL_open_tensor(lua_State *L);       /* l_tensor.c: metatable, basics, properties */
void ltL_open_creation(lua_State *L);     /* l_creation.c: tensor{}, zeros, arange, eye, ... */
void ltL_open_random(lua_State *L);       /* l_random.c: rand..., randint, bernoulli, Generator */
void ltL_open_elementwise(lua_State *L);  /* l_elementwise.c: arithmetic, comparisons, ops */
void ltL_open_shape(lua_State *L);        /* l_shape.c: views, cat, stack, indexing ops */
void ltL_open_reduce(lua_State *L);       /* l_reduce.c: reductions, softmax */
void ltL_open_linalg(lua_State *L);       /* l_linalg.c: matmul family */
void ltL_open_autograd(lua_State *L);     /* l_autograd.c: backward, grad mode, hooks, Function */
void ltL_open_nn(lua_State *L);           /* l_nn.c: conv, pool, norm, losses kernels */
void ltL_open_serial(lua_State *L);       /* l_serial.c: pt/safetensors readers and writers */
void ltL_open_optim(lua_State *L);        /* l_optim.c: fused optimiser steps */
void ltL_open_data(lua_State *L);         /* l_data.c: dataset file readers */
void ltL_open_device(lua_State *L);       /* l_device.c: lt.device, t:cpu(), kernel tables */

/* Device name at idx into (type, index), raising for a name that is no device (naming op). */
void ltL_checkdevice(lua_State *L, int idx, const char *op, lt_devtype *type, int *index);
/* Pushes the tensor at idx moved to the device (itself when it is there); raises naming op
** when the device is not available. */
int ltL_move(lua_State *L, int idx, const char *op, lt_devtype type, int index);
/* t's values on the host: t itself (a new reference) on the cpu, else a copy; raises. */
lt_tensor *ltL_host(lua_State *L, lt_tensor *t);

#endif
