/* closure_int.h - the closure's representation, shared by closure.c (the
 * algorithm) and closure_codec.c (its encoding). Not part of the API: only
 * these two files include it. See closure.c's DESIGN for the invariants. */
#ifndef OML_CLOSURE_INT_H
#define OML_CLOSURE_INT_H

#include <stdint.h>

#include "closure.h"

#define CLOSURE_NONE UINT32_MAX

typedef struct emap_entry {
    uint64_t key;     /* 0 = empty; real keys have hi >= 1 so are never 0 */
    uint32_t pos_lo;  /* index of hi in nbr[lo] */
    uint32_t pos_hi;  /* index of lo in nbr[hi] */
} emap_entry;

struct oml_closure {
    uint32_t max_nodes, max_dis_edges;
    uint32_t n_alloc;   /* nodes with storage; higher ids are untouched singletons */
    uint32_t *parent;   /* (n_alloc) */
    uint32_t *size;     /* (n_alloc), valid at roots */
    uint32_t **members; /* (n_alloc), roots with size >= 2 */
    uint32_t *mcap;
    uint32_t **nbr;     /* (n_alloc), dissimilar neighbour roots */
    uint32_t *deg, *ncap;
    uint32_t *elig_pos; /* (n_alloc), index in elig or CLOSURE_NONE */
    uint32_t *elig;     /* (n_alloc) */
    uint32_t n_elig;

    emap_entry *emap;
    uint32_t emap_cap, n_edges;

    oml_rng rng;
    oml_closure_stats st;
};

/* The edge map (closure.c): key of a root pair, lookup, room for `extra`
 * more edges, insert (room reserved). */
uint64_t oml__closure_edge_key(uint32_t u, uint32_t v);
emap_entry *oml__closure_emap_find(const oml_closure *c, uint64_t k);
int oml__closure_emap_reserve(oml_closure *c, uint32_t extra);
void oml__closure_emap_insert(oml_closure *c, uint64_t k, uint32_t pos_lo, uint32_t pos_hi);

#endif
