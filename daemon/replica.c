/* replica.c - a read replica following a primary through Redis (replica.h).
 *
 * DESIGN. Two hiredis connections on the loop, as ingest.c: `rd` only
 * reads the stream (XREAD ... BLOCK holds its connection), `cmd` carries
 * the rest (the checkpoint, the head of the stream, the primary's address).
 * One thing is in flight at a time, a bootstrap or a batch, so batches
 * reach the learner in log order and the next XREAD starts after the last
 * entry of the one applied. */
#include "replica.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "log.h"
#include "metrics.h"
#include "redis_uv.h"
#include "server.h"

#define TICK_MS 200
#define RETRY_MS 1000
#define BLOCK_MS "1000"
#define BATCH "1024"

enum phase { PHASE_BOOT = 0, PHASE_FOLLOW };

typedef struct job {
    omld_replica *r;
    omld_repl_batch b;
    uint8_t *bytes;         /* the payloads the entries point into */
    uint64_t last_t_ms;     /* the primary's commit time of its last record */
    int gap;                /* an LSN is missing after this batch: bootstrap again */
    char cursor[48];        /* the last stream id it holds */
} job;

struct omld_replica {
    uv_loop_t *loop;
    omld_engine *engine;
    char host[256];
    int port;
    char prefix[OMLD_REPL_PREFIX_MAX];
    char key_log[OMLD_REPL_PREFIX_MAX + 16];
    redisAsyncContext *rd, *cmd;
    int rd_up, cmd_up;
    uv_timer_t tick;
    int handles_open, jobs_open;
    int stopping;
    int phase;
    int busy;                   /* a bootstrap or a batch is in flight */
    int paused;                 /* no new read or bootstrap starts (a promotion) */
    uint64_t retry_at_ms;       /* no bootstrap attempt before (waiting for a checkpoint) */
    char cursor[48];            /* XREAD after this id */
    uint64_t last_t_ms;         /* the primary's commit time of the last record applied */
    uint64_t head_t_ms;         /* ... of the newest record in the stream */
    char not_primary[800];      /* the NOT_PRIMARY message (server.h) */
    char shard[OMLD_STR_MAX];   /* option shard, "i/n" ("" none) */
    char rpc_addr[128];         /* ours, in the shard map */
    uint64_t shard_told_ms;     /* the shard map was last written */
    omld_repl_stats st;
};

static void set_error(omld_replica *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(omld_replica *r, const char *fmt, ...)
{
    char text[sizeof r->st.last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (strcmp(text, r->st.last_error) != 0)
        LOG_WARN("replica", "%s", text);
    memcpy(r->st.last_error, text, sizeof text);
}

static void command(omld_replica *r, redisAsyncContext *ac, redisCallbackFn *fn, void *priv,
                    int argc, const char **argv)
{
    if (ac == NULL || redisAsyncCommandArgv(ac, fn, priv, argc, argv, NULL) != REDIS_OK) {
        set_error(r, "a Redis command could not be sent (%s)", argv[0]);
        if (fn)
            fn(NULL, NULL, priv);
    }
}

static void maybe_free(omld_replica *r)
{
    if (r->stopping && r->handles_open == 0 && r->jobs_open == 0)
        free(r);
}

static void set_not_primary(omld_replica *r, const char *addr)
{
    if (addr && addr[0])
        snprintf(r->not_primary, sizeof r->not_primary, "send writes to the primary at %s "
                 "(as published under %s:primary in redis://%s:%d)", addr, r->prefix, r->host,
                 r->port);
    else
        snprintf(r->not_primary, sizeof r->not_primary, "send writes to the primary (its "
                 "address is not published yet under %s:primary in redis://%s:%d)", r->prefix,
                 r->host, r->port);
}

/* ------------------------------------------------------------ entries */

static const redisReply *field(const redisReply *fv, const char *name)
{
    for (size_t i = 0; fv && fv->type == REDIS_REPLY_ARRAY && i + 1 < fv->elements; i += 2)
        if (fv->element[i]->type == REDIS_REPLY_STRING && strcmp(fv->element[i]->str, name) == 0 &&
            fv->element[i + 1]->type == REDIS_REPLY_STRING)
            return fv->element[i + 1];
    return NULL;
}

static uint64_t field_u64(const redisReply *fv, const char *name, int *ok)
{
    const redisReply *v = field(fv, name);
    char *end = NULL;
    uint64_t x = v ? strtoull(v->str, &end, 10) : 0;
    if (v == NULL || end == v->str || *end != '\0')
        *ok = 0;
    return x;
}

/* The LSN of a stream id "LSN-SEQ". 0 if it is not one. */
static uint64_t id_lsn(const char *id)
{
    char *end = NULL;
    uint64_t lsn = strtoull(id, &end, 10);
    return end != id && *end == '-' ? lsn : 0;
}

/* ------------------------------------------------------------ applying */

static void read_next(omld_replica *r);
static void bootstrap(omld_replica *r);

static void job_free(job *j)
{
    free(j->bytes);
    free(j->b.ckpt);
    free(j->b.e);
    free(j);
}

static void on_applied(void *ctx, omld_reply *reply)
{
    job *j = ctx;
    omld_replica *r = j->r;
    int ok = reply->status.code == OMLD__STATUS__CODE__OK;
    if (!ok)
        set_error(r, "%s", reply->status.message ? reply->status.message : "applying failed");
    omld_reply_free(reply);
    free(reply);
    r->jobs_open--;
    r->busy = 0;
    if (r->stopping) {
        job_free(j);
        maybe_free(r);
        return;
    }
    if (j->b.ckpt && ok) {
        r->st.bootstrapped = 1;
        r->st.bootstraps++;
        r->phase = PHASE_FOLLOW;
        r->st.last_error[0] = '\0';
        LOG_INFO("replica", "bootstrapped from the primary's checkpoint at log position %" PRIu64
                 " (view %" PRIu64 ")", j->b.load_lsn, j->b.version);
    }
    if (ok || j->b.applied_lsn > r->st.applied_lsn) {
        if (j->b.ckpt == NULL) /* a bootstrap jumps; it applies nothing */
            r->st.records_applied += j->b.applied_lsn - r->st.applied_lsn;
        r->st.applied_lsn = j->b.applied_lsn;
        if (j->last_t_ms) {
            r->last_t_ms = j->last_t_ms;
            uint64_t now = omld_wall_ms();
            r->st.apply_delay_seconds = now > j->last_t_ms ? (double)(now - j->last_t_ms) / 1e3 : 0;
        }
        if (j->cursor[0])
            snprintf(r->cursor, sizeof r->cursor, "%s", j->cursor);
    }
    if (!ok || j->gap) { /* cannot go on from here: a checkpoint after the gap */
        r->phase = PHASE_BOOT;
        r->retry_at_ms = j->gap ? 0 : omld_wall_ms() + RETRY_MS;
    }
    job_free(j);
    if (r->phase == PHASE_BOOT)
        bootstrap(r);
    else
        read_next(r);
}

static int submit(omld_replica *r, job *j)
{
    if (omld_engine_follow(r->engine, &j->b, on_applied, j) != 0) {
        job_free(j);
        r->busy = 0;
        return -1;
    }
    r->jobs_open++;
    return 0;
}

/* ------------------------------------------------------------ bootstrap */

static void on_checkpoint(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_replica *r = priv;
    redisReply *rep = reply;
    if (r->stopping || rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements != 2) {
        r->busy = 0;
        if (rep && rep->type == REDIS_REPLY_ERROR)
            set_error(r, "reading the checkpoint: %s", rep->str);
        maybe_free(r);
        return;
    }
    const redisReply *lsn_s = rep->element[0], *ck = rep->element[1];
    uint64_t lsn = lsn_s->type == REDIS_REPLY_STRING ? strtoull(lsn_s->str, NULL, 10) : 0;
    if (ck->type != REDIS_REPLY_STRING || lsn == 0) {
        if (!r->st.bootstrapped && r->st.applied_lsn == 0) {
            /* Nothing to load: from the empty state, if the stream starts at
             * LSN 1 (a gap at the first entry says otherwise). */
            r->busy = 0;
            r->phase = PHASE_FOLLOW;
            r->st.bootstrapped = 1;
            r->st.bootstraps++;
            snprintf(r->cursor, sizeof r->cursor, "0-0");
            LOG_INFO("replica", "no checkpoint under %s:checkpoint yet: following the log from "
                     "its start", r->prefix);
            read_next(r);
            return;
        }
        set_error(r, "the log has a gap after LSN %" PRIu64 " and there is no checkpoint to "
                  "start again from yet", r->st.applied_lsn);
        r->busy = 0;
        r->retry_at_ms = omld_wall_ms() + RETRY_MS;
        return;
    }
    if (lsn <= r->st.applied_lsn && r->st.bootstrapped) {
        set_error(r, "the log has a gap after LSN %" PRIu64 "; waiting for a checkpoint newer "
                  "than it (the newest is at %" PRIu64 ")", r->st.applied_lsn, lsn);
        r->busy = 0;
        r->retry_at_ms = omld_wall_ms() + RETRY_MS;
        return;
    }
    job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        r->busy = 0;
        return;
    }
    j->r = r;
    j->b.ckpt = (uint8_t *)ck->str;
    j->b.ckpt_len = ck->len;
    j->b.load_lsn = lsn;
    j->b.applied_lsn = r->st.applied_lsn;
    snprintf(j->cursor, sizeof j->cursor, "%" PRIu64 "-18446744073709551615", lsn);
    /* hiredis frees the reply after this callback: copy the checkpoint. */
    j->b.ckpt = malloc(ck->len ? ck->len : 1);
    if (j->b.ckpt == NULL) {
        free(j);
        r->busy = 0;
        return;
    }
    memcpy(j->b.ckpt, ck->str, ck->len);
    if (submit(r, j) != 0)
        set_error(r, "the learner did not take the checkpoint");
}

static void bootstrap(omld_replica *r)
{
    if (r->stopping || r->busy || r->paused || !r->cmd_up || omld_wall_ms() < r->retry_at_ms)
        return;
    r->busy = 1;
    char k_lsn[OMLD_REPL_PREFIX_MAX + 16], k_ck[OMLD_REPL_PREFIX_MAX + 16];
    snprintf(k_lsn, sizeof k_lsn, "%s:checkpoint_lsn", r->prefix);
    snprintf(k_ck, sizeof k_ck, "%s:checkpoint", r->prefix);
    const char *argv[] = {"MGET", k_lsn, k_ck};
    command(r, r->cmd, on_checkpoint, r, 3, argv);
}

/* ------------------------------------------------------------ following */

/* The records of one XREAD (entries of runs of records, and view markers)
 * as a batch, in order, up to the first gap; the payloads copied (hiredis
 * frees the reply after the callback). */
static job *batch_of(omld_replica *r, const redisReply *entries)
{
    job *j = calloc(1, sizeof *j);
    size_t bytes = 0, count = 0;
    for (size_t i = 0; i < entries->elements; i++) {
        const redisReply *e = entries->element[i];
        const redisReply *p = e->type == REDIS_REPLY_ARRAY && e->elements == 2
                                  ? field(e->element[1], "r") : NULL;
        bytes += p ? p->len : 0;
        count += p ? p->len / OMLD_REPL_RECORD_HEADER + 1 : 1;
    }
    if (j == NULL || (j->b.e = calloc(count, sizeof *j->b.e)) == NULL ||
        (j->bytes = malloc(bytes ? bytes : 1)) == NULL) {
        if (j)
            job_free(j);
        return NULL;
    }
    j->r = r;
    uint64_t applied = r->st.applied_lsn;
    j->b.applied_lsn = applied;
    size_t off = 0;
    for (size_t i = 0; i < entries->elements && !j->gap; i++) {
        const redisReply *e = entries->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
            e->element[0]->type != REDIS_REPLY_STRING)
            continue;
        const char *id = e->element[0]->str;
        const redisReply *fv = e->element[1];
        uint64_t lsn = id_lsn(id);
        int ok = 1;
        uint64_t t = field_u64(fv, "t", &ok);
        const redisReply *run = field(fv, "r");
        if (field(fv, "v")) { /* a view published after record lsn */
            omld_repl_entry *x = &j->b.e[j->b.n];
            x->version = field_u64(fv, "v", &ok);
            x->lsn = lsn;
            if (lsn > applied) {
                j->gap = 1; /* its records are missing */
                break;
            }
            if (lsn == applied)
                j->b.n++; /* (one before this replica's state is in it already) */
        } else if (run && ok) {
            /* u64 LSN | u8 type | u32 length | payload, repeated */
            const uint8_t *p = (const uint8_t *)run->str, *end = p + run->len;
            while (p < end) {
                uint64_t rl = 0;
                uint32_t n = 0;
                if ((size_t)(end - p) >= OMLD_REPL_RECORD_HEADER) {
                    rl = oml_le64_load(p);
                    n = oml_le32_load(p + 9);
                }
                if (rl == 0 || (size_t)(end - p) - OMLD_REPL_RECORD_HEADER < n) {
                    set_error(r, "stream entry %s does not hold whole log records: "
                              "bootstrapping again from a checkpoint", id);
                    j->gap = 1;
                    break;
                }
                if (rl > applied + 1) {
                    set_error(r, "the log has no record %" PRIu64 " (the next is %" PRIu64
                              "): bootstrapping again from a checkpoint", applied + 1, rl);
                    j->gap = 1;
                    break;
                }
                if (rl == applied + 1) {
                    omld_repl_entry *x = &j->b.e[j->b.n++];
                    x->lsn = rl;
                    x->type = p[8];
                    x->len = n;
                    x->payload = j->bytes + off;
                    memcpy(j->bytes + off, p + OMLD_REPL_RECORD_HEADER, n);
                    off += n;
                    applied = rl;
                    j->last_t_ms = t;
                }
                p += OMLD_REPL_RECORD_HEADER + n;
            }
            if (j->gap)
                break;
        } else {
            set_error(r, "stream entry %s is neither log records (t, r) nor a view (v, t): "
                      "bootstrapping again from a checkpoint", id);
            j->gap = 1;
            break;
        }
        snprintf(j->cursor, sizeof j->cursor, "%s", id);
        if (lsn > r->st.head_lsn)
            r->st.head_lsn = lsn, r->head_t_ms = t;
    }
    return j;
}

static void on_read(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_replica *r = priv;
    const redisReply *rep = reply;
    r->busy = 0;
    if (r->stopping) {
        maybe_free(r);
        return;
    }
    if (rep == NULL)
        return; /* disconnected: the tick reads again */
    if (rep->type == REDIS_REPLY_ERROR) {
        set_error(r, "XREAD: %s", rep->str);
        return; /* the tick reads again */
    }
    const redisReply *entries = NULL;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
        rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements == 2)
        entries = rep->element[0]->element[1];
    if (entries == NULL || entries->type != REDIS_REPLY_ARRAY || entries->elements == 0) {
        read_next(r); /* nothing new within the block time */
        return;
    }
    job *j = batch_of(r, entries);
    if (j == NULL) {
        set_error(r, "out of memory reading the log");
        return;
    }
    if (j->b.n == 0 && !j->gap) { /* only entries it already holds */
        snprintf(r->cursor, sizeof r->cursor, "%s", j->cursor);
        job_free(j);
        read_next(r);
        return;
    }
    r->busy = 1;
    submit(r, j);
}

static void read_next(omld_replica *r)
{
    if (r->stopping || r->busy || r->paused || !r->rd_up || r->phase != PHASE_FOLLOW)
        return;
    r->busy = 1;
    const char *argv[] = {"XREAD", "COUNT", BATCH, "BLOCK", BLOCK_MS, "STREAMS", r->key_log,
                          r->cursor};
    command(r, r->rd, on_read, r, 8, argv);
}

/* ------------------------------------------------------------ the tick */

/* XREVRANGE + - COUNT 1: the newest entry, for the lag in records. */
static void on_head(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_replica *r = priv;
    const redisReply *rep = reply;
    if (r->stopping || rep == NULL || rep->type != REDIS_REPLY_ARRAY || rep->elements == 0)
        return;
    const redisReply *e = rep->element[0];
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING)
        return;
    uint64_t lsn = id_lsn(e->element[0]->str);
    int ok = 1;
    uint64_t t = field_u64(e->element[1], "t", &ok);
    if (lsn >= r->st.head_lsn) {
        r->st.head_lsn = lsn;
        r->head_t_ms = t;
    }
}

static void on_primary(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_replica *r = priv;
    const redisReply *rep = reply;
    if (r->stopping || rep == NULL || rep->type != REDIS_REPLY_STRING)
        return;
    if (strcmp(rep->str, r->st.primary) != 0) {
        snprintf(r->st.primary, sizeof r->st.primary, "%s", rep->str);
        set_not_primary(r, r->st.primary);
    }
}

/* A shard's address in the shard map, PREFIX:shards:N field i (clients
 * fan queries out by it), every 5 s: Redis may have restarted empty. */
static void tell_shard(omld_replica *r)
{
    uint64_t now = omld_wall_ms();
    if (r->shard[0] == '\0' || now - r->shard_told_ms < 5000)
        return;
    r->shard_told_ms = now;
    char key[OMLD_REPL_PREFIX_MAX + 32], field[16];
    const char *slash = strchr(r->shard, '/');
    snprintf(key, sizeof key, "%s:shards:%s", r->prefix, slash + 1);
    snprintf(field, sizeof field, "%.*s", (int)(slash - r->shard), r->shard);
    const char *argv[] = {"HSET", key, field, r->rpc_addr};
    command(r, r->cmd, NULL, NULL, 4, argv);
}

static void on_connect(const redisAsyncContext *ac, int status);
static void on_disconnect(const redisAsyncContext *ac, int status);

static redisAsyncContext *connect_one(omld_replica *r)
{
    char why[sizeof r->st.last_error];
    redisAsyncContext *ac = omld_redis_uv_connect(r->loop, r->host, r->port, r, on_connect,
                                                  on_disconnect, why, sizeof why);
    if (ac == NULL)
        set_error(r, "%s", why);
    return ac;
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    omld_replica *r = ac->data;
    if (r == NULL)
        return;
    if (status != REDIS_OK) {
        set_error(r, "cannot connect to Redis: %s", ac->errstr);
        if (ac == r->rd)
            r->rd = NULL;
        else
            r->cmd = NULL;
        return;
    }
    if (ac == r->rd)
        r->rd_up = 1;
    else
        r->cmd_up = 1;
    r->st.connected = r->rd_up && r->cmd_up;
    if (r->phase == PHASE_BOOT)
        bootstrap(r);
    else
        read_next(r);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    omld_replica *r = ac->data;
    if (r == NULL)
        return;
    if (ac == r->rd)
        r->rd = NULL, r->rd_up = 0;
    else
        r->cmd = NULL, r->cmd_up = 0;
    r->st.connected = 0;
    if (!r->stopping && status != REDIS_OK)
        set_error(r, "the Redis connection was lost: %s", ac->errstr);
}

static void on_tick(uv_timer_t *t)
{
    omld_replica *r = t->data;
    if (r->rd == NULL)
        r->rd = connect_one(r);
    if (r->cmd == NULL)
        r->cmd = connect_one(r);
    if (r->cmd_up) {
        const char *head[] = {"XREVRANGE", r->key_log, "+", "-", "COUNT", "1"};
        command(r, r->cmd, on_head, r, 6, head);
        char key[OMLD_REPL_PREFIX_MAX + 16];
        snprintf(key, sizeof key, "%s:primary", r->prefix);
        const char *prim[] = {"GET", key};
        command(r, r->cmd, on_primary, r, 2, prim);
        tell_shard(r);
    }
    if (r->phase == PHASE_BOOT)
        bootstrap(r);
    else if (!r->busy)
        read_next(r); /* after a lost connection or a refused read */
}

/* ------------------------------------------------------------ lifetime */

int omld_replica_start(omld_replica **out, uv_loop_t *loop, const omld_config *cfg,
                       omld_engine *engine, struct omld_server *server, const char *rpc_addr,
                       char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->replica_of[0] == '\0')
        return 0;
    omld_replica *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (omld_repl_parse_url("replica_of", cfg->replica_of, r->host, sizeof r->host, &r->port,
                            r->prefix, sizeof r->prefix, err, errlen) != 0) {
        free(r);
        return -1;
    }
    r->loop = loop;
    r->engine = engine;
    snprintf(r->key_log, sizeof r->key_log, "%s:log", r->prefix);
    snprintf(r->st.target, sizeof r->st.target, "%s", cfg->replica_of);
    r->st.role = OMLD_REPL_REPLICA;
    snprintf(r->shard, sizeof r->shard, "%s", cfg->shard);
    snprintf(r->rpc_addr, sizeof r->rpc_addr, "%s", rpc_addr);
    set_not_primary(r, NULL);
    omld_server_set_not_primary(server, r->not_primary);
    uv_timer_init(loop, &r->tick);
    r->tick.data = r;
    r->handles_open = 1;
    uv_timer_start(&r->tick, on_tick, 0, TICK_MS);
    *out = r;
    return 0;
}

void omld_replica_pause(omld_replica *r, int paused)
{
    r->paused = paused;
    if (!paused && r->phase == PHASE_BOOT)
        bootstrap(r);
    else if (!paused)
        read_next(r);
}

int omld_replica_idle(const omld_replica *r)
{
    return !r->busy && r->phase == PHASE_FOLLOW;
}

void omld_replica_stats_get(omld_replica *r, omld_repl_stats *out)
{
    if (r == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    r->st.lag_records = r->st.head_lsn > r->st.applied_lsn ? r->st.head_lsn - r->st.applied_lsn : 0;
    uint64_t now = omld_wall_ms(), since = r->last_t_ms ? r->last_t_ms : r->head_t_ms;
    r->st.lag_seconds = r->st.lag_records > 0 && now > since ? (double)(now - since) / 1000.0 : 0;
    *out = r->st;
}

static void on_closed(uv_handle_t *h)
{
    omld_replica *r = h->data;
    r->handles_open--;
    maybe_free(r);
}

void omld_replica_stop(omld_replica *r)
{
    if (r == NULL || r->stopping)
        return;
    r->stopping = 1;
    if (r->rd) {
        r->rd->data = NULL;
        redisAsyncFree(r->rd);
    }
    if (r->cmd) {
        r->cmd->data = NULL;
        redisAsyncFree(r->cmd);
    }
    uv_close((uv_handle_t *)&r->tick, on_closed);
}
