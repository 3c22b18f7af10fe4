/* options.h - the daemon's configuration: one table row per option.
 *
 * Every option has a name, a type, bounds, a default and a one-line
 * description; the same table parses the config file and the command line,
 * validates, prints `omld --help` and `omld --print-config`, and will
 * generate deploy/omld.conf.example. Precedence: defaults < --config FILE <
 * other flags. Config file lines are `name = value`; `#` starts a comment.
 * The option `tokens` holds secrets: --print-config writes it commented out
 * and without its value. */
#ifndef OMLD_OPTIONS_H
#define OMLD_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#define OMLD_STR_MAX 256

typedef struct omld_config {
    char listen[OMLD_STR_MAX];      /* HOST:PORT of the RPC listener */
    char unix_socket[OMLD_STR_MAX]; /* optional Unix socket path ("" = none) */
    char http[OMLD_STR_MAX];        /* HOST:PORT of the status endpoint */
    char data_dir[OMLD_STR_MAX];
    char preset[OMLD_STR_MAX];      /* model preset: default | paper */
    char log_level[OMLD_STR_MAX];   /* error | warn | info | debug */
    char fsync[OMLD_STR_MAX];       /* always | everysec | no */
    int64_t dim, layers, hidden, emb, seed, basis;
    double eta, tau, beta, s, prox;
    double rehearse, rehearse_idle; /* rehearsed triplets per new one: at once, in idle time */
    int64_t replay;                 /* triplets kept for rehearsal */
    int64_t idempotency_keys;
    int64_t checkpoint_background;
    int64_t huge_pages;
    char ingest[OMLD_STR_MAX], ingest_group[OMLD_STR_MAX], ingest_consumer[OMLD_STR_MAX],
        ingest_dead_letter[OMLD_STR_MAX];
    int64_t ingest_batch;
    char replicate[OMLD_STR_MAX], replica_of[OMLD_STR_MAX]; /* replicate.c, replica.c */
    int64_t replicate_maxlen, replicate_queue_bytes, replicate_lease_ms, replicate_sync;
    char shard[OMLD_STR_MAX];       /* "i/n": a replica indexing shard i of n ("" every item) */
    char router[OMLD_STR_MAX];      /* redis://HOST:PORT/PREFIX: a router (router.c) */
    int64_t router_shards;
    int64_t max_items, max_frame_bytes, max_batch, max_connections, max_k;
    int64_t default_k, max_pipeline;
    int64_t max_metadata_entries, max_metadata_key_bytes, max_metadata_value_bytes;
    int64_t checkpoint_every, checkpoint_ms;
    int64_t wal_salvage;            /* 1: cut a log damaged in the middle (recovery) */
    double default_threshold;
    double max_feature_abs;         /* |feature| bound at validation and when applying */
    int64_t queue_capacity, publish_every, publish_ms;
    int64_t ann_min_items;          /* inverted lists from this many items (0: never) */
    double ann_target_recall;       /* the lists' calibrated recall (0: an eighth of the rows) */
    int64_t rerank_min_items;       /* fresh views from this many items (0: never) */
    int64_t rerank_candidates;      /* candidates per head a fresh view's query re-ranks */
    double index_duty;
    int64_t index_cache_items;      /* slots whose input projection the indexer keeps */
    int64_t first_view_threads;     /* threads of a start's first view build (0: cores) */
    int64_t indexer_nice;           /* the live indexer's nice value above the process's */
    int64_t query_group_jobs;       /* groupable classify jobs on the pool before requests wait (0: never, the default) */              /* share of a core model-only index rebuilds may take */
    /* connection limits (server.c) */
    int64_t max_conn_input_bytes, max_conn_output_bytes;
    int64_t idle_timeout_ms, request_timeout_ms, min_request_rate;
    /* authorisation: "rw:SECRET,ro:SECRET" and/or a file of such lines */
    char tokens[OMLD_STR_MAX];
    char tokens_file[OMLD_STR_MAX];
    /* TLS on both TCP ports (tls.c): PEM files, both or neither */
    char tls_cert[OMLD_STR_MAX];
    char tls_key[OMLD_STR_MAX];
    char tls_client_ca[OMLD_STR_MAX];
} omld_config;

enum omld_opt_type { OMLD_OPT_STR, OMLD_OPT_INT, OMLD_OPT_REAL };

typedef struct omld_option {
    const char *name;
    enum omld_opt_type type;
    size_t offset;         /* into omld_config */
    double min, max;       /* bounds for numbers (inclusive); for strings, max length */
    const char *def;       /* default, as text; "" for the preset's own value */
    const char *help;
} omld_option;

/* The table, terminated by a row with name == NULL. */
extern const omld_option omld_options[];

/* Fills every option with its default. */
void omld_config_defaults(omld_config *c);

/* Sets one option from text. Returns 0, or -1 with a message naming the
 * option (and where, e.g. "omld.conf:12") in err. */
int omld_config_set(omld_config *c, const char *name, const char *value, const char *where,
                    char *err, size_t errlen);

/* Reads a config file. Returns 0 or -1 with err naming file and line. */
int omld_config_load_file(omld_config *c, const char *path, char *err, size_t errlen);

/* Parses argv (argv[0] skipped): --config FILE is applied first, then every
 * other --name VALUE / --name=VALUE in order. Sets *help / *print when
 * --help / --print-config are given. Returns 0 or -1 with err. */
int omld_config_parse_args(omld_config *c, int argc, char **argv, int *help, int *print,
                           char *err, size_t errlen);

/* Cross-option checks (e.g. a HOST:PORT that is not one). 0 or -1 with err. */
int omld_config_validate(const omld_config *c, char *err, size_t errlen);

/* Writes "WHERE: message" (WHERE may be NULL) into err and returns -1:
 * the one way the daemon's start-up code reports a bad setting. */
int omld_config_fail(char *err, size_t errlen, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* `omld --help`: every option with default, bounds and description. */
void omld_config_print_help(FILE *f);
/* `omld --print-config`: the effective configuration as a loadable file. */
void omld_config_print(FILE *f, const omld_config *c);

/* Parses the option shard ("i/n", 0 <= i < n <= 1024; "" gives 0/0: no
 * sharding). 0, or -1 with err (may be NULL) naming the option. */
int omld_shard_parse(const char *text, uint32_t *i, uint32_t *n, char *err, size_t errlen);

#endif
