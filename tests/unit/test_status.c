/* test_status.c - daemon/json.c and daemon/status.c: the JSON writer (commas,
 * nesting, misuse, escaping of hostile strings), GET /status from a hand-made
 * input (well-formed, the expected values), and GET /metrics checked line by
 * line against the Prometheus text format 0.0.4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "json.h"
#include "status.h"

#include "json_check.h"

/* ---- JSON writer ---- */

static char *finish(omld_json *j)
{
    size_t n = 0;
    char *s = omld_json_finish(j, &n);
    if (s)
        assert_int_equal(strlen(s), n);
    return s;
}

static void test_json_writer(void **state)
{
    (void)state;
    omld_json j;
    omld_json_init(&j);
    omld_json_object_begin(&j);
    omld_json_kv_int(&j, "a", -5);
    omld_json_key(&j, "b");
    omld_json_array_begin(&j);
    omld_json_uint(&j, UINT64_MAX);
    omld_json_int(&j, INT64_MIN);
    omld_json_double(&j, 0.5);
    omld_json_double(&j, NAN);
    omld_json_double(&j, INFINITY);
    omld_json_double(&j, -INFINITY);
    omld_json_double(&j, 0.1);
    omld_json_double(&j, 1e300);
    omld_json_bool(&j, 1);
    omld_json_null(&j);
    omld_json_array_begin(&j);
    omld_json_array_end(&j);
    omld_json_object_begin(&j);
    omld_json_object_end(&j);
    omld_json_array_end(&j);
    omld_json_kv_string(&j, "c", NULL);
    omld_json_kv_bool(&j, "d", 0);
    omld_json_kv_double(&j, "e", 2.0);
    omld_json_object_end(&j);
    char *s = finish(&j);
    assert_non_null(s);
    assert_string_equal(s, "{\"a\":-5,\"b\":[18446744073709551615,-9223372036854775808,0.5,"
                           "null,null,null,0.1,1e+300,true,null,[],{}],\"c\":null,\"d\":false,"
                           "\"e\":2}");
    assert_true(oml_test_json_valid(s, strlen(s)));
    free(s);

    /* Floats print as floats: 0.3f is 0.3, not 0.30000001192092896. */
    omld_json_init(&j);
    omld_json_array_begin(&j);
    omld_json_float(&j, 0.3f);
    omld_json_float(&j, 1e-7f);
    omld_json_float(&j, 16777217.0f);
    omld_json_float(&j, NAN);
    omld_json_double(&j, (double)0.3f);
    omld_json_array_end(&j);
    s = finish(&j);
    assert_string_equal(s, "[0.3,1e-07,16777216,null,0.30000001192092896]");
    free(s);

    /* A top-level array and scalar. */
    omld_json_init(&j);
    omld_json_array_begin(&j);
    omld_json_string(&j, "x");
    omld_json_string(&j, "");
    omld_json_array_end(&j);
    s = finish(&j);
    assert_string_equal(s, "[\"x\",\"\"]");
    free(s);
}

static void test_json_misuse(void **state)
{
    (void)state;
    omld_json j;
    /* Unclosed. */
    omld_json_init(&j);
    omld_json_object_begin(&j);
    assert_null(omld_json_finish(&j, NULL));
    /* Key inside an array. */
    omld_json_init(&j);
    omld_json_array_begin(&j);
    omld_json_key(&j, "k");
    omld_json_array_end(&j);
    assert_null(omld_json_finish(&j, NULL));
    /* Value without key inside an object. */
    omld_json_init(&j);
    omld_json_object_begin(&j);
    omld_json_int(&j, 1);
    omld_json_object_end(&j);
    assert_null(omld_json_finish(&j, NULL));
    /* Key without value. */
    omld_json_init(&j);
    omld_json_object_begin(&j);
    omld_json_key(&j, "k");
    omld_json_object_end(&j);
    assert_null(omld_json_finish(&j, NULL));
    /* Mismatched close. */
    omld_json_init(&j);
    omld_json_object_begin(&j);
    omld_json_array_end(&j);
    assert_null(omld_json_finish(&j, NULL));
    /* Two top-level values. */
    omld_json_init(&j);
    omld_json_int(&j, 1);
    omld_json_int(&j, 2);
    assert_null(omld_json_finish(&j, NULL));
    /* Too deep. */
    omld_json_init(&j);
    for (int i = 0; i < OMLD_JSON_MAX_DEPTH + 1; i++)
        omld_json_array_begin(&j);
    for (int i = 0; i < OMLD_JSON_MAX_DEPTH + 1; i++)
        omld_json_array_end(&j);
    assert_null(omld_json_finish(&j, NULL));
    /* Nothing at all. */
    omld_json_init(&j);
    assert_null(omld_json_finish(&j, NULL));
    /* Exactly the maximum depth is fine. */
    omld_json_init(&j);
    for (int i = 0; i < OMLD_JSON_MAX_DEPTH; i++)
        omld_json_array_begin(&j);
    for (int i = 0; i < OMLD_JSON_MAX_DEPTH; i++)
        omld_json_array_end(&j);
    char *s = omld_json_finish(&j, NULL);
    assert_non_null(s);
    assert_int_equal(strlen(s), 2 * OMLD_JSON_MAX_DEPTH);
    free(s);
}

static void test_json_escaping(void **state)
{
    (void)state;
    static const char nasty[] =
        "a\"b\\c/\n\r\t\b\f\x01\x1f\x7f"   /* quote, backslash, controls, DEL */
        "\xff\xc3(\xe2\x82X"                  /* stray byte, broken 2- and 3-byte */
        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80" /* e-acute, euro, emoji: kept */
        "\xed\xa0\x80"                        /* a UTF-16 surrogate: invalid */
        "\xc0\xaf\xf4\x90\x80\x80"            /* overlong '/', above U+10FFFF */
        "\x00z"                               /* an embedded NUL */
        "\xf0\x9f";                           /* truncated at the end */
    static const char want[] =
        "\"a\\\"b\\\\c/\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f"
        "\\ufffd\\ufffd(\\ufffd\\ufffdX"
        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
        "\\ufffd\\ufffd\\ufffd"
        "\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
        "\\u0000z"
        "\\ufffd\\ufffd\"";
    omld_json j;
    omld_json_init(&j);
    omld_json_string_n(&j, nasty, sizeof nasty - 1);
    char *s = finish(&j);
    assert_non_null(s);
    assert_string_equal(s, want);
    assert_true(oml_test_json_valid(s, strlen(s)));
    int py = oml_test_python_check(s, "import json,sys; v=json.load(sys.stdin); "
                             "sys.exit(0 if v.startswith(\"a\\\"b\\\\c/\\n\") and "
                             "v.endswith(\"\\x00z\\ufffd\\ufffd\") else 1)");
    assert_true(py != 0);
    free(s);

    /* Keys are escaped the same way. */
    omld_json_init(&j);
    omld_json_object_begin(&j);
    omld_json_kv_string(&j, "k\"\n", "v");
    omld_json_object_end(&j);
    s = finish(&j);
    assert_string_equal(s, "{\"k\\\"\\n\":\"v\"}");
    free(s);

    /* Every single byte value, alone, gives valid JSON. */
    for (int c = 0; c < 256; c++) {
        char in[3] = {'x', (char)c, 'y'};
        omld_json_init(&j);
        omld_json_string_n(&j, in, 3);
        s = finish(&j);
        assert_non_null(s);
        assert_true(oml_test_json_valid(s, strlen(s)));
        free(s);
    }
}

static void test_buf(void **state)
{
    (void)state;
    omld_buf b;
    omld_buf_init(&b);
    size_t n = 99;
    char *s = omld_buf_take(&b, &n); /* empty but valid */
    assert_non_null(s);
    assert_int_equal(n, 0);
    assert_string_equal(s, "");
    free(s);
    omld_buf_init(&b);
    for (int i = 0; i < 1000; i++)
        omld_buf_printf(&b, "%d,", i);
    char big[600];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    omld_buf_printf(&b, "%s", big); /* longer than the printf fast path */
    s = omld_buf_take(&b, &n);
    assert_int_equal(strlen(s), n);
    assert_true(strncmp(s, "0,1,2,", 6) == 0);
    assert_true(strstr(s, "998,999,qqq") != NULL);
    free(s);

    char t[40];
    omld_fmt_double(t, sizeof t, 0.1);
    assert_string_equal(t, "0.1");
    omld_fmt_double(t, sizeof t, 1.0 / 3.0);
    assert_true(strtod(t, NULL) == 1.0 / 3.0);
    omld_fmt_double(t, sizeof t, 1e-5);
    assert_string_equal(t, "1e-05");
}

/* ---- the status input ---- */

typedef struct fixture {
    omld_config cfg;
    omld_model_stats model;
    omld_metrics metrics;
    omld_status_input in;
} fixture;

static void fill(fixture *f)
{
    memset(f, 0, sizeof *f);
    omld_config_defaults(&f->cfg);
    snprintf(f->cfg.listen, sizeof f->cfg.listen, "127.0.0.1:7070");
    snprintf(f->cfg.data_dir, sizeof f->cfg.data_dir, "/var/lib/\"omld\"\n");
    f->cfg.dim = 784;

    omld_model_stats *m = &f->model;
    m->cfg.dim = 784;
    m->cfg.layers = 2;
    m->cfg.hidden = 100;
    m->cfg.emb = 50;
    m->cfg.eta = 0.25f;
    m->cfg.tau = 1.5f;
    m->cfg.beta = 0.5f;
    m->cfg.s = 0.125f;
    snprintf(m->preset, sizeof m->preset, "paper");
    m->heads = 3;
    m->prepared = 1;
    m->alpha[0] = 0.5f;
    m->alpha[1] = 0.25f;
    m->alpha[2] = 0.25f;
    m->loss_ema[0] = 0.75f;
    m->loss_ema[1] = 0.5f;
    m->loss_ema[2] = 0.125f;
    m->updates = 200;
    m->satisfied = 150;
    m->utilised = 50;
    m->items = 1234;
    m->labels = 10;
    m->queue_depth = 17;
    m->queue_capacity = 4096;
    m->closure.similar_pairs = 11;
    m->closure.dissimilar_pairs = 12;
    m->closure.conflicts = 3;
    m->closure.components = 4;
    m->closure.dis_edges = 5;
    m->view_version = 42;
    m->view_age_ms = 1500;
    m->view_items = 1200;
    m->view_updates = 190;
    m->wal_bytes = 123456789;
    m->wal_records_since_ckpt = 77;
    m->ckpt_unix_ms = 1700000000000ull;
    m->ckpt_duration_ms = 250;
    m->ckpt_pause_ms = 12;
    m->ckpt_written = 3;
    m->ckpt_failed = 1;
    m->read_only = 1;
    snprintf(m->read_only_why, sizeof m->read_only_why, "disk \"full\"");

    omld_metrics *mt = &f->metrics;
    omld_count(&mt->items_put, 1234);
    omld_count(&mt->items_deleted, 2);
    omld_count(&mt->triplets_received, 217);
    omld_count(&mt->triplets_applied, 200);
    omld_count(&mt->pairs_received, 23);
    omld_count(&mt->derived_triplets, 60);
    omld_count(&mt->backpressure_events, 6);
    omld_count(&mt->requests, 321);
    omld_count(&mt->responses_by_code[0], 300);
    omld_count(&mt->responses_by_code[1], 20);
    omld_count(&mt->responses_by_code[12], 1);
    omld_count(&mt->queries[OMLD_Q_CLASSIFY], 10);
    omld_count(&mt->queries[OMLD_Q_RETRIEVE], 4);
    omld_count(&mt->connections_accepted, 9);
    omld_count(&mt->connections_refused, 1);
    atomic_store(&mt->connections_open, 2);
    omld_count(&mt->frames_too_large, 7);
    omld_count(&mt->frames_malformed, 8);
    omld_count(&mt->views_published, 42);
    /* classify: 4 x 5 us, 4 x 80 us, 2 x 10 s (test_metrics.c worked these:
     * p50 = 67.1756 us, p99 = 5.6234 s). */
    for (int i = 0; i < 4; i++) {
        omld_hist_observe(&mt->query_latency[OMLD_Q_CLASSIFY], 5000);
        omld_hist_observe(&mt->query_latency[OMLD_Q_CLASSIFY], 80000);
    }
    omld_hist_observe(&mt->query_latency[OMLD_Q_CLASSIFY], 10000000000ull);
    omld_hist_observe(&mt->query_latency[OMLD_Q_CLASSIFY], 10000000000ull);
    for (int i = 0; i < 100; i++)
        omld_hist_observe(&mt->update_latency, 20000 + 1000 * (uint64_t)i);
    omld_hist_observe(&mt->index_build_latency, 300000000);

    f->in.version = "0.1.0";
    f->in.uptime_ms = 123456;
    f->in.cfg = &f->cfg;
    f->in.model = &f->model;
    f->in.metrics = &f->metrics;
    f->in.ready = 1;
    f->in.draining = 0;
    f->in.now_unix_ms = 1700000090500ull;
    f->in.have_process = 1;
    f->in.rss_bytes = 7 << 20;
    f->in.open_fds = 12;
    f->in.cpu_seconds = 1.5;
    f->in.start_unix_seconds = 1699999000.25;
}

static void assert_has(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("missing: %s", needle);
}

static void test_status_json(void **state)
{
    (void)state;
    fixture *f = malloc(sizeof *f);
    fill(f);
    size_t n = 0;
    char *s = omld_status_json(&f->in, &n);
    assert_non_null(s);
    assert_int_equal(strlen(s), n);
    assert_true(oml_test_json_valid(s, n));
    assert_has(s, "\"version\":\"0.1.0\"");
    assert_has(s, "\"uptime_ms\":123456");
    assert_has(s, "\"listen\":\"127.0.0.1:7070\"");
    assert_has(s, "\"data_dir\":\"/var/lib/\\\"omld\\\"\\n\"");
    assert_has(s, "\"dim\":784");
    assert_has(s, "\"heads\":3");
    assert_has(s, "\"prepared\":true");
    assert_has(s, "\"persistence\":{\"wal_bytes\":123456789,\"records_since_checkpoint\":77,"
                  "\"checkpoint_unix_ms\":1700000000000,\"checkpoint_age_ms\":90500,"
                  "\"checkpoint_duration_ms\":250,\"checkpoint_pause_ms\":12,"
                  "\"checkpoints_written\":3,"
                  "\"checkpoints_failed\":1,\"read_only\":true,"
                  "\"read_only_why\":\"disk \\\"full\\\"\"}");
    assert_has(s, "\"alpha\":[0.5,0.25,0.25]");
    assert_has(s, "\"loss_ema\":[0.75,0.5,0.125]");
    assert_has(s, "\"updates\":200");
    assert_has(s, "\"utilisation\":0.25");
    assert_has(s, "\"accuracy\":0.75");
    assert_has(s, "\"version\":42");
    assert_has(s, "\"snapshot_age_ms\":1500");
    assert_has(s, "\"view_updates\":190");
    assert_has(s, "\"items\":1234");
    assert_has(s, "\"labels\":10");
    assert_has(s, "\"triplets_received\":217");
    assert_has(s, "\"triplets_applied\":200");
    assert_has(s, "\"triplets_queued\":17");
    assert_has(s, "\"queue_depth\":17");
    assert_has(s, "\"queue_capacity\":4096");
    assert_has(s, "\"backpressure_events\":6");
    assert_has(s, "\"closure\":{\"similar_pairs\":11,\"dissimilar_pairs\":12,\"conflicts\":3,"
                  "\"components\":4,\"dis_edges\":5}");
    /* p50 = 0.067175599389276184 ms, p99 = 5623.4132519034912 ms */
    assert_has(s, "\"classify\":{\"count\":10,\"p50_ms\":0.06717559938927");
    assert_has(s, "\"p99_ms\":5623.41325190349");
    assert_has(s, "\"verify\":{\"count\":0,\"p50_ms\":0,\"p99_ms\":0}");
    assert_has(s, "\"get_items\":{\"count\":0");
    assert_has(s, "\"requests\":{\"total\":321,\"by_code\":{\"OK\":300,\"INVALID_ARGUMENT\":20,"
                  "\"NOT_FOUND\":0,\"WRONG_DIMENSION\":0,\"NON_FINITE\":0,\"RESOURCE_EXHAUSTED\":0,"
                  "\"FRAME_TOO_LARGE\":0,\"MALFORMED\":0,\"UNAVAILABLE\":0,\"INTERNAL\":0,"
                  "\"UNAUTHENTICATED\":0,\"PERMISSION_DENIED\":0,\"CONFLICT\":1,\"NOT_PRIMARY\":0}}");
    assert_has(s, "\"connections\":{\"open\":2,\"accepted\":9,\"refused\":1}");
    assert_has(s, "\"frames\":{\"too_large\":7,\"malformed\":8}");
    assert_has(s, "\"views_published\":42");
    assert_has(s, "\"ready\":true,\"draining\":false}");

    int py = oml_test_python_check(
        s, "import json,sys; d=json.load(sys.stdin); m=d[\"model\"]; "
           "assert m[\"alpha\"]==[0.5,0.25,0.25], m; assert m[\"accuracy\"]==0.75; "
           "assert d[\"config\"][\"dim\"]==784; assert d[\"ingest\"][\"items_put\"]==1234; "
           "assert abs(d[\"queries\"][\"classify\"][\"p50_ms\"]-0.0671755993892762)<1e-12; "
           "assert len(d[\"requests\"][\"by_code\"])==14; "
           "assert set(d[\"queries\"])=={\"classify\",\"verify\",\"retrieve\",\"embed\",\"get_items\","
           "\"classify_batch\",\"retrieve_batch\",\"recommend\",\"list_items\",\"export_model\",\"count_items\",\"shard_retrieve\"}");
    assert_true(py != 0);
    free(s);

    /* No updates yet: ratios are 0, not NaN; missing model/config are null. */
    f->model.updates = f->model.satisfied = f->model.utilised = 0;
    s = omld_status_json(&f->in, &n);
    assert_true(oml_test_json_valid(s, n));
    assert_has(s, "\"utilisation\":0,\"accuracy\":0,");
    free(s);
    f->in.model = NULL;
    f->in.cfg = NULL;
    f->in.metrics = NULL;
    f->in.version = NULL;
    s = omld_status_json(&f->in, &n);
    assert_true(oml_test_json_valid(s, n));
    assert_has(s, "\"config\":null");
    assert_has(s, "\"model\":null");
    free(s);
    free(f);
}

/* ---- a checker for the Prometheus text format 0.0.4 ---- */

#define MAX_FAMILIES 128

/* strlcpy: truncates, always terminates. */
static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

typedef struct prom_family {
    char name[128];
    char type[16];
    int help, samples;
} prom_family;

typedef struct prom_check {
    prom_family fam[MAX_FAMILIES];
    int nfam;
    prom_family *cur; /* the family whose samples may follow */
    /* histogram state, per label set (without le) */
    char hist_key[512];
    double last_le, last_bucket, inf_bucket;
    int saw_inf;
    char err[512];
} prom_check;

static prom_family *find_family(prom_check *pc, const char *name)
{
    for (int i = 0; i < pc->nfam; i++)
        if (strcmp(pc->fam[i].name, name) == 0)
            return &pc->fam[i];
    return NULL;
}

static int is_name_char(char c, int first)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':' || (!first && isdigit((unsigned char)c));
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Parses labels {a="x",b="y"} at *pp into key (all but le, joined) and le
 * (NULL if absent); unescapes values. 0 or -1. */
static int parse_labels(const char **pp, char *key, size_t keycap, char *le, size_t lecap,
                        int *has_le, char *first_value, size_t fvcap)
{
    const char *p = *pp;
    *has_le = 0;
    key[0] = '\0';
    if (first_value)
        first_value[0] = '\0';
    int nlabels = 0;
    if (*p != '{')
        return 0;
    p++;
    while (*p != '}') {
        char lname[64], lval[256];
        size_t n = 0;
        if (!is_name_char(*p, 1) || *p == ':')
            return -1;
        while (is_name_char(*p, 0) && *p != ':' && n < sizeof lname - 1)
            lname[n++] = *p++;
        lname[n] = '\0';
        if (*p++ != '=' || *p++ != '"')
            return -1;
        n = 0;
        while (*p != '"') {
            if (*p == '\0' || *p == '\n')
                return -1;
            char c = *p++;
            if (c == '\\') {
                char e = *p++;
                c = e == 'n' ? '\n' : e == '\\' ? '\\' : e == '"' ? '"' : 0;
                if (!c)
                    return -1;
            }
            if (n < sizeof lval - 1)
                lval[n++] = c;
        }
        lval[n] = '\0';
        p++;
        if (strcmp(lname, "le") == 0) {
            *has_le = 1;
            copy_str(le, lecap, lval);
        } else {
            size_t k = strlen(key);
            snprintf(key + k, keycap - k, "%s=%s;", lname, lval);
            if (first_value && nlabels == 0)
                copy_str(first_value, fvcap, lval);
            nlabels++;
        }
        if (*p == ',')
            p++;
        else if (*p != '}')
            return -1;
    }
    *pp = p + 1;
    return 0;
}

/* Records the first failure; always -1. */
static int pc_fail(prom_check *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pc_fail(prom_check *pc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pc->err, sizeof pc->err, fmt, ap);
    va_end(ap);
    return -1;
}
#define PC_FAIL(...) return pc_fail(pc, __VA_ARGS__)

static int hist_close(prom_check *pc)
{
    if (pc->hist_key[0] == '\x01')
        return 0; /* nothing open */
    if (!pc->saw_inf)
        PC_FAIL("histogram %s {%s}: no le=\"+Inf\" bucket", pc->cur->name, pc->hist_key);
    return 0;
}

static int check_line(prom_check *pc, const char *line, char *label_out, size_t lcap)
{
    if (line[0] == '#') {
        char kw[16], name[128], rest[256];
        if (sscanf(line, "# %15s %127s %255[^\n]", kw, name, rest) < 3)
            PC_FAIL("bad comment line: %s", line);
        prom_family *f = find_family(pc, name);
        if (strcmp(kw, "HELP") == 0) {
            if (f && f->samples)
                PC_FAIL("HELP after samples: %s", name);
            if (!f) {
                if (pc->nfam >= MAX_FAMILIES)
                    PC_FAIL("too many families");
                f = &pc->fam[pc->nfam++];
                copy_str(f->name, sizeof f->name, name);
            }
            if (f->help)
                PC_FAIL("two HELP lines for %s", name);
            f->help = 1;
            return 0;
        }
        if (strcmp(kw, "TYPE") == 0) {
            if (!f) {
                if (pc->nfam >= MAX_FAMILIES)
                    PC_FAIL("too many families");
                f = &pc->fam[pc->nfam++];
                copy_str(f->name, sizeof f->name, name);
            }
            if (f->type[0])
                PC_FAIL("two TYPE lines for %s", name);
            if (f->samples)
                PC_FAIL("TYPE after samples: %s", name);
            if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram") &&
                strcmp(rest, "summary") && strcmp(rest, "untyped"))
                PC_FAIL("bad type %s", rest);
            copy_str(f->type, sizeof f->type, rest);
            if (pc->cur && hist_close(pc) != 0)
                return -1;
            pc->cur = f;
            pc->hist_key[0] = '\x01';
            pc->hist_key[1] = '\0';
            return 0;
        }
        return 0; /* other comments are allowed */
    }
    /* sample: name{labels} value */
    char name[128];
    size_t n = 0;
    const char *p = line;
    if (!is_name_char(*p, 1))
        PC_FAIL("bad metric name: %s", line);
    while (is_name_char(*p, 0) && n < sizeof name - 1)
        name[n++] = *p++;
    name[n] = '\0';
    char key[512], le[64];
    int has_le;
    if (parse_labels(&p, key, sizeof key, le, sizeof le, &has_le, label_out, lcap) != 0)
        PC_FAIL("bad labels: %s", line);
    if (*p++ != ' ')
        PC_FAIL("no space before value: %s", line);
    char *end;
    double v = strtod(p, &end);
    if (end == p || (*end != '\0' && *end != ' '))
        PC_FAIL("bad value: %s", line);
    prom_family *f = pc->cur;
    if (!f || !f->type[0])
        PC_FAIL("sample before any TYPE: %s", line);
    f->samples++;
    if (strcmp(f->type, "histogram") == 0) {
        char base[128];
        if (ends_with(name, "_bucket")) {
            snprintf(base, sizeof base, "%.*s", (int)(strlen(name) - 7), name);
            if (strcmp(base, f->name) != 0)
                PC_FAIL("%s outside its family %s", name, f->name);
            if (!has_le)
                PC_FAIL("bucket without le: %s", line);
            if (strcmp(pc->hist_key, key) != 0) { /* a new label set starts */
                if (hist_close(pc) != 0)
                    return -1;
                copy_str(pc->hist_key, sizeof pc->hist_key, key);
                pc->last_le = -INFINITY;
                pc->last_bucket = 0;
                pc->saw_inf = 0;
            }
            if (pc->saw_inf)
                PC_FAIL("bucket after +Inf: %s", line);
            double lev = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
            if (!(lev > pc->last_le))
                PC_FAIL("le not increasing: %s", line);
            if (v < pc->last_bucket)
                PC_FAIL("buckets not cumulative: %s", line);
            pc->last_le = lev;
            pc->last_bucket = v;
            if (isinf(lev)) {
                pc->saw_inf = 1;
                pc->inf_bucket = v;
            }
        } else if (ends_with(name, "_sum") || ends_with(name, "_count")) {
            int is_count = ends_with(name, "_count");
            snprintf(base, sizeof base, "%.*s", (int)(strlen(name) - (is_count ? 6 : 4)), name);
            if (strcmp(base, f->name) != 0)
                PC_FAIL("%s outside its family %s", name, f->name);
            if (strcmp(pc->hist_key, key) != 0 || !pc->saw_inf)
                PC_FAIL("%s before its buckets: %s", name, line);
            if (is_count && v != pc->inf_bucket)
                PC_FAIL("_count %g != +Inf bucket %g", v, pc->inf_bucket);
        } else
            PC_FAIL("histogram sample %s is not _bucket/_sum/_count", name);
        return 0;
    }
    if (strcmp(name, f->name) != 0)
        PC_FAIL("sample %s outside its family %s", name, f->name);
    if (has_le)
        PC_FAIL("le label outside a histogram: %s", line);
    if (strcmp(f->type, "counter") == 0) {
        if (!ends_with(name, "_total"))
            PC_FAIL("counter %s does not end in _total", name);
        if (!(v >= 0))
            PC_FAIL("negative counter: %s", line);
    }
    return 0;
}

/* Checks the whole text; fills pc (families) and returns 0, or -1 with
 * pc->err. label values of the first label seen per line are ignored. */
static int check_exposition(prom_check *pc, const char *text)
{
    memset(pc, 0, sizeof *pc);
    size_t len = strlen(text);
    if (len == 0 || text[len - 1] != '\n')
        PC_FAIL("text does not end in a newline");
    const char *p = text;
    char line[4096], lab[256];
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p);
        if (n == 0)
            PC_FAIL("empty line");
        if (n >= sizeof line)
            PC_FAIL("line too long");
        memcpy(line, p, n);
        line[n] = '\0';
        if (check_line(pc, line, lab, sizeof lab) != 0)
            return -1;
        p = nl + 1;
    }
    if (pc->cur && strcmp(pc->cur->type, "histogram") == 0 && hist_close(pc) != 0)
        return -1;
    for (int i = 0; i < pc->nfam; i++) {
        if (!pc->fam[i].type[0])
            PC_FAIL("family %s has HELP but no TYPE", pc->fam[i].name);
        if (!pc->fam[i].help)
            PC_FAIL("family %s has no HELP", pc->fam[i].name);
        if (strncmp(pc->fam[i].name, "omld_", 5) != 0 &&
            strncmp(pc->fam[i].name, "process_", 8) != 0)
            PC_FAIL("family %s is not omld_- (or process_-) prefixed", pc->fam[i].name);
    }
    return 0;
}

/* The value of the sample line that starts with prefix (name + labels). */
static double sample_value(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    fail_msg("no sample %s", prefix);
    return NAN;
}

/* "<head>le=\"<bound i>\"}" with the bound written as status.c writes it
 * (shortest round trip); one static buffer. */
static const char *le_prefix(const char *head, int i)
{
    static char buf[256];
    char t[40];
    omld_fmt_double(t, sizeof t, omld_hist_bound(i));
    snprintf(buf, sizeof buf, "%sle=\"%s\"}", head, t);
    return buf;
}

static void test_metrics_text(void **state)
{
    (void)state;
    fixture *f = malloc(sizeof *f);
    fill(f);
    f->in.version = "0.1.0\"x\\y\nz"; /* label value escaping */
    size_t n = 0;
    char *s = omld_metrics_text(&f->in, &n);
    assert_non_null(s);
    assert_int_equal(strlen(s), n);
    prom_check *pc = calloc(1, sizeof *pc);
    if (check_exposition(pc, s) != 0)
        fail_msg("exposition: %s", pc->err);

    static const char *const counters[] = {
        "omld_items_put_total", "omld_items_deleted_total", "omld_triplets_received_total",
        "omld_triplets_applied_total", "omld_pairs_received_total", "omld_derived_triplets_total",
        "omld_backpressure_events_total", "omld_requests_total", "omld_queries_total",
        "omld_connections_accepted_total", "omld_connections_refused_total",
        "omld_views_published_total", "omld_frames_too_large_total",
        "omld_frames_malformed_total", "omld_model_updates_total"};
    static const char *const gauges[] = {
        "omld_hedge_weight", "omld_head_loss_ema", "omld_queue_depth", "omld_queue_capacity",
        "omld_items", "omld_model_version", "omld_snapshot_age_seconds", "omld_utilisation",
        "omld_triplet_accuracy", "omld_connections_open", "omld_uptime_seconds", "omld_ready"};
    static const char *const hists[] = {
        "omld_update_duration_seconds", "omld_ingest_duration_seconds",
        "omld_query_duration_seconds", "omld_index_build_duration_seconds"};
    for (size_t i = 0; i < sizeof counters / sizeof *counters; i++) {
        prom_family *fam = find_family(pc, counters[i]);
        if (!fam || strcmp(fam->type, "counter") != 0)
            fail_msg("no counter %s", counters[i]);
    }
    for (size_t i = 0; i < sizeof gauges / sizeof *gauges; i++) {
        prom_family *fam = find_family(pc, gauges[i]);
        if (!fam || strcmp(fam->type, "gauge") != 0)
            fail_msg("no gauge %s", gauges[i]);
    }
    for (size_t i = 0; i < sizeof hists / sizeof *hists; i++) {
        prom_family *fam = find_family(pc, hists[i]);
        if (!fam || strcmp(fam->type, "histogram") != 0)
            fail_msg("no histogram %s", hists[i]);
    }

    assert_has(s, "omld_build_info{version=\"0.1.0\\\"x\\\\y\\nz\"} 1\n");
    assert_true(sample_value(s, "omld_items_put_total") == 1234);
    assert_true(sample_value(s, "omld_triplets_received_total") == 217);
    assert_true(sample_value(s, "omld_requests_total{code=\"OK\"}") == 300);
    assert_true(sample_value(s, "omld_requests_total{code=\"CONFLICT\"}") == 1);
    assert_true(sample_value(s, "omld_requests_total{code=\"PERMISSION_DENIED\"}") == 0);
    assert_true(sample_value(s, "omld_queries_total{kind=\"classify\"}") == 10);
    assert_true(sample_value(s, "omld_queries_total{kind=\"get_items\"}") == 0);
    assert_true(sample_value(s, "omld_hedge_weight{depth=\"0\"}") == 0.5);
    assert_true(sample_value(s, "omld_hedge_weight{depth=\"2\"}") == 0.25);
    assert_null(strstr(s, "omld_hedge_weight{depth=\"3\"}"));
    assert_true(sample_value(s, "omld_head_loss_ema{depth=\"2\"}") == 0.125);
    assert_true(sample_value(s, "omld_queue_depth") == 17);
    assert_true(sample_value(s, "omld_model_version") == 42);
    assert_true(sample_value(s, "omld_snapshot_age_seconds") == 1.5);
    assert_true(sample_value(s, "omld_utilisation") == 0.25);
    assert_true(sample_value(s, "omld_triplet_accuracy") == 0.75);
    assert_true(sample_value(s, "omld_uptime_seconds") == 123.456);
    assert_true(sample_value(s, "omld_ready") == 1);
    assert_true(sample_value(s, "omld_connections_open") == 2);
    /* Persistence and the process (issue 12: what an orchestrator alerts on). */
    assert_true(sample_value(s, "omld_wal_bytes") == 123456789);
    assert_true(sample_value(s, "omld_wal_records_since_checkpoint") == 77);
    assert_true(sample_value(s, "omld_checkpoint_timestamp_seconds") == 1700000000);
    assert_true(sample_value(s, "omld_checkpoint_age_seconds") == 90.5);
    assert_true(sample_value(s, "omld_checkpoint_duration_seconds") == 0.25);
    assert_true(sample_value(s, "omld_checkpoint_pause_seconds") == 0.012);
    assert_true(sample_value(s, "omld_checkpoints_written_total") == 3);
    assert_true(sample_value(s, "omld_checkpoints_failed_total") == 1);
    assert_true(sample_value(s, "omld_read_only") == 1);
    assert_true(sample_value(s, "process_resident_memory_bytes") == 7 << 20);
    assert_true(sample_value(s, "process_open_fds") == 12);
    assert_true(sample_value(s, "process_cpu_seconds_total") == 1.5);
    assert_true(sample_value(s, "process_start_time_seconds") == 1699999000.25);
    /* Histograms: classify buckets are 4 at 10 us, 8 from 100 us on, 10 at +Inf. */
    assert_true(sample_value(s, "omld_query_duration_seconds_bucket{kind=\"classify\",le=\"1e-05\"}") == 4);
    assert_true(sample_value(s, le_prefix("omld_query_duration_seconds_bucket{kind=\"classify\",", 3)) == 4);
    assert_true(sample_value(s, "omld_query_duration_seconds_bucket{kind=\"classify\",le=\"0.0001\"}") == 8);
    assert_true(sample_value(s, "omld_query_duration_seconds_bucket{kind=\"classify\",le=\"+Inf\"}") == 10);
    assert_true(sample_value(s, "omld_query_duration_seconds_count{kind=\"classify\"}") == 10);
    assert_true(fabs(sample_value(s, "omld_query_duration_seconds_sum{kind=\"classify\"}") - 20.00034) < 1e-9);
    assert_true(sample_value(s, "omld_query_duration_seconds_count{kind=\"verify\"}") == 0);
    assert_true(sample_value(s, "omld_update_duration_seconds_count") == 100);
    /* 0.3 s: (0.178, 0.316] = bucket 18. */
    assert_true(sample_value(s, le_prefix("omld_index_build_duration_seconds_bucket{", 18)) == 1);
    assert_true(sample_value(s, le_prefix("omld_index_build_duration_seconds_bucket{", 17)) == 0);
    free(s);

    /* Not ready while draining; no model: no per-head samples, still valid. */
    f->in.draining = 1;
    f->in.model = NULL;
    s = omld_metrics_text(&f->in, &n);
    if (check_exposition(pc, s) != 0)
        fail_msg("exposition: %s", pc->err);
    assert_true(sample_value(s, "omld_ready") == 0);
    assert_true(sample_value(s, "omld_draining") == 1);
    assert_null(strstr(s, "omld_hedge_weight{"));
    free(s);
    free(pc);
    free(f);
}

/* The checker itself must catch what it is there to catch. */
static void test_checker_rejects(void **state)
{
    (void)state;
    prom_check *pc = calloc(1, sizeof *pc);
    static const char *const bad[] = {
        "omld_x_total 1\n",                                            /* no TYPE */
        "# HELP omld_x x\n# TYPE omld_x counter\nomld_x 1\n",          /* no _total */
        "# HELP omld_h h\n# TYPE omld_h histogram\nomld_h_bucket{le=\"1\"} 2\n"
        "omld_h_bucket{le=\"+Inf\"} 1\nomld_h_sum 0\nomld_h_count 1\n", /* not cumulative */
        "# HELP omld_h h\n# TYPE omld_h histogram\nomld_h_bucket{le=\"1\"} 2\n"
        "omld_h_sum 0\nomld_h_count 2\n",                              /* no +Inf */
        "# HELP omld_h h\n# TYPE omld_h histogram\nomld_h_bucket{le=\"+Inf\"} 2\n"
        "omld_h_sum 0\nomld_h_count 3\n",                              /* count != +Inf */
        "# HELP omld_g g\n# TYPE omld_g gauge\nomld_g{a=\"x\ny\"} 1\n", /* raw newline */
        "# HELP omld_g g\n# TYPE omld_g gauge\nomld_g{a=\"x\\qy\"} 1\n", /* bad escape */
        "# HELP omld_g g\n# TYPE omld_g gauge\nomld_other 1\n",         /* foreign sample */
        "# TYPE omld_g gauge\nomld_g 1\n",                              /* no HELP */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (check_exposition(pc, bad[i]) == 0)
            fail_msg("checker accepted bad text #%zu", i);
    assert_int_equal(check_exposition(pc, "# HELP omld_g g\n# TYPE omld_g gauge\n"
                                           "omld_g{a=\"q\\\"\\\\\\n\"} NaN\n"), 0);
    free(pc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_writer),
        cmocka_unit_test(test_json_misuse),
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_status_json),
        cmocka_unit_test(test_metrics_text),
        cmocka_unit_test(test_checker_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
