/*
** mock_device.c -- a C host that registers a second kind of device and runs a Lua script on it,
** so the device layer (names, placement of outputs, the one-device rule, copies through the
** host, autograd across devices, Module:to, saving) is tested on a machine without a GPU.
**
** The mock is "cuda" with two devices. Its kernels are the cpu's, but its memory is its own:
** every block carries a header naming the mock and its device, and to_host, from_host and
** release abort on a pointer that is not a live block of the right device, so the host side
** handing it host memory, or one device's memory to the other, is caught. `mock_bytes()` in
** the script gives the bytes live on the mock's devices, `mock_transfers()` the number of
** copies each way.
**
** Usage: mock_device script.lua [args...]   (built by spec/device_api_spec.lua against
** liblantern.a; it also runs busted, so the per-device op suite runs on the mock)
*/
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend.h"
#include "lantern.h"

#define MAGIC 0x6d6f636bu   /* "mock" */
#define NDEV 2

typedef struct {
  unsigned magic;
  int index;
  size_t nbytes;
  _Alignas(64) unsigned char data[];
} block;

static size_t live_bytes;
static long to_host_calls, from_host_calls;

/* Live blocks, so that a pointer into one (a view's data) is recognised too. */
#define MAXBLOCKS 65536
static block *blocks[MAXBLOCKS];
static int nblocks;

static block *block_of(const void *p, int index, size_t nbytes, const char *what) {
  const unsigned char *q = p;
  for (int i = 0; i < nblocks; i++) {
    block *b = blocks[i];
    if (q >= b->data && q + nbytes <= b->data + b->nbytes && (nbytes || q <= b->data + b->nbytes)) {
      if (b->magic == MAGIC && b->index == index) return b;
      break;
    }
  }
  fprintf(stderr, "mock_device: %s got %p, not %zu bytes of mock device %d\n", what, p, nbytes,
          index);
  abort();
}

static void forget(block *b) {
  for (int i = 0; i < nblocks; i++)
    if (blocks[i] == b) {
      blocks[i] = blocks[--nblocks];
      return;
    }
}

static int mock_count(void) { return NDEV; }

static int mock_alloc(lt_ctx *ctx, int index, size_t nbytes, void **data) {
  block *b = aligned_alloc(64, (sizeof(block) + nbytes + 63) / 64 * 64);
  if (!b) return ltB_fail(ctx, "mock device out of memory");
  if (nblocks == MAXBLOCKS) {
    free(b);
    return ltB_fail(ctx, "mock device: too many blocks");
  }
  b->magic = MAGIC;
  b->index = index;
  b->nbytes = nbytes;
  blocks[nblocks++] = b;
  live_bytes += nbytes;
  *data = b->data;
  return 0;
}

static void mock_release(int index, void *data, size_t nbytes) {
  block *b = block_of(data, index, nbytes, "release");
  if (data != b->data) {
    fprintf(stderr, "mock_device: release of %p inside a block\n", data);
    abort();
  }
  forget(b);
  live_bytes -= b->nbytes;
  b->magic = 0;
  free(b);
}

static int mock_to_host(lt_ctx *ctx, int index, void *host, const void *src, size_t nbytes) {
  (void)ctx;
  block_of(src, index, nbytes, "to_host");
  to_host_calls++;
  memcpy(host, src, nbytes);
  return 0;
}

static int mock_from_host(lt_ctx *ctx, int index, void *dst, const void *host, size_t nbytes) {
  (void)ctx;
  block_of(dst, index, nbytes, "from_host");
  from_host_calls++;
  memcpy(dst, host, nbytes);
  return 0;
}

static ltK_backend mock;

static int l_mock_bytes(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)live_bytes);
  return 1;
}

static int l_mock_transfers(lua_State *L) {
  lua_pushinteger(L, to_host_calls);
  lua_pushinteger(L, from_host_calls);
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mock_device script.lua\n");
    return 2;
  }
  mock = ltC_backend;
  mock.name = "mock cuda";
  mock.device_count = mock_count;
  mock.alloc = mock_alloc;
  mock.release = mock_release;
  mock.to_host = mock_to_host;
  mock.from_host = mock_from_host;
  ltD_backend_register(LT_CUDA, &mock);

  lua_State *L = luaL_newstate();
  if (!L) return 1;
  luaL_openlibs(L);
  lantern_open(L);
  lua_register(L, "mock_bytes", l_mock_bytes);
  lua_register(L, "mock_transfers", l_mock_transfers);
  lua_createtable(L, argc - 2, 1);   /* arg as lua sets it: busted runs through this host too */
  for (int i = 1; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  lua_setglobal(L, "arg");
  int rc = luaL_dofile(L, argv[1]);
  if (rc != LUA_OK) fprintf(stderr, "mock_device: %s\n", lua_tostring(L, -1));
  lua_close(L);
  if (rc == LUA_OK && live_bytes != 0) {
    fprintf(stderr, "mock_device: %zu bytes of device memory not released at exit\n", live_bytes);
    return 1;
  }
  return rc == LUA_OK ? 0 : 1;
}
