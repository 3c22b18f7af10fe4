/* test_store.c - the item store and its hash map (idmap). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "idmap.h"
#include "rng.h"
#include "store.h"

#define DIM 4

static void fill(float *x, float v)
{
    for (int i = 0; i < DIM; i++)
        x[i] = v + (float)i;
}

static int put(oml_store *s, const char *id, const float *x, const char *label, uint32_t *slot)
{
    return oml_store_put(s, id, strlen(id), x, label, label ? strlen(label) : 0, slot, NULL);
}

static void test_create_bad_args(void **state)
{
    (void)state;
    oml_store *s = NULL;
    assert_int_equal(oml_store_create(&s, 0, 10), OML_EINVAL);
    assert_int_equal(oml_store_create(&s, -3, 10), OML_EINVAL);
    assert_int_equal(oml_store_create(&s, 4, 0), OML_EINVAL);
    assert_null(s);
    oml_store_destroy(NULL);
}

static void test_upsert_and_overwrite(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 100), OML_OK);
    float x[DIM], y[DIM];
    fill(x, 1.0f);
    fill(y, 10.0f);
    uint32_t s0 = 99, s1 = 99, s2 = 99;
    assert_int_equal(put(s, "a", x, "cat", &s0), OML_OK);
    assert_int_equal(put(s, "b", y, NULL, &s1), OML_OK);
    assert_int_equal(s0, 0);
    assert_int_equal(s1, 1);
    assert_int_equal(oml_store_count(s), 2);
    assert_int_equal(oml_store_slots(s), 2);
    assert_int_equal(oml_store_dim(s), DIM);
    assert_memory_equal(oml_store_features(s, 0), x, sizeof x);
    assert_int_equal(oml_store_label(s, 0), 0);
    assert_int_equal(oml_store_label(s, 1), OML_LABEL_NONE);

    /* Overwrite in place: same slot, new features and label. */
    assert_int_equal(put(s, "a", y, "dog", &s2), OML_OK);
    assert_int_equal(s2, s0);
    assert_int_equal(oml_store_slots(s), 2);
    assert_int_equal(oml_store_count(s), 2);
    assert_memory_equal(oml_store_features(s, 0), y, sizeof y);
    assert_int_equal(oml_store_label(s, 0), 1);
    assert_int_equal(put(s, "a", x, NULL, &s2), OML_OK);
    assert_int_equal(oml_store_label(s, 0), OML_LABEL_NONE);
    assert_memory_equal(oml_store_matrix(s), x, sizeof x);
    assert_memory_equal(oml_store_matrix(s) + DIM, y, sizeof y);

    size_t len;
    assert_string_equal(oml_store_id(s, 1, &len), "b");
    assert_int_equal(len, 1);
    uint32_t f;
    assert_int_equal(oml_store_find(s, "b", 1, &f), OML_OK);
    assert_int_equal(f, 1);
    assert_int_equal(oml_store_find(s, "c", 1, &f), OML_ENOTFOUND);
    /* slot_out may be NULL. */
    assert_int_equal(put(s, "c", x, NULL, NULL), OML_OK);
    oml_store_destroy(s);
}

static void test_delete_and_reput(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 100), OML_OK);
    float x[DIM], y[DIM];
    fill(x, 1.0f);
    fill(y, 5.0f);
    uint32_t s0, s1, f;
    assert_int_equal(put(s, "item", x, "l", &s0), OML_OK);
    assert_int_equal(oml_store_delete(s, "item", 4), OML_OK);
    assert_int_equal(oml_store_find(s, "item", 4, &f), OML_ENOTFOUND);
    assert_int_equal(oml_store_delete(s, "item", 4), OML_ENOTFOUND);
    assert_int_equal(oml_store_delete(s, "never", 5), OML_ENOTFOUND);
    assert_false(oml_store_is_live(s, s0));
    assert_int_equal(oml_store_count(s), 0);
    assert_int_equal(oml_store_slots(s), 1);
    /* The tombstone keeps its id and features. */
    size_t len;
    assert_string_equal(oml_store_id(s, s0, &len), "item");
    assert_memory_equal(oml_store_features(s, s0), x, sizeof x);

    /* The delete made a new generation of the slot. */
    assert_int_equal(oml_store_generation(s, s0), 1);
    assert_false(oml_store_slot_is(s, s0, 0));

    /* The re-put takes the free slot (the lowest one) back. */
    assert_int_equal(put(s, "item", y, NULL, &s1), OML_OK);
    assert_int_equal(s1, s0);
    assert_true(oml_store_is_live(s, s1));
    assert_int_equal(oml_store_find(s, "item", 4, &f), OML_OK);
    assert_int_equal(f, s1);
    assert_int_equal(oml_store_count(s), 1);
    assert_int_equal(oml_store_slots(s), 1);
    assert_memory_equal(oml_store_features(s, s1), y, sizeof y);
    assert_int_equal(oml_store_label(s, s1), OML_LABEL_NONE);
    assert_int_equal(oml_store_generation(s, s1), 1);
    assert_true(oml_store_slot_is(s, s1, 1));
    assert_false(oml_store_slot_is(s, s1, 0)); /* a holder of (0, 0) sees it is gone */
    oml_store_destroy(s);
}

/* max_items bounds the live items: deleted slots are reused, lowest first,
 * and a slot holder can tell a reused slot by its generation. */
static void test_slot_reuse(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 10), OML_OK);
    float x[DIM];
    char id[16];
    uint32_t slot;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 10; i++) {
            fill(x, (float)(round * 10 + i));
            snprintf(id, sizeof id, "r%d-%d", round, i);
            assert_int_equal(put(s, id, x, NULL, &slot), OML_OK);
            assert_int_equal(slot, (uint32_t)i);
            assert_int_equal(oml_store_generation(s, slot), (uint32_t)round);
        }
        snprintf(id, sizeof id, "one-more");
        assert_int_equal(put(s, id, x, NULL, NULL), OML_EFULL);
        for (int i = 0; i < 10; i++) {
            snprintf(id, sizeof id, "r%d-%d", round, i);
            assert_int_equal(oml_store_delete(s, id, strlen(id)), OML_OK);
        }
        assert_int_equal(oml_store_count(s), 0);
        assert_int_equal(oml_store_slots(s), 10);
    }
    /* Lowest free first, whatever the order of the deletes. */
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof id, "k%d", i);
        assert_int_equal(put(s, id, x, NULL, &slot), OML_OK);
    }
    const int order[4] = {7, 2, 9, 4};
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof id, "k%d", order[i]);
        assert_int_equal(oml_store_delete(s, id, strlen(id)), OML_OK);
    }
    const uint32_t want[4] = {2, 4, 7, 9};
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof id, "n%d", i);
        assert_int_equal(put(s, id, x, NULL, &slot), OML_OK);
        assert_int_equal(slot, want[i]);
        assert_int_equal(oml_store_generation(s, slot), 6);
        size_t len;
        assert_string_equal(oml_store_id(s, slot, &len), id);
    }
    assert_int_equal(put(s, "full", x, NULL, NULL), OML_EFULL);
    oml_store_destroy(s);
}

static void test_id_validation(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 100), OML_OK);
    float x[DIM];
    fill(x, 0.0f);
    oml_diag d;
    char *big = malloc(OML_ID_MAX + 2);
    memset(big, 'z', OML_ID_MAX + 1);
    big[OML_ID_MAX + 1] = '\0';

    uint32_t slot, f;
    assert_int_equal(oml_store_put(s, big, OML_ID_MAX, x, NULL, 0, &slot, &d), OML_OK);
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_store_put(s, big, OML_ID_MAX + 1, x, NULL, 0, &slot, &d), OML_EINVAL);
    assert_string_equal(d.field, "id");
    assert_int_equal(d.code, OML_EINVAL);
    assert_int_equal(oml_store_put(s, "", 0, x, NULL, 0, &slot, &d), OML_EINVAL);
    assert_string_equal(d.field, "id");
    assert_int_equal(oml_store_put(s, NULL, 3, x, NULL, 0, &slot, &d), OML_EINVAL);
    assert_int_equal(oml_store_put(s, "a\0b", 3, x, NULL, 0, &slot, &d), OML_EINVAL);
    assert_string_equal(d.field, "id");
    assert_int_equal(oml_store_find(s, "a", 1, &f), OML_ENOTFOUND);

    /* Labels follow the same rules. */
    assert_int_equal(oml_store_put(s, "ok", 2, x, big, OML_ID_MAX, &slot, &d), OML_OK);
    assert_int_equal(oml_store_put(s, "ok2", 3, x, big, OML_ID_MAX + 1, &slot, &d), OML_EINVAL);
    assert_string_equal(d.field, "label");
    assert_int_equal(oml_store_put(s, "ok2", 3, x, "x\0y", 3, &slot, &d), OML_EINVAL);
    assert_string_equal(d.field, "label");
    assert_int_equal(oml_store_put(s, "ok2", 3, x, "", 0, &slot, &d), OML_EINVAL);
    assert_string_equal(d.field, "label");
    assert_int_equal(oml_store_find(s, "ok2", 3, &f), OML_ENOTFOUND);
    assert_int_equal(oml_store_slots(s), 2);
    assert_int_equal(oml_store_label_count(s), 1);

    /* Missing features. */
    assert_int_equal(oml_store_put(s, "ok3", 3, NULL, NULL, 0, &slot, &d), OML_EINVAL);
    assert_string_equal(d.field, "features");
    free(big);
    oml_store_destroy(s);
}

static void test_utf8(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 100), OML_OK);
    float x[DIM];
    fill(x, 0.0f);
    const char *id = "caf\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac-\xf0\x9f\x90\x88";
    const char *lab = "\xd0\xba\xd0\xbe\xd1\x82";
    uint32_t slot, f;
    assert_int_equal(put(s, id, x, lab, &slot), OML_OK);
    assert_int_equal(oml_store_find(s, id, strlen(id), &f), OML_OK);
    assert_int_equal(f, slot);
    /* A prefix of the UTF-8 bytes is another id. */
    assert_int_equal(oml_store_find(s, id, 4, &f), OML_ENOTFOUND);
    size_t len;
    assert_string_equal(oml_store_id(s, slot, &len), id);
    assert_int_equal(len, strlen(id));
    assert_string_equal(oml_store_label_name(s, oml_store_label(s, slot), &len), lab);
    assert_int_equal(len, strlen(lab));
    /* Bytes that are not valid UTF-8 are still fine as long as there is no NUL. */
    assert_int_equal(put(s, "\xff\xfe", x, NULL, &slot), OML_OK);
    oml_store_destroy(s);
}

static void test_nonfinite(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 100), OML_OK);
    float x[DIM], bad[DIM];
    fill(x, 1.0f);
    uint32_t slot, f;
    assert_int_equal(put(s, "a", x, "l", &slot), OML_OK);
    float poison[3] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        fill(bad, 7.0f);
        bad[2] = poison[k];
        oml_diag d;
        memset(&d, 0, sizeof d);
        /* Both a new id and an overwrite are refused, with nothing changed. */
        assert_int_equal(oml_store_put(s, "a", 1, bad, "new", 3, &slot, &d), OML_ENONFINITE);
        assert_string_equal(d.field, "features");
        assert_non_null(strstr(d.msg, "2"));
        assert_int_equal(oml_store_put(s, "b", 1, bad, "new", 3, &slot, &d), OML_ENONFINITE);
        assert_memory_equal(oml_store_features(s, 0), x, sizeof x);
        assert_int_equal(oml_store_label(s, 0), 0);
        assert_int_equal(oml_store_label_count(s), 1);
        assert_int_equal(oml_store_slots(s), 1);
        assert_int_equal(oml_store_find(s, "b", 1, &f), OML_ENOTFOUND);
    }
    oml_store_destroy(s);
}

/* A decoded store refuses a feature that is not finite, naming its slot
 * and feature, wherever it lies: the first of 200,000 (the decoder checks
 * each part as it copies it) and the last of a later part. */
static void test_decode_refuses_nonfinite(void **state)
{
    (void)state;
    enum { N = 50000 }; /* 200,000 features: several of the decoder's parts */
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, N), OML_OK);
    float x[DIM];
    char id[32];
    for (int i = 0; i < N; i++) {
        fill(x, 0.5f);
        x[i % DIM] = 1234.5f + (float)i; /* a value found once in the encoding */
        int n = snprintf(id, sizeof id, "f%d", i);
        assert_int_equal(oml_store_put(s, id, (size_t)n, x, NULL, 0, NULL, NULL), OML_OK);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(oml_store_encode(s, &buf, &len), OML_OK);
    const int slots[2] = {0, N - 1};
    const float poison[2] = {NAN, -INFINITY};
    for (int t = 0; t < 2; t++) {
        uint32_t slot = (uint32_t)slots[t];
        float mark = 1234.5f + (float)slot, bad = poison[t];
        uint8_t *at = memmem(buf, len, &mark, sizeof mark);
        assert_non_null(at);
        memcpy(at, &bad, sizeof bad);
        oml_store *d = NULL;
        oml_diag diag = {0};
        assert_int_equal(oml_store_decode(&d, buf, len, N, &diag), OML_EFORMAT);
        assert_null(d);
        char want[64];
        snprintf(want, sizeof want, "slot %u feature %u is not finite", slot, slot % DIM);
        assert_non_null(strstr(diag.msg, want));
        memcpy(at, &mark, sizeof mark); /* and whole again, it decodes */
        assert_int_equal(oml_store_decode(&d, buf, len, N, NULL), OML_OK);
        oml_store_destroy(d);
    }
    free(buf);
    oml_store_destroy(s);
}

static void test_capacity(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 3), OML_OK);
    float x[DIM];
    fill(x, 0.0f);
    oml_diag d;
    assert_int_equal(put(s, "a", x, NULL, NULL), OML_OK);
    assert_int_equal(put(s, "b", x, NULL, NULL), OML_OK);
    assert_int_equal(put(s, "c", x, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_put(s, "d", 1, x, NULL, 0, NULL, &d), OML_EFULL);
    assert_int_equal(d.code, OML_EFULL);
    /* Overwrites still work when full. */
    assert_int_equal(put(s, "b", x, "lab", NULL), OML_OK);
    /* Deleted items do not count against the bound: their slots are reused. */
    assert_int_equal(oml_store_delete(s, "a", 1), OML_OK);
    assert_int_equal(put(s, "d", x, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_put(s, "a", 1, x, NULL, 0, NULL, &d), OML_EFULL);
    assert_int_equal(oml_store_count(s), 3);
    assert_int_equal(oml_store_slots(s), 3);
    /* Labels are bounded by max_items too. */
    assert_int_equal(put(s, "b", x, "l2", NULL), OML_OK);
    assert_int_equal(put(s, "b", x, "l3", NULL), OML_OK);
    assert_int_equal(oml_store_put(s, "b", 1, x, "l4", 2, NULL, &d), OML_EFULL);
    assert_string_equal(d.field, "label");
    assert_int_equal(oml_store_label_count(s), 3);
    oml_store_destroy(s);
}

static void test_label_interning(void **state)
{
    (void)state;
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, 1000), OML_OK);
    float x[DIM];
    fill(x, 0.0f);
    const char *names[] = {"red", "green", "blue"};
    for (int i = 0; i < 300; i++) {
        char id[32];
        snprintf(id, sizeof id, "it%d", i);
        uint32_t slot;
        assert_int_equal(put(s, id, x, names[i % 3], &slot), OML_OK);
        assert_int_equal(oml_store_label(s, slot), i % 3);
    }
    assert_int_equal(oml_store_label_count(s), 3);
    for (int i = 0; i < 3; i++) {
        size_t len;
        assert_string_equal(oml_store_label_name(s, i, &len), names[i]);
        assert_int_equal(len, strlen(names[i]));
    }
    assert_null(oml_store_label_name(s, 3, NULL));
    assert_null(oml_store_label_name(s, -1, NULL));
    /* Deleting every item keeps the label ids. */
    for (int i = 0; i < 300; i++) {
        char id[32];
        int n = snprintf(id, sizeof id, "it%d", i);
        assert_int_equal(oml_store_delete(s, id, (size_t)n), OML_OK);
    }
    uint32_t slot;
    assert_int_equal(put(s, "again", x, "blue", &slot), OML_OK);
    assert_int_equal(oml_store_label(s, slot), 2);
    assert_int_equal(put(s, "again", x, "violet", &slot), OML_OK);
    assert_int_equal(oml_store_label(s, slot), 3);
    oml_store_destroy(s);
}

static void test_many_items(void **state)
{
    (void)state;
    enum { N = 100000 };
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, N), OML_OK);
    float x[DIM];
    char id[32];
    for (int i = 0; i < N; i++) {
        fill(x, (float)i);
        int n = snprintf(id, sizeof id, "item-%d", i);
        uint32_t slot;
        assert_int_equal(oml_store_put(s, id, (size_t)n, x, NULL, 0, &slot, NULL), OML_OK);
        assert_int_equal(slot, (uint32_t)i);
    }
    assert_int_equal(oml_store_count(s), N);
    for (int i = 0; i < N; i++) {
        int n = snprintf(id, sizeof id, "item-%d", i);
        uint32_t slot;
        assert_int_equal(oml_store_find(s, id, (size_t)n, &slot), OML_OK);
        assert_int_equal(slot, (uint32_t)i);
        assert_true(oml_store_features(s, slot)[0] == (float)i);
    }
    /* Delete every other item, then check all lookups again. */
    for (int i = 0; i < N; i += 2) {
        int n = snprintf(id, sizeof id, "item-%d", i);
        assert_int_equal(oml_store_delete(s, id, (size_t)n), OML_OK);
    }
    for (int i = 0; i < N; i++) {
        int n = snprintf(id, sizeof id, "item-%d", i);
        uint32_t slot;
        int rc = oml_store_find(s, id, (size_t)n, &slot);
        if (i % 2 == 0) {
            assert_int_equal(rc, OML_ENOTFOUND);
        } else {
            assert_int_equal(rc, OML_OK);
            assert_int_equal(slot, (uint32_t)i);
        }
    }
    assert_int_equal(oml_store_count(s), N / 2);
    /* The freed half is reused, lowest slot first, then the store is full. */
    uint32_t slot;
    assert_int_equal(put(s, "one-more", x, NULL, &slot), OML_OK);
    assert_int_equal(slot, 0);
    for (int i = 1; i < N / 2; i++) {
        int n = snprintf(id, sizeof id, "again-%d", i);
        assert_int_equal(oml_store_put(s, id, (size_t)n, x, NULL, 0, &slot, NULL), OML_OK);
        assert_int_equal(slot, (uint32_t)(2 * i));
    }
    assert_int_equal(put(s, "full", x, NULL, NULL), OML_EFULL);
    oml_store_destroy(s);
}

/* A store whose features can reach OML_BIGMEM_MIN bytes keeps them in one
 * mapping for max_items (bigmem.h): rows never move as it grows (what
 * keeps their pages huge), and it encodes, decodes and deletes as any. */
static void test_large_store_rows_stay_put(void **state)
{
    (void)state;
    enum { N = 70000 };
    oml_store *s;
    /* 2^31 - 1 items of 4 floats: 32 GB of address space, taken as written. */
    assert_int_equal(oml_store_create(&s, DIM, 0x7fffffffu), OML_OK);
    float x[DIM];
    char id[32];
    const float *row0 = NULL;
    for (int i = 0; i < N; i++) {
        fill(x, (float)i);
        int n = snprintf(id, sizeof id, "item-%d", i);
        assert_int_equal(oml_store_put(s, id, (size_t)n, x, NULL, 0, NULL, NULL), OML_OK);
        if (i == 0)
            row0 = oml_store_features(s, 0);
        assert_ptr_equal(oml_store_features(s, 0), row0);
    }
    assert_int_equal(oml_store_delete(s, "item-7", 6), OML_OK);
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(oml_store_encode(s, &buf, &len), OML_OK);
    oml_store *t = NULL;
    assert_int_equal(oml_store_decode(&t, buf, len, 0x7fffffffu, NULL), OML_OK);
    assert_int_equal(oml_store_count(t), N - 1);
    for (int i = 0; i < N; i += 997) {
        int n = snprintf(id, sizeof id, "item-%d", i);
        uint32_t slot;
        assert_int_equal(oml_store_find(t, id, (size_t)n, &slot), OML_OK);
        fill(x, (float)i);
        assert_memory_equal(oml_store_features(t, slot), x, sizeof x);
    }
    /* The decoded store grows in place too. */
    row0 = oml_store_features(t, 0);
    assert_int_equal(put(t, "one-more", x, NULL, NULL), OML_OK);
    assert_int_equal(put(t, "and-another", x, NULL, NULL), OML_OK);
    assert_ptr_equal(oml_store_features(t, 0), row0);
    free(buf);
    oml_store_destroy(t);
    oml_store_destroy(s);
}

/* idmap churn against a direct-indexed reference: keys "k<i>" for i < K. */
static void test_idmap_churn(void **state)
{
    (void)state;
    enum { K = 2000, STEPS = 200000 };
    static char keys[K][16];
    static size_t lens[K];
    static int64_t ref[K];
    for (int i = 0; i < K; i++) {
        lens[i] = (size_t)snprintf(keys[i], sizeof keys[i], "k%d", i);
        ref[i] = -1;
    }
    oml_idmap m;
    oml_idmap_init(&m);
    oml_rng r;
    oml_rng_seed(&r, 42);
    uint32_t live = 0, v;
    for (int step = 0; step < STEPS; step++) {
        int i = (int)oml_rng_below(&r, K);
        /* Mostly inserts early on, balanced churn later. */
        int op = (int)oml_rng_below(&r, 3);
        if (op < 2 && !(step > STEPS / 2 && op == 1)) {
            uint32_t val = (uint32_t)oml_rng_below(&r, 1u << 30);
            assert_int_equal(oml_idmap_put(&m, keys[i], lens[i], val), OML_OK);
            if (ref[i] < 0)
                live++;
            ref[i] = val;
        } else {
            int rc = oml_idmap_del(&m, keys[i], lens[i]);
            assert_int_equal(rc, ref[i] < 0 ? OML_ENOTFOUND : OML_OK);
            if (ref[i] >= 0)
                live--;
            ref[i] = -1;
        }
        assert_int_equal(oml_idmap_count(&m), live);
        if (step % 5000 == 0 || step == STEPS - 1)
            for (int j = 0; j < K; j++) {
                int rc = oml_idmap_get(&m, keys[j], lens[j], &v);
                if (ref[j] < 0) {
                    assert_int_equal(rc, OML_ENOTFOUND);
                } else {
                    assert_int_equal(rc, OML_OK);
                    assert_int_equal(v, (uint32_t)ref[j]);
                }
            }
    }
    /* Keys with NUL bytes and prefixes are distinct keys. */
    assert_int_equal(oml_idmap_put(&m, "a\0b", 3, 1), OML_OK);
    assert_int_equal(oml_idmap_put(&m, "a\0c", 3, 2), OML_OK);
    assert_int_equal(oml_idmap_put(&m, "a", 1, 3), OML_OK);
    assert_int_equal(oml_idmap_get(&m, "a\0b", 3, &v), OML_OK);
    assert_int_equal(v, 1);
    assert_int_equal(oml_idmap_get(&m, "a\0c", 3, &v), OML_OK);
    assert_int_equal(v, 2);
    assert_int_equal(oml_idmap_get(&m, "a", 1, &v), OML_OK);
    assert_int_equal(v, 3);
    assert_int_equal(oml_idmap_get(&m, "a\0", 2, &v), OML_ENOTFOUND);
    /* Reserve then insert never grows. */
    assert_int_equal(oml_idmap_reserve(&m, 5000), OML_OK);
    const oml_idmap_entry *tab = m._tab;
    static char more[5000][16];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(more[i], sizeof more[i], "m%d", i);
        assert_int_equal(oml_idmap_put(&m, more[i], (size_t)n, (uint32_t)i), OML_OK);
    }
    assert_ptr_equal(m._tab, tab);
    oml_idmap_free(&m);
    oml_idmap_free(&m);

    oml_idmap e;
    oml_idmap_init(&e);
    assert_int_equal(oml_idmap_get(&e, "x", 1, &v), OML_ENOTFOUND);
    assert_int_equal(oml_idmap_del(&e, "x", 1), OML_ENOTFOUND);
    oml_idmap_free(&e);
}

/* SipHash-2-4 against the reference vectors (Aumasson and Bernstein,
 * the reference implementation's vectors.h): key 00..0f, message 00..n-1
 * for n = 0..63, output as a little-endian u64. */
static const uint64_t SIP64[64] = {
    0x726fdb47dd0e0e31ULL, 0x74f839c593dc67fdULL, 0x0d6c8009d9a94f5aULL,
    0x85676696d7fb7e2dULL, 0xcf2794e0277187b7ULL, 0x18765564cd99a68dULL,
    0xcbc9466e58fee3ceULL, 0xab0200f58b01d137ULL, 0x93f5f5799a932462ULL,
    0x9e0082df0ba9e4b0ULL, 0x7a5dbbc594ddb9f3ULL, 0xf4b32f46226bada7ULL,
    0x751e8fbc860ee5fbULL, 0x14ea5627c0843d90ULL, 0xf723ca908e7af2eeULL,
    0xa129ca6149be45e5ULL, 0x3f2acc7f57c29bdbULL, 0x699ae9f52cbe4794ULL,
    0x4bc1b3f0968dd39cULL, 0xbb6dc91da77961bdULL, 0xbed65cf21aa2ee98ULL,
    0xd0f2cbb02e3b67c7ULL, 0x93536795e3a33e88ULL, 0xa80c038ccd5ccec8ULL,
    0xb8ad50c6f649af94ULL, 0xbce192de8a85b8eaULL, 0x17d835b85bbb15f3ULL,
    0x2f2e6163076bcfadULL, 0xde4daaaca71dc9a5ULL, 0xa6a2506687956571ULL,
    0xad87a3535c49ef28ULL, 0x32d892fad841c342ULL, 0x7127512f72f27cceULL,
    0xa7f32346f95978e3ULL, 0x12e0b01abb051238ULL, 0x15e034d40fa197aeULL,
    0x314dffbe0815a3b4ULL, 0x027990f029623981ULL, 0xcadcd4e59ef40c4dULL,
    0x9abfd8766a33735cULL, 0x0e3ea96b5304a7d0ULL, 0xad0c42d6fc585992ULL,
    0x187306c89bc215a9ULL, 0xd4a60abcf3792b95ULL, 0xf935451de4f21df2ULL,
    0xa9538f0419755787ULL, 0xdb9acddff56ca510ULL, 0xd06c98cd5c0975ebULL,
    0xe612a3cb9ecba951ULL, 0xc766e62cfcadaf96ULL, 0xee64435a9752fe72ULL,
    0xa192d576b245165aULL, 0x0a8787bf8ecb74b2ULL, 0x81b3e73d20b49b6fULL,
    0x7fa8220ba3b2eceaULL, 0x245731c13ca42499ULL, 0xb78dbfaf3a8d83bdULL,
    0xea1ad565322a1a0bULL, 0x60e61c23a3795013ULL, 0x6606d7e446282b93ULL,
    0x6ca4ecb15c5f91e1ULL, 0x9f626da15c9625f3ULL, 0xe51b38608ef25f57ULL,
    0x958a324ceb064572ULL,
};

static void test_siphash_vectors(void **state)
{
    (void)state;
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    for (size_t n = 0; n < 64; n++) {
        uint64_t h = oml_siphash24(key, msg, n);
        if (h != SIP64[n])
            fail_msg("SipHash-2-4 of %zu bytes: %016llx, want %016llx", n,
                     (unsigned long long)h, (unsigned long long)SIP64[n]);
    }
}

/* The same ops under two keys. */
static void store_ops(oml_store *s)
{
    float x[DIM];
    char id[32], lab[8];
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof id, "id-%d", (i * 37) % 200);
        snprintf(lab, sizeof lab, "L%d", i % 7);
        fill(x, (float)i);
        if (i % 5 == 4)
            (void)oml_store_delete(s, id, strlen(id));
        else
            assert_int_equal(put(s, id, x, i % 3 ? lab : NULL, NULL), OML_OK);
    }
}

/* The id map is keyed (the same id hashes differently under two keys), and
 * nothing persisted depends on the key: the same operations under two keys
 * encode to the same bytes (the checkpoint bit-identity depends on it). */
static void test_keyed_hash_changes_nothing_persisted(void **state)
{
    (void)state;
    uint8_t ka[16], kb[16];
    for (int i = 0; i < 16; i++) {
        ka[i] = (uint8_t)(i * 17 + 1);
        kb[i] = (uint8_t)(255 - i * 3);
    }
    uint8_t *bytes[2];
    size_t len[2];
    static const char *const ids[8] = {"same id", "b", "c", "d", "e", "f", "g", "h"};
    uint32_t where[2][8];
    for (int k = 0; k < 2; k++) {
        oml_idmap_set_key(k ? kb : ka);
        oml_idmap m;
        oml_idmap_init(&m);
        for (int i = 0; i < 8; i++)
            assert_int_equal(oml_idmap_put(&m, ids[i], strlen(ids[i]), (uint32_t)i), OML_OK);
        for (uint32_t i = 0; i < m._cap; i++) /* each id's bucket under this key */
            if (m._tab[i].key != NULL)
                where[k][m._tab[i].value] = i;
        oml_idmap_free(&m);
        oml_store *s;
        assert_int_equal(oml_store_create(&s, DIM, 1000), OML_OK);
        store_ops(s);
        assert_int_equal(oml_store_encode(s, &bytes[k], &len[k]), OML_OK);
        oml_store_destroy(s);
    }
    assert_memory_not_equal(where[0], where[1], sizeof where[0]); /* the keys place them apart */
    assert_int_equal(len[0], len[1]);
    assert_memory_equal(bytes[0], bytes[1], len[0]);
    free(bytes[0]);
    free(bytes[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_bad_args),
        cmocka_unit_test(test_upsert_and_overwrite),
        cmocka_unit_test(test_delete_and_reput),
        cmocka_unit_test(test_slot_reuse),
        cmocka_unit_test(test_id_validation),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_decode_refuses_nonfinite),
        cmocka_unit_test(test_capacity),
        cmocka_unit_test(test_label_interning),
        cmocka_unit_test(test_many_items),
        cmocka_unit_test(test_large_store_rows_stay_put),
        cmocka_unit_test(test_idmap_churn),
        cmocka_unit_test(test_siphash_vectors),
        cmocka_unit_test(test_keyed_hash_changes_nothing_persisted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
