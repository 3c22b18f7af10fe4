/* role.h - which replication role this omld plays, and its change: none,
 * a primary publishing to Redis (option replicate), a read replica
 * (replica_of), or a replica promoted to primary (promote_replica.h).
 *
 * It owns the node id (lease.h), the publisher (replicate.h), the replica
 * (replica.h) and the promotion (promote_replica.h), and decides the engine's
 * options: a replica keeps its state in data_dir/replica, emptied at every
 * start (it bootstraps from Redis); a promoted one keeps it there, and
 * <data_dir>/promoted (the URL) makes a restart with the same options run
 * as that stream's primary again. A primary with a lease is ready (its
 * RPC server gets the engine, the address file is written) only once it
 * holds the lease; refused (superseded, or another primary alive), it does
 * not start. Loop thread, but init (before the loop runs). */
#ifndef OMLD_ROLE_H
#define OMLD_ROLE_H

#include <stddef.h>
#include <uv.h>

#include "engine.h"
#include "options.h"
#include "replication.h"

struct omld_server;
struct omld_replicate;
typedef struct omld_role omld_role;

/* From the options and data_dir (already locked): the node id, the marker,
 * and *engine_cfg (a copy of cfg for the engine; cfg is borrowed for the
 * role's life). Nothing in data_dir is touched for a bad URL. 0, or -1 with
 * err. */
int omld_role_init(omld_role **out, const omld_config *cfg, omld_config *engine_cfg, char *err,
                   size_t errlen);

/* A primary's publisher starts connecting (before recovery, so Redis is
 * being reached meanwhile); rpc_addr is what replicas name. 0 or -1. */
int omld_role_publish(omld_role *r, uv_loop_t *loop, const char *rpc_addr, char *err,
                      size_t errlen);
struct omld_replicate *omld_role_publisher(omld_role *r); /* NULL: none */

/* After omld_engine_run: a replica starts following (and takes
 * promote_replica); a primary waits for its lease. ready(arg) is called
 * once, when writes may be taken (at once without a lease or as a
 * replica); refused(arg, why) if the lease is refused before that. */
typedef struct omld_role_events {
    void (*ready)(void *arg);
    void (*refused)(void *arg, const char *why);
    void (*leading)(void *arg); /* promoted in this run: this omld writes now (may be NULL) */
    void *arg;
} omld_role_events;
int omld_role_run(omld_role *r, omld_engine *engine, struct omld_server *server,
                  const omld_role_events *ev, char *err, size_t errlen);

/* This omld writes (or will, once it holds its lease): not a replica
 * following a primary. After omld_role_init. */
int omld_role_leads(const omld_role *r);

/* The figures for /status and /metrics (role NONE: neither). */
void omld_role_stats(omld_role *r, omld_repl_stats *out);

/* After the engine stopped: closes the publisher, the replica and the
 * promotion; then omld_role_free once the loop ran out. */
void omld_role_stop(omld_role *r);
void omld_role_free(omld_role *r); /* accepts NULL */

#endif
