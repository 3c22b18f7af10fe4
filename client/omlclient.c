/* omlclient.c - libomlclient: a blocking client for omld (see omlclient.h):
 * the connection, framing and the generic layer (send / recv / call). The
 * typed operations and pipelined helpers are in omlclient_ops.c.
 *
 * DESIGN
 * One omlc owns one non-blocking socket. Every wait (connect, each write
 * that would block, each read that finds nothing) is one poll() with the
 * connection's timeout, so "no progress within timeout_ms" is the rule, not
 * a deadline for the whole call. Frames are packed into one reusable write
 * buffer (4-byte big-endian header + Request) and answers are cut out of the
 * byte stream by the shared proto/frame.c reader. While a write waits for
 * room, whatever the daemon has already answered is read into the reader,
 * so a pipelining client and a daemon blocked on its own output cannot wait
 * on each other.
 * Request ids are 1, 2, ...; the ids of the requests sent and not yet
 * answered are kept in a FIFO, and each Response must carry the id at its
 * head. The daemon answers frames it cannot read (MALFORMED,
 * FRAME_TOO_LARGE) with request_id 0; such an answer is attributed to the
 * oldest outstanding request unless raw bytes were sent (omlc_send_raw),
 * whose frames the FIFO cannot count.
 * Any transport or protocol failure marks the connection broken: every
 * later call returns OMLC_EIO without touching the socket.
 * Thread: one thread at a time per omlc; no global state. */
#include "omlclient_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"

#define OMLC_DEFAULT_MAX_FRAME (64u * 1024u * 1024u)
#define OMLC_READ_CHUNK 65536


/* ---------------------------------------------------------------- errors */

const char *omlc_code_name(int code)
{
    switch (code) {
    case 0: return "OK";
    case 1: return "INVALID_ARGUMENT";
    case 2: return "NOT_FOUND";
    case 3: return "WRONG_DIMENSION";
    case 4: return "NON_FINITE";
    case 5: return "RESOURCE_EXHAUSTED";
    case 6: return "FRAME_TOO_LARGE";
    case 7: return "MALFORMED";
    case 8: return "UNAVAILABLE";
    case 9: return "INTERNAL";
    case 10: return "UNAUTHENTICATED";
    case 11: return "PERMISSION_DENIED";
    case 12: return "CONFLICT";
    case OMLC_ECONNECT: return "connect failed";
    case OMLC_EIO: return "I/O error";
    case OMLC_ETIMEOUT: return "timeout";
    case OMLC_EPROTO: return "protocol error";
    case OMLC_ENOMEM: return "out of memory";
    case OMLC_EARG: return "bad argument";
    default: return code > 0 ? "UNKNOWN_STATUS" : "unknown error";
    }
}

void omlc__err_clear(omlc_error *err)
{
    if (err) {
        err->code = 0;
        err->message[0] = '\0';
        err->field[0] = '\0';
    }
}

int omlc__err_set(omlc_error *err, int code, const char *field, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    }
    return code;
}

/* A transport failure: the connection is unusable from now on. */
int omlc__fail(omlc *c, omlc_error *err, int code, const char *fmt, ...)
{
    if (c)
        c->broken = 1;
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->field[0] = '\0';
    }
    return code;
}

/* ---------------------------------------------------------------- time + poll */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* poll() one fd for events until timeout_ms passes (EINTR-safe). Returns the
 * revents (> 0), 0 on timeout, -1 on error. */
int omlc__wait_fd(int fd, short events, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events, .revents = 0};
        int64_t left = deadline - now_ms();
        if (left < 0)
            left = 0;
        int rc = poll(&p, 1, (int)left);
        if (rc > 0)
            return p.revents ? p.revents : events;
        if (rc == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* ---------------------------------------------------------------- connect */

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Non-blocking connect with a poll() timeout. Returns the fd or -1 with
 * errno (ETIMEDOUT on timeout). */
static int connect_addr(const struct sockaddr *sa, socklen_t len, int family, int timeout_ms)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (set_nonblock(fd) != 0)
        goto bad;
    if (connect(fd, sa, len) != 0) {
        if (errno != EINPROGRESS && errno != EAGAIN)
            goto bad;
        int ev = omlc__wait_fd(fd, POLLOUT, timeout_ms);
        if (ev == 0) {
            errno = ETIMEDOUT;
            goto bad;
        }
        if (ev < 0)
            goto bad;
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
            goto bad;
        if (soerr != 0) {
            errno = soerr;
            goto bad;
        }
    }
    return fd;
bad:;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

static int connect_unix(const char *path, int timeout_ms, omlc_error *err, int *out_fd)
{
    struct sockaddr_un sun;
    memset(&sun, 0, sizeof sun);
    sun.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof sun.sun_path)
        return omlc__err_set(err, OMLC_EARG, NULL, "unix socket path '%s' is empty or too long", path);
    memcpy(sun.sun_path, path, n);
    int fd = connect_addr((const struct sockaddr *)&sun, (socklen_t)sizeof sun, AF_UNIX, timeout_ms);
    if (fd < 0)
        return omlc__err_set(err, errno == ETIMEDOUT ? OMLC_ETIMEOUT : OMLC_ECONNECT, NULL,
                       "connect unix:%s: %s", path, strerror(errno));
    *out_fd = fd;
    return 0;
}

/* The host of "HOST:PORT" / "[V6]:PORT" into host; the port after the
 * returned colon. NULL (err filled) if server is not that. */
static const char *split_server(const char *server, char *host, size_t cap, omlc_error *err)
{
    const char *colon = strrchr(server, ':');
    if (colon == NULL || colon[1] == '\0')
        return omlc__err_set(err, OMLC_EARG, NULL, "server '%s' is not HOST:PORT or unix:PATH",
                             server), NULL;
    const char *h = server;
    size_t hl = (size_t)(colon - server);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:7600 */
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= cap)
        return omlc__err_set(err, OMLC_EARG, NULL, "server '%s': bad host", server), NULL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    return colon;
}

static int connect_tcp(const char *server, int timeout_ms, omlc_error *err, int *out_fd)
{
    char host[256];
    const char *colon = split_server(server, host, sizeof host, err);
    if (colon == NULL)
        return err ? err->code : OMLC_EARG;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, colon + 1, &hints, &res);
    if (gai != 0)
        return omlc__err_set(err, OMLC_ECONNECT, NULL, "resolve %s: %s", server, gai_strerror(gai));
    int fd = -1, last = ECONNREFUSED;
    int64_t deadline = now_ms() + timeout_ms;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            last = ETIMEDOUT;
            break;
        }
        fd = connect_addr(ai->ai_addr, ai->ai_addrlen, ai->ai_family, (int)left);
        if (fd < 0)
            last = errno;
    }
    freeaddrinfo(res);
    if (fd < 0)
        return omlc__err_set(err, last == ETIMEDOUT ? OMLC_ETIMEOUT : OMLC_ECONNECT, NULL,
                       "connect %s: %s", server, strerror(last));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *out_fd = fd;
    return 0;
}

int omlc_connect(omlc **out, const char *server, int timeout_ms, omlc_error *err)
{
    return omlc_connect_tls(out, server, NULL, timeout_ms, err);
}

int omlc_connect_tls(omlc **out, const char *server, const omlc_tls *tls, int timeout_ms,
                     omlc_error *err)
{
    omlc__err_clear(err);
    if (out == NULL || server == NULL || timeout_ms <= 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_connect: need out, server and timeout_ms > 0");
    *out = NULL;
    omlc *c = calloc(1, sizeof *c);
    if (c == NULL)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    c->fd = -1;
    c->timeout_ms = timeout_ms;
    c->next_id = 1;
    c->max_frame = OMLC_DEFAULT_MAX_FRAME;
    oml_frame_reader_init(&c->rd, c->max_frame);
    int is_unix = strncmp(server, "unix:", 5) == 0;
    if (is_unix && tls) {
        omlc_close(c);
        return omlc__err_set(err, OMLC_EARG, NULL, "TLS is for TCP: the Unix socket %s is plain",
                             server);
    }
    int rc = is_unix ? connect_unix(server + 5, timeout_ms, err, &c->fd)
                     : connect_tcp(server, timeout_ms, err, &c->fd);
    char host[256];
    if (rc == 0 && tls)
        rc = split_server(server, host, sizeof host, err) == NULL
                 ? OMLC_EARG
                 : omlc__tls_start(c, server, host, tls, err);
    if (rc != 0) {
        omlc_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void omlc_close(omlc *c)
{
    if (c == NULL)
        return;
    omlc__tls_free(c);
    if (c->fd >= 0)
        close(c->fd);
    oml_frame_reader_free(&c->rd);
    free(c->fifo);
    free(c->wbuf);
    free(c);
}

void omlc_set_timeout(omlc *c, int timeout_ms)
{
    if (c && timeout_ms > 0)
        c->timeout_ms = timeout_ms;
}

/* The reader's limit can only be set at init: re-create it while it holds
 * no bytes (before the first answer, or between answers). */
static void apply_max_frame(omlc *c)
{
    if (c->max_pending && oml_frame_reader_buffered(&c->rd) == 0) {
        oml_frame_reader_free(&c->rd);
        oml_frame_reader_init(&c->rd, c->max_frame);
        c->max_pending = 0;
    }
}

void omlc_set_max_frame(omlc *c, uint32_t bytes)
{
    if (c == NULL)
        return;
    if (bytes > OML_FRAME_MAX_LIMIT)
        bytes = OML_FRAME_MAX_LIMIT;
    c->max_frame = bytes;
    c->max_pending = 1;
    apply_max_frame(c);
}

uint64_t omlc_last_model_version(const omlc *c)
{
    return c ? c->last_version : 0;
}

void omlc_last_totals(const omlc *c, omlc_totals *out)
{
    if (c && out)
        *out = c->totals;
}

/* ---------------------------------------------------------------- raw I/O */

/* Reads whatever is available (one recv) into the frame reader. Returns
 * >0 bytes read, 0 if nothing now (EAGAIN), or a negative OMLC_E*. */
static int read_some(omlc *c, omlc_error *err)
{
    uint8_t buf[OMLC_READ_CHUNK];
    for (;;) {
        ssize_t n = omlc__io_recv(c, buf, sizeof buf);
        if (n > 0) {
            if (oml_frame_reader_feed(&c->rd, buf, (size_t)n) != 0)
                return omlc__fail(c, err, OMLC_ENOMEM, "frame reader: out of memory or oversized frame");
            return (int)n;
        }
        if (n == 0) {
            c->peer_closed = 1;
            return omlc__fail(c, err, OMLC_EIO, "the daemon closed the connection");
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return omlc__fail(c, err, OMLC_EIO, "recv: %s", omlc__io_strerror(c, errno));
    }
}

/* Writes all len bytes, polling with the timeout whenever the socket is
 * full; answers that arrive meanwhile are buffered in the reader. */
static int write_all(omlc *c, const uint8_t *p, size_t len, omlc_error *err)
{
    while (len > 0) {
        ssize_t n = omlc__io_send(c, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return omlc__fail(c, err, OMLC_EIO, "send: %s", omlc__io_strerror(c, errno));
        short want = POLLOUT | (c->peer_closed ? 0 : POLLIN);
        int ev = omlc__wait_fd(c->fd, want, c->timeout_ms);
        if (ev == 0)
            return omlc__fail(c, err, OMLC_ETIMEOUT, "write: no progress in %d ms", c->timeout_ms);
        if (ev < 0)
            return omlc__fail(c, err, OMLC_EIO, "poll: %s", strerror(errno));
        if ((ev & POLLIN) && !(ev & POLLOUT)) {
            int rc = read_some(c, err);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int fifo_push(omlc *c, uint64_t id)
{
    if (c->fifo_len == c->fifo_cap) {
        size_t cap = c->fifo_cap ? c->fifo_cap * 2 : 64;
        uint64_t *f = malloc(cap * sizeof *f);
        if (f == NULL)
            return -1;
        for (size_t i = 0; i < c->fifo_len; i++)
            f[i] = c->fifo[(c->fifo_head + i) % c->fifo_cap];
        free(c->fifo);
        c->fifo = f;
        c->fifo_cap = cap;
        c->fifo_head = 0;
    }
    c->fifo[(c->fifo_head + c->fifo_len) % c->fifo_cap] = id;
    c->fifo_len++;
    return 0;
}

static void fifo_pop(omlc *c)
{
    c->fifo_head = (c->fifo_head + 1) % c->fifo_cap;
    c->fifo_len--;
}

/* ---------------------------------------------------------------- generic layer */

int omlc__check_usable(omlc *c, omlc_error *err)
{
    if (c == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "no connection");
    if (c->broken)
        return omlc__err_set(err, OMLC_EIO, NULL, "the connection failed earlier; reconnect");
    return 0;
}

int omlc_send(omlc *c, Omld__Request *req, omlc_error *err)
{
    omlc__err_clear(err);
    int rc = omlc__check_usable(c, err);
    if (rc != 0)
        return rc;
    if (req == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_send: no request");
    req->request_id = c->next_id;
    size_t n = omld__request__get_packed_size(req);
    if (n > UINT32_MAX - 4)
        return omlc__err_set(err, OMLC_EARG, NULL, "request of %zu bytes cannot be framed", n);
    if (n + 4 > c->wcap) {
        size_t cap = n + 4 > 4096 ? n + 4 : 4096;
        uint8_t *b = realloc(c->wbuf, cap);
        if (b == NULL)
            return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory (%zu-byte request)", n);
        c->wbuf = b;
        c->wcap = cap;
    }
    oml_frame_write_header(c->wbuf, (uint32_t)n);
    omld__request__pack(req, c->wbuf + 4);
    if (fifo_push(c, c->next_id) != 0)
        return omlc__err_set(err, OMLC_ENOMEM, NULL, "out of memory");
    c->next_id++;
    rc = write_all(c, c->wbuf, n + 4, err);
    /* Give a large buffer back so one big batch does not pin memory. */
    if (c->wcap > (1u << 20)) {
        free(c->wbuf);
        c->wbuf = NULL;
        c->wcap = 0;
    }
    return rc;
}

int omlc_send_raw(omlc *c, const void *buf, size_t len, omlc_error *err)
{
    omlc__err_clear(err);
    int rc = omlc__check_usable(c, err);
    if (rc != 0)
        return rc;
    if (buf == NULL && len > 0)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_send_raw: no buffer");
    c->raw_outstanding = 1;
    return write_all(c, buf, len, err);
}

/* Waits for the next whole frame and unpacks it. */
static int recv_frame(omlc *c, Omld__Response **out, omlc_error *err)
{
    apply_max_frame(c);
    for (;;) {
        const uint8_t *p;
        size_t len;
        int rc = oml_frame_reader_next(&c->rd, &p, &len);
        if (rc == 1) {
            Omld__Response *r = omld__response__unpack(NULL, len, p);
            if (r == NULL)
                return omlc__fail(c, err, OMLC_EPROTO, "a %zu-byte answer is not a valid Response", len);
            *out = r;
            return 0;
        }
        if (rc < 0)
            return omlc__fail(c, err, OMLC_EPROTO, "an answer is larger than %u bytes", c->max_frame);
        if (c->peer_closed)
            return omlc__fail(c, err, OMLC_EIO, "the daemon closed the connection");
        int ev = omlc__io_pending(c) ? POLLIN : omlc__wait_fd(c->fd, POLLIN, c->timeout_ms);
        if (ev == 0)
            return omlc__fail(c, err, OMLC_ETIMEOUT, "no answer in %d ms", c->timeout_ms);
        if (ev < 0)
            return omlc__fail(c, err, OMLC_EIO, "poll: %s", strerror(errno));
        rc = read_some(c, err);
        if (rc < 0)
            return rc;
    }
}

int omlc_recv(omlc *c, Omld__Response **resp, omlc_error *err)
{
    omlc__err_clear(err);
    if (resp)
        *resp = NULL;
    int rc = omlc__check_usable(c, err);
    if (rc != 0)
        return rc;
    if (resp == NULL)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_recv: no out pointer");
    if (c->fifo_len == 0 && !c->raw_outstanding)
        return omlc__err_set(err, OMLC_EARG, NULL, "omlc_recv: no request is waiting for an answer");
    Omld__Response *r = NULL;
    rc = recv_frame(c, &r, err);
    if (rc != 0)
        return rc;
    int code = r->status ? (int)r->status->code : 0;
    if (r->request_id == 0 && code != 0) {
        /* An answer to a frame the daemon could not read (MALFORMED,
         * FRAME_TOO_LARGE, an empty request): ours unless raw bytes went out. */
        if (!c->raw_outstanding && c->fifo_len > 0)
            fifo_pop(c);
    } else if (c->fifo_len > 0 && r->request_id == c->fifo[c->fifo_head]) {
        fifo_pop(c);
        c->raw_outstanding = 0; /* answers are in order: the raw frames are behind us */
    } else {
        uint64_t want = c->fifo_len ? c->fifo[c->fifo_head] : 0, got = r->request_id;
        omld__response__free_unpacked(r, NULL);
        return omlc__fail(c, err, OMLC_EPROTO, "answer for request %llu while waiting for %llu",
                    (unsigned long long)got, (unsigned long long)want);
    }
    if (r->status == NULL) {
        omld__response__free_unpacked(r, NULL);
        return omlc__fail(c, err, OMLC_EPROTO, "an answer without a status");
    }
    c->last_version = r->model_version;
    if (code != 0) {
        omlc__err_set(err, code, r->status->field, "%s", r->status->message[0] ? r->status->message
                                                                          : omlc_code_name(code));
    }
    *resp = r;
    return code;
}

int omlc_call(omlc *c, Omld__Request *req, Omld__Response **resp, omlc_error *err)
{
    if (resp)
        *resp = NULL;
    int rc = omlc_send(c, req, err);
    if (rc != 0)
        return rc;
    return omlc_recv(c, resp, err);
}

/* A call whose OK answer must carry body `want`. On OK *out owns it; on any
 * error *out is NULL. */
int omlc__call_expect(omlc *c, Omld__Request *req, Omld__Response__BodyCase want,
                       Omld__Response **out, omlc_error *err)
{
    Omld__Response *r = NULL;
    int rc = omlc_call(c, req, &r, err);
    *out = NULL;
    if (rc != 0) {
        if (r)
            omld__response__free_unpacked(r, NULL);
        return rc;
    }
    if (r->body_case != want) {
        int got = (int)r->body_case;
        omld__response__free_unpacked(r, NULL);
        return omlc__fail(c, err, OMLC_EPROTO, "OK answer with body %d, expected %d", got, (int)want);
    }
    *out = r;
    return 0;
}

