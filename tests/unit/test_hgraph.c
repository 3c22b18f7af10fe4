/* test_hgraph.c - the HNSW graph (src/hgraph.c) against an exact scan on
 * clustered unit rows (8 dimensions of signal in 32): recall@10 at a small
 * width and at a width of every row; rows added after the first searches
 * are found (each row's copy as the query finds it first); rows allow
 * refuses and the excluded row are never returned, while the rest are
 * still found; rows given in the caller's layout route as the graph's
 * own (coordinates' signs flipped on both sides: the same dot products,
 * the same answers); the same adds give the same links; bad arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hgraph.h"

#define N 3000
#define E 32
#define NQ 100

static float rows[N * E];
static float queries[NQ * E];

static uint64_t rs = 42;
static double unif(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rs >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(unif())) * cos(6.283185307179586 * unif());
}

/* A unit row around one of 20 centres, 8 dimensions of signal. */
static void make_row(float *v, const float *centres)
{
    int c = (int)(unif() * 20) % 20;
    double s = 0;
    for (int j = 0; j < E; j++) {
        v[j] = (float)(centres[c * E + j] + (j < 8 ? 0.4 * gauss() : 0.02 * gauss()));
        s += (double)v[j] * v[j];
    }
    for (int j = 0; j < E; j++)
        v[j] = (float)(v[j] / sqrt(s));
}

static int setup(void **state)
{
    (void)state;
    float centres[20 * E];
    for (int i = 0; i < 20 * E; i++)
        centres[i] = (i % E) < 8 ? (float)gauss() : 0.0f;
    for (int i = 0; i < N; i++)
        make_row(rows + (size_t)i * E, centres);
    for (int i = 0; i < NQ; i++)
        make_row(queries + (size_t)i * E, centres);
    return 0;
}

static float dotp(const float *a, const float *b)
{
    double s = 0;
    for (int j = 0; j < E; j++)
        s += (double)a[j] * b[j];
    return (float)s;
}

/* The exact k most similar of the first n rows that allow lets through. */
static void exact(const float *q, int32_t n, const uint8_t *allow, int32_t k, int32_t *out)
{
    float best[16];
    for (int i = 0; i < k; i++) {
        best[i] = -INFINITY;
        out[i] = -1;
    }
    for (int32_t r = 0; r < n; r++) {
        if (allow && !allow[r])
            continue;
        float s = dotp(q, rows + (size_t)r * E);
        int m = k - 1;
        if (!(s > best[m]))
            continue;
        while (m > 0 && s > best[m - 1]) {
            best[m] = best[m - 1];
            out[m] = out[m - 1];
            m--;
        }
        best[m] = s;
        out[m] = r;
    }
}

static double recall(const oml_hgraph *g, int32_t n, int32_t ef, const uint8_t *allow,
                     oml_hgraph_ws *w)
{
    long hits = 0;
    for (int i = 0; i < NQ; i++) {
        int32_t truth[10];
        oml_neighbor got[10];
        exact(queries + (size_t)i * E, n, allow, 10, truth);
        int32_t m = oml_hgraph_search(g, NULL, queries + (size_t)i * E, 10, ef, -1, allow, got, w);
        assert_int_equal(m, 10);
        for (int a = 1; a < m; a++) /* descending by similarity */
            assert_true(got[a - 1].dist >= got[a].dist);
        for (int a = 0; a < m; a++)
            for (int b = 0; b < 10; b++)
                hits += got[a].row == truth[b];
    }
    return (double)hits / (NQ * 10.0);
}

static void build(oml_hgraph *g, int32_t from, int32_t to)
{
    for (int32_t r = from; r < to; r++)
        assert_int_equal(oml_hgraph_add(g, rows + (size_t)r * E), OML_OK);
    assert_int_equal(g->n, to);
}

static void test_recall_against_exact(void **state)
{
    (void)state;
    oml_hgraph g;
    oml_hgraph_ws w;
    assert_int_equal(oml_hgraph_init(&g, E, 8, 64, 1), OML_OK);
    build(&g, 0, N);
    assert_int_equal(oml_hgraph_ws_init(&w, N, N), OML_OK);
    double r32 = recall(&g, N, 32, NULL, &w), rall = recall(&g, N, N, NULL, &w);
    assert_true(r32 >= 0.95);
    assert_true(rall >= 0.999);
    assert_true(w.visited > 0 && w.visited < (int64_t)NQ * N * 2); /* it scored rows, not all twice */
    assert_true(oml_hgraph_bytes(&g) >= (size_t)N * (E * sizeof(float) + 17 * sizeof(int32_t)));
    oml_hgraph_ws_free(&w);
    oml_hgraph_free(&g);
}

static void test_incremental_adds_found(void **state)
{
    (void)state;
    oml_hgraph g;
    oml_hgraph_ws w;
    assert_int_equal(oml_hgraph_init(&g, E, 8, 64, 2), OML_OK);
    build(&g, 0, N / 2);
    assert_int_equal(oml_hgraph_ws_init(&w, N, 64), OML_OK); /* room for the adds */
    assert_true(recall(&g, N / 2, 64, NULL, &w) >= 0.95);
    build(&g, N / 2, N); /* after searches: as a live index adds put items */
    int first = 0;
    for (int32_t r = N / 2; r < N; r++) {
        oml_neighbor got[1];
        assert_int_equal(oml_hgraph_search(&g, NULL, rows + (size_t)r * E, 1, 32, -1, NULL, got, &w), 1);
        first += got[0].row == r || dotp(rows + (size_t)got[0].row * E, rows + (size_t)r * E) >= 0.99999f;
    }
    assert_true(first >= (N / 2) * 99 / 100);
    assert_true(recall(&g, N, 64, NULL, &w) >= 0.95);
    oml_hgraph_ws_free(&w);
    oml_hgraph_free(&g);
}

static void test_refused_never_returned(void **state)
{
    (void)state;
    oml_hgraph g;
    oml_hgraph_ws w;
    static uint8_t allow[N];
    for (int i = 0; i < N; i++)
        allow[i] = i % 3 != 0; /* a third deleted */
    assert_int_equal(oml_hgraph_init(&g, E, 8, 64, 3), OML_OK);
    build(&g, 0, N);
    assert_int_equal(oml_hgraph_ws_init(&w, N, 64), OML_OK);
    for (int i = 0; i < NQ; i++) {
        oml_neighbor got[32];
        int32_t m = oml_hgraph_search(&g, NULL, queries + (size_t)i * E, 32, 64, -1, allow, got, &w);
        assert_int_equal(m, 32);
        for (int a = 0; a < m; a++)
            assert_true(got[a].row % 3 != 0);
        /* a stored row as the query, excluded: never itself */
        m = oml_hgraph_search(&g, NULL, rows + (size_t)(3 * i + 1) * E, 10, 64, 3 * i + 1, NULL,
                              got, &w);
        for (int a = 0; a < m; a++)
            assert_int_not_equal(got[a].row, 3 * i + 1);
    }
    assert_true(recall(&g, N, 64, allow, &w) >= 0.95); /* the others are still found */
    oml_hgraph_ws_free(&w);
    oml_hgraph_free(&g);
}

static void test_caller_rows_route(void **state)
{
    (void)state;
    oml_hgraph g, h;
    oml_hgraph_ws w;
    assert_int_equal(oml_hgraph_init(&g, E, 8, 64, 4), OML_OK);
    assert_int_equal(oml_hgraph_init(&h, E, 8, 64, 4), OML_OK);
    build(&g, 0, N);
    build(&h, 0, N);
    assert_int_equal(h.entry, g.entry);
    for (size_t r = 0; r < N; r++) /* a count, then that many links */
        assert_memory_equal(h.links0 + r * 17, g.links0 + r * 17,
                            (size_t)(1 + g.links0[r * 17]) * sizeof(int32_t));
    float *flip = malloc((size_t)N * E * sizeof *flip), q[E];
    assert_non_null(flip);
    for (size_t i = 0; i < (size_t)N * E; i++)
        flip[i] = (i % E) % 2 ? -rows[i] : rows[i];
    assert_int_equal(oml_hgraph_ws_init(&w, N, 64), OML_OK);
    for (int i = 0; i < NQ; i++) {
        oml_neighbor a[10], b[10];
        for (int j = 0; j < E; j++)
            q[j] = j % 2 ? -queries[i * E + j] : queries[i * E + j];
        int32_t ma = oml_hgraph_search(&g, NULL, queries + (size_t)i * E, 10, 48, -1, NULL, a, &w);
        int32_t mb = oml_hgraph_search(&g, flip, q, 10, 48, -1, NULL, b, &w);
        assert_int_equal(ma, mb);
        for (int j = 0; j < ma; j++)
            assert_int_equal(a[j].row, b[j].row);
    }
    free(flip);
    oml_hgraph_ws_free(&w);
    oml_hgraph_free(&g);
    oml_hgraph_free(&h);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    oml_hgraph g;
    oml_hgraph_ws w;
    oml_neighbor out[4];
    assert_int_equal(oml_hgraph_init(&g, 0, 8, 64, 1), OML_EINVAL);
    assert_int_equal(oml_hgraph_init(&g, E, 1, 64, 1), OML_EINVAL);
    assert_int_equal(oml_hgraph_init(&g, E, 8, 4, 1), OML_EINVAL);
    oml_hgraph_free(&g); /* zeroed by the failed init */
    assert_int_equal(oml_hgraph_init(&g, E, 8, 64, 1), OML_OK);
    assert_int_equal(oml_hgraph_ws_init(&w, 16, 16), OML_OK);
    assert_int_equal(oml_hgraph_search(&g, NULL, queries, 4, 16, -1, NULL, out, &w), 0); /* empty */
    build(&g, 0, 3);
    assert_int_equal(oml_hgraph_search(&g, NULL, queries, 4, 16, -1, NULL, out, &w), 3);
    oml_hgraph_ws_free(&w);
    oml_hgraph_free(&g);
    oml_hgraph_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recall_against_exact),
        cmocka_unit_test(test_incremental_adds_found),
        cmocka_unit_test(test_refused_never_returned),
        cmocka_unit_test(test_caller_rows_route),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
