/* omlctl_ops.c - operations: status (table or --json), health, checkpoint,
 * export-model (the serving model to a file),
 * and watch (a redrawn view of the hedge weights per depth). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "omlctl.h"
#include "pbjson.h"

/* Parses a command that takes only the common options plus the given flags
 * (each "--name" sets *flags[i] to 1). 0 to go on, else exit code + 1. */
static int parse_simple(ctl *g, int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                        const char *flag, int *flag_out)
{
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            usage(stdout);
            return 1;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if (flag && strcmp(argv[i], flag) == 0) {
            *flag_out = 1;
        } else {
            return ctl_usage_error(cmd, "unknown argument '%s'", argv[i]) + 1;
        }
    }
    if (flag_out && g->json) /* the common --json is this command's */
        *flag_out = 1;
    return 0;
}

static void fmt_duration(char *buf, size_t cap, uint64_t ms)
{
    uint64_t s = ms / 1000;
    if (s < 60)
        snprintf(buf, cap, "%.1fs", ms / 1000.0);
    else if (s < 3600)
        snprintf(buf, cap, "%llum%02llus", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
    else
        snprintf(buf, cap, "%lluh%02llum", (unsigned long long)(s / 3600),
                 (unsigned long long)(s / 60 % 60));
}

/* ---------------------------------------------------------------- status */

static void status_usage(FILE *f)
{
    fprintf(f, "usage: omlctl status [--json]\n"
               "The daemon's summary (StatusResponse): version, uptime, dimension, depth L and\n"
               "the head weights alpha, stored items, triplets received / applied, learner\n"
               "queue depth, age of the serving snapshot, and the model version.\n"
               "  --json    print the StatusResponse as one JSON object (plus model_version)\n"
               "  --server S, --timeout MS as for omlctl\n"
               "example:\n  omlctl --server unix:/run/omld/omld.sock status --json\n");
}

static void status_json(const Omld__Response *r)
{
    const Omld__StatusResponse *s = r->status_info;
    printf("{\"version\":");
    ctl_json_string(stdout, s->version);
    printf(",\"uptime_ms\":%llu,\"dim\":%u,\"depth\":%u,\"alpha\":[",
           (unsigned long long)s->uptime_ms, s->dim, s->depth);
    for (size_t i = 0; i < s->n_alpha; i++)
        printf("%s%.6g", i ? "," : "", s->alpha[i]);
    printf("],\"items\":%llu,\"triplets_received\":%llu,\"triplets_applied\":%llu,"
           "\"queue_depth\":%llu,\"snapshot_age_ms\":%llu,\"model_version\":%llu,"
           "\"view_triplets\":%llu,\"preset\":",
           (unsigned long long)s->items, (unsigned long long)s->triplets_received,
           (unsigned long long)s->triplets_applied, (unsigned long long)s->queue_depth,
           (unsigned long long)s->snapshot_age_ms, (unsigned long long)r->model_version,
           (unsigned long long)s->view_triplets);
    ctl_json_string(stdout, s->preset);
    printf(",\"seed\":%llu,\"utilisation\":%.6g,\"triplet_accuracy\":%.6g",
           (unsigned long long)s->seed, s->utilisation, s->triplet_accuracy);
    if (isfinite(s->recent_accuracy)) /* NaN before the first triplet: JSON has no NaN */
        printf(",\"recent_accuracy\":%.6g", s->recent_accuracy);
    else
        printf(",\"recent_accuracy\":null");
    printf(",\"triplets_rehearsed\":%llu,\"replay_triplets\":%llu}\n",
           (unsigned long long)s->triplets_rehearsed, (unsigned long long)s->replay_triplets);
}

static void status_table(const Omld__Response *r)
{
    const Omld__StatusResponse *s = r->status_info;
    char up[32];
    fmt_duration(up, sizeof up, s->uptime_ms);
    printf("%-20s %s\n", "omld version", s->version);
    printf("%-20s %s\n", "uptime", up);
    printf("%-20s %llu\n", "model version", (unsigned long long)r->model_version);
    printf("%-20s %s (seed %llu)\n", "preset", s->preset, (unsigned long long)s->seed);
    printf("%-20s %u\n", "dimension", s->dim);
    printf("%-20s %u (%u heads)\n", "depth L", s->depth, s->depth + 1);
    printf("%-20s", "alpha");
    for (size_t i = 0; i < s->n_alpha; i++)
        printf(" %.4f", s->alpha[i]);
    printf("\n");
    printf("%-20s %llu\n", "items", (unsigned long long)s->items);
    printf("%-20s %llu\n", "triplets received", (unsigned long long)s->triplets_received);
    printf("%-20s %llu\n", "triplets applied", (unsigned long long)s->triplets_applied);
    printf("%-20s %llu\n", "queue depth", (unsigned long long)s->queue_depth);
    printf("%-20s %llu ms\n", "snapshot age", (unsigned long long)s->snapshot_age_ms);
    printf("%-20s %.4f\n", "utilisation", s->utilisation);
    printf("%-20s %.4f\n", "test-then-train acc", s->triplet_accuracy);
    if (isfinite(s->recent_accuracy))
        printf("%-20s %.4f\n", "... newest 1,000", s->recent_accuracy);
    else
        printf("%-20s -\n", "... newest 1,000");
    printf("%-20s %llu (ring %llu)\n", "triplets rehearsed",
           (unsigned long long)s->triplets_rehearsed, (unsigned long long)s->replay_triplets);
}

int ctl_status(ctl *g, int argc, char **argv)
{
    int json = 0;
    int rc = parse_simple(g, argc, argv, "status", status_usage, "--json", &json);
    if (rc)
        return rc - 1;
    omlc *c = NULL;
    if ((rc = ctl_connect(g, &c)) != 0)
        return rc;
    Omld__Response *r = NULL;
    omlc_error err;
    int e = omlc_status(c, &r, &err);
    if (e != 0)
        rc = ctl_fail("status", e, &err);
    else if (json)
        status_json(r);
    else
        status_table(r);
    if (r)
        omld__response__free_unpacked(r, NULL);
    omlc_close(c);
    return rc;
}

/* ---------------------------------------------------------------- health */

static void health_usage(FILE *f)
{
    fprintf(f, "usage: omlctl health [--json]\n"
               "Prints live / ready / draining. ready means a model view is published and the\n"
               "daemon is not shutting down. Exit status 0 whenever the daemon answered.\n"
               "  --json    print {\"live\":..,\"ready\":..,\"draining\":..}\n"
               "  --server S, --timeout MS as for omlctl\n"
               "example:\n  omlctl --timeout 1000 health\n");
}

int ctl_health(ctl *g, int argc, char **argv)
{
    int json = 0;
    int rc = parse_simple(g, argc, argv, "health", health_usage, "--json", &json);
    if (rc)
        return rc - 1;
    omlc *c = NULL;
    if ((rc = ctl_connect(g, &c)) != 0)
        return rc;
    int live = 0, ready = 0, draining = 0;
    omlc_error err;
    int e = omlc_health(c, &live, &ready, &draining, &err);
    if (e != 0)
        rc = ctl_fail("health", e, &err);
    else if (json)
        printf("{\"live\":%s,\"ready\":%s,\"draining\":%s}\n", live ? "true" : "false",
               ready ? "true" : "false", draining ? "true" : "false");
    else
        printf("live %s   ready %s   draining %s\n", live ? "yes" : "no", ready ? "yes" : "no",
               draining ? "yes" : "no");
    omlc_close(c);
    return rc;
}

/* ---------------------------------------------------------------- checkpoint */

static void checkpoint_usage(FILE *f)
{
    fprintf(f, "usage: omlctl checkpoint\n"
               "Writes a checkpoint (model + item store) now and waits until it is durable.\n"
               "Prints its path, size and the learner position it holds.\n"
               "  --server S, --timeout MS as for omlctl (a large store may need a longer timeout)\n"
               "example:\n  omlctl --timeout 120000 checkpoint\n");
}

int ctl_checkpoint(ctl *g, int argc, char **argv)
{
    int rc = parse_simple(g, argc, argv, "checkpoint", checkpoint_usage, NULL, NULL);
    if (rc)
        return rc - 1;
    omlc *c = NULL;
    if ((rc = ctl_connect(g, &c)) != 0)
        return rc;
    Omld__Response *r = NULL;
    omlc_error err;
    double t0 = ctl_now();
    int e = omlc_checkpoint(c, &r, &err);
    if (e != 0)
        rc = ctl_fail("checkpoint", e, &err);
    else if (g->json)
        ctl_print_json(omld_pbjson_write(&r->checkpoint->base));
    else
        printf("checkpoint %s: %llu bytes, %llu triplets applied (%.2f s)\n", r->checkpoint->path,
               (unsigned long long)r->checkpoint->bytes,
               (unsigned long long)r->checkpoint->triplets_applied, ctl_now() - t0);
    if (r)
        omld__response__free_unpacked(r, NULL);
    omlc_close(c);
    return rc;
}

/* ---------------------------------------------------------- export-model */

static void export_usage(FILE *f)
{
    fprintf(f, "usage: omlctl export-model FILE [--model NAME]\n"
               "Writes the serving model (the live one, or the batch model NAME) to FILE as\n"
               "an OMLSNAP file: what a batch pipeline needs to embed offline exactly as omld\n"
               "answers at that model version (liboml: oml_snapshot_decode + oml_snapshot_embed;\n"
               "Python: omld.model.load(FILE).embed(X)).\n"
               "example:\n  omlctl export-model /tmp/live.omlsnap\n");
}

/* The file appears whole or not at all: written beside it, then renamed. */
static int write_file_atomic(const char *path, const uint8_t *data, size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return -1;
    int ok = fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int ctl_export_model(ctl *g, int argc, char **argv)
{
    const char *path = NULL, *model = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (ctl_is_help(argv[i])) {
            export_usage(stdout);
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if ((v = ctl_opt(argc, argv, &i, "--model")) != NULL) {
            model = v;
        } else if (argv[i][0] != '-' && path == NULL) {
            path = argv[i];
        } else {
            return ctl_usage_error("export-model", "unknown argument '%s'", argv[i]);
        }
    }
    if (path == NULL)
        return ctl_usage_error("export-model", "no FILE to write the model to");
    omlc *c = NULL;
    int rc = ctl_connect(g, &c);
    if (rc != 0)
        return rc;
    Omld__Response *r = NULL;
    omlc_error err;
    int e = omlc_export_model(c, model, &r, &err);
    if (e != 0) {
        rc = ctl_fail("export-model", e, &err);
    } else if (write_file_atomic(path, r->export_model->model.data, r->export_model->model.len) != 0) {
        fprintf(stderr, "omlctl export-model: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    } else if (g->json) {
        const Omld__ExportModelResponse *b = r->export_model;
        ctl_print_json(json_pack("{s:s, s:I, s:i, s:i, s:i, s:I}", "path", path, "version",
                                 (json_int_t)b->version, "dim", (int)b->dim, "heads",
                                 (int)b->heads, "emb", (int)b->emb, "bytes",
                                 (json_int_t)b->model.len));
    } else {
        const Omld__ExportModelResponse *b = r->export_model;
        printf("%s: model version %llu, %u features -> %u heads of %u (%zu bytes)\n", path,
               (unsigned long long)b->version, b->dim, b->heads, b->emb, b->model.len);
    }
    if (r)
        omld__response__free_unpacked(r, NULL);
    omlc_close(c);
    return rc;
}

/* ---------------------------------------------------------------- watch */

static volatile sig_atomic_t watch_stop;

static void on_sigint(int sig)
{
    (void)sig;
    watch_stop = 1;
}

static void watch_usage(FILE *f)
{
    fprintf(f, "usage: omlctl watch [--interval MS] [--count N]\n"
               "Polls Status every MS milliseconds and redraws the hedge weights alpha per\n"
               "depth as bars, with the learner's progress, until Ctrl-C or N redraws.\n"
               "On a terminal the screen is redrawn in place; otherwise frames are appended.\n"
               "  --interval MS   polling period (default 1000)\n"
               "  --count N       stop after N frames (default: until Ctrl-C)\n"
               "  --server S, --timeout MS as for omlctl\n"
               "example:\n  omlctl watch --interval 500\n");
}

static void watch_draw(const Omld__Response *r, double rate, int tty, int frame)
{
    const Omld__StatusResponse *s = r->status_info;
    char up[32];
    fmt_duration(up, sizeof up, s->uptime_ms);
    if (tty)
        printf("\033[H\033[2J");
    else if (frame > 0)
        printf("\n");
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    printf("omld %s   up %s   model version %llu   %02d:%02d:%02d\n", s->version, up,
           (unsigned long long)r->model_version, tm.tm_hour, tm.tm_min, tm.tm_sec);
    printf("items %llu   triplets %llu applied / %llu received   queue %llu   "
           "%.0f triplets/s   snapshot %llu ms old\n",
           (unsigned long long)s->items, (unsigned long long)s->triplets_applied,
           (unsigned long long)s->triplets_received, (unsigned long long)s->queue_depth, rate,
           (unsigned long long)s->snapshot_age_ms);
    printf("hedge weights alpha per depth (L = %u):\n", s->depth);
    enum { W = 50 };
    for (size_t i = 0; i < s->n_alpha; i++) {
        float a = s->alpha[i] < 0 ? 0 : s->alpha[i] > 1 ? 1 : s->alpha[i];
        int fill = (int)(a * W + 0.5f);
        char bar[W + 1];
        for (int j = 0; j < W; j++)
            bar[j] = j < fill ? '#' : ' ';
        bar[W] = '\0';
        printf("  depth %2zu |%s| %.4f\n", i, bar, s->alpha[i]);
    }
    fflush(stdout);
}

int ctl_watch(ctl *g, int argc, char **argv)
{
    long long interval = 1000, count = 0;
    const char *v;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            watch_usage(stdout);
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if ((v = ctl_opt(argc, argv, &i, "--interval"))) {
            interval = ctl_int("--interval", v, 10, 3600000);
        } else if ((v = ctl_opt(argc, argv, &i, "--count"))) {
            count = ctl_int("--count", v, 1, 1LL << 40);
        } else {
            return ctl_usage_error("watch", "unknown argument '%s'", argv[i]);
        }
    }
    omlc *c = NULL;
    int rc = ctl_connect(g, &c);
    if (rc != 0)
        return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int tty = isatty(STDOUT_FILENO);
    double last_t = 0;
    uint64_t last_applied = 0;
    for (long long frame = 0; !watch_stop && (count == 0 || frame < count); frame++) {
        Omld__Response *r = NULL;
        omlc_error err;
        int e = omlc_status(c, &r, &err);
        if (e != 0) {
            if (!watch_stop)
                rc = ctl_fail("watch", e, &err);
            break;
        }
        double t = ctl_now();
        double rate = frame > 0 && t > last_t
                          ? (double)(r->status_info->triplets_applied - last_applied) / (t - last_t)
                          : 0.0;
        last_t = t;
        last_applied = r->status_info->triplets_applied;
        watch_draw(r, rate, tty, (int)frame);
        omld__response__free_unpacked(r, NULL);
        if (count && frame + 1 >= count)
            break;
        /* sleep in slices so Ctrl-C ends the wait at once */
        for (long long slept = 0; slept < interval && !watch_stop; slept += 50) {
            long long step = interval - slept < 50 ? interval - slept : 50;
            struct timespec ts = {(time_t)(step / 1000), (long)(step % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    omlc_close(c);
    return rc;
}
