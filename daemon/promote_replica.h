/* promote_replica.h - making a read replica the primary (PromoteReplica, the
 * CONTROL row of ops.c; omlctl promote-replica).
 *
 * Steps, on the loop, one promotion at a time:
 *  1. take the primary lease for this node (lease.h, mode PROMOTE: SET NX
 *     PX, refused while the old primary's lease lives, UNAVAILABLE naming
 *     it); from here no one else can append to the stream;
 *  2. read the stream's last entry (XREVRANGE) and let the replica apply
 *     up to it, renewing the lease meanwhile; then pause it;
 *  3. start a publisher on the same prefix (the hooks' start), and have the
 *     learner write its state as the checkpoint at the last record applied
 *     and continue the same log from there (omld_engine_promote);
 *  4. hand the publisher to the daemon, which stops the replica and stops
 *     refusing writes (the hooks' promoted).
 * A failure before 4 gives the lease up (the old owner put back) and
 * resumes following. Loop thread only. */
#ifndef OMLD_PROMOTE_REPLICA_H
#define OMLD_PROMOTE_REPLICA_H

#include <uv.h>

#include "engine.h"
#include "omld.pb-c.h"
#include "options.h"
#include "replica.h"
#include "reply.h"

struct omld_replicate;
typedef struct omld_promote omld_promote;

typedef struct omld_promote_hooks {
    /* A publisher for the replica's prefix, holding no lease yet (NULL
     * with err). */
    struct omld_replicate *(*start)(void *arg, char *err, size_t errlen);
    /* The learner switched: pub publishes from now on, the replica must
     * stop; lsn is where the new primary's log continues from. */
    void (*promoted)(void *arg, struct omld_replicate *pub, uint64_t lsn);
    void *arg;
} omld_promote_hooks;

/* For a replica (cfg->replica_of set): node_id is this data_dir's, rpc_addr
 * what the answer names. Everything borrowed for its life. 0, or -1 with
 * err (a bad URL). */
int omld_promote_create(omld_promote **out, uv_loop_t *loop, const omld_config *cfg,
                        const char *node_id, const char *rpc_addr, omld_engine *engine,
                        omld_replica *replica, const omld_promote_hooks *hooks, char *err,
                        size_t errlen);

/* The CONTROL handler of promote_replica (ops.h): ctl is the omld_promote. */
int omld_promote_start(void *ctl, const Omld__Request *req, omld_reply *now,
                       void (*done)(void *ctx, omld_reply *reply), void *ctx);

/* Stops (a promotion under way is answered UNAVAILABLE); frees itself once
 * its handles are closed. Accepts NULL. */
void omld_promote_stop(omld_promote *p);

#endif
