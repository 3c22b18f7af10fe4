/* omlctl_eval.c - the OAHU Fashion-MNIST protocol run end to end through
 * the daemon: the same steps as oml-eval's run_once (tools/oml_eval.c), but
 * every item, triplet and query goes over RPC.
 *
 *   1. load the 70,000 images (or --csv FILE), derive the run's features
 *      (oml_dataset_run_features: --noise-dims, --standardize), and
 *      oml_split_make(seed): dev and test halves;
 *   2. PutItems the dev items in dev order, ids "dev-<row>", labels the
 *      class names (the same strings oml-eval stores);
 *   3. the --stream (paper: oml_stream_make, random: oml_stream_make_random)
 *      of the dev labels, and AddTriplets its triplets by id, in order
 *      (batches of 256, pipelined), up to each --curve point in turn;
 *   4. at each point, poll Status until triplets_applied reaches it, then
 *      until a serving view that includes the last update is published;
 *   5. Classify the first --test-subsample test points by inline vector
 *      (pipelined), map the answered labels back to classes by name, and
 *      score error (and, at the last point, macro-F1: oml_macro_f1).
 * With a fresh daemon started with the same --seed and preset, the learner
 * sees exactly oml-eval's sequence, so the two should agree. omlctl does not
 * configure the model; it reports what the daemon says it runs. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "csv.h"
#include "curve.h"
#include "dataset.h"
#include "idx.h"
#include "omlctl.h"
#include "protocol.h"

typedef struct eval_opts {
    long long constraints, seed, k, test_subsample, settle_ms, max_wait_ms;
    long long put_batch, put_window, trip_batch, trip_window, window;
    double max_error;
    const char *data_dir, *preset, *csv;
    int stream_random, constraints_set, curve_given, n_curve;
    int32_t curve[OML_CURVE_MAX]; /* --curve; else one point, constraints */
    oml_features_opts feat;
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
            "Start a FRESH daemon with the same seed and preset, and the dimension of the\n"
            "features: 784 (Fashion-MNIST) or the CSV's feature count, plus --noise-dims;\n"
            "omlctl does not configure the model, e.g.\n"
            "  omld --seed 1 --preset default --dim 784 &   (see omld --help)\n"
            "  omld --seed 1 --dim 984 &   for  omlctl eval --noise-dims 200 --noise-scale 3\n"
            "  --constraints N     triplets in the stream (default 10000)\n"
            "  --stream S          paper (default: seeds + closure) | random (random anchor, a\n"
            "                      positive of its class, a negative of another)\n"
            "  --curve N1,N2,...   classify the test points after each of these many triplets\n"
            "                      (0: before any) of one stream as long as the last point;\n"
            "                      JSON \"curve\": [{\"constraints\": N, \"error_rate\": E}, ...]\n"
            "  --noise-dims N      append N features of noise N(0, (S sd)^2), sd the pooled sd of\n"
            "  --noise-scale S     the original values, drawn with --seed (default S 1)\n"
            "  --csv FILE          evaluate on FILE instead: rows label,f1,...,fd, an optional\n"
            "                      header (as oml-eval --csv; labels are stored as given)\n"
            "  --standardize 0|1   z-score every feature with the dev half's mean and sd (default 0)\n"
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
            "  omlctl eval --constraints 2000 --test-subsample 4000 --seed 1 --max-error 0.16\n"
            "  omlctl eval --stream random --curve 0,1000,10000 --test-subsample 5000\n");
}

static int parse(ctl *g, int argc, char **argv, eval_opts *o)
{
    *o = (eval_opts){.constraints = 10000, .seed = 1, .k = 5, .settle_ms = 3000,
                     .max_wait_ms = 3600000, .put_batch = 256, .put_window = 8,
                     .trip_batch = 256, .trip_window = 16, .window = 32,
                     .data_dir = OML_FMNIST_DIR, .preset = "default",
                     .feat = {.noise_scale = 1.0f}};
    const char *v;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            eval_usage(stdout);
            return 1;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if ((v = ctl_opt(argc, argv, &i, "--constraints"))) {
            o->constraints = ctl_int("--constraints", v, 2, 1LL << 30);
            o->constraints_set = 1;
        } else if ((v = ctl_opt(argc, argv, &i, "--stream"))) {
            if (strcmp(v, "paper") != 0 && strcmp(v, "random") != 0)
                return ctl_usage_error("eval", "--stream is paper or random, not '%s'", v) + 1;
            o->stream_random = strcmp(v, "random") == 0;
        } else if ((v = ctl_opt(argc, argv, &i, "--curve"))) {
            oml_diag d = {0};
            if ((o->n_curve = oml_curve_parse(v, o->curve, &d)) < 0)
                return ctl_usage_error("eval", "--curve %s", d.msg) + 1;
        } else if ((v = ctl_opt(argc, argv, &i, "--noise-dims"))) {
            o->feat.noise_dims = (int32_t)ctl_int("--noise-dims", v, 0, 1 << 20);
        } else if ((v = ctl_opt(argc, argv, &i, "--noise-scale"))) {
            o->feat.noise_scale = (float)ctl_real("--noise-scale", v, 0, 1e6);
        } else if ((v = ctl_opt(argc, argv, &i, "--csv"))) {
            o->csv = v;
        } else if ((v = ctl_opt(argc, argv, &i, "--standardize"))) {
            o->feat.standardize = (int32_t)ctl_int("--standardize", v, 0, 1);
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
    o->curve_given = o->n_curve > 0;
    if (o->curve_given) {
        if (o->constraints_set && o->constraints != o->curve[o->n_curve - 1])
            return ctl_usage_error("eval", "--constraints %lld and --curve ending at %d disagree "
                                   "(the stream is as long as the curve's last point)",
                                   o->constraints, o->curve[o->n_curve - 1]) + 1;
        o->constraints = o->curve[o->n_curve - 1];
    } else {
        o->n_curve = 1;
        o->curve[0] = (int32_t)o->constraints;
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
 * them all serves. A view whose view_triplets reach the target holds them
 * (and every item put before them: a view indexes the store as it is when
 * it is built, after its snapshot); so does a view whose snapshot was taken
 * after we saw the count reached (snapshot_age_ms is shorter than the time
 * since); and if no newer view appears for settle_ms, the current one
 * already holds every update (the daemon publishes within publish_ms of a
 * change). The last two also cover a target of no new triplets (base), a
 * view that must only hold the items just put. *version gets the view's
 * version, *train_s the time from t0 to the count. */
static int wait_learned(omlc *c, const eval_opts *o, uint64_t base, uint64_t target, double t0,
                        double *train_s, uint64_t *version)
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
        uint64_t learned = r->status_info->view_triplets;
        omld__response__free_unpacked(r, NULL);
        double now = ctl_now();
        if (target > base && learned >= target) {
            *version = v; /* the serving view has learned every triplet sent */
            break;
        }
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

/* Step 5 at one point: classifies the test rows X[test] (n_test) through the
 * daemon; pred and truth get class ids (-1: an answer of no known class),
 * *error the error rate. Warns if an answer came from a view older than
 * `version`. Returns 0 or an exit code. */
static int classify_test(omlc *c, const eval_opts *o, const oml_dataset *ds, const float *X,
                         int32_t dim, const int32_t *test, int32_t n_test, uint64_t version,
                         omlc_ref *refs, omlc_classification *out, int32_t *pred, int32_t *truth,
                         double *error, double *cls_s)
{
    omlc_error err;
    for (int32_t i = 0; i < n_test; i++)
        refs[i] = (omlc_ref){NULL, X + (size_t)test[i] * dim, (uint32_t)dim};
    ctl_progress pr;
    ctl_progress_init(&pr, "test points");
    double t = ctl_now();
    int e = omlc_classify_pipelined(c, refs, (size_t)n_test, (uint32_t)o->k, NULL,
                                    (size_t)o->window, out, ctl_progress_cb, &pr, &err);
    ctl_progress_end(&pr);
    if (e != 0)
        return ctl_fail("eval: classify", e, &err);
    *cls_s = ctl_now() - t;
    int32_t wrong = 0, stale = 0;
    for (int32_t i = 0; i < n_test; i++) {
        pred[i] = out[i].label[0] ? oml_dataset_class_of(ds, out[i].label) : -1;
        truth[i] = ds->y[test[i]];
        wrong += pred[i] != truth[i];
        stale += out[i].model_version < version;
    }
    if (stale)
        fprintf(stderr, "omlctl eval: warning: %d answers came from a view older than %llu\n",
                stale, (unsigned long long)version);
    *error = (double)wrong / n_test;
    return 0;
}

/* The JSON keys that say what the model saw: stream, data, dim and noise. */
static void print_json_data(const eval_opts *o, const oml_dataset *ds, int32_t dim)
{
    printf(",\"stream\":\"%s\",\"dim\":%d", o->stream_random ? "random" : "paper", dim);
    if (o->feat.noise_dims > 0)
        printf(",\"noise_dims\":%d,\"noise_scale\":%g", o->feat.noise_dims,
               (double)o->feat.noise_scale);
    if (o->csv) {
        printf(",\"csv\":");
        ctl_json_string(stdout, o->csv);
        printf(",\"items\":%d,\"classes\":%d", ds->n, ds->n_classes);
    }
    if (o->feat.standardize)
        printf(",\"standardize\":1");
}

static int eval_run(omlc *c, const eval_opts *o, const oml_dataset *ds, const float *X,
                    int32_t dim)
{
    oml_split split;
    oml_stream stream = {0};
    oml_diag diag = {0};
    int32_t *dev_labels = NULL, *pred = NULL, *truth = NULL;
    char (*ids)[24] = NULL;
    omlc_item *items = NULL;
    omlc_triplet *trip = NULL;
    omlc_ref *refs = NULL;
    omlc_classification *out = NULL;
    Omld__Response *st = NULL;
    omlc_error err;
    double curve_err[OML_CURVE_MAX];
    int rc = 0, e;
    if (oml_split_make(&split, ds->n, (uint64_t)o->seed) != 0) {
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
        fprintf(stderr, "omlctl eval: the daemon's dimension is %u, the data's %d%s; start omld "
                        "with --dim %d\n", s->dim, dim,
                o->feat.noise_dims ? " (with the noise features)" : "", dim);
        rc = CTL_EXIT_USAGE;
        goto done;
    }
    if (s->items > 0 || s->triplets_received > 0)
        fprintf(stderr, "omlctl eval: warning: the daemon is not fresh (%llu items, %llu "
                        "triplets); results will differ from oml-eval\n",
                (unsigned long long)s->items, (unsigned long long)s->triplets_received);

    dev_labels = malloc((size_t)n_dev * sizeof *dev_labels);
    ids = malloc((size_t)n_dev * sizeof *ids);
    items = malloc((size_t)n_dev * sizeof *items);
    pred = malloc((size_t)n_test * sizeof *pred);
    truth = malloc((size_t)n_test * sizeof *truth);
    refs = malloc((size_t)n_test * sizeof *refs);
    out = malloc((size_t)n_test * sizeof *out);
    if (!dev_labels || !ids || !items || !pred || !truth || !refs || !out) {
        fprintf(stderr, "omlctl eval: out of memory\n");
        rc = CTL_EXIT_USAGE;
        goto done;
    }

    /* Step 2: the dev items, in dev order. */
    for (int32_t i = 0; i < n_dev; i++) {
        int32_t row = split.dev[i];
        snprintf(ids[i], sizeof ids[i], "dev-%d", row);
        dev_labels[i] = ds->y[row];
        items[i] = (omlc_item){ids[i], X + (size_t)row * dim, (uint32_t)dim,
                               ds->names[ds->y[row]]};
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

    /* Step 3: the stream, by id. */
    e = o->stream_random ? oml_stream_make_random(&stream, dev_labels, n_dev,
                                                  (int32_t)o->constraints, (uint64_t)o->seed, &diag)
                         : oml_stream_make(&stream, dev_labels, n_dev, (int32_t)o->constraints,
                                           (uint64_t)o->seed, &diag);
    if (e != 0) {
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
                                 {ids[stream.t[i].n], NULL, 0}, 0.0f};

    /* Steps 3-5 at each curve point (one point, the whole stream, without
     * --curve): send the triplets up to it, wait until the serving view has
     * learned them, classify the test points. */
    double sent_s = 0, train_s = 0, cls_s = 0, error = 0;
    uint64_t version = 0;
    for (int p = 0; p < o->n_curve; p++) {
        int32_t from = p ? o->curve[p - 1] : 0;
        int32_t to = o->curve[p] < stream.n ? o->curve[p] : stream.n;
        double t0 = ctl_now(), seg_s = 0;
        if (to > from) {
            ctl_progress_init(&pr, "triplets");
            e = omlc_add_triplets_pipelined(c, trip + from, (size_t)(to - from),
                                            (size_t)o->trip_batch, (size_t)o->trip_window,
                                            ctl_progress_cb, &pr, &err);
            ctl_progress_end(&pr);
            if (e != 0) {
                rc = ctl_fail("eval: add triplets", e, &err);
                goto done;
            }
        }
        sent_s += ctl_now() - t0;
        if ((rc = wait_learned(c, o, base_applied, base_applied + (uint64_t)to, t0, &seg_s,
                               &version)) != 0)
            goto done;
        train_s += to > from ? seg_s : 0;
        if ((rc = classify_test(c, o, ds, X, dim, split.test, n_test, version, refs, out, pred,
                                truth, &curve_err[p], &cls_s)) != 0)
            goto done;
        if (o->curve_given)
            printf("after %d triplets: error %.4f (model version %llu)\n", to, curve_err[p],
                   (unsigned long long)version);
    }
    error = curve_err[o->n_curve - 1];
    double tps = stream.n / (train_s > 0 ? train_s : 1e-9);
    printf("streamed %d triplets (%d seeds) in %.1f s; learned in %.1f s (%.0f triplets/s); "
           "serving model version %llu\n",
           stream.n, stream.n_seeds, sent_s, train_s, tps, (unsigned long long)version);
    double f1 = oml_macro_f1(truth, pred, n_test, ds->n_classes);
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
    if (o->curve_given) {
        printf("error curve:\n  %12s  %10s\n", "triplets", "error");
        for (int p = 0; p < o->n_curve; p++)
            printf("  %12d  %10.4f\n", o->curve[p], curve_err[p]);
    }
    printf("{\"error_rate\":%.5f,\"macro_f1\":%.5f,\"utilisation\":%.5f,"
           "\"test_then_train_accuracy\":%.5f,\"alpha\":[",
           error, f1, s->utilisation, s->triplet_accuracy);
    for (size_t h = 0; h < s->n_alpha; h++)
        printf("%s%.5f", h ? "," : "", s->alpha[h]);
    printf("],\"error_rates\":[%.5f]", error);
    if (o->curve_given)
        oml_curve_print_json(stdout, o->curve, curve_err, o->n_curve);
    printf(",\"constraints\":%lld,\"k\":%lld,\"runs\":1,\"seed\":%lld,"
           "\"train_seconds\":%.4f,\"triplets_per_second\":%.1f,\"preset\":",
           o->constraints, o->k, o->seed, train_s, tps);
    ctl_json_string(stdout, s->preset[0] ? s->preset : o->preset);
    print_json_data(o, ds, dim);
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
    oml_dataset ds;
    oml_diag diag = {0};
    double t0 = ctl_now();
    if (o.csv && oml_csv_read(o.csv, &ds, &diag) != 0) {
        fprintf(stderr, "omlctl eval: %s\n", diag.msg);
        return CTL_EXIT_USAGE;
    } else if (!o.csv && oml_dataset_fmnist(&ds, o.data_dir, &diag) != 0) {
        fprintf(stderr, "omlctl eval: cannot load Fashion-MNIST from %s: %s\n"
                        "HINT: install it with deploy/install-deps.sh (package dataset-fashion-mnist)\n",
                o.data_dir, diag.msg);
        return CTL_EXIT_USAGE;
    }
    if (o.csv)
        printf("omlctl eval: %d rows of %d features in %d classes read from %s in %.1f s\n",
               ds.n, ds.dim, ds.n_classes, o.csv, ctl_now() - t0);
    else
        printf("omlctl eval: %d images of %d features loaded in %.1f s\n", ds.n, ds.dim,
               ctl_now() - t0);
    float *X = NULL;
    int32_t dim = 0;
    int owned = 0;
    if (ds.n < 4) {
        fprintf(stderr, "omlctl eval: %d rows; the 1:1 split needs at least 4\n", ds.n);
        rc = CTL_EXIT_USAGE;
    } else if (oml_dataset_run_features(&ds, &o.feat, (uint64_t)o.seed, &X, &dim, &owned,
                                        &diag) != 0) {
        fprintf(stderr, "omlctl eval: %s\n", diag.msg);
        rc = CTL_EXIT_USAGE;
    }
    if (rc == 0 && o.feat.noise_dims > 0)
        printf("%d features of noise N(0, (%g x pooled sd)^2) appended: dim %d\n",
               o.feat.noise_dims, (double)o.feat.noise_scale, dim);
    if (rc == 0 && o.feat.standardize)
        printf("every feature z-scored with the mean and sd of the dev half\n");
    if (rc == 0)
        printf("%s stream, %lld constraints, k=%lld, seed %lld, through omld at %s\n",
               o.stream_random ? "random" : "paper", o.constraints, o.k, o.seed, g->server);
    omlc *c = NULL;
    if (rc == 0 && (rc = ctl_connect(g, &c)) == 0)
        rc = eval_run(c, &o, &ds, X, dim);
    omlc_close(c);
    if (owned)
        free(X);
    oml_dataset_free(&ds);
    return rc;
}
