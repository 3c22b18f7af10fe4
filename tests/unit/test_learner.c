/* test_learner.c - learner behaviour beyond the gradient: utilisation,
 * hedge bookkeeping, snapshots, the PCA start, determinism, validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "learner.h"
#include "snapshot.h"

#define D 30

static oml_config cfg(const char *preset)
{
    oml_config c;
    assert_int_equal(oml_config_preset(&c, preset, D), OML_OK);
    c.layers = 3;
    c.hidden = 24;
    c.emb = 8;
    return c;
}

/* The default preset before issue 11: whitened PCA start, one ABTL step
 * per triplet (SGD), the local hedge; the tests of those parts use it. */
static oml_config cfg_white(void)
{
    oml_config c = cfg("default");
    c.init = OML_INIT_PCA_WHITE;
    c.eta = 0.01f;
    c.eta_decay = 1e-4f;
    c.prox = 0.0f;
    c.hedge_signal = OML_HEDGE_LOCAL;
    c.loss = OML_LOSS_ABTL;
    c.optim = OML_OPTIM_SGD;
    c.batch = 1;
    c.rehearse = 0.0f;
    c.replay = 0;
    c.equal_heads = 0;
    return c;
}

static void fill(oml_rng *r, float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = oml_rng_uniform(r);
}

/* ABTL never switches off: every random triplet is used (U = 1, Sec. 3.3.3),
 * alpha stays a distribution, counters add up. */
static void test_utilisation_one_on_random_triplets(void **state)
{
    (void)state;
    for (int p = 0; p < 2; p++) {
        oml_config c = p == 0 ? cfg("paper") : cfg_white();
        oml_learner *l = NULL;
        assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
        oml_rng r;
        oml_rng_seed(&r, 9);
        float x[100 * D];
        fill(&r, x, 100 * D);
        if (oml_config_needs_data(&c))
            assert_int_equal(oml_learner_prepare(l, x, 100), OML_OK);
        for (int t = 0; t < 2000; t++) {
            oml_step_report rep;
            int a = (int)oml_rng_below(&r, 100), b = (int)oml_rng_below(&r, 100),
                n = (int)oml_rng_below(&r, 100);
            if (a == b || a == n)
                continue;
            oml_learner_step(l, x + a * D, x + b * D, x + n * D, &rep);
            assert_true(rep.utilised);
            for (int k = 0; k <= c.layers; k++)
                assert_true(rep.loss[k] > 0.0f && rep.loss[k] <= 1.0f);
            float sum = 0;
            for (int k = 0; k <= c.layers; k++) {
                assert_true(l->alpha[k] > 0.0f);
                sum += l->alpha[k];
            }
            assert_true(fabsf(sum - 1.0f) < 1e-5f);
        }
        assert_int_equal(l->stats.utilised, l->stats.updates);
        assert_true(l->stats.updates > 1900);
        assert_true(l->stats.satisfied <= l->stats.updates);
        oml_learner_destroy(l);
    }
}

/* A snapshot is a frozen copy: later steps do not change it, and it embeds
 * exactly like the learner's parameters at the time it was taken. */
static void test_snapshot_is_immutable_copy(void **state)
{
    (void)state;
    oml_config c = cfg("paper");
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 4);
    float x[10 * D];
    fill(&r, x, 10 * D);
    oml_snapshot *s = oml_learner_snapshot(l, 7);
    assert_non_null(s);
    assert_int_equal(s->version, 7);
    float *before = malloc(sizeof(float) * 4 * 10 * 8);
    float *after = malloc(sizeof(float) * 4 * 10 * 8);
    assert_int_equal(oml_snapshot_embed(s, x, 10, before), OML_OK);
    for (int t = 0; t < 50; t++)
        oml_learner_step(l, x, x + D, x + 2 * D, NULL);
    assert_int_equal(oml_snapshot_embed(s, x, 10, after), OML_OK);
    assert_memory_equal(before, after, sizeof(float) * 4 * 10 * 8);
    /* Every embedding row is on the unit sphere. */
    for (int i = 0; i < 4 * 10; i++) {
        float n2 = 0;
        for (int j = 0; j < 8; j++)
            n2 += before[i * 8 + j] * before[i * 8 + j];
        assert_true(fabsf(n2 - 1.0f) < 1e-5f);
    }
    oml_snapshot *s2 = oml_learner_snapshot(l, 8);
    assert_int_equal(s2->updates, 50);
    assert_true(memcmp(s->params, s2->params, l->lay.count * sizeof(float)) != 0);
    oml_snapshot_retain(s);
    oml_snapshot_release(s);
    oml_snapshot_release(s);
    oml_snapshot_release(s2);
    free(before);
    free(after);
    oml_learner_destroy(l);
}

/* Every head of s (cfg's 4 heads of 8) embeds the first 5 rows of x like head 0. */
static void assert_heads_agree(const oml_snapshot *s, const float *x)
{
    float out[4 * 5 * 8];
    assert_int_equal(oml_snapshot_embed(s, x, 5, out), OML_OK);
    for (int h = 1; h < 4; h++)
        for (int i = 0; i < 5 * 8; i++)
            assert_true(fabsf(out[h * 40 + i] - out[i]) < 1e-4f);
}

/* The PCA start makes every head the same linear projection: all heads
 * embed any input identically, and head 0 agrees with P (x - mu). */
static void test_pca_start_heads_agree(void **state)
{
    (void)state;
    oml_config c = cfg("default");
    c.init = OML_INIT_PCA;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 5);
    float x[200 * D];
    fill(&r, x, 200 * D);
    assert_int_equal(oml_learner_prepare(l, x, 200), OML_OK);
    oml_snapshot *s = oml_learner_snapshot(l, 1);
    assert_heads_agree(s, x);
    /* PCA rows are orthonormal. */
    const float *P = l->params + l->lay.theta[0];
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++) {
            float dot = 0;
            for (int j = 0; j < D; j++)
                dot += P[a * D + j] * P[b * D + j];
            assert_true(fabsf(dot - (a == b ? 1.0f : 0.0f)) < 1e-4f);
        }
    oml_snapshot_release(s);
    assert_int_equal(oml_learner_prepare(l, x, 1), OML_EEMPTY);
    oml_learner_destroy(l);
}

/* cov (8, 8) of head 0's raw projections z = T (x - mu) of the n rows of x. */
static void head0_cov(const oml_learner *l, const float *x, int n, double cov[8][8])
{
    const float *T = l->params + l->lay.theta[0], *mu = l->params + l->lay.mu;
    memset(cov, 0, 8 * sizeof cov[0]);
    for (int i = 0; i < n; i++) {
        double z[8];
        for (int a = 0; a < 8; a++) {
            z[a] = 0;
            for (int j = 0; j < D; j++)
                z[a] += (double)T[a * D + j] * (x[i * D + j] - mu[j]);
        }
        for (int a = 0; a < 8; a++)
            for (int b = 0; b < 8; b++)
                cov[a][b] += z[a] * z[b] / n;
    }
}

/* A learner of preset "default" with the given start, prepared on x. */
static oml_learner *prepared(int init, const float *x, int n)
{
    oml_config c = cfg("default");
    c.init = init;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_prepare(l, x, n), OML_OK);
    return l;
}

/* The whitened start (the default): every head still embeds like head 0,
 * head 0's raw projections of the stored items are uncorrelated, and
 * component a's variance v_a (plain PCA's, measured with the PCA start) is
 * raised to v_0 (1 - 4 noise / v_a), noise being the mean variance of the
 * D - 8 directions left out (total variance of x minus the 8 kept), and
 * never lowered. */
static void test_pca_white_start(void **state)
{
    (void)state;
    assert_int_equal(cfg("default").init, OML_INIT_STD); /* since issue 11; whitening is a choice */
    oml_rng r;
    oml_rng_seed(&r, 5);
    enum { N = 400 };
    static float x[N * D];
    for (int i = 0; i < N; i++) /* anisotropic: pixel j < 8 spreads like 1/(1+j), */
        for (int j = 0; j < D; j++) /* the others are small noise */
            x[i * D + j] = (oml_rng_uniform(&r) - 0.5f) * (j < 8 ? 1.0f / (1.0f + (float)j) : 0.02f);
    oml_learner *plain = prepared(OML_INIT_PCA, x, N), *white = prepared(OML_INIT_PCA_WHITE, x, N);
    oml_snapshot *s = oml_learner_snapshot(white, 1);
    assert_heads_agree(s, x);
    double v[8][8], w[8][8], total = 0;
    head0_cov(plain, x, N, v);
    head0_cov(white, x, N, w);
    for (int j = 0; j < D; j++) {
        double m = 0, q = 0;
        for (int i = 0; i < N; i++) {
            m += x[i * D + j] / (double)N;
            q += (double)x[i * D + j] * x[i * D + j] / N;
        }
        total += q - m * m;
    }
    double kept = 0;
    for (int a = 0; a < 8; a++)
        kept += v[a][a];
    double noise = (total - kept) / (D - 8);
    assert_true(noise > 0 && noise < v[7][7]);
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++) {
            double want = a != b ? 0.0 : fmax(v[0][0] * (1 - 4 * noise / v[a][a]), v[a][a]);
            assert_true(fabs(w[a][b] - want) < 1e-3 * w[0][0]);
        }
    assert_true(w[7][7] > 0.5 * w[0][0]); /* really whitened: v_7 is ~1/64 of v_0 */
    oml_snapshot_release(s);
    oml_learner_destroy(plain);
    oml_learner_destroy(white);
}

/* Items of low intrinsic dimension: three tight clusters span a plane, the
 * other 6 of the 8 components are noise. Whitening must not amplify them to
 * the clusters' scale (kNN would then read mostly noise): they keep plain
 * PCA's variance, while the plane's second direction is whitened. */
static void test_pca_white_ignores_noise(void **state)
{
    (void)state;
    oml_rng r;
    oml_rng_seed(&r, 9);
    enum { N = 300 };
    static float x[N * D], centre[3 * D];
    for (int i = 0; i < 3 * D; i++)
        centre[i] = oml_rng_normal(&r);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            x[i * D + j] = centre[(i % 3) * D + j] + 0.02f * (oml_rng_uniform(&r) - 0.5f);
    oml_learner *plain = prepared(OML_INIT_PCA, x, N), *white = prepared(OML_INIT_PCA_WHITE, x, N);
    double v[8][8], w[8][8];
    head0_cov(plain, x, N, v);
    head0_cov(white, x, N, w);
    assert_true(fabs(w[1][1] - w[0][0]) < 1e-3 * w[0][0]);
    for (int a = 2; a < 8; a++) {
        assert_true(v[a][a] < 1e-4 * v[0][0]); /* noise ... */
        assert_true(w[a][a] < 2.0 * v[a][a]);   /* ... left (nearly) as plain PCA has it */
    }
    oml_learner_destroy(plain);
    oml_learner_destroy(white);
}

/* Same seed, same stream: bit-identical learners. Different seed: not. */
static void test_deterministic(void **state)
{
    (void)state;
    oml_config c = cfg("paper");
    oml_learner *a = NULL, *b = NULL, *e = NULL;
    assert_int_equal(oml_learner_create(&a, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_create(&b, &c, NULL), OML_OK);
    c.seed = 2;
    assert_int_equal(oml_learner_create(&e, &c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 6);
    float x[3 * D];
    for (int t = 0; t < 100; t++) {
        fill(&r, x, 3 * D);
        oml_learner_step(a, x, x + D, x + 2 * D, NULL);
        oml_learner_step(b, x, x + D, x + 2 * D, NULL);
    }
    assert_memory_equal(a->params, b->params, a->lay.count * sizeof(float));
    assert_memory_equal(a->alpha, b->alpha, sizeof a->alpha);
    assert_true(memcmp(a->params, e->params, a->lay.count * sizeof(float)) != 0);
    oml_learner_destroy(a);
    oml_learner_destroy(b);
    oml_learner_destroy(e);
}

/* The `hard` hedge signal moves alpha only on triplets the ensemble got
 * wrong: a satisfied triplet leaves it as it was, a violated one changes it. */
static void test_hard_hedge_only_on_violations(void **state)
{
    (void)state;
    oml_config c = cfg("paper");
    c.hedge_signal = OML_HEDGE_HARD;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 8);
    float x[3 * D];
    int seen_sat = 0, seen_viol = 0;
    for (int t = 0; t < 400 && !(seen_sat && seen_viol); t++) {
        fill(&r, x, 3 * D);
        float before[OML_MAX_HEADS];
        memcpy(before, l->alpha, sizeof before);
        oml_step_report rep;
        oml_learner_step(l, x, x + D, x + 2 * D, &rep);
        int changed = memcmp(before, l->alpha, sizeof(float) * (size_t)(c.layers + 1)) != 0;
        if (rep.satisfied) {
            assert_false(changed);
            seen_sat = 1;
        } else {
            /* Heads that disagree get different factors; if every head
             * violated (or none), all scale alike and normalising undoes it. */
            int violated = 0;
            for (int k = 0; k <= c.layers; k++)
                violated += rep.d_pos[k] >= rep.d_neg[k];
            if (violated > 0 && violated <= c.layers) {
                assert_true(changed);
                seen_viol = 1;
            }
        }
    }
    assert_true(seen_sat && seen_viol);
    oml_learner_destroy(l);
}

/* The local hedge signal: while every head still equals the PCA start, each
 * keeps the anchor's start neighbourhood and alpha stays uniform; a head
 * whose read-out is scrambled loses its neighbourhoods and its weight. */
static void test_local_hedge_tracks_neighbourhoods(void **state)
{
    (void)state;
    oml_config c = cfg_white();
    c.eta = 1e-9f; /* steps that change nothing measurable */
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 12);
    float x[300 * D];
    fill(&r, x, 300 * D);
    assert_int_equal(oml_learner_prepare(l, x, 300), OML_OK);
    assert_int_equal(l->ref_n, 256);
    for (int t = 0; t < 40; t++)
        oml_learner_step(l, x + t * D, x + (t + 1) * D, x + (t + 2) * D, NULL);
    for (int k = 0; k <= c.layers; k++)
        assert_true(fabsf(l->alpha[k] - 1.0f / (float)(c.layers + 1)) < 2e-3f); /* rounding may swap a tie */

    /* Scramble head 2's read-out: its neighbourhoods are gone. */
    float *T = l->params + l->lay.theta[2];
    for (int i = 0; i < c.emb * c.hidden; i++)
        T[i] = oml_rng_normal(&r);
    /* Past the reference's re-embedding (every 1000 updates), then ~250 hedge
     * moves (every 4th update) that see the scrambled head. */
    for (int t = 0; t < 2000; t++) {
        int i = t % 297;
        oml_learner_step(l, x + i * D, x + (i + 1) * D, x + (i + 2) * D, NULL);
    }
    for (int k = 0; k <= c.layers; k++)
        if (k != 2)
            assert_true(l->alpha[2] < 0.8f * l->alpha[k]);
    oml_learner_destroy(l);
}

static void test_config_validation_names_field(void **state)
{
    (void)state;
    oml_config c = cfg("paper");
    oml_learner *l = NULL;
    oml_diag d = {0};
    c.tau = 2.0f;
    assert_int_equal(oml_learner_create(&l, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "tau");
    c = cfg("paper");
    c.beta = 1.0f;
    assert_int_equal(oml_learner_create(&l, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "beta");
    c = cfg("paper");
    c.layers = OML_MAX_LAYERS + 1;
    assert_int_equal(oml_learner_create(&l, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "layers");
    c = cfg("default");
    c.hidden = c.emb; /* PCA start needs 2*emb hidden units */
    assert_int_equal(oml_learner_create(&l, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "hidden");
    assert_null(l);
    assert_int_equal(oml_config_preset(&c, "nonsense", D), OML_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utilisation_one_on_random_triplets),
        cmocka_unit_test(test_snapshot_is_immutable_copy),
        cmocka_unit_test(test_pca_start_heads_agree),
        cmocka_unit_test(test_pca_white_start),
        cmocka_unit_test(test_pca_white_ignores_noise),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_hard_hedge_only_on_violations),
        cmocka_unit_test(test_local_hedge_tracks_neighbourhoods),
        cmocka_unit_test(test_config_validation_names_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
