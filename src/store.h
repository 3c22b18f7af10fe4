/* store.h - the item store: string ids -> feature vectors and labels.
 *
 * Ids and labels are byte strings as web services name them (any bytes but
 * NUL, 1..OML_ID_MAX bytes, UTF-8 welcome). Every item lives in a *slot*;
 * slots are append-only and never reused, so a slot number is a stable handle
 * that the closure, the learner and an index may keep. Upserting an existing
 * id overwrites its features and label in place (same slot); deleting leaves a
 * tombstone. Labels are interned into small dense ids (0, 1, ...) that never
 * change. Features live in one contiguous (slots, dim) row-major matrix.
 *
 * Thread: one writer (the owner). Readers on other threads must not use the
 * store while it is written; serving works from an oml_index copy instead. */
#ifndef OML_STORE_H
#define OML_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define OML_ID_MAX 1024    /* bytes in an id or a label */
#define OML_LABEL_NONE (-1)

typedef struct oml_store oml_store;

/* Creates an empty store for dim-dimensional items holding at most max_items
 * slots (live + deleted). Returns OML_EINVAL on bad sizes, OML_ENOMEM. */
int oml_store_create(oml_store **out, int32_t dim, uint32_t max_items);
void oml_store_destroy(oml_store *s); /* accepts NULL */

/* Upsert. id (id_len bytes) must be 1..OML_ID_MAX bytes without NUL; x holds
 * dim finite floats (borrowed, copied); label may be NULL (no label) else
 * 1..OML_ID_MAX bytes without NUL. On success writes the slot to *slot_out
 * (may be NULL). Errors (state unchanged, diag names the field "id",
 * "features" or "label"): OML_EINVAL, OML_ENONFINITE, OML_EFULL, OML_ENOMEM.
 * Re-putting a deleted id gives it a new slot. */
int oml_store_put(oml_store *s, const char *id, size_t id_len, const float *x,
                  const char *label, size_t label_len, uint32_t *slot_out,
                  oml_diag *diag);

/* Deletes a live id. OML_ENOTFOUND if it is not live. */
int oml_store_delete(oml_store *s, const char *id, size_t id_len);

/* Finds the slot of a live id. OML_ENOTFOUND if absent or deleted. */
int oml_store_find(const oml_store *s, const char *id, size_t id_len, uint32_t *slot);

/* Slot accessors; slot must be < oml_store_slots(s). Pointers are borrowed
 * and valid until the next put/delete. */
int oml_store_is_live(const oml_store *s, uint32_t slot);
const float *oml_store_features(const oml_store *s, uint32_t slot);
const char *oml_store_id(const oml_store *s, uint32_t slot, size_t *len);
int32_t oml_store_label(const oml_store *s, uint32_t slot); /* OML_LABEL_NONE if none */

/* Label table: ids 0..oml_store_label_count()-1, names NUL-terminated. */
int32_t oml_store_label_count(const oml_store *s);
const char *oml_store_label_name(const oml_store *s, int32_t label, size_t *len);

int32_t oml_store_dim(const oml_store *s);
uint32_t oml_store_slots(const oml_store *s); /* slots ever used */
uint32_t oml_store_count(const oml_store *s); /* live items */
/* The whole (slots, dim) feature matrix, including tombstoned rows. */
const float *oml_store_matrix(const oml_store *s);

#endif
