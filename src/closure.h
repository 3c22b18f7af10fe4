/* closure.h - transitive closure of similar / dissimilar constraints.
 *
 * OAHU Sec. 3.1, footnote 1: similar pairs compose (x1~x2, x2~x3 => x1~x3), and
 * a similar pair next to a dissimilar one gives a dissimilar pair
 * (x1~x2, x1!~x3 => x2!~x3). So "similar" is the connected components of the
 * similar-pair graph (union-find), and two items are dissimilar exactly when
 * their components are joined by at least one dissimilar edge. A triplet
 * (a, p, n) holds when a~p and a!~n.
 *
 * The closure is kept incrementally and never enumerated: components keep
 * member arrays (merged smaller-into-larger) and sets of dissimilar
 * components, and derived triplets are *sampled*. Memory is bounded by the
 * number of nodes and dissimilar component edges given at creation.
 *
 * Nodes are item slots (uint32). A slot is reused once its item is deleted
 * (store.h, SLOT HOLDERS): the owner calls oml_closure_remove() at every
 * delete, so a new item in the slot inherits nothing. Thread: one owner. */
#ifndef OML_CLOSURE_H
#define OML_CLOSURE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "rng.h"

typedef struct oml_triplet {
    uint32_t a, p, n; /* anchor, positive, negative (item slots) */
} oml_triplet;

typedef struct oml_closure_stats {
    uint64_t similar_pairs;    /* accepted similar facts */
    uint64_t dissimilar_pairs; /* accepted dissimilar facts */
    uint64_t conflicts;        /* refused: contradicted the closure */
    uint64_t derived;          /* triplets handed out by derive/sample */
    uint32_t components;       /* components with >= 2 members */
    uint32_t dis_edges;        /* dissimilar component pairs */
} oml_closure_stats;

typedef struct oml_closure oml_closure;

/* max_nodes: node ids must be < max_nodes; max_dis_edges: bound on distinct
 * dissimilar component pairs. */
int oml_closure_create(oml_closure **out, uint32_t max_nodes, uint32_t max_dis_edges,
                       uint64_t seed);
void oml_closure_destroy(oml_closure *c); /* accepts NULL */

/* Adds a fact. Each call may return up to max_out triplets newly implied by
 * this fact (sampled without listing them all; possibly fewer) into out and
 * their number into *n_out (out/n_out may be NULL when max_out is 0).
 * Errors leave the closure unchanged: OML_EINVAL (a == b, node out of range),
 * OML_ECONFLICT (similar across a dissimilar edge, or dissimilar inside a
 * component), OML_EFULL (dissimilar edge bound), OML_ENOMEM. A fact that is
 * already implied succeeds and derives nothing. */
int oml_closure_add_similar(oml_closure *c, uint32_t a, uint32_t b,
                            oml_triplet *out, int max_out, int *n_out);
int oml_closure_add_dissimilar(oml_closure *c, uint32_t a, uint32_t b,
                               oml_triplet *out, int max_out, int *n_out);
/* a~p and a!~n together; refused as a whole if either part conflicts. */
int oml_closure_add_triplet(oml_closure *c, oml_triplet t,
                            oml_triplet *out, int max_out, int *n_out);

/* Forgets node x (its item was deleted and its slot may be reused): x
 * leaves its component and has no dissimilar edge any more, so it is a
 * fresh singleton that no sample or derivation returns until a new fact
 * names it. What x implied about the others stays: the rest of its
 * component stays similar (union-find keeps them joined) and keeps the
 * component's dissimilar edges; if x was the root, the first remaining
 * member takes its place (members, edges, eligibility). O(size of x's
 * component + its degree); never allocates. Returns 1 if x was part of a
 * fact (a component or an edge), 0 if nothing was known about it,
 * OML_EINVAL if x >= max_nodes. */
int oml_closure_remove(oml_closure *c, uint32_t x);

int oml_closure_is_similar(const oml_closure *c, uint32_t a, uint32_t b);
int oml_closure_is_dissimilar(const oml_closure *c, uint32_t a, uint32_t b);

/* Samples one triplet implied by the whole closure so far, uniformly enough
 * for training streams. OML_EEMPTY if the closure implies no triplet. */
int oml_closure_sample(oml_closure *c, oml_triplet *out);

void oml_closure_get_stats(const oml_closure *c, oml_closure_stats *st);

/* ---- bit-exact serialisation (for checkpoints) ----
 *
 * Everything that decides a future answer is written, in the orders the
 * sampler indexes: the bounds, the RNG state, the counters, the union-find
 * parent array as it is (path compression included), member and dissimilar
 * neighbour arrays of every root in their array order, and the eligible
 * root list in its order. Format version OML_CLOSURE_CODEC_VERSION,
 * little-endian u32s unless said:
 *   "OMLC" | version | max_nodes | max_dis_edges | nodes (allocated) |
 *   roots (listed below) | dis_edges | eligible | components | 0 (reserved)
 *   u64 rng[4] | u64 similar_pairs, dissimilar_pairs, conflicts, derived
 *   parent[nodes]
 *   roots, ascending node, every root with >= 2 members or >= 1 edge:
 *     node | size | deg | members[size] (only if size >= 2) | nbr[deg]
 *   eligible[eligible]
 * Canonical: a buffer that decodes re-encodes to itself. No checksum (the
 * checkpoint file carries one). */
#define OML_CLOSURE_CODEC_VERSION 1u

/* Serialises c into a malloc'd buffer (*buf, *len) owned by the caller.
 * OML_EINVAL, OML_ENOMEM. */
int oml_closure_encode(const oml_closure *c, uint8_t **buf, size_t *len);

/* Rebuilds a closure from buf (borrowed). Afterwards every query answers as
 * in the encoded closure and every later add_* / sample call returns the
 * same triplets, stats and errors as the encoded one would have. The input
 * is validated as a whole (union-find acyclic with depth <= 32, members
 * partitioning the nodes by root, edges symmetric between distinct roots
 * without duplicates, eligible list exact, counts and bounds consistent, RNG
 * state not all zero) before it is used: OML_EVERSION, OML_EFORMAT with a
 * diag (field "closure") saying what, OML_EINVAL, OML_ENOMEM. Allocation
 * is bounded by a constant times len. */
int oml_closure_decode(oml_closure **out, const uint8_t *buf, size_t len, oml_diag *diag);

#endif
