/* test_idem_table.c - the idempotency key table (daemon/idempotency.c):
 * lookups, the bound (oldest forgotten first), the codec's round trip in
 * arrival order, and refusals of damaged encodings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "idempotency.h"

static void add(omld_idem *t, const char *key, int32_t op, uint64_t a)
{
    assert_int_equal(omld_idem_add(t, key, strlen(key), op, a, a + 1), OML_OK);
}

static int has(const omld_idem *t, const char *key)
{
    return omld_idem_find(t, key, strlen(key)) != NULL;
}

static void test_find_and_bound(void **state)
{
    (void)state;
    omld_idem t;
    assert_int_equal(omld_idem_init(&t, 3), OML_OK);
    add(&t, "k1", 13, 10);
    add(&t, "k2", 14, 20);
    const omld_idem_entry *e = omld_idem_find(&t, "k2", 2);
    assert_non_null(e);
    assert_int_equal(e->op, 14);
    assert_int_equal(e->a, 20);
    assert_int_equal(e->b, 21);
    add(&t, "k1", 99, 99); /* already there: unchanged */
    assert_int_equal(omld_idem_find(&t, "k1", 2)->op, 13);
    add(&t, "k3", 13, 30);
    add(&t, "k4", 13, 40); /* full: k1, the oldest, goes */
    assert_false(has(&t, "k1"));
    assert_true(has(&t, "k2") && has(&t, "k3") && has(&t, "k4"));
    for (int i = 0; i < 100; i++) { /* many wraps of the ring */
        char k[16];
        snprintf(k, sizeof k, "w%d", i);
        add(&t, k, 13, (uint64_t)i);
    }
    assert_int_equal(t.n, 3);
    assert_int_equal(oml_idmap_count(&t.by_key), 3);
    assert_true(has(&t, "w97") && has(&t, "w98") && has(&t, "w99") && !has(&t, "w96"));
    omld_idem_free(&t);

    assert_int_equal(omld_idem_init(&t, 0), OML_OK); /* off: keeps nothing */
    add(&t, "k", 13, 1);
    assert_false(has(&t, "k"));
    omld_idem_free(&t);
}

/* Encoded oldest first: decoding into a smaller table keeps the newest. */
static void test_codec_round_trip(void **state)
{
    (void)state;
    omld_idem t, u, v;
    assert_int_equal(omld_idem_init(&t, 4), OML_OK);
    for (int i = 0; i < 6; i++) {
        char k[16];
        snprintf(k, sizeof k, "key-%d", i);
        add(&t, k, 10 + i, (uint64_t)i * 1000);
    }
    uint8_t *p;
    size_t n;
    assert_int_equal(omld_idem_encode(&t, &p, &n), OML_OK);
    /* u32 count + 4 x (u32 len + 5 bytes + i32 + 2 x u64). */
    assert_int_equal(n, 4 + 4 * (4 + 5 + 4 + 16));
    oml_diag d = {0};
    assert_int_equal(omld_idem_init(&u, 4), OML_OK);
    assert_int_equal(omld_idem_decode(&u, p, n, &d), OML_OK);
    uint8_t *q;
    size_t m;
    assert_int_equal(omld_idem_encode(&u, &q, &m), OML_OK);
    assert_int_equal(m, n);
    assert_memory_equal(p, q, n);
    assert_int_equal(omld_idem_find(&u, "key-5", 5)->a, 5000);
    assert_int_equal(omld_idem_find(&u, "key-2", 5)->op, 12);
    assert_int_equal(omld_idem_init(&v, 2), OML_OK);
    assert_int_equal(omld_idem_decode(&v, p, n, &d), OML_OK);
    assert_true(has(&v, "key-4") && has(&v, "key-5") && !has(&v, "key-3"));

    /* Damage: every cut is refused, and bytes after the table too. */
    for (size_t cut = 0; cut < n; cut++) {
        omld_idem w;
        assert_int_equal(omld_idem_init(&w, 4), OML_OK);
        assert_int_equal(omld_idem_decode(&w, p, cut, &d), OML_EFORMAT);
        omld_idem_free(&w);
    }
    uint8_t *longer = malloc(n + 1);
    memcpy(longer, p, n);
    longer[n] = 0;
    omld_idem w;
    assert_int_equal(omld_idem_init(&w, 4), OML_OK);
    assert_int_equal(omld_idem_decode(&w, longer, n + 1, &d), OML_EFORMAT);
    omld_idem_free(&w);
    free(longer);
    free(p);
    free(q);
    omld_idem_free(&t);
    omld_idem_free(&u);
    omld_idem_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_and_bound),
        cmocka_unit_test(test_codec_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
