/* test_anml.c - the log-exp mean (ANML Eq. 12, Lemmas 1-2) and the LANML
 * (Eq. 19) / DANML (Eq. 22) losses at the embedding level: hand-worked
 * values, numerically extreme inputs, and finite differences of the loss
 * against its analytic dL/dF, in double. (The same losses through the
 * network, every parameter group, are in test_batch.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "anml.h"
#include "rng.h"

static double amin(const double *a, int n)
{
    double m = a[0];
    for (int i = 1; i < n; i++)
        m = a[i] < m ? a[i] : m;
    return m;
}

static double amax(const double *a, int n)
{
    double m = a[0];
    for (int i = 1; i < n; i++)
        m = a[i] > m ? a[i] : m;
    return m;
}

static void test_logexp_hand_worked(void **state)
{
    (void)state;
    /* -log((e^0 + e^-1) / 2) = 0.37988549304172250 (worked with Python's math). */
    double a[] = {0, 1}, b3[] = {0, 1, 3}, c3[] = {0.5, 2, 4}, w[3];
    assert_true(fabs(oml_anml_logexp_mean(a, 2, 1.0, w) - 0.3798854930417225) < 1e-14);
    assert_true(fabs(w[0] + w[1] - 1.0) < 1e-15);
    assert_true(fabs(w[0] - 1.0 / (1.0 + exp(-1.0))) < 1e-15); /* softmax of -gamma a */
    assert_true(fabs(oml_anml_logexp_mean(b3, 3, -2.0, NULL) - 2.46098442513961) < 1e-12);
    assert_true(fabs(oml_anml_logexp_mean(c3, 3, 0.7, NULL) - 1.5522710482786097) < 1e-12);
}

/* Lemma 1: gamma -> 0 gives the mean; with Eq. 12 as written gamma -> +inf
 * gives the minimum and gamma -> -inf the maximum (see anml.h). */
static void test_logexp_limits(void **state)
{
    (void)state;
    double a[] = {0.3, 1.7, -2.5, 4.0, 0.9}, mean = (0.3 + 1.7 - 2.5 + 4.0 + 0.9) / 5, w[5];
    assert_true(fabs(oml_anml_logexp_mean(a, 5, 0.0, w) - mean) < 1e-15);
    for (int i = 0; i < 5; i++)
        assert_true(w[i] == 0.2);
    for (double g = 1e-3; g >= 1e-15; g *= 1e-3) {
        /* Near 0 the expansion keeps full precision: |b - mean| ~ g var / 2. */
        assert_true(fabs(oml_anml_logexp_mean(a, 5, g, NULL) - mean) < 10 * g + 1e-15);
        assert_true(fabs(oml_anml_logexp_mean(a, 5, -g, NULL) - mean) < 10 * g + 1e-15);
    }
    assert_true(fabs(oml_anml_logexp_mean(a, 5, 1e6, w) - (-2.5)) < 1e-5);
    assert_true(fabs(w[2] - 1.0) < 1e-12);
    assert_true(fabs(oml_anml_logexp_mean(a, 5, -1e6, w) - 4.0) < 1e-5);
    assert_true(fabs(w[3] - 1.0) < 1e-12);
    assert_true(oml_anml_logexp_mean(a, 5, 1e300, NULL) == -2.5);
    assert_true(oml_anml_logexp_mean(a, 5, -1e300, NULL) == 4.0);
}

/* Lemma 2: b is monotone (decreasing) in gamma, across the switch between
 * the two evaluation forms and out to |gamma| = 1e6. */
static void test_logexp_monotone(void **state)
{
    (void)state;
    double a[] = {0.3, 1.7, -2.5, 4.0, 0.9, 0.9};
    double prev = INFINITY;
    for (int s = -1; s <= 1; s += 2) {
        /* gamma from -1e6 up to 0 (s = -1), then from 0 up to 1e6 (s = +1). */
        for (int k = 0; k <= 240; k++) {
            int kk = s < 0 ? 240 - k : k;
            double g = s * pow(10.0, -12.0 + 18.0 * kk / 240.0);
            double b = oml_anml_logexp_mean(a, 6, g, NULL);
            assert_true(isfinite(b));
            assert_true(b <= prev + 1e-12);
            prev = b;
        }
    }
}

/* Values spanning 1e-30 .. 1e30 with |gamma| up to 1e6: finite, inside
 * [min, max], weights finite and summing to 1. */
static void test_logexp_extreme(void **state)
{
    (void)state;
    double a[] = {1e-30, 1e30, 3.0, 1e-10, 1e10, 1e20, -1e30, 7e29};
    double gs[] = {1e6, -1e6, 1.0, -1.0, 1e-6, -1e-6, 1e-30, -1e-30, 1e-300, 30.0, -2.0};
    double w[8];
    for (size_t t = 0; t < sizeof gs / sizeof *gs; t++)
        for (int n = 1; n <= 8; n++) {
            double b = oml_anml_logexp_mean(a, n, gs[t], w);
            assert_true(isfinite(b));
            assert_true(b >= amin(a, n) && b <= amax(a, n));
            double s = 0;
            for (int i = 0; i < n; i++) {
                assert_true(isfinite(w[i]) && w[i] >= 0);
                s += w[i];
            }
            assert_true(fabs(s - 1.0) < 1e-12);
        }
    double big[] = {1e30, 2e30};
    assert_true(oml_anml_logexp_mean(big, 2, 1e6, NULL) == 1e30);
    assert_true(oml_anml_logexp_mean(big, 2, -1e6, NULL) == 2e30);
    double tiny[] = {1e-30, 2e-30};
    double bt = oml_anml_logexp_mean(tiny, 2, 1e6, NULL);
    assert_true(fabs(bt - 1.5e-30) < 1e-40); /* gamma * spread tiny: still the mean */
}

static const int32_t Y4[4] = {0, 0, 1, 1};
static const double F4[4] = {0.0, 0.3, 1.0, 1.2}; /* 1-d embeddings */

static void test_loss_hand_worked(void **state)
{
    (void)state;
    double gF[4], work[64];
    oml_danml_hp dh;
    oml_danml_hp_default(&dh); /* gamma1 -2, gamma2 30, lambda 0.8 / 0.82, logistic scale 10 */
    dh.gamma1 = -2;
    dh.gamma2 = 30;
    dh.lambda1 = 0.8f;
    dh.lambda2 = 0.82f;
    dh.scale = 10;
    /* Worked in Python from Eq. 22 directly: 0.014960298465238902. */
    double L = oml_danml_loss(&dh, F4, Y4, 4, 1, gF, NULL, work);
    assert_true(fabs(L - 0.014960298465238902) < 1e-6); /* lambdas are float */
    oml_lanml_hp lh = {-1.0f, 1.0f, 1.0f, 0.01f};
    /* Eq. 19 with squared distances, hinge margin 1, Omega of Sec. 7.1.1: 0.19562797352626496. */
    L = oml_lanml_loss(&lh, F4, Y4, 4, 1, gF, NULL, work);
    assert_true(fabs(L - 0.19562797352626496) < 1e-7);
}

typedef double (*loss_fn)(const void *, const double *, const int32_t *, int32_t, int32_t,
                          double *, oml_rng *, double *);

static void check_embedding_grad(loss_fn f, const void *hp, int32_t n, int32_t e, int nclass,
                                 int normalize, uint64_t seed)
{
    oml_rng rng;
    oml_rng_seed(&rng, seed);
    double *F = malloc(sizeof(double) * (size_t)n * e), *g = malloc(sizeof(double) * (size_t)n * e);
    double *g2 = malloc(sizeof(double) * (size_t)n * e);
    double *work = malloc(sizeof(double) * oml_batch_loss_work(n));
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++) {
        y[i] = i % nclass;
        double s = 0;
        for (int32_t k = 0; k < e; k++) {
            F[i * e + k] = oml_rng_normal(&rng);
            s += F[i * e + k] * F[i * e + k];
        }
        for (int32_t k = 0; normalize && k < e; k++)
            F[i * e + k] /= sqrt(s);
    }
    f(hp, F, y, n, e, g, NULL, work);
    int checked = 0;
    for (int32_t k = 0; k < n * e; k++) {
        double h = 1e-6, v = F[k];
        F[k] = v + h;
        double lp = f(hp, F, y, n, e, g2, NULL, work);
        F[k] = v - h;
        double lm = f(hp, F, y, n, e, g2, NULL, work);
        F[k] = v;
        double fd = (lp - lm) / (2 * h);
        double tol = 1e-6 + 1e-5 * fabs(fd);
        if (fabs(fd - g[k]) > tol)
            fail_msg("coordinate %d: analytic %.10g finite-difference %.10g", k, g[k], fd);
        checked++;
    }
    assert_int_equal(checked, n * e);
    free(F);
    free(g);
    free(g2);
    free(work);
    free(y);
}

static void test_danml_grad(void **state)
{
    (void)state;
    oml_danml_hp h;
    oml_danml_hp_default(&h);
    check_embedding_grad(oml_danml_loss, &h, 12, 5, 3, 1, 1);
    h.gamma1 = -1;
    h.gamma2 = 25;
    h.scale = 1;
    check_embedding_grad(oml_danml_loss, &h, 9, 4, 2, 1, 2);
    h.loss = OML_DANML_HINGE;
    h.margin = 0.5f;
    check_embedding_grad(oml_danml_loss, &h, 10, 3, 3, 1, 3);
}

static void test_lanml_grad(void **state)
{
    (void)state;
    oml_lanml_hp h;
    oml_lanml_hp_default(&h);
    h.margin = 4.0f; /* keep most hinges active so the check exercises them */
    h.lambda = 0.1f;
    check_embedding_grad(oml_lanml_loss, &h, 12, 5, 3, 0, 4);
    h.gamma1 = 0.5f; /* LANML+ also differentiates */
    h.gamma2 = 2.0f;
    check_embedding_grad(oml_lanml_loss, &h, 8, 3, 2, 0, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logexp_hand_worked),
        cmocka_unit_test(test_logexp_limits),
        cmocka_unit_test(test_logexp_monotone),
        cmocka_unit_test(test_logexp_extreme),
        cmocka_unit_test(test_loss_hand_worked),
        cmocka_unit_test(test_danml_grad),
        cmocka_unit_test(test_lanml_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
