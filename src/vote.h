/* vote.h - OAHU Eq. 23-25 over neighbour lists, whoever found them: one
 * index's search (serve.c, serve_batch.c, rerank.c) or the union of the
 * shards' lists (proto/shard_merge.c). One function, so that a merged
 * classification is one node's bit for bit. Not part of the API. */
#ifndef OML_VOTE_H
#define OML_VOTE_H

#include <stddef.h>
#include <stdint.h>

#include "neighbor.h"
#include "serve.h"

/* Who votes: heads, their weights alpha (heads) and the label of every
 * row a neighbour names (OML_LABEL_NONE: votes for nothing). */
typedef struct oml__voter {
    int heads;
    const float *alpha;
    const int32_t *labels;
} oml__voter;

/* OAHU Eq. 23 (= Eq. 27) for a neighbour at d among one head's k in
 * [d_min, d_max]; d_max = d_min gives alpha (the limit). */
double oml__eq23_score(float d, float d_min, float d_max, float alpha);

/* Per-query voting state: dense class sums with a list of touched labels. */
typedef struct vote_ws {
    double *cls;      /* (n_labels) S(c), Eq. 24 */
    unsigned char *seen;
    int32_t *touched; /* labels with at least one vote */
} vote_ws;

/* Eq. 23-25 over the neighbours nb (heads, k) with cnt[h] valid per head.
 * Writes the label (and the full result when out != NULL); OML_EEMPTY when no
 * neighbour has a label. Leaves ws zeroed again. */
int oml__vote(const oml__voter *vt, const oml_neighbor *nb, const int32_t *cnt, int32_t k,
              vote_ws *ws, int32_t *label, oml_classification *out);

/* The bytes a vote_ws for n_labels labels and `votes` neighbours takes
 * (8-aligned), and the workspace laid out in them, zeroed as oml__vote
 * wants it. */
size_t oml__vote_ws_bytes(size_t n_labels, size_t votes);
void oml__vote_ws_init(vote_ws *ws, void *mem, size_t n_labels, size_t votes);

#endif
