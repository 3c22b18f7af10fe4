/* serve_batch.c - many classify or retrieve queries answered together
 * (serve.h, "batches"; issues 14 and 15).
 *
 * DESIGN: one query reads every head's (emb, n) block of the index once
 * (an sgemv): at 35,000 items that is 27 MB per query, so single queries
 * are bound by memory bandwidth. A batch reads each block of rows once for
 * a block of queries instead: dots (b, rows) = Q_h (b, emb) E_h (emb, rows),
 * one sgemm per head and block of RB rows, which is bound by compute. The
 * scratch is bounded whatever n is: dots holds QB x RB floats (2 MiB), and
 * the neighbours of a block of queries at most NB_BUDGET (or one query's).
 *
 * Exactness: the answers equal the single path's bit for bit.
 * (1) Each query is embedded by its own one-row oml_snapshot_embed call, as
 *     oml_classify does. A batched forward pass would round differently in
 *     the last bit (OpenBLAS takes another kernel for more than three rows)
 *     and could swap two neighbours at nearly equal distances; the one-row
 *     calls cost 1.6 ms per 100 queries against 0.5 ms at 35,000 items,
 *     a few percent of the batch.
 * (2) GEMM dot products only pre-select neighbours: oml_index_sel keeps
 *     every row within a proven margin of the k-th best and recomputes the
 *     distances canonically in double (index.c), carrying its threshold
 *     from block to block, so the k nearest by (distance, row) are those of
 *     the single scan, exact ties included.
 * (3) Voting and ranking are serve.c's own (oml__vote, oml__retrieve_page).
 * An index with inverted lists answers each query by the single path.
 *
 * Pure over immutable inputs; any thread. Two allocations per call (the
 * search's block and the answers' workspace), freed before returning. */
#include "serve.h"
#include "serve_int.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QB OML_SERVE_BATCH_QUERIES /* queries per block */
#define RB 4096                    /* index rows per GEMM */
#define NB_BUDGET (1u << 18)       /* neighbour slots (heads x ranked) of a block of queries */

/* What a batch asks for, by kind. */
typedef struct batch_job {
    const oml_index *ix;
    const oml_query *q;
    int32_t m;
    int retrieve;             /* ranked = offset + k, and opts->allow applies */
    /* Answer query i from its embedding qe (heads, emb) and its neighbours
     * nb (heads, ranked) with cnt per head; ws is the kind's workspace. */
    void (*answer)(const struct batch_job *j, int32_t i, const float *qe, const oml_neighbor *nb,
                   const int32_t *cnt, int32_t ranked, void *ws);
    void *out;                /* oml_classification (m) or oml_hit *const (m) */
    int32_t *n_out;           /* retrieve: (m) */
} batch_job;

static int32_t ranked_of(const batch_job *j, int32_t i)
{
    const oml_query *q = &j->q[i];
    return q->k + (j->retrieve && q->opts ? q->opts->offset : 0);
}

/* Every query checked as its single call would check it; the first bad
 * one's field gets its place in front, "queries[3].k". */
static int check_all(const batch_job *j, oml_diag *diag)
{
    if (j->ix == NULL || j->m < 0 || (j->m > 0 && (j->q == NULL || j->out == NULL)))
        return oml_diag_set(diag, OML_EINVAL, "queries", "no index, queries or answers");
    for (int32_t i = 0; i < j->m; i++) {
        const oml_query *q = &j->q[i];
        oml_diag d = {0};
        int rc = oml__check_query(j->ix, q->x, q->k, q->exclude_row, &d);
        if (rc == OML_OK && j->retrieve)
            rc = oml__check_offset(q->opts ? q->opts->offset : 0, q->k, &d);
        if (rc == OML_OK)
            rc = oml__check_columns(j->ix, j->retrieve && q->opts ? q->opts->src : NULL, &d);
        if (rc != OML_OK) {
            char field[sizeof d.field];
            snprintf(field, sizeof field, "queries[%d].%.24s", (int)i, d.field);
            return oml_diag_set(diag, rc, field, "query %d: %s", (int)i, d.msg);
        }
    }
    return OML_OK;
}

/* The next block of queries from i0: up to QB, and past the first only
 * while their neighbour slots stay within NB_BUDGET. */
static int32_t block_end(const batch_job *j, int32_t i0, size_t *slots)
{
    size_t H = (size_t)j->ix->heads, s = 0;
    int32_t i = i0;
    while (i < j->m && i - i0 < QB) {
        size_t need = H * (size_t)ranked_of(j, i);
        if (i > i0 && s + need > NB_BUDGET)
            break;
        s += need;
        i++;
    }
    *slots = s;
    return i;
}

/* The search of one block of queries [i0, i1) against every row. */
static int search_block(const batch_job *j, int32_t i0, int32_t i1, float *Q, float *dots,
                        oml_index_sel *sel, oml_neighbor *approx, oml_neighbor *best,
                        int32_t *cnt, void *ws)
{
    const oml_index *ix = j->ix;
    size_t H = (size_t)ix->heads, e = (size_t)ix->emb, n = (size_t)ix->n, he = H * e;
    int32_t b = i1 - i0;
    size_t at = 0;
    for (int32_t i = 0; i < b; i++) {
        const oml_query *q = &j->q[i0 + i];
        int rc = oml_snapshot_embed(ix->snap, q->x, 1, Q + (size_t)i * he); /* (heads, emb) */
        if (rc != OML_OK)
            return rc;
        size_t r = (size_t)ranked_of(j, i0 + i);
        for (size_t h = 0; h < H; h++, at += r)
            oml_index_sel_init(&sel[(size_t)i * H + h], (int32_t)r, approx + at, best + at);
    }
    for (size_t r0 = 0; r0 < n; r0 += RB) {
        size_t rb = n - r0 < RB ? n - r0 : RB;
        for (size_t h = 0; h < H; h++) {
            /* dots (b, rb) = Q_h (b, emb; rows he apart) . E_h[:, r0 .. r0 + rb) (emb, rb). */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, (int)rb, (int)e, 1.0f,
                        Q + h * e, (int)he, ix->emb_cols + h * e * n + r0, (int)n, 0.0f, dots,
                        (int)rb);
            for (int32_t i = 0; i < b; i++) {
                const oml_query *q = &j->q[i0 + i];
                const uint8_t *allow = j->retrieve && q->opts ? q->opts->allow : NULL;
                oml_index_sel_feed(ix, (int)h, Q + (size_t)i * he + h * e, dots + (size_t)i * rb,
                                   (int32_t)r0, (int32_t)rb, q->exclude_row, allow,
                                   &sel[(size_t)i * H + h]);
            }
        }
    }
    for (int32_t i = 0; i < b; i++) {
        for (size_t h = 0; h < H; h++)
            cnt[h] = oml_index_sel_finish(&sel[(size_t)i * H + h]);
        /* Query i's best heaps are consecutive: (heads, ranked), as the single path's. */
        j->answer(j, i0 + i, Q + (size_t)i * he, sel[(size_t)i * H].best, cnt,
                  ranked_of(j, i0 + i), ws);
    }
    return OML_OK;
}

/* The exact-scan driver: blocks of queries, each searched with GEMMs over
 * blocks of rows; ws is the kind's workspace, handed to its answer. */
static int run_exact(const batch_job *j, void *ws)
{
    size_t H = (size_t)j->ix->heads, e = (size_t)j->ix->emb, max_slots = 0, slots;
    for (int32_t i0 = 0, i1; i0 < j->m; i0 = i1) {
        i1 = block_end(j, i0, &slots);
        max_slots = slots > max_slots ? slots : max_slots;
    }
    /* Layout, largest alignment first: approx | best (max_slots neighbours
     * each) | selections (QB, heads) | dots (QB, RB) | embeddings (QB,
     * heads, emb) | counts (heads). */
    size_t bytes = 2 * max_slots * sizeof(oml_neighbor) + QB * H * sizeof(oml_index_sel) +
                   ((size_t)QB * RB + QB * H * e) * sizeof(float) + H * sizeof(int32_t);
    char *blk = malloc(bytes);
    if (blk == NULL)
        return OML_ENOMEM;
    oml_neighbor *approx = (oml_neighbor *)(void *)blk, *best = approx + max_slots;
    oml_index_sel *sel = (oml_index_sel *)(void *)(best + max_slots);
    float *dots = (float *)(void *)(sel + QB * H), *Q = dots + (size_t)QB * RB;
    int32_t *cnt = (int32_t *)(void *)(Q + QB * H * e);
    int rc = OML_OK;
    for (int32_t i0 = 0, i1; i0 < j->m && rc == OML_OK; i0 = i1) {
        i1 = block_end(j, i0, &slots);
        rc = search_block(j, i0, i1, Q, dots, sel, approx, best, cnt, ws);
    }
    free(blk);
    return rc;
}

/* The largest k (ranked, for retrieve) of the batch, times the heads: the
 * neighbours one query's answer reads. */
static size_t max_votes(const batch_job *j)
{
    size_t v = 0;
    for (int32_t i = 0; i < j->m; i++)
        v = (size_t)ranked_of(j, i) > v ? (size_t)ranked_of(j, i) : v;
    return v * (size_t)j->ix->heads;
}

/* ------------------------------------------------------------ classify */

static void classify_answer(const batch_job *j, int32_t i, const float *qe,
                            const oml_neighbor *nb, const int32_t *cnt, int32_t ranked, void *ws)
{
    (void)qe;
    const oml_index *ix = j->ix;
    oml_classification *out = (oml_classification *)j->out + i;
    oml__voter vt = {ix->heads, ix->snap->alpha, ix->labels};
    int32_t label;
    if (oml__vote(&vt, nb, cnt, ranked, ws, &label, out) != OML_OK)
        *out = (oml_classification){.label = OML_LABEL_NONE}; /* oml_classify's OML_EEMPTY */
}

int oml_classify_batch(const oml_index *ix, const oml_query *q, int32_t m,
                       oml_classification *out, oml_diag *diag)
{
    batch_job j = {ix, q, m, 0, classify_answer, out, NULL};
    int rc = check_all(&j, diag);
    if (rc != OML_OK || m == 0)
        return rc;
    if (ix->n == 0 || ix->n_lists > 0) { /* nothing to scan, or the lists' own search */
        for (int32_t i = 0; i < m && rc == OML_OK; i++) {
            rc = oml_classify(ix, q[i].x, q[i].k, q[i].exclude_row, &out[i], diag);
            if (rc == OML_EEMPTY) {
                out[i] = (oml_classification){.label = OML_LABEL_NONE};
                rc = OML_OK;
            }
        }
        return rc;
    }
    size_t nl = (size_t)ix->n_labels, votes = max_votes(&j);
    void *mem = malloc(oml__vote_ws_bytes(nl, votes));
    if (mem == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "", "classify batch workspace");
    vote_ws vw;
    oml__vote_ws_init(&vw, mem, nl, votes);
    rc = run_exact(&j, &vw);
    free(mem);
    return rc == OML_OK ? rc : oml_diag_set(diag, rc, "", "classify batch workspace");
}

/* ------------------------------------------------------------ retrieve */

static void retrieve_answer(const batch_job *j, int32_t i, const float *qe,
                            const oml_neighbor *nb, const int32_t *cnt, int32_t ranked, void *ws)
{
    const oml_query *q = &j->q[i];
    oml_hit *const *out = j->out;
    j->n_out[i] = oml__retrieve_page(j->ix, qe, nb, cnt, ranked, q->opts, q->k, ws, out[i]);
}

int oml_retrieve_batch(const oml_index *ix, const oml_query *q, int32_t m, oml_hit *const *out,
                       int32_t *n_out, oml_diag *diag)
{
    batch_job j = {ix, q, m, 1, retrieve_answer, (void *)out, n_out};
    int rc = check_all(&j, diag);
    if (rc == OML_OK && m > 0 && n_out == NULL)
        rc = oml_diag_set(diag, OML_EINVAL, "queries", "no answer counts");
    if (rc != OML_OK || m == 0)
        return rc;
    if (ix->n == 0 || ix->n_lists > 0) {
        for (int32_t i = 0; i < m && rc == OML_OK; i++)
            rc = oml_retrieve(ix, q[i].x, q[i].k, q[i].exclude_row, q[i].opts, out[i], &n_out[i],
                              diag);
        return rc;
    }
    pool_hit *pool = malloc(max_votes(&j) * sizeof *pool);
    if (pool == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "", "retrieve batch workspace");
    rc = run_exact(&j, pool);
    free(pool);
    return rc == OML_OK ? rc : oml_diag_set(diag, rc, "", "retrieve batch workspace");
}
