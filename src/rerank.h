/* rerank.h - answering under a newer model than the index's (issue 14).
 *
 * At a million items an index takes seconds to build: every item is
 * embedded under one model. The learner publishes a new model every few
 * hundred milliseconds. So a serving view may pair an index built under an
 * older snapshot with the newest one: the index proposes candidates (each
 * head's k_c nearest under its own model), and the newest model decides
 * among them exactly, from the candidates' features as they are now. The
 * answer is exact under the newest model whenever its true neighbours are
 * among the candidates; with k_c >= the index's rows it always is.
 *
 * Pure functions over immutable inputs; any thread. */
#ifndef OML_RERANK_H
#define OML_RERANK_H

#include <stdint.h>

#include "err.h"
#include "index.h"
#include "serve.h"
#include "snapshot.h"

/* The union of every head's k_c nearest rows to x under the index's own
 * model (on an index with lists: the k_c its search ranks first by the
 * codes, oml_index_near_candidates, without the exact re-rank the newer
 * model makes anyway), skipping exclude_row and rows
 * that allow (NULL: all) refuses: distinct, ascending, into rows (capacity
 * heads * k_c); *n_rows gets the count. Errors as oml_classify's (k_c in
 * [1, OML_SERVE_MAX_K]), except that an empty index gives 0 rows. */
int oml_rerank_candidates(const oml_index *ix, const float *x, int32_t k_c, int32_t exclude_row,
                          const uint8_t *allow, int32_t *rows, int32_t *n_rows, oml_diag *diag);

/* oml_index_recall for a fresh view, whose answers are chosen among the
 * candidates above: of the exact k nearest rows of every head (a full
 * scan under the index's model), how many are among that head's k_c
 * candidates (k_c >= k; on an index with lists, oml_index_near_candidates);
 * hits[h] and total[h] (OML_MAX_HEADS each) get head h's counts (all 0 for
 * an index without lists or a failure). Costs a full scan: for a sample of queries.
 * An index without float columns needs src: its exact reference is then
 * every list's codes, each row they cannot rule out embedded from src
 * (oml_index_topk_lists); NULL: all 0. */
void oml_rerank_recall(const oml_index *ix, const float *x, int32_t k, int32_t k_c,
                       int32_t exclude_row, const oml_row_source *src, int64_t *hits,
                       int64_t *total);

/* Candidates with their features now: rows (m) index rows, feats (m, dim). */
typedef struct oml_rerank_set {
    const int32_t *rows;
    const float *feats;
    int32_t m;
} oml_rerank_set;

/* How deep the candidates of a view that re-ranks must go (daemon
 * depth.h): under snap (the newer model), each head's k nearest among the
 * deep candidates c; hits[i] gets how many of them, over every head, set
 * i holds (n_set[i] index rows, ascending, as oml_rerank_candidates gives
 * them: the candidates of a shallower depth), *total how many there are.
 * Errors as oml_retrieve_among's; the counts are then 0. */
int oml_rerank_depth(const oml_index *ix, const oml_snapshot *snap, const float *x, int32_t k,
                     const oml_rerank_set *c, const int32_t *const *sets, const int32_t *n_set,
                     int n_sets, int64_t *hits, int64_t *total, oml_diag *diag);

/* oml_classify among the candidates under snap (the newest model): each
 * head's k nearest candidates by snap's embedding, voted with snap's alpha
 * and the index's labels. OML_EEMPTY when no candidate neighbour has a
 * label (or there are none), else as oml_classify. */
int oml_classify_among(const oml_index *ix, const oml_snapshot *snap, const float *x, int32_t k,
                       const oml_rerank_set *c, oml_classification *out, oml_diag *diag);

/* oml_retrieve among the candidates under snap, with opts' offset and
 * similarity floor (its allow mask was the candidates' business). Hits
 * name index rows; similarities are under snap. */
int oml_retrieve_among(const oml_index *ix, const oml_snapshot *snap, const float *x, int32_t k,
                       const oml_rerank_set *c, const oml_retrieve_opts *opts, oml_hit *out,
                       int32_t *n_out, oml_diag *diag);

#endif
