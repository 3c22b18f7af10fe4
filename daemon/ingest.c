/* ingest.c - a Redis Stream consumer that feeds the RPC path (ingest.h).
 *
 * DESIGN. Two hiredis async connections on the loop (hiredis's libuv
 * adapter): `rd` only reads fresh entries (XREADGROUP ... BLOCK holds its
 * connection) and `cmd` carries everything else (XGROUP, XACK, XADD to the
 * dead letters, XINFO, and the reads of pending entries, which so come
 * after the XACKs sent before them). Reading alternates two phases:
 * PENDING reads this consumer's entries that were delivered but never
 * XACKed (id 0, then after the last one seen), NEW reads fresh ones (">")
 * and goes back to PENDING every PENDING_EVERY_MS. A batch is read only
 * when the previous one is fully answered, so at most ingest_batch entries
 * are in flight and answers (which come in request order on the gateway
 * link) are XACKed in stream order. */
#include "ingest.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "ingest_entry.h"
#include "local.h"
#include "log.h"
#include "omld.pb-c.h"
#include "redis_uv.h"

#define RETRY_MS 1000
/* NEW reads go back to this consumer's pending entries at least this
 * often: an entry another process read under the same consumer name and
 * never XACKed (an old primary that came back, read, and found itself
 * superseded) would otherwise wait for the next reconnect. The entry's
 * idempotency key (ingest_entry.c) makes a second delivery harmless. */
#define PENDING_EVERY_MS 3000
#define INFO_MS 1000
#define BLOCK_MS "1000"
/* Field/value pairs of an entry kept for its dead letter: every field of
 * an item with the default 16 metadata entries, and some more. */
#define FIELDS_MAX 40

enum phase { PHASE_PENDING = 0, PHASE_NEW };

/* One entry sent to the daemon, waiting for its answer. */
typedef struct entry_call {
    struct entry_call *prev, *next;
    omld_ingest *g;
    char id[48];
    int nf;                        /* field/value strings kept for the dead letter */
    char *fv[2 * FIELDS_MAX];
    size_t fv_len[2 * FIELDS_MAX];
} entry_call;

struct omld_ingest {
    uv_loop_t *loop;
    struct omld_server *rpc;
    uint32_t max_frame;
    char host[256];
    int port;
    long long batch;
    redisAsyncContext *rd, *cmd;
    int rd_up, cmd_up, group_ready;
    omld_gateway_link *link;
    uv_timer_t retry_timer, info_timer;
    int timers_open;
    int stopping;
    int reading;                   /* an XREADGROUP is out */
    uint64_t pending_due_ms;       /* loop time of the next pass over the pending entries */
    int phase;
    char cursor[48];               /* PENDING: the last pending id handled */
    int outstanding;               /* entries sent, not answered */
    int need_retry;                /* a transient refusal in this batch */
    entry_call *calls;             /* in flight */
    omld_ingest_stats st;
};

/* ------------------------------------------------------------ helpers */

int omld_ingest_parse_url(const char *url, char *host, size_t host_cap, int *port, char *stream,
                          size_t stream_cap, char *err, size_t errlen)
{
    const char *p = url;
    if (strncmp(p, "redis://", 8) != 0) {
        snprintf(err, errlen, "ingest %s: expected redis://HOST:PORT/STREAM", url);
        return -1;
    }
    p += 8;
    const char *colon = strchr(p, ':'), *slash = colon ? strchr(colon, '/') : NULL;
    if (colon == NULL || slash == NULL || colon == p || (size_t)(colon - p) >= host_cap) {
        snprintf(err, errlen, "ingest %s: expected redis://HOST:PORT/STREAM", url);
        return -1;
    }
    char *end;
    long v = strtol(colon + 1, &end, 10);
    if (end != slash || v < 1 || v > 65535) {
        snprintf(err, errlen, "ingest %s: the port must be 1..65535", url);
        return -1;
    }
    size_t sl = strlen(slash + 1);
    if (sl == 0 || sl >= stream_cap || strpbrk(slash + 1, " \t\r\n") != NULL) {
        snprintf(err, errlen, "ingest %s: the stream name must be 1..%zu bytes, no spaces", url,
                 stream_cap - 1);
        return -1;
    }
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    *port = (int)v;
    memcpy(stream, slash + 1, sl + 1);
    return 0;
}

static void set_error(omld_ingest *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(omld_ingest *g, const char *fmt, ...)
{
    char text[sizeof g->st.last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (strcmp(text, g->st.last_error) != 0) /* once, not every second while Redis is away */
        LOG_WARN("ingest", "%s", text);
    memcpy(g->st.last_error, text, sizeof text);
}

static void command(omld_ingest *g, redisAsyncContext *ac, redisCallbackFn *fn, void *priv,
                    int argc, const char **argv, const size_t *len)
{
    if (ac && redisAsyncCommandArgv(ac, fn, priv, argc, argv, len) != REDIS_OK)
        set_error(g, "a Redis command could not be sent (%s)", argv[0]);
}

static void read_next(omld_ingest *g);
static void connect_both(omld_ingest *g);

static void on_retry(uv_timer_t *t)
{
    read_next(t->data);
}

/* ------------------------------------------------------------ entries */

static void on_cmd_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_ingest *g = priv;
    const redisReply *r = reply;
    if (r && r->type == REDIS_REPLY_ERROR && g && !g->stopping)
        set_error(g, "Redis: %s", r->str);
}

static void xack(omld_ingest *g, const char *id)
{
    const char *argv[] = {"XACK", g->st.stream, g->st.group, id};
    command(g, g->cmd, on_cmd_reply, g, 4, argv, NULL);
}

/* XADD to the dead letters: the source id, the refusal, the entry's fields. */
static void dead_letter(omld_ingest *g, const char *id, const char *code, const char *fieldpath,
                        const char *message, char *const *fv, const size_t *fv_len, int nf)
{
    const char *argv[8 + 2 * FIELDS_MAX + 4];
    size_t len[8 + 2 * FIELDS_MAX + 4];
    int n = 0;
    const char *head[] = {"XADD", g->st.dead_letter, "*", "source_id", id, "code", code,
                          "field", fieldpath, "message", message};
    for (size_t i = 0; i < sizeof head / sizeof *head; i++, n++) {
        argv[n] = head[i];
        len[n] = strlen(head[i]);
    }
    for (int i = 0; i < 2 * nf; i++, n++) {
        argv[n] = fv[i];
        len[n] = fv_len[i];
    }
    command(g, g->cmd, on_cmd_reply, g, n, argv, len);
    xack(g, id);
    g->st.entries_dead++;
}

static void call_free(entry_call *c)
{
    for (int i = 0; i < 2 * c->nf; i++)
        free(c->fv[i]);
    free(c);
}

static void batch_answered(omld_ingest *g)
{
    if (g->outstanding > 0 || g->stopping)
        return;
    if (g->need_retry) {
        g->need_retry = 0;
        g->phase = PHASE_PENDING;
        snprintf(g->cursor, sizeof g->cursor, "0");
        g->st.retries++;
        uv_timer_start(&g->retry_timer, on_retry, RETRY_MS, 0);
        return;
    }
    read_next(g);
}

/* Refusals that pass: the entry stays pending and is read again. NOT_PRIMARY
 * is one: a primary whose lease lapsed (Redis away) takes writes again once
 * it renews, and a dead-lettered entry would be XACKed without being learned. */
static int transient(int code)
{
    return code == OMLD__STATUS__CODE__UNAVAILABLE || code == OMLD__STATUS__CODE__NOT_PRIMARY ||
           code == OMLD__STATUS__CODE__RESOURCE_EXHAUSTED || code == OMLD__STATUS__CODE__INTERNAL;
}

static void on_answer(void *arg, const uint8_t *payload, size_t n)
{
    entry_call *c = arg;
    omld_ingest *g = c->g;
    if (c->prev)
        c->prev->next = c->next;
    else
        g->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    g->outstanding--;
    Omld__Response *r = payload ? omld__response__unpack(NULL, n, payload) : NULL;
    int code = r && r->status ? (int)r->status->code : OMLD__STATUS__CODE__UNAVAILABLE;
    if (code == OMLD__STATUS__CODE__OK) {
        xack(g, c->id);
        g->st.entries_learned++;
    } else if (transient(code)) {
        g->need_retry = 1; /* stays pending: read again after a second */
        set_error(g, "an entry was refused for now (%s); reading again from the pending ones",
                  r && r->status ? r->status->message : "the daemon connection closed");
    } else {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value(&omld__status__code__descriptor, code);
        dead_letter(g, c->id, ev ? ev->name : "?", r->status->field, r->status->message, c->fv,
                    c->fv_len, c->nf);
    }
    omld__response__free_unpacked(r, NULL);
    call_free(c);
    batch_answered(g);
}

/* One entry: to the daemon, or straight to the dead letters. */
static void handle_entry(omld_ingest *g, const redisReply *e)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 || e->element[0]->type != REDIS_REPLY_STRING)
        return;
    const char *id = e->element[0]->str;
    const redisReply *fv = e->element[1];
    g->st.entries_read++;
    if (g->phase == PHASE_PENDING)
        snprintf(g->cursor, sizeof g->cursor, "%s", id);
    if (fv->type != REDIS_REPLY_ARRAY) { /* a pending entry deleted from the stream */
        xack(g, id);
        return;
    }
    entry_call *c = calloc(1, sizeof *c);
    if (c == NULL) {
        g->need_retry = 1;
        return;
    }
    c->g = g;
    snprintf(c->id, sizeof c->id, "%s", id);
    for (size_t i = 0; i + 1 < fv->elements && c->nf < FIELDS_MAX; i += 2, c->nf++)
        for (int k = 0; k < 2; k++) {
            const redisReply *s = fv->element[i + (size_t)k];
            c->fv_len[2 * c->nf + k] = s->type == REDIS_REPLY_STRING ? s->len : 0;
            c->fv[2 * c->nf + k] = malloc(c->fv_len[2 * c->nf + k] + 1);
            if (c->fv[2 * c->nf + k])
                memcpy(c->fv[2 * c->nf + k], s->type == REDIS_REPLY_STRING ? s->str : "",
                       c->fv_len[2 * c->nf + k]);
            else
                c->fv_len[2 * c->nf + k] = 0, c->fv[2 * c->nf + k] = strdup("");
        }
    uint8_t *payload = NULL;
    size_t n = 0;
    char why[200];
    if (omld_ingest_entry_request(g->st.stream, id, fv, g->max_frame, &payload, &n, why,
                                  sizeof why) != 0) {
        dead_letter(g, id, "INVALID_ARGUMENT", "", why, c->fv, c->fv_len, c->nf);
        call_free(c);
        return;
    }
    if (!omld_gateway_usable(g->link)) {
        omld_gateway_close(g->link);
        g->link = NULL;
        if (omld_gateway_open(&g->link, g->loop, g->rpc, OMLD_RIGHTS_READ_WRITE, g->max_frame) != 0)
            g->link = NULL;
    }
    if (g->link == NULL || omld_gateway_call(g->link, payload, n, on_answer, c) != 0) {
        free(payload);
        call_free(c);
        g->need_retry = 1;
        return;
    }
    free(payload);
    c->next = g->calls;
    if (g->calls)
        g->calls->prev = c;
    g->calls = c;
    g->outstanding++;
}

/* ------------------------------------------------------------ reading */

static void on_read(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_ingest *g = priv;
    g->reading = 0;
    const redisReply *r = reply;
    if (r == NULL || g->stopping)
        return; /* disconnected: the reconnect reads again */
    if (r->type == REDIS_REPLY_ERROR) {
        set_error(g, "XREADGROUP: %s", r->str);
        if (strncmp(r->str, "NOGROUP", 7) == 0)
            g->group_ready = 0, connect_both(g); /* the stream or group was deleted */
        g->need_retry = 1;
        batch_answered(g);
        return;
    }
    const redisReply *entries = NULL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements == 2)
        entries = r->element[0]->element[1];
    if (entries == NULL || entries->type != REDIS_REPLY_ARRAY || entries->elements == 0) {
        if (g->phase == PHASE_PENDING) /* no pending entries left: fresh ones now */
            g->phase = PHASE_NEW;
        read_next(g);
        return;
    }
    for (size_t i = 0; i < entries->elements; i++)
        handle_entry(g, entries->element[i]);
    batch_answered(g);
}

static void read_next(omld_ingest *g)
{
    if (g->stopping || !g->rd_up || !g->cmd_up || !g->group_ready || g->reading ||
        g->outstanding > 0)
        return;
    uint64_t now = uv_now(g->loop);
    if (g->phase == PHASE_PENDING) {
        g->pending_due_ms = now + PENDING_EVERY_MS;
    } else if (now >= g->pending_due_ms) {
        g->phase = PHASE_PENDING;
        snprintf(g->cursor, sizeof g->cursor, "0");
        g->pending_due_ms = now + PENDING_EVERY_MS;
    }
    char count[24];
    snprintf(count, sizeof count, "%lld", g->batch);
    const char *argv[12] = {"XREADGROUP", "GROUP", g->st.group, g->st.consumer, "COUNT", count};
    int n = 6;
    if (g->phase == PHASE_NEW) {
        argv[n++] = "BLOCK";
        argv[n++] = BLOCK_MS;
    }
    argv[n++] = "STREAMS";
    argv[n++] = g->st.stream;
    argv[n++] = g->phase == PHASE_NEW ? ">" : g->cursor;
    g->reading = 1;
    /* A pending read goes after the XACKs on their connection, so an entry
     * just answered is never handed over again; only NEW reads block. */
    command(g, g->phase == PHASE_NEW ? g->rd : g->cmd, on_read, g, n, argv, NULL);
}

/* ------------------------------------------------------------ connections */

static void on_group(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_ingest *g = priv;
    const redisReply *r = reply;
    if (r == NULL || g->stopping)
        return;
    if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSYGROUP", 9) != 0) {
        set_error(g, "XGROUP CREATE: %s", r->str);
        return;
    }
    g->group_ready = 1;
    g->phase = PHASE_PENDING; /* first what was delivered before and never XACKed */
    snprintf(g->cursor, sizeof g->cursor, "0");
    LOG_INFO("ingest", "reading redis stream %s as %s of group %s", g->st.stream, g->st.consumer,
             g->st.group);
    g->st.last_error[0] = '\0';
    read_next(g);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    omld_ingest *g = ac->data;
    if (g == NULL)
        return;
    if (status != REDIS_OK) {
        set_error(g, "cannot connect to Redis: %s", ac->errstr);
        if (ac == g->rd)
            g->rd = NULL;
        else
            g->cmd = NULL;
        return; /* hiredis frees the context; the retry timer reconnects */
    }
    if (ac == g->rd)
        g->rd_up = 1;
    else
        g->cmd_up = 1;
    g->st.connected = g->rd_up && g->cmd_up;
    if (ac == g->cmd) {
        /* From the stream's first entry: what was written before omld came is ingested. */
        const char *argv[] = {"XGROUP", "CREATE", g->st.stream, g->st.group, "0", "MKSTREAM"};
        command(g, g->cmd, on_group, g, 6, argv, NULL);
    }
    read_next(g);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    omld_ingest *g = ac->data;
    if (g == NULL)
        return;
    if (ac == g->rd)
        g->rd = NULL, g->rd_up = 0, g->reading = 0;
    else
        g->cmd = NULL, g->cmd_up = 0, g->group_ready = 0;
    g->st.connected = 0;
    if (!g->stopping && status != REDIS_OK)
        set_error(g, "the Redis connection was lost: %s", ac->errstr);
}

static redisAsyncContext *connect_one(omld_ingest *g)
{
    char why[sizeof g->st.last_error];
    redisAsyncContext *ac = omld_redis_uv_connect(g->loop, g->host, g->port, g, on_connect,
                                                  on_disconnect, why, sizeof why);
    if (ac == NULL)
        set_error(g, "%s", why);
    return ac;
}

static void connect_both(omld_ingest *g)
{
    if (g->stopping)
        return;
    if (g->rd == NULL)
        g->rd = connect_one(g);
    if (g->cmd == NULL)
        g->cmd = connect_one(g);
    else if (g->cmd_up && !g->group_ready) {
        const char *argv[] = {"XGROUP", "CREATE", g->st.stream, g->st.group, "0", "MKSTREAM"};
        command(g, g->cmd, on_group, g, 6, argv, NULL);
    }
}

/* XINFO GROUPS: the group's pending entries and lag. */
static void on_info(redisAsyncContext *ac, void *reply, void *priv)
{
    (void)ac;
    omld_ingest *g = priv;
    const redisReply *r = reply;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *grp = r->element[i];
        if (grp->type != REDIS_REPLY_ARRAY)
            continue;
        const char *name = omld_ingest_field_str(grp, "name");
        if (name == NULL || strcmp(name, g->st.group) != 0)
            continue;
        g->st.pending = -1;
        g->st.lag = -1;
        for (size_t k = 0; k + 1 < grp->elements; k += 2) {
            const redisReply *key = grp->element[k], *v = grp->element[k + 1];
            if (key->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_INTEGER)
                continue;
            if (strcmp(key->str, "pending") == 0)
                g->st.pending = v->integer;
            else if (strcmp(key->str, "lag") == 0)
                g->st.lag = v->integer;
        }
    }
}

static void on_info_timer(uv_timer_t *t)
{
    omld_ingest *g = t->data;
    /* Reconnect, every second while Redis is away; and ask for the group
     * again while it is not there: a Redis loading its AOF after a restart
     * refuses XGROUP CREATE (LOADING) on a connection that stays up. */
    if (g->rd == NULL || g->cmd == NULL || (g->cmd_up && !g->group_ready))
        connect_both(g);
    if (g->cmd_up) {
        const char *argv[] = {"XINFO", "GROUPS", g->st.stream};
        command(g, g->cmd, on_info, g, 3, argv, NULL);
    }
    if (!g->reading && g->outstanding == 0 && !uv_is_active((uv_handle_t *)&g->retry_timer))
        read_next(g);
}

/* ------------------------------------------------------------ lifetime */

int omld_ingest_start(omld_ingest **out, uv_loop_t *loop, const omld_config *cfg,
                      struct omld_server *rpc, char *err, size_t errlen)
{
    *out = NULL;
    if (cfg->ingest[0] == '\0')
        return 0;
    omld_ingest *g = calloc(1, sizeof *g);
    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (omld_ingest_parse_url(cfg->ingest, g->host, sizeof g->host, &g->port, g->st.stream,
                              sizeof g->st.stream, err, errlen) != 0) {
        free(g);
        return -1;
    }
    g->loop = loop;
    g->rpc = rpc;
    g->max_frame = (uint32_t)cfg->max_frame_bytes;
    g->batch = cfg->ingest_batch;
    g->st.configured = 1;
    g->st.pending = g->st.lag = -1;
    snprintf(g->st.group, sizeof g->st.group, "%.63s", cfg->ingest_group);
    snprintf(g->st.consumer, sizeof g->st.consumer, "%.63s", cfg->ingest_consumer);
    if (cfg->ingest_dead_letter[0])
        snprintf(g->st.dead_letter, sizeof g->st.dead_letter, "%.159s", cfg->ingest_dead_letter);
    else
        snprintf(g->st.dead_letter, sizeof g->st.dead_letter, "%.120s:dead", g->st.stream);
    uv_timer_init(loop, &g->retry_timer);
    uv_timer_init(loop, &g->info_timer);
    g->retry_timer.data = g->info_timer.data = g;
    g->timers_open = 2;
    uv_timer_start(&g->info_timer, on_info_timer, INFO_MS, INFO_MS);
    connect_both(g);
    *out = g;
    return 0;
}

void omld_ingest_stats_get(const omld_ingest *g, omld_ingest_stats *out)
{
    if (g == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = g->st;
}

static void on_timer_closed(uv_handle_t *h)
{
    omld_ingest *g = h->data;
    if (--g->timers_open == 0)
        free(g);
}

void omld_ingest_stop(omld_ingest *g)
{
    if (g == NULL || g->stopping)
        return;
    g->stopping = 1;
    omld_gateway_close(g->link); /* answers not come yet: their entries stay pending */
    while (g->calls) {
        entry_call *c = g->calls;
        g->calls = c->next;
        call_free(c);
    }
    /* The contexts must not call back into g once it is freed. */
    if (g->rd) {
        g->rd->data = NULL;
        redisAsyncFree(g->rd);
    }
    if (g->cmd) {
        g->cmd->data = NULL;
        redisAsyncFree(g->cmd);
    }
    uv_close((uv_handle_t *)&g->retry_timer, on_timer_closed);
    uv_close((uv_handle_t *)&g->info_timer, on_timer_closed);
}
