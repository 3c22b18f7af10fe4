/* fresh.c - classify and retrieve on a view that serves a newer model than
 * its index's (view.h, rerank.h); the store's rows for an index that keeps
 * no float columns (omld_fresh_rows).
 *
 * The index proposes each head's rerank_k nearest rows under its own
 * model; their features are read from the store as they are now (under the
 * read lock, and only while the slot still holds the item the index named:
 * an item deleted or replaced since the index was built drops out); the
 * view's model then answers among them exactly. */
#include "fresh.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Copies index row `row`'s features now into dst (dim): 1, or 0 when its
 * item was deleted or replaced since the index was built. Read lock held. */
static int features_now(const omld_query_ctx *q, const oml_index *ix, int32_t row, float *dst)
{
    if (!oml_index_row_current(ix, q->store, row))
        return 0;
    memcpy(dst, oml_store_features(q->store, ix->slots[row]), (size_t)ix->snap->cfg.dim * sizeof *dst);
    return 1;
}

/* The candidates of x and their features now (rows, feats: malloc'd, freed
 * by the caller even on an error): 0, or an oml error code. */
static int gather(const omld_query_ctx *q, const omld_view *v, const float *x, int32_t k_c,
                  int32_t exclude_row, const uint8_t *allow, oml_rerank_set *c, oml_diag *d)
{
    const oml_index *ix = v->ix;
    size_t dim = (size_t)ix->snap->cfg.dim, cap = (size_t)ix->heads * (size_t)k_c;
    int32_t *rows = malloc(cap * sizeof *rows);
    float *feats = malloc(cap * dim * sizeof *feats);
    c->rows = rows;
    c->feats = feats;
    c->m = 0;
    if (rows == NULL || feats == NULL)
        return oml_diag_set(d, OML_ENOMEM, "", "re-rank workspace");
    int32_t m = 0;
    int rc = oml_rerank_candidates(ix, x, k_c, exclude_row, allow, rows, &m, d);
    if (rc != OML_OK)
        return rc;
    int32_t kept = 0;
    pthread_rwlock_rdlock(&q->lock->rw);
    for (int32_t j = 0; j < m; j++)
        if (features_now(q, ix, rows[j], feats + (size_t)kept * dim))
            rows[kept++] = rows[j];
    pthread_rwlock_unlock(&q->lock->rw);
    c->m = kept;
    return OML_OK;
}

#define CANDIDATES_PER_K 10  /* rerank_candidates is for this many neighbours, */
#define CANDIDATES_MIN_K 5   /* and below this many they stay as for this many */

int32_t omld_fresh_base_candidates(const omld_query_ctx *q, int32_t ranked)
{
    int64_t per = ranked > CANDIDATES_MIN_K ? ranked : CANDIDATES_MIN_K;
    int64_t k_c = (int64_t)q->lim->rerank_k * per / CANDIDATES_PER_K;
    k_c = k_c < OML_SERVE_MAX_K ? k_c : OML_SERVE_MAX_K;
    return k_c > ranked ? (int32_t)k_c : ranked;
}

int32_t omld_fresh_candidates(const omld_query_ctx *q, const omld_view *v, int32_t ranked)
{
    const omld_view *b = v->base ? v->base : v;
    return omld_depth_at(atomic_load(&b->depth.step), omld_fresh_base_candidates(q, ranked));
}

int omld_fresh_depth_sample(const omld_query_ctx *q, const omld_view *v, const float *x,
                            int32_t k, int32_t exclude_row, int64_t *hits, int64_t *total)
{
    int32_t base = omld_fresh_base_candidates(q, k), n_set[OMLD_DEPTH_STEPS];
    int32_t *sets[OMLD_DEPTH_STEPS] = {0};
    oml_diag d = {0};
    oml_rerank_set c;
    memset(hits, 0, OMLD_DEPTH_STEPS * sizeof *hits);
    *total = 0;
    int rc = gather(q, v, x, omld_depth_deep(base), exclude_row, NULL, &c, &d);
    for (int s = 0; rc == OML_OK && s < OMLD_DEPTH_STEPS; s++) {
        int32_t k_c = omld_depth_at(s, base);
        sets[s] = malloc((size_t)v->ix->heads * (size_t)k_c * sizeof *sets[s]);
        rc = sets[s] ? oml_rerank_candidates(v->ix, x, k_c, exclude_row, NULL, sets[s],
                                             &n_set[s], &d)
                     : OML_ENOMEM;
    }
    if (rc == OML_OK)
        rc = oml_rerank_depth(v->ix, v->fresh, x, k, &c, (const int32_t *const *)sets, n_set,
                              OMLD_DEPTH_STEPS, hits, total, &d);
    for (int s = 0; s < OMLD_DEPTH_STEPS; s++)
        free(sets[s]);
    free((void *)c.rows);
    free((void *)c.feats);
    return rc;
}

int omld_fresh_classify(const omld_query_ctx *q, const omld_view *v, const float *x, int32_t k,
                        int32_t exclude_row, const uint8_t *allow, oml_classification *out,
                        oml_diag *d)
{
    oml_rerank_set c;
    int rc = gather(q, v, x, omld_fresh_candidates(q, v, k), exclude_row, allow, &c, d);
    if (rc == OML_OK)
        rc = oml_classify_among(v->ix, v->fresh, x, k, &c, out, d);
    free((void *)c.rows);
    free((void *)c.feats);
    return rc;
}

int omld_fresh_retrieve(const omld_query_ctx *q, const omld_view *v, const float *x, int32_t k,
                        int32_t exclude_row, const oml_retrieve_opts *opts, oml_hit *out,
                        int32_t *n_out, oml_diag *d)
{
    oml_rerank_set c;
    int32_t ranked = k + (opts ? opts->offset : 0);
    int rc = gather(q, v, x, omld_fresh_candidates(q, v, ranked), exclude_row,
                    opts ? opts->allow : NULL, &c, d);
    if (rc == OML_OK)
        rc = oml_retrieve_among(v->ix, v->fresh, x, k, &c, opts, out, n_out, d);
    free((void *)c.rows);
    free((void *)c.feats);
    return rc;
}

/* oml_row_source.embed over the store of the omld_query_ctx in arg. */
static int embed_rows(void *arg, const oml_index *ix, const int32_t *rows, int32_t m, float *E,
                      uint8_t *live)
{
    const omld_query_ctx *q = arg;
    size_t dim = (size_t)ix->snap->cfg.dim, e = (size_t)ix->emb, H = (size_t)ix->heads;
    float *X = malloc((size_t)m * dim * sizeof *X), *T = malloc(H * (size_t)m * e * sizeof *T);
    if (X == NULL || T == NULL) {
        free(X);
        free(T);
        return OML_ENOMEM;
    }
    int32_t kept = 0;
    if (q->lock) /* (none: a store only this thread uses, as at a start's first view) */
        pthread_rwlock_rdlock(&q->lock->rw);
    for (int32_t j = 0; j < m; j++) {
        live[j] = (uint8_t)features_now(q, ix, rows[j], X + (size_t)kept * dim);
        kept += live[j];
    }
    if (q->lock)
        pthread_rwlock_unlock(&q->lock->rw);
    int rc = kept > 0 ? oml_snapshot_embed(ix->snap, X, kept, T) : OML_OK;
    /* T (heads, kept, emb) -> E (heads, m, emb) at the live rows' places. */
    for (size_t h = 0; rc == OML_OK && h < H; h++)
        for (int32_t j = 0, t = 0; j < m; j++)
            if (live[j])
                memcpy(E + (h * (size_t)m + (size_t)j) * e, T + (h * (size_t)kept + (size_t)t++) * e,
                       e * sizeof *E);
    free(X);
    free(T);
    return rc;
}

void omld_fresh_rows(const omld_query_ctx *q, oml_row_source *src)
{
    src->embed = embed_rows;
    src->arg = (void *)q;
}
