/* abtl.c - adaptive-bound triplet loss (OAHU Eq. 9-13).
 *
 * Eq. 11 solves the boundary conditions of Eq. 10 for the exponential forms of
 * Eq. 9:  d_sim(D) = tau/(e^2-1) * (e^D - 1)          (0 at D=0, tau at D=2)
 *         d_dis(D) = tau/(1-e^-2) * (1 - e^-D) + 2-tau  (2-tau at D=0, 2 at D=2)
 * so d_sim(D) <= D <= d_dis(D) on [0, 2] for tau in (0, 2): every triplet has
 * a positive loss unless D+ = 0 and D- = 2, which gives full utilisation. */
#include "abtl.h"

#include <math.h>

#define E2 7.38905609893065f

float oml_abtl_dsim(float tau, float d_orig)
{
    return tau / (E2 - 1.0f) * (expf(d_orig) - 1.0f);
}

float oml_abtl_ddis(float tau, float d_orig)
{
    /* Eq. 11 as printed: -(2-(2-tau))/(1-e^-2) * (e^-D - 1) + (2-tau). */
    return -tau / (1.0f - 1.0f / E2) * (expf(-d_orig) - 1.0f) + (2.0f - tau);
}

float oml_abtl_loss_frozen(float c1, float c2, float d_pos, float d_neg)
{
    float attr = fmaxf(0.0f, (d_pos - c1) / (2.0f - c1));   /* Eq. 12, first line */
    float rep = fmaxf(0.0f, 1.0f - d_neg / c2);             /* Eq. 12, second line */
    return 0.5f * (attr + rep);                             /* Eq. 13 */
}

void oml_abtl_eval(float tau, float d_pos, float d_neg, oml_abtl *out)
{
    float c1 = oml_abtl_dsim(tau, d_pos);
    float c2 = oml_abtl_ddis(tau, d_neg);
    float attr = (d_pos - c1) / (2.0f - c1);
    float rep = 1.0f - d_neg / c2;
    out->c1 = c1;
    out->c2 = c2;
    out->l_attr = attr > 0.0f ? attr : 0.0f;
    out->l_rep = rep > 0.0f ? rep : 0.0f;
    out->loss = 0.5f * (out->l_attr + out->l_rep);
    out->g_pos = attr > 0.0f ? 0.5f / (2.0f - c1) : 0.0f;
    out->g_neg = rep > 0.0f ? -0.5f / c2 : 0.0f;
}
