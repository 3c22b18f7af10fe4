/* test_promote.c - a batch model in the live layout: which configurations
 * fit, the served snapshot answers as the batch model does, and a promote
 * moves exactly the batch model's blocks into the learner (weights and
 * start weights), resets alpha and re-embeds the hedge's reference; into a
 * live model with an input basis the first layer is folded onto it. */
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
    c.basis = 0; /* the batch net's blocks land as they are (the basis tests set 1) */
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
    /* a live model that reads a fixed basis takes them too (folded) */
    c.basis = 1;
    assert_int_equal(oml_batch_layout_init(&lay, D, 2, 16, 4, 1, NULL), OML_OK);
    assert_int_equal(oml_promote_compatible(&c, &lay, err, sizeof err), 0);
}

/* Head `depth` of s embeds g_x as bm does, to within tol. */
static void assert_head_is_batch_model(const oml_snapshot *s, int32_t depth,
                                       const oml_batch_model *bm, float tol)
{
    float *all = malloc((size_t)oml_snapshot_heads(s) * N * 4 * sizeof(float));
    float want[N * 4];
    assert_int_equal(oml_snapshot_embed(s, g_x, N, all), OML_OK);
    assert_int_equal(oml_batch_model_embed(bm, g_x, N, want), OML_OK);
    const float *got = all + (size_t)depth * N * 4;
    for (int i = 0; i < N * 4; i++)
        assert_true(fabsf(got[i] - want[i]) < tol);
    free(all);
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
        assert_head_is_batch_model(s, depth, bm, 1e-5f);
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
    assert_int_equal(oml_promote(l, bm), OML_OK);

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

/* E = B diag(s) (emb, D): what the basis live model's first layer reads x - mu through. */
static void basis_map(const oml_learner *l, float *E)
{
    const oml_net_layout *lay = &l->lay;
    for (int32_t r = 0; r < lay->in; r++)
        for (int32_t j = 0; j < D; j++)
            E[r * D + j] = l->params[lay->basis + (size_t)r * D + j] * l->params[lay->scale + j];
}

static oml_learner *basis_learner(int prepare)
{
    oml_config c = live_cfg();
    c.basis = 1;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    assert_true(l->lay.has_basis && l->lay.has_scale && l->lay.in == 4);
    if (prepare)
        assert_int_equal(oml_learner_prepare(l, g_x, NULL, N), OML_OK);
    return l;
}

/* A batch net whose first layer reads only the basis's span, F = A E, is
 * promoted exactly: the live first layer W has W E = F (the start may
 * leave rows of E at zero: then W is A up to those columns), and the live head at
 * the batch depth embeds as the batch model does, worked out through the
 * scale and basis the live model keeps. */
static void test_promote_into_a_basis_is_exact_on_its_span(void **state)
{
    (void)state;
    for (int32_t depth = 0; depth <= 2; depth += 2) {
        oml_learner *l = basis_learner(1);
        float E[4 * D], A[16 * 4];
        basis_map(l, E);
        oml_batch_model *bm = batch_model(depth, 16, 4);
        int32_t rows = depth ? 16 : 4;
        size_t first = depth ? bm->lay.w[1] : bm->lay.theta;
        oml_rng r;
        oml_rng_seed(&r, 17);
        for (int i = 0; i < rows * 4; i++)
            A[i] = oml_rng_uniform(&r) - 0.5f;
        for (int32_t i = 0; i < rows; i++)
            for (int32_t j = 0; j < D; j++) {
                float v = 0;
                for (int k = 0; k < 4; k++)
                    v += A[i * 4 + k] * E[k * D + j];
                bm->params[first + (size_t)i * D + j] = v;
            }
        float F[16 * D];
        memcpy(F, bm->params + first, (size_t)rows * D * sizeof(float));
        assert_int_equal(oml_promote(l, bm), OML_OK);
        const float *W = l->params + (depth ? l->lay.w[1] : l->lay.theta[0]);
        for (int32_t i = 0; i < rows; i++) /* W E = F (A itself where E has full rank) */
            for (int32_t j = 0; j < D; j++) {
                float we = 0;
                for (int k = 0; k < 4; k++)
                    we += W[i * 4 + k] * E[k * D + j];
                assert_true(fabsf(we - F[i * D + j]) < 1e-4f * (1.0f + fabsf(F[i * D + j])));
            }
        assert_memory_equal(l->start + (depth ? l->lay.w[1] : l->lay.theta[0]), W,
                            (size_t)rows * 4 * sizeof(float));

        oml_snapshot *s = oml_learner_snapshot(l, 1);
        assert_head_is_batch_model(s, depth, bm, 1e-4f);
        oml_snapshot_release(s);
        oml_batch_model_destroy(bm);
        oml_learner_destroy(l);
    }
}

/* Any batch first layer F lands as its least-squares fit W on the basis:
 * the residual W E - F is orthogonal to every row of E. */
static void test_promote_into_a_basis_fits_least_squares(void **state)
{
    (void)state;
    oml_learner *l = basis_learner(1);
    float E[4 * D];
    basis_map(l, E);
    oml_batch_model *bm = batch_model(2, 16, 4);
    const float *F = bm->params + bm->lay.w[1];
    assert_int_equal(oml_promote(l, bm), OML_OK);
    const float *W = l->params + l->lay.w[1];
    double worst = 0, scale = 0;
    for (int i = 0; i < 16; i++)
        for (int r = 0; r < 4; r++) {
            double res = 0, fe = 0; /* (W E - F) E^T and F E^T at (i, r) */
            for (int j = 0; j < D; j++) {
                double we = 0;
                for (int k = 0; k < 4; k++)
                    we += (double)W[i * 4 + k] * E[k * D + j];
                res += (we - F[i * D + j]) * E[r * D + j];
                fe += (double)F[i * D + j] * E[r * D + j];
            }
            worst = fmax(worst, fabs(res));
            scale = fmax(scale, fabs(fe));
        }
    assert_true(scale > 0);
    assert_true(worst < 1e-4 * scale);
    /* the input scale stays: the fold read through it */
    assert_true(l->params[l->lay.scale + 3] != 1.0f);
    oml_batch_model_destroy(bm);
    oml_learner_destroy(l);
}

/* Before any start the basis is zero: the promote is refused and the
 * learner keeps every weight. */
static void test_promote_into_a_zero_basis_is_refused(void **state)
{
    (void)state;
    oml_learner *l = basis_learner(0);
    size_t count = l->lay.count;
    float *before = malloc(count * sizeof(float));
    memcpy(before, l->params, count * sizeof(float));
    oml_batch_model *bm = batch_model(2, 16, 4);
    assert_int_equal(oml_promote(l, bm), OML_EINVAL);
    assert_memory_equal(l->params, before, count * sizeof(float));
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
        cmocka_unit_test(test_promote_into_a_basis_is_exact_on_its_span),
        cmocka_unit_test(test_promote_into_a_basis_fits_least_squares),
        cmocka_unit_test(test_promote_into_a_zero_basis_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
