/* learner_int.h - what learner.c and learner_start.c share: the net's input
 * row and the local hedge's reference sample. Not part of the API. */
#ifndef OML_LEARNER_INT_H
#define OML_LEARNER_INT_H

#include "learner.h"

/* The net's input row for x: x - mu, times 1/sd when standardised. */
static inline void oml__learner_input_row(const oml_learner *l, const float *x, float *out)
{
    const oml_net_layout *lay = &l->lay;
    const float *mu = l->params + lay->mu;
    for (int32_t j = 0; j < lay->dim; j++)
        out[j] = (x[j] - mu[j]) * (lay->has_scale ? l->params[lay->scale + j] : 1.0f);
}

/* OML_HEDGE_LOCAL: samples the reference from the stored items X (n, dim)
 * and records where it sits at the start. OML_ENOMEM. */
int oml__learner_ref_prepare(oml_learner *l, const float *X, const int32_t *at, int32_t n);

#endif
