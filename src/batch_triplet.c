/* batch_triplet.c - the plain triplet-loss baseline on mini-batches.
 *
 * Every ordered (anchor, positive) pair of a class in the batch gets one
 * negative: semi-hard (FaceNet, Schroff et al. 2015: the closest negative
 * farther than the positive but inside the margin; if there is none, the
 * hardest negative) or uniformly random. Loss = mean over these triplets of
 * [D(a,p) - D(a,n) + margin]_+ with D Euclidean on the embeddings. */
#include "batch.h"

#include <math.h>
#include <string.h>

#define DIST_EPS 1e-12

/* Adds c * d||f_i - f_j|| / d(f_i, f_j) into gF. */
static void add_dist_grad(const double *F, int32_t e, int32_t i, int32_t j, double d, double c,
                          double *gF)
{
    if (d <= DIST_EPS)
        return;
    const double *fi = F + (size_t)i * e, *fj = F + (size_t)j * e;
    double *gi = gF + (size_t)i * e, *gj = gF + (size_t)j * e;
    for (int32_t k = 0; k < e; k++) {
        double t = c * (fi[k] - fj[k]) / d;
        gi[k] += t;
        gj[k] -= t;
    }
}

double oml_triplet_loss(const void *hp_, const double *F, const int32_t *y, int32_t n, int32_t e,
                        double *gF, oml_rng *rng, double *work)
{
    const oml_triplet_hp *hp = hp_;
    double *D = work;
    int32_t *neg = (int32_t *)(work + (size_t)n * (size_t)n); /* (n) candidate list */
    oml_batch_pdist(F, n, e, D);
    memset(gF, 0, sizeof *gF * (size_t)n * (size_t)e);
    /* Count the triplets first, so each one's gradient is scaled once. */
    int64_t count = 0;
    for (int32_t a = 0; a < n; a++) {
        int32_t same = 0, other = 0;
        for (int32_t j = 0; j < n; j++) {
            same += j != a && y[j] == y[a];
            other += y[j] != y[a];
        }
        if (other > 0)
            count += same;
    }
    if (count == 0)
        return 0.0;
    double loss = 0.0, inv = 1.0 / (double)count;
    for (int32_t a = 0; a < n; a++) {
        int32_t nn = 0;
        for (int32_t j = 0; j < n; j++)
            if (y[j] != y[a])
                neg[nn++] = j;
        if (nn == 0)
            continue;
        const double *Da = D + (size_t)a * n;
        for (int32_t p = 0; p < n; p++) {
            if (p == a || y[p] != y[a])
                continue;
            double dap = Da[p];
            int32_t best = -1;
            if (hp->mining == 1) {
                best = neg[oml_rng_below(rng, (uint64_t)nn)];
            } else {
                int32_t hard = neg[0];
                double bd = INFINITY;
                for (int32_t k = 0; k < nn; k++) {
                    double d = Da[neg[k]];
                    if (d > dap && d < dap + hp->margin && d < bd) {
                        bd = d;
                        best = neg[k];
                    }
                    if (d < Da[hard])
                        hard = neg[k];
                }
                if (best < 0)
                    best = hard;
            }
            double x = dap - Da[best] + hp->margin;
            if (x <= 0)
                continue;
            loss += x;
            add_dist_grad(F, e, a, p, dap, inv, gF);
            add_dist_grad(F, e, a, best, Da[best], -inv, gF);
        }
    }
    return loss * inv;
}
