/* omlctl_eval.c - the OAHU Fashion-MNIST protocol run end to end through
 * the daemon: the same steps as oml-eval's run_once (tools/oml_eval.c), but
 * every item, triplet and query goes over RPC.
 *
 *   1. load the 70,000 images, oml_split_make(seed): dev and test halves;
 *   2. PutItems the dev items in dev order, ids "dev-<row>", labels
 *      "<class>" (the same strings oml-eval stores);
 *   3. oml_stream_make(dev labels, constraints, seed) and AddTriplets its
 *      triplets by id, in order (batches of 256, pipelined);
 *   4. poll Status until triplets_applied reaches the count, then until a
 *      serving view that includes the last update is published;
 *   5. Classify the first --test-subsample test points by inline vector
 *      (pipelined), and score error and macro-F1 (oml_macro_f1).
 * With a fresh daemon started with the same --seed and preset, the learner
 * sees exactly oml-eval's sequence, so the two should agree. omlctl does not
 * configure the model; it reports what the daemon says it runs. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idx.h"
#include "omlctl.h"
#include "protocol.h"

typedef struct eval_opts {
    long long constraints, seed, k, test_subsample, settle_ms, max_wait_ms;
    long long put_batch, put_window, trip_batch, trip_window, window;
    double max_error;
    const char *data_dir, *preset;
} eval_opts;

static void eval_usage(FILE *f)
{
    fprintf(f,
            "usage: omlctl eval [options]\n"
            "The OAHU Fashion-MNIST protocol of oml-eval, end to end through the daemon:\n"
            "split the data with the seed, put the dev half (ids dev-<row>, labels <class>),\n"
            "stream seed + closure triplets by id, wait for the learner and a fresh view,\n"
            "classify the test points over RPC and print a report and one JSON line with\n"
            "oml-eval's keys plus \"through\":\"omld\".\n"
            "Start a FRESH daemon with the same seed and preset, and a dimension of 784;\n"
            "omlctl does not configure the model, e.g.\n"
            "  omld --seed 1 --preset default --dim 784 &   (see omld --help)\n"
            "  --constraints N     triplets in the stream (default 10000)\n"
            "  --seed S            split / stream seed; the daemon's --seed must match (default 1)\n"
            "  --k K               neighbours per head for Classify (default 5)\n"
            "  --test-subsample M  classify only the first M test points (default all 35000)\n"
            "  --data DIR          Fashion-MNIST IDX directory (default " OML_FMNIST_DIR ")\n"
            "  --max-error X       exit with status 3 if the error rate exceeds X\n"
            "  --preset P          the preset the daemon was started with, for the JSON line\n"
            "                      only (default \"default\"; the daemon does not report it)\n"
            "  --window W          classify requests in flight (default 32)\n"
            "  --settle-ms MS      after learning, accept the current view if no newer one\n"
            "                      appears for MS ms (default 3000)\n"
            "  --max-wait-ms MS    give up waiting for the learner after MS ms (default 3600000)\n"
            "  --server S, --timeout MS as for omlctl\n"
            "example:\n"
            "  omlctl eval --constraints 2000 --test-subsample 4000 --seed 1 --max-error 0.16\n");
}

static int parse(ctl *g, int argc, char **argv, eval_opts *o)
{
    *o = (eval_opts){.constraints = 10000, .seed = 1, .k = 5, .settle_ms = 3000,
                     .max_wait_ms = 3600000, .put_batch = 256, .put_window = 8,
                     .trip_batch = 256, .trip_window = 16, .window = 32,
                     .data_dir = OML_FMNIST_DIR, .preset = "default"};
    const char *v;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            eval_usage(stdout);
            return 1;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if ((v = ctl_opt(argc, argv, &i, "--constraints"))) {
            o->constraints = ctl_int("--constraints", v, 2, 1LL << 30);
        } else if ((v = ctl_opt(argc, argv, &i, "--seed"))) {
            o->seed = ctl_int("--seed", v, 0, 9007199254740991LL);
        } else if ((v = ctl_opt(argc, argv, &i, "--k"))) {
            o->k = ctl_int("--k", v, 1, 1 << 16);
        } else if ((v = ctl_opt(argc, argv, &i, "--test-subsample"))) {
            o->test_subsample = ctl_int("--test-subsample", v, 0, 1LL << 30);
        } else if ((v = ctl_opt(argc, argv, &i, "--data"))) {
            o->data_dir = v;
        } else if ((v = ctl_opt(argc, argv, &i, "--max-error"))) {
            o->max_error = ctl_real("--max-error", v, 0, 1);
        } else if ((v = ctl_opt(argc, argv, &i, "--preset"))) {
            o->preset = v;
        } else if ((v = ctl_opt(argc, argv, &i, "--window"))) {
            o->window = ctl_int("--window", v, 1, 1024);
        } else if ((v = ctl_opt(argc, argv, &i, "--settle-ms"))) {
            o->settle_ms = ctl_int("--settle-ms", v, 0, 3600000);
        } else if ((v = ctl_opt(argc, argv, &i, "--max-wait-ms"))) {
            o->max_wait_ms = ctl_int("--max-wait-ms", v, 1, 1LL << 40);
        } else {
            return ctl_usage_error("eval", "unknown argument '%s'", argv[i]) + 1;
        }
    }
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One Status call; *r owned by the caller. Returns 0 or an exit code. */
static int get_status(omlc *c, Omld__Response **r)
{
    omlc_error err;
    int e = omlc_status(c, r, &err);
    return e == 0 ? 0 : ctl_fail("eval: status", e, &err);
}

/* Step 4: the learner has applied `target` triplets and a view that holds
 * them all serves. A view's snapshot taken after we saw the count reached
 * certainly holds them (snapshot_age_ms is shorter than the time since);
 * and if no newer view appears for settle_ms, the current one already
 * holds every update (the daemon publishes within publish_ms of a change).
 * *version gets the view's version, *train_s the time to the count. */
static int wait_learned(omlc *c, const eval_opts *o, uint64_t target, double t0, double *train_s,
                        uint64_t *version)
{
    Omld__Response *r = NULL;
    int rc;
    double start = ctl_now(), t_seen = 0;
    uint64_t last_applied = 0;
    for (;;) {
        if ((rc = get_status(c, &r)) != 0)
            return rc;
        uint64_t applied = r->status_info->triplets_applied;
        omld__response__free_unpacked(r, NULL);
        if (applied >= target) {
            t_seen = ctl_now();
            break;
        }
        if ((isatty(1) && isatty(2)) && applied != last_applied)
            fprintf(stderr, "\rlearning: %llu / %llu triplets applied ",
                    (unsigned long long)applied, (unsigned long long)target);
        last_applied = applied;
        if ((ctl_now() - start) * 1000 > (double)o->max_wait_ms) {
            fprintf(stderr, "omlctl eval: the learner applied %llu of %llu triplets in %lld ms; "
                            "giving up (--max-wait-ms)\n",
                    (unsigned long long)applied, (unsigned long long)target, o->max_wait_ms);
            return CTL_EXIT_TRANSPORT;
        }
        sleep_ms(20);
    }
    if ((isatty(1) && isatty(2)) && last_applied)
        fprintf(stderr, "\n");
    *train_s = t_seen - t0;
    uint64_t v_seen = omlc_last_model_version(c), v_last = v_seen;
    double t_change = t_seen;
    for (;;) {
        if ((rc = get_status(c, &r)) != 0)
            return rc;
        uint64_t v = r->model_version, age = r->status_info->snapshot_age_ms;
        omld__response__free_unpacked(r, NULL);
        double now = ctl_now();
        if (v != v_last) {
            v_last = v;
            t_change = now;
        }
        if (v > v_seen && (double)age + 5.0 < (now - t_seen) * 1000.0) {
            *version = v; /* snapshot taken after the count was reached */
            break;
        }
        if ((now - t_change) * 1000.0 >= (double)o->settle_ms) {
            *version = v; /* nothing newer is coming */
            break;
        }
        sleep_ms(20);
    }
    return 0;
}

static int eval_run(omlc *c, const eval_opts *o, const float *images, const int32_t *labels,
                    int32_t n_all, int32_t dim)
{
    oml_split split;
    oml_stream stream = {0};
    oml_diag diag = {0};
    int32_t *dev_labels = NULL, *pred = NULL, *truth = NULL;
    char (*ids)[24] = NULL, (*labs)[16] = NULL;
    omlc_item *items = NULL;
    omlc_triplet *trip = NULL;
    omlc_ref *refs = NULL;
    omlc_classification *out = NULL;
    Omld__Response *st = NULL;
    omlc_error err;
    int rc = 0, e;
    if (oml_split_make(&split, n_all, (uint64_t)o->seed) != 0) {
        fprintf(stderr, "omlctl eval: out of memory\n");
        return CTL_EXIT_USAGE;
    }
    int32_t n_dev = split.n_dev;
    int32_t n_test = o->test_subsample > 0 && o->test_subsample < split.n_test
                         ? (int32_t)o->test_subsample : split.n_test;

    /* What the daemon runs. */
    if ((rc = get_status(c, &st)) != 0)
        goto done;
    const Omld__StatusResponse *s = st->status_info;
    uint64_t base_applied = s->triplets_applied;
    printf("daemon %s: omld %s, dim %u, depth L=%u (%u heads), model version %llu, "
           "%llu items, %llu triplets applied\n",
           "reports", s->version, s->dim, s->depth, s->depth + 1,
           (unsigned long long)st->model_version, (unsigned long long)s->items,
           (unsigned long long)s->triplets_applied);
    printf("daemon model: preset %s, seed %llu\n", s->preset, (unsigned long long)s->seed);
    if (s->seed != (uint64_t)o->seed || (s->preset[0] && strcmp(s->preset, o->preset) != 0))
        printf("note: this run matches oml-eval --seed %lld --preset %s only if omld runs that\n"
               "      seed and preset and was started fresh\n", o->seed, o->preset);
    if (s->dim != (uint32_t)dim) {
        fprintf(stderr, "omlctl eval: the daemon's dimension is %u, the data's %d\n", s->dim, dim);
        rc = CTL_EXIT_USAGE;
        goto done;
    }
    if (s->items > 0 || s->triplets_received > 0)
        fprintf(stderr, "omlctl eval: warning: the daemon is not fresh (%llu items, %llu "
                        "triplets); results will differ from oml-eval\n",
                (unsigned long long)s->items, (unsigned long long)s->triplets_received);

    dev_labels = malloc((size_t)n_dev * sizeof *dev_labels);
    ids = malloc((size_t)n_dev * sizeof *ids);
    labs = malloc((size_t)n_dev * sizeof *labs);
    items = malloc((size_t)n_dev * sizeof *items);
    pred = malloc((size_t)n_test * sizeof *pred);
    truth = malloc((size_t)n_test * sizeof *truth);
    refs = malloc((size_t)n_test * sizeof *refs);
    out = malloc((size_t)n_test * sizeof *out);
    if (!dev_labels || !ids || !labs || !items || !pred || !truth || !refs || !out) {
        fprintf(stderr, "omlctl eval: out of memory\n");
        rc = CTL_EXIT_USAGE;
        goto done;
    }

    /* Step 2: the dev items, in dev order. */
    for (int32_t i = 0; i < n_dev; i++) {
        int32_t row = split.dev[i];
        snprintf(ids[i], sizeof ids[i], "dev-%d", row);
        snprintf(labs[i], sizeof labs[i], "%d", labels[row]);
        dev_labels[i] = labels[row];
        items[i] = (omlc_item){ids[i], images + (size_t)row * dim, (uint32_t)dim, labs[i]};
    }
    ctl_progress pr;
    ctl_progress_init(&pr, "dev items");
    double t = ctl_now();
    e = omlc_put_items_pipelined(c, items, (size_t)n_dev, (size_t)o->put_batch,
                                 (size_t)o->put_window, ctl_progress_cb, &pr, &err);
    ctl_progress_end(&pr);
    if (e != 0) {
        rc = ctl_fail("eval: put", e, &err);
        goto done;
    }
    omlc_totals tot;
    omlc_last_totals(c, &tot);
    printf("put %d dev items in %.1f s (%llu created, %llu replaced)\n", n_dev, ctl_now() - t,
           (unsigned long long)tot.created, (unsigned long long)tot.replaced);

    /* Step 3: the stream, by id, in order. */
    if (oml_stream_make(&stream, dev_labels, n_dev, (int32_t)o->constraints, (uint64_t)o->seed,
                        &diag) != 0) {
        fprintf(stderr, "omlctl eval: stream: %s\n", diag.msg);
        rc = CTL_EXIT_USAGE;
        goto done;
    }
    trip = malloc((size_t)stream.n * sizeof *trip);
    if (trip == NULL) {
        fprintf(stderr, "omlctl eval: out of memory\n");
        rc = CTL_EXIT_USAGE;
        goto done;
    }
    for (int32_t i = 0; i < stream.n; i++)
        trip[i] = (omlc_triplet){{ids[stream.t[i].a], NULL, 0}, {ids[stream.t[i].p], NULL, 0},
                                 {ids[stream.t[i].n], NULL, 0}};
    ctl_progress_init(&pr, "triplets");
    double t0 = ctl_now();
    e = omlc_add_triplets_pipelined(c, trip, (size_t)stream.n, (size_t)o->trip_batch,
                                    (size_t)o->trip_window, ctl_progress_cb, &pr, &err);
    ctl_progress_end(&pr);
    if (e != 0) {
        rc = ctl_fail("eval: add triplets", e, &err);
        goto done;
    }
    double sent_s = ctl_now() - t0;

    /* Step 4: learned, and served. */
    double train_s = 0;
    uint64_t version = 0;
    if ((rc = wait_learned(c, o, base_applied + (uint64_t)stream.n, t0, &train_s, &version)) != 0)
        goto done;
    double tps = stream.n / (train_s > 0 ? train_s : 1e-9);
    printf("streamed %d triplets (%d seeds) in %.1f s; learned in %.1f s (%.0f triplets/s); "
           "serving model version %llu\n",
           stream.n, stream.n_seeds, sent_s, train_s, tps, (unsigned long long)version);

    /* Step 5: classify the test points by inline vector. */
    for (int32_t i = 0; i < n_test; i++)
        refs[i] = (omlc_ref){NULL, images + (size_t)split.test[i] * dim, (uint32_t)dim};
    ctl_progress_init(&pr, "test points");
    t = ctl_now();
    e = omlc_classify_pipelined(c, refs, (size_t)n_test, (uint32_t)o->k, NULL, (size_t)o->window,
                                out, ctl_progress_cb, &pr, &err);
    ctl_progress_end(&pr);
    if (e != 0) {
        rc = ctl_fail("eval: classify", e, &err);
        goto done;
    }
    double cls_s = ctl_now() - t;
    int32_t wrong = 0, stale = 0;
    for (int32_t i = 0; i < n_test; i++) {
        pred[i] = out[i].label[0] ? atoi(out[i].label) : -1;
        truth[i] = labels[split.test[i]];
        wrong += pred[i] != truth[i];
        stale += out[i].model_version < version;
    }
    if (stale)
        fprintf(stderr, "omlctl eval: warning: %d answers came from a view older than %llu\n",
                stale, (unsigned long long)version);
    double error = (double)wrong / n_test, f1 = oml_macro_f1(truth, pred, n_test, 10);
    printf("classified %d test points in %.1f s (%.0f/s), k=%lld\n", n_test, cls_s,
           n_test / (cls_s > 0 ? cls_s : 1e-9), o->k);

    /* The daemon's hedge weights after learning. */
    omld__response__free_unpacked(st, NULL);
    st = NULL;
    if ((rc = get_status(c, &st)) != 0)
        goto done;
    s = st->status_info;
    printf("error %.4f, macro-F1 %.4f; alpha:", error, f1);
    for (size_t h = 0; h < s->n_alpha; h++)
        printf(" %.3f", s->alpha[h]);
    printf("\n");
    printf("{\"error_rate\":%.5f,\"macro_f1\":%.5f,\"utilization\":%.5f,"
           "\"test_then_train_accuracy\":%.5f,\"alpha\":[",
           error, f1, s->utilisation, s->triplet_accuracy);
    for (size_t h = 0; h < s->n_alpha; h++)
        printf("%s%.5f", h ? "," : "", s->alpha[h]);
    printf("],\"error_rates\":[%.5f],\"constraints\":%lld,\"k\":%lld,\"runs\":1,\"seed\":%lld,"
           "\"train_seconds\":%.4f,\"triplets_per_second\":%.1f,\"preset\":",
           error, o->constraints, o->k, o->seed, train_s, tps);
    ctl_json_string(stdout, s->preset[0] ? s->preset : o->preset);
    printf(",\"model_version\":%llu,\"test_points\":%d,\"through\":\"omld\"}\n",
           (unsigned long long)version, n_test);
    fflush(stdout);
    if (o->max_error > 0 && error > o->max_error) {
        fprintf(stderr, "omlctl eval: error rate %.4f exceeds --max-error %.4f\n", error,
                o->max_error);
        rc = CTL_EXIT_EVAL;
    }
done:
    if (st)
        omld__response__free_unpacked(st, NULL);
    oml_stream_free(&stream);
    oml_split_free(&split);
    free(dev_labels);
    free(ids);
    free(labs);
    free(items);
    free(trip);
    free(refs);
    free(out);
    free(pred);
    free(truth);
    return rc;
}

int ctl_eval(ctl *g, int argc, char **argv)
{
    eval_opts o;
    int rc = parse(g, argc, argv, &o);
    if (rc)
        return rc - 1;
    float *images = NULL;
    int32_t *labels = NULL, n = 0, dim = 0;
    oml_diag diag = {0};
    double t0 = ctl_now();
    if (oml_fmnist_load(o.data_dir, &images, &labels, &n, &dim, &diag) != 0) {
        fprintf(stderr, "omlctl eval: cannot load Fashion-MNIST from %s: %s\n"
                        "HINT: install it with deploy/install-deps.sh (package dataset-fashion-mnist)\n",
                o.data_dir, diag.msg);
        return CTL_EXIT_USAGE;
    }
    printf("omlctl eval: %d images of %d features loaded in %.1f s\n", n, dim, ctl_now() - t0);
    printf("%lld constraints, k=%lld, seed %lld, through omld at %s\n", o.constraints, o.k,
           o.seed, g->server);
    omlc *c = NULL;
    if ((rc = ctl_connect(g, &c)) == 0)
        rc = eval_run(c, &o, images, labels, n, dim);
    omlc_close(c);
    free(images);
    free(labels);
    return rc;
}
