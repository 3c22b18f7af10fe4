/* test_serve.c - classify (Eq. 23-25), verify (Eq. 26), retrieve (Eq. 27).
 *
 * Hand-worked model (tests/support/serve_hand.h: layers = 1, dim = hidden =
 * emb = 2, mu = 0, W(1) = I, Theta(0) = I, Theta(1) = [[1, 0], [0, 0]]):
 *   head 0: f0(x) = x / ||x||
 *   head 1: f1(x) = (1, 0) if x1 > 0, else the zero vector (D = sqrt(2) to all)
 * Items (row = slot order): 0 a (1,0) red   1 b (0,1) blue   2 c (1,1) blue
 *                           3 e (2,0) unlabelled
 * Label ids: red 0, blue 1.   D_AC = sqrt(2 - sqrt(2)) = 0.76536686.
 *
 * Query x = (1,0), k = 3, alpha = (0.75, 0.25):
 *   head 0: a 0, e 0, c D_AC (b sqrt(2) is 4th). d_min 0, d_max D_AC:
 *           S(a) = e^0 * .75 = .75 (red); e unlabelled; S(c) = e^-1 * .75 = .27590958 (blue)
 *   head 1: a, c, e all at D = 0 -> d_max = d_min: S = alpha(1) = .25 each
 *   S(red) = .75 + .25 = 1.0, S(blue) = .27590958 + .25 = .52590958 -> red. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "serve.h"
#include "serve_hand.h"
#include "testutil.h"

#define D_AC 0.76536686f
#define SQRT2 1.41421356f
#define E1 0.36787944117144233 /* e^-1 */

static oml_snapshot *hand_snap(float alpha0, float alpha1)
{
    oml_snapshot *s = oml_test_hand_snap(alpha0, alpha1);
    assert_non_null(s);
    return s;
}

static void put(oml_store *st, const char *id, float x0, float x1, const char *label)
{
    float x[2] = {x0, x1};
    assert_int_equal(oml_store_put(st, id, strlen(id), x, label, label ? strlen(label) : 0,
                                   NULL, NULL),
                     OML_OK);
}

static oml_index *hand_index(oml_snapshot *s)
{
    oml_index *ix = oml_test_hand_index(s);
    assert_non_null(ix);
    return ix;
}

static void test_classify_hand(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap(0.75f, 0.25f);
    oml_index *ix = hand_index(s);
    const float x[2] = {1, 0};
    oml_classification c;
    oml_diag d = {0};
    assert_int_equal(oml_classify(ix, x, 3, -1, &c, &d), OML_OK);
    assert_int_equal(c.label, 0); /* red */
    assert_float_equal(c.score, 1.0, 1e-6);
    assert_int_equal(c.n_classes, 2);
    assert_int_equal(c.classes[0].label, 0);
    assert_float_equal(c.classes[0].score, 1.0, 1e-6);
    assert_int_equal(c.classes[1].label, 1);
    assert_float_equal(c.classes[1].score, E1 * 0.75 + 0.25, 1e-6);

    /* k = 4 brings b (blue, sqrt(2)) into head 0 and, in head 1, b at sqrt(2)
     * after a, c, e at 0, so neither head is degenerate any more:
     *   head 0: d_max = sqrt(2); a .75, c .75 e^(-D_AC/sqrt(2)), b .75 e^-1
     *   head 1: d_max = sqrt(2); a .25, c .25, b .25 e^-1
     * red = 1.0; blue = .75 e^-.54119610 + .75 e^-1 + .25 + .25 e^-1. */
    assert_int_equal(oml_classify(ix, x, 4, -1, &c, &d), OML_OK);
    assert_int_equal(c.label, 1); /* blue now wins: 1.05442 against 1.0 */
    double blue = 0.75 * exp(-(double)D_AC / sqrt(2.0)) + 0.75 * E1 + 0.25 + 0.25 * E1;
    assert_float_equal(c.score, blue, 1e-6);
    assert_float_equal(c.classes[1].score, 1.0, 1e-6);
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}

/* k = 1: every head has d_max = d_min and scores its single neighbour alpha(l).
 * x = (1,1): head 0 nearest c (blue, D 0); head 1 nearest a (red, row 0, D 0,
 * tied with c and e but first by row). */
static void test_classify_weights_and_ties(void **state)
{
    (void)state;
    const float x[2] = {1, 1};
    oml_classification c;

    oml_snapshot *s = hand_snap(0.75f, 0.25f);
    oml_index *ix = hand_index(s);
    assert_int_equal(oml_classify(ix, x, 1, -1, &c, NULL), OML_OK);
    assert_int_equal(c.label, 1); /* blue .75 > red .25 */
    assert_float_equal(c.score, 0.75, 1e-7);
    oml_index_destroy(ix);
    oml_snapshot_release(s);

    s = hand_snap(0.25f, 0.75f);
    ix = hand_index(s);
    assert_int_equal(oml_classify(ix, x, 1, -1, &c, NULL), OML_OK);
    assert_int_equal(c.label, 0); /* red .75 > blue .25 */
    oml_index_destroy(ix);
    oml_snapshot_release(s);

    /* Equal weights: S(red) = S(blue) = .5 exactly; the tie goes to the
     * smaller label id (red = 0), although blue was voted for first. */
    s = hand_snap(0.5f, 0.5f);
    ix = hand_index(s);
    assert_int_equal(oml_classify(ix, x, 1, -1, &c, NULL), OML_OK);
    assert_int_equal(c.label, 0);
    assert_true(c.score == 0.5f);
    assert_int_equal(c.n_classes, 2);
    assert_int_equal(c.classes[0].label, 0);
    assert_int_equal(c.classes[1].label, 1);
    assert_true(c.classes[1].score == 0.5f);
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}

static void test_classify_exclude(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap(0.75f, 0.25f);
    oml_index *ix = hand_index(s);
    const float x[2] = {1, 0};
    oml_classification c;
    assert_int_equal(oml_classify(ix, x, 1, -1, &c, NULL), OML_OK);
    assert_int_equal(c.label, 0); /* a itself: red */
    /* Without a: head 0's nearest is e (unlabelled, no vote); head 1's is c
     * (row 2, D 0, before e): blue with alpha(1) = .25 alone. */
    assert_int_equal(oml_classify(ix, x, 1, 0, &c, NULL), OML_OK);
    assert_int_equal(c.label, 1);
    assert_float_equal(c.score, 0.25, 1e-7);
    assert_int_equal(c.n_classes, 1);
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}

static void test_classify_errors(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap(0.75f, 0.25f);
    oml_index *ix = hand_index(s);
    const float x[2] = {1, 0};
    oml_classification c, sentinel;
    memset(&sentinel, 0x5a, sizeof sentinel);
    c = sentinel;
    oml_diag d;

    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify(ix, x, 0, -1, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "k");
    assert_int_equal(d.code, OML_EINVAL);
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify(ix, x, OML_SERVE_MAX_K + 1, -1, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "k");
    assert_int_equal(oml_classify(ix, x, -5, -1, &c, NULL), OML_EINVAL);
    assert_memory_equal(&c, &sentinel, sizeof c); /* untouched on error */
    assert_int_equal(oml_classify(ix, x, OML_SERVE_MAX_K, -1, &c, NULL), OML_OK);
    assert_int_equal(c.label, 1); /* k is capped by the 4 items: as k = 4, blue */

    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify(ix, x, 1, 4, &c, &d), OML_EINVAL);
    assert_string_equal(d.field, "exclude_row");
    assert_int_equal(oml_classify(ix, x, 1, -2, &c, NULL), OML_EINVAL);

    const float bad[3][2] = {{NAN, 0}, {0, INFINITY}, {-INFINITY, 1}};
    for (int i = 0; i < 3; i++) {
        memset(&d, 0, sizeof d);
        assert_int_equal(oml_classify(ix, bad[i], 1, -1, &c, &d), OML_ENONFINITE);
        assert_string_equal(d.field, "features");
        oml_hit h[1];
        int32_t nh = 7;
        assert_int_equal(oml_retrieve(ix, bad[i], 1, -1, NULL, h, &nh, NULL), OML_ENONFINITE);
        assert_int_equal(nh, 7);
    }
    oml_index_destroy(ix);

    /* Only unlabelled items: no labelled neighbour at any k. */
    oml_store *st = NULL;
    assert_int_equal(oml_store_create(&st, 2, 4), OML_OK);
    put(st, "u", 1, 0, NULL);
    put(st, "v", 0, 1, NULL);
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_classify(ix, x, 2, -1, &c, &d), OML_EEMPTY);
    assert_int_equal(d.code, OML_EEMPTY);
    oml_index_destroy(ix);

    /* Empty index. */
    assert_int_equal(oml_store_delete(st, "u", 1), OML_OK);
    assert_int_equal(oml_store_delete(st, "v", 1), OML_OK);
    assert_int_equal(oml_index_build(&ix, s, st), OML_OK);
    assert_int_equal(oml_classify(ix, x, 1, -1, &c, NULL), OML_EEMPTY);
    oml_hit h[2];
    int32_t nh = 7;
    assert_int_equal(oml_retrieve(ix, x, 2, -1, NULL, h, &nh, NULL), OML_OK);
    assert_int_equal(nh, 0);
    oml_index_destroy(ix);
    oml_store_destroy(st);
    oml_snapshot_release(s);
}

/* Eq. 26 with x1 = (1,0), x2 = (1,1): D(0) = D_AC, D(0)/2 = .38268343;
 * D(1) = 0 (both map to (1,0)). */
static void test_verify(void **state)
{
    (void)state;
    const float x1[2] = {1, 0}, x2[2] = {1, 1};
    oml_verification v;
    oml_diag d;

    oml_snapshot *s = hand_snap(0.75f, 0.25f);
    assert_int_equal(oml_verify(s, x1, x2, 0.5f, &v, NULL), OML_OK);
    assert_float_equal(v.dist[0], D_AC, 1e-6);
    assert_true(v.dist[1] == 0.0f);
    assert_true(v.probability == 1.0f); /* .383 < .5 and 0 < .5: P = .75 + .25 */
    assert_int_equal(v.similar, 1);
    assert_int_equal(oml_verify(s, x1, x2, 0.3f, &v, NULL), OML_OK);
    assert_true(v.probability == 0.25f); /* only head 1 passes */
    assert_int_equal(v.similar, 0);
    /* Just either side of D(0)/2 = .38268343. */
    assert_int_equal(oml_verify(s, x1, x2, 0.3827f, &v, NULL), OML_OK);
    assert_true(v.probability == 1.0f);
    assert_int_equal(oml_verify(s, x1, x2, 0.3826f, &v, NULL), OML_OK);
    assert_true(v.probability == 0.25f);
    /* A pair far apart in both heads: (1,0) vs (-1,0): D(0) = 2, D(1) = sqrt(2). */
    const float x3[2] = {-1, 0};
    assert_int_equal(oml_verify(s, x1, x3, 0.7f, &v, NULL), OML_OK);
    assert_float_equal(v.dist[0], 2.0f, 1e-6);
    assert_float_equal(v.dist[1], SQRT2, 1e-6);
    assert_true(v.probability == 0.0f);
    assert_int_equal(v.similar, 0);
    /* p_l needs D/2 < T strictly: (1,0) vs (0,1) is at D = sqrt(2) in both
     * heads (head 1 maps (0,1) to 0), and float(sqrt 2)/2 = float(sqrt(2)/2). */
    const float x4[2] = {0, 1};
    const float t_eq = 0.70710677f;
    assert_int_equal(oml_verify(s, x1, x4, t_eq, &v, NULL), OML_OK);
    assert_true(v.dist[0] / 2.0f == t_eq && v.dist[1] / 2.0f == t_eq);
    assert_true(v.probability == 0.0f);
    assert_int_equal(oml_verify(s, x1, x4, nextafterf(t_eq, 1.0f), &v, NULL), OML_OK);
    assert_true(v.probability == 1.0f);
    /* An item and itself: D = 0 in every head. */
    assert_int_equal(oml_verify(s, x2, x2, 0.01f, &v, NULL), OML_OK);
    assert_true(v.dist[0] == 0.0f && v.dist[1] == 0.0f);
    assert_int_equal(v.similar, 1);
    oml_snapshot_release(s);

    /* P exactly 0.5 is similar (P >= 0.5). */
    s = hand_snap(0.5f, 0.5f);
    assert_int_equal(oml_verify(s, x1, x2, 0.3f, &v, NULL), OML_OK);
    assert_true(v.probability == 0.5f);
    assert_int_equal(v.similar, 1);

    /* Validation. */
    oml_verification sentinel;
    memset(&sentinel, 0x5a, sizeof sentinel);
    const float bad_t[4] = {0.0f, 1.0f, -0.5f, NAN};
    for (int i = 0; i < 4; i++) {
        v = sentinel;
        memset(&d, 0, sizeof d);
        assert_int_equal(oml_verify(s, x1, x2, bad_t[i], &v, &d), OML_EINVAL);
        assert_string_equal(d.field, "threshold");
        assert_memory_equal(&v, &sentinel, sizeof v);
    }
    const float xn[2] = {0, NAN};
    memset(&d, 0, sizeof d);
    assert_int_equal(oml_verify(s, x1, xn, 0.5f, &v, &d), OML_ENONFINITE);
    assert_string_equal(d.field, "features");
    assert_int_equal(oml_verify(s, xn, x1, 0.5f, &v, &d), OML_ENONFINITE);
    oml_snapshot_release(s);
}

/* Eq. 27, x = (1,0), alpha = (.75, .25), k = 3 (candidates as in the file
 * comment): pool a .75, e .75, c .27590958 (head 0); a .25, c .25, e .25
 * (head 1). Best per row, descending, ties by row: a (0) .75, e (3) .75,
 * c (2) .27590958. */
static void test_retrieve(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap(0.75f, 0.25f);
    oml_index *ix = hand_index(s);
    const float x[2] = {1, 0};
    oml_hit h[8];
    int32_t n = -1;
    assert_int_equal(oml_retrieve(ix, x, 3, -1, NULL, h, &n, NULL), OML_OK);
    assert_int_equal(n, 3);
    assert_int_equal(h[0].row, 0);
    assert_int_equal(h[1].row, 3);
    assert_int_equal(h[2].row, 2);
    assert_float_equal(h[0].score, 0.75, 1e-7);
    assert_float_equal(h[1].score, 0.75, 1e-7);
    assert_float_equal(h[2].score, E1 * 0.75, 1e-7);

    assert_int_equal(oml_retrieve(ix, x, 2, -1, NULL, h, &n, NULL), OML_OK);
    assert_int_equal(n, 2);
    assert_int_equal(h[0].row, 0);
    assert_int_equal(h[1].row, 3);

    /* Excluding a (row 0), k = 3:
     *   head 0: e 0, c D_AC, b sqrt(2): e .75, c .75 e^(-D_AC/sqrt 2) = .43653873, b .75 e^-1
     *   head 1: c 0, e 0, b sqrt(2): c .25, e .25, b .25 e^-1
     * best per row: e .75, c .43653873, b .27590958. */
    assert_int_equal(oml_retrieve(ix, x, 3, 0, NULL, h, &n, NULL), OML_OK);
    assert_int_equal(n, 3);
    assert_int_equal(h[0].row, 3);
    assert_int_equal(h[1].row, 2);
    assert_int_equal(h[2].row, 1);
    assert_float_equal(h[0].score, 0.75, 1e-7);
    assert_float_equal(h[1].score, 0.43653873, 1e-6);
    assert_float_equal(h[2].score, E1 * 0.75, 1e-7);

    /* k beyond the items: each row once, although every head returns all 4. */
    assert_int_equal(oml_retrieve(ix, x, 8, -1, NULL, h, &n, NULL), OML_OK);
    assert_int_equal(n, 4);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            assert_int_not_equal(h[i].row, h[j].row);
    for (int i = 1; i < n; i++)
        assert_true(h[i - 1].score >= h[i].score);
    assert_int_equal(h[3].row, 1); /* b is last: far in both heads */

    oml_diag d;
    memset(&d, 0, sizeof d);
    n = 7;
    assert_int_equal(oml_retrieve(ix, x, 0, -1, NULL, h, &n, &d), OML_EINVAL);
    assert_string_equal(d.field, "k");
    assert_int_equal(oml_retrieve(ix, x, OML_SERVE_MAX_K + 1, -1, NULL, h, &n, &d), OML_EINVAL);
    assert_int_equal(n, 7);
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}

/* What a web service filters by, on the hand model, x = (1,0), alpha =
 * (.75, .25). Similarities, sum_l alpha(l) cos: head 0 cosines a 1, b 0,
 * c 1/sqrt 2, e 1; head 1 (f1 = (1,0) for x1 > 0, else 0) a 1, b 0, c 1,
 * e 1: a 1.0, b 0, c .75/sqrt 2 + .25 = .78033009, e 1.0. */
static void test_retrieve_filters_and_similarity(void **state)
{
    (void)state;
    oml_snapshot *s = hand_snap(0.75f, 0.25f);
    oml_index *ix = hand_index(s);
    const float x[2] = {1, 0};
    oml_hit h[8];
    int32_t n = -1;
    /* The similarity is the pair's: c's is the same at k = 3 and k = 8,
     * where its Eq. 27 score moves (.27590958 -> .43653873: d_max grew). */
    assert_int_equal(oml_retrieve(ix, x, 3, -1, NULL, h, &n, NULL), OML_OK);
    assert_int_equal(h[2].row, 2);
    assert_float_equal(h[0].similarity, 1.0, 1e-6);
    assert_float_equal(h[1].similarity, 1.0, 1e-6);
    assert_float_equal(h[2].similarity, 0.78033009, 1e-6);
    assert_float_equal(h[2].score, E1 * 0.75, 1e-6);
    assert_int_equal(oml_retrieve(ix, x, 8, -1, NULL, h, &n, NULL), OML_OK);
    assert_int_equal(h[2].row, 2);
    assert_float_equal(h[2].similarity, 0.78033009, 1e-6);
    assert_float_equal(h[2].score, 0.43653873, 1e-6);
    assert_int_equal(h[3].row, 1);
    assert_float_equal(h[3].similarity, 0.0, 1e-6);

    /* Only blue (rows b, c): the search runs over them. head 0: c D_AC, b
     * sqrt 2 -> c .75, b .75/e; head 1: c 0, b sqrt 2 -> c .25, b .25/e. */
    uint8_t blue[4] = {0, 1, 1, 0};
    oml_retrieve_opts o = {blue, 0, -INFINITY, NULL};
    assert_int_equal(oml_retrieve(ix, x, 3, -1, &o, h, &n, NULL), OML_OK);
    assert_int_equal(n, 2);
    assert_int_equal(h[0].row, 2);
    assert_int_equal(h[1].row, 1);
    assert_float_equal(h[0].score, 0.75, 1e-6);
    assert_float_equal(h[1].score, 0.75 * E1, 1e-6);

    /* All but e, k = 2: head 0 a 0, c D_AC; head 1 a, c at 0: a .75, c .75/e. */
    uint8_t no_e[4] = {1, 1, 1, 0};
    o.allow = no_e;
    assert_int_equal(oml_retrieve(ix, x, 2, -1, &o, h, &n, NULL), OML_OK);
    assert_int_equal(n, 2);
    assert_int_equal(h[0].row, 0);
    assert_int_equal(h[1].row, 2);

    /* Page 2 of 1: offset 1, k 2 is hits 1-2 of the k = 3 ranking a, e, c,
     * with that ranking's scores. */
    o = (oml_retrieve_opts){NULL, 1, -INFINITY, NULL};
    assert_int_equal(oml_retrieve(ix, x, 2, -1, &o, h, &n, NULL), OML_OK);
    assert_int_equal(n, 2);
    assert_int_equal(h[0].row, 3);
    assert_int_equal(h[1].row, 2);
    assert_float_equal(h[1].score, E1 * 0.75, 1e-6);

    /* A similarity floor of .9 drops c: fewer than k come back. */
    o = (oml_retrieve_opts){NULL, 0, 0.9f, NULL};
    assert_int_equal(oml_retrieve(ix, x, 3, -1, &o, h, &n, NULL), OML_OK);
    assert_int_equal(n, 2);
    assert_int_equal(h[0].row, 0);
    assert_int_equal(h[1].row, 3);

    /* A page beyond the largest ranking is refused, naming offset. */
    oml_diag d;
    memset(&d, 0, sizeof d);
    o = (oml_retrieve_opts){NULL, OML_SERVE_MAX_K, -INFINITY, NULL};
    assert_int_equal(oml_retrieve(ix, x, 1, -1, &o, h, &n, &d), OML_EINVAL);
    assert_string_equal(d.field, "offset");
    oml_index_destroy(ix);
    oml_snapshot_release(s);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_hand),
        cmocka_unit_test(test_classify_weights_and_ties),
        cmocka_unit_test(test_classify_exclude),
        cmocka_unit_test(test_classify_errors),
        cmocka_unit_test(test_verify),
        cmocka_unit_test(test_retrieve),
        cmocka_unit_test(test_retrieve_filters_and_similarity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
