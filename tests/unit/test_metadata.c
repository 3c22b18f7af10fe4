/* test_metadata.c - packed item metadata and the one filter evaluation
 * (src/metadata.h): packing's bounds and refusals, lookups, equality and
 * set membership, AND of conditions, items without metadata, and the
 * checker that guards decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata.h"

static uint8_t *pack(const oml_meta_kv *kv, size_t n, size_t *len)
{
    uint8_t *b = NULL;
    assert_int_equal(oml_meta_pack(kv, n, &b, len, NULL), OML_OK);
    assert_int_equal(oml_meta_size(b), *len);
    assert_int_equal(oml_meta_check(b, *len, NULL), OML_OK);
    return b;
}

#define KV(k, v) {k, sizeof k - 1, v, sizeof v - 1}

static void test_pack_and_get(void **state)
{
    (void)state;
    oml_meta_kv kv[] = {KV("color", "red"), KV("size", ""), KV("brand", "acme")};
    size_t len;
    uint8_t *b = pack(kv, 3, &len);
    assert_int_equal(oml_meta_count(b), 3);
    assert_int_equal(len, 1 + 3 * 3 + 5 + 3 + 4 + 0 + 5 + 4);
    oml_meta_kv e;
    oml_meta_entry(b, 2, &e);
    assert_int_equal(e.key_len, 5);
    assert_memory_equal(e.key, "brand", 5);
    assert_memory_equal(e.value, "acme", 4);
    const char *v;
    size_t vl;
    assert_true(oml_meta_get(b, "size", 4, &v, &vl));
    assert_int_equal(vl, 0);
    assert_false(oml_meta_get(b, "siz", 3, &v, &vl));
    assert_false(oml_meta_get(NULL, "size", 4, &v, &vl));
    free(b);
}

static void test_pack_refusals(void **state)
{
    (void)state;
    uint8_t *b = NULL;
    size_t len;
    oml_diag d = {0};
    oml_meta_kv dup[] = {KV("a", "1"), KV("b", "2"), KV("a", "3")};
    assert_int_equal(oml_meta_pack(dup, 3, &b, &len, &d), OML_EINVAL);
    assert_string_equal(d.field, "metadata[2].key");
    oml_meta_kv empty[] = {KV("", "x")};
    assert_int_equal(oml_meta_pack(empty, 1, &b, &len, &d), OML_EINVAL);
    assert_string_equal(d.field, "metadata[0].key");
    oml_meta_kv nul[] = {KV("ok", "a\0b")};
    assert_int_equal(oml_meta_pack(nul, 1, &b, &len, &d), OML_EINVAL);
    assert_string_equal(d.field, "metadata[0].value");
    char big[OML_META_KEY_MAX + 1];
    memset(big, 'k', sizeof big);
    oml_meta_kv lng[] = {{big, sizeof big, "v", 1}};
    assert_int_equal(oml_meta_pack(lng, 1, &b, &len, &d), OML_EINVAL);
    assert_string_equal(d.field, "metadata[0].key");
    assert_int_equal(oml_meta_pack(lng, 0, &b, &len, &d), OML_EINVAL);
    assert_null(b);
}

static void test_match(void **state)
{
    (void)state;
    oml_meta_kv kv[] = {KV("color", "red"), KV("size", "M")};
    size_t len;
    uint8_t *b = pack(kv, 2, &len);
    const char *red[] = {"red"}, *blue[] = {"blue"}, *rb[] = {"blue", "red"}, *m[] = {"M"},
               *re[] = {"re"}, *none[] = {""};
    oml_meta_cond eq = {"color", red, 1}, ne = {"color", blue, 1}, in = {"color", rb, 2},
                  sz = {"size", m, 1}, prefix = {"color", re, 1}, absent = {"shape", none, 1};
    assert_true(oml_meta_match(b, NULL, 0));
    assert_true(oml_meta_match(b, &eq, 1));
    assert_false(oml_meta_match(b, &ne, 1));
    assert_true(oml_meta_match(b, &in, 1));
    assert_false(oml_meta_match(b, &prefix, 1)); /* whole values only */
    assert_false(oml_meta_match(b, &absent, 1)); /* a missing key is not "" */
    oml_meta_cond both[] = {in, sz}, fails[] = {eq, ne};
    assert_true(oml_meta_match(b, both, 2));
    assert_false(oml_meta_match(b, fails, 2)); /* AND */
    assert_false(oml_meta_match(NULL, &eq, 1)); /* no metadata matches no condition */
    assert_true(oml_meta_match(NULL, NULL, 0));
    free(b);
}

/* The memoised filter answers as oml_meta_match, blob by blob, however
 * many blobs share the memo's slots. */
static void test_filter_memo(void **state)
{
    (void)state;
    enum { N = 300 };
    uint8_t *blobs[N];
    size_t len;
    char v[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(v[i], sizeof v[i], "v%d", i % 7);
        oml_meta_kv kv[] = {{"k", 1, v[i], strlen(v[i])}};
        blobs[i] = pack(kv, 1, &len);
    }
    const char *vals[] = {"v2", "v5"};
    oml_meta_cond c = {"k", vals, 2};
    oml_meta_filter f;
    oml_meta_filter_init(&f, &c, 1);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i++)
            assert_int_equal(oml_meta_filter_match(&f, blobs[i]), oml_meta_match(blobs[i], &c, 1));
    assert_false(oml_meta_filter_match(&f, NULL));
    oml_meta_filter_init(&f, NULL, 0);
    assert_true(oml_meta_filter_match(&f, NULL));
    for (int i = 0; i < N; i++)
        free(blobs[i]);
}

/* Every prefix and single-byte damage of a blob is refused or still well-formed. */
static void test_check(void **state)
{
    (void)state;
    oml_meta_kv kv[] = {KV("color", "red"), KV("size", "M")};
    size_t len;
    uint8_t *b = pack(kv, 2, &len);
    for (size_t n = 0; n < len; n++)
        assert_int_equal(oml_meta_check(b, n, NULL), OML_EFORMAT);
    uint8_t *c = malloc(len + 1);
    memcpy(c, b, len);
    c[len] = 'x';
    assert_int_equal(oml_meta_check(c, len + 1, NULL), OML_EFORMAT);
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(c, b, len);
            c[i] ^= (uint8_t)(1u << bit);
            if (oml_meta_check(c, len, NULL) == OML_OK)
                assert_int_equal(oml_meta_size(c), len);
        }
    memcpy(c, b, len);
    memcpy(c + 1 + 3 + 5 + 3 + 3, "color", 4); /* "size" -> "colo": still distinct */
    assert_int_equal(oml_meta_check(c, len, NULL), OML_OK);
    memcpy(c, b, len);
    c[0] = 0;
    assert_int_equal(oml_meta_check(c, 1, NULL), OML_EFORMAT);
    free(c);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pack_and_get),
        cmocka_unit_test(test_pack_refusals),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_filter_memo),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
