/*
** unpickle.c -- a restricted unpickler for torch.save's data.pkl (the pickler is pickle.c).
**
** The unpickler is a stack machine over the data-only opcodes of protocols 2-4. It never
** calls anything: GLOBAL resolves names against a fixed table (tensor rebuild functions,
** storage classes, dtypes, OrderedDict, ...), and REDUCE/NEWOBJ/BUILD interpret those few
** callables directly. Any other global or opcode is an error that names it. Objects are nodes
** of an ltS_sdoc arena; the memo and the stack hold pointers, so shared and cyclic objects
** (which pickle can express) cost no copies and free with the arena.
*/
#include <stdarg.h>
#include <stdlib.h>

#include "serial.h"
#include "pickle.h"

/* ============================================================ allowed globals */

enum {
  G_ODICT = 1, G_RT, G_RT2, G_RT3, G_RPARAM, G_RPARAM_STATE, G_RFROMTYPE, G_PARAM, G_TENSOR,
  G_SIZE, G_DEVICE, G_CODECS, G_SET, G_FROZENSET, G_USTORAGE, G_STORAGE0 = 100
};

static const struct { const char *mod, *name; int code; } globals[] = {
  {"collections", "OrderedDict", G_ODICT},
  {"torch._utils", "_rebuild_tensor", G_RT},
  {"torch._utils", "_rebuild_tensor_v2", G_RT2},
  {"torch._utils", "_rebuild_tensor_v3", G_RT3},
  {"torch._utils", "_rebuild_parameter", G_RPARAM},
  {"torch._utils", "_rebuild_parameter_with_state", G_RPARAM_STATE},
  {"torch._tensor", "_rebuild_from_type_v2", G_RFROMTYPE},
  {"torch.nn.parameter", "Parameter", G_PARAM},
  {"torch", "Tensor", G_TENSOR},
  {"torch._tensor", "Tensor", G_TENSOR},
  {"torch", "Size", G_SIZE},
  {"torch", "device", G_DEVICE},
  {"_codecs", "encode", G_CODECS},
  {"builtins", "set", G_SET},
  {"__builtin__", "set", G_SET},
  {"builtins", "frozenset", G_FROZENSET},
  {"__builtin__", "frozenset", G_FROZENSET},
  {"torch", "UntypedStorage", G_USTORAGE},
  {"torch", "FloatStorage", G_STORAGE0 + LT_F_F32},
  {"torch", "DoubleStorage", G_STORAGE0 + LT_F_F64},
  {"torch", "HalfStorage", G_STORAGE0 + LT_F_F16},
  {"torch", "BFloat16Storage", G_STORAGE0 + LT_F_BF16},
  {"torch", "LongStorage", G_STORAGE0 + LT_F_I64},
  {"torch", "IntStorage", G_STORAGE0 + LT_F_I32},
  {"torch", "ShortStorage", G_STORAGE0 + LT_F_I16},
  {"torch", "CharStorage", G_STORAGE0 + LT_F_I8},
  {"torch", "ByteStorage", G_STORAGE0 + LT_F_U8},
  {"torch", "BoolStorage", G_STORAGE0 + LT_F_BOOL},
};

/* torch.<dtype> globals (pickled dtypes, used by _rebuild_tensor_v3) */
static const struct { const char *name; ltS_fdtype f; } dtype_globals[] = {
  {"float32", LT_F_F32}, {"float", LT_F_F32},   {"float64", LT_F_F64}, {"double", LT_F_F64},
  {"float16", LT_F_F16}, {"half", LT_F_F16},    {"bfloat16", LT_F_BF16}, {"int64", LT_F_I64},
  {"long", LT_F_I64},    {"int32", LT_F_I32},   {"int", LT_F_I32},     {"int16", LT_F_I16},
  {"short", LT_F_I16},   {"int8", LT_F_I8},     {"uint8", LT_F_U8},    {"bool", LT_F_BOOL},
  {"uint16", LT_F_U16},  {"uint32", LT_F_U32},  {"uint64", LT_F_U64},
};

/* ============================================================ unpickler state */

typedef struct up {
  lt_ctx *ctx;
  const char *op, *what;
  ltS_sdoc *d;
  const uint8_t *base, *p, *end;
  ltS_sval **st;
  size_t sp, scap;
  size_t *marks;
  size_t nm, mcap;
  ltS_sval **memo;
  size_t memocap, memolen;
  bool legacy;
  bool truncated;
  uint64_t wanted;           /* when truncated: bytes from base the pickle needs at least */
} up;

static int fail(up *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(up *u, const char *fmt, ...) {
  char msg[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ltB_fail(u->ctx, "%s: %s (%s, byte %zu)", u->op, msg, u->what,
                  (size_t)(u->p - u->base));
}

static int oom(up *u) { return fail(u, "out of memory"); }

const char *ltS_pickle_kind_name(const ltS_sval *v) {
  static const char *const names[] = {"None",   "bool",  "int",    "int",     "float",
                                      "str",    "bytes", "list",   "tuple",   "dict",
                                      "tensor", "storage", "global", "dtype", "dict"};
  return names[v->kind];
}

static int push(up *u, ltS_sval *v) {
  if (!v) return oom(u);
  if (u->sp == u->scap) {
    size_t nc = u->scap ? u->scap * 2 : 64;
    ltS_sval **s = realloc(u->st, nc * sizeof *s);
    if (!s) return oom(u);
    u->st = s;
    u->scap = nc;
  }
  u->st[u->sp++] = v;
  return 0;
}

static int pop(up *u, ltS_sval **v) {
  size_t floor = u->nm ? u->marks[u->nm - 1] : 0;
  if (u->sp <= floor) return fail(u, "stack underflow");
  *v = u->st[--u->sp];
  return 0;
}

static int top(up *u, ltS_sval **v) {
  size_t floor = u->nm ? u->marks[u->nm - 1] : 0;
  if (u->sp <= floor) return fail(u, "stack underflow");
  *v = u->st[u->sp - 1];
  return 0;
}

/* Pops the topmost mark; *k is the stack position the marked items start at. */
static int pop_mark(up *u, size_t *k) {
  if (!u->nm) return fail(u, "missing MARK");
  *k = u->marks[--u->nm];
  return 0;
}

static int need(up *u, uint64_t n) {
  if ((uint64_t)(u->end - u->p) < n) {
    uint64_t at = (uint64_t)(u->p - u->base);
    u->truncated = true;
    u->wanted = n > UINT64_MAX - at ? UINT64_MAX : at + n;
    return fail(u, "pickle is truncated");
  }
  return 0;
}

static uint64_t le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static int memo_put(up *u, uint64_t idx) {
  ltS_sval *v = NULL;
  if (top(u, &v)) return -1;
  if (idx > (uint64_t)(u->end - u->base) + 64) return fail(u, "memo index %llu is out of range",
                                                           (unsigned long long)idx);
  if (idx >= u->memocap) {
    size_t nc = u->memocap ? u->memocap : 64;
    while (nc <= idx) nc *= 2;
    ltS_sval **m = realloc(u->memo, nc * sizeof *m);
    if (!m) return oom(u);
    memset(m + u->memocap, 0, (nc - u->memocap) * sizeof *m);
    u->memo = m;
    u->memocap = nc;
  }
  if (!u->memo[idx]) u->memolen++;
  u->memo[idx] = v;
  return 0;
}

static int memo_get(up *u, uint64_t idx) {
  if (idx >= u->memocap || !u->memo[idx])
    return fail(u, "memo index %llu was never stored", (unsigned long long)idx);
  return push(u, u->memo[idx]);
}

/* ============================================================ globals and calls */

static int find_global(up *u, const char *mod, size_t ml, const char *name, size_t nl) {
  ltS_sval *g;
  for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
    if (strlen(globals[i].mod) == ml && memcmp(globals[i].mod, mod, ml) == 0 &&
        strlen(globals[i].name) == nl && memcmp(globals[i].name, name, nl) == 0) {
      char full[128];
      snprintf(full, sizeof full, "%s.%s", globals[i].mod, globals[i].name);
      g = ltS_sv_str(u->d, LT_SV_GLOBAL, full, strlen(full));
      if (!g) return oom(u);
      g->code = globals[i].code;
      return push(u, g);
    }
  if (ml == 5 && memcmp(mod, "torch", 5) == 0)
    for (size_t i = 0; i < sizeof dtype_globals / sizeof dtype_globals[0]; i++)
      if (strlen(dtype_globals[i].name) == nl && memcmp(dtype_globals[i].name, name, nl) == 0) {
        g = ltS_sv_new(u->d, LT_SV_DTYPE);
        if (!g) return oom(u);
        g->code = dtype_globals[i].f;
        return push(u, g);
      }
  int ml_ = ml > 100 ? 100 : (int)ml, nl_ = nl > 100 ? 100 : (int)nl;
  if (ml == 5 && memcmp(mod, "torch", 5) == 0 && nl > 7 && memcmp(name + nl - 7, "Storage", 7) == 0)
    return fail(u, "storage type torch.%.*s is not supported (supported: float32, float64, "
                "float16, bfloat16, int64, int32, int16, int8, uint8, bool)", nl_, name);
  bool module = (ml >= 16 && memcmp(mod, "torch.nn.modules", 16) == 0) ||
                (ml == 8 && memcmp(mod, "__main__", 8) == 0);
  return fail(u, "pickle refers to forbidden global '%.*s.%.*s' (only tensors, storages, dicts, "
              "lists, tuples and scalars can be loaded; loading never runs code)%s", ml_, mod,
              nl_, name,
              module ? "; a whole pickled model cannot be loaded: save its state_dict() instead"
                     : "");
}

static bool is_int(const ltS_sval *v) { return v->kind == LT_SV_INT; }

static int int_tuple(up *u, const ltS_sval *v, const char *what, int *n, int64_t *out) {
  if (v->kind != LT_SV_TUPLE && v->kind != LT_SV_LIST)
    return fail(u, "tensor %s must be a tuple, got %s", what, ltS_pickle_kind_name(v));
  if (v->u.seq.n > LT_MAX_DIMS)
    return fail(u, "tensor has %zu dimensions, Lantern supports at most %d", v->u.seq.n,
                LT_MAX_DIMS);
  *n = (int)v->u.seq.n;
  for (int i = 0; i < *n; i++) {
    if (!is_int(v->u.seq.v[i])) return fail(u, "tensor %s holds a %s", what,
                                           ltS_pickle_kind_name(v->u.seq.v[i]));
    out[i] = v->u.seq.v[i]->u.i;
  }
  return 0;
}

/* _rebuild_tensor*(storage, offset, size, stride, ...) -> a tensor node (wrapped later). */
static int make_tensor(up *u, ltS_sval *const *a, bool rg, ltS_sval **out) {
  if (a[0]->kind != LT_SV_STORAGE)
    return fail(u, "tensor rebuild expects a storage, got %s", ltS_pickle_kind_name(a[0]));
  if (!is_int(a[1]))
    return fail(u, "tensor offset must be an int, got %s", ltS_pickle_kind_name(a[1]));
  ltS_sval *v = ltS_sv_new(u->d, LT_SV_TENSOR);
  ltS_stensor *t = v ? ltS_sdoc_alloc(u->d, sizeof *t) : NULL;
  if (!t || ltS_sdoc_add_tensor(u->d, v)) return oom(u);
  v->u.ten = t;
  v->requires_grad = rg;
  t->storage = a[0];
  t->offset = a[1]->u.i;
  int ns, nt;
  int64_t size[LT_MAX_DIMS], stride[LT_MAX_DIMS];
  if (int_tuple(u, a[2], "size", &ns, size) || int_tuple(u, a[3], "stride", &nt, stride))
    return -1;
  if (ns != nt) return fail(u, "tensor has %d sizes but %d strides", ns, nt);
  if (ltS_stensor_dims(u->d, t, ns)) return oom(u);
  memcpy(t->size, size, (size_t)ns * sizeof *size);
  memcpy(t->stride, stride, (size_t)ns * sizeof *stride);
  *out = v;
  return 0;
}

static int call(up *u, ltS_sval *fn, ltS_sval *args, ltS_sval **out);

static int call_checked(up *u, ltS_sval *fn, ltS_sval *args, ltS_sval **out) {
  if (fn->kind != LT_SV_GLOBAL)
    return fail(u, "cannot call a %s (REDUCE needs one of the allowed globals)",
                ltS_pickle_kind_name(fn));
  if (args->kind != LT_SV_TUPLE)
    return fail(u, "arguments of %s must be a tuple, got %s", fn->u.s.p,
                ltS_pickle_kind_name(args));
  return call(u, fn, args, out);
}

/* collections.OrderedDict(): empty, or from a list of pairs. */
static int call_odict(up *u, size_t n, ltS_sval *const *a, ltS_sval **out) {
  ltS_sval *d = ltS_sv_new(u->d, LT_SV_DICT);
  if (!d) return oom(u);
  d->ordered = true;
  if (n == 1 && (a[0]->kind == LT_SV_LIST || a[0]->kind == LT_SV_TUPLE)) {
    for (size_t i = 0; i < a[0]->u.seq.n; i++) {
      ltS_sval *pr = a[0]->u.seq.v[i];
      if ((pr->kind != LT_SV_TUPLE && pr->kind != LT_SV_LIST) || pr->u.seq.n != 2)
        return fail(u, "OrderedDict items must be pairs");
      if (ltS_sv_set(u->d, d, pr->u.seq.v[0], pr->u.seq.v[1])) return oom(u);
    }
  } else if (n != 0) {
    return fail(u, "OrderedDict called with %zu arguments", n);
  }
  *out = d;
  return 0;
}

/* torch._utils._rebuild_tensor_v3: a typed view on a storage, which an untyped one takes the
** element type of. */
static int call_rebuild_v3(up *u, const char *name, size_t n, ltS_sval *const *a,
                           ltS_sval **out) {
  if (n != 7 && n != 8) return fail(u, "%s takes 7 or 8 arguments, got %zu", name, n);
  if (a[6]->kind != LT_SV_DTYPE) return fail(u, "%s: argument 7 must be a dtype", name);
  if (a[4]->kind != LT_SV_BOOL) return fail(u, "requires_grad must be a bool");
  if (a[0]->kind != LT_SV_STORAGE) return fail(u, "%s expects a storage", name);
  ltS_sstorage *s = a[0]->u.stor;
  ltS_fdtype f = (ltS_fdtype)a[6]->code;
  if (s->untyped) {
    size_t fs = ltS_fdtype_size(f);
    if (s->numel % (int64_t)fs)
      return fail(u, "storage '%s' of %lld bytes cannot hold %s elements", s->key,
                  (long long)s->numel, ltS_fdtype_name(f));
    s->numel /= (int64_t)fs;
    s->fdt = f;
    s->untyped = false;
  } else if (s->fdt != f) {
    return fail(u, "storage '%s' is viewed as both %s and %s", s->key,
                ltS_fdtype_name(s->fdt), ltS_fdtype_name(f));
  }
  return make_tensor(u, a, a[4]->u.b, out);
}

/* _codecs.encode(str, encoding): how protocol 2 pickles bytes. */
static int call_codecs(up *u, size_t n, ltS_sval *const *a, ltS_sval **out) {
  if (n != 2 || a[0]->kind != LT_SV_STR || a[1]->kind != LT_SV_STR)
    return fail(u, "_codecs.encode expects (str, encoding)");
  const char *enc = a[1]->u.s.p;
  const uint8_t *s = (const uint8_t *)a[0]->u.s.p;
  size_t sn = a[0]->u.s.n;
  ltS_sval *b = ltS_sv_str(u->d, LT_SV_BYTES, (const char *)s, sn);
  if (!b) return oom(u);
  if (strcmp(enc, "latin1") == 0 || strcmp(enc, "latin-1") == 0) {
    size_t k = 0;   /* UTF-8 code points below 256 -> bytes */
    for (size_t i = 0; i < sn;) {
      if (s[i] < 0x80) {
        b->u.s.p[k++] = (char)s[i++];
      } else if ((s[i] & 0xe0) == 0xc0 && i + 1 < sn && s[i] <= 0xc3) {
        b->u.s.p[k++] = (char)(((s[i] & 3) << 6) | (s[i + 1] & 0x3f));
        i += 2;
      } else {
        return fail(u, "_codecs.encode: text is not latin-1");
      }
    }
    b->u.s.p[k] = 0;
    b->u.s.n = k;
  } else if (strcmp(enc, "utf-8") && strcmp(enc, "utf8") && strcmp(enc, "ascii")) {
    return fail(u, "_codecs.encode: unsupported encoding '%.40s'", enc);
  }
  *out = b;
  return 0;
}

/* set/frozenset: read as lists. */
static int call_set(up *u, const char *name, size_t n, ltS_sval *const *a, ltS_sval **out) {
  ltS_sval *l = ltS_sv_new(u->d, LT_SV_LIST);
  if (!l) return oom(u);
  if (n == 1 && (a[0]->kind == LT_SV_LIST || a[0]->kind == LT_SV_TUPLE)) {
    for (size_t i = 0; i < a[0]->u.seq.n; i++)
      if (ltS_sv_push(u->d, l, a[0]->u.seq.v[i])) return oom(u);
  } else if (n != 0) {
    return fail(u, "%s expects at most one list", name);
  }
  *out = l;
  return 0;
}

static int call(up *u, ltS_sval *fn, ltS_sval *args, ltS_sval **out) {
  size_t n = args->u.seq.n;
  ltS_sval *const *a = args->u.seq.v;
  const char *name = fn->u.s.p;
  switch (fn->code) {
    case G_ODICT:
      return call_odict(u, n, a, out);
    case G_RT:
    case G_RT2: {
      bool v2 = fn->code == G_RT2;
      if (v2 ? n != 6 && n != 7 : n != 4)
        return fail(u, "%s takes %s arguments, got %zu", name, v2 ? "6 or 7" : "4", n);
      if (v2 && a[4]->kind != LT_SV_BOOL)
        return fail(u, "requires_grad must be a bool, got %s", ltS_pickle_kind_name(a[4]));
      if (a[0]->kind == LT_SV_STORAGE && a[0]->u.stor->untyped)
        return fail(u, "%s got an untyped storage", name);
      return make_tensor(u, a, v2 && a[4]->u.b, out);
    }
    case G_RT3:
      return call_rebuild_v3(u, name, n, a, out);
    case G_RPARAM:
    case G_RPARAM_STATE:
      if (n != (fn->code == G_RPARAM ? 3u : 4u) || a[0]->kind != LT_SV_TENSOR ||
          a[1]->kind != LT_SV_BOOL)
        return fail(u, "%s expects (tensor, requires_grad, hooks%s)", name,
                    fn->code == G_RPARAM ? "" : ", state");
      a[0]->requires_grad = a[1]->u.b;
      *out = a[0];
      return 0;
    case G_PARAM:
      if (n < 1 || n > 2 || a[0]->kind != LT_SV_TENSOR || (n == 2 && a[1]->kind != LT_SV_BOOL))
        return fail(u, "Parameter expects (tensor[, requires_grad])");
      a[0]->requires_grad = n == 2 ? a[1]->u.b : true;
      *out = a[0];
      return 0;
    case G_RFROMTYPE:
      if (n != 4 || a[1]->kind != LT_SV_GLOBAL ||
          (a[1]->code != G_TENSOR && a[1]->code != G_PARAM))
        return fail(u, "%s expects (function, torch.Tensor or Parameter, args, state)", name);
      if (call_checked(u, a[0], a[2], out)) return -1;
      if (a[1]->code == G_PARAM && (*out)->kind == LT_SV_TENSOR) (*out)->requires_grad = true;
      return 0;
    case G_SIZE:
      if (n != 1 || (a[0]->kind != LT_SV_TUPLE && a[0]->kind != LT_SV_LIST))
        return fail(u, "torch.Size expects one tuple");
      *out = a[0];
      return 0;
    case G_DEVICE:
      if (n < 1 || n > 2 || a[0]->kind != LT_SV_STR) return fail(u, "torch.device expects a str");
      *out = a[0];
      return 0;
    case G_CODECS:
      return call_codecs(u, n, a, out);
    case G_SET:
    case G_FROZENSET:
      return call_set(u, name, n, a, out);
    default:
      return fail(u, "global %s cannot be called", name);
  }
}

/* ============================================================ persistent ids */

static int persistent_load(up *u, ltS_sval *pid, ltS_sval **out) {
  size_t want = u->legacy ? 6 : 5;
  if (pid->kind != LT_SV_TUPLE || pid->u.seq.n != want)
    return fail(u, "persistent id must be a %zu-tuple ('storage', type, key, location, numel%s)",
                want, u->legacy ? ", view" : "");
  ltS_sval *const *a = pid->u.seq.v;
  if (a[0]->kind != LT_SV_STR || strcmp(a[0]->u.s.p, "storage") != 0)
    return fail(u, "persistent id is not a storage");
  if (a[1]->kind != LT_SV_GLOBAL || (a[1]->code < G_STORAGE0 && a[1]->code != G_USTORAGE))
    return fail(u, "persistent id names %s, not a storage type",
                a[1]->kind == LT_SV_GLOBAL ? a[1]->u.s.p : ltS_pickle_kind_name(a[1]));
  if (a[2]->kind != LT_SV_STR) return fail(u, "storage key must be a str");
  if (a[3]->kind != LT_SV_STR) return fail(u, "storage location must be a str");
  if (!is_int(a[4]) || a[4]->u.i < 0) return fail(u, "storage size must be an int >= 0");
  if (u->legacy && a[5]->kind != LT_SV_NONE)
    return fail(u, "storage views of the legacy format are not supported");
  bool untyped = a[1]->code == G_USTORAGE;
  ltS_fdtype f = untyped ? LT_F_U8 : (ltS_fdtype)(a[1]->code - G_STORAGE0);
  bool created;
  ltS_sval *s = ltS_sdoc_storage(u->d, a[2]->u.s.p, a[2]->u.s.n, &created);
  if (!s) return oom(u);
  ltS_sstorage *st = s->u.stor;
  if (created) {
    st->fdt = f;
    st->untyped = untyped;
    st->numel = a[4]->u.i;
  } else {
    bool same;
    if (untyped) {   /* bytes; the storage may have been typed by a view meanwhile */
      int64_t bytes;
      same = !__builtin_mul_overflow(st->numel,
                                     (int64_t)(st->untyped ? 1 : ltS_fdtype_size(st->fdt)),
                                     &bytes) && bytes == a[4]->u.i;
    } else {
      same = !st->untyped && st->fdt == f && st->numel == a[4]->u.i;
    }
    if (!same)
      return fail(u, "storage '%s' is declared twice with different types or sizes", st->key);
  }
  *out = s;
  return 0;
}

/* ============================================================ the machine */

static int seq_from(up *u, ltS_skind kind, size_t k, ltS_sval **out) {
  ltS_sval *t = ltS_sv_new(u->d, kind);
  if (!t) return oom(u);
  size_t n = u->sp - k;
  if (n) {
    t->u.seq.v = ltS_sdoc_alloc(u->d, n * sizeof(ltS_sval *));
    if (!t->u.seq.v) return oom(u);
    memcpy(t->u.seq.v, u->st + k, n * sizeof(ltS_sval *));
  }
  t->u.seq.n = t->u.seq.cap = n;
  u->sp = k;
  *out = t;
  return 0;
}

static int set_pairs(up *u, ltS_sval *d, size_t k) {
  if (d->kind != LT_SV_DICT) return fail(u, "SETITEM(S) on a %s", ltS_pickle_kind_name(d));
  if ((u->sp - k) % 2) return fail(u, "SETITEMS with an odd number of items");
  for (size_t i = k; i < u->sp; i += 2)
    if (ltS_sv_set(u->d, d, u->st[i], u->st[i + 1])) return oom(u);
  u->sp = k;
  return 0;
}

static int append_items(up *u, ltS_sval *l, size_t k) {
  if (l->kind != LT_SV_LIST) return fail(u, "APPEND(S)/ADDITEMS on a %s", ltS_pickle_kind_name(l));
  for (size_t i = k; i < u->sp; i++)
    if (ltS_sv_push(u->d, l, u->st[i])) return oom(u);
  u->sp = k;
  return 0;
}

static int build(up *u, ltS_sval *obj, ltS_sval *state) {
  if (obj->kind == LT_SV_TENSOR) return 0;      /* Parameter/Tensor python attributes: ignored */
  if (obj->kind != LT_SV_DICT)
    return fail(u, "BUILD on a %s is not allowed", ltS_pickle_kind_name(obj));
  ltS_sval *parts[2] = {state, NULL};
  if (state->kind == LT_SV_TUPLE && state->u.seq.n == 2) {
    parts[0] = state->u.seq.v[0];
    parts[1] = state->u.seq.v[1];
  }
  for (int j = 0; j < 2; j++) {
    ltS_sval *s = parts[j];
    if (!s || s->kind == LT_SV_NONE) continue;
    if (s->kind != LT_SV_DICT)
      return fail(u, "BUILD state must be a dict, got %s", ltS_pickle_kind_name(s));
    for (size_t i = 0; i < s->u.dict.n; i++) {
      ltS_sval *k = s->u.dict.k[i];
      if (k->kind == LT_SV_STR && strcmp(k->u.s.p, "_metadata") == 0)
        obj->u.dict.meta = s->u.dict.v[i];
    }
  }
  return 0;
}

static const char *opname(int op) {
  switch (op) {
    case PK_INST: return "INST";
    case PK_OBJ: return "OBJ";
    case PK_PERSID: return "PERSID";
    case PK_EXT1: return "EXT1";
    case PK_EXT2: return "EXT2";
    case PK_EXT4: return "EXT4";
    case PK_GET: return "GET";
    case PK_PUT: return "PUT";
    case PK_STRING: return "STRING";
    case PK_UNICODE: return "UNICODE";
    case PK_FLOAT: return "FLOAT";
    case PK_INT: return "INT";
    case PK_LONG: return "LONG";
    case PK_NEWOBJ_EX: return "NEWOBJ_EX";
    case PK_BYTEARRAY8: return "BYTEARRAY8";
    case PK_NEXT_BUFFER: return "NEXT_BUFFER";
    case PK_READONLY_BUFFER: return "READONLY_BUFFER";
    default: return "unknown opcode";
  }
}

static int str_op(up *u, ltS_skind kind, size_t lenbytes, bool is_signed) {
  if (need(u, lenbytes)) return -1;
  uint64_t n = le(u->p, (int)lenbytes);
  if (is_signed && (n & 0x80000000u)) return fail(u, "negative string length");
  u->p += lenbytes;
  if (need(u, n)) return -1;
  ltS_sval *v = ltS_sv_str(u->d, kind, (const char *)u->p, (size_t)n);
  u->p += n;
  return push(u, v);
}

static int long_op(up *u, size_t lenbytes) {
  if (need(u, lenbytes)) return -1;
  uint64_t n = le(u->p, (int)lenbytes);
  u->p += lenbytes;
  if (lenbytes == 4 && (n & 0x80000000u)) return fail(u, "negative LONG4 length");
  if (need(u, n)) return -1;
  const uint8_t *b = u->p;
  u->p += n;
  if (n <= 8) {
    uint64_t v = n ? le(b, (int)n) : 0;
    if (n && n < 8 && (b[n - 1] & 0x80)) v |= ~(uint64_t)0 << (8 * n);   /* sign-extend */
    return push(u, ltS_sv_int(u->d, (int64_t)v));
  }
  return push(u, ltS_sv_str(u->d, LT_SV_BIGINT, (const char *)b, (size_t)n));
}

/* An op_* function's answer for an opcode outside its family. */
enum { NOT_MINE = 1 };

/* Protocol, framing, the mark and value stacks, and the memo. */
static int op_stack(up *u, int op) {
  ltS_sval *a = NULL;
  size_t k = 0;
  switch (op) {
    case PK_PROTO:
      if (need(u, 1)) return -1;
      if (*u->p > 5) return fail(u, "unsupported pickle protocol %d", *u->p);
      u->p++;
      break;
    case PK_FRAME:   /* framing is only a read-ahead hint */
      if (need(u, 8)) return -1;
      u->p += 8;
      break;
    case PK_MARK:
      if (u->nm == u->mcap) {
        size_t nc = u->mcap ? u->mcap * 2 : 32;
        size_t *m = realloc(u->marks, nc * sizeof *m);
        if (!m) return oom(u);
        u->marks = m;
        u->mcap = nc;
      }
      u->marks[u->nm++] = u->sp;
      break;
    case PK_POP:
      if (u->nm && u->marks[u->nm - 1] == u->sp) {
        u->nm--;   /* popping a mark */
      } else if (pop(u, &a)) {
        return -1;
      }
      break;
    case PK_POP_MARK:
      if (pop_mark(u, &k)) return -1;
      u->sp = k;
      break;
    case PK_DUP:
      if (top(u, &a) || push(u, a)) return -1;
      break;
    case PK_BINPUT:
      if (need(u, 1) || memo_put(u, *u->p)) return -1;
      u->p += 1;
      break;
    case PK_LONG_BINPUT:
      if (need(u, 4) || memo_put(u, le(u->p, 4))) return -1;
      u->p += 4;
      break;
    case PK_MEMOIZE:   /* the next slot is the number of entries so far */
      if (memo_put(u, u->memolen)) return -1;
      break;
    case PK_BINGET:
      if (need(u, 1) || memo_get(u, *u->p)) return -1;
      u->p += 1;
      break;
    case PK_LONG_BINGET:
      if (need(u, 4) || memo_get(u, le(u->p, 4))) return -1;
      u->p += 4;
      break;
    default:
      return NOT_MINE;
  }
  return 0;
}

/* Constants: None, bools, ints, floats, strings and bytes. */
static int op_scalar(up *u, int op) {
  switch (op) {
    case PK_NONE: if (push(u, ltS_sv_new(u->d, LT_SV_NONE))) return -1; break;
    case PK_NEWTRUE: if (push(u, ltS_sv_bool(u->d, true))) return -1; break;
    case PK_NEWFALSE: if (push(u, ltS_sv_bool(u->d, false))) return -1; break;
    case PK_BININT1:
      if (need(u, 1) || push(u, ltS_sv_int(u->d, *u->p))) return -1;
      u->p += 1;
      break;
    case PK_BININT2:
      if (need(u, 2) || push(u, ltS_sv_int(u->d, (int64_t)le(u->p, 2)))) return -1;
      u->p += 2;
      break;
    case PK_BININT:
      if (need(u, 4) || push(u, ltS_sv_int(u->d, (int32_t)(uint32_t)le(u->p, 4)))) return -1;
      u->p += 4;
      break;
    case PK_LONG1: if (long_op(u, 1)) return -1; break;
    case PK_LONG4: if (long_op(u, 4)) return -1; break;
    case PK_BINFLOAT: {  /* big-endian double */
      if (need(u, 8)) return -1;
      uint64_t bits = 0;
      for (int i = 0; i < 8; i++) bits = bits << 8 | u->p[i];
      double d;
      memcpy(&d, &bits, 8);
      u->p += 8;
      if (push(u, ltS_sv_float(u->d, d))) return -1;
      break;
    }
    case PK_BINUNICODE: if (str_op(u, LT_SV_STR, 4, false)) return -1; break;
    case PK_SHORT_BINUNICODE: if (str_op(u, LT_SV_STR, 1, false)) return -1; break;
    case PK_BINUNICODE8: if (str_op(u, LT_SV_STR, 8, false)) return -1; break;
    case PK_SHORT_BINSTRING: if (str_op(u, LT_SV_STR, 1, false)) return -1; break;
    case PK_BINSTRING: if (str_op(u, LT_SV_STR, 4, true)) return -1; break;
    case PK_BINBYTES: if (str_op(u, LT_SV_BYTES, 4, false)) return -1; break;
    case PK_SHORT_BINBYTES: if (str_op(u, LT_SV_BYTES, 1, false)) return -1; break;
    case PK_BINBYTES8: if (str_op(u, LT_SV_BYTES, 8, false)) return -1; break;
    default:
      return NOT_MINE;
  }
  return 0;
}

/* Tuples, lists, dicts and sets, and the opcodes that fill them. */
static int op_container(up *u, int op) {
  ltS_sval *a = NULL, *b = NULL, *v = NULL;
  size_t k = 0;
  switch (op) {
    case PK_EMPTY_TUPLE: if (push(u, ltS_sv_new(u->d, LT_SV_TUPLE))) return -1; break;
    case PK_EMPTY_LIST: if (push(u, ltS_sv_new(u->d, LT_SV_LIST))) return -1; break;
    case PK_EMPTY_SET: if (push(u, ltS_sv_new(u->d, LT_SV_LIST))) return -1; break;   /* a set reads as a list */
    case PK_EMPTY_DICT: if (push(u, ltS_sv_new(u->d, LT_SV_DICT))) return -1; break;
    case PK_TUPLE:
    case PK_LIST:
    case PK_FROZENSET:
      if (pop_mark(u, &k) || seq_from(u, op == PK_TUPLE ? LT_SV_TUPLE : LT_SV_LIST, k, &v) ||
          push(u, v))
        return -1;
      break;
    case PK_TUPLE1:
    case PK_TUPLE2:
    case PK_TUPLE3: {
      size_t n = (size_t)(op - PK_TUPLE1 + 1), floor = u->nm ? u->marks[u->nm - 1] : 0;
      if (u->sp < floor + n) return fail(u, "stack underflow");
      if (seq_from(u, LT_SV_TUPLE, u->sp - n, &v) || push(u, v)) return -1;
      break;
    }
    case PK_DICT:    /* from marked pairs */
      if (pop_mark(u, &k)) return -1;
      v = ltS_sv_new(u->d, LT_SV_DICT);
      if (!v) return oom(u);
      if (set_pairs(u, v, k) || push(u, v)) return -1;
      break;
    case PK_APPEND:
      if (pop(u, &a) || top(u, &b)) return -1;
      if (b->kind != LT_SV_LIST) return fail(u, "APPEND on a %s", ltS_pickle_kind_name(b));
      if (ltS_sv_push(u->d, b, a)) return oom(u);
      break;
    case PK_APPENDS:
    case PK_ADDITEMS:
      if (pop_mark(u, &k)) return -1;
      if (k == 0 || (u->nm && k <= u->marks[u->nm - 1]))
        return fail(u, "APPENDS without a list");
      if (append_items(u, u->st[k - 1], k)) return -1;
      break;
    case PK_SETITEM:
      if (pop(u, &b) || pop(u, &a) || top(u, &v)) return -1;
      if (v->kind != LT_SV_DICT) return fail(u, "SETITEM on a %s", ltS_pickle_kind_name(v));
      if (ltS_sv_set(u->d, v, a, b)) return oom(u);
      break;
    case PK_SETITEMS:
      if (pop_mark(u, &k)) return -1;
      if (k == 0 || (u->nm && k <= u->marks[u->nm - 1]))
        return fail(u, "SETITEMS without a dict");
      if (set_pairs(u, u->st[k - 1], k)) return -1;
      break;
    default:
      return NOT_MINE;
  }
  return 0;
}

/* Globals, the calls of allowed ones, BUILD and persistent ids. */
static int op_object(up *u, int op) {
  ltS_sval *a = NULL, *b = NULL, *v = NULL;
  switch (op) {
    case PK_GLOBAL: {  /* module\nname\n */
      const uint8_t *m = u->p, *nl1 = memchr(m, '\n', (size_t)(u->end - m));
      if (!nl1) return need(u, (size_t)(u->end - u->p) + 1);
      const uint8_t *nm = nl1 + 1, *nl2 = memchr(nm, '\n', (size_t)(u->end - nm));
      if (!nl2) return need(u, (size_t)(u->end - u->p) + 1);
      u->p = nl2 + 1;
      if (find_global(u, (const char *)m, (size_t)(nl1 - m), (const char *)nm,
                      (size_t)(nl2 - nm)))
        return -1;
      break;
    }
    case PK_STACK_GLOBAL:
      if (pop(u, &b) || pop(u, &a)) return -1;
      if (a->kind != LT_SV_STR || b->kind != LT_SV_STR)
        return fail(u, "STACK_GLOBAL needs two strings");
      if (find_global(u, a->u.s.p, a->u.s.n, b->u.s.p, b->u.s.n)) return -1;
      break;
    case PK_REDUCE:
    case PK_NEWOBJ:
      if (pop(u, &b) || pop(u, &a) || call_checked(u, a, b, &v) || push(u, v)) return -1;
      break;
    case PK_BUILD:
      if (pop(u, &b) || top(u, &a) || build(u, a, b)) return -1;
      break;
    case PK_BINPERSID:
      if (pop(u, &a) || persistent_load(u, a, &v) || push(u, v)) return -1;
      break;
    default:
      return NOT_MINE;
  }
  return 0;
}
static int run(up *u, ltS_sval **result) {
  for (;;) {
    if (need(u, 1)) return -1;
    int op = *u->p++;
    if (op == PK_STOP) return pop(u, result);
    int rc = op_stack(u, op);
    if (rc == NOT_MINE) rc = op_scalar(u, op);
    if (rc == NOT_MINE) rc = op_container(u, op);
    if (rc == NOT_MINE) rc = op_object(u, op);
    if (rc == NOT_MINE) {
      u->p--;
      return fail(u, "unsupported pickle opcode 0x%02x (%s)", op, opname(op));
    }
    if (rc) return -1;
  }
}

int ltS_unpickle(lt_ctx *ctx, const char *op, ltS_sdoc *d, const uint8_t *data, size_t n,
                 bool legacy, const char *what, ltS_sval **out, size_t *used) {
  up u = {.ctx = ctx, .op = op, .what = what, .d = d, .base = data, .p = data, .end = data + n,
          .legacy = legacy};
  int rc = run(&u, out);
  if (rc && u.truncated) rc = -2;
  if (used)
    *used = rc == -2 ? (u.wanted > SIZE_MAX ? SIZE_MAX : (size_t)u.wanted) : (size_t)(u.p - data);
  free(u.st);
  free(u.marks);
  free(u.memo);
  return rc;
}
