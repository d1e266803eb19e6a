/*
** cuda_plugin.c -- loads the CUDA plugin (src/cuda/plugin.h) on the first use of a "cuda"
** device, so core.so, liblantern.a and the CPU build never need CUDA.
**
** The plugin is looked for at $LANTERN_CUDA_PLUGIN, else as cuda.so beside the object this
** code is in (build/lantern/core.so, so build/lantern/cuda.so). A machine without the plugin,
** libcudart, a driver or a device gets the reason as a sentence, never a crash.
*/
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cuda/plugin.h"

#define PLUGIN_FILE "cuda.so"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static ltD_cuda_plugin plugin;
static bool loaded;   /* the plugin's init succeeded */
static char why[LT_CUDA_WHY_MAX];
static char path[4096];

static const ltD_cuda_host host = {
    .abi = LT_CUDA_ABI,
    .backend_size = sizeof(ltK_backend),
    .tensor_size = sizeof(lt_tensor),
    .fail = ltB_fail,
};

/* cuda.so in the directory of the object that holds this function. */
static bool plugin_path(void) {
  const char *env = getenv("LANTERN_CUDA_PLUGIN");
  if (env && *env) return snprintf(path, sizeof path, "%s", env) < (int)sizeof path;
  Dl_info info;
  if (!dladdr((void *)ltD_cuda_load, &info) || !info.dli_fname) return false;
  const char *slash = strrchr(info.dli_fname, '/');
  int dir = slash ? (int)(slash - info.dli_fname) : 0;
  return snprintf(path, sizeof path, "%.*s%s" PLUGIN_FILE, dir, info.dli_fname,
                  slash ? "/" : "") < (int)sizeof path;
}

static void load(void) {
  if (!plugin_path()) {
    snprintf(why, sizeof why, "the CUDA plugin's path could not be found");
    return;
  }
  /* RTLD_NODELETE: kernels and the allocator's cache must outlive every state */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char *e = dlerror();
    if (e && strstr(e, PLUGIN_FILE) && strstr(e, "No such file"))
      snprintf(why, sizeof why, "the CUDA plugin is not built (no %.200s; run `make cuda` on a "
               "machine with the CUDA toolkit)", path);
    else
      snprintf(why, sizeof why, "the CUDA plugin %.160s could not be loaded (the CUDA runtime "
               "library missing?): %.200s", path, e ? e : "unknown error");
    return;
  }
  ltD_cuda_init_fn init;
  void *sym = dlsym(h, LT_CUDA_INIT);
  memcpy(&init, &sym, sizeof init);   /* POSIX: a function's address through void * */
  if (!sym) {
    snprintf(why, sizeof why, "%.200s is not Lantern's CUDA plugin (no %s)", path, LT_CUDA_INIT);
    dlclose(h);
    return;
  }
  if (init(&host, &plugin, why, sizeof why)) {
    dlclose(h);
    return;
  }
  loaded = true;
  if (!ltD_backend_of(LT_CUDA)) ltD_backend_register(LT_CUDA, &plugin.table);
}

static void load_once(void) { load(); }

/* A table a C host registered itself (spec/c/mock_device.c) stands, and no plugin is loaded. */
const ltK_backend *ltD_cuda_load(void) {
  const ltK_backend *b = ltD_backend_of(LT_CUDA);
  if (b) return b;
  pthread_once(&once, load_once);
  return ltD_backend_of(LT_CUDA);
}

const char *ltD_cuda_why(void) { return ltD_cuda_load() ? NULL : why; }

const ltD_cuda_plugin *ltD_cuda_plugin_of(void) {
  return ltD_cuda_load() == &plugin.table ? &plugin : NULL;
}
