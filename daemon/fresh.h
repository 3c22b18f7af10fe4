/* fresh.h - classify and retrieve on a view whose model is newer than its
 * index's (v->fresh set): the index's candidates re-ranked under the view's
 * model (rerank.h), their features read from the store as they are now.
 * Query threads; same contracts and errors as oml_classify / oml_retrieve.
 * And the store's rows for an index without float columns. */
#ifndef OMLD_FRESH_H
#define OMLD_FRESH_H

#include "query.h"
#include "rerank.h"

/* The candidates per head a fresh view's query of `ranked` neighbours (k
 * + offset) re-ranks before its index's lag is counted (depth.h):
 * rerank_candidates (q->lim->rerank_k) for 10, in
 * proportion for more, and as for 5 below that; at least ranked, at most
 * OML_SERVE_MAX_K. At 1M items a query's largest cost is re-embedding
 * them, and the share of the exact neighbours found follows the
 * candidates a neighbour asked for: 16 for k = 5 found 0.964 of them as 32
 * for k = 10 found 0.953-0.967, where a flat 32 for every k spent twice
 * that on a classify (k 5). */
int32_t omld_fresh_base_candidates(const omld_query_ctx *q, int32_t ranked);

/* What view v's queries take: the above at the depth its index's sample
 * chose (depth.h). */
int32_t omld_fresh_candidates(const omld_query_ctx *q, const omld_view *v, int32_t ranked);

/* The depth sample (depth.h) of query x, unfiltered, for k neighbours on
 * fresh view v (exclude_row -1: none): the deep candidates re-ranked
 * under v's model, hits (OMLD_DEPTH_STEPS) how many of each head's k
 * nearest among them each step's candidates hold, *total how many there
 * are. 0, or an oml error code (the counts then 0). Takes the store's
 * read lock. */
int omld_fresh_depth_sample(const omld_query_ctx *q, const omld_view *v, const float *x,
                            int32_t k, int32_t exclude_row, int64_t *hits, int64_t *total);

/* allow (n, NULL: every row) as oml_retrieve_opts.allow: only those rows vote. */
int omld_fresh_classify(const omld_query_ctx *q, const omld_view *v, const float *x, int32_t k,
                        int32_t exclude_row, const uint8_t *allow, oml_classification *out,
                        oml_diag *d);

int omld_fresh_retrieve(const omld_query_ctx *q, const omld_view *v, const float *x, int32_t k,
                        int32_t exclude_row, const oml_retrieve_opts *opts, oml_hit *out,
                        int32_t *n_out, oml_diag *d);

/* A row source (index.h) over q's store: an index row's features as the
 * store holds them now (under the read lock, while the slot still holds the
 * item the index named), embedded under the index's model. For searches of
 * an index without float columns and their calibration; q must outlive
 * src's use. q->lock NULL: a store nothing else uses meanwhile. */
void omld_fresh_rows(const omld_query_ctx *q, oml_row_source *src);

#endif
