/* test_hedge.c - OAHU Eq. 20, the smooth floor and the renormalisation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "hedge.h"
#include "rng.h"

#define NEAR(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) < (tol))

/* beta = 0.99, min loss 0.5: beta^0.5 = 0.99499.
 *   loss 0.999: 0.99499 * ln 0.999 = -0.000995 > -0.01  -> exponential branch
 *   loss 0.5:   0.99499 * ln 0.5   = -0.6897   < -0.01  -> linear branch
 *   loss 0:     ln 0 = -inf, condition false            -> linear (alpha kept) */
static void test_branch_condition(void **state)
{
    (void)state;
    assert_int_equal(oml_hedge_branch(0.99f, 0.5f, 0.999f), OML_HEDGE_BRANCH_EXP);
    assert_int_equal(oml_hedge_branch(0.99f, 0.5f, 0.5f), OML_HEDGE_BRANCH_LINEAR);
    assert_int_equal(oml_hedge_branch(0.99f, 0.0f, 0.0f), OML_HEDGE_BRANCH_LINEAR);
    /* The boundary moves with min L: beta^minL * ln L > beta - 1. With
     * beta = 0.5 and min L = 1, 0.5 * ln 0.4 = -0.458 > -0.5 -> exponential. */
    assert_int_equal(oml_hedge_branch(0.5f, 1.0f, 0.4f), OML_HEDGE_BRANCH_EXP);
    assert_int_equal(oml_hedge_branch(0.5f, 0.0f, 0.4f), OML_HEDGE_BRANCH_LINEAR);
}

/* Both branches in one update, worked by hand (s = 0, no floor):
 *   a0 = 0.5 * 0.99^0.999 = 0.4950050,  a1 = 0.5 * (1 - 0.01*0.5) = 0.4975
 *   normalised: 0.4987431, 0.5012569 */
static void test_update_both_branches(void **state)
{
    (void)state;
    float alpha[2], loss[2] = {0.999f, 0.5f};
    oml_hedge_init(alpha, 2);
    oml_hedge_update(alpha, loss, 2, 0.99f, 0.0f);
    NEAR(alpha[0], 0.4987431, 1e-6);
    NEAR(alpha[1], 0.5012569, 1e-6);
}

/* Floor s/(L+1) = 0.1 then normalisation, by hand:
 *   alpha (0.9, 0.05, 0.05), loss (0, 1, 0.2), min L = 0
 *   head 0: linear, 0.9;  head 1: beta^0 ln 1 = 0 > -0.01, exp: 0.05*0.99 = 0.0495
 *   head 2: linear, 0.05 * 0.998 = 0.0499;  floor -> (0.9, 0.1, 0.1)
 *   normalised: (0.8181818, 0.0909091, 0.0909091) */
static void test_floor_and_normalisation(void **state)
{
    (void)state;
    float alpha[3] = {0.9f, 0.05f, 0.05f}, loss[3] = {0.0f, 1.0f, 0.2f};
    oml_hedge_update(alpha, loss, 3, 0.99f, 0.3f);
    NEAR(alpha[0], 0.8181818, 1e-6);
    NEAR(alpha[1], 0.0909091, 1e-6);
    NEAR(alpha[2], 0.0909091, 1e-6);
}

/* Over many random updates alpha stays a distribution above the floor
 * (the floor holds before normalisation; after it, alpha >= floor / (1 + n*floor)). */
static void test_invariants_random(void **state)
{
    (void)state;
    oml_rng r;
    oml_rng_seed(&r, 3);
    float alpha[6], loss[6];
    oml_hedge_init(alpha, 6);
    for (int t = 0; t < 20000; t++) {
        for (int i = 0; i < 6; i++)
            loss[i] = i == 2 ? 0.05f * oml_rng_uniform(&r) : oml_rng_uniform(&r);
        oml_hedge_update(alpha, loss, 6, 0.99f, 0.1f);
        float sum = 0;
        for (int i = 0; i < 6; i++) {
            assert_true(alpha[i] >= (0.1f / 6) / (1.0f + 0.1f) - 1e-6f);
            sum += alpha[i];
        }
        NEAR(sum, 1.0, 1e-5);
    }
    /* The consistently best head (index 2) must end up with the largest weight. */
    for (int i = 0; i < 6; i++)
        if (i != 2)
            assert_true(alpha[2] > alpha[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_branch_condition),
        cmocka_unit_test(test_update_both_branches),
        cmocka_unit_test(test_floor_and_normalisation),
        cmocka_unit_test(test_invariants_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
