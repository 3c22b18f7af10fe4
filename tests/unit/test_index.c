/* test_index.c - the embedded item index: exact top-k, ties, exclusion,
 * tombstones, ownership, and agreement with a naive full sort.
 *
 * Hand-worked model (layers = 1, dim = hidden = emb = 2, mu = 0, W(1) = I,
 * Theta(0) = Theta(1) = I): head 0 is f0(x) = x / ||x||, head 1 is
 * f1(x) = ReLU(x) / ||ReLU(x)|| (the zero vector when ReLU(x) = 0, whose
 * distance to every unit vector is sqrt(2)).
 *
 * Items (row = slot order):  0 a (1,0) red    1 b (0,1) blue   2 c (1,1) red
 *                            3 d (-1,0) blue  4 e (2,0) none   5 f (0.6,0.8) green
 * Query x = (1,0), f0 = f1 = (1,0). D = sqrt(2 - 2 cos):
 *   head 0: a 0, b sqrt(2), c sqrt(2 - sqrt(2)) = 0.76536686, d 2, e 0,
 *           f sqrt(2 - 1.2) = 0.89442719  ->  order a e c f b d
 *   head 1: as head 0 except d, whose ReLU is 0: D = sqrt(2), tied with b
 *           ->  order a e c f b d (b before d: smaller row). */
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
#include "testutil.h"

#define D_AC 0.76536686f /* sqrt(2 - sqrt(2)) */
#define D_AF 0.89442719f /* sqrt(0.8) */
#define SQRT2 1.41421356f

/* Snapshot with the given shape; params from `p` (lay.count floats) or, if
 * NULL, Gaussian from seed. Equal hedge weights unless alpha is given. */
static oml_snapshot *make_snap(int32_t layers, int32_t dim, int32_t hidden, int32_t emb,
                               const float *p, const float *alpha, uint64_t seed)
{
    float a[OML_MAX_LAYERS + 1];
    for (int l = 0; l <= layers; l++)
        a[l] = alpha ? alpha[l] : 1.0f / (float)(layers + 1);
    oml_snapshot *s = oml_test_snapshot(layers, dim, hidden, emb, p, a, seed);
    assert_non_null(s);
    return s;
}

/* The hand-worked model of the file comment. */
static oml_snapshot *hand_snap(void)
{
    /* mu (2) | W(1) (2x2) | Theta(0) (2x2) | Theta(1) (2x2) */
    static const float p[14] = {0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1};
    oml_config c;
    oml_config_preset(&c, "paper", 2);
    c.layers = 1, c.hidden = 2, c.emb = 2;
    oml_net_layout lay;
    oml_net_layout_init(&lay, &c);
    assert_int_equal(lay.count, 14);
    assert_int_equal(lay.w[1], 2);
    assert_int_equal(lay.theta[0], 6);
    assert_int_equal(lay.theta[1], 10);
    return make_snap(1, 2, 2, 2, p, NULL, 0);
}

static void put(oml_store *st, const char *id, float x0, float x1, const char *label)
{
    float x[2] = {x0, x1};
    assert_int_equal(oml_store_put(st, id, strlen(id), x, label, label ? strlen(label) : 0,
                                   NULL, NULL),
                     OML_OK);
}

static oml_store *hand_store(void)
{
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, 2, 64), OML_OK);
    put(st, "a", 1, 0, "red");
    put(st, "b", 0, 1, "blue");
    put(st, "c", 1, 1, "red");
    put(st, "d", -1, 0, "blue");
    put(st, "e", 2, 0, NULL);
    put(st, "f", 0.6f, 0.8f, "green");
    return st;
}

static void expect(const oml_neighbor *nb, int32_t got, const int32_t *rows, const float *dists,
                   int32_t want)
{
    assert_int_equal(got, want);
    for (int32_t i = 0; i < want; i++) {
        assert_int_equal(nb[i].row, rows[i]);
        assert_float_equal(nb[i].dist, dists[i], 1e-6);
    }
}

static void test_topk_hand(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_store *st = hand_store();
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    assert_int_equal(ix->n, 6);
    assert_int_equal(ix->heads, 2);
    assert_int_equal(ix->emb, 2);
    assert_int_equal(ix->n_labels, 3);
    assert_string_equal(oml_index_row_id(ix, st, 2, NULL), "c");
    size_t len2;
    oml_index_row_id(ix, st, 2, &len2);
    assert_int_equal(len2, 1);
    assert_int_equal(ix->labels[4], OML_LABEL_NONE);
    assert_string_equal(ix->label_names[ix->labels[5]], "green");
    /* f1(d) is the zero vector: ReLU(-1, 0) = 0. */
    assert_true(oml_index_emb(ix, 1, 3, 0) == 0.0f && oml_index_emb(ix, 1, 3, 1) == 0.0f);

    const float q[2] = {1, 0};
    oml_neighbor nb[8];
    float scratch[6];

    /* Full order in both heads; in head 1, b (row 1) and d (row 3) are both
     * at exactly sqrt(2) and the smaller row comes first. */
    const int32_t all_rows[6] = {0, 4, 2, 5, 1, 3};
    const float all0[6] = {0, 0, D_AC, D_AF, SQRT2, 2.0f};
    const float all1[6] = {0, 0, D_AC, D_AF, SQRT2, SQRT2};
    expect(nb, oml_index_topk(ix, 0, q, 6, -1, NULL, nb, scratch), all_rows, all0, 6);
    expect(nb, oml_index_topk(ix, 1, q, 6, -1, NULL, nb, scratch), all_rows, all1, 6);
    assert_true(nb[4].dist == nb[5].dist); /* a real tie, not a near one */
    assert_true(nb[0].dist == 0.0f && nb[1].dist == 0.0f);

    /* Ties at the cut: k = 1 keeps a (row 0) over e (row 4) at D = 0, and
     * k = 5 in head 1 keeps b (row 1) over d (row 3) at D = sqrt(2). */
    expect(nb, oml_index_topk(ix, 0, q, 1, -1, NULL, nb, scratch), all_rows, all0, 1);
    expect(nb, oml_index_topk(ix, 1, q, 5, -1, NULL, nb, scratch), all_rows, all1, 5);

    /* Excluding row 0 shifts everything up by one. */
    expect(nb, oml_index_topk(ix, 0, q, 3, 0, NULL, nb, scratch), all_rows + 1, all0 + 1, 3);
    /* Excluding a row that would be cut makes no difference. */
    expect(nb, oml_index_topk(ix, 0, q, 2, 3, NULL, nb, scratch), all_rows, all0, 2);
    /* k beyond n returns n; k = 0 returns nothing. */
    expect(nb, oml_index_topk(ix, 0, q, 8, -1, NULL, nb, scratch), all_rows, all0, 6);
    assert_int_equal(oml_index_topk(ix, 0, q, 0, -1, NULL, nb, scratch), 0);

    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

static void test_deleted_items_absent(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_store *st = hand_store();
    assert_int_equal(oml_store_delete(st, "c", 1), OML_OK);
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK); /* the gather path: a hole */
    assert_int_equal(ix->n, 5);
    const uint32_t slots[5] = {0, 1, 3, 4, 5};
    const char *ids[5] = {"a", "b", "d", "e", "f"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(ix->slots[i], slots[i]);
        assert_string_equal(oml_index_row_id(ix, st, i, NULL), ids[i]);
        assert_int_equal(oml_index_row_of_slot(ix, slots[i]), i);
    }
    assert_int_equal(oml_index_row_of_slot(ix, 2), -1);
    assert_int_equal(oml_index_row_of_slot(ix, 6), -1);
    assert_int_equal(oml_index_row_of_slot(ix, 4000000000u), -1);
    /* Embeddings of the rows after the hole are the right items: d = (-1, 0). */
    assert_float_equal(oml_index_emb(ix, 0, 2, 0), -1.0f, 1e-7);
    assert_float_equal(oml_index_emb(ix, 0, 2, 1), 0.0f, 1e-7);
    /* f (row 4) in head 0 is (0.6, 0.8). */
    assert_float_equal(oml_index_emb(ix, 0, 4, 0), 0.6f, 1e-6);
    assert_float_equal(oml_index_emb(ix, 0, 4, 1), 0.8f, 1e-6);

    const float q[2] = {1, 0};
    oml_neighbor nb[8];
    float scratch[6]; /* room for the rebuilt index below */
    const int32_t rows[5] = {0, 3, 4, 1, 2}; /* a e f b d: c is gone */
    const float dists[5] = {0, 0, D_AF, SQRT2, 2.0f};
    expect(nb, oml_index_topk(ix, 0, q, 8, -1, NULL, nb, scratch), rows, dists, 5);
    oml_index_destroy(ix);

    /* Re-putting c reuses the free slot (2), its row again. */
    put(st, "c", 1, 1, "red");
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    assert_int_equal(ix->n, 6);
    assert_int_equal(ix->slots[2], 2);
    assert_int_equal(ix->slots[5], 5);
    assert_int_equal(oml_index_row_of_slot(ix, 2), 2);
    assert_int_equal(oml_index_row_of_slot(ix, 6), -1);
    assert_int_equal(oml_index_topk(ix, 0, q, 3, -1, NULL, nb, scratch), 3);
    assert_int_equal(nb[2].row, 2);
    assert_float_equal(nb[2].dist, D_AC, 1e-6);
    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

static void test_index_owns_its_data(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_store *st = hand_store();
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    assert_int_equal(atomic_load(&s->_refs), 2);
    /* Drop the store and our snapshot reference: the index must still serve
     * (ASan would flag any pointer into either). */
    oml_store_destroy(st);
    oml_snapshot_release(s);
    assert_ptr_equal(ix->snap, s);
    assert_int_equal(atomic_load(&ix->snap->_refs), 1);
    assert_int_equal(ix->slots[0], 0); /* its rows are named by slot, */
    assert_int_equal(ix->gens[5], 0);  /* at the generation gathered */
    assert_string_equal(ix->label_names[0], "red");
    assert_string_equal(ix->label_names[1], "blue");
    assert_string_equal(ix->label_names[2], "green");
    float f[4];
    const float x[2] = {3, 4};
    assert_int_equal(oml_snapshot_embed(ix->snap, x, 1, f), OML_OK);
    assert_float_equal(f[0], 0.6f, 1e-6);
    oml_neighbor nb[1];
    float scratch[6];
    assert_int_equal(oml_index_topk(ix, 0, f, 1, -1, NULL, nb, scratch), 1);
    assert_int_equal(nb[0].row, 5); /* f = (0.6, 0.8) is (3, 4) normalised */
    assert_float_equal(nb[0].dist, 0.0f, 1e-6);
    oml_index_destroy(ix); /* releases the last reference */
    oml_index_destroy(NULL);
}

static void test_empty_and_mismatch(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap();
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, 2, 8), OML_OK);
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    assert_int_equal(ix->n, 0);
    const float q[2] = {1, 0};
    oml_neighbor nb[4];
    float scratch[1];
    assert_int_equal(oml_index_topk(ix, 0, q, 4, -1, NULL, nb, scratch), 0);
    assert_int_equal(oml_index_row_of_slot(ix, 0), -1);
    oml_index_destroy(ix);

    /* Every item deleted: also empty, but the labels are still known. */
    put(st, "a", 1, 0, "red");
    assert_int_equal(oml_store_delete(st, "a", 1), OML_OK);
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    assert_int_equal(ix->n, 0);
    assert_int_equal(ix->n_labels, 1);
    assert_string_equal(ix->label_names[0], "red");
    oml_index_destroy(ix);
    oml_store_destroy(st);

    /* A store of another dimension is refused and *out is not written. */
    assert_int_equal(oml_store_create(&st, 3, 8), OML_OK);
    ix = (oml_index *)(uintptr_t)0x1;
    assert_int_equal(oml_index_build(&ix, s, st), OML_EDIM);
    assert_true(ix == (oml_index *)(uintptr_t)0x1);
    oml_store_destroy(st);
    assert_int_equal(atomic_load(&s->_refs), 1); /* no reference leaked */
    oml_snapshot_release(s);
}

/* ---- agreement with a naive full sort on a random model ---- */

typedef struct naive_nb {
    int32_t row;
    float dist;
} naive_nb;

static int naive_cmp(const void *pa, const void *pb)
{
    const naive_nb *a = pa, *b = pb;
    if (a->dist != b->dist)
        return a->dist < b->dist ? -1 : 1;
    return a->row < b->row ? -1 : a->row > b->row;
}

/* oml_index_sel fed the dot products dots (n) in blocks of 1 to 97 rows,
 * last block first, into nb (k): the count. */
static int32_t select_in_blocks(const oml_index *ix, int h, const float *q, float *dots, int32_t k,
                                int32_t exclude, oml_neighbor *nb)
{
    oml_neighbor *approx = malloc(sizeof *approx * (size_t)k);
    assert_non_null(approx);
    oml_index_sel sel;
    oml_index_sel_init(&sel, k, approx, nb);
    for (int32_t end = ix->n, len = 1; end > 0; len = len % 97 + 1) {
        int32_t r0 = end - len > 0 ? end - len : 0;
        oml_index_sel_feed(ix, h, q, dots + r0, r0, end - r0, exclude, NULL, &sel);
        end = r0;
    }
    free(approx);
    return oml_index_sel_finish(&sel);
}

/* N items (a quarter exact duplicates, tombstones), Q queries: every
 * selection path against a full sort. */
static void topk_vs_naive(int N, int Q)
{
    enum { DIM = 8 };
    oml_snapshot *s = make_snap(2, DIM, 6, 4, NULL, NULL, 7);
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, DIM, (uint32_t)N), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 11);
    float (*X)[DIM] = malloc(sizeof *X * (size_t)N);
    assert_non_null(X);
    char id[32];
    for (int i = 0; i < N; i++) {
        if (i >= 10 && i % 4 == 0) /* a quarter are exact duplicates: ties */
            memcpy(X[i], X[oml_rng_below(&r, (uint64_t)i)], sizeof X[i]);
        else
            for (int j = 0; j < DIM; j++)
                X[i][j] = oml_rng_normal(&r);
        snprintf(id, sizeof id, "item-%d", i);
        assert_int_equal(oml_store_put(st, id, strlen(id), X[i], NULL, 0, NULL, NULL), OML_OK);
    }
    for (int i = 0; i < N; i += 9) { /* tombstones */
        snprintf(id, sizeof id, "item-%d", i);
        assert_int_equal(oml_store_delete(st, id, strlen(id)), OML_OK);
    }
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    int32_t n = ix->n, e = ix->emb;
    assert_int_equal(n, N - (N + 8) / 9);

    /* The gathered embeddings equal one-row embeddings up to BLAS rounding. */
    float f[3 * 4];
    for (int32_t row = 0; row < n; row += 17) {
        assert_int_equal(oml_snapshot_embed(s, X[ix->slots[row]], 1, f), OML_OK);
        for (int h = 0; h < ix->heads; h++)
            for (int32_t j = 0; j < e; j++)
                assert_float_equal(f[h * e + j], oml_index_emb(ix, h, row, j), 1e-5);
    }

    naive_nb *all = malloc(sizeof *all * (size_t)n);
    oml_neighbor *nb = malloc(sizeof *nb * (size_t)n);
    oml_neighbor *nb2 = malloc(sizeof *nb2 * (size_t)n);
    float *scratch = malloc(sizeof *scratch * (size_t)n);
    float *dots = malloc(sizeof *dots * (size_t)n);
    assert_non_null(dots);
    assert_non_null(all);
    assert_non_null(nb);
    assert_non_null(nb2);
    assert_non_null(scratch);
    const int32_t ks[4] = {1, 7, 50, 1000};
    int ties_seen = 0;
    for (int t = 0; t < Q; t++) {
        float x[DIM];
        if (t % 2 == 0) { /* half the queries sit on a stored item */
            memcpy(x, X[oml_rng_below(&r, N)], sizeof x);
        } else {
            for (int j = 0; j < DIM; j++)
                x[j] = oml_rng_normal(&r);
        }
        assert_int_equal(oml_snapshot_embed(s, x, 1, f), OML_OK);
        int32_t exclude = t % 3 == 0 ? (int32_t)oml_rng_below(&r, (uint64_t)n) : -1;
        for (int h = 0; h < ix->heads; h++) {
            const float *q = f + h * e;
            int32_t m = 0;
            for (int32_t row = 0; row < n; row++) {
                if (row == exclude)
                    continue;
                double dot = 0;
                float er[64];
                assert_true(e <= 64);
                for (int32_t j = 0; j < e; j++) {
                    er[j] = oml_index_emb(ix, h, row, j);
                    dot += (double)q[j] * er[j];
                }
                all[m].row = row;
                all[m].dist = oml_index_dist(q, er, e);
                /* The naive formula agrees to float accuracy. */
                assert_float_equal(all[m].dist, sqrt(fmax(0.0, 2.0 - 2.0 * dot)), 2e-3);
                m++;
            }
            qsort(all, (size_t)m, sizeof *all, naive_cmp);
            for (int i = 1; i < m; i++)
                ties_seen += all[i].dist == all[i - 1].dist;
            for (int ki = 0; ki < 4; ki++) {
                int32_t k = ks[ki], want = k < m ? k : m;
                int32_t got = oml_index_topk(ix, h, q, k, exclude, NULL, nb, scratch);
                assert_int_equal(got, want);
                for (int32_t i = 0; i < want; i++) {
                    assert_int_equal(nb[i].row, all[i].row);
                    assert_true(nb[i].dist == all[i].dist);
                }
                /* Selection from differently rounded dot products (double
                 * dots perturbed by +-1 ulp) gives the identical answer. */
                for (int32_t row = 0; row < n; row++) {
                    double dot = 0;
                    for (int32_t j = 0; j < e; j++)
                        dot += (double)q[j] * oml_index_emb(ix, h, row, j);
                    float fd = (float)dot;
                    scratch[row] = row % 2 ? nextafterf(fd, 2.0f) : nextafterf(fd, -2.0f);
                }
                memcpy(dots, scratch, sizeof *dots * (size_t)n);
                got = oml_index_select(ix, h, q, scratch, k, exclude, NULL, nb2);
                assert_int_equal(got, want);
                assert_memory_equal(nb, nb2, sizeof *nb * (size_t)want);
                /* So does selection in blocks of rows, in any order. */
                got = select_in_blocks(ix, h, q, dots, k, exclude, nb2);
                assert_int_equal(got, want);
                assert_memory_equal(nb, nb2, sizeof *nb * (size_t)want);
            }
        }
    }
    assert_true(ties_seen > 0); /* the duplicates really produced ties */
    free(X);
    free(dots);
    free(all);
    free(nb);
    free(nb2);
    free(scratch);
    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

/* 400 items, and 9,000 (past a selection's 4,096-row segments). */
static void test_topk_matches_naive(void **state)
{
    (void)state;
    topk_vs_naive(400, 40);
    topk_vs_naive(9000, 4);
}

static void test_dist(void **state)
{
    (void)state;
    const float a[2] = {1, 0}, b[2] = {0, 1}, c[2] = {-1, 0}, z[2] = {0, 0};
    const float u[2] = {0.70710677f, 0.70710677f};
    assert_true(oml_index_dist(a, a, 2) == 0.0f);
    assert_true(oml_index_dist(u, u, 2) == 0.0f); /* not the 2e-4 of 2 - 2 u.u */
    assert_float_equal(oml_index_dist(a, b, 2), SQRT2, 1e-7);
    assert_float_equal(oml_index_dist(a, c, 2), 2.0f, 1e-7);
    assert_float_equal(oml_index_dist(a, u, 2), D_AC, 1e-7);
    assert_float_equal(oml_index_dist(a, z, 2), SQRT2, 1e-7); /* zero row: cos = 0 */
    assert_float_equal(oml_index_dist(z, z, 2), SQRT2, 1e-7);
}

/* A store of n items PREFIX<i> (labelled label, NULL: none) whose dim
 * features are standard normal draws from seed. */
static oml_store *random_store(int dim, int n, uint64_t seed, const char *prefix,
                               const char *label)
{
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, dim, (uint32_t)n), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, seed);
    float *x = malloc((size_t)dim * sizeof *x);
    assert_non_null(x);
    char id[32];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < dim; j++)
            x[j] = oml_rng_normal(&r);
        snprintf(id, sizeof id, "%s%d", prefix, i);
        assert_int_equal(oml_store_put(st, id, strlen(id), x, label, label ? strlen(label) : 0,
                                       NULL, NULL), OML_OK);
    }
    free(x);
    return st;
}

/* More rows than one embedding chunk, with holes in some chunks only:
 * every row must still hold the embedding of its own slot's features. */
static void test_build_chunks_with_holes(void **state)
{
    (void)state;
    enum { DIM = 5, N = OML_INDEX_GATHER_ROWS + 1500, G = OML_INDEX_GATHER_ROWS };
    oml_snapshot *s = make_snap(2, DIM, 7, 3, NULL, NULL, 21);
    oml_store *st = random_store(DIM, N, 4, "", NULL);
    char id[32];
    const int holes[3] = {5, G + 4, G + 5}; /* the second gather starts at slot G + 1 */
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof id, "%d", holes[i]);
        assert_int_equal(oml_store_delete(st, id, strlen(id)), OML_OK);
    }
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    assert_int_equal(ix->n, N - 3);
    float f[3 * 3];
    for (int32_t row = 0; row < ix->n; row++) {
        uint32_t slot = ix->slots[row];
        assert_int_equal(slot, (uint32_t)row + (row >= 5) + 2 * (row >= G + 3));
        snprintf(id, sizeof id, "%u", slot);
        assert_string_equal(oml_index_row_id(ix, st, row, NULL), id);
        assert_int_equal(oml_snapshot_embed(s, oml_store_features(st, slot), 1, f), OML_OK);
        for (int h = 0; h < 3; h++)
            for (int j = 0; j < 3; j++)
                assert_float_equal(oml_index_emb(ix, h, row, j), f[h * 3 + j], 1e-5);
    }
    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

/* Item i's features in the builder test: a function of (i, version). */
static void feat(float *x, int dim, int i, int version)
{
    for (int j = 0; j < dim; j++)
        x[j] = sinf((float)(i * 7 + j * 3 + version * 11)) + (float)version;
}

/* Items PREFIX<first> .. PREFIX<first + count - 1> with feat(i, 0), labelled label. */
static void put_items(oml_store *st, int first, int count, const char *prefix, const char *label)
{
    char id[32];
    float x[8];
    assert_true(oml_store_dim(st) <= 8);
    for (int i = first; i < first + count; i++) {
        feat(x, oml_store_dim(st), i, 0);
        snprintf(id, sizeof id, "%s%d", prefix, i);
        assert_int_equal(oml_store_put(st, id, strlen(id), x, label, strlen(label), NULL, NULL),
                         OML_OK);
    }
}

static void expect_row(const oml_index *ix, oml_snapshot *s, int32_t row, const float *x)
{
    float f[3 * 3];
    assert_int_equal(oml_snapshot_embed(s, x, 1, f), OML_OK);
    for (int h = 0; h < 3; h++)
        for (int j = 0; j < 3; j++) {
            assert_float_equal(oml_index_emb(ix, h, row, j), f[h * 3 + j], 1e-5);
        }
}

/* The builder against a store that changes between gathers (the indexer
 * lets go of the store's lock while it embeds): an item is indexed as its
 * slot was when a gather visited it, so changes to visited slots wait for
 * the next build and changes ahead of the gathers are in this one. */
static void test_builder_while_the_store_changes(void **state)
{
    (void)state;
    enum { DIM = 4, N = 3 * OML_INDEX_GATHER_ROWS + 100 };
    oml_snapshot *s = make_snap(2, DIM, 6, 3, NULL, NULL, 8);
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, DIM, N + 10), OML_OK);
    char id[32];
    float x[DIM];
    put_items(st, 0, N, "i", "old");
    oml_index_builder b;
    assert_int_equal(oml_index_builder_init(&b, s, DIM), OML_OK);
    assert_int_equal(oml_index_builder_gather(&b, st), 1); /* slots 0..4095 */
    assert_int_equal(b.pending, OML_INDEX_GATHER_ROWS);
    assert_int_equal(oml_index_builder_gather(&b, st), OML_EINVAL); /* embed first */
    assert_int_equal(oml_index_builder_embed(&b), OML_OK);

    /* Behind the gathers: i10 changes, i20 leaves; both stay as visited. */
    feat(x, DIM, 10, 1);
    assert_int_equal(oml_store_put(st, "i10", 3, x, "old", 3, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_delete(st, "i20", 3), OML_OK);
    /* Ahead of them: i5000 changes (and takes a new label), i6000 leaves,
     * a new item comes. */
    feat(x, DIM, 5000, 1);
    assert_int_equal(oml_store_put(st, "i5000", 5, x, "new", 3, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_delete(st, "i6000", 5), OML_OK);
    feat(x, DIM, N, 0);
    uint32_t late_slot;
    assert_int_equal(oml_store_put(st, "late", 4, x, NULL, 0, &late_slot, NULL), OML_OK);
    assert_int_equal(late_slot, 20); /* the lowest free slot: behind the gathers */

    int more;
    while ((more = oml_index_builder_gather(&b, st)) >= 0) {
        assert_int_equal(oml_index_builder_embed(&b), OML_OK);
        if (more == 0)
            break;
    }
    oml_index *ix = NULL;
    assert_int_equal(oml_index_builder_finish(&b, st, &ix), OML_OK);
    oml_index_builder_free(&b);

    assert_int_equal(ix->n, N - 1); /* i6000 left ahead; late came behind */
    for (int32_t row = 0; row < ix->n; row++) {
        int i = row + (row >= 6000);
        snprintf(id, sizeof id, "i%d", i);
        size_t len = 0;
        const char *now_id = oml_index_row_id(ix, st, row, &len);
        if (i == 20) { /* deleted behind the gathers, its slot taken by late: no name */
            assert_null(now_id);
            assert_false(oml_index_row_current(ix, st, row));
        } else {
            assert_string_equal(now_id, id);
            assert_int_equal(len, strlen(id));
        }
        assert_int_equal(ix->slots[row], (uint32_t)i);
        feat(x, DIM, i, i == 5000);
        expect_row(ix, s, row, x); /* i10 and i20 as they were */
        const char *lab = ix->label_names[ix->labels[row]];
        assert_string_equal(lab, i == 5000 ? "new" : "old");
    }
    /* The whole store built at once holds every change. */
    oml_index *now = NULL;
    assert_int_equal(oml_index_build(&now, s, st), OML_OK);
    assert_int_equal(now->n, N - 1);
    assert_string_equal(oml_index_row_id(now, st, 20, NULL), "late");
    oml_index_destroy(now);
    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

/* Whether a and b hold the same rows (slots, generations), labels and embeddings, bit for bit. */
static void assert_same_index(const oml_index *a, const oml_index *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->heads, b->heads);
    assert_int_equal(a->emb, b->emb);
    for (int32_t i = 0; i < a->n; i++) {
        assert_int_equal(a->gens[i], b->gens[i]);
        assert_int_equal(a->slots[i], b->slots[i]);
        assert_string_equal(a->label_names[a->labels[i]], b->label_names[b->labels[i]]);
    }
    size_t ne = (size_t)a->heads * (size_t)a->n * (size_t)a->emb;
    assert_memory_equal(a->emb_cols, b->emb_cols, ne * sizeof(float));
}

static oml_index *build_with(oml_index_builder *b, oml_snapshot *s, const oml_store *st)
{
    oml_index *ix = NULL;
    assert_int_equal(oml_index_builder_run(b, s, st, &ix), OML_OK);
    oml_index_builder_release_snapshot(b);
    assert_null(b->snap);
    return ix;
}

/* The builder writes the embeddings straight into the index's columns,
 * with room for the items the build began with and a few more: puts ahead
 * of the gathers past that room move the columns to a larger buffer
 * mid-build, and the index is still the one a build of the final store
 * gives (the same gathers, so the same GEMM blocks: bit for bit), its
 * columns closed up to n rows. */
static void test_builder_columns_grow(void **state)
{
    (void)state;
    enum { DIM = 4, N0 = OML_INDEX_GATHER_ROWS + 50, MORE = 2 * OML_INDEX_GATHER_ROWS + 7 };
    oml_snapshot *s = make_snap(2, DIM, 6, 3, NULL, NULL, 5);
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, DIM, N0 + MORE), OML_OK);
    float x[DIM];
    put_items(st, 0, N0, "g", "a");
    oml_index_builder b;
    assert_int_equal(oml_index_builder_init(&b, s, DIM), OML_OK);
    assert_int_equal(oml_index_builder_gather(&b, st), 1);
    assert_int_equal(oml_index_builder_embed(&b), OML_OK);
    size_t room = b.cap_cols;
    assert_true(room >= (size_t)N0 && room < (size_t)(N0 + MORE));
    put_items(st, N0, MORE, "g", "b"); /* ahead of the gathers */
    int more = 1;
    while (more > 0) {
        more = oml_index_builder_gather(&b, st);
        assert_true(more >= 0);
        assert_int_equal(oml_index_builder_embed(&b), OML_OK);
    }
    assert_true(b.cap_cols > room); /* the columns moved */
    oml_index *ix = NULL, *whole = NULL;
    assert_int_equal(oml_index_builder_finish(&b, st, &ix), OML_OK);
    assert_null(b.cols); /* handed over, not copied */
    oml_index_builder_free(&b);
    assert_int_equal(ix->n, N0 + MORE);
    for (int32_t row = 0; row < ix->n; row += 97) {
        feat(x, DIM, row, 0);
        expect_row(ix, s, row, x);
    }
    assert_int_equal(oml_index_build(&whole, s, st), OML_OK);
    assert_same_index(ix, whole);
    oml_index_destroy(whole);
    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

/* A build run on several threads (a start's first view) is the serial
 * build bit for bit: the same blocks embedded by the same calls, whatever
 * thread takes each; each head's lists are the same built alone or beside
 * the others, and calibrated on the workers they scan as many lists.
 * Three gathers and a part, with holes. */
static void test_threaded_build_same_bits(void **state)
{
    (void)state;
    enum { DIM = 16, N = 3 * OML_INDEX_GATHER_ROWS + 777 };
    oml_snapshot *s = make_snap(2, DIM, 24, 12, NULL, NULL, 8);
    oml_store *st = random_store(DIM, N, 12, "t", "a"); /* isotropic: many lists to calibrate */
    char id[32];
    for (int i = 3; i < N; i += 1001) {
        snprintf(id, sizeof id, "t%d", i);
        assert_int_equal(oml_store_delete(st, id, strlen(id)), OML_OK);
    }
    oml_index *serial = NULL;
    assert_int_equal(oml_index_build(&serial, s, st), OML_OK);
    assert_int_equal(oml_index_add_lists(serial), OML_OK);
    assert_int_equal(oml_index_calibrate(serial, 0.95), OML_OK);
    for (int threads = 2; threads <= 3; threads++) {
        oml_index_builder b = {0};
        oml_index *ix = NULL;
        assert_int_equal(oml_index_builder_run_threads(&b, s, st, threads, &ix), OML_OK);
        oml_index_builder_free(&b);
        assert_same_index(ix, serial);
        assert_int_equal(oml_index_add_lists_threads(ix, threads), OML_OK);
        assert_int_equal(ix->n_lists, serial->n_lists);
        size_t n = (size_t)ix->n, e = (size_t)ix->emb, L = (size_t)ix->n_lists;
        for (int h = 0; h < ix->heads; h++) {
            const oml_hlist *a = &ix->hl[h], *z = &serial->hl[h];
            assert_memory_equal(a->centroids, z->centroids, L * e * sizeof(float));
            assert_memory_equal(a->rows, z->rows, n * sizeof(int32_t));
            assert_memory_equal(a->codes, z->codes, n * e);
            assert_memory_equal(a->scale, z->scale, n * sizeof *a->scale);
        }
        /* the calibration's searches on the workers: the same lists scanned */
        assert_int_equal(oml_index_calibrate_threads(ix, 0.95, threads), OML_OK);
        for (int h = 0; h < ix->heads; h++) {
            assert_int_equal(ix->hl[h].n_probe, serial->hl[h].n_probe);
            assert_int_equal(ix->hl[h].shared_from, serial->hl[h].shared_from);
            assert_int_equal(ix->hl[h].donor, serial->hl[h].donor);
        }
        oml_index_destroy(ix);
    }
    oml_index_destroy(serial);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

/* A builder restarted keeps its buffers, and what it builds next is what
 * a new builder builds: after a larger store, a smaller one (no rows of
 * the last build left over), and for another width (buffers made anew). */
static void test_builder_restart(void **state)
{
    (void)state;
    enum { DIM = 5, N = OML_INDEX_GATHER_ROWS + 300 };
    oml_snapshot *s = make_snap(2, DIM, 6, 3, NULL, NULL, 3);
    oml_snapshot *wide = make_snap(2, DIM, 6, 4, NULL, NULL, 4);
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, DIM, N), OML_OK);
    char id[32];
    float x[DIM];
    for (int i = 0; i < N; i++) {
        feat(x, DIM, i, 0);
        snprintf(id, sizeof id, "item-%d", i);
        assert_int_equal(oml_store_put(st, id, strlen(id), x, i % 2 ? "odd" : "even", i % 2 ? 3 : 4,
                                       NULL, NULL), OML_OK);
    }
    oml_index_builder b = {0};
    oml_index *first = build_with(&b, s, st);
    size_t kept = oml_index_builder_bytes(&b);
    assert_true(kept > 0);
    for (int i = 0; i < N; i += 2) { /* half the items leave */
        snprintf(id, sizeof id, "item-%d", i);
        assert_int_equal(oml_store_delete(st, id, strlen(id)), OML_OK);
    }
    oml_index *again = build_with(&b, s, st), *fresh = NULL;
    assert_int_equal(oml_index_builder_bytes(&b), kept); /* nothing grew */
    assert_int_equal(again->n, N / 2);
    assert_int_equal(oml_index_build(&fresh, s, st), OML_OK);
    assert_same_index(again, fresh);
    oml_index_destroy(fresh);
    fresh = NULL;

    oml_index *w = build_with(&b, wide, st);
    assert_int_equal(w->emb, 4);
    assert_int_equal(oml_index_build(&fresh, wide, st), OML_OK);
    assert_same_index(w, fresh);
    oml_index_builder_free(&b);
    oml_index_destroy(fresh);
    oml_index_destroy(w);
    oml_index_destroy(again);
    oml_index_destroy(first);
    oml_store_destroy(st);
    oml_snapshot_release(wide);
    oml_snapshot_release(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dist),
        cmocka_unit_test(test_topk_hand),
        cmocka_unit_test(test_deleted_items_absent),
        cmocka_unit_test(test_index_owns_its_data),
        cmocka_unit_test(test_empty_and_mismatch),
        cmocka_unit_test(test_topk_matches_naive),
        cmocka_unit_test(test_build_chunks_with_holes),
        cmocka_unit_test(test_builder_while_the_store_changes),
        cmocka_unit_test(test_builder_restart),
        cmocka_unit_test(test_builder_columns_grow),
        cmocka_unit_test(test_threaded_build_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
