/* hedge.c - OAHU Eq. 20 and Alg. 1 lines 9-11.
 *
 * Eq. 20 reads
 *     alpha <- alpha * beta^L                 if beta^(min L) * log L > beta - 1
 *     alpha <- alpha * [1 - (1-beta) L]       otherwise
 * Our reading, implemented literally: "min L" is the smallest local loss over
 * all heads at this step, log is the natural logarithm, and L is the head's own
 * loss. For L = 0 the log is -inf, the condition is false and the linear branch
 * leaves alpha unchanged, as both branches would. With beta = 0.99 the
 * exponential branch is taken only for losses very close to 1 (log L > about
 * -0.01), i.e. for heads that are almost maximally wrong. */
#include "hedge.h"

#include <math.h>

int oml_hedge_branch(float beta, float min_loss, float loss)
{
    double lhs = pow((double)beta, (double)min_loss) * log((double)loss);
    return lhs > (double)beta - 1.0 ? OML_HEDGE_BRANCH_EXP : OML_HEDGE_BRANCH_LINEAR;
}

void oml_hedge_init(float *alpha, int n)
{
    for (int i = 0; i < n; i++)
        alpha[i] = 1.0f / (float)n;
}

void oml_hedge_update(float *alpha, const float *loss, int n, float beta, float s)
{
    float min_loss = loss[0];
    for (int i = 1; i < n; i++)
        min_loss = fminf(min_loss, loss[i]);

    for (int i = 0; i < n; i++) {
        if (oml_hedge_branch(beta, min_loss, loss[i]) == OML_HEDGE_BRANCH_EXP)
            alpha[i] *= powf(beta, loss[i]);
        else
            alpha[i] *= 1.0f - (1.0f - beta) * loss[i];
    }
    /* Alg. 1 line 10: the smooth floor keeps every depth alive. */
    float floor_ = s / (float)n, sum = 0.0f;
    for (int i = 0; i < n; i++) {
        alpha[i] = fmaxf(alpha[i], floor_);
        sum += alpha[i];
    }
    /* Alg. 1 line 11. */
    for (int i = 0; i < n; i++)
        alpha[i] /= sum;
}
