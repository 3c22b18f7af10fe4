/* ann_pq.c - the first pass by product codes against the int8 scan (see
 * ann_pq.h). */
#include "ann_pq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define K 10
#define MAX_Q 1000
static const int32_t KEEPS[] = {0, 256, 512, 1024, 2048, 0};
#define N_KEEPS (int)(sizeof KEEPS / sizeof KEEPS[0])

int ann_pq_report(oml_index *ix, const float *Q, int32_t n_q)
{
    int H = ix->heads, e = ix->emb;
    size_t he = (size_t)H * (size_t)e;
    if (n_q > MAX_Q)
        n_q = MAX_Q;
    oml_neighbor *exact = malloc((size_t)n_q * (size_t)H * K * sizeof *exact);
    int32_t *n_exact = malloc((size_t)n_q * (size_t)H * sizeof *n_exact);
    float *scratch = malloc((size_t)ix->n * sizeof *scratch);
    void *mem = malloc(oml_near_ws_bytes(ix, 32));
    double *t10 = malloc((size_t)n_q * sizeof *t10), *t32 = malloc((size_t)n_q * sizeof *t32);
    double *ts = malloc((size_t)n_q * sizeof *ts);
    int32_t *was_keep = malloc((size_t)H * sizeof *was_keep);
    if (!exact || !n_exact || !scratch || !mem || !t10 || !t32 || !ts || !was_keep)
        return 1;
    oml_near_ws w;
    oml_near_ws_init(&w, ix, 32, mem);
    for (int32_t i = 0; i < n_q; i++)
        for (int h = 0; h < H; h++)
            n_exact[i * H + h] = oml_index_topk(ix, h, Q + (size_t)i * he + (size_t)h * e, K, -1,
                                                NULL, exact + ((size_t)i * H + h) * K, scratch);
    for (int h = 0; h < H; h++)
        was_keep[h] = ix->hl[h].pq_keep;
    size_t bytes = 0;
    for (int h = 0; h < H; h++)
        bytes += (size_t)ix->hl[h].blk_start[ix->n_lists] * oml_pq4_block_bytes(&ix->hl[h].pq) +
                 (size_t)ix->hl[h].pq.m * OML_PQ4_K * OML_PQ4_DSUB * sizeof(float);
    printf("first pass by 4-bit product codes, %d queries, CPU medians, all heads; its codes "
           "and codebooks %.1f bytes a row (all heads)\n", (int)n_q, (double)bytes / ix->n);
    printf("%-22s %-22s %10s %10s %10s %10s\n", "first pass keeps", "lists scanned a head",
           "k=10 us", "cand32 us", "scan0 us", "recall@10");
    for (int s = 0; s < N_KEEPS; s++) {
        for (int h = 0; h < H; h++)
            ix->hl[h].pq_keep = KEEPS[s];
        oml_index_calibrate(ix, OML_IVF_TARGET_RECALL);
        long hits = 0, total = 0;
        int32_t crow[32];
        oml_neighbor got[K];
        for (int32_t i = 0; i < n_q; i++) {
            const float *q = Q + (size_t)i * he;
            double a = cpu_us();
            for (int h = 0; h < H; h++) {
                int32_t g = oml_index_topk_near(ix, h, q + (size_t)h * e, K, -1, -1, NULL, got,
                                                &w);
                const oml_neighbor *ex = exact + ((size_t)i * H + h) * K;
                for (int32_t u = 0; u < g; u++)
                    for (int32_t v = 0; v < n_exact[i * H + h]; v++)
                        hits += got[u].row == ex[v].row;
                total += n_exact[i * H + h];
            }
            double b = cpu_us();
            for (int h = 0; h < H; h++)
                oml_index_near_candidates(ix, h, q + (size_t)h * e, 32, -1, NULL, crow, &w);
            t32[i] = cpu_us() - b;
            /* head 0's scan alone, as a k = 10 search proposes it (its order taken first) */
            const oml_hlist *h0 = &ix->hl[0];
            int32_t lists = oml_hlist_order(h0, q, w.order, w.dots);
            int32_t np = h0->n_probe < lists ? h0->n_probe : lists;
            oml_hlist_keep keep;
            oml_hlist_keep_init(&keep, w.cand, w.cap,
                                h0->donor > 1 ? oml_index_rerank_rows(K) * h0->donor : 0, w.lows,
                                K);
            double c0 = cpu_us();
            oml_hlist_scan(h0, q, w.order, w.dots, np, -1, NULL, &keep);
            ts[i] = cpu_us() - c0;
            t10[i] = b - a; /* (the recall's count is in it: a few hundred compares) */
        }
        char lists[64];
        int at = 0;
        for (int h = 0; h < H && at < (int)sizeof lists - 16; h++)
            at += snprintf(lists + at, sizeof lists - (size_t)at,
                           ix->hl[h].pq_keep != KEEPS[s] ? "%d%s(k%d) " : "%d%s ",
                           ix->hl[h].n_probe, ix->hl[h].shared_from < 0 ? "" : "s",
                           (int)ix->hl[h].pq_keep); /* (k: the calibration doubled its keep) */
        double r = total ? (double)hits / (double)total : 1.0;
        double m10 = median(t10, n_q), m32 = median(t32, n_q), ms = median(ts, n_q);
        char name[32];
        snprintf(name, sizeof name, KEEPS[s] ? "%d rows" : "none (int8 scan)", (int)KEEPS[s]);
        printf("%-22s %-22s %10.0f %10.0f %10.0f %10.4f\n", name, lists, m10, m32, ms, r);
        printf("{\"items\":%d,\"pq_keep\":%d,\"n_probe0\":%d,\"near10_us\":%.0f,"
               "\"cand32_us\":%.0f,\"scan0_us\":%.0f,\"recall_at_10\":%.4f}\n", ix->n,
               (int)KEEPS[s], ix->hl[0].n_probe, m10, m32, ms, r);
        fflush(stdout);
    }
    for (int h = 0; h < H; h++)
        ix->hl[h].pq_keep = was_keep[h];
    oml_index_calibrate(ix, OML_IVF_TARGET_RECALL);
    free(exact);
    free(n_exact);
    free(scratch);
    free(mem);
    free(t10);
    free(t32);
    free(ts);
    free(was_keep);
    return 0;
}
