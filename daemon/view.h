/* view.h - the serving view: one model snapshot + the index of every stored
 * item under it, immutable, refcounted, swapped in by pointer.
 *
 * Queries take a reference on the current view (omld_views_acquire), run on
 * any thread against it, and release it; the indexer thread builds the next
 * view off to the side and swaps it in, so a query never waits for learning
 * and learning never waits for a query (DESIGN.md, rules). The views object
 * owns the indexer thread: omld_views_submit() hands it the newest snapshot
 * (latest wins: an older one still waiting is dropped), and it builds the
 * index under the store's read lock. */
#ifndef OMLD_VIEW_H
#define OMLD_VIEW_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "depth.h"
#include "index.h"
#include "metrics.h"
#include "snapshot.h"
#include "store.h"

typedef struct omld_view {
    atomic_int _refs;
    oml_index *ix;          /* owns a reference on ix->snap; borrowed from base if set */
    /* A view that serves a newer model than its index's (rerank.h): the
     * view whose index it uses (a reference) and that model (a reference).
     * Both NULL: the index's own model serves. */
    struct omld_view *base;
    oml_snapshot *fresh;
    uint64_t version;       /* model version (== ix->snap->version) */
    uint64_t updates;       /* triplets the model had learned */
    uint64_t published_ns;  /* omld_now_ns() when it was swapped in */
    /* An index with inverted lists: of the exact k nearest rows per head
     * of a sample of its queries, how many its search found (query.c). */
    atomic_uint_fast64_t recall_hits, recall_total;
    omld_depth depth;       /* how deep its fresh views' candidates go (depth.h) */
    uint64_t snapshot_ns;   /* omld_now_ns() when its snapshot was taken */
    uint32_t shard_i, shard_n; /* its index holds shard shard_i of shard_n (n <= 1: all) */
} omld_view;

/* The row of the item stored now at `slot`, of generation `gen`
 * (oml_store_generation), in the view's index: -1 when the index does not
 * hold that slot at that generation (the view predates the item, or the
 * slot was reused since). A view has no map of ids of its own (at 1M items
 * that was 50 MB a view, two of them while a rebuild swaps in): its rows
 * are in ascending slot order, and the store names the slot. */
int32_t omld_view_row_at(const omld_view *v, uint32_t slot, uint32_t gen);

/* The model the view serves: the fresh one, else the index's. */
static inline const oml_snapshot *omld_view_model(const omld_view *v)
{
    return v->fresh ? v->fresh : v->ix->snap;
}

/* Whether v's index keeps its items' float embeddings; 0: only its
 * lists' codes (omld_views_set_rerank), and what re-ranks exactly takes
 * its rows from the store (fresh.h omld_fresh_rows). */
static inline int omld_view_floats(const omld_view *v)
{
    return v->ix->emb_cols != NULL || v->ix->hl == NULL;
}

omld_view *omld_view_retain(omld_view *v);
void omld_view_release(omld_view *v); /* accepts NULL; frees at zero */

typedef struct omld_views omld_views;

/* Reader-writer lock the store's owner holds (write) while it mutates the
 * store; the indexer holds it (read) while it builds. */
typedef struct omld_store_lock {
    pthread_rwlock_t rw;
    /* Changed (under rw held for writing) whenever the whole store is
     * swapped for another (a rollback, a replica's bootstrap): a view
     * gathered across a swap would mix two stores' rows and label ids. */
    uint64_t generation;
} omld_store_lock;

/* omld_view_row_at with the id's slot looked up in store under lock's read
 * lock (lock NULL: a store no other thread changes); -1 when the store
 * does not hold the id either. */
int32_t omld_view_row(const omld_view *v, const oml_store *store, omld_store_lock *lock,
                      const char *id, size_t len);

/* Starts the indexer thread. store and lock are borrowed (the engine owns
 * them and outlives the views). on_publish (may be NULL) is called on the
 * indexer thread after each swap, e.g. to wake the loop. 0 or -1. */
int omld_views_create(omld_views **out, const oml_store *store, omld_store_lock *lock,
                      omld_metrics *metrics, void (*on_publish)(void *arg, const omld_view *v),
                      void *arg);
/* Stops and joins the indexer, releases the current view. Accepts NULL. */
void omld_views_destroy(omld_views *vs);
/* omld is stopping: a build in progress ends at its next gather (at 1M
 * items a build takes seconds, and the final checkpoint ran beside it)
 * and every later one at its first; the current view stays. Accepts
 * NULL. */
void omld_views_stop_building(omld_views *vs);

/* From views built after this call, an index of at least min_items items
 * has inverted lists (index.h); 0 (the default): never. Its queries probe
 * what reached target_recall on a sample (oml_index_calibrate; 0: an
 * eighth of the rows). */
void omld_views_set_lists(omld_views *vs, uint64_t min_items, double target_recall);

/* From now on, while the current index has at least min_items items, each
 * submitted model is served at once over that index (queries re-rank its
 * candidates under the new model: rerank.h) while the indexer rebuilds
 * the index behind it; 0 (the default): a model is served only once its
 * own index is built. An index of at least min_items items with lists
 * then also drops its float columns once calibrated (oml_index_drop_columns:
 * a third of the raw features at a million items): what re-ranks exactly
 * on it takes its rows from the store. */
void omld_views_set_rerank(omld_views *vs, uint64_t min_items);
/* A shard (option shard = i/n, n > 1): views index only the items whose id
 * hashes to shard i (src/shard.h). Before the first publish. */
void omld_views_set_shard(omld_views *vs, uint32_t i, uint32_t n);

/* While fresh views serve every new model (omld_views_set_rerank), a
 * rebuild whose only news is a newer model waits until the last build's
 * time x (1 - duty) / duty has passed since it ended, so such rebuilds
 * take at most `duty` of a core (at a million items a build takes tens
 * of seconds; the fresh views answer under the newest model meanwhile).
 * Items put or deleted since the last build began start one at once.
 * duty in (0, 1); anything else (the default 1): no wait. */
void omld_views_set_duty(omld_views *vs, double duty);

/* The indexer keeps its builder's buffers (features, embeddings, ids) for
 * the next build while they hold at most `bytes` (0, the default: freed
 * after each build), and only for indexes below the re-ranking bound
 * (omld_views_set_rerank: above it rebuilds are seconds apart). For views rebuilt every publish: at 35,000 items
 * realloc copies and fresh pages were about a quarter of a build. Before the first
 * publish. */
void omld_views_keep_builder(omld_views *vs, size_t bytes);

/* With a model that reads its input through the start's basis, the
 * indexer keeps the projected input of the store's slots below max_slots
 * between builds (projcache.h), so a rebuild for a new model projects only
 * the items put since (0, the default: none). Before the first publish. */
void omld_views_keep_projections(omld_views *vs, uint32_t max_slots);

/* The indexer thread's nice value above the process's (setpriority on its
 * own thread id, at its next build): the learner, the connections and the
 * queries then take the cores before an index build does. 0: unchanged. */
void omld_views_set_nice(omld_views *vs, int nice);

/* Hands a snapshot (ownership transferred) to the indexer. snapshot_ns is
 * when it was taken. Never blocks on an index build. */
void omld_views_submit(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns);

/* Builds a view synchronously on the calling thread (startup, tests), which
 * must hold the store's read lock or own the store, its embedding and lists
 * on up to `threads` threads (the start's first view: nothing else runs). 0 served, 1 refused (its
 * model or embeddings are not finite: not served, see omld_views_health),
 * -1 out of memory. */
int omld_views_publish_now(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns,
                           int threads);

/* 1 if the newest view built was served; 0 if it was refused because its
 * model or item embeddings hold a NaN or an infinity (the previous view, if
 * any, goes on serving), with the reason in why (cap bytes; may be NULL).
 * Any thread. */
int omld_views_health(omld_views *vs, char *why, size_t cap);

/* The current view with a reference taken, or NULL before the first one. */
omld_view *omld_views_acquire(omld_views *vs);

/* Version of the current view, 0 before the first. Lock-free. */
uint64_t omld_views_version(const omld_views *vs);

/* Blocks until the current view's version is >= version, or a view of
 * that version was built and refused, or timeout_ms passes; returns 1 if
 * the current view reached it. (Tests, benchmarks, freshness.) */
int omld_views_wait(omld_views *vs, uint64_t version, int timeout_ms);

#endif
