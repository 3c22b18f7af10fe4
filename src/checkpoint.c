/* checkpoint.c - atomic, checksummed, versioned checkpoint files (see
 * checkpoint.h). The durability recipe is redis rdb.c's: write a temporary
 * file, fsync it, rename it over the name, fsync the directory. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define MAGIC "OMLCKPT1"
#define HEADER_BYTES (8 + 4 + 4 + 8)
#define PREFIX "checkpoint-"
#define SUFFIX ".ckpt"
#define MAX_FILES 4096

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

/* crc32 over a buffer of any size (zlib takes uInt lengths). */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, uint64_t n)
{
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return crc;
}

static int write_all(int fd, const uint8_t *p, uint64_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n > (1u << 30) ? (1u << 30) : (size_t)n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (uint64_t)w;
    }
    return 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Parses "checkpoint-<16 hex>.ckpt"; 1 and *lsn if it is one. */
static int parse_name(const char *name, uint64_t *lsn)
{
    size_t pl = strlen(PREFIX), n = strlen(name);
    if (n != pl + 16 + strlen(SUFFIX) || strncmp(name, PREFIX, pl) != 0 ||
        strcmp(name + pl + 16, SUFFIX) != 0)
        return 0;
    uint64_t v = 0;
    for (size_t i = pl; i < pl + 16; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint64_t)d;
    }
    *lsn = v;
    return 1;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

/* The LSNs of dir's checkpoint files, newest first; -1 on error. */
static int list_lsns(const char *dir, uint64_t *lsns, int cap)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < cap)
        if (parse_name(e->d_name, &lsns[n]))
            n++;
    closedir(d);
    qsort(lsns, (size_t)n, sizeof *lsns, cmp_desc);
    return n;
}

static void path_of(char *out, size_t cap, const char *dir, uint64_t lsn)
{
    snprintf(out, cap, "%s/" PREFIX "%016" PRIx64 SUFFIX, dir, lsn);
}

int oml_ckpt_write(const char *dir, uint64_t lsn, const oml_ckpt_section *sections, int n,
                   int keep, char *path_out, size_t path_cap, uint64_t *bytes, oml_diag *diag)
{
    if (n < 0 || n > OML_CKPT_MAX_SECTIONS || keep < 1)
        return oml_diag_set(diag, OML_EINVAL, "sections", "%d sections, keep %d", n, keep);
    char path[512], tmp[560];
    path_of(path, sizeof path, dir, lsn);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        return oml_diag_set(diag, OML_EIO, "path", "cannot create %s: %s", tmp, strerror(errno));

    uint8_t head[HEADER_BYTES], sec[12], tail[4];
    memcpy(head, MAGIC, 8);
    put_u32(head + 8, OML_CKPT_VERSION);
    put_u32(head + 12, (uint32_t)n);
    put_u64(head + 16, lsn);
    uint32_t crc = crc_update(0, head, sizeof head);
    uint64_t total = sizeof head + 4;
    int rc = write_all(fd, head, sizeof head);
    for (int i = 0; rc == 0 && i < n; i++) {
        put_u32(sec, sections[i].tag);
        put_u64(sec + 4, sections[i].len);
        crc = crc_update(crc, sec, sizeof sec);
        crc = crc_update(crc, sections[i].data, sections[i].len);
        rc = write_all(fd, sec, sizeof sec);
        if (rc == 0)
            rc = write_all(fd, sections[i].data, sections[i].len);
        total += sizeof sec + sections[i].len;
    }
    put_u32(tail, crc);
    if (rc == 0)
        rc = write_all(fd, tail, sizeof tail);
    if (rc == 0)
        rc = fsync(fd);
    int err = errno;
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        return oml_diag_set(diag, OML_EIO, "path", "cannot write checkpoint %s: %s", path,
                            strerror(err));
    }
    if (fsync_dir(dir) != 0)
        return oml_diag_set(diag, OML_EIO, "path", "cannot fsync directory %s: %s", dir,
                            strerror(errno));
    if (path_out)
        snprintf(path_out, path_cap, "%s", path);
    if (bytes)
        *bytes = total;

    /* Keep the newest `keep`; the one just written is among them. */
    uint64_t *lsns = malloc(MAX_FILES * sizeof *lsns);
    int m = lsns ? list_lsns(dir, lsns, MAX_FILES) : -1;
    for (int i = keep; i < m; i++) {
        char old[512];
        path_of(old, sizeof old, dir, lsns[i]);
        unlink(old);
    }
    free(lsns);
    return OML_OK;
}

static int fail_load(oml_ckpt *out, oml_diag *diag, int code, const char *path, const char *why)
{
    oml_ckpt_free(out);
    return oml_diag_set(diag, code, "path", "%s: %s", path, why);
}

int oml_ckpt_load_file(const char *path, oml_ckpt *out, oml_diag *diag)
{
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return oml_diag_set(diag, OML_EIO, "path", "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < HEADER_BYTES + 4) {
        fclose(f);
        return fail_load(out, diag, OML_EFORMAT, path, "truncated (shorter than a header)");
    }
    uint64_t size = (uint64_t)st.st_size;
    out->_file = malloc(size);
    if (out->_file == NULL) {
        fclose(f);
        return oml_diag_set(diag, OML_ENOMEM, "path", "cannot hold %s in memory", path);
    }
    size_t got = fread(out->_file, 1, size, f);
    fclose(f);
    if (got != size)
        return fail_load(out, diag, OML_EIO, path, "short read");
    const uint8_t *p = out->_file;
    if (memcmp(p, MAGIC, 8) != 0)
        return fail_load(out, diag, OML_EFORMAT, path, "not an omld checkpoint (bad magic)");
    uint32_t version = get_u32(p + 8);
    if (version != OML_CKPT_VERSION) {
        char why[160];
        snprintf(why, sizeof why, "format version %u, this omld reads version %u%s", version,
                 OML_CKPT_VERSION, version > OML_CKPT_VERSION ? " (written by a newer omld)" : "");
        return fail_load(out, diag, OML_EVERSION, path, why);
    }
    if (crc_update(0, p, size - 4) != get_u32(p + size - 4))
        return fail_load(out, diag, OML_EFORMAT, path, "checksum mismatch (truncated or altered)");
    uint32_t n = get_u32(p + 12);
    if (n > OML_CKPT_MAX_SECTIONS)
        return fail_load(out, diag, OML_EFORMAT, path, "too many sections");
    out->lsn = get_u64(p + 16);
    uint64_t at = HEADER_BYTES, end = size - 4;
    for (uint32_t i = 0; i < n; i++) {
        if (end - at < 12)
            return fail_load(out, diag, OML_EFORMAT, path, "section header past the end");
        out->s[i].tag = get_u32(p + at);
        out->s[i].len = get_u64(p + at + 4);
        at += 12;
        if (out->s[i].len > end - at)
            return fail_load(out, diag, OML_EFORMAT, path, "section past the end");
        out->s[i].data = p + at;
        at += out->s[i].len;
    }
    if (at != end)
        return fail_load(out, diag, OML_EFORMAT, path, "bytes after the last section");
    out->n = (int)n;
    return OML_OK;
}

int oml_ckpt_load_newest(const char *dir, oml_ckpt *out, oml_ckpt_refused_fn refused, void *arg,
                         oml_diag *diag)
{
    memset(out, 0, sizeof *out);
    uint64_t *lsns = malloc(MAX_FILES * sizeof *lsns);
    if (lsns == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "path", "out of memory");
    int m = list_lsns(dir, lsns, MAX_FILES);
    if (m < 0) {
        free(lsns);
        return oml_diag_set(diag, OML_EIO, "path", "cannot read directory %s: %s", dir,
                            strerror(errno));
    }
    int rc = m == 0 ? oml_diag_set(diag, OML_EEMPTY, "path", "no checkpoint in %s", dir) : OML_OK;
    for (int i = 0; i < m; i++) {
        char path[512];
        path_of(path, sizeof path, dir, lsns[i]);
        oml_diag d = {0};
        rc = oml_ckpt_load_file(path, out, &d);
        if (rc == OML_OK)
            break;
        if (refused)
            refused(arg, path, d.msg);
        rc = oml_diag_set(diag, rc == OML_ENOMEM ? OML_ENOMEM : OML_EFORMAT, "path",
                          "none of the %d checkpoint(s) in %s is usable (the last refused: %s)", m,
                          dir, d.msg);
    }
    free(lsns);
    return rc;
}

const oml_ckpt_section *oml_ckpt_find(const oml_ckpt *c, uint32_t tag)
{
    for (int i = 0; i < c->n; i++)
        if (c->s[i].tag == tag)
            return &c->s[i];
    return NULL;
}

void oml_ckpt_free(oml_ckpt *c)
{
    free(c->_file);
    c->_file = NULL;
    c->n = 0;
}
