/* depth.c - how many candidates a fresh view re-ranks (depth.h). */
#include "depth.h"

#include <stdlib.h>

#include "serve.h"

/* Each sample's counts weigh this much less at the next: about 20
 * samples (600 neighbours at k 10 over three heads) carry the figure. */
#define DECAY 0.95
/* Neighbours (decayed) before the counts may move the step. */
#define MIN_TOTAL 100.0

static const int32_t halves[OMLD_DEPTH_STEPS] = {2, 3, 4, 6};

static int32_t scaled(int32_t k_c, int32_t half)
{
    int64_t d = (int64_t)k_c * half / 2;
    return d < OML_SERVE_MAX_K ? (int32_t)d : OML_SERVE_MAX_K;
}

int32_t omld_depth_at(int step, int32_t k_c)
{
    step = step < 0 ? 0 : step >= OMLD_DEPTH_STEPS ? OMLD_DEPTH_STEPS - 1 : step;
    return scaled(k_c, halves[step]);
}

int32_t omld_depth_deep(int32_t k_c)
{
    return scaled(k_c, OMLD_DEPTH_DEEP);
}

void omld_depth_observe(omld_depth *d, const int64_t *hits, int64_t total, double target)
{
    d->total = d->total * DECAY + (double)total;
    for (int s = 0; s < OMLD_DEPTH_STEPS; s++)
        d->hits[s] = d->hits[s] * DECAY + (double)hits[s];
    atomic_fetch_add(&d->samples, 1);
    if (!(d->total >= MIN_TOTAL))
        return;
    int step = OMLD_DEPTH_STEPS - 1;
    for (int s = 0; s < OMLD_DEPTH_STEPS; s++)
        if (d->hits[s] >= target * d->total) {
            step = s;
            break;
        }
    atomic_store(&d->step, step);
    atomic_store(&d->share, (uint64_t)(1e6 * d->hits[step] / d->total));
}
