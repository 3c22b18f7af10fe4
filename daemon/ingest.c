/* ingest.c - a Redis Stream consumer that feeds the RPC path (ingest.h).
 *
 * DESIGN. Two hiredis async connections on the loop (hiredis's libuv
 * adapter): `rd` only reads (XREADGROUP ... BLOCK holds its connection) and
 * `cmd` carries everything else (XGROUP, XACK, XADD to the dead letters,
 * XINFO). Reading alternates two phases: PENDING reads this consumer's
 * entries that were delivered but never XACKed (id 0, then after the last
 * one seen), NEW reads fresh ones (">"). A batch is read only when the
 * previous one is fully answered, so at most ingest_batch entries are in
 * flight and answers (which come in request order on the gateway link) are
 * XACKed in stream order. */
#include "ingest.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "local.h"
#include "log.h"
#include "omld.pb-c.h"
#include "redis_uv.h"

#define RETRY_MS 1000
#define INFO_MS 1000
#define BLOCK_MS "1000"
#define FIELDS_MAX 16

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

/* The value of field name among the entry's field/value pairs, or NULL. */
static const redisReply *field(const redisReply *fv, const char *name)
{
    for (size_t i = 0; fv && i + 1 < fv->elements; i += 2)
        if (fv->element[i]->type == REDIS_REPLY_STRING && strcmp(fv->element[i]->str, name) == 0 &&
            fv->element[i + 1]->type == REDIS_REPLY_STRING)
            return fv->element[i + 1];
    return NULL;
}

static char *field_str(const redisReply *fv, const char *name)
{
    const redisReply *v = field(fv, name);
    return v ? v->str : NULL;
}

/* The item's features: `features` as a JSON array, or `features_f32` as
 * little-endian float32 bytes. NULL with why filled. */
static float *item_features(const redisReply *fv, size_t *n, char *why, size_t whylen)
{
    const redisReply *f32 = field(fv, "features_f32"), *js = field(fv, "features");
    if (f32) {
        if (f32->len == 0 || f32->len % 4 != 0) {
            snprintf(why, whylen, "features_f32 has %zu bytes, not a multiple of 4", f32->len);
            return NULL;
        }
        float *x = malloc(f32->len);
        if (x)
            memcpy(x, f32->str, f32->len); /* little-endian hosts only, as the WAL */
        *n = f32->len / 4;
        return x;
    }
    if (js == NULL) {
        snprintf(why, whylen, "an item needs features (a JSON array) or features_f32");
        return NULL;
    }
    json_error_t je;
    json_t *a = json_loadb(js->str, js->len, 0, &je);
    if (!json_is_array(a)) {
        snprintf(why, whylen, "features is not a JSON array of numbers");
        json_decref(a);
        return NULL;
    }
    *n = json_array_size(a);
    float *x = malloc((*n ? *n : 1) * sizeof *x);
    for (size_t i = 0; x && i < *n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v)) {
            snprintf(why, whylen, "features[%zu] is not a number", i);
            free(x);
            x = NULL;
            break;
        }
        x[i] = (float)json_number_value(v);
    }
    json_decref(a);
    return x;
}

/* refs[i].id = the entry's field names[i] for i < n (a `kind` needs them
 * all); 0, or -1 with why naming the missing one. */
static int take_ids(const redisReply *fv, const char *const *names, int n, const char *kind,
                    Omld__ItemRef *refs, char *why, size_t whylen)
{
    for (int i = 0; i < n; i++)
        if ((refs[i].id = field_str(fv, names[i])) == NULL) {
            snprintf(why, whylen, "a %s needs %s (an id)", kind, names[i]);
            return -1;
        }
    return 0;
}

/* The entry as a Request payload (*out, malloc'd), with its idempotency
 * key; 0, or -1 with why filled (the entry is dead-lettered). */
static int entry_request(const omld_ingest *g, const char *id, const redisReply *fv, uint8_t **out,
                         size_t *out_len, char *why, size_t whylen)
{
    char key[256];
    snprintf(key, sizeof key, "redis:%s:%s", g->st.stream, id);
    const char *type = field_str(fv, "type");
    Omld__Request req = OMLD__REQUEST__INIT;
    Omld__ItemRef refs[3];
    Omld__ItemRef *rp[3];
    for (int i = 0; i < 3; i++) {
        omld__item_ref__init(&refs[i]);
        refs[i].ref_case = OMLD__ITEM_REF__REF_ID;
        rp[i] = &refs[i];
    }
    Omld__Triplet t = OMLD__TRIPLET__INIT, *tp = &t;
    Omld__AddTripletsRequest at = OMLD__ADD_TRIPLETS_REQUEST__INIT;
    Omld__Pair pr = OMLD__PAIR__INIT, *pp = &pr;
    Omld__AddPairsRequest ap = OMLD__ADD_PAIRS_REQUEST__INIT;
    Omld__Item it = OMLD__ITEM__INIT, *ip = &it;
    Omld__PutItemsRequest pi = OMLD__PUT_ITEMS_REQUEST__INIT;
    float *x = NULL;
    static const char *const tnames[3] = {"anchor", "positive", "negative"};
    static const char *const pnames[2] = {"a", "b"};
    if (type && strcmp(type, "triplet") == 0) {
        if (take_ids(fv, tnames, 3, "triplet", refs, why, whylen) != 0)
            return -1;
        t.anchor = rp[0], t.positive = rp[1], t.negative = rp[2];
        const char *w = field_str(fv, "weight"); /* optional; the daemon checks its range */
        if (w != NULL) {
            char *end = NULL;
            t.weight = strtof(w, &end);
            t.weight_opt_case = OMLD__TRIPLET__WEIGHT_OPT_WEIGHT;
            if (end == w || *end != '\0') {
                snprintf(why, whylen, "a triplet's weight must be a number");
                return -1;
            }
        }
        at.n_triplets = 1;
        at.triplets = &tp;
        at.idempotency_key = key;
        req.body_case = OMLD__REQUEST__BODY_ADD_TRIPLETS;
        req.add_triplets = &at;
    } else if (type && strcmp(type, "pair") == 0) {
        if (take_ids(fv, pnames, 2, "pair", refs, why, whylen) != 0)
            return -1;
        const char *rel = field_str(fv, "relation");
        if (rel == NULL || (strcmp(rel, "similar") != 0 && strcmp(rel, "dissimilar") != 0)) {
            snprintf(why, whylen, "a pair needs relation: similar or dissimilar");
            return -1;
        }
        pr.a = rp[0], pr.b = rp[1];
        pr.relation = rel[0] == 's' ? OMLD__PAIR__RELATION__SIMILAR : OMLD__PAIR__RELATION__DISSIMILAR;
        ap.n_pairs = 1;
        ap.pairs = &pp;
        ap.idempotency_key = key;
        req.body_case = OMLD__REQUEST__BODY_ADD_PAIRS;
        req.add_pairs = &ap;
    } else if (type && strcmp(type, "item") == 0) {
        if ((it.id = field_str(fv, "id")) == NULL) {
            snprintf(why, whylen, "an item needs id");
            return -1;
        }
        if ((x = item_features(fv, &it.n_features, why, whylen)) == NULL)
            return -1;
        it.features = x;
        if ((it.label = field_str(fv, "label")) != NULL)
            it.label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
        pi.n_items = 1;
        pi.items = &ip;
        pi.idempotency_key = key;
        req.body_case = OMLD__REQUEST__BODY_PUT_ITEMS;
        req.put_items = &pi;
    } else {
        snprintf(why, whylen, "type must be triplet, pair or item");
        return -1;
    }
    *out_len = omld__request__get_packed_size(&req);
    *out = *out_len <= g->max_frame ? malloc(*out_len ? *out_len : 1) : NULL;
    if (*out)
        omld__request__pack(&req, *out);
    else
        snprintf(why, whylen, "the entry is larger than max_frame_bytes once packed");
    free(x);
    return *out ? 0 : -1;
}

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

static int transient(int code)
{
    return code == OMLD__STATUS__CODE__UNAVAILABLE ||
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
    if (entry_request(g, id, fv, &payload, &n, why, sizeof why) != 0) {
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
    command(g, g->rd, on_read, g, n, argv, NULL);
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
    redisAsyncContext *ac = redisAsyncConnect(g->host, g->port);
    if (ac == NULL)
        return NULL;
    if (ac->err) {
        set_error(g, "cannot connect to Redis: %s", ac->errstr);
        redisAsyncFree(ac);
        return NULL;
    }
    ac->data = g;
    if (omld_redis_uv_attach(ac, g->loop) != REDIS_OK) {
        set_error(g, "cannot watch the Redis connection (%s)", "uv_poll_init");
        ac->data = NULL;
        redisAsyncFree(ac);
        return NULL;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
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
        const char *name = field_str(grp, "name");
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
    if (g->rd == NULL || g->cmd == NULL)
        connect_both(g); /* reconnect, every second while Redis is away */
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
