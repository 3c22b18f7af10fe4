/* test_codescan.c - the exact scan's first pass (src/codescan.c, and
 * oml_index_topk in src/index.c): with the codes, oml_index_topk answers
 * exactly as the float scan does (the same rows, bit for bit the same
 * distances), on random rows and on adversarial ones: rows sharing one
 * direction, near ties, exact ties (duplicate rows), zero rows, with the
 * item filter (allow), exclude, several heads and k from 1 to past n; a
 * tie too wide for the keep falls back to the float scan. Every code's
 * dot product lies within its bound of the exact one. Indexes are laid
 * out by hand (only the columns matter to a search). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "code8.h"
#include "codescan.h"
#include "index.h"
#include "rng.h"

enum { HEADS = 2 };

typedef struct hand_index {
    oml_index ix;
    float *rows; /* (heads, n, emb) the rows as made, before the column layout */
} hand_index;

static float gauss(oml_rng *r)
{
    float u = oml_rng_uniform(r) + 1e-7f, v = oml_rng_uniform(r);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static void normalise(float *v, int32_t e)
{
    double s = 0.0;
    for (int32_t j = 0; j < e; j++)
        s += (double)v[j] * (double)v[j];
    float inv = s > 0.0 ? (float)(1.0 / sqrt(s)) : 0.0f;
    for (int32_t j = 0; j < e; j++)
        v[j] *= inv; /* in float, as an embedding is: norms off 1 in the last bits */
}

/* One random unit query per head into q (HEADS, e). */
static void random_queries(float *q, int32_t e, uint64_t seed)
{
    oml_rng r;
    oml_rng_seed(&r, seed);
    for (int32_t j = 0; j < HEADS * e; j++)
        q[j] = gauss(&r);
    for (int hd = 0; hd < HEADS; hd++)
        normalise(q + (size_t)hd * (size_t)e, e);
}

typedef enum { ROWS_RANDOM, ROWS_SHARED, ROWS_NEAR_TIES, ROWS_DUPLICATES } rows_kind;

/* Row i of one head: kind's rows around q (emb), unit (zero rows: every
 * 97th of the duplicates). */
static void make_row(rows_kind kind, oml_rng *r, const float *q, const float *prev, int32_t i,
                     int32_t e, float *v)
{
    switch (kind) {
    case ROWS_RANDOM:
        for (int32_t j = 0; j < e; j++)
            v[j] = gauss(r);
        break;
    case ROWS_SHARED: /* one direction and a little of the rest (dot products all ~0.99) */
        for (int32_t j = 0; j < e; j++)
            v[j] = (j == 3 ? 12.0f : 0.0f) + gauss(r);
        break;
    case ROWS_NEAR_TIES: /* 60 rows at one angle from q (0.8 q + 0.6 u, u a unit vector
                            orthogonal to q): their distances differ only by the
                            floats' rounding; then noise */
        for (int32_t j = 0; j < e; j++)
            v[j] = gauss(r);
        if (i < 60) {
            double qu = 0.0;
            for (int32_t j = 0; j < e; j++)
                qu += (double)q[j] * (double)v[j];
            for (int32_t j = 0; j < e; j++)
                v[j] -= (float)qu * q[j];
            normalise(v, e);
            for (int32_t j = 0; j < e; j++)
                v[j] = 0.8f * q[j] + 0.6f * v[j];
        }
        break;
    case ROWS_DUPLICATES: /* runs of 7 equal rows; some zero */
        if (i % 7 != 0) {
            memcpy(v, prev, (size_t)e * sizeof *v);
            return;
        }
        for (int32_t j = 0; j < e; j++)
            v[j] = i % 97 == 0 ? 0.0f : gauss(r);
        break;
    }
    normalise(v, e);
}

/* An index of n rows per head, HEADS heads of emb, with codes. */
static void hand_build(hand_index *h, rows_kind kind, int32_t n, int32_t e, const float *q,
                       uint64_t seed)
{
    memset(h, 0, sizeof *h);
    oml_rng r;
    oml_rng_seed(&r, seed);
    size_t N = (size_t)n, E = (size_t)e;
    h->rows = malloc(HEADS * N * E * sizeof *h->rows);
    h->ix.emb_cols = malloc(HEADS * N * E * sizeof *h->ix.emb_cols);
    assert_non_null(h->rows);
    assert_non_null(h->ix.emb_cols);
    h->ix.n = n;
    h->ix.heads = HEADS;
    h->ix.emb = e;
    for (size_t hd = 0; hd < HEADS; hd++) {
        float *rows = h->rows + hd * N * E;
        for (size_t i = 0; i < N; i++)
            make_row(kind, &r, q + hd * E, i ? rows + (i - 1) * E : NULL, (int32_t)i, e,
                     rows + i * E);
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < E; j++)
                h->ix.emb_cols[hd * N * E + j * N + i] = rows[i * E + j];
    }
    assert_int_equal(oml_index_add_codes(&h->ix), OML_OK);
    assert_non_null(h->ix.cs);
}

static void hand_free(hand_index *h)
{
    for (int hd = 0; h->ix.cs && hd < HEADS; hd++)
        oml_codescan_free(&h->ix.cs[hd]);
    free(h->ix.cs);
    free(h->ix.emb_cols);
    free(h->rows);
}

/* oml_index_topk with the codes against the float scan (the same index
 * without them): the same count, rows and distances, bit for bit. */
static void expect_same(hand_index *h, int head, const float *q, int32_t k, int32_t exclude,
                        const uint8_t *allow)
{
    size_t kk = (size_t)k;
    oml_neighbor *a = malloc(kk * sizeof *a), *b = malloc(kk * sizeof *b);
    float *scratch = malloc((size_t)h->ix.n * sizeof *scratch);
    int32_t na = oml_index_topk(&h->ix, head, q, k, exclude, allow, a, scratch);
    oml_codescan *cs = h->ix.cs;
    h->ix.cs = NULL;
    int32_t nb = oml_index_topk(&h->ix, head, q, k, exclude, allow, b, scratch);
    h->ix.cs = cs;
    assert_int_equal(na, nb);
    for (int32_t i = 0; i < na; i++) {
        assert_int_equal(a[i].row, b[i].row);
        assert_memory_equal(&a[i].dist, &b[i].dist, sizeof(float));
    }
    free(a);
    free(b);
    free(scratch);
}

/* Did the codes answer (no fallback to the float scan)? The keep the
 * index's own search uses, with room for an eighth of the rows. */
static int codes_answer(const hand_index *h, int head, const float *q, int32_t k)
{
    int32_t cap = h->ix.n / 8;
    oml_hlist_hit *hits = malloc((size_t)cap * sizeof *hits);
    oml_neighbor *lows = malloc((size_t)k * sizeof *lows);
    oml_hlist_keep keep;
    oml_hlist_keep_init(&keep, hits, cap, 0, lows, k);
    oml_codescan_scan(&h->ix.cs[head], q, -1, NULL, &keep);
    int ok = !keep.overflow;
    free(hits);
    free(lows);
    return ok;
}

/* Queries: unit random ones, and rows of the index itself (excluded, or
 * not: a distance of 0 and its duplicates). */
static void check_kind(rows_kind kind, int32_t n, int32_t e, int must_use_codes)
{
    oml_rng r;
    oml_rng_seed(&r, 1000 + (uint64_t)kind);
    size_t E = (size_t)e;
    float *q0 = malloc(HEADS * E * sizeof *q0);
    random_queries(q0, e, 2000 + (uint64_t)kind);
    hand_index h;
    hand_build(&h, kind, n, e, q0, 7 + (uint64_t)kind);
    uint8_t *allow = malloc((size_t)n), *few = calloc((size_t)n, 1);
    for (int32_t i = 0; i < n; i++)
        allow[i] = oml_rng_uniform(&r) < 0.5f;
    few[1] = few[n / 2] = few[n - 1] = 1; /* fewer allowed rows than k */
    const int32_t ks[] = {1, 5, 10, 64, n + 3};
    for (int t = 0; t < 6; t++) {
        int32_t self = t % 2 ? (int32_t)oml_rng_below(&r, (uint64_t)n) : -1;
        for (int hd = 0; hd < HEADS; hd++) {
            float q[OML_CODE8_MAX_EMB];
            if (self >= 0)
                memcpy(q, h.rows + ((size_t)hd * (size_t)n + (size_t)self) * E, E * sizeof *q);
            else if (t == 0)
                memcpy(q, q0 + (size_t)hd * E, E * sizeof *q);
            else {
                for (size_t j = 0; j < E; j++)
                    q[j] = gauss(&r);
                normalise(q, e);
            }
            /* (the near ties' own query too: 60 rows tie, the keep holds them) */
            if (must_use_codes || (kind == ROWS_NEAR_TIES && t == 0))
                assert_true(codes_answer(&h, hd, q, 5));
            for (size_t i = 0; i < sizeof ks / sizeof *ks; i++) {
                expect_same(&h, hd, q, ks[i], -1, NULL);
                expect_same(&h, hd, q, ks[i], self, NULL);
                expect_same(&h, hd, q, ks[i], self, allow);
                expect_same(&h, hd, q, ks[i], -1, few);
            }
        }
    }
    free(allow);
    free(few);
    free(q0);
    hand_free(&h);
}

static void test_random_rows(void **state)
{
    (void)state;
    check_kind(ROWS_RANDOM, 3000, 96, 1); /* the AVX2 kernel where there is one */
    check_kind(ROWS_RANDOM, 1500, 50, 1); /* the portable path */
}

static void test_rows_sharing_a_direction(void **state)
{
    (void)state;
    check_kind(ROWS_SHARED, 3000, 96, 1);
    check_kind(ROWS_SHARED, 1000, 40, 1);
}

static void test_near_ties(void **state)
{
    (void)state;
    check_kind(ROWS_NEAR_TIES, 2000, 96, 0);
}

static void test_duplicate_and_zero_rows(void **state)
{
    (void)state;
    check_kind(ROWS_DUPLICATES, 2100, 64, 0);
}

/* More rows tie within the codes' error than the keep holds (every row
 * one row): the float scan answers, the same way. */
static void test_all_equal_falls_back(void **state)
{
    (void)state;
    enum { N = 800, E = 32 };
    float q[HEADS * E];
    random_queries(q, E, 5);
    hand_index h;
    hand_build(&h, ROWS_DUPLICATES, N, E, q, 9);
    for (int hd = 0; hd < HEADS; hd++)
        for (size_t i = 1; i < N; i++) /* every row the first */
            for (size_t j = 0; j < E; j++)
                h.ix.emb_cols[(size_t)hd * N * E + j * N + i] =
                    h.ix.emb_cols[(size_t)hd * N * E + j * N];
    for (int hd = 0; hd < HEADS; hd++)
        oml_codescan_free(&h.ix.cs[hd]);
    free(h.ix.cs);
    h.ix.cs = NULL;
    assert_int_equal(oml_index_add_codes(&h.ix), OML_OK);
    assert_false(codes_answer(&h, 0, q, 5));
    expect_same(&h, 0, q, 5, -1, NULL);
    expect_same(&h, 1, q + E, 5, 3, NULL);
    hand_free(&h);
}

/* Every row's code score within its slack of the exact dot product: the
 * scan's keep with room for every row and no bound (k 0 keeps all by dot). */
static void test_bound_holds(void **state)
{
    (void)state;
    enum { N = 2000, E = 96 };
    for (rows_kind kind = ROWS_RANDOM; kind <= ROWS_DUPLICATES; kind++) {
        float q[HEADS * E];
        random_queries(q, E, 11 + (uint64_t)kind);
        hand_index h;
        hand_build(&h, kind, N, E, q, 3);
        oml_hlist_hit *hits = malloc(N * sizeof *hits);
        oml_hlist_keep keep;
        oml_hlist_keep_init(&keep, hits, N, N, NULL, 0);
        oml_codescan_scan(&h.ix.cs[0], q, -1, NULL, &keep);
        assert_int_equal(keep.cnt, N);
        for (int32_t i = 0; i < N; i++) {
            const float *v = h.rows + (size_t)hits[i].row * E;
            double dot = 0.0;
            for (int j = 0; j < E; j++)
                dot += (double)q[j] * (double)v[j];
            assert_true(fabs((double)hits[i].dot - dot) <= (double)hits[i].slack);
        }
        free(hits);
        hand_free(&h);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_rows),
        cmocka_unit_test(test_rows_sharing_a_direction),
        cmocka_unit_test(test_near_ties),
        cmocka_unit_test(test_duplicate_and_zero_rows),
        cmocka_unit_test(test_all_equal_falls_back),
        cmocka_unit_test(test_bound_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
