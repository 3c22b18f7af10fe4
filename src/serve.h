/* serve.h - the serving rules of OAHU Sec. 3.6 over an index or a snapshot.
 *
 * classify (Eq. 23-25), verify (Eq. 26), retrieve (Eq. 27). All functions
 * only read their immutable inputs and are safe on any thread. Query vectors
 * are raw inputs (dim floats); they are embedded under the index's snapshot. */
#ifndef OML_SERVE_H
#define OML_SERVE_H

#include <stdint.h>

#include "err.h"
#include "index.h"
#include "learner.h" /* OML_MAX_HEADS */
#include "snapshot.h"

/* The largest k any query may ask for; the daemon's max_k (default 1024)
 * bounds it further, and max_frame_bytes bounds the answer. */
#define OML_SERVE_MAX_K 16384

typedef struct oml_class_score {
    int32_t label; /* label id of the index */
    float score;   /* Eq. 24 */
} oml_class_score;

typedef struct oml_classification {
    int32_t label;        /* Eq. 25 argmax (ties: smaller label id) */
    float score;          /* its S(c) */
    int32_t n_classes;    /* classes with a non-zero score, <= max given */
    oml_class_score classes[16]; /* best classes, descending */
} oml_classification;

/* kNN classification of x (dim) with k neighbours per head. exclude_row is an
 * index row to leave out (the query item itself), or -1. Errors: OML_EINVAL
 * (k out of [1, OML_SERVE_MAX_K], field "k"; exclude_row out of [-1, n)),
 * OML_ENONFINITE (field "features"), OML_EEMPTY (empty index or no labelled
 * neighbour), OML_ENOMEM. Heads whose k neighbours are equally far
 * (d_max = d_min) score every neighbour alpha(l), the limit of Eq. 23.
 * An index without float columns (oml_index_drop_columns) is OML_EINVAL
 * (field "index"): oml_classify_from takes a row source for it. */
int oml_classify(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                 oml_classification *out, oml_diag *diag);
/* oml_classify among the allowed rows only (allow (n): 1 for rows that may
 * be neighbours; NULL: every row), e.g. a metadata filter's. */
int oml_classify_allowed(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                         const uint8_t *allow, oml_classification *out, oml_diag *diag);
/* oml_classify_allowed on an index that may keep no float columns: src
 * (NULL: none) embeds the rows its exact re-rank needs (index.h). */
int oml_classify_from(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                      const uint8_t *allow, const oml_row_source *src, oml_classification *out,
                      oml_diag *diag);

typedef struct oml_verification {
    float probability;   /* Eq. 26 */
    int similar;         /* probability >= 0.5 */
    float dist[OML_MAX_LAYERS + 1]; /* D(l)(x1, x2) per head */
} oml_verification;

/* Eq. 26 with threshold T in (0, 1): p_l = 1 iff D(l)/2 < T. OML_EINVAL for
 * T out of range (field "threshold"), OML_ENONFINITE, OML_ENOMEM. */
int oml_verify(const oml_snapshot *s, const float *x1, const float *x2, float threshold,
               oml_verification *out, oml_diag *diag);

typedef struct oml_hit {
    int32_t row;      /* index row */
    float score;      /* Eq. 27 */
    float similarity; /* sum_l alpha(l) cos(f_l(x), f_l(row)) = sum_l alpha(l) (1 - D(l)^2 / 2):
                         the pair's alone, whatever k is */
} oml_hit;

/* What a retrieval may return, beyond exclude_row. */
typedef struct oml_retrieve_opts {
    const uint8_t *allow;  /* (n) 1 for rows that may be returned; NULL: every row. The
                              search runs over the allowed rows only */
    int32_t offset;        /* skip the best `offset` hits: the ranking is that of
                              k + offset hits (offset + k <= OML_SERVE_MAX_K) */
    float min_similarity;  /* drop hits below it (-INFINITY: none) */
    const oml_row_source *src; /* an index without float columns (oml_index_drop_columns):
                                  where its rows' embeddings come from; NULL: none (such
                                  an index is then refused) */
} oml_retrieve_opts;

/* Eq. 27: pools k neighbours from every head, scores them, keeps the top k
 * distinct rows by descending score (ties: smaller row). With opts (NULL:
 * none), over the allowed rows only, the ranking of offset + k hits from
 * which the first offset are skipped, and no hit below min_similarity.
 * out holds k hits; returns the count via *n_out (0 for an empty index).
 * Errors as for classify (offset + k out of range: field "offset"),
 * except that an empty index is not one, and an index without float
 * columns is answered when opts->src gives its rows. */
int oml_retrieve(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                 const oml_retrieve_opts *opts, oml_hit *out, int32_t *n_out, oml_diag *diag);

/* ---- batches: many queries answered together (serve_batch.c) ----
 *
 * A batch's answers are its queries' single answers, bit for bit: query i
 * gets exactly what oml_classify / oml_retrieve give for it alone (same
 * neighbours, labels, scores and similarities), whatever the other queries
 * are. On an index without lists the batch is embedded one query at a time
 * and its distances to every row come from one GEMM per head and block of
 * rows (throughput bound by compute rather than by reading the index once
 * per query); an index with lists answers each query by the single path. */

/* One query of a batch: what the single call takes. */
typedef struct oml_query {
    const float *x;                /* (dim) borrowed: the raw input */
    int32_t k;                     /* neighbours per head (classify), hits (retrieve) */
    int32_t exclude_row;           /* an index row to leave out, or -1 */
    const oml_retrieve_opts *opts; /* retrieve only (classify ignores it); NULL: none */
} oml_query;

/* Queries per block of the batched search (one GEMM per head and block of
 * rows for all of them): 100 queries at 35,000 items took 26.7 ms in one
 * block of 128, 28.8 ms in blocks of 64 and 36. */
#define OML_SERVE_BATCH_QUERIES 128

/* oml_classify for each of the m queries q into out (m). A query that
 * alone would be OML_EEMPTY (empty index, no labelled neighbour) gets
 * label OML_LABEL_NONE and no classes. Errors: OML_EINVAL (m < 0; a
 * query's k or exclude_row, field "queries[i].k"), OML_ENONFINITE
 * ("queries[i].features"), both found before anything is written;
 * OML_ENOMEM (the answers written so far are then unspecified); an index
 * without float columns, OML_EINVAL (field "index"). m = 0 is OML_OK. */
int oml_classify_batch(const oml_index *ix, const oml_query *q, int32_t m,
                       oml_classification *out, oml_diag *diag);

/* oml_retrieve for each of the m queries q: query i's hits into out[i]
 * (q[i].k of them) and their count into n_out[i]. Errors as for
 * oml_classify_batch (offset: "queries[i].offset"); an empty index gives
 * every query 0 hits. */
int oml_retrieve_batch(const oml_index *ix, const oml_query *q, int32_t m, oml_hit *const *out,
                       int32_t *n_out, oml_diag *diag);

/* Recommend (proto/omld.proto RecommendRequest): items like the n_pos
 * positive examples pos (n_pos, dim) and unlike the n_neg negative ones neg
 * (n_neg, dim; may be NULL when 0). On every head l the query is the unit
 * vector along c m+_l - m-_l, m+_l and m-_l the means of the examples'
 * embeddings on head l, c = 2 with negatives (Qdrant's average-vector
 * rule: m+ + (m+ - m-)) and 1 without (one positive: a retrieve of it);
 * then retrieve's search, ranking and page with opts. A query that comes
 * out as zero on a head (the means cancel) takes m+_l there. Errors as for
 * retrieve (an index without float columns needs opts->src); n_pos < 1:
 * field "positive". */
int oml_recommend(const oml_index *ix, const float *pos, int32_t n_pos, const float *neg,
                  int32_t n_neg, int32_t k, const oml_retrieve_opts *opts, oml_hit *out,
                  int32_t *n_out, oml_diag *diag);

/* How well an index with lists answers x: of the exact k nearest rows of
 * every head (a full scan), how many the lists' search also finds; hits[h]
 * and total[h] (OML_MAX_HEADS each) get head h's counts (all 0 for an
 * index without lists, or a failure). Costs a full scan: for a sample of
 * queries. An index without float columns needs src (NULL: all 0): its
 * search re-ranks from it, and its reference is every row's int8 code
 * with the rows they cannot rule out embedded from it
 * (oml_index_topk_lists). */
void oml_index_recall(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                      const oml_row_source *src, int64_t *hits, int64_t *total);

#endif
