/*
** afile.c -- the atomic output file of the checkpoint writers: a temporary (unnamed where the
** system allows) renamed over the target only once every byte is written and synced.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serial.h"

/* ============================================================ atomic output file */

/* Numbers the named temporaries of this process; atomic because several lua_States may save
** from different threads at once. */
static unsigned afile_counter;

/* The directory holding path, malloc'd ("." when path has no slash). */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t n = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, slash ? path : ".", n);
  d[n] = '\0';
  return d;
}

/* A process killed while it held a named temporary (the fallback below, the instant between
** link and rename, or a Lantern that predates unnamed temporaries) leaves `base.tmp-PID-n`
** behind for good, so each save of path removes those whose PID no longer exists. Only ESRCH
** proves that: EPERM is a live process of another user, and a live writer's file must stay.
** Names that do not match the pattern exactly are never touched. The PIDs are this PID
** namespace's, so a directory shared with another container or host can lose a live named
** temporary of theirs: that save then fails at its rename, and no file is torn. */
static void remove_stale_tmps(const char *dir, const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t nb = strlen(base);
  if (nb == 0) return;
  DIR *d = opendir(dir);
  if (!d) return;
  long long self = getpid();
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *s = de->d_name;
    if (strncmp(s, base, nb) != 0 || strncmp(s + nb, ".tmp-", 5) != 0) continue;
    s += nb + 5;
    long long pid = 0;
    const char *q = s;
    for (; *q >= '0' && *q <= '9' && pid <= INT_MAX; q++) pid = pid * 10 + (*q - '0');
    if (q == s || *q != '-' || pid <= 0 || pid > INT_MAX || pid == self) continue;
    const char *c = ++q;
    while (*q >= '0' && *q <= '9') q++;
    if (q == c || *q != '\0') continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    /* Best effort: a file we may not remove is no reason to fail the save. */
    (void)unlinkat(dirfd(d), de->d_name, 0);
  }
  closedir(d);
}

/* LANTERN_NO_O_TMPFILE=1 makes every save take the named-temporary path, as on a filesystem
** without O_TMPFILE, so that path (and its stale-file cleanup) can be exercised anywhere; the
** specs use it. */
static bool unnamed_disabled(void) {
  const char *e = getenv("LANTERN_NO_O_TMPFILE");
  return e && *e && strcmp(e, "0") != 0;
}

/* An unnamed file in dir (Linux O_TMPFILE): it has no directory entry until commit links one,
** so the kernel reclaims it when the process dies however it dies. The mode goes through the
** umask (and a default ACL) exactly as open(O_CREAT) does, so the result gets the same
** permissions as before. Fails with EOPNOTSUPP where it cannot work. */
static int open_unnamed(const char *dir) {
#ifdef O_TMPFILE
  int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  /* Commit links the file through /proc/self/fd, the only way that needs no privilege; where
  ** /proc is not mounted that would fail after the whole file was written, so find out now. */
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  struct stat a, b;
  if (fstat(fd, &a) != 0 || stat(proc, &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    close(fd);
    errno = EOPNOTSUPP;
    return -1;
  }
  return fd;
#else
  (void)dir;
  errno = EOPNOTSUPP;
  return -1;
#endif
}

int ltS_afile_open(lt_ctx *ctx, const char *op, ltS_afile *a, const char *path) {
  memset(a, 0, sizeof *a);
  size_t n = strlen(path);
  a->path = malloc(n + 1);
  a->tmp = malloc(n + 64);
  a->dir = dir_of(path);
  if (!a->path || !a->tmp || !a->dir) {
    free(a->path);
    free(a->tmp);
    free(a->dir);
    return ltB_fail(ctx, "%s: out of memory", op);
  }
  memcpy(a->path, path, n + 1);
  remove_stale_tmps(a->dir, path);
  int fd = -1, e = EOPNOTSUPP;
  if (!unnamed_disabled()) {
    fd = open_unnamed(a->dir);
    e = errno;
  }
  /* EISDIR and EINVAL are what kernels and filesystems without O_TMPFILE answer; any other
  ** error (no such directory, no permission, no space) would stop a named file too. */
  if (fd < 0 && (e == EOPNOTSUPP || e == EISDIR || e == EINVAL)) {
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
      unsigned c = __atomic_fetch_add(&afile_counter, 1, __ATOMIC_RELAXED);
      snprintf(a->tmp, n + 64, "%s.tmp-%ld-%u", path, (long)getpid(), c);
      fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0 && errno != EEXIST) break;
    }
    e = errno;
    a->named = fd >= 0;
  }
  if (fd < 0) {
    free(a->path);
    free(a->tmp);
    free(a->dir);
    memset(a, 0, sizeof *a);
    return ltB_fail(ctx, "%s: cannot create a file next to '%s': %s", op, path, strerror(e));
  }
  a->f = fdopen(fd, "wb");
  if (!a->f) {
    close(fd);
    if (a->named) unlink(a->tmp);
    free(a->path);
    free(a->tmp);
    free(a->dir);
    memset(a, 0, sizeof *a);
    return ltB_fail(ctx, "%s: out of memory", op);
  }
  return 0;
}

/* Gives the unnamed file a unique name next to path. linkat cannot replace an existing file,
** so the name is a fresh temporary and rename then replaces path in one step; the temporary
** exists only between these two calls. */
static int link_unnamed(ltS_afile *a) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(a->f));
  size_t n = strlen(a->path);
  for (int tries = 0; tries < 100; tries++) {
    unsigned c = __atomic_fetch_add(&afile_counter, 1, __ATOMIC_RELAXED);
    snprintf(a->tmp, n + 64, "%s.tmp-%ld-%u", a->path, (long)getpid(), c);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, a->tmp, AT_SYMLINK_FOLLOW) == 0) {
      a->named = true;
      return 0;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

/* Makes the rename durable: until the directory reaches the disk, a crash can bring back the
** old file. Best effort only, since every reader already sees the new file and some
** filesystems refuse fsync on a directory; failing the save now would be a lie. */
static void sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fsync(fd);
  close(fd);
}

/* The disk is told to start writing every WRITEBACK bytes (sync_file_range, which does not wait
** for the disk), so that it works while the rest is produced and commit's fsync waits for the last
** stretch only. Written all at the end, a 100 MB checkpoint waited 43 ms in fsync after 25 ms
** of writing (ext4 on the Zen 4 EPYC's disk here). Large buffers go out in pieces of that
** size, so one big tensor is handed over as it is written too. */
#define WRITEBACK ((size_t)4 << 20)

bool ltS_afile_write(ltS_afile *a, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    size_t k = n < WRITEBACK ? n : WRITEBACK;
    if (fwrite(c, 1, k, a->f) != k) return false;
    c += k;
    n -= k;
    a->written += k;
    if (a->written - a->started >= WRITEBACK) {
      if (fflush(a->f) != 0) return false;
      /* advice only: where it is missing or fails, commit's fsync does all the work */
#ifdef SYNC_FILE_RANGE_WRITE
      (void)sync_file_range(fileno(a->f), (off_t)a->started, (off_t)(a->written - a->started),
                            SYNC_FILE_RANGE_WRITE);
#endif
      a->started = a->written;
    }
  }
  return true;
}

int ltS_afile_commit(lt_ctx *ctx, const char *op, ltS_afile *a) {
  /* The data must be on disk before the rename publishes it, or a crash could leave path
  ** naming a file with missing blocks. */
  int bad = fflush(a->f) != 0 || ferror(a->f) || fsync(fileno(a->f)) != 0;
  int e = errno;
  if (bad && e == 0) e = EIO; /* ferror from an earlier fwrite whose errno is gone */
  if (!bad && !a->named && link_unnamed(a) != 0) {
    bad = 1;
    e = errno;
  }
  if (fclose(a->f) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  a->f = NULL;
  if (!bad && rename(a->tmp, a->path) != 0) {
    bad = 1;
    e = errno;
  }
  if (bad) {
    if (a->named) unlink(a->tmp);
    ltB_fail(ctx, "%s: cannot write '%s': %s", op, a->path, strerror(e));
  } else {
    sync_dir(a->dir);
  }
  free(a->tmp);
  free(a->path);
  free(a->dir);
  memset(a, 0, sizeof *a);
  return bad ? -1 : 0;
}

void ltS_afile_abort(ltS_afile *a) {
  if (a->f) fclose(a->f);
  if (a->named && a->tmp) unlink(a->tmp);
  free(a->tmp);
  free(a->path);
  free(a->dir);
  memset(a, 0, sizeof *a);
}
