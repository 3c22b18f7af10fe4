/* test_shard_merge.c - proto/shard_merge.c by hand (Eq. 27 over shards'
 * candidate lists, the Eq. 23-25 vote over them) and src/shard.h's hash,
 * whose values a shard map depends on. test_shards checks both merges
 * against a real single node. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shard.h"
#include "shard_merge.h"

static void test_hash_is_fnv1a_64(void **state)
{
    (void)state;
    /* FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c, of "foobar" 0x85944171f73967e8. */
    assert_int_equal(oml_shard_of("a", 1, 1000003), 0xaf63dc4c8601ec8cull % 1000003);
    assert_int_equal(oml_shard_of("foobar", 6, 97), 0x85944171f73967e8ull % 97);
    assert_int_equal(oml_shard_of("foobar", 6, 1), 0);
    assert_int_equal(oml_shard_of("anything", 8, 0), 0);
}

/* One shard's answer, one head, alpha 1: candidates (id, slot, dist, sim). */
typedef struct part {
    Omld__ShardRetrieveResponse r;
    Omld__ShardCandidate c[4], *cp[4];
    Omld__ShardHead h, *hp[1];
    uint32_t idx[4];
    float dist[4], alpha[1];
} part;

static void make_part(part *p, int n, const char *const *ids, const uint32_t *slots,
                      const float *dist, const float *sim, float alpha)
{
    memset(p, 0, sizeof *p);
    omld__shard_retrieve_response__init(&p->r);
    omld__shard_head__init(&p->h);
    for (int i = 0; i < n; i++) {
        omld__shard_candidate__init(&p->c[i]);
        p->c[i].id = (char *)ids[i];
        p->c[i].order = slots[i];
        p->c[i].similarity = sim[i];
        p->cp[i] = &p->c[i];
        p->idx[i] = (uint32_t)i;
        p->dist[i] = dist[i];
    }
    p->alpha[0] = alpha;
    p->r.n_alpha = 1;
    p->r.alpha = p->alpha;
    p->r.n_candidates = (size_t)n;
    p->r.candidates = p->cp;
    p->h.n_candidate = p->h.n_dist = (size_t)n;
    p->h.candidate = p->idx;
    p->h.dist = p->dist;
    p->hp[0] = &p->h;
    p->r.n_heads = 1;
    p->r.heads = p->hp;
}

static void two_parts(part *a, part *b, float alpha_b)
{
    const char *ia[] = {"A", "C"}, *ib[] = {"B", "D"};
    const uint32_t sa[] = {0, 2}, sb[] = {1, 3};
    const float da[] = {0.1f, 0.3f}, db[] = {0.2f, 0.4f};
    const float ma[] = {0.9f, 0.7f}, mb[] = {0.8f, 0.6f};
    make_part(a, 2, ia, sa, da, ma, 1.0f);
    make_part(b, 2, ib, sb, db, mb, alpha_b);
}

static void test_merge_ranks_as_one_node(void **state)
{
    (void)state;
    part a, b;
    two_parts(&a, &b, 1.0f);
    Omld__ShardRetrieveResponse *parts[] = {&a.r, &b.r};
    oml_merged_hit h[4];
    size_t n = 0;
    char err[256];
    /* k 3: the head's 3 nearest are A .1, B .2, C .3; Eq. 23 against .1 and .3 */
    assert_int_equal(oml_shard_merge(parts, 2, 3, 0, 0, 0, h, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(h[0].id, "A");
    assert_string_equal(h[1].id, "B");
    assert_string_equal(h[2].id, "C");
    double d = (double)0.3f - (double)0.1f;
    assert_true(h[0].score == 1.0f);
    assert_true(h[1].score == (float)exp(-((double)0.2f - (double)0.1f) / d));
    assert_true(h[2].score == (float)exp(-((double)0.3f - (double)0.1f) / d));
    assert_true(h[1].similarity == 0.8f);
    /* offset 1, k 2: the page of the ranking of 3 */
    assert_int_equal(oml_shard_merge(parts, 2, 2, 1, 0, 0, h, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(h[0].id, "B");
    assert_string_equal(h[1].id, "C");
    /* a similarity floor drops hits, fewer than k come back */
    assert_int_equal(oml_shard_merge(parts, 2, 3, 0, 1, 0.75f, h, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(h[1].id, "B");
    /* k 1: nearest = farthest, every score is alpha (the limit) */
    assert_int_equal(oml_shard_merge(parts, 2, 1, 0, 0, 0, h, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(h[0].id, "A");
    assert_true(h[0].score == 1.0f);
}

static void test_ties_rank_by_slot(void **state)
{
    (void)state;
    const char *ia[] = {"late"}, *ib[] = {"early"};
    const uint32_t sa[] = {9}, sb[] = {4};
    const float d[] = {0.5f}, m[] = {0.1f};
    part a, b;
    make_part(&a, 1, ia, sa, d, m, 1.0f);
    make_part(&b, 1, ib, sb, d, m, 1.0f);
    Omld__ShardRetrieveResponse *parts[] = {&a.r, &b.r};
    oml_merged_hit h[2];
    size_t n = 0;
    char err[256];
    assert_int_equal(oml_shard_merge(parts, 2, 2, 0, 0, 0, h, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_string_equal(h[0].id, "early");
    assert_string_equal(h[1].id, "late");
}

static void test_refusals_are_named(void **state)
{
    (void)state;
    part a, b;
    two_parts(&a, &b, 0.5f); /* another model's weights */
    Omld__ShardRetrieveResponse *parts[] = {&a.r, &b.r};
    oml_merged_hit h[4];
    size_t n = 9;
    char err[256];
    assert_int_equal(oml_shard_merge(parts, 2, 3, 0, 0, 0, h, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "different models"));
    assert_int_equal(n, 0);
    two_parts(&a, &b, 1.0f);
    b.idx[1] = 7; /* names a candidate it does not hold */
    assert_int_equal(oml_shard_merge(parts, 2, 3, 0, 0, 0, h, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not hold"));
    assert_int_equal(oml_shard_merge(parts, 0, 3, 0, 0, 0, h, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "no shard"));
}

/* Labels for the candidates of a part: name and store id (NULL: none). */
static void label(part *p, int i, const char *name, uint32_t id)
{
    p->c[i].label_opt_case = OMLD__SHARD_CANDIDATE__LABEL_OPT_LABEL;
    p->c[i].label = (char *)name;
    p->c[i].label_id = id;
}

static void test_vote_as_one_node(void **state)
{
    (void)state;
    part a, b;
    two_parts(&a, &b, 1.0f); /* A .1 (slot 0), B .2, C .3, D .4 */
    label(&a, 0, "x", 7);
    label(&b, 0, "y", 2);
    label(&a, 1, "y", 2); /* D unlabelled: votes for nothing */
    Omld__ShardRetrieveResponse *parts[] = {&a.r, &b.r};
    oml_merged_class m;
    char err[256];
    /* k 3: A, B, C vote; x gets S(A) = 1, y S(B) + S(C) = e^-0.5 + e^-1 */
    assert_int_equal(oml_shard_classify(parts, 2, 3, &m, err, sizeof err), 0);
    double d = (double)0.3f - (double)0.1f;
    double y = exp(-((double)0.2f - (double)0.1f) / d) + exp(-((double)0.3f - (double)0.1f) / d);
    assert_string_equal(m.label, "x");
    assert_int_equal(m.n_scores, 2);
    assert_true(m.scores[0].score == 1.0f);
    assert_string_equal(m.scores[1].label, "y");
    assert_true(m.scores[1].score == (float)y);
    /* k 4: D (unlabelled) joins, the range is .1-.4: y's votes grow past x */
    assert_int_equal(oml_shard_classify(parts, 2, 4, &m, err, sizeof err), 0);
    assert_string_equal(m.label, "y");
    assert_int_equal(m.n_scores, 2);
    /* k 1: only A */
    assert_int_equal(oml_shard_classify(parts, 2, 1, &m, err, sizeof err), 0);
    assert_string_equal(m.label, "x");
    assert_int_equal(m.n_scores, 1);
    /* A tie goes to the smaller store label id, whatever the names: two
     * neighbours at one distance (k 2 over A and a copy of it) */
    const char *ic[] = {"A2"};
    const uint32_t sc[] = {5};
    const float dc[] = {0.1f}, mc[] = {0.9f};
    part c;
    make_part(&c, 1, ic, sc, dc, mc, 1.0f);
    label(&c, 0, "a-name", 9);
    Omld__ShardRetrieveResponse *tie[] = {&a.r, &c.r};
    assert_int_equal(oml_shard_classify(tie, 2, 2, &m, err, sizeof err), 0);
    assert_string_equal(m.label, "x"); /* id 7 < 9 */
    /* no labelled neighbour: an empty answer */
    part u;
    const char *iu[] = {"U"};
    make_part(&u, 1, iu, sc, dc, mc, 1.0f);
    Omld__ShardRetrieveResponse *none[] = {&u.r};
    assert_int_equal(oml_shard_classify(none, 1, 3, &m, err, sizeof err), 0);
    assert_null(m.label);
    assert_int_equal(m.n_scores, 0);
    /* refusals, named: other models, a candidate not held, no shard */
    two_parts(&a, &b, 0.5f);
    assert_int_equal(oml_shard_classify(parts, 2, 3, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "different models"));
    two_parts(&a, &b, 1.0f);
    a.idx[0] = 9;
    assert_int_equal(oml_shard_classify(parts, 2, 3, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not hold"));
    assert_int_equal(oml_shard_classify(parts, 0, 3, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "no shard"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_is_fnv1a_64),
        cmocka_unit_test(test_merge_ranks_as_one_node),
        cmocka_unit_test(test_ties_rank_by_slot),
        cmocka_unit_test(test_refusals_are_named),
        cmocka_unit_test(test_vote_as_one_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
