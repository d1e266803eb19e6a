/*
** named.c -- checkpoints for C hosts (lantern_ops.h): a file's tensors as a flat list of
** (name, tensor) pairs, read and written through the same loaders and writers as the Lua
** binding, with no value tree left for the host to walk.
*/
#include <stdlib.h>

#include "serial.h"

#define ST_META_KEY "__metadata__"

void lt_named_free(lt_named_tensor *list, size_t n) {
  if (!list) return;
  for (size_t i = 0; i < n; i++) {
    free(list[i].name);
    lt_release(list[i].tensor);
  }
  free(list);
}

lt_tensor *lt_named_find(const lt_named_tensor *list, size_t n, const char *name) {
  for (size_t i = 0; list && name && i < n; i++)
    if (strcmp(list[i].name, name) == 0) return list[i].tensor;
  return NULL;
}

/* list[i] = a copy of the name and a new reference to t; a name holding a NUL byte (legal in a
** file, not in a C string) is refused rather than cut short. */
static int put_entry(lt_ctx *ctx, const char *op, lt_named_tensor *e, const char *name,
                     size_t len, lt_tensor *t) {
  if (memchr(name, 0, len))
    return ltB_fail(ctx, "%s: a tensor name holds a NUL byte (C hosts take NUL-terminated names)",
                    op);
  e->name = malloc(len + 1);
  if (!e->name) return ltB_fail(ctx, "%s: out of memory", op);
  memcpy(e->name, name, len);
  e->name[len] = 0;
  e->tensor = lt_retain(t);
  return 0;
}

/* The doc's root as a list: the safetensors loader's TENSORS node, or a DICT of string ->
** tensor (a torch.save'd state_dict). */
static int doc_to_list(lt_ctx *ctx, const char *op, const char *path, const ltS_sval *root,
                       lt_named_tensor **list, size_t *n) {
  size_t count;
  if (root && root->kind == LT_SV_TENSORS)
    count = root->u.flat.n;
  else if (root && root->kind == LT_SV_DICT)
    count = root->u.dict.n;
  else
    return ltB_fail(ctx, "%s: %s: expected a flat dict of name -> tensor (a state_dict)", op,
                    path);
  lt_named_tensor *l = calloc(count ? count : 1, sizeof *l);
  if (!l) return ltB_fail(ctx, "%s: out of memory", op);
  int rc = 0;
  for (size_t i = 0; !rc && i < count; i++) {
    if (root->kind == LT_SV_TENSORS) {
      const ltS_sflat *e = &root->u.flat.e[i];
      rc = put_entry(ctx, op, &l[i], e->name, e->len, e->t);
      continue;
    }
    const ltS_sval *k = root->u.dict.k[i], *v = root->u.dict.v[i];
    if (k->kind != LT_SV_STR || v->kind != LT_SV_TENSOR)
      rc = ltB_fail(ctx, "%s: %s: entry %zu is not a string -> tensor pair (expected a flat "
                    "state_dict)", op, path, i);
    else
      rc = put_entry(ctx, op, &l[i], k->u.s.p, k->u.s.n, v->u.ten->t);
  }
  if (rc) {
    lt_named_free(l, count);
    return -1;
  }
  *list = l;
  *n = count;
  return 0;
}

typedef int (*loader_fn)(lt_ctx *, const ltS_src *, const ltS_load_opts *, ltS_sdoc **);

static int load_named(lt_ctx *ctx, const char *op, loader_fn load, const char *path,
                      lt_named_tensor **list, size_t *n) {
  if (!path || !list || !n) return ltB_fail(ctx, "%s: path, list and n must not be NULL", op);
  ltS_load_opts o;
  ltS_load_opts_init(&o);
  ltS_src src;
  if (ltS_src_open(ctx, op, &src, path)) return -1;
  ltS_sdoc *d = NULL;
  int rc = load(ctx, &src, &o, &d);
  ltS_src_close(&src);
  if (!rc) rc = doc_to_list(ctx, op, path, ltS_sdoc_root(d), list, n);
  ltS_sdoc_free(d);   /* the list holds its own references */
  return rc;
}

int lt_load_safetensors(lt_ctx *ctx, const char *path, lt_named_tensor **list, size_t *n) {
  return load_named(ctx, "load_safetensors", ltS_st_load, path, list, n);
}

int lt_load_state_dict(lt_ctx *ctx, const char *path, lt_named_tensor **list, size_t *n) {
  return load_named(ctx, "load_state_dict", ltS_pt_load, path, list, n);
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names must be present, unique and not the reserved metadata key; tensors present. */
static int check_entries(lt_ctx *ctx, const char *op, const lt_named_tensor *list, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!list[i].name || !list[i].tensor)
      return ltB_fail(ctx, "%s: entry %zu has no %s", op, i, list[i].name ? "tensor" : "name");
    if (strcmp(list[i].name, ST_META_KEY) == 0)
      return ltB_fail(ctx, "%s: '%s' is reserved and cannot name a tensor", op, ST_META_KEY);
  }
  const char **names = malloc((n ? n : 1) * sizeof *names);
  if (!names) return ltB_fail(ctx, "%s: out of memory", op);
  for (size_t i = 0; i < n; i++) names[i] = list[i].name;
  qsort(names, n, sizeof *names, cmp_name);
  int rc = 0;
  for (size_t i = 1; !rc && i < n; i++)
    if (strcmp(names[i - 1], names[i]) == 0)
      rc = ltB_fail(ctx, "%s: the name '%s' appears twice", op, names[i]);
  free(names);
  return rc;
}

int lt_save_safetensors(lt_ctx *ctx, const char *path, const lt_named_tensor *list, size_t n) {
  const char *op = "save_safetensors";
  if (!path || (n && !list)) return ltB_fail(ctx, "%s: path and list must not be NULL", op);
  if (check_entries(ctx, op, list, n)) return -1;
  ltS_sdoc *d = ltS_sdoc_new();
  ltS_sval *dict = d ? ltS_sv_new(d, LT_SV_DICT) : NULL;
  int rc = dict ? 0 : ltB_fail(ctx, "%s: out of memory", op);
  for (size_t i = 0; !rc && i < n; i++) {
    ltS_sval *k = ltS_sv_str(d, LT_SV_STR, list[i].name, strlen(list[i].name));
    ltS_sval *v = k ? ltS_sv_tensor(d, list[i].tensor, false) : NULL;
    if (!v || ltS_sv_set(d, dict, k, v)) rc = ltB_fail(ctx, "%s: out of memory", op);
  }
  if (!rc) rc = ltS_st_save(ctx, path, dict, NULL);
  ltS_sdoc_free(d);
  return rc;
}
