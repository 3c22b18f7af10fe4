/* serve_shard.h - one shard's part of a retrieval (Eq. 27 across shards).
 *
 * Eq. 27 scores a neighbour of head l against the nearest and farthest of
 * that head's k neighbours, so a merged ranking needs every shard's k
 * nearest per head with their distances, not its final page: the k
 * nearest of the union per head are the k nearest among the shards'
 * lists. oml_retrieve_candidates gives those lists (over the allowed rows
 * of one shard's index) and each distinct row's pair similarity;
 * proto/shard_merge.h ranks and pages the union exactly as oml_retrieve
 * does on one index holding every shard's items. */
#ifndef OML_SERVE_SHARD_H
#define OML_SERVE_SHARD_H

#include <stdint.h>

#include "config.h"
#include "err.h"
#include "index.h"
#include "neighbor.h"

typedef struct oml_candidates {
    int heads;
    int32_t ranked;                   /* neighbours per head asked for */
    oml_neighbor *nb;                 /* (heads, ranked): row and distance, ascending */
    int32_t cnt[OML_MAX_LAYERS + 1];  /* valid per head */
    int32_t *rows;                    /* (n_rows) the distinct rows of the lists */
    float *similarity;                /* (n_rows) sum_l alpha(l) cos, as oml_retrieve's hits */
    int32_t n_rows;
    void *_block;
} oml_candidates;

/* The ranked nearest rows per head of x (dim floats) in ix, but
 * exclude_row (-1: none) and rows not allowed (allow NULL: all). ranked in
 * [1, OML_SERVE_MAX_K]. OML_OK (an empty index: no rows), OML_EINVAL,
 * OML_ENONFINITE, OML_ENOMEM; out freed with oml_candidates_free. */
int oml_retrieve_candidates(const oml_index *ix, const float *x, int32_t ranked,
                            int32_t exclude_row, const uint8_t *allow, oml_candidates *out,
                            oml_diag *diag);
void oml_candidates_free(oml_candidates *c); /* accepts a zeroed one */

#endif
