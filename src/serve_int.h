/* serve_int.h - the serving rules' parts that serve.c and rerank.c share:
 * Eq. 23-25 voting and Eq. 27 ranking over neighbour lists, whoever found
 * the neighbours. Not part of the API. */
#ifndef OML_SERVE_INT_H
#define OML_SERVE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"
#include "serve.h"
#include "vote.h"

/* Query workspace: the query's embedding, the search's scratch and k
 * neighbours per head, in one allocation. */
typedef struct query_ws {
    float *q;          /* (heads, emb) */
    float *scratch;    /* (n) an index without lists: the full scan's dot products */
    oml_near_ws near;  /* an index with lists: its search's workspace */
    oml_neighbor *nb;  /* (heads, k) */
    int32_t cnt[OML_MAX_LAYERS + 1];
    void *_block;
} query_ws;

/* The checks shared by classify and retrieve: index and query set, k in
 * [1, OML_SERVE_MAX_K] (field "k"), a finite query ("features"),
 * exclude_row in [-1, n). */
int oml__check_query(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                     oml_diag *diag);

/* The workspace for k neighbours per head plus extra bytes (8-aligned, at
 * *extra_out); free w->_block. OML_ENOMEM. */
int oml__query_ws_init(query_ws *w, const oml_index *ix, int32_t k, size_t extra,
                       void **extra_out);

/* Embeds x under the index's snapshot and finds k neighbours per head
 * (Sec. 3.6.1, first step): in the lists nearest to x when the index has
 * lists, else in every row; rows allow (NULL: all) refuses are never
 * neighbours. */
int oml__query_neighbors(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                         const uint8_t *allow, query_ws *w);

/* The second half of oml__query_neighbors: the neighbours of the query
 * already embedded in w->q (heads, emb), each row a unit vector. */
void oml__embedded_neighbors(const oml_index *ix, int32_t k, int32_t exclude_row,
                             const uint8_t *allow, query_ws *w);

/* offset + k within OML_SERVE_MAX_K (field "offset"): OML_OK or OML_EINVAL. */
int oml__check_offset(int32_t offset, int32_t k, oml_diag *diag);

/* A pair's similarity, sum_l alpha(l) cos(q_l, f_l), clamped to [-1, 1]:
 * q (heads, emb) unit rows; value j of f's head h at f[h * head_stride +
 * j * stride] (an index's columns or embedded rows alike). */
float oml__pair_similarity(const float *alpha, int heads, int32_t emb, const float *q,
                           const float *f, size_t head_stride, size_t stride);

typedef struct pool_hit {
    int32_t row;
    double score;
} pool_hit;

/* Eq. 27 over the neighbours nb (heads, k): each distinct row once, at its
 * best score, by (score desc, row asc) in pool (heads * k). Returns the count. */
size_t oml__rank_pool(const oml__voter *vt, const oml_neighbor *nb, const int32_t *cnt, int32_t k,
                      pool_hit *pool);

/* Where the embeddings of the rows a pool names are: value j of row r's
 * head h at f[r * row_step + h * head_stride + j * stride]. */
typedef struct oml__rows_emb {
    const float *f;
    size_t row_step, head_stride, stride;
} oml__rows_emb;

/* Eq. 27's page: of the nd ranked distinct rows in pool (oml__rank_pool),
 * those from opts->offset on whose similarity to q (heads, emb) is at least
 * opts->min_similarity, up to k, into out, named rows[r] (rows NULL: r).
 * opts NULL: offset 0, no floor. Returns the count. */
int32_t oml__page_hits(const float *alpha, int heads, int32_t emb, const float *q,
                       const oml__rows_emb *re, const pool_hit *pool, size_t nd,
                       const oml_retrieve_opts *opts, int32_t k, const int32_t *rows,
                       oml_hit *out);

/* The recall samples' exact reference for k neighbours, a full scan: of
 * the floats (oml_index_topk, n floats of scratch) or, for an index
 * without them, of every row's int8 code, the rows the codes cannot rule
 * out embedded from src (oml_index_topk_lists, in a workspace of its own:
 * a query's keeps a donor's scan for the heads that share it). */
typedef struct oml__reference {
    float *scratch;
    oml_near_ws all;
} oml__reference;
/* Its bytes (8-aligned), and the reference laid out in mem. */
size_t oml__reference_bytes(const oml_index *ix, int32_t k);
void oml__reference_init(oml__reference *r, const oml_index *ix, int32_t k,
                         const oml_row_source *src, void *mem);
/* The exact k nearest of head to q (emb), leaving exclude out, into out. */
int32_t oml__reference_topk(const oml_index *ix, oml__reference *r, int head, const float *q,
                            int32_t k, int32_t exclude, oml_neighbor *out);

/* OML_EINVAL naming the index when it keeps no float columns and src
 * (may be NULL) gives no other way to its rows, else OML_OK. */
int oml__check_columns(const oml_index *ix, const oml_row_source *src, oml_diag *diag);

/* oml_retrieve's answer from the neighbours nb (heads, ranked) of q (heads,
 * emb) in the index: rank (pool: heads * ranked), then the page (an index
 * without float columns: the page's rows embedded from opts->src). */
int32_t oml__retrieve_page(const oml_index *ix, const float *q, const oml_neighbor *nb,
                           const int32_t *cnt, int32_t ranked, const oml_retrieve_opts *opts,
                           int32_t k, pool_hit *pool, oml_hit *out);

#endif
