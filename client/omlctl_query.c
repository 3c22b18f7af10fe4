/* omlctl_query.c - the read operations: classify, verify, retrieve, embed.
 * Items are named with --id ID (a stored item) or --vector f1,f2,... (an
 * inline vector of the daemon's dimension, never stored); verify takes two. */
#include <stdlib.h>
#include <string.h>

#include "omlctl.h"
#include "omlctl_meta.h"

#define MAX_REFS 2

#define MAX_FILTER 1024 /* --label / --exclude each; the daemon's max_batch bounds them too */

typedef struct query_opts {
    omlc_ref refs[MAX_REFS];
    float *vecs[MAX_REFS];
    int n_refs;
    long long k;
    double threshold;
    const char *model;
    int json;               /* --json: one JSON object on stdout */
    /* retrieve's filter: --label and --exclude (repeatable), --offset,
     * --min-similarity; the name arrays point into argv */
    const char *labels[MAX_FILTER], *exclude[MAX_FILTER];
    omlc_retrieve_filter filter;
    ctl_meta meta;          /* retrieve's --meta K=V filter */
    const char *batch;      /* classify / retrieve --batch FILE: its queries instead */
    long long batch_size;   /* --batch-size: queries per request */
} query_opts;

static int add_ref(query_opts *q, const char *cmd, int max_refs, const char *v, int is_id)
{
    if (q->n_refs == max_refs)
        return ctl_usage_error(cmd, "takes %d item(s) (--id / --vector)", max_refs);
    omlc_ref *r = &q->refs[q->n_refs];
    if (is_id) {
        if (v[0] == '\0' || strlen(v) > 255)
            return ctl_usage_error(cmd, "an id is 1..255 bytes");
        r->id = v;
    } else {
        q->vecs[q->n_refs] = ctl_floats("--vector", v, &r->dim);
        r->vector = q->vecs[q->n_refs];
    }
    q->n_refs++;
    return 0;
}

/* Parses the options every query shares; 0 to go on, or an exit code + 1
 * (so that "--help" -> 1 means exit 0). want_k / want_threshold select the
 * options this command takes. */
/* retrieve's filter options at argv[*i]: 1 if one was taken, 0 if
 * argv[*i] is none of them, -1 on a usage error (printed). */
static int parse_filter(query_opts *q, const char *cmd, int argc, char **argv, int *i)
{
    const char *v;
    omlc_retrieve_filter *f = &q->filter;
    if (strcmp(cmd, "retrieve") != 0)
        return 0;
    if ((v = ctl_opt(argc, argv, i, "--label"))) {
        if (f->n_labels == MAX_FILTER) {
            ctl_usage_error(cmd, "at most %d --label", MAX_FILTER);
            return -1;
        }
        q->labels[f->n_labels++] = v;
    } else if ((v = ctl_opt(argc, argv, i, "--exclude"))) {
        if (f->n_exclude_ids == MAX_FILTER) {
            ctl_usage_error(cmd, "at most %d --exclude", MAX_FILTER);
            return -1;
        }
        q->exclude[f->n_exclude_ids++] = v;
    } else if ((v = ctl_opt(argc, argv, i, "--offset"))) {
        f->offset = (uint32_t)ctl_int("--offset", v, 0, 1 << 20);
    } else if ((v = ctl_opt(argc, argv, i, "--min-similarity"))) {
        f->has_min_similarity = 1;
        f->min_similarity = (float)ctl_real("--min-similarity", v, -1.0, 1.0);
    } else {
        int got = ctl_meta_opt(&q->meta, cmd, argc, argv, i);
        if (got <= 0)
            return got;
        ctl_meta_filter(&q->meta);
        f->metadata = q->meta.condp;
        f->n_metadata = q->meta.n_cond;
    }
    f->labels = q->labels;
    f->exclude_ids = q->exclude;
    return 1;
}

static int parse_query(ctl *g, int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                       int max_refs, int want_k, int want_threshold, query_opts *q)
{
    memset(q, 0, sizeof *q);
    const char *v;
    int rc;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            usage(stdout);
            return 1;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if ((v = ctl_opt(argc, argv, &i, "--id"))) {
            if ((rc = add_ref(q, cmd, max_refs, v, 1)) != 0)
                return rc + 1;
        } else if ((v = ctl_opt(argc, argv, &i, "--vector"))) {
            if ((rc = add_ref(q, cmd, max_refs, v, 0)) != 0)
                return rc + 1;
        } else if (want_k && (v = ctl_opt(argc, argv, &i, "--k"))) {
            q->k = ctl_int("--k", v, 1, 1 << 20);
        } else if (want_threshold && (v = ctl_opt(argc, argv, &i, "--threshold"))) {
            q->threshold = ctl_real("--threshold", v, 1e-9, 1.0);
        } else if ((v = ctl_opt(argc, argv, &i, "--model"))) {
            q->model = v;
        } else if (want_k && (v = ctl_opt(argc, argv, &i, "--batch"))) {
            q->batch = v;
        } else if (want_k && (v = ctl_opt(argc, argv, &i, "--batch-size"))) {
            q->batch_size = ctl_int("--batch-size", v, 1, 1 << 20);
        } else if (want_k && (rc = parse_filter(q, cmd, argc, argv, &i)) != 0) {
            if (rc < 0)
                return CTL_EXIT_USAGE + 1; /* printed */
        } else if (strcmp(argv[i], "--json") == 0) {
            q->json = 1;
        } else {
            return ctl_usage_error(cmd, "unknown argument '%s'", argv[i]) + 1;
        }
    }
    q->json |= g->json;
    if (q->batch && q->n_refs > 0)
        return ctl_usage_error(cmd, "--batch FILE names the queries: no --id / --vector") + 1;
    if (!q->batch && q->n_refs != max_refs)
        return ctl_usage_error(cmd, "needs %d item(s): --id ID or --vector f1,f2,...", max_refs) + 1;
    return 0;
}

static void query_free(query_opts *q)
{
    for (int i = 0; i < MAX_REFS; i++)
        free(q->vecs[i]);
}

#define REF_HELP                                                                       \
    "  --id ID             a stored item\n"                                            \
    "  --vector F1,F2,...  an inline vector of the daemon's dimension (not stored)\n"
#define BATCH_HELP                                                                     \
    "  --batch FILE        many queries, one per line (an id, or f1,f2,... a vector;\n"    \
    "                      '-' is stdin, '#' lines skipped), sent as batches the\n"        \
    "                      daemon answers together; each query's answer as above\n"        \
    "  --batch-size N      queries per request (default 1000; at most max_batch)\n"
#define MODEL_HELP                                                                     \
    "  --model NAME        a batch-trained model instead of the live one\n"            \
    "  --json              print the answer as one JSON object\n"                      \
    "  --server S, --timeout MS as for omlctl\n"

static void classify_usage(FILE *f)
{
    fprintf(f, "usage: omlctl classify (--id ID | --vector F1,... | --batch FILE) [--k K]\n"
               "                       [--model NAME]\n"
               "k-nearest-neighbour class over every head (OAHU Eq. 23-25): the label and\n"
               "every class with a non-zero score, best first.\n" REF_HELP BATCH_HELP
               "  --k K               neighbours per head (default: the daemon's default_k)\n" MODEL_HELP
               "examples:\n  omlctl classify --id test-17 --k 5\n"
               "  omlctl classify --batch queries.txt --k 5 --json\n");
}

/* Opens an answer's JSON object, with "query" first for a batch's. */
static void json_open(const char *query)
{
    printf("{");
    if (query) {
        printf("\"query\":");
        ctl_json_string(stdout, query);
        printf(",");
    }
}

void ctl_print_classification(const char *query, const omlc_classification *out, int json)
{
    if (json) {
        json_open(query);
        printf("\"label\":");
        ctl_json_string(stdout, out->label);
        printf(",\"model_version\":%llu,\"scores\":[", (unsigned long long)out->model_version);
        for (int i = 0; i < out->n_scores; i++) {
            printf("%s{\"label\":", i ? "," : "");
            ctl_json_string(stdout, out->scores[i].label);
            printf(",\"score\":%.6g}", out->scores[i].score);
        }
        printf("]}\n");
        return;
    }
    if (query)
        printf("query %s\n", query);
    printf("label %s   (model version %llu)\n", out->label[0] ? out->label : "(none)",
           (unsigned long long)out->model_version);
    for (int i = 0; i < out->n_scores; i++)
        printf("  %-24s %.4f\n", out->scores[i].label, out->scores[i].score);
}

int ctl_classify(ctl *g, int argc, char **argv)
{
    query_opts q;
    int rc = parse_query(g, argc, argv, "classify", classify_usage, 1, 1, 0, &q);
    if (rc) {
        query_free(&q);
        return rc - 1;
    }
    if (q.batch) {
        rc = ctl_query_batch(g, "classify", q.batch, (size_t)q.batch_size, (uint32_t)q.k, q.model,
                             NULL, q.json);
        query_free(&q);
        return rc;
    }
    omlc *c = NULL;
    if ((rc = ctl_connect(g, &c)) == 0) {
        omlc_classification out;
        omlc_error err;
        int r = omlc_classify(c, &q.refs[0], (uint32_t)q.k, q.model, &out, &err);
        if (r != 0)
            rc = ctl_fail("classify", r, &err);
        else
            ctl_print_classification(NULL, &out, q.json);
    }
    omlc_close(c);
    query_free(&q);
    return rc;
}

static void verify_usage(FILE *f)
{
    fprintf(f, "usage: omlctl verify ITEM ITEM [--threshold T] [--model NAME]\n"
               "Are two items similar? Sums the head weights over the heads where D/2 < T\n"
               "and answers similar when the sum is >= 0.5 (OAHU Eq. 26).\n"
               "  ITEM is --id ID or --vector F1,F2,... (give two, in order)\n" REF_HELP
               "  --threshold T       in (0, 1] (default: the daemon's default_threshold)\n" MODEL_HELP
               "example:\n  omlctl verify --id dev-17 --id dev-4242 --threshold 0.4\n");
}

int ctl_verify(ctl *g, int argc, char **argv)
{
    query_opts q;
    int rc = parse_query(g, argc, argv, "verify", verify_usage, 2, 0, 1, &q);
    if (rc) {
        query_free(&q);
        return rc - 1;
    }
    omlc *c = NULL;
    if ((rc = ctl_connect(g, &c)) == 0) {
        omlc_verification out;
        omlc_error err;
        int r = omlc_verify(c, &q.refs[0], &q.refs[1], (float)q.threshold, q.model, &out, &err);
        if (r != 0) {
            rc = ctl_fail("verify", r, &err);
        } else if (q.json) {
            printf("{\"similar\":%s,\"score\":%.6g,\"model_version\":%llu,\"distances\":[",
                   out.similar ? "true" : "false", out.score, (unsigned long long)out.model_version);
            for (int i = 0; i < out.n_heads; i++)
                printf("%s%.6g", i ? "," : "", out.distances[i]);
            printf("]}\n");
        } else {
            printf("%s   score %.4f   (model version %llu)\n", out.similar ? "similar" : "dissimilar",
                   out.score, (unsigned long long)out.model_version);
            printf("distance per head:");
            for (int i = 0; i < out.n_heads; i++)
                printf(" %.4f", out.distances[i]);
            printf("\n");
        }
    }
    omlc_close(c);
    query_free(&q);
    return rc;
}

static void retrieve_usage(FILE *f)
{
    fprintf(f, "usage: omlctl retrieve (--id ID | --vector F1,... | --batch FILE) [--k K]\n"
               "                       [--model NAME]\n"
               "                       [--label L]... [--exclude ID]... [--offset N]\n"
               "                       [--min-similarity S]\n"
               "The k stored items most like the query, best first (OAHU Eq. 27); a query by\n"
               "id never returns that id itself. Each hit has its Eq. 27 score, which depends\n"
               "on k, and its similarity to the query in [-1, 1], which does not.\n" REF_HELP
               "  --k K               how many (default: the daemon's default_k)\n"
               "  --label L           only items labelled L (repeat for several labels)\n"
               "  --exclude ID        never this item (repeatable)\n"
               "  --meta K=V          only items whose metadata K is V (repeat a key for a set\n"
               "                      of values; several keys must all match)\n"
               "  --offset N          skip the best N: the next page (offset + k <= max_k)\n"
               "  --min-similarity S  only hits at least this similar, S in [-1, 1]\n"
               "                      (with --batch, the filters apply to every query)\n"
               BATCH_HELP MODEL_HELP
               "examples:\n  omlctl retrieve --id dev-17 --k 10 --label shirt --exclude dev-3\n"
               "  omlctl retrieve --batch queries.txt --k 10 --label shirt\n");
}

void ctl_print_hits(const char *query, const omlc_hit *hits, size_t n, uint32_t offset,
                    uint64_t version, int json)
{
    if (json) {
        json_open(query);
        printf("\"model_version\":%llu,\"hits\":[", (unsigned long long)version);
        for (size_t i = 0; i < n; i++) {
            printf("%s{\"id\":", i ? "," : "");
            ctl_json_string(stdout, hits[i].id);
            printf(",\"label\":");
            if (hits[i].label[0])
                ctl_json_string(stdout, hits[i].label);
            else
                printf("null");
            printf(",\"score\":%.6g,\"similarity\":%.6g}", hits[i].score, hits[i].similarity);
        }
        printf("]}\n");
        return;
    }
    if (query)
        printf("query %s\n", query);
    printf("%zu hits   (model version %llu)\n", n, (unsigned long long)version);
    printf("  %4s  %-32s %-16s %-8s %s\n", "rank", "id", "label", "score", "similarity");
    for (size_t i = 0; i < n; i++)
        printf("  %4zu  %-32s %-16s %-8.4f %.4f\n", offset + i + 1, hits[i].id,
               hits[i].label[0] ? hits[i].label : "-", hits[i].score, hits[i].similarity);
}

int ctl_retrieve(ctl *g, int argc, char **argv)
{
    query_opts q;
    int rc = parse_query(g, argc, argv, "retrieve", retrieve_usage, 1, 1, 0, &q);
    if (rc) {
        query_free(&q);
        return rc - 1;
    }
    if (q.batch) {
        rc = ctl_query_batch(g, "retrieve", q.batch, (size_t)q.batch_size, (uint32_t)q.k, q.model,
                             &q.filter, q.json);
        query_free(&q);
        return rc;
    }
    omlc *c = NULL;
    size_t cap = q.k > 0 ? (size_t)q.k : 1024;
    omlc_hit *hits = calloc(cap, sizeof *hits);
    if (hits == NULL) {
        query_free(&q);
        fprintf(stderr, "omlctl: out of memory\n");
        return CTL_EXIT_USAGE;
    }
    if ((rc = ctl_connect(g, &c)) == 0) {
        size_t n = 0;
        uint64_t version = 0;
        omlc_error err;
        int r = omlc_retrieve_where(c, &q.refs[0], (uint32_t)q.k, q.model, &q.filter, hits, cap,
                                    &n, &version, &err);
        if (r != 0)
            rc = ctl_fail("retrieve", r, &err);
        else
            ctl_print_hits(NULL, hits, n, q.filter.offset, version, q.json);
    }
    free(hits);
    omlc_close(c);
    query_free(&q);
    return rc;
}

static void embed_usage(FILE *f)
{
    fprintf(f, "usage: omlctl embed (--id ID | --vector F1,...) [--model NAME]\n"
               "The item's L2-normalised embedding under every head l = 0..L, and the head\n"
               "weights alpha. One line per head: 'head L: v1 v2 ...'.\n" REF_HELP MODEL_HELP
               "example:\n  omlctl embed --id dev-17\n");
}

int ctl_embed(ctl *g, int argc, char **argv)
{
    query_opts q;
    int rc = parse_query(g, argc, argv, "embed", embed_usage, 1, 0, 0, &q);
    if (rc) {
        query_free(&q);
        return rc - 1;
    }
    omlc *c = NULL;
    if ((rc = ctl_connect(g, &c)) == 0) {
        Omld__Response *r = NULL;
        omlc_error err;
        int e = omlc_embed(c, &q.refs[0], q.model, &r, &err);
        if (e != 0) {
            rc = ctl_fail("embed", e, &err);
        } else if (q.json) {
            const Omld__EmbedResponse *b = r->embed;
            printf("{\"model_version\":%llu,\"alpha\":[", (unsigned long long)r->model_version);
            for (size_t i = 0; i < b->n_alpha; i++)
                printf("%s%.6g", i ? "," : "", b->alpha[i]);
            printf("],\"heads\":[");
            for (size_t h = 0; h < b->n_heads; h++) {
                printf("%s[", h ? "," : "");
                for (size_t j = 0; j < b->heads[h]->n_values; j++)
                    printf("%s%.9g", j ? "," : "", b->heads[h]->values[j]);
                printf("]");
            }
            printf("]}\n");
        } else {
            const Omld__EmbedResponse *b = r->embed;
            printf("%zu heads   (model version %llu)\nalpha:", b->n_heads,
                   (unsigned long long)r->model_version);
            for (size_t i = 0; i < b->n_alpha; i++)
                printf(" %.4f", b->alpha[i]);
            printf("\n");
            for (size_t h = 0; h < b->n_heads; h++) {
                printf("head %zu:", h);
                for (size_t j = 0; j < b->heads[h]->n_values; j++)
                    printf(" %.6g", b->heads[h]->values[j]);
                printf("\n");
            }
        }
        if (r)
            omld__response__free_unpacked(r, NULL);
    }
    omlc_close(c);
    query_free(&q);
    return rc;
}
