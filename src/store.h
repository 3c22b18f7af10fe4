/* store.h - the item store: string ids -> feature vectors and labels.
 *
 * Ids and labels are byte strings as web services name them (any bytes but
 * NUL, 1..OML_ID_MAX bytes, UTF-8 welcome). Every item lives in a *slot*.
 * Upserting an existing id overwrites its features and label in place (same
 * slot); deleting leaves a tombstone (the id and features stay readable)
 * until a later put of a new id reuses the slot: a new id takes the lowest
 * free slot, else the next never used one, so max_items bounds the live
 * items, and where an id lands is a function of the puts and deletes alone
 * (a decoded store reuses the same slots as the one encoded). Labels are
 * interned into small dense ids (0, 1, ...) that never change. Features
 * live in one contiguous (slots, dim) row-major matrix.
 *
 * SLOT HOLDERS. A slot number is a handle to one item only while that item
 * lives: after a delete, the slot may hold another item. Code that keeps
 * slots beyond one call (the pair closure uses slots as nodes, a rehearsal
 * buffer of triplets, an index) must do one of:
 *   - forget the slot when the item is deleted: the store's owner (the
 *     daemon's apply_delete) tells every slot holder at the delete, as it
 *     does oml_closure_remove() for the closure; or
 *   - keep the slot's generation with it (oml_store_generation(), which
 *     every delete of the slot increments, so a reused slot has a new one)
 *     and treat a slot whose generation changed, or that is not live, as
 *     gone (oml_store_slot_is(): live and still that generation).
 * Generations are part of the encoding, so both survive a restart. An index
 * (oml_index) keeps each row's slot and generation and copies what its
 * searches read; its answers' ids are read here (oml_index_row_id).
 *
 * Thread: one writer (the owner). Readers on other threads must not use the
 * store while it is written (the daemon's readers hold its read lock). */
#ifndef OML_STORE_H
#define OML_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define OML_ID_MAX 1024    /* bytes in an id or a label */
#define OML_LABEL_NONE (-1)

typedef struct oml_store oml_store;

/* Creates an empty store for dim-dimensional items holding at most max_items
 * live items (and as many slots: deleted ones are reused). Returns
 * OML_EINVAL on bad sizes, OML_ENOMEM. */
int oml_store_create(oml_store **out, int32_t dim, uint32_t max_items);
void oml_store_destroy(oml_store *s); /* accepts NULL */

/* Upsert. id (id_len bytes) must be 1..OML_ID_MAX bytes without NUL; x holds
 * dim finite floats (borrowed, copied); label may be NULL (no label) else
 * 1..OML_ID_MAX bytes without NUL. On success writes the slot to *slot_out
 * (may be NULL). Errors (state unchanged, diag names the field "id",
 * "features" or "label"): OML_EINVAL, OML_ENONFINITE, OML_EFULL (max_items
 * live items, or max_items labels), OML_ENOMEM. A new id (re-putting a
 * deleted one included) takes the lowest free slot, else a new one. */
int oml_store_put(oml_store *s, const char *id, size_t id_len, const float *x,
                  const char *label, size_t label_len, uint32_t *slot_out,
                  oml_diag *diag);

/* oml_store_put with metadata: meta (meta_len bytes, borrowed, copied) is
 * a packed blob (metadata.h) or NULL for none. The put replaces the item's
 * metadata as it replaces its features and label. A malformed blob is
 * OML_EINVAL (field "metadata"). Only items with metadata hold any memory
 * for it (a pointer per slot once any item has some, and the blob). */
int oml_store_put_meta(oml_store *s, const char *id, size_t id_len, const float *x,
                       const char *label, size_t label_len, const uint8_t *meta,
                       size_t meta_len, uint32_t *slot_out, oml_diag *diag);

/* Deletes a live id: its slot becomes free for a later new id and its
 * generation is incremented. OML_ENOTFOUND if it is not live. Never
 * allocates. The caller tells its slot holders (see SLOT HOLDERS). */
int oml_store_delete(oml_store *s, const char *id, size_t id_len);

/* The generation of a slot: how many times an item in it was deleted (0 for
 * a slot never used). A (slot, generation) pair names one item for good. */
uint32_t oml_store_generation(const oml_store *s, uint32_t slot);

/* 1 if slot holds a live item of generation gen (the item a holder of
 * (slot, gen) meant), else 0. */
static inline int oml_store_slot_is(const oml_store *s, uint32_t slot, uint32_t gen);

/* Finds the slot of a live id. OML_ENOTFOUND if absent or deleted. */
/* A number that changes whenever the item in slot is written (a put, a
 * re-put, the store decoded) and that no other write in this process has:
 * so (slot, stamp) names one content of the slot for good, and what was
 * computed from its features can be kept until the stamp moves (the index
 * builder's input projections, index.h). 0 for a slot never used. In
 * memory only: not part of the encoding. */
uint64_t oml_store_stamp(const oml_store *s, uint32_t slot);

int oml_store_find(const oml_store *s, const char *id, size_t id_len, uint32_t *slot);

/* Slot accessors; slot must be < oml_store_slots(s). Pointers are borrowed
 * and valid until the next put/delete. */
int oml_store_is_live(const oml_store *s, uint32_t slot);
const float *oml_store_features(const oml_store *s, uint32_t slot);
const char *oml_store_id(const oml_store *s, uint32_t slot, size_t *len);
int32_t oml_store_label(const oml_store *s, uint32_t slot); /* OML_LABEL_NONE if none */

/* The packed metadata of a live slot (metadata.h), or NULL if it has none
 * (deleted slots have none). Borrowed, valid until the next put/delete. */
const uint8_t *oml_store_meta(const oml_store *s, uint32_t slot);
/* Live items that have metadata. */
size_t oml_store_meta_items(const oml_store *s);

/* Label table: ids 0..oml_store_label_count()-1, names NUL-terminated. */
int32_t oml_store_label_count(const oml_store *s);
const char *oml_store_label_name(const oml_store *s, int32_t label, size_t *len);

int32_t oml_store_dim(const oml_store *s);
uint32_t oml_store_slots(const oml_store *s); /* slots ever used (live + free) */
uint32_t oml_store_count(const oml_store *s); /* live items */
/* Puts and deletes applied since the store was created or decoded: equal
 * counts bracket a time in which no item changed (in memory only). */
uint64_t oml_store_changes(const oml_store *s);
/* The whole (slots, dim) feature matrix, including tombstoned rows. */
const float *oml_store_matrix(const oml_store *s);

/* ---- bit-exact serialisation (for checkpoints) ----
 *
 * Format version OML_STORE_CODEC_VERSION, little-endian, no padding:
 *   "OMLS" | u32 version | i32 dim | u32 slots | u32 live | u32 labels
 *   labels, in label-id order:  u32 len | len bytes
 *   slots, in slot order:       u8 live (0/1) | i32 label (-1 = none) | u32 id_len | id bytes
 *   features:                   slots * dim f32, the (slots, dim) matrix row-major
 *   generations (version 2):    slots * u32
 *   metadata (version 3):       u32 count | per live slot with metadata, in
 *                               ascending slot order: u32 slot | u32 len |
 *                               len bytes, its packed blob (metadata.h)
 * Versions 1 (no generations: every generation reads as 0) and 2 (no
 * metadata) are still read.
 * The free slots are not written: they are the dead ones, reused lowest
 * first. The encoding is canonical: equal stores encode to equal bytes, and
 * a buffer that decodes re-encodes to itself (as version 3). No checksum
 * (the checkpoint file carries one over all its sections). */
#define OML_STORE_CODEC_VERSION 3u

/* Serialises s into a malloc'd buffer (*buf, *len), owned by the caller.
 * OML_ENOMEM (nothing is returned then). */
int oml_store_encode(const oml_store *s, uint8_t **buf, size_t *len);

/* oml_store_encode in three pieces whose concatenation is its buffer, for
 * a writer that streams them (checkpoint.h parts): *head and *tail
 * malloc'd, owned by the caller, the bytes before and after the features;
 * *x the features as they lie in the store (borrowed: s must not change
 * until they are written), so a checkpoint does not hold a second copy of
 * them (3.1 GB at a million items of 784). On a host whose floats are not
 * little-endian *x is NULL, *nx 0, and the features are in *head.
 * OML_EINVAL, OML_ENOMEM (nothing is returned then). */
int oml_store_encode_parts(const oml_store *s, uint8_t **head, size_t *nhead,
                           const uint8_t **x, size_t *nx, uint8_t **tail, size_t *ntail);

/* Rebuilds a store from buf (borrowed) with the bound max_items (as in
 * oml_store_create; the bound is configuration, so it is not in the format).
 * After it, every accessor answers as in the encoded store, with the same
 * slot numbers and label ids, and later puts/deletes behave the same (next
 * slot, next label id). Everything is validated before it is trusted:
 * OML_EVERSION (another format version), OML_EFORMAT (truncated, trailing
 * bytes, bad counts or lengths, an id or label that is empty, too long or
 * has a NUL, two live slots or two labels with the same name, a label id
 * out of range, dim <= 0, a non-finite feature), OML_EFULL (more slots or
 * labels than max_items), OML_EINVAL (bad arguments), OML_ENOMEM. The diag
 * (field "store") says what and where. Allocation is bounded by len. */
int oml_store_decode(oml_store **out, const uint8_t *buf, size_t len, uint32_t max_items,
                     oml_diag *diag);

static inline int oml_store_slot_is(const oml_store *s, uint32_t slot, uint32_t gen)
{
    return oml_store_is_live(s, slot) && oml_store_generation(s, slot) == gen;
}

/* Exchanges the whole contents of a and b (both owned by the caller), so a
 * store can be replaced in place, e.g. by a decoded checkpoint, while other
 * code keeps its pointer to it. The caller excludes readers meanwhile. */
void oml_store_swap(oml_store *a, oml_store *b);

#endif
