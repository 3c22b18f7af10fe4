/* test_pq4.c - 4-bit product codes (src/pq4.c) and the lists' first pass
 * over them (src/hlist.c).
 *
 * A tiny case's codes, tables and scores worked out by hand; the AVX2 and
 * portable kernels agree bit for bit on random blocks, tables and
 * thresholds; training is deterministic and finds centroids the rows sit
 * on. Through the lists: a first pass that keeps every scanned row hands
 * the int8 codes the rows the int8 scan keeps, with the same scores; a
 * short one keeps exactly the rows of the largest product-code scores
 * (by brute force), scored by their int8 codes as the int8 scan scores
 * them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hlist.h"
#include "pq4.h"
#include "rng.h"

/* Subspace 0: centroid t at (0.1 t - 0.5, 0); subspace 1: at (0, 0.05 t).
 * q = (1, 7, -3, 2): table 0 is 0.1 t - 0.5, table 1 0.1 t, both spanning
 * 1.5, so delta = 1.5 / 255, the tables 17 t and the bias -0.5. The row
 * (-0.2, 0, 0, 0.5) is codes 3 and 10: sum 17 (3 + 10) = 221, score
 * -0.5 + 221 delta = 0.8 = q . row. */
static void test_hand_worked(void **state)
{
    (void)state;
    float cent[2 * OML_PQ4_K * OML_PQ4_DSUB];
    for (int t = 0; t < OML_PQ4_K; t++) {
        cent[2 * t] = 0.1f * (float)t - 0.5f;
        cent[2 * t + 1] = 0.0f;
        cent[OML_PQ4_K * 2 + 2 * t] = 0.0f;
        cent[OML_PQ4_K * 2 + 2 * t + 1] = 0.05f * (float)t;
    }
    oml_pq4 pq = {.emb = 4, .m = 2, .cent = cent};
    assert_int_equal(oml_pq4_block_bytes(&pq), 32);
    uint8_t block[32] = {0};
    const float row[4] = {-0.2f, 0.0f, 0.0f, 0.5f};
    oml_pq4_encode(&pq, row, block, 5);  /* low nibbles */
    oml_pq4_encode(&pq, row, block, 20); /* high nibbles of byte 4 */
    assert_int_equal(block[5], 3);       /* subspace 0, row 5 */
    assert_int_equal(block[16 + 5], 10); /* subspace 1, row 5 */
    assert_int_equal(block[4], 3 << 4);
    assert_int_equal(block[16 + 4], 10 << 4);
    assert_int_equal(oml_pq4_code(block, 0, 20), 3);
    assert_int_equal(oml_pq4_code(block, 1, 20), 10);
    const float q[4] = {1.0f, 7.0f, -3.0f, 2.0f};
    oml_pq4_lut lut;
    oml_pq4_lut_init(&pq, q, &lut);
    assert_float_equal(lut.delta, 1.5 / 255.0, 1e-7);
    assert_float_equal(lut.bias, -0.5, 1e-6);
    for (int t = 0; t < OML_PQ4_K; t++) {
        assert_int_equal(lut.t[t], 17 * t);
        assert_int_equal(lut.t[OML_PQ4_K + t], 17 * t);
    }
    uint16_t sums[32];
    uint32_t hit, hit_c;
    oml_pq4_scan(block, 1, 2, &lut, 0, sums, &hit);
    for (int r = 0; r < 32; r++) /* every other row is codes 0: tables' 0 */
        assert_int_equal(sums[r], r == 5 || r == 20 ? 221 : 0);
    assert_int_equal(hit, (1u << 5) | (1u << 20));
    oml_pq4_scan_c(block, 1, 2, &lut, 220, sums, &hit_c);
    assert_int_equal(hit_c, (1u << 5) | (1u << 20));
    oml_pq4_scan(block, 1, 2, &lut, 221, sums, &hit); /* above, not at */
    assert_int_equal(hit, 0);
    assert_float_equal(lut.bias + lut.delta * (float)sums[5], 0.8, 1e-6);
}

static void test_kernels_agree(void **state)
{
    (void)state;
    oml_rng r;
    oml_rng_seed(&r, 7);
    enum { NB = 9 };
    const int32_t ms[4] = {2, 4, 48, 128};
    for (int mi = 0; mi < 4; mi++) {
        int32_t m = ms[mi];
        size_t bytes = (size_t)m * 16 * NB;
        uint8_t *blocks = malloc(bytes);
        for (size_t i = 0; i < bytes; i++)
            blocks[i] = (uint8_t)(oml_rng_next(&r) >> 24);
        oml_pq4_lut lut = {.delta = 1.0f};
        for (int round = 0; round < 20; round++) {
            for (int32_t i = 0; i < m * OML_PQ4_K; i++) /* round 0: the largest entries */
                lut.t[i] = round == 0 ? 255 : (uint8_t)(oml_rng_next(&r) >> 24);
            int32_t thr = round == 1 ? -1 : round == 2 ? 32767
                          : (int32_t)(oml_rng_next(&r) % (uint64_t)(m * 255 + 2)) - 1;
            uint16_t s[NB * 32], s_c[NB * 32];
            uint32_t h[NB], h_c[NB];
            oml_pq4_scan(blocks, NB, m, &lut, thr, s, h);
            oml_pq4_scan_c(blocks, NB, m, &lut, thr, s_c, h_c);
            assert_memory_equal(s, s_c, sizeof s);
            assert_memory_equal(h, h_c, sizeof h);
            if (round == 0)
                assert_int_equal(s[NB * 32 - 1], m * 255);
        }
        free(blocks);
    }
}

/* Rows on 16 points per subspace (row i on point (i * 5) % 16 of each, in
 * a different order per subspace): training finds the points, every row's
 * code decodes to its own values, and training twice gives the same bytes. */
static void test_train(void **state)
{
    (void)state;
    enum { S = 16 * 17, E = 8 };
    float pts[E / 2][16][2], x[S * E];
    oml_rng r;
    oml_rng_seed(&r, 11);
    for (int j = 0; j < E / 2; j++)
        for (int t = 0; t < 16; t++) {
            pts[j][t][0] = (float)oml_rng_normal(&r);
            pts[j][t][1] = (float)oml_rng_normal(&r);
        }
    for (int i = 0; i < S; i++)
        for (int j = 0; j < E / 2; j++) {
            int t = (i * 5 + j) % 16;
            x[i * E + 2 * j] = pts[j][t][0];
            x[i * E + 2 * j + 1] = pts[j][t][1];
        }
    oml_pq4 a, b;
    assert_int_equal(oml_pq4_train(&a, x, S, E), OML_OK);
    assert_int_equal(oml_pq4_train(&b, x, S, E), OML_OK);
    assert_int_equal(a.m, E / 2);
    assert_memory_equal(a.cent, b.cent, (size_t)E / 2 * 16 * 2 * sizeof(float));
    for (int i = 0; i < 32; i++) {
        uint8_t block[E / 2 * 16] = {0};
        oml_pq4_encode(&a, x + i * E, block, i % 32);
        for (int j = 0; j < E / 2; j++) {
            const float *c = a.cent + ((size_t)j * 16 + (size_t)oml_pq4_code(block, j, i % 32)) * 2;
            assert_float_equal(c[0], x[i * E + 2 * j], 1e-6);
            assert_float_equal(c[1], x[i * E + 2 * j + 1], 1e-6);
        }
    }
    for (int i = 0; i < 200; i++) { /* any row: the first of the nearest, by brute force */
        float v[E];
        for (int j = 0; j < E; j++)
            v[j] = i % 4 == 0 ? a.cent[(size_t)(j / 2 * 16 + i % 16) * 2 + j % 2]
                              : (float)oml_rng_normal(&r); /* every fourth on a centroid */
        uint8_t block[E / 2 * 16] = {0};
        oml_pq4_encode(&a, v, block, 7);
        for (int j = 0; j < E / 2; j++) {
            float best = INFINITY;
            int at = 0;
            for (int t = 0; t < 16; t++) {
                float d0 = v[2 * j] - a.cent[(j * 16 + t) * 2];
                float d1 = v[2 * j + 1] - a.cent[(j * 16 + t) * 2 + 1];
                if (d0 * d0 + d1 * d1 < best) {
                    best = d0 * d0 + d1 * d1;
                    at = t;
                }
            }
            assert_int_equal(oml_pq4_code(block, j, 7), at);
        }
    }
    oml_pq4_free(&a);
    oml_pq4_free(&b);
    assert_int_equal(oml_pq4_train(&a, x, S, 6), OML_EINVAL); /* not a multiple of 4 */
    assert_int_equal(oml_pq4_train(&a, x, S, 260), OML_EINVAL);
    assert_false(oml_pq4_fits(6));
    assert_true(oml_pq4_fits(96));
}

/* n unit rows of dimension d around c cluster directions, as columns (d, n). */
static float *clustered_cols(oml_rng *r, int32_t n, int32_t d, int c, float **rows_out)
{
    float *dir = malloc((size_t)c * (size_t)d * sizeof *dir);
    float *x = malloc((size_t)n * (size_t)d * sizeof *x);
    float *cols = malloc((size_t)n * (size_t)d * sizeof *cols);
    for (int i = 0; i < c * d; i++)
        dir[i] = (float)oml_rng_normal(r);
    for (int32_t i = 0; i < n; i++) {
        double s = 0;
        for (int32_t j = 0; j < d; j++) {
            float v = dir[(i % c) * d + j] + 0.5f * (float)oml_rng_normal(r);
            x[(size_t)i * (size_t)d + (size_t)j] = v;
            s += (double)v * v;
        }
        for (int32_t j = 0; j < d; j++) {
            x[(size_t)i * (size_t)d + (size_t)j] /= (float)sqrt(s);
            cols[(size_t)j * (size_t)n + (size_t)i] = x[(size_t)i * (size_t)d + (size_t)j];
        }
    }
    free(dir);
    *rows_out = x;
    return cols;
}

static int by_row(const void *pa, const void *pb)
{
    const oml_hlist_hit *a = pa, *b = pb;
    return (a->row > b->row) - (a->row < b->row);
}

/* Every position's product code is its residual's nearest centroids. */
static void check_codes(const oml_hlist *hl, const float *cols)
{
    assert_int_equal(hl->pq.m, hl->emb / 2);
    for (int32_t l = 0; l < hl->n_lists; l++) {
        int32_t a = hl->list_start[l], b = hl->list_start[l + 1];
        assert_int_equal(hl->blk_start[l + 1] - hl->blk_start[l], (b - a + 31) / 32);
        for (int32_t p = a; p < b; p += 7) {
            float v[64];
            for (int32_t j = 0; j < hl->emb; j++) {
                v[j] = cols[(size_t)j * (size_t)hl->n + (size_t)hl->rows[p]];
                v[j] -= hl->centroids[(size_t)l * (size_t)hl->emb + (size_t)j];
            }
            uint8_t block[64 * 16] = {0};
            oml_pq4_encode(&hl->pq, v, block, (p - a) % 32);
            const uint8_t *mine = hl->pq_codes + (size_t)(hl->blk_start[l] + (p - a) / 32) *
                                                     oml_pq4_block_bytes(&hl->pq);
            for (int32_t j = 0; j < hl->pq.m; j++)
                assert_int_equal(oml_pq4_code(mine, j, (p - a) % 32),
                                 oml_pq4_code(block, j, (p - a) % 32));
        }
    }
}

/* A first pass that keeps every scanned row hands the int8 codes what the
 * int8 scan keeps (the rows that may be among the k nearest, same floor,
 * same scores); a short one keeps the rows of the largest product-code
 * scores, each scored as the int8 scan scores it. */
static void test_first_pass(void **state)
{
    (void)state;
    enum { N = 3000, L = 16, K = 10, NP = 8, SHORT = 40 };
    const int32_t embs[2] = {64, 32};
    for (int t = 0; t < 2; t++) {
        int32_t e = embs[t];
        oml_rng r;
        oml_rng_seed(&r, 31 + (uint64_t)t);
        float *rows;
        float *cols = clustered_cols(&r, N, e, 25, &rows);
        oml_hlist hl;
        assert_int_equal(oml_hlist_build(&hl, cols, N, e, L), OML_OK);
        check_codes(&hl, cols);
        int32_t order[L];
        float dots[L];
        oml_neighbor lows[N];
        oml_hlist_hit *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
        float *score = malloc(N * sizeof *score);
        long cut = 0;
        for (int qi = 0; qi < 20; qi++) {
            const float *q = rows + (size_t)(qi * 131) * (size_t)e;
            int32_t ex = qi * 131;
            assert_int_equal(oml_hlist_order(&hl, q, order, dots), L);
            /* the int8 scan, and a first pass keeping every row (R >= N) */
            oml_hlist_keep ka, kb;
            hl.pq_keep = 0;
            oml_hlist_keep_init(&ka, a, N, 0, lows, K);
            oml_hlist_scan(&hl, q, order, dots, NP, ex, NULL, &ka);
            float floor_a = ka.floor;
            hl.pq_keep = N;
            oml_hlist_keep_init(&kb, b, N, 0, lows, K);
            oml_hlist_scan(&hl, q, order, dots, NP, ex, NULL, &kb);
            assert_true(kb.floor == floor_a);
            int32_t na = 0, nb = 0;
            for (int32_t i = 0; i < ka.cnt; i++)
                if (a[i].dot + a[i].slack >= floor_a)
                    a[na++] = a[i];
            for (int32_t i = 0; i < kb.cnt; i++)
                if (b[i].dot + b[i].slack >= kb.floor)
                    b[nb++] = b[i];
            assert_int_equal(na, nb);
            qsort(a, (size_t)na, sizeof *a, by_row);
            qsort(b, (size_t)nb, sizeof *b, by_row);
            assert_memory_equal(a, b, (size_t)na * sizeof *a);

            /* every scanned row's int8 score (all kept: k = N), and its
             * product-code score by brute force, as the first pass computes it */
            hl.pq_keep = 0;
            oml_hlist_keep_init(&ka, a, N, 0, lows, N);
            int32_t all = oml_hlist_scan(&hl, q, order, dots, NP, ex, NULL, &ka);
            oml_pq4_lut lut;
            oml_pq4_lut_init(&hl.pq, q, &lut);
            for (int32_t i = 0; i < N; i++)
                score[i] = -INFINITY;
            int32_t scanned = 0;
            for (int32_t o = 0; o < NP; o++) {
                int32_t l = order[o], p0 = hl.list_start[l];
                int32_t nbl = hl.blk_start[l + 1] - hl.blk_start[l];
                uint16_t sums[32 * 100];
                uint32_t hit[100];
                assert_true(nbl <= 100);
                oml_pq4_scan_c(hl.pq_codes + (size_t)hl.blk_start[l] * oml_pq4_block_bytes(&hl.pq),
                               nbl, hl.pq.m, &lut, -1, sums, hit);
                for (int32_t p = p0; p < hl.list_start[l + 1]; p++)
                    if (hl.rows[p] != ex) {
                        score[hl.rows[p]] = dots[l] + lut.bias + lut.delta * (float)sums[p - p0];
                        scanned++;
                    }
            }
            assert_int_equal(all, scanned);
            float *sorted = malloc(N * sizeof *sorted);
            memcpy(sorted, score, N * sizeof *sorted);
            for (int32_t i = 1; i < N; i++) /* insertion sort, descending */
                for (int32_t j = i; j > 0 && sorted[j] > sorted[j - 1]; j--) {
                    float x = sorted[j];
                    sorted[j] = sorted[j - 1];
                    sorted[j - 1] = x;
                }
            float sR = sorted[SHORT - 1];
            free(sorted);
            /* the short first pass: k = N keeps every row it hands over */
            hl.pq_keep = SHORT;
            oml_hlist_keep_init(&kb, b, N, 0, lows, N);
            nb = oml_hlist_scan(&hl, q, order, dots, NP, ex, NULL, &kb);
            assert_int_equal(nb, SHORT);
            qsort(a, (size_t)all, sizeof *a, by_row);
            int above = 0;
            for (int32_t i = 0; i < nb; i++) {
                assert_true(score[b[i].row] >= sR);
                above += score[b[i].row] > sR;
                oml_hlist_hit key = {.row = b[i].row};
                const oml_hlist_hit *same = bsearch(&key, a, (size_t)all, sizeof *a, by_row);
                assert_non_null(same);
                assert_true(same->dot == b[i].dot && same->slack == b[i].slack);
            }
            int32_t want_above = 0;
            for (int32_t i = 0; i < N; i++)
                want_above += score[i] > sR;
            assert_int_equal(above, want_above); /* every row above the cut is in */
            cut += all - nb;
        }
        assert_true(cut > 0);
        free(a);
        free(b);
        free(score);
        oml_hlist_free(&hl);
        free(cols);
        free(rows);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked),
        cmocka_unit_test(test_kernels_agree),
        cmocka_unit_test(test_train),
        cmocka_unit_test(test_first_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
