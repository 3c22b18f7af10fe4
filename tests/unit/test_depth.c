/* test_depth.c - how many candidates a fresh view re-ranks (daemon
 * depth.h): the steps' depths, and the step the decayed depth sample
 * chooses, worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "depth.h"
#include "serve.h"

static void test_steps(void **state)
{
    (void)state;
    assert_int_equal(omld_depth_at(0, 32), 32);
    assert_int_equal(omld_depth_at(1, 32), 48);
    assert_int_equal(omld_depth_at(2, 32), 64);
    assert_int_equal(omld_depth_at(3, 32), 96);
    assert_int_equal(omld_depth_at(9, 32), 96); /* past the last: the last */
    assert_int_equal(omld_depth_at(-1, 32), 32);
    assert_int_equal(omld_depth_deep(32), 128);
    assert_int_equal(omld_depth_at(1, 5), 7); /* rounded down, never under k_c */
    assert_int_equal(omld_depth_at(3, OML_SERVE_MAX_K), OML_SERVE_MAX_K);
    assert_int_equal(omld_depth_deep(OML_SERVE_MAX_K / 2), OML_SERVE_MAX_K);
}

/* Samples of 30 neighbours whose steps hold 24, 27, 29 and 30 of them
 * (0.8, 0.9, 0.967, 1): nothing moves before 100 neighbours (decayed)
 * were counted, then the first step to reach 0.95 is the third. Every
 * sample perfect from then on, the misses decay while the total grows:
 * worked out by hand, the first step's missed share is 0.156, 0.126,
 * 0.105, 0.090 (the second step's is 0.045: it takes over), ... 0.054
 * after 8 such samples and 0.048 after 9, when the first step serves. */
static void test_step_follows_the_sample(void **state)
{
    (void)state;
    omld_depth d = {0};
    const int64_t lagging[OMLD_DEPTH_STEPS] = {24, 27, 29, 30}, caught_up[OMLD_DEPTH_STEPS] = {
                                                                    30, 30, 30, 30};
    omld_depth_observe(&d, lagging, 30, 0.95);
    omld_depth_observe(&d, lagging, 30, 0.95);
    omld_depth_observe(&d, lagging, 30, 0.95); /* 30 (1 + 0.95 + 0.9025) = 85.6 */
    assert_int_equal(atomic_load(&d.step), 0);
    assert_int_equal(atomic_load(&d.share), 0);
    omld_depth_observe(&d, lagging, 30, 0.95); /* 111.3 */
    assert_int_equal(atomic_load(&d.step), 2);
    assert_int_equal(atomic_load(&d.share), 966666); /* 29 / 30, whatever the decay */
    int n = 0;
    while (atomic_load(&d.step) != 0 && n < 100) {
        omld_depth_observe(&d, caught_up, 30, 0.95);
        n++;
        assert_int_equal(atomic_load(&d.step), n < 4 ? 2 : n < 9 ? 1 : 0);
    }
    assert_int_equal(n, 9);
    assert_int_equal(atomic_load(&d.samples), 13);
}

/* No step reaches the target: the deepest. */
static void test_deepest_when_none_reaches(void **state)
{
    (void)state;
    omld_depth d = {0};
    const int64_t far[OMLD_DEPTH_STEPS] = {10, 12, 14, 16};
    for (int i = 0; i < 8; i++)
        omld_depth_observe(&d, far, 20, 0.98);
    assert_int_equal(atomic_load(&d.step), OMLD_DEPTH_STEPS - 1);
    assert_int_equal(atomic_load(&d.share), 800000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_step_follows_the_sample),
        cmocka_unit_test(test_deepest_when_none_reaches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
