/* standardize.c - z-scoring (standardize.h). */
#include "standardize.h"

#include <math.h>
#include <stdlib.h>

int oml_standardize_fit(const float *X, int32_t dim, const int32_t *rows, int32_t n_rows,
                        float *mean, float *sd)
{
    if (n_rows < 1)
        return -1;
    double *m = calloc((size_t)dim, sizeof *m), *q = calloc((size_t)dim, sizeof *q);
    if (m == NULL || q == NULL) {
        free(m);
        free(q);
        return -1;
    }
    /* Two passes: a constant feature then gets exactly sd 0. */
    for (int32_t i = 0; i < n_rows; i++) {
        const float *x = X + (size_t)(rows ? rows[i] : i) * dim;
        for (int32_t j = 0; j < dim; j++)
            m[j] += x[j];
    }
    for (int32_t j = 0; j < dim; j++)
        m[j] /= n_rows;
    for (int32_t i = 0; i < n_rows; i++) {
        const float *x = X + (size_t)(rows ? rows[i] : i) * dim;
        for (int32_t j = 0; j < dim; j++)
            q[j] += (x[j] - m[j]) * (x[j] - m[j]);
    }
    for (int32_t j = 0; j < dim; j++) {
        double s = sqrt(q[j] / n_rows);
        mean[j] = (float)m[j];
        sd[j] = s > 0.0 && (float)s > 0.0f ? (float)s : 1.0f;
    }
    free(m);
    free(q);
    return 0;
}

void oml_standardize_apply(float *X, int32_t n, int32_t dim, const float *mean, const float *sd)
{
    for (int32_t i = 0; i < n; i++) {
        float *x = X + (size_t)i * dim;
        for (int32_t j = 0; j < dim; j++)
            x[j] = (x[j] - mean[j]) / sd[j];
    }
}
