/*
** serial.h -- checkpoint formats: PyTorch .pt (zip + pickle, and the legacy stream) and
** safetensors. Internal to the core; the Lua binding is src/bind/l_serial.c.
**
** Reading goes bytes -> value tree -> tensors: a loader parses a file into an lt_sdoc (an arena
** that owns a tree of lt_sval nodes), materialises every storage the file names into one
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
typedef enum lt_fdtype {
  LT_F_F32, LT_F_F64, LT_F_F16, LT_F_BF16, LT_F_I64, LT_F_I32, LT_F_I16, LT_F_I8, LT_F_U8,
  LT_F_BOOL, LT_F_U16, LT_F_U32, LT_F_U64, LT_F_N
} lt_fdtype;

const char *lt_fdtype_name(lt_fdtype f);          /* "float16", ... */
int lt_fdtype_parse(const char *name);            /* -1 if unknown */
size_t lt_fdtype_size(lt_fdtype f);
lt_fdtype lt_fdtype_of(lt_dtype dt);              /* the file dtype of a Lantern dtype */
lt_dtype lt_fdtype_default(lt_fdtype f);          /* the Lantern dtype it loads as by default */

typedef struct lt_load_opts {
  signed char map[LT_F_N];   /* Lantern dtype each file dtype loads as; -1: the default */
  bool verify_crc;           /* check zip CRC-32s (default true) */
} lt_load_opts;
void lt_load_opts_init(lt_load_opts *o);

/* ============================================================ value tree */

typedef enum lt_skind {
  LT_SV_NONE, LT_SV_BOOL, LT_SV_INT, LT_SV_BIGINT, LT_SV_FLOAT, LT_SV_STR, LT_SV_BYTES,
  LT_SV_LIST, LT_SV_TUPLE, LT_SV_DICT, LT_SV_TENSOR, LT_SV_STORAGE, LT_SV_GLOBAL, LT_SV_DTYPE,
  LT_SV_TENSORS
} lt_skind;

typedef struct lt_sval lt_sval;

/* One entry of a TENSORS node: a flat ordered dict name -> tensor that costs one array slot per
** tensor instead of three nodes (a safetensors file may hold millions of tensors). Names are
** unique (the loader checks) and live in the doc's arena; the doc owns the tensors. */
typedef struct lt_sflat {
  const char *name;
  size_t len;
  lt_tensor *t;
} lt_sflat;

/* A storage named by a file: its key, element type and element count, where its bytes are
** (rec_off/rec_len in the source, found by the container parser) and, once materialised, the
** Lantern storage and dtype it became. */
typedef struct lt_sstorage {
  const char *key;
  const char *rec_name;      /* the record's name in the container, for messages (or NULL) */
  int64_t numel;
  uint64_t rec_off, rec_len;  /* rec_len: uncompressed bytes */
  uint64_t rec_csize;        /* deflated records: compressed bytes at rec_off */
  lt_storage *st;            /* materialised (one reference held by the doc) */
  lt_fdtype fdt;
  lt_dtype dt;
  uint32_t rec_crc;          /* expected CRC-32 when check_crc */
  bool untyped;              /* torch.UntypedStorage: numel counts bytes until a view types it */
  bool have_rec;
  bool rec_deflated;
  bool check_crc;
} lt_sstorage;

/* A tensor: when loading, a view (offset/size/stride) on a storage node, wrapped into `t` by
** materialisation; when saving, just `t`. */
typedef struct lt_stensor {
  lt_sval *storage;
  int64_t offset;
  int ndim;
  int64_t *size, *stride;    /* ndim each, in the doc's arena (files may hold millions) */
  lt_tensor *t;              /* one reference held by the doc */
} lt_stensor;

struct lt_sval {
  lt_skind kind;
  bool ordered;              /* DICT: a collections.OrderedDict */
  bool requires_grad;        /* TENSOR */
  bool busy;                 /* writer: a tuple being written (cycle check) */
  int code;                  /* GLOBAL: which allowed global; DTYPE: the lt_fdtype */
  int64_t memo;              /* writer: memo slot + 1, 0 if not memoised yet */
  union {
    bool b;
    int64_t i;
    double f;
    struct { char *p; size_t n; } s;     /* STR, BYTES, GLOBAL name, BIGINT (LE two's complement) */
    struct { lt_sval **v; size_t n, cap; } seq;                  /* LIST, TUPLE */
    struct { lt_sval **k, **v; size_t n, cap; lt_sval *meta; } dict;   /* DICT (+_metadata) */
    lt_stensor *ten;
    lt_sstorage *stor;
    struct { lt_sflat *e; size_t n; } flat;                     /* TENSORS */
  } u;
};

/* The arena that owns a value tree and the tensor/storage references in it. */
typedef struct lt_sdoc lt_sdoc;

lt_sdoc *lt_sdoc_new(void);
void lt_sdoc_free(lt_sdoc *d);
void *lt_sdoc_alloc(lt_sdoc *d, size_t n);               /* zeroed; NULL on out-of-memory */
lt_sval *lt_sdoc_root(const lt_sdoc *d);
void lt_sdoc_set_root(lt_sdoc *d, lt_sval *root);
lt_sval *lt_sdoc_meta(const lt_sdoc *d);                 /* safetensors __metadata__ dict */
void lt_sdoc_set_meta(lt_sdoc *d, lt_sval *meta);
/* The doc's TENSORS node with n zeroed entries (one such node per doc; NULL on out-of-memory or
** when the doc has one already). */
lt_sval *lt_sdoc_flat(lt_sdoc *d, size_t n);
/* Bytes of the storages the doc holds (for the collector's accounting). */
size_t lt_sdoc_loaded_bytes(const lt_sdoc *d);

/* Node constructors (NULL on out-of-memory). */
lt_sval *lt_sv_new(lt_sdoc *d, lt_skind kind);
lt_sval *lt_sv_int(lt_sdoc *d, int64_t v);
lt_sval *lt_sv_float(lt_sdoc *d, double v);
lt_sval *lt_sv_bool(lt_sdoc *d, bool v);
lt_sval *lt_sv_str(lt_sdoc *d, lt_skind kind, const char *p, size_t n);   /* copies */
int lt_sv_push(lt_sdoc *d, lt_sval *seq, lt_sval *item);                  /* LIST/TUPLE */
int lt_sv_set(lt_sdoc *d, lt_sval *dict, lt_sval *k, lt_sval *v);         /* appends a pair */
/* Arena room for a loading tensor's sizes and strides (ndim each). */
int lt_stensor_dims(lt_sdoc *d, lt_stensor *t, int ndim);
/* A saving tensor node holding a new reference to t. */
lt_sval *lt_sv_tensor(lt_sdoc *d, lt_tensor *t, bool requires_grad);
/* A loading storage node for key (one node per distinct key: returns the existing one). */
lt_sval *lt_sdoc_storage(lt_sdoc *d, const char *key, size_t keylen, bool *created);

size_t lt_sdoc_nstorages(const lt_sdoc *d);
lt_sval *lt_sdoc_storage_at(const lt_sdoc *d, size_t i);
/* Registers a loading tensor node for materialisation. */
int lt_sdoc_add_tensor(lt_sdoc *d, lt_sval *t);

/* ============================================================ byte sources */

/* A file (read with pread) or a memory buffer. */
typedef struct lt_src {
  const uint8_t *mem;
  int fd;
  uint64_t size;
  const char *name;          /* for messages */
} lt_src;

int lt_src_open(lt_ctx *ctx, const char *op, lt_src *s, const char *path);
void lt_src_mem(lt_src *s, const void *mem, size_t n, const char *name);
void lt_src_close(lt_src *s);
/* Reads exactly n bytes at off, or fails naming `what`. */
int lt_src_read(lt_ctx *ctx, const char *op, const lt_src *s, uint64_t off, void *dst, size_t n,
                const char *what);

/* Reads records into storages. A record must hold exactly its storage (lt_record_check), and
** loads share a window on the source, so that many small records in file order cost one read
** between them, and a scratch buffer for dtype conversion. */
typedef struct lt_rload {
  const lt_src *src;
  uint8_t *win;              /* NULL: every read goes to the source */
  uint64_t woff;
  size_t wlen;
  uint8_t *scratch;
  size_t scap;
} lt_rload;
void lt_rload_init(lt_rload *r, const lt_src *src, size_t nrecords);
void lt_rload_free(lt_rload *r);
/* Checks s's record against its declared size (resolving an untyped storage to bytes). */
int lt_record_check(lt_ctx *ctx, const char *op, lt_sstorage *s, const lt_src *src,
                    const lt_load_opts *o);
/* Reads s's checked record into a new storage: s->st (one reference) and s->dt. */
int lt_record_load(lt_ctx *ctx, const char *op, lt_rload *r, lt_sstorage *s,
                   const lt_load_opts *o, bool big_endian);

/* Materialises every storage of the doc (reading rec_off/rec_len from src, converting dtypes,
** swapping bytes when big_endian) and wraps every tensor node. Every record is checked first,
** so nothing is allocated or read for a file whose records lie about their sizes. */
int lt_sdoc_materialize(lt_ctx *ctx, const char *op, lt_sdoc *d, const lt_src *src,
                        const lt_load_opts *o, bool big_endian);
/* Converts n elements of file type f (little-endian) into dst of Lantern type dt. */
int lt_convert_elems(lt_ctx *ctx, const char *op, void *dst, lt_dtype dt, const void *src,
                     lt_fdtype f, size_t n);
/* Reverses the byte order of n elements of size sz in place. */
void lt_swap_bytes(void *p, size_t n, size_t sz);

/* ============================================================ CRC-32 (zip polynomial) */
uint32_t lt_crc32(uint32_t crc, const void *data, size_t n);

/* ============================================================ zip */

typedef struct lt_zentry {
  const char *name;
  uint64_t data_off;         /* absolute offset of the entry's bytes */
  uint64_t csize, usize;
  uint32_t crc;
  uint16_t method;
} lt_zentry;

typedef struct lt_zip {
  const lt_src *src;
  lt_zentry *e;              /* sorted by name */
  size_t n;
  char *names;               /* entry names, in central-directory order */
} lt_zip;

int lt_zip_open(lt_ctx *ctx, const char *op, lt_zip *z, const lt_src *src);
void lt_zip_close(lt_zip *z);
const lt_zentry *lt_zip_find(const lt_zip *z, const char *name);
const lt_zentry *lt_zip_first(const lt_zip *z);           /* first in directory order */
/* Checks an entry's method (0 stored, 8 deflated) and sizes. */
int lt_zip_check_method(lt_ctx *ctx, const char *op, const lt_src *src, const char *name,
                        unsigned method, uint64_t csize, uint64_t usize);
/* A raw deflate stream read piece by piece: compressed bytes are fetched in bounded slices as
** output is asked for, and nothing past the declared uncompressed size is ever produced, so a
** record costs what its reader asks for, not what its compressed bytes could expand to. */
struct z_stream_s;
typedef struct lt_zin {
  struct z_stream_s *zs;
  const lt_src *src;
  const char *name;          /* the entry, for messages */
  uint64_t off, cleft;       /* next compressed byte and how many remain */
  uint64_t usize, uleft;     /* declared uncompressed size and how much is still unread */
  uint8_t *in;
  size_t incap;
  bool ended;
} lt_zin;
int lt_zin_open(lt_ctx *ctx, const char *op, lt_zin *z, const lt_src *src, const char *name,
                uint64_t off, uint64_t csize, uint64_t usize);
/* Exactly n more uncompressed bytes, or an error naming the entry. */
int lt_zin_read(lt_ctx *ctx, const char *op, lt_zin *z, void *dst, size_t n);
/* After usize bytes: checks that the stream ends there and produces nothing more. */
int lt_zin_finish(lt_ctx *ctx, const char *op, lt_zin *z);
void lt_zin_close(lt_zin *z);
/* Inflates the raw deflate stream at off (csize bytes) into dst, which holds exactly usize. */
int lt_zip_inflate(lt_ctx *ctx, const char *op, const lt_src *src, const char *name,
                   uint64_t off, uint64_t csize, uint64_t usize, uint8_t *dst);
/* Reads a whole entry (stored or deflated) into a new malloc'd buffer (CRC checked when
** verify). */
int lt_zip_read_all(lt_ctx *ctx, const char *op, const lt_zip *z, const lt_zentry *e,
                    bool verify, uint8_t **out, size_t *n);

/* Writer: stored entries, data 64-byte aligned through an "FB" extra field, zip64 end
** records (and zip64 extra fields for entries past 4 GiB). */
typedef struct lt_zwriter {
  FILE *f;
  uint64_t pos;
  struct lt_zwent { char *name; uint64_t off, size; uint32_t crc; } *e;
  size_t n, cap;
} lt_zwriter;

void lt_zw_init(lt_zwriter *w, FILE *f);
int lt_zw_add(lt_ctx *ctx, const char *op, lt_zwriter *w, const char *name, const void *data,
              size_t n);
int lt_zw_finish(lt_ctx *ctx, const char *op, lt_zwriter *w);
void lt_zw_free(lt_zwriter *w);

/* ============================================================ atomic output file */

typedef struct lt_afile {
  FILE *f;
  char *tmp, *path, *dir;
  bool named; /* tmp names a file on disk (otherwise f is an unnamed O_TMPFILE inode) */
} lt_afile;

/* Creates a temporary file next to path; commit renames it over path, abort removes it.
** Where the filesystem allows, the temporary has no name until commit, so a killed process
** leaves nothing behind; otherwise it is `path.tmp-PID-n`, and open removes those of processes
** that no longer exist. LANTERN_NO_O_TMPFILE=1 in the environment forces the named kind. */
int lt_afile_open(lt_ctx *ctx, const char *op, lt_afile *a, const char *path);
int lt_afile_commit(lt_ctx *ctx, const char *op, lt_afile *a);
void lt_afile_abort(lt_afile *a);

/* ============================================================ pickle */

/* Unpickles one pickle from data[0..n) into *out; *used is the number of bytes consumed.
** `legacy`: persistent ids are the 6-tuples of the pre-1.6 stream format. Returns 0, -1 on
** error, or -2 when the bytes ended before the pickle did (the error is set either way; *used
** is then the number of bytes the pickle needs at least, which may exceed n). */
int lt_unpickle(lt_ctx *ctx, const char *op, lt_sdoc *d, const uint8_t *data, size_t n,
                bool legacy, const char *what, lt_sval **out, size_t *used);

/* A protocol-2 pickle of root (torch.save's data.pkl) into a new malloc'd buffer; the distinct
** storages it refers to are returned in order of their keys "0", "1", ... */
typedef struct lt_pstorage {
  lt_storage *st;
  lt_dtype dt;
  size_t nbytes;
} lt_pstorage;
int lt_pickle(lt_ctx *ctx, const char *op, lt_sval *root, uint8_t **out, size_t *n,
              lt_pstorage **storages, size_t *nstorages);

/* ============================================================ formats */

/* torch.save files (zip or legacy stream) from a source into a new doc. */
int lt_pt_load(lt_ctx *ctx, const lt_src *src, const lt_load_opts *o, lt_sdoc **out);
/* torch.save-compatible zip of root at path, written atomically. */
int lt_pt_save(lt_ctx *ctx, const char *path, lt_sval *root);

/* safetensors: root is an ordered DICT name -> TENSOR; metadata a DICT str -> str (or NULL). */
int lt_st_load(lt_ctx *ctx, const lt_src *src, const lt_load_opts *o, lt_sdoc **out);
int lt_st_save(lt_ctx *ctx, const char *path, lt_sval *tensors, lt_sval *metadata);
/* Whether the first bytes look like a safetensors header. */
bool lt_st_sniff(const uint8_t *head, size_t n, uint64_t file_size);

#endif
