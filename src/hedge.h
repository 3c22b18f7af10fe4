/* hedge.h - the adaptive hedge update of the head weights (OAHU Sec. 3.4).
 *
 * alpha has L+1 entries summing to 1. One update applies Eq. 20 to each head's
 * loss in [0, 1], then the floor alpha >= s/(L+1) and the renormalisation of
 * Alg. 1 lines 10-11. Pure functions. */
#ifndef OML_HEDGE_H
#define OML_HEDGE_H

enum oml_hedge_branch {
    OML_HEDGE_BRANCH_EXP = 0,   /* alpha * beta^L */
    OML_HEDGE_BRANCH_LINEAR = 1 /* alpha * (1 - (1-beta) L) */
};

/* Which branch of Eq. 20 applies to a head with loss `loss` when the smallest
 * loss over all heads is `min_loss`. */
int oml_hedge_branch(float beta, float min_loss, float loss);

/* Uniform start, Alg. 1 line 1. */
void oml_hedge_init(float *alpha, int n);

/* Eq. 20, floor, normalisation. alpha (n) in/out, loss (n) in [0, 1]. */
void oml_hedge_update(float *alpha, const float *loss, int n, float beta, float s);

#endif
