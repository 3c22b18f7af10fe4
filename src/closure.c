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

#include "closure_int.h"

#define MIN_NODES 64u
#define EMAP_MIN_CAP 16u

/* ---- edge map: open addressing on the root pair, backward-shift delete ---- */

uint64_t oml__closure_edge_key(uint32_t u, uint32_t v)
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

emap_entry *oml__closure_emap_find(const oml_closure *c, uint64_t k)
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

int oml__closure_emap_reserve(oml_closure *c, uint32_t extra)
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
void oml__closure_emap_insert(oml_closure *c, uint64_t k, uint32_t pos_lo, uint32_t pos_hi)
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
    return oml__closure_emap_find(c, oml__closure_edge_key(u, v)) != NULL;
}

/* Records that nbr[r][pos] now holds `other`. */
static void edge_set_pos(oml_closure *c, uint32_t r, uint32_t other, uint32_t pos)
{
    emap_entry *e = oml__closure_emap_find(c, oml__closure_edge_key(r, other));
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
        c->elig_pos[i] = CLOSURE_NONE;
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
    if (want && pos == CLOSURE_NONE) {
        c->elig_pos[r] = c->n_elig;
        c->elig[c->n_elig++] = r;
    } else if (!want && pos != CLOSURE_NONE) {
        uint32_t last = c->elig[--c->n_elig];
        c->elig[pos] = last;
        c->elig_pos[last] = pos;
        c->elig_pos[r] = CLOSURE_NONE;
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
    return oml__closure_emap_reserve(c, 1);
}

static void do_edge(oml_closure *c, uint32_t u, uint32_t v)
{
    uint32_t pu = c->deg[u]++, pv = c->deg[v]++;
    c->nbr[u][pu] = v;
    c->nbr[v][pv] = u;
    if (u < v)
        oml__closure_emap_insert(c, oml__closure_edge_key(u, v), pu, pv);
    else
        oml__closure_emap_insert(c, oml__closure_edge_key(u, v), pv, pu);
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
        emap_entry *e = oml__closure_emap_find(c, oml__closure_edge_key(s, n));
        uint32_t pn = s < n ? e->pos_hi : e->pos_lo; /* where s sits in nbr[n] */
        emap_remove(c, e);
        if (dis_roots(c, l, n)) {
            nbr_swap_remove(c, n, pn);
        } else {
            c->nbr[n][pn] = l;
            uint32_t pl = c->deg[l]++;
            c->nbr[l][pl] = n;
            if (l < n)
                oml__closure_emap_insert(c, oml__closure_edge_key(l, n), pl, pn);
            else
                oml__closure_emap_insert(c, oml__closure_edge_key(l, n), pn, pl);
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
        emap_entry *e = oml__closure_emap_find(c, oml__closure_edge_key(r, n));
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
        emap_entry *e = oml__closure_emap_find(c, oml__closure_edge_key(r, n));
        uint32_t pn = r < n ? e->pos_hi : e->pos_lo;
        emap_remove(c, e);
        c->nbr[n][pn] = y;
        if (y < n)
            oml__closure_emap_insert(c, oml__closure_edge_key(y, n), i, pn);
        else
            oml__closure_emap_insert(c, oml__closure_edge_key(y, n), pn, i);
    }
    if (c->elig_pos[r] != CLOSURE_NONE) {
        c->elig[c->elig_pos[r]] = y;
        c->elig_pos[y] = c->elig_pos[r];
        c->elig_pos[r] = CLOSURE_NONE;
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
