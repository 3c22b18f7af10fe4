/* batch.h - the shared core of the batch metric-learning trainers (issue 4).
 *
 * An embedding network of the live model's family, trained on mini-batches:
 *
 *   x (d) -> h(0) = x - mu -> h(l) = ReLU(W(l) h(l-1)), l = 1..depth
 *         -> z = Theta h(depth) -> f = z / ||z||   (or f = z when !normalize)
 *
 * i.e. the OAHU trunk (Eq. 1) with ONE head at a chosen depth; depth 0 is a
 * linear map of the (centred) input, which is LANML's L of M = L^T L.
 * mu, every W(l) and Theta live in one float block (oml_batch_layout), in
 * the order mu, W(1..depth), Theta, so the trunk and head can be copied
 * into the live network's block at the same depth (promote).
 *
 * Training (oml_batch_train) is synchronous and runs on the caller's thread
 * (the daemon's trainer thread); it polls an atomic cancel flag between
 * steps and reports through a callback. It never prints. The caller sets
 * the OpenBLAS thread count. Losses are pluggable (oml_batch_loss_fn): a
 * loss sees only the batch embeddings F (n, e) and labels and returns
 * dLoss/dF, so the network, optimiser, sampler and stopping rule are shared
 * by triplet, LANML, DANML and later methods. */
#ifndef OML_BATCH_H
#define OML_BATCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rng.h"

#define OML_BATCH_MAX_DEPTH 16
#define OML_BATCH_MIN_ITEMS 4 /* fewer training items than this is OML_EEMPTY */

/* oml_strerror plus the codes defined here. */
const char *oml_batch_strerror(int err);

/* ---- the network ---- */

typedef struct oml_batch_layout {
    int32_t dim, depth, hidden, emb, normalize;
    size_t mu;                              /* offset of mu (dim), not trained */
    size_t w[OML_BATCH_MAX_DEPTH + 1];      /* w[l] (hidden, width(l-1)), l = 1..depth */
    size_t theta;                           /* (emb, width(depth)) */
    size_t count;                           /* floats in the block */
} oml_batch_layout;

/* Fills lay; OML_EINVAL (diag names the field) if a size is out of range. */
int oml_batch_layout_init(oml_batch_layout *lay, int32_t dim, int32_t depth, int32_t hidden,
                          int32_t emb, int32_t normalize, oml_diag *diag);

static inline int32_t oml_batch_width(const oml_batch_layout *lay, int l)
{
    return l == 0 ? lay->dim : lay->hidden;
}

/* A trained (or freshly initialised) model: immutable once returned by
 * oml_batch_train, so any number of threads may embed with it. */
typedef struct oml_batch_model {
    oml_batch_layout lay;
    int32_t method;        /* enum oml_batch_method it was trained with */
    int32_t epochs_run;
    float val_r1;          /* best validation Recall@1 (NaN without validation) */
    float *params;         /* (lay.count) owned */
} oml_batch_model;

/* Returns an owned model whose weights are U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * from seed (PyTorch's nn.Linear default, as the live learner) and mu = 0. */
int oml_batch_model_create(oml_batch_model **out, const oml_batch_layout *lay, uint64_t seed,
                           oml_diag *diag);
void oml_batch_model_destroy(oml_batch_model *m); /* accepts NULL */

/* The PCA pass-through start (the batch analogue of the live model's
 * init_pca_heads; our stand-in for the deep metric learning papers'
 * pretrained network): with P (emb, dim) the top-emb principal directions
 * of the given rows of X centred at m's mu, the untrained network's z is
 * P (x - mu), so f is the PCA projection (normalised when lay.normalize):
 *  - depth 0: Theta = P;
 *  - depth >= 1: W(1)'s first 2*emb rows are +P and -P (units [P x]+ and
 *    [-P x]+), each deeper W(l) passes those units on with identity rows
 *    (ReLU of a non-negative value is itself), and Theta reads their
 *    difference (Theta[r][r] = 1, Theta[r][emb + r] = -1, zero elsewhere).
 *    The other hidden units keep their random rows and start with zero head
 *    weight, alive for the gradient to recruit.
 * Needs emb <= dim and, for depth >= 1, hidden >= 2*emb:
 * oml_batch_pca_check says so (OML_EINVAL, diag field "init_pca").
 * rows NULL = rows 0..n-1. OML_ENOMEM, OML_EIO (LAPACK failed). */
int oml_batch_pca_check(const oml_batch_layout *lay, oml_diag *diag);
int oml_batch_model_init_pca(oml_batch_model *m, const float *X, const int32_t *rows, int32_t n,
                             oml_diag *diag);

/* out (n, emb) = f(X) for X (n, dim). Allocates a bounded workspace per call
 * (rows are processed in chunks); OML_ENOMEM on failure. Thread-safe. */
int oml_batch_model_embed(const oml_batch_model *m, const float *X, int32_t n, float *out);

/* Serialisation: magic "OMLB", format version, layout, method, stats, the
 * parameter block (little-endian float32), CRC-32 of everything before it.
 * encode returns an owned buffer (free()); decode validates sizes and CRC
 * (OML_EFORMAT / OML_EVERSION with a diag) and returns an owned model. */
int oml_batch_model_encode(const oml_batch_model *m, uint8_t **buf, size_t *len);
int oml_batch_model_decode(const uint8_t *buf, size_t len, oml_batch_model **out,
                           oml_diag *diag);

/* ---- losses over one mini-batch of embeddings ---- */

/* Loss over the batch embeddings F (n, e) with labels y (n): returns the
 * loss and writes gF (n, e) = dLoss/dF. work holds oml_batch_loss_work(n)
 * doubles. rng is the trainer's (mining may draw from it). Doubles
 * throughout, so a gradient check can call the same code. */
typedef double (*oml_batch_loss_fn)(const void *hp, const double *F, const int32_t *y,
                                    int32_t n, int32_t e, double *gF, oml_rng *rng,
                                    double *work);

static inline size_t oml_batch_loss_work(int32_t n)
{
    return 2 * (size_t)n * (size_t)n + 8 * (size_t)n + 8;
}

/* Triplet baseline: mean over the batch's triplets of [D(a,p) - D(a,n) + margin]_+
 * with Euclidean D on the embeddings. Every (a, p) pair of a class in the
 * batch is an anchor-positive; its negative is semi-hard (FaceNet: the
 * closest with D(a,p) < D(a,n) < D(a,p) + margin, else the hardest) or random. */
typedef struct oml_triplet_hp {
    float margin;   /* default 0.2 */
    int32_t mining; /* 0 semi-hard, 1 random */
} oml_triplet_hp;

double oml_triplet_loss(const void *hp, const double *F, const int32_t *y, int32_t n, int32_t e,
                        double *gF, oml_rng *rng, double *work);

/* Pairwise Euclidean distances D (n, n) of F (n, e), in double. */
void oml_batch_pdist(const double *F, int32_t n, int32_t e, double *D);

/* ---- training ---- */

enum oml_batch_method {
    OML_BATCH_TRIPLET = 1,
    OML_BATCH_LANML = 2,
    OML_BATCH_DANML = 3,
    /* daml.h / damlrrm.h: these train through their own entry points
     * (oml_daml_train, oml_damlrrm_train), which set the hooks below. */
    OML_BATCH_CONTRASTIVE = 4,
    OML_BATCH_LIFTED = 5,
    OML_BATCH_NPAIR = 6,
    OML_BATCH_DAML_CONTRASTIVE = 7,
    OML_BATCH_DAML_TRIPLET = 8,
    OML_BATCH_DAML_LIFTED = 9,
    OML_BATCH_DAML_NPAIR = 10,
    OML_BATCH_DAMLRRM = 11
};

enum oml_batch_init_pca {
    OML_BATCH_PCA_OFF = 0,  /* random start (or init_identity) */
    OML_BATCH_PCA_ON = 1,   /* PCA start; a network it does not fit is OML_EINVAL "init_pca" */
    OML_BATCH_PCA_AUTO = 2  /* PCA start where the network fits it, else random (the
                             * default: the daemon sizes the network from the live model) */
};

enum oml_batch_optim { OML_BATCH_SGD = 0, OML_BATCH_ADAM = 1 };
enum oml_batch_sampler { OML_BATCH_SAMPLE_MK = 0, OML_BATCH_SAMPLE_RANDOM = 1 };

typedef struct oml_batch_progress {
    int32_t epoch, epochs;       /* 1-based epoch in progress / the cap */
    int64_t step, steps_total;   /* global step, cap on steps */
    double loss;                 /* mean loss of the steps so far in this epoch */
    double val_r1, best_val_r1;  /* NaN until the first validation */
    double elapsed_s;
    int32_t epoch_end;           /* 1 when reported after an epoch's validation */
} oml_batch_progress;

/* Called from the training thread; must not call back into the trainer. */
typedef void (*oml_batch_progress_fn)(void *ctx, const oml_batch_progress *p);

struct oml_batch_classes;

/* Hooks for trainers with more than the one network or their own batch
 * composition (DAML's generator, DAMLRRM's two streams). NULL = built in.
 *
 * sample: writes up to spec->batch_cap item indices (rows of X) into out
 * and returns the count (0 = cannot draw: OML_EEMPTY). cls is the training
 * split grouped by class (validation items are never in it).
 *
 * step: replaces "forward, loss, backward" of one batch: given the metric
 * network's parameters and the batch Xb (n, dim) / yb, writes the gradient
 * of the metric parameters into grad (lay->count floats, mu's entries 0)
 * and returns the batch loss (non-finite = diverged). It may update state
 * of its own (a second network and its optimiser); it must not allocate
 * per call. epoch is 1-based, step the 0-based global step. */
typedef int32_t (*oml_batch_sample_fn)(void *ctx, struct oml_batch_classes *cls, int32_t m,
                                       int32_t k, oml_rng *rng, int32_t *out);
typedef double (*oml_batch_step_fn)(void *ctx, const oml_batch_layout *lay, const float *params,
                                    const float *Xb, const int32_t *yb, int32_t n, int32_t epoch,
                                    int64_t step, oml_rng *rng, float *grad);

typedef struct oml_batch_spec {
    int32_t method;              /* enum oml_batch_method */
    oml_batch_loss_fn loss;      /* NULL: the method's own (from method) */
    const void *loss_hp;         /* NULL: the method's defaults */
    /* network */
    int32_t depth, hidden, emb, normalize, center;
    int32_t init_identity;       /* depth 0 only: Theta starts as the first emb rows of I
                                  * (M = I, the Euclidean start of LMNN-style learning);
                                  * emb 0 = dim (a full-rank L) */
    int32_t init_pca;            /* enum oml_batch_init_pca: start from the PCA pass-through
                                  * (oml_batch_model_init_pca) of the training items,
                                  * centred at mu; ignored when `init` is set */
    /* optimiser */
    int32_t optim;               /* enum oml_batch_optim */
    float lr, momentum, beta1, beta2, weight_decay;
    /* schedule */
    int32_t epochs, patience;    /* stop after `patience` epochs without a better val R@1 */
    int32_t sampler;             /* enum oml_batch_sampler */
    int32_t m, k;                /* classes x items per batch (m clipped to the classes) */
    int32_t batch;               /* batch size of the random sampler */
    float val_frac;              /* held-out share per class; 0 = no validation/early stop */
    int32_t val_max;             /* cap on validation items (0 = no cap) */
    int32_t progress_every;      /* steps between progress calls (0 = epoch ends only) */
    uint64_t seed;
    const atomic_int *cancel;    /* borrowed; non-zero => stop at the next step */
    oml_batch_progress_fn progress;
    void *progress_ctx;
    /* extensions (zero = off; see the hook types above) */
    const struct oml_batch_model *init; /* borrowed: start from its parameters (mu
                                         * included, no re-centring); its layout must
                                         * match the spec's network */
    oml_batch_sample_fn sample;
    void *sample_ctx;
    int32_t batch_cap;                   /* rows sample may write; 0 = m * k */
    oml_batch_step_fn step;
    void *step_ctx;
} oml_batch_spec;

/* The defaults of a method (network: hidden 128, emb 64, the live default's
 * before its 96-d heads; omld's jobs take the live model's own sizes;
 * the PCA pass-through start where it fits (init_pca AUTO), LANML the
 * identity start; Adam, lr 1e-3; m x k batches; 10% validation; at most 40
 * epochs, patience 3). */
void oml_batch_spec_default(oml_batch_spec *s, int32_t method);

/* Trains on X (n, dim) with labels (n) and returns an owned model in *out
 * (written only on success). Errors: OML_EINVAL (bad spec, diag names the
 * field), OML_EEMPTY (fewer than OML_BATCH_MIN_ITEMS items, or fewer than
 * two classes with two training items each), OML_ENONFINITE (the loss
 * diverged), OML_ENOMEM, OML_ECANCELED (cancel flag raised: no model).
 * X and labels are borrowed and read only during the call. */
int oml_batch_train(const oml_batch_spec *spec, const float *X, const int32_t *labels,
                    int32_t n, int32_t dim, oml_batch_model **out, oml_diag *diag);

/* ---- pieces of the trainer, public for tests and other trainers ---- */

/* Forward of X (n, dim) through m's network, then loss and the gradient of
 * the loss w.r.t. every parameter into grad (lay.count floats; mu's entries
 * are zero). Returns OML_OK and the loss in *loss. */
int oml_batch_loss_grad(const oml_batch_model *m, oml_batch_loss_fn loss, const void *hp,
                        const float *X, const int32_t *y, int32_t n, oml_rng *rng, float *grad,
                        double *loss_out);

/* The m x k sampler: draws m distinct classes (of those with >= 2 items)
 * and k items of each (without replacement while a class has k items).
 * classes: class c's items are idx[start[c] .. start[c+1]). out (m*k) gets
 * item indices, class-major. */
typedef struct oml_batch_classes {
    int32_t n_classes;
    int32_t *start;   /* (n_classes + 1) */
    int32_t *idx;     /* item indices grouped by class */
    int32_t *label;   /* (n_classes) the label value of each class */
    int32_t *_order;  /* (n_classes) sampler scratch */
} oml_batch_classes;

/* Groups items (rows of labels, restricted to `items` if not NULL) by label. */
int oml_batch_classes_init(oml_batch_classes *c, const int32_t *labels, const int32_t *items,
                           int32_t n);
void oml_batch_classes_free(oml_batch_classes *c);
/* Returns the batch size written (m' * k, m' = min(m, eligible classes));
 * 0 when fewer than two classes have two items. Not thread-safe per c. */
int32_t oml_batch_sample_mk(oml_batch_classes *c, int32_t m, int32_t k, oml_rng *rng,
                            int32_t *out);

/* Recall@1 of E (n, e) against itself, the query excluded, Euclidean. */
double oml_batch_recall1(const float *E, const int32_t *y, int32_t n, int32_t e);

#endif
