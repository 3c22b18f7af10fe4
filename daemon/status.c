/* status.c - GET /status (JSON) and GET /metrics (Prometheus text 0.0.4).
 *
 * Both are pure functions of one omld_status_input, so the two pages always
 * agree. Counters are read once each (relaxed); a histogram is copied into a
 * local snapshot first and its count is the sum of that copy's buckets, so
 * that in the exposition the +Inf bucket always equals _count even while
 * other threads observe. Any thread; no global state. */
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "replay.h"

/* Omld__Status__Code names, index = value (proto/omld.proto). */
static const char *const CODE_NAMES[OMLD_STATUS_CODES] = {
    "OK",          "INVALID_ARGUMENT", "NOT_FOUND",       "WRONG_DIMENSION", "NON_FINITE",
    "RESOURCE_EXHAUSTED", "FRAME_TOO_LARGE", "MALFORMED", "UNAVAILABLE", "INTERNAL",
    "UNAUTHENTICATED", "PERMISSION_DENIED", "CONFLICT",
};

/* A consistent-enough copy of one histogram. */
typedef struct hist_copy {
    uint64_t bucket[OMLD_HIST_BUCKETS];
    uint64_t count;
    double sum_s;
} hist_copy;

static void hist_read(const omld_histogram *h, hist_copy *c)
{
    c->count = 0;
    for (int i = 0; i < OMLD_HIST_BUCKETS; i++) {
        c->bucket[i] = omld_read(&h->bucket[i]);
        c->count += c->bucket[i];
    }
    c->sum_s = (double)omld_read(&h->sum_ns) * 1e-9;
}

static int model_heads(const omld_model_stats *m)
{
    int h = m->heads;
    if (h < 0)
        h = 0;
    if (h > OML_MAX_HEADS)
        h = OML_MAX_HEADS;
    return h;
}

static double ratio(uint64_t num, uint64_t den)
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
static uint64_t checkpoint_age_ms(const omld_status_input *in, const omld_model_stats *m)
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
    int heads = model_heads(m);
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
    omld_json_kv_double(j, "utilisation", ratio(m->utilised, m->updates));
    omld_json_kv_double(j, "accuracy", ratio(m->satisfied, m->updates));
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
    omld_json_kv_uint(j, "lists_from_items", in->cfg ? (uint64_t)in->cfg->ann_min_items : 0);
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
        omld_json_kv_uint(j, CODE_NAMES[c], omld_read(&mt->responses_by_code[c]));
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

/* "persistence": the log, the checkpoints and read-only mode. */
static void json_persistence(omld_json *j, const omld_status_input *in,
                             const omld_model_stats *m)
{
    omld_json_key(j, "persistence");
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "wal_bytes", m->wal_bytes);
    omld_json_kv_uint(j, "records_since_checkpoint", m->wal_records_since_ckpt);
    omld_json_kv_uint(j, "checkpoint_unix_ms", m->ckpt_unix_ms);
    omld_json_kv_uint(j, "checkpoint_age_ms", checkpoint_age_ms(in, m));
    omld_json_kv_uint(j, "checkpoint_duration_ms", m->ckpt_duration_ms);
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
    json_closure(&j, m);
    json_search(&j, in, m);
    json_latency(&j, mt);
    json_rpc(&j, mt);
    json_limits(&j, mt);
    json_auth(&j, mt);
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

/* ---- Prometheus text exposition 0.0.4 ---- */

/* A sample value: integers exactly, doubles shortest, specials by name. */
static void prom_double(omld_buf *b, double v)
{
    if (isnan(v))
        omld_buf_puts(b, "NaN");
    else if (isinf(v))
        omld_buf_puts(b, v > 0 ? "+Inf" : "-Inf");
    else {
        char t[40];
        omld_fmt_double(t, sizeof t, v);
        omld_buf_puts(b, t);
    }
}

static void prom_float(omld_buf *b, float f)
{
    if (!isfinite(f)) {
        prom_double(b, f);
        return;
    }
    char t[40];
    omld_fmt_float(t, sizeof t, f);
    omld_buf_puts(b, t);
}

/* Label value escaping: backslash, double quote and line feed. */
static void prom_label_value(omld_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            omld_buf_puts(b, "\\\\");
        else if (*s == '"')
            omld_buf_puts(b, "\\\"");
        else if (*s == '\n')
            omld_buf_puts(b, "\\n");
        else
            omld_buf_append(b, s, 1);
    }
}

static void family(omld_buf *b, const char *name, const char *type, const char *help)
{
    omld_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The start of a sample line: name, and {label="value"} unless label is NULL. */
static void sample_name(omld_buf *b, const char *name, const char *label, const char *value)
{
    omld_buf_puts(b, name);
    if (label) {
        omld_buf_printf(b, "{%s=\"", label);
        prom_label_value(b, value);
        omld_buf_puts(b, "\"}");
    }
    omld_buf_puts(b, " ");
}

static void sample_u(omld_buf *b, const char *name, const char *label, const char *value,
                     uint64_t v)
{
    sample_name(b, name, label, value);
    omld_buf_printf(b, "%llu\n", (unsigned long long)v);
}

static void sample_d(omld_buf *b, const char *name, const char *label, const char *value,
                     double v)
{
    sample_name(b, name, label, value);
    prom_double(b, v);
    omld_buf_puts(b, "\n");
}

static void sample_f(omld_buf *b, const char *name, const char *label, const char *value,
                     float v)
{
    sample_name(b, name, label, value);
    prom_float(b, v);
    omld_buf_puts(b, "\n");
}

static void counter(omld_buf *b, const char *name, const char *help, uint64_t v)
{
    family(b, name, "counter", help);
    sample_u(b, name, NULL, NULL, v);
}

static void gauge(omld_buf *b, const char *name, const char *help, double v)
{
    family(b, name, "gauge", help);
    sample_d(b, name, NULL, NULL, v);
}

/* The samples of one histogram (the family is declared by the caller);
 * label/value may be NULL. Buckets are cumulative; +Inf equals _count. */
static void hist_samples(omld_buf *b, const char *name, const char *label, const char *value,
                         const omld_histogram *h)
{
    hist_copy c;
    hist_read(h, &c);
    uint64_t cum = 0;
    for (int i = 0; i < OMLD_HIST_BUCKETS; i++) {
        cum += c.bucket[i];
        omld_buf_printf(b, "%s_bucket{", name);
        if (label) {
            omld_buf_printf(b, "%s=\"", label);
            prom_label_value(b, value);
            omld_buf_puts(b, "\",");
        }
        omld_buf_puts(b, "le=\"");
        if (i == OMLD_HIST_BUCKETS - 1)
            omld_buf_puts(b, "+Inf");
        else
            prom_double(b, omld_hist_bound(i));
        omld_buf_printf(b, "\"} %llu\n", (unsigned long long)cum);
    }
    char n[128];
    snprintf(n, sizeof n, "%s_sum", name);
    sample_d(b, n, label, value, c.sum_s);
    snprintf(n, sizeof n, "%s_count", name);
    sample_u(b, n, label, value, c.count);
}

static void histogram(omld_buf *b, const char *name, const char *help, const omld_histogram *h)
{
    family(b, name, "histogram", help);
    hist_samples(b, name, NULL, NULL, h);
}

/* The head of the page: build, uptime, readiness, draining, recovery. */
static void metrics_server(omld_buf *b, const omld_status_input *in, const omld_metrics *mt)
{
    family(b, "omld_build_info", "gauge", "Always 1; the version is the label.");
    sample_u(b, "omld_build_info", "version", in->version ? in->version : "", 1);
    gauge(b, "omld_uptime_seconds", "Seconds since the daemon started.",
          (double)in->uptime_ms / 1e3);
    gauge(b, "omld_ready", "1 once a model view is published and while not draining.",
          in->ready && !in->draining ? 1 : 0);
    gauge(b, "omld_draining", "1 while shutting down.", in->draining ? 1 : 0);
    gauge(b, "omld_recovering",
          "1 while data_dir is recovered at startup (checkpoint + log replay).",
          (double)omld_read(&mt->recovering));
    gauge(b, "omld_recovery_records_replayed",
          "Log records the last recovery replayed (so far, while it runs).",
          (double)omld_read(&mt->recovery_replayed));
}

/* Ingest: items, triplets and pairs received, the learner queue, the store. */
static void metrics_ingest(omld_buf *b, const omld_metrics *mt, const omld_model_stats *m)
{
    counter(b, "omld_items_put_total", "Items stored (created or replaced).",
            omld_read(&mt->items_put));
    counter(b, "omld_items_deleted_total", "Items deleted.", omld_read(&mt->items_deleted));
    counter(b, "omld_triplets_received_total", "Triplets accepted (ids resolved) by the learner.",
            omld_read(&mt->triplets_received));
    counter(b, "omld_triplets_applied_total", "Triplets learned.",
            omld_read(&mt->triplets_applied));
    counter(b, "omld_pairs_received_total", "Similar/dissimilar pairs accepted.",
            omld_read(&mt->pairs_received));
    counter(b, "omld_derived_triplets_total", "Triplets queued because of pairs.",
            omld_read(&mt->derived_triplets));
    counter(b, "omld_backpressure_events_total",
            "Times a connection was paused because the learner queue was full.",
            omld_read(&mt->backpressure_events));
    gauge(b, "omld_queue_depth", "Triplets waiting for the learner.", (double)m->queue_depth);
    gauge(b, "omld_queue_capacity", "Bound of the learner queue.", (double)m->queue_capacity);
    gauge(b, "omld_items", "Live stored items.", (double)m->items);
    gauge(b, "omld_labels", "Distinct labels among stored items.", (double)m->labels);
}

/* The closure of similar/dissimilar facts. */
static void metrics_closure(omld_buf *b, const omld_model_stats *m)
{
    counter(b, "omld_closure_similar_pairs_total", "Similar facts accepted by the closure.",
            m->closure.similar_pairs);
    counter(b, "omld_closure_dissimilar_pairs_total",
            "Dissimilar facts accepted by the closure.", m->closure.dissimilar_pairs);
    counter(b, "omld_closure_conflicts_total", "Pairs refused: they contradicted the closure.",
            m->closure.conflicts);
    gauge(b, "omld_closure_components", "Similarity components with two or more members.",
          (double)m->closure.components);
    gauge(b, "omld_closure_dis_edges", "Dissimilar component pairs.",
          (double)m->closure.dis_edges);
}

/* One gauge family with a sample per head, labelled depth="0".."heads-1". */
static void per_head(omld_buf *b, const char *name, const char *help, const float *v,
                     int heads)
{
    char depth[16];
    family(b, name, "gauge", help);
    for (int i = 0; i < heads; i++) {
        snprintf(depth, sizeof depth, "%d", i);
        sample_f(b, name, "depth", depth, v[i]);
    }
}

/* The online model: updates, accuracy, rehearsal, hedge weights, views. */
static void metrics_model(omld_buf *b, const omld_metrics *mt, const omld_model_stats *m)
{
    int heads = model_heads(m);
    counter(b, "omld_model_updates_total", "Learner steps taken.", m->updates);
    gauge(b, "omld_model_version", "Version of the newest published view (0 before).",
          (double)m->view_version);
    gauge(b, "omld_snapshot_age_seconds", "Age of the serving view's snapshot.",
          (double)m->view_age_ms / 1e3);
    gauge(b, "omld_utilisation", "Share of updates that changed the model.",
          ratio(m->utilised, m->updates));
    gauge(b, "omld_triplet_accuracy",
          "Test-then-train triplet accuracy: share of triplets already satisfied.",
          ratio(m->satisfied, m->updates));
    gauge(b, "omld_triplet_accuracy_recent",
          "Test-then-train triplet accuracy over the newest 1,000 triplets (NaN before any).",
          m->recent_accuracy);
    counter(b, "omld_learner_steps_total", "Optimiser steps (mini-batches) taken.", m->steps);
    counter(b, "omld_learner_steps_skipped_total",
            "Steps refused because a loss or gradient was not finite (weights unchanged).",
            m->skipped);
    counter(b, "omld_triplets_rehearsed_total", "Stored triplets learned again (rehearsal).",
            m->rehearsed);
    gauge(b, "omld_replay_triplets", "Triplets kept for rehearsal.", (double)m->replay_triplets);
    gauge(b, "omld_replay_capacity", "Bound of the rehearsal ring, in triplets.",
          (double)m->replay_capacity);
    per_head(b, "omld_hedge_weight", "Hedge weight alpha of each head, by depth.", m->alpha,
             heads);
    per_head(b, "omld_head_loss_ema", "Moving average of each head's loss, by depth.",
             m->loss_ema, heads);
    counter(b, "omld_views_published_total", "Serving views swapped in.",
            omld_read(&mt->views_published));
    counter(b, "omld_views_refused_total",
            "Views built but not served: their model or embeddings were not finite.",
            omld_read(&mt->views_refused));
}

/* Persistence: the log, the checkpoints and read-only mode. */
static void metrics_persistence(omld_buf *b, const omld_status_input *in,
                                const omld_model_stats *m)
{
    gauge(b, "omld_wal_bytes", "Bytes of write-ahead log segments on disk.",
          (double)m->wal_bytes);
    gauge(b, "omld_wal_records_since_checkpoint",
          "Log records the newest checkpoint does not hold (a restart replays them).",
          (double)m->wal_records_since_ckpt);
    gauge(b, "omld_checkpoint_timestamp_seconds",
          "Unix time of the newest checkpoint; 0: none yet.", (double)m->ckpt_unix_ms / 1e3);
    gauge(b, "omld_checkpoint_age_seconds",
          "Seconds since the newest checkpoint (since the start when there is none).",
          (double)checkpoint_age_ms(in, m) / 1e3);
    gauge(b, "omld_checkpoint_duration_seconds", "How long the last checkpoint written took.",
          (double)m->ckpt_duration_ms / 1e3);
    counter(b, "omld_checkpoints_written_total", "Checkpoints written since the start.",
            m->ckpt_written);
    counter(b, "omld_checkpoints_failed_total",
            "Checkpoints that failed since the start (the log keeps everything).",
            m->ckpt_failed);
    gauge(b, "omld_read_only",
          "1 while the write-ahead log cannot be written (disk full, I/O error): changes are "
          "refused, reads served.", m->read_only ? 1 : 0);
}

/* The process, under the standard names of Prometheus client libraries
 * (only when main.c could read /proc/self). */
static void metrics_process(omld_buf *b, const omld_status_input *in)
{
    if (!in->have_process)
        return;
    gauge(b, "process_resident_memory_bytes", "Resident memory size in bytes.",
          (double)in->rss_bytes);
    gauge(b, "process_open_fds", "Open file descriptors.", (double)in->open_fds);
    family(b, "process_cpu_seconds_total", "counter",
           "User and system CPU time spent, in seconds.");
    sample_d(b, "process_cpu_seconds_total", NULL, NULL, in->cpu_seconds);
    gauge(b, "process_start_time_seconds", "Start time of the process since the epoch.",
          in->start_unix_seconds);
}

/* RPC requests and connections: responses by code, queries by kind,
 * connections, frames. */
/* The serving index's search: its inverted lists and the recall of the
 * sampled queries against a full scan. */
static void metrics_search(omld_buf *b, const omld_metrics *mt, const omld_model_stats *m)
{
    gauge(b, "omld_search_lists", "Inverted lists of the serving index (0: every query "
          "scans every item).", (double)m->view_lists);
    counter(b, "omld_search_recall_hits_total", "Of the exact k nearest items per head of a "
            "sample of queries (a full scan), those the lists' search found.",
            omld_read(&mt->ann_recall_hits));
    counter(b, "omld_search_recall_checked_total", "The exact k nearest items per head of "
            "that sample.", omld_read(&mt->ann_recall_total));
    gauge(b, "omld_search_recall", "Recall of the serving index's search on its sampled "
          "queries (1 when it scans every item or none was sampled yet).",
          m->view_recall_total ? (double)m->view_recall_hits / (double)m->view_recall_total
                               : 1.0);
}

static void metrics_rpc(omld_buf *b, const omld_metrics *mt)
{
    family(b, "omld_requests_total", "counter", "RPC responses sent, by status code.");
    for (int c = 0; c < OMLD_STATUS_CODES; c++)
        sample_u(b, "omld_requests_total", "code", CODE_NAMES[c],
                 omld_read(&mt->responses_by_code[c]));
    family(b, "omld_queries_total", "counter", "Read requests, by kind.");
    for (int k = 0; k < OMLD_Q_KINDS; k++)
        sample_u(b, "omld_queries_total", "kind", omld_query_kind_name(k),
                 omld_read(&mt->queries[k]));
    counter(b, "omld_connections_accepted_total", "RPC connections accepted.",
            omld_read(&mt->connections_accepted));
    counter(b, "omld_connections_refused_total", "RPC connections refused (over the limit).",
            omld_read(&mt->connections_refused));
    int64_t open = atomic_load_explicit(&mt->connections_open, memory_order_relaxed);
    gauge(b, "omld_connections_open", "RPC connections open.", (double)(open < 0 ? 0 : open));
    counter(b, "omld_frames_too_large_total", "Frames refused for exceeding max_frame_bytes.",
            omld_read(&mt->frames_too_large));
    counter(b, "omld_frames_malformed_total", "Frames whose payload was not a Request.",
            omld_read(&mt->frames_malformed));
}

/* Refusals, pauses and drops, by the limit (option) that caused them. */
static void metrics_limits(omld_buf *b, const omld_metrics *mt)
{
    family(b, "omld_limit_events_total", "counter",
           "Refusals, pauses and drops by a configured limit, by limit.");
    const struct { const char *name; const atomic_uint_fast64_t *v; } lim[] = {
        {"max_frame_bytes", &mt->frames_too_large},
        {"max_batch", &mt->batch_too_large},
        {"max_k", &mt->k_too_large},
        {"max_connections", &mt->connections_refused},
        {"max_conn_input_bytes", &mt->input_paused},
        {"max_conn_output_bytes", &mt->output_paused},
        {"idle_timeout_ms", &mt->idle_closed},
        {"request_timeout_ms", &mt->slow_dropped},
        {"write_stalled", &mt->write_stalled},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        sample_u(b, "omld_limit_events_total", "limit", lim[i].name, omld_read(lim[i].v));
}

/* Authorisation outcomes and the number of configured tokens. */
static void metrics_auth(omld_buf *b, const omld_metrics *mt)
{
    family(b, "omld_auth_total", "counter",
           "Authorisation outcomes: ok / failed Auth requests, requests refused "
           "unauthenticated or permission_denied, HTTP 401s.");
    const struct { const char *name; const atomic_uint_fast64_t *v; } au[] = {
        {"ok", &mt->auth_ok},
        {"failed", &mt->auth_failed},
        {"unauthenticated", &mt->unauthenticated},
        {"permission_denied", &mt->permission_denied},
        {"http_unauthorized", &mt->http_unauthorized},
    };
    for (size_t i = 0; i < sizeof au / sizeof au[0]; i++)
        sample_u(b, "omld_auth_total", "result", au[i].name, omld_read(au[i].v));
    gauge(b, "omld_auth_tokens", "Configured tokens (read-write + read-only); 0: no auth.",
          (double)(omld_read(&mt->tokens_rw) + omld_read(&mt->tokens_ro)));
}

/* Latency histograms: learner step, mutation, query by kind, index build. */
static void metrics_latency(omld_buf *b, const omld_metrics *mt)
{
    histogram(b, "omld_update_duration_seconds", "One learner step.", &mt->update_latency);
    histogram(b, "omld_ingest_duration_seconds",
              "Mutation requests, decoded to acknowledged.", &mt->ingest_latency);
    family(b, "omld_query_duration_seconds", "histogram",
           "Read requests, decoded to answered, by kind.");
    for (int k = 0; k < OMLD_Q_KINDS; k++)
        hist_samples(b, "omld_query_duration_seconds", "kind", omld_query_kind_name(k),
                     &mt->query_latency[k]);
    histogram(b, "omld_index_build_duration_seconds", "Building the index of one view.",
              &mt->index_build_latency);
}

/* The batch trainer: jobs by state, progress of the unfinished ones, models. */
static void metrics_trainer(omld_buf *b, const omld_status_input *in)
{
    family(b, "omld_trainer_jobs", "gauge",
           "Trainer jobs remembered, by state (finished ones: the newest few).");
    for (int st = OMLD_JOB_QUEUED; st <= OMLD_JOB_CANCELLED; st++) {
        uint64_t c = 0;
        for (int i = 0; i < in->n_jobs; i++)
            c += in->jobs[i].state == st;
        sample_u(b, "omld_trainer_jobs", "state", omld_job_state_name(st), c);
    }
    family(b, "omld_trainer_job_progress", "gauge",
           "Share (0..1) of its step budget a queued or running job has done.");
    for (int i = 0; i < in->n_jobs; i++) {
        if (in->jobs[i].state > OMLD_JOB_RUNNING)
            continue;
        char id[32];
        snprintf(id, sizeof id, "%llu", (unsigned long long)in->jobs[i].id);
        sample_d(b, "omld_trainer_job_progress", "job", id, in->jobs[i].progress);
    }
    gauge(b, "omld_models", "Named batch models served.", (double)in->n_models);
}

char *omld_metrics_text(const omld_status_input *in, size_t *len)
{
    static const omld_metrics zero_metrics;
    static const omld_model_stats zero_model;
    const omld_metrics *mt = in->metrics ? in->metrics : &zero_metrics;
    const omld_model_stats *m = in->model ? in->model : &zero_model;
    omld_buf b;
    omld_buf_init(&b);
    metrics_server(&b, in, mt);
    metrics_ingest(&b, mt, m);
    metrics_closure(&b, m);
    metrics_model(&b, mt, m);
    metrics_persistence(&b, in, m);
    metrics_process(&b, in);
    metrics_rpc(&b, mt);
    metrics_search(&b, mt, m);
    metrics_limits(&b, mt);
    metrics_auth(&b, mt);
    metrics_latency(&b, mt);
    metrics_trainer(&b, in);
    return omld_buf_take(&b, len);
}
