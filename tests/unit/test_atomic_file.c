/* test_atomic_file.c - the atomic file replacement: the parts land in
 * order, an existing file is replaced whole, no temporary is left behind,
 * and a failure says where and leaves the old file alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "atomic_file.h"
#include "testutil.h"

static char g_dir[256];

static int setup(void **state)
{
    (void)state;
    return oml_test_tmpdir(g_dir, sizeof g_dir, "test_atomic_file");
}

static int teardown(void **state)
{
    (void)state;
    return oml_test_rmtree(g_dir);
}

static void test_parts_in_order_and_replaced(void **state)
{
    (void)state;
    char path[300], tmp[320];
    snprintf(path, sizeof path, "%s/f", g_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct iovec parts[3] = {{"abc", 3}, {"", 0}, {"defg", 4}};
    enum oml_atomic_stage stage = OML_ATOMIC_WRITE;
    assert_int_equal(oml_atomic_write(path, parts, 3, 0640, &stage), 0);
    assert_int_equal(stage, OML_ATOMIC_OK);
    size_t n;
    unsigned char *b = oml_test_read_file(path, &n);
    assert_non_null(b);
    assert_int_equal(n, 7);
    assert_memory_equal(b, "abcdefg", 7);
    free(b);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777 & ~0640u, 0);
    assert_int_not_equal(stat(tmp, &st), 0);

    struct iovec one = {"x", 1};
    assert_int_equal(oml_atomic_write(path, &one, 1, 0640, NULL), 0);
    b = oml_test_read_file(path, &n);
    assert_int_equal(n, 1);
    assert_int_equal(b[0], 'x');
    free(b);
}

static void test_failures_say_where(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/no/such/dir/f", g_dir);
    struct iovec one = {"x", 1};
    enum oml_atomic_stage stage = OML_ATOMIC_OK;
    assert_int_equal(oml_atomic_write(path, &one, 1, 0640, &stage), -1);
    assert_int_equal(stage, OML_ATOMIC_CREATE);
    assert_int_equal(errno, ENOENT);

    /* Renaming over a directory fails: the temporary goes, the directory stays. */
    char sub[300], tmp[320];
    snprintf(sub, sizeof sub, "%s/sub", g_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", sub);
    assert_int_equal(mkdir(sub, 0750), 0);
    char inner[320];
    snprintf(inner, sizeof inner, "%s/keep", sub);
    assert_int_equal(oml_test_write_file(inner, "k", 1), 0);
    assert_int_equal(oml_atomic_write(sub, &one, 1, 0640, &stage), -1);
    assert_int_equal(stage, OML_ATOMIC_RENAME);
    struct stat st;
    assert_int_not_equal(stat(tmp, &st), 0);
    assert_int_equal(stat(inner, &st), 0);
}

static void test_fsync_dir(void **state)
{
    (void)state;
    assert_int_equal(oml_fsync_dir(g_dir), 0);
    char path[300];
    snprintf(path, sizeof path, "%s/nothing-here", g_dir);
    assert_int_equal(oml_fsync_dir(path), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parts_in_order_and_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_say_where, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fsync_dir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
