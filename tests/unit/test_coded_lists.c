/* test_coded_lists.c - lists coded as the rows are embedded (issue 14's
 * memory: a rebuild that never holds float columns).
 *
 * The coder (hlist.h, oml_hlist_coder) given the rows the build samples
 * gives the build's lists, byte for byte but for the product codes; an
 * index built that way (oml_index_builder_code_lists) has no columns and,
 * through a row source over the store, gives an exact scan's neighbours;
 * it calibrates from that source, grows with items put while it is built,
 * and counts what embeds to NaN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fresh.h"
#include "hlist.h"
#include "query.h"
#include "rng.h"
#include "store.h"
#include "testutil.h"

#define DIM 6
#define NL 1500
#define K 7

typedef struct fx {
    oml_store *store;
    omld_store_lock lock;
    omld_query_ctx q;
    oml_row_source src;
    oml_snapshot *snap;
    float x[NL][DIM];
} fx;

static void put(fx *f, int i, const float *x)
{
    char id[16], lab[8];
    snprintf(id, sizeof id, "i%d", i);
    snprintf(lab, sizeof lab, "c%d", i % 3);
    assert_int_equal(oml_store_put(f->store, id, strlen(id), x, lab, strlen(lab), NULL, NULL),
                     OML_OK);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(oml_store_create(&f->store, DIM, 2 * NL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 5);
    for (int i = 0; i < NL; i++) {
        for (int j = 0; j < DIM; j++)
            f->x[i][j] = (float)(i % 3 == j % 3) + 0.6f * oml_rng_normal(&r);
        if (i < NL / 2) /* the rest: put while an index is built */
            put(f, i, f->x[i]);
    }
    const float alpha[2] = {0.6f, 0.4f};
    f->snap = oml_test_snapshot(1, DIM, 8, 4, NULL, alpha, 12);
    assert_non_null(f->snap);
    assert_int_equal(pthread_rwlock_init(&f->lock.rw, NULL), 0);
    f->q = (omld_query_ctx){.store = f->store, .lock = &f->lock};
    omld_fresh_rows(&f->q, &f->src);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    oml_snapshot_release(f->snap);
    oml_store_destroy(f->store);
    pthread_rwlock_destroy(&f->lock.rw);
    free(f);
    return 0;
}

/* An index whose build codes its lists; between its gathers, before the
 * first and from put_from on, the items put_from .. NL are put. */
static oml_index *coded_index_skipping(fx *f, int put_from, uint32_t pq_skip)
{
    oml_index_builder b = {0};
    assert_int_equal(oml_index_builder_init(&b, f->snap, DIM), OML_OK);
    assert_int_equal(oml_index_builder_code_lists(&b), OML_OK);
    b.pq_skip = pq_skip;
    int more = 1, gathers = 0;
    while (more > 0) {
        more = oml_index_builder_gather(&b, f->store);
        assert_true(more >= 0);
        assert_int_equal(oml_index_builder_embed(&b), OML_OK);
        if (++gathers == 1 && put_from < NL) { /* after the sample: past what it expects */
            for (int i = put_from; i < NL; i++)
                put(f, i, f->x[i]);
        }
    }
    oml_index *ix = NULL;
    assert_int_equal(oml_index_builder_finish(&b, f->store, &ix), OML_OK);
    /* A coded build's builder is freed after it: it handed its rows over,
     * and its gather buffers went before the lists were finished */
    assert_null(b.X);
    assert_null(b.out);
    assert_null(b.slots);
    assert_null(b.labels);
    assert_null(b.gens);
    oml_index_builder_free(&b);
    return ix;
}

static oml_index *coded_index(fx *f, int put_from)
{
    return coded_index_skipping(f, put_from, 0);
}

static oml_index *column_index(const fx *f)
{
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, f->snap, f->store), OML_OK);
    return ix;
}

/* ||x - ctr|| and ||x - ctr - code * sc|| of a row x (E), in double. */
static void norms_of(const float *x, const float *ctr, const int8_t *code, double sc, int E,
                     double *res, double *err)
{
    *res = *err = 0.0;
    for (int j = 0; j < E; j++) {
        double v = (double)x[j] - ctr[j], d = v - (double)code[j] * sc;
        *res += v * v;
        *err += d * d;
    }
    *res = sqrt(*res);
    *err = sqrt(*err);
}

/* While the coder codes, each row's norms are 16-bit upper bounds of its
 * floats, within 2^-7 above them (the encoder's floats: within rounding
 * of these). */
static void coder_norms_bound(const oml_hlist_coder *c, const float *rows)
{
    const oml_hlist *hl = &c->hl;
    int E = hl->emb;
    for (int32_t i = 0; i < hl->n; i++) {
        double res, err;
        norms_of(rows + (size_t)i * E, hl->centroids + (size_t)c->list_of[i] * E,
                 hl->codes + (size_t)i * E, oml_code8_bf16(hl->scale[i]), E, &res, &err);
        float r16 = oml_code8_bf16(hl->res_norm[i]), e16 = oml_code8_bf16(hl->code_err[i]);
        assert_true(r16 >= res * (1.0 - 0x1p-22) && r16 <= res * (1.0 + 0x1p-7) * (1.0 + 0x1p-22));
        assert_true(e16 >= err * (1.0 - 0x1p-22) && e16 <= err * (1.0 + 0x1p-7) * (1.0 + 0x1p-22));
    }
}

/* Given the rows oml_hlist_build trains on, the coder's lists are the
 * build's: centroids, grouping, int8 codes, norms and bounds, bit for bit,
 * whatever the blocks the rows come in; with L lists (past 256: a row's
 * list is 16 bits while its lists are built). */
static void coder_matches_build(int32_t N, int32_t E, int32_t L)
{
    float *cols = malloc((size_t)N * E * sizeof *cols), *rows = malloc((size_t)N * E * sizeof *rows);
    assert_non_null(cols);
    assert_non_null(rows);
    oml_rng r;
    oml_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) {
        double norm = 0.0;
        for (int j = 0; j < E; j++) {
            rows[i * E + j] = (float)(j == i % 5) + 0.5f * oml_rng_normal(&r);
            norm += (double)rows[i * E + j] * rows[i * E + j];
        }
        for (int j = 0; j < E; j++) {
            rows[i * E + j] = (float)(rows[i * E + j] / sqrt(norm));
            cols[(size_t)j * N + (size_t)i] = rows[i * E + j];
        }
    }
    oml_hlist built;
    assert_int_equal(oml_hlist_build(&built, cols, N, E, L), OML_OK);
    size_t s = (size_t)L * OML_HLIST_SAMPLE_PER_LIST; /* hlist.c's strided training rows */
    float *sample = malloc(s * E * sizeof *sample);
    assert_non_null(sample);
    for (size_t i = 0; i < s; i++)
        memcpy(sample + i * E, rows + i * N / s * E, E * sizeof *sample);
    oml_hlist_coder c;
    assert_int_equal(oml_hlist_coder_init(&c, sample, s, E, L, 100, 1), OML_OK);
    const int32_t blocks[] = {1, N / 4, 7, N - N / 4 - 9, 1};
    for (int i = 0, at = 0; i < 5; at += blocks[i++])
        assert_int_equal(oml_hlist_coder_add(&c, rows + (size_t)at * E, blocks[i]), OML_OK);
    coder_norms_bound(&c, rows);
    oml_hlist coded;
    assert_int_equal(oml_hlist_coder_finish(&c, &coded), OML_OK);
    assert_int_equal(coded.n, N);
    assert_int_equal(coded.n_lists, L);
    assert_int_equal(coded.n_probe, built.n_probe);
    assert_memory_equal(coded.centroids, built.centroids, (size_t)L * E * sizeof(float));
    assert_memory_equal(coded.list_start, built.list_start, (L + 1) * sizeof(int32_t));
    assert_memory_equal(coded.rows, built.rows, N * sizeof(int32_t));
    assert_null(coded.pos_of); /* a built head scans: rows only (oml_hlist_keep_maps) */
    assert_null(built.pos_of);
    assert_memory_equal(coded.codes, built.codes, (size_t)N * E);
    assert_memory_equal(coded.scale, built.scale, N * sizeof *coded.scale);
    assert_memory_equal(coded.res_q, built.res_q, N);
    assert_memory_equal(coded.err_q, built.err_q, N);
    assert_null(coded.res_norm); /* the 16-bit norms are gone once they are steps */
    assert_null(coded.code_err);
    assert_memory_equal(coded.list_res_max, built.list_res_max, L * sizeof(float));
    assert_memory_equal(coded.list_err_max, built.list_err_max, L * sizeof(float));
    assert_int_equal(coded.pq.m, built.pq.m);
    assert_true(coded.pq.m > 0);
    assert_memory_equal(coded.blk_start, built.blk_start, (L + 1) * sizeof(int32_t));
    assert_int_equal(coded.pq_keep, built.pq_keep);
    assert_true(oml_hlist_bytes(&coded) == oml_hlist_bytes(&built));
    /* Each position's norms are kept as the fewest steps of its list that
     * reach their 16-bit bounds (the slack they give is never below the
     * float's, nor a step above the bound), and 255 steps reach the
     * list's largest. */
    for (int32_t l = 0; l < L; l++) {
        float rs = oml_hlist_step(coded.list_res_max[l]), es = oml_hlist_step(coded.list_err_max[l]);
        for (int32_t p = coded.list_start[l]; p < coded.list_start[l + 1]; p++) {
            double res, err;
            norms_of(rows + (size_t)coded.rows[p] * E, coded.centroids + (size_t)l * E,
                     coded.codes + (size_t)p * E, oml_code8_bf16(coded.scale[p]), E, &res, &err);
            float fr = (float)res * (1.0f - 1e-5f) - 1e-7f;
            float fe = (float)err * (1.0f - 1e-5f) - 1e-7f;
            assert_true((float)coded.res_q[p] * rs >= fr);
            assert_true((float)coded.err_q[p] * es >= fe);
            assert_true((float)coded.res_q[p] * rs <= fr * (1.0f + 0x1p-7f) + rs * 1.01f + 1e-6f);
            assert_true((float)coded.err_q[p] * es <= fe * (1.0f + 0x1p-7f) + es * 1.01f + 1e-6f);
            assert_true(255.0f * rs >= fr && 255.0f * es >= fe);
        }
    }
    /* Its blocks, laid out in the buffer the product codes were coded
     * into, hold each row's codes of its residual at its position, and
     * zeros where a list's last block is padded. */
    size_t bb = oml_pq4_block_bytes(&coded.pq);
    for (int32_t l = 0; l < L; l++) {
        int32_t first = coded.list_start[l], cnt = coded.list_start[l + 1] - first;
        const uint8_t *blk = coded.pq_codes + (size_t)coded.blk_start[l] * bb;
        for (int32_t i = 0; i < cnt; i++) {
            int32_t row = coded.rows[first + i];
            float v[OML_HLIST_MAX_EMB];
            uint8_t want[OML_PQ4_MAX_EMB / OML_PQ4_DSUB];
            for (int j = 0; j < E; j++)
                v[j] = rows[row * E + j] - coded.centroids[l * E + j];
            oml_pq4_codes(&coded.pq, v, want);
            for (int32_t j = 0; j < coded.pq.m; j++)
                assert_int_equal(oml_pq4_code(blk + (size_t)(i / OML_PQ4_BLOCK) * bb, j,
                                              i % OML_PQ4_BLOCK),
                                 want[j]);
        }
        for (int32_t i = cnt; i % OML_PQ4_BLOCK != 0; i++)
            for (int32_t j = 0; j < coded.pq.m; j++)
                assert_int_equal(oml_pq4_code(blk + (size_t)(i / OML_PQ4_BLOCK) * bb, j,
                                              i % OML_PQ4_BLOCK),
                                 0);
    }
    oml_hlist_free(&coded);
    oml_hlist_free(&built);
    oml_hlist_coder_free(&c); /* emptied by finish: a no-op */
    free(sample);
    free(cols);
    free(rows);
}

static void test_coder_matches_build(void **state)
{
    (void)state;
    coder_matches_build(4000, 16, 24);
    coder_matches_build(300 * OML_HLIST_SAMPLE_PER_LIST, 8, 300); /* lists past 8 bits */
}

/* A sample smaller than the lists, a bad width, or more lists than a
 * row's 16-bit list names, is refused (before the sample is read). */
static void test_coder_refuses_a_short_sample(void **state)
{
    (void)state;
    float sample[8 * 4] = {0};
    oml_hlist_coder c;
    assert_int_equal(oml_hlist_coder_init(&c, sample, 8, 4, 9, 100, 1), OML_EINVAL);
    assert_int_equal(oml_hlist_coder_init(&c, sample, 8, 0, 2, 100, 1), OML_EINVAL);
    assert_int_equal(oml_hlist_coder_init(&c, NULL, 8, 4, 2, 100, 1), OML_EINVAL);
    assert_int_equal(oml_hlist_coder_init(&c, sample, (size_t)OML_HLIST_MAX_LISTS + 1, 1,
                                          OML_HLIST_MAX_LISTS + 1, 100, 1),
                     OML_EINVAL);
}

/* Every row's exact k nearest in every head, as the column index's exact
 * scan gives them: the coded lists, their bounds and the row source's
 * re-rank together miss nothing (and take items put while it was built). */
static void check_exact(const fx *f, const oml_index *coded)
{
    oml_index *full = column_index(f);
    assert_false(full->coded);
    assert_int_equal(coded->n, full->n);
    for (int32_t i = 0; i < full->n; i++) {
        assert_int_equal(coded->slots[i], full->slots[i]);
        assert_int_equal(coded->gens[i], full->gens[i]);
        assert_true(oml_index_row_current(coded, f->store, i));
        assert_int_equal(coded->labels[i], full->labels[i]);
    }
    void *mem = malloc(oml_near_ws_bytes(coded, K));
    float *scratch = malloc((size_t)full->n * sizeof *scratch);
    float *q = malloc((size_t)full->heads * (size_t)full->emb * sizeof *q);
    assert_non_null(mem);
    assert_non_null(scratch);
    assert_non_null(q);
    oml_near_ws w;
    oml_near_ws_init(&w, coded, K, mem);
    w.src = &f->src;
    for (int s = 0; s < NL; s += 37) {
        assert_int_equal(oml_snapshot_embed(f->snap, f->x[s], 1, q), OML_OK);
        for (int h = 0; h < full->heads; h++) {
            const float *qh = q + (size_t)h * (size_t)full->emb;
            oml_neighbor want[K], got[K];
            int32_t nw = oml_index_topk(full, h, qh, K, -1, NULL, want, scratch);
            int32_t ng = oml_index_topk_lists(coded, h, qh, K, -1, NULL, got, &w);
            assert_false(w.overflow);
            assert_int_equal(ng, nw);
            for (int32_t i = 0; i < nw; i++) {
                assert_int_equal(got[i].row, want[i].row);
                assert_float_equal(got[i].dist, want[i].dist, 1e-5);
            }
        }
    }
    free(mem);
    free(scratch);
    free(q);
    oml_index_destroy(full);
}

static void test_coded_index_is_exact_through_the_store(void **state)
{
    fx *f = *state;
    oml_index *coded = coded_index(f, NL / 2); /* 750 items expected, 1,500 coded */
    assert_null(coded->emb_cols);
    assert_true(coded->coded);
    assert_int_equal(oml_index_float_bytes(coded), 0);
    assert_non_null(coded->hl);
    assert_int_equal(coded->n, NL);
    assert_int_equal(coded->n_lists, oml_index_lists_for(NL / 2));
    int32_t row;
    assert_int_equal(oml_index_nonfinite(coded, &row), 0);
    assert_int_equal(row, -1);
    check_exact(f, coded);
    oml_index_destroy(coded);
}

/* Without columns the calibration needs a source; with one it sets every
 * head's lists from what its sample found. */
static void test_coded_index_calibrates_from_the_store(void **state)
{
    fx *f = *state;
    oml_index *coded = coded_index(f, NL);
    assert_int_equal(oml_index_calibrate_from(coded, 0.95, 1, NULL), OML_EINVAL);
    assert_int_equal(oml_index_calibrate_from(coded, 0.95, 2, &f->src), OML_OK);
    for (int h = 0; h < coded->heads; h++) {
        const oml_hlist *hl = &coded->hl[h];
        assert_true(hl->n_probe >= 1 && hl->n_probe <= hl->n_lists);
        assert_true(hl->shared_from >= 0 || hl->recall > 0.5f);
    }
    /* What it measured holds: scanning that many lists finds the exact
     * neighbours of rows as often as the calibration said, near enough. */
    oml_index *full = column_index(f);
    void *mem = malloc(oml_near_ws_bytes(coded, 10));
    float *scratch = malloc((size_t)full->n * sizeof *scratch);
    float *q = malloc((size_t)full->heads * (size_t)full->emb * sizeof *q);
    oml_near_ws w;
    oml_near_ws_init(&w, coded, 10, mem);
    w.src = &f->src;
    long hits = 0, total = 0;
    for (int s = 0; s < NL / 2; s += 7) {
        assert_int_equal(oml_snapshot_embed(f->snap, f->x[s], 1, q), OML_OK);
        oml_neighbor want[10], got[10];
        int32_t nw = oml_index_topk(full, 0, q, 10, -1, NULL, want, scratch);
        int32_t ng = oml_index_topk_near(coded, 0, q, 10, -1, -1, NULL, got, &w);
        for (int32_t i = 0; i < ng; i++)
            for (int32_t j = 0; j < nw; j++)
                hits += got[i].row == want[j].row;
        total += nw;
    }
    assert_true(total > 0);
    assert_true((double)hits / (double)total >= 0.85);
    free(mem);
    free(scratch);
    free(q);
    oml_index_destroy(full);
    oml_index_destroy(coded);
}

/* A row that embeds to NaN is counted with its row and coded as zeros:
 * the lists stay finite, and the view refuses the index by that count. */
static void test_coded_build_counts_what_is_not_finite(void **state)
{
    fx *f = *state;
    float huge[DIM];
    for (int j = 0; j < DIM; j++)
        huge[j] = 3e38f;
    put(f, NL / 2 + 10, huge); /* after 750 good rows */
    oml_index *coded = coded_index(f, NL);
    int32_t row;
    size_t bad = oml_index_nonfinite(coded, &row);
    assert_true(bad > 0);
    assert_int_equal(row, oml_index_row_of_slot(coded, (uint32_t)(NL / 2)));
    assert_string_equal(oml_index_row_id(coded, f->store, row, NULL), "i760");
    for (int h = 0; h < coded->heads; h++)
        for (int32_t p = 0; p < coded->n; p++)
            assert_true(isfinite(oml_code8_bf16(coded->hl[h].scale[p])));
    for (int h = 0; h < coded->heads; h++)
        for (int32_t l = 0; l < coded->n_lists; l++)
            assert_true(isfinite(coded->hl[h].list_err_max[l]));
    oml_index_destroy(coded);
}

static void same_lists(const oml_index *a, const oml_index *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->n_lists, b->n_lists);
    for (int h = 0; h < a->heads; h++) {
        const oml_hlist *x = &a->hl[h], *y = &b->hl[h];
        size_t n = (size_t)x->n, L = (size_t)x->n_lists, e = (size_t)x->emb;
        assert_int_equal(x->n, y->n);
        assert_memory_equal(x->centroids, y->centroids, L * e * sizeof(float));
        assert_memory_equal(x->list_start, y->list_start, (L + 1) * sizeof(int32_t));
        assert_memory_equal(x->rows, y->rows, n * sizeof(int32_t));
        assert_memory_equal(x->codes, y->codes, n * e);
        assert_memory_equal(x->scale, y->scale, n * sizeof *x->scale);
        assert_memory_equal(x->err_q, y->err_q, n);
        assert_memory_equal(x->res_q, y->res_q, n);
        assert_memory_equal(x->blk_start, y->blk_start, (L + 1) * sizeof(int32_t));
        assert_memory_equal(x->pq_codes, y->pq_codes,
                            (size_t)x->blk_start[L] * oml_pq4_block_bytes(&x->pq));
    }
}

/* A start's first view codes its blocks on threads, in order: the same
 * lists, bit for bit, as one thread and as the gathers (three blocks of
 * OML_INDEX_GATHER_ROWS items here). */
static void test_coded_threads_give_the_same_bits(void **state)
{
    fx *f = *state;
    enum { N = 2 * OML_INDEX_GATHER_ROWS + 900 };
    oml_store *big = NULL;
    assert_int_equal(oml_store_create(&big, DIM, N), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 8);
    for (int i = 0; i < N; i++) {
        char id[16];
        float x[DIM];
        snprintf(id, sizeof id, "b%d", i);
        for (int j = 0; j < DIM; j++)
            x[j] = (float)(i % 4 == j % 4) + 0.5f * oml_rng_normal(&r);
        assert_int_equal(oml_store_put(big, id, strlen(id), x, NULL, 0, NULL, NULL), OML_OK);
    }
    oml_store *mine = f->store;
    f->store = big;
    oml_index *gathered = coded_index(f, NL);
    f->store = mine;
    oml_index *one = NULL, *two = NULL;
    oml_index_builder b = {0};
    /* A builder left by a build with columns that stopped half way: the
     * coded build that restarts it has none. */
    assert_int_equal(oml_index_builder_restart(&b, f->snap, DIM), OML_OK);
    assert_int_equal(oml_index_builder_gather(&b, big), 1);
    assert_int_equal(oml_index_builder_embed(&b), OML_OK);
    assert_non_null(b.cols);
    assert_int_equal(oml_index_builder_run_coded_threads(&b, f->snap, big, 1, &one), OML_OK);
    assert_int_equal(oml_index_builder_run_coded_threads(&b, f->snap, big, 2, &two), OML_OK);
    oml_index_builder_free(&b);
    assert_int_equal(gathered->n, N);
    assert_true(two->coded);
    assert_null(one->emb_cols);
    assert_null(two->emb_cols);
    same_lists(gathered, one);
    same_lists(gathered, two);
    oml_index_destroy(gathered);
    oml_index_destroy(one);
    oml_index_destroy(two);
    oml_store_destroy(big);
}

/* Head h's k nearest to every 29th item through w (heads in ascending
 * order, as a query searches them), into got (rows of K each): by its
 * search, or with every_list by every row's code (oml_index_topk_lists). */
static void search_all(const fx *f, const oml_index *ix, oml_near_ws *w, int every_list,
                       oml_neighbor *got)
{
    float q[2 * 4];
    for (int s = 0, at = 0; s < NL; s += 29, at++) {
        assert_int_equal(oml_snapshot_embed(f->snap, f->x[s], 1, q), OML_OK);
        for (int h = 0; h < ix->heads; h++) {
            oml_neighbor *out = got + ((size_t)at * ix->heads + (size_t)h) * K;
            if (every_list)
                oml_index_topk_lists(ix, h, q + h * ix->emb, K, -1, NULL, out, w);
            else
                oml_index_topk_near(ix, h, q + h * ix->emb, K, -1, -1, NULL, out, w);
        }
    }
}

/* A head that shares head 0's scan never reads its product codes: once
 * they are dropped its answers are the same, bit for bit; a head that
 * scans its own lists keeps them. Should it part again, it scans its int8
 * codes whole and still finds the exact neighbours over every list. */
static void test_shared_heads_drop_their_product_codes(void **state)
{
    fx *f = *state;
    oml_index *coded = coded_index(f, NL);
    assert_int_equal(coded->heads, 2);
    assert_int_equal(oml_index_calibrate_from(coded, 0.95, 1, &f->src), OML_OK);
    coded->hl[0].donor = 4; /* head 1 shares head 0's scan, whatever the sample said */
    coded->hl[1].shared_from = 0;
    coded->hl[1].n_probe = coded->hl[0].n_probe;
    assert_true(coded->hl[0].pq.m > 0 && coded->hl[1].pq.m > 0);
    enum { Q = (NL + 28) / 29 };
    oml_neighbor *before = calloc((size_t)Q * 2 * K, sizeof *before);
    oml_neighbor *after = calloc((size_t)Q * 2 * K, sizeof *after);
    void *mem = malloc(oml_near_ws_bytes(coded, K));
    assert_non_null(before);
    assert_non_null(after);
    assert_non_null(mem);
    oml_near_ws w;
    oml_near_ws_init(&w, coded, K, mem);
    w.src = &f->src;
    search_all(f, coded, &w, 0, before);
    size_t bytes = oml_index_code_bytes(coded), head0 = oml_hlist_bytes(&coded->hl[0]);
    size_t freed = oml_index_drop_shared_pq(coded);
    assert_true(freed > 0);
    assert_int_equal(oml_index_code_bytes(coded), bytes - freed);
    assert_int_equal(oml_hlist_bytes(&coded->hl[0]), head0);
    assert_int_equal(coded->hl[1].pq.m, 0);
    assert_null(coded->hl[1].pq_codes);
    assert_int_equal(coded->hl[1].pq_keep, 0);
    search_all(f, coded, &w, 0, after);
    assert_memory_equal(before, after, (size_t)Q * 2 * K * sizeof *before);
    assert_int_equal(oml_index_drop_shared_pq(coded), 0); /* nothing left to free */
    coded->hl[1].shared_from = -1; /* parted: its own scan of every list, int8 codes whole */
    coded->hl[1].n_probe = coded->n_lists;
    for (int s = 0; s < NL; s += 29) {
        float q[2 * 4];
        oml_neighbor own[K], all[K];
        assert_int_equal(oml_snapshot_embed(f->snap, f->x[s], 1, q), OML_OK);
        int32_t n_own = oml_index_topk_near(coded, 1, q + 4, K, -1, -1, NULL, own, &w);
        int32_t n_all = oml_index_topk_lists(coded, 1, q + 4, K, -1, NULL, all, &w);
        assert_int_equal(n_own, n_all);
        assert_memory_equal(own, all, (size_t)n_all * sizeof *own);
    }
    free(before);
    free(after);
    free(mem);
    oml_index_destroy(coded);
}

enum { QS = (NL + 28) / 29, ANSWERS = 2 * QS * 2 * K }; /* search_all's, both ways */

/* Both heads' answers both ways (search_all) into got (ANSWERS). */
static void answers(const fx *f, const oml_index *ix, oml_near_ws *w, oml_neighbor *got)
{
    memset(got, 0, ANSWERS * sizeof *got);
    search_all(f, ix, w, 0, got);
    search_all(f, ix, w, 1, got + ANSWERS / 2);
}

/* The maps of head h as a search that shares a scan (or not) reads them. */
static void maps_read(const oml_hlist *hl, int shares)
{
    assert_true((hl->rows == NULL) == shares);
    assert_true((hl->pos_of == NULL) == !shares);
}

/* A head keeps of the two maps between positions and rows the one its
 * search reads: built, rows only; calibrated, head 1 (which may share)
 * has pos_of too; dropped (oml_index_drop_unread_maps), a head sharing a
 * scan keeps pos_of only, one scanning its lists rows only, 4 bytes a
 * row less, with the same answers, its search's and every list's (a
 * sharing head's rows made again for the scan). A second calibration
 * makes the maps again and decides as the first. */
static void test_heads_keep_only_the_map_they_read(void **state)
{
    fx *f = *state;
    oml_index *coded = coded_index(f, NL);
    size_t n = (size_t)coded->n;
    maps_read(&coded->hl[0], 0);
    maps_read(&coded->hl[1], 0);
    assert_int_equal(oml_index_calibrate_from(coded, 0.95, 1, &f->src), OML_OK);
    oml_hlist first[2]; /* what the calibration decided */
    memcpy(first, coded->hl, sizeof first);
    maps_read(&coded->hl[0], 0);
    assert_non_null(coded->hl[1].rows);
    assert_non_null(coded->hl[1].pos_of);
    int32_t *rows1 = malloc(n * sizeof *rows1);
    oml_neighbor *want = malloc(ANSWERS * sizeof *want), *got = malloc(ANSWERS * sizeof *got);
    void *mem = malloc(oml_near_ws_bytes(coded, K));
    assert_non_null(rows1);
    assert_non_null(want);
    assert_non_null(got);
    assert_non_null(mem);
    memcpy(rows1, coded->hl[1].rows, n * sizeof *rows1);
    oml_near_ws w;
    oml_near_ws_init(&w, coded, K, mem);
    w.src = &f->src;
    answers(f, coded, &w, want);
    /* head 1 shares head 0's scan, whatever the sample said */
    coded->hl[0].donor = 4;
    coded->hl[1].shared_from = 0;
    coded->hl[1].n_probe = coded->hl[0].n_probe;
    oml_neighbor *shared = malloc(ANSWERS * sizeof *shared);
    assert_non_null(shared);
    answers(f, coded, &w, shared);
    size_t bytes = oml_index_code_bytes(coded);
    assert_int_equal(oml_index_drop_unread_maps(coded), n * sizeof(int32_t)); /* head 1's rows */
    assert_int_equal(oml_index_code_bytes(coded), bytes - n * sizeof(int32_t));
    maps_read(&coded->hl[0], 0);
    maps_read(&coded->hl[1], 1);
    answers(f, coded, &w, got);
    assert_memory_equal(got, shared, ANSWERS * sizeof *got);
    assert_int_equal(oml_index_drop_unread_maps(coded), 0); /* nothing left to free */
    /* calibrated again: the maps it reads made again, the same decisions */
    assert_int_equal(oml_index_calibrate_from(coded, 0.95, 1, &f->src), OML_OK);
    assert_memory_equal(coded->hl[1].rows, rows1, n * sizeof *rows1);
    for (int h = 0; h < 2; h++) {
        assert_int_equal(coded->hl[h].shared_from, first[h].shared_from);
        assert_int_equal(coded->hl[h].n_probe, first[h].n_probe);
        assert_int_equal(coded->hl[h].donor, first[h].donor);
        assert_int_equal(coded->hl[h].pq_keep, first[h].pq_keep);
    }
    assert_int_equal(oml_index_drop_unread_maps(coded), n * sizeof(int32_t)); /* head 1's one */
    maps_read(&coded->hl[0], 0);
    maps_read(&coded->hl[1], first[1].shared_from >= 0);
    answers(f, coded, &w, got);
    assert_memory_equal(got, want, ANSWERS * sizeof *got);
    free(rows1);
    free(want);
    free(got);
    free(shared);
    free(mem);
    oml_index_destroy(coded);
}

/* A build told a head will share gives it no product codes, and the same
 * lists otherwise; the index still finds the exact neighbours. */
static void test_coded_build_skips_product_codes(void **state)
{
    fx *f = *state;
    oml_index *all = coded_index(f, NL);
    oml_index *skip = coded_index_skipping(f, NL, 1u << 1);
    assert_true(skip->hl[0].pq.m > 0);
    assert_int_equal(skip->hl[1].pq.m, 0);
    assert_null(skip->hl[1].pq_codes);
    assert_null(skip->hl[1].blk_start);
    assert_int_equal(skip->hl[1].pq_keep, 0);
    assert_true(oml_index_code_bytes(skip) < oml_index_code_bytes(all));
    for (int h = 0; h < 2; h++) {
        const oml_hlist *x = &all->hl[h], *y = &skip->hl[h];
        size_t n = (size_t)x->n, L = (size_t)x->n_lists, e = (size_t)x->emb;
        assert_int_equal(x->n, y->n);
        assert_memory_equal(x->centroids, y->centroids, L * e * sizeof(float));
        assert_memory_equal(x->rows, y->rows, n * sizeof(int32_t));
        assert_memory_equal(x->codes, y->codes, n * e);
        assert_memory_equal(x->scale, y->scale, n * sizeof *x->scale);
    }
    check_exact(f, skip);
    oml_index_destroy(all);
    oml_index_destroy(skip);
}

/* A store under OML_INDEX_CODE_LISTS_MIN items gets no coded lists: the
 * first gather says so; a shard never does. */
static void test_code_lists_refusals(void **state)
{
    fx *f = *state;
    oml_store *small = NULL;
    assert_int_equal(oml_store_create(&small, DIM, 100), OML_OK);
    for (int i = 0; i < 100; i++) {
        char id[16];
        snprintf(id, sizeof id, "s%d", i);
        assert_int_equal(oml_store_put(small, id, strlen(id), f->x[i], NULL, 0, NULL, NULL), OML_OK);
    }
    oml_index_builder b = {0};
    assert_int_equal(oml_index_builder_init(&b, f->snap, DIM), OML_OK);
    assert_int_equal(oml_index_builder_code_lists(&b), OML_OK);
    assert_int_equal(oml_index_builder_gather(&b, small), OML_EINVAL);
    assert_int_equal(oml_index_builder_restart(&b, f->snap, DIM), OML_OK);
    b.shard_n = 2;
    assert_int_equal(oml_index_builder_code_lists(&b), OML_EINVAL);
    oml_index_builder_free(&b);
    oml_store_destroy(small);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coder_matches_build),
        cmocka_unit_test(test_coder_refuses_a_short_sample),
        cmocka_unit_test_setup_teardown(test_coded_index_is_exact_through_the_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_coded_index_calibrates_from_the_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_coded_build_counts_what_is_not_finite, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_code_lists_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_coded_threads_give_the_same_bits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_heads_drop_their_product_codes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_coded_build_skips_product_codes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_heads_keep_only_the_map_they_read, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
