/* anml.h - Adaptive Neighborhood Metric Learning (anml paper), as batch losses.
 *
 * The log-exp mean (Eq. 12) over a (n):
 *     b(gamma) = -(1/gamma) log( (1/n) sum_i exp(-gamma a_i) ),  b(0) = mean
 * is a soft order statistic. With Eq. 12 as written it DEcreases in gamma
 * (Lemma 2's "monotone decreasing"): gamma -> 0 gives the mean, gamma -> +inf
 * the minimum a_1, gamma -> -inf the maximum a_n. (Lemma 1's Eq. 13 as
 * printed pairs +inf with a_n; that contradicts Eq. 12 and Lemma 2, and the
 * losses below only make sense with the reading of Eq. 12: gamma1 < 0 makes
 * the similar-side term a soft maximum of the positives' distances, gamma2 > 0
 * the dissimilar-side term a soft minimum of the negatives'.)
 * Its gradient is a softmax: db/da_i = exp(-gamma a_i) / sum_j exp(-gamma a_j).
 *
 * LANML (Eq. 19) and DANML (Eq. 22) are oml_batch_loss_fn losses: each
 * anchor i of the batch takes S_i = the other items of its class in the
 * batch and D_i = the items of other classes. */
#ifndef OML_ANML_H
#define OML_ANML_H

#include <stdint.h>

#include "batch.h"

/* b(gamma) of a (n >= 1), Eq. 12, evaluated without overflow or loss of
 * precision for either sign of gamma, |gamma| up to 1e300 and any finite a:
 * shifted log-sum-exp for large |gamma| * spread, a log1p/expm1 expansion about
 * the mean near gamma = 0. If w is not NULL it gets db/da (n), which sums to 1. */
double oml_anml_logexp_mean(const double *a, int32_t n, double gamma, double *w);

/* LANML, Eq. 19: distances are the squared Mahalanobis d_M = ||L(x_i - x_j)||^2
 * with L the depth-0, unnormalised head (M = L^T L). Per anchor
 *   loss_i = [ margin + b_{gamma1}(d(i, S_i)) - b_{gamma2}(d(i, D_i)) ]_+
 * (the hinge of Sec. 7.1.1), plus lambda * Omega(M) with Sec. 7.1.1's
 *   Omega(M) = (1/N) sum_i (1/|S_i|) sum_{j in S_i} d_M(x_i, x_j).
 * Anchors with an empty S_i or D_i are skipped; the sums are means over the
 * anchors kept. Defaults: gamma1 = -1 (LANML-), gamma2 = 1, margin 1, lambda 0.01. */
typedef struct oml_lanml_hp {
    float gamma1, gamma2, margin, lambda;
} oml_lanml_hp;

void oml_lanml_hp_default(oml_lanml_hp *hp);
double oml_lanml_loss(const void *hp, const double *F, const int32_t *y, int32_t n, int32_t e,
                      double *gF, oml_rng *rng, double *work);

/* DANML, Eq. 22: distances are Euclidean between the L2-normalised
 * embeddings (Sec. 6.1, d = |f(x_i) - f(x_j)|). Per anchor, with the radius
 * constants lambda1, lambda2 entering as one more term of each mean:
 *   s_i = b_{gamma1}({lambda1} u d(i, S_i)),  t_i = b_{gamma2}({lambda2} u d(i, D_i))
 *   loss_i = l(s_i - t_i),  gamma1 < 0 < gamma2
 * with l the logistic loss of Sec. 7.2.1, l(x) = log(1 + exp(scale x)) / scale,
 * or the hinge [x + margin]_+. The batch loss is the mean over anchors.
 * Sec. 7.2 tunes |gamma1| in {1,2,3}, gamma2 in {25,30,35}, lambda1 in
 * [0.5, 0.65] (for a cosine distance) and lambda2 = lambda1 + 0.01..0.03. */
enum oml_danml_loss { OML_DANML_LOGISTIC = 0, OML_DANML_HINGE = 1 };

typedef struct oml_danml_hp {
    float gamma1, gamma2, lambda1, lambda2;
    int32_t loss;        /* enum oml_danml_loss */
    float scale, margin;
} oml_danml_hp;

void oml_danml_hp_default(oml_danml_hp *hp);
double oml_danml_loss(const void *hp, const double *F, const int32_t *y, int32_t n, int32_t e,
                      double *gF, oml_rng *rng, double *work);

#endif
