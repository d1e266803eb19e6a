/*
** pt.c -- torch.save files: the zip format of PyTorch >= 1.6 and the legacy stream format
** (_use_new_zipfile_serialization=False), read into a value tree; and the zip writer side.
**
** Zip layout read: every record under one folder (taken from the first entry), data.pkl,
** data/<key> (raw little-endian storage bytes, or big-endian when the byteorder record says
** so), version, and records we ignore. Written: archive/data.pkl, archive/byteorder,
** archive/data/0.., archive/version ("3\n"), the layout torch 1.13 and 2.x both load.
*/
#include <stdlib.h>

#include "serial.h"

#define OP "load"

/* ============================================================ zip format */

enum {
  NAME_ROOM = 96,      /* bytes after the folder for the fixed record names ("/constants.pkl") */
  MAX_FOLDER = 4096,   /* a longer folder name is cut (its records are then not found) */
  ZIP_DEFLATED = 8,    /* zip's method number for deflate */
};

/* The archive's folder: the first entry's, or the one holding data.pkl where that is elsewhere.
** *name gets a buffer of *plen + NAME_ROOM bytes that starts with the folder (the caller frees
** it, on failure too); *pkl gets the data.pkl entry, or NULL. */
static int find_folder(lt_ctx *ctx, const ltS_src *src, const ltS_zip *z, char **name,
                       size_t *plen, const ltS_zentry **pkl) {
  const ltS_zentry *first = ltS_zip_first(z);
  if (!first)
    return ltB_fail(ctx, "%s: %s: zip archive is empty (no data.pkl record)", OP, src->name);
  const char *slash = strchr(first->name, '/');
  if (!slash)
    return ltB_fail(ctx, "%s: %s: file in archive is not in a subdirectory: %s", OP, src->name,
                    first->name);
  *plen = (size_t)(slash - first->name);
  *name = malloc(*plen + NAME_ROOM);
  if (!*name) return ltB_fail(ctx, "%s: out of memory", OP);
  memcpy(*name, first->name, *plen);
  strcpy(*name + *plen, "/data.pkl");
  *pkl = ltS_zip_find(z, *name);
  for (size_t i = 0; i < z->n && !*pkl; i++) {
    const char *nm = z->e[i].name, *s = strchr(nm, '/');
    if (!s || strcmp(s, "/data.pkl") != 0) continue;
    size_t pl = (size_t)(s - nm);
    if (pl > MAX_FOLDER) pl = MAX_FOLDER;
    char *nn = realloc(*name, pl + NAME_ROOM);
    if (!nn) return ltB_fail(ctx, "%s: out of memory", OP);
    *name = nn;
    memcpy(*name, nm, pl);
    *plen = pl;
    *pkl = &z->e[i];
  }
  return 0;
}

/* the byteorder record, where there is one: *big when it says "big" */
static int read_byteorder(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o,
                          const ltS_zip *z, char *name, size_t plen, bool *big) {
  enum { MAX_BYTEORDER = 16 };
  *big = false;
  memcpy(name + plen, "/byteorder", 11);
  const ltS_zentry *bo = ltS_zip_find(z, name);
  if (!bo) return 0;
  /* the record is "little" or "big": a larger one is refused before it is inflated */
  if (bo->usize > MAX_BYTEORDER)
    return ltB_fail(ctx, "%s: %s: byteorder record %s declares %llu bytes (expected 'little' or "
                    "'big')", OP, src->name, bo->name, (unsigned long long)bo->usize);
  uint8_t *txt;
  size_t nt;
  if (ltS_zip_read_all(ctx, OP, z, bo, o->verify_crc, &txt, &nt)) return -1;
  *big = nt == 3 && memcmp(txt, "big", 3) == 0;
  bool little = nt == 6 && memcmp(txt, "little", 6) == 0;
  free(txt);
  if (!*big && !little)
    return ltB_fail(ctx, "%s: %s: byteorder record is neither 'little' nor 'big'", OP,
                    src->name);
  return 0;
}

/* Points storage s at its record data/<key> (read later, by materialisation). *name grows to
** hold the record's name after the folder's plen bytes. */
static int attach_record(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o,
                         const ltS_zip *z, ltS_sdoc *d, ltS_sstorage *s, char **name,
                         size_t plen) {
  size_t kl = strlen(s->key);
  char *nn = realloc(*name, plen + kl + 16);
  if (!nn) return ltB_fail(ctx, "%s: out of memory", OP);
  *name = nn;
  memcpy(nn + plen, "/data/", 6);
  memcpy(nn + plen + 6, s->key, kl + 1);
  const ltS_zentry *r = ltS_zip_find(z, nn);
  if (!r)
    return ltB_fail(ctx, "%s: %s: storage '%s' has no record %s", OP, src->name, s->key, nn);
  if (ltS_zip_check_method(ctx, OP, src, r->name, r->method, r->csize, r->usize)) return -1;
  size_t rl = strlen(r->name);
  char *rn = ltS_sdoc_alloc(d, rl + 1);   /* for messages; the zip's names go with it */
  if (!rn) return ltB_fail(ctx, "%s: out of memory", OP);
  memcpy(rn, r->name, rl + 1);
  s->rec_name = rn;
  s->rec_deflated = r->method == ZIP_DEFLATED;
  s->rec_csize = r->csize;
  s->have_rec = true;
  s->rec_off = r->data_off;
  s->rec_len = r->usize;
  s->rec_crc = r->crc;
  s->check_crc = o->verify_crc;
  return 0;
}

/* Unpickles data.pkl (entry e) into d and attaches every storage it names to its record. */
static int read_zip_doc(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o,
                        const ltS_zip *z, const ltS_zentry *e, ltS_sdoc *d, char **name,
                        size_t plen) {
  uint8_t *pkl = NULL;
  size_t npkl = 0;
  ltS_sval *root;
  int rc = -1;
  if (ltS_zip_read_all(ctx, OP, z, e, o->verify_crc, &pkl, &npkl) ||
      ltS_unpickle(ctx, OP, d, pkl, npkl, false, "data.pkl", &root, NULL))
    goto done;
  ltS_sdoc_set_root(d, root);
  for (size_t i = 0; i < ltS_sdoc_nstorages(d); i++)
    if (attach_record(ctx, src, o, z, d, ltS_sdoc_storage_at(d, i)->u.stor, name, plen))
      goto done;
  rc = 0;
done:
  free(pkl);
  return rc;
}

static int load_zip(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc *d) {
  ltS_zip z;
  if (ltS_zip_open(ctx, OP, &z, src)) return -1;
  int rc = -1;
  char *name = NULL;
  size_t plen = 0;
  const ltS_zentry *e = NULL;
  bool big;
  if (find_folder(ctx, src, &z, &name, &plen, &e)) goto done;
  memcpy(name + plen, "/constants.pkl", 15);
  if (ltS_zip_find(&z, name)) {
    ltB_fail(ctx, "%s: %s is a TorchScript archive (torch.jit.save), not a torch.save checkpoint",
             OP, src->name);
    goto done;
  }
  if (!e) {
    ltB_fail(ctx, "%s: %s: zip archive has no data.pkl record (not a torch.save checkpoint)", OP,
             src->name);
    goto done;
  }
  if (read_byteorder(ctx, src, o, &z, name, plen, &big) ||
      read_zip_doc(ctx, src, o, &z, e, d, &name, plen))
    goto done;
  rc = ltS_sdoc_materialize(ctx, OP, d, src, o, big);
done:
  free(name);
  ltS_zip_close(&z);
  return rc;
}

/* ============================================================ legacy stream */

static const uint8_t legacy_magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

/* The five pickles of a legacy file, in order. */
enum legacy_part { LP_MAGIC, LP_PROTOCOL, LP_SYSINFO, LP_ROOT, LP_KEYS, LP_COUNT };

enum {
  LEGACY_PROTOCOL = 1001,       /* the only protocol version torch ever wrote */
  LEGACY_FIRST_READ = 1 << 16,  /* bytes read for the first pickle; then doubled as needed */
  LEGACY_SIZE_BYTES = 8,        /* each storage's element count before its bytes */
};

/* The pickles' input: a growing prefix of the file from pos, have bytes of it in buf. */
typedef struct legacy_buf {
  uint8_t *buf;
  size_t have;
  uint64_t pos;
} legacy_buf;

/* Unpickles part i from the front of lb, reading more of the file as a truncated parse asks,
** then drops its bytes from lb. */
static int unpickle_part(lt_ctx *ctx, const ltS_src *src, ltS_sdoc *d, legacy_buf *lb,
                         enum legacy_part i, ltS_sval **part) {
  static const char *const what[LP_COUNT] = {
      [LP_MAGIC] = "magic number", [LP_PROTOCOL] = "protocol version",
      [LP_SYSINFO] = "system info", [LP_ROOT] = "legacy pickle", [LP_KEYS] = "storage key list",
  };
  size_t used = 0;
  for (;;) {
    uint64_t avail = src->size - lb->pos;
    size_t want = lb->have ? lb->have * 2 : LEGACY_FIRST_READ;
    if (want < used) want = used;
    if (want > avail) want = (size_t)avail;
    if (want > lb->have) {
      uint8_t *nb = realloc(lb->buf, want ? want : 1);
      if (!nb) return ltB_fail(ctx, "%s: out of memory", OP);
      lb->buf = nb;
      if (ltS_src_read(ctx, OP, src, lb->pos + lb->have, lb->buf + lb->have, want - lb->have,
                       "legacy header"))
        return -1;
      lb->have = want;
    }
    int r = ltS_unpickle(ctx, OP, d, lb->buf, lb->have, i == LP_ROOT, what[i], part, &used);
    if (r == 0) break;
    if (r != -2 || lb->have == avail || used > avail) return -1;   /* -2: read more */
  }
  lb->pos += used;
  memmove(lb->buf, lb->buf + used, lb->have - used);
  lb->have -= used;
  return 0;
}

/* the checks on the parts that say what the file is, made as soon as each is read */
static int check_part(lt_ctx *ctx, const ltS_src *src, enum legacy_part i, const ltS_sval *p) {
  if (i == LP_MAGIC && (p->kind != LT_SV_BIGINT || p->u.s.n != sizeof legacy_magic ||
                        memcmp(p->u.s.p, legacy_magic, sizeof legacy_magic) != 0))
    return ltB_fail(ctx, "%s: %s: not a PyTorch checkpoint (a pickle without the legacy magic "
                    "number)", OP, src->name);
  if (i == LP_PROTOCOL && (p->kind != LT_SV_INT || p->u.i != LEGACY_PROTOCOL))
    return ltB_fail(ctx, "%s: %s: unsupported legacy protocol version", OP, src->name);
  return 0;
}

/* Reads the five pickles; *pos gets where the storages start. The pickles come first; they
** are small next to the storages that follow, but their end is only known by parsing, so read
** a growing prefix. A truncated parse says how many bytes it needs at least: a claim past the
** end of the file fails at once instead of reading the whole file in doublings first. */
static int read_parts(lt_ctx *ctx, const ltS_src *src, ltS_sdoc *d, ltS_sval **parts,
                      uint64_t *pos) {
  legacy_buf lb = {0};
  int rc = 0;
  for (enum legacy_part i = LP_MAGIC; i < LP_COUNT; i++)
    if (unpickle_part(ctx, src, d, &lb, i, &parts[i]) || check_part(ctx, src, i, parts[i])) {
      rc = -1;
      break;
    }
  free(lb.buf);
  *pos = lb.pos;
  return rc;
}

/* the sys_info dict's little_endian */
static bool legacy_big_endian(const ltS_sval *info) {
  bool big = false;
  if (info->kind == LT_SV_DICT)
    for (size_t i = 0; i < info->u.dict.n; i++) {
      ltS_sval *k = info->u.dict.k[i], *v = info->u.dict.v[i];
      if (k->kind == LT_SV_STR && strcmp(k->u.s.p, "little_endian") == 0 && v->kind == LT_SV_BOOL)
        big = !v->u.b;
    }
  return big;
}

/* Storage key k's bytes follow its element count at *pos; *pos moves past them. */
static int place_storage(lt_ctx *ctx, const ltS_src *src, ltS_sdoc *d, const ltS_sval *k,
                         bool big, uint64_t *pos) {
  if (k->kind != LT_SV_STR)
    return ltB_fail(ctx, "%s: %s: legacy storage key is not a str", OP, src->name);
  bool created;
  ltS_sval *sv = ltS_sdoc_storage(d, k->u.s.p, k->u.s.n, &created);
  if (!sv) return ltB_fail(ctx, "%s: out of memory", OP);
  ltS_sstorage *s = sv->u.stor;
  if (created || s->have_rec)
    return ltB_fail(ctx, "%s: %s: legacy storage '%s' is %s", OP, src->name, s->key,
                    created ? "never used" : "listed twice");
  uint8_t nb[LEGACY_SIZE_BYTES];
  if (ltS_src_read(ctx, OP, src, *pos, nb, sizeof nb, "legacy storage size")) return -1;
  if (big) ltS_swap_bytes(nb, 1, sizeof nb);
  int64_t numel;
  memcpy(&numel, nb, sizeof numel);
  *pos += sizeof nb;
  uint64_t bytes;
  if (numel != s->numel ||
      __builtin_mul_overflow((uint64_t)numel, ltS_fdtype_size(s->fdt), &bytes) ||
      bytes > src->size - *pos)
    return ltB_fail(ctx, "%s: %s: legacy storage '%s' declares %lld elements, %s", OP,
                    src->name, s->key, (long long)numel,
                    numel != s->numel ? "not the size its tensors were saved with"
                                     : "more than the file holds (file truncated?)");
  s->have_rec = true;
  s->rec_off = *pos;
  s->rec_len = bytes;
  *pos += bytes;
  return 0;
}

static int load_legacy(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc *d) {
  ltS_sval *parts[LP_COUNT];
  uint64_t pos;
  if (read_parts(ctx, src, d, parts, &pos)) return -1;
  bool big = legacy_big_endian(parts[LP_SYSINFO]);
  const ltS_sval *keys = parts[LP_KEYS];
  if (keys->kind != LT_SV_LIST)
    return ltB_fail(ctx, "%s: %s: legacy storage key list is a %s", OP, src->name,
                    keys->kind == LT_SV_DICT ? "dict" : "non-list");
  for (size_t i = 0; i < keys->u.seq.n; i++)
    if (place_storage(ctx, src, d, keys->u.seq.v[i], big, &pos)) return -1;
  ltS_sdoc_set_root(d, parts[LP_ROOT]);
  return ltS_sdoc_materialize(ctx, OP, d, src, o, big);
}

/* ============================================================ entry points */

int ltS_pt_load(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc **out) {
  uint8_t head[16] = {0};
  size_t n = src->size < sizeof head ? (size_t)src->size : sizeof head;
  if (n < 4)
    return ltB_fail(ctx, "%s: %s: file is empty or truncated (%zu bytes)", OP, src->name, n);
  if (ltS_src_read(ctx, OP, src, 0, head, n, "header")) return -1;
  ltS_sdoc *d = ltS_sdoc_new();
  if (!d) return ltB_fail(ctx, "%s: out of memory", OP);
  int rc;
  if (memcmp(head, "PK\003\004", 4) == 0 || memcmp(head, "PK\005\006", 4) == 0)
    rc = load_zip(ctx, src, o, d);
  else if (head[0] == 0x80 && head[1] <= 5)
    rc = load_legacy(ctx, src, o, d);
  else if (ltS_st_sniff(head, n, src->size)) {
    ltS_sdoc_free(d);
    return ltS_st_load(ctx, src, o, out);
  } else
    rc = ltB_fail(ctx, "%s: %s is not a PyTorch checkpoint (neither a zip archive nor a legacy "
                  "pickle stream)", OP, src->name);
  if (rc) {
    ltS_sdoc_free(d);
    return -1;
  }
  *out = d;
  return 0;
}

int ltS_pt_save(lt_ctx *ctx, const char *path, ltS_sval *root) {
  const uint16_t one = 1;
  if (*(const uint8_t *)&one != 1)
    return ltB_fail(ctx, "save: writing checkpoints on a big-endian host is not supported");
  uint8_t *pkl;
  size_t npkl, ns;
  ltS_pstorage *st;
  if (ltS_pickle(ctx, "save", root, &pkl, &npkl, &st, &ns)) return -1;
  ltS_afile a;
  if (ltS_afile_open(ctx, "save", &a, path)) {
    free(pkl);
    free(st);
    return -1;
  }
  ltS_zwriter w;
  ltS_zw_init(&w, &a);
  int rc = ltS_zw_add(ctx, "save", &w, "archive/data.pkl", pkl, npkl);
  if (!rc) rc = ltS_zw_add(ctx, "save", &w, "archive/byteorder", "little", 6);
  char name[64];
  for (size_t i = 0; !rc && i < ns; i++) {
    snprintf(name, sizeof name, "archive/data/%zu", i);
    void *host;   /* a device storage is written from a copy on the host */
    rc = ltD_storage_host_bytes(ctx, st[i].st, st[i].nbytes, &host);
    if (!rc) rc = ltS_zw_add(ctx, "save", &w, name, host ? host : st[i].st->data, st[i].nbytes);
    free(host);
  }
  if (!rc) rc = ltS_zw_add(ctx, "save", &w, "archive/version", "3\n", 2);
  if (!rc) rc = ltS_zw_finish(ctx, "save", &w);
  ltS_zw_free(&w);
  free(pkl);
  free(st);
  if (rc) {
    ltS_afile_abort(&a);
    return -1;
  }
  return ltS_afile_commit(ctx, "save", &a);
}
