/* promote_replica.c - a read replica made the primary (promote_replica.h).
 *
 * DESIGN. One hiredis connection of its own, opened at the first request
 * and kept (a promotion is rare; the replica's two connections belong to
 * its reading). A 20 ms timer drives the catch-up: it renews the lease
 * every fifth of its time and watches the replica's applied position.
 * The request's slot is held until done() is called, exactly once. */
#include "promote_replica.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "log.h"
#include "metrics.h"
#include "redis_uv.h"
#include "replicate.h"

#define TICK_MS 20
#define CATCHUP_NS 60000000000ull /* the stream's end must be applied within a minute */

enum phase { P_IDLE = 0, P_CONNECT, P_TAKE, P_CATCHUP, P_ENGINE };

struct omld_promote {
    uv_loop_t *loop;
    const omld_config *cfg;
    omld_engine *engine;
    omld_replica *replica;
    omld_promote_hooks hooks;
    char node_id[OMLD_NODE_ID_LEN + 1];
    char rpc_addr[128];
    char host[256];
    int port;
    char prefix[OMLD_REPL_PREFIX_MAX];
    char key_log[OMLD_REPL_PREFIX_MAX + 16];
    omld_lease_keys keys;
    redisAsyncContext *ac;
    int up;
    uv_timer_t timer;
    int stopping, timer_open;
    /* the promotion under way */
    int phase;
    int head_known, paused, taken;
    uint64_t head_lsn, deadline_ns, renew_ns;
    char prev_owner[64];
    struct omld_replicate *pub;
    void (*done)(void *ctx, omld_reply *reply);
    void *ctx;
    uint64_t request_id;
};

static void maybe_free(omld_promote *p)
{
    if (p->stopping && !p->timer_open && p->ac == NULL && p->phase != P_ENGINE)
        free(p); /* (a promotion at the learner is answered while the engine stops) */
}

/* ------------------------------------------------------------ ending */

static void give_up_lease(omld_promote *p)
{
    if (!p->taken || !p->up)
        return;
    const char *argv[7];
    int argc = omld_lease_release_argv(&p->keys, p->node_id, p->prev_owner, argv);
    redisAsyncCommandArgv(p->ac, NULL, NULL, argc, argv, NULL);
    p->taken = 0;
}

/* Answers the request (reply owned by the callee) and resets. */
static void finish(omld_promote *p, omld_reply *reply)
{
    void (*done)(void *, omld_reply *) = p->done;
    void *ctx = p->ctx;
    p->phase = P_IDLE;
    p->done = NULL;
    p->head_known = 0;
    uv_timer_stop(&p->timer);
    if (reply->status.code != OMLD__STATUS__CODE__OK) {
        give_up_lease(p);
        if (p->paused)
            omld_replica_pause(p->replica, 0);
        LOG_WARN("promote", "promotion refused: %s", reply->status.message);
    }
    p->paused = 0;
    done(ctx, reply);
}

static void fail(omld_promote *p, Omld__Status__Code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(omld_promote *p, Omld__Status__Code code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    omld_reply *r = calloc(1, sizeof *r);
    if (r == NULL)
        abort(); /* a slot must be answered; nothing else can be done without memory */
    omld_reply_init(r, p->request_id);
    omld_reply_error(r, code, NULL, "%s", msg);
    finish(p, r);
}

/* ------------------------------------------------------------ steps */

static void on_engine_done(void *ctx, omld_reply *reply)
{
    omld_promote *p = ctx;
    struct omld_replicate *pub = p->pub;
    p->pub = NULL;
    reply->msg.request_id = p->request_id;
    if (reply->status.code != OMLD__STATUS__CODE__OK) {
        omld_replicate_stop(pub);
        finish(p, reply);
        maybe_free(p);
        return;
    }
    Omld__PromoteReplicaResponse *m = reply->msg.promote_replica;
    char *addr = omld_reply_strdup(reply, p->rpc_addr, strlen(p->rpc_addr));
    if (m && addr)
        m->primary = addr;
    uint64_t lsn = m ? m->log_position : 0;
    p->taken = 0; /* the publisher renews it now */
    p->hooks.promoted(p->hooks.arg, pub, lsn);
    LOG_INFO("promote", "this omld is the primary of %s from log position %" PRIu64,
             p->key_log, lsn);
    finish(p, reply);
    maybe_free(p);
}

static void switch_over(omld_promote *p)
{
    char err[600];
    p->pub = p->hooks.start(p->hooks.arg, err, sizeof err);
    if (p->pub == NULL) {
        fail(p, OMLD__STATUS__CODE__INTERNAL, "cannot start publishing: %s", err);
        return;
    }
    p->phase = P_ENGINE;
    if (omld_engine_promote(p->engine, p->pub, on_engine_done, p) != 0) {
        omld_replicate_stop(p->pub);
        p->pub = NULL;
        fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "the learner did not take the promotion "
             "(stopping)");
    }
}

static void send_take(omld_promote *p, int mode);

/* Each tick while catching up: renew, then has the replica applied the
 * stream's last record? Paused and idle: switch over. */
static void on_tick(uv_timer_t *t)
{
    omld_promote *p = t->data;
    if (p->phase != P_CATCHUP)
        return;
    uint64_t now = omld_now_ns();
    if (now >= p->renew_ns)
        send_take(p, OMLD_LEASE_PRIMARY); /* owned by this node now: a renewal */
    if (!p->head_known)
        return;
    omld_repl_stats st;
    omld_replica_stats_get(p->replica, &st);
    if (st.applied_lsn >= p->head_lsn && st.bootstrapped) {
        if (!p->paused) {
            omld_replica_pause(p->replica, 1);
            p->paused = 1;
        }
        if (omld_replica_idle(p->replica)) {
            switch_over(p);
            return;
        }
    }
    if (now >= p->deadline_ns)
        fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "this replica did not reach the end of %s "
             "within %llu s (applied log position %" PRIu64 " of %" PRIu64 "%s%s): not "
             "promoted", p->key_log, CATCHUP_NS / 1000000000ull, st.applied_lsn, p->head_lsn,
             st.last_error[0] ? "; " : "", st.last_error);
}

static void on_head(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_promote *p = priv;
    const redisReply *rep = reply;
    if (p->stopping || p->phase != P_CATCHUP)
        return;
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR) {
        fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "cannot read the end of %s: %s", p->key_log,
             rep ? rep->str : "the Redis connection was lost");
        return;
    }
    p->head_lsn = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
        rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements == 2 &&
        rep->element[0]->element[0]->type == REDIS_REPLY_STRING)
        p->head_lsn = strtoull(rep->element[0]->element[0]->str, NULL, 10);
    p->head_known = 1;
    LOG_INFO("promote", "lease taken; applying %s up to log position %" PRIu64, p->key_log,
             p->head_lsn);
}

static void on_take(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_promote *p = priv;
    if (p->stopping || (p->phase != P_TAKE && p->phase != P_CATCHUP))
        return;
    omld_lease_answer a;
    omld_lease_parse(reply, &a);
    if (!a.ok) {
        char why[600];
        omld_lease_describe(&a, &p->keys, why, sizeof why);
        if (p->phase == P_CATCHUP)
            p->taken = 0; /* not ours any more: nothing to give up */
        fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "%s%s", p->phase == P_CATCHUP ? "lost while "
             "catching up: " : "", why);
        return;
    }
    if (p->phase == P_CATCHUP)
        return; /* renewed */
    p->taken = 1;
    snprintf(p->prev_owner, sizeof p->prev_owner, "%s", a.prev_owner);
    p->phase = P_CATCHUP;
    p->deadline_ns = omld_now_ns() + CATCHUP_NS;
    /* Nothing is appended to the stream from here on (every append is
     * fenced by the lease): its last entry is the end to reach. */
    const char *argv[] = {"XREVRANGE", p->key_log, "+", "-", "COUNT", "1"};
    redisAsyncCommandArgv(p->ac, on_head, p, 6, argv, NULL);
    uv_timer_start(&p->timer, on_tick, TICK_MS, TICK_MS);
}

static void send_take(omld_promote *p, int mode)
{
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)p->cfg->replicate_lease_ms);
    const char *argv[9];
    int argc = omld_lease_take_argv(&p->keys, p->node_id, mode, ttl, argv);
    p->renew_ns = omld_now_ns() + (uint64_t)p->cfg->replicate_lease_ms * 200000u;
    if (redisAsyncCommandArgv(p->ac, on_take, p, argc, argv, NULL) != REDIS_OK && p->phase == P_TAKE)
        fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "cannot send the lease command to Redis");
}

/* ------------------------------------------------------------ connection */

static void on_connect(const redisAsyncContext *ac, int status)
{
    omld_promote *p = ac->data;
    if (p == NULL)
        return;
    if (status != REDIS_OK) {
        p->ac = NULL; /* hiredis frees it */
        if (p->phase == P_CONNECT)
            fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "cannot connect to Redis at %s:%d: %s",
                 p->host, p->port, ac->errstr);
        maybe_free(p);
        return;
    }
    p->up = 1;
    if (p->phase == P_CONNECT) {
        p->phase = P_TAKE;
        send_take(p, OMLD_LEASE_PROMOTE);
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    omld_promote *p = ac->data;
    (void)status;
    if (p == NULL)
        return;
    p->ac = NULL;
    p->up = 0;
    if (p->phase == P_CONNECT || p->phase == P_TAKE || p->phase == P_CATCHUP)
        fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "the Redis connection was lost during the "
             "promotion: %s", ac->errstr);
    maybe_free(p);
}

int omld_promote_start(void *ctl, const Omld__Request *req, omld_reply *now,
                       void (*done)(void *ctx, omld_reply *reply), void *ctx)
{
    omld_promote *p = ctl;
    if (p->phase != P_IDLE) {
        omld_reply_error(now, OMLD__STATUS__CODE__CONFLICT, "promote_replica", "promote_replica: "
                         "a promotion of this replica is under way");
        return 0;
    }
    if (p->cfg->shard[0]) {
        omld_reply_error(now, OMLD__STATUS__CODE__INVALID_ARGUMENT, "promote_replica",
                         "promote_replica: this replica is shard %s: it indexes only part of "
                         "the items, a primary must index them all; promote a replica without "
                         "shard", p->cfg->shard);
        return 0;
    }
    if (p->cfg->replicate_lease_ms == 0) {
        omld_reply_error(now, OMLD__STATUS__CODE__INVALID_ARGUMENT, "promote_replica",
                         "promote_replica needs replicate_lease_ms > 0 on this replica (the "
                         "lease it takes in Redis): without one nothing keeps two primaries "
                         "from writing");
        return 0;
    }
    p->done = done;
    p->ctx = ctx;
    p->request_id = req->request_id;
    p->phase = P_CONNECT;
    LOG_INFO("promote", "promote_replica: taking the primary lease %s", p->keys.lease);
    if (p->ac && p->up) {
        p->phase = P_TAKE;
        send_take(p, OMLD_LEASE_PROMOTE);
        return 1;
    }
    if (p->ac == NULL) {
        char why[400];
        p->ac = omld_redis_uv_connect(p->loop, p->host, p->port, p, on_connect, on_disconnect,
                                      why, sizeof why);
        if (p->ac == NULL) {
            p->phase = P_IDLE;
            p->done = NULL;
            omld_reply_error(now, OMLD__STATUS__CODE__UNAVAILABLE, NULL, "%s", why);
            return 0;
        }
    }
    return 1; /* on_connect goes on */
}

/* ------------------------------------------------------------ lifetime */

int omld_promote_create(omld_promote **out, uv_loop_t *loop, const omld_config *cfg,
                        const char *node_id, const char *rpc_addr, omld_engine *engine,
                        omld_replica *replica, const omld_promote_hooks *hooks, char *err,
                        size_t errlen)
{
    *out = NULL;
    omld_promote *p = calloc(1, sizeof *p);
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (omld_repl_parse_url("replica_of", cfg->replica_of, p->host, sizeof p->host, &p->port,
                            p->prefix, sizeof p->prefix, err, errlen) != 0) {
        free(p);
        return -1;
    }
    p->loop = loop;
    p->cfg = cfg;
    p->engine = engine;
    p->replica = replica;
    p->hooks = *hooks;
    snprintf(p->node_id, sizeof p->node_id, "%s", node_id);
    snprintf(p->rpc_addr, sizeof p->rpc_addr, "%s", rpc_addr);
    snprintf(p->key_log, sizeof p->key_log, "%s:log", p->prefix);
    omld_lease_keys_init(&p->keys, p->prefix);
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->timer_open = 1;
    *out = p;
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    omld_promote *p = h->data;
    p->timer_open = 0;
    maybe_free(p);
}

void omld_promote_stop(omld_promote *p)
{
    if (p == NULL || p->stopping)
        return;
    /* P_ENGINE: the learner answers it while it stops (on_engine_done frees) */
    if (p->phase != P_IDLE && p->phase != P_ENGINE)
        fail(p, OMLD__STATUS__CODE__UNAVAILABLE, "the daemon is stopping: not promoted");
    p->stopping = 1;
    if (p->ac) {
        redisAsyncContext *ac = p->ac;
        ac->data = NULL;
        p->ac = NULL;
        redisAsyncFree(ac);
    }
    uv_close((uv_handle_t *)&p->timer, on_timer_closed);
}
