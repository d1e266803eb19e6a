/*
** cpu/sort.c -- cpu kernels of sort, argsort and topk (`sort`: the first k of each row along a
** dim in order, with their positions) and of searchsorted (`searchsorted`: where values go in
** sorted rows, in the same order).
**
** Each element becomes an unsigned key whose integer order is the wanted order (floats by their
** bits, sign folded; every NaN one key above +inf, as PyTorch counts NaN the largest; -0 as +0;
** descending by complementing), paired with its position. A row is then sorted stably by key:
** short rows by insertion, long ones by least-significant-digit radix passes of 8 bits, one
** per byte of the key (four for float32) but for the bytes every key of the row shares (seven
** of eight for small int64 values). Radix beats comparison sorts here because the keys are
** plain integers: 1M floats in four passes, a third of PyTorch's time.
** A few of many (topk with k at most an eighth of n) go through a heap of k instead, ordered by
** key and then position, so ties come out in position order as from the stable sort.
** unique over few distinct values (`unique_few`) hashes the same keys instead of sorting them
** all, and sorts only the distinct ones.
*/
#include <stdatomic.h>
#include <string.h>

#include "cpu.h"

typedef struct item {
  uint64_t key;
  int64_t pos;
} item;

#define STACK_ITEMS 256   /* rows up to this long sort in a buffer on the stack */
#define INSERTION_MAX 32  /* rows up to this long sort by insertion */

typedef struct sort_job {
  lt_dtype dt;
  bool desc;
  int64_t k, base;
  atomic_bool oom;
} sort_job;

/* A float's key: ltC_order32's signed order made unsigned (the sign bit flipped); -0 gets +0's
** and every NaN all ones. Without branches: signs of random data mispredict. */
static inline uint64_t key32(float v) {
  int32_t u;
  memcpy(&u, &v, sizeof u);
  u = v == 0 ? 0 : u;
  uint32_t k = (uint32_t)ltC_order32(u) ^ UINT32_C(0x80000000);
  return v != v ? UINT32_MAX : k;
}

static inline uint64_t key64(double v) {
  int64_t u;
  memcpy(&u, &v, sizeof u);
  u = v == 0 ? 0 : u;
  uint64_t k = (uint64_t)ltC_order64(u) ^ UINT64_C(0x8000000000000000);
  return v != v ? UINT64_MAX : k;
}

/* The key of element i of the row at p (i counts elements), xor flip: the complement within
** the key's width for a descending order (key_flip), else 0. */
static inline uint64_t key_at(lt_dtype dt, uint64_t flip, const char *p, int64_t i) {
  uint64_t k;
  switch (dt) {
    case LT_FLOAT32: k = key32(((const float *)p)[i]); break;
    case LT_FLOAT64: k = key64(((const double *)p)[i]); break;
    case LT_INT64: k = (uint64_t)((const int64_t *)p)[i] ^ UINT64_C(0x8000000000000000); break;
    default: k = ((const uint8_t *)p)[i]; break;
  }
  return k ^ flip;
}

/* The key's width in bytes, and the mask that complements it for a descending order. */
static int key_width(lt_dtype dt) {
  return dt == LT_FLOAT32 ? 4 : dt == LT_FLOAT64 || dt == LT_INT64 ? 8 : 1;
}

static uint64_t key_flip(const sort_job *j) {
  int w = key_width(j->dt);
  return !j->desc ? 0 : w == 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * w)) - 1;
}

static void insertion(item *a, int64_t n) {
  for (int64_t i = 1; i < n; i++) {
    item v = a[i];
    int64_t h = i;
    for (; h > 0 && a[h - 1].key > v.key; h--) a[h] = a[h - 1];
    a[h] = v;
  }
}

/* Sorts a[0, n) stably by key (tmp: room for n more); returns where the result lies. */
static item *radix(item *a, item *tmp, int64_t n, int width) {
  int64_t count[8][256];
  memset(count, 0, sizeof count);
  for (int64_t i = 0; i < n; i++)
    for (int b = 0; b < width; b++) count[b][(a[i].key >> (8 * b)) & 255]++;
  for (int b = 0; b < width; b++) {
    int64_t *c = count[b];
    if (c[(a[0].key >> (8 * b)) & 255] == n) continue;   /* every key has this byte */
    int64_t sum = 0;
    for (int d = 0; d < 256; d++) {
      int64_t t = c[d];
      c[d] = sum;
      sum += t;
    }
    for (int64_t i = 0; i < n; i++) tmp[c[(a[i].key >> (8 * b)) & 255]++] = a[i];
    item *t = a;
    a = tmp;
    tmp = t;
  }
  return a;
}

/* The order of a topk heap: key, then position. */
static inline bool before(item x, item y) {
  return x.key < y.key || (x.key == y.key && x.pos < y.pos);
}

/* Restores the max-heap h[0, n) below slot i. */
static void sift(item *h, int64_t n, int64_t i) {
  item v = h[i];
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && before(h[c], h[c + 1])) c++;
    if (!before(v, h[c])) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = v;
}

/* Whether none of the 16 floats from x[i] comes before x[top], the heap's top: one vector
** comparison, where most of a long row ends. A tie does not come before (a later position never
** wins one); a NaN on either side says it may. */
#define FLOAT_BLOCK(T)                                                             \
  static bool block_##T(const T *x, int64_t i, int64_t top, bool desc) {           \
    T t = x[top];                                                                  \
    int before = 0;                                                                \
    if (desc)                                                                      \
      for (int q = 0; q < 16; q++) before |= !(x[i + q] <= t);                     \
    else                                                                           \
      for (int q = 0; q < 16; q++) before |= !(x[i + q] >= t);                     \
    return !before;                                                                \
  }
FLOAT_BLOCK(float)
FLOAT_BLOCK(double)

/* Offers the element at position i, of key `key`, to the max-heap h of k. */
static inline void offer(item *h, int64_t k, uint64_t key, int64_t i) {
  if (key < h[0].key) {   /* ties go to the earlier position, already in */
    h[0] = (item){key, i};
    sift(h, k, 0);
  }
}

/* The k first of the row's n elements in order into h[0, k), through a max-heap of k (k >= 1):
** an element after the heap's top is passed over after one comparison. */
static void select_first(const sort_job *j, const char *p, int64_t s, int64_t n, item *h) {
  int64_t k = j->k, i;
  lt_dtype dt = j->dt;
  uint64_t flip = key_flip(j);
  for (i = 0; i < k; i++) h[i] = (item){key_at(dt, flip, p, i * s), i};
  for (int64_t r = k / 2; r-- > 0;) sift(h, k, r);
  if (s == 1 && dt == LT_FLOAT32)
    for (; i + 16 <= n; i += 16) {
      if (block_float((const float *)p, i, h[0].pos, j->desc)) continue;
      for (int q = 0; q < 16; q++) offer(h, k, key_at(LT_FLOAT32, flip, p, i + q), i + q);
    }
  else if (s == 1 && dt == LT_FLOAT64)
    for (; i + 16 <= n; i += 16) {
      if (block_double((const double *)p, i, h[0].pos, j->desc)) continue;
      for (int q = 0; q < 16; q++) offer(h, k, key_at(LT_FLOAT64, flip, p, i + q), i + q);
    }
  for (; i < n; i++) offer(h, k, key_at(dt, flip, p, i * s), i);
  for (int64_t m = k - 1; m > 0; m--) {   /* heapsort: the largest left goes last */
    item t = h[0];
    h[0] = h[m];
    h[m] = t;
    sift(h, m, 0);
  }
}

/* operands: a (n along the dim), values (k; absent for argsort), indices (k) */
static void sort_row(const ltC_rowit *it, char **p, void *ud) {
  sort_job *j = ud;
  int64_t n = it->n, k = j->k;
  if (k == 0) return;
  bool few = k < n && k <= n / 8;
  int64_t need = few ? k : 2 * n;
  item stack[2 * STACK_ITEMS], *buf = stack;
  size_t got;   /* a long row's room from the buffer cache: a fresh malloc of it faulted its
                ** pages in on every call (a fifth of sorting 1M values) */
  if (need > 2 * STACK_ITEMS &&
      !(buf = ltB_cache_alloc((size_t)need * sizeof(item), &got))) {
    atomic_store(&j->oom, true);
    return;
  }
  item *sorted = buf;
  if (few) {
    select_first(j, p[0], it->rs[0], n, buf);
  } else {
    uint64_t flip = key_flip(j);
    for (int64_t i = 0; i < n; i++) buf[i] = (item){key_at(j->dt, flip, p[0], i * it->rs[0]), i};
    if (n <= INSERTION_MAX)
      insertion(buf, n);
    else
      sorted = radix(buf, buf + n, n, key_width(j->dt));
  }
  bool vals = it->nops == 3;
  int64_t es = it->es[0], as = it->rs[0] * es, vs = vals ? it->rs[1] * es : 0;
  int64_t *idx = (int64_t *)p[vals ? 2 : 1], is = it->rs[vals ? 2 : 1];
  if (vals) {   /* typed copies: a memcpy of a size known only here is a call per element */
    const char *src = p[0];
    char *dst = p[1];
    switch (es) {
      case 8:
        for (int64_t i = 0; i < k; i++)
          *(uint64_t *)(dst + i * vs) = *(const uint64_t *)(src + sorted[i].pos * as);
        break;
      case 4:
        for (int64_t i = 0; i < k; i++)
          *(uint32_t *)(dst + i * vs) = *(const uint32_t *)(src + sorted[i].pos * as);
        break;
      default:
        for (int64_t i = 0; i < k; i++) dst[i * vs] = src[sorted[i].pos * as];
        break;
    }
  }
  for (int64_t i = 0; i < k; i++) idx[i * is] = sorted[i].pos + j->base;
  if (buf != stack) ltB_cache_free(buf, (size_t)need * sizeof(item));
}

int ltC_sort(lt_ctx *ctx, const char *name, lt_tensor *values, lt_tensor *indices,
             const lt_tensor *a, int dim, bool descending, int64_t base) {
  const lt_tensor *ops[3] = {a, values ? values : indices, indices};
  ltC_rowit it;
  ltC_rowit_init(&it, values ? 3 : 2, ops, dim);
  sort_job j = {a->dtype, descending, indices->ndim ? indices->size[dim] : 1, base, false};
  if (j.k > 0) ltC_rows_run(ctx, &it, sort_row, &j);
  if (atomic_load(&j.oom)) return ltB_fail(ctx, "%s: out of memory", name);
  return 0;
}

typedef struct search_job {
  lt_dtype dt;
  bool right;
  int64_t n, ss, base;   /* the sorted rows' length and stride */
} search_job;

/* operands: values (m along the row), out (m), sorted (n, the job's); binary search by keys,
** so the order is sort's: NaN the largest, -0 as +0 */
static void search_row(const ltC_rowit *it, char **p, void *ud) {
  const search_job *j = ud;
  int64_t m = it->n, vs = it->rs[0], os = it->rs[1], n = j->n, ss = j->ss;
  int64_t *out = (int64_t *)p[1];
  for (int64_t i = 0; i < m; i++) {
    uint64_t v = key_at(j->dt, 0, p[0], i * vs);
    int64_t lo = 0, hi = n;   /* the answer lies in [lo, hi] */
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      uint64_t s = key_at(j->dt, 0, p[2], mid * ss);
      if (j->right ? s <= v : s < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    out[i * os] = lo + j->base;
  }
}

void ltC_searchsorted(lt_ctx *ctx, lt_tensor *out, const lt_tensor *sorted,
                      const lt_tensor *values, bool right, int64_t base) {
  int last = values->ndim ? values->ndim - 1 : 0;
  const lt_tensor *ops[3] = {values, out, sorted};
  ltC_rowit it;
  ltC_rowit_init(&it, 3, ops, last);
  int sl = sorted->ndim - 1;
  search_job j = {values->dtype, right, sorted->size[sl], sorted->stride[sl], base};
  ltC_rows_run(ctx, &it, search_row, &j);
}

/* ---------------------------------------------------------------- unique of few values */

/* The table's slot for a key: the top `bits` bits of its product with 2^64 / phi, which
** spreads runs of consecutive integers (labels, token ids) over the table. */
static inline uint64_t slot_of(uint64_t key, int bits) {
  return (key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits);
}

/* The scratch of unique_few for up to cap classes: an open-addressing table of 2^maxbits slots
** (key, class), each class's key and first position, the radix sort's room, counts, ranks. */
typedef struct few_scratch {
  uint64_t *tkey;
  int32_t *tid;
  item *cls, *order, *tmp;
  int64_t *cnt, *rank;
} few_scratch;

static size_t few_bytes(int64_t cap, int maxbits) {
  return ((size_t)1 << maxbits) * (sizeof(uint64_t) + sizeof(int32_t)) +
         (size_t)cap * (3 * sizeof(item) + 2 * sizeof(int64_t));
}

static void few_carve(few_scratch *w, char *buf, int64_t cap, int maxbits) {
  size_t slots = (size_t)1 << maxbits;
  w->cls = (item *)buf;
  w->order = w->cls + cap;
  w->tmp = w->order + cap;
  w->tkey = (uint64_t *)(w->tmp + cap);
  w->cnt = (int64_t *)(w->tkey + slots);
  w->rank = w->cnt + cap;
  w->tid = (int32_t *)(w->rank + cap);
}

/* Empties the table's first 2^bits slots and enters the m classes known so far. */
static void few_rehash(few_scratch *w, int64_t m, int bits) {
  uint64_t mask = ((uint64_t)1 << bits) - 1;
  for (uint64_t h = 0; h <= mask; h++) w->tid[h] = -1;
  for (int64_t c = 0; c < m; c++) {
    uint64_t h = slot_of(w->cls[c].key, bits);
    while (w->tid[h] >= 0) h = (h + 1) & mask;
    w->tid[h] = (int32_t)c;
    w->tkey[h] = w->cls[c].key;
  }
}

int64_t ltC_unique_few(lt_ctx *ctx, const lt_tensor *x, int64_t cap, lt_tensor *values,
                       lt_tensor *counts, lt_tensor *inverse, int64_t base) {
  (void)ctx;
  int64_t n = lt_numel(x);
  lt_dtype dt = x->dtype;
  const char *p = ltB_ptr(x);
  int maxbits = 4;
  while (((int64_t)1 << maxbits) < 2 * cap) maxbits++;
  size_t need = few_bytes(cap, maxbits), got;
  char *buf = ltB_cache_alloc(need, &got);
  if (!buf) return -2;
  few_scratch w;
  few_carve(&w, buf, cap, maxbits);
  /* the table starts small and doubles at half full, so that a few classes stay in L1 */
  int bits = maxbits < 10 ? maxbits : 10;
  uint64_t mask = ((uint64_t)1 << bits) - 1;
  few_rehash(&w, 0, bits);
  int64_t *inv = inverse ? (int64_t *)ltB_ptr(inverse) : NULL, m = 0;
  for (int64_t i = 0; i < n; i++) {
    uint64_t k = key_at(dt, 0, p, i), h = slot_of(k, bits);
    int32_t c;
    while ((c = w.tid[h]) >= 0 && w.tkey[h] != k) h = (h + 1) & mask;
    if (c < 0) {   /* a new class, whose value is this first element of it */
      if (m == cap) {
        ltB_cache_free(buf, need);
        return -1;
      }
      c = (int32_t)m;
      w.cls[m] = (item){k, i};
      w.cnt[m++] = 0;
      w.tid[h] = c;
      w.tkey[h] = k;
      if (2 * m > (int64_t)mask && bits < maxbits) {
        mask = ((uint64_t)1 << ++bits) - 1;
        few_rehash(&w, m, bits);
      }
    }
    w.cnt[c]++;
    if (inv) inv[i] = c;
  }
  /* the classes in key order: rank[c] is class c's place among them */
  for (int64_t c = 0; c < m; c++) w.order[c] = (item){w.cls[c].key, c};
  item *sorted = w.order;
  if (m <= INSERTION_MAX)
    insertion(w.order, m);
  else
    sorted = radix(w.order, w.tmp, m, key_width(dt));
  int64_t es = (int64_t)lt_dtype_size(dt);
  char *v = ltB_ptr(values);
  int64_t *cn = counts ? (int64_t *)ltB_ptr(counts) : NULL;
  for (int64_t r = 0; r < m; r++) {
    int64_t c = sorted[r].pos;
    w.rank[c] = r + base;
    memcpy(v + r * es, p + w.cls[c].pos * es, (size_t)es);
    if (cn) cn[r] = w.cnt[c];
  }
  if (inv)
    for (int64_t i = 0; i < n; i++) inv[i] = w.rank[inv[i]];
  ltB_cache_free(buf, need);
  return m;
}
