/* test_view.c - serving views (daemon/view.c): a view whose model or item
 * embeddings are not all finite is never served (issue 12).
 *
 * A finite view is served; a view of the same store under a snapshot with
 * one NaN weight, or one infinite weight, is built, refused and counted, the
 * finite one goes on serving, omld_views_health() says why, and waiting for
 * the refused version returns at once (not after the timeout); a later
 * finite view is served and clears the reason. Both through
 * omld_views_publish_now (startup) and the indexer thread. Fresh views
 * (issue 14) serve a new model at once; a rebuild for a newer model alone
 * waits for its turn (omld_views_set_duty), one for changed items does not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "testutil.h"
#include "view.h"

#define DIM 6
#define LAYERS 1
#define HIDDEN 8
#define EMB 3

static const float ALPHA[LAYERS + 1] = {0.5f, 0.5f};

typedef struct fx {
    oml_store *store;
    omld_store_lock lock;
    omld_metrics metrics;
    omld_views *vs;
} fx;

static void fx_init(fx *f)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(oml_store_create(&f->store, DIM, 100), OML_OK);
    pthread_rwlock_init(&f->lock.rw, NULL);
    for (int i = 0; i < 10; i++) {
        char id[16];
        float x[DIM];
        snprintf(id, sizeof id, "i%d", i);
        for (int j = 0; j < DIM; j++)
            x[j] = (float)((i * 5 + j * 3) % 7) - 3.0f;
        assert_int_equal(oml_store_put(f->store, id, strlen(id), x, NULL, 0, NULL, NULL), OML_OK);
    }
    assert_int_equal(omld_views_create(&f->vs, f->store, &f->lock, &f->metrics, NULL, NULL), 0);
}

static void fx_free(fx *f)
{
    omld_views_destroy(f->vs);
    oml_store_destroy(f->store);
    pthread_rwlock_destroy(&f->lock.rw);
}

/* A snapshot of version v; bad: 0 finite, 1 one NaN weight, 2 one +Inf. */
static oml_snapshot *snap(uint64_t v, int bad)
{
    oml_snapshot *s = oml_test_snapshot(LAYERS, DIM, HIDDEN, EMB, NULL, ALPHA, 7);
    assert_non_null(s);
    s->version = v;
    if (bad)
        s->params[s->lay.count / 2] = bad == 1 ? NAN : INFINITY;
    return s;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void expect_serving(fx *f, uint64_t version)
{
    omld_view *v = omld_views_acquire(f->vs);
    assert_non_null(v);
    assert_int_equal(v->version, version);
    size_t n = (size_t)v->ix->heads * (size_t)v->ix->n * (size_t)v->ix->emb;
    for (size_t i = 0; i < n; i++)
        assert_true(isfinite(v->ix->emb_cols[i]));
    omld_view_release(v);
    assert_int_equal(omld_views_version(f->vs), version);
}

static void test_non_finite_view_not_served(void **state)
{
    (void)state;
    fx f;
    fx_init(&f);
    char why[256];

    /* Startup with a poisoned model: nothing is served, health says why. */
    assert_int_equal(omld_views_publish_now(f.vs, snap(1, 1), 0, 1), 1);
    assert_null(omld_views_acquire(f.vs));
    assert_int_equal(omld_views_health(f.vs, why, sizeof why), 0);
    assert_non_null(strstr(why, "not finite"));

    assert_int_equal(omld_views_publish_now(f.vs, snap(2, 0), 0, 1), 0);
    expect_serving(&f, 2);
    assert_int_equal(omld_views_health(f.vs, why, sizeof why), 1);
    assert_string_equal(why, "");

    assert_int_equal(omld_views_publish_now(f.vs, snap(3, 2), 0, 1), 1);
    expect_serving(&f, 2);
    assert_int_equal(omld_views_health(f.vs, why, sizeof why), 0);
    assert_non_null(strstr(why, "1 of its"));

    /* Through the indexer thread: refused without delaying a waiter. */
    uint64_t t0 = now_ms();
    omld_views_submit(f.vs, snap(4, 1), 0);
    assert_int_equal(omld_views_wait(f.vs, 4, 10000), 0);
    assert_true(now_ms() - t0 < 5000);
    expect_serving(&f, 2);
    assert_int_equal(omld_views_health(f.vs, NULL, 0), 0);

    omld_views_submit(f.vs, snap(5, 0), 0);
    assert_int_equal(omld_views_wait(f.vs, 5, 10000), 1);
    expect_serving(&f, 5);
    assert_int_equal(omld_views_health(f.vs, why, sizeof why), 1);
    assert_int_equal(omld_read(&f.metrics.views_refused), 3);
    assert_int_equal(omld_read(&f.metrics.views_published), 2);
    fx_free(&f);
}

/* The current view: its version, its index's version, whether it re-ranks. */
static void expect_view(fx *f, uint64_t version, uint64_t index_version)
{
    omld_view *v = omld_views_acquire(f->vs);
    assert_non_null(v);
    assert_int_equal(v->version, version);
    assert_int_equal(omld_view_model(v)->version, version);
    assert_int_equal(v->ix->snap->version, index_version);
    assert_int_equal(v->fresh != NULL, index_version != version);
    omld_view_release(v);
}

/* With re-ranking on (issue 14), a submitted model serves at once over the
 * last index while the indexer builds its own; an index built under an
 * older model than the one serving then serves the newer model; a model
 * that is not finite is never served; the served version never goes back.
 * Holding the store's write lock keeps the indexer from building. */
static void test_fresh_model_served_at_once(void **state)
{
    (void)state;
    fx f;
    fx_init(&f);
    assert_int_equal(omld_views_publish_now(f.vs, snap(1, 0), 0, 1), 0);
    omld_views_set_rerank(f.vs, 1);

    pthread_rwlock_wrlock(&f.lock.rw);
    omld_views_submit(f.vs, snap(2, 0), 0);
    expect_view(&f, 2, 1); /* at once, over the index of 1 */
    omld_views_submit(f.vs, snap(3, 1), 0);
    expect_view(&f, 2, 1); /* a NaN model: not served over any index */
    omld_views_submit(f.vs, snap(4, 0), 0);
    expect_view(&f, 4, 1);
    pthread_rwlock_unlock(&f.lock.rw);
    /* The indexer builds 4 (it may first build 2: then 4 serves over it). */
    assert_int_equal(omld_views_wait(f.vs, 4, 10000), 1);
    for (int i = 0; i < 500; i++) {
        omld_view *v = omld_views_acquire(f.vs);
        int built = v->fresh == NULL;
        assert_int_equal(v->version, 4); /* never back */
        omld_view_release(v);
        if (built)
            break;
        struct timespec ms = {0, 10000000};
        nanosleep(&ms, NULL);
    }
    expect_view(&f, 4, 4);

    /* Below the item bound, a model waits for its own index. */
    omld_views_set_rerank(f.vs, 1000);
    pthread_rwlock_wrlock(&f.lock.rw);
    omld_views_submit(f.vs, snap(5, 0), 0);
    expect_view(&f, 4, 4);
    pthread_rwlock_unlock(&f.lock.rw);
    assert_int_equal(omld_views_wait(f.vs, 5, 10000), 1);
    expect_view(&f, 5, 5);
    fx_free(&f);
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Polls (10 s at most) until the served view's index was built under
 * index_version. */
static void await_index(fx *f, uint64_t index_version)
{
    for (int i = 0; i < 1000; i++) {
        omld_view *v = omld_views_acquire(f->vs);
        uint64_t at = v ? v->ix->snap->version : 0;
        omld_view_release(v);
        if (at == index_version)
            return;
        sleep_ms(10);
    }
    fail_msg("the index was not rebuilt under model %llu", (unsigned long long)index_version);
}

/* With fresh views serving every model, a rebuild for a newer model alone
 * waits until rebuilds have taken no more than the duty of a core (here
 * 0.01: the last build was held 300 ms by the store's write lock, so 30 s),
 * while the new models serve at once; duty 1 lets the waiting one go, and
 * an item put starts one at once. */
static void test_model_only_rebuild_waits(void **state)
{
    (void)state;
    fx f;
    fx_init(&f);
    assert_int_equal(omld_views_publish_now(f.vs, snap(1, 0), 0, 1), 0);
    omld_views_set_rerank(f.vs, 1);
    omld_views_set_duty(f.vs, 0.01);
    pthread_rwlock_wrlock(&f.lock.rw);
    omld_views_submit(f.vs, snap(2, 0), 0); /* the indexer's first build: not held back */
    sleep_ms(300);
    pthread_rwlock_unlock(&f.lock.rw);
    await_index(&f, 2);
    expect_view(&f, 2, 2);

    omld_views_submit(f.vs, snap(3, 0), 0); /* the model alone is new */
    expect_view(&f, 3, 2);
    sleep_ms(300);
    expect_view(&f, 3, 2); /* served over the old index, whose rebuild waits */
    pthread_rwlock_wrlock(&f.lock.rw);
    omld_views_set_duty(f.vs, 1.0); /* no pause: the waiting rebuild goes (held 300 ms) */
    sleep_ms(300);
    omld_views_set_duty(f.vs, 0.01); /* the next model-only one waits 30 s */
    pthread_rwlock_unlock(&f.lock.rw);
    await_index(&f, 3);
    expect_view(&f, 3, 3);

    pthread_rwlock_wrlock(&f.lock.rw);
    float x[DIM] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(oml_store_put(f.store, "new", 3, x, NULL, 0, NULL, NULL), OML_OK);
    pthread_rwlock_unlock(&f.lock.rw);
    omld_views_submit(f.vs, snap(4, 0), 0); /* an item changed: rebuilt at once */
    await_index(&f, 4);
    omld_view *v = omld_views_acquire(f.vs);
    assert_int_equal(v->ix->n, 11);
    omld_view_release(v);
    fx_free(&f);
}

static void count_publish(void *arg, const omld_view *v)
{
    (void)v;
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void *destroy_views(void *arg)
{
    omld_views_destroy(arg);
    return NULL;
}

/* Stopping abandons a build in progress: once omld_views_destroy began,
 * the build waiting for its next gather ends there and publishes nothing
 * (at a million items a build takes seconds, and stopping omld waited for
 * it). */
static void test_stop_abandons_a_build(void **state)
{
    (void)state;
    fx f;
    fx_init(&f);
    omld_views_destroy(f.vs); /* one that counts its publishes instead */
    atomic_int published = 0;
    assert_int_equal(omld_views_create(&f.vs, f.store, &f.lock, &f.metrics, count_publish,
                                       &published), 0);
    assert_int_equal(omld_views_publish_now(f.vs, snap(1, 0), 0, 1), 0);
    int before = atomic_load(&published);
    assert_true(before >= 1);
    pthread_rwlock_wrlock(&f.lock.rw);
    omld_views_submit(f.vs, snap(2, 0), 0); /* the indexer's build waits for the store */
    sleep_ms(100);
    pthread_t stopper;
    assert_int_equal(pthread_create(&stopper, NULL, destroy_views, f.vs), 0);
    sleep_ms(200); /* the stop has begun: it waits for the indexer */
    pthread_rwlock_unlock(&f.lock.rw);
    assert_int_equal(pthread_join(stopper, NULL), 0);
    assert_int_equal(atomic_load(&published), before); /* view 2 was never swapped in */
    f.vs = NULL;
    fx_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_non_finite_view_not_served),
        cmocka_unit_test(test_fresh_model_served_at_once),
        cmocka_unit_test(test_model_only_rebuild_waits),
        cmocka_unit_test(test_stop_abandons_a_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
