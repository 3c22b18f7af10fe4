/* config.h - hyper-parameters of an OAHU model and the named presets.
 *
 * `paper` is Alg. 1 exactly as published (OAHU Sec. 4.3.2 defaults; tau is the
 * ABTL control parameter of Eq. 8-11). `default` keeps the OAHU structure
 * (multi-depth L2-normalised heads, adaptive-bound triplet loss, hedge
 * weights) and adds the levers that make online learning improve kNN; each
 * is measured in the README's ablation table. */
#ifndef OML_CONFIG_H
#define OML_CONFIG_H

#include <stdint.h>

#include "err.h"

#define OML_MAX_LAYERS 16
#define OML_MAX_BATCH 1024 /* triplets in one mini-batch step */

enum oml_init {
    OML_INIT_RANDOM = 0,   /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): the paper's "randomly
                              initialized ANN" as its reference implementation has it */
    OML_INIT_PCA = 1,      /* every head starts equal to a PCA projection of the stored items */
    OML_INIT_PCA_WHITE = 2, /* ... to that projection whitened: every component scaled to
                               the first one's variance */
    OML_INIT_STD = 3,       /* every head starts equal to the standardised features (each
                               scaled by 1/sd over the stored items), projected on their
                               top emb principal directions when dim > emb: kNN on the
                               start is kNN on standardised features */
    OML_INIT_MIXED = 4,     /* head 0 the standardised start, the trunk and deeper heads
                               the whitened PCA one: the hedge chooses between them */
    OML_INIT_AUTO = 5       /* the standardised start or the whitened one, whichever has
                               the lower leave-one-out kNN error on the labelled stored
                               items (the standardised one without labels) */
};

enum oml_loss {
    OML_LOSS_ABTL = 0,   /* the adaptive-bound triplet loss, OAHU Eq. 9-13 */
    OML_LOSS_MARGIN = 1  /* max(0, D+ - D- + margin): zero once a triplet is satisfied
                            by the margin, so rehearsing it changes nothing */
};

enum oml_optim {
    OML_OPTIM_SGD = 0,   /* OAHU Eq. 21-22 */
    OML_OPTIM_ADAM = 1   /* Adam (Kingma & Ba 2015), its moments in the learner */
};

enum oml_hedge_signal {
    OML_HEDGE_ABTL = 0,     /* Eq. 20 on the head's local ABTL loss (Eq. 13) */
    OML_HEDGE_MARGIN = 1,   /* Eq. 20 on a [0,1] ranking loss of the triplet in the head */
    OML_HEDGE_HARD = 2,     /* Eq. 20 on the head's 0/1 violation, only for triplets the
                               weighted ensemble got wrong before the update */
    OML_HEDGE_LOCAL = 3,    /* Eq. 20 on how much of the anchor's start neighbourhood
                               (among a sample of stored items) the head keeps */
    OML_HEDGE_VIOLATION = 4, /* Eq. 20 on the head's 0/1 violation of every new triplet
                               before it is learned (test-then-train) */
    OML_HEDGE_EQUAL = 5     /* no hedge: every head keeps weight 1/(L+1) in Eq. 23 */
};

typedef struct oml_config {
    int32_t dim;      /* d: input dimension */
    int32_t layers;   /* L: hidden layers; there are L+1 heads */
    int32_t hidden;   /* S_hidden */
    int32_t emb;      /* S_emb */
    float beta;       /* hedge discount, (0,1) */
    float s;          /* hedge smooth factor: floor s/(L+1) */
    float eta;        /* learning rate */
    float tau;        /* ABTL control parameter, (0,2) */
    uint64_t seed;
    /* Levers beyond the paper (all off in `paper`). */
    int32_t init;         /* enum oml_init */
    int32_t center;       /* subtract the stored items' mean from inputs */
    float eta_decay;      /* eta_t = eta / (1 + eta_decay * t) */
    float prox;           /* pull toward the start weights: W -= eta*prox*(W - W0) */
    int32_t hedge_signal; /* enum oml_hedge_signal */
    int32_t loss;         /* enum oml_loss */
    float margin;         /* OML_LOSS_MARGIN's margin, on distances in [0, 2] */
    int32_t optim;        /* enum oml_optim */
    int32_t batch;        /* triplets per step (new first, then rehearsed): 1 = Alg. 1 */
    float rehearse;       /* rehearsed triplets per new one (0 = none) */
    int32_t replay;       /* triplets kept for rehearsal, the newest (0 = none) */
    int32_t equal_heads;  /* 1: every head's loss counts equally in the step (alpha only
                             serves); 0: the step follows Eq. 19 (alpha-weighted) */
    int32_t standardize;  /* 1: the centred input is also divided by each feature's sd over
                             the stored items (fixed at the start, like mu), so that every
                             feature moves at one rate under Adam (folded into the first
                             weights instead, a feature of sd 300 moved 1000x faster than
                             one of sd 0.3, relatively) */
    int32_t basis;        /* 1 (with dim > emb): the start's projection B (emb, dim) stays
                             fixed as the input's basis, and W(1) and Theta(0) read its emb
                             coordinates instead of the dim inputs, so a step's largest
                             products shrink from dim to emb columns. 0: they read the input */
    float offset;         /* 0: heads are z = Theta h (Eq. 3). > 0: every head has a trained
                             offset, z = Theta h + b, and the standardised start sets one
                             coordinate of b to offset x the RMS norm of the start's
                             projection, so that the sphere's distances rank neighbours as
                             Euclidean distances on the features do, not as their angles */
} oml_config;

/* Fills *c with the preset `name` for dim inputs: "paper" (Alg. 1 as
 * published), "default", or "wide" (the default at twice the width: a
 * better metric, half the learning speed).
 * OML_EINVAL for an unknown name. */
int oml_config_preset(oml_config *c, const char *name, int32_t dim);

/* The name of a start (enum oml_init), as oml-eval's --init takes it:
 * "random", "pca", "pca-white", "std", "mixed", "auto"; "?" if unknown. */
const char *oml_init_name(int32_t init);

/* Checks every field's bounds; the diag names the first bad field. */
int oml_config_validate(const oml_config *c, oml_diag *diag);

/* 1 if every field of a and b is equal (struct padding is ignored). */
int oml_config_equal(const oml_config *a, const oml_config *b);

/* Whether the model needs the stored items before it can start (PCA start,
 * centring or the local hedge's reference sample): then call
 * oml_learner_prepare() with them. */
int oml_config_needs_data(const oml_config *c);

#endif
