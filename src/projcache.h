/* projcache.h - each stored item's input on the basis, kept between builds.
 *
 * Below rerank_min_items the daemon re-embeds every item for every new
 * model (about twice a second while it learns). With the start's input
 * basis (net.h: h(0) = B (x - mu), dim -> emb, fixed at the start) the
 * projection was about a third of that work: 75 of the ~200 ms it took to
 * embed 35,000 items of 784 features. The basis changes only with a new
 * start and an item's features only with a put, so the index builder keeps
 * h(0) of each slot, keyed by the slot's stamp (oml_store_stamp) and by
 * the input (mean, scale, basis) it was computed under, and projects only
 * what is new. The rows come from oml_net_project, whose bits are a
 * function of the row alone, so an index built from kept rows equals one
 * built without them, bit for bit.
 *
 * Thread: one user at a time (the daemon's indexer). */
#ifndef OML_PROJCACHE_H
#define OML_PROJCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

typedef struct oml_projcache {
    uint32_t max_slots;  /* rows kept for slots below this only; 0: none */
    int32_t in;          /* floats a row */
    float *key;          /* (key_n) mean, scale and basis the rows were computed under */
    size_t key_n;
    uint64_t *stamp;     /* (cap) the slot's stamp when its row was kept; 0: none */
    float *rows;         /* (cap, in) */
    uint32_t cap;
} oml_projcache;

/* An empty cache that keeps rows for slots below max_slots. */
void oml_projcache_init(oml_projcache *c, uint32_t max_slots);
void oml_projcache_free(oml_projcache *c); /* then empty, as after init */

/* Before a build over a store of `slots` slots under snap (which must have
 * a basis): forgets every row when snap's input differs from the one they
 * were computed under, and makes room for min(slots, max_slots) rows.
 * OML_OK, OML_ENOMEM (the cache is then emptied: the build goes on without
 * it). */
int oml_projcache_begin(oml_projcache *c, const oml_snapshot *snap, uint32_t slots);

/* The row kept for slot at stamp, or NULL. */
static inline const float *oml_projcache_get(const oml_projcache *c, uint32_t slot,
                                             uint64_t stamp)
{
    if (slot >= c->cap || c->stamp[slot] != stamp || stamp == 0)
        return NULL;
    return c->rows + (size_t)slot * (size_t)c->in;
}

/* Keeps row (in floats) for slot at stamp; beyond the room begun: ignored. */
void oml_projcache_put(oml_projcache *c, uint32_t slot, uint64_t stamp, const float *row);

size_t oml_projcache_bytes(const oml_projcache *c);

#endif
