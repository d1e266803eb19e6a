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

static int load_zip(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc *d) {
  ltS_zip z;
  if (ltS_zip_open(ctx, OP, &z, src)) return -1;
  int rc = -1;
  char *name = NULL;
  uint8_t *pkl = NULL;
  size_t npkl = 0;
  const ltS_zentry *first = ltS_zip_first(&z);
  if (!first) {
    ltB_fail(ctx, "%s: %s: zip archive is empty (no data.pkl record)", OP, src->name);
    goto done;
  }
  const char *slash = strchr(first->name, '/');
  if (!slash) {
    ltB_fail(ctx, "%s: %s: file in archive is not in a subdirectory: %s", OP, src->name,
             first->name);
    goto done;
  }
  size_t plen = (size_t)(slash - first->name);
  const ltS_zentry *e = NULL;
  name = malloc(plen + 64 + 32);
  if (!name) {
    ltB_fail(ctx, "%s: out of memory", OP);
    goto done;
  }
  memcpy(name, first->name, plen);
  strcpy(name + plen, "/data.pkl");
  e = ltS_zip_find(&z, name);
  if (!e) {   /* data.pkl may sit under another folder than the first entry's */
    for (size_t i = 0; i < z.n && !e; i++) {
      const char *nm = z.e[i].name, *s = strchr(nm, '/');
      if (s && strcmp(s, "/data.pkl") == 0) {
        e = &z.e[i];
        plen = (size_t)(s - nm);
        if (plen > 4096) plen = 4096;
        char *nn = realloc(name, plen + 64 + 32);
        if (!nn) {
          ltB_fail(ctx, "%s: out of memory", OP);
          goto done;
        }
        name = nn;
        memcpy(name, nm, plen);
      }
    }
  }
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
  bool big = false;
  memcpy(name + plen, "/byteorder", 11);
  const ltS_zentry *bo = ltS_zip_find(&z, name);
  /* the record is "little" or "big": a larger one is refused before it is inflated */
  if (bo && bo->usize > 16) {
    ltB_fail(ctx, "%s: %s: byteorder record %s declares %llu bytes (expected 'little' or 'big')",
             OP, src->name, bo->name, (unsigned long long)bo->usize);
    goto done;
  }
  if (bo) {
    uint8_t *txt;
    size_t nt;
    if (ltS_zip_read_all(ctx, OP, &z, bo, o->verify_crc, &txt, &nt)) goto done;
    big = nt == 3 && memcmp(txt, "big", 3) == 0;
    bool little = nt == 6 && memcmp(txt, "little", 6) == 0;
    free(txt);
    if (!big && !little) {
      ltB_fail(ctx, "%s: %s: byteorder record is neither 'little' nor 'big'", OP, src->name);
      goto done;
    }
  }
  if (ltS_zip_read_all(ctx, OP, &z, e, o->verify_crc, &pkl, &npkl)) goto done;
  ltS_sval *root;
  if (ltS_unpickle(ctx, OP, d, pkl, npkl, false, "data.pkl", &root, NULL)) goto done;
  ltS_sdoc_set_root(d, root);
  /* find every storage's record */
  for (size_t i = 0; i < ltS_sdoc_nstorages(d); i++) {
    ltS_sstorage *s = ltS_sdoc_storage_at(d, i)->u.stor;
    size_t kl = strlen(s->key);
    char *nn = realloc(name, plen + kl + 16);
    if (!nn) {
      ltB_fail(ctx, "%s: out of memory", OP);
      goto done;
    }
    name = nn;
    memcpy(name + plen, "/data/", 6);
    memcpy(name + plen + 6, s->key, kl + 1);
    const ltS_zentry *r = ltS_zip_find(&z, name);
    if (!r) {
      ltB_fail(ctx, "%s: %s: storage '%s' has no record %s", OP, src->name, s->key, name);
      goto done;
    }
    if (ltS_zip_check_method(ctx, OP, src, r->name, r->method, r->csize, r->usize)) goto done;
    size_t rl = strlen(r->name);
    char *rn = ltS_sdoc_alloc(d, rl + 1);   /* for messages; the zip's names go with it */
    if (!rn) {
      ltB_fail(ctx, "%s: out of memory", OP);
      goto done;
    }
    memcpy(rn, r->name, rl + 1);
    s->rec_name = rn;
    s->rec_deflated = r->method == 8;
    s->rec_csize = r->csize;
    s->have_rec = true;
    s->rec_off = r->data_off;
    s->rec_len = r->usize;
    s->rec_crc = r->crc;
    s->check_crc = o->verify_crc;
  }
  rc = ltS_sdoc_materialize(ctx, OP, d, src, o, big);
done:
  free(pkl);
  free(name);
  ltS_zip_close(&z);
  return rc;
}

/* ============================================================ legacy stream */

static const uint8_t legacy_magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static int load_legacy(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc *d) {
  /* the pickles come first; they are small next to the storages that follow, but their end
  ** is only known by parsing, so read a growing prefix. A truncated parse says how many bytes
  ** it needs at least: a claim past the end of the file fails at once instead of reading the
  ** whole file in doublings first. */
  uint64_t pos = 0;
  size_t have = 0;
  uint8_t *buf = NULL;
  int rc = -1;
  ltS_sval *parts[5];
  for (int i = 0; i < 5; i++) {
    size_t used = 0;
    for (;;) {
      /* try to unpickle from what we have; grow on truncation */
      uint64_t avail = src->size - pos;
      size_t want = have ? have * 2 : 1 << 16;
      if (want < used) want = used;
      if (want > avail) want = (size_t)avail;
      if (want > have) {
        uint8_t *nb = realloc(buf, want ? want : 1);
        if (!nb) {
          ltB_fail(ctx, "%s: out of memory", OP);
          goto done;
        }
        buf = nb;
        if (ltS_src_read(ctx, OP, src, pos + have, buf + have, want - have, "legacy header"))
          goto done;
        have = want;
      }
      static const char *const what[5] = {"magic number", "protocol version", "system info",
                                          "legacy pickle", "storage key list"};
      int r = ltS_unpickle(ctx, OP, d, buf, have, i == 3, what[i], &parts[i], &used);
      if (r == 0) break;
      if (r != -2 || have == avail || used > avail) goto done;   /* -2: read more */
    }
    pos += used;
    memmove(buf, buf + used, have - used);
    have -= used;
    if (i == 0 && (parts[0]->kind != LT_SV_BIGINT || parts[0]->u.s.n != 10 ||
                   memcmp(parts[0]->u.s.p, legacy_magic, 10) != 0)) {
      ltB_fail(ctx, "%s: %s: not a PyTorch checkpoint (a pickle without the legacy magic number)",
               OP, src->name);
      goto done;
    }
    if (i == 1 && (parts[1]->kind != LT_SV_INT || parts[1]->u.i != 1001)) {
      ltB_fail(ctx, "%s: %s: unsupported legacy protocol version", OP, src->name);
      goto done;
    }
  }
  bool big = false;
  if (parts[2]->kind == LT_SV_DICT)
    for (size_t i = 0; i < parts[2]->u.dict.n; i++) {
      ltS_sval *k = parts[2]->u.dict.k[i], *v = parts[2]->u.dict.v[i];
      if (k->kind == LT_SV_STR && strcmp(k->u.s.p, "little_endian") == 0 && v->kind == LT_SV_BOOL)
        big = !v->u.b;
    }
  ltS_sval *keys = parts[4];
  if (keys->kind != LT_SV_LIST) {
    ltB_fail(ctx, "%s: %s: legacy storage key list is a %s", OP, src->name,
             keys->kind == LT_SV_DICT ? "dict" : "non-list");
    goto done;
  }
  for (size_t i = 0; i < keys->u.seq.n; i++) {
    ltS_sval *k = keys->u.seq.v[i];
    if (k->kind != LT_SV_STR) {
      ltB_fail(ctx, "%s: %s: legacy storage key is not a str", OP, src->name);
      goto done;
    }
    bool created;
    ltS_sval *sv = ltS_sdoc_storage(d, k->u.s.p, k->u.s.n, &created);
    if (!sv) {
      ltB_fail(ctx, "%s: out of memory", OP);
      goto done;
    }
    ltS_sstorage *s = sv->u.stor;
    if (created || s->have_rec) {
      ltB_fail(ctx, "%s: %s: legacy storage '%s' is %s", OP, src->name, s->key,
               created ? "never used" : "listed twice");
      goto done;
    }
    uint8_t nb[8];
    if (ltS_src_read(ctx, OP, src, pos, nb, 8, "legacy storage size")) goto done;
    if (big) ltS_swap_bytes(nb, 1, 8);
    int64_t numel;
    memcpy(&numel, nb, 8);
    pos += 8;
    uint64_t bytes;
    if (numel != s->numel ||
        __builtin_mul_overflow((uint64_t)numel, ltS_fdtype_size(s->fdt), &bytes) ||
        bytes > src->size - pos) {
      ltB_fail(ctx, "%s: %s: legacy storage '%s' declares %lld elements, %s", OP, src->name,
               s->key, (long long)numel,
               numel != s->numel ? "not the size its tensors were saved with"
                                : "more than the file holds (file truncated?)");
      goto done;
    }
    s->have_rec = true;
    s->rec_off = pos;
    s->rec_len = bytes;
    pos += bytes;
  }
  ltS_sdoc_set_root(d, parts[3]);
  rc = ltS_sdoc_materialize(ctx, OP, d, src, o, big);
done:
  free(buf);
  return rc;
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
  ltS_zw_init(&w, a.f);
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
