/* view.c - serving views and the indexer thread (see view.h).
 *
 * The current view pointer is guarded by a mutex held only for a pointer
 * copy and a reference increment, never during a build or a query, so the
 * loop thread cannot be held up by the indexer. The indexer keeps at most
 * one snapshot waiting: a newer one replaces it (the older one is released
 * unbuilt), so a slow build never queues up stale work.
 *
 * A built view whose model weights or item embeddings are not all finite is
 * never swapped in (issue 12: one poisoned step made every query answer
 * nothing while /readyz said ready): the previous view goes on serving, the
 * refusal is counted (views_refused), logged once per reason and kept for
 * omld_views_health(), which /readyz and Health report. */
#include "view.h"

#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fresh.h"
#include "log.h"
#include "reply.h"

struct omld_views {
    const oml_store *store;
    omld_store_lock *lock;
    omld_metrics *metrics;
    void (*on_publish)(void *arg, const omld_view *v);
    void *arg;

    pthread_mutex_t mu;
    pthread_cond_t cv;          /* signalled on a new pending snapshot, a publish, stop */
    omld_view *current;         /* guarded by mu */
    atomic_uint_fast64_t version;
    uint64_t built;             /* guarded by mu: newest version built (served or refused) */
    int refused;                /* guarded by mu: the newest build was refused */
    char refused_why[256];      /* guarded by mu */
    oml_snapshot *pending;      /* guarded by mu; latest wins */
    atomic_uint_fast64_t lists_min_items; /* inverted lists from this many items (0: never) */
    atomic_uint_fast64_t rerank_min_items; /* fresh views from this many items (0: never) */
    uint32_t shard_i, shard_n;  /* index only shard shard_i of shard_n (n <= 1: every item) */
    _Atomic double target_recall;  /* the lists' calibration target (0: none) */
    _Atomic double duty;        /* share of a core model-only rebuilds may take (1: all) */
    /* Indexer thread only: the store as the last build began gathering it
     * (oml_store_changes, the lock's generation), and the earliest start
     * of a rebuild for a newer model alone (omld_views_set_duty). */
    uint64_t built_changes, built_gen, next_build_ns;
    int have_built;
    oml_index_builder builder; /* indexer thread only: its buffers kept between builds */
    size_t keep_builder;        /* ... while they hold at most this (omld_views_keep_builder) */
    oml_projcache projections;  /* indexer thread only: inputs on the basis between builds */
    oml_probe_history probes;   /* indexer thread only: the calibrations' lists a head */
    atomic_int nice;            /* the indexer's nice above the process's (omld_views_set_nice) */
    int nice_set;               /* indexer thread only: the nice it last applied */
    uint64_t pending_ns;
    int stop;
    atomic_int stopping;        /* omld_views_stop_building, and first in omld_views_destroy:
                                   a build in progress ends at its next gather (at 1M a
                                   build takes seconds, and stopping omld waited for it) */
    int started;
    pthread_t thread;
};

int32_t omld_view_row_at(const omld_view *v, uint32_t slot, uint32_t gen)
{
    const oml_index *ix = v->ix;
    int32_t row = oml_index_row_of_slot(ix, slot);
    return row >= 0 && ix->gens[row] == gen ? row : -1;
}

int32_t omld_view_row(const omld_view *v, const oml_store *store, omld_store_lock *lock,
                      const char *id, size_t len)
{
    uint32_t slot, gen = 0;
    if (lock)
        pthread_rwlock_rdlock(&lock->rw);
    int found = oml_store_find(store, id, len, &slot) == OML_OK;
    if (found)
        gen = oml_store_generation(store, slot);
    if (lock)
        pthread_rwlock_unlock(&lock->rw);
    return found ? omld_view_row_at(v, slot, gen) : -1;
}

/* Set when a view's index without float columns is freed: a whole index
 * of a million items, much of it in blocks under glibc's mmap threshold
 * (which rises as large blocks are freed), whose pages its arenas keep.
 * Process-wide: malloc_trim is. */
static atomic_int trim_due;

/* On the indexer thread: gives those pages back, wherever the index was
 * freed (the swap, or later by the last query that held the old view). At
 * 1M, 1.30x of the raw features between builds without it, 1.21x with it
 * after each swap (one run each). */
static void trim_if_due(void)
{
    if (!atomic_exchange(&trim_due, 0))
        return;
    uint64_t t0 = omld_now_ns();
    malloc_trim(0);
    LOG_DEBUG("indexer", "malloc_trim took %.1f ms", (double)(omld_now_ns() - t0) / 1e6);
}

omld_view *omld_view_retain(omld_view *v)
{
    atomic_fetch_add_explicit(&v->_refs, 1, memory_order_relaxed);
    return v;
}

void omld_view_release(omld_view *v)
{
    if (v == NULL)
        return;
    int before = atomic_fetch_sub_explicit(&v->_refs, 1, memory_order_acq_rel);
    assert(before >= 1); /* released more often than retained */
    if (before != 1)
        return;
    if (v->base) { /* a fresh view: its model and its base */
        oml_snapshot_release(v->fresh);
        omld_view_release(v->base);
        free(v);
        return;
    }
    if (v->ix && v->ix->hl && v->ix->emb_cols == NULL)
        atomic_store(&trim_due, 1);
    oml_index_destroy(v->ix);
    free(v);
}

/* A view serving snap over base's index (base: a built view, retained). */
static omld_view *fresh_view(omld_view *base, oml_snapshot *snap, uint64_t snapshot_ns)
{
    omld_view *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    atomic_init(&v->_refs, 1);
    v->base = omld_view_retain(base);
    v->ix = base->ix;
    v->fresh = oml_snapshot_retain(snap);
    v->version = snap->version;
    v->updates = snap->updates;
    v->snapshot_ns = snapshot_ns;
    return v;
}

/* Values of x (n) that are NaN or infinite. */
static size_t count_non_finite(const float *x, size_t n)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    return bad;
}

/* Records that view `version` was not served, and why; wakes waiters. */
static void view_refuse(omld_views *vs, uint64_t version, const char *why)
{
    pthread_mutex_lock(&vs->mu);
    int again = vs->refused && strcmp(vs->refused_why, why) == 0;
    vs->refused = 1;
    snprintf(vs->refused_why, sizeof vs->refused_why, "%s", why);
    if (version > vs->built)
        vs->built = version;
    uint64_t serving = atomic_load(&vs->version);
    omld_count(&vs->metrics->views_refused, 1);
    pthread_cond_broadcast(&vs->cv);
    pthread_mutex_unlock(&vs->mu);
    if (!again) /* once per reason, not once per publish */
        LOG_ERROR("indexer", "view %llu is not served: %s; %s", (unsigned long long)version, why,
                  serving ? "the previous view goes on serving" : "no view is served");
}

/* The index of snap over the store. lock NULL: the store cannot change
 * meanwhile (the learner thread builds). Else the store's read lock is
 * held only while items are copied out, OML_INDEX_GATHER_ROWS at a time,
 * never while they are embedded: puts wait for one gather, not for a
 * whole build (issue 14: at a million items a build takes seconds). */
/* The store's read lock, when there is one (NULL: the caller owns the store). */
static void store_rdlock(omld_store_lock *lock)
{
    if (lock)
        pthread_rwlock_rdlock(&lock->rw);
}

static void store_unlock(omld_store_lock *lock)
{
    if (lock)
        pthread_rwlock_unlock(&lock->rw);
}

/* Whether the store was swapped for another since generation gen (the
 * read lock held; no lock: it cannot be). */
static int store_swapped(const omld_store_lock *lock, uint64_t gen)
{
    return lock != NULL && lock->generation != gen;
}

/* Whether an index of n items is past the re-ranking bound
 * (omld_views_set_rerank): new models serve over it at once, and it keeps
 * only its lists' codes. */
static int past_rerank_bound(omld_views *vs, uint64_t n)
{
    uint64_t min = atomic_load(&vs->rerank_min_items);
    return min > 0 && n >= min;
}

/* "; lists scanned per head: 307 (recall 0.989), 307, head 0's (recall
 * 0.964), 136 (recall 0.828; its first pass keeps 2048); head 0 keeps x16
 * for the others" for an index with lists (the calibration's outcome, which
 * a query's cost follows), else "". */
static void describe_lists(const oml_index *ix, char *buf, size_t cap)
{
    buf[0] = '\0';
    size_t at = 0;
    for (int h = 0; ix->hl && h < ix->heads && at < cap; h++) {
        const oml_hlist *hl = &ix->hl[h];
        int w = snprintf(buf + at, cap - at,
                         hl->pq_keep > 0 && hl->pq_keep != OML_HLIST_PQ_KEEP && hl->shared_from < 0
                             ? "%s%d%s (recall %.3f; its first pass keeps %d)"
                             : "%s%d%s (recall %.3f)",
                         h ? ", " : "; lists scanned per head: ", hl->n_probe,
                         hl->shared_from >= 0 ? ", head 0's" : "", (double)hl->recall,
                         (int)hl->pq_keep);
        at += w > 0 ? (size_t)w : 0;
    }
    if (ix->hl && ix->hl[0].donor > 1 && at < cap)
        snprintf(buf + at, cap - at, "; head 0 keeps x%d for the others", ix->hl[0].donor);
}

/* Whether a build of `live` items codes its lists as it embeds them
 * (index.h, oml_index_builder_code_lists): an index that gets lists and,
 * past the re-ranking bound, would drop its float columns once built; on
 * one node (a shard's answers read its columns). It never holds them, so
 * a rebuild holds the new lists beside the serving index, not 1.15 GB of
 * columns too at a million items. */
static int codes_lists(omld_views *vs, uint64_t live)
{
    uint64_t lists_min = atomic_load(&vs->lists_min_items);
    return lists_min > 0 && live >= lists_min && past_rerank_bound(vs, live) &&
           live >= OML_INDEX_CODE_LISTS_MIN && vs->shard_n <= 1;
}

/* The heads that share head 0's scan in the serving index (bit h): a
 * coded rebuild gives them no product codes, as the serving index's
 * were dropped once calibrated (oml_index_drop_shared_pq). At a million
 * items that is 48 MB less in each of the two indexes a rebuild holds.
 * A head that parts from head 0 in the new index scans its int8 codes
 * whole until the next rebuild codes them again. */
static uint32_t heads_sharing(omld_views *vs)
{
    uint32_t mask = 0;
    pthread_mutex_lock(&vs->mu);
    const oml_index *ix = vs->current ? vs->current->ix : NULL;
    for (int h = 1; ix && ix->hl && h < ix->heads && h < 32; h++)
        if (ix->hl[h].shared_from >= 0)
            mask |= 1u << h;
    pthread_mutex_unlock(&vs->mu);
    return mask;
}

/* glibc raises its mmap threshold to the size of each large block freed
 * (up to 32 MB): once the first index is freed, an index's arrays of a few
 * MB come from the arenas, where what a rebuild frees fragments them and
 * stays resident until a trim. A fixed threshold keeps every block of 2
 * MB or more in a mapping of its own, given back when it is freed: at 1M
 * items omld-bench's peak RSS fell 1.31-1.33x -> 1.30x. Fixing it also
 * fixes the trim threshold at 128 kB, where each query's free trimmed its
 * arena's top and the next faulted the pages in again (classify p50 0.5
 * -> 0.66 ms at 1M), so that one is set to what glibc's own adjustment
 * reaches; the trim after each swap gives the rest back. Fixed from the
 * first coded build on, not before: at 35,000 items, whose index is
 * rebuilt every publish, it cost 8% of classify throughput (its codes'
 * arrays faulted in anew at every build). Per-call scratch on a hot path
 * stays under it (ivf.c's DOTS_BYTES). */
#define MMAP_THRESHOLD_BYTES (2 << 20)
#define TRIM_THRESHOLD_BYTES (64 << 20)
static void fix_malloc_thresholds(void)
{
    static atomic_int fixed;
    if (atomic_exchange(&fixed, 1))
        return;
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
    mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
}

/* The index in gathers, the store's read lock (if any) held for each
 * gather only; the indexer's builder keeps its buffers between builds. */
static int build_in_gathers(omld_views *vs, oml_index_builder *b, oml_snapshot *snap,
                            omld_store_lock *lock, uint64_t gen, int32_t dim, int coded,
                            oml_index **out)
{
    int rc = oml_index_builder_restart(b, snap, dim);
    b->shard_i = vs->shard_i;
    b->shard_n = vs->shard_n;
    b->cache = lock && !coded ? &vs->projections : NULL;
    if (coded && lock) /* a coded build projects every row anew: 40 MB freed */
        oml_projcache_free(&vs->projections);
    if (rc == OML_OK && coded)
        rc = oml_index_builder_code_lists(b);
    if (rc == OML_OK && coded)
        b->pq_skip = heads_sharing(vs);
    int more = 1;
    /* A swap between two gathers ends the build: the engine publishes
     * again after one, and that build starts on the new store. */
    while (rc == OML_OK && more > 0) {
        store_rdlock(lock);
        more = store_swapped(lock, gen) || atomic_load(&vs->stopping)
                   ? OML_ECANCELED
                   : oml_index_builder_gather(b, vs->store);
        store_unlock(lock);
        rc = more < 0 ? more : oml_index_builder_embed(b);
    }
    if (rc == OML_OK) {
        store_rdlock(lock);
        rc = store_swapped(lock, gen) ? OML_ECANCELED : oml_index_builder_finish(b, vs->store, out);
        store_unlock(lock);
    }
    /* From rerank_min_items items, rebuilds are seconds apart (fresh views
     * serve meanwhile) and the buffers' pages not worth keeping: 40 MB at
     * a million items, held through the lists' build too. */
    int rare = rc == OML_OK && past_rerank_bound(vs, (uint64_t)(*out)->n);
    if (b != &vs->builder || rc != OML_OK || rare ||
        oml_index_builder_bytes(b) > vs->keep_builder)
        oml_index_builder_free(b);
    else
        oml_index_builder_release_snapshot(b);
    return rc;
}

static int index_build(omld_views *vs, oml_snapshot *snap, omld_store_lock *lock, int threads,
                       oml_index **out)
{
    /* The indexer's own builder keeps its buffers; a build on another
     * thread (lock NULL: the learner's first view) has its own. */
    oml_index_builder own = {0}, *b = lock ? &vs->builder : &own;
    store_rdlock(lock); /* a rollback swaps the whole store struct in under the write lock */
    int32_t dim = oml_store_dim(vs->store);
    uint64_t gen = lock ? lock->generation : 0;
    int coded = codes_lists(vs, oml_store_count(vs->store));
    if (coded)
        fix_malloc_thresholds();
    if (lock) { /* the indexer's build: what a model-only rebuild is judged against */
        vs->built_changes = oml_store_changes(vs->store);
        vs->built_gen = gen;
        vs->have_built = 1;
    }
    store_unlock(lock);
    /* A shard's rows depend on the gathers in turn: embedded on one thread. */
    int embed_threads = lock == NULL && vs->shard_n <= 1 ? threads : 1;
    uint64_t t0 = omld_now_ns();
    int rc;
    if (embed_threads > 1) {
        /* The caller's store, nothing else running (a start's first view):
         * one run, its blocks on every thread, the same bits as in gathers. */
        rc = coded ? oml_index_builder_run_coded_threads(b, snap, vs->store, threads, out)
                   : oml_index_builder_run_threads(b, snap, vs->store, threads, out);
        oml_index_builder_free(b);
    } else {
        rc = build_in_gathers(vs, b, snap, lock, gen, dim, coded, out);
    }
    if (rc == OML_OK && atomic_load(&vs->stopping)) { /* its lists and calibration too */
        oml_index_destroy(*out);
        *out = NULL;
        rc = OML_ECANCELED;
    }
    /* Lists and their calibration need the index only: no lock. Out of
     * memory for them, the index scans every row. */
    uint64_t lists_min = atomic_load(&vs->lists_min_items), t1 = omld_now_ns(), t2 = t1;
    if (rc == OML_OK && (*out)->hl == NULL && lists_min > 0 &&
        (uint64_t)(*out)->n >= lists_min)
        oml_index_add_lists_threads(*out, threads);
    if (rc == OML_OK && (*out)->hl != NULL) {
        t2 = omld_now_ns();
        /* Coded lists re-rank the calibration's rows from the store. */
        omld_query_ctx q = {.store = vs->store, .lock = lock};
        oml_row_source src;
        omld_fresh_rows(&q, &src);
        oml_index_calibrate_from(*out, atomic_load(&vs->target_recall), threads, &src);
        if (lock) /* the indexer's rebuilds: one calibration is 64 queries (index.h) */
            oml_index_smooth_probes(*out, &vs->probes);
        oml_index_drop_shared_pq(*out);
        oml_index_drop_unread_maps(*out); /* 12 MB at 1M items, in each index a rebuild holds */
    } else if (rc == OML_OK) {
        oml_index_add_codes(*out); /* the exact scan's first pass (codescan.h) */
    }
    if (rc == OML_OK && (*out)->n_lists > 0) { /* its parts: a start's first view's at info */
        char probes[320], parts[160];
        describe_lists(*out, probes, sizeof probes);
        if (coded)
            snprintf(parts, sizeof parts, "%d items embedded and coded into %d lists a head "
                     "in %.1f s", (*out)->n, (*out)->n_lists, (double)(t1 - t0) / 1e9);
        else
            snprintf(parts, sizeof parts, "%d items embedded in %.1f s, %d lists a head in "
                     "%.1f s", (*out)->n, (double)(t1 - t0) / 1e9, (*out)->n_lists,
                     (double)(t2 - t1) / 1e9);
        if (lock == NULL)
            LOG_INFO("indexer", "view %llu built on %d thread(s): %s, calibrated in %.1f s%s",
                     (unsigned long long)snap->version, embed_threads, parts,
                     (double)(omld_now_ns() - t2) / 1e9, probes);
        else
            LOG_DEBUG("indexer", "view %llu: %s, calibrated in %.1f s",
                      (unsigned long long)snap->version, parts,
                      (double)(omld_now_ns() - t2) / 1e9);
    }
    return rc;
}

/* Builds a view of snap over the store (lock: see index_build). Takes
 * ownership of snap (released on failure). A view whose model or
 * embeddings hold a NaN or an infinity is never returned (it would answer
 * every query with nothing): *refused is set and the reason kept
 * (omld_views_health). */
static omld_view *view_build(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns,
                             omld_store_lock *lock, int threads, int *refused)
{
    *refused = 0;
    uint64_t t0 = omld_now_ns();
    omld_view *v = calloc(1, sizeof *v);
    int rc = v ? index_build(vs, snap, lock, threads, &v->ix) : OML_ENOMEM;
    if (rc == OML_OK) {
        v->shard_i = vs->shard_i;
        v->shard_n = vs->shard_n;
    }
    if (rc != OML_OK) {
        if (rc == OML_ECANCELED && atomic_load(&vs->stopping))
            LOG_INFO("indexer", "view %llu not built: omld is stopping",
                     (unsigned long long)snap->version);
        else if (rc == OML_ECANCELED)
            LOG_INFO("indexer", "view %llu not built: the store was reloaded while it was "
                     "gathered (the next view is built on the reloaded one)",
                     (unsigned long long)snap->version);
        else
            LOG_ERROR("indexer", "cannot build view %llu: %s", (unsigned long long)snap->version,
                      oml_strerror(rc));
        if (v) {
            oml_index_destroy(v->ix);
            free(v);
        }
        oml_snapshot_release(snap);
        return NULL;
    }
    size_t bad_params = count_non_finite(snap->params, snap->lay.count);
    int32_t row = -1;
    size_t bad_emb = oml_index_nonfinite(v->ix, &row);
    if (bad_params > 0 || bad_emb > 0) {
        char why[256];
        if (bad_params > 0) {
            snprintf(why, sizeof why, "the model is not finite: %zu of its %zu weights are NaN "
                     "or infinite", bad_params, snap->lay.count);
        } else {
            /* A finite model, but some item embeds to NaN / Inf: its features
             * are too large for the network's sums (see max_feature_abs). */
            char q[80] = "(deleted since)";
            store_rdlock(lock);
            size_t len;
            const char *id = oml_index_row_id(v->ix, vs->store, row, &len);
            if (id != NULL)
                omld_reply_quote(q, sizeof q, id, len);
            store_unlock(lock);
            snprintf(why, sizeof why, "item embeddings are not finite: %zu value(s), the first "
                     "of item %s, whose features are too large for the model (max_feature_abs)",
                     bad_emb, q);
        }
        view_refuse(vs, snap->version, why);
        *refused = 1;
        oml_index_destroy(v->ix);
        free(v);
        oml_snapshot_release(snap);
        return NULL;
    }
    /* Served by re-ranking from the store anyway (fresh views), an index
     * with lists needs its float columns no longer: a third of the raw
     * features at a million items. A shard's answers read them (shard
     * candidates carry their similarities). */
    if (v->ix->hl && past_rerank_bound(vs, (uint64_t)v->ix->n) && vs->shard_n <= 1)
        oml_index_drop_columns(v->ix);
    oml_snapshot_release(snap); /* the index holds its own reference */
    atomic_init(&v->_refs, 1);
    v->version = v->ix->snap->version;
    v->updates = v->ix->snap->updates;
    v->snapshot_ns = snapshot_ns;
    omld_hist_observe(&vs->metrics->index_build_latency, omld_now_ns() - t0);
    return v;
}

/* Swaps v in as the current view and wakes waiters. A built view whose
 * model is older than the current one's (the index was being built while
 * fresh views served newer models) serves the current model over its new
 * index instead: the served model never goes back. */
static void view_swap(omld_views *vs, omld_view *v)
{
    v->published_ns = omld_now_ns();
    int recovered = 0;
    pthread_mutex_lock(&vs->mu);
    omld_view *old = vs->current;
    omld_view *old_base = old ? (old->base ? old->base : old) : NULL;
    omld_view *w = NULL;
    if (old && old->fresh && v->base == NULL && old->version > v->version)
        w = fresh_view(v, old->fresh, old->snapshot_ns);
    else if (v->base && old_base && old_base != v->base && old_base->version > v->base->version)
        w = fresh_view(old_base, v->fresh, v->snapshot_ns); /* the indexer won the race */
    if (w) {
        w->published_ns = v->published_ns;
        omld_view_release(v); /* w holds what it needs of it */
        v = w;
    }
    vs->current = v;
    atomic_store(&vs->version, v->version);
    if (v->version >= vs->built) {
        vs->built = v->version;
        recovered = vs->refused;
        vs->refused = 0;
        vs->refused_why[0] = '\0';
    }
    omld_count(&vs->metrics->views_published, 1); /* before a waiter can see the version */
    pthread_cond_broadcast(&vs->cv);
    pthread_mutex_unlock(&vs->mu);
    if (recovered)
        LOG_INFO("indexer", "view %llu is finite and served again", (unsigned long long)v->version);
    omld_view_release(old);
    if (vs->on_publish)
        vs->on_publish(vs->arg, v);
}

/* Whether the pending snapshot may wait (vs->mu held; may drop and take
 * it again): while fresh views serve every new model over the current
 * index, a rebuild whose only news is a newer model waits until
 * next_build_ns, so rebuilds take at most `duty` of a core. Items put,
 * replaced or deleted since the last build began, or a swapped store,
 * start one at once (they are not found until then). */
static int model_only_can_wait(omld_views *vs)
{
    double duty = atomic_load(&vs->duty);
    const omld_view *cur = vs->current;
    const omld_view *base = cur ? (cur->base ? cur->base : cur) : NULL;
    if (!(duty < 1.0) || !vs->have_built || base == NULL ||
        !past_rerank_bound(vs, (uint64_t)base->ix->n) || omld_now_ns() >= vs->next_build_ns ||
        vs->lock == NULL)
        return 0;
    pthread_mutex_unlock(&vs->mu); /* the store's lock is never taken under mu */
    store_rdlock(vs->lock);
    int same = oml_store_changes(vs->store) == vs->built_changes &&
               vs->lock->generation == vs->built_gen;
    store_unlock(vs->lock);
    pthread_mutex_lock(&vs->mu);
    return same;
}

/* The CLOCK_REALTIME time ns from now (a condition variable's deadline). */
static struct timespec realtime_in(uint64_t ns)
{
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_sec += (time_t)(ns / 1000000000ull);
    at.tv_nsec += (long)(ns % 1000000000ull);
    if (at.tv_nsec >= 1000000000L) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000L;
    }
    return at;
}

/* Waits on cv until next_build_ns, a new snapshot or stop (mu held). */
static void wait_for_turn(omld_views *vs)
{
    uint64_t now = omld_now_ns(), left = vs->next_build_ns > now ? vs->next_build_ns - now : 0;
    if (left > 1000000000ull) /* look at the store again at least once a second */
        left = 1000000000ull;
    struct timespec at = realtime_in(left);
    pthread_cond_timedwait(&vs->cv, &vs->mu, &at);
}

/* Takes the nice asked for (omld_views_set_nice) on this thread alone:
 * on Linux setpriority's PRIO_PROCESS with a thread id sets that thread. */
static void apply_nice(omld_views *vs)
{
    int want = atomic_load(&vs->nice);
    if (want == vs->nice_set)
        return;
    errno = 0;
    int base = getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && setpriority(PRIO_PROCESS, (id_t)gettid(), base + want - vs->nice_set) == 0)
        vs->nice_set = want;
    else if (want > vs->nice_set) /* raising it back needs CAP_SYS_NICE: leave it */
        LOG_WARN("indexer", "cannot set the indexer's nice to +%d: %s", want, strerror(errno));
}

static void *indexer_main(void *arg)
{
    omld_views *vs = arg;
    pthread_setname_np(pthread_self(), "omld-indexer"); /* named for top and perf */
    pthread_mutex_lock(&vs->mu);
    for (;;) {
        while (!vs->stop && vs->pending == NULL)
            pthread_cond_wait(&vs->cv, &vs->mu);
        if (vs->stop)
            break;
        if (atomic_load(&trim_due)) { /* (never under mu: queries take it) */
            pthread_mutex_unlock(&vs->mu);
            trim_if_due();
            pthread_mutex_lock(&vs->mu);
            continue;
        }
        if (model_only_can_wait(vs)) {
            if (!vs->stop)
                wait_for_turn(vs);
            continue;
        }
        if (vs->pending == NULL || vs->stop)
            continue;
        oml_snapshot *snap = vs->pending;
        uint64_t ns = vs->pending_ns;
        vs->pending = NULL;
        pthread_mutex_unlock(&vs->mu);
        apply_nice(vs);

        int refused;
        uint64_t t0 = omld_now_ns();
        omld_view *v = view_build(vs, snap, ns, vs->lock, 1, &refused);
        uint64_t t1 = omld_now_ns();
        double duty = atomic_load(&vs->duty);
        vs->next_build_ns = t1 + (duty > 0.0 && duty < 1.0
                                      ? (uint64_t)((double)(t1 - t0) * (1.0 - duty) / duty)
                                      : 0);
        if (v) {
            char probes[320];
            describe_lists(v->ix, probes, sizeof probes);
            LOG_DEBUG("indexer", "view %llu: %d items, built in %.1f ms%s",
                      (unsigned long long)v->version, v->ix->n,
                      (double)(omld_now_ns() - ns) / 1e6, probes);
            view_swap(vs, v);
        }
        trim_if_due();
        pthread_mutex_lock(&vs->mu);
    }
    pthread_mutex_unlock(&vs->mu);
    return NULL;
}

int omld_views_create(omld_views **out, const oml_store *store, omld_store_lock *lock,
                      omld_metrics *metrics, void (*on_publish)(void *arg, const omld_view *v),
                      void *arg)
{
    omld_views *vs = calloc(1, sizeof *vs);
    if (vs == NULL)
        return -1;
    vs->store = store;
    vs->lock = lock;
    vs->metrics = metrics;
    vs->on_publish = on_publish;
    vs->arg = arg;
    atomic_init(&vs->version, 0);
    atomic_init(&vs->lists_min_items, 0);
    atomic_init(&vs->rerank_min_items, 0);
    atomic_init(&vs->target_recall, 0.0);
    atomic_init(&vs->duty, 1.0);
    pthread_mutex_init(&vs->mu, NULL);
    pthread_cond_init(&vs->cv, NULL);
    if (pthread_create(&vs->thread, NULL, indexer_main, vs) != 0) {
        pthread_cond_destroy(&vs->cv);
        pthread_mutex_destroy(&vs->mu);
        free(vs);
        return -1;
    }
    vs->started = 1;
    *out = vs;
    return 0;
}

void omld_views_stop_building(omld_views *vs)
{
    if (vs)
        atomic_store(&vs->stopping, 1);
}

void omld_views_destroy(omld_views *vs)
{
    if (vs == NULL)
        return;
    omld_views_stop_building(vs);
    pthread_mutex_lock(&vs->mu);
    vs->stop = 1;
    pthread_cond_broadcast(&vs->cv);
    pthread_mutex_unlock(&vs->mu);
    if (vs->started)
        pthread_join(vs->thread, NULL);
    oml_index_builder_free(&vs->builder);
    oml_projcache_free(&vs->projections);
    oml_snapshot_release(vs->pending);
    omld_view_release(vs->current);
    pthread_cond_destroy(&vs->cv);
    pthread_mutex_destroy(&vs->mu);
    free(vs);
}

void omld_views_set_lists(omld_views *vs, uint64_t min_items, double target_recall)
{
    atomic_store(&vs->lists_min_items, min_items);
    atomic_store(&vs->target_recall, target_recall);
}

void omld_views_set_rerank(omld_views *vs, uint64_t min_items)
{
    atomic_store(&vs->rerank_min_items, min_items);
}

void omld_views_set_shard(omld_views *vs, uint32_t i, uint32_t n)
{
    vs->shard_i = i;
    vs->shard_n = n;
}

void omld_views_set_nice(omld_views *vs, int nice)
{
    atomic_store(&vs->nice, nice);
}

void omld_views_keep_builder(omld_views *vs, size_t bytes)
{
    vs->keep_builder = bytes;
}

void omld_views_keep_projections(omld_views *vs, uint32_t max_slots)
{
    oml_projcache_init(&vs->projections, max_slots);
}

void omld_views_set_duty(omld_views *vs, double duty)
{
    atomic_store(&vs->duty, duty > 0.0 && duty < 1.0 ? duty : 1.0);
    pthread_mutex_lock(&vs->mu);
    pthread_cond_broadcast(&vs->cv); /* a waiting rebuild looks again */
    pthread_mutex_unlock(&vs->mu);
}

/* Serves snap at once over the current index when re-ranking is on and the
 * index is large enough (a finite model only: the indexer refuses the
 * rest, saying why). Called before the indexer gets snap. */
static void publish_fresh(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns)
{
    uint64_t min = atomic_load(&vs->rerank_min_items);
    if (min == 0 || count_non_finite(snap->params, snap->lay.count) > 0)
        return;
    omld_view *cur = omld_views_acquire(vs);
    omld_view *base = cur ? (cur->base ? cur->base : cur) : NULL;
    omld_view *v = NULL;
    if (base && (uint64_t)base->ix->n >= min && snap->version > cur->version &&
        base->ix->snap->cfg.dim == snap->cfg.dim)
        v = fresh_view(base, snap, snapshot_ns);
    omld_view_release(cur);
    if (v)
        view_swap(vs, v);
}

void omld_views_submit(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns)
{
    publish_fresh(vs, snap, snapshot_ns);
    pthread_mutex_lock(&vs->mu);
    oml_snapshot *dropped = vs->pending;
    vs->pending = snap;
    vs->pending_ns = snapshot_ns;
    pthread_cond_broadcast(&vs->cv);
    pthread_mutex_unlock(&vs->mu);
    oml_snapshot_release(dropped);
}

int omld_views_publish_now(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns,
                           int threads)
{
    int refused;
    omld_view *v = view_build(vs, snap, snapshot_ns, NULL, threads, &refused);
    if (v == NULL)
        return refused ? 1 : -1;
    view_swap(vs, v);
    return 0;
}

int omld_views_health(omld_views *vs, char *why, size_t cap)
{
    pthread_mutex_lock(&vs->mu);
    int ok = !vs->refused;
    if (why && cap)
        snprintf(why, cap, "%s", ok ? "" : vs->refused_why);
    pthread_mutex_unlock(&vs->mu);
    return ok;
}

omld_view *omld_views_acquire(omld_views *vs)
{
    pthread_mutex_lock(&vs->mu);
    omld_view *v = vs->current ? omld_view_retain(vs->current) : NULL;
    pthread_mutex_unlock(&vs->mu);
    return v;
}

uint64_t omld_views_version(const omld_views *vs)
{
    return atomic_load(&((omld_views *)vs)->version);
}

int omld_views_wait(omld_views *vs, uint64_t version, int timeout_ms)
{
    struct timespec deadline = realtime_in((uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull);
    pthread_mutex_lock(&vs->mu);
    int rc = 0;
    while (atomic_load(&vs->version) < version && vs->built < version && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&vs->cv, &vs->mu, &deadline);
    int reached = atomic_load(&vs->version) >= version;
    pthread_mutex_unlock(&vs->mu);
    return reached;
}
