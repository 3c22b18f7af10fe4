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

#include <stddef.h>

#include "config.h"
#include "err.h"
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

/* The same from each row's h(0) (n, lay.in), the input already on the
 * basis (oml_net_project): what the index builder embeds from the
 * projections it keeps between builds. */
int oml_snapshot_embed_h0(const oml_snapshot *s, const float *H0, int32_t n, float *out);

/* ---- the model file a batch pipeline embeds with (ExportModel) ----
 * Everything a forward pass needs and nothing a learner needs, so that
 * offline code embeds exactly as the daemon serves. Little-endian:
 *   "OMLSNAP\0" | u32 format version 1 | u32 dim | u32 layers | u32 hidden
 *   | u32 emb | u32 flags (1: the input is standardised, 2: heads have an
 *   offset b(l)) | u64 model version | u64 updates
 *   | f32 alpha[layers + 1] | u64 parameter count | f32 params[count]
 *   | u32 CRC-32 (zlib) of everything before it
 * params is the block net.h lays out: mu (dim), 1/sd (dim, if flag 1),
 * W(1) (hidden, dim) and Theta(0) (emb, dim), W(2..L) (hidden, hidden),
 * Theta(1..L) (emb, hidden), then b(0..L) (emb each, if flag 2).
 * A head is f(l) = z / ||z||, z = Theta(l) h(l) (+ b(l)), h(0) = (x - mu)
 * (* 1/sd), h(l) = ReLU(W(l) h(l-1)). */
#define OML_SNAPSHOT_FILE_VERSION 1u

/* Serialises s into a malloc'd buffer (*buf, *len) owned by the caller.
 * OML_ENOMEM. */
int oml_snapshot_encode(const oml_snapshot *s, uint8_t **buf, size_t *len);
/* Rebuilds a snapshot (refcount 1) from buf (borrowed), validated whole
 * before anything is allocated beyond len: OML_EFORMAT (bad magic,
 * checksum, sizes, a shape out of bounds, a number that is not finite) or
 * OML_EVERSION, with the diag (field "model") saying what; OML_ENOMEM. */
int oml_snapshot_decode(oml_snapshot **out, const uint8_t *buf, size_t len, oml_diag *diag);

#endif
