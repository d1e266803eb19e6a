/*
** safetensors.c -- the safetensors format: u64 LE header length N, N bytes of JSON
** {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}} padded with spaces to a
** multiple of 8, then tightly packed little-endian C-order tensor bytes.
**
** The reader applies the reference implementation's checks (header size limit, UTF-8 JSON
** starting with '{', offsets that tile the buffer exactly with no hole/overlap/trailing byte,
** byte counts that match shape x dtype, overflow) plus duplicate names. The writer produces the
** reference's bytes (safetensors_save.c).
*/
#include <stdlib.h>

#include "serial.h"
#include "safetensors.h"

#define OP "safetensors.load"
#define MAX_HEADER 100000000ull

/* The reference's dtype table, in its enum order (ascending alignment). */
const ltS_st_dtype ltS_st_dtypes[LT_ST_NDTYPES] = {
  [LT_ST_BOOL] = {"BOOL", LT_F_BOOL, 0}, {"U8", LT_F_U8, 1},    {"I8", LT_F_I8, 2},
  {"F8_E5M2", -1, 3},     {"F8_E4M3", -1, 4},     {"I16", LT_F_I16, 5},  {"U16", LT_F_U16, 6},
  {"F16", LT_F_F16, 7},   {"BF16", LT_F_BF16, 8}, {"I32", LT_F_I32, 9},  {"U32", LT_F_U32, 10},
  [LT_ST_F32] = {"F32", LT_F_F32, 11}, [LT_ST_F64] = {"F64", LT_F_F64, 12},
  [LT_ST_I64] = {"I64", LT_F_I64, 13}, {"U64", LT_F_U64, 14},
};

bool ltS_st_sniff(const uint8_t *head, size_t n, uint64_t file_size) {
  if (n < 9) return false;
  uint64_t h = 0;
  for (int i = 7; i >= 0; i--) h = h << 8 | head[i];
  return h <= MAX_HEADER && h + 8 <= file_size && head[8] == '{';
}

/* ============================================================ a small JSON reader */

/* The header buffer is the loader's own copy, so strings are decoded in place: a JSON string
** never decodes to more bytes than it is written with, and its closing quote leaves room for
** the NUL. Names then cost no allocation however many tensors there are. */
typedef struct js {
  lt_ctx *ctx;
  const char *name;
  uint8_t *p, *end, *base;
} js;

static int jfail(js *j, const char *what) {
  return ltB_fail(j->ctx, "%s: %s: invalid header JSON: %s at header byte %zu", OP, j->name, what,
                  (size_t)(j->p - j->base));
}

static inline void ws(js *j) {
  while (j->p < j->end && *j->p <= ' ' &&
         (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->p++;
}

static int expect_fail(js *j, char c) {
  char msg[32];
  snprintf(msg, sizeof msg, "expected '%c'", c);
  return jfail(j, msg);
}

static inline int expect(js *j, char c) {
  ws(j);
  if (j->p >= j->end || *j->p != (uint8_t)c) return expect_fail(j, c);
  j->p++;
  return 0;
}

static inline bool peek(js *j, char c) {
  ws(j);
  return j->p < j->end && *j->p == (uint8_t)c;
}

static int hex4(js *j, uint32_t *v) {
  if (j->end - j->p < 4) return jfail(j, "truncated \\u escape");
  *v = 0;
  for (int i = 0; i < 4; i++) {
    int c = j->p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return jfail(j, "bad \\u escape");
    *v = *v << 4 | (uint32_t)d;
  }
  j->p += 4;
  return 0;
}

/* Bytes that a JSON string holds as themselves: all but controls, '"' and '\\'. */
#define P16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
static const unsigned char plain[256] = {
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, P16, P16, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  0, 1, 1, 1, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16};
#undef P16

/* Parses a string, decoding it in place; *out points at it (NUL-terminated, *n bytes). */
static int jstring(js *j, char **out, size_t *n) {
  if (expect(j, '"')) return -1;
  uint8_t *b = j->p, *q = b, *end = j->end;
  /* names are plain text: find the closing quote, unless an escape or control character comes
  ** first (then decode from there) */
  while (q < end && plain[*q]) q++;
  if (q < end && *q == '"') {
    *q = 0;
    j->p = q + 1;
    *out = (char *)b;
    *n = (size_t)(q - b);
    return 0;
  }
  j->p = q;
  for (;;) {
    if (j->p >= j->end) return jfail(j, "unterminated string");
    uint8_t c = *j->p++;
    if (c == '"') break;
    if (c < 0x20) {
      j->p--;
      return jfail(j, "control character in string");
    }
    if (c != '\\') {
      *q++ = c;
      continue;
    }
    if (j->p >= j->end) return jfail(j, "unterminated string");
    c = *j->p++;
    uint32_t cp;
    switch (c) {
      case '"': *q++ = '"'; continue;
      case '\\': *q++ = '\\'; continue;
      case '/': *q++ = '/'; continue;
      case 'b': *q++ = '\b'; continue;
      case 'f': *q++ = '\f'; continue;
      case 'n': *q++ = '\n'; continue;
      case 'r': *q++ = '\r'; continue;
      case 't': *q++ = '\t'; continue;
      case 'u':
        if (hex4(j, &cp)) return -1;
        if (cp >= 0xd800 && cp < 0xdc00) {   /* surrogate pair */
          uint32_t lo;
          if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u')
            return jfail(j, "lone surrogate in \\u escape");
          j->p += 2;
          if (hex4(j, &lo)) return -1;
          if (lo < 0xdc00 || lo >= 0xe000) return jfail(j, "bad surrogate pair");
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp < 0xe000) {
          return jfail(j, "lone surrogate in \\u escape");
        }
        /* a \u escape is at least 6 input bytes and at most 4 output bytes */
        if (cp < 0x80) {
          *q++ = (uint8_t)cp;
        } else if (cp < 0x800) {
          *q++ = (uint8_t)(0xc0 | cp >> 6);
          *q++ = (uint8_t)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
          *q++ = (uint8_t)(0xe0 | cp >> 12);
          *q++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
          *q++ = (uint8_t)(0x80 | (cp & 0x3f));
        } else {
          *q++ = (uint8_t)(0xf0 | cp >> 18);
          *q++ = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
          *q++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
          *q++ = (uint8_t)(0x80 | (cp & 0x3f));
        }
        continue;
      default:
        j->p--;
        return jfail(j, "bad escape");
    }
  }
  *q = 0;   /* q < j->p: the closing quote is behind it */
  *out = (char *)b;
  *n = (size_t)(q - b);
  return 0;
}

/* A non-negative integer (the only numbers shape and data_offsets hold). */
static int juint(js *j, uint64_t *v) {
  ws(j);
  if (j->p >= j->end || *j->p < '0' || *j->p > '9') return jfail(j, "expected a non-negative integer");
  uint64_t x = 0;
  const uint8_t *d0 = j->p;
  while (j->p < j->end && (unsigned)(*j->p - '0') < 10) {
    /* 19 digits always fit in 64 bits; only a longer number needs checking */
    if (j->p - d0 >= 19 && (__builtin_mul_overflow(x, 10, &x) ||
                            __builtin_add_overflow(x, (uint64_t)(*j->p - '0'), &x)))
      return jfail(j, "integer too large");
    if (j->p - d0 < 19) x = x * 10 + (uint64_t)(*j->p - '0');
    j->p++;
  }
  *v = x;
  if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
    return jfail(j, "expected an integer");
  return 0;
}

static int jskip(js *j, int depth) {
  if (depth > 64) return jfail(j, "nested too deeply");
  ws(j);
  if (j->p >= j->end) return jfail(j, "unexpected end");
  uint8_t c = *j->p;
  if (c == '"') {
    char *s;
    size_t n;
    return jstring(j, &s, &n);
  }
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    j->p++;
    if (peek(j, close)) {
      j->p++;
      return 0;
    }
    for (;;) {
      if (c == '{') {
        char *s;
        size_t n;
        if (jstring(j, &s, &n) || expect(j, ':')) return -1;
      }
      if (jskip(j, depth + 1)) return -1;
      if (peek(j, ',')) {
        j->p++;
        continue;
      }
      return expect(j, close);
    }
  }
  static const char *const lits[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t l = strlen(lits[i]);
    if ((size_t)(j->end - j->p) >= l && memcmp(j->p, lits[i], l) == 0) {
      j->p += l;
      return 0;
    }
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    j->p++;
    while (j->p < j->end && (strchr("0123456789.eE+-", *j->p) && *j->p)) j->p++;
    return 0;
  }
  return jfail(j, "unexpected character");
}

static bool valid_utf8(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    if (n - i >= 8) {   /* headers are mostly ASCII: eight bytes at a time */
      uint64_t w;
      memcpy(&w, s + i, 8);
      if (!(w & 0x8080808080808080ull)) {
        i += 8;
        continue;
      }
    }
    uint8_t c = s[i];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || i + len > n || (len == 2 && c < 0xc2)) return false;
    uint32_t cp = len == 1 ? c : c & (0xff >> (len + 1));
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
      return false;
    i += len;
  }
  return true;
}

/* ============================================================ reader */

/* One header entry, kept small: a header may list millions. Names point into the header
** buffer; shapes live in one shared pool. */
typedef struct stent {
  const char *name;
  uint64_t begin, end;
  uint32_t nlen;
  uint32_t dim0;             /* first of ndim sizes in the shape pool */
  signed char fdt;
  unsigned char dti;         /* row of ltS_st_dtypes */
  unsigned char ndim;
} stent;

typedef struct stparse {
  stent *e;
  size_t n, cap;
  int64_t *dims;
  size_t nd, cd;
  bool sorted;               /* entries are in offset order (writers list them so) */
} stparse;

static int cmp_off(const void *a, const void *b) {
  const stent *x = *(const stent *const *)a, *y = *(const stent *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static uint64_t name_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
  return h;
}

/* One tensor's {"dtype":..,"shape":[..],"data_offsets":[b,e]}. */
static int parse_info(js *j, stparse *ps, stent *e) {
  bool have_dt = false, have_shape = false, have_off = false;
  int64_t shape[LT_MAX_DIMS];
  int ndim = 0;
  if (expect(j, '{')) return -1;
  if (peek(j, '}')) {
    j->p++;
  } else {
    for (;;) {
      char *k;
      size_t kn;
      if (jstring(j, &k, &kn)) return -1;
      int rc = expect(j, ':');
      if (!rc && kn == 5 && memcmp(k, "dtype", 5) == 0) {
        char *dt;
        size_t dn;
        rc = jstring(j, &dt, &dn);
        if (!rc) {
          e->fdt = -2;
          for (size_t i = 0; i < LT_ST_NDTYPES; i++)
            if (dt[0] == ltS_st_dtypes[i].name[0] && strcmp(dt, ltS_st_dtypes[i].name) == 0) {
              e->fdt = (signed char)ltS_st_dtypes[i].fdt;
              e->dti = (unsigned char)i;
              break;
            }
          if (e->fdt < 0)
            rc = ltB_fail(j->ctx, "%s: %s: tensor '%s' has %s dtype '%.40s' (supported: BOOL, U8, "
                          "I8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64)", OP, j->name,
                          e->name, e->fdt == -1 ? "unsupported" : "unknown", dt);
          have_dt = true;
        }
      } else if (!rc && kn == 5 && memcmp(k, "shape", 5) == 0) {
        rc = expect(j, '[');
        ndim = 0;
        if (!rc && peek(j, ']')) {
          j->p++;
        } else {
          while (!rc) {
            uint64_t v;
            rc = juint(j, &v);
            if (rc) break;
            if (ndim == LT_MAX_DIMS) {
              rc = ltB_fail(j->ctx, "%s: %s: tensor '%s' has more than %d dimensions", OP, j->name,
                            e->name, LT_MAX_DIMS);
              break;
            }
            if (v > (uint64_t)INT64_MAX) {
              rc = jfail(j, "dimension too large");
              break;
            }
            shape[ndim++] = (int64_t)v;
            if (peek(j, ',')) {
              j->p++;
              continue;
            }
            rc = expect(j, ']');
            break;
          }
        }
        have_shape = true;
      } else if (!rc && kn == 12 && memcmp(k, "data_offsets", 12) == 0) {
        rc = expect(j, '[');
        if (!rc) rc = juint(j, &e->begin);
        if (!rc) rc = expect(j, ',');
        if (!rc) rc = juint(j, &e->end);
        if (!rc) rc = expect(j, ']');
        have_off = true;
      } else if (!rc) {
        rc = jskip(j, 1);
      }
      if (rc) return -1;
      if (peek(j, ',')) {
        j->p++;
        continue;
      }
      if (expect(j, '}')) return -1;
      break;
    }
  }
  if (!have_dt || !have_shape || !have_off)
    return ltB_fail(j->ctx, "%s: %s: tensor '%s' lacks %s", OP, j->name, e->name,
                    !have_dt ? "a dtype" : !have_shape ? "a shape" : "data_offsets");
  if (ps->cd - ps->nd < (size_t)ndim) {
    size_t nc = ps->cd ? ps->cd * 2 : 64;
    int64_t *p = realloc(ps->dims, nc * sizeof *p);
    if (!p) return ltB_fail(j->ctx, "%s: out of memory", OP);
    ps->dims = p;
    ps->cd = nc;
  }
  if (ndim) memcpy(ps->dims + ps->nd, shape, (size_t)ndim * sizeof *shape);
  e->dim0 = (uint32_t)ps->nd;
  e->ndim = (unsigned char)ndim;
  ps->nd += (size_t)ndim;
  return 0;
}

/* Duplicate names through a hash set of entry indices: sorting a million names costs more. */
static int check_duplicates(lt_ctx *ctx, const ltS_src *src, const stparse *ps) {
  size_t cap = 16;
  while (cap < ps->n * 2) cap *= 2;
  uint32_t *set = malloc(cap * sizeof *set);
  if (!set) return ltB_fail(ctx, "%s: out of memory", OP);
  memset(set, 0xff, cap * sizeof *set);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < ps->n; i++) {
    const stent *e = &ps->e[i];
    size_t k = name_hash(e->name, e->nlen) & (cap - 1);
    for (; set[k] != UINT32_MAX; k = (k + 1) & (cap - 1)) {
      const stent *o = &ps->e[set[k]];
      if (o->nlen == e->nlen && memcmp(o->name, e->name, e->nlen) == 0) {
        rc = ltB_fail(ctx, "%s: %s: tensor name '%s' appears twice in the header", OP, src->name,
                      e->name);
        break;
      }
    }
    set[k] = (uint32_t)i;
  }
  free(set);
  return rc;
}

/* Offsets must tile the data buffer exactly, and each range must match shape x dtype. */
static int check_offsets(lt_ctx *ctx, const ltS_src *src, stparse *ps, uint64_t buflen) {
  const stent **ord = NULL;
  bool sorted = true;
  for (size_t i = 1; i < ps->n && sorted; i++)
    sorted = ps->e[i - 1].begin < ps->e[i].begin ||
             (ps->e[i - 1].begin == ps->e[i].begin && ps->e[i - 1].end <= ps->e[i].end);
  ps->sorted = sorted;
  if (!sorted) {   /* the rare case */
    ord = malloc(ps->n * sizeof *ord);
    if (!ord) return ltB_fail(ctx, "%s: out of memory", OP);
    for (size_t i = 0; i < ps->n; i++) ord[i] = &ps->e[i];
    qsort(ord, ps->n, sizeof *ord, cmp_off);
  }
  uint64_t start = 0;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < ps->n; i++) {
    const stent *e = ord ? ord[i] : &ps->e[i];
    if (e->begin != start || e->end < e->begin) {
      rc = ltB_fail(ctx, "%s: %s: tensor '%s' has data_offsets [%llu, %llu] but the previous "
                    "tensor ends at %llu (offsets must tile the buffer: no hole, overlap or "
                    "reversed range)", OP, src->name, e->name, (unsigned long long)e->begin,
                    (unsigned long long)e->end, (unsigned long long)start);
      break;
    }
    start = e->end;
    const int64_t *shape = ps->dims + e->dim0;
    uint64_t cnt = 1, bytes;
    bool ovf = false;
    for (int k = 0; k < e->ndim; k++) ovf |= __builtin_mul_overflow(cnt, (uint64_t)shape[k], &cnt);
    ovf |= __builtin_mul_overflow(cnt, ltS_fdtype_size((ltS_fdtype)e->fdt), &bytes);
    if (ovf || cnt > (uint64_t)INT64_MAX || bytes != e->end - e->begin) {
      char sz[256];
      ltB_sizes_str(e->ndim, shape, sz, sizeof sz);
      if (ovf || cnt > (uint64_t)INT64_MAX)
        rc = ltB_fail(ctx, "%s: %s: tensor '%s' of shape %s overflows (huge declared size)", OP,
                      src->name, e->name, sz);
      else
        rc = ltB_fail(ctx, "%s: %s: tensor '%s' of dtype %s and shape %s needs %llu bytes but its "
                      "data_offsets [%llu, %llu] span %llu", OP, src->name, e->name,
                      ltS_st_dtypes[e->dti].name, sz, (unsigned long long)bytes,
                      (unsigned long long)e->begin, (unsigned long long)e->end,
                      (unsigned long long)(e->end - e->begin));
    }
  }
  if (!rc && start != buflen)
    rc = ltB_fail(ctx, "%s: %s: tensors cover %llu bytes but the data buffer holds %llu (%s)", OP,
                  src->name, (unsigned long long)start, (unsigned long long)buflen,
                  start < buflen ? "trailing bytes" : "offsets out of range or file truncated");
  free(ord);
  return rc;
}

/* The value tree: a TENSORS node in header order, whose names the doc's arena copies. */
static int build_doc(lt_ctx *ctx, const stparse *ps, ltS_sdoc *d) {
  ltS_sval *root = ltS_sdoc_flat(d, ps->n);
  if (!root) return ltB_fail(ctx, "%s: out of memory", OP);
  ltS_sdoc_set_root(d, root);
  for (size_t i = 0; i < ps->n; i++) {
    const stent *e = &ps->e[i];
    char *name = ltS_sdoc_alloc(d, (size_t)e->nlen + 1);
    if (!name) return ltB_fail(ctx, "%s: out of memory", OP);
    memcpy(name, e->name, e->nlen);
    name[e->nlen] = 0;
    root->u.flat.e[i].name = name;
    root->u.flat.e[i].len = e->nlen;
  }
  return 0;
}

/* One storage and one tensor per entry, read in file order. */
static int materialize(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o,
                       const stparse *ps, uint64_t data0, ltS_sval *root) {
  const stent **ord = NULL;
  if (!ps->sorted) {
    ord = malloc(ps->n * sizeof *ord);
    if (!ord) return ltB_fail(ctx, "%s: out of memory", OP);
    for (size_t i = 0; i < ps->n; i++) ord[i] = &ps->e[i];
    qsort(ord, ps->n, sizeof *ord, cmp_off);
  }
  ltS_rload r;
  ltS_rload_init(&r, src, ps->n);
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < ps->n; k++) {
    const stent *e = ord ? ord[k] : &ps->e[k];
    ltS_sflat *f = &root->u.flat.e[e - ps->e];
    const int64_t *shape = ps->dims + e->dim0;
    ltS_sstorage s = {.key = f->name, .numel = ltB_shape_numel(e->ndim, shape),
                     .rec_off = data0 + e->begin, .rec_len = e->end - e->begin,
                     .fdt = (ltS_fdtype)e->fdt, .have_rec = true};
    rc = ltS_record_check(ctx, OP, &s, src, o);
    if (rc == 0) rc = ltS_record_load(ctx, OP, &r, &s, o, false);
    if (rc) break;
    f->t = ltB_tensor_wrap(s.st, s.dt, e->ndim, shape, NULL, 0);
    ltB_storage_release(s.st);   /* the tensor holds it now */
    if (!f->t) rc = ltB_fail(ctx, "%s: out of memory", OP);
  }
  ltS_rload_free(&r);
  free(ord);
  return rc;
}

/* Reads and checks the 8-byte header length and the header after it: *h (malloc'd) holds its n
** bytes, valid UTF-8 that opens an object. */
static int read_header(lt_ctx *ctx, const ltS_src *src, uint8_t **h, uint64_t *len) {
  uint8_t hb[8];
  if (src->size < 8)
    return ltB_fail(ctx, "%s: %s: file too small (%llu bytes; a safetensors file starts with an "
                    "8-byte header length)", OP, src->name, (unsigned long long)src->size);
  if (ltS_src_read(ctx, OP, src, 0, hb, 8, "header length")) return -1;
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | hb[i];
  if (n > MAX_HEADER)
    return ltB_fail(ctx, "%s: %s: header length %llu exceeds the limit of %llu bytes", OP,
                    src->name, (unsigned long long)n, MAX_HEADER);
  if (n + 8 > src->size)
    return ltB_fail(ctx, "%s: %s: header length %llu exceeds the file size %llu (truncated file?)",
                    OP, src->name, (unsigned long long)n, (unsigned long long)src->size);
  uint8_t *p = malloc(n ? (size_t)n : 1);
  if (!p) return ltB_fail(ctx, "%s: out of memory", OP);
  int rc = ltS_src_read(ctx, OP, src, 8, p, (size_t)n, "header");
  if (!rc && !valid_utf8(p, (size_t)n))
    rc = ltB_fail(ctx, "%s: %s: header is not valid UTF-8", OP, src->name);
  if (!rc && (n == 0 || p[0] != '{'))
    rc = ltB_fail(ctx, "%s: %s: header does not start with '{'", OP, src->name);
  if (rc) {
    free(p);
    return -1;
  }
  *h = p;
  *len = n;
  return 0;
}

/* The __metadata__ entry: string pairs, pointing into the header. */
typedef struct stmeta {
  struct mpair { char *k, *v; size_t kl, vl; } *v;
  size_t n, cap;
  bool have;
} stmeta;

/* Parses the __metadata__ object (after its key and colon) into m. */
static int parse_meta(js *j, stmeta *m) {
  if (m->have) return jfail(j, "duplicate __metadata__");
  m->have = true;
  int rc = expect(j, '{');
  if (rc) return rc;
  if (peek(j, '}')) {
    j->p++;
    return 0;
  }
  for (;;) {
    if (m->n == m->cap) {
      size_t nc = m->cap ? m->cap * 2 : 8;
      struct mpair *a = realloc(m->v, nc * sizeof *a);
      if (!a) return ltB_fail(j->ctx, "%s: out of memory", OP);
      m->v = a;
      m->cap = nc;
    }
    struct mpair *e = &m->v[m->n];
    if ((rc = jstring(j, &e->k, &e->kl)) != 0) return rc;
    if ((rc = expect(j, ':')) != 0) return rc;
    ws(j);
    if (!peek(j, '"'))
      return ltB_fail(j->ctx, "%s: %s: __metadata__ value of '%s' is not a string (metadata "
                      "values must be strings)", OP, j->name, e->k);
    if ((rc = jstring(j, &e->v, &e->vl)) != 0) return rc;
    m->n++;
    if (!peek(j, ',')) return expect(j, '}');
    j->p++;
  }
}

/* Parses the info object of the tensor named key (after its colon) into a new entry of ps. */
static int add_entry(js *j, stparse *ps, char *key, size_t kl) {
  if (ps->n == ps->cap) {
    size_t nc = ps->cap ? ps->cap * 2 : 16;
    stent *a = nc <= UINT32_MAX ? realloc(ps->e, nc * sizeof *a) : NULL;
    if (!a) return ltB_fail(j->ctx, "%s: out of memory", OP);
    ps->e = a;
    ps->cap = nc;
  }
  stent *e = &ps->e[ps->n++];
  memset(e, 0, sizeof *e);
  e->name = key;
  e->nlen = (uint32_t)kl;   /* the header is at most MAX_HEADER bytes */
  return parse_info(j, ps, e);
}

/* Parses the header object: tensor entries into ps, __metadata__ into m; nothing may follow. */
static int parse_header(js *j, stparse *ps, stmeta *m) {
  int rc = expect(j, '{');
  if (!rc && peek(j, '}')) {
    j->p++;
  } else {
    while (!rc) {
      char *key;
      size_t kl;
      if ((rc = jstring(j, &key, &kl)) != 0) break;
      if ((rc = expect(j, ':')) != 0) break;
      bool is_meta = kl == 12 && memcmp(key, "__metadata__", 12) == 0;
      rc = is_meta ? parse_meta(j, m) : add_entry(j, ps, key, kl);
      if (rc) break;
      if (peek(j, ',')) {
        j->p++;
        continue;
      }
      rc = expect(j, '}');
      break;
    }
  }
  if (rc) return rc;
  ws(j);
  return j->p != j->end ? jfail(j, "trailing characters after the header object") : 0;
}

/* The entries against the data buffer (buflen bytes): no name twice, every byte used once. */
static int check_layout(lt_ctx *ctx, const ltS_src *src, stparse *ps, uint64_t buflen) {
  if (ps->n) {
    if (check_duplicates(ctx, src, ps)) return -1;
    return check_offsets(ctx, src, ps, buflen);
  }
  if (buflen != 0)
    return ltB_fail(ctx, "%s: %s: no tensors but %llu trailing bytes", OP, src->name,
                    (unsigned long long)buflen);
  return 0;
}

/* A new doc with the entries of ps and, if the header had one, the metadata dict. */
static int make_doc(lt_ctx *ctx, const stparse *ps, const stmeta *m, ltS_sdoc **out) {
  ltS_sdoc *d = ltS_sdoc_new();
  if (!d) return ltB_fail(ctx, "%s: out of memory", OP);
  int rc = build_doc(ctx, ps, d);
  if (!rc && m->have) {
    ltS_sval *md = ltS_sv_new(d, LT_SV_DICT);
    if (!md) rc = ltB_fail(ctx, "%s: out of memory", OP);
    for (size_t i = 0; !rc && i < m->n; i++) {
      ltS_sval *k = ltS_sv_str(d, LT_SV_STR, m->v[i].k, m->v[i].kl);
      ltS_sval *v = k ? ltS_sv_str(d, LT_SV_STR, m->v[i].v, m->v[i].vl) : NULL;
      if (!v || ltS_sv_set(d, md, k, v)) rc = ltB_fail(ctx, "%s: out of memory", OP);
    }
    if (!rc) ltS_sdoc_set_meta(d, md);
  }
  if (rc) {
    ltS_sdoc_free(d);
    return -1;
  }
  *out = d;
  return 0;
}

int ltS_st_load(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc **out) {
  uint8_t *h = NULL;
  uint64_t n = 0;
  if (read_header(ctx, src, &h, &n)) return -1;
  js j = {ctx, src->name, h, h + n, h};
  stparse ps = {0};
  stmeta meta = {0};
  ltS_sdoc *d = NULL;
  int rc = parse_header(&j, &ps, &meta);
  if (!rc) rc = check_layout(ctx, src, &ps, src->size - 8 - n);
  if (!rc) rc = make_doc(ctx, &ps, &meta, &d);
  /* the doc has copied every name: the header goes before the storages are allocated */
  free(meta.v);
  free(h);
  if (!rc && ps.n) rc = materialize(ctx, src, o, &ps, 8 + n, ltS_sdoc_root(d));
  free(ps.e);
  free(ps.dims);
  if (rc) {
    ltS_sdoc_free(d);
    return -1;
  }
  *out = d;
  return 0;
}
