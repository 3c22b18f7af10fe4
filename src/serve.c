/* serve.c - classification, verification and retrieval (OAHU Sec. 3.6).
 *
 * DESIGN: pure functions over an immutable index or snapshot; they run on
 * query pool threads (and the evaluation tool) and never touch the store or
 * the learner. Each call allocates one workspace and frees it before
 * returning, so a failed allocation is OML_ENOMEM and nothing leaks.
 *
 * Exactness: the batched path (serve_batch.c) answers each query with the
 * code below from the same neighbours, so a batch answers bit for bit as
 * its queries one by one (see its DESIGN for why the neighbours agree).
 */
#include "serve.h"
#include "serve_int.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

/* Validation shared by classify and retrieve. */
int oml__check_query(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                     oml_diag *diag)
{
    if (ix == NULL || x == NULL)
        return oml_diag_set(diag, OML_EINVAL, "index", "no index or no query");
    if (k < 1 || k > OML_SERVE_MAX_K)
        return oml_diag_set(diag, OML_EINVAL, "k", "k %d not in [1, %d]", (int)k,
                            OML_SERVE_MAX_K);
    if (!all_finite(x, (size_t)ix->snap->cfg.dim))
        return oml_diag_set(diag, OML_ENONFINITE, "features", "query has a NaN or infinity");
    if (exclude_row < -1 || exclude_row >= ix->n)
        return oml_diag_set(diag, OML_EINVAL, "exclude_row", "row %d not in [-1, %d)",
                            (int)exclude_row, (int)ix->n);
    return OML_OK;
}

int oml__check_columns(const oml_index *ix, const oml_row_source *src, oml_diag *diag)
{
    if (ix->emb_cols != NULL || ix->n == 0 || src != NULL)
        return OML_OK;
    return oml_diag_set(diag, OML_EINVAL, "index", "the index keeps no item embeddings (only "
                        "its lists' codes): a row source must embed the rows it re-ranks");
}

int oml__query_ws_init(query_ws *w, const oml_index *ix, int32_t k, size_t extra,
                       void **extra_out)
{
    size_t nnb = (size_t)ix->heads * (size_t)k;
    /* An index with lists needs no row-sized scratch: its search reads the
     * lists' codes (at a million rows, 4 MB less to fault in per query). */
    size_t nq = (size_t)ix->heads * (size_t)ix->emb;
    size_t ns = ix->hl ? oml_near_ws_bytes(ix, k) : (size_t)ix->n * sizeof(float);
    char *p = malloc(nnb * sizeof(oml_neighbor) + extra + ns + nq * sizeof(float));
    if (p == NULL)
        return OML_ENOMEM;
    w->_block = p;
    w->nb = (oml_neighbor *)(void *)p;
    p += nnb * sizeof(oml_neighbor);
    *extra_out = p; /* extra bytes, 8-aligned (oml_neighbor is 8 bytes) */
    p += extra;
    w->scratch = NULL;
    if (ix->hl)
        oml_near_ws_init(&w->near, ix, k, p);
    else
        w->scratch = (float *)(void *)p;
    w->q = (float *)(void *)(p + ns);
    return OML_OK;
}

int oml__query_neighbors(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                         const uint8_t *allow, query_ws *w)
{
    int rc = oml_snapshot_embed(ix->snap, x, 1, w->q); /* (heads, 1, emb) */
    if (rc != OML_OK)
        return rc;
    oml__embedded_neighbors(ix, k, exclude_row, allow, w);
    return OML_OK;
}

void oml__embedded_neighbors(const oml_index *ix, int32_t k, int32_t exclude_row,
                             const uint8_t *allow, query_ws *w)
{
    for (int h = 0; h < ix->heads; h++) {
        const float *qh = w->q + (size_t)h * (size_t)ix->emb;
        oml_neighbor *nb = w->nb + (size_t)h * (size_t)k;
        w->cnt[h] = ix->hl ? oml_index_topk_near(ix, h, qh, k, -1, exclude_row, allow, nb, &w->near)
                           : oml_index_topk(ix, h, qh, k, exclude_row, allow, nb, w->scratch);
    }
}

int oml_classify(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                 oml_classification *out, oml_diag *diag)
{
    return oml_classify_allowed(ix, x, k, exclude_row, NULL, out, diag);
}

int oml_classify_allowed(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                         const uint8_t *allow, oml_classification *out, oml_diag *diag)
{
    return oml_classify_from(ix, x, k, exclude_row, allow, NULL, out, diag);
}

int oml_classify_from(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                      const uint8_t *allow, const oml_row_source *src, oml_classification *out,
                      oml_diag *diag)
{
    int rc = oml__check_query(ix, x, k, exclude_row, diag);
    if (rc == OML_OK)
        rc = oml__check_columns(ix, src, diag);
    if (rc != OML_OK)
        return rc;
    if (ix->n == 0)
        return oml_diag_set(diag, OML_EEMPTY, "index", "the index has no items");
    size_t nl = (size_t)ix->n_labels, nt = (size_t)ix->heads * (size_t)k;
    query_ws w;
    void *ex;
    if (oml__query_ws_init(&w, ix, k, oml__vote_ws_bytes(nl, nt), &ex) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "", "classify workspace");
    vote_ws vw;
    oml__vote_ws_init(&vw, ex, nl, nt);
    if (ix->hl)
        w.near.src = src;
    rc = oml__query_neighbors(ix, x, k, exclude_row, allow, &w);
    if (rc == OML_OK) {
        oml_classification res;
        int32_t label;
        oml__voter vt = {ix->heads, ix->snap->alpha, ix->labels};
        rc = oml__vote(&vt, w.nb, w.cnt, k, &vw, &label, &res);
        if (rc == OML_OK)
            *out = res;
        else
            oml_diag_set(diag, rc, "index", "no labelled neighbour");
    } else {
        oml_diag_set(diag, rc, "", "embedding the query");
    }
    free(w._block);
    return rc;
}

int oml_verify(const oml_snapshot *s, const float *x1, const float *x2, float threshold,
               oml_verification *out, oml_diag *diag)
{
    if (s == NULL || x1 == NULL || x2 == NULL || out == NULL)
        return oml_diag_set(diag, OML_EINVAL, "features", "missing snapshot or vector");
    if (!(threshold > 0.0f && threshold < 1.0f))
        return oml_diag_set(diag, OML_EINVAL, "threshold", "threshold %g not in (0, 1)",
                            (double)threshold);
    size_t dim = (size_t)s->cfg.dim, e = (size_t)s->cfg.emb, H = (size_t)oml_snapshot_heads(s);
    if (!all_finite(x1, dim) || !all_finite(x2, dim))
        return oml_diag_set(diag, OML_ENONFINITE, "features", "a vector has a NaN or infinity");
    float *f = malloc(2 * H * e * sizeof *f);
    if (f == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "", "verify workspace");
    /* Two one-row calls, so that x1 == x2 embeds identically and gives D = 0. */
    int rc = oml_snapshot_embed(s, x1, 1, f);
    if (rc == OML_OK)
        rc = oml_snapshot_embed(s, x2, 1, f + H * e);
    if (rc != OML_OK) {
        free(f);
        return oml_diag_set(diag, rc, "", "embedding the pair");
    }
    oml_verification res;
    memset(&res, 0, sizeof res);
    double p = 0.0;
    for (size_t h = 0; h < H; h++) {
        res.dist[h] = oml_index_dist(f + h * e, f + (H + h) * e, (int32_t)e);
        if (res.dist[h] / 2.0f < threshold) /* p_l of Eq. 26: D/2 normalised to [0, 1] */
            p += (double)s->alpha[h];
    }
    res.probability = (float)p;      /* Eq. 26 */
    res.similar = res.probability >= 0.5f;
    free(f);
    *out = res;
    return OML_OK;
}

static int by_row_then_score(const void *pa, const void *pb)
{
    const pool_hit *a = pa, *b = pb;
    if (a->row != b->row)
        return a->row < b->row ? -1 : 1;
    return a->score > b->score ? -1 : a->score < b->score ? 1 : 0;
}

static int by_score_then_row(const void *pa, const void *pb)
{
    const pool_hit *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return a->row < b->row ? -1 : a->row > b->row ? 1 : 0;
}

float oml__pair_similarity(const float *alpha, int heads, int32_t emb, const float *q,
                           const float *f, size_t head_stride, size_t stride)
{
    double sim = 0.0;
    for (int h = 0; h < heads; h++) {
        const float *qh = q + (size_t)h * (size_t)emb, *fh = f + (size_t)h * head_stride;
        double dot = 0.0;
        for (int32_t j = 0; j < emb; j++)
            dot += (double)qh[j] * (double)fh[(size_t)j * stride];
        sim += (double)alpha[h] * dot;
    }
    return (float)(sim < -1.0 ? -1.0 : sim > 1.0 ? 1.0 : sim);
}

int oml__check_offset(int32_t offset, int32_t k, oml_diag *diag)
{
    if (offset < 0 || offset > OML_SERVE_MAX_K - k)
        return oml_diag_set(diag, OML_EINVAL, "offset", "offset %d + k %d exceeds %d",
                            (int)offset, (int)k, OML_SERVE_MAX_K);
    return OML_OK;
}

size_t oml__rank_pool(const oml__voter *vt, const oml_neighbor *nb, const int32_t *cnt, int32_t k,
                      pool_hit *pool)
{
    size_t np = 0;
    for (int h = 0; h < vt->heads; h++) {
        const oml_neighbor *nh = nb + (size_t)h * (size_t)k;
        for (int32_t j = 0; j < cnt[h]; j++)
            pool[np++] = (pool_hit){nh[j].row, oml__eq23_score(nh[j].dist, nh[0].dist,
                                                               nh[cnt[h] - 1].dist,
                                                               vt->alpha[h])};
    }
    /* "Sort descending and keep the top k distinct": the first occurrence of
     * a row in descending order is its best score, so keep each row's best,
     * then sort the distinct rows by (score desc, row asc). */
    qsort(pool, np, sizeof *pool, by_row_then_score);
    size_t nd = 0;
    for (size_t i = 0; i < np; i++)
        if (nd == 0 || pool[nd - 1].row != pool[i].row)
            pool[nd++] = pool[i];
    qsort(pool, nd, sizeof *pool, by_score_then_row);
    return nd;
}

int32_t oml__page_hits(const float *alpha, int heads, int32_t emb, const float *q,
                       const oml__rows_emb *re, const pool_hit *pool, size_t nd,
                       const oml_retrieve_opts *opts, int32_t k, const int32_t *rows,
                       oml_hit *out)
{
    size_t offset = opts ? (size_t)opts->offset : 0;
    float floor = opts ? opts->min_similarity : -INFINITY;
    int32_t cnt = 0;
    for (size_t i = offset; i < nd && cnt < k; i++) {
        size_t r = (size_t)pool[i].row;
        float sim = oml__pair_similarity(alpha, heads, emb, q, re->f + r * re->row_step,
                                         re->head_stride, re->stride);
        if (sim >= floor)
            out[cnt++] = (oml_hit){rows ? rows[r] : (int32_t)r, (float)pool[i].score, sim};
    }
    return cnt;
}

/* oml__page_hits for an index without float columns: the ranked rows
 * embedded from opts->src a block at a time, as far as the page needs; a
 * row whose item is gone since the index was built is left out. */
static int32_t page_from_source(const oml_index *ix, const float *q, const pool_hit *pool,
                                size_t nd, const oml_retrieve_opts *opts, int32_t k, oml_hit *out)
{
    const oml_row_source *src = opts ? opts->src : NULL;
    size_t e = (size_t)ix->emb, offset = opts ? (size_t)opts->offset : 0;
    float floor = opts ? opts->min_similarity : -INFINITY;
    float *E = src ? malloc((size_t)ix->heads * OML_ROW_SOURCE_BLOCK * e * sizeof *E) : NULL;
    int32_t cnt = 0, rows[OML_ROW_SOURCE_BLOCK];
    uint8_t live[OML_ROW_SOURCE_BLOCK];
    for (size_t i = offset; E != NULL && i < nd && cnt < k; i += OML_ROW_SOURCE_BLOCK) {
        int32_t b = nd - i < OML_ROW_SOURCE_BLOCK ? (int32_t)(nd - i) : OML_ROW_SOURCE_BLOCK;
        for (int32_t j = 0; j < b; j++)
            rows[j] = pool[i + (size_t)j].row;
        if (src->embed(src->arg, ix, rows, b, E, live) != OML_OK)
            break;
        for (int32_t j = 0; j < b && cnt < k; j++) {
            if (!live[j])
                continue;
            /* Row j's head h at E + h (b, emb) + j emb. */
            float sim = oml__pair_similarity(ix->snap->alpha, ix->heads, ix->emb, q,
                                             E + (size_t)j * e, (size_t)b * e, 1);
            if (sim >= floor)
                out[cnt++] = (oml_hit){rows[j], (float)pool[i + (size_t)j].score, sim};
        }
    }
    free(E);
    return cnt;
}

int32_t oml__retrieve_page(const oml_index *ix, const float *q, const oml_neighbor *nb,
                           const int32_t *cnt, int32_t ranked, const oml_retrieve_opts *opts,
                           int32_t k, pool_hit *pool, oml_hit *out)
{
    oml__voter vt = {ix->heads, ix->snap->alpha, ix->labels};
    size_t nd = oml__rank_pool(&vt, nb, cnt, ranked, pool);
    if (ix->emb_cols == NULL)
        return page_from_source(ix, q, pool, nd, opts, k, out);
    /* The index's columns: row r's head h at emb_cols + h (emb, n) + r. */
    oml__rows_emb re = {ix->emb_cols, 1, (size_t)ix->emb * (size_t)ix->n, (size_t)ix->n};
    return oml__page_hits(ix->snap->alpha, ix->heads, ix->emb, q, &re, pool, nd, opts, k, NULL,
                          out);
}

int oml_retrieve(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                 const oml_retrieve_opts *opts, oml_hit *out, int32_t *n_out, oml_diag *diag)
{
    int rc = oml__check_query(ix, x, k, exclude_row, diag);
    if (rc != OML_OK)
        return rc;
    int32_t offset = opts ? opts->offset : 0;
    if ((rc = oml__check_offset(offset, k, diag)) != OML_OK ||
        (rc = oml__check_columns(ix, opts ? opts->src : NULL, diag)) != OML_OK)
        return rc;
    if (ix->n == 0) {
        *n_out = 0; /* retrieving from nothing finds nothing */
        return OML_OK;
    }
    int32_t ranked = offset + k; /* the ranking a page is cut from */
    size_t P = (size_t)ix->heads * (size_t)ranked;
    query_ws w;
    void *ex;
    if (oml__query_ws_init(&w, ix, ranked, P * sizeof(pool_hit), &ex) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "", "retrieve workspace");
    pool_hit *pool = ex;
    if (ix->hl)
        w.near.src = opts ? opts->src : NULL;
    rc = oml__query_neighbors(ix, x, ranked, exclude_row, opts ? opts->allow : NULL, &w);
    if (rc != OML_OK) {
        free(w._block);
        return oml_diag_set(diag, rc, "", "embedding the query");
    }
    *n_out = oml__retrieve_page(ix, w.q, w.nb, w.cnt, ranked, opts, k, pool, out);
    free(w._block);
    return OML_OK;
}

size_t oml__reference_bytes(const oml_index *ix, int32_t k)
{
    return ix->emb_cols ? ((size_t)ix->n * sizeof(float) + 7) & ~(size_t)7
                        : oml_near_ws_bytes(ix, k);
}

void oml__reference_init(oml__reference *r, const oml_index *ix, int32_t k,
                         const oml_row_source *src, void *mem)
{
    r->scratch = mem;
    if (ix->emb_cols == NULL) {
        oml_near_ws_init(&r->all, ix, k, mem);
        r->all.src = src;
    }
}

int32_t oml__reference_topk(const oml_index *ix, oml__reference *r, int head, const float *q,
                            int32_t k, int32_t exclude, oml_neighbor *out)
{
    return ix->emb_cols ? oml_index_topk(ix, head, q, k, exclude, NULL, out, r->scratch)
                        : oml_index_topk_lists(ix, head, q, k, exclude, NULL, out, &r->all);
}

void oml_index_recall(const oml_index *ix, const float *x, int32_t k, int32_t exclude_row,
                      const oml_row_source *src, int64_t *hits, int64_t *total)
{
    memset(hits, 0, OML_MAX_HEADS * sizeof *hits);
    memset(total, 0, OML_MAX_HEADS * sizeof *total);
    if (ix == NULL || ix->hl == NULL || (ix->emb_cols == NULL && src == NULL) ||
        oml__check_query(ix, x, k, exclude_row, NULL) != OML_OK)
        return;
    query_ws w;
    void *ex;
    size_t extra = (size_t)k * sizeof(oml_neighbor) + oml__reference_bytes(ix, k);
    if (oml__query_ws_init(&w, ix, k, extra, &ex) != OML_OK)
        return;
    oml_neighbor *exact = ex;
    oml__reference ref;
    oml__reference_init(&ref, ix, k, src, exact + k);
    w.near.src = src;
    if (oml__query_neighbors(ix, x, k, exclude_row, NULL, &w) == OML_OK) { /* the lists' answer */
        for (int h = 0; h < ix->heads; h++) {
            int32_t n = oml__reference_topk(ix, &ref, h, w.q + (size_t)h * (size_t)ix->emb, k,
                                            exclude_row, exact);
            const oml_neighbor *got = w.nb + (size_t)h * (size_t)k;
            for (int32_t i = 0; i < w.cnt[h]; i++)
                for (int32_t j = 0; j < n; j++)
                    hits[h] += got[i].row == exact[j].row;
            total[h] += n;
        }
    }
    free(w._block);
}
