/* ivf_calibrate.c - how far a query of an index with lists must probe
 * (index.h, oml_index_calibrate).
 *
 * For each sample row taken as a query, every head's exact 10 nearest rows
 * (a full scan) are each reached after some number of rows probed: the
 * rows of the lists before its own in the query's probe order, plus its
 * own list. Probing R rows finds the neighbours whose number is <= R
 * (the probe stops at the list that reaches R), so the target recall is
 * that quantile of the numbers. */
#include "index.h"

#include <stdlib.h>
#include <string.h>

#include "ivf.h"

#define CAL_K 10

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The list of a row: rows are laid out by list (list_start ascending). */
static int32_t list_of_row(const oml_index *ix, int32_t row)
{
    int32_t lo = 0, hi = ix->n_lists - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (ix->list_start[mid] <= row)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* For sample row `row`: the rows probed before reaching each of its exact
 * neighbours, appended to need (heads * CAL_K). reach (n_lists) is scratch
 * that gets each list's cumulative rows in the query's probe order. */
static int32_t needs_of(const oml_index *ix, int32_t row, float *q_all, float *scratch,
                        int32_t *lists, int64_t *reach, oml_neighbor *nb, int64_t *need)
{
    int32_t d = ix->heads * ix->emb, m = 0;
    for (int h = 0; h < ix->heads; h++)
        for (int32_t j = 0; j < ix->emb; j++)
            q_all[h * ix->emb + j] = oml_index_emb(ix, h, row, j);
    int32_t got = oml_ivf_probe(ix->centroids, ix->n_lists, d, q_all, ix->n_lists, lists,
                                scratch);
    int64_t rows = 0;
    for (int32_t i = 0; i < ix->n_lists; i++)
        reach[i] = ix->n; /* a list the probe never names: everything */
    for (int32_t i = 0; i < got; i++) {
        rows += ix->list_start[lists[i] + 1] - ix->list_start[lists[i]];
        reach[lists[i]] = rows;
    }
    for (int h = 0; h < ix->heads; h++) {
        int32_t c = oml_index_topk(ix, h, q_all + (size_t)h * ix->emb, CAL_K, row, NULL, nb,
                                   scratch);
        for (int32_t j = 0; j < c; j++)
            need[m++] = reach[list_of_row(ix, nb[j].row)];
    }
    return m;
}

int oml_index_calibrate(oml_index *ix, double target)
{
    if (ix == NULL || ix->n_lists <= 0 || ix->n <= CAL_K || !(target > 0.0))
        return OML_OK;
    if (target > 1.0)
        target = 1.0;
    int32_t S = ix->n < OML_IVF_CALIBRATION_QUERIES ? ix->n : OML_IVF_CALIBRATION_QUERIES;
    size_t d = (size_t)ix->heads * (size_t)ix->emb;
    size_t cap = (size_t)S * (size_t)ix->heads * CAL_K;
    float *q_all = malloc(d * sizeof *q_all);
    float *scratch = malloc(((size_t)ix->n + (size_t)ix->n_lists) * sizeof *scratch);
    int32_t *lists = malloc((size_t)ix->n_lists * sizeof *lists);
    int64_t *reach = malloc((size_t)ix->n_lists * sizeof *reach);
    int64_t *need = malloc(cap * sizeof *need);
    oml_neighbor nb[CAL_K];
    int rc = q_all && scratch && lists && reach && need ? OML_OK : OML_ENOMEM;
    size_t m = 0;
    for (int32_t s = 0; rc == OML_OK && s < S; s++)
        m += (size_t)needs_of(ix, (int32_t)((int64_t)s * ix->n / S), q_all, scratch, lists,
                              reach, nb, need + m);
    if (rc == OML_OK && m > 0) {
        qsort(need, m, sizeof *need, cmp_i64);
        size_t at = (size_t)(target * (double)m);
        int64_t rows = need[at < m ? at : m - 1];
        ix->probe_rows = rows > 64 * CAL_K ? rows : 64 * CAL_K;
    }
    free(q_all);
    free(scratch);
    free(lists);
    free(reach);
    free(need);
    return rc;
}
