/* catalogue.h - the benchmarks' catalogue of N items derived from
 * Fashion-MNIST (omld-bench --items, oml-ann-bench), item i from image
 * i mod 70,000 (its class as label) and copy v = i / 70,000 of it, in one
 * of three kinds:
 *   shifted  copy v moved by the v-th offset of [-2, 2]^2 (nearest first,
 *            copy 0 unmoved; zeros shifted in), plus a few grey levels of
 *            noise. A pixel's move takes an image farther (5.2 on average)
 *            than its 10th nearest other image (4.2), so an item's
 *            neighbours are other images moved alike: 1M distinct items
 *            with the neighbourhoods of real images. The default.
 *   copies   the image plus a few grey levels of noise: an item's nearest
 *            are its own copies (distance ~0.4 against ~3.6), which any
 *            index finds in the first list it scans.
 *   noise    the image plus noise of +-4 whole units (1,020 grey levels),
 *            clamped to [0, 255]: what `copies` made before stop 28 by
 *            mistake (the images are in [0, 1], idx.c), kept to compare
 *            with those figures. The noise drowns the images (the start's
 *            leave-one-out kNN error 0.73-0.76 against 0.13-0.15) and no
 *            item has a near neighbour: the hardest case for an index.
 * Header-only. */
#ifndef OML_BENCH_CATALOGUE_H
#define OML_BENCH_CATALOGUE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { CATALOGUE_SHIFTED, CATALOGUE_COPIES, CATALOGUE_NOISE };

typedef struct catalogue {
    int64_t n;
    int32_t dim;
    int kind;           /* CATALOGUE_* */
    float *images;      /* the 70,000 images the items derive from, in [0, 1] */
    int32_t *labels, n_images;
} catalogue;

/* The kind a name gives (shifted, copies, noise), or -1. */
static inline int catalogue_kind(const char *name)
{
    return strcmp(name, "shifted") == 0  ? CATALOGUE_SHIFTED
           : strcmp(name, "copies") == 0 ? CATALOGUE_COPIES
           : strcmp(name, "noise") == 0  ? CATALOGUE_NOISE
                                         : -1;
}

static inline const char *catalogue_name(int kind)
{
    return kind == CATALOGUE_SHIFTED ? "shifted" : kind == CATALOGUE_COPIES ? "copies" : "noise";
}

/* The 25 offsets of [-2, 2]^2, by distance from (0, 0), then row, column. */
static const int8_t catalogue_offsets[25][2] = {
    {0, 0},   {-1, 0}, {0, -1}, {0, 1},   {1, 0},  {-1, -1}, {-1, 1}, {1, -1}, {1, 1},
    {-2, 0},  {0, -2}, {0, 2},  {2, 0},   {-2, -1}, {-2, 1}, {-1, -2}, {-1, 2}, {1, -2},
    {1, 2},   {2, -1}, {2, 1},  {-2, -2}, {-2, 2}, {2, -2},  {2, 2}};

/* Item i's features into x (dim, a square image): the same on every call. */
static inline void catalogue_item(const catalogue *c, int64_t i, float *x)
{
    const float *img = c->images + (size_t)(i % c->n_images) * (size_t)c->dim;
    int32_t side = 1;
    while (side * side < c->dim)
        side++;
    int dy = 0, dx = 0;
    if (c->kind == CATALOGUE_SHIFTED && side * side == c->dim) {
        const int8_t *o = catalogue_offsets[(i / c->n_images) % 25];
        dy = o[0];
        dx = o[1];
    }
    uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ull + 1;
    for (int32_t j = 0; j < c->dim; j++) {
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdull;
        float grey = (float)((int)(h >> 60) % 9 - 4);
        if (c->kind == CATALOGUE_NOISE) {
            float v = img[j] + grey;
            x[j] = v < 0 ? 0 : v > 255 ? 255 : v;
            continue;
        }
        int32_t y0 = j / side - dy, x0 = j % side - dx;
        float v = (y0 >= 0 && y0 < side && x0 >= 0 && x0 < side ? img[y0 * side + x0] : 0.0f) +
                  grey / 255.0f;
        x[j] = v < 0 ? 0 : v > 1 ? 1 : v;
    }
}

/* The benchmarks' query q (omld-bench's latency and recall@10,
 * oml-ann-bench's): a stored item with one feature raised by 1, so not an
 * exact copy of one. */
static inline void catalogue_query(const catalogue *c, int q, float *x)
{
    catalogue_item(c, (int64_t)q * 7919 + 3, x);
    x[q % c->dim] += 1.0f;
}

static inline int32_t catalogue_label(const catalogue *c, int64_t i)
{
    return c->labels[i % c->n_images];
}

#endif
