/* test_metrics.c - daemon/metrics.c: bucket bounds, where samples land,
 * quantiles worked out by hand, the empty histogram, names and the clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "metrics.h"

#define NFINITE (OMLD_HIST_BUCKETS - 1)

static uint64_t bucket(const omld_histogram *h, int i)
{
    return atomic_load(&h->bucket[i]);
}

/* The one bucket holding a sample, or -1 when not exactly one is non-empty. */
static int only_bucket(const omld_histogram *h)
{
    int found = -1;
    for (int i = 0; i < OMLD_HIST_BUCKETS; i++) {
        if (bucket(h, i) == 0)
            continue;
        if (found >= 0)
            return -1;
        found = i;
    }
    return found;
}

static int bucket_of(uint64_t ns)
{
    omld_histogram h;
    memset(&h, 0, sizeof h);
    omld_hist_observe(&h, ns);
    return only_bucket(&h);
}

static void test_bounds(void **state)
{
    (void)state;
    assert_true(fabs(omld_hist_bound(0) - 1e-5) < 1e-20);
    assert_true(fabs(omld_hist_bound(4) - 1e-4) < 1e-19);
    assert_true(fabs(omld_hist_bound(8) - 1e-3) < 1e-18);
    assert_true(fabs(omld_hist_bound(20) - 1.0) < 1e-15);
    /* 24 finite bounds: the last is 10^0.75 s. */
    assert_true(fabs(omld_hist_bound(NFINITE - 1) - pow(10.0, 0.75)) < 1e-12);
    double factor = pow(10.0, 0.25);
    for (int i = 1; i < NFINITE; i++) {
        double r = omld_hist_bound(i) / omld_hist_bound(i - 1);
        assert_true(fabs(r - factor) < 1e-12);
        assert_true(fabs(omld_hist_bound(i) - 1e-5 * pow(10.0, i / 4.0)) <
                    1e-12 * omld_hist_bound(i));
    }
}

static void test_observe_buckets(void **state)
{
    (void)state;
    assert_int_equal(bucket_of(0), 0);
    assert_int_equal(bucket_of(1), 0);
    assert_int_equal(bucket_of(10000), 0);     /* exactly 10 us: le="1e-05" */
    assert_int_equal(bucket_of(10001), 1);
    assert_int_equal(bucket_of(100000), 4);    /* 100 us */
    assert_int_equal(bucket_of(1000000000), 20); /* 1 s */
    assert_int_equal(bucket_of(6000000000ull), NFINITE);  /* above 5.62 s: +Inf */
    assert_int_equal(bucket_of(UINT64_MAX), NFINITE);
    /* Every bound: the largest whole ns at or below it lands in bucket i,
     * one more ns in bucket i+1. */
    for (int i = 0; i < NFINITE; i++) {
        uint64_t ns = (uint64_t)floor(omld_hist_bound(i) * 1e9 + 1e-3);
        assert_int_equal(bucket_of(ns), i);
        assert_int_equal(bucket_of(ns + 1), i + 1);
    }

    omld_histogram h;
    memset(&h, 0, sizeof h);
    omld_hist_observe(&h, 5000);
    omld_hist_observe(&h, 5000);
    omld_hist_observe(&h, 2000000); /* 2 ms: (1.778, 3.162] ms = bucket 10 */
    assert_int_equal(atomic_load(&h.count), 3);
    assert_int_equal(atomic_load(&h.sum_ns), 2010000);
    assert_int_equal(bucket(&h, 0), 2);
    assert_int_equal(bucket(&h, 10), 1);
}

static void test_quantiles_by_hand(void **state)
{
    (void)state;
    omld_histogram h;
    memset(&h, 0, sizeof h);
    /* 4 x 5 us (bucket 0: (0, 10 us]), 4 x 80 us (bucket 4: (56.23, 100] us),
     * 2 x 10 s (+Inf). 10 samples. */
    for (int i = 0; i < 4; i++)
        omld_hist_observe(&h, 5000);
    for (int i = 0; i < 4; i++)
        omld_hist_observe(&h, 80000);
    omld_hist_observe(&h, 10000000000ull);
    omld_hist_observe(&h, 10000000000ull);
    assert_int_equal(bucket(&h, 0), 4);
    assert_int_equal(bucket(&h, 4), 4);
    assert_int_equal(bucket(&h, NFINITE), 2);

    const double lo4 = 5.6234132519034912e-05, hi4 = 1e-4;
    /* q = 0.25: rank 2.5 in bucket 0 (cum 4): 0 + 10 us * 2.5/4 = 6.25 us. */
    assert_true(fabs(omld_hist_quantile(&h, 0.25) - 6.25e-6) < 1e-15);
    /* q = 0.4: rank 4 reaches exactly the end of bucket 0: 10 us. */
    assert_true(fabs(omld_hist_quantile(&h, 0.4) - 1e-5) < 1e-15);
    /* q = 0.5: rank 5, bucket 4 (cum 4 before, 4 inside): a quarter of the
     * way from 56.23 us to 100 us = 67.1756 us. */
    double p50 = lo4 + (hi4 - lo4) * 0.25;
    assert_true(fabs(omld_hist_quantile(&h, 0.5) - p50) < 1e-15);
    assert_true(fabs(p50 - 6.7175599389276184e-05) < 1e-15);
    /* q = 0.8: rank 8, the end of bucket 4: 100 us. */
    assert_true(fabs(omld_hist_quantile(&h, 0.8) - 1e-4) < 1e-15);
    /* q = 0.99: rank 9.9 is in +Inf: the highest finite bound. */
    assert_true(fabs(omld_hist_quantile(&h, 0.99) - omld_hist_bound(NFINITE - 1)) < 1e-12);
    /* Quantiles never decrease in q. */
    double prev = 0;
    for (double q = 0.01; q < 1.0; q += 0.01) {
        double v = omld_hist_quantile(&h, q);
        assert_true(v >= prev);
        prev = v;
    }

    /* One sample: every quantile is inside its bucket. */
    omld_histogram one;
    memset(&one, 0, sizeof one);
    omld_hist_observe(&one, 2000000); /* bucket 10: (1.778, 3.162] ms */
    /* rank 0.5 of 1: half-way between 1.778 ms and 3.162 ms. */
    double q50 = omld_hist_quantile(&one, 0.5);
    assert_true(fabs(q50 - (omld_hist_bound(9) + 0.5 * (omld_hist_bound(10) - omld_hist_bound(9)))) <
                1e-15);
}

static void test_empty(void **state)
{
    (void)state;
    omld_histogram h;
    memset(&h, 0, sizeof h);
    assert_true(omld_hist_quantile(&h, 0.5) == 0.0);
    assert_true(omld_hist_quantile(&h, 0.99) == 0.0);
    assert_int_equal(only_bucket(&h), -1);
    omld_hist_observe(&h, 1000);
    assert_true(omld_hist_quantile(&h, 0.0) == 0.0); /* q outside (0, 1) */
    assert_true(omld_hist_quantile(&h, 1.0) > 0.0);
}

static void test_names_and_clock(void **state)
{
    (void)state;
    assert_string_equal(omld_query_kind_name(OMLD_Q_CLASSIFY), "classify");
    assert_string_equal(omld_query_kind_name(OMLD_Q_VERIFY), "verify");
    assert_string_equal(omld_query_kind_name(OMLD_Q_RETRIEVE), "retrieve");
    assert_string_equal(omld_query_kind_name(OMLD_Q_EMBED), "embed");
    assert_string_equal(omld_query_kind_name(OMLD_Q_GET_ITEMS), "get_items");
    assert_string_equal(omld_query_kind_name(OMLD_Q_KINDS), "unknown");
    assert_string_equal(omld_query_kind_name(-1), "unknown");

    uint64_t a = omld_now_ns(), b = omld_now_ns();
    assert_true(a > 0);
    assert_true(b >= a);

    omld_metrics m;
    memset(&m, 0, sizeof m);
    omld_count(&m.items_put, 3);
    omld_count(&m.items_put, 4);
    assert_int_equal(omld_read(&m.items_put), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_observe_buckets),
        cmocka_unit_test(test_quantiles_by_hand),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_names_and_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
