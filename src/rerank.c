/* rerank.c - answering under a newer model than the index's (rerank.h).
 *
 * DESIGN: the candidates come from serve.c's own search (oml__query_neighbors;
 * on an index with lists, the rows its search would re-rank, cut by the
 * codes' order: oml_index_near_candidates)
 * and the answer from serve.c's own rules (oml__vote, oml__rank_pool), so
 * an answer among all rows is the answer oml_classify / oml_retrieve give
 * on an index built under the newer model. Between the two, the candidates
 * are embedded under the newer model and each head keeps its k nearest,
 * by the same canonical distance (oml_index_dist). Neighbours name
 * candidates by position while voting; hits are mapped back to index rows. */
#include "rerank.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve_int.h"

static int cmp_int32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int oml_rerank_candidates(const oml_index *ix, const float *x, int32_t k_c, int32_t exclude_row,
                          const uint8_t *allow, int32_t *rows, int32_t *n_rows, oml_diag *diag)
{
    *n_rows = 0;
    int rc = oml__check_query(ix, x, k_c, exclude_row, diag);
    if (rc != OML_OK || ix->n == 0)
        return rc;
    query_ws w;
    void *ex;
    if (oml__query_ws_init(&w, ix, k_c, 0, &ex) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "", "candidate workspace");
    int32_t m = 0;
    if (ix->hl == NULL) {
        rc = oml__query_neighbors(ix, x, k_c, exclude_row, allow, &w);
        for (int h = 0; rc == OML_OK && h < ix->heads; h++)
            for (int32_t j = 0; j < w.cnt[h]; j++)
                rows[m++] = w.nb[(size_t)h * (size_t)k_c + (size_t)j].row;
    } else {
        /* The lists' rows by the codes' order, without the exact re-rank
         * under the index's model: the newer model re-ranks them anyway. */
        rc = oml_snapshot_embed(ix->snap, x, 1, w.q);
        for (int h = 0; rc == OML_OK && h < ix->heads; h++)
            m += oml_index_near_candidates(ix, h, w.q + (size_t)h * (size_t)ix->emb, k_c,
                                           exclude_row, allow, rows + m, &w.near);
    }
    free(w._block);
    if (rc != OML_OK)
        return oml_diag_set(diag, rc, "", "embedding the query");
    qsort(rows, (size_t)m, sizeof *rows, cmp_int32);
    int32_t d = 0;
    for (int32_t i = 0; i < m; i++)
        if (d == 0 || rows[d - 1] != rows[i])
            rows[d++] = rows[i];
    *n_rows = d;
    return OML_OK;
}

void oml_rerank_recall(const oml_index *ix, const float *x, int32_t k, int32_t k_c,
                       int32_t exclude_row, const oml_row_source *src, int64_t *hits,
                       int64_t *total)
{
    memset(hits, 0, OML_MAX_HEADS * sizeof *hits);
    memset(total, 0, OML_MAX_HEADS * sizeof *total);
    if (ix == NULL || ix->hl == NULL || k_c < k || (ix->emb_cols == NULL && src == NULL) ||
        oml__check_query(ix, x, k_c, exclude_row, NULL) != OML_OK || k < 1)
        return;
    query_ws w;
    void *ex;
    size_t extra = ((size_t)k + (size_t)k_c) * sizeof(oml_neighbor) + oml__reference_bytes(ix, k);
    if (oml__query_ws_init(&w, ix, k_c, extra, &ex) != OML_OK)
        return;
    oml_neighbor *exact = ex;
    int32_t *rows = (int32_t *)(void *)(exact + k);
    oml__reference ref; /* after rows' k_c slots of an oml_neighbor each: 8-aligned */
    oml__reference_init(&ref, ix, k, src, (oml_neighbor *)(void *)rows + k_c);
    if (oml_snapshot_embed(ix->snap, x, 1, w.q) == OML_OK) {
        for (int h = 0; h < ix->heads; h++) { /* ascending: a donor's scan comes first */
            const float *qh = w.q + (size_t)h * (size_t)ix->emb;
            int32_t m = oml_index_near_candidates(ix, h, qh, k_c, exclude_row, NULL, rows, &w.near);
            int32_t n = oml__reference_topk(ix, &ref, h, qh, k, exclude_row, exact);
            for (int32_t i = 0; i < n; i++)
                for (int32_t j = 0; j < m; j++)
                    hits[h] += exact[i].row == rows[j];
            total[h] += n;
        }
    }
    free(w._block);
}

static int by_dist_then_row(const void *pa, const void *pb)
{
    const oml_neighbor *a = pa, *b = pb;
    if (a->dist != b->dist)
        return a->dist < b->dist ? -1 : 1;
    return (a->row > b->row) - (a->row < b->row);
}

/* The newest model's view of the candidates: q (heads, emb) the query,
 * E (heads, m, emb) the candidates, and each head's k nearest of them
 * (neighbour rows are candidate positions) in nb (heads, k), cnt. */
typedef struct among_ws {
    float *q, *E;
    oml_neighbor *nb, *all;
    int32_t cnt[OML_MAX_LAYERS + 1];
    int32_t *labels; /* (m) the candidates' labels */
    void *_block;
} among_ws;

static int among_init(among_ws *w, const oml_index *ix, const oml_snapshot *snap,
                      const float *x, int32_t k, const oml_rerank_set *c, size_t extra,
                      void **extra_out)
{
    int heads = oml_snapshot_heads(snap);
    size_t e = (size_t)snap->cfg.emb, m = (size_t)c->m, H = (size_t)heads;
    size_t bytes = (H * (size_t)k + m) * sizeof(oml_neighbor) + extra +
                   (H * e + H * m * e) * sizeof(float) + m * sizeof(int32_t);
    char *p = malloc(bytes);
    if (p == NULL)
        return OML_ENOMEM;
    w->_block = p;
    w->nb = (oml_neighbor *)(void *)p;
    w->all = w->nb + H * (size_t)k;
    *extra_out = w->all + m;
    w->q = (float *)(void *)((char *)*extra_out + extra);
    w->E = w->q + H * e;
    w->labels = (int32_t *)(void *)(w->E + H * m * e);
    /* One-row embedding of the query, as every serving path does (serve.c). */
    int rc = oml_snapshot_embed(snap, x, 1, w->q);
    if (rc == OML_OK && m > 0)
        rc = oml_snapshot_embed(snap, c->feats, c->m, w->E);
    for (size_t j = 0; j < m; j++)
        w->labels[j] = ix->labels[c->rows[j]];
    for (int h = 0; rc == OML_OK && h < heads; h++) {
        const float *qh = w->q + (size_t)h * e, *Eh = w->E + (size_t)h * m * e;
        for (size_t j = 0; j < m; j++)
            w->all[j] = (oml_neighbor){(int32_t)j, oml_index_dist(qh, Eh + j * e, (int32_t)e)};
        qsort(w->all, m, sizeof *w->all, by_dist_then_row);
        w->cnt[h] = (int32_t)(m < (size_t)k ? m : (size_t)k);
        memcpy(w->nb + (size_t)h * (size_t)k, w->all, (size_t)w->cnt[h] * sizeof *w->nb);
    }
    if (rc != OML_OK)
        free(p);
    return rc;
}

static int check_among(const oml_index *ix, const oml_snapshot *snap, const float *x, int32_t k,
                       const oml_rerank_set *c, oml_diag *diag)
{
    if (snap == NULL || c == NULL || c->m < 0 || (c->m > 0 && (!c->rows || !c->feats)))
        return oml_diag_set(diag, OML_EINVAL, "index", "no model or no candidates");
    if (snap->cfg.dim != ix->snap->cfg.dim)
        return oml_diag_set(diag, OML_EDIM, "features", "the model's dimension is not the index's");
    return oml__check_query(ix, x, k, -1, diag);
}

int oml_classify_among(const oml_index *ix, const oml_snapshot *snap, const float *x, int32_t k,
                       const oml_rerank_set *c, oml_classification *out, oml_diag *diag)
{
    int rc = check_among(ix, snap, x, k, c, diag);
    if (rc != OML_OK)
        return rc;
    if (c->m == 0)
        return oml_diag_set(diag, OML_EEMPTY, "index", "no candidate items");
    size_t nl = (size_t)ix->n_labels, nt = (size_t)oml_snapshot_heads(snap) * (size_t)k;
    among_ws w;
    void *ex;
    if ((rc = among_init(&w, ix, snap, x, k, c, oml__vote_ws_bytes(nl, nt), &ex)) != OML_OK)
        return oml_diag_set(diag, rc, "", "re-ranking the candidates");
    vote_ws vw;
    oml__vote_ws_init(&vw, ex, nl, nt);
    oml__voter vt = {oml_snapshot_heads(snap), snap->alpha, w.labels};
    oml_classification res;
    int32_t label;
    rc = oml__vote(&vt, w.nb, w.cnt, k, &vw, &label, &res);
    free(w._block);
    if (rc != OML_OK)
        return oml_diag_set(diag, rc, "index", "no labelled neighbour");
    *out = res;
    return OML_OK;
}

int oml_retrieve_among(const oml_index *ix, const oml_snapshot *snap, const float *x, int32_t k,
                       const oml_rerank_set *c, const oml_retrieve_opts *opts, oml_hit *out,
                       int32_t *n_out, oml_diag *diag)
{
    int rc = check_among(ix, snap, x, k, c, diag);
    if (rc != OML_OK)
        return rc;
    int32_t offset = opts ? opts->offset : 0;
    if ((rc = oml__check_offset(offset, k, diag)) != OML_OK)
        return rc;
    *n_out = 0;
    if (c->m == 0)
        return OML_OK;
    int32_t ranked = offset + k;
    size_t P = (size_t)oml_snapshot_heads(snap) * (size_t)ranked;
    among_ws w;
    void *ex;
    if ((rc = among_init(&w, ix, snap, x, ranked, c, P * sizeof(pool_hit), &ex)) != OML_OK)
        return oml_diag_set(diag, rc, "", "re-ranking the candidates");
    pool_hit *pool = ex;
    oml__voter vt = {oml_snapshot_heads(snap), snap->alpha, w.labels};
    size_t nd = oml__rank_pool(&vt, w.nb, w.cnt, ranked, pool);
    /* Candidate j's rows under snap: E (heads, m, emb) + j emb. */
    size_t e = (size_t)snap->cfg.emb;
    oml__rows_emb re = {w.E, e, (size_t)c->m * e, 1};
    *n_out = oml__page_hits(snap->alpha, oml_snapshot_heads(snap), (int32_t)e, w.q, &re, pool, nd,
                            opts, k, c->rows, out);
    free(w._block);
    return OML_OK;
}

int oml_rerank_depth(const oml_index *ix, const oml_snapshot *snap, const float *x, int32_t k,
                     const oml_rerank_set *c, const int32_t *const *sets, const int32_t *n_set,
                     int n_sets, int64_t *hits, int64_t *total, oml_diag *diag)
{
    memset(hits, 0, (size_t)n_sets * sizeof *hits);
    *total = 0;
    int rc = check_among(ix, snap, x, k, c, diag);
    if (rc != OML_OK || c->m == 0)
        return rc;
    among_ws w;
    void *ex;
    if ((rc = among_init(&w, ix, snap, x, k, c, 0, &ex)) != OML_OK)
        return oml_diag_set(diag, rc, "", "re-ranking the candidates");
    for (int h = 0; h < oml_snapshot_heads(snap); h++)
        for (int32_t j = 0; j < w.cnt[h]; j++) {
            int32_t row = c->rows[w.nb[(size_t)h * (size_t)k + (size_t)j].row];
            for (int i = 0; i < n_sets; i++)
                hits[i] += bsearch(&row, sets[i], (size_t)n_set[i], sizeof row, cmp_int32) != NULL;
            (*total)++;
        }
    free(w._block);
    return OML_OK;
}
