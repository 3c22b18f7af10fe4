/* test_failover.c - a replica promoted when its primary dies (issue 16):
 * a primary (replicate_sync: every write answered once Redis holds it)
 * and two replicas on a real redis-server on loopback; a client streams
 * items and triplets (each batch with an idempotency key) while the
 * primary is killed with SIGKILL. Then:
 *  - promote-replica is refused while the dead primary's lease lives
 *    (UNAVAILABLE naming the lease), and succeeds after it expired;
 *  - every acknowledged write is on the new primary: each acknowledged
 *    item is there, and each acknowledged triplet batch, sent again with
 *    its key, is answered as a duplicate;
 *  - writes go to the new primary; the other replica follows it (equal
 *    answers at equal versions) and names it in NOT_PRIMARY;
 *  - the old primary restarted finds the stream owned by another node and
 *    does not start (no second writer; the stream's head stays the new
 *    primary's);
 *  - the new primary killed and restarted with the same options recovers
 *    its state (checkpoint at the promotion + its own log) and leads
 *    again: the replica's answers equal its own.
 * Also: a primary whose Redis stops answering for longer than its lease
 * refuses writes, then takes them again. Skipped when redis-server is not
 * installed. */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "repl_fixture.h"

#define LEASE "--replicate_lease_ms=1500"
#define MAX_ACKED 100000

/* The client of the dying primary: one new item, then one keyed batch of
 * 10 triplets, again and again; what was acknowledged is recorded. */
typedef struct streamer {
    omlc *c;
    pthread_t thread;
    atomic_int items_acked;   /* items s0 .. s<n-1> were acknowledged */
    atomic_int batches_acked; /* triplet batches k0 .. k<n-1> were acknowledged */
    int last_code;            /* the error that ended it */
} streamer;

/* Triplet batch b: 10 triplets, as add_triplets numbers them. */
static void batch_of(int b, char ids[3][64][32], omlc_triplet *t)
{
    make_triplets(b * 10, 10, ids, t);
}

static void *stream_main(void *arg)
{
    streamer *s = arg;
    for (int i = 0; i < MAX_ACKED; i++) {
        char id[32], key[32], ids[3][64][32];
        float x[DIM];
        snprintf(id, sizeof id, "s%d", i);
        features(1000 + i, x);
        omlc_item it = {.id = id, .features = x, .dim = DIM, .label = "c1"};
        omlc_error err;
        int rc = omlc_put_items(s->c, &it, 1, NULL, NULL, &err);
        if (rc != 0) {
            s->last_code = rc;
            break;
        }
        atomic_store(&s->items_acked, i + 1);
        omlc_triplet t[10];
        batch_of(i, ids, t);
        snprintf(key, sizeof key, "k%d", i);
        rc = omlc_add_triplets_keyed(s->c, t, 10, key, NULL, NULL, &err);
        if (rc != 0) {
            s->last_code = rc;
            break;
        }
        atomic_store(&s->batches_acked, i + 1);
    }
    return NULL;
}

/* Every acknowledged item is stored and every acknowledged batch was
 * applied (sent again with its key: a duplicate) on p. */
static void expect_acked(const omld_proc *p, int items, int batches)
{
    omlc *c = omld_proc_dial(p, TIMEOUT_MS);
    assert_non_null(c);
    omlc_error err;
    for (int i = 0; i < items; i++) {
        char id[32];
        snprintf(id, sizeof id, "s%d", i);
        const char *ids[] = {id};
        Omld__Response *r = NULL;
        if (omlc_get_items(c, ids, 1, &r, &err) != 0)
            fail_msg("acknowledged item %s is not on the new primary: %s", id, err.message);
        omld__response__free_unpacked(r, NULL);
    }
    for (int b = 0; b < batches; b++) {
        char key[32], ids[3][64][32];
        omlc_triplet t[10];
        batch_of(b, ids, t);
        snprintf(key, sizeof key, "k%d", b);
        int dup = 0;
        assert_int_equal(omlc_add_triplets_keyed(c, t, 10, key, NULL, &dup, &err), 0);
        if (!dup)
            fail_msg("acknowledged triplet batch %s was not applied on the new primary", key);
    }
    omlc_close(c);
}

/* promote-replica on p: the status code (0 ok), the answer's position. */
static int promote(const omld_proc *p, uint64_t *lsn, char *msg, size_t cap)
{
    omlc *c = omld_proc_dial(p, TIMEOUT_MS);
    assert_non_null(c);
    Omld__Response *r = NULL;
    omlc_error err;
    int rc = omlc_promote_replica(c, &r, &err);
    omlc_close(c);
    snprintf(msg, cap, "%s", rc ? err.message : "");
    if (rc == 0) {
        *lsn = r->promote_replica->log_position;
        assert_string_equal(r->promote_replica->primary, p->rpc);
        omld__response__free_unpacked(r, NULL);
    }
    return rc;
}

/* The id of the newest entry of PREFIX:log. */
static void stream_head(const char *prefix, char *out, size_t cap)
{
    redisContext *rc = redisConnect("127.0.0.1", g_port);
    assert_non_null(rc);
    redisReply *r = redisCommand(rc, "XREVRANGE %s:log + - COUNT 1", prefix);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 1);
    snprintf(out, cap, "%s", r->element[0]->element[0]->str);
    freeReplyObject(r);
    redisFree(rc);
}

static int log_has(const omld_proc *p, const char *text)
{
    FILE *f = fopen(p->log, "r");
    if (f == NULL)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

static void test_promote_after_primary_killed(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char pub[96], sub[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/f1", g_port);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/f1", g_port);
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5",
                           "--publish_ms=50", "--replicate_sync=1", LEASE, PRIMARY_CKPT, pub,
                           NULL};
    /* Replicas with what they need as primaries: the same lease and sync. */
    const char *rargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5",
                           "--publish_ms=50", "--replicate_sync=1", LEASE, PRIMARY_CKPT, sub,
                           NULL};
    omld_proc pri, a, b;
    assert_int_equal(omld_proc_start(&pri, pargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&a, rargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&b, rargs, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&pri, TIMEOUT_MS);
    assert_non_null(c);
    put_items(c, 0, N_ITEMS);
    add_triplets(c, 0, 200, 20);
    omlc_close(c);
    json_t *s = status(&pri);
    json_t *r = json_object_get(s, "replication");
    assert_string_equal(json_string_value(json_object_get(r, "lease")), "held");
    json_decref(s);

    /* A replica is no primary while the primary lives. */
    uint64_t lsn = 0;
    char msg[600];
    assert_int_equal(promote(&a, &lsn, msg, sizeof msg), 8 /* UNAVAILABLE */);
    assert_non_null(strstr(msg, "f1:lease is held by node"));

    /* kill -9 the primary while a client streams. */
    streamer st = {.c = omld_proc_dial(&pri, TIMEOUT_MS)};
    assert_non_null(st.c);
    assert_int_equal(pthread_create(&st.thread, NULL, stream_main, &st), 0);
    usleep(1000000);
    assert_int_equal(omld_proc_stop(&pri, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    pthread_join(st.thread, NULL);
    omlc_close(st.c);
    int items = atomic_load(&st.items_acked), batches = atomic_load(&st.batches_acked);
    fprintf(stderr, "acknowledged before the kill: %d items, %d triplet batches\n", items,
            batches);
    assert_true(items > 10);

    /* Refused while its lease lives; granted once it expired. */
    double t0 = now_s();
    int rc = promote(&a, &lsn, msg, sizeof msg);
    if (rc != 0) {
        assert_int_equal(rc, 8);
        assert_non_null(strstr(msg, "lease"));
    }
    while (rc != 0 && now_s() - t0 < 15) {
        usleep(200000);
        rc = promote(&a, &lsn, msg, sizeof msg);
    }
    assert_int_equal(rc, 0);
    fprintf(stderr, "promoted after %.2f s at log position %llu\n", now_s() - t0,
            (unsigned long long)lsn);
    s = status(&a);
    r = json_object_get(s, "replication");
    assert_string_equal(json_string_value(json_object_get(r, "role")), "primary");
    assert_string_equal(json_string_value(json_object_get(r, "lease")), "held");
    assert_int_equal(json_integer_value(json_object_get(r, "promoted_at_lsn")), (json_int_t)lsn);
    json_decref(s);
    /* ... once: a second time it is no replica. */
    assert_int_equal(promote(&a, &lsn, msg, sizeof msg), 12 /* CONFLICT */);

    /* No acknowledged write is lost. */
    expect_acked(&a, items, batches);

    /* Writes go to the new primary; the other replica follows it. */
    c = omld_proc_dial(&a, TIMEOUT_MS);
    assert_non_null(c);
    put_items(c, N_ITEMS, N_ITEMS + 10);
    add_triplets(c, 5000, 300, 10);
    omlc_close(c);
    uint64_t v = wait_same_version(&a, &b);
    expect_same_answers(&a, &b, v);
    omlc *w = omld_proc_dial(&b, TIMEOUT_MS);
    float x[DIM] = {0};
    omlc_item it = {.id = "new", .features = x, .dim = DIM};
    omlc_error err;
    assert_int_equal(omlc_put_items(w, &it, 1, NULL, NULL, &err), 13 /* NOT_PRIMARY */);
    assert_non_null(strstr(err.message, a.rpc));
    omlc_close(w);

    /* The old primary, restarted, does not become a second writer. */
    char head[64], head2[64];
    stream_head("f1", head, sizeof head);
    assert_int_not_equal(omld_proc_restart(&pri, pargs, TIMEOUT_MS), 0);
    assert_true(log_has(&pri, "superseded: node"));
    stream_head("f1", head2, sizeof head2);
    assert_string_equal(head, head2);
    c = omld_proc_dial(&a, TIMEOUT_MS);
    add_triplets(c, 6000, 50, 10); /* the new primary still writes */
    omlc_close(c);

    /* The new primary killed and restarted: it leads again from its own
     * state, and the replica's answers equal it at equal versions. */
    assert_int_equal(omld_proc_stop(&a, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&a, rargs, TIMEOUT_MS), 0);
    c = omld_proc_dial(&a, TIMEOUT_MS);
    assert_non_null(c);
    add_triplets(c, 7000, 200, 10);
    omlc_close(c);
    expect_acked(&a, items, batches);
    v = wait_same_version(&a, &b);
    expect_same_answers(&a, &b, v);

    assert_int_equal(omld_proc_stop(&b, SIGTERM, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_stop(&a, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&a);
    omld_proc_cleanup(&b);
    omld_proc_cleanup(&pri);
}

/* promote-replica on a primary, and on a replica without a lease: named
 * refusals, nothing changed. */
static void test_promote_refusals(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char pub[96], sub[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/f2", g_port);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/f2", g_port);
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", LEASE,
                           PRIMARY_CKPT, pub, NULL};
    const char *rargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8",
                           "--replicate_lease_ms=0", sub, NULL};
    omld_proc pri, rep;
    assert_int_equal(omld_proc_start(&pri, pargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&rep, rargs, TIMEOUT_MS), 0);
    uint64_t lsn;
    char msg[600];
    assert_int_equal(promote(&pri, &lsn, msg, sizeof msg), 12 /* CONFLICT */);
    assert_non_null(strstr(msg, "not a read replica"));
    assert_int_equal(promote(&rep, &lsn, msg, sizeof msg), 1 /* INVALID_ARGUMENT */);
    assert_non_null(strstr(msg, "replicate_lease_ms"));
    /* A second primary on the same stream is refused at start. */
    omld_proc two;
    assert_int_not_equal(omld_proc_start(&two, pargs, TIMEOUT_MS), 0);
    assert_true(log_has(&two, "superseded: node"));
    omld_proc_cleanup(&two);
    assert_int_equal(omld_proc_stop(&rep, SIGTERM, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_stop(&pri, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&rep);
    omld_proc_cleanup(&pri);
}

/* Redis stopped (SIGSTOP) for longer than the lease: the primary refuses
 * writes once it could not renew in time, and takes them again when Redis
 * answers (its own lease, renewed). */
static void test_lease_lapses_and_returns(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char pub[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/f3", g_port);
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8",
                           "--replicate_lease_ms=1000", PRIMARY_CKPT, pub, NULL};
    omld_proc pri;
    assert_int_equal(omld_proc_start(&pri, pargs, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&pri, TIMEOUT_MS);
    assert_non_null(c);
    put_items(c, 0, 10);
    assert_int_equal(kill(g_redis, SIGSTOP), 0);
    usleep(1300000); /* past 4/5 of the lease since the last renewal */
    float x[DIM] = {0};
    omlc_item it = {.id = "late", .features = x, .dim = DIM};
    omlc_error err;
    int rc = omlc_put_items(c, &it, 1, NULL, NULL, &err);
    assert_int_equal(kill(g_redis, SIGCONT), 0);
    assert_int_equal(rc, 13 /* NOT_PRIMARY */);
    assert_non_null(strstr(err.message, "lapsed"));
    const char *ids[] = {"late"};
    Omld__Response *r = NULL;
    assert_int_equal(omlc_get_items(c, ids, 1, &r, &err), 2 /* NOT_FOUND: nothing written */);
    double t0 = now_s();
    while ((rc = omlc_put_items(c, &it, 1, NULL, NULL, &err)) != 0 && now_s() - t0 < 5)
        usleep(50000);
    assert_int_equal(rc, 0);
    json_t *s = status(&pri);
    assert_string_equal(json_string_value(json_object_get(json_object_get(s, "replication"),
                                                          "lease")), "held");
    json_decref(s);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&pri, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&pri);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promote_refusals),
        cmocka_unit_test(test_lease_lapses_and_returns),
        cmocka_unit_test(test_promote_after_primary_killed),
    };
    return cmocka_run_group_tests(tests, repl_setup, repl_teardown);
}
