/* server.h - the RPC side of omld on the libuv loop: listeners, connections,
 * framing, pipelining, backpressure and dispatch.
 *
 * One omld_server listens on cfg->listen (TCP, port 0 = ephemeral) and, if
 * cfg->unix_socket is set, on a Unix socket. Each connection reads frames
 * (proto/frame.h), decodes and validates them, and routes each request:
 * status/health are answered on the loop, queries run on libuv's threadpool
 * against a refcounted view, mutations go to the engine's queue. Answers
 * are written strictly in request order per connection. Reading pauses when
 * a connection has max_pipeline requests in flight, when its unsent output
 * exceeds a bound, or when the engine queue is full (backpressure; resumed
 * from the engine's wake callback), or when it holds max_conn_input_bytes
 * of unanswered request bytes. Idle, slow (partial frame) and non-reading
 * clients are closed by a sweep timer; see server.c LIMITS. With tokens set
 * (omld_server_set_tokens) a connection must Auth first. Thread: the loop
 * thread only. */
#ifndef OMLD_SERVER_H
#define OMLD_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "engine.h"
#include "hostport.h"
#include "metrics.h"
#include "options.h"
#include "tokens.h"

#ifdef OML_VERSION
#define OMLD_VERSION OML_VERSION /* project(omld VERSION ...) in CMakeLists.txt */
#else
#define OMLD_VERSION "0.1.0"
#endif

typedef struct omld_server omld_server;

/* Binds and starts listening. cfg, engine and metrics are borrowed and must
 * outlive the server; start_ns (omld_now_ns() at process start) is the
 * origin of StatusResponse.uptime_ms. Installs the engine's wake callback.
 * engine may be NULL: main.c binds the listeners before the engine recovers
 * the data directory (a busy port must fail the start before anything in it
 * is touched) and attaches the engine with omld_server_set_engine() once
 * recovery is done. 0 or -1 with err (nothing is left open on failure once the
 * loop has run). */
int omld_server_start(omld_server **out, uv_loop_t *loop, const omld_config *cfg,
                      omld_engine *engine, omld_metrics *metrics, uint64_t start_ns, char *err,
                      size_t errlen);

/* Attaches the engine (views, store, models, wake callback) to a server
 * started without one (main.c: after recovery). Until then connections are
 * accepted but not read. Loop thread. */
void omld_server_set_engine(omld_server *s, omld_engine *engine);

/* Turns authorisation on (tokens->n > 0) for every connection accepted
 * from now on; tokens is borrowed and must outlive the server. Call before
 * the loop runs. NULL or empty: off (Auth is answered read_write = true). */
void omld_server_set_tokens(omld_server *s, const omld_tokens *tokens);

/* A read replica: every writing request is refused with NOT_PRIMARY and
 * this text (borrowed; its owner may rewrite it on the loop thread, e.g.
 * when the primary's address becomes known). NULL: a primary. */
void omld_server_set_not_primary(omld_server *s, const char *why);

/* The context the CONTROL rows of ops.c get (a replica's promote_replica.c; NULL:
 * they are answered CONFLICT). Loop thread. */
void omld_server_set_control(omld_server *s, void *ctl);

/* A router (router.h): every request but the INLINE rows (Status, Health,
 * Auth) is handed to fn, which answers it in now (returning 0) or later
 * through done (returning 1). Loop thread. */
void omld_server_set_forward(omld_server *s,
                             int (*fn)(void *ctx, const Omld__Request *req, omld_reply *now,
                                       void (*done)(void *, omld_reply *), void *done_ctx),
                             void *ctx);

/* TLS on the TCP listener for every connection accepted from now on (t
 * borrowed, must outlive the server; the Unix socket and the gateway's
 * links stay plain); a plain client is answered UNAVAILABLE "this port
 * speaks TLS" (request_id 0) and closed. Call before the loop runs. 0 or
 * -1 (out of memory). */
struct omld_tls;
int omld_server_set_tls(omld_server *s, struct omld_tls *t);

/* The trainer that answers the ADMIN route (TrainStart/Status/Cancel,
 * ListModels, DeleteModel); borrowed, must outlive the server. NULL (the
 * default): those requests are UNAVAILABLE. */
struct omld_trainer;
void omld_server_set_trainer(omld_server *s, struct omld_trainer *t);

/* Serves one more connection over fd, a connected stream socket (one end
 * of a socketpair: the HTTP/JSON gateway's link, gateway.h), with the
 * rights of enum omld_rights already granted (the HTTP side checked the
 * bearer token). On success the connection owns fd; peer names it in logs.
 * 0, or a libuv error (UV_ECANCELED while draining): then fd is still the
 * caller's. Loop thread. */
int omld_server_adopt(omld_server *s, uv_os_sock_t fd, int rights, const char *peer);

/* The bound TCP address (the real port when cfg->listen asked for port 0). */
void omld_server_rpc_address(const omld_server *s, struct sockaddr_storage *out);

/* 1 once omld_server_drain() has been called. */
int omld_server_draining(const omld_server *s);

/* Graceful stop: closes the listeners (and unlinks the Unix socket), stops
 * reading, answers every request already decoded (frames buffered but not
 * yet decoded get UNAVAILABLE, except Health and Status), then closes each
 * connection once its answers are written. Connections still open after a
 * grace period (a client that does not read) are closed hard; answers still
 * being computed for them are discarded when they come back. When every
 * handle is closed, done(arg) runs on the loop thread and the server frees
 * itself: s is invalid after done. Call once. */
void omld_server_drain(omld_server *s, void (*done)(void *arg), void *arg);

#endif
