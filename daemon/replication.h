/* replication.h - what primaries and read replicas share: the layout of
 * the Redis keys and stream entries (replicate.c writes them, replica.c
 * reads them) and the figures both show on /status and /metrics.
 *
 * Under PREFIX (the path of redis://HOST:PORT/PREFIX):
 *   PREFIX:log             a stream of committed log records, a run of
 *                          consecutive ones per entry: id "LSN-0" (LSN its
 *                          last record's), fields t (the primary's commit
 *                          time of that record, Unix ms) and r: per record
 *                          u64 LSN | u8 type | u32 payload length | the
 *                          payload as in the write-ahead log (little-endian);
 *                          and one entry per published serving view, id
 *                          "LSN-*" (after the record it follows), fields v
 *                          (the view's model version) and t.
 *   PREFIX:checkpoint      the newest checkpoint file's bytes, and
 *   PREFIX:checkpoint_lsn  its log position (decimal); both set by one MSET.
 *   PREFIX:primary         the primary's RPC address (HOST:PORT), named in a
 *                          replica's NOT_PRIMARY refusals.
 *   PREFIX:lease           the node id of the primary allowed to write, with
 *                          a time to live (lease.h); PREFIX:owner the node
 *                          id that took it last, without one.
 *   PREFIX:shards:N        a hash: field i the RPC address of the replica
 *                          serving shard i of N (option shard = i/N). */
#ifndef OMLD_REPLICATION_H
#define OMLD_REPLICATION_H

#include <stddef.h>
#include <stdint.h>

#define OMLD_REPL_PREFIX_MAX 128
#define OMLD_REPL_RECORD_HEADER 13 /* u64 LSN | u8 type | u32 length, before each payload */

enum omld_repl_role { OMLD_REPL_NONE = 0, OMLD_REPL_PRIMARY, OMLD_REPL_REPLICA };
enum omld_repl_lease { OMLD_REPL_LEASE_NONE = 0, OMLD_REPL_LEASE_HELD, OMLD_REPL_LEASE_NOT_HELD };

typedef struct omld_repl_stats {
    int role;                     /* enum omld_repl_role */
    int connected;                /* the Redis connection is up */
    char target[300];             /* the redis://HOST:PORT/PREFIX configured */
    char primary[128];            /* replica: the primary's address as published ("" unknown) */
    /* primary */
    uint64_t records_published;   /* log records XADDed (acknowledged by Redis) */
    uint64_t records_dropped;     /* committed but never XADDed: Redis away or the queue full */
    uint64_t versions_published;  /* view markers XADDed */
    uint64_t checkpoints_published;
    uint64_t queue_bytes;         /* committed records waiting for Redis */
    int lease;                    /* enum omld_repl_lease */
    char node_id[24];             /* this data_dir's node id (lease.h) */
    uint64_t promoted_lsn;        /* a promoted replica: the log position it took over at */
    /* replica */
    int bootstrapped;             /* a state from the primary is being served */
    uint64_t bootstraps;          /* times it loaded the primary's checkpoint (or started empty) */
    uint64_t applied_lsn;         /* the last log record applied */
    uint64_t head_lsn;            /* the newest record in the stream, as last seen */
    uint64_t lag_records;         /* head_lsn - applied_lsn */
    double lag_seconds;           /* 0 when caught up, else how old the last applied record is */
    uint64_t records_applied;     /* since start */
    double apply_delay_seconds;   /* the last batch: applied minus its last record's commit time */
    char last_error[480];
} omld_repl_stats;

/* Splits "redis://HOST:PORT/PREFIX" (as omld_ingest_parse_url, naming
 * `option`). 0, or -1 with err. */
int omld_repl_parse_url(const char *option, const char *url, char *host, size_t host_cap,
                        int *port, char *prefix, size_t prefix_cap, char *err, size_t errlen);

/* Removes the files in dir whose names start with prefix (a replica's
 * old checkpoints and log segments: not the primary's state). */
void omld_repl_remove_files(const char *dir, const char *prefix);

#endif
