/* ann_graph.c - `oml-ann-bench N T --graph` (see ann_graph.h). Every time
 * is this thread's CPU clock; recall is the share of each head's exact 10
 * nearest (the full scan under the model named) among the rows a search
 * returns, for candidates the share among the union of every head's
 * candidates, as a fresh view re-ranks that union (rerank.c). */
#include "ann_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "hgraph.h"

#define GQ 300
#define MAXH 8
#define CAND 32

static int env_int(const char *name, int dflt)
{
    const char *s = getenv(name);
    return s && *s ? atoi(s) : dflt;
}

/* Head h of ix as row-major (n, emb) rows. */
static float *head_rows(const oml_index *ix, int h)
{
    size_t n = (size_t)ix->n, e = (size_t)ix->emb;
    float *out = malloc(n * e * sizeof *out);
    if (out == NULL)
        return NULL;
    const float *cols = ix->emb_cols + (size_t)h * e * n;
    for (size_t r0 = 0; r0 < n; r0 += 256) /* blocks: both sides stay in cache */
        for (size_t j = 0; j < e; j++)
            for (size_t r = r0; r < n && r < r0 + 256; r++)
                out[r * e + j] = cols[j * n + r];
    return out;
}

/* Q (heads, GQ, emb) -> truth (GQ, heads, 10): each head's exact 10. */
static void exact_truth(const oml_index *ix, const float *Q, int32_t *truth)
{
    float *scratch = malloc((size_t)ix->n * sizeof *scratch);
    oml_neighbor nb[10];
    for (int i = 0; i < GQ; i++)
        for (int h = 0; h < ix->heads; h++) {
            const float *q = Q + ((size_t)h * GQ + (size_t)i) * (size_t)ix->emb;
            int32_t m = oml_index_topk(ix, h, q, 10, -1, NULL, nb, scratch);
            int32_t *t = truth + ((size_t)i * (size_t)ix->heads + (size_t)h) * 10;
            for (int j = 0; j < 10; j++)
                t[j] = j < m ? nb[j].row : -2;
        }
    free(scratch);
}

/* How many of head h's truth for query i lie among rows (m). */
static int found(const int32_t *truth, int H, int i, int h, const int32_t *rows, int m)
{
    const int32_t *t = truth + ((size_t)i * (size_t)H + (size_t)h) * 10;
    int hits = 0;
    for (int j = 0; j < 10; j++)
        for (int u = 0; u < m; u++)
            if (rows[u] == t[j]) {
                hits++;
                break;
            }
    return hits;
}

static const float *qrow(const float *Q, int h, int i, int e)
{
    return Q + ((size_t)h * GQ + (size_t)i) * (size_t)e;
}

/* The lists' fresh-view candidates (CAND per head, by the codes) of each
 * query under ix's model, against truth: recall over heads, median us. */
static double lists_cand(oml_index *ix, const float *Q, const int32_t *truth, double *us)
{
    int H = ix->heads, e = ix->emb;
    void *mem = malloc(oml_near_ws_bytes(ix, CAND));
    oml_near_ws w;
    oml_near_ws_init(&w, ix, CAND, mem);
    static double t[GQ];
    int32_t rows[MAXH * CAND];
    long hits = 0, tot = 0;
    for (int i = 0; i < GQ; i++) {
        int m = 0;
        double a = cpu_us();
        for (int h = 0; h < H; h++)
            m += oml_index_near_candidates(ix, h, qrow(Q, h, i, e), CAND, -1, NULL, rows + m, &w);
        t[i] = cpu_us() - a;
        for (int h = 0; h < H; h++, tot += 10)
            hits += found(truth, H, i, h, rows, m);
    }
    free(mem);
    *us = median(t, GQ);
    return (double)hits / (double)tot;
}

/* The graphs' search (gh heads, each its own graph, or head 0's graph for
 * every head when one): k per head with width ef, rows scored by vecs[h]
 * (NULL: the graph's own) and queries Q; recall of each head's truth
 * among its own k (union = 0) or among every head's (union = 1), over
 * heads hs .. H - 1 of truth. Median CPU us and mean rows scored. */
static double graph_run(oml_hgraph *g, int gh, int one, float **vecs, const float *Q, int H,
                        int e, const int32_t *truth, int k, int ef, int uni, double *us,
                        double *scored, oml_hgraph_ws *ws)
{
    static double t[GQ];
    oml_neighbor out[2048];
    int32_t rows[MAXH * 2048];
    long hits = 0, tot = 0;
    int64_t v0 = ws->visited;
    for (int i = 0; i < GQ; i++) {
        int m = 0;
        double a = cpu_us();
        for (int h = 0; h < (one ? 1 : gh); h++) {
            int32_t c = oml_hgraph_search(&g[h], vecs ? vecs[h] : NULL, qrow(Q, h, i, e), k, ef,
                                          -1, NULL, out, ws);
            for (int32_t j = 0; j < c; j++)
                rows[m + j] = out[j].row;
            if (!uni && !one) {
                hits += found(truth, H, i, h, rows + m, c);
                tot += 10;
            }
            m += c;
        }
        t[i] = cpu_us() - a;
        if (uni || one)
            for (int h = 0; h < (one ? H : gh); h++, tot += 10)
                hits += found(truth, H, i, h, rows, m);
    }
    *us = median(t, GQ);
    *scored = (double)(ws->visited - v0) / GQ;
    return (double)hits / (double)tot;
}

int ann_graph_report(oml_learner *l, oml_snapshot *snap, oml_index *ix, const oml_store *st,
                     const catalogue *c, uint64_t *rs)
{
    int H = ix->heads, e = ix->emb, n = ix->n;
    int M = env_int("OML_GRAPH_M", 16), efc = env_int("OML_GRAPH_EFC", 100);
    int gh = env_int("OML_GRAPH_HEADS", H);
    gh = gh < 1 ? 1 : gh > H ? H : gh;
    if (H > MAXH)
        return 1;
    float *x = malloc((size_t)c->dim * sizeof *x);
    float *X = malloc((size_t)GQ * (size_t)c->dim * sizeof *X);
    float *Q0 = malloc((size_t)H * GQ * (size_t)e * sizeof *Q0);
    float *Q1 = malloc((size_t)H * GQ * (size_t)e * sizeof *Q1);
    int32_t *T0 = malloc((size_t)GQ * (size_t)H * 10 * sizeof *T0);
    int32_t *T1 = malloc((size_t)GQ * (size_t)H * 10 * sizeof *T1);
    oml_hgraph g[MAXH];
    oml_hgraph_ws ws;
    memset(g, 0, sizeof g);
    if (!x || !X || !Q0 || !Q1 || !T0 || !T1 || oml_hgraph_ws_init(&ws, n, 2048) != OML_OK)
        return 1;
    for (int i = 0; i < GQ; i++) /* oml-ann-bench's queries */
        catalogue_query(c, i, X + (size_t)i * (size_t)c->dim);
    oml_snapshot_embed(snap, X, GQ, Q0);
    exact_truth(ix, Q0, T0);

    const char *dump = getenv("OML_GRAPH_DUMP"); /* head 0's rows, queries, truth: to compare */
    if (dump && *dump) {
        FILE *f = fopen(dump, "wb");
        float *V = head_rows(ix, 0);
        int32_t hdr[3] = {n, e, GQ};
        if (f && V) {
            fwrite(hdr, sizeof hdr, 1, f);
            fwrite(V, sizeof *V, (size_t)n * (size_t)e, f);
            fwrite(Q0, sizeof *Q0, (size_t)GQ * (size_t)e, f);
            for (int i = 0; i < GQ; i++)
                fwrite(T0 + (size_t)i * (size_t)H * 10, sizeof *T0, 10, f);
        }
        if (f)
            fclose(f);
        free(V);
    }
    printf("graph: HNSW M %d (level 0: %d links), ef_build %d, %d of %d heads\n", M, 2 * M, efc,
           gh, H);
    size_t gbytes = 0;
    for (int h = 0; h < gh; h++) {
        float *V = head_rows(ix, h);
        double a = cpu_us();
        if (V == NULL || oml_hgraph_init(&g[h], e, M, efc, 1 + (uint64_t)h) != OML_OK)
            return 1;
        for (int r = 0; r < n; r++)
            if (oml_hgraph_add(&g[h], V + (size_t)r * (size_t)e) != OML_OK)
                return 1;
        double b = cpu_us();
        free(V);
        gbytes += oml_hgraph_bytes(&g[h]);
        printf("  head %d built in %.1f s CPU, %.0f bytes a row (%d floats + links)\n", h,
               (b - a) * 1e-6, (double)oml_hgraph_bytes(&g[h]) / n, e);
        fflush(stdout);
    }
    double lus, lr = lists_cand(ix, Q0, T0, &lus);
    printf("lists, a fresh view's %d candidates per head (codes' order): %.0f us CPU, recall@10 "
           "%.4f\n", CAND, lus, lr);
    static const int efs[] = {16, 64, 256, 512, 1024, 2048};
    printf("graph search, own graph per head, %d heads, CPU median of %d queries:\n", gh, GQ);
    printf("  ef   | k=10: us  rows scored recall@10 | k=%d (ef max(ef,%d)): us  rows  recall (union)\n",
           CAND, CAND);
    for (size_t u = 0; u < sizeof efs / sizeof *efs; u++) {
        double us10, sc10, us32, sc32;
        double r10 = graph_run(g, gh, 0, NULL, Q0, H, e, T0, 10, efs[u], 0, &us10, &sc10, &ws);
        double r32 = graph_run(g, gh, 0, NULL, Q0, H, e, T0, CAND, efs[u], 1, &us32, &sc32, &ws);
        printf("  %4d | %7.0f %8.0f %9.4f | %7.0f %8.0f %9.4f\n", efs[u], us10, sc10, r10, us32,
               sc32, r32);
        printf("{\"graph_ef\":%d,\"k10_us\":%.0f,\"k10_scored\":%.0f,\"k10_recall\":%.4f,"
               "\"cand32_us\":%.0f,\"cand32_scored\":%.0f,\"cand32_recall\":%.4f}\n", efs[u],
               us10, sc10, r10, us32, sc32, r32);
    }
    printf("one graph (head 0's) for all %d heads: candidates k = ef, recall of each head's "
           "exact 10 among them (all heads):\n", H);
    static const int ones[] = {64, 256, 1024, 2048};
    for (size_t u = 0; u < sizeof ones / sizeof *ones; u++) {
        double us, sc, r = graph_run(g, 1, 1, NULL, Q0, H, e, T0, ones[u], ones[u], 1, &us, &sc,
                                     &ws);
        printf("  k = ef = %3d: %6.0f us, recall %.4f\n", ones[u], us, r);
    }

    /* Drift: the model moves on; the graph and the lists stay. */
    static const int64_t more[] = {10000, 30000};
    int64_t learned = 0;
    for (size_t u = 0; u < sizeof more / sizeof *more; u++) {
        ann_learn(l, c, c->n, more[u], rs);
        learned += more[u];
        oml_snapshot *s1 = oml_learner_snapshot(l, 2 + u);
        oml_index *ix1 = NULL;
        if (s1 == NULL || oml_index_build(&ix1, s1, st) != OML_OK || ix1->n != n)
            return 1;
        oml_snapshot_embed(s1, X, GQ, Q1);
        exact_truth(ix1, Q1, T1);
        long moved = 0;
        for (int i = 0; i < GQ; i++)
            for (int h = 0; h < H; h++)
                moved += found(T1, H, i, h, T0 + ((size_t)i * (size_t)H + (size_t)h) * 10, 10);
        printf("drift, %lld more triplets: the old model's exact 10 hold %.4f of the new's\n",
               (long long)learned, (double)moved / ((double)GQ * H * 10));
        double us;
        lr = lists_cand(ix, Q0, T1, &us);
        printf("  lists (old model), fresh view's %d per head re-ranked under the new: recall "
               "%.4f\n", CAND, lr);
        float *V1[MAXH] = {0};
        for (int h = 0; h < gh; h++)
            if ((V1[h] = head_rows(ix1, h)) == NULL)
                return 1;
        static const int defs[] = {256, 1024};
        for (size_t v = 0; v < sizeof defs / sizeof *defs; v++) {
            double sc, ro = graph_run(g, gh, 0, NULL, Q0, H, e, T1, CAND, defs[v], 1, &us, &sc,
                                      &ws);
            double rn = graph_run(g, gh, 0, V1, Q1, H, e, T1, CAND, defs[v], 1, &us, &sc, &ws);
            double rn10 = graph_run(g, gh, 0, V1, Q1, H, e, T1, 10, defs[v], 0, &us, &sc, &ws);
            printf("  graph ef %3d: old rows, %d per head re-ranked under the new %.4f; old "
                   "links routed on the new rows: %d per head %.4f, k=10 %.4f\n", defs[v], CAND,
                   ro, CAND, rn, rn10);
            printf("{\"drift_triplets\":%lld,\"graph_ef\":%d,\"old_rows_cand32\":%.4f,"
                   "\"new_rows_cand32\":%.4f,\"new_rows_k10\":%.4f,\"lists_cand32\":%.4f}\n",
                   (long long)learned, defs[v], ro, rn, rn10, lr);
        }
        fflush(stdout);
        for (int h = 0; h < gh; h++)
            free(V1[h]);
        oml_index_destroy(ix1);
        oml_snapshot_release(s1);
    }
    printf("{\"graph_M\":%d,\"graph_efc\":%d,\"graph_bytes_per_row_head\":%.0f}\n", M, efc,
           (double)gbytes / gh / n);
    for (int h = 0; h < gh; h++)
        oml_hgraph_free(&g[h]);
    oml_hgraph_ws_free(&ws);
    free(x);
    free(X);
    free(Q0);
    free(Q1);
    free(T0);
    free(T1);
    return 0;
}
