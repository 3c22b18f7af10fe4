/* history.h - a short in-memory history of the daemon's state, for
 * GET /status/history and the dashboard's first render.
 *
 * A fixed ring of compact samples (default 900 = 15 minutes at one per
 * second). A sample is taken from the same omld_status_input that /status
 * renders (omld_history_record), by a uv_timer on the loop thread that
 * calls the same gather callback the HTTP server uses (omld_history_start);
 * GET /status/history renders the ring oldest first (omld_history_json).
 * Counters are stored as counters (the reader turns them into rates), so a
 * missed tick loses nothing but resolution. Nothing is persisted: a
 * restart starts an empty history.
 *
 * Thread: the loop thread only (the timer writes, the HTTP server reads;
 * no lock). omld_history_record and omld_history_json are pure functions
 * of their arguments and the ring, so they are unit-testable without a
 * loop. */
#ifndef OMLD_HISTORY_H
#define OMLD_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "metrics.h"
#include "status.h"

#define OMLD_HISTORY_SAMPLES 900     /* 15 minutes ... */
#define OMLD_HISTORY_INTERVAL_MS 1000 /* ... at one sample per second */

typedef struct omld_history_sample {
    uint64_t t_ms;                       /* uptime when taken (ms since start) */
    int heads;                           /* entries used in alpha, loss_ema */
    float alpha[OML_MAX_HEADS];
    float loss_ema[OML_MAX_HEADS];
    uint64_t updates, satisfied, utilised;
    double recent_accuracy;              /* newest-1,000 test-then-train accuracy (NaN: none) */
    uint64_t rehearsed, replay_triplets;
    uint64_t items, view_items;          /* stored; indexed in the serving view */
    uint64_t version;                    /* serving view (model version) */
    uint64_t items_put, triplets_received, triplets_applied, pairs_received;
    uint64_t queue_depth, queue_capacity;
    uint64_t backpressure_events;
    uint64_t queries[OMLD_Q_KINDS];      /* counts by kind */
    int64_t connections_open;
    int jobs_active;                     /* queued + running trainer jobs */
    double job_progress;                 /* the running job's share 0..1, or NaN */
} omld_history_sample;

typedef struct omld_history omld_history;

/* The state at this moment, exactly what GET /status would render (the
 * HTTP server's gather callback has this type too). */
typedef void (*omld_history_gather_fn)(void *arg, omld_status_input *in);

/* A ring of capacity samples (>= 1) taken every interval_ms (>= 1); NULL on
 * OOM. start_ns is the daemon's start on omld_now_ns()'s clock: "now" for
 * omld_history_now_ms. */
omld_history *omld_history_new(size_t capacity, uint64_t interval_ms, uint64_t start_ns);
/* After omld_history_stop's close has completed (the loop ran), or if the
 * timer was never started. Accepts NULL. */
void omld_history_free(omld_history *h);

/* Fills *s from in (the fields /status shows; in->uptime_ms is the time). */
void omld_history_sample_from(const omld_status_input *in, omld_history_sample *s);
/* Appends one sample (the oldest is dropped when full). */
void omld_history_push(omld_history *h, const omld_history_sample *s);
/* omld_history_sample_from + omld_history_push. */
void omld_history_record(omld_history *h, const omld_status_input *in);

size_t omld_history_count(const omld_history *h);
size_t omld_history_capacity(const omld_history *h);
uint64_t omld_history_interval_ms(const omld_history *h);
/* The i-th sample, 0 = oldest; NULL if i >= count. */
const omld_history_sample *omld_history_at(const omld_history *h, size_t i);
/* Milliseconds since start_ns, now. */
uint64_t omld_history_now_ms(const omld_history *h);

/* GET /status/history: {"interval_ms":..,"capacity":..,"now_ms":..,
 * "samples":[{...}, ...]} oldest first; with has_since only the samples
 * with t_ms > since_ms. malloc'd NUL-terminated text (length in *len), NULL
 * on OOM. */
char *omld_history_json(const omld_history *h, int has_since, uint64_t since_ms,
                        uint64_t now_ms, size_t *len);

/* Takes one sample now and then one every interval_ms, each from
 * gather(arg, &in) on the loop thread. 0, or a libuv error. */
int omld_history_start(omld_history *h, uv_loop_t *loop, omld_history_gather_fn gather,
                       void *arg);
/* Stops sampling and closes the timer (the loop must run for the close to
 * complete before omld_history_free). Idempotent; accepts NULL. */
void omld_history_stop(omld_history *h);

#endif
