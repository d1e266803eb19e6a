/*
** pickle.c -- a protocol-2 pickler for torch.save's data.pkl (the unpickler is unpickle.c).
**
** The pickler writes what torch.save writes: OrderedDict/dict, lists, tuples, ints (BININT1/2/4,
** LONG1), floats (BINFLOAT), strings (BINUNICODE), bytes (_codecs.encode), and tensors as
** _rebuild_tensor_v2 with 6 arguments on persistent-id storages. Floats are the only part
** PyTorch 1.13's weights_only loader refuses.
*/
#include <stdlib.h>

#include "serial.h"
#include "pickle.h"

/* Python's pickle batches APPENDS/SETITEMS in runs of this many items; so does torch.save. */
#define PK_BATCH 1000
/* Deeper value trees are refused: emit_value recurses once per level, on the C stack. */
#define PK_MAX_DEPTH 1000
/* The protocol torch.save writes by default. */
#define PK_PROTOCOL 2

typedef struct pk {
  lt_ctx *ctx;
  const char *op;
  uint8_t *buf;
  size_t n, cap;
  bool oom;
  int64_t nmemo;
  struct { const char *mod, *name; int64_t memo; } g[16];
  int ng;
  ltS_pstorage *stor;
  size_t ns, cs;
} pk;

static void emit(pk *w, const void *p, size_t n) {
  if (w->oom) return;
  if (w->cap - w->n < n) {
    size_t nc = w->cap ? w->cap : 4096;
    while (nc - w->n < n) nc *= 2;
    uint8_t *b = realloc(w->buf, nc);
    if (!b) {
      w->oom = true;
      return;
    }
    w->buf = b;
    w->cap = nc;
  }
  memcpy(w->buf + w->n, p, n);
  w->n += n;
}

static void emit1(pk *w, int c) {
  uint8_t b = (uint8_t)c;
  emit(w, &b, 1);
}

static void emit_le(pk *w, uint64_t v, int n) {
  uint8_t b[8];
  for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
  emit(w, b, (size_t)n);
}

static void emit_int(pk *w, int64_t v) {
  if (v >= 0 && v < 256) {
    emit1(w, PK_BININT1);
    emit1(w, (int)v);
  } else if (v >= 0 && v < 65536) {
    emit1(w, PK_BININT2);
    emit_le(w, (uint64_t)v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    emit1(w, PK_BININT);
    emit_le(w, (uint64_t)v, 4);
  } else {   /* LONG1 with the shortest two's complement form */
    int n = 8;
    while (n > 1) {
      int64_t lo = -((int64_t)1 << (8 * (n - 1) - 1)), hi = ((int64_t)1 << (8 * (n - 1) - 1)) - 1;
      if (v < lo || v > hi) break;
      n--;
    }
    emit1(w, PK_LONG1);
    emit1(w, n);
    emit_le(w, (uint64_t)v, n);
  }
}

static void emit_str(pk *w, const char *s, size_t n) {
  emit1(w, PK_BINUNICODE);
  emit_le(w, n, 4);
  emit(w, s, n);
}

static void memoize(pk *w, ltS_sval *v) {
  int64_t i = w->nmemo++;
  if (i < 256) {
    emit1(w, PK_BINPUT);
    emit1(w, (int)i);
  } else {
    emit1(w, PK_LONG_BINPUT);
    emit_le(w, (uint64_t)i, 4);
  }
  if (v) v->memo = i + 1;
}

static void emit_get(pk *w, int64_t i) {
  if (i < 256) {
    emit1(w, PK_BINGET);
    emit1(w, (int)i);
  } else {
    emit1(w, PK_LONG_BINGET);
    emit_le(w, (uint64_t)i, 4);
  }
}

/* GLOBAL "mod\nname\n", reusing the memo after the first time (as torch's pickler does). */
static void emit_global(pk *w, const char *mod, const char *name) {
  for (int i = 0; i < w->ng; i++)
    if (strcmp(w->g[i].mod, mod) == 0 && strcmp(w->g[i].name, name) == 0) {
      emit_get(w, w->g[i].memo);
      return;
    }
  emit1(w, PK_GLOBAL);
  emit(w, mod, strlen(mod));
  emit1(w, '\n');
  emit(w, name, strlen(name));
  emit1(w, '\n');
  if (w->ng < 16) {
    w->g[w->ng].mod = mod;
    w->g[w->ng].name = name;
    w->g[w->ng++].memo = w->nmemo;
  }
  memoize(w, NULL);
}

static const char *const storage_class[LT_NDTYPE] = {"FloatStorage", "DoubleStorage",
                                                     "LongStorage", "BoolStorage"};

static int emit_tensor(pk *w, ltS_sval *v) {
  lt_tensor *t = v->u.ten->t;
  if ((unsigned)t->dtype >= LT_NDTYPE)
    return ltB_fail(w->ctx, "%s: tensor of unknown dtype", w->op);
  size_t es = lt_dtype_size(t->dtype);
  size_t key = w->ns;
  for (size_t i = 0; i < w->ns; i++)
    if (w->stor[i].st == t->storage && w->stor[i].dt == t->dtype) {
      key = i;
      break;
    }
  if (key == w->ns) {
    if (w->ns == w->cs) {
      size_t nc = w->cs ? w->cs * 2 : 16;
      ltS_pstorage *s = realloc(w->stor, nc * sizeof *s);
      if (!s) return ltB_fail(w->ctx, "%s: out of memory", w->op);
      w->stor = s;
      w->cs = nc;
    }
    w->stor[w->ns++] = (ltS_pstorage){t->storage, t->dtype, t->storage->nbytes / es * es};
  }
  int64_t numel = (int64_t)(w->stor[key].nbytes / es);
  int64_t hi = t->offset, n = lt_numel(t);
  for (int i = 0; i < t->ndim; i++)
    if (t->size[i] > 0) hi += (t->size[i] - 1) * t->stride[i];
  if (n > 0 && (hi >= numel || t->offset < 0))
    return ltB_fail(w->ctx, "%s: a tensor view reaches past its storage", w->op);
  char keybuf[24];
  snprintf(keybuf, sizeof keybuf, "%zu", key);
  emit_global(w, "torch._utils", "_rebuild_tensor_v2");
  emit1(w, PK_MARK);
  emit1(w, PK_MARK);
  emit_str(w, "storage", 7);
  emit_global(w, "torch", storage_class[t->dtype]);
  emit_str(w, keybuf, strlen(keybuf));
  emit_str(w, "cpu", 3);
  emit_int(w, numel);
  emit1(w, PK_TUPLE);
  emit1(w, PK_BINPERSID);
  emit_int(w, n > 0 ? t->offset : 0);
  for (int pass = 0; pass < 2; pass++) {
    const int64_t *x = pass ? t->stride : t->size;
    if (t->ndim == 0) {
      emit1(w, PK_EMPTY_TUPLE);
      continue;
    }
    if (t->ndim > 3) emit1(w, PK_MARK);
    for (int i = 0; i < t->ndim; i++) emit_int(w, x[i]);
    emit1(w, t->ndim > 3 ? PK_TUPLE : PK_TUPLE1 - 1 + t->ndim);
  }
  emit1(w, v->requires_grad ? PK_NEWTRUE : PK_NEWFALSE);
  emit_global(w, "collections", "OrderedDict");
  emit1(w, PK_EMPTY_TUPLE);
  emit1(w, PK_REDUCE);
  emit1(w, PK_TUPLE);
  emit1(w, PK_REDUCE);
  memoize(w, v);
  return 0;
}

static int emit_value(pk *w, ltS_sval *v, int depth);

/* a Python int too large for int64, as its little-endian two's complement bytes */
static void emit_bigint(pk *w, const ltS_sval *v) {
  if (v->u.s.n <= UINT8_MAX) {
    emit1(w, PK_LONG1);
    emit1(w, (int)v->u.s.n);
  } else {
    emit1(w, PK_LONG4);
    emit_le(w, v->u.s.n, 4);
  }
  emit(w, v->u.s.p, v->u.s.n);
}

/* BINFLOAT's argument is the IEEE double, big-endian */
static void emit_float(pk *w, double f) {
  uint64_t bits;
  memcpy(&bits, &f, sizeof bits);
  emit1(w, PK_BINFLOAT);
  for (int i = (int)sizeof bits - 1; i >= 0; i--) emit1(w, (int)(bits >> (8 * i)) & 0xff);
}

/* protocol 2 has no bytes: _codecs.encode(latin-1 text, 'latin1'), the text as UTF-8 */
static void emit_bytes(pk *w, ltS_sval *v) {
  emit_global(w, "_codecs", "encode");
  emit1(w, PK_BINUNICODE);
  size_t len = 0;
  for (size_t i = 0; i < v->u.s.n; i++) len += (uint8_t)v->u.s.p[i] < 0x80 ? 1 : 2;
  emit_le(w, len, 4);
  for (size_t i = 0; i < v->u.s.n; i++) {
    uint8_t c = (uint8_t)v->u.s.p[i];
    if (c < 0x80) {
      emit1(w, c);
    } else {
      emit1(w, 0xc0 | c >> 6);
      emit1(w, 0x80 | (c & 0x3f));
    }
  }
  emit_str(w, "latin1", 6);
  emit1(w, PK_TUPLE2);
  emit1(w, PK_REDUCE);
  memoize(w, v);
}

/* memoised before its items, so an item can refer back to the list */
static int emit_list(pk *w, ltS_sval *v, int depth) {
  emit1(w, PK_EMPTY_LIST);
  memoize(w, v);
  size_t n = v->u.seq.n;
  for (size_t i0 = 0; i0 < n; i0 += PK_BATCH) {
    size_t m = n - i0 < PK_BATCH ? n - i0 : PK_BATCH;
    if (m > 1) emit1(w, PK_MARK);
    for (size_t i = i0; i < i0 + m; i++)
      if (emit_value(w, v->u.seq.v[i], depth + 1)) return -1;
    emit1(w, m > 1 ? PK_APPENDS : PK_APPEND);
  }
  return 0;
}

/* A tuple exists only once its items do, so it cannot contain itself (busy catches that);
** up to three items have their own opcodes. */
static int emit_tuple(pk *w, ltS_sval *v, int depth) {
  enum { SHORT_TUPLE = 3 };
  size_t n = v->u.seq.n;
  if (n == 0) {
    emit1(w, PK_EMPTY_TUPLE);
    return 0;
  }
  if (v->busy) return ltB_fail(w->ctx, "%s: a tuple contains itself", w->op);
  v->busy = true;
  if (n > SHORT_TUPLE) emit1(w, PK_MARK);
  for (size_t i = 0; i < n; i++)
    if (emit_value(w, v->u.seq.v[i], depth + 1)) return -1;
  v->busy = false;
  emit1(w, n > SHORT_TUPLE ? PK_TUPLE : PK_TUPLE1 - 1 + (int)n);
  memoize(w, v);
  return 0;
}

/* a dict or OrderedDict, memoised before its items; a state_dict's _metadata is set on it
** through BUILD, as torch.save does */
static int emit_dict(pk *w, ltS_sval *v, int depth) {
  if (v->ordered) {
    emit_global(w, "collections", "OrderedDict");
    emit1(w, PK_EMPTY_TUPLE);
    emit1(w, PK_REDUCE);
  } else {
    emit1(w, PK_EMPTY_DICT);
  }
  memoize(w, v);
  size_t n = v->u.dict.n;
  for (size_t i0 = 0; i0 < n; i0 += PK_BATCH) {
    size_t m = n - i0 < PK_BATCH ? n - i0 : PK_BATCH;
    if (m > 1) emit1(w, PK_MARK);
    for (size_t i = i0; i < i0 + m; i++)
      if (emit_value(w, v->u.dict.k[i], depth + 1) || emit_value(w, v->u.dict.v[i], depth + 1))
        return -1;
    emit1(w, m > 1 ? PK_SETITEMS : PK_SETITEM);
  }
  if (!v->u.dict.meta) return 0;
  emit1(w, PK_EMPTY_DICT);
  memoize(w, NULL);
  emit_str(w, "_metadata", 9);
  if (emit_value(w, v->u.dict.meta, depth + 1)) return -1;
  emit1(w, PK_SETITEM);
  emit1(w, PK_BUILD);
  return 0;
}

static int emit_value(pk *w, ltS_sval *v, int depth) {
  if (depth > PK_MAX_DEPTH) return ltB_fail(w->ctx, "%s: values nested too deeply", w->op);
  if (v->memo) {
    emit_get(w, v->memo - 1);
    return 0;
  }
  switch (v->kind) {
    case LT_SV_NONE: emit1(w, PK_NONE); return 0;
    case LT_SV_BOOL: emit1(w, v->u.b ? PK_NEWTRUE : PK_NEWFALSE); return 0;
    case LT_SV_INT: emit_int(w, v->u.i); return 0;
    case LT_SV_BIGINT: emit_bigint(w, v); return 0;
    case LT_SV_FLOAT: emit_float(w, v->u.f); return 0;
    case LT_SV_STR: emit_str(w, v->u.s.p, v->u.s.n); return 0;
    case LT_SV_BYTES: emit_bytes(w, v); return 0;
    case LT_SV_LIST: return emit_list(w, v, depth);
    case LT_SV_TUPLE: return emit_tuple(w, v, depth);
    case LT_SV_DICT: return emit_dict(w, v, depth);
    case LT_SV_TENSOR: return emit_tensor(w, v);
    default:
      return ltB_fail(w->ctx, "%s: cannot pickle a %s", w->op, ltS_pickle_kind_name(v));
  }
}

int ltS_pickle(lt_ctx *ctx, const char *op, ltS_sval *root, uint8_t **out, size_t *n,
               ltS_pstorage **storages, size_t *nstorages) {
  pk w = {.ctx = ctx, .op = op};
  emit1(&w, PK_PROTO);
  emit1(&w, PK_PROTOCOL);
  int rc = emit_value(&w, root, 0);
  emit1(&w, PK_STOP);
  if (rc == 0 && w.oom) rc = ltB_fail(ctx, "%s: out of memory", op);
  if (rc) {
    free(w.buf);
    free(w.stor);
    return -1;
  }
  *out = w.buf;
  *n = w.n;
  *storages = w.stor;
  *nstorages = w.ns;
  return 0;
}
