/* replicate.c - a primary's publisher for read replicas (replicate.h).
 *
 * DESIGN. Two lists under one mutex: `open` holds what the learner handed
 * over since its last commit (uncommitted records), `ready` what may go to
 * Redis, in log order. A commit moves open to ready and wakes the loop
 * (uv_async); a discard frees open. View markers and checkpoints go to
 * ready directly: the learner hands them over only after the commit that
 * holds their position. The loop sends ready in order on one hiredis
 * connection (one connection: Redis applies them in the order sent), at
 * most MAX_INFLIGHT unanswered, so hiredis's own buffer stays bounded too;
 * beyond that, or with Redis away, records are dropped and counted.
 *
 * The lease (lease.h; replicate_lease_ms > 0): taken first on every
 * connection, before anything is sent, and renewed every fifth of its
 * time. Until a take succeeded, and from (the send time of the last
 * successful renewal + 4/5 of the lease time) on, nothing is sent and the
 * learner writes nothing (omld_replicate_may_write): Redis lets the lease
 * expire a fifth of its time later at the earliest, when a replica may be
 * promoted. Every command that writes is fenced by the lease, so Redis
 * itself refuses what a deposed primary still had in flight.
 *
 * Acknowledged by Redis (replicate_sync): the position up to which every
 * record is in Redis, in the stream (a run of entries acknowledged without
 * a gap) or in a checkpoint stored there; the run counts from a
 * checkpoint only once that checkpoint is acknowledged, whichever answer
 * comes first (a checkpoint is read off the loop while entries go on). */
#include "replicate.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bytes.h"
#include "lease.h"
#include "log.h"
#include "metrics.h"
#include "redis_uv.h"

#define TICK_MS 1000
#define MAX_INFLIGHT 20000
#define REDIS_BULK_MAX (512ull << 20) /* Redis's largest string (proto-max-bulk-len) */

enum { ITEM_RECORD = 0, ITEM_VERSION, ITEM_CHECKPOINT, ITEM_OTHER };
#define ENTRY_BYTES (1u << 20) /* records packed into one stream entry, at most (about) */

typedef struct item {
    struct item *next;
    int kind;
    uint8_t type;
    uint64_t lsn, version, t_ms;
    size_t len;
    uint8_t data[]; /* a record's payload, a checkpoint's path */
} item;

typedef struct item_list {
    item *head, *tail;
    uint64_t bytes;
} item_list;

/* A checkpoint file being read off the loop. */
typedef struct ckpt_read {
    uv_work_t work;
    omld_replicate *r;
    uint64_t lsn;
    char path[600];
    uint8_t *buf;
    size_t len;
    char why[800];
} ckpt_read;

struct omld_replicate {
    uv_loop_t *loop;
    char host[256];
    int port;
    char prefix[OMLD_REPL_PREFIX_MAX];
    char key_log[OMLD_REPL_PREFIX_MAX + 16];
    char maxlen[24];
    uint64_t cap_bytes;
    char rpc_addr[128];
    redisAsyncContext *ac;
    int up;
    int inflight;
    uv_async_t async;
    uv_timer_t tick;
    uv_timer_t flush;             /* drains ready after the answers (on_async) */
    int handles_open;
    int stopping;
    ckpt_read *reading;           /* a checkpoint file being read (one at a time) */
    item *ckpt_next;              /* the newest checkpoint waiting for that read */

    pthread_mutex_t mu;           /* guards open, ready, dropped_pending */
    item_list open, ready;
    uint64_t dropped_pending;     /* records the learner's side dropped (queue full) */
    atomic_int ckpt_wanted;       /* omld_replicate_checkpoint_wanted */
    int lost_since_ckpt;          /* loop: records dropped since the learner was last asked */
    char last_ckpt[600];          /* the newest checkpoint, sent again after a reconnect */
    uint64_t last_ckpt_lsn;

    /* the lease (lease.h): loop thread, but lease_until_ns (any thread) */
    int64_t lease_ms;             /* 0: no lease */
    char node_id[OMLD_NODE_ID_LEN + 1];
    omld_lease_keys keys;
    uv_timer_t lease_timer;
    int lease_held;               /* the last take succeeded (and nothing refused it since) */
    int lease_pending;            /* a take is unanswered */
    int lease_ever;               /* it was held once (start: ready) */
    atomic_uint_fast64_t lease_until_ns; /* writes allowed before this (monotonic clock) */
    omld_replicate_lease_fn lease_cb;
    void *lease_arg;
    char lease_why[1024];          /* guarded by mu: why writes are refused ("" held) */
    /* replicate_sync: the run of records Redis acknowledged in order since
     * the last gap (run_first 0: since LSN 1), and the newest checkpoint it
     * acknowledged; omld_replicate_synced_lsn joins them */
    uint64_t run_first, run_last, ckpt_synced;
    /* The newest view marker, and whether Redis lacks it: replicas that
     * applied everything in the stream wait for an entry past it forever
     * when the primary goes quiet, so it is sent again after a checkpoint */
    uint64_t mark_version, mark_lsn, mark_t_ms;
    int mark_lost;

    omld_repl_stats st;           /* loop thread */
};

/* What one command sent carries, for its answer. */
typedef struct sent {
    int kind;
    uint64_t n, first, last;      /* records: how many, their LSNs; checkpoint: last */
} sent;

static int lease_ok(omld_replicate *r);

static void set_error(omld_replicate *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(omld_replicate *r, const char *fmt, ...)
{
    char text[sizeof r->st.last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (strcmp(text, r->st.last_error) != 0) /* once, not every second while Redis is away */
        LOG_WARN("replicate", "%s", text);
    memcpy(r->st.last_error, text, sizeof text);
}

static item *item_new(int kind, size_t len)
{
    item *it = malloc(sizeof *it + len + 1);
    if (it) {
        memset(it, 0, sizeof *it);
        it->kind = kind;
        it->len = len;
        it->t_ms = omld_wall_ms();
    }
    return it;
}

static void list_push(item_list *l, item *it)
{
    it->next = NULL;
    if (l->tail)
        l->tail->next = it;
    else
        l->head = it;
    l->tail = it;
    l->bytes += it->len;
}

static uint64_t list_free(item_list *l)
{
    uint64_t n = 0;
    for (item *it = l->head, *next; it; it = next) {
        next = it->next;
        n += it->kind == ITEM_RECORD;
        free(it);
    }
    *l = (item_list){NULL, NULL, 0};
    return n;
}

/* ------------------------------------------------------------ learner thread */

void omld_replicate_record(omld_replicate *r, uint8_t type, uint64_t lsn, const void *payload,
                           size_t len)
{
    if (r == NULL)
        return;
    item *it = item_new(ITEM_RECORD, len);
    pthread_mutex_lock(&r->mu);
    if (it == NULL || r->ready.bytes + r->open.bytes + len > r->cap_bytes) {
        r->dropped_pending++; /* a replica sees the gap and bootstraps again */
        free(it);
    } else {
        it->type = type;
        it->lsn = lsn;
        memcpy(it->data, payload, len);
        list_push(&r->open, it);
    }
    pthread_mutex_unlock(&r->mu);
}

void omld_replicate_commit(omld_replicate *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    int any = r->open.head != NULL;
    for (item *it = r->open.head, *next; it; it = next) {
        next = it->next;
        it->t_ms = omld_wall_ms();
        list_push(&r->ready, it);
    }
    r->open = (item_list){NULL, NULL, 0};
    pthread_mutex_unlock(&r->mu);
    if (any)
        uv_async_send(&r->async);
}

void omld_replicate_discard(omld_replicate *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    list_free(&r->open);
    pthread_mutex_unlock(&r->mu);
}

static void push_ready(omld_replicate *r, item *it)
{
    pthread_mutex_lock(&r->mu);
    list_push(&r->ready, it);
    pthread_mutex_unlock(&r->mu);
    uv_async_send(&r->async);
}

void omld_replicate_version(omld_replicate *r, uint64_t version, uint64_t lsn)
{
    item *it = r ? item_new(ITEM_VERSION, 0) : NULL;
    if (it == NULL)
        return;
    it->version = version;
    it->lsn = lsn;
    push_ready(r, it);
}

int omld_replicate_checkpoint_wanted(omld_replicate *r)
{
    return r && atomic_exchange(&r->ckpt_wanted, 0);
}

int omld_replicate_checkpoint_due(omld_replicate *r)
{
    return r && atomic_load(&r->ckpt_wanted);
}

void omld_replicate_checkpoint(omld_replicate *r, const char *path, uint64_t lsn)
{
    size_t n = path ? strlen(path) : 0;
    item *it = r && n ? item_new(ITEM_CHECKPOINT, n) : NULL;
    if (it == NULL)
        return;
    memcpy(it->data, path, n + 1);
    it->lsn = lsn;
    it->len = 0; /* not queue bytes */
    push_ready(r, it);
}

/* ------------------------------------------------------------ loop: sending */

/* n committed records will never reach Redis: replicas need a checkpoint
 * past them, asked of the learner once Redis can take it (while it is
 * away, one would be written for nothing, again and again). */
static void dropped(omld_replicate *r, uint64_t n)
{
    r->st.records_dropped += n;
    r->lost_since_ckpt = 1;
}

static void send_mark(omld_replicate *r, uint64_t version, uint64_t lsn, uint64_t t_ms);

/* The newest view marker will not reach Redis: a checkpoint is wanted as
 * for dropped records, and the marker goes again once it is stored. */
static void mark_dropped(omld_replicate *r)
{
    r->mark_lost = 1;
    r->lost_since_ckpt = 1;
}

static void want_checkpoint(omld_replicate *r)
{
    if (r->lost_since_ckpt && r->up) {
        r->lost_since_ckpt = 0;
        atomic_store(&r->ckpt_wanted, 1);
    }
}

static void on_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    omld_replicate *r = ac->data;
    const redisReply *rep = reply;
    sent *what = priv;
    int kind = what ? what->kind : ITEM_OTHER;
    uint64_t n = what ? what->n : 0; /* records in the entry */
    if (r == NULL) {
        free(what);
        return;
    }
    r->inflight--;
    if (rep == NULL || rep->type == REDIS_REPLY_ERROR) { /* the link went, or Redis refused */
        if (rep)
            set_error(r, "Redis refused a %s: %s",
                      kind == ITEM_CHECKPOINT ? "checkpoint" : "log entry", rep->str);
        if (kind == ITEM_RECORD)
            dropped(r, n);
        if (kind == ITEM_VERSION && what->last == r->mark_lsn)
            mark_dropped(r);
        free(what);
        return;
    }
    if (kind == ITEM_RECORD) {
        r->st.records_published += n;
        if (what->first != r->run_last + 1) /* a gap before it: a new run */
            r->run_first = what->first;
        r->run_last = what->last;
    } else if (kind == ITEM_VERSION) {
        r->st.versions_published++;
    } else if (kind == ITEM_CHECKPOINT) {
        r->st.checkpoints_published++;
        if (what->last > r->ckpt_synced)
            r->ckpt_synced = what->last;
        /* The newest view's marker again, if Redis lacks it and nothing was
         * published past it (a marker's id must be above the stream's top):
         * a replica at its position publishes it, one before it finds the
         * hole and bootstraps from this checkpoint. */
        if (r->mark_lost && r->mark_lsn <= what->last && r->run_last <= r->mark_lsn) {
            r->mark_lost = 0;
            send_mark(r, r->mark_version, r->mark_lsn, r->mark_t_ms);
        }
    }
    free(what);
}

/* n: the records an entry carries, first..last their LSNs (ITEM_RECORD);
 * last: a checkpoint's or a view marker's position. Fenced by the lease
 * when there is one. */
static void send_cmd(omld_replicate *r, int kind, uint64_t n, uint64_t first, uint64_t last,
                     int argc, const char **argv, const size_t *len)
{
    sent *what = malloc(sizeof *what);
    if (what == NULL) {
        if (kind == ITEM_RECORD)
            dropped(r, n);
        if (kind == ITEM_VERSION)
            mark_dropped(r);
        return;
    }
    *what = (sent){kind, n, first, last};
    const char *fa[16];
    size_t fl[16];
    if (r->lease_ms > 0 && argc <= 11) {
        argc = omld_lease_fence_argv(&r->keys, r->node_id, argc, argv, len, fa, fl);
        argv = fa;
        len = fl;
    }
    if (redisAsyncCommandArgv(r->ac, on_reply, what, argc, argv, len) == REDIS_OK) {
        r->inflight++;
    } else {
        free(what);
        if (kind == ITEM_RECORD)
            dropped(r, n);
        if (kind == ITEM_VERSION)
            mark_dropped(r);
    }
}

/* Consecutive records go out as one entry (replication.h): the busier the
 * learner, the fewer commands per record Redis and the loop handle. */
typedef struct packer {
    uint8_t *buf;
    size_t len, cap;
    uint64_t n, first_lsn, last_lsn, t_ms;
} packer;

static void pack_flush(omld_replicate *r, packer *pk)
{
    if (pk->n == 0)
        return;
    char id[48], t[24];
    snprintf(id, sizeof id, "%" PRIu64 "-0", pk->last_lsn);
    snprintf(t, sizeof t, "%" PRIu64, pk->t_ms);
    const char *argv[] = {"XADD", r->key_log, "MAXLEN", "~", r->maxlen, id, "t", t, "r",
                          (const char *)pk->buf};
    size_t len[10];
    for (int i = 0; i < 9; i++)
        len[i] = strlen(argv[i]);
    len[9] = pk->len;
    send_cmd(r, ITEM_RECORD, pk->n, pk->first_lsn, pk->last_lsn, 10, argv, len);
    pk->len = 0;
    pk->n = 0;
}

static void pack_record(omld_replicate *r, packer *pk, const item *it)
{
    size_t need = pk->len + OMLD_REPL_RECORD_HEADER + it->len;
    if (need > pk->cap) {
        size_t cap = need > 2 * pk->cap ? need : 2 * pk->cap;
        uint8_t *b = realloc(pk->buf, cap);
        if (b == NULL) {
            dropped(r, 1);
            return;
        }
        pk->buf = b;
        pk->cap = cap;
    }
    uint8_t *p = pk->buf + pk->len;
    oml_le64_store(p, it->lsn);
    p[8] = it->type;
    oml_le32_store(p + 9, (uint32_t)it->len);
    memcpy(p + OMLD_REPL_RECORD_HEADER, it->data, it->len);
    pk->len = need;
    if (pk->n++ == 0)
        pk->first_lsn = it->lsn;
    pk->last_lsn = it->lsn;
    pk->t_ms = it->t_ms;
    if (pk->len >= ENTRY_BYTES)
        pack_flush(r, pk);
}

/* A view marker: the view `version` published after record lsn. */
static void send_mark(omld_replicate *r, uint64_t version, uint64_t lsn, uint64_t t_ms)
{
    char id[48], v[24], t[24];
    snprintf(id, sizeof id, "%" PRIu64 "-*", lsn); /* after the record, Redis numbers it */
    snprintf(v, sizeof v, "%" PRIu64, version);
    snprintf(t, sizeof t, "%" PRIu64, t_ms);
    const char *argv[] = {"XADD", r->key_log, "MAXLEN", "~", r->maxlen, id, "v", v, "t", t};
    send_cmd(r, ITEM_VERSION, 0, 0, lsn, 10, argv, NULL);
}

static void send_version(omld_replicate *r, const item *it)
{
    send_mark(r, it->version, it->lsn, it->t_ms);
}

static void read_checkpoint(uv_work_t *w)
{
    ckpt_read *c = w->data;
    int fd = open(c->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(c->why, sizeof c->why, "cannot read checkpoint %s: %s", c->path, strerror(errno));
    } else if ((uint64_t)st.st_size > REDIS_BULK_MAX) {
        snprintf(c->why, sizeof c->why, "checkpoint %s is %lld bytes, over Redis's 512 MB "
                 "value limit: not published (replicas cannot bootstrap from it)", c->path,
                 (long long)st.st_size);
    } else if ((c->buf = malloc((size_t)st.st_size + 1)) == NULL) {
        snprintf(c->why, sizeof c->why, "out of memory reading checkpoint %s", c->path);
    } else {
        size_t got = 0;
        ssize_t n = 1;
        while (got < (size_t)st.st_size && (n = read(fd, c->buf + got, (size_t)st.st_size - got)) > 0)
            got += (size_t)n;
        c->len = got;
        if (got != (size_t)st.st_size) {
            snprintf(c->why, sizeof c->why, "short read of checkpoint %s", c->path);
            free(c->buf);
            c->buf = NULL;
        }
    }
    if (fd >= 0)
        close(fd);
}

static void start_checkpoint_read(omld_replicate *r);

static void checkpoint_read_done(uv_work_t *w, int status)
{
    ckpt_read *c = w->data;
    omld_replicate *r = c->r;
    r->reading = NULL;
    if (status == 0 && c->buf && r->up && !r->stopping && lease_ok(r)) {
        char lsn[24], key_ck[OMLD_REPL_PREFIX_MAX + 16], key_lsn[OMLD_REPL_PREFIX_MAX + 16];
        snprintf(lsn, sizeof lsn, "%" PRIu64, c->lsn);
        snprintf(key_ck, sizeof key_ck, "%s:checkpoint", r->prefix);
        snprintf(key_lsn, sizeof key_lsn, "%s:checkpoint_lsn", r->prefix);
        const char *argv[] = {"MSET", key_ck, (const char *)c->buf, key_lsn, lsn};
        size_t len[] = {4, strlen(key_ck), c->len, strlen(key_lsn), strlen(lsn)};
        send_cmd(r, ITEM_CHECKPOINT, 0, 0, c->lsn, 5, argv, len);
    } else if (c->why[0]) {
        set_error(r, "%s", c->why);
    }
    free(c->buf);
    free(c);
    r->handles_open--;
    if (r->stopping) {
        if (r->handles_open == 0)
            free(r);
        return;
    }
    start_checkpoint_read(r);
}

/* The newest checkpoint waiting, read on the threadpool (a checkpoint can
 * be hundreds of MB: never on the loop). */
static void start_checkpoint_read(omld_replicate *r)
{
    if (r->reading || r->ckpt_next == NULL || !r->up || !lease_ok(r))
        return;
    ckpt_read *c = calloc(1, sizeof *c);
    if (c == NULL)
        return;
    item *it = r->ckpt_next;
    r->ckpt_next = NULL;
    c->r = r;
    c->lsn = it->lsn;
    snprintf(c->path, sizeof c->path, "%s", (const char *)it->data);
    free(it);
    c->work.data = c;
    if (uv_queue_work(r->loop, &c->work, read_checkpoint, checkpoint_read_done) != 0) {
        free(c);
        return;
    }
    r->reading = c;
    r->handles_open++; /* the work item keeps r alive */
}

/* Everything ready, in order; dropped (counted) while Redis is away or too
 * much is unanswered. */
static void drain(omld_replicate *r)
{
    pthread_mutex_lock(&r->mu);
    item_list l = r->ready;
    r->ready = (item_list){NULL, NULL, 0};
    uint64_t lost = r->dropped_pending;
    r->dropped_pending = 0;
    pthread_mutex_unlock(&r->mu);
    if (lost)
        dropped(r, lost);
    packer pk = {0};
    for (item *it = l.head, *next; it; it = next) {
        next = it->next;
        if (it->kind == ITEM_CHECKPOINT) { /* only the newest matters */
            snprintf(r->last_ckpt, sizeof r->last_ckpt, "%s", (const char *)it->data);
            r->last_ckpt_lsn = it->lsn;
            free(r->ckpt_next);
            r->ckpt_next = it;
            continue;
        }
        if (it->kind == ITEM_VERSION) {
            r->mark_version = it->version;
            r->mark_lsn = it->lsn;
            r->mark_t_ms = it->t_ms;
            r->mark_lost = 0;
        }
        if (!r->up || r->inflight >= MAX_INFLIGHT || r->stopping || !lease_ok(r)) {
            if (it->kind == ITEM_RECORD)
                dropped(r, 1);
            else
                mark_dropped(r);
        } else if (it->kind == ITEM_RECORD) {
            pack_record(r, &pk, it);
        } else {
            pack_flush(r, &pk); /* the view follows its records */
            send_version(r, it);
        }
        free(it);
    }
    if (r->up && !r->stopping && lease_ok(r))
        pack_flush(r, &pk);
    else
        dropped(r, pk.n);
    free(pk.buf);
    want_checkpoint(r);
    start_checkpoint_read(r);
}

static void on_flush(uv_timer_t *t)
{
    drain(t->data);
}

/* Not now but at the next turn of the loop: the answers the same commit
 * released (the engine's own async, in this turn) go out first. */
static void on_async(uv_async_t *h)
{
    omld_replicate *r = h->data;
    if (!r->stopping && !uv_is_active((uv_handle_t *)&r->flush))
        uv_timer_start(&r->flush, on_flush, 0, 0);
}

/* ------------------------------------------------------------ loop: the lease */

/* Writes may be sent now: no lease configured, or it is held and fresh. */
static int lease_ok(omld_replicate *r)
{
    return r->lease_ms == 0 || omld_now_ns() < atomic_load(&r->lease_until_ns);
}

static void set_lease_why(omld_replicate *r, const char *why)
{
    pthread_mutex_lock(&r->mu);
    snprintf(r->lease_why, sizeof r->lease_why, "%s", why);
    pthread_mutex_unlock(&r->mu);
}

static void announce(omld_replicate *r)
{
    char key[OMLD_REPL_PREFIX_MAX + 16];
    snprintf(key, sizeof key, "%s:primary", r->prefix);
    const char *argv[] = {"SET", key, r->rpc_addr};
    send_cmd(r, ITEM_OTHER, 0, 0, 0, 3, argv, NULL);
}

/* Held (again): what a connection starts with, now that it may. */
static void on_lease_taken(omld_replicate *r)
{
    announce(r);
    want_checkpoint(r);
    if (r->ckpt_next == NULL && r->last_ckpt[0]) { /* Redis may have lost it */
        item *it = item_new(ITEM_CHECKPOINT, strlen(r->last_ckpt));
        if (it) {
            memcpy(it->data, r->last_ckpt, strlen(r->last_ckpt) + 1);
            it->lsn = r->last_ckpt_lsn;
            it->len = 0;
            r->ckpt_next = it;
        }
    }
    start_checkpoint_read(r);
}

typedef struct lease_take {
    omld_replicate *r;
    uint64_t sent_ns;
} lease_take;

static void on_lease(redisAsyncContext *ac, void *reply, void *priv)
{
    lease_take *t = priv;
    uint64_t sent_ns = t->sent_ns;
    free(t);
    omld_replicate *r = ac->data;
    if (r == NULL)
        return;
    r->lease_pending = 0;
    omld_lease_answer a;
    omld_lease_parse(reply, &a);
    if (a.ok) {
        int was = r->lease_held;
        atomic_store(&r->lease_until_ns, sent_ns + (uint64_t)r->lease_ms * 800000u);
        r->lease_held = 1;
        if (!was) {
            LOG_INFO("replicate", "holding the primary lease %s as node %s", r->keys.lease,
                     r->node_id);
            set_lease_why(r, "");
            on_lease_taken(r);
        }
        if (!r->lease_ever) {
            r->lease_ever = 1;
            if (r->lease_cb)
                r->lease_cb(r->lease_arg, 1, "");
        }
        return;
    }
    char why[480];
    omld_lease_describe(&a, &r->keys, why, sizeof why);
    if (a.error[0]) { /* no answer: the lease runs out by itself if this lasts */
        set_error(r, "%s", why);
        return;
    }
    atomic_store(&r->lease_until_ns, 0);
    r->lease_held = 0;
    set_error(r, "%s", why);
    set_lease_why(r, why);
    if (r->lease_cb)
        r->lease_cb(r->lease_arg, 0, why);
}

static void take_lease(omld_replicate *r)
{
    if (r->lease_ms == 0 || !r->up || r->lease_pending || r->stopping)
        return;
    lease_take *t = malloc(sizeof *t);
    if (t == NULL)
        return;
    t->r = r;
    t->sent_ns = omld_now_ns();
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)r->lease_ms);
    const char *argv[9];
    int argc = omld_lease_take_argv(&r->keys, r->node_id, OMLD_LEASE_PRIMARY, ttl, argv);
    if (redisAsyncCommandArgv(r->ac, on_lease, t, argc, argv, NULL) == REDIS_OK)
        r->lease_pending = 1;
    else
        free(t);
}

static void on_lease_timer(uv_timer_t *t)
{
    omld_replicate *r = t->data;
    if (r->lease_held && !lease_ok(r)) {
        r->lease_held = 0; /* lapsed: taken again (and announced) when Redis answers */
        char why[1024];
        snprintf(why, sizeof why, "the primary lease %s lapsed: it could not be renewed within "
                 "%lld ms (%.400s)", r->keys.lease, (long long)r->lease_ms * 4 / 5,
                 r->st.last_error[0] ? r->st.last_error : "Redis did not answer");
        set_error(r, "%s", why);
        set_lease_why(r, why);
    }
    take_lease(r);
}

int omld_replicate_may_write(omld_replicate *r)
{
    return r == NULL || lease_ok(r);
}

void omld_replicate_lease_why(omld_replicate *r, char *out, size_t cap)
{
    pthread_mutex_lock(&r->mu);
    snprintf(out, cap, "%s", r->lease_why[0] ? r->lease_why : "the primary lease is not held");
    pthread_mutex_unlock(&r->mu);
}

void omld_replicate_set_lease_cb(omld_replicate *r, omld_replicate_lease_fn fn, void *arg)
{
    r->lease_cb = fn;
    r->lease_arg = arg;
    if (fn && (r->lease_ms == 0 || (r->lease_ever && lease_ok(r)))) /* nothing to wait for */
        fn(arg, 1, "");
}

uint64_t omld_replicate_synced_lsn(omld_replicate *r)
{
    if (r == NULL)
        return 0;
    int joined = r->run_first <= r->ckpt_synced + 1; /* (run_first 0: from LSN 1) */
    return joined && r->run_last > r->ckpt_synced ? r->run_last : r->ckpt_synced;
}

/* ------------------------------------------------------------ loop: connection */

static void on_connect(const redisAsyncContext *ac, int status)
{
    omld_replicate *r = ac->data;
    if (r == NULL)
        return;
    if (status != REDIS_OK) {
        set_error(r, "cannot connect to Redis: %s", ac->errstr);
        r->ac = NULL; /* hiredis frees it; the tick reconnects */
        return;
    }
    r->up = r->st.connected = 1;
    r->st.last_error[0] = '\0';
    LOG_INFO("replicate", "publishing the log to redis stream %s", r->key_log);
    if (r->lease_ms > 0) {
        r->lease_held = 0; /* sent nothing before the lease is (re)taken on this link */
        take_lease(r);
    } else {
        on_lease_taken(r);
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    omld_replicate *r = ac->data;
    if (r == NULL)
        return;
    r->ac = NULL;
    r->up = r->st.connected = 0;
    r->inflight = 0;
    r->lease_pending = 0;
    if (!r->stopping && status != REDIS_OK)
        set_error(r, "the Redis connection was lost: %s", ac->errstr);
}

static void connect_redis(omld_replicate *r)
{
    char why[sizeof r->st.last_error];
    r->ac = omld_redis_uv_connect(r->loop, r->host, r->port, r, on_connect, on_disconnect, why,
                                  sizeof why);
    if (r->ac == NULL)
        set_error(r, "%s", why);
}

static void on_tick(uv_timer_t *t)
{
    omld_replicate *r = t->data;
    if (r->ac == NULL)
        connect_redis(r);
    pthread_mutex_lock(&r->mu);
    r->st.queue_bytes = r->ready.bytes;
    pthread_mutex_unlock(&r->mu);
}

/* ------------------------------------------------------------ lifetime */

int omld_replicate_start(omld_replicate **out, uv_loop_t *loop, const omld_config *cfg,
                         const char *url, const char *rpc_addr, const char *node_id, char *err,
                         size_t errlen)
{
    *out = NULL;
    if (url[0] == '\0')
        return 0;
    omld_replicate *r = calloc(1, sizeof *r);
    if (r == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (omld_repl_parse_url("replicate", url, r->host, sizeof r->host, &r->port,
                            r->prefix, sizeof r->prefix, err, errlen) != 0) {
        free(r);
        return -1;
    }
    r->loop = loop;
    r->cap_bytes = (uint64_t)cfg->replicate_queue_bytes;
    snprintf(r->maxlen, sizeof r->maxlen, "%lld", (long long)cfg->replicate_maxlen);
    snprintf(r->key_log, sizeof r->key_log, "%s:log", r->prefix);
    snprintf(r->rpc_addr, sizeof r->rpc_addr, "%s", rpc_addr);
    snprintf(r->st.target, sizeof r->st.target, "%s", url);
    r->lease_ms = cfg->replicate_lease_ms;
    snprintf(r->node_id, sizeof r->node_id, "%s", node_id);
    omld_lease_keys_init(&r->keys, r->prefix);
    atomic_init(&r->lease_until_ns, 0);
    r->st.role = OMLD_REPL_PRIMARY;
    atomic_init(&r->ckpt_wanted, 1); /* what a crash left unsent: a checkpoint covers it */
    pthread_mutex_init(&r->mu, NULL);
    uv_async_init(loop, &r->async, on_async);
    uv_timer_init(loop, &r->tick);
    uv_timer_init(loop, &r->flush);
    uv_timer_init(loop, &r->lease_timer);
    r->async.data = r->tick.data = r->flush.data = r->lease_timer.data = r;
    r->handles_open = 4;
    uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
    if (r->lease_ms > 0) /* renewed every fifth of its time */
        uv_timer_start(&r->lease_timer, on_lease_timer, (uint64_t)r->lease_ms / 5,
                       (uint64_t)r->lease_ms / 5);
    connect_redis(r);
    *out = r;
    return 0;
}

void omld_replicate_stats_get(omld_replicate *r, omld_repl_stats *out)
{
    if (r == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->st.queue_bytes = r->ready.bytes;
    pthread_mutex_unlock(&r->mu);
    r->st.lease = r->lease_ms == 0 ? OMLD_REPL_LEASE_NONE
                  : lease_ok(r)     ? OMLD_REPL_LEASE_HELD
                                    : OMLD_REPL_LEASE_NOT_HELD;
    snprintf(r->st.node_id, sizeof r->st.node_id, "%s", r->node_id);
    *out = r->st;
}

static void on_closed(uv_handle_t *h)
{
    omld_replicate *r = h->data;
    if (--r->handles_open == 0)
        free(r);
}

void omld_replicate_stop(omld_replicate *r)
{
    if (r == NULL || r->stopping)
        return;
    r->stopping = 1;
    drain(r); /* the last records: sent if Redis is up (hiredis flushes at free) */
    free(r->ckpt_next);
    r->ckpt_next = NULL;
    pthread_mutex_lock(&r->mu);
    list_free(&r->open);
    list_free(&r->ready);
    pthread_mutex_unlock(&r->mu);
    if (r->ac) {
        r->ac->data = NULL;
        redisAsyncFree(r->ac); /* pending callbacks get NULL data: on_reply returns */
        r->ac = NULL;
    }
    uv_close((uv_handle_t *)&r->async, on_closed);
    uv_close((uv_handle_t *)&r->tick, on_closed);
    uv_close((uv_handle_t *)&r->flush, on_closed);
    uv_close((uv_handle_t *)&r->lease_timer, on_closed);
}
