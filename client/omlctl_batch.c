/* omlctl_batch.c - classify --batch FILE and retrieve --batch FILE: many
 * queries sent as ClassifyBatch / RetrieveBatch requests (omld.proto QUERY
 * BATCHES) of --batch-size queries each, which the daemon answers together,
 * faster per query than one request each. FILE has one query per line: an
 * item id (a line without a comma), or a vector f1,f2,... of the daemon's
 * dimension; blank lines and lines starting with '#' are skipped, '-' reads
 * stdin. Each answer is printed as omlctl prints one query's, after the
 * query: its id, or "line N" for a vector. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "omlctl.h"

#define DEFAULT_BATCH 1000

/* The queries of a file. */
typedef struct query_file {
    omlc_ref *q;
    char **names; /* (n) malloc'd: the id, or "line N" */
    size_t n, cap;
} query_file;

static void query_file_free(query_file *qf)
{
    for (size_t i = 0; i < qf->n; i++) {
        free(qf->names[i]);
        free((void *)qf->q[i].vector);
    }
    free(qf->q);
    free(qf->names);
}

static int oom(void)
{
    fprintf(stderr, "omlctl: out of memory\n");
    return CTL_EXIT_USAGE;
}

/* Line text (no line end, no surrounding blanks) as query n of qf. */
static int add_query(query_file *qf, const char *cmd, const char *path, long lineno, char *text)
{
    if (qf->n == qf->cap) {
        size_t cap = qf->cap ? 2 * qf->cap : 256;
        omlc_ref *q = realloc(qf->q, cap * sizeof *q);
        if (q)
            qf->q = q;
        char **names = realloc(qf->names, cap * sizeof *names);
        if (names)
            qf->names = names;
        if (q == NULL || names == NULL)
            return oom();
        qf->cap = cap;
    }
    omlc_ref *r = &qf->q[qf->n];
    char name[64];
    memset(r, 0, sizeof *r);
    if (strchr(text, ',')) {
        snprintf(name, sizeof name, "%s:%ld", path, lineno);
        r->vector = ctl_floats(name, text, &r->dim); /* exits on a bad number */
        snprintf(name, sizeof name, "line %ld", lineno);
        qf->names[qf->n] = strdup(name);
    } else {
        if (strlen(text) > 255) {
            fprintf(stderr, "omlctl %s: %s:%ld: an id is 1..255 bytes\n", cmd, path, lineno);
            return CTL_EXIT_USAGE;
        }
        qf->names[qf->n] = strdup(text);
        r->id = qf->names[qf->n];
    }
    if (qf->names[qf->n] == NULL)
        return oom();
    qf->n++;
    return 0;
}

static int read_queries(const char *cmd, const char *path, query_file *qf)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (f == NULL) {
        perror(path);
        return CTL_EXIT_USAGE;
    }
    char *line = NULL;
    size_t lcap = 0;
    long lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &lcap, f) >= 0) {
        lineno++;
        char *p = line, *end = line + strlen(line);
        while (isspace((unsigned char)*p))
            p++;
        while (end > p && isspace((unsigned char)end[-1]))
            *--end = '\0';
        if (*p != '\0' && *p != '#')
            rc = add_query(qf, cmd, path, lineno, p);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    if (rc == 0 && qf->n == 0) {
        fprintf(stderr, "omlctl %s: %s has no queries\n", cmd, path);
        rc = CTL_EXIT_USAGE;
    }
    return rc;
}

/* One batch: queries q (n), named names, answered and printed. */
static int run_one(omlc *c, const char *cmd, const omlc_ref *q, char *const *names, size_t n,
                   uint32_t k, const char *model, const omlc_retrieve_filter *f, int json)
{
    omlc_error err;
    int r;
    if (strcmp(cmd, "classify") == 0) {
        omlc_classification *out = malloc(n * sizeof *out);
        if (out == NULL)
            return oom();
        r = omlc_classify_batch(c, q, n, k, model, out, &err);
        for (size_t i = 0; i < n && r == 0; i++)
            ctl_print_classification(names[i], &out[i], json);
        free(out);
        return r ? ctl_fail("classify", r, &err) : 0;
    }
    size_t cap = k > 0 ? k : 1024; /* 1024: the daemon's max_k by default */
    omlc_hit *hits = malloc(n * cap * sizeof *hits);
    size_t *n_hits = malloc(n * sizeof *n_hits);
    omlc_retrieve_filter *fs = malloc(n * sizeof *fs);
    if (hits == NULL || n_hits == NULL || fs == NULL) {
        free(hits);
        free(n_hits);
        free(fs);
        return oom();
    }
    for (size_t i = 0; i < n; i++)
        fs[i] = *f;
    uint64_t version = 0;
    r = omlc_retrieve_batch(c, q, n, k, model, fs, hits, cap, n_hits, &version, &err);
    for (size_t i = 0; i < n && r == 0; i++)
        ctl_print_hits(names[i], hits + i * cap, n_hits[i], f->offset, version, json);
    free(hits);
    free(n_hits);
    free(fs);
    return r ? ctl_fail("retrieve", r, &err) : 0;
}

int ctl_query_batch(const ctl *g, const char *cmd, const char *file, size_t batch_size,
                    uint32_t k, const char *model, const omlc_retrieve_filter *f, int json)
{
    query_file qf = {0};
    int rc = read_queries(cmd, file, &qf);
    omlc *c = NULL;
    if (rc == 0)
        rc = ctl_connect(g, &c);
    size_t b = batch_size ? batch_size : DEFAULT_BATCH;
    for (size_t i0 = 0; rc == 0 && i0 < qf.n; i0 += b) {
        size_t m = qf.n - i0 < b ? qf.n - i0 : b;
        rc = run_one(c, cmd, qf.q + i0, qf.names + i0, m, k, model, f, json);
    }
    omlc_close(c);
    query_file_free(&qf);
    return rc;
}
