/*
** pickle.h -- what the unpickler (unpickle.c) and the pickler (pickle.c) share.
*/
#ifndef LT_PICKLE_H
#define LT_PICKLE_H

#include "serial.h"

/* Python's name for the kind of value v ("list", "dict", ...), for messages. */
const char *lt_pickle_kind_name(const lt_sval *v);

#endif
