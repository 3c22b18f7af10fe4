/* test_closure.c - the incremental closure against a brute-force closure.
 *
 * The brute force recomputes from the list of accepted facts: sim is the
 * reflexive-symmetric-transitive closure of the similar pairs, and
 * dis(x, z) holds iff some dissimilar fact (u, v) has u~x and v~z (or the
 * other way round), which is the fixpoint of OAHU Sec. 3.1 footnote 1. A fact
 * set is contradictory iff some pair is both sim and dis. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "closure.h"
#include "rng.h"

#define N 12        /* nodes used by the random facts */
#define MAXN 16     /* max_nodes; nodes N..MAXN-1 stay untouched */
#define MAXF 128    /* facts per sequence */

typedef struct brute {
    int n_sim, n_dis;
    uint32_t sim_e[MAXF][2], dis_e[MAXF][2];
    unsigned char sim[MAXN][MAXN], dis[MAXN][MAXN];
} brute;

static void brute_compute(brute *b)
{
    memset(b->sim, 0, sizeof b->sim);
    memset(b->dis, 0, sizeof b->dis);
    for (int i = 0; i < MAXN; i++)
        b->sim[i][i] = 1;
    for (int e = 0; e < b->n_sim; e++) {
        b->sim[b->sim_e[e][0]][b->sim_e[e][1]] = 1;
        b->sim[b->sim_e[e][1]][b->sim_e[e][0]] = 1;
    }
    for (int k = 0; k < MAXN; k++)
        for (int i = 0; i < MAXN; i++)
            for (int j = 0; j < MAXN; j++)
                if (b->sim[i][k] && b->sim[k][j])
                    b->sim[i][j] = 1;
    for (int e = 0; e < b->n_dis; e++) {
        uint32_t u = b->dis_e[e][0], v = b->dis_e[e][1];
        for (int x = 0; x < MAXN; x++)
            for (int z = 0; z < MAXN; z++)
                if ((b->sim[u][x] && b->sim[v][z]) || (b->sim[v][x] && b->sim[u][z]))
                    b->dis[x][z] = 1;
    }
}

static int brute_contradicts(const brute *b)
{
    for (int x = 0; x < MAXN; x++)
        for (int z = 0; z < MAXN; z++)
            if (b->sim[x][z] && b->dis[x][z])
                return 1;
    return 0;
}

static int brute_valid(const brute *b, oml_triplet t)
{
    return t.a < MAXN && t.p < MAXN && t.n < MAXN && t.a != t.p &&
           b->sim[t.a][t.p] && b->dis[t.a][t.n];
}

static int brute_has_triplet(const brute *b)
{
    for (int a = 0; a < MAXN; a++)
        for (int p = 0; p < MAXN; p++)
            for (int n = 0; n < MAXN; n++)
                if (brute_valid(b, (oml_triplet){(uint32_t)a, (uint32_t)p, (uint32_t)n}))
                    return 1;
    return 0;
}

/* Components with >= 2 members and distinct dissimilar component pairs. */
static void brute_stats(const brute *b, uint32_t *comps, uint32_t *edges)
{
    int rep[MAXN];
    *comps = 0;
    *edges = 0;
    for (int i = 0; i < MAXN; i++) {
        rep[i] = i;
        for (int j = 0; j < i; j++)
            if (b->sim[i][j]) {
                rep[i] = rep[j];
                break;
            }
    }
    for (int i = 0; i < MAXN; i++) {
        if (rep[i] != i)
            continue;
        int size = 0;
        for (int j = 0; j < MAXN; j++)
            size += rep[j] == i;
        *comps += size >= 2;
        for (int j = i + 1; j < MAXN; j++)
            if (rep[j] == j && b->dis[i][j])
                (*edges)++;
    }
}

static void assert_matches(const oml_closure *c, const brute *b)
{
    for (uint32_t x = 0; x < MAXN; x++)
        for (uint32_t z = 0; z < MAXN; z++) {
            if (x == z)
                continue;
            assert_int_equal(oml_closure_is_similar(c, x, z), b->sim[x][z]);
            assert_int_equal(oml_closure_is_dissimilar(c, x, z), b->dis[x][z]);
        }
    oml_closure_stats st;
    uint32_t comps, edges;
    oml_closure_get_stats(c, &st);
    brute_stats(b, &comps, &edges);
    assert_int_equal(st.components, comps);
    assert_int_equal(st.dis_edges, edges);
}

enum { FACT_SIM, FACT_DIS, FACT_TRIPLET };

static uint32_t rand_node(oml_rng *r, uint32_t avoid1, uint32_t avoid2)
{
    uint32_t x;
    do
        x = (uint32_t)oml_rng_below(r, N);
    while (x == avoid1 || x == avoid2);
    return x;
}

/* One random sequence of facts, checked after every fact. */
static void run_sequence(uint64_t seed, int n_facts)
{
    oml_rng r;
    oml_rng_seed(&r, seed);
    oml_closure *c;
    assert_int_equal(oml_closure_create(&c, MAXN, 1000, seed * 7 + 1), OML_OK);
    brute *b = calloc(1, sizeof *b), *nb = calloc(1, sizeof *nb);
    brute_compute(b);
    uint64_t accepted_sim = 0, accepted_dis = 0, conflicts = 0;
    for (int f = 0; f < n_facts; f++) {
        int kind = (int)oml_rng_below(&r, 3);
        uint32_t x = rand_node(&r, MAXN, MAXN), y = rand_node(&r, x, MAXN);
        uint32_t z = rand_node(&r, x, y);
        int max_out = (int)oml_rng_below(&r, 5);
        oml_triplet out[4];
        int n_out = -1, rc;

        *nb = *b;
        if (kind == FACT_SIM || kind == FACT_TRIPLET) {
            nb->sim_e[nb->n_sim][0] = x;
            nb->sim_e[nb->n_sim++][1] = y;
        }
        if (kind == FACT_DIS) {
            nb->dis_e[nb->n_dis][0] = x;
            nb->dis_e[nb->n_dis++][1] = y;
        }
        if (kind == FACT_TRIPLET) {
            nb->dis_e[nb->n_dis][0] = x;
            nb->dis_e[nb->n_dis++][1] = z;
        }
        brute_compute(nb);
        int bad = brute_contradicts(nb);

        if (kind == FACT_SIM)
            rc = oml_closure_add_similar(c, x, y, out, max_out, &n_out);
        else if (kind == FACT_DIS)
            rc = oml_closure_add_dissimilar(c, x, y, out, max_out, &n_out);
        else
            rc = oml_closure_add_triplet(c, (oml_triplet){x, y, z}, out, max_out, &n_out);

        if (bad) {
            assert_int_equal(rc, OML_ECONFLICT);
            assert_int_equal(n_out, -1); /* out-parameters untouched */
            conflicts++;
            assert_matches(c, b);
        } else {
            assert_int_equal(rc, OML_OK);
            assert_in_range(n_out, 0, max_out);
            for (int i = 0; i < n_out; i++) {
                assert_true(brute_valid(nb, out[i]));  /* implied now */
                assert_false(brute_valid(b, out[i]));  /* and new */
                for (int j = 0; j < i; j++)
                    assert_false(out[i].a == out[j].a && out[i].p == out[j].p &&
                                 out[i].n == out[j].n);
            }
            /* A fact that was already implied derives nothing. */
            int implied = 1;
            if ((kind == FACT_SIM || kind == FACT_TRIPLET) && !b->sim[x][y])
                implied = 0;
            if (kind == FACT_DIS && !b->dis[x][y])
                implied = 0;
            if (kind == FACT_TRIPLET && !b->dis[x][z])
                implied = 0;
            if (implied)
                assert_int_equal(n_out, 0);
            /* Something new with something to derive gives at least one
             * triplet when asked (the first sampling try always succeeds). */
            if (!implied && max_out > 0 && brute_has_triplet(nb)) {
                int any_new = 0;
                for (uint32_t a = 0; a < MAXN && !any_new; a++)
                    for (uint32_t p = 0; p < MAXN && !any_new; p++)
                        for (uint32_t n = 0; n < MAXN && !any_new; n++) {
                            oml_triplet t = {a, p, n};
                            any_new = brute_valid(nb, t) && !brute_valid(b, t);
                        }
                if (any_new)
                    assert_true(n_out >= 1);
            }
            accepted_sim += kind != FACT_DIS;
            accepted_dis += kind != FACT_SIM;
            *b = *nb;
            assert_matches(c, b);
        }

        /* Sampling agrees with the brute force. */
        int has = brute_has_triplet(b);
        for (int k = 0; k < 3; k++) {
            oml_triplet t = {99, 99, 99};
            rc = oml_closure_sample(c, &t);
            if (has) {
                assert_int_equal(rc, OML_OK);
                assert_true(brute_valid(b, t));
            } else {
                assert_int_equal(rc, OML_EEMPTY);
                assert_int_equal(t.a, 99);
            }
        }
    }
    oml_closure_stats st;
    oml_closure_get_stats(c, &st);
    assert_int_equal(st.similar_pairs, accepted_sim);
    assert_int_equal(st.dissimilar_pairs, accepted_dis);
    assert_int_equal(st.conflicts, conflicts);
    oml_closure_destroy(c);
    free(b);
    free(nb);
}

static void test_brute_force_random(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 400; seed++)
        run_sequence(seed, 10 + (int)(seed % 50));
}

/* The brute force after oml_closure_remove(x): the relations restricted to
 * the other nodes (x knows nothing). Restricted, sim is still an
 * equivalence and dis still closed under it, so writing every remaining
 * related pair down as a fact and recomputing gives exactly that. */
static void brute_remove(brute *b, uint32_t x)
{
    brute_compute(b);
    brute nb;
    memset(&nb, 0, sizeof nb);
    for (uint32_t i = 0; i < MAXN; i++)
        for (uint32_t j = i + 1; j < MAXN; j++) {
            if (i == x || j == x)
                continue;
            if (b->sim[i][j]) {
                nb.sim_e[nb.n_sim][0] = i;
                nb.sim_e[nb.n_sim++][1] = j;
            }
            if (b->dis[i][j]) {
                nb.dis_e[nb.n_dis][0] = i;
                nb.dis_e[nb.n_dis++][1] = j;
            }
        }
    *b = nb;
    brute_compute(b);
}

/* Facts mixed with removals (an item deleted, its slot to be reused): after
 * every step the closure answers as the brute force, samples never name a
 * removed node until a new fact does, and a removed node can take new facts
 * that have nothing to do with its old ones. */
static void test_remove_brute_force(void **state)
{
    (void)state;
    long removed_members = 0, dissolved = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        oml_rng r;
        oml_rng_seed(&r, seed * 977);
        oml_closure *c;
        assert_int_equal(oml_closure_create(&c, MAXN, 1000, seed), OML_OK);
        brute *b = calloc(1, sizeof *b), *nb = calloc(1, sizeof *nb);
        brute_compute(b);
        int steps = 20 + (int)(seed % 40);
        for (int f = 0; f < steps; f++) {
            int kind = (int)oml_rng_below(&r, 4);
            uint32_t x = rand_node(&r, MAXN, MAXN), y = rand_node(&r, x, MAXN);
            if (kind == 3) {
                oml_closure_stats before;
                oml_closure_get_stats(c, &before);
                int was_member = 0;
                for (uint32_t z = 0; z < MAXN; z++)
                    was_member |= z != x && oml_closure_is_similar(c, x, z);
                int knew = 0; /* x was in some fact: similar or dissimilar to someone */
                brute_compute(b);
                for (uint32_t z = 0; z < MAXN; z++)
                    knew |= z != x && (b->sim[x][z] || b->dis[x][z]);
                assert_int_equal(oml_closure_remove(c, x), knew);
                assert_int_equal(oml_closure_remove(c, x), 0); /* twice: nothing left */
                brute_remove(b, x);
                oml_closure_stats after;
                oml_closure_get_stats(c, &after);
                removed_members += was_member;
                dissolved += after.components < before.components;
                assert_matches(c, b);
                /* Counters of accepted facts are history: they stay. */
                assert_int_equal(after.similar_pairs, before.similar_pairs);
                assert_int_equal(after.dissimilar_pairs, before.dissimilar_pairs);
            } else {
                *nb = *b;
                if (kind == FACT_SIM) {
                    nb->sim_e[nb->n_sim][0] = x;
                    nb->sim_e[nb->n_sim++][1] = y;
                } else {
                    nb->dis_e[nb->n_dis][0] = x;
                    nb->dis_e[nb->n_dis++][1] = y;
                }
                if (nb->n_sim >= MAXF - 1 || nb->n_dis >= MAXF - 1)
                    break;
                brute_compute(nb);
                oml_triplet out[4];
                int n_out = 0;
                int rc = kind == FACT_SIM ? oml_closure_add_similar(c, x, y, out, 4, &n_out)
                                          : oml_closure_add_dissimilar(c, x, y, out, 4, &n_out);
                if (brute_contradicts(nb)) {
                    assert_int_equal(rc, OML_ECONFLICT);
                } else {
                    assert_int_equal(rc, OML_OK);
                    for (int i = 0; i < n_out; i++)
                        assert_true(brute_valid(nb, out[i]));
                    *b = *nb;
                }
                assert_matches(c, b);
            }
            int has = brute_has_triplet(b);
            for (int k = 0; k < 3; k++) {
                oml_triplet t;
                int rc = oml_closure_sample(c, &t);
                assert_int_equal(rc, has ? OML_OK : OML_EEMPTY);
                if (rc == OML_OK)
                    assert_true(brute_valid(b, t)); /* never a removed node */
            }
        }
        oml_closure_destroy(c);
        free(b);
        free(nb);
    }
    print_message("removed %ld members of components, dissolved %ld components\n", removed_members,
                  dissolved);
    assert_true(removed_members > 100 && dissolved > 20);
}

/* Removing the root of a component with edges hands everything to the
 * next member; removing never-touched or out-of-range nodes. */
static void test_remove_cases(void **state)
{
    (void)state;
    oml_closure *c;
    assert_int_equal(oml_closure_create(&c, 10, 100, 1), OML_OK);
    assert_int_equal(oml_closure_remove(c, 3), 0); /* untouched */
    assert_int_equal(oml_closure_remove(c, 10), OML_EINVAL);
    /* {0,1,2} !~ {5,6}, 7 !~ 0 */
    assert_int_equal(oml_closure_add_similar(c, 0, 1, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_similar(c, 1, 2, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_similar(c, 5, 6, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(c, 2, 6, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(c, 7, 0, NULL, 0, NULL), OML_OK);
    for (uint32_t x = 0; x < 3; x++) {
        /* Whichever node is the root now, remove it: the others keep all. */
        assert_int_equal(oml_closure_remove(c, x), 1);
        assert_false(oml_closure_is_similar(c, x, (x + 1) % 3));
        assert_false(oml_closure_is_dissimilar(c, x, 6));
        assert_false(oml_closure_is_dissimilar(c, x, 7));
        for (uint32_t y = x + 1; y < 3; y++) {
            assert_true(oml_closure_is_dissimilar(c, y, 5));
            assert_true(oml_closure_is_dissimilar(c, y, 7));
        }
        /* The slot can carry a new item: a fact contradicting the old ones
         * is fine now. */
        assert_int_equal(oml_closure_add_similar(c, x, 6, NULL, 0, NULL), OML_OK);
        assert_int_equal(oml_closure_remove(c, x), 1);
    }
    oml_closure_stats st;
    oml_closure_get_stats(c, &st);
    assert_int_equal(st.components, 1); /* {5,6} */
    assert_int_equal(st.dis_edges, 0);  /* 2, alone at last, held the edges to {5,6} and 7 */
    oml_triplet t;
    assert_int_equal(oml_closure_sample(c, &t), OML_EEMPTY);
    oml_closure_destroy(c);
}

static void test_invalid_args(void **state)
{
    (void)state;
    oml_closure *c = NULL;
    assert_int_equal(oml_closure_create(&c, 0, 10, 1), OML_EINVAL);
    assert_int_equal(oml_closure_create(&c, 10, 10, 1), OML_OK);
    oml_triplet out[2];
    int n_out = -1;
    assert_int_equal(oml_closure_add_similar(c, 3, 3, out, 2, &n_out), OML_EINVAL);
    assert_int_equal(oml_closure_add_similar(c, 3, 10, out, 2, &n_out), OML_EINVAL);
    assert_int_equal(oml_closure_add_dissimilar(c, 10, 3, out, 2, &n_out), OML_EINVAL);
    assert_int_equal(oml_closure_add_dissimilar(c, UINT32_MAX, 3, out, 2, &n_out), OML_EINVAL);
    assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){1, 2, 10}, out, 2, &n_out),
                     OML_EINVAL);
    assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){1, 1, 2}, out, 2, &n_out),
                     OML_EINVAL);
    assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){1, 2, 2}, out, 2, &n_out),
                     OML_EINVAL);
    assert_int_equal(oml_closure_add_similar(c, 1, 2, NULL, 2, &n_out), OML_EINVAL);
    assert_int_equal(n_out, -1);
    assert_false(oml_closure_is_similar(c, 1, 10));
    assert_false(oml_closure_is_dissimilar(c, 1, 10));
    assert_true(oml_closure_is_similar(c, 9, 9));
    /* max_out 0 allows NULL out and n_out. */
    assert_int_equal(oml_closure_add_similar(c, 0, 9, NULL, 0, NULL), OML_OK);
    assert_true(oml_closure_is_similar(c, 9, 0));
    oml_triplet t;
    assert_int_equal(oml_closure_sample(c, &t), OML_EEMPTY);
    oml_closure_destroy(c);
    oml_closure_destroy(NULL);
}

static void test_full(void **state)
{
    (void)state;
    oml_closure *c;
    assert_int_equal(oml_closure_create(&c, 100, 2, 5), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(c, 0, 1, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(c, 2, 3, NULL, 0, NULL), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(c, 4, 5, NULL, 0, NULL), OML_EFULL);
    assert_false(oml_closure_is_dissimilar(c, 4, 5));
    /* Already implied: fine at the bound. */
    assert_int_equal(oml_closure_add_dissimilar(c, 1, 0, NULL, 0, NULL), OML_OK);
    /* Needs a new edge: refused as a whole, the similar part is not applied. */
    assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){4, 5, 6}, NULL, 0, NULL), OML_EFULL);
    assert_false(oml_closure_is_similar(c, 4, 5));
    /* 1~3 merges two components without adding an edge; 0 is already dis. */
    assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){1, 3, 0}, NULL, 0, NULL), OML_OK);
    assert_true(oml_closure_is_dissimilar(c, 3, 0));
    assert_true(oml_closure_is_dissimilar(c, 1, 2));
    /* 0~2: both are dissimilar to {1,3}, the two edges fold into one, which
     * leaves room for the new edge {0,2} - 5 in the same triplet. */
    assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){0, 2, 5}, NULL, 0, NULL), OML_OK);
    oml_closure_stats st;
    oml_closure_get_stats(c, &st);
    assert_int_equal(st.dis_edges, 2);
    assert_int_equal(st.components, 2);
    assert_true(oml_closure_is_dissimilar(c, 2, 5));
    assert_int_equal(oml_closure_add_dissimilar(c, 7, 8, NULL, 0, NULL), OML_EFULL);
    /* Merging {7} into {0,2} folds nothing; now {1,3} and 5 are dissimilar
     * to a bigger component but the edge count is unchanged. */
    assert_int_equal(oml_closure_add_similar(c, 7, 0, NULL, 0, NULL), OML_OK);
    assert_true(oml_closure_is_dissimilar(c, 7, 5));
    assert_true(oml_closure_is_dissimilar(c, 3, 7));
    oml_closure_destroy(c);

    /* max_dis_edges 0: nothing dissimilar fits. */
    assert_int_equal(oml_closure_create(&c, 10, 0, 5), OML_OK);
    assert_int_equal(oml_closure_add_dissimilar(c, 0, 1, NULL, 0, NULL), OML_EFULL);
    assert_int_equal(oml_closure_add_similar(c, 0, 1, NULL, 0, NULL), OML_OK);
    oml_closure_destroy(c);
}

/* Feeds a fixed fact stream and records every output. */
static void record(oml_closure *c, uint64_t seed, int dup, oml_triplet *log, int *n_log)
{
    oml_rng r;
    oml_rng_seed(&r, seed);
    *n_log = 0;
    for (int f = 0; f < 200; f++) {
        uint32_t lab[64];
        for (uint32_t i = 0; i < 64; i++)
            lab[i] = i % 5;
        uint32_t a = (uint32_t)oml_rng_below(&r, 64), p, n;
        do
            p = (uint32_t)oml_rng_below(&r, 64);
        while (p == a || lab[p] != lab[a]);
        do
            n = (uint32_t)oml_rng_below(&r, 64);
        while (lab[n] == lab[a]);
        oml_triplet out[3];
        int got;
        assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){a, p, n}, out, 3, &got), OML_OK);
        for (int i = 0; i < got; i++)
            log[(*n_log)++] = out[i];
        if (dup) {
            /* Implied facts: succeed, derive nothing, draw no randomness. */
            assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){p, a, n}, out, 3, &got),
                             OML_OK);
            assert_int_equal(got, 0);
            assert_int_equal(oml_closure_add_similar(c, a, p, out, 3, &got), OML_OK);
            assert_int_equal(got, 0);
            assert_int_equal(oml_closure_add_dissimilar(c, n, p, out, 3, &got), OML_OK);
            assert_int_equal(got, 0);
        }
        assert_int_equal(oml_closure_sample(c, &log[(*n_log)++]), OML_OK);
    }
}

static void test_reproducible(void **state)
{
    (void)state;
    static oml_triplet l1[1000], l2[1000], l3[1000];
    int n1, n2, n3;
    oml_closure *c1, *c2, *c3;
    assert_int_equal(oml_closure_create(&c1, 64, 10000, 77), OML_OK);
    assert_int_equal(oml_closure_create(&c2, 64, 10000, 77), OML_OK);
    assert_int_equal(oml_closure_create(&c3, 64, 10000, 78), OML_OK);
    record(c1, 3, 0, l1, &n1);
    record(c2, 3, 1, l2, &n2);
    record(c3, 3, 0, l3, &n3);
    assert_int_equal(n1, n2);
    assert_memory_equal(l1, l2, (size_t)n1 * sizeof *l1);
    assert_true(n1 != n3 || memcmp(l1, l3, (size_t)n1 * sizeof *l1) != 0);
    for (uint32_t x = 0; x < 64; x++)
        for (uint32_t y = 0; y < 64; y++) {
            if (x == y)
                continue;
            /* Labelled facts: similar only within a class, never contradicting. */
            if (oml_closure_is_similar(c1, x, y))
                assert_int_equal(x % 5, y % 5);
            if (oml_closure_is_dissimilar(c1, x, y))
                assert_int_not_equal(x % 5, y % 5);
        }
    oml_closure_destroy(c1);
    oml_closure_destroy(c2);
    oml_closure_destroy(c3);
}

/* A big labelled stream like the evaluation protocol: exercises growth,
 * large components and many edge rewrites; checks against the labels. */
static void test_large_labelled(void **state)
{
    (void)state;
    enum { NODES = 50000, CLASSES = 10, FACTS = 60000 };
    oml_closure *c;
    assert_int_equal(oml_closure_create(&c, NODES, 8 * FACTS, 9), OML_OK);
    oml_rng r;
    oml_rng_seed(&r, 11);
    long derived = 0;
    for (int f = 0; f < FACTS; f++) {
        uint32_t a = (uint32_t)oml_rng_below(&r, NODES), p, n;
        do
            p = (uint32_t)oml_rng_below(&r, NODES);
        while (p == a || p % CLASSES != a % CLASSES);
        do
            n = (uint32_t)oml_rng_below(&r, NODES);
        while (n % CLASSES == a % CLASSES);
        oml_triplet out[2];
        int got;
        assert_int_equal(oml_closure_add_triplet(c, (oml_triplet){a, p, n}, out, 2, &got), OML_OK);
        for (int i = 0; i < got; i++) {
            assert_int_equal(out[i].a % CLASSES, out[i].p % CLASSES);
            assert_int_not_equal(out[i].a % CLASSES, out[i].n % CLASSES);
            assert_int_not_equal(out[i].a, out[i].p);
        }
        derived += got;
    }
    assert_true(derived > FACTS / 2);
    for (int k = 0; k < 10000; k++) {
        oml_triplet t;
        assert_int_equal(oml_closure_sample(c, &t), OML_OK);
        assert_int_equal(t.a % CLASSES, t.p % CLASSES);
        assert_int_not_equal(t.a % CLASSES, t.n % CLASSES);
        assert_true(oml_closure_is_similar(c, t.a, t.p));
        assert_true(oml_closure_is_dissimilar(c, t.a, t.n));
    }
    oml_closure_stats st;
    oml_closure_get_stats(c, &st);
    assert_true(st.components >= CLASSES);
    assert_int_equal(st.similar_pairs, FACTS);
    assert_int_equal(st.conflicts, 0);
    /* Contradictions are refused. */
    assert_int_equal(oml_closure_add_similar(c, 0, 1, NULL, 0, NULL),
                     oml_closure_is_dissimilar(c, 0, 1) ? OML_ECONFLICT : OML_OK);
    oml_closure_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_brute_force_random),
        cmocka_unit_test(test_remove_brute_force),
        cmocka_unit_test(test_remove_cases),
        cmocka_unit_test(test_invalid_args),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_large_labelled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
