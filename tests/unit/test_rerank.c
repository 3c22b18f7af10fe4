/* test_rerank.c - answers under a newer model from an older index's
 * candidates (rerank.h): with every row a candidate they are the answers
 * of an index built under the newer model; with fewer, they come from the
 * candidates only, and the allow mask and the page hold. An index with
 * lists proposes by its codes: all lists scanned, the answers are exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rerank.h"
#include "rng.h"
#include "serve.h"
#include "store.h"
#include "testutil.h"

#define DIM 6
#define N 60
#define LAYERS 1

typedef struct fx {
    oml_store *store;
    oml_snapshot *old_snap, *new_snap;
    oml_index *old_ix, *new_ix;
    float x[N][DIM];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(oml_store_create(&f->store, DIM, N), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) {
        char id[16], lab[8];
        snprintf(id, sizeof id, "i%d", i);
        snprintf(lab, sizeof lab, "c%d", i % 3);
        for (int j = 0; j < DIM; j++)
            f->x[i][j] = (float)(i % 3 == j % 3) + 0.6f * oml_rng_normal(&r);
        assert_int_equal(oml_store_put(f->store, id, strlen(id), f->x[i], i % 7 ? lab : NULL,
                                       i % 7 ? strlen(lab) : 0, NULL, NULL),
                         OML_OK);
    }
    const float a_old[2] = {0.5f, 0.5f}, a_new[2] = {0.7f, 0.3f};
    f->old_snap = oml_test_snapshot(LAYERS, DIM, 8, 4, NULL, a_old, 11);
    f->new_snap = oml_test_snapshot(LAYERS, DIM, 8, 4, NULL, a_new, 12);
    assert_int_equal(oml_index_build(&f->old_ix, f->old_snap, f->store), OML_OK);
    assert_int_equal(oml_index_build(&f->new_ix, f->new_snap, f->store), OML_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    oml_index_destroy(f->old_ix);
    oml_index_destroy(f->new_ix);
    oml_snapshot_release(f->old_snap);
    oml_snapshot_release(f->new_snap);
    oml_store_destroy(f->store);
    free(f);
    return 0;
}

/* The candidates of the old index for x with k_c per head, and their
 * features (rows are slots: the store was filled in order). */
static int32_t candidates(fx *f, const float *x, int32_t k_c, int32_t exclude,
                          const uint8_t *allow, int32_t *rows, float *feats)
{
    int32_t m = -1;
    assert_int_equal(oml_rerank_candidates(f->old_ix, x, k_c, exclude, allow, rows, &m, NULL),
                     OML_OK);
    for (int32_t j = 0; j < m; j++) {
        assert_true(j == 0 || rows[j - 1] < rows[j]); /* distinct, ascending */
        assert_true(rows[j] != exclude && (!allow || allow[rows[j]]));
        memcpy(feats + (size_t)j * DIM, f->x[f->old_ix->slots[rows[j]]], sizeof f->x[0]);
    }
    return m;
}

/* Every row a candidate: the old index's candidates re-ranked under the new
 * model answer as the new model's own index does. */
static void test_all_candidates_equal_the_new_index(void **state)
{
    fx *f = *state;
    int32_t rows[2 * N];
    static float feats[2 * N][DIM];
    for (int q = 0; q < N; q += 7) {
        const float *x = f->x[q];
        int32_t m = candidates(f, x, N, q, NULL, rows, &feats[0][0]);
        assert_int_equal(m, N - 1);
        oml_rerank_set c = {rows, &feats[0][0], m};
        oml_classification got, want;
        assert_int_equal(oml_classify_among(f->old_ix, f->new_snap, x, 5, &c, &got, NULL), OML_OK);
        assert_int_equal(oml_classify(f->new_ix, x, 5, q, &want, NULL), OML_OK);
        assert_int_equal(got.label, want.label);
        assert_float_equal(got.score, want.score, 1e-4);
        oml_hit hg[8], hw[8];
        int32_t ng = -1, nw = -1;
        assert_int_equal(oml_retrieve_among(f->old_ix, f->new_snap, x, 8, &c, NULL, hg, &ng, NULL),
                         OML_OK);
        assert_int_equal(oml_retrieve(f->new_ix, x, 8, q, NULL, hw, &nw, NULL), OML_OK);
        assert_int_equal(ng, nw);
        for (int32_t i = 0; i < ng; i++) {
            assert_int_equal(hg[i].row, hw[i].row);
            assert_float_equal(hg[i].score, hw[i].score, 1e-4);
            assert_float_equal(hg[i].similarity, hw[i].similarity, 1e-4);
        }
    }
}

/* Fewer candidates: every answer is one of them; the mask and the page hold. */
static void test_answers_come_from_the_candidates(void **state)
{
    fx *f = *state;
    int32_t rows[2 * 4];
    static float feats[2 * 4][DIM];
    uint8_t allow[N];
    for (int i = 0; i < N; i++)
        allow[i] = i % 2 == 0;
    const float *x = f->x[5];
    int32_t m = candidates(f, x, 4, -1, allow, rows, &feats[0][0]);
    assert_true(m >= 4 && m <= 8);
    oml_rerank_set c = {rows, &feats[0][0], m};
    oml_hit h[8], page[8];
    int32_t n = -1, np = -1;
    assert_int_equal(oml_retrieve_among(f->old_ix, f->new_snap, x, m, &c, NULL, h, &n, NULL),
                     OML_OK);
    assert_int_equal(n, m);
    for (int32_t i = 0; i < n; i++)
        assert_true(allow[h[i].row]);
    oml_retrieve_opts o = {NULL, 2, -INFINITY, NULL};
    assert_int_equal(oml_retrieve_among(f->old_ix, f->new_snap, x, 2, &c, &o, page, &np, NULL),
                     OML_OK);
    assert_int_equal(np, 2);
    oml_hit first4[4];
    int32_t n4 = -1;
    assert_int_equal(oml_retrieve_among(f->old_ix, f->new_snap, x, 4, &c, NULL, first4, &n4, NULL),
                     OML_OK);
    assert_int_equal(page[0].row, first4[2].row);
    assert_int_equal(page[1].row, first4[3].row);
    /* No candidates: classify has no neighbour, retrieve finds nothing. */
    oml_rerank_set none = {rows, &feats[0][0], 0};
    oml_classification cl;
    assert_int_equal(oml_classify_among(f->old_ix, f->new_snap, x, 5, &none, &cl, NULL),
                     OML_EEMPTY);
    assert_int_equal(oml_retrieve_among(f->old_ix, f->new_snap, x, 5, &none, NULL, h, &n, NULL),
                     OML_OK);
    assert_int_equal(n, 0);
    /* A query that is not finite is refused by name. */
    float bad[DIM] = {0, NAN, 0, 0, 0, 0};
    oml_diag d;
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify_among(f->old_ix, f->new_snap, bad, 5, &c, &cl, &d),
                     OML_ENONFINITE);
    assert_string_equal(d.field, "features");
}

/* An old index with inverted lists (index.h) proposes its candidates by
 * the codes' order: with every list scanned and k_c covering every row,
 * the answers under the new model are the new index's exact ones; with
 * k_c = 10 the candidates hold each head's exact 5 nearest under the old
 * model. */
#define NL 400
static void test_candidates_from_lists(void **state)
{
    (void)state;
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, DIM, NL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 5);
    static float x[NL][DIM];
    for (int i = 0; i < NL; i++) {
        char id[16], lab[8];
        snprintf(id, sizeof id, "i%d", i);
        snprintf(lab, sizeof lab, "c%d", i % 3);
        for (int j = 0; j < DIM; j++)
            x[i][j] = (float)(i % 3 == j % 3) + 0.6f * oml_rng_normal(&r);
        assert_int_equal(oml_store_put(st, id, strlen(id), x[i], lab, strlen(lab), NULL, NULL),
                         OML_OK);
    }
    const float a_old[2] = {0.5f, 0.5f}, a_new[2] = {0.7f, 0.3f};
    oml_snapshot *so = oml_test_snapshot(LAYERS, DIM, 8, 4, NULL, a_old, 11);
    oml_snapshot *sn = oml_test_snapshot(LAYERS, DIM, 8, 4, NULL, a_new, 12);
    oml_index *old_ix = NULL, *new_ix = NULL;
    assert_int_equal(oml_index_build(&old_ix, so, st), OML_OK);
    assert_int_equal(oml_index_build(&new_ix, sn, st), OML_OK);
    assert_int_equal(oml_index_add_lists(old_ix), OML_OK);
    assert_non_null(old_ix->hl);
    for (int h = 0; h < old_ix->heads; h++)
        old_ix->hl[h].n_probe = old_ix->n_lists; /* every list: recall must be 1 */
    static int32_t rows[2 * NL];
    static float feats[2 * NL][DIM];
    for (int q = 0; q < NL; q += 37) {
        int32_t m = -1;
        assert_int_equal(oml_rerank_candidates(old_ix, x[q], NL - 1, q, NULL, rows, &m, NULL),
                         OML_OK);
        assert_int_equal(m, NL - 1);
        for (int32_t j = 0; j < m; j++)
            memcpy(feats[j], x[old_ix->slots[rows[j]]], sizeof x[0]);
        oml_rerank_set c = {rows, &feats[0][0], m};
        oml_classification got, want;
        assert_int_equal(oml_classify_among(old_ix, sn, x[q], 5, &c, &got, NULL), OML_OK);
        assert_int_equal(oml_classify(new_ix, x[q], 5, q, &want, NULL), OML_OK);
        assert_int_equal(got.label, want.label);
        assert_float_equal(got.score, want.score, 1e-4);
        oml_hit hg[8], hw[8];
        int32_t ng = -1, nw = -1;
        assert_int_equal(oml_retrieve_among(old_ix, sn, x[q], 8, &c, NULL, hg, &ng, NULL), OML_OK);
        assert_int_equal(oml_retrieve(new_ix, x[q], 8, q, NULL, hw, &nw, NULL), OML_OK);
        assert_int_equal(ng, nw);
        for (int32_t i = 0; i < ng; i++)
            assert_int_equal(hg[i].row, hw[i].row);
        /* Ten per head by the codes hold the old model's exact five. */
        assert_int_equal(oml_rerank_candidates(old_ix, x[q], 10, q, NULL, rows, &m, NULL), OML_OK);
        assert_true(m >= 10 && m <= 10 * old_ix->heads);
        float *e = malloc((size_t)old_ix->heads * (size_t)old_ix->emb * sizeof *e);
        float *scratch = malloc(NL * sizeof *scratch);
        assert_int_equal(oml_snapshot_embed(so, x[q], 1, e), OML_OK);
        for (int h = 0; h < old_ix->heads; h++) {
            oml_neighbor ex[5];
            int32_t ne = oml_index_topk(old_ix, h, e + (size_t)h * (size_t)old_ix->emb, 5, q,
                                        NULL, ex, scratch);
            assert_int_equal(ne, 5);
            for (int32_t i = 0; i < ne; i++) {
                int found = 0;
                for (int32_t j = 0; j < m; j++)
                    found |= rows[j] == ex[i].row;
                assert_true(found);
            }
        }
        free(e);
        free(scratch);
        /* The recall sample of a fresh view counts exactly that, per head:
         * all of them. */
        int64_t hits[OML_MAX_HEADS], total[OML_MAX_HEADS];
        oml_rerank_recall(old_ix, x[q], 5, 10, q, NULL, hits, total);
        for (int h = 0; h < OML_MAX_HEADS; h++) {
            assert_int_equal(total[h], h < old_ix->heads ? 5 : 0);
            assert_int_equal(hits[h], total[h]);
        }
        oml_rerank_recall(new_ix, x[q], 5, 10, q, NULL, hits, total); /* no lists: nothing */
        for (int h = 0; h < OML_MAX_HEADS; h++)
            assert_true(total[h] == 0 && hits[h] == 0);
    }
    /* Scanning one list of 16, the sample sees what the candidates miss. */
    int64_t hits = 0, total = 0;
    for (int h = 0; h < old_ix->heads; h++)
        old_ix->hl[h].n_probe = 1;
    for (int q = 0; q < NL; q += 7) {
        int64_t hq[OML_MAX_HEADS], tq[OML_MAX_HEADS];
        oml_rerank_recall(old_ix, x[q], 10, 10, q, NULL, hq, tq);
        for (int h = 0; h < old_ix->heads; h++) {
            hits += hq[h];
            total += tq[h];
        }
    }
    assert_true(total > 0 && hits < total);
    oml_index_destroy(old_ix);
    oml_index_destroy(new_ix);
    oml_snapshot_release(so);
    oml_snapshot_release(sn);
    oml_store_destroy(st);
}

static int by_row(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The depth counts (daemon depth.h): with every row a deep candidate, each
 * head's k nearest among them under the new model are its exact k (the
 * new model's own index's), and a shallower set holds as many of them as
 * a lookup of each finds. */
static void test_depth_counts(void **state)
{
    fx *f = *state;
    enum { K = 5, SETS = 3 };
    const int32_t depth[SETS] = {2, 6, N};
    int32_t rows[2 * N], set_rows[SETS][2 * N], n_set[SETS];
    const int32_t *sets[SETS];
    static float feats[2 * N][DIM];
    float q[2 * 4], scratch[N];
    int heads = oml_snapshot_heads(f->new_snap);
    for (int qi = 0; qi < N; qi += 5) {
        const float *x = f->x[qi];
        int32_t m = candidates(f, x, N, qi, NULL, rows, &feats[0][0]);
        oml_rerank_set c = {rows, &feats[0][0], m};
        for (int s = 0; s < SETS; s++) {
            assert_int_equal(oml_rerank_candidates(f->old_ix, x, depth[s], qi, NULL, set_rows[s],
                                                   &n_set[s], NULL),
                             OML_OK);
            sets[s] = set_rows[s];
        }
        int64_t hits[SETS], total = -1, want[SETS] = {0}, want_total = 0;
        assert_int_equal(oml_rerank_depth(f->old_ix, f->new_snap, x, K, &c, sets, n_set, SETS,
                                          hits, &total, NULL),
                         OML_OK);
        assert_int_equal(oml_snapshot_embed(f->new_snap, x, 1, q), OML_OK);
        for (int h = 0; h < heads; h++) {
            oml_neighbor nb[K];
            int32_t n = oml_index_topk(f->new_ix, h, q + (size_t)h * (size_t)f->new_ix->emb, K, qi,
                                       NULL, nb, scratch);
            want_total += n;
            for (int32_t j = 0; j < n; j++)
                for (int s = 0; s < SETS; s++)
                    want[s] += bsearch(&nb[j].row, sets[s], (size_t)n_set[s], sizeof(int32_t),
                                       by_row) != NULL;
        }
        assert_int_equal(total, want_total);
        assert_int_equal(total, heads * K);
        for (int s = 0; s < SETS; s++)
            assert_int_equal(hits[s], want[s]);
        assert_int_equal(hits[SETS - 1], total); /* every row: every neighbour */
        assert_true(hits[0] < total);            /* 2 a head cannot hold 5 a head */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_all_candidates_equal_the_new_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_answers_come_from_the_candidates, setup, teardown),
        cmocka_unit_test(test_candidates_from_lists),
        cmocka_unit_test_setup_teardown(test_depth_counts, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
