/* anml.c - the log-exp mean (ANML Eq. 12) and the LANML (Eq. 19) and DANML
 * (Eq. 22) mini-batch losses with their analytic gradients.
 *
 * DESIGN: pure functions in double over the batch embeddings; the network
 * and optimiser are batch.c's. Each loss first fills dL/dD (n, n) per
 * ordered (anchor, other) pair and then maps it to dL/dF in one pass. */
#include "anml.h"

#include <math.h>
#include <string.h>

#define SMALL_EXPONENT 0.5 /* |gamma| * spread below this: expansion about the mean */
#define DIST_EPS 1e-12

double oml_anml_logexp_mean(const double *a, int32_t n, double gamma, double *w)
{
    if (n <= 0)
        return NAN;
    double lo = a[0], hi = a[0], mean = 0.0;
    for (int32_t i = 0; i < n; i++) {
        lo = a[i] < lo ? a[i] : lo;
        hi = a[i] > hi ? a[i] : hi;
        mean += a[i] / n; /* divided first: values near 1e308 must not overflow */
    }
    mean = mean < lo ? lo : mean > hi ? hi : mean;
    if (gamma == 0.0 || lo == hi) {
        /* Lemma 1, gamma -> 0: the arithmetic mean, uniform weights. */
        if (w != NULL)
            for (int32_t i = 0; i < n; i++)
                w[i] = 1.0 / n;
        return gamma == 0.0 ? mean : lo;
    }
    /* Shift by the term that dominates: the minimum for gamma > 0 and the
     * maximum for gamma < 0, so every exponent -gamma (a_i - ext) is <= 0
     * and the sum S lies in [1, n]: no overflow at any |gamma|. */
    double ext = gamma > 0 ? lo : hi, S = 0.0;
    for (int32_t i = 0; i < n; i++) {
        double t = exp(-gamma * (a[i] - ext));
        S += t;
        if (w != NULL)
            w[i] = t;
    }
    if (w != NULL)
        for (int32_t i = 0; i < n; i++)
            w[i] /= S;
    double spread = hi - mean > mean - lo ? hi - mean : mean - lo;
    double b;
    if (fabs(gamma) * spread <= SMALL_EXPONENT) {
        /* Near gamma = 0 the shifted form subtracts two nearly equal logs;
         * instead b = mean - log1p( (1/n) sum expm1(-gamma (a_i - mean)) ) / gamma. */
        double s = 0.0;
        for (int32_t i = 0; i < n; i++)
            s += expm1(-gamma * (a[i] - mean));
        b = mean - log1p(s / n) / gamma;
    } else {
        b = ext - (log(S) - log((double)n)) / gamma;
    }
    return b < lo ? lo : b > hi ? hi : b;
}

/* gF (n, e) from gD (n, n) = dL/dD(i, j); squared: D = ||f_i - f_j||^2, else
 * D = ||f_i - f_j|| (a zero distance passes no gradient). */
static void pair_backward(const double *F, int32_t n, int32_t e, const double *D,
                          const double *gD, int squared, double *gF)
{
    memset(gF, 0, sizeof *gF * (size_t)n * (size_t)e);
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < n; j++) {
            double g = gD[(size_t)i * n + j];
            if (g == 0.0 || i == j)
                continue;
            double d = D[(size_t)i * n + j];
            double c = squared ? 2.0 * g : (d > DIST_EPS ? g / d : 0.0);
            const double *fi = F + (size_t)i * e, *fj = F + (size_t)j * e;
            double *gi = gF + (size_t)i * e, *gj = gF + (size_t)j * e;
            for (int32_t k = 0; k < e; k++) {
                double t = c * (fi[k] - fj[k]);
                gi[k] += t;
                gj[k] -= t;
            }
        }
}

void oml_lanml_hp_default(oml_lanml_hp *hp)
{
    hp->gamma1 = -1.0f;
    hp->gamma2 = 1.0f;
    hp->margin = 1.0f;
    hp->lambda = 0.01f;
}

/* Splits anchor i's row of D into S (same label, j != i) and D sets, with
 * an optional leading constant in each. Returns via counts. */
static void gather(const double *D, const int32_t *y, int32_t n, int32_t i, int lead,
                   double lead_s, double lead_d, double *vs, int32_t *js, int32_t *ns,
                   double *vd, int32_t *jd, int32_t *nd)
{
    int32_t a = 0, b = 0;
    if (lead) {
        vs[a++] = lead_s;
        vd[b++] = lead_d;
    }
    for (int32_t j = 0; j < n; j++) {
        if (j == i)
            continue;
        if (y[j] == y[i]) {
            js[a] = j;
            vs[a++] = D[(size_t)i * n + j];
        } else {
            jd[b] = j;
            vd[b++] = D[(size_t)i * n + j];
        }
    }
    *ns = a;
    *nd = b;
}

/* Work layout: D (n*n), gD (n*n), then 4 arrays of n+1 doubles and two of
 * n+1 int32 (stored in doubles' space): within oml_batch_loss_work(n). */
double oml_lanml_loss(const void *hp_, const double *F, const int32_t *y, int32_t n, int32_t e,
                      double *gF, oml_rng *rng, double *work)
{
    (void)rng;
    const oml_lanml_hp *hp = hp_;
    size_t nn = (size_t)n * (size_t)n;
    double *D = work, *gD = work + nn, *vs = gD + nn, *vd = vs + n + 1, *ws = vd + n + 1,
           *wd = ws + n + 1;
    int32_t *js = (int32_t *)(wd + n + 1), *jd = js + n + 1;
    oml_batch_pdist(F, n, e, D);
    for (size_t k = 0; k < nn; k++)
        D[k] *= D[k]; /* d_M(x_i, x_j) = ||L x_i - L x_j||^2 */
    memset(gD, 0, nn * sizeof *gD);
    int32_t anchors = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t ns = 0, nd = 0;
        gather(D, y, n, i, 0, 0, 0, vs, js, &ns, vd, jd, &nd);
        anchors += ns > 0 && nd > 0;
    }
    if (anchors == 0) {
        memset(gF, 0, sizeof *gF * (size_t)n * (size_t)e);
        return 0.0;
    }
    double loss = 0.0, reg = 0.0, inv = 1.0 / anchors;
    for (int32_t i = 0; i < n; i++) {
        int32_t ns, nd;
        gather(D, y, n, i, 0, 0, 0, vs, js, &ns, vd, jd, &nd);
        if (ns == 0 || nd == 0)
            continue;
        /* Eq. 19: l( -1/g1 log[mean e^{-g1 d}] + 1/g2 log[mean e^{-g2 d}] ) = l(b_S - b_D). */
        double s = oml_anml_logexp_mean(vs, ns, hp->gamma1, ws);
        double t = oml_anml_logexp_mean(vd, nd, hp->gamma2, wd);
        double x = hp->margin + s - t;
        if (x > 0) {
            loss += x;
            for (int32_t k = 0; k < ns; k++)
                gD[(size_t)i * n + js[k]] += ws[k] * inv;
            for (int32_t k = 0; k < nd; k++)
                gD[(size_t)i * n + jd[k]] -= wd[k] * inv;
        }
        /* Sec. 7.1.1: Omega(M) = 1/N sum_i 1/|S_i| sum_j d_M(x_i, x_j). */
        for (int32_t k = 0; k < ns; k++) {
            reg += vs[k] / ns;
            gD[(size_t)i * n + js[k]] += hp->lambda * inv / ns;
        }
    }
    pair_backward(F, n, e, D, gD, 1, gF);
    return (loss + hp->lambda * reg) * inv;
}

void oml_danml_hp_default(oml_danml_hp *hp)
{
    hp->gamma1 = -2.0f;
    hp->gamma2 = 30.0f;
    hp->lambda1 = 0.8f;
    hp->lambda2 = 0.82f;
    hp->loss = OML_DANML_LOGISTIC;
    hp->scale = 10.0f;
    hp->margin = 0.0f;
}

double oml_danml_loss(const void *hp_, const double *F, const int32_t *y, int32_t n, int32_t e,
                      double *gF, oml_rng *rng, double *work)
{
    (void)rng;
    const oml_danml_hp *hp = hp_;
    size_t nn = (size_t)n * (size_t)n;
    double *D = work, *gD = work + nn, *vs = gD + nn, *vd = vs + n + 1, *ws = vd + n + 1,
           *wd = ws + n + 1;
    int32_t *js = (int32_t *)(wd + n + 1), *jd = js + n + 1;
    oml_batch_pdist(F, n, e, D);
    memset(gD, 0, nn * sizeof *gD);
    double loss = 0.0, inv = n > 0 ? 1.0 / n : 0.0;
    for (int32_t i = 0; i < n; i++) {
        int32_t ns, nd;
        /* Eq. 22: the radius constants are one more term of each mean,
         * e^{-g1 lambda1} + sum_j e^{-g1 d_ij} over |S_i| + 1 terms. */
        gather(D, y, n, i, 1, hp->lambda1, hp->lambda2, vs, js, &ns, vd, jd, &nd);
        double s = oml_anml_logexp_mean(vs, ns, hp->gamma1, ws);
        double t = oml_anml_logexp_mean(vd, nd, hp->gamma2, wd);
        double x = s - t, li, dl;
        if (hp->loss == OML_DANML_HINGE) {
            li = x + hp->margin > 0 ? x + hp->margin : 0.0;
            dl = x + hp->margin > 0 ? 1.0 : 0.0;
        } else {
            /* logistic l(x) = log(1 + e^{c x}) / c, evaluated stably; l' = sigmoid(c x). */
            double c = hp->scale > 0 ? hp->scale : 1.0, u = c * x;
            li = (u > 0 ? u + log1p(exp(-u)) : log1p(exp(u))) / c;
            dl = u >= 0 ? 1.0 / (1.0 + exp(-u)) : exp(u) / (1.0 + exp(u));
        }
        loss += li;
        if (dl == 0.0)
            continue;
        for (int32_t k = 1; k < ns; k++) /* k = 0 is lambda1: a constant */
            gD[(size_t)i * n + js[k]] += dl * ws[k] * inv;
        for (int32_t k = 1; k < nd; k++)
            gD[(size_t)i * n + jd[k]] -= dl * wd[k] * inv;
    }
    pair_backward(F, n, e, D, gD, 0, gF);
    return loss * inv;
}
