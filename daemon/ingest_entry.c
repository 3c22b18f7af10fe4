/* ingest_entry.c - one Redis Stream entry as a Request (ingest_entry.h).
 * The Request borrows the entry's strings; only the features and the
 * metadata arrays are allocated, and freed once it is packed. */
#include "ingest_entry.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "omld.pb-c.h"

/* The value of field name among the entry's field/value pairs, or NULL. */
static const redisReply *field(const redisReply *fv, const char *name)
{
    for (size_t i = 0; fv && i + 1 < fv->elements; i += 2)
        if (fv->element[i]->type == REDIS_REPLY_STRING && strcmp(fv->element[i]->str, name) == 0 &&
            fv->element[i + 1]->type == REDIS_REPLY_STRING)
            return fv->element[i + 1];
    return NULL;
}

char *omld_ingest_field_str(const redisReply *fv, const char *name)
{
    const redisReply *v = field(fv, name);
    return v ? v->str : NULL;
}

/* A field name meta.KEY (an item's metadata entry). */
static int is_meta(const redisReply *name)
{
    size_t plen = strlen(OMLD_INGEST_META_PREFIX);
    return name->type == REDIS_REPLY_STRING && name->len >= plen &&
           memcmp(name->str, OMLD_INGEST_META_PREFIX, plen) == 0;
}

/* The item's features: `features` as a JSON array, or `features_f32` as
 * little-endian float32 bytes. NULL with why filled. */
static float *item_features(const redisReply *fv, size_t *n, char *why, size_t whylen)
{
    const redisReply *f32 = field(fv, "features_f32"), *js = field(fv, "features");
    if (f32) {
        if (f32->len == 0 || f32->len % 4 != 0) {
            snprintf(why, whylen, "features_f32 has %zu bytes, not a multiple of 4", f32->len);
            return NULL;
        }
        float *x = malloc(f32->len);
        if (x)
            memcpy(x, f32->str, f32->len); /* little-endian hosts only, as the WAL */
        *n = f32->len / 4;
        return x;
    }
    if (js == NULL) {
        snprintf(why, whylen, "an item needs features (a JSON array) or features_f32");
        return NULL;
    }
    json_error_t je;
    json_t *a = json_loadb(js->str, js->len, 0, &je);
    if (!json_is_array(a)) {
        snprintf(why, whylen, "features is not a JSON array of numbers");
        json_decref(a);
        return NULL;
    }
    *n = json_array_size(a);
    float *x = malloc((*n ? *n : 1) * sizeof *x);
    for (size_t i = 0; x && i < *n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v)) {
            snprintf(why, whylen, "features[%zu] is not a number", i);
            free(x);
            x = NULL;
            break;
        }
        x[i] = (float)json_number_value(v);
    }
    json_decref(a);
    return x;
}

/* refs[i].id = the entry's field names[i] for i < n (a `kind` needs them
 * all); 0, or -1 with why naming the missing one. */
static int take_ids(const redisReply *fv, const char *const *names, int n, const char *kind,
                    Omld__ItemRef *refs, char *why, size_t whylen)
{
    for (int i = 0; i < n; i++)
        if ((refs[i].id = omld_ingest_field_str(fv, names[i])) == NULL) {
            snprintf(why, whylen, "a %s needs %s (an id)", kind, names[i]);
            return -1;
        }
    return 0;
}

/* The item's metadata: every meta.KEY field, in the entry's order, into
 * *kv (malloc'd; the strings borrowed from fv), *n of them (0: *kv NULL).
 * 0, or -1 with why filled. */
static int item_metadata(const redisReply *fv, Omld__KeyValue **kv, size_t *n, char *why,
                         size_t whylen)
{
    const size_t plen = strlen(OMLD_INGEST_META_PREFIX);
    size_t count = 0;
    for (size_t i = 0; fv && i + 1 < fv->elements; i += 2)
        count += is_meta(fv->element[i]);
    *kv = NULL;
    *n = 0;
    if (count == 0)
        return 0;
    *kv = malloc(count * sizeof **kv);
    if (*kv == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i + 1 < fv->elements; i += 2) {
        const redisReply *k = fv->element[i], *v = fv->element[i + 1];
        if (!is_meta(k))
            continue;
        if (v->type != REDIS_REPLY_STRING || memchr(k->str, '\0', k->len) != NULL ||
            memchr(v->str, '\0', v->len) != NULL) {
            snprintf(why, whylen, "field %.80s: a metadata key or value must not hold a NUL byte",
                     k->str);
            free(*kv);
            *kv = NULL;
            return -1;
        }
        Omld__KeyValue *e = &(*kv)[(*n)++];
        omld__key_value__init(e);
        e->key = k->str + plen;
        e->value = v->str;
    }
    return 0;
}

int omld_ingest_entry_request(const char *stream, const char *id, const redisReply *fv,
                              uint32_t max_frame, uint8_t **out, size_t *out_len, char *why,
                              size_t whylen)
{
    char key[256];
    snprintf(key, sizeof key, "redis:%s:%s", stream, id);
    const char *type = omld_ingest_field_str(fv, "type");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ItemRef refs[3];
    Omld__ItemRef *rp[3];
    for (int i = 0; i < 3; i++) {
        omld__item_ref__init(&refs[i]);
        refs[i].ref_case = OMLD__ITEM_REF__REF_ID;
        rp[i] = &refs[i];
    }
    Omld__Triplet t = OMLD__TRIPLET__INIT, *tp = &t;
    Omld__AddTripletsRequest at = OMLD__ADD_TRIPLETS_REQUEST__INIT;
    Omld__Pair pr = OMLD__PAIR__INIT, *pp = &pr;
    Omld__AddPairsRequest ap = OMLD__ADD_PAIRS_REQUEST__INIT;
    Omld__Item it = OMLD__ITEM__INIT, *ip = &it;
    Omld__PutItemsRequest pi = OMLD__PUT_ITEMS_REQUEST__INIT;
    float *x = NULL;
    Omld__KeyValue *meta = NULL, **meta_p = NULL;
    size_t n_meta = 0;
    static const char *const tnames[3] = {"anchor", "positive", "negative"};
    static const char *const pnames[2] = {"a", "b"};
    int is_item = type && strcmp(type, "item") == 0;
    for (size_t i = 0; !is_item && fv && i + 1 < fv->elements; i += 2)
        if (is_meta(fv->element[i])) {
            snprintf(why, whylen, "field %.80s: metadata (meta.KEY) belongs to item entries",
                     fv->element[i]->str);
            return -1;
        }
    if (type && strcmp(type, "triplet") == 0) {
        if (take_ids(fv, tnames, 3, "triplet", refs, why, whylen) != 0)
            return -1;
        t.anchor = rp[0], t.positive = rp[1], t.negative = rp[2];
        const char *w = omld_ingest_field_str(fv, "weight"); /* optional; the daemon checks its range */
        if (w != NULL) {
            char *end = NULL;
            t.weight = strtof(w, &end);
            t.weight_opt_case = OMLD__TRIPLET__WEIGHT_OPT_WEIGHT;
            if (end == w || *end != '\0') {
                snprintf(why, whylen, "a triplet's weight must be a number");
                return -1;
            }
        }
        at.n_triplets = 1;
        at.triplets = &tp;
        at.idempotency_key = key;
        req.body_case = OMLD__REQUEST__BODY_ADD_TRIPLETS;
        req.add_triplets = &at;
    } else if (type && strcmp(type, "pair") == 0) {
        if (take_ids(fv, pnames, 2, "pair", refs, why, whylen) != 0)
            return -1;
        const char *rel = omld_ingest_field_str(fv, "relation");
        if (rel == NULL || (strcmp(rel, "similar") != 0 && strcmp(rel, "dissimilar") != 0)) {
            snprintf(why, whylen, "a pair needs relation: similar or dissimilar");
            return -1;
        }
        pr.a = rp[0], pr.b = rp[1];
        pr.relation = rel[0] == 's' ? OMLD__PAIR__RELATION__SIMILAR : OMLD__PAIR__RELATION__DISSIMILAR;
        ap.n_pairs = 1;
        ap.pairs = &pp;
        ap.idempotency_key = key;
        req.body_case = OMLD__REQUEST__BODY_ADD_PAIRS;
        req.add_pairs = &ap;
    } else if (is_item) {
        if ((it.id = omld_ingest_field_str(fv, "id")) == NULL) {
            snprintf(why, whylen, "an item needs id");
            return -1;
        }
        if ((x = item_features(fv, &it.n_features, why, whylen)) == NULL)
            return -1;
        it.features = x;
        if (item_metadata(fv, &meta, &n_meta, why, whylen) != 0) {
            free(x);
            return -1;
        }
        meta_p = n_meta ? malloc(n_meta * sizeof *meta_p) : NULL;
        if (n_meta && meta_p == NULL) {
            snprintf(why, whylen, "out of memory");
            free(x);
            free(meta);
            return -1;
        }
        for (size_t i = 0; i < n_meta; i++)
            meta_p[i] = &meta[i];
        it.metadata = meta_p;
        it.n_metadata = n_meta;
        if ((it.label = omld_ingest_field_str(fv, "label")) != NULL)
            it.label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
        pi.n_items = 1;
        pi.items = &ip;
        pi.idempotency_key = key;
        req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
        req.put_items = &pi;
    } else {
        snprintf(why, whylen, "type must be triplet, pair or item");
        return -1;
    }
    *out_len = omld__request__get_packed_size(&req);
    *out = *out_len <= max_frame ? malloc(*out_len ? *out_len : 1) : NULL;
    if (*out)
        omld__request__pack(&req, *out);
    else
        snprintf(why, whylen, "the entry is larger than max_frame_bytes once packed");
    free(x);
    free(meta);
    free(meta_p);
    return *out ? 0 : -1;
}

