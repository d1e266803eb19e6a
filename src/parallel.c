/*
** parallel.c -- the worker pool behind ltB_parallel_for.
**
** A job is cut into chunks (a few per thread). Each thread owns a run of them, the same part of
** every job of that size, and takes the chunks of the others' runs once its own is done: the
** caller starts at once, and a worker that wakes late (a sleeping worker takes tens of
** microseconds to wake on a VM) finds less left rather than holding the caller up for a whole
** share. Which thread runs a chunk never matters to the result: kernels write each element from
** one chunk, and their results do not depend on where chunks end.
**
** Workers poll for SPIN_NS after the last job they took part in ends and then sleep on a
** condition variable (spin_for_job), so an idle worker never takes a core from the caller's
** serial work. (OpenMP's default spin-wait did exactly that here: a 2-thread training step took
** twice as long.)
** One caller uses the pool at a time; a second caller that finds it busy (another lua_State in
** another thread) runs its loop inline instead of waiting.
*/
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "core.h"

#define MAX_WORKERS 63
/* How long a worker polls for the next job (and the caller for the workers' parts) before it
** sleeps: long enough to catch the next op of a step, short enough that an idle Lantern costs no
** CPU. Bounded by the clock rather than a count of pauses, as one pause takes ~10 cycles on some
** cores and ~140 on others. */
#define SPIN_NS 30000
/* Chunks per thread taking part: enough that a late worker costs the caller little, few enough
** that a chunk is still a good run of work. */
#define CHUNKS_PER_THREAD 4

static pthread_mutex_t owner = PTHREAD_MUTEX_INITIALIZER;   /* held by the pool's user */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done = PTHREAD_COND_INITIALIZER;
static int nworkers;                 /* started so far (grows, never shrinks) */
/* bumped once per job, with the number of workers called in the low 8 bits */
static _Atomic uint64_t generation;
#define GEN_WORKERS(g) ((int)((g) & 0xff))
/* Thread t of a job of nt threads (the caller is 0) owns the run [t k / nt, (t+1) k / nt) of
** its k chunks. A run is one word, (job number, front, back), changed only by a successful
** compare-and-swap; a thread gives up on a word that holds another job's number, so a worker
** that finishes one job late cannot start on the next as though it owned the next one's runs. */
#define CH_BITS 16
#define CH_MASK ((UINT64_C(1) << CH_BITS) - 1)
#define RUN_ID(g) ((g) >> 8 & UINT32_MAX)   /* a job's number, from its generation */
#define RUN_WORD(id, f, b) ((uint64_t)(id) << (2 * CH_BITS) | (uint64_t)(f) << CH_BITS | (uint64_t)(b))
_Static_assert((MAX_WORKERS + 1) * CHUNKS_PER_THREAD <= CH_MASK, "a run's ends fit CH_BITS");
static struct {
  _Alignas(64) _Atomic uint64_t w;   /* a cache line each: threads swap on their own */
} runs[MAX_WORKERS + 1];
static _Atomic int64_t remaining;    /* chunks of the current job not finished */
static struct {
  ltK_range_fn fn;
  void *ud;
  int64_t n, k;                      /* elements, chunks */
} job;

/* Takes the next chunk of run t of job id, from the front (its owner) or the back (any other
** thread: owner and thief then contend only for a run's last chunk, and the owner keeps the
** front, whose data it has just had in cache); -1 when there is none. */
static int64_t take(int t, bool back, uint64_t id) {
  uint64_t w = atomic_load(&runs[t].w);
  for (;;) {
    int64_t f = (int64_t)(w >> CH_BITS & CH_MASK), b = (int64_t)(w & CH_MASK);
    if (w >> (2 * CH_BITS) != id || f >= b) return -1;
    uint64_t next = back ? w - 1 : w + (UINT64_C(1) << CH_BITS);
    if (atomic_compare_exchange_weak(&runs[t].w, &w, next)) return back ? b - 1 : f;
  }
}

/* job.fn, ud, n and k are read only after a chunk was taken: the caller wrote them before it
** published the runs, and cannot write the next job's until that chunk is finished. */
static void run_chunk(int64_t c) {
  int64_t b = job.n * c / job.k, e = job.n * (c + 1) / job.k;
  if (b < e) job.fn(b, e, job.ud);
  if (atomic_fetch_sub(&remaining, 1) == 1) {
    pthread_mutex_lock(&lock);
    pthread_cond_signal(&done);
    pthread_mutex_unlock(&lock);
  }
}

/* Thread `home` of job g: its own run first, so that from one op to the next a thread meets the
** same part of the operands and finds it in its own core's cache (2 threads on the Intel Xeon:
** when every chunk came from one counter, a:add_(b) on 256K floats took 47 us, more than one
** thread's 36, as each op moved the halves between the cores' L2; now 14); then what is left of
** the others' runs, starting with the next thread's, so that thieves spread over the runs. */
static void run_chunks(int home, uint64_t g) {
  int nt = GEN_WORKERS(g) + 1;
  uint64_t id = RUN_ID(g);
  int64_t c;
  while ((c = take(home, false, id)) >= 0) run_chunk(c);
  for (int d = 1; d < nt; d++) {
    int t = (home + d) % nt;
    while ((c = take(t, true, id)) >= 0) run_chunk(c);
  }
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Polls until the generation differs from seen (true, *g set) or SPIN_NS has passed (false).
** The clock is read once per 32 pauses: a vDSO call costs about as much as a few pauses. A worker
** that took part in job seen counts from that job's end, not from its own last chunk: the halves
** of a product can end 50-100 us apart, and a worker that slept while the caller finished its
** half took 25-45 us to wake for the next op (2 threads on the Intel Xeon: half the MLP step's
** context switches, its mean 2.05 -> 2.01 ms). Until then it yields its core between polls, so
** that a thread of the job it shares a core with runs. */
static bool spin_for_job(uint64_t seen, uint64_t *g, bool in_job) {
  int64_t deadline = 0;
  for (unsigned k = 0;; k++) {
    if ((*g = atomic_load(&generation)) != seen) return true;
    if ((k & 31) == 0) {
      int64_t t = now_ns();
      bool running = in_job && atomic_load(&remaining) > 0;
      if (deadline == 0 || running)
        deadline = t + SPIN_NS;
      else if (t > deadline)
        return false;
      if (running) sched_yield();
    }
    cpu_relax();
  }
}

static bool spin_for_parts(void) {
  int64_t deadline = 0;
  for (unsigned k = 0;; k++) {
    if (atomic_load(&remaining) <= 0) return true;
    if ((k & 31) == 0) {
      int64_t t = now_ns();
      if (deadline == 0)
        deadline = t + SPIN_NS;
      else if (t > deadline)
        return false;
    }
    cpu_relax();
  }
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;   /* 1..: called when id <= the job's worker count */
  uint64_t seen = 0;
  for (;;) {
    uint64_t g;
    if (!spin_for_job(seen, &g, id <= GEN_WORKERS(seen))) {
      pthread_mutex_lock(&lock);
      while ((g = atomic_load(&generation)) == seen) pthread_cond_wait(&wake, &lock);
      pthread_mutex_unlock(&lock);
    }
    seen = g;
    if (id <= GEN_WORKERS(g)) run_chunks(id, g);
  }
  return NULL;
}

/* Starts workers up to n; returns how many exist. */
static int ensure_workers(int n) {
  if (n > MAX_WORKERS) n = MAX_WORKERS;
  while (nworkers < n) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, worker, (void *)(intptr_t)(nworkers + 1));
    pthread_attr_destroy(&attr);
    if (rc) break;
    nworkers++;
  }
  return nworkers;
}

void ltB_parallel_for(lt_ctx *ctx, int64_t n, int64_t grain, ltK_range_fn fn, void *ud) {
  if (n <= 0) return;
  int nt = ctx->num_threads;
  if (grain < 1) grain = 1;
  int64_t maxt = (n + grain - 1) / grain;
  if (maxt < nt) nt = (int)maxt;
  if (nt <= 1 || pthread_mutex_trylock(&owner) != 0) {
    fn(0, n, ud);
    return;
  }
  int have = ensure_workers(nt - 1);
  if (have + 1 < nt) nt = have + 1;
  if (nt <= 1) {
    pthread_mutex_unlock(&owner);
    fn(0, n, ud);
    return;
  }
  int64_t chunks = (int64_t)nt * CHUNKS_PER_THREAD;
  if (chunks > maxt) chunks = maxt;
  job.fn = fn;
  job.ud = ud;
  job.n = n;
  job.k = chunks;
  atomic_store(&remaining, chunks);
  uint64_t g = ((atomic_load(&generation) >> 8) + 1) << 8 | (uint64_t)(nt - 1);
  for (int t = 0; t < nt; t++)
    atomic_store(&runs[t].w, RUN_WORD(RUN_ID(g), chunks * t / nt, chunks * (t + 1) / nt));
  pthread_mutex_lock(&lock);
  atomic_store(&generation, g);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  run_chunks(0, g);
  if (!spin_for_parts()) {
    pthread_mutex_lock(&lock);
    while (atomic_load(&remaining) > 0) pthread_cond_wait(&done, &lock);
    pthread_mutex_unlock(&lock);
  }
  pthread_mutex_unlock(&owner);
}
