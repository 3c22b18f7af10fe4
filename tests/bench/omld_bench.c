/* omld-bench - the daemon measured end to end, on Fashion-MNIST.
 *
 * 1. Ingest: the same triplet stream learned in process (requests of 256
 *    through the rehearsal ring, as omld learns them) and through a real
 *    omld over TCP (AddTriplets of --request N triplets by id, default 256,
 *    pipelined), side by side in one run; the ratio is the figure.
 * 2. Classify latency at 35,000 stored items, idle and while two clients
 *    keep the learner busy at full speed.
 * 3. Freshness during that load: from a triplet's acknowledgement to the
 *    first serving view whose model has learned it.
 * Prints a readable report and, last, one JSON line. Other modes:
 * --durability, --job METHOD, --items N (scale.c) and --batch-queries
 * (batch_queries.c: a ClassifyBatch against single requests). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "batch_queries.h"
#include "bench_util.h"
#include "catalogue.h"
#include "harness.h"
#include "http_bench.h"
#include "idx.h"
#include "learner.h"
#include "omlclient.h"
#include "protocol.h"
#include "replay.h"
#include "scale.h"
#include "tls_bench.h"

extern void openblas_set_num_threads(int);

static void die(const char *what, const omlc_error *err)
{
    fprintf(stderr, "omld-bench: %s: %s (%s)\n", what, err ? err->message : "", err ? err->field : "");
    exit(1);
}

typedef struct data {
    float *images;
    int32_t *labels, n, dim;
    oml_split split;
    float *dev_x;
    int32_t *dev_labels;
    char (*ids)[16];
    oml_stream stream;
} data;

static void load(data *d, int32_t n_triplets)
{
    oml_diag diag = {0};
    if (oml_fmnist_load(OML_FMNIST_DIR, &d->images, &d->labels, &d->n, &d->dim, &diag) != 0) {
        fprintf(stderr, "omld-bench: %s\n", diag.msg);
        exit(1);
    }
    oml_split_make(&d->split, d->n, 1);
    int32_t nd = d->split.n_dev;
    d->dev_x = malloc((size_t)nd * d->dim * sizeof(float));
    d->dev_labels = malloc((size_t)nd * sizeof(int32_t));
    d->ids = malloc((size_t)nd * sizeof *d->ids);
    for (int32_t i = 0; i < nd; i++) {
        int32_t row = d->split.dev[i];
        memcpy(d->dev_x + (size_t)i * d->dim, d->images + (size_t)row * d->dim,
               (size_t)d->dim * sizeof(float));
        d->dev_labels[i] = d->labels[row];
        snprintf(d->ids[i], sizeof d->ids[i], "dev-%d", row);
    }
    if (oml_stream_make(&d->stream, d->dev_labels, nd, n_triplets, 1, &diag) != 0) {
        fprintf(stderr, "omld-bench: %s\n", diag.msg);
        exit(1);
    }
}

static double in_process_rate(const data *d, const char *preset)
{
    oml_config cfg;
    oml_config_preset(&cfg, preset, d->dim);
    oml_learner *l = NULL;
    oml_learner_create(&l, &cfg, NULL);
    if (oml_config_needs_data(&cfg))
        oml_learner_prepare(l, d->dev_x, d->dev_labels, d->split.n_dev);
    /* As omld learns them: requests of 256 through the rehearsal ring
     * (mini-batches; the rehearsal owed is not paid here: this is the
     * speed of taking new triplets). */
    oml_replay ring;
    oml_replay_init(&ring, (uint32_t)cfg.replay);
    const float *rows[3 * 256];
    uint32_t slots[3 * 256];
    double t0 = now_s();
    for (int32_t i = 0; i < d->stream.n; i += 256) {
        int32_t m = d->stream.n - i < 256 ? d->stream.n - i : 256;
        for (int32_t k = 0; k < m; k++) {
            const oml_triplet *t = &d->stream.t[i + k];
            int32_t mem[3] = {t->a, t->p, t->n};
            for (int j = 0; j < 3; j++) {
                rows[3 * k + j] = d->dev_x + (size_t)mem[j] * d->dim;
                slots[3 * k + j] = (uint32_t)mem[j];
            }
        }
        oml_replay_learn(&ring, l, rows, slots, NULL, m);
    }
    double rate = d->stream.n / (now_s() - t0);
    oml_replay_free(&ring);
    oml_learner_destroy(l);
    return rate;
}

static omlc_triplet *triplets_by_id(const data *d)
{
    omlc_triplet *t = malloc((size_t)d->stream.n * sizeof *t);
    for (int32_t i = 0; i < d->stream.n; i++) {
        const oml_triplet *s = &d->stream.t[i];
        t[i] = (omlc_triplet){{d->ids[s->a], NULL, 0}, {d->ids[s->p], NULL, 0},
                              {d->ids[s->n], NULL, 0}, 0.0f};
    }
    return t;
}

static void put_dev(omlc *c, const data *d)
{
    int32_t nd = d->split.n_dev;
    omlc_item *items = malloc((size_t)nd * sizeof *items);
    static char lab[10][4];
    for (int k = 0; k < 10; k++)
        snprintf(lab[k], sizeof lab[k], "%d", k);
    for (int32_t i = 0; i < nd; i++)
        items[i] = (omlc_item){d->ids[i], d->dev_x + (size_t)i * d->dim, (uint32_t)d->dim,
                               lab[d->dev_labels[i]]};
    omlc_error err;
    if (omlc_put_items_pipelined(c, items, (size_t)nd, 500, 8, NULL, NULL, &err) != 0)
        die("put", &err);
    free(items);
}

static Omld__StatusResponse status(omlc *c)
{
    Omld__Response *r = NULL;
    omlc_error err;
    if (omlc_status(c, &r, &err) != 0)
        die("status", &err);
    Omld__StatusResponse s = *r->status_info;
    s.version = NULL;
    s.alpha = NULL;
    omld__response__free_unpacked(r, NULL);
    return s;
}

/* ---- background load: keeps the learner busy ---- */

typedef struct flood {
    const char *server;
    const omlc_triplet *t;
    int32_t n;
    volatile int run;
    uint64_t sent;
    pthread_t th;
} flood;

static void *flood_main(void *arg)
{
    flood *f = arg;
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, f->server, 30000, &err) != 0)
        return NULL;
    for (int32_t at = 0; f->run; at = (at + 256) % (f->n - 256)) {
        if (omlc_add_triplets_pipelined(c, f->t + at, 256 * 8, 256, 8, NULL, NULL, &err) != 0)
            break;
        f->sent += 256 * 8;
    }
    omlc_close(c);
    return NULL;
}

static void classify_latency(omlc *c, const data *d, int queries, double *p50, double *p99)
{
    double *lat = malloc((size_t)queries * sizeof *lat);
    omlc_error err;
    for (int i = 0; i < queries; i++) {
        int32_t row = d->split.test[i % d->split.n_test];
        omlc_ref q = {NULL, d->images + (size_t)row * d->dim, (uint32_t)d->dim};
        omlc_classification cl;
        double t0 = now_s();
        if (omlc_classify(c, &q, 5, NULL, &cl, &err) != 0)
            die("classify", &err);
        lat[i] = (now_s() - t0) * 1e3;
    }
    *p50 = quantile(lat, queries, 0.5);
    *p99 = quantile(lat, queries, 0.99);
    free(lat);
}

/* ---- durability: the log's cost per fsync policy, and recovery time ---- */

/* Starts omld with the policy, stores the dev items, streams the stream
 * (after one warm-up triplet that takes the model's start); returns the
 * ingest rate. kill_after: leave it running (returned in *p) instead of
 * stopping it. */
static double ingest_with(const data *d, const omlc_triplet *t, const char *preset,
                          const char *fsync, omld_proc *p, int keep)
{
    char preset_arg[64], fsync_arg[64];
    snprintf(preset_arg, sizeof preset_arg, "--preset=%s", preset);
    snprintf(fsync_arg, sizeof fsync_arg, "--fsync=%s", fsync);
    const char *args[] = {preset_arg, fsync_arg, "--max_batch=1000", "--checkpoint_every=1000000000000",
                          "--checkpoint_ms=86400000", NULL};
    if (omld_proc_start(p, args, 30000) != 0)
        exit(1);
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, p->rpc, 60000, &err) != 0)
        die("connect", &err);
    put_dev(c, d);
    if (omlc_add_triplets(c, t, 1, NULL, NULL, &err) != 0)
        die("first triplet", &err);
    double t0 = now_s();
    if (omlc_add_triplets_pipelined(c, t + 1, (size_t)d->stream.n - 1, 256, 16, NULL, NULL, &err) != 0)
        die("triplets", &err);
    double rate = (d->stream.n - 1) / (now_s() - t0);
    omlc_close(c);
    if (!keep) {
        omld_proc_stop(p, SIGTERM, 120000);
        omld_proc_cleanup(p);
    }
    return rate;
}

static int durability(const data *d, const char *preset)
{
    omlc_triplet *t = triplets_by_id(d);
    omld_proc p;
    double no = ingest_with(d, t, preset, "no", &p, 0);
    double everysec = ingest_with(d, t, preset, "everysec", &p, 0);
    double always = ingest_with(d, t, preset, "always", &p, 0);
    printf("  ingest by fsync policy (%d triplets, batches of 256, 16 in flight): no %.0f/s, "
           "everysec %.0f/s (%.3f of no), always %.0f/s (%.3f of no)\n", d->stream.n, no, everysec,
           everysec / no, always, always / no);

    /* Recovery: the whole stream in the log after the last checkpoint (none
     * is written), SIGKILL, restart; the clock runs from the restart to the
     * address file, written once recovery is done and omld listens. */
    double learn_rate = in_process_rate(d, preset);
    ingest_with(d, t, preset, "everysec", &p, 1);
    omld_proc_stop(&p, SIGKILL, 10000);
    char args_dir[64];
    snprintf(args_dir, sizeof args_dir, "--preset=%s", preset);
    const char *args[] = {args_dir, "--max_batch=1000", NULL};
    double t0 = now_s();
    if (omld_proc_restart(&p, args, 600000) != 0)
        return 1;
    double rec = now_s() - t0;
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, p.rpc, 60000, &err) != 0)
        die("connect", &err);
    Omld__StatusResponse s = status(c);
    omlc_close(c);
    double learn_s = d->stream.n / learn_rate;
    printf("  recovery of %llu triplets (+%d items) from the log alone: %.1f s; the learner needs "
           "%.1f s for them in process: ratio %.2f\n", (unsigned long long)s.triplets_applied,
           d->split.n_dev, rec, learn_s, rec / learn_s);
    printf("{\"bench\":\"omld-durability\",\"preset\":\"%s\",\"triplets\":%d,\"ingest_no_tps\":%.0f,"
           "\"ingest_everysec_tps\":%.0f,\"ingest_always_tps\":%.0f,\"everysec_ratio\":%.3f,"
           "\"always_ratio\":%.3f,\"recovery_s\":%.2f,\"learn_s\":%.2f,\"recovery_ratio\":%.2f}\n",
           preset, d->stream.n, no, everysec, always, everysec / no, always / no, rec, learn_s,
           rec / learn_s);
    omld_proc_stop(&p, SIGTERM, 120000);
    omld_proc_cleanup(&p);
    free(t);
    return 0;
}

/* omld on preset with --max_batch=1000, the dev items stored and the
 * model started by the first triplet of t: a connection to it (p gets the
 * process). Exits on a failure. */
/* omld with the dev items and the first triplet (the model's start);
 * extra: up to 4 more options (NULL-terminated; NULL: none), tls: how to
 * connect (NULL: plain). */
static omlc *start_with_dev(const data *d, const char *preset, const omlc_triplet *t,
                            omld_proc *p, const char *const *extra, const omlc_tls *tls)
{
    char preset_arg[64];
    snprintf(preset_arg, sizeof preset_arg, "--preset=%s", preset);
    const char *args[7] = {preset_arg, "--max_batch=1000"};
    for (int i = 0; extra && extra[i] && i < 4; i++)
        args[2 + i] = extra[i];
    if (omld_proc_start(p, args, 30000) != 0)
        exit(1);
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect_tls(&c, p->rpc, tls, 60000, &err) != 0)
        die("connect", &err);
    put_dev(c, d);
    if (omlc_add_triplets(c, t, 1, NULL, NULL, &err) != 0)
        die("first triplet", &err);
    return c;
}

/* ---- a batch training job beside the live model ---- */

/* Runs one job of `method` over the labelled dev items while two clients
 * keep the learner saturated, and measures classify latency and learning
 * rate meanwhile, next to the same figures without a job. */
static int job_bench(const data *d, const char *preset, const char *method, int queries)
{
    omlc_triplet *t = triplets_by_id(d);
    omld_proc p;
    omlc *c = start_with_dev(d, preset, t, &p, NULL, NULL);
    omlc_error err;
    flood fl[2];
    for (int i = 0; i < 2; i++) {
        fl[i] = (flood){.server = p.rpc, .t = t, .n = d->stream.n, .run = 1};
        pthread_create(&fl[i].th, NULL, flood_main, &fl[i]);
    }
    sleep(1);
    /* Without a job. */
    double p50a, p99a;
    Omld__StatusResponse s0 = status(c);
    double t0 = now_s();
    classify_latency(c, d, queries, &p50a, &p99a);
    double rate_a = (double)(status(c).triplets_applied - s0.triplets_applied) / (now_s() - t0);

    /* With a job: start it, then measure until it ends. */
    Omld__TrainStartRequest rq = OMLD__TRAIN_START_REQUEST__INIT;
    rq.method = (char *)method;
    uint64_t job = 0;
    char model[128];
    double tj = now_s();
    if (omlc_train_start(c, &rq, &job, model, sizeof model, &err) != 0)
        die("train_start", &err);
    double *lat = malloc((size_t)1000000 * sizeof *lat);
    int nq = 0, state = 0;
    s0 = status(c);
    t0 = now_s();
    while (nq < 1000000) {
        int32_t row = d->split.test[nq % d->split.n_test];
        omlc_ref q = {NULL, d->images + (size_t)row * d->dim, (uint32_t)d->dim};
        omlc_classification cl;
        double q0 = now_s();
        if (omlc_classify(c, &q, 5, NULL, &cl, &err) != 0)
            die("classify", &err);
        lat[nq++] = (now_s() - q0) * 1e3;
        if (nq % 50 == 0) {
            Omld__Response *r = NULL;
            if (omlc_train_status(c, job, &r, &err) != 0)
                die("train_status", &err);
            state = r->train_status->job->state;
            omld__response__free_unpacked(r, NULL);
            if (state >= OMLD__JOB_INFO__STATE__DONE)
                break;
        }
    }
    double job_s = now_s() - tj;
    double rate_b = (double)(status(c).triplets_applied - s0.triplets_applied) / (now_s() - t0);
    double p50b = quantile(lat, nq, 0.5), p99b = quantile(lat, nq, 0.99);
    for (int i = 0; i < 2; i++) {
        fl[i].run = 0;
        pthread_join(fl[i].th, NULL);
    }
    printf("  job %s over %d labelled items: %s in %.1f s\n", method, d->split.n_dev,
           state == OMLD__JOB_INFO__STATE__DONE ? "done" : "ended (not done)", job_s);
    printf("  while learning without a job: %.0f triplets/s, classify p50 %.2f ms p99 %.2f ms\n",
           rate_a, p50a, p99a);
    printf("  while learning with the job:  %.0f triplets/s, classify p50 %.2f ms p99 %.2f ms "
           "(%d queries)\n", rate_b, p50b, p99b, nq);
    printf("{\"bench\":\"omld-job\",\"method\":\"%s\",\"job_s\":%.1f,\"done\":%s,"
           "\"tps_without\":%.0f,\"tps_with\":%.0f,\"p99_without_ms\":%.2f,\"p99_with_ms\":%.2f}\n",
           method, job_s, state == OMLD__JOB_INFO__STATE__DONE ? "true" : "false", rate_a, rate_b,
           p99a, p99b);
    free(lat);
    omlc_close(c);
    omld_proc_stop(&p, SIGTERM, 120000);
    omld_proc_cleanup(&p);
    free(t);
    return state == OMLD__JOB_INFO__STATE__DONE ? 0 : 1;
}

/* ---- query batches: ClassifyBatch against single requests ---- */

/* omld with the dev items (35,000), its model started by one triplet; the
 * figures once the serving view has every item and the learner has been
 * quiet for a second (no index is built meanwhile). */
static int batch_queries(const data *d, const char *preset, int batch, int rounds)
{
    omlc_triplet *t = triplets_by_id(d);
    omld_proc p;
    omlc *c = start_with_dev(d, preset, t, &p, NULL, NULL);
    omlc_error err;
    free(t);
    uint64_t version = 0;
    double quiet_since = now_s();
    for (double t0 = now_s(); now_s() - t0 < 300;) {
        Omld__StatusResponse s = status(c);
        int done = s.queue_depth == 0 && s.view_triplets >= s.triplets_applied;
        if (s.model_version != version || !done) {
            version = s.model_version;
            quiet_since = now_s();
        } else if (now_s() - quiet_since > 1.0) {
            break;
        }
        usleep(50000);
    }
    int32_t n_q = batch * rounds < d->split.n_test ? batch * rounds : d->split.n_test;
    float *Q = malloc((size_t)n_q * (size_t)d->dim * sizeof *Q);
    for (int32_t i = 0; i < n_q; i++)
        memcpy(Q + (size_t)i * d->dim, d->images + (size_t)d->split.test[i] * d->dim,
               (size_t)d->dim * sizeof *Q);
    omlc *c2 = NULL;
    if (omlc_connect(&c2, p.rpc, 60000, &err) != 0)
        die("connect", &err);
    int rc = omld_batch_bench(c, c2, Q, n_q, d->dim, batch, rounds, 5, d->split.n_dev);
    free(Q);
    omlc_close(c2);
    omlc_close(c);
    if (omld_proc_stop(&p, SIGTERM, 120000) != 0)
        rc = 1;
    omld_proc_cleanup(&p);
    return rc;
}

/* ---- RPC over TLS beside plain TCP ---- */

/* Two daemons with the dev items, plain and TLS (a self-signed certificate
 * made with the openssl command in a temporary directory), side by side
 * (tests/bench/tls_bench.c). */
static int tls_compare(const data *d, const char *preset, int queries)
{
    char dir[] = "/tmp/omld-bench-tls-XXXXXX", cmd[600], cert[64], key[64];
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s -out %s -days 1 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 2>/dev/null", key, cert);
    if (system(cmd) != 0) {
        fprintf(stderr, "omld-bench: openssl could not make a certificate\n");
        return 1;
    }
    char cert_arg[96], key_arg[96];
    snprintf(cert_arg, sizeof cert_arg, "--tls_cert=%s", cert);
    snprintf(key_arg, sizeof key_arg, "--tls_key=%s", key);
    /* No idle rehearsal: one daemon's must not take the CPU the other is
     * measured on. */
    const char *plain_args[] = {"--rehearse_idle=0", NULL};
    const char *tls_args[] = {"--rehearse_idle=0", cert_arg, key_arg, NULL};
    omlc_tls tls = {.cafile = cert};
    omlc_triplet *t = triplets_by_id(d);
    omld_proc p, pt;
    omlc *c = start_with_dev(d, preset, t, &p, plain_args, NULL);
    omlc *ct = start_with_dev(d, preset, t, &pt, tls_args, &tls);
    float *tq = malloc((size_t)d->split.n_test * d->dim * sizeof(float));
    for (int32_t i = 0; i < d->split.n_test; i++)
        memcpy(tq + (size_t)i * d->dim, d->images + (size_t)d->split.test[i] * d->dim,
               (size_t)d->dim * sizeof(float));
    int rc = omld_tls_bench(c, ct, p.rpc, pt.rpc, cert, tq, d->split.n_test, d->dim, t + 1,
                            (size_t)d->stream.n - 1, queries / 4 > 0 ? queries / 4 : 1);
    free(tq);
    free(t);
    omlc_close(c);
    omlc_close(ct);
    rc |= omld_proc_stop(&p, SIGTERM, 60000) != 0;
    rc |= omld_proc_stop(&pt, SIGTERM, 60000) != 0;
    omld_proc_cleanup(&p);
    omld_proc_cleanup(&pt);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    rc |= system(cmd) != 0;
    return rc;
}

int main(int argc, char **argv)
{
    int32_t n_triplets = 100000;
    int queries = 2000, probes = 20, request = 256;
    const char *preset = "default";
    int durable = 0, http_compare = 0, tls_cmp = 0, batch_q = 0, batch = 100, rounds = 20;
    const char *job_method = NULL;
    long long items = 0;
    double rate = 2000, seconds = 20, load_rate = 5000;
    int load_connections = 2, faiss = 1;
    int kind = CATALOGUE_SHIFTED;
    const char *omld_args[9] = {NULL};
    int n_omld_args = 0;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--job") == 0 && i + 1 < argc) {
            job_method = argv[i + 1];
        } else if (strcmp(argv[i], "--durability") == 0) {
            durable = 1;
            i--;
        } else if (strcmp(argv[i], "--http") == 0) {
            http_compare = 1;
            i--;
        } else if (strcmp(argv[i], "--tls") == 0) {
            tls_cmp = 1;
            i--;
        } else if (strcmp(argv[i], "--batch-queries") == 0) {
            batch_q = 1;
            i--;
        } else if (strcmp(argv[i], "--no-faiss") == 0) {
            faiss = 0;
            i--;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "omld-bench: %s needs a value\n", argv[i]);
            return 1;
        } else if (strcmp(argv[i], "--triplets") == 0)
            n_triplets = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--queries") == 0)
            queries = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--preset") == 0)
            preset = argv[i + 1];
        else if (strcmp(argv[i], "--items") == 0)
            items = atoll(argv[i + 1]);
        else if (strcmp(argv[i], "--rate") == 0)
            rate = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--load") == 0)
            load_rate = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--load-connections") == 0 && atoi(argv[i + 1]) > 0)
            load_connections = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--catalogue") == 0 && catalogue_kind(argv[i + 1]) >= 0)
            kind = catalogue_kind(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--omld") == 0 && n_omld_args < 8)
            omld_args[n_omld_args++] = argv[i + 1];
        else if (strcmp(argv[i], "--batch") == 0 && atoi(argv[i + 1]) > 0)
            batch = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0 && atoi(argv[i + 1]) > 0)
            rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--request") == 0)
            request = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 256;
        else {
            fprintf(stderr, "usage: omld-bench [--triplets N] [--queries M] [--preset P] [--durability] [--job METHOD] [--http] [--tls]\n"
                            "       omld-bench --batch-queries [--batch B] [--rounds R] [--preset P]\n"
                            "       omld-bench --items N [--catalogue shifted|copies|noise] [--rate TRIPLETS_PER_S]\n"
                            "                  [--seconds S] [--load TRIPLETS_PER_S] [--load-connections C]\n"
                            "                  [--no-faiss] [--omld --NAME=VALUE]...\n"
                            "  --items N: omld at N stored items (ingest, start, freshness, queries,\n"
                            "             memory, checkpoint, restart; see tests/bench/scale.c) of the\n"
                            "             catalogue named (tests/bench/catalogue.h; shifted), with\n"
                            "             triplets at --rate (2000) for --seconds (20) for freshness\n"
                            "             and at --load (5000; 0: none) over --load-connections (2)\n"
                            "             while the queries are timed; recall@10 against an exact scan,\n"
                            "             and through faiss (flat, HNSW) when /usr/bin/python3 has it\n"
                            "             unless --no-faiss\n"
                            "  --omld --NAME=VALUE: an option for the omld started (repeatable, up to 8;\n"
                            "             the default run's too, whose in-process figure stays the preset's)\n"
                            "  --durability: ingest per fsync policy and recovery time instead\n"
                            "  --job METHOD: a batch training job beside ingest and queries instead\n"
                            "  --http: the HTTP/JSON API beside the RPC (classify, triplets) instead\n"
                            "  --tls: RPC over TLS beside plain TCP (classify, triplets, connects;\n"
                            "         two daemons) instead\n"
                            "  --batch-queries [--batch B] [--rounds R]: B classify queries (100, at most\n"
                            "             1000) as one ClassifyBatch against B single requests, R rounds\n"
                            "             (20), instead\n");
            return 1;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    openblas_set_num_threads(1);
    if (items > 0)
        return omld_scale_bench(items, rate, seconds, load_rate, load_connections, kind, faiss,
                                omld_args);
    data d = {0};
    load(&d, n_triplets);
    printf("omld-bench: %d dev items, %d triplets, preset %s\n", d.split.n_dev, d.stream.n, preset);
    if (durable)
        return durability(&d, preset);
    if (job_method)
        return job_bench(&d, preset, job_method, queries);
    if (batch_q)
        return batch_queries(&d, preset, batch, rounds);
    if (tls_cmp)
        return tls_compare(&d, preset, queries);

    char preset_arg[64];
    snprintf(preset_arg, sizeof preset_arg, "--preset=%s", preset);
    /* --omld options reach this omld too (they used to be read by --items
     * alone, so a run "with" one measured the default). The in-process
     * figure stays the preset's. */
    const char *args[12] = {preset_arg, "--max_batch=1000"};
    for (int i = 0; i < n_omld_args; i++)
        args[2 + i] = omld_args[i];
    omld_proc p;
    if (omld_proc_start(&p, args, 30000) != 0)
        return 1;
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, p.rpc, 60000, &err) != 0)
        die("connect", &err);
    double t0 = now_s();
    put_dev(c, &d);
    printf("  put %d items: %.2f s\n", d.split.n_dev, now_s() - t0);

    /* 1. ingest, side by side. The first triplet takes the model's start
     * (PCA of the stored items) in both cases outside the timing. */
    omlc_triplet *t = triplets_by_id(&d);
    if (omlc_add_triplets(c, t, 1, NULL, NULL, &err) != 0)
        die("first triplet", &err);
    if (http_compare) {
        float *tq = malloc((size_t)d.split.n_test * d.dim * sizeof(float));
        for (int32_t i = 0; i < d.split.n_test; i++)
            memcpy(tq + (size_t)i * d.dim, d.images + (size_t)d.split.test[i] * d.dim,
                   (size_t)d.dim * sizeof(float));
        int hrc = omld_http_bench(c, p.http, tq, d.split.n_test, d.dim, t + 1,
                                  (size_t)d.stream.n - 1, queries / 4 > 0 ? queries / 4 : 1);
        free(tq);
        omlc_close(c);
        int src = omld_proc_stop(&p, SIGTERM, 60000);
        omld_proc_cleanup(&p);
        return hrc || src ? 1 : 0;
    }
    double in_rate = in_process_rate(&d, preset);
    t0 = now_s();
    if (omlc_add_triplets_pipelined(c, t + 1, (size_t)d.stream.n - 1, (size_t)request,
                                    request >= 16 ? 16 : 256, NULL, NULL, &err) != 0)
        die("triplets", &err);
    double e2e_rate = (d.stream.n - 1) / (now_s() - t0);
    printf("  (AddTriplets of %d triplet(s), %d in flight)\n", request, request >= 16 ? 16 : 256);
    Omld__StatusResponse s = status(c);
    printf("  ingest: in process %.0f triplets/s, through omld %.0f triplets/s: ratio %.3f "
           "(applied %llu, rehearsed meanwhile %llu)\n", in_rate, e2e_rate, e2e_rate / in_rate,
           (unsigned long long)s.triplets_applied, (unsigned long long)s.triplets_rehearsed);

    /* 2. classify latency, idle then under load. */
    double idle50, idle99, busy50, busy99;
    classify_latency(c, &d, queries, &idle50, &idle99);
    flood fl[2];
    for (int i = 0; i < 2; i++) {
        fl[i] = (flood){.server = p.rpc, .t = t, .n = d.stream.n, .run = 1};
        pthread_create(&fl[i].th, NULL, flood_main, &fl[i]);
    }
    sleep(1);
    Omld__StatusResponse s0 = status(c);
    double tl = now_s();
    classify_latency(c, &d, queries, &busy50, &busy99);
    Omld__StatusResponse s1 = status(c);
    double learn_rate = (double)(s1.triplets_applied - s0.triplets_applied) / (now_s() - tl);
    printf("  classify at %llu items: idle p50 %.2f ms p99 %.2f ms; while learning at %.0f "
           "triplets/s: p50 %.2f ms p99 %.2f ms\n", (unsigned long long)s1.items, idle50, idle99,
           learn_rate, busy50, busy99);

    /* 3. freshness under the same load. */
    double *fresh = malloc((size_t)probes * sizeof *fresh);
    for (int i = 0; i < probes; i++) {
        if (omlc_add_triplets(c, t + i, 1, NULL, NULL, &err) != 0)
            die("probe", &err);
        double acked = now_s();
        uint64_t need = status(c).triplets_applied; /* ours is learned: acks follow learning */
        while (status(c).view_triplets < need)
            usleep(2000);
        fresh[i] = (now_s() - acked) * 1e3;
    }
    double f50 = quantile(fresh, probes, 0.5), fmax = quantile(fresh, probes, 1.0);
    printf("  freshness (ack -> first view that learned it) over %d probes: p50 %.0f ms, max %.0f ms\n",
           probes, f50, fmax);
    for (int i = 0; i < 2; i++) {
        fl[i].run = 0;
        pthread_join(fl[i].th, NULL);
    }
    omlc_close(c);
    int rc = omld_proc_stop(&p, SIGTERM, 60000);
    omld_proc_cleanup(&p);
    printf("{\"bench\":\"omld\",\"preset\":\"%s\",\"items\":%d,\"in_process_tps\":%.0f,"
           "\"omld_tps\":%.0f,\"ingest_ratio\":%.3f,\"classify_idle_p50_ms\":%.3f,"
           "\"classify_idle_p99_ms\":%.3f,\"classify_learning_p50_ms\":%.3f,"
           "\"classify_learning_p99_ms\":%.3f,\"learning_tps_during_queries\":%.0f,"
           "\"freshness_p50_ms\":%.0f,\"freshness_max_ms\":%.0f,\"exit\":%d}\n",
           preset, d.split.n_dev, in_rate, e2e_rate, e2e_rate / in_rate, idle50, idle99, busy50,
           busy99, learn_rate, f50, fmax, rc);
    free(fresh);
    free(t);
    return rc == 0 ? 0 : 1;
}
