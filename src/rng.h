/* rng.h - a small seeded random number generator (xoshiro256**).
 *
 * The state is a plain struct owned by its user (learner, closure, trainer);
 * there is no global state, so a run is reproducible from its seed and the
 * state can be saved and restored bit-exactly. */
#ifndef OML_RNG_H
#define OML_RNG_H

#include <stdint.h>

typedef struct oml_rng {
    uint64_t s[4];
} oml_rng;

void oml_rng_seed(oml_rng *r, uint64_t seed);
uint64_t oml_rng_next(oml_rng *r);
/* Uniform in [0, n); n > 0. Unbiased (rejection sampling). */
uint64_t oml_rng_below(oml_rng *r, uint64_t n);
/* Uniform float in [0, 1). */
float oml_rng_uniform(oml_rng *r);
/* Standard normal (Box-Muller). */
float oml_rng_normal(oml_rng *r);

#endif
