/* test_dml_metrics.c - retrieval and clustering metrics against answers
 * worked by hand (tools/common/dml_metrics.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "dml_metrics.h"
#include "rng.h"

/* Six points on a line, x = 0, 1, 3, 7, 12, 18 with classes A A B A B B
 * (A = 4, B = 9). Neighbour order of each query, the query excluded:
 *   q0: 1A 2B 3A 4B 5B    q1: 0A 2B 3A 4B 5B    q2: 1A 0A 3A 4B 5B
 *   q3: 2B 4B 1A 0A 5B    q4: 3A 5B 2B 1A 0A    q5: 4B 3A 2B 1A 0A
 * Recall@1 = {q0,q1,q5} = 3/6; @2 adds q4 = 4/6; @4 adds q2 (4th) and q3
 * (3rd) = 6/6; @8 = 1. MAP@R with R = 2 for every query:
 *   q0 (1 + 0)/2 = 0.5, q1 0.5, q2 0, q3 0, q4 (0 + 1/2)/2 = 0.25, q5 0.5
 *   -> 1.75 / 6. */
static void test_recall_map_hand(void **state)
{
    (void)state;
    float E[6] = {0, 1, 3, 7, 12, 18};
    int32_t y[6] = {4, 4, 9, 4, 9, 9}, ks[4] = {1, 2, 4, 8};
    double r[4], map;
    assert_int_equal(oml_dml_retrieval(E, y, 6, 1, ks, 4, r, &map), 0);
    assert_true(fabs(r[0] - 3.0 / 6) < 1e-12);
    assert_true(fabs(r[1] - 4.0 / 6) < 1e-12);
    assert_true(fabs(r[2] - 1.0) < 1e-12);
    assert_true(fabs(r[3] - 1.0) < 1e-12);
    assert_true(fabs(map - 1.75 / 6) < 1e-12);
    /* The same points in 2-d, shifted and rotated by 90 degrees: same answers. */
    float E2[12];
    for (int i = 0; i < 6; i++) {
        E2[2 * i] = 5.0f;
        E2[2 * i + 1] = E[i] - 3.0f;
    }
    assert_int_equal(oml_dml_retrieval(E2, y, 6, 2, ks, 4, r, &map), 0);
    assert_true(fabs(r[0] - 0.5) < 1e-12 && fabs(map - 1.75 / 6) < 1e-12);
}

static void test_nmi(void **state)
{
    (void)state;
    int32_t a[6] = {0, 0, 1, 1, 2, 2}, b[6] = {5, 5, 9, 9, 7, 7};
    assert_true(fabs(oml_dml_nmi(a, a, 6) - 1.0) < 1e-12);
    assert_true(fabs(oml_dml_nmi(a, b, 6) - 1.0) < 1e-12); /* label names do not matter */
    int32_t u[4] = {0, 0, 1, 1}, v[4] = {0, 1, 0, 1};
    assert_true(fabs(oml_dml_nmi(u, v, 4)) < 1e-12); /* independent partitions */
    /* a = 000111, c = 001111: H(a) = ln 2, H(c) = -(1/3 ln 1/3 + 2/3 ln 2/3),
     * I = 1/3 ln 2 + 1/6 ln(3/4) + 1/2 ln(3/2); NMI = 2I / (H(a) + H(c))
     * = 0.47870397138567994 (worked with Python's math). */
    int32_t p[6] = {0, 0, 0, 1, 1, 1}, c[6] = {0, 0, 1, 1, 1, 1};
    assert_true(fabs(oml_dml_nmi(p, c, 6) - 0.47870397138567994) < 1e-12);
    /* Pairwise F1 of the same: same-cluster pairs 3 + 3 = 6, same-class pairs
     * 1 + 6 = 7, both 1 + 3 = 4: P = 4/6, R = 4/7, F1 = 32/52. */
    assert_true(fabs(oml_dml_pair_f1(p, c, 6) - 32.0 / 52.0) < 1e-12);
    assert_true(fabs(oml_dml_pair_f1(a, b, 6) - 1.0) < 1e-12);
}

static void test_kmeans_clustering(void **state)
{
    (void)state;
    enum { N = 300, D = 3 };
    float E[N * D];
    int32_t y[N];
    oml_rng rng;
    oml_rng_seed(&rng, 2);
    for (int i = 0; i < N; i++) {
        y[i] = 10 + i % 3;
        for (int j = 0; j < D; j++)
            E[i * D + j] = (j == i % 3 ? 10.0f : 0.0f) + 0.3f * oml_rng_normal(&rng);
    }
    double nmi = 0, f1 = 0;
    assert_int_equal(oml_dml_clustering(E, y, N, D, 7, &nmi, &f1), 0);
    assert_true(fabs(nmi - 1.0) < 1e-9);
    assert_true(fabs(f1 - 1.0) < 1e-9);
    /* Same seed, same clustering. */
    int32_t a1[N], a2[N];
    assert_int_equal(oml_dml_kmeans(E, N, D, 5, 3, 100, a1), 0);
    assert_int_equal(oml_dml_kmeans(E, N, D, 5, 3, 100, a2), 0);
    assert_memory_equal(a1, a2, sizeof a1);
}

/* Gallery 0A 1A 10B 11B. Queries: 0.4 (A) -> 0 A; 10.6 (B) -> 11 B;
 * 5.4 (A) -> 1 at 4.4 beats 10 at 4.6: A; 6 (A) -> 10 at 4: B, wrong.
 * k = 1: error 1/4. k = 3: 0.4 -> {0,1,10} A; 10.6 -> {11,10,1} B;
 * 5.4 -> {1,0,10}: A; 6 -> {10,11,1}: B, wrong: 1/4. */
static void test_knn_error(void **state)
{
    (void)state;
    float G[4] = {0, 1, 10, 11}, Q[4] = {0.4f, 10.6f, 5.4f, 6.0f};
    int32_t gy[4] = {1, 1, 2, 2}, qy[4] = {1, 2, 1, 1};
    double err;
    assert_int_equal(oml_dml_knn_error(G, gy, 4, Q, qy, 4, 1, 1, &err), 0);
    assert_true(fabs(err - 0.25) < 1e-12);
    assert_int_equal(oml_dml_knn_error(G, gy, 4, Q, qy, 4, 1, 3, &err), 0);
    assert_true(fabs(err - 0.25) < 1e-12);
    assert_true(oml_dml_knn_error(G, gy, 4, Q, qy, 4, 1, 5, &err) < 0); /* k > gallery */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recall_map_hand),
        cmocka_unit_test(test_nmi),
        cmocka_unit_test(test_kmeans_clustering),
        cmocka_unit_test(test_knn_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
