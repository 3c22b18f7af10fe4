/* loo_knn.c - leave-one-out kNN error (loo_knn.h). */
#include "loo_knn.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define QUERY_BLOCK 64 /* queries per GEMM: a (64, n) block of inner products, 16 MB at 65,536 */
#define MAX_K 64

/* The k largest of sims (n), skipping row self: rows into top, nearest first. */
static int32_t top_k(const float *sims, int32_t n, int32_t self, int32_t k, int32_t *top)
{
    float best[MAX_K];
    int32_t have = 0;
    for (int32_t j = 0; j < n; j++) {
        if (j == self || (have == k && sims[j] <= best[k - 1]))
            continue;
        int32_t at = have < k ? have++ : k - 1;
        while (at > 0 && best[at - 1] < sims[j]) {
            best[at] = best[at - 1];
            top[at] = top[at - 1];
            at--;
        }
        best[at] = sims[j];
        top[at] = j;
    }
    return have;
}

/* The majority label among the have rows of top (nearest first); a tie goes
 * to the label reached first. */
static int32_t vote(const int32_t *labels, const int32_t *top, int32_t have)
{
    int32_t winner = -1, winner_votes = 0;
    for (int32_t i = 0; i < have; i++) {
        int32_t lab = labels[top[i]], votes = 0;
        for (int32_t j = 0; j < have; j++)
            votes += labels[top[j]] == lab;
        if (votes > winner_votes) {
            winner = lab;
            winner_votes = votes;
        }
    }
    return winner;
}

float oml_loo_knn_error(const float *E, const int32_t *labels, int32_t n, int32_t e, int32_t k,
                        int32_t max_q, uint8_t *wrong_out)
{
    if (k < 1 || k > MAX_K || n <= k || max_q < 1)
        return NAN;
    int32_t m = n < max_q ? n : max_q;
    float *Q = malloc((size_t)QUERY_BLOCK * e * sizeof(float));
    float *S = malloc((size_t)QUERY_BLOCK * n * sizeof(float));
    int32_t *rows = malloc((size_t)QUERY_BLOCK * sizeof(int32_t));
    int32_t wrong = 0;
    if (Q == NULL || S == NULL || rows == NULL) {
        free(Q);
        free(S);
        free(rows);
        return NAN;
    }
    for (int32_t q0 = 0; q0 < m; q0 += QUERY_BLOCK) {
        int32_t b = m - q0 < QUERY_BLOCK ? m - q0 : QUERY_BLOCK;
        for (int32_t i = 0; i < b; i++) {
            rows[i] = (int32_t)((int64_t)(q0 + i) * n / m);
            memcpy(Q + (size_t)i * e, E + (size_t)rows[i] * e, (size_t)e * sizeof(float));
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, n, e, 1.0f, Q, e, E, e, 0.0f, S,
                    n);
        for (int32_t i = 0; i < b; i++) {
            int32_t top[MAX_K];
            int32_t have = top_k(S + (size_t)i * n, n, rows[i], k, top);
            int miss = vote(labels, top, have) != labels[rows[i]];
            wrong += miss;
            if (wrong_out)
                wrong_out[q0 + i] = (uint8_t)miss;
        }
    }
    free(Q);
    free(S);
    free(rows);
    return (float)wrong / (float)m;
}
