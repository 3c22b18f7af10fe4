/* conn.c - RPC connections: slots, reading, ordered answers, limits.
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
 * How a routed request is started, and how a parked one resumes, is
 * route.c's; what a frame is and whether it may run is dispatch.c's.
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
 * TLS (tls.h): a TCP connection of a server with tls_cert reads and writes
 * through its session; nothing here changes but the calls (omld_stream_*),
 * and the sweep drops a handshake not complete within request_timeout_ms
 * (counted as a slow client) where an idle one would wait idle_timeout_ms.
 *
 * Every frame goes through omld_dispatch_payload (dispatch.c): unpack, NUL
 * scan, authorisation against the connection's session, validation; a
 * refusal is answered in order like any answer. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "hostport.h"
#include "log.h"
#include "server_int.h"

/* An answer frame being written: owns buf.base, freed in the callback. */
typedef struct write_req {
    uv_write_t req;
    uv_buf_t buf;
    omld_conn *conn;
    int close_after;
} write_req;

static void conn_update(omld_conn *c);

/* ------------------------------------------------------------ metrics */

/* One answer is ready: count it and observe its latency. */
static void count_answer(omld_server *s, const omld_slot *sl)
{
    omld_metrics *m = s->metrics;
    omld_count(&m->requests, 1);
    if (sl->code >= 0 && sl->code < OMLD_STATUS_CODES)
        omld_count(&m->responses_by_code[sl->code], 1);
    uint64_t ns = omld_now_ns() - sl->t0;
    const omld_op *op = sl->op;
    if (op && op->route == OMLD_ROUTE_QUERY && op->metric >= 0) {
        omld_count(&m->queries[op->metric], 1);
        omld_hist_observe(&m->query_latency[op->metric], ns);
    } else if (op && op->route == OMLD_ROUTE_MUTATION) {
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
    assert(c->inflight > 0);
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
void omld_slot_discard(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    /* Nobody else holds it, and what it counted is still counted. */
    assert(sl->state != SLOT_ENGINE && sl->state != SLOT_WORK);
    assert(c->out_expected >= sl->out_est && c->out_held >= sl->out_counted);
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
        omld_conn_close(c);
        return;
    }
    if (close_after) { /* FRAME_TOO_LARGE: the stream cannot be resynchronised */
        omld_conn_close(c);
        return;
    }
    out_update(c);
    omld_conn_pump(c);
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
            omld_slot_discard(sl);
            omld_conn_close(c);
            return;
        }
        w->buf = uv_buf_init((char *)sl->out, (unsigned)sl->out_len);
        w->conn = c;
        w->close_after = sl->close_after;
        sl->out = NULL;
        omld_slot_discard(sl); /* out_held -= its bytes; unsent += them below */
        int rc = omld_stream_write(&c->io, &w->req, &w->buf, 1, on_write);
        if (rc != 0) {
            LOG_DEBUG("server", "write failed: %s", uv_strerror(rc));
            free(w->buf.base);
            free(w);
            omld_conn_close(c);
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
void omld_slot_ready(omld_slot *sl)
{
    omld_conn *c = sl->conn;
    assert(sl->state != SLOT_READY); /* answered once */
    assert(c->held_in >= sl->in_bytes && c->out_expected >= sl->out_est);
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

/* Packs r into the slot's answer frame and frees r's contents; a failure
 * to pack becomes an INTERNAL answer. */
static void pack(omld_slot *sl, omld_reply *r, uint32_t max_frame)
{
    if (omld_reply_pack(r, max_frame, &sl->out, &sl->out_len) == 0) {
        sl->code = (int)r->status.code;
    } else {
        sl->code = OMLD__STATUS__CODE__INTERNAL;
        if (omld_reply_pack_error(r->msg.request_id, r->msg.model_version,
                                  OMLD__STATUS__CODE__INTERNAL, NULL,
                                  "out of memory packing the answer", &sl->out, &sl->out_len) != 0)
            sl->out = NULL;
    }
    omld_reply_free(r);
}

/* Packs r (then frees its contents) as the slot's answer. */
void omld_slot_answer(omld_slot *sl, omld_reply *r)
{
    omld_server *s = sl->conn->srv;
    if (r->msg.model_version == 0)
        r->msg.model_version = omld_views_version(s->views);
    pack(sl, r, s->max_frame);
    omld_slot_ready(sl);
}

/* Answers the slot with an error that names no field. */
void omld_slot_error(omld_slot *sl, Omld__Status__Code code, const char *message)
{
    omld_server *s = sl->conn->srv;
    sl->code = (int)code;
    if (omld_reply_pack_error(sl->req ? sl->req->request_id : 0, omld_views_version(s->views),
                              code, NULL, message, &sl->out, &sl->out_len) != 0)
        sl->out = NULL;
    omld_slot_ready(sl);
}

/* ------------------------------------------------------------ connections */

static void conn_free(omld_conn *c)
{
    omld_server *s = c->srv;
    while (c->head) /* only slots nobody else holds remain */
        omld_slot_discard(c->head);
    omld_park_remove(c);
    oml_frame_reader_free(&c->rd);
    omld_stream_release(&c->io);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    atomic_fetch_sub_explicit(&s->metrics->connections_open, 1, memory_order_relaxed);
    free(c);
    omld_server_maybe_done(s);
}

void omld_conn_unref(omld_conn *c)
{
    if (--c->refs == 0)
        conn_free(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    omld_conn_unref(h->data);
}

/* Idempotent. Answers still being computed are discarded when they come back. */
void omld_conn_close(omld_conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (c->reading)
        omld_stream_read_stop(&c->io);
    c->reading = 0;
    omld_park_remove(c);
    c->parked = NULL;
    omld_slot *sl = c->head;
    while (sl) {
        omld_slot *next = sl->next;
        if (sl->state == SLOT_PARKED || sl->state == SLOT_READY)
            omld_slot_discard(sl);
        sl = next;
    }
    uv_close(&c->io.h.handle, on_conn_closed);
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
        omld_conn_pump(c);
        return;
    }
    if (nread < 0) {
        LOG_DEBUG("server", "read failed: %s", uv_strerror((int)nread));
        omld_conn_close(c);
        return;
    }
    c->rx_total += (uint64_t)nread;
    c->last_active_ns = omld_now_ns();
    int rc = oml_frame_reader_feed(&c->rd, buf->base, (size_t)nread);
    if (rc == OML_ENOMEM) {
        LOG_ERROR("server", "out of memory buffering a frame; closing the connection");
        omld_conn_close(c);
        return;
    }
    omld_conn_pump(c);
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
        int rc = omld_stream_read_start(&c->io, on_alloc, on_read);
        if (rc != 0) {
            LOG_DEBUG("server", "read start failed: %s", uv_strerror(rc));
            omld_conn_close(c);
            return;
        }
        c->reading = 1;
        if (c->read_t0 == 0)
            c->read_t0 = omld_now_ns();
    } else if (!want && c->reading) {
        omld_stream_read_stop(&c->io);
        c->reading = 0;
    }
    partial_update(c);
    if ((c->eof || s->draining) && c->head == NULL && c->unsent == 0)
        omld_conn_close(c);
}

/* Packs the slot's reply into its frame (on the thread that built it: a
 * large answer costs its serialisation) and frees the reply. */
void omld_slot_pack(omld_slot *sl)
{
    pack(sl, &sl->reply, sl->max_frame);
}

/* Counts what dispatch refused, by the reason and the limit broken. */
static void count_refusal(omld_server *s, const omld_dispatch *d)
{
    omld_metrics *m = s->metrics;
    switch (d->refused) {
    case OMLD_REFUSED_MALFORMED: omld_count(&m->frames_malformed, 1); break;
    case OMLD_REFUSED_UNAUTHENTICATED: omld_count(&m->unauthenticated, 1); break;
    case OMLD_REFUSED_PERMISSION: omld_count(&m->permission_denied, 1); break;
    default: break;
    }
    if (d->over_batch)
        omld_count(&m->batch_too_large, 1);
    if (d->over_k)
        omld_count(&m->k_too_large, 1);
}

static void handle_frame(omld_conn *c, const uint8_t *p, size_t n)
{
    omld_server *s = c->srv;
    c->frames_seen++;
    omld_slot *sl = slot_new(c, omld_now_ns());
    if (sl == NULL) {
        LOG_ERROR("server", "out of memory taking a request; closing the connection");
        omld_conn_close(c);
        return;
    }
    omld_dispatch_in in = {.lim = &s->lim, .auth_required = omld_tokens_required(s->tokens),
                           .rights = c->session.rights, .draining = s->draining,
                           .not_primary = s->not_primary};
    omld_dispatch d;
    omld_dispatch_payload(p, n, &in, &d);
    sl->req = d.req;
    if (d.req) {
        sl->in_bytes = n;
        c->held_in += n;
    }
    if (d.refused) {
        count_refusal(s, &d);
        omld_slot_answer(sl, &d.reply);
        return;
    }
    omld_reply_free(&d.reply);
    sl->op = d.op;
    sl->cost = d.cost;
    /* Committed before the work starts, so a pipeline of queries with big
     * answers pauses reading before their answers exist (issue 12). */
    sl->out_est = (size_t)omld_op_answer_bound(d.op, d.req, &s->dims,
                                               (uint64_t)s->max_frame + OML_FRAME_HEADER_BYTES);
    c->out_expected += sl->out_est;
    out_update(c);
    omld_route_start(sl);
}

/* Decodes the complete frames the reader holds while the connection can
 * take more, then sets reading on or off. Every event that may change
 * what the connection can take ends here. */
void omld_conn_pump(omld_conn *c)
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
            omld_conn_close(c);
            break;
        }
        sl->close_after = 1;
        char msg[128];
        snprintf(msg, sizeof msg, "a frame header announced more than max_frame_bytes (%u)",
                 s->max_frame);
        omld_slot_error(sl, OMLD__STATUS__CODE__FRAME_TOO_LARGE, msg);
        break;
    }
    c->in_pump = 0;
    conn_update(c);
}

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

/* A connection of s, linked and counted, its handle initialised but not
 * yet connected to anything. NULL if out of memory. */
static omld_conn *conn_new(omld_server *s, int is_pipe)
{
    omld_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (is_pipe)
        uv_pipe_init(s->loop, &c->io.h.pipe, 0);
    else
        uv_tcp_init(s->loop, &c->io.h.tcp);
    c->io.h.handle.data = c;
    c->srv = s;
    c->session.peer = c->peer;
    c->refs = 1;
    oml_frame_reader_init(&c->rd, s->max_frame);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    atomic_fetch_add_explicit(&s->metrics->connections_open, 1, memory_order_relaxed);
    return c;
}

void omld_conn_accept(uv_stream_t *server, int status)
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
            uv_pipe_init(s->loop, &tmp->io.h.pipe, 0);
        else
            uv_tcp_init(s->loop, &tmp->io.h.tcp);
        char peer[80] = "unix";
        if (uv_accept(server, &tmp->io.h.stream) != 0) {
            LOG_WARN("server", "accept failed");
        } else if (!is_pipe) {
            struct sockaddr_storage a;
            int alen = (int)sizeof a;
            if (uv_tcp_getpeername(&tmp->io.h.tcp, (struct sockaddr *)&a, &alen) == 0)
                omld_addr_format(&a, peer, sizeof peer);
        }
        uv_close(&tmp->io.h.handle, on_refused_closed);
        LOG_WARN("server", "%s: connection refused: max_connections (%llu) reached", peer,
                 (unsigned long long)s->max_connections);
        return;
    }
    omld_conn *c = conn_new(s, is_pipe);
    if (c == NULL) {
        LOG_ERROR("server", "out of memory accepting a connection");
        return;
    }
    int rc = uv_accept(server, &c->io.h.stream);
    if (rc != 0) {
        LOG_WARN("server", "accept failed: %s", uv_strerror(rc));
        omld_conn_close(c);
        return;
    }
    omld_count(&s->metrics->connections_accepted, 1);
    c->last_active_ns = omld_now_ns();
    if (!is_pipe) {
        uv_tcp_nodelay(&c->io.h.tcp, 1);
        struct sockaddr_storage peer;
        int plen = (int)sizeof peer;
        if (uv_tcp_getpeername(&c->io.h.tcp, (struct sockaddr *)&peer, &plen) == 0)
            omld_addr_format(&peer, c->peer, sizeof c->peer);
        else
            snprintf(c->peer, sizeof c->peer, "tcp:?");
        if (s->tls && (rc = omld_stream_start_tls(&c->io, s->tls, s->tls_refusal,
                                                  s->tls_refusal_len)) != 0) {
            LOG_ERROR("server", "%s: cannot start TLS: %s", c->peer, uv_strerror(rc));
            omld_conn_close(c);
            return;
        }
    } else {
        snprintf(c->peer, sizeof c->peer, "unix:%.70s", s->cfg->unix_socket);
    }
    omld_conn_pump(c); /* starts reading */
}

int omld_server_adopt(omld_server *s, uv_os_sock_t fd, int rights, const char *peer)
{
    if (s->draining)
        return UV_ECANCELED;
    omld_conn *c = conn_new(s, 1);
    if (c == NULL)
        return UV_ENOMEM;
    int rc = uv_pipe_open(&c->io.h.pipe, fd);
    if (rc != 0) {
        omld_conn_close(c);
        return rc;
    }
    c->session.rights = rights;
    c->last_active_ns = omld_now_ns();
    snprintf(c->peer, sizeof c->peer, "%.79s", peer);
    omld_conn_pump(c); /* starts reading */
    return 0;
}

/* ------------------------------------------------------------ timeouts */

/* Closes c for a limit: counts it and logs the peer and the reason. */
static void conn_drop(omld_conn *c, atomic_uint_fast64_t *counter, const char *why)
{
    omld_count(counter, 1);
    LOG_INFO("server", "%s: closing the connection: %s", c->peer, why);
    omld_conn_close(c);
}

void omld_conn_sweep(uv_timer_t *t)
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
        /* A TLS handshake is a request: it gets request_timeout_ms from
         * the first read (not from accept: recovery reads nothing). */
        if (s->request_ns && c->read_t0 && omld_stream_handshaking(&c->io) &&
            now - c->read_t0 > s->request_ns) {
            snprintf(why, sizeof why, "TLS handshake not complete within %llu ms "
                     "(request_timeout_ms)", (unsigned long long)(s->request_ns / 1000000u));
            conn_drop(c, &s->metrics->slow_dropped, why);
            continue;
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

