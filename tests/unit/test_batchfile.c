/* test_batchfile.c - the batch model file: the exact bytes of a small file,
 * a round trip through disk with a real model encoding, and refusal of a
 * bad magic, damaged metadata and a truncated file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "batchfile.h"
#include "testutil.h"

static oml_batchfile_meta sample_meta(void)
{
    oml_batchfile_meta m = {.created_ms = 1700000000123ull, .job_id = 7, .trained_items = 40};
    snprintf(m.name, sizeof m.name, "m1");
    snprintf(m.method, sizeof m.method, "danml");
    snprintf(m.variant, sizeof m.variant, "plain");
    return m;
}

/* "OMLDMDL1" | u32 meta length | meta | u32 CRC-32 of the meta | model. */
static void test_layout(void **state)
{
    (void)state;
    oml_batchfile_meta m = sample_meta();
    const uint8_t model[3] = {0xaa, 0xbb, 0xcc};
    uint8_t *b;
    size_t n;
    assert_int_equal(oml_batchfile_encode(&m, model, 3, &b, &n, NULL), OML_OK);
    const char *text = "name=m1\nmethod=danml\nvariant=plain\ncreated_ms=1700000000123\n"
                       "job_id=7\ntrained_items=40\n";
    size_t tl = strlen(text);
    assert_int_equal(n, 8 + 4 + tl + 4 + 3);
    assert_memory_equal(b, "OMLDMDL1", 8);
    assert_int_equal(b[8], (uint8_t)tl);
    assert_int_equal(b[9] | b[10] | b[11], 0);
    assert_memory_equal(b + 12, text, tl);
    assert_memory_equal(b + 16 + tl, model, 3);

    oml_batchfile_meta back;
    const uint8_t *mb;
    size_t ml;
    assert_int_equal(oml_batchfile_decode(b, n, &back, &mb, &ml, NULL), OML_OK);
    assert_string_equal(back.name, "m1");
    assert_string_equal(back.method, "danml");
    assert_string_equal(back.variant, "plain");
    assert_true(back.created_ms == 1700000000123ull);
    assert_true(back.job_id == 7);
    assert_int_equal(back.trained_items, 40);
    assert_ptr_equal(mb, b + 16 + tl);
    assert_int_equal(ml, 3);
    free(b);
}

static void test_refusals(void **state)
{
    (void)state;
    oml_batchfile_meta m = sample_meta(), back;
    const uint8_t model[1] = {1};
    uint8_t *b;
    size_t n, ml;
    const uint8_t *mb;
    oml_diag d = {0};
    assert_int_equal(oml_batchfile_encode(&m, model, 1, &b, &n, NULL), OML_OK);
    b[0] ^= 1;
    assert_int_equal(oml_batchfile_decode(b, n, &back, &mb, &ml, &d), OML_EFORMAT);
    assert_string_equal(d.msg, "not a model file (bad magic)");
    b[0] ^= 1;
    b[20] ^= 1; /* inside the meta text */
    assert_int_equal(oml_batchfile_decode(b, n, &back, &mb, &ml, &d), OML_EFORMAT);
    assert_string_equal(d.msg, "damaged metadata");
    b[20] ^= 1;
    for (size_t cut = 0; cut < n - 1; cut++) /* every cut before the model's bytes */
        assert_int_equal(oml_batchfile_decode(b, cut, &back, &mb, &ml, NULL), OML_EFORMAT);
    assert_int_equal(oml_batchfile_decode(b, n, &back, &mb, &ml, NULL), OML_OK);
    free(b);

    memset(m.name, 'n', sizeof m.name - 1); /* 255 bytes */
    memset(m.method, 'm', sizeof m.method - 1);
    memset(m.variant, 'v', sizeof m.variant - 1);
    assert_int_equal(oml_batchfile_encode(&m, model, 1, &b, &n, NULL), OML_OK);
    free(b);
}

/* Written and read back through a file, with a real model encoding. */
static void test_file_round_trip(void **state)
{
    (void)state;
    char dir[256], path[300];
    assert_int_equal(oml_test_tmpdir(dir, sizeof dir, "test_batchfile"), 0);
    snprintf(path, sizeof path, "%s/m1.omlb", dir);
    oml_batch_layout lay;
    oml_batch_model *bm = NULL, *back = NULL;
    assert_int_equal(oml_batch_layout_init(&lay, 10, 1, 8, 4, 1, NULL), OML_OK);
    assert_int_equal(oml_batch_model_create(&bm, &lay, 3, NULL), OML_OK);
    uint8_t *enc, *got;
    size_t len, got_len;
    assert_int_equal(oml_batch_model_encode(bm, &enc, &len), OML_OK);
    oml_batchfile_meta m = sample_meta(), mb;
    assert_int_equal(oml_batchfile_write(path, &m, enc, len, NULL), OML_OK);
    assert_int_equal(oml_batchfile_read(path, &mb, &got, &got_len, NULL), OML_OK);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, enc, len);
    assert_string_equal(mb.name, m.name);
    assert_int_equal(oml_batch_model_decode(got, got_len, &back, NULL), OML_OK);
    assert_memory_equal(back->params, bm->params, lay.count * sizeof(float));

    oml_diag d = {0};
    snprintf(path, sizeof path, "%s/none.omlb", dir);
    assert_int_equal(oml_batchfile_read(path, &mb, &got, &got_len, &d), OML_EIO);
    snprintf(path, sizeof path, "%s/no/dir/x.omlb", dir);
    assert_int_equal(oml_batchfile_write(path, &m, enc, len, &d), OML_EIO);
    assert_non_null(strstr(d.msg, "cannot write"));
    free(enc);
    free(got);
    oml_batch_model_destroy(bm);
    oml_batch_model_destroy(back);
    assert_int_equal(oml_test_rmtree(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_file_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
