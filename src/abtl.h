/* abtl.h - the adaptive-bound triplet loss of one head (OAHU Sec. 3.3).
 *
 * Given the pre-update distances D+ = D(a,p) and D- = D(a,n) in one head, the
 * thresholds c1 = d_sim(D+) and c2 = d_dis(D-) (Eq. 11) are computed once and
 * held constant while differentiating; the loss is Eq. 12-13 and the step
 * uses its derivatives with respect to D+ and D-. Pure functions. */
#ifndef OML_ABTL_H
#define OML_ABTL_H

typedef struct oml_abtl {
    float c1, c2;         /* d_sim(D+), d_dis(D-): Eq. 11 */
    float l_attr, l_rep;  /* Eq. 12 */
    float loss;           /* Eq. 13: (l_attr + l_rep) / 2 */
    float g_pos, g_neg;   /* dloss/dD+ and dloss/dD- with c1, c2 frozen */
} oml_abtl;

/* Eq. 11 thresholds for a distance in [0, 2]. */
float oml_abtl_dsim(float tau, float d_orig);
float oml_abtl_ddis(float tau, float d_orig);

/* Evaluates Eq. 11-13 at the pre-update distances. */
void oml_abtl_eval(float tau, float d_pos, float d_neg, oml_abtl *out);

/* Eq. 12-13 at distances (d_pos, d_neg) with thresholds frozen at (c1, c2);
 * used by the finite-difference gradient checks. */
float oml_abtl_loss_frozen(float c1, float c2, float d_pos, float d_neg);

#endif
