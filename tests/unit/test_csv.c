/* test_csv.c - the CSV data set reader of the evaluation tools
 * (tools/common/csv.h): a good file, header handling, label mapping, each
 * kind of malformed row with its line and field in the message; and the
 * standardisation both tools apply (tools/common/standardize.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csv.h"
#include "dataset.h"
#include "standardize.h"
#include "testutil.h"

/* Reads text as a CSV file; *msg gets the diag message after "PATH". */
static int read_text(const char *text, oml_dataset *ds, char *msg, size_t cap)
{
    char path[256];
    assert_int_equal(oml_test_tmpfile(path, sizeof path), 0);
    assert_int_equal(oml_test_write_file(path, text, strlen(text)), 0);
    oml_diag d = {0};
    int rc = oml_csv_read(path, ds, &d);
    msg[0] = '\0';
    if (rc != 0) {
        size_t n = strlen(path);
        assert_memory_equal(d.msg, path, n); /* every message names the file first */
        snprintf(msg, cap, "%s", d.msg + n);
    }
    unlink(path);
    return rc;
}

static void test_good_file(void **state)
{
    (void)state;
    oml_dataset ds;
    char msg[200];
    const char *text = "# a comment\n"
                       "species, x1 ,x2\r\n"
                       "\n"
                       "cat,1,2.5\r\n"
                       "  dog , -3e2 ,\t4\n"
                       "cat,0x10,-0\n"
                       "   \n"
                       "bird,7,8"; /* no final newline */
    assert_int_equal(read_text(text, &ds, msg, sizeof msg), 0);
    assert_int_equal(ds.n, 4);
    assert_int_equal(ds.dim, 2);
    assert_int_equal(ds.n_classes, 3);
    /* Classes in order of first appearance. */
    assert_string_equal(ds.names[0], "cat");
    assert_string_equal(ds.names[1], "dog");
    assert_string_equal(ds.names[2], "bird");
    int32_t y[4] = {0, 1, 0, 2};
    float x[8] = {1, 2.5f, -300, 4, 16, 0, 7, 8};
    assert_memory_equal(ds.y, y, sizeof y);
    for (int i = 0; i < 8; i++)
        assert_true(ds.x[i] == x[i]);
    assert_int_equal(oml_dataset_class_of(&ds, "dog"), 1);
    assert_int_equal(oml_dataset_class_of(&ds, "bird"), 2);
    assert_int_equal(oml_dataset_class_of(&ds, "fish"), -1);
    oml_dataset_free(&ds);
    assert_null(ds.x);
}

/* No header: the first line is data. Numeric labels are strings too. */
static void test_no_header_and_many_labels(void **state)
{
    (void)state;
    oml_dataset ds;
    char msg[200];
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int i = 0; i < 1000; i++) /* 300 classes: the label table grows */
        len += (size_t)snprintf(text + len, cap - len, "%d,%d\n", (i * 7) % 300 + 5, i);
    assert_int_equal(read_text(text, &ds, msg, sizeof msg), 0);
    assert_int_equal(ds.n, 1000);
    assert_int_equal(ds.dim, 1);
    assert_int_equal(ds.n_classes, 300);
    for (int i = 0; i < 1000; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d", (i * 7) % 300 + 5);
        assert_string_equal(ds.names[ds.y[i]], want);
        assert_true(ds.x[i] == (float)i);
        if (i < 300)
            assert_int_equal(ds.y[i], i); /* the first 300 rows are 300 new labels */
    }
    oml_dataset_free(&ds);
    free(text);
}

static void expect_error(const char *text, int code, const char *want)
{
    oml_dataset ds;
    char msg[200];
    assert_int_equal(read_text(text, &ds, msg, sizeof msg), code);
    if (strcmp(msg, want) != 0)
        fail_msg("got '%s', want '%s'", msg, want);
    assert_null(ds.x);
    assert_null(ds.names);
    assert_int_equal(ds.n, 0);
}

static void test_malformed_rows(void **state)
{
    (void)state;
    const char *hdr = "label,a,b,c\n";
    char text[512];
#define WITH(rows) (snprintf(text, sizeof text, "%s%s", hdr, rows), text)
    expect_error(WITH("x,1,2,3\ny,4,abc,6\n"), OML_EFORMAT, ":3: field 3: \"abc\" is not a number");
    expect_error(WITH("x,1,2,3\ny,4,5 6,6\n"), OML_EFORMAT, ":3: field 3: \"5 6\" is not a number");
    expect_error(WITH("x,1,,3\n"), OML_EFORMAT, ":2: field 3: empty, not a number");
    expect_error(WITH("x,1,2,nan\n"), OML_EFORMAT, ":2: field 4: \"nan\" is not finite");
    expect_error(WITH("x,-inf,2,3\n"), OML_EFORMAT, ":2: field 2: \"-inf\" is not finite");
    expect_error(WITH("x,1,1e39,3\n"), OML_EFORMAT,
                 ":2: field 3: \"1e39\" is beyond the range of a float");
    expect_error(WITH("x,1,2,3\n\ny,1,2\n"), OML_EFORMAT,
                 ":4: field 4: missing (3 fields where line 1 has 4)");
    expect_error(WITH("x,1,2,3,4,5\n"), OML_EFORMAT,
                 ":2: field 5: unexpected (6 fields where line 1 has 4)");
    expect_error(WITH(",1,2,3\n"), OML_EFORMAT, ":2: field 1: an empty label");
    expect_error(WITH("x\n"), OML_EFORMAT, ":2: field 2: missing (1 fields where line 1 has 4)");
    /* A long value is cut in the message. */
    expect_error(WITH("x,1,2,abcdefghijklmnopqrstuvwxyz0123456789\n"), OML_EFORMAT,
                 ":2: field 4: \"abcdefghijklmnopqrstuvwx...\" is not a number");
    char label[300];
    memset(label, 'l', 256);
    snprintf(label + 256, sizeof label - 256, ",1,2,3\n");
    expect_error(WITH(label), OML_EFORMAT, ":2: field 1: a label longer than 255 bytes");
#undef WITH
    /* Without a header the first data line sets the field count. */
    expect_error("a,1,2\nb,3,4\nc,5\n", OML_EFORMAT,
                 ":3: field 3: missing (2 fields where line 1 has 3)");
    expect_error("a\n", OML_EFORMAT, ":1: field 2: missing (a row is label,f1,...,fd)");
}

static void test_header_and_empty_files(void **state)
{
    (void)state;
    /* A first line with some numeric feature fields is data, not a header. */
    expect_error("label,x,1\na,1,2\n", OML_EFORMAT, ":1: field 2: \"x\" is not a number");
    expect_error("label,1,y\n", OML_EFORMAT, ":1: field 3: \"y\" is not a number");
    /* Only a second header-like line is an error. */
    expect_error("label,x,y\na,1,2\nlabel,x,y\n", OML_EFORMAT, ":3: field 2: \"x\" is not a number");
    expect_error("", OML_EFORMAT, ": no data rows (empty file)");
    expect_error("\n# nothing\n   \n", OML_EFORMAT, ": no data rows (empty file)");
    expect_error("label,x,y\n", OML_EFORMAT, ": no data rows (only a header)");
}

static void test_nul_and_missing_file(void **state)
{
    (void)state;
    char path[256];
    assert_int_equal(oml_test_tmpfile(path, sizeof path), 0);
    assert_int_equal(oml_test_write_file(path, "a,1,2\nb,3\0,4\n", 14), 0);
    oml_dataset ds;
    oml_diag d = {0};
    assert_int_equal(oml_csv_read(path, &ds, &d), OML_EFORMAT);
    assert_non_null(strstr(d.msg, ":2: a NUL byte in the line"));
    unlink(path);
    assert_int_equal(oml_csv_read(path, &ds, &d), OML_EIO);
    assert_non_null(strstr(d.msg, "cannot open"));
    assert_null(ds.x);
}

/* Standardisation with some rows' statistics; a constant feature keeps sd 1. */
static void test_standardize(void **state)
{
    (void)state;
    float X[4 * 3] = {1, 5, 10,  3, 5, 20,  5, 5, 30,  100, 7, 0};
    int32_t rows[3] = {0, 1, 2}; /* the last row is not in the statistics */
    float mean[3], sd[3];
    assert_int_equal(oml_standardize_fit(X, 3, rows, 3, mean, sd), 0);
    assert_true(fabsf(mean[0] - 3.0f) < 1e-6f && fabsf(mean[1] - 5.0f) < 1e-6f &&
                fabsf(mean[2] - 20.0f) < 1e-6f);
    assert_true(fabsf(sd[0] - sqrtf(8.0f / 3.0f)) < 1e-6f);
    assert_true(sd[1] == 1.0f);
    oml_standardize_apply(X, 4, 3, mean, sd);
    assert_true(fabsf(X[0] + sqrtf(1.5f)) < 1e-6f);
    assert_true(X[1] == 0.0f && X[4] == 0.0f && X[10] == 2.0f);
    assert_int_equal(oml_standardize_fit(X, 3, NULL, 0, mean, sd), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_file),
        cmocka_unit_test(test_no_header_and_many_labels),
        cmocka_unit_test(test_malformed_rows),
        cmocka_unit_test(test_header_and_empty_files),
        cmocka_unit_test(test_nul_and_missing_file),
        cmocka_unit_test(test_standardize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
