/* hlist_keep.h - the rows a scan of codes keeps for an exact re-rank.
 *
 * A code's dot product is off from the exact one by at most its slack
 * (hlist.h: the query's and the row's quantisation errors, bounded), so a
 * row can be among the k nearest only while dot + slack reaches the k-th
 * largest dot - slack seen: the floor. The keep holds every row that does,
 * however many tie within the codes' error, so the exact re-rank decides
 * among them (a fixed cut of the best 2k + 8 by the codes lost the
 * neighbours of items nearly equidistant from a query). A donor (hlist.h)
 * also keeps its `keep` best by the codes' dot alone, for the heads that
 * rescore its scan.
 *
 * Bounded: at most cap rows (the workspace is sized before the query). A
 * row that could still be among the k nearest but does not fit sets
 * overflow; the keep then holds the cap best by the codes' dot, as a fixed
 * cut did. Pure; no allocation. */
#ifndef OML_HLIST_KEEP_H
#define OML_HLIST_KEEP_H

#include <math.h>
#include <stdint.h>

#include "neighbor.h"

typedef struct oml_hlist_hit {
    int32_t row;  /* index row */
    float dot;    /* the codes' approximate dot product with the query */
    float slack;  /* |dot - exact dot| <= slack */
} oml_hlist_hit;

typedef struct oml_hlist_keep {
    oml_hlist_hit *hits; /* (cap) borrowed; min-heap on dot */
    int32_t cnt, cap;
    int32_t keep;        /* kept by dot alone, bound or not (a donor's) */
    oml_neighbor *lows;  /* (k) borrowed; min-heap of the k largest dot - slack (dist) */
    int32_t k, n_low;
    float floor;         /* the k-th largest dot - slack offered, -inf before k
                            (k 0: +inf, no row is kept for its bound) */
    int overflow;        /* a row that could be among the k nearest was dropped */
} oml_hlist_keep;

/* hits (cap), lows (k): the caller's. keep <= cap. k 0: no bound, the
 * keep best by dot alone (for callers that cut by the codes' order). */
void oml_hlist_keep_init(oml_hlist_keep *s, oml_hlist_hit *hits, int32_t cap, int32_t keep,
                         oml_neighbor *lows, int32_t k);

/* Below what dot a row, whatever its slack up to max_slack, is not kept:
 * the scan filters a block of rows by it at once (hlist.c), so it may be
 * low, never high. */
static inline float oml_hlist_keep_threshold(const oml_hlist_keep *s, float max_slack)
{
    if (s->cnt < s->keep || s->n_low < s->k)
        return -INFINITY;
    float t = s->floor - max_slack;
    if (s->keep > 0 && s->hits[0].dot < t)
        t = s->hits[0].dot; /* it may still be among the keep best by dot */
    return t - 1e-6f; /* the caller keeps dot > threshold; dots are about 1 */
}

/* Offers one row (not the query's excluded or refused rows: they must not
 * raise the floor). */
void oml_hlist_keep_offer(oml_hlist_keep *s, int32_t row, float dot, float slack);

/* Could hit h still be among the k nearest? */
static inline int oml_hlist_keep_may(const oml_hlist_keep *s, const oml_hlist_hit *h)
{
    return h->dot + h->slack >= s->floor;
}

#endif
