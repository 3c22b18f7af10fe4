/* omlctl_data.c - ingest: put (IDX or CSV items), triplets and pairs (CSV).
 * Everything is read into memory first (so a bad line stops the command
 * before anything is sent), then sent in batches with several requests in
 * flight (omlc_*_pipelined). */
#include <ctype.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "idx.h"
#include "omlctl.h"
#include "omlctl_meta.h"

#define CTL_BATCH 256
#define CTL_WINDOW 8

/* Growable arrays of strings and floats. */
typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;

static int strvec_push(strvec *s, const char *x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        char **v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n] = x ? strdup(x) : NULL;
    if (x && s->v[s->n] == NULL)
        return -1;
    s->n++;
    return 0;
}

static void strvec_free(strvec *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int oom(void)
{
    fprintf(stderr, "omlctl: out of memory\n");
    return CTL_EXIT_USAGE;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

/* Opens a CSV file ("-" is stdin). */
static FILE *open_input(const char *cmd, const char *path)
{
    if (strcmp(path, "-") == 0)
        return stdin;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        perror(path);
    (void)cmd;
    return f;
}

static int check_id(const char *cmd, const char *path, long line, const char *what, const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 255) {
        fprintf(stderr, "omlctl %s: %s:%ld: %s must be 1..255 bytes\n", cmd, path, line, what);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- put */

static void put_usage(FILE *f)
{
    fprintf(f,
            "usage: omlctl put [options] FILE\n"
            "Stores items (all-or-nothing per batch; an existing id is replaced).\n"
            "  FILE             an IDX image file (idx3, gzipped or not): one item per row,\n"
            "                   features scaled to [0,1], id \"<prefix><row>\"; or a CSV file\n"
            "                   with lines id,label,f1,...,fd (label may be empty: unlabelled;\n"
            "                   '#' lines and a header line are skipped; '-' reads stdin)\n"
            "  --labels FILE    IDX label file (idx1) for an IDX FILE: label \"<class>\" per row\n"
            "  --prefix P       id prefix for IDX rows (default empty: ids \"0\", \"1\", ...)\n"
            "  --format F       idx | csv (default: csv if FILE ends in .csv or is '-', else idx)\n"
            "  --first N        IDX: start at row N (default 0)\n"
            "  --count N        IDX: put at most N rows (default all)\n"
            "  --batch N        items per request (default %d)\n"
            "  --window W       requests in flight (default %d)\n"
            "  --meta K=V       metadata of every item put (repeatable: several keys)\n"
            "  --server S, --timeout MS as for omlctl\n"
            "example:\n"
            "  omlctl put --prefix test- --labels /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz \\\n"
            "      /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz\n"
            "  printf 'a,cat,0.1,0.2\\nb,,0.3,0.4\\n' | omlctl put -\n",
            CTL_BATCH, CTL_WINDOW);
}

/* Items read from a file: features (n, dim), ids and labels. */
typedef struct item_set {
    float *x;
    uint32_t dim;
    size_t n, cap;
    strvec ids, labels;
} item_set;

static int read_csv_items(const char *path, item_set *s)
{
    FILE *f = open_input("put", path);
    if (f == NULL)
        return CTL_EXIT_USAGE;
    char *line = NULL, **fields = NULL;
    size_t lcap = 0;
    int maxf = 0, rc = 0, seen_line = 0;
    long lineno = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        if ((int)len + 2 > maxf) {
            maxf = (int)len + 2;
            char **nf = realloc(fields, (size_t)maxf * sizeof *nf);
            if (nf == NULL) {
                rc = oom();
                break;
            }
            fields = nf;
        }
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        int nf = ctl_csv_split(line, fields, maxf);
        if (nf < 0) {
            fprintf(stderr, "omlctl put: %s:%ld: a quoted field is not closed (or text follows "
                    "its closing quote)\n", path, lineno);
            rc = CTL_EXIT_USAGE;
            break;
        }
        if (nf < 3) {
            fprintf(stderr, "omlctl put: %s:%ld: need id,label,f1,...\n", path, lineno);
            rc = CTL_EXIT_USAGE;
            break;
        }
        uint32_t d = (uint32_t)(nf - 2);
        if (s->n == 0) {
            char *end;
            strtod(fields[2], &end);
            if (end == fields[2] && !seen_line) {
                seen_line = 1;
                continue; /* a header line */
            }
            s->dim = d;
        }
        seen_line = 1;
        if (d != s->dim) {
            fprintf(stderr, "omlctl put: %s:%ld: %u features, earlier lines have %u\n", path,
                    lineno, d, s->dim);
            rc = CTL_EXIT_USAGE;
            break;
        }
        if (check_id("put", path, lineno, "id", fields[0]) != 0) {
            rc = CTL_EXIT_USAGE;
            break;
        }
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 1024;
            float *x = realloc(s->x, s->cap * s->dim * sizeof(float));
            if (x == NULL) {
                rc = oom();
                break;
            }
            s->x = x;
        }
        float *row = s->x + s->n * s->dim;
        for (uint32_t j = 0; j < d && rc == 0; j++) {
            char *end;
            row[j] = strtof(fields[2 + j], &end);
            if (end == fields[2 + j] || *end != '\0') {
                fprintf(stderr, "omlctl put: %s:%ld: feature %u '%s' is not a number\n", path,
                        lineno, j + 1, fields[2 + j]);
                rc = CTL_EXIT_USAGE;
            }
        }
        if (rc)
            break;
        if (strvec_push(&s->ids, fields[0]) != 0 ||
            strvec_push(&s->labels, fields[1][0] ? fields[1] : NULL) != 0) {
            rc = oom();
            break;
        }
        s->n++;
    }
    free(line);
    free(fields);
    if (f != stdin)
        fclose(f);
    return rc;
}

static int read_idx_items(const char *path, const char *labels_path, const char *prefix,
                          long long first, long long count, item_set *s)
{
    oml_diag diag = {0};
    float *x = NULL;
    int32_t n = 0, dim = 0, nl = 0;
    int32_t *lab = NULL;
    if (oml_idx_read_images(path, &x, &n, &dim, &diag) != 0) {
        fprintf(stderr, "omlctl put: %s: %s\n", path, diag.msg);
        return CTL_EXIT_USAGE;
    }
    if (labels_path && oml_idx_read_labels(labels_path, &lab, &nl, &diag) != 0) {
        fprintf(stderr, "omlctl put: %s: %s\n", labels_path, diag.msg);
        free(x);
        return CTL_EXIT_USAGE;
    }
    if (lab && nl != n) {
        fprintf(stderr, "omlctl put: %d labels for %d images\n", nl, n);
        free(x);
        free(lab);
        return CTL_EXIT_USAGE;
    }
    long long lo = first < n ? first : n, hi = count > 0 && lo + count < n ? lo + count : n;
    s->dim = (uint32_t)dim;
    s->n = (size_t)(hi - lo);
    s->x = x;
    if (lo > 0)
        memmove(x, x + (size_t)lo * (size_t)dim, s->n * (size_t)dim * sizeof(float));
    char id[300], l[16];
    for (long long r = lo; r < hi; r++) {
        snprintf(id, sizeof id, "%s%lld", prefix, r);
        if (lab)
            snprintf(l, sizeof l, "%d", lab[r]);
        if (strvec_push(&s->ids, id) != 0 || strvec_push(&s->labels, lab ? l : NULL) != 0) {
            free(lab);
            return oom();
        }
    }
    free(lab);
    return 0;
}

int ctl_put(ctl *g, int argc, char **argv)
{
    const char *file = NULL, *labels = NULL, *prefix = "", *format = NULL, *v;
    long long first = 0, count = 0, batch = CTL_BATCH, window = CTL_WINDOW;
    ctl_meta meta = {0};
    int got;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            put_usage(stdout);
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if ((got = ctl_meta_opt(&meta, "put", argc, argv, &i)) != 0) {
            if (got < 0)
                return CTL_EXIT_USAGE;
        } else if ((v = ctl_opt(argc, argv, &i, "--labels"))) {
            labels = v;
        } else if ((v = ctl_opt(argc, argv, &i, "--prefix"))) {
            prefix = v;
        } else if ((v = ctl_opt(argc, argv, &i, "--format"))) {
            format = v;
        } else if ((v = ctl_opt(argc, argv, &i, "--first"))) {
            first = ctl_int("--first", v, 0, 1LL << 40);
        } else if ((v = ctl_opt(argc, argv, &i, "--count"))) {
            count = ctl_int("--count", v, 1, 1LL << 40);
        } else if ((v = ctl_opt(argc, argv, &i, "--batch"))) {
            batch = ctl_int("--batch", v, 1, 1 << 20);
        } else if ((v = ctl_opt(argc, argv, &i, "--window"))) {
            window = ctl_int("--window", v, 1, 1024);
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return ctl_usage_error("put", "unknown option '%s'", argv[i]);
        } else if (file == NULL) {
            file = argv[i];
        } else {
            return ctl_usage_error("put", "one FILE only ('%s')", argv[i]);
        }
    }
    if (file == NULL)
        return ctl_usage_error("put", "no FILE");
    int csv = format ? strcmp(format, "csv") == 0 : (ends_with(file, ".csv") || strcmp(file, "-") == 0);
    if (format && !csv && strcmp(format, "idx") != 0)
        return ctl_usage_error("put", "--format is idx or csv, not '%s'", format);
    if (csv && labels)
        return ctl_usage_error("put", "--labels is for IDX files; a CSV line carries its label");

    item_set s = {0};
    int rc = csv ? read_csv_items(file, &s) : read_idx_items(file, labels, prefix, first, count, &s);
    omlc *c = NULL;
    omlc_item *items = NULL;
    if (rc == 0 && s.n == 0) {
        fprintf(stderr, "omlctl put: %s has no items\n", file);
        rc = CTL_EXIT_USAGE;
    }
    if (rc == 0 && (items = calloc(s.n, sizeof *items)) == NULL)
        rc = oom();
    if (rc == 0)
        rc = ctl_connect(g, &c);
    if (rc == 0) {
        ctl_meta_items(&meta);
        omlc_set_item_metadata(c, meta.kvp, meta.n);
        for (size_t i = 0; i < s.n; i++)
            items[i] = (omlc_item){s.ids.v[i], s.x + i * s.dim, s.dim, s.labels.v[i]};
        ctl_progress pr;
        ctl_progress_init(&pr, "items");
        omlc_error err;
        double t0 = ctl_now();
        int r = omlc_put_items_pipelined(c, items, s.n, (size_t)batch, (size_t)window,
                                         ctl_progress_cb, &pr, &err);
        ctl_progress_end(&pr);
        omlc_totals t;
        omlc_last_totals(c, &t);
        if (r != 0) {
            rc = ctl_fail("put", r, &err);
            fprintf(stderr, "omlctl put: before the error: %llu created, %llu replaced\n",
                    (unsigned long long)t.created, (unsigned long long)t.replaced);
        } else if (g->json) {
            ctl_print_json(json_pack("{s:I, s:i, s:I, s:I, s:I, s:f}", "items", (json_int_t)s.n,
                                     "dim", (int)s.dim, "created", (json_int_t)t.created,
                                     "replaced", (json_int_t)t.replaced, "model_version",
                                     (json_int_t)t.model_version, "seconds", ctl_now() - t0));
        } else {
            printf("put %zu items of %u features in %.2f s: %llu created, %llu replaced "
                   "(model version %llu)\n",
                   s.n, s.dim, ctl_now() - t0, (unsigned long long)t.created,
                   (unsigned long long)t.replaced, (unsigned long long)t.model_version);
        }
    }
    omlc_close(c);
    free(items);
    free(s.x);
    strvec_free(&s.ids);
    strvec_free(&s.labels);
    return rc;
}

/* ---------------------------------------------------------------- triplets, pairs */

/* One line of a triplets or pairs CSV: its 3 fields in f (in place), the
 * third a pair's relation as "1"/"0". 0, LINE_SKIP (blank, comment, a
 * header on the first row), or CTL_EXIT_USAGE (said, naming the line). */
#define LINE_SKIP (-1)
static int parse_line3(const char *cmd, const char *path, long lineno, int rows, int pairs,
                       char *line, char *f[4])
{
    char *p = line;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0' || *p == '#')
        return LINE_SKIP;
    int nf = ctl_csv_split(line, f, 4);
    if (nf < 0) {
        fprintf(stderr, "omlctl %s: %s:%ld: a quoted field is not closed (or text follows its "
                "closing quote)\n", cmd, path, lineno);
        return CTL_EXIT_USAGE;
    }
    if (nf != 3 && (pairs || nf != 4)) {
        fprintf(stderr, "omlctl %s: %s:%ld: need %s fields (%s), got %d\n", cmd, path, lineno,
                pairs ? "3" : "3 or 4", pairs ? "a,b,similar|dissimilar"
                                             : "anchor,positive,negative[,weight]", nf);
        return CTL_EXIT_USAGE;
    }
    if (nf == 3)
        f[3] = "";
    if (rows == 0 && (strcasecmp(f[0], "anchor") == 0 || strcasecmp(f[0], "a") == 0) &&
        (strcasecmp(f[1], "positive") == 0 || strcasecmp(f[1], "b") == 0))
        return LINE_SKIP; /* a header line */
    if (pairs) {
        if (strcasecmp(f[2], "similar") == 0 || strcasecmp(f[2], "sim") == 0 || strcmp(f[2], "1") == 0)
            f[2] = "1";
        else if (strcasecmp(f[2], "dissimilar") == 0 || strcasecmp(f[2], "dis") == 0 ||
                 strcmp(f[2], "0") == 0)
            f[2] = "0";
        else if (rows == 0 && lineno == 1)
            return LINE_SKIP; /* a header line such as a,b,relation */
        else {
            fprintf(stderr, "omlctl pairs: %s:%ld: '%s' is not similar or dissimilar\n", path,
                    lineno, f[2]);
            return CTL_EXIT_USAGE;
        }
    }
    for (int k = 0; k < (pairs ? 2 : 3); k++)
        if (check_id(cmd, path, lineno, "an id", f[k]) != 0)
            return CTL_EXIT_USAGE;
    char *end = NULL;
    if (f[3][0] != '\0' && (strtof(f[3], &end), *end != '\0' || end == f[3])) {
        if (rows == 0 && lineno == 1)
            return LINE_SKIP; /* a header line such as anchor,positive,negative,weight */
        fprintf(stderr, "omlctl triplets: %s:%ld: weight '%s' is not a number\n", path, lineno,
                f[3]);
        return CTL_EXIT_USAGE;
    }
    return 0;
}

/* One line into cols (parse_line3; *rows counts the constraints taken):
 * 0, or the exit code. */
static int take_line3(const char *cmd, const char *path, long lineno, int *rows, int pairs,
                      char *line, strvec cols[4])
{
    char *f[4];
    int r = parse_line3(cmd, path, lineno, *rows, pairs, line, f);
    if (r == LINE_SKIP)
        return 0;
    if (r != 0)
        return r;
    if (strvec_push(&cols[0], f[0]) || strvec_push(&cols[1], f[1]) || strvec_push(&cols[2], f[2]) ||
        strvec_push(&cols[3], f[3]))
        return oom();
    (*rows)++;
    return 0;
}

/* Reads lines of exactly 3 fields; fields 0..1 (pairs) or 0..2 (triplets)
 * are ids. For pairs the third is the relation, stored as "1"/"0". */
static int read_csv3(const char *cmd, const char *path, int pairs, strvec *cols)
{
    FILE *f = open_input(cmd, path);
    if (f == NULL)
        return CTL_EXIT_USAGE;
    char *line = NULL;
    size_t lcap = 0;
    long lineno = 0;
    int rc = 0, rows = 0;
    while (rc == 0 && getline(&line, &lcap, f) >= 0)
        rc = take_line3(cmd, path, ++lineno, &rows, pairs, line, cols);
    free(line);
    if (f != stdin)
        fclose(f);
    if (rc == 0 && cols[0].n == 0) {
        fprintf(stderr, "omlctl %s: %s has no lines\n", cmd, path);
        rc = CTL_EXIT_USAGE;
    }
    return rc;
}

static void constraints_usage(FILE *f, int pairs)
{
    if (pairs)
        fprintf(f, "usage: omlctl pairs [options] FILE.csv\n"
                   "Adds similar / dissimilar pairs of stored ids; the daemon keeps their\n"
                   "transitive closure and learns the triplets it derives. A batch that\n"
                   "contradicts the closure is refused (CONFLICT) and changes nothing.\n"
                   "  FILE.csv      lines a,b,similar|dissimilar ('-' reads stdin; '#' lines skipped)\n");
    else
        fprintf(f, "usage: omlctl triplets [options] FILE.csv\n"
                   "Queues triplets of stored ids for the learner, in file order.\n"
                   "  FILE.csv      lines anchor,positive,negative[,weight] ('#' lines skipped; weight:\n"
                   "                the triplet's loss scale in (0, 100], default 1); '-' reads\n"
                   "                stdin as lines arrive, each batch sent when full or after 0.2 s\n"
                   "                without a new line (tail -f clicks.csv | omlctl triplets -)\n"
                   "  --partial     learn the good triplets of each batch and list each bad one\n"
                   "                (its row, code, field and message) instead of stopping at it\n"
                   "  --key PREFIX  send batch i with the idempotency key PREFIX-i, one batch at a\n"
                   "                time: the same command run again after a failure learns each\n"
                   "                batch once (the daemon keeps its newest idempotency_keys keys)\n");
    fprintf(f,
            "  --batch N     constraints per request (default %d)\n"
            "  --window W    requests in flight (default %d)\n"
            "  --server S, --timeout MS as for omlctl\n"
            "example:\n",
            CTL_BATCH, CTL_WINDOW);
    if (pairs)
        fprintf(f, "  printf 'dev-1,dev-7,similar\\ndev-1,dev-9,dissimilar\\n' | omlctl pairs -\n");
    else
        fprintf(f, "  omlctl triplets --batch 512 clicks.csv\n");
}

/* The constraints of cols (pairs: *p, else *t; malloc'd, their strings
 * borrowed from cols): 0, or -1 when out of memory. */
static int constraints_of(strvec cols[4], int pairs, omlc_triplet **t, omlc_pair **p)
{
    size_t n = cols[0].n;
    if (pairs ? (*p = calloc(n ? n : 1, sizeof **p)) == NULL
              : (*t = calloc(n ? n : 1, sizeof **t)) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (pairs)
            (*p)[i] = (omlc_pair){{cols[0].v[i], NULL, 0}, {cols[1].v[i], NULL, 0},
                                  cols[2].v[i][0] == '1'};
        else
            (*t)[i] = (omlc_triplet){{cols[0].v[i], NULL, 0}, {cols[1].v[i], NULL, 0},
                                     {cols[2].v[i], NULL, 0},
                                     cols[3].v[i][0] ? strtof(cols[3].v[i], NULL) : 0.0f};
    }
    return 0;
}

/* ---- '-': constraints as lines arrive ---- */

#define STREAM_FLUSH_MS 200     /* a part batch goes out when no line came for this long */
#define STREAM_LINE_MAX (1u << 20)

/* Sends the constraints in cols (then emptied). 0 or the exit code. */
static int stream_send(omlc *c, int pairs, strvec cols[4], unsigned long long *sent)
{
    size_t n = cols[0].n;
    omlc_triplet *t = NULL;
    omlc_pair *p = NULL;
    if (constraints_of(cols, pairs, &t, &p) != 0)
        return oom();
    omlc_error err;
    uint32_t accepted = 0;
    int r = pairs ? omlc_add_pairs(c, p, n, &accepted, NULL, &err)
                  : omlc_add_triplets(c, t, n, &accepted, NULL, &err);
    free(t);
    free(p);
    for (int k = 0; k < 4; k++)
        strvec_free(&cols[k]);
    if (r != 0) {
        fprintf(stderr, "omlctl %s: before the error: %llu accepted\n", pairs ? "pairs" : "triplets",
                *sent);
        return ctl_fail(pairs ? "pairs" : "triplets", r, &err);
    }
    *sent += accepted;
    return 0;
}

/* FILE '-': reads stdin as lines arrive and sends them in batches of up to
 * `batch`, a part batch as soon as no line came for STREAM_FLUSH_MS, so
 * `tail -f clicks.csv | omlctl triplets -` has each click learned within a
 * fraction of a second. Ends at the end of input. */
static int stream_constraints(omlc *c, const char *cmd, int pairs, size_t batch)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    strvec cols[4] = {{0}};
    long lineno = 0;
    int rows = 0, rc = 0, eof = 0;
    unsigned long long sent = 0;
    while (buf && rc == 0 && !eof) {
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        int pr = poll(&pfd, 1, cols[0].n ? STREAM_FLUSH_MS : -1);
        if (pr > 0) {
            if (len == cap) {
                char *nb = cap < STREAM_LINE_MAX ? realloc(buf, cap * 2) : NULL;
                if (nb == NULL) {
                    fprintf(stderr, "omlctl %s: -:%ld: a line longer than %u bytes\n", cmd,
                            lineno + 1, STREAM_LINE_MAX);
                    rc = CTL_EXIT_USAGE;
                    break;
                }
                buf = nb;
                cap *= 2;
            }
            ssize_t r = read(STDIN_FILENO, buf + len, cap - len);
            if (r <= 0) {
                eof = 1;
                if (len > 0 && len < cap) /* the last line without its newline */
                    buf[len++] = '\n';
            } else {
                len += (size_t)r;
            }
        }
        char *start = buf, *nl;
        while (rc == 0 && (nl = memchr(start, '\n', (size_t)(buf + len - start))) != NULL) {
            *nl = '\0';
            rc = take_line3(cmd, "-", ++lineno, &rows, pairs, start, cols);
            start = nl + 1;
            if (rc == 0 && cols[0].n == batch)
                rc = stream_send(c, pairs, cols, &sent);
        }
        memmove(buf, start, (size_t)(buf + len - start));
        len -= (size_t)(start - buf);
        if (rc == 0 && cols[0].n > 0 && (pr == 0 || eof))
            rc = stream_send(c, pairs, cols, &sent);
    }
    for (int k = 0; k < 4; k++)
        strvec_free(&cols[k]);
    free(buf);
    if (rc == 0)
        printf("added %llu %s from the input stream\n", sent, pairs ? "pairs" : "triplets");
    return buf ? rc : oom();
}

/* --partial: batches one at a time, each bad triplet reported by its row
 * (1-based among the file's triplets); 0, or the exit code of a failed
 * call. */
static int add_partial(omlc *c, const omlc_triplet *t, size_t n, size_t batch)
{
    omlc_rejected *rej = malloc(batch * sizeof *rej);
    if (rej == NULL)
        return oom();
    unsigned long long learned = 0, refused = 0;
    omlc_error err;
    for (size_t at = 0; at < n; at += batch) {
        size_t b = n - at < batch ? n - at : batch, nr = 0;
        uint32_t accepted = 0;
        int r = omlc_add_triplets_partial(c, t + at, b, &accepted, rej, batch, &nr, &err);
        if (r != 0) {
            free(rej);
            fprintf(stderr, "omlctl triplets: before the error: %llu learned\n", learned);
            return ctl_fail("triplets", r, &err);
        }
        learned += accepted;
        refused += nr;
        for (size_t i = 0; i < nr && i < batch; i++)
            printf("row %zu: %s %s: %s\n", at + rej[i].index + 1, omlc_code_name(rej[i].code),
                   rej[i].field, rej[i].message);
    }
    free(rej);
    printf("learned %llu triplets, refused %llu\n", learned, refused);
    return 0;
}

/* --key: batches one at a time, batch i under the key PREFIX-i; 0, or the
 * exit code of a failed call. */
static int add_keyed(omlc *c, const omlc_triplet *t, size_t n, size_t batch, const char *prefix)
{
    unsigned long long learned = 0, again = 0;
    omlc_error err;
    for (size_t at = 0, i = 0; at < n; at += batch, i++) {
        size_t b = n - at < batch ? n - at : batch;
        char key[300];
        snprintf(key, sizeof key, "%s-%zu", prefix, i);
        uint32_t accepted = 0;
        int dup = 0;
        int r = omlc_add_triplets_keyed(c, t + at, b, key, &accepted, &dup, &err);
        if (r != 0) {
            fprintf(stderr, "omlctl triplets: before the error (batch %s): %llu learned\n", key,
                    learned);
            return ctl_fail("triplets", r, &err);
        }
        if (dup)
            again++;
        else
            learned += accepted;
    }
    printf("learned %llu triplets; %llu batches had been learned before (their keys)\n", learned,
           again);
    return 0;
}

static int run_constraints(ctl *g, int argc, char **argv, int pairs)
{
    const char *cmd = pairs ? "pairs" : "triplets", *file = NULL, *v;
    long long batch = CTL_BATCH, window = CTL_WINDOW;
    int partial = 0;
    const char *key = NULL;
    for (int i = 1; i < argc; i++) {
        if (ctl_is_help(argv[i])) {
            constraints_usage(stdout, pairs);
            return 0;
        } else if (ctl_common_opt(g, argc, argv, &i)) {
        } else if (!pairs && strcmp(argv[i], "--partial") == 0) {
            partial = 1;
        } else if (!pairs && (v = ctl_opt(argc, argv, &i, "--key"))) {
            if (strlen(v) == 0 || strlen(v) > 200)
                return ctl_usage_error(cmd, "--key takes 1 to 200 bytes");
            key = v;
        } else if ((v = ctl_opt(argc, argv, &i, "--batch"))) {
            batch = ctl_int("--batch", v, 1, 1 << 20);
        } else if ((v = ctl_opt(argc, argv, &i, "--window"))) {
            window = ctl_int("--window", v, 1, 1024);
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return ctl_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (file == NULL) {
            file = argv[i];
        } else {
            return ctl_usage_error(cmd, "one FILE only ('%s')", argv[i]);
        }
    }
    if (file == NULL)
        return ctl_usage_error(cmd, "no FILE");
    if (strcmp(file, "-") == 0 && !partial && key == NULL) {
        omlc *sc = NULL;
        int src = ctl_connect(g, &sc);
        if (src == 0)
            src = stream_constraints(sc, cmd, pairs, (size_t)batch);
        omlc_close(sc);
        return src;
    }
    strvec cols[4] = {{0}};
    int rc = read_csv3(cmd, file, pairs, cols);
    size_t n = cols[0].n;
    omlc_triplet *t = NULL;
    omlc_pair *p = NULL;
    omlc *c = NULL;
    if (rc == 0 && constraints_of(cols, pairs, &t, &p) != 0)
        rc = oom();
    if (rc == 0)
        rc = ctl_connect(g, &c);
    if (rc == 0 && partial && key)
        rc = ctl_usage_error(cmd, "--partial and --key are one or the other");
    if (rc == 0 && key) {
        rc = add_keyed(c, t, n, (size_t)batch, key);
    } else if (rc == 0 && partial) {
        rc = add_partial(c, t, n, (size_t)batch);
    } else if (rc == 0) {
        ctl_progress pr;
        ctl_progress_init(&pr, cmd);
        omlc_error err;
        double t0 = ctl_now();
        int r = pairs ? omlc_add_pairs_pipelined(c, p, n, (size_t)batch, (size_t)window,
                                                 ctl_progress_cb, &pr, &err)
                      : omlc_add_triplets_pipelined(c, t, n, (size_t)batch, (size_t)window,
                                                    ctl_progress_cb, &pr, &err);
        ctl_progress_end(&pr);
        omlc_totals tot;
        omlc_last_totals(c, &tot);
        if (r != 0) {
            rc = ctl_fail(cmd, r, &err);
            fprintf(stderr, "omlctl %s: before the error: %llu accepted\n", cmd,
                    (unsigned long long)tot.accepted);
        } else if (g->json) {
            ctl_print_json(json_pack("{s:I, s:I, s:I, s:f}", "accepted",
                                     (json_int_t)tot.accepted,
                                     pairs ? "derived_triplets" : "queue_depth",
                                     (json_int_t)(pairs ? tot.derived : tot.queue_depth),
                                     "model_version", (json_int_t)tot.model_version,
                                     "seconds", ctl_now() - t0));
        } else if (pairs) {
            printf("added %llu pairs in %.2f s; %llu triplets derived (model version %llu)\n",
                   (unsigned long long)tot.accepted, ctl_now() - t0,
                   (unsigned long long)tot.derived, (unsigned long long)tot.model_version);
        } else {
            printf("added %llu triplets in %.2f s; learner queue depth %llu (model version %llu)\n",
                   (unsigned long long)tot.accepted, ctl_now() - t0,
                   (unsigned long long)tot.queue_depth, (unsigned long long)tot.model_version);
        }
    }
    omlc_close(c);
    free(t);
    free(p);
    for (int k = 0; k < 4; k++)
        strvec_free(&cols[k]);
    return rc;
}

int ctl_triplets(ctl *g, int argc, char **argv)
{
    return run_constraints(g, argc, argv, 0);
}

int ctl_pairs(ctl *g, int argc, char **argv)
{
    return run_constraints(g, argc, argv, 1);
}
