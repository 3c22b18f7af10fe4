/* test_daemon.c - the real omld, started on ephemeral ports in a temporary
 * directory, driven through libomlclient and plain HTTP.
 *
 * The data: 4 classes of items in 16 dimensions, each class a tight cloud
 * around its own centre, so a model that serves correctly must classify
 * every item by its neighbours and retrieve its own class. */
#include <fcntl.h>
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
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "blobs.h"
#include "frame.h"
#include "harness.h"
#include "omlclient.h"
#include "snapshot.h"

#define DIM 16
#define N_ITEMS 200
#define CLASSES 4
#define TIMEOUT_MS 20000

static const char *const MODEL_ARGS[] = {
    "--dim=16", "--preset=default", "--layers=2", "--hidden=32", "--emb=8",
    "--publish_ms=50", "--max_batch=1000", "--max_k=100", "--seed=3",
    "--query_group_jobs=4", /* grouped single classify requests, in every test here */
    NULL};

static float X[N_ITEMS][DIM];
static char ID[N_ITEMS][16];
static char LABEL[N_ITEMS][8];

static void make_data(void)
{
    oml_test_blobs(&X[0][0], N_ITEMS, DIM, CLASSES, 12345, 0.5f, 0.1f);
    for (int i = 0; i < N_ITEMS; i++) {
        snprintf(ID[i], sizeof ID[i], "item-%d", i);
        snprintf(LABEL[i], sizeof LABEL[i], "class-%d", i % CLASSES);
    }
}

static omlc *dial(const omld_proc *p)
{
    omlc *c = omld_proc_dial(p, TIMEOUT_MS);
    assert_non_null(c);
    return c;
}

static void put_all(omlc *c)
{
    omlc_item items[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        items[i] = (omlc_item){ID[i], X[i], DIM, LABEL[i]};
    uint32_t created = 0, replaced = 0;
    omlc_error err;
    assert_int_equal(omlc_put_items(c, items, N_ITEMS, &created, &replaced, &err), 0);
    assert_int_equal(created + replaced, N_ITEMS);
}

/* Triplet i: anchor and positive of one class, negative of the next. */
static omlc_triplet triplet_by_id(int i)
{
    int a = (i * 7) % N_ITEMS;
    int p = (a + CLASSES * (1 + i % 5)) % N_ITEMS;
    int n = (a + 1) % N_ITEMS;
    return (omlc_triplet){{ID[a], NULL, 0}, {ID[p], NULL, 0}, {ID[n], NULL, 0}, 0.0f};
}

static Omld__StatusResponse *status(omlc *c, Omld__Response **keep)
{
    omlc_error err;
    assert_int_equal(omlc_status(c, keep, &err), 0);
    return (*keep)->status_info;
}

/* Waits until the daemon has applied `applied` triplets and published a view
 * that includes them. */
static void wait_learned(omlc *c, uint64_t applied)
{
    for (int i = 0; i < 2000; i++) {
        Omld__Response *r;
        Omld__StatusResponse *s = status(c, &r);
        int done = s->triplets_applied >= applied && s->queue_depth == 0;
        omld__response__free_unpacked(r, NULL);
        if (done)
            break;
        usleep(5000);
    }
    omlc_verification v;
    omlc_error err;
    omlc_ref a = {ID[0], NULL, 0};
    assert_int_equal(omlc_verify(c, &a, &a, 0, NULL, &v, &err), 0);
    uint64_t start = v.model_version;
    /* The view that answers next is newer than the one before the wait. */
    for (int i = 0; i < 400 && v.model_version == start; i++) {
        usleep(5000);
        assert_int_equal(omlc_verify(c, &a, &a, 0, NULL, &v, &err), 0);
    }
}

/* ------------------------------------------------------------ fixture */

static omld_proc g_proc;

static int setup_daemon(void **state)
{
    make_data();
    if (omld_proc_start(&g_proc, MODEL_ARGS, TIMEOUT_MS) != 0)
        return -1;
    omlc *c = dial(&g_proc);
    put_all(c);
    omlc_close(c);
    return 0;
}

static int teardown_daemon(void **state)
{
    int rc = omld_proc_stop(&g_proc, SIGTERM, TIMEOUT_MS);
    if (rc != 0)
        omld_proc_dump_log(&g_proc);
    omld_proc_cleanup(&g_proc);
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ happy paths */

static void test_every_operation(void **state)
{
    omlc *c = dial(&g_proc);
    omlc_error err;

    /* GetItems round-trips features and labels. */
    const char *ids[2] = {ID[5], ID[6]};
    Omld__Response *r = NULL;
    assert_int_equal(omlc_get_items(c, ids, 2, &r, &err), 0);
    assert_int_equal(r->get_items->n_items, 2);
    assert_string_equal(r->get_items->items[1]->id, ID[6]);
    assert_string_equal(r->get_items->items[1]->label, LABEL[6]);
    assert_int_equal(r->get_items->items[0]->n_features, DIM);
    assert_memory_equal(r->get_items->items[0]->features, X[5], DIM * sizeof(float));
    omld__response__free_unpacked(r, NULL);

    /* Triplets by id and by inline vector, then pairs. */
    omlc_triplet t[300];
    for (int i = 0; i < 300; i++)
        t[i] = triplet_by_id(i);
    t[7].negative = (omlc_ref){NULL, X[9], DIM};
    for (int i = 0; i < 300; i += 3) /* some clicks weigh more, some less */
        t[i].weight = i % 2 ? 0.5f : 4.0f;
    uint32_t accepted = 0;
    uint64_t depth = 0;
    assert_int_equal(omlc_add_triplets(c, t, 300, &accepted, &depth, &err), 0);
    assert_int_equal(accepted, 300);
    omlc_pair pr[2] = {{{ID[0], NULL, 0}, {ID[4], NULL, 0}, 1},
                       {{ID[0], NULL, 0}, {ID[1], NULL, 0}, 0}};
    uint64_t derived = 0;
    assert_int_equal(omlc_add_pairs(c, pr, 2, &accepted, &derived, &err), 0);
    assert_int_equal(accepted, 2);
    wait_learned(c, 300 + derived);

    Omld__StatusResponse *s = status(c, &r);
    assert_int_equal(s->dim, DIM);
    assert_int_equal(s->depth, 2);
    assert_int_equal(s->n_alpha, 3);
    assert_int_equal(s->items, N_ITEMS);
    assert_true(s->triplets_received >= 300);
    assert_int_equal(s->triplets_applied, s->triplets_received + derived);
    float sum = 0;
    for (size_t i = 0; i < s->n_alpha; i++)
        sum += s->alpha[i];
    assert_float_equal(sum, 1.0f, 1e-4);
    omld__response__free_unpacked(r, NULL);

    /* Classify by id (the item itself excluded) and by vector. */
    for (int i = 0; i < 12; i++) {
        omlc_classification cl;
        omlc_ref q = {ID[i], NULL, 0};
        assert_int_equal(omlc_classify(c, &q, 5, NULL, &cl, &err), 0);
        assert_string_equal(cl.label, LABEL[i]);
        assert_true(cl.model_version >= 2);
        assert_true(cl.n_scores >= 1);
        omlc_ref qv = {NULL, X[i], DIM};
        assert_int_equal(omlc_classify(c, &qv, 5, "live", &cl, &err), 0);
        assert_string_equal(cl.label, LABEL[i]);
    }

    /* Verify: an item and a classmate vs an item of another class. */
    omlc_verification v;
    omlc_ref a = {ID[0], NULL, 0}, same = {ID[4], NULL, 0};
    assert_int_equal(omlc_verify(c, &a, &a, 0.5f, NULL, &v, &err), 0);
    assert_true(v.similar);
    assert_float_equal(v.score, 1.0f, 1e-5);
    assert_int_equal(v.n_heads, 3);
    assert_int_equal(omlc_verify(c, &a, &same, 0, NULL, &v, &err), 0);
    for (int h = 0; h < v.n_heads; h++)
        assert_true(v.distances[h] >= 0 && v.distances[h] <= 2);

    /* Retrieve by id: k hits of the same class, never the item itself. */
    omlc_hit hits[10];
    size_t n_hits = 0;
    uint64_t version = 0;
    assert_int_equal(omlc_retrieve(c, &a, 10, NULL, hits, 10, &n_hits, &version, &err), 0);
    assert_int_equal(n_hits, 10);
    for (size_t i = 0; i < n_hits; i++) {
        assert_string_not_equal(hits[i].id, ID[0]);
        assert_string_equal(hits[i].label, LABEL[0]);
        assert_true(hits[i].similarity > -1.0001f && hits[i].similarity < 1.0001f);
        if (i)
            assert_true(hits[i].score <= hits[i - 1].score);
    }

    /* The same through the filter: only another class, never the best of
     * it, the next page of it, a floor; the similarity is the pair's. */
    const char *other[1] = {LABEL[1]};
    omlc_hit all[10], page[5];
    omlc_retrieve_filter f = {other, 1, NULL, 0, 0, 0, 0.0f, NULL, 0};
    assert_int_equal(omlc_retrieve_where(c, &a, 10, NULL, &f, all, 10, &n_hits, NULL, &err), 0);
    assert_int_equal(n_hits, 10);
    for (size_t i = 0; i < n_hits; i++)
        assert_string_equal(all[i].label, LABEL[1]);
    const char *best[1] = {all[0].id};
    f.exclude_ids = best;
    f.n_exclude_ids = 1;
    f.offset = 4;
    size_t n_page = 0;
    assert_int_equal(omlc_retrieve_where(c, &a, 5, NULL, &f, page, 5, &n_page, NULL, &err), 0);
    assert_int_equal(n_page, 5);
    for (size_t i = 0; i < n_page; i++) {
        assert_string_not_equal(page[i].id, all[0].id);
        assert_string_equal(page[i].label, LABEL[1]);
        for (size_t j = 0; j < n_hits; j++) /* one item, one similarity, whatever the page */
            if (strcmp(page[i].id, all[j].id) == 0)
                assert_true(page[i].similarity == all[j].similarity);
    }
    f = (omlc_retrieve_filter){NULL, 0, NULL, 0, 0, 1, hits[4].similarity, NULL, 0};
    assert_int_equal(omlc_retrieve_where(c, &a, 10, NULL, &f, all, 10, &n_hits, NULL, &err), 0);
    assert_true(n_hits >= 1 && n_hits <= 10);
    for (size_t i = 0; i < n_hits; i++)
        assert_true(all[i].similarity >= hits[4].similarity);
    f.min_similarity = 2.0f; /* refused, naming the field */
    assert_int_equal(omlc_retrieve_where(c, &a, 10, NULL, &f, all, 10, &n_hits, NULL, &err), 1);
    assert_string_equal(err.field, "retrieve.min_similarity");

    /* Embed: L+1 unit vectors and the hedge weights. */
    assert_int_equal(omlc_embed(c, &a, NULL, &r, &err), 0);
    assert_int_equal(r->embed->n_heads, 3);
    for (size_t h = 0; h < r->embed->n_heads; h++) {
        double nn = 0;
        assert_int_equal(r->embed->heads[h]->n_values, 8);
        for (size_t j = 0; j < 8; j++)
            nn += (double)r->embed->heads[h]->values[j] * r->embed->heads[h]->values[j];
        assert_float_equal(nn, 1.0, 1e-4);
    }
    assert_int_equal(r->embed->n_alpha, 3);
    omld__response__free_unpacked(r, NULL);

    int live = 0, ready = 0, draining = 1;
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 0);
    assert_true(live && ready && !draining);

    assert_int_equal(omlc_checkpoint(c, &r, &err), 0);
    assert_true(r->checkpoint->bytes > 0);
    assert_int_equal(access(r->checkpoint->path, R_OK), 0);
    omld__response__free_unpacked(r, NULL);

    /* Delete, then the id is gone for reads and for constraints. */
    const char *gone[1] = {"item-199"};
    uint32_t deleted = 0;
    assert_int_equal(omlc_delete_items(c, gone, 1, 0, &deleted, &err), 0);
    assert_int_equal(deleted, 1);
    assert_int_equal(omlc_get_items(c, gone, 1, &r, &err), 2 /* NOT_FOUND */);
    assert_string_equal(err.field, "get_items.ids[0]");
    /* Put it back so later tests see all items. */
    omlc_item it = {ID[199], X[199], DIM, LABEL[199]};
    assert_int_equal(omlc_put_items(c, &it, 1, NULL, NULL, &err), 0);
    omlc_close(c);
}

/* ExportModel: the file decodes, and embeds an item bit for bit as the
 * daemon's own Embed does at the same model version (the learner may
 * publish between the two calls: then the round is repeated). */
static void test_export_model_embeds_as_the_daemon(void **state)
{
    (void)state;
    omlc *c = dial(&g_proc);
    omlc_error err;
    omlc_ref a = {NULL, X[3], DIM};
    int compared = 0;
    for (int round = 0; round < 50 && !compared; round++) {
        Omld__Response *ex = NULL, *em = NULL;
        assert_int_equal(omlc_export_model(c, NULL, &ex, &err), 0);
        assert_int_equal(omlc_embed(c, &a, NULL, &em, &err), 0);
        assert_int_equal(ex->export_model->version, ex->model_version);
        if (ex->model_version == em->model_version) {
            oml_snapshot *s = NULL;
            oml_diag diag = {0};
            assert_int_equal(oml_snapshot_decode(&s, ex->export_model->model.data,
                                                 ex->export_model->model.len, &diag), OML_OK);
            assert_int_equal(s->version, em->model_version);
            assert_int_equal(ex->export_model->dim, DIM);
            size_t heads = ex->export_model->heads, emb = ex->export_model->emb;
            assert_int_equal(heads, em->embed->n_heads);
            float *f = malloc(heads * emb * sizeof *f);
            assert_int_equal(oml_snapshot_embed(s, X[3], 1, f), OML_OK);
            for (size_t h = 0; h < heads; h++) {
                assert_int_equal(em->embed->heads[h]->n_values, emb);
                assert_memory_equal(f + h * emb, em->embed->heads[h]->values, emb * sizeof *f);
                assert_true(s->alpha[h] == em->embed->alpha[h]);
            }
            free(f);
            oml_snapshot_release(s);
            compared = 1;
        }
        omld__response__free_unpacked(ex, NULL);
        omld__response__free_unpacked(em, NULL);
    }
    assert_true(compared);
    /* A batch model that does not exist is named. */
    Omld__Response *r = NULL;
    assert_int_equal(omlc_export_model(c, "no-such-model", &r, &err), 2 /* NOT_FOUND */);
    assert_string_equal(err.field, "export_model.model");
    omlc_close(c);
}

/* ClassifyBatch and RetrieveBatch: every answer is the one its query gets
 * alone from the same view (compared when the batch and the single
 * requests were answered by one model version: the learner may publish
 * between them, then the round is repeated); errors name the query. */
static void test_query_batches(void **state)
{
    omlc *c = dial(&g_proc);
    omlc_error err;
    enum { M = 40 };
    omlc_ref q[M];
    for (int i = 0; i < M; i++)
        q[i] = i % 2 ? (omlc_ref){ID[i * 3], NULL, 0} : (omlc_ref){NULL, X[i * 3], DIM};
    const char *labels[1] = {LABEL[2]}, *exclude[2] = {ID[6], ID[10]};
    omlc_retrieve_filter f[M];
    memset(f, 0, sizeof f);
    for (int i = 0; i < M; i += 3)
        f[i] = (omlc_retrieve_filter){labels, 1, exclude, 2, (uint32_t)(i % 2), 0, 0.0f, NULL, 0};
    f[4].has_min_similarity = 1;
    f[4].min_similarity = 0.9f;

    int compared = 0;
    for (int round = 0; round < 50 && !compared; round++) {
        omlc_classification got[M], one;
        assert_int_equal(omlc_classify_batch(c, q, M, 5, NULL, got, &err), 0);
        uint64_t version = got[0].model_version;
        int same = 1;
        for (int i = 0; i < M; i++) {
            assert_string_equal(got[i].label, LABEL[i * 3]); /* easy classes */
            assert_int_equal(got[i].model_version, version);
            assert_int_equal(omlc_classify(c, &q[i], 5, NULL, &one, &err), 0);
            same &= one.model_version == version;
            if (one.model_version != version)
                continue;
            assert_string_equal(one.label, got[i].label);
            assert_int_equal(one.n_scores, got[i].n_scores);
            for (int j = 0; j < one.n_scores; j++) {
                assert_string_equal(one.scores[j].label, got[i].scores[j].label);
                assert_true(one.scores[j].score == got[i].scores[j].score);
            }
        }

        static omlc_hit hits[M][7], want[7];
        size_t n_hits[M], n_want = 0;
        uint64_t rversion = 0, v1 = 0;
        assert_int_equal(omlc_retrieve_batch(c, q, M, 7, NULL, f, &hits[0][0], 7, n_hits,
                                             &rversion, &err),
                         0);
        for (int i = 0; i < M; i++) {
            assert_int_equal(omlc_retrieve_where(c, &q[i], 7, NULL, &f[i], want, 7, &n_want, &v1,
                                                 &err),
                             0);
            same &= v1 == rversion;
            if (v1 != rversion)
                continue;
            assert_int_equal(n_hits[i], n_want);
            for (size_t j = 0; j < n_want; j++) {
                assert_string_equal(hits[i][j].id, want[j].id);
                assert_string_equal(hits[i][j].label, want[j].label);
                assert_true(hits[i][j].score == want[j].score);
                assert_true(hits[i][j].similarity == want[j].similarity);
                if (f[i].n_labels)
                    assert_string_equal(hits[i][j].label, LABEL[2]);
            }
        }
        compared = same;
        if (!compared)
            usleep(100000); /* a view was published meanwhile: once more */
    }
    assert_true(compared);

    /* Refusals: empty, over max_batch (1000), an unknown id, a model. */
    assert_int_equal(omlc_classify_batch(c, q, 0, 5, NULL, NULL, &err), 1);
    assert_string_equal(err.field, "classify_batch.queries");
    static omlc_ref many[1001];
    static omlc_classification many_out[1001];
    for (int i = 0; i < 1001; i++)
        many[i] = (omlc_ref){ID[i % N_ITEMS], NULL, 0};
    assert_int_equal(omlc_classify_batch(c, many, 1001, 5, NULL, many_out, &err), 1);
    assert_string_equal(err.field, "classify_batch.queries");
    assert_int_equal(omlc_classify_batch(c, many, 1000, 5, NULL, many_out, &err), 0);
    q[3] = (omlc_ref){"no-such-item", NULL, 0};
    assert_int_equal(omlc_classify_batch(c, q, M, 5, NULL, many_out, &err), 2);
    assert_string_equal(err.field, "classify_batch.queries[3].query.id");
    size_t n_hits[M];
    static omlc_hit hits[M];
    assert_int_equal(omlc_retrieve_batch(c, q, M, 1, NULL, NULL, hits, 1, n_hits, NULL, &err), 2);
    assert_string_equal(err.field, "retrieve_batch.queries[3].query.id");
    assert_int_equal(omlc_classify_batch(c, q, 2, 5, "no-model", many_out, &err), 2);
    assert_string_equal(err.field, "classify_batch.queries[0].model");
    omlc_close(c);
#ifdef OMLCTL_BIN
    /* omlctl classify / retrieve --batch FILE: ids and a vector, in
     * requests of 2 queries; one JSON answer per query, in order. */
    char path[] = "/tmp/omld-batch-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    dprintf(fd, "# queries\n%s\n\n%s\n", ID[1], ID[2]);
    for (int j = 0; j < DIM; j++)
        dprintf(fd, "%s%.9g", j ? "," : "", X[3][j]);
    dprintf(fd, "\n");
    close(fd);
    char cmd[512], got[8192];
    snprintf(cmd, sizeof cmd, "%s --server %s classify --batch %s --batch-size 2 --k 5 --json",
             OMLCTL_BIN, g_proc.rpc, path);
    FILE *out = popen(cmd, "r");
    assert_non_null(out);
    size_t len = fread(got, 1, sizeof got - 1, out);
    got[len] = '\0';
    assert_int_equal(pclose(out), 0);
    char want[128];
    const char *at = got;
    for (int i = 1; i <= 3; i++) {
        snprintf(want, sizeof want, "{\"query\":\"%s\",\"label\":\"%s\"",
                 i < 3 ? ID[i] : "line 5", LABEL[i]);
        at = strstr(at, want);
        if (at == NULL)
            fail_msg("omlctl classify --batch printed:\n%s\nwithout %s", got, want);
    }
    snprintf(cmd, sizeof cmd, "%s --server %s retrieve --batch %s --k 3 --label %s", OMLCTL_BIN,
             g_proc.rpc, path, LABEL[0]);
    out = popen(cmd, "r");
    assert_non_null(out);
    len = fread(got, 1, sizeof got - 1, out);
    got[len] = '\0';
    assert_int_equal(pclose(out), 0);
    unlink(path);
    assert_non_null(strstr(got, "query line 5\n3 hits"));
    size_t hits_of_label = 0;
    for (at = got; (at = strstr(at, LABEL[0])) != NULL; at++)
        hits_of_label++;
    assert_int_equal(hits_of_label, 3 * 3);
#endif

    /* Counted once per batch, by kind. */
    char *body = NULL;
    size_t body_len = 0;
    assert_int_equal(omld_http_get(g_proc.http, "/metrics", &body, &body_len), 200);
    const char *line = strstr(body, "omld_queries_total{kind=\"classify_batch\"} ");
    assert_non_null(line);
    assert_true(atof(line + strlen("omld_queries_total{kind=\"classify_batch\"} ")) >= 2);
    assert_non_null(strstr(body, "omld_queries_total{kind=\"retrieve_batch\"} "));
    free(body);
}

/* Single classify requests that arrive together (pipelined on one
 * connection) are answered in groups on this exact-scan view (coalesce.c),
 * each answer the one the request gets alone, in order. */
static void test_concurrent_classify_grouped(void **state)
{
    omlc *c = dial(&g_proc);
    omlc_error err;
    enum { M = 120 };
    static omlc_ref q[M];
    static omlc_classification got[M];
    for (int i = 0; i < M; i++)
        q[i] = i % 2 ? (omlc_ref){ID[i], NULL, 0} : (omlc_ref){NULL, X[i], DIM};
    int compared = 0;
    for (int round = 0; round < 50 && !compared; round++) {
        assert_int_equal(omlc_classify_pipelined(c, q, M, 5, NULL, M, got, NULL, NULL, &err), 0);
        int same = 1;
        for (int i = 0; i < M && same; i++) {
            omlc_classification one;
            assert_int_equal(omlc_classify(c, &q[i], 5, NULL, &one, &err), 0);
            same = one.model_version == got[i].model_version;
            if (!same)
                break; /* a view was published meanwhile: once more */
            assert_string_equal(one.label, got[i].label);
            assert_int_equal(one.n_scores, got[i].n_scores);
            for (int j = 0; j < one.n_scores; j++) {
                assert_string_equal(one.scores[j].label, got[i].scores[j].label);
                assert_true(one.scores[j].score == got[i].scores[j].score);
            }
        }
        compared = same;
        if (!compared)
            usleep(100000);
    }
    assert_true(compared);
    omlc_close(c);
    char *body = NULL;
    size_t len = 0;
    assert_int_equal(omld_http_get(g_proc.http, "/metrics", &body, &len), 200);
    const char *line = strstr(body, "\nomld_queries_grouped_total "); /* the sample, not # HELP */
    assert_non_null(line);
    assert_true(atof(line + strlen("\nomld_queries_grouped_total ")) > 0);
    free(body);
}

static void test_pipelined_answers_in_order(void **state)
{
    omlc *c = dial(&g_proc);
    omlc_error err;
    enum { N = 120 };
    Omld__Request req[N];
    Omld__ClassifyRequest cl[N];
    Omld__StatusRequest st[N];
    Omld__AddTripletsRequest at[N];
    Omld__ItemRef ref[N];
    Omld__Triplet tr[N], *trp[N];
    Omld__ItemRef tref[N][3];
    for (int i = 0; i < N; i++) {
        omld__request__init(&req[i]);
        switch (i % 3) {
        case 0:
            omld__classify_request__init(&cl[i]);
            omld__item_ref__init(&ref[i]);
            ref[i].ref_case = OMLD__ITEM_REF__REF_ID;
            ref[i].id = ID[i % N_ITEMS];
            cl[i].query = &ref[i];
            req[i].body_case = OMLD__REQUEST__BODY_CLASSIFY;
            req[i].classify = &cl[i];
            break;
        case 1: {
            omlc_triplet t = triplet_by_id(i);
            omld__add_triplets_request__init(&at[i]);
            omld__triplet__init(&tr[i]);
            const char *m[3] = {t.anchor.id, t.positive.id, t.negative.id};
            for (int j = 0; j < 3; j++) {
                omld__item_ref__init(&tref[i][j]);
                tref[i][j].ref_case = OMLD__ITEM_REF__REF_ID;
                tref[i][j].id = (char *)m[j];
            }
            tr[i].anchor = &tref[i][0];
            tr[i].positive = &tref[i][1];
            tr[i].negative = &tref[i][2];
            trp[i] = &tr[i];
            at[i].n_triplets = 1;
            at[i].triplets = &trp[i];
            req[i].body_case = OMLD__REQUEST__BODY_ADD_TRIPLETS;
            req[i].add_triplets = &at[i];
            break;
        }
        default:
            omld__status_request__init(&st[i]);
            req[i].body_case = OMLD__REQUEST__BODY_STATUS;
            req[i].status = &st[i];
        }
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(omlc_send(c, &req[i], &err), 0);
    for (int i = 0; i < N; i++) {
        Omld__Response *r = NULL;
        assert_int_equal(omlc_recv(c, &r, &err), 0);
        assert_int_equal(r->request_id, req[i].request_id);
        int want[3] = {OMLD__RESPONSE__BODY_CLASSIFY, OMLD__RESPONSE__BODY_ADD_TRIPLETS,
                       OMLD__RESPONSE__BODY_STATUS_INFO};
        assert_int_equal(r->body_case, want[i % 3]);
        omld__response__free_unpacked(r, NULL);
    }
    omlc_close(c);
}

/* ------------------------------------------------------------ bad input */

static void expect_error(int rc, const omlc_error *err, int code, const char *field)
{
    if (rc != code || (field && strcmp(err->field, field) != 0))
        fprintf(stderr, "expected %d '%s', got %d '%s': %s\n", code, field ? field : "", rc,
                err->field, err->message);
    assert_int_equal(rc, code);
    if (field)
        assert_string_equal(err->field, field);
    assert_true(err->message[0] != 0);
}

static void test_bad_requests_change_nothing(void **state)
{
    omlc *c = dial(&g_proc);
    omlc_error err;
    Omld__Response *r;
    Omld__StatusResponse *s = status(c, &r);
    uint64_t items = s->items, received = s->triplets_received;
    omld__response__free_unpacked(r, NULL);

    float bad[DIM + 1];
    memcpy(bad, X[0], sizeof X[0]);
    omlc_item wrong_dim[2] = {{"new-1", X[1], DIM, NULL}, {"new-2", bad, DIM - 1, NULL}};
    expect_error(omlc_put_items(c, wrong_dim, 2, NULL, NULL, &err), &err, 3 /* WRONG_DIMENSION */,
                 "put_items.items[1].features");
    bad[3] = NAN;
    omlc_item nan_item[2] = {{"new-1", X[1], DIM, NULL}, {"new-2", bad, DIM, NULL}};
    expect_error(omlc_put_items(c, nan_item, 2, NULL, NULL, &err), &err, 4 /* NON_FINITE */,
                 "put_items.items[1].features");
    bad[3] = INFINITY;
    expect_error(omlc_put_items(c, nan_item, 2, NULL, NULL, &err), &err, 4, NULL);
    omlc_item dup[2] = {{"new-1", X[1], DIM, NULL}, {"new-1", X[2], DIM, NULL}};
    expect_error(omlc_put_items(c, dup, 2, NULL, NULL, &err), &err, 12 /* CONFLICT */, NULL);
    omlc_item empty_id[1] = {{"", X[1], DIM, NULL}};
    expect_error(omlc_put_items(c, empty_id, 1, NULL, NULL, &err), &err, 1, "put_items.items[0].id");

    omlc_triplet t[3] = {triplet_by_id(0), triplet_by_id(1), triplet_by_id(2)};
    /* A weight outside (0, 100] is named; NaN too. */
    const float bad_weights[] = {-1.0f, 100.5f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        t[1].weight = bad_weights[i];
        expect_error(omlc_add_triplets(c, t, 3, NULL, NULL, &err), &err, 1 /* INVALID_ARGUMENT */,
                     "add_triplets.triplets[1].weight");
    }
    t[1].weight = 0.0f;
    t[2].positive.id = "no-such-item";
    expect_error(omlc_add_triplets(c, t, 3, NULL, NULL, &err), &err, 2 /* NOT_FOUND */,
                 "add_triplets.triplets[2].positive.id");
    t[2] = triplet_by_id(2);
    t[1].anchor = (omlc_ref){NULL, X[0], DIM - 2};
    expect_error(omlc_add_triplets(c, t, 3, NULL, NULL, &err), &err, 3, NULL);

    omlc_ref q = {ID[1], NULL, 0};
    omlc_classification cl;
    expect_error(omlc_classify(c, &q, 101, NULL, &cl, &err), &err, 1, "classify.k");
    expect_error(omlc_classify(c, &q, 5, "no-such-model", &cl, &err), &err, 2, "classify.model");
    omlc_ref ghost = {"ghost", NULL, 0};
    expect_error(omlc_classify(c, &ghost, 5, NULL, &cl, &err), &err, 2, "classify.query.id");
    omlc_verification v;
    expect_error(omlc_verify(c, &q, &q, 1.5f, NULL, &v, &err), &err, 1, "verify.threshold");
    omlc_hit hits[4];
    size_t nh;
    expect_error(omlc_retrieve(c, &q, 1000000, NULL, hits, 4, &nh, NULL, &err), &err, 1,
                 "retrieve.k");
    /* k = 0 on the wire (set explicitly, not "absent"). */
    Omld__Request req;
    Omld__ClassifyRequest creq;
    Omld__ItemRef ref;
    omld__request__init(&req);
    omld__classify_request__init(&creq);
    omld__item_ref__init(&ref);
    ref.ref_case = OMLD__ITEM_REF__REF_ID;
    ref.id = ID[1];
    creq.query = &ref;
    creq.k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
    creq.k = 0;
    req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    req.classify = &creq;
    expect_error(omlc_call(c, &req, &r, &err), &err, 1, "classify.k");
    omld__response__free_unpacked(r, NULL);
    /* No body at all. */
    omld__request__init(&req);
    expect_error(omlc_call(c, &req, &r, &err), &err, 1, "body");
    omld__response__free_unpacked(r, NULL);

    /* An id with a NUL inside ("item-1\0x"): protobuf-c would decode it as
     * "item-1"; the daemon refuses it by name instead of deleting item-1. */
    const uint8_t nul_frame[] = {0, 0, 0, 12, 0x5a, 0x0a, 0x0a, 0x08,
                                 'i', 't', 'e', 'm', '-', '1', 0x00, 'x'};
    assert_int_equal(omlc_send_raw(c, nul_frame, sizeof nul_frame, &err), 0);
    expect_error(omlc_recv(c, &r, &err), &err, 1, "delete_items.ids");
    omld__response__free_unpacked(r, NULL);
    const char *still[1] = {"item-1"};
    assert_int_equal(omlc_get_items(c, still, 1, &r, &err), 0);
    omld__response__free_unpacked(r, NULL);

    s = status(c, &r);
    assert_int_equal(s->items, items);
    assert_int_equal(s->triplets_received, received);
    omld__response__free_unpacked(r, NULL);
    omlc_close(c);
}

static void test_malformed_and_oversized_frames(void **state)
{
    omlc *c = dial(&g_proc);
    omlc_error err;
    /* A frame whose payload is not a Request: MALFORMED, connection stays. */
    uint8_t junk[4 + 6] = {0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(omlc_send_raw(c, junk, sizeof junk, &err), 0);
    Omld__Response *r = NULL;
    assert_int_equal(omlc_recv(c, &r, &err), 7 /* MALFORMED */);
    assert_int_equal(r->request_id, 0);
    omld__response__free_unpacked(r, NULL);
    int live, ready, draining;
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 0);
    omlc_close(c);

    /* A header announcing more than max_frame_bytes: FRAME_TOO_LARGE, then
     * the daemon closes the connection. */
    c = dial(&g_proc);
    uint8_t big[4];
    oml_frame_write_header(big, 64u * 1024u * 1024u);
    assert_int_equal(omlc_send_raw(c, big, 4, &err), 0);
    assert_int_equal(omlc_recv(c, &r, &err), 6 /* FRAME_TOO_LARGE */);
    omld__response__free_unpacked(r, NULL);
    assert_true(omlc_health(c, &live, &ready, &draining, &err) < 0);
    omlc_close(c);

    /* The daemon still serves everyone else. */
    c = dial(&g_proc);
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 0);
    omlc_close(c);
}

/* ------------------------------------------------------------ concurrency */

typedef struct worker {
    int index;
    int failures;
    uint64_t max_query_ns;
} worker;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *client_main(void *arg)
{
    worker *w = arg;
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, g_proc.rpc, TIMEOUT_MS, &err) != 0) {
        w->failures++;
        return NULL;
    }
    for (int round = 0; round < 10; round++) {
        int i = (w->index * 13 + round * 7) % N_ITEMS;
        if ((w->index + round) % 2 == 0) {
            omlc_triplet t[20];
            for (int k = 0; k < 20; k++)
                t[k] = triplet_by_id(w->index * 100 + round * 20 + k);
            uint32_t acc = 0;
            if (omlc_add_triplets(c, t, 20, &acc, NULL, &err) != 0 || acc != 20)
                w->failures++;
        } else {
            omlc_classification cl;
            omlc_ref q = {ID[i], NULL, 0};
            if (omlc_classify(c, &q, 5, NULL, &cl, &err) != 0 || strcmp(cl.label, LABEL[i]) != 0) {
                fprintf(stderr, "client %d: classify %s: rc %d '%s' label '%s' want '%s'\n",
                        w->index, ID[i], err.code, err.message, cl.label, LABEL[i]);
                w->failures++;
            }
            omlc_hit hits[5];
            size_t nh = 0;
            if (omlc_retrieve(c, &q, 5, NULL, hits, 5, &nh, NULL, &err) != 0 || nh != 5)
                w->failures++;
            for (size_t k = 0; k < nh; k++)
                if (strcmp(hits[k].id, ID[i]) == 0)
                    w->failures++;
        }
    }
    omlc_close(c);
    return NULL;
}

static void test_fifty_concurrent_clients(void **state)
{
    enum { CLIENTS = 50 };
    pthread_t th[CLIENTS];
    worker w[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        w[i] = (worker){.index = i};
        assert_int_equal(pthread_create(&th[i], NULL, client_main, &w[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
    }
    assert_int_equal(failures, 0);
}

static atomic_int g_flooding; /* read by the flood threads: atomic, not volatile (TSan) */

static void *flood_main(void *arg)
{
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, g_proc.rpc, TIMEOUT_MS, &err) != 0)
        return NULL;
    omlc_triplet t[256];
    for (int k = 0; k < 256; k++)
        t[k] = triplet_by_id(k);
    while (g_flooding)
        if (omlc_add_triplets(c, t, 256, NULL, NULL, &err) != 0)
            break;
    omlc_close(c);
    return NULL;
}

static void test_query_during_triplet_flood(void **state)
{
    pthread_t th[2];
    g_flooding = 1;
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, flood_main, NULL), 0);
    usleep(300000);
    omlc *c = dial(&g_proc);
    omlc_error err;
    uint64_t worst = 0;
    for (int i = 0; i < 50; i++) {
        omlc_classification cl;
        omlc_ref q = {ID[i], NULL, 0};
        uint64_t t0 = now_ns();
        assert_int_equal(omlc_classify(c, &q, 5, NULL, &cl, &err), 0);
        uint64_t dt = now_ns() - t0;
        worst = dt > worst ? dt : worst;
    }
    g_flooding = 0;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    Omld__Response *r;
    Omld__StatusResponse *s = status(c, &r);
    printf("    worst classify latency during the flood: %.2f ms (%llu triplets applied)\n",
           (double)worst / 1e6, (unsigned long long)s->triplets_applied);
    omld__response__free_unpacked(r, NULL);
    omlc_close(c);
    /* A query that waited for the learner queue would take seconds; this
     * bound only catches that, not speed (benchmarks measure speed). */
    assert_true(worst < 1500000000u);
}

/* ------------------------------------------------------------ HTTP */

static void test_status_and_metrics_endpoints(void **state)
{
    char *body = NULL;
    size_t len = 0;
    assert_int_equal(omld_http_get(g_proc.http, "/livez", NULL, NULL), 200);
    assert_int_equal(omld_http_get(g_proc.http, "/readyz", NULL, NULL), 200);
    assert_int_equal(omld_http_get(g_proc.http, "/no-such-page", NULL, NULL), 404);

    omlc *c = dial(&g_proc);
    Omld__Response *r;
    Omld__StatusResponse *s = status(c, &r);
    uint64_t items = s->items;
    omld__response__free_unpacked(r, NULL);
    omlc_close(c);

    assert_int_equal(omld_http_get(g_proc.http, "/status", &body, &len), 200);
    /* Well-formed JSON (python's parser is the referee) with the fields an
     * operator reads, consistent with what was sent. */
    char path[300];
    snprintf(path, sizeof path, "%s/status.json", g_proc.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(body, 1, len, f);
    fclose(f);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; s=json.load(open(\"%s\")); "
             "m=s[\"model\"]; i=s[\"ingest\"]; "
             "assert len(m[\"alpha\"])==3, m; assert abs(sum(m[\"alpha\"])-1)<1e-4; "
             "assert m[\"items\"]==%llu, m; assert i[\"triplets_applied\"]>=300, i; "
             "assert i[\"items_put\"]>=%d, i; assert \"classify\" in s[\"queries\"]; "
             "assert s[\"queries\"][\"classify\"][\"count\"]>0; assert s[\"ready\"] is True; "
             "assert s[\"version\"]; assert s[\"config\"][\"dim\"]==16'",
             path, (unsigned long long)items, N_ITEMS);
    assert_int_equal(system(cmd), 0);
    free(body);

    assert_int_equal(omld_http_get(g_proc.http, "/metrics", &body, &len), 200);
    snprintf(path, sizeof path, "%s/metrics.txt", g_proc.dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fwrite(body, 1, len, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s/check_prometheus.py %s && "
             "grep -q '^omld_hedge_weight{depth=\"2\"} ' %s && "
             "grep -q '^omld_triplets_applied_total ' %s && "
             "grep -q '^omld_query_duration_seconds_bucket{kind=\"classify\",le=\"+Inf\"} ' %s && "
             "grep -q '^omld_update_duration_seconds_count ' %s",
             OMLD_TEST_TOOLS, path, path, path, path, path);
    assert_int_equal(system(cmd), 0);
    free(body);
}

/* ------------------------------------------------------------ own daemons */

/* omld_search_recall_checked_total on p's /metrics. */
static double recall_checked(omld_proc *p)
{
    char *body = NULL;
    size_t len = 0;
    assert_int_equal(omld_http_get(p->http, "/metrics", &body, &len), 200);
    const char *at = strstr(body, "\nomld_search_recall_checked_total ");
    double v = at ? atof(at + strlen("\nomld_search_recall_checked_total ")) : 0.0;
    free(body);
    return v;
}

/* A store past ann_min_items is searched through inverted lists: queries
 * still answer with the stored classes, /status says "lists", and the
 * recall of the sampled queries against a full scan is on /metrics.
 * rerank_arg NULL: the index keeps its float columns (the store is below
 * rerank_min_items); else (past it) they are dropped, every query
 * re-ranks from the store, and so does the sample's exact reference. */
static void lists_round_trip(const char *rerank_arg)
{
    enum { N = 3000 };
    static float x[N][DIM];
    static char ids[N][16], labels[N][8];
    oml_test_blobs(&x[0][0], N, DIM, CLASSES, 777, 0.5f, 0.3f);
    omlc_item *items = malloc(N * sizeof *items);
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "big-%d", i);
        snprintf(labels[i], sizeof labels[i], "class-%d", i % CLASSES);
        items[i] = (omlc_item){ids[i], x[i], DIM, labels[i]};
    }
    const char *args[] = {"--dim=16", "--preset=default", "--layers=2", "--hidden=32",
                          "--emb=8", "--publish_ms=50", "--max_batch=1000",
                          "--ann_min_items=1000", rerank_arg,
                          rerank_arg ? "--rerank_candidates=64" : NULL, NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    omlc *c = dial(&p);
    omlc_error err;
    assert_int_equal(omlc_put_items_pipelined(c, items, N, 500, 4, NULL, NULL, &err), 0);
    free(items);
    omlc_triplet t[50];
    for (int i = 0; i < 50; i++)
        t[i] = (omlc_triplet){{ids[i], NULL, 0}, {ids[i + CLASSES], NULL, 0},
                              {ids[i + 1], NULL, 0}, 0.0f};
    assert_int_equal(omlc_add_triplets(c, t, 50, NULL, NULL, &err), 0);
    /* Wait for a view of every item. */
    for (int i = 0; i < 400; i++) {
        Omld__Response *r;
        Omld__StatusResponse *s = status(c, &r);
        int done = s->triplets_applied >= 50 && s->queue_depth == 0;
        omld__response__free_unpacked(r, NULL);
        char *body = NULL;
        size_t len = 0;
        assert_int_equal(omld_http_get(p.http, "/status", &body, &len), 200);
        done = done && strstr(body, "\"mode\":\"lists\"") != NULL;
        free(body);
        if (done)
            break;
        usleep(20000);
    }
    int right = 0;
    for (int q = 0; q < 256; q++) { /* 8 of them are checked against a full scan */
        omlc_ref ref = {NULL, x[q * 11 % N], DIM};
        omlc_classification out;
        assert_int_equal(omlc_classify(c, &ref, 5, NULL, &out, &err), 0);
        char want[16];
        snprintf(want, sizeof want, "class-%d", (q * 11 % N) % CLASSES);
        right += strcmp(out.label, want) == 0;
    }
    assert_true(right >= 240); /* easy classes: the lists lose none of them */
    /* The sample takes at most 5% of a core, so slow checks (a build under
     * a sanitizer, an index whose reference embeds rows from the store)
     * sample fewer of those 256: more queries until 8 were checked. */
    for (int more = 0; more < 200 && recall_checked(&p) < 8 * 5; more++) {
        omlc_ref ref = {NULL, x[more * 13 % N], DIM};
        omlc_classification out;
        assert_int_equal(omlc_classify(c, &ref, 5, NULL, &out, &err), 0);
        usleep(20000);
    }
    omlc_close(c);

    char *body = NULL, path[300], cmd[2048];
    size_t len = 0;
    assert_int_equal(omld_http_get(p.http, "/status", &body, &len), 200);
    snprintf(path, sizeof path, "%s/status-lists.json", p.dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fwrite(body, 1, len, f);
    fclose(f);
    free(body);
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json; s=json.load(open(\"%s\"))[\"search\"]; "
             "assert s[\"mode\"]==\"lists\", s; assert s[\"lists\"]>=16, s; "
             "assert s[\"lists_from_items\"]==1000, s; "
             "r=s[\"recall\"]; assert r is None or 0<=r<=1, s; "
             "assert r is None or s[\"recall_checked\"]<100 or r>=0.85, s; "
             "assert s[\"float_columns\"]==%s, s; assert s[\"coded_lists\"]==%s, s'", path,
             rerank_arg ? "False" : "True", rerank_arg ? "True" : "False");
    assert_int_equal(system(cmd), 0);
    /* Recall is held to 0.85, under the calibration's 0.98 on the index's
     * own rows: this data's items are noisy copies of a few class centres,
     * so a query's nearest neighbours are nearly equidistant. The exact
     * re-rank sees every row of the scanned lists the int8 codes cannot
     * rule out, so what is lost is in lists not scanned (0.91-0.98 over
     * 90-120 checks in 13 runs; the fixed cut of the best 2k + 8 by the
     * codes it replaced found 0.80 in five, which fails this). /status
     * shows the serving view's sample, which a newer view (the learner
     * rehearses meanwhile) starts afresh, so it is judged only from 100
     * checks. The counters since start hold every sampled query:
     * 256 queries, 1 in 32 checked. */
    assert_int_equal(omld_http_get(p.http, "/metrics", &body, &len), 200);
    assert_null(strstr(body, "\nomld_search_lists 0\n"));
    /* The index's bytes: codes always, floats only below rerank_min_items
     * (3,000 items of 3 heads of 8: 288,000 bytes of floats). */
    const char *fb = strstr(body, "\nomld_search_index_float_bytes ");
    const char *cb = strstr(body, "\nomld_search_index_code_bytes ");
    assert_non_null(fb);
    assert_non_null(cb);
    assert_true(atof(cb + strlen("\nomld_search_index_code_bytes ")) >= 3 * 8 * N);
    assert_true(atof(fb + strlen("\nomld_search_index_float_bytes ")) ==
                (rerank_arg ? 0.0 : 3.0 * 8 * N * 4));
    const char *hp = strstr(body, "\nomld_search_recall_hits_total ");
    const char *cp = strstr(body, "\nomld_search_recall_checked_total ");
    assert_non_null(hp);
    assert_non_null(cp);
    double hits = atof(hp + strlen("\nomld_search_recall_hits_total "));
    double checked = atof(cp + strlen("\nomld_search_recall_checked_total "));
    assert_true(checked >= 8 * 5); /* 8 sampled classify queries, k 5, per head at least */
    printf("inverted lists: the recall sample found %.0f of %.0f exact neighbours\n", hits,
           checked);
    assert_true(hits / checked >= 0.85);
    /* The same counts by head (depth="h"), one family each: every one of
     * the 3 heads was checked, and none beyond. */
    for (int h = 0; h < 4; h++) {
        char key[96];
        snprintf(key, sizeof key, "\nomld_search_recall_head_checked_total{depth=\"%d\"} ", h);
        const char *at = strstr(body, key);
        if (h == 3) {
            assert_null(at);
            break;
        }
        assert_non_null(at);
        assert_true(atof(at + strlen(key)) >= 5); /* a sampled query's exact 5 at least */
    }
    free(body);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

static void test_inverted_lists_through_the_daemon(void **state)
{
    (void)state;
    lists_round_trip(NULL);
}

/* Past rerank_min_items the index keeps only its lists' codes. Fresh
 * views serve there too, answering among rerank_candidates per head by
 * the codes' order, and the sample counts those: on these nearly
 * equidistant neighbours 32 of them held 0.75-0.90 of the exact 5 (a run
 * in three under 0.85), 64 held 0.88-1.00 in 14 runs. */
static void test_lists_without_float_columns(void **state)
{
    (void)state;
    lists_round_trip("--rerank_min_items=1000");
}

/* A partial click batch keeps its good triplets and names each bad one
 * with the error it alone would have had; a restart replays the logged
 * batch to the same learner. */
static void test_partial_triplet_batch(void **state)
{
    (void)state;
    const char *args[] = {"--dim=16", "--preset=default", "--layers=2", "--hidden=32",
                          "--emb=8", "--publish_ms=50", NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    omlc *c = dial(&p);
    omlc_error err;
    omlc_item items[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        items[i] = (omlc_item){ID[i], X[i], DIM, LABEL[i]};
    assert_int_equal(omlc_put_items(c, items, N_ITEMS, NULL, NULL, &err), 0);
    float nan_x[DIM];
    memcpy(nan_x, X[3], sizeof nan_x);
    nan_x[5] = NAN;
    omlc_triplet t[7];
    for (int i = 0; i < 7; i++)
        t[i] = triplet_by_id(i);
    t[1].positive.id = "no-such-item";
    t[3].anchor = (omlc_ref){NULL, X[0], DIM - 2};
    t[4].negative = t[4].anchor;
    t[5].negative = (omlc_ref){NULL, nan_x, DIM};
    omlc_rejected rej[8];
    size_t n_rej = 0;
    uint32_t accepted = 0;
    assert_int_equal(omlc_add_triplets_partial(c, t, 7, &accepted, rej, 8, &n_rej, &err), 0);
    assert_int_equal(accepted, 3);
    assert_int_equal(n_rej, 4);
    const struct { size_t index; int code; const char *field; } want[4] = {
        {1, 2 /* NOT_FOUND */, "add_triplets.triplets[1].positive.id"},
        {3, 3 /* WRONG_DIMENSION */, "add_triplets.triplets[3].anchor.vector"},
        {4, 1 /* INVALID_ARGUMENT */, "add_triplets.triplets[4].negative"},
        {5, 4 /* NON_FINITE */, "add_triplets.triplets[5].negative.vector"}};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rej[i].index, want[i].index);
        assert_int_equal(rej[i].code, want[i].code);
        assert_string_equal(rej[i].field, want[i].field);
        assert_true(rej[i].message[0] != '\0');
    }
#ifdef OMLCTL_BIN
    /* omlctl triplets --partial: the same from a file, each bad row named. */
    char csv[] = "/tmp/omld-partial-XXXXXX";
    int fd = mkstemp(csv);
    assert_true(fd >= 0);
    dprintf(fd, "%s,%s,%s,2.5\n%s,no-such-item,%s\n%s,%s,%s\n", t[0].anchor.id,
            t[0].positive.id, t[0].negative.id, t[2].anchor.id, t[2].negative.id, t[6].anchor.id,
            t[6].positive.id, t[6].negative.id);
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --server %s triplets --partial %s", OMLCTL_BIN, p.rpc, csv);
    FILE *out = popen(cmd, "r");
    assert_non_null(out);
    char got[2048] = {0};
    size_t len = fread(got, 1, sizeof got - 1, out);
    got[len] = '\0';
    assert_int_equal(pclose(out), 0);
    unlink(csv);
    assert_non_null(strstr(got, "row 2: NOT_FOUND add_triplets.triplets[1].positive.id: "));
    assert_non_null(strstr(got, "learned 2 triplets, refused 1"));
    /* A weight out of range is the daemon's refusal, naming it; not a number, omlctl's. */
    snprintf(csv, sizeof csv, "/tmp/omld-weight-XXXXXX");
    fd = mkstemp(csv);
    assert_true(fd >= 0);
    dprintf(fd, "%s,%s,%s,-1\n", t[0].anchor.id, t[0].positive.id, t[0].negative.id);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s --server %s triplets %s 2>&1", OMLCTL_BIN, p.rpc, csv);
    out = popen(cmd, "r");
    len = fread(got, 1, sizeof got - 1, out);
    got[len] = '\0';
    assert_int_equal(WEXITSTATUS(pclose(out)), 2);
    assert_non_null(strstr(got, "add_triplets.triplets[0].weight"));
    fd = open(csv, O_WRONLY | O_TRUNC);
    dprintf(fd, "%s,%s,%s,1\n%s,%s,%s,heavy\n", t[0].anchor.id, t[0].positive.id,
            t[0].negative.id, t[0].anchor.id, t[0].positive.id, t[0].negative.id);
    close(fd);
    out = popen(cmd, "r");
    len = fread(got, 1, sizeof got - 1, out);
    got[len] = '\0';
    assert_int_equal(WEXITSTATUS(pclose(out)), 1);
    assert_non_null(strstr(got, ":2: weight 'heavy' is not a number"));
    /* --json on any command: one JSON document on stdout. */
    fd = open(csv, O_WRONLY | O_TRUNC);
    dprintf(fd, "%s,%s,%s,2\n", t[0].anchor.id, t[0].positive.id, t[0].negative.id);
    close(fd);
    const char *const json_cmds[][3] = {{"triplets", csv, "accepted"},
                                        {"checkpoint", "", "path"},
                                        {"status", "", "items"},
                                        {"health", "", "ready"}};
    for (int j = 0; j < 4; j++) {
        const char *sub = json_cmds[j][0];
        snprintf(cmd, sizeof cmd, "%.200s --server %.60s %s %.40s --json", OMLCTL_BIN, p.rpc, sub,
                 json_cmds[j][1]);
        out = popen(cmd, "r");
        len = fread(got, 1, sizeof got - 1, out);
        got[len] = '\0';
        assert_int_equal(pclose(out), 0);
        json_error_t je;
        json_t *doc = json_loads(got, 0, &je);
        if (doc == NULL || json_object_get(doc, json_cmds[j][2]) == NULL)
            fail_msg("omlctl %s --json: %s", sub, got);
        json_decref(doc);
    }
    unlink(csv);
    /* All bad: nothing learned, still an answer; all-or-nothing unchanged. */
#else
    /* All bad: nothing learned, still an answer; all-or-nothing unchanged. */
#endif
    omlc_triplet none[2] = {t[1], t[4]};
    assert_int_equal(omlc_add_triplets_partial(c, none, 2, &accepted, rej, 8, &n_rej, &err), 0);
    assert_int_equal(accepted, 0);
    assert_int_equal(n_rej, 2);
    /* (at the edge, before the store is asked about ids) */
    expect_error(omlc_add_triplets(c, t, 7, NULL, NULL, &err), &err, 3,
                 "add_triplets.triplets[3].anchor.vector");
    Omld__Response *r;
    Omld__StatusResponse *s = status(c, &r);
    uint64_t received = s->triplets_received;
    omld__response__free_unpacked(r, NULL);
#ifdef OMLCTL_BIN
    assert_int_equal(received, 3 + 2 + 1); /* omlctl: 2 of the partial file, 1 with --json */
#else
    assert_int_equal(received, 3);
#endif
    omlc_close(c);
    /* The log replays the partial batch with the same three left in
     * (killed: no checkpoint at the stop, the log alone brings it back). */
    assert_int_equal(omld_proc_stop(&p, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&p, args, TIMEOUT_MS), 0);
    c = dial(&p);
    s = status(c, &r);
    assert_int_equal(s->triplets_applied, received);
    omld__response__free_unpacked(r, NULL);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

/* k above 1024 where the operator allows it (max_k, up to OML_SERVE_MAX_K):
 * a retrieval of every item, paged past the first 1024 too. */
static void test_k_above_1024(void **state)
{
    (void)state;
    enum { N = 1500 };
    static float x[N][DIM];
    static char ids[N][16];
    oml_test_blobs(&x[0][0], N, DIM, CLASSES, 99, 0.5f, 0.3f);
    omlc_item *items = malloc(N * sizeof *items);
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "k-%d", i);
        items[i] = (omlc_item){ids[i], x[i], DIM, "c"};
    }
    const char *args[] = {"--dim=16", "--preset=default", "--layers=2", "--hidden=32", "--emb=8",
                          "--max_k=4000", "--max_batch=2000", "--max_frame_bytes=8388608", NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    omlc *c = dial(&p);
    omlc_error err;
    assert_int_equal(omlc_put_items(c, items, N, NULL, NULL, &err), 0);
    free(items);
    omlc_ref q = {ids[0], NULL, 0};
    omlc_hit *hits = malloc(N * sizeof *hits);
    size_t n = 0;
    for (int i = 0; i < 400 && n != N - 1; i++) { /* until a view holds every item */
        if (i)
            usleep(20000);
        assert_int_equal(omlc_retrieve(c, &q, 3000, NULL, hits, N, &n, NULL, &err), 0);
    }
    assert_int_equal(n, N - 1); /* every other item, best first */
    omlc_retrieve_filter f = {NULL, 0, NULL, 0, 1200, 0, 0.0f, NULL, 0};
    omlc_hit page[300];
    size_t np = 0;
    assert_int_equal(omlc_retrieve_where(c, &q, 300, NULL, &f, page, 300, &np, NULL, &err), 0);
    assert_int_equal(np, 299); /* hits 1201..1499 of the 1499 */
    for (size_t i = 0; i < np; i++)
        assert_string_equal(page[i].id, hits[1200 + i].id);
    expect_error(omlc_retrieve(c, &q, 4001, NULL, hits, N, &n, NULL, &err), &err, 1,
                 "retrieve.k");
    free(hits);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

/* One client floods triplets by inline vector without reading answers: the
 * daemon must stop reading it (backpressure), so its memory stays bounded
 * however much the client tries to send, and it must still answer others. */
static void test_backpressure_bounds_memory(void **state)
{
    static const char *const args[] = {
        "--dim=784", "--preset=paper", "--queue_capacity=2048", "--max_pipeline=64",
        "--max_batch=256", NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    omlc *c = NULL;
    omlc_error err;
    assert_int_equal(omlc_connect(&c, p.rpc, TIMEOUT_MS, &err), 0);
    long rss0 = omld_proc_rss_kib(p.pid);

    /* One AddTriplets frame of 256 inline triplets: ~2.4 MB. */
    static float v[784];
    for (int j = 0; j < 784; j++)
        v[j] = (float)j / 784.0f;
    omlc_triplet t[256];
    for (int k = 0; k < 256; k++)
        t[k] = (omlc_triplet){{NULL, v, 784}, {NULL, v, 784}, {NULL, v, 784}, 0.0f};
    Omld__Request req;
    omld__request__init(&req);
    /* Build the frame once through the client library's own encoder by
     * sending it on a throwaway connection would be circular; encode here. */
    Omld__AddTripletsRequest at;
    Omld__Triplet tr[256], *trp[256];
    Omld__ItemRef refs[256][3];
    Omld__Vector vec;
    omld__vector__init(&vec);
    vec.n_values = 784;
    vec.values = v;
    omld__add_triplets_request__init(&at);
    for (int k = 0; k < 256; k++) {
        omld__triplet__init(&tr[k]);
        for (int j = 0; j < 3; j++) {
            omld__item_ref__init(&refs[k][j]);
            refs[k][j].ref_case = OMLD__ITEM_REF__REF_VECTOR;
            refs[k][j].vector = &vec;
        }
        tr[k].anchor = &refs[k][0];
        tr[k].positive = &refs[k][1];
        tr[k].negative = &refs[k][2];
        trp[k] = &tr[k];
    }
    at.n_triplets = 256;
    at.triplets = trp;
    req.body_case = OMLD__REQUEST__BODY_ADD_TRIPLETS;
    req.add_triplets = &at;
    size_t n = omld__request__get_packed_size(&req);
    uint8_t *frame = malloc(4 + n);
    assert_non_null(frame);
    oml_frame_write_header(frame, (uint32_t)n);
    omld__request__pack(&req, frame + 4);
    (void)t;

    /* Push 1 GB of frames as fast as the daemon takes them, sampling its
     * memory; without backpressure it would buffer most of it. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    sa.sin_port = htons((uint16_t)atoi(strrchr(p.rpc, ':') + 1));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {0, 100000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    size_t sent = 0, goal = (size_t)1 << 30;
    long rss_max = rss0;
    uint64_t t0 = now_ns(), last_sample = 0;
    while (sent < goal && now_ns() - t0 < 60000000000ull) {
        ssize_t w = send(fd, frame + sent % (4 + n), (4 + n) - sent % (4 + n), MSG_NOSIGNAL);
        if (w > 0)
            sent += (size_t)w;
        if (now_ns() - last_sample > 50000000u) {
            long rss = omld_proc_rss_kib(p.pid);
            rss_max = rss > rss_max ? rss : rss_max;
            last_sample = now_ns();
        }
    }
    double secs = (double)(now_ns() - t0) / 1e9;
    printf("    backpressure: a client pushed %.0f MB of unread-answer triplet frames in %.1f s; "
           "daemon RSS %ld -> max %ld MiB\n", (double)sent / 1e6, secs, rss0 / 1024,
           rss_max / 1024);
    /* The daemon holds at most the pipeline window of frames (64 x ~2.4 MB
     * raw + decoded) and the learner queue: bounded, far below what came. */
    assert_true(rss_max - rss0 < 512 * 1024);

    /* Others are still served while the flooder is paused. */
    int live, ready, draining;
    assert_int_equal(omlc_health(c, &live, &ready, &draining, &err), 0);
    close(fd);
    free(frame);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, 60000), 0);
    omld_proc_cleanup(&p);
}

static void test_sigterm_under_load_exits_cleanly(void **state)
{
    omld_proc saved = g_proc;
    assert_int_equal(omld_proc_start(&g_proc, MODEL_ARGS, TIMEOUT_MS), 0);
    omlc *c = dial(&g_proc);
    put_all(c);
    omlc_close(c);
    pthread_t th[3];
    g_flooding = 1;
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, flood_main, NULL), 0);
    usleep(300000);
    int rc = omld_proc_stop(&g_proc, SIGTERM, TIMEOUT_MS);
    g_flooding = 0;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    if (rc != 0)
        omld_proc_dump_log(&g_proc);
    assert_int_equal(rc, 0);
    omld_proc_cleanup(&g_proc);
    g_proc = saved;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest shared[] = {
        cmocka_unit_test(test_every_operation),
        cmocka_unit_test(test_query_batches),
        cmocka_unit_test(test_export_model_embeds_as_the_daemon),
        cmocka_unit_test(test_pipelined_answers_in_order),
        cmocka_unit_test(test_concurrent_classify_grouped),
        cmocka_unit_test(test_bad_requests_change_nothing),
        cmocka_unit_test(test_malformed_and_oversized_frames),
        cmocka_unit_test(test_fifty_concurrent_clients),
        cmocka_unit_test(test_query_during_triplet_flood),
        cmocka_unit_test(test_status_and_metrics_endpoints),
    };
    const struct CMUnitTest own[] = {
        cmocka_unit_test(test_backpressure_bounds_memory),
        cmocka_unit_test(test_inverted_lists_through_the_daemon),
        cmocka_unit_test(test_lists_without_float_columns),
        cmocka_unit_test(test_partial_triplet_batch),
        cmocka_unit_test(test_k_above_1024),
        cmocka_unit_test(test_sigterm_under_load_exits_cleanly),
    };
    int failed = cmocka_run_group_tests_name("shared daemon", shared, setup_daemon, teardown_daemon);
    failed += cmocka_run_group_tests_name("own daemons", own, NULL, NULL);
    return failed;
}
