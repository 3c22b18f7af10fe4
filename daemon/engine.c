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
#include "engine_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "modelfile.h"
#include "parallel.h"
#include "replicate.h"

#define WAIT_VIEW_NS 10000000000ull /* a wait_for_view answer goes out after this anyway */
#define WAIT_CHECK_MS 2               /* ... its view is looked for this often */

/* replicate_sync: how long an answer waits for Redis at most. */
static uint64_t sync_wait_ns(const omld_engine *e)
{
    return (uint64_t)(e->opts.replicate_lease_ms > 0 ? e->opts.replicate_lease_ms : 10000) *
           1000000u;
}
#define BG_POLL_NS 50000000u          /* a background checkpoint is reaped within this */
#define GROUP_COST 1024      /* entries applied before the group is answered */
#define REHEARSE_SLICE_NS 10000000u /* rehearsal in slices of at most ~10 ms, so a request
                                       arriving meanwhile waits no longer */
#define IDLE_NS 50000000u     /* no request for this long: idle rehearsal may run */
#define PUB_POLL_NS 200000000u /* an idle primary looks this often for a checkpoint Redis needs */

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
        snprintf(err, errlen, "option 'preset': unknown preset '%s' (default | wide | paper)", o->preset);
        return -1;
    }
    /* Options left empty are -1 / NaN: the preset's value stays. */
    if (o->layers >= 0) c->layers = (int32_t)o->layers;
    if (o->hidden >= 0) c->hidden = (int32_t)o->hidden;
    if (o->emb >= 0) c->emb = (int32_t)o->emb;
    if (o->basis >= 0) c->basis = (int32_t)o->basis;
    if (!isnan(o->eta)) c->eta = (float)o->eta;
    if (!isnan(o->tau)) c->tau = (float)o->tau;
    if (!isnan(o->beta)) c->beta = (float)o->beta;
    if (!isnan(o->s)) c->s = (float)o->s;
    if (!isnan(o->prox)) c->prox = (float)o->prox;
    if (!isnan(o->rehearse)) c->rehearse = (float)o->rehearse;
    if (o->replay >= 0) c->replay = (int32_t)o->replay;
    c->seed = (uint64_t)o->seed;
    oml_diag d = {0};
    if (oml_config_validate(c, &d) != OML_OK) {
        snprintf(err, errlen, "option '%s': %s", d.field, d.msg);
        return -1;
    }
    return 0;
}

int omld_engine_model_adopt(const omld_config *o, const oml_config *stored, oml_config *cfg,
                            char *err, size_t errlen)
{
    /* What the operator set must agree; the rest the model keeps. */
    const char *field = NULL;
    if (stored->dim != (int32_t)o->dim) field = "dim";
    else if (stored->seed != (uint64_t)o->seed) field = "seed";
    else if (o->layers >= 0 && stored->layers != (int32_t)o->layers) field = "layers";
    else if (o->hidden >= 0 && stored->hidden != (int32_t)o->hidden) field = "hidden";
    else if (o->emb >= 0 && stored->emb != (int32_t)o->emb) field = "emb";
    else if (o->basis >= 0 && stored->basis != (int32_t)o->basis) field = "basis";
    else if (!isnan(o->eta) && stored->eta != (float)o->eta) field = "eta";
    else if (!isnan(o->tau) && stored->tau != (float)o->tau) field = "tau";
    else if (!isnan(o->beta) && stored->beta != (float)o->beta) field = "beta";
    else if (!isnan(o->s) && stored->s != (float)o->s) field = "s";
    else if (!isnan(o->prox) && stored->prox != (float)o->prox) field = "prox";
    else if (!isnan(o->rehearse) && stored->rehearse != (float)o->rehearse) field = "rehearse";
    else if (o->replay >= 0 && stored->replay != (int32_t)o->replay) field = "replay";
    if (field) {
        snprintf(err, errlen, "option '%s' differs from the stored model's (dim %d, L %d, hidden "
                 "%d, emb %d, seed %llu, ...): start with the options it was created with, or "
                 "with another data_dir", field, stored->dim, stored->layers, stored->hidden,
                 stored->emb, (unsigned long long)stored->seed);
        return -1;
    }
    if (!oml_config_equal(stored, cfg))
        LOG_WARN("engine", "the stored model keeps the settings it was created with, which "
                 "differ from preset '%s' as this release defines it (an earlier release, or "
                 "another preset); a new data_dir starts with today's", o->preset);
    *cfg = *stored;
    return 0;
}

/* ------------------------------------------------------------ publishing */

/* Until the first triplet the learner has not taken its data-dependent
 * start (that happens at a point of the log: apply.c), but queries should
 * not be answered by a random network meanwhile: serve the start the
 * stored items would give now, from a strided sample of them, in a
 * throw-away learner (the live one is untouched, so replay is unaffected).
 * NULL when the live model can serve (or on any failure: then it does). */
#define PROVISIONAL_ROWS 4096
static oml_snapshot *provisional_snapshot(omld_engine *e, uint64_t version)
{
    const oml_learner *live = e->learner;
    uint32_t n = oml_store_count(e->store);
    if (live->prepared || !oml_config_needs_data(&live->cfg) || n < 2) {
        oml_snapshot_release(e->provisional);
        e->provisional = NULL;
        return NULL;
    }
    uint64_t was = e->provisional_items;
    if (e->provisional && (uint64_t)n * 4 < was * 5 && (uint64_t)n * 5 > was * 4)
        return oml_snapshot_create(&e->provisional->cfg, e->provisional->params,
                                   e->provisional->alpha, version, 0);
    uint32_t m = n < PROVISIONAL_ROWS ? n : PROVISIONAL_ROWS, k = 0;
    int32_t *at = malloc((size_t)m * sizeof(int32_t));
    int32_t *labels = malloc((size_t)m * sizeof(int32_t));
    oml_learner *l = NULL;
    oml_snapshot *s = NULL;
    if (at == NULL || labels == NULL || oml_learner_create(&l, &live->cfg, NULL) != OML_OK)
        goto done;
    k = omld_start_items(e, m, at, labels);
    if (k >= 2 &&
        oml_learner_prepare_at(l, oml_store_matrix(e->store), at, labels, (int32_t)k) == OML_OK)
        s = oml_learner_snapshot(l, version);
    if (s) {
        oml_snapshot_release(e->provisional);
        e->provisional = oml_snapshot_retain(s);
        e->provisional_items = n;
    }
done:
    free(at);
    free(labels);
    oml_learner_destroy(l);
    return s;
}

/* The snapshot a new view serves: the provisional start before the first
 * triplet, the live model after. */
static oml_snapshot *serving_snapshot(omld_engine *e, uint64_t version)
{
    oml_snapshot *s = provisional_snapshot(e, version);
    return s ? s : oml_learner_snapshot(e->learner, version);
}

void omld_engine_publish(omld_engine *e)
{
    uint64_t now = omld_now_ns();
    oml_snapshot *s = serving_snapshot(e, ++e->version);
    if (s == NULL) {
        e->version--;
        LOG_ERROR("engine", "out of memory taking a snapshot; will retry");
        return;
    }
    omld_views_submit(e->views, s, now);
    /* Replicas publish this version at this position of the log too. */
    omld_replicate_version(e->pub, e->version, omld_persist_position(e));
    /* Batch models index every stored item too: rebuild theirs when the
     * items changed since they were last asked to. */
    if (e->models && e->models_gen != e->store_gen) {
        e->models_gen = e->store_gen;
        omld_models_store_changed(e->models);
    }
    e->published_updates = e->learner->stats.updates;
    e->published_ns = now;
    e->published_lsn = omld_persist_position(e);
    e->dirty = 0;
}

#define publish omld_engine_publish

static void maybe_publish(omld_engine *e)
{
    if (e->replica)
        return; /* it publishes where the primary did (follow.c) */
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
    s->start_init = l->start_init;
    memcpy(s->start_error, l->start_error, sizeof s->start_error);
    memcpy(s->alpha, l->alpha, sizeof s->alpha);
    memcpy(s->loss_ema, l->stats.loss_ema, sizeof s->loss_ema);
    s->updates = l->stats.updates;
    s->satisfied = l->stats.satisfied;
    s->utilised = l->stats.utilised;
    s->recent_accuracy = oml_learner_recent_accuracy(l);
    s->recent_n = l->stats.recent_n;
    s->steps = l->stats.steps;
    s->rehearsed = l->stats.rehearsed;
    s->skipped = l->stats.skipped;
    s->replay_triplets = e->replay.live;
    s->replay_capacity = e->replay.cap;
    s->items = oml_store_count(e->store);
    s->labels = (uint32_t)oml_store_label_count(e->store);
    oml_closure_get_stats(e->closure, &s->closure);
    s->wal_bytes = e->wal ? oml_wal_bytes(e->wal) : 0;
    s->wal_records_since_ckpt = e->records_since_ckpt;
    s->ckpt_unix_ms = e->ckpt_unix_ms;
    s->ckpt_duration_ms = e->ckpt_dur_ns / 1000000u;
    s->ckpt_pause_ms = e->ckpt_pause_ns / 1000000u;
    s->ckpt_written = e->ckpt_written;
    s->ckpt_failed = e->ckpt_failed;
    s->read_only = e->read_only;
    snprintf(s->read_only_why, sizeof s->read_only_why, "%.255s",
             e->read_only ? e->read_only_why : "");
    snprintf(e->stats_rb_name, sizeof e->stats_rb_name, "%s", e->rb_buf ? e->rb_name : "");
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
        out->view_lists = (uint32_t)v->ix->n_lists;
        out->view_lists_scanned = 0;
        for (int h = 0; v->ix->hl && h < v->ix->heads; h++) /* heads sharing a scan add none */
            if (v->ix->hl[h].shared_from < 0)
                out->view_lists_scanned += (uint32_t)v->ix->hl[h].n_probe;
        omld_view *b = v->base ? v->base : v;
        out->view_index_version = b->version; /* older than view_version when it re-ranks */
        out->view_float_bytes = oml_index_float_bytes(v->ix);
        out->view_code_bytes = oml_index_code_bytes(v->ix);
        out->view_coded_lists = v->ix->coded;
        out->view_recall_hits = atomic_load(&b->recall_hits);
        out->view_recall_total = atomic_load(&b->recall_total);
        out->view_depth_step = (uint32_t)atomic_load(&b->depth.step);
        out->view_depth_samples = atomic_load(&b->depth.samples);
        uint64_t share = atomic_load(&b->depth.share);
        out->view_depth_share = share > 0 ? (double)share / 1e6 : NAN;
        omld_view_release(v);
    }
}

/* ------------------------------------------------------------ the thread */

/* The answer to a Checkpoint request: the newest checkpoint written. */
static void checkpoint_reply(omld_engine *e, omld_reply *r)
{
    Omld__CheckpointResponse *b = omld_reply_alloc(r, sizeof *b);
    char *p = omld_reply_strdup(r, e->ckpt_path, strlen(e->ckpt_path));
    if (b == NULL || p == NULL) {
        omld_reply_error(r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
        return;
    }
    omld__checkpoint_response__init(b);
    b->path = p;
    b->bytes = e->ckpt_bytes;
    b->triplets_applied = e->ckpt_updates;
    r->msg.body_case = OMLD__RESPONSE__BODY_CHECKPOINT;
    r->msg.checkpoint = b;
    r->msg.model_version = omld_views_version(e->views);
}

/* A Checkpoint request: with checkpoint_background, held (answered by
 * serve_checkpoint_waiters once a checkpoint at the log's present position
 * is durable) while the learner goes on; else written now. */
static void take_checkpoint_request(omld_engine *e, cmd *c)
{
    oml_diag d = {0};
    if (e->read_only) {
        omld_reply_error(c->reply, OMLD__STATUS__CODE__INTERNAL, NULL,
                         "cannot checkpoint while the write-ahead log cannot be written: %s",
                         e->read_only_why);
        return;
    }
    if (e->opts.checkpoint_background) {
        c->need_lsn = omld_persist_position(e);
        c->held = 1;
        if (e->bg_pid > 0 || omld_persist_bg_start(e, &d) >= 0)
            return; /* a running one is waited for, then one at need_lsn if it is older */
        c->held = 0;
        omld_reply_error(c->reply, OMLD__STATUS__CODE__INTERNAL, NULL, "checkpoint failed: %s", d.msg);
        return;
    }
    char path[512];
    uint64_t bytes = 0;
    if (omld_persist_checkpoint(e, path, sizeof path, &bytes, &d) != OML_OK) {
        omld_reply_error(c->reply, OMLD__STATUS__CODE__INTERNAL, NULL, "checkpoint failed: %s", d.msg);
        return;
    }
    checkpoint_reply(e, c->reply);
}

/* Held Checkpoint requests whose checkpoint is durable are answered (or all
 * of them, with the error, when the background one failed); for the rest a
 * new one starts once none is running. */
static void serve_checkpoint_waiters(omld_engine *e)
{
    if (e->ckpt_waiting.head == NULL || e->bg_pid > 0)
        return;
    oml_diag d = {0};
    int failed = e->bg_failed;
    e->bg_failed = 0;
    cmd_list keep = {NULL, NULL}, ready = {NULL, NULL};
    for (cmd *c = e->ckpt_waiting.head, *next; c; c = next) {
        next = c->next;
        if (failed) {
            omld_reply_error(c->reply, OMLD__STATUS__CODE__INTERNAL, NULL,
                             "checkpoint failed (the daemon's log says why; the write-ahead log "
                             "keeps everything)");
            list_push(&ready, c);
        } else if (e->ckpt_lsn >= c->need_lsn && e->ckpt_path[0]) {
            checkpoint_reply(e, c->reply);
            list_push(&ready, c);
        } else {
            list_push(&keep, c);
        }
    }
    e->ckpt_waiting = keep;
    if (keep.head && omld_persist_bg_start(e, &d) < 0) {
        for (cmd *c = keep.head, *next; c; c = next) {
            next = c->next;
            omld_reply_error(c->reply, OMLD__STATUS__CODE__INTERNAL, NULL, "checkpoint failed: %s",
                             d.msg);
            list_push(&ready, c);
        }
        e->ckpt_waiting = (cmd_list){NULL, NULL};
    } else if (keep.head && e->bg_pid == 0) {
        serve_checkpoint_waiters(e); /* written in the foreground (no fork): answer now */
        return;
    }
    if (ready.head == NULL)
        return;
    pthread_mutex_lock(&e->out_mu);
    for (cmd *c = ready.head, *next; c; c = next) {
        next = c->next;
        list_push(&e->outbox, c);
    }
    pthread_mutex_unlock(&e->out_mu);
    uv_async_send(&e->async);
}

/* Applies each command of the group in order and appends every change to
 * the log (not yet committed); *logged counts the records, *log_failed is
 * set (and d says why) if an append failed. */
static void apply_and_log(omld_engine *e, cmd_list *group, int *logged, int *log_failed,
                          oml_diag *d)
{
    for (cmd *c = group->head; c; c = c->next) {
        c->changed = 0;
        if (c->req->body_case == OMLD__REQUEST__BODY_CHECKPOINT)
            continue; /* after the commit */
        if (!omld_persist_writable(e)) {
            omld_reply_error(c->reply, OMLD__STATUS__CODE__RESOURCE_EXHAUSTED, NULL,
                             "writes are refused: the write-ahead log cannot be written (%s); "
                             "reads are still served", e->read_only_why);
            if (c->req->body_case == OMLD__REQUEST__BODY_ADD_TRIPLETS)
                atomic_fetch_sub(&e->queued_triplets, c->req->add_triplets->n_triplets);
            continue;
        }
        c->changed = omld_apply(e, c->req, c->reply);
        if (c->changed) {
            (*logged)++;
            /* A promote's record carries the model's bytes (self-contained:
             * replay needs no model file). */
            const Omld__Request *lq = c->req;
            Omld__Request q2;
            Omld__PromoteRequest p2;
            if (e->promote_log && c->req->body_case == OMLD__REQUEST__BODY_PROMOTE) {
                q2 = *c->req;
                p2 = *c->req->promote;
                p2.model_data.data = e->promote_log;
                p2.model_data.len = e->promote_log_len;
                q2.promote = &p2;
                lq = &q2;
            }
            if (omld_persist_log(e, lq) != OML_OK) {
                *log_failed = 1;
                snprintf(d->msg, sizeof d->msg, "cannot append to the write-ahead log");
            }
        }
        free(e->promote_log);
        e->promote_log = NULL;
        e->promote_log_len = 0;
        c->reply->msg.model_version = omld_views_version(e->views);
    }
}

static void remember_promote(omld_engine *e, int rollback, const char *model)
{
    uint64_t now_ms = omld_wall_ms();
    pthread_mutex_lock(&e->stats_mu);
    omld_promote_event *ev = &e->promotes[e->promotes_next];
    ev->unix_ms = now_ms;
    ev->version = e->version;
    ev->rollback = rollback;
    snprintf(ev->model, sizeof ev->model, "%s", model ? model : "");
    e->promotes_next = (e->promotes_next + 1) % OMLD_PROMOTES_KEPT;
    if (e->n_promotes < OMLD_PROMOTES_KEPT)
        e->n_promotes++;
    pthread_mutex_unlock(&e->stats_mu);
}

int omld_engine_promotes(omld_engine *e, omld_promote_event *out, int cap)
{
    pthread_mutex_lock(&e->stats_mu);
    int n = e->n_promotes < cap ? e->n_promotes : cap;
    int first = (e->promotes_next - e->n_promotes + OMLD_PROMOTES_KEPT) % OMLD_PROMOTES_KEPT;
    for (int i = 0; i < n; i++) /* the newest n of them, oldest first */
        out[i] = e->promotes[(first + e->n_promotes - n + i) % OMLD_PROMOTES_KEPT];
    pthread_mutex_unlock(&e->stats_mu);
    return n;
}

/* Promote / rollback: answered once the new live view is serving, so a
 * query sent after the answer sees it. (After the commit: a view never
 * shows an unlogged change.) */
static void publish_promoted(omld_engine *e, cmd_list *group)
{
    e->publish_now = 0;
    publish(e);
    omld_views_wait(e->views, e->version, 60000);
    for (cmd *c = group->head; c; c = c->next) {
        if (!c->changed || c->reply->status.code != OMLD__STATUS__CODE__OK)
            continue;
        const char *model;
        if (c->reply->msg.body_case == OMLD__RESPONSE__BODY_PROMOTE) {
            c->reply->msg.promote->model_version = e->version;
            model = c->req->promote->name;
        } else if (c->reply->msg.body_case == OMLD__RESPONSE__BODY_ROLLBACK) {
            c->reply->msg.rollback->model_version = e->version;
            model = c->reply->msg.rollback->undone;
        } else {
            continue;
        }
        c->reply->msg.model_version = omld_views_version(e->views);
        remember_promote(e, c->reply->msg.body_case == OMLD__RESPONSE__BODY_ROLLBACK, model);
    }
}

/* The request's wait_for_view flag (proto/omld.proto, WAITING FOR THE VIEW). */
static int wants_view(const Omld__Request *q)
{
    switch (q->body_case) {
    case OMLD__REQUEST__BODY_PUT_ITEMS: return q->put_items->wait_for_view;
    case OMLD__REQUEST__BODY_ADD_TRIPLETS: return q->add_triplets->wait_for_view;
    case OMLD__REQUEST__BODY_ADD_PAIRS: return q->add_pairs->wait_for_view;
    default: return 0;
    }
}

/* Writes that asked for their view: a snapshot now (after the commit: a
 * view never shows an unlogged change), and their answers held on the
 * loop until the view of that version serves (on_async). */
static void publish_for_waiters(omld_engine *e, cmd_list *group)
{
    int any = 0;
    for (cmd *c = group->head; c && !any; c = c->next)
        any = wants_view(c->req) && c->reply->status.code == OMLD__STATUS__CODE__OK;
    if (!any)
        return;
    if (e->dirty || e->version == 0)
        omld_engine_publish(e);
    uint64_t until = omld_now_ns() + WAIT_VIEW_NS;
    for (cmd *c = group->head; c; c = c->next)
        if (wants_view(c->req) && c->reply->status.code == OMLD__STATUS__CODE__OK) {
            c->wait_version = e->version;
            c->wait_until_ns = until;
        }
}

/* replicate_sync: the answers of the writes this commit made durable wait
 * on the loop until Redis holds the log up to its position (on_async). */
static void hold_for_redis(omld_engine *e, cmd_list *group)
{
    uint64_t lsn = omld_persist_position(e), until = omld_now_ns() + sync_wait_ns(e);
    for (cmd *c = group->head; c; c = c->next)
        if (c->changed && c->reply->status.code == OMLD__STATUS__CODE__OK) {
            c->wait_lsn = lsn;
            c->sync_pub = e->pub;
            if (c->wait_until_ns == 0 || c->wait_until_ns > until)
                c->wait_until_ns = until;
        }
}

/* Applies a group in order, logs every change, commits the log once (group
 * commit), and only then lets the answers go. If the commit fails, the
 * group's changes are undone (omld_persist_rollback reloads the durable
 * state) and every request that changed something is answered with the
 * error instead: nothing unlogged is acknowledged, nothing refused stays. */
static void run_group(omld_engine *e, cmd_list *group)
{
    if (e->replica) {
        for (cmd *c = group->head; c; c = c->next)
            if (c->batch)
                omld_follow_apply(e, c->batch, c->reply);
            else if (c->promote && e->replica)
                omld_follow_promote(e, c->promote, c->reply);
            else /* writes are refused before they come here (dispatch.c) */
                omld_reply_error(c->reply, OMLD__STATUS__CODE__NOT_PRIMARY, NULL,
                                 "this omld is a read replica");
        return;
    }
    if (!omld_replicate_may_write(e->pub)) { /* the lease is not held: nothing is written */
        char why[480];
        omld_replicate_lease_why(e->pub, why, sizeof why);
        for (cmd *c = group->head; c; c = c->next)
            omld_reply_error(c->reply, OMLD__STATUS__CODE__NOT_PRIMARY, NULL,
                             "this omld may not write as the primary now: %s", why);
        return;
    }
    int logged = 0, log_failed = 0;
    oml_diag d = {0};
    apply_and_log(e, group, &logged, &log_failed, &d);
    /* The group's last part batch is learned now, in the same commit: a
     * record says where, since where a group ends is a matter of timing. */
    if (e->replay.n_pending > 0 && omld_persist_writable(e)) {
        omld_rehearse(e, 0);
        logged++;
        if (omld_persist_log_rehearse(e, 0) != OML_OK) {
            log_failed = 1;
            snprintf(d.msg, sizeof d.msg, "cannot append to the write-ahead log");
        }
    }
    if (logged && (log_failed || omld_persist_commit(e, &d) != OML_OK)) {
        for (cmd *c = group->head; c; c = c->next)
            if (c->changed)
                omld_reply_error(c->reply, OMLD__STATUS__CODE__INTERNAL, NULL,
                                 "not applied: the write-ahead log cannot be written (%s)", d.msg);
        omld_persist_rollback(e, d.msg);
    } else if (logged && e->pub && e->opts.replicate_sync) {
        hold_for_redis(e, group);
    }
    if (e->publish_now)
        publish_promoted(e, group);
    publish_for_waiters(e, group);
    for (cmd *c = group->head; c; c = c->next)
        if (c->req->body_case == OMLD__REQUEST__BODY_CHECKPOINT) {
            take_checkpoint_request(e, c);
            if (!c->held)
                c->reply->msg.model_version = omld_views_version(e->views);
        }
    omld_persist_maybe_checkpoint(e);
}

/* Rehearsal to do now: what the new triplets are owed (replay.h) as soon
 * as the queue is empty, then the idle allowance once no request came for
 * IDLE_NS. Never while the log cannot be written: every rehearsal step is
 * logged. Called with mu held. */
static int idle_allowance(const omld_engine *e)
{
    return !e->read_only && !e->replica && e->replay.live > 0 &&
           omld_replicate_may_write(e->pub) &&
           e->idle_credit >= (double)e->learner->cfg.batch;
}

static int rehearsal_due(omld_engine *e)
{
    if (e->read_only || e->replica || e->replay.live == 0 || !omld_replicate_may_write(e->pub))
        return 0;
    if (oml_replay_owed(&e->replay, e->learner) > 0)
        return 1;
    return idle_allowance(e) && omld_now_ns() - e->last_request_ns >= IDLE_NS;
}

/* Waits on cv (mu held) for at most wait_ns (UINT64_MAX: until signalled). */
static void wait_for(omld_engine *e, uint64_t wait_ns)
{
    if (wait_ns == UINT64_MAX) {
        pthread_cond_wait(&e->cv, &e->mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(wait_ns / 1000000000u);
    ts.tv_nsec += (long)(wait_ns % 1000000000u);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
}

/* One slice of rehearsal, then its log record (the steps are a function
 * of the state and the count, so replay repeats them exactly). */
static void rehearse_slice(omld_engine *e)
{
    int32_t owed = oml_replay_owed(&e->replay, e->learner), steps = 0;
    uint64_t t0 = omld_now_ns();
    do {
        if (omld_rehearse(e, 1) == 0)
            break; /* the ring emptied (deletes): nothing to rehearse */
        steps++;
    } while (steps < (owed > 0 ? owed : (int32_t)(e->idle_credit / e->learner->cfg.batch)) &&
             omld_now_ns() - t0 < REHEARSE_SLICE_NS);
    if (owed <= 0)
        e->idle_credit -= (double)steps * e->learner->cfg.batch;
    if (steps == 0) {
        e->idle_credit = 0;
        return;
    }
    oml_diag d = {0};
    if (omld_persist_log_rehearse(e, steps) != OML_OK || omld_persist_commit(e, &d) != OML_OK)
        omld_persist_rollback(e, d.msg[0] ? d.msg : "cannot append to the write-ahead log");
    omld_persist_maybe_checkpoint(e);
}

static void *engine_main(void *arg)
{
    omld_engine *e = arg;
    pthread_setname_np(pthread_self(), "omld-learner"); /* named for top and perf */
    pthread_mutex_lock(&e->mu);
    for (;;) {
        int reaped = 0, for_redis = 0;
        while (e->inbox.head == NULL && !e->stopping) {
            if (rehearsal_due(e))
                break;
            /* Records Redis lost need a checkpoint past them, which the
             * replicas wait for: taken while idle too, or a primary that
             * went quiet leaves them behind for good. */
            if (e->pub && e->bg_pid == 0 && omld_replicate_checkpoint_due(e->pub)) {
                for_redis = 1;
                break;
            }
            uint64_t now = omld_now_ns(), wait_ns = UINT64_MAX;
            if (idle_allowance(e)) /* wake when the quiet time is up */
                wait_ns = e->last_request_ns + IDLE_NS - now;
            if (e->dirty && !e->replica) { /* changed: wake by the publish deadline at the latest */
                uint64_t due_ns = e->published_ns + (uint64_t)e->opts.publish_ms * 1000000u;
                if (now >= due_ns)
                    break;
                if (due_ns - now < wait_ns)
                    wait_ns = due_ns - now;
            }
            if (e->bg_pid > 0 && !omld_persist_bg_poll(e)) {
                reaped = 1; /* a background checkpoint ended while idle */
                break;
            }
            if (e->bg_pid > 0 && wait_ns > BG_POLL_NS) /* a checkpoint is being written */
                wait_ns = BG_POLL_NS;
            if (e->pub && wait_ns > PUB_POLL_NS)
                wait_ns = PUB_POLL_NS;
            if (e->ckpt_waiting.head && e->bg_pid == 0)
                break; /* held Checkpoint requests to answer or to start one for */
            wait_for(e, wait_ns);
        }
        if (e->inbox.head == NULL && e->stopping)
            break;
        if (for_redis) {
            pthread_mutex_unlock(&e->mu);
            if (e->records_since_ckpt == 0 || e->read_only) /* the last one covers them */
                (void)omld_replicate_checkpoint_wanted(e->pub);
            else
                omld_persist_maybe_checkpoint(e);
            refresh_stats(e);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        if (reaped) {
            /* Its figures reach status now, and the records that came in
             * while it was written start the next one if they are due:
             * no new request may come to do either. */
            pthread_mutex_unlock(&e->mu);
            omld_persist_maybe_checkpoint(e);
            refresh_stats(e);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        if (e->inbox.head == NULL && e->ckpt_waiting.head && e->bg_pid == 0) {
            pthread_mutex_unlock(&e->mu);
            serve_checkpoint_waiters(e);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        if (e->inbox.head == NULL && rehearsal_due(e)) {
            pthread_mutex_unlock(&e->mu);
            rehearse_slice(e);
            refresh_stats(e);
            maybe_publish(e);
            pthread_mutex_lock(&e->mu);
            continue;
        }
        if (e->inbox.head)
            e->last_request_ns = omld_now_ns();
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

        uint64_t learned = e->learner->stats.updates;
        omld_persist_bg_poll(e);
        run_group(e, &group);
        /* The idle allowance grows with what was learned, up to what the
         * ring holds times the ratio. */
        e->idle_credit += (double)(e->learner->stats.updates - learned) * e->opts.rehearse_idle;
        double cap = e->opts.rehearse_idle * (double)e->replay.live;
        if (e->idle_credit > cap)
            e->idle_credit = cap;
        if (group.head || wake) {
            pthread_mutex_lock(&e->out_mu);
            for (cmd *c = group.head, *next; c; c = next) {
                next = c->next;
                list_push(c->held ? &e->ckpt_waiting : &e->outbox, c);
            }
            e->wake_due |= wake;
            pthread_mutex_unlock(&e->out_mu);
            uv_async_send(&e->async);
        }
        serve_checkpoint_waiters(e);
        refresh_stats(e);
        maybe_publish(e);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    if (e->ckpt_waiting.head) { /* stopping: their checkpoint is written now */
        omld_persist_bg_wait(e);
        oml_diag d = {0};
        char path[512];
        uint64_t bytes;
        if (e->ckpt_waiting.head && e->ckpt_lsn < omld_persist_position(e) &&
            omld_persist_checkpoint(e, path, sizeof path, &bytes, &d) != OML_OK)
            e->bg_failed = 1;
        serve_checkpoint_waiters(e);
    }
    if (e->dirty && !e->replica)
        publish(e);
    return NULL;
}

static void on_wait_timer(uv_timer_t *t);

/* Loop thread: one answer out (its model_version the view serving now). */
static void deliver(omld_engine *e, cmd *c)
{
    if (c->wait_version > 0)
        c->reply->msg.model_version = omld_views_version(e->views);
    if (c->wait_lsn > omld_replicate_synced_lsn(c->sync_pub))
        omld_reply_error(c->reply, OMLD__STATUS__CODE__UNAVAILABLE, NULL,
                         "the change is in this primary's log (position %" PRIu64 ") but Redis "
                         "did not take it within %" PRIu64 " ms (replicate_sync): a replica "
                         "promoted now might not have it; retry with the same idempotency key",
                         c->wait_lsn, sync_wait_ns(e) / 1000000u);
    c->done(c->ctx, c->reply);
    free(c);
}

/* Loop thread: the answer may go out now (its view serves and Redis holds
 * its records). */
static int answer_due(omld_engine *e, const cmd *c)
{
    return (c->wait_version == 0 || omld_views_version(e->views) >= c->wait_version) &&
           c->wait_lsn <= omld_replicate_synced_lsn(c->sync_pub);
}

/* Loop thread: the held answers whose view serves (or whose wait is up),
 * in order; the timer runs while any is still held. force: all of them. */
static void deliver_waiting(omld_engine *e, int force)
{
    uint64_t now = omld_now_ns();
    cmd_list keep = {NULL, NULL};
    for (cmd *c = e->waiting.head, *next; c; c = next) {
        next = c->next;
        if (force || answer_due(e, c) || now >= c->wait_until_ns)
            deliver(e, c);
        else
            list_push(&keep, c);
    }
    e->waiting = keep;
    if (!e->wait_timer_open)
        return;
    if (e->waiting.head && !uv_is_active((uv_handle_t *)&e->wait_timer))
        uv_timer_start(&e->wait_timer, on_wait_timer, WAIT_CHECK_MS, WAIT_CHECK_MS);
    else if (!e->waiting.head)
        uv_timer_stop(&e->wait_timer);
}

static void on_wait_timer(uv_timer_t *t)
{
    deliver_waiting(t->data, 0);
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
        c->next = NULL;
        if ((c->wait_version > 0 || c->wait_lsn > 0) && (e->waiting.head || !answer_due(e, c)))
            list_push(&e->waiting, c); /* in order behind any held before */
        else
            deliver(e, c);
        c = next;
    }
    deliver_waiting(e, 0);
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

/* A command of a replica's own (a batch of the primary's log, or its
 * promotion) into the queue, beside the requests. 0 or -1. */
static int push_internal(omld_engine *e, omld_repl_batch *b, struct omld_replicate *promote,
                         omld_engine_done_fn done, void *ctx)
{
    cmd *c = calloc(1, sizeof *c);
    omld_reply *r = calloc(1, sizeof *r);
    pthread_mutex_lock(&e->mu);
    int stopping = e->stopping;
    pthread_mutex_unlock(&e->mu);
    if (c == NULL || r == NULL || stopping) {
        free(c);
        free(r);
        return -1;
    }
    omld_reply_init(r, 0);
    c->batch = b;
    c->promote = promote;
    c->cost = 1;
    c->done = done;
    c->ctx = ctx;
    c->reply = r;
    pthread_mutex_lock(&e->mu);
    list_push(&e->inbox, c);
    e->inbox_cost += c->cost;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}

int omld_engine_follow(omld_engine *e, omld_repl_batch *b, omld_engine_done_fn done, void *ctx)
{
    return push_internal(e, b, NULL, done, ctx);
}

int omld_engine_promote(omld_engine *e, struct omld_replicate *pub, omld_engine_done_fn done,
                        void *ctx)
{
    return push_internal(e, NULL, pub, done, ctx);
}

void omld_engine_set_replicate(omld_engine *e, struct omld_replicate *r)
{
    e->pub = r;
    if (r && e->ckpt_lsn > 0) { /* the recovered checkpoint, for replicas to start from */
        char path[OMLD_STR_MAX + 64];
        snprintf(path, sizeof path, "%s/checkpoint-%016" PRIx64 ".ckpt", e->opts.data_dir,
                 e->ckpt_lsn);
        omld_replicate_checkpoint(r, path, e->ckpt_lsn);
    }
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

omld_models *omld_engine_models(omld_engine *e)
{
    return e->models;
}

const oml_config *omld_engine_config(omld_engine *e)
{
    return &e->model_cfg;
}

int omld_engine_rollback_info(omld_engine *e, char *name, size_t cap)
{
    pthread_mutex_lock(&e->stats_mu);
    int has = e->stats_rb_name[0] != '\0';
    snprintf(name, cap, "%s", e->stats_rb_name);
    pthread_mutex_unlock(&e->stats_mu);
    return has;
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
    if (omld_engine_create(out, opts, metrics, err, errlen) != 0)
        return -1;
    return omld_engine_run(*out, loop, err, errlen);
}

/* The options, the counters and the engine's locks. */
static void init_sync(omld_engine *e, const omld_config *opts, omld_metrics *metrics)
{
    e->opts = *opts;
    e->metrics = metrics;
    e->replica = opts->replica_of[0] != '\0';
    e->capacity = (uint64_t)opts->queue_capacity;
    atomic_init(&e->queued_triplets, 0);
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_mutex_init(&e->out_mu, NULL);
    pthread_mutex_init(&e->stats_mu, NULL);
    /* Writers first: the learner's puts and deletes must not wait behind a
     * stream of readers (queries, index gathers, a trainer's copy), which
     * glibc's default lets overtake a waiting writer forever. No thread
     * takes this lock for reading twice, which the writer preference would
     * deadlock. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&e->lock.rw, &attr);
    pthread_rwlockattr_destroy(&attr);
}

/* The empty state the log is replayed into: store, closure, learner,
 * rehearsal ring and the learner thread's scratch. 0 or -1 with err. */
static int create_state(omld_engine *e, const oml_config *mcfg, char *err, size_t errlen)
{
    const omld_config *opts = &e->opts;
    oml_diag d = {0};
    int rc = oml_store_create(&e->store, (int32_t)opts->dim, (uint32_t)opts->max_items);
    if (rc == OML_OK)
        rc = oml_closure_create(&e->closure, (uint32_t)opts->max_items, CLOSURE_MAX_DIS_EDGES,
                                (uint64_t)opts->seed);
    if (rc == OML_OK)
        rc = oml_learner_create(&e->learner, mcfg, &d);
    e->derived = malloc(DERIVED_PER_PAIR * sizeof *e->derived);
    e->rows = malloc(3 * (size_t)opts->max_batch * sizeof *e->rows);
    e->slots = malloc(3 * (size_t)opts->max_batch * sizeof *e->slots);
    e->weights = malloc((size_t)opts->max_batch * sizeof *e->weights);
    if (rc == OML_OK && (e->derived == NULL || e->rows == NULL || e->slots == NULL ||
                         e->weights == NULL ||
                         oml_replay_init(&e->replay, (uint32_t)mcfg->replay) != OML_OK ||
                         omld_idem_init(&e->idem, (uint32_t)opts->idempotency_keys) != OML_OK))
        rc = OML_ENOMEM;
    if (rc != OML_OK) {
        snprintf(err, errlen, "cannot create the model: %s%s%s", oml_strerror(rc),
                 d.msg[0] ? ": " : "", d.msg);
        return -1;
    }
    e->model_cfg = *mcfg;
    return 0;
}

int omld_engine_create(omld_engine **out, const omld_config *opts, omld_metrics *metrics,
                       char *err, size_t errlen)
{
    oml_config mcfg;
    if (omld_engine_model_config(opts, &mcfg, err, errlen) != 0)
        return -1;
    omld_engine *e = calloc(1, sizeof *e);
    if (e == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    init_sync(e, opts, metrics);
    e->stats.cfg = mcfg;
    snprintf(e->stats.preset, sizeof e->stats.preset, "%.31s", opts->preset);
    if (create_state(e, &mcfg, err, errlen) != 0)
        goto fail;
    /* The durable state: newest checkpoint + the log after it. */
    if (omld_persist_open(e, err, errlen) != 0)
        goto fail;
    e->stats.cfg = e->model_cfg; /* a recovered model's own settings (omld_engine_model_adopt) */
    /* Views published after the checkpoint were numbered from its version
     * on; replicas may serve them. New numbers must not name other models:
     * at most one view was published per record replayed. */
    if (opts->replicate[0])
        e->version += e->replayed;
    e->publish_now = 0; /* replayed promotes: the first view below shows them */
    /* Batch models (data_dir/models) index the recovered store. */
    if (omld_models_create(&e->models, opts->data_dir, &e->model_cfg, e->store, &e->lock) != 0) {
        snprintf(err, errlen, "cannot create %s/models", opts->data_dir);
        goto fail;
    }
    omld_models_load(e->models);
    e->models_gen = e->store_gen;
    if (omld_views_create(&e->views, e->store, &e->lock, metrics, NULL, NULL) == 0) {
        omld_views_set_lists(e->views, (uint64_t)e->opts.ann_min_items,
                             e->opts.ann_target_recall);
        omld_views_set_rerank(e->views, (uint64_t)e->opts.rerank_min_items);
        uint32_t si = 0, sn = 0;
        if (omld_shard_parse(e->opts.shard, &si, &sn, NULL, 0) == 0)
            omld_views_set_shard(e->views, si, sn);
        omld_views_set_duty(e->views, e->opts.index_duty);
        /* Below rerank_min_items every publish rebuilds the index: its
         * builder's buffers stay (at most 128 MiB: rows reserved in powers
         * of two, so up to ~60,000 items of 784 features, heads of 96). */
        omld_views_keep_builder(e->views, (size_t)128 << 20);
        omld_views_keep_projections(e->views, (uint32_t)e->opts.index_cache_items);
        omld_views_set_nice(e->views, (int)e->opts.indexer_nice);
    }
    if (e->views == NULL) {
        snprintf(err, errlen, "cannot start the indexer thread");
        goto fail;
    }
    /* The first view: the recovered model (or the untrained one over an
     * empty store), so queries and /readyz work from the start. */
    oml_snapshot *s = serving_snapshot(e, ++e->version);
    e->published_ns = omld_now_ns();
    atomic_store(&e->metrics->recovery_view_items, oml_store_count(e->store));
    atomic_store(&e->metrics->recovery_step, OMLD_RECOVERY_VIEW);
    /* A recovered model that is not finite is not served (1): the daemon
     * starts, /readyz says why, queries are UNAVAILABLE until a finite view. */
    if (s == NULL || omld_views_publish_now(e->views, s, e->published_ns,
                                           e->opts.first_view_threads > 0
                                               ? (int)e->opts.first_view_threads
                                               : oml_parallel_cores()) < 0) {
        snprintf(err, errlen, "cannot publish the first view");
        goto fail;
    }
    refresh_stats(e);
    *out = e;
    return 0;
fail:
    omld_views_destroy(e->views);
    e->views = NULL;
    omld_engine_destroy(e);
    *out = NULL;
    return -1;
}

int omld_engine_run(omld_engine *e, uv_loop_t *loop, char *err, size_t errlen)
{
    if (uv_async_init(loop, &e->async, on_async) != 0) {
        snprintf(err, errlen, "uv_async_init failed");
        return -1; /* stop + destroy as for an engine that never ran */
    }
    e->async.data = e;
    e->async_open = 1;
    uv_timer_init(loop, &e->wait_timer);
    e->wait_timer.data = e;
    e->wait_timer_open = 1;
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        snprintf(err, errlen, "cannot start the learner thread");
        return -1;
    }
    e->running = 1;
    const oml_config *c = &e->model_cfg;
    LOG_INFO("engine", "model: preset %s, dim %d, L %d, hidden %d, emb %d, eta %g, tau %g, seed %llu",
             e->opts.preset, c->dim, c->layers, c->hidden, c->emb, c->eta, c->tau,
             (unsigned long long)c->seed);
    return 0;
}

void omld_engine_stop(omld_engine *e)
{
    if (e == NULL)
        return;
    /* Queries are drained (main.c): a view built now would serve none,
     * and at 1M the final checkpoint below would run beside its build. */
    omld_views_stop_building(e->views);
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    if (e->running) {
        pthread_join(e->thread, NULL);
        e->running = 0;
    }
    if (e->async_open) {
        on_async(&e->async); /* answers of the last group */
        deliver_waiting(e, 1);
    }
    omld_persist_close(e); /* final checkpoint; the thread has ended */
    omld_views_destroy(e->views);
    e->views = NULL;
    omld_models_destroy(e->models); /* the trainer was stopped before (main.c) */
    e->models = NULL;
    if (e->async_open && !uv_is_closing((uv_handle_t *)&e->async))
        uv_close((uv_handle_t *)&e->async, NULL);
    if (e->wait_timer_open && !uv_is_closing((uv_handle_t *)&e->wait_timer))
        uv_close((uv_handle_t *)&e->wait_timer, NULL);
    e->wait_timer_open = 0;
}

void omld_engine_destroy(omld_engine *e)
{
    if (e == NULL)
        return;
    omld_views_destroy(e->views);
    omld_models_destroy(e->models);
    free(e->rb_buf);
    free(e->promote_log);
    oml_wal_close(e->wal, NULL);
    oml_learner_destroy(e->learner);
    oml_closure_destroy(e->closure);
    oml_store_destroy(e->store);
    free(e->derived);
    free(e->rows);
    free(e->slots);
    free(e->weights);
    oml_replay_free(&e->replay);
    omld_idem_free(&e->idem);
    oml_snapshot_release(e->provisional);
    pthread_rwlock_destroy(&e->lock.rw);
    pthread_mutex_destroy(&e->stats_mu);
    pthread_mutex_destroy(&e->out_mu);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
