/* omlctl.c - the omld command-line tool: global options, dispatch and the
 * helpers every subcommand shares (omlctl.h). The subcommands live in
 * omlctl_data.c (put, triplets, pairs), omlctl_query.c (classify, verify,
 * retrieve, embed), omlctl_ops.c (status, health, checkpoint, watch) and
 * omlctl_eval.c (the Fashion-MNIST protocol through the daemon) and
 * omlctl_train.c (batch-training jobs and batch models).
 * Results go to stdout, diagnostics and progress to stderr. */
#include <jansson.h>

#include "omlctl.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const ctl_cmd commands[] = {
    {"put", ctl_put, "store items from an IDX image file (+ IDX labels) or a CSV file"},
    {"triplets", ctl_triplets, "add triplets from a CSV file: anchor,positive,negative"},
    {"pairs", ctl_pairs, "add pairs from a CSV file: a,b,similar|dissimilar"},
    {"get", ctl_get, "stored items by id, as JSON"},
    {"delete", ctl_delete, "delete stored items by id, by label or by metadata"},
    {"list", ctl_list, "a page of the stored items, as JSON (--cursor, --limit, --label, --meta)"},
    {"count", ctl_count, "how many stored items match --label / --meta filters"},
    {"classify", ctl_classify, "k-NN class of an item (--id) or a vector (--vector)"},
    {"verify", ctl_verify, "are two items similar?"},
    {"retrieve", ctl_retrieve, "the k stored items most like a query"},
    {"embed", ctl_embed, "per-head embeddings of an item and the head weights"},
    {"export-model", ctl_export_model, "write the serving model to a file, to embed offline"},
    {"status", ctl_status, "the daemon's model and learner state (--json)"},
    {"health", ctl_health, "live / ready / draining"},
    {"checkpoint", ctl_checkpoint, "write a checkpoint now"},
    {"watch", ctl_watch, "redraw the hedge weights per depth every --interval ms"},
    {"eval", ctl_eval, "the OAHU Fashion-MNIST protocol (or any --csv data), end to end through the daemon"},
    {"train", ctl_train, "start a batch-training job and follow it (--detach: do not)"},
    {"train-status", ctl_train_status, "a batch-training job's state and progress"},
    {"train-cancel", ctl_train_cancel, "cancel a batch-training job"},
    {"models", ctl_models, "the named batch models (--json)"},
    {"promote", ctl_promote, "make a batch model the live model's trunk and head"},
    {"rollback", ctl_rollback, "undo the last promote"},
    {"delete-model", ctl_delete_model, "remove a batch model"},
    {"promote-replica", ctl_promote_replica, "make this read replica the primary (its primary is gone)"},
    {"call", ctl_call, "any operation by name with a JSON body; the answer as JSON"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: omlctl [--server HOST:PORT|unix:PATH] [--timeout MS] [--token T]\n"
               "              [--tls] [--cacert FILE] [--client-cert FILE [--client-key FILE]]\n"
               "              [--insecure] <command> [options]\n"
               "       omlctl --version\n"
               "\n"
               "  --server S     the daemon (default " CTL_DEFAULT_SERVER "); also $OMLCTL_SERVER\n"
               "  --token T      authenticate with token T right after connecting (daemons with\n"
               "                 tokens); prefer $OMLCTL_TOKEN, which other users cannot see\n"
               "  --timeout MS   give up when the daemon makes no progress for MS ms\n"
               "                 (connect, each write, each read; default %d)\n"
               "  --json         print the answer as one JSON document (any command, after it;\n"
               "                 protobuf answers as proto3's JSON mapping, like omlctl call)\n"
               "  --tls          connect with TLS (daemons with tls_cert) and verify the daemon's\n"
               "                 certificate against the system's CAs and the host of --server\n"
               "  --cacert FILE  ... against the CA(s) in FILE (PEM; the daemon's own certificate\n"
               "                 if self-signed) instead; implies --tls; also $OMLCTL_CACERT\n"
               "                 (which a unix: server ignores)\n"
               "  --client-cert FILE  present the client certificate in FILE (PEM) to a daemon\n"
               "                 with tls_client_ca; implies --tls; also $OMLCTL_CLIENT_CERT\n"
               "  --client-key FILE  the private key of --client-cert (PEM; default: in the\n"
               "                 --client-cert file); also $OMLCTL_CLIENT_KEY\n"
               "  --insecure     TLS without verifying the daemon (tests only); implies --tls\n"
               "\ncommands:\n",
            CTL_DEFAULT_TIMEOUT_MS);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'omlctl <command> --help' shows a command's options and an example.\n"
               "\nexit status:\n"
               "  0  success\n"
               "  1  usage error, or an input file that cannot be read or parsed\n"
               "  2  the daemon answered an error status (its code, message and field are printed)\n"
               "  3  eval: the error rate is above --max-error\n"
               "  4  transport error: cannot connect, timeout, or an answer that makes no sense\n"
               "\nexample:\n"
               "  omlctl --server 127.0.0.1:7600 status\n");
}

int main(int argc, char **argv)
{
    ctl g = {.server = getenv("OMLCTL_SERVER"), .timeout_ms = CTL_DEFAULT_TIMEOUT_MS,
             .token = getenv("OMLCTL_TOKEN"), .cacert = getenv("OMLCTL_CACERT"),
             .cert = getenv("OMLCTL_CLIENT_CERT"), .key = getenv("OMLCTL_CLIENT_KEY")};
    if (g.cacert != NULL && g.cacert[0] == '\0')
        g.cacert = NULL;
    if (g.cert != NULL && g.cert[0] == '\0')
        g.cert = NULL;
    if (g.key != NULL && g.key[0] == '\0')
        g.key = NULL;
    /* 2: from the environment, not for a Unix socket */
    g.tls = g.cacert != NULL || g.cert != NULL ? 2 : 0;
    if (g.server == NULL || g.server[0] == '\0')
        g.server = CTL_DEFAULT_SERVER;
    if (g.token != NULL && g.token[0] == '\0')
        g.token = NULL;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (ctl_is_help(a)) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0) {
            printf("omlctl %s\n", OML_VERSION);
            return 0;
        }
        if (ctl_common_opt(&g, argc, argv, &i))
            continue;
        if (a[0] == '-') {
            fprintf(stderr, "omlctl: unknown option '%s'\n", a);
            usage(stderr);
            return CTL_EXIT_USAGE;
        }
        break;
    }
    if (i >= argc) {
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    if (strcmp(argv[i], "help") == 0) {
        if (i + 1 < argc) {
            char *h[] = {argv[i + 1], "--help", NULL};
            for (size_t k = 0; k < N_COMMANDS; k++)
                if (strcmp(commands[k].name, argv[i + 1]) == 0)
                    return commands[k].run(&g, 2, h);
        }
        usage(stdout);
        return 0;
    }
    for (size_t k = 0; k < N_COMMANDS; k++)
        if (strcmp(commands[k].name, argv[i]) == 0)
            return commands[k].run(&g, argc - i, argv + i);
    fprintf(stderr, "omlctl: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return CTL_EXIT_USAGE;
}

/* ---------------------------------------------------------------- options */

int ctl_is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

const char *ctl_opt(int argc, char **argv, int *i, const char *name)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        fprintf(stderr, "omlctl: option %s needs a value\n", name);
        exit(CTL_EXIT_USAGE);
    }
    (*i)++;
    return argv[*i];
}

int ctl_common_opt(ctl *g, int argc, char **argv, int *i)
{
    const char *v;
    if ((v = ctl_opt(argc, argv, i, "--server")) != NULL) {
        g->server = v;
        return 1;
    }
    if ((v = ctl_opt(argc, argv, i, "--timeout")) != NULL) {
        g->timeout_ms = (int)ctl_int("--timeout", v, 1, 24LL * 3600 * 1000);
        return 1;
    }
    if ((v = ctl_opt(argc, argv, i, "--token")) != NULL) {
        g->token = v[0] ? v : NULL;
        return 1;
    }
    if ((v = ctl_opt(argc, argv, i, "--cacert")) != NULL) {
        g->cacert = v[0] ? v : NULL;
        g->tls = 1;
        return 1;
    }
    if ((v = ctl_opt(argc, argv, i, "--client-cert")) != NULL) {
        g->cert = v[0] ? v : NULL;
        g->tls = 1;
        return 1;
    }
    if ((v = ctl_opt(argc, argv, i, "--client-key")) != NULL) {
        g->key = v[0] ? v : NULL;
        return 1;
    }
    if (strcmp(argv[*i], "--json") == 0) {
        g->json = 1;
        return 1;
    }
    if (strcmp(argv[*i], "--tls") == 0 || strcmp(argv[*i], "--insecure") == 0) {
        g->insecure |= argv[*i][2] == 'i';
        g->tls = 1;
        return 1;
    }
    return 0;
}

long long ctl_int(const char *opt, const char *v, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < lo || x > hi) {
        fprintf(stderr, "omlctl: %s: '%s' is not an integer in [%lld, %lld]\n", opt, v, lo, hi);
        exit(CTL_EXIT_USAGE);
    }
    return x;
}

double ctl_real(const char *opt, const char *v, double lo, double hi)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "omlctl: %s: '%s' is not a number in [%g, %g]\n", opt, v, lo, hi);
        exit(CTL_EXIT_USAGE);
    }
    return x;
}

float *ctl_floats(const char *opt, const char *v, uint32_t *n)
{
    size_t cap = 1;
    for (const char *p = v; *p; p++)
        cap += *p == ',';
    float *out = malloc(cap * sizeof *out);
    if (out == NULL) {
        fprintf(stderr, "omlctl: out of memory\n");
        exit(CTL_EXIT_USAGE);
    }
    size_t k = 0;
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !isfinite(x)) {
            fprintf(stderr, "omlctl: %s: value %zu of '%.40s%s' is not a finite number\n", opt,
                    k + 1, v, strlen(v) > 40 ? "..." : "");
            exit(CTL_EXIT_USAGE);
        }
        out[k++] = (float)x;
        while (*end == ' ')
            end++;
        if (*end == '\0')
            break;
        if (*end != ',') {
            fprintf(stderr, "omlctl: %s: expected ',' after value %zu\n", opt, k);
            exit(CTL_EXIT_USAGE);
        }
        p = end + 1;
    }
    *n = (uint32_t)k;
    return out;
}

int ctl_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "omlctl %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'omlctl %s --help')\n", cmd);
    va_end(ap);
    return CTL_EXIT_USAGE;
}

/* ---------------------------------------------------------------- connection */

int ctl_connect(const ctl *g, omlc **out)
{
    omlc_error err;
    omlc_tls tls = {.cafile = g->cacert, .insecure = g->insecure, .certfile = g->cert,
                    .keyfile = g->key};
    int use_tls = g->tls == 1 || (g->tls == 2 && strncmp(g->server, "unix:", 5) != 0);
    int rc = omlc_connect_tls(out, g->server, use_tls ? &tls : NULL, g->timeout_ms, &err);
    if (rc != 0) {
        fprintf(stderr, "omlctl: cannot connect to %s: %s\n", g->server, err.message);
        return rc == OMLC_EARG ? CTL_EXIT_USAGE : CTL_EXIT_TRANSPORT;
    }
    if (g->token == NULL)
        return 0;
    rc = omlc_auth(*out, g->token, NULL, &err);
    if (rc == 0)
        return 0;
    omlc_close(*out);
    *out = NULL;
    return ctl_fail("auth", rc, &err);
}

int ctl_fail(const char *what, int rc, const omlc_error *err)
{
    if (rc > 0) {
        fprintf(stderr, "omlctl: %s: the daemon answered %s: %s%s%s%s\n", what,
                omlc_code_name(rc), err->message, err->field[0] ? " (field " : "", err->field,
                err->field[0] ? ")" : "");
        return CTL_EXIT_DAEMON;
    }
    fprintf(stderr, "omlctl: %s: %s: %s\n", what, omlc_code_name(rc), err->message);
    return rc == OMLC_EARG ? CTL_EXIT_USAGE : CTL_EXIT_TRANSPORT;
}

/* ---------------------------------------------------------------- CSV */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

int ctl_csv_split(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != '"') { /* plain: up to the next comma, trimmed */
            char *comma = strchr(p, ',');
            if (comma)
                *comma = '\0';
            fields[n++] = trim(p);
            if (!comma)
                return n;
            p = comma + 1;
            continue;
        }
        /* RFC 4180: "..." may hold commas, and "" is one quote. Dequoted in
         * place: the text only shrinks, so out never passes p. */
        char *start = ++p, *out = start;
        for (;;) {
            if (*p == '\0')
                return -1; /* the quote is not closed on this line */
            if (*p == '"' && p[1] == '"') {
                *out++ = '"';
                p += 2;
            } else if (*p == '"') {
                p++;
                break;
            } else {
                *out++ = *p++;
            }
        }
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
            p++;
        char next = *p;
        *out = '\0';
        fields[n++] = start;
        if (next == '\0')
            return n;
        if (next != ',')
            return -1; /* text after a closing quote */
        p++;
    }
    return n;
}

/* ---------------------------------------------------------------- progress */

double ctl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ctl_progress_init(ctl_progress *p, const char *what)
{
    p->what = what;
    p->t0 = p->last = ctl_now();
    /* Quiet when either stream is not a terminal (scripts, pipes, logs). */
    p->tty = isatty(STDOUT_FILENO) && isatty(STDERR_FILENO);
    p->drawn = 0;
}

void ctl_progress_cb(size_t done, size_t total, void *arg)
{
    ctl_progress *p = arg;
    if (p == NULL || !p->tty)
        return;
    double t = ctl_now();
    if (done < total && t - p->last < 0.1)
        return;
    p->last = t;
    int width = 30, fill = total ? (int)((double)done / (double)total * width) : width;
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    double el = t - p->t0, rate = el > 0 ? (double)done / el : 0.0;
    char eta[32] = "";
    if (done < total && rate > 0) {
        double left = (double)(total - done) / rate;
        if (left < 60)
            snprintf(eta, sizeof eta, "ETA %.0fs", left);
        else if (left < 3600)
            snprintf(eta, sizeof eta, "ETA %dm%02ds", (int)left / 60, (int)left % 60);
        else
            snprintf(eta, sizeof eta, "ETA %dh%02dm", (int)left / 3600, (int)left % 3600 / 60);
    }
    fprintf(stderr, "\r[%s] %zu/%zu %s  %.0f/s  %-12s", bar, done, total, p->what, rate, eta);
    fflush(stderr);
    p->drawn = 1;
}

void ctl_progress_end(ctl_progress *p)
{
    if (p->tty && p->drawn)
        fprintf(stderr, "\n");
    p->drawn = 0;
}

void ctl_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void ctl_print_json(json_t *doc)
{
    char *s = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    puts(s ? s : "null");
    free(s);
    json_decref(doc);
}
