/* oml-eval - the OAHU paper's Fashion-MNIST protocol, in process.
 *
 * Reads the 70,000 images, shuffles with a seed, splits 1:1 into dev (the
 * stored, labelled reference items) and test, streams seed + closure-derived
 * triplets over dev through one learner in one pass, then classifies every
 * (or a subsample of) test point against the dev set with Eq. 23-25.
 * Prints a readable report and, last, one JSON line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#include "config.h"
#include "idx.h"
#include "index.h"
#include "learner.h"
#include "protocol.h"
#include "serve.h"
#include "store.h"

extern void openblas_set_num_threads(int);

typedef struct eval_opts {
    int32_t constraints, k, test_subsample, runs, heads_report;
    double max_error; /* exit 3 if the mean error is above (0 = no check) */
    uint64_t seed;
    const char *preset, *data_dir;
    oml_config overrides; /* fields < 0 (or NaN) mean "from the preset" */
} eval_opts;

typedef struct run_result {
    double error, f1, utilisation, accuracy, train_s, tps;
    float alpha[OML_MAX_HEADS];
    double head_error[OML_MAX_HEADS], equal_error;
    int heads;
} run_result;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: oml-eval [options]\n"
            "  --constraints N     triplets in the stream (default 10000; half seeds, half closure)\n"
            "  --seed S            shuffle/sampling/model seed (default 1)\n"
            "  --runs R            average over seeds S..S+R-1 (default 1)\n"
            "  --k K               neighbours per head (default 5)\n"
            "  --preset P          paper | default (default: default)\n"
            "  --test-subsample M  classify only the first M test points (default all)\n"
            "  --data DIR          Fashion-MNIST IDX directory (default " OML_FMNIST_DIR ")\n"
            "  --heads-report      also report each head alone and all heads voting equally\n"
            "  --max-error X       exit with status 3 if the mean error rate exceeds X\n"
            " overrides of the preset (ablations):\n"
            "  --eta X --tau X --prox X --eta-decay X --beta X --s X\n"
            "  --layers N --hidden N --emb N --init random|pca --center 0|1 --hedge abtl|margin|hard|local\n");
}

static int parse_args(int argc, char **argv, eval_opts *o)
{
    memset(o, 0, sizeof *o);
    o->constraints = 10000;
    o->k = 5;
    o->runs = 1;
    o->seed = 1;
    o->preset = "default";
    o->data_dir = OML_FMNIST_DIR;
    oml_config *v = &o->overrides;
    v->eta = v->tau = v->prox = v->eta_decay = v->beta = v->s = NAN;
    v->layers = v->hidden = v->emb = v->init = v->center = v->hedge_signal = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && val && (i++, 1))
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--heads-report") == 0) {
            o->heads_report = 1;
        } else if (OPT("--constraints")) {
            o->constraints = atoi(val);
        } else if (OPT("--seed")) {
            o->seed = strtoull(val, NULL, 10);
        } else if (OPT("--max-error")) {
            o->max_error = strtod(val, NULL);
        } else if (OPT("--runs")) {
            o->runs = atoi(val);
        } else if (OPT("--k")) {
            o->k = atoi(val);
        } else if (OPT("--preset")) {
            o->preset = val;
        } else if (OPT("--test-subsample")) {
            o->test_subsample = atoi(val);
        } else if (OPT("--data")) {
            o->data_dir = val;
        } else if (OPT("--eta")) {
            v->eta = strtof(val, NULL);
        } else if (OPT("--tau")) {
            v->tau = strtof(val, NULL);
        } else if (OPT("--prox")) {
            v->prox = strtof(val, NULL);
        } else if (OPT("--eta-decay")) {
            v->eta_decay = strtof(val, NULL);
        } else if (OPT("--beta")) {
            v->beta = strtof(val, NULL);
        } else if (OPT("--s")) {
            v->s = strtof(val, NULL);
        } else if (OPT("--layers")) {
            v->layers = atoi(val);
        } else if (OPT("--hidden")) {
            v->hidden = atoi(val);
        } else if (OPT("--emb")) {
            v->emb = atoi(val);
        } else if (OPT("--center")) {
            v->center = atoi(val);
        } else if (OPT("--init")) {
            v->init = strcmp(val, "pca") == 0 ? OML_INIT_PCA : strcmp(val, "random") == 0 ? OML_INIT_RANDOM : 99;
        } else if (OPT("--hedge")) {
            v->hedge_signal = strcmp(val, "margin") == 0 ? OML_HEDGE_MARGIN : strcmp(val, "abtl") == 0 ? OML_HEDGE_ABTL : strcmp(val, "hard") == 0 ? OML_HEDGE_HARD : strcmp(val, "local") == 0 ? OML_HEDGE_LOCAL : 99;
        } else {
            fprintf(stderr, "oml-eval: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return -1;
        }
#undef OPT
    }
    if (o->constraints < 2 || o->k < 1 || o->k > OML_SERVE_MAX_K || o->runs < 1 || o->test_subsample < 0) {
        fprintf(stderr, "oml-eval: --constraints >= 2, --k in [1, %d], --runs >= 1, --test-subsample >= 0\n",
                OML_SERVE_MAX_K);
        return -1;
    }
    return 0;
}

static void apply_overrides(oml_config *c, const oml_config *v)
{
#define OVR_F(f) if (!isnan(v->f)) c->f = v->f
#define OVR_I(f) if (v->f >= 0) c->f = v->f
    OVR_F(eta); OVR_F(tau); OVR_F(prox); OVR_F(eta_decay); OVR_F(beta); OVR_F(s);
    OVR_I(layers); OVR_I(hidden); OVR_I(emb); OVR_I(init); OVR_I(center); OVR_I(hedge_signal);
#undef OVR_F
#undef OVR_I
}

/* Classifies the test rows with the given snapshot; returns the error. */
static int classify_error(oml_snapshot *snap, const oml_store *store, const float *images,
                          const int32_t *labels, const int32_t *test, int32_t n_test, int32_t dim,
                          int32_t k, int32_t *pred, int32_t *truth, double *error)
{
    oml_index *ix = NULL;
    int rc = oml_index_build(&ix, snap, store);
    if (rc != OML_OK)
        return rc;
    float *Q = malloc((size_t)n_test * dim * sizeof(float));
    if (Q == NULL) {
        oml_index_destroy(ix);
        return OML_ENOMEM;
    }
    for (int32_t i = 0; i < n_test; i++)
        memcpy(Q + (size_t)i * dim, images + (size_t)test[i] * dim, (size_t)dim * sizeof(float));
    rc = oml_classify_batch(ix, Q, n_test, k, pred);
    if (rc == OML_OK) {
        int32_t wrong = 0;
        for (int32_t i = 0; i < n_test; i++) {
            /* Index label ids -> class numbers via the label names ("0".."9"). */
            pred[i] = pred[i] >= 0 ? atoi(ix->label_names[pred[i]]) : -1;
            truth[i] = labels[test[i]];
            wrong += pred[i] != truth[i];
        }
        *error = (double)wrong / n_test;
    }
    free(Q);
    oml_index_destroy(ix);
    return rc;
}

static int run_once(const eval_opts *o, uint64_t seed, const float *images, const int32_t *labels,
                    int32_t n_all, int32_t dim, run_result *res)
{
    memset(res, 0, sizeof *res);
    oml_config cfg;
    if (oml_config_preset(&cfg, o->preset, dim) != OML_OK) {
        fprintf(stderr, "oml-eval: unknown preset '%s' (paper | default)\n", o->preset);
        return OML_EINVAL;
    }
    apply_overrides(&cfg, &o->overrides);
    cfg.seed = seed;

    oml_split split;
    oml_stream stream = {0};
    oml_store *store = NULL;
    oml_learner *learner = NULL;
    oml_snapshot *snap = NULL;
    int32_t *dev_labels = NULL, *pred = NULL, *truth = NULL;
    float *dev_x = NULL;
    oml_diag diag = {0};
    int rc = oml_split_make(&split, n_all, seed);
    if (rc != OML_OK)
        return rc;
    int32_t n_test = o->test_subsample > 0 && o->test_subsample < split.n_test ? o->test_subsample
                                                                               : split.n_test;
    dev_labels = malloc((size_t)split.n_dev * sizeof(int32_t));
    dev_x = malloc((size_t)split.n_dev * dim * sizeof(float));
    pred = malloc((size_t)n_test * sizeof(int32_t));
    truth = malloc((size_t)n_test * sizeof(int32_t));
    if (!dev_labels || !dev_x || !pred || !truth) {
        rc = OML_ENOMEM;
        goto done;
    }
    rc = oml_store_create(&store, dim, (uint32_t)split.n_dev);
    for (int32_t i = 0; i < split.n_dev && rc == OML_OK; i++) {
        int32_t row = split.dev[i];
        char id[32], lab[16];
        int il = snprintf(id, sizeof id, "dev-%d", row);
        int ll = snprintf(lab, sizeof lab, "%d", labels[row]);
        dev_labels[i] = labels[row];
        memcpy(dev_x + (size_t)i * dim, images + (size_t)row * dim, (size_t)dim * sizeof(float));
        rc = oml_store_put(store, id, (size_t)il, dev_x + (size_t)i * dim, lab, (size_t)ll, NULL, &diag);
    }
    if (rc == OML_OK)
        rc = oml_stream_make(&stream, dev_labels, split.n_dev, o->constraints, seed, &diag);
    if (rc == OML_OK)
        rc = oml_learner_create(&learner, &cfg, &diag);
    if (rc != OML_OK)
        goto done;
    /* The stored items' features (never labels) for centring / the PCA start. */
    if (oml_config_needs_data(&cfg) && (rc = oml_learner_prepare(learner, dev_x, split.n_dev)) != OML_OK)
        goto done;

    double viol[OML_MAX_HEADS] = {0}, hard_viol[OML_MAX_HEADS] = {0};
    int32_t late = 0, hard = 0;
    double t0 = now_s();
    for (int32_t i = 0; i < stream.n; i++) {
        const oml_triplet *t = &stream.t[i];
        oml_step_report rep;
        oml_learner_step(learner, dev_x + (size_t)t->a * dim, dev_x + (size_t)t->p * dim,
                         dev_x + (size_t)t->n * dim, &rep);
        if (o->heads_report && i >= stream.n - stream.n / 5) {
            late++;
            hard += !rep.satisfied;
            for (int h = 0; h < oml_learner_heads(learner); h++) {
                int v = rep.d_pos[h] >= rep.d_neg[h];
                viol[h] += v;
                hard_viol[h] += !rep.satisfied && v;
            }
        }
    }
    if (o->heads_report) {
        printf("    late-stream violation per head (all / ensemble-violated):");
        for (int h = 0; h < oml_learner_heads(learner); h++)
            printf(" %.3f/%.3f", viol[h] / (late ? late : 1), hard_viol[h] / (hard ? hard : 1));
        printf("\n");
    }
    res->train_s = now_s() - t0;
    res->tps = stream.n / (res->train_s > 0 ? res->train_s : 1e-9);
    res->utilisation = (double)learner->stats.utilised / (double)learner->stats.updates;
    res->accuracy = (double)learner->stats.satisfied / (double)learner->stats.updates;
    res->heads = oml_learner_heads(learner);
    memcpy(res->alpha, learner->alpha, sizeof(float) * (size_t)res->heads);

    snap = oml_learner_snapshot(learner, 1);
    if (snap == NULL) {
        rc = OML_ENOMEM;
        goto done;
    }
    rc = classify_error(snap, store, images, labels, split.test, n_test, dim, o->k, pred, truth,
                        &res->error);
    if (rc != OML_OK)
        goto done;
    res->f1 = oml_macro_f1(truth, pred, n_test, 10);

    if (o->heads_report) {
        float a[OML_MAX_HEADS];
        for (int h = 0; h <= res->heads && rc == OML_OK; h++) {
            /* h < heads: that head alone; h == heads: every head with equal weight. */
            for (int j = 0; j < res->heads; j++)
                a[j] = h == res->heads ? 1.0f / res->heads : (j == h ? 1.0f : 0.0f);
            oml_snapshot *s2 = oml_snapshot_create(&cfg, snap->params, a, 1, snap->updates);
            double err = 0;
            rc = s2 ? classify_error(s2, store, images, labels, split.test, n_test, dim, o->k,
                                     pred, truth, &err)
                    : OML_ENOMEM;
            oml_snapshot_release(s2);
            if (h == res->heads)
                res->equal_error = err;
            else
                res->head_error[h] = err;
        }
    }
done:
    if (rc != OML_OK)
        fprintf(stderr, "oml-eval: %s%s%s\n", oml_strerror(rc), diag.msg[0] ? ": " : "", diag.msg);
    oml_snapshot_release(snap);
    oml_learner_destroy(learner);
    oml_store_destroy(store);
    oml_stream_free(&stream);
    oml_split_free(&split);
    free(dev_labels);
    free(dev_x);
    free(pred);
    free(truth);
    return rc;
}

int main(int argc, char **argv)
{
    eval_opts o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    openblas_set_num_threads(1);

    float *images = NULL;
    int32_t *labels = NULL, n = 0, dim = 0;
    oml_diag diag = {0};
    double t0 = now_s();
    int rc = oml_fmnist_load(o.data_dir, &images, &labels, &n, &dim, &diag);
    if (rc != OML_OK) {
        fprintf(stderr, "oml-eval: cannot load Fashion-MNIST: %s\n"
                        "HINT: install it with deploy/install-deps.sh (package dataset-fashion-mnist)\n",
                diag.msg);
        return 1;
    }
    printf("oml-eval: %d images of %d features loaded in %.1f s\n", n, dim, now_s() - t0);
    printf("preset %s, %d constraints, k=%d, %d run(s) from seed %llu\n", o.preset, o.constraints,
           o.k, o.runs, (unsigned long long)o.seed);

    run_result sum = {0}, r;
    double errs[64];
    int heads = 0;
    for (int i = 0; i < o.runs; i++) {
        if (run_once(&o, o.seed + (uint64_t)i, images, labels, n, dim, &r) != OML_OK)
            return 1;
        heads = r.heads;
        if (i < 64)
            errs[i] = r.error;
        printf("  run %d (seed %llu): error %.4f  macro-F1 %.4f  utilisation %.3f  "
               "test-then-train acc %.3f  %.0f triplets/s\n",
               i + 1, (unsigned long long)(o.seed + (uint64_t)i), r.error, r.f1, r.utilisation,
               r.accuracy, r.tps);
        if (o.heads_report) {
            printf("    per head:");
            for (int h = 0; h < heads; h++)
                printf(" %.4f", r.head_error[h]);
            printf("   equal vote: %.4f\n", r.equal_error);
        }
        sum.error += r.error;
        sum.f1 += r.f1;
        sum.utilisation += r.utilisation;
        sum.accuracy += r.accuracy;
        sum.train_s += r.train_s;
        sum.tps += r.tps;
        sum.equal_error += r.equal_error;
        for (int h = 0; h < heads; h++) {
            sum.alpha[h] += r.alpha[h];
            sum.head_error[h] += r.head_error[h];
        }
    }
    double R = o.runs;
    printf("mean error %.4f, macro-F1 %.4f; alpha:", sum.error / R, sum.f1 / R);
    for (int h = 0; h < heads; h++)
        printf(" %.3f", sum.alpha[h] / R);
    printf("\n");

    printf("{\"error_rate\":%.5f,\"macro_f1\":%.5f,\"utilization\":%.5f,"
           "\"test_then_train_accuracy\":%.5f,\"alpha\":[",
           sum.error / R, sum.f1 / R, sum.utilisation / R, sum.accuracy / R);
    for (int h = 0; h < heads; h++)
        printf("%s%.5f", h ? "," : "", sum.alpha[h] / R);
    printf("],\"error_rates\":[");
    for (int i = 0; i < o.runs && i < 64; i++)
        printf("%s%.5f", i ? "," : "", errs[i]);
    printf("]");
    if (o.heads_report) {
        printf(",\"head_error\":[");
        for (int h = 0; h < heads; h++)
            printf("%s%.5f", h ? "," : "", sum.head_error[h] / R);
        printf("],\"equal_vote_error\":%.5f", sum.equal_error / R);
    }
    printf(",\"constraints\":%d,\"k\":%d,\"runs\":%d,\"seed\":%llu,\"train_seconds\":%.4f,"
           "\"triplets_per_second\":%.1f,\"preset\":\"%s\"}\n",
           o.constraints, o.k, o.runs, (unsigned long long)o.seed, sum.train_s / R, sum.tps / R,
           o.preset);
    free(images);
    free(labels);
    if (o.max_error > 0 && sum.error / R > o.max_error) {
        fprintf(stderr, "oml-eval: error rate %.4f exceeds --max-error %.4f\n", sum.error / R, o.max_error);
        return 3;
    }
    return 0;
}
