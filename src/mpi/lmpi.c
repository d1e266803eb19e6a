/*
** lmpi.c -- lantern.mpi: the Open MPI half of lt.distributed (lua/lantern/distributed.lua).
**
** Built only when mpicc is found (mk/mpi.mk) and linked against core.so, whose public API
** (include/lantern.h) is all it uses: the core, liblantern.a and C hosts never need MPI.
** The Lua half hands it contiguous CPU tensors and makes the output tensors; this file runs
** the collectives in place on their memory.
**
** Before every collective the ranks exchange a small signature (which collective, op, root,
** dtype, shape, and whether this rank's arguments passed their checks) in one allreduce of
** max(s) and max(-s). A mismatch is then an error on every rank, naming what differs, instead
** of a hang or a sum over unequal buffers. Argument checks therefore never raise before that
** exchange: a rank that raised alone would leave the others waiting in the collective.
**
** At exit (on_exit, which sees the status) MPI is finalized after a clean end and aborted
** after a failed one, so that a rank that raised takes the others down instead of leaving
** them blocked in a collective it never joins.
*/
#include <dlfcn.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lantern.h"

#define REQUEST_MT "lantern.mpi.Request"
#define ERRLEN 256

typedef enum coll_kind {
  K_BARRIER,
  K_ALL_REDUCE,
  K_BROADCAST,
  K_ALL_GATHER,
  K_REDUCE,
  K_SCATTER,
  K_GATHER,
  K_NKINDS
} coll_kind;
/* the names of lt.distributed's functions, for messages and for mpi.run's first argument */
static const char *const kind_names[] = {
    [K_BARRIER] = "barrier",       [K_ALL_REDUCE] = "all_reduce", [K_BROADCAST] = "broadcast",
    [K_ALL_GATHER] = "all_gather", [K_REDUCE] = "reduce",         [K_SCATTER] = "scatter",
    [K_GATHER] = "gather",         [K_NKINDS] = NULL};

typedef enum red_op { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AVG, OP_NOPS } red_op;
static const char *const op_names[] = {[OP_SUM] = "sum", [OP_PROD] = "prod", [OP_MIN] = "min",
                                       [OP_MAX] = "max", [OP_AVG] = "avg",   [OP_NOPS] = NULL};

/* the signature's fields; the sizes come last, one per possible dim */
enum {
  SIG_KIND,
  SIG_FAILED,   /* 1 + the rank whose argument checks failed, 0 when none did */
  SIG_OP,
  SIG_ROOT,
  SIG_DTYPE,
  SIG_NDIM,
  SIG_SIZE0,
  SIG_N = SIG_SIZE0 + LT_MAX_DIMS
};

static int g_rank = 0, g_size = 1;
static bool g_exit_hooked = false;

static bool mpi_live(void) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

static int raise_mpi(lua_State *L, const char *what, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
  return luaL_error(L, "%s: MPI failed: %s", what, msg);
}

/* ------------------------------------------------------------------ lifetime */

static void at_exit(int status, void *ud) {
  (void)ud;
  if (!mpi_live()) return;
  if (status != 0) MPI_Abort(MPI_COMM_WORLD, status);
  else MPI_Finalize();
}

/* Open MPI loads its components with dlopen, and they look for libmpi's symbols in the
** global scope; Lua loaded this module, and libmpi with it, RTLD_LOCAL. Reopening libmpi
** RTLD_GLOBAL (found through one of its own functions) makes its symbols visible. */
static void make_libmpi_global(void) {
  Dl_info info;
  if (dladdr((void *)(uintptr_t)MPI_Init, &info) && info.dli_fname)
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

static int l_init(lua_State *L) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (fin) return luaL_error(L, "init: MPI was finalized in this process (it cannot start again)");
  if (!mpi_live()) {
    make_libmpi_global();
    int provided = 0;
    /* only the Lua thread calls MPI; Lantern's worker threads never do */
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return raise_mpi(L, "init", rc);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (!g_exit_hooked && on_exit(at_exit, NULL) == 0) g_exit_hooked = true;
  }
  lua_pushinteger(L, g_rank);
  lua_pushinteger(L, g_size);
  return 2;
}

static int l_finalize(lua_State *L) {
  if (mpi_live()) {
    int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) return raise_mpi(L, "finalize", rc);
  }
  return 0;
}

static int l_is_initialized(lua_State *L) {
  lua_pushboolean(L, mpi_live());
  return 1;
}


/* ------------------------------------------------------------ arguments */

/* One collective call as parsed: the checks record a message in err instead of raising. */
typedef struct coll {
  coll_kind kind;
  red_op op;
  int root;
  lt_tensor *t;     /* the rank's own tensor (in place; the output of scatter) */
  lt_tensor *big;   /* world-size times t: all_gather's output, gather's at the root,
                       scatter's input at the root; NULL elsewhere */
  char err[ERRLEN];
} coll;

__attribute__((format(printf, 2, 3))) static void fail(coll *c, const char *fmt, ...) {
  if (c->err[0]) return;   /* the first problem is the one reported */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
}

static MPI_Datatype mpi_type(lt_dtype dt) {
  switch (dt) {
    case LT_FLOAT32: return MPI_FLOAT;
    case LT_FLOAT64: return MPI_DOUBLE;
    case LT_INT64: return MPI_INT64_T;
    case LT_BOOL: return MPI_UINT8_T;   /* one byte holding 0 or 1 */
    default: return MPI_DATATYPE_NULL;
  }
}

/* bool: sum and max are a logical or, prod and min a logical and (PyTorch's mapping) */
static MPI_Op mpi_op(red_op op, lt_dtype dt) {
  bool b = dt == LT_BOOL;
  switch (op) {
    case OP_SUM: return b ? MPI_MAX : MPI_SUM;
    case OP_AVG: return MPI_SUM;
    case OP_PROD: return b ? MPI_MIN : MPI_PROD;
    case OP_MIN: return MPI_MIN;
    case OP_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
  }
}

static lt_tensor *tensor_arg(lua_State *L, int idx, coll *c, const char *what) {
  lt_tensor *t = lantern_to_tensor(L, idx);
  if (!t) {
    fail(c, "%s: %s must be a Tensor", kind_names[c->kind], what);
    return NULL;
  }
  if (!lt_is_contiguous(t)) fail(c, "%s: %s must be contiguous", kind_names[c->kind], what);
  if (lt_numel(t) > INT_MAX)
    fail(c, "%s: %s has more than 2^31-1 elements (MPI counts are int; split it)",
         kind_names[c->kind], what);
  return t;
}

/* big must hold world-size blocks of t's dtype and element count */
static void check_big(coll *c) {
  if (!c->t || !c->big || c->err[0]) return;
  if (lt_type(c->big) != lt_type(c->t)) {
    fail(c, "%s: the list holds %s tensors, expected %s", kind_names[c->kind],
         lt_dtype_name(lt_type(c->big)), lt_dtype_name(lt_type(c->t)));
  } else if (lt_numel(c->big) != (int64_t)g_size * lt_numel(c->t)) {
    fail(c, "%s: the list holds %lld elements in all, expected %lld (one tensor per rank)",
         kind_names[c->kind], (long long)lt_numel(c->big),
         (long long)g_size * (long long)lt_numel(c->t));
  }
}

/* mpi.run(kind, t, big, op, root): fills c from the Lua arguments, recording problems. */
static void parse(lua_State *L, coll *c) {
  memset(c, 0, sizeof *c);
  c->kind = (coll_kind)luaL_checkoption(L, 1, NULL, kind_names);
  if (c->kind != K_BARRIER) c->t = tensor_arg(L, 2, c, "the tensor");
  bool has_root = c->kind == K_BROADCAST || c->kind == K_REDUCE || c->kind == K_SCATTER ||
                  c->kind == K_GATHER;
  bool has_op = c->kind == K_ALL_REDUCE || c->kind == K_REDUCE;
  bool root_big = c->kind == K_SCATTER || c->kind == K_GATHER;
  if (has_root) {
    int isnum = 0;
    lua_Integer r = lua_tointegerx(L, 5, &isnum);
    if (!isnum) fail(c, "%s: the rank (src/dst) must be an integer", kind_names[c->kind]);
    else if (r < 0 || r >= g_size)
      fail(c, "%s: rank %lld is not in the world (ranks are 0 to %d)", kind_names[c->kind],
           (long long)r, g_size - 1);
    c->root = isnum && r >= 0 && r < g_size ? (int)r : 0;
  }
  if (has_op) {
    const char *name = lua_isnoneornil(L, 4) ? "sum" : lua_tostring(L, 4);
    c->op = OP_NOPS;
    for (int i = 0; name && op_names[i]; i++)
      if (strcmp(name, op_names[i]) == 0) c->op = (red_op)i;
    if (c->op == OP_NOPS)
      fail(c, "%s: unknown op '%s' (expected sum, prod, min, max or avg)", kind_names[c->kind],
           name ? name : "?");
    else if (c->op == OP_AVG && c->t && !lt_dtype_is_float(lt_type(c->t)))
      fail(c, "%s: op 'avg' needs a floating-point tensor, got %s", kind_names[c->kind],
           lt_dtype_name(lt_type(c->t)));
  }
  if (c->kind == K_ALL_GATHER || (root_big && g_rank == c->root)) {
    /* a string is the Lua half's own finding about the list (it cannot be stacked) */
    if (lua_type(L, 3) == LUA_TSTRING) fail(c, "%s", lua_tostring(L, 3));
    else c->big = tensor_arg(L, 3, c, "the list");
    check_big(c);
  }
}

/* ----------------------------------------------------------- signatures */

static void shape_of(const lt_tensor *t, char *buf, size_t n) {
  if (t) lt_shape_str(t, buf, n);
  else snprintf(buf, n, "none");
}

__attribute__((format(printf, 2, 3))) static int raisef(lua_State *L, const char *fmt, ...) {
  char msg[2 * ERRLEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return luaL_error(L, "%s", msg);
}

/* Exchanges c's signature; on any difference, or a rank whose checks failed, raises the same
** kind of error on every rank. */
static void agree(lua_State *L, coll *c) {
  long long s[SIG_N] = {0}, buf[2 * SIG_N];
  s[SIG_KIND] = c->kind;
  s[SIG_FAILED] = c->err[0] ? g_rank + 1 : 0;
  s[SIG_OP] = c->op;
  s[SIG_ROOT] = c->root;
  if (c->t) {
    s[SIG_DTYPE] = lt_type(c->t);
    s[SIG_NDIM] = lt_ndim(c->t);
    for (int d = 0; d < lt_ndim(c->t) && d < LT_MAX_DIMS; d++) s[SIG_SIZE0 + d] = lt_size(c->t, d);
  }
  /* a rank whose tensor failed its checks compares as "failed" only, not by its shape */
  if (c->err[0]) s[SIG_DTYPE] = s[SIG_NDIM] = 0;
  for (int i = 0; i < SIG_N; i++) {
    buf[i] = s[i];
    buf[SIG_N + i] = -s[i];
  }
  const char *name = kind_names[c->kind];
  int rc = MPI_Allreduce(MPI_IN_PLACE, buf, 2 * SIG_N, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) raise_mpi(L, name, rc);
  long long hi[SIG_N], lo[SIG_N];
  for (int i = 0; i < SIG_N; i++) {
    hi[i] = buf[i];
    lo[i] = -buf[SIG_N + i];
  }
  if (hi[SIG_KIND] != lo[SIG_KIND])
    raisef(L, "%s: the ranks called different collectives (this rank %s; they range from %s to "
           "%s)", name, name, kind_names[lo[SIG_KIND]], kind_names[hi[SIG_KIND]]);
  if (c->err[0]) luaL_error(L, "%s", c->err);
  if (hi[SIG_FAILED])
    raisef(L, "%s: the arguments of rank %lld failed their checks (see its error)", name,
           hi[SIG_FAILED] - 1);
  if (hi[SIG_OP] != lo[SIG_OP])
    raisef(L, "%s: the ranks give different ops (this rank '%s'; they range from '%s' to '%s')",
           name, op_names[c->op], op_names[lo[SIG_OP]], op_names[hi[SIG_OP]]);
  if (hi[SIG_ROOT] != lo[SIG_ROOT])
    raisef(L, "%s: the ranks give different src/dst ranks (this rank %d; they range from %lld "
           "to %lld)", name, c->root, lo[SIG_ROOT], hi[SIG_ROOT]);
  if (hi[SIG_DTYPE] != lo[SIG_DTYPE])
    raisef(L, "%s: the tensors' dtypes differ across ranks (this rank %s; they range from %s "
           "to %s)", name, lt_dtype_name(lt_type(c->t)), lt_dtype_name((lt_dtype)lo[SIG_DTYPE]),
           lt_dtype_name((lt_dtype)hi[SIG_DTYPE]));
  for (int i = SIG_NDIM; i < SIG_N; i++) {
    if (hi[i] != lo[i]) {
      char sh[128];
      shape_of(c->t, sh, sizeof sh);
      raisef(L, "%s: the tensors' shapes differ across ranks (this rank %s; %s %lld to %lld)",
             name, sh, i == SIG_NDIM ? "dims range from" : "a size ranges from", lo[i], hi[i]);
    }
  }
}

/* ------------------------------------------------------------- requests */

/* A collective in flight: its tensors stay referenced (lt_retain) until it completes, so
** neither the collector nor lt.tidy can hand their memory back while MPI writes to it. */
typedef struct request {
  MPI_Request req;
  lt_tensor *t, *big;
  red_op op;
  bool receives;   /* whether this rank's t receives the result an avg divides */
  bool done;
} request;

/* avg: the sum divided by the world size, on the ranks that hold a result */
static void finish(request *r) {
  if (r->done) return;
  r->done = true;
  if (r->op == OP_AVG && r->receives) {
    int64_t n = lt_numel(r->t);
    if (lt_type(r->t) == LT_FLOAT32) {
      float *p = lt_data(r->t);
      for (int64_t i = 0; i < n; i++) p[i] /= (float)g_size;
    } else {
      double *p = lt_data(r->t);
      for (int64_t i = 0; i < n; i++) p[i] /= (double)g_size;
    }
  }
  lt_release(r->t);
  lt_release(r->big);
  r->t = r->big = NULL;
}

static request *check_request(lua_State *L) { return luaL_checkudata(L, 1, REQUEST_MT); }

static int l_req_wait(lua_State *L) {
  request *r = check_request(L);
  if (!r->done) {
    if (!mpi_live()) return luaL_error(L, "wait: MPI was finalized before the collective ended");
    int rc = MPI_Wait(&r->req, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      finish(r);
      return raise_mpi(L, "wait", rc);
    }
    finish(r);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int l_req_test(lua_State *L) {
  request *r = check_request(L);
  if (!r->done && mpi_live()) {
    int flag = 0;
    int rc = MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      finish(r);
      return raise_mpi(L, "is_completed", rc);
    }
    if (flag) finish(r);
  }
  lua_pushboolean(L, r->done);
  return 1;
}

/* A request dropped in flight is waited for: its memory must not go back while MPI writes. */
static int l_req_gc(lua_State *L) {
  request *r = check_request(L);
  if (!r->done && mpi_live()) MPI_Wait(&r->req, MPI_STATUS_IGNORE);
  finish(r);
  return 0;
}

/* --------------------------------------------------------------- collectives */

/* Starts c (non-blocking) into r; returns the MPI status. */
static int start(coll *c, request *r) {
  MPI_Datatype ty = c->t ? mpi_type(lt_type(c->t)) : MPI_DATATYPE_NULL;
  int n = c->t ? (int)lt_numel(c->t) : 0;
  void *d = c->t ? lt_data(c->t) : NULL;
  void *bd = c->big ? lt_data(c->big) : NULL;
  bool at_root = g_rank == c->root;
  r->op = c->op;
  r->receives = c->kind == K_ALL_REDUCE || (c->kind == K_REDUCE && at_root);
  switch (c->kind) {
    case K_BARRIER: return MPI_Ibarrier(MPI_COMM_WORLD, &r->req);
    case K_ALL_REDUCE:
      return MPI_Iallreduce(MPI_IN_PLACE, d, n, ty, mpi_op(c->op, lt_type(c->t)), MPI_COMM_WORLD,
                            &r->req);
    case K_BROADCAST: return MPI_Ibcast(d, n, ty, c->root, MPI_COMM_WORLD, &r->req);
    case K_ALL_GATHER: return MPI_Iallgather(d, n, ty, bd, n, ty, MPI_COMM_WORLD, &r->req);
    case K_REDUCE:
      return MPI_Ireduce(at_root ? MPI_IN_PLACE : d, at_root ? d : NULL, n, ty,
                         mpi_op(c->op, lt_type(c->t)), c->root, MPI_COMM_WORLD, &r->req);
    case K_SCATTER:
      return MPI_Iscatter(bd, n, ty, d, n, ty, c->root, MPI_COMM_WORLD, &r->req);
    case K_GATHER: return MPI_Igather(d, n, ty, bd, n, ty, c->root, MPI_COMM_WORLD, &r->req);
    default: return MPI_ERR_OTHER;
  }
}

/* mpi.run(kind, t, big, op, root, async): runs one collective; with async it returns a
** Request (wait, is_completed) instead of waiting for it. */
static int l_run(lua_State *L) {
  coll c;
  parse(L, &c);
  bool async = lua_toboolean(L, 6);
  if (!mpi_live())
    return luaL_error(L, "%s: MPI is not running (call init first)", kind_names[c.kind]);
  agree(L, &c);
  request *r = lua_newuserdatauv(L, sizeof *r, 0);
  memset(r, 0, sizeof *r);
  r->done = true;   /* nothing to wait for or release until the start succeeds */
  luaL_setmetatable(L, REQUEST_MT);
  int rc = start(&c, r);
  if (rc != MPI_SUCCESS) return raise_mpi(L, kind_names[c.kind], rc);
  r->done = false;
  r->t = c.t ? lt_retain(c.t) : NULL;
  r->big = c.big ? lt_retain(c.big) : NULL;
  if (async) return 1;
  lua_replace(L, 1);
  lua_settop(L, 1);
  l_req_wait(L);
  return 0;
}

static const luaL_Reg funcs[] = {
    {"init", l_init}, {"finalize", l_finalize}, {"is_initialized", l_is_initialized},
    {"run", l_run},   {NULL, NULL},
};

static const luaL_Reg req_methods[] = {
    {"wait", l_req_wait}, {"is_completed", l_req_test}, {NULL, NULL},
};

LT_API int luaopen_lantern_mpi(lua_State *L) {
  if (luaL_newmetatable(L, REQUEST_MT)) {
    luaL_newlib(L, req_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_req_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}
