/* damlrrm.c - DAMLRRM (damlrrm paper): the neat and shuffled streams
 * (Eq. 1-2), Prim's tree per class (Sec. 3.3), Lg (Eq. 4), Ls (Eq. 5) and
 * L = Lg + Ls (Eq. 6).
 *
 * DESIGN: the loss is a plain oml_batch_loss_fn over a batch whose first
 * half is the neat stream and second half the shuffled stream; the streams
 * are an oml_batch_sample_fn whose pool lives in the caller-owned
 * oml_damlrrm_streams. The network, optimiser, validation and early
 * stopping are batch.c's. Runs on the caller's thread. */
#include "damlrrm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIST_EPS 1e-12

void oml_damlrrm_hp_default(oml_damlrrm_hp *hp)
{
    /* Sec. 4's ablation has boundary 30 and margin 0.5 for its unnormalised
     * 512-d CNN features; on this build's L2-normalised embedding (distances
     * in [0, 2]) 30 makes every negative pair violate and no positive one
     * (Lg, Ls would only push apart). Chosen on the validation split
     * (Fashion-MNIST classes 0-4, seed 1) among (30, 0.5) unnormalised,
     * (1, 0.5) and (1, 0.2) normalised: */
    hp->alpha = 1.0f;
    hp->beta = 0.2f;
    hp->pool_ratio = 0.75f;
}

double oml_damlrrm_prim(const double *D, int32_t ld, const int32_t *idx, int32_t k, int32_t *eu,
                        int32_t *ev, double *key, int32_t *near, int32_t *in)
{
    if (k < 2)
        return 0.0;
    /* Step 1: V_visited = {v_start}; key[v] = the lightest edge from v into the tree. */
    for (int32_t v = 0; v < k; v++) {
        in[v] = v == 0;
        key[v] = D[(size_t)idx[0] * ld + idx[v]];
        near[v] = 0;
    }
    double total = 0.0;
    for (int32_t step = 0; step < k - 1; step++) {
        /* Step 2: the minimum-weight edge between the tree and the rest. */
        int32_t best = -1;
        for (int32_t v = 0; v < k; v++)
            if (!in[v] && (best < 0 || key[v] < key[best]))
                best = v;
        in[best] = 1;
        eu[step] = idx[near[best]];
        ev[step] = idx[best];
        total += key[best];
        /* Step 3: update the keys through the new vertex; repeat. */
        for (int32_t v = 0; v < k; v++) {
            double d = D[(size_t)idx[best] * ld + idx[v]];
            if (!in[v] && d < key[v]) {
                key[v] = d;
                near[v] = best;
            }
        }
    }
    return total;
}

static void add_dist(const double *F, int32_t e, int32_t r, int32_t s, double d, double c,
                     double *gF)
{
    if (d <= DIST_EPS)
        return;
    const double *u = F + (size_t)r * e, *v = F + (size_t)s * e;
    double *gu = gF + (size_t)r * e, *gv = gF + (size_t)s * e;
    for (int32_t k = 0; k < e; k++) {
        double t = c * (u[k] - v[k]) / d;
        gu[k] += t;
        gv[k] -= t;
    }
}

/* The two hinge terms of Eq. 4-5, squared: a positive pair (pos = 1) costs
 * [D - alpha + beta]_+^2, a negative one [alpha + beta - D]_+^2. Returns the
 * term and its derivative in D via *dd. */
static double pair_term(const oml_damlrrm_hp *hp, double d, int pos, double *dd)
{
    double x = pos ? d - hp->alpha + hp->beta : hp->alpha + hp->beta - d;
    if (x <= 0) {
        *dd = 0;
        return 0;
    }
    *dd = pos ? 2.0 * x : -2.0 * x;
    return x * x;
}

double oml_damlrrm_lg(const oml_damlrrm_hp *hp, const double *F, const double *D,
                      const int32_t *y, int32_t n, int32_t n_neat, int32_t e, double *gF,
                      double *work)
{
    double *key = work;
    int32_t *idx = (int32_t *)(work + n), *near = idx + n, *in = near + n, *eu = in + n,
            *ev = eu + n, *done = ev + n;
    /* work: n doubles + 6 n int32 = 4 n doubles. */
    double sum = 0.0;
    int64_t viol = 0;
    /* First pass: the value and Pg; the gradient is scaled by 1/Pg after. */
    for (int pass = 0; pass < 2; pass++) {
        double scale = pass == 1 ? 1.0 / (double)viol : 0.0;
        if (pass == 1 && viol == 0)
            return 0.0;
        for (int32_t i = 0; i < n_neat; i++)
            done[i] = 0;
        /* PP: Prim's tree of each class of the neat stream (Sec. 3.3). */
        for (int32_t i = 0; i < n_neat; i++) {
            if (done[i])
                continue;
            int32_t k = 0;
            for (int32_t r = i; r < n_neat; r++)
                if (y[r] == y[i]) {
                    idx[k++] = r;
                    done[r] = 1;
                }
            oml_damlrrm_prim(D, n, idx, k, eu, ev, key, near, in);
            for (int32_t t = 0; t < k - 1; t++) {
                double d = D[(size_t)eu[t] * n + ev[t]], dd;
                double v = pair_term(hp, d, 1, &dd);
                if (pass == 0) {
                    sum += v;
                    viol += v > 0;
                } else if (dd != 0) {
                    add_dist(F, e, eu[t], ev[t], d, dd * scale, gF);
                }
            }
        }
        /* NP: every pair of the neat stream from different classes. */
        for (int32_t i = 0; i < n_neat; i++)
            for (int32_t j = i + 1; j < n_neat; j++) {
                if (y[i] == y[j])
                    continue;
                double d = D[(size_t)i * n + j], dd;
                double v = pair_term(hp, d, 0, &dd);
                if (pass == 0) {
                    sum += v;
                    viol += v > 0;
                } else if (dd != 0) {
                    add_dist(F, e, i, j, d, dd * scale, gF);
                }
            }
    }
    return sum / (double)viol;
}

double oml_damlrrm_ls(const oml_damlrrm_hp *hp, const double *F, const double *D,
                      const int32_t *y, int32_t n, int32_t n_neat, int32_t e, double *gF)
{
    double sum = 0.0;
    int64_t viol = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && viol == 0)
            return 0.0;
        double scale = pass == 1 ? 1.0 / (double)viol : 0.0;
        for (int32_t s = n_neat; s < n; s++) {
            /* NN: the nearest neat item of s's class, i.e. the nearest point
             * of its class's spanning tree (every neat item is in it). */
            int32_t nn = -1;
            for (int32_t x = 0; x < n_neat; x++)
                if (y[x] == y[s] && (nn < 0 || D[(size_t)s * n + x] < D[(size_t)s * n + nn]))
                    nn = x;
            for (int32_t x = 0; x < n_neat; x++) {
                int pos = y[x] == y[s];
                if (pos && x != nn)
                    continue;
                double d = D[(size_t)s * n + x], dd;
                double v = pair_term(hp, d, pos, &dd);
                if (pass == 0) {
                    sum += v;
                    viol += v > 0;
                } else if (dd != 0) {
                    add_dist(F, e, s, x, d, dd * scale, gF);
                }
            }
        }
    }
    return sum / (double)viol;
}

double oml_damlrrm_loss(const void *hp_, const double *F, const int32_t *y, int32_t n, int32_t e,
                        double *gF, oml_rng *rng, double *work)
{
    (void)rng;
    const oml_damlrrm_hp *hp = hp_;
    double *D = work, *scratch = work + (size_t)n * (size_t)n; /* n^2 + 4 n: fits */
    oml_batch_pdist(F, n, e, D);
    memset(gF, 0, (size_t)n * (size_t)e * sizeof *gF);
    int32_t neat = n / 2;
    double lg = oml_damlrrm_lg(hp, F, D, y, n, neat, e, gF, scratch);
    double ls = oml_damlrrm_ls(hp, F, D, y, n, neat, e, gF);
    return lg + ls; /* Eq. 6: no balance weight */
}

/* ---- the streams ---- */

int oml_damlrrm_streams_init(oml_damlrrm_streams *s, float pool_ratio, int32_t cap)
{
    memset(s, 0, sizeof *s);
    if (!(pool_ratio > 0 && pool_ratio <= 4.0f) || cap < 1)
        return OML_EINVAL;
    s->pool_ratio = pool_ratio;
    s->cap = cap;
    s->pool = malloc((size_t)cap * 4 * sizeof *s->pool);
    s->_tmp = malloc((size_t)cap * sizeof *s->_tmp);
    if (s->pool == NULL || s->_tmp == NULL) {
        oml_damlrrm_streams_free(s);
        return OML_ENOMEM;
    }
    return OML_OK;
}

void oml_damlrrm_streams_free(oml_damlrrm_streams *s)
{
    free(s->pool);
    free(s->_tmp);
    memset(s, 0, sizeof *s);
}

int32_t oml_damlrrm_sample(void *ctx, struct oml_batch_classes *cls, int32_t m, int32_t k,
                           oml_rng *rng, int32_t *out)
{
    oml_damlrrm_streams *s = ctx;
    int32_t b = oml_batch_sample_mk(cls, m, k, rng, out); /* B^x, Eq. 1 */
    if (b == 0)
        return 0;
    if (s->pool == NULL || s->n_pool == 0 || s->half != b) {
        /* The pool S: N_s = q b/2 items with q = round(ratio N_x / (b/2)),
         * q >= 1 and N_s != N_x (Sec. 3.2, "quantity asymmetric"); a random
         * permutation of the training items, cycled (more than N_x: again). */
        int32_t nx = cls->start[cls->n_classes];
        int64_t q = (int64_t)floor(s->pool_ratio * (double)nx / b + 0.5);
        if (q < 1)
            q = 1;
        if (q * b == nx)
            q = q > 1 ? q - 1 : q + 1;
        if (q * b > (int64_t)s->cap * 4)
            q = (int64_t)s->cap * 4 / b;
        if (q < 1 || nx < 1 || nx > s->cap)
            return 0;
        s->half = b;
        s->n_pool = (int32_t)(q * b);
        for (int32_t i = 0; i < s->n_pool; i++) {
            if (i % nx == 0) { /* a fresh permutation for each pass over X */
                int32_t len = s->n_pool - i < nx ? s->n_pool - i : nx;
                int32_t *dst = s->pool + i;
                /* Partial Fisher-Yates over a copy of the items. */
                int32_t *tmp = s->_tmp;
                memcpy(tmp, cls->idx, (size_t)nx * sizeof *tmp);
                for (int32_t t = 0; t < len; t++) {
                    int32_t r = t + (int32_t)oml_rng_below(rng, (uint64_t)(nx - t));
                    int32_t v = tmp[r];
                    tmp[r] = tmp[t];
                    tmp[t] = v;
                    dst[t] = v;
                }
            }
        }
        s->pos = 0;
    }
    /* B^s: the next b/2 items of S, in order (Eq. 1-2). */
    for (int32_t i = 0; i < b; i++) {
        out[b + i] = s->pool[s->pos];
        s->pos = (s->pos + 1) % s->n_pool;
    }
    return 2 * b;
}

int oml_damlrrm_train(const oml_batch_spec *spec, const oml_damlrrm_hp *hp, const float *X,
                      const int32_t *labels, int32_t n, int32_t dim, oml_batch_model **out,
                      oml_diag *diag)
{
    if (!(hp->alpha > 0) || !isfinite(hp->alpha))
        return oml_diag_set(diag, OML_EINVAL, "alpha", "boundary alpha must be > 0");
    if (!(hp->beta >= 0) || !(hp->beta < hp->alpha))
        return oml_diag_set(diag, OML_EINVAL, "beta", "margin beta must be in [0, alpha)");
    if (spec->sampler != OML_BATCH_SAMPLE_MK)
        return oml_diag_set(diag, OML_EINVAL, "sampler", "DAMLRRM's neat stream is m x k");
    oml_damlrrm_streams st;
    int rc = oml_damlrrm_streams_init(&st, hp->pool_ratio, n > 0 ? n : 1);
    if (rc != OML_OK)
        return rc == OML_EINVAL
                   ? oml_diag_set(diag, OML_EINVAL, "pool_ratio", "pool_ratio must be in (0, 4]")
                   : rc;
    oml_batch_spec sp = *spec;
    sp.method = OML_BATCH_DAMLRRM;
    sp.loss = oml_damlrrm_loss;
    sp.loss_hp = hp;
    sp.sample = oml_damlrrm_sample;
    sp.sample_ctx = &st;
    sp.batch_cap = 2 * spec->m * spec->k;
    rc = oml_batch_train(&sp, X, labels, n, dim, out, diag);
    oml_damlrrm_streams_free(&st);
    return rc;
}
