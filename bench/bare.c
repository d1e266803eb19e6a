/*
** bare.c -- a bare OpenBLAS sgemm as a Lua module, the ceiling `make bench` holds Lantern's
** matmul against. It runs in the benchmark's own process, between Lantern's rounds, so that both
** see the same library and machine state; it uses OpenBLAS's own threads (Lantern keeps
** OpenBLAS on one thread and cuts large products into blocks over its pool).
*/
#include <cblas.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <time.h>

/* OpenBLAS-internal: stops its pool, whose workers would otherwise poll for ~0.1 s after the
** last call and slow whatever runs next (the PyTorch round). Weak: left alone where missing. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* sgemm(n, min_time, threads) -> seconds of the fastest n x n x n call made within min_time,
** on OpenBLAS's own `threads` threads */
static int l_sgemm(lua_State *L) {
  int n = (int)luaL_checkinteger(L, 1);
  double min_time = luaL_optnumber(L, 2, 0.3);
  int threads = (int)luaL_optinteger(L, 3, 1);
  luaL_argcheck(L, n > 0 && n <= 8192, 1, "size out of range");
  luaL_argcheck(L, threads >= 1 && threads <= 1024, 3, "thread count out of range");
  size_t nn = (size_t)n * (size_t)n;
  float *a = malloc(sizeof(float) * nn), *b = malloc(sizeof(float) * nn),
        *c = malloc(sizeof(float) * nn);
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    return luaL_error(L, "sgemm: out of memory");
  }
  for (size_t i = 0; i < nn; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
  int saved = openblas_get_num_threads();
  openblas_set_num_threads(threads);
  for (int w = 0; w < 3; w++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
  double best = 1e30, start = now();
  int reps = 0;
  do {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double t = now() - t0;
    if (t < best) best = t;
    reps++;
  } while (now() - start < min_time || reps < 3);
  openblas_set_num_threads(saved);
  if (threads > 1 && blas_thread_shutdown_) blas_thread_shutdown_();
  free(a);
  free(b);
  free(c);
  lua_pushnumber(L, best);
  return 1;
}

int luaopen_bench_bare(lua_State *L) {
  luaL_Reg fns[] = {{"sgemm", l_sgemm}, {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
