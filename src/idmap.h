/* idmap.h - an open-addressing hash map from byte strings to uint32 values.
 *
 * Keys are arbitrary bytes (NUL allowed) and are *borrowed*: the map keeps the
 * caller's pointer, so the key bytes must stay valid and unchanged while the
 * entry is in the map. The store uses this to index ids and labels by the
 * copies it owns anyway, without a second copy.
 *
 * Linear probing over a power-of-two table, load factor <= 3/4, growth by
 * rehash, deletion by backward shift (no tombstones, so insert/delete churn
 * never degrades probes). The hash is SipHash-2-4 keyed with 16 random bytes
 * drawn once per process (getrandom), so clients cannot choose ids that
 * collide (hash flooding). Nothing outside a map depends on the key: no
 * caller iterates a map, and what is persisted (the store codec) is in slot
 * order, so encodings are the same whatever the key.
 *
 * Thread: one owner; const functions may run concurrently with each other. */
#ifndef OML_IDMAP_H
#define OML_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* 16 bytes a bucket: the hash is not kept (a growth or a delete hashes
 * the keys it moves again), which at a million ids is 16 MB less (a table
 * of 2^21 buckets) for a probe that compares a key's bytes where the hash
 * would have differed. */
typedef struct oml_idmap_entry {
    const char *key; /* borrowed; NULL marks an empty bucket */
    uint32_t len;
    uint32_t value;
} oml_idmap_entry;

typedef struct oml_idmap {
    oml_idmap_entry *_tab; /* owned, _cap buckets */
    uint32_t _cap;         /* 0 or a power of two */
    uint32_t _count;
} oml_idmap;

/* Makes an empty map; allocates nothing. */
void oml_idmap_init(oml_idmap *m);
/* Frees the table (not the keys); accepts a zeroed map. */
void oml_idmap_free(oml_idmap *m);

/* Ensures that `extra` inserts of new keys will not allocate, so a caller can
 * reserve first and then insert without a failure path. OML_ENOMEM, OML_EFULL
 * (more than 2^30 entries). */
int oml_idmap_reserve(oml_idmap *m, uint32_t extra);

/* Looks key up. 0 and *value, or OML_ENOTFOUND (value untouched). */
int oml_idmap_get(const oml_idmap *m, const char *key, size_t len, uint32_t *value);

/* oml_idmap_get that also gives the key pointer the map holds for key
 * (the one put first), so equal byte strings can share one copy. */
int oml_idmap_get_key(const oml_idmap *m, const char *key, size_t len, const char **stored,
                      uint32_t *value);

/* Inserts key -> value, or overwrites the value (and keeps the old key
 * pointer) if key is present. key is borrowed. OML_EINVAL (len >= 2^32),
 * OML_ENOMEM, OML_EFULL; the map is unchanged on error. */
int oml_idmap_put(oml_idmap *m, const char *key, size_t len, uint32_t value);

/* Removes key. 0, or OML_ENOTFOUND. Never allocates. */
int oml_idmap_del(oml_idmap *m, const char *key, size_t len);

uint32_t oml_idmap_count(const oml_idmap *m);

/* SipHash-2-4 (64-bit output) of len bytes under a 16-byte key. Pure. */
uint64_t oml_siphash24(const uint8_t key[16], const void *data, size_t len);

/* Replaces the process key (tests: a fixed key, or two keys to show that
 * nothing depends on it). Only while no map holds entries: a map built
 * under one key cannot be searched under another. */
void oml_idmap_set_key(const uint8_t key[16]);

#endif
