/* snapshot.h - an immutable copy of a model that any number of readers share.
 *
 * A snapshot is one allocation: configuration, layout, hedge weights, version
 * and the whole parameter block (copied with one memcpy from the learner).
 * After creation nothing in it changes, so readers on any thread may use it
 * without locks; lifetime is an atomic reference count. */
#ifndef OML_SNAPSHOT_H
#define OML_SNAPSHOT_H

#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "net.h"

typedef struct oml_snapshot {
    oml_config cfg;
    oml_net_layout lay;
    float alpha[OML_MAX_LAYERS + 1]; /* hedge weights, sum to 1 */
    uint64_t version;                /* model version that produced it */
    uint64_t updates;                /* triplets applied so far */
    atomic_int _refs;
    float params[];                  /* lay.count floats */
} oml_snapshot;

/* Returns an owned snapshot (refcount 1) copying params and alpha, or NULL. */
oml_snapshot *oml_snapshot_create(const oml_config *cfg, const float *params,
                                  const float *alpha, uint64_t version, uint64_t updates);
oml_snapshot *oml_snapshot_retain(oml_snapshot *s);
void oml_snapshot_release(oml_snapshot *s); /* accepts NULL; frees at zero */

static inline int oml_snapshot_heads(const oml_snapshot *s)
{
    return s->cfg.layers + 1;
}

/* Embeds n rows X (n, dim) through every head: out is (heads, n, emb), head
 * major, each row L2-normalised. Thread-safe (allocates its own workspace).
 * OML_ENOMEM on allocation failure. */
int oml_snapshot_embed(const oml_snapshot *s, const float *X, int32_t n, float *out);

#endif
