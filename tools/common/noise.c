/* noise.c - appended noise features (noise.h). */
#include "noise.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

double oml_pooled_sd(const float *X, int32_t n, int32_t dim)
{
    if (n < 1 || dim < 1)
        return 0.0;
    size_t m = (size_t)n * (size_t)dim;
    double sum = 0.0, sq = 0.0;
    for (size_t i = 0; i < m; i++)
        sum += X[i];
    double mean = sum / (double)m;
    for (size_t i = 0; i < m; i++)
        sq += (X[i] - mean) * (X[i] - mean);
    return sqrt(sq / (double)m);
}

int oml_noise_append(const float *X, int32_t n, int32_t dim, int32_t n_noise, float scale,
                     uint64_t seed, float **out)
{
    *out = NULL;
    if (n_noise < 0 || !(scale >= 0.0f) || !isfinite(scale))
        return OML_EINVAL;
    double sd = oml_pooled_sd(X, n, dim);
    int32_t d2 = dim + n_noise;
    float *Y = malloc((size_t)(n > 0 ? n : 1) * (size_t)d2 * sizeof *Y);
    if (Y == NULL)
        return OML_ENOMEM;
    oml_rng rng;
    oml_rng_seed(&rng, seed ^ 0x6015e5ULL);
    float s = (float)(scale * sd);
    for (int32_t i = 0; i < n; i++) {
        memcpy(Y + (size_t)i * d2, X + (size_t)i * dim, (size_t)dim * sizeof *Y);
        for (int32_t j = 0; j < n_noise; j++)
            Y[(size_t)i * d2 + dim + j] = s * oml_rng_normal(&rng);
    }
    *out = Y;
    return OML_OK;
}
