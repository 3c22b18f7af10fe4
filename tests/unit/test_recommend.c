/* test_recommend.c - "more like these, less like those" (src/recommend.c):
 * one positive is exactly a retrieve of it; with negatives each hit's
 * similarity is that of the query built by hand from the examples'
 * embeddings (the unit vector along 2 m+ - m- per head), and the first hit
 * is the nearest row on the heaviest head (its Eq. 27 score is that head's
 * alpha); the filters narrow the search; no positive is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"
#include "rng.h"
#include "serve.h"
#include "testutil.h"

#define N 300
#define DIM 12
#define LAYERS 2
#define EMB 6

typedef struct fixture {
    oml_snapshot *s;
    oml_store *st;
    oml_index *ix;
    float X[N][DIM];
} fixture;

static fixture *make(void)
{
    fixture *f = calloc(1, sizeof *f);
    float alpha[LAYERS + 1] = {1.0f / 6, 2.0f / 6, 3.0f / 6}; /* the last head weighs most */
    f->s = oml_test_snapshot(LAYERS, DIM, 10, EMB, NULL, alpha, 41);
    assert_non_null(f->s);
    assert_int_equal(oml_store_create(&f->st, DIM, N), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 42);
    for (int i = 0; i < N; i++) {
        char id[16];
        snprintf(id, sizeof id, "i%d", i);
        for (int j = 0; j < DIM; j++)
            f->X[i][j] = oml_rng_normal(&r);
        assert_int_equal(oml_store_put(f->st, id, strlen(id), f->X[i], i % 2 ? "odd" : "even", 3 + (i % 2 == 0), NULL, NULL), OML_OK);
    }
    assert_int_equal(oml_index_build(&f->ix, f->s, f->st), OML_OK);
    return f;
}

static void destroy(fixture *f)
{
    oml_index_destroy(f->ix);
    oml_store_destroy(f->st);
    oml_snapshot_release(f->s);
    free(f);
}

static void test_one_positive_is_a_retrieve(void **state)
{
    (void)state;
    fixture *f = make();
    for (int t = 0; t < 20; t++) {
        const float *x = f->X[(t * 37) % N];
        oml_hit a[10], b[10];
        int32_t na = 0, nb = 0;
        assert_int_equal(oml_retrieve(f->ix, x, 10, -1, NULL, a, &na, NULL), OML_OK);
        assert_int_equal(oml_recommend(f->ix, x, 1, NULL, 0, 10, NULL, b, &nb, NULL), OML_OK);
        assert_int_equal(na, nb);
        for (int i = 0; i < na; i++) {
            assert_int_equal(a[i].row, b[i].row);
            assert_true(a[i].score == b[i].score);
            assert_true(a[i].similarity == b[i].similarity);
        }
    }
    destroy(f);
}

static void test_negatives_build_the_query(void **state)
{
    (void)state;
    fixture *f = make();
    const oml_index *ix = f->ix;
    float pos[2][DIM], neg[1][DIM];
    memcpy(pos[0], f->X[3], sizeof pos[0]);
    memcpy(pos[1], f->X[8], sizeof pos[1]);
    memcpy(neg[0], f->X[5], sizeof neg[0]);
    /* The query by hand: the unit vector along 2 m+ - m- on every head. */
    float ep[(LAYERS + 1) * 2 * EMB], en[(LAYERS + 1) * EMB], q[LAYERS + 1][EMB];
    assert_int_equal(oml_snapshot_embed(f->s, &pos[0][0], 2, ep), OML_OK);
    assert_int_equal(oml_snapshot_embed(f->s, &neg[0][0], 1, en), OML_OK);
    for (int h = 0; h <= LAYERS; h++) {
        double norm = 0;
        for (int j = 0; j < EMB; j++) {
            q[h][j] = (ep[(h * 2 + 0) * EMB + j] + ep[(h * 2 + 1) * EMB + j]) - en[h * EMB + j];
            norm += (double)q[h][j] * q[h][j];
        }
        for (int j = 0; j < EMB; j++)
            q[h][j] /= (float)sqrt(norm);
    }
    oml_hit hits[8];
    int32_t n = 0;
    assert_int_equal(oml_recommend(ix, &pos[0][0], 2, &neg[0][0], 1, 8, NULL, hits, &n, NULL),
                     OML_OK);
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++) {
        double sim = 0;
        for (int h = 0; h <= LAYERS; h++) {
            double dot = 0;
            for (int j = 0; j < EMB; j++)
                dot += (double)q[h][j] * oml_index_emb(ix, h, hits[i].row, j);
            sim += (double)f->s->alpha[h] * dot;
        }
        assert_true(fabs(sim - hits[i].similarity) < 1e-4);
    }
    /* The first hit: the row nearest the query on the heaviest head. */
    int best = -1;
    double best_dot = -2;
    for (int row = 0; row < ix->n; row++) {
        double dot = 0;
        for (int j = 0; j < EMB; j++)
            dot += (double)q[LAYERS][j] * oml_index_emb(ix, LAYERS, row, j);
        if (dot > best_dot)
            best_dot = dot, best = row;
    }
    assert_int_equal(hits[0].row, best);
    assert_true(fabsf(hits[0].score - f->s->alpha[LAYERS]) < 1e-6f);

    /* Filters: that row refused, it is not returned; a page skips. */
    uint8_t *allow = malloc((size_t)ix->n);
    memset(allow, 1, (size_t)ix->n);
    allow[best] = 0;
    oml_retrieve_opts opts = {allow, 0, -INFINITY, NULL};
    oml_hit other[8];
    int32_t m = 0;
    assert_int_equal(oml_recommend(ix, &pos[0][0], 2, &neg[0][0], 1, 8, &opts, other, &m, NULL),
                     OML_OK);
    for (int i = 0; i < m; i++)
        assert_int_not_equal(other[i].row, best);
    opts = (oml_retrieve_opts){NULL, 2, -INFINITY, NULL};
    assert_int_equal(oml_recommend(ix, &pos[0][0], 2, &neg[0][0], 1, 6, &opts, other, &m, NULL),
                     OML_OK);
    assert_int_equal(m, 6);
    assert_int_equal(other[0].row, hits[2].row);
    free(allow);
    destroy(f);
}

static void test_refusals(void **state)
{
    (void)state;
    fixture *f = make();
    oml_hit hits[4];
    int32_t n;
    oml_diag d = {0};
    assert_int_equal(oml_recommend(f->ix, NULL, 0, NULL, 0, 4, NULL, hits, &n, &d), OML_EINVAL);
    assert_string_equal(d.field, "positive");
    float bad[DIM];
    memcpy(bad, f->X[0], sizeof bad);
    bad[3] = NAN;
    assert_int_not_equal(oml_recommend(f->ix, f->X[1], 1, bad, 1, 4, NULL, hits, &n, &d), OML_OK);
    assert_int_not_equal(oml_recommend(f->ix, f->X[1], 1, NULL, 0, 0, NULL, hits, &n, &d), OML_OK);
    destroy(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_positive_is_a_retrieve),
        cmocka_unit_test(test_negatives_build_the_query),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
