/* apply.c - what one state-changing request does to the state (see
 * engine_int.h): items into the store, pairs into the closure, triplets
 * (given or derived) into the OAHU learner, one step each. Runs on the
 * learner thread only, both live and when the write-ahead log is replayed,
 * so it must depend on nothing but the state and the request. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apply.h"
#include "engine_int.h"
#include "item_filter.h"
#include "log.h"
#include "modelfile.h"
#include "ops.h"
#include "promote.h"
#include "validate.h"

/* ------------------------------------------------------------ applying */

/* Features of a triplet or pair member: a stored item's row or the inline
 * vector. NULL with the reply filled if the id is unknown. */
static const float *resolve(omld_engine *e, const Omld__ItemRef *ref, const char *op, size_t i,
                            const char *member, omld_reply *r, uint32_t *slot)
{
    if (ref->ref_case == OMLD__ITEM_REF__REF_VECTOR) {
        if (slot)
            *slot = OML_REPLAY_NONE; /* inline: learned, not kept for rehearsal */
        return ref->vector->values;
    }
    uint32_t s;
    if (oml_store_find(e->store, ref->id, strlen(ref->id), &s) != OML_OK) {
        char field[96];
        snprintf(field, sizeof field, "%s[%zu].%s.id", op, i, member);
        char q[OMLD_QUOTE_CAP];
        omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field, "no stored item has id %s",
                         omld_reply_quote(q, sizeof q, ref->id, strlen(ref->id)));
        return NULL;
    }
    if (slot)
        *slot = s;
    return oml_store_features(e->store, s);
}

/* 1 if every feature of x (dim) is within +-max_feature_abs. Validation
 * already refuses anything else from clients; this holds the same line on
 * what the log replays (a log written before the bound existed, or with a
 * larger one) and on stored items a checkpoint brought back, so such a
 * record is refused instead of poisoning the model (issue 12). */
static int features_ok(const omld_engine *e, const float *x)
{
    int32_t dim = oml_store_dim(e->store);
    return omld_first_bad_feature(x, (size_t)dim, (float)e->opts.max_feature_abs) == (size_t)dim;
}

/* Refuses (INVALID_ARGUMENT, field op[i].member) a triplet or pair member
 * whose features are out of bounds; 0 if it is fine. */
static int member_bad(omld_engine *e, const float *x, const Omld__ItemRef *ref, const char *op,
                      size_t i, const char *member, omld_reply *r)
{
    if (features_ok(e, x))
        return 0;
    char field[96];
    snprintf(field, sizeof field, "%s[%zu].%s.%s", op, i, member,
             ref->ref_case == OMLD__ITEM_REF__REF_VECTOR ? "vector" : "id");
    omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, field,
                     "%s has a feature value that is not finite or not within +-%g "
                     "(max_feature_abs)",
                     ref->ref_case == OMLD__ITEM_REF__REF_VECTOR ? "the vector" : "the stored item",
                     e->opts.max_feature_abs);
    return 1;
}

/* The data-dependent start's items: the live stored ones in slot order,
 * every (count/m)-th of them when m is below their count, with their
 * label ids in labels (OML_LABEL_NONE for none), which judge the auto
 * start's candidates (learner_start.c). */
uint32_t omld_start_items(omld_engine *e, uint32_t m, int32_t *at, int32_t *labels)
{
    uint32_t n = oml_store_count(e->store), slots = oml_store_slots(e->store), k = 0, seen = 0;
    for (uint32_t s = 0; s < slots && k < m; s++) {
        const float *x = oml_store_features(e->store, s);
        if (!oml_store_is_live(e->store, s) || !features_ok(e, x))
            continue;
        if ((uint64_t)seen++ * m / n == k) { /* every (n/m)-th: all of them when m = n */
            labels[k] = oml_store_label(e->store, s);
            at[k++] = (int32_t)s;
        }
    }
    return k;
}

static void prepare_model(omld_engine *e)
{
    oml_learner *l = e->learner;
    if (l->prepared || !oml_config_needs_data(&l->cfg))
        return;
    uint32_t n = oml_store_count(e->store);
    if (n < 2) {
        LOG_WARN("engine", "first triplet with %u stored item(s): the model starts untrained "
                 "(the %s start needs at least 2 stored items)", n, "data-dependent");
        l->prepared = 1; /* decided once, at a point fixed by the command order */
        return;
    }
    /* A strided sample past OMLD_START_SAMPLE items: the mean, the sd and
     * the principal directions of 65,536 items are those of the store to
     * within noise, and a million items would be a copy of every feature
     * and seconds of the learner's time (issue 14). */
    uint32_t m = n < OMLD_START_SAMPLE ? n : OMLD_START_SAMPLE;
    int32_t *at = malloc((size_t)m * sizeof(int32_t));
    int32_t *labels = malloc((size_t)m * sizeof(int32_t));
    if (at == NULL || labels == NULL) {
        free(at);
        free(labels);
        LOG_ERROR("engine", "out of memory preparing the model start");
        return;
    }
    uint32_t k = omld_start_items(e, m, at, labels);
    if (m == n && k < n) /* out-of-bounds items from an old state take no part in the start */
        LOG_WARN("engine", "model start: %u stored item(s) with features beyond max_feature_abs "
                 "left out", n - k);
    n = k;
    if (n < 2) {
        free(at);
        free(labels);
        l->prepared = 1;
        return;
    }
    uint64_t t0 = omld_now_ns();
    /* The sample's rows read in place: this thread is the store's only
     * writer, and a copy was 205 MB at a million items of 784 features. */
    int rc = oml_learner_prepare_at(l, oml_store_matrix(e->store), at, labels, (int32_t)n);
    free(at);
    free(labels);
    if (rc != OML_OK)
        LOG_ERROR("engine", "model start from %u items failed: %s", n, oml_strerror(rc));
    else
        LOG_INFO("engine", "model start taken from %u of %u stored items in %.0f ms: %s "
                 "(leave-one-out kNN error standardised %.4f, whitened %.4f; nan: not judged)",
                 n, oml_store_count(e->store), (double)(omld_now_ns() - t0) / 1e6,
                 oml_init_name(l->start_init), (double)l->start_error[0],
                 (double)l->start_error[1]);
}

/* n new triplets (3n rows and their store slots) into the learner, in
 * its mini-batches, each kept for rehearsal (replay.h). A last part batch
 * waits for the next triplets (engine.c flushes it after the group) unless
 * `now`: rows not in the store (inline vectors) live only as long as the
 * request. */
static void learn(omld_engine *e, const float *const *rows, const uint32_t *slots,
                  const float *weights, size_t n, int now)
{
    uint64_t t0 = omld_now_ns(), skipped = e->learner->stats.skipped;
    oml_replay_add(&e->replay, e->learner, rows, slots, weights, (int32_t)n);
    if (now)
        oml_replay_flush(&e->replay, e->learner);
    uint64_t dt = omld_now_ns() - t0;
    for (size_t i = 0; i < n; i++) /* the histogram is per triplet */
        omld_hist_observe(&e->metrics->update_latency, dt / n);
    omld_count(&e->metrics->triplets_applied, n);
    if (e->learner->stats.skipped > skipped)
        LOG_WARN("engine", "%llu learner step(s) refused: a loss or gradient was not finite "
                 "(the weights are unchanged)",
                 (unsigned long long)(e->learner->stats.skipped - skipped));
    e->dirty = 1;
}

int omld_rehearse(omld_engine *e, int32_t steps)
{
    /* Counted by the learner (stats.rehearsed, in the model file). */
    int taken = oml_replay_rehearse(&e->replay, e->learner, e->store, steps);
    e->dirty |= taken > 0;
    return taken;
}

/* Resolves triplet i's members into rows[0..2] and slots[0..2]: 0, or the
 * code with r filled (an unknown id, out-of-bounds features, a negative
 * that is the anchor or the positive). */
static int resolve_triplet(omld_engine *e, const Omld__Triplet *t, size_t i, const float **rows,
                           uint32_t *slots, omld_reply *r)
{
    static const char *const member[3] = {"anchor", "positive", "negative"};
    const Omld__ItemRef *refs[3] = {t->anchor, t->positive, t->negative};
    for (int j = 0; j < 3; j++) {
        const float *x = resolve(e, refs[j], "add_triplets.triplets", i, member[j], r, &slots[j]);
        if (x == NULL || member_bad(e, x, refs[j], "add_triplets.triplets", i, member[j], r))
            return (int)r->status.code;
        rows[j] = x;
    }
    /* The negative is another item than the anchor and the positive:
     * validation refused the same id and equal inline vectors; here an
     * inline vector equal to the stored item it is paired with, and
     * (replayed logs from before that check) the same stored item. */
    for (int j = 0; j < 2; j++) {
        int same = rows[j] == rows[2];
        if (!same && refs[j]->ref_case != refs[2]->ref_case) {
            same = 1;
            for (int32_t k = 0; k < oml_store_dim(e->store) && same; k++)
                same = rows[j][k] == rows[2][k];
        }
        if (same) {
            char field[96];
            snprintf(field, sizeof field, "add_triplets.triplets[%zu].negative", i);
            return omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, field,
                                    "the negative is the same item as the %s; a triplet needs "
                                    "a negative that is another item", member[j]);
        }
    }
    return 0;
}

/* A partial batch's triplet i: its stateless checks (skipped at the edge)
 * and its resolution; a refusal is recorded in out (the answer's arena)
 * instead of failing the batch. 1 if it is to be learned. */
static int partial_entry(omld_engine *e, const Omld__Triplet *t, size_t i, const float **rows,
                         uint32_t *slots, omld_reply *r, Omld__EntryError *out)
{
    omld_reply one;
    omld_reply_init(&one, 0);
    omld_limits lim = omld_limits_of(&e->opts);
    int rc = omld_check_triplet(t, i, &lim, &one);
    if (rc == 0)
        rc = resolve_triplet(e, t, i, rows, slots, &one);
    if (rc != 0) {
        omld__entry_error__init(out);
        out->index = (uint32_t)i;
        out->code = one.status.code;
        out->field = omld_reply_strdup(r, one.status.field, strlen(one.status.field));
        out->message = omld_reply_strdup(r, one.status.message, strlen(one.status.message));
        if (out->field == NULL || out->message == NULL)
            out->field = out->message = (char *)"";
    }
    omld_reply_free(&one);
    return rc == 0;
}

int omld_apply_add_triplets(omld_engine *e, const Omld__Request *req, omld_reply *r)
{
    const Omld__AddTripletsRequest *rq = req->add_triplets;
    size_t n = rq->n_triplets, good = 0, bad = 0;
    Omld__AddTripletsResponse *b = omld_reply_alloc(r, sizeof *b);
    Omld__EntryError *errs = rq->partial ? omld_reply_alloc(r, n * sizeof *errs) : NULL;
    Omld__EntryError **errp = rq->partial ? omld_reply_alloc(r, n * sizeof *errp) : NULL;
    if (b == NULL || (rq->partial && (errs == NULL || errp == NULL))) {
        atomic_fetch_sub(&e->queued_triplets, n);
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return 0;
    }
    /* Resolve every member first: all-or-nothing, an unknown id refuses
     * the whole batch; partial, each bad triplet is left out and said. */
    for (size_t i = 0; i < n; i++) {
        const float **rows = e->rows + 3 * good;
        uint32_t *slots = e->slots + 3 * good;
        if (!rq->partial && resolve_triplet(e, rq->triplets[i], i, rows, slots, r) != 0) {
            atomic_fetch_sub(&e->queued_triplets, n);
            return 0;
        }
        if (!rq->partial || partial_entry(e, rq->triplets[i], i, rows, slots, r, &errs[bad])) {
            const Omld__Triplet *t = rq->triplets[i];
            e->weights[good++] =
                t->weight_opt_case == OMLD__TRIPLET__WEIGHT_OPT_WEIGHT ? t->weight : 1.0f;
        } else
            errp[bad] = &errs[bad], bad++;
    }
    omld_count(&e->metrics->triplets_received, good);
    if (good > 0) {
        prepare_model(e);
        int inline_rows = 0;
        for (size_t i = 0; i < 3 * good; i++)
            inline_rows |= e->slots[i] == OML_REPLAY_NONE;
        learn(e, e->rows, e->slots, e->weights, good, inline_rows);
    }
    atomic_fetch_sub(&e->queued_triplets, n);
    omld__add_triplets_response__init(b);
    b->accepted = (uint32_t)good;
    b->queue_depth = atomic_load(&e->queued_triplets);
    b->n_rejected = bad;
    b->rejected = errp;
    r->msg.body_case = OMLD__RESPONSE__BODY_ADD_TRIPLETS;
    r->msg.add_triplets = b;
    return good > 0; /* nothing learned: nothing to log */
}

/* Pairs name stored items (closure nodes are store slots). Each pair is
 * checked against the closure before anything is added, so a pair that
 * contradicts what is already known refuses the whole batch unchanged.
 * A contradiction that only arises between pairs of the same batch is
 * found when its pair is added; the pairs before it then stay (reported in
 * the message). */
/* Every pair's members as store slots (2n), before anything changes:
 * refuses the batch (r filled, 1) if a member is not a stored id or out of
 * bounds, or a pair contradicts what the closure already knows; else 0. */
static int resolve_pairs(omld_engine *e, const Omld__AddPairsRequest *rq, uint32_t *slots,
                         omld_reply *r)
{
    char field[96];
    for (size_t i = 0; i < rq->n_pairs; i++) {
        const Omld__Pair *p = rq->pairs[i];
        const Omld__ItemRef *m[2] = {p->a, p->b};
        for (int j = 0; j < 2; j++) {
            snprintf(field, sizeof field, "add_pairs.pairs[%zu].%s", i, j ? "b" : "a");
            if (m[j]->ref_case != OMLD__ITEM_REF__REF_ID) {
                omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, field,
                                 "pair members must be stored item ids: the closure joins "
                                 "items by id");
                return 1;
            }
            const float *x = resolve(e, m[j], "add_pairs.pairs", i, j ? "b" : "a", r,
                                     &slots[2 * i + j]);
            if (x == NULL || member_bad(e, x, m[j], "add_pairs.pairs", i, j ? "b" : "a", r))
                return 1;
        }
        int similar = p->relation == OMLD__PAIR__RELATION__SIMILAR;
        uint32_t a = slots[2 * i], b = slots[2 * i + 1];
        snprintf(field, sizeof field, "add_pairs.pairs[%zu]", i);
        if (a == b) {
            if (!similar) {
                omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, field,
                                 "an item cannot be dissimilar to itself");
                return 1;
            }
        } else if (similar ? oml_closure_is_dissimilar(e->closure, a, b)
                           : oml_closure_is_similar(e->closure, a, b)) {
            char qa[OMLD_QUOTE_CAP], qb[OMLD_QUOTE_CAP];
            omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, field,
                             "%s and %s are already known to be %s",
                             omld_reply_quote(qa, sizeof qa, p->a->id, strlen(p->a->id)),
                             omld_reply_quote(qb, sizeof qb, p->b->id, strlen(p->b->id)),
                             similar ? "dissimilar" : "similar");
            return 1;
        }
    }
    return 0;
}

/* One pair of slots a != b into the closure (Sec. 3.1), and the triplets
 * it derived into the learner; *derived counts them. The closure's error
 * code, or OML_OK. */
static int add_pair(omld_engine *e, int similar, uint32_t a, uint32_t b, uint64_t *derived)
{
    int got = 0;
    int rc = similar ? oml_closure_add_similar(e->closure, a, b, e->derived, DERIVED_PER_PAIR, &got)
                     : oml_closure_add_dissimilar(e->closure, a, b, e->derived, DERIVED_PER_PAIR,
                                                  &got);
    if (rc != OML_OK)
        return rc;
    omld_count(&e->metrics->pairs_received, 1);
    if (got > 0)
        prepare_model(e);
    for (int k = 0; k < got; k++) {
        const oml_triplet *t = &e->derived[k];
        uint32_t sl[3] = {t->a, t->p, t->n};
        const float *rows[3];
        for (int m = 0; m < 3; m++)
            rows[m] = oml_store_features(e->store, sl[m]);
        learn(e, rows, sl, NULL, 1, 0);
    }
    *derived += (uint64_t)got;
    return OML_OK;
}

int omld_apply_add_pairs(omld_engine *e, const Omld__Request *req, omld_reply *r)
{
    const Omld__AddPairsRequest *rq = req->add_pairs;
    size_t n = rq->n_pairs;
    uint32_t *slots = malloc(2 * n * sizeof *slots);
    int changed = 0;
    if (slots == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return 0;
    }
    if (resolve_pairs(e, rq, slots, r) != 0)
        goto out;
    uint64_t derived = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = slots[2 * i], b = slots[2 * i + 1];
        if (a == b)
            continue;
        int rc = add_pair(e, rq->pairs[i]->relation == OMLD__PAIR__RELATION__SIMILAR, a, b,
                          &derived);
        if (rc != OML_OK) {
            char field[96];
            snprintf(field, sizeof field, "add_pairs.pairs[%zu]", i);
            omld_reply_error(r, omld_status_from_oml(rc), field,
                             "%s with the pairs before it in this batch (those %zu pair(s) were "
                             "kept)", rc == OML_ECONFLICT ? "contradicts the closure together"
                                                          : oml_strerror(rc), i);
            goto learned;
        }
        changed = 1;
    }
    Omld__AddPairsResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        goto learned;
    }
    omld__add_pairs_response__init(b);
    b->accepted = (uint32_t)n;
    b->derived_triplets = derived;
    r->msg.body_case = OMLD__RESPONSE__BODY_ADD_PAIRS;
    r->msg.add_pairs = b;
learned:
    omld_count(&e->metrics->derived_triplets, derived);
out:
    free(slots);
    return changed;
}

int omld_apply_put_items(omld_engine *e, const Omld__Request *req, omld_reply *r)
{
    const Omld__PutItemsRequest *rq = req->put_items;
    size_t n = rq->n_items;
    for (size_t i = 0; i < n; i++) {
        const Omld__Item *it = rq->items[i];
        if (it->n_features != (size_t)oml_store_dim(e->store) || !features_ok(e, it->features)) {
            char field[64];
            snprintf(field, sizeof field, "put_items.items[%zu].features", i);
            omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, field,
                             "features must be %d values, finite and within +-%g "
                             "(max_feature_abs)", (int)oml_store_dim(e->store),
                             e->opts.max_feature_abs);
            return 0;
        }
    }
    /* Capacity first, so the batch is all-or-nothing: every new id (not
     * live now) is one more live item (deleted items' slots are reused). */
    uint64_t fresh = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t s;
        fresh += oml_store_find(e->store, rq->items[i]->id, strlen(rq->items[i]->id), &s) != OML_OK;
    }
    if (oml_store_count(e->store) + fresh > (uint64_t)e->opts.max_items) {
        omld_reply_error(r, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED, "put_items.items",
                         "the store is full: %u of max_items %lld items stored, the batch adds "
                         "%llu", oml_store_count(e->store), (long long)e->opts.max_items,
                         (unsigned long long)fresh);
        return 0;
    }
    uint32_t created = 0, replaced = 0;
    pthread_rwlock_wrlock(&e->lock.rw);
    for (size_t i = 0; i < n; i++) {
        const Omld__Item *it = rq->items[i];
        const char *label = it->label_opt_case == OMLD__ITEM__LABEL_OPT_LABEL ? it->label : NULL;
        uint32_t at;
        int existed = oml_store_find(e->store, it->id, strlen(it->id), &at) == OML_OK;
        oml_diag d = {0};
        uint8_t *meta = NULL;
        size_t meta_len = 0;
        int rc = omld_meta_pack_item(it, &meta, &meta_len, &d);
        if (rc == OML_OK)
            rc = oml_store_put_meta(e->store, it->id, strlen(it->id), it->features, label,
                                    label ? strlen(label) : 0, meta, meta_len, NULL, &d);
        free(meta);
        if (rc != OML_OK) {
            pthread_rwlock_unlock(&e->lock.rw);
            char field[96];
            snprintf(field, sizeof field, "put_items.items[%zu].%s", i, d.field);
            omld_reply_error(r, omld_status_from_oml(rc), field, "%s (the %zu item(s) before it "
                             "were stored)", d.msg, i);
            LOG_ERROR("engine", "put_items failed mid-batch: %s", d.msg);
            e->store_gen += i > 0;
            return i > 0;
        }
        if (existed)
            replaced++;
        else
            created++;
    }
    pthread_rwlock_unlock(&e->lock.rw);
    e->store_gen++;
    omld_count(&e->metrics->items_put, n);
    e->dirty = 1;
    Omld__PutItemsResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return 1;
    }
    omld__put_items_response__init(b);
    b->created = created;
    b->replaced = replaced;
    r->msg.body_case = OMLD__RESPONSE__BODY_PUT_ITEMS;
    r->msg.put_items = b;
    return 1;
}

/* Deletes the item in slot s (write lock held); 1. The slot is free for
 * the next new id: every slot holder forgets it here (store.h, SLOT
 * HOLDERS). The closure: the item leaves its component and its dissimilar
 * edges, the others keep what it implied. The rehearsal ring drops the
 * triplets that name it. */
static uint32_t delete_slot(omld_engine *e, uint32_t s)
{
    size_t len = 0;
    const char *id = oml_store_id(e->store, s, &len);
    char copy[OMLD_ID_MAX + 1];
    memcpy(copy, id, len < sizeof copy ? len : sizeof copy - 1); /* the store frees id */
    (void)oml_store_delete(e->store, copy, len < sizeof copy ? len : sizeof copy - 1);
    (void)oml_closure_remove(e->closure, s);
    oml_replay_forget_slot(&e->replay, s); /* no rehearsal about a deleted item */
    return 1;
}

int omld_apply_delete_items(omld_engine *e, const Omld__Request *req, omld_reply *r)
{
    const Omld__DeleteItemsRequest *rq = req->delete_items;
    uint32_t s;
    if (!rq->missing_ok)
        for (size_t i = 0; i < rq->n_ids; i++)
            if (oml_store_find(e->store, rq->ids[i], strlen(rq->ids[i]), &s) != OML_OK) {
                char field[64], q[OMLD_QUOTE_CAP];
                snprintf(field, sizeof field, "delete_items.ids[%zu]", i);
                omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field,
                                 "no stored item has id %s",
                                 omld_reply_quote(q, sizeof q, rq->ids[i], strlen(rq->ids[i])));
                return 0;
            }
    /* By filter (labels and/or metadata): every item that passes it. The
     * filter is made before the lock: only this thread writes the store. */
    omld_item_filter f;
    int by_filter = rq->n_labels > 0 || rq->n_metadata > 0;
    if (by_filter && omld_item_filter_init(&f, e->store, rq->labels, rq->n_labels, rq->metadata,
                                           rq->n_metadata) != 0) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return 0;
    }
    uint32_t deleted = 0;
    pthread_rwlock_wrlock(&e->lock.rw);
    for (size_t i = 0; i < rq->n_ids; i++) {
        size_t len = strlen(rq->ids[i]);
        if (oml_store_find(e->store, rq->ids[i], len, &s) == OML_OK)
            deleted += delete_slot(e, s);
    }
    for (uint32_t slot = 0; by_filter && slot < oml_store_slots(e->store); slot++)
        if (oml_store_is_live(e->store, slot) && omld_item_filter_match(&f, e->store, slot))
            deleted += delete_slot(e, slot);
    pthread_rwlock_unlock(&e->lock.rw);
    if (by_filter)
        omld_item_filter_free(&f);
    e->store_gen += deleted > 0;
    omld_count(&e->metrics->items_deleted, deleted);
    e->dirty |= deleted > 0;
    Omld__DeleteItemsResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return deleted > 0;
    }
    omld__delete_items_response__init(b);
    b->deleted = deleted;
    r->msg.body_case = OMLD__RESPONSE__BODY_DELETE_ITEMS;
    r->msg.delete_items = b;
    return deleted > 0;
}

/* ------------------------------------------------------------ promote / rollback */

/* Promote (see omld.proto TRAINER): oml_promote (src/promote.h) puts the
 * batch model into the learner. The learner before the promote is kept
 * (encoded) for Rollback. Live requests name a registered model; log
 * records carry its bytes (model_data), so replay depends on nothing but
 * the record. */
int omld_apply_promote(omld_engine *e, const Omld__Request *req, omld_reply *r)
{
    const Omld__PromoteRequest *p = req->promote;
    const uint8_t *buf;
    size_t len;
    uint8_t *owned = NULL;
    if (p->model_data.len > 0) {
        buf = p->model_data.data;
        len = p->model_data.len;
    } else {
        char q[OMLD_QUOTE_CAP];
        int rc = e->models ? omld_models_bytes(e->models, p->name, &owned, &len) : OML_ENOTFOUND;
        if (rc != OML_OK) {
            omld_reply_error(r, rc == OML_ENOTFOUND ? OMLD__STATUS__CODE__NOT_FOUND
                                                    : OMLD__STATUS__CODE__INTERNAL,
                             "promote.name", rc == OML_ENOTFOUND ? "no batch model is named %s"
                             : "out of memory reading model %s",
                             omld_reply_quote(q, sizeof q, p->name, strlen(p->name)));
            return 0;
        }
        buf = owned;
    }
    oml_batch_model *bm = NULL;
    oml_diag d = {0};
    char why[300];
    if (oml_batch_model_decode(buf, len, &bm, &d) != OML_OK) {
        omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, "promote.model_data",
                         "the model's bytes do not decode: %s", d.msg);
        free(owned);
        return 0;
    }
    if (oml_promote_compatible(&e->model_cfg, &bm->lay, why, sizeof why) != 0) {
        omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, "promote.name", "%s", why);
        oml_batch_model_destroy(bm);
        free(owned);
        return 0;
    }
    prepare_model(e); /* a later first triplet must not overwrite the promoted weights */
    oml_learner *l = e->learner;
    uint8_t *pre = NULL;
    size_t pre_len = 0;
    if (oml_model_encode(l, &pre, &pre_len) != OML_OK) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory keeping the "
                         "model for rollback");
        oml_batch_model_destroy(bm);
        free(owned);
        return 0;
    }
    int32_t dd = bm->lay.depth;
    int prc = oml_promote(l, bm);
    oml_batch_model_destroy(bm);
    if (prc != OML_OK) { /* the learner is unchanged */
        free(pre);
        free(owned);
        if (prc == OML_EINVAL)
            omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, "promote.name",
                             "the live model reads its input through a basis that its start "
                             "sets, and it has none yet (the start needs at least 2 stored "
                             "items)");
        else
            omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "%s folding the batch "
                             "model's first layer into the live model's input basis",
                             prc == OML_ENOMEM ? "out of memory" : "the eigen-decomposition "
                             "failed");
        return 0;
    }

    free(e->rb_buf);
    e->rb_buf = pre;
    e->rb_len = pre_len;
    snprintf(e->rb_name, sizeof e->rb_name, "%s", p->name);
    free(e->promote_log);
    e->promote_log = owned; /* the record to log: NULL on replay (nothing is logged then) */
    e->promote_log_len = owned ? len : 0;
    e->dirty = 1;
    e->publish_now = 1;
    LOG_INFO("engine", "promoted batch model %s (depth %d) into the live model", p->name, dd);

    Omld__PromoteResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return 1;
    }
    omld__promote_response__init(b);
    b->depth = (uint32_t)dd;
    b->model_version = e->version + 1; /* the view published right after (engine.c) */
    r->msg.body_case = OMLD__RESPONSE__BODY_PROMOTE;
    r->msg.promote = b;
    return 1;
}

/* Rollback: the learner exactly as it was before the last promote (its
 * weights, hedge, RNG, reference), with the running counters kept, so
 * updates and the counters derived from them only grow. */
int omld_apply_rollback(omld_engine *e, const Omld__Request *req, omld_reply *r)
{
    (void)req;
    if (e->rb_buf == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, "rollback",
                         "nothing to roll back: no promote since the last rollback");
        return 0;
    }
    oml_learner *l = NULL;
    oml_diag d = {0};
    if (oml_model_decode(&l, e->rb_buf, e->rb_len, &d) != OML_OK) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, "rollback",
                         "the kept model does not decode: %s", d.msg);
        return 0;
    }
    l->stats = e->learner->stats;
    oml_learner_destroy(e->learner);
    e->learner = l;
    char undone[OMLD_MODEL_NAME_MAX + 1];
    snprintf(undone, sizeof undone, "%s", e->rb_name);
    free(e->rb_buf);
    e->rb_buf = NULL;
    e->rb_len = 0;
    e->rb_name[0] = '\0';
    e->dirty = 1;
    e->publish_now = 1;
    LOG_INFO("engine", "rolled back the promote of %s", undone);
    Omld__RollbackResponse *b = omld_reply_alloc(r, sizeof *b);
    char *name = omld_reply_strdup(r, undone, strlen(undone));
    if (b == NULL || name == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return 1;
    }
    omld__rollback_response__init(b);
    b->model_version = e->version + 1;
    b->undone = name;
    r->msg.body_case = OMLD__RESPONSE__BODY_ROLLBACK;
    r->msg.rollback = b;
    return 1;
}

static int apply_request(omld_engine *e, const Omld__Request *q, omld_reply *r);

/* ------------------------------------------------------------ idempotency */

/* The idempotency key of a write request ("" or NULL: none). */
static const char *request_key(const Omld__Request *q)
{
    switch (q->body_case) {
    case OMLD__REQUEST__BODY_PUT_ITEMS: return q->put_items->idempotency_key;
    case OMLD__REQUEST__BODY_ADD_TRIPLETS: return q->add_triplets->idempotency_key;
    case OMLD__REQUEST__BODY_ADD_PAIRS: return q->add_pairs->idempotency_key;
    default: return NULL;
    }
}

/* A request whose key was applied before: nothing changes (not even the
 * learner's waiting mini-batch: the answer is not logged, so the state
 * must be exactly what replay will see), and the first answer's counts
 * come back with duplicate set. CONFLICT if the key was another kind's. */
static void answer_duplicate(omld_engine *e, const Omld__Request *q, const omld_idem_entry *k,
                             omld_reply *r)
{
    const omld_op *op = omld_op_of(q);
    if (q->body_case == OMLD__REQUEST__BODY_ADD_TRIPLETS) /* counted at submit */
        atomic_fetch_sub(&e->queued_triplets, q->add_triplets->n_triplets);
    if (k->op != (int32_t)q->body_case) {
        const omld_op *first = omld_op_find(k->op);
        char field[64];
        snprintf(field, sizeof field, "%s.idempotency_key", op->name);
        omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, field,
                         "this idempotency key was used by a %s request; a key names one request",
                         first ? first->name : "different");
        return;
    }
    omld_count(&e->metrics->duplicates, 1);
    switch (q->body_case) {
    case OMLD__REQUEST__BODY_PUT_ITEMS: {
        Omld__PutItemsResponse *b = omld_reply_alloc(r, sizeof *b);
        if (b == NULL)
            break;
        omld__put_items_response__init(b);
        b->created = (uint32_t)k->a;
        b->replaced = (uint32_t)k->b;
        b->duplicate = 1;
        r->msg.put_items = b;
        r->msg.body_case = OMLD__RESPONSE__BODY_PUT_ITEMS;
        return;
    }
    case OMLD__REQUEST__BODY_ADD_TRIPLETS: {
        Omld__AddTripletsResponse *b = omld_reply_alloc(r, sizeof *b);
        if (b == NULL)
            break;
        omld__add_triplets_response__init(b);
        b->accepted = (uint32_t)k->a;
        b->queue_depth = atomic_load(&e->queued_triplets);
        b->duplicate = 1;
        r->msg.add_triplets = b;
        r->msg.body_case = OMLD__RESPONSE__BODY_ADD_TRIPLETS;
        return;
    }
    default: {
        Omld__AddPairsResponse *b = omld_reply_alloc(r, sizeof *b);
        if (b == NULL)
            break;
        omld__add_pairs_response__init(b);
        b->accepted = (uint32_t)k->a;
        b->derived_triplets = k->b;
        b->duplicate = 1;
        r->msg.add_pairs = b;
        r->msg.body_case = OMLD__RESPONSE__BODY_ADD_PAIRS;
        return;
    }
    }
    omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
}

/* Remembers the key of a request applied with an OK answer, with the
 * answer's counts (a failed request leaves no key: it may be retried). */
static void remember_key(omld_engine *e, const Omld__Request *q, const char *key,
                         const omld_reply *r)
{
    uint64_t a = 0, b = 0;
    const Omld__Response *m = &r->msg;
    if (m->body_case == OMLD__RESPONSE__BODY_PUT_ITEMS && m->put_items)
        a = m->put_items->created, b = m->put_items->replaced;
    else if (m->body_case == OMLD__RESPONSE__BODY_ADD_TRIPLETS && m->add_triplets)
        a = m->add_triplets->accepted;
    else if (m->body_case == OMLD__RESPONSE__BODY_ADD_PAIRS && m->add_pairs)
        a = m->add_pairs->accepted, b = m->add_pairs->derived_triplets;
    else
        return;
    if (omld_idem_add(&e->idem, key, strlen(key), (int32_t)q->body_case, a, b) != OML_OK)
        LOG_WARN("engine", "out of memory remembering an idempotency key: a retry of this "
                 "request would be applied again");
}

int omld_apply(omld_engine *e, const Omld__Request *q, omld_reply *r)
{
    const char *key = e->idem.cap > 0 ? request_key(q) : NULL;
    if (key && key[0]) {
        const omld_idem_entry *k = omld_idem_find(&e->idem, key, strlen(key));
        if (k != NULL) {
            answer_duplicate(e, q, k, r);
            return 0;
        }
    }
    int changed = apply_request(e, q, r);
    if (changed && key && key[0] && r->status.code == OMLD__STATUS__CODE__OK)
        remember_key(e, q, key, r);
    return changed;
}

/* One mutation by its row's handler. */
static int apply_request(omld_engine *e, const Omld__Request *q, omld_reply *r)
{
    /* New triplets waiting for a full mini-batch borrow store rows and
     * belong to the learner: learn them before either can change. */
    if (q->body_case != OMLD__REQUEST__BODY_ADD_TRIPLETS &&
        q->body_case != OMLD__REQUEST__BODY_ADD_PAIRS)
        oml_replay_flush(&e->replay, e->learner);
    const omld_op *op = omld_op_of(q);
    if (op == NULL || op->route != OMLD_ROUTE_MUTATION || op->handle.apply == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, "body",
                         "this operation does not change state");
        return 0;
    }
    return op->handle.apply(e, q, r);
}
