/* hlist_keep.c - the rows a scan of codes keeps (see hlist_keep.h).
 *
 * DESIGN: two min-heaps. lows holds the k largest dot - slack offered, so
 * its smallest is the floor, which only rises; hits holds the rows, by
 * dot, and sheds its smallest while that row's dot + slack is under the
 * floor and more than `keep` remain. A row under the floor but above the
 * smallest kept dot still enters when there is a keep, so the keep best by
 * dot are always held. */
#include "hlist_keep.h"

static void hit_down(oml_hlist_hit *h, int32_t cnt, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < cnt && h[l].dot < h[w].dot)
            w = l;
        if (r < cnt && h[r].dot < h[w].dot)
            w = r;
        if (w == i)
            return;
        oml_hlist_hit t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void hit_up(oml_hlist_hit *h, int32_t i)
{
    while (i > 0 && h[i].dot < h[(i - 1) / 2].dot) {
        int32_t p = (i - 1) / 2;
        oml_hlist_hit t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

void oml_hlist_keep_init(oml_hlist_keep *s, oml_hlist_hit *hits, int32_t cap, int32_t keep,
                         oml_neighbor *lows, int32_t k)
{
    *s = (oml_hlist_keep){.hits = hits, .cap = cap, .keep = keep < cap ? keep : cap,
                          .lows = lows, .k = k, .floor = k > 0 ? -INFINITY : INFINITY};
}

void oml_hlist_keep_offer(oml_hlist_keep *s, int32_t row, float dot, float slack)
{
    oml_neighbor lo = {row, dot - slack};
    if (s->n_low < s->k) {
        s->lows[s->n_low] = lo;
        oml_minheap_up(s->lows, s->n_low++);
        if (s->n_low == s->k)
            s->floor = s->lows[0].dist;
    } else if (s->k > 0 && lo.dist > s->lows[0].dist) {
        s->lows[0] = lo;
        oml_minheap_down(s->lows, s->k, 0);
        s->floor = s->lows[0].dist;
    }
    oml_hlist_hit h = {row, dot, slack};
    int may = oml_hlist_keep_may(s, &h);
    if (!may && s->cnt >= s->keep && (s->keep == 0 || !(dot > s->hits[0].dot)))
        return;
    if (s->cnt < s->cap) {
        s->hits[s->cnt] = h;
        hit_up(s->hits, s->cnt++);
    } else if (dot > s->hits[0].dot) { /* full: the smallest dot gives way */
        s->overflow |= oml_hlist_keep_may(s, &s->hits[0]);
        s->hits[0] = h;
        hit_down(s->hits, s->cnt, 0);
    } else {
        s->overflow |= may;
        return;
    }
    while (s->cnt > s->keep && !oml_hlist_keep_may(s, &s->hits[0])) {
        s->hits[0] = s->hits[--s->cnt];
        hit_down(s->hits, s->cnt, 0);
    }
}
