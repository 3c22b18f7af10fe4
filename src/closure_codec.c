/* closure_codec.c - the closure's encoding (a checkpoint section; format
 * in closure.h). */
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "closure_int.h"

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

static const uint8_t CLOSURE_MAGIC[4] = {'O', 'M', 'L', 'C'};
#define CODEC_MAX_DEPTH 32u /* union by size keeps paths <= log2(nodes) < 32 */

/* Roots that carry data beyond "singleton, no edges". */
static int codec_listed(const oml_closure *c, uint32_t i)
{
    return c->parent[i] == i && (c->size[i] >= 2 || c->deg[i] >= 1);
}

static void closure_encode_body(const oml_closure *c, oml_writer *k)
{
    uint32_t version = OML_CLOSURE_CODEC_VERSION, n_roots = 0, reserved = 0;
    for (uint32_t i = 0; i < c->n_alloc; i++)
        n_roots += codec_listed(c, i) ? 1 : 0;
    oml_put_bytes(k, CLOSURE_MAGIC, sizeof CLOSURE_MAGIC);
    OML_PUT(k, version);
    OML_PUT(k, c->max_nodes);
    OML_PUT(k, c->max_dis_edges);
    OML_PUT(k, c->n_alloc);
    OML_PUT(k, n_roots);
    OML_PUT(k, c->n_edges);
    OML_PUT(k, c->n_elig);
    OML_PUT(k, c->st.components);
    OML_PUT(k, reserved);
    oml_put_le(k, c->rng.s, sizeof c->rng.s[0], 4);
    OML_PUT(k, c->st.similar_pairs);
    OML_PUT(k, c->st.dissimilar_pairs);
    OML_PUT(k, c->st.conflicts);
    OML_PUT(k, c->st.derived);
    oml_put_le(k, c->parent, 4, (size_t)c->n_alloc);
    for (uint32_t i = 0; i < c->n_alloc; i++) {
        if (!codec_listed(c, i))
            continue;
        OML_PUT(k, i);
        OML_PUT(k, c->size[i]);
        OML_PUT(k, c->deg[i]);
        if (c->size[i] >= 2)
            oml_put_le(k, c->members[i], 4, (size_t)c->size[i]);
        oml_put_le(k, c->nbr[i], 4, (size_t)c->deg[i]);
    }
    oml_put_le(k, c->elig, 4, (size_t)c->n_elig);
}

int oml_closure_encode(const oml_closure *c, uint8_t **buf, size_t *len)
{
    if (c == NULL || buf == NULL || len == NULL)
        return OML_EINVAL;
    oml_writer k = oml_writer_counting();
    closure_encode_body(c, &k); /* sizing pass */
    size_t n = k.pos;
    uint8_t *b = malloc(n);
    if (b == NULL)
        return OML_ENOMEM;
    k = oml_writer_into(b, n);
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
        c->elig_pos[i] = CLOSURE_NONE;
    }
    c->n_alloc = n;
    return OML_OK;
}

#define CODEC_BAD(...) oml_diag_set(diag, OML_EFORMAT, "closure", __VA_ARGS__)

/* Reads the root records into c and owner[] (the root whose member list
 * holds each node, CLOSURE_NONE if none yet). */
static int codec_read_roots(oml_closure *c, oml_reader *k, uint32_t n_roots, uint32_t *owner,
                            oml_diag *diag)
{
    uint32_t n = c->n_alloc, prev = 0;
    for (uint32_t j = 0; j < n_roots; j++) {
        uint32_t node, size, deg;
        OML_GET(k, node);
        OML_GET(k, size);
        OML_GET(k, deg);
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
            oml_get_le(k, c->members[node], 4, (size_t)size);
            for (uint32_t i = 0; i < size; i++) {
                uint32_t m = c->members[node][i];
                if (m >= n)
                    return CODEC_BAD("root %u: member %u >= %u nodes", node, m, n);
                if (owner[m] == node)
                    return CODEC_BAD("root %u lists member %u twice", node, m);
                if (owner[m] != CLOSURE_NONE)
                    return CODEC_BAD("node %u is in the members of roots %u and %u", m,
                                     owner[m], node);
                owner[m] = node;
            }
            if (owner[node] != node)
                return CODEC_BAD("root %u is not among its own members", node);
        } else {
            if (owner[node] != CLOSURE_NONE)
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
            oml_get_le(k, c->nbr[node], 4, (size_t)deg);
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
            if (owner[x] == CLOSURE_NONE)
                owner[x] = x; /* an unlisted singleton */
            else if (owner[x] != x)
                return CODEC_BAD("root %u is in the members of root %u", x, owner[x]);
            comps += c->size[x] >= 2 ? 1 : 0;
            depth[x] = 0;
        } else {
            if (owner[x] == CLOSURE_NONE)
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
    if (n_edges > 0 && oml__closure_emap_reserve(c, n_edges) != OML_OK)
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
            if (oml__closure_emap_find(c, oml__closure_edge_key(u, v)) != NULL)
                return CODEC_BAD("edge %u-%u is listed twice", u, v);
            oml__closure_emap_insert(c, oml__closure_edge_key(u, v), i, CLOSURE_NONE);
        }
    for (uint32_t u = 0; u < n; u++)
        for (uint32_t i = 0; i < c->deg[u]; i++) {
            uint32_t v = c->nbr[u][i];
            if (u < v)
                continue;
            emap_entry *e = oml__closure_emap_find(c, oml__closure_edge_key(u, v));
            if (e == NULL)
                return CODEC_BAD("edge %u-%u is listed at %u only", v, u, u);
            if (e->pos_hi != CLOSURE_NONE)
                return CODEC_BAD("edge %u-%u is listed twice", v, u);
            e->pos_hi = i;
            matched++;
        }
    if (c->n_edges != n_edges || matched != n_edges)
        return CODEC_BAD("edge lists are not symmetric or do not hold the %u edges the header says",
                         n_edges);
    return OML_OK;
}

static int codec_read_elig(oml_closure *c, oml_reader *k, uint32_t n_elig, oml_diag *diag)
{
    uint32_t want = 0;
    oml_get_le(k, c->elig, 4, (size_t)n_elig);
    if (k->bad)
        return CODEC_BAD("truncated in the eligible list");
    for (uint32_t j = 0; j < n_elig; j++) {
        uint32_t r = c->elig[j];
        if (r >= c->n_alloc || c->parent[r] != r || c->size[r] < 2 || c->deg[r] < 1)
            return CODEC_BAD("eligible entry %u: node %u gives no triplets", j, r);
        if (c->elig_pos[r] != CLOSURE_NONE)
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

static int closure_decode_into(oml_closure *c, oml_reader *k, uint32_t n_alloc,
                               uint32_t n_roots, uint32_t n_edges, uint32_t n_elig,
                               uint32_t components, oml_diag *diag)
{
    if (codec_alloc_nodes(c, n_alloc) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "closure", "out of memory");
    oml_get_le(k, c->parent, 4, (size_t)n_alloc);
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
            owner[x] = CLOSURE_NONE;
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
    oml_reader k = oml_reader_of(buf, len);
    k.pos = sizeof CLOSURE_MAGIC;
    uint32_t version, max_nodes, max_dis_edges, n_alloc, n_roots, n_edges, n_elig, components,
        reserved;
    OML_GET(&k, version);
    if (k.bad)
        return CODEC_BAD("truncated header");
    if (version != OML_CLOSURE_CODEC_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "closure",
                            "closure format version %u; this build reads version %u", version,
                            OML_CLOSURE_CODEC_VERSION);
    OML_GET(&k, max_nodes);
    OML_GET(&k, max_dis_edges);
    OML_GET(&k, n_alloc);
    OML_GET(&k, n_roots);
    OML_GET(&k, n_edges);
    OML_GET(&k, n_elig);
    OML_GET(&k, components);
    OML_GET(&k, reserved);
    oml_rng rng;
    oml_closure_stats st = {0};
    oml_get_le(&k, rng.s, sizeof rng.s[0], 4);
    OML_GET(&k, st.similar_pairs);
    OML_GET(&k, st.dissimilar_pairs);
    OML_GET(&k, st.conflicts);
    OML_GET(&k, st.derived);
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
