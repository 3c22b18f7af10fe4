/* lease.h - the primary lease in Redis: who may write a replication
 * stream (key layout in replication.h).
 *
 * PREFIX:lease holds the node id of the one omld allowed to write, with a
 * time to live (SET NX PX replicate_lease_ms); its holder renews it (PEXPIRE)
 * while it lives, and stops accepting writes when it could not renew it in
 * time. PREFIX:owner holds the node id of the last omld that took the
 * lease as a primary or by promotion, without expiry: a primary that finds
 * another owner was superseded (a replica was promoted while it was away)
 * and never writes again, even after the lease expired. Every command that
 * writes the stream or the checkpoint is fenced: run by a script only
 * while PREFIX:lease still holds the sender's id, so a deposed primary's
 * late commands are refused by Redis itself.
 *
 * A node id is 16 hex digits drawn once per data_dir and kept in
 * <data_dir>/node_id. Pure helpers: the callers send the commands on their
 * own hiredis connections (replicate.c, promote_replica.c). */
#ifndef OMLD_LEASE_H
#define OMLD_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "replication.h"

#define OMLD_NODE_ID_LEN 16

struct redisReply;

/* Reads <dir>/node_id, or draws one and writes it (temp + rename). out
 * holds OMLD_NODE_ID_LEN + 1 bytes. 0, or -1 with err. */
int omld_node_id(const char *dir, char *out, char *err, size_t errlen);

enum omld_lease_mode {
    OMLD_LEASE_PRIMARY = 0, /* take or renew; refused when another node owns the stream */
    OMLD_LEASE_PROMOTE      /* take when free (SET NX PX) and become the owner */
};

/* The keys of one prefix, built once. */
typedef struct omld_lease_keys {
    char lease[OMLD_REPL_PREFIX_MAX + 16];
    char owner[OMLD_REPL_PREFIX_MAX + 16];
    char primary[OMLD_REPL_PREFIX_MAX + 16];
} omld_lease_keys;

void omld_lease_keys_init(omld_lease_keys *k, const char *prefix);

/* The argv of the EVAL that takes or renews the lease for node `me`
 * (ttl_ms as text in ttl, 24 bytes). argv holds 9 entries; returns argc. */
int omld_lease_take_argv(const omld_lease_keys *k, const char *me, int mode, char ttl[24],
                         const char **argv);

/* The argv of the EVAL that gives the lease up if `me` holds it, and puts
 * back `prev_owner` ("" : none) as the owner (a promotion that failed).
 * argv holds 7 entries; returns argc. */
int omld_lease_release_argv(const omld_lease_keys *k, const char *me, const char *prev_owner,
                            const char **argv);

/* Wraps a writing command (argv[0..argc)) into the fenced EVAL: out gets
 * argc + 5 entries (lens too, when len is not NULL; NULL lens: strlen).
 * Returns the new argc. */
int omld_lease_fence_argv(const omld_lease_keys *k, const char *me, int argc, const char **argv,
                          const size_t *len, const char **out, size_t *out_len);

/* What a take answered. */
typedef struct omld_lease_answer {
    int ok;                   /* 1: `me` holds the lease now */
    int superseded;           /* 0 ok; another node owns the stream (mode PRIMARY) */
    char holder[64];          /* the node holding the lease (or owning the stream) */
    char holder_addr[128];    /* its RPC address as published under PREFIX:primary */
    char prev_owner[64];      /* PROMOTE: the owner before this take ("" none) */
    int64_t ttl_ms;           /* held by another: how long it still lives (-1 unknown) */
    char error[200];          /* Redis refused the script (its text), or the reply was not
                                 one; then ok = 0 and holder is empty */
} omld_lease_answer;

/* Parses the reply of omld_lease_take_argv's EVAL (NULL: the connection
 * went). */
void omld_lease_parse(const struct redisReply *reply, omld_lease_answer *out);

/* One sentence for a take that failed, naming the key and the holder. */
void omld_lease_describe(const omld_lease_answer *a, const omld_lease_keys *k, char *out,
                         size_t cap);

#endif
