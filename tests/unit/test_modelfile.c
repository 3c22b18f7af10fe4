/* test_modelfile.c - save/load round trips (format 2, with Adam's state
 * and the issue-11 counters), version 1 files still read, and refusal of
 * damaged files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

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
        assert_int_equal(oml_learner_prepare(l, x, NULL, 64), OML_OK);
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
    assert_int_equal(a->prepared, b->prepared);
    assert_int_equal(a->start_init, b->start_init);
    assert_memory_equal(a->start_error, b->start_error, sizeof a->start_error);
    assert_int_equal(a->ref_n, b->ref_n);
    assert_int_equal(a->ref_at, b->ref_at);
    if (a->ref_n > 0)
        assert_memory_equal(a->ref_x, b->ref_x,
                            oml__learner_ref_file_floats(&a->lay, a->ref_n) * sizeof(float));
    assert_int_equal(a->adam_t, b->adam_t);
    assert_int_equal(a->adam_m != NULL, b->adam_m != NULL);
    if (a->adam_m) {
        assert_memory_equal(a->adam_m, b->adam_m, a->lay.count * sizeof(float));
        assert_memory_equal(a->adam_v, b->adam_v, a->lay.count * sizeof(float));
    }
}

/* Save, load, and continue: the loaded learner must stay bit-identical to
 * the original over further steps (parameters, alpha, RNG, counters). */
static void test_round_trip_bit_exact(void **state)
{
    (void)state;
    const char *presets[] = {"paper", "default", "wide"};
    for (int p = 0; p < 3; p++) {
        oml_learner *a = trained(presets[p], 300);
        assert_int_equal(a->lay.has_basis, p >= 1); /* default, wide: emb 6 < D, a fixed input basis */
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

/* A default learner mid-way through mini-batch training (Adam moments,
 * step, rehearsal and skip counters, the recent window past its size):
 * saved and loaded, it goes on bit-identically under the same batches. */
/* A small default learner (batches of 8) started on 64 uniform rows x. */
static oml_learner *small_default(const oml_config *c, uint64_t seed, float *x)
{
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, seed);
    for (int i = 0; i < 64 * D; i++)
        x[i] = oml_rng_uniform(&r);
    assert_int_equal(oml_learner_prepare(l, x, NULL, 64), OML_OK);
    return l;
}

/* a and b take the same `steps` batches of random rows of x; then they
 * must still be the same learner. */
static void go_on_together(oml_learner *a, oml_learner *b, const float *x, oml_rng *r, int steps)
{
    assert_same_learner(a, b);
    const float *rows[3 * 8];
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < 3 * 8; i++)
            rows[i] = x + (size_t)oml_rng_below(r, 64) * D;
        oml_learner_train(a, rows, 8, 4, NULL);
        oml_learner_train(b, rows, 8, 4, NULL);
    }
    assert_same_learner(a, b);
}

static oml_config small_default_config(void)
{
    oml_config c;
    assert_int_equal(oml_config_preset(&c, "default", D), OML_OK);
    c.layers = 2;
    c.hidden = 16;
    c.emb = 6;
    c.batch = 8;
    return c;
}

static void test_round_trip_mid_training(void **state)
{
    (void)state;
    oml_config c = small_default_config();
    float x[64 * D];
    oml_learner *a = small_default(&c, 3, x);
    oml_rng r;
    oml_rng_seed(&r, 33);
    const float *rows[3 * 8];
    float big[D];
    for (int j = 0; j < D; j++)
        big[j] = 3.4e38f;
    int refused = 0;
    for (int step = 0; step < 300; step++) {
        for (int i = 0; i < 3 * 8; i++)
            rows[i] = x + (size_t)oml_rng_below(&r, 64) * D;
        if (step == 50)
            rows[4] = big; /* a refused step: stats.skipped */
        int n = step % 5 ? 8 : 5, n_new = step % 2 ? n : 3;
        refused += oml_learner_train(a, rows, n, n_new, NULL);
    }
    assert_int_equal(refused, 1);
    assert_true(a->stats.updates > OML_RECENT_WINDOW && a->stats.recent_n == OML_RECENT_WINDOW);
    assert_true(a->stats.rehearsed > 0 && a->stats.skipped == 1 && a->adam_t == 299);
    uint8_t *buf;
    size_t len;
    assert_int_equal(oml_model_encode(a, &buf, &len), OML_OK);
    oml_learner *b = NULL;
    oml_diag diag = {0};
    assert_int_equal(oml_model_decode(&b, buf, len, &diag), OML_OK);
    assert_same_learner(a, b);
    go_on_together(a, b, x, &r, 30);
    free(buf);
    oml_learner_destroy(a);
    oml_learner_destroy(b);
}

/* Byte offsets in a format-2 file (modelfile.c's field lists). */
#define V2_CONFIG_AT 76   /* after magic, version, reserved and the version-1 fields */
#define V3_CONFIG_AT 104  /* ... the version-2 ones: loss margin optim batch rehearse
                             replay equal_heads */
#define V3_CONFIG_BYTES 8 /* standardize offset */
#define V2_CONFIG_BYTES (28 + V3_CONFIG_BYTES) /* every field after version 1's */
#define V2_STATS_AT 204   /* after the version-1 counters (3 u64 + 17 loss averages) */
#define V2_STATS_BYTES (3 * 8 + 2 * 4 + (OML_RECENT_WINDOW + 7) / 8)
/* ... after the counters, hedge weights (17 f32), RNG (4 u64) and flags */
#define V4_START_AT (V2_STATS_AT + V2_STATS_BYTES + 17 * 4 + 4 * 8 + 2 * 4)
#define V4_START_BYTES 12 /* start_init, start_error[2] */
#define V5_BASIS_AT (V4_START_AT + V4_START_BYTES)
#define V5_BASIS_BYTES 4 /* basis */

/* The file of l as version `version` wrote it: without the `cut` bytes at
 * `at` of the newer fields, its own checksum; *len_out its length. */
static uint8_t *older_file(uint8_t *newer, size_t len, size_t at, size_t cut, uint32_t version,
                           size_t *len_out)
{
    uint8_t *old = malloc(len);
    memcpy(old, newer, at);
    memcpy(old + at, newer + at + cut, len - 4 - at - cut);
    size_t n = len - 4 - cut;
    memcpy(old + 8, &version, sizeof version);
    uint32_t crc = (uint32_t)crc32(0L, old, (uInt)n);
    memcpy(old + n, &crc, sizeof crc);
    free(newer);
    *len_out = n + 4;
    return old;
}

/* The version-4 file of l: its file without the basis field of version 5. */
static uint8_t *as_version4(const oml_learner *l, size_t *len4)
{
    uint8_t *v5;
    size_t len;
    assert_int_equal(oml_model_encode(l, &v5, &len), OML_OK);
    return older_file(v5, len, V5_BASIS_AT, V5_BASIS_BYTES, 4, len4);
}

/* The version-3 file of l: its file without the start fields of version 4,
 * version 3, its own checksum; *len3 its length. */
static uint8_t *as_version3(const oml_learner *l, size_t *len3)
{
    size_t len;
    uint8_t *v4 = as_version4(l, &len);
    return older_file(v4, len, V4_START_AT, V4_START_BYTES, 3, len3);
}

/* The version-1 file of l (no Adam, no offsets: its configuration is the
 * paper's in every field versions 2 and 3 added): l's file without those
 * fields, the version-2 counters and the Adam section, version 1, its own
 * checksum. */
static uint8_t *as_version1(const oml_learner *l, size_t *len1)
{
    assert_null(l->adam_m);
    size_t len;
    uint8_t *v2 = as_version3(l, &len);
    uint8_t *v1 = malloc(len);
    size_t n = 0, tail = len - 4 - 8; /* before the Adam step count and the CRC */
    memcpy(v1, v2, V2_CONFIG_AT);
    n = V2_CONFIG_AT;
    memcpy(v1 + n, v2 + V2_CONFIG_AT + V2_CONFIG_BYTES, V2_STATS_AT - V2_CONFIG_AT - V2_CONFIG_BYTES);
    n += V2_STATS_AT - V2_CONFIG_AT - V2_CONFIG_BYTES;
    memcpy(v1 + n, v2 + V2_STATS_AT + V2_STATS_BYTES, tail - V2_STATS_AT - V2_STATS_BYTES);
    n += tail - V2_STATS_AT - V2_STATS_BYTES;
    uint32_t version = 1;
    memcpy(v1 + 8, &version, sizeof version);
    uint32_t crc = (uint32_t)crc32(0L, v1, (uInt)n);
    memcpy(v1 + n, &crc, sizeof crc);
    *len1 = n + 4;
    free(v2);
    return v1;
}

/* Version 1 files (before issue 11) are still read: the paper preset, and
 * the default of that time (whitened start, centring, the local hedge's
 * reference), load as the same learner (the counters version 2 added
 * start at 0) and go on bit-identically. */
static void test_version1_still_read(void **state)
{
    (void)state;
    for (int p = 0; p < 2; p++) {
        oml_config c;
        assert_int_equal(oml_config_preset(&c, p == 0 ? "paper" : "default", D), OML_OK);
        c.layers = 3;
        c.hidden = 16;
        c.emb = 6;
        c.seed = 42;
        if (p == 1) { /* the default before issue 11 */
            c.init = OML_INIT_PCA_WHITE;
            c.center = 1;
            c.eta = 0.01f;
            c.eta_decay = 1e-4f;
            c.tau = 1.9f;
            c.prox = 0.0f;
            c.hedge_signal = OML_HEDGE_LOCAL;
            c.loss = OML_LOSS_ABTL;
            c.margin = 0.2f;
            c.optim = OML_OPTIM_SGD;
            c.batch = 1;
            c.rehearse = 0.0f;
            c.replay = 0;
            c.equal_heads = 0;
            c.offset = 0.0f;
            c.standardize = 0;
            c.basis = 0;
        }
        oml_learner *a = NULL;
        assert_int_equal(oml_learner_create(&a, &c, NULL), OML_OK);
        oml_rng r;
        oml_rng_seed(&r, 1);
        float x[64 * D];
        for (int i = 0; i < 64 * D; i++)
            x[i] = oml_rng_uniform(&r);
        if (oml_config_needs_data(&c))
            assert_int_equal(oml_learner_prepare(a, x, NULL, 64), OML_OK);
        for (int t = 0; t < 300; t++)
            oml_learner_step(a, x + (t % 64) * D, x + ((t * 7 + 1) % 64) * D,
                             x + ((t * 13 + 5) % 64) * D, NULL);
        assert_true(p == 0 || a->ref_n > 0);
        size_t len;
        uint8_t *v1 = as_version1(a, &len);
        oml_learner *b = NULL;
        oml_diag diag = {0};
        if (oml_model_decode(&b, v1, len, &diag) != OML_OK)
            fail_msg("version 1 file refused: %s", diag.msg);
        /* The counters of version 2 are not in the file. */
        memset(&a->stats.steps, 0, sizeof a->stats - offsetof(oml_learner_stats, steps));
        assert_same_learner(a, b);
        for (int t = 0; t < 50; t++) {
            oml_learner_step(a, x + t * D, x + (t + 3) * D, x + (t + 9) * D, NULL);
            oml_learner_step(b, x + t * D, x + (t + 3) * D, x + (t + 9) * D, NULL);
        }
        assert_same_learner(a, b);
        /* A version-1 file altered anywhere is refused like any other. */
        v1[len / 2] ^= 0x01;
        oml_learner_destroy(b);
        b = NULL;
        assert_int_equal(oml_model_decode(&b, v1, len, &diag), OML_EFORMAT);
        free(v1);
        oml_learner_destroy(a);
    }
}

/* Version 2 files (issue 11 before head offsets) are still read: the
 * default of that time (standardised start without offsets, Adam) loads as
 * the same learner and goes on bit-identically. The version-2 file is the
 * version-3 one without its offset field. */
static void test_version2_still_read(void **state)
{
    (void)state;
    oml_config c = small_default_config();
    c.init = OML_INIT_STD;
    c.offset = 0.0f;
    c.standardize = 0;
    c.margin = 0.2f;
    c.basis = 0;
    float x[64 * D];
    oml_learner *a = small_default(&c, 2, x);
    oml_rng r;
    oml_rng_seed(&r, 22);
    const float *rows[3 * 8];
    for (int t = 0; t < 3 * 8; t++)
        rows[t] = x + ((t * 11 + 3) % 64) * D;
    for (int s = 0; s < 5; s++)
        oml_learner_train(a, rows, 8, 8, NULL);
    size_t len;
    uint8_t *v3 = as_version3(a, &len);
    uint8_t *v2 = malloc(len);
    memcpy(v2, v3, V3_CONFIG_AT);
    memcpy(v2 + V3_CONFIG_AT, v3 + V3_CONFIG_AT + V3_CONFIG_BYTES,
           len - 4 - V3_CONFIG_AT - V3_CONFIG_BYTES);
    size_t n = len - 4 - V3_CONFIG_BYTES;
    uint32_t version = 2, crc = (uint32_t)crc32(0L, (memcpy(v2 + 8, &version, 4), v2), (uInt)n);
    memcpy(v2 + n, &crc, sizeof crc);
    oml_learner *b = NULL;
    oml_diag diag = {0};
    if (oml_model_decode(&b, v2, n + 4, &diag) != OML_OK)
        fail_msg("version 2 file refused: %s", diag.msg);
    go_on_together(a, b, x, &r, 5);
    free(v2);
    free(v3);
    oml_learner_destroy(b);
    oml_learner_destroy(a);
}

/* Version 4 files (before the input basis) are still read: the default of
 * that time loads as the same learner, without a basis, and goes on
 * bit-identically. */
static void test_version4_still_read(void **state)
{
    (void)state;
    oml_config c = small_default_config();
    c.basis = 0; /* the default before the input basis */
    float x[64 * D];
    oml_learner *a = small_default(&c, 2, x);
    assert_int_equal(a->cfg.basis, 0);
    oml_rng r;
    oml_rng_seed(&r, 24);
    size_t len;
    uint8_t *v4 = as_version4(a, &len);
    oml_learner *b = NULL;
    oml_diag diag = {0};
    if (oml_model_decode(&b, v4, len, &diag) != OML_OK)
        fail_msg("version 4 file refused: %s", diag.msg);
    assert_int_equal(b->cfg.basis, 0);
    go_on_together(a, b, x, &r, 5);
    free(v4);
    oml_learner_destroy(b);
    oml_learner_destroy(a);
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
    char want[32];
    snprintf(want, sizeof want, "version %u", OML_MODELFILE_VERSION);
    assert_non_null(strstr(diag.msg, want));
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
        cmocka_unit_test(test_round_trip_mid_training),
        cmocka_unit_test(test_version1_still_read),
        cmocka_unit_test(test_version2_still_read),
        cmocka_unit_test(test_version4_still_read),
        cmocka_unit_test(test_damaged_files_refused),
        cmocka_unit_test(test_other_version_refused),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
