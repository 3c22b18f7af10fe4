/* test_start.c - the auto start (learner_start.c): the leave-one-out kNN
 * error that judges it, worked by hand, and the choice it makes on data
 * built so that each candidate is the right one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learner.h"
#include "loo_knn.h"
#include "rng.h"

/* Six unit vectors on a circle at 0, 10, 20 degrees (label 0) and 180,
 * 190, 200 degrees (label 1), and one label-0 row at 185 degrees among
 * the label-1 ones. k=1: the row at 185 has nearest 180 or 190 (label 1):
 * wrong; 180 and 190 have nearest 185 (label 0): wrong, 200 has 190: right.
 * Rows 0-2 are right. 3 wrong of 7. k=3: row 185's 3 nearest are 180, 190,
 * 200 (label 1): wrong; 180's are 185, 190, 200: labels 0, 1, 1: right;
 * 190's likewise right; 200's are 190, 185, 180: right; rows 0-2 have each
 * other and one more: right. 1 wrong of 7. */
static void test_loo_error_by_hand(void **state)
{
    (void)state;
    const double deg[7] = {0, 10, 20, 180, 190, 200, 185};
    const int32_t lab[7] = {0, 0, 0, 1, 1, 1, 0};
    float E[7 * 2];
    for (int i = 0; i < 7; i++) {
        E[2 * i] = (float)cos(deg[i] * M_PI / 180);
        E[2 * i + 1] = (float)sin(deg[i] * M_PI / 180);
    }
    uint8_t wrong[7];
    const uint8_t want[7] = {0, 0, 0, 1, 1, 0, 1};
    assert_float_equal(oml_loo_knn_error(E, lab, 7, 2, 1, 100, wrong), 3.0f / 7, 1e-6);
    assert_memory_equal(wrong, want, sizeof want);
    assert_float_equal(oml_loo_knn_error(E, lab, 7, 2, 3, 100, NULL), 1.0f / 7, 1e-6);
    /* max_q 2 classifies rows 0 and 3 (every 7/2-th): k=1, 0 right, 3 wrong. */
    assert_float_equal(oml_loo_knn_error(E, lab, 7, 2, 1, 2, NULL), 0.5f, 1e-6);
    /* Too few rows for k, or no queries: no figure. */
    assert_true(isnan(oml_loo_knn_error(E, lab, 3, 2, 3, 100, NULL)));
    assert_true(isnan(oml_loo_knn_error(E, lab, 7, 2, 3, 0, NULL)));
}

#define D 16
#define N 400

/* Data where whitening is right: every feature is g + c v_j + noise, g a
 * common factor of sd 10 that carries nothing, c = +-0.5 the class along
 * the contrast v = (+1, -1, ...)/4, and noise of sd 0.05 per feature.
 * Standardising cannot remove g (every feature has the same sd), so the
 * Euclidean start's neighbours follow g; whitening lifts the class
 * direction to g's variance. */
static void common_factor(float *X, int32_t *y, oml_rng *r)
{
    for (int i = 0; i < N; i++) {
        float g = 10.0f * oml_rng_normal(r), c = (i % 2) ? 0.5f : -0.5f;
        y[i] = i % 2;
        for (int j = 0; j < D; j++)
            X[i * D + j] = g + c * ((j % 2) ? -0.25f : 0.25f) + 0.05f * oml_rng_normal(r);
    }
}

/* Data where standardising is right: the class is feature 0 (+-0.3, sd
 * 0.1 within a class); features 1..15 are independent noise of sd 10. The
 * whitened start keeps the top emb principal directions, all noise, and
 * drops feature 0; standardising brings it level with the noise. */
static void small_signal(float *X, int32_t *y, oml_rng *r)
{
    for (int i = 0; i < N; i++) {
        y[i] = i % 2;
        X[i * D] = (i % 2 ? 0.3f : -0.3f) + 0.1f * oml_rng_normal(r);
        for (int j = 1; j < D; j++)
            X[i * D + j] = 10.0f * oml_rng_normal(r);
    }
}

static oml_config small_default(int32_t init)
{
    oml_config c;
    assert_int_equal(oml_config_preset(&c, "default", D), OML_OK);
    c.layers = 2;
    c.hidden = 16;
    c.emb = 8;
    c.init = init;
    c.standardize = init != OML_INIT_PCA_WHITE; /* the PCA starts read the raw input */
    return c;
}

/* The auto start on X: the start it takes must be the named one, with
 * the same weights as that start taken directly (the standardised one in
 * the same layout; the whitened one's heads, which a layout without a
 * scale and offsets computes too), and the lower of the two errors. */
static void check_choice(const float *X, const int32_t *y, int32_t want)
{
    oml_config c = small_default(OML_INIT_AUTO);
    oml_learner *a = NULL, *b = NULL;
    assert_int_equal(oml_learner_create(&a, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_prepare(a, X, y, N), OML_OK);
    assert_int_equal(a->start_init, want);
    assert_true(isfinite(a->start_error[0]) && isfinite(a->start_error[1]));
    if (want == OML_INIT_PCA_WHITE)
        assert_true(a->start_error[1] + 0.2f < a->start_error[0]);
    else
        assert_true(a->start_error[0] + 0.2f < a->start_error[1]);
    /* The same weights as the start taken directly. */
    oml_config fixed = small_default(want);
    assert_int_equal(oml_learner_create(&b, &fixed, NULL), OML_OK);
    assert_int_equal(oml_learner_prepare(b, X, NULL, N), OML_OK);
    const oml_net_layout *la = &a->lay, *lb = &b->lay;
    for (int k = 0; k <= la->layers; k++) {
        assert_memory_equal(a->params + la->theta[k], b->params + lb->theta[k],
                            (size_t)la->emb * (size_t)oml_net_width(la, k) * sizeof(float));
        if (want == OML_INIT_STD)
            assert_memory_equal(a->params + la->bias[k], b->params + lb->bias[k],
                                (size_t)la->emb * sizeof(float));
        else
            for (int j = 0; j < la->emb; j++)
                assert_true(a->params[la->bias[k] + j] == 0.0f);
    }
    for (int j = 0; j < D; j++)
        assert_true(a->params[la->scale + j] ==
                    (want == OML_INIT_STD ? b->params[lb->scale + j] : 1.0f));
    /* The proximal pull's anchor is the start taken. */
    assert_memory_equal(a->start, a->params, la->count * sizeof(float));
    oml_learner_destroy(a);
    oml_learner_destroy(b);
}

/* check_choice on data made by gen from seed. */
static void choice_on(void (*gen)(float *, int32_t *, oml_rng *), uint64_t seed, int32_t want)
{
    float *X = malloc(sizeof(float) * N * D);
    int32_t y[N];
    oml_rng r;
    oml_rng_seed(&r, seed);
    gen(X, y, &r);
    check_choice(X, y, want);
    free(X);
}

static void test_auto_takes_whitened_where_it_is_better(void **state)
{
    (void)state;
    choice_on(common_factor, 5, OML_INIT_PCA_WHITE);
}

static void test_auto_takes_standardised_where_it_is_better(void **state)
{
    (void)state;
    choice_on(small_signal, 6, OML_INIT_STD);
}

/* Without labels, or with one class only, nothing can judge: the
 * standardised start, never worse than the features, unjudged. */
static void test_auto_without_labels_is_standardised(void **state)
{
    (void)state;
    float *X = malloc(sizeof(float) * N * D);
    int32_t y[N];
    oml_rng r;
    oml_rng_seed(&r, 5);
    common_factor(X, y, &r);
    for (int pass = 0; pass < 3; pass++) {
        if (pass == 1)
            for (int i = 0; i < N; i++)
                y[i] = 3; /* one class */
        if (pass == 2)
            for (int i = 0; i < N; i++)
                y[i] = i < 4 ? i % 2 : -1; /* two classes, too few rows for k */
        oml_config c = small_default(OML_INIT_AUTO);
        oml_learner *a = NULL;
        assert_int_equal(oml_learner_create(&a, &c, NULL), OML_OK);
        assert_int_equal(oml_learner_prepare(a, X, pass == 0 ? NULL : y, N), OML_OK);
        assert_int_equal(a->start_init, OML_INIT_STD);
        assert_true(isnan(a->start_error[0]) && isnan(a->start_error[1]));
        oml_learner_destroy(a);
    }
    free(X);
}

/* The choice is a pure function of the rows and labels: two learners
 * prepared alike are bit-identical (the log replays it). */
static void test_auto_is_deterministic(void **state)
{
    (void)state;
    float *X = malloc(sizeof(float) * N * D);
    int32_t y[N];
    oml_rng r;
    oml_rng_seed(&r, 9);
    common_factor(X, y, &r);
    oml_config c = small_default(OML_INIT_AUTO);
    oml_learner *a = NULL, *b = NULL;
    assert_int_equal(oml_learner_create(&a, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_create(&b, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_prepare(a, X, y, N), OML_OK);
    assert_int_equal(oml_learner_prepare(b, X, y, N), OML_OK);
    assert_memory_equal(a->params, b->params, a->lay.count * sizeof(float));
    assert_memory_equal(a->start_error, b->start_error, sizeof a->start_error);
    oml_learner_destroy(a);
    oml_learner_destroy(b);
    free(X);
}

/* A start read in place from scattered rows of a larger matrix (the
 * store's, at the sample's slots) is the start of a copy of those rows,
 * bit for bit, for every start and with the local hedge's reference;
 * past 40,000 rows too, where the PCA and the offsets take strided rows
 * of the sample. */
static void test_start_in_place_is_the_start_of_a_copy(void **state)
{
    (void)state;
    enum { BIG = 41000 };
    const int32_t sizes[2] = {N, BIG};
    const int32_t inits[3] = {OML_INIT_AUTO, OML_INIT_STD, OML_INIT_PCA_WHITE};
    float *X = malloc((size_t)BIG * D * sizeof *X), *M = malloc((size_t)3 * BIG * D * sizeof *M);
    int32_t *y = malloc((size_t)BIG * sizeof *y), *at = malloc((size_t)BIG * sizeof *at);
    assert_non_null(X);
    assert_non_null(M);
    assert_non_null(y);
    assert_non_null(at);
    oml_rng r;
    oml_rng_seed(&r, 3);
    for (size_t i = 0; i < (size_t)3 * BIG * D; i++)
        M[i] = 100.0f + oml_rng_normal(&r); /* rows no start may read */
    for (int32_t s = 0; s < 2; s++) {
        int32_t n = sizes[s];
        for (int32_t i = 0; i < n; i++) {
            y[i] = i % 3;
            at[i] = 3 * (n - 1 - i) + 1; /* reversed and spread */
            for (int j = 0; j < D; j++)
                X[(size_t)i * D + j] = (float)(y[i] == j % 3) + 0.7f * oml_rng_normal(&r);
            memcpy(M + (size_t)at[i] * D, X + (size_t)i * D, D * sizeof *X);
        }
        for (int k = 0; k < 3; k++) {
            oml_config c = small_default(inits[k]);
            c.hedge_signal = OML_HEDGE_LOCAL;
            c.standardize = inits[k] == OML_INIT_AUTO || inits[k] == OML_INIT_STD;
            oml_learner *a = NULL, *b = NULL;
            assert_int_equal(oml_learner_create(&a, &c, NULL), OML_OK);
            assert_int_equal(oml_learner_create(&b, &c, NULL), OML_OK);
            assert_int_equal(oml_learner_prepare(a, X, y, n), OML_OK);
            assert_int_equal(oml_learner_prepare_at(b, M, at, y, n), OML_OK);
            assert_int_equal(a->start_init, b->start_init);
            assert_memory_equal(a->params, b->params, a->lay.count * sizeof(float));
            assert_memory_equal(a->start_error, b->start_error, sizeof a->start_error);
            assert_true(a->ref_n > 0);
            assert_int_equal(a->ref_n, b->ref_n);
            assert_memory_equal(a->ref_x, b->ref_x, (size_t)a->ref_n * D * sizeof(float));
            oml_learner_destroy(a);
            oml_learner_destroy(b);
        }
    }
    free(X);
    free(M);
    free(y);
    free(at);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loo_error_by_hand),
        cmocka_unit_test(test_auto_takes_whitened_where_it_is_better),
        cmocka_unit_test(test_auto_takes_standardised_where_it_is_better),
        cmocka_unit_test(test_auto_without_labels_is_standardised),
        cmocka_unit_test(test_auto_is_deterministic),
        cmocka_unit_test(test_start_in_place_is_the_start_of_a_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
