/* damlrrm.h - Deep Asymmetric Metric Learning via Rich Relationship Mining
 * (damlrrm paper, Xu et al. CVPR 2019) as a batch trainer.
 *
 * Each batch is two streams through the one (weight-shared) network, Eq. 1:
 *   B = {B^x, B^s}: B^x the neat stream, m classes x k items (the core's
 *   m x k sampler), and B^s the shuffled stream of b/2 = m k items read in
 *   order from a shuffled pool S of N_s != N_x items (Eq. 2: the pool is
 *   N_s = q b/2 items long, so B^s repeats every q steps, each time beside a
 *   different neat batch: B^s_1 = B^s_l, B^x_1 != B^x_l).
 * Losses (D = Euclidean distance of the embeddings, boundary alpha, margin
 * beta; Sec. 3.3):
 *   Lg (Eq. 4) = 1/Pg ( sum_{PP} [D - alpha + beta]_+^2 + sum_{NP} [alpha + beta - D]_+^2 )
 *     PP = the edges of Prim's minimum spanning tree of each class of the neat
 *     stream over the current distances, NP = the neat stream's pairs of
 *     different classes, Pg = the number of pairs with a non-zero term.
 *   Ls (Eq. 5) = 1/Ps ( sum_{NN} [D - alpha + beta]_+^2 + sum_{NP} [alpha + beta - D]_+^2 )
 *     NN = each shuffled item with its nearest same-class neat item (the
 *     nearest point of its class's tree), NP = the (shuffled, neat) pairs of
 *     different classes, Ps = the violating pairs.
 *   L = Lg + Ls (Eq. 6).
 * The pair counts Pg, Ps and the tree are piecewise constant in the
 * embeddings and treated as constants by the gradient.
 * Paper values: alpha = 30, beta = 0.5 (Sec. 4, Tables 4-5), on unnormalised
 * CNN embeddings. The defaults here are alpha = 1, beta = 0.2 for the
 * L2-normalised embedding the trainer (and the daemon) uses by default
 * (tuned on the validation split; see oml_damlrrm_hp_default). */
#ifndef OML_DAMLRRM_H
#define OML_DAMLRRM_H

#include <stdint.h>

#include "batch.h"
#include "err.h"
#include "rng.h"

typedef struct oml_damlrrm_hp {
    float alpha;      /* boundary, paper 30 (unnormalised), default 1 */
    float beta;       /* margin, paper 0.5, default 0.2 */
    float pool_ratio; /* N_s ~ pool_ratio N_x, != 1 (default 0.75) */
} oml_damlrrm_hp;

void oml_damlrrm_hp_default(oml_damlrrm_hp *hp);

/* Prim's minimum spanning tree (Sec. 3.3 steps 1-3) of the complete graph on
 * the k vertices idx (rows/cols of D (ld, ld)), in O(k^2): the k-1 edges
 * (eu[i], ev[i]) as rows of D, i = 0..k-2. key (k) doubles and near, in (k)
 * int32 are scratch. Returns the tree's total weight (0 for k < 2). */
double oml_damlrrm_prim(const double *D, int32_t ld, const int32_t *idx, int32_t k, int32_t *eu,
                        int32_t *ev, double *key, int32_t *near, int32_t *in);

/* Lg (Eq. 4) over rows [0, n_neat) of F, and Ls (Eq. 5) for rows
 * [n_neat, n) against them. Each ADDS its gradient into gF (n, e) and
 * returns its value. D (n, n) holds the pairwise distances of F
 * (oml_batch_pdist); work holds 4 n doubles. */
double oml_damlrrm_lg(const oml_damlrrm_hp *hp, const double *F, const double *D,
                      const int32_t *y, int32_t n, int32_t n_neat, int32_t e, double *gF,
                      double *work);
double oml_damlrrm_ls(const oml_damlrrm_hp *hp, const double *F, const double *D,
                      const int32_t *y, int32_t n, int32_t n_neat, int32_t e, double *gF);

/* L = Lg + Ls (Eq. 6) as a batch loss: rows [0, n/2) are the neat stream and
 * [n/2, n) the shuffled one (what the streams sampler composes). */
double oml_damlrrm_loss(const void *hp, const double *F, const int32_t *y, int32_t n, int32_t e,
                        double *gF, oml_rng *rng, double *work);

/* The two streams: an oml_batch_sample_fn context. The pool is drawn on the
 * first call from the training items (cls), with the trainer's rng. */
typedef struct oml_damlrrm_streams {
    float pool_ratio;
    int32_t cap;       /* items the pool may hold (>= the training items) */
    int32_t n_pool, pos, half;
    int32_t *pool;     /* (4 cap) item indices */
    int32_t *_tmp;     /* (cap) permutation scratch */
} oml_damlrrm_streams;

int oml_damlrrm_streams_init(oml_damlrrm_streams *s, float pool_ratio, int32_t cap);
void oml_damlrrm_streams_free(oml_damlrrm_streams *s);
/* oml_batch_sample_fn: out gets the neat m x k batch (class-major), then as
 * many shuffled items; returns 2 m' k (0 when the neat batch cannot be drawn). */
int32_t oml_damlrrm_sample(void *ctx, struct oml_batch_classes *cls, int32_t m, int32_t k,
                           oml_rng *rng, int32_t *out);

/* oml_batch_train with the two streams and L (Eq. 6). Errors as
 * oml_batch_train; OML_EINVAL for a bad hp (diag names the field) or a
 * sampler other than m x k. */
int oml_damlrrm_train(const oml_batch_spec *spec, const oml_damlrrm_hp *hp, const float *X,
                      const int32_t *labels, int32_t n, int32_t dim, oml_batch_model **out,
                      oml_diag *diag);

#endif
