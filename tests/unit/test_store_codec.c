/* test_store_codec.c - bit-exact store serialisation (oml_store_encode/decode).
 *
 * A decoded store must answer every accessor as the original, keep slot
 * numbers and label ids, and go on to behave identically under the same
 * puts and deletes; the encoding is canonical (a buffer that decodes
 * re-encodes to itself). Damaged buffers (every truncation, every single-bit
 * flip, random overwrites, crafted hostile headers) are refused cleanly or
 * decode to a valid store; run under ASan/UBSan too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "damage.h"
#include "metadata.h"
#include "rng.h"
#include "store.h"

#define DIM 3
#define MAX_ITEMS 96
#define N_IDS 40
#define N_LABELS 7
#define HEAD 24 /* magic, version, dim, slots, live, labels */

/* A pool of ids and labels: random non-NUL bytes (UTF-8 or not), one id of
 * the maximum length, and a label that equals an id (separate namespaces). */
typedef struct pool {
    char ids[N_IDS][OML_ID_MAX];
    size_t id_len[N_IDS];
    char labels[N_LABELS][16];
    size_t label_len[N_LABELS];
} pool;

static void pool_init(pool *p, uint64_t seed)
{
    oml_rng r;
    oml_rng_seed(&r, seed);
    for (int i = 0; i < N_IDS; i++) {
        size_t n = i == 0 ? OML_ID_MAX : 1 + (size_t)oml_rng_below(&r, 12);
        for (size_t j = 0; j < n; j++)
            p->ids[i][j] = (char)(1 + oml_rng_below(&r, 255));
        /* A few short readable ids, so near-equal ids exist too. */
        if (i >= 1 && i < 6)
            n = (size_t)snprintf(p->ids[i], sizeof p->ids[i], "item-%d", i);
        p->id_len[i] = n;
    }
    for (int i = 0; i < N_LABELS; i++)
        p->label_len[i] = (size_t)snprintf(p->labels[i], sizeof p->labels[i], "label\xc3\xa9%d", i);
    memcpy(p->labels[0], p->ids[1], p->id_len[1]);
    p->label_len[0] = p->id_len[1];
}

/* The outcome of one random operation, to compare between two stores. */
typedef struct op_out {
    int kind, rc;
    uint32_t slot;
} op_out;

static float rand_feature(oml_rng *r)
{
    switch (oml_rng_below(r, 16)) {
    case 0:
        return -0.0f;
    case 1:
        return 1e-40f; /* subnormal */
    case 2:
        return -3.0e38f;
    default:
        return oml_rng_normal(r);
    }
}

/* One random put (most often) or delete, drawn from r. */
static op_out random_op(oml_store *s, const pool *p, oml_rng *r)
{
    op_out o = {0, 0, UINT32_MAX};
    int i = (int)oml_rng_below(r, N_IDS);
    if (oml_rng_below(r, 4) == 0) {
        o.kind = 1;
        o.rc = oml_store_delete(s, p->ids[i], p->id_len[i]);
        return o;
    }
    float x[DIM];
    for (int d = 0; d < DIM; d++)
        x[d] = rand_feature(r);
    int l = (int)oml_rng_below(r, N_LABELS + 2);
    const char *lab = l < N_LABELS ? p->labels[l] : NULL;
    size_t lab_len = l < N_LABELS ? p->label_len[l] : 0;
    /* One put in three carries metadata: 1..3 entries, values drawn from
     * a few so equal ones occur. */
    uint8_t *meta = NULL;
    size_t meta_len = 0;
    if (oml_rng_below(r, 3) == 0) {
        static const char *const keys[] = {"color", "size", "k\xc3\xa9y"};
        static const char *const vals[] = {"red", "", "blue", "a long value of a few bytes"};
        oml_meta_kv kv[3];
        size_t n = 1 + (size_t)oml_rng_below(r, 3);
        for (size_t j = 0; j < n; j++) {
            const char *v = vals[oml_rng_below(r, 4)];
            kv[j] = (oml_meta_kv){keys[j], strlen(keys[j]), v, strlen(v)};
        }
        assert_int_equal(oml_meta_pack(kv, n, &meta, &meta_len, NULL), OML_OK);
    }
    o.rc = oml_store_put_meta(s, p->ids[i], p->id_len[i], x, lab, lab_len, meta, meta_len,
                              &o.slot, NULL);
    free(meta);
    return o;
}

static void run_ops(oml_store *s, const pool *p, oml_rng *r, int n)
{
    for (int k = 0; k < n; k++)
        (void)random_op(s, p, r);
}

/* Every observable answer of a and b is the same. */
static void assert_same_store(const oml_store *a, const oml_store *b, const pool *p)
{
    assert_int_equal(oml_store_dim(a), oml_store_dim(b));
    assert_int_equal(oml_store_slots(a), oml_store_slots(b));
    assert_int_equal(oml_store_count(a), oml_store_count(b));
    assert_int_equal(oml_store_label_count(a), oml_store_label_count(b));
    for (int32_t l = 0; l < oml_store_label_count(a); l++) {
        size_t la, lb;
        const char *na = oml_store_label_name(a, l, &la), *nb = oml_store_label_name(b, l, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(na, nb, la + 1); /* NUL terminated too */
    }
    assert_null(oml_store_label_name(b, oml_store_label_count(b), NULL));
    size_t row = (size_t)oml_store_dim(a) * sizeof(float);
    for (uint32_t i = 0; i < oml_store_slots(a); i++) {
        assert_int_equal(oml_store_is_live(a, i), oml_store_is_live(b, i));
        assert_int_equal(oml_store_generation(a, i), oml_store_generation(b, i));
        assert_int_equal(oml_store_label(a, i), oml_store_label(b, i));
        assert_memory_equal(oml_store_features(a, i), oml_store_features(b, i), row);
        size_t la, lb;
        const char *ia = oml_store_id(a, i, &la), *ib = oml_store_id(b, i, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(ia, ib, la + 1);
        uint32_t fa = 7, fb = 7;
        assert_int_equal(oml_store_find(a, ia, la, &fa), oml_store_find(b, ib, lb, &fb));
        assert_int_equal(fa, fb);
        const uint8_t *ma = oml_store_meta(a, i), *mb = oml_store_meta(b, i);
        assert_int_equal(ma == NULL, mb == NULL);
        if (ma != NULL) {
            assert_int_equal(oml_meta_size(ma), oml_meta_size(mb));
            assert_memory_equal(ma, mb, oml_meta_size(ma));
        }
    }
    assert_int_equal(oml_store_meta_items(a), oml_store_meta_items(b));
    if (oml_store_slots(a) > 0)
        assert_memory_equal(oml_store_matrix(a), oml_store_matrix(b), oml_store_slots(a) * row);
    assert_null(oml_store_id(b, oml_store_slots(b), NULL));
    for (int i = 0; p != NULL && i < N_IDS; i++) {
        uint32_t fa = 7, fb = 7;
        assert_int_equal(oml_store_find(a, p->ids[i], p->id_len[i], &fa),
                         oml_store_find(b, p->ids[i], p->id_len[i], &fb));
        assert_int_equal(fa, fb);
    }
}

/* Decodes buf and checks that it re-encodes to exactly buf. */
static oml_store *decode_canonical(const uint8_t *buf, size_t len, uint32_t max_items)
{
    oml_store *s = NULL;
    oml_diag d = {0};
    int rc = oml_store_decode(&s, buf, len, max_items, &d);
    if (rc != OML_OK)
        print_error("decode: %d %s: %s\n", rc, d.field, d.msg);
    assert_int_equal(rc, OML_OK);
    uint8_t *again;
    size_t again_len;
    assert_int_equal(oml_store_encode(s, &again, &again_len), OML_OK);
    assert_int_equal(again_len, len);
    assert_memory_equal(again, buf, len);
    free(again);
    return s;
}

static void encode(const oml_store *s, uint8_t **buf, size_t *len)
{
    assert_int_equal(oml_store_encode(s, buf, len), OML_OK);
}

/* Builds a store from seed with n random operations (puts, overwrites,
 * label changes, deletes, re-puts of deleted ids, a full store). */
static oml_store *random_store(const pool *p, uint64_t seed, int n, uint32_t max_items)
{
    oml_store *s;
    assert_int_equal(oml_store_create(&s, DIM, max_items), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, seed);
    run_ops(s, p, &r, n);
    return s;
}

/* oml_store_encode_parts: head + the store's own features + tail is the
 * encoding byte for byte, and the features are borrowed, not copied. */
static void assert_parts_are_the_encoding(const oml_store *s, const uint8_t *buf, size_t len)
{
    uint8_t *head = NULL, *tail = NULL;
    const uint8_t *x = NULL;
    size_t nh = 0, nx = 0, nt = 0;
    assert_int_equal(oml_store_encode_parts(s, &head, &nh, &x, &nx, &tail, &nt), OML_OK);
    assert_int_equal(nh + nx + nt, len);
    assert_memory_equal(head, buf, nh);
    if (nx > 0) {
        assert_ptr_equal(x, oml_store_features(s, 0)); /* the store's rows, where they lie */
        assert_memory_equal(x, buf + nh, nx);
    }
    assert_memory_equal(tail, buf + nh + nx, nt);
    free(head);
    free(tail);
}

static void test_round_trip_random(void **state)
{
    (void)state;
    static pool p;
    pool_init(&p, 11);
    for (uint64_t seed = 1; seed <= 40; seed++) {
        int n = (int)(seed * 7 % 300);
        uint32_t max_items = seed % 5 == 0 ? 24 : MAX_ITEMS; /* some reach EFULL */
        oml_store *a = random_store(&p, seed, n, max_items);
        uint8_t *buf;
        size_t len;
        encode(a, &buf, &len);
        assert_parts_are_the_encoding(a, buf, len);
        oml_store *b = decode_canonical(buf, len, max_items);
        assert_same_store(a, b, &p);

        /* The same next operations give the same outcomes: slots, label ids,
         * EFULL, ENOTFOUND. */
        oml_rng ra, rb;
        oml_rng_seed(&ra, seed * 1000 + 1);
        rb = ra;
        for (int k = 0; k < 200; k++) {
            op_out oa = random_op(a, &p, &ra), ob = random_op(b, &p, &rb);
            assert_int_equal(oa.kind, ob.kind);
            assert_int_equal(oa.rc, ob.rc);
            assert_int_equal(oa.slot, ob.slot);
        }
        assert_same_store(a, b, &p);
        uint8_t *ba, *bb;
        size_t la, lb;
        encode(a, &ba, &la);
        encode(b, &bb, &lb);
        assert_int_equal(la, lb);
        assert_memory_equal(ba, bb, la);
        free(ba);
        free(bb);
        free(buf);
        oml_store_destroy(a);
        oml_store_destroy(b);
    }
}

/* A larger max_items on decode is allowed (configuration, not state); a
 * smaller one than the store needs is refused with OML_EFULL. */
static void test_max_items(void **state)
{
    (void)state;
    static pool p;
    pool_init(&p, 12);
    oml_store *a = random_store(&p, 5, 200, MAX_ITEMS);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    oml_store *b = decode_canonical(buf, len, 100000);
    assert_same_store(a, b, &p);
    oml_store_destroy(b);
    oml_diag d = {0};
    b = NULL;
    assert_int_equal(oml_store_decode(&b, buf, len, oml_store_slots(a) - 1, &d), OML_EFULL);
    assert_null(b);
    assert_string_equal(d.field, "max_items");
    assert_int_equal(oml_store_decode(&b, buf, len, oml_store_slots(a), NULL), OML_OK);
    oml_store_destroy(b);
    /* Labels outlive items: 1 slot, 3 labels needs max_items 3. */
    oml_store *few;
    assert_int_equal(oml_store_create(&few, DIM, 5), OML_OK);
    float x[DIM] = {0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(oml_store_put(few, "k", 1, x, p.labels[i], p.label_len[i], NULL, NULL),
                         OML_OK);
    uint8_t *fb;
    size_t fl;
    encode(few, &fb, &fl);
    assert_int_equal(oml_store_decode(&b, fb, fl, 2, &d), OML_EFULL);
    b = decode_canonical(fb, fl, 3);
    assert_same_store(few, b, &p);
    /* The next new label is refused alike on both (max_items 3 vs 5 would
     * differ: the bound is the caller's). */
    oml_store_destroy(b);
    b = decode_canonical(fb, fl, 5);
    assert_int_equal(oml_store_put(b, "k", 1, x, p.labels[3], p.label_len[3], NULL, NULL),
                     oml_store_put(few, "k", 1, x, p.labels[3], p.label_len[3], NULL, NULL));
    assert_same_store(few, b, &p);
    oml_store_destroy(b);
    oml_store_destroy(few);
    free(fb);
    assert_int_equal(oml_store_decode(&b, buf, len, 0, NULL), OML_EINVAL);
    assert_int_equal(oml_store_decode(NULL, buf, len, 10, NULL), OML_EINVAL);
    assert_int_equal(oml_store_decode(&b, NULL, 5, 10, NULL), OML_EINVAL);
    assert_int_equal(oml_store_encode(NULL, &buf, &len), OML_EINVAL);
    free(buf);
    oml_store_destroy(a);
}

static void test_empty(void **state)
{
    (void)state;
    oml_store *a;
    assert_int_equal(oml_store_create(&a, 5, 10), OML_OK);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    assert_int_equal(len, HEAD + 4); /* and a metadata count of 0 */
    oml_store *b = decode_canonical(buf, len, 10);
    assert_same_store(a, b, NULL);
    assert_int_equal(oml_store_dim(b), 5);
    float x[5] = {1, 2, 3, 4, 5};
    uint32_t slot = 9;
    assert_int_equal(oml_store_put(b, "z", 1, x, "l", 1, &slot, NULL), OML_OK);
    assert_int_equal(slot, 0);
    assert_int_equal(oml_store_label(b, 0), 0);
    assert_int_equal(oml_store_delete(b, "q", 1), OML_ENOTFOUND);
    free(buf);
    oml_store_destroy(a);
    oml_store_destroy(b);
}

/* Deletes and re-puts: the tombstone keeps its id until its slot is reused;
 * a new id takes the lowest free slot, on the decoded store as on the
 * original (the free slots are the dead ones, not written), and the
 * generations survive. Labels outlive their items. */
static void test_tombstones_and_labels(void **state)
{
    (void)state;
    oml_store *a;
    assert_int_equal(oml_store_create(&a, 2, 10), OML_OK);
    float x[2] = {1.5f, -2.5f};
    uint32_t slot;
    assert_int_equal(oml_store_put(a, "a", 1, x, "cat", 3, &slot, NULL), OML_OK);
    assert_int_equal(oml_store_put(a, "b", 1, x, "dog", 3, &slot, NULL), OML_OK);
    assert_int_equal(oml_store_put(a, "c", 1, x, NULL, 0, &slot, NULL), OML_OK);
    assert_int_equal(oml_store_delete(a, "a", 1), OML_OK);
    assert_int_equal(oml_store_put(a, "a", 1, x, "emu", 3, &slot, NULL), OML_OK);
    assert_int_equal(slot, 0); /* reused */
    assert_int_equal(oml_store_delete(a, "c", 1), OML_OK);
    assert_int_equal(oml_store_delete(a, "b", 1), OML_OK);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    oml_store *b = decode_canonical(buf, len, 10);
    assert_same_store(a, b, NULL);
    assert_true(oml_store_is_live(b, 0));
    assert_false(oml_store_is_live(b, 1));
    assert_false(oml_store_is_live(b, 2));
    assert_int_equal(oml_store_generation(b, 0), 1);
    assert_int_equal(oml_store_generation(b, 1), 1);
    assert_int_equal(oml_store_generation(b, 2), 1);
    assert_int_equal(oml_store_count(b), 1);
    assert_int_equal(oml_store_label_count(b), 3);
    assert_string_equal(oml_store_id(b, 2, NULL), "c"); /* a tombstone */
    for (oml_store *s = a; s != NULL; s = s == a ? b : NULL) {
        assert_int_equal(oml_store_put(s, "dog-owner", 9, x, "dog", 3, &slot, NULL), OML_OK);
        assert_int_equal(slot, 1); /* the lowest free slot, not the last freed */
        assert_int_equal(oml_store_label(s, 1), 1); /* the old id of "dog" */
        assert_int_equal(oml_store_put(s, "b", 1, x, "fox", 3, &slot, NULL), OML_OK);
        assert_int_equal(slot, 2);
        assert_int_equal(oml_store_label(s, 2), 3);
        assert_int_equal(oml_store_put(s, "d", 1, x, NULL, 0, &slot, NULL), OML_OK);
        assert_int_equal(slot, 3); /* no free slot left: a new one */
        assert_int_equal(oml_store_delete(s, "a", 1), OML_OK);
        assert_int_equal(oml_store_delete(s, "a", 1), OML_ENOTFOUND);
        assert_int_equal(oml_store_generation(s, 0), 2);
    }
    assert_same_store(a, b, NULL);
    free(buf);
    oml_store_destroy(a);
    oml_store_destroy(b);
}

/* A store of dim 2 with "p" (label "L") in slot 0 and "q" in slot 1. */
static oml_store *two_items(const float *x)
{
    oml_store *a;
    assert_int_equal(oml_store_create(&a, 2, 10), OML_OK);
    assert_int_equal(oml_store_put(a, "p", 1, x, "L", 1, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_put(a, "q", 1, x, NULL, 0, NULL, NULL), OML_OK);
    return a;
}

/* A version 1 buffer (no generations) still decodes: every generation 0,
 * the same slots reused; it re-encodes as version 3. */
static void test_version_1(void **state)
{
    (void)state;
    float x[2] = {3, 4};
    oml_store *a = two_items(x);
    assert_int_equal(oml_store_delete(a, "p", 1), OML_OK);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    /* As version 1 wrote it: version 1, no generation block, no metadata. */
    buf[4] = 1;
    len -= 2 * sizeof(uint32_t) + sizeof(uint32_t);
    oml_store *b = NULL;
    assert_int_equal(oml_store_decode(&b, buf, len, 10, NULL), OML_OK);
    assert_int_equal(oml_store_generation(b, 0), 0);
    assert_false(oml_store_is_live(b, 0));
    uint32_t slot;
    assert_int_equal(oml_store_put(b, "r", 1, x, NULL, 0, &slot, NULL), OML_OK);
    assert_int_equal(slot, 0);
    uint8_t *again;
    size_t again_len;
    assert_int_equal(oml_store_encode(b, &again, &again_len), OML_OK);
    assert_int_equal(again[4], OML_STORE_CODEC_VERSION);
    assert_int_equal(again_len, len + 2 * sizeof(uint32_t) + sizeof(uint32_t));
    /* A version 1 buffer with a generation block is trailing bytes. */
    buf[4] = 1;
    oml_store *c = NULL;
    assert_int_equal(oml_store_decode(&c, buf, len + 8, 10, NULL), OML_EFORMAT);
    free(again);
    free(buf);
    oml_store_destroy(a);
    oml_store_destroy(b);
}

/* Every strict prefix is refused with OML_EFORMAT. */
static void test_truncation(void **state)
{
    (void)state;
    static pool p;
    pool_init(&p, 13);
    oml_store *a = random_store(&p, 3, 120, MAX_ITEMS);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, buf, n);
        oml_store *b = NULL;
        oml_diag d = {0};
        assert_int_equal(oml_store_decode(&b, copy, n, MAX_ITEMS, &d), OML_EFORMAT);
        assert_null(b);
        assert_true(d.msg[0] != '\0');
        free(copy);
    }
    /* A trailing byte is refused too. */
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    oml_store *b = NULL;
    assert_int_equal(oml_store_decode(&b, longer, len + 1, MAX_ITEMS, NULL), OML_EFORMAT);
    free(longer);
    free(buf);
    oml_store_destroy(a);
}

/* A damaged buffer is refused with a format error or, if the damage left a
 * valid store (e.g. a flip inside a feature), decodes canonically to a store
 * that works. */
static int check_damaged(const uint8_t *buf, size_t len, void *arg, uint64_t seed)
{
    const pool *p = arg;
    oml_store *s = NULL;
    oml_diag d = {0};
    int rc = oml_store_decode(&s, buf, len, MAX_ITEMS, &d);
    if (rc != OML_OK) {
        assert_true(rc == OML_EFORMAT || rc == OML_EVERSION || rc == OML_EFULL);
        assert_null(s);
        assert_true(d.code == rc && d.msg[0] != '\0');
        return 0;
    }
    uint8_t *again;
    size_t again_len;
    encode(s, &again, &again_len);
    assert_int_equal(again_len, len);
    assert_memory_equal(again, buf, len);
    free(again);
    oml_rng r;
    oml_rng_seed(&r, seed);
    run_ops(s, p, &r, 30);
    oml_store_destroy(s);
    return 1;
}

static void test_bit_flips(void **state)
{
    (void)state;
    static pool p;
    pool_init(&p, 14);
    oml_store *a = random_store(&p, 4, 60, MAX_ITEMS);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    /* Every bit flip, then 3000 rounds of random multi-byte damage. */
    int accepted = oml_test_damage(buf, len, 99, 3000, NULL, check_damaged, &p);
    /* Flips in features, live flags and label ids can be valid. */
    assert_true(accepted > 0);
    free(buf);
    oml_store_destroy(a);
}

static void expect_refused(const uint8_t *buf, size_t len, int want, const char *what)
{
    oml_store *s = NULL;
    oml_diag d = {0};
    int rc = oml_store_decode(&s, buf, len, MAX_ITEMS, &d);
    if (rc != want)
        print_error("%s: got %d (%s), want %d\n", what, rc, d.msg, want);
    else if (getenv("OML_TEST_VERBOSE") != NULL)
        print_message("%-32s -> %s\n", what, d.msg);
    assert_int_equal(rc, want);
    assert_null(s);
}

/* Crafted damage: each rule of the decoder, and counts that would make a
 * careless decoder allocate gigabytes. */
static void test_hostile(void **state)
{
    (void)state;
    oml_store *a;
    assert_int_equal(oml_store_create(&a, 2, MAX_ITEMS), OML_OK);
    float x[2] = {1, 2};
    /* slot 0: "ab" tombstone, label 0; slot 1: "cd" live, label 1, renamed
     * "ab" in the bytes below (a put of "ab" would now reuse slot 0). */
    assert_int_equal(oml_store_put(a, "ab", 2, x, "L", 1, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_put(a, "cd", 2, x, "M", 1, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_delete(a, "ab", 2), OML_OK);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    /* Layout: head 24 | "L" at 24 (4+1) | "M" at 29 (4+1) | slot 0 at 34
     * (live 34, label 35, id_len 39, id 43) | slot 1 at 45 | floats at 56 |
     * generations at 72. */
    const size_t LAB0 = HEAD, SLOT0 = HEAD + 10, SLOT1 = SLOT0 + 11, FEAT = SLOT1 + 11;
    assert_int_equal(len, FEAT + 2 * 2 * sizeof(float) + 2 * sizeof(uint32_t) + 4);
    memcpy(buf + SLOT1 + 9, "ab", 2);
    uint8_t *c = malloc(len);
    oml_store *b = decode_canonical(buf, len, MAX_ITEMS);
    oml_store_destroy(b);

#define CASE(what, want, edit)  \
    do {                         \
        memcpy(c, buf, len);     \
        edit;                    \
        expect_refused(c, len, want, what); \
    } while (0)
    CASE("bad magic", OML_EFORMAT, c[0] = 'X');
    CASE("newer version", OML_EVERSION, oml_le32_store(c + 4, OML_STORE_CODEC_VERSION + 1));
    CASE("version 0", OML_EVERSION, oml_le32_store(c + 4, 0));
    CASE("dim 0", OML_EFORMAT, oml_le32_store(c + 8, 0));
    CASE("dim < 0", OML_EFORMAT, oml_le32_store(c + 8, (uint32_t)-2));
    CASE("huge dim", OML_EFORMAT, oml_le32_store(c + 8, INT32_MAX));
    CASE("huge slots", OML_EFORMAT, oml_le32_store(c + 12, UINT32_MAX));
    CASE("live > slots", OML_EFORMAT, oml_le32_store(c + 16, 3));
    CASE("live count low", OML_EFORMAT, oml_le32_store(c + 16, 0));
    CASE("huge labels", OML_EFORMAT, oml_le32_store(c + 20, UINT32_MAX));
    CASE("labels > max_items", OML_EFORMAT, oml_le32_store(c + 20, MAX_ITEMS + 1));
    CASE("empty label", OML_EFORMAT, oml_le32_store(c + LAB0, 0));
    CASE("long label", OML_EFORMAT, oml_le32_store(c + LAB0, OML_ID_MAX + 1));
    CASE("NUL in label", OML_EFORMAT, c[LAB0 + 4] = 0);
    CASE("duplicate label", OML_EFORMAT, c[LAB0 + 9] = 'L');
    CASE("live flag 2", OML_EFORMAT, c[SLOT0] = 2);
    CASE("two live slots with one id", OML_EFORMAT, c[SLOT0] = 1);
    CASE("two live slots with one id (counted)", OML_EFORMAT, {
        c[SLOT0] = 1;
        oml_le32_store(c + 16, 2);
    });
    CASE("label id out of range", OML_EFORMAT, oml_le32_store(c + (SLOT0 + 1), 2));
    CASE("label id < -1", OML_EFORMAT, oml_le32_store(c + (SLOT0 + 1), (uint32_t)-2));
    CASE("empty id", OML_EFORMAT, oml_le32_store(c + (SLOT0 + 5), 0));
    CASE("id past the end", OML_EFORMAT, oml_le32_store(c + (SLOT0 + 5), UINT32_MAX));
    CASE("NUL in id", OML_EFORMAT, c[SLOT1 + 9] = 0);
    CASE("NaN feature", OML_EFORMAT, oml_le32_store(c + FEAT, 0x7fc00000u));
    CASE("infinite feature", OML_EFORMAT, oml_le32_store(c + (FEAT + 12), 0xff800000u));
#undef CASE
    /* Valid variants: a tombstoned id may equal a live one (it does here),
     * a tombstone may be revived by the flags if no live slot has its id. */
    memcpy(c, buf, len);
    c[SLOT0] = 1;
    c[SLOT1] = 0;
    b = decode_canonical(c, len, MAX_ITEMS);
    uint32_t slot;
    assert_int_equal(oml_store_find(b, "ab", 2, &slot), OML_OK);
    assert_int_equal(slot, 0);
    oml_store_destroy(b);
    /* A huge slot count with a matching live count, in a short buffer. */
    memcpy(c, buf, len);
    oml_le32_store(c + 12, 0x40000000u);
    oml_le32_store(c + 16, 0x40000000u);
    oml_le32_store(c + 8, 1);
    expect_refused(c, len, OML_EFORMAT, "2^30 slots");
    free(c);
    free(buf);
    oml_store_destroy(a);
}

/* A version 2 buffer (a checkpoint from before metadata) still decodes,
 * with no metadata, and re-encodes as version 3; items with metadata
 * round-trip, and a put without metadata clears it. */
static void test_version_2_and_metadata(void **state)
{
    (void)state;
    float x[2] = {3, 4};
    oml_store *a = two_items(x);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    buf[4] = 2; /* as version 2 wrote it: no metadata section */
    oml_store *b = NULL;
    assert_int_equal(oml_store_decode(&b, buf, len - 4, 10, NULL), OML_OK);
    assert_same_store(a, b, NULL);
    assert_null(oml_store_meta(b, 0));
    oml_store_destroy(b);
    free(buf);

    oml_meta_kv kv[2] = {{"color", 5, "red", 3}, {"tier", 4, "", 0}};
    uint8_t *meta;
    size_t meta_len;
    assert_int_equal(oml_meta_pack(kv, 2, &meta, &meta_len, NULL), OML_OK);
    assert_int_equal(oml_store_put_meta(a, "q", 1, x, NULL, 0, meta, meta_len, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_meta_items(a), 1);
    encode(a, &buf, &len);
    assert_parts_are_the_encoding(a, buf, len); /* metadata is in the tail */
    b = decode_canonical(buf, len, 10);
    assert_same_store(a, b, NULL);
    const char *v;
    size_t vl;
    assert_true(oml_meta_get(oml_store_meta(b, 1), "color", 5, &v, &vl));
    assert_int_equal(vl, 3);
    assert_memory_equal(v, "red", 3);
    /* Hostile: metadata of a dead slot, a slot out of range, a bad blob. */
    uint8_t *c = malloc(len);
    size_t at = len - 4 - 4 - meta_len; /* slot field of the one entry */
    memcpy(c, buf, len);
    oml_le32_store(c + at, 0);
    oml_store_destroy(b);
    assert_int_equal(oml_store_decode(&b, c, len, 10, NULL), OML_OK); /* slot 0 is live too */
    oml_store_destroy(b);
    b = NULL;
    oml_le32_store(c + at, 7);
    expect_refused(c, len, OML_EFORMAT, "metadata of slot 7");
    memcpy(c, buf, len);
    c[len - meta_len] = 3; /* three entries claimed, two there */
    expect_refused(c, len, OML_EFORMAT, "metadata truncated");
    memcpy(c, buf, len);
    c[len - meta_len + 4] = 0; /* a NUL inside the key "color" */
    expect_refused(c, len, OML_EFORMAT, "metadata NUL in key");
    memcpy(c, buf, len);
    oml_le32_store(c + len - meta_len - 4 - 4 - 4, 5); /* a count of 5 */
    expect_refused(c, len, OML_EFORMAT, "metadata count");
    free(c);
    /* Equal metadata is one shared copy, freed with its last holder. */
    assert_int_equal(oml_store_put_meta(a, "p", 1, x, NULL, 0, meta, meta_len, NULL, NULL), OML_OK);
    assert_ptr_equal(oml_store_meta(a, 0), oml_store_meta(a, 1));
    assert_int_equal(oml_store_delete(a, "p", 1), OML_OK);
    assert_int_equal(oml_meta_size(oml_store_meta(a, 1)), meta_len);
    /* A put without metadata replaces the item's; a delete drops it. */
    assert_int_equal(oml_store_put(a, "q", 1, x, NULL, 0, NULL, NULL), OML_OK);
    assert_null(oml_store_meta(a, 1));
    assert_int_equal(oml_store_meta_items(a), 0);
    assert_int_equal(oml_store_put_meta(a, "p", 1, x, NULL, 0, meta, meta_len, NULL, NULL), OML_OK);
    assert_int_equal(oml_store_delete(a, "p", 1), OML_OK);
    assert_null(oml_store_meta(a, 0));
    assert_int_equal(oml_store_meta_items(a), 0);
    free(meta);
    free(buf);
    oml_store_destroy(a);
    oml_store_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_version_2_and_metadata),
        cmocka_unit_test(test_max_items),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_tombstones_and_labels),
        cmocka_unit_test(test_version_1),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
