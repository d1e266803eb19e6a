/*
** serial.h -- checkpoint formats: PyTorch .pt (zip + pickle, and the legacy stream) and
** safetensors. Internal to the core; the Lua binding is src/bind/l_serial.c.
**
** Reading goes bytes -> value tree -> tensors: a loader parses a file into an ltS_sdoc (an arena
** that owns a tree of ltS_sval nodes), materialises every storage the file names into one
** lt_storage each (so views keep sharing memory), and wraps each tensor as a view on it. The
** binding then turns the tree into Lua values. Writing goes the other way: the binding builds a
** tree whose tensor nodes hold lt_tensor references, and a writer serialises it.
**
** Nothing here executes code from a file: the unpickler knows a fixed list of globals (tensor
** rebuild functions, storage classes, OrderedDict, ...) and refuses every other one by name.
** Every size read from a file is checked against the bytes that are really there before any
** memory is allocated for it.
*/
#ifndef LT_SERIAL_H
#define LT_SERIAL_H

#include <stdio.h>

#include "../backend.h"

/* ============================================================ file dtypes
** Element types that files may hold. Lantern computes in float32/float64/int64/bool; a loader
** converts the others (default: float16/bfloat16 -> float32, every integer type -> int64). */
typedef enum ltS_fdtype {
  LT_F_F32, LT_F_F64, LT_F_F16, LT_F_BF16, LT_F_I64, LT_F_I32, LT_F_I16, LT_F_I8, LT_F_U8,
  LT_F_BOOL, LT_F_U16, LT_F_U32, LT_F_U64, LT_F_N
} ltS_fdtype;

const char *ltS_fdtype_name(ltS_fdtype f);          /* "float16", ... */
int ltS_fdtype_parse(const char *name);            /* -1 if unknown */
size_t ltS_fdtype_size(ltS_fdtype f);
ltS_fdtype ltS_fdtype_of(lt_dtype dt);              /* the file dtype of a Lantern dtype */
lt_dtype ltS_fdtype_default(ltS_fdtype f);          /* the Lantern dtype it loads as by default */

typedef struct ltS_load_opts {
  signed char map[LT_F_N];   /* Lantern dtype each file dtype loads as; -1: the default */
  bool verify_crc;           /* check zip CRC-32s (default true) */
} ltS_load_opts;
void ltS_load_opts_init(ltS_load_opts *o);

/* ============================================================ value tree */

typedef enum ltS_skind {
  LT_SV_NONE, LT_SV_BOOL, LT_SV_INT, LT_SV_BIGINT, LT_SV_FLOAT, LT_SV_STR, LT_SV_BYTES,
  LT_SV_LIST, LT_SV_TUPLE, LT_SV_DICT, LT_SV_TENSOR, LT_SV_STORAGE, LT_SV_GLOBAL, LT_SV_DTYPE,
  LT_SV_TENSORS
} ltS_skind;

typedef struct ltS_sval ltS_sval;

/* One entry of a TENSORS node: a flat ordered dict name -> tensor that costs one array slot per
** tensor instead of three nodes (a safetensors file may hold millions of tensors). Names are
** unique (the loader checks) and live in the doc's arena; the doc owns the tensors. */
typedef struct ltS_sflat {
  const char *name;
  size_t len;
  lt_tensor *t;
} ltS_sflat;

/* A storage named by a file: its key, element type and element count, where its bytes are
** (rec_off/rec_len in the source, found by the container parser) and, once materialised, the
** Lantern storage and dtype it became. */
typedef struct ltS_sstorage {
  const char *key;
  const char *rec_name;      /* the record's name in the container, for messages (or NULL) */
  int64_t numel;
  uint64_t rec_off, rec_len;  /* rec_len: uncompressed bytes */
  uint64_t rec_csize;        /* deflated records: compressed bytes at rec_off */
  lt_storage *st;            /* materialised (one reference held by the doc) */
  ltS_fdtype fdt;
  lt_dtype dt;
  uint32_t rec_crc;          /* expected CRC-32 when check_crc */
  bool untyped;              /* torch.UntypedStorage: numel counts bytes until a view types it */
  bool have_rec;
  bool rec_deflated;
  bool check_crc;
} ltS_sstorage;

/* A tensor: when loading, a view (offset/size/stride) on a storage node, wrapped into `t` by
** materialisation; when saving, just `t`. */
typedef struct ltS_stensor {
  ltS_sval *storage;
  int64_t offset;
  int ndim;
  int64_t *size, *stride;    /* ndim each, in the doc's arena (files may hold millions) */
  lt_tensor *t;              /* one reference held by the doc */
} ltS_stensor;

struct ltS_sval {
  ltS_skind kind;
  bool ordered;              /* DICT: a collections.OrderedDict */
  bool requires_grad;        /* TENSOR */
  bool busy;                 /* writer: a tuple being written (cycle check) */
  int code;                  /* GLOBAL: which allowed global; DTYPE: the ltS_fdtype */
  int64_t memo;              /* writer: memo slot + 1, 0 if not memoised yet */
  union {
    bool b;
    int64_t i;
    double f;
    struct { char *p; size_t n; } s;     /* STR, BYTES, GLOBAL name, BIGINT (LE two's complement) */
    struct { ltS_sval **v; size_t n, cap; } seq;                  /* LIST, TUPLE */
    struct { ltS_sval **k, **v; size_t n, cap; ltS_sval *meta; } dict;   /* DICT (+_metadata) */
    ltS_stensor *ten;
    ltS_sstorage *stor;
    struct { ltS_sflat *e; size_t n; } flat;                     /* TENSORS */
  } u;
};

/* The arena that owns a value tree and the tensor/storage references in it. */
typedef struct ltS_sdoc ltS_sdoc;

ltS_sdoc *ltS_sdoc_new(void);
void ltS_sdoc_free(ltS_sdoc *d);
void *ltS_sdoc_alloc(ltS_sdoc *d, size_t n);               /* zeroed; NULL on out-of-memory */
ltS_sval *ltS_sdoc_root(const ltS_sdoc *d);
void ltS_sdoc_set_root(ltS_sdoc *d, ltS_sval *root);
ltS_sval *ltS_sdoc_meta(const ltS_sdoc *d);                 /* safetensors __metadata__ dict */
void ltS_sdoc_set_meta(ltS_sdoc *d, ltS_sval *meta);
/* The doc's TENSORS node with n zeroed entries (one such node per doc; NULL on out-of-memory or
** when the doc has one already). */
ltS_sval *ltS_sdoc_flat(ltS_sdoc *d, size_t n);
/* Bytes of the storages the doc holds (for the collector's accounting). */
size_t ltS_sdoc_loaded_bytes(const ltS_sdoc *d);

/* Node constructors (NULL on out-of-memory). */
ltS_sval *ltS_sv_new(ltS_sdoc *d, ltS_skind kind);
ltS_sval *ltS_sv_int(ltS_sdoc *d, int64_t v);
ltS_sval *ltS_sv_float(ltS_sdoc *d, double v);
ltS_sval *ltS_sv_bool(ltS_sdoc *d, bool v);
ltS_sval *ltS_sv_str(ltS_sdoc *d, ltS_skind kind, const char *p, size_t n);   /* copies */
int ltS_sv_push(ltS_sdoc *d, ltS_sval *seq, ltS_sval *item);                  /* LIST/TUPLE */
int ltS_sv_set(ltS_sdoc *d, ltS_sval *dict, ltS_sval *k, ltS_sval *v);         /* appends a pair */
/* Arena room for a loading tensor's sizes and strides (ndim each). */
int ltS_stensor_dims(ltS_sdoc *d, ltS_stensor *t, int ndim);
/* A saving tensor node holding a new reference to t. */
ltS_sval *ltS_sv_tensor(ltS_sdoc *d, lt_tensor *t, bool requires_grad);
/* A loading storage node for key (one node per distinct key: returns the existing one). */
ltS_sval *ltS_sdoc_storage(ltS_sdoc *d, const char *key, size_t keylen, bool *created);

size_t ltS_sdoc_nstorages(const ltS_sdoc *d);
ltS_sval *ltS_sdoc_storage_at(const ltS_sdoc *d, size_t i);
/* Registers a loading tensor node for materialisation. */
int ltS_sdoc_add_tensor(ltS_sdoc *d, ltS_sval *t);

/* ============================================================ byte sources (source.c) */

/* A file (read with pread) or a memory buffer. */
typedef struct ltS_src {
  const uint8_t *mem;
  int fd;
  uint64_t size;
  const char *name;          /* for messages */
} ltS_src;

int ltS_src_open(lt_ctx *ctx, const char *op, ltS_src *s, const char *path);
void ltS_src_mem(ltS_src *s, const void *mem, size_t n, const char *name);
void ltS_src_close(ltS_src *s);
/* Reads exactly n bytes at off, or fails naming `what`. */
int ltS_src_read(lt_ctx *ctx, const char *op, const ltS_src *s, uint64_t off, void *dst, size_t n,
                 const char *what);

/* Reads records into storages. A record must hold exactly its storage (ltS_record_check), and
** loads share a window on the source, so that many small records in file order cost one read
** between them, and a scratch buffer for dtype conversion. */
typedef struct ltS_rload {
  const ltS_src *src;
  uint8_t *win;              /* NULL: every read goes to the source */
  uint64_t woff;
  size_t wlen;
  uint8_t *scratch;
  size_t scap;
} ltS_rload;
void ltS_rload_init(ltS_rload *r, const ltS_src *src, size_t nrecords);
void ltS_rload_free(ltS_rload *r);
/* Checks s's record against its declared size (resolving an untyped storage to bytes). */
int ltS_record_check(lt_ctx *ctx, const char *op, ltS_sstorage *s, const ltS_src *src,
                     const ltS_load_opts *o);
/* Reads s's checked record into a new storage: s->st (one reference) and s->dt. */
int ltS_record_load(lt_ctx *ctx, const char *op, ltS_rload *r, ltS_sstorage *s,
                    const ltS_load_opts *o, bool big_endian);

/* Materialises every storage of the doc (reading rec_off/rec_len from src, converting dtypes,
** swapping bytes when big_endian) and wraps every tensor node. Every record is checked first,
** so nothing is allocated or read for a file whose records lie about their sizes. */
int ltS_sdoc_materialize(lt_ctx *ctx, const char *op, ltS_sdoc *d, const ltS_src *src,
                         const ltS_load_opts *o, bool big_endian);
/* Converts n elements of file type f (little-endian) into dst of Lantern type dt. */
int ltS_convert_elems(lt_ctx *ctx, const char *op, void *dst, lt_dtype dt, const void *src,
                      ltS_fdtype f, size_t n);
/* Reverses the byte order of n elements of size sz in place. */
void ltS_swap_bytes(void *p, size_t n, size_t sz);

/* ============================================================ CRC-32, zip polynomial (crc32.c) */
uint32_t ltS_crc32(uint32_t crc, const void *data, size_t n);

/* ============================================================ zip */

typedef struct ltS_zentry {
  const char *name;
  uint64_t data_off;         /* absolute offset of the entry's bytes */
  uint64_t csize, usize;
  uint32_t crc;
  uint16_t method;
} ltS_zentry;

typedef struct ltS_zip {
  const ltS_src *src;
  ltS_zentry *e;              /* sorted by name */
  size_t n;
  char *names;               /* entry names, in central-directory order */
} ltS_zip;

int ltS_zip_open(lt_ctx *ctx, const char *op, ltS_zip *z, const ltS_src *src);
void ltS_zip_close(ltS_zip *z);
const ltS_zentry *ltS_zip_find(const ltS_zip *z, const char *name);
const ltS_zentry *ltS_zip_first(const ltS_zip *z);           /* first in directory order */
/* Checks an entry's method (0 stored, 8 deflated) and sizes. */
int ltS_zip_check_method(lt_ctx *ctx, const char *op, const ltS_src *src, const char *name,
                         unsigned method, uint64_t csize, uint64_t usize);
/* A raw deflate stream read piece by piece: compressed bytes are fetched in bounded slices as
** output is asked for, and nothing past the declared uncompressed size is ever produced, so a
** record costs what its reader asks for, not what its compressed bytes could expand to. */
struct z_stream_s;
typedef struct ltS_zin {
  struct z_stream_s *zs;
  const ltS_src *src;
  const char *name;          /* the entry, for messages */
  uint64_t off, cleft;       /* next compressed byte and how many remain */
  uint64_t usize, uleft;     /* declared uncompressed size and how much is still unread */
  uint8_t *in;
  size_t incap;
  bool ended;
} ltS_zin;
int ltS_zin_open(lt_ctx *ctx, const char *op, ltS_zin *z, const ltS_src *src, const char *name,
                 uint64_t off, uint64_t csize, uint64_t usize);
/* Exactly n more uncompressed bytes, or an error naming the entry. */
int ltS_zin_read(lt_ctx *ctx, const char *op, ltS_zin *z, void *dst, size_t n);
/* After usize bytes: checks that the stream ends there and produces nothing more. */
int ltS_zin_finish(lt_ctx *ctx, const char *op, ltS_zin *z);
void ltS_zin_close(ltS_zin *z);
/* Inflates the raw deflate stream at off (csize bytes) into dst, which holds exactly usize. */
int ltS_zip_inflate(lt_ctx *ctx, const char *op, const ltS_src *src, const char *name,
                    uint64_t off, uint64_t csize, uint64_t usize, uint8_t *dst);
/* Reads a whole entry (stored or deflated) into a new malloc'd buffer (CRC checked when
** verify). */
int ltS_zip_read_all(lt_ctx *ctx, const char *op, const ltS_zip *z, const ltS_zentry *e,
                     bool verify, uint8_t **out, size_t *n);

/* ============================================================ atomic output file */

typedef struct ltS_afile {
  FILE *f;
  char *tmp, *path, *dir;
  bool named;        /* tmp names a file on disk (otherwise f is an unnamed O_TMPFILE inode) */
  uint64_t written;  /* bytes written so far */
  uint64_t started;  /* of them, those the disk was told to write (ltS_afile_write) */
} ltS_afile;

/* Creates a temporary file next to path; commit renames it over path, abort removes it.
** Where the filesystem allows, the temporary has no name until commit, so a killed process
** leaves nothing behind; otherwise it is `path.tmp-PID-n`, and open removes those of processes
** that no longer exist. LANTERN_NO_O_TMPFILE=1 in the environment forces the named kind. */
int ltS_afile_open(lt_ctx *ctx, const char *op, ltS_afile *a, const char *path);
/* Appends n bytes at p; false on a write error (errno set). */
bool ltS_afile_write(ltS_afile *a, const void *p, size_t n);
int ltS_afile_commit(lt_ctx *ctx, const char *op, ltS_afile *a);
void ltS_afile_abort(ltS_afile *a);

/* Writer: stored entries, data 64-byte aligned through an "FB" extra field, zip64 end
** records (and zip64 extra fields for entries past 4 GiB). */
typedef struct ltS_zwriter {
  ltS_afile *out;   /* its bytes written so far are the archive's offset */
  struct ltS_zwent { char *name; uint64_t off, size; uint32_t crc; } *e;
  size_t n, cap;
} ltS_zwriter;

void ltS_zw_init(ltS_zwriter *w, ltS_afile *out);
int ltS_zw_add(lt_ctx *ctx, const char *op, ltS_zwriter *w, const char *name, const void *data,
               size_t n);
int ltS_zw_finish(lt_ctx *ctx, const char *op, ltS_zwriter *w);
void ltS_zw_free(ltS_zwriter *w);

/* ============================================================ pickle */

/* Unpickles one pickle from data[0..n) into *out; *used is the number of bytes consumed.
** `legacy`: persistent ids are the 6-tuples of the pre-1.6 stream format. Returns 0, -1 on
** error, or -2 when the bytes ended before the pickle did (the error is set either way; *used
** is then the number of bytes the pickle needs at least, which may exceed n). */
int ltS_unpickle(lt_ctx *ctx, const char *op, ltS_sdoc *d, const uint8_t *data, size_t n,
                 bool legacy, const char *what, ltS_sval **out, size_t *used);

/* A protocol-2 pickle of root (torch.save's data.pkl) into a new malloc'd buffer; the distinct
** storages it refers to are returned in order of their keys "0", "1", ... */
typedef struct ltS_pstorage {
  lt_storage *st;
  lt_dtype dt;
  size_t nbytes;
} ltS_pstorage;
int ltS_pickle(lt_ctx *ctx, const char *op, ltS_sval *root, uint8_t **out, size_t *n,
               ltS_pstorage **storages, size_t *nstorages);

/* ============================================================ formats */

/* torch.save files (zip or legacy stream) from a source into a new doc. */
int ltS_pt_load(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc **out);
/* torch.save-compatible zip of root at path, written atomically. */
int ltS_pt_save(lt_ctx *ctx, const char *path, ltS_sval *root);

/* safetensors: root is an ordered DICT name -> TENSOR; metadata a DICT str -> str (or NULL). */
int ltS_st_load(lt_ctx *ctx, const ltS_src *src, const ltS_load_opts *o, ltS_sdoc **out);
int ltS_st_save(lt_ctx *ctx, const char *path, ltS_sval *tensors, ltS_sval *metadata);
/* Whether the first bytes look like a safetensors header. */
bool ltS_st_sniff(const uint8_t *head, size_t n, uint64_t file_size);

#endif
