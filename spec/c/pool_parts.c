/*
** pool_parts.c -- the worker pool runs every element of every job exactly once.
**
** Jobs alternate between 2 and 4 threads and change their size (so their chunk count) every
** time, so a worker that wakes late for one job meets the next being published, with more or
** fewer chunks. Each element counts its index; any count other than 1 (a chunk run twice, or
** skipped because the caller stopped waiting early) fails.
** Prints "ok" and exits 0 on success.
**
** Usage: pool_parts [iterations]
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../src/core.h"

#define MAXN 64
static _Atomic long hits[MAXN];

static void body(int64_t b, int64_t e, void *ud) {
  (void)ud;
  for (int64_t i = b; i < e; i++) atomic_fetch_add(&hits[i], 1);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  lt_ctx *ctx = lt_ctx_new();
  if (!ctx) return 2;
  for (int it = 0; it < iters; it++) {
    int nt = it & 1 ? 4 : 2;
    int n = 1 + (it * 7) % MAXN;
    lt_set_num_threads(ctx, nt);
    for (int i = 0; i < n; i++) hits[i] = 0;
    ltB_parallel_for(ctx, n, 1, body, NULL);
    for (int i = 0; i < n; i++) {
      if (hits[i] != 1) {
        printf("job %d (%d elements, %d threads): element %d ran %ld times\n", it, n, nt, i,
               (long)hits[i]);
        return 1;
      }
    }
  }
  lt_ctx_free(ctx);
  printf("ok: %d jobs\n", iters);
  return 0;
}
