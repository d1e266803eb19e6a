/*
** mem_host.c -- a C host that runs a Lua script in its own lua_State with Lantern opened from
** liblantern.a, with the collector in the mode the host picks. spec/memory_spec.lua runs the
** memory loops through it, so the pacing is checked in a host's state as well as in lua5.4's.
**
** Usage: mem_host <gen|inc> script.lua [args...]   (the script sees them in `arg`, as in lua)
*/
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "lantern.h"

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "gen") && strcmp(argv[1], "inc"))) {
    fprintf(stderr, "usage: mem_host <gen|inc> script.lua [args...]\n");
    return 2;
  }
  lua_State *L = luaL_newstate();
  if (!L) return 1;
  luaL_openlibs(L);
  lantern_open(L);
  if (strcmp(argv[1], "gen") == 0) lua_gc(L, LUA_GCGEN, 0, 0);
  else lua_gc(L, LUA_GCINC, 0, 0, 0);
  lua_createtable(L, argc - 3, 1);
  for (int i = 2; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 2);
  }
  lua_setglobal(L, "arg");
  int rc = luaL_dofile(L, argv[2]);
  if (rc != LUA_OK) fprintf(stderr, "mem_host: %s\n", lua_tostring(L, -1));
  /* switching returns the mode in force: Lantern must not have changed the host's choice */
  int mode = lua_gc(L, LUA_GCGEN, 0, 0);
  printf("host_mode_kept=%s\n", mode == (strcmp(argv[1], "gen") == 0 ? LUA_GCGEN : LUA_GCINC)
                                     ? "true" : "false");
  lua_close(L);
  return rc == LUA_OK ? 0 : 1;
}
