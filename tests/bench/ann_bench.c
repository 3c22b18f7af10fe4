/* ann_bench.c - `oml-ann-bench N [T] [--catalogue KIND]`: the index's
 * search at N items, in one process, without the daemon (issue 14).
 *
 * The catalogue of omld-bench --items N (catalogue.h; shifted unless
 * named) under the default preset's data-dependent start taken as omld
 * takes it (a sample of at most 32,768 labelled items), then T triplets
 * learned (default 40,000, about what omld-bench's freshness phase
 * teaches: the heads start equal and learning moves them apart), an index
 * with per-head lists built and calibrated; then omld-bench's 300 queries
 * (stored items with one feature raised by 1), each timed on this
 * thread's CPU clock (OpenBLAS held to this one thread), so a busy shared
 * machine moves the figures less than wall-clock latencies:
 *   build       embedding, lists, calibration (seconds)
 *   search      the lists' search for k = 10 and k = 32, all heads; a
 *               fresh view's 32 candidates per head by the codes alone
 *               (oml_index_near_candidates); the full scan (microseconds)
 *   re-embed    the candidates a fresh view re-embeds (k = 32 per head)
 *   recall@10   of the lists' search against the full scan, all heads
 *   exact 5     per head, the share of the exact 5 nearest among a fresh
 *               view's 32 candidates: what the daemon's recall sample
 *               measures (daemon/recall.c)
 *   exact k=5   before the lists: the scan of every row by the int8 codes
 *               first (codescan.h) against the float scan, all heads, and
 *               the rows the codes leave to re-rank (microseconds)
 * With --codes, then what shorter codes would keep (ann_codes.h; before
 * the lists, what they would leave an exact scan to re-rank: exact_bits.h).
 * With --pq, then the lists' search with and without the product codes'
 * first pass, each calibrated anew (ann_pq.h).
 * With --faiss, then the same queries on the same embeddings through
 * faiss's exact search and HNSW (ann_faiss.h; the Python faiss).
 * With --graph, then an HNSW graph per head against the lists, and both
 * after the model moves on (ann_graph.h; it learns more triplets).
 * With --sweep, then the lists calibrated for several targets in turn and
 * what the queries find at each (ann_sweep.h).
 * --model FILE: a daemon's model (omlctl export-model, or omld-bench with
 * OMLD_BENCH_MODEL_OUT=FILE) instead of T triplets learned here; with
 * --newer FILE, --sweep also serves that later model over this index.
 * Prints a readable report and, last, one JSON line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ann_codes.h"
#include "ann_faiss.h"
#include "ann_graph.h"
#include "ann_pq.h"
#include "ann_sweep.h"
#include "bench_util.h"
#include "exact_bits.h"
#include "catalogue.h"
#include "config.h"
#include "idx.h"
#include "index.h"
#include "learner.h"
#include "serve.h"
#include "store.h"

#define QUERIES 300
#define START_SAMPLE 32768

/* The exact scan (no lists yet), k = 5 as classify asks: by the codes
 * first and on the floats alone, all heads, each query's CPU time (the
 * same QUERIES queries as below; all by one way, then all by the other,
 * as a server answers by one way: the other's bytes do not evict it from
 * the cache); the mean and largest number of rows a head's codes leave to
 * re-rank; and whether both gave the same answers. *codes_us, *floats_us
 * get the medians. */
static void exact_scan_report(oml_index *ix, oml_snapshot *snap, const catalogue *c, float *x,
                              int bits, double *codes_us, double *floats_us)
{
    int H = ix->heads, e = ix->emb;
    size_t he = (size_t)H * (size_t)e;
    float *q = malloc(QUERIES * he * sizeof *q);
    float *scratch = malloc((size_t)ix->n * sizeof *scratch);
    int32_t cap = ix->n / 8;
    oml_hlist_hit *hits = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *hits);
    oml_neighbor *nb = malloc(2 * QUERIES * he / (size_t)e * 5 * sizeof *nb), lows[5];
    int32_t *cnt = malloc(2 * QUERIES * (size_t)H * sizeof *cnt);
    static double t[2][QUERIES];
    double kept = 0, kept_max = 0;
    oml_codescan *cs = ix->cs;
    *codes_us = *floats_us = 0;
    if (cs == NULL || !q || !scratch || !hits || !nb || !cnt)
        goto out;
    for (int i = 0; i < QUERIES; i++) {
        catalogue_query(c, i, x);
        oml_snapshot_embed(snap, x, 1, q + (size_t)i * he);
        for (int h = 0; h < H; h++) {
            oml_hlist_keep keep;
            oml_hlist_keep_init(&keep, hits, cap, 0, lows, 5);
            oml_codescan_scan(&cs[h], q + (size_t)i * he + (size_t)h * e, -1, NULL, &keep);
            int m = 0;
            for (int32_t j = 0; j < keep.cnt; j++)
                m += oml_hlist_keep_may(&keep, &hits[j]);
            kept += m;
            kept_max = m > kept_max ? m : kept_max;
        }
    }
    for (int way = 0; way < 2; way++) { /* 0: codes first, 1: floats alone */
        ix->cs = way == 0 ? cs : NULL;
        for (int i = 0; i < QUERIES; i++) {
            double t0 = cpu_us();
            for (int h = 0; h < H; h++) {
                size_t at = ((size_t)way * QUERIES + (size_t)i) * (size_t)H + (size_t)h;
                cnt[at] = oml_index_topk(ix, h, q + (size_t)i * he + (size_t)h * e, 5, -1, NULL,
                                         nb + at * 5, scratch);
            }
            t[way][i] = cpu_us() - t0;
        }
    }
    ix->cs = cs;
    size_t half = QUERIES * (size_t)H;
    int same = memcmp(cnt, cnt + half, half * sizeof *cnt) == 0;
    for (size_t at = 0; same && at < half; at++)
        same = memcmp(nb + at * 5, nb + (half + at) * 5, (size_t)cnt[at] * sizeof *nb) == 0;
    *codes_us = median(t[0], QUERIES);
    *floats_us = median(t[1], QUERIES);
    printf("exact scan, k=5, all heads, CPU median of %d: int8 codes first %.0f us, floats "
           "alone %.0f us; rows re-ranked a head: mean %.1f, max %.0f; answers %s\n", QUERIES,
           *codes_us, *floats_us, kept / QUERIES / H, kept_max, same ? "equal" : "DIFFER");
    if (bits && exact_bits_report(ix, 0, q, 100, 5) != 0)
        fprintf(stderr, "oml-ann-bench: --codes: out of memory\n");
out:
    free(q);
    free(scratch);
    free(hits);
    free(nb);
    free(cnt);
}

void ann_learn(oml_learner *l, const catalogue *c, int64_t n, int64_t T, uint64_t *rs_io)
{
    float *trip = malloc(3 * (size_t)c->dim * sizeof *trip);
    uint64_t rs = *rs_io;
    for (int64_t t = 0; trip && t < T; t++) { /* anchor, same label, other label */
        int64_t a, p, q;
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        a = (int64_t)((rs >> 20) % (uint64_t)n);
        do {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            p = (int64_t)((rs >> 20) % (uint64_t)n);
        } while (catalogue_label(c, p) != catalogue_label(c, a));
        do {
            rs = rs * 6364136223846793005ull + 1442695040888963407ull;
            q = (int64_t)((rs >> 20) % (uint64_t)n);
        } while (catalogue_label(c, q) == catalogue_label(c, a));
        catalogue_item(c, a, trip);
        catalogue_item(c, p, trip + c->dim);
        catalogue_item(c, q, trip + 2 * (size_t)c->dim);
        oml_learner_step(l, trip, trip + c->dim, trip + 2 * (size_t)c->dim, NULL);
    }
    free(trip);
    *rs_io = rs;
}

extern void openblas_set_num_threads(int);

/* A model as omlctl export-model writes it (a snapshot's encoding); NULL
 * and diag on an error. */
static oml_snapshot *model_from_file(const char *path, oml_diag *diag)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(diag->msg, sizeof diag->msg, "cannot open %s", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = len > 0 ? malloc((size_t)len) : NULL;
    oml_snapshot *snap = NULL;
    if (buf != NULL && fread(buf, 1, (size_t)len, f) == (size_t)len)
        (void)oml_snapshot_decode(&snap, buf, (size_t)len, diag);
    free(buf);
    fclose(f);
    return snap;
}

int main(int argc, char **argv)
{
    /* One BLAS thread, as the daemon's threads have: the figures are this
     * thread's CPU clock, which a helper thread's share would escape. */
    openblas_set_num_threads(1);
    int kind = CATALOGUE_SHIFTED;
    const char *model_file = NULL, *newer_file = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--model") == 0 || strcmp(argv[i], "--newer") == 0) {
            *(argv[i][2] == 'm' ? &model_file : &newer_file) = argv[i + 1];
            for (int j = i; j + 2 <= argc; j++) /* the pair taken out */
                argv[j] = argv[j + 2];
            argc -= 2;
            i--;
        }
    if (argc > 2 && strcmp(argv[argc - 2], "--catalogue") == 0) {
        kind = catalogue_kind(argv[argc - 1]);
        argc -= 2;
    }
    int64_t n = argc > 1 ? atoll(argv[1]) : 250000, T = argc > 2 ? atoll(argv[2]) : 40000;
    int codes = argc > 3 && strcmp(argv[3], "--codes") == 0;
    int graph = argc > 3 && strcmp(argv[3], "--graph") == 0;
    int pq = argc > 3 && strcmp(argv[3], "--pq") == 0;
    int with_faiss = argc > 3 && strcmp(argv[3], "--faiss") == 0;
    int sweep = argc > 3 && strcmp(argv[3], "--sweep") == 0;
    if (n < 1000 || n > 4000000 || T < 0 ||
        (argc > 3 && !codes && !graph && !pq && !with_faiss && !sweep) || argc > 4 ||
        kind < 0) {
        fprintf(stderr, "usage: oml-ann-bench [ITEMS in 1000..4000000 [TRIPLETS "
                        "[--codes | --graph | --pq | --faiss | --sweep]]] [--catalogue shifted|copies|noise] "
                        "[--model FILE [--newer FILE]]\n");
        return 2;
    }
    catalogue c = {.n = n, .kind = kind};
    oml_diag diag = {0};
    if (oml_fmnist_load(OML_FMNIST_DIR, &c.images, &c.labels, &c.n_images, &c.dim, &diag) != 0) {
        fprintf(stderr, "oml-ann-bench: %s\n", diag.msg);
        return 1;
    }
    oml_config cfg;
    oml_learner *l = NULL;
    oml_store *st = NULL;
    if (oml_config_preset(&cfg, "default", c.dim) != OML_OK ||
        oml_learner_create(&l, &cfg, &diag) != OML_OK ||
        oml_store_create(&st, c.dim, (uint32_t)n) != OML_OK) {
        fprintf(stderr, "oml-ann-bench: cannot set up: %s\n", diag.msg);
        return 1;
    }
    float *x = malloc((size_t)c.dim * sizeof *x);
    char id[32], lab[16];
    for (int64_t i = 0; i < n; i++) {
        catalogue_item(&c, i, x);
        snprintf(id, sizeof id, "s-%lld", (long long)i);
        snprintf(lab, sizeof lab, "%d", catalogue_label(&c, i));
        if (oml_store_put(st, id, strlen(id), x, lab, strlen(lab), NULL, &diag) != OML_OK) {
            fprintf(stderr, "oml-ann-bench: put: %s\n", diag.msg);
            return 1;
        }
    }
    int32_t ns = n < START_SAMPLE ? (int32_t)n : START_SAMPLE;
    float *X = malloc((size_t)ns * (size_t)c.dim * sizeof *X);
    int32_t *y = malloc((size_t)ns * sizeof *y);
    for (int32_t i = 0; i < ns; i++) { /* strided over the catalogue */
        int64_t at = (int64_t)i * n / ns;
        catalogue_item(&c, at, X + (size_t)i * (size_t)c.dim);
        y[i] = catalogue_label(&c, at);
    }
    if (model_file == NULL && oml_config_needs_data(&cfg) &&
        oml_learner_prepare(l, X, y, ns) != OML_OK) {
        fprintf(stderr, "oml-ann-bench: the start failed\n");
        return 1;
    }
    free(X);
    free(y);
    uint64_t rs = 12345;
    oml_snapshot *snap = NULL;
    if (model_file != NULL) { /* a daemon's (omlctl export-model) instead of T triplets */
        snap = model_from_file(model_file, &diag);
        T = 0;
    } else {
        ann_learn(l, &c, n, T, &rs);
        snap = oml_learner_snapshot(l, 1);
    }
    oml_index *ix = NULL;
    double t0 = now_s();
    if (snap == NULL || oml_index_build(&ix, snap, st) != OML_OK) {
        fprintf(stderr, "oml-ann-bench: index build failed\n");
        return 1;
    }
    double t1 = now_s(), xc = 0, xf = 0;
    exact_scan_report(ix, snap, &c, x, codes, &xc, &xf);
    double t1b = now_s(); /* the lists are timed from here */
    if (oml_index_add_lists(ix) != OML_OK) {
        fprintf(stderr, "oml-ann-bench: lists failed\n");
        return 1;
    }
    double t2 = now_s();
    oml_index_calibrate(ix, OML_IVF_TARGET_RECALL);
    double t3 = now_s();
    printf("items %lld, %lld triplets learned: embedded in %.2f s, lists (%d per head) in %.2f s, calibrated in %.2f s; "
           "lists scanned per head:", (long long)n, (long long)T, t1 - t0, ix->n_lists, t2 - t1b, t3 - t2);
    for (int hd = 0; hd < ix->heads; hd++)
        printf(" %d%s", ix->hl[hd].n_probe, ix->hl[hd].shared_from < 0 ? "" : " (head 0's)");
    printf("\n");

    int H = ix->heads, e = ix->emb;
    float *q = malloc((size_t)H * (size_t)e * sizeof *q);
    float *scratch = malloc((size_t)n * sizeof *scratch);
    void *mem = malloc(oml_near_ws_bytes(ix, 32));
    oml_near_ws w;
    oml_near_ws_init(&w, ix, 32, mem);
    oml_neighbor got[32], exact[10];
    static double t_near10[QUERIES], t_near32[QUERIES], t_exact[QUERIES], t_embed[QUERIES],
        t_cand32[QUERIES];
    long hits = 0, total = 0, hits5[OML_MAX_HEADS] = {0}, total5[OML_MAX_HEADS] = {0};
    int32_t cand[3 * 32];
    float *feats = malloc((size_t)3 * 32 * (size_t)c.dim * sizeof *feats);
    float *E = malloc((size_t)3 * 32 * (size_t)H * (size_t)e * sizeof *E);
    float *Q = malloc((size_t)QUERIES * (size_t)H * (size_t)e * sizeof *Q); /* for --codes */
    X = malloc((size_t)QUERIES * (size_t)c.dim * sizeof *X); /* their features, for --sweep */
    for (int i = 0; i < QUERIES; i++) {
        catalogue_query(&c, i, x);
        memcpy(X + (size_t)i * (size_t)c.dim, x, (size_t)c.dim * sizeof *x);
        oml_snapshot_embed(snap, x, 1, q);
        memcpy(Q + (size_t)i * (size_t)H * (size_t)e, q, (size_t)H * (size_t)e * sizeof *q);
        double a = cpu_us();
        for (int h = 0; h < H; h++)
            oml_index_topk_near(ix, h, q + (size_t)h * e, 10, -1, -1, NULL, got, &w);
        double b = cpu_us();
        int m = 0;
        for (int h = 0; h < H; h++) {
            int32_t g = oml_index_topk_near(ix, h, q + (size_t)h * e, 32, -1, -1, NULL, got, &w);
            for (int32_t j = 0; j < g && m < 3 * 32; j++)
                cand[m++] = got[j].row;
        }
        double cc = cpu_us();
        int32_t held[OML_MAX_HEADS][32], n_held[OML_MAX_HEADS]; /* for the check below */
        for (int h = 0; h < H; h++) /* what a fresh view asks for now: no exact re-rank */
            n_held[h] = oml_index_near_candidates(ix, h, q + (size_t)h * e, 32, -1, NULL, held[h],
                                                  &w);
        t_cand32[i] = cpu_us() - cc;
        cc = cpu_us();
        for (int h = 0; h < H; h++) {
            int32_t ne = oml_index_topk(ix, h, q + (size_t)h * e, 10, -1, NULL, exact, scratch);
            for (int32_t u = 0; u < ne && u < 5; u++) /* the daemon's recall sample: k 5 in 32 */
                for (int32_t v = 0; v < n_held[h]; v++)
                    hits5[h] += exact[u].row == held[h][v];
            total5[h] += ne < 5 ? ne : 5;
            int32_t g = oml_index_topk_near(ix, h, q + (size_t)h * e, 10, -1, -1, NULL, got, &w);
            for (int32_t u = 0; u < g; u++)
                for (int32_t v = 0; v < ne; v++)
                    hits += got[u].row == exact[v].row;
            total += ne;
        }
        double d = cpu_us();
        for (int j = 0; j < m; j++) /* a fresh view's candidates, re-embedded */
            memcpy(feats + (size_t)j * (size_t)c.dim, oml_store_features(st, ix->slots[cand[j]]),
                   (size_t)c.dim * sizeof *feats);
        oml_snapshot_embed(snap, feats, m, E);
        double f = cpu_us();
        t_near10[i] = b - a;
        t_near32[i] = cc - b;
        t_exact[i] = d - cc; /* the full scan plus one more near search: small against it */
        t_embed[i] = f - d;
    }
    if (codes && ann_codes_report(ix, 0, Q, 100) != 0)
        fprintf(stderr, "oml-ann-bench: --codes: out of memory\n");
    if (pq && ann_pq_report(ix, Q, QUERIES) != 0)
        fprintf(stderr, "oml-ann-bench: --pq: out of memory\n");
    oml_snapshot *newer = newer_file ? model_from_file(newer_file, &diag) : NULL;
    if (sweep) {
        static const double targets[] = {0.95, 0.96, 0.97, 0.98, 0.99};
        if (ann_sweep_report(ix, snap, &c, X, Q, QUERIES, targets, 5, st, newer) != 0)
            fprintf(stderr, "oml-ann-bench: --sweep: out of memory\n");
    }
    if (with_faiss && ann_faiss_report(ix, Q, QUERIES) != 0)
        fprintf(stderr, "oml-ann-bench: --faiss failed\n");
    double r = total ? (double)hits / (double)total : 1.0;
    double n10 = median(t_near10, QUERIES), n32 = median(t_near32, QUERIES);
    double ex = median(t_exact, QUERIES), em = median(t_embed, QUERIES);
    double c32 = median(t_cand32, QUERIES);
    printf("a fresh view's 32 candidates hold of the exact 5 (the daemon's recall sample), per "
           "head:");
    for (int h = 0; h < H; h++)
        printf(" %.4f", total5[h] ? (double)hits5[h] / (double)total5[h] : 1.0);
    printf("\n");
    printf("per query, CPU, median of %d: lists' search k=10 %.0f us, k=32 %.0f us (a fresh "
           "view's 32 candidates by the codes alone: %.0f us), full scan %.0f us; re-embedding "
           "96 candidates %.0f us; recall@10 %.4f\n", QUERIES, n10, n32, c32, ex, em, r);
    printf("{\"items\":%lld,\"lists\":%d,\"embed_s\":%.3f,\"lists_s\":%.3f,\"calibrate_s\":%.3f,"
           "\"near10_us\":%.0f,\"near32_us\":%.0f,\"cand32_us\":%.0f,\"exact_us\":%.0f,"
           "\"reembed_us\":%.0f,\"recall_at_10\":%.4f,\"exact5_codes_us\":%.0f,"
           "\"exact5_floats_us\":%.0f}\n", (long long)n, ix->n_lists, t1 - t0, t2 - t1b, t3 - t2,
           n10, n32, c32, ex, em, r, xc, xf);
    fflush(stdout);
    if (graph && ann_graph_report(l, snap, ix, st, &c, &rs) != 0)
        fprintf(stderr, "oml-ann-bench: --graph failed\n");
    free(Q);
    free(X);
    free(q);
    free(scratch);
    free(mem);
    free(feats);
    free(E);
    free(x);
    oml_index_destroy(ix);
    oml_snapshot_release(snap);
    oml_store_destroy(st);
    oml_learner_destroy(l);
    free(c.images);
    free(c.labels);
    return 0;
}
