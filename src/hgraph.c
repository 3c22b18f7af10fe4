/* hgraph.c - HNSW over one head's unit rows (see hgraph.h).
 *
 * DESIGN: similarity is the dot product of unit rows, larger is nearer.
 * Level 0's links sit in one (cap, 2M + 1) block (a count, then the
 * links), the upper levels' in one small block per node that has them
 * (about 1 node in M). A workspace's visit marks are a generation
 * counter, so a search clears nothing. The dot product is an AVX2 + FMA
 * kernel picked at run time (the build targets baseline x86-64), else a
 * portable loop of eight partial sums; the two may differ in the last
 * bits, which moves nothing a caller relies on (candidates are re-ranked
 * exactly by oml_index_dist). */
#include "hgraph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define MAX_LEVEL 24

static float dot_c(const float *a, const float *b, int32_t e)
{
    float s[8] = {0};
    int32_t j = 0;
    for (; j + 8 <= e; j += 8)
        for (int u = 0; u < 8; u++)
            s[u] += a[j + u] * b[j + u];
    float t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; j < e; j++)
        t += a[j] * b[j];
    return t;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b,
                                                          int32_t e)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int32_t j = 0;
    for (; j + 16 <= e; j += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), s1);
    }
    for (; j + 8 <= e; j += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
    s0 = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
    float t = _mm_cvtss_f32(h);
    for (; j < e; j++)
        t += a[j] * b[j];
    return t;
}

static float dot(const float *a, const float *b, int32_t e)
{
    static int avx = -1;
    if (avx < 0)
        avx = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return avx ? dot_avx2(a, b, e) : dot_c(a, b, e);
}
#else
#define dot dot_c
#endif

static inline int32_t *links_at(const oml_hgraph *g, int32_t node, int lv)
{
    if (lv == 0)
        return g->links0 + (size_t)node * (size_t)(2 * g->M + 1);
    return g->up[node] + (size_t)(lv - 1) * (size_t)(g->M + 1);
}

static inline const float *row_of(const oml_hgraph *g, const float *vecs, int32_t node)
{
    return (vecs ? vecs : g->vecs) + (size_t)node * (size_t)g->emb;
}

/* Max-heap on .dist through the min-heap of neighbor.h on its negation. */
static void cand_push(oml_hgraph_ws *w, int32_t *cnt, int32_t row, float s)
{
    if (*cnt == w->cap_heap) {
        int32_t cap = w->cap_heap * 2;
        oml_neighbor *c = realloc(w->cand, (size_t)cap * sizeof *c);
        if (c == NULL)
            return; /* the search goes on without this row: a little less recall */
        oml_neighbor *b = realloc(w->best, (size_t)cap * sizeof *b);
        if (b == NULL) {
            w->cand = c;
            return;
        }
        w->cand = c;
        w->best = b;
        w->cap_heap = cap;
    }
    w->cand[*cnt] = (oml_neighbor){row, -s};
    oml_minheap_up(w->cand, (*cnt)++);
}

static void best_offer(oml_neighbor *best, int32_t *cnt, int32_t ef, int32_t row, float s)
{
    if (*cnt < ef) {
        best[*cnt] = (oml_neighbor){row, s};
        oml_minheap_up(best, (*cnt)++);
    } else if (s > best[0].dist) {
        best[0] = (oml_neighbor){row, s};
        oml_minheap_down(best, *cnt, 0);
    }
}

static void next_mark(oml_hgraph_ws *w)
{
    if (++w->mark == 0) {
        memset(w->seen, 0, (size_t)w->cap_seen * sizeof *w->seen);
        w->mark = 1;
    }
}

/* Best first from ep on level lv with width ef: w->best (min-heap) gets
 * the most similar nodes reached that are not `exclude` and allow lets
 * through; returns how many. */
static int32_t search_layer(const oml_hgraph *g, const float *vecs, const float *q, int32_t ep,
                            int32_t ef, int lv, int32_t exclude, const uint8_t *allow,
                            oml_hgraph_ws *w)
{
    int32_t nc = 0, nb = 0, e = g->emb;
    int64_t visited = 1;
    next_mark(w);
    w->seen[ep] = w->mark;
    float s = dot(q, row_of(g, vecs, ep), e);
    cand_push(w, &nc, ep, s);
    if (ep != exclude && (allow == NULL || allow[ep]))
        best_offer(w->best, &nb, ef, ep, s);
    while (nc > 0) {
        oml_neighbor c = w->cand[0];
        w->cand[0] = w->cand[--nc];
        oml_minheap_down(w->cand, nc, 0);
        if (nb == ef && -c.dist < w->best[0].dist)
            break;
        const int32_t *L = links_at(g, c.row, lv);
        for (int32_t i = 1; i <= L[0]; i++) {
            int32_t v = L[i];
            if (w->seen[v] == w->mark)
                continue;
            w->seen[v] = w->mark;
            if (i < L[0])
                __builtin_prefetch(row_of(g, vecs, L[i + 1]));
            float sv = dot(q, row_of(g, vecs, v), e);
            visited++;
            if (nb < ef || sv > w->best[0].dist) {
                cand_push(w, &nc, v, sv);
                if (v != exclude && (allow == NULL || allow[v]))
                    best_offer(w->best, &nb, ef, v, sv);
            }
        }
    }
    w->visited += visited;
    return nb;
}

static int32_t greedy(const oml_hgraph *g, const float *vecs, const float *q, int32_t cur, int lv,
                      oml_hgraph_ws *w)
{
    float s = dot(q, row_of(g, vecs, cur), g->emb);
    for (int moved = 1; moved;) {
        moved = 0;
        const int32_t *L = links_at(g, cur, lv);
        for (int32_t i = 1; i <= L[0]; i++) {
            float sv = dot(q, row_of(g, vecs, L[i]), g->emb);
            w->visited++;
            if (sv > s) {
                s = sv;
                cur = L[i];
                moved = 1;
            }
        }
    }
    return cur;
}

static int cmp_desc(const void *a, const void *b)
{
    const oml_neighbor *x = a, *y = b;
    if (x->dist != y->dist)
        return x->dist < y->dist ? 1 : -1;
    return (x->row > y->row) - (x->row < y->row);
}

/* HNSW's heuristic: of c (m, descending by similarity to the node), keep
 * each that is more similar to the node than to every one kept before,
 * at most cap of them, into out. */
static int32_t select_links(const oml_hgraph *g, const oml_neighbor *c, int32_t m, int32_t cap,
                            int32_t *out)
{
    int32_t r = 0;
    for (int32_t i = 0; i < m && r < cap; i++) {
        const float *v = row_of(g, NULL, c[i].row);
        int keep = 1;
        for (int32_t j = 0; j < r && keep; j++)
            keep = dot(v, row_of(g, NULL, out[j]), g->emb) < c[i].dist;
        if (keep)
            out[r++] = c[i].row;
    }
    return r;
}

/* Links `to` from node `from` on level lv; a full list is chosen anew. */
static void link_back(oml_hgraph *g, int32_t from, int32_t to, int lv, oml_neighbor *tmp)
{
    int32_t cap = lv == 0 ? 2 * g->M : g->M, *L = links_at(g, from, lv);
    if (L[0] < cap) {
        L[++L[0]] = to;
        return;
    }
    const float *v = row_of(g, NULL, from);
    int32_t m = 0;
    for (int32_t i = 1; i <= L[0]; i++)
        tmp[m++] = (oml_neighbor){L[i], dot(v, row_of(g, NULL, L[i]), g->emb)};
    tmp[m++] = (oml_neighbor){to, dot(v, row_of(g, NULL, to), g->emb)};
    qsort(tmp, (size_t)m, sizeof *tmp, cmp_desc);
    L[0] = select_links(g, tmp, m, cap, L + 1);
}

int oml_hgraph_ws_init(oml_hgraph_ws *w, int32_t cap_nodes, int32_t ef)
{
    memset(w, 0, sizeof *w);
    w->cap_seen = cap_nodes > 1 ? cap_nodes : 1;
    w->cap_heap = ef > 64 ? 4 * ef : 256;
    w->seen = calloc((size_t)w->cap_seen, sizeof *w->seen);
    w->cand = malloc((size_t)w->cap_heap * sizeof *w->cand);
    w->best = malloc((size_t)w->cap_heap * sizeof *w->best);
    if (!w->seen || !w->cand || !w->best) {
        oml_hgraph_ws_free(w);
        return OML_ENOMEM;
    }
    return OML_OK;
}

void oml_hgraph_ws_free(oml_hgraph_ws *w)
{
    free(w->seen);
    free(w->cand);
    free(w->best);
    memset(w, 0, sizeof *w);
}

int oml_hgraph_init(oml_hgraph *g, int32_t emb, int32_t M, int32_t ef_build, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    if (emb < 1 || M < 2 || M > 256 || ef_build < M)
        return OML_EINVAL;
    g->emb = emb;
    g->M = M;
    g->ef_build = ef_build;
    g->entry = -1;
    g->rng = seed * 2862933555777941757ull + 3037000493ull;
    g->_ws = calloc(1, sizeof *g->_ws);
    if (g->_ws == NULL || oml_hgraph_ws_init(g->_ws, 1024, ef_build) != OML_OK) {
        free(g->_ws);
        g->_ws = NULL;
        return OML_ENOMEM;
    }
    return OML_OK;
}

void oml_hgraph_free(oml_hgraph *g)
{
    if (g == NULL)
        return;
    for (int32_t i = 0; g->up && i < g->n; i++)
        free(g->up[i]);
    free(g->up);
    free(g->vecs);
    free(g->links0);
    free(g->level);
    if (g->_ws)
        oml_hgraph_ws_free(g->_ws);
    free(g->_ws);
    memset(g, 0, sizeof *g);
    g->entry = -1;
}

static int grow(oml_hgraph *g)
{
    int32_t cap = g->cap < 1024 ? 1024 : g->cap + g->cap / 2;
    size_t l0 = (size_t)(2 * g->M + 1);
    float *v = realloc(g->vecs, (size_t)cap * (size_t)g->emb * sizeof *v);
    if (v == NULL)
        return OML_ENOMEM;
    g->vecs = v;
    int32_t *L = realloc(g->links0, (size_t)cap * l0 * sizeof *L);
    if (L == NULL)
        return OML_ENOMEM;
    g->links0 = L;
    int8_t *lv = realloc(g->level, (size_t)cap);
    if (lv == NULL)
        return OML_ENOMEM;
    g->level = lv;
    int32_t **up = realloc(g->up, (size_t)cap * sizeof *up);
    if (up == NULL)
        return OML_ENOMEM;
    g->up = up;
    uint32_t *seen = realloc(g->_ws->seen, (size_t)cap * sizeof *seen);
    if (seen == NULL)
        return OML_ENOMEM;
    memset(seen + g->_ws->cap_seen, 0, (size_t)(cap - g->_ws->cap_seen) * sizeof *seen);
    g->_ws->seen = seen;
    g->_ws->cap_seen = cap;
    g->cap = cap;
    return OML_OK;
}

int oml_hgraph_add(oml_hgraph *g, const float *v)
{
    if (g->n == g->cap && grow(g) != OML_OK)
        return OML_ENOMEM;
    g->rng = g->rng * 6364136223846793005ull + 1442695040888963407ull;
    double u = ((double)(g->rng >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    int lvl = (int)(-log(u) / log((double)g->M));
    lvl = lvl > MAX_LEVEL ? MAX_LEVEL : lvl;
    int32_t id = g->n, M = g->M;
    g->up[id] = NULL;
    if (lvl > 0) {
        g->up[id] = calloc((size_t)lvl * (size_t)(M + 1), sizeof **g->up);
        if (g->up[id] == NULL)
            return OML_ENOMEM;
    }
    memcpy(g->vecs + (size_t)id * (size_t)g->emb, v, (size_t)g->emb * sizeof *v);
    g->links0[(size_t)id * (size_t)(2 * M + 1)] = 0;
    g->level[id] = (int8_t)lvl;
    g->n++;
    if (g->entry < 0) {
        g->entry = id;
        g->top = lvl;
        return OML_OK;
    }
    oml_hgraph_ws *w = g->_ws;
    oml_neighbor tmp[2 * 256 + 1];
    int32_t cur = g->entry, sel[256];
    for (int lv = g->top; lv > lvl; lv--)
        cur = greedy(g, NULL, v, cur, lv, w);
    for (int lv = lvl < g->top ? lvl : g->top; lv >= 0; lv--) {
        int32_t m = search_layer(g, NULL, v, cur, g->ef_build, lv, id, NULL, w);
        qsort(w->best, (size_t)m, sizeof *w->best, cmp_desc);
        int32_t ns = select_links(g, w->best, m, M, sel), *L = links_at(g, id, lv);
        L[0] = ns;
        memcpy(L + 1, sel, (size_t)ns * sizeof *sel);
        if (m > 0)
            cur = w->best[0].row;
        for (int32_t i = 0; i < ns; i++)
            link_back(g, sel[i], id, lv, tmp);
    }
    if (lvl > g->top) {
        g->top = lvl;
        g->entry = id;
    }
    return OML_OK;
}

int oml_hgraph_add_cols(oml_hgraph *g, const float *cols, int32_t n, size_t ld)
{
    float v[1024];
    if (g->emb > 1024)
        return OML_EINVAL;
    for (int32_t r = 0; r < n; r++) {
        for (int32_t j = 0; j < g->emb; j++)
            v[j] = cols[(size_t)j * ld + (size_t)r];
        int rc = oml_hgraph_add(g, v);
        if (rc != OML_OK)
            return rc;
    }
    return OML_OK;
}

int32_t oml_hgraph_search(const oml_hgraph *g, const float *vecs, const float *q, int32_t k,
                          int32_t ef, int32_t exclude, const uint8_t *allow, oml_neighbor *out,
                          oml_hgraph_ws *w)
{
    if (g->entry < 0 || k < 1 || w->cap_seen < g->n)
        return 0;
    ef = ef < k ? k : ef;
    int32_t cur = g->entry;
    for (int lv = g->top; lv > 0; lv--)
        cur = greedy(g, vecs, q, cur, lv, w);
    int32_t m = search_layer(g, vecs, q, cur, ef, 0, exclude, allow, w);
    qsort(w->best, (size_t)m, sizeof *w->best, cmp_desc);
    m = m < k ? m : k;
    memcpy(out, w->best, (size_t)m * sizeof *out);
    return m;
}

size_t oml_hgraph_bytes(const oml_hgraph *g)
{
    size_t b = (size_t)g->cap * ((size_t)g->emb * sizeof(float) +
                                 (size_t)(2 * g->M + 1) * sizeof(int32_t) + 1 + sizeof(int32_t *));
    for (int32_t i = 0; i < g->n; i++)
        b += (size_t)g->level[i] * (size_t)(g->M + 1) * sizeof(int32_t);
    return b;
}
