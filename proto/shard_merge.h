/* shard_merge.h - n shards' ShardRetrieveResponses merged into the
 * retrieval one node holding all their items answers (omld.proto SHARDS).
 *
 * Per head, the offset + k nearest of the union (distance, then store slot,
 * ascending: as one index orders them); each scored by OAHU Eq. 27 against
 * that head's nearest and farthest of them (the formula of src/serve.c,
 * oml__eq23_score, in the same double arithmetic); each item at its best
 * score over the heads; ranked by (score desc, slot asc); the page from
 * offset, hits below min_similarity dropped, up to k. Pure: no I/O, shared
 * by libomlclient and omld --router as proto/frame.c is. */
#ifndef OML_SHARD_MERGE_H
#define OML_SHARD_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "omld.pb-c.h"

typedef struct oml_merged_hit {
    const char *id;     /* borrowed from the responses */
    const char *label;  /* NULL: unlabelled */
    float score;        /* Eq. 27 */
    float similarity;
} oml_merged_hit;

/* parts (n >= 1) answered one query with k, offset (and their filters);
 * has_min: drop hits below min_similarity. out holds k; *n_out the count.
 * 0, or -1 with err: the shards' models differ (alpha or heads), a
 * candidate index out of range, or out of memory. */
int oml_shard_merge(Omld__ShardRetrieveResponse *const *parts, size_t n, uint32_t k,
                    uint32_t offset, int has_min, float min_similarity, oml_merged_hit *out,
                    size_t *n_out, char *err, size_t errlen);

/* A classification merged: Eq. 23-25 (src/vote.c, the function one node
 * votes with) over the union's k nearest per head, each labelled by the
 * store's label id (ties break by it). Names borrowed from the responses. */
typedef struct oml_merged_class {
    const char *label; /* the argmax; NULL: no labelled neighbour (an empty answer) */
    int n_scores;      /* classes with a non-zero score, best first */
    struct {
        const char *label;
        float score;
    } scores[16];
} oml_merged_class;

/* parts (n >= 1) answered ShardRetrieve with the classify's query, k and
 * metadata. 0, or -1 with err: different models, a candidate or label id
 * out of range, out of memory. */
int oml_shard_classify(Omld__ShardRetrieveResponse *const *parts, size_t n, uint32_t k,
                       oml_merged_class *out, char *err, size_t errlen);

/* m as the ClassifyResponse one node answers, borrowing m's strings; sc
 * and sp hold 16 each. */
void oml_merged_class_message(const oml_merged_class *m, Omld__ClassifyResponse *resp,
                              Omld__ClassScore *sc, Omld__ClassScore **sp);

#endif
