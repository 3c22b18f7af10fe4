/* neighbor.h - an index row with a distance (or a dot product), and the
 * bounded min-heap that keeps the largest values seen: index.c's
 * approximate dot products and hlist.c's scan of codes share it. */
#ifndef OML_NEIGHBOR_H
#define OML_NEIGHBOR_H

#include <stdint.h>

typedef struct oml_neighbor {
    int32_t row; /* index row, 0..n-1 */
    float dist;  /* D in [0, 2]; in a min-heap of dot products, the dot product */
} oml_neighbor;

/* Min-heap on dist: h[0].dist is the smallest kept. */
static inline void oml_minheap_down(oml_neighbor *h, int32_t cnt, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < cnt && h[l].dist < h[w].dist)
            w = l;
        if (r < cnt && h[r].dist < h[w].dist)
            w = r;
        if (w == i)
            return;
        oml_neighbor t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static inline void oml_minheap_up(oml_neighbor *h, int32_t i)
{
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!(h[i].dist < h[p].dist))
            return;
        oml_neighbor t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

#endif
