/* checkpoint.c - atomic, checksummed, versioned checkpoint files (see
 * checkpoint.h). Written with oml_atomic_write (temporary file, fsync,
 * rename, fsync of the directory: redis rdb.c's recipe). */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "atomic_file.h"
#include "bytes.h"
#include "parallel.h"

#define MAGIC "OMLCKPT1"
#define HEADER_BYTES (8 + 4 + 4 + 8)
#define PREFIX "checkpoint-"
#define SUFFIX ".ckpt"
#define MAX_FILES 4096

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
    char path[512];
    path_of(path, sizeof path, dir, lsn);

    /* header | (tag, len, bytes) per section | CRC-32 of all before it */
    uint8_t head[HEADER_BYTES], sec[OML_CKPT_MAX_SECTIONS][12], tail[4];
    struct iovec iov[(1 + OML_CKPT_MAX_PARTS) * OML_CKPT_MAX_SECTIONS + 2];
    int k = 0;
    memcpy(head, MAGIC, 8);
    oml_le32_store(head + 8, OML_CKPT_VERSION);
    oml_le32_store(head + 12, (uint32_t)n);
    oml_le64_store(head + 16, lsn);
    uint32_t crc = crc_update(0, head, sizeof head);
    uint64_t total = sizeof head + 4;
    iov[k++] = (struct iovec){head, sizeof head};
    for (int i = 0; i < n; i++) {
        const oml_ckpt_section *x = &sections[i];
        if (x->n_parts < 0 || x->n_parts > OML_CKPT_MAX_PARTS)
            return oml_diag_set(diag, OML_EINVAL, "sections", "section %d: %d parts", i,
                                x->n_parts);
        oml_ckpt_part whole = {x->data, x->len};
        const oml_ckpt_part *parts = x->n_parts > 0 ? x->parts : &whole;
        int np = x->n_parts > 0 ? x->n_parts : 1;
        uint64_t len = 0;
        for (int j = 0; j < np; j++)
            len += parts[j].len;
        oml_le32_store(sec[i], x->tag);
        oml_le64_store(sec[i] + 4, len);
        crc = crc_update(crc, sec[i], sizeof sec[i]);
        iov[k++] = (struct iovec){sec[i], sizeof sec[i]};
        for (int j = 0; j < np; j++) {
            crc = crc_update(crc, parts[j].data, parts[j].len);
            iov[k++] = (struct iovec){(void *)parts[j].data, parts[j].len};
        }
        total += sizeof sec[i] + len;
    }
    oml_le32_store(tail, crc);
    iov[k++] = (struct iovec){tail, sizeof tail};
    enum oml_atomic_stage stage;
    if (oml_atomic_write(path, iov, k, 0640, &stage) != 0) {
        if (stage == OML_ATOMIC_CREATE)
            return oml_diag_set(diag, OML_EIO, "path", "cannot create %s.tmp: %s", path,
                                strerror(errno));
        if (stage == OML_ATOMIC_DIR)
            return oml_diag_set(diag, OML_EIO, "path", "cannot fsync directory %s: %s", dir,
                                strerror(errno));
        return oml_diag_set(diag, OML_EIO, "path", "cannot write checkpoint %s: %s", path,
                            strerror(errno));
    }
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

/* crc32 of the loaded file's first n bytes, in parts of CRC_PART bytes
 * on every core (zlib combines the parts' CRCs: the same value as one
 * pass; at 1M items reading and checking 3 GB was 1.4 s of a restart on
 * one core). A mapped file's parts are given back once read
 * (MADV_DONTNEED: its clean pages stay in the page cache for the
 * decoders, not in this process), so checking a 3 GB checkpoint does not
 * make it resident all at once. */
#define CRC_PART ((uint64_t)64 << 20) /* a multiple of any page size */

typedef struct crc_parts {
    uint8_t *p;
    uint64_t n;
    int mapped;
    uint32_t *crc; /* (parts) */
} crc_parts;

/* Part i's bytes of a file's first n. */
static uint64_t crc_part_len(uint64_t n, int32_t i)
{
    uint64_t at = (uint64_t)i * CRC_PART;
    return n - at < CRC_PART ? n - at : CRC_PART;
}

static int crc_part(void *ctx, int worker, int32_t i)
{
    (void)worker;
    crc_parts *k = ctx;
    uint64_t at = (uint64_t)i * CRC_PART, m = crc_part_len(k->n, i);
    k->crc[i] = crc_update(0, k->p + at, m);
    if (k->mapped && m == CRC_PART)
        (void)madvise(k->p + at, (size_t)m, MADV_DONTNEED);
    return 0;
}

static uint32_t file_crc(const oml_ckpt *c, uint64_t n)
{
    int32_t parts = (int32_t)((n + CRC_PART - 1) / CRC_PART);
    crc_parts k = {c->_file, n, c->_mapped > 0, malloc((size_t)(parts ? parts : 1) * 4)};
    if (k.crc == NULL) /* one pass, in place */
        return crc_update(0, c->_file, n);
    (void)oml_parallel_run(oml_parallel_cores(), parts, crc_part, &k); /* cannot fail */
    uint32_t crc = 0;
    for (int32_t i = 0; i < parts; i++) /* a part is at most 64 MB: any z_off_t */
        crc = (uint32_t)crc32_combine(crc, k.crc[i], (z_off_t)crc_part_len(n, i));
    free(k.crc);
    return crc;
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
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    if (map != MAP_FAILED) {
        out->_file = map;
        out->_mapped = size;
        (void)madvise(map, size, MADV_SEQUENTIAL);
    } else { /* no mapping (a filesystem without): read it in */
        out->_file = malloc(size);
        if (out->_file == NULL) {
            fclose(f);
            return oml_diag_set(diag, OML_ENOMEM, "path", "cannot hold %s in memory", path);
        }
        size_t got = fread(out->_file, 1, size, f);
        if (got != size) {
            fclose(f);
            return fail_load(out, diag, OML_EIO, path, "short read");
        }
    }
    fclose(f);
    const uint8_t *p = out->_file;
    if (memcmp(p, MAGIC, 8) != 0)
        return fail_load(out, diag, OML_EFORMAT, path, "not an omld checkpoint (bad magic)");
    uint32_t version = oml_le32_load(p + 8);
    if (version != OML_CKPT_VERSION) {
        char why[160];
        snprintf(why, sizeof why, "format version %u, this omld reads version %u%s", version,
                 OML_CKPT_VERSION, version > OML_CKPT_VERSION ? " (written by a newer omld)" : "");
        return fail_load(out, diag, OML_EVERSION, path, why);
    }
    if (file_crc(out, size - 4) != oml_le32_load(p + size - 4))
        return fail_load(out, diag, OML_EFORMAT, path, "checksum mismatch (truncated or altered)");
    uint32_t n = oml_le32_load(p + 12);
    if (n > OML_CKPT_MAX_SECTIONS)
        return fail_load(out, diag, OML_EFORMAT, path, "too many sections");
    out->lsn = oml_le64_load(p + 16);
    uint64_t at = HEADER_BYTES, end = size - 4;
    for (uint32_t i = 0; i < n; i++) {
        if (end - at < 12)
            return fail_load(out, diag, OML_EFORMAT, path, "section header past the end");
        out->s[i].tag = oml_le32_load(p + at);
        out->s[i].len = oml_le64_load(p + at + 4);
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
    if (c->_mapped > 0)
        munmap(c->_file, c->_mapped);
    else
        free(c->_file);
    c->_file = NULL;
    c->_mapped = 0;
    c->n = 0;
}
