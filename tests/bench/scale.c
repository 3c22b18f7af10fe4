/* scale.c - `omld-bench --items N`: omld measured at a catalogue size.
 *
 * N items derived from Fashion-MNIST (item i is image i mod 70,000 with a
 * few grey levels of deterministic noise, id "s-i", its class as label)
 * go into a fresh omld over RPC; then, in this order:
 *   ingest      items/s over the whole put, and in its first and last tenth
 *               (flat in the store size, or not);
 *   start       the first triplet's acknowledgement (the model's start);
 *   freshness   triplets at a steady --rate per second for --seconds: from
 *               each batch's acknowledgement to the first serving view that
 *               learned it (Status.view_triplets polled every 10 ms), and
 *               how long the views took to come (publish: view to view);
 *   queries     once the serving index holds every item: classify (k 5)
 *               and retrieve (k 10) from one idle client, p50 / p99;
 *               classify from 8 clients at once, per second; the serving
 *               index's inverted lists and the recall the daemon measured
 *               on its sample of these queries (its /metrics counters over
 *               the phase);
 *   recall@10   once the load has stopped and a view has learned every
 *               triplet: the same retrieve queries against the exact
 *               answers under the model that served them, which this
 *               bench works out from the exported model over every item
 *               (exact_recall.h); then faiss's exact search and HNSW on
 *               the same embeddings and queries (ann_faiss.h), when
 *               /usr/bin/python3 has faiss, unless --no-faiss; with
 *               OMLD_BENCH_MODEL_OUT=FILE in the environment, that model
 *               is written to FILE (oml-ann-bench --model FILE);
 *   memory      RSS now and at peak (VmHWM) against the raw features; from
 *               the end of the puts to the restart, RSS sampled every 100
 *               ms (lowest: between rebuilds; highest: during one) and the
 *               peak through the checkpoint (the JSON's peak_rss_bytes);
 *   checkpoint  one Checkpoint request while triplets stream: its time and
 *               the slowest triplet acknowledgement meanwhile;
 *   restart     SIGTERM, then start on the same data directory: seconds
 *               until the old process exited (an index build in progress
 *               is abandoned), until listening (the address file) and until
 *               /readyz is 200.
 * Prints a readable report and, last, one JSON line. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "ann_faiss.h"
#include "catalogue.h"
#include "exact_recall.h"
#include "harness.h"
#include "idx.h"
#include "omlclient.h"
#include "protocol.h"
#include "scale.h"

#define CLASSES 10
#define QUERIES 300
#define THROUGHPUT_CLIENTS 8
#define THROUGHPUT_S 5.0
#define TRIPLET_BATCH 100

static void die(const char *what, const omlc_error *err)
{
    fprintf(stderr, "omld-bench --items: %s: %s (%s)\n", what, err ? err->message : "",
            err ? err->field : "");
    exit(1);
}

/* ------------------------------------------------------------ the items: catalogue.h */

static void item_id(int64_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "s-%lld", (long long)i);
}

/* ------------------------------------------------------------ ingest */

/* The put's clock: seconds since t0 less the time spent making items. */
typedef struct ingest_clock {
    double t0, gen, first_tenth_s, last_tenth_start;
    size_t total, base;
} ingest_clock;

static void ingest_progress(size_t done, size_t total, void *arg)
{
    ingest_clock *k = arg;
    size_t at = k->base + done;
    double t = now_s() - k->t0 - k->gen;
    if (k->first_tenth_s == 0 && at >= k->total / 10)
        k->first_tenth_s = t;
    if (k->last_tenth_start == 0 && at >= k->total - k->total / 10)
        k->last_tenth_start = t;
    (void)total;
}

/* Puts every item, CHUNK at a time (batches of 500, 8 in flight). */
static double ingest(omlc *cl, const catalogue *c, ingest_clock *k)
{
    enum { CHUNK = 20000 };
    float *x = malloc((size_t)CHUNK * (size_t)c->dim * sizeof(float));
    char (*ids)[24] = malloc((size_t)CHUNK * sizeof *ids);
    omlc_item *items = malloc((size_t)CHUNK * sizeof *items);
    static char lab[CLASSES][4];
    for (int j = 0; j < CLASSES; j++)
        snprintf(lab[j], sizeof lab[j], "%d", j);
    k->total = (size_t)c->n;
    k->t0 = now_s();
    for (int64_t at = 0; at < c->n; at += CHUNK) {
        int64_t m = c->n - at < CHUNK ? c->n - at : CHUNK;
        double g0 = now_s();
        for (int64_t i = 0; i < m; i++) {
            catalogue_item(c, at + i, x + (size_t)i * (size_t)c->dim);
            item_id(at + i, ids[i], sizeof ids[i]);
            items[i] = (omlc_item){ids[i], x + (size_t)i * (size_t)c->dim, (uint32_t)c->dim,
                                   lab[catalogue_label(c, at + i)]};
        }
        k->gen += now_s() - g0; /* making the items is not the daemon's time */
        k->base = (size_t)at;
        omlc_error err;
        if (omlc_put_items_pipelined(cl, items, (size_t)m, 500, 8, ingest_progress, k, &err) != 0)
            die("put", &err);
    }
    double total = now_s() - k->t0 - k->gen;
    free(x);
    free(ids);
    free(items);
    return total;
}

/* ------------------------------------------------------------ status */

static void view_state(omlc *cl, uint64_t *view_triplets, uint64_t *applied)
{
    Omld__Response *r = NULL;
    omlc_error err;
    if (omlc_status(cl, &r, &err) != 0)
        die("status", &err);
    *view_triplets = r->status_info->view_triplets;
    if (applied)
        *applied = r->status_info->triplets_applied;
    omld__response__free_unpacked(r, NULL);
}

/* ------------------------------------------------------------ freshness */

typedef struct poller {
    const char *server;
    volatile int run;
    pthread_mutex_t mu;
    uint64_t seen;          /* view_triplets at the last poll */
    double *when;           /* per batch: first time the view learned it (0: not yet) */
    uint64_t *upto;         /* per batch: applied count it needs */
    int n_batches;          /* acknowledged so far */
    double last_change, *gaps;
    int n_gaps, cap_gaps;
    pthread_t th;
} poller;

static void *poller_main(void *arg)
{
    poller *p = arg;
    omlc *cl = NULL;
    omlc_error err;
    if (omlc_connect(&cl, p->server, 30000, &err) != 0)
        die("connect", &err);
    while (p->run) {
        uint64_t vt;
        view_state(cl, &vt, NULL);
        double t = now_s();
        pthread_mutex_lock(&p->mu);
        if (vt != p->seen) {
            if (p->last_change > 0 && p->n_gaps < p->cap_gaps)
                p->gaps[p->n_gaps++] = (t - p->last_change) * 1e3;
            p->last_change = t;
            p->seen = vt;
        }
        for (int b = 0; b < p->n_batches; b++)
            if (p->when[b] == 0 && vt >= p->upto[b])
                p->when[b] = t;
        pthread_mutex_unlock(&p->mu);
        usleep(10000);
    }
    omlc_close(cl);
    return NULL;
}

/* Random label-consistent triplets over the items, by id. */
typedef struct triplet_source {
    const catalogue *c;
    uint64_t rng;
    char ids[TRIPLET_BATCH][3][24];
    omlc_triplet t[TRIPLET_BATCH];
} triplet_source;

static uint64_t next_u64(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void triplet_batch(triplet_source *s)
{
    const catalogue *c = s->c;
    for (int b = 0; b < TRIPLET_BATCH; b++) {
        int64_t a = (int64_t)(next_u64(&s->rng) % (uint64_t)c->n), pos, neg;
        do
            pos = (int64_t)(next_u64(&s->rng) % (uint64_t)c->n);
        while (pos == a || catalogue_label(c, pos) != catalogue_label(c, a));
        do
            neg = (int64_t)(next_u64(&s->rng) % (uint64_t)c->n);
        while (catalogue_label(c, neg) == catalogue_label(c, a));
        item_id(a, s->ids[b][0], sizeof s->ids[b][0]);
        item_id(pos, s->ids[b][1], sizeof s->ids[b][1]);
        item_id(neg, s->ids[b][2], sizeof s->ids[b][2]);
        s->t[b] = (omlc_triplet){{s->ids[b][0], NULL, 0}, {s->ids[b][1], NULL, 0},
                                 {s->ids[b][2], NULL, 0}, 0.0f};
    }
}

/* Batch n of a stream at `rate` triplets per second begun at t0: waits
 * until it is due, then sends src's next batch (acknowledged on return). */
static void send_when_due(omlc *cl, triplet_source *src, double t0, long n, double rate,
                          const char *what)
{
    double wait = t0 + (double)n * TRIPLET_BATCH / rate - now_s();
    if (wait > 0)
        usleep((useconds_t)(wait * 1e6));
    triplet_batch(src);
    omlc_error err;
    if (omlc_add_triplets(cl, src->t, TRIPLET_BATCH, NULL, NULL, &err) != 0)
        die(what, &err);
}

/* Streams triplets at `rate` per second for `seconds`; fills the freshness
 * (ms, per batch) and publish gap (ms) quantiles. */
static void freshness(omlc *cl, const char *server, const catalogue *c, double rate,
                      double seconds, uint64_t applied0, double *fresh_p50, double *fresh_max,
                      double *publish_p50, double *achieved)
{
    int max_batches = (int)(rate * seconds / TRIPLET_BATCH) + 2;
    poller p = {.server = server, .run = 1, .cap_gaps = 100000};
    pthread_mutex_init(&p.mu, NULL);
    p.when = calloc((size_t)max_batches, sizeof *p.when);
    p.upto = calloc((size_t)max_batches, sizeof *p.upto);
    p.gaps = calloc((size_t)p.cap_gaps, sizeof *p.gaps);
    double *acked = calloc((size_t)max_batches, sizeof *acked);
    view_state(cl, &p.seen, NULL);
    pthread_create(&p.th, NULL, poller_main, &p);
    triplet_source src = {.c = c, .rng = 0x5eed5eedull};
    double t0 = now_s();
    int n = 0;
    while (n < max_batches - 1 && now_s() - t0 < seconds) {
        send_when_due(cl, &src, t0, n, rate, "triplets");
        double t = now_s();
        pthread_mutex_lock(&p.mu);
        acked[n] = t;
        p.upto[n] = applied0 + (uint64_t)(n + 1) * TRIPLET_BATCH;
        p.n_batches = ++n;
        pthread_mutex_unlock(&p.mu);
    }
    *achieved = (double)n * TRIPLET_BATCH / (now_s() - t0);
    /* Give the last batches up to 60 s to reach a view. */
    for (double w0 = now_s(); now_s() - w0 < 60;) {
        pthread_mutex_lock(&p.mu);
        int done = p.when[n - 1] != 0;
        pthread_mutex_unlock(&p.mu);
        if (done)
            break;
        usleep(20000);
    }
    p.run = 0;
    pthread_join(p.th, NULL);
    double *lat = calloc((size_t)n, sizeof *lat);
    int m = 0;
    for (int b = 0; b < n; b++)
        if (p.when[b] > 0)
            lat[m++] = (p.when[b] > acked[b] ? p.when[b] - acked[b] : 0) * 1e3;
    *fresh_p50 = quantile(lat, m, 0.5);
    *fresh_max = m ? lat[m - 1] : NAN;
    *publish_p50 = quantile(p.gaps, p.n_gaps, 0.5);
    free(lat);
    free(acked);
    free(p.when);
    free(p.upto);
    free(p.gaps);
    pthread_mutex_destroy(&p.mu);
}

/* ------------------------------------------------------------ the learner's load */

/* Triplets at a steady `rate` per second until stopped, over
 * `connections` connections of an equal share each (2 by default): the
 * issue's targets hold queries "with the learner taking a steady 5,000
 * triplets/s", and a web service's many users send them side by side. One
 * connection that waits for each acknowledgement before its next batch
 * measures the round trip through two busy cores as much as the learner
 * (--load-connections 1); what the daemon learned meanwhile is printed
 * beside what was sent. */
#define LOAD_CONNECTIONS_MAX 8

typedef struct load_sender {
    const char *server;
    const catalogue *c;
    double rate;
    uint64_t seed;
    volatile int *run;
    long sent;
    double seconds;
    pthread_t th;
} load_sender;

typedef struct triplet_load {
    volatile int run;
    int n;
    load_sender s[LOAD_CONNECTIONS_MAX];
} triplet_load;

static void *load_sender_main(void *arg)
{
    load_sender *t = arg;
    omlc *cl = NULL;
    omlc_error err;
    if (omlc_connect(&cl, t->server, 60000, &err) != 0)
        die("connect", &err);
    triplet_source src = {.c = t->c, .rng = t->seed};
    double t0 = now_s();
    for (long n = 0; *t->run; n++) {
        send_when_due(cl, &src, t0, n, t->rate, "triplets under the queries");
        t->sent += TRIPLET_BATCH;
    }
    t->seconds = now_s() - t0;
    omlc_close(cl);
    return NULL;
}

static void triplet_load_start(triplet_load *t, const char *server, const catalogue *c,
                               double rate, int connections)
{
    if (connections < 1)
        connections = 1;
    if (connections > LOAD_CONNECTIONS_MAX)
        connections = LOAD_CONNECTIONS_MAX;
    *t = (triplet_load){.run = 1, .n = rate > 0 ? connections : 0};
    for (int i = 0; i < t->n; i++) {
        t->s[i] = (load_sender){.server = server, .c = c, .rate = rate / connections,
                                .seed = 0x10adull + (uint64_t)i, .run = &t->run};
        pthread_create(&t->s[i].th, NULL, load_sender_main, &t->s[i]);
    }
}

/* Stops the stream; returns the triplets per second its connections
 * achieved together. */
static double triplet_load_stop(triplet_load *t)
{
    t->run = 0;
    double per_s = 0;
    for (int i = 0; i < t->n; i++) {
        pthread_join(t->s[i].th, NULL);
        if (t->s[i].seconds > 0)
            per_s += (double)t->s[i].sent / t->s[i].seconds;
    }
    return per_s;
}

/* ------------------------------------------------------------ queries */

static void query_latency(omlc *cl, const catalogue *c, int retrieve, double *p50, double *p99)
{
    double lat[QUERIES];
    float *x = malloc((size_t)c->dim * sizeof(float));
    omlc_hit hits[10];
    for (int q = 0; q < QUERIES; q++) {
        catalogue_query(c, q, x);
        omlc_ref ref = {NULL, x, (uint32_t)c->dim};
        omlc_error err;
        double t0 = now_s();
        if (retrieve) {
            size_t got;
            if (omlc_retrieve(cl, &ref, 10, NULL, hits, 10, &got, NULL, &err) != 0)
                die("retrieve", &err);
        } else {
            omlc_classification out;
            if (omlc_classify(cl, &ref, 5, NULL, &out, &err) != 0)
                die("classify", &err);
        }
        lat[q] = (now_s() - t0) * 1e3;
    }
    free(x);
    *p50 = quantile(lat, QUERIES, 0.5);
    *p99 = quantile(lat, QUERIES, 0.99);
}

typedef struct qclient {
    const char *server;
    const catalogue *c;
    int seed;
    double until;
    long done;
    pthread_t th;
} qclient;

static void *qclient_main(void *arg)
{
    qclient *q = arg;
    omlc *cl = NULL;
    omlc_error err;
    if (omlc_connect(&cl, q->server, 60000, &err) != 0)
        die("connect", &err);
    float *x = malloc((size_t)q->c->dim * sizeof(float));
    for (int64_t i = q->seed; now_s() < q->until; i += THROUGHPUT_CLIENTS) {
        catalogue_item(q->c, i * 104729 + 11, x);
        omlc_ref ref = {NULL, x, (uint32_t)q->c->dim};
        omlc_classification out;
        if (omlc_classify(cl, &ref, 5, NULL, &out, &err) != 0)
            die("classify", &err);
        q->done++;
    }
    free(x);
    omlc_close(cl);
    return NULL;
}

static double classify_throughput(const char *server, const catalogue *c)
{
    qclient q[THROUGHPUT_CLIENTS];
    double t0 = now_s();
    for (int i = 0; i < THROUGHPUT_CLIENTS; i++) {
        q[i] = (qclient){.server = server, .c = c, .seed = i, .until = t0 + THROUGHPUT_S};
        pthread_create(&q[i].th, NULL, qclient_main, &q[i]);
    }
    long done = 0;
    for (int i = 0; i < THROUGHPUT_CLIENTS; i++) {
        pthread_join(q[i].th, NULL);
        done += q[i].done;
    }
    return (double)done / (now_s() - t0);
}

/* ------------------------------------------------------------ recall */

/* The serving index's search as /status reports it: its lists and the
 * recall of the daemon's sampled queries against a full scan (1 when it
 * scans every item). */
static double search_recall(const char *http, long *lists, long *scanned, long *indexed)
{
    char *body = NULL;
    size_t len = 0;
    double recall = 1.0;
    *lists = *scanned = *indexed = 0;
    if (omld_http_get(http, "/status", &body, &len) == 200 && body) {
        const char *vi = strstr(body, "\"view_items\":");
        if (vi)
            *indexed = atol(vi + 13);
        const char *p = strstr(body, "\"search\":");
        const char *l = p ? strstr(p, "\"lists\":") : NULL;
        const char *sc = p ? strstr(p, "\"lists_scanned\":") : NULL;
        if (sc)
            *scanned = atol(sc + 16);
        const char *r = p ? strstr(p, "\"recall\":") : NULL;
        if (l)
            *lists = atol(l + 8);
        if (r && r[9] != 'n') /* null: nothing sampled yet */
            recall = atof(r + 9);
    }
    free(body);
    return recall;
}

/* Recall@10 of the daemon's retrieve against the exact answer under the
 * model that served it (exact_recall.h), on the latency's queries, once
 * the learner's load has stopped and a view has learned every triplet:
 * its inverted lists may still be an older model's, which is part of
 * what this measures. A query served by another model than the one
 * exported is not counted; *counted says how many were. Prints it, and
 * then faiss's answers on the same embeddings when asked (faiss) and
 * installed. -1: none counted. */
static double recall_at_10(omlc *cl, const catalogue *c, int faiss, int *counted)
{
    double t0 = now_s();
    uint64_t vt, applied;
    view_state(cl, &vt, &applied);
    while (vt < applied && now_s() - t0 < 60) {
        usleep(50000);
        view_state(cl, &vt, &applied);
    }
    Omld__Response *r = NULL;
    omlc_error err;
    if (omlc_export_model(cl, NULL, &r, &err) != 0)
        die("export model", &err);
    oml_snapshot *snap = NULL;
    oml_diag diag = {0};
    if (oml_snapshot_decode(&snap, r->export_model->model.data, r->export_model->model.len,
                            &diag) != OML_OK) {
        fprintf(stderr, "omld-bench: the exported model: %s\n", diag.msg);
        exit(1);
    }
    uint64_t version = r->export_model->version;
    const char *keep = getenv("OMLD_BENCH_MODEL_OUT"); /* for oml-ann-bench --model */
    FILE *mf = keep && *keep ? fopen(keep, "wb") : NULL;
    if (mf != NULL) {
        fwrite(r->export_model->model.data, 1, r->export_model->model.len, mf);
        fclose(mf);
    }
    omld__response__free_unpacked(r, NULL);

    size_t dim = (size_t)c->dim;
    float *Q = malloc((size_t)QUERIES * dim * sizeof *Q);
    static char got[QUERIES][10][OMLC_LABEL_MAX];
    static size_t n_got[QUERIES];
    static int64_t exact[QUERIES][10];
    if (Q == NULL)
        die("recall@10", NULL);
    int n = 0;
    for (int q = 0; q < QUERIES; q++) {
        catalogue_query(c, q, Q + (size_t)n * dim);
        omlc_ref ref = {NULL, Q + (size_t)n * dim, (uint32_t)dim};
        omlc_hit hits[10];
        uint64_t served_by = 0;
        if (omlc_retrieve(cl, &ref, 10, NULL, hits, 10, &n_got[n], &served_by, &err) != 0)
            die("retrieve", &err);
        if (served_by != version)
            continue;
        for (size_t j = 0; j < n_got[n]; j++)
            memcpy(got[n][j], hits[j].id, sizeof got[n][j]);
        n++;
    }
    /* faiss on the same embeddings, when asked and there */
    char dir[] = "/tmp/omld-bench-faiss-XXXXXX";
    int with_faiss = faiss && n > 0 && ann_faiss_present() && mkdtemp(dir) != NULL;
    if (faiss && !with_faiss)
        printf("faiss: absent from /usr/bin/python3 (Debian: python3-faiss), not compared\n");
    if (n > 0 && exact_retrieve(snap, c, Q, n, 10, with_faiss ? dir : NULL, &exact[0][0]) != 0)
        exit(1);
    double took_s = now_s() - t0, hits = 0, total = 0;
    for (int q = 0; q < n; q++)
        for (int j = 0; j < 10 && exact[q][j] >= 0; j++) {
            char id[OMLC_LABEL_MAX];
            item_id(exact[q][j], id, sizeof id);
            for (size_t i = 0; i < n_got[q]; i++)
                hits += strcmp(got[q][i], id) == 0;
            total++;
        }
    double recall = total > 0 ? hits / total : -1;
    printf("recall@10 of retrieve k=10 against the exact answer under the model that served it "
           "(this bench's scan of all %lld items): %.4f over %d queries (%.1f s)\n",
           (long long)c->n, recall, n, took_s);
    if (with_faiss)
        ann_faiss_compare(dir, c->n, snap->cfg.emb, oml_snapshot_heads(snap), n);
    oml_snapshot_release(snap);
    free(Q);
    *counted = n;
    return recall;
}

/* A counter's sample line in a /metrics body, or -1. */
static double metric_in(const char *body, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name); /* the sample, not its # HELP line */
    const char *at = body ? strstr(body, key) : NULL;
    return at ? atof(at + strlen(key)) : -1;
}

/* /metrics, fetched (NULL when it could not be); the caller frees it. */
static char *metrics_body(const char *http)
{
    char *body = NULL;
    size_t len = 0;
    if (omld_http_get(http, "/metrics", &body, &len) != 200) {
        free(body);
        return NULL;
    }
    return body;
}

/* A counter of /metrics (its sample line), or -1. */
static double metric_value(const char *http, const char *name)
{
    char *body = metrics_body(http);
    double v = metric_in(body, name);
    free(body);
    return v;
}

/* The recall sample's counters by head (the daemon labels them depth="h"):
 * hits and checked of each, up to MAX_HEADS_SEEN, from one /metrics;
 * returns the heads. */
#define MAX_HEADS_SEEN 8
static int recall_by_head(const char *http, double *hits, double *checked)
{
    char *body = metrics_body(http);
    int h = 0;
    for (; h < MAX_HEADS_SEEN; h++) {
        char name[96];
        snprintf(name, sizeof name, "omld_search_recall_head_hits_total{depth=\"%d\"}", h);
        if ((hits[h] = metric_in(body, name)) < 0)
            break;
        snprintf(name, sizeof name, "omld_search_recall_head_checked_total{depth=\"%d\"}", h);
        checked[h] = metric_in(body, name);
    }
    free(body);
    return h;
}

/* ------------------------------------------------------------ memory */

/* VmRSS and VmHWM (peak) of pid, bytes. */
static void rss_of(pid_t pid, long long *rss, long long *peak)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    *rss = *peak = -1;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof line, f)) {
        long long kib;
        if (sscanf(line, "VmRSS: %lld kB", &kib) == 1)
            *rss = kib * 1024;
        else if (sscanf(line, "VmHWM: %lld kB", &kib) == 1)
            *peak = kib * 1024;
    }
    fclose(f);
}

/* RSS sampled every 100 ms on a thread of its own, from once the serving
 * index holds every item until the restart: its lowest (between rebuilds)
 * and highest (a rebuild holds the new index beside the serving one), so
 * the figures do not hang on where a rebuild was when one line is read. */
typedef struct rss_sampler {
    pid_t pid;
    atomic_int stop;
    long long low, high;
    pthread_t thread;
} rss_sampler;

static void *rss_sample(void *arg)
{
    rss_sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        long long rss, peak;
        rss_of(s->pid, &rss, &peak);
        if (rss > 0 && (s->low < 0 || rss < s->low))
            s->low = rss;
        if (rss > s->high)
            s->high = rss;
        usleep(100000);
    }
    return NULL;
}

static void rss_sampler_start(rss_sampler *s, pid_t pid)
{
    *s = (rss_sampler){.pid = pid, .low = -1, .high = -1};
    if (pthread_create(&s->thread, NULL, rss_sample, s) != 0) {
        fprintf(stderr, "omld-bench: cannot start the RSS sampler\n");
        exit(1);
    }
}

static void rss_sampler_stop(rss_sampler *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->thread, NULL);
}

/* ------------------------------------------------------------ checkpoint */

typedef struct ckpt {
    const char *server;
    double seconds;
    pthread_t th;
} ckpt;

static void *ckpt_main(void *arg)
{
    ckpt *k = arg;
    omlc *cl = NULL;
    omlc_error err;
    if (omlc_connect(&cl, k->server, 600000, &err) != 0)
        die("connect", &err);
    Omld__Response *r = NULL;
    double t0 = now_s();
    if (omlc_checkpoint(cl, &r, &err) != 0)
        die("checkpoint", &err);
    k->seconds = now_s() - t0;
    omld__response__free_unpacked(r, NULL);
    omlc_close(cl);
    return NULL;
}

/* A checkpoint while batches of triplets stream from cl: its seconds and
 * the slowest batch acknowledgement (ms) meanwhile. */
static void checkpoint_under_load(omlc *cl, const char *server, const catalogue *c,
                                  double *ckpt_s, double *max_ack_ms)
{
    ckpt k = {.server = server, .seconds = -1};
    triplet_source src = {.c = c, .rng = 0xc4ec4ull};
    pthread_create(&k.th, NULL, ckpt_main, &k);
    double worst = 0, t_end = 0;
    for (;;) {
        triplet_batch(&src);
        omlc_error err;
        double t0 = now_s();
        if (omlc_add_triplets(cl, src.t, TRIPLET_BATCH, NULL, NULL, &err) != 0)
            die("triplets", &err);
        double ms = (now_s() - t0) * 1e3;
        worst = ms > worst ? ms : worst;
        if (k.seconds >= 0 && t_end == 0)
            t_end = now_s();
        if (t_end > 0 && now_s() - t_end > 0.2)
            break;
        usleep(5000);
    }
    pthread_join(k.th, NULL);
    *ckpt_s = k.seconds;
    *max_ack_ms = worst;
}

/* ------------------------------------------------------------ restart */

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall-clock time of the last "listening on" line in the daemon's log
 * ("2026-11-25T20:47:23.123Z info  main: listening on ..."), or NAN. The
 * listeners are bound before recovery; the address file the harness waits
 * for comes after it. */
static double last_listening_line(const char *log)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return NAN;
    char line[4096];
    double t = NAN;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "listening on") == NULL)
            continue;
        struct tm tm = {0};
        int ms = 0;
        const char *p = line;
        while (*p && (*p < '0' || *p > '9')) /* a journal priority prefix */
            p++;
        if (sscanf(p, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) == 7) {
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            t = (double)timegm(&tm) + ms * 1e-3;
        }
    }
    fclose(f);
    return t;
}

static void restart(omld_proc *p, const char *const *args, double *stop_s, double *listen_s,
                    double *ready_s)
{
    double s0 = now_s();
    omld_proc_stop(p, SIGTERM, 600000);
    *stop_s = now_s() - s0;
    double t0 = now_s(), w0 = wall_s();
    if (omld_proc_restart(p, args, 600000) != 0) {
        fprintf(stderr, "omld-bench --items: restart failed\n");
        exit(1);
    }
    *listen_s = last_listening_line(p->log) - w0;
    *ready_s = NAN;
    while (now_s() - t0 < 600) {
        char *body = NULL;
        size_t len;
        int code = omld_http_get(p->http, "/readyz", &body, &len);
        free(body);
        if (code == 200) {
            *ready_s = now_s() - t0;
            break;
        }
        usleep(20000);
    }
}

/* ------------------------------------------------------------ the run */

int omld_scale_bench(int64_t n_items, double rate, double seconds, double load_rate,
                     int load_connections, int kind, int faiss, const char *const *omld_args)
{
    catalogue c = {.n = n_items, .kind = kind};
    oml_diag diag = {0};
    if (oml_fmnist_load(OML_FMNIST_DIR, &c.images, &c.labels, &c.n_images, &c.dim, &diag) != 0) {
        fprintf(stderr, "omld-bench: %s\n", diag.msg);
        return 1;
    }
    char max_items[64];
    snprintf(max_items, sizeof max_items, "--max_items=%lld", (long long)n_items + 1000);
    /* Checkpoints only when asked: the checkpoint figure is measured alone. */
    const char *args[16] = {max_items, "--max_batch=1000", "--checkpoint_every=1000000000000",
                            "--checkpoint_ms=86400000", NULL};
    for (int i = 0, a = 4; omld_args && omld_args[i] && a < 15; i++)
        args[a++] = omld_args[i];
    omld_proc p;
    if (omld_proc_start(&p, args, 60000) != 0)
        return 1;
    omlc *cl = NULL;
    omlc_error err;
    if (omlc_connect(&cl, p.rpc, 600000, &err) != 0)
        die("connect", &err);

    ingest_clock k = {0};
    double put_s = ingest(cl, &c, &k);
    double ingest_rate = (double)n_items / put_s;
    double first_rate = (double)(n_items / 10) / k.first_tenth_s;
    double last_rate = (double)(n_items / 10) / (put_s - k.last_tenth_start);
    printf("catalogue %s: ", catalogue_name(kind));
    printf("items %lld of %d features: put at %.0f items/s (first tenth %.0f/s, last tenth "
           "%.0f/s)\n", (long long)n_items, c.dim, ingest_rate, first_rate, last_rate);

    /* From here the store holds every item: RSS between rebuilds and
     * during them, through the freshness and query phases (several
     * rebuilds at 1M) and the checkpoint. */
    rss_sampler sampler;
    rss_sampler_start(&sampler, p.pid);
    triplet_source first = {.c = &c, .rng = 42};
    triplet_batch(&first);
    double t0 = now_s();
    if (omlc_add_triplets(cl, first.t, 1, NULL, NULL, &err) != 0)
        die("first triplet", &err);
    double start_s = now_s() - t0;
    printf("first triplet (the model's start): acknowledged after %.2f s\n", start_s);

    uint64_t vt, applied;
    view_state(cl, &vt, &applied);
    double fresh_p50, fresh_max, publish_p50, achieved;
    freshness(cl, p.rpc, &c, rate, seconds, applied, &fresh_p50, &fresh_max, &publish_p50,
              &achieved);
    printf("freshness at %.0f triplets/s (asked %.0f) for %.0f s: p50 %.0f ms, max %.0f ms; "
           "a new view every %.0f ms (p50)\n", achieved, rate, seconds, fresh_p50, fresh_max,
           publish_p50);

    /* The queries time the index of every item: a fresh view over an
     * index built before the last puts (a build takes tens of seconds at
     * 1M) would measure a smaller one. */
    long lists, scanned, indexed;
    double w0 = now_s();
    search_recall(p.http, &lists, &scanned, &indexed);
    while (indexed < n_items && now_s() - w0 < 300) {
        usleep(200000);
        search_recall(p.http, &lists, &scanned, &indexed);
    }
    printf("the serving index held all %lld items after another %.1f s\n", (long long)indexed,
           now_s() - w0);
    /* The recall of the daemon's sample of these queries: its counters
     * over the query phase (the current view's own figure starts afresh at
     * every rebuild). */
    double hits0 = metric_value(p.http, "omld_search_recall_hits_total");
    double checked0 = metric_value(p.http, "omld_search_recall_checked_total");
    double head_hits0[MAX_HEADS_SEEN], head_checked0[MAX_HEADS_SEEN];
    double head_hits[MAX_HEADS_SEEN], head_checked[MAX_HEADS_SEEN];
    int heads_seen = recall_by_head(p.http, head_hits0, head_checked0);
    double c50, c99, r50, r99;
    triplet_load load;
    double learned0 = metric_value(p.http, "omld_triplets_applied_total"), load_t0 = now_s();
    triplet_load_start(&load, p.rpc, &c, load_rate, load_connections);
    query_latency(cl, &c, 0, &c50, &c99);
    query_latency(cl, &c, 1, &r50, &r99);
    double qps = classify_throughput(p.rpc, &c);
    double load_achieved = triplet_load_stop(&load);
    double learned = (metric_value(p.http, "omld_triplets_applied_total") - learned0) /
                     (now_s() - load_t0);
    search_recall(p.http, &lists, &scanned, &indexed);
    double checked = metric_value(p.http, "omld_search_recall_checked_total") - checked0;
    int heads_now = recall_by_head(p.http, head_hits, head_checked);
    heads_seen = heads_now < heads_seen ? heads_now : heads_seen;
    double recall = checked > 0 ? (metric_value(p.http, "omld_search_recall_hits_total") - hits0) /
                                      checked
                                : 1.0; /* no lists: every query scans every item */
    printf("queries while the learner takes %.0f triplets/s (asked %.0f, over %d connection%s; "
           "it learned %.0f/s)\n", load_achieved, load_rate, load.n, load.n == 1 ? "" : "s",
           learned);
    printf("classify k=5, one client: p50 %.2f ms, p99 %.2f ms; retrieve k=10: p50 %.2f "
           "ms, p99 %.2f ms; classify with %d clients: %.0f/s; search: %ld inverted lists per "
           "head, %ld scanned, recall %.3f of the exact neighbours (the daemon's sample of these "
           "queries, %.0f neighbours checked); the serving index held %ld items\n", c50, c99,
           r50, r99, THROUGHPUT_CLIENTS, qps, lists, scanned, recall, checked > 0 ? checked : 0,
           indexed);
    printf("the daemon's recall sample by head:");
    for (int h = 0; h < heads_seen; h++) {
        double n = head_checked[h] - head_checked0[h];
        printf(" %.3f (%.0f)", n > 0 ? (head_hits[h] - head_hits0[h]) / n : 1.0, n > 0 ? n : 0);
    }
    printf("\n");
    int recall_queries;
    double recall10 = recall_at_10(cl, &c, faiss, &recall_queries);

    long long rss, peak, raw = (long long)n_items * c.dim * (long long)sizeof(float);
    rss_of(p.pid, &rss, &peak);
    printf("memory: RSS %.2f GB (%.2fx the raw features, %.2f GB), peak %.2f GB (%.2fx)\n",
           rss / 1e9, (double)rss / raw, raw / 1e9, peak / 1e9, (double)peak / raw);

    double ckpt_s, max_ack;
    checkpoint_under_load(cl, p.rpc, &c, &ckpt_s, &max_ack);
    printf("checkpoint: %.2f s; the slowest triplet acknowledgement meanwhile %.0f ms\n", ckpt_s,
           max_ack);
    omlc_close(cl);
    rss_sampler_stop(&sampler);
    long long rss_end;
    rss_of(p.pid, &rss_end, &peak); /* the peak through the checkpoint too */
    printf("memory once every item was stored, sampled every 100 ms through the freshness and "
           "query phases and the checkpoint: RSS lowest %.2f GB (%.2fx), highest %.2f GB (%.2fx); "
           "peak of the run %.2f GB (%.2fx)\n", sampler.low / 1e9, (double)sampler.low / raw, sampler.high / 1e9,
           (double)sampler.high / raw, peak / 1e9, (double)peak / raw);

    double stop_s, listen_s, ready_s;
    restart(&p, args, &stop_s, &listen_s, &ready_s);
    printf("restart (SIGTERM, then start): stopped after %.2f s; listening after %.2f s (its "
           "log), ready (/readyz) after %.2f s\n",
           stop_s, listen_s, ready_s);
    omld_proc_stop(&p, SIGTERM, 600000);
    omld_proc_cleanup(&p);

    printf("{\"catalogue\":\"%s\",\"items\":%lld,\"ingest_items_per_s\":%.0f,\"ingest_first_tenth_per_s\":%.0f,"
           "\"ingest_last_tenth_per_s\":%.0f,\"first_triplet_ack_s\":%.3f,"
           "\"triplets_per_s\":%.0f,\"publish_ms\":%.0f,\"freshness_p50_ms\":%.0f,"
           "\"freshness_max_ms\":%.0f,\"classify_p50_ms\":%.3f,\"classify_p99_ms\":%.3f,"
           "\"retrieve_p50_ms\":%.3f,\"retrieve_p99_ms\":%.3f,\"classify_8_clients_per_s\":%.0f,\"query_load_triplets_per_s\":%.0f,"
           "\"query_load_connections\":%d,\"query_load_learned_per_s\":%.0f,"
           "\"lists\":%ld,\"lists_scanned\":%ld,\"indexed_items\":%ld,\"recall\":%.4f,\"recall_at_10\":%.4f,\"recall_at_10_queries\":%d,\"rss_bytes\":%lld,\"peak_rss_bytes\":%lld,"
           "\"rss_low_bytes\":%lld,\"rss_high_bytes\":%lld,"
           "\"raw_feature_bytes\":%lld,\"checkpoint_s\":%.3f,\"checkpoint_max_ack_ms\":%.0f,"
           "\"restart_stop_s\":%.3f,\"restart_listen_s\":%.3f,\"restart_ready_s\":%.3f}\n",
           catalogue_name(kind), (long long)n_items, ingest_rate, first_rate, last_rate, start_s, achieved, publish_p50,
           fresh_p50, fresh_max, c50, c99, r50, r99, qps, load_achieved, load.n, learned, lists, scanned, indexed, recall, recall10, recall_queries, rss, peak,
           sampler.low, sampler.high, raw, ckpt_s, max_ack,
           stop_s, listen_s, ready_s);
    free(c.images);
    free(c.labels);
    return 0;
}
