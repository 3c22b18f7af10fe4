/* test_redis_ingest.c - omld --ingest redis://... against a real
 * redis-server on loopback: every entry is learned exactly once across
 * kill -9 of omld mid-stream (XACK after the log, the entry id as the
 * idempotency key), refused entries go to the dead-letter stream with their
 * reason, and the consumer's pending count and lag reach 0; items carry
 * their meta.KEY fields as metadata. Skipped when
 * redis-server is not installed. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "harness.h"
#include "omlclient.h"

#define REDIS_SERVER "/usr/bin/redis-server"
#define TIMEOUT_MS 20000
#define N_ITEMS 30
#define ROUNDS 4           /* streaming rounds; omld is killed between them */
#define PER_ROUND 600      /* triplet entries per round */
#define BAD_EVERY 97       /* every so many a triplet naming an unknown item */

static pid_t g_redis;
static int g_port;
static char g_dir[256];

static redisContext *redis(void)
{
    for (int i = 0; i < 200; i++) {
        redisContext *c = redisConnect("127.0.0.1", g_port);
        if (c && !c->err)
            return c;
        redisFree(c);
        usleep(20000);
    }
    fail_msg("redis-server on port %d does not answer", g_port);
    return NULL;
}

/* redis-server on g_port, without persistence, its files in g_dir. */
static pid_t start_redis(void)
{
    return omld_redis_spawn(REDIS_SERVER, g_dir, g_port);
}

static int setup(void **state)
{
    (void)state;
    if (access(REDIS_SERVER, X_OK) != 0)
        return 0; /* each test skips */
    snprintf(g_dir, sizeof g_dir, "/tmp/omld-redis-XXXXXX");
    if (mkdtemp(g_dir) == NULL)
        return -1;
    g_port = omld_free_port();
    g_redis = start_redis();
    redisFree(redis());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return omld_redis_stop(g_redis, g_dir);
}

static void xadd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
}

static long long integer(redisContext *c, const char *cmd)
{
    redisReply *r = redisCommand(c, cmd);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* /status redis_ingest and ingest figures. */
static json_t *status(const omld_proc *p)
{
    return omld_proc_status(p);
}

static json_int_t figure(const json_t *s, const char *section, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(s, section), key));
}

static long long integer(redisContext *c, const char *cmd);

/* Until the group has nothing pending and nothing undelivered, and the
 * dead-letter stream `dead` (NULL: none) holds n_dead entries. */
static json_t *wait_drained(const omld_proc *p, redisContext *c, const char *dead, long long n_dead)
{
    json_t *s = NULL;
    for (int i = 0; i < 3000; i++) {
        json_decref(s);
        s = status(p);
        if (s && figure(s, "redis_ingest", "pending") == 0 && figure(s, "redis_ingest", "lag") == 0 &&
            figure(s, "ingest", "queue_depth") == 0 && (dead == NULL || integer(c, dead) == n_dead))
            return s;
        usleep(10000);
    }
    char *g = s ? json_dumps(json_object_get(s, "redis_ingest"), 0) : NULL;
    fail_msg("the stream was not drained (%lld dead expected): %s", n_dead, g ? g : "no status");
    return NULL;
}

static void test_every_entry_learned_once_across_kills(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char ingest[96];
    snprintf(ingest, sizeof ingest, "--ingest=redis://127.0.0.1:%d/clicks", g_port);
    const char *args[] = {"--dim=4", "--layers=1", "--hidden=8", "--emb=4", "--publish_ms=50",
                          "--seed=9", ingest, NULL};
    redisContext *c = redis();
    /* Items first (the JSON form and the float32 form), before omld runs:
     * a new group starts at the stream's beginning. */
    for (int i = 0; i < N_ITEMS; i++) {
        float x[4] = {(float)(i % 5), (float)(i % 3), 1.0f, (float)i / N_ITEMS};
        if (i % 2)
            xadd(c, "XADD clicks * type item id it%d label c%d features_f32 %b", i, i % 3, x,
                 sizeof x);
        else
            xadd(c, "XADD clicks * type item id it%d label c%d features [%g,%g,%g,%g]", i, i % 3,
                 (double)x[0], (double)x[1], (double)x[2], (double)x[3]);
    }
    xadd(c, "XADD clicks * type item id bad-item features [1,2]"); /* wrong dimension */
    xadd(c, "XADD clicks * type nonsense");
    long long good = 0, dead = 2;
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PER_ROUND; i++) {
            int k = round * PER_ROUND + i;
            if (k % BAD_EVERY == 0) {
                xadd(c, "XADD clicks * type triplet anchor it1 positive missing-%d negative it2", k);
                dead++;
            } else {
                xadd(c, "XADD clicks * type triplet anchor it%d positive it%d negative it%d",
                     k % N_ITEMS, (k + 3) % N_ITEMS, (k + 1) % N_ITEMS);
                good++;
            }
            if (i == PER_ROUND / 2 && round < ROUNDS - 1) {
                /* kill -9 while entries are read, learned and XACKed */
                assert_int_equal(omld_proc_stop(&p, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
                assert_int_equal(omld_proc_restart(&p, args, TIMEOUT_MS), 0);
            }
        }
    }
    xadd(c, "XADD clicks * type pair a it1 b it4 relation similar");
    /* An optional weight; out of range or not a number, dead-lettered. */
    xadd(c, "XADD clicks * type triplet anchor it1 positive it4 negative it2 weight 2.5");
    good++;
    xadd(c, "XADD clicks * type triplet anchor it1 positive it4 negative it2 weight -3");
    xadd(c, "XADD clicks * type triplet anchor it1 positive it4 negative it2 weight abc");
    dead += 2;
    json_t *s = wait_drained(&p, c, "XLEN clicks:dead", dead);
    assert_int_equal(figure(s, "ingest", "triplets_received") - figure(s, "ingest", "derived_triplets"),
                     good);
    assert_int_equal(figure(s, "ingest", "pairs_received"), 1);
    assert_int_equal(figure(s, "ingest", "items_put"), N_ITEMS);
    json_decref(s);
    assert_int_equal(integer(c, "XLEN clicks:dead"), dead);
    /* Each dead letter names its entry and the reason. */
    redisReply *r = redisCommand(c, "XRANGE clicks:dead - +");
    assert_true(r && r->type == REDIS_REPLY_ARRAY && (long long)r->elements == dead);
    int wrong_dim = 0, not_found = 0, bad_weight = 0;
    for (size_t e = 0; e < r->elements; e++) {
        const redisReply *fv = r->element[e]->element[1];
        const char *code = NULL, *fieldpath = NULL, *source = NULL;
        for (size_t i = 0; i + 1 < fv->elements; i += 2) {
            const char *k = fv->element[i]->str, *v = fv->element[i + 1]->str;
            if (strcmp(k, "code") == 0)
                code = v;
            else if (strcmp(k, "field") == 0)
                fieldpath = v;
            else if (strcmp(k, "source_id") == 0)
                source = v;
        }
        assert_non_null(code);
        assert_non_null(source);
        wrong_dim += strcmp(code, "WRONG_DIMENSION") == 0;
        not_found += strcmp(code, "NOT_FOUND") == 0 &&
                     strcmp(fieldpath, "add_triplets.triplets[0].positive.id") == 0;
        bad_weight += fieldpath && strcmp(fieldpath, "add_triplets.triplets[0].weight") == 0;
    }
    assert_int_equal(wrong_dim, 1);
    assert_int_equal(bad_weight, 1);
    assert_int_equal(not_found, dead - 4);
    freeReplyObject(r);

    /* /metrics has the consumer's figures. */
    char *text = NULL;
    assert_int_equal(omld_http_get(p.http, "/metrics", &text, NULL), 200);
    assert_non_null(strstr(text, "omld_redis_ingest_pending 0"));
    assert_non_null(strstr(text, "omld_redis_ingest_connected 1"));
    free(text);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
    redisFree(c);
}

/* Redis away at the start and killed mid-stream: omld keeps serving,
 * reconnects, and loses nothing that was XADDed. */
static void test_redis_restart(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char ingest[96];
    snprintf(ingest, sizeof ingest, "--ingest=redis://127.0.0.1:%d/s2", g_port);
    const char *args[] = {"--dim=4", "--layers=1", "--hidden=8", "--emb=4", "--publish_ms=50",
                          ingest, NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    redisContext *c = redis();
    for (int i = 0; i < 10; i++)
        xadd(c, "XADD s2 * type item id j%d features [%d,1,0,0]", i, i);
    redisFree(c);
    /* Redis goes away (its data with it: no persistence here) and comes
     * back empty: omld reconnects and makes its group again. */
    kill(g_redis, SIGKILL);
    waitpid(g_redis, NULL, 0);
    usleep(300000);
    g_redis = start_redis();
    c = redis();
    for (int i = 10; i < 20; i++)
        xadd(c, "XADD s2 * type item id j%d features [%d,1,0,0]", i, i);
    json_t *s = wait_drained(&p, c, NULL, 0);
    assert_true(figure(s, "ingest", "items_put") >= 10);
    assert_true(json_is_true(json_object_get(json_object_get(s, "redis_ingest"), "connected")));
    json_decref(s);
    redisFree(c);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

/* An entry that another reader took under omld's consumer name and never
 * XACKed (an old primary that came back, read it, and stopped on finding
 * itself superseded: test_kill_scenario caught one) is read again and
 * learned within seconds, while omld keeps reading new entries. */
static void test_pending_left_by_another_reader(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char ingest[96];
    snprintf(ingest, sizeof ingest, "--ingest=redis://127.0.0.1:%d/s4", g_port);
    const char *args[] = {"--dim=4", "--layers=1", "--hidden=8", "--emb=4", ingest, NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    redisContext *c = redis();
    xadd(c, "XADD s4 * type item id first features [1,1,0,0]");
    json_decref(wait_drained(&p, c, NULL, 0));
    /* omld paused past its blocking read's timeout, so the next entry is
     * this reader's: delivered to consumer omld-1, and left pending */
    kill(p.pid, SIGSTOP);
    usleep(1500000);
    xadd(c, "XADD s4 * type item id stolen features [2,1,0,0]");
    redisReply *r = redisCommand(c, "XREADGROUP GROUP omld omld-1 COUNT 1 STREAMS s4 >");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    assert_int_equal(integer(c, "XLEN s4"), 2);
    kill(p.pid, SIGCONT);
    xadd(c, "XADD s4 * type item id after features [3,1,0,0]");
    /* both stored (GetItems answers NOT_FOUND while one is missing), and
     * nothing left pending (the figure is refreshed every second: read it
     * only once both are in) */
    omlc *cl = NULL;
    omlc_error err;
    assert_int_equal(omlc_connect(&cl, p.rpc, TIMEOUT_MS, &err), 0);
    const char *ids[] = {"stolen", "after"};
    int rc = -1;
    for (int i = 0; i < 200 && rc != 0; i++) {
        Omld__Response *got = NULL;
        rc = omlc_get_items(cl, ids, 2, &got, &err);
        omld__response__free_unpacked(got, NULL);
        if (rc != 0)
            usleep(100000);
    }
    if (rc != 0)
        fail_msg("the entry left pending was not learned within 20 s: %s", err.message);
    omlc_close(cl);
    json_decref(wait_drained(&p, c, NULL, 0));
    redisFree(c);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

/* The field of dead letter fv, or NULL. */
static const char *dead_field(const redisReply *fv, const char *name)
{
    for (size_t i = 0; i + 1 < fv->elements; i += 2)
        if (strcmp(fv->element[i]->str, name) == 0)
            return fv->element[i + 1]->str;
    return NULL;
}

/* Items with meta.KEY fields carry that metadata, as an RPC put's: GetItems
 * returns it in the entry's order, a metadata filter finds them, it is there
 * after a restart; a bad one (a repeated key, an empty key, meta on a
 * triplet) is dead-lettered with the field path an RPC put would get. */
static void test_item_metadata(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char ingest[96];
    snprintf(ingest, sizeof ingest, "--ingest=redis://127.0.0.1:%d/meta", g_port);
    const char *args[] = {"--dim=4", "--layers=1", "--hidden=8", "--emb=4", "--publish_ms=50",
                          ingest, NULL};
    omld_proc p;
    assert_int_equal(omld_proc_start(&p, args, TIMEOUT_MS), 0);
    redisContext *c = redis();
    xadd(c, "XADD meta * type item id m0 label boots features [1,0,0,0.1] "
            "meta.color brown meta.size 42");
    xadd(c, "XADD meta * type item id m1 features [0.9,0.1,0,0] meta.color black");
    xadd(c, "XADD meta * type item id m2 features [0,0,1,0.2]");
    xadd(c, "XADD meta * type item id m3 features [0,1,0,0] meta.color red meta.color blue");
    xadd(c, "XADD meta * type item id m4 features [0,1,0,0] meta. nameless");
    xadd(c, "XADD meta * type triplet anchor m0 positive m1 negative m2 meta.color red");
    json_t *s = wait_drained(&p, c, "XLEN meta:dead", 3);
    json_decref(s);

    /* The dead letters name the field, as an RPC put's refusal would (the
     * triplet's, refused before the daemon saw it, may come first). */
    redisReply *r = redisCommand(c, "XRANGE meta:dead - +");
    assert_true(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    int seen = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *fv = r->element[i]->element[1];
        const char *id = dead_field(fv, "id"), *fieldpath = dead_field(fv, "field");
        const char *message = dead_field(fv, "message");
        if (id && strcmp(id, "m3") == 0) {
            assert_string_equal(fieldpath, "put_items.items[0].metadata[1].key");
            assert_non_null(strstr(message, "repeats"));
            seen |= 1;
        } else if (id && strcmp(id, "m4") == 0) {
            assert_string_equal(fieldpath, "put_items.items[0].metadata[0].key");
            assert_non_null(strstr(message, "empty"));
            seen |= 2;
        } else {
            assert_non_null(strstr(message, "belongs to item entries"));
            assert_string_equal(dead_field(fv, "meta.color"), "red");
            seen |= 4;
        }
    }
    assert_int_equal(seen, 7);
    freeReplyObject(r);

    for (int round = 0; round < 2; round++) { /* as learned, then after a restart */
        char *out = NULL;
        assert_int_equal(omld_http_call(p.http, "POST", "/v1/get_items", NULL,
                                        "{\"ids\": [\"m0\", \"m1\", \"m2\"]}", &out, NULL),
                         200);
        json_error_t je;
        json_t *j = json_loads(out, 0, &je);
        assert_non_null(j);
        json_t *items = json_object_get(json_object_get(j, "result"), "items");
        assert_int_equal(json_array_size(items), 3);
        json_t *m0 = json_object_get(json_array_get(items, 0), "metadata");
        assert_int_equal(json_array_size(m0), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(m0, 0), "key")), "color");
        assert_string_equal(json_string_value(json_object_get(json_array_get(m0, 0), "value")),
                            "brown");
        assert_string_equal(json_string_value(json_object_get(json_array_get(m0, 1), "key")), "size");
        assert_string_equal(json_string_value(json_object_get(json_array_get(m0, 1), "value")), "42");
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(
                                json_array_get(items, 1), "metadata"), 0), "value")),
                            "black");
        assert_int_equal(json_array_size(json_object_get(json_array_get(items, 2), "metadata")), 0);
        json_decref(j);
        free(out);
        assert_int_equal(omld_http_call(p.http, "POST", "/v1/count_items", NULL,
                                        "{\"metadata\": [{\"key\": \"color\", \"values\": "
                                        "[\"brown\", \"black\"]}]}", &out, NULL),
                         200);
        j = json_loads(out, 0, &je);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "result"), "count")), 2);
        json_decref(j);
        free(out);
        if (round == 0) {
            assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
            assert_int_equal(omld_proc_restart(&p, args, TIMEOUT_MS), 0);
        }
    }
    redisFree(c);
    assert_int_equal(omld_proc_stop(&p, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_entry_learned_once_across_kills),
        cmocka_unit_test(test_redis_restart),
        cmocka_unit_test(test_pending_left_by_another_reader),
        cmocka_unit_test(test_item_metadata),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
