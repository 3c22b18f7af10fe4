/* exact_bits.c - what shorter codes leave to an exact re-rank (see
 * exact_bits.h). Scalar double throughout. */
#include "exact_bits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* v (e) coded with `levels` a side: its reconstruction into vh, and
 * ||v - vh||, ||vh||. */
static void quant(const double *v, int32_t e, int levels, double *vh, double *err, double *norm)
{
    double amax = 0;
    for (int32_t j = 0; j < e; j++)
        amax = fabs(v[j]) > amax ? fabs(v[j]) : amax;
    double s = amax / levels, ee = 0, nn = 0;
    for (int32_t j = 0; j < e; j++) {
        vh[j] = (s > 0 ? nearbyint(v[j] / s) : 0) * s;
        ee += (v[j] - vh[j]) * (v[j] - vh[j]);
        nn += vh[j] * vh[j];
    }
    *err = sqrt(ee);
    *norm = sqrt(nn);
}

static int by_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

int exact_bits_report(const oml_index *ix, int head, const float *Q, int32_t n_q, int32_t k)
{
    if (ix->cs == NULL || k < 1 || k > ix->n)
        return 1;
    size_t n = (size_t)ix->n, e = (size_t)ix->emb;
    const float *cols = ix->emb_cols + (size_t)head * n * e, *dir = ix->cs[head].dir;
    double *t = malloc(n * sizeof *t), *rnorm = malloc(n * sizeof *rnorm);
    double *res = malloc(e * sizeof *res), *rh = malloc(n * e * sizeof *rh);
    double *rerr = malloc(n * sizeof *rerr), *lo = malloc(n * sizeof *lo), *up = malloc(n * sizeof *up);
    double qp[1024], qh[1024];
    int ok = t && rnorm && res && rh && rerr && lo && up && e <= 1024;
    static const int levels[2] = {127, 7};
    static const char *names[2] = {"int8 (127 levels a side)", "4-bit scalar (7 levels a side)"};
    for (int c = 0; ok && c < 2; c++) {
        for (size_t i = 0; i < n; i++) { /* the split codescan.c makes */
            double tt = 0, rr = 0, nh;
            for (size_t j = 0; j < e; j++)
                tt += (double)cols[j * n + i] * (double)dir[j];
            for (size_t j = 0; j < e; j++) {
                res[j] = (double)cols[j * n + i] - tt * (double)dir[j];
                rr += res[j] * res[j];
            }
            t[i] = tt;
            rnorm[i] = sqrt(rr);
            quant(res, (int32_t)e, levels[c], rh + i * e, &rerr[i], &nh);
        }
        double kept = 0, kept_max = 0;
        for (int32_t qi = 0; qi < n_q; qi++) {
            const float *q = Q + ((size_t)qi * (size_t)ix->heads + (size_t)head) * e;
            double tq = 0, qerr, qnorm;
            for (size_t j = 0; j < e; j++)
                tq += (double)q[j] * (double)dir[j];
            for (size_t j = 0; j < e; j++)
                qp[j] = (double)q[j] - tq * (double)dir[j];
            quant(qp, (int32_t)e, 127, qh, &qerr, &qnorm);
            for (size_t i = 0; i < n; i++) {
                double d = t[i] * tq, sl = qerr * rnorm[i] + qnorm * rerr[i] + 1e-5;
                for (size_t j = 0; j < e; j++)
                    d += qh[j] * rh[i * e + j];
                lo[i] = d - sl;
                up[i] = d + sl;
            }
            qsort(lo, n, sizeof *lo, by_desc);
            double floor_at = lo[k - 1]; /* the k-th largest dot - bound */
            int m = 0;
            for (size_t i = 0; i < n; i++)
                m += up[i] >= floor_at;
            kept += m;
            kept_max = m > kept_max ? m : kept_max;
        }
        printf("exact first pass by %s codes (head %d, %d queries, k = %d): rows left to "
               "re-rank mean %.1f, max %.0f of %zu\n", names[c], head, (int)n_q, (int)k,
               kept / n_q, kept_max, n);
    }
    free(t);
    free(rnorm);
    free(res);
    free(rh);
    free(rerr);
    free(lo);
    free(up);
    return ok ? 0 : 1;
}
