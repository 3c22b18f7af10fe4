/* test_shards.c - shards (issue 16 item 3) on a real redis-server: a
 * primary, a replica holding every item, and two replicas started with
 * shard = 0/2 and 1/2. Each shard indexes exactly the items whose id
 * hashes to it (the two partition the catalogue) and follows the one
 * model (the same version numbers); a retrieval fanned out over the shards
 * by libomlclient (the shard map read from Redis) and merged equals the
 * full replica's answer bit for bit (ids, labels, scores, similarities),
 * for queries by id and by vector, k from 1 to 20, with offsets, label
 * filters, excluded ids and a similarity floor; a classification merged
 * the same way (the vote over the union of the shards' k nearest per head)
 * equals its classify, labels and scores bit for bit; so does omld
 * --router's (one address for clients) for both, which refuses writes,
 * other queries and named models. The
 * latency of one replica, the client's fan-out and the router is printed.
 * Skipped when redis-server is not installed. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "repl_fixture.h"
#include "shard.h"

#define N_MORE 400 /* items beyond the fixture's N_ITEMS */

/* The hits of one query from the merged shards and from the full replica
 * are the same. */
static void expect_same(omlc_shards *sh, omlc *full, const omlc_ref *q, uint32_t k,
                        const omlc_retrieve_filter *f, uint64_t version)
{
    omlc_hit a[32], b[32];
    size_t na = 0, nb = 0;
    uint64_t va = 0, vb = 0;
    omlc_error err;
    if (omlc_shards_retrieve(sh, q, k, f, a, 32, &na, &va, &err) != 0)
        fail_msg("sharded retrieve: %s", err.message);
    assert_int_equal(omlc_retrieve_where(full, q, k, NULL, f, b, 32, &nb, &vb, &err), 0);
    assert_int_equal(va, version);
    assert_int_equal(vb, version);
    expect_hits_equal(a, na, b, nb);
}

static void test_merged_equals_one_node(void **state)
{
    (void)state;
    if (g_redis <= 0)
        skip();
    char pub[96], sub[96], url[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/s1", g_port);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/s1", g_port);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/s1", g_port);
    const char *pargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5",
                           "--publish_ms=50", PRIMARY_CKPT, pub, NULL};
    const char *full[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub,
                          NULL};
    const char *s0[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub,
                        "--shard=0/2", NULL};
    const char *s1[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", sub,
                        "--shard=1/2", NULL};
    omld_proc p[4];
    assert_int_equal(omld_proc_start(&p[0], pargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[1], full, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[2], s0, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[3], s1, TIMEOUT_MS), 0);
    omlc *c = omld_proc_dial(&p[0], TIMEOUT_MS);
    assert_non_null(c);
    put_items(c, 0, N_ITEMS + N_MORE);
    add_triplets(c, 0, 1500, 25);
    omlc_close(c);
    uint64_t v = wait_all_versions(p, 4);

    /* The shards partition the catalogue by the id's hash. */
    json_int_t items[4];
    for (int j = 0; j < 4; j++) {
        json_t *s = status(&p[j]);
        items[j] = figure(s, "model", "view_items");
        json_decref(s);
    }
    int in0 = 0;
    for (int i = 0; i < N_ITEMS + N_MORE; i++) {
        char id[32];
        int n = snprintf(id, sizeof id, "it%d", i);
        in0 += oml_shard_of(id, (size_t)n, 2) == 0;
    }
    assert_int_equal(items[1], N_ITEMS + N_MORE);
    assert_int_equal(items[2], in0);
    assert_int_equal(items[3], N_ITEMS + N_MORE - in0);
    fprintf(stderr, "shard 0/2 indexes %lld items, 1/2 %lld, of %d\n", (long long)items[2],
            (long long)items[3], N_ITEMS + N_MORE);
    /* A shard's own retrieve returns only its items. */
    omlc *one = omld_proc_dial(&p[2], TIMEOUT_MS);
    omlc_hit h[20];
    size_t nh = 0;
    omlc_error err;
    omlc_ref byid = {.id = "it3"};
    assert_int_equal(omlc_retrieve(one, &byid, 20, NULL, h, 20, &nh, NULL, &err), 0);
    assert_int_equal(nh, 20);
    for (size_t i = 0; i < nh; i++)
        assert_int_equal(oml_shard_of(h[i].id, strlen(h[i].id), 2), 0);
    omlc_close(one);

    omlc_shards *sh = NULL;
    if (omlc_shards_connect_redis(&sh, url, 2, TIMEOUT_MS, &err) != 0)
        fail_msg("shard map: %s", err.message);
    omlc *f = omld_proc_dial(&p[1], TIMEOUT_MS);
    const char *labels[] = {"c1", "c2"};
    const char *excl[] = {"it5", "it9", "it12"};
    for (int qn = 0; qn < 40; qn++) {
        float x[DIM];
        features(5000 + qn, x);
        char id[32];
        snprintf(id, sizeof id, "it%d", (qn * 37) % (N_ITEMS + N_MORE));
        omlc_ref q = qn % 2 ? (omlc_ref){.vector = x, .dim = DIM} : (omlc_ref){.id = id};
        uint32_t k = (uint32_t)(1 + qn % 20);
        expect_same(sh, f, &q, k, NULL, v);
        omlc_retrieve_filter page = {.offset = (uint32_t)(qn % 7)};
        expect_same(sh, f, &q, k, &page, v);
        omlc_retrieve_filter lab = {.labels = labels, .n_labels = 2, .exclude_ids = excl,
                                    .n_exclude_ids = 3, .has_min_similarity = 1,
                                    .min_similarity = 0.2f, .offset = (uint32_t)(qn % 3)};
        expect_same(sh, f, &q, k, &lab, v);
    }

    /* Classify merged over the shards (the vote over the union's k nearest
     * per head) equals the full replica's, bit for bit. */
    int differ = 0;
    for (int qn = 0; qn < 60; qn++) {
        float x[DIM];
        features(6000 + qn, x);
        char id[32];
        snprintf(id, sizeof id, "it%d", (qn * 53) % (N_ITEMS + N_MORE));
        omlc_ref q = qn % 2 ? (omlc_ref){.vector = x, .dim = DIM} : (omlc_ref){.id = id};
        uint32_t k = (uint32_t)(1 + qn % 25);
        omlc_classification a, b;
        if (omlc_shards_classify(sh, &q, k, &a, &err) != 0)
            fail_msg("sharded classify: %s", err.message);
        assert_int_equal(omlc_classify(f, &q, k, NULL, &b, &err), 0);
        assert_int_equal(a.model_version, v);
        expect_class_equal(&a, &b);
        differ += a.n_scores > 1;
    }
    assert_true(differ > 0); /* some votes had more than one class to order */
    omlc_classification none;
    omlc_ref byid0 = {.id = "it0"};
    assert_int_equal(omlc_shards_classify(sh, &byid0, 0, &none, &err), OMLC_EARG);
    omlc_ref unknown = {.id = "no-such-item"};
    assert_int_equal(omlc_shards_classify(sh, &unknown, 5, &none, &err), 2 /* NOT_FOUND */);

    /* omld --router: one address, the same answers. */
    char rt[128];
    snprintf(rt, sizeof rt, "--router=%s", url);
    const char *rargs[] = {"--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", rt,
                           "--router_shards=2", NULL};
    omld_proc router;
    assert_int_equal(omld_proc_start(&router, rargs, TIMEOUT_MS), 0);
    omlc *rc = omld_proc_dial(&router, TIMEOUT_MS);
    assert_non_null(rc);
    for (int qn = 0; qn < 40; qn++) {
        float x[DIM];
        features(7000 + qn, x);
        omlc_ref q = {.vector = x, .dim = DIM};
        omlc_retrieve_filter page = {.offset = (uint32_t)(qn % 5), .labels = labels,
                                     .n_labels = (size_t)(qn % 2) * 2};
        omlc_hit a[32], b[32];
        size_t na, nb;
        uint64_t va, vb;
        assert_int_equal(omlc_retrieve_where(rc, &q, 1 + qn % 15, NULL, &page, a, 32, &na, &va,
                                             &err), 0);
        assert_int_equal(omlc_retrieve_where(f, &q, 1 + qn % 15, NULL, &page, b, 32, &nb, &vb,
                                             &err), 0);
        assert_int_equal(va, vb);
        expect_hits_equal(a, na, b, nb);
    }
    /* Classify through the router: the same answers. */
    for (int qn = 0; qn < 30; qn++) {
        float x[DIM];
        features(8000 + qn, x);
        char id[32];
        snprintf(id, sizeof id, "it%d", (qn * 29) % (N_ITEMS + N_MORE));
        omlc_ref q = qn % 2 ? (omlc_ref){.vector = x, .dim = DIM} : (omlc_ref){.id = id};
        omlc_classification a, b;
        assert_int_equal(omlc_classify(rc, &q, 1 + qn % 12, NULL, &a, &err), 0);
        assert_int_equal(omlc_classify(f, &q, 1 + qn % 12, NULL, &b, &err), 0);
        expect_class_equal(&a, &b);
    }
    /* ... and nothing else. */
    omlc_verification ver;
    omlc_ref byid3 = {.id = "it3"}, byid4 = {.id = "it4"};
    assert_int_equal(omlc_verify(rc, &byid3, &byid4, 0.5f, NULL, &ver, &err), 8 /* UNAVAILABLE */);
    assert_non_null(strstr(err.message, "router"));
    omlc_classification cl;
    assert_int_equal(omlc_classify(rc, &byid3, 5, "batch1", &cl, &err), 1 /* INVALID_ARGUMENT */);
    assert_non_null(strstr(err.message, "live model only"));
    float zero[DIM] = {0};
    omlc_item it = {.id = "new", .features = zero, .dim = DIM};
    assert_int_equal(omlc_put_items(rc, &it, 1, NULL, NULL, &err), 13 /* NOT_PRIMARY */);

    /* Latency, 400 queries (k 10) back to back, each way in turn: one
     * replica (all items), the two shards merged by the client, and
     * through the router. */
    enum { NQ = 400 };
    double one_ms[NQ], fan_ms[NQ], via_ms[NQ];
    for (int i = 0; i < NQ; i++) {
        float x[DIM];
        features(9000 + i, x);
        omlc_ref q = {.vector = x, .dim = DIM};
        omlc_hit hits[10];
        size_t n;
        double t0 = now_s();
        assert_int_equal(omlc_retrieve(f, &q, 10, NULL, hits, 10, &n, NULL, &err), 0);
        double t1 = now_s();
        assert_int_equal(omlc_shards_retrieve(sh, &q, 10, NULL, hits, 10, &n, NULL, &err), 0);
        double t2 = now_s();
        assert_int_equal(omlc_retrieve(rc, &q, 10, NULL, hits, 10, &n, NULL, &err), 0);
        double t3 = now_s();
        one_ms[i] = (t1 - t0) * 1e3;
        fan_ms[i] = (t2 - t1) * 1e3;
        via_ms[i] = (t3 - t2) * 1e3;
    }
    qsort(one_ms, NQ, sizeof(double), cmp_double);
    qsort(fan_ms, NQ, sizeof(double), cmp_double);
    qsort(via_ms, NQ, sizeof(double), cmp_double);
    fprintf(stderr, "retrieve k=10 over %d items, p50 / p99: one replica %.3f / %.3f ms; two "
            "shards merged by the client %.3f / %.3f ms; through the router %.3f / %.3f ms "
            "(the router adds %.3f ms p50 to the client's fan-out)\n", N_ITEMS + N_MORE,
            one_ms[NQ / 2], one_ms[NQ * 99 / 100], fan_ms[NQ / 2], fan_ms[NQ * 99 / 100],
            via_ms[NQ / 2], via_ms[NQ * 99 / 100], via_ms[NQ / 2] - fan_ms[NQ / 2]);
    omlc_close(rc);
    assert_int_equal(omld_proc_stop(&router, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&router);
    omlc_close(f);
    omlc_shards_close(sh);

    /* A shard map naming a shard that is not there: named. */
    assert_int_not_equal(omlc_shards_connect_redis(&sh, url, 3, TIMEOUT_MS, &err), 0);
    assert_non_null(strstr(err.message, "no shard 0 of 3"));
    for (int j = 3; j >= 0; j--) {
        assert_int_equal(omld_proc_stop(&p[j], SIGTERM, TIMEOUT_MS), 0);
        omld_proc_cleanup(&p[j]);
    }
}

/* Bad shard (and replica ingest) options: named at start. */
static void test_bad_shard_options(void **state)
{
    (void)state;
    char sub[96];
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/s2", g_port > 0 ? g_port : 1);
    const char *bad[][4] = {{sub, "--shard=2/2", NULL}, {sub, "--shard=1", NULL},
                            {sub, "--shard=-1/2", NULL}, {"--shard=0/2", NULL, NULL},
                            {sub, "--shard=0/2", "--ingest=redis://127.0.0.1:1/s", NULL},
                            {sub, "--ingest=redis://no-port/s", NULL}};
    const char *named[] = {"option 'shard'", "option 'shard'", "option 'shard'",
                           "option 'shard'", "option 'shard' excludes 'ingest'", "ingest"};
    for (int i = 0; i < 6; i++) {
        omld_proc p;
        assert_int_not_equal(omld_proc_start(&p, bad[i], 5000), 0);
        FILE *lf = fopen(p.log, "r");
        char line[2048] = "";
        int found = 0;
        while (lf && fgets(line, sizeof line, lf))
            found |= strstr(line, named[i]) != NULL;
        if (lf)
            fclose(lf);
        if (!found)
            fail_msg("start %d: the log does not name %s", i, named[i]);
        omld_proc_cleanup(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_shard_options),
        cmocka_unit_test(test_merged_equals_one_node),
    };
    return cmocka_run_group_tests(tests, repl_setup, repl_teardown);
}
