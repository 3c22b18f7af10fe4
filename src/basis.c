/* basis.c - the input basis row by row in one fixed order (see basis.h). */
#include "basis.h"

#include <math.h>
#include <stddef.h>

#define LANES 8

/* The order basis.h fixes: lanes, their sum, then the tail. */
static float lanes_sum(const float a[LANES])
{
    float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
    return (s0 + s2) + (s1 + s3);
}

static float dot_portable(const float *x, const float *b, int32_t dim)
{
    float acc[LANES] = {0};
    int32_t k = 0;
    for (; k + LANES <= dim; k += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] = fmaf(x[k + l], b[k + l], acc[l]);
    float tail = 0.0f;
    for (; k < dim; k++)
        tail = fmaf(x[k], b[k], tail);
    return lanes_sum(acc) + tail;
}

void oml_basis_project_portable(const float *B, int32_t in, int32_t dim, const float *X,
                                int32_t n, float *out)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < in; j++)
            out[(size_t)i * (size_t)in + (size_t)j] =
                dot_portable(X + (size_t)i * (size_t)dim, B + (size_t)j * (size_t)dim, dim);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static inline float finish_avx2(__m256 v, const float *x,
                                                                     const float *b, int32_t k,
                                                                     int32_t dim)
{
    float a[LANES];
    _mm256_storeu_ps(a, v);
    float tail = 0.0f;
    for (; k < dim; k++)
        tail = fmaf(x[k], b[k], tail);
    return lanes_sum(a) + tail;
}

/* Rows in fours against basis rows in threes: twelve accumulators, seven
 * loads for twelve fused multiply-adds. Leftover rows and basis rows take
 * the one-by-one loop, whose every output is computed the same way. */
__attribute__((target("avx2,fma"))) static void project_avx2(const float *B, int32_t in,
                                                              int32_t dim, const float *X,
                                                              int32_t n, float *out)
{
    int32_t k8 = dim - dim % LANES;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float *x[4];
        for (int r = 0; r < 4; r++)
            x[r] = X + (size_t)(i + r) * (size_t)dim;
        int32_t j = 0;
        for (; j + 3 <= in; j += 3) {
            const float *b0 = B + (size_t)j * (size_t)dim, *b1 = b0 + dim, *b2 = b1 + dim;
            __m256 acc[4][3];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 3; c++)
                    acc[r][c] = _mm256_setzero_ps();
            for (int32_t k = 0; k < k8; k += LANES) {
                __m256 v0 = _mm256_loadu_ps(b0 + k), v1 = _mm256_loadu_ps(b1 + k),
                       v2 = _mm256_loadu_ps(b2 + k);
                for (int r = 0; r < 4; r++) {
                    __m256 xr = _mm256_loadu_ps(x[r] + k);
                    acc[r][0] = _mm256_fmadd_ps(xr, v0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(xr, v1, acc[r][1]);
                    acc[r][2] = _mm256_fmadd_ps(xr, v2, acc[r][2]);
                }
            }
            const float *bs[3] = {b0, b1, b2};
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 3; c++)
                    out[(size_t)(i + r) * (size_t)in + (size_t)(j + c)] =
                        finish_avx2(acc[r][c], x[r], bs[c], k8, dim);
        }
        for (; j < in; j++) {
            const float *b = B + (size_t)j * (size_t)dim;
            for (int r = 0; r < 4; r++) {
                __m256 acc = _mm256_setzero_ps();
                for (int32_t k = 0; k < k8; k += LANES)
                    acc = _mm256_fmadd_ps(_mm256_loadu_ps(x[r] + k), _mm256_loadu_ps(b + k), acc);
                out[(size_t)(i + r) * (size_t)in + (size_t)j] = finish_avx2(acc, x[r], b, k8, dim);
            }
        }
    }
    for (; i < n; i++) {
        const float *xi = X + (size_t)i * (size_t)dim;
        for (int32_t j = 0; j < in; j++) {
            const float *b = B + (size_t)j * (size_t)dim;
            __m256 acc = _mm256_setzero_ps();
            for (int32_t k = 0; k < k8; k += LANES)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(xi + k), _mm256_loadu_ps(b + k), acc);
            out[(size_t)i * (size_t)in + (size_t)j] = finish_avx2(acc, xi, b, k8, dim);
        }
    }
}
#endif

void oml_basis_project(const float *B, int32_t in, int32_t dim, const float *X, int32_t n,
                       float *out)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        project_avx2(B, in, dim, X, n, out);
        return;
    }
#endif
    oml_basis_project_portable(B, in, dim, X, n, out);
}
