/*
** backend.c -- the registry of kernel tables, one per kind of device. The cpu's is built in;
** another kind's is registered by its plugin (cuda_plugin.c) or by a C host (a test's mock).
*/
#include "backend.h"

const lt_backend *lt_backends[LT_NDEVTYPE] = {[LT_CPU] = &lt_cpu_backend};

void lt_backend_register(lt_devtype type, const lt_backend *b) {
  if (type != LT_CPU && (unsigned)type < LT_NDEVTYPE && b) lt_backends[type] = b;
}

const lt_backend *lt_backend_of(lt_devtype device) {
  return (unsigned)device < LT_NDEVTYPE ? lt_backends[device] : NULL;
}
