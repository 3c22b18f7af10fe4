/* learner.h - the online OAHU learner (OAHU Alg. 1).
 *
 * One learner object, owned and mutated by exactly one thread. Each call to
 * oml_learner_step applies one triplet: forward of its three members together,
 * ABTL per head (Eq. 9-13), one fused gradient step on every head and hidden
 * layer (Eq. 21-22), then the hedge update (Eq. 20) with floor and
 * normalisation. Readers never touch the learner: they take an immutable
 * oml_snapshot (one memcpy of the parameter block). */
#ifndef OML_LEARNER_H
#define OML_LEARNER_H

#include <stdint.h>

#include "config.h"
#include "net.h"
#include "rng.h"
#include "snapshot.h"

#define OML_MAX_HEADS (OML_MAX_LAYERS + 1)

/* What one step did. */
typedef struct oml_step_report {
    float loss[OML_MAX_HEADS];   /* local ABTL loss per head (Eq. 13) */
    float d_pos[OML_MAX_HEADS];  /* pre-update D(a, p) per head */
    float d_neg[OML_MAX_HEADS];  /* pre-update D(a, n) per head */
    float overall;               /* Eq. 19 with the pre-update alpha */
    int satisfied;               /* before the update, sum_l alpha D+ < sum_l alpha D- */
    int utilised;                /* the triplet changed the model (non-zero loss) */
} oml_step_report;

#define OML_RECENT_WINDOW 1000 /* new triplets in the recent test-then-train accuracy */

/* Running counters; plain data, copied out for rendering. */
typedef struct oml_learner_stats {
    uint64_t updates;            /* new triplets applied */
    uint64_t satisfied;          /* ... already satisfied before their update */
    uint64_t utilised;           /* ... with a non-zero loss */
    float loss_ema[OML_MAX_HEADS]; /* per-head loss moving average (0.99) */
    uint64_t steps;              /* optimiser steps taken */
    uint64_t rehearsed;          /* stored triplets learned again (rehearsal) */
    uint64_t skipped;            /* steps refused because a loss, gradient or weight
                                    was not finite (the weights stayed as they were) */
    /* Test-then-train over the newest OML_RECENT_WINDOW new triplets: bit i
     * of `recent` is whether triplet (updates - 1 - i) mod window was
     * satisfied; recent_hits counts the set bits among the recent_n filled. */
    uint32_t recent_n, recent_hits;
    uint8_t recent[(OML_RECENT_WINDOW + 7) / 8];
} oml_learner_stats;

typedef struct oml_learner {
    oml_config cfg;
    oml_net_layout lay;
    float *params;               /* lay.count floats, the model */
    float *start;                /* start weights for the proximal pull, or NULL */
    float alpha[OML_MAX_HEADS];  /* hedge weights */
    oml_rng rng;
    oml_learner_stats stats;
    int prepared;                /* mu / PCA start taken from data */
    int32_t start_init;          /* the start taken (enum oml_init; OML_INIT_AUTO chooses) */
    float start_error[2];        /* OML_INIT_AUTO: leave-one-out kNN error of the
                                    standardised and the whitened start on the labelled
                                    stored items (NAN: not judged) */
    /* OML_HEDGE_LOCAL: a sample of stored items (features only) and where
     * it sits at the start and now; all in _ref_block, saved in model files */
    int32_t ref_n;
    uint64_t ref_at;             /* update count of the last re-embedding */
    float *ref_x;                /* (ref_n, dim) features */
    float *ref_start;            /* (ref_n, emb) head 0 at the start */
    float *ref_emb;              /* (heads, ref_n, emb) every head, re-embedded periodically */
    float *theta0_start;         /* (emb, dim) head 0 at the start, for anchors */
    float *bias0_start;          /* (emb) its offset b(0), when the layout has offsets */
    float *_ref_scratch;         /* dim + emb + ref_n floats */
    void *_ref_block;
    /* OML_OPTIM_ADAM: first and second moments (lay.count each) and steps */
    float *adam_m, *adam_v;
    uint64_t adam_t;
    /* mini-batch workspace (cfg.batch triplets), NULL for batch 1 with SGD */
    oml_net_acts _bacts;
    float *_bgz[OML_MAX_HEADS];  /* (3 batch, emb) each */
    float *_bgrad;               /* lay.count */
    float *_bscratch;
    void *_bwork;
    void *_bjudged;              /* (batch) each triplet judged before the step */
    /* step workspace */
    oml_net_acts _acts;
    float *_gz[OML_MAX_HEADS];   /* (3, emb) each */
    float *_scratch;
    void *_work;
} oml_learner;

/* Creates a learner with randomly initialised weights (the paper's start).
 * Errors: OML_EINVAL with diag naming the bad field, OML_ENOMEM. */
int oml_learner_create(oml_learner **out, const oml_config *cfg, oml_diag *diag);
void oml_learner_destroy(oml_learner *l); /* accepts NULL */

/* Data-dependent start (config levers `center`, `standardize`, `init`):
 * sets mu to the mean of X (n, dim), the scale to 1/sd, and every head to
 * the start `init` names (learner_start.c). Labels (n, OML_LABEL_NONE = -1
 * for none; NULL: none) serve OML_INIT_AUTO only, to judge its two
 * candidate starts by leave-one-out kNN error; they are never learned from.
 * OML_EEMPTY if n < 2 (PCA needs data), OML_ENOMEM, OML_EIO (LAPACK failed). */
int oml_learner_prepare(oml_learner *l, const float *X, const int32_t *labels, int32_t n);
/* The same from rows at[0 .. n) of X (row stride dim; at NULL: rows 0 ..
 * n - 1), labels[i] of row at[i]: the start of a store's sample read in
 * place (its matrix and the sample's slots), the same parameters as from
 * a copy of those rows. */
int oml_learner_prepare_at(oml_learner *l, const float *X, const int32_t *at,
                           const int32_t *labels, int32_t n);

/* Applies one triplet (anchor, positive, negative; dim floats each, borrowed).
 * The caller validates inputs (finite, right dimension). report may be NULL. */
void oml_learner_step(oml_learner *l, const float *xa, const float *xp, const float *xn,
                      oml_step_report *report);
/* The same with the triplet's loss (and so its gradient) scaled by weight
 * (> 0; a click's confidence): oml_learner_step is weight 1. The hedge
 * (Eq. 20) and the counters judge the triplet unweighted. */
void oml_learner_step_weighted(oml_learner *l, const float *xa, const float *xp, const float *xn,
                               float weight, oml_step_report *report);

/* One mini-batch step on n triplets (1 <= n <= cfg.batch): rows holds 3n
 * feature pointers, (anchor, positive, negative) per triplet. The first
 * n_new are new: each is judged before the step (test-then-train: the
 * counters, the recent window and the hedge, Eq. 20, see them); the rest
 * are rehearsed and only move the weights. The loss is cfg.loss per head,
 * the step cfg.optim with its rate scaled by n / cfg.batch, so a part
 * batch moves the weights as much as its share. A step whose loss or
 * gradient is not finite changes nothing but stats.skipped; returns 1 then,
 * else 0. */
int oml_learner_train(oml_learner *l, const float *const *rows, int32_t n, int32_t n_new,
                      oml_step_report *report);
/* The same with triplet t's loss scaled by weights[t] (> 0; NULL: all 1),
 * as one term of the batch's weighted mean. Adam divides each weight's
 * step by its gradient's running scale, so what counts there is a
 * triplet's weight relative to the others it is learned with. */
int oml_learner_train_weighted(oml_learner *l, const float *const *rows, const float *weights,
                               int32_t n, int32_t n_new, oml_step_report *report);

/* Test-then-train accuracy over the newest OML_RECENT_WINDOW new triplets
 * (NAN before the first). */
double oml_learner_recent_accuracy(const oml_learner *l);

/* Returns an owned snapshot of the current model, or NULL on OOM. */
oml_snapshot *oml_learner_snapshot(const oml_learner *l, uint64_t version);

/* Re-embeds the OML_HEDGE_LOCAL reference sample through every head of
 * the current weights (the learner does so every 1000 updates by itself),
 * after weights were set from outside (oml_promote). OML_ENOMEM keeps the
 * previous embedding; OML_OK, also when there is no reference. */
int oml_learner_refresh_reference(oml_learner *l);

/* Internal, for model files: (re)allocates the OML_HEDGE_LOCAL reference
 * for ref_n items, and the floats of it that a file holds (ref_x ..
 * theta0_start, bias0_start, contiguous in that order). */
int oml__learner_ref_alloc(oml_learner *l, int32_t ref_n);
size_t oml__learner_ref_file_floats(const oml_net_layout *lay, int32_t ref_n);

static inline int oml_learner_heads(const oml_learner *l)
{
    return l->cfg.layers + 1;
}

#endif
