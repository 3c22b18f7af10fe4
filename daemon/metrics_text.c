/* metrics_text.c - GET /metrics: Prometheus text exposition 0.0.4 (see
 * status.h).
 *
 * A pure function of one omld_status_input, like /status (status.c). A
 * histogram is copied into a local snapshot first and its count is the sum
 * of that copy's buckets, so that the +Inf bucket always equals _count even
 * while other threads observe. Any thread; no global state. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "depth.h"
#include "ingest.h"
#include "replication.h"
#include "json.h" /* omld_buf */
#include "replay.h"
#include "status.h"
#include "status_int.h"

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

/* The Redis Stream consumer (ingest.h): always exported (zeros and
 * configured 0 without `ingest`, so alert rules can name the families);
 * -1 (unknown) for pending and lag until XINFO answered. */
static void metrics_redis_ingest(omld_buf *b, const omld_ingest_stats *in)
{
    static const omld_ingest_stats none;
    const omld_ingest_stats *g = in ? in : &none;
    gauge(b, "omld_redis_ingest_configured",
          "1 when omld reads a Redis Stream (option ingest; a replica once promoted).",
          g->configured);
    gauge(b, "omld_redis_ingest_connected", "1 while both connections to Redis are up.",
          g->connected);
    counter(b, "omld_redis_ingest_entries_learned_total",
            "Stream entries answered OK and XACKed.", g->entries_learned);
    counter(b, "omld_redis_ingest_entries_dead_total",
            "Stream entries refused, copied to the dead-letter stream and XACKed.", g->entries_dead);
    counter(b, "omld_redis_ingest_retries_total",
            "Times reading restarted from the pending entries after a refusal for now.",
            g->retries);
    gauge(b, "omld_redis_ingest_pending",
          "Entries of the group delivered and not XACKed (XINFO GROUPS; -1 unknown).",
          (double)g->pending);
    gauge(b, "omld_redis_ingest_lag",
          "Entries of the stream not yet delivered to the group (XINFO GROUPS; -1 unknown).",
          (double)g->lag);
}

/* Replication (replicate.h, replica.h): always exported, zeros without
 * it, so alert rules can name the families. */
static void metrics_replication(omld_buf *b, const omld_repl_stats *in)
{
    static const omld_repl_stats none;
    const omld_repl_stats *g = in ? in : &none;
    gauge(b, "omld_replication_role", "0 neither, 1 a primary publishing to Redis (option "
          "replicate), 2 a read replica (option replica_of).", g->role);
    gauge(b, "omld_replication_connected", "1 while the connection(s) to Redis are up.",
          g->connected);
    counter(b, "omld_replication_records_published_total",
            "Primary: committed log records XADDed to the replication stream.",
            g->records_published);
    counter(b, "omld_replication_records_dropped_total",
            "Primary: committed log records never XADDed (Redis away or the queue full); "
            "replicas bootstrap again past them.", g->records_dropped);
    gauge(b, "omld_replication_lease_held", "Primary: 1 while it holds the primary lease "
          "(writes accepted), 0 while it does not (writes refused), -1 without a lease "
          "(replicate_lease_ms 0).", g->lease == OMLD_REPL_LEASE_HELD ? 1
          : g->lease == OMLD_REPL_LEASE_NOT_HELD ? 0 : -1);
    counter(b, "omld_replication_checkpoints_published_total",
            "Primary: checkpoints written to Redis.", g->checkpoints_published);
    gauge(b, "omld_replication_bootstrapped", "Replica: 1 once it serves the primary's state.",
          g->bootstrapped);
    counter(b, "omld_replication_bootstraps_total",
            "Replica: times it loaded the primary's checkpoint (or started from the empty log).",
            g->bootstraps);
    gauge(b, "omld_replication_applied_lsn", "Replica: the last log record applied.",
          (double)g->applied_lsn);
    gauge(b, "omld_replication_lag_records",
          "Replica: log records in the stream not applied yet.", (double)g->lag_records);
    gauge(b, "omld_replication_lag_seconds",
          "Replica: 0 when caught up, else the age of the last record applied.", g->lag_seconds);
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
    counter(b, "omld_duplicate_requests_total",
            "Write requests answered from their idempotency key (applied before: not again).",
            omld_read(&mt->duplicates));
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

/* One counter family with a sample per head, labelled depth="0".."heads-1". */
static void per_head_counter(omld_buf *b, const char *name, const char *help,
                             const atomic_uint_fast64_t *v, int heads)
{
    char depth[16];
    family(b, name, "counter", help);
    for (int i = 0; i < heads; i++) {
        snprintf(depth, sizeof depth, "%d", i);
        sample_u(b, name, "depth", depth, omld_read(&v[i]));
    }
}

/* The online model: updates, accuracy, rehearsal, hedge weights, views. */
static void metrics_model(omld_buf *b, const omld_metrics *mt, const omld_model_stats *m)
{
    int heads = omld_status_heads(m);
    counter(b, "omld_model_updates_total", "Learner steps taken.", m->updates);
    gauge(b, "omld_model_version", "Version of the newest published view (0 before).",
          (double)m->view_version);
    gauge(b, "omld_snapshot_age_seconds", "Age of the serving view's snapshot.",
          (double)m->view_age_ms / 1e3);
    gauge(b, "omld_utilisation", "Share of updates that changed the model.",
          omld_status_ratio(m->utilised, m->updates));
    gauge(b, "omld_triplet_accuracy",
          "Test-then-train triplet accuracy: share of triplets already satisfied.",
          omld_status_ratio(m->satisfied, m->updates));
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
          (double)omld_checkpoint_age_ms(in, m) / 1e3);
    gauge(b, "omld_checkpoint_duration_seconds", "How long the last checkpoint written took.",
          (double)m->ckpt_duration_ms / 1e3);
    gauge(b, "omld_checkpoint_pause_seconds",
          "How long the learner stopped, holding acknowledgements, for the last checkpoint "
          "started (a background one: commit, sync and fork).",
          (double)m->ckpt_pause_ms / 1e3);
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
    int heads = omld_status_heads(m);
    per_head_counter(b, "omld_search_recall_head_hits_total", "omld_search_recall_hits_total "
                     "by head.", mt->ann_recall_head_hits, heads);
    per_head_counter(b, "omld_search_recall_head_checked_total", "omld_search_recall_checked_"
                     "total by head.", mt->ann_recall_head_total, heads);
    gauge(b, "omld_search_recall", "Recall of the serving index's search on its sampled "
          "queries (1 when it scans every item or none was sampled yet).",
          m->view_recall_total ? (double)m->view_recall_hits / (double)m->view_recall_total
                               : 1.0);
    counter(b, "omld_query_groups_total", "Groups of concurrent single classify requests "
            "answered together (one GEMM per head) on a view that scans every item.",
            omld_read(&mt->query_groups));
    counter(b, "omld_queries_grouped_total", "Single classify requests answered in those "
            "groups.", omld_read(&mt->queries_grouped));
    gauge(b, "omld_search_index_float_bytes", "Bytes of the serving index's float embeddings "
          "(0: it keeps only its lists' codes, from rerank_min_items).",
          (double)m->view_float_bytes);
    gauge(b, "omld_search_index_code_bytes", "Bytes of the serving index's codes (its inverted "
          "lists', or the exact scan's).", (double)m->view_code_bytes);
    gauge(b, "omld_search_rerank_depth", "Candidates a fresh view re-ranks, as a multiple of "
          "rerank_candidates, chosen by the depth sample for the index's lag (1 until it says "
          "more).", omld_depth_at((int)m->view_depth_step, 2) / 2.0);
    gauge(b, "omld_search_rerank_depth_share", "Of the serving model's k nearest among 4 x "
          "the candidates in the depth sample, the share the chosen depth holds (1 before a "
          "sample).", isnan(m->view_depth_share) ? 1.0 : m->view_depth_share);
    gauge(b, "omld_search_index_versions_behind", "Model versions between the serving model "
          "and the one its index was built under (> 0: queries re-rank the index's candidates "
          "under the serving model while the next index is built).",
          (double)(m->view_version - m->view_index_version));
}

/* RPC requests and connections: responses by code, queries by kind,
 * connections, frames. */
static void metrics_rpc(omld_buf *b, const omld_metrics *mt)
{
    family(b, "omld_requests_total", "counter", "RPC responses sent, by status code.");
    for (int c = 0; c < OMLD_STATUS_CODES; c++)
        sample_u(b, "omld_requests_total", "code", omld_code_names[c],
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

/* TLS handshakes on both ports, by outcome. */
static void metrics_tls(omld_buf *b, const omld_metrics *mt)
{
    gauge(b, "omld_tls_enabled", "1 when both ports speak TLS only (tls_cert).",
          (double)omld_read(&mt->tls_on));
    family(b, "omld_tls_handshakes_total", "counter",
           "TLS handshakes on the RPC and HTTP ports: ok, failed (logged with the peer), "
           "plaintext (a plain client refused).");
    const struct { const char *name; const atomic_uint_fast64_t *v; } hs[] = {
        {"ok", &mt->tls_handshakes},
        {"failed", &mt->tls_failed},
        {"plaintext", &mt->tls_plaintext},
    };
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        sample_u(b, "omld_tls_handshakes_total", "result", hs[i].name, omld_read(hs[i].v));
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
    metrics_redis_ingest(&b, in->ingest);
    metrics_replication(&b, in->replication);
    metrics_closure(&b, m);
    metrics_model(&b, mt, m);
    metrics_persistence(&b, in, m);
    metrics_process(&b, in);
    metrics_rpc(&b, mt);
    metrics_search(&b, mt, m);
    metrics_limits(&b, mt);
    metrics_auth(&b, mt);
    metrics_tls(&b, mt);
    metrics_latency(&b, mt);
    metrics_trainer(&b, in);
    return omld_buf_take(&b, len);
}
