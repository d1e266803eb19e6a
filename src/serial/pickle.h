/*
** pickle.h -- what the unpickler (unpickle.c) and the pickler (pickle.c) share.
*/
#ifndef LT_PICKLE_H
#define LT_PICKLE_H

#include "serial.h"

/* Pickle opcodes, with the names of Python's pickle module (protocols 0-5; the unpickler
** takes the data-only ones of protocols 2-5 and names the others when it refuses them). */
enum pk_op {
  PK_PROTO = 0x80, PK_FRAME = 0x95, PK_STOP = '.', PK_MARK = '(', PK_POP = '0',
  PK_POP_MARK = '1', PK_DUP = '2', PK_NONE = 'N', PK_NEWTRUE = 0x88, PK_NEWFALSE = 0x89,
  PK_BININT1 = 'K', PK_BININT2 = 'M', PK_BININT = 'J', PK_LONG1 = 0x8a, PK_LONG4 = 0x8b,
  PK_BINFLOAT = 'G', PK_BINUNICODE = 'X', PK_SHORT_BINUNICODE = 0x8c, PK_BINUNICODE8 = 0x8d,
  PK_SHORT_BINSTRING = 'U', PK_BINSTRING = 'T', PK_BINBYTES = 'B', PK_SHORT_BINBYTES = 'C',
  PK_BINBYTES8 = 0x8e, PK_EMPTY_TUPLE = ')', PK_EMPTY_LIST = ']', PK_EMPTY_SET = 0x8f,
  PK_EMPTY_DICT = '}', PK_TUPLE = 't', PK_LIST = 'l', PK_FROZENSET = 0x91, PK_TUPLE1 = 0x85,
  PK_TUPLE2 = 0x86, PK_TUPLE3 = 0x87, PK_DICT = 'd', PK_APPEND = 'a', PK_APPENDS = 'e',
  PK_ADDITEMS = 0x90, PK_SETITEM = 's', PK_SETITEMS = 'u', PK_GLOBAL = 'c',
  PK_STACK_GLOBAL = 0x93, PK_REDUCE = 'R', PK_NEWOBJ = 0x81, PK_BUILD = 'b', PK_BINPERSID = 'Q',
  PK_BINPUT = 'q', PK_LONG_BINPUT = 'r', PK_MEMOIZE = 0x94, PK_BINGET = 'h',
  PK_LONG_BINGET = 'j', PK_INST = 'i', PK_OBJ = 'o', PK_PERSID = 'P', PK_EXT1 = 0x82,
  PK_EXT2 = 0x83, PK_EXT4 = 0x84, PK_GET = 'g', PK_PUT = 'p', PK_STRING = 'S', PK_UNICODE = 'V',
  PK_FLOAT = 'F', PK_INT = 'I', PK_LONG = 'L', PK_NEWOBJ_EX = 0x92, PK_BYTEARRAY8 = 0x96,
  PK_NEXT_BUFFER = 0x97, PK_READONLY_BUFFER = 0x98
};

/* Python's name for the kind of value v ("list", "dict", ...), for messages. */
const char *ltS_pickle_kind_name(const ltS_sval *v);

#endif
