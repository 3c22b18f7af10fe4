/* pca.c - top-k principal directions via the covariance and LAPACK ssyevr_
 * (the same computation as the live learner's PCA start, factored out). */
#include "pca.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define PCA_CHUNK 2048

/* LAPACK through OpenBLAS: eigenpairs il..iu of a symmetric matrix. */
extern void ssyevr_(const char *jobz, const char *range, const char *uplo, const int *n,
                    float *a, const int *lda, const float *vl, const float *vu, const int *il,
                    const int *iu, const float *abstol, int *m, float *w, float *z,
                    const int *ldz, int *isuppz, float *work, const int *lwork, int *iwork,
                    const int *liwork, int *info);

int oml_pca_components(const float *X, const int32_t *rows, int32_t n, int32_t d,
                       const float *mu, int32_t k, float *out, float *var, float *noise)
{
    if (n < 1 || d < 1 || k < 1 || k > d)
        return OML_EINVAL;
    size_t dd = (size_t)d * (size_t)d;
    int32_t chunk = n < PCA_CHUNK ? n : PCA_CHUNK;
    float *xc = malloc((size_t)chunk * (size_t)d * sizeof(float));
    float *cov = malloc(dd * sizeof(float));
    float *z = malloc((size_t)d * (size_t)k * sizeof(float));
    float *w = malloc((size_t)d * sizeof(float));
    int *isuppz = malloc(2 * (size_t)k * sizeof(int));
    int rc = OML_ENOMEM;
    float *work = NULL;
    int *iwork = NULL;
    if (!xc || !cov || !z || !w || !isuppz)
        goto done;
    /* cov = sum over chunks of xc^T xc / n; row-major upper == column-major lower. */
    for (int32_t i0 = 0; i0 < n; i0 += chunk) {
        int32_t b = n - i0 < chunk ? n - i0 : chunk;
        for (int32_t i = 0; i < b; i++) {
            const float *x = X + (size_t)(rows ? rows[i0 + i] : i0 + i) * d;
            float *o = xc + (size_t)i * d;
            for (int32_t j = 0; j < d; j++)
                o[j] = mu ? x[j] - mu[j] : x[j];
        }
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, d, b, 1.0f / (float)n, xc, d,
                    i0 == 0 ? 0.0f : 1.0f, cov, d);
    }

    double trace = 0; /* total variance, before ssyevr overwrites cov */
    for (int32_t j = 0; j < d; j++)
        trace += cov[(size_t)j * d + j];

    int nn = d, il = d - k + 1, iu = d, m = 0, info = 0, lwork = -1, liwork = -1, iw = 0;
    float vl = 0, vu = 0, abstol = 0, wq = 0;
    ssyevr_("V", "I", "L", &nn, cov, &nn, &vl, &vu, &il, &iu, &abstol, &m, w, z, &nn, isuppz,
            &wq, &lwork, &iw, &liwork, &info);
    lwork = (int)wq;
    liwork = iw;
    work = malloc((size_t)(lwork > 1 ? lwork : 1) * sizeof(float));
    iwork = malloc((size_t)(liwork > 1 ? liwork : 1) * sizeof(int));
    if (!work || !iwork)
        goto done;
    ssyevr_("V", "I", "L", &nn, cov, &nn, &vl, &vu, &il, &iu, &abstol, &m, w, z, &nn, isuppz,
            work, &lwork, iwork, &liwork, &info);
    if (info != 0 || m != k) {
        rc = OML_EIO;
        goto done;
    }
    /* z is column-major (d, k) in ascending eigenvalue order. */
    for (int32_t r = 0; r < k; r++) {
        const float *src = z + (size_t)(k - 1 - r) * d;
        float *dst = out + (size_t)r * d;
        int32_t big = 0;
        for (int32_t j = 1; j < d; j++)
            if (fabsf(src[j]) > fabsf(src[big]))
                big = j;
        float s = src[big] < 0.0f ? -1.0f : 1.0f;
        for (int32_t j = 0; j < d; j++)
            dst[j] = s * src[j];
        if (var)
            var[r] = w[k - 1 - r];
        trace -= w[k - 1 - r];
    }
    if (noise)
        *noise = k < d && trace > 0 ? (float)(trace / (d - k)) : 0.0f;
    rc = OML_OK;
done:
    free(xc);
    free(cov);
    free(z);
    free(w);
    free(isuppz);
    free(work);
    free(iwork);
    return rc;
}

/* The share of the rows rows[r] with r = parity mod 2 that P (k, d) keeps. */
static double kept_share(const float *X, int32_t n, int32_t d, int32_t k, const float *P,
                         int parity, float *proj)
{
    double kept = 0.0, all = 0.0;
    for (int32_t i = parity; i < n; i += 2) {
        const float *x = X + (size_t)i * d;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, k, d, 1.0f, P, d, x, 1, 0.0f, proj, 1);
        kept += (double)cblas_sdot(k, proj, 1, proj, 1);
        all += (double)cblas_sdot(d, x, 1, x, 1);
    }
    return all > 0.0 ? kept / all : 1.0;
}

/* oml_pca_heldout_ratio with fewer fitted rows h than dimensions, from the
 * h x h side: with A (h, d) the even rows, G = A A^T's eigenpairs
 * (lambda_i, u_i) give the directions v_i = A^T u_i / sqrt(lambda_i), so a
 * fitted row keeps sum_i lambda_i in all and an odd row b keeps
 * sum_i (u_i^T A b)^2 / lambda_i. Costs O(h^2 d) where the d x d side
 * costs O(h d^2 + d^3). */
static int heldout_ratio_dual(const float *X, int32_t n, int32_t d, int32_t k, double *ratio)
{
    int32_t h = (n + 1) / 2, hb = n / 2, kk = k < h ? k : h;
    float *At = malloc((size_t)d * h * sizeof *At);   /* A^T: the rows of the dual PCA */
    float *B = malloc((size_t)hb * d * sizeof *B);
    float *U = malloc((size_t)kk * h * sizeof *U);
    float *var = malloc((size_t)kk * sizeof *var);
    float *C = malloc((size_t)h * hb * sizeof *C);    /* A B^T */
    float *UC = malloc((size_t)kk * hb * sizeof *UC);
    int rc = At && B && U && var && C && UC ? OML_OK : OML_ENOMEM;
    double fit_all = 0.0, held_all = 0.0;
    for (int32_t i = 0; rc == OML_OK && i < n; i++) {
        const float *x = X + (size_t)i * d;
        if (i % 2 == 0)
            for (int32_t j = 0; j < d; j++)
                At[(size_t)j * h + i / 2] = x[j];
        else
            memcpy(B + (size_t)(i / 2) * d, x, (size_t)d * sizeof *B);
        double e = (double)cblas_sdot(d, x, 1, x, 1);
        if (i % 2 == 0)
            fit_all += e;
        else
            held_all += e;
    }
    if (rc == OML_OK)
        rc = oml_pca_components(At, NULL, d, h, NULL, kk, U, var, NULL); /* var = lambda / d */
    if (rc == OML_OK) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, h, hb, d, 1.0f, At, h, B, d, 0.0f, C,
                    hb);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kk, hb, h, 1.0f, U, h, C, hb,
                    0.0f, UC, hb);
        double fit = 0.0, held = 0.0;
        for (int32_t i = 0; i < kk; i++) {
            double lambda = (double)var[i] * d;
            if (!(lambda > 0.0))
                continue;
            fit += lambda;
            for (int32_t b = 0; b < hb; b++)
                held += (double)UC[(size_t)i * hb + b] * UC[(size_t)i * hb + b] / lambda;
        }
        double f_fit = fit_all > 0.0 ? fit / fit_all : 1.0;
        double f_held = held_all > 0.0 ? held / held_all : 1.0;
        *ratio = f_fit > 0.0 ? f_held / f_fit : 1.0;
    }
    free(At);
    free(B);
    free(U);
    free(var);
    free(C);
    free(UC);
    return rc;
}

int oml_pca_heldout_ratio(const float *X, int32_t n, int32_t d, int32_t k, double *ratio)
{
    if (n < 2 || k < 1 || k > d)
        return OML_EINVAL;
    int32_t half = (n + 1) / 2;
    if (half < d)
        return heldout_ratio_dual(X, n, d, k, ratio);
    int32_t *even = malloc((size_t)half * sizeof *even);
    float *P = malloc(((size_t)k * d + (size_t)k) * sizeof *P);
    int rc = even && P ? OML_OK : OML_ENOMEM;
    for (int32_t i = 0; rc == OML_OK && i < half; i++)
        even[i] = 2 * i;
    if (rc == OML_OK)
        rc = oml_pca_components(X, even, half, d, NULL, k, P, NULL, NULL);
    if (rc == OML_OK) {
        double fit = kept_share(X, n, d, k, P, 0, P + (size_t)k * d);
        double held = kept_share(X, n, d, k, P, 1, P + (size_t)k * d);
        *ratio = fit > 0.0 ? held / fit : 1.0;
    }
    free(even);
    free(P);
    return rc;
}

int oml_pca_passthrough_fits(int32_t dim, int32_t depth, int32_t hidden, int32_t emb)
{
    return emb <= dim && (depth == 0 || hidden >= 2 * emb);
}

void oml_pca_passthrough_first(float *W, int32_t d, const float *P, int32_t emb, int32_t k)
{
    for (int32_t r = 0; r < 2 * emb; r++) {
        if (r % emb >= k)
            continue;
        const float *pr = P + (size_t)(r % emb) * d;
        float sign = r < emb ? 1.0f : -1.0f;
        float *row = W + (size_t)r * d;
        for (int32_t j = 0; j < d; j++)
            row[j] = sign * pr[j];
    }
}

void oml_pca_passthrough_deeper(float *W, int32_t w, int32_t emb)
{
    for (int32_t r = 0; r < 2 * emb; r++) {
        float *row = W + (size_t)r * w;
        memset(row, 0, (size_t)w * sizeof *row);
        row[r] = 1.0f;
    }
}

void oml_pca_passthrough_head(float *theta, int32_t hidden, int32_t emb, int32_t k)
{
    memset(theta, 0, (size_t)emb * (size_t)hidden * sizeof *theta);
    for (int32_t r = 0; r < k; r++) {
        theta[(size_t)r * hidden + r] = 1.0f;
        theta[(size_t)r * hidden + emb + r] = -1.0f;
    }
}
