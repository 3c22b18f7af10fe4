/* gateway.h - an in-process RPC connection: how the HTTP/JSON API (api.c)
 * reaches the operation table.
 *
 * A link is one end of a socketpair whose other end the RPC server serves
 * as one of its own connections (omld_server_adopt), so a request from HTTP
 * takes exactly the path a protobuf frame from a socket takes: dispatch,
 * validation, limits, authorisation, backpressure, the learner's queue and
 * the query pool. Calls may be pipelined (up to OMLD_GATEWAY_MAX_CALLS in
 * flight); their answers come back in call order, as on any connection. A
 * link the server closed (idle sweep, drain) reports the failure to every
 * call in flight, and the next call on a closed link fails at once: open a
 * new one. Loop thread only. */
#ifndef OMLD_GATEWAY_H
#define OMLD_GATEWAY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define OMLD_GATEWAY_MAX_CALLS 1024

struct omld_server;

typedef struct omld_gateway_link omld_gateway_link;

/* The answer to a call: the Response payload (borrowed for the callback's
 * duration), or payload NULL when the link failed (closed by the server,
 * I/O error, an answer larger than the frame limit). */
typedef void (*omld_gateway_done)(void *arg, const uint8_t *payload, size_t n);

/* A link to s with the given rights (enum omld_rights). 0, or a libuv error. */
int omld_gateway_open(omld_gateway_link **out, uv_loop_t *loop, struct omld_server *s,
                      int rights, uint32_t max_frame);

/* The rights the link was opened with. */
int omld_gateway_rights(const omld_gateway_link *g);

/* 1 while the link can take a call. */
int omld_gateway_usable(const omld_gateway_link *g);

/* Sends one Request payload (copied); done(arg, ...) runs once, on the
 * loop thread, never from inside this call. 0, or -1 (OMLD_GATEWAY_MAX_CALLS
 * in flight, out of memory, or the link is closed): done will not run. */
int omld_gateway_call(omld_gateway_link *g, const uint8_t *payload, size_t n,
                      omld_gateway_done done, void *arg);

/* Calls in flight (0 for NULL). */
int omld_gateway_in_flight(const omld_gateway_link *g);

/* Closes the link; the calls in flight are dropped (done never runs). Frees
 * itself once libuv has closed the handle. Accepts NULL. */
void omld_gateway_close(omld_gateway_link *g);

#endif
