/* test_closure_codec.c - bit-exact closure serialisation
 * (oml_closure_encode/decode).
 *
 * The determinism requirement: a closure decoded from a checkpoint, fed the
 * same facts and sample calls as the original, hands out exactly the same
 * triplets, errors and stats. So every test runs the SAME random sequence of
 * operations on the original and on the decoded copy and compares each
 * outcome. Damaged buffers (every truncation, every bit flip, random
 * overwrites, crafted union-find cycles and deep chains, asymmetric edges)
 * are refused cleanly or decode canonically to a closure that works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "closure.h"
#include "bytes.h"
#include "damage.h"
#include "rng.h"

#define MAXN 80     /* max_nodes: node ids 64.. make the node arrays grow */
#define NODES 72    /* facts draw nodes below this (and a few out of range) */
#define MAXE 24     /* max_dis_edges: long sequences hit OML_EFULL */
#define MAX_OUT 8
#define HEAD 104    /* magic, 9 u32, rng (32), stats (32) */

/* The outcome of one random operation, to compare between two closures. */
typedef struct op_out {
    int kind, rc, n;
    oml_triplet t[MAX_OUT];
} op_out;

static uint32_t pick(oml_rng *r)
{
    uint64_t k = oml_rng_below(r, 20);
    if (k == 0)
        return (uint32_t)oml_rng_below(r, MAXN + 4); /* sometimes out of range */
    return (uint32_t)oml_rng_below(r, k < 13 ? 24 : NODES);
}

/* Outcomes seen by random_op, to check that the sequences reach them. */
static long seen_full, seen_conflict, seen_derived;

/* One random fact (similar, dissimilar, triplet; conflicts are refused by
 * the closure and compared like any outcome) or a sample call. */
static op_out random_op(oml_closure *c, oml_rng *r)
{
    op_out o;
    memset(&o, 0, sizeof o);
    int max_out = (int)oml_rng_below(r, MAX_OUT + 1);
    o.kind = (int)oml_rng_below(r, 10);
    uint32_t a = pick(r), b = pick(r), n = pick(r);
    if (o.kind < 4) {
        o.rc = oml_closure_add_similar(c, a, b, o.t, max_out, &o.n);
    } else if (o.kind < 7) {
        o.rc = oml_closure_add_dissimilar(c, a, b, o.t, max_out, &o.n);
    } else if (o.kind < 8) {
        o.rc = oml_closure_add_triplet(c, (oml_triplet){a, b, n}, o.t, max_out, &o.n);
    } else {
        o.rc = oml_closure_sample(c, &o.t[0]);
        o.n = o.rc == OML_OK;
    }
    if (o.rc != OML_OK)
        o.n = 0;
    seen_full += o.rc == OML_EFULL;
    seen_conflict += o.rc == OML_ECONFLICT;
    seen_derived += o.kind < 8 ? o.n : 0;
    return o;
}

static void run_ops(oml_closure *c, oml_rng *r, int n)
{
    for (int k = 0; k < n; k++)
        (void)random_op(c, r);
}

static void assert_same_stats(const oml_closure *a, const oml_closure *b)
{
    oml_closure_stats sa, sb;
    oml_closure_get_stats(a, &sa);
    oml_closure_get_stats(b, &sb);
    assert_int_equal(sa.similar_pairs, sb.similar_pairs);
    assert_int_equal(sa.dissimilar_pairs, sb.dissimilar_pairs);
    assert_int_equal(sa.conflicts, sb.conflicts);
    assert_int_equal(sa.derived, sb.derived);
    assert_int_equal(sa.components, sb.components);
    assert_int_equal(sa.dis_edges, sb.dis_edges);
}

/* Every query answers the same (the closures are not changed). */
static void assert_same_queries(const oml_closure *a, const oml_closure *b)
{
    for (uint32_t x = 0; x < MAXN + 2; x++)
        for (uint32_t y = 0; y < MAXN + 2; y++) {
            assert_int_equal(oml_closure_is_similar(a, x, y), oml_closure_is_similar(b, x, y));
            assert_int_equal(oml_closure_is_dissimilar(a, x, y),
                             oml_closure_is_dissimilar(b, x, y));
        }
    assert_same_stats(a, b);
}

static void encode(const oml_closure *c, uint8_t **buf, size_t *len)
{
    assert_int_equal(oml_closure_encode(c, buf, len), OML_OK);
}

/* Decodes buf and checks that it re-encodes to exactly buf. */
static oml_closure *decode_canonical(const uint8_t *buf, size_t len)
{
    oml_closure *c = NULL;
    oml_diag d = {0};
    int rc = oml_closure_decode(&c, buf, len, &d);
    if (rc != OML_OK)
        print_error("decode: %d %s: %s\n", rc, d.field, d.msg);
    assert_int_equal(rc, OML_OK);
    uint8_t *again;
    size_t again_len;
    encode(c, &again, &again_len);
    assert_int_equal(again_len, len);
    assert_memory_equal(again, buf, len);
    free(again);
    return c;
}

static void assert_same_encoding(const oml_closure *a, const oml_closure *b)
{
    uint8_t *ba, *bb;
    size_t la, lb;
    encode(a, &ba, &la);
    encode(b, &bb, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ba, bb, la);
    free(ba);
    free(bb);
}

/* Runs n operations drawn from r on both closures (one copy of r each) and
 * asserts identical outcomes: rc, derived triplets, sample() outputs. */
static void run_both(oml_closure *a, oml_closure *b, oml_rng *r, int n)
{
    for (int k = 0; k < n; k++) {
        oml_rng rb = *r;
        op_out oa = random_op(a, r), ob = random_op(b, &rb);
        assert_int_equal(oa.kind, ob.kind);
        assert_int_equal(oa.rc, ob.rc);
        assert_int_equal(oa.n, ob.n);
        if (oa.n > 0)
            assert_memory_equal(oa.t, ob.t, (size_t)oa.n * sizeof oa.t[0]);
    }
}

static oml_closure *random_closure(uint64_t seed, int n)
{
    oml_closure *c;
    assert_int_equal(oml_closure_create(&c, MAXN, MAXE, seed * 31 + 7), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, seed);
    run_ops(c, &r, n);
    return c;
}

static void test_round_trip_random(void **state)
{
    (void)state;
    int sampled = 0;
    seen_full = seen_conflict = seen_derived = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        /* Checkpoint at seed-dependent points, from empty to past OML_EFULL. */
        oml_rng r;
        oml_rng_seed(&r, seed);
        oml_closure *a;
        assert_int_equal(oml_closure_create(&a, MAXN, MAXE, seed * 31 + 7), OML_OK);
        run_ops(a, &r, (int)(seed * 13 % 400));

        uint8_t *buf;
        size_t len;
        encode(a, &buf, &len);
        oml_closure *b = decode_canonical(buf, len);
        free(buf);
        assert_same_queries(a, b);

        /* The rest of the SAME sequence on both, with a second checkpoint
         * of the decoded copy half way (a restart after a restart). */
        run_both(a, b, &r, 150);
        assert_same_queries(a, b);
        assert_same_encoding(a, b);
        encode(b, &buf, &len);
        oml_closure *b2 = decode_canonical(buf, len);
        free(buf);
        oml_closure_destroy(b);
        run_both(a, b2, &r, 250);
        assert_same_queries(a, b2);
        assert_same_encoding(a, b2);

        /* Long runs of samples only. */
        for (int k = 0; k < 200; k++) {
            oml_triplet ta, tb;
            int ra = oml_closure_sample(a, &ta), rb = oml_closure_sample(b2, &tb);
            assert_int_equal(ra, rb);
            if (ra == OML_OK) {
                assert_memory_equal(&ta, &tb, sizeof ta);
                assert_true(oml_closure_is_similar(a, ta.a, ta.p));
                assert_true(oml_closure_is_dissimilar(a, ta.a, ta.n));
                sampled++;
            }
        }
        assert_same_stats(a, b2);
        oml_closure_destroy(a);
        oml_closure_destroy(b2);
    }
    /* The sequences did reach the interesting states. */
    print_message("full %ld, conflicts %ld, derived %ld, sampled %d\n", seen_full,
                  seen_conflict, seen_derived, sampled);
    assert_true(seen_full > 0 && seen_conflict > 0 && seen_derived > 0);
    assert_true(sampled > 1000);
}

/* Removals (deleted items) leave a closure that encodes canonically and
 * goes on exactly like the original after a decode. */
static void test_round_trip_after_removals(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        oml_rng r;
        oml_rng_seed(&r, seed + 1000);
        oml_closure *a;
        assert_int_equal(oml_closure_create(&a, MAXN, MAXE, seed), OML_OK);
        for (int round = 0; round < 6; round++) {
            run_ops(a, &r, 40);
            for (int k = 0; k < 8; k++)
                assert_true(oml_closure_remove(a, (uint32_t)oml_rng_below(&r, NODES)) >= 0);
        }
        uint8_t *buf;
        size_t len;
        encode(a, &buf, &len);
        oml_closure *b = decode_canonical(buf, len);
        free(buf);
        assert_same_queries(a, b);
        run_both(a, b, &r, 200);
        for (int k = 0; k < 10; k++) {
            uint32_t x = (uint32_t)oml_rng_below(&r, NODES);
            assert_int_equal(oml_closure_remove(a, x), oml_closure_remove(b, x));
        }
        run_both(a, b, &r, 200);
        assert_same_queries(a, b);
        assert_same_encoding(a, b);
        oml_closure_destroy(a);
        oml_closure_destroy(b);
    }
}

static void test_empty(void **state)
{
    (void)state;
    oml_closure *a;
    assert_int_equal(oml_closure_create(&a, 5, 0, 42), OML_OK);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    assert_int_equal(len, HEAD);
    oml_closure *b = decode_canonical(buf, len);
    assert_same_queries(a, b);
    oml_triplet t;
    assert_int_equal(oml_closure_sample(b, &t), OML_EEMPTY);
    assert_int_equal(oml_closure_add_similar(b, 1, 2, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(b, 1, 3, NULL, 0, NULL), OML_EFULL);
    assert_int_equal(oml_closure_add_similar(b, 1, 5, NULL, 0, NULL), OML_EINVAL);
    free(buf);
    oml_closure_destroy(a);
    oml_closure_destroy(b);

    /* Empty with room for edges: continue a sequence on both. */
    assert_int_equal(oml_closure_create(&a, MAXN, MAXE, 3), OML_OK);
    encode(a, &buf, &len);
    b = decode_canonical(buf, len);
    oml_rng r;
    oml_rng_seed(&r, 77);
    run_both(a, b, &r, 400);
    assert_same_queries(a, b);
    assert_same_encoding(a, b);
    free(buf);
    oml_closure_destroy(a);
    oml_closure_destroy(b);

    assert_int_equal(oml_closure_encode(NULL, &buf, &len), OML_EINVAL);
    assert_int_equal(oml_closure_decode(NULL, buf, 10, NULL), OML_EINVAL);
    assert_int_equal(oml_closure_decode(&b, NULL, 10, NULL), OML_EINVAL);
}

/* Every strict prefix (and a trailing byte) is refused with OML_EFORMAT. */
static void test_truncation(void **state)
{
    (void)state;
    oml_closure *a = random_closure(5, 150);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    for (size_t n = 0; n <= len + 1; n++) {
        if (n == len)
            continue;
        uint8_t *copy = calloc(1, n ? n : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, buf, n < len ? n : len);
        oml_closure *b = NULL;
        oml_diag d = {0};
        assert_int_equal(oml_closure_decode(&b, copy, n, &d), OML_EFORMAT);
        assert_null(b);
        assert_true(d.msg[0] != '\0');
        free(copy);
    }
    free(buf);
    oml_closure_destroy(a);
}

/* A damaged buffer is refused with a format error, or decodes canonically
 * to a closure that goes on working (queries, facts, samples). */
static int check_damaged(const uint8_t *buf, size_t len, void *arg, uint64_t seed)
{
    (void)arg;
    oml_closure *c = NULL;
    oml_diag d = {0};
    int rc = oml_closure_decode(&c, buf, len, &d);
    if (rc != OML_OK) {
        assert_true(rc == OML_EFORMAT || rc == OML_EVERSION);
        assert_null(c);
        assert_true(d.code == rc && d.msg[0] != '\0');
        return 0;
    }
    uint8_t *again;
    size_t again_len;
    encode(c, &again, &again_len);
    assert_int_equal(again_len, len);
    assert_memory_equal(again, buf, len);
    free(again);
    for (uint32_t x = 0; x < 24; x++)
        for (uint32_t y = 0; y < 24; y++)
            (void)(oml_closure_is_similar(c, x, y) + oml_closure_is_dissimilar(c, x, y));
    oml_rng r;
    oml_rng_seed(&r, seed);
    run_ops(c, &r, 40);
    oml_closure_destroy(c);
    return 1;
}

/* Small values make plausible node ids, so more damage gets deep. */
static uint8_t small_or_any(oml_rng *r, void *arg)
{
    (void)arg;
    return oml_rng_below(r, 2) ? (uint8_t)oml_rng_below(r, MAXN) : (uint8_t)oml_rng_next(r);
}

static void test_bit_flips(void **state)
{
    (void)state;
    oml_closure *a = random_closure(9, 120);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    /* Every bit flip, then 3000 rounds of random multi-byte damage. */
    int accepted = oml_test_damage(buf, len, 1234, 3000, small_or_any, check_damaged, NULL);
    /* Flips in the RNG state, the counters and some bounds are valid. */
    assert_true(accepted >= 8 * 64);
    free(buf);
    oml_closure_destroy(a);
}

static void expect_refused(const uint8_t *buf, size_t len, int want, const char *what)
{
    oml_closure *c = NULL;
    oml_diag d = {0};
    int rc = oml_closure_decode(&c, buf, len, &d);
    if (rc != want)
        print_error("%s: got %d (%s), want %d\n", what, rc, d.msg, want);
    else if (getenv("OML_TEST_VERBOSE") != NULL)
        print_message("%-32s -> %s\n", what, d.msg);
    assert_int_equal(rc, want);
    assert_null(c);
    assert_string_equal(d.field, "closure");
}

/* Crafted damage against each rule of the decoder. */
static void test_hostile(void **state)
{
    (void)state;
    /* 0~1~2~3 (root 0, members 0 1 2 3), 0 !~ 4; 8 nodes. Layout:
     * parent @104 (8 u32) | root 0 @136: 0 4 1 | members @148 | nbr @164 |
     * root 4 @168: 4 1 1 | nbr @180 | eligible @184 | end 188. */
    oml_closure *a;
    assert_int_equal(oml_closure_create(&a, 8, 4, 1), OML_OK);
    for (uint32_t i = 1; i < 4; i++)
        assert_int_equal(oml_closure_add_similar(a, 0, i, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(a, 0, 4, NULL, 0, NULL), OML_OK);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    assert_int_equal(len, 188);
    const size_t PAR = HEAD, MEM = 148, R4 = 168, NBR4 = 180, ELIG = 184;
    oml_closure *b = decode_canonical(buf, len);
    assert_same_queries(a, b);
    oml_closure_destroy(b);
    uint8_t *c = malloc(len);

#define CASE(what, want, edit)              \
    do {                                    \
        memcpy(c, buf, len);                \
        edit;                               \
        expect_refused(c, len, want, what); \
    } while (0)
    CASE("bad magic", OML_EFORMAT, c[3] = 'X');
    CASE("newer version", OML_EVERSION, oml_le32_store(c + 4, OML_CLOSURE_CODEC_VERSION + 1));
    CASE("max_nodes 0", OML_EFORMAT, oml_le32_store(c + 8, 0));
    CASE("nodes > max_nodes", OML_EFORMAT, oml_le32_store(c + 16, 9));
    CASE("edges > max_dis_edges", OML_EFORMAT, oml_le32_store(c + 12, 0));
    CASE("huge node count", OML_EFORMAT, {
        oml_le32_store(c + 8, UINT32_MAX);
        oml_le32_store(c + 16, UINT32_MAX - 1);
    });
    CASE("huge edge count", OML_EFORMAT, {
        oml_le32_store(c + 12, UINT32_MAX);
        oml_le32_store(c + 24, UINT32_MAX);
    });
    CASE("roots > nodes", OML_EFORMAT, oml_le32_store(c + 20, 9));
    CASE("eligible > nodes", OML_EFORMAT, oml_le32_store(c + 28, 9));
    CASE("wrong component count", OML_EFORMAT, oml_le32_store(c + 32, 0));
    CASE("reserved word", OML_EFORMAT, oml_le32_store(c + 36, 1));
    CASE("zero RNG state", OML_EFORMAT, memset(c + 40, 0, 32));
    CASE("parent out of range", OML_EFORMAT, oml_le32_store(c + (PAR + 5 * 4), 8));
    CASE("two-node parent cycle", OML_EFORMAT, {
        oml_le32_store(c + (PAR + 1 * 4), 2);
        oml_le32_store(c + (PAR + 2 * 4), 1);
    });
    CASE("three-node parent cycle", OML_EFORMAT, {
        oml_le32_store(c + (PAR + 1 * 4), 2);
        oml_le32_store(c + (PAR + 2 * 4), 3);
        oml_le32_store(c + (PAR + 3 * 4), 1);
    });
    CASE("parent in another component", OML_EFORMAT, oml_le32_store(c + (PAR + 3 * 4), 4));
    CASE("non-root in no member list", OML_EFORMAT, oml_le32_store(c + (PAR + 5 * 4), 0));
    CASE("root inside another's members", OML_EFORMAT, oml_le32_store(c + (PAR + 3 * 4), 3));
    CASE("listed root is not a root", OML_EFORMAT, oml_le32_store(c + PAR, 1));
    CASE("member twice", OML_EFORMAT, oml_le32_store(c + (MEM + 12), 2));
    CASE("member out of range", OML_EFORMAT, oml_le32_store(c + (MEM + 12), 8));
    CASE("root not among its members", OML_EFORMAT, oml_le32_store(c + MEM, 5));
    CASE("size too large", OML_EFORMAT, oml_le32_store(c + 140, 9));
    CASE("size smaller than component", OML_EFORMAT, oml_le32_store(c + 140, 3));
    CASE("lone root listed", OML_EFORMAT, oml_le32_store(c + (R4 + 8), 0));
    CASE("roots out of order", OML_EFORMAT, oml_le32_store(c + R4, 0));
    CASE("self loop", OML_EFORMAT, oml_le32_store(c + NBR4, 4));
    CASE("edge to a non-root", OML_EFORMAT, oml_le32_store(c + NBR4, 1));
    CASE("asymmetric edge", OML_EFORMAT, oml_le32_store(c + NBR4, 5));
    CASE("asymmetric edge (counted)", OML_EFORMAT, {
        oml_le32_store(c + NBR4, 5);
        oml_le32_store(c + 24, 2);
    });
    /* Root 4 with degree 2 and neighbours 0 0 (the second one overwrites
     * the eligible list, which is then missing: the duplicate is found first). */
    CASE("edge listed twice", OML_EFORMAT, {
        oml_le32_store(c + 24, 2);
        oml_le32_store(c + (R4 + 8), 2);
        memcpy(c + NBR4 + 4, c + NBR4, 4);
    });
    CASE("eligible entry gives nothing", OML_EFORMAT, oml_le32_store(c + ELIG, 4));
    CASE("eligible list too short", OML_EFORMAT, oml_le32_store(c + 28, 0));
#undef CASE
    free(c);
    free(buf);
    oml_closure_destroy(a);
}

/* Union-find depth: a parent chain (not what union by size builds, but a
 * valid forest) is accepted up to depth 32 and answers correctly; deeper
 * chains are refused so that find() stays short on hostile input. */
static void test_parent_chains(void **state)
{
    (void)state;
    oml_closure *a;
    assert_int_equal(oml_closure_create(&a, 64, 8, 5), OML_OK);
    for (uint32_t i = 1; i < 40; i++)
        assert_int_equal(oml_closure_add_similar(a, 0, i, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(a, 0, 50, NULL, 0, NULL), OML_OK);
    uint8_t *buf;
    size_t len;
    encode(a, &buf, &len);
    for (uint32_t depth = 30; depth < 40; depth++) {
        uint8_t *c = malloc(len);
        memcpy(c, buf, len);
        for (uint32_t i = 1; i <= depth; i++)
            oml_le32_store(c + (HEAD + 4 * i), i - 1);
        if (depth <= 32) {
            oml_closure *b = decode_canonical(c, len);
            /* Same answers and the same sampled triplets: the parent shape
             * does not matter, the member order does. */
            assert_same_queries(a, b);
            oml_closure *a2 = decode_canonical(buf, len);
            oml_rng r;
            oml_rng_seed(&r, depth);
            run_both(a2, b, &r, 200);
            assert_same_queries(a2, b);
            oml_closure_destroy(a2);
            oml_closure_destroy(b);
        } else {
            expect_refused(c, len, OML_EFORMAT, "deep chain");
        }
        free(c);
    }
    free(buf);
    oml_closure_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_round_trip_after_removals),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_parent_chains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
