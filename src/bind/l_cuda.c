/*
** l_cuda.c -- lt._cuda(what), the C half of lt.cuda (lua/lantern/cuda.lua): loads the CUDA
** plugin on first call, as the first use of a "cuda" device does (src/cuda_plugin.c).
**   "count"        -> the number of CUDA devices (0 without one), and the reason when 0
**   "stats", i     -> the caching allocator's figures of device i (0-based) as a table
**   "empty_cache"  -> returns the cached blocks to the driver
**   "synchronize"  -> waits for the devices' pending work
*/
#include <string.h>

#include "../cuda/plugin.h"
#include "lbind.h"

static void set_field(lua_State *L, const char *k, size_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, k);
}

int ltL_cuda(lua_State *L) {
  static const char *const whats[] = {"count", "stats", "empty_cache", "synchronize", NULL};
  enum { COUNT, STATS, EMPTY_CACHE, SYNCHRONIZE };
  int what = luaL_checkoption(L, 1, NULL, whats);
  const ltK_backend *b = ltD_cuda_load();
  const ltD_cuda_plugin *p = ltD_cuda_plugin_of();
  switch (what) {
  case COUNT:
    lua_pushinteger(L, b ? b->device_count() : 0);
    if (b) return 1;
    lua_pushstring(L, ltD_cuda_why());
    return 2;
  case STATS: {
    ltD_cuda_stats s;
    int index = (int)luaL_optinteger(L, 2, 0);
    if (!p || p->stats(index, &s)) return 0;
    lua_createtable(L, 0, 6);
    set_field(L, "allocated_bytes", s.allocated);
    set_field(L, "reserved_bytes", s.reserved);
    set_field(L, "peak_allocated_bytes", s.peak_allocated);
    set_field(L, "num_cuda_malloc", s.n_cuda_malloc);
    set_field(L, "num_cache_hits", s.n_cache_hits);
    set_field(L, "num_alloc_retries", s.n_free_retries);
    return 1;
  }
  case EMPTY_CACHE:
    if (p) p->empty_cache();
    return 0;
  default: {
    lt_ctx *ctx = LTL_CTX(L);
    if (p && p->synchronize(ctx)) return ltL_raise(L, ctx);
    return 0;
  }
  }
}
