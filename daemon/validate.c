/* validate.c - every stateless check of a request, its route and its cost
 * (see validate.h).
 *
 * DESIGN
 * Runs on the loop thread for every decoded request, so it is linear in the
 * size of the request: each value is looked at once (finiteness with a
 * branch-free pass that vectorises, then a search only if it failed), and
 * repeated ids in one batch are found with one hash set whose keys are the
 * request's own strings (oml_idmap borrows keys), reserved once up front.
 * The first offending value in request order is reported, with its path
 * ("put_items.items[3].features") and an English sentence naming it.
 *
 * Strings arrive from protobuf-c NUL-terminated and unchecked: a NUL inside
 * an id on the wire is seen here as its end (protobuf-c keeps no length, so
 * this cannot be told apart), and UTF-8 is checked here. Lengths are
 * measured with strnlen capped at one byte past the limit, so a huge string
 * costs nothing to refuse. */
#include "validate.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "idmap.h"
#include "models.h"
#include "ops.h"
#include "trainer.h"

#define INVALID OMLD__STATUS__CODE__INVALID_ARGUMENT

/* Longest path we build: "add_triplets.triplets[4294967295].negative.vector". */
#define PATH_CAP 128
/* Longest path of a query inside a batch: "retrieve_batch.queries[N]". */
#define AT_CAP 64


/* Offset of the first byte of s (n) that is not part of well-formed UTF-8
 * (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), or
 * n. proto3 strings must be UTF-8; protobuf-c does not check on decoding,
 * and an id that is not would later make strict clients (Go, Python, Java)
 * fail to decode the answers that echo it. */
static size_t utf8_bad(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c >= 0xc2 && c <= 0xdf)
            len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0)
                lo = 0xa0; /* overlong */
            else if (c == 0xed)
                hi = 0x9f; /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0)
                lo = 0x90; /* overlong */
            else if (c == 0xf4)
                hi = 0x8f; /* above U+10FFFF */
        } else
            return i;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t j = 2; j < len; j++)
            if ((s[i + j] & 0xc0) != 0x80)
                return i;
        i += len;
    }
    return n;
}

/* A string of lo..hi bytes of UTF-8; what names the value in the message. */
static int check_text(const char *s, const char *what, size_t lo, size_t hi, const char *field,
                      omld_reply *r)
{
    size_t n = s ? strnlen(s, hi + 1) : 0;
    if (n < lo)
        return omld_reply_error(r, INVALID, field, "%s is empty; it must have 1 to %zu bytes", what,
                                hi);
    if (n > hi) {
        char q[200];
        return omld_reply_error(r, INVALID, field, "%s %s is longer than %zu bytes", what,
                                omld_reply_quote(q, sizeof q, s, n), hi);
    }
    size_t bad = utf8_bad((const unsigned char *)s, n);
    if (bad < n) {
        char q[200];
        return omld_reply_error(r, INVALID, field, "%s %s is not valid UTF-8 (at byte %zu)", what,
                                omld_reply_quote(q, sizeof q, s, n), bad);
    }
    return 0;
}

/* An id, a label or a model name: 1..OMLD_ID_MAX bytes of UTF-8 (0 allowed
 * when allow_empty). what names the value in the message. */
static int check_name(const char *s, const char *what, int allow_empty, const char *field,
                      omld_reply *r)
{
    return check_text(s, what, allow_empty ? 0 : 1, OMLD_ID_MAX, field, r);
}

size_t omld_first_bad_feature(const float *x, size_t n, float max_abs)
{
    /* The first pass tests every value without a branch, so the compiler
     * vectorises it; only a vector that fails is searched. !(|x| <= m) is
     * true for NaN, and (m <= FLT_MAX) for infinities. */
    float m = max_abs > 0 && max_abs < FLT_MAX ? max_abs : FLT_MAX;
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= !(fabsf(x[i]) <= m);
    if (!bad)
        return n;
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(x[i]) <= m))
            return i;
    return n;
}

/* A feature vector: exactly dim values, all finite and within +-max_abs.
 * what names it. */
static int check_vector(const float *x, size_t n, const omld_limits *lim, const char *what,
                        const char *field, omld_reply *r)
{
    if (n != (size_t)lim->dim)
        return omld_reply_error(r, OMLD__STATUS__CODE__WRONG_DIMENSION, field,
                                "%s has %zu values; the daemon's dimension is %d", what, n,
                                (int)lim->dim);
    size_t j = omld_first_bad_feature(x, n, lim->max_abs);
    if (j < n && !isfinite(x[j]))
        return omld_reply_error(r, OMLD__STATUS__CODE__NON_FINITE, field,
                                "%s[%zu] is %s; every feature value must be finite", what, j,
                                isnan(x[j]) ? "NaN" : x[j] > 0 ? "+Inf" : "-Inf");
    if (j < n)
        return omld_reply_error(r, INVALID, field,
                                "%s[%zu] is %g; every feature value must be within +-%g "
                                "(max_feature_abs)", what, j, (double)x[j], (double)lim->max_abs);
    return 0;
}

/* A batch holds 1..max_batch entries. what names the repeated field. */
static int check_batch(size_t n, const omld_limits *lim, const char *what, const char *field,
                       omld_reply *r)
{
    if (n == 0)
        return omld_reply_error(r, INVALID, field,
                                "%s is empty; a request carries 1 to %u entries", what,
                                (unsigned)lim->max_batch);
    if (n > lim->max_batch)
        return omld_reply_error(r, INVALID, field,
                                "%s has %zu entries; the limit (max_batch) is %u", what, n,
                                (unsigned)lim->max_batch);
    return 0;
}

/* Repeated-id detection over one batch: keys are borrowed from the request,
 * the table is reserved once (so puts cannot fail), and a batch of one needs
 * no table at all. */
typedef struct dupset {
    oml_idmap m;
    int on;
} dupset;

static int dupset_init(dupset *d, size_t n, const char *field, omld_reply *r)
{
    oml_idmap_init(&d->m);
    d->on = n > 1;
    if (d->on && oml_idmap_reserve(&d->m, (uint32_t)n) != OML_OK)
        return omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, field,
                                "out of memory while checking %zu ids for repeats", n);
    return 0;
}

/* 0, or CONFLICT naming the earlier entry that has the same id. */
static int dupset_add(dupset *d, const char *id, size_t i, const char *what, const char *field,
                      omld_reply *r)
{
    if (!d->on)
        return 0;
    size_t len = strlen(id); /* already checked to be <= OMLD_ID_MAX */
    uint32_t prev;
    if (oml_idmap_get(&d->m, id, len, &prev) == OML_OK) {
        char q[200];
        return omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, field,
                                "id %s appears twice in this batch (%s[%u] and %s[%zu])",
                                omld_reply_quote(q, sizeof q, id, len), what, (unsigned)prev, what, i);
    }
    (void)oml_idmap_put(&d->m, id, len, (uint32_t)i); /* reserved: cannot fail */
    return 0;
}

int omld_validate_ref(const Omld__ItemRef *ref, const omld_limits *lim, const char *field,
                      omld_reply *r)
{
    /* The member's path is formatted only for an error (checked again
     * with it): three per triplet were the loop thread's largest cost
     * after protobuf's unpack at 20,000 triplets/s. */
    char path[PATH_CAP + 16]; /* field (< PATH_CAP) and ".vector" */
    if (ref == NULL || ref->ref_case == OMLD__ITEM_REF__REF__NOT_SET)
        return omld_reply_error(r, INVALID, field, "%s is missing: give an item id or a vector",
                                field);
    if (ref->ref_case == OMLD__ITEM_REF__REF_ID) {
        if (check_name(ref->id, "id", 0, field, r) == 0)
            return 0;
        snprintf(path, sizeof path, "%s.id", field);
        return check_name(ref->id, "id", 0, path, r);
    }
    if (ref->ref_case == OMLD__ITEM_REF__REF_VECTOR) {
        const Omld__Vector *v = ref->vector;
        const float *x = v ? v->values : NULL;
        size_t n = v ? v->n_values : 0;
        if (check_vector(x, n, lim, "vector", field, r) == 0)
            return 0;
        snprintf(path, sizeof path, "%s.vector", field);
        return check_vector(x, n, lim, "vector", path, r);
    }
    return omld_reply_error(r, INVALID, field, "%s names an unknown kind of reference (%d)", field,
                            (int)ref->ref_case);
}

static int check_k(int set, uint32_t k, const omld_limits *lim, const char *field, omld_reply *r)
{
    if (!set)
        return 0;
    if (k == 0 || k > lim->max_k)
        return omld_reply_error(r, INVALID, field, "k is %u; it must be between 1 and %u (max_k)",
                                (unsigned)k, (unsigned)lim->max_k);
    return 0;
}

static int check_model(int set, const char *model, const char *field, omld_reply *r)
{
    return set ? check_name(model, "model name", 1, field, r) : 0;
}

/* An idempotency key: empty (none), or an id-like string. */
static int check_key(const char *key, const char *field, omld_reply *r)
{
    return check_name(key, "idempotency key", 1, field, r);
}

/* At most max_metadata_entries entries (what: "entries", "conditions") in
 * the list at `at`. */
static int check_meta_count(size_t n, const char *what, const omld_limits *lim, const char *at,
                            omld_reply *r)
{
    if (n <= lim->max_meta_entries)
        return 0;
    return omld_reply_error(r, INVALID, at, "%zu metadata %s; the limit (max_metadata_entries) is %u",
                            n, what, (unsigned)lim->max_meta_entries);
}

/* The key of entry i of the list at `at`, its path left in path. */
static int check_meta_key(const char *key, const char *at, size_t i, const omld_limits *lim,
                          char *path, omld_reply *r)
{
    snprintf(path, PATH_CAP, "%.80s[%zu].key", at, i);
    return check_text(key, "metadata key", 1, lim->max_meta_key, path, r);
}

/* An item's metadata at path `at` ("put_items.items[3].metadata"): at most
 * max_metadata_entries pairs, keys and values within their byte bounds,
 * no key twice. */
static int check_metadata(Omld__KeyValue *const *kv, size_t n, const omld_limits *lim,
                          const char *at, omld_reply *r)
{
    int rc = check_meta_count(n, "entries", lim, at, r);
    char path[PATH_CAP];
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = check_meta_key(kv[i]->key, at, i, lim, path, r);
        for (size_t j = 0; j < i && rc == 0; j++)
            if (strcmp(kv[j]->key, kv[i]->key) == 0)
                rc = omld_reply_error(r, INVALID, path, "metadata key \"%s\" repeats %s[%zu]'s",
                                      kv[i]->key, at, j);
        snprintf(path, sizeof path, "%.80s[%zu].value", at, i);
        if (rc == 0)
            rc = check_text(kv[i]->value, "metadata value", 0, lim->max_meta_value, path, r);
    }
    return rc;
}

int omld_check_meta_filter(Omld__MetadataCondition *const *c, size_t n, const omld_limits *lim,
                           const char *at, omld_reply *r)
{
    int rc = check_meta_count(n, "conditions", lim, at, r);
    char path[PATH_CAP];
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = check_meta_key(c[i]->key, at, i, lim, path, r);
        snprintf(path, sizeof path, "%.80s[%zu].values", at, i);
        if (rc == 0 && (c[i]->n_values == 0 || c[i]->n_values > lim->max_batch))
            rc = omld_reply_error(r, INVALID, path,
                                  "a condition has %zu values; it needs 1 to %u (max_batch)",
                                  c[i]->n_values, (unsigned)lim->max_batch);
        for (size_t j = 0; j < c[i]->n_values && rc == 0; j++) {
            snprintf(path, sizeof path, "%.80s[%u].values[%u]", at, (unsigned)i, (unsigned)j);
            rc = check_text(c[i]->values[j], "metadata value", 0, lim->max_meta_value, path, r);
        }
    }
    return rc;
}

int omld_check_put_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__PutItemsRequest *m = req->put_items;
    size_t n = m ? m->n_items : 0;
    int rc = check_batch(n, lim, "items", "put_items.items", r);
    if (rc == 0)
        rc = check_key(m->idempotency_key, "put_items.idempotency_key", r);
    if (rc)
        return rc;
    dupset seen;
    if ((rc = dupset_init(&seen, n, "put_items.items", r)) != 0)
        return rc;
    char path[PATH_CAP];
    for (size_t i = 0; i < n && rc == 0; i++) {
        const Omld__Item *it = m->items[i];
        snprintf(path, sizeof path, "put_items.items[%zu].id", i);
        if ((rc = check_name(it->id, "id", 0, path, r)) != 0)
            break;
        if ((rc = dupset_add(&seen, it->id, i, "items", path, r)) != 0)
            break;
        snprintf(path, sizeof path, "put_items.items[%zu].features", i);
        if ((rc = check_vector(it->features, it->n_features, lim, "features", path, r)) != 0)
            break;
        if (it->label_opt_case == OMLD__ITEM__LABEL_OPT_LABEL) {
            snprintf(path, sizeof path, "put_items.items[%zu].label", i);
            rc = check_name(it->label, "label", 0, path, r);
        }
        snprintf(path, sizeof path, "put_items.items[%zu].metadata", i);
        if (rc == 0)
            rc = check_metadata(it->metadata, it->n_metadata, lim, path, r);
    }
    oml_idmap_free(&seen.m);
    return rc;
}

/* ids of DeleteItems and GetItems: no id twice. */
static int check_ids(char *const *ids, size_t n, int unique, const char *op,
                     const omld_limits *lim, omld_reply *r)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s.ids", op);
    int rc = check_batch(n, lim, "ids", path, r);
    if (rc)
        return rc;
    dupset seen;
    if ((rc = dupset_init(&seen, unique ? n : 0, path, r)) != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s.ids[%zu]", op, i);
        if ((rc = check_name(ids[i], "id", 0, path, r)) != 0)
            break;
        if ((rc = dupset_add(&seen, ids[i], i, "ids", path, r)) != 0)
            break;
    }
    oml_idmap_free(&seen.m);
    return rc;
}

/* 1 if two (valid) refs name the same item: the same id, or inline vectors
 * with equal values. An id and a vector are compared where the id's
 * features are known (apply.c). */
static int same_ref(const Omld__ItemRef *x, const Omld__ItemRef *y)
{
    if (x->ref_case != y->ref_case)
        return 0;
    if (x->ref_case == OMLD__ITEM_REF__REF_ID)
        return strcmp(x->id, y->id) == 0;
    const Omld__Vector *a = x->vector, *b = y->vector;
    for (size_t i = 0; i < a->n_values; i++)
        if (a->values[i] != b->values[i])
            return 0;
    return 1;
}

int omld_check_triplet(const Omld__Triplet *t, size_t i, const omld_limits *lim, omld_reply *r)
{
    char path[PATH_CAP];
    const Omld__ItemRef *refs[3] = {t->anchor, t->positive, t->negative};
    static const char *const names[3] = {"anchor", "positive", "negative"};
    int rc = 0;
    for (int j = 0; j < 3 && rc == 0; j++) {
        if (omld_validate_ref(refs[j], lim, names[j], r) == 0)
            continue; /* the path only for an error, as in omld_validate_ref */
        snprintf(path, sizeof path, "add_triplets.triplets[%zu].%s", i, names[j]);
        rc = omld_validate_ref(refs[j], lim, path, r);
    }
    /* The negative must be another item than the anchor and the
     * positive: a triplet (a, p, a) asks a to be far from itself. */
    for (int j = 0; j < 2 && rc == 0; j++)
        if (same_ref(refs[j], refs[2])) {
            snprintf(path, sizeof path, "add_triplets.triplets[%zu].negative", i);
            rc = omld_reply_error(r, INVALID, path, "the negative is the same item as the "
                                  "%s; a triplet needs a negative that is another item",
                                  names[j]);
        }
    if (rc == 0 && t->weight_opt_case == OMLD__TRIPLET__WEIGHT_OPT_WEIGHT &&
        !(t->weight > 0.0f && t->weight <= OMLD_MAX_TRIPLET_WEIGHT)) {
        snprintf(path, sizeof path, "add_triplets.triplets[%zu].weight", i);
        rc = omld_reply_error(r, INVALID, path, "weight %g is not in (0, %g]", (double)t->weight,
                              (double)OMLD_MAX_TRIPLET_WEIGHT);
    }
    return rc;
}

int omld_check_add_triplets(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__AddTripletsRequest *m = req->add_triplets;
    size_t n = m ? m->n_triplets : 0;
    int rc = check_batch(n, lim, "triplets", "add_triplets.triplets", r);
    if (rc == 0)
        rc = check_key(m->idempotency_key, "add_triplets.idempotency_key", r);
    /* A partial batch's entries are checked one by one where they are
     * applied (apply.c), each refusal reported on its own. */
    for (size_t i = 0; i < n && rc == 0 && !m->partial; i++)
        rc = omld_check_triplet(m->triplets[i], i, lim, r);
    return rc;
}

omld_limits omld_limits_of(const omld_config *cfg)
{
    return (omld_limits){.dim = (int32_t)cfg->dim,
                         .max_batch = (uint32_t)cfg->max_batch,
                         .max_k = (uint32_t)cfg->max_k,
                         .default_k = (uint32_t)cfg->default_k,
                         .default_threshold = (float)cfg->default_threshold,
                         .max_abs = (float)cfg->max_feature_abs,
                         .max_answer = (uint32_t)cfg->max_frame_bytes,
                         .rerank_k = (uint32_t)cfg->rerank_candidates,
                         .depth_target = (float)cfg->ann_target_recall,
                         .max_meta_entries = (uint32_t)cfg->max_metadata_entries,
                         .max_meta_key = (uint32_t)cfg->max_metadata_key_bytes,
                         .max_meta_value = (uint32_t)cfg->max_metadata_value_bytes};
}

int omld_check_add_pairs(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__AddPairsRequest *m = req->add_pairs;
    size_t n = m ? m->n_pairs : 0;
    int rc = check_batch(n, lim, "pairs", "add_pairs.pairs", r);
    if (rc == 0)
        rc = check_key(m->idempotency_key, "add_pairs.idempotency_key", r);
    char path[PATH_CAP];
    for (size_t i = 0; i < n && rc == 0; i++) {
        const Omld__Pair *p = m->pairs[i];
        snprintf(path, sizeof path, "add_pairs.pairs[%zu].a", i);
        if ((rc = omld_validate_ref(p->a, lim, path, r)) != 0)
            break;
        snprintf(path, sizeof path, "add_pairs.pairs[%zu].b", i);
        if ((rc = omld_validate_ref(p->b, lim, path, r)) != 0)
            break;
        if (p->relation != OMLD__PAIR__RELATION__SIMILAR
            && p->relation != OMLD__PAIR__RELATION__DISSIMILAR) {
            snprintf(path, sizeof path, "add_pairs.pairs[%zu].relation", i);
            rc = omld_reply_error(r, INVALID, path,
                                  p->relation == OMLD__PAIR__RELATION__RELATION_UNSPECIFIED
                                      ? "relation is unspecified (%d); it must be SIMILAR or "
                                        "DISSIMILAR"
                                      : "relation %d is unknown; it must be SIMILAR or DISSIMILAR",
                                  (int)p->relation);
        }
    }
    return rc;
}

/* A query's item at "<at>.query" (NULL: missing). */
static int check_query_item(const Omld__ItemRef *query, const omld_limits *lim, const char *at,
                            omld_reply *r)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s.query", at);
    return omld_validate_ref(query, lim, path, r);
}

/* One ClassifyRequest at path `at` ("classify", "classify_batch.queries[3]"). */
static int check_classify_msg(const Omld__ClassifyRequest *m, const omld_limits *lim,
                              const char *at, omld_reply *r)
{
    int rc = check_query_item(m ? m->query : NULL, lim, at, r);
    if (m == NULL)
        return rc;
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s.k", at);
    if (rc == 0)
        rc = check_k(m->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K, m->k, lim, path, r);
    snprintf(path, sizeof path, "%s.model", at);
    if (rc == 0)
        rc = check_model(m->model_opt_case == OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL, m->model,
                         path, r);
    snprintf(path, sizeof path, "%s.metadata", at);
    if (rc == 0)
        rc = omld_check_meta_filter(m->metadata, m->n_metadata, lim, path, r);
    return rc;
}

int omld_check_classify(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    return check_classify_msg(req->classify, lim, "classify", r);
}

int omld_check_verify(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__VerifyRequest *m = req->verify;
    if (m == NULL)
        return omld_validate_ref(NULL, lim, "verify.a", r);
    int rc = omld_validate_ref(m->a, lim, "verify.a", r);
    if (rc == 0)
        rc = omld_validate_ref(m->b, lim, "verify.b", r);
    if (rc == 0 && m->threshold_opt_case == OMLD__VERIFY_REQUEST__THRESHOLD_OPT_THRESHOLD
        && !(m->threshold > 0.0f && m->threshold <= 1.0f)) /* also refuses NaN */
        rc = omld_reply_error(r, INVALID, "verify.threshold",
                              "threshold is %g; it must be in (0, 1]", (double)m->threshold);
    if (rc == 0)
        rc = check_model(m->model_opt_case == OMLD__VERIFY_REQUEST__MODEL_OPT_MODEL, m->model,
                         "verify.model", r);
    return rc;
}

/* A retrieval's filter list (exclude_ids, labels): up to max_batch names,
 * each a valid id or label; empty means no filter. */
static int check_filter_names(char *const *names, size_t n, const char *what, const char *field,
                              const omld_limits *lim, omld_reply *r)
{
    if (n > lim->max_batch)
        return omld_reply_error(r, INVALID, field,
                                "%s has %zu entries; the limit (max_batch) is %u", field, n,
                                (unsigned)lim->max_batch);
    char path[PATH_CAP];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s[%zu]", field, i);
        int rc = check_name(names[i], what, 0, path, r);
        if (rc)
            return rc;
    }
    return 0;
}

/* k, and the page it is cut from: offset + k within max_k, so that the
 * ranking a page comes from is one the daemon would also serve whole. at
 * is the request's path ("retrieve", "retrieve_batch.queries[3]"). */
static int check_retrieve_page(const Omld__RetrieveRequest *m, const omld_limits *lim,
                               const char *at, omld_reply *r)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s.k", at);
    int rc = check_k(m->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K, m->k, lim, path, r);
    uint64_t k = m->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K ? m->k : lim->default_k;
    snprintf(path, sizeof path, "%s.offset", at);
    if (rc == 0 && (uint64_t)m->offset + k > lim->max_k)
        rc = omld_reply_error(r, INVALID, path,
                              "offset %u + k %llu is over %u (max_k): a page must come from a "
                              "ranking of at most max_k hits",
                              (unsigned)m->offset, (unsigned long long)k, (unsigned)lim->max_k);
    return rc;
}

/* What a retrieval asks beyond its query, at path `at`: k and offset,
 * model, the exclude_ids and labels filters, the similarity floor. */
static int check_retrieve_rest(const Omld__RetrieveRequest *m, const omld_limits *lim,
                               const char *at, omld_reply *r)
{
    char path[PATH_CAP];
    int rc = check_retrieve_page(m, lim, at, r);
    snprintf(path, sizeof path, "%s.model", at);
    if (rc == 0)
        rc = check_model(m->model_opt_case == OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL, m->model,
                         path, r);
    char list[PATH_CAP - 24]; /* room for "[i]" after it */
    snprintf(list, sizeof list, "%s.exclude_ids", at);
    if (rc == 0)
        rc = check_filter_names(m->exclude_ids, m->n_exclude_ids, "id", list, lim, r);
    snprintf(list, sizeof list, "%s.labels", at);
    if (rc == 0)
        rc = check_filter_names(m->labels, m->n_labels, "label", list, lim, r);
    snprintf(list, sizeof list, "%s.metadata", at);
    if (rc == 0)
        rc = omld_check_meta_filter(m->metadata, m->n_metadata, lim, list, r);
    snprintf(path, sizeof path, "%s.min_similarity", at);
    if (rc == 0 && m->min_similarity_opt_case == OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY &&
        !(m->min_similarity >= -1.0f && m->min_similarity <= 1.0f))
        rc = omld_reply_error(r, INVALID, path, "min_similarity is %g; it must be in [-1, 1]",
                              (double)m->min_similarity);
    return rc;
}

/* One RetrieveRequest at path `at`. */
static int check_retrieve_msg(const Omld__RetrieveRequest *m, const omld_limits *lim,
                              const char *at, omld_reply *r)
{
    int rc = check_query_item(m ? m->query : NULL, lim, at, r);
    return rc || m == NULL ? rc : check_retrieve_rest(m, lim, at, r);
}

/* The retrieve fields a RecommendRequest shares, as a RetrieveRequest
 * (no query) for the checks and the search. */
void omld_recommend_as_retrieve(const Omld__RecommendRequest *m, Omld__RetrieveRequest *out)
{
    omld__retrieve_request__init(out);
    out->k_opt_case = m->k_opt_case == OMLD__RECOMMEND_REQUEST__K_OPT_K
                          ? OMLD__RETRIEVE_REQUEST__K_OPT_K
                          : OMLD__RETRIEVE_REQUEST__K_OPT__NOT_SET;
    out->k = m->k;
    out->model_opt_case = m->model_opt_case == OMLD__RECOMMEND_REQUEST__MODEL_OPT_MODEL
                              ? OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL
                              : OMLD__RETRIEVE_REQUEST__MODEL_OPT__NOT_SET;
    out->model = m->model;
    out->n_exclude_ids = m->n_exclude_ids;
    out->exclude_ids = m->exclude_ids;
    out->n_labels = m->n_labels;
    out->labels = m->labels;
    out->n_metadata = m->n_metadata;
    out->metadata = m->metadata;
    out->with_metadata = m->with_metadata;
    out->min_similarity_opt_case =
        m->min_similarity_opt_case == OMLD__RECOMMEND_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY
            ? OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT_MIN_SIMILARITY
            : OMLD__RETRIEVE_REQUEST__MIN_SIMILARITY_OPT__NOT_SET;
    out->min_similarity = m->min_similarity;
    out->offset = m->offset;
}

/* Recommend's examples of one side: count in [lo, OMLD_RECOMMEND_MAX],
 * each a valid reference. */
static int check_examples(Omld__ItemRef *const *refs, size_t n, size_t lo, const char *side,
                          const omld_limits *lim, omld_reply *r)
{
    char path[PATH_CAP];
    snprintf(path, sizeof path, "recommend.%s", side);
    if (n < lo || n > OMLD_RECOMMEND_MAX)
        return omld_reply_error(r, INVALID, path, "%zu %s examples; give %zu to %d", n, side, lo,
                                OMLD_RECOMMEND_MAX);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "recommend.%s[%zu]", side, i);
        int rc = omld_validate_ref(refs[i], lim, path, r);
        if (rc)
            return rc;
    }
    return 0;
}

int omld_check_recommend(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__RecommendRequest *m = req->recommend;
    if (m == NULL)
        return omld_reply_error(r, INVALID, "recommend.positive", "no positive example");
    int rc = check_examples(m->positive, m->n_positive, 1, "positive", lim, r);
    if (rc == 0)
        rc = check_examples(m->negative, m->n_negative, 0, "negative", lim, r);
    Omld__RetrieveRequest as;
    omld_recommend_as_retrieve(m, &as);
    return rc ? rc : check_retrieve_rest(&as, lim, "recommend", r);
}

int omld_check_retrieve(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    return check_retrieve_msg(req->retrieve, lim, "retrieve", r);
}

int omld_check_shard_retrieve(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__ShardRetrieveRequest *m = req->shard_retrieve;
    if (m == NULL || m->retrieve == NULL)
        return omld_reply_error(r, INVALID, "shard_retrieve.retrieve", "shard_retrieve needs "
                                "its retrieve request");
    return check_retrieve_msg(m->retrieve, lim, "shard_retrieve.retrieve", r);
}

/* The model a query names, as query.c resolves it: "" for the live one
 * (no name, "" or "live"). */
static const char *model_named(int set, const char *model)
{
    return set && model && model[0] && strcmp(model, "live") != 0 ? model : "";
}

/* One view answers a batch: query i must name the model query 0 names. */
static int check_same_model(const char *first, const char *model, const char *at,
                            omld_reply *r)
{
    if (strcmp(first, model) == 0)
        return 0;
    char path[PATH_CAP];
    snprintf(path, sizeof path, "%s.model", at);
    return omld_reply_error(r, INVALID, path,
                            "every query of a batch names the same model; the first names %s, "
                            "this one %s", first[0] ? first : "the live model",
                            model[0] ? model : "the live model");
}

/* A batch of queries of one kind: 1..max_batch of them at path `field`
 * ("classify_batch.queries"), each checked as alone at "<field>[i]", all
 * naming the model the first names. */
typedef struct query_batch {
    const char *field;
    size_t n;
    const void *(*nth)(const Omld__Request *req, size_t i);
    int (*check)(const void *m, const omld_limits *lim, const char *at, omld_reply *r);
    const char *(*model)(const void *m); /* model_named() of the query */
} query_batch;

static int check_query_batch(const query_batch *b, const Omld__Request *req,
                             const omld_limits *lim, omld_reply *r)
{
    int rc = check_batch(b->n, lim, "queries", b->field, r);
    char at[AT_CAP];
    for (size_t i = 0; i < b->n && rc == 0; i++) {
        snprintf(at, sizeof at, "%s[%zu]", b->field, i);
        rc = b->check(b->nth(req, i), lim, at, r);
        if (rc == 0)
            rc = check_same_model(b->model(b->nth(req, 0)), b->model(b->nth(req, i)), at, r);
    }
    return rc;
}

static const void *classify_nth(const Omld__Request *req, size_t i)
{
    return req->classify_batch->queries[i];
}

/* A batch's classify queries search together (one GEMM over every row), so
 * a query of its own rows (a metadata filter) is sent alone. */
static int classify_one(const void *m, const omld_limits *lim, const char *at, omld_reply *r)
{
    const Omld__ClassifyRequest *c = m;
    int rc = check_classify_msg(c, lim, at, r);
    if (rc == 0 && c != NULL && c->n_metadata > 0) {
        char path[PATH_CAP];
        snprintf(path, sizeof path, "%s.metadata", at);
        rc = omld_reply_error(r, INVALID, path,
                              "a classify_batch query cannot filter by metadata; send it as a "
                              "single classify");
    }
    return rc;
}

static const char *classify_model(const void *m)
{
    const Omld__ClassifyRequest *q = m;
    return model_named(q->model_opt_case == OMLD__CLASSIFY_REQUEST__MODEL_OPT_MODEL, q->model);
}

int omld_check_classify_batch(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const query_batch b = {"classify_batch.queries",
                           req->classify_batch ? req->classify_batch->n_queries : 0,
                           classify_nth, classify_one, classify_model};
    return check_query_batch(&b, req, lim, r);
}

static const void *retrieve_nth(const Omld__Request *req, size_t i)
{
    return req->retrieve_batch->queries[i];
}

static int retrieve_one(const void *m, const omld_limits *lim, const char *at, omld_reply *r)
{
    return check_retrieve_msg(m, lim, at, r);
}

static const char *retrieve_model(const void *m)
{
    const Omld__RetrieveRequest *q = m;
    return model_named(q->model_opt_case == OMLD__RETRIEVE_REQUEST__MODEL_OPT_MODEL, q->model);
}

int omld_check_retrieve_batch(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const query_batch b = {"retrieve_batch.queries",
                           req->retrieve_batch ? req->retrieve_batch->n_queries : 0,
                           retrieve_nth, retrieve_one, retrieve_model};
    return check_query_batch(&b, req, lim, r);
}

int omld_check_embed(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__EmbedRequest *m = req->embed;
    if (m == NULL)
        return omld_validate_ref(NULL, lim, "embed.item", r);
    int rc = omld_validate_ref(m->item, lim, "embed.item", r);
    if (rc == 0)
        rc = check_model(m->model_opt_case == OMLD__EMBED_REQUEST__MODEL_OPT_MODEL, m->model,
                         "embed.model", r);
    return rc;
}

int omld_check_export_model(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    (void)lim;
    const Omld__ExportModelRequest *m = req->export_model;
    return check_model(m->model_opt_case == OMLD__EXPORT_MODEL_REQUEST__MODEL_OPT_MODEL, m->model,
                       "export_model.model", r);
}

/* A float hyper-parameter, when given, must be finite. */
static int check_finite_opt(int set, float v, const char *field, omld_reply *r)
{
    if (set && !isfinite(v))
        return omld_reply_error(r, INVALID, field, "%s is not a finite number", field);
    return 0;
}

int omld_check_train_start(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    (void)lim;
    const Omld__TrainStartRequest *m = req->train_start;
    if (m == NULL || m->method == NULL || m->method[0] == '\0')
        return omld_reply_error(r, INVALID, "train_start.method",
                                "the method is missing; one of: %s", omld_trainer_method_list());
    int rc = check_name(m->method, "method", 0, "train_start.method", r);
    if (rc)
        return rc;
    if (!omld_trainer_method_known(m->method)) {
        char q[200];
        return omld_reply_error(r, INVALID, "train_start.method",
                                "method %s is unknown; one of: %s",
                                omld_reply_quote(q, sizeof q, m->method, strlen(m->method)),
                                omld_trainer_method_list());
    }
    if ((rc = check_name(m->variant, "variant", 1, "train_start.variant", r)) != 0)
        return rc;
    if (!omld_trainer_variant_ok(m->method, m->variant)) {
        char q[200];
        return omld_reply_error(r, INVALID, "train_start.variant",
                                "variant %s is not one of method %s's",
                                omld_reply_quote(q, sizeof q, m->variant, strlen(m->variant)), m->method);
    }
    char path[PATH_CAP];
    for (size_t i = 0; i < m->n_labels; i++) {
        snprintf(path, sizeof path, "train_start.labels[%zu]", i);
        if ((rc = check_name(m->labels[i], "label", 0, path, r)) != 0)
            return rc;
    }
    if (m->name_opt_case == OMLD__TRAIN_START_REQUEST__NAME_OPT_NAME &&
        !omld_model_name_ok(m->name))
        return omld_reply_error(r, INVALID, "train_start.name",
                                "a model name has 1 to %d bytes of A-Z a-z 0-9 . _ -, does not "
                                "start with '.' and is not \"live\"", OMLD_MODEL_NAME_MAX);
    const Omld__TrainParams *p = m->params;
    if (p == NULL)
        return 0;
    if (p->epochs > 10000)
        return omld_reply_error(r, INVALID, "train_start.params.epochs",
                                "epochs is %u; at most 10000", (unsigned)p->epochs);
    if (!isfinite(p->learning_rate) || p->learning_rate < 0)
        return omld_reply_error(r, INVALID, "train_start.params.learning_rate",
                                "learning_rate must be > 0 and finite (0: the method's default)");
    if (p->depth_opt_case == OMLD__TRAIN_PARAMS__DEPTH_OPT_DEPTH && p->depth > OML_BATCH_MAX_DEPTH)
        return omld_reply_error(r, INVALID, "train_start.params.depth",
                                "depth is %u; at most %d", (unsigned)p->depth, OML_BATCH_MAX_DEPTH);
    if (p->batch_m == 1 || p->batch_m > 1024)
        return omld_reply_error(r, INVALID, "train_start.params.batch_m",
                                "batch_m must be 0 (default) or 2..1024");
    if (p->batch_k == 1 || p->batch_k > 1024)
        return omld_reply_error(r, INVALID, "train_start.params.batch_k",
                                "batch_k must be 0 (default) or 2..1024");
    if (p->validation_fraction_opt_case ==
            OMLD__TRAIN_PARAMS__VALIDATION_FRACTION_OPT_VALIDATION_FRACTION &&
        !(p->validation_fraction >= 0.0f && p->validation_fraction <= 0.5f))
        return omld_reply_error(r, INVALID, "train_start.params.validation_fraction",
                                "validation_fraction is %g; it must be in [0, 0.5]",
                                (double)p->validation_fraction);
    if ((rc = check_finite_opt(p->margin_opt_case == OMLD__TRAIN_PARAMS__MARGIN_OPT_MARGIN,
                               p->margin, "train_start.params.margin", r)) ||
        (rc = check_finite_opt(p->gamma1_opt_case == OMLD__TRAIN_PARAMS__GAMMA1_OPT_GAMMA1,
                               p->gamma1, "train_start.params.gamma1", r)) ||
        (rc = check_finite_opt(p->gamma2_opt_case == OMLD__TRAIN_PARAMS__GAMMA2_OPT_GAMMA2,
                               p->gamma2, "train_start.params.gamma2", r)) ||
        (rc = check_finite_opt(p->lambda1_opt_case == OMLD__TRAIN_PARAMS__LAMBDA1_OPT_LAMBDA1,
                               p->lambda1, "train_start.params.lambda1", r)) ||
        (rc = check_finite_opt(p->lambda2_opt_case == OMLD__TRAIN_PARAMS__LAMBDA2_OPT_LAMBDA2,
                               p->lambda2, "train_start.params.lambda2", r)))
        return rc;
    return 0;
}

static int check_job_id(const void *body, uint64_t id, const char *field, omld_reply *r)
{
    if (body == NULL || id == 0)
        return omld_reply_error(r, INVALID, field, "job_id is missing; job ids start at 1");
    return 0;
}

static int check_model_name(const char *name, const char *field, omld_reply *r)
{
    int rc = check_name(name, "model name", 0, field, r);
    if (rc == 0 && !omld_model_name_ok(name))
        return omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field,
                                "no batch model can have that name");
    return rc;
}

/* The ids of DeleteItems and GetItems. */
int omld_check_delete_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__DeleteItemsRequest *m = req->delete_items;
    if (m && (m->n_labels > 0 || m->n_metadata > 0)) { /* by filter: ids may be empty */
        int rc = check_filter_names(m->labels, m->n_labels, "label", "delete_items.labels", lim, r);
        if (rc == 0)
            rc = omld_check_meta_filter(m->metadata, m->n_metadata, lim, "delete_items.metadata", r);
        return rc || m->n_ids == 0 ? rc : check_ids(m->ids, m->n_ids, 1, "delete_items", lim, r);
    }
    return check_ids(m ? m->ids : NULL, m ? m->n_ids : 0, 1, "delete_items", lim, r);
}

int omld_check_list_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__ListItemsRequest *m = req->list_items;
    if (m == NULL)
        return 0;
    if (m->limit > lim->max_batch)
        return omld_reply_error(r, INVALID, "list_items.limit",
                                "limit is %u; the most items a page holds is %u (max_batch)",
                                (unsigned)m->limit, (unsigned)lim->max_batch);
    int rc = check_filter_names(m->labels, m->n_labels, "label", "list_items.labels", lim, r);
    return rc ? rc : omld_check_meta_filter(m->metadata, m->n_metadata, lim, "list_items.metadata", r);
}

int omld_check_count_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__CountItemsRequest *m = req->count_items;
    if (m == NULL)
        return 0;
    int rc = check_filter_names(m->labels, m->n_labels, "label", "count_items.labels", lim, r);
    return rc ? rc : omld_check_meta_filter(m->metadata, m->n_metadata, lim, "count_items.metadata", r);
}

/* A GetItems whose features alone would not fit in one answer is refused
 * before any work. */
int omld_check_get_items(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    const Omld__GetItemsRequest *m = req->get_items;
    uint64_t n = m ? m->n_ids : 0;
    int rc = check_ids(m ? m->ids : NULL, (size_t)n, 1, "get_items", lim, r);
    if (rc == 0 && lim->max_answer > 0 && n * (uint64_t)lim->dim * 4 > lim->max_answer)
        rc = omld_reply_error(r, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED, "get_items.ids",
                              "%llu items of %d features do not fit in one answer "
                              "(max_frame_bytes %u); ask for fewer at a time",
                              (unsigned long long)n, (int)lim->dim, (unsigned)lim->max_answer);
    return rc;
}

int omld_check_train_status(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    (void)lim;
    const Omld__TrainStatusRequest *m = req->train_status;
    return check_job_id(m, m ? m->job_id : 0, "train_status.job_id", r);
}

int omld_check_train_cancel(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    (void)lim;
    const Omld__TrainCancelRequest *m = req->train_cancel;
    return check_job_id(m, m ? m->job_id : 0, "train_cancel.job_id", r);
}

int omld_check_delete_model(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    (void)lim;
    return check_model_name(req->delete_model ? req->delete_model->name : NULL,
                            "delete_model.name", r);
}

int omld_check_promote(const Omld__Request *req, const omld_limits *lim, omld_reply *r)
{
    (void)lim;
    int rc = check_model_name(req->promote ? req->promote->name : NULL, "promote.name", r);
    if (rc == 0 && req->promote->model_data.len > 0)
        rc = omld_reply_error(r, INVALID, "promote.model_data",
                              "model_data is written by the daemon into its log; leave it "
                              "empty and name the model");
    return rc;
}

int omld_validate(const Omld__Request *req, const omld_limits *lim, omld_reply *r, int *route,
                  uint64_t *cost)
{
    if (req == NULL || req->body_case == OMLD__REQUEST__BODY__NOT_SET)
        return omld_reply_error(r, INVALID, "body",
                                "the request has no body; set one operation, e.g. put_items");
    const omld_op *op = omld_op_of(req);
    if (op == NULL)
        return omld_reply_error(r, INVALID, "body",
                                "the request's body is operation %d, which this daemon does not "
                                "know",
                                (int)req->body_case);
    int rc = op->check ? op->check(req, lim, r) : 0;
    if (rc)
        return rc;
    uint64_t c = op->entries ? op->entries(req) : 1;
    *route = (int)op->route;
    *cost = c ? c : 1;
    return 0;
}
