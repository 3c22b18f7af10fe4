/* gateway.c - an in-process RPC connection over a socketpair (gateway.h). */
#include "gateway.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "server.h"

/* A call waiting for its answer (answers come in call order). */
typedef struct pending {
    omld_gateway_done done;
    void *arg;
} pending;

/* One frame being written. */
typedef struct gw_write {
    uv_write_t req;
    omld_gateway_link *g;
    uint8_t frame[];
} gw_write;

struct omld_gateway_link {
    uv_pipe_t pipe;
    oml_frame_reader rd;
    pending q[OMLD_GATEWAY_MAX_CALLS]; /* a ring: the calls in flight, oldest first */
    uint32_t q_head, q_n;
    int rights;
    int closed;                /* the server's end went away */
    int freed_by_close;        /* omld_gateway_close was called */
    char rbuf[65536];
};

static void on_closed(uv_handle_t *h)
{
    omld_gateway_link *g = h->data;
    oml_frame_reader_free(&g->rd);
    free(g);
}

/* Ends the oldest call with payload (NULL: the link failed). */
static void finish_call(omld_gateway_link *g, const uint8_t *payload, size_t n)
{
    pending p = g->q[g->q_head];
    g->q_head = (g->q_head + 1) % OMLD_GATEWAY_MAX_CALLS;
    g->q_n--;
    p.done(p.arg, payload, n);
}

/* The server's end is gone (or the stream broke): every call in flight
 * fails, oldest first. */
static void link_fail(omld_gateway_link *g)
{
    if (!g->closed) {
        g->closed = 1;
        uv_read_stop((uv_stream_t *)&g->pipe);
    }
    while (g->q_n > 0 && !g->freed_by_close)
        finish_call(g, NULL, 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    omld_gateway_link *g = h->data;
    *buf = uv_buf_init(g->rbuf, sizeof g->rbuf);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    omld_gateway_link *g = s->data;
    if (nread == 0 || g->freed_by_close)
        return;
    if (nread < 0 || oml_frame_reader_feed(&g->rd, buf->base, (size_t)nread) != 0) {
        link_fail(g);
        return;
    }
    const uint8_t *p;
    size_t n;
    int rc;
    while ((rc = oml_frame_reader_next(&g->rd, &p, &n)) == 1) {
        if (g->q_n == 0) { /* an answer nobody asked for: the stream is out of step */
            LOG_WARN("gateway", "an answer came with no request in flight; link closed");
            link_fail(g);
            return;
        }
        finish_call(g, p, n);
        if (g->freed_by_close || g->closed)
            return;
    }
    if (rc < 0)
        link_fail(g);
}

static void on_write(uv_write_t *w, int status)
{
    gw_write *gw = w->data;
    omld_gateway_link *g = gw->g;
    free(gw);
    if (status < 0 && !g->freed_by_close)
        link_fail(g);
}

int omld_gateway_open(omld_gateway_link **out, uv_loop_t *loop, omld_server *s, int rights,
                      uint32_t max_frame)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
        return UV_EMFILE;
    omld_gateway_link *g = calloc(1, sizeof *g);
    if (g == NULL) {
        close(fds[0]);
        close(fds[1]);
        return UV_ENOMEM;
    }
    g->rights = rights;
    oml_frame_reader_init(&g->rd, max_frame);
    uv_pipe_init(loop, &g->pipe, 0);
    g->pipe.data = g;
    int rc = uv_pipe_open(&g->pipe, fds[0]);
    if (rc == 0) {
        rc = omld_server_adopt(s, fds[1], rights, "http-gateway");
        if (rc != 0)
            close(fds[1]);
    } else {
        close(fds[0]);
        close(fds[1]);
    }
    if (rc == 0)
        rc = uv_read_start((uv_stream_t *)&g->pipe, on_alloc, on_read);
    if (rc != 0) {
        g->freed_by_close = 1;
        uv_close((uv_handle_t *)&g->pipe, on_closed);
        return rc;
    }
    *out = g;
    return 0;
}

int omld_gateway_rights(const omld_gateway_link *g)
{
    return g->rights;
}

int omld_gateway_usable(const omld_gateway_link *g)
{
    return g && !g->closed && !g->freed_by_close;
}

int omld_gateway_call(omld_gateway_link *g, const uint8_t *payload, size_t n,
                      omld_gateway_done done, void *arg)
{
    if (!omld_gateway_usable(g) || g->q_n == OMLD_GATEWAY_MAX_CALLS || n > UINT32_MAX)
        return -1;
    gw_write *w = malloc(sizeof *w + OML_FRAME_HEADER_BYTES + n);
    if (w == NULL)
        return -1;
    w->g = g;
    w->req.data = w;
    oml_frame_write_header(w->frame, (uint32_t)n);
    memcpy(w->frame + OML_FRAME_HEADER_BYTES, payload, n);
    uv_buf_t b = uv_buf_init((char *)w->frame, (unsigned)(OML_FRAME_HEADER_BYTES + n));
    if (uv_write(&w->req, (uv_stream_t *)&g->pipe, &b, 1, on_write) != 0) {
        free(w);
        return -1;
    }
    g->q[(g->q_head + g->q_n) % OMLD_GATEWAY_MAX_CALLS] = (pending){done, arg};
    g->q_n++;
    return 0;
}

int omld_gateway_in_flight(const omld_gateway_link *g)
{
    return g ? (int)g->q_n : 0;
}

void omld_gateway_close(omld_gateway_link *g)
{
    if (g == NULL || g->freed_by_close)
        return;
    g->freed_by_close = 1;
    g->q_n = 0; /* dropped: no callback runs after close */
    uv_close((uv_handle_t *)&g->pipe, on_closed); /* pending writes are cancelled first */
}
