/*
** lalloc.c -- a free-list front for the allocator of a Lua state that loads Lantern.
**
** A small op makes one userdata per result, and the collector frees them in bursts of hundreds.
** That overflows malloc's per-thread cache, so each free and the next allocation take malloc's
** slow path: about a tenth of a small op's instructions. Blocks of up to POOL_SIZE bytes that
** Lua frees are kept on one list per exact size and handed out again for the next request of
** that size. Every block still comes from the state's own allocator and goes back to it when
** the state closes (or when an allocation fails), so a host's custom allocator keeps working.
*/
#include <stdlib.h>

#include "lbind.h"

typedef struct pool_block { struct pool_block *next; } pool_block;

/* Under AddressSanitizer a block on a list is poisoned past its link, so a use of a freed
** userdata is still reported while the leak checker can follow the list; the block is
** unpoisoned when it is handed out or returned. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((char *)(p) + sizeof(pool_block), \
                                              (n) - sizeof(pool_block))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define KEEP_FOREVER(p) __lsan_ignore_object(p)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#define KEEP_FOREVER(p) ((void)(p))
#endif

#define POOL_SIZE 64                 /* largest pooled block */
#define POOL_BYTES (1 << 20)         /* most bytes kept on the lists */

struct ltL_pool {
  lua_Alloc f0;                      /* the allocator the state had */
  void *ud0;
  size_t bytes;                      /* on the lists */
  pool_block *free[POOL_SIZE + 1];   /* by exact size */
};

static void flush(ltL_pool *p) {
  for (size_t n = sizeof(pool_block); n <= POOL_SIZE; n++) {
    while (p->free[n]) {
      pool_block *b = p->free[n];
      UNPOISON(b, n);
      p->free[n] = b->next;
      p->f0(p->ud0, b, n, 0);
    }
  }
  p->bytes = 0;
}

/* The state's own allocator, for what the lists cannot serve. Out of line, so that the two list
** operations below need no registers saved: they are most of a small op's allocator calls. */
static __attribute__((noinline)) void *through(ltL_pool *p, void *ptr, size_t osize,
                                               size_t nsize) {
  void *r = p->f0(p->ud0, ptr, osize, nsize);
  if (!r && nsize && p->bytes) {   /* give the lists back, try once more before the emergency GC */
    flush(p);
    r = p->f0(p->ud0, ptr, osize, nsize);
  }
  return r;
}

/* Lua's allocator contract: nsize 0 frees ptr (of osize bytes); a NULL ptr allocates, and then
** osize names the kind of object, not a size. */
static void *pool_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  ltL_pool *p = ud;
  if (nsize == 0) {
    if (ptr && osize >= sizeof(pool_block) && osize <= POOL_SIZE && p->bytes + osize <= POOL_BYTES) {
      pool_block *b = ptr;
      b->next = p->free[osize];
      POISON(b, osize);
      p->free[osize] = b;
      p->bytes += osize;
      return NULL;
    }
  } else if (!ptr && nsize >= sizeof(pool_block) && nsize <= POOL_SIZE && p->free[nsize]) {
    pool_block *b = p->free[nsize];
    UNPOISON(b, nsize);
    p->free[nsize] = b->next;
    p->bytes -= nsize;
    return b;
  }
  return through(p, ptr, osize, nsize);
}

ltL_pool *ltL_pool_install(lua_State *L) {
  ltL_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;   /* the state simply keeps its allocator */
  p->f0 = lua_getallocf(L, &p->ud0);
  lua_setallocf(L, pool_alloc, p);
  return p;
}

void ltL_pool_remove(lua_State *L, ltL_pool *p) {
  if (!p) return;
  void *ud;
  if (lua_getallocf(L, &ud) != pool_alloc || ud != p) {
    /* someone wrapped the allocator after us and may still call through to us: stop pooling
    ** but stay in place (the record is leaked, once per state) */
    flush(p);
    p->bytes = POOL_BYTES;   /* full: every later free goes straight through */
    KEEP_FOREVER(p);
    return;
  }
  lua_setallocf(L, p->f0, p->ud0);
  flush(p);
  free(p);
}
