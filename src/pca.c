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
