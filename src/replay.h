/* replay.h - the bounded store of accepted triplets that the learner
 * rehearses, and the schedule that mixes them with new ones.
 *
 * A triplet seen once is barely learned (LEARNING-NOTES: one pass at a small
 * step takes in almost nothing), so every accepted triplet that names stored
 * items is kept, as its three store slots, in a ring of the newest `cap`
 * triplets; steps then mix new triplets with ones drawn from the ring.
 * The ring keeps the newest rather than a uniform sample of all history so
 * that when what the clicks mean changes, the old meaning leaves it, with
 * its weight (a rehearsal weighs it as its first step did). Its memory is
 * 16 bytes a triplet (OML_REPLAY_BYTES).
 *
 * Everything here is a function of the calls made and of the learner's
 * seeded RNG, so a log replayed in order rebuilds the same ring and the
 * same model bit for bit. One owner thread. */
#ifndef OML_REPLAY_H
#define OML_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "learner.h"
#include "store.h"

#define OML_REPLAY_NONE UINT32_MAX /* a member given inline (not stored): not kept */
#define OML_REPLAY_BYTES 16u       /* per kept triplet: 3 slots and its weight */

typedef struct oml_replay {
    uint32_t cap;       /* triplets kept at most */
    uint32_t n;         /* ring entries filled (some may be dropped: a deleted item) */
    uint32_t next;      /* where the next triplet goes */
    uint32_t live;      /* filled entries not dropped */
    double credit;      /* rehearsed triplets owed to the new ones learned so far */
    uint32_t *slots;    /* (cap, 3) store slots; OML_REPLAY_NONE in [0]: dropped */
    float *weights;     /* (cap) each kept triplet's weight */
    /* new triplets waiting to fill a mini-batch (oml_replay_add): their
     * rows (borrowed: valid until the flush) and slots; NULL in a zeroed
     * struct, which then learns every part batch at once */
    int32_t n_pending;
    const float **_pending_rows; /* 3 * OML_MAX_BATCH */
    uint32_t *_pending_slots;    /* 3 * OML_MAX_BATCH */
    float *_pending_weights;     /* OML_MAX_BATCH */
} oml_replay;

/* An empty ring for cap triplets (cap 0: nothing is kept or rehearsed).
 * OML_ENOMEM. */
int oml_replay_init(oml_replay *r, uint32_t cap);
void oml_replay_free(oml_replay *r); /* accepts a zeroed struct */

/* Drops every kept triplet that names slot (its item was deleted or
 * replaced): a rehearsal must never learn a triplet about an item that is
 * no longer what the click was about. When fewer than half the entries are
 * still kept, the ring is compacted (the kept ones, oldest first). */
void oml_replay_forget_slot(oml_replay *r, uint32_t slot);

/* Learns n new triplets, rows (3n feature pointers, anchor, positive,
 * negative each), with their store slots (3n, OML_REPLAY_NONE for inline
 * members; NULL: none stored) and weights (n, > 0, the loss's scale,
 * oml_learner_train_weighted; NULL: all 1): in steps of cfg.batch new triplets
 * (oml_learner_train judges each before its step), or one OAHU step per
 * triplet (Alg. 1) when the configuration has no mini-batches. Each is
 * kept in the ring after its step, and cfg.rehearse rehearsed triplets
 * per new one are owed (at most OML_REPLAY_MAX_OWED batches).
 * Returns the number of steps refused as not finite. */
#define OML_REPLAY_MAX_OWED 4096
int oml_replay_learn(oml_replay *r, oml_learner *l, const float *const *rows,
                     const uint32_t *slots, const float *weights, int32_t n);

/* The same, except that a last part batch is not learned yet: it waits,
 * its rows borrowed, for more new triplets to fill it, or for
 * oml_replay_flush. So new triplets that come one by one (a click per
 * request) are still learned in full batches when they come fast. The
 * caller flushes before the rows can change (omld: before any put or
 * delete, after each group of requests, before a checkpoint). */
int oml_replay_add(oml_replay *r, oml_learner *l, const float *const *rows,
                   const uint32_t *slots, const float *weights, int32_t n);

/* Learns the waiting part batch, if any. Returns 1 if its step was
 * refused as not finite, else 0. */
int oml_replay_flush(oml_replay *r, oml_learner *l);

/* Rehearsal steps owed (whole batches; 0 while the ring is empty). The
 * owner pays them when it has time: right after the new ones in process,
 * once the queue is empty in the daemon (which logs the payment, so that
 * replay repeats it at the same point). */
int32_t oml_replay_owed(const oml_replay *r, const oml_learner *l);

/* Flushes the waiting new triplets, then takes up to `steps` steps on full
 * batches drawn uniformly from the ring and pays that much of what is owed
 * (beyond it: idle rehearsal). Returns the steps taken (fewer only when the
 * ring is empty). */
int oml_replay_rehearse(oml_replay *r, oml_learner *l, const oml_store *s, int32_t steps);

/* OML_OK if every kept slot is below the store's slot count (a decoded
 * ring is checked against its store before it is trusted), else
 * OML_EFORMAT. */
int oml_replay_check(const oml_replay *r, const oml_store *s);

/* ---- bit-exact serialisation (for checkpoints) ----
 * "OMLR" | u32 version 2 | u32 cap | u32 n | u32 next | u32 live |
 * f64 credit | n * 3 u32 slots | n f32 weights, all little-endian.
 * Version 1 (no weights) still reads, every weight 1. */
int oml_replay_encode(const oml_replay *r, uint8_t **buf, size_t *len);
/* Rebuilds into r (initialised, any cap): a ring saved with another cap is
 * refitted keeping its newest triplets. OML_EFORMAT / OML_ENOMEM. */
int oml_replay_decode(oml_replay *r, const uint8_t *buf, size_t len, oml_diag *diag);

#endif
