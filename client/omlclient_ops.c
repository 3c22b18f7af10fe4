/* omlclient_ops.c - libomlclient's typed operations and pipelined batch
 * helpers, built on the generic layer of omlclient.c (omlc_send / omlc_recv).
 * Every Request is assembled on the stack or in arrays that live until it
 * is packed; it only borrows the caller's strings and floats. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omlclient_int.h"

/* ---------------------------------------------------------------- message building */

int omlc__ref_fill(omlc__ref_box *b, const omlc_ref *src, omlc_error *err, const char *what)
{
    omld__item_ref__init(&b->ref);
    omld__vector__init(&b->vec);
    if (src == NULL)
        return omlc__err_set(err, OMLC_EARG, what, "%s: no item reference", what);
    if (src->id != NULL) {
        b->ref.ref_case = OMLD__ITEM_REF__REF_ID;
        b->ref.id = (char *)src->id;
    } else if (src->vector != NULL) {
        b->vec.n_values = src->dim;
        b->vec.values = (float *)src->vector;
        b->ref.ref_case = OMLD__ITEM_REF__REF_VECTOR;
        b->ref.vector = &b->vec;
    } else {
        return omlc__err_set(err, OMLC_EARG, what, "%s: neither id nor vector", what);
    }
    return 0;
}

void omlc__copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

void omlc_set_item_metadata(omlc *c, Omld__KeyValue *const *kv, size_t n)
{
    c->item_metadata = kv;
    c->n_item_metadata = kv ? n : 0;
}

/* Builders for the batch requests; each owns its arrays until freed. */
typedef struct put_msg {
    Omld__Request req;
    Omld__PutItemsRequest body;
    Omld__Item *items;
    Omld__Item **ptrs;
} put_msg;

static int put_build(const omlc *c, put_msg *m, const omlc_item *items, size_t n,
                     omlc_error *err)
{
    omld__request__init(&m->req);
    omld__put_items_request__init(&m->body);
    m->items = calloc(n ? n : 1, sizeof *m->items);
    m->ptrs = calloc(n ? n : 1, sizeof *m->ptrs);
    if (!m->items || !m->ptrs)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        Omld__Item *it = &m->items[i];
        omld__item__init(it);
        it->id = (char *)(items[i].id ? items[i].id : "");
        it->n_features = items[i].dim;
        it->features = (float *)items[i].features;
        it->metadata = (Omld__KeyValue **)c->item_metadata;
        it->n_metadata = c->n_item_metadata;
        if (items[i].label) {
            it->label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
            it->label = (char *)items[i].label;
        }
        m->ptrs[i] = it;
    }
    m->body.n_items = n;
    m->body.items = m->ptrs;
    m->req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
    m->req.put_items = &m->body;
    return 0;
}

static void put_free(put_msg *m)
{
    free(m->items);
    free(m->ptrs);
}

typedef struct trip_msg {
    Omld__Request req;
    Omld__AddTripletsRequest body;
    Omld__Triplet *t;
    Omld__Triplet **ptrs;
    omlc__ref_box *refs; /* 3 per triplet */
} trip_msg;

static int trip_build(trip_msg *m, const omlc_triplet *t, size_t n, omlc_error *err)
{
    omld__request__init(&m->req);
    omld__add_triplets_request__init(&m->body);
    m->t = calloc(n ? n : 1, sizeof *m->t);
    m->ptrs = calloc(n ? n : 1, sizeof *m->ptrs);
    m->refs = calloc(3 * (n ? n : 1), sizeof *m->refs);
    if (!m->t || !m->ptrs || !m->refs)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        Omld__Triplet *x = &m->t[i];
        omld__triplet__init(x);
        int rc;
        if ((rc = omlc__ref_fill(&m->refs[3 * i], &t[i].anchor, err, "anchor")) != 0 ||
            (rc = omlc__ref_fill(&m->refs[3 * i + 1], &t[i].positive, err, "positive")) != 0 ||
            (rc = omlc__ref_fill(&m->refs[3 * i + 2], &t[i].negative, err, "negative")) != 0)
            return rc;
        x->anchor = &m->refs[3 * i].ref;
        x->positive = &m->refs[3 * i + 1].ref;
        x->negative = &m->refs[3 * i + 2].ref;
        if (t[i].weight != 0.0f) {
            x->weight_opt_case = OMLD__TRIPLET__WEIGHT_OPT_WEIGHT;
            x->weight = t[i].weight;
        }
        m->ptrs[i] = x;
    }
    m->body.n_triplets = n;
    m->body.triplets = m->ptrs;
    m->req.body_case = OMLD__REQUEST__BODY_ADD_TRIPLETS;
    m->req.add_triplets = &m->body;
    return 0;
}

static void trip_free(trip_msg *m)
{
    free(m->t);
    free(m->ptrs);
    free(m->refs);
}

typedef struct pair_msg {
    Omld__Request req;
    Omld__AddPairsRequest body;
    Omld__Pair *p;
    Omld__Pair **ptrs;
    omlc__ref_box *refs; /* 2 per pair */
} pair_msg;

static int pair_build(pair_msg *m, const omlc_pair *p, size_t n, omlc_error *err)
{
    omld__request__init(&m->req);
    omld__add_pairs_request__init(&m->body);
    m->p = calloc(n ? n : 1, sizeof *m->p);
    m->ptrs = calloc(n ? n : 1, sizeof *m->ptrs);
    m->refs = calloc(2 * (n ? n : 1), sizeof *m->refs);
    if (!m->p || !m->ptrs || !m->refs)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        Omld__Pair *x = &m->p[i];
        omld__pair__init(x);
        int rc;
        if ((rc = omlc__ref_fill(&m->refs[2 * i], &p[i].a, err, "a")) != 0 ||
            (rc = omlc__ref_fill(&m->refs[2 * i + 1], &p[i].b, err, "b")) != 0)
            return rc;
        x->a = &m->refs[2 * i].ref;
        x->b = &m->refs[2 * i + 1].ref;
        x->relation = p[i].similar ? OMLD__PAIR__RELATION__SIMILAR : OMLD__PAIR__RELATION__DISSIMILAR;
        m->ptrs[i] = x;
    }
    m->body.n_pairs = n;
    m->body.pairs = m->ptrs;
    m->req.body_case = OMLD__REQUEST__BODY_ADD_PAIRS;
    m->req.add_pairs = &m->body;
    return 0;
}

static void pair_free(pair_msg *m)
{
    free(m->p);
    free(m->ptrs);
    free(m->refs);
}

int omlc__classify_body(Omld__ClassifyRequest *body, omlc__ref_box *q, const omlc_ref *ref,
                        uint32_t k, const char *model, omlc_error *err)
{
    omld__classify_request__init(body);
    int rc = omlc__ref_fill(q, ref, err, "query");
    if (rc != 0)
        return rc;
    body->query = &q->ref;
    if (k > 0) {
        body->k_opt_case = OMLD__CLASSIFY_REQUEST__K_OPT_K;
        body->k = k;
    }
    if (model) {
        body->model_opt_case = OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL;
        body->model = (char *)model;
    }
    return 0;
}

typedef struct classify_msg {
    Omld__Request req;
    Omld__ClassifyRequest body;
    omlc__ref_box q;
} classify_msg;

static int classify_build(classify_msg *m, const omlc_ref *q, uint32_t k, const char *model,
                          omlc_error *err)
{
    omld__request__init(&m->req);
    int rc = omlc__classify_body(&m->body, &m->q, q, k, model, err);
    m->req.body_case = OMLD__REQUEST__BODY_CLASSIFY;
    m->req.classify = &m->body;
    return rc;
}

void omlc__classify_copy(const Omld__ClassifyResponse *b, uint64_t model_version,
                         omlc_classification *out)
{
    memset(out, 0, sizeof *out);
    omlc__copy_str(out->label, sizeof out->label, b->label);
    size_t n = b->n_scores < 16 ? b->n_scores : 16;
    for (size_t i = 0; i < n; i++) {
        omlc__copy_str(out->scores[i].label, sizeof out->scores[i].label, b->scores[i]->label);
        out->scores[i].score = b->scores[i]->score;
    }
    out->n_scores = (int)n;
    out->model_version = model_version;
}

/* ---------------------------------------------------------------- typed operations */

int omlc_put_items(omlc *c, const omlc_item *items, size_t n, uint32_t *created,
                   uint32_t *replaced, omlc_error *err)
{
    omlc__err_clear(err);
    if (items == NULL && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_put_items: no items");
    put_msg m;
    int rc = put_build(c, &m, items, n, err);
    Omld__Response *r = NULL;
    if (rc == 0)
        rc = omlc__call_expect(c, &m.req, OMLD__RESPONSE__BODY_PUT_ITEMS, &r, err);
    put_free(&m);
    if (rc != 0)
        return rc;
    if (created)
        *created = r->put_items->created;
    if (replaced)
        *replaced = r->put_items->replaced;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

static int ids_request(const char *const *ids, size_t n, char ***out, omlc_error *err)
{
    *out = calloc(n ? n : 1, sizeof **out);
    if (*out == NULL)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        (*out)[i] = (char *)(ids[i] ? ids[i] : "");
    return 0;
}

int omlc_delete_items(omlc *c, const char *const *ids, size_t n, int missing_ok,
                      uint32_t *deleted, omlc_error *err)
{
    omlc__err_clear(err);
    if (ids == NULL && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_delete_items: no ids");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__DeleteItemsRequest body = OMLD__DELETE_ITEMS_REQUEST__INIT;
    char **v = NULL;
    int rc = ids_request(ids, n, &v, err);
    Omld__Response *r = NULL;
    if (rc == 0) {
        body.n_ids = n;
        body.ids = v;
        body.missing_ok = missing_ok != 0;
        req.body_case = OMLD__REQUEST__BODY_DELETE_ITEMS;
        req.delete_items = &body;
        rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_DELETE_ITEMS, &r, err);
    }
    free(v);
    if (rc != 0)
        return rc;
    if (deleted)
        *deleted = r->delete_items->deleted;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_get_items(omlc *c, const char *const *ids, size_t n, Omld__Response **resp,
                   omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL || (ids == NULL && n > 0))
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_get_items: bad arguments");
    *resp = NULL;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__GetItemsRequest body = OMLD__GET_ITEMS_REQUEST__INIT;
    char **v = NULL;
    int rc = ids_request(ids, n, &v, err);
    if (rc == 0) {
        body.n_ids = n;
        body.ids = v;
        req.body_case = OMLD__REQUEST__BODY_GET_ITEMS;
        req.get_items = &body;
        rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_GET_ITEMS, resp, err);
    }
    free(v);
    return rc;
}

/* One AddTriplets request (partial and key as given; key NULL: none): the
 * answer in *r (the caller frees it), or an error. */
static int trip_call(omlc *c, const omlc_triplet *t, size_t n, int partial, const char *key,
                     Omld__Response **r, omlc_error *err)
{
    trip_msg m;
    int rc = trip_build(&m, t, n, err);
    m.body.partial = partial;
    if (key)
        m.body.idempotency_key = (char *)key; /* borrowed for the call */
    if (rc == 0)
        rc = omlc__call_expect(c, &m.req, OMLD__RESPONSE__BODY_ADD_TRIPLETS, r, err);
    trip_free(&m);
    return rc;
}

int omlc_add_triplets(omlc *c, const omlc_triplet *t, size_t n, uint32_t *accepted,
                      uint64_t *queue_depth, omlc_error *err)
{
    omlc__err_clear(err);
    if (t == NULL && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_add_triplets: no triplets");
    Omld__Response *r = NULL;
    int rc = trip_call(c, t, n, 0, NULL, &r, err);
    if (rc != 0)
        return rc;
    if (accepted)
        *accepted = r->add_triplets->accepted;
    if (queue_depth)
        *queue_depth = r->add_triplets->queue_depth;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_add_triplets_keyed(omlc *c, const omlc_triplet *t, size_t n, const char *key,
                            uint32_t *accepted, int *duplicate, omlc_error *err)
{
    omlc__err_clear(err);
    if ((t == NULL && n > 0) || key == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_add_triplets_keyed: no triplets or key");
    Omld__Response *r = NULL;
    int rc = trip_call(c, t, n, 0, key, &r, err);
    if (rc != 0)
        return rc;
    if (accepted)
        *accepted = r->add_triplets->accepted;
    if (duplicate)
        *duplicate = r->add_triplets->duplicate != 0;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_add_triplets_partial(omlc *c, const omlc_triplet *t, size_t n, uint32_t *accepted,
                              omlc_rejected *rejected, size_t max_rejected, size_t *n_rejected,
                              omlc_error *err)
{
    omlc__err_clear(err);
    if ((t == NULL && n > 0) || (rejected == NULL && max_rejected > 0))
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_add_triplets_partial: no triplets");
    Omld__Response *r = NULL;
    int rc = trip_call(c, t, n, 1, NULL, &r, err);
    if (rc != 0)
        return rc;
    const Omld__AddTripletsResponse *a = r->add_triplets;
    for (size_t i = 0; i < a->n_rejected && i < max_rejected; i++) {
        rejected[i].index = a->rejected[i]->index;
        rejected[i].code = (int)a->rejected[i]->code;
        omlc__copy_str(rejected[i].field, sizeof rejected[i].field, a->rejected[i]->field);
        omlc__copy_str(rejected[i].message, sizeof rejected[i].message, a->rejected[i]->message);
    }
    if (accepted)
        *accepted = a->accepted;
    if (n_rejected)
        *n_rejected = a->n_rejected;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_add_pairs(omlc *c, const omlc_pair *p, size_t n, uint32_t *accepted,
                   uint64_t *derived, omlc_error *err)
{
    omlc__err_clear(err);
    if (p == NULL && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_add_pairs: no pairs");
    pair_msg m;
    int rc = pair_build(&m, p, n, err);
    Omld__Response *r = NULL;
    if (rc == 0)
        rc = omlc__call_expect(c, &m.req, OMLD__RESPONSE__BODY_ADD_PAIRS, &r, err);
    pair_free(&m);
    if (rc != 0)
        return rc;
    if (accepted)
        *accepted = r->add_pairs->accepted;
    if (derived)
        *derived = r->add_pairs->derived_triplets;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_classify(omlc *c, const omlc_ref *q, uint32_t k, const char *model,
                  omlc_classification *out, omlc_error *err)
{
    omlc__err_clear(err);
    if (out == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_classify: no out");
    classify_msg m;
    int rc = classify_build(&m, q, k, model, err);
    if (rc != 0)
        return rc;
    Omld__Response *r = NULL;
    rc = omlc__call_expect(c, &m.req, OMLD__RESPONSE__BODY_CLASSIFY, &r, err);
    if (rc != 0)
        return rc;
    omlc__classify_copy(r->classify, r->model_version, out);
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_verify(omlc *c, const omlc_ref *a, const omlc_ref *b, float threshold,
                const char *model, omlc_verification *out, omlc_error *err)
{
    omlc__err_clear(err);
    if (out == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_verify: no out");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__VerifyRequest body = OMLD__VERIFY_REQUEST__INIT;
    omlc__ref_box ra, rb;
    int rc = omlc__ref_fill(&ra, a, err, "a");
    if (rc == 0)
        rc = omlc__ref_fill(&rb, b, err, "b");
    if (rc != 0)
        return rc;
    body.a = &ra.ref;
    body.b = &rb.ref;
    if (threshold > 0) {
        body.threshold_opt_case = OMLD__VERIFY_REQUEST__THRESHOLD_OPT_THRESHOLD;
        body.threshold = threshold;
    }
    if (model) {
        body.model_opt_case = OMLD__VERIFY_REQUEST__MODEL_OPT_MODEL;
        body.model = (char *)model;
    }
    req.body_case = OMLD__REQUEST__BODY_VERIFY;
    req.verify = &body;
    Omld__Response *r = NULL;
    rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_VERIFY, &r, err);
    if (rc != 0)
        return rc;
    memset(out, 0, sizeof *out);
    out->similar = r->verify->similar != 0;
    out->score = r->verify->score;
    size_t n = r->verify->n_distances < 17 ? r->verify->n_distances : 17;
    for (size_t i = 0; i < n; i++)
        out->distances[i] = r->verify->distances[i];
    out->n_heads = (int)n;
    out->model_version = r->model_version;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_retrieve(omlc *c, const omlc_ref *q, uint32_t k, const char *model, omlc_hit *out,
                  size_t max_hits, size_t *n_hits, uint64_t *model_version, omlc_error *err)
{
    return omlc_retrieve_where(c, q, k, model, NULL, out, max_hits, n_hits, model_version, err);
}

int omlc__retrieve_body(Omld__RetrieveRequest *body, omlc__ref_box *q, const omlc_ref *ref,
                        uint32_t k, const char *model, const omlc_retrieve_filter *f,
                        omlc_error *err)
{
    omld__retrieve_request__init(body);
    int rc = omlc__ref_fill(q, ref, err, "query");
    if (rc != 0)
        return rc;
    body->query = &q->ref;
    if (k > 0) {
        body->k_opt_case = OMLD__RETRIEVE_REQUEST__K_OPT_K;
        body->k = k;
    }
    if (model) {
        body->model_opt_case = OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL;
        body->model = (char *)model;
    }
    if (f == NULL)
        return 0;
    body->labels = (char **)f->labels;
    body->n_labels = f->n_labels;
    body->exclude_ids = (char **)f->exclude_ids;
    body->n_exclude_ids = f->n_exclude_ids;
    body->offset = f->offset;
    body->metadata = (Omld__MetadataCondition **)f->metadata;
    body->n_metadata = f->n_metadata;
    if (f->has_min_similarity) {
        body->min_similarity_opt_case = OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY;
        body->min_similarity = f->min_similarity;
    }
    return 0;
}

size_t omlc__hits_copy(const Omld__RetrieveResponse *b, omlc_hit *out, size_t max_hits)
{
    size_t n = b->n_hits < max_hits ? b->n_hits : max_hits;
    for (size_t i = 0; i < n; i++) {
        const Omld__Hit *h = b->hits[i];
        omlc__copy_str(out[i].id, sizeof out[i].id, h->id);
        omlc__copy_str(out[i].label, sizeof out[i].label,
                       h->label_opt_case == OMLD__HIT__LABEL_OPT_LABEL ? h->label : "");
        out[i].score = h->score;
        out[i].similarity = h->similarity;
    }
    return n;
}

int omlc_retrieve_where(omlc *c, const omlc_ref *q, uint32_t k, const char *model,
                        const omlc_retrieve_filter *f, omlc_hit *out, size_t max_hits,
                        size_t *n_hits, uint64_t *model_version, omlc_error *err)
{
    omlc__err_clear(err);
    if (out == NULL && max_hits > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_retrieve: no out");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RetrieveRequest body;
    omlc__ref_box rq;
    int rc = omlc__retrieve_body(&body, &rq, q, k, model, f, err);
    if (rc != 0)
        return rc;
    req.body_case = OMLD__REQUEST__BODY_RETRIEVE;
    req.retrieve = &body;
    Omld__Response *r = NULL;
    rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_RETRIEVE, &r, err);
    if (rc != 0)
        return rc;
    size_t n = omlc__hits_copy(r->retrieve, out, max_hits);
    if (n_hits)
        *n_hits = n;
    if (model_version)
        *model_version = r->model_version;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_embed(omlc *c, const omlc_ref *item, const char *model, Omld__Response **resp,
               omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_embed: no out");
    *resp = NULL;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__EmbedRequest body = OMLD__EMBED_REQUEST__INIT;
    omlc__ref_box ri;
    int rc = omlc__ref_fill(&ri, item, err, "item");
    if (rc != 0)
        return rc;
    body.item = &ri.ref;
    if (model) {
        body.model_opt_case = OMLD__EMBED_REQUEST__MODEL_OPT_MODEL;
        body.model = (char *)model;
    }
    req.body_case = OMLD__REQUEST__BODY_EMBED;
    req.embed = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_EMBED, resp, err);
}

int omlc_export_model(omlc *c, const char *model, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_export_model: no out");
    *resp = NULL;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ExportModelRequest body = OMLD__EXPORT_MODEL_REQUEST__INIT;
    if (model) {
        body.model_opt_case = OMLD__EXPORT_MODEL_REQUEST__MODEL_OPT_MODEL;
        body.model = (char *)model;
    }
    req.body_case = OMLD__REQUEST__BODY_EXPORT_MODEL;
    req.export_model = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_EXPORT_MODEL, resp, err);
}

int omlc_status(omlc *c, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_status: no out");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__StatusRequest body = OMLD__STATUS_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_STATUS;
    req.status = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_STATUS_INFO, resp, err);
}

int omlc_health(omlc *c, int *live, int *ready, int *draining, omlc_error *err)
{
    omlc__err_clear(err);
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__HealthRequest body = OMLD__HEALTH_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_HEALTH;
    req.health = &body;
    Omld__Response *r = NULL;
    int rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_HEALTH, &r, err);
    if (rc != 0)
        return rc;
    if (live)
        *live = r->health->live != 0;
    if (ready)
        *ready = r->health->ready != 0;
    if (draining)
        *draining = r->health->draining != 0;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

int omlc_checkpoint(omlc *c, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_checkpoint: no out");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__CheckpointRequest body = OMLD__CHECKPOINT_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_CHECKPOINT;
    req.checkpoint = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_CHECKPOINT, resp, err);
}

int omlc_auth(omlc *c, const char *token, int *read_write, omlc_error *err)
{
    omlc__err_clear(err);
    if (token == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_auth: no token");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__AuthRequest body = OMLD__AUTH_REQUEST__INIT;
    body.token = (char *)token;
    req.body_case = OMLD__REQUEST__BODY_AUTH;
    req.auth = &body;
    Omld__Response *r = NULL;
    int rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_AUTH, &r, err);
    if (rc != 0)
        return rc;
    if (read_write)
        *read_write = r->auth->read_write != 0;
    omld__response__free_unpacked(r, NULL);
    return 0;
}

/* ---------------------------------------------------------------- pipelining */

/* One pipelined run: `n_req` requests, request i built and sent by send_fn,
 * each answer handed to recv_fn (which returns how many units it covered,
 * for progress). At most `window` in flight. On the first error the answers
 * still in flight are read and dropped, so the connection stays in step
 * unless the error is a transport one. */
typedef int (*pipe_send_fn)(omlc *c, size_t i, void *ctx, omlc_error *err);
typedef size_t (*pipe_recv_fn)(omlc *c, size_t i, const Omld__Response *r, void *ctx);

static int pipeline(omlc *c, size_t n_req, size_t window, Omld__Response__BodyCase want,
                    pipe_send_fn send_fn, pipe_recv_fn recv_fn, void *ctx, size_t total,
                    omlc_progress_fn progress, void *arg, omlc_error *err)
{
    omlc__err_clear(err);
    memset(&c->totals, 0, sizeof c->totals);
    if (window == 0)
        window = 1;
    size_t sent = 0, got = 0, done = 0;
    int first = 0;
    omlc_error scratch;
    while (got < n_req) {
        while (first == 0 && sent < n_req && sent - got < window) {
            int rc = send_fn(c, sent, ctx, err);
            if (rc != 0) {
                if (rc < 0 && c->broken)
                    return rc;
                first = rc; /* a local argument error: stop sending, drain */
                break;
            }
            sent++;
        }
        if (got == sent)
            break;
        Omld__Response *r = NULL;
        int rc = omlc_recv(c, &r, first ? &scratch : err);
        if (rc < 0) {
            if (first && err)
                *err = scratch;
            return rc;
        }
        if (rc == 0 && r->body_case != want) {
            omld__response__free_unpacked(r, NULL);
            return omlc__fail(c, err, OMLC_EPROTO, "OK answer with body %d, expected %d",
                        (int)r->body_case, (int)want);
        }
        if (rc == 0 && first == 0) {
            done += recv_fn(c, got, r, ctx);
            c->totals.model_version = r->model_version;
            if (progress)
                progress(done, total, arg);
        } else if (first == 0) {
            first = rc; /* err holds it; stop sending, drain the rest */
        }
        omld__response__free_unpacked(r, NULL);
        got++;
    }
    return first;
}

typedef struct batch_ctx {
    const void *base;
    size_t n, batch;
    const char *model; /* classify */
    uint32_t k;
    omlc_classification *out;
} batch_ctx;

static size_t batch_len(const batch_ctx *b, size_t i)
{
    size_t off = i * b->batch;
    return b->n - off < b->batch ? b->n - off : b->batch;
}

static int put_send(omlc *c, size_t i, void *ctx, omlc_error *err)
{
    batch_ctx *b = ctx;
    put_msg m;
    int rc = put_build(c, &m, (const omlc_item *)b->base + i * b->batch, batch_len(b, i), err);
    if (rc == 0)
        rc = omlc_send(c, &m.req, err);
    put_free(&m);
    return rc;
}

static size_t put_recv(omlc *c, size_t i, const Omld__Response *r, void *ctx)
{
    c->totals.created += r->put_items->created;
    c->totals.replaced += r->put_items->replaced;
    return batch_len(ctx, i);
}

static int trip_send(omlc *c, size_t i, void *ctx, omlc_error *err)
{
    batch_ctx *b = ctx;
    trip_msg m;
    int rc = trip_build(&m, (const omlc_triplet *)b->base + i * b->batch, batch_len(b, i), err);
    if (rc == 0)
        rc = omlc_send(c, &m.req, err);
    trip_free(&m);
    return rc;
}

static size_t trip_recv(omlc *c, size_t i, const Omld__Response *r, void *ctx)
{
    c->totals.accepted += r->add_triplets->accepted;
    c->totals.queue_depth = r->add_triplets->queue_depth;
    return batch_len(ctx, i);
}

static int pair_send(omlc *c, size_t i, void *ctx, omlc_error *err)
{
    batch_ctx *b = ctx;
    pair_msg m;
    int rc = pair_build(&m, (const omlc_pair *)b->base + i * b->batch, batch_len(b, i), err);
    if (rc == 0)
        rc = omlc_send(c, &m.req, err);
    pair_free(&m);
    return rc;
}

static size_t pair_recv(omlc *c, size_t i, const Omld__Response *r, void *ctx)
{
    c->totals.accepted += r->add_pairs->accepted;
    c->totals.derived += r->add_pairs->derived_triplets;
    return batch_len(ctx, i);
}

static int classify_send(omlc *c, size_t i, void *ctx, omlc_error *err)
{
    batch_ctx *b = ctx;
    classify_msg m;
    int rc = classify_build(&m, (const omlc_ref *)b->base + i, b->k, b->model, err);
    return rc != 0 ? rc : omlc_send(c, &m.req, err);
}

static size_t classify_recv(omlc *c, size_t i, const Omld__Response *r, void *ctx)
{
    batch_ctx *b = ctx;
    omlc__classify_copy(r->classify, r->model_version, &b->out[i]);
    return 1;
}

static int batch_args(omlc *c, const void *p, size_t n, size_t *batch, omlc_error *err)
{
    omlc__err_clear(err);
    int rc = omlc__check_usable(c, err);
    if (rc != 0)
        return rc;
    if (p == NULL && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "pipelined call: no input");
    if (*batch == 0)
        *batch = 256;
    return 0;
}

int omlc_put_items_pipelined(omlc *c, const omlc_item *items, size_t n, size_t batch,
                             size_t window, omlc_progress_fn progress, void *arg,
                             omlc_error *err)
{
    int rc = batch_args(c, items, n, &batch, err);
    if (rc != 0)
        return rc;
    batch_ctx b = {.base = items, .n = n, .batch = batch};
    return pipeline(c, (n + batch - 1) / batch, window, OMLD__RESPONSE__BODY_PUT_ITEMS, put_send,
                    put_recv, &b, n, progress, arg, err);
}

int omlc_add_triplets_pipelined(omlc *c, const omlc_triplet *t, size_t n, size_t batch,
                                size_t window, omlc_progress_fn progress, void *arg,
                                omlc_error *err)
{
    int rc = batch_args(c, t, n, &batch, err);
    if (rc != 0)
        return rc;
    batch_ctx b = {.base = t, .n = n, .batch = batch};
    return pipeline(c, (n + batch - 1) / batch, window, OMLD__RESPONSE__BODY_ADD_TRIPLETS,
                    trip_send, trip_recv, &b, n, progress, arg, err);
}

int omlc_add_pairs_pipelined(omlc *c, const omlc_pair *p, size_t n, size_t batch,
                             size_t window, omlc_progress_fn progress, void *arg,
                             omlc_error *err)
{
    int rc = batch_args(c, p, n, &batch, err);
    if (rc != 0)
        return rc;
    batch_ctx b = {.base = p, .n = n, .batch = batch};
    return pipeline(c, (n + batch - 1) / batch, window, OMLD__RESPONSE__BODY_ADD_PAIRS,
                    pair_send, pair_recv, &b, n, progress, arg, err);
}

int omlc_classify_pipelined(omlc *c, const omlc_ref *q, size_t n, uint32_t k,
                            const char *model, size_t window, omlc_classification *out,
                            omlc_progress_fn progress, void *arg, omlc_error *err)
{
    size_t one = 1;
    int rc = batch_args(c, q, n, &one, err);
    if (rc != 0)
        return rc;
    if (out == NULL && n > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_classify_pipelined: no out");
    batch_ctx b = {.base = q, .n = n, .batch = 1, .k = k, .model = model, .out = out};
    return pipeline(c, n, window, OMLD__RESPONSE__BODY_CLASSIFY, classify_send, classify_recv,
                    &b, n, progress, arg, err);
}

/* ------------------------------------------------------------ trainer jobs and batch models */

int omlc_train_start(omlc *c, const Omld__TrainStartRequest *body, uint64_t *job_id,
                     char *model, size_t model_cap, omlc_error *err)
{
    omlc__err_clear(err);
    if (body == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_train_start: no request");
    Omld__Request req = OMLD__REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_TRAIN_START;
    req.train_start = (Omld__TrainStartRequest *)body;
    Omld__Response *resp = NULL;
    int rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_TRAIN_START, &resp, err);
    if (rc == 0) {
        if (job_id)
            *job_id = resp->train_start->job_id;
        if (model && model_cap)
            snprintf(model, model_cap, "%s", resp->train_start->model);
        omld__response__free_unpacked(resp, NULL);
    }
    return rc;
}

int omlc_train_status(omlc *c, uint64_t job_id, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_train_status: no out");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__TrainStatusRequest body = OMLD__TRAIN_STATUS_REQUEST__INIT;
    body.job_id = job_id;
    req.body_case = OMLD__REQUEST__BODY_TRAIN_STATUS;
    req.train_status = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_TRAIN_STATUS, resp, err);
}

int omlc_train_cancel(omlc *c, uint64_t job_id, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_train_cancel: no out");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__TrainCancelRequest body = OMLD__TRAIN_CANCEL_REQUEST__INIT;
    body.job_id = job_id;
    req.body_case = OMLD__REQUEST__BODY_TRAIN_CANCEL;
    req.train_cancel = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_TRAIN_CANCEL, resp, err);
}

int omlc_list_models(omlc *c, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_list_models: no out");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ListModelsRequest body = OMLD__LIST_MODELS_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_LIST_MODELS;
    req.list_models = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_LIST_MODELS, resp, err);
}

int omlc_promote(omlc *c, const char *name, uint64_t *model_version, omlc_error *err)
{
    omlc__err_clear(err);
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__PromoteRequest body = OMLD__PROMOTE_REQUEST__INIT;
    body.name = (char *)(name ? name : "");
    req.body_case = OMLD__REQUEST__BODY_PROMOTE;
    req.promote = &body;
    Omld__Response *resp = NULL;
    int rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_PROMOTE, &resp, err);
    if (rc == 0) {
        if (model_version)
            *model_version = resp->promote->model_version;
        omld__response__free_unpacked(resp, NULL);
    }
    return rc;
}

int omlc_rollback(omlc *c, uint64_t *model_version, omlc_error *err)
{
    omlc__err_clear(err);
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__RollbackRequest body = OMLD__ROLLBACK_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_ROLLBACK;
    req.rollback = &body;
    Omld__Response *resp = NULL;
    int rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_ROLLBACK, &resp, err);
    if (rc == 0) {
        if (model_version)
            *model_version = resp->rollback->model_version;
        omld__response__free_unpacked(resp, NULL);
    }
    return rc;
}

int omlc_delete_model(omlc *c, const char *name, omlc_error *err)
{
    omlc__err_clear(err);
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__DeleteModelRequest body = OMLD__DELETE_MODEL_REQUEST__INIT;
    body.name = (char *)(name ? name : "");
    req.body_case = OMLD__REQUEST__BODY_DELETE_MODEL;
    req.delete_model = &body;
    Omld__Response *resp = NULL;
    int rc = omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_DELETE_MODEL, &resp, err);
    if (rc == 0)
        omld__response__free_unpacked(resp, NULL);
    return rc;
}

int omlc_promote_replica(omlc *c, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    *resp = NULL;
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__PromoteReplicaRequest body = OMLD__PROMOTE_REPLICA_REQUEST__INIT;
    req.body_case = OMLD__REQUEST__BODY_PROMOTE_REPLICA;
    req.promote_replica = &body;
    return omlc__call_expect(c, &req, OMLD__RESPONSE__BODY_PROMOTE_REPLICA, resp, err);
}
