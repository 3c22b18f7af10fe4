/* blobs.c - see blobs.h. */
#include "blobs.h"

void oml_test_blobs(float *x, int n, int dim, int classes, unsigned seed, float centre,
                    float scale)
{
    unsigned s = seed;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < dim; j++) {
            s = s * 1103515245u + 12345u;
            float noise = ((float)((s >> 8) & 0xffff) / 65536.0f - centre) * scale;
            x[i * dim + j] = (j % classes == i % classes ? 1.0f : 0.0f) + noise;
        }
}
