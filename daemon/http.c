/* http.c - the status endpoint: GET /status /status/history /metrics /livez
 * /readyz, and the embedded dashboard at / (dashboard.h).
 *
 * DESIGN. Loop thread only. One omld_http owns the listener and a list of
 * connections; each connection embeds its TCP handle, an idle/deadline
 * timer and an http_parser, and is freed only when both handles' close
 * callbacks have run; the server frees itself once the listener and every
 * connection are closed (omld_http_close).
 *
 * Requests are answered from the parser's message-complete callback
 * (gather + render), so answers leave in request order and pipelining
 * needs no queue; an API request (api.c) is answered later, and parsing
 * pauses until it is (c->awaiting, omld_http_request_done). Bounds: header
 * bytes (8 KiB, enforced by http_parser's own counter, then 431), no
 * bodies but the API's (413; up to max_body), at most
 * MAX_CONNS connections, a request must arrive whole within REQUEST_MS and
 * an idle keep-alive connection is closed after IDLE_MS. When MAX_CONNS
 * are open, a new connection is still accepted and the one that has gone
 * longest without a complete request (since accept or its last answer) is
 * closed for it: clients holding connections open (a byte each, or idle
 * keep-alives) cannot lock the probes out, since a probe is answered in
 * the read that brings its request. If the client
 * does not read its answers, parsing pauses once WRITE_HIGH bytes are
 * queued and resumes (with the unparsed rest of the read) below WRITE_LOW.
 *
 * A connection that must end (Connection: close, an error answer) stops
 * parsing, shuts down its write side after the queued answers, and keeps
 * reading and discarding until the peer closes or LINGER_MS passes: closing
 * with unread input would make the kernel send RST, which can destroy the
 * error answer before the client reads it.
 *
 * TLS (omld_http_set_tls, tls.h): every connection reads and writes through
 * its session; a plain client is answered 400 "use https://" and closed.
 *
 * Authorisation (omld_http_set_tokens): the Authorization header is kept
 * (bounded; a longer value simply does not match) and, when tokens are
 * configured, every path but /livez and /readyz needs "Bearer TOKEN" with
 * a configured token (read-only ones too), else 401 with WWW-Authenticate. */
#include "http.h"

#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dashboard.h"
#include "http_int.h"
#include "history.h"
#include "hostport.h"
#include "log.h"
#include "metrics.h"

static int on_message_begin(http_parser *p);
static int on_url(http_parser *p, const char *at, size_t n);
static int on_headers_complete(http_parser *p);
static int on_message_complete(http_parser *p);
static int on_header_field(http_parser *p, const char *at, size_t n);
static int on_header_value(http_parser *p, const char *at, size_t n);
static int on_body(http_parser *p, const char *at, size_t n);

static const http_parser_settings g_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* What a plain HTTP client gets on a TLS port (tls_cert is set). */
static const char g_plain_refusal[] =
    "HTTP/1.1 400 Bad Request\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 58\r\n"
    "Connection: close\r\n\r\n"
    "this port speaks TLS (tls_cert is set): use https:// URLs\n";

static void conn_close(http_conn *c);
static void conn_finish(http_conn *c);
static void conn_feed(http_conn *c, const char *data, size_t n);
static void conn_resume(http_conn *c);

/* ---- lifetime ---- */

static void server_maybe_free(omld_http *h)
{
    if (h->closing && !h->listener_open && h->nconns == 0)
        free(h);
}

static void on_conn_handle_closed(uv_handle_t *handle)
{
    http_conn *c = handle->data;
    if (--c->handles > 0)
        return;
    omld_http *h = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    h->nconns--;
    free(c->pending);
    free(c->body);
    omld_stream_release(&c->io);
    free(c);
    server_maybe_free(h);
}

/* Idempotent: both handles close; the memory goes in the last callback. */
static void conn_close(http_conn *c)
{
    if (c->closed)
        return;
    c->closed = 1;
    c->finishing = 1;
    omld_api_conn_closed(c);
    uv_close(&c->io.h.handle, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void on_timer(uv_timer_t *t)
{
    conn_close(t->data); /* idle, too slow, or done lingering */
}

static void arm_timer(http_conn *c, uint64_t ms)
{
    if (!c->closed)
        uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* ---- writing ---- */

static void on_write(uv_write_t *req, int status)
{
    http_write *w = req->data;
    http_conn *c = w->conn;
    free(w->body);
    free(w);
    if (c->closed)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    conn_resume(c);
}

/* Parses what was held back (paused for backpressure or for an API answer
 * being computed), then reads again, once neither holds any more. */
static void conn_resume(http_conn *c)
{
    if (c->paused && !c->awaiting && !c->finishing && !c->closed &&
        omld_stream_write_queue(&c->io) <= WRITE_LOW) {
        char *data = c->pending;
        size_t n = c->pending_len;
        c->pending = NULL;
        c->pending_len = 0;
        c->paused = 0;
        http_parser_pause(&c->parser, 0);
        conn_feed(c, data, n);
        free(data);
    }
}

void omld_http_request_done(http_conn *c)
{
    c->awaiting = 0;
    c->since_ns = omld_now_ns();
    if (c->closed)
        return;
    if (!c->keep_alive) {
        conn_finish(c);
        return;
    }
    arm_timer(c, IDLE_MS);
    conn_resume(c);
}

static const char *reason(int code)
{
    switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

/* Queues one answer. body is owned (taken) and may be NULL; with head_only
 * the Content-Length is body_len but no body is sent (HEAD). */
void omld_http_send_response(http_conn *c, int code, const char *ctype, char *body, size_t body_len,
                          int head_only, int keep_alive)
{
    if (c->closed) {
        free(body);
        return;
    }
    http_write *w = malloc(sizeof *w);
    if (!w) {
        free(body);
        conn_close(c);
        return;
    }
    w->conn = c;
    w->req.data = w;
    int n = snprintf(w->head, sizeof w->head,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "%s"
                     "Connection: %s\r\n\r\n",
                     code, reason(code), ctype, body_len,
                     code == 405 && omld_api_path(c->url, c->url_len) ? "Allow: POST, GET\r\n"
                     : code == 405 ? "Allow: GET, HEAD\r\n"
                     : code == 401 ? "WWW-Authenticate: Bearer realm=\"omld\"\r\n"
                                   : "",
                     keep_alive ? "keep-alive" : "close");
    w->head_len = (size_t)n < sizeof w->head ? (size_t)n : sizeof w->head - 1;
    w->body = body;
    uv_buf_t bufs[2] = {uv_buf_init(w->head, (unsigned)w->head_len),
                        uv_buf_init(body ? body : w->head, head_only ? 0 : (unsigned)body_len)};
    unsigned nbufs = head_only || !body || body_len == 0 ? 1 : 2;
    int rc = omld_stream_write(&c->io, &w->req, bufs, nbufs, on_write);
    if (rc < 0) { /* the callback will not run */
        free(w->body);
        free(w);
        conn_close(c);
    }
}

void omld_http_send_text(http_conn *c, int code, const char *text, int head_only, int keep_alive)
{
    size_t n = strlen(text);
    char *body = malloc(n + 1);
    if (body)
        memcpy(body, text, n + 1);
    omld_http_send_response(c, code, "text/plain; charset=utf-8", body, body ? n : 0, head_only,
                  keep_alive);
}

/* An error answer that ends the connection. */
void omld_http_send_error_and_finish(http_conn *c, int code)
{
    char text[64];
    snprintf(text, sizeof text, "%d %s\n", code, reason(code));
    omld_http_send_text(c, code, text, 0, 0);
    conn_finish(c);
}

/* ---- graceful end ---- */

static void on_shutdown(uv_shutdown_t *req, int status)
{
    http_conn *c = req->data;
    if (c->closed)
        return;
    if (status < 0 || c->eof) {
        conn_close(c);
        return;
    }
    /* Every answer is out: drain input until EOF or the linger timer. */
    c->shut_done = 1;
    arm_timer(c, LINGER_MS);
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    http_conn *c = handle->data;
    *buf = uv_buf_init(c->srv->rbuf, sizeof c->srv->rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* No more requests on c: answers already queued are sent, then FIN; the
 * rest of the input is read and discarded. Idempotent. */
static void conn_finish(http_conn *c)
{
    if (c->closed || c->shutdown.data)
        return;
    c->finishing = 1;
    c->shutdown.data = c;
    if (omld_stream_shutdown(&c->io, &c->shutdown, on_shutdown) < 0) {
        conn_close(c);
        return;
    }
    if (!c->reading && !c->eof && omld_stream_read_start(&c->io, on_alloc, on_read) == 0)
        c->reading = 1;
    arm_timer(c, REQUEST_MS); /* for the answers to be written */
}

/* ---- requests ---- */

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    http_conn *c = p->data;
    if (c->in_value) { /* a new field begins */
        c->in_value = 0;
        c->field_len = 0;
        c->auth_field = 0;
    }
    if (c->field_len < sizeof c->field) {
        size_t take = n < sizeof c->field - c->field_len ? n : sizeof c->field - c->field_len;
        memcpy(c->field + c->field_len, at, take);
    }
    c->field_len += n;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    http_conn *c = p->data;
    if (!c->in_value) { /* the field name is complete */
        c->in_value = 1;
        c->auth_field = c->field_len == 13 && strncasecmp(c->field, "authorization", 13) == 0;
        if (c->auth_field) {
            c->auth_seen = 1; /* a repeated header replaces the first */
            c->auth_len = 0;
        }
    }
    if (c->auth_field) {
        if (c->auth_len + n <= sizeof c->auth)
            memcpy(c->auth + c->auth_len, at, n);
        c->auth_len += n; /* over the buffer: kept as too long, matches nothing */
        if (c->auth_len > sizeof c->auth)
            c->auth_len = sizeof c->auth + 1;
    }
    return 0;
}

static int on_message_begin(http_parser *p)
{
    http_conn *c = p->data;
    if (c->finishing)
        return -1;
    c->url_len = 0;
    c->reject = 0;
    c->field_len = 0;
    c->in_value = 0;
    c->auth_field = 0;
    c->auth_seen = 0;
    c->auth_len = 0;
    c->body_len = 0;
    c->body_limit = 0;
    arm_timer(c, REQUEST_MS);
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    http_conn *c = p->data;
    if (n > MAX_HEADER_BYTES - c->url_len) {
        c->reject = 414;
        return -1;
    }
    memcpy(c->url + c->url_len, at, n);
    c->url_len += n;
    c->url[c->url_len] = '\0';
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    http_conn *c = p->data;
    /* content_length is ULLONG_MAX when the header is absent. Only the
     * API's requests carry bodies, up to max_body (the RPC's frame limit,
     * with room for JSON's longer numbers). */
    int has_body = (p->flags & F_CHUNKED) || (p->content_length > 0 && p->content_length != ULLONG_MAX);
    if (!has_body)
        return 0;
    if (c->srv->rpc == NULL || !omld_api_path(c->url, c->url_len) ||
        (!(p->flags & F_CHUNKED) && p->content_length > c->srv->max_body)) {
        c->reject = 413;
        return -1;
    }
    c->body_limit = c->srv->max_body;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    http_conn *c = p->data;
    if (n > c->body_limit - c->body_len || c->body_limit == 0) {
        c->reject = 413;
        return -1;
    }
    if (c->body_len + n + 1 > c->body_cap) {
        size_t cap = c->body_cap ? c->body_cap : 4096;
        while (cap < c->body_len + n + 1)
            cap *= 2;
        char *b = realloc(c->body, cap);
        if (b == NULL) {
            c->reject = 413;
            return -1;
        }
        c->body = b;
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, at, n);
    c->body_len += n;
    c->body[c->body_len] = '\0';
    return 0;
}

static int on_message_complete(http_parser *p)
{
    http_conn *c = p->data;
    int keep_alive = http_should_keep_alive(p) && !c->srv->closing;
    omld_http_answer(c, keep_alive);
    c->since_ns = omld_now_ns();
    memset(c->auth, 0, sizeof c->auth); /* the bearer token is not kept */
    c->auth_len = 0;
    if (c->body_cap > (1u << 20)) { /* a large body's buffer is not kept for the next request */
        free(c->body);
        c->body = NULL;
        c->body_cap = 0;
    }
    c->body_len = 0;
    if (c->awaiting && !c->closed) {
        /* The answer is being computed: nothing after this request is
         * parsed until it is queued (omld_http_request_done). */
        c->keep_alive = keep_alive;
        c->paused = 1;
        http_parser_pause(p, 1);
        arm_timer(c, IDLE_MS);
        return 0;
    }
    if (!keep_alive)
        conn_finish(c);
    if (c->closed || c->finishing) {
        http_parser_pause(p, 1); /* nothing after this request is parsed */
        return 0;
    }
    arm_timer(c, IDLE_MS);
    if (omld_stream_write_queue(&c->io) > WRITE_HIGH) {
        c->paused = 1;
        http_parser_pause(p, 1);
    }
    return 0;
}

/* Parses n bytes of input, answering every complete request. */
static void conn_feed(http_conn *c, const char *data, size_t n)
{
    while (n > 0 && !c->finishing) {
        size_t used = http_parser_execute(&c->parser, &g_settings, data, n);
        if (used > n)
            used = n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        data += used;
        n -= used;
        if (c->closed || c->finishing)
            return;
        if (e == HPE_PAUSED) {
            if (!c->paused)
                return;
            /* Backpressure: hold the rest, stop reading until writes drain. */
            if (n > 0) {
                c->pending = malloc(n);
                if (!c->pending) {
                    conn_close(c);
                    return;
                }
                memcpy(c->pending, data, n);
                c->pending_len = n;
            }
            if (c->reading) {
                omld_stream_read_stop(&c->io);
                c->reading = 0;
            }
            return;
        }
        if (e != HPE_OK) {
            int code = c->reject ? c->reject : e == HPE_HEADER_OVERFLOW ? 431 : 400;
            omld_http_send_error_and_finish(c, code);
            return;
        }
        if (c->parser.upgrade) { /* Upgrade / CONNECT: answered already, nothing more */
            conn_finish(c);
            return;
        }
        if (used == 0)
            break;
    }
    if (!c->finishing && !c->paused && !c->reading && !c->closed &&
        omld_stream_read_start(&c->io, on_alloc, on_read) == 0)
        c->reading = 1;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    http_conn *c = stream->data;
    if (nread == 0)
        return;
    if (nread == UV_EOF) {
        /* The peer half-closed: answers already queued still go out (a
         * request cut off mid-way gets none), then the connection ends. */
        c->eof = 1;
        omld_stream_read_stop(&c->io);
        c->reading = 0;
        if (c->shut_done)
            conn_close(c);
        else
            conn_finish(c);
        return;
    }
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (c->finishing)
        return; /* draining before close */
    conn_feed(c, buf->base, (size_t)nread);
}

/* ---- accepting ---- */

static void on_connection(uv_stream_t *server, int status)
{
    omld_http *h = server->data;
    if (status < 0 || h->closing)
        return;
    http_conn *c = calloc(1, sizeof *c);
    if (!c) {
        /* Leave it in the backlog; nothing else to do without memory. */
        return;
    }
    c->srv = h;
    uv_tcp_init(h->loop, &c->io.h.tcp);
    uv_timer_init(h->loop, &c->timer);
    c->io.h.tcp.data = c;
    c->timer.data = c;
    c->handles = 2;
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    h->nconns++;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    if (uv_accept(server, &c->io.h.stream) != 0) {
        conn_close(c);
        return;
    }
    c->since_ns = omld_now_ns();
    if (h->nconns > MAX_CONNS) {
        /* Full: the new connection (most likely a probe, answered as soon
         * as its request arrives) takes the place of the one that has gone
         * longest without a complete request, so 64 clients that hold their
         * connections open cannot lock /livez and /readyz out (issue 12). */
        http_conn *victim = NULL;
        for (http_conn *o = h->conns; o; o = o->next)
            if (o != c && !o->closed && !o->awaiting && (victim == NULL || o->since_ns < victim->since_ns))
                victim = o;
        if (victim == NULL) {
            omld_log(OMLD_LOG_WARN, "http", "connection refused: %d open", MAX_CONNS);
            conn_close(c);
            return;
        }
        omld_log(OMLD_LOG_DEBUG, "http", "%d connections open: closing the one idle longest "
                 "(%llu ms) for a new one", MAX_CONNS,
                 (unsigned long long)((c->since_ns - victim->since_ns) / 1000000u));
        conn_close(victim);
    }
    uv_tcp_nodelay(&c->io.h.tcp, 1);
    if (h->tls && omld_stream_start_tls(&c->io, h->tls, g_plain_refusal,
                                        sizeof g_plain_refusal - 1) != 0) {
        omld_log(OMLD_LOG_ERROR, "http", "out of memory starting TLS");
        conn_close(c);
        return;
    }
    if (omld_stream_read_start(&c->io, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    c->reading = 1;
    arm_timer(c, IDLE_MS);
}

/* "HOST:PORT" / "[V6]:PORT" -> a bound, listening, non-blocking socket. */
static int listen_socket(const char *host_port, int *fd_out, char *err, size_t errlen)
{
    char host[256], why[300], port[8];
    int p;
    if (omld_hostport_split(host_port, host, sizeof host, &p, why, sizeof why) != 0) {
        snprintf(err, errlen, "http: %s", why);
        return -1;
    }
    snprintf(port, sizeof port, "%d", p);
    size_t hl = strlen(host); /* empty or "*": every address */

    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo(hl == 0 || strcmp(host, "*") == 0 ? NULL : host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "http: cannot resolve '%s': %s", host_port, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0)
            break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "http: cannot listen on '%s': %s", host_port, strerror(saved));
        return -1;
    }
    *fd_out = fd;
    return 0;
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Process-wide in http_parser (this file is its only user): the bound on
 * the bytes of a request line plus headers, past which it fails with
 * HPE_HEADER_OVERFLOW. */
static void set_header_bound(void)
{
    http_parser_set_max_header_size(MAX_HEADER_BYTES);
}

int omld_http_start(omld_http **out, uv_loop_t *loop, const char *host_port,
                    omld_http_gather_fn gather, void *arg, struct sockaddr_storage *bound,
                    char *err, size_t errlen)
{
    pthread_once(&g_once, set_header_bound);

    int fd;
    if (listen_socket(host_port, &fd, err, errlen) != 0)
        return -1;
    omld_http *h = calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        snprintf(err, errlen, "http: out of memory");
        return -1;
    }
    h->loop = loop;
    h->gather = gather;
    h->arg = arg;
    int rc = uv_tcp_init(loop, &h->listener);
    if (rc != 0) {
        close(fd);
        free(h);
        snprintf(err, errlen, "http: %s", uv_strerror(rc));
        return -1;
    }
    h->listener.data = h;
    h->listener_open = 1;
    rc = uv_tcp_open(&h->listener, fd);
    if (rc != 0)
        close(fd); /* not the handle's yet */
    else
        rc = uv_listen((uv_stream_t *)&h->listener, 128, on_connection);
    if (rc == 0 && bound) {
        int blen = (int)sizeof *bound;
        rc = uv_tcp_getsockname(&h->listener, (struct sockaddr *)bound, &blen);
    }
    if (rc != 0) {
        snprintf(err, errlen, "http: cannot listen on '%s': %s", host_port, uv_strerror(rc));
        omld_http_close(h); /* the handle closes (and h is freed) when the loop runs */
        return -1;
    }
    *out = h;
    return 0;
}

void omld_http_set_tokens(omld_http *h, const omld_tokens *tokens,
                          atomic_uint_fast64_t *unauthorized)
{
    h->tokens = tokens;
    h->unauthorized = unauthorized;
}

void omld_http_set_api(omld_http *h, struct omld_server *rpc, uint32_t max_frame)
{
    h->rpc = rpc;
    h->max_frame = max_frame;
    h->max_body = (size_t)OMLD_HTTP_BODY_FACTOR * max_frame + 65536;
}

void omld_http_set_tls(omld_http *h, omld_tls *tls)
{
    h->tls = tls;
}

void omld_http_set_history(omld_http *h, const omld_history *history)
{
    h->history = history;
}

static void on_listener_closed(uv_handle_t *handle)
{
    omld_http *h = handle->data;
    h->listener_open = 0;
    server_maybe_free(h);
}

void omld_http_close(omld_http *h)
{
    if (!h || h->closing)
        return;
    h->closing = 1;
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
    for (http_conn *c = h->conns; c; c = c->next)
        conn_close(c);
}
