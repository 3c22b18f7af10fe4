/* server.c - the RPC server: listeners, start, drain (see server.h).
 *
 * DESIGN
 * Loop thread only. The server owns the TCP listener, the optional Unix
 * socket, the connections' sweep timer and the drain timer; connections
 * are conn.c's, the routes a request takes route.c's, what a request is
 * ops.c's and dispatch.c's.
 *
 * Listeners are bound before the engine exists (a busy port must fail the
 * start before the data directory is touched); connections accepted
 * during recovery are not read until omld_server_set_engine. Over
 * max_connections a connection is accepted and closed at once, so the
 * client is told rather than left hanging.
 *
 * Drain: the listeners close, every connection stops reading, answers
 * what it decoded and closes once written; a grace timer closes what a
 * client does not read (DRAIN_GRACE_MS). The server frees itself once its
 * last handle and connection are closed, then calls done. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostport.h"
#include "log.h"
#include "server_int.h"

#define DRAIN_GRACE_MS 10000 /* then connections still open are closed hard */

static void wake_noop(void *arg)
{
    (void)arg;
}

static void server_free(omld_server *s)
{
    if (s->engine)
        omld_engine_set_wake(s->engine, wake_noop, NULL);
    free(s->tls_refusal);
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
    omld_server_maybe_done(s);
}

void omld_server_maybe_done(omld_server *s)
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
        omld_conn_close(c); /* frees are deferred to close callbacks: the list stays intact */
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
        omld_conn_pump(c); /* stops reading; closes the idle ones */
    omld_server_maybe_done(s);
}

void omld_server_set_trainer(omld_server *s, omld_trainer *t)
{
    s->trainer = t;
}

int omld_server_set_tls(omld_server *s, struct omld_tls *t)
{
    const char *msg = "this port speaks TLS (tls_cert is set): connect with TLS, e.g. omlctl "
                      "--tls --cacert FILE";
    free(s->tls_refusal);
    s->tls_refusal = NULL;
    if (omld_reply_pack_error(0, 0, OMLD__STATUS__CODE__UNAVAILABLE, NULL, msg, &s->tls_refusal,
                              &s->tls_refusal_len) != 0)
        return -1;
    s->tls = t;
    return 0;
}

void omld_server_set_not_primary(omld_server *s, const char *why)
{
    s->not_primary = why;
}

void omld_server_set_control(omld_server *s, void *ctl)
{
    s->control = ctl;
}

void omld_server_set_forward(omld_server *s,
                             int (*fn)(void *ctx, const Omld__Request *req, omld_reply *now,
                                       void (*done)(void *, omld_reply *), void *done_ctx),
                             void *ctx)
{
    s->forward = fn;
    s->forward_ctx = ctx;
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
        server_free(s);
    return -1;
}

/* The limits of connections and requests, from the options. */
static void server_limits(omld_server *s, const omld_config *cfg)
{
    s->max_frame = (uint32_t)cfg->max_frame_bytes;
    s->max_pipeline = (uint32_t)cfg->max_pipeline;
    s->co_max = (int)cfg->query_group_jobs;
    s->max_connections = (uint64_t)cfg->max_connections;
    s->max_in = (uint64_t)cfg->max_conn_input_bytes;
    if (s->max_in < (uint64_t)s->max_frame + OML_FRAME_HEADER_BYTES)
        s->max_in = (uint64_t)s->max_frame + OML_FRAME_HEADER_BYTES; /* a frame always fits */
    s->out_high = (uint64_t)cfg->max_conn_output_bytes;
    s->out_low = s->out_high / 8;
    s->idle_ns = (uint64_t)cfg->idle_timeout_ms * 1000000u;
    s->request_ns = (uint64_t)cfg->request_timeout_ms * 1000000u;
    s->min_rate = (uint64_t)cfg->min_request_rate;
    s->lim = omld_limits_of(cfg);
    /* Until the engine is attached, answer bounds assume the largest model. */
    s->dims = (omld_answer_dims){.dim = (uint64_t)cfg->dim, .heads = OML_MAX_HEADS, .emb = 1024,
                                 .default_k = (uint64_t)cfg->default_k,
                                 .meta = (uint64_t)cfg->max_metadata_entries *
                                         ((uint64_t)cfg->max_metadata_key_bytes +
                                          (uint64_t)cfg->max_metadata_value_bytes + 12)};
    s->qctx.lim = &s->lim;
}

/* The drain timer and, when a timeout is set, the sweep of idle and slow
 * clients: every quarter of the shortest timeout (20 ms to 1 s), unref'd
 * so that it alone does not keep the loop running. */
static void start_timers(omld_server *s, uv_loop_t *loop, const omld_config *cfg)
{
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
        uv_timer_start(&s->sweep_timer, omld_conn_sweep, every, every);
        uv_unref((uv_handle_t *)&s->sweep_timer);
    }
}

/* The TCP listener on cfg->listen; the address bound (port 0 resolved) in
 * s->bound. 0 or -1 with err. */
static int listen_tcp(omld_server *s, uv_loop_t *loop, const omld_config *cfg, char *err,
                      size_t errlen)
{
    struct sockaddr_storage addr;
    if (omld_addr_resolve(cfg->listen, &addr, err, errlen) != 0)
        return -1;
    uv_tcp_init(loop, &s->tcp);
    s->tcp.data = s;
    s->tcp_open = 1;
    s->handles_open++;
    int rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->tcp, 511, omld_conn_accept);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", cfg->listen, uv_strerror(rc));
        return -1;
    }
    int len = (int)sizeof s->bound;
    uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&s->bound, &len);
    return 0;
}

/* The Unix socket listener on cfg->unix_socket, replacing a stale socket
 * left by a previous run (never a file that is not a socket). 0 or -1 with
 * err. */
static int listen_unix(omld_server *s, uv_loop_t *loop, const omld_config *cfg, char *err,
                       size_t errlen)
{
    struct stat st;
    if (lstat(cfg->unix_socket, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "unix_socket %s exists and is not a socket",
                     cfg->unix_socket);
            return -1;
        }
        unlink(cfg->unix_socket); /* stale, from a previous run */
    }
    uv_pipe_init(loop, &s->pipe, 0);
    s->pipe.data = s;
    s->pipe_open = 1;
    s->handles_open++;
    int rc = uv_pipe_bind(&s->pipe, cfg->unix_socket);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->pipe, 511, omld_conn_accept);
    if (rc != 0) {
        snprintf(err, errlen, "cannot listen on unix socket %s: %s", cfg->unix_socket,
                 uv_strerror(rc));
        return -1;
    }
    return 0;
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
    server_limits(s, cfg);
    start_timers(s, loop, cfg);
    if (listen_tcp(s, loop, cfg, err, errlen) != 0 ||
        (cfg->unix_socket[0] && listen_unix(s, loop, cfg, err, errlen) != 0))
        return start_fail(s);
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
    s->qctx.metrics = s->metrics;
    const oml_config *mc = omld_engine_config(engine);
    s->dims.heads = (uint64_t)mc->layers + 1;
    s->dims.emb = (uint64_t)mc->emb;
    omld_engine_set_wake(engine, omld_route_wake, s);
    for (omld_conn *c = s->conns; c; c = c->next)
        omld_conn_pump(c); /* connections accepted during recovery start being read */
}


