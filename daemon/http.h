/* http.h - the status endpoint: a small HTTP/1.1 server on the loop.
 *
 * Requests are parsed by nodejs/http-parser (Debian libhttp-parser-dev), not
 * by hand. Routes: GET /status (JSON), GET /status/history (JSON: the
 * last OMLD_HISTORY_SAMPLES one-second samples kept by history.h,
 * {"interval_ms":1000,"capacity":900,"now_ms":..,"samples":[{"t_ms":..,
 * ...}, ...]} oldest first, t_ms and now_ms in ms since start;
 * ?since=MS returns only the samples with t_ms > MS, a since that is not
 * digits is 400; 404 when no history is attached), GET /metrics
 * (Prometheus text),
 * GET /livez (200 while the process runs), GET /readyz (200 once a view is
 * published and while not draining, else 503); 404 for other paths, 405
 * for other methods, 400 for a request that does not parse; 401 without a
 * valid bearer token when tokens are configured (omld_http_set_tokens),
 * except on /livez, /readyz and the dashboard's files (the page asks for
 * the token itself). Keep-alive is
 * honoured; header bytes are bounded (8 KiB) and bodies are refused (413)
 * but on the API's paths (omld_http_set_api: POST /v1/{operation}, GET
 * /openapi.json; api.c), whose answers may come later: parsing of the
 * connection waits for them, so answers stay in request order.
 * At most 64 connections: when they are all open, a new one replaces the
 * one that has gone longest without a complete request (probes always get
 * in).
 * Thread: the loop thread only. */
#ifndef OMLD_HTTP_H
#define OMLD_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "history.h"
#include "options.h"
#include "tokens.h"
#include "status.h"

typedef struct omld_http omld_http;

/* Fills *in (and any storage it points into, owned by the callee and valid
 * until the next call) with the current state. Called per request. */
typedef void (*omld_http_gather_fn)(void *arg, omld_status_input *in);

/* Listens on host_port ("HOST:PORT"; port 0 = ephemeral). The bound
 * address is written to bound (may be NULL). 0 or -1 with err. */
int omld_http_start(omld_http **out, uv_loop_t *loop, const char *host_port,
                    omld_http_gather_fn gather, void *arg, struct sockaddr_storage *bound,
                    char *err, size_t errlen);

/* Requires "Authorization: Bearer TOKEN" (any configured token, compared in
 * constant time) on every path but /livez, /readyz and the dashboard's
 * files when tokens->n > 0;
 * refusals are answered 401 and counted in *unauthorized (may be NULL).
 * Borrowed; call before the loop runs. */
void omld_http_set_tokens(omld_http *h, const omld_tokens *tokens,
                          atomic_uint_fast64_t *unauthorized);

/* Serves HTTPS only (tls.h; borrowed, must outlive the server): a plain
 * client is answered 400 "use https://". Call before the loop runs. */
struct omld_tls;
void omld_http_set_tls(omld_http *h, struct omld_tls *tls);

/* Serves GET /status/history from history (borrowed; read on the loop
 * thread; NULL detaches). Call before the loop runs; the history must
 * outlive the server. Same authorisation as /status. */
void omld_http_set_history(omld_http *h, const omld_history *history);

/* Serves the HTTP/JSON API (api.c: POST /v1/{operation}, GET
 * /openapi.json) through rpc, the RPC server (borrowed; must outlive h),
 * whose frame limit is max_frame. A request's JSON body may be up to
 * OMLD_HTTP_BODY_FACTOR x max_frame bytes (JSON spells a float in up to
 * 15 characters where protobuf takes 4). Call before the loop runs. */
#define OMLD_HTTP_BODY_FACTOR 4
struct omld_server;
void omld_http_set_api(omld_http *h, struct omld_server *rpc, uint32_t max_frame);

/* Stops listening and closes every connection; frees itself once the loop
 * has closed the handles. Accepts NULL. */
void omld_http_close(omld_http *h);

#endif
