/* index.c - exact kNN over every live item embedded under one snapshot.
 *
 * DESIGN: oml_index_build runs on the indexer (learner) thread, reads the
 * store once and produces an index that is immutable afterwards, so queries
 * on any thread read it without locks. Everything except the struct lives in
 * one arena: pointer tables first, then the (heads, n, emb) embeddings, the
 * slot and label columns and finally the copied id and label-name bytes.
 *
 * Search is exact and its result does not depend on how the dot products
 * were computed. BLAS (sgemv here, sgemm in serve.c's batch path) rounds
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

#define GATHER_ROWS 1024 /* rows gathered per embedding call when slots have holes */

/* |BLAS dot - cosine| for rows normalised in float is at most about
 * emb * 2^-24 (summation) plus the rows' norm deviation from 1 (of the same
 * order). The margin covers that on both sides of the argument plus the
 * rounding of D to float, with a factor of two to spare. Zero rows (a head
 * that maps an item to z = 0) have dot = cosine = 0 exactly. */
static float dot_margin(int32_t emb)
{
    return 4.0f * (float)(emb + 4) * FLT_EPSILON;
}

float oml_index_dist(const float *a, const float *b, int32_t emb)
{
    /* OAHU Eq. 6 on the unit sphere: D = sqrt(2 - 2 cos). The cosine is taken
     * in double with the actual norms, so identical rows give D = 0 instead of
     * the 1e-4 that float normalisation error would leave in 2 - 2 a.b, and the
     * value does not depend on how a BLAS routine ordered its sums. */
    double ab = 0.0, aa = 0.0, bb = 0.0;
    for (int32_t i = 0; i < emb; i++) {
        ab += (double)a[i] * (double)b[i];
        aa += (double)a[i] * (double)a[i];
        bb += (double)b[i] * (double)b[i];
    }
    double cs = aa > 0.0 && bb > 0.0 ? ab / sqrt(aa * bb) : 0.0;
    double d2 = 2.0 - 2.0 * (cs < 1.0 ? cs : 1.0);
    return (float)sqrt(d2 > 0.0 ? d2 : 0.0);
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

/* Min-heap of floats kept in the dist field: h[0].dist is the smallest of the
 * k largest approximate dot products seen so far. */
static void dot_sift_down(oml_neighbor *h, int32_t cnt, int32_t i)
{
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < cnt && h[l].dist < h[w].dist)
            w = l;
        if (r < cnt && h[r].dist < h[w].dist)
            w = r;
        if (w == i)
            return;
        float t = h[i].dist;
        h[i].dist = h[w].dist;
        h[w].dist = t;
        i = w;
    }
}

static void dot_sift_up(oml_neighbor *h, int32_t i)
{
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!(h[i].dist < h[p].dist))
            return;
        float t = h[i].dist;
        h[i].dist = h[p].dist;
        h[p].dist = t;
        i = p;
    }
}

int32_t oml_index_select(const oml_index *ix, int head, const float *q, float *dots,
                         int32_t k, int32_t exclude, oml_neighbor *out)
{
    int32_t n = ix->n, e = ix->emb;
    if (k <= 0 || n <= 0)
        return 0;
    const float *E = ix->emb_all + (size_t)head * (size_t)n * (size_t)e;
    float margin = dot_margin(e);

    /* Pass 1, O(n log k): keep the k largest approximate dot products in a
     * min-heap (in out[].dist) and compact every row that may still be among
     * the exact top k into the front of dots (row numbers stored bitwise).
     * The threshold only rises, so the kept rows are a superset of the final
     * candidates {a_j >= t_k - margin}; dots[j] is read before slot j can be
     * overwritten because the write index never passes the read index. */
    int32_t filled = 0, cand = 0;
    float thr = -INFINITY;
    for (int32_t j = 0; j < n; j++) {
        float a = dots[j];
        if (j == exclude || !(a >= thr))
            continue;
        uint32_t r = (uint32_t)j;
        memcpy(&dots[cand++], &r, sizeof r);
        if (filled < k) {
            out[filled].dist = a;
            dot_sift_up(out, filled++);
        } else if (a > out[0].dist) {
            out[0].dist = a;
            dot_sift_down(out, filled, 0);
        } else {
            continue;
        }
        if (filled == k)
            thr = out[0].dist - margin;
    }

    /* Pass 2: canonical distances of the candidates into a bounded max-heap.
     * Candidates arrive in ascending row order, so an equal distance never
     * displaces the root (the smaller row wins ties). */
    int32_t cnt = 0;
    for (int32_t c = 0; c < cand; c++) {
        uint32_t r;
        memcpy(&r, &dots[c], sizeof r);
        oml_neighbor nb = {(int32_t)r, oml_index_dist(q, E + (size_t)r * (size_t)e, e)};
        if (cnt < k) {
            out[cnt] = nb;
            nb_sift_up(out, cnt++);
        } else if (nb.dist < out[0].dist) {
            out[0] = nb;
            nb_sift_down(out, cnt, 0);
        }
    }
    /* Heap sort: repeatedly move the worst to the end, giving ascending order. */
    for (int32_t end = cnt - 1; end > 0; end--) {
        oml_neighbor t = out[0];
        out[0] = out[end];
        out[end] = t;
        nb_sift_down(out, end, 0);
    }
    return cnt;
}

int32_t oml_index_topk(const oml_index *ix, int head, const float *q, int32_t k,
                       int32_t exclude, oml_neighbor *out, float *scratch)
{
    int32_t n = ix->n, e = ix->emb;
    if (k <= 0 || n <= 0)
        return 0;
    /* scratch (n) = q (emb) . E_head^T (emb, n), on the transposed copy. */
    const float *Et = ix->emb_cols + (size_t)head * (size_t)n * (size_t)e;
    cblas_sgemv(CblasRowMajor, CblasTrans, e, n, 1.0f, Et, n, q, 1, 0.0f, scratch, 1);
    return oml_index_select(ix, head, q, scratch, k, exclude, out);
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

/* ix->emb_cols (heads, emb, n): each head's rows of emb_all, transposed. */
static void transpose_heads(oml_index *ix)
{
    size_t n = (size_t)ix->n, e = (size_t)ix->emb;
    for (int h = 0; h < ix->heads; h++) {
        const float *src = ix->emb_all + (size_t)h * n * e;
        float *dst = ix->emb_cols + (size_t)h * n * e;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < e; j++)
                dst[j * n + i] = src[i * e + j];
    }
}

/* Embeds the rows of the live slots into ix->emb_all (heads, n, emb). One
 * call straight on the store's matrix when the live slots are contiguous;
 * otherwise GATHER_ROWS rows at a time, copying only chunks with holes. */
static int embed_rows(oml_index *ix, const oml_store *store)
{
    int32_t n = ix->n, e = ix->emb, dim = oml_store_dim(store);
    const float *M = oml_store_matrix(store);
    if (n == 0)
        return OML_OK;
    if (ix->slots[n - 1] - ix->slots[0] == (uint32_t)(n - 1))
        return oml_snapshot_embed(ix->snap, M + (size_t)ix->slots[0] * (size_t)dim, n,
                                  ix->emb_all);

    int32_t chunk = n < GATHER_ROWS ? n : GATHER_ROWS;
    size_t xf = (size_t)chunk * (size_t)dim, of = (size_t)ix->heads * (size_t)chunk * (size_t)e;
    float *X = malloc((xf + of) * sizeof *X);
    if (X == NULL)
        return OML_ENOMEM;
    float *O = X + xf;
    int rc = OML_OK;
    for (int32_t i = 0; i < n && rc == OML_OK; i += chunk) {
        int32_t m = n - i < chunk ? n - i : chunk;
        const float *src = M + (size_t)ix->slots[i] * (size_t)dim;
        if (ix->slots[i + m - 1] - ix->slots[i] != (uint32_t)(m - 1)) {
            for (int32_t r = 0; r < m; r++) /* this chunk has holes: gather it */
                memcpy(X + (size_t)r * (size_t)dim, M + (size_t)ix->slots[i + r] * (size_t)dim,
                       (size_t)dim * sizeof *X);
            src = X;
        }
        rc = oml_snapshot_embed(ix->snap, src, m, O);
        for (int h = 0; h < ix->heads && rc == OML_OK; h++)
            memcpy(ix->emb_all + ((size_t)h * (size_t)n + (size_t)i) * (size_t)e,
                   O + (size_t)h * (size_t)m * (size_t)e, (size_t)m * (size_t)e * sizeof *O);
    }
    free(X);
    return rc;
}

/* The live items, and the bytes their ids and the label names take as
 * NUL-terminated copies. */
static size_t count_live(const oml_store *store, size_t *bytes)
{
    uint32_t slots = oml_store_slots(store);
    int32_t n_labels = oml_store_label_count(store);
    size_t n = 0;
    *bytes = 0;
    for (uint32_t s = 0; s < slots; s++) {
        if (!oml_store_is_live(store, s))
            continue;
        size_t len;
        oml_store_id(store, s, &len);
        *bytes += len + 1;
        n++;
    }
    for (int32_t l = 0; l < n_labels; l++) {
        size_t len;
        oml_store_label_name(store, l, &len);
        *bytes += len + 1;
    }
    return n;
}

/* Allocates the arena for ix->n items and `bytes` characters and points
 * the columns into it; returns where the characters go, NULL on OOM. */
static char *alloc_arena(oml_index *ix, size_t bytes)
{
    size_t n = (size_t)ix->n, nl = (size_t)ix->n_labels;
    size_t ne = (size_t)ix->heads * n * (size_t)ix->emb;
    /* Arena, largest alignment first: ids, label_names, id_lens, emb_all,
     * slots, labels, then the characters. */
    size_t total = (n + nl) * sizeof(char *) + n * sizeof(size_t) + 2 * ne * sizeof(float)
                   + n * (sizeof(uint32_t) + sizeof(int32_t)) + bytes + 1;
    char *p = malloc(total);
    if (p == NULL)
        return NULL;
    ix->_arena = p;
    ix->ids = (const char **)(void *)p;
    p += n * sizeof(char *);
    ix->label_names = (const char **)(void *)p;
    p += nl * sizeof(char *);
    ix->id_lens = (size_t *)(void *)p;
    p += n * sizeof(size_t);
    ix->emb_all = (float *)(void *)p;
    p += ne * sizeof(float);
    ix->emb_cols = (float *)(void *)p;
    p += ne * sizeof(float);
    ix->slots = (uint32_t *)(void *)p;
    p += n * sizeof(uint32_t);
    ix->labels = (int32_t *)(void *)p;
    p += n * sizeof(int32_t);
    return p;
}

/* Copies each live item's id, slot and label, in ascending slot order, and
 * the label names, with their characters at p. */
static void copy_items(oml_index *ix, const oml_store *store, char *p)
{
    uint32_t slots = oml_store_slots(store);
    size_t row = 0;
    for (uint32_t s = 0; s < slots; s++) {
        if (!oml_store_is_live(store, s))
            continue;
        size_t len;
        const char *id = oml_store_id(store, s, &len);
        memcpy(p, id, len);
        p[len] = '\0';
        ix->ids[row] = p;
        ix->id_lens[row] = len;
        ix->slots[row] = s;
        ix->labels[row] = oml_store_label(store, s);
        p += len + 1;
        row++;
    }
    for (int32_t l = 0; l < ix->n_labels; l++) {
        size_t len;
        const char *name = oml_store_label_name(store, l, &len);
        memcpy(p, name, len);
        p[len] = '\0';
        ix->label_names[l] = p;
        p += len + 1;
    }
}

int oml_index_build(oml_index **out, oml_snapshot *snap, const oml_store *store)
{
    if (out == NULL || snap == NULL || store == NULL)
        return OML_EINVAL;
    if (oml_store_dim(store) != snap->cfg.dim)
        return OML_EDIM;
    size_t bytes;
    size_t n = count_live(store, &bytes);
    if (n > INT32_MAX)
        return OML_EINVAL;

    oml_index *ix = calloc(1, sizeof *ix);
    if (ix == NULL)
        return OML_ENOMEM;
    ix->n = (int32_t)n;
    ix->heads = oml_snapshot_heads(snap);
    ix->emb = snap->cfg.emb;
    ix->n_labels = oml_store_label_count(store);
    char *chars = alloc_arena(ix, bytes);
    if (chars == NULL) {
        free(ix);
        return OML_ENOMEM;
    }
    copy_items(ix, store, chars);

    ix->snap = oml_snapshot_retain(snap);
    int rc = embed_rows(ix, store);
    if (rc != OML_OK) {
        oml_index_destroy(ix);
        return rc;
    }
    transpose_heads(ix);
    *out = ix;
    return OML_OK;
}

void oml_index_destroy(oml_index *ix)
{
    if (ix == NULL)
        return;
    oml_snapshot_release(ix->snap);
    free(ix->_arena);
    free(ix);
}
