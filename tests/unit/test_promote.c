/* test_promote.c - a batch model in the live layout: which configurations
 * fit, the served snapshot answers as the batch model does, and a promote
 * moves exactly the batch model's blocks into the learner (weights and
 * start weights), resets alpha and re-embeds the hedge's reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "promote.h"

#define D 12
#define N 30

static float g_x[N * D];

static int setup(void **state)
{
    (void)state;
    oml_rng r;
    oml_rng_seed(&r, 9);
    for (int i = 0; i < N * D; i++)
        g_x[i] = oml_rng_uniform(&r) * 2.0f - 1.0f;
    return 0;
}

static oml_config live_cfg(void)
{
    oml_config c;
    assert_int_equal(oml_config_preset(&c, "default", D), OML_OK);
    c.layers = 3;
    c.hidden = 16;
    c.emb = 4;
    return c;
}

static oml_batch_model *batch_model(int32_t depth, int32_t hidden, int32_t emb)
{
    oml_batch_layout lay;
    oml_batch_model *bm = NULL;
    assert_int_equal(oml_batch_layout_init(&lay, D, depth, hidden, emb, 1, NULL), OML_OK);
    assert_int_equal(oml_batch_model_create(&bm, &lay, 4, NULL), OML_OK);
    for (int32_t i = 0; i < D; i++)
        bm->params[lay.mu + (size_t)i] = 0.01f * (float)i; /* a non-zero mu */
    return bm;
}

static void test_compatible(void **state)
{
    (void)state;
    oml_config c = live_cfg();
    char err[300];
    oml_batch_layout lay;
    assert_int_equal(oml_batch_layout_init(&lay, D, 2, 16, 4, 1, NULL), OML_OK);
    assert_int_equal(oml_promote_compatible(&c, &lay, err, sizeof err), 0);
    assert_int_equal(oml_batch_layout_init(&lay, D, 0, 99, 4, 1, NULL), OML_OK);
    assert_int_equal(oml_promote_compatible(&c, &lay, err, sizeof err), 0); /* no trunk */
    assert_int_equal(oml_batch_layout_init(&lay, D, 4, 16, 4, 1, NULL), OML_OK);
    assert_int_equal(oml_promote_compatible(&c, &lay, err, sizeof err), -1); /* deeper than L */
    assert_non_null(strstr(err, "depth <= L"));
    assert_int_equal(oml_batch_layout_init(&lay, D, 1, 8, 4, 1, NULL), OML_OK);
    assert_int_equal(oml_promote_compatible(&c, &lay, err, sizeof err), -1);
    assert_int_equal(oml_batch_layout_init(&lay, D, 1, 16, 5, 1, NULL), OML_OK);
    assert_int_equal(oml_promote_compatible(&c, &lay, err, sizeof err), -1);
    /* A live model that reads a fixed basis cannot take a batch net's first
     * layer, which reads the raw input (emb 4 < D). */
    c.basis = 1;
    assert_int_equal(oml_batch_layout_init(&lay, D, 2, 16, 4, 1, NULL), OML_OK);
    assert_int_equal(oml_promote_compatible(&c, &lay, err, sizeof err), -1);
    assert_non_null(strstr(err, "basis 0"));
}

/* Head `depth` of the served snapshot is the batch model; alpha is one-hot. */
static void test_snapshot_answers_as_the_batch_model(void **state)
{
    (void)state;
    oml_config c = live_cfg();
    for (int32_t depth = 0; depth <= 2; depth++) {
        oml_batch_model *bm = batch_model(depth, 16, 4);
        oml_snapshot *s = oml_promote_snapshot(&c, bm, 5);
        assert_non_null(s);
        assert_int_equal(s->cfg.layers, depth);
        assert_true(s->version == 5);
        for (int k = 0; k <= depth; k++)
            assert_true(s->alpha[k] == (k == depth ? 1.0f : 0.0f));
        float *all = malloc((size_t)(depth + 1) * N * 4 * sizeof(float));
        float want[N * 4];
        assert_int_equal(oml_snapshot_embed(s, g_x, N, all), OML_OK);
        assert_int_equal(oml_batch_model_embed(bm, g_x, N, want), OML_OK);
        const float *got = all + (size_t)depth * N * 4;
        for (int i = 0; i < N * 4; i++)
            assert_true(fabsf(got[i] - want[i]) < 1e-5f);
        free(all);
        oml_snapshot_release(s);
        oml_batch_model_destroy(bm);
    }
}

static void test_promote_moves_the_blocks(void **state)
{
    (void)state;
    oml_config c = live_cfg();
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_prepare(l, g_x, NULL, N), OML_OK);
    for (int t = 0; t < 20; t++)
        oml_learner_step(l, g_x + (t % N) * D, g_x + ((t + 1) % N) * D,
                         g_x + ((t + 5) % N) * D, NULL);
    const size_t count = l->lay.count;
    float *before = malloc(count * sizeof(float));
    memcpy(before, l->params, count * sizeof(float));
    oml_learner_stats st = l->stats;
    oml_rng rng = l->rng;

    oml_batch_model *bm = batch_model(2, 16, 4);
    const oml_batch_layout *bl = &bm->lay;
    oml_promote(l, bm);

    /* the batch model's blocks, in the weights and in the start weights */
    assert_memory_equal(l->params + l->lay.mu, bm->params + bl->mu, D * sizeof(float));
    for (int k = 1; k <= 2; k++)
        assert_memory_equal(l->params + l->lay.w[k], bm->params + bl->w[k],
                            (size_t)16 * (size_t)oml_batch_width(bl, k - 1) * sizeof(float));
    size_t th = (size_t)4 * 16;
    assert_memory_equal(l->params + l->lay.theta[2], bm->params + bl->theta, th * sizeof(float));
    assert_non_null(l->start); /* the default preset pulls toward its start */
    assert_memory_equal(l->start + l->lay.theta[2], bm->params + bl->theta, th * sizeof(float));
    assert_memory_equal(l->start + l->lay.w[1], bm->params + bl->w[1], 16 * D * sizeof(float));
    /* every other block as it was */
    for (int k = 0; k <= 3; k++)
        if (k != 2)
            assert_memory_equal(l->params + l->lay.theta[k], before + l->lay.theta[k],
                                4 * (size_t)(k == 0 ? D : 16) * sizeof(float));
    assert_memory_equal(l->params + l->lay.w[3], before + l->lay.w[3], 16 * 16 * sizeof(float));
    /* alpha uniform, counters and RNG untouched */
    for (int k = 0; k < 4; k++)
        assert_true(l->alpha[k] == 0.25f);
    assert_memory_equal(&l->stats, &st, sizeof st);
    assert_memory_equal(&l->rng, &rng, sizeof rng);
    /* the hedge's reference re-embedded under the new weights */
    if (l->ref_n > 0) {
        float *emb = malloc((size_t)4 * (size_t)l->ref_n * 4 * sizeof(float));
        oml_snapshot *s = oml_learner_snapshot(l, 1);
        assert_int_equal(oml_snapshot_embed(s, l->ref_x, l->ref_n, emb), OML_OK);
        for (size_t i = 0; i < (size_t)4 * (size_t)l->ref_n * 4; i++)
            assert_true(fabsf(emb[i] - l->ref_emb[i]) < 1e-5f);
        assert_true(l->ref_at == l->stats.updates);
        oml_snapshot_release(s);
        free(emb);
    }
    free(before);
    oml_batch_model_destroy(bm);
    oml_learner_destroy(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compatible),
        cmocka_unit_test(test_snapshot_answers_as_the_batch_model),
        cmocka_unit_test(test_promote_moves_the_blocks),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
