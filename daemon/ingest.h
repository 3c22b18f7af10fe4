/* ingest.h - constraints and items from a Redis Stream (option `ingest`,
 * redis://HOST:PORT/STREAM), for web services that already publish their
 * click events to a log.
 *
 * omld reads the stream as consumer `ingest_consumer` of the consumer group
 * `ingest_group` (created at the stream's start if missing) and sends each
 * entry down an in-process RPC connection (gateway.h) as one request, so it
 * is validated, logged and learned like any other. An entry is XACKed only
 * once the daemon has answered it, which for a write is after the
 * write-ahead log committed it; so an entry is never lost: a crash before
 * the XACK leaves it pending, and it is read again at the next start. Each
 * request carries the idempotency key "redis:STREAM:ENTRY-ID", so a
 * redelivered entry that the log already holds is not learned twice.
 *
 * Entry layout: ingest_entry.h (triplets, pairs, and items with their
 * metadata as meta.KEY fields).
 * An entry the daemon refuses for what it is (an unknown id, a bad vector, a
 * missing field: every code but UNAVAILABLE, RESOURCE_EXHAUSTED and
 * INTERNAL) is copied to the dead-letter stream (`ingest_dead_letter`,
 * default STREAM:dead) with source_id, code, field and message, then
 * XACKed, and the stream goes on. A refusal that may pass later
 * (UNAVAILABLE, RESOURCE_EXHAUSTED, INTERNAL, the connection to the daemon
 * lost) leaves the entry pending and reading restarts from the pending
 * entries after a second. A lost Redis connection is retried every second.
 * Every second XINFO GROUPS gives the group's pending count and lag
 * (entries not yet delivered), shown on /status and /metrics.
 * Loop thread only. */
#ifndef OMLD_INGEST_H
#define OMLD_INGEST_H

#include <stdint.h>
#include <uv.h>

#include "options.h"

struct omld_server;

typedef struct omld_ingest omld_ingest;

typedef struct omld_ingest_stats {
    int configured;            /* `ingest` is set */
    int connected;             /* both Redis connections are up */
    char stream[128], group[64], consumer[64], dead_letter[160];
    uint64_t entries_read;     /* entries delivered to omld (pending ones read again included) */
    uint64_t entries_learned;  /* answered OK and XACKed */
    uint64_t entries_dead;     /* refused, dead-lettered and XACKed */
    uint64_t retries;          /* times reading restarted from the pending entries */
    int64_t pending;           /* the group's pending entries (XINFO), -1 unknown */
    int64_t lag;               /* entries in the stream not yet delivered to the group, -1 unknown */
    char last_error[160];
} omld_ingest_stats;

/* Parses "redis://HOST:PORT/STREAM" (HOST a name or an IPv4 address; the
 * port 1..65535; the stream 1..127 bytes of no whitespace). 0, or -1 with
 * err naming what is wrong. */
int omld_ingest_parse_url(const char *url, char *host, size_t host_cap, int *port, char *stream,
                          size_t stream_cap, char *err, size_t errlen);

/* Starts consuming per cfg (a no-op returning 0 with *out NULL when
 * cfg->ingest is empty) through rpc. -1 with err for a bad URL. */
int omld_ingest_start(omld_ingest **out, uv_loop_t *loop, const omld_config *cfg,
                      struct omld_server *rpc, char *err, size_t errlen);

/* A copy of the figures (zeroed, configured 0, for NULL). */
void omld_ingest_stats_get(const omld_ingest *g, omld_ingest_stats *out);

/* Stops reading and closes everything; entries not yet XACKed stay pending
 * in Redis. Frees itself once its handles are closed. Accepts NULL. */
void omld_ingest_stop(omld_ingest *g);

#endif
