/* dml_metrics.c - Recall@K, MAP@R, k-means NMI / F1 and kNN error.
 *
 * Query blocks of BLK rows against the whole gallery through one sgemm each:
 * ||q - g||^2 = ||q||^2 + ||g||^2 - 2 q.g. Per query the ranking is a
 * selection of the T nearest keys (distance bits, index) and a sort of those
 * T only, so MAP@R costs O(n + R log R) per query, not a full sort. */
#include "dml_metrics.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

#define BLK 256

static float *sq_norms(const float *E, int32_t n, int32_t e)
{
    float *s = malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    if (s != NULL)
        for (int32_t i = 0; i < n; i++)
            s[i] = cblas_sdot(e, E + (size_t)i * e, 1, E + (size_t)i * e, 1);
    return s;
}

/* A key orders by distance then index: non-negative float bits are monotone. */
static uint64_t key(float d2, int32_t j)
{
    uint32_t b;
    d2 = d2 > 0.0f ? d2 : 0.0f;
    memcpy(&b, &d2, 4);
    return ((uint64_t)b << 32) | (uint32_t)j;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Moves the t smallest of a (n) to a[0..t) (unordered): Hoare quickselect. */
static void select_smallest(uint64_t *a, int32_t n, int32_t t)
{
    int32_t lo = 0, hi = n - 1;
    while (lo < hi && t > lo && t <= hi) {
        uint64_t x = a[lo + (hi - lo) / 2];
        int32_t i = lo, j = hi;
        while (i <= j) {
            while (a[i] < x)
                i++;
            while (a[j] > x)
                j--;
            if (i <= j) {
                uint64_t s = a[i];
                a[i++] = a[j];
                a[j--] = s;
            }
        }
        if (t <= j)
            hi = j;
        else if (t >= i)
            lo = i;
        else
            return;
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Dense class numbers 0..nc-1 for labels y (n) into out; returns nc or OML_ENOMEM. */
static int32_t densify(const int32_t *y, int32_t n, int32_t *out)
{
    int32_t *u = malloc((size_t)(n > 0 ? n : 1) * sizeof *u);
    if (u == NULL)
        return OML_ENOMEM;
    memcpy(u, y, (size_t)n * sizeof *u);
    qsort(u, (size_t)n, sizeof *u, cmp_i32);
    int32_t nc = 0;
    for (int32_t i = 0; i < n; i++)
        if (i == 0 || u[i] != u[nc - 1])
            u[nc++] = u[i];
    for (int32_t i = 0; i < n; i++) {
        const int32_t *hit = bsearch(&y[i], u, (size_t)nc, sizeof *u, cmp_i32);
        out[i] = (int32_t)(hit - u);
    }
    free(u);
    return nc;
}

int oml_dml_retrieval(const float *E, const int32_t *y, int32_t n, int32_t e, const int32_t *ks,
                      int32_t nk, double *recall, double *map_at_r)
{
    if (n < 2 || nk < 0)
        return OML_EINVAL;
    int32_t kmax = 0;
    for (int32_t i = 0; i < nk; i++) {
        if (ks[i] < 1)
            return OML_EINVAL;
        kmax = ks[i] > kmax ? ks[i] : kmax;
    }
    int32_t *cls = malloc((size_t)n * sizeof *cls);
    int32_t nc = cls ? densify(y, n, cls) : OML_ENOMEM;
    int32_t *csize = nc > 0 ? calloc((size_t)nc, sizeof *csize) : NULL;
    float *sq = sq_norms(E, n, e);
    float *G = malloc((size_t)BLK * (size_t)n * sizeof *G);
    uint64_t *keys = malloc((size_t)n * sizeof *keys);
    int64_t *hits = calloc((size_t)(nk > 0 ? nk : 1), sizeof *hits);
    int rc = OML_OK;
    if (nc < 0 || !csize || !sq || !G || !keys || !hits) {
        rc = OML_ENOMEM;
        goto done;
    }
    for (int32_t i = 0; i < n; i++)
        csize[cls[i]]++;
    double ap_sum = 0.0;
    int64_t ap_count = 0;
    for (int32_t q0 = 0; q0 < n; q0 += BLK) {
        int32_t b = n - q0 < BLK ? n - q0 : BLK;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, n, e, 1.0f, E + (size_t)q0 * e, e,
                    E, e, 0.0f, G, n);
        for (int32_t r = 0; r < b; r++) {
            int32_t q = q0 + r, m = 0;
            const float *g = G + (size_t)r * n;
            for (int32_t j = 0; j < n; j++)
                if (j != q)
                    keys[m++] = key(sq[q] + sq[j] - 2.0f * g[j], j);
            int32_t R = csize[cls[q]] - 1;
            int32_t T = R > kmax ? R : kmax;
            T = T < m ? T : m;
            select_smallest(keys, m, T);
            qsort(keys, (size_t)T, sizeof *keys, cmp_u64);
            for (int32_t t = 0; t < nk; t++) {
                int32_t K = ks[t] < T ? ks[t] : T, hit = 0;
                for (int32_t i = 0; i < K && !hit; i++)
                    hit = cls[(int32_t)(keys[i] & 0xffffffffu)] == cls[q];
                hits[t] += hit;
            }
            if (R > 0) {
                double ap = 0.0;
                int32_t rel = 0;
                for (int32_t i = 0; i < R; i++)
                    if (cls[(int32_t)(keys[i] & 0xffffffffu)] == cls[q]) {
                        rel++;
                        ap += (double)rel / (i + 1);
                    }
                ap_sum += ap / R;
                ap_count++;
            }
        }
    }
    for (int32_t t = 0; t < nk; t++)
        recall[t] = (double)hits[t] / n;
    if (map_at_r != NULL)
        *map_at_r = ap_count ? ap_sum / (double)ap_count : 0.0;
done:
    free(cls);
    free(csize);
    free(sq);
    free(G);
    free(keys);
    free(hits);
    return rc;
}

int oml_dml_kmeans(const float *E, int32_t n, int32_t e, int32_t k, uint64_t seed,
                   int32_t max_iter, int32_t *assign)
{
    if (k < 1 || n < k)
        return OML_EINVAL;
    float *C = malloc((size_t)k * (size_t)e * sizeof *C);
    float *D = malloc((size_t)n * (size_t)k * sizeof *D);
    double *acc = malloc((size_t)k * (size_t)e * sizeof *acc);
    double *dmin = malloc((size_t)n * sizeof *dmin);
    int32_t *cnt = malloc((size_t)k * sizeof *cnt);
    float *sq = sq_norms(E, n, e);
    int rc = OML_OK;
    if (!C || !D || !acc || !dmin || !cnt || !sq) {
        rc = OML_ENOMEM;
        goto done;
    }
    oml_rng rng;
    oml_rng_seed(&rng, seed);
    /* k-means++ (Arthur & Vassilvitskii): each next centre with probability
     * proportional to the squared distance to the nearest chosen one. */
    int32_t first = (int32_t)oml_rng_below(&rng, (uint64_t)n);
    memcpy(C, E + (size_t)first * e, (size_t)e * sizeof *C);
    for (int32_t i = 0; i < n; i++) {
        double s = 0;
        for (int32_t j = 0; j < e; j++) {
            double t = (double)E[(size_t)i * e + j] - C[j];
            s += t * t;
        }
        dmin[i] = s;
    }
    for (int32_t c = 1; c < k; c++) {
        double tot = 0;
        for (int32_t i = 0; i < n; i++)
            tot += dmin[i];
        double u = oml_rng_uniform(&rng) * tot;
        int32_t pick = n - 1;
        for (int32_t i = 0; i < n; i++) {
            u -= dmin[i];
            if (u < 0) {
                pick = i;
                break;
            }
        }
        float *cc = C + (size_t)c * e;
        memcpy(cc, E + (size_t)pick * e, (size_t)e * sizeof *C);
        for (int32_t i = 0; i < n; i++) {
            double s = 0;
            for (int32_t j = 0; j < e; j++) {
                double t = (double)E[(size_t)i * e + j] - cc[j];
                s += t * t;
            }
            dmin[i] = s < dmin[i] ? s : dmin[i];
        }
    }
    for (int32_t i = 0; i < n; i++)
        assign[i] = -1;
    for (int32_t it = 0; it < max_iter; it++) {
        /* D (n, k) = E C^T; assignment by ||c||^2 - 2 e.c. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, k, e, 1.0f, E, e, C, e, 0.0f, D, k);
        float csq[1024];
        for (int32_t c = 0; c < k && c < 1024; c++)
            csq[c] = cblas_sdot(e, C + (size_t)c * e, 1, C + (size_t)c * e, 1);
        int32_t changed = 0;
        for (int32_t i = 0; i < n; i++) {
            int32_t best = 0;
            float bd = INFINITY;
            for (int32_t c = 0; c < k; c++) {
                float d = (c < 1024 ? csq[c] : 0.0f) - 2.0f * D[(size_t)i * k + c];
                if (d < bd) {
                    bd = d;
                    best = c;
                }
            }
            dmin[i] = (double)bd + sq[i];
            changed += assign[i] != best;
            assign[i] = best;
        }
        if (changed == 0)
            break;
        memset(acc, 0, (size_t)k * (size_t)e * sizeof *acc);
        memset(cnt, 0, (size_t)k * sizeof *cnt);
        for (int32_t i = 0; i < n; i++) {
            cnt[assign[i]]++;
            for (int32_t j = 0; j < e; j++)
                acc[(size_t)assign[i] * e + j] += E[(size_t)i * e + j];
        }
        for (int32_t c = 0; c < k; c++) {
            if (cnt[c] == 0) {
                /* An empty cluster restarts at the point farthest from its centre. */
                int32_t far = 0;
                for (int32_t i = 1; i < n; i++)
                    far = dmin[i] > dmin[far] ? i : far;
                memcpy(C + (size_t)c * e, E + (size_t)far * e, (size_t)e * sizeof *C);
                dmin[far] = 0;
                continue;
            }
            for (int32_t j = 0; j < e; j++)
                C[(size_t)c * e + j] = (float)(acc[(size_t)c * e + j] / cnt[c]);
        }
    }
    if (k > 1024)
        rc = OML_EINVAL; /* centre norms above are cached for k <= 1024 only */
done:
    free(C);
    free(D);
    free(acc);
    free(dmin);
    free(cnt);
    free(sq);
    return rc;
}

/* Contingency table of two partitions; returns OML_OK or OML_ENOMEM. */
static int contingency(const int32_t *a, const int32_t *b, int32_t n, int32_t **ta, int32_t *na,
                       int32_t **tb, int32_t *nb, int64_t **tab)
{
    *ta = malloc((size_t)(n > 0 ? n : 1) * sizeof **ta);
    *tb = malloc((size_t)(n > 0 ? n : 1) * sizeof **tb);
    *tab = NULL;
    if (!*ta || !*tb)
        return OML_ENOMEM;
    *na = densify(a, n, *ta);
    *nb = densify(b, n, *tb);
    if (*na < 0 || *nb < 0)
        return OML_ENOMEM;
    *tab = calloc((size_t)(*na > 0 ? *na : 1) * (size_t)(*nb > 0 ? *nb : 1), sizeof **tab);
    if (!*tab)
        return OML_ENOMEM;
    for (int32_t i = 0; i < n; i++)
        (*tab)[(size_t)(*ta)[i] * (size_t)*nb + (size_t)(*tb)[i]]++;
    return OML_OK;
}

double oml_dml_nmi(const int32_t *a, const int32_t *b, int32_t n)
{
    int32_t *ta, *tb, na = 0, nb = 0;
    int64_t *tab;
    double nmi = NAN;
    if (n > 0 && contingency(a, b, n, &ta, &na, &tb, &nb, &tab) == OML_OK) {
        double ha = 0, hb = 0, mi = 0;
        for (int32_t i = 0; i < na; i++) {
            int64_t r = 0;
            for (int32_t j = 0; j < nb; j++)
                r += tab[(size_t)i * nb + j];
            double p = (double)r / n;
            ha -= p > 0 ? p * log(p) : 0;
        }
        for (int32_t j = 0; j < nb; j++) {
            int64_t c = 0;
            for (int32_t i = 0; i < na; i++)
                c += tab[(size_t)i * nb + j];
            double p = (double)c / n;
            hb -= p > 0 ? p * log(p) : 0;
        }
        for (int32_t i = 0; i < na; i++)
            for (int32_t j = 0; j < nb; j++) {
                int64_t v = tab[(size_t)i * nb + j];
                if (v == 0)
                    continue;
                int64_t r = 0, c = 0;
                for (int32_t jj = 0; jj < nb; jj++)
                    r += tab[(size_t)i * nb + jj];
                for (int32_t ii = 0; ii < na; ii++)
                    c += tab[(size_t)ii * nb + j];
                double pij = (double)v / n;
                mi += pij * log(pij * n * n / ((double)r * (double)c));
            }
        nmi = ha + hb > 0 ? 2.0 * mi / (ha + hb) : 1.0;
    }
    if (n > 0) {
        free(ta);
        free(tb);
        free(tab);
    }
    return nmi;
}

double oml_dml_pair_f1(const int32_t *cluster, const int32_t *truth, int32_t n)
{
    int32_t *ta, *tb, na = 0, nb = 0;
    int64_t *tab;
    double f1 = NAN;
    if (n > 0 && contingency(cluster, truth, n, &ta, &na, &tb, &nb, &tab) == OML_OK) {
        double tp = 0, pp = 0, ap = 0;
        for (int32_t i = 0; i < na; i++) {
            int64_t r = 0;
            for (int32_t j = 0; j < nb; j++) {
                int64_t v = tab[(size_t)i * nb + j];
                tp += 0.5 * (double)v * (double)(v - 1);
                r += v;
            }
            pp += 0.5 * (double)r * (double)(r - 1);
        }
        for (int32_t j = 0; j < nb; j++) {
            int64_t c = 0;
            for (int32_t i = 0; i < na; i++)
                c += tab[(size_t)i * nb + j];
            ap += 0.5 * (double)c * (double)(c - 1);
        }
        double P = pp > 0 ? tp / pp : 0, R = ap > 0 ? tp / ap : 0;
        f1 = P + R > 0 ? 2 * P * R / (P + R) : 0.0;
    }
    if (n > 0) {
        free(ta);
        free(tb);
        free(tab);
    }
    return f1;
}

int oml_dml_clustering(const float *E, const int32_t *y, int32_t n, int32_t e, uint64_t seed,
                       double *nmi, double *f1)
{
    int32_t *cls = malloc((size_t)(n > 0 ? n : 1) * sizeof *cls);
    int32_t *as = malloc((size_t)(n > 0 ? n : 1) * sizeof *as);
    int rc = OML_ENOMEM;
    int32_t nc = cls && as ? densify(y, n, cls) : OML_ENOMEM;
    if (nc > 0) {
        rc = oml_dml_kmeans(E, n, e, nc, seed, 100, as);
        if (rc == OML_OK) {
            *nmi = oml_dml_nmi(as, cls, n);
            *f1 = oml_dml_pair_f1(as, cls, n);
        }
    } else if (nc == 0) {
        rc = OML_EINVAL;
    }
    free(cls);
    free(as);
    return rc;
}

int oml_dml_knn_error(const float *G, const int32_t *gy, int32_t ng, const float *Q,
                      const int32_t *qy, int32_t nq, int32_t e, int32_t k, double *error)
{
    if (k < 1 || ng < k || nq < 1)
        return OML_EINVAL;
    float *gsq = sq_norms(G, ng, e);
    float *D = malloc((size_t)BLK * (size_t)ng * sizeof *D);
    uint64_t *keys = malloc((size_t)ng * sizeof *keys);
    int rc = OML_OK;
    if (!gsq || !D || !keys) {
        rc = OML_ENOMEM;
        goto done;
    }
    int64_t wrong = 0;
    for (int32_t q0 = 0; q0 < nq; q0 += BLK) {
        int32_t b = nq - q0 < BLK ? nq - q0 : BLK;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, ng, e, 1.0f, Q + (size_t)q0 * e, e,
                    G, e, 0.0f, D, ng);
        for (int32_t r = 0; r < b; r++) {
            /* ||q||^2 is common to the row and cannot change the order, but
             * the key needs a non-negative value: shift by the row minimum. */
            float lo = INFINITY;
            for (int32_t j = 0; j < ng; j++) {
                float v = gsq[j] - 2.0f * D[(size_t)r * ng + j];
                lo = v < lo ? v : lo;
            }
            for (int32_t j = 0; j < ng; j++)
                keys[j] = key(gsq[j] - 2.0f * D[(size_t)r * ng + j] - lo, j);
            select_smallest(keys, ng, k);
            qsort(keys, (size_t)k, sizeof *keys, cmp_u64);
            /* Majority vote; a tie goes to the tied class seen first (nearest). */
            int32_t best = -1, bestc = 0;
            for (int32_t i = 0; i < k; i++) {
                int32_t lab = gy[(int32_t)(keys[i] & 0xffffffffu)], c = 0;
                for (int32_t t = 0; t < k; t++)
                    c += gy[(int32_t)(keys[t] & 0xffffffffu)] == lab;
                if (c > bestc) {
                    bestc = c;
                    best = lab;
                }
            }
            wrong += best != qy[q0 + r];
        }
    }
    *error = (double)wrong / nq;
done:
    free(gsq);
    free(D);
    free(keys);
    return rc;
}
