/* test_wal.c - the write-ahead log on real files: round trips across
 * segments, torn tails at every byte, damage in the middle, failing writes
 * and fsyncs, and the fsync policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "testutil.h"
#include "wal.h"

#define RHDR 17
#define HDR 40

/* ---- helpers ---- */

static uint32_t plen(uint64_t lsn)
{
    return (uint32_t)((lsn * 37) % 301);
}

static uint8_t ptype(uint64_t lsn)
{
    return (uint8_t)(lsn % 5 + 1);
}

static void pfill(uint64_t lsn, uint8_t *b)
{
    for (uint32_t i = 0; i < plen(lsn); i++)
        b[i] = (uint8_t)(lsn * 131 + i * 7);
}

typedef struct collect {
    uint64_t n, first, last, bad;
    int stop_at; /* return 42 at this LSN */
} collect;

static int on_record(void *arg, uint8_t type, uint64_t lsn, const uint8_t *p, size_t len)
{
    collect *c = arg;
    if (c->stop_at && lsn == (uint64_t)c->stop_at)
        return 42;
    uint8_t want[512];
    pfill(lsn, want);
    if (type != ptype(lsn) || len != plen(lsn) || (len && memcmp(p, want, len) != 0))
        c->bad++;
    if (c->n > 0 && lsn != c->last + 1)
        c->bad++;
    if (c->n == 0)
        c->first = lsn;
    c->last = lsn;
    c->n++;
    return 0;
}

static void append_n(oml_wal *w, uint64_t n, uint32_t group)
{
    uint8_t b[512];
    for (uint64_t k = 0; k < n; k++) {
        uint64_t lsn = oml_wal_last_lsn(w) + 1 + (k % group), got = 0;
        pfill(lsn, b);
        assert_int_equal(oml_wal_append(w, ptype(lsn), b, plen(lsn), &got), OML_OK);
        assert_int_equal(got, lsn);
        if ((k + 1) % group == 0 || k + 1 == n)
            assert_int_equal(oml_wal_commit(w, NULL), OML_OK);
    }
}

static void make_dir(char *dir, size_t cap)
{
    assert_int_equal(oml_test_tmpdir(dir, cap, "test_wal"), 0);
}

/* The directory's files: names (sorted) and contents. */
typedef struct files {
    int n;
    char name[256][64];
    uint8_t *data[256];
    size_t len[256];
} files;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void files_load(files *f, const char *dir, const char *suffix)
{
    memset(f, 0, sizeof *f);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name), s = strlen(suffix);
        if (n < s || n >= 64 || strcmp(e->d_name + n - s, suffix) != 0 || e->d_name[0] == '.' ||
            f->n == 256)
            continue;
        memcpy(f->name[f->n++], e->d_name, n + 1);
    }
    closedir(d);
    qsort(f->name, (size_t)f->n, 64, cmp_name);
    for (int i = 0; i < f->n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, f->name[i]);
        FILE *fp = fopen(p, "rb");
        assert_non_null(fp);
        fseek(fp, 0, SEEK_END);
        f->len[i] = (size_t)ftell(fp);
        fseek(fp, 0, SEEK_SET);
        f->data[i] = malloc(f->len[i] + 1);
        assert_int_equal(fread(f->data[i], 1, f->len[i], fp), f->len[i]);
        fclose(fp);
    }
}

static void files_free(files *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->data[i]);
    f->n = 0;
}

/* Replaces the directory's contents with f (file i cut to len[i]). */
static void files_restore(const files *f, const char *dir)
{
    oml_test_rmtree(dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    for (int i = 0; i < f->n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, f->name[i]);
        FILE *fp = fopen(p, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(f->data[i], 1, f->len[i], fp), f->len[i]);
        fclose(fp);
    }
}

static int count_files(const char *dir, const char *suffix)
{
    files f;
    files_load(&f, dir, suffix);
    int n = f.n;
    files_free(&f);
    return n;
}

static int reopen(const char *dir, uint64_t after, collect *c, oml_wal_recovery *rep, oml_wal **out)
{
    oml_wal_options o = {.after_lsn = after, .fsync = OML_WAL_FSYNC_NO, .segment_bytes = 2048};
    memset(c, 0, sizeof *c);
    oml_wal *w = NULL;
    int rc = oml_wal_open(&w, dir, &o, on_record, c, rep, NULL);
    if (out)
        *out = w;
    else
        oml_wal_close(w, NULL);
    return rc;
}

/* ---- tests ---- */

static void test_round_trip_rollover(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    oml_wal_options o = {.segment_bytes = 4096, .fsync = OML_WAL_FSYNC_NO};
    oml_wal *w = NULL;
    oml_wal_recovery rep;
    oml_diag d = {0};
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, NULL, &rep, &d), OML_OK);
    assert_int_equal(rep.records, 0);
    assert_int_equal(rep.next_lsn, 1);
    assert_int_equal(oml_wal_last_lsn(w), 0);
    for (uint32_t g = 1; oml_wal_last_lsn(w) < 2000; g = g % 7 + 1)
        append_n(w, g, g);
    uint64_t last = oml_wal_last_lsn(w);
    assert_true(oml_wal_segments(w) >= 10);
    uint32_t segs = oml_wal_segments(w);
    uint64_t bytes = oml_wal_bytes(w);
    assert_int_equal(oml_wal_close(w, &d), OML_OK);
    assert_int_equal(count_files(dir, ".log"), (int)segs);

    collect c;
    assert_int_equal(reopen(dir, 0, &c, &rep, &w), OML_OK);
    assert_int_equal(c.n, last);
    assert_int_equal(c.first, 1);
    assert_int_equal(c.bad, 0);
    assert_int_equal(rep.records, last);
    assert_int_equal(rep.replayed, last);
    assert_int_equal(rep.first_lsn, 1);
    assert_int_equal(rep.last_lsn, last);
    assert_int_equal(rep.segments, segs);
    assert_int_equal(rep.torn, 0);
    assert_int_equal(rep.bytes_dropped, 0);
    assert_int_equal(oml_wal_bytes(w), bytes);
    /* Every segment but the last stays within the limit (groups are small). */
    files f;
    files_load(&f, dir, ".log");
    for (int i = 0; i + 1 < f.n; i++)
        assert_true(f.len[i] <= 4096);
    files_free(&f);

    /* Reopen + append continues the LSNs. */
    append_n(w, 5, 5);
    assert_int_equal(oml_wal_last_lsn(w), last + 5);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    assert_int_equal(reopen(dir, 0, &c, &rep, NULL), OML_OK);
    assert_int_equal(c.n, last + 5);
    assert_int_equal(c.bad, 0);

    /* after_lsn skips the records a checkpoint covers. */
    assert_int_equal(reopen(dir, 1234, &c, &rep, NULL), OML_OK);
    assert_int_equal(c.n, last + 5 - 1234);
    assert_int_equal(c.first, 1235);
    assert_int_equal(rep.records, last + 5);
    assert_int_equal(rep.replayed, last + 5 - 1234);
    assert_int_equal(c.bad, 0);
    oml_test_rmtree(dir);
}

static void test_group_larger_than_segment(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    oml_wal_options o = {.segment_bytes = 256, .fsync = OML_WAL_FSYNC_ALWAYS};
    oml_wal *w = NULL;
    assert_int_equal(oml_wal_open(&w, dir, &o, NULL, NULL, NULL, NULL), OML_OK);
    append_n(w, 40, 20); /* two groups, each > 256 bytes: one segment each */
    assert_int_equal(oml_wal_segments(w), 2);
    assert_int_equal(oml_wal_synced_lsn(w), 40);
    /* An empty record and an empty commit. */
    uint64_t lsn;
    assert_int_equal(oml_wal_commit(w, NULL), OML_OK);
    assert_int_equal(oml_wal_append(w, 9, NULL, 0, &lsn), OML_OK);
    assert_int_equal(lsn, 41);
    assert_int_equal(oml_wal_append(w, 9, NULL, (size_t)OML_WAL_MAX_PAYLOAD + 1, &lsn), OML_EINVAL);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    collect c;
    oml_wal_recovery rep;
    assert_int_equal(reopen(dir, 0, &c, &rep, NULL), OML_OK);
    assert_int_equal(c.n, 41);
    assert_int_equal(c.bad, 1); /* record 41 is ours, not pfill's */
    oml_test_rmtree(dir);
}

static void test_callback_abort_and_bad_args(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    oml_wal *w = NULL;
    assert_int_equal(reopen(dir, 0, &(collect){0}, NULL, &w), OML_OK);
    append_n(w, 30, 4);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    collect c = {.stop_at = 17};
    oml_wal_options o = {.fsync = OML_WAL_FSYNC_NO};
    w = (oml_wal *)&c;
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, NULL, NULL), 42);
    assert_null(w);
    assert_int_equal(c.n, 16);
    oml_diag d = {0};
    assert_int_equal(oml_wal_open(&w, "", &o, NULL, NULL, NULL, &d), OML_EINVAL);
    o.fsync = 7;
    assert_int_equal(oml_wal_open(&w, dir, &o, NULL, NULL, NULL, &d), OML_EINVAL);
    /* Nothing was changed by the refused opens. */
    assert_int_equal(reopen(dir, 0, &c, NULL, NULL), OML_OK);
    assert_int_equal(c.n, 30);
    assert_int_equal(oml_wal_close(NULL, NULL), OML_OK);
    oml_test_rmtree(dir);
}

/* A log of several segments; returns the last LSN. */
static uint64_t build(const char *dir, uint64_t n)
{
    oml_wal *w = NULL;
    collect c;
    assert_int_equal(reopen(dir, 0, &c, NULL, &w), OML_OK);
    for (uint32_t g = 1; oml_wal_last_lsn(w) < n; g = g % 3 + 1)
        append_n(w, g < n - oml_wal_last_lsn(w) ? g : n - oml_wal_last_lsn(w), g);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    return n;
}

static void test_torn_tail_every_offset(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    uint64_t n = build(dir, 40);
    while (plen(n) < 100) /* make the last record a long one */
        n = build(dir, n + 1);
    files f;
    files_load(&f, dir, ".log");
    assert_true(f.n >= 3);
    int last = f.n - 1;
    size_t full = f.len[last], start = full - RHDR - plen(n);
    assert_true(start >= HDR);
    for (size_t cut = start; cut <= full; cut++) {
        files g = f;
        g.len[last] = cut;
        files_restore(&g, dir);
        collect c;
        oml_wal_recovery rep;
        oml_wal *w = NULL;
        assert_int_equal(reopen(dir, 0, &c, &rep, &w), OML_OK);
        uint64_t want = cut == full ? n : n - 1;
        assert_int_equal(c.n, want);
        assert_int_equal(c.bad, 0);
        assert_int_equal(rep.last_lsn, want);
        assert_int_equal(rep.torn, cut != start && cut != full);
        assert_int_equal(rep.bytes_dropped, cut == full ? 0 : cut - start);
        if (rep.torn) {
            assert_string_equal(rep.cut_segment, f.name[last]);
            assert_int_equal(rep.cut_offset, start);
            assert_int_equal(rep.cut_lsn, n);
            assert_true(strlen(rep.reason) > 0);
        }
        /* New appends follow the good data, and the log is clean again. */
        append_n(w, 1, 1);
        assert_int_equal(oml_wal_last_lsn(w), want + 1);
        assert_int_equal(oml_wal_close(w, NULL), OML_OK);
        assert_int_equal(reopen(dir, 0, &c, &rep, NULL), OML_OK);
        assert_int_equal(c.n, want + 1);
        assert_int_equal(c.bad, 0);
        assert_int_equal(rep.torn, 0);
    }
    files_free(&f);
    oml_test_rmtree(dir);
}

static void test_bitflip_last_record_is_torn(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    uint64_t n = build(dir, 40);
    while (plen(n) < 50)
        n = build(dir, n + 1);
    files f;
    files_load(&f, dir, ".log");
    int last = f.n - 1;
    size_t full = f.len[last], start = full - RHDR - plen(n);
    for (size_t at = start; at < full; at++) {
        for (int bit = 0; bit < 8; bit += at < start + RHDR ? 1 : 5) {
            f.data[last][at] ^= (uint8_t)(1u << bit);
            files_restore(&f, dir);
            f.data[last][at] ^= (uint8_t)(1u << bit);
            collect c;
            oml_wal_recovery rep;
            assert_int_equal(reopen(dir, 0, &c, &rep, NULL), OML_OK);
            assert_int_equal(c.n, n - 1);
            assert_int_equal(c.bad, 0);
            assert_int_equal(rep.torn, 1);
            assert_int_equal(rep.salvaged, 0);
            assert_int_equal(rep.cut_lsn, n);
            assert_int_equal(rep.bytes_dropped, full - start);
        }
    }
    files_free(&f);
    oml_test_rmtree(dir);
}

/* A payload carrying a well-formed record (as one would be without the salt)
 * must not make a torn tail look like damage in the middle. */
static void test_fake_record_in_payload(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    uint64_t n = build(dir, 10);
    uint8_t p[RHDR + 4 + 200];
    memset(p, 0x33, sizeof p);
    uint32_t len = 4;
    uint64_t lsn = n + 1, zero = 0;
    memcpy(p, &len, 4);
    memcpy(p + 8, &lsn, 8);
    p[16] = 1;
    for (int salted = 0; salted < 2; salted++) {
        uLong c = salted ? crc32(0L, (const uint8_t *)&zero, 8) : crc32(0L, Z_NULL, 0);
        c = crc32(c, p, 4);
        uint32_t crc = (uint32_t)crc32(c, p + 8, RHDR - 8 + 4);
        memcpy(p + 4, &crc, 4);
        oml_wal *w = NULL;
        collect col;
        assert_int_equal(reopen(dir, 0, &col, NULL, &w), OML_OK);
        assert_int_equal(oml_wal_append(w, 1, p, sizeof p, &lsn), OML_OK);
        assert_int_equal(lsn, n + 1);
        assert_int_equal(oml_wal_close(w, NULL), OML_OK);
        files f;
        files_load(&f, dir, ".log");
        f.len[f.n - 1] -= 100; /* torn inside the filler, after the fake */
        files_restore(&f, dir);
        oml_wal_recovery rep;
        assert_int_equal(reopen(dir, 0, &col, &rep, NULL), OML_OK);
        assert_int_equal(col.n, n);
        assert_int_equal(rep.torn, 1);
        files_free(&f);
    }
    oml_test_rmtree(dir);
}

static void assert_files_equal(const files *a, const char *dir)
{
    files b;
    files_load(&b, dir, "");
    assert_int_equal(a->n, b.n);
    for (int i = 0; i < a->n; i++) {
        assert_string_equal(a->name[i], b.name[i]);
        assert_int_equal(a->len[i], b.len[i]);
        assert_memory_equal(a->data[i], b.data[i], a->len[i]);
    }
    files_free(&b);
}

static void test_damage_in_the_middle(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    /* One segment, 20 records: every byte of record 10, damaged, is
     * followed by valid records in the same file. */
    oml_wal_options o = {.fsync = OML_WAL_FSYNC_NO};
    oml_wal *w = NULL;
    assert_int_equal(oml_wal_open(&w, dir, &o, NULL, NULL, NULL, NULL), OML_OK);
    append_n(w, 20, 3);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    files f;
    files_load(&f, dir, "");
    assert_int_equal(f.n, 1);
    size_t off = HDR;
    for (uint64_t l = 1; l < 10; l++)
        off += RHDR + plen(l);
    for (size_t at = off; at < off + RHDR + plen(10); at++) {
        f.data[0][at] ^= (uint8_t)(1u << (at % 8));
        files_restore(&f, dir);
        f.data[0][at] ^= (uint8_t)(1u << (at % 8));
        collect c;
        oml_wal_recovery rep;
        oml_diag d = {0};
        memset(&c, 0, sizeof c);
        assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, &rep, &d), OML_EFORMAT);
        assert_null(w);
        assert_non_null(strstr(d.msg, "middle"));
        assert_int_equal(rep.cut_lsn, 10);
        assert_int_equal(rep.cut_offset, off);
        assert_int_equal(rep.torn, 0);
        /* Refused, and nothing on disk was touched. */
        f.data[0][at] ^= (uint8_t)(1u << (at % 8));
        assert_files_equal(&f, dir);
        f.data[0][at] ^= (uint8_t)(1u << (at % 8));
    }
    files_free(&f);

    /* Several segments: damage (a flipped bit, or a cut) in one that is not
     * the last is never a torn tail. */
    oml_test_rmtree(dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    uint64_t n = build(dir, 60);
    files_load(&f, dir, ".log");
    assert_true(f.n >= 4);
    f.data[1][f.len[1] - 3] ^= 0x10;
    files_restore(&f, dir);
    collect c = {0};
    oml_wal_recovery rep;
    oml_diag d = {0};
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, &rep, &d), OML_EFORMAT);
    assert_non_null(strstr(d.msg, f.name[2]));
    /* The whole message, hint included (issue 12: it was cut at 160 bytes). */
    assert_true(strlen(d.msg) > 160);
    assert_non_null(strstr(d.msg, "sets the later segments aside)"));
    f.data[1][f.len[1] - 3] ^= 0x10;
    f.len[1] -= 5;
    files_restore(&f, dir);
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, &rep, &d), OML_EFORMAT);

    /* salvage keeps the prefix and sets the rest aside. */
    f.len[1] += 5;
    f.data[1][f.len[1] - 3] ^= 0x10;
    files_restore(&f, dir);
    o.salvage = 1;
    memset(&c, 0, sizeof c);
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, &rep, &d), OML_OK);
    assert_int_equal(rep.salvaged, 1);
    assert_int_equal(rep.torn, 1);
    assert_int_equal(c.bad, 0);
    uint64_t kept = c.n;
    assert_true(kept < n);
    assert_int_equal(oml_wal_last_lsn(w), kept);
    assert_int_equal(oml_wal_segments(w), 2);
    append_n(w, 3, 3);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    assert_int_equal(count_files(dir, ".corrupt"), f.n - 2);
    assert_int_equal(reopen(dir, 0, &c, &rep, NULL), OML_OK);
    assert_int_equal(c.n, kept + 3);
    assert_int_equal(c.bad, 0);
    assert_int_equal(rep.torn, 0);
    files_free(&f);
    oml_test_rmtree(dir);
}

static void test_missing_and_foreign_segments(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    build(dir, 60);
    files f;
    files_load(&f, dir, ".log");
    oml_wal *w = NULL;
    collect c = {0};
    oml_diag d = {0};
    oml_wal_options o = {.fsync = OML_WAL_FSYNC_NO};

    /* A segment missing in the middle. */
    files g = f;
    memmove(&g.name[1], &g.name[2], (size_t)(g.n - 2) * 64);
    memmove(&g.data[1], &g.data[2], (size_t)(g.n - 2) * sizeof g.data[0]);
    memmove(&g.len[1], &g.len[2], (size_t)(g.n - 2) * sizeof g.len[0]);
    g.n--;
    files_restore(&g, dir);
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, NULL, &d), OML_EFORMAT);
    assert_non_null(strstr(d.msg, "missing"));

    /* Another format version; then not a WAL at all. */
    uint32_t v = 2;
    memcpy(f.data[0] + 8, &v, 4);
    uint32_t crc = (uint32_t)crc32(0L, f.data[0], 36);
    memcpy(f.data[0] + 36, &crc, 4);
    files_restore(&f, dir);
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, NULL, &d), OML_EVERSION);
    assert_non_null(strstr(d.msg, "version 2"));
    f.data[0][0] = 'X';
    files_restore(&f, dir);
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, NULL, &d), OML_EFORMAT);
    assert_non_null(strstr(d.msg, "magic"));
    /* A damaged header. */
    f.data[0][0] = 'O';
    f.data[0][20] ^= 1;
    files_restore(&f, dir);
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, NULL, &d), OML_EFORMAT);
    f.data[0][20] ^= 1;
    v = 1;
    memcpy(f.data[0] + 8, &v, 4);
    crc = (uint32_t)crc32(0L, f.data[0], 36);
    memcpy(f.data[0] + 36, &crc, 4);

    /* A segment creation that never finished is removed. */
    files_restore(&f, dir);
    char p[4096];
    snprintf(p, sizeof p, "%s/wal-00000000000000ff.log.tmp", dir);
    FILE *fp = fopen(p, "wb");
    fclose(fp);
    assert_int_equal(reopen(dir, 0, &c, NULL, NULL), OML_OK);
    assert_int_equal(c.n, 60);
    assert_int_equal(access(p, F_OK), -1);
    files_free(&f);
    oml_test_rmtree(dir);
}

static void test_truncate_before(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    uint64_t n = build(dir, 100);
    files f;
    files_load(&f, dir, ".log");
    assert_true(f.n >= 6);
    uint64_t first[256];
    for (int i = 0; i < f.n; i++)
        first[i] = strtoull(f.name[i] + 4, NULL, 16);

    oml_wal *w = NULL;
    collect c;
    assert_int_equal(reopen(dir, 0, &c, NULL, &w), OML_OK);
    uint64_t bytes = oml_wal_bytes(w);
    assert_int_equal(oml_wal_truncate_before(w, first[3] - 1, NULL), 2);
    assert_int_equal(oml_wal_truncate_before(w, first[3] + 1, NULL), 1); /* segment 2 only */
    assert_int_equal(oml_wal_segments(w), f.n - 3);
    assert_int_equal(oml_wal_bytes(w), bytes - f.len[0] - f.len[1] - f.len[2]);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    files g;
    files_load(&g, dir, ".log");
    assert_int_equal(g.n, f.n - 3);
    assert_string_equal(g.name[0], f.name[3]);
    files_free(&g);

    /* The checkpoint must cover what is gone. */
    oml_diag d = {0};
    oml_wal_options o = {.fsync = OML_WAL_FSYNC_NO, .after_lsn = first[3] - 2};
    assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, NULL, &d), OML_EFORMAT);
    assert_non_null(strstr(d.msg, "missing"));
    assert_int_equal(reopen(dir, first[3] - 1, &c, NULL, &w), OML_OK);
    assert_int_equal(c.first, first[3]);
    assert_int_equal(c.n, n - first[3] + 1);
    /* Never the active segment. */
    assert_int_equal(oml_wal_truncate_before(w, UINT64_MAX, NULL), f.n - 4);
    assert_int_equal(oml_wal_segments(w), 1);
    assert_int_equal(oml_wal_truncate_before(w, UINT64_MAX, NULL), 0);
    append_n(w, 2, 2);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    assert_int_equal(reopen(dir, n, &c, NULL, NULL), OML_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.first, n + 1);
    files_free(&f);
    oml_test_rmtree(dir);
}

static void test_behind_checkpoint(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    build(dir, 10);
    collect c;
    oml_wal_recovery rep;
    oml_wal *w = NULL;
    assert_int_equal(reopen(dir, 20, &c, &rep, &w), OML_OK);
    assert_int_equal(c.n, 0);
    assert_int_equal(rep.behind_checkpoint, 1);
    assert_int_equal(rep.next_lsn, 21);
    append_n(w, 3, 3);
    assert_int_equal(oml_wal_last_lsn(w), 23);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    assert_int_equal(reopen(dir, 20, &c, &rep, NULL), OML_OK);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.first, 21);
    assert_int_equal(rep.behind_checkpoint, 0);
    oml_diag d = {0};
    assert_int_equal(reopen(dir, 5, &c, &rep, NULL), OML_EFORMAT); /* 11..20 are gone */
    (void)d;
    oml_test_rmtree(dir);
}

static void test_failing_write(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    oml_wal *w = NULL;
    oml_wal_options o = {.fsync = OML_WAL_FSYNC_ALWAYS};
    assert_int_equal(oml_wal_open(&w, dir, &o, NULL, NULL, NULL, NULL), OML_OK);
    append_n(w, 10, 10);
    uint64_t bytes = oml_wal_bytes(w);
    files f;
    files_load(&f, dir, ".log");
    assert_int_equal(f.len[0], bytes);

    /* The file may grow by 100 more bytes: the group's write is cut short. */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = bytes + 100;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    uint8_t b[200];
    memset(b, 0xab, sizeof b);
    uint64_t lsn;
    for (int i = 0; i < 5; i++)
        assert_int_equal(oml_wal_append(w, 1, b, sizeof b, &lsn), OML_OK);
    assert_int_equal(lsn, 15);
    oml_diag d = {0};
    int rc = oml_wal_commit(w, &d);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(rc, OML_EIO);
    assert_non_null(strstr(d.msg, strerror(EFBIG)));
    assert_int_equal(oml_wal_last_lsn(w), 10);
    assert_int_equal(oml_wal_bytes(w), bytes);
    assert_files_equal(&f, dir); /* cut back: no partial record left */

    /* Not sticky: once there is room again, the LSNs are reused. */
    append_n(w, 3, 3);
    assert_int_equal(oml_wal_last_lsn(w), 13);
    assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    collect c;
    oml_wal_recovery rep;
    assert_int_equal(reopen(dir, 0, &c, &rep, NULL), OML_OK);
    assert_int_equal(c.n, 13);
    assert_int_equal(c.bad, 0);
    assert_int_equal(rep.torn, 0);
    files_free(&f);
    oml_test_rmtree(dir);
}

static int fail_sync(int fd)
{
    (void)fd;
    errno = EIO;
    return -1;
}

static void test_failing_fsync_is_sticky(void **state)
{
    (void)state;
    char dir[256];
    make_dir(dir, sizeof dir);
    for (int policy = OML_WAL_FSYNC_EVERYSEC; policy <= OML_WAL_FSYNC_ALWAYS; policy++) {
        oml_wal *w = NULL;
        oml_wal_options o = {.fsync = policy};
        collect c = {0};
        assert_int_equal(oml_wal_open(&w, dir, &o, on_record, &c, NULL, NULL), OML_OK);
        uint64_t base = oml_wal_last_lsn(w);
        append_n(w, 4, 4);
        oml__wal_fdatasync = fail_sync;
        oml_diag d = {0};
        uint8_t b[8] = {0};
        int rc = OML_OK;
        /* ALWAYS fails at once; EVERYSEC at the commit after the thread's try. */
        for (int i = 0; i < 40 && rc == OML_OK; i++) {
            assert_int_equal(oml_wal_append(w, 1, b, sizeof b, NULL), OML_OK);
            rc = oml_wal_commit(w, &d);
            if (rc == OML_OK)
                usleep(100000);
        }
        assert_int_equal(rc, OML_EIO);
        assert_non_null(strstr(d.msg, "fdatasync"));
        uint64_t kept = oml_wal_last_lsn(w);
        assert_int_equal(oml_wal_append(w, 1, b, sizeof b, NULL), OML_EIO);
        assert_int_equal(oml_wal_commit(w, &d), OML_EIO);
        assert_int_equal(oml_wal_sync(w, &d), OML_EIO);
        assert_int_equal(oml_wal_close(w, &d), OML_EIO);
        oml__wal_fdatasync = fdatasync;
        if (policy == OML_WAL_FSYNC_ALWAYS)
            assert_int_equal(kept, base + 4);
        /* What was committed is there; the refused group is not. */
        memset(&c, 0, sizeof c);
        assert_int_equal(oml_wal_open(&w, dir, &o, NULL, NULL, NULL, NULL), OML_OK);
        assert_int_equal(oml_wal_last_lsn(w), kept);
        assert_int_equal(oml_wal_close(w, NULL), OML_OK);
    }
    oml_test_rmtree(dir);
}

static void test_fsync_policies(void **state)
{
    (void)state;
    for (int policy = OML_WAL_FSYNC_EVERYSEC; policy <= OML_WAL_FSYNC_NO; policy++) {
        char dir[256];
        make_dir(dir, sizeof dir);
        oml_wal *w = NULL;
        oml_wal_options o = {.fsync = policy, .segment_bytes = 8192};
        assert_int_equal(oml_wal_open(&w, dir, &o, NULL, NULL, NULL, NULL), OML_OK);
        append_n(w, 100, 10);
        if (policy == OML_WAL_FSYNC_ALWAYS)
            assert_int_equal(oml_wal_synced_lsn(w), 100);
        if (policy == OML_WAL_FSYNC_EVERYSEC) {
            /* The thread catches up within about a second. */
            for (int i = 0; i < 40 && oml_wal_synced_lsn(w) < 100; i++)
                usleep(100000);
            assert_int_equal(oml_wal_synced_lsn(w), 100);
        }
        assert_true(oml_wal_synced_lsn(w) <= 100);
        assert_int_equal(oml_wal_sync(w, NULL), OML_OK);
        assert_int_equal(oml_wal_synced_lsn(w), 100);
        append_n(w, 7, 7);
        assert_int_equal(oml_wal_close(w, NULL), OML_OK);
        collect c;
        assert_int_equal(reopen(dir, 0, &c, NULL, NULL), OML_OK);
        assert_int_equal(c.n, 107);
        assert_int_equal(c.bad, 0);
        oml_test_rmtree(dir);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_rollover),
        cmocka_unit_test(test_group_larger_than_segment),
        cmocka_unit_test(test_callback_abort_and_bad_args),
        cmocka_unit_test(test_torn_tail_every_offset),
        cmocka_unit_test(test_bitflip_last_record_is_torn),
        cmocka_unit_test(test_damage_in_the_middle),
        cmocka_unit_test(test_fake_record_in_payload),
        cmocka_unit_test(test_missing_and_foreign_segments),
        cmocka_unit_test(test_truncate_before),
        cmocka_unit_test(test_behind_checkpoint),
        cmocka_unit_test(test_failing_write),
        cmocka_unit_test(test_failing_fsync_is_sticky),
        cmocka_unit_test(test_fsync_policies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
