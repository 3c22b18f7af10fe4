/* engine_int.h - the learner thread's state, shared by the files that
 * make up the engine: engine.c (thread, queue, publishing, API), apply.c
 * (one command's effect on the state) and persist.c (write-ahead log,
 * checkpoints, recovery). Not for use outside the engine. */
#ifndef OMLD_ENGINE_INT_H
#define OMLD_ENGINE_INT_H

#include <pthread.h>
#include <sys/types.h>
#include <stdatomic.h>

#include "engine.h"
#include "idempotency.h"
#include "models.h"
#include "replay.h"
#include "wal.h"

#define DERIVED_PER_PAIR 8   /* triplets sampled from the closure per new pair fact */
#define CLOSURE_MAX_DIS_EDGES (1u << 24)

typedef struct cmd {
    struct cmd *next;
    const Omld__Request *req;
    uint64_t cost;
    omld_engine_done_fn done;
    void *ctx;
    omld_reply *reply;
    int changed;
    uint64_t wait_version;   /* > 0: answered once the serving view is this new (loop) */
    uint64_t need_lsn;       /* a held Checkpoint: answered once one at this position is durable */
    int held;                /* ... not answered with its group */
    uint64_t wait_until_ns;  /* ... or at this time */
    omld_repl_batch *batch;  /* a replica's records to apply (req is NULL then) */
    struct omld_replicate *promote; /* a replica's promotion: its publisher (req NULL too) */
    uint64_t wait_lsn;       /* replicate_sync: answered once Redis holds the log up to here */
    struct omld_replicate *sync_pub; /* ... as this publisher says (loop) */
} cmd;

typedef struct cmd_list {
    cmd *head, *tail;
} cmd_list;

struct omld_engine {
    omld_config opts;
    oml_config model_cfg;
    omld_metrics *metrics;
    oml_store *store;
    omld_store_lock lock;
    oml_closure *closure;
    oml_learner *learner;
    oml_replay replay;          /* triplets kept for rehearsal (replay.h) */
    omld_idem idem;             /* keys of the write requests applied (idempotency.h) */
    omld_views *views;

    /* inbox: guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cmd_list inbox;
    uint64_t inbox_cost;
    uint64_t capacity;
    int stopping;
    int wake_wanted;       /* a submit was refused since the last wake */

    /* answers: guarded by out_mu */
    pthread_mutex_t out_mu;
    cmd_list outbox;
    int wake_due;
    uv_async_t async;
    int async_open;        /* async initialised on the loop (omld_engine_run) */
    cmd_list waiting;      /* loop thread: answers held until their view serves */
    uv_timer_t wait_timer; /* ... checked every few ms while any is held */
    int wait_timer_open;
    void (*wake)(void *arg);
    void *wake_arg;

    pthread_t thread;
    int running;
    atomic_uint_fast64_t queued_triplets;

    /* publishing: engine thread only */
    uint64_t version;
    /* The provisional start last computed (engine.c), and the stored items
     * it was computed from: reused until the store has grown or shrunk by
     * a quarter, since a start costs the learner ~0.3 s (two candidate
     * starts and their leave-one-out judgement) and publishes come every
     * publish_ms while items pour in. */
    oml_snapshot *provisional;
    uint32_t provisional_items;
    uint64_t published_updates;
    uint64_t published_ns;
    uint64_t published_lsn;     /* the log position of the newest view */
    int dirty;

    /* for readers: guarded by stats_mu */
    pthread_mutex_t stats_mu;
    omld_model_stats stats;
    char stats_rb_name[OMLD_MODEL_NAME_MAX + 1]; /* the promoted model Rollback would undo */
    omld_promote_event promotes[OMLD_PROMOTES_KEPT]; /* a ring, the oldest at promotes_next */
    int n_promotes, promotes_next;

    /* durability: engine thread only (persist.c) */
    oml_wal *wal;
    uint64_t ckpt_lsn;          /* log position of the newest checkpoint */
    uint64_t records_since_ckpt;
    uint64_t ckpt_ns;
    uint64_t replayed;          /* records replayed by the last recovery */
    uint64_t replay_log_ns;     /* last progress line of a long replay */
    uint64_t ckpt_unix_ms;      /* wall clock of the newest checkpoint (0: none) */
    uint64_t ckpt_dur_ns;       /* the last one written took */
    uint64_t ckpt_pause_ns;     /* the learner stopped for the last one started (the
                                   whole write in the foreground; commit, sync and fork
                                   in the background) */
    uint64_t ckpt_written, ckpt_failed;
    pid_t bg_pid;               /* a background checkpoint's writer (0: none) */
    uint64_t bg_lsn, bg_t0, bg_records, bg_updates; /* ... its position, start, records, learner updates */
    char ckpt_path[600];        /* the newest checkpoint written: its file, size, learner updates */
    uint64_t ckpt_bytes, ckpt_updates;
    cmd_list ckpt_waiting;      /* Checkpoint requests held for a background one (engine thread) */
    int bg_failed;              /* the last background checkpoint failed (its waiters get an error) */
    int read_only;              /* the log cannot be written: refuse changes */
    uint64_t read_only_since;
    char read_only_why[512];

    /* batch models: the registry (thread-safe; created after recovery) and
     * what Promote / Rollback need (engine thread only) */
    omld_models *models;
    uint64_t store_gen;         /* bumped by every put / delete that changed the store */
    uint64_t models_gen;        /* store_gen the models' indexes were last asked to follow */
    uint8_t *rb_buf;            /* the live learner before the last promote (model encoding) */
    size_t rb_len;
    char rb_name[OMLD_MODEL_NAME_MAX + 1]; /* the model that promote put in */
    uint8_t *promote_log;       /* set by apply: the model bytes the log record must carry */
    size_t promote_log_len;
    int publish_now;            /* set by apply: publish and wait for the view before answering */

    /* engine-thread scratch */
    oml_triplet *derived;
    const float **rows;     /* (3 * max_batch) feature pointers of a triplet batch */
    uint32_t *slots;        /* (3 * max_batch) their store slots */
    float *weights;         /* (max_batch) their weights (omld.proto Triplet.weight) */

    /* replication: the primary's publisher (NULL: none), or a replica
     * (follow.c: it applies the primary's records and publishes only at its
     * view markers; no rehearsal, publishing or checkpoints of its own) */
    struct omld_replicate *pub;
    int replica;
    uint64_t follow_lsn;        /* a replica: the last record of the primary's log applied */

    /* rehearsal in idle time (engine.c): rehearsed triplets still allowed,
     * and when the last request was taken */
    double idle_credit;
    uint64_t last_request_ns;
};

/* apply.c: applies one mutation to the state and fills r. Returns 1 if the
 * state changed (even partly, e.g. pairs before a conflicting one), which is
 * what the write-ahead log must record so that replay reproduces it. */
int omld_apply(omld_engine *e, const Omld__Request *q, omld_reply *r);

/* apply.c: the stored items the model's data-dependent start is taken
 * from, their slots into at (m) and labels into labels (m): the live ones
 * within max_feature_abs in slot order, every (count/m)-th when m is below
 * their count. Returns how many. The start reads their rows in place
 * (oml_learner_prepare_at over oml_store_matrix) and takes at most
 * OMLD_START_SAMPLE of them. */
#define OMLD_START_SAMPLE 65536
uint32_t omld_start_items(omld_engine *e, uint32_t m, int32_t *at, int32_t *labels);

/* apply.c: `steps` rehearsal steps from the ring (live, and on replay of
 * their log record). */
int omld_rehearse(omld_engine *e, int32_t steps); /* returns the steps taken */

/* engine.c: takes a snapshot and hands it to the indexer (engine thread). */
void omld_engine_publish(omld_engine *e);

/* follow.c: a replica's batch (records, view markers, or a checkpoint to
 * start from), applied on the learner thread; r gets an error if it fails. */
void omld_follow_apply(omld_engine *e, omld_repl_batch *b, omld_reply *r);

/* follow.c: the replica becomes the primary (promote_replica.h): its state made
 * durable as the checkpoint at the last record applied, its own log
 * continuing from there, published by pub. r gets the answer. */
void omld_follow_promote(omld_engine *e, struct omld_replicate *pub, omld_reply *r);

/* persist.c: a replica's hooks: one record from the primary's log, applied
 * as recovery applies it (0 or an OML_E* code); and the state reloaded from
 * the checkpoints in the data directory (0 or -1 with err). */
int omld_persist_apply_record(omld_engine *e, uint8_t type, uint64_t lsn, const uint8_t *p,
                              size_t len);
int omld_persist_reload(omld_engine *e, char *err, size_t errlen);
/* persist.c: a promoted replica's state as the checkpoint at lsn (path
 * written into path), and its log emptied to continue at lsn + 1. OML_OK
 * or the code with d. */
int omld_persist_rebase(omld_engine *e, uint64_t lsn, char *path, size_t path_cap, oml_diag *d);

/* persist.c: the write-ahead log and checkpoints (engine thread only). */
int omld_persist_open(omld_engine *e, char *err, size_t errlen);   /* load + replay */
int omld_persist_log(omld_engine *e, const Omld__Request *q);      /* append one change */
int omld_persist_log_rehearse(omld_engine *e, int32_t steps);      /* append idle rehearsal */
int omld_persist_commit(omld_engine *e, oml_diag *d);               /* group commit */
void omld_persist_rollback(omld_engine *e, const char *why);        /* undo + read-only */
int omld_persist_writable(omld_engine *e);                          /* 0 while read-only */
int omld_persist_checkpoint(omld_engine *e, char *path, size_t path_cap, uint64_t *bytes,
                            oml_diag *d);
void omld_persist_maybe_checkpoint(omld_engine *e);
void omld_persist_close(omld_engine *e);                            /* final checkpoint */
int omld_persist_bg_poll(omld_engine *e);  /* reaps a finished background checkpoint; 1: running */
int omld_persist_bg_start(omld_engine *e, oml_diag *d); /* 1 started or running, 0 written now, <0 */
uint64_t omld_persist_position(const omld_engine *e);   /* the log's last position */
void omld_persist_bg_wait(omld_engine *e); /* waits for a running one */

#endif
