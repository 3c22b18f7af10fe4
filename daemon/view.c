/* view.c - serving views and the indexer thread (see view.h).
 *
 * The current view pointer is guarded by a mutex held only for a pointer
 * copy and a reference increment, never during a build or a query, so the
 * loop thread cannot be held up by the indexer. The indexer keeps at most
 * one snapshot waiting: a newer one replaces it (the older one is released
 * unbuilt), so a slow build never queues up stale work. */
#include "view.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

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
    oml_snapshot *pending;      /* guarded by mu; latest wins */
    uint64_t pending_ns;
    int stop;
    int started;
    pthread_t thread;
};

int32_t omld_view_row(const omld_view *v, const char *id, size_t len)
{
    uint32_t row;
    return oml_idmap_get(&v->by_id, id, len, &row) == OML_OK ? (int32_t)row : -1;
}

omld_view *omld_view_retain(omld_view *v)
{
    atomic_fetch_add_explicit(&v->_refs, 1, memory_order_relaxed);
    return v;
}

void omld_view_release(omld_view *v)
{
    if (v == NULL || atomic_fetch_sub_explicit(&v->_refs, 1, memory_order_acq_rel) != 1)
        return;
    oml_idmap_free(&v->by_id);
    oml_index_destroy(v->ix);
    free(v);
}

/* Builds a view of snap over the store; the caller holds the store's read
 * lock. Takes ownership of snap (released on failure). */
static omld_view *view_build(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns)
{
    uint64_t t0 = omld_now_ns();
    omld_view *v = calloc(1, sizeof *v);
    int rc = v ? oml_index_build(&v->ix, snap, vs->store) : OML_ENOMEM;
    if (rc == OML_OK) {
        oml_idmap_init(&v->by_id);
        rc = oml_idmap_reserve(&v->by_id, (uint32_t)v->ix->n);
        for (int32_t i = 0; rc == OML_OK && i < v->ix->n; i++)
            rc = oml_idmap_put(&v->by_id, v->ix->ids[i], v->ix->id_lens[i], (uint32_t)i);
    }
    if (rc != OML_OK) {
        LOG_ERROR("indexer", "cannot build view %llu: %s", (unsigned long long)snap->version,
                  oml_strerror(rc));
        if (v) {
            oml_idmap_free(&v->by_id);
            oml_index_destroy(v->ix);
            free(v);
        }
        oml_snapshot_release(snap);
        return NULL;
    }
    oml_snapshot_release(snap); /* the index holds its own reference */
    atomic_init(&v->_refs, 1);
    v->version = v->ix->snap->version;
    v->updates = v->ix->snap->updates;
    v->snapshot_ns = snapshot_ns;
    omld_hist_observe(&vs->metrics->index_build_latency, omld_now_ns() - t0);
    return v;
}

/* Swaps v in as the current view and wakes waiters. */
static void view_swap(omld_views *vs, omld_view *v)
{
    v->published_ns = omld_now_ns();
    pthread_mutex_lock(&vs->mu);
    omld_view *old = vs->current;
    vs->current = v;
    atomic_store(&vs->version, v->version);
    pthread_cond_broadcast(&vs->cv);
    pthread_mutex_unlock(&vs->mu);
    omld_view_release(old);
    omld_count(&vs->metrics->views_published, 1);
    if (vs->on_publish)
        vs->on_publish(vs->arg, v);
}

static void *indexer_main(void *arg)
{
    omld_views *vs = arg;
    pthread_mutex_lock(&vs->mu);
    for (;;) {
        while (!vs->stop && vs->pending == NULL)
            pthread_cond_wait(&vs->cv, &vs->mu);
        if (vs->stop)
            break;
        oml_snapshot *snap = vs->pending;
        uint64_t ns = vs->pending_ns;
        vs->pending = NULL;
        pthread_mutex_unlock(&vs->mu);

        pthread_rwlock_rdlock(&vs->lock->rw);
        omld_view *v = view_build(vs, snap, ns);
        pthread_rwlock_unlock(&vs->lock->rw);
        if (v) {
            LOG_DEBUG("indexer", "view %llu: %d items, built in %.1f ms",
                      (unsigned long long)v->version, v->ix->n,
                      (double)(omld_now_ns() - ns) / 1e6);
            view_swap(vs, v);
        }
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

void omld_views_destroy(omld_views *vs)
{
    if (vs == NULL)
        return;
    pthread_mutex_lock(&vs->mu);
    vs->stop = 1;
    pthread_cond_broadcast(&vs->cv);
    pthread_mutex_unlock(&vs->mu);
    if (vs->started)
        pthread_join(vs->thread, NULL);
    oml_snapshot_release(vs->pending);
    omld_view_release(vs->current);
    pthread_cond_destroy(&vs->cv);
    pthread_mutex_destroy(&vs->mu);
    free(vs);
}

void omld_views_submit(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns)
{
    pthread_mutex_lock(&vs->mu);
    oml_snapshot *dropped = vs->pending;
    vs->pending = snap;
    vs->pending_ns = snapshot_ns;
    pthread_cond_broadcast(&vs->cv);
    pthread_mutex_unlock(&vs->mu);
    oml_snapshot_release(dropped);
}

int omld_views_publish_now(omld_views *vs, oml_snapshot *snap, uint64_t snapshot_ns)
{
    omld_view *v = view_build(vs, snap, snapshot_ns);
    if (v == NULL)
        return -1;
    view_swap(vs, v);
    return 0;
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
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&vs->mu);
    int rc = 0;
    while (atomic_load(&vs->version) < version && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&vs->cv, &vs->mu, &deadline);
    int reached = atomic_load(&vs->version) >= version;
    pthread_mutex_unlock(&vs->mu);
    return reached;
}
