/* query.c - the read operations against one serving view (see query.h).
 *
 * DESIGN
 * Runs on libuv's threadpool. Reads only the view it was handed (immutable;
 * the caller holds a reference) and, for items named by id, the store under
 * its read lock: the lock is held just long enough to copy the features out,
 * so the learner's writes wait for a memcpy, never for a query's search.
 * A query naming a batch model (field `model`, not "" or "live") runs the
 * same code against that model's view (models.h), taken and released here.
 * Everything the answer points to comes from the reply's arena, so
 * omld_reply_free() releases it whatever path was taken; scratch buffers of
 * the computation are malloc'd and freed here.
 *
 * A query by id uses the store's current features and leaves the item's own
 * row of the view (omld_view_row_at; -1 if the view predates the item) out of
 * its neighbours. Every answer, errors included, carries the view's version. */
#include "query.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fresh.h"
#include "item_filter.h"
#include "ops.h"
#include "query_int.h"
#include "recall.h"
#include "serve.h"

int32_t omld__query_k(int set, uint32_t k, const omld_limits *lim)
{
    return (int32_t)(set ? k : lim->default_k);
}

int omld__query_oom(omld_reply *r, const char *op)
{
    return omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL,
                            "the daemon ran out of memory while answering %s", op);
}

int omld__query_lib_error(omld_reply *r, int rc, const oml_diag *d, const char *op)
{
    char field[OMLD_QUERY_FIELD_CAP];
    if (d->field[0])
        snprintf(field, sizeof field, "%s.%s", op, d->field);
    else
        snprintf(field, sizeof field, "%s", op);
    return omld_reply_error(r, omld_status_from_oml(rc), field, "%s failed: %s", op,
                            d->msg[0] ? d->msg : oml_strerror(rc));
}

int omld__query_resolve(const omld_query_ctx *q, const omld_view *v, const Omld__ItemRef *ref,
                        const char *field, query_item *qi, omld_reply *r)
{
    size_t dim = (size_t)v->ix->snap->cfg.dim;
    char path[OMLD_QUERY_FIELD_CAP];
    qi->x = NULL;
    qi->row = -1;
    if (ref != NULL && ref->ref_case == OMLD__ITEM_REF__REF_VECTOR) {
        /* omld_validate checked it against the configured dimension; check
         * again against the model's, since reading past it would be a bug. */
        size_t n = ref->vector ? ref->vector->n_values : 0;
        if (n != dim) {
            snprintf(path, sizeof path, "%s.vector", field);
            return omld_reply_error(r, OMLD__STATUS__CODE__WRONG_DIMENSION, path,
                                    "vector has %zu values; the model's dimension is %zu", n,
                                    dim);
        }
        qi->x = ref->vector->values;
        return 0;
    }
    if (ref == NULL || ref->ref_case != OMLD__ITEM_REF__REF_ID || ref->id == NULL)
        return omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, field,
                                "%s is missing: give an item id or a vector", field);
    /* The store's dimension is the configured one (lim->dim): read here
     * without its lock, the store struct itself could be mid-swap. */
    if ((size_t)q->lim->dim != dim)
        return omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, field,
                                "the store's dimension (%d) differs from the model's (%zu)",
                                (int)q->lim->dim, dim);
    size_t len = strlen(ref->id);
    float *buf = omld_reply_alloc(r, dim * sizeof *buf);
    if (buf == NULL)
        return omld__query_oom(r, field);
    uint32_t slot, gen = 0;
    pthread_rwlock_rdlock(&q->lock->rw);
    int rc = oml_store_find(q->store, ref->id, len, &slot);
    if (rc == OML_OK) {
        memcpy(buf, oml_store_features(q->store, slot), dim * sizeof *buf);
        gen = oml_store_generation(q->store, slot);
    }
    pthread_rwlock_unlock(&q->lock->rw);
    if (rc != OML_OK) {
        char qid[200];
        snprintf(path, sizeof path, "%s.id", field);
        return omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, path, "no item has id %s",
                                omld_reply_quote(qid, sizeof qid, ref->id, len));
    }
    qi->x = buf;
    qi->row = omld_view_row_at(v, slot, gen);
    return 0;
}

void omld__query_sample_recall(const omld_query_ctx *q, omld_view *v, const float *x, int32_t k,
                               int32_t row, omld_reply *r)
{
    if (r->after != NULL) /* one per reply (a batch offers each of its queries) */
        return;
    /* A fresh view answers among k_c candidates per head (fresh.c): that
     * set's recall is the index's share of its answers. */
    int32_t k_c = omld_fresh_candidates(q, v, k);
    omld_recall_job *j = omld_recall_offer(q, v, x, k, v->fresh ? k_c : 0, row);
    if (j) {
        r->after = j;
        r->after_free = omld_recall_drop;
    }
}

Omld__ClassifyResponse *omld__query_classify_response(const oml_index *ix,
                                                      const oml_classification *c, omld_reply *r)
{
    Omld__ClassifyResponse *resp = omld_reply_alloc(r, sizeof *resp);
    if (resp == NULL)
        return NULL;
    omld__classify_response__init(resp);
    if (c == NULL || c->label < 0) /* no labelled neighbour: an empty answer */
        return resp;
    size_t n = (size_t)c->n_classes;
    const char *name = ix->label_names[c->label];
    resp->label = omld_reply_strdup(r, name, strlen(name));
    Omld__ClassScore *sc = omld_reply_alloc(r, n * sizeof *sc);
    resp->scores = omld_reply_alloc(r, n * sizeof *resp->scores);
    if (resp->label == NULL || sc == NULL || resp->scores == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        omld__class_score__init(&sc[i]);
        name = ix->label_names[c->classes[i].label];
        if ((sc[i].label = omld_reply_strdup(r, name, strlen(name))) == NULL)
            return NULL;
        sc[i].score = c->classes[i].score;
        resp->scores[i] = &sc[i];
    }
    resp->n_scores = n;
    return resp;
}

static int run_classify(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                        omld_reply *r)
{
    const Omld__ClassifyRequest *m = req->classify;
    int rc;
    int32_t k = omld__query_k(m->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K, m->k, q->lim);
    query_item qi;
    if ((rc = omld__query_resolve(q, v, m->query, "classify.query", &qi, r)) != 0)
        return rc;
    uint8_t *allow = NULL; /* the rows a metadata filter keeps (NULL: every row) */
    if (m->n_metadata > 0 && (allow = omld__query_meta_allow(q, v, m->metadata,
                                                             m->n_metadata)) == NULL)
        return omld__query_oom(r, "classify");
    oml_classification c;
    oml_diag d = {0};
    oml_row_source rows; /* an index without float columns: its rows from the store */
    omld_fresh_rows(q, &rows);
    rc = v->fresh ? omld_fresh_classify(q, v, qi.x, k, qi.row, allow, &c, &d)
                  : oml_classify_from(v->ix, qi.x, k, qi.row, allow, &rows, &c, &d);
    free(allow);
    if (rc != OML_OK && rc != OML_EEMPTY)
        return omld__query_lib_error(r, rc, &d, "classify");
    omld__query_sample_recall(q, v, qi.x, k, qi.row, r);
    /* OML_EEMPTY (no labelled neighbour) is an empty answer */
    r->msg.classify = omld__query_classify_response(v->ix, rc == OML_OK ? &c : NULL, r);
    if (r->msg.classify == NULL)
        return omld__query_oom(r, "classify");
    r->msg.body_case = OMLD__RESPONSE__BODY_CLASSIFY;
    return 0;
}

static int run_verify(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                      omld_reply *r)
{
    const Omld__VerifyRequest *m = req->verify;
    int rc;
    float t = m->threshold_opt_case == OMLD__VERIFY_REQUEST__THRESHOLD_OPT_THRESHOLD
                  ? m->threshold
                  : q->lim->default_threshold;
    query_item a, b;
    if ((rc = omld__query_resolve(q, v, m->a, "verify.a", &a, r)) != 0
        || (rc = omld__query_resolve(q, v, m->b, "verify.b", &b, r)) != 0)
        return rc;
    const oml_snapshot *s = omld_view_model(v);
    oml_verification res;
    oml_diag d = {0};
    /* The wire allows T = 1 (omld.proto: (0, 1]); oml_verify takes (0, 1).
     * For T >= 1 it measures the distances under any valid threshold and
     * Eq. 26 is applied here, summed in the same order and precision. */
    rc = oml_verify(s, a.x, b.x, t < 1.0f ? t : 0.5f, &res, &d);
    if (rc != OML_OK)
        return omld__query_lib_error(r, rc, &d, "verify");
    int heads = oml_snapshot_heads(s);
    if (!(t < 1.0f)) {
        double p = 0.0;
        for (int h = 0; h < heads; h++)
            if (res.dist[h] / 2.0f < t)
                p += (double)s->alpha[h];
        res.probability = (float)p;
        res.similar = res.probability >= 0.5f;
    }
    Omld__VerifyResponse *resp = omld_reply_alloc(r, sizeof *resp);
    float *dist = omld_reply_alloc(r, (size_t)heads * sizeof *dist);
    if (resp == NULL || dist == NULL)
        return omld__query_oom(r, "verify");
    omld__verify_response__init(resp);
    memcpy(dist, res.dist, (size_t)heads * sizeof *dist);
    resp->similar = res.similar != 0;
    resp->score = res.probability;
    resp->n_distances = (size_t)heads;
    resp->distances = dist;
    r->msg.body_case = OMLD__RESPONSE__BODY_VERIFY;
    r->msg.verify = resp;
    return 0;
}

/* Clears allow[row] for every row whose item fails the metadata conditions
 * (as the store holds the item now: under its read lock, which is held
 * for one pass over the rows). */
static void meta_mask(const omld_query_ctx *q, const oml_index *ix,
                      Omld__MetadataCondition *const *c, size_t n, uint8_t *allow)
{
    omld_item_filter f;
    omld_item_filter_conds(&f, c, n);
    pthread_rwlock_rdlock(&q->lock->rw);
    for (int32_t row = 0; row < ix->n; row++)
        if (allow[row])
            allow[row] = (uint8_t)omld_item_filter_meta_row(&f, q->store, ix, row);
    pthread_rwlock_unlock(&q->lock->rw);
}

uint8_t *omld__query_meta_allow(const omld_query_ctx *q, const omld_view *v,
                                Omld__MetadataCondition *const *c, size_t n)
{
    uint8_t *allow = malloc((size_t)v->ix->n + 1);
    if (allow != NULL) {
        memset(allow, 1, (size_t)v->ix->n);
        meta_mask(q, v->ix, c, n, allow);
    }
    return allow;
}

int omld__query_retrieve_filter(const omld_query_ctx *q, const omld_view *v,
                                const Omld__RetrieveRequest *m, oml_retrieve_opts *opts)
{
    const oml_index *ix = v->ix;
    opts->allow = NULL;
    if (m->n_labels == 0 && m->n_exclude_ids == 0 && m->n_metadata == 0)
        return 0;
    uint8_t *allow = malloc((size_t)ix->n + (size_t)ix->n_labels + 1);
    if (allow == NULL)
        return -1;
    uint8_t *label_ok = allow + ix->n; /* (n_labels) */
    memset(label_ok, 0, (size_t)ix->n_labels);
    for (size_t i = 0; i < m->n_labels; i++)
        for (int32_t c = 0; c < ix->n_labels; c++)
            if (strcmp(ix->label_names[c], m->labels[i]) == 0)
                label_ok[c] = 1;
    for (int32_t row = 0; row < ix->n; row++)
        allow[row] = m->n_labels == 0 ||
                     (ix->labels[row] != OML_LABEL_NONE && label_ok[ix->labels[row]]);
    for (size_t i = 0; i < m->n_exclude_ids; i++) {
        int32_t row = omld_view_row(v, q->store, q->lock, m->exclude_ids[i],
                                    strlen(m->exclude_ids[i]));
        if (row >= 0)
            allow[row] = 0;
    }
    if (m->n_metadata > 0)
        meta_mask(q, ix, m->metadata, m->n_metadata, allow);
    opts->allow = allow;
    return 0;
}

Omld__RetrieveResponse *omld__query_retrieve_response(const omld_query_ctx *q, const oml_index *ix,
                                                      const oml_hit *hits, int32_t n,
                                                      int with_metadata, omld_reply *r)
{
    Omld__RetrieveResponse *resp = omld_reply_alloc(r, sizeof *resp);
    Omld__Hit *h = omld_reply_alloc(r, (size_t)n * sizeof *h);
    Omld__Hit **hp = omld_reply_alloc(r, (size_t)n * sizeof *hp);
    if (resp == NULL || h == NULL || hp == NULL)
        return NULL;
    omld__retrieve_response__init(resp);
    int32_t m = 0, oom = 0;
    pthread_rwlock_rdlock(&q->lock->rw);
    for (int32_t i = 0; i < n && !oom; i++) {
        int32_t row = hits[i].row;
        size_t len;
        const char *id = oml_index_row_id(ix, q->store, row, &len);
        if (id == NULL)
            continue; /* deleted or replaced since the index was built: no id to give */
        omld__hit__init(&h[m]);
        oom = (h[m].id = omld_reply_strdup(r, id, len)) == NULL;
        h[m].score = hits[i].score;
        h[m].similarity = hits[i].similarity;
        if (!oom && ix->labels[row] != OML_LABEL_NONE) {
            const char *name = ix->label_names[ix->labels[row]];
            h[m].label_opt_case = OMLD__HIT__LABEL_OPT_LABEL;
            oom = (h[m].label = omld_reply_strdup(r, name, strlen(name))) == NULL;
        }
        if (!oom && with_metadata)
            oom = omld_meta_to_wire(oml_store_meta(q->store, ix->slots[row]), &h[m].metadata,
                                    &h[m].n_metadata, r) != 0;
        hp[m] = &h[m];
        m++;
    }
    pthread_rwlock_unlock(&q->lock->rw);
    if (oom)
        return NULL;
    resp->n_hits = (size_t)m;
    resp->hits = hp;
    return resp;
}

int omld__query_exclude_gone(const omld_query_ctx *q, const oml_index *ix, const oml_hit *hits,
                             int32_t n, oml_retrieve_opts *opts)
{
    int gone = 0;
    pthread_rwlock_rdlock(&q->lock->rw);
    for (int32_t i = 0; i < n && !gone; i++)
        gone = !oml_index_row_current(ix, q->store, hits[i].row);
    uint8_t *allow = gone ? malloc((size_t)ix->n + 1) : NULL;
    for (int32_t row = 0; allow && row < ix->n; row++)
        allow[row] = (opts->allow == NULL || opts->allow[row]) &&
                     oml_index_row_current(ix, q->store, row);
    pthread_rwlock_unlock(&q->lock->rw);
    if (!gone)
        return 0;
    if (allow == NULL)
        return -1;
    free((void *)opts->allow);
    opts->allow = allow;
    return 1;
}

void omld__query_retrieve_opts(const Omld__RetrieveRequest *m, oml_retrieve_opts *opts)
{
    *opts = (oml_retrieve_opts){NULL, (int32_t)m->offset, -INFINITY, NULL};
    if (m->min_similarity_opt_case == OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY)
        opts->min_similarity = m->min_similarity;
}

static int run_retrieve(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                        omld_reply *r)
{
    const Omld__RetrieveRequest *m = req->retrieve;
    int rc;
    int32_t k = omld__query_k(m->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K, m->k, q->lim);
    query_item qi;
    if ((rc = omld__query_resolve(q, v, m->query, "retrieve.query", &qi, r)) != 0)
        return rc;
    /* Scratch from the arena too (k <= max_k <= OML_SERVE_MAX_K hits). */
    oml_hit *hits = omld_reply_alloc(r, (size_t)(k > 0 ? k : 1) * sizeof *hits);
    oml_retrieve_opts opts;
    omld__query_retrieve_opts(m, &opts);
    if (hits == NULL || omld__query_retrieve_filter(q, v, m, &opts) != 0)
        return omld__query_oom(r, "retrieve");
    int32_t n = 0;
    oml_diag d = {0};
    oml_row_source rows; /* an index without float columns: its rows from the store */
    omld_fresh_rows(q, &rows);
    opts.src = &rows;
    int filtered = opts.allow != NULL || opts.offset > 0;
    rc = v->fresh ? omld_fresh_retrieve(q, v, qi.x, k, qi.row, &opts, hits, &n, &d)
                  : oml_retrieve(v->ix, qi.x, k, qi.row, &opts, hits, &n, &d);
    int again = rc == OML_OK && !v->fresh ? omld__query_exclude_gone(q, v->ix, hits, n, &opts) : 0;
    if (again > 0)
        rc = oml_retrieve(v->ix, qi.x, k, qi.row, &opts, hits, &n, &d);
    free((void *)opts.allow);
    if (again < 0)
        return omld__query_oom(r, "retrieve");
    if (rc != OML_OK)
        return omld__query_lib_error(r, rc, &d, "retrieve");
    if (!filtered) /* the recall sample compares plain searches */
        omld__query_sample_recall(q, v, qi.x, k, qi.row, r);
    if ((r->msg.retrieve = omld__query_retrieve_response(q, v->ix, hits, n, m->with_metadata,
                                                         r)) == NULL)
        return omld__query_oom(r, "retrieve");
    r->msg.body_case = OMLD__RESPONSE__BODY_RETRIEVE;
    return 0;
}

static int run_embed(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                     omld_reply *r)
{
    const Omld__EmbedRequest *m = req->embed;
    int rc;
    query_item qi;
    if ((rc = omld__query_resolve(q, v, m->item, "embed.item", &qi, r)) != 0)
        return rc;
    const oml_snapshot *s = omld_view_model(v);
    size_t heads = (size_t)oml_snapshot_heads(s), emb = (size_t)s->cfg.emb;
    Omld__EmbedResponse *resp = omld_reply_alloc(r, sizeof *resp);
    float *out = omld_reply_alloc(r, heads * emb * sizeof *out); /* (heads, 1, emb) */
    float *alpha = omld_reply_alloc(r, heads * sizeof *alpha);
    Omld__Vector *vec = omld_reply_alloc(r, heads * sizeof *vec);
    Omld__Vector **vp = omld_reply_alloc(r, heads * sizeof *vp);
    if (resp == NULL || out == NULL || alpha == NULL || vec == NULL || vp == NULL)
        return omld__query_oom(r, "embed");
    if ((rc = oml_snapshot_embed(s, qi.x, 1, out)) != OML_OK) {
        oml_diag d = {0};
        oml_diag_set(&d, rc, "", "embedding the item failed");
        return omld__query_lib_error(r, rc, &d, "embed");
    }
    omld__embed_response__init(resp);
    for (size_t h = 0; h < heads; h++) {
        omld__vector__init(&vec[h]);
        vec[h].n_values = emb;
        vec[h].values = out + h * emb;
        vp[h] = &vec[h];
    }
    memcpy(alpha, s->alpha, heads * sizeof *alpha);
    resp->n_heads = heads;
    resp->heads = vp;
    resp->n_alpha = heads;
    resp->alpha = alpha;
    r->msg.body_case = OMLD__RESPONSE__BODY_EMBED;
    r->msg.embed = resp;
    return 0;
}

/* Every item is read under one hold of the read lock, so the answer is one
 * consistent state of the store. All memory but the label names is taken
 * before the lock; each label name is copied once, on first use. */
static int run_get_items(const omld_query_ctx *q, const Omld__GetItemsRequest *m,
                         omld_reply *r)
{
    size_t n = m->n_ids, dim = (size_t)q->lim->dim, id_bytes = 0; /* the store's */
    for (size_t i = 0; i < n; i++)
        id_bytes += strlen(m->ids[i]) + 1;
    Omld__GetItemsResponse *resp = omld_reply_alloc(r, sizeof *resp);
    Omld__Item *items = omld_reply_alloc(r, n * sizeof *items);
    Omld__Item **ip = omld_reply_alloc(r, n * sizeof *ip);
    float *feats = omld_reply_alloc(r, n * dim * sizeof *feats);
    char *idbuf = omld_reply_alloc(r, id_bytes);
    if (resp == NULL || items == NULL || ip == NULL || feats == NULL || idbuf == NULL)
        return omld__query_oom(r, "get_items");
    omld__get_items_response__init(resp);
    for (size_t i = 0, off = 0; i < n; i++) {
        size_t len = strlen(m->ids[i]);
        memcpy(idbuf + off, m->ids[i], len + 1);
        omld__item__init(&items[i]);
        items[i].id = idbuf + off;
        items[i].n_features = dim;
        items[i].features = feats + i * dim;
        off += len + 1;
    }

    int failed = 0; /* 1: unknown id at index `bad`; 2: out of memory */
    size_t bad = 0;
    pthread_rwlock_rdlock(&q->lock->rw);
    int32_t n_labels = oml_store_label_count(q->store);
    char **names = omld_reply_alloc(r, (size_t)(n_labels > 0 ? n_labels : 1) * sizeof *names);
    if (names == NULL)
        failed = 2;
    for (size_t i = 0; i < n && !failed; i++) {
        uint32_t slot;
        if (oml_store_find(q->store, items[i].id, strlen(items[i].id), &slot) != OML_OK) {
            failed = 1;
            bad = i;
            break;
        }
        memcpy(items[i].features, oml_store_features(q->store, slot), dim * sizeof(float));
        if (omld_meta_to_item(oml_store_meta(q->store, slot), &items[i], r) != 0) {
            failed = 2;
            break;
        }
        int32_t lab = oml_store_label(q->store, slot);
        if (lab < 0 || lab >= n_labels)
            continue;
        if (names[lab] == NULL) {
            size_t len = 0;
            const char *name = oml_store_label_name(q->store, lab, &len);
            if ((names[lab] = omld_reply_strdup(r, name, len)) == NULL) {
                failed = 2;
                break;
            }
        }
        items[i].label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
        items[i].label = names[lab];
    }
    pthread_rwlock_unlock(&q->lock->rw);

    if (failed == 2)
        return omld__query_oom(r, "get_items");
    if (failed == 1) {
        char field[OMLD_QUERY_FIELD_CAP], qid[200];
        snprintf(field, sizeof field, "get_items.ids[%zu]", bad);
        return omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field, "no item has id %s",
                                omld_reply_quote(qid, sizeof qid, m->ids[bad], strlen(m->ids[bad])));
    }
    for (size_t i = 0; i < n; i++)
        ip[i] = &items[i];
    resp->n_items = n;
    resp->items = ip;
    r->msg.body_case = OMLD__RESPONSE__BODY_GET_ITEMS;
    r->msg.get_items = resp;
    return 0;
}

/* The view a query answers from: the live one (v) unless it names a batch
 * model (not "" or "live"), whose own view is then referenced in *held (the
 * reference keeps it alive even if DeleteModel runs meanwhile). NULL with
 * NOT_FOUND in r if there is no such model. */
static omld_view *model_view(const omld_query_ctx *q, omld_view *v, int named, const char *model,
                             const char *op, omld_view **held, omld_reply *r)
{
    *held = NULL;
    if (!named || model == NULL || model[0] == '\0' || strcmp(model, "live") == 0)
        return v;
    omld_view *mv = q->models ? omld_models_acquire(q->models, model) : NULL;
    if (mv == NULL) {
        char field[OMLD_QUERY_FIELD_CAP], qn[200];
        snprintf(field, sizeof field, "%s.model", op);
        omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field,
                         "model %s does not exist; the live model is \"live\" and batch "
                         "models are listed by ListModels",
                         omld_reply_quote(qn, sizeof qn, model, strlen(model)));
        return NULL;
    }
    r->msg.model_version = mv->version;
    return *held = mv;
}

void omld__query_answer(const omld_query_ctx *q, omld_view *live, int named, const char *model,
                        const char *op, omld__query_fn fn, const Omld__Request *req,
                        omld_reply *r)
{
    omld_view *held, *v = model_view(q, live, named, model, op, &held, r);
    if (v != NULL)
        fn(q, v, req, r);
    omld_view_release(held);
}

void omld_query_classify(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                         omld_reply *r)
{
    const Omld__ClassifyRequest *m = req->classify;
    omld__query_answer(q, live, m->model_opt_case == OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL,
                       m->model, "classify", run_classify, req, r);
}

void omld_query_verify(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                       omld_reply *r)
{
    const Omld__VerifyRequest *m = req->verify;
    omld__query_answer(q, live, m->model_opt_case == OMLD__VERIFY_REQUEST__MODEL_OPT_MODEL,
                       m->model, "verify", run_verify, req, r);
}

void omld_query_retrieve(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                         omld_reply *r)
{
    const Omld__RetrieveRequest *m = req->retrieve;
    omld__query_answer(q, live, m->model_opt_case == OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL,
                       m->model, "retrieve", run_retrieve, req, r);
}

void omld_query_embed(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                      omld_reply *r)
{
    const Omld__EmbedRequest *m = req->embed;
    omld__query_answer(q, live, m->model_opt_case == OMLD__EMBED_REQUEST__MODEL_OPT_MODEL,
                       m->model, "embed", run_embed, req, r);
}

/* Reads the store only: answered with or without a published view. */
void omld_query_get_items(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                          omld_reply *r)
{
    (void)live;
    run_get_items(q, req->get_items, r);
}

void omld_query_run(const omld_query_ctx *q, omld_view *v, const Omld__Request *req,
                    omld_reply *r)
{
    if (v != NULL)
        r->msg.model_version = v->version;
    const omld_op *op = omld_op_of(req);
    if (op == NULL || op->route != OMLD_ROUTE_QUERY || (op->needs_model && v == NULL)) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, "body",
                         "operation %d is not a query (a routing bug)", (int)req->body_case);
        return;
    }
    op->handle.query(q, v, req, r);
}
