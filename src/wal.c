/* wal.c - the write-ahead log (see wal.h for the format and the contract).
 *
 * DESIGN: the owner thread does everything but the EVERYSEC fdatasync. It
 * keeps the segments as an array of (first LSN, size), the active one last,
 * and the group being built as one byte buffer of finished records (header,
 * CRC and payload), so a commit is one pwrite() of that buffer at the end of
 * the active segment. Invariants between calls:
 *   - segs[nseg-1] is the active segment, open as fd, and its size is the
 *     offset just past the last committed record: a failed write is cut back
 *     to it, so no partial record ever sits before a later one;
 *   - committed + 1 == the next LSN once the buffer is empty;
 *   - written/synced (under mu) are the last LSN handed to the kernel and the
 *     last LSN fdatasync'ed; the sync thread reads fd and written under mu and
 *     syncs a dup() of fd outside it, so the owner never waits for a flush and
 *     may swap fd (rollover) at any time. */
#include "wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "atomic_file.h"
#include "bytes.h"

static const char MAGIC[8] = {'O', 'M', 'L', 'W', 'A', 'L', '0', '1'};
#define HDR 40u  /* segment header */
#define RHDR 17u /* record header: len, crc, lsn, type */
#define NAME_LEN 24 /* "wal-" + 16 hex + ".log" */

int (*oml__wal_fdatasync)(int fd) = fdatasync;

typedef struct seg {
    uint64_t first, size;
} seg;

struct oml_wal {
    char *dir;
    oml_wal_options opt;
    seg *segs;
    uint32_t nseg, capseg;
    int fd;
    uint64_t salt; /* of the active segment; seeds its records' CRCs */
    uint64_t committed;
    uint64_t next_lsn;
    uint8_t *buf; /* the group being built */
    size_t len, cap;
    uint64_t bytes;
    int broken;
    char broken_msg[128];

    pthread_mutex_t mu; /* guards fd (for the thread), written, synced, sync_errno, stop */
    pthread_cond_t cv;
    pthread_t thread;
    int thread_running, stop, sync_errno;
    uint64_t written, synced;
};

/* ---- files ---- */

static void seg_name(char out[NAME_LEN + 1], uint64_t first)
{
    snprintf(out, NAME_LEN + 1, "wal-%016" PRIx64 ".log", first);
}

static int parse_name(const char *name, uint64_t *first)
{
    if (strlen(name) != NAME_LEN || strncmp(name, "wal-", 4) != 0 || strcmp(name + 20, ".log") != 0)
        return 0;
    uint64_t v = 0;
    for (int i = 4; i < 20; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint64_t)d;
    }
    *first = v;
    return 1;
}

static void path_of(const oml_wal *w, char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", w->dir, name);
}

static int write_at(int fd, const uint8_t *b, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t k = pwrite(fd, b, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        b += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

static int read_file(const char *path, uint8_t **buf, size_t *cap, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return OML_EIO;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return OML_EIO;
    }
    size_t n = (size_t)st.st_size;
    if (n > *cap) {
        uint8_t *nb = realloc(*buf, n);
        if (nb == NULL) {
            close(fd);
            return OML_ENOMEM;
        }
        *buf = nb;
        *cap = n;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, *buf + got, n - got, (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break; /* shrank under us: take what is there */
        got += (size_t)k;
    }
    int e = errno;
    close(fd);
    errno = e;
    *size = got;
    return OML_OK;
}

static void encode_header(uint8_t h[HDR], uint64_t first, uint64_t salt)
{
    memcpy(h, MAGIC, 8);
    oml_le32_store(h + 8, OML_WAL_VERSION);
    oml_le32_store(h + 12, HDR);
    oml_le64_store(h + 16, first);
    oml_le64_store(h + 24, salt);
    oml_le32_store(h + 32, 0); /* reserved */
    oml_le32_store(h + 36, (uint32_t)crc32(0L, h, 36));
}

static uint64_t new_salt(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 32;
    }
    return s;
}

/* Creates segment `first` complete (tmp, header, fdatasync, rename, directory
 * fsync) and returns its fd, open for writing. */
static int create_segment(oml_wal *w, uint64_t first, int *fd_out, oml_diag *diag)
{
    char name[NAME_LEN + 1], path[4096], tmp[4112];
    seg_name(name, first);
    path_of(w, path, sizeof path, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    uint8_t h[HDR];
    encode_header(h, first, w->salt);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write_at(fd, h, HDR, 0) != 0 || oml__wal_fdatasync(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        return oml_diag_set(diag, OML_EIO, "wal", "cannot create WAL segment %s: %s", path, strerror(e));
    }
    if (oml_fsync_dir(w->dir) != 0) {
        int e = errno;
        close(fd);
        return oml_diag_set(diag, OML_EIO, "wal", "cannot fsync WAL directory %s: %s", w->dir, strerror(e));
    }
    *fd_out = fd;
    return OML_OK;
}

static int push_seg(oml_wal *w, uint64_t first, uint64_t size)
{
    if (w->nseg == w->capseg) {
        uint32_t nc = w->capseg ? w->capseg * 2 : 16;
        seg *ns = realloc(w->segs, nc * sizeof *ns);
        if (ns == NULL)
            return OML_ENOMEM;
        w->segs = ns;
        w->capseg = nc;
    }
    w->segs[w->nseg++] = (seg){first, size};
    return OML_OK;
}

static int cmp_seg(const void *a, const void *b)
{
    uint64_t x = ((const seg *)a)->first, y = ((const seg *)b)->first;
    return x < y ? -1 : x > y;
}

/* ---- records ---- */

static uint32_t record_crc(uint64_t salt, const uint8_t *r, uint32_t len)
{
    uint8_t le_salt[8];
    oml_le64_store(le_salt, salt);
    uLong c = crc32(crc32(0L, le_salt, 8), r, 4);
    return (uint32_t)crc32(c, r + 8, (uInt)(RHDR - 8 + len));
}

/* NULL if a valid record with LSN `expect` starts at off, else why not. */
static const char *check_record(uint64_t salt, const uint8_t *b, size_t size, size_t off, uint64_t expect,
                                uint32_t *len)
{
    if (size - off < RHDR)
        return "short record header";
    uint32_t n = oml_le32_load(b + off), crc = oml_le32_load(b + off + 4);
    uint64_t lsn = oml_le64_load(b + off + 8);
    if (n > OML_WAL_MAX_PAYLOAD || n > size - off - RHDR)
        return "record length runs past the end of the file";
    if (record_crc(salt, b + off, n) != crc)
        return "checksum mismatch";
    if (lsn != expect)
        return "unexpected LSN";
    *len = n;
    return NULL;
}

/* Is there a valid record with LSN >= expect anywhere in [from, size)? Then
 * the bad record at `from` is damage in the middle, not a torn tail. Only
 * offsets holding a plausible LSN pay for a CRC. */
static int later_valid(uint64_t salt, const uint8_t *b, size_t size, size_t from, uint64_t expect,
                       size_t *at, uint64_t *at_lsn)
{
    uint64_t span = (size - from) / RHDR + 1;
    for (size_t o = from; o + RHDR <= size; o++) {
        uint64_t lsn = oml_le64_load(b + o + 8);
        if (lsn < expect || lsn - expect > span)
            continue;
        uint32_t n = oml_le32_load(b + o), crc = oml_le32_load(b + o + 4);
        if (n > size - o - RHDR || record_crc(salt, b + o, n) != crc)
            continue;
        *at = o;
        *at_lsn = lsn;
        return 1;
    }
    return 0;
}

/* ---- the sync thread (EVERYSEC) ---- */

static void *sync_main(void *arg)
{
    oml_wal *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &ts) != ETIMEDOUT)
            ;
        if (w->stop || w->written <= w->synced || w->sync_errno)
            continue;
        uint64_t target = w->written;
        int fd = dup(w->fd);
        pthread_mutex_unlock(&w->mu);
        int rc = fd >= 0 ? oml__wal_fdatasync(fd) : -1;
        int e = errno;
        if (fd >= 0)
            close(fd);
        pthread_mutex_lock(&w->mu);
        if (rc != 0)
            w->sync_errno = e ? e : EIO;
        else if (target > w->synced)
            w->synced = target;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int start_thread(oml_wal *w)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        return OML_ENOMEM;
    if (pthread_create(&w->thread, NULL, sync_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        return OML_ENOMEM;
    }
    w->thread_running = 1;
    return OML_OK;
}

/* ---- the owner's side ---- */

static int set_broken(oml_wal *w, oml_diag *diag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int set_broken(oml_wal *w, oml_diag *diag, const char *fmt, ...)
{
    w->broken = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->broken_msg, sizeof w->broken_msg, fmt, ap);
    va_end(ap);
    return oml_diag_set(diag, OML_EIO, "wal", "%s", w->broken_msg);
}

static int check_broken(oml_wal *w, oml_diag *diag)
{
    if (!w->broken) {
        pthread_mutex_lock(&w->mu);
        int e = w->sync_errno;
        pthread_mutex_unlock(&w->mu);
        if (e == 0)
            return OML_OK;
        set_broken(w, NULL, "background fdatasync of the WAL failed: %s", strerror(e));
    }
    return oml_diag_set(diag, OML_EIO, "wal", "%s (the log refuses writes until reopened)",
                        w->broken_msg);
}

static void drop_group(oml_wal *w)
{
    w->len = 0;
    w->next_lsn = w->committed + 1;
}

static int rollover(oml_wal *w, oml_diag *diag)
{
    if (oml__wal_fdatasync(w->fd) != 0)
        return set_broken(w, diag, "cannot fdatasync the WAL: %s", strerror(errno));
    int rc = push_seg(w, w->committed + 1, HDR);
    if (rc != OML_OK)
        return rc;
    w->nseg--; /* reserved; pushed for real below */
    int fd;
    rc = create_segment(w, w->committed + 1, &fd, diag);
    if (rc != OML_OK)
        return rc;
    pthread_mutex_lock(&w->mu);
    int old = w->fd;
    w->fd = fd;
    w->synced = w->committed;
    pthread_mutex_unlock(&w->mu);
    close(old);
    w->nseg++;
    w->bytes += HDR;
    return OML_OK;
}

int oml_wal_append(oml_wal *w, uint8_t type, const void *payload, size_t len, uint64_t *lsn)
{
    if (w->broken)
        return OML_EIO;
    if (len > OML_WAL_MAX_PAYLOAD || (len > 0 && payload == NULL))
        return OML_EINVAL;
    size_t need = w->len + RHDR + len;
    if (need > w->cap) {
        size_t nc = w->cap ? w->cap : 4096;
        while (nc < need)
            nc *= 2;
        uint8_t *nb = realloc(w->buf, nc);
        if (nb == NULL)
            return OML_ENOMEM;
        w->buf = nb;
        w->cap = nc;
    }
    uint8_t *r = w->buf + w->len;
    oml_le32_store(r, (uint32_t)len);
    oml_le64_store(r + 8, w->next_lsn);
    r[16] = type;
    if (len > 0)
        memcpy(r + RHDR, payload, len);
    oml_le32_store(r + 4, record_crc(w->salt, r, (uint32_t)len));
    w->len = need;
    if (lsn)
        *lsn = w->next_lsn;
    w->next_lsn++;
    return OML_OK;
}

int oml_wal_commit(oml_wal *w, oml_diag *diag)
{
    int rc = check_broken(w, diag);
    if (rc != OML_OK) {
        drop_group(w);
        return rc;
    }
    if (w->len == 0)
        return OML_OK;
    seg *a = &w->segs[w->nseg - 1];
    if (a->size > HDR && a->size + w->len > w->opt.segment_bytes) {
        rc = rollover(w, diag);
        if (rc != OML_OK) {
            drop_group(w);
            return rc;
        }
        a = &w->segs[w->nseg - 1];
    }
    if (write_at(w->fd, w->buf, w->len, a->size) != 0) {
        int e = errno;
        char name[NAME_LEN + 1];
        seg_name(name, a->first);
        if (ftruncate(w->fd, (off_t)a->size) != 0)
            set_broken(w, NULL, "cannot cut WAL segment %s back after a failed write: %s", name,
                       strerror(errno));
        drop_group(w);
        return oml_diag_set(diag, OML_EIO, "wal", "cannot write WAL segment %s/%s: %s", w->dir, name,
                            strerror(e));
    }
    uint64_t last = w->next_lsn - 1;
    if (w->opt.fsync == OML_WAL_FSYNC_ALWAYS && oml__wal_fdatasync(w->fd) != 0) {
        int e = errno;
        if (ftruncate(w->fd, (off_t)a->size) != 0) { /* best effort: the group was refused */
        }
        drop_group(w);
        return set_broken(w, diag, "cannot fdatasync the WAL: %s", strerror(e));
    }
    a->size += w->len;
    w->bytes += w->len;
    w->committed = last;
    w->len = 0;
    if (w->cap > (16u << 20)) { /* do not keep a huge group's buffer */
        free(w->buf);
        w->buf = NULL;
        w->cap = 0;
    }
    pthread_mutex_lock(&w->mu);
    w->written = last;
    if (w->opt.fsync == OML_WAL_FSYNC_ALWAYS)
        w->synced = last;
    pthread_mutex_unlock(&w->mu);
    return OML_OK;
}

int oml_wal_sync(oml_wal *w, oml_diag *diag)
{
    int rc = check_broken(w, diag);
    if (rc != OML_OK)
        return rc;
    if (oml__wal_fdatasync(w->fd) != 0)
        return set_broken(w, diag, "cannot fdatasync the WAL: %s", strerror(errno));
    pthread_mutex_lock(&w->mu);
    w->synced = w->committed;
    pthread_mutex_unlock(&w->mu);
    return OML_OK;
}

int oml_wal_truncate_before(oml_wal *w, uint64_t lsn, oml_diag *diag)
{
    uint32_t k = 0;
    int rc = OML_OK;
    while (k + 1 < w->nseg && w->segs[k + 1].first <= lsn) {
        char name[NAME_LEN + 1], path[4096];
        seg_name(name, w->segs[k].first);
        path_of(w, path, sizeof path, name);
        if (unlink(path) != 0 && errno != ENOENT) {
            rc = oml_diag_set(diag, OML_EIO, "wal", "cannot delete WAL segment %s: %s", path,
                              strerror(errno));
            break;
        }
        w->bytes -= w->segs[k].size;
        k++;
    }
    if (k == 0)
        return rc;
    memmove(w->segs, w->segs + k, (w->nseg - k) * sizeof *w->segs);
    w->nseg -= k;
    if (rc == OML_OK && oml_fsync_dir(w->dir) != 0)
        rc = oml_diag_set(diag, OML_EIO, "wal", "cannot fsync WAL directory %s: %s", w->dir,
                          strerror(errno));
    return rc != OML_OK ? rc : (int)k;
}

uint64_t oml_wal_last_lsn(const oml_wal *w)
{
    return w->committed;
}

uint64_t oml_wal_synced_lsn(oml_wal *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t s = w->synced;
    pthread_mutex_unlock(&w->mu);
    return s;
}

uint64_t oml_wal_bytes(const oml_wal *w)
{
    return w->bytes;
}

uint32_t oml_wal_segments(const oml_wal *w)
{
    return w->nseg;
}

static void destroy(oml_wal *w)
{
    if (w->thread_running) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->cv);
    }
    if (w->fd >= 0)
        close(w->fd);
    pthread_mutex_destroy(&w->mu);
    free(w->segs);
    free(w->buf);
    free(w->dir);
    free(w);
}

int oml_wal_close(oml_wal *w, oml_diag *diag)
{
    if (w == NULL)
        return OML_OK;
    int rc = oml_wal_commit(w, diag);
    if (rc == OML_OK && !w->broken && w->opt.fsync != OML_WAL_FSYNC_ALWAYS)
        rc = oml_wal_sync(w, diag);
    destroy(w);
    return rc;
}

/* ---- recovery ---- */

typedef struct scan {
    oml_wal *w;
    oml_wal_replay_fn fn;
    void *arg;
    oml_wal_recovery *rep;
    oml_diag *diag;
    uint8_t *buf;
    size_t cap;
} scan;

/* Cuts the log at (segment i, offset off): truncates segment i there (or
 * renames it away if off == 0) and renames every later segment to *.corrupt. */
static int cut(scan *s, uint32_t i, uint64_t off, uint64_t file_size)
{
    oml_wal *w = s->w;
    char name[NAME_LEN + 1], path[4096], to[4112];
    for (uint32_t j = w->nseg; j-- > i;) {
        if (j == i && off > 0)
            break;
        seg_name(name, w->segs[j].first);
        path_of(w, path, sizeof path, name);
        snprintf(to, sizeof to, "%s.corrupt", path);
        struct stat st;
        uint64_t size = j == i ? file_size : stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
        if (rename(path, to) != 0)
            return oml_diag_set(s->diag, OML_EIO, "wal", "cannot rename %s: %s", path, strerror(errno));
        s->rep->bytes_dropped += size;
    }
    s->rep->torn = 1;
    w->nseg = off > 0 ? i + 1 : i;
    if (off > 0 && off < file_size) {
        seg_name(name, w->segs[i].first);
        path_of(w, path, sizeof path, name);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ftruncate(fd, (off_t)off) != 0 || oml__wal_fdatasync(fd) != 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return oml_diag_set(s->diag, OML_EIO, "wal", "cannot truncate %s: %s", path, strerror(e));
        }
        close(fd);
        s->rep->bytes_dropped += file_size - off;
    }
    if (oml_fsync_dir(w->dir) != 0)
        return oml_diag_set(s->diag, OML_EIO, "wal", "cannot fsync WAL directory %s: %s", w->dir,
                            strerror(errno));
    return OML_OK;
}

static void note_cut(scan *s, uint32_t i, uint64_t off, uint64_t expect, const char *why)
{
    s->rep->cut_offset = off;
    s->rep->cut_lsn = expect;
    seg_name(s->rep->cut_segment, s->w->segs[i].first);
    snprintf(s->rep->reason, sizeof s->rep->reason, "%s", why);
}

/* Checks segment i's header. Returns an error for what salvage cannot
 * skip (not a WAL segment, another format version, a header that disagrees
 * with the file name); sets *bad for damage (short, checksum) and *salt. */
static int check_header(scan *s, uint32_t i, const uint8_t *b, size_t size, const char *path,
                        const char *name, uint64_t *salt, const char **bad)
{
    uint64_t first = s->w->segs[i].first;
    uint32_t version = 0, hsize = 0, hcrc = 0;
    uint64_t hfirst = 0;
    if (size >= HDR) {
        version = oml_le32_load(b + 8);
        hsize = oml_le32_load(b + 12);
        hfirst = oml_le64_load(b + 16);
        *salt = oml_le64_load(b + 24);
        hcrc = oml_le32_load(b + 36);
    }
    if (size < HDR)
        *bad = "short segment header";
    else if (memcmp(b, MAGIC, 8) != 0)
        return oml_diag_set(s->diag, OML_EFORMAT, "wal", "%s is not an omld WAL segment (bad magic)", path);
    else if ((uint32_t)crc32(0L, b, 36) != hcrc)
        *bad = "segment header checksum mismatch";
    else if (version != OML_WAL_VERSION)
        return oml_diag_set(s->diag, OML_EVERSION, "wal",
                            "%s has WAL format version %u; this build reads version %u "
                            "(HINT: replay it with the omld release that wrote it)",
                            name, version, OML_WAL_VERSION);
    else if (hsize != HDR || hfirst != first)
        return oml_diag_set(s->diag, OML_EFORMAT, "wal",
                            "%s: header says first LSN %" PRIu64 ", its name says %" PRIu64, name,
                            hfirst, first);
    return OML_OK;
}

/* LSN continuity of segment i with the segment before (or the checkpoint):
 * no overlap, and no gap the checkpoint does not cover. */
static int check_continuity(scan *s, uint32_t i, const char *name, uint64_t expect)
{
    uint64_t first = s->w->segs[i].first, after = s->w->opt.after_lsn;
    if (first < expect)
        return oml_diag_set(s->diag, OML_EFORMAT, "wal",
                            "WAL segment %s overlaps the one before it (LSN %" PRIu64 " expected)",
                            name, expect);
    if (first > expect && first - 1 > after)
        return oml_diag_set(s->diag, OML_EFORMAT, "wal",
                            "WAL records %" PRIu64 "..%" PRIu64 " are missing before %s "
                            "(the checkpoint covers up to %" PRIu64 ")",
                            expect, first - 1, name, after);
    return OML_OK;
}

/* Replays the valid records of b from HDR on, those past the checkpoint
 * through the callback, and counts them all. Stops at the first bad one:
 * *off is where it starts and *bad says why (NULL: the segment is whole). */
static int replay_records(scan *s, const uint8_t *b, size_t size, uint64_t salt, uint64_t *expect,
                          size_t *off, const char **bad)
{
    uint64_t after = s->w->opt.after_lsn;
    *off = HDR;
    *bad = NULL;
    while (*off < size) {
        uint32_t n = 0;
        *bad = check_record(salt, b, size, *off, *expect, &n);
        if (*bad)
            break;
        if (*expect > after && s->fn) {
            int rc = s->fn(s->arg, b[*off + 16], *expect, b + *off + RHDR, n);
            if (rc != 0)
                return rc;
            s->rep->replayed++;
        }
        if (s->rep->first_lsn == 0)
            s->rep->first_lsn = *expect;
        s->rep->last_lsn = *expect;
        s->rep->records++;
        (*expect)++;
        *off += RHDR + n;
    }
    return OML_OK;
}

/* A bad record at off in segment i (the last valid LSN is expect - 1): a
 * torn tail is cut off; damage in the middle (a later segment, or a valid
 * record further on) is refused unless salvaging, which cuts it too. */
static int cut_bad_tail(scan *s, uint32_t i, const char *name, const uint8_t *b, size_t size,
                        size_t off, uint64_t expect, uint64_t salt, const char *bad, int *stop)
{
    oml_wal *w = s->w;
    note_cut(s, i, off, expect, bad);
    size_t at = 0;
    uint64_t at_lsn = 0;
    int middle = i + 1 < w->nseg || later_valid(salt, b, size, off, expect, &at, &at_lsn);
    if (middle && !w->opt.salvage) {
        if (i + 1 < w->nseg) {
            char next[NAME_LEN + 1];
            seg_name(next, w->segs[i + 1].first);
            return oml_diag_set(s->diag, OML_EFORMAT, "wal",
                                "WAL damaged in the middle: %s offset %zu (LSN %" PRIu64 ", %s), "
                                "followed by %s (HINT: restore it from a backup; recovering "
                                "with salvage keeps the records before the damage and sets the "
                                "later segments aside)",
                                name, off, expect, bad, next);
        }
        return oml_diag_set(s->diag, OML_EFORMAT, "wal",
                            "WAL damaged in the middle: %s offset %zu (LSN %" PRIu64 ", %s), "
                            "valid record at offset %zu (HINT: restore it from a backup; "
                            "recovering with salvage keeps the records before the damage)",
                            name, off, expect, bad, at);
    }
    s->rep->salvaged = middle;
    *stop = 1;
    w->segs[i].size = off;
    w->bytes -= size - off;
    return cut(s, i, off, size);
}

/* Reads segment i: replays its records, handles its bad tail. *expect is the
 * LSN the next record must carry; *stop is set if the log was cut here. */
static int scan_segment(scan *s, uint32_t i, uint64_t *expect, int *stop)
{
    oml_wal *w = s->w;
    char name[NAME_LEN + 1], path[4096];
    seg_name(name, w->segs[i].first);
    path_of(w, path, sizeof path, name);
    size_t size;
    int rc = read_file(path, &s->buf, &s->cap, &size);
    if (rc != OML_OK)
        return rc == OML_ENOMEM ? rc
                                : oml_diag_set(s->diag, OML_EIO, "wal", "cannot read %s: %s", path,
                                               strerror(errno));
    s->rep->segments++;
    const uint8_t *b = s->buf;
    uint64_t first = w->segs[i].first, salt = 0;

    const char *bad = NULL;
    if ((rc = check_header(s, i, b, size, path, name, &salt, &bad)) != OML_OK)
        return rc;
    if (bad) {
        note_cut(s, i, 0, first, bad);
        if (!w->opt.salvage)
            return oml_diag_set(s->diag, OML_EFORMAT, "wal",
                                "WAL segment %s is damaged (%s) (HINT: restore it from a "
                                "backup; recovering with salvage keeps the records before it "
                                "and sets it and every later segment aside)",
                                name, bad);
        s->rep->salvaged = 1;
        *stop = 1;
        return cut(s, i, 0, size);
    }
    if ((rc = check_continuity(s, i, name, *expect)) != OML_OK)
        return rc;
    *expect = first;
    w->salt = salt; /* the active segment's, once the last one is read */

    size_t off;
    if ((rc = replay_records(s, b, size, salt, expect, &off, &bad)) != OML_OK)
        return rc;
    w->segs[i].size = size;
    w->bytes += size;
    if (!bad)
        return OML_OK;
    return cut_bad_tail(s, i, name, b, size, off, *expect, salt, bad, stop);
}

static int list_segments(oml_wal *w, oml_diag *diag)
{
    DIR *d = opendir(w->dir);
    if (d == NULL)
        return oml_diag_set(diag, OML_EIO, "wal", "cannot open WAL directory %s: %s", w->dir,
                            strerror(errno));
    struct dirent *e;
    int rc = OML_OK;
    while (rc == OML_OK && (e = readdir(d)) != NULL) {
        uint64_t first;
        size_t n = strlen(e->d_name);
        if (n == NAME_LEN + 4 && strcmp(e->d_name + NAME_LEN, ".tmp") == 0) {
            char name[NAME_LEN + 1], path[4096];
            memcpy(name, e->d_name, NAME_LEN);
            name[NAME_LEN] = 0;
            if (parse_name(name, &first)) { /* a segment whose creation never finished */
                path_of(w, path, sizeof path, e->d_name);
                unlink(path);
            }
        } else if (parse_name(e->d_name, &first)) {
            rc = push_seg(w, first, 0);
        }
    }
    closedir(d);
    if (rc == OML_OK && w->nseg > 1)
        qsort(w->segs, w->nseg, sizeof *w->segs, cmp_seg);
    return rc;
}

/* The options with their defaults filled in, or OML_EINVAL. */
static int resolve_options(const char *dir, const oml_wal_options *opt, oml_wal_options *o,
                           oml_diag *diag)
{
    if (dir == NULL || *dir == 0 || strlen(dir) > 4000)
        return oml_diag_set(diag, OML_EINVAL, "wal", "WAL directory missing or too long");
    *o = opt ? *opt : (oml_wal_options){0};
    if (o->segment_bytes == 0)
        o->segment_bytes = OML_WAL_SEGMENT_BYTES_DEFAULT;
    if (o->fsync < OML_WAL_FSYNC_EVERYSEC || o->fsync > OML_WAL_FSYNC_NO ||
        o->segment_bytes < HDR || o->after_lsn == UINT64_MAX)
        return oml_diag_set(diag, OML_EINVAL, "wal", "bad WAL options");
    return OML_OK;
}

/* Recovery: lists the segments and scans them in LSN order, replaying the
 * records past the checkpoint; *expect ends as the LSN the next record
 * would carry (0 for an empty log). */
static int recover(scan *s, uint64_t *expect)
{
    oml_wal *w = s->w;
    int rc = list_segments(w, s->diag);
    *expect = 0;
    if (rc == OML_OK && w->nseg > 0) {
        *expect = w->segs[0].first;
        if (*expect > w->opt.after_lsn + 1)
            rc = oml_diag_set(s->diag, OML_EFORMAT, "wal",
                              "the WAL starts at LSN %" PRIu64 " but the checkpoint covers only up "
                              "to %" PRIu64 ": records are missing",
                              *expect, w->opt.after_lsn);
    }
    int stop = 0;
    for (uint32_t i = 0; rc == OML_OK && !stop && i < w->nseg; i++)
        rc = scan_segment(s, i, expect, &stop);
    free(s->buf);
    s->buf = NULL;
    return rc;
}

/* Opens the active segment for appends: the last one, after its last valid
 * record, or a new one past the checkpoint when the log ends before it. */
static int open_active(oml_wal *w, uint64_t expect, oml_wal_recovery *rep, oml_diag *diag)
{
    uint64_t after = w->opt.after_lsn;
    int rc = OML_OK;
    if (w->nseg > 0 && expect > after) {
        seg *a = &w->segs[w->nseg - 1];
        char name[NAME_LEN + 1], path[4096];
        seg_name(name, a->first);
        path_of(w, path, sizeof path, name);
        w->fd = open(path, O_WRONLY | O_CLOEXEC);
        if (w->fd < 0 || oml__wal_fdatasync(w->fd) != 0)
            rc = oml_diag_set(diag, OML_EIO, "wal", "cannot open %s: %s", path, strerror(errno));
        w->next_lsn = expect;
        return rc;
    }
    rep->behind_checkpoint = w->nseg > 0 && expect <= after;
    w->next_lsn = after + 1;
    rc = push_seg(w, w->next_lsn, HDR);
    if (rc == OML_OK) {
        w->nseg--;
        rc = create_segment(w, w->next_lsn, &w->fd, diag);
        if (rc == OML_OK) {
            w->nseg++;
            w->bytes += HDR;
        }
    }
    return rc;
}

int oml_wal_open(oml_wal **out, const char *dir, const oml_wal_options *opt, oml_wal_replay_fn fn,
                 void *arg, oml_wal_recovery *report, oml_diag *diag)
{
    *out = NULL;
    oml_wal_recovery scratch;
    oml_wal_recovery *rep = report ? report : &scratch;
    memset(rep, 0, sizeof *rep);
    oml_wal_options o;
    int rc = resolve_options(dir, opt, &o, diag);
    if (rc != OML_OK)
        return rc;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return oml_diag_set(diag, OML_EIO, "wal", "cannot create WAL directory %s: %s", dir,
                            strerror(errno));

    oml_wal *w = calloc(1, sizeof *w);
    if (w == NULL || (w->dir = strdup(dir)) == NULL) {
        free(w);
        return OML_ENOMEM;
    }
    w->opt = o;
    w->fd = -1;
    w->salt = new_salt();
    pthread_mutex_init(&w->mu, NULL);

    scan s = {.w = w, .fn = fn, .arg = arg, .rep = rep, .diag = diag};
    uint64_t expect;
    rc = recover(&s, &expect);
    if (rc == OML_OK)
        rc = open_active(w, expect, rep, diag);
    if (rc == OML_OK) {
        w->committed = w->next_lsn - 1;
        w->written = w->synced = w->committed;
        rep->next_lsn = w->next_lsn;
        if (o.fsync == OML_WAL_FSYNC_EVERYSEC)
            rc = start_thread(w);
    }
    if (rc != OML_OK) {
        destroy(w);
        return rc;
    }
    *out = w;
    return OML_OK;
}
