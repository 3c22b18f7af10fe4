/* daml.h - Deep Adversarial Metric Learning (daml paper, Duan et al. CVPR 2018)
 * and the four metric terms it is built on, as batch trainers.
 *
 * The metric f is batch.h's network. The hard-negative generator G (Sec. 3.1,
 * Sec. 3.4 "a 3-layer fully connected network") maps the concatenated
 * (negative, anchor, positive) input features to a synthetic negative in the
 * input feature space (Eq. 5):
 *
 *   u = [x-, x, x+] (3 dim) -> ReLU(W1 u + b1) -> ReLU(W2 . + b2) -> W3 . + b3 = x~- (dim)
 *
 * Its objective is Eq. 6, per synthetic negative t (D = Euclidean distance of
 * the metric's embeddings):
 *   J_gen = sum_t ||x~ - x||^2 + lambda1 ||x~ - x-||^2
 *                 + lambda2 [ D(x~, x)^2 - D(x+, x)^2 - alpha ]_+
 * and the joint objective is Eq. 7, J = J_gen + lambda J_m, with J_m one of
 *   contrastive Eq. 8, triplet Eq. 9, lifted structure Eq. 10-11, N-pair Eq. 12
 * computed on the synthetic negatives (Alg. 1 step 6). Sums are divided by
 * the number of synthetic negatives T (lifted: by 2 x positive pairs, as
 * Eq. 10; N-pair: by the anchors, as Eq. 12): a constant rescaling.
 *
 * Reading of Eq. 7 (hp.literal = 0, the default): the metric parameters
 * theta_f descend lambda J_m and the generator theta_g descends J_gen, i.e.
 * each player minimises the part of Eq. 7 that is its own objective; this is
 * the "adversarial manner" of Sec. 3.2 (J_adv is the only term of J_gen that
 * depends on theta_f, and descending it would pull synthetic negatives
 * towards the anchors in the learned metric, undoing J_m with weight
 * lambda2 = 50). hp.literal = 1 descends all of Eq. 7 on both parameter sets.
 *
 * Tuples drawn from an m x k batch (one draw per step, from the trainer rng):
 *  - contrastive: per anchor a, one positive pair (a, p) and one negative
 *    pair (a, x~) with x~ = G(x_j, x_a, x_a) (Sec. 3.1: x+ = x for the
 *    negative pairwise input), j a random other-class item.
 *  - triplet: per anchor a, (a, p, x~ = G(x_j, x_a, x_p)).
 *  - lifted: every positive pair (i, i+) of the batch; the negatives of a
 *    row i are gen_per_anchor synthetic G(x_j, x_i, x_p(i)) (plain lifted:
 *    every other-class row of the batch).
 *  - N-pair: the batch's k items per class make k/2 N-pair tuples; tuple g
 *    takes anchor x_c = item 2g and positive x_c+ = item 2g+1 of each class
 *    c; the C-1 negatives of c are G(x_c'+, x_c, x_c+) for every c' != c.
 * Without DAML (the plain methods) the negatives are the real items x_j.
 *
 * Threading: a trainer runs on the caller's thread (as oml_batch_train). */
#ifndef OML_DAML_H
#define OML_DAML_H

#include <stdint.h>

#include "batch.h"
#include "err.h"
#include "rng.h"

enum oml_daml_term {
    OML_DAML_CONTRASTIVE = 0, /* Eq. 8 */
    OML_DAML_TRIPLET = 1,     /* Eq. 9 */
    OML_DAML_LIFTED = 2,      /* Eq. 10-11 */
    OML_DAML_NPAIR = 3        /* Eq. 12 */
};

typedef struct oml_daml_hp {
    int32_t term;          /* enum oml_daml_term */
    float lambda;          /* Eq. 7, paper 1 */
    float lambda1;         /* Eq. 6 J_reg weight, paper 1 */
    float lambda2;         /* Eq. 6 J_adv weight, paper 50 */
    float alpha;           /* the margin of Eq. 6, 8, 9, 11, paper 1 */
    int32_t literal;       /* 0: adversarial reading of Eq. 7 (above); 1: literal */
    int32_t gen_hidden;    /* generator width (default 256) */
    int32_t gen_per_anchor;/* lifted: synthetic negatives per row (default 4) */
    float gen_lr;          /* generator Adam step (default 1e-3) */
    int32_t pretrain_epochs; /* Alg. 1 step 1: plain J_m epochs (early stopping applies) */
    int32_t gen_warmup;    /* Alg. 1 step 2: steps training G alone against the
                            * pre-trained metric before the joint phase (default 100) */
    int32_t joint_epochs;  /* Alg. 1 steps 3-7 (default 10) */
} oml_daml_hp;

/* The paper's defaults (Sec. 3.4: lambda 1, lambda1 1, lambda2 50, alpha 1)
 * for term, and this build's generator / schedule defaults. */
void oml_daml_hp_default(oml_daml_hp *hp, int32_t term);

/* ---- tuples ---- */

/* T tuples (a, p, j) of real batch rows: anchor, positive, negative source.
 * Tuples are grouped: group q is tuples gs[q] .. gs[q+1] (a lifted row, an
 * N-pair anchor; contrastive and triplet: one tuple per group). Lifted also
 * has P positive pairs (pi, pj). p is NULL for the plain lifted plan. */
typedef struct oml_daml_plan {
    int32_t term, n, T, G, P;
    int32_t *a, *p, *j, *gs, *pi, *pj;
    double *_rowmax;  /* (G) lifted scratch */
    int32_t *_rowarg; /* (G) */
    void *_block;
} oml_daml_plan;

/* Allocates a plan for batches of up to n_cap rows (synthetic: the DAML
 * plan, else the plain one). OML_ENOMEM. */
int oml_daml_plan_init(oml_daml_plan *pl, const oml_daml_hp *hp, int32_t n_cap, int synthetic);
void oml_daml_plan_free(oml_daml_plan *pl); /* accepts a zeroed plan */
/* Draws the tuples of one batch y (n <= n_cap). Returns T (0: no tuple). */
int32_t oml_daml_plan_build(oml_daml_plan *pl, const oml_daml_hp *hp, const int32_t *y, int32_t n,
                            int synthetic, oml_rng *rng);

/* ---- the objective terms (double, for gradient checks and training) ---- */

/* J_m of the plan on embeddings F. Row r of F is a real item for r < n;
 * with synthetic, the negative of tuple t is row n + t, else row j[t].
 * gF (rows, e) = dJ_m/dF (overwritten). */
double oml_daml_jm(const oml_daml_hp *hp, const oml_daml_plan *pl, const double *F, int32_t e,
                   int synthetic, double *gF);

/* J_gen, Eq. 6, over the plan's tuples: Xs (T, dim) the synthetic negatives,
 * X (n, dim) the real rows, F (n + T, e) their embeddings (synthetic after
 * the real). gXs (T, dim) = dJ_gen/dXs through J_hard and J_reg only;
 * gF (n + T, e) = dJ_gen/dF through J_adv (both overwritten). */
double oml_daml_jgen(const oml_daml_hp *hp, const oml_daml_plan *pl, const double *Xs,
                     const float *X, int32_t dim, const double *F, int32_t e, double *gXs,
                     double *gF);

/* The plain metric terms as batch losses (hp: oml_daml_hp, term selects
 * Eq. 8-12 with real negatives; tuples drawn from rng), for oml_batch_train. */
double oml_daml_plain_loss(const void *hp, const double *F, const int32_t *y, int32_t n, int32_t e,
                           double *gF, oml_rng *rng, double *work);

/* ---- the generator ---- */

typedef struct oml_daml_gen {
    int32_t dim, hidden;
    size_t w1, b1, w2, b2, w3, b3, count; /* offsets into params */
    float *params;                        /* owned */
} oml_daml_gen;

/* PyTorch-style uniform init from seed. OML_EINVAL / OML_ENOMEM. */
int oml_daml_gen_init(oml_daml_gen *g, int32_t dim, int32_t hidden, uint64_t seed);
void oml_daml_gen_free(oml_daml_gen *g);

/* ---- one DAML step, and training ---- */

typedef struct oml_daml_ctx oml_daml_ctx;

/* A step context for batches of up to b_cap rows of dim features with the
 * metric network lay. Owns the generator (seeded), its Adam state, the plan
 * and every buffer of a step. */
int oml_daml_ctx_create(oml_daml_ctx **out, const oml_daml_hp *hp, const oml_batch_layout *lay,
                        int32_t b_cap, uint64_t seed);
void oml_daml_ctx_destroy(oml_daml_ctx *c);
oml_daml_gen *oml_daml_ctx_gen(oml_daml_ctx *c);
oml_daml_plan *oml_daml_ctx_plan(oml_daml_ctx *c);

/* With the plan already built for yb (oml_daml_plan_build on the ctx's plan,
 * synthetic = 1): generator forward, metric forward of the real and
 * synthetic rows, J_gen and J_m, and the gradients of the mode (see above):
 * grad_f (lay.count) for the metric, grad_g (gen.count) for the generator.
 * Either gradient may be NULL. */
int oml_daml_eval(oml_daml_ctx *c, const float *params_f, const float *Xb, int32_t b,
                  double *jgen, double *jm, float *grad_f, float *grad_g);

/* Alg. 1: trains the plain term first (spec as given, loss = the plain
 * term, hp->pretrain_epochs epochs), then the generator alone for
 * hp->gen_warmup steps, then both jointly for hp->joint_epochs epochs
 * starting from the pre-trained metric (validation, early stopping and
 * cancel as oml_batch_train, per phase). Returns the metric network (the
 * generator is used only in training, Sec. 3.2). Errors as oml_batch_train;
 * the spec must use the m x k sampler (OML_EINVAL otherwise). */
int oml_daml_train(const oml_batch_spec *spec, const oml_daml_hp *hp, const float *X,
                   const int32_t *labels, int32_t n, int32_t dim, oml_batch_model **out,
                   oml_diag *diag);

/* The plain term alone (the methods contrastive / triplet-Eq. 9 / lifted /
 * npair): oml_batch_train with oml_daml_plain_loss. */
int oml_daml_train_plain(const oml_batch_spec *spec, const oml_daml_hp *hp, const float *X,
                         const int32_t *labels, int32_t n, int32_t dim, oml_batch_model **out,
                         oml_diag *diag);

#endif
