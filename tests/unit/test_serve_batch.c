/* test_serve_batch.c - many queries answered together (src/serve_batch.c).
 *
 * The contract is that a batch answers each query exactly as the single
 * call does, so most checks compare the two bit for bit (labels, class
 * scores, hit rows, scores and similarities): on random data large enough
 * for several blocks of queries (64) and of index rows (4,096), with
 * duplicate items (exact distance ties), id-like queries that exclude
 * their own row, retrieve filters (allowed rows, offset, similarity floor),
 * k beyond the store, an index with inverted lists (the single path per
 * query) and an empty index. The hand-worked model of test_serve.c checks
 * the values themselves. Validation names the query: "queries[3].k". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "serve.h"
#include "serve_hand.h"
#include "testutil.h"

#define E1 0.36787944117144233 /* e^-1 */

/* ------------------------------------------------------------ fixtures */

/* The hand model (tests/support/serve_hand.h), alpha (.75, .25). */
static oml_snapshot *hand_snap(void)
{
    oml_snapshot *s = oml_test_hand_snap(0.75f, 0.25f);
    assert_non_null(s);
    return s;
}

static oml_index *hand_index(oml_snapshot *s)
{
    oml_index *ix = oml_test_hand_index(s);
    assert_non_null(ix);
    return ix;
}

static void put(oml_store *st, const char *id, const float *x, const char *label)
{
    assert_int_equal(oml_store_put(st, id, strlen(id), x, label, label ? strlen(label) : 0,
                                   NULL, NULL),
                     OML_OK);
}

/* N random items of dim DIM in LABELS classes (a class-dependent mean, so
 * the labels vary), every 7th a copy of an earlier one (exact ties), every
 * 11th unlabelled, a few deleted (slots and rows differ). */
typedef struct rand_set {
    oml_snapshot *s;
    oml_store *st;
    oml_index *ix;
    float *items; /* (n, dim) */
    int n, dim;
} rand_set;

static void rand_set_make(rand_set *rs, int n, int dim, int layers, int emb, uint64_t seed,
                          size_t ivf_min_rows)
{
    enum { LABELS = 6 };
    rs->n = n;
    rs->dim = dim;
    float alpha[OML_MAX_LAYERS + 1], sum = 0; /* unequal head weights */
    for (int l = 0; l <= layers; l++)
        sum += alpha[l] = 1.0f + (float)l;
    for (int l = 0; l <= layers; l++)
        alpha[l] /= sum;
    rs->s = oml_test_snapshot(layers, dim, 10, emb, NULL, alpha, seed);
    assert_non_null(rs->s);
    assert_int_equal(oml_store_create(&rs->st, dim, (uint32_t)(2 * n)), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, seed + 1);
    rs->items = malloc(sizeof(float) * (size_t)n * (size_t)dim);
    assert_non_null(rs->items);
    char id[32], lab[8];
    for (int i = 0; i < n; i++) {
        float *x = rs->items + (size_t)i * dim;
        if (i >= 20 && i % 7 == 0) {
            memcpy(x, rs->items + oml_rng_below(&r, (uint64_t)i) * dim, sizeof(float) * dim);
        } else {
            int cls = (int)oml_rng_below(&r, LABELS);
            for (int j = 0; j < dim; j++)
                x[j] = oml_rng_normal(&r) + (j == cls ? 2.0f : 0.0f);
        }
        snprintf(id, sizeof id, "i%d", i);
        snprintf(lab, sizeof lab, "c%d", (int)oml_rng_below(&r, LABELS));
        put(rs->st, id, x, i % 11 == 3 ? NULL : lab);
    }
    for (int i = 1; i < n; i += 97) {
        snprintf(id, sizeof id, "i%d", i);
        assert_int_equal(oml_store_delete(rs->st, id, strlen(id)), OML_OK);
    }
    oml_index_builder b = {0};
    assert_int_equal(oml_index_builder_run(&b, rs->s, rs->st, &rs->ix), OML_OK);
    oml_index_builder_free(&b);
    if (ivf_min_rows > 0 && (size_t)rs->ix->n >= ivf_min_rows)
        assert_int_equal(oml_index_add_lists(rs->ix), OML_OK);
    else /* as the daemon's exact views: single queries read the codes first */
        assert_int_equal(oml_index_add_codes(rs->ix), OML_OK);
}

static void rand_set_free(rand_set *rs)
{
    oml_index_destroy(rs->ix);
    oml_store_destroy(rs->st);
    oml_snapshot_release(rs->s);
    free(rs->items);
}

/* m queries: every third a stored item's features excluding its own row
 * (a query by id), the others fresh vectors. X (m, dim) holds them. */
static void make_queries(const rand_set *rs, oml_rng *r, int m, float *X, oml_query *q,
                         const int32_t *ks)
{
    const oml_index *ix = rs->ix;
    for (int i = 0; i < m; i++) {
        float *x = X + (size_t)i * rs->dim;
        int32_t exclude = -1;
        if (i % 3 == 0) {
            int32_t row = (int32_t)oml_rng_below(r, (uint64_t)ix->n);
            int item = atoi(oml_index_row_id(ix, rs->st, row, NULL) + 1); /* "i<item>" */
            memcpy(x, rs->items + (size_t)item * rs->dim, sizeof(float) * rs->dim);
            exclude = row;
        } else {
            for (int j = 0; j < rs->dim; j++)
                x[j] = oml_rng_normal(r) * 1.5f;
        }
        q[i] = (oml_query){x, ks[i % 4], exclude, NULL};
    }
}

/* Classify: every answer equals oml_classify's for its query, bit for bit;
 * an OML_EEMPTY single answer is OML_LABEL_NONE with no classes. */
static void expect_classify_equal(const oml_index *ix, const oml_query *q, int m)
{
    oml_classification *got = malloc(sizeof *got * (size_t)m);
    assert_non_null(got);
    memset(got, 0x5a, sizeof *got * (size_t)m);
    oml_diag d = {0};
    assert_int_equal(oml_classify_batch(ix, q, m, got, &d), OML_OK);
    for (int i = 0; i < m; i++) {
        oml_classification want;
        memset(&want, 0, sizeof want);
        int rc = oml_classify(ix, q[i].x, q[i].k, q[i].exclude_row, &want, NULL);
        assert_true(rc == OML_OK || rc == OML_EEMPTY);
        if (rc == OML_EEMPTY)
            want = (oml_classification){.label = OML_LABEL_NONE};
        if (memcmp(&got[i], &want, sizeof want) != 0)
            fail_msg("query %d (k %d): batch label %d score %.9g, single %d %.9g", i,
                     (int)q[i].k, (int)got[i].label, (double)got[i].score, (int)want.label,
                     (double)want.score);
    }
    free(got);
}

/* Retrieve: the same hits (rows, scores, similarities) in the same order. */
static void expect_retrieve_equal(const oml_index *ix, const oml_query *q, int m)
{
    oml_hit **out = malloc(sizeof *out * (size_t)m);
    int32_t *n_out = malloc(sizeof *n_out * (size_t)m);
    oml_hit *want = malloc(sizeof *want * OML_SERVE_MAX_K);
    assert_non_null(out);
    assert_non_null(n_out);
    assert_non_null(want);
    for (int i = 0; i < m; i++) {
        out[i] = malloc(sizeof **out * (size_t)q[i].k);
        assert_non_null(out[i]);
    }
    oml_diag d = {0};
    assert_int_equal(oml_retrieve_batch(ix, q, m, out, n_out, &d), OML_OK);
    for (int i = 0; i < m; i++) {
        int32_t nw = -1;
        assert_int_equal(oml_retrieve(ix, q[i].x, q[i].k, q[i].exclude_row, q[i].opts, want, &nw,
                                      NULL),
                         OML_OK);
        if (n_out[i] != nw)
            fail_msg("query %d: batch %d hits, single %d", i, (int)n_out[i], (int)nw);
        for (int32_t h = 0; h < nw; h++)
            if (memcmp(&out[i][h], &want[h], sizeof want[h]) != 0)
                fail_msg("query %d hit %d: batch row %d %.9g %.9g, single row %d %.9g %.9g", i,
                         (int)h, (int)out[i][h].row, (double)out[i][h].score,
                         (double)out[i][h].similarity, (int)want[h].row,
                         (double)want[h].score, (double)want[h].similarity);
        free(out[i]);
    }
    free(out);
    free(n_out);
    free(want);
}

/* ------------------------------------------------------------ tests */

/* The hand model, several queries in one batch with their own k and
 * exclusions; values as worked out in test_serve.c. */
static void test_classify_hand(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_index *ix = hand_index(s);
    const float x10[2] = {1, 0}, x11[2] = {1, 1};
    const oml_query q[4] = {
        {x10, 3, -1, NULL}, /* red 1.0, blue .75 e^-1 + .25 */
        {x11, 1, -1, NULL}, /* head 0 c (blue .75), head 1 a (red .25): blue .75 */
        {x10, 1, 0, NULL},  /* without a: e votes nothing, head 1 c: blue .25 alone */
        {x10, 4, -1, NULL}, /* k = 4: blue wins, 1.05442 against 1.0 */
    };
    oml_classification c[4];
    assert_int_equal(oml_classify_batch(ix, q, 4, c, NULL), OML_OK);
    assert_int_equal(c[0].label, 0);
    assert_float_equal(c[0].score, 1.0, 1e-6);
    assert_int_equal(c[0].n_classes, 2);
    assert_float_equal(c[0].classes[1].score, E1 * 0.75 + 0.25, 1e-6);
    assert_int_equal(c[1].label, 1);
    assert_float_equal(c[1].score, 0.75, 1e-7);
    assert_int_equal(c[2].label, 1);
    assert_float_equal(c[2].score, 0.25, 1e-7);
    assert_int_equal(c[2].n_classes, 1);
    assert_int_equal(c[3].label, 1);
    double blue = 0.75 * exp(-0.76536686 / sqrt(2.0)) + 0.75 * E1 + 0.25 + 0.25 * E1;
    assert_float_equal(c[3].score, blue, 1e-6);
    expect_classify_equal(ix, q, 4);
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}

/* Retrieve on the hand model: k = 3 (a, e, c), a filter to blue (c, b), a
 * page (offset 1: e, c), a floor of .9 (a, e), k beyond the items (4
 * distinct rows), all in one batch. */
static void test_retrieve_hand(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_index *ix = hand_index(s);
    const float x[2] = {1, 0};
    uint8_t blue[4] = {0, 1, 1, 0};
    oml_retrieve_opts only_blue = {blue, 0, -INFINITY, NULL}, page = {NULL, 1, -INFINITY, NULL},
                      floor9 = {NULL, 0, 0.9f, NULL};
    const oml_query q[5] = {{x, 3, -1, NULL}, {x, 3, -1, &only_blue}, {x, 2, -1, &page},
                            {x, 3, -1, &floor9}, {x, 8, -1, NULL}};
    oml_hit h[5][8];
    oml_hit *out[5] = {h[0], h[1], h[2], h[3], h[4]};
    int32_t n[5];
    assert_int_equal(oml_retrieve_batch(ix, q, 5, out, n, NULL), OML_OK);
    const int32_t want_n[5] = {3, 2, 2, 2, 4};
    const int32_t want_rows[5][4] = {{0, 3, 2}, {2, 1}, {3, 2}, {0, 3}, {0, 3, 2, 1}};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(n[i], want_n[i]);
        for (int j = 0; j < n[i]; j++)
            assert_int_equal(h[i][j].row, want_rows[i][j]);
    }
    assert_float_equal(h[0][2].score, E1 * 0.75, 1e-7);
    assert_float_equal(h[0][2].similarity, 0.78033009, 1e-6);
    assert_float_equal(h[1][1].score, 0.75 * E1, 1e-6);
    assert_float_equal(h[2][1].score, E1 * 0.75, 1e-6); /* the k = 3 ranking's score */
    assert_float_equal(h[4][2].score, 0.43653873, 1e-6);
    expect_retrieve_equal(ix, q, 5);
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}

/* Random data: 9,000 items (three blocks of rows), 150 queries (three
 * blocks of queries), k 1, 5, 40 and beyond the store mixed in each
 * batch. */
static void test_equals_single_random(void **state)
{
    (void)state;
    enum { N = 9000, DIM = 12, M = 150 };
    rand_set rs;
    rand_set_make(&rs, N, DIM, 3, 5, 3, 0);
    assert_int_equal(rs.ix->n_lists, 0);
    oml_rng r;
    oml_rng_seed(&r, 11);
    float *X = malloc(sizeof(float) * M * DIM);
    oml_query *q = malloc(sizeof *q * M);
    assert_non_null(X);
    assert_non_null(q);
    const int32_t ks[4] = {5, 1, 40, 9999};
    make_queries(&rs, &r, M, X, q, ks);
    expect_classify_equal(rs.ix, q, M);

    /* Retrieve with filters: a third of the rows allowed for some queries,
     * pages and floors for others. */
    uint8_t *allow = malloc((size_t)rs.ix->n);
    assert_non_null(allow);
    for (int32_t i = 0; i < rs.ix->n; i++)
        allow[i] = oml_rng_below(&r, 3) == 0;
    oml_retrieve_opts opts[4] = {{allow, 0, -INFINITY, NULL}, {NULL, 7, -INFINITY, NULL},
                                 {NULL, 0, 0.2f, NULL}, {allow, 3, 0.0f, NULL}};
    for (int i = 0; i < M; i++) {
        q[i].k = i % 5 == 4 ? 300 : 1 + i % 17;
        q[i].opts = i % 5 < 4 ? &opts[i % 4] : NULL;
    }
    expect_retrieve_equal(rs.ix, q, M);
    free(allow);
    free(q);
    free(X);
    rand_set_free(&rs);
}

/* k larger than the store, and queries whose k x heads outgrow one block's
 * neighbour budget (blocks of fewer queries). */
static void test_k_beyond_store(void **state)
{
    (void)state;
    rand_set rs;
    rand_set_make(&rs, 30, 6, 2, 4, 5, 0);
    oml_rng r;
    oml_rng_seed(&r, 2);
    enum { M = 12 };
    float X[M * 6];
    oml_query q[M];
    const int32_t ks[4] = {50, 29, OML_SERVE_MAX_K, 1};
    make_queries(&rs, &r, M, X, q, ks);
    expect_classify_equal(rs.ix, q, M);
    expect_retrieve_equal(rs.ix, q, M);
    rand_set_free(&rs);

    /* 3 heads x 16,384 neighbours each: a few queries per block. */
    rand_set_make(&rs, 5000, 6, 2, 4, 6, 0);
    make_queries(&rs, &r, M, X, q, (const int32_t[4]){OML_SERVE_MAX_K, 3, OML_SERVE_MAX_K, 7});
    expect_classify_equal(rs.ix, q, M);
    rand_set_free(&rs);
}

/* An index with inverted lists answers each query by the single path. */
static void test_lists_index(void **state)
{
    (void)state;
    rand_set rs;
    rand_set_make(&rs, 3000, 8, 2, 4, 9, 1000);
    assert_true(rs.ix->n_lists > 0);
    oml_rng r;
    oml_rng_seed(&r, 4);
    enum { M = 40 };
    float X[M * 8];
    oml_query q[M];
    make_queries(&rs, &r, M, X, q, (const int32_t[4]){5, 10, 1, 64});
    expect_classify_equal(rs.ix, q, M);
    expect_retrieve_equal(rs.ix, q, M);
    rand_set_free(&rs);
}

/* Only unlabelled items: no query has a labelled neighbour. Then no items
 * at all. And an empty batch asks nothing. */
static void test_empty_answers(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, 2, 4), OML_OK);
    const float u[2] = {1, 0}, v[2] = {0, 1};
    put(st, "u", u, NULL);
    put(st, "v", v, NULL);
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    const oml_query q[2] = {{u, 2, -1, NULL}, {v, 1, 1, NULL}};
    oml_classification c[2];
    memset(c, 0x5a, sizeof c);
    assert_int_equal(oml_classify_batch(ix, q, 2, c, NULL), OML_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(c[i].label, OML_LABEL_NONE);
        assert_int_equal(c[i].n_classes, 0);
    }
    oml_index_destroy(ix);

    assert_int_equal(oml_store_delete(st, "u", 1), OML_OK);
    assert_int_equal(oml_store_delete(st, "v", 1), OML_OK);
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    const oml_query q0[2] = {{u, 2, -1, NULL}, {v, 1, -1, NULL}};
    memset(c, 0x5a, sizeof c);
    assert_int_equal(oml_classify_batch(ix, q0, 2, c, NULL), OML_OK);
    assert_int_equal(c[0].label, OML_LABEL_NONE);
    assert_int_equal(c[1].label, OML_LABEL_NONE);
    oml_hit h[2][2];
    oml_hit *out[2] = {h[0], h[1]};
    int32_t n[2] = {7, 7};
    assert_int_equal(oml_retrieve_batch(ix, q0, 2, out, n, NULL), OML_OK);
    assert_int_equal(n[0], 0);
    assert_int_equal(n[1], 0);

    /* m = 0: nothing to do, nothing written (the daemon refuses an empty
     * batch before it gets here). */
    memset(c, 0x5a, sizeof c);
    oml_classification sentinel;
    memset(&sentinel, 0x5a, sizeof sentinel);
    assert_int_equal(oml_classify_batch(ix, q0, 0, c, NULL), OML_OK);
    assert_memory_equal(&c[0], &sentinel, sizeof sentinel);
    assert_int_equal(oml_retrieve_batch(ix, NULL, 0, NULL, NULL, NULL), OML_OK);
    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

/* The first bad query is named; nothing is written. */
static void test_validation(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_index *ix = hand_index(s);
    const float x[2] = {1, 0}, bad[2] = {0, NAN};
    oml_classification c[4], sentinel;
    memset(&sentinel, 0x5a, sizeof sentinel);
    for (int i = 0; i < 4; i++)
        c[i] = sentinel;
    oml_diag d;

    oml_query q[4] = {{x, 3, -1, NULL}, {x, 1, -1, NULL}, {x, 2, -1, NULL}, {x, 0, -1, NULL}};
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify_batch(ix, q, 4, c, &d), OML_EINVAL);
    assert_string_equal(d.field, "queries[3].k");
    q[3].k = OML_SERVE_MAX_K + 1;
    assert_int_equal(oml_classify_batch(ix, q, 4, c, &d), OML_EINVAL);
    assert_string_equal(d.field, "queries[3].k");
    q[3].k = 1;
    q[1].x = bad;
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify_batch(ix, q, 4, c, &d), OML_ENONFINITE);
    assert_string_equal(d.field, "queries[1].features");
    q[1].x = x;
    q[2].exclude_row = 4;
    assert_int_equal(oml_classify_batch(ix, q, 4, c, &d), OML_EINVAL);
    assert_string_equal(d.field, "queries[2].exclude_row");
    q[2].exclude_row = -1;
    for (int i = 0; i < 4; i++)
        assert_memory_equal(&c[i], &sentinel, sizeof sentinel);
    assert_int_equal(oml_classify_batch(ix, q, -1, c, &d), OML_EINVAL);
    assert_int_equal(oml_classify_batch(NULL, q, 4, c, &d), OML_EINVAL);

    oml_retrieve_opts far = {NULL, OML_SERVE_MAX_K, -INFINITY, NULL};
    q[2].opts = &far;
    oml_hit h[4][3];
    oml_hit *out[4] = {h[0], h[1], h[2], h[3]};
    int32_t n[4] = {7, 7, 7, 7};
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_retrieve_batch(ix, q, 4, out, n, &d), OML_EINVAL);
    assert_string_equal(d.field, "queries[2].offset");
    for (int i = 0; i < 4; i++)
        assert_int_equal(n[i], 7);
    /* classify ignores opts: the same queries classify */
    assert_int_equal(oml_classify_batch(ix, q, 4, c, &d), OML_OK);
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_hand),
        cmocka_unit_test(test_retrieve_hand),
        cmocka_unit_test(test_equals_single_random),
        cmocka_unit_test(test_k_beyond_store),
        cmocka_unit_test(test_lists_index),
        cmocka_unit_test(test_empty_answers),
        cmocka_unit_test(test_validation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
