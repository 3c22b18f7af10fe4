/* omlctl.h - what the omlctl_*.c files share: global options, exit codes,
 * option parsing, error reporting and the progress bar. Internal to omlctl. */
#ifndef OMLCTL_H
#define OMLCTL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "omlclient.h"

/* Exit codes (documented in `omlctl --help`). */
enum ctl_exit {
    CTL_EXIT_OK = 0,
    CTL_EXIT_USAGE = 1,      /* bad command line or unreadable input file */
    CTL_EXIT_DAEMON = 2,     /* the daemon answered an error status */
    CTL_EXIT_EVAL = 3,       /* eval: error rate above --max-error */
    CTL_EXIT_TRANSPORT = 4   /* connect / timeout / protocol failure */
};

#define CTL_DEFAULT_SERVER "127.0.0.1:7600"
#define CTL_DEFAULT_TIMEOUT_MS 30000

typedef struct ctl {
    const char *server;
    int timeout_ms;
    const char *token;     /* --token / $OMLCTL_TOKEN: sent (Auth) right after connect */
    int tls;               /* 1: --tls, --cacert, --client-cert or --insecure; 2: $OMLCTL_CACERT
                              or $OMLCTL_CLIENT_CERT (TCP only) */
    const char *cacert;    /* --cacert / $OMLCTL_CACERT: the CA to verify the daemon (NULL: system's) */
    int insecure;          /* --insecure: TLS without verifying the daemon */
    const char *cert;      /* --client-cert / $OMLCTL_CLIENT_CERT: presented to tls_client_ca */
    const char *key;       /* --client-key / $OMLCTL_CLIENT_KEY: its private key (NULL: in cert) */
    int json;              /* --json (any command): the answer as one JSON document */
} ctl;

/* One subcommand: argv[0] is the command name. Returns an exit code. */
typedef struct ctl_cmd {
    const char *name;
    int (*run)(ctl *g, int argc, char **argv);
    const char *summary;
} ctl_cmd;

int ctl_put(ctl *g, int argc, char **argv);
int ctl_promote_replica(ctl *g, int argc, char **argv); /* omlctl_repl.c */
int ctl_triplets(ctl *g, int argc, char **argv);
int ctl_pairs(ctl *g, int argc, char **argv);
int ctl_classify(ctl *g, int argc, char **argv);
int ctl_verify(ctl *g, int argc, char **argv);
int ctl_retrieve(ctl *g, int argc, char **argv);
int ctl_embed(ctl *g, int argc, char **argv);
int ctl_export_model(ctl *g, int argc, char **argv);
int ctl_status(ctl *g, int argc, char **argv);
int ctl_health(ctl *g, int argc, char **argv);
int ctl_checkpoint(ctl *g, int argc, char **argv);
int ctl_watch(ctl *g, int argc, char **argv);
int ctl_eval(ctl *g, int argc, char **argv);
int ctl_train(ctl *g, int argc, char **argv);
int ctl_train_status(ctl *g, int argc, char **argv);
int ctl_train_cancel(ctl *g, int argc, char **argv);
int ctl_models(ctl *g, int argc, char **argv);
int ctl_promote(ctl *g, int argc, char **argv);
int ctl_rollback(ctl *g, int argc, char **argv);
int ctl_delete_model(ctl *g, int argc, char **argv);
int ctl_call(ctl *g, int argc, char **argv);
int ctl_get(ctl *g, int argc, char **argv);
int ctl_delete(ctl *g, int argc, char **argv);
int ctl_list(ctl *g, int argc, char **argv);
int ctl_count(ctl *g, int argc, char **argv);

/* classify / retrieve --batch FILE (omlctl_batch.c): the queries of FILE
 * (one per line: an id, or f1,f2,... a vector; '-' is stdin) sent as
 * batches of batch_size (0: 1,000) with k, model and, for retrieve, the
 * filter f applied to each; every answer printed as for one query, with
 * the query first. Returns an exit code. */
int ctl_query_batch(const ctl *g, const char *cmd, const char *file, size_t batch_size,
                    uint32_t k, const char *model, const omlc_retrieve_filter *f, int json);
/* One answer on stdout: a JSON object (with "query" when query != NULL)
 * or text lines (after "query Q" when query != NULL). */
void ctl_print_classification(const char *query, const omlc_classification *out, int json);
void ctl_print_hits(const char *query, const omlc_hit *hits, size_t n, uint32_t offset,
                    uint64_t version, int json);

/* ---- option parsing (exit(1) with a message on a malformed value) ---- */

/* The value of option `name` at argv[*i] ("--name V" or "--name=V"),
 * advancing *i past it; NULL if argv[*i] is not that option. */
const char *ctl_opt(int argc, char **argv, int *i, const char *name);
/* Consumes --server / --timeout / --token (allowed after the command too): 1 if it did. */
int ctl_common_opt(ctl *g, int argc, char **argv, int *i);
int ctl_is_help(const char *a);
long long ctl_int(const char *opt, const char *v, long long lo, long long hi);
double ctl_real(const char *opt, const char *v, double lo, double hi);
/* "f1,f2,..." -> malloc'd floats; exits 1 on a bad number. */
float *ctl_floats(const char *opt, const char *v, uint32_t *n);
/* Prints "omlctl CMD: message" and "see omlctl CMD --help", returns 1. */
int ctl_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- connection and errors ---- */

/* Connects to g->server and, with g->token, authenticates; on failure
 * prints why and returns the exit code. */
int ctl_connect(const ctl *g, omlc **out);
/* Prints "omlctl: WHAT: CODE_NAME: message (field F)" and returns 2 for a
 * daemon status, 4 for a transport error. */
int ctl_fail(const char *what, int rc, const omlc_error *err);

/* ---- CSV ---- */

/* Splits one CSV line in place into at most max fields; returns the field
 * count, or -1 for a quoted field not closed on the line (or text after its
 * closing quote). RFC 4180 quoting: a field in double quotes may hold
 * commas, and "" stands for one quote ("id,with,commas" is one id); plain
 * fields are trimmed of blanks and the line end. */
int ctl_csv_split(char *line, char **fields, int max);

/* ---- progress bar on stderr, only when stderr is a terminal ---- */

typedef struct ctl_progress {
    const char *what;   /* "items", "triplets", ... */
    double t0, last;
    int tty, drawn;
} ctl_progress;

void ctl_progress_init(ctl_progress *p, const char *what);
void ctl_progress_cb(size_t done, size_t total, void *arg); /* arg: ctl_progress* */
void ctl_progress_end(ctl_progress *p);

double ctl_now(void);
void ctl_json_string(FILE *f, const char *s);
/* Prints a JSON document (jansson's json_t *, reference stolen) on stdout:
 * what --json prints; protobuf answers go through proto/pbjson.c. */
struct json_t;
void ctl_print_json(struct json_t *doc);

#endif
