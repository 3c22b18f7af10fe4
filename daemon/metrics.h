/* metrics.h - the daemon's counters, gauges and latency histograms.
 *
 * One omld_metrics lives for the whole process; every thread updates it with
 * relaxed atomics (no locks on any hot path), and the status endpoint reads
 * it. Latency histograms have fixed log-spaced buckets (upper bounds from
 * 10 us to ~10 s, factor ~1.78 = 10^(1/4)), which serve both the Prometheus
 * histogram exposition and the p50/p99 on /status. */
#ifndef OMLD_METRICS_H
#define OMLD_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "learner.h" /* OML_MAX_HEADS */

#define OMLD_HIST_BUCKETS 25 /* 24 finite upper bounds + the +Inf bucket */

/* The steps of a start's recovery, for /readyz (metrics recovery_step). */
enum { OMLD_RECOVERY_CHECKPOINT, OMLD_RECOVERY_LOG, OMLD_RECOVERY_VIEW };

typedef struct omld_histogram {
    atomic_uint_fast64_t bucket[OMLD_HIST_BUCKETS]; /* non-cumulative counts */
    atomic_uint_fast64_t count;
    atomic_uint_fast64_t sum_ns;
} omld_histogram;

/* Upper bound of bucket i in seconds (i < OMLD_HIST_BUCKETS - 1). */
double omld_hist_bound(int i);
void omld_hist_observe(omld_histogram *h, uint64_t ns);
/* The q-quantile (0 < q < 1) in seconds, interpolated inside the bucket;
 * 0 when empty. */
double omld_hist_quantile(const omld_histogram *h, double q);

enum omld_query_kind {
    OMLD_Q_CLASSIFY = 0,
    OMLD_Q_VERIFY,
    OMLD_Q_RETRIEVE,
    OMLD_Q_EMBED,
    OMLD_Q_GET_ITEMS,
    OMLD_Q_CLASSIFY_BATCH,       /* one per batch, whatever its size */
    OMLD_Q_RETRIEVE_BATCH,
    OMLD_Q_RECOMMEND,
    OMLD_Q_LIST_ITEMS,
    OMLD_Q_EXPORT_MODEL,
    OMLD_Q_COUNT_ITEMS,
    OMLD_Q_SHARD_RETRIEVE,
    OMLD_Q_KINDS
};
const char *omld_query_kind_name(int kind); /* "classify", ... */

#define OMLD_STATUS_CODES 14 /* Omld__Status__Code values 0..13 */

typedef struct omld_metrics {
    /* ingest */
    atomic_uint_fast64_t items_put;          /* items stored (created or replaced) */
    atomic_uint_fast64_t items_deleted;
    atomic_uint_fast64_t triplets_received;  /* accepted (ids resolved) by the learner */
    atomic_uint_fast64_t triplets_applied;   /* learned */
    atomic_uint_fast64_t pairs_received;
    atomic_uint_fast64_t derived_triplets;   /* queued because of pairs */
    atomic_uint_fast64_t backpressure_events;/* times a connection was paused for a full queue */
    atomic_uint_fast64_t duplicates;         /* write requests whose idempotency key was seen */
    /* requests */
    atomic_uint_fast64_t requests;           /* frames answered */
    atomic_uint_fast64_t responses_by_code[OMLD_STATUS_CODES];
    atomic_uint_fast64_t queries[OMLD_Q_KINDS];
    /* Queries of an index with inverted lists, and of a sample of them the
     * exact k nearest rows per head against those the lists found. */
    atomic_uint_fast64_t ann_queries, ann_recall_hits, ann_recall_total;
    atomic_uint_fast64_t ann_recall_head_hits[OML_MAX_HEADS], ann_recall_head_total[OML_MAX_HEADS];
    /* Single Classify requests that waited for a pool job and were answered
     * together (coalesce.c): the groups, and the requests in them. */
    atomic_uint_fast64_t query_groups, queries_grouped;
    /* connections */
    atomic_uint_fast64_t connections_accepted;
    atomic_uint_fast64_t connections_refused;/* over max_connections */
    atomic_int_fast64_t connections_open;    /* gauge */
    atomic_uint_fast64_t frames_too_large;
    atomic_uint_fast64_t frames_malformed;
    /* limits: each refusal / drop, by limit (server.c) */
    atomic_uint_fast64_t batch_too_large;    /* requests refused: batch over max_batch */
    atomic_uint_fast64_t k_too_large;        /* queries refused: k over max_k */
    atomic_uint_fast64_t input_paused;       /* reading paused: max_conn_input_bytes held */
    atomic_uint_fast64_t output_paused;      /* reading paused: max_conn_output_bytes unsent */
    atomic_uint_fast64_t idle_closed;        /* closed after idle_timeout_ms with nothing to do */
    atomic_uint_fast64_t slow_dropped;       /* partial frame too slow (request_timeout_ms) */
    atomic_uint_fast64_t write_stalled;      /* answers unread for idle_timeout_ms */
    /* authorisation */
    atomic_uint_fast64_t auth_ok;            /* Auth requests with a valid token */
    atomic_uint_fast64_t auth_failed;        /* Auth requests with a wrong token */
    atomic_uint_fast64_t unauthenticated;    /* requests refused before a valid Auth */
    atomic_uint_fast64_t permission_denied;  /* writes refused to read-only connections */
    atomic_uint_fast64_t http_unauthorized;  /* HTTP 401: no or wrong bearer token */
    atomic_uint_fast64_t tokens_rw, tokens_ro; /* gauges: configured tokens (set at startup) */
    /* TLS (tls.c), both ports */
    atomic_uint_fast64_t tls_on;             /* gauge: 1 when tls_cert is set */
    atomic_uint_fast64_t tls_handshakes;     /* completed */
    atomic_uint_fast64_t tls_failed;         /* handshakes that failed (logged with the peer) */
    atomic_uint_fast64_t tls_plaintext;      /* plain clients refused on a TLS port */
    /* views */
    atomic_uint_fast64_t views_published;
    atomic_uint_fast64_t views_refused;      /* built but not served: model not finite */
    /* recovery (persist.c; main.c runs it on its own thread at startup) */
    atomic_uint_fast64_t recovering;         /* gauge: 1 while data_dir is recovered */
    atomic_uint_fast64_t recovery_replayed;  /* log records the last recovery replayed */
    atomic_uint_fast64_t recovery_step;      /* OMLD_RECOVERY_*: what it is doing now */
    atomic_uint_fast64_t recovery_view_items;/* items the first view embeds (its step) */
    /* latency */
    omld_histogram update_latency;           /* one learner step */
    omld_histogram ingest_latency;           /* mutation request: decoded -> acknowledged */
    omld_histogram query_latency[OMLD_Q_KINDS]; /* decoded -> answered */
    omld_histogram index_build_latency;
} omld_metrics;

static inline void omld_count(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* Adds one and returns the new value. */
static inline uint64_t omld_count_ret(atomic_uint_fast64_t *c)
{
    return atomic_fetch_add_explicit(c, 1, memory_order_relaxed) + 1;
}

static inline uint64_t omld_read(const atomic_uint_fast64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* Monotonic clock in nanoseconds. */
uint64_t omld_now_ns(void);
/* Wall clock, Unix milliseconds: times shown to people or sent to other
 * processes (status, checkpoints, replication), never to measure spans. */
uint64_t omld_wall_ms(void);

#endif
