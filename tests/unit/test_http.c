/* test_http.c - daemon/http.c over real sockets: the server runs on its own
 * uv loop in a thread on 127.0.0.1:0 with a fake gather callback; the tests
 * talk to it with plain blocking sockets. Routes, status codes and content
 * types, keep-alive, pipelining, backpressure (many pipelined answers the
 * client reads late), malformed and oversized requests, bodies, and a close
 * that leaves no handle on the loop (uv_loop_close() == 0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "http.h"

/* ---- the fake daemon state ---- */

static atomic_int g_ready = 1, g_draining = 0, g_gathers = 0;
static omld_config g_cfg;
static omld_model_stats g_model;
static omld_metrics g_metrics;

static void fake_gather(void *arg, omld_status_input *in)
{
    (void)arg;
    atomic_fetch_add(&g_gathers, 1);
    in->version = "9.9.9";
    in->uptime_ms = 1000;
    in->cfg = &g_cfg;
    in->model = &g_model;
    in->metrics = &g_metrics;
    in->ready = atomic_load(&g_ready);
    in->draining = atomic_load(&g_draining);
}

/* ---- the server on a loop thread ---- */





/* Closes the server from its loop, waits for the loop to end and checks
 * that nothing was left open. */

/* ---- a blocking client ---- */

typedef struct client {
    int fd;
    char buf[1 << 16];
    size_t len; /* unread bytes in buf */
} client;

typedef struct response {
    int code;
    char ctype[128];
    char connection[32];
    char allow[64];
    long content_length;
    char *body;     /* NUL-terminated, owned */
    size_t body_len;
} response;

static client *client_connect(int port)
{
    client *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c->fd >= 0);
    struct timeval tv = {5, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof a), 0);
    return c;
}

static void client_close(client *c)
{
    close(c->fd);
    free(c);
}

static void send_all(client *c, const char *data, size_t n)
{
    while (n > 0) {
        ssize_t w = send(c->fd, data, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail_msg("send: %s", strerror(errno));
        data += w;
        n -= (size_t)w;
    }
}

static void send_str(client *c, const char *s)
{
    send_all(c, s, strlen(s));
}

/* Reads more bytes into c->buf; returns how many, 0 on EOF, -1 on error. */
static ssize_t fill(client *c)
{
    if (c->len == sizeof c->buf)
        return -1;
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0)
            c->len += (size_t)r;
        return r;
    }
}

static void consume(client *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

static void header_value(const char *head, const char *name, char *out, size_t cap)
{
    out[0] = '\0';
    size_t nl = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p, "\r\n")) {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t n = e ? (size_t)(e - v) : strlen(v);
            if (n >= cap)
                n = cap - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return;
        }
    }
}

/* Reads one response (no body if head_only). 0, or -1 on EOF/timeout. */
static int read_response(client *c, response *r, int head_only)
{
    memset(r, 0, sizeof *r);
    char *end;
    for (;;) {
        c->buf[c->len < sizeof c->buf ? c->len : sizeof c->buf - 1] = '\0';
        end = c->len ? strstr(c->buf, "\r\n\r\n") : NULL;
        if (end)
            break;
        if (fill(c) <= 0)
            return -1;
    }
    size_t head_len = (size_t)(end - c->buf) + 4;
    char *head = malloc(head_len + 1);
    memcpy(head, c->buf, head_len);
    head[head_len] = '\0';
    consume(c, head_len);
    if (sscanf(head, "HTTP/1.1 %d", &r->code) != 1)
        fail_msg("bad status line: %.40s", head);
    char cl[32];
    header_value(head, "Content-Type", r->ctype, sizeof r->ctype);
    header_value(head, "Connection", r->connection, sizeof r->connection);
    header_value(head, "Allow", r->allow, sizeof r->allow);
    header_value(head, "Content-Length", cl, sizeof cl);
    free(head);
    r->content_length = cl[0] ? atol(cl) : -1;
    size_t want = head_only || r->content_length < 0 ? 0 : (size_t)r->content_length;
    r->body = malloc(want + 1);
    size_t got = 0;
    while (got < want) {
        if (c->len == 0 && fill(c) <= 0) {
            free(r->body);
            r->body = NULL;
            return -1;
        }
        size_t n = c->len < want - got ? c->len : want - got;
        memcpy(r->body + got, c->buf, n);
        consume(c, n);
        got += n;
    }
    r->body[want] = '\0';
    r->body_len = want;
    return 0;
}

static void response_free(response *r)
{
    free(r->body);
    r->body = NULL;
}

/* After the server is done with the connection: EOF, with nothing more. */
static void assert_eof(client *c)
{
    assert_int_equal(c->len, 0);
    assert_int_equal(fill(c), 0);
}

/* One request on a fresh connection; returns the response. */
static void roundtrip(oml_test_http_server *s, const char *req, response *r, int head_only)
{
    client *c = client_connect(s->port);
    send_str(c, req);
    assert_int_equal(read_response(c, r, head_only), 0);
    client_close(c);
}

/* ---- tests ---- */

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    omld_config_defaults(&g_cfg);
    memset(&g_model, 0, sizeof g_model);
    g_model.heads = 2;
    g_model.alpha[0] = 0.5f;
    g_model.alpha[1] = 0.5f;
    atomic_store(&g_ready, 1);
    atomic_store(&g_draining, 0);
    return 0;
}

static void test_routes(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    response r;

    int before = atomic_load(&g_gathers);
    roundtrip(s, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.ctype, "application/json");
    assert_int_equal((long)r.body_len, r.content_length);
    assert_true(r.body[0] == '{');
    assert_non_null(strstr(r.body, "\"version\":\"9.9.9\""));
    assert_non_null(strstr(r.body, "\"alpha\":[0.5,0.5]"));
    assert_non_null(strstr(r.body, "\"ready\":true"));
    assert_int_equal(atomic_load(&g_gathers), before + 1); /* one gather per request */
    response_free(&r);

    roundtrip(s, "GET /status?pretty=1 HTTP/1.1\r\n\r\n", &r, 0); /* query string ignored */
    assert_int_equal(r.code, 200);
    assert_string_equal(r.ctype, "application/json");
    response_free(&r);

    roundtrip(s, "GET /metrics HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 200);
    assert_non_null(strstr(r.ctype, "text/plain; version=0.0.4"));
    assert_non_null(strstr(r.body, "# TYPE omld_ready gauge\nomld_ready 1\n"));
    assert_non_null(strstr(r.body, "omld_build_info{version=\"9.9.9\"} 1\n"));
    response_free(&r);

    roundtrip(s, "GET /livez HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "ok\n");
    assert_non_null(strstr(r.ctype, "text/plain"));
    response_free(&r);

    roundtrip(s, "GET /readyz HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    atomic_store(&g_ready, 0);
    roundtrip(s, "GET /readyz HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 503);
    response_free(&r);
    atomic_store(&g_ready, 1);
    atomic_store(&g_draining, 1);
    roundtrip(s, "GET /readyz HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 503);
    response_free(&r);
    roundtrip(s, "GET /livez HTTP/1.1\r\n\r\n", &r, 0); /* alive while draining */
    assert_int_equal(r.code, 200);
    response_free(&r);
    atomic_store(&g_draining, 0);

    roundtrip(s, "GET /nope HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 404);
    response_free(&r);
    roundtrip(s, "GET / HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 200); /* the dashboard, see test_dashboard.c */
    assert_non_null(strstr(r.ctype, "text/html"));
    response_free(&r);
    roundtrip(s, "GET /statusx HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 404);
    response_free(&r);
    roundtrip(s, "GET http://localhost/livez HTTP/1.1\r\n\r\n", &r, 0); /* absolute form */
    assert_int_equal(r.code, 200);
    response_free(&r);

    roundtrip(s, "POST /status HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 405);
    assert_string_equal(r.allow, "GET, HEAD");
    response_free(&r);
    roundtrip(s, "DELETE /metrics HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 405);
    response_free(&r);

    oml_test_http_stop(s);
}

static void test_head(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    client *c = client_connect(s->port);
    response r;
    /* HEAD: the headers of GET, no body; the connection stays usable. */
    send_str(c, "HEAD /status HTTP/1.1\r\n\r\n");
    assert_int_equal(read_response(c, &r, 1), 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.ctype, "application/json");
    assert_true(r.content_length > 10);
    response_free(&r);
    send_str(c, "GET /livez HTTP/1.1\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "ok\n"); /* not the JSON of a HEAD body */
    response_free(&r);
    client_close(c);
    oml_test_http_stop(s);
}

static void test_keep_alive(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    client *c = client_connect(s->port);
    response r;
    send_str(c, "GET /livez HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.connection, "keep-alive");
    response_free(&r);
    send_str(c, "GET /status HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    /* Connection: close is honoured: the answer, then EOF. */
    send_str(c, "GET /livez HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.connection, "close");
    response_free(&r);
    assert_eof(c);
    client_close(c);

    /* HTTP/1.0 closes by default, stays with keep-alive. */
    c = client_connect(s->port);
    send_str(c, "GET /livez HTTP/1.0\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    assert_eof(c);
    client_close(c);
    c = client_connect(s->port);
    send_str(c, "GET /livez HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_string_equal(r.connection, "keep-alive");
    response_free(&r);
    send_str(c, "GET /livez HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    client_close(c);

    /* A client that half-closes right after its request still gets the answer. */
    c = client_connect(s->port);
    send_str(c, "GET /status HTTP/1.1\r\n\r\n");
    shutdown(c->fd, SHUT_WR);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    assert_eof(c);
    client_close(c);
    oml_test_http_stop(s);
}

static void test_pipelined(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    client *c = client_connect(s->port);
    response r;
    /* Three requests in one write, byte-split fourth: answers in order. */
    send_str(c, "GET /livez HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n"
                "GET /status HTTP/1.1\r\n\r\nGET /rea");
    usleep(20000);
    send_str(c, "dyz HTTP/1.1\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "ok\n");
    response_free(&r);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 404);
    response_free(&r);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.ctype, "application/json");
    response_free(&r);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    assert_string_equal(r.body, "ready\n");
    response_free(&r);
    /* Requests after a Connection: close one are not answered. */
    send_str(c, "GET /livez HTTP/1.1\r\nConnection: close\r\n\r\nGET /status HTTP/1.1\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    assert_eof(c);
    client_close(c);
    oml_test_http_stop(s);
}

/* Many pipelined /metrics requests that the client reads only after sending
 * them all: the server pauses parsing when its write queue grows and
 * resumes as the client reads; every answer arrives, in order. */
static void test_backpressure(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    client *c = client_connect(s->port);
    enum { N = 400 };
    char req[64];
    size_t rl = (size_t)snprintf(req, sizeof req, "GET /metrics HTTP/1.1\r\n\r\n");
    char *all = malloc(rl * N + 32);
    for (int i = 0; i < N; i++)
        memcpy(all + rl * (size_t)i, req, rl);
    static const char last[] = "GET /livez HTTP/1.1\r\n\r\n";
    memcpy(all + rl * N, last, sizeof last - 1);
    send_all(c, all, rl * N + sizeof last - 1);
    free(all);
    usleep(100000); /* let the server's queue fill while nobody reads */
    response r;
    size_t first_len = 0;
    for (int i = 0; i < N; i++) {
        if (read_response(c, &r, 0) != 0)
            fail_msg("answer %d missing", i);
        assert_int_equal(r.code, 200);
        if (i == 0)
            first_len = r.body_len;
        assert_true(r.body_len > 1000);
        assert_true(r.body_len >= first_len - 64 && r.body_len <= first_len + 64);
        response_free(&r);
    }
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_string_equal(r.body, "ok\n");
    response_free(&r);
    client_close(c);
    oml_test_http_stop(s);
}

static void test_bad_requests(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    response r;
    client *c;

    /* Garbage: 400, then the connection ends. */
    c = client_connect(s->port);
    send_str(c, "HELLO WORLD\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 400);
    assert_string_equal(r.connection, "close");
    response_free(&r);
    assert_eof(c);
    client_close(c);

    c = client_connect(s->port);
    send_all(c, "GET /livez HTTP/1.1\r\nBad Header\x01\r\n\r\n", 36);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 400);
    response_free(&r);
    assert_eof(c);
    client_close(c);

    /* A good request then garbage on the same connection: 200, then 400. */
    c = client_connect(s->port);
    send_str(c, "GET /livez HTTP/1.1\r\n\r\n\x7f\x45LF garbage\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 400);
    response_free(&r);
    assert_eof(c);
    client_close(c);

    /* Oversized headers (10 KiB > 8 KiB): refused with 431, then closed. */
    c = client_connect(s->port);
    size_t big = 10 * 1024;
    char *req = malloc(big + 64);
    int n = snprintf(req, 64, "GET /status HTTP/1.1\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    send_str(c, req);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 431);
    response_free(&r);
    assert_eof(c);
    client_close(c);
    /* The same bytes spread over many small headers. */
    c = client_connect(s->port);
    size_t off = (size_t)snprintf(req, big + 64, "GET /status HTTP/1.1\r\n");
    while (off < big)
        off += (size_t)snprintf(req + off, big + 64 - off, "X-%zu: v\r\n", off);
    memcpy(req + off, "\r\n", 3);
    send_str(c, req);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 431);
    response_free(&r);
    assert_eof(c);
    client_close(c);
    /* A long URL counts too. */
    c = client_connect(s->port);
    memcpy(req, "GET /", 5);
    memset(req + 5, 'u', big);
    memcpy(req + 5 + big, " HTTP/1.1\r\n\r\n", 14);
    send_str(c, req);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_true(r.code == 431 || r.code == 414);
    response_free(&r);
    assert_eof(c);
    client_close(c);
    free(req);

    /* Just under the bound is fine. */
    c = client_connect(s->port);
    req = malloc(8192);
    n = snprintf(req, 64, "GET /livez HTTP/1.1\r\nX-Big: ");
    memset(req + n, 'a', 7000);
    memcpy(req + n + 7000, "\r\n\r\n", 5);
    send_str(c, req);
    free(req);
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    client_close(c);

    /* A body is refused with 413 (length or chunked), then closed. */
    c = client_connect(s->port);
    send_str(c, "GET /status HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 413);
    response_free(&r);
    assert_eof(c);
    client_close(c);
    c = client_connect(s->port);
    send_str(c, "POST /status HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    assert_int_equal(read_response(c, &r, 0), 0);
    assert_int_equal(r.code, 413);
    response_free(&r);
    assert_eof(c);
    client_close(c);

    /* The server is still fine. */
    roundtrip(s, "GET /livez HTTP/1.1\r\n\r\n", &r, 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    oml_test_http_stop(s);
}

/* Past 64 open connections a new one is closed at once; room comes back
 * when one goes. */
static void test_connection_limit(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    enum { LIMIT = 64 };
    client *cs[LIMIT];
    response r;
    for (int i = 0; i < LIMIT; i++) {
        cs[i] = client_connect(s->port);
        send_str(cs[i], "GET /livez HTTP/1.1\r\n\r\n");
        assert_int_equal(read_response(cs[i], &r, 0), 0);
        assert_int_equal(r.code, 200);
        response_free(&r);
    }
    client *extra = client_connect(s->port);
    /* Closed or never answered: an answer on loopback would take
     * microseconds, so half a second (not the 5 s default) tells. */
    struct timeval brief = {0, 500000};
    setsockopt(extra->fd, SOL_SOCKET, SO_RCVTIMEO, &brief, sizeof brief);
    assert_true(fill(extra) <= 0); /* closed without an answer */
    client_close(extra);
    client_close(cs[0]);
    usleep(50000); /* the server sees the EOF and closes its side */
    cs[0] = client_connect(s->port);
    send_str(cs[0], "GET /livez HTTP/1.1\r\n\r\n");
    assert_int_equal(read_response(cs[0], &r, 0), 0);
    assert_int_equal(r.code, 200);
    response_free(&r);
    for (int i = 0; i < LIMIT; i++)
        client_close(cs[i]);
    oml_test_http_stop(s);
}

/* Closing with connections open (idle keep-alive, half a request, one the
 * client never reads from) ends every one of them and leaves no handle. */
static void test_close_with_connections(void **state)
{
    (void)state;
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    client *idle = client_connect(s->port);
    response r;
    send_str(idle, "GET /livez HTTP/1.1\r\n\r\n");
    assert_int_equal(read_response(idle, &r, 0), 0);
    response_free(&r);
    client *half = client_connect(s->port);
    send_str(half, "GET /status HTTP/1.1\r\nHost:");
    client *fresh = client_connect(s->port);
    usleep(50000); /* let the loop accept them */
    oml_test_http_stop(s);
    assert_eof(idle);
    assert_int_equal(fill(half), 0);
    assert_int_equal(fill(fresh), 0);
    client_close(idle);
    client_close(half);
    client_close(fresh);
}

static void test_start_errors(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    omld_http *h = NULL;
    char err[256] = "";
    assert_int_equal(omld_http_start(&h, &loop, "nonsense", fake_gather, NULL, NULL, err,
                                     sizeof err), -1);
    assert_non_null(strstr(err, "nonsense"));
    err[0] = '\0';
    assert_int_equal(omld_http_start(&h, &loop, "127.0.0.1:notaport", fake_gather, NULL, NULL,
                                     err, sizeof err), -1);
    assert_true(err[0] != '\0');

    /* A port in use: refused up front, nothing left on the loop. */
    oml_test_http_server *s = oml_test_http_start(fake_gather, NULL, NULL);
    char hp[64];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", s->port);
    err[0] = '\0';
    assert_int_equal(omld_http_start(&h, &loop, hp, fake_gather, NULL, NULL, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "in use"));
    oml_test_http_stop(s);
    assert_null(h);
    assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0);
    assert_int_equal(uv_loop_close(&loop), 0);

    /* [::1]:0 when IPv6 loopback exists; the bracket form parses either way. */
    assert_int_equal(uv_loop_init(&loop), 0);
    if (omld_http_start(&h, &loop, "[::1]:0", fake_gather, NULL, NULL, err, sizeof err) == 0) {
        omld_http_close(h);
        uv_run(&loop, UV_RUN_DEFAULT);
    } else {
        assert_null(strstr(err, "HOST:PORT"));
    }
    assert_int_equal(uv_loop_close(&loop), 0);

    omld_http_close(NULL); /* accepted */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_routes, setup),
        cmocka_unit_test_setup(test_head, setup),
        cmocka_unit_test_setup(test_keep_alive, setup),
        cmocka_unit_test_setup(test_pipelined, setup),
        cmocka_unit_test_setup(test_backpressure, setup),
        cmocka_unit_test_setup(test_bad_requests, setup),
        cmocka_unit_test_setup(test_connection_limit, setup),
        cmocka_unit_test_setup(test_close_with_connections, setup),
        cmocka_unit_test_setup(test_start_errors, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
