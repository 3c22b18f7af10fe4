/* test_stream_random.c - the random label-consistent stream of the
 * evaluation tools (tools/common/protocol.h, oml_stream_make_random) and the
 * appended noise features (tools/common/noise.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "noise.h"
#include "protocol.h"

/* 40 items: class 0 has 19, class 1 has 15, class 2 has 5 and class 3 is a
 * single item (it can be a negative, never an anchor or a positive). */
#define N 40
static void make_labels(int32_t *y)
{
    for (int32_t i = 0; i < N; i++)
        y[i] = i == 17 ? 3 : i % 8 < 4 ? 0 : i % 8 < 7 ? 1 : 2;
}

static void test_every_triplet_is_label_consistent(void **state)
{
    (void)state;
    int32_t y[N], size[4] = {0}, seen_a[N] = {0}, seen_p[N] = {0}, seen_n[N] = {0};
    make_labels(y);
    for (int32_t i = 0; i < N; i++)
        size[y[i]]++;
    assert_int_equal(size[0], 19);
    assert_int_equal(size[3], 1);
    oml_stream st;
    oml_diag d = {0};
    int32_t n = 20000;
    assert_int_equal(oml_stream_make_random(&st, y, N, n, 7, &d), 0);
    assert_int_equal(st.n, n);
    assert_int_equal(st.n_seeds, n);
    int64_t neg_class[4] = {0};
    for (int32_t i = 0; i < st.n; i++) {
        oml_triplet t = st.t[i];
        assert_true(t.a < N && t.p < N && t.n < N);
        assert_int_not_equal(t.a, t.p);
        assert_int_equal(y[t.a], y[t.p]);
        assert_int_not_equal(y[t.a], y[t.n]);
        assert_int_not_equal(y[t.a], 3); /* no positive for the single item */
        seen_a[t.a]++;
        seen_p[t.p]++;
        seen_n[t.n]++;
        neg_class[y[t.n]]++;
    }
    /* Every item that can play a role did. */
    for (int32_t i = 0; i < N; i++) {
        if (y[i] != 3) {
            assert_true(seen_a[i] > 0);
            assert_true(seen_p[i] > 0);
        }
        assert_true(seen_n[i] > 0);
    }
    /* Anchors are uniform over the 39 items with a positive: each ~ n / 39. */
    for (int32_t i = 0; i < N; i++)
        if (y[i] != 3)
            assert_true(fabs(seen_a[i] - n / 39.0) < 0.25 * n / 39.0);
    /* Negatives are uniform over the items of the other classes: for a class-0
     * anchor, a class-1 negative has probability 15/21. */
    int64_t a0 = 0, a0_neg1 = 0;
    for (int32_t i = 0; i < st.n; i++)
        if (y[st.t[i].a] == 0) {
            a0++;
            a0_neg1 += y[st.t[i].n] == 1;
        }
    assert_true(fabs((double)a0_neg1 / a0 - 15.0 / 21.0) < 0.03);
    oml_stream_free(&st);
    assert_null(st.t);
}

static void test_seeded(void **state)
{
    (void)state;
    int32_t y[N];
    make_labels(y);
    oml_stream a, b, c;
    assert_int_equal(oml_stream_make_random(&a, y, N, 500, 3, NULL), 0);
    assert_int_equal(oml_stream_make_random(&b, y, N, 500, 3, NULL), 0);
    assert_int_equal(oml_stream_make_random(&c, y, N, 500, 4, NULL), 0);
    assert_memory_equal(a.t, b.t, 500 * sizeof *a.t);
    assert_true(memcmp(a.t, c.t, 500 * sizeof *a.t) != 0);
    /* A shorter stream of the same seed is a prefix of the longer one. */
    oml_stream s;
    assert_int_equal(oml_stream_make_random(&s, y, N, 100, 3, NULL), 0);
    assert_memory_equal(a.t, s.t, 100 * sizeof *a.t);
    oml_stream_free(&a);
    oml_stream_free(&b);
    oml_stream_free(&c);
    oml_stream_free(&s);
}

static void test_refuses_impossible_labels(void **state)
{
    (void)state;
    oml_stream st;
    oml_diag d = {0};
    int32_t one_class[4] = {0, 0, 0, 0}, singletons[3] = {0, 1, 2};
    assert_int_equal(oml_stream_make_random(&st, one_class, 4, 10, 1, &d), OML_EINVAL);
    assert_non_null(strstr(d.msg, "2 classes"));
    assert_null(st.t);
    assert_int_equal(oml_stream_make_random(&st, singletons, 3, 10, 1, &d), OML_EINVAL);
    assert_int_equal(oml_stream_make_random(&st, singletons, 1, 10, 1, &d), OML_EINVAL);
    /* Two classes, one of them a pair: every anchor is in the pair. */
    int32_t pair[3] = {1, 0, 1};
    assert_int_equal(oml_stream_make_random(&st, pair, 3, 50, 1, &d), 0);
    for (int32_t i = 0; i < st.n; i++)
        assert_true((st.t[i].a == 0 && st.t[i].p == 2) || (st.t[i].a == 2 && st.t[i].p == 0));
    oml_stream_free(&st);
}

/* The noise: the originals copied, the rest N(0, (s sd)^2) with sd pooled
 * over every value, the same for the same seed. */
static void test_noise_append(void **state)
{
    (void)state;
    enum { n = 4000, d = 3, k = 5 };
    float *X = malloc(sizeof(float) * n * d), *Y = NULL, *Z = NULL;
    assert_non_null(X);
    for (int i = 0; i < n * d; i++)
        X[i] = (float)(i % 2); /* values 0 and 1 half each: pooled sd 0.5 */
    assert_true(fabs(oml_pooled_sd(X, n, d) - 0.5) < 1e-9);
    assert_int_equal(oml_noise_append(X, n, d, k, 3.0f, 9, &Y), 0);
    assert_int_equal(oml_noise_append(X, n, d, k, 3.0f, 9, &Z), 0);
    assert_memory_equal(Y, Z, sizeof(float) * n * (d + k));
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) {
        assert_memory_equal(Y + i * (d + k), X + i * d, sizeof(float) * d);
        for (int j = 0; j < k; j++) {
            double v = Y[i * (d + k) + d + j];
            sum += v;
            sq += v * v;
        }
    }
    double mean = sum / (n * k), sd = sqrt(sq / (n * k) - mean * mean);
    assert_true(fabs(mean) < 0.05);
    assert_true(fabs(sd - 1.5) < 0.05);
    free(Z);
    assert_int_equal(oml_noise_append(X, n, d, k, 3.0f, 10, &Z), 0);
    assert_true(memcmp(Y, Z, sizeof(float) * n * (d + k)) != 0);
    free(Z);
    assert_int_equal(oml_noise_append(X, n, d, -1, 3.0f, 9, &Z), OML_EINVAL);
    assert_int_equal(oml_noise_append(X, n, d, 1, NAN, 9, &Z), OML_EINVAL);
    assert_null(Z);
    free(X);
    free(Y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_triplet_is_label_consistent),
        cmocka_unit_test(test_seeded),
        cmocka_unit_test(test_refuses_impossible_labels),
        cmocka_unit_test(test_noise_append),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
