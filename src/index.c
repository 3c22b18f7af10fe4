/* index.c - exact kNN over every live item embedded under one snapshot.
 *
 * DESIGN: an index is built by index_build.c and immutable afterwards, so
 * queries on any thread read it without locks. Everything except the
 * struct lives in one arena: pointer tables first, then the slot and label
 * columns and finally the copied id and label-name bytes; the embeddings
 * (heads, emb, n) are the builder's buffer, handed over (_cols).
 *
 * Search is exact and its result does not depend on how the dot products
 * were computed. BLAS (sgemv here, sgemm in serve_batch.c) rounds
 * differently for different shapes, so its dot products only *pre-select*
 * candidates: every row within a proven error margin of the k-th best BLAS
 * dot product is kept, and the final distances come from one fixed-order
 * double-precision cosine (oml_index_dist). Single and batch queries
 * therefore return bit-identical neighbours. Invariants: rows are in
 * ascending slot order; results are ordered by (distance, row). */
#include "index.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "parallel.h"

/* |BLAS dot - cosine| for rows normalised in float is at most about
 * emb * 2^-24 (summation) plus the rows' norm deviation from 1 (of the same
 * order). The margin covers that on both sides of the argument plus the
 * rounding of D to float, with a factor of two to spare. Zero rows (a head
 * that maps an item to z = 0) have dot = cosine = 0 exactly. */
static float dot_margin(int32_t emb)
{
    return 4.0f * (float)(emb + 4) * FLT_EPSILON;
}

/* oml_index_dist with b's values `stride` floats apart (a column of an
 * index's (emb, n) layout: stride n). */
static float dist_strided(const float *a, const float *b, size_t stride, int32_t emb)
{
    /* OAHU Eq. 6 on the unit sphere: D = sqrt(2 - 2 cos). The cosine is taken
     * in double with the actual norms, so identical rows give D = 0 instead of
     * the 1e-4 that float normalisation error would leave in 2 - 2 a.b, and the
     * value does not depend on how a BLAS routine ordered its sums. */
    double ab = 0.0, aa = 0.0, bb = 0.0;
    for (int32_t i = 0; i < emb; i++) {
        double bi = (double)b[(size_t)i * stride];
        ab += (double)a[i] * bi;
        aa += (double)a[i] * (double)a[i];
        bb += bi * bi;
    }
    double cs = aa > 0.0 && bb > 0.0 ? ab / sqrt(aa * bb) : 0.0;
    double d2 = 2.0 - 2.0 * (cs < 1.0 ? cs : 1.0);
    return (float)sqrt(d2 > 0.0 ? d2 : 0.0);
}

float oml_index_dist(const float *a, const float *b, int32_t emb)
{
    return dist_strided(a, b, 1, emb);
}

/* (dist, row) ordering: is a worse (farther, or as far with a larger row) than b? */
static int nb_worse(const oml_neighbor *a, const oml_neighbor *b)
{
    return a->dist > b->dist || (a->dist == b->dist && a->row > b->row);
}

/* Max-heap on nb_worse: h[0] is the worst kept neighbour. */
static void nb_sift_down(oml_neighbor *h, int32_t cnt, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < cnt && nb_worse(&h[l], &h[w]))
            w = l;
        if (r < cnt && nb_worse(&h[r], &h[w]))
            w = r;
        if (w == i)
            return;
        oml_neighbor t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void nb_sift_up(oml_neighbor *h, int32_t i)
{
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!nb_worse(&h[i], &h[p]))
            return;
        oml_neighbor t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

/* Does any of dots[0 .. 32) reach t? Without a branch, so it vectorises:
 * once the k best so far are known almost no row does, and a scan skips 32
 * rows at a time. */
static int any_at_least(const float *dots, float t)
{
    int any = 0;
    for (int32_t i = 0; i < 32; i++)
        any |= dots[i] >= t;
    return any;
}

#define SEL_SEG 4096 /* rows per segment of pass 1: its chunk list is on the stack */

/* Pass 1 of a selection, O(m log k). dots[j] belongs to row row0 + j; rows that are `exclude` or that allow
 * (NULL: all) refuses are skipped. It keeps the k largest approximate dot
 * products seen so far in a min-heap (s->approx[].dist); once that is
 * full, s->thr is its smallest minus the margin, and no row below thr can
 * be among the exact k nearest. It compacts every row that may still be
 * into the front of dots (row numbers stored bitwise) and returns how
 * many. Segment by segment: (a) the heap, noting every chunk of 32 rows
 * with a value at or above thr as it was (all others are below every later
 * thr); (b) of the noted chunks, the rows at or above thr as (a) left it.
 * Judging rows after their segment rather than as they come keeps about k
 * candidates instead of about k ln(m / k) (every row that entered the
 * heap); thr only rises, so the rows kept are a superset of the final
 * candidates {a_j >= t_k - margin}. dots[j] is read before slot j can be
 * overwritten because the write index never passes the read index. */
static int32_t sel_pass1(oml_index_sel *s, float margin, float *dots, int32_t row0, int32_t m, int32_t exclude, const uint8_t *allow)
{
    int32_t k = s->k, cand = 0;
    oml_neighbor *ap = s->approx;
    int32_t chunks[SEL_SEG / 32];
    for (int32_t j0 = 0; j0 < m; j0 += SEL_SEG) {
        int32_t j1 = m - j0 < SEL_SEG ? m : j0 + SEL_SEG, nc = 0;
        for (int32_t c = j0; c < j1; c += 32) {
            int32_t c1 = j1 - c < 32 ? j1 : c + 32;
            if (c1 - c == 32 && !any_at_least(dots + c, s->thr))
                continue;
            chunks[nc++] = c;
            for (int32_t j = c; j < c1; j++) {
                float a = dots[j];
                int32_t row = row0 + j;
                if ((s->filled == k && !(a > ap[0].dist)) || row == exclude ||
                    (allow && !allow[row]))
                    continue;
                if (s->filled < k) {
                    ap[s->filled].dist = a;
                    oml_minheap_up(ap, s->filled++);
                } else {
                    ap[0].dist = a;
                    oml_minheap_down(ap, s->filled, 0);
                }
                if (s->filled == k)
                    s->thr = ap[0].dist - margin;
            }
        }
        for (int32_t i = 0; i < nc; i++) {
            int32_t c = chunks[i], c1 = j1 - c < 32 ? j1 : c + 32;
            for (int32_t j = c; j < c1; j++) {
                float a = dots[j];
                int32_t row = row0 + j;
                if (!(a >= s->thr) || row == exclude || (allow && !allow[row]))
                    continue;
                uint32_t r = (uint32_t)row;
                memcpy(&dots[cand++], &r, sizeof r);
            }
        }
    }
    return cand;
}

/* Pass 2: canonical distances of the cand candidates pass 1 left in dots,
 * into the bounded max-heap s->best ordered by (distance, row), whatever
 * order the candidates come in. */
static void sel_pass2(const oml_index *ix, int head, const float *q, oml_index_sel *s,
                      const float *dots, int32_t cand)
{
    int32_t n = ix->n, e = ix->emb;
    const float *Et = ix->emb_cols + (size_t)head * (size_t)n * (size_t)e;
    oml_neighbor *out = s->best;
    for (int32_t c = 0; c < cand; c++) {
        uint32_t r;
        memcpy(&r, &dots[c], sizeof r);
        oml_neighbor nb = {(int32_t)r, dist_strided(q, Et + r, (size_t)n, e)};
        if (s->cnt < s->k) {
            out[s->cnt] = nb;
            nb_sift_up(out, s->cnt++);
        } else if (nb_worse(&out[0], &nb)) {
            out[0] = nb;
            nb_sift_down(out, s->cnt, 0);
        }
    }
}

void oml_index_sel_init(oml_index_sel *s, int32_t k, oml_neighbor *approx, oml_neighbor *best)
{
    *s = (oml_index_sel){.approx = approx, .best = best, .k = k, .thr = -INFINITY};
}

void oml_index_sel_feed(const oml_index *ix, int head, const float *q, float *dots, int32_t row0,
                        int32_t m, int32_t exclude, const uint8_t *allow, oml_index_sel *s)
{
    if (s->k <= 0 || m <= 0)
        return;
    int32_t cand = sel_pass1(s, dot_margin(ix->emb), dots, row0, m, exclude, allow);
    sel_pass2(ix, head, q, s, dots, cand);
}

int32_t oml_index_sel_finish(oml_index_sel *s)
{
    /* Heap sort: repeatedly move the worst to the end, giving ascending order. */
    oml_neighbor *out = s->best;
    for (int32_t end = s->cnt - 1; end > 0; end--) {
        oml_neighbor t = out[0];
        out[0] = out[end];
        out[end] = t;
        nb_sift_down(out, end, 0);
    }
    return s->cnt;
}

/* oml_index_select over m dot products. One
 * buffer serves both heaps: pass 1's approximate one is done with before
 * pass 2 fills the exact one. */
static int32_t select_rows(const oml_index *ix, int head, const float *q, float *dots,
                           int32_t m, int32_t k, int32_t exclude, const uint8_t *allow,
                           oml_neighbor *out)
{
    if (k <= 0 || m <= 0)
        return 0;
    oml_index_sel s;
    oml_index_sel_init(&s, k, out, out);
    int32_t cand = sel_pass1(&s, dot_margin(ix->emb), dots, 0, m, exclude, allow);
    sel_pass2(ix, head, q, &s, dots, cand);
    return oml_index_sel_finish(&s);
}

int32_t oml_index_select(const oml_index *ix, int head, const float *q, float *dots,
                         int32_t k, int32_t exclude, const uint8_t *allow, oml_neighbor *out)
{
    return select_rows(ix, head, q, dots, ix->n, k, exclude, allow, out);
}

size_t oml_near_ws_bytes(const oml_index *ix, int32_t k)
{
    size_t L = (size_t)ix->n_lists, kk = (size_t)(k > 0 ? k : 1);
    size_t cap = (size_t)OML_SHARE_MAX * (size_t)oml_index_rerank_rows((int32_t)kk);
    return (2 * cap * sizeof(oml_hlist_hit) + 2 * kk * sizeof(oml_neighbor) +
            L * (sizeof(int32_t) + sizeof(float)) + 7) & ~(size_t)7;
}

void oml_near_ws_init(oml_near_ws *w, const oml_index *ix, int32_t k, void *mem)
{
    int32_t kk = k > 0 ? k : 1;
    w->cap = OML_SHARE_MAX * oml_index_rerank_rows(kk);
    w->cand = mem;
    w->n_cand = 0;
    w->best = w->cand + w->cap;
    w->pick = (oml_neighbor *)(void *)(w->best + w->cap);
    w->lows = w->pick + kk;
    w->dots = (float *)(void *)(w->lows + kk);
    w->order = (int32_t *)(void *)(w->dots + ix->n_lists);
    w->overflow = 0;
    w->src = NULL;
}

/* The rows head's search proposes for k neighbours, in keep (hlist_keep.h):
 * its own scan of n_probe lists (< 0: the calibrated number), left in
 * w->cand for the heads that share it (a donor also keeps its best
 * oml_index_rerank_rows(k) x donor by the codes); or, for a head that
 * shares another's scan, that scan's rows by this head's codes, in
 * w->best. by_bound 0: the k best by the codes alone (the caller cuts by
 * their order), not every row the codes cannot rule out. */
static void propose(const oml_index *ix, int head, const float *q, int32_t k, int32_t n_probe,
                    int32_t exclude, const uint8_t *allow, int by_bound, oml_near_ws *w,
                    oml_hlist_keep *keep)
{
    const oml_hlist *hl = &ix->hl[head];
    int32_t kb = by_bound ? k : 0, by_dot = by_bound ? 0 : k;
    if (hl->shared_from < 0) {
        int32_t np = n_probe >= 0 ? n_probe : hl->n_probe;
        int32_t lists = oml_hlist_order_first(hl, q, np, w->order, w->dots);
        np = np < lists ? np : lists;
        int32_t for_sharers = hl->donor > 1 ? oml_index_rerank_rows(k) * hl->donor : 0;
        oml_hlist_keep_init(keep, w->cand, w->cap, for_sharers > by_dot ? for_sharers : by_dot,
                            w->lows, kb);
        w->n_cand = oml_hlist_scan(hl, q, w->order, w->dots, np, exclude, allow, keep);
    } else {
        oml_hlist_dots(hl, q, w->dots);
        oml_hlist_keep_init(keep, w->best, w->cap, by_dot, w->lows, kb);
        oml_hlist_rescore(hl, q, w->dots, w->cand, w->n_cand, keep);
    }
    w->overflow = keep->overflow;
}

/* Larger dot + slack first (the re-rank's order), then the smaller row. */
static int by_upper_desc(const void *pa, const void *pb)
{
    const oml_hlist_hit *a = pa, *b = pb;
    float ua = a->dot + a->slack, ub = b->dot + b->slack;
    if (ua != ub)
        return ua > ub ? -1 : 1;
    return (a->row > b->row) - (a->row < b->row);
}

/* The rows of keep that its codes cannot rule out, into v (may be keep's
 * own hits: compacted in place); returns how many. */
static int32_t keep_possible(const oml_hlist_keep *keep, oml_hlist_hit *v)
{
    int32_t m = 0;
    for (int32_t i = 0; i < keep->cnt; i++)
        if (oml_hlist_keep_may(keep, &keep->hits[i]))
            v[m++] = keep->hits[i];
    return m;
}

/* Offers nb to the k nearest so far (out: a max-heap of *cnt). */
static void heap_offer(oml_neighbor *out, int32_t k, int32_t *cnt, oml_neighbor nb)
{
    if (*cnt < k) {
        out[*cnt] = nb;
        nb_sift_up(out, (*cnt)++);
    } else if (nb_worse(&out[0], &nb)) {
        out[0] = nb;
        nb_sift_down(out, *cnt, 0);
    }
}

/* Whether no row from v's i-th on can reach the k-th of out (cnt == k). */
static int rest_ruled_out(const oml_hlist_hit *vi, const oml_neighbor *out, float margin)
{
    return vi->dot + vi->slack < 1.0f - 0.5f * out[0].dist * out[0].dist - margin;
}

/* rerank_exact for an index without float columns: the rows' embeddings
 * come from src a block at a time, in the same order and with the same
 * stopping rule; a row whose item is gone is skipped. */
static int32_t rerank_from_source(const oml_index *ix, int head, const float *q, int32_t k,
                                  const oml_hlist_hit *v, int32_t m, oml_neighbor *out,
                                  const oml_row_source *src)
{
    size_t e = (size_t)ix->emb, H = (size_t)ix->heads;
    float *E = malloc(H * OML_ROW_SOURCE_BLOCK * e * sizeof *E);
    if (E == NULL)
        return 0;
    float margin = dot_margin(ix->emb);
    int32_t cnt = 0, rows[OML_ROW_SOURCE_BLOCK];
    uint8_t live[OML_ROW_SOURCE_BLOCK];
    for (int32_t i = 0; i < m && !(cnt == k && rest_ruled_out(&v[i], out, margin));) {
        int32_t b = m - i < OML_ROW_SOURCE_BLOCK ? m - i : OML_ROW_SOURCE_BLOCK;
        for (int32_t j = 0; j < b; j++)
            rows[j] = v[i + j].row;
        if (src->embed(src->arg, ix, rows, b, E, live) != OML_OK)
            break;
        const float *Eh = E + (size_t)head * (size_t)b * e;
        for (int32_t j = 0; j < b && !(cnt == k && rest_ruled_out(&v[i + j], out, margin)); j++)
            if (live[j])
                heap_offer(out, k, &cnt, (oml_neighbor){rows[j],
                                                       oml_index_dist(q, Eh + (size_t)j * e,
                                                                      ix->emb)});
        i += b;
    }
    free(E);
    oml_index_sel s = {.best = out, .k = k, .cnt = cnt};
    return oml_index_sel_finish(&s);
}

/* The exact re-rank of the m rows v (their codes' dot and slack) into out
 * (k), ascending by (distance, row): canonical distances, most promising
 * row first, until no row left can reach the k-th (its dot + slack, less
 * the rounding margin, under the k-th's cosine). v is reordered. */
static int32_t rerank_exact(const oml_index *ix, int head, const float *q, int32_t k,
                            oml_hlist_hit *v, int32_t m, oml_neighbor *out,
                            const oml_row_source *src)
{
    qsort(v, (size_t)m, sizeof *v, by_upper_desc);
    if (ix->emb_cols == NULL)
        return src ? rerank_from_source(ix, head, q, k, v, m, out, src) : 0;
    const float *Et = ix->emb_cols + (size_t)head * (size_t)ix->n * (size_t)ix->emb;
    float margin = dot_margin(ix->emb);
    int32_t cnt = 0;
    for (int32_t i = 0; i < m; i++) {
        if (cnt == k && rest_ruled_out(&v[i], out, margin))
            break;
        int32_t r = v[i].row;
        float d = dist_strided(q, Et + r, (size_t)ix->n, ix->emb);
        heap_offer(out, k, &cnt, (oml_neighbor){r, d});
    }
    oml_index_sel s = {.best = out, .k = k, .cnt = cnt};
    return oml_index_sel_finish(&s);
}

int32_t oml_index_topk_near(const oml_index *ix, int head, const float *q, int32_t k,
                            int32_t n_probe, int32_t exclude, const uint8_t *allow,
                            oml_neighbor *out, oml_near_ws *w)
{
    if (k <= 0 || ix->hl == NULL)
        return 0;
    oml_hlist_keep keep;
    propose(ix, head, q, k, n_probe, exclude, allow, 1, w, &keep);
    /* (a sharing head's keep is in w->best already) */
    int32_t m = keep_possible(&keep, w->best);
    return rerank_exact(ix, head, q, k, w->best, m, out, w->src);
}

int32_t oml_index_topk_lists(const oml_index *ix, int head, const float *q, int32_t k,
                             int32_t exclude, const uint8_t *allow, oml_neighbor *out,
                             oml_near_ws *w)
{
    if (k <= 0 || ix->hl == NULL)
        return 0;
    /* This head's own codes, every row by its int8 code: no first pass
     * (hlist.h) drops a row the bound would keep. A head that shares
     * another's scan has no rows of its own (oml_index_drop_unread_maps):
     * made from its pos_of for this scan. */
    oml_hlist whole = ix->hl[head];
    whole.pq_keep = 0;
    int32_t *rows = whole.rows || !whole.pos_of ? NULL : oml_hlist_inverse(whole.pos_of, whole.n);
    if (whole.rows == NULL && (whole.rows = rows) == NULL)
        return 0;
    int32_t lists = oml_hlist_order(&whole, q, w->order, w->dots);
    oml_hlist_keep keep;
    oml_hlist_keep_init(&keep, w->cand, w->cap, 0, w->lows, k);
    oml_hlist_scan(&whole, q, w->order, w->dots, lists, exclude, allow, &keep);
    free(rows);
    w->overflow = keep.overflow;
    w->n_cand = 0; /* not a scan a sharing head may take */
    int32_t m = keep_possible(&keep, w->cand);
    return rerank_exact(ix, head, q, k, w->cand, m, out, w->src);
}

int32_t oml_index_near_candidates(const oml_index *ix, int head, const float *q, int32_t k,
                                  int32_t exclude, const uint8_t *allow, int32_t *rows,
                                  oml_near_ws *w)
{
    if (k <= 0 || ix->hl == NULL)
        return 0;
    oml_hlist_keep keep;
    propose(ix, head, q, k, -1, exclude, allow, 0, w, &keep);
    const oml_hlist_hit *cand = keep.hits;
    int32_t m = keep.cnt;
    /* The k largest approximate dot products (a donor's keep holds more):
     * a min-heap on dist in w->pick (cand is only read: a donor's scan
     * stays for the heads that share it). */
    oml_neighbor *h = w->pick;
    int32_t cnt = 0;
    for (int32_t i = 0; i < m; i++) {
        oml_neighbor nb = {cand[i].row, cand[i].dot};
        if (cnt < k) {
            h[cnt] = nb;
            oml_minheap_up(h, cnt++);
        } else if (nb.dist > h[0].dist) {
            h[0] = nb;
            oml_minheap_down(h, cnt, 0);
        }
    }
    for (int32_t i = 0; i < cnt; i++)
        rows[i] = h[i].row;
    return cnt;
}

static void drop_codes(oml_codescan *cs, int heads)
{
    for (int h = 0; cs && h < heads; h++)
        oml_codescan_free(&cs[h]);
    free(cs);
}

typedef struct head_lists {
    oml_index *ix;
    oml_hlist *hl;
    int32_t lists;
} head_lists;

static int build_head_lists(void *ctx, int worker, int32_t h)
{
    (void)worker;
    head_lists *k = ctx;
    const oml_index *ix = k->ix;
    return oml_hlist_build(&k->hl[h], ix->emb_cols + (size_t)h * (size_t)ix->n * (size_t)ix->emb,
                           ix->n, ix->emb, k->lists);
}

int32_t oml_index_lists_for(size_t n)
{
    if (n < 64)
        return 0;
    int32_t L = oml_hlist_lists_for(n);
    return (size_t)L > n / 4 ? (int32_t)(n / 4) : L;
}

size_t oml_index_nonfinite(const oml_index *ix, int32_t *row)
{
    *row = -1;
    if (ix->emb_cols == NULL) {
        *row = ix->_nonfinite ? ix->_nonfinite_row : -1;
        return ix->_nonfinite;
    }
    size_t count = 0, n = (size_t)ix->n, all = (size_t)ix->heads * (size_t)ix->emb * n;
    for (size_t i = 0; i < all; i++) /* (heads, emb, n): value i is of row i % n */
        if (!isfinite(ix->emb_cols[i])) {
            if (*row < 0 || (int32_t)(i % n) < *row)
                *row = (int32_t)(i % n);
            count++;
        }
    return count;
}

int oml_index_add_lists_threads(oml_index *ix, int threads)
{
    if (ix == NULL || ix->hl != NULL || ix->emb_cols == NULL || ix->n < 64 ||
        ix->emb > OML_HLIST_MAX_EMB)
        return OML_OK;
    int32_t L = oml_index_lists_for((size_t)ix->n);
    head_lists k = {.ix = ix, .hl = calloc((size_t)ix->heads, sizeof *k.hl), .lists = L};
    int rc = k.hl ? OML_OK : OML_ENOMEM;
    if (rc == OML_OK) /* each head's lists alone: the same for any thread count */
        rc = oml_parallel_run(threads, ix->heads, build_head_lists, &k);
    if (rc != OML_OK) {
        for (int h = 0; k.hl && h < ix->heads; h++)
            oml_hlist_free(&k.hl[h]);
        free(k.hl);
        return rc;
    }
    ix->hl = k.hl;
    ix->n_lists = L;
    drop_codes(ix->cs, ix->heads); /* the lists' codes replace them */
    ix->cs = NULL;
    return OML_OK;
}

int oml_index_add_lists(oml_index *ix)
{
    return oml_index_add_lists_threads(ix, 1);
}

/* oml_index_topk by the codes first (codescan.h): every row they cannot
 * rule out re-ranked on the floats. Its keep lives in the caller's scratch
 * (n floats). Returns -1 where the float scan must answer instead: no
 * room for k neighbours and the candidates, or more candidates than it
 * holds (the keep overflowed: its answer might not be exact). */
static int32_t topk_by_codes(const oml_index *ix, int head, const float *q, int32_t k,
                             int32_t exclude, const uint8_t *allow, oml_neighbor *out,
                             float *scratch)
{
    size_t room = (size_t)ix->n * sizeof(float), lows = (size_t)k * sizeof(oml_neighbor);
    /* At most an eighth of the rows re-ranked: beyond that the float scan
     * reads fewer bytes than the re-rank's column reads. */
    size_t cap = (size_t)ix->n / 8;
    if (lows >= room || (room - lows) / sizeof(oml_hlist_hit) < cap)
        cap = lows >= room ? 0 : (room - lows) / sizeof(oml_hlist_hit);
    if (cap < (size_t)k)
        return -1;
    oml_neighbor *low = (oml_neighbor *)(void *)scratch; /* both 4-aligned, as floats */
    oml_hlist_hit *hits = (oml_hlist_hit *)(void *)(low + k);
    oml_hlist_keep keep;
    oml_hlist_keep_init(&keep, hits, (int32_t)cap, 0, low, k);
    oml_codescan_scan(&ix->cs[head], q, exclude, allow, &keep);
    if (keep.overflow)
        return -1;
    return rerank_exact(ix, head, q, k, hits, keep_possible(&keep, hits), out, NULL);
}

int32_t oml_index_topk(const oml_index *ix, int head, const float *q, int32_t k,
                       int32_t exclude, const uint8_t *allow, oml_neighbor *out, float *scratch)
{
    int32_t n = ix->n, e = ix->emb;
    if (k <= 0 || n <= 0 || ix->emb_cols == NULL)
        return 0;
    if (ix->cs != NULL) {
        int32_t cnt = topk_by_codes(ix, head, q, k, exclude, allow, out, scratch);
        if (cnt >= 0)
            return cnt;
    }
    /* scratch (n) = q (emb) . E_head^T (emb, n), on the transposed copy. */
    const float *Et = ix->emb_cols + (size_t)head * (size_t)n * (size_t)e;
    cblas_sgemv(CblasRowMajor, CblasTrans, e, n, 1.0f, Et, n, q, 1, 0.0f, scratch, 1);
    return oml_index_select(ix, head, q, scratch, k, exclude, allow, out);
}

int oml_index_add_codes(oml_index *ix)
{
    if (ix == NULL || ix->cs != NULL || ix->hl != NULL || ix->n == 0 ||
        ix->emb > OML_CODE8_MAX_EMB)
        return OML_OK;
    oml_codescan *cs = calloc((size_t)ix->heads, sizeof *cs);
    int rc = cs ? OML_OK : OML_ENOMEM;
    for (int h = 0; rc == OML_OK && h < ix->heads; h++)
        rc = oml_codescan_build(&cs[h], ix->emb_cols + (size_t)h * (size_t)ix->n * (size_t)ix->emb,
                                ix->n, ix->emb);
    if (rc != OML_OK) {
        drop_codes(cs, ix->heads);
        return rc;
    }
    ix->cs = cs;
    return OML_OK;
}

void oml_index_drop_columns(oml_index *ix)
{
    if (ix == NULL || ix->hl == NULL)
        return;
    if (ix->_cols)
        munmap(ix->_cols, ix->_cols_len);
    ix->_cols = NULL;
    ix->emb_cols = NULL;
}

size_t oml_index_float_bytes(const oml_index *ix)
{
    return ix->emb_cols ? (size_t)ix->heads * (size_t)ix->emb * (size_t)ix->n * sizeof(float) : 0;
}

size_t oml_index_code_bytes(const oml_index *ix)
{
    size_t bytes = 0;
    for (int h = 0; h < ix->heads; h++)
        bytes += ix->hl ? oml_hlist_bytes(&ix->hl[h])
                        : ix->cs ? oml_codescan_bytes(ix->n, ix->emb) : 0;
    return bytes;
}

size_t oml_index_drop_shared_pq(oml_index *ix)
{
    size_t freed = 0;
    for (int h = 0; ix->hl && h < ix->heads; h++)
        if (ix->hl[h].shared_from >= 0)
            freed += oml_hlist_drop_pq(&ix->hl[h]);
    return freed;
}

void oml_index_smooth_probes(oml_index *ix, oml_probe_history *hist)
{
    if (ix->hl == NULL || ix->heads > OML_MAX_LAYERS + 1)
        return;
    if (hist->n_lists != ix->n_lists) {
        memset(hist, 0, sizeof *hist);
        hist->n_lists = ix->n_lists;
    }
    for (int h = 0; h < ix->heads; h++)
        hist->n_probe[hist->next][h] = ix->hl[h].n_probe;
    hist->next = (hist->next + 1) % OML_PROBE_HISTORY;
    hist->n += hist->n < OML_PROBE_HISTORY;
    for (int h = 0; h < ix->heads; h++) {
        int64_t sum = 0;
        for (int32_t i = 0; i < hist->n; i++)
            sum += hist->n_probe[i][h];
        int32_t mean = (int32_t)((sum + hist->n - 1) / hist->n);
        ix->hl[h].n_probe = mean < 1 ? 1 : mean > ix->n_lists ? ix->n_lists : mean;
    }
    for (int h = 1; h < ix->heads; h++) /* a shared scan is its donor's */
        if (ix->hl[h].shared_from >= 0)
            ix->hl[h].n_probe = ix->hl[ix->hl[h].shared_from].n_probe;
}

size_t oml_index_drop_unread_maps(oml_index *ix)
{
    size_t freed = 0;
    for (int h = 0; ix->hl && h < ix->heads; h++) {
        oml_hlist *hl = &ix->hl[h];
        size_t before = oml_hlist_bytes(hl);
        int shares = hl->shared_from >= 0;
        if (oml_hlist_keep_maps(hl, !shares, shares) == OML_OK)
            freed += before - oml_hlist_bytes(hl);
    }
    return freed;
}

int32_t oml_index_row_of_slot(const oml_index *ix, uint32_t slot)
{
    int32_t lo = 0, hi = ix->n; /* rows are in ascending slot order */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (ix->slots[mid] < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ix->n && ix->slots[lo] == slot ? lo : -1;
}

void oml_index_destroy(oml_index *ix)
{
    if (ix == NULL)
        return;
    oml_snapshot_release(ix->snap);
    for (int h = 0; ix->hl && h < ix->heads; h++)
        oml_hlist_free(&ix->hl[h]);
    free(ix->hl);
    drop_codes(ix->cs, ix->heads);
    if (ix->_cols)
        munmap(ix->_cols, ix->_cols_len);
    free(ix->_arena);
    free(ix->slots);
    free(ix->labels);
    free(ix->gens);
    free(ix);
}
