/*
** backend.c -- the registry of kernel tables, one per kind of device. The cpu's is built in;
** another kind's is registered by its plugin (cuda_plugin.c) or by a C host (a test's mock).
*/
#include "backend.h"

const ltK_backend *ltD_backends[LT_NDEVTYPE] = {[LT_CPU] = &ltC_backend};

void ltD_backend_register(lt_devtype type, const ltK_backend *b) {
  if (type != LT_CPU && (unsigned)type < LT_NDEVTYPE && b) ltD_backends[type] = b;
}

const ltK_backend *ltD_backend_of(lt_devtype device) {
  return (unsigned)device < LT_NDEVTYPE ? ltD_backends[device] : NULL;
}
