/* replica.h - a read replica (option `replica_of`, redis://HOST:PORT/PREFIX;
 * key layout in replication.h).
 *
 * Bootstrap: the newest checkpoint under PREFIX:checkpoint becomes the
 * state (follow.c), or, when there is none and the stream still starts at
 * LSN 1, the empty state. Then PREFIX:log is read with XREAD from the
 * checkpoint's position, in batches, one at a time through the learner
 * thread: records applied, views published at the primary's markers with
 * the primary's version numbers. A missing LSN (the stream was trimmed
 * past this replica, or the primary dropped records while Redis was away)
 * means the state cannot follow: it bootstraps again from a checkpoint
 * newer than the gap, serving its last view meanwhile. Writes are refused
 * with NOT_PRIMARY naming the primary (PREFIX:primary). A shard (option
 * shard = i/n) writes its RPC address (rpc_addr) into the shard map,
 * PREFIX:shards:N field i. Loop thread only. */
#ifndef OMLD_REPLICA_H
#define OMLD_REPLICA_H

#include <uv.h>

#include "engine.h"
#include "options.h"
#include "replication.h"

struct omld_server;
typedef struct omld_replica omld_replica;

/* Starts following per cfg (a no-op returning 0 with *out NULL when
 * cfg->replica_of is empty); the server refuses writes from now on. -1
 * with err for a bad URL. */
int omld_replica_start(omld_replica **out, uv_loop_t *loop, const omld_config *cfg,
                       omld_engine *engine, struct omld_server *server, const char *rpc_addr,
                       char *err, size_t errlen);

/* A promotion (promote_replica.c): paused, it starts no read of the stream and no
 * bootstrap (one in flight still completes); 0 resumes. */
void omld_replica_pause(omld_replica *r, int paused);
/* 1 when nothing is in flight to the learner or Redis and it follows the
 * log (not waiting to bootstrap). */
int omld_replica_idle(const omld_replica *r);

/* A copy of the figures (role NONE for NULL). */
void omld_replica_stats_get(omld_replica *r, omld_repl_stats *out);

/* After the engine stopped: closes the connections; frees itself once its
 * handles are closed. Accepts NULL. */
void omld_replica_stop(omld_replica *r);

#endif
