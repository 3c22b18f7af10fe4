/* hgraph.h - a navigable small-world graph over one head's unit rows
 * (HNSW, Malkov & Yashunin 2018), as a candidate generator (issue 14).
 *
 * The rows are a head's embeddings (unit vectors); similarity is their dot
 * product, so the nearest by oml_index_dist are the most similar. Each row
 * is a node on level 0 and, with probability M^-l, on levels 1 .. l; a
 * node keeps at most 2M links on level 0 and M above, chosen by HNSW's
 * heuristic (a candidate is linked only if it is nearer to the node than
 * to every link already kept). A search descends greedily from the top
 * level's entry and then explores level 0 best first, keeping the ef most
 * similar rows it reached. Rows are added one at a time (incremental: a
 * row added later is found as one added at the start), never removed:
 * a search routes through rows `allow` refuses but never returns them.
 *
 * The graph keeps its own row-major copy of the rows (emb floats a row:
 * the search reads a row at a time, not the index's column layout).
 * Single writer: adds must not run beside searches of the same graph;
 * searches of one graph may run on many threads, each with its own
 * workspace. Pure functions of their inputs: levels come from a seeded
 * generator, so one order of adds gives one graph. */
#ifndef OML_HGRAPH_H
#define OML_HGRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "neighbor.h"

typedef struct oml_hgraph {
    int32_t n, cap, emb;
    int32_t M;               /* links a node keeps above level 0; 2M on level 0 */
    int32_t ef_build;        /* the search width when a row is added */
    int32_t entry;           /* the node of the top level, -1 while empty */
    int32_t top;             /* its level */
    uint64_t rng;
    float *vecs;             /* (cap, emb) the rows */
    int32_t *links0;         /* (cap, 2M + 1) level 0: a count, then the links */
    int8_t *level;           /* (cap) each node's top level */
    int32_t **up;            /* (cap) NULL, or (level, M + 1) levels 1 .. level */
    struct oml_hgraph_ws *_ws; /* the adds' workspace */
} oml_hgraph;

/* A search's scratch: one per thread. */
typedef struct oml_hgraph_ws {
    uint32_t *seen;          /* (cap) visit marks */
    uint32_t mark;
    int32_t cap_seen;
    oml_neighbor *cand, *best; /* (cap_heap) heaps; .dist holds the similarity */
    int32_t cap_heap;
    int64_t visited;         /* rows scored, summed over searches (a measure) */
} oml_hgraph_ws;

/* An empty graph for rows of emb values, M links (>= 2), ef_build (>= M).
 * OML_OK, OML_EINVAL, OML_ENOMEM. */
int oml_hgraph_init(oml_hgraph *g, int32_t emb, int32_t M, int32_t ef_build, uint64_t seed);
void oml_hgraph_free(oml_hgraph *g); /* accepts a zeroed one */

/* Adds a unit row v (emb; copied) as node g->n. OML_OK, OML_ENOMEM (the
 * graph is unchanged). */
int oml_hgraph_add(oml_hgraph *g, const float *v);
/* Adds the n rows of cols (emb, n; value j of row r at cols[j * ld + r]),
 * nodes g->n .. g->n + n - 1, in order. */
int oml_hgraph_add_cols(oml_hgraph *g, const float *cols, int32_t n, size_t ld);

int oml_hgraph_ws_init(oml_hgraph_ws *w, int32_t cap_nodes, int32_t ef);
void oml_hgraph_ws_free(oml_hgraph_ws *w);

/* The (about) ef most similar nodes to the unit query q (emb), searching
 * with width ef (>= k), the best k of them into out (k), descending by
 * similarity (.dist is the dot product, not a distance), skipping nodes
 * allow (NULL: all) refuses and `exclude`. vecs: the rows to score by
 * (NULL: the graph's own; else (>= g->n, emb) row-major rows of the same
 * nodes, e.g. the rows under a newer model, routed over the same links).
 * Returns how many were written. w must hold at least g->n nodes and ef. */
int32_t oml_hgraph_search(const oml_hgraph *g, const float *vecs, const float *q, int32_t k,
                          int32_t ef, int32_t exclude, const uint8_t *allow, oml_neighbor *out,
                          oml_hgraph_ws *w);

/* The graph's bytes (rows, links, levels). */
size_t oml_hgraph_bytes(const oml_hgraph *g);

#endif
