/* ivf.c - spherical k-means lists (see ivf.h).
 *
 * DESIGN: the rows are one head's embeddings, unit vectors, so the
 * nearest centroid is the one with the largest dot product, and a
 * centroid is the normalised mean of its rows. Training runs KMEANS_ITERS
 * rounds on a strided sample, each assignment one GEMM per chunk of CHUNK
 * rows against all centroids. */
#include "ivf.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define KMEANS_ITERS 6
#define SAMPLE_PER_LIST 64
#define CHUNK 4096

static void normalise(float *v, int32_t d)
{
    double s = 0;
    for (int32_t j = 0; j < d; j++)
        s += (double)v[j] * v[j];
    if (s <= 0)
        return;
    float inv = (float)(1.0 / sqrt(s));
    for (int32_t j = 0; j < d; j++)
        v[j] *= inv;
}

/* argmax over each row of dots (m, n_lists); ties: the smaller list. */
static void argmax_rows(const float *dots, size_t m, int32_t n_lists, int32_t *out)
{
    for (size_t i = 0; i < m; i++) {
        const float *r = dots + i * (size_t)n_lists;
        int32_t best = 0;
        for (int32_t l = 1; l < n_lists; l++)
            if (r[l] > r[best])
                best = l;
        out[i] = best;
    }
}

int oml_ivf_assign(const float *rows, size_t n, int32_t d, const float *centroids,
                   int32_t n_lists, int32_t *list_of)
{
    size_t chunk = n < CHUNK ? (n ? n : 1) : CHUNK;
    float *dots = malloc(chunk * (size_t)n_lists * sizeof *dots);
    if (dots == NULL)
        return OML_ENOMEM;
    for (size_t i = 0; i < n; i += chunk) {
        size_t m = n - i < chunk ? n - i : chunk;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, n_lists, d, 1.0f,
                    rows + i * (size_t)d, d, centroids, d, 0.0f, dots, n_lists);
        argmax_rows(dots, m, n_lists, list_of + i);
    }
    free(dots);
    return OML_OK;
}

int oml_ivf_train(const float *rows, size_t n, int32_t d, int32_t n_lists, float *centroids)
{
    if (n_lists < 1 || n < (size_t)n_lists)
        return OML_EINVAL;
    size_t s = (size_t)n_lists * SAMPLE_PER_LIST;
    if (s > n)
        s = n;
    float *sample = malloc(s * (size_t)d * sizeof *sample);
    int32_t *of = malloc(s * sizeof *of);
    double *sum = malloc((size_t)n_lists * (size_t)d * sizeof *sum);
    size_t *cnt = malloc((size_t)n_lists * sizeof *cnt);
    int rc = sample && of && sum && cnt ? OML_OK : OML_ENOMEM;
    if (rc == OML_OK) {
        for (size_t i = 0; i < s; i++) /* every (n/s)-th row */
            memcpy(sample + i * (size_t)d, rows + (i * n / s) * (size_t)d,
                   (size_t)d * sizeof *sample);
        for (int32_t l = 0; l < n_lists; l++) /* spread over the sample */
            memcpy(centroids + (size_t)l * (size_t)d,
                   sample + ((size_t)l * s / (size_t)n_lists) * (size_t)d,
                   (size_t)d * sizeof *centroids);
    }
    for (int it = 0; rc == OML_OK && it < KMEANS_ITERS; it++) {
        rc = oml_ivf_assign(sample, s, d, centroids, n_lists, of);
        if (rc != OML_OK)
            break;
        memset(sum, 0, (size_t)n_lists * (size_t)d * sizeof *sum);
        memset(cnt, 0, (size_t)n_lists * sizeof *cnt);
        for (size_t i = 0; i < s; i++) {
            double *t = sum + (size_t)of[i] * (size_t)d;
            const float *r = sample + i * (size_t)d;
            for (int32_t j = 0; j < d; j++)
                t[j] += r[j];
            cnt[of[i]]++;
        }
        for (int32_t l = 0; l < n_lists; l++) {
            if (cnt[l] == 0) /* an empty list keeps its centroid */
                continue;
            float *c = centroids + (size_t)l * (size_t)d;
            for (int32_t j = 0; j < d; j++)
                c[j] = (float)(sum[(size_t)l * (size_t)d + (size_t)j] / (double)cnt[l]);
        }
        for (int32_t l = 0; l < n_lists; l++)
            normalise(centroids + (size_t)l * (size_t)d, d);
    }
    free(sample);
    free(of);
    free(sum);
    free(cnt);
    return rc;
}
