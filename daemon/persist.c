/* persist.c - what the learner thread keeps on disk: the write-ahead log of
 * every state change and periodic checkpoints of the whole state.
 *
 * DESIGN. The log records requests, not effects: every request that changed
 * state is appended (its packed protobuf) in the order it was applied, and
 * the group is committed before any of it is answered. Because applying is a
 * function of the state and the request only (apply.c; one thread, seeded
 * RNGs, fixed BLAS threading), replaying the log after a checkpoint rebuilds
 * the state bit for bit. A checkpoint holds the learner, the store, the
 * closure and the engine's counters at a log position; the two newest are
 * kept, and the log is trimmed only up to the older one, so a damaged newest
 * checkpoint can be replaced by the older one plus a longer replay.
 *
 * When the log cannot be written (disk full, I/O error), the group's state
 * changes are undone by reloading the durable state (newest checkpoint +
 * log), its requests are answered with an error, and the daemon refuses
 * changes (reads go on) until a probe record can be committed again. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bytes.h"
#include "checkpoint.h"
#include "engine_int.h"
#include "log.h"
#include "modelfile.h"
#include "replicate.h"
#include "replication.h"

/* REC_REHEARSE: u32 steps of rehearsal the learner took at this point of
 * the log, after learning the new triplets still waiting for a full batch
 * (0 steps: only that). engine.c decides when, by the clock; replay
 * repeats it, so the recovered model is the one that was running. */
enum { REC_PROBE = 0, REC_REQUEST = 1, REC_REHEARSE = 2 };
/* SEC_ROLLBACK (optional): the live learner before the last promote, for
 * Rollback after a restart: u32 name length | the promoted model's name |
 * the learner's model encoding. */
/* SEC_COUNTERS: the ingest counters that applying changes (omld_metrics),
 * so that none goes backwards over a restart: u32 n | n x u64, in the order
 * of persisted_counter() (later builds may append; a reader takes the ones
 * it knows). */
/* SEC_REPLAY (optional): the rehearsal ring (replay.h codec). */
/* SEC_IDEM (optional): the idempotency keys applied (idempotency.h codec);
 * a checkpoint without it (written before keys existed) has none. */
enum { SEC_MODEL = 1, SEC_STORE = 2, SEC_CLOSURE = 3, SEC_META = 4, SEC_ROLLBACK = 5,
       SEC_COUNTERS = 6, SEC_REPLAY = 7, SEC_IDEM = 8 };
#define META_BYTES 16     /* u64 view version, u64 reserved */
#define RETRY_NS 5000000000ull
#define CHECKPOINT_NICE 10 /* a background checkpoint's nice above the learner's */

static int fsync_policy(const char *name)
{
    return strcmp(name, "always") == 0 ? OML_WAL_FSYNC_ALWAYS
           : strcmp(name, "no") == 0   ? OML_WAL_FSYNC_NO
                                       : OML_WAL_FSYNC_EVERYSEC;
}

/* ------------------------------------------------------------ counters */

#define N_COUNTERS 6

/* The counters apply.c increments (a function of the command sequence, like
 * the rest of the state), by their position in SEC_COUNTERS. Process
 * counters (requests, connections, latencies) start at zero with the
 * process, as Prometheus counters do. */
static atomic_uint_fast64_t *persisted_counter(omld_metrics *m, int i)
{
    switch (i) {
    case 0: return &m->items_put;
    case 1: return &m->items_deleted;
    case 2: return &m->triplets_received;
    case 3: return &m->triplets_applied;
    case 4: return &m->pairs_received;
    default: return &m->derived_triplets;
    }
}

/* Reads SEC_COUNTERS into v (the counters it has; the others stay). */
static void parse_counters(const oml_ckpt_section *sec, uint64_t v[N_COUNTERS])
{
    if (sec->len < 4)
        return;
    uint32_t n = oml_le32_load(sec->data);
    for (uint32_t i = 0; i < n && i < N_COUNTERS && 4 + 8 * ((size_t)i + 1) <= sec->len; i++)
        v[i] = oml_le64_load(sec->data + 4 + 8 * i);
}

static void set_counters(omld_engine *e, const uint64_t v[N_COUNTERS])
{
    for (int i = 0; i < N_COUNTERS; i++)
        atomic_store(persisted_counter(e->metrics, i), v[i]);
}

/* ------------------------------------------------------------ replay */

static int replay_record(void *arg, uint8_t type, uint64_t lsn, const uint8_t *payload, size_t len)
{
    omld_engine *e = arg;
    if (type == REC_PROBE)
        return 0;
    if (type == REC_REHEARSE) {
        if (len != 4) {
            LOG_ERROR("persist", "log record %" PRIu64 ": a rehearsal record of %zu bytes", lsn, len);
            return OML_EFORMAT;
        }
        uint32_t steps = oml_le32_load(payload);
        omld_rehearse(e, (int32_t)steps);
        e->replayed++;
        return 0;
    }
    Omld__Request *q = type == REC_REQUEST ? omld__request__unpack(NULL, len, payload) : NULL;
    if (q == NULL) {
        LOG_ERROR("persist", "log record %" PRIu64 " (type %u, %zu bytes) is not a request", lsn,
                  type, len);
        return OML_EFORMAT;
    }
    if (q->body_case == OMLD__REQUEST__BODY_ADD_TRIPLETS)
        atomic_fetch_add(&e->queued_triplets, q->add_triplets->n_triplets);
    uint64_t done = omld_count_ret(&e->metrics->recovery_replayed);
    uint64_t now = omld_now_ns();
    if (now - e->replay_log_ns >= 5000000000ull) { /* a long replay says how far it is */
        e->replay_log_ns = now;
        LOG_INFO("persist", "replaying the write-ahead log: %" PRIu64 " records so far (LSN %"
                 PRIu64 ")", done, lsn);
    }
    omld_reply r;
    omld_reply_init(&r, q->request_id);
    omld_apply(e, q, &r);
    /* Only requests that changed state are logged, and validation ran
     * before that: INVALID_ARGUMENT here means a rule of this build refuses
     * what the writer accepted (e.g. features beyond max_feature_abs). The
     * record is skipped; the state differs from the writer's on purpose. */
    if (r.status.code == OMLD__STATUS__CODE__INVALID_ARGUMENT)
        LOG_WARN("persist", "log record %" PRIu64 " is refused on replay and skipped: %s: %s", lsn,
                 r.status.field ? r.status.field : "", r.status.message);
    omld_reply_free(&r);
    omld__request__free_unpacked(q, NULL);
    e->replayed++;
    return 0;
}

/* ------------------------------------------------------------ state load */

static void on_refused(void *arg, const char *path, const char *why)
{
    LOG_WARN("persist", "refusing checkpoint %s; trying the previous one", why);
}

/* The state load_state builds before swapping it into the engine. */
typedef struct loaded_state {
    oml_learner *learner;
    oml_store *store;
    oml_closure *closure;
    oml_replay replay;
    uint64_t lsn, version;              /* the checkpoint's log position and view version */
    uint64_t counters[N_COUNTERS];
    int counters_known;                 /* 0: take triplets_applied from the learner */
} loaded_state;

/* No model to roll back to (no checkpoint, or before reading its section). */
static void rollback_forget(omld_engine *e)
{
    free(e->rb_buf);
    e->rb_buf = NULL;
    e->rb_len = 0;
    e->rb_name[0] = '\0';
}

/* An empty data_dir: a new learner, store and closure from the options. */
static int load_fresh(omld_engine *e, loaded_state *s, oml_diag *d)
{
    e->ckpt_unix_ms = 0;
    rollback_forget(e);
    int rc = oml_learner_create(&s->learner, &e->model_cfg, d);
    if (rc == OML_OK)
        rc = oml_store_create(&s->store, (int32_t)e->opts.dim, (uint32_t)e->opts.max_items);
    if (rc == OML_OK)
        rc = oml_closure_create(&s->closure, (uint32_t)e->opts.max_items, CLOSURE_MAX_DIS_EDGES,
                                (uint64_t)e->opts.seed);
    return rc;
}

/* SEC_ROLLBACK: the live learner before the last promote, kept in the
 * engine so that Rollback works after a restart. A section that cannot be
 * read is only warned about: the state itself is whole without it. */
static void load_rollback(omld_engine *e, const oml_ckpt *ck, const oml_ckpt_section *rb)
{
    uint32_t nl = oml_le32_load(rb->data);
    if (nl <= OMLD_MODEL_NAME_MAX && 4 + (size_t)nl < rb->len &&
        (e->rb_buf = malloc(rb->len - 4 - nl)) != NULL) {
        memcpy(e->rb_name, rb->data + 4, nl);
        e->rb_name[nl] = '\0';
        e->rb_len = rb->len - 4 - nl;
        memcpy(e->rb_buf, rb->data + 4 + nl, e->rb_len);
    } else {
        LOG_WARN("persist", "checkpoint %s: the rollback section is unreadable; "
                 "Rollback will have nothing to undo", ck->path);
    }
}

/* When the checkpoint was written: its file's mtime (now if stat fails). */
static uint64_t checkpoint_mtime_ms(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_mtim.tv_sec * 1000u +
                                      (uint64_t)st.st_mtim.tv_nsec / 1000000u
                                : omld_wall_ms();
}

/* Decodes the checkpoint's sections into s and frees ck. *rc is the decode
 * result (the caller reports a failure); -1: a checkpoint this build must
 * not start from, err written and s's parts freed. */
static int load_checkpoint(omld_engine *e, oml_ckpt *ck, loaded_state *s, uint64_t read_ns,
                           oml_diag *d, int *rc, char *err, size_t errlen)
{
    uint64_t t0 = omld_now_ns();
    const oml_ckpt_section *m = oml_ckpt_find(ck, SEC_MODEL), *st = oml_ckpt_find(ck, SEC_STORE),
                           *c = oml_ckpt_find(ck, SEC_CLOSURE), *meta = oml_ckpt_find(ck, SEC_META);
    if (!m || !st || !c || !meta || meta->len < META_BYTES) {
        snprintf(err, errlen, "checkpoint %s lacks a section; move it away to start from the "
                 "previous one", ck->path);
        oml_ckpt_free(ck);
        return -1;
    }
    *rc = oml_model_decode(&s->learner, m->data, m->len, d);
    char why[400];
    if (*rc == OML_OK &&
        omld_engine_model_adopt(&e->opts, &s->learner->cfg, &e->model_cfg, why, sizeof why)) {
        snprintf(err, errlen, "%s: %s", ck->path, why);
        oml_learner_destroy(s->learner);
        oml_replay_free(&s->replay);
        oml_ckpt_free(ck);
        return -1;
    }
    if (*rc == OML_OK && s->replay.cap != (uint32_t)e->model_cfg.replay) {
        oml_replay_free(&s->replay); /* the adopted model's own ring size */
        if (oml_replay_init(&s->replay, (uint32_t)e->model_cfg.replay) != OML_OK)
            *rc = OML_ENOMEM;
    }
    if (*rc == OML_OK)
        *rc = oml_store_decode(&s->store, st->data, st->len, (uint32_t)e->opts.max_items, d);
    if (*rc == OML_OK)
        *rc = oml_closure_decode(&s->closure, c->data, c->len, d);
    const oml_ckpt_section *rp = oml_ckpt_find(ck, SEC_REPLAY);
    if (*rc == OML_OK && rp)
        *rc = oml_replay_decode(&s->replay, rp->data, rp->len, d);
    const oml_ckpt_section *ik = oml_ckpt_find(ck, SEC_IDEM);
    if (*rc == OML_OK && ik)
        *rc = omld_idem_decode(&e->idem, ik->data, ik->len, d);
    if (*rc == OML_OK && oml_replay_check(&s->replay, s->store) != OML_OK)
        *rc = oml_diag_set(d, OML_EFORMAT, "replay",
                           "the rehearsal ring names a slot the store does not have");
    s->lsn = ck->lsn;
    s->version = oml_le64_load(meta->data);
    const oml_ckpt_section *cs = oml_ckpt_find(ck, SEC_COUNTERS);
    if (cs) {
        parse_counters(cs, s->counters);
        s->counters_known = 1;
    }
    const oml_ckpt_section *rb = oml_ckpt_find(ck, SEC_ROLLBACK);
    rollback_forget(e);
    if (*rc == OML_OK && rb && rb->len >= 4)
        load_rollback(e, ck, rb);
    LOG_INFO("persist", "checkpoint %s: log position %" PRIu64 ", %u items, %" PRIu64
             " updates (read and checked in %.1f s, decoded in %.1f s)", ck->path, s->lsn,
             s->store ? oml_store_count(s->store) : 0, s->learner ? s->learner->stats.updates : 0,
             (double)read_ns / 1e9, (double)(omld_now_ns() - t0) / 1e9);
    e->ckpt_unix_ms = checkpoint_mtime_ms(ck->path);
    oml_ckpt_free(ck);
    return 0;
}

/* Deleted items are no closure nodes (apply_delete removes them, so this
 * is a no-op on what this build wrote); a state from before slots were
 * reused kept them, and a reused slot must not inherit their facts. */
static void closure_forget_deleted(const oml_store *store, oml_closure *closure)
{
    uint32_t forgotten = 0;
    for (uint32_t slot = 0; slot < oml_store_slots(store); slot++)
        if (!oml_store_is_live(store, slot))
            forgotten += oml_closure_remove(closure, slot) == 1;
    if (forgotten > 0)
        LOG_INFO("persist", "the closure forgot %u deleted item(s) it still held (a state "
                 "written before deleted slots were reused)", forgotten);
}

/* Swaps the loaded state into the engine (the store's contents under the
 * write lock: the indexer and queries hold its address) and sets the
 * persisted counters to the checkpoint's. */
static void swap_in(omld_engine *e, loaded_state *s)
{
    oml_replay_free(&e->replay);
    e->replay = s->replay;
    oml_learner_destroy(e->learner);
    e->learner = s->learner;
    oml_closure_destroy(e->closure);
    e->closure = s->closure;
    pthread_rwlock_wrlock(&e->lock.rw);
    oml_store_swap(e->store, s->store);
    e->lock.generation++;
    pthread_rwlock_unlock(&e->lock.rw);
    oml_store_destroy(s->store);
    e->ckpt_lsn = s->lsn;
    e->version = s->version > e->version ? s->version : e->version;
    atomic_store(&e->queued_triplets, 0);
    if (!s->counters_known)
        s->counters[3] = e->learner->stats.updates; /* triplets_applied */
    set_counters(e, s->counters);
}

/* Reopens the log and replays the records after position lsn onto the
 * swapped-in state; t0: when the load began (for the "recovered" line); d:
 * load_state's, as the log's diagnostics are. */
static int replay_log(omld_engine *e, uint64_t lsn, uint64_t t0, oml_diag *d, char *err,
                      size_t errlen)
{
    char wal_dir[OMLD_STR_MAX + 8];
    snprintf(wal_dir, sizeof wal_dir, "%s/wal", e->opts.data_dir);
    oml_wal_options wo = {.after_lsn = lsn, .fsync = fsync_policy(e->opts.fsync),
                          .salvage = e->opts.wal_salvage != 0};
    oml_wal_recovery rep = {0};
    oml_wal_close(e->wal, NULL);
    e->wal = NULL;
    e->replayed = 0;
    atomic_store(&e->metrics->recovery_replayed, 0);
    atomic_store(&e->metrics->recovery_step, OMLD_RECOVERY_LOG);
    e->replay_log_ns = omld_now_ns();
    int rc = oml_wal_open(&e->wal, wal_dir, &wo, replay_record, e, &rep, d);
    if (rc != OML_OK) {
        int damaged = rc == OML_EFORMAT && rep.cut_segment[0] && !wo.salvage;
        snprintf(err, errlen, "cannot recover the write-ahead log in %s: %s%s", wal_dir,
                 d->msg[0] ? d->msg : oml_strerror(rc),
                 damaged ? ". To start from the records before the damage instead, start omld "
                           "once with --wal_salvage 1 (the log is cut there and the records "
                           "after it are lost, later segments kept as *.corrupt; copy data_dir "
                           "first)" : "");
        return -1;
    }
    if (rep.salvaged)
        LOG_WARN("persist", "write-ahead log salvaged (wal_salvage): cut at %s offset %" PRIu64
                 " (LSN %" PRIu64 ", %s); %" PRIu64 " bytes after it set aside as *.corrupt. "
                 "Remove wal_salvage from the options now", rep.cut_segment, rep.cut_offset,
                 rep.cut_lsn, rep.reason, rep.bytes_dropped);
    else if (rep.torn)
        LOG_WARN("persist", "write-ahead log: cut a torn tail at %s offset %" PRIu64
                 " (%s, %" PRIu64 " bytes dropped): those writes were never acknowledged",
                 rep.cut_segment, rep.cut_offset, rep.reason, rep.bytes_dropped);
    LOG_INFO("persist", "recovered: %" PRIu64 " log records replayed after position %" PRIu64
             " in %.0f ms; %u items, %" PRIu64 " updates", e->replayed, lsn,
             (double)(omld_now_ns() - t0) / 1e6, oml_store_count(e->store),
             e->learner->stats.updates);
    e->records_since_ckpt = e->replayed;
    e->ckpt_ns = omld_now_ns();
    return 0;
}

/* Replaces the engine's learner, store contents and closure with the
 * newest good checkpoint's (or fresh ones if there is none), then replays
 * the log after it. The store keeps its address (contents swapped under the
 * write lock), since the indexer and queries hold it. */
static int load_state(omld_engine *e, char *err, size_t errlen)
{
    const char *dir = e->opts.data_dir;
    oml_ckpt ck;
    oml_diag d = {0};
    uint64_t t0 = omld_now_ns();
    int rc = oml_ckpt_load_newest(dir, &ck, on_refused, NULL, &d);
    uint64_t read_ns = omld_now_ns() - t0;
    loaded_state s = {.lsn = 0, .version = e->version};
    /* The keys come from the checkpoint and the log, like the rest. */
    omld_idem_free(&e->idem);
    if (omld_idem_init(&e->idem, (uint32_t)e->opts.idempotency_keys) != OML_OK ||
        oml_replay_init(&s.replay, (uint32_t)e->model_cfg.replay) != OML_OK) {
        snprintf(err, errlen, "out of memory for the rehearsal ring");
        return -1;
    }
    /* The counters start from the checkpoint's (zero without one); one
     * written before SEC_COUNTERS existed gives the learner's update count
     * at least. The replay below adds what came after. */
    s.counters_known = rc != OML_OK;
    if (rc == OML_EEMPTY)
        rc = load_fresh(e, &s, &d);
    else if (rc == OML_OK && load_checkpoint(e, &ck, &s, read_ns, &d, &rc, err, errlen) != 0)
        return -1;
    if (rc != OML_OK) {
        snprintf(err, errlen, "cannot load the state from %s: %s", dir, d.msg[0] ? d.msg : oml_strerror(rc));
        oml_learner_destroy(s.learner);
        oml_store_destroy(s.store);
        oml_closure_destroy(s.closure);
        oml_replay_free(&s.replay);
        return -1;
    }
    closure_forget_deleted(s.store, s.closure);
    swap_in(e, &s);
    return replay_log(e, s.lsn, t0, &d, err, errlen);
}

int omld_persist_apply_record(omld_engine *e, uint8_t type, uint64_t lsn, const uint8_t *p,
                              size_t len)
{
    return replay_record(e, type, lsn, p, len);
}

int omld_persist_reload(omld_engine *e, char *err, size_t errlen)
{
    return load_state(e, err, errlen);
}

int omld_persist_open(omld_engine *e, char *err, size_t errlen)
{
    if (mkdir(e->opts.data_dir, 0750) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create data_dir %s: %s", e->opts.data_dir, strerror(errno));
        return -1;
    }
    return load_state(e, err, errlen);
}

/* ------------------------------------------------------------ logging */

/* Commits the log's group; replicas get it only once it is committed. */
static int commit(omld_engine *e, oml_diag *d)
{
    int rc = oml_wal_commit(e->wal, d);
    if (rc == OML_OK)
        omld_replicate_commit(e->pub);
    else
        omld_replicate_discard(e->pub);
    return rc;
}

int omld_persist_log(omld_engine *e, const Omld__Request *q)
{
    size_t n = omld__request__get_packed_size(q);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        return OML_ENOMEM;
    omld__request__pack(q, buf);
    uint64_t lsn;
    int rc = oml_wal_append(e->wal, REC_REQUEST, buf, n, &lsn);
    if (rc == OML_OK) {
        e->records_since_ckpt++;
        omld_replicate_record(e->pub, REC_REQUEST, lsn, buf, n);
    }
    free(buf);
    return rc;
}

int omld_persist_log_rehearse(omld_engine *e, int32_t steps)
{
    uint8_t p[4];
    oml_le32_store(p, (uint32_t)steps);
    uint64_t lsn;
    int rc = oml_wal_append(e->wal, REC_REHEARSE, p, sizeof p, &lsn);
    if (rc == OML_OK) {
        e->records_since_ckpt++;
        omld_replicate_record(e->pub, REC_REHEARSE, lsn, p, sizeof p);
    }
    return rc;
}

int omld_persist_commit(omld_engine *e, oml_diag *d)
{
    return commit(e, d);
}

void omld_persist_rollback(omld_engine *e, const char *why)
{
    LOG_ERROR("persist", "the write-ahead log cannot be written (%s): undoing the uncommitted "
              "changes and refusing writes until it can", why);
    omld_replicate_discard(e->pub);
    snprintf(e->read_only_why, sizeof e->read_only_why, "%s", why);
    e->read_only = 1;
    e->read_only_since = omld_now_ns();
    char err[1536];
    if (load_state(e, err, sizeof err) != 0) {
        /* The durable state is unreadable now: nothing safe to serve writes
         * from. Reads keep using the last published view. */
        LOG_ERROR("persist", "reloading the durable state failed: %s", err);
    }
    e->dirty = 1; /* publish the reloaded state */
}

int omld_persist_writable(omld_engine *e)
{
    if (!e->read_only)
        return 1;
    if (omld_now_ns() - e->read_only_since < RETRY_NS)
        return 0;
    e->read_only_since = omld_now_ns();
    uint64_t lsn;
    oml_diag d = {0};
    int ok = oml_wal_append(e->wal, REC_PROBE, "probe", 5, &lsn) == OML_OK;
    if (ok) /* replicas skip it, but its LSN must not look like a gap */
        omld_replicate_record(e->pub, REC_PROBE, lsn, "probe", 5);
    if (ok && commit(e, &d) == OML_OK) {
        LOG_INFO("persist", "the write-ahead log is writable again: accepting writes");
        e->read_only = 0;
        return 1;
    }
    snprintf(e->read_only_why, sizeof e->read_only_why, "%s", d.msg);
    return 0;
}

/* ------------------------------------------------------------ checkpoints */

/* 1 if the learner's weights and hedge are all finite. */
static int model_finite(const omld_engine *e)
{
    const oml_learner *l = e->learner;
    for (size_t i = 0; i < l->lay.count; i++)
        if (!isfinite(l->params[i]))
            return 0;
    for (int k = 0; k < oml_learner_heads(l); k++)
        if (!isfinite(l->alpha[k]))
            return 0;
    return 1;
}

static int checkpoint_write(omld_engine *e, char *path, size_t path_cap, uint64_t *bytes,
                            oml_diag *d);

/* Writes a checkpoint (checkpoint_write) and counts it, for /metrics. */
int omld_persist_checkpoint(omld_engine *e, char *path, size_t path_cap, uint64_t *bytes,
                            oml_diag *d)
{
    int rc = checkpoint_write(e, path, path_cap, bytes, d);
    if (rc == OML_OK)
        e->ckpt_written++;
    else
        e->ckpt_failed++;
    return rc;
}

/* What every checkpoint does first, on the learner thread: the part batch
 * waiting in the ring is learned (and logged), a model that is not finite
 * is refused, and the log is committed (and synced when sync is set);
 * *lsn is the position the checkpoint will hold. A background checkpoint
 * does not sync: the checkpoint it writes holds every record up to *lsn
 * itself (and is synced by its writer), so the log before *lsn is never
 * needed once it is durable, and until then the log's own fsync policy
 * holds as for any write; the sync cost the learner 100+ ms at 250k items. */
static int checkpoint_prepare(omld_engine *e, uint64_t *lsn, int sync, oml_diag *d)
{
    if (e->replay.n_pending > 0) { /* a checkpoint never holds borrowed rows */
        omld_rehearse(e, 0);
        if (omld_persist_log_rehearse(e, 0) != OML_OK)
            return oml_diag_set(d, OML_EIO, "checkpoint", "cannot append to the write-ahead log");
    }
    /* A model that is not finite is never made durable: the log keeps
     * everything since the last good checkpoint, so a restart (whose replay
     * refuses what this build refuses) can rebuild a finite one. */
    if (!model_finite(e))
        return oml_diag_set(d, OML_ENONFINITE, "checkpoint",
                            "the live model has weights that are not finite: it is not written "
                            "(the log keeps everything since the last checkpoint)");
    int rc = commit(e, d);
    /* A replica starts from this checkpoint serving its view version:
     * that version must be the view of exactly this log position. */
    if (rc == OML_OK && e->pub && e->published_lsn != oml_wal_last_lsn(e->wal))
        omld_engine_publish(e);
    if (rc == OML_OK && sync)
        rc = oml_wal_sync(e->wal, d);
    *lsn = oml_wal_last_lsn(e->wal);
    return rc;
}

/* Encodes the state and writes it as the checkpoint at lsn. Runs on the
 * learner thread, or in a forked child (checkpoint_background): so it
 * logs nothing and takes no lock (the learner thread, the only writer of
 * the state, is the one that forked). */
static int checkpoint_encode_write(omld_engine *e, uint64_t lsn, char *path, size_t path_cap,
                                   uint64_t *bytes, oml_diag *d)
{
    uint8_t *model = NULL, *store = NULL, *store_tail = NULL, *closure = NULL, *rbs = NULL;
    uint8_t meta[META_BYTES] = {0}, *ring = NULL, *keys = NULL;
    const uint8_t *store_x = NULL; /* the store's own features: not copied */
    size_t nm = 0, ns = 0, nsx = 0, nst = 0, nc = 0, nr = 0, ng = 0, nk = 0;
    int rc = oml_model_encode(e->learner, &model, &nm);
    if (rc == OML_OK)
        rc = omld_idem_encode(&e->idem, &keys, &nk);
    if (rc == OML_OK)
        rc = oml_replay_encode(&e->replay, &ring, &ng);
    if (rc == OML_OK)
        rc = oml_store_encode_parts(e->store, &store, &ns, &store_x, &nsx, &store_tail, &nst);
    if (rc == OML_OK)
        rc = oml_closure_encode(e->closure, &closure, &nc);
    oml_le64_store(meta, e->version);
    if (rc == OML_OK && e->rb_buf) {
        size_t nl = strlen(e->rb_name);
        nr = 4 + nl + e->rb_len;
        rbs = malloc(nr);
        if (rbs == NULL) {
            rc = OML_ENOMEM;
        } else {
            oml_le32_store(rbs, (uint32_t)nl);
            memcpy(rbs + 4, e->rb_name, nl);
            memcpy(rbs + 4 + nl, e->rb_buf, e->rb_len);
        }
    }
    uint8_t counters[4 + 8 * N_COUNTERS];
    oml_le32_store(counters, N_COUNTERS);
    for (int i = 0; i < N_COUNTERS; i++)
        oml_le64_store(counters + 4 + 8 * i, atomic_load(persisted_counter(e->metrics, i)));
    if (rc == OML_OK) {
        oml_ckpt_part store_parts[3] = {{store, ns}, {store_x, nsx}, {store_tail, nst}};
#define SEC(t, p, n) {.tag = (t), .data = (p), .len = (n)}
        oml_ckpt_section s[8] = {SEC(SEC_MODEL, model, nm),
                                 {.tag = SEC_STORE, .parts = store_parts, .n_parts = 3},
                                 SEC(SEC_CLOSURE, closure, nc), SEC(SEC_META, meta, META_BYTES),
                                 SEC(SEC_COUNTERS, counters, sizeof counters),
                                 SEC(SEC_REPLAY, ring, ng), SEC(SEC_IDEM, keys, nk),
                                 SEC(SEC_ROLLBACK, rbs, nr)};
#undef SEC
        rc = oml_ckpt_write(e->opts.data_dir, lsn, s, rbs ? 8 : 7, 2, path, path_cap, bytes, d);
    } else {
        oml_diag_set(d, rc, "checkpoint", "cannot encode the state: %s", oml_strerror(rc));
    }
    free(model);
    free(store);
    free(store_tail);
    free(closure);
    free(ring);
    free(keys);
    free(rbs);
    return rc;
}

/* A checkpoint at lsn is durable: the log before the older of the two kept
 * ones goes, and the figures follow. */
static void checkpoint_done(omld_engine *e, uint64_t lsn, uint64_t t0, const char *path,
                            uint64_t bytes, uint64_t updates)
{
    snprintf(e->ckpt_path, sizeof e->ckpt_path, "%s", path);
    e->ckpt_bytes = bytes;
    e->ckpt_updates = updates;
    if (e->ckpt_lsn > 0)
        oml_wal_truncate_before(e->wal, e->ckpt_lsn + 1, NULL);
    e->ckpt_lsn = lsn;
    e->ckpt_ns = omld_now_ns();
    e->ckpt_dur_ns = e->ckpt_ns - t0;
    e->ckpt_unix_ms = omld_wall_ms();
    omld_replicate_checkpoint(e->pub, path, lsn); /* replicas bootstrap from it */
    LOG_INFO("persist", "checkpoint at log position %" PRIu64 ": %s (%.1f MB) in %.0f ms", lsn,
             path, (double)bytes / 1e6, (double)(omld_now_ns() - t0) / 1e6);
}

static int checkpoint_write(omld_engine *e, char *path, size_t path_cap, uint64_t *bytes,
                            oml_diag *d)
{
    omld_persist_bg_wait(e); /* one writer of the directory at a time */
    uint64_t t0 = omld_now_ns(), lsn = 0, nbytes = 0;
    char where[512];
    int rc = checkpoint_prepare(e, &lsn, 1, d);
    if (rc == OML_OK)
        rc = checkpoint_encode_write(e, lsn, where, sizeof where, &nbytes, d);
    if (rc != OML_OK)
        return rc;
    e->ckpt_pause_ns = omld_now_ns() - t0; /* the learner wrote it all */
    if (path)
        snprintf(path, path_cap, "%s", where);
    if (bytes)
        *bytes = nbytes;
    e->records_since_ckpt = 0;
    checkpoint_done(e, lsn, t0, where, nbytes, e->learner->stats.updates);
    return OML_OK;
}

int omld_persist_rebase(omld_engine *e, uint64_t lsn, char *path, size_t path_cap, oml_diag *d)
{
    omld_persist_bg_wait(e);
    uint64_t t0 = omld_now_ns(), bytes = 0;
    int rc = checkpoint_encode_write(e, lsn, path, path_cap, &bytes, d);
    if (rc != OML_OK)
        return rc;
    /* Its own log so far holds nothing (a replica logs nothing): the next
     * record is lsn + 1, as in the primary's. */
    char wal_dir[OMLD_STR_MAX + 8];
    snprintf(wal_dir, sizeof wal_dir, "%s/wal", e->opts.data_dir);
    oml_wal_close(e->wal, NULL);
    e->wal = NULL;
    omld_repl_remove_files(wal_dir, "wal-");
    oml_wal_options wo = {.after_lsn = lsn, .fsync = fsync_policy(e->opts.fsync)};
    rc = oml_wal_open(&e->wal, wal_dir, &wo, NULL, NULL, NULL, d);
    if (rc != OML_OK)
        return rc;
    e->records_since_ckpt = 0;
    e->ckpt_lsn = 0; /* nothing before it to truncate */
    checkpoint_done(e, lsn, t0, path, bytes, e->learner->stats.updates);
    return OML_OK;
}

/* ------------------------------------------------------------ in the background */

/* In a background checkpoint's child, which opens what it writes itself:
 * the descriptors it got from omld. Among them are the data_dir's lock
 * (flock: held while any copy is open) and the listening sockets, so a
 * child still dying after omld was killed kept a restart from taking
 * them (seen under ThreadSanitizer: "data_dir ... is in use"). */
static void close_inherited_fds(void)
{
    if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
        (void)close(fd);
}

/* A checkpoint never stops the learner: after checkpoint_prepare
 * (a commit and a sync: milliseconds), the process forks, and the child
 * writes the checkpoint from its copy-on-write image of the state, as it
 * was at lsn, while the learner goes on (Redis's BGSAVE does the same).
 * The learner thread is the only writer of everything a checkpoint holds,
 * so the image is consistent; the child logs nothing, takes no lock, dies
 * with its parent (PR_SET_PDEATHSIG) and ends with _exit. The parent
 * reaps it (omld_persist_bg_poll) and then truncates the log. */
int omld_persist_bg_start(omld_engine *e, oml_diag *d)
{
    if (e->bg_pid > 0)
        return 1;
    uint64_t t0 = omld_now_ns(), lsn = 0;
    int rc = checkpoint_prepare(e, &lsn, 0, d);
    if (rc != OML_OK) {
        e->ckpt_failed++;
        return rc;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1); /* the parent is already gone */
        close_inherited_fds();
        /* Encoding and writing the image takes a core for seconds (10 s
         * at a million items): the learner, the connections and the
         * queries come first, so that no acknowledgement waits on it. */
        errno = 0;
        int nice_now = getpriority(PRIO_PROCESS, 0);
        if (errno == 0)
            (void)setpriority(PRIO_PROCESS, 0, nice_now + CHECKPOINT_NICE);
        oml_diag cd = {0};
        char path[512];
        uint64_t bytes = 0;
        _exit(checkpoint_encode_write(e, lsn, path, sizeof path, &bytes, &cd) == OML_OK ? 0 : 1);
    }
    if (pid < 0) { /* no process to spare: in the foreground, as before */
        LOG_WARN("persist", "fork for a background checkpoint failed (%s): writing it in the "
                 "foreground", strerror(errno));
        char path[512];
        uint64_t bytes = 0;
        rc = omld_persist_checkpoint(e, path, sizeof path, &bytes, d);
        return rc == OML_OK ? 0 : rc;
    }
    /* What holds acknowledgements: mostly the fork's copy of the page
     * tables, which huge pages keep short (src/bigmem.h). */
    e->ckpt_pause_ns = omld_now_ns() - t0;
    LOG_INFO("persist", "background checkpoint at log position %" PRIu64 " started: the learner "
             "stopped %.1f ms (commit, sync, fork)", lsn, (double)e->ckpt_pause_ns / 1e6);
    e->bg_pid = pid;
    e->bg_lsn = lsn;
    e->bg_t0 = t0;
    e->bg_updates = e->learner->stats.updates;
    e->bg_records = e->records_since_ckpt;
    e->records_since_ckpt = 0;
    e->ckpt_ns = omld_now_ns(); /* the next periodic one counts from here */
    return 1;
}

/* The background checkpoint ended with status: its bookkeeping. */
static void bg_reaped(omld_engine *e, int status)
{
    e->bg_pid = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        char path[600];
        snprintf(path, sizeof path, "%s/checkpoint-%016" PRIx64 ".ckpt", e->opts.data_dir,
                 e->bg_lsn);
        struct stat st;
        uint64_t bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
        e->ckpt_written++;
        checkpoint_done(e, e->bg_lsn, e->bg_t0, path, bytes, e->bg_updates);
        return;
    }
    e->ckpt_failed++;
    e->bg_failed = 1;
    e->records_since_ckpt += e->bg_records; /* still owed */
    LOG_ERROR("persist", "background checkpoint at log position %" PRIu64 " failed (%s %d): the "
              "log keeps everything; the next one is tried as usual", e->bg_lsn,
              WIFEXITED(status) ? "exit status" : "signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

uint64_t omld_persist_position(const omld_engine *e)
{
    return e->wal ? oml_wal_last_lsn(e->wal) : 0;
}

int omld_persist_bg_poll(omld_engine *e)
{
    if (e->bg_pid <= 0)
        return 0;
    int status = 0;
    pid_t r = waitpid(e->bg_pid, &status, WNOHANG);
    if (r == e->bg_pid || (r < 0 && errno == ECHILD)) {
        bg_reaped(e, r == e->bg_pid ? status : 1 << 8);
        return 0;
    }
    return 1;
}

void omld_persist_bg_wait(omld_engine *e)
{
    if (e->bg_pid <= 0)
        return;
    int status = 0;
    pid_t r;
    while ((r = waitpid(e->bg_pid, &status, 0)) < 0 && errno == EINTR)
        ;
    bg_reaped(e, r == e->bg_pid ? status : 1 << 8);
}

void omld_persist_maybe_checkpoint(omld_engine *e)
{
    if (e->read_only || e->records_since_ckpt == 0)
        return;
    uint64_t age_ms = (omld_now_ns() - e->ckpt_ns) / 1000000u;
    if (e->bg_pid > 0)
        return; /* one at a time: the next comes after it */
    if (e->records_since_ckpt < (uint64_t)e->opts.checkpoint_every &&
        age_ms < (uint64_t)e->opts.checkpoint_ms && !omld_replicate_checkpoint_wanted(e->pub))
        return;
    if (e->opts.checkpoint_background) {
        oml_diag bd = {0};
        if (omld_persist_bg_start(e, &bd) < 0)
            LOG_ERROR("persist", "periodic checkpoint failed: %s (the log keeps everything)",
                      bd.msg);
        return;
    }
    char path[512];
    uint64_t bytes = 0;
    oml_diag d = {0};
    if (omld_persist_checkpoint(e, path, sizeof path, &bytes, &d) != OML_OK)
        LOG_ERROR("persist", "periodic checkpoint failed: %s (the log keeps everything)", d.msg);
}

void omld_persist_close(omld_engine *e)
{
    if (e->wal == NULL)
        return;
    omld_persist_bg_wait(e);
    oml_diag d = {0};
    if (!e->read_only && e->records_since_ckpt > 0) {
        char path[512];
        uint64_t bytes;
        if (omld_persist_checkpoint(e, path, sizeof path, &bytes, &d) != OML_OK)
            LOG_ERROR("persist", "final checkpoint failed: %s (the log keeps everything)", d.msg);
    }
    if (oml_wal_close(e->wal, &d) != OML_OK)
        LOG_ERROR("persist", "closing the write-ahead log: %s", d.msg);
    e->wal = NULL;
}
