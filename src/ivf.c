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
/* The dot products of a chunk stay under this many bytes: an assignment
 * runs once a block of rows at every rebuild (three heads, 244 blocks at
 * a million rows), and a larger scratch is a fresh mapping, zeroed by the
 * kernel, every time once glibc's mmap threshold is fixed (omld fixes it:
 * daemon/view.c), which cost the indexer ~2 ms a call at 500 lists. */
#define DOTS_BYTES (1u << 20)

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

/* The scalar argmax: the first position of the largest (a NaN is never
 * larger; r[0] NaN: 0). */
static int32_t first_max_portable(const float *r, int32_t n)
{
    int32_t best = 0;
    for (int32_t l = 1; l < n; l++)
        if (r[l] > r[best])
            best = l;
    return best;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_KERNEL 1

/* The same answer in two vectorised passes: the largest value (a maximum
 * is exact in any order; max_ps(x, m) keeps m when x is NaN, as the scalar
 * comparison does), then its first position. The scalar loop's compare
 * and move chain through a load each step: assigning a million rows to
 * 500 lists was ~1 s a head of a restart's first view. */
__attribute__((target("avx2"))) static int32_t first_max_avx2(const float *r, int32_t n)
{
    __m256 m0 = _mm256_set1_ps(r[0]), m1 = m0, m2 = m0, m3 = m0;
    int32_t l = 0;
    for (; l + 32 <= n; l += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(r + l), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(r + l + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(r + l + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(r + l + 24), m3);
    }
    float v[8];
    _mm256_storeu_ps(v, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    float m = v[0];
    for (int i = 1; i < 8; i++)
        m = v[i] > m ? v[i] : m;
    for (; l < n; l++)
        m = r[l] > m ? r[l] : m;
    __m256 mm = _mm256_set1_ps(m);
    for (l = 0; l + 8 <= n; l += 8) {
        int bits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(r + l), mm, _CMP_EQ_OQ));
        if (bits)
            return l + __builtin_ctz((unsigned)bits);
    }
    for (; l < n; l++)
        if (r[l] == m)
            return l;
    return 0;
}
#endif

int32_t oml_ivf_first_max(const float *r, int32_t n)
{
#ifdef HAVE_AVX2_KERNEL
    if (n >= 32 && r[0] == r[0] && __builtin_cpu_supports("avx2"))
        return first_max_avx2(r, n);
#endif
    return first_max_portable(r, n);
}

int32_t oml_ivf_first_max_portable(const float *r, int32_t n)
{
    return first_max_portable(r, n);
}

/* argmax over each row of dots (m, n_lists); ties: the smaller list. */
static void argmax_rows(const float *dots, size_t m, int32_t n_lists, int32_t *out)
{
    for (size_t i = 0; i < m; i++)
        out[i] = oml_ivf_first_max(dots + i * (size_t)n_lists, n_lists);
}

int oml_ivf_assign(const float *rows, size_t n, int32_t d, const float *centroids,
                   int32_t n_lists, int32_t *list_of)
{
    size_t fit = DOTS_BYTES / ((size_t)(n_lists > 0 ? n_lists : 1) * sizeof(float));
    size_t most = fit < 64 ? 64 : fit < CHUNK ? fit : CHUNK;
    size_t chunk = n < most ? (n ? n : 1) : most;
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
