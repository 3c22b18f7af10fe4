/* test_abtl.c - the adaptive-bound triplet loss (OAHU Eq. 9-13). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "abtl.h"

#define NEAR(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) < (tol))

/* Eq. 10: d_sim(0) = 0, d_sim(2) = tau; d_dis(0) = 2 - tau, d_dis(2) = 2. */
static void test_boundary_conditions(void **state)
{
    (void)state;
    const float taus[] = {0.01f, 0.1f, 0.5f, 0.66f, 1.0f, 1.9f};
    for (unsigned i = 0; i < sizeof taus / sizeof *taus; i++) {
        float t = taus[i];
        NEAR(oml_abtl_dsim(t, 0.0f), 0.0, 1e-7);
        NEAR(oml_abtl_dsim(t, 2.0f), t, 1e-6);
        NEAR(oml_abtl_ddis(t, 0.0f), 2.0f - t, 1e-6);
        NEAR(oml_abtl_ddis(t, 2.0f), 2.0, 1e-6);
    }
}

/* Sec. 3.3.3: d_sim <= D_orig <= d_dis on [0, 2], and both are monotone. */
static void test_thresholds_bracket_distance(void **state)
{
    (void)state;
    const float taus[] = {0.05f, 0.1f, 0.3f, 0.6f, 1.5f, 1.9f};
    for (unsigned i = 0; i < sizeof taus / sizeof *taus; i++) {
        float prev_s = -1, prev_d = -1;
        for (int k = 0; k <= 2000; k++) {
            float D = 2.0f * (float)k / 2000.0f;
            float s = oml_abtl_dsim(taus[i], D), d = oml_abtl_ddis(taus[i], D);
            assert_true(s <= D + 1e-6f);
            assert_true(d >= D - 1e-6f);
            assert_true(s >= prev_s && d >= prev_d);
            prev_s = s;
            prev_d = d;
        }
    }
}

/* Worked by hand for tau = 0.1, D+ = D- = 1:
 *   c1 = 0.1 (e - 1)/(e^2 - 1)              = 0.0268941
 *   c2 = 0.1 (1 - e^-1)/(1 - e^-2) + 1.9    = 1.9731059
 *   L_attr = (1 - c1)/(2 - c1)              = 0.4931848
 *   L_rep  = 1 - 1/c2                       = 0.4931848
 *   dL/dD+ = 0.5/(2 - c1) = 0.2534079, dL/dD- = -0.5/c2 = -0.2534079 */
static void test_hand_worked_value(void **state)
{
    (void)state;
    oml_abtl ab;
    oml_abtl_eval(0.1f, 1.0f, 1.0f, &ab);
    NEAR(ab.c1, 0.0268941, 1e-6);
    NEAR(ab.c2, 1.9731059, 1e-6);
    NEAR(ab.l_attr, 0.4931848, 1e-6);
    NEAR(ab.l_rep, 0.4931848, 1e-6);
    NEAR(ab.loss, 0.4931848, 1e-6);
    NEAR(ab.g_pos, 0.2534079, 1e-6);
    NEAR(ab.g_neg, -0.2534079, 1e-6);
    NEAR(oml_abtl_loss_frozen(ab.c1, ab.c2, 1.0f, 1.0f), ab.loss, 1e-7);
}

/* Every triplet yields a positive loss (utilisation 1) except the perfect one. */
static void test_loss_never_switches_off(void **state)
{
    (void)state;
    for (int i = 1; i <= 40; i++)
        for (int j = 0; j < 40; j++) {
            oml_abtl ab;
            oml_abtl_eval(0.1f, 2.0f * i / 40.0f, 2.0f * j / 40.0f, &ab);
            assert_true(ab.l_attr > 0.0f && ab.l_rep > 0.0f && ab.loss <= 1.0f);
            assert_true(ab.g_pos > 0.0f && ab.g_neg < 0.0f);
        }
    oml_abtl ab;
    oml_abtl_eval(0.1f, 0.0f, 2.0f, &ab);
    assert_true(ab.loss == 0.0f && ab.g_pos == 0.0f && ab.g_neg == 0.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary_conditions),
        cmocka_unit_test(test_thresholds_bracket_distance),
        cmocka_unit_test(test_hand_worked_value),
        cmocka_unit_test(test_loss_never_switches_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
