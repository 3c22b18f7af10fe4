/* history.c - the ring behind GET /status/history (history.h).
 *
 * DESIGN. The ring is one malloc'd array of fixed-size samples; head is the
 * slot the next sample goes into, count how many are valid. A sample is a
 * copy of the numbers /status shows, taken from the same omld_status_input
 * (so the history and /status never disagree on what a field means); it is
 * written by the timer and read by the HTTP server, both on the loop
 * thread, so no lock. The timer is a uv_timer_t embedded in the ring:
 * omld_history_stop closes it, omld_history_free frees the memory once the
 * loop has run the close. */
#include "history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

struct omld_history {
    omld_history_sample *ring;
    size_t cap, head, count;
    uint64_t interval_ms;
    uint64_t start_ns;
    uv_timer_t timer;
    int timer_open;          /* initialised and not yet closed */
    omld_history_gather_fn gather;
    void *arg;
};

omld_history *omld_history_new(size_t capacity, uint64_t interval_ms, uint64_t start_ns)
{
    if (capacity == 0 || interval_ms == 0)
        return NULL;
    omld_history *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ring = calloc(capacity, sizeof *h->ring);
    if (!h->ring) {
        free(h);
        return NULL;
    }
    h->cap = capacity;
    h->interval_ms = interval_ms;
    h->start_ns = start_ns;
    return h;
}

void omld_history_free(omld_history *h)
{
    if (!h)
        return;
    free(h->ring);
    free(h);
}

void omld_history_sample_from(const omld_status_input *in, omld_history_sample *s)
{
    memset(s, 0, sizeof *s);
    s->t_ms = in->uptime_ms;
    s->job_progress = NAN;
    const omld_model_stats *m = in->model;
    if (m) {
        int heads = m->heads < 0 ? 0 : m->heads > OML_MAX_HEADS ? OML_MAX_HEADS : m->heads;
        s->heads = heads;
        memcpy(s->alpha, m->alpha, (size_t)heads * sizeof s->alpha[0]);
        memcpy(s->loss_ema, m->loss_ema, (size_t)heads * sizeof s->loss_ema[0]);
        s->updates = m->updates;
        s->satisfied = m->satisfied;
        s->utilised = m->utilised;
        s->recent_accuracy = m->recent_accuracy;
        s->rehearsed = m->rehearsed;
        s->replay_triplets = m->replay_triplets;
        s->items = m->items;
        s->view_items = m->view_items;
        s->version = m->view_version;
        s->queue_depth = m->queue_depth;
        s->queue_capacity = m->queue_capacity;
    }
    const omld_metrics *mt = in->metrics;
    if (mt) {
        s->items_put = omld_read(&mt->items_put);
        s->triplets_received = omld_read(&mt->triplets_received);
        s->triplets_applied = omld_read(&mt->triplets_applied);
        s->pairs_received = omld_read(&mt->pairs_received);
        s->backpressure_events = omld_read(&mt->backpressure_events);
        for (int k = 0; k < OMLD_Q_KINDS; k++)
            s->queries[k] = omld_read(&mt->queries[k]);
        int64_t open = atomic_load_explicit(&mt->connections_open, memory_order_relaxed);
        s->connections_open = open < 0 ? 0 : open;
    }
    for (int i = 0; i < in->n_jobs && in->jobs; i++) {
        const omld_job_info *j = &in->jobs[i];
        if (j->state != OMLD_JOB_QUEUED && j->state != OMLD_JOB_RUNNING)
            continue;
        s->jobs_active++;
        if (j->state == OMLD_JOB_RUNNING && isnan(s->job_progress))
            s->job_progress = j->progress;
    }
}

void omld_history_push(omld_history *h, const omld_history_sample *s)
{
    h->ring[h->head] = *s;
    h->head = (h->head + 1) % h->cap;
    if (h->count < h->cap)
        h->count++;
}

void omld_history_record(omld_history *h, const omld_status_input *in)
{
    omld_history_sample s;
    omld_history_sample_from(in, &s);
    omld_history_push(h, &s);
}

size_t omld_history_count(const omld_history *h) { return h->count; }
size_t omld_history_capacity(const omld_history *h) { return h->cap; }
uint64_t omld_history_interval_ms(const omld_history *h) { return h->interval_ms; }

const omld_history_sample *omld_history_at(const omld_history *h, size_t i)
{
    if (i >= h->count)
        return NULL;
    return &h->ring[(h->head + h->cap - h->count + i) % h->cap];
}

uint64_t omld_history_now_ms(const omld_history *h)
{
    uint64_t now = omld_now_ns();
    return now > h->start_ns ? (now - h->start_ns) / 1000000u : 0;
}

/* ---- JSON ---- */

static void json_sample(omld_json *j, const omld_history_sample *s)
{
    omld_json_object_begin(j);
    omld_json_kv_uint(j, "t_ms", s->t_ms);
    omld_json_key(j, "alpha");
    omld_json_array_begin(j);
    for (int i = 0; i < s->heads; i++)
        omld_json_float(j, s->alpha[i]);
    omld_json_array_end(j);
    omld_json_key(j, "loss_ema");
    omld_json_array_begin(j);
    for (int i = 0; i < s->heads; i++)
        omld_json_float(j, s->loss_ema[i]);
    omld_json_array_end(j);
    omld_json_kv_uint(j, "updates", s->updates);
    omld_json_kv_uint(j, "satisfied", s->satisfied);
    omld_json_kv_uint(j, "utilised", s->utilised);
    omld_json_kv_double(j, "recent_accuracy", s->recent_accuracy);
    omld_json_kv_uint(j, "rehearsed", s->rehearsed);
    omld_json_kv_uint(j, "replay_triplets", s->replay_triplets);
    omld_json_kv_uint(j, "items", s->items);
    omld_json_kv_uint(j, "view_items", s->view_items);
    omld_json_kv_uint(j, "version", s->version);
    omld_json_kv_uint(j, "items_put", s->items_put);
    omld_json_kv_uint(j, "triplets_received", s->triplets_received);
    omld_json_kv_uint(j, "triplets_applied", s->triplets_applied);
    omld_json_kv_uint(j, "pairs_received", s->pairs_received);
    omld_json_kv_uint(j, "queue_depth", s->queue_depth);
    omld_json_kv_uint(j, "queue_capacity", s->queue_capacity);
    omld_json_kv_uint(j, "backpressure_events", s->backpressure_events);
    omld_json_key(j, "queries");
    omld_json_object_begin(j);
    for (int k = 0; k < OMLD_Q_KINDS; k++)
        omld_json_kv_uint(j, omld_query_kind_name(k), s->queries[k]);
    omld_json_object_end(j);
    omld_json_kv_int(j, "connections_open", s->connections_open);
    omld_json_kv_int(j, "jobs_active", s->jobs_active);
    omld_json_kv_double(j, "job_progress", s->job_progress); /* NaN: null */
    omld_json_object_end(j);
}

char *omld_history_json(const omld_history *h, int has_since, uint64_t since_ms,
                        uint64_t now_ms, size_t *len)
{
    omld_json j;
    omld_json_init(&j);
    omld_json_object_begin(&j);
    omld_json_kv_uint(&j, "interval_ms", h->interval_ms);
    omld_json_kv_uint(&j, "capacity", h->cap);
    omld_json_kv_uint(&j, "now_ms", now_ms);
    omld_json_key(&j, "samples");
    omld_json_array_begin(&j);
    for (size_t i = 0; i < h->count; i++) {
        const omld_history_sample *s = omld_history_at(h, i);
        if (has_since && s->t_ms <= since_ms)
            continue;
        json_sample(&j, s);
    }
    omld_json_array_end(&j);
    omld_json_object_end(&j);
    size_t n = 0;
    char *text = omld_json_finish(&j, &n);
    if (!text)
        return NULL;
    omld_buf b = {.data = text, .len = n, .cap = n + 1}; /* plus a newline, as /status */
    omld_buf_append(&b, "\n", 1);
    return omld_buf_take(&b, len);
}

/* ---- the timer ---- */

static void on_tick(uv_timer_t *t)
{
    omld_history *h = t->data;
    omld_status_input in;
    memset(&in, 0, sizeof in);
    h->gather(h->arg, &in);
    omld_history_record(h, &in);
}

int omld_history_start(omld_history *h, uv_loop_t *loop, omld_history_gather_fn gather,
                       void *arg)
{
    if (h->timer_open)
        return UV_EBUSY;
    int rc = uv_timer_init(loop, &h->timer);
    if (rc != 0)
        return rc;
    h->timer.data = h;
    h->timer_open = 1;
    h->gather = gather;
    h->arg = arg;
    on_tick(&h->timer); /* the first sample now: t = startup */
    rc = uv_timer_start(&h->timer, on_tick, h->interval_ms, h->interval_ms);
    if (rc != 0)
        omld_history_stop(h);
    return rc;
}

void omld_history_stop(omld_history *h)
{
    if (!h || !h->timer_open)
        return;
    h->timer_open = 0;
    uv_close((uv_handle_t *)&h->timer, NULL);
}
