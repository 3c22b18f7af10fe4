/* gateway.c - an in-process RPC connection over a socketpair (gateway.h). */
#include "gateway.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "server.h"

struct omld_gateway_link {
    uv_pipe_t pipe;
    uv_write_t write;
    oml_frame_reader rd;
    uint8_t *out;              /* the frame being written (owned) */
    omld_gateway_done done;    /* the call in flight, or NULL */
    void *arg;
    int rights;
    int closed;                /* the server's end went away, or omld_gateway_close */
    int writing;
    int freed_by_close;        /* omld_gateway_close was called */
    char rbuf[65536];
};

static void on_closed(uv_handle_t *h)
{
    omld_gateway_link *g = h->data;
    oml_frame_reader_free(&g->rd);
    free(g->out);
    free(g);
}

/* Ends the call in flight with payload (NULL: the link failed). */
static void finish_call(omld_gateway_link *g, const uint8_t *payload, size_t n)
{
    omld_gateway_done done = g->done;
    g->done = NULL;
    if (done)
        done(g->arg, payload, n);
}

/* The server's end is gone (or the stream broke): fail the call in flight. */
static void link_fail(omld_gateway_link *g)
{
    if (!g->closed) {
        g->closed = 1;
        uv_read_stop((uv_stream_t *)&g->pipe);
    }
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
        if (g->done == NULL) { /* an answer nobody asked for: the stream is out of step */
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
    omld_gateway_link *g = w->data;
    g->writing = 0;
    free(g->out);
    g->out = NULL;
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
    g->write.data = g;
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
    if (!omld_gateway_usable(g) || g->done != NULL || g->writing || n > UINT32_MAX)
        return -1;
    g->out = malloc(OML_FRAME_HEADER_BYTES + n);
    if (g->out == NULL)
        return -1;
    oml_frame_write_header(g->out, (uint32_t)n);
    memcpy(g->out + OML_FRAME_HEADER_BYTES, payload, n);
    uv_buf_t b = uv_buf_init((char *)g->out, (unsigned)(OML_FRAME_HEADER_BYTES + n));
    if (uv_write(&g->write, (uv_stream_t *)&g->pipe, &b, 1, on_write) != 0) {
        free(g->out);
        g->out = NULL;
        return -1;
    }
    g->writing = 1;
    g->done = done;
    g->arg = arg;
    return 0;
}

void omld_gateway_close(omld_gateway_link *g)
{
    if (g == NULL || g->freed_by_close)
        return;
    g->freed_by_close = 1;
    g->done = NULL;
    uv_close((uv_handle_t *)&g->pipe, on_closed); /* a pending write is cancelled first */
}
