/* test_kill_scenario.c - issue 16 item 4, the measured kill scenario: a
 * redis-server on loopback (appendonly, appendfsync always), a primary
 * (the lease, replicate_sync, and --ingest from a Redis Stream), two read
 * replicas (the same options: either can be promoted and take the stream
 * over), two shards (0/2, 1/2) and a router. While a client writes
 * items and keyed triplet batches over RPC, a producer XADDs items to the
 * ingest stream and two clients classify and retrieve (replicas, shards
 * merged by the client, the router), one role at a time is killed with
 * SIGKILL:
 *  - a replica (restarted: it bootstraps and catches up);
 *  - a shard (restarted: its new address goes into the shard map);
 *  - redis-server, restarted on its AOF, and restarted empty (its AOF
 *    removed: a Redis without persistence; the primary retakes the lost
 *    lease, replicas bootstrap from the checkpoint it sends again, the
 *    ingest group is created again);
 *  - the primary: a replica is promoted with `omlctl promote-replica`, a
 *    fresh replica takes its place, and the old primary restarted is
 *    refused ("superseded"): the lease and owner keys still name the new
 *    primary.
 * After each trial, with the writers paused: every acknowledged RPC write
 * (item, and keyed batch sent again: a duplicate) and every item entry the
 * ingest consumer XACKed is on the current primary; the stream is read
 * to its end (nothing pending) and every entry of it XACKed; no valid
 * entry was dead-lettered; replicas and shards reached the primary's version;
 * classify and retrieve on each replica, and retrievals and
 * classifications merged over the shards (client and router), equal the
 * primary's bit for bit; queries were answered during the trial. OMLD_KILL_TRIALS (default 5, one per
 * role) and OMLD_KILL_SECONDS (default 1: streaming before each kill, and
 * the figures' durations scale with it) select a longer run. Figures,
 * printed: replica lag at 5,000 triplets/s, classify/s with 4 client
 * threads on the primary alone and with 1 and 2 replicas serving reads,
 * the p50 of retrieve and classify on one replica, merged by the client
 * and through the router (OMLD_KILL_TRIALS=0: the figures alone).
 * Skipped when redis-server is not installed. */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "repl_fixture.h"

#define LEASE "--replicate_lease_ms=1500"
#define PREFIX "k1"
#define STREAM "kin"
#define MAXW 100000 /* writes of either writer per run */
#define CALL_MS 5000

enum { PRI, R1, R2, S0, S1, NODES }; /* the data nodes; the router aside */

typedef struct scen {
    pthread_mutex_t mu; /* guards the addresses */
    char addr[NODES][128];
    char router[128];
    atomic_int pause, stop;
    atomic_int parked; /* threads idle while paused */
    /* RPC writer: item w<i> and keyed batch k<i> */
    atomic_int w_next;
    unsigned char item_acked[MAXW], batch_acked[MAXW];
    /* stream producer: entry xid[i] holds item x<i> */
    atomic_int x_next;
    char xid[MAXW][24];
    /* readers */
    atomic_long q_ok, q_err;
} scen;

static scen *g;
static int g_aof_port;
static int g_stream_from; /* the first entry of the stream Redis holds now (an empty restart) */
static char g_aof_dir[256];
static pid_t g_aof_redis;

static void addr_of(int node, char *out)
{
    pthread_mutex_lock(&g->mu);
    snprintf(out, 128, "%s", node < 0 ? g->router : g->addr[node]);
    pthread_mutex_unlock(&g->mu);
}

static void set_addr(int node, const char *a)
{
    pthread_mutex_lock(&g->mu);
    snprintf(node < 0 ? g->router : g->addr[node], 128, "%s", a);
    pthread_mutex_unlock(&g->mu);
}

static void nap_ms(int ms)
{
    usleep((useconds_t)ms * 1000);
}

/* Paused: counted as parked until resumed. 1 if the run stops. */
static int park(void)
{
    if (atomic_load(&g->pause)) {
        atomic_fetch_add(&g->parked, 1);
        while (atomic_load(&g->pause) && !atomic_load(&g->stop))
            nap_ms(5);
        atomic_fetch_sub(&g->parked, 1);
    }
    return atomic_load(&g->stop);
}

static omlc *dial(int node)
{
    char a[128];
    addr_of(node, a);
    omlc *c = NULL;
    omlc_error err;
    return omlc_connect(&c, a, CALL_MS, &err) == 0 ? c : NULL;
}

/* ---- the three kinds of client threads (no cmocka asserts here) ---- */

static void *writer_main(void *arg)
{
    (void)arg;
    omlc *c = NULL;
    for (int i = 0; i < MAXW && !park();) {
        if (c == NULL && (c = dial(PRI)) == NULL) {
            nap_ms(50);
            continue;
        }
        char id[32], key[32], ids[3][64][32];
        float x[DIM];
        snprintf(id, sizeof id, "w%d", i);
        features(2000 + i, x);
        omlc_item it = {.id = id, .features = x, .dim = DIM, .label = "c2"};
        omlc_error err;
        int ok = omlc_put_items(c, &it, 1, NULL, NULL, &err) == 0;
        g->item_acked[i] = (unsigned char)ok;
        omlc_triplet t[10];
        make_triplets(i * 10, 10, ids, t);
        snprintf(key, sizeof key, "k%d", i);
        ok = ok && omlc_add_triplets_keyed(c, t, 10, key, NULL, NULL, &err) == 0;
        g->batch_acked[i] = (unsigned char)ok;
        atomic_store(&g->w_next, ++i);
        if (!ok) { /* the primary died, lapsed or moved: dial whoever is primary now */
            omlc_close(c);
            c = NULL;
            nap_ms(50);
        }
    }
    omlc_close(c);
    return NULL;
}

static void *producer_main(void *arg)
{
    (void)arg;
    redisContext *rc = NULL;
    for (int i = 0; i < MAXW && !park();) {
        if (rc == NULL) {
            struct timeval tv = {1, 0};
            rc = redisConnectWithTimeout("127.0.0.1", g_aof_port, tv);
            if (rc == NULL || rc->err) {
                redisFree(rc);
                rc = NULL;
                nap_ms(50);
                continue;
            }
            redisSetTimeout(rc, tv);
        }
        char id[32], label[8], feat[256];
        float x[DIM];
        features(3000 + i, x);
        int n = snprintf(feat, sizeof feat, "[");
        for (int d = 0; d < DIM; d++)
            n += snprintf(feat + n, sizeof feat - (size_t)n, "%s%.9g", d ? "," : "", x[d]);
        snprintf(feat + n, sizeof feat - (size_t)n, "]");
        snprintf(id, sizeof id, "x%d", i);
        snprintf(label, sizeof label, "c%d", i % 4);
        redisReply *r = redisCommand(rc, "XADD %s * type item id %s label %s features %s",
                                     STREAM, id, label, feat);
        if (r && r->type == REDIS_REPLY_STRING) {
            snprintf(g->xid[i], sizeof g->xid[i], "%s", r->str);
            atomic_store(&g->x_next, ++i);
        } else {
            redisFree(rc);
            rc = NULL;
        }
        freeReplyObject(r);
        nap_ms(4);
    }
    redisFree(rc);
    return NULL;
}

/* Classify on each replica, retrieve merged over the shards by the client,
 * retrieve and classify through the router, in turn; a failure drops that
 * connection. */
static void *reader_main(void *arg)
{
    (void)arg;
    omlc *c[2] = {NULL, NULL}, *rt = NULL;
    omlc_shards *sh = NULL;
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/%s", g_aof_port, PREFIX);
    for (long n = 0; !park(); n++) {
        float x[DIM];
        features(4000 + (int)(n % 500), x);
        omlc_ref q = {.vector = x, .dim = DIM};
        omlc_error err;
        omlc_hit h[10];
        size_t nh;
        int rc = -1, way = (int)(n % 4);
        if (way < 2) {
            if (c[way] == NULL)
                c[way] = dial(way == 0 ? R1 : R2);
            omlc_classification cl;
            if (c[way] && (rc = omlc_classify(c[way], &q, 5, NULL, &cl, &err)) != 0) {
                omlc_close(c[way]);
                c[way] = NULL;
            }
        } else if (way == 2) {
            if (sh == NULL && omlc_shards_connect_redis(&sh, url, 2, CALL_MS, &err) != 0)
                sh = NULL;
            if (sh && (rc = omlc_shards_retrieve(sh, &q, 10, NULL, h, 10, &nh, NULL, &err))) {
                omlc_shards_close(sh);
                sh = NULL;
            }
        } else {
            if (rt == NULL)
                rt = dial(-1);
            omlc_classification cl;
            if (rt && (rc = n % 8 == 3 ? omlc_classify(rt, &q, 5, NULL, &cl, &err)
                                       : omlc_retrieve(rt, &q, 10, NULL, h, 10, &nh, NULL,
                                                       &err)) != 0) {
                omlc_close(rt);
                rt = NULL;
            }
        }
        atomic_fetch_add(rc == 0 ? &g->q_ok : &g->q_err, 1);
        if (rc != 0)
            nap_ms(20);
    }
    omlc_close(c[0]);
    omlc_close(c[1]);
    omlc_close(rt);
    omlc_shards_close(sh);
    return NULL;
}

/* ---- checks (main thread) ---- */

static void pause_all(int threads)
{
    atomic_store(&g->pause, 1);
    for (int i = 0; i < 3000 && atomic_load(&g->parked) < threads; i++)
        nap_ms(5);
    assert_int_equal(atomic_load(&g->parked), threads);
}

static redisContext *redis_dial(void)
{
    redisContext *rc = NULL;
    for (int i = 0; i < 100; i++) {
        rc = redisConnect("127.0.0.1", g_aof_port);
        if (rc && !rc->err)
            return rc;
        redisFree(rc);
        nap_ms(50);
    }
    fail_msg("redis-server on port %d does not answer", g_aof_port);
    return NULL;
}

/* "MS-SEQ" as one comparable pair. */
static void parse_xid(const char *s, unsigned long long *ms, unsigned long long *seq)
{
    *ms = strtoull(s, NULL, 10);
    const char *dash = strchr(s, '-');
    *seq = dash ? strtoull(dash + 1, NULL, 10) : 0;
}

static int xid_le(const char *a, const char *b)
{
    unsigned long long am, as, bm, bs;
    parse_xid(a, &am, &as);
    parse_xid(b, &bm, &bs);
    return am < bm || (am == bm && as <= bs);
}

/* A field of the ingest group's XINFO GROUPS entry, or "" (no group). */
static void group_field(redisContext *rc, const char *want, char *out, size_t cap)
{
    redisReply *gr = redisCommand(rc, "XINFO GROUPS %s", STREAM);
    snprintf(out, cap, "%s", "");
    for (size_t i = 0; gr && gr->type == REDIS_REPLY_ARRAY && i < gr->elements; i++) {
        redisReply *grp = gr->element[i];
        int ours = 0;
        for (size_t f = 0; f + 1 < grp->elements; f += 2)
            ours |= strcmp(grp->element[f]->str, "name") == 0 &&
                    strcmp(grp->element[f + 1]->str, "omld") == 0;
        for (size_t f = 0; ours && f + 1 < grp->elements; f += 2) {
            redisReply *v = grp->element[f + 1];
            if (strcmp(grp->element[f]->str, want) != 0)
                continue;
            if (v->type == REDIS_REPLY_INTEGER)
                snprintf(out, cap, "%lld", v->integer);
            else
                snprintf(out, cap, "%s", v->str ? v->str : "");
        }
    }
    freeReplyObject(gr);
}

/* Marks in xacked the entries the ingest group has XACKed: delivered (at
 * or before its last-delivered id) and not pending. Marks stay: a Redis
 * restarted empty forgets the stream, not what omld acknowledged. Returns
 * the count marked. */
static int xacked_entries(unsigned char *xacked, int n)
{
    redisContext *rc = redis_dial();
    char last[64];
    group_field(rc, "last-delivered-id", last, sizeof last);
    if (last[0] == '\0')
        snprintf(last, sizeof last, "0-0"); /* no group yet: nothing delivered */
    redisReply *pr = redisCommand(rc, "XPENDING %s omld - + 1000000", STREAM);
    int count = 0;
    for (int i = 0; i < g_stream_from; i++)
        count += xacked[i];
    for (int i = g_stream_from; i < n; i++) { /* judged by the stream that holds them */
        int pending = 0;
        for (size_t j = 0; pr && pr->type == REDIS_REPLY_ARRAY && j < pr->elements && !pending;
             j++)
            pending = strcmp(pr->element[j]->element[0]->str, g->xid[i]) == 0;
        xacked[i] |= !pending && xid_le(g->xid[i], last);
        count += xacked[i];
    }
    freeReplyObject(pr);
    redisReply *dl = redisCommand(rc, "XLEN %s:dead", STREAM);
    assert_non_null(dl);
    if (dl->integer != 0) { /* every entry is valid: a dead letter is a lost write */
        redisReply *e = redisCommand(rc, "XRANGE %s:dead - + COUNT 1", STREAM);
        fail_msg("%lld entries were dead-lettered, the first %s", dl->integer,
                 e && e->elements ? e->element[0]->element[1]->element[3]->str : "?");
    }
    freeReplyObject(dl);
    redisFree(rc);
    return count;
}

/* Until the ingest group has been delivered the stream's last entry and
 * holds none pending: whoever is primary reads the stream (a promoted
 * replica too, as the same consumer, the dead primary's pending entries
 * first). */
static void wait_ingest_drained(void)
{
    redisContext *rc = redis_dial();
    char last[64] = "", delivered[64] = "", pending[32] = "";
    for (int i = 0; i < 300; i++) {
        redisReply *r = redisCommand(rc, "XREVRANGE %s + - COUNT 1", STREAM);
        snprintf(last, sizeof last, "%s", r && r->type == REDIS_REPLY_ARRAY && r->elements
                                              ? r->element[0]->element[0]->str : "");
        freeReplyObject(r);
        group_field(rc, "last-delivered-id", delivered, sizeof delivered);
        group_field(rc, "pending", pending, sizeof pending);
        if (last[0] == '\0' || (strcmp(last, delivered) == 0 && strcmp(pending, "0") == 0))
            break;
        nap_ms(50);
    }
    redisFree(rc);
    if (last[0] && (strcmp(last, delivered) != 0 || strcmp(pending, "0") != 0))
        fail_msg("the ingest stream is not read: its last entry %s, delivered up to %s, %s "
                 "pending", last, delivered[0] ? delivered : "(no group)", pending);
}

/* Every id (prefix<i> with mark[i]) is stored on the primary. */
static void expect_items(omlc *c, const char *prefix, const unsigned char *mark, int n)
{
    for (int i = 0; i < n; i++) {
        if (!mark[i])
            continue;
        char id[32];
        snprintf(id, sizeof id, "%s%d", prefix, i);
        const char *ids[] = {id};
        Omld__Response *r = NULL;
        omlc_error err;
        if (omlc_get_items(c, ids, 1, &r, &err) != 0)
            fail_msg("acknowledged item %s is not on the primary: %s", id, err.message);
        omld__response__free_unpacked(r, NULL);
    }
}

/* Every acknowledged keyed batch, sent again, is a duplicate. */
static void expect_batches(omlc *c, int n)
{
    for (int i = 0; i < n; i++) {
        if (!g->batch_acked[i])
            continue;
        char key[32], ids[3][64][32];
        omlc_triplet t[10];
        make_triplets(i * 10, 10, ids, t);
        snprintf(key, sizeof key, "k%d", i);
        int dup = 0;
        omlc_error err;
        assert_int_equal(omlc_add_triplets_keyed(c, t, 10, key, NULL, &dup, &err), 0);
        if (!dup)
            fail_msg("acknowledged triplet batch %s was not applied on the primary", key);
    }
}

/* Retrievals and classifications merged over the shards (client, router)
 * equal the primary's. */
static void expect_shards_equal(const omld_proc *pri, uint64_t v)
{
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/%s", g_aof_port, PREFIX);
    omlc_shards *sh = NULL;
    omlc_error err;
    for (int i = 0; i < 200 && omlc_shards_connect_redis(&sh, url, 2, CALL_MS, &err) != 0; i++)
        nap_ms(50); /* a restarted shard writes its new address into the map */
    assert_non_null(sh);
    omlc *one = omld_proc_dial(pri, TIMEOUT_MS), *rt = dial(-1);
    assert_non_null(one);
    assert_non_null(rt);
    for (int qn = 0; qn < 16; qn++) {
        float x[DIM];
        features(6000 + qn, x);
        omlc_ref q = {.vector = x, .dim = DIM};
        omlc_hit a[20], b[20], r[20];
        size_t na = 0, nb = 0, nr = 0;
        uint64_t va = 0, vb = 0, vr = 0;
        uint32_t k = (uint32_t)(1 + qn % 20);
        if (omlc_shards_retrieve(sh, &q, k, NULL, a, 20, &na, &va, &err) != 0)
            fail_msg("merged retrieve: %s", err.message);
        assert_int_equal(omlc_retrieve(one, &q, k, NULL, b, 20, &nb, &vb, &err), 0);
        assert_int_equal(omlc_retrieve(rt, &q, k, NULL, r, 20, &nr, &vr, &err), 0);
        assert_int_equal(va, v);
        assert_int_equal(vb, v);
        assert_int_equal(vr, v);
        expect_hits_equal(a, na, b, nb);
        expect_hits_equal(r, nr, b, nb);
        omlc_classification ca, cb, cr;
        if (omlc_shards_classify(sh, &q, k, &ca, &err) != 0)
            fail_msg("merged classify: %s", err.message);
        assert_int_equal(omlc_classify(one, &q, k, NULL, &cb, &err), 0);
        assert_int_equal(omlc_classify(rt, &q, k, NULL, &cr, &err), 0);
        assert_int_equal(cb.model_version, v);
        expect_class_equal(&ca, &cb);
        expect_class_equal(&cr, &cb);
    }
    omlc_close(one);
    omlc_close(rt);
    omlc_shards_close(sh);
}

/* Everything acknowledged is on the primary, and every node answers as it. */
static void check_all(omld_proc *p, unsigned char *xacked, int *n_xacked)
{
    int w = atomic_load(&g->w_next), x = atomic_load(&g->x_next);
    wait_ingest_drained();
    *n_xacked = xacked_entries(xacked, x);
    for (int i = g_stream_from; i < x; i++) /* the stream read to its end: all XACKed */
        if (!xacked[i])
            fail_msg("stream entry %s (item x%d) was never XACKed", g->xid[i], i);
    omlc *c = omld_proc_dial(&p[PRI], TIMEOUT_MS);
    assert_non_null(c);
    expect_items(c, "w", g->item_acked, w);
    expect_batches(c, w);
    expect_items(c, "x", xacked, x);
    omlc_close(c);
    uint64_t v = wait_all_versions(p, NODES);
    expect_same_answers(&p[PRI], &p[R1], v);
    expect_same_answers(&p[PRI], &p[R2], v);
    expect_shards_equal(&p[PRI], v);
}

/* ---- the trials ---- */

static const char *const ROLE[] = {"replica", "shard", "redis-server",
                                   "redis-server (restarted empty)", "primary"};
#define ROLES 5

/* GET key (the lease's and the owner's node ids). */
static void redis_get(const char *key, char *out, size_t cap)
{
    redisContext *rc = redis_dial();
    redisReply *r = redisCommand(rc, "GET %s", key);
    snprintf(out, cap, "%s", r && r->type == REDIS_REPLY_STRING ? r->str : "(none)");
    freeReplyObject(r);
    redisFree(rc);
}

static int log_has(const omld_proc *p, const char *text)
{
    FILE *f = fopen(p->log, "r");
    char line[4096];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, text) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* kill -9 the primary; promote R1 with omlctl once the lease expired; a
 * fresh replica becomes R1; the old primary restarted does not write. */
static void kill_primary(omld_proc *p, const char *const *pargs, const char *const *rargs)
{
    assert_int_equal(omld_proc_stop(&p[PRI], SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
    omld_proc old = p[PRI];
    double t0 = now_s();
    char cmd[512], out[2048];
    snprintf(cmd, sizeof cmd, "%s --server %s promote-replica", OMLCTL_BIN, p[R1].rpc);
    int rc;
    while ((rc = omld_run_capture(cmd, out, sizeof out)) != 0 && now_s() - t0 < 20) {
        assert_non_null(strstr(out, "lease")); /* refused while the dead primary's lease lives */
        nap_ms(200);
    }
    if (rc != 0)
        fail_msg("promote-replica: %s", out);
    assert_non_null(strstr(out, "is the primary now"));
    fprintf(stderr, "  promoted %s %.2f s after the kill: %s", p[R1].rpc, now_s() - t0, out);
    p[PRI] = p[R1];
    set_addr(PRI, p[PRI].rpc);
    assert_int_equal(omld_proc_start(&p[R1], rargs, TIMEOUT_MS), 0);
    set_addr(R1, p[R1].rpc);
    /* The old primary restarted exits without taking the lease: the
     * new primary still holds it and owns the stream. */
    char owner[64], owner2[64], lease[64];
    redis_get(PREFIX ":owner", owner, sizeof owner);
    assert_int_not_equal(omld_proc_restart(&old, pargs, TIMEOUT_MS), 0);
    assert_true(log_has(&old, "superseded: node"));
    redis_get(PREFIX ":owner", owner2, sizeof owner2);
    redis_get(PREFIX ":lease", lease, sizeof lease);
    assert_string_equal(owner, owner2);
    assert_string_equal(lease, owner);
    omld_proc_cleanup(&old);
}

/* kill -9 redis-server and start it again on its port: on its AOF, or
 * empty (the AOF removed: what a Redis without persistence comes back as). */
static void restart_redis(int empty)
{
    assert_int_equal(kill(g_aof_redis, SIGKILL), 0);
    waitpid(g_aof_redis, NULL, 0);
    if (empty) { /* the entries so far were judged before the kill; the new stream starts here */
        g_stream_from = atomic_load(&g->x_next);
        char aof[300];
        snprintf(aof, sizeof aof, "%s/appendonlydir", g_aof_dir);
        assert_int_equal(omld_rm_rf(aof), 0); /* no RDB: started with --save "" */
    }
    nap_ms(300);
    g_aof_redis = omld_redis_spawn_aof(REDIS_SERVER, g_aof_dir, g_aof_port);
    assert_true(g_aof_redis > 0);
}

static unsigned char g_xacked[MAXW]; /* every entry seen XACKed, by index */

static void trial(int t, omld_proc *p, const char *const *pargs, const char *const *rargs,
                  const char *const *sargs[2], double secs)
{
    int role = t % ROLES;
    long q0 = atomic_load(&g->q_ok);
    int w0 = atomic_load(&g->w_next), x0 = atomic_load(&g->x_next);
    atomic_store(&g->pause, 0);
    nap_ms((int)(secs * 1000));
    double t0 = now_s();
    if (role == 0) {
        int r = t / ROLES % 2 ? R2 : R1;
        assert_int_equal(omld_proc_stop(&p[r], SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
        nap_ms(300);
        assert_int_equal(omld_proc_restart(&p[r], rargs, TIMEOUT_MS), 0);
        set_addr(r, p[r].rpc);
    } else if (role == 1) {
        int s = t / ROLES % 2 ? S1 : S0;
        assert_int_equal(omld_proc_stop(&p[s], SIGKILL, TIMEOUT_MS), 128 + SIGKILL);
        nap_ms(300);
        assert_int_equal(omld_proc_restart(&p[s], sargs[s - S0], TIMEOUT_MS), 0);
        set_addr(s, p[s].rpc);
    } else if (role == 2) {
        restart_redis(0);
    } else if (role == 3) {
        /* What was XACKed until now must stay learned; the stream goes. */
        (void)xacked_entries(g_xacked, atomic_load(&g->x_next));
        restart_redis(1);
    } else {
        kill_primary(p, pargs, rargs);
    }
    double down = now_s() - t0; /* the kill to the role back (promoted, restarted) */
    nap_ms((int)(secs * 1000)); /* streaming and querying on after the restart */
    pause_all(4);
    int n_xacked = 0;
    check_all(p, g_xacked, &n_xacked);
    long served = atomic_load(&g->q_ok) - q0;
    fprintf(stderr, "trial %d, kill -9 %s: %d RPC writes and %d stream entries sent meanwhile "
            "(%d XACKed in all), %ld queries answered (%ld failed in all), %.1f s from the kill to the role back; "
            "every acknowledged write found, answers equal\n", t + 1, ROLE[role],
            atomic_load(&g->w_next) - w0, atomic_load(&g->x_next) - x0, n_xacked, served,
            atomic_load(&g->q_err), down);
    assert_true(served > 0);
    assert_true(atomic_load(&g->w_next) > w0);
}

/* ---- figures ---- */

typedef struct tp_arg {
    char addr[128];
    double until;
    long done;
} tp_arg;

static void *classify_loop(void *arg)
{
    tp_arg *a = arg;
    omlc *c = NULL;
    omlc_error err;
    if (omlc_connect(&c, a->addr, CALL_MS, &err) != 0)
        return NULL;
    for (int n = 0; now_s() < a->until; n++) {
        float x[DIM];
        features(8000 + n % 997, x);
        omlc_ref q = {.vector = x, .dim = DIM};
        omlc_classification cl;
        if (omlc_classify(c, &q, 5, NULL, &cl, &err) == 0)
            a->done++;
    }
    omlc_close(c);
    return NULL;
}

/* classify/s of 4 client threads spread over the first `serving` of p. */
static double classify_rate(const omld_proc *p, int serving, double secs)
{
    enum { T = 4 };
    pthread_t th[T];
    tp_arg a[T];
    double t0 = now_s();
    for (int i = 0; i < T; i++) {
        a[i] = (tp_arg){.until = t0 + secs};
        snprintf(a[i].addr, sizeof a[i].addr, "%s", p[i % serving].rpc);
        assert_int_equal(pthread_create(&th[i], NULL, classify_loop, &a[i]), 0);
    }
    long total = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        total += a[i].done;
    }
    return (double)total / (now_s() - t0);
}

static void router_cost(const omld_proc *p, int cls);

static void print_figures(omld_proc *p, double secs)
{
    omlc *c = omld_proc_dial(&p[PRI], TIMEOUT_MS);
    lag_figures f;
    measure_lag(c, &p[R1], 4, 3 * secs, 100000, &f);
    omlc_close(c);
    fprintf(stderr, "lag of 2 replicas and 2 shards at %.0f triplets/s over %.0f s (%zu samples):"
            " records p50 %.0f p99 %.0f max %.0f; seconds p50 %.3f p99 %.3f max %.3f\n", f.rate,
            3 * secs, f.samples, f.rec_p50, f.rec_p99, f.rec_max, f.sec_p50, f.sec_p99,
            f.sec_max);
    (void)wait_all_versions(p, NODES);
    double one = classify_rate(p, 1, 2 * secs), two = classify_rate(p, 2, 2 * secs);
    double three = classify_rate(p, 3, 2 * secs);
    fprintf(stderr, "classify k=5, 4 client threads: primary alone %.0f/s; with 1 replica %.0f/s; "
            "with 2 replicas %.0f/s\n", one, two, three);
    router_cost(p, 0);
    router_cost(p, 1);
}

/* One query (classify if cls, else retrieve; k 10, by vector) on c, the
 * shards merged by the client (sh), or the router (c too). */
static void one_query(omlc *c, omlc_shards *sh, int cls, int i)
{
    float x[DIM];
    features(9000 + i, x);
    omlc_ref q = {.vector = x, .dim = DIM};
    omlc_hit h[10];
    size_t n;
    omlc_classification cl;
    omlc_error err;
    int rc = sh ? (cls ? omlc_shards_classify(sh, &q, 10, &cl, &err)
                       : omlc_shards_retrieve(sh, &q, 10, NULL, h, 10, &n, NULL, &err))
                : (cls ? omlc_classify(c, &q, 10, NULL, &cl, &err)
                       : omlc_retrieve(c, &q, 10, NULL, h, 10, &n, NULL, &err));
    assert_int_equal(rc, 0);
}

/* The router's cost: the same queries, in turn, on one replica holding
 * every item, fanned out by the client over the two shards, and through
 * the router. */
static void router_cost(const omld_proc *p, int cls)
{
    enum { NQ = 300 };
    double ms[3][NQ];
    char url[96];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/%s", g_aof_port, PREFIX);
    omlc_shards *sh = NULL;
    omlc_error err;
    assert_int_equal(omlc_shards_connect_redis(&sh, url, 2, CALL_MS, &err), 0);
    omlc *one = omld_proc_dial(&p[R1], TIMEOUT_MS), *rt = dial(-1);
    assert_non_null(one);
    assert_non_null(rt);
    for (int i = 0; i < NQ; i++) {
        for (int way = 0; way < 3; way++) {
            double t0 = now_s();
            one_query(way == 0 ? one : rt, way == 1 ? sh : NULL, cls, i);
            ms[way][i] = (now_s() - t0) * 1e3;
        }
    }
    for (int way = 0; way < 3; way++)
        qsort(ms[way], NQ, sizeof(double), cmp_double);
    fprintf(stderr, "%s k=10, p50: one replica %.3f ms, two shards merged by the client %.3f "
            "ms, through the router %.3f ms (the router adds %.3f ms to the client's fan-out, "
            "%.3f ms to one replica)\n", cls ? "classify" : "retrieve", ms[0][NQ / 2],
            ms[1][NQ / 2], ms[2][NQ / 2], ms[2][NQ / 2] - ms[1][NQ / 2],
            ms[2][NQ / 2] - ms[0][NQ / 2]);
    omlc_close(one);
    omlc_close(rt);
    omlc_shards_close(sh);
}

static void test_kill_trials(void **state)
{
    (void)state;
    if (access(REDIS_SERVER, X_OK) != 0)
        skip();
    const char *te = getenv("OMLD_KILL_TRIALS"), *se = getenv("OMLD_KILL_SECONDS");
    int trials = te ? atoi(te) : ROLES;
    double secs = se && atof(se) > 0 ? atof(se) : 1.0;
    snprintf(g_aof_dir, sizeof g_aof_dir, "/tmp/omld-kill-XXXXXX");
    assert_non_null(mkdtemp(g_aof_dir));
    g_aof_port = omld_free_port();
    g_aof_redis = omld_redis_spawn_aof(REDIS_SERVER, g_aof_dir, g_aof_port);
    assert_true(g_aof_redis > 0);
    g = calloc(1, sizeof *g);
    assert_non_null(g);
    pthread_mutex_init(&g->mu, NULL);

    char pub[96], sub[96], in[96], rt[96];
    snprintf(pub, sizeof pub, "--replicate=redis://127.0.0.1:%d/%s", g_aof_port, PREFIX);
    snprintf(sub, sizeof sub, "--replica_of=redis://127.0.0.1:%d/%s", g_aof_port, PREFIX);
    snprintf(in, sizeof in, "--ingest=redis://127.0.0.1:%d/%s", g_aof_port, STREAM);
    snprintf(rt, sizeof rt, "--router=redis://127.0.0.1:%d/%s", g_aof_port, PREFIX);
#define MODEL "--dim=8", "--layers=1", "--hidden=16", "--emb=8", "--seed=5", "--publish_ms=50"
    const char *pargs[] = {MODEL, "--replicate_sync=1", LEASE, PRIMARY_CKPT, pub, in, NULL};
    /* ingest on the replicas too: read once promoted, as the same consumer */
    const char *rargs[] = {MODEL, "--replicate_sync=1", LEASE, PRIMARY_CKPT, sub, in, NULL};
    const char *s0[] = {MODEL, sub, "--shard=0/2", NULL}, *s1[] = {MODEL, sub, "--shard=1/2", NULL};
    const char *routerargs[] = {MODEL, rt, "--router_shards=2", NULL};
#undef MODEL
    const char *const *sargs[2] = {s0, s1};
    omld_proc p[NODES], router;
    assert_int_equal(omld_proc_start(&p[PRI], pargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[R1], rargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[R2], rargs, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[S0], s0, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&p[S1], s1, TIMEOUT_MS), 0);
    assert_int_equal(omld_proc_start(&router, routerargs, TIMEOUT_MS), 0);
    for (int i = 0; i < NODES; i++)
        set_addr(i, p[i].rpc);
    set_addr(-1, router.rpc);
    omlc *c = omld_proc_dial(&p[PRI], TIMEOUT_MS);
    assert_non_null(c);
    put_items(c, 0, N_ITEMS);
    add_triplets(c, 0, 400, 20);
    omlc_close(c);
    print_figures(p, secs);

    atomic_store(&g->pause, 1);
    pthread_t th[4];
    assert_int_equal(pthread_create(&th[0], NULL, writer_main, NULL), 0);
    assert_int_equal(pthread_create(&th[1], NULL, producer_main, NULL), 0);
    assert_int_equal(pthread_create(&th[2], NULL, reader_main, NULL), 0);
    assert_int_equal(pthread_create(&th[3], NULL, reader_main, NULL), 0);
    for (int t = 0; t < trials; t++)
        trial(t, p, pargs, rargs, sargs, secs);
    atomic_store(&g->stop, 1);
    atomic_store(&g->pause, 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int w = atomic_load(&g->w_next), acked = 0;
    for (int i = 0; i < w; i++)
        acked += g->item_acked[i] + g->batch_acked[i];
    fprintf(stderr, "%d kill trials: %d acknowledged RPC writes of %d sent, %d stream entries, "
            "none lost\n", trials, acked, 2 * w, atomic_load(&g->x_next));

    assert_int_equal(omld_proc_stop(&router, SIGTERM, TIMEOUT_MS), 0);
    omld_proc_cleanup(&router);
    for (int j = NODES - 1; j >= 0; j--) {
        assert_int_equal(omld_proc_stop(&p[j], SIGTERM, TIMEOUT_MS), 0);
        omld_proc_cleanup(&p[j]);
    }
    pthread_mutex_destroy(&g->mu);
    free(g);
    g = NULL;
}

/* The group's end, also after a failure: redis-server stopped, its AOF removed. */
static int teardown(void **state)
{
    (void)state;
    if (g_aof_redis > 0)
        omld_redis_stop(g_aof_redis, g_aof_dir);
    g_aof_redis = 0;
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_trials),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
