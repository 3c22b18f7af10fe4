/* test_hlist_keep.c - the rows a scan keeps for the exact re-rank
 * (src/hlist_keep.c), by hand: the floor is the k-th largest dot - slack;
 * every row whose dot + slack reaches it is kept and no other (without a
 * keep); a keep holds its best by dot besides, or alone without a bound;
 * a full keep says so and holds the best by dot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "hlist_keep.h"

static int by_row(const void *pa, const void *pb)
{
    const oml_hlist_hit *a = pa, *b = pb;
    return (a->row > b->row) - (a->row < b->row);
}

/* Rows 0-5, k 2: lows 0.8, 0.7, 0.58, 0.45, 0.2, 0.68 -> floor 0.7;
 * uppers 1.0, 0.9, 0.64, 0.75, 0.4, 0.72 -> rows 0, 1, 3, 5 may be among
 * the 2 nearest (row 3 by its slack, though row 2's dot is larger). */
static const float dot[6] = {0.9f, 0.8f, 0.61f, 0.6f, 0.3f, 0.7f};
static const float slk[6] = {0.1f, 0.1f, 0.03f, 0.15f, 0.1f, 0.02f};

/* The six rows offered to a keep of `keep` with room for 8, k 2 (lows
 * for its floor); the kept rows sorted by row. */
static void offer_six(oml_hlist_keep *s, oml_hlist_hit *hits, int32_t keep, oml_neighbor *lows)
{
    oml_hlist_keep_init(s, hits, 8, keep, lows, 2);
    assert_true(isinf(s->floor) && s->floor < 0);
    assert_true(isinf(oml_hlist_keep_threshold(s, 1.0f))); /* fewer than k: every row */
    for (int i = 0; i < 6; i++)
        oml_hlist_keep_offer(s, i, dot[i], slk[i]);
    qsort(hits, (size_t)s->cnt, sizeof *hits, by_row);
}

static void test_floor_and_bound(void **state)
{
    (void)state;
    oml_hlist_hit hits[8];
    oml_neighbor lows[2];
    oml_hlist_keep s;
    offer_six(&s, hits, 0, lows);
    assert_true(fabsf(s.floor - 0.7f) < 1e-6f);
    assert_false(s.overflow);
    assert_int_equal(s.cnt, 4);
    const int32_t want[4] = {0, 1, 3, 5};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(hits[i].row, want[i]);
        assert_true(oml_hlist_keep_may(&s, &hits[i]));
    }
    /* A block whose rows have at most 0.1 of slack needs a dot of 0.6. */
    float t = oml_hlist_keep_threshold(&s, 0.1f);
    assert_true(t < 0.6f && t > 0.59f);
}

/* A keep of 4 also holds row 2 (the fourth by dot). */
static void test_keep_best_by_dot(void **state)
{
    (void)state;
    oml_hlist_hit hits[8];
    oml_neighbor lows[2];
    oml_hlist_keep s;
    offer_six(&s, hits, 4, lows);
    assert_int_equal(s.cnt, 5);
    const int32_t want[5] = {0, 1, 2, 3, 5};
    for (int i = 0; i < 5; i++)
        assert_int_equal(hits[i].row, want[i]);
    assert_false(oml_hlist_keep_may(&s, &hits[2])); /* kept for its dot only */
}

/* k 0: no bound, the 3 best by dot (rows 0, 1, 5), whatever the slack. */
static void test_by_dot_alone(void **state)
{
    (void)state;
    oml_hlist_hit hits[8];
    oml_neighbor lows[1];
    oml_hlist_keep s;
    oml_hlist_keep_init(&s, hits, 8, 3, lows, 0);
    for (int i = 0; i < 6; i++)
        oml_hlist_keep_offer(&s, i, dot[i], slk[i]);
    qsort(hits, (size_t)s.cnt, sizeof *hits, by_row);
    assert_int_equal(s.cnt, 3);
    const int32_t want[3] = {0, 1, 5};
    for (int i = 0; i < 3; i++)
        assert_int_equal(hits[i].row, want[i]);
    assert_false(s.overflow);
}

/* 10 rows tied within their slack, room for 4: overflow, and the 4 best
 * by dot stay. */
static void test_overflow(void **state)
{
    (void)state;
    oml_hlist_hit hits[4];
    oml_neighbor lows[2];
    oml_hlist_keep s;
    oml_hlist_keep_init(&s, hits, 4, 0, lows, 2);
    for (int i = 0; i < 10; i++)
        oml_hlist_keep_offer(&s, i, 0.5f + 0.001f * (float)i, 0.1f);
    assert_true(s.overflow);
    assert_int_equal(s.cnt, 4);
    qsort(hits, 4, sizeof *hits, by_row);
    for (int i = 0; i < 4; i++)
        assert_int_equal(hits[i].row, 6 + i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_floor_and_bound),
        cmocka_unit_test(test_keep_best_by_dot),
        cmocka_unit_test(test_by_dot_alone),
        cmocka_unit_test(test_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
