/* replicate.h - a primary's publisher for read replicas (option
 * `replicate`, redis://HOST:PORT/PREFIX; key layout in replication.h).
 *
 * The learner thread hands over what it appends to the write-ahead log
 * (omld_replicate_record), says when the log committed it (..._commit) or
 * undid it (..._discard), when a serving view was published at a log
 * position (..._version) and when a checkpoint is durable (..._checkpoint).
 * Those calls only copy into a queue and wake the loop: they never wait
 * for Redis. The loop XADDs the committed records in order, then the view
 * markers, and MSETs each checkpoint (read off the loop). With Redis away,
 * or more than replicate_queue_bytes waiting, records are dropped and
 * counted: a replica then finds a gap in the LSNs and bootstraps again
 * from a newer checkpoint. The learner never slows for Redis. */
#ifndef OMLD_REPLICATE_H
#define OMLD_REPLICATE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "options.h"
#include "replication.h"

typedef struct omld_replicate omld_replicate;

/* Starts publishing to url (redis://HOST:PORT/PREFIX: cfg->replicate, or a
 * promoted replica's replica_of; a no-op returning 0 with *out NULL when
 * it is empty) with cfg's replicate_* options; rpc_addr: the RPC address
 * replicas name as the primary; node_id: this data_dir's (lease.h), the
 * lease holder's name. -1 with err for a bad URL. Loop thread. */
int omld_replicate_start(omld_replicate **out, uv_loop_t *loop, const omld_config *cfg,
                         const char *url, const char *rpc_addr, const char *node_id, char *err,
                         size_t errlen);

/* The lease (replicate_lease_ms > 0): called on the loop when a take
 * succeeded for the first time (held 1), and whenever one was refused
 * (held 0, why: one sentence naming the holder; superseded or another
 * primary alive). Without a lease it is called at once with held 1. */
typedef void (*omld_replicate_lease_fn)(void *arg, int held, const char *why);
void omld_replicate_set_lease_cb(omld_replicate *r, omld_replicate_lease_fn fn, void *arg);

/* Any thread: 1 while this primary may write (no lease configured, or
 * it is held and was renewed in time; NULL: 1). The learner refuses writes
 * and does not rehearse otherwise. */
int omld_replicate_may_write(omld_replicate *r);
/* Any thread: why it may not (one sentence). */
void omld_replicate_lease_why(omld_replicate *r, char *out, size_t cap);

/* Loop thread: every record up to this log position is in Redis (in the
 * stream, or in a checkpoint stored there): replicate_sync holds a write's
 * answer until its records are. */
uint64_t omld_replicate_synced_lsn(omld_replicate *r);

/* Learner thread; each accepts NULL. payload is copied. */
void omld_replicate_record(omld_replicate *r, uint8_t type, uint64_t lsn, const void *payload,
                           size_t len);
void omld_replicate_commit(omld_replicate *r);  /* the records handed over are committed */
void omld_replicate_discard(omld_replicate *r); /* ... were undone (a failed commit) */
void omld_replicate_version(omld_replicate *r, uint64_t version, uint64_t lsn);
void omld_replicate_checkpoint(omld_replicate *r, const char *path, uint64_t lsn);
/* 1 once (then 0 until it is wanted again) when replicas need a checkpoint
 * newer than what Redis holds: records were dropped, or this primary
 * started (records committed before a crash may never have been sent).
 * The learner then takes one at its next record, or within 200 ms when
 * idle. */
int omld_replicate_checkpoint_wanted(omld_replicate *r);
/* The same without taking the request: an idle learner looks (any thread). */
int omld_replicate_checkpoint_due(omld_replicate *r);

/* Loop thread: a copy of the figures (role NONE for NULL). */
void omld_replicate_stats_get(omld_replicate *r, omld_repl_stats *out);

/* Loop thread, after the learner stopped: closes the connection; what was
 * not XADDed yet is dropped. Frees itself once its handles are closed. */
void omld_replicate_stop(omld_replicate *r);

#endif
