/* test_projcache.c - the index builder's inputs on the basis kept between
 * builds (projcache.h): the row-by-row projection gives each row bits of
 * its own (basis.h), the store's stamps say when an item's features were
 * written, and an index rebuilt from kept rows equals one built without
 * them, bit for bit, through puts, re-puts, deletes, a slot reused, a new
 * basis and a bound on the slots kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basis.h"
#include "index.h"
#include "learner.h"
#include "projcache.h"
#include "rng.h"
#include "snapshot.h"
#include "store.h"

enum { DIM = 203, N = 300 }; /* dim not a multiple of the 8 lanes */

static void random_rows(float *X, int32_t n, int32_t d, uint64_t seed)
{
    oml_rng r;
    oml_rng_seed(&r, seed);
    for (size_t i = 0; i < (size_t)n * (size_t)d; i++)
        X[i] = oml_rng_uniform(&r) * 4.0f - 2.0f;
}

/* Each output is its row's and its basis row's alone: a row projected
 * alone, or at another place among other rows, has the same bits; the
 * dispatched kernel equals the portable loop; both are the dot product to
 * float rounding. */
static void test_projection_bits_are_the_rows_own(void **state)
{
    (void)state;
    enum { IN = 23, M = 11, D = 37 }; /* remainders of every blocking */
    float B[IN * D], X[M * D], all[M * IN], portable[M * IN], one[IN], moved[M * IN];
    random_rows(B, IN, D, 1);
    random_rows(X, M, D, 2);
    oml_basis_project(B, IN, D, X, M, all);
    oml_basis_project_portable(B, IN, D, X, M, portable);
    assert_memory_equal(all, portable, sizeof all);
    for (int i = 0; i < M; i++) {
        oml_basis_project(B, IN, D, X + i * D, 1, one);
        assert_memory_equal(one, all + i * IN, sizeof one);
    }
    /* The rows in reverse order: every row at another position. */
    float R[M * D];
    for (int i = 0; i < M; i++)
        memcpy(R + i * D, X + (M - 1 - i) * D, D * sizeof(float));
    oml_basis_project(B, IN, D, R, M, moved);
    for (int i = 0; i < M; i++)
        assert_memory_equal(moved + i * IN, all + (M - 1 - i) * IN, IN * sizeof(float));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < IN; j++) {
            double dot = 0, mag = 0;
            for (int k = 0; k < D; k++) {
                dot += (double)X[i * D + k] * B[j * D + k];
                mag += fabs((double)X[i * D + k] * B[j * D + k]);
            }
            assert_true(fabs(all[i * IN + j] - dot) <= 1e-6 * mag);
        }
}

/* Stamps: new at every put and re-put of the slot, not at others' writes
 * or at a delete; 0 for a slot never used; all new after a decode. */
static void test_store_stamps(void **state)
{
    (void)state;
    float x[3] = {1, 2, 3};
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, 3, 8), OML_OK);
    assert_true(oml_store_stamp(st, 0) == 0);
    assert_int_equal(oml_store_put(st, "a", 1, x, NULL, 0, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_put(st, "b", 1, x, NULL, 0, NULL, NULL), OML_OK);
    uint64_t a0 = oml_store_stamp(st, 0), b0 = oml_store_stamp(st, 1);
    assert_true(a0 != 0 && b0 != 0 && a0 != b0);
    assert_true(oml_store_stamp(st, 2) == 0);
    assert_int_equal(oml_store_put(st, "a", 1, x, NULL, 0, NULL, NULL), OML_OK); /* re-put */
    uint64_t a1 = oml_store_stamp(st, 0);
    assert_true(a1 != a0 && oml_store_stamp(st, 1) == b0);
    assert_int_equal(oml_store_delete(st, "b", 1), OML_OK);
    assert_true(oml_store_stamp(st, 1) == b0);
    assert_int_equal(oml_store_put(st, "c", 1, x, NULL, 0, NULL, NULL), OML_OK); /* slot 1 again */
    assert_true(oml_store_stamp(st, 1) != b0);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(oml_store_encode(st, &buf, &len), OML_OK);
    oml_store *back = NULL;
    assert_int_equal(oml_store_decode(&back, buf, len, 8, NULL), OML_OK);
    for (uint32_t s = 0; s < 2; s++) {
        assert_true(oml_store_stamp(back, s) != 0);
        assert_true(oml_store_stamp(back, s) != oml_store_stamp(st, s));
    }
    free(buf);
    oml_store_destroy(back);
    oml_store_destroy(st);
}

/* A default-preset model with its start's input basis (dim > emb). */
static oml_snapshot *model_with_basis(const float *X, int32_t n, uint64_t seed)
{
    oml_config c;
    oml_config_preset(&c, "default", DIM);
    c.seed = seed;
    oml_learner *l = NULL;
    assert_int_equal(oml_learner_create(&l, &c, NULL), OML_OK);
    assert_int_equal(oml_learner_prepare(l, X, NULL, n), OML_OK);
    oml_snapshot *s = oml_learner_snapshot(l, 1);
    assert_non_null(s);
    assert_true(s->lay.has_basis);
    oml_learner_destroy(l);
    return s;
}

static oml_index *build(oml_index_builder *b, oml_snapshot *s, const oml_store *st,
                        oml_projcache *cache)
{
    b->cache = cache; /* (restart keeps it) */
    oml_index *ix = NULL;
    assert_int_equal(oml_index_builder_run(b, s, st, &ix), OML_OK);
    return ix;
}

static int same_embeddings(const oml_index *a, const oml_index *b)
{
    if (a->n != b->n)
        return 0;
    for (int32_t i = 0; i < a->n; i++)
        if (a->slots[i] != b->slots[i])
            return 0;
    size_t ne = (size_t)a->heads * (size_t)a->n * (size_t)a->emb;
    return memcmp(a->emb_cols, b->emb_cols, ne * sizeof(float)) == 0;
}

/* The kept build against oml_index_build (no cache) over the same store. */
static void expect_as_built(oml_index_builder *b, oml_snapshot *s, const oml_store *st,
                            oml_projcache *cache)
{
    oml_index *kept = build(b, s, st, cache), *full = NULL;
    assert_int_equal(oml_index_build(&full, s, st), OML_OK);
    assert_true(same_embeddings(kept, full));
    oml_index_destroy(kept);
    oml_index_destroy(full);
}

static void put(oml_store *st, int i, const float *x)
{
    char id[16];
    snprintf(id, sizeof id, "i%d", i);
    assert_int_equal(oml_store_put(st, id, strlen(id), x, NULL, 0, NULL, NULL), OML_OK);
}

/* A store of room for cap items holding i<k> = row k of X for k < n. */
static oml_store *store_of(const float *X, int n, uint32_t cap)
{
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, DIM, cap), OML_OK);
    for (int i = 0; i < n; i++)
        put(st, i, X + (size_t)i * DIM);
    return st;
}

static void test_kept_rows_build_the_same_index(void **state)
{
    (void)state;
    static float X[(N + 20) * DIM];
    random_rows(X, N + 20, DIM, 7);
    oml_snapshot *s = model_with_basis(X, N, 1);
    oml_store *st = store_of(X, N, N + 20);
    oml_projcache cache;
    oml_projcache_init(&cache, N + 20);
    oml_index_builder b = {0};

    expect_as_built(&b, s, st, &cache); /* fills the cache */
    assert_true(cache.cap >= N);
    expect_as_built(&b, s, st, &cache); /* every row kept */

    /* The kept rows are read: a kept row spoiled shows in the next build. */
    cache.rows[5 * (size_t)cache.in] += 1.0f;
    oml_index *spoiled = build(&b, s, st, &cache), *full = NULL;
    assert_int_equal(oml_index_build(&full, s, st), OML_OK);
    assert_false(same_embeddings(spoiled, full));
    oml_index_destroy(spoiled);
    oml_index_destroy(full);
    /* ... until slot 5 is written again: its stamp moved, its row is new. */
    put(st, 5, X + (size_t)N * DIM);
    expect_as_built(&b, s, st, &cache);

    /* New items, a delete and the slot reused by another item. */
    for (int i = N; i < N + 10; i++)
        put(st, i + 1, X + (size_t)i * DIM);
    assert_int_equal(oml_store_delete(st, "i17", 3), OML_OK);
    expect_as_built(&b, s, st, &cache);
    put(st, 9999, X + (size_t)(N + 12) * DIM); /* into slot 17 */
    expect_as_built(&b, s, st, &cache);

    /* Another start (another basis): every kept row is forgotten. */
    oml_snapshot *s2 = model_with_basis(X + 40 * DIM, N - 40, 2);
    assert_true(memcmp(s2->params, s->params, s->lay.trained * sizeof(float)) != 0);
    expect_as_built(&b, s2, st, &cache);
    expect_as_built(&b, s2, st, &cache);

    oml_index_builder_free(&b);
    oml_projcache_free(&cache);
    oml_snapshot_release(s2);
    oml_snapshot_release(s);
    oml_store_destroy(st);
}

/* The bound: rows are kept for the first max_slots slots only, the rest
 * projected every build, and the index is the same. */
static void test_bound_on_slots_kept(void **state)
{
    (void)state;
    static float X[N * DIM];
    random_rows(X, N, DIM, 9);
    oml_snapshot *s = model_with_basis(X, N, 3);
    oml_store *st = store_of(X, N, N);
    oml_projcache cache;
    oml_projcache_init(&cache, 50);
    oml_index_builder b = {0};
    expect_as_built(&b, s, st, &cache);
    expect_as_built(&b, s, st, &cache);
    assert_true(cache.cap == 50);
    assert_true(oml_projcache_bytes(&cache) ==
                s->lay.trained * sizeof(float) + 50 * (sizeof(uint64_t) + (size_t)cache.in * 4));
    oml_projcache_free(&cache);
    oml_index_builder_free(&b);
    oml_snapshot_release(s);
    oml_store_destroy(st);
}

/* With the basis, a build on several threads (a start's first view, no
 * cache) projects and embeds each gather's block as the serial build
 * does: the same index bit for bit. More than two gathers. */
static void test_threaded_build_same_bits(void **state)
{
    (void)state;
    enum { M = 2 * OML_INDEX_GATHER_ROWS + 100 };
    float *X = malloc((size_t)M * DIM * sizeof(float));
    assert_non_null(X);
    random_rows(X, M, DIM, 9);
    oml_snapshot *s = model_with_basis(X, N, 4);
    oml_store *st = store_of(X, M, M);
    oml_index *serial = NULL, *threaded = NULL;
    assert_int_equal(oml_index_build(&serial, s, st), OML_OK);
    oml_index_builder b = {0};
    assert_int_equal(oml_index_builder_run_threads(&b, s, st, 2, &threaded), OML_OK);
    oml_index_builder_free(&b);
    assert_true(same_embeddings(threaded, serial));
    oml_index_destroy(threaded);
    oml_index_destroy(serial);
    oml_store_destroy(st);
    oml_snapshot_release(s);
    free(X);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_projection_bits_are_the_rows_own),
        cmocka_unit_test(test_store_stamps),
        cmocka_unit_test(test_kept_rows_build_the_same_index),
        cmocka_unit_test(test_bound_on_slots_kept),
        cmocka_unit_test(test_threaded_build_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
