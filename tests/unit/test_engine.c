/* test_engine.c - the learner thread without sockets: commands in, answers
 * out through the loop, state checked through stats, views and checkpoints.
 *
 * The determinism test is the foundation of recovery: two engines fed the
 * same commands write byte-identical model files, and so does the library
 * driven directly (the oml-eval path), so the daemon learns exactly the
 * model the in-process evaluation measures. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "checkpoint.h"
#include "engine.h"
#include "learner.h"
#include "log.h"
#include "modelfile.h"
#include "replay.h"
#include "rng.h"
#include "testutil.h"

#define DIM 8
#define N_ITEMS 40

typedef struct fixture {
    uv_loop_t loop;
    omld_metrics metrics;
    omld_config cfg;
    omld_engine *e;
    char dir[256];
    int answered;
    int woken;
    omld_reply *last;
} fixture;

static void features(int i, float *x)
{
    oml_rng r;
    oml_rng_seed(&r, 1000 + (uint64_t)i);
    for (int j = 0; j < DIM; j++)
        x[j] = (float)oml_rng_uniform(&r) + (float)(i % 4) * (j == i % DIM ? 2.0f : 0.0f);
}

static void on_done(void *ctx, omld_reply *r)
{
    fixture *f = ctx;
    f->answered++;
    if (f->last) {
        omld_reply_free(f->last);
        free(f->last);
    }
    f->last = r;
}

static void on_wake(void *arg)
{
    ((fixture *)arg)->woken++;
}

/* Starts an engine on dir (NULL: a fresh temporary directory). */
static double Rehearse = 0, RehearseIdle = 0;

static void start_in(fixture *f, const char *preset, int64_t capacity, const char *dir)
{
    memset(f, 0, sizeof *f);
    omld_log_set_level(OMLD_LOG_WARN);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    omld_config_defaults(&f->cfg);
    if (dir == NULL)
        assert_int_equal(oml_test_tmpdir(f->dir, sizeof f->dir, "omld-test-engine"), 0);
    else
        snprintf(f->dir, sizeof f->dir, "%s", dir);
    snprintf(f->cfg.data_dir, sizeof f->cfg.data_dir, "%s", f->dir);
    snprintf(f->cfg.preset, sizeof f->cfg.preset, "%s", preset);
    f->cfg.dim = DIM;
    f->cfg.layers = 2;
    f->cfg.hidden = 16;
    f->cfg.emb = 4;
    f->cfg.max_batch = 100;
    f->cfg.queue_capacity = capacity;
    f->cfg.publish_ms = 20;
    /* Rehearsal happens when the queue is idle, so its steps depend on
     * timing (they are logged): off here, where the model must be a
     * function of the requests; test_rehearsal_replays_bit_identically
     * turns it on. */
    f->cfg.rehearse = Rehearse;
    f->cfg.rehearse_idle = RehearseIdle;
    /* Checkpoints written by the learner, not a forked child: two engines
     * share this process (recovery_case), and a fork while the other's
     * threads allocate left the child waiting on a lock of GCC 12's ASan
     * allocator (which has no fork handler) for good, once in ~10 runs.
     * The files are the same; the forked path runs in the real daemon
     * (test_durability's background checkpoints). */
    f->cfg.checkpoint_background = 0;
    char err[256];
    assert_int_equal(omld_engine_start(&f->e, &f->loop, &f->cfg, &f->metrics, err, sizeof err), 0);
    omld_engine_set_wake(f->e, on_wake, f);
}

static void start(fixture *f, const char *preset, int64_t capacity)
{
    start_in(f, preset, capacity, NULL);
}

static void stop(fixture *f)
{
    omld_engine_stop(f->e);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    omld_engine_destroy(f->e);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    if (f->last) {
        omld_reply_free(f->last);
        free(f->last);
    }
    assert_int_equal(oml_test_rmtree(f->dir), 0);
}

/* Submits req and runs the loop until its answer arrives; returns the code. */
static int call(fixture *f, const Omld__Request *req, uint64_t cost)
{
    int want = f->answered + 1;
    assert_int_equal(omld_engine_submit(f->e, req, cost, on_done, f), 0);
    while (f->answered < want)
        uv_run(&f->loop, UV_RUN_ONCE);
    return f->last->status.code;
}

/* ---- request builders (static storage; one request at a time) ---- */

typedef struct put_req {
    Omld__Request req;
    Omld__PutItemsRequest body;
    Omld__Item items[N_ITEMS];
    Omld__Item *ptrs[N_ITEMS];
    float x[N_ITEMS][DIM];
    char ids[N_ITEMS][16], labels[N_ITEMS][8];
} put_req;

static void build_put(put_req *p, int first, int n)
{
    omld__request__init(&p->req);
    omld__put_items_request__init(&p->body);
    for (int i = 0; i < n; i++) {
        int k = first + i;
        omld__item__init(&p->items[i]);
        snprintf(p->ids[i], sizeof p->ids[i], "item-%d", k);
        snprintf(p->labels[i], sizeof p->labels[i], "c%d", k % 4);
        features(k, p->x[i]);
        p->items[i].id = p->ids[i];
        p->items[i].n_features = DIM;
        p->items[i].features = p->x[i];
        p->items[i].label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
        p->items[i].label = p->labels[i];
        p->ptrs[i] = &p->items[i];
    }
    p->body.n_items = (size_t)n;
    p->body.items = p->ptrs;
    p->req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    p->req.put_items = &p->body;
}

#define MAX_T 64
typedef struct trip_req {
    Omld__Request req;
    Omld__AddTripletsRequest body;
    Omld__Triplet t[MAX_T];
    Omld__Triplet *ptrs[MAX_T];
    Omld__ItemRef refs[MAX_T][3];
    char ids[MAX_T][3][16];
} trip_req;

/* Triplet i of a fixed stream: anchor and positive of one class, negative of
 * another (classes are k % 4). */
static void stream_triplet(int i, int m[3])
{
    m[0] = (i * 7) % N_ITEMS;
    m[1] = (m[0] + 4 * (1 + i % 3)) % N_ITEMS;
    m[2] = (m[0] + 1 + i % 3) % N_ITEMS;
}

static void build_triplets(trip_req *t, int first, int n, int bad_at)
{
    omld__request__init(&t->req);
    omld__add_triplets_request__init(&t->body);
    for (int i = 0; i < n; i++) {
        int m[3];
        stream_triplet(first + i, m);
        omld__triplet__init(&t->t[i]);
        for (int j = 0; j < 3; j++) {
            omld__item_ref__init(&t->refs[i][j]);
            snprintf(t->ids[i][j], sizeof t->ids[i][j], i == bad_at && j == 2 ? "nope-%d" : "item-%d",
                     m[j]);
            t->refs[i][j].ref_case = OMLD__ITEM_REF__REF_ID;
            t->refs[i][j].id = t->ids[i][j];
        }
        t->t[i].anchor = &t->refs[i][0];
        t->t[i].positive = &t->refs[i][1];
        t->t[i].negative = &t->refs[i][2];
        t->ptrs[i] = &t->t[i];
    }
    t->body.n_triplets = (size_t)n;
    t->body.triplets = t->ptrs;
    t->req.body_case = OMLD__REQUEST__BODY_ADD_TRIPLETS;
    t->req.add_triplets = &t->body;
}

static void checkpoint(fixture *f)
{
    Omld__Request req;
    Omld__CheckpointRequest body;
    omld__request__init(&req);
    omld__checkpoint_request__init(&body);
    req.body_case = OMLD__REQUEST__BODY_CHECKPOINT;
    req.checkpoint = &body;
    assert_int_equal(call(f, &req, 1), OMLD__STATUS__CODE__OK);
}

/* ---- tests ---- */

static void test_put_replace_delete(void **state)
{
    fixture f;
    start(&f, "paper", 1000);
    static put_req p;
    build_put(&p, 0, 10);
    assert_int_equal(call(&f, &p.req, 10), 0);
    assert_int_equal(f.last->msg.put_items->created, 10);
    build_put(&p, 5, 10); /* 5..9 exist, 10..14 are new */
    assert_int_equal(call(&f, &p.req, 10), 0);
    assert_int_equal(f.last->msg.put_items->created, 5);
    assert_int_equal(f.last->msg.put_items->replaced, 5);

    /* Delete with one unknown id: NOT_FOUND naming it, nothing deleted. */
    char *ids[3] = {"item-1", "ghost", "item-2"};
    Omld__Request req;
    Omld__DeleteItemsRequest del;
    omld__request__init(&req);
    omld__delete_items_request__init(&del);
    del.n_ids = 3;
    del.ids = ids;
    req.body_case = OMLD__REQUEST__BODY_DELETE_ITEMS;
    req.delete_items = &del;
    assert_int_equal(call(&f, &req, 3), OMLD__STATUS__CODE__NOT_FOUND);
    assert_string_equal(f.last->status.field, "delete_items.ids[1]");
    omld_model_stats st;
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.items, 15);
    del.missing_ok = 1;
    assert_int_equal(call(&f, &req, 3), 0);
    assert_int_equal(f.last->msg.delete_items->deleted, 2);
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.items, 13);
    assert_int_equal(st.labels, 4);
    stop(&f);
}

/* The fixture's model in the library, as oml-eval drives it: the default
 * preset at the fixture's sizes, started from all N_ITEMS items (X gets
 * their features) and their labels (label "cK" was the (K+1)-th the store
 * saw: id K), which judge the auto start as the daemon's do. */
static oml_learner *library_learner(float X[N_ITEMS][DIM])
{
    oml_config cfg;
    assert_int_equal(oml_config_preset(&cfg, "default", DIM), 0);
    cfg.layers = 2;
    cfg.hidden = 16;
    cfg.emb = 4;
    cfg.seed = 1;
    cfg.rehearse = 0; /* as the fixture starts the engine */
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &cfg, NULL), 0);
    int32_t labels[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++) {
        features(i, X[i]);
        labels[i] = i % 4;
    }
    assert_int_equal(oml_learner_prepare(l, &X[0][0], labels, N_ITEMS), 0);
    return l;
}

/* Before the first triplet the learner has not taken its start (that is
 * a point of the log), yet queries must not be answered by a random
 * network: the view published after a put serves exactly the start the
 * stored items give (all of them, below the provisional sample's size),
 * while the live learner stays untouched. */
static void test_start_served_before_any_triplet(void **state)
{
    (void)state;
    fixture f;
    start(&f, "default", 1000);
    static put_req p;
    build_put(&p, 0, N_ITEMS);
    assert_int_equal(call(&f, &p.req, N_ITEMS), 0);
    assert_true(omld_views_wait(omld_engine_views(f.e), 2, 5000));
    omld_view *v = omld_views_acquire(omld_engine_views(f.e));
    assert_non_null(v);
    assert_int_equal(v->updates, 0);

    static float X[N_ITEMS][DIM];
    oml_learner *l = library_learner(X);
    const oml_snapshot *s = v->ix->snap;
    assert_int_equal(s->lay.count, l->lay.count);
    assert_memory_equal(s->params, l->params, l->lay.count * sizeof(float));
    omld_view_release(v);
    omld_model_stats st;
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.prepared, 0); /* the live learner waits for its point in the log */
    oml_learner_destroy(l);
    stop(&f);
}

static void test_triplets_unknown_id_changes_nothing(void **state)
{
    fixture f;
    start(&f, "paper", 1000);
    static put_req p;
    build_put(&p, 0, N_ITEMS);
    assert_int_equal(call(&f, &p.req, N_ITEMS), 0);
    static trip_req t;
    build_triplets(&t, 0, 5, 3);
    assert_int_equal(call(&f, &t.req, 5), OMLD__STATUS__CODE__NOT_FOUND);
    assert_string_equal(f.last->status.field, "add_triplets.triplets[3].negative.id");
    omld_model_stats st;
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.updates, 0);
    assert_int_equal(st.queue_depth, 0);
    build_triplets(&t, 0, 5, -1);
    assert_int_equal(call(&f, &t.req, 5), 0);
    assert_int_equal(f.last->msg.add_triplets->accepted, 5);
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.updates, 5);
    assert_int_equal(omld_read(&f.metrics.triplets_applied), 5);
    /* A view with the new model comes within publish_ms (the put may have
     * published one of its own before it: wait past those). */
    omld_view *v = NULL;
    for (uint64_t want = 2; want < 50; want++) {
        assert_true(omld_views_wait(omld_engine_views(f.e), want, 5000));
        v = omld_views_acquire(omld_engine_views(f.e));
        assert_non_null(v);
        if (v->updates == 5)
            break;
        want = v->version;
        omld_view_release(v);
        v = NULL;
    }
    assert_non_null(v);
    assert_int_equal(v->ix->n, N_ITEMS);
    assert_int_equal(v->updates, 5);
    const oml_store *store;
    omld_store_lock *lock;
    omld_engine_store_ref(f.e, &store, &lock);
    assert_int_equal(omld_view_row(v, store, lock, "item-7", 6) >= 0, 1);
    omld_view_release(v);
    stop(&f);
}

/* Feeds a fixed command sequence and checkpoints; returns the model section. */
static uint8_t *run_sequence(const char *preset, size_t *len)
{
    fixture f;
    start(&f, preset, 1000);
    static put_req p;
    static trip_req t;
    build_put(&p, 0, N_ITEMS);
    assert_int_equal(call(&f, &p.req, N_ITEMS), 0);
    for (int b = 0; b < 4; b++) {
        build_triplets(&t, b * 50, 50, -1);
        assert_int_equal(omld_engine_submit(f.e, &t.req, 50, on_done, &f), 0);
        /* Answers may come in any grouping; wait for this one. */
        int want = f.answered + 1;
        while (f.answered < want)
            uv_run(&f.loop, UV_RUN_ONCE);
        assert_int_equal(f.last->status.code, 0);
    }
    checkpoint(&f);
    oml_ckpt ck;
    assert_int_equal(oml_ckpt_load_file(f.last->msg.checkpoint->path, &ck, NULL), 0);
    const oml_ckpt_section *m = oml_ckpt_find(&ck, 1 /* the model */);
    assert_non_null(m);
    uint8_t *buf = malloc(m->len);
    memcpy(buf, m->data, m->len);
    *len = m->len;
    oml_ckpt_free(&ck);
    stop(&f);
    return buf;
}

static void test_deterministic_and_equal_to_library(void **state)
{
    size_t n1, n2;
    uint8_t *a = run_sequence("default", &n1);
    uint8_t *b = run_sequence("default", &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);

    /* The same model through the library directly, as oml-eval drives it. */
    static float X[N_ITEMS][DIM];
    oml_learner *l = library_learner(X);
    oml_replay ring;
    assert_int_equal(oml_replay_init(&ring, (uint32_t)l->cfg.replay), 0);
    for (int r = 0; r < 4; r++) { /* the daemon learns each request's 50 as one call */
        const float *rows[150];
        for (int i = 0; i < 50; i++) {
            int m[3];
            stream_triplet(r * 50 + i, m);
            for (int k = 0; k < 3; k++)
                rows[3 * i + k] = X[m[k]];
        }
        oml_replay_learn(&ring, l, rows, NULL, NULL, 50);
    }
    oml_replay_free(&ring);
    uint8_t *c = NULL;
    size_t n3 = 0;
    assert_int_equal(oml_model_encode(l, &c, &n3), 0);
    assert_int_equal(n3, n1);
    assert_memory_equal(a, c, n1);
    free(a);
    free(b);
    free(c);
    oml_learner_destroy(l);
}

static void test_backpressure_refuses_then_wakes(void **state)
{
    fixture f;
    start(&f, "paper", 64);
    static put_req p;
    build_put(&p, 0, N_ITEMS);
    assert_int_equal(call(&f, &p.req, N_ITEMS), 0);
    /* Hold the store's read lock: the learner blocks in the next put, so
     * what is submitted after it stays queued. */
    omld_engine_store_rdlock(f.e);
    build_put(&p, 0, 2);
    assert_int_equal(omld_engine_submit(f.e, &p.req, 2, on_done, &f), 0);
    static trip_req t1, t2;
    build_triplets(&t1, 0, 40, -1);
    build_triplets(&t2, 40, 40, -1);
    usleep(20000); /* let the learner take the put and block on the lock */
    assert_int_equal(omld_engine_submit(f.e, &t1.req, 40, on_done, &f), 0);
    assert_int_equal(omld_engine_submit(f.e, &t2.req, 40, on_done, &f), 1); /* 80 > 64: full */
    omld_engine_store_unlock(f.e);
    while (f.woken == 0)
        uv_run(&f.loop, UV_RUN_ONCE);
    assert_int_equal(omld_engine_submit(f.e, &t2.req, 40, on_done, &f), 0);
    while (f.answered < 4)
        uv_run(&f.loop, UV_RUN_ONCE);
    omld_model_stats st;
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.updates, 80);
    stop(&f);
}

static void test_pairs_closure_and_conflict(void **state)
{
    fixture f;
    start(&f, "paper", 1000);
    static put_req p;
    build_put(&p, 0, 6);
    assert_int_equal(call(&f, &p.req, 6), 0);

    Omld__Request req;
    Omld__AddPairsRequest body;
    Omld__Pair pairs[3], *pp[3];
    Omld__ItemRef refs[3][2];
    const char *ids[3][2] = {{"item-0", "item-1"}, {"item-1", "item-2"}, {"item-0", "item-3"}};
    int rel[3] = {OMLD__PAIR__RELATION__SIMILAR, OMLD__PAIR__RELATION__SIMILAR,
                  OMLD__PAIR__RELATION__DISSIMILAR};
    omld__request__init(&req);
    omld__add_pairs_request__init(&body);
    for (int i = 0; i < 3; i++) {
        omld__pair__init(&pairs[i]);
        for (int j = 0; j < 2; j++) {
            omld__item_ref__init(&refs[i][j]);
            refs[i][j].ref_case = OMLD__ITEM_REF__REF_ID;
            refs[i][j].id = (char *)ids[i][j];
        }
        pairs[i].a = &refs[i][0];
        pairs[i].b = &refs[i][1];
        pairs[i].relation = rel[i];
        pp[i] = &pairs[i];
    }
    body.n_pairs = 3;
    body.pairs = pp;
    req.body_case = OMLD__REQUEST__BODY_ADD_PAIRS;
    req.add_pairs = &body;
    assert_int_equal(call(&f, &req, 3), 0);
    /* 0~1~2 and 0!~3: the dissimilar fact implies triplets (x, y, 3) for
     * x, y in {0, 1, 2}; some are learned right away. */
    assert_true(f.last->msg.add_pairs->derived_triplets > 0);
    omld_model_stats st;
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.updates, f.last->msg.add_pairs->derived_triplets);
    uint64_t updates = st.updates;

    /* 2 !~ 0 contradicts the closure (0 ~ 2): CONFLICT, nothing changes. */
    ids[0][0] = "item-2";
    ids[0][1] = "item-0";
    refs[0][0].id = (char *)ids[0][0];
    refs[0][1].id = (char *)ids[0][1];
    pairs[0].relation = OMLD__PAIR__RELATION__DISSIMILAR;
    refs[1][1].id = "item-4"; /* a valid new fact before... */
    body.n_pairs = 2;
    pp[0] = &pairs[1];
    pp[1] = &pairs[0];        /* ...the contradicting one */
    assert_int_equal(call(&f, &req, 2), OMLD__STATUS__CODE__CONFLICT);
    assert_string_equal(f.last->status.field, "add_pairs.pairs[1]");
    omld_engine_stats(f.e, &st);
    assert_int_equal(st.updates, updates);
    assert_int_equal(st.closure.similar_pairs, 2);
    stop(&f);
}

/* Checkpoints e and returns the bytes of one section of the file. */
static uint8_t *checkpoint_section(fixture *f, uint32_t tag, size_t *len)
{
    checkpoint(f);
    oml_ckpt ck;
    assert_int_equal(oml_ckpt_load_file(f->last->msg.checkpoint->path, &ck, NULL), 0);
    const oml_ckpt_section *s = oml_ckpt_find(&ck, tag);
    assert_non_null(s);
    uint8_t *buf = malloc(s->len ? s->len : 1);
    memcpy(buf, s->data, s->len);
    *len = s->len;
    oml_ckpt_free(&ck);
    return buf;
}

/* The checkpoint section `tag` of a and b are the same bytes. */
static void assert_same_section(fixture *a, fixture *b, uint32_t tag)
{
    size_t na, nb;
    uint8_t *xa = checkpoint_section(a, tag, &na), *xb = checkpoint_section(b, tag, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(xa, xb, na);
    free(xa);
    free(xb);
}

/* What a kill leaves on disk: a's data directory copied into copy
 * (<dir>-crash) now, whatever the engine is doing. */
static void crash_image(const fixture *a, char *copy, size_t cap)
{
    char cmd[700];
    snprintf(copy, cap, "%s-crash", a->dir);
    snprintf(cmd, sizeof cmd, "cp -a %s %s", a->dir, copy);
    assert_int_equal(system(cmd), 0);
}

/* A crash image (the data directory copied while the engine is idle, so
 * everything answered is in the log) recovers to the same model, store and
 * closure, bit for bit, as the engine that kept running. With and without a
 * checkpoint in the middle of the stream. */
static void recovery_case(int mid_checkpoint)
{
    fixture a, b;
    start(&a, "default", 1000);
    static put_req p;
    static trip_req t;
    build_put(&p, 0, N_ITEMS);
    assert_int_equal(call(&a, &p.req, N_ITEMS), 0);
    for (int k = 0; k < 6; k++) {
        build_triplets(&t, k * 40, 40, -1);
        assert_int_equal(call(&a, &t.req, 40), 0);
        if (k == 2 && mid_checkpoint)
            checkpoint(&a);
        if (k == 3) { /* replace some items, delete one: the log must hold these too */
            build_put(&p, 5, 3);
            p.x[0][0] += 1.0f;
            assert_int_equal(call(&a, &p.req, 3), 0);
        }
    }
    char copy[300];
    crash_image(&a, copy, sizeof copy);

    start_in(&b, "default", 1000, copy);
    omld_model_stats sa, sb;
    omld_engine_stats(a.e, &sa);
    omld_engine_stats(b.e, &sb);
    assert_int_equal(sb.updates, sa.updates);
    assert_int_equal(sb.items, sa.items);
    for (uint32_t tag = 1; tag <= 3; tag++)
        assert_same_section(&a, &b, tag);
    /* Both go on identically after the recovery. */
    build_triplets(&t, 500, 40, -1);
    assert_int_equal(call(&a, &t.req, 40), 0);
    assert_int_equal(call(&b, &t.req, 40), 0);
    assert_same_section(&a, &b, 1);
    stop(&a);
    stop(&b);
}

static void test_recovery_from_log_only(void **state)
{
    recovery_case(0);
}

static void test_recovery_from_checkpoint_and_log(void **state)
{
    recovery_case(1);
}

/* Waits until the engine has stopped rehearsing (its count of rehearsed
 * triplets stays put for 300 ms) and returns that count. */
static uint64_t quiet_rehearsal(fixture *f)
{
    omld_model_stats s;
    omld_engine_stats(f->e, &s);
    uint64_t last = s.rehearsed;
    for (int still = 0; still < 6;) {
        usleep(50000);
        uv_run(&f->loop, UV_RUN_NOWAIT);
        omld_engine_stats(f->e, &s);
        still = s.rehearsed == last ? still + 1 : 0;
        last = s.rehearsed;
    }
    return last;
}

/* Rehearsal runs when the queue is empty, by the clock, and is logged: a
 * crash image taken while it runs (right after the last answer) recovers
 * to the state of that moment, and once the recovered engine has paid the
 * rehearsal still owed, its model is bit for bit the one of the engine that
 * never stopped (the rehearsed triplets are drawn from the same ring with
 * the same RNG however the steps were sliced). */
static void test_rehearsal_recovers_bit_identically(void **state)
{
    (void)state;
    Rehearse = 64; /* the most per new triplet: a long rehearsal to crash in */
    fixture a, b;
    start(&a, "default", 1000);
    static put_req p;
    static trip_req t;
    build_put(&p, 0, N_ITEMS);
    assert_int_equal(call(&a, &p.req, N_ITEMS), 0);
    for (int k = 0; k < 6; k++) {
        build_triplets(&t, k * 40, 40, -1);
        assert_int_equal(call(&a, &t.req, 40), 0);
    }
    char copy[300];
    crash_image(&a, copy, sizeof copy);
    uint64_t ra = quiet_rehearsal(&a);
    assert_true(ra > 0);

    start_in(&b, "default", 1000, copy);
    uint64_t rb = quiet_rehearsal(&b);
    assert_int_equal(rb, ra);
    for (uint32_t tag = 1; tag <= 3; tag++)
        assert_same_section(&a, &b, tag);
    stop(&a);
    stop(&b);
    Rehearse = 0;
}

/* A clean stop writes a final checkpoint; a restart on the directory
 * continues from it with nothing to replay. */
static void test_restart_after_clean_stop(void **state)
{
    fixture a, b;
    start(&a, "paper", 1000);
    static put_req p;
    static trip_req t;
    build_put(&p, 0, N_ITEMS);
    assert_int_equal(call(&a, &p.req, N_ITEMS), 0);
    build_triplets(&t, 0, 50, -1);
    assert_int_equal(call(&a, &t.req, 50), 0);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", a.dir);
    omld_engine_stop(a.e);
    uv_run(&a.loop, UV_RUN_DEFAULT);
    omld_engine_destroy(a.e);
    assert_int_equal(uv_loop_close(&a.loop), 0);
    if (a.last) {
        omld_reply_free(a.last);
        free(a.last);
    }
    start_in(&b, "paper", 1000, dir);
    omld_model_stats sb;
    omld_engine_stats(b.e, &sb);
    assert_int_equal(sb.updates, 50);
    assert_int_equal(sb.items, N_ITEMS);
    stop(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_replace_delete),
        cmocka_unit_test(test_triplets_unknown_id_changes_nothing),
        cmocka_unit_test(test_start_served_before_any_triplet),
        cmocka_unit_test(test_deterministic_and_equal_to_library),
        cmocka_unit_test(test_backpressure_refuses_then_wakes),
        cmocka_unit_test(test_pairs_closure_and_conflict),
        cmocka_unit_test(test_recovery_from_log_only),
        cmocka_unit_test(test_recovery_from_checkpoint_and_log),
        cmocka_unit_test(test_rehearsal_recovers_bit_identically),
        cmocka_unit_test(test_restart_after_clean_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
