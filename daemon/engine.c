/* engine.c - the learner thread (see engine.h).
 *
 * DESIGN (after redis bio.c): one FIFO of commands, one thread, answers
 * back to the loop through a second list and a uv_async. The thread takes
 * the commands queued so far as a group (bounded, so answers are never held
 * back long), applies them one by one in order, then hands the group's
 * answers back. Applying is where state lives: ids are resolved against the
 * store, pairs against the closure, and each triplet is one OAHU step.
 *
 * The model's data-dependent start (PCA / centring / the local hedge's
 * reference sample) is taken from the items stored when the first triplet
 * is applied: a point fixed by the command order, so the model remains a
 * function of the command sequence (what the write-ahead log replays).
 *
 * Locking: the store is written only here, under lock.rw as writer; this
 * thread reads it without the lock (no other writer exists), the indexer
 * and the query threads read it under the lock. */
#include "engine.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "modelfile.h"

#define GROUP_COST 1024      /* entries applied before the group is answered */
#define DERIVED_PER_PAIR 8   /* triplets sampled from the closure per new pair fact */
#define CLOSURE_MAX_DIS_EDGES (1u << 24)

typedef struct cmd {
    struct cmd *next;
    const Omld__Request *req;
    uint64_t cost;
    omld_engine_done_fn done;
    void *ctx;
    omld_reply *reply;
} cmd;

typedef struct cmd_list {
    cmd *head, *tail;
} cmd_list;

struct omld_engine {
    omld_config opts;
    omld_metrics *metrics;
    oml_store *store;
    omld_store_lock lock;
    oml_closure *closure;
    oml_learner *learner;
    omld_views *views;

    /* inbox: guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cmd_list inbox;
    uint64_t inbox_cost;
    uint64_t capacity;
    int stopping;
    int wake_wanted;       /* a submit was refused since the last wake */

    /* answers: guarded by out_mu */
    pthread_mutex_t out_mu;
    cmd_list outbox;
    int wake_due;
    uv_async_t async;
    void (*wake)(void *arg);
    void *wake_arg;

    pthread_t thread;
    int running;
    atomic_uint_fast64_t queued_triplets;

    /* publishing: engine thread only */
    uint64_t version;
    uint64_t published_updates;
    uint64_t published_ns;
    int dirty;

    /* for readers: guarded by stats_mu */
    pthread_mutex_t stats_mu;
    omld_model_stats stats;

    /* engine-thread scratch */
    oml_triplet *derived;
    const float **rows;     /* (3 * max_batch) feature pointers of a triplet batch */
};

/* ------------------------------------------------------------ lists */

static void list_push(cmd_list *l, cmd *c)
{
    c->next = NULL;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
}

/* ------------------------------------------------------------ config */

int omld_engine_model_config(const omld_config *o, oml_config *c, char *err, size_t errlen)
{
    if (oml_config_preset(c, o->preset, (int32_t)o->dim) != OML_OK) {
        snprintf(err, errlen, "option 'preset': unknown preset '%s' (default | paper)", o->preset);
        return -1;
    }
    /* Options left empty are -1 / NaN: the preset's value stays. */
    if (o->layers >= 0) c->layers = (int32_t)o->layers;
    if (o->hidden >= 0) c->hidden = (int32_t)o->hidden;
    if (o->emb >= 0) c->emb = (int32_t)o->emb;
    if (!isnan(o->eta)) c->eta = (float)o->eta;
    if (!isnan(o->tau)) c->tau = (float)o->tau;
    if (!isnan(o->beta)) c->beta = (float)o->beta;
    if (!isnan(o->s)) c->s = (float)o->s;
    if (!isnan(o->prox)) c->prox = (float)o->prox;
    c->seed = (uint64_t)o->seed;
    oml_diag d = {0};
    if (oml_config_validate(c, &d) != OML_OK) {
        snprintf(err, errlen, "option '%s': %s", d.field, d.msg);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ publishing */

static void publish(omld_engine *e)
{
    uint64_t now = omld_now_ns();
    oml_snapshot *s = oml_learner_snapshot(e->learner, ++e->version);
    if (s == NULL) {
        e->version--;
        LOG_ERROR("engine", "out of memory taking a snapshot; will retry");
        return;
    }
    omld_views_submit(e->views, s, now);
    e->published_updates = e->learner->stats.updates;
    e->published_ns = now;
    e->dirty = 0;
}

static void maybe_publish(omld_engine *e)
{
    uint64_t since = e->learner->stats.updates - e->published_updates;
    uint64_t age_ms = (omld_now_ns() - e->published_ns) / 1000000u;
    if (since >= (uint64_t)e->opts.publish_every ||
        (e->dirty && age_ms >= (uint64_t)e->opts.publish_ms))
        publish(e);
}

/* ------------------------------------------------------------ stats */

static void refresh_stats(omld_engine *e)
{
    const oml_learner *l = e->learner;
    pthread_mutex_lock(&e->stats_mu);
    omld_model_stats *s = &e->stats;
    s->heads = oml_learner_heads(l);
    s->prepared = l->prepared;
    memcpy(s->alpha, l->alpha, sizeof s->alpha);
    memcpy(s->loss_ema, l->stats.loss_ema, sizeof s->loss_ema);
    s->updates = l->stats.updates;
    s->satisfied = l->stats.satisfied;
    s->utilised = l->stats.utilised;
    s->items = oml_store_count(e->store);
    s->labels = (uint32_t)oml_store_label_count(e->store);
    oml_closure_get_stats(e->closure, &s->closure);
    pthread_mutex_unlock(&e->stats_mu);
}

void omld_engine_stats(omld_engine *e, omld_model_stats *out)
{
    pthread_mutex_lock(&e->stats_mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->stats_mu);
    out->queue_depth = atomic_load(&e->queued_triplets);
    out->queue_capacity = e->capacity;
    omld_view *v = e->views ? omld_views_acquire(e->views) : NULL;
    if (v) {
        out->view_version = v->version;
        out->view_age_ms = (omld_now_ns() - v->snapshot_ns) / 1000000u;
        out->view_items = (uint64_t)v->ix->n;
        out->view_updates = v->updates;
        omld_view_release(v);
    }
}

/* ------------------------------------------------------------ applying */

/* Features of a triplet or pair member: a stored item's row or the inline
 * vector. NULL with the reply filled if the id is unknown. */
static const float *resolve(omld_engine *e, const Omld__ItemRef *ref, const char *op, size_t i,
                            const char *member, omld_reply *r, uint32_t *slot)
{
    if (ref->ref_case == OMLD__ITEM_REF__REF_VECTOR)
        return ref->vector->values;
    uint32_t s;
    if (oml_store_find(e->store, ref->id, strlen(ref->id), &s) != OML_OK) {
        char field[96];
        snprintf(field, sizeof field, "%s[%zu].%s.id", op, i, member);
        omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field, "no stored item has id '%.200s'",
                         ref->id);
        return NULL;
    }
    if (slot)
        *slot = s;
    return oml_store_features(e->store, s);
}

/* The data-dependent start, from every live stored item in slot order. */
static void prepare_model(omld_engine *e)
{
    oml_learner *l = e->learner;
    if (l->prepared || !oml_config_needs_data(&l->cfg))
        return;
    uint32_t n = oml_store_count(e->store), slots = oml_store_slots(e->store);
    int32_t dim = oml_store_dim(e->store);
    if (n < 2) {
        LOG_WARN("engine", "first triplet with %u stored item(s): the model starts untrained "
                 "(the %s start needs at least 2 stored items)", n, "data-dependent");
        l->prepared = 1; /* decided once, at a point fixed by the command order */
        return;
    }
    float *X = malloc((size_t)n * (size_t)dim * sizeof(float));
    if (X == NULL) {
        LOG_ERROR("engine", "out of memory preparing the model start");
        return;
    }
    uint32_t k = 0;
    for (uint32_t s = 0; s < slots; s++)
        if (oml_store_is_live(e->store, s))
            memcpy(X + (size_t)k++ * dim, oml_store_features(e->store, s), (size_t)dim * sizeof(float));
    uint64_t t0 = omld_now_ns();
    int rc = oml_learner_prepare(l, X, (int32_t)n);
    free(X);
    if (rc != OML_OK)
        LOG_ERROR("engine", "model start from %u items failed: %s", n, oml_strerror(rc));
    else
        LOG_INFO("engine", "model start taken from %u stored items in %.0f ms", n,
                 (double)(omld_now_ns() - t0) / 1e6);
}

static void learn(omld_engine *e, const float *a, const float *p, const float *n)
{
    uint64_t t0 = omld_now_ns();
    oml_learner_step(e->learner, a, p, n, NULL);
    omld_hist_observe(&e->metrics->update_latency, omld_now_ns() - t0);
    omld_count(&e->metrics->triplets_applied, 1);
    e->dirty = 1;
}

static void apply_triplets(omld_engine *e, const Omld__AddTripletsRequest *rq, omld_reply *r)
{
    size_t n = rq->n_triplets;
    /* Resolve every member first: an unknown id refuses the whole batch. */
    for (size_t i = 0; i < n; i++) {
        const Omld__Triplet *t = rq->triplets[i];
        if (!(e->rows[3 * i] = resolve(e, t->anchor, "add_triplets.triplets", i, "anchor", r, NULL)) ||
            !(e->rows[3 * i + 1] = resolve(e, t->positive, "add_triplets.triplets", i, "positive", r, NULL)) ||
            !(e->rows[3 * i + 2] = resolve(e, t->negative, "add_triplets.triplets", i, "negative", r, NULL))) {
            atomic_fetch_sub(&e->queued_triplets, n);
            return;
        }
    }
    omld_count(&e->metrics->triplets_received, n);
    prepare_model(e);
    for (size_t i = 0; i < n; i++) {
        learn(e, e->rows[3 * i], e->rows[3 * i + 1], e->rows[3 * i + 2]);
        atomic_fetch_sub(&e->queued_triplets, 1);
    }
    Omld__AddTripletsResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__add_triplets_response__init(b);
    b->accepted = (uint32_t)n;
    b->queue_depth = atomic_load(&e->queued_triplets);
    r->msg.body_case = OMLD__RESPONSE__BODY_ADD_TRIPLETS;
    r->msg.add_triplets = b;
}

/* Pairs name stored items (closure nodes are store slots). Each pair is
 * checked against the closure before anything is added, so a pair that
 * contradicts what is already known refuses the whole batch unchanged.
 * A contradiction that only arises between pairs of the same batch is
 * found when its pair is added; the pairs before it then stay (reported in
 * the message). */
static void apply_pairs(omld_engine *e, const Omld__AddPairsRequest *rq, omld_reply *r)
{
    size_t n = rq->n_pairs;
    uint32_t *slots = malloc(2 * n * sizeof *slots);
    if (slots == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    char field[96];
    for (size_t i = 0; i < n; i++) {
        const Omld__Pair *p = rq->pairs[i];
        const Omld__ItemRef *m[2] = {p->a, p->b};
        for (int j = 0; j < 2; j++) {
            snprintf(field, sizeof field, "add_pairs.pairs[%zu].%s", i, j ? "b" : "a");
            if (m[j]->ref_case != OMLD__ITEM_REF__REF_ID) {
                omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, field,
                                 "pair members must be stored item ids: the closure joins "
                                 "items by id");
                goto out;
            }
            if (!resolve(e, m[j], "add_pairs.pairs", i, j ? "b" : "a", r, &slots[2 * i + j]))
                goto out;
        }
        int similar = p->relation == OMLD__PAIR__RELATION__SIMILAR;
        uint32_t a = slots[2 * i], b = slots[2 * i + 1];
        snprintf(field, sizeof field, "add_pairs.pairs[%zu]", i);
        if (a == b) {
            if (!similar) {
                omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, field,
                                 "an item cannot be dissimilar to itself");
                goto out;
            }
        } else if (similar ? oml_closure_is_dissimilar(e->closure, a, b)
                           : oml_closure_is_similar(e->closure, a, b)) {
            omld_reply_error(r, OMLD__STATUS__CODE__CONFLICT, field,
                             "'%.100s' and '%.100s' are already known to be %s",
                             p->a->id, p->b->id, similar ? "dissimilar" : "similar");
            goto out;
        }
    }
    uint64_t derived = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = slots[2 * i], b = slots[2 * i + 1];
        if (a == b)
            continue;
        int got = 0;
        int rc = rq->pairs[i]->relation == OMLD__PAIR__RELATION__SIMILAR
                     ? oml_closure_add_similar(e->closure, a, b, e->derived, DERIVED_PER_PAIR, &got)
                     : oml_closure_add_dissimilar(e->closure, a, b, e->derived, DERIVED_PER_PAIR, &got);
        if (rc != OML_OK) {
            snprintf(field, sizeof field, "add_pairs.pairs[%zu]", i);
            omld_reply_error(r, omld_status_from_oml(rc), field,
                             "%s with the pairs before it in this batch (those %zu pair(s) were "
                             "kept)", rc == OML_ECONFLICT ? "contradicts the closure together"
                                                          : oml_strerror(rc), i);
            goto learned;
        }
        omld_count(&e->metrics->pairs_received, 1);
        if (got > 0)
            prepare_model(e);
        for (int k = 0; k < got; k++)
            learn(e, oml_store_features(e->store, e->derived[k].a),
                  oml_store_features(e->store, e->derived[k].p),
                  oml_store_features(e->store, e->derived[k].n));
        derived += (uint64_t)got;
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
}

static void apply_put(omld_engine *e, const Omld__PutItemsRequest *rq, omld_reply *r)
{
    size_t n = rq->n_items;
    /* Capacity first, so the batch is all-or-nothing: every new id (not
     * live now) takes a fresh slot. */
    uint64_t fresh = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t s;
        fresh += oml_store_find(e->store, rq->items[i]->id, strlen(rq->items[i]->id), &s) != OML_OK;
    }
    if (oml_store_slots(e->store) + fresh > (uint64_t)e->opts.max_items) {
        omld_reply_error(r, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED, "put_items.items",
                         "the store is full: %u of max_items %lld slots used, the batch needs %llu "
                         "more", oml_store_slots(e->store), (long long)e->opts.max_items,
                         (unsigned long long)fresh);
        return;
    }
    uint32_t created = 0, replaced = 0;
    pthread_rwlock_wrlock(&e->lock.rw);
    for (size_t i = 0; i < n; i++) {
        const Omld__Item *it = rq->items[i];
        const char *label = it->label_opt_case == OMLD__ITEM__LABEL_OPT_LABEL ? it->label : NULL;
        uint32_t before = oml_store_slots(e->store);
        oml_diag d = {0};
        int rc = oml_store_put(e->store, it->id, strlen(it->id), it->features, label,
                               label ? strlen(label) : 0, NULL, &d);
        if (rc != OML_OK) {
            pthread_rwlock_unlock(&e->lock.rw);
            char field[96];
            snprintf(field, sizeof field, "put_items.items[%zu].%s", i, d.field);
            omld_reply_error(r, omld_status_from_oml(rc), field, "%s (the %zu item(s) before it "
                             "were stored)", d.msg, i);
            LOG_ERROR("engine", "put_items failed mid-batch: %s", d.msg);
            return;
        }
        if (oml_store_slots(e->store) > before)
            created++;
        else
            replaced++;
    }
    pthread_rwlock_unlock(&e->lock.rw);
    omld_count(&e->metrics->items_put, n);
    e->dirty = 1;
    Omld__PutItemsResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__put_items_response__init(b);
    b->created = created;
    b->replaced = replaced;
    r->msg.body_case = OMLD__RESPONSE__BODY_PUT_ITEMS;
    r->msg.put_items = b;
}

static void apply_delete(omld_engine *e, const Omld__DeleteItemsRequest *rq, omld_reply *r)
{
    uint32_t s;
    if (!rq->missing_ok)
        for (size_t i = 0; i < rq->n_ids; i++)
            if (oml_store_find(e->store, rq->ids[i], strlen(rq->ids[i]), &s) != OML_OK) {
                char field[64];
                snprintf(field, sizeof field, "delete_items.ids[%zu]", i);
                omld_reply_error(r, OMLD__STATUS__CODE__NOT_FOUND, field,
                                 "no stored item has id '%.200s'", rq->ids[i]);
                return;
            }
    uint32_t deleted = 0;
    pthread_rwlock_wrlock(&e->lock.rw);
    for (size_t i = 0; i < rq->n_ids; i++)
        deleted += oml_store_delete(e->store, rq->ids[i], strlen(rq->ids[i])) == OML_OK;
    pthread_rwlock_unlock(&e->lock.rw);
    omld_count(&e->metrics->items_deleted, deleted);
    e->dirty |= deleted > 0;
    Omld__DeleteItemsResponse *b = omld_reply_alloc(r, sizeof *b);
    if (b == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__delete_items_response__init(b);
    b->deleted = deleted;
    r->msg.body_case = OMLD__RESPONSE__BODY_DELETE_ITEMS;
    r->msg.delete_items = b;
}

/* Saves the live model; the full checkpoint (store, closure, log position)
 * arrives with the write-ahead log. */
static void apply_checkpoint(omld_engine *e, omld_reply *r)
{
    char path[OMLD_STR_MAX + 32];
    snprintf(path, sizeof path, "%s/model.oml", e->opts.data_dir);
    oml_diag d = {0};
    int rc = oml_model_save(e->learner, path, &d);
    if (rc != OML_OK) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "checkpoint to %s failed: %s",
                         path, d.msg);
        return;
    }
    Omld__CheckpointResponse *b = omld_reply_alloc(r, sizeof *b);
    char *p = omld_reply_strdup(r, path, strlen(path));
    if (b == NULL || p == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__checkpoint_response__init(b);
    b->path = p;
    struct stat st;
    if (stat(path, &st) == 0)
        b->bytes = (uint64_t)st.st_size;
    b->triplets_applied = e->learner->stats.updates;
    r->msg.body_case = OMLD__RESPONSE__BODY_CHECKPOINT;
    r->msg.checkpoint = b;
}

static void apply(omld_engine *e, cmd *c)
{
    const Omld__Request *q = c->req;
    omld_reply *r = c->reply;
    switch (q->body_case) {
    case OMLD__REQUEST__BODY_PUT_ITEMS: apply_put(e, q->put_items, r); break;
    case OMLD__REQUEST__BODY_DELETE_ITEMS: apply_delete(e, q->delete_items, r); break;
    case OMLD__REQUEST__BODY_ADD_TRIPLETS: apply_triplets(e, q->add_triplets, r); break;
    case OMLD__REQUEST__BODY_ADD_PAIRS: apply_pairs(e, q->add_pairs, r); break;
    case OMLD__REQUEST__BODY_CHECKPOINT: apply_checkpoint(e, r); break;
    default:
        omld_reply_error(r, OMLD__STATUS__CODE__INVALID_ARGUMENT, "body",
                         "this operation does not change state");
    }
    r->msg.model_version = omld_views_version(e->views);
}

/* ------------------------------------------------------------ the thread */

static void *engine_main(void *arg)
{
    omld_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (e->inbox.head == NULL && !e->stopping) {
            if (!e->dirty) {
                pthread_cond_wait(&e->cv, &e->mu);
                continue;
            }
            /* Something changed: wake by the publish deadline at the latest. */
            uint64_t due_ns = e->published_ns + (uint64_t)e->opts.publish_ms * 1000000u;
            uint64_t now = omld_now_ns();
            if (now >= due_ns)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t wait = due_ns - now;
            ts.tv_sec += (time_t)(wait / 1000000000u);
            ts.tv_nsec += (long)(wait % 1000000000u);
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&e->cv, &e->mu, &ts);
        }
        if (e->inbox.head == NULL && e->stopping)
            break;
        /* Take a group. */
        cmd_list group = {0};
        uint64_t cost = 0;
        while (e->inbox.head && cost < GROUP_COST) {
            cmd *c = e->inbox.head;
            e->inbox.head = c->next;
            if (e->inbox.head == NULL)
                e->inbox.tail = NULL;
            cost += c->cost;
            e->inbox_cost -= c->cost;
            list_push(&group, c);
        }
        int wake = e->wake_wanted && group.head;
        if (wake)
            e->wake_wanted = 0;
        pthread_mutex_unlock(&e->mu);

        for (cmd *c = group.head; c; c = c->next)
            apply(e, c);
        if (group.head || wake) {
            pthread_mutex_lock(&e->out_mu);
            for (cmd *c = group.head, *next; c; c = next) {
                next = c->next;
                list_push(&e->outbox, c);
            }
            e->wake_due |= wake;
            pthread_mutex_unlock(&e->out_mu);
            uv_async_send(&e->async);
        }
        refresh_stats(e);
        maybe_publish(e);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    if (e->dirty)
        publish(e);
    return NULL;
}

/* Loop thread: deliver the answers, then tell paused connections there is room. */
static void on_async(uv_async_t *h)
{
    omld_engine *e = h->data;
    pthread_mutex_lock(&e->out_mu);
    cmd *c = e->outbox.head;
    e->outbox.head = e->outbox.tail = NULL;
    int wake = e->wake_due;
    e->wake_due = 0;
    pthread_mutex_unlock(&e->out_mu);
    while (c) {
        cmd *next = c->next;
        c->done(c->ctx, c->reply);
        free(c);
        c = next;
    }
    if (wake && e->wake)
        e->wake(e->wake_arg);
}

/* ------------------------------------------------------------ API */

int omld_engine_submit(omld_engine *e, const Omld__Request *req, uint64_t cost,
                       omld_engine_done_fn done, void *ctx)
{
    if (cost == 0)
        cost = 1;
    pthread_mutex_lock(&e->mu);
    if (e->stopping || (e->inbox_cost + cost > e->capacity && e->inbox.head != NULL)) {
        e->wake_wanted = 1;
        pthread_mutex_unlock(&e->mu);
        return 1;
    }
    pthread_mutex_unlock(&e->mu);

    cmd *c = calloc(1, sizeof *c);
    omld_reply *r = calloc(1, sizeof *r);
    if (c == NULL || r == NULL) {
        free(c);
        free(r);
        return -1;
    }
    omld_reply_init(r, req->request_id);
    c->req = req;
    c->cost = cost;
    c->done = done;
    c->ctx = ctx;
    c->reply = r;
    if (req->body_case == OMLD__REQUEST__BODY_ADD_TRIPLETS)
        atomic_fetch_add(&e->queued_triplets, req->add_triplets->n_triplets);
    pthread_mutex_lock(&e->mu);
    list_push(&e->inbox, c);
    e->inbox_cost += cost;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

void omld_engine_set_wake(omld_engine *e, void (*wake)(void *arg), void *arg)
{
    e->wake = wake;
    e->wake_arg = arg;
}

omld_views *omld_engine_views(omld_engine *e)
{
    return e->views;
}

const oml_store *omld_engine_store_rdlock(omld_engine *e)
{
    pthread_rwlock_rdlock(&e->lock.rw);
    return e->store;
}

void omld_engine_store_unlock(omld_engine *e)
{
    pthread_rwlock_unlock(&e->lock.rw);
}

void omld_engine_store_ref(omld_engine *e, const oml_store **store, omld_store_lock **lock)
{
    *store = e->store;
    *lock = &e->lock;
}

int omld_engine_start(omld_engine **out, uv_loop_t *loop, const omld_config *opts,
                      omld_metrics *metrics, char *err, size_t errlen)
{
    oml_config mcfg;
    if (omld_engine_model_config(opts, &mcfg, err, errlen) != 0)
        return -1;
    omld_engine *e = calloc(1, sizeof *e);
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    e->opts = *opts;
    e->metrics = metrics;
    e->capacity = (uint64_t)opts->queue_capacity;
    atomic_init(&e->queued_triplets, 0);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_mutex_init(&e->out_mu, NULL);
    pthread_mutex_init(&e->stats_mu, NULL);
    pthread_rwlock_init(&e->lock.rw, NULL);
    e->stats.cfg = mcfg;
    snprintf(e->stats.preset, sizeof e->stats.preset, "%.31s", opts->preset);

    oml_diag d = {0};
    int rc = oml_store_create(&e->store, (int32_t)opts->dim, (uint32_t)opts->max_items);
    if (rc == OML_OK)
        rc = oml_closure_create(&e->closure, (uint32_t)opts->max_items, CLOSURE_MAX_DIS_EDGES,
                                (uint64_t)opts->seed);
    if (rc == OML_OK)
        rc = oml_learner_create(&e->learner, &mcfg, &d);
    e->derived = malloc(DERIVED_PER_PAIR * sizeof *e->derived);
    e->rows = malloc(3 * (size_t)opts->max_batch * sizeof *e->rows);
    if (rc == OML_OK && (e->derived == NULL || e->rows == NULL))
        rc = OML_ENOMEM;
    if (rc != OML_OK) {
        snprintf(err, errlen, "cannot create the model: %s%s%s", oml_strerror(rc),
                 d.msg[0] ? ": " : "", d.msg);
        goto fail;
    }
    if (omld_views_create(&e->views, e->store, &e->lock, metrics, NULL, NULL) != 0) {
        snprintf(err, errlen, "cannot start the indexer thread");
        goto fail;
    }
    /* View 1: the untrained model over the empty store, so queries and
     * /readyz work from the start. */
    oml_snapshot *s = oml_learner_snapshot(e->learner, ++e->version);
    e->published_ns = omld_now_ns();
    if (s == NULL || omld_views_publish_now(e->views, s, e->published_ns) != 0) {
        snprintf(err, errlen, "cannot publish the first view");
        goto fail;
    }
    refresh_stats(e);
    if (uv_async_init(loop, &e->async, on_async) != 0) {
        snprintf(err, errlen, "uv_async_init failed");
        goto fail;
    }
    e->async.data = e;
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        snprintf(err, errlen, "cannot start the learner thread");
        uv_close((uv_handle_t *)&e->async, NULL);
        e->stopping = 1;
        *out = e; /* destroyed after the loop closed the handle */
        return -1;
    }
    e->running = 1;
    LOG_INFO("engine", "model: preset %s, dim %d, L %d, hidden %d, emb %d, eta %g, tau %g, seed %llu",
             opts->preset, mcfg.dim, mcfg.layers, mcfg.hidden, mcfg.emb, mcfg.eta, mcfg.tau,
             (unsigned long long)mcfg.seed);
    *out = e;
    return 0;
fail:
    omld_views_destroy(e->views);
    e->views = NULL;
    omld_engine_destroy(e);
    *out = NULL;
    return -1;
}

void omld_engine_stop(omld_engine *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->running) {
        pthread_join(e->thread, NULL);
        e->running = 0;
    }
    on_async(&e->async); /* answers of the last group */
    omld_views_destroy(e->views);
    e->views = NULL;
    if (!uv_is_closing((uv_handle_t *)&e->async))
        uv_close((uv_handle_t *)&e->async, NULL);
}

void omld_engine_destroy(omld_engine *e)
{
    if (e == NULL)
        return;
    omld_views_destroy(e->views);
    oml_learner_destroy(e->learner);
    oml_closure_destroy(e->closure);
    oml_store_destroy(e->store);
    free(e->derived);
    free(e->rows);
    pthread_rwlock_destroy(&e->lock.rw);
    pthread_mutex_destroy(&e->stats_mu);
    pthread_mutex_destroy(&e->out_mu);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
