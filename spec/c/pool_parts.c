/*
** pool_parts.c -- the worker pool runs every part of every job exactly once.
**
** Jobs alternate between 2 and 4 parts, so between two jobs a worker that takes no part in one
** wakes while the next is being published. Each part counts its index; any count other than 1
** (a part run twice, or skipped because the caller stopped waiting early) fails.
** Prints "ok" and exits 0 on success.
**
** Usage: pool_parts [iterations]
*/
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../src/core.h"

static _Atomic long hits[4];

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
    lt_set_num_threads(ctx, nt);
    for (int i = 0; i < nt; i++) hits[i] = 0;
    ltB_parallel_for(ctx, nt, 1, body, NULL);
    for (int i = 0; i < nt; i++) {
      if (hits[i] != 1) {
        printf("job %d: part %d ran %ld times\n", it, i, (long)hits[i]);
        return 1;
      }
    }
  }
  lt_ctx_free(ctx);
  printf("ok: %d jobs\n", iters);
  return 0;
}
