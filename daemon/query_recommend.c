/* query_recommend.c - Recommend: items like the positive examples and
 * unlike the negative ones (omld.proto RecommendRequest), on libuv's
 * threadpool like query.c. Every example is resolved first (an id's
 * features copied out of the store, as for a query by id), so an unknown
 * id fails the request naming its example; examples named by id are left
 * out of the answer with the request's own exclude_ids; then liboml's
 * oml_recommend searches the view's index (under a fresh view, the index
 * it re-ranks, under that index's model; an index without float columns
 * embeds the rows it re-ranks from the store). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fresh.h"
#include "query_int.h"
#include "serve.h"
#include "validate.h"

/* The examples of one side, their features side by side in X (n, dim),
 * their ids (NULL for vectors) in ids. 0, or the error in r. */
static int resolve_side(const omld_query_ctx *q, const omld_view *v, Omld__ItemRef *const *refs,
                        size_t n, const char *side, float *X, char **ids, omld_reply *r)
{
    size_t dim = (size_t)v->ix->snap->cfg.dim;
    for (size_t i = 0; i < n; i++) {
        char field[OMLD_QUERY_FIELD_CAP];
        snprintf(field, sizeof field, "recommend.%s[%zu]", side, i);
        query_item qi;
        int rc = omld__query_resolve(q, v, refs[i], field, &qi, r);
        if (rc != 0)
            return rc;
        memcpy(X + i * dim, qi.x, dim * sizeof *X);
        ids[i] = refs[i]->ref_case == OMLD__ITEM_REF__REF_ID ? refs[i]->id : NULL;
    }
    return 0;
}

static int run_recommend(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                         omld_reply *r)
{
    const Omld__RecommendRequest *m = req->recommend;
    size_t dim = (size_t)v->ix->snap->cfg.dim, np = m->n_positive, nn = m->n_negative;
    Omld__RetrieveRequest as;
    omld_recommend_as_retrieve(m, &as);
    int32_t k = omld__query_k(as.k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K, as.k, q->lim);
    float *X = malloc((np + nn) * dim * sizeof *X);
    /* exclude_ids: the request's, then every example named by id. */
    char **excl = malloc((as.n_exclude_ids + np + nn + 1) * sizeof *excl);
    oml_hit *hits = omld_reply_alloc(r, (size_t)(k > 0 ? k : 1) * sizeof *hits);
    if (X == NULL || excl == NULL || hits == NULL) {
        free(X);
        free(excl);
        return omld__query_oom(r, "recommend");
    }
    char **ex_ids = excl + as.n_exclude_ids;
    int rc = resolve_side(q, v, m->positive, np, "positive", X, ex_ids, r);
    if (rc == 0)
        rc = resolve_side(q, v, m->negative, nn, "negative", X + np * dim, ex_ids + np, r);
    size_t ne = as.n_exclude_ids;
    if (rc == 0) {
        if (as.n_exclude_ids > 0) /* (NULL when empty) */
            memcpy(excl, as.exclude_ids, as.n_exclude_ids * sizeof *excl);
        for (size_t i = 0; i < np + nn; i++)
            if (ex_ids[i] != NULL)
                excl[ne++] = ex_ids[i];
        as.exclude_ids = excl;
        as.n_exclude_ids = ne;
    }
    oml_retrieve_opts opts = {0};
    if (rc == 0) {
        omld__query_retrieve_opts(&as, &opts);
        if (omld__query_retrieve_filter(q, v, &as, &opts) != 0)
            rc = omld__query_oom(r, "recommend");
    }
    int32_t n = 0;
    oml_diag d = {0};
    oml_row_source rows; /* an index without float columns: its rows from the store */
    omld_fresh_rows(q, &rows);
    opts.src = &rows;
    for (int pass = 0; rc == 0 && pass < 2; pass++) {
        int lib = oml_recommend(v->ix, X, (int32_t)np, nn ? X + np * dim : NULL, (int32_t)nn, k,
                                &opts, hits, &n, &d);
        int again = lib == OML_OK && pass == 0 ? omld__query_exclude_gone(q, v->ix, hits, n, &opts)
                                               : 0;
        if (lib != OML_OK)
            rc = omld__query_lib_error(r, lib, &d, "recommend");
        else if (again < 0)
            rc = omld__query_oom(r, "recommend");
        else if (again == 0)
            break;
    }
    free((void *)opts.allow);
    free(X);
    free(excl);
    if (rc != 0)
        return rc;
    Omld__RetrieveResponse *hitlist =
        omld__query_retrieve_response(q, v->ix, hits, n, as.with_metadata, r);
    Omld__RecommendResponse *resp = omld_reply_alloc(r, sizeof *resp);
    if (hitlist == NULL || resp == NULL)
        return omld__query_oom(r, "recommend");
    omld__recommend_response__init(resp);
    resp->n_hits = hitlist->n_hits;
    resp->hits = hitlist->hits;
    r->msg.recommend = resp;
    r->msg.body_case = OMLD__RESPONSE__BODY_RECOMMEND;
    return 0;
}

void omld_query_recommend(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                          omld_reply *r)
{
    const Omld__RecommendRequest *m = req->recommend;
    omld__query_answer(q, live, m->model_opt_case == OMLD__RECOMMEND_REQUEST__MODEL_OPT_MODEL,
                       m->model, "recommend", run_recommend, req, r);
}
