/*
** two_states.c -- two lua_States, each in its own pthread, use Lantern at the same time.
**
** Each state is opened with lantern_open (everything from liblantern.a). The main thread first
** computes reference results in a third state; then two threads run the same work many times
** at once with different random seeds, grad modes and thread budgets, and every result must
** equal the reference bit for bit: random generators, grad mode and thread budget are per state,
** and the shared buffer cache is thread-safe. Prints "ok" and exits 0 on success.
**
** Usage: two_states [iterations]
*/
#define _POSIX_C_SOURCE 200809L
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lantern.h"

/* work(seed, grad, threads) -> a string of results printed with %.17g (exact to compare).
** Exercises the RNG, matmul (OpenBLAS), elementwise and reduction kernels, autograd and the
** grad-mode switch, and the buffer cache (tensors of several sizes are made and freed). */
static const char *const WORK =
    "local lt = require 'lantern'\n"
    "return function(seed, grad, threads)\n"
    "  lt.set_num_threads(threads)\n"
    "  lt.manual_seed(seed)\n"
    "  local out = {}\n"
    "  local a = lt.randn(48, 40)\n"
    "  local w = lt.randn(40, 24, {requires_grad = true})\n"
    "  lt.set_grad_enabled(grad)\n"
    "  local h = a:matmul(w):tanh()\n"
    "  local loss = (h * h):sum() + lt.rand(24):sum()\n"
    "  out[#out + 1] = loss:item()\n"
    "  out[#out + 1] = tostring(loss.requires_grad)\n"
    "  if grad then\n"
    "    loss:backward()\n"
    "    out[#out + 1] = w.grad:sum():item()\n"
    "    out[#out + 1] = w.grad:abs():max():item()\n"
    "  end\n"
    "  out[#out + 1] = tostring(lt.is_grad_enabled())\n"
    "  local big = lt.randn(300, 300)\n"
    "  out[#out + 1] = big:mean():item()\n"
    "  lt.set_grad_enabled(true)\n"
    "  for i = 1, #out do\n"
    "    if math.type(out[i]) == 'float' then out[i] = string.format('%.17g', out[i]) end\n"
    "  end\n"
    "  return table.concat(out, ' ')\n"
    "end\n";

typedef struct job {
  int seed, grad, threads, iterations;
  char reference[512];
  int mismatches;
  char first_bad[512];
  char error[512];
} job;

static lua_State *open_state(char *err) {
  lua_State *L = luaL_newstate();
  if (!L) {
    snprintf(err, 512, "luaL_newstate failed");
    return NULL;
  }
  luaL_openlibs(L);
  lantern_open(L);
  if (luaL_loadstring(L, WORK) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
    snprintf(err, 512, "%s", lua_tostring(L, -1));
    lua_close(L);
    return NULL;
  }
  return L; /* work function on top */
}

static int run_work(lua_State *L, const job *j, char *res, size_t n, char *err) {
  lua_pushvalue(L, -1);
  lua_pushinteger(L, j->seed);
  lua_pushboolean(L, j->grad);
  lua_pushinteger(L, j->threads);
  if (lua_pcall(L, 3, 1, 0) != LUA_OK) {
    snprintf(err, 512, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  snprintf(res, n, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return 0;
}

static void *worker(void *arg) {
  job *j = arg;
  lua_State *L = open_state(j->error);
  if (!L) return NULL;
  char res[512];
  for (int i = 0; i < j->iterations; i++) {
    if (run_work(L, j, res, sizeof res, j->error) != 0) break;
    if (strcmp(res, j->reference) != 0) {
      if (j->mismatches++ == 0) snprintf(j->first_bad, sizeof j->first_bad, "%s", res);
    }
    if (i % 7 == 0) lua_gc(L, LUA_GCCOLLECT); /* return blocks to the shared cache */
  }
  lua_close(L);
  return NULL;
}

int main(int argc, char **argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : 60;
  job jobs[2] = {
      {.seed = 1, .grad = 1, .threads = 1, .iterations = iterations},
      {.seed = 2, .grad = 0, .threads = 2, .iterations = iterations},
  };

  /* references, one state, one at a time */
  char err[512] = "";
  lua_State *L = open_state(err);
  if (!L) {
    fprintf(stderr, "two_states: %s\n", err);
    return 1;
  }
  for (int k = 0; k < 2; k++) {
    if (run_work(L, &jobs[k], jobs[k].reference, sizeof jobs[k].reference, err) != 0) {
      fprintf(stderr, "two_states: reference %d: %s\n", k, err);
      lua_close(L);
      return 1;
    }
    printf("reference %d: %s\n", k, jobs[k].reference);
  }
  lua_close(L);
  if (strcmp(jobs[0].reference, jobs[1].reference) == 0) {
    fprintf(stderr, "two_states: both references are equal; the check would prove nothing\n");
    return 1;
  }

  pthread_t th[2];
  for (int k = 0; k < 2; k++) {
    if (pthread_create(&th[k], NULL, worker, &jobs[k]) != 0) {
      fprintf(stderr, "two_states: pthread_create failed\n");
      return 1;
    }
  }
  for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);

  int status = 0;
  for (int k = 0; k < 2; k++) {
    if (jobs[k].error[0]) {
      fprintf(stderr, "two_states: thread %d: %s\n", k, jobs[k].error);
      status = 1;
    }
    if (jobs[k].mismatches) {
      fprintf(stderr, "two_states: thread %d: %d of %d results differ; first: %s\n", k,
              jobs[k].mismatches, iterations, jobs[k].first_bad);
      status = 1;
    }
  }
  if (status == 0) printf("ok: 2 threads x %d iterations\n", iterations);
  return status;
}
