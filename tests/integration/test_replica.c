/* test_replica.c - read replicas through a real redis-server on loopback
 * (issue 16 item 2): a primary publishes with --replicate, a replica
 * started with --replica_of bootstraps from the checkpoint, follows the
 * log, and at equal model versions answers classify and retrieve exactly
 * as the primary does (floats compared bit for bit); a write to it is
 * refused with NOT_PRIMARY naming the primary; kill -9 of the replica
 * (it bootstraps again and catches up) and of the primary (it keeps
 * serving). test_lag_at_steady_rate measures the lag at 5,000 triplets/s
 * (OMLD_REPLICA_SECONDS sets how long; 5 by default). Skipped when
 * redis-server is not installed. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "repl_fixture.h"

static void test_replica_answers_as_the_primary(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char pub[96], sub[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/r1", g_port);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/r1", g_port);
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--publish_ms=50",
                           "--seed=5", "--replicate_maxlen=1000", PRIMARY_CKPT, pub, NULL};
    const char *rargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub,
                           NULL};
    omld_proc pri, rep;
    assert_int_equal(omld_proc_start(&pri, pargs, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&pri, TIMEOUT_MS);
    assert_non_null(c);
    put_items(c, 0, N_ITEMS);
    add_triplets(c, 0, 400, 20);
    /* The replica bootstraps from the checkpoint and follows the log from
     * there, while more arrives. */
    Omld__Response *ck = NULL;
    omlc_error err;
    assert_int_equal(omlc_checkpoint(c, &ck, &err), 0);
    omld__response__free_unpacked(ck, NULL);
    /* A replica whose model options differ is not ready, and says why. */
    const char *wrong[] = {"--dim=9", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub, NULL};
    omld_proc bad;
    assert_int_equal(omld_proc_start(&bad, wrong, TIMEOUT_MS), 0);
    char *why = NULL;
    for (int i = 0; i < 250 && (why == NULL || strstr(why, "option 'dim'") == NULL); i++) {
        free(why);
        why = NULL;
        assert_int_equal(omld_http_get(bad.http, "/readyz", &why, NULL), 503);
        usleep(20000);
    }
    assert_non_null(strstr(why, "option 'dim' differs"));
    free(why);
    assert_int_equal(omld_proc_stop(&bad, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&bad);

    assert_int_equal(omld_proc_start(&rep, rargs, TIMEOUT_MS), 0);
    put_items(c, N_ITEMS, N_ITEMS + 20);
    add_triplets(c, 400, 1200, 16);
    const char *gone = "it7";
    assert_int_equal(omlc_delete_items(c, &gone, 1, 0, NULL, &err), 0);
    put_items(c, 7, 8); /* back, in the lowest free slot */
    add_triplets(c, 1600, 200, 1);
    uint64_t v = wait_same_version(&pri, &rep);
    expect_same_answers(&pri, &rep, v);

    /* Writes are refused, naming the primary. */
    omlc *w = omld_proc_dial(&rep, TIMEOUT_MS);
    float x[DIM] = {0};
    omlc_item it = {.id = "new", .features = x, .dim = DIM};
    assert_int_equal(omlc_put_items(w, &it, 1, NULL, NULL, &err), 13 /* NOT_PRIMARY */);
    assert_non_null(strstr(err.message, pri.rpc));
    omlc_triplet t = {.anchor.id = "it1", .positive.id = "it5", .negative.id = "it2"};
    assert_int_equal(omlc_add_triplets(w, &t, 1, NULL, NULL, &err), 13);
    omlc_close(w);
    json_t *s = status(&rep);
    json_t *r = json_object_get(s, "replication");
    assert_string_equal(json_string_value(json_object_get(r, "role")), "replica");
    assert_string_equal(json_string_value(json_object_get(r, "primary")), pri.rpc);
    assert_int_equal(json_integer_value(json_object_get(r, "lag_records")), 0);
    assert_true(json_integer_value(json_object_get(r, "bootstraps")) >= 1);
    json_decref(s);
    char *text = NULL;
    assert_int_equal(omld_http_get(rep.http, "/metrics", &text, NULL), 200);
    assert_non_null(strstr(text, "omld_replication_lag_records 0"));
    assert_non_null(strstr(text, "omld_replication_lag_seconds 0"));
    free(text);

    /* kill -9 the replica mid-stream: it bootstraps again and catches up. */
    add_triplets(c, 1800, 300, 10);
    assert_int_equal(omld_proc_stop(&rep, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    add_triplets(c, 2100, 300, 10);
    assert_int_equal(omld_proc_restart(&rep, rargs, TIMEOUT_MS), 0);
    add_triplets(c, 2400, 300, 10);
    v = wait_same_version(&pri, &rep);
    expect_same_answers(&pri, &rep, v);

    /* The stream trimmed past a stopped replica (MAXLEN ~ 1000): it finds
     * the gap when it runs again and bootstraps from the newer checkpoint. */
    s = status(&rep);
    json_int_t boots = figure(s, "replication", "bootstraps");
    json_decref(s);
    kill(rep.pid, SIGSTOP);
    add_triplets(c, 2700, 1500, 1);
    assert_int_equal(omlc_checkpoint(c, &ck, &err), 0);
    omld__response__free_unpacked(ck, NULL);
    kill(rep.pid, SIGCONT);
    v = wait_same_version(&pri, &rep);
    expect_same_answers(&pri, &rep, v);
    s = status(&rep);
    assert_int_equal(figure(s, "replication", "bootstraps"), boots + 1);
    json_decref(s);

    /* kill -9 the primary: the replica keeps serving what it had. */
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&pri, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    omlc *q = omld_proc_dial(&rep, TIMEOUT_MS);
    assert_non_null(q);
    omlc_classification cl;
    omlc_ref ref = {.id = "it3"};
    assert_int_equal(omlc_classify(q, &ref, 5, NULL, &cl, &err), 0);
    assert_int_equal(cl.model_version, v);
    omlc_close(q);
    char *ready = NULL;
    assert_int_equal(omld_http_get(rep.http, "/readyz", &ready, NULL), 200);
    free(ready);
    assert_int_equal(omld_proc_stop(&rep, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&rep);
    omld_proc_cleanup(&pri);
}

/* The replica's lag while the primary learns 5,000 triplets/s (batches of
 * 50, 100 a second), sampled from /status every 20 ms. */
static void test_lag_at_steady_rate(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    const char *secs_env = getenv("OMLD_REPLICA_SECONDS");
    double secs = secs_env ? atof(secs_env) : 5.0;
    char pub[96], sub[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/r2", g_port);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/r2", g_port);
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5",
                           PRIMARY_CKPT, pub, NULL};
    const char *rargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub,
                           NULL};
    omld_proc pri, rep;
    assert_int_equal(omld_proc_start(&pri, pargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&rep, rargs, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&pri, TIMEOUT_MS);
    put_items(c, 0, N_ITEMS);
    lag_figures f;
    measure_lag(c, &rep, 1, secs, 0, &f);
    fprintf(stderr, "replica lag at %.0f triplets/s over %.0f s (%zu samples): records p50 %.0f "
            "p99 %.0f max %.0f; seconds p50 %.3f p99 %.3f max %.3f\n", f.rate, secs, f.samples,
            f.rec_p50, f.rec_p99, f.rec_max, f.sec_p50, f.sec_p99, f.sec_max);
    fprintf(stderr, "replica apply delay (the primary's commit to the replica's apply, last "
            "batch at each sample): p50 %.3f p99 %.3f max %.3f s\n", f.delay_p50, f.delay_p99,
            f.delay_max);
    if (f.rate >= 4500) /* the target, at its rate (a sanitizer build falls short) */
        assert_true(f.sec_p99 <= 1.0);
    else
        fprintf(stderr, "(%.0f triplets/s is not the target's 5,000: p99 not judged)\n", f.rate);
    omlc_close(c);
    uint64_t v = wait_same_version(&pri, &rep);
    expect_same_answers(&pri, &rep, v);
    assert_int_equal(omld_proc_stop(&rep, SIGTERM, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_stop(&pri, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&rep);
    omld_proc_cleanup(&pri);
}

/* The primary restarted after kill -9 (the records it committed but had
 * not sent are a gap: the checkpoint it takes at its first write covers
 * them), then Redis itself restarted empty (everything it held is gone:
 * the primary sends its checkpoint again and a new one past the records
 * dropped meanwhile): the replica follows through both. */
static void test_primary_and_redis_restart(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char pub[96], sub[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/r3", g_port);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/r3", g_port);
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5",
                           "--publish_ms=50", PRIMARY_CKPT, pub, NULL};
    const char *rargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub,
                           NULL};
    omld_proc pri, rep;
    assert_int_equal(omld_proc_start(&pri, pargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&rep, rargs, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&pri, TIMEOUT_MS);
    put_items(c, 0, N_ITEMS);
    add_triplets(c, 0, 600, 10);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&pri, SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    assert_int_equal(omld_proc_restart(&pri, pargs, TIMEOUT_MS), 0);
    c = omld_proc_dial(&pri, TIMEOUT_MS);
    add_triplets(c, 600, 600, 10);
    uint64_t v = wait_same_version(&pri, &rep);
    expect_same_answers(&pri, &rep, v);

    assert_int_equal(kill(g_redis, SIGKILL), 0);
    waitpid(g_redis, NULL, 0);
    add_triplets(c, 1200, 300, 10); /* dropped: Redis is away */
    g_redis = omld_redis_spawn(REDIS_SERVER, g_dir, g_port);
    assert_true(g_redis > 0);
    usleep(1500000); /* both reconnect within a second */
    add_triplets(c, 1500, 300, 10);
    v = wait_same_version(&pri, &rep);
    expect_same_answers(&pri, &rep, v);
    json_t *s = status(&pri);
    assert_true(figure(s, "replication", "records_dropped") > 0);
    json_decref(s);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&rep, SIGTERM, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_stop(&pri, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&rep);
    omld_proc_cleanup(&pri);
}

/* A primary that goes quiet while Redis is away: the records and the view
 * markers it wrote then are dropped, and nothing is written after Redis is
 * back. Its replica had applied the whole stream it can see: only the
 * marker sent again after the checkpoint shows it the hole (otherwise it
 * stays a view behind for good). */
static void test_quiet_primary_after_redis_restart(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char pub[96], sub[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/r6", g_port);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/r6", g_port);
    /* no lease: writes go on while Redis is away; no idle rehearsal: quiet */
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5",
                           "--publish_ms=50", "--replicate_lease_ms=0", "--rehearse_idle=0",
                           PRIMARY_CKPT, pub, NULL};
    const char *rargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub,
                           NULL};
    omld_proc p[2];
    assert_int_equal(omld_proc_start(&p[0], pargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[1], rargs, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&p[0], TIMEOUT_MS);
    put_items(c, 0, N_ITEMS);
    add_triplets(c, 0, 300, 10);
    uint64_t v = wait_all_versions(p, 2);
    assert_int_equal(kill(g_redis, SIGKILL), 0);
    waitpid(g_redis, NULL, 0);
    add_triplets(c, 300, 100, 10); /* committed, its records and markers dropped */
    usleep(500000);
    g_redis = omld_redis_spawn(REDIS_SERVER, g_dir, g_port);
    assert_true(g_redis > 0);
    uint64_t v2 = wait_all_versions(p, 2);
    assert_true(v2 > v);
    expect_same_answers(&p[0], &p[1], v2);
    omlc_close(c);
    for (int j = 1; j >= 0; j--) {
        assert_int_equal(omld_proc_stop(&p[j], SIGTERM, TIMEOUT_MS), 0);
        omld_proc_cleanup(&p[j]);
    }
}

/* Triplets/s one client gets from a primary (requests of 50 triplets,
 * each sent when the last is answered) for `secs`, with extra (its
 * --replicate, or none). */
static double primary_rate(const char *extra, const char *lease, double secs)
{
    /* the default preset's learner (2 layers of 128, 64 wide) on 8 features */
    const char *args[] = {"--dim=8", "--seed=5", "--rehearse_idle=0", lease, extra, NULL};
    omld_proc pri;
    assert_int_equal(omld_proc_start(&pri, args, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&pri, TIMEOUT_MS);
    put_items(c, 0, N_ITEMS);
    double t0 = now_s();
    int seq = 0;
    while (now_s() - t0 < secs) {
        add_triplets(c, seq, 250, 50);
        seq += 250;
    }
    double rate = seq / (now_s() - t0);
    omlc_close(c);
    assert_int_equal(omld_proc_stop(&pri, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&pri);
    return rate;
}

/* Publishing does not slow the primary: its ingest rate with and without
 * --replicate, alternated (OMLD_REPLICA_BENCH=SECONDS; skipped without).
 * Without a lease (replicate_lease_ms 0: Redis away, the primary still
 * takes writes) and with one (every XADD fenced by a script). */
static void test_publishing_cost(void **state)
{
    (void)state;
    const char *env = getenv("OMLD_REPLICA_BENCH");
    if (g_redis <= 0 || env == NULL)
        skip();
    double secs = atof(env) > 0 ? atof(env) : 5, with = 0, without = 0;
    char down[96];
    snprintf(down, sizeof down, "--replicate=redis://127.0.0.1:%d/r4", omld_free_port());
    double away = 0, fenced = 0;
    const char *nolease = "--replicate_lease_ms=0", *lease = "--replicate_lease_ms=10000";
    for (int round = 0; round < 3; round++) {
        /* Each primary a stream of its own: a new data_dir's LSNs start at
         * 1 again, which Redis refuses below an old stream's top (and a
         * lease, owned by the node before). */
        char own[96];
        snprintf(own, sizeof own, "--replicate=redis://127.0.0.1:%d/r4-%d", g_port, round);
        without += primary_rate(NULL, nolease, secs) / 3;
        with += primary_rate(own, nolease, secs) / 3;
        snprintf(own, sizeof own, "--replicate=redis://127.0.0.1:%d/r5-%d", g_port, round);
        fenced += primary_rate(own, lease, secs) / 3;
        away += primary_rate(down, nolease, secs) / 3;
    }
    fprintf(stderr, "primary ingest, 50-triplet requests, one client: %.0f triplets/s without "
            "--replicate, %.0f with (%.1f%%), %.0f with the lease (fenced, %.1f%%), %.0f with "
            "Redis away (%.1f%%)\n", without, with, 100.0 * (with / without - 1), fenced,
            100.0 * (fenced / without - 1), away, 100.0 * (away / without - 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replica_answers_as_the_primary),
        cmocka_unit_test(test_primary_and_redis_restart),
        cmocka_unit_test(test_quiet_primary_after_redis_restart),
        cmocka_unit_test(test_lag_at_steady_rate),
        cmocka_unit_test(test_publishing_cost),
    };
    return cmocka_run_group_tests(tests, repl_setup, repl_teardown);
}
