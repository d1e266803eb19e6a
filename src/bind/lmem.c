/*
** lmem.c -- tensor memory seen from Lua: collection paced by tensor bytes, release scopes,
** explicit release, and the cache's statistics and settings.
**
** Pacing. Tensor bytes live outside Lua's heap, so the collector cannot see them. Each slice
** of fresh tensor memory does two things. It steps the collector, which in incremental mode
** runs cycles at the pace of tensor allocation and in generational mode runs a minor collection.
** And, because a tensor that survives two minor collections is old and is freed only by a major
** collection, which Lua starts from its own heap growth alone, it compares the bytes the buffer
** cache has in use with a limit: when they exceed it, a full collection runs (in the mode the
** host chose) and the limit is set again from what survived. The limit is what survived plus
** the larger of that, Lua's own heap and a floor (the room), so garbage stays within about the
** live set and each full collection, whose cost follows the Lua heap, is paid for by at least as
** many bytes of tensor allocation (the rule JavaScript engines use for external memory). An
** incremental cycle that ends also resets the limit.
**
** A slice is half of the bytes the cache has in use (256 KiB at least, 64 MiB at most), not a
** fixed size, or less where tensors are seen to die much sooner (next_slice). With 256 KiB
** slices, a training step of a few MB ran a dozen minor collections,
** so its activations and gradients outlived two of them, became old and waited for full
** collections; each of those walks Lantern's Lua heap (about 0.5 ms on the Zen 5 EPYC here), and
** the spec's CNN loop ran one every step. Slices scaled to the working set let a step's
** temporaries die in minor collections. In-process alternated runs there, fixed / half / a
** quarter: the MLP step 2.69 / 2.59 / 2.52 ms (1 thread), 1.50 / 1.44 / 1.42 (2); LeNet 4.83 /
** 4.24 / 3.95 and 3.07 / 2.75 / 2.65; the GPT step and a loop of 16-element adds unchanged. Half
** rather than a quarter because fewer temporaries then grow old at all: the spec's loops run one
** full collection between them (a quarter still ran one every three steps of the saved-outputs
** loop and every other step of the two-tensor one), and `make bench`'s GPT peaked at 58 MB
** against 83 with a quarter and 55 with fixed slices. Loops of small tensors keep small slices,
** which keep the recycling lists short.
**
** The step is the slice's KiB scaled by PACE * heap / room when the Lua heap is the smaller.
** An incremental cycle walks the whole Lua heap and starts once the debt has paid the pause,
** about the heap's size, so unscaled steps ran one cycle per heap-size of tensor allocation
** whatever the room: 64K-float products in Lantern's 180 KB heap ran a cycle every other op,
** 19.7 us an op against 9.2 in generational mode. Scaled, a cycle comes every room / PACE bytes:
** 13.3 us (4096 floats: 2.0 -> 1.05 us), garbage still well inside the limit. The room is
** capped by what is in use now, so a room measured before the live set shrank does not stretch
** the steps, and by CYCLE_HEAPS Lua heaps (cycle_room). Every step is at least a fifth of the
** heap, the debt a minor collection waits for at Lua's default genminormul (a host that raises
** it gets one every few slices), so that in generational mode each slice runs one; in
** incremental mode that floor is below the scaled step wherever slices are half the bytes in
** use, and where they are shorter it makes the cycles keep up with them.
**
** Release scopes (lt.tidy). While a scope is open, every tensor handle pushed to Lua is recorded
** in the innermost scope's list and tagged with its serial. When the scope ends, the handles it
** returns move to the enclosing scope (or to none), handles passed to lt.keep leave it, and the
** rest drop their tensor at once. Dropping a handle releases one reference: a tensor that a view,
** the autograd graph or C code still holds lives on, so nothing is freed under its users. A
** dropped handle raises on use.
*/
#include <limits.h>

#include "lbind.h"

#define FULL_FLOOR ((size_t)2 << 20)
#define PACE 2
#define CYCLE_HEAPS 64
#define SHRINK_FROM ((size_t)8 << 20)
#define MINOR_SHARE 5   /* a minor collection waits for a debt of heap / 5 (Lua's genminormul) */

static ltL_state *state_up(lua_State *L) { return ltL_state_in(LTL_CTX(L)); }

/* ------------------------------------------------------------ pacing */

void ltL_gc_rebase(lua_State *L, ltL_state *st) {
  size_t live = ltB_cache_in_use();
  size_t heap = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
  size_t room = live > heap ? live : heap;
  if (room < FULL_FLOOR) room = FULL_FLOOR;
  st->gc_room = room;
  st->gc_limit = live + room;
}

/* The tensors a step's finalizers dropped, released oldest first. Lua finalizes the newest
** garbage first, so released as they came the buffer cache (last in, first out) handed the
** next op the block longest unwritten, out of cache: products of 1M floats in a loop took 117
** us against 87 with free(). Released in reverse, the next op gets the block written last. */
static void release_dead(ltL_state *st) {
  while (st->ndead > 0) lt_release(st->dead[--st->ndead]);
}

/* The room that paces incremental cycles: what the limit allows, but at most CYCLE_HEAPS Lua
** heaps. A cycle costs a walk of the heap, about 20 us for Lantern's own 190 KB, and with a
** large live set the limit's room alone let garbage outgrow the caches: beside a 40 MB model a
** loop of 4 MB `clamp`s kept six dead outputs (32 beside 200 MB), each op writing a buffer
** long out of cache. */
static size_t cycle_room(const ltL_state *st, size_t heap, bool *capped) {
  size_t room = ltB_cache_in_use();   /* a room measured before the live set shrank: capped */
  room = room < FULL_FLOOR ? FULL_FLOOR : room > st->gc_room ? st->gc_room : room;
  size_t most = CYCLE_HEAPS * heap > FULL_FLOOR ? CYCLE_HEAPS * heap : FULL_FLOOR;
  *capped = room > most;
  return *capped ? most : room;
}

/* Whether the collector runs incremental cycles: one ended within the last 8 x bytes in use
** of tensor allocation (Lua tells the mode only by changing it). */
static bool cycling(const ltL_state *st) {
  return st->clock - st->cycle_clock < 8 * (uint64_t)ltB_cache_in_use();
}

/* The collector step for a slice of kb KiB: scaled by PACE * heap / room, so that a cycle
** comes every room / PACE bytes of tensors, and once that many have gone by since the last
** cycle ended, at least PACE heaps, which finishes it; never below the debt a minor collection
** waits for (the header). */
static size_t step_kb(const ltL_state *st, size_t kb, size_t heap, size_t room) {
  if (heap < room / PACE)
    kb = (size_t)((double)kb * (double)heap * PACE / (double)room) + 1;
  size_t least = heap / (1024 * MINOR_SHARE) + 1;
  if (st->clock - st->cycle_clock > room / PACE) least = heap * PACE / 1024 + 1;
  return kb < least ? least : kb > INT_MAX ? INT_MAX : kb;
}

/* The next slice: half the bytes in use, or less once over SHRINK_FROM are in use. Half the
** bytes in use is right for a training step, whose activations must not outlive two minor
** collections; it is too long for a loop whose temporaries die at once beside a large live
** set: with a 40 MB model in memory, 4 MB `clamp` outputs lived through 22 MB slices, so each
** op wrote a buffer long out of cache (1M-float `clamp` 150 us, `cat` of 8 tensors 236,
** against 90 and 114 in PyTorch, which frees at once).
** - Generational: at most twice the longest life of a recently freed tensor (span, kept by
**   __gc), decaying by an eighth per slice; a life longer than the bytes in use is counted as
**   that (a model dropped after long use says nothing of how long temporaries live).
** - Incremental: tensors die when a cycle ends, so their lives measure the cycle. Where
**   CYCLE_HEAPS caps the room, the slice is half of room / PACE, so that steps come often
**   enough to end a cycle on time; elsewhere it stays (capped everywhere, the CNN's and the
**   GPT's peaks in incremental mode rose 8%).
** Below SHRINK_FROM slices are short already, and the first steps of a run, before lifetimes
** are seen, keep half the bytes in use (shrunk there, one early slice left the GPT
** benchmark's peak 10% higher). */
static size_t next_slice(const ltL_state *st, size_t room, bool capped) {
  size_t next = ltB_cache_in_use() / 2;
  if (next > SHRINK_FROM / 2) {
    size_t most = 2 * (size_t)st->span;
    if (cycling(st)) most = capped ? room / (2 * PACE) : next;
    if (most < next) next = most;
  }
  return next < LTL_SLICE_MIN ? LTL_SLICE_MIN : next > LTL_SLICE_MAX ? LTL_SLICE_MAX : next;
}

void ltL_gc_slice(lua_State *L, ltL_state *st, size_t kb) {
  /* a stopped collector (collectgarbage("stop"), or a finalizer running: -1) is left alone */
  if (lua_gc(L, LUA_GCISRUNNING) != 1) return;
  size_t heap = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024;
  bool capped;
  size_t room = cycle_room(st, heap, &capped);
  kb = step_kb(st, kb, heap, room);
  st->span -= st->span / 8;
  st->deferring = true;
  int ended = lua_gc(L, LUA_GCSTEP, (int)kb);
  st->deferring = false;
  release_dead(st);
  if (ended == 1) {
    ltL_gc_rebase(L, st);   /* an incremental cycle just ended */
    st->cycle_clock = st->clock;
  } else if (ltB_cache_in_use() > st->gc_limit) {
    st->deferring = true;
    lua_gc(L, LUA_GCCOLLECT);
    st->deferring = false;
    release_dead(st);
    st->full_gcs++;
    ltL_gc_rebase(L, st);
  }
  st->last_clock = st->clock;
  st->slice = next_slice(st, room, capped);
}

/* ------------------------------------------------------------ release */

int ltL_released_error(lua_State *L, int idx) {
  lua_Debug ar;
  const char *fname = "?";
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name) fname = ar.name;
  return luaL_error(L, "%s: argument #%d: tensor was released (by free(), a <close> variable "
                    "or the end of lt.tidy) and cannot be used", fname, idx);
}

static void drop(ltL_box *box) {
  lt_release(box->t);
  box->t = NULL;
  box->scope = 0;
}

/* Records the handle on the stack top in scope s. */
static void track_in(lua_State *L, ltL_scope *s, ltL_box *box) {
  luaL_checkstack(L, 2, "tidy");
  box->scope = s->serial;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s->list_ref);
  lua_pushvalue(L, -2);
  lua_rawseti(L, -2, ++s->n);
  lua_pop(L, 1);
}

void ltL_scope_track(lua_State *L, ltL_state *st, ltL_box *box) {
  track_in(L, &st->scopes[st->nscopes - 1], box);
}

/* Serials are 32 bits (the box has room for no more) and wrap: one is skipped while a scope
** that holds it is still open, so a handle's serial names one open scope. */
static uint32_t next_serial(ltL_state *st) {
  for (;;) {
    uint32_t s = ++st->scope_serial;
    bool taken = s == 0;
    for (int k = 0; k < st->nscopes && !taken; k++) taken = st->scopes[k].serial == s;
    if (!taken) return s;
  }
}

static int l_scope_begin(lua_State *L) {
  ltL_state *st = state_up(L);
  if (st->nscopes == LTL_MAX_SCOPES)
    return luaL_error(L, "tidy: scopes nested more than %d deep", LTL_MAX_SCOPES);
  lua_createtable(L, 32, 0);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  uint32_t serial = next_serial(st);   /* before the new scope counts as open */
  ltL_scope *s = &st->scopes[st->nscopes++];
  s->serial = serial;
  s->list_ref = ref;
  s->n = 0;
  lua_pushinteger(L, (lua_Integer)s->serial);
  return 1;
}

/* Moves the handles of scope `serial` found in the value at idx (tensors, and tables of them
** at any depth) to `to` (NULL: no scope). `seen` (a table at seen_idx) stops cycles. */
static void adopt(lua_State *L, int idx, uint32_t serial, ltL_scope *to, int seen_idx,
                  int depth) {
  ltL_box *box = ltL_testbox(L, idx);
  if (box) {
    if (box->t && box->scope == serial) {
      if (to) {
        lua_pushvalue(L, idx);
        track_in(L, to, box);
        lua_pop(L, 1);
      } else {
        box->scope = 0;
      }
    }
    return;
  }
  if (!lua_istable(L, idx) || depth > 32) return;
  luaL_checkstack(L, 4, "tidy");
  idx = lua_absindex(L, idx);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, seen_idx) != LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, seen_idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    adopt(L, -1, serial, to, seen_idx, depth + 1);
    lua_pop(L, 1);
  }
}

/* _scope_end(serial, ...): the values after serial survive (into the enclosing scope); every
** other handle made inside the scope is dropped. Returns nothing; lt.tidy returns the values. */
static int l_scope_end(lua_State *L) {
  ltL_state *st = state_up(L);
  lua_Integer given = luaL_checkinteger(L, 1);
  uint32_t serial = (uint32_t)given;
  int k = given == (lua_Integer)serial ? st->nscopes - 1 : -1;
  while (k >= 0 && st->scopes[k].serial != serial) k--;
  if (k < 0) return luaL_error(L, "tidy: scope %I is not open", (LUAI_UACINT)given);
  int top = lua_gettop(L);
  /* a coroutine may leave an inner scope open; the enclosing one is then k - 1 all the same */
  ltL_scope *to = k > 0 ? &st->scopes[k - 1] : NULL;
  lua_newtable(L);
  int seen = lua_gettop(L);
  for (int i = 2; i <= top; i++) adopt(L, i, serial, to, seen, 0);
  ltL_scope s = st->scopes[k];
  memmove(&st->scopes[k], &st->scopes[k + 1], (size_t)(st->nscopes - k - 1) * sizeof s);
  st->nscopes--;
  lua_rawgeti(L, LUA_REGISTRYINDEX, s.list_ref);
  for (int i = 1; i <= s.n; i++) {
    lua_rawgeti(L, -1, i);
    ltL_box *box = lua_touserdata(L, -1);
    if (box->t && box->scope == serial) drop(box);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, s.list_ref);
  return 0;
}

/* _scope_serial(n): the next scope gets serial n + 1 (mod 2^32); lets the specs cross the wrap,
** four billion scopes away otherwise. */
static int l_scope_serial(lua_State *L) {
  state_up(L)->scope_serial = (uint32_t)luaL_checkinteger(L, 1);
  return 0;
}

static int l_scope_depth(lua_State *L) {
  lua_pushinteger(L, state_up(L)->nscopes);
  return 1;
}

/* lt.keep(t): t leaves every release scope (values other than tensors pass through). */
static int l_keep(lua_State *L) {
  ltL_box *box = ltL_testbox(L, 1);
  if (box) box->scope = 0;
  lua_settop(L, 1);
  return 1;
}

/* t:free(), and __close: drops this handle's reference now. Freeing twice is harmless. */
static int t_free(lua_State *L) {
  ltL_box *box = ltL_testbox(L, 1);
  if (!box) return luaL_error(L, "free: bad argument #1 (Tensor expected, got %s)",
                              luaL_typename(L, 1));
  if (box->t) drop(box);
  return 0;
}

static int l_is_released(lua_State *L) {
  ltL_box *box = ltL_testbox(L, 1);
  lua_pushboolean(L, box && !box->t);
  return 1;
}

static int l_is_tensor(lua_State *L) {
  LTL_NOMORE(L, 1);
  lua_pushboolean(L, ltL_testbox(L, 1) != NULL);
  return 1;
}

/* ------------------------------------------------------------ statistics and settings */

static int l_memory_stats(lua_State *L) {
  lt_memstats st;
  lt_memory_stats(&st);
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)st.in_use);
  lua_setfield(L, -2, "in_use");
  lua_pushinteger(L, (lua_Integer)st.cached);
  lua_setfield(L, -2, "cached");
  lua_pushinteger(L, (lua_Integer)st.peak_in_use);
  lua_setfield(L, -2, "peak_in_use");
  lua_pushinteger(L, (lua_Integer)st.fresh_allocs);
  lua_setfield(L, -2, "fresh_allocs");
  lua_pushinteger(L, (lua_Integer)st.reused);
  lua_setfield(L, -2, "reused");
  lua_pushinteger(L, (lua_Integer)state_up(L)->full_gcs);
  lua_setfield(L, -2, "full_collections");
  return 1;
}

static int l_empty_cache(lua_State *L) {
  (void)L;
  lt_empty_cache();
  return 0;
}

static int l_reset_peak(lua_State *L) {
  (void)L;
  lt_reset_peak_memory();
  return 0;
}

/* lt.set_cache_options{release_after = s, max_cached = bytes}: returns the previous settings. */
static int l_set_cache_options(lua_State *L) {
  static const char *const known[] = {"release_after", "max_cached", NULL};
  luaL_checktype(L, 1, LUA_TTABLE);
  ltL_checkopts(L, 1, "set_cache_options", known);
  double after = -1;
  size_t cap = (size_t)-1;
  if (lua_getfield(L, 1, "release_after") != LUA_TNIL) {
    if (!lua_isnumber(L, -1) || lua_tonumber(L, -1) < 0)
      return luaL_error(L, "set_cache_options: release_after must be a number of seconds >= 0 "
                        "(0 keeps blocks until empty_cache), got %s", luaL_tolstring(L, -1, NULL));
    after = lua_tonumber(L, -1);
  }
  if (lua_getfield(L, 1, "max_cached") != LUA_TNIL) {
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0)
      return luaL_error(L, "set_cache_options: max_cached must be an integer number of bytes "
                        ">= 0, got %s", luaL_tolstring(L, -1, NULL));
    cap = (size_t)lua_tointeger(L, -1);
  }
  lt_cache_options(&after, &cap);
  lua_createtable(L, 0, 2);
  lua_pushnumber(L, after);
  lua_setfield(L, -2, "release_after");
  lua_pushinteger(L, (lua_Integer)cap);
  lua_setfield(L, -2, "max_cached");
  return 1;
}

static const ltL_Reg mem_regs[] = {
    {"_scope_begin", l_scope_begin, LTL_FN},
    {"_scope_end", l_scope_end, LTL_FN},
    {"_scope_depth", l_scope_depth, LTL_FN},
    {"_scope_serial", l_scope_serial, LTL_FN},
    {"keep", l_keep, LTL_FN},
    {"free", t_free, LTL_METHOD},
    {"is_released", l_is_released, LTL_FN},
    {"is_tensor", l_is_tensor, LTL_FN},
    {"memory_stats", l_memory_stats, LTL_FN},
    {"empty_cache", l_empty_cache, LTL_FN},
    {"reset_peak_memory_stats", l_reset_peak, LTL_FN},
    {"set_cache_options", l_set_cache_options, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_mem(lua_State *L) {
  ltL_register(L, mem_regs);
  luaL_getmetatable(L, LTL_TENSOR_MT);
  lua_pushcfunction(L, t_free);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
}
