/*
** safetensors.h -- what the safetensors reader (safetensors.c) and writer (safetensors_save.c)
** share: the reference implementation's dtype table.
*/
#ifndef LT_SAFETENSORS_H
#define LT_SAFETENSORS_H

#include "serial.h"

/* A row of the table: the header's name, the file dtype (-1: none Lantern reads) and the
** reference's enum order, by which the writer sorts (descending). */
typedef struct ltS_st_dtype {
  const char *name;
  int fdt;
  int rank;
} ltS_st_dtype;

/* The rows the writer uses by name (Lantern's dtypes). */
enum { LT_ST_BOOL = 0, LT_ST_F32 = 11, LT_ST_F64 = 12, LT_ST_I64 = 13, LT_ST_NDTYPES = 15 };
extern const ltS_st_dtype ltS_st_dtypes[LT_ST_NDTYPES];

#endif
