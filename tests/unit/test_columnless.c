/* test_columnless.c - an index that keeps only its lists' codes
 * (oml_index_drop_columns, issue 14's memory): every search that re-ranks
 * exactly takes its rows' embeddings from a row source instead, here the
 * daemon's (fresh.c omld_fresh_rows: the store's features, embedded under
 * the index's model), and answers as the same index with its columns.
 * What cannot take a source refuses the index by name. The daemon's views
 * drop the columns only where they re-rank anyway, and answer classify,
 * retrieve, recommend and the recall sample through the store. */
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
#include "metrics.h"
#include "query.h"
#include "recall.h"
#include "rerank.h"
#include "rng.h"
#include "serve.h"
#include "serve_shard.h"
#include "store.h"
#include "testutil.h"
#include "view.h"

#define DIM 6
#define NL 400
#define K 7

typedef struct fx {
    oml_store *store;
    omld_store_lock lock;
    omld_limits lim;
    omld_metrics metrics;
    omld_query_ctx q;
    oml_row_source src;
    oml_snapshot *snap;
    oml_index *full, *bare; /* the same index, with and without its columns */
    float x[NL][DIM];
} fx;

static oml_index *index_with_lists(const fx *f)
{
    oml_index *ix = NULL;
    assert_int_equal(oml_index_build(&ix, f->snap, f->store), OML_OK);
    assert_int_equal(oml_index_add_lists(ix), OML_OK);
    assert_non_null(ix->hl);
    for (int h = 0; h < ix->heads; h++)
        ix->hl[h].n_probe = 3; /* some lists, not all: the near search has work to do */
    return ix;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(oml_store_create(&f->store, DIM, NL), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 9);
    for (int i = 0; i < NL; i++) {
        char id[16], lab[8];
        snprintf(id, sizeof id, "i%d", i);
        snprintf(lab, sizeof lab, "c%d", i % 3);
        for (int j = 0; j < DIM; j++)
            f->x[i][j] = (float)(i % 3 == j % 3) + 0.6f * oml_rng_normal(&r);
        assert_int_equal(oml_store_put(f->store, id, strlen(id), f->x[i], lab, strlen(lab), NULL,
                                       NULL),
                         OML_OK);
    }
    const float alpha[2] = {0.6f, 0.4f};
    f->snap = oml_test_snapshot(1, DIM, 8, 4, NULL, alpha, 12);
    assert_non_null(f->snap);
    f->full = index_with_lists(f);
    f->bare = index_with_lists(f);
    oml_index_drop_columns(f->bare);
    assert_null(f->bare->emb_cols);
    assert_int_equal(pthread_rwlock_init(&f->lock.rw, NULL), 0);
    f->lim = (omld_limits){.dim = DIM, .max_batch = 100, .max_k = 64, .default_k = 5,
                           .default_threshold = 0.5f, .rerank_k = 64};
    f->q = (omld_query_ctx){.lim = &f->lim, .store = f->store, .lock = &f->lock,
                            .metrics = &f->metrics};
    omld_fresh_rows(&f->q, &f->src);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    oml_index_destroy(f->full);
    oml_index_destroy(f->bare);
    oml_snapshot_release(f->snap);
    oml_store_destroy(f->store);
    pthread_rwlock_destroy(&f->lock.rw);
    free(f);
    return 0;
}

/* Query s's embedding under the index's model (heads, emb), malloc'd. */
static float *embed_query(const fx *f, int s)
{
    float *q = malloc((size_t)f->full->heads * (size_t)f->full->emb * sizeof *q);
    assert_non_null(q);
    assert_int_equal(oml_snapshot_embed(f->snap, f->x[s], 1, q), OML_OK);
    return q;
}

static void same_neighbours(const oml_neighbor *a, int32_t na, const oml_neighbor *b, int32_t nb)
{
    assert_int_equal(na, nb);
    for (int32_t i = 0; i < na; i++) {
        assert_int_equal(a[i].row, b[i].row);
        assert_float_equal(a[i].dist, b[i].dist, 1e-5);
    }
}

/* Every list by the codes and the rows re-embedded from the store: the
 * full scan of the floats; the calibrated lists: the same index's search. */
static void test_search_from_the_store(void **state)
{
    fx *f = *state;
    /* What the index holds: its floats gone, its codes the same. */
    size_t floats = (size_t)f->full->heads * (size_t)f->full->emb * NL * sizeof(float);
    assert_int_equal(oml_index_float_bytes(f->full), floats);
    assert_int_equal(oml_index_float_bytes(f->bare), 0);
    assert_int_equal(oml_index_code_bytes(f->bare), oml_index_code_bytes(f->full));
    assert_true(oml_index_code_bytes(f->bare) >= (size_t)f->full->heads * f->full->emb * NL);
    size_t ws = oml_near_ws_bytes(f->full, K);
    void *m1 = malloc(ws), *m2 = malloc(ws);
    float *scratch = malloc(NL * sizeof *scratch);
    oml_near_ws w1, w2;
    for (int s = 0; s < NL; s += 23) {
        float *q = embed_query(f, s);
        for (int h = 0; h < f->full->heads; h++) {
            const float *qh = q + (size_t)h * (size_t)f->full->emb;
            oml_neighbor want[K], got[K];
            oml_near_ws_init(&w2, f->bare, K, m2);
            w2.src = &f->src;
            int32_t nw = oml_index_topk(f->full, h, qh, K, s, NULL, want, scratch);
            int32_t ng = oml_index_topk_lists(f->bare, h, qh, K, s, NULL, got, &w2);
            same_neighbours(want, nw, got, ng);
            assert_true(want[0].dist < want[K - 1].dist); /* not a head of ties */
            /* Without a source: nothing, never the wrong rows. */
            w2.src = NULL;
            assert_int_equal(oml_index_topk_lists(f->bare, h, qh, K, s, NULL, got, &w2), 0);
        }
        oml_near_ws_init(&w1, f->full, K, m1);
        oml_near_ws_init(&w2, f->bare, K, m2);
        w2.src = &f->src;
        for (int h = 0; h < f->full->heads; h++) { /* ascending, as a query does */
            const float *qh = q + (size_t)h * (size_t)f->full->emb;
            oml_neighbor want[K], got[K];
            int32_t nw = oml_index_topk_near(f->full, h, qh, K, -1, s, NULL, want, &w1);
            int32_t ng = oml_index_topk_near(f->bare, h, qh, K, -1, s, NULL, got, &w2);
            same_neighbours(want, nw, got, ng);
        }
        free(q);
    }
    free(m1);
    free(m2);
    free(scratch);
}

static void same_hits(const oml_hit *a, int32_t na, const oml_hit *b, int32_t nb)
{
    assert_int_equal(na, nb);
    for (int32_t i = 0; i < na; i++) {
        assert_int_equal(a[i].row, b[i].row);
        assert_float_equal(a[i].score, b[i].score, 1e-5);
        assert_float_equal(a[i].similarity, b[i].similarity, 1e-5);
    }
}

/* Classify, retrieve and recommend given the source: the answers of the
 * index with its columns, pages and similarity floors included. */
static void test_retrieve_and_recommend(void **state)
{
    fx *f = *state;
    for (int s = 1; s < NL; s += 37) {
        oml_retrieve_opts plain = {NULL, 0, -INFINITY, NULL}, paged = {NULL, 3, 0.2f, NULL};
        oml_retrieve_opts plain_src = plain, paged_src = paged;
        plain_src.src = paged_src.src = &f->src;
        oml_hit want[12], got[12];
        int32_t nw = -1, ng = -1;
        assert_int_equal(oml_retrieve(f->full, f->x[s], 12, s, &plain, want, &nw, NULL), OML_OK);
        assert_int_equal(oml_retrieve(f->bare, f->x[s], 12, s, &plain_src, got, &ng, NULL), OML_OK);
        assert_true(nw > 0);
        same_hits(want, nw, got, ng);
        assert_int_equal(oml_retrieve(f->full, f->x[s], 5, s, &paged, want, &nw, NULL), OML_OK);
        assert_int_equal(oml_retrieve(f->bare, f->x[s], 5, s, &paged_src, got, &ng, NULL), OML_OK);
        same_hits(want, nw, got, ng);
        oml_classification cw, cg;
        assert_int_equal(oml_classify(f->full, f->x[s], 5, s, &cw, NULL), OML_OK);
        assert_int_equal(oml_classify_from(f->bare, f->x[s], 5, s, NULL, &f->src, &cg, NULL),
                         OML_OK);
        assert_int_equal(cg.label, cw.label);
        assert_int_equal(cg.n_classes, cw.n_classes);
        for (int32_t c = 0; c < cw.n_classes; c++)
            assert_float_equal(cg.classes[c].score, cw.classes[c].score, 1e-5);
        assert_int_equal(oml_recommend(f->full, f->x[s], 1, f->x[s - 1], 1, 8, &plain, want, &nw,
                                       NULL),
                         OML_OK);
        assert_int_equal(oml_recommend(f->bare, f->x[s], 1, f->x[s - 1], 1, 8, &plain_src, got,
                                       &ng, NULL),
                         OML_OK);
        same_hits(want, nw, got, ng);
    }
}

/* What cannot take a source refuses the index, naming it; the recall
 * sample of a built view takes none (the daemon's views that re-rank use
 * the candidates' sample, below). */
static void test_refused_without_a_source(void **state)
{
    fx *f = *state;
    oml_diag d = {0};
    oml_classification c;
    assert_int_equal(oml_classify(f->bare, f->x[0], 5, -1, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "index");
    assert_non_null(strstr(d.msg, "keeps no item embeddings"));
    oml_hit hits[5];
    int32_t n = -1;
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_retrieve(f->bare, f->x[0], 5, -1, NULL, hits, &n, &d), OML_EINVAL);
    assert_string_equal(d.field, "index");
    oml_query qs[1] = {{f->x[0], 5, -1, NULL}};
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify_batch(f->bare, qs, 1, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "queries[0].index");
    oml_candidates cand;
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_retrieve_candidates(f->bare, f->x[0], 5, -1, NULL, &cand, &d), OML_EINVAL);
    assert_string_equal(d.field, "index");
    oml_candidates_free(&cand);
    int64_t hits_h[OML_MAX_HEADS], total_h[OML_MAX_HEADS];
    oml_index_recall(f->bare, f->x[0], 5, 0, NULL, hits_h, total_h);
    for (int h = 0; h < OML_MAX_HEADS; h++)
        assert_true(hits_h[h] == 0 && total_h[h] == 0);
    oml_rerank_recall(f->bare, f->x[0], 5, 10, 0, NULL, hits_h, total_h);
    for (int h = 0; h < OML_MAX_HEADS; h++)
        assert_true(hits_h[h] == 0 && total_h[h] == 0);
}

/* Both recall samples (the candidates' and the lists' own search) with
 * their exact reference from the store count what the same samples count
 * on the floats, head by head. */
static void test_recall_reference_from_the_store(void **state)
{
    fx *f = *state;
    int64_t sum = 0;
    for (int s = 0; s < NL; s += 11) {
        int64_t hw[OML_MAX_HEADS], tw[OML_MAX_HEADS], hg[OML_MAX_HEADS], tg[OML_MAX_HEADS];
        oml_rerank_recall(f->full, f->x[s], 5, 6, s, NULL, hw, tw);
        oml_rerank_recall(f->bare, f->x[s], 5, 6, s, &f->src, hg, tg);
        for (int h = 0; h < OML_MAX_HEADS; h++) {
            assert_int_equal(tg[h], tw[h]);
            assert_int_equal(hg[h], hw[h]);
            assert_int_equal(tg[h], h < f->full->heads ? 5 : 0);
            sum += tw[h] - hw[h];
        }
        oml_index_recall(f->full, f->x[s], 5, s, NULL, hw, tw);
        oml_index_recall(f->bare, f->x[s], 5, s, &f->src, hg, tg);
        for (int h = 0; h < OML_MAX_HEADS; h++) {
            assert_int_equal(tg[h], tw[h]);
            assert_int_equal(hg[h], hw[h]);
            assert_int_equal(tg[h], h < f->full->heads ? 5 : 0);
        }
    }
    assert_true(sum > 0); /* 3 lists and 6 candidates miss some: the test can tell */
}

/* An item deleted since the index was built is never an answer: the
 * source says it is gone, and the next row takes its place. */
static void test_deleted_item_left_out(void **state)
{
    fx *f = *state;
    size_t ws = oml_near_ws_bytes(f->full, K + 1);
    void *mem = malloc(ws);
    float *scratch = malloc(NL * sizeof *scratch);
    float *q = embed_query(f, 5);
    oml_neighbor want[K + 1], got[K];
    int32_t nw = oml_index_topk(f->full, 0, q, K + 1, 5, NULL, want, scratch);
    assert_int_equal(nw, K + 1);
    char id[16];
    snprintf(id, sizeof id, "i%u", (unsigned)f->full->slots[want[0].row]);
    assert_int_equal(oml_store_delete(f->store, id, strlen(id)), OML_OK);
    oml_near_ws w;
    oml_near_ws_init(&w, f->bare, K, mem);
    w.src = &f->src;
    int32_t ng = oml_index_topk_lists(f->bare, 0, q, K, 5, NULL, got, &w);
    same_neighbours(want + 1, K, got, ng);
    free(q);
    free(mem);
    free(scratch);
}

/* The daemon's views: with re-ranking on and the store above its bound, a
 * view with lists drops its columns and still answers classify, retrieve
 * and recommend from the store, as the index with its columns does (64
 * candidates per head of 400 rows, every list: the exact answer); below
 * the bound it keeps them. */
static void test_views_drop_where_they_rerank(void **state)
{
    fx *f = *state;
    omld_views *vs = NULL;
    assert_int_equal(omld_views_create(&vs, f->store, &f->lock, &f->metrics, NULL, NULL), 0);
    omld_views_set_lists(vs, 64, 0.95);
    omld_views_set_rerank(vs, NL + 1);
    assert_int_equal(omld_views_publish_now(vs, oml_snapshot_retain(f->snap), 0, 1), 0);
    omld_view *v = omld_views_acquire(vs);
    assert_non_null(v->ix->hl);
    assert_non_null(v->ix->emb_cols); /* below the bound */
    assert_int_equal(omld_view_floats(v), 1);
    omld_view_release(v);

    omld_views_set_rerank(vs, 64);
    assert_int_equal(omld_views_publish_now(vs, oml_snapshot_retain(f->snap), 0, 1), 0);
    v = omld_views_acquire(vs);
    assert_non_null(v->ix->hl);
    assert_null(v->ix->emb_cols);
    assert_int_equal(omld_view_floats(v), 0);
    for (int h = 0; h < v->ix->heads; h++) {
        v->ix->hl[h].n_probe = v->ix->n_lists;
        f->full->hl[h].n_probe = f->full->n_lists;
    }

    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ClassifyRequest cr = OMLD__CLASSIFY_REQUEST__INIT;
    Omld__ItemRef ref;
    omld__item_ref__init(&ref);
    ref.ref_case = OMLD__ITEM_REF__REF_ID;
    ref.id = "i30";
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &cr;
    cr.query = &ref;
    omld_reply r;
    omld_reply_init(&r, 1);
    omld_query_run(&f->q, v, &req, &r);
    assert_int_equal(r.status.code, OMLD__STATUS__CODE__OK);
    oml_classification want;
    assert_int_equal(oml_classify(f->full, f->x[30], 5, 30, &want, NULL), OML_OK);
    assert_string_equal(r.msg.classify->label, f->full->label_names[want.label]);
    assert_float_equal(r.msg.classify->scores[0]->score, want.classes[0].score, 1e-4);
    omld_reply_free(&r);

    Omld__RecommendRequest rr = OMLD__RECOMMEND_REQUEST__INIT;
    Omld__ItemRef *pos[1] = {&ref};
    rr.positive = pos;
    rr.n_positive = 1;
    rr.k_opt_case = OMLD__RECOMMEND_REQUEST__K_OPT_K;
    rr.k = 6;
    req.body_case = OMLD__REQUEST__BODY_RECOMMEND;
    req.recommend = &rr;
    omld_reply_init(&r, 1);
    omld_query_run(&f->q, v, &req, &r);
    assert_int_equal(r.status.code, OMLD__STATUS__CODE__OK);
    oml_hit hw[6];
    int32_t nw = -1;
    assert_int_equal(oml_retrieve(f->full, f->x[30], 6, 30, NULL, hw, &nw, NULL), OML_OK);
    assert_int_equal(r.msg.recommend->n_hits, (size_t)nw);
    for (int32_t i = 0; i < nw; i++)
        assert_string_equal(r.msg.recommend->hits[i]->id, oml_index_row_id(f->full, f->store, hw[i].row, NULL));
    omld_reply_free(&r);

    /* The recall sample of a query on it: the candidates' share, every
     * head checked against the store's exact reference. */
    atomic_store(&f->metrics.ann_queries, 0); /* this query is the sampled one */
    omld_recall_job *j = omld_recall_offer(&f->q, v, f->x[30], 5, 64, 30);
    assert_non_null(j);
    omld_recall_run_now(j);
    for (int h = 0; h < v->ix->heads; h++) {
        assert_int_equal(omld_read(&f->metrics.ann_recall_head_total[h]), 5);
        assert_int_equal(omld_read(&f->metrics.ann_recall_head_hits[h]), 5);
    }
    omld_view_release(v);
    omld_views_destroy(vs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_search_from_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retrieve_and_recommend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_without_a_source, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recall_reference_from_the_store, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deleted_item_left_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_views_drop_where_they_rerank, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
