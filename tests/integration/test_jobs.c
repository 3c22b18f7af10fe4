/* test_jobs.c - batch-training jobs, named batch models, promote and
 * rollback, against the real daemon (issue 4 item 5).
 *
 * One daemon (dim 16, L 2, hidden 32, emb 8) with 400 labelled items of 4
 * clear clusters. In order:
 *  - a job runs to DONE while another client keeps ingesting triplets and
 *    classifying (answers keep coming during the job, counted); /status
 *    and /metrics show it;
 *  - a job is cancelled mid-epoch and leaves no model;
 *  - one class only, too few items, an unknown method / label are refused
 *    with a clear error;
 *  - queries naming the model answer from it (clusters classified right;
 *    Embed has depth+1 heads with only head `depth` non-zero, alpha
 *    one-hot); unknown names are NOT_FOUND;
 *  - Promote changes the live answers (model_version grows, head `depth` of
 *    the live embedding equals the batch model's), online learning goes on,
 *    Rollback restores the live embedding byte for byte;
 *  - after a promote, SIGKILL + restart: the promoted state, the models and
 *    the answers are identical, and Rollback still works;
 *  - DeleteModel, then NOT_FOUND;
 *  - SIGKILL while a job runs beside acknowledged ingest (issue 12's chaos
 *    list): every acked triplet survives, the job and its model do not. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "blobs.h"
#include "harness.h"
#include "omlclient.h"

#define DIM 16
#define N_ITEMS 400
#define TIMEOUT_MS 30000

#define ARGS_COMMON                                                                        \
    "--dim=16", "--preset=default", "--layers=2", "--hidden=32", "--emb=8", "--seed=3",   \
        "--publish_ms=50", "--max_batch=1000", "--max_k=100"
/* The live model reads the raw input, so a promote copies the batch net
 * (`test_jobs basis`, the default's own: it reads the input through the
 * start's basis, emb 8 < dim 16, and a promote folds the batch net's
 * first layer onto it, promote.h). */
static const char *const ARGS_PLAIN[] = {ARGS_COMMON, "--basis=0", NULL};
static const char *const ARGS_BASIS[] = {ARGS_COMMON, "--basis=1", NULL};
static const char *const *ARGS = ARGS_PLAIN;

static omld_proc g_proc;
static float X[N_ITEMS][DIM];
static char ID[N_ITEMS][16];
static char LABEL[N_ITEMS][8];

static void make_data(void)
{
    oml_test_blobs(&X[0][0], N_ITEMS, DIM, 4, 4242, 0.0f, 0.4f);
    for (int i = 0; i < N_ITEMS; i++) {
        snprintf(ID[i], sizeof ID[i], "item-%d", i);
        snprintf(LABEL[i], sizeof LABEL[i], "c%d", i % 4);
    }
}

static omlc *conn(void)
{
    omlc *c = omld_proc_dial(&g_proc, TIMEOUT_MS);
    if (c == NULL)
        fail_msg("cannot connect to %s", g_proc.rpc);
    return c;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The job's info (copied); fails the test on an error. */
static Omld__JobInfo *job_status(omlc *c, uint64_t id, Omld__Response **hold)
{
    omlc_error err;
    int rc = omlc_train_status(c, id, hold, &err);
    if (rc != 0)
        fail_msg("train_status %llu: %d %s", (unsigned long long)id, rc, err.message);
    return (*hold)->train_status->job;
}

/* Polls until the job has ended; returns its state. */
static int wait_job(omlc *c, uint64_t id, double timeout_s)
{
    double t0 = now_s();
    for (;;) {
        Omld__Response *r = NULL;
        Omld__JobInfo *j = job_status(c, id, &r);
        int st = j->state;
        if (st >= OMLD__JOB_INFO__STATE__DONE) {
            if (st == OMLD__JOB_INFO__STATE__FAILED)
                fprintf(stderr, "job %llu failed: %s\n", (unsigned long long)id, j->error);
            omld__response__free_unpacked(r, NULL);
            return st;
        }
        omld__response__free_unpacked(r, NULL);
        if (now_s() - t0 > timeout_s)
            fail_msg("job %llu did not end within %.0f s", (unsigned long long)id, timeout_s);
        usleep(20000);
    }
}

static uint64_t start_job(omlc *c, const char *method, const char *name, uint32_t epochs,
                          uint32_t patience, const char *const *labels, size_t n_labels,
                          char *model_out, int *code, omlc_error *err)
{
    Omld__TrainStartRequest q = OMLD__TRAIN_START_REQUEST__INIT;
    Omld__TrainParams p = OMLD__TRAIN_PARAMS__INIT;
    q.method = (char *)method;
    q.params = &p;
    p.epochs = epochs;
    p.patience = patience;
    p.batch_m = 4;
    p.batch_k = 8;
    p.depth_opt_case = OMLD__TRAIN_PARAMS__DEPTH_OPT_DEPTH;
    p.depth = 1;
    p.seed_opt_case = OMLD__TRAIN_PARAMS__SEED_OPT_SEED;
    p.seed = 7;
    if (name) {
        q.name_opt_case = OMLD__TRAIN_START_REQUEST__NAME_OPT_NAME;
        q.name = (char *)name;
    }
    q.labels = (char **)labels;
    q.n_labels = n_labels;
    uint64_t id = 0;
    char model[256] = "";
    *code = omlc_train_start(c, &q, &id, model, sizeof model, err);
    if (model_out)
        snprintf(model_out, 256, "%s", model);
    return id;
}

/* Embeds item i (by id) with model (NULL: live); returns the response. */
static Omld__Response *embed(omlc *c, int i, const char *model)
{
    omlc_ref ref = {.id = ID[i]};
    Omld__Response *r = NULL;
    omlc_error err;
    int rc = omlc_embed(c, &ref, model, &r, &err);
    if (rc != 0)
        fail_msg("embed %s (%s): %d %s [%s]", ID[i], model ? model : "live", rc, err.message,
                 err.field);
    return r;
}

/* All heads of an Embed answer, flattened (malloc'd), and the count. */
static float *embed_flat(omlc *c, int i, const char *model, size_t *n, uint64_t *version)
{
    Omld__Response *r = embed(c, i, model);
    size_t tot = 0;
    for (size_t h = 0; h < r->embed->n_heads; h++)
        tot += r->embed->heads[h]->n_values;
    float *out = malloc((tot + r->embed->n_alpha) * sizeof *out);
    size_t o = 0;
    for (size_t h = 0; h < r->embed->n_heads; h++) {
        memcpy(out + o, r->embed->heads[h]->values, r->embed->heads[h]->n_values * sizeof *out);
        o += r->embed->heads[h]->n_values;
    }
    memcpy(out + o, r->embed->alpha, r->embed->n_alpha * sizeof *out);
    *n = tot + r->embed->n_alpha;
    if (version)
        *version = r->model_version;
    omld__response__free_unpacked(r, NULL);
    return out;
}

/* ------------------------------------------------------------ fixture */

static int setup(void **state)
{
    (void)state;
    make_data();
    if (omld_proc_start(&g_proc, ARGS, TIMEOUT_MS) != 0)
        return -1;
    omlc *c = conn();
    omlc_item items[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        items[i] = (omlc_item){.id = ID[i], .features = X[i], .dim = DIM, .label = LABEL[i]};
    omlc_error err;
    int rc = omlc_put_items_pipelined(c, items, N_ITEMS, 100, 4, NULL, NULL, &err);
    omlc_close(c);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    omld_proc_stop(&g_proc, SIGTERM, TIMEOUT_MS);
    omld_proc_cleanup(&g_proc);
    return 0;
}

/* ------------------------------------------------------------ a job beside ingest and queries */

typedef struct load_ctx {
    atomic_int stop;                    /* shared with the load thread: atomics (TSan) */
    atomic_long triplets, queries, errors;
} load_ctx;

static void *load_main(void *arg)
{
    load_ctx *L = arg;
    omlc *c = conn();
    unsigned s = 99;
    omlc_error err;
    while (!L->stop) {
        omlc_triplet t[16];
        for (int k = 0; k < 16; k++) {
            s = s * 1103515245u + 12345u;
            int a = (int)((s >> 8) % N_ITEMS), p = (a + 4) % N_ITEMS, n = (a + 1) % N_ITEMS;
            t[k] = (omlc_triplet){{.id = ID[a]}, {.id = ID[p]}, {.id = ID[n]}, 0.0f};
        }
        if (omlc_add_triplets(c, t, 16, NULL, NULL, &err) == 0)
            L->triplets += 16;
        else
            L->errors++;
        omlc_ref q = {.id = ID[s % N_ITEMS]};
        omlc_classification cl;
        if (omlc_classify(c, &q, 5, NULL, &cl, &err) == 0)
            L->queries++;
        else
            L->errors++;
    }
    omlc_close(c);
    return NULL;
}

static void test_job_beside_ingest(void **state)
{
    (void)state;
    omlc *c = conn();
    load_ctx L = {0};
    pthread_t th;
    pthread_create(&th, NULL, load_main, &L);
    usleep(100000);
    omlc_error err;
    int code;
    char model[256];
    long q0 = L.queries, t0 = L.triplets;
    uint64_t id = start_job(c, "triplet", "t1", 300, 1000, NULL, 0, model, &code, &err);
    assert_int_equal(code, 0);
    assert_true(id >= 1);
    assert_string_equal(model, "t1");
    int st = wait_job(c, id, 120);
    long dq = L.queries - q0, dt = L.triplets - t0;
    L.stop = 1;
    pthread_join(th, NULL);
    fprintf(stderr, "job beside load: %ld classify answers and %ld triplets acknowledged during "
            "the job, %ld errors\n", dq, dt, L.errors);
    assert_int_equal(st, OMLD__JOB_INFO__STATE__DONE);
    assert_true(dq > 0);
    assert_true(dt > 0);
    assert_int_equal(L.errors, 0);

    Omld__Response *r = NULL;
    Omld__JobInfo *j = job_status(c, id, &r);
    assert_string_equal(j->model, "t1");
    assert_int_equal(j->items, N_ITEMS);
    assert_int_equal(j->classes, 4);
    assert_true(j->step > 0);
    omld__response__free_unpacked(r, NULL);

    assert_int_equal(omlc_list_models(c, &r, &err), 0);
    assert_int_equal(r->list_models->n_models, 1);
    Omld__ModelInfo *mi = r->list_models->models[0];
    assert_string_equal(mi->name, "t1");
    assert_string_equal(mi->method, "triplet");
    assert_int_equal(mi->depth, 1);
    assert_int_equal(mi->items_indexed, N_ITEMS);
    omld__response__free_unpacked(r, NULL);

    char *body = NULL;
    size_t len = 0;
    assert_int_equal(omld_http_get(g_proc.http, "/status", &body, &len), 200);
    assert_non_null(strstr(body, "\"jobs\":[{\"id\":1,\"method\":\"triplet\",\"kind\":\"triplet\",\"state\":\"done\""));
    assert_non_null(strstr(body, "\"models\":[{\"name\":\"t1\""));
    free(body);
    assert_int_equal(omld_http_get(g_proc.http, "/metrics", &body, &len), 200);
    assert_non_null(strstr(body, "omld_trainer_jobs{state=\"done\"} 1"));
    assert_non_null(strstr(body, "omld_models 1"));
    free(body);
    omlc_close(c);
}

static void test_cancel(void **state)
{
    (void)state;
    omlc *c = conn();
    omlc_error err;
    int code;
    uint64_t id = start_job(c, "triplet", "never", 10000, 10000, NULL, 0, NULL, &code, &err);
    assert_int_equal(code, 0);
    double t0 = now_s();
    for (;;) { /* running, some steps in */
        Omld__Response *r = NULL;
        Omld__JobInfo *j = job_status(c, id, &r);
        int ok = j->state == OMLD__JOB_INFO__STATE__RUNNING && j->step > 20;
        omld__response__free_unpacked(r, NULL);
        if (ok)
            break;
        assert_true(now_s() - t0 < 30);
        usleep(5000);
    }
    Omld__Response *r = NULL;
    assert_int_equal(omlc_train_cancel(c, id, &r, &err), 0);
    assert_true(r->train_cancel->job->cancel_requested);
    omld__response__free_unpacked(r, NULL);
    assert_int_equal(wait_job(c, id, 30), OMLD__JOB_INFO__STATE__CANCELLED);
    /* No model, and the name is free again. */
    omlc_classification cl;
    omlc_ref q = {.id = ID[0]};
    assert_int_equal(omlc_classify(c, &q, 5, "never", &cl, &err), OMLD__STATUS__CODE__NOT_FOUND);
    assert_string_equal(err.field, "classify.model");
    assert_int_equal(omlc_list_models(c, &r, &err), 0);
    for (size_t i = 0; i < r->list_models->n_models; i++)
        assert_string_not_equal(r->list_models->models[i]->name, "never");
    omld__response__free_unpacked(r, NULL);
    /* Cancelling a finished job is a conflict. */
    assert_int_equal(omlc_train_cancel(c, id, &r, &err), OMLD__STATUS__CODE__CONFLICT);
    omlc_close(c);
}

/* Chaos: SIGKILL while a training job runs beside acknowledged ingest.
 * Nothing acknowledged is lost (the lifetime counter, persisted, covers
 * every acked triplet), the job is forgotten (jobs are not durable), and
 * it leaves no model, no model file and no temporary file behind. */
static uint64_t triplets_applied(omlc *c)
{
    Omld__Response *r = NULL;
    omlc_error err;
    assert_int_equal(omlc_status(c, &r, &err), 0);
    uint64_t n = r->status_info->triplets_applied;
    omld__response__free_unpacked(r, NULL);
    return n;
}

static void test_kill_during_job(void **state)
{
    (void)state;
    omlc *c = conn();
    uint64_t before = triplets_applied(c);
    load_ctx L = {0};
    pthread_t th;
    pthread_create(&th, NULL, load_main, &L);
    omlc_error err;
    int code;
    uint64_t id = start_job(c, "triplet", "killed", 10000, 10000, NULL, 0, NULL, &code, &err);
    assert_int_equal(code, 0);
    double t0 = now_s();
    for (;;) { /* running, some steps in, triplets flowing */
        Omld__Response *r = NULL;
        Omld__JobInfo *j = job_status(c, id, &r);
        int ok = j->state == OMLD__JOB_INFO__STATE__RUNNING && j->step > 20 && L.triplets > 200;
        omld__response__free_unpacked(r, NULL);
        if (ok)
            break;
        assert_true(now_s() - t0 < 30);
        usleep(5000);
    }
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&g_proc, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    long acked = L.triplets; /* every ack came before the kill */
    L.stop = 1;
    pthread_join(th, NULL);

    assert_int_equal(omld_proc_restart(&g_proc, ARGS, TIMEOUT_MS), 0);
    c = conn();
    uint64_t after = triplets_applied(c);
    fprintf(stderr, "kill during a job: %ld triplets acknowledged, %llu applied after the "
            "restart (%llu before the load)\n", acked, (unsigned long long)after,
            (unsigned long long)before);
    assert_true(after >= before + (uint64_t)acked);
    char *body = NULL;
    size_t len = 0;
    assert_int_equal(omld_http_get(g_proc.http, "/status", &body, &len), 200);
    assert_non_null(strstr(body, "\"jobs\":[]"));
    free(body);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_list_models(c, &r, &err), 0);
    for (size_t i = 0; i < r->list_models->n_models; i++)
        assert_string_not_equal(r->list_models->models[i]->name, "killed");
    omld__response__free_unpacked(r, NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/models/killed.omlb", g_proc.dir);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, "%s/models/killed.omlb.tmp", g_proc.dir);
    assert_int_equal(access(path, F_OK), -1);
    omlc_close(c);
}

static void test_refusals(void **state)
{
    (void)state;
    omlc *c = conn();
    omlc_error err;
    int code;
    const char *one[] = {"c0"};
    start_job(c, "triplet", NULL, 5, 0, one, 1, NULL, &code, &err);
    assert_int_equal(code, OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(err.field, "train_start.labels");
    assert_non_null(strstr(err.message, "not enough training data"));
    fprintf(stderr, "one class: %s\n", err.message);

    /* Two items of two fresh labels: too few. */
    omlc_item tiny[2] = {{.id = "tiny-a", .features = X[0], .dim = DIM, .label = "ta"},
                         {.id = "tiny-b", .features = X[1], .dim = DIM, .label = "tb"}};
    assert_int_equal(omlc_put_items(c, tiny, 2, NULL, NULL, &err), 0);
    const char *two[] = {"ta", "tb"};
    start_job(c, "danml", NULL, 5, 0, two, 2, NULL, &code, &err);
    assert_int_equal(code, OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(err.field, "train_start.labels");
    const char *ids[2] = {"tiny-a", "tiny-b"};
    assert_int_equal(omlc_delete_items(c, ids, 2, 0, NULL, &err), 0);

    const char *nolabel[] = {"no-such-label"};
    start_job(c, "triplet", NULL, 5, 0, nolabel, 1, NULL, &code, &err);
    assert_int_equal(code, OMLD__STATUS__CODE__NOT_FOUND);
    assert_string_equal(err.field, "train_start.labels[0]");

    start_job(c, "sgd-magic", NULL, 5, 0, NULL, 0, NULL, &code, &err);
    assert_int_equal(code, OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(err.field, "train_start.method");
    assert_non_null(strstr(err.message, "daml-triplet"));

    start_job(c, "triplet", "t1", 5, 0, NULL, 0, NULL, &code, &err); /* name taken */
    assert_int_equal(code, OMLD__STATUS__CODE__CONFLICT);
    start_job(c, "triplet", "../etc", 5, 0, NULL, 0, NULL, &code, &err);
    assert_int_equal(code, OMLD__STATUS__CODE__INVALID_ARGUMENT);
    assert_string_equal(err.field, "train_start.name");

    Omld__Response *r = NULL;
    assert_int_equal(omlc_train_status(c, 999, &r, &err), OMLD__STATUS__CODE__NOT_FOUND);
    assert_int_equal(omlc_promote(c, "nope", NULL, &err), OMLD__STATUS__CODE__NOT_FOUND);
    assert_string_equal(err.field, "promote.name");
    omlc_close(c);
}

static void test_model_queries(void **state)
{
    (void)state;
    omlc *c = conn();
    omlc_error err;
    int right = 0;
    for (int i = 0; i < 40; i++) {
        omlc_ref q = {.vector = X[i], .dim = DIM};
        omlc_classification cl;
        assert_int_equal(omlc_classify(c, &q, 5, "t1", &cl, &err), 0);
        right += strcmp(cl.label, LABEL[i]) == 0;
    }
    fprintf(stderr, "model t1 classifies %d of 40 right\n", right);
    assert_true(right >= 38);

    Omld__Response *r = embed(c, 5, "t1");
    assert_int_equal(r->embed->n_heads, 2); /* depth 1: heads 0..1 */
    assert_int_equal(r->embed->n_alpha, 2);
    assert_true(r->embed->alpha[0] == 0.0f && r->embed->alpha[1] == 1.0f);
    double n0 = 0, n1 = 0;
    for (size_t k = 0; k < r->embed->heads[0]->n_values; k++) {
        n0 += fabs(r->embed->heads[0]->values[k]);
        n1 += (double)r->embed->heads[1]->values[k] * r->embed->heads[1]->values[k];
    }
    assert_true(n0 == 0.0);
    assert_true(fabs(n1 - 1.0) < 1e-4);
    omld__response__free_unpacked(r, NULL);

    omlc_hit hits[5];
    size_t nh = 0;
    omlc_ref q = {.id = ID[3]};
    assert_int_equal(omlc_retrieve(c, &q, 5, "t1", hits, 5, &nh, NULL, &err), 0);
    assert_int_equal(nh, 5);
    for (size_t i = 0; i < nh; i++)
        assert_string_equal(hits[i].label, LABEL[3]);
    omlc_verification v;
    omlc_ref a = {.id = ID[0]}, b = {.id = ID[4]};
    assert_int_equal(omlc_verify(c, &a, &b, 0, "t1", &v, &err), 0);
    assert_int_equal(v.n_heads, 2);
    assert_int_equal(omlc_embed(c, &q, "no-model", &r, &err), OMLD__STATUS__CODE__NOT_FOUND);
    assert_string_equal(err.field, "embed.model");
    omlc_close(c);
}

/* ------------------------------------------------------------ promote, rollback, restart */

static uint64_t live_version(omlc *c)
{
    Omld__Response *r = NULL;
    omlc_error err;
    assert_int_equal(omlc_status(c, &r, &err), 0);
    uint64_t v = r->status_info->model_version;
    omld__response__free_unpacked(r, NULL);
    return v;
}

static uint64_t rehearsed(omlc *c)
{
    Omld__Response *r = NULL;
    omlc_error err;
    assert_int_equal(omlc_status(c, &r, &err), 0);
    uint64_t n = r->status_info->triplets_rehearsed;
    omld__response__free_unpacked(r, NULL);
    return n;
}

/* The live model's embeddings once it has stopped moving: the new
 * triplets are in the view, but idle rehearsal (logged, so a restart
 * replays it) goes on after that; wait until a 300 ms window (several
 * publish_ms) shows no rehearsal and the same view. */
static float *settled_embed(omlc *c, int k, size_t *n)
{
    for (int i = 0; i < 100; i++) {
        uint64_t r0 = rehearsed(c);
        size_t n0, n1;
        float *e0 = embed_flat(c, k, NULL, &n0, NULL);
        usleep(300000);
        float *e1 = embed_flat(c, k, NULL, &n1, NULL);
        int same = rehearsed(c) == r0 && n0 == n1 && memcmp(e0, e1, n0 * sizeof(float)) == 0;
        free(e0);
        if (same) {
            *n = n1;
            return e1;
        }
        free(e1);
    }
    fail_msg("the live model did not settle in 30 s");
    return NULL;
}

static void test_promote_rollback_restart(void **state)
{
    (void)state;
    omlc *c = conn();
    omlc_error err;
    usleep(200000); /* the triplets of the first test are published */
    size_t n0, n1, nm, n2;
    uint64_t v0, v1;
    float *e0 = embed_flat(c, 7, NULL, &n0, &v0);
    float *em = embed_flat(c, 7, "t1", &nm, NULL);
    assert_int_equal(omlc_promote(c, "t1", &v1, &err), 0);
    assert_true(v1 > v0);
    assert_true(live_version(c) >= v1);
    uint64_t ve;
    float *e1 = embed_flat(c, 7, NULL, &n1, &ve);
    assert_true(ve >= v1);
    assert_int_equal(n0, n1);
    assert_memory_not_equal(e0, e1, n0 * sizeof(float));
    /* Head 1 of the live model is now the batch model's head (with a basis:
     * the batch net on the input's part in its span, test_promote): 3 heads
     * of 8, then alpha (uniform). */
    if (ARGS != ARGS_BASIS)
        assert_memory_equal(e1 + 8, em + 8, 8 * sizeof(float));
    for (int h = 0; h < 3; h++)
        assert_true(fabsf(e1[24 + h] - 1.0f / 3.0f) < 1e-6f);
    /* Online learning goes on from the promoted model. */
    omlc_triplet t[8];
    for (int k = 0; k < 8; k++)
        t[k] = (omlc_triplet){{.id = ID[k]}, {.id = ID[k + 4]}, {.id = ID[k + 1]}, 0.0f};
    assert_int_equal(omlc_add_triplets(c, t, 8, NULL, NULL, &err), 0);

    uint64_t v2;
    assert_int_equal(omlc_rollback(c, &v2, &err), 0);
    assert_true(v2 > v1);
    float *e2 = embed_flat(c, 7, NULL, &n2, NULL);
    assert_int_equal(n2, n0);
    assert_memory_equal(e0, e2, n0 * sizeof(float)); /* exactly the pre-promote model */
    assert_int_equal(omlc_rollback(c, NULL, &err), OMLD__STATUS__CODE__CONFLICT);
    free(e1);
    free(e2);
    /* /status keeps listing both for the dashboard, newest last. */
    char *body = NULL;
    assert_int_equal(omld_http_get(g_proc.http, "/status", &body, NULL), 200);
    json_t *st = json_loads(body, 0, NULL), *pr = json_object_get(st, "promotes");
    free(body);
    assert_true(json_is_array(pr) && json_array_size(pr) >= 2);
    size_t np = json_array_size(pr);
    json_t *p1 = json_array_get(pr, np - 2), *p2 = json_array_get(pr, np - 1);
    assert_string_equal(json_string_value(json_object_get(p1, "action")), "promote");
    assert_string_equal(json_string_value(json_object_get(p1, "model")), "t1");
    assert_int_equal(json_integer_value(json_object_get(p1, "version")), (json_int_t)v1);
    assert_string_equal(json_string_value(json_object_get(p2, "action")), "rollback");
    assert_string_equal(json_string_value(json_object_get(p2, "model")), "t1");
    assert_int_equal(json_integer_value(json_object_get(p2, "version")), (json_int_t)v2);
    assert_true(json_integer_value(json_object_get(p2, "unix_ms")) >= json_integer_value(json_object_get(p1, "unix_ms")));
    json_decref(st);

    /* Promote again, learn a little, then SIGKILL. */
    assert_int_equal(omlc_promote(c, "t1", NULL, &err), 0);
    assert_int_equal(omlc_add_triplets(c, t, 8, NULL, NULL, &err), 0);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_status(c, &r, &err), 0);
    uint64_t applied = r->status_info->triplets_applied;
    omld__response__free_unpacked(r, NULL);
    for (int i = 0; i < 100; i++) { /* the view shows the 8 triplets */
        assert_int_equal(omlc_status(c, &r, &err), 0);
        int ok = r->status_info->view_triplets == applied;
        omld__response__free_unpacked(r, NULL);
        if (ok)
            break;
        usleep(20000);
    }
    size_t n3, nm2;
    float *e3 = settled_embed(c, 7, &n3);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&g_proc, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&g_proc, ARGS, TIMEOUT_MS), 0);
    c = conn();
    float *e4 = embed_flat(c, 7, NULL, &n3, NULL);
    assert_memory_equal(e3, e4, n3 * sizeof(float)); /* the promoted, then learned, state */
    float *em2 = embed_flat(c, 7, "t1", &nm2, NULL);
    assert_int_equal(nm, nm2);
    assert_memory_equal(em, em2, nm * sizeof(float)); /* the model file came back */
    assert_int_equal(omlc_list_models(c, &r, &err), 0);
    assert_int_equal(r->list_models->n_models, 1);
    assert_int_equal(r->list_models->models[0]->items_indexed, N_ITEMS);
    omld__response__free_unpacked(r, NULL);
    /* Rollback still works after the restart (replayed promote). */
    assert_int_equal(omlc_rollback(c, NULL, &err), 0);
    float *e5 = embed_flat(c, 7, NULL, &n2, NULL);
    assert_memory_equal(e0, e5, n0 * sizeof(float));

    /* And after a checkpoint + clean restart too (the rollback section). */
    assert_int_equal(omlc_promote(c, "t1", NULL, &err), 0);
    assert_int_equal(omlc_checkpoint(c, &r, &err), 0);
    omld__response__free_unpacked(r, NULL);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&g_proc, SIGTERM, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_restart(&g_proc, ARGS, TIMEOUT_MS), 0);
    c = conn();
    assert_int_equal(omlc_rollback(c, NULL, &err), 0);
    float *e6 = embed_flat(c, 7, NULL, &n2, NULL);
    assert_memory_equal(e0, e6, n0 * sizeof(float));

    /* DeleteModel, then NOT_FOUND. */
    assert_int_equal(omlc_delete_model(c, "t1", &err), 0);
    omlc_classification cl;
    omlc_ref q = {.id = ID[1]};
    assert_int_equal(omlc_classify(c, &q, 5, "t1", &cl, &err), OMLD__STATUS__CODE__NOT_FOUND);
    assert_int_equal(omlc_delete_model(c, "t1", &err), OMLD__STATUS__CODE__NOT_FOUND);
    assert_int_equal(omlc_promote(c, "t1", NULL, &err), OMLD__STATUS__CODE__NOT_FOUND);
    free(e0);
    free(em);
    free(em2);
    free(e3);
    free(e4);
    free(e5);
    free(e6);
    omlc_close(c);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_beside_ingest),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_model_queries),
        cmocka_unit_test(test_promote_rollback_restart),
        cmocka_unit_test(test_kill_during_job),
    };
    const struct CMUnitTest basis_tests[] = {
        cmocka_unit_test(test_job_beside_ingest), /* trains t1 */
        cmocka_unit_test(test_promote_rollback_restart),
    };
    if (argc > 1 && strcmp(argv[1], "basis") == 0) {
        ARGS = ARGS_BASIS;
        return cmocka_run_group_tests(basis_tests, setup, teardown);
    }
    return cmocka_run_group_tests(tests, setup, teardown);
}
