/* test_checkpoint.c - checkpoint files: round trip, retention, and every
 * kind of damage refused with the previous good file used instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "testutil.h"

static char g_dir[256];

static int setup(void **state)
{
    return oml_test_tmpdir(g_dir, sizeof g_dir, "omld-test-ckpt");
}

static int teardown(void **state)
{
    return oml_test_rmtree(g_dir);
}

static void write_one(uint64_t lsn, uint8_t fill, int keep, char *path)
{
    static uint8_t a[1000], b[7];
    memset(a, fill, sizeof a);
    memset(b, fill + 1, sizeof b);
    oml_ckpt_section s[3] = {{.tag = 1, .data = a, .len = sizeof a},
                             {.tag = 2, .data = b, .len = sizeof b}, {.tag = 3}};
    uint64_t bytes = 0;
    assert_int_equal(oml_ckpt_write(g_dir, lsn, s, 3, keep, path, 512, &bytes, NULL), 0);
    assert_int_equal(bytes, 24 + 3 * 12 + 1000 + 7 + 4);
}

static int refusals;
static void on_refused(void *arg, const char *path, const char *why)
{
    refusals++;
}

static void test_round_trip_and_retention(void **state)
{
    char p1[512], p2[512], p3[512];
    write_one(10, 0x11, 2, p1);
    write_one(20, 0x22, 2, p2);
    write_one(30, 0x33, 2, p3);
    assert_int_equal(access(p1, F_OK), -1); /* only the newest two are kept */
    assert_int_equal(access(p2, F_OK), 0);
    oml_ckpt c;
    assert_int_equal(oml_ckpt_load_newest(g_dir, &c, NULL, NULL, NULL), 0);
    assert_int_equal(c.lsn, 30);
    assert_int_equal(c.n, 3);
    const oml_ckpt_section *s = oml_ckpt_find(&c, 2);
    assert_non_null(s);
    assert_int_equal(s->len, 7);
    assert_int_equal(s->data[0], 0x34);
    assert_int_equal(oml_ckpt_find(&c, 3)->len, 0);
    assert_null(oml_ckpt_find(&c, 9));
    oml_ckpt_free(&c);
}

static void test_damage_falls_back_to_previous(void **state)
{
    char p2[512], p3[512];
    write_one(20, 0x22, 2, p2);
    write_one(30, 0x33, 2, p3);
    size_t len = 0;
    unsigned char *orig = oml_test_read_file(p3, &len);
    assert_non_null(orig);
    /* Every truncation and a bit flip in every byte: refused, and the
     * loader falls back to checkpoint 20. */
    for (size_t cut = 0; cut < len; cut += (cut < 64 || cut > len - 64) ? 1 : 97) {
        assert_int_equal(oml_test_write_file(p3, orig, cut), 0);
        oml_ckpt c;
        refusals = 0;
        oml_diag d = {0};
        assert_int_equal(oml_ckpt_load_file(p3, &c, &d) != 0, 1);
        assert_int_equal(oml_ckpt_load_newest(g_dir, &c, on_refused, NULL, NULL), 0);
        assert_int_equal(c.lsn, 20);
        assert_int_equal(refusals, 1);
        oml_ckpt_free(&c);
    }
    for (size_t i = 0; i < len; i += (i < 64 || i > len - 64) ? 1 : 53) {
        unsigned char *bad = malloc(len);
        memcpy(bad, orig, len);
        bad[i] ^= 0x10;
        assert_int_equal(oml_test_write_file(p3, bad, len), 0);
        free(bad);
        oml_ckpt c;
        oml_diag d = {0};
        assert_int_not_equal(oml_ckpt_load_file(p3, &c, &d), 0);
        assert_true(d.msg[0] != 0);
        assert_int_equal(oml_ckpt_load_newest(g_dir, &c, NULL, NULL, NULL), 0);
        assert_int_equal(c.lsn, 20);
        oml_ckpt_free(&c);
    }
    /* A newer format version is refused by name. */
    unsigned char *newer = malloc(len);
    memcpy(newer, orig, len);
    newer[8] = 2;
    assert_int_equal(oml_test_write_file(p3, newer, len), 0);
    free(newer);
    oml_ckpt c;
    oml_diag d = {0};
    assert_int_equal(oml_ckpt_load_file(p3, &c, &d), OML_EVERSION);
    assert_non_null(strstr(d.msg, "newer"));
    /* Both damaged: an error, never an empty start. */
    assert_int_equal(oml_test_write_file(p2, orig, 10), 0);
    assert_int_equal(oml_ckpt_load_newest(g_dir, &c, NULL, NULL, &d), OML_EFORMAT);
    assert_non_null(strstr(d.msg, "none of the 2"));
    free(orig);
}

/* A file of several of the check's 64 MB parts (each part's CRC taken on
 * its own thread, then combined): it loads whole, and one bit flipped in
 * any part, or in the last partial one, is refused. */
static void test_large_file_checked_in_parts(void **state)
{
    const size_t big = ((size_t)64 << 20) * 2 + 12345;
    uint8_t *a = malloc(big);
    assert_non_null(a);
    for (size_t i = 0; i < big; i++)
        a[i] = (uint8_t)(i * 2654435761u >> 13);
    oml_ckpt_section s[1] = {{.tag = 7, .data = a, .len = big}};
    char path[512];
    assert_int_equal(oml_ckpt_write(g_dir, 50, s, 1, 2, path, sizeof path, NULL, NULL), 0);
    oml_ckpt c;
    assert_int_equal(oml_ckpt_load_file(path, &c, NULL), OML_OK);
    assert_int_equal(oml_ckpt_find(&c, 7)->len, big);
    assert_memory_equal(oml_ckpt_find(&c, 7)->data, a, big);
    oml_ckpt_free(&c);
    const size_t flips[3] = {100, ((size_t)64 << 20) + 5, big - 3};
    for (int f = 0; f < 3; f++) {
        a[flips[f]] ^= 0x04; /* the checksum was of the unflipped bytes */
        FILE *fp = fopen(path, "r+b");
        assert_non_null(fp);
        assert_int_equal(fseek(fp, (long)(24 + 12 + flips[f]), SEEK_SET), 0);
        assert_int_equal(fwrite(&a[flips[f]], 1, 1, fp), 1);
        assert_int_equal(fclose(fp), 0);
        oml_diag d = {0};
        assert_int_equal(oml_ckpt_load_file(path, &c, &d), OML_EFORMAT);
        assert_non_null(strstr(d.msg, "checksum"));
        a[flips[f]] ^= 0x04;
        fp = fopen(path, "r+b");
        assert_int_equal(fseek(fp, (long)(24 + 12 + flips[f]), SEEK_SET), 0);
        assert_int_equal(fwrite(&a[flips[f]], 1, 1, fp), 1);
        assert_int_equal(fclose(fp), 0);
        assert_int_equal(oml_ckpt_load_file(path, &c, NULL), OML_OK); /* whole again */
        oml_ckpt_free(&c);
    }
    free(a);
}

/* The whole file of a read into memory. */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

/* A section written in parts (where its bytes lie, not copied together)
 * is the same file as the section written whole, and loads as one. */
static void test_parts_are_the_whole(void **state)
{
    uint8_t whole[300], other[5] = {9, 8, 7, 6, 5};
    for (size_t i = 0; i < sizeof whole; i++)
        whole[i] = (uint8_t)(i * 31 + 7);
    char pw[512], pp[512];
    oml_ckpt_section a[2] = {{.tag = 4, .data = whole, .len = sizeof whole},
                             {.tag = 5, .data = other, .len = sizeof other}};
    uint64_t bw = 0, bp = 0;
    assert_int_equal(oml_ckpt_write(g_dir, 40, a, 2, 2, pw, sizeof pw, &bw, NULL), 0);
    oml_ckpt_part parts[4] = {{whole, 100}, {NULL, 0}, {whole + 100, 199}, {whole + 299, 1}};
    oml_ckpt_section b[2] = {{.tag = 4, .data = other, .len = 1, .parts = parts, .n_parts = 4},
                             {.tag = 5, .data = other, .len = sizeof other}};
    assert_int_equal(oml_ckpt_write(g_dir, 41, b, 2, 2, pp, sizeof pp, &bp, NULL), 0);
    assert_int_equal(bw, bp);
    size_t nw, np;
    uint8_t *fw = slurp(pw, &nw), *fp = slurp(pp, &np);
    assert_int_equal(nw, np);
    assert_int_equal(nw, bw);
    /* The same but for the log position in the header (bytes 16..23) and the CRC after it all. */
    assert_memory_equal(fw, fp, 16);
    assert_memory_equal(fw + 24, fp + 24, nw - 28);
    free(fw);
    free(fp);
    oml_ckpt c;
    assert_int_equal(oml_ckpt_load_newest(g_dir, &c, NULL, NULL, NULL), 0);
    assert_int_equal(c.lsn, 41);
    const oml_ckpt_section *s = oml_ckpt_find(&c, 4);
    assert_non_null(s);
    assert_int_equal(s->len, sizeof whole);
    assert_memory_equal(s->data, whole, sizeof whole);
    oml_ckpt_free(&c);
    oml_ckpt_section bad = {.tag = 6, .parts = parts, .n_parts = OML_CKPT_MAX_PARTS + 1};
    assert_int_equal(oml_ckpt_write(g_dir, 42, &bad, 1, 2, NULL, 0, NULL, NULL), OML_EINVAL);
}

static void test_empty_and_missing_directory(void **state)
{
    oml_ckpt c;
    char empty[300];
    snprintf(empty, sizeof empty, "%s/empty", g_dir);
    assert_int_equal(mkdir(empty, 0700), 0);
    assert_int_equal(oml_ckpt_load_newest(empty, &c, NULL, NULL, NULL), OML_EEMPTY);
    oml_diag d = {0};
    assert_int_equal(oml_ckpt_write("/nonexistent-dir/x", 1, NULL, 0, 1, NULL, 0, NULL, &d), OML_EIO);
    assert_non_null(strstr(d.msg, "cannot create"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_and_retention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damage_falls_back_to_previous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_and_missing_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parts_are_the_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_file_checked_in_parts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
