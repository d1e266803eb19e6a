/*
** pool_runs.c -- each thread of a job starts at the front of its own run of chunks and takes
** what is left of the others' runs from their backs.
**
** Two threads, 8 chunks of one element: the caller owns 0-3, the worker 4-7. Each case holds
** one thread inside its first chunk until the other has taken everything it can, so the order
** in which the other takes chunks is fixed:
**   worker free: 4 5 6 7 (its run, from the front), then 3 2 1 (the caller's, from the back);
**   caller free: 0 1 2 3, then 7 6 5 (the worker holds 4).
** Every wait gives up after 10 s (a worker asleep is woken by the job long before).
** Prints "ok" and exits 0 on success.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../../src/core.h"

#define N 8
static pthread_t caller;
static int holder_is_caller;            /* which thread the case holds */
static _Atomic int taken;               /* chunks started so far */
static int seq_caller[N], seq_worker[N];
static _Atomic int ncaller, nworker;     /* chunks each has started */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* waits until *v reaches want; false after 10 s */
static int wait_for(_Atomic int *v, int want) {
  double end = now() + 10;
  while (atomic_load(v) < want)
    if (now() > end) return 0;
  return 1;
}

/* Each thread's first chunk waits for the other thread to hold one (so that neither can take
** the other's front); the held thread then waits in it until every chunk has been taken. */
static void body(int64_t b, int64_t e, void *ud) {
  int *timed_out = ud;
  for (int64_t i = b; i < e; i++) {
    int is_caller = pthread_equal(pthread_self(), caller);
    int k = is_caller ? atomic_fetch_add(&ncaller, 1) : atomic_fetch_add(&nworker, 1);
    (is_caller ? seq_caller : seq_worker)[k] = (int)i;
    atomic_fetch_add(&taken, 1);
    if (k != 0) continue;
    if (!wait_for(is_caller ? &nworker : &ncaller, 1)) *timed_out = 1;
    if (is_caller == holder_is_caller && !wait_for(&taken, N)) *timed_out = 1;
  }
}

static int check(const char *name, const int *seq, int n, const int *want, int wn) {
  int ok = n == wn;
  for (int i = 0; ok && i < n; i++) ok = seq[i] == want[i];
  if (!ok) {
    printf("%s: took", name);
    for (int i = 0; i < n; i++) printf(" %d", seq[i]);
    printf(", expected");
    for (int i = 0; i < wn; i++) printf(" %d", want[i]);
    printf("\n");
  }
  return ok;
}

static int run_case(lt_ctx *ctx, int hold_caller) {
  int timed_out = 0;
  holder_is_caller = hold_caller;
  atomic_store(&taken, 0);
  atomic_store(&ncaller, 0);
  atomic_store(&nworker, 0);
  memset(seq_caller, -1, sizeof seq_caller);
  memset(seq_worker, -1, sizeof seq_worker);
  ltB_parallel_for(ctx, N, 1, body, &timed_out);
  if (timed_out) {
    printf("%s held: the other thread did not take its chunks within 10 s\n",
           hold_caller ? "caller" : "worker");
    return 0;
  }
  if (hold_caller) {
    static const int c[] = {0}, w[] = {4, 5, 6, 7, 3, 2, 1};
    return check("caller", seq_caller, ncaller, c, 1) & check("worker", seq_worker, nworker, w, 7);
  }
  static const int c[] = {0, 1, 2, 3, 7, 6, 5}, w[] = {4};
  return check("caller", seq_caller, ncaller, c, 7) & check("worker", seq_worker, nworker, w, 1);
}

int main(void) {
  lt_ctx *ctx = lt_ctx_new();
  if (!ctx) return 2;
  lt_set_num_threads(ctx, 2);
  caller = pthread_self();
  int ok = 1;
  for (int r = 0; r < 3; r++) ok = ok && run_case(ctx, 1) && run_case(ctx, 0);
  lt_ctx_free(ctx);
  if (!ok) return 1;
  printf("ok\n");
  return 0;
}
