/* test_query.c - the read operations against a serving view (daemon/query.c).
 *
 * A tiny random model (paper preset, dim 4, L = 1, hidden 8, emb 3, alpha
 * (0.6, 0.4)) and a dozen items in a store; the view is built by hand from
 * view.h's fields (index + id map + version). Every answer is compared with
 * the library function it wraps called directly (oml_classify with the
 * item's row excluded, oml_verify, oml_retrieve, oml_snapshot_embed), then
 * errors (unknown id, unknown model) by code and field, the version on every
 * answer, and a pack + unpack round trip of the replies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fresh.h"
#include "query.h"
#include "rng.h"
#include "serve.h"
#include "testutil.h"

#define DIM 4
#define VERSION 7
#define MAX_FRAME (4u << 20)

typedef struct fx {
    oml_store *store;
    omld_store_lock lock;
    omld_limits lim;
    omld_query_ctx q;
    omld_view v;
    oml_snapshot *snap;
} fx;

/* id, label (NULL = unlabelled), class centre */
static const struct {
    const char *id, *label;
    int centre;
} ITEMS[] = {
    {"a0", "red", 0},   {"a1", "red", 0},     {"a2", "red", 0},   {"a3", "red", 0},
    {"b0", "blue", 1},  {"b1", "blue", 1},    {"b2", "blue", 1},  {"b3", "blue", 1},
    {"c0", "green", 2}, {"c1", "green", 2},   {"u0", NULL, 0},    {"s0", "solo", 3},
};
#define N_ITEMS (sizeof ITEMS / sizeof ITEMS[0])

static const float CENTRES[4][DIM] = {
    {3, 0, 0, 1}, {0, 3, 1, 0}, {-2, -2, 2, 0}, {0, 0, -3, 3}};

static void view_build(omld_view *v, oml_snapshot *snap, const oml_store *st)
{
    memset(v, 0, sizeof *v);
    atomic_init(&v->_refs, 1);
    assert_int_equal(oml_index_build(&v->ix, snap, st), OML_OK);
    v->version = VERSION;
}

static void view_free(omld_view *v)
{
    oml_index_destroy(v->ix);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(oml_store_create(&f->store, DIM, 64), OML_OK);
    oml_rng rng;
    oml_rng_seed(&rng, 5);
    for (size_t i = 0; i < N_ITEMS; i++) {
        float x[DIM];
        for (int j = 0; j < DIM; j++)
            x[j] = CENTRES[ITEMS[i].centre][j] + 0.5f * oml_rng_normal(&rng);
        const char *lab = ITEMS[i].label;
        assert_int_equal(oml_store_put(f->store, ITEMS[i].id, strlen(ITEMS[i].id), x, lab,
                                       lab ? strlen(lab) : 0, NULL, NULL),
                         OML_OK);
    }
    const float alpha[2] = {0.6f, 0.4f};
    f->snap = oml_test_snapshot(1, DIM, 8, 3, NULL, alpha, 42);
    assert_non_null(f->snap);
    view_build(&f->v, f->snap, f->store);
    assert_int_equal(pthread_rwlock_init(&f->lock.rw, NULL), 0);
    f->lim = (omld_limits){
        .dim = DIM, .max_batch = 100, .max_k = 64, .default_k = 4, .default_threshold = 0.5f};
    f->q = (omld_query_ctx){.lim = &f->lim, .store = f->store, .lock = &f->lock};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    view_free(&f->v);
    oml_snapshot_release(f->snap);
    oml_store_destroy(f->store);
    pthread_rwlock_destroy(&f->lock.rw);
    free(f);
    return 0;
}

/* ----------------------------------------------------------------- helpers */

static const float *feat(const fx *f, const char *id)
{
    uint32_t slot;
    assert_int_equal(oml_store_find(f->store, id, strlen(id), &slot), OML_OK);
    return oml_store_features(f->store, slot);
}

static int32_t row(fx *f, const char *id)
{
    return omld_view_row(&f->v, f->store, &f->lock, id, strlen(id));
}

static void ref_id(Omld__ItemRef *ref, const char *id)
{
    omld__item_ref__init(ref);
    ref->ref_case = OMLD__ITEM_REF__REF_ID;
    ref->id = (char *)id;
}

static void ref_vec(Omld__ItemRef *ref, Omld__Vector *v, const float *x)
{
    omld__item_ref__init(ref);
    omld__vector__init(v);
    v->values = (float *)x;
    v->n_values = DIM;
    ref->ref_case = OMLD__ITEM_REF__REF_VECTOR;
    ref->vector = v;
}

static void run(fx *f, const Omld__Request *req, omld_reply *r)
{
    omld_reply_init(r, 42);
    omld_query_run(&f->q, &f->v, req, r);
    assert_int_equal(r->msg.model_version, VERSION);
    assert_int_equal(r->msg.request_id, 42);
}

static void assert_ok(const omld_reply *r, int body_case)
{
    if (r->status.code != OMLD__STATUS__CODE__OK)
        print_error("status %d field '%s' message '%s'\n", r->status.code, r->status.field,
                    r->status.message);
    assert_int_equal(r->status.code, OMLD__STATUS__CODE__OK);
    assert_int_equal(r->msg.body_case, body_case);
}

static void assert_err(const omld_reply *r, int code, const char *field, const char *msg_part)
{
    if ((int)r->status.code != code || strcmp(r->status.field, field) != 0)
        print_error("status %d field '%s' message '%s'\n", r->status.code, r->status.field,
                    r->status.message);
    assert_int_equal(r->status.code, code);
    assert_string_equal(r->status.field, field);
    assert_int_equal(r->msg.body_case, OMLD__RESPONSE__BODY__NOT_SET);
    if (msg_part)
        assert_non_null(strstr(r->status.message, msg_part));
}

/* Packs r into a frame, unpacks it again; the caller frees with
 * omld__response__free_unpacked. */
static Omld__Response *round_trip(omld_reply *r)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(omld_reply_pack(r, MAX_FRAME, &buf, &len), 0);
    assert_true(len >= 4);
    uint32_t n = (uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 | (uint32_t)buf[2] << 8 | buf[3];
    assert_int_equal(n, len - 4);
    Omld__Response *m = omld__response__unpack(NULL, len - 4, buf + 4);
    free(buf);
    assert_non_null(m);
    assert_int_equal(m->request_id, 42);
    assert_int_equal(m->model_version, VERSION);
    assert_non_null(m->status);
    assert_int_equal(m->status->code, r->status.code);
    assert_int_equal(m->body_case, r->msg.body_case);
    return m;
}

/* Checks a classify answer against oml_classify(ix, x, k, exclude). */
static void check_classify(const fx *f, const omld_reply *r, const float *x, int32_t k,
                           int32_t exclude)
{
    assert_ok(r, OMLD__RESPONSE__BODY_CLASSIFY);
    const Omld__ClassifyResponse *c = r->msg.classify;
    oml_classification want;
    int rc = oml_classify(f->v.ix, x, k, exclude, &want, NULL);
    if (rc == OML_EEMPTY) {
        assert_string_equal(c->label, "");
        assert_int_equal(c->n_scores, 0);
        return;
    }
    assert_int_equal(rc, OML_OK);
    assert_string_equal(c->label, f->v.ix->label_names[want.label]);
    assert_int_equal(c->n_scores, want.n_classes);
    for (int32_t i = 0; i < want.n_classes; i++) {
        assert_string_equal(c->scores[i]->label, f->v.ix->label_names[want.classes[i].label]);
        assert_true(c->scores[i]->score == want.classes[i].score);
        if (i > 0)
            assert_true(c->scores[i]->score <= c->scores[i - 1]->score);
    }
}

/* ----------------------------------------------------------------- classify */

static void test_classify_by_id_excludes_itself(void **state)
{
    fx *f = *state;
    for (size_t i = 0; i < N_ITEMS; i++) {
        Omld__Request req = OMLD__REQUEST__INIT;
        Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
        Omld__ItemRef q;
        ref_id(&q, ITEMS[i].id);
        c.query = &q;
        c.k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
        c.k = 3;
        req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
        req.classify = &c;
        omld_reply r;
        run(f, &req, &r);
        int32_t rw = row(f, ITEMS[i].id);
        assert_true(rw >= 0);
        check_classify(f, &r, feat(f, ITEMS[i].id), 3, rw);
        /* "solo" has one member: left out, nobody votes for it. */
        if (strcmp(ITEMS[i].id, "s0") == 0)
            for (size_t j = 0; j < r.msg.classify->n_scores; j++)
                assert_string_not_equal(r.msg.classify->scores[j]->label, "solo");
        omld_reply_free(&r);
    }
}

static void test_classify_by_vector(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    Omld__ItemRef q;
    Omld__Vector v;
    ref_vec(&q, &v, feat(f, "s0"));
    c.query = &q;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    omld_reply r;
    run(f, &req, &r); /* k absent: default_k */
    check_classify(f, &r, feat(f, "s0"), (int32_t)f->lim.default_k, -1);
    /* By vector nothing is excluded: the item itself (D = 0) votes "solo". */
    int solo = 0;
    for (size_t j = 0; j < r.msg.classify->n_scores; j++)
        solo |= strcmp(r.msg.classify->scores[j]->label, "solo") == 0;
    assert_true(solo);
    Omld__Response *m = round_trip(&r);
    assert_string_equal(m->classify->label, r.msg.classify->label);
    assert_int_equal(m->classify->n_scores, r.msg.classify->n_scores);
    for (size_t j = 0; j < m->classify->n_scores; j++) {
        assert_string_equal(m->classify->scores[j]->label, r.msg.classify->scores[j]->label);
        assert_true(m->classify->scores[j]->score == r.msg.classify->scores[j]->score);
    }
    omld__response__free_unpacked(m, NULL);
    omld_reply_free(&r);

    const float other[DIM] = {1, -1, 0.5f, 2};
    for (uint32_t k = 1; k <= 12; k += 11) {
        ref_vec(&q, &v, other);
        c.k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
        c.k = k;
        c.model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
        c.model = (char *)(k == 1 ? "live" : ""); /* both name the live model */
        run(f, &req, &r);
        check_classify(f, &r, other, (int32_t)k, -1);
        omld_reply_free(&r);
    }
}

/* An empty view, and an item stored after the view was built (row -1). */
static void test_classify_empty_and_unindexed(void **state)
{
    fx *f = *state;
    oml_store *empty = NULL;
    assert_int_equal(oml_store_create(&empty, DIM, 4), OML_OK);
    omld_view ev;
    view_build(&ev, f->snap, empty);

    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    Omld__ItemRef q;
    ref_id(&q, "a1"); /* in the store, not in the empty view */
    c.query = &q;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    omld_reply r;
    omld_reply_init(&r, 42);
    omld_query_run(&f->q, &ev, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_CLASSIFY);
    assert_string_equal(r.msg.classify->label, "");
    assert_int_equal(r.msg.classify->n_scores, 0);
    Omld__Response *m = round_trip(&r);
    assert_string_equal(m->classify->label, "");
    omld__response__free_unpacked(m, NULL);
    omld_reply_free(&r);

    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    rr.query = &q;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    omld_reply_init(&r, 42);
    omld_query_run(&f->q, &ev, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
    assert_int_equal(r.msg.retrieve->n_hits, 0);
    omld_reply_free(&r);
    view_free(&ev);
    oml_store_destroy(empty);

    /* Stored after the view: found in the store, nothing to exclude. */
    const float x[DIM] = {2.5f, 0.2f, 0.1f, 1.1f};
    assert_int_equal(oml_store_put(f->store, "late", 4, x, "red", 3, NULL, NULL), OML_OK);
    assert_int_equal(row(f, "late"), -1);
    ref_id(&q, "late");
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    run(f, &req, &r);
    check_classify(f, &r, x, (int32_t)f->lim.default_k, -1);
    omld_reply_free(&r);
    assert_int_equal(oml_store_delete(f->store, "late", 4), OML_OK);
}

/* ------------------------------------------------------------------- verify */

static void test_verify(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__VerifyRequest vr = OMLD__VERIFY_REQUEST__INIT;
    Omld__ItemRef a, b;
    Omld__Vector vb;
    req.body_case = OMLD__REQUEST__BODY_VERIFY;
    req.verify = &vr;
    vr.a = &a;
    vr.b = &b;
    const char *pairs[][2] = {{"a0", "a1"}, {"a0", "b0"}, {"c1", "u0"}, {"s0", "s0"}};
    const float thresholds[] = {0.5f, 0.05f, 0.3f, 0.9f}; /* [0] is the default */
    for (size_t i = 0; i < 4; i++) {
        for (size_t t = 0; t < 4; t++) {
            ref_id(&a, pairs[i][0]);
            if (i % 2)
                ref_id(&b, pairs[i][1]);
            else
                ref_vec(&b, &vb, feat(f, pairs[i][1]));
            vr.threshold_opt_case = t ? OMLD__VERIFY_REQUEST__THRESHOLD_OPT_THRESHOLD
                                      : OMLD__VERIFY_REQUEST__THRESHOLD_OPT__NOT_SET;
            vr.threshold = thresholds[t];
            omld_reply r;
            run(f, &req, &r);
            assert_ok(&r, OMLD__RESPONSE__BODY_VERIFY);
            oml_verification want;
            assert_int_equal(oml_verify(f->snap, feat(f, pairs[i][0]), feat(f, pairs[i][1]),
                                        thresholds[t], &want, NULL),
                             OML_OK);
            const Omld__VerifyResponse *v = r.msg.verify;
            assert_int_equal(v->similar, want.similar);
            assert_true(v->score == want.probability);
            assert_int_equal(v->n_distances, 2);
            for (int h = 0; h < 2; h++)
                assert_true(v->distances[h] == want.dist[h]);
            if (i == 3) { /* the same item: D = 0 everywhere, similar */
                assert_true(v->similar);
                assert_true(v->distances[0] == 0.0f && v->distances[1] == 0.0f);
            }
            Omld__Response *m = round_trip(&r);
            assert_int_equal(m->verify->n_distances, 2);
            assert_true(m->verify->score == v->score);
            omld__response__free_unpacked(m, NULL);
            omld_reply_free(&r);
        }
    }

    /* T = 1 (allowed by the wire, not by oml_verify): every head whose D is
     * below 2 counts, so a pair at D < 2 in both heads scores 1. */
    ref_id(&a, "a0");
    ref_id(&b, "b0");
    vr.threshold_opt_case = OMLD__VERIFY_REQUEST__THRESHOLD_OPT_THRESHOLD;
    vr.threshold = 1.0f;
    omld_reply r;
    run(f, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_VERIFY);
    oml_verification d;
    assert_int_equal(oml_verify(f->snap, feat(f, "a0"), feat(f, "b0"), 0.5f, &d, NULL), OML_OK);
    double p = 0;
    for (int h = 0; h < 2; h++)
        if (d.dist[h] / 2.0f < 1.0f)
            p += (double)f->snap->alpha[h];
    assert_true(r.msg.verify->score == (float)p);
    assert_int_equal(r.msg.verify->similar, (float)p >= 0.5f);
    oml_verification near1;
    assert_int_equal(oml_verify(f->snap, feat(f, "a0"), feat(f, "b0"), nextafterf(1.0f, 0.0f),
                                &near1, NULL),
                     OML_OK);
    assert_float_equal(r.msg.verify->score, near1.probability, 1e-6);
    omld_reply_free(&r);
}

/* ----------------------------------------------------------------- retrieve */

static void test_retrieve(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    Omld__ItemRef q;
    Omld__Vector v;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    rr.query = &q;
    rr.k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    const oml_index *ix = f->v.ix;
    for (size_t i = 0; i < N_ITEMS; i++) {
        for (int by_vec = 0; by_vec < 2; by_vec++) {
            const char *id = ITEMS[i].id;
            if (by_vec)
                ref_vec(&q, &v, feat(f, id));
            else
                ref_id(&q, id);
            rr.k = (uint32_t)(i % 2 ? N_ITEMS : 3);
            omld_reply r;
            run(f, &req, &r);
            assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
            oml_hit want[N_ITEMS];
            int32_t n = -1;
            assert_int_equal(oml_retrieve(ix, feat(f, id), (int32_t)rr.k,
                                          by_vec ? -1 : row(f, id), NULL, want, &n, NULL),
                             OML_OK);
            const Omld__RetrieveResponse *res = r.msg.retrieve;
            assert_int_equal(res->n_hits, n);
            if (rr.k == N_ITEMS)
                assert_int_equal(n, by_vec ? N_ITEMS : N_ITEMS - 1);
            for (int32_t j = 0; j < n; j++) {
                const Omld__Hit *h = res->hits[j];
                if (!by_vec)
                    assert_string_not_equal(h->id, id); /* never itself */
                assert_string_equal(h->id, oml_index_row_id(ix, f->store, want[j].row, NULL));
                assert_true(h->score == want[j].score);
                int32_t lab = ix->labels[want[j].row];
                if (lab == OML_LABEL_NONE) {
                    assert_int_equal(h->label_opt_case, OMLD__HIT__LABEL_OPT__NOT_SET);
                } else {
                    assert_int_equal(h->label_opt_case, OMLD__HIT__LABEL_OPT_LABEL);
                    assert_string_equal(h->label, ix->label_names[lab]);
                }
            }
            if (i == 1 && by_vec == 0) {
                Omld__Response *m = round_trip(&r);
                assert_int_equal(m->retrieve->n_hits, res->n_hits);
                for (size_t j = 0; j < res->n_hits; j++) {
                    assert_string_equal(m->retrieve->hits[j]->id, res->hits[j]->id);
                    assert_int_equal(m->retrieve->hits[j]->label_opt_case,
                                     res->hits[j]->label_opt_case);
                }
                omld__response__free_unpacked(m, NULL);
            }
            omld_reply_free(&r);
        }
    }
}

/* A view's rows are named by the store: an item deleted since the view was
 * built, or whose slot another item took, is never answered, and the
 * search goes on past it to k hits, alone or in a batch (the batch's
 * answer is the single one's). */
static void test_retrieve_after_delete(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    Omld__ItemRef q;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    rr.query = &q;
    rr.k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    rr.k = 3;
    ref_id(&q, "a0");
    omld_reply r;
    run(f, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
    assert_int_equal(r.msg.retrieve->n_hits, 3);
    char first[16], second[16];
    snprintf(first, sizeof first, "%s", r.msg.retrieve->hits[0]->id);
    snprintf(second, sizeof second, "%s", r.msg.retrieve->hits[1]->id);
    omld_reply_free(&r);
    /* the nearest leaves; the second leaves and a new item takes its slot */
    uint32_t slot2;
    assert_int_equal(oml_store_find(f->store, second, strlen(second), &slot2), OML_OK);
    assert_int_equal(oml_store_delete(f->store, first, strlen(first)), OML_OK);
    assert_int_equal(oml_store_delete(f->store, second, strlen(second)), OML_OK);
    uint32_t got;
    assert_int_equal(oml_store_put(f->store, "new", 3, feat(f, "a0"), NULL, 0, &got, NULL), OML_OK);
    assert_true(got == slot2 || oml_index_row_of_slot(f->v.ix, got) >= 0); /* a reused slot */
    assert_false(oml_index_row_current(f->v.ix, f->store, oml_index_row_of_slot(f->v.ix, got)));
    run(f, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
    const Omld__RetrieveResponse *res = r.msg.retrieve;
    assert_int_equal(res->n_hits, 3);
    for (size_t j = 0; j < res->n_hits; j++) {
        assert_string_not_equal(res->hits[j]->id, first);
        assert_string_not_equal(res->hits[j]->id, second);
        assert_string_not_equal(res->hits[j]->id, "new"); /* not in this view */
    }
    /* the same as one retrieve of a batch */
    Omld__Request breq = OMLD__REQUEST__INIT;
    Omld__RetrieveBatchRequest br = OMLD__RETRIEVE_BATCH_REQUEST__INIT;
    Omld__RetrieveRequest *qp[1] = {&rr};
    br.queries = qp;
    br.n_queries = 1;
    breq.body_case = OMLD__REQUEST__BODY_RETRIEVE_BATCH;
    breq.retrieve_batch = &br;
    omld_reply rb;
    run(f, &breq, &rb);
    assert_ok(&rb, OMLD__RESPONSE__BODY_RETRIEVE_BATCH);
    const Omld__RetrieveResponse *one = rb.msg.retrieve_batch->answers[0];
    assert_int_equal(one->n_hits, res->n_hits);
    for (size_t j = 0; j < res->n_hits; j++)
        assert_string_equal(one->hits[j]->id, res->hits[j]->id);
    omld_reply_free(&rb);
    omld_reply_free(&r);
}

/* -------------------------------------------------------------------- embed */

/* Filters reach the search: labels blue and green (and "nope", which
 * matches nothing), b1 and "zz" (not stored) excluded, from a0 by id: the
 * answer is oml_retrieve over the rows of b0, b2, b3, c0, c1, with their
 * similarities; a page and a similarity floor cut it the same way. */
static void test_retrieve_filtered(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    Omld__ItemRef q;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    rr.query = &q;
    ref_id(&q, "a0");
    char *labels[3] = {(char *)"blue", (char *)"nope", (char *)"green"};
    char *exclude[2] = {(char *)"zz", (char *)"b1"};
    rr.labels = labels;
    rr.n_labels = 3;
    rr.exclude_ids = exclude;
    rr.n_exclude_ids = 2;
    rr.k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    const oml_index *ix = f->v.ix;
    uint8_t allow[N_ITEMS];
    for (size_t i = 0; i < N_ITEMS; i++) {
        const char *lab = ITEMS[i].label;
        allow[row(f, ITEMS[i].id)] = lab && (strcmp(lab, "blue") == 0 ||
                                             strcmp(lab, "green") == 0) &&
                                     strcmp(ITEMS[i].id, "b1") != 0;
    }
    const struct { uint32_t k, offset; float floor; } cases[] = {
        {10, 0, -2.0f}, {2, 0, -2.0f}, {2, 2, -2.0f}, {10, 0, 0.5f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rr.k = cases[c].k;
        rr.offset = cases[c].offset;
        rr.min_similarity_opt_case = cases[c].floor > -2.0f
                                         ? OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY
                                         : OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT__NOT_SET;
        rr.min_similarity = cases[c].floor;
        omld_reply r;
        run(f, &req, &r);
        assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
        oml_retrieve_opts o = {allow, (int32_t)rr.offset,
                               cases[c].floor > -2.0f ? cases[c].floor : -INFINITY, NULL};
        oml_hit want[N_ITEMS];
        int32_t n = -1;
        assert_int_equal(oml_retrieve(ix, feat(f, "a0"), (int32_t)rr.k, row(f, "a0"), &o, want,
                                      &n, NULL),
                         OML_OK);
        const Omld__RetrieveResponse *res = r.msg.retrieve;
        assert_int_equal(res->n_hits, n);
        if (c == 0)
            assert_int_equal(n, 5); /* b0 b2 b3 c0 c1 */
        for (int32_t j = 0; j < n; j++) {
            assert_string_equal(res->hits[j]->id, oml_index_row_id(ix, f->store, want[j].row, NULL));
            assert_true(allow[want[j].row]);
            assert_true(res->hits[j]->similarity == want[j].similarity);
            assert_true(res->hits[j]->similarity >= cases[c].floor);
        }
        omld_reply_free(&r);
    }
}

/* A view over f's index serving a newer model (alpha (.3, .7), seed 43)
 * of the given version; the caller releases it. */
static omld_view *fresh_view(fx *f, uint64_t version)
{
    const float alpha[2] = {0.3f, 0.7f};
    oml_snapshot *newer = oml_test_snapshot(1, DIM, 8, 3, NULL, alpha, 43);
    assert_non_null(newer);
    newer->version = version;
    omld_view *fv = calloc(1, sizeof *fv);
    assert_non_null(fv);
    atomic_init(&fv->_refs, 1);
    fv->base = omld_view_retain(&f->v);
    fv->ix = f->v.ix;
    fv->fresh = newer; /* the view's reference */
    fv->version = version;
    return fv;
}

/* A view serving a newer model than its index's (issue 14): classify and
 * retrieve re-rank the index's candidates under the newer model (all rows,
 * with rerank_k >= the items: the newer model's exact answer), verify and
 * embed use it, and an item deleted since the index was built is never
 * returned although the index still holds it. */
static void test_fresh_view_reranks(void **state)
{
    fx *f = *state;
    omld_view *fv = fresh_view(f, VERSION + 1);
    oml_snapshot *newer = fv->fresh;
    oml_index *exact = NULL;
    assert_int_equal(oml_index_build(&exact, newer, f->store), OML_OK);
    f->lim.rerank_k = 64;

    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    Omld__ItemRef q;
    ref_id(&q, "a0");
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    rr.query = &q;
    rr.k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
    rr.k = N_ITEMS;
    omld_reply r;
    omld_reply_init(&r, 1);
    omld_query_run(&f->q, fv, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
    assert_int_equal(r.msg.model_version, VERSION + 1);
    oml_hit want[N_ITEMS];
    int32_t n = -1;
    assert_int_equal(oml_retrieve(exact, feat(f, "a0"), N_ITEMS, row(f, "a0"), NULL, want, &n,
                                  NULL),
                     OML_OK);
    assert_int_equal(r.msg.retrieve->n_hits, n);
    for (int32_t j = 0; j < n; j++) {
        assert_string_equal(r.msg.retrieve->hits[j]->id, oml_index_row_id(exact, f->store, want[j].row, NULL));
        assert_float_equal(r.msg.retrieve->hits[j]->similarity, want[j].similarity, 1e-4);
    }
    omld_reply_free(&r);

    /* Verify is the newer model's too. */
    Omld__Request vreq = OMLD__REQUEST__INIT;
    Omld__VerifyRequest vr = OMLD__VERIFY_REQUEST__INIT;
    Omld__ItemRef a, b;
    ref_id(&a, "a0");
    ref_id(&b, "b0");
    vreq.body_case = OMLD__REQUEST__BODY_VERIFY;
    vreq.verify = &vr;
    vr.a = &a;
    vr.b = &b;
    omld_reply_init(&r, 1);
    omld_query_run(&f->q, fv, &vreq, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_VERIFY);
    oml_verification vd;
    assert_int_equal(oml_verify(newer, feat(f, "a0"), feat(f, "b0"), 0.5f, &vd, NULL), OML_OK);
    for (int h = 0; h < 2; h++)
        assert_true(r.msg.verify->distances[h] == vd.dist[h]);
    omld_reply_free(&r);

    /* b1 deleted since the index was built: gone from the answer. */
    assert_int_equal(oml_store_delete(f->store, "b1", 2), OML_OK);
    omld_reply_init(&r, 1);
    omld_query_run(&f->q, fv, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
    assert_int_equal(r.msg.retrieve->n_hits, (size_t)n - 1);
    for (size_t j = 0; j < r.msg.retrieve->n_hits; j++)
        assert_string_not_equal(r.msg.retrieve->hits[j]->id, "b1");
    omld_reply_free(&r);
    omld_view_release(fv);
    oml_index_destroy(exact);
}

static int by_row(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The depth sample of a fresh view (depth.h): every other item among its
 * deep candidates, its counts are how many of the newer model's exact 3
 * nearest a head each step's candidates (3, 4, 6, 9 a head) hold; once
 * its counts are observed, the view's queries take the first step that
 * holds them all (target 1). */
static void test_fresh_depth_sample(void **state)
{
    fx *f = *state;
    omld_view *fv = fresh_view(f, VERSION + 1);
    oml_index *exact = NULL;
    assert_int_equal(oml_index_build(&exact, fv->fresh, f->store), OML_OK);
    f->lim.rerank_k = 1; /* 3 candidates a head for k 3 */
    f->lim.depth_target = 1.0f;
    assert_int_equal(omld_fresh_candidates(&f->q, fv, 3), 3);
    int deeper = 0;
    for (size_t i = 0; i < N_ITEMS; i++) {
        const float *x = feat(f, ITEMS[i].id);
        int32_t r = row(f, ITEMS[i].id), sets[OMLD_DEPTH_STEPS][2 * 9], n_set[OMLD_DEPTH_STEPS];
        int64_t hits[OMLD_DEPTH_STEPS], total = -1, want[OMLD_DEPTH_STEPS] = {0};
        assert_int_equal(omld_fresh_depth_sample(&f->q, fv, x, 3, r, hits, &total), OML_OK);
        for (int st = 0; st < OMLD_DEPTH_STEPS; st++)
            assert_int_equal(oml_rerank_candidates(f->v.ix, x, omld_depth_at(st, 3), r, NULL,
                                                   sets[st], &n_set[st], NULL),
                             OML_OK);
        float q[2 * 3], scratch[N_ITEMS];
        assert_int_equal(oml_snapshot_embed(fv->fresh, x, 1, q), OML_OK);
        for (int h = 0; h < 2; h++) {
            oml_neighbor nb[3];
            int32_t n = oml_index_topk(exact, h, q + h * exact->emb, 3, r, NULL, nb, scratch);
            assert_int_equal(n, 3);
            for (int32_t j = 0; j < n; j++)
                for (int st = 0; st < OMLD_DEPTH_STEPS; st++)
                    want[st] += bsearch(&nb[j].row, sets[st], (size_t)n_set[st], sizeof(int32_t),
                                        by_row) != NULL;
        }
        assert_int_equal(total, 6);
        int step = OMLD_DEPTH_STEPS - 1;
        for (int st = OMLD_DEPTH_STEPS - 1; st >= 0; st--) {
            assert_int_equal(hits[st], want[st]);
            if (hits[st] == total)
                step = st;
        }
        omld_depth fresh_counts = {0};
        f->v.depth = fresh_counts;
        for (int n = 0; n < 40; n++) /* past the 100 neighbours the counts need */
            omld_depth_observe(&f->v.depth, hits, total, f->lim.depth_target);
        assert_int_equal(omld_fresh_candidates(&f->q, fv, 3), omld_depth_at(step, 3));
        deeper += step > 0;
    }
    assert_true(deeper > 0); /* the newer model reaches past 3 a head somewhere */
    f->v.depth = (omld_depth){0};
    omld_view_release(fv);
    oml_index_destroy(exact);
}

/* A fresh view's candidates a head follow the neighbours asked for:
 * rerank_candidates for 10, in proportion above, as for 5 below; never
 * fewer than asked, never past the serving limit. */
static void test_fresh_candidates(void **state)
{
    fx *f = *state;
    f->lim.rerank_k = 32;
    assert_int_equal(omld_fresh_base_candidates(&f->q, 10), 32);
    assert_int_equal(omld_fresh_base_candidates(&f->q, 20), 64);
    assert_int_equal(omld_fresh_base_candidates(&f->q, 5), 16);
    assert_int_equal(omld_fresh_base_candidates(&f->q, 1), 16);
    assert_int_equal(omld_fresh_base_candidates(&f->q, OML_SERVE_MAX_K), OML_SERVE_MAX_K);
    assert_int_equal(omld_fresh_base_candidates(&f->q, 1000), 3200);
    assert_int_equal(omld_fresh_base_candidates(&f->q, 6000), OML_SERVE_MAX_K);
    f->lim.rerank_k = 1;
    assert_int_equal(omld_fresh_base_candidates(&f->q, 5), 5);
    assert_int_equal(omld_fresh_base_candidates(&f->q, 200), 200);
}

static void test_embed(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__EmbedRequest er = OMLD__EMBED_REQUEST__INIT;
    Omld__ItemRef q;
    Omld__Vector v;
    req.body_case = OMLD__REQUEST__BODY_EMBED;
    req.embed = &er;
    er.item = &q;
    const int heads = 2, emb = 3;
    for (int by_vec = 0; by_vec < 2; by_vec++) {
        if (by_vec)
            ref_vec(&q, &v, feat(f, "b2"));
        else
            ref_id(&q, "b2");
        omld_reply r;
        run(f, &req, &r);
        assert_ok(&r, OMLD__RESPONSE__BODY_EMBED);
        float want[2 * 3];
        assert_int_equal(oml_snapshot_embed(f->snap, feat(f, "b2"), 1, want), OML_OK);
        const Omld__EmbedResponse *e = r.msg.embed;
        assert_int_equal(e->n_heads, heads);
        assert_int_equal(e->n_alpha, heads);
        for (int h = 0; h < heads; h++) {
            assert_int_equal(e->heads[h]->n_values, emb);
            double norm = 0;
            for (int j = 0; j < emb; j++) {
                assert_true(e->heads[h]->values[j] == want[h * emb + j]);
                norm += (double)e->heads[h]->values[j] * e->heads[h]->values[j];
            }
            assert_float_equal(norm, 1.0, 1e-5);
            assert_true(e->alpha[h] == f->snap->alpha[h]);
        }
        Omld__Response *m = round_trip(&r);
        assert_int_equal(m->embed->n_heads, heads);
        for (int h = 0; h < heads; h++)
            for (int j = 0; j < emb; j++)
                assert_true(m->embed->heads[h]->values[j] == want[h * emb + j]);
        assert_true(m->embed->alpha[0] == 0.6f && m->embed->alpha[1] == 0.4f);
        omld__response__free_unpacked(m, NULL);
        omld_reply_free(&r);
    }
}

/* ---------------------------------------------------------------- get_items */

static void test_get_items(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__GetItemsRequest g = OMLD__GET_ITEMS_REQUEST__INIT;
    char *ids[] = {(char *)"b1", (char *)"u0", (char *)"a0", (char *)"b1"};
    g.ids = ids;
    g.n_ids = 4;
    req.body_case = OMLD__REQUEST__BODY_GET_ITEMS;
    req.get_items = &g;
    omld_reply r;
    run(f, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_GET_ITEMS);
    Omld__Response *m = round_trip(&r);
    const char *labels[] = {"blue", NULL, "red", "blue"};
    for (int pass = 0; pass < 2; pass++) {
        const Omld__GetItemsResponse *res = pass ? m->get_items : r.msg.get_items;
        assert_int_equal(res->n_items, 4);
        for (size_t i = 0; i < 4; i++) {
            const Omld__Item *it = res->items[i];
            assert_string_equal(it->id, ids[i]);
            assert_int_equal(it->n_features, DIM);
            assert_memory_equal(it->features, feat(f, ids[i]), DIM * sizeof(float));
            if (labels[i] == NULL) {
                assert_int_equal(it->label_opt_case, OMLD__ITEM__LABEL_OPT__NOT_SET);
            } else {
                assert_int_equal(it->label_opt_case, OMLD__ITEM__LABEL_OPT_LABEL);
                assert_string_equal(it->label, labels[i]);
            }
        }
    }
    omld__response__free_unpacked(m, NULL);
    omld_reply_free(&r);

    ids[2] = (char *)"nope";
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "get_items.ids[2]", "\"nope\"");
    m = round_trip(&r);
    assert_string_equal(m->status->field, "get_items.ids[2]");
    omld__response__free_unpacked(m, NULL);
    omld_reply_free(&r);
}

/* ------------------------------------------------------------------- errors */

static void test_unknown_id(void **state)
{
    fx *f = *state;
    Omld__ItemRef known, unknown;
    ref_id(&known, "a0");
    ref_id(&unknown, "zz\x01top");
    Omld__Request req = OMLD__REQUEST__INIT;
    omld_reply r;

    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    c.query = &unknown;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "classify.query.id", "\"zz\\x01top\"");
    Omld__Response *m = round_trip(&r);
    assert_string_equal(m->status->field, "classify.query.id");
    assert_string_equal(m->status->message, r.status.message);
    omld__response__free_unpacked(m, NULL);
    omld_reply_free(&r);

    Omld__VerifyRequest vr = OMLD__VERIFY_REQUEST__INIT;
    vr.a = &known;
    vr.b = &unknown;
    req.body_case = OMLD__REQUEST__BODY_VERIFY;
    req.verify = &vr;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "verify.b.id", NULL);
    omld_reply_free(&r);
    vr.a = &unknown;
    vr.b = &known;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "verify.a.id", NULL);
    omld_reply_free(&r);

    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    rr.query = &unknown;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "retrieve.query.id", NULL);
    omld_reply_free(&r);

    Omld__EmbedRequest er = OMLD__EMBED_REQUEST__INIT;
    er.item = &unknown;
    req.body_case = OMLD__REQUEST__BODY_EMBED;
    req.embed = &er;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "embed.item.id", NULL);
    omld_reply_free(&r);

    /* A deleted item is unknown too. */
    const float x[DIM] = {1, 2, 3, 4};
    assert_int_equal(oml_store_put(f->store, "gone", 4, x, NULL, 0, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_delete(f->store, "gone", 4), OML_OK);
    ref_id(&unknown, "gone");
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "embed.item.id", "\"gone\"");
    omld_reply_free(&r);
}

static void test_unknown_model(void **state)
{
    fx *f = *state;
    Omld__ItemRef q;
    ref_id(&q, "a0");
    Omld__Request req = OMLD__REQUEST__INIT;
    omld_reply r;

    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    c.query = &q;
    c.model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    c.model = (char *)"daml-v2";
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &c;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "classify.model", "\"daml-v2\"");
    omld_reply_free(&r);
    c.model = (char *)"Live"; /* names are exact */
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "classify.model", NULL);
    omld_reply_free(&r);

    Omld__VerifyRequest vr = OMLD__VERIFY_REQUEST__INIT;
    vr.a = &q;
    vr.b = &q;
    vr.model_opt_case = OMLD__VERIFY_REQUEST__MODEL_OPT_MODEL;
    vr.model = (char *)"x";
    req.body_case = OMLD__REQUEST__BODY_VERIFY;
    req.verify = &vr;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "verify.model", NULL);
    omld_reply_free(&r);

    Omld__RetrieveRequest rr = OMLD__RETRIEVE_REQUEST__INIT;
    rr.query = &q;
    rr.model_opt_case = OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL;
    rr.model = (char *)"x";
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &rr;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "retrieve.model", NULL);
    omld_reply_free(&r);
    rr.model = (char *)"live";
    run(f, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE);
    omld_reply_free(&r);

    Omld__EmbedRequest er = OMLD__EMBED_REQUEST__INIT;
    er.item = &q;
    er.model_opt_case = OMLD__EMBED_REQUEST__MODEL_OPT_MODEL;
    er.model = (char *)"x";
    req.body_case = OMLD__REQUEST__BODY_EMBED;
    req.embed = &er;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "embed.model", NULL);
    Omld__Response *m = round_trip(&r);
    assert_string_equal(m->status->field, "embed.model");
    omld__response__free_unpacked(m, NULL);
    omld_reply_free(&r);
    er.model = (char *)"";
    run(f, &req, &r);
    assert_ok(&r, OMLD__RESPONSE__BODY_EMBED);
    omld_reply_free(&r);
}

/* A request that is not a query reaching query.c is a routing bug. */
static void test_not_a_query(void **state)
{
    fx *f = *state;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__StatusRequest st = OMLD__STATUS_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_STATUS;
    req.status = &st;
    omld_reply r;
    run(f, &req, &r);
    assert_int_equal(r.status.code, OMLD__STATUS__CODE__INTERNAL);
    omld_reply_free(&r);
}

/* Queries by id take the store's read lock while a writer upserts. */
typedef struct writer_arg {
    fx *f;
    atomic_int stop;
} writer_arg;

static void *writer_main(void *p)
{
    writer_arg *w = p;
    float x[DIM] = {3, 0, 0, 1};
    for (int i = 0; !atomic_load(&w->stop); i++) {
        x[1] = (float)(i % 7);
        pthread_rwlock_wrlock(&w->f->lock.rw);
        oml_store_put(w->f->store, "a2", 2, x, "red", 3, NULL, NULL);
        pthread_rwlock_unlock(&w->f->lock.rw);
    }
    return NULL;
}

static void test_concurrent_writer(void **state)
{
    fx *f = *state;
    writer_arg w = {.f = f};
    atomic_init(&w.stop, 0);
    const float x0[DIM] = {3, 0, 0, 1}; /* the writer's first value, before it starts */
    assert_int_equal(oml_store_put(f->store, "a2", 2, x0, "red", 3, NULL, NULL), OML_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__GetItemsRequest g = OMLD__GET_ITEMS_REQUEST__INIT;
    char *ids[] = {(char *)"a2", (char *)"b0"};
    g.ids = ids;
    g.n_ids = 2;
    req.body_case = OMLD__REQUEST__BODY_GET_ITEMS;
    req.get_items = &g;
    Omld__ClassifyRequest c = OMLD__CLASSIFY_REQUEST__INIT;
    Omld__ItemRef q;
    ref_id(&q, "a2");
    c.query = &q;
    Omld__Request creq = OMLD__REQUEST__INIT;
    creq.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    creq.classify = &c;
    for (int i = 0; i < 300; i++) {
        omld_reply r;
        run(f, &req, &r);
        assert_ok(&r, OMLD__RESPONSE__BODY_GET_ITEMS);
        const float *x = r.msg.get_items->items[0]->features;
        assert_true(x[0] == 3 && x[1] == floorf(x[1]) && x[1] >= 0 && x[1] < 7);
        omld_reply_free(&r);
        run(f, &creq, &r);
        assert_ok(&r, OMLD__RESPONSE__BODY_CLASSIFY);
        omld_reply_free(&r);
    }
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
}

/* ------------------------------------------------------------------ batches */

/* The single request's answer to one query of a batch, on view v. */
static void single_answer(fx *f, omld_view *v, const Omld__ClassifyRequest *cq,
                          const Omld__RetrieveRequest *rq, omld_reply *r)
{
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = cq ? OMLD__REQUEST__BODY_CLASSIFY : OMLD__REQUEST__BODY_RETRIEVE;
    if (cq) /* the body is a union */
        req.classify = (Omld__ClassifyRequest *)cq;
    else
        req.retrieve = (Omld__RetrieveRequest *)rq;
    omld_reply_init(r, 42);
    omld_query_run(&f->q, v, &req, r);
}

static void expect_classify_same(const Omld__ClassifyResponse *got,
                                 const Omld__ClassifyResponse *want)
{
    assert_string_equal(got->label, want->label);
    assert_int_equal(got->n_scores, want->n_scores);
    for (size_t j = 0; j < want->n_scores; j++) {
        assert_string_equal(got->scores[j]->label, want->scores[j]->label);
        assert_true(got->scores[j]->score == want->scores[j]->score);
    }
}

static void expect_retrieve_same(const Omld__RetrieveResponse *got,
                                 const Omld__RetrieveResponse *want)
{
    assert_int_equal(got->n_hits, want->n_hits);
    for (size_t j = 0; j < want->n_hits; j++) {
        assert_string_equal(got->hits[j]->id, want->hits[j]->id);
        assert_int_equal(got->hits[j]->label_opt_case, want->hits[j]->label_opt_case);
        if (want->hits[j]->label_opt_case == OMLD__HIT__LABEL_OPT_LABEL)
            assert_string_equal(got->hits[j]->label, want->hits[j]->label);
        assert_true(got->hits[j]->score == want->hits[j]->score);
        assert_true(got->hits[j]->similarity == want->hits[j]->similarity);
    }
}

/* Every item by id (each leaves itself out), then vectors, k mixed and
 * absent: each answer is its single request's, in order, on the live view
 * and on a fresh one (a newer model re-ranking the index's candidates). */
static void test_classify_batch(void **state)
{
    fx *f = *state;
    enum { M = N_ITEMS + 3 };
    Omld__ClassifyRequest cq[M], *qp[M];
    Omld__ItemRef refs[M];
    Omld__Vector vecs[M];
    const float other[3][DIM] = {{1, -1, 0.5f, 2}, {3, 0, 0, 1}, {0, 0, 0, 0}};
    for (size_t i = 0; i < M; i++) {
        omld__classify_request__init(&cq[i]);
        if (i < N_ITEMS)
            ref_id(&refs[i], ITEMS[i].id);
        else
            ref_vec(&refs[i], &vecs[i], other[i - N_ITEMS]);
        cq[i].query = &refs[i];
        if (i % 3) {
            cq[i].k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
            cq[i].k = 1 + (uint32_t)i % 13;
        }
        qp[i] = &cq[i];
    }
    qp[2]->model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    qp[2]->model = (char *)"live"; /* the live model by its name */
    Omld__ClassifyBatchRequest b = OMLD__CLASSIFY_BATCH_REQUEST__INIT;
    b.queries = qp;
    b.n_queries = M;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY_BATCH;
    req.classify_batch = &b;

    omld_view *fv = fresh_view(f, VERSION);
    f->lim.rerank_k = 5;
    omld_view *views[2] = {&f->v, fv};
    for (int vi = 0; vi < 2; vi++) {
        omld_reply r;
        omld_reply_init(&r, 42);
        omld_query_run(&f->q, views[vi], &req, &r);
        assert_ok(&r, OMLD__RESPONSE__BODY_CLASSIFY_BATCH);
        assert_int_equal(r.msg.classify_batch->n_answers, M);
        Omld__Response *m = round_trip(&r);
        assert_int_equal(m->classify_batch->n_answers, M);
        for (size_t i = 0; i < M; i++) {
            omld_reply one;
            single_answer(f, views[vi], qp[i], NULL, &one);
            assert_ok(&one, OMLD__RESPONSE__BODY_CLASSIFY);
            expect_classify_same(r.msg.classify_batch->answers[i], one.msg.classify);
            expect_classify_same(m->classify_batch->answers[i], one.msg.classify);
            omld_reply_free(&one);
        }
        if (vi == 0) /* by id, against the library: the item's own row left out */
            check_classify(f, &(omld_reply){.status = r.status,
                                            .msg = {.body_case = OMLD__RESPONSE__BODY_CLASSIFY,
                                                    .classify = r.msg.classify_batch->answers[4]}},
                           feat(f, ITEMS[4].id), 1 + 4 % 13, row(f, ITEMS[4].id));
        omld__response__free_unpacked(m, NULL);
        omld_reply_free(&r);
    }
    omld_view_release(fv);
}

/* Single Classify requests answered as a group (coalesce.c's work): each
 * reply equals the request's own answer alone, by id (its row left out)
 * or by vector, any k, and an unknown id is that request's own error
 * while the rest are answered. Only live-model requests without a
 * metadata filter on an exact-scan view may join a group. */
static void test_classify_group(void **state)
{
    fx *f = *state;
    enum { M = N_ITEMS + 3 };
    Omld__ClassifyRequest cq[M];
    Omld__Request req[M];
    const Omld__Request *reqs[M];
    Omld__ItemRef refs[M];
    Omld__Vector vecs[M];
    omld_reply rep[M], *rs[M];
    const float other[2][DIM] = {{1, -1, 0.5f, 2}, {0, 0, 0, 0}};
    for (size_t i = 0; i < M; i++) {
        omld__classify_request__init(&cq[i]);
        if (i < N_ITEMS)
            ref_id(&refs[i], ITEMS[i].id);
        else if (i < N_ITEMS + 2)
            ref_vec(&refs[i], &vecs[i], other[i - N_ITEMS]);
        else
            ref_id(&refs[i], "nobody");
        cq[i].query = &refs[i];
        if (i % 2) {
            cq[i].k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
            cq[i].k = 1 + (uint32_t)i % 7;
        }
        omld__request__init(&req[i]);
        req[i].request_id = 42;
        req[i].body_case = OMLD__REQUEST__BODY_CLASSIFY;
        req[i].classify = &cq[i];
        reqs[i] = &req[i];
        assert_true(omld_query_groupable(&f->v, &req[i]));
        omld_reply_init(&rep[i], 42);
        rs[i] = &rep[i];
    }
    omld_query_classify_group(&f->q, &f->v, reqs, rs, M);
    for (size_t i = 0; i < M; i++) {
        omld_reply one;
        single_answer(f, &f->v, &cq[i], NULL, &one);
        assert_int_equal(rep[i].msg.model_version, VERSION);
        assert_int_equal(rep[i].status.code, one.status.code);
        if (i == M - 1) {
            assert_err(&rep[i], OMLD__STATUS__CODE__NOT_FOUND, "classify.query.id", "nobody");
        } else {
            assert_ok(&rep[i], OMLD__RESPONSE__BODY_CLASSIFY);
            expect_classify_same(rep[i].msg.classify, one.msg.classify);
            if (i < N_ITEMS)
                check_classify(f, &rep[i], feat(f, ITEMS[i].id),
                               (int32_t)(cq[i].k_opt_case ? cq[i].k : f->lim.default_k),
                               row(f, ITEMS[i].id));
        }
        omld_reply_free(&one);
        omld_reply_free(&rep[i]);
    }
    /* What may not join: another model, a metadata filter, a fresh view,
     * another operation. */
    cq[0].model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
    cq[0].model = (char *)"live";
    assert_false(omld_query_groupable(&f->v, &req[0]));
    Omld__MetadataCondition cond = OMLD__METADATA_CONDITION__INIT, *cp = &cond;
    cq[1].metadata = &cp;
    cq[1].n_metadata = 1;
    assert_false(omld_query_groupable(&f->v, &req[1]));
    omld_view *fv = fresh_view(f, VERSION + 1);
    assert_false(omld_query_groupable(fv, &req[2]));
    omld_view_release(fv);
    assert_false(omld_query_groupable(NULL, &req[2]));
    Omld__Request emb = OMLD__REQUEST__INIT;
    emb.body_case = OMLD__REQUEST__BODY_EMBED;
    assert_false(omld_query_groupable(&f->v, &emb));
}

/* Retrieve filters per query (labels, excluded ids, pages, floors) and
 * none: each answer is its single request's. */
static void test_retrieve_batch(void **state)
{
    fx *f = *state;
    enum { M = 10 };
    Omld__RetrieveRequest rq[M], *qp[M];
    Omld__ItemRef refs[M];
    Omld__Vector vec;
    const float other[DIM] = {1, -1, 0.5f, 2};
    char *labels[3] = {(char *)"blue", (char *)"nope", (char *)"green"};
    char *exclude[2] = {(char *)"zz", (char *)"b1"};
    for (size_t i = 0; i < M; i++) {
        omld__retrieve_request__init(&rq[i]);
        if (i == M - 1)
            ref_vec(&refs[i], &vec, other);
        else
            ref_id(&refs[i], ITEMS[i].id);
        rq[i].query = &refs[i];
        rq[i].k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
        rq[i].k = 1 + (uint32_t)i;
        if (i % 2) {
            rq[i].labels = labels;
            rq[i].n_labels = 3;
        }
        if (i % 3 == 0) {
            rq[i].exclude_ids = exclude;
            rq[i].n_exclude_ids = 2;
        }
        rq[i].offset = (uint32_t)(i % 4 == 1 ? 2 : 0);
        if (i % 5 == 2) {
            rq[i].min_similarity_opt_case =
                OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY;
            rq[i].min_similarity = 0.3f;
        }
        qp[i] = &rq[i];
    }
    rq[4].k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT__NOT_SET; /* default_k */
    Omld__RetrieveBatchRequest b = OMLD__RETRIEVE_BATCH_REQUEST__INIT;
    b.queries = qp;
    b.n_queries = M;
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE_BATCH;
    req.retrieve_batch = &b;
    omld_view *fv = fresh_view(f, VERSION);
    f->lim.rerank_k = 6;
    omld_view *views[2] = {&f->v, fv};
    for (int vi = 0; vi < 2; vi++) {
        omld_reply r;
        omld_reply_init(&r, 42);
        omld_query_run(&f->q, views[vi], &req, &r);
        assert_ok(&r, OMLD__RESPONSE__BODY_RETRIEVE_BATCH);
        Omld__Response *m = round_trip(&r);
        assert_int_equal(m->retrieve_batch->n_answers, M);
        size_t hits = 0;
        for (size_t i = 0; i < M; i++) {
            omld_reply one;
            single_answer(f, views[vi], NULL, qp[i], &one);
            assert_ok(&one, OMLD__RESPONSE__BODY_RETRIEVE);
            expect_retrieve_same(r.msg.retrieve_batch->answers[i], one.msg.retrieve);
            expect_retrieve_same(m->retrieve_batch->answers[i], one.msg.retrieve);
            hits += one.msg.retrieve->n_hits;
            omld_reply_free(&one);
        }
        assert_true(hits > M); /* the answers are not all empty */
        omld__response__free_unpacked(m, NULL);
        omld_reply_free(&r);
    }
    omld_view_release(fv);
}

/* An unknown id fails the batch naming its query; an unknown model names
 * the first query's. */
static void test_batch_errors(void **state)
{
    fx *f = *state;
    Omld__ItemRef known, unknown;
    ref_id(&known, "a0");
    ref_id(&unknown, "zz");
    Omld__ClassifyRequest cq[3], *cp[3];
    Omld__RetrieveRequest rq[3], *rp[3];
    for (int i = 0; i < 3; i++) {
        omld__classify_request__init(&cq[i]);
        omld__retrieve_request__init(&rq[i]);
        cq[i].query = rq[i].query = i == 2 ? &unknown : &known;
        cp[i] = &cq[i];
        rp[i] = &rq[i];
    }
    Omld__ClassifyBatchRequest cb = OMLD__CLASSIFY_BATCH_REQUEST__INIT;
    cb.queries = cp;
    cb.n_queries = 3;
    Omld__RetrieveBatchRequest rb = OMLD__RETRIEVE_BATCH_REQUEST__INIT;
    rb.queries = rp;
    rb.n_queries = 3;
    Omld__Request req = OMLD__REQUEST__INIT;
    omld_reply r;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY_BATCH;
    req.classify_batch = &cb;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "classify_batch.queries[2].query.id", "\"zz\"");
    omld_reply_free(&r);
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE_BATCH;
    req.retrieve_batch = &rb;
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "retrieve_batch.queries[2].query.id", NULL);
    omld_reply_free(&r);

    rq[2].query = &known;
    for (int i = 0; i < 3; i++) {
        rq[i].model_opt_case = OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL;
        rq[i].model = (char *)"daml-v2";
    }
    run(f, &req, &r);
    assert_err(&r, OMLD__STATUS__CODE__NOT_FOUND, "retrieve_batch.queries[0].model",
               "\"daml-v2\"");
    omld_reply_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_classify_by_id_excludes_itself, setup, teardown),
        cmocka_unit_test_setup_teardown(test_classify_by_vector, setup, teardown),
        cmocka_unit_test_setup_teardown(test_classify_empty_and_unindexed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retrieve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retrieve_filtered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retrieve_after_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_view_reranks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_candidates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_depth_sample, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_items, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_classify_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_classify_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retrieve_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_writer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
