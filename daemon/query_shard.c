/* query_shard.c - ShardRetrieve: one shard's part of a retrieval fanned
 * out over shards (omld.proto SHARDS; src/serve_shard.h). The query, k,
 * filters and paging are Retrieve's (query_int.h); the answer is the
 * offset + k nearest per head of this view's index with their distances,
 * and each candidate's store slot and pair similarity, for
 * proto/shard_merge.c. Query pool threads. */
#include <stdlib.h>
#include <string.h>

#include "query_int.h"
#include "serve_shard.h"

/* The candidates as the answer's message, in r's arena, each named by the
 * store's id under q's read lock: one whose item was deleted or replaced
 * since the index was built is left out, of the heads' lists too. NULL:
 * out of memory. */
static Omld__ShardRetrieveResponse *answer(const omld_query_ctx *q, const omld_view *v,
                                           const oml_candidates *c, omld_reply *r)
{
    const oml_index *ix = v->ix;
    Omld__ShardRetrieveResponse *m = omld_reply_alloc(r, sizeof *m);
    float *alpha = omld_reply_alloc(r, (size_t)ix->heads * sizeof *alpha);
    Omld__ShardCandidate *cs = omld_reply_alloc(r, ((size_t)c->n_rows + 1) * sizeof *cs);
    Omld__ShardCandidate **cp = omld_reply_alloc(r, ((size_t)c->n_rows + 1) * sizeof *cp);
    int32_t *at = omld_reply_alloc(r, ((size_t)c->n_rows + 1) * sizeof *at);
    Omld__ShardHead *hs = omld_reply_alloc(r, (size_t)ix->heads * sizeof *hs);
    Omld__ShardHead **hp = omld_reply_alloc(r, (size_t)ix->heads * sizeof *hp);
    if (!m || !alpha || !cs || !cp || !at || !hs || !hp)
        return NULL;
    omld__shard_retrieve_response__init(m);
    memcpy(alpha, ix->snap->alpha, (size_t)ix->heads * sizeof *alpha);
    m->n_alpha = (size_t)ix->heads;
    m->alpha = alpha;
    int32_t kept = 0, oom = 0;
    pthread_rwlock_rdlock(&q->lock->rw);
    for (int32_t i = 0; i < c->n_rows && !oom; i++) {
        int32_t row = c->rows[i];
        at[i] = -1;
        size_t len;
        const char *id = oml_index_row_id(ix, q->store, row, &len);
        if (id == NULL)
            continue;
        Omld__ShardCandidate *x = &cs[kept];
        omld__shard_candidate__init(x);
        oom = (x->id = omld_reply_strdup(r, id, len)) == NULL;
        if (!oom && ix->labels[row] != OML_LABEL_NONE) {
            const char *name = ix->label_names[ix->labels[row]];
            x->label_opt_case = OMLD__SHARD_CANDIDATE__LABEL_OPT_LABEL;
            x->label_id = (uint32_t)ix->labels[row];
            oom = (x->label = omld_reply_strdup(r, name, strlen(name))) == NULL;
        }
        x->order = ix->slots[row];
        x->similarity = c->similarity[i];
        cp[kept] = x;
        at[i] = kept++;
    }
    pthread_rwlock_unlock(&q->lock->rw);
    if (oom)
        return NULL;
    m->n_candidates = (size_t)kept;
    m->candidates = cp;
    for (int h = 0; h < ix->heads; h++) {
        size_t n = (size_t)c->cnt[h], w = 0;
        uint32_t *idx = omld_reply_alloc(r, (n + 1) * sizeof *idx);
        float *dist = omld_reply_alloc(r, (n + 1) * sizeof *dist);
        if (!idx || !dist)
            return NULL;
        for (size_t j = 0; j < n; j++) {
            const oml_neighbor *nb = &c->nb[(size_t)h * (size_t)c->ranked + j];
            int32_t i = 0;
            while (i < c->n_rows && c->rows[i] != nb->row)
                i++;
            if (i == c->n_rows || at[i] < 0)
                continue; /* its item is gone */
            idx[w] = (uint32_t)at[i];
            dist[w++] = nb->dist;
        }
        omld__shard_head__init(&hs[h]);
        hs[h].n_candidate = hs[h].n_dist = w;
        hs[h].candidate = idx;
        hs[h].dist = dist;
        hp[h] = &hs[h];
    }
    m->n_heads = (size_t)ix->heads;
    m->heads = hp;
    m->shard = v->shard_i;
    m->shards = v->shard_n > 1 ? v->shard_n : 1;
    return m;
}

static int run_shard_retrieve(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                              omld_reply *r)
{
    const Omld__RetrieveRequest *m = req->shard_retrieve->retrieve;
    if (v->fresh || !omld_view_floats(v)) /* candidates re-ranked, or no floats to read */
        return omld_reply_error(r, OMLD__STATUS__CODE__UNAVAILABLE, "shard_retrieve",
                                "shard_retrieve is answered from a built index only, and this "
                                "view re-ranks (rerank_min_items): set rerank_min_items above "
                                "the store's item count on shards");
    int32_t k = omld__query_k(m->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K, m->k, q->lim);
    query_item qi;
    int rc = omld__query_resolve(q, v, m->query, "shard_retrieve.retrieve.query", &qi, r);
    if (rc != 0)
        return rc;
    oml_retrieve_opts opts;
    omld__query_retrieve_opts(m, &opts);
    if (omld__query_retrieve_filter(q, v, m, &opts) != 0)
        return omld__query_oom(r, "shard_retrieve");
    oml_candidates c;
    oml_diag d = {0};
    rc = oml_retrieve_candidates(v->ix, qi.x, opts.offset + k, qi.row, opts.allow, &c, &d);
    free((void *)opts.allow);
    if (rc != OML_OK)
        return omld__query_lib_error(r, rc, &d, "shard_retrieve");
    r->msg.shard_retrieve = answer(q, v, &c, r);
    oml_candidates_free(&c);
    if (r->msg.shard_retrieve == NULL)
        return omld__query_oom(r, "shard_retrieve");
    r->msg.body_case = OMLD__RESPONSE__BODY_SHARD_RETRIEVE;
    return 0;
}

void omld_query_shard_retrieve(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                               omld_reply *r)
{
    const Omld__RetrieveRequest *m = req->shard_retrieve->retrieve;
    omld__query_answer(q, live, m->model_opt_case == OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL,
                       m->model, "shard_retrieve", run_shard_retrieve, req, r);
}
