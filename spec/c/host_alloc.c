/*
** host_alloc.c -- a C host with its own counting allocator loads Lantern, runs tensor work that
** churns through thousands of small userdata, and closes the state. Lantern puts a free-list
** front on the state's allocator (src/bind/lalloc.c); every block must still come from the
** host's allocator and be back with it after lua_close, including when the host wraps the
** allocator again after Lantern loaded ("wrapped" mode).
**
** Prints "ok <allocations> <pooled>" and exits 0 when every block came back; exits 1 otherwise.
** Usage: host_alloc [plain|wrapped]
*/
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lantern.h"

typedef struct {
  long live_blocks;     /* allocated and not yet freed */
  long long live_bytes;
  long allocations;
} counts;

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  counts *c = ud;
  if (nsize == 0) {
    if (ptr) {
      c->live_blocks--;
      c->live_bytes -= (long long)osize;
    }
    free(ptr);
    return NULL;
  }
  void *r = realloc(ptr, nsize);
  if (!r) return NULL;
  if (ptr) {
    c->live_bytes += (long long)nsize - (long long)osize;
  } else {
    c->live_blocks++;
    c->live_bytes += (long long)nsize;
    c->allocations++;
  }
  return r;
}

/* A second front the host adds after Lantern loaded: it only forwards. */
typedef struct {
  lua_Alloc f;
  void *ud;
} forward;

static void *forwarding_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  forward *w = ud;
  return w->f(w->ud, ptr, osize, nsize);
}

static const char *const WORK =
    "local lt = require 'lantern'\n"
    "local a, b = lt.randn(16), lt.randn(16)\n"
    "local s = lt.zeros(16)\n"
    "for i = 1, 20000 do s = s + (a * b) / 16 end\n"
    "local names = {}\n"
    "for i = 1, 2000 do names[i] = 'k' .. i end\n"
    "return s:sum():item()\n";

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "plain";
  counts c = {0, 0, 0};
  lua_State *L = lua_newstate(counting_alloc, &c);
  if (!L) return 1;
  luaL_openlibs(L);
  lantern_open(L);
  if (luaL_dostring(L, "require 'lantern'") != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    return 1;
  }
  void *ud;
  int pooled = lua_getallocf(L, &ud) != counting_alloc;
  forward w;
  if (strcmp(mode, "wrapped") == 0) {
    w.f = lua_getallocf(L, &w.ud);
    lua_setallocf(L, forwarding_alloc, &w);
  }
  if (luaL_dostring(L, WORK) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    return 1;
  }
  double sum = lua_tonumber(L, -1);
  lua_close(L);
  if (c.live_blocks != 0 || c.live_bytes != 0) {
    fprintf(stderr, "not returned: %ld blocks, %lld bytes (sum %g)\n", c.live_blocks,
            c.live_bytes, sum);
    return 1;
  }
  printf("ok %ld %d\n", c.allocations, pooled);
  return 0;
}
