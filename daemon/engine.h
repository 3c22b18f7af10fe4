/* engine.h - the learner thread: the one owner of all learned state.
 *
 * Every request that changes state (PutItems, DeleteItems, AddTriplets,
 * AddPairs, Checkpoint, Promote, Rollback) is a command in one bounded FIFO in front of this
 * thread, in the order the loop decoded them. The thread takes commands in
 * groups; for each it checks what needs state (unknown ids, closure
 * conflicts), applies it to the item store, the closure and the OAHU
 * learner (one step per triplet), and then answers the whole group (the
 * write-ahead log's group commit belongs here, before the answers). One
 * thread, one total order: the model is a function of the command sequence.
 *
 * The FIFO is bounded in "cost" (triplets + items + pairs carried): when
 * submit() finds it full it refuses, and the caller pauses the connection
 * until the wake callback says there is room (backpressure, never drops).
 *
 * Every publish_every updates or publish_ms milliseconds (when anything
 * changed) the thread takes a snapshot and hands it to the views' indexer.
 *
 * Answers go back to the loop through a uv_async: done(ctx, reply) runs on
 * the loop thread, which then owns the reply. */
#ifndef OMLD_ENGINE_H
#define OMLD_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "closure.h"
#include "config.h"
#include "learner.h"
#include "metrics.h"
#include "models.h"
#include "omld.pb-c.h"
#include "options.h"
#include "reply.h"
#include "store.h"
#include "view.h"

typedef struct omld_engine omld_engine;

/* Called on the loop thread with the answer (owned by the callee). */
typedef void (*omld_engine_done_fn)(void *ctx, omld_reply *reply);

/* Model and learning state as plain numbers, for /status and StatusResponse. */
typedef struct omld_model_stats {
    oml_config cfg;
    char preset[32];
    int heads;
    int prepared;                     /* the data-dependent start has happened */
    int32_t start_init;               /* the start it took (enum oml_init) */
    float start_error[2];             /* the auto start's leave-one-out kNN errors:
                                         standardised, whitened (NaN: not judged) */
    float alpha[OML_MAX_HEADS];
    float loss_ema[OML_MAX_HEADS];
    uint64_t updates, satisfied, utilised;
    double recent_accuracy;           /* test-then-train over the newest recent_n (NaN: none) */
    uint32_t recent_n;
    uint64_t steps, rehearsed, skipped; /* optimiser steps; rehearsed triplets; refused steps */
    uint64_t replay_triplets, replay_capacity; /* the rehearsal ring: kept, bound */
    uint64_t items;                   /* live stored items */
    uint32_t labels;                  /* distinct labels */
    uint64_t queue_depth;             /* triplets waiting for the learner */
    uint64_t queue_capacity;
    oml_closure_stats closure;
    uint64_t view_version;            /* newest published view, 0 before */
    uint64_t view_age_ms;             /* since that view's snapshot was taken */
    uint64_t view_items;
    uint64_t view_updates;            /* triplets learned by the view's model */
    uint32_t view_lists;              /* its index's inverted lists per head, 0: every query
                                         scans all */
    uint32_t view_lists_scanned;      /* lists a query scans, all heads together (calibrated;
                                         a head re-ranking another's scan adds none) */
    uint64_t view_index_version;      /* the model its index was built under (< view_version:
                                         queries re-rank the index's candidates) */
    uint64_t view_float_bytes;        /* its index's float embeddings (oml_index_float_bytes;
                                         0 with lists: only their codes) */
    uint64_t view_code_bytes;         /* its index's codes (oml_index_code_bytes) */
    int view_coded_lists;             /* its lists were coded as its items were embedded
                                         (oml_index_builder_code_lists: no float columns ever) */
    uint64_t view_recall_hits, view_recall_total; /* its sampled recall (query.c) */
    uint32_t view_depth_step;    /* its fresh views' candidates' step (depth.h) */
    double view_depth_share;     /* that step's share of the depth sample (NaN: none yet) */
    uint64_t view_depth_samples; /* depth samples taken on this index */
    /* persistence (persist.c), as of the last group the learner took */
    uint64_t wal_bytes;               /* write-ahead log segments on disk */
    uint64_t wal_records_since_ckpt;  /* log records the newest checkpoint does not hold */
    uint64_t ckpt_unix_ms;            /* wall clock of the newest checkpoint; 0: none */
    uint64_t ckpt_duration_ms;        /* how long the last checkpoint written took */
    uint64_t ckpt_pause_ms;           /* how long the learner stopped for the last one */
    uint64_t ckpt_written, ckpt_failed; /* checkpoints written / failed since start */
    int read_only;                    /* the log cannot be written: changes refused */
    char read_only_why[256];
} omld_model_stats;

/* Builds the model configuration from the daemon options (preset + any
 * overrides) and validates it; -1 with err naming the option. */
int omld_engine_model_config(const omld_config *opts, oml_config *out, char *err, size_t errlen);

/* A recovered model's configuration `stored` against the options: every
 * option the operator set (dim, seed, sizes, rates) must agree, else -1
 * with err naming the option. What was left to the preset the model keeps
 * (an earlier release's preset, say: upgrading keeps the model as it was),
 * with a warning when that differs from *cfg; *cfg becomes `stored`. */
int omld_engine_model_adopt(const omld_config *opts, const oml_config *stored, oml_config *cfg,
                            char *err, size_t errlen);

/* Creates the store, closure and learner, recovers data_dir (newest
 * checkpoint + log replay), publishes the first view, starts the thread.
 * 0 or -1 with err. create + run in one call (tests). */
int omld_engine_start(omld_engine **out, uv_loop_t *loop, const omld_config *opts,
                      omld_metrics *metrics, char *err, size_t errlen);

/* The first half: everything but the loop's part (the recovery, which may
 * take a minute on a long log). Any thread, while nothing else uses the
 * engine; opts and metrics are borrowed for the engine's life. On success
 * the engine takes no request until omld_engine_run. 0, or -1 with err and
 * *out NULL. */
int omld_engine_create(omld_engine **out, const omld_config *opts, omld_metrics *metrics,
                       char *err, size_t errlen);

/* The second half, on the loop thread: the answer handle and the learner
 * thread. -1 with err: the engine must still be stopped and destroyed. */
int omld_engine_run(omld_engine *e, uv_loop_t *loop, char *err, size_t errlen);

/* Queues a validated mutation request (borrowed until done is called).
 * cost: triplets + items + pairs it carries (>= 1). Returns 0, or 1 if the
 * queue has no room now (nothing queued; retry after the wake callback).
 * A single request costing more than the capacity is accepted when the
 * queue is empty, so nothing can be stuck forever. */
int omld_engine_submit(omld_engine *e, const Omld__Request *req, uint64_t cost,
                       omld_engine_done_fn done, void *ctx);

/* A batch from a primary's log for a read replica (replica.c): a checkpoint
 * to start from (ckpt set: the state is replaced by it, at log position
 * load_lsn), then entries in log order: records (version 0) applied as
 * recovery applies them, and view markers (version > 0) at which the
 * replica publishes a view of that version, as the primary did at the
 * same position. The engine fills applied_lsn and version. */
typedef struct omld_repl_entry {
    uint64_t lsn, version;
    uint8_t type;
    size_t len;
    uint8_t *payload;
} omld_repl_entry;

typedef struct omld_repl_batch {
    uint8_t *ckpt;
    size_t ckpt_len;
    uint64_t load_lsn;
    omld_repl_entry *e;
    size_t n;
    uint64_t applied_lsn, version; /* out: the last record applied, the view published */
} omld_repl_batch;

/* Queues a replica's batch (borrowed until done is called; the reply says
 * OK or why it failed). 0, or -1 (out of memory or stopping). */
int omld_engine_follow(omld_engine *e, omld_repl_batch *b, omld_engine_done_fn done, void *ctx);

/* A replica becomes the primary (promote_replica.c), after every batch queued
 * before: its state is written as the checkpoint at the last record it
 * applied, its log continues from there and pub (started, holding the
 * lease) publishes it; from then on it takes writes and no batches. The
 * reply: PromoteReplicaResponse, or why not. 0, or -1 (out of memory or
 * stopping). */
struct omld_replicate;
int omld_engine_promote(omld_engine *e, struct omld_replicate *pub, omld_engine_done_fn done,
                        void *ctx);

/* The primary's publisher (replicate.h), before omld_engine_run. */
void omld_engine_set_replicate(omld_engine *e, struct omld_replicate *r);

/* Called on the loop thread whenever room was freed in the queue. */
void omld_engine_set_wake(omld_engine *e, void (*wake)(void *arg), void *arg);

/* The views (for queries) and the store with its lock (for reads by id). */
omld_views *omld_engine_views(omld_engine *e);
const oml_store *omld_engine_store_rdlock(omld_engine *e);
void omld_engine_store_unlock(omld_engine *e);
/* The store and its lock, for omld_query_ctx (reads under lock->rw). */
void omld_engine_store_ref(omld_engine *e, const oml_store **store, omld_store_lock **lock);

void omld_engine_stats(omld_engine *e, omld_model_stats *out);

/* The batch-model registry (models.h), created at start after recovery. */
struct omld_models;
struct omld_models *omld_engine_models(omld_engine *e);
/* The live model's configuration (fixed for the daemon's life). */
const oml_config *omld_engine_config(omld_engine *e);
/* 1 and the promoted model's name if a Rollback has something to undo. */
int omld_engine_rollback_info(omld_engine *e, char *name, size_t cap);

/* A promote or rollback that began to serve: what the dashboard lists, so
 * that it stays visible after the version history scrolls on or the page
 * reloads. Kept in memory (the newest OMLD_PROMOTES_KEPT since start). */
typedef struct omld_promote_event {
    uint64_t unix_ms;  /* when its view began to serve */
    uint64_t version;  /* the live model version it made */
    int rollback;      /* 0: the promote of model; 1: the rollback of it */
    char model[OMLD_MODEL_NAME_MAX + 1];
} omld_promote_event;
#define OMLD_PROMOTES_KEPT 20
/* Copies the kept events, oldest first, into out (cap of them at most);
 * returns how many. */
int omld_engine_promotes(omld_engine *e, omld_promote_event *out, int cap);

/* Stops taking commands, finishes those queued (answering each), stops the
 * thread and the indexer, writes the final checkpoint. Must be called on
 * the loop thread; the loop must run afterwards until the async handle is
 * closed (omld_engine_destroy). Also for an engine that was created but
 * never ran (a shutdown during recovery). */
void omld_engine_stop(omld_engine *e);
void omld_engine_destroy(omld_engine *e); /* accepts NULL; after stop */

#endif
