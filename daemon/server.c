/* server.c - connections, framing, pipelining, backpressure, dispatch.
 *
 * DESIGN
 * Loop thread only (the query jobs it queues run on the threadpool but touch
 * only their own slot, the view and the store under its lock).
 *
 * Every decoded frame gets a slot at the tail of its connection's FIFO. A
 * slot is PARKED (a mutation the engine had no room for), ENGINE (queued in
 * the learner), WORK (a query on the threadpool) or READY (its answer is
 * packed). flush() writes READY slots from the head and stops at the first
 * one that is not READY, so answers leave in request order whatever order
 * they finish in. The request protobuf lives in the slot until its answer is
 * ready (the engine and the pool borrow it).
 *
 * Reading is on only while the connection can take more: no parked slot
 * (engine backpressure), fewer than max_pipeline slots, output under
 * max_conn_output_bytes (resumes under 1/8 of it; see LIMITS), input held under
 * max_conn_input_bytes (LIMITS below), not at EOF, no fatal framing error, not
 * draining. Complete frames the reader holds are decoded by pump() whenever
 * that condition turns true again, so a paused connection buffers at most
 * one read beyond what it has taken.
 *
 * Lifetime: a connection holds one reference for its handle and one per slot
 * at the engine or on the pool. conn_close() is idempotent (stop reading,
 * drop the slots nobody else holds, uv_close); the connection is freed when
 * the handle's close callback has run and the last pending slot has come
 * back (its answer is then discarded); a read or write callback never
 * frees it. Write requests own their frame bytes and free them in the write
 * callback, whatever the status.
 *
 * Parked connections wait in a FIFO on the server; the engine's wake
 * callback retries them in order until the queue refuses again.
 *
 * LIMITS (each refusal or drop is counted in omld_metrics and logged at
 * info with the peer): reading also pauses while the connection holds
 * max_conn_input_bytes of request bytes not yet answered (buffered in the
 * frame reader + payloads of decoded requests whose answer is not packed)
 * and while its output is over max_conn_output_bytes (resumes below 1/8 of
 * it). Output is every answer byte the connection holds or has committed
 * to (conn_output): handed to uv_write and not yet written (unsent),
 * packed in READY slots behind one that is not (out_held), and, from the
 * moment a request is decoded until its answer is packed, that answer's
 * size bound (answer_bound: ids, labels and features at their maximum,
 * never more than a frame; out_expected). So a pipeline of queries with big
 * answers stops being decoded once their bounds add up to the limit, and a
 * connection holds at most about max_conn_output_bytes + one answer, not
 * max_pipeline x max_frame_bytes (issue 12). Since max_conn_input_bytes >=
 * max_frame_bytes + 4, a partial frame always fits and pausing cannot
 * deadlock. A sweep timer (a quarter of
 * the shortest timeout, 20 ms..1 s) closes connections that are idle
 * (nothing in flight, nothing buffered, no byte for idle_timeout_ms), that
 * do not read their answers (no write progress for idle_timeout_ms), and
 * slow clients: a partial frame not complete within request_timeout_ms
 * while its bytes arrive slower than min_request_rate. The partial-frame
 * clock runs only while the connection is being read, so backpressure is
 * never blamed on the client.
 *
 * AUTHORISATION: with tokens configured (omld_server_set_tokens), every
 * request but Auth is answered UNAUTHENTICATED until the connection sent a
 * valid Auth; writes from a read-only connection get PERMISSION_DENIED.
 * Both checks run at decode time, before validation, so they follow the
 * request order. Tokens are compared in constant time (omld_tokens_check)
 * and never logged; the token bytes of a decoded Auth are wiped. Three
 * wrong tokens close the connection. */
#include "server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "frame.h"
#include "hostport.h"
#include "log.h"
#include "query.h"
#include "reply.h"
#include "trainer.h"
#include "validate.h"
#include "wirecheck.h"
#include "view.h"

#define READ_CHUNK 65536
#define AUTH_MAX_FAILURES 3           /* wrong tokens before the connection is closed */
#define DRAIN_GRACE_MS 10000          /* then connections still open are closed hard */

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

enum slot_state { SLOT_PARKED = 0, SLOT_ENGINE, SLOT_WORK, SLOT_READY };

typedef struct omld_conn omld_conn;

typedef struct omld_slot {
    struct omld_slot *prev, *next;   /* the connection's FIFO */
    omld_conn *conn;
    Omld__Request *req;              /* owned until the answer is ready */
    int state;                       /* enum slot_state */
    int route;                       /* enum omld_route, or -1 before routing */
    int kind;                        /* enum omld_query_kind for queries, else -1 */
    int close_after;                 /* close the connection once this is written */
    uint64_t cost;
    uint64_t t0;                     /* decoded, omld_now_ns() */
    omld_view *view;                 /* queries: referenced on the loop, released there */
    const omld_query_ctx *qctx;
    uint32_t max_frame;
    uv_work_t work;
    omld_reply reply;                /* queries: built and packed on the pool */
    size_t in_bytes;                 /* frame bytes counted in conn->held_in until answered */
    size_t out_est;                  /* the answer's size bound, counted in conn->out_expected
                                        until the answer is packed */
    size_t out_counted;              /* out_len, counted in conn->out_held while READY */
    uint8_t *out;                    /* the packed answer frame (READY) */
    size_t out_len;
    int code;                        /* its status code */
} omld_slot;

struct omld_conn {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    omld_server *srv;
    omld_conn *prev, *next;          /* the server's connections */
    omld_conn *park_prev, *park_next;
    int park_listed;
    oml_frame_reader rd;
    omld_slot *head, *tail;
    uint32_t inflight;               /* slots in the FIFO */
    size_t unsent;                   /* bytes given to uv_write, not yet completed */
    size_t out_held;                 /* packed answers of READY slots not yet written */
    size_t out_expected;             /* size bounds of the answers still being computed */
    int refs;
    omld_slot *parked;               /* the slot waiting for room in the engine */
    unsigned closing : 1, reading : 1, eof : 1, fatal : 1, out_paused : 1, in_pump : 1;
    unsigned in_paused : 1;          /* reading off: max_conn_input_bytes held */
    size_t held_in;                  /* payload bytes of decoded requests not yet answered */
    uint64_t rx_total;               /* bytes read */
    uint64_t frames_seen;            /* frames decoded */
    uint64_t last_active_ns;         /* last byte read or answer written */
    uint64_t tx_progress_ns;         /* last write completion (or start of unsent output) */
    uint64_t partial_t0;             /* a partial frame is being read since (0: none) */
    uint64_t partial_rx0;            /* rx_total at its start, less what it had already */
    uint64_t partial_frames;         /* frames_seen at its start */
    int auth;                        /* 0 none, 1 read-only, 2 read-write */
    int auth_failures;
    char peer[80];                   /* "HOST:PORT" or "unix", for logs */
};

typedef struct write_req {
    uv_write_t req;
    uv_buf_t buf;                    /* owns buf.base */
    omld_conn *conn;
    int close_after;
} write_req;

struct omld_server {
    uv_loop_t *loop;
    const omld_config *cfg;
    omld_engine *engine;
    omld_views *views;
    omld_metrics *metrics;
    omld_limits lim;
    omld_query_ctx qctx;
    uint64_t start_ns;
    uint32_t max_frame;
    uint32_t max_pipeline;
    uint64_t max_connections;
    uint64_t max_in, out_high, out_low;
    int32_t heads, emb;              /* of the live model (answer size bounds) */
    uint64_t idle_ns, request_ns, min_rate;
    const omld_tokens *tokens;       /* NULL or empty: no authorisation */
    omld_trainer *trainer;           /* NULL: trainer requests are UNAVAILABLE */
    uv_timer_t sweep_timer;
    int sweep_open;

    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_timer_t drain_timer;
    int tcp_open, pipe_open, timer_open, timer_closing;
    int handles_open;                /* of the three above, not yet closed */
    int failed;                      /* start failed: free once handles are closed */
    struct sockaddr_storage bound;

    omld_conn *conns;
    uint64_t n_conns;
    omld_conn *park_head, *park_tail;

    int draining, done_called;
    void (*drain_done)(void *arg);
    void *drain_arg;

    char rbuf[READ_CHUNK];           /* shared: libuv never interleaves alloc/read across streams */
};

static void conn_pump(omld_conn *c);
static void conn_close(omld_conn *c);
static void server_maybe_done(omld_server *s);

/* ------------------------------------------------------------ metrics */

static int query_kind(const Omld__Request *req)
{
    switch (req->body_case) {
    case OMLD__REQUEST__BODY_CLASSIFY: return OMLD_Q_CLASSIFY;
    case OMLD__REQUEST__BODY_VERIFY: return OMLD_Q_VERIFY;
    case OMLD__REQUEST__BODY_RETRIEVE: return OMLD_Q_RETRIEVE;
    case OMLD__REQUEST__BODY_EMBED: return OMLD_Q_EMBED;
    case OMLD__REQUEST__BODY_GET_ITEMS: return OMLD_Q_GET_ITEMS;
    default: return -1;
    }
}

/* One answer is ready: count it and observe its latency. */
static void count_answer(omld_server *s, const omld_slot *sl)
{
    omld_metrics *m = s->metrics;
    omld_count(&m->requests, 1);
    if (sl->code >= 0 && sl->code < OMLD_STATUS_CODES)
        omld_count(&m->responses_by_code[sl->code], 1);
    uint64_t ns = omld_now_ns() - sl->t0;
    if (sl->route == OMLD_ROUTE_QUERY && sl->kind >= 0) {
        omld_count(&m->queries[sl->kind], 1);
        omld_hist_observe(&m->query_latency[sl->kind], ns);
    } else if (sl->route == OMLD_ROUTE_MUTATION) {
        omld_hist_observe(&m->ingest_latency, ns);
    }
}

/* ------------------------------------------------------------ slots */

static omld_slot *slot_new(omld_conn *c, uint64_t t0)
{
    omld_slot *sl = calloc(1, sizeof *sl);
    if (sl == NULL)
        return NULL;
    sl->conn = c;
    sl->route = -1;
    sl->kind = -1;
    sl->t0 = t0;
    sl->prev = c->tail;
    if (c->tail)
        c->tail->next = sl;
    else
        c->head = sl;
    c->tail = sl;
    c->inflight++;
    return sl;
}

static void slot_unlink(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    if (sl->prev)
        sl->prev->next = sl->next;
    else
        c->head = sl->next;
    if (sl->next)
        sl->next->prev = sl->prev;
    else
        c->tail = sl->prev;
    sl->prev = sl->next = NULL;
    c->inflight--;
}

/* Output the connection holds or has committed to: bytes handed to
 * uv_write, packed answers waiting for their turn, and the size bounds of
 * the answers still being computed. Reading pauses over out_high. */
static uint64_t conn_output(const omld_conn *c)
{
    return (uint64_t)c->unsent + (uint64_t)c->out_held + (uint64_t)c->out_expected;
}

/* Pauses decoding over max_conn_output_bytes, resumes under 1/8 of it. */
static void out_update(omld_conn *c)
{
    uint64_t o = conn_output(c);
    if (!c->out_paused && o > c->srv->out_high) {
        c->out_paused = 1;
        omld_count(&c->srv->metrics->output_paused, 1);
        LOG_DEBUG("server", "%s: reading paused: %llu answer bytes unsent, waiting or being "
                  "computed (max_conn_output_bytes)", c->peer, (unsigned long long)o);
    } else if (c->out_paused && o <= c->srv->out_low) {
        c->out_paused = 0;
    }
}

/* Unlinks and frees a slot nobody else holds (not ENGINE, not WORK). */
static void slot_discard(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    c->out_expected -= sl->out_est;
    c->out_held -= sl->out_counted;
    sl->out_est = sl->out_counted = 0;
    slot_unlink(sl);
    if (sl->req)
        omld__request__free_unpacked(sl->req, NULL);
    free(sl->out);
    free(sl);
}

static void on_write(uv_write_t *req, int status)
{
    write_req *w = container_of(req, write_req, req);
    omld_conn *c = w->conn;
    c->unsent -= w->buf.len;
    c->tx_progress_ns = c->last_active_ns = omld_now_ns();
    int close_after = w->close_after;
    free(w->buf.base);
    free(w);
    if (c->closing)
        return;
    if (status < 0) {
        LOG_DEBUG("server", "write failed: %s", uv_strerror(status));
        conn_close(c);
        return;
    }
    if (close_after) { /* FRAME_TOO_LARGE: the stream cannot be resynchronised */
        conn_close(c);
        return;
    }
    out_update(c);
    conn_pump(c);
}

/* Writes every READY slot at the head of the FIFO, in order; stops at the
 * first slot whose answer is not ready. */
static void conn_flush(omld_conn *c)
{
    while (!c->closing && c->head && c->head->state == SLOT_READY) {
        omld_slot *sl = c->head;
        write_req *w = sl->out ? malloc(sizeof *w) : NULL;
        if (w == NULL) { /* could not pack even an INTERNAL error, or no memory */
            LOG_ERROR("server", "out of memory writing an answer; closing the connection");
            slot_discard(sl);
            conn_close(c);
            return;
        }
        w->buf = uv_buf_init((char *)sl->out, (unsigned)sl->out_len);
        w->conn = c;
        w->close_after = sl->close_after;
        sl->out = NULL;
        slot_discard(sl); /* out_held -= its bytes; unsent += them below */
        int rc = uv_write(&w->req, &c->h.stream, &w->buf, 1, on_write);
        if (rc != 0) {
            LOG_DEBUG("server", "write failed: %s", uv_strerror(rc));
            free(w->buf.base);
            free(w);
            conn_close(c);
            return;
        }
        if (c->unsent == 0)
            c->tx_progress_ns = omld_now_ns(); /* the write-stall clock starts */
        c->unsent += w->buf.len;
        out_update(c);
        if (w->close_after) {
            c->fatal = 1;
            return;
        }
    }
}

/* The slot's answer is packed (sl->out, sl->code): count it, mark it READY
 * and write what can be written. */
static void slot_ready(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    if (sl->req) {
        omld__request__free_unpacked(sl->req, NULL);
        sl->req = NULL;
    }
    c->held_in -= sl->in_bytes;
    sl->in_bytes = 0;
    c->out_expected -= sl->out_est;
    sl->out_est = 0;
    sl->out_counted = sl->out ? sl->out_len : 0;
    c->out_held += sl->out_counted;
    out_update(c);
    sl->state = SLOT_READY;
    count_answer(c->srv, sl);
    conn_flush(c);
}

/* Packs r (then frees its contents) as the slot's answer. */
static void slot_answer(omld_slot *sl, omld_reply *r)
{
    omld_server *s = sl->conn->srv;
    if (r->msg.model_version == 0)
        r->msg.model_version = omld_views_version(s->views);
    if (omld_reply_pack(r, s->max_frame, &sl->out, &sl->out_len) == 0) {
        sl->code = (int)r->status.code;
    } else {
        sl->code = OMLD__STATUS__CODE__INTERNAL;
        if (omld_reply_pack_error(r->msg.request_id, r->msg.model_version,
                                  OMLD__STATUS__CODE__INTERNAL, NULL,
                                  "out of memory packing the answer", &sl->out, &sl->out_len) != 0)
            sl->out = NULL;
    }
    omld_reply_free(r);
    slot_ready(sl);
}

static void slot_error(omld_slot *sl, uint64_t request_id, Omld__Status__Code code,
                       const char *field, const char *message)
{
    omld_server *s = sl->conn->srv;
    sl->code = (int)code;
    if (omld_reply_pack_error(request_id, omld_views_version(s->views), code, field, message,
                              &sl->out, &sl->out_len) != 0)
        sl->out = NULL;
    slot_ready(sl);
}

/* ------------------------------------------------------------ connections */

static void park_remove(omld_conn *c)
{
    omld_server *s = c->srv;
    if (!c->park_listed)
        return;
    if (c->park_prev)
        c->park_prev->park_next = c->park_next;
    else
        s->park_head = c->park_next;
    if (c->park_next)
        c->park_next->park_prev = c->park_prev;
    else
        s->park_tail = c->park_prev;
    c->park_prev = c->park_next = NULL;
    c->park_listed = 0;
}

static void park_add(omld_conn *c, int at_head)
{
    omld_server *s = c->srv;
    if (c->park_listed)
        return;
    c->park_listed = 1;
    if (at_head) {
        c->park_prev = NULL;
        c->park_next = s->park_head;
        if (s->park_head)
            s->park_head->park_prev = c;
        else
            s->park_tail = c;
        s->park_head = c;
    } else {
        c->park_next = NULL;
        c->park_prev = s->park_tail;
        if (s->park_tail)
            s->park_tail->park_next = c;
        else
            s->park_head = c;
        s->park_tail = c;
    }
}

static void conn_free(omld_conn *c)
{
    omld_server *s = c->srv;
    while (c->head) /* only slots nobody else holds remain */
        slot_discard(c->head);
    park_remove(c);
    oml_frame_reader_free(&c->rd);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    atomic_fetch_sub_explicit(&s->metrics->connections_open, 1, memory_order_relaxed);
    free(c);
    server_maybe_done(s);
}

static void conn_unref(omld_conn *c)
{
    if (--c->refs == 0)
        conn_free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn_unref(h->data);
}

/* Idempotent. Answers still being computed are discarded when they come back. */
static void conn_close(omld_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (c->reading)
        uv_read_stop(&c->h.stream);
    c->reading = 0;
    park_remove(c);
    c->parked = NULL;
    omld_slot *sl = c->head;
    while (sl) {
        omld_slot *next = sl->next;
        if (sl->state == SLOT_PARKED || sl->state == SLOT_READY)
            slot_discard(sl);
        sl = next;
    }
    uv_close(&c->h.handle, on_conn_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    omld_conn *c = h->data;
    *buf = uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    omld_conn *c = stream->data;
    if (nread == 0 || c->closing)
        return;
    if (nread == UV_EOF) {
        c->eof = 1; /* half-close: still answer what was sent */
        conn_pump(c);
        return;
    }
    if (nread < 0) {
        LOG_DEBUG("server", "read failed: %s", uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    c->rx_total += (uint64_t)nread;
    c->last_active_ns = omld_now_ns();
    int rc = oml_frame_reader_feed(&c->rd, buf->base, (size_t)nread);
    if (rc == OML_ENOMEM) {
        LOG_ERROR("server", "out of memory buffering a frame; closing the connection");
        conn_close(c);
        return;
    }
    conn_pump(c);
}

static int conn_can_take(const omld_conn *c)
{
    return !c->closing && !c->fatal && c->parked == NULL && c->inflight < c->srv->max_pipeline &&
           !c->out_paused;
}

/* Request bytes the connection holds unanswered: buffered + decoded. */
static uint64_t conn_input_held(const omld_conn *c)
{
    return (uint64_t)oml_frame_reader_buffered(&c->rd) + (uint64_t)c->held_in;
}

/* The slow-client clock: runs while a partial frame is buffered and the
 * connection is being read (so every complete frame has been taken). */
static void partial_update(omld_conn *c)
{
    size_t buffered = oml_frame_reader_buffered(&c->rd);
    if (!c->reading || buffered == 0) {
        c->partial_t0 = 0;
        return;
    }
    if (c->partial_t0 == 0 || c->partial_frames != c->frames_seen) {
        c->partial_t0 = omld_now_ns();
        c->partial_rx0 = c->rx_total - buffered;
        c->partial_frames = c->frames_seen;
    }
}

/* Reading on or off, and the end of a connection at EOF or when draining. */
static void conn_update(omld_conn *c)
{
    omld_server *s = c->srv;
    if (c->closing)
        return;
    int room = conn_input_held(c) < s->max_in;
    if (!room && !c->in_paused && !c->eof && !s->draining) {
        c->in_paused = 1;
        omld_count(&s->metrics->input_paused, 1);
        LOG_DEBUG("server", "%s: reading paused: %llu request bytes held (max_conn_input_bytes)",
                  c->peer, (unsigned long long)conn_input_held(c));
    } else if (room) {
        c->in_paused = 0;
    }
    /* Nothing is read before the engine is attached (during recovery). */
    int want = s->engine != NULL && !c->eof && !s->draining && room && conn_can_take(c);
    if (want && !c->reading) {
        int rc = uv_read_start(&c->h.stream, on_alloc, on_read);
        if (rc != 0) {
            LOG_DEBUG("server", "read start failed: %s", uv_strerror(rc));
            conn_close(c);
            return;
        }
        c->reading = 1;
    } else if (!want && c->reading) {
        uv_read_stop(&c->h.stream);
        c->reading = 0;
    }
    partial_update(c);
    if ((c->eof || s->draining) && c->head == NULL && c->unsent == 0)
        conn_close(c);
}

/* ------------------------------------------------------------ routes */

static void answer_inline(omld_slot *sl)
{
    omld_server *s = sl->conn->srv;
    omld_reply r;
    omld_reply_init(&r, sl->req->request_id);
    r.msg.model_version = omld_views_version(s->views);
    if (sl->req->body_case == OMLD__REQUEST__BODY_HEALTH) {
        Omld__HealthResponse *h = omld_reply_alloc(&r, sizeof *h);
        if (h == NULL)
            goto oom;
        omld__health_response__init(h);
        h->live = 1;
        h->draining = s->draining != 0;
        h->ready = r.msg.model_version > 0 && !s->draining && omld_views_health(s->views, NULL, 0);
        r.msg.body_case = OMLD__RESPONSE__BODY_HEALTH;
        r.msg.health = h;
    } else if (sl->req->body_case == OMLD__REQUEST__BODY_STATUS) {
        omld_model_stats ms;
        omld_engine_stats(s->engine, &ms);
        Omld__StatusResponse *st = omld_reply_alloc(&r, sizeof *st);
        float *alpha = omld_reply_alloc(&r, sizeof(float) * OML_MAX_HEADS);
        if (st == NULL || alpha == NULL)
            goto oom;
        omld__status_response__init(st);
        st->version = (char *)OMLD_VERSION;
        st->uptime_ms = (omld_now_ns() - s->start_ns) / 1000000u;
        st->dim = (uint32_t)ms.cfg.dim;
        st->depth = (uint32_t)ms.cfg.layers;
        int heads = ms.heads < 0 ? 0 : ms.heads > OML_MAX_HEADS ? OML_MAX_HEADS : ms.heads;
        memcpy(alpha, ms.alpha, sizeof(float) * (size_t)heads);
        st->n_alpha = (size_t)heads;
        st->alpha = alpha;
        st->items = ms.items;
        st->triplets_received = omld_read(&s->metrics->triplets_received);
        st->triplets_applied = ms.updates;
        st->queue_depth = ms.queue_depth;
        st->snapshot_age_ms = ms.view_age_ms;
        st->model_version = ms.view_version;
        st->view_triplets = ms.view_updates;
        st->preset = omld_reply_strdup(&r, ms.preset, strlen(ms.preset));
        if (st->preset == NULL)
            goto oom;
        st->seed = ms.cfg.seed;
        st->utilisation = ms.updates ? (double)ms.utilised / (double)ms.updates : 0.0;
        st->triplet_accuracy = ms.updates ? (double)ms.satisfied / (double)ms.updates : 0.0;
        st->recent_accuracy = ms.recent_accuracy;
        st->triplets_rehearsed = ms.rehearsed;
        st->replay_triplets = ms.replay_triplets;
        if (ms.view_version > r.msg.model_version)
            r.msg.model_version = ms.view_version;
        r.msg.body_case = OMLD__RESPONSE__BODY_STATUS_INFO;
        r.msg.status_info = st;
    } else {
        omld_reply_error(&r, OMLD__STATUS__CODE__INTERNAL, "body", "no inline handler");
    }
    slot_answer(sl, &r);
    return;
oom:
    omld_reply_error(&r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
    slot_answer(sl, &r);
}

/* Packs the slot's reply into its frame (on the thread that built it: a
 * large answer costs its serialisation) and frees the reply. */
static void slot_pack(omld_slot *sl)
{
    if (omld_reply_pack(&sl->reply, sl->max_frame, &sl->out, &sl->out_len) == 0) {
        sl->code = (int)sl->reply.status.code;
    } else {
        sl->code = OMLD__STATUS__CODE__INTERNAL;
        if (omld_reply_pack_error(sl->reply.msg.request_id, sl->reply.msg.model_version,
                                  OMLD__STATUS__CODE__INTERNAL, NULL,
                                  "out of memory packing the answer", &sl->out, &sl->out_len) != 0)
            sl->out = NULL;
    }
    omld_reply_free(&sl->reply);
}

static void query_work(uv_work_t *w)
{
    omld_slot *sl = container_of(w, omld_slot, work);
    omld_reply_init(&sl->reply, sl->req->request_id);
    omld_query_run(sl->qctx, sl->view, sl->req, &sl->reply);
    if (sl->reply.msg.model_version == 0)
        sl->reply.msg.model_version = sl->view->version;
    /* Packed here, off the loop: a large answer costs its serialisation. */
    slot_pack(sl);
}

static void query_after(uv_work_t *w, int status)
{
    omld_slot *sl = container_of(w, omld_slot, work);
    omld_conn *c = sl->conn;
    omld_view_release(sl->view);
    sl->view = NULL;
    if (status != 0 && sl->out == NULL) { /* cancelled (never by us) */
        sl->code = OMLD__STATUS__CODE__INTERNAL;
        if (omld_reply_pack_error(sl->req->request_id, omld_views_version(c->srv->views),
                                  OMLD__STATUS__CODE__INTERNAL, NULL, "the query was cancelled",
                                  &sl->out, &sl->out_len) != 0)
            sl->out = NULL;
    }
    if (c->closing) {
        slot_discard(sl);
    } else {
        slot_ready(sl);
        conn_pump(c);
    }
    conn_unref(c);
}

static void start_query(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    sl->kind = query_kind(sl->req);
    sl->view = omld_views_acquire(s->views);
    if (sl->view == NULL) {
        slot_error(sl, sl->req->request_id, OMLD__STATUS__CODE__UNAVAILABLE, NULL,
                   "no model view has been published yet; retry later");
        return;
    }
    sl->qctx = &s->qctx;
    sl->max_frame = s->max_frame;
    sl->state = SLOT_WORK;
    int rc = uv_queue_work(s->loop, &sl->work, query_work, query_after);
    if (rc != 0) {
        omld_view_release(sl->view);
        sl->view = NULL;
        sl->state = SLOT_PARKED;
        slot_error(sl, sl->req->request_id, OMLD__STATUS__CODE__INTERNAL, NULL,
                   "could not queue the query");
        return;
    }
    c->refs++;
}

/* ADMIN route: trainer and model requests on the threadpool (a TrainStart
 * copies the training data; a DeleteModel joins the model's indexer). */
static void admin_work(uv_work_t *w)
{
    omld_slot *sl = container_of(w, omld_slot, work);
    omld_server *s = sl->conn->srv;
    omld_reply_init(&sl->reply, sl->req->request_id);
    omld_trainer_handle(s->trainer, sl->req, &sl->reply);
    sl->reply.msg.model_version = omld_views_version(s->views);
    slot_pack(sl);
}

static void start_admin(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    if (s->trainer == NULL) {
        slot_error(sl, sl->req->request_id, OMLD__STATUS__CODE__UNAVAILABLE, NULL,
                   "the trainer is not running");
        return;
    }
    sl->max_frame = s->max_frame;
    sl->state = SLOT_WORK;
    if (uv_queue_work(s->loop, &sl->work, admin_work, query_after) != 0) {
        sl->state = SLOT_PARKED;
        slot_error(sl, sl->req->request_id, OMLD__STATUS__CODE__INTERNAL, NULL,
                   "could not queue the request");
        return;
    }
    c->refs++;
}

static void engine_done(void *ctx, omld_reply *reply)
{
    omld_slot *sl = ctx;
    omld_conn *c = sl->conn;
    if (c->closing) {
        omld_reply_free(reply);
        free(reply);
        slot_discard(sl);
    } else {
        slot_answer(sl, reply);
        free(reply);
        conn_pump(c);
    }
    conn_unref(c);
}

/* Hands a mutation to the engine: 0 queued (the slot must not be touched
 * again), 1 no room (the slot is parked and the connection paused). */
static int submit_mutation(omld_slot *sl, int park_at_head)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    sl->state = SLOT_ENGINE;
    c->refs++;
    int rc = omld_engine_submit(s->engine, sl->req, sl->cost, engine_done, sl);
    if (rc == 0)
        return 0;
    c->refs--;
    sl->state = SLOT_PARKED;
    if (rc == 1) {
        c->parked = sl;
        park_add(c, park_at_head);
        omld_count(&s->metrics->backpressure_events, 1);
        return 1;
    }
    slot_error(sl, sl->req->request_id, OMLD__STATUS__CODE__INTERNAL, NULL,
               "the learner did not take the request");
    return 0;
}

/* Room was freed in the engine's queue: retry parked connections in order. */
static void on_engine_wake(void *arg)
{
    omld_server *s = arg;
    while (s->park_head) {
        omld_conn *c = s->park_head;
        omld_slot *sl = c->parked;
        park_remove(c);
        c->parked = NULL;
        if (submit_mutation(sl, 1) == 1)
            break; /* still full: c is back at the head */
        conn_pump(c);
    }
}

static void wake_noop(void *arg)
{
    (void)arg;
}

static int auth_required(const omld_server *s)
{
    return s->tokens != NULL && s->tokens->n > 0;
}

/* Operations that change state: refused to read-only connections. */
static const char *write_op(const Omld__Request *req)
{
    switch (req->body_case) {
    case OMLD__REQUEST__BODY_PUT_ITEMS: return "put_items";
    case OMLD__REQUEST__BODY_DELETE_ITEMS: return "delete_items";
    case OMLD__REQUEST__BODY_ADD_TRIPLETS: return "add_triplets";
    case OMLD__REQUEST__BODY_ADD_PAIRS: return "add_pairs";
    case OMLD__REQUEST__BODY_CHECKPOINT: return "checkpoint";
    case OMLD__REQUEST__BODY_TRAIN_START: return "train_start";
    case OMLD__REQUEST__BODY_TRAIN_CANCEL: return "train_cancel";
    case OMLD__REQUEST__BODY_PROMOTE: return "promote";
    case OMLD__REQUEST__BODY_ROLLBACK: return "rollback";
    case OMLD__REQUEST__BODY_DELETE_MODEL: return "delete_model";
    default: return NULL;
    }
}

/* A request validation refused: count the limit it broke, if any. */
static void count_limit_refusal(omld_server *s, const Omld__Request *req)
{
    size_t n = 0;
    uint32_t k = 0;
    switch (req->body_case) {
    case OMLD__REQUEST__BODY_PUT_ITEMS:
        n = req->put_items ? req->put_items->n_items : 0;
        break;
    case OMLD__REQUEST__BODY_DELETE_ITEMS:
        n = req->delete_items ? req->delete_items->n_ids : 0;
        break;
    case OMLD__REQUEST__BODY_GET_ITEMS:
        n = req->get_items ? req->get_items->n_ids : 0;
        break;
    case OMLD__REQUEST__BODY_ADD_TRIPLETS:
        n = req->add_triplets ? req->add_triplets->n_triplets : 0;
        break;
    case OMLD__REQUEST__BODY_ADD_PAIRS:
        n = req->add_pairs ? req->add_pairs->n_pairs : 0;
        break;
    case OMLD__REQUEST__BODY_CLASSIFY:
        if (req->classify && req->classify->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K)
            k = req->classify->k;
        break;
    case OMLD__REQUEST__BODY_RETRIEVE:
        if (req->retrieve && req->retrieve->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K)
            k = req->retrieve->k;
        break;
    default:
        break;
    }
    if (n > s->lim.max_batch)
        omld_count(&s->metrics->batch_too_large, 1);
    if (k > s->lim.max_k)
        omld_count(&s->metrics->k_too_large, 1);
}

/* Auth: checks the token (constant time), wipes it, sets the connection's
 * rights and answers. Three wrong tokens close the connection. */
static void handle_auth(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    omld_server *s = c->srv;
    Omld__Request *req = sl->req;
    char *tok = req->auth ? req->auth->token : NULL;
    size_t len = tok ? strlen(tok) : 0;
    int rights = omld_tokens_check(s->tokens, tok, len);
    if (tok) {
        volatile char *v = tok;
        for (size_t i = 0; i < len; i++)
            v[i] = 0;
    }
    if (!auth_required(s)) {
        c->auth = 2;
    } else if (rights < 0) {
        c->auth = 0;
        c->auth_failures++;
        omld_count(&s->metrics->auth_failed, 1);
        LOG_INFO("server", "%s: authentication failed (wrong token, %d of %d)", c->peer,
                 c->auth_failures, AUTH_MAX_FAILURES);
        if (c->auth_failures >= AUTH_MAX_FAILURES) {
            LOG_INFO("server", "%s: closing the connection after %d wrong tokens", c->peer,
                     c->auth_failures);
            c->fatal = 1; /* nothing after this frame is decoded */
            sl->close_after = 1;
        }
        slot_error(sl, req->request_id, OMLD__STATUS__CODE__UNAUTHENTICATED, "auth.token",
                   "the token is not valid");
        return;
    } else {
        c->auth = rights ? 2 : 1;
        omld_count(&s->metrics->auth_ok, 1);
        LOG_DEBUG("server", "%s: authenticated (%s)", c->peer, rights ? "read-write" : "read-only");
    }
    omld_reply r;
    omld_reply_init(&r, req->request_id);
    Omld__AuthResponse *a = omld_reply_alloc(&r, sizeof *a);
    if (a == NULL) {
        omld_reply_error(&r, OMLD__STATUS__CODE__INTERNAL, NULL, "out of memory");
    } else {
        omld__auth_response__init(a);
        a->read_write = c->auth == 2;
        r.msg.body_case = OMLD__RESPONSE__BODY_AUTH;
        r.msg.auth = a;
    }
    slot_answer(sl, &r);
}

/* An upper bound of the packed answer to a validated request (bytes),
 * never more than a frame: ids and labels are at most OMLD_ID_MAX bytes,
 * every answer larger than max_frame_bytes is refused instead. */
static size_t answer_bound(const omld_server *s, const Omld__Request *req)
{
    const uint64_t name = OMLD_ID_MAX + 8, base = 1024; /* status, message, envelope */
    uint64_t heads = s->heads > 0 ? (uint64_t)s->heads : OML_MAX_HEADS;
    uint64_t emb = s->emb > 0 ? (uint64_t)s->emb : 1024, b = base;
    switch (req->body_case) {
    case OMLD__REQUEST__BODY_GET_ITEMS: {
        uint64_t per = (uint64_t)s->lim.dim * 4 + 2 * name + 16;
        b += (uint64_t)req->get_items->n_ids * per;
        break;
    }
    case OMLD__REQUEST__BODY_RETRIEVE: {
        const Omld__RetrieveRequest *m = req->retrieve;
        uint64_t k = m->k_opt_case == OMLD__RETRIEVE_REQUEST__K_OPT_K ? m->k : s->lim.default_k;
        b += k * (2 * name + 16);
        break;
    }
    case OMLD__REQUEST__BODY_CLASSIFY: {
        const Omld__ClassifyRequest *m = req->classify;
        uint64_t k = m->k_opt_case == OMLD__CLASSIFY_REQUEST__K_OPT_K ? m->k : s->lim.default_k;
        b += k * heads * (name + 8) + name; /* a score per class met, the label */
        break;
    }
    case OMLD__REQUEST__BODY_EMBED:
        b += heads * (emb * 4 + 8) + heads * 4;
        break;
    case OMLD__REQUEST__BODY_TRAIN_STATUS:
    case OMLD__REQUEST__BODY_LIST_MODELS:
        b += 64 * 1024;
        break;
    default:
        break;
    }
    uint64_t cap = (uint64_t)s->max_frame + OML_FRAME_HEADER_BYTES;
    return (size_t)(b < cap ? b : cap);
}

static void handle_frame(omld_conn *c, const uint8_t *p, size_t n)
{
    omld_server *s = c->srv;
    c->frames_seen++;
    omld_slot *sl = slot_new(c, omld_now_ns());
    if (sl == NULL) {
        LOG_ERROR("server", "out of memory taking a request; closing the connection");
        conn_close(c);
        return;
    }
    Omld__Request *req = omld__request__unpack(NULL, n, p);
    if (req == NULL) {
        omld_count(&s->metrics->frames_malformed, 1);
        slot_error(sl, 0, OMLD__STATUS__CODE__MALFORMED, NULL,
                   "the frame payload is not a valid Request message");
        return;
    }
    sl->req = req;
    sl->in_bytes = n;
    c->held_in += n;
    /* protobuf-c keeps strings NUL-terminated without a length: an id with a
     * NUL inside would silently name another item. Refuse it by name. */
    char nul_path[128];
    if (oml_wire_find_nul_string(p, n, &omld__request__descriptor, nul_path, sizeof nul_path) == 1) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s contains a NUL byte; ids, labels, names and tokens are "
                 "text without NUL", nul_path);
        slot_error(sl, req->request_id, OMLD__STATUS__CODE__INVALID_ARGUMENT, nul_path, msg);
        return;
    }
    if (req->body_case == OMLD__REQUEST__BODY_AUTH) {
        handle_auth(sl);
        return;
    }
    if (auth_required(s)) {
        const char *op = write_op(req);
        if (c->auth == 0) {
            omld_count(&s->metrics->unauthenticated, 1);
            slot_error(sl, req->request_id, OMLD__STATUS__CODE__UNAUTHENTICATED, NULL,
                       "this daemon requires a token: send an Auth request first");
            return;
        }
        if (c->auth == 1 && op != NULL) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "%s changes state and this connection authenticated with a read-only token",
                     op);
            omld_count(&s->metrics->permission_denied, 1);
            slot_error(sl, req->request_id, OMLD__STATUS__CODE__PERMISSION_DENIED, op, msg);
            return;
        }
    }
    omld_reply r;
    omld_reply_init(&r, req->request_id);
    int route = -1;
    uint64_t cost = 1;
    if (omld_validate(req, &s->lim, &r, &route, &cost) != 0) {
        count_limit_refusal(s, req);
        slot_answer(sl, &r);
        return;
    }
    omld_reply_free(&r);
    if (s->draining && route != OMLD_ROUTE_INLINE) {
        /* Decoded after the drain began (it was buffered): refused, and
         * Health / Status still answer so the client can see why. */
        slot_error(sl, req->request_id, OMLD__STATUS__CODE__UNAVAILABLE, NULL,
                   "the daemon is draining for shutdown; retry elsewhere or later");
        return;
    }
    sl->route = route;
    /* Committed before the work starts, so a pipeline of queries with big
     * answers pauses reading before their answers exist (issue 12). */
    sl->out_est = answer_bound(s, req);
    c->out_expected += sl->out_est;
    out_update(c);
    switch (route) {
    case OMLD_ROUTE_INLINE:
        answer_inline(sl);
        break;
    case OMLD_ROUTE_QUERY:
        start_query(sl);
        break;
    case OMLD_ROUTE_ADMIN:
        start_admin(sl);
        break;
    case OMLD_ROUTE_MUTATION:
        sl->cost = cost ? cost : 1;
        submit_mutation(sl, 0);
        break;
    default:
        slot_error(sl, req->request_id, OMLD__STATUS__CODE__INTERNAL, "body", "unknown route");
        break;
    }
}

/* Decodes the complete frames the reader holds while the connection can
 * take more, then sets reading on or off. Every event that may change
 * what the connection can take ends here. */
static void conn_pump(omld_conn *c)
{
    omld_server *s = c->srv;
    if (c->in_pump || c->closing)
        return;
    c->in_pump = 1;
    while (conn_can_take(c)) {
        const uint8_t *p;
        size_t n;
        int rc = oml_frame_reader_next(&c->rd, &p, &n);
        if (rc == 0)
            break;
        if (rc == 1) {
            handle_frame(c, p, n);
            continue;
        }
        /* A header over max_frame_bytes: answer, then close once it is written. */
        omld_count(&s->metrics->frames_too_large, 1);
        LOG_INFO("server", "%s: frame header over max_frame_bytes (%u); closing after the answer",
                 c->peer, s->max_frame);
        c->fatal = 1;
        omld_slot *sl = slot_new(c, omld_now_ns());
        if (sl == NULL) {
            conn_close(c);
            break;
        }
        sl->close_after = 1;
        char msg[128];
        snprintf(msg, sizeof msg, "a frame header announced more than max_frame_bytes (%u)",
                 s->max_frame);
        slot_error(sl, 0, OMLD__STATUS__CODE__FRAME_TOO_LARGE, NULL, msg);
        break;
    }
    c->in_pump = 0;
    conn_update(c);
}

/* ------------------------------------------------------------ listeners */

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

static void on_connection(uv_stream_t *server, int status)
{
    omld_server *s = server->data;
    if (status < 0) {
        LOG_WARN("server", "accept failed: %s", uv_strerror(status));
        return;
    }
    if (s->draining)
        return;
    int is_pipe = server == (uv_stream_t *)&s->pipe;
    if (s->n_conns >= s->max_connections) {
        /* Accept and close at once, so the client is told rather than left hanging. */
        omld_count(&s->metrics->connections_refused, 1);
        omld_conn *tmp = malloc(sizeof *tmp);
        if (tmp == NULL)
            return;
        if (is_pipe)
            uv_pipe_init(s->loop, &tmp->h.pipe, 0);
        else
            uv_tcp_init(s->loop, &tmp->h.tcp);
        char peer[80] = "unix";
        if (uv_accept(server, &tmp->h.stream) != 0) {
            LOG_WARN("server", "accept failed");
        } else if (!is_pipe) {
            struct sockaddr_storage a;
            int alen = (int)sizeof a;
            if (uv_tcp_getpeername(&tmp->h.tcp, (struct sockaddr *)&a, &alen) == 0)
                omld_addr_format(&a, peer, sizeof peer);
        }
        uv_close(&tmp->h.handle, on_refused_closed);
        LOG_WARN("server", "%s: connection refused: max_connections (%llu) reached", peer,
                 (unsigned long long)s->max_connections);
        return;
    }
    omld_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        LOG_ERROR("server", "out of memory accepting a connection");
        return;
    }
    if (is_pipe)
        uv_pipe_init(s->loop, &c->h.pipe, 0);
    else
        uv_tcp_init(s->loop, &c->h.tcp);
    c->h.handle.data = c;
    c->srv = s;
    c->refs = 1;
    oml_frame_reader_init(&c->rd, s->max_frame);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    atomic_fetch_add_explicit(&s->metrics->connections_open, 1, memory_order_relaxed);
    int rc = uv_accept(server, &c->h.stream);
    if (rc != 0) {
        LOG_WARN("server", "accept failed: %s", uv_strerror(rc));
        conn_close(c);
        return;
    }
    omld_count(&s->metrics->connections_accepted, 1);
    c->last_active_ns = omld_now_ns();
    if (!is_pipe) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        struct sockaddr_storage peer;
        int plen = (int)sizeof peer;
        if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&peer, &plen) == 0)
            omld_addr_format(&peer, c->peer, sizeof c->peer);
        else
            snprintf(c->peer, sizeof c->peer, "tcp:?");
    } else {
        snprintf(c->peer, sizeof c->peer, "unix:%.70s", s->cfg->unix_socket);
    }
    conn_pump(c); /* starts reading */
}

static void server_free(omld_server *s)
{
    if (s->engine)
        omld_engine_set_wake(s->engine, wake_noop, NULL);
    free(s);
}

static void on_server_handle_closed(uv_handle_t *h)
{
    omld_server *s = h->data;
    s->handles_open--;
    if (s->failed) {
        if (s->handles_open == 0)
            server_free(s);
        return;
    }
    server_maybe_done(s);
}

static void server_maybe_done(omld_server *s)
{
    if (!s->draining || s->done_called || s->n_conns > 0)
        return;
    if (s->timer_open && !s->timer_closing) {
        s->timer_closing = 1;
        uv_close((uv_handle_t *)&s->drain_timer, on_server_handle_closed);
        return;
    }
    if (s->handles_open > 0)
        return;
    s->done_called = 1;
    void (*done)(void *) = s->drain_done;
    void *arg = s->drain_arg;
    server_free(s);
    if (done)
        done(arg);
}

static void on_drain_timeout(uv_timer_t *t)
{
    omld_server *s = t->data;
    if (s->n_conns == 0)
        return;
    LOG_WARN("server", "drain: %llu connection(s) still open after %d ms; closing them",
             (unsigned long long)s->n_conns, DRAIN_GRACE_MS);
    for (omld_conn *c = s->conns; c; c = c->next)
        conn_close(c); /* frees are deferred to close callbacks: the list stays intact */
}

/* ------------------------------------------------------------ timeouts */

/* Closes c for a limit: counts it and logs the peer and the reason. */
static void conn_drop(omld_conn *c, atomic_uint_fast64_t *counter, const char *why)
{
    omld_count(counter, 1);
    LOG_INFO("server", "%s: closing the connection: %s", c->peer, why);
    conn_close(c);
}

static void on_sweep(uv_timer_t *t)
{
    omld_server *s = t->data;
    uint64_t now = omld_now_ns();
    char why[200];
    for (omld_conn *c = s->conns; c; c = c->next) {
        if (c->closing)
            continue;
        if (s->request_ns && c->partial_t0 && c->reading && now - c->partial_t0 > s->request_ns) {
            uint64_t el = now - c->partial_t0;
            uint64_t got = c->rx_total - c->partial_rx0;
            double rate = (double)got * 1e9 / (double)el;
            if (s->min_rate == 0 || rate < (double)s->min_rate) {
                snprintf(why, sizeof why,
                         "slow client: a partial frame (%zu bytes so far) for %llu ms at %.0f "
                         "bytes/s (request_timeout_ms %llu, min_request_rate %llu)",
                         oml_frame_reader_buffered(&c->rd), (unsigned long long)(el / 1000000u),
                         rate, (unsigned long long)(s->request_ns / 1000000u),
                         (unsigned long long)s->min_rate);
                conn_drop(c, &s->metrics->slow_dropped, why);
                continue;
            }
        }
        if (s->idle_ns == 0)
            continue;
        if (c->unsent > 0 && now - c->tx_progress_ns > s->idle_ns) {
            snprintf(why, sizeof why,
                     "it has not read its answers (%zu bytes unsent) for %llu ms "
                     "(idle_timeout_ms)",
                     c->unsent, (unsigned long long)((now - c->tx_progress_ns) / 1000000u));
            conn_drop(c, &s->metrics->write_stalled, why);
            continue;
        }
        if (c->head == NULL && c->unsent == 0 && c->parked == NULL &&
            oml_frame_reader_buffered(&c->rd) == 0 && now - c->last_active_ns > s->idle_ns) {
            snprintf(why, sizeof why, "idle for %llu ms (idle_timeout_ms)",
                     (unsigned long long)((now - c->last_active_ns) / 1000000u));
            conn_drop(c, &s->metrics->idle_closed, why);
        }
    }
}

static void close_listeners(omld_server *s)
{
    if (s->tcp_open) {
        s->tcp_open = 0;
        uv_close((uv_handle_t *)&s->tcp, on_server_handle_closed);
    }
    if (s->pipe_open) {
        s->pipe_open = 0;
        uv_close((uv_handle_t *)&s->pipe, on_server_handle_closed);
        if (s->cfg->unix_socket[0])
            unlink(s->cfg->unix_socket);
    }
}

void omld_server_drain(omld_server *s, void (*done)(void *arg), void *arg)
{
    if (s->draining)
        return;
    s->draining = 1;
    s->drain_done = done;
    s->drain_arg = arg;
    close_listeners(s);
    if (s->sweep_open) {
        s->sweep_open = 0;
        uv_close((uv_handle_t *)&s->sweep_timer, on_server_handle_closed);
    }
    LOG_INFO("server", "draining: %llu connection(s) open", (unsigned long long)s->n_conns);
    if (s->timer_open && s->n_conns > 0) {
        uv_timer_start(&s->drain_timer, on_drain_timeout, DRAIN_GRACE_MS, 0);
        uv_unref((uv_handle_t *)&s->drain_timer);
    }
    for (omld_conn *c = s->conns; c; c = c->next)
        conn_pump(c); /* stops reading; closes the idle ones */
    server_maybe_done(s);
}

void omld_server_set_trainer(omld_server *s, omld_trainer *t)
{
    s->trainer = t;
}

void omld_server_set_tokens(omld_server *s, const omld_tokens *tokens)
{
    s->tokens = tokens;
}

int omld_server_draining(const omld_server *s)
{
    return s->draining;
}

void omld_server_rpc_address(const omld_server *s, struct sockaddr_storage *out)
{
    *out = s->bound;
}

/* Start failed: closes what was opened; s is freed once the handles are. */
static int start_fail(omld_server *s)
{
    s->failed = 1;
    if (s->tcp_open)
        uv_close((uv_handle_t *)&s->tcp, on_server_handle_closed);
    if (s->pipe_open)
        uv_close((uv_handle_t *)&s->pipe, on_server_handle_closed);
    if (s->timer_open)
        uv_close((uv_handle_t *)&s->drain_timer, on_server_handle_closed);
    if (s->sweep_open)
        uv_close((uv_handle_t *)&s->sweep_timer, on_server_handle_closed);
    s->tcp_open = s->pipe_open = s->timer_open = s->sweep_open = 0;
    if (s->handles_open == 0)
        free(s);
    return -1;
}

int omld_server_start(omld_server **out, uv_loop_t *loop, const omld_config *cfg,
                      omld_engine *engine, omld_metrics *metrics, uint64_t start_ns, char *err,
                      size_t errlen)
{
    omld_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->loop = loop;
    s->cfg = cfg;
    s->metrics = metrics;
    s->start_ns = start_ns;
    s->max_frame = (uint32_t)cfg->max_frame_bytes;
    s->max_pipeline = (uint32_t)cfg->max_pipeline;
    s->max_connections = (uint64_t)cfg->max_connections;
    s->max_in = (uint64_t)cfg->max_conn_input_bytes;
    if (s->max_in < (uint64_t)s->max_frame + OML_FRAME_HEADER_BYTES)
        s->max_in = (uint64_t)s->max_frame + OML_FRAME_HEADER_BYTES; /* a frame always fits */
    s->out_high = (uint64_t)cfg->max_conn_output_bytes;
    s->out_low = s->out_high / 8;
    s->idle_ns = (uint64_t)cfg->idle_timeout_ms * 1000000u;
    s->request_ns = (uint64_t)cfg->request_timeout_ms * 1000000u;
    s->min_rate = (uint64_t)cfg->min_request_rate;
    s->lim.dim = (int32_t)cfg->dim;
    s->lim.max_batch = (uint32_t)cfg->max_batch;
    s->lim.max_k = (uint32_t)cfg->max_k;
    s->lim.default_k = (uint32_t)cfg->default_k;
    s->lim.default_threshold = (float)cfg->default_threshold;
    s->lim.max_abs = (float)cfg->max_feature_abs;
    s->lim.max_answer = (uint32_t)cfg->max_frame_bytes;
    s->qctx.lim = &s->lim;

    uv_timer_init(loop, &s->drain_timer);
    s->drain_timer.data = s;
    s->timer_open = 1;
    s->handles_open++;

    uint64_t shortest = 0;
    if (cfg->idle_timeout_ms > 0)
        shortest = (uint64_t)cfg->idle_timeout_ms;
    if (cfg->request_timeout_ms > 0 &&
        (shortest == 0 || (uint64_t)cfg->request_timeout_ms < shortest))
        shortest = (uint64_t)cfg->request_timeout_ms;
    if (shortest > 0) {
        uint64_t every = shortest / 4;
        every = every < 20 ? 20 : every > 1000 ? 1000 : every;
        uv_timer_init(loop, &s->sweep_timer);
        s->sweep_timer.data = s;
        s->sweep_open = 1;
        s->handles_open++;
        uv_timer_start(&s->sweep_timer, on_sweep, every, every);
        uv_unref((uv_handle_t *)&s->sweep_timer);
    }

    struct sockaddr_storage addr;
    if (omld_addr_resolve(cfg->listen, &addr, err, errlen) != 0)
        return start_fail(s);
    uv_tcp_init(loop, &s->tcp);
    s->tcp.data = s;
    s->tcp_open = 1;
    s->handles_open++;
    int rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->tcp, 511, on_connection);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, uv_strerror(rc));
        return start_fail(s);
    }
    int len = (int)sizeof s->bound;
    uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&s->bound, &len);

    if (cfg->unix_socket[0]) {
        struct stat st;
        if (lstat(cfg->unix_socket, &st) == 0) {
            if (!S_ISSOCK(st.st_mode)) {
                snprintf(err, errlen, "unix_socket %s exists and is not a socket",
                         cfg->unix_socket);
                return start_fail(s);
            }
            unlink(cfg->unix_socket); /* stale, from a previous run */
        }
        uv_pipe_init(loop, &s->pipe, 0);
        s->pipe.data = s;
        s->pipe_open = 1;
        s->handles_open++;
        rc = uv_pipe_bind(&s->pipe, cfg->unix_socket);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&s->pipe, 511, on_connection);
        if (rc != 0) {
            snprintf(err, errlen, "cannot listen on unix socket %s: %s", cfg->unix_socket,
                     uv_strerror(rc));
            return start_fail(s);
        }
    }
    if (engine)
        omld_server_set_engine(s, engine);
    *out = s;
    return 0;
}

void omld_server_set_engine(omld_server *s, omld_engine *engine)
{
    s->engine = engine;
    s->views = omld_engine_views(engine);
    omld_engine_store_ref(engine, &s->qctx.store, &s->qctx.lock);
    s->qctx.models = omld_engine_models(engine);
    const oml_config *mc = omld_engine_config(engine);
    s->heads = mc->layers + 1;
    s->emb = mc->emb;
    omld_engine_set_wake(engine, on_engine_wake, s);
    for (omld_conn *c = s->conns; c; c = c->next)
        conn_pump(c); /* connections accepted during recovery start being read */
}

/* ------------------------------------------------------------ addresses */

int omld_addr_resolve(const char *host_port, struct sockaddr_storage *out, char *err,
                      size_t errlen)
{
    char host[OMLD_STR_MAX];
    int port;
    if (omld_hostport_split(host_port, host, sizeof host, &port, err, errlen) != 0)
        return -1;
    if (host[0] == '\0') {
        snprintf(err, errlen, "'%s' is not HOST:PORT (no host)", host_port);
        return -1;
    }
    memset(out, 0, sizeof *out);
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)out) == 0)
        return 0;
    if (uv_ip6_addr(host, port, (struct sockaddr_in6 *)out) == 0)
        return 0;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    if (out->ss_family == AF_INET)
        ((struct sockaddr_in *)out)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return 0;
}

void omld_addr_format(const struct sockaddr_storage *a, char *buf, size_t len)
{
    char host[64] = "?";
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)a;
        uv_ip4_name(in, host, sizeof host);
        snprintf(buf, len, "%s:%u", host, (unsigned)ntohs(in->sin_port));
    } else if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
        uv_ip6_name(in6, host, sizeof host);
        snprintf(buf, len, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
    } else {
        snprintf(buf, len, "?");
    }
}

int omld_addr_is_loopback(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)a;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return 1;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
            return in6->sin6_addr.s6_addr[12] == 127;
    }
    return 0;
}
