/* status.c - GET /status (JSON), and what it shares with GET /metrics
 * (metrics_text.c): status code names, heads, ratios, checkpoint age.
 *
 * Both pages are pure functions of one omld_status_input, so they always
 * agree. Counters are read once each (relaxed). Any thread; no global
 * state. */
#include "ingest.h"
#include "replication.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "depth.h"
#include "json.h"
#include "status_int.h"
#include "replay.h"

/* Omld__Status__Code names, index = value (proto/omld.proto). */
const char *const omld_code_names[OMLD_STATUS_CODES] = {
    "OK",          "INVALID_ARGUMENT", "NOT_FOUND",       "WRONG_DIMENSION", "NON_FINITE",
    "RESOURCE_EXHAUSTED", "FRAME_TOO_LARGE", "MALFORMED", "UNAVAILABLE", "INTERNAL",
    "UNAUTHENTICATED", "PERMISSION_DENIED", "CONFLICT", "NOT_PRIMARY",
};

int omld_status_heads(const omld_model_stats *m)
{
    int h = m->heads;
    if (h < 0)
        h = 0;
    if (h > OML_MAX_HEADS)
        h = OML_MAX_HEADS;
    return h;
}

double omld_status_ratio(uint64_t num, uint64_t den)
{
    return den ? (double)num / (double)den : 0.0;
}

/* ---- JSON ---- */

/* A model option left to the preset is -1 (integers) or NaN (reals) in
 * omld_config; both are written as null ("the preset's value"). */
static void kv_opt_int(omld_json *j, const char *key, int64_t v)
{
    omld_json_key(j, key);
    if (v < 0)
        omld_json_null(j);
    else
        omld_json_int(j, v);
}

static void json_config(omld_json *j, const omld_config *c)
{
    omld_json_key(j, "config");
    if (!c) {
        omld_json_null(j);
        return;
    }
    omld_json_object_begin(j);
    omld_json_kv_string(j, "listen", c->listen);
    omld_json_kv_string(j, "http", c->http);
    omld_json_kv_string(j, "data_dir", c->data_dir);
    omld_json_kv_string(j, "preset", c->preset);
    kv_opt_int(j, "dim", c->dim);
    kv_opt_int(j, "layers", c->layers);
    kv_opt_int(j, "hidden", c->hidden);
    kv_opt_int(j, "emb", c->emb);
    omld_json_kv_double(j, "eta", c->eta);
    omld_json_kv_double(j, "tau", c->tau);
    omld_json_kv_double(j, "beta", c->beta);
    omld_json_kv_double(j, "s", c->s);
    omld_json_kv_int(j, "seed", c->seed);
    omld_json_kv_int(j, "queue_capacity", c->queue_capacity);
    omld_json_kv_int(j, "publish_every", c->publish_every);
    omld_json_kv_int(j, "publish_ms", c->publish_ms);
    omld_json_kv_int(j, "max_frame_bytes", c->max_frame_bytes);
    omld_json_kv_int(j, "max_batch", c->max_batch);
    omld_json_kv_int(j, "max_connections", c->max_connections);
    omld_json_kv_int(j, "max_k", c->max_k);
    omld_json_kv_int(j, "max_pipeline", c->max_pipeline);
    omld_json_kv_int(j, "max_conn_input_bytes", c->max_conn_input_bytes);
    omld_json_kv_int(j, "max_conn_output_bytes", c->max_conn_output_bytes);
    omld_json_kv_int(j, "idle_timeout_ms", c->idle_timeout_ms);
    omld_json_kv_int(j, "request_timeout_ms", c->request_timeout_ms);
    omld_json_kv_int(j, "min_request_rate", c->min_request_rate);
    omld_json_object_end(j); /* tokens: never shown; see "auth" for how many */
}

/* Age of the newest checkpoint, or of the process when there is none. */
uint64_t omld_checkpoint_age_ms(const omld_status_input *in, const omld_model_stats *m)
{
    if (m->ckpt_unix_ms == 0 || in->now_unix_ms == 0)
        return in->uptime_ms;
    return in->now_unix_ms > m->ckpt_unix_ms ? in->now_unix_ms - m->ckpt_unix_ms : 0;
}

static void json_model(omld_json *j, const omld_model_stats *m)
{
    omld_json_key(j, "model");
    if (!m) {
        omld_json_null(j);
        return;
    }
    int heads = omld_status_heads(m);
    omld_json_object_begin(j);
    omld_json_kv_string(j, "preset", m->preset);
    omld_json_kv_int(j, "dim", m->cfg.dim);
    omld_json_kv_int(j, "layers", m->cfg.layers);
    omld_json_kv_int(j, "heads", heads);
    omld_json_kv_int(j, "hidden", m->cfg.hidden);
    omld_json_kv_int(j, "emb", m->cfg.emb);
    omld_json_kv_float(j, "eta", m->cfg.eta);
    omld_json_kv_float(j, "tau", m->cfg.tau);
    omld_json_kv_float(j, "beta", m->cfg.beta);
    omld_json_kv_float(j, "s", m->cfg.s);
    omld_json_kv_bool(j, "prepared", m->prepared);
    /* Which start the model took, and for the auto start the leave-one-out
     * kNN errors on the labelled stored items that chose it. */
    omld_json_key(j, "start");
    omld_json_object_begin(j);
    omld_json_kv_string(j, "taken", m->prepared ? oml_init_name(m->start_init) : "none");
    omld_json_kv_float(j, "loo_error_standardised", m->start_error[0]);
    omld_json_kv_float(j, "loo_error_whitened", m->start_error[1]);
    omld_json_object_end(j);
    omld_json_key(j, "alpha");
    omld_json_array_begin(j);
    for (int i = 0; i < heads; i++)
        omld_json_float(j, m->alpha[i]);
    omld_json_array_end(j);
    omld_json_key(j, "loss_ema");
    omld_json_array_begin(j);
    for (int i = 0; i < heads; i++)
        omld_json_float(j, m->loss_ema[i]);
    omld_json_array_end(j);
    omld_json_kv_uint(j, "updates", m->updates);
    omld_json_kv_double(j, "utilisation", omld_status_ratio(m->utilised, m->updates));
    omld_json_kv_double(j, "accuracy", omld_status_ratio(m->satisfied, m->updates));
    omld_json_kv_double(j, "recent_accuracy", m->recent_accuracy);
    omld_json_kv_uint(j, "recent_window", m->recent_n);
    omld_json_kv_uint(j, "steps", m->steps);
    omld_json_kv_uint(j, "steps_skipped", m->skipped);
    omld_json_kv_uint(j, "rehearsed", m->rehearsed);
    omld_json_key(j, "replay");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "triplets", m->replay_triplets);
    omld_json_kv_uint(j, "capacity", m->replay_capacity);
    omld_json_kv_uint(j, "bytes", m->replay_capacity * OML_REPLAY_BYTES);
    omld_json_object_end(j);
    omld_json_kv_uint(j, "version", m->view_version);
    omld_json_kv_uint(j, "snapshot_age_ms", m->view_age_ms);
    omld_json_kv_uint(j, "view_items", m->view_items);
    omld_json_kv_uint(j, "view_updates", m->view_updates);
    omld_json_kv_uint(j, "items", m->items);
    omld_json_kv_uint(j, "labels", m->labels);
    omld_json_object_end(j);
}

static void json_jobs(omld_json *j, const omld_status_input *in)
{
    omld_json_key(j, "jobs");
    omld_json_array_begin(j);
    for (int i = 0; i < in->n_jobs; i++) {
        const omld_job_info *b = &in->jobs[i];
        omld_json_object_begin(j);
        omld_json_kv_uint(j, "id", b->id);
        omld_json_kv_string(j, "method", b->method);
        omld_json_kv_string(j, "kind", b->method); /* the dashboard's "kind" column */
        if (b->variant[0])
            omld_json_kv_string(j, "variant", b->variant);
        omld_json_kv_string(j, "state", omld_job_state_name(b->state));
        omld_json_kv_double(j, "progress", b->progress);
        omld_json_kv_int(j, "epoch", b->epoch);
        omld_json_kv_int(j, "epochs", b->epochs);
        omld_json_kv_int(j, "step", b->step);
        omld_json_kv_double(j, "loss", b->loss);
        omld_json_kv_double(j, "val_r1", b->val_r1);
        omld_json_kv_double(j, "eta_s", b->eta_s >= 0 ? b->eta_s : NAN);
        omld_json_kv_double(j, "elapsed_s", b->elapsed_s);
        omld_json_kv_uint(j, "items", b->items);
        omld_json_kv_string(j, "model", b->model);
        if (b->error[0])
            omld_json_kv_string(j, "error", b->error);
        omld_json_object_end(j);
    }
    omld_json_array_end(j);
    omld_json_key(j, "models");
    omld_json_array_begin(j);
    for (int i = 0; i < in->n_models; i++) {
        const omld_model_info *m = &in->models[i];
        omld_json_object_begin(j);
        omld_json_kv_string(j, "name", m->name);
        omld_json_kv_string(j, "method", m->method);
        omld_json_kv_int(j, "depth", m->depth);
        omld_json_kv_uint(j, "created_ms", m->created_ms);
        omld_json_kv_float(j, "val_r1", m->val_r1);
        omld_json_kv_uint(j, "items_indexed", m->items_indexed);
        omld_json_kv_uint(j, "trained_items", m->trained_items);
        omld_json_object_end(j);
    }
    omld_json_array_end(j);
    omld_json_key(j, "rollback");
    omld_json_string(j, in->rollback); /* the promoted model a Rollback undoes, or null */
    omld_json_key(j, "promotes"); /* oldest first: the dashboard keeps showing them */
    omld_json_array_begin(j);
    for (int i = 0; i < in->n_promotes; i++) {
        const omld_promote_event *p = &in->promotes[i];
        omld_json_object_begin(j);
        omld_json_kv_uint(j, "unix_ms", p->unix_ms);
        omld_json_kv_string(j, "action", p->rollback ? "rollback" : "promote");
        omld_json_kv_string(j, "model", p->model);
        omld_json_kv_uint(j, "version", p->version);
        omld_json_object_end(j);
    }
    omld_json_array_end(j);
}

/* "redis_ingest": the Redis Stream consumer (ingest.h), when configured. */
static void json_redis_ingest(omld_json *j, const omld_ingest_stats *g)
{
    if (g == NULL || !g->configured)
        return;
    omld_json_key(j, "redis_ingest");
    omld_json_object_begin(j);
    omld_json_kv_bool(j, "connected", g->connected);
    omld_json_kv_string(j, "stream", g->stream);
    omld_json_kv_string(j, "group", g->group);
    omld_json_kv_string(j, "consumer", g->consumer);
    omld_json_kv_string(j, "dead_letter", g->dead_letter);
    omld_json_kv_uint(j, "entries_read", g->entries_read);
    omld_json_kv_uint(j, "entries_learned", g->entries_learned);
    omld_json_kv_uint(j, "entries_dead", g->entries_dead);
    omld_json_kv_uint(j, "retries", g->retries);
    omld_json_kv_int(j, "pending", g->pending);
    omld_json_kv_int(j, "lag", g->lag);
    omld_json_kv_string(j, "last_error", g->last_error);
    omld_json_object_end(j);
}

/* "replication": a primary publishing to Redis, or a read replica. */
static void json_replication(omld_json *j, const omld_repl_stats *g)
{
    if (g == NULL || g->role == OMLD_REPL_NONE)
        return;
    omld_json_key(j, "replication");
    omld_json_object_begin(j);
    omld_json_kv_string(j, "role", g->role == OMLD_REPL_PRIMARY ? "primary" : "replica");
    omld_json_kv_string(j, "redis", g->target);
    omld_json_kv_bool(j, "connected", g->connected);
    if (g->role == OMLD_REPL_PRIMARY) {
        omld_json_kv_uint(j, "records_published", g->records_published);
        omld_json_kv_uint(j, "records_dropped", g->records_dropped);
        omld_json_kv_uint(j, "versions_published", g->versions_published);
        omld_json_kv_uint(j, "checkpoints_published", g->checkpoints_published);
        omld_json_kv_uint(j, "queue_bytes", g->queue_bytes);
        omld_json_kv_string(j, "lease", g->lease == OMLD_REPL_LEASE_HELD ? "held"
                            : g->lease == OMLD_REPL_LEASE_NOT_HELD ? "not held" : "none");
        omld_json_kv_string(j, "node_id", g->node_id);
        if (g->promoted_lsn)
            omld_json_kv_uint(j, "promoted_at_lsn", g->promoted_lsn);
    } else {
        omld_json_kv_string(j, "primary", g->primary);
        omld_json_kv_bool(j, "bootstrapped", g->bootstrapped);
        omld_json_kv_uint(j, "bootstraps", g->bootstraps);
        omld_json_kv_uint(j, "applied_lsn", g->applied_lsn);
        omld_json_kv_uint(j, "head_lsn", g->head_lsn);
        omld_json_kv_uint(j, "lag_records", g->lag_records);
        omld_json_kv_double(j, "lag_seconds", g->lag_seconds);
        omld_json_kv_uint(j, "records_applied", g->records_applied);
        omld_json_kv_double(j, "apply_delay_seconds", g->apply_delay_seconds);
    }
    omld_json_kv_string(j, "last_error", g->last_error);
    omld_json_object_end(j);
}

/* "ingest": what was put, deleted and sent for learning, and the queue. */
static void json_ingest(omld_json *j, const omld_metrics *mt, const omld_model_stats *m)
{
    omld_json_key(j, "ingest");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "items_put", omld_read(&mt->items_put));
    omld_json_kv_uint(j, "items_deleted", omld_read(&mt->items_deleted));
    omld_json_kv_uint(j, "triplets_received", omld_read(&mt->triplets_received));
    omld_json_kv_uint(j, "triplets_applied", omld_read(&mt->triplets_applied));
    omld_json_kv_uint(j, "triplets_queued", m->queue_depth);
    omld_json_kv_uint(j, "pairs_received", omld_read(&mt->pairs_received));
    omld_json_kv_uint(j, "derived_triplets", omld_read(&mt->derived_triplets));
    omld_json_kv_uint(j, "queue_depth", m->queue_depth);
    omld_json_kv_uint(j, "queue_capacity", m->queue_capacity);
    omld_json_kv_uint(j, "backpressure_events", omld_read(&mt->backpressure_events));
    omld_json_kv_uint(j, "duplicates", omld_read(&mt->duplicates));
    omld_json_object_end(j);
}

/* "closure": the similar/dissimilar facts and what they imply. */
static void json_closure(omld_json *j, const omld_model_stats *m)
{
    omld_json_key(j, "closure");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "similar_pairs", m->closure.similar_pairs);
    omld_json_kv_uint(j, "dissimilar_pairs", m->closure.dissimilar_pairs);
    omld_json_kv_uint(j, "conflicts", m->closure.conflicts);
    omld_json_kv_uint(j, "components", m->closure.components);
    omld_json_kv_uint(j, "dis_edges", m->closure.dis_edges);
    omld_json_object_end(j);
}

/* The serving index's search: every item, or the nearest inverted lists
 * with the recall of a sample of queries against a full scan (null until
 * one was checked; NaN is written as null). */
static void json_search(omld_json *j, const omld_status_input *in, const omld_model_stats *m)
{
    omld_json_key(j, "search");
    omld_json_object_begin(j);
    omld_json_kv_string(j, "mode", m->view_lists > 0 ? "lists" : "exact");
    omld_json_kv_uint(j, "lists", m->view_lists);
    omld_json_kv_uint(j, "lists_scanned", m->view_lists_scanned);
    omld_json_kv_uint(j, "lists_from_items", in->cfg ? (uint64_t)in->cfg->ann_min_items : 0);
    /* A view serving a newer model than its index's re-ranks the index's
     * candidates under it (index_version < the serving version). */
    omld_json_kv_bool(j, "rerank", m->view_index_version < m->view_version);
    /* (an index with lists has 64 rows or more: no floats means dropped) */
    omld_json_kv_bool(j, "float_columns", m->view_lists == 0 || m->view_float_bytes > 0);
    omld_json_kv_bool(j, "coded_lists", m->view_coded_lists);
    omld_json_kv_uint(j, "index_version", m->view_index_version);
    omld_json_kv_uint(j, "rerank_from_items",
                      in->cfg ? (uint64_t)in->cfg->rerank_min_items : 0);
    if (in->metrics) { /* single classify requests answered together (coalesce.c) */
        omld_json_kv_uint(j, "query_groups", omld_read(&in->metrics->query_groups));
        omld_json_kv_uint(j, "queries_grouped", omld_read(&in->metrics->queries_grouped));
    }
    /* How deep a fresh view's candidates go for its index's lag (depth.h):
     * a head's for a query of 10, and the share of the depth sample's
     * neighbours that depth holds. */
    omld_json_kv_uint(j, "rerank_candidates",
                      in->cfg ? (uint64_t)omld_depth_at((int)m->view_depth_step,
                                                        (int32_t)in->cfg->rerank_candidates)
                              : 0);
    omld_json_kv_uint(j, "rerank_depth_samples", m->view_depth_samples);
    omld_json_kv_double(j, "rerank_depth_share", m->view_depth_share);
    omld_json_kv_uint(j, "recall_checked", m->view_recall_total);
    omld_json_kv_double(j, "recall", m->view_recall_total > 0
                                         ? (double)m->view_recall_hits /
                                               (double)m->view_recall_total
                                         : NAN);
    omld_json_object_end(j);
}

/* key: {"count", "p50_ms", "p99_ms"}: one operation's count and latency. */
static void json_count_latency(omld_json *j, const char *key, uint64_t count,
                               const omld_histogram *h)
{
    omld_json_key(j, key);
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "count", count);
    omld_json_kv_double(j, "p50_ms", omld_hist_quantile(h, 0.5) * 1e3);
    omld_json_kv_double(j, "p99_ms", omld_hist_quantile(h, 0.99) * 1e3);
    omld_json_object_end(j);
}

/* "queries" (read requests by kind) and "latency" (learner, ingest, index). */
static void json_latency(omld_json *j, const omld_metrics *mt)
{
    omld_json_key(j, "queries");
    omld_json_object_begin(j);
    for (int k = 0; k < OMLD_Q_KINDS; k++)
        json_count_latency(j, omld_query_kind_name(k), omld_read(&mt->queries[k]),
                           &mt->query_latency[k]);
    omld_json_object_end(j);

    omld_json_key(j, "latency");
    omld_json_object_begin(j);
    const struct { const char *name; const omld_histogram *h; } lat[] = {
        {"update", &mt->update_latency},
        {"ingest", &mt->ingest_latency},
        {"index_build", &mt->index_build_latency},
    };
    for (size_t i = 0; i < sizeof lat / sizeof lat[0]; i++)
        json_count_latency(j, lat[i].name, omld_read(&lat[i].h->count), lat[i].h);
    omld_json_object_end(j);
}

/* "requests", "connections" and "frames": the RPC side. */
static void json_rpc(omld_json *j, const omld_metrics *mt)
{
    omld_json_key(j, "requests");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "total", omld_read(&mt->requests));
    omld_json_key(j, "by_code");
    omld_json_object_begin(j);
    for (int c = 0; c < OMLD_STATUS_CODES; c++)
        omld_json_kv_uint(j, omld_code_names[c], omld_read(&mt->responses_by_code[c]));
    omld_json_object_end(j);
    omld_json_object_end(j);

    omld_json_key(j, "connections");
    omld_json_object_begin(j);
    int64_t open = atomic_load_explicit(&mt->connections_open, memory_order_relaxed);
    omld_json_kv_int(j, "open", open < 0 ? 0 : open);
    omld_json_kv_uint(j, "accepted", omld_read(&mt->connections_accepted));
    omld_json_kv_uint(j, "refused", omld_read(&mt->connections_refused));
    omld_json_object_end(j);

    omld_json_key(j, "frames");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "too_large", omld_read(&mt->frames_too_large));
    omld_json_kv_uint(j, "malformed", omld_read(&mt->frames_malformed));
    omld_json_object_end(j);
}

/* "limits": every refusal or drop by a limit (each is also logged with the peer). */
static void json_limits(omld_json *j, const omld_metrics *mt)
{
    omld_json_key(j, "limits");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "frames_too_large", omld_read(&mt->frames_too_large));
    omld_json_kv_uint(j, "batch_too_large", omld_read(&mt->batch_too_large));
    omld_json_kv_uint(j, "k_too_large", omld_read(&mt->k_too_large));
    omld_json_kv_uint(j, "connections_refused", omld_read(&mt->connections_refused));
    omld_json_kv_uint(j, "input_paused", omld_read(&mt->input_paused));
    omld_json_kv_uint(j, "output_paused", omld_read(&mt->output_paused));
    omld_json_kv_uint(j, "idle_closed", omld_read(&mt->idle_closed));
    omld_json_kv_uint(j, "slow_dropped", omld_read(&mt->slow_dropped));
    omld_json_kv_uint(j, "write_stalled", omld_read(&mt->write_stalled));
    omld_json_object_end(j);
}

/* "auth": whether tokens are required, how many, and the outcomes. */
static void json_auth(omld_json *j, const omld_metrics *mt)
{
    omld_json_key(j, "auth");
    omld_json_object_begin(j);
    uint64_t trw = omld_read(&mt->tokens_rw), tro = omld_read(&mt->tokens_ro);
    omld_json_kv_bool(j, "required", trw + tro > 0);
    omld_json_kv_uint(j, "tokens_rw", trw);
    omld_json_kv_uint(j, "tokens_ro", tro);
    omld_json_kv_uint(j, "ok", omld_read(&mt->auth_ok));
    omld_json_kv_uint(j, "failed", omld_read(&mt->auth_failed));
    omld_json_kv_uint(j, "unauthenticated", omld_read(&mt->unauthenticated));
    omld_json_kv_uint(j, "permission_denied", omld_read(&mt->permission_denied));
    omld_json_kv_uint(j, "http_unauthorized", omld_read(&mt->http_unauthorized));
    omld_json_object_end(j);
}

/* "tls": whether both ports speak TLS, and the handshakes' outcomes. */
static void json_tls(omld_json *j, const omld_metrics *mt)
{
    omld_json_key(j, "tls");
    omld_json_object_begin(j);
    omld_json_kv_bool(j, "enabled", omld_read(&mt->tls_on) != 0);
    omld_json_kv_uint(j, "handshakes", omld_read(&mt->tls_handshakes));
    omld_json_kv_uint(j, "failed", omld_read(&mt->tls_failed));
    omld_json_kv_uint(j, "plaintext", omld_read(&mt->tls_plaintext));
    omld_json_object_end(j);
}

/* "persistence": the log, the checkpoints and read-only mode. */
static void json_persistence(omld_json *j, const omld_status_input *in,
                             const omld_model_stats *m)
{
    omld_json_key(j, "persistence");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "wal_bytes", m->wal_bytes);
    omld_json_kv_uint(j, "records_since_checkpoint", m->wal_records_since_ckpt);
    omld_json_kv_uint(j, "checkpoint_unix_ms", m->ckpt_unix_ms);
    omld_json_kv_uint(j, "checkpoint_age_ms", omld_checkpoint_age_ms(in, m));
    omld_json_kv_uint(j, "checkpoint_duration_ms", m->ckpt_duration_ms);
    omld_json_kv_uint(j, "checkpoint_pause_ms", m->ckpt_pause_ms);
    omld_json_kv_uint(j, "checkpoints_written", m->ckpt_written);
    omld_json_kv_uint(j, "checkpoints_failed", m->ckpt_failed);
    omld_json_kv_bool(j, "read_only", m->read_only);
    if (m->read_only)
        omld_json_kv_string(j, "read_only_why", m->read_only_why);
    omld_json_object_end(j);
}

char *omld_status_json(const omld_status_input *in, size_t *len)
{
    static const omld_metrics zero_metrics;
    static const omld_model_stats zero_model;
    const omld_metrics *mt = in->metrics ? in->metrics : &zero_metrics;
    const omld_model_stats *m = in->model ? in->model : &zero_model;
    omld_json j;
    omld_json_init(&j);
    omld_json_object_begin(&j);
    omld_json_kv_string(&j, "version", in->version ? in->version : "");
    omld_json_kv_uint(&j, "uptime_ms", in->uptime_ms);
    json_config(&j, in->cfg);
    json_model(&j, in->model);
    json_ingest(&j, mt, m);
    json_redis_ingest(&j, in->ingest);
    json_replication(&j, in->replication);
    json_closure(&j, m);
    json_search(&j, in, m);
    json_latency(&j, mt);
    json_rpc(&j, mt);
    json_limits(&j, mt);
    json_auth(&j, mt);
    json_tls(&j, mt);
    json_persistence(&j, in, m);
    json_jobs(&j, in);
    omld_json_kv_uint(&j, "views_published", omld_read(&mt->views_published));
    omld_json_kv_uint(&j, "views_refused", omld_read(&mt->views_refused));
    omld_json_kv_bool(&j, "ready", in->ready);
    if (in->not_ready && in->not_ready[0])
        omld_json_kv_string(&j, "not_ready", in->not_ready);
    omld_json_kv_bool(&j, "draining", in->draining);
    omld_json_object_end(&j);

    size_t n = 0;
    char *text = omld_json_finish(&j, &n);
    if (!text)
        return NULL;
    omld_buf b = {.data = text, .len = n, .cap = n + 1}; /* plus a newline for curl users */
    omld_buf_append(&b, "\n", 1);
    return omld_buf_take(&b, len);
}

