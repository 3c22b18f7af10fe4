/* batch_ref.c - see batch_ref.h. */
#include "batch_ref.h"

#include <math.h>
#include <string.h>

void oml_test_batch_ref_forward(const oml_batch_layout *lay, const double *p, const double *x,
                                double *f, signed char *signs)
{
    double h[OML_TEST_BATCH_MAXW], nh[OML_TEST_BATCH_MAXW];
    int32_t d = lay->dim, hd = lay->hidden, e = lay->emb;
    for (int j = 0; j < d; j++)
        h[j] = x[j] - p[lay->mu + j];
    for (int l = 1; l <= lay->depth; l++) {
        int32_t win = oml_batch_width(lay, l - 1);
        const double *W = p + lay->w[l];
        for (int r = 0; r < hd; r++) {
            double a = 0;
            for (int c = 0; c < win; c++)
                a += W[r * win + c] * h[c];
            if (signs)
                signs[(l - 1) * hd + r] = a > 0 ? 1 : -1;
            nh[r] = a > 0 ? a : 0;
        }
        memcpy(h, nh, sizeof(double) * (size_t)hd);
    }
    int32_t w = oml_batch_width(lay, lay->depth);
    const double *T = p + lay->theta;
    double nrm = 0;
    for (int r = 0; r < e; r++) {
        f[r] = 0;
        for (int c = 0; c < w; c++)
            f[r] += T[r * w + c] * h[c];
        nrm += f[r] * f[r];
    }
    nrm = lay->normalize ? sqrt(nrm) : 1.0;
    for (int r = 0; r < e; r++)
        f[r] = nrm > 0 ? f[r] / nrm : 0.0;
}
