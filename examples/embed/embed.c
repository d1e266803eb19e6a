/*
** embed.c -- a C host (think: a game) that runs a trained Lantern model every tick.
**
** It opens Lantern in a lua_State it owns with one call (lantern_open: the core and the Lua half
** come from liblantern.a, no Lua files on disk), loads a PyTorch checkpoint into an nn module,
** and then, like a game's update loop, feeds a fresh observation every tick and reads the
** network's output. The observation lives in a host array wrapped once as a tensor
** (lt_from_blob, no copy); the output is read in place through lt_data. After a warm-up the
** loop allocates no fresh tensor memory (the buffer cache reuses blocks) and the Lua heap does
** not grow.
**
** Build (from the repository root, after `make`):
**   cc -std=c11 -O2 -Iinclude -I/usr/include/lua5.4 examples/embed/embed.c build/liblantern.a \
**      -llua5.4 -lopenblas -lz -lm -lpthread -o embed
**   ./embed examples/embed/model.pt 10000
** or with an installed Lantern: cc embed.c $(pkg-config --cflags --libs lantern) -o embed
**
** The checkpoint comes from examples/embed/make_model.py (PyTorch). Exit status 0 when the
** run kept to the memory budget, 1 otherwise.
*/
#define _POSIX_C_SOURCE 199309L
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lantern.h"

#define N_IN 8
#define N_OUT 4
#define WARMUP 1000

/* The model's definition, in Lua; the host only needs the checkpoint file. */
static const char *const SETUP =
    "local path = ...\n"
    "local lt = require 'lantern'\n"
    "local nn = lt.nn\n"
    "local model = nn.Sequential(\n"
    "  nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))\n"
    "lt.load_module(model, path)   -- strict: every key and shape must match\n"
    "model:eval()\n"
    "lt.set_grad_enabled(false)    -- inference only: no autograd graph is recorded\n"
    "lt.set_num_threads(1)         -- a tiny model on the game's thread: no thread hand-offs\n"
    "local out = lt.zeros(1, 4)    -- the result lives here across ticks\n"
    "-- each tick's tensors are freed when its scope ends, not by the collector, so a tick\n"
    "-- costs the same every frame and the cache hands the same buffers back next tick\n"
    "return function(x)\n"
    "  lt.tidy(function() out:copy_(model(x)) end)\n"
    "  return out\n"
    "end\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double lua_kb(lua_State *L) {
  lua_gc(L, LUA_GCCOLLECT);
  lua_gc(L, LUA_GCCOLLECT);
  return (double)lua_gc(L, LUA_GCCOUNT) + (double)lua_gc(L, LUA_GCCOUNTB) / 1024.0;
}

/* The game's observation at `tick`: any fresh data the host produces. */
static void observe(float *obs, long tick) {
  for (int j = 0; j < N_IN; j++)
    obs[j] = (float)(sin(0.001 * (double)tick + 0.7 * j) * (1.0 + 0.1 * j));
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "examples/embed/model.pt";
  long ticks = argc > 2 ? strtol(argv[2], NULL, 10) : 10000;
  if (ticks <= WARMUP) {
    fprintf(stderr, "embed: need more than %d ticks\n", WARMUP);
    return 2;
  }

  lua_State *L = luaL_newstate();
  if (!L) return 2;
  luaL_openlibs(L);
  lantern_open(L); /* require "lantern" now works from the library alone */
  /* The collector mode is the host's choice; Lantern paces either by tensor bytes. Each tick's
  ** tensors are released by lt.tidy when the tick ends, so the collector has little to do. */
  lua_gc(L, LUA_GCGEN, 0, 0);

  /* setup: build the module, load the checkpoint, get the step function */
  if (luaL_loadbufferx(L, SETUP, strlen(SETUP), "=setup", "t") != LUA_OK ||
      (lua_pushstring(L, path), lua_pcall(L, 1, 1, 0)) != LUA_OK) {
    fprintf(stderr, "embed: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  int step_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  /* the observation buffer belongs to the host; Lantern sees it as a [1, 8] float32 tensor */
  static float obs[N_IN];
  int64_t size[2] = {1, N_IN};
  lt_ctx *ctx = lt_ctx_new();
  lt_tensor *x = NULL;
  if (!ctx || lt_from_blob(ctx, &x, obs, LT_FLOAT32, 2, size, NULL, NULL, NULL) != 0) {
    fprintf(stderr, "embed: lt_from_blob: %s\n", ctx ? lt_errmsg(ctx) : "out of memory");
    lua_close(L);
    return 1;
  }
  lantern_push_tensor(L, x); /* the Lua value holds its own reference */
  lt_release(x);
  int x_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  float last[N_OUT] = {0};
  double sums[N_OUT] = {0};
  double kb_warm = 0, t0 = 0;
  lt_memstats warm, end;
  int status = 0;

  for (long tick = 0; tick < ticks; tick++) {
    if (tick == WARMUP) {
      kb_warm = lua_kb(L);
      lt_memory_stats(&warm);
      t0 = now();
    }
    observe(obs, tick); /* write straight into the tensor's memory */
    lua_rawgeti(L, LUA_REGISTRYINDEX, step_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, x_ref);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
      fprintf(stderr, "embed: tick %ld: %s\n", tick, lua_tostring(L, -1));
      status = 1;
      break;
    }
    lt_tensor *y = lantern_to_tensor(L, -1);
    if (!y || lt_type(y) != LT_FLOAT32 || lt_numel(y) != N_OUT || !lt_is_contiguous(y)) {
      fprintf(stderr, "embed: tick %ld: expected a contiguous float32 tensor of 4 values\n", tick);
      status = 1;
      break;
    }
    const float *out = lt_data(y); /* read in place: valid while y lives */
    for (int k = 0; k < N_OUT; k++) {
      last[k] = out[k];
      sums[k] += out[k];
    }
    lua_pop(L, 1);
  }
  double per_tick = (now() - t0) / (double)(ticks - WARMUP);
  double kb_end = lua_kb(L);
  lt_memory_stats(&end);

  if (status == 0) {
    unsigned long long fresh = (unsigned long long)(end.fresh_allocs - warm.fresh_allocs);
    printf("ticks: %ld\n", ticks);
    printf("last: %.9g %.9g %.9g %.9g\n", last[0], last[1], last[2], last[3]);
    printf("sums: %.12g %.12g %.12g %.12g\n", sums[0], sums[1], sums[2], sums[3]);
    printf("time per tick: %.2f us\n", per_tick * 1e6);
    printf("lua heap KB: %.1f after warm-up, %.1f at end\n", kb_warm, kb_end);
    printf("fresh allocations in steady state: %llu (reused blocks: %llu)\n", fresh,
           (unsigned long long)(end.reused - warm.reused));
    if (kb_end > kb_warm + 8.0) {
      fprintf(stderr, "embed: the Lua heap grew by %.1f KB\n", kb_end - kb_warm);
      status = 1;
    }
    if (fresh != 0) {
      fprintf(stderr, "embed: %llu fresh allocations after warm-up\n", fresh);
      status = 1;
    }
  }

  luaL_unref(L, LUA_REGISTRYINDEX, x_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, step_ref);
  lua_close(L); /* frees every tensor; obs stays the host's */
  lt_ctx_free(ctx);
  return status;
}
