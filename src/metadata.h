/* metadata.h - an item's string key/values and the filter over them.
 *
 * An item's metadata is kept as one packed blob (the store holds it for the
 * items that have any, and checkpoints it as is):
 *   u8 entries | per entry: u8 key_len | u16 value_len (LE) | key | value
 * Keys are 1..OML_META_KEY_MAX bytes, values 0..OML_META_VALUE_MAX bytes,
 * neither with a NUL; no key twice; 1..OML_META_ENTRIES_MAX entries (an
 * item without metadata has no blob). Entries keep the order given.
 *
 * A filter is a list of conditions, all of which must hold (AND): condition
 * (key, values) holds when the blob has the key and its value is one of the
 * values (one value: equality, several: set membership). This is the one
 * evaluation every query path uses (retrieve, recommend, classify, list,
 * count, delete). Pure functions; thread-safe. */
#ifndef OML_METADATA_H
#define OML_METADATA_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define OML_META_ENTRIES_MAX 255
#define OML_META_KEY_MAX 255
#define OML_META_VALUE_MAX 65535

/* One key/value, borrowed bytes. */
typedef struct oml_meta_kv {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} oml_meta_kv;

/* Packs n (1..OML_META_ENTRIES_MAX) entries into a malloc'd blob (*blob,
 * *len). Errors (diag field "metadata[i].key" / ".value" / "metadata"):
 * OML_EINVAL (bounds, NUL byte, key twice), OML_ENOMEM. */
int oml_meta_pack(const oml_meta_kv *kv, size_t n, uint8_t **blob, size_t *len, oml_diag *diag);

/* Bytes of a well-formed blob. */
size_t oml_meta_size(const uint8_t *blob);

/* Checks that buf (len bytes) is exactly one well-formed blob (for decoding
 * untrusted bytes): OML_OK or OML_EFORMAT with diag (field "metadata"). */
int oml_meta_check(const uint8_t *buf, size_t len, oml_diag *diag);

/* Entries of a well-formed blob: the count, and entry i (i < count) into
 * *kv (pointers into the blob; neither key nor value is NUL-terminated). */
size_t oml_meta_count(const uint8_t *blob);
void oml_meta_entry(const uint8_t *blob, size_t i, oml_meta_kv *kv);

/* The value of key in blob (NULL: none) into *value / *len; 1 if found. */
int oml_meta_get(const uint8_t *blob, const char *key, size_t key_len, const char **value,
                 size_t *len);

/* One condition of a filter: the item's value of key is one of values
 * (NUL-terminated strings, n_values >= 1). */
typedef struct oml_meta_cond {
    const char *key;
    const char *const *values;
    size_t n_values;
} oml_meta_cond;

/* 1 if blob (NULL: no metadata) satisfies every one of the n conditions
 * (n = 0: always). */
int oml_meta_match(const uint8_t *blob, const oml_meta_cond *conds, size_t n);

/* oml_meta_match over many items, remembering the answer per blob address:
 * the store shares equal blobs (meta_pool.h), so a pass over a catalogue
 * evaluates each distinct blob about once. Valid while no blob it saw is
 * freed or reused, i.e. within one hold of the store's lock. */
#define OML_META_MEMO 64
typedef struct oml_meta_filter {
    const oml_meta_cond *conds;
    size_t n;
    const uint8_t *memo_blob[OML_META_MEMO]; /* direct-mapped by address */
    uint8_t memo_ok[OML_META_MEMO];
} oml_meta_filter;
void oml_meta_filter_init(oml_meta_filter *f, const oml_meta_cond *conds, size_t n);
int oml_meta_filter_match(oml_meta_filter *f, const uint8_t *blob);

#endif
