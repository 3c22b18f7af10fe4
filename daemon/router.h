/* router.h - omld as a router (option router = redis://HOST:PORT/PREFIX,
 * router_shards = N): clients that know one address send it Retrieve; it
 * fans each out over the N shard replicas (the shard map PREFIX:shards:N
 * in Redis; omld.proto SHARDS) and answers the merged hits, which equal
 * one node's. Status and Health are its own; writes are refused with
 * NOT_PRIMARY, other queries with UNAVAILABLE naming what to do.
 *
 * Each retrieval runs on the threadpool with a set of connections to the
 * shards taken from a pool (one set per request in flight, kept for the
 * next; a set whose connection failed is dropped and the map read again).
 * Loop thread, but the work. */
#ifndef OMLD_ROUTER_H
#define OMLD_ROUTER_H

#include <uv.h>

#include "omld.pb-c.h"
#include "options.h"
#include "reply.h"

typedef struct omld_router omld_router;

/* *out NULL when cfg->router is empty. 0, or -1 with err (a bad URL). */
int omld_router_create(omld_router **out, uv_loop_t *loop, const omld_config *cfg, char *err,
                       size_t errlen);

/* The server's forward hook (server.h): 1 when taken (done(ctx, reply)
 * later, on the loop, reply owned by the callee), 0 when answered in now. */
int omld_router_forward(void *ctl, const Omld__Request *req, omld_reply *now,
                        void (*done)(void *ctx, omld_reply *reply), void *ctx);

/* After the server drained (no retrieval in flight): closes the pooled
 * connections and frees. Accepts NULL. */
void omld_router_stop(omld_router *r);

#endif
