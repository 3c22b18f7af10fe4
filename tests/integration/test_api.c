/* test_api.c - the HTTP/JSON API of the real omld: every answer parsed as
 * JSON (jansson), checked against the RPC's own answers and error codes.
 *
 * The data: 4 classes of items in 16 dimensions, tight clouds around their
 * centres (blobs.h), stored and queried over HTTP only. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "blobs.h"
#include "harness.h"
#include "omld.pb-c.h"

#define DIM 16
#define N_ITEMS 120
#define CLASSES 4
#define TIMEOUT_MS 20000
#define RW "Bearer api-rw-secret"
#define RO "Bearer api-ro-secret"

static const char *const ARGS[] = {
    "--dim=16", "--preset=default", "--layers=2", "--hidden=32", "--emb=8", "--publish_ms=50",
    "--max_k=100", "--seed=3", "--tokens=rw:api-rw-secret,ro:api-ro-secret", NULL};

static omld_proc g_proc;
static float X[N_ITEMS][DIM];

/* One call; the answer parsed (the test fails unless it is JSON). */
static json_t *call(const char *method, const char *path, const char *auth, const char *body,
                    int *http)
{
    char *text = NULL;
    *http = omld_http_call(g_proc.http, method, path, auth, body, &text, NULL);
    assert_true(*http > 0);
    json_error_t e;
    json_t *j = json_loads(text ? text : "", 0, &e);
    if (j == NULL)
        fail_msg("%s %s answered %d with no JSON: %s", method, path, *http, text ? text : "");
    free(text);
    return j;
}

static const char *status_code(const json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "status"), "code"));
}

static const char *status_field(const json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "status"), "field"));
}

/* {"items": [{"id": "item-i", "features": [...], "label": "class-c"}, ...]} */
static char *items_json(void)
{
    json_t *items = json_array();
    for (int i = 0; i < N_ITEMS; i++) {
        json_t *f = json_array();
        for (int d = 0; d < DIM; d++)
            json_array_append_new(f, json_real(X[i][d]));
        char id[32], label[32];
        snprintf(id, sizeof id, "item-%d", i);
        snprintf(label, sizeof label, "class-%d", i % CLASSES);
        json_array_append_new(items, json_pack("{s:s,s:o,s:s}", "id", id, "features", f, "label", label));
    }
    json_t *doc = json_pack("{s:o}", "items", items);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

static int setup(void **state)
{
    (void)state;
    oml_test_blobs(&X[0][0], N_ITEMS, DIM, CLASSES, 777, 0.5f, 0.1f);
    if (omld_proc_start(&g_proc, ARGS, TIMEOUT_MS) != 0)
        return -1;
    char *body = items_json();
    int http;
    json_t *j = call("POST", "/v1/put_items", RW, body, &http);
    free(body);
    int ok = http == 200 && strcmp(status_code(j), "OK") == 0 &&
             json_integer_value(json_object_get(json_object_get(j, "result"), "created")) == N_ITEMS;
    json_decref(j);
    return ok ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int rc = omld_proc_stop(&g_proc, SIGTERM, TIMEOUT_MS);
    if (rc != 0)
        omld_proc_dump_log(&g_proc);
    omld_proc_cleanup(&g_proc);
    return rc == 0 ? 0 : -1;
}

/* Triplets (shorthand ids) are learned; classify and retrieve answer from
 * the model: every item's class by its neighbours, a label filter honoured,
 * similarities in [-1, 1] and best first. */
static void test_learn_and_query(void **state)
{
    (void)state;
    json_t *trip = json_array();
    for (int i = 0; i < 200; i++) {
        int a = (i * 7) % N_ITEMS, p = (a + CLASSES) % N_ITEMS, n = (a + 1) % N_ITEMS;
        char sa[16], sp[16], sn[16];
        snprintf(sa, sizeof sa, "item-%d", a);
        snprintf(sp, sizeof sp, "item-%d", p);
        snprintf(sn, sizeof sn, "item-%d", n);
        json_array_append_new(trip, json_pack("{s:s,s:s,s:s}", "anchor", sa, "positive", sp,
                                              "negative", sn));
    }
    json_t *doc = json_pack("{s:o}", "triplets", trip);
    char *body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    int http;
    json_t *j = call("POST", "/v1/add_triplets", RW, body, &http);
    free(body);
    assert_int_equal(http, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "result"), "accepted")), 200);
    json_decref(j);
    /* Until the serving view has learned them (status, over HTTP too). */
    for (int tries = 0;; tries++) {
        j = call("GET", "/v1/status", RO, NULL, &http);
        json_int_t seen = json_integer_value(json_object_get(json_object_get(j, "result"), "view_triplets"));
        json_decref(j);
        if (seen >= 200)
            break;
        assert_true(tries < 2000);
        usleep(5000);
    }

    for (int i = 0; i < N_ITEMS; i += 7) {
        char q[96];
        snprintf(q, sizeof q, "{\"query\": \"item-%d\", \"k\": 5}", i);
        j = call("POST", "/v1/classify", RO, q, &http);
        assert_int_equal(http, 200);
        char want[16];
        snprintf(want, sizeof want, "class-%d", i % CLASSES);
        const char *got = json_string_value(json_object_get(json_object_get(j, "result"), "label"));
        if (got == NULL || strcmp(got, want) != 0)
            fail_msg("%s: %s", q, json_dumps(j, 0));
        assert_true(json_integer_value(json_object_get(j, "model_version")) >= 1);
        json_decref(j);
    }

    /* A vector query (the shorthand array), filtered to one label. */
    json_t *v = json_array();
    for (int d = 0; d < DIM; d++)
        json_array_append_new(v, json_real(X[0][d]));
    doc = json_pack("{s:o,s:i,s:[s]}", "query", v, "k", 10, "labels", "class-1");
    body = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    j = call("POST", "/v1/retrieve", RO, body, &http);
    free(body);
    assert_int_equal(http, 200);
    json_t *hits = json_object_get(json_object_get(j, "result"), "hits");
    assert_int_equal(json_array_size(hits), 10);
    double last = 2;
    for (size_t h = 0; h < json_array_size(hits); h++) {
        json_t *hit = json_array_get(hits, h);
        assert_string_equal(json_string_value(json_object_get(hit, "label")), "class-1");
        double s = json_number_value(json_object_get(hit, "similarity"));
        assert_true(s >= -1 && s <= 1 && s <= last);
        last = s;
    }
    json_decref(j);
}

/* Errors carry the RPC's codes and field paths, with the HTTP status of
 * the code; bad JSON is MALFORMED; nothing is changed. */
static void test_errors_name_the_field(void **state)
{
    (void)state;
    static const struct {
        const char *path, *auth, *body;
        int http;
        const char *code, *field;
    } cases[] = {
        {"/v1/classify", RO, "{\"query\": [1, 2, 3], \"k\": 5}", 400, "WRONG_DIMENSION",
         "classify.query.vector"},
        {"/v1/classify", RO, "{\"query\": \"no-such-item\"}", 404, "NOT_FOUND", "classify.query.id"},
        {"/v1/classify", RO, "{\"query\": \"item-1\", \"k\": 0}", 400, "INVALID_ARGUMENT", "classify.k"},
        {"/v1/classify", RO, "{\"query\": \"item-1\", \"k\": -1}", 400, "INVALID_ARGUMENT", "classify.k"},
        {"/v1/classify", RO, "{\"query\": \"item-1\", \"kk\": 5}", 400, "INVALID_ARGUMENT", "classify.kk"},
        {"/v1/classify", RO, "{\"query\": \"item-1\", \"k\": 5", 400, "MALFORMED", ""},
        {"/v1/classify", RO, "[1, 2]", 400, "INVALID_ARGUMENT", "classify"},
        {"/v1/put_items", RO, "{\"items\": [{\"id\": \"x\", \"features\": []}]}", 403,
         "PERMISSION_DENIED", "put_items"},
        {"/v1/put_items", NULL, "{\"items\": []}", 401, "UNAUTHENTICATED", ""},
        {"/v1/put_items", RW, "{\"items\": [{\"id\": \"x\", \"features\": [1, \"a\"]}]}", 400,
         "INVALID_ARGUMENT", "put_items.items[0].features[1]"},
        {"/v1/add_pairs", RW, "{\"pairs\": [{\"a\": \"item-1\", \"b\": \"item-2\", \"relation\": \"SIMILARR\"}]}",
         400, "INVALID_ARGUMENT", "add_pairs.pairs[0].relation"},
        {"/v1/add_triplets", RW, "{\"triplets\": [{\"anchor\": \"item-1\", \"positive\": \"item-2\", "
         "\"negative\": \"item-1\"}]}", 400, "INVALID_ARGUMENT", NULL},
        {"/v1/auth", RW, "{}", 404, "NOT_FOUND", ""},
        {"/v1/no_such_operation", RW, "{}", 404, "NOT_FOUND", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int http;
        json_t *j = call("POST", cases[i].path, cases[i].auth, cases[i].body, &http);
        if (http != cases[i].http || strcmp(status_code(j), cases[i].code) != 0 ||
            (cases[i].field && strcmp(status_field(j), cases[i].field) != 0))
            fail_msg("case %zu (%s %s): %d %s field %s", i, cases[i].path, cases[i].body, http,
                     status_code(j), status_field(j));
        assert_null(json_object_get(j, "result"));
        json_decref(j);
    }
    /* Nothing above was stored. */
    int http;
    json_t *j = call("GET", "/v1/status", RO, NULL, &http);
    assert_int_equal(http, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "result"), "items")), N_ITEMS);
    json_decref(j);
    /* A writing operation is POST only. */
    char *text = NULL;
    assert_int_equal(omld_http_call(g_proc.http, "GET", "/v1/put_items", RW, NULL, &text, NULL), 405);
    free(text);
}

/* Requests pipelined on one keep-alive connection are answered in order. */
static void test_pipelined_in_order(void **state)
{
    (void)state;
    char host[128];
    snprintf(host, sizeof host, "%s", g_proc.http);
    char *colon = strrchr(host, ':');
    *colon = '\0';
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, host, &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[4096];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        char body[64];
        int bl = snprintf(body, sizeof body, "{\"query\":\"item-%d\",\"k\":3}", i);
        n += (size_t)snprintf(req + n, sizeof req - n,
                              "POST /v1/classify HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
                              "Content-Length: %d\r\n%s\r\n%s",
                              RO, bl, i == 2 ? "Connection: close\r\n" : "", body);
    }
    assert_int_equal(write(fd, req, n), (ssize_t)n);
    char buf[65536];
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd);
    const char *p = buf;
    for (int i = 0; i < 3; i++) {
        p = strstr(p, "\r\n\r\n");
        assert_non_null(p);
        p += 4;
        json_error_t e;
        json_t *j = json_loads(p, JSON_DISABLE_EOF_CHECK, &e);
        assert_non_null(j);
        char want[16];
        snprintf(want, sizeof want, "class-%d", i % CLASSES);
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "result"), "label")), want);
        json_decref(j);
    }
}

/* A write with wait_for_view is answered once a view serves it: a query
 * sent right after the answer finds the new item, and the answer's
 * model_version is that view's (at least the one before). */
static void test_wait_for_view(void **state)
{
    (void)state;
    for (int i = 0; i < 20; i++) {
        int http;
        json_t *st = call("GET", "/v1/health", RO, NULL, &http);
        json_int_t before = json_integer_value(json_object_get(st, "model_version"));
        json_decref(st);
        json_t *f = json_array();
        for (int d = 0; d < DIM; d++)
            json_array_append_new(f, json_real(d == i % DIM ? 40.0 + i : -3.0));
        char id[32];
        snprintf(id, sizeof id, "waited-%d", i);
        json_t *doc = json_pack("{s:[{s:s,s:O,s:s}],s:b}", "items", "id", id, "features", f,
                                "label", "w", "wait_for_view", 1);
        char *body = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        json_t *j = call("POST", "/v1/put_items", RW, body, &http);
        free(body);
        assert_int_equal(http, 200);
        json_int_t version = json_integer_value(json_object_get(j, "model_version"));
        assert_true(version > before);
        json_decref(j);
        doc = json_pack("{s:O,s:i}", "query", f, "k", 1);
        body = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        json_decref(f);
        j = call("POST", "/v1/retrieve", RO, body, &http);
        free(body);
        assert_int_equal(http, 200);
        json_t *hit = json_array_get(json_object_get(json_object_get(j, "result"), "hits"), 0);
        if (hit == NULL || strcmp(json_string_value(json_object_get(hit, "id")), id) != 0)
            fail_msg("%s not found right after its answer (version %lld)", id, (long long)version);
        assert_true(json_integer_value(json_object_get(j, "model_version")) >= version);
        json_decref(j);
    }
}

/* Recommend: like the positives (class 1 items), never an example, the
 * filters honoured; an unknown example is NOT_FOUND naming it. */
static void test_recommend(void **state)
{
    (void)state;
    int http;
    json_t *j = call("POST", "/v1/recommend", RO,
                     "{\"positive\": [\"item-1\", \"item-5\"], \"negative\": [\"item-2\"], \"k\": 10}",
                     &http);
    assert_int_equal(http, 200);
    json_t *hits = json_object_get(json_object_get(j, "result"), "hits");
    assert_int_equal(json_array_size(hits), 10);
    for (size_t i = 0; i < json_array_size(hits); i++) {
        json_t *h = json_array_get(hits, i);
        const char *id = json_string_value(json_object_get(h, "id"));
        assert_string_not_equal(id, "item-1");
        assert_string_not_equal(id, "item-5");
        assert_string_equal(json_string_value(json_object_get(h, "label")), "class-1");
    }
    json_decref(j);
    /* Filtered to another label, with a vector positive. */
    j = call("POST", "/v1/recommend", RO,
             "{\"positive\": [\"item-1\"], \"labels\": [\"class-2\"], \"k\": 3}", &http);
    assert_int_equal(http, 200);
    hits = json_object_get(json_object_get(j, "result"), "hits");
    assert_int_equal(json_array_size(hits), 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(hits, i), "label")),
                            "class-2");
    json_decref(j);
    j = call("POST", "/v1/recommend", RO, "{\"positive\": [\"item-1\", \"nope\"]}", &http);
    assert_int_equal(http, 404);
    assert_string_equal(status_field(j), "recommend.positive[1].id");
    json_decref(j);
    j = call("POST", "/v1/recommend", RO, "{\"negative\": [\"item-1\"]}", &http);
    assert_int_equal(http, 400);
    assert_string_equal(status_field(j), "recommend.positive");
    json_decref(j);
}

/* ListItems: pages of 7 cover every item exactly once, next_cursor 0 at
 * the end; a label filter keeps that label's items only. */
static void test_list_items(void **state)
{
    (void)state;
    int seen[N_ITEMS] = {0}, total = 0, pages = 0;
    json_int_t cursor = 0;
    do {
        char body[96];
        snprintf(body, sizeof body, "{\"cursor\": %lld, \"limit\": 7}", (long long)cursor);
        int http;
        json_t *j = call("POST", "/v1/list_items", RO, body, &http);
        assert_int_equal(http, 200);
        json_t *res = json_object_get(j, "result");
        json_t *items = json_object_get(res, "items");
        assert_true(json_array_size(items) <= 7);
        for (size_t i = 0; i < json_array_size(items); i++) {
            const char *id = json_string_value(json_object_get(json_array_get(items, i), "id"));
            int n = -1;
            if (sscanf(id, "item-%d", &n) == 1 && n >= 0 && n < N_ITEMS) {
                seen[n]++;
                total++;
            }
        }
        cursor = json_integer_value(json_object_get(res, "next_cursor"));
        json_decref(j);
        assert_true(++pages < 100);
    } while (cursor != 0);
    assert_int_equal(total, N_ITEMS);
    for (int i = 0; i < N_ITEMS; i++)
        assert_int_equal(seen[i], 1);
    int http;
    json_t *j = call("POST", "/v1/list_items", RO,
                     "{\"labels\": [\"class-3\"], \"limit\": 1000, \"with_features\": true}", &http);
    assert_int_equal(http, 200);
    json_t *items = json_object_get(json_object_get(j, "result"), "items");
    assert_int_equal(json_array_size(items), N_ITEMS / CLASSES);
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *it = json_array_get(items, i);
        assert_string_equal(json_string_value(json_object_get(it, "label")), "class-3");
        assert_int_equal(json_array_size(json_object_get(it, "features")), DIM);
    }
    json_decref(j);
}

/* /openapi.json is OpenAPI 3: every operation of the proto's Request but
 * Auth has its path, and every $ref resolves to a schema. */
static int refs_resolve(const json_t *node, const json_t *schemas)
{
    if (json_is_object(node)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)node, k, v) {
            if (strcmp(k, "$ref") == 0) {
                const char *ref = json_string_value(v);
                const char *prefix = "#/components/schemas/";
                if (!ref || strncmp(ref, prefix, strlen(prefix)) != 0 ||
                    !json_object_get(schemas, ref + strlen(prefix)))
                    return 0;
            } else if (!refs_resolve(v, schemas)) {
                return 0;
            }
        }
    } else if (json_is_array(node)) {
        for (size_t i = 0; i < json_array_size(node); i++)
            if (!refs_resolve(json_array_get(node, i), schemas))
                return 0;
    }
    return 1;
}

static void test_openapi(void **state)
{
    (void)state;
    int http;
    json_t *j = call("GET", "/openapi.json", NULL, NULL, &http);
    assert_int_equal(http, 200);
    assert_string_equal(json_string_value(json_object_get(j, "openapi")), "3.0.3");
    json_t *paths = json_object_get(j, "paths");
    json_t *schemas = json_object_get(json_object_get(j, "components"), "schemas");
    const ProtobufCMessageDescriptor *d = &omld__request__descriptor;
    int ops = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        if (d->fields[i].type != PROTOBUF_C_TYPE_MESSAGE || strcmp(d->fields[i].name, "auth") == 0)
            continue;
        char path[96];
        snprintf(path, sizeof path, "/v1/%s", d->fields[i].name);
        json_t *item = json_object_get(paths, path);
        if (item == NULL || json_object_get(item, "post") == NULL)
            fail_msg("%s missing from /openapi.json", path);
        ops++;
    }
    assert_int_equal((int)json_object_size(paths), ops);
    assert_non_null(json_object_get(schemas, "ClassifyRequest"));
    assert_true(refs_resolve(j, schemas));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learn_and_query),
        cmocka_unit_test(test_errors_name_the_field),
        cmocka_unit_test(test_pipelined_in_order),
        cmocka_unit_test(test_wait_for_view),
        cmocka_unit_test(test_recommend),
        cmocka_unit_test(test_list_items),
        cmocka_unit_test(test_openapi),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
