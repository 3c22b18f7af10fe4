/* oml-eval - the OAHU paper's Fashion-MNIST protocol, in process.
 *
 * Reads the 70,000 images, shuffles with a seed, splits 1:1 into dev (the
 * stored, labelled reference items) and test, streams seed + closure-derived
 * triplets over dev through one learner in one pass, then classifies every
 * (or a subsample of) test point against the dev set with Eq. 23-25.
 * Prints a readable report and, last, one JSON line.
 *
 * --method / --split (issue 4) evaluate the batch trainers and baselines:
 * class-disjoint trains on classes 0-4 of the 70,000 and measures retrieval
 * (Recall@1/2/4/8, MAP@R) and k-means clustering (NMI, F1) on classes 5-9;
 * standard trains on the 1:1 dev half and reports the kNN error of the test
 * half in the method's embedding. --method oahu --split standard (the
 * default) is the protocol above, unchanged.
 *
 * Issue 11 (evaluation on any data): --csv FILE replaces the images with any
 * labelled rows (tools/common/csv.h); --noise-dims / --standardize change
 * the features each run sees (dataset.h); --stream random replaces the
 * paper's stream with random label-consistent triplets; --curve classifies
 * the test points at several points of one stream; --method std is kNN on
 * standardised features. omlctl eval (client/omlctl_eval.c) shares all of
 * it through tools/common. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#include "anml.h"
#include "batch.h"
#include "config.h"
#include "csv.h"
#include "curve.h"
#include "daml.h"
#include "dataset.h"
#include "damlrrm.h"
#include "dml_metrics.h"
#include "idx.h"
#include "index.h"
#include "learner.h"
#include "net.h"
#include "noise.h"
#include "rng.h"
#include "promote.h"
#include "protocol.h"
#include "replay.h"
#include "snapshot.h"
#include "serve.h"
#include "standardize.h"
#include "store.h"

extern void openblas_set_num_threads(int);

#define OML_REGROUP_MAX 256 /* classes --groups can name */

enum eval_method {
    M_OAHU, M_RAW, M_TRIPLET, M_LANML, M_DANML,
    M_DAML_CONTRASTIVE, M_DAML_TRIPLET, M_DAML_LIFTED, M_DAML_NPAIR, /* daml.h, in term order */
    M_CONTRASTIVE, M_LIFTED, M_NPAIR, M_DAMLRRM,
    M_STD /* kNN on features standardised with the training half's mean and sd */
};
static const char *const METHOD_NAMES[] = {
    "oahu", "raw", "triplet", "lanml", "danml",
    "daml-contrastive", "daml-triplet", "daml-lifted", "daml-npair",
    "contrastive", "lifted", "npair", "damlrrm", "std"};

typedef struct eval_opts {
    int32_t constraints, k, test_subsample, runs, heads_report;
    int32_t method, class_disjoint, train_subsample, verbose;
    int32_t epochs, depth, batch_m, batch_k, patience, optim;
    float lr, val_frac, gamma1, gamma2, lambda1, lambda2, margin, lreg, scale;
    float alpha, lambda, pool_ratio, gen_lr;                    /* DAML / DAMLRRM */
    int32_t gen_hidden, pretrain_epochs, joint_epochs, literal, normalize;
    int32_t batch_init; /* -1 the method's default, 0 random, 1 pca, 2 identity */
    int32_t promoted;   /* --promoted 1: judge the batch model as promoted into --preset */
    int32_t stream_random; /* --stream random: random label-consistent triplets */
    int32_t regroup_at;    /* --regroup-at N: from triplet N on the stream follows --groups */
    int32_t groups[OML_REGROUP_MAX], n_groups; /* --groups: the group of each class id */
    oml_features_opts feat; /* --noise-dims / --noise-scale */
    int32_t curve[OML_CURVE_MAX], n_curve; /* --curve; else one point, constraints */
    int32_t curve_given, constraints_set;
    double max_error; /* exit 3 if the mean error is above (0 = no check) */
    uint64_t seed;
    const char *preset, *data_dir, *csv;
    oml_config overrides; /* fields < 0 (or NaN) mean "from the preset" */
} eval_opts;

typedef struct run_result {
    double error, f1, utilisation, accuracy, train_s, tps;
    float alpha[OML_MAX_HEADS];
    double head_error[OML_MAX_HEADS], equal_error;
    double curve[OML_CURVE_MAX]; /* error at each --curve point */
    /* --regroup-at: held-out triplet accuracy by class and by group there */
    double class_acc[OML_CURVE_MAX], group_acc[OML_CURVE_MAX];
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
            "  --preset P          paper | default | wide (default: default)\n"
            "  --test-subsample M  classify only the first M test points (default all)\n"
            "  --data DIR          Fashion-MNIST IDX directory (default " OML_FMNIST_DIR ")\n"
            "  --csv FILE          evaluate on FILE instead: rows label,f1,...,fd (a header line\n"
            "                      allowed; tools/common/csv.h), the same seeded 1:1 split\n"
            "  --standardize 0|1   z-score every feature with the dev half's mean and sd\n"
            "                      (default 0; after --noise-dims)\n"
            "  --heads-report      also report each head alone and all heads voting equally\n"
            "  --stream S          paper (default: seeds + closure, protocol.h) | random\n"
            "                      (random anchor, a positive of its class, a negative of another)\n"
            "  --noise-dims N      append N features of noise N(0, (S sd)^2) to every item, sd the\n"
            "                      pooled sd of the original features, drawn with the run's seed\n"
            "  --noise-scale S     (default 1)\n"
            "  --regroup-at N      from triplet N on, the stream's triplets follow --groups\n"
            "  --groups G0,G1,...  instead of the classes (a change of what the clicks mean;\n"
            "                      G_c: the group of class c); each --curve point then also\n"
            "                      reports held-out triplet accuracy by class and by group\n"
            "  --curve N1,N2,...   the error at each point of one run (0: before any triplet);\n"
            "                      the stream is as long as the last point (JSON \"curve\")\n"
            "  --max-error X       exit with status 3 if the mean error rate exceeds X\n"
            " overrides of the preset (ablations):\n"
            "  --eta X --tau X --prox X --eta-decay X --beta X --s X\n"
            "  --layers N --hidden N --emb N --init random|pca|pca-white|std|mixed|auto --center 0|1\n"
            "  --hedge abtl|margin|hard|local|violation|equal\n"
            "  --loss abtl|margin --batch N --rehearse X --replay N --equal-heads 0|1\n"
            "  --offset X          head offsets (0: angles; default preset 10: Euclidean start)\n"
            "                      (the live model's steps and rehearsal)\n"
            "  --scale-input 0|1   the live net divides its centred input by each feature's sd\n"
            " batch trainers and baselines (issue 4):\n"
            "  --method M          oahu (default) | raw | std | triplet | lanml | danml |\n"
            "                      daml-contrastive | daml-triplet | daml-lifted | daml-npair |\n"
            "                      contrastive | lifted | npair | damlrrm\n"
            "                      (raw: kNN on the features; std: kNN on the features\n"
            "                      standardised with the training half's mean and sd)\n"
            "  --split S           standard (default: kNN error on the 1:1 split) |\n"
            "                      class-disjoint (train classes 0-4, retrieval/clustering on 5-9)\n"
            "  --train-subsample N train on the first N shuffled training items (default all)\n"
            "  --epochs N --lr X --depth N --batch-m N --batch-k N --patience N --val-frac X\n"
            "  --optim adam|sgd    (batch methods; --hidden/--emb size their network,\n"
            "                      default 256/128 at depth >= 1)\n"
            "  --gamma1 X --gamma2 X --lambda1 X --lambda2 X --margin X --lreg X --scale X\n"
            "                      loss hyper-parameters (ANML Eq. 19/22; margin also triplet)\n"
            "  --alpha X --lambda X  DAML Eq. 6-11 margin / Eq. 7 weight (lambda1/2: Eq. 6);\n"
            "                      DAMLRRM boundary alpha (--margin: its beta)\n"
            "  --gen-hidden N --gen-lr X --pretrain-epochs N --joint-epochs N --literal 0|1\n"
            "                      DAML generator and Alg. 1 schedule\n"
            "  --pool-ratio X      DAMLRRM shuffled pool length / training items\n"
            "  --normalize 0|1     L2-normalise the embedding (default: the method's)\n"
            "  --batch-init I      random | pca | identity: the batch network's start\n"
            "                      (default: the method's; pca = the PCA pass-through)\n"
            "  --promoted 1        triplet | lanml | danml: judge the model as omld serves it\n"
            "                      once promoted into a live model of --preset (head depth;\n"
            "                      give --hidden/--emb of that model)\n"
            "  --verbose           print every epoch of the batch trainers\n");
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
    o->feat.noise_scale = 1.0f;
    o->lr = o->val_frac = o->gamma1 = o->gamma2 = o->lambda1 = o->lambda2 = NAN;
    o->margin = o->lreg = o->scale = NAN;
    o->alpha = o->lambda = o->pool_ratio = o->gen_lr = NAN;
    o->gen_hidden = o->pretrain_epochs = o->joint_epochs = o->literal = o->normalize = -1;
    o->batch_init = -1;
    o->epochs = o->depth = o->batch_m = o->batch_k = o->patience = o->optim = -1;
    oml_config *v = &o->overrides;
    v->eta = v->tau = v->prox = v->eta_decay = v->beta = v->s = NAN;
    v->margin = v->rehearse = v->offset = NAN;
    v->loss = v->optim = v->batch = v->replay = v->equal_heads = v->standardize = v->basis = -1;
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
        } else if (strcmp(a, "--verbose") == 0) {
            o->verbose = 1;
        } else if (OPT("--method")) {
            o->method = -1;
            for (int m = 0; m < (int)(sizeof METHOD_NAMES / sizeof *METHOD_NAMES); m++)
                if (strcmp(val, METHOD_NAMES[m]) == 0)
                    o->method = m;
            if (o->method < 0) {
                fprintf(stderr, "oml-eval: unknown --method '%s' (oahu|raw|std|triplet|lanml|danml|"
                                "daml-contrastive|daml-triplet|daml-lifted|daml-npair|"
                                "contrastive|lifted|npair|damlrrm)\n", val);
                return -1;
            }
        } else if (OPT("--stream")) {
            if (strcmp(val, "paper") != 0 && strcmp(val, "random") != 0) {
                fprintf(stderr, "oml-eval: unknown --stream '%s' (paper|random)\n", val);
                return -1;
            }
            o->stream_random = strcmp(val, "random") == 0;
        } else if (OPT("--regroup-at")) {
            o->regroup_at = atoi(val);
        } else if (OPT("--groups")) {
            char *copy = strdup(val), *save = NULL;
            o->n_groups = 0;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                char *end;
                long g = strtol(t, &end, 10);
                if (*end || g < 0 || g >= OML_REGROUP_MAX || o->n_groups == OML_REGROUP_MAX) {
                    fprintf(stderr, "oml-eval: --groups wants one group number in [0, %d) per "
                                    "class, comma-separated; '%s' is not\n", OML_REGROUP_MAX, t);
                    free(copy);
                    return -1;
                }
                o->groups[o->n_groups++] = (int32_t)g;
            }
            free(copy);
        } else if (OPT("--curve")) {
            oml_diag d = {0};
            if ((o->n_curve = oml_curve_parse(val, o->curve, &d)) < 0) {
                fprintf(stderr, "oml-eval: --curve %s\n", d.msg);
                return -1;
            }
        } else if (OPT("--csv")) {
            o->csv = val;
        } else if (OPT("--standardize")) {
            if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0) {
                fprintf(stderr, "oml-eval: --standardize 0|1, not '%s'\n", val);
                return -1;
            }
            o->feat.standardize = val[0] == '1';
        } else if (OPT("--noise-dims")) {
            o->feat.noise_dims = atoi(val);
        } else if (OPT("--noise-scale")) {
            o->feat.noise_scale = strtof(val, NULL);
        } else if (OPT("--split")) {
            if (strcmp(val, "standard") != 0 && strcmp(val, "class-disjoint") != 0) {
                fprintf(stderr, "oml-eval: unknown --split '%s' (standard|class-disjoint)\n", val);
                return -1;
            }
            o->class_disjoint = strcmp(val, "class-disjoint") == 0;
        } else if (OPT("--train-subsample")) {
            o->train_subsample = atoi(val);
        } else if (OPT("--epochs")) {
            o->epochs = atoi(val);
        } else if (OPT("--depth")) {
            o->depth = atoi(val);
        } else if (OPT("--batch-m")) {
            o->batch_m = atoi(val);
        } else if (OPT("--batch-k")) {
            o->batch_k = atoi(val);
        } else if (OPT("--patience")) {
            o->patience = atoi(val);
        } else if (OPT("--optim")) {
            o->optim = strcmp(val, "sgd") == 0 ? OML_BATCH_SGD : OML_BATCH_ADAM;
        } else if (OPT("--lr")) {
            o->lr = strtof(val, NULL);
        } else if (OPT("--val-frac")) {
            o->val_frac = strtof(val, NULL);
        } else if (OPT("--gamma1")) {
            o->gamma1 = strtof(val, NULL);
        } else if (OPT("--gamma2")) {
            o->gamma2 = strtof(val, NULL);
        } else if (OPT("--lambda1")) {
            o->lambda1 = strtof(val, NULL);
        } else if (OPT("--lambda2")) {
            o->lambda2 = strtof(val, NULL);
        } else if (OPT("--margin")) {
            o->margin = v->margin = strtof(val, NULL);
        } else if (OPT("--lreg")) {
            o->lreg = strtof(val, NULL);
        } else if (OPT("--scale")) {
            o->scale = strtof(val, NULL);
        } else if (OPT("--alpha")) {
            o->alpha = strtof(val, NULL);
        } else if (OPT("--lambda")) {
            o->lambda = strtof(val, NULL);
        } else if (OPT("--pool-ratio")) {
            o->pool_ratio = strtof(val, NULL);
        } else if (OPT("--gen-lr")) {
            o->gen_lr = strtof(val, NULL);
        } else if (OPT("--gen-hidden")) {
            o->gen_hidden = atoi(val);
        } else if (OPT("--pretrain-epochs")) {
            o->pretrain_epochs = atoi(val);
        } else if (OPT("--joint-epochs")) {
            o->joint_epochs = atoi(val);
        } else if (OPT("--literal")) {
            o->literal = atoi(val);
        } else if (OPT("--batch-init")) {
            o->batch_init = strcmp(val, "random") == 0 ? 0 : strcmp(val, "pca") == 0 ? 1
                          : strcmp(val, "identity") == 0 ? 2 : -2;
            if (o->batch_init == -2) {
                fprintf(stderr, "oml-eval: unknown --batch-init '%s' (random|pca|identity)\n", val);
                return -1;
            }
        } else if (OPT("--promoted")) {
            o->promoted = atoi(val);
        } else if (OPT("--normalize")) {
            o->normalize = atoi(val);
        } else if (OPT("--constraints")) {
            o->constraints = atoi(val);
            o->constraints_set = 1;
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
            v->init = strcmp(val, "pca-white") == 0 ? OML_INIT_PCA_WHITE
                      : strcmp(val, "pca") == 0     ? OML_INIT_PCA
                      : strcmp(val, "random") == 0  ? OML_INIT_RANDOM
                      : strcmp(val, "std") == 0     ? OML_INIT_STD
                      : strcmp(val, "mixed") == 0   ? OML_INIT_MIXED
                      : strcmp(val, "auto") == 0    ? OML_INIT_AUTO
                                                    : 99;
        } else if (OPT("--hedge")) {
            v->hedge_signal = strcmp(val, "margin") == 0 ? OML_HEDGE_MARGIN : strcmp(val, "abtl") == 0 ? OML_HEDGE_ABTL : strcmp(val, "hard") == 0 ? OML_HEDGE_HARD : strcmp(val, "local") == 0 ? OML_HEDGE_LOCAL : strcmp(val, "violation") == 0 ? OML_HEDGE_VIOLATION : strcmp(val, "equal") == 0 ? OML_HEDGE_EQUAL : 99;
        } else if (OPT("--loss")) {
            v->loss = strcmp(val, "abtl") == 0 ? OML_LOSS_ABTL : strcmp(val, "margin") == 0 ? OML_LOSS_MARGIN : 99;
        } else if (OPT("--batch")) {
            v->batch = atoi(val);
        } else if (OPT("--rehearse")) {
            v->rehearse = strtof(val, NULL);
        } else if (OPT("--replay")) {
            v->replay = atoi(val);
        } else if (OPT("--offset")) {
            v->offset = strtof(val, NULL);
        } else if (OPT("--scale-input")) {
            v->standardize = atoi(val);
        } else if (OPT("--basis")) {
            v->basis = atoi(val);
        } else if (OPT("--equal-heads")) {
            v->equal_heads = atoi(val);
        } else {
            fprintf(stderr, "oml-eval: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return -1;
        }
#undef OPT
    }
    if (o->train_subsample < 0) {
        fprintf(stderr, "oml-eval: --train-subsample >= 0\n");
        return -1;
    }
    o->curve_given = o->n_curve > 0;
    if (o->curve_given) {
        if (o->constraints_set && o->constraints != o->curve[o->n_curve - 1]) {
            fprintf(stderr, "oml-eval: --constraints %d and --curve ending at %d disagree "
                            "(the stream is as long as the curve's last point)\n",
                    o->constraints, o->curve[o->n_curve - 1]);
            return -1;
        }
        if (o->method != M_OAHU || o->class_disjoint) {
            fprintf(stderr, "oml-eval: --curve is for the live learner (--method oahu "
                            "--split standard)\n");
            return -1;
        }
        o->constraints = o->curve[o->n_curve - 1];
    } else {
        o->n_curve = 1; /* one point: the end of the stream */
        o->curve[0] = o->constraints;
    }
    if (o->feat.noise_dims < 0 || !(o->feat.noise_scale >= 0.0f) || isinf(o->feat.noise_scale)) {
        fprintf(stderr, "oml-eval: --noise-dims >= 0, --noise-scale >= 0\n");
        return -1;
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
    OVR_F(margin); OVR_F(rehearse); OVR_F(offset);
    OVR_I(loss); OVR_I(optim); OVR_I(batch); OVR_I(replay); OVR_I(equal_heads); OVR_I(basis);
    OVR_I(standardize);
#undef OVR_F
#undef OVR_I
}

/* Classifies the test rows X[test] with the given snapshot; returns the error.
 * pred and truth (n_test) get class ids (-1: no answer): the index's label
 * strings are mapped back to the data set's classes by name. */
static int classify_error(oml_snapshot *snap, const oml_store *store, const oml_dataset *ds,
                          const float *X, int32_t dim, const int32_t *test, int32_t n_test,
                          int32_t k, int32_t *pred, int32_t *truth, double *error)
{
    oml_index *ix = NULL;
    int rc = oml_index_build(&ix, snap, store);
    if (rc != OML_OK)
        return rc;
    /* Through the serving batch path, a chunk of queries at a time. */
    enum { CHUNK = 4096 };
    oml_query *q = malloc(CHUNK * sizeof *q);
    oml_classification *res = malloc(CHUNK * sizeof *res);
    int32_t *cls = malloc(((size_t)ix->n_labels + 1) * sizeof *cls);
    if (q == NULL || res == NULL || cls == NULL)
        rc = OML_ENOMEM;
    for (int32_t l = 0; rc == OML_OK && l < ix->n_labels; l++)
        cls[l] = oml_dataset_class_of(ds, ix->label_names[l]);
    int32_t wrong = 0;
    for (int32_t i0 = 0; rc == OML_OK && i0 < n_test; i0 += CHUNK) {
        int32_t b = n_test - i0 < CHUNK ? n_test - i0 : CHUNK;
        for (int32_t i = 0; i < b; i++)
            q[i] = (oml_query){X + (size_t)test[i0 + i] * dim, k, -1, NULL};
        rc = oml_classify_batch(ix, q, b, res, NULL);
        for (int32_t i = 0; rc == OML_OK && i < b; i++) {
            int32_t lab = res[i].label;
            pred[i0 + i] = lab >= 0 ? cls[lab] : -1;
            truth[i0 + i] = ds->y[test[i0 + i]];
            wrong += pred[i0 + i] != truth[i0 + i];
        }
    }
    if (rc == OML_OK)
        *error = (double)wrong / n_test;
    free(q);
    free(res);
    free(cls);
    oml_index_destroy(ix);
    return rc;
}

/* The --stream of n triplets over dev positions (labels: their class ids). */
static int make_stream(const eval_opts *o, oml_stream *st, const int32_t *labels, int32_t n_dev,
                       int32_t n, uint64_t seed, oml_diag *diag)
{
    return o->stream_random ? oml_stream_make_random(st, labels, n_dev, n, seed, diag)
                            : oml_stream_make(st, labels, n_dev, n, seed, diag);
}

/* --regroup-at: the stream's triplets from regroup_at on are random ones
 * by group (--groups) instead of by class, drawn with another seed. */
static int regroup_stream(const eval_opts *o, oml_stream *st, const int32_t *labels,
                          int32_t n_dev, uint64_t seed, oml_diag *diag)
{
    if (!o->stream_random || o->regroup_at >= st->n)
        return oml_diag_set(diag, OML_EINVAL, "regroup-at",
                            "--regroup-at needs --stream random and a point inside the stream");
    int32_t *grp = malloc((size_t)n_dev * sizeof *grp);
    if (grp == NULL)
        return OML_ENOMEM;
    for (int32_t i = 0; i < n_dev; i++) {
        if (labels[i] >= o->n_groups) {
            free(grp);
            return oml_diag_set(diag, OML_EINVAL, "groups",
                                "--groups names %d classes; the data has class %d", o->n_groups,
                                labels[i]);
        }
        grp[i] = o->groups[labels[i]];
    }
    oml_stream g = {0};
    int rc = oml_stream_make_random(&g, grp, n_dev, st->n - o->regroup_at, seed + 7919, diag);
    if (rc == OML_OK)
        memcpy(st->t + o->regroup_at, g.t, (size_t)g.n * sizeof *g.t);
    oml_stream_free(&g);
    free(grp);
    return rc;
}

/* Held-out triplet accuracy: the share of 2,000 random triplets over the
 * test items (anchor, one of its class, one of another; with `groups`, of
 * its group and of another group) whose positive the served model puts
 * nearer than the negative, by sum_l alpha(l) D(l) (the ensemble distance
 * that test-then-train accuracy uses). Seeded; the same triplets at every
 * curve point. */
#define HELDOUT_TRIPLETS 2000
static double heldout_accuracy(const oml_snapshot *s, const oml_dataset *ds, const float *X,
                               int32_t dim, const int32_t *test, int32_t n_test,
                               const int32_t *groups, uint64_t seed)
{
    int heads = oml_snapshot_heads(s), e = s->cfg.emb;
    float *x3 = malloc(3 * (size_t)dim * sizeof *x3);
    float *emb = malloc((size_t)heads * 3 * e * sizeof *emb);
    oml_rng r;
    oml_rng_seed(&r, seed * 31 + 17);
    int ok = 0, n = 0;
#define GROUP_OF(row) (groups ? groups[ds->y[row]] : ds->y[row])
    for (int t = 0; t < HELDOUT_TRIPLETS && x3 && emb; t++) {
        int32_t a = test[oml_rng_below(&r, (uint64_t)n_test)], p = -1, q = -1;
        for (int tries = 0; tries < 10000 && (p < 0 || q < 0); tries++) {
            int32_t c = test[oml_rng_below(&r, (uint64_t)n_test)];
            if (c != a && p < 0 && GROUP_OF(c) == GROUP_OF(a))
                p = c;
            else if (q < 0 && GROUP_OF(c) != GROUP_OF(a))
                q = c;
        }
        if (p < 0 || q < 0)
            continue;
        int32_t m[3] = {a, p, q};
        for (int k = 0; k < 3; k++)
            memcpy(x3 + (size_t)k * dim, X + (size_t)m[k] * dim, (size_t)dim * sizeof *x3);
        if (oml_snapshot_embed(s, x3, 3, emb) != OML_OK)
            break;
        double dp = 0, dn = 0;
        for (int h = 0; h < heads; h++) {
            const float *f = emb + (size_t)h * 3 * e;
            double sp = 0, sn = 0;
            for (int j = 0; j < e; j++) {
                double u = f[j] - f[e + j], v = f[j] - f[2 * e + j];
                sp += u * u;
                sn += v * v;
            }
            dp += s->alpha[h] * sqrt(sp);
            dn += s->alpha[h] * sqrt(sn);
        }
        ok += dp < dn;
        n++;
    }
#undef GROUP_OF
    free(x3);
    free(emb);
    return n ? (double)ok / n : NAN;
}

/* --heads-report: per-head violations from stream position `from` on. */
typedef struct step_tally {
    int32_t from, late, hard;
    double viol[OML_MAX_HEADS], hard_viol[OML_MAX_HEADS];
} step_tally;

/* The one place oml-eval teaches the live learner: triplets [from, to) of
 * st, whose members are rows of X (dim floats each). tally may be NULL. */
/* Learns triplets [from, to) as omld does when its queue never backs up:
 * requests of FEED_BATCH (omlctl eval's size), each learned through the
 * rehearsal ring (replay.h), then the rehearsal it is owed. Dev position i
 * is store slot i. The paper's one-step-per-triplet configuration also
 * fills the per-head tally (--heads-report). */
#define FEED_BATCH 256
static void feed_stream(oml_learner *l, oml_replay *ring, const oml_store *store,
                        const oml_stream *st, int32_t from, int32_t to, const float *X, int32_t dim,
                        step_tally *tally)
{
    if (l->_bwork != NULL) {
        const float *rows[3 * FEED_BATCH];
        uint32_t slots[3 * FEED_BATCH];
        for (int32_t i = from; i < to; i += FEED_BATCH) {
            int32_t m = to - i < FEED_BATCH ? to - i : FEED_BATCH;
            for (int32_t t = 0; t < m; t++) {
                const oml_triplet *tr = &st->t[i + t];
                int32_t mem[3] = {tr->a, tr->p, tr->n};
                for (int k = 0; k < 3; k++) {
                    rows[3 * t + k] = X + (size_t)mem[k] * dim;
                    slots[3 * t + k] = (uint32_t)mem[k];
                }
            }
            oml_replay_learn(ring, l, rows, slots, NULL, m);
            oml_replay_rehearse(ring, l, store, oml_replay_owed(ring, l));
        }
        return;
    }
    for (int32_t i = from; i < to; i++) {
        const oml_triplet *t = &st->t[i];
        oml_step_report rep;
        oml_learner_step(l, X + (size_t)t->a * dim, X + (size_t)t->p * dim,
                         X + (size_t)t->n * dim, &rep);
        if (tally == NULL || i < tally->from)
            continue;
        tally->late++;
        tally->hard += !rep.satisfied;
        for (int h = 0; h < oml_learner_heads(l); h++) {
            int v = rep.d_pos[h] >= rep.d_neg[h];
            tally->viol[h] += v;
            tally->hard_viol[h] += !rep.satisfied && v;
        }
    }
}

/* One run of the protocol on X (ds->n, dim): the run's features. */
static int run_once(const eval_opts *o, uint64_t seed, const oml_dataset *ds, const float *X,
                    int32_t dim, run_result *res)
{
    memset(res, 0, sizeof *res);
    oml_config cfg;
    if (oml_config_preset(&cfg, o->preset, dim) != OML_OK) {
        fprintf(stderr, "oml-eval: unknown preset '%s' (paper | default | wide)\n", o->preset);
        return OML_EINVAL;
    }
    apply_overrides(&cfg, &o->overrides);
    cfg.seed = seed;

    oml_split split;
    oml_stream stream = {0};
    oml_store *store = NULL;
    oml_replay ring = {0};
    oml_learner *learner = NULL;
    oml_snapshot *snap = NULL;
    int32_t *dev_labels = NULL, *pred = NULL, *truth = NULL;
    float *dev_x = NULL;
    oml_diag diag = {0};
    int rc = oml_split_make(&split, ds->n, seed);
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
        char id[32];
        int il = snprintf(id, sizeof id, "dev-%d", row);
        const char *lab = ds->names[ds->y[row]];
        dev_labels[i] = ds->y[row];
        memcpy(dev_x + (size_t)i * dim, X + (size_t)row * dim, (size_t)dim * sizeof(float));
        rc = oml_store_put(store, id, (size_t)il, dev_x + (size_t)i * dim, lab, strlen(lab), NULL,
                           &diag);
    }
    if (rc == OML_OK)
        rc = make_stream(o, &stream, dev_labels, split.n_dev, o->constraints, seed, &diag);
    if (rc == OML_OK && o->regroup_at > 0)
        rc = regroup_stream(o, &stream, dev_labels, split.n_dev, seed, &diag);
    if (rc == OML_OK)
        rc = oml_learner_create(&learner, &cfg, &diag);
    if (rc != OML_OK)
        goto done;
    /* The stored items for centring and the start; their labels only judge
     * the auto start's candidates, as the daemon's do. */
    if (oml_config_needs_data(&cfg) &&
        (rc = oml_learner_prepare(learner, dev_x, dev_labels, split.n_dev)) != OML_OK)
        goto done;
    if (learner->prepared)
        fprintf(stderr, "oml-eval: seed %llu: start %s (leave-one-out kNN error standardised "
                "%.4f, whitened %.4f)\n", (unsigned long long)seed,
                oml_init_name(learner->start_init), (double)learner->start_error[0],
                (double)learner->start_error[1]);
    if ((rc = oml_replay_init(&ring, (uint32_t)cfg.replay)) != OML_OK)
        goto done;

    /* Learn up to each curve point, then classify the test points with the
     * model as it is there; the last point's model is the run's result. */
    step_tally tally = {.from = stream.n - stream.n / 5};
    for (int c = 0; c < o->n_curve; c++) {
        int32_t from = c ? o->curve[c - 1] : 0, to = o->curve[c] < stream.n ? o->curve[c] : stream.n;
        double t0 = now_s();
        feed_stream(learner, &ring, store, &stream, from, to, dev_x, dim,
                    o->heads_report ? &tally : NULL);
        res->train_s += now_s() - t0;
        oml_snapshot_release(snap);
        snap = oml_learner_snapshot(learner, (uint64_t)c + 1);
        if (snap == NULL) {
            rc = OML_ENOMEM;
            goto done;
        }
        rc = classify_error(snap, store, ds, X, dim, split.test, n_test, o->k, pred, truth,
                            &res->curve[c]);
        if (rc != OML_OK)
            goto done;
        if (o->regroup_at > 0) {
            res->class_acc[c] = heldout_accuracy(snap, ds, X, dim, split.test, n_test, NULL, seed);
            res->group_acc[c] = heldout_accuracy(snap, ds, X, dim, split.test, n_test, o->groups,
                                                 seed);
        }
    }
    res->error = res->curve[o->n_curve - 1];
    res->f1 = oml_macro_f1(truth, pred, n_test, ds->n_classes);
    if (o->heads_report) {
        printf("    late-stream violation per head (all / ensemble-violated):");
        for (int h = 0; h < oml_learner_heads(learner); h++)
            printf(" %.3f/%.3f", tally.viol[h] / (tally.late ? tally.late : 1),
                   tally.hard_viol[h] / (tally.hard ? tally.hard : 1));
        printf("\n");
    }
    res->tps = stream.n / (res->train_s > 0 ? res->train_s : 1e-9);
    res->utilisation = (double)learner->stats.utilised / (double)learner->stats.updates;
    res->accuracy = (double)learner->stats.satisfied / (double)learner->stats.updates;
    res->heads = oml_learner_heads(learner);
    memcpy(res->alpha, learner->alpha, sizeof(float) * (size_t)res->heads);

    if (o->heads_report) {
        float a[OML_MAX_HEADS];
        for (int h = 0; h <= res->heads && rc == OML_OK; h++) {
            /* h < heads: that head alone; h == heads: every head with equal weight. */
            for (int j = 0; j < res->heads; j++)
                a[j] = h == res->heads ? 1.0f / res->heads : (j == h ? 1.0f : 0.0f);
            oml_snapshot *s2 = oml_snapshot_create(&cfg, snap->params, a, 1, snap->updates);
            double err = 0;
            rc = s2 ? classify_error(s2, store, ds, X, dim, split.test, n_test, o->k, pred, truth,
                                     &err)
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
    oml_replay_free(&ring);
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

/* ---- issue 4: batch trainers and baselines on the DML protocols ---- */

typedef struct dml_result {
    double recall[4], map_at_r, nmi, f1, error, train_s;
    int32_t epochs;
} dml_result;

static const int32_t RECALL_KS[4] = {1, 2, 4, 8};

static void print_epoch(void *ctx, const oml_batch_progress *p)
{
    (void)ctx;
    printf("    epoch %d/%d  step %lld  loss %.5f  val R@1 %.4f (best %.4f)  %.1f s\n", p->epoch,
           p->epochs, (long long)p->step, p->loss, p->val_r1, p->best_val_r1, p->elapsed_s);
    fflush(stdout);
}

static void batch_spec_from_opts(const eval_opts *o, int32_t method, uint64_t seed,
                                 oml_batch_spec *sp)
{
    oml_batch_spec_default(sp, method);
    sp->seed = seed;
    if (o->epochs > 0) sp->epochs = o->epochs;
    if (o->depth >= 0) sp->depth = o->depth;
    if (o->batch_m > 0) sp->m = o->batch_m;
    if (o->batch_k > 0) sp->k = o->batch_k;
    if (o->patience >= 0) sp->patience = o->patience;
    if (o->optim >= 0) sp->optim = o->optim;
    if (!isnan(o->lr)) sp->lr = o->lr;
    if (!isnan(o->val_frac)) sp->val_frac = o->val_frac;
    if (sp->depth > 0) { /* issue 4 recipe: a wider network than the live one's */
        sp->hidden = 256;
        sp->emb = 128;
    }
    if (o->overrides.hidden > 0) sp->hidden = o->overrides.hidden;
    if (o->overrides.emb > 0) sp->emb = o->overrides.emb;
    if (sp->depth > 0)
        sp->init_identity = 0; /* the identity start is for the linear map only */
    if (o->batch_init >= 0) {
        sp->init_pca = o->batch_init == 1 ? OML_BATCH_PCA_ON : OML_BATCH_PCA_OFF;
        sp->init_identity = o->batch_init == 2;
    }
    if (o->normalize >= 0)
        sp->normalize = o->normalize;
    if (o->verbose)
        sp->progress = print_epoch;
}

/* E (n, (L+1) emb): every head of the live model, head l scaled by
 * sqrt(alpha(l)), so that ||E(a) - E(b)||^2 = sum_l alpha(l) D(l)(a,b)^2:
 * one embedding that weighs the heads as the hedge does. */
static int oahu_embed(const oml_learner *l, const float *X, int32_t n, float *E)
{
    const oml_net_layout *lay = &l->lay;
    int heads = lay->layers + 1, e = lay->emb;
    oml_net_acts acts;
    int32_t cap = 512;
    if (oml_net_acts_init(&acts, lay, cap) != OML_OK)
        return OML_ENOMEM;
    for (int32_t i = 0; i < n; i += cap) {
        int32_t b = n - i < cap ? n - i : cap;
        oml_net_forward(lay, l->params, X + (size_t)i * lay->dim, b, &acts);
        for (int32_t r = 0; r < b; r++)
            for (int h = 0; h < heads; h++) {
                float w = sqrtf(l->alpha[h]);
                for (int32_t j = 0; j < e; j++)
                    E[((size_t)(i + r) * heads + h) * e + j] = w * acts.f[h][(size_t)r * e + j];
            }
    }
    oml_net_acts_free(&acts);
    return OML_OK;
}

/* --promoted 1: the batch model bm as omld serves it once promoted into a
 * live model of --preset (sizes from --hidden/--emb, which the batch net
 * shares) whose start was taken from the training half: E (n, heads * emb)
 * is that learner's head `depth` alone (alpha one-hot), which with an input
 * basis is the batch net on the input's projection onto the basis's span
 * (promote.h). */
static int promoted_embed(const eval_opts *o, uint64_t seed, const oml_batch_model *bm,
                          const float *Xtr, const int32_t *ytr, int32_t ntr, const float *Xte,
                          int32_t nte, int32_t dim, float **Etr, float **Ete, int32_t *edim)
{
    oml_config cfg;
    if (oml_config_preset(&cfg, o->preset, dim) != OML_OK)
        return OML_EINVAL;
    apply_overrides(&cfg, &o->overrides);
    cfg.seed = seed;
    char why[400];
    if (oml_promote_compatible(&cfg, &bm->lay, why, sizeof why) != 0) {
        fprintf(stderr, "oml-eval: --promoted: %s\n", why);
        return OML_EINVAL;
    }
    oml_learner *l = NULL;
    int rc = oml_learner_create(&l, &cfg, NULL);
    if (rc == OML_OK && oml_config_needs_data(&cfg))
        rc = oml_learner_prepare(l, Xtr, ytr, ntr);
    if (rc == OML_OK)
        rc = oml_promote(l, bm);
    if (rc == OML_OK) {
        for (int h = 0; h <= l->lay.layers; h++)
            l->alpha[h] = h == bm->lay.depth ? 1.0f : 0.0f;
        *edim = (l->lay.layers + 1) * l->lay.emb;
        *Etr = malloc((size_t)ntr * *edim * sizeof(float));
        *Ete = malloc((size_t)nte * *edim * sizeof(float));
        rc = *Etr && *Ete ? oahu_embed(l, Xtr, ntr, *Etr) : OML_ENOMEM;
        if (rc == OML_OK)
            rc = oahu_embed(l, Xte, nte, *Ete);
    }
    oml_learner_destroy(l);
    return rc;
}

/* DAML x 4 terms, the plain terms and DAMLRRM (daml.h, damlrrm.h). */
static int dml_train_daml(const eval_opts *o, uint64_t seed, const float *Xtr, const int32_t *ytr,
                          int32_t ntr, int32_t dim, dml_result *res, float **Etr, float **Ete,
                          const float *Xte, int32_t nte, int32_t *edim, oml_diag *diag)
{
    double t0 = now_s();
    int32_t method = o->method == M_DAMLRRM ? OML_BATCH_DAMLRRM
                     : o->method >= M_CONTRASTIVE
                         ? OML_BATCH_CONTRASTIVE + (o->method - M_CONTRASTIVE)
                         : OML_BATCH_DAML_CONTRASTIVE + (o->method - M_DAML_CONTRASTIVE);
    oml_batch_spec sp;
    /* DAMLRRM runs on the L2-normalised embedding as the daemon does, with
     * alpha / beta for it (damlrrm.h); --normalize 0 --alpha 30 --margin 0.5
     * is the paper's unnormalised setting. */
    batch_spec_from_opts(o, method, seed, &sp);
    oml_batch_model *model = NULL;
    int rc;
    if (o->method == M_DAMLRRM) {
        oml_damlrrm_hp hp;
        oml_damlrrm_hp_default(&hp);
        if (!isnan(o->alpha)) hp.alpha = o->alpha;
        if (!isnan(o->margin)) hp.beta = o->margin;
        if (!isnan(o->pool_ratio)) hp.pool_ratio = o->pool_ratio;
        rc = oml_damlrrm_train(&sp, &hp, Xtr, ytr, ntr, dim, &model, diag);
    } else {
        int32_t term = o->method == M_CONTRASTIVE ? OML_DAML_CONTRASTIVE
                       : o->method == M_LIFTED    ? OML_DAML_LIFTED
                       : o->method == M_NPAIR     ? OML_DAML_NPAIR
                                                  : o->method - M_DAML_CONTRASTIVE;
        oml_daml_hp hp;
        oml_daml_hp_default(&hp, term);
        if (!isnan(o->alpha)) hp.alpha = o->alpha;
        if (!isnan(o->lambda)) hp.lambda = o->lambda;
        if (!isnan(o->lambda1)) hp.lambda1 = o->lambda1;
        if (!isnan(o->lambda2)) hp.lambda2 = o->lambda2;
        if (!isnan(o->gen_lr)) hp.gen_lr = o->gen_lr;
        if (o->gen_hidden > 0) hp.gen_hidden = o->gen_hidden;
        if (o->pretrain_epochs > 0) hp.pretrain_epochs = o->pretrain_epochs;
        if (o->joint_epochs > 0) hp.joint_epochs = o->joint_epochs;
        if (o->literal >= 0) hp.literal = o->literal;
        rc = o->method >= M_CONTRASTIVE
                 ? oml_daml_train_plain(&sp, &hp, Xtr, ytr, ntr, dim, &model, diag)
                 : oml_daml_train(&sp, &hp, Xtr, ytr, ntr, dim, &model, diag);
    }
    res->train_s = now_s() - t0;
    if (rc == OML_OK) {
        res->epochs = model->epochs_run;
        *edim = model->lay.emb;
        *Etr = malloc((size_t)ntr * *edim * sizeof(float));
        *Ete = malloc((size_t)nte * *edim * sizeof(float));
        rc = *Etr && *Ete ? oml_batch_model_embed(model, Xtr, ntr, *Etr) : OML_ENOMEM;
        if (rc == OML_OK)
            rc = oml_batch_model_embed(model, Xte, nte, *Ete);
    }
    oml_batch_model_destroy(model);
    return rc;
}

/* Trains `method` on Xtr (ntr, dim) and embeds Xtr and Xte into owned
 * buffers of *edim columns. raw: the features themselves. */
static int dml_embed(const eval_opts *o, uint64_t seed, const float *Xtr, const int32_t *ytr,
                     int32_t ntr, const float *Xte, int32_t nte, int32_t dim, float **Etr,
                     float **Ete, int32_t *edim, dml_result *res)
{
    oml_diag diag = {0};
    int rc = OML_OK;
    double t0 = now_s();
    *Etr = *Ete = NULL;
    if (o->method == M_RAW || o->method == M_STD) {
        *edim = dim;
        *Etr = malloc((size_t)ntr * dim * sizeof(float));
        *Ete = malloc((size_t)nte * dim * sizeof(float));
        if (!*Etr || !*Ete)
            return OML_ENOMEM;
        memcpy(*Etr, Xtr, (size_t)ntr * dim * sizeof(float));
        memcpy(*Ete, Xte, (size_t)nte * dim * sizeof(float));
        if (o->method == M_STD) { /* z-scores with the training half's statistics only */
            float *mean = malloc((size_t)dim * sizeof *mean), *sd = malloc((size_t)dim * sizeof *sd);
            rc = mean && sd && oml_standardize_fit(Xtr, dim, NULL, ntr, mean, sd) == 0 ? OML_OK
                                                                                    : OML_ENOMEM;
            if (rc == OML_OK) {
                oml_standardize_apply(*Etr, ntr, dim, mean, sd);
                oml_standardize_apply(*Ete, nte, dim, mean, sd);
            }
            free(mean);
            free(sd);
        }
        return rc;
    }
    if (o->method == M_OAHU) {
        oml_config cfg;
        if (oml_config_preset(&cfg, o->preset, dim) != OML_OK)
            return OML_EINVAL;
        apply_overrides(&cfg, &o->overrides);
        cfg.seed = seed;
        oml_stream stream = {0};
        oml_learner *learner = NULL;
        rc = make_stream(o, &stream, ytr, ntr, o->constraints, seed, &diag);
        if (rc == OML_OK)
            rc = oml_learner_create(&learner, &cfg, &diag);
        if (rc == OML_OK && oml_config_needs_data(&cfg))
            rc = oml_learner_prepare(learner, Xtr, ytr, ntr);
        oml_replay none = {0}; /* no store here: learned once, nothing rehearsed */
        if (rc == OML_OK)
            feed_stream(learner, &none, NULL, &stream, 0, stream.n, Xtr, dim, NULL);
        res->train_s = now_s() - t0;
        if (rc == OML_OK) {
            *edim = (learner->lay.layers + 1) * learner->lay.emb;
            *Etr = malloc((size_t)ntr * *edim * sizeof(float));
            *Ete = malloc((size_t)nte * *edim * sizeof(float));
            rc = *Etr && *Ete ? oahu_embed(learner, Xtr, ntr, *Etr) : OML_ENOMEM;
            if (rc == OML_OK)
                rc = oahu_embed(learner, Xte, nte, *Ete);
        }
        oml_learner_destroy(learner);
        oml_stream_free(&stream);
    } else if (o->method >= M_DAML_CONTRASTIVE) {
        rc = dml_train_daml(o, seed, Xtr, ytr, ntr, dim, res, Etr, Ete, Xte, nte, edim, &diag);
    } else {
        int32_t method = o->method == M_TRIPLET ? OML_BATCH_TRIPLET
                         : o->method == M_LANML ? OML_BATCH_LANML
                                                : OML_BATCH_DANML;
        oml_batch_spec sp;
        batch_spec_from_opts(o, method, seed, &sp);
        oml_triplet_hp thp = {0.2f, 0};
        oml_lanml_hp lhp;
        oml_danml_hp dhp;
        oml_lanml_hp_default(&lhp);
        oml_danml_hp_default(&dhp);
        if (!isnan(o->margin)) thp.margin = lhp.margin = dhp.margin = o->margin;
        if (!isnan(o->gamma1)) lhp.gamma1 = dhp.gamma1 = o->gamma1;
        if (!isnan(o->gamma2)) lhp.gamma2 = dhp.gamma2 = o->gamma2;
        if (!isnan(o->lambda1)) dhp.lambda1 = o->lambda1;
        if (!isnan(o->lambda2)) dhp.lambda2 = o->lambda2;
        if (!isnan(o->lreg)) lhp.lambda = o->lreg;
        if (!isnan(o->scale)) dhp.scale = o->scale;
        sp.loss_hp = method == OML_BATCH_TRIPLET ? (const void *)&thp
                     : method == OML_BATCH_LANML ? (const void *)&lhp
                                                 : (const void *)&dhp;
        oml_batch_model *model = NULL;
        rc = oml_batch_train(&sp, Xtr, ytr, ntr, dim, &model, &diag);
        res->train_s = now_s() - t0;
        if (rc == OML_OK && o->promoted == 1) {
            res->epochs = model->epochs_run;
            rc = promoted_embed(o, seed, model, Xtr, ytr, ntr, Xte, nte, dim, Etr, Ete, edim);
        } else if (rc == OML_OK) {
            res->epochs = model->epochs_run;
            *edim = model->lay.emb;
            *Etr = malloc((size_t)ntr * *edim * sizeof(float));
            *Ete = malloc((size_t)nte * *edim * sizeof(float));
            rc = *Etr && *Ete ? oml_batch_model_embed(model, Xtr, ntr, *Etr) : OML_ENOMEM;
            if (rc == OML_OK)
                rc = oml_batch_model_embed(model, Xte, nte, *Ete);
        }
        oml_batch_model_destroy(model);
    }
    if (rc != OML_OK)
        fprintf(stderr, "oml-eval: %s%s%s\n", oml_batch_strerror(rc), diag.msg[0] ? ": " : "",
                diag.msg);
    return rc;
}

static int dml_run_once(const eval_opts *o, uint64_t seed, const oml_dataset *ds,
                        const float *images, int32_t dim, dml_result *res)
{
    memset(res, 0, sizeof *res);
    const int32_t *labels = ds->y, n_all = ds->n;
    int32_t *tr = malloc((size_t)n_all * sizeof *tr), *te = malloc((size_t)n_all * sizeof *te);
    int32_t ntr = 0, nte = 0;
    if (!tr || !te) {
        free(tr);
        free(te);
        return OML_ENOMEM;
    }
    if (o->class_disjoint) {
        /* Train on the first half of the classes, test on the rest (0-4 and
         * 5-9 on Fashion-MNIST: the deep metric learning split), each
         * shuffled with the seed so subsamples are random. */
        oml_rng rng;
        oml_rng_seed(&rng, seed);
        for (int32_t i = 0; i < n_all; i++) {
            if (labels[i] < ds->n_classes / 2)
                tr[ntr++] = i;
            else
                te[nte++] = i;
        }
        for (int32_t *a = tr, m = ntr, pass = 0; pass < 2; pass++, a = te, m = nte)
            for (int32_t i = m - 1; i > 0; i--) {
                int32_t j = (int32_t)oml_rng_below(&rng, (uint64_t)i + 1), t = a[i];
                a[i] = a[j];
                a[j] = t;
            }
    } else {
        oml_split split;
        int rc = oml_split_make(&split, n_all, seed);
        if (rc != OML_OK) {
            free(tr);
            free(te);
            return rc;
        }
        ntr = split.n_dev;
        nte = split.n_test;
        memcpy(tr, split.dev, (size_t)ntr * sizeof *tr);
        memcpy(te, split.test, (size_t)nte * sizeof *te);
        oml_split_free(&split);
    }
    if (o->train_subsample > 0 && o->train_subsample < ntr)
        ntr = o->train_subsample;
    if (o->test_subsample > 0 && o->test_subsample < nte)
        nte = o->test_subsample;
    float *Xtr = malloc((size_t)ntr * dim * sizeof(float));
    float *Xte = malloc((size_t)nte * dim * sizeof(float));
    int32_t *ytr = malloc((size_t)ntr * sizeof *ytr), *yte = malloc((size_t)nte * sizeof *yte);
    float *Etr = NULL, *Ete = NULL;
    int32_t edim = 0;
    int rc = Xtr && Xte && ytr && yte ? OML_OK : OML_ENOMEM;
    for (int32_t i = 0; rc == OML_OK && i < ntr; i++) {
        memcpy(Xtr + (size_t)i * dim, images + (size_t)tr[i] * dim, (size_t)dim * sizeof(float));
        ytr[i] = labels[tr[i]];
    }
    for (int32_t i = 0; rc == OML_OK && i < nte; i++) {
        memcpy(Xte + (size_t)i * dim, images + (size_t)te[i] * dim, (size_t)dim * sizeof(float));
        yte[i] = labels[te[i]];
    }
    if (rc == OML_OK)
        rc = dml_embed(o, seed, Xtr, ytr, ntr, Xte, nte, dim, &Etr, &Ete, &edim, res);
    if (rc == OML_OK && o->class_disjoint) {
        rc = oml_dml_retrieval(Ete, yte, nte, edim, RECALL_KS, 4, res->recall, &res->map_at_r);
        if (rc == OML_OK)
            rc = oml_dml_clustering(Ete, yte, nte, edim, seed, &res->nmi, &res->f1);
    } else if (rc == OML_OK) {
        rc = oml_dml_knn_error(Etr, ytr, ntr, Ete, yte, nte, edim, o->k, &res->error);
    }
    free(tr);
    free(te);
    free(Xtr);
    free(Xte);
    free(ytr);
    free(yte);
    free(Etr);
    free(Ete);
    return rc;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

/* The JSON keys that say what the model saw: stream, data, dim and noise. */
static void print_json_data(const eval_opts *o, const oml_dataset *ds)
{
    if (o->method == M_OAHU)
        printf(",\"stream\":\"%s\"", o->stream_random ? "random" : "paper");
    printf(",\"dim\":%d", ds->dim + o->feat.noise_dims);
    if (o->csv) {
        printf(",\"csv\":");
        json_string(o->csv);
        printf(",\"items\":%d,\"classes\":%d", ds->n, ds->n_classes);
    }
    if (o->feat.standardize)
        printf(",\"standardize\":1");
    if (o->feat.noise_dims > 0)
        printf(",\"noise_dims\":%d,\"noise_scale\":%g", o->feat.noise_dims,
               (double)o->feat.noise_scale);
}

static int run_dml(const eval_opts *o, const oml_dataset *ds)
{
    const char *mname = METHOD_NAMES[o->method];
    const char *sname = o->class_disjoint ? "class-disjoint" : "standard";
    printf("method %s, split %s, %d run(s) from seed %llu\n", mname, sname, o->runs,
           (unsigned long long)o->seed);
    dml_result sum = {0}, r;
    double per[64];
    for (int i = 0; i < o->runs; i++) {
        uint64_t seed = o->seed + (uint64_t)i;
        float *X;
        int32_t dim;
        int owned;
        oml_diag diag = {0};
        int rc = oml_dataset_run_features(ds, &o->feat, seed, &X, &dim, &owned, &diag);
        if (rc == OML_OK)
            rc = dml_run_once(o, seed, ds, X, dim, &r);
        if (owned)
            free(X);
        if (rc != OML_OK) {
            fprintf(stderr, "oml-eval: run %d failed: %s\n", i + 1, oml_batch_strerror(rc));
            return 1;
        }
        if (o->class_disjoint)
            printf("  run %d (seed %llu): R@1 %.4f  R@2 %.4f  R@4 %.4f  R@8 %.4f  NMI %.4f  "
                   "F1 %.4f  MAP@R %.4f  train %.1f s (%d epochs)\n",
                   i + 1, (unsigned long long)seed, r.recall[0], r.recall[1], r.recall[2],
                   r.recall[3], r.nmi, r.f1, r.map_at_r, r.train_s, r.epochs);
        else
            printf("  run %d (seed %llu): kNN error %.4f  train %.1f s (%d epochs)\n", i + 1,
                   (unsigned long long)seed, r.error, r.train_s, r.epochs);
        if (i < 64)
            per[i] = o->class_disjoint ? r.recall[0] : r.error;
        for (int k = 0; k < 4; k++)
            sum.recall[k] += r.recall[k];
        sum.map_at_r += r.map_at_r;
        sum.nmi += r.nmi;
        sum.f1 += r.f1;
        sum.error += r.error;
        sum.train_s += r.train_s;
    }
    double R = o->runs;
    printf("{\"method\":\"%s\",\"split\":\"%s\",", mname, sname);
    if (o->class_disjoint)
        printf("\"recall_at_1\":%.5f,\"recall_at_2\":%.5f,\"recall_at_4\":%.5f,"
               "\"recall_at_8\":%.5f,\"p_at_1\":%.5f,\"nmi\":%.5f,\"f1\":%.5f,\"map_at_r\":%.5f,"
               "\"recall_at_1_runs\":[",
               sum.recall[0] / R, sum.recall[1] / R, sum.recall[2] / R, sum.recall[3] / R,
               sum.recall[0] / R, sum.nmi / R, sum.f1 / R, sum.map_at_r / R);
    else
        printf("\"error_rate\":%.5f,\"error_rates\":[", sum.error / R);
    for (int i = 0; i < o->runs && i < 64; i++)
        printf("%s%.5f", i ? "," : "", per[i]);
    printf("],\"runs\":%d,\"seed\":%llu,\"train_seconds\":%.4f,\"train_subsample\":%d,"
           "\"test_subsample\":%d",
           o->runs, (unsigned long long)o->seed, sum.train_s / R, o->train_subsample,
           o->test_subsample);
    print_json_data(o, ds);
    printf("}\n");
    if (o->max_error > 0 && !o->class_disjoint && sum.error / R > o->max_error) {
        fprintf(stderr, "oml-eval: error rate %.4f exceeds --max-error %.4f\n", sum.error / R,
                o->max_error);
        return 3;
    }
    return 0;
}

int main(int argc, char **argv)
{
    eval_opts o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    openblas_set_num_threads(1);

    oml_dataset ds;
    oml_diag diag = {0};
    double t0 = now_s();
    int rc = o.csv ? oml_csv_read(o.csv, &ds, &diag) : oml_dataset_fmnist(&ds, o.data_dir, &diag);
    if (rc != OML_OK && o.csv) {
        fprintf(stderr, "oml-eval: %s\n", diag.msg);
        return 1;
    } else if (rc != OML_OK) {
        fprintf(stderr, "oml-eval: cannot load Fashion-MNIST: %s\n"
                        "HINT: install it with deploy/install-deps.sh (package dataset-fashion-mnist)\n",
                diag.msg);
        return 1;
    }
    if (o.csv)
        printf("oml-eval: %d rows of %d features in %d classes read from %s in %.1f s\n", ds.n,
               ds.dim, ds.n_classes, o.csv, now_s() - t0);
    else
        printf("oml-eval: %d images of %d features loaded in %.1f s\n", ds.n, ds.dim,
               now_s() - t0);
    if (ds.n < 4) {
        fprintf(stderr, "oml-eval: %d rows; the 1:1 split needs at least 4\n", ds.n);
        oml_dataset_free(&ds);
        return 1;
    }
    if (o.feat.noise_dims > 0)
        printf("%d features of noise N(0, (%g x %.4f pooled sd)^2) appended per run: dim %d\n",
               o.feat.noise_dims, (double)o.feat.noise_scale, oml_pooled_sd(ds.x, ds.n, ds.dim),
               ds.dim + o.feat.noise_dims);
    if (o.feat.standardize)
        printf("every feature z-scored with the mean and sd of the run's dev half\n");
    if (o.method != M_OAHU || o.class_disjoint) {
        rc = run_dml(&o, &ds);
        oml_dataset_free(&ds);
        return rc;
    }
    printf("preset %s, %s stream, %d constraints, k=%d, %d run(s) from seed %llu\n", o.preset,
           o.stream_random ? "random" : "paper", o.constraints, o.k, o.runs,
           (unsigned long long)o.seed);

    run_result sum = {0}, r;
    double errs[64];
    int heads = 0;
    for (int i = 0; i < o.runs; i++) {
        uint64_t seed = o.seed + (uint64_t)i;
        float *X;
        int32_t dim;
        int owned;
        rc = oml_dataset_run_features(&ds, &o.feat, seed, &X, &dim, &owned, &diag);
        if (rc != OML_OK)
            fprintf(stderr, "oml-eval: %s\n", diag.msg);
        else
            rc = run_once(&o, seed, &ds, X, dim, &r);
        if (owned)
            free(X);
        if (rc != OML_OK) {
            oml_dataset_free(&ds);
            return 1;
        }
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
        if (o.curve_given) {
            printf("    curve:");
            for (int c = 0; c < o.n_curve; c++)
                printf("  %d: %.4f", o.curve[c], r.curve[c]);
            printf("\n");
        }
        if (o.regroup_at > 0) {
            printf("    held-out triplet accuracy (regrouped at %d), by class / by group:", o.regroup_at);
            for (int c = 0; c < o.n_curve; c++)
                printf("  %d: %.3f/%.3f", o.curve[c], r.class_acc[c], r.group_acc[c]);
            printf("\n");
        }
        for (int c = 0; c < o.n_curve; c++) {
            sum.curve[c] += r.curve[c];
            sum.class_acc[c] += r.class_acc[c];
            sum.group_acc[c] += r.group_acc[c];
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
    for (int c = 0; c < o.n_curve; c++)
        sum.curve[c] /= R;
    if (o.curve_given) {
        printf("error curve (mean of %d run(s)):\n  %12s  %10s\n", o.runs, "triplets", "error");
        for (int c = 0; c < o.n_curve; c++)
            printf("  %12d  %10.4f\n", o.curve[c], sum.curve[c]);
    }

    printf("{\"error_rate\":%.5f,\"macro_f1\":%.5f,\"utilisation\":%.5f,"
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
    if (o.curve_given)
        oml_curve_print_json(stdout, o.curve, sum.curve, o.n_curve);
    if (o.regroup_at > 0) {
        printf(",\"regroup\":{\"at\":%d,\"class_triplet_accuracy\":[", o.regroup_at);
        for (int c = 0; c < o.n_curve; c++)
            printf("%s%.4f", c ? "," : "", sum.class_acc[c] / R);
        printf("],\"group_triplet_accuracy\":[");
        for (int c = 0; c < o.n_curve; c++)
            printf("%s%.4f", c ? "," : "", sum.group_acc[c] / R);
        printf("]}");
    }
    printf(",\"constraints\":%d,\"k\":%d,\"runs\":%d,\"seed\":%llu,\"train_seconds\":%.4f,"
           "\"triplets_per_second\":%.1f,\"preset\":\"%s\"",
           o.constraints, o.k, o.runs, (unsigned long long)o.seed, sum.train_s / R, sum.tps / R,
           o.preset);
    print_json_data(&o, &ds);
    printf("}\n");
    oml_dataset_free(&ds);
    if (o.max_error > 0 && sum.error / R > o.max_error) {
        fprintf(stderr, "oml-eval: error rate %.4f exceeds --max-error %.4f\n", sum.error / R, o.max_error);
        return 3;
    }
    return 0;
}
