/* catalogue.h - the benchmarks' catalogue of N items derived from
 * Fashion-MNIST (omld-bench --items, oml-ann-bench): item i is image
 * i mod 70,000 with a few grey levels of deterministic noise, its class
 * as label. Header-only. */
#ifndef OML_BENCH_CATALOGUE_H
#define OML_BENCH_CATALOGUE_H

#include <stdint.h>
#include <stdlib.h>

typedef struct catalogue {
    int64_t n;
    int32_t dim;
    float *images;      /* the 70,000 images the items derive from */
    int32_t *labels, n_images;
} catalogue;

/* Item i's features into x: its image plus noise in [-4, 4] grey levels,
 * clamped to [0, 255]: the same on every call. */
static inline void catalogue_item(const catalogue *c, int64_t i, float *x)
{
    const float *img = c->images + (size_t)(i % c->n_images) * (size_t)c->dim;
    uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ull + 1;
    for (int32_t j = 0; j < c->dim; j++) {
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        float v = img[j] + (float)((int)(h >> 60) % 9 - 4);
        x[j] = v < 0 ? 0 : v > 255 ? 255 : v;
    }
}

static inline int32_t catalogue_label(const catalogue *c, int64_t i)
{
    return c->labels[i % c->n_images];
}

#endif
