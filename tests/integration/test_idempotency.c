/* test_idempotency.c - idempotency keys through the real omld (over the
 * HTTP/JSON API): a retried batch is applied once, across a kill -9 (the key
 * comes back from the log) and a checkpoint (from its section); a failed
 * request leaves no key; the same key on another kind of request is
 * CONFLICT; the table keeps only the newest idempotency_keys keys. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "harness.h"
#include "omlclient.h"

#define TIMEOUT_MS 20000
#define N_ITEMS 40

static const char *const ARGS[] = {"--dim=4", "--layers=1", "--hidden=8", "--emb=4",
                                   "--publish_ms=50", "--seed=5", NULL};

static json_t *post(const omld_proc *p, const char *op, const char *body, int *http)
{
    char path[64], *text = NULL;
    snprintf(path, sizeof path, "/v1/%s", op);
    *http = omld_http_call(p->http, "POST", path, NULL, body, &text, NULL);
    json_error_t e;
    json_t *j = text ? json_loads(text, 0, &e) : NULL;
    if (j == NULL)
        fail_msg("%s answered %d: %s", op, *http, text ? text : "(nothing)");
    free(text);
    return j;
}

static json_int_t result_int(const json_t *j, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(j, "result"), key));
}

static int duplicate(const json_t *j)
{
    return json_is_true(json_object_get(json_object_get(j, "result"), "duplicate"));
}

/* The ingest counters /v1/status reports. */
static json_int_t status_count(const omld_proc *p, const char *key)
{
    int http;
    json_t *j = post(p, "status", "{}", &http);
    assert_int_equal(http, 200);
    json_int_t v = result_int(j, key);
    json_decref(j);
    return v;
}

static char *items_body(const char *key)
{
    json_t *items = json_array();
    for (int i = 0; i < N_ITEMS; i++) {
        char id[16];
        snprintf(id, sizeof id, "i%d", i);
        json_array_append_new(items, json_pack("{s:s,s:[f,f,f,f],s:s}", "id", id, "features",
                                               (double)(i % 4), (double)(i % 3), 0.5, (double)i / N_ITEMS,
                                               "label", i % 2 ? "odd" : "even"));
    }
    json_t *doc = json_pack("{s:o,s:s}", "items", items, "idempotency_key", key);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return s;
}

/* 30 triplets by id under key. */
static char *triplets_body(const char *key, const char *unknown_id)
{
    json_t *t = json_array();
    for (int i = 0; i < 30; i++) {
        char a[16], p[16], n[16];
        snprintf(a, sizeof a, "i%d", i % N_ITEMS);
        snprintf(p, sizeof p, "i%d", (i + 2) % N_ITEMS);
        snprintf(n, sizeof n, "i%d", (i + 1) % N_ITEMS);
        json_array_append_new(t, json_pack("{s:s,s:s,s:s}", "anchor", i == 7 && unknown_id ? unknown_id : a,
                                           "positive", p, "negative", n));
    }
    json_t *doc = json_pack("{s:o,s:s}", "triplets", t, "idempotency_key", key);
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return s;
}

/* Sends body to op: the answer must be OK, duplicate as expected, and the
 * count under count_key equal to want. */
static void expect(const omld_proc *p, const char *op, const char *body, int dup,
                   const char *count_key, json_int_t want)
{
    int http;
    json_t *j = post(p, op, body, &http);
    if (http != 200 || duplicate(j) != dup || result_int(j, count_key) != want)
        fail_msg("%s: %d, duplicate %d (want %d), %s %lld (want %lld)", op, http, duplicate(j), dup,
                 count_key, (long long)result_int(j, count_key), (long long)want);
    json_decref(j);
}

static void test_retries_are_applied_once_across_restarts(void **state)
{
    (void)state;
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, ARGS, TIMEOUT_MS), 0);
    char *items = items_body("put-1"), *trip = triplets_body("t-1", NULL);
    expect(&p, "put_items", items, 0, "created", N_ITEMS);
    expect(&p, "put_items", items, 1, "created", N_ITEMS); /* the first answer's counts */
    expect(&p, "add_triplets", trip, 0, "accepted", 30);
    expect(&p, "add_triplets", trip, 1, "accepted", 30);
    assert_int_equal(status_count(&p, "triplets_received"), 30);

    /* The same key on another kind of request. */
    int http;
    json_t *j = post(&p, "add_pairs",
                     "{\"pairs\": [{\"a\": \"i1\", \"b\": \"i2\", \"relation\": \"SIMILAR\"}], "
                     "\"idempotency_key\": \"t-1\"}",
                     &http);
    assert_int_equal(http, 409);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "status"), "field")),
                        "add_pairs.idempotency_key");
    json_decref(j);

    /* A refused request leaves no key: fixed, it is applied. */
    char *bad = triplets_body("t-2", "no-such-item");
    j = post(&p, "add_triplets", bad, &http);
    assert_int_equal(http, 404);
    json_decref(j);
    char *good = triplets_body("t-2", NULL);
    expect(&p, "add_triplets", good, 0, "accepted", 30);

    /* kill -9: the keys come back with the log. */
    assert_int_equal(omld_proc_stop(&p, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&p, ARGS, TIMEOUT_MS), 0);
    expect(&p, "add_triplets", trip, 1, "accepted", 30);
    expect(&p, "add_triplets", good, 1, "accepted", 30);
    expect(&p, "put_items", items, 1, "created", N_ITEMS);
    assert_int_equal(status_count(&p, "triplets_received"), 60);

    /* A checkpoint, then kill -9: the keys come back from its section. */
    j = post(&p, "checkpoint", "{}", &http);
    assert_int_equal(http, 200);
    json_decref(j);
    assert_int_equal(omld_proc_stop(&p, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&p, ARGS, TIMEOUT_MS), 0);
    expect(&p, "add_triplets", trip, 1, "accepted", 30);
    expect(&p, "put_items", items, 1, "created", N_ITEMS);
    assert_int_equal(status_count(&p, "triplets_received"), 60);
    assert_true(status_count(&p, "duplicates") >= 2);

    free(items);
    free(trip);
    free(bad);
    free(good);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

/* With idempotency_keys = 2 the oldest key is forgotten: its retry is
 * applied again, the two newest are not. */
static void test_only_the_newest_keys_are_kept(void **state)
{
    (void)state;
    const char *args[16];
    int n = 0;
    for (; ARGS[n]; n++)
        args[n] = ARGS[n];
    args[n++] = "--idempotency_keys=2";
    args[n] = NULL;
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    char *items = items_body("put");
    expect(&p, "put_items", items, 0, "created", N_ITEMS);
    char *k1 = triplets_body("k1", NULL), *k2 = triplets_body("k2", NULL);
    expect(&p, "add_triplets", k1, 0, "accepted", 30);
    expect(&p, "add_triplets", k2, 0, "accepted", 30); /* "put" is forgotten */
    expect(&p, "add_triplets", k2, 1, "accepted", 30);
    expect(&p, "add_triplets", k1, 1, "accepted", 30);
    expect(&p, "put_items", items, 0, "replaced", N_ITEMS); /* applied again, k1 forgotten */
    expect(&p, "add_triplets", k1, 0, "accepted", 30);
    free(items);
    free(k1);
    free(k2);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

/* omld started with ARGS and the N_ITEMS items stored. */
static void start_with_items(omld_proc *p)
{
    assert_int_equal(omld_proc_start(p, ARGS, TIMEOUT_MS), 0);
    char *items = items_body("put");
    expect(p, "put_items", items, 0, "created", N_ITEMS);
    free(items);
}

/* The C client's keyed call and omlctl triplets --key: a rerun of the same
 * command learns nothing again. */
static void test_clients_send_keys(void **state)
{
    (void)state;
    omld_proc p;
    start_with_items(&p);
    omlc *c = omld_proc_dial(&p, TIMEOUT_MS);
    assert_non_null(c);
    omlc_triplet t[2] = {{{"i1", NULL, 0}, {"i3", NULL, 0}, {"i2", NULL, 0}, 0.0f},
                         {{"i4", NULL, 0}, {"i6", NULL, 0}, {"i5", NULL, 0}, 0.0f}};
    uint32_t accepted = 0;
    int dup = -1;
    omlc_error err;
    assert_int_equal(omlc_add_triplets_keyed(c, t, 2, "c-1", &accepted, &dup, &err), 0);
    assert_int_equal(accepted, 2);
    assert_int_equal(dup, 0);
    assert_int_equal(omlc_add_triplets_keyed(c, t, 1, "c-1", &accepted, &dup, &err), 0);
    assert_int_equal(accepted, 2); /* the first answer's count */
    assert_int_equal(dup, 1);
    omlc_close(c);
#ifdef OMLCTL_BIN
    char csv[] = "/tmp/omld-keys-XXXXXX";
    int fd = mkstemp(csv);
    assert_true(fd >= 0);
    for (int i = 0; i < 25; i++)
        dprintf(fd, "i%d,i%d,i%d\n", i, (i + 2) % N_ITEMS, (i + 1) % N_ITEMS);
    close(fd);
    static const char *const want[2] = {"learned 25 triplets; 0 batches had been learned before",
                                        "learned 0 triplets; 3 batches had been learned before"};
    for (int run = 0; run < 2; run++) {
        char cmd[512], got[1024] = {0};
        snprintf(cmd, sizeof cmd, "%s --server %s triplets --key run --batch 10 %s", OMLCTL_BIN,
                 p.rpc, csv);
        FILE *out = popen(cmd, "r");
        assert_non_null(out);
        size_t len = fread(got, 1, sizeof got - 1, out);
        got[len] = '\0';
        assert_int_equal(pclose(out), 0);
        if (strstr(got, want[run]) == NULL)
            fail_msg("run %d: %s", run, got);
    }
    unlink(csv);

    /* omlctl reads CSV with RFC 4180 quoting: an id holding commas and a
     * quote; a quote left open is refused, naming the line. */
    char items_csv[] = "/tmp/omld-quoted-XXXXXX";
    fd = mkstemp(items_csv);
    assert_true(fd >= 0);
    dprintf(fd, "\"a,b \"\"c\"\"\",lab,1,2,3,4\n");
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --server %s put --format csv %s >/dev/null", OMLCTL_BIN, p.rpc,
             items_csv);
    assert_int_equal(system(cmd), 0);
    int http;
    json_t *j = post(&p, "get_items", "{\"ids\": [\"a,b \\\"c\\\"\"]}", &http);
    assert_int_equal(http, 200);
    json_decref(j);
    fd = open(items_csv, O_WRONLY | O_TRUNC);
    dprintf(fd, "\"open,lab,1,2,3,4\n");
    close(fd);
    snprintf(cmd, sizeof cmd, "%s --server %s put --format csv %s 2>/dev/null", OMLCTL_BIN, p.rpc,
             items_csv);
    assert_int_equal(WEXITSTATUS(system(cmd)), 1);
    unlink(items_csv);

    /* omlctl call / get / delete: the HTTP API's JSON over the RPC. */
    snprintf(cmd, sizeof cmd, "%s --server %s call get_items '{\"ids\": [\"i1\"]}'", OMLCTL_BIN,
             p.rpc);
    FILE *out = popen(cmd, "r");
    char got[4096] = {0};
    size_t len = fread(got, 1, sizeof got - 1, out);
    got[len] = '\0';
    assert_int_equal(pclose(out), 0);
    json_error_t je;
    j = json_loads(got, 0, &je);
    assert_non_null(j);
    json_t *item = json_array_get(json_object_get(json_object_get(j, "result"), "items"), 0);
    assert_string_equal(json_string_value(json_object_get(item, "id")), "i1");
    assert_int_equal(json_array_size(json_object_get(item, "features")), 4);
    json_decref(j);
    snprintf(cmd, sizeof cmd, "%s --server %s delete i39 >/dev/null", OMLCTL_BIN, p.rpc);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s --server %s get i39 >/dev/null 2>&1", OMLCTL_BIN, p.rpc);
    assert_int_equal(WEXITSTATUS(system(cmd)), 2); /* NOT_FOUND: deleted */
    snprintf(cmd, sizeof cmd, "%s --server %s call classify '{\"qury\": 1}' 2>/dev/null",
             OMLCTL_BIN, p.rpc);
    assert_int_equal(WEXITSTATUS(system(cmd)), 1); /* a misspelt field is a usage error */

    /* omlctl triplets -: lines are learned as they arrive, before the input
     * ends (a part batch goes out after 0.2 s without a new line). */
    json_int_t before = status_count(&p, "triplets_received");
    snprintf(cmd, sizeof cmd, "%s --server %s triplets - >/dev/null", OMLCTL_BIN, p.rpc);
    FILE *in = popen(cmd, "w");
    assert_non_null(in);
    fprintf(in, "i1,i3,i2\ni4,i6,i5\n");
    fflush(in);
    json_int_t now = before;
    for (int tries = 0; tries < 300 && now < before + 2; tries++) {
        usleep(10000);
        now = status_count(&p, "triplets_received");
    }
    assert_int_equal(now, before + 2); /* learned while the input is still open */
    fprintf(in, "i7,i9,i8\n");
    assert_int_equal(pclose(in), 0);
    assert_int_equal(status_count(&p, "triplets_received"), before + 3);
#endif
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

/* DeleteItems by label: every item of the label goes, the others stay,
 * and a restart from the log agrees. */
static void test_delete_by_label(void **state)
{
    (void)state;
    omld_proc p;
    start_with_items(&p);
    int http;
    json_t *j = post(&p, "delete_items", "{\"labels\": [\"odd\"]}", &http);
    assert_int_equal(http, 200);
    assert_int_equal(result_int(j, "deleted"), N_ITEMS / 2);
    json_decref(j);
    assert_int_equal(status_count(&p, "items"), N_ITEMS / 2);
    assert_int_equal(omld_proc_stop(&p, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&p, ARGS, TIMEOUT_MS), 0);
    assert_int_equal(status_count(&p, "items"), N_ITEMS / 2);
    j = post(&p, "list_items", "{\"labels\": [\"odd\"]}", &http);
    assert_int_equal(http, 200);
    assert_int_equal(json_array_size(json_object_get(json_object_get(j, "result"), "items")), 0);
    json_decref(j);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retries_are_applied_once_across_restarts),
        cmocka_unit_test(test_only_the_newest_keys_are_kept),
        cmocka_unit_test(test_clients_send_keys),
        cmocka_unit_test(test_delete_by_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
