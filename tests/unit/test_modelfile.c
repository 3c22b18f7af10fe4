/* test_modelfile.c - save/load round trips and refusal of damaged files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "learner.h"
#include "modelfile.h"
#include "testutil.h"

#define D 20

static oml_learner *trained(const char *preset, int steps)
{
    oml_config c;
    assert_int_equal(oml_config_preset(&c, preset, D), OML_OK);
    c.layers = 3;
    c.hidden = 16;
    c.emb = 6;
    c.seed = 42;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 1);
    float x[64 * D];
    for (int i = 0; i < 64 * D; i++)
        x[i] = oml_rng_uniform(&r);
    if (oml_config_needs_data(&c))
        assert_int_equal(oml_learner_prepare(l, x, 64), OML_OK);
    for (int t = 0; t < steps; t++)
        oml_learner_step(l, x + (t % 64) * D, x + ((t * 7 + 1) % 64) * D, x + ((t * 13 + 5) % 64) * D, NULL);
    return l;
}

static void assert_same_learner(const oml_learner *a, const oml_learner *b)
{
    assert_true(oml_config_equal(&a->cfg, &b->cfg));
    assert_int_equal(a->lay.count, b->lay.count);
    assert_memory_equal(a->params, b->params, a->lay.count * sizeof(float));
    assert_memory_equal(a->alpha, b->alpha, sizeof a->alpha);
    assert_memory_equal(&a->rng, &b->rng, sizeof a->rng);
    assert_memory_equal(&a->stats, &b->stats, sizeof a->stats);
    assert_int_equal(a->start != NULL, b->start != NULL);
    if (a->start)
        assert_memory_equal(a->start, b->start, a->lay.count * sizeof(float));
}

/* Save, load, and continue: the loaded learner must stay bit-identical to
 * the original over further steps (parameters, alpha, RNG, counters). */
static void test_round_trip_bit_exact(void **state)
{
    (void)state;
    const char *presets[] = {"paper", "default"};
    for (int p = 0; p < 2; p++) {
        oml_learner *a = trained(presets[p], 300);
        char path[256];
        assert_int_equal(oml_test_tmpfile(path, sizeof path), 0);
        oml_diag diag = {0};
        assert_int_equal(oml_model_save(a, path, &diag), OML_OK);
        oml_learner *b = NULL;
        assert_int_equal(oml_model_load(&b, path, &diag), OML_OK);
        assert_same_learner(a, b);
        float x[3 * D];
        for (int i = 0; i < 3 * D; i++)
            x[i] = (float)((i * 37) % 11) / 11.0f;
        for (int t = 0; t < 50; t++) {
            oml_learner_step(a, x, x + D, x + 2 * D, NULL);
            oml_learner_step(b, x, x + D, x + 2 * D, NULL);
        }
        assert_same_learner(a, b);
        unlink(path);
        oml_learner_destroy(a);
        oml_learner_destroy(b);
    }
}

/* Every truncation and every single-byte alteration is refused. */
static void test_damaged_files_refused(void **state)
{
    (void)state;
    oml_learner *a = trained("default", 20);
    uint8_t *buf;
    size_t len;
    assert_int_equal(oml_model_encode(a, &buf, &len), OML_OK);
    oml_learner *b = NULL;
    oml_diag diag;
    for (size_t n = 0; n < len; n += (n < 64 ? 1 : 97)) {
        b = NULL;
        int rc = oml_model_decode(&b, buf, n, &diag);
        assert_true(rc == OML_EFORMAT);
        assert_null(b);
    }
    for (size_t i = 0; i < len; i += (i < 128 ? 1 : 61)) {
        buf[i] ^= 0x10;
        b = NULL;
        int rc = oml_model_decode(&b, buf, len, &diag);
        /* Bytes 8..11 are the version: altering it reports the version. */
        assert_int_equal(rc, i >= 8 && i < 12 ? OML_EVERSION : OML_EFORMAT);
        assert_null(b);
        buf[i] ^= 0x10;
    }
    assert_int_equal(oml_model_decode(&b, buf, len, &diag), OML_OK);
    oml_learner_destroy(b);
    free(buf);
    oml_learner_destroy(a);
}

/* A file from a future format version names both versions in its error. */
static void test_other_version_refused(void **state)
{
    (void)state;
    oml_learner *a = trained("paper", 5);
    uint8_t *buf;
    size_t len;
    assert_int_equal(oml_model_encode(a, &buf, &len), OML_OK);
    uint32_t v = OML_MODELFILE_VERSION + 1;
    memcpy(buf + 8, &v, sizeof v);
    oml_learner *b = NULL;
    oml_diag diag = {0};
    assert_int_equal(oml_model_decode(&b, buf, len, &diag), OML_EVERSION);
    assert_non_null(strstr(diag.msg, "version 2"));
    free(buf);
    oml_learner_destroy(a);
}

static void test_missing_file(void **state)
{
    (void)state;
    oml_learner *b = NULL;
    oml_diag diag = {0};
    assert_int_equal(oml_model_load(&b, "/nonexistent/dir/model.oml", &diag), OML_EIO);
    assert_non_null(strstr(diag.msg, "/nonexistent/dir/model.oml"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_bit_exact),
        cmocka_unit_test(test_damaged_files_refused),
        cmocka_unit_test(test_other_version_refused),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
