/* ann_sweep.c - `oml-ann-bench N T --sweep` (see ann_sweep.h). */
#include "ann_sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "exact_recall.h"
#include "rerank.h"
#include "serve.h"
#include "store.h"
#include "learner.h"

#define K 10
#define CAND 32 /* a fresh view's candidates a head for a retrieve of 10 (daemon/fresh.c) */
#define DEEP (2 * CAND) /* and twice as many, against the newer model's drift */

/* Of each head's truth (nq, heads, K), the share among rows (m). */
static long found(const oml_neighbor *truth, int32_t nt, const int32_t *rows, int32_t m)
{
    long hits = 0;
    for (int32_t i = 0; i < nt; i++)
        for (int32_t j = 0; j < m; j++)
            hits += truth[i].row == rows[j];
    return hits;
}

/* Of the exact answer want (K item numbers, -1 past the items), how many
 * the hits (index rows) hold. */
static long hits_found(const oml_index *ix, const int64_t *want, const oml_hit *hits, int32_t nh,
                       long *total)
{
    long found_n = 0;
    for (int32_t u = 0; u < K; u++) {
        for (int32_t v = 0; want[u] >= 0 && v < nh; v++)
            found_n += (int64_t)ix->slots[hits[v].row] == want[u];
        *total += want[u] >= 0;
    }
    return found_n;
}

/* A fresh view of snap_new over ix: oml_rerank_candidates' rows (the index
 * model's) re-ranked under snap_new by oml_retrieve_among, as
 * daemon/fresh.c answers a retrieve. */
static int32_t fresh_retrieve(const oml_index *ix, const oml_store *st, oml_snapshot *snap_new,
                              const float *x, int32_t k_c, oml_hit *hits)
{
    static int32_t rows[OML_MAX_HEADS * DEEP];
    static float feats[OML_MAX_HEADS * DEEP * 1024];
    int32_t m = 0, nh = 0;
    size_t dim = (size_t)ix->snap->cfg.dim;
    oml_diag d = {0};
    if (dim > 1024 || oml_rerank_candidates(ix, x, k_c, -1, NULL, rows, &m, &d) != OML_OK)
        return 0;
    for (int32_t j = 0; j < m; j++)
        memcpy(feats + (size_t)j * dim, oml_store_features(st, ix->slots[rows[j]]),
               dim * sizeof *feats);
    oml_rerank_set set = {.rows = rows, .feats = feats, .m = m};
    if (oml_retrieve_among(ix, snap_new, x, K, &set, NULL, hits, &nh, &d) != OML_OK)
        return 0;
    return nh;
}

int ann_sweep_report(oml_index *ix, oml_snapshot *snap, const catalogue *c, const float *X,
                     const float *Q, int nq, const double *targets, int nt,
                     const oml_store *st, oml_snapshot *snap_new)
{
    int64_t *want = malloc((size_t)nq * K * sizeof *want);
    int64_t *want_new = snap_new ? malloc((size_t)nq * K * sizeof *want_new) : NULL;
    if (want == NULL || exact_retrieve(snap, c, X, nq, K, NULL, want) != 0)
        return 1;
    if (snap_new && (want_new == NULL || exact_retrieve(snap_new, c, X, nq, K, NULL, want_new) != 0))
        return 1;
    if (snap_new) { /* how far the newer model moved the answers */
        long same = 0, total = 0;
        for (int i = 0; i < nq; i++)
            for (int u = 0; u < K; u++)
                for (int v = 0; v < K; v++)
                    same += want[i * K + u] >= 0 && want[i * K + u] == want_new[i * K + v];
        for (int i = 0; i < nq * K; i++)
            total += want_new[i] >= 0;
        printf("the newer model (version %llu, the index's %llu): the older's exact retrieve "
               "answers hold %.4f of its own\n", (unsigned long long)snap_new->version,
               (unsigned long long)snap->version, total ? (double)same / (double)total : 1.0);
    }
    int H = ix->heads;
    size_t e = (size_t)ix->emb;
    oml_neighbor *truth = malloc((size_t)nq * (size_t)H * K * sizeof *truth);
    int32_t *n_truth = malloc((size_t)nq * (size_t)H * sizeof *n_truth);
    float *scratch = malloc((size_t)ix->n * sizeof *scratch);
    void *mem = malloc(oml_near_ws_bytes(ix, CAND));
    if (truth == NULL || n_truth == NULL || scratch == NULL || mem == NULL)
        return 1;
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < H; h++)
            n_truth[i * H + h] = oml_index_topk(ix, h, Q + ((size_t)i * H + h) * e, K, -1, NULL,
                                                truth + ((size_t)i * H + h) * K, scratch);
    oml_near_ws w;
    oml_near_ws_init(&w, ix, CAND, mem);
    printf("sweep of ann_target_recall over %d queries: per head the lists scanned (the "
           "calibration's sample recall), the lists' k=10 and a fresh view's %d candidates "
           "a head (their union re-ranked exactly): recall of each head's exact 10\n", nq, CAND);
    for (int t = 0; t < nt; t++) {
        oml_index_calibrate_threads(ix, targets[t], 2);
        long hit10 = 0, hitc = 0, tot = 0, hitr = 0, totr = 0, hitf[2] = {0}, totf[2] = {0};
        double us = 0;
        for (int i = 0; i < nq; i++) {
            oml_neighbor got[CAND];
            int32_t rows[OML_MAX_HEADS * CAND], m = 0;
            double a = cpu_us();
            for (int h = 0; h < H; h++) {
                int32_t g = oml_index_topk_near(ix, h, Q + ((size_t)i * H + h) * e, K, -1, -1,
                                                NULL, got, &w);
                int32_t r[K];
                for (int32_t j = 0; j < g; j++)
                    r[j] = got[j].row;
                hit10 += found(truth + ((size_t)i * H + h) * K, n_truth[i * H + h], r, g);
                tot += n_truth[i * H + h];
            }
            /* the union a fresh view re-ranks (the query embedded again) */
            if (oml_rerank_candidates(ix, X + (size_t)i * (size_t)c->dim, CAND, -1, NULL, rows,
                                      &m, NULL) != OML_OK)
                m = 0;
            us += cpu_us() - a;
            oml_hit hits[K];
            int32_t nh = 0;
            oml_diag d = {0};
            if (oml_retrieve(ix, X + (size_t)i * (size_t)c->dim, K, -1, NULL, hits, &nh, &d) != OML_OK)
                nh = 0;
            hitr += hits_found(ix, want + (size_t)i * K, hits, nh, &totr);
            for (int f = 0; snap_new && f < 2; f++) {
                nh = fresh_retrieve(ix, st, snap_new, X + (size_t)i * (size_t)c->dim,
                                    f ? DEEP : CAND, hits);
                hitf[f] += hits_found(ix, want_new + (size_t)i * K, hits, nh, &totf[f]);
            }
            /* Each head's exact 10 among the union: the union holds them
             * iff its exact re-rank finds them. */
            for (int h = 0; h < H; h++)
                hitc += found(truth + ((size_t)i * H + h) * K, n_truth[i * H + h], rows, m);
        }
        printf("  target %.3f:", targets[t]);
        for (int h = 0; h < H; h++)
            printf(" %d%s (%.3f)", ix->hl[h].n_probe, ix->hl[h].shared_from < 0 ? "" : "s",
                   (double)ix->hl[h].recall);
        printf("; k=10 %.4f, candidates %.4f; both %.0f us a query (CPU, mean); retrieve "
               "recall@10 %.4f\n", tot ? (double)hit10 / (double)tot : 1.0,
               tot ? (double)hitc / (double)tot : 1.0, us / nq,
               totr ? (double)hitr / (double)totr : 1.0);
        if (snap_new)
            printf("    the newer model re-ranking the candidates (a fresh view), its "
                   "retrieve recall@10: %d a head %.4f, %d a head %.4f\n", CAND,
                   totf[0] ? (double)hitf[0] / (double)totf[0] : 1.0, DEEP,
                   totf[1] ? (double)hitf[1] / (double)totf[1] : 1.0);
        fflush(stdout);
    }
    free(want);
    free(want_new);
    free(truth);
    free(n_truth);
    free(scratch);
    free(mem);
    return 0;
}
