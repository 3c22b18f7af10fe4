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
    oml_ckpt_section s[3] = {{1, a, sizeof a}, {2, b, sizeof b}, {3, NULL, 0}};
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
