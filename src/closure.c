/* closure.c - incremental transitive closure of similar / dissimilar facts.
 *
 * DESIGN
 * OAHU Sec. 3.1, footnote 1. "Similar" is kept as union-find components
 * (path compression + union by size); "dissimilar" as a simple graph between
 * component roots. Owns, per node (arrays grown lazily up to max_nodes):
 * parent, size, and for roots the member array (NULL for singletons, whose
 * only member is the root) and the vector of dissimilar neighbour roots. A
 * global edge map keyed by the root pair (lo << 32 | hi) answers "are these
 * components dissimilar" in O(1) and stores, for each edge, the position of
 * each endpoint in the other's neighbour vector, so an edge is removed from
 * both vectors in O(1) (swap-remove, then fix the moved edge's position).
 * Merging folds the smaller component into the larger: members are appended,
 * and each of the smaller root's edges is either rewritten to the larger root
 * (in place in the neighbour's vector) or dropped if that edge already exists.
 * A merge therefore never adds edges, and costs O(|small| + deg(small)).
 * "eligible" lists the roots with >= 2 members and >= 1 dissimilar neighbour:
 * exactly the components that give triplets, so sampling is O(1).
 *
 * Invariants: neighbour vectors and edge map hold only roots; the graph has no
 * self loops (that would be a contradiction) and no parallel edges; edge count
 * <= max_dis_edges. Every add_* validates and reserves all memory first and
 * then commits without a failure path, so errors leave the closure unchanged.
 * Derived triplets are sampled with the closure's own oml_rng.
 * Thread: one owner. */
#include "closure.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define MIN_NODES 64u
#define EMAP_MIN_CAP 16u

typedef struct emap_entry {
    uint64_t key;     /* 0 = empty; real keys have hi >= 1 so are never 0 */
    uint32_t pos_lo;  /* index of hi in nbr[lo] */
    uint32_t pos_hi;  /* index of lo in nbr[hi] */
} emap_entry;

struct oml_closure {
    uint32_t max_nodes, max_dis_edges;
    uint32_t n_alloc;   /* nodes with storage; higher ids are untouched singletons */
    uint32_t *parent;   /* (n_alloc) */
    uint32_t *size;     /* (n_alloc), valid at roots */
    uint32_t **members; /* (n_alloc), roots with size >= 2 */
    uint32_t *mcap;
    uint32_t **nbr;     /* (n_alloc), dissimilar neighbour roots */
    uint32_t *deg, *ncap;
    uint32_t *elig_pos; /* (n_alloc), index in elig or NONE */
    uint32_t *elig;     /* (n_alloc) */
    uint32_t n_elig;

    emap_entry *emap;
    uint32_t emap_cap, n_edges;

    oml_rng rng;
    oml_closure_stats st;
};

/* ---- edge map: open addressing on the root pair, backward-shift delete ---- */

static uint64_t edge_key(uint32_t u, uint32_t v)
{
    return u < v ? ((uint64_t)u << 32) | v : ((uint64_t)v << 32) | u;
}

static uint32_t emap_home(const oml_closure *c, uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (uint32_t)k & (c->emap_cap - 1);
}

static emap_entry *emap_find(const oml_closure *c, uint64_t k)
{
    if (c->n_edges == 0)
        return NULL;
    uint32_t mask = c->emap_cap - 1;
    for (uint32_t i = emap_home(c, k);; i = (i + 1) & mask) {
        if (c->emap[i].key == k)
            return &c->emap[i];
        if (c->emap[i].key == 0)
            return NULL;
    }
}

static int emap_reserve(oml_closure *c, uint32_t extra)
{
    uint64_t need = (uint64_t)c->n_edges + extra, cap = c->emap_cap ? c->emap_cap : EMAP_MIN_CAP;
    while (need > cap / 4 * 3)
        cap *= 2;
    if (cap == c->emap_cap)
        return OML_OK;
    if (cap > (1u << 31))
        return OML_ENOMEM;
    emap_entry *old = c->emap;
    uint32_t old_cap = c->emap_cap;
    c->emap = calloc((size_t)cap, sizeof *c->emap);
    if (c->emap == NULL) {
        c->emap = old;
        return OML_ENOMEM;
    }
    c->emap_cap = (uint32_t)cap;
    uint32_t mask = c->emap_cap - 1;
    for (uint32_t j = 0; j < old_cap; j++) {
        if (old[j].key == 0)
            continue;
        uint32_t i = emap_home(c, old[j].key);
        while (c->emap[i].key != 0)
            i = (i + 1) & mask;
        c->emap[i] = old[j];
    }
    free(old);
    return OML_OK;
}

/* Room must have been reserved (or an edge removed just before). */
static void emap_insert(oml_closure *c, uint64_t k, uint32_t pos_lo, uint32_t pos_hi)
{
    uint32_t mask = c->emap_cap - 1, i = emap_home(c, k);
    while (c->emap[i].key != 0)
        i = (i + 1) & mask;
    c->emap[i] = (emap_entry){k, pos_lo, pos_hi};
    c->n_edges++;
}

static void emap_remove(oml_closure *c, emap_entry *e)
{
    uint32_t mask = c->emap_cap - 1, hole = (uint32_t)(e - c->emap), j = hole;
    for (;;) {
        j = (j + 1) & mask;
        if (c->emap[j].key == 0)
            break;
        uint32_t home = emap_home(c, c->emap[j].key);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            c->emap[hole] = c->emap[j];
            hole = j;
        }
    }
    c->emap[hole].key = 0;
    c->n_edges--;
}

static int dis_roots(const oml_closure *c, uint32_t u, uint32_t v)
{
    return emap_find(c, edge_key(u, v)) != NULL;
}

/* Records that nbr[r][pos] now holds `other`. */
static void edge_set_pos(oml_closure *c, uint32_t r, uint32_t other, uint32_t pos)
{
    emap_entry *e = emap_find(c, edge_key(r, other));
    if (r < other)
        e->pos_lo = pos;
    else
        e->pos_hi = pos;
}

static void nbr_swap_remove(oml_closure *c, uint32_t r, uint32_t pos)
{
    uint32_t last = --c->deg[r];
    if (pos != last) {
        uint32_t moved = c->nbr[r][last];
        c->nbr[r][pos] = moved;
        edge_set_pos(c, r, moved, pos);
    }
}

/* ---- nodes, components, eligibility ---- */

static int grow_nodes(oml_closure *c, uint32_t need)
{
    if (need <= c->n_alloc)
        return OML_OK;
    uint64_t want = 2ull * c->n_alloc;
    if (want < MIN_NODES)
        want = MIN_NODES;
    if (want < need)
        want = need;
    if (want > c->max_nodes)
        want = c->max_nodes;
    size_t n = (size_t)want;
    void *p;
#define GROW(arr)                                          \
    do {                                                   \
        if ((p = realloc(c->arr, n * sizeof *c->arr)) == NULL) \
            return OML_ENOMEM;                             \
        c->arr = p;                                        \
    } while (0)
    GROW(parent);
    GROW(size);
    GROW(members);
    GROW(mcap);
    GROW(nbr);
    GROW(deg);
    GROW(ncap);
    GROW(elig_pos);
    GROW(elig);
#undef GROW
    for (uint32_t i = c->n_alloc; i < (uint32_t)want; i++) {
        c->parent[i] = i;
        c->size[i] = 1;
        c->members[i] = NULL;
        c->mcap[i] = 0;
        c->nbr[i] = NULL;
        c->deg[i] = 0;
        c->ncap[i] = 0;
        c->elig_pos[i] = NONE;
    }
    c->n_alloc = (uint32_t)want;
    return OML_OK;
}

static uint32_t find_mut(oml_closure *c, uint32_t x)
{
    if (x >= c->n_alloc)
        return x;
    uint32_t r = x;
    while (c->parent[r] != r)
        r = c->parent[r];
    while (c->parent[x] != r) {
        uint32_t next = c->parent[x];
        c->parent[x] = r;
        x = next;
    }
    return r;
}

/* Read-only find: union by size keeps the depth logarithmic. */
static uint32_t find_const(const oml_closure *c, uint32_t x)
{
    if (x >= c->n_alloc)
        return x;
    while (c->parent[x] != x)
        x = c->parent[x];
    return x;
}

static void elig_update(oml_closure *c, uint32_t r)
{
    int want = c->parent[r] == r && c->size[r] >= 2 && c->deg[r] >= 1;
    uint32_t pos = c->elig_pos[r];
    if (want && pos == NONE) {
        c->elig_pos[r] = c->n_elig;
        c->elig[c->n_elig++] = r;
    } else if (!want && pos != NONE) {
        uint32_t last = c->elig[--c->n_elig];
        c->elig[pos] = last;
        c->elig_pos[last] = pos;
        c->elig_pos[r] = NONE;
    }
}

static int reserve_u32(uint32_t **arr, uint32_t *cap, uint64_t need)
{
    if (need <= *cap)
        return OML_OK;
    uint64_t n = *cap ? 2ull * *cap : 4;
    while (n < need)
        n *= 2;
    if (n > UINT32_MAX)
        n = UINT32_MAX;
    uint32_t *p = realloc(*arr, (size_t)n * sizeof *p);
    if (p == NULL)
        return OML_ENOMEM;
    *arr = p;
    *cap = (uint32_t)n;
    return OML_OK;
}

/* Memory for merging root s into root l, plus `extra` more neighbours of l. */
static int reserve_merge(oml_closure *c, uint32_t l, uint32_t s, uint32_t extra)
{
    if (reserve_u32(&c->members[l], &c->mcap[l], (uint64_t)c->size[l] + c->size[s]) != OML_OK)
        return OML_ENOMEM;
    return reserve_u32(&c->nbr[l], &c->ncap[l], (uint64_t)c->deg[l] + c->deg[s] + extra);
}

/* Memory for one new edge between roots u and v. */
static int reserve_edge(oml_closure *c, uint32_t u, uint32_t v)
{
    if (reserve_u32(&c->nbr[u], &c->ncap[u], (uint64_t)c->deg[u] + 1) != OML_OK ||
        reserve_u32(&c->nbr[v], &c->ncap[v], (uint64_t)c->deg[v] + 1) != OML_OK)
        return OML_ENOMEM;
    return emap_reserve(c, 1);
}

static void do_edge(oml_closure *c, uint32_t u, uint32_t v)
{
    uint32_t pu = c->deg[u]++, pv = c->deg[v]++;
    c->nbr[u][pu] = v;
    c->nbr[v][pv] = u;
    if (u < v)
        emap_insert(c, edge_key(u, v), pu, pv);
    else
        emap_insert(c, edge_key(u, v), pv, pu);
    elig_update(c, u);
    elig_update(c, v);
}

/* Folds root s into root l (|l| >= |s|); memory reserved by reserve_merge. */
static void do_merge(oml_closure *c, uint32_t l, uint32_t s)
{
    if (c->size[l] >= 2 && c->size[s] >= 2)
        c->st.components--;
    else if (c->size[l] == 1 && c->size[s] == 1)
        c->st.components++;

    uint32_t *m = c->members[l], k = c->size[l];
    if (k == 1)
        m[0] = l;
    if (c->size[s] == 1)
        m[k] = s;
    else
        memcpy(m + k, c->members[s], (size_t)c->size[s] * sizeof *m);
    free(c->members[s]);
    c->members[s] = NULL;
    c->mcap[s] = 0;
    c->parent[s] = l;
    c->size[l] += c->size[s];

    for (uint32_t i = 0; i < c->deg[s]; i++) {
        uint32_t n = c->nbr[s][i];
        emap_entry *e = emap_find(c, edge_key(s, n));
        uint32_t pn = s < n ? e->pos_hi : e->pos_lo; /* where s sits in nbr[n] */
        emap_remove(c, e);
        if (dis_roots(c, l, n)) {
            nbr_swap_remove(c, n, pn);
        } else {
            c->nbr[n][pn] = l;
            uint32_t pl = c->deg[l]++;
            c->nbr[l][pl] = n;
            if (l < n)
                emap_insert(c, edge_key(l, n), pl, pn);
            else
                emap_insert(c, edge_key(l, n), pn, pl);
        }
    }
    free(c->nbr[s]);
    c->nbr[s] = NULL;
    c->deg[s] = 0;
    c->ncap[s] = 0;
    elig_update(c, s);
    elig_update(c, l);
}

/* ---- sampling ---- */

static uint32_t rand_member(oml_closure *c, uint32_t r)
{
    if (c->size[r] == 1)
        return r;
    return c->members[r][oml_rng_below(&c->rng, c->size[r])];
}

static void rand_two_members(oml_closure *c, uint32_t r, uint32_t *x, uint32_t *y)
{
    uint32_t n = c->size[r];
    uint32_t i = (uint32_t)oml_rng_below(&c->rng, n);
    uint32_t j = (uint32_t)oml_rng_below(&c->rng, n - 1);
    if (j >= i)
        j++;
    *x = c->members[r][i];
    *y = c->members[r][j];
}

static int push_unique(oml_triplet *out, int *got, oml_triplet t)
{
    for (int i = 0; i < *got; i++)
        if (out[i].a == t.a && out[i].p == t.p && out[i].n == t.n)
            return 0;
    out[(*got)++] = t;
    return 1;
}

/* Triplets made new by merging roots a and b (called before the merge):
 * x in a, y in b are now similar, z in any component dissimilar to a or b. */
static int derive_similar(oml_closure *c, uint32_t a, uint32_t b, oml_triplet *out, int max_out)
{
    uint64_t da = c->deg[a], db = c->deg[b];
    int got = 0;
    if (max_out <= 0 || da + db == 0)
        return 0;
    for (int tries = 0; got < max_out && tries < 4 * max_out; tries++) {
        uint32_t x = rand_member(c, a), y = rand_member(c, b);
        uint64_t k = oml_rng_below(&c->rng, da + db);
        uint32_t nr = k < da ? c->nbr[a][k] : c->nbr[b][k - da];
        uint32_t z = rand_member(c, nr);
        oml_triplet t = oml_rng_below(&c->rng, 2) ? (oml_triplet){x, y, z} : (oml_triplet){y, x, z};
        push_unique(out, &got, t);
    }
    return got;
}

/* Triplets made new by a dissimilar edge between roots a and b (not yet
 * dissimilar): a pair inside one side, the negative from the other. */
static int derive_dissimilar(oml_closure *c, uint32_t a, uint32_t b, oml_triplet *out, int max_out)
{
    uint64_t wa = c->size[a] - 1, wb = c->size[b] - 1;
    int got = 0;
    if (max_out <= 0 || wa + wb == 0)
        return 0;
    for (int tries = 0; got < max_out && tries < 4 * max_out; tries++) {
        /* Side weights |A|(|A|-1)|B| : |B|(|B|-1)|A| reduce to (|A|-1) : (|B|-1). */
        uint32_t pr = oml_rng_below(&c->rng, wa + wb) < wa ? a : b, nr = pr == a ? b : a;
        oml_triplet t;
        rand_two_members(c, pr, &t.a, &t.p);
        t.n = rand_member(c, nr);
        push_unique(out, &got, t);
    }
    return got;
}

/* ---- public API ---- */

int oml_closure_create(oml_closure **out, uint32_t max_nodes, uint32_t max_dis_edges,
                       uint64_t seed)
{
    if (out == NULL || max_nodes == 0)
        return OML_EINVAL;
    oml_closure *c = calloc(1, sizeof *c);
    if (c == NULL)
        return OML_ENOMEM;
    c->max_nodes = max_nodes;
    c->max_dis_edges = max_dis_edges;
    oml_rng_seed(&c->rng, seed);
    *out = c;
    return OML_OK;
}

void oml_closure_destroy(oml_closure *c)
{
    if (c == NULL)
        return;
    for (uint32_t i = 0; i < c->n_alloc; i++) {
        free(c->members[i]);
        free(c->nbr[i]);
    }
    free(c->parent);
    free(c->size);
    free(c->members);
    free(c->mcap);
    free(c->nbr);
    free(c->deg);
    free(c->ncap);
    free(c->elig_pos);
    free(c->elig);
    free(c->emap);
    free(c);
}

static int check_pair(const oml_closure *c, uint32_t a, uint32_t b)
{
    return a == b || a >= c->max_nodes || b >= c->max_nodes ? OML_EINVAL : OML_OK;
}

static uint32_t max3(uint32_t a, uint32_t b, uint32_t d)
{
    uint32_t m = a > b ? a : b;
    return m > d ? m : d;
}

/* Bookkeeping common to every accepted fact: count and hand out what it derived. */
static int accepted(oml_closure *c, int got, int *n_out)
{
    c->st.derived += (uint64_t)got;
    if (n_out != NULL)
        *n_out = got;
    return OML_OK;
}

/* The common start of add_similar / add_dissimilar: validates the pair and
 * the output buffer, makes room for both nodes, finds their roots. */
static int pair_roots(oml_closure *c, uint32_t a, uint32_t b, const oml_triplet *out,
                      int max_out, uint32_t *ra, uint32_t *rb)
{
    if (check_pair(c, a, b) != OML_OK || (max_out > 0 && out == NULL))
        return OML_EINVAL;
    if (grow_nodes(c, max3(a, b, 0) + 1) != OML_OK)
        return OML_ENOMEM;
    *ra = find_mut(c, a);
    *rb = find_mut(c, b);
    return OML_OK;
}

int oml_closure_add_similar(oml_closure *c, uint32_t a, uint32_t b,
                            oml_triplet *out, int max_out, int *n_out)
{
    uint32_t ra, rb;
    int rc = pair_roots(c, a, b, out, max_out, &ra, &rb);
    if (rc != OML_OK)
        return rc;
    int got = 0;
    if (ra != rb) {
        if (dis_roots(c, ra, rb)) {
            c->st.conflicts++;
            return OML_ECONFLICT;
        }
        uint32_t l = c->size[ra] >= c->size[rb] ? ra : rb, s = l == ra ? rb : ra;
        if (reserve_merge(c, l, s, 0) != OML_OK)
            return OML_ENOMEM;
        got = derive_similar(c, ra, rb, out, max_out);
        do_merge(c, l, s);
    }
    c->st.similar_pairs++;
    return accepted(c, got, n_out);
}

int oml_closure_add_dissimilar(oml_closure *c, uint32_t a, uint32_t b,
                               oml_triplet *out, int max_out, int *n_out)
{
    uint32_t ra, rb;
    int rc = pair_roots(c, a, b, out, max_out, &ra, &rb);
    if (rc != OML_OK)
        return rc;
    if (ra == rb) {
        c->st.conflicts++;
        return OML_ECONFLICT;
    }
    int got = 0;
    if (!dis_roots(c, ra, rb)) {
        if (c->n_edges >= c->max_dis_edges)
            return OML_EFULL;
        if (reserve_edge(c, ra, rb) != OML_OK)
            return OML_ENOMEM;
        got = derive_dissimilar(c, ra, rb, out, max_out);
        do_edge(c, ra, rb);
    }
    c->st.dissimilar_pairs++;
    return accepted(c, got, n_out);
}

/* Edges that merging roots l and s would drop: neighbours of s that l has too. */
static uint32_t common_neighbours(const oml_closure *c, uint32_t l, uint32_t s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < c->deg[s]; i++)
        n += dis_roots(c, l, c->nbr[s][i]) ? 1 : 0;
    return n;
}

int oml_closure_add_triplet(oml_closure *c, oml_triplet t,
                            oml_triplet *out, int max_out, int *n_out)
{
    /* Any two equal nodes make the triplet malformed (p == n even
     * contradicts itself), so all three must be distinct and in range. */
    if (check_pair(c, t.a, t.p) != OML_OK || check_pair(c, t.a, t.n) != OML_OK ||
        t.p == t.n || (max_out > 0 && out == NULL))
        return OML_EINVAL;
    if (grow_nodes(c, max3(t.a, t.p, t.n) + 1) != OML_OK)
        return OML_ENOMEM;
    uint32_t ra = find_mut(c, t.a), rp = find_mut(c, t.p), rn = find_mut(c, t.n);

    /* Both parts are checked against the state after the other part: after
     * merging a and p, n must lie outside the merged component. */
    if ((ra != rp && dis_roots(c, ra, rp)) || rn == ra || rn == rp) {
        c->st.conflicts++;
        return OML_ECONFLICT;
    }
    int merge = ra != rp;
    uint32_t l = c->size[ra] >= c->size[rp] ? ra : rp, s = l == ra ? rp : ra;
    int need_edge = !dis_roots(c, ra, rn) && !(merge && dis_roots(c, rp, rn));
    if (need_edge) {
        uint32_t after = c->n_edges - (merge ? common_neighbours(c, l, s) : 0);
        if (after >= c->max_dis_edges)
            return OML_EFULL;
    }
    if (merge && reserve_merge(c, l, s, need_edge ? 1 : 0) != OML_OK)
        return OML_ENOMEM;
    if (need_edge && reserve_edge(c, l, rn) != OML_OK)
        return OML_ENOMEM;

    int got = 0;
    if (merge) {
        got = derive_similar(c, ra, rp, out, max_out);
        do_merge(c, l, s);
    }
    if (need_edge) {
        /* The similar part's triplets all had a negative outside rn, so the
         * two parts never hand out the same triplet. */
        got += derive_dissimilar(c, l, rn, out ? out + got : NULL, max_out - got);
        do_edge(c, l, rn);
    }
    c->st.similar_pairs++;
    c->st.dissimilar_pairs++;
    return accepted(c, got, n_out);
}

int oml_closure_is_similar(const oml_closure *c, uint32_t a, uint32_t b)
{
    if (a >= c->max_nodes || b >= c->max_nodes)
        return 0;
    return find_const(c, a) == find_const(c, b);
}

int oml_closure_is_dissimilar(const oml_closure *c, uint32_t a, uint32_t b)
{
    if (a >= c->n_alloc || b >= c->n_alloc)
        return 0;
    uint32_t ra = find_const(c, a), rb = find_const(c, b);
    return ra != rb && dis_roots(c, ra, rb);
}

/* ---- forgetting a node (its item was deleted) ---- */

/* Drops every dissimilar edge of root r. */
static void drop_edges(oml_closure *c, uint32_t r)
{
    while (c->deg[r] > 0) {
        uint32_t n = c->nbr[r][c->deg[r] - 1];
        emap_entry *e = emap_find(c, edge_key(r, n));
        uint32_t pn = r < n ? e->pos_hi : e->pos_lo; /* where r sits in nbr[n] */
        emap_remove(c, e);
        nbr_swap_remove(c, n, pn);
        c->deg[r]--;
        elig_update(c, n);
    }
    free(c->nbr[r]);
    c->nbr[r] = NULL;
    c->ncap[r] = 0;
}

/* Makes y (a member of root r's component, not r) the root in r's place:
 * y takes r's member array, size, neighbour array (every edge rekeyed from r
 * to y in the edge map and in each neighbour's vector, at the same
 * positions) and r's place in the eligible list. Never allocates: each edge
 * is removed from the map before its new key goes in. */
static void move_root(oml_closure *c, uint32_t r, uint32_t y)
{
    c->members[y] = c->members[r];
    c->mcap[y] = c->mcap[r];
    c->size[y] = c->size[r];
    c->nbr[y] = c->nbr[r];
    c->ncap[y] = c->ncap[r];
    c->deg[y] = c->deg[r];
    for (uint32_t i = 0; i < c->deg[y]; i++) {
        uint32_t n = c->nbr[y][i];
        emap_entry *e = emap_find(c, edge_key(r, n));
        uint32_t pn = r < n ? e->pos_hi : e->pos_lo;
        emap_remove(c, e);
        c->nbr[n][pn] = y;
        if (y < n)
            emap_insert(c, edge_key(y, n), i, pn);
        else
            emap_insert(c, edge_key(y, n), pn, i);
    }
    if (c->elig_pos[r] != NONE) {
        c->elig[c->elig_pos[r]] = y;
        c->elig_pos[y] = c->elig_pos[r];
        c->elig_pos[r] = NONE;
    }
    c->members[r] = NULL;
    c->mcap[r] = 0;
    c->nbr[r] = NULL;
    c->ncap[r] = 0;
    c->deg[r] = 0;
}

int oml_closure_remove(oml_closure *c, uint32_t x)
{
    if (x >= c->max_nodes)
        return OML_EINVAL;
    if (x >= c->n_alloc)
        return 0; /* never touched: nothing is known about it */
    uint32_t r = find_mut(c, x);
    if (c->size[r] == 1) { /* a singleton: only its edges go */
        int had = c->deg[r] > 0;
        drop_edges(c, r);
        elig_update(c, r);
        return had;
    }
    /* Take x out of the member array, keeping the others' order. */
    uint32_t *m = c->members[r], n = c->size[r], pos = 0;
    while (m[pos] != x)
        pos++;
    memmove(m + pos, m + pos + 1, (size_t)(n - pos - 1) * sizeof *m);
    n--;
    uint32_t root = r;
    if (x == r) {
        root = m[0]; /* the first remaining member takes over */
        move_root(c, r, root);
    }
    c->size[root] = n;
    /* Path compression may run through x: every member points at the root. */
    for (uint32_t i = 0; i < n; i++)
        c->parent[m[i]] = root;
    if (n == 1) { /* the component dissolves: singletons keep no member array */
        free(c->members[root]);
        c->members[root] = NULL;
        c->mcap[root] = 0;
        c->st.components--;
    }
    c->parent[x] = x;
    c->size[x] = 1;
    elig_update(c, root);
    elig_update(c, x);
    return 1;
}

int oml_closure_sample(oml_closure *c, oml_triplet *out)
{
    if (c->n_elig == 0)
        return OML_EEMPTY;
    uint32_t r = c->elig[oml_rng_below(&c->rng, c->n_elig)];
    oml_triplet t;
    rand_two_members(c, r, &t.a, &t.p);
    t.n = rand_member(c, c->nbr[r][oml_rng_below(&c->rng, c->deg[r])]);
    c->st.derived++;
    *out = t;
    return OML_OK;
}

void oml_closure_get_stats(const oml_closure *c, oml_closure_stats *st)
{
    *st = c->st;
    st->dis_edges = c->n_edges;
}

/* ---- serialisation (see closure.h for the format) ----
 *
 * Encoded as it is: the parent array with its path compression, and every
 * array the sampler indexes in its own order (members, neighbours, the
 * eligible list), so a decoded closure draws the same random numbers and
 * maps them to the same nodes. The edge map is not written: it is a pure
 * index (lookups by key, positions derivable from the neighbour arrays), so
 * decode rebuilds it, and its layout cannot change an answer. Capacities
 * (mcap, ncap, emap_cap) only decide when memory grows, so they are not
 * written either; the node count n_alloc is, since grow_nodes steps from it.
 *
 * Decode checks the claimed counts against len before allocating, reads
 * into a closure that is destroyable at every step, and validates the whole
 * structure before returning it (see closure.h). */

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the closure codec assumes a little-endian host");

static const uint8_t CLOSURE_MAGIC[4] = {'O', 'M', 'L', 'C'};
#define CODEC_MAX_DEPTH 32u /* union by size keeps paths <= log2(nodes) < 32 */

typedef struct codec_cursor {
    uint8_t *w;       /* writing: the buffer, or NULL to only count */
    const uint8_t *r; /* reading */
    size_t len, pos;
    int bad;          /* a read ran past the end */
} codec_cursor;

static void cc_put(codec_cursor *k, const void *v, size_t n)
{
    if (k->w != NULL && n > 0)
        memcpy(k->w + k->pos, v, n);
    k->pos += n;
}

static void cc_get(codec_cursor *k, void *v, size_t n)
{
    if (n == 0)
        return;
    if (k->bad || k->len - k->pos < n) {
        k->bad = 1;
        memset(v, 0, n);
        return;
    }
    memcpy(v, k->r + k->pos, n);
    k->pos += n;
}

#define CC_PUT(k, v) cc_put(k, &(v), sizeof(v))
#define CC_GET(k, v) cc_get(k, &(v), sizeof(v))

/* Roots that carry data beyond "singleton, no edges". */
static int codec_listed(const oml_closure *c, uint32_t i)
{
    return c->parent[i] == i && (c->size[i] >= 2 || c->deg[i] >= 1);
}

static void closure_encode_body(const oml_closure *c, codec_cursor *k)
{
    uint32_t version = OML_CLOSURE_CODEC_VERSION, n_roots = 0, reserved = 0;
    for (uint32_t i = 0; i < c->n_alloc; i++)
        n_roots += codec_listed(c, i) ? 1 : 0;
    cc_put(k, CLOSURE_MAGIC, sizeof CLOSURE_MAGIC);
    CC_PUT(k, version);
    CC_PUT(k, c->max_nodes);
    CC_PUT(k, c->max_dis_edges);
    CC_PUT(k, c->n_alloc);
    CC_PUT(k, n_roots);
    CC_PUT(k, c->n_edges);
    CC_PUT(k, c->n_elig);
    CC_PUT(k, c->st.components);
    CC_PUT(k, reserved);
    cc_put(k, c->rng.s, sizeof c->rng.s);
    CC_PUT(k, c->st.similar_pairs);
    CC_PUT(k, c->st.dissimilar_pairs);
    CC_PUT(k, c->st.conflicts);
    CC_PUT(k, c->st.derived);
    cc_put(k, c->parent, (size_t)c->n_alloc * sizeof *c->parent);
    for (uint32_t i = 0; i < c->n_alloc; i++) {
        if (!codec_listed(c, i))
            continue;
        CC_PUT(k, i);
        CC_PUT(k, c->size[i]);
        CC_PUT(k, c->deg[i]);
        if (c->size[i] >= 2)
            cc_put(k, c->members[i], (size_t)c->size[i] * sizeof(uint32_t));
        cc_put(k, c->nbr[i], (size_t)c->deg[i] * sizeof(uint32_t));
    }
    cc_put(k, c->elig, (size_t)c->n_elig * sizeof *c->elig);
}

int oml_closure_encode(const oml_closure *c, uint8_t **buf, size_t *len)
{
    if (c == NULL || buf == NULL || len == NULL)
        return OML_EINVAL;
    codec_cursor k = {0};
    closure_encode_body(c, &k); /* sizing pass */
    size_t n = k.pos;
    uint8_t *b = malloc(n);
    if (b == NULL)
        return OML_ENOMEM;
    k = (codec_cursor){.w = b};
    closure_encode_body(c, &k);
    *buf = b;
    *len = n;
    return OML_OK;
}

/* Node arrays of exactly n entries, each node a singleton (as grow_nodes
 * leaves them). n_alloc moves only once all exist, so destroy stays safe. */
static int codec_alloc_nodes(oml_closure *c, uint32_t n)
{
    if (n == 0)
        return OML_OK;
    size_t z = n;
    if ((c->parent = malloc(z * sizeof *c->parent)) == NULL ||
        (c->size = malloc(z * sizeof *c->size)) == NULL ||
        (c->members = calloc(z, sizeof *c->members)) == NULL ||
        (c->mcap = calloc(z, sizeof *c->mcap)) == NULL ||
        (c->nbr = calloc(z, sizeof *c->nbr)) == NULL ||
        (c->deg = calloc(z, sizeof *c->deg)) == NULL ||
        (c->ncap = calloc(z, sizeof *c->ncap)) == NULL ||
        (c->elig_pos = malloc(z * sizeof *c->elig_pos)) == NULL ||
        (c->elig = malloc(z * sizeof *c->elig)) == NULL)
        return OML_ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        c->parent[i] = i;
        c->size[i] = 1;
        c->elig_pos[i] = NONE;
    }
    c->n_alloc = n;
    return OML_OK;
}

#define CODEC_BAD(...) oml_diag_set(diag, OML_EFORMAT, "closure", __VA_ARGS__)

/* Reads the root records into c and owner[] (the root whose member list
 * holds each node, NONE if none yet). */
static int codec_read_roots(oml_closure *c, codec_cursor *k, uint32_t n_roots, uint32_t *owner,
                            oml_diag *diag)
{
    uint32_t n = c->n_alloc, prev = 0;
    for (uint32_t j = 0; j < n_roots; j++) {
        uint32_t node, size, deg;
        CC_GET(k, node);
        CC_GET(k, size);
        CC_GET(k, deg);
        if (k->bad)
            return CODEC_BAD("truncated in root record %u", j);
        if (node >= n)
            return CODEC_BAD("root record %u: node %u >= %u nodes", j, node, n);
        if (j > 0 && node <= prev)
            return CODEC_BAD("root record %u: node %u after node %u (want ascending)", j, node,
                             prev);
        prev = node;
        if (c->parent[node] != node)
            return CODEC_BAD("root record %u: node %u is not a root", j, node);
        if (size == 0 || size > n)
            return CODEC_BAD("root record %u: size %u (nodes %u)", j, size, n);
        if (size < 2 && deg == 0)
            return CODEC_BAD("root record %u: a lone node without edges is listed", j);
        if (deg >= n)
            return CODEC_BAD("root record %u: degree %u (nodes %u)", j, deg, n);
        if (size >= 2) {
            if ((k->len - k->pos) / sizeof(uint32_t) < size)
                return CODEC_BAD("truncated in the members of root %u", node);
            if ((c->members[node] = malloc((size_t)size * sizeof(uint32_t))) == NULL)
                return oml_diag_set(diag, OML_ENOMEM, "closure", "out of memory");
            c->mcap[node] = size;
            cc_get(k, c->members[node], (size_t)size * sizeof(uint32_t));
            for (uint32_t i = 0; i < size; i++) {
                uint32_t m = c->members[node][i];
                if (m >= n)
                    return CODEC_BAD("root %u: member %u >= %u nodes", node, m, n);
                if (owner[m] == node)
                    return CODEC_BAD("root %u lists member %u twice", node, m);
                if (owner[m] != NONE)
                    return CODEC_BAD("node %u is in the members of roots %u and %u", m,
                                     owner[m], node);
                owner[m] = node;
            }
            if (owner[node] != node)
                return CODEC_BAD("root %u is not among its own members", node);
        } else {
            if (owner[node] != NONE)
                return CODEC_BAD("root %u is in the members of root %u", node, owner[node]);
            owner[node] = node;
        }
        c->size[node] = size;
        if (deg > 0) {
            if ((k->len - k->pos) / sizeof(uint32_t) < deg)
                return CODEC_BAD("truncated in the neighbours of root %u", node);
            if ((c->nbr[node] = malloc((size_t)deg * sizeof(uint32_t))) == NULL)
                return oml_diag_set(diag, OML_ENOMEM, "closure", "out of memory");
            c->ncap[node] = deg;
            cc_get(k, c->nbr[node], (size_t)deg * sizeof(uint32_t));
            c->deg[node] = deg;
        }
    }
    return OML_OK;
}

/* Every node belongs to exactly one component, and its parent chain stays
 * inside it and reaches its root within CODEC_MAX_DEPTH steps: so find()
 * terminates, quickly, on the root the member lists say. */
static int codec_check_forest(const oml_closure *c, uint32_t *owner, uint8_t *depth,
                              uint32_t components, oml_diag *diag)
{
    uint32_t n = c->n_alloc, comps = 0;
    for (uint32_t x = 0; x < n; x++) {
        if (c->parent[x] == x) {
            if (owner[x] == NONE)
                owner[x] = x; /* an unlisted singleton */
            else if (owner[x] != x)
                return CODEC_BAD("root %u is in the members of root %u", x, owner[x]);
            comps += c->size[x] >= 2 ? 1 : 0;
            depth[x] = 0;
        } else {
            if (owner[x] == NONE)
                return CODEC_BAD("node %u has a parent but is in no member list", x);
            depth[x] = UINT8_MAX;
        }
    }
    if (comps != components)
        return CODEC_BAD("%u components, the header says %u", comps, components);
    for (uint32_t x = 0; x < n; x++)
        if (owner[c->parent[x]] != owner[x])
            return CODEC_BAD("node %u has parent %u in another component", x, c->parent[x]);
    for (uint32_t x = 0; x < n; x++) {
        uint32_t y = x, steps = 0;
        while (depth[y] == UINT8_MAX) {
            y = c->parent[y];
            if (++steps > CODEC_MAX_DEPTH)
                return CODEC_BAD("the parent chain of node %u is longer than %u (a cycle?)", x,
                                 CODEC_MAX_DEPTH);
        }
        uint32_t d = depth[y] + steps;
        if (d > CODEC_MAX_DEPTH)
            return CODEC_BAD("the parent chain of node %u is longer than %u", x, CODEC_MAX_DEPTH);
        for (y = x; steps > 0; steps--, y = c->parent[y])
            depth[y] = (uint8_t)d--;
    }
    return OML_OK;
}

/* Rebuilds the edge map from the neighbour arrays, checking that they are
 * symmetric, join distinct roots and hold no edge twice. */
static int codec_build_edges(oml_closure *c, uint32_t n_edges, oml_diag *diag)
{
    uint32_t n = c->n_alloc, matched = 0;
    if (n_edges > 0 && emap_reserve(c, n_edges) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "closure", "out of memory");
    for (uint32_t u = 0; u < n; u++)
        for (uint32_t i = 0; i < c->deg[u]; i++) {
            uint32_t v = c->nbr[u][i];
            if (v >= n || v == u || c->parent[v] != v)
                return CODEC_BAD("root %u: neighbour %u is not another root", u, v);
            if (u > v)
                continue;
            if (c->n_edges == n_edges)
                return CODEC_BAD("more than the %u edges the header says", n_edges);
            if (emap_find(c, edge_key(u, v)) != NULL)
                return CODEC_BAD("edge %u-%u is listed twice", u, v);
            emap_insert(c, edge_key(u, v), i, NONE);
        }
    for (uint32_t u = 0; u < n; u++)
        for (uint32_t i = 0; i < c->deg[u]; i++) {
            uint32_t v = c->nbr[u][i];
            if (u < v)
                continue;
            emap_entry *e = emap_find(c, edge_key(u, v));
            if (e == NULL)
                return CODEC_BAD("edge %u-%u is listed at %u only", v, u, u);
            if (e->pos_hi != NONE)
                return CODEC_BAD("edge %u-%u is listed twice", v, u);
            e->pos_hi = i;
            matched++;
        }
    if (c->n_edges != n_edges || matched != n_edges)
        return CODEC_BAD("edge lists are not symmetric or do not hold the %u edges the header says",
                         n_edges);
    return OML_OK;
}

static int codec_read_elig(oml_closure *c, codec_cursor *k, uint32_t n_elig, oml_diag *diag)
{
    uint32_t want = 0;
    cc_get(k, c->elig, (size_t)n_elig * sizeof *c->elig);
    if (k->bad)
        return CODEC_BAD("truncated in the eligible list");
    for (uint32_t j = 0; j < n_elig; j++) {
        uint32_t r = c->elig[j];
        if (r >= c->n_alloc || c->parent[r] != r || c->size[r] < 2 || c->deg[r] < 1)
            return CODEC_BAD("eligible entry %u: node %u gives no triplets", j, r);
        if (c->elig_pos[r] != NONE)
            return CODEC_BAD("eligible entry %u: node %u is listed twice", j, r);
        c->elig_pos[r] = j;
    }
    c->n_elig = n_elig;
    for (uint32_t x = 0; x < c->n_alloc; x++)
        want += c->parent[x] == x && c->size[x] >= 2 && c->deg[x] >= 1;
    if (want != n_elig)
        return CODEC_BAD("%u roots give triplets, the eligible list has %u", want, n_elig);
    return OML_OK;
}

static int closure_decode_into(oml_closure *c, codec_cursor *k, uint32_t n_alloc,
                               uint32_t n_roots, uint32_t n_edges, uint32_t n_elig,
                               uint32_t components, oml_diag *diag)
{
    if (codec_alloc_nodes(c, n_alloc) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "closure", "out of memory");
    cc_get(k, c->parent, (size_t)n_alloc * sizeof *c->parent);
    if (k->bad)
        return CODEC_BAD("truncated in the parent array");
    for (uint32_t x = 0; x < n_alloc; x++)
        if (c->parent[x] >= n_alloc)
            return CODEC_BAD("node %u has parent %u >= %u nodes", x, c->parent[x], n_alloc);

    uint32_t *owner = NULL;
    uint8_t *depth = NULL;
    int rc = OML_OK;
    if (n_alloc > 0 && ((owner = malloc((size_t)n_alloc * sizeof *owner)) == NULL ||
                        (depth = malloc(n_alloc)) == NULL))
        rc = oml_diag_set(diag, OML_ENOMEM, "closure", "out of memory");
    if (rc == OML_OK) {
        for (uint32_t x = 0; x < n_alloc; x++)
            owner[x] = NONE;
        rc = codec_read_roots(c, k, n_roots, owner, diag);
    }
    if (rc == OML_OK)
        rc = codec_check_forest(c, owner, depth, components, diag);
    free(owner);
    free(depth);
    if (rc == OML_OK)
        rc = codec_build_edges(c, n_edges, diag);
    if (rc == OML_OK)
        rc = codec_read_elig(c, k, n_elig, diag);
    if (rc == OML_OK && k->pos != k->len)
        rc = CODEC_BAD("%zu trailing bytes", k->len - k->pos);
    return rc;
}

int oml_closure_decode(oml_closure **out, const uint8_t *buf, size_t len, oml_diag *diag)
{
    if (out == NULL || (buf == NULL && len > 0))
        return oml_diag_set(diag, OML_EINVAL, "closure", "no output or no buffer");
    if (len < sizeof CLOSURE_MAGIC || memcmp(buf, CLOSURE_MAGIC, sizeof CLOSURE_MAGIC) != 0)
        return CODEC_BAD("not an encoded closure (bad magic)");
    codec_cursor k = {.r = buf, .len = len, .pos = sizeof CLOSURE_MAGIC};
    uint32_t version, max_nodes, max_dis_edges, n_alloc, n_roots, n_edges, n_elig, components,
        reserved;
    CC_GET(&k, version);
    if (k.bad)
        return CODEC_BAD("truncated header");
    if (version != OML_CLOSURE_CODEC_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "closure",
                            "closure format version %u; this build reads version %u", version,
                            OML_CLOSURE_CODEC_VERSION);
    CC_GET(&k, max_nodes);
    CC_GET(&k, max_dis_edges);
    CC_GET(&k, n_alloc);
    CC_GET(&k, n_roots);
    CC_GET(&k, n_edges);
    CC_GET(&k, n_elig);
    CC_GET(&k, components);
    CC_GET(&k, reserved);
    oml_rng rng;
    oml_closure_stats st = {0};
    cc_get(&k, rng.s, sizeof rng.s);
    CC_GET(&k, st.similar_pairs);
    CC_GET(&k, st.dissimilar_pairs);
    CC_GET(&k, st.conflicts);
    CC_GET(&k, st.derived);
    if (k.bad)
        return CODEC_BAD("truncated header");
    if (reserved != 0)
        return CODEC_BAD("reserved header word is %u, want 0", reserved);
    if (max_nodes == 0 || n_alloc > max_nodes)
        return CODEC_BAD("%u nodes allocated, max_nodes %u", n_alloc, max_nodes);
    if (n_edges > max_dis_edges)
        return CODEC_BAD("%u edges, max_dis_edges %u", n_edges, max_dis_edges);
    if (n_roots > n_alloc || n_elig > n_alloc || components > n_roots)
        return CODEC_BAD("%u roots, %u eligible, %u components in %u nodes", n_roots, n_elig,
                         components, n_alloc);
    if ((rng.s[0] | rng.s[1] | rng.s[2] | rng.s[3]) == 0)
        return CODEC_BAD("RNG state is all zero");
    /* The smallest body the counts allow: refuse before allocating for them. */
    uint64_t need = 4ull * n_alloc + 12ull * n_roots + 8ull * n_edges + 4ull * n_elig;
    if (need > len - k.pos)
        return CODEC_BAD("%u nodes, %u roots and %u edges do not fit in %zu bytes (truncated?)",
                         n_alloc, n_roots, n_edges, len);

    oml_closure *c;
    if (oml_closure_create(&c, max_nodes, max_dis_edges, 0) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "closure", "out of memory");
    st.components = components;
    c->rng = rng;
    c->st = st;
    int rc = closure_decode_into(c, &k, n_alloc, n_roots, n_edges, n_elig, components, diag);
    if (rc != OML_OK) {
        oml_closure_destroy(c);
        return rc;
    }
    *out = c;
    return OML_OK;
}
