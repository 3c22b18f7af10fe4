/* meta_pool.h - one shared copy of each distinct metadata blob.
 *
 * Items of a catalogue mostly carry a few values per key (a colour, a
 * shard, a season), so most of them carry metadata equal to some other
 * item's. The store keeps one copy of each distinct blob (metadata.h),
 * counted by the items holding it: an item with metadata then costs a
 * pointer, and a filter reads few distinct blobs, which stay in cache.
 *
 * Thread: one writer (the store's owner); readers may read a held blob
 * while the writer does not release it. */
#ifndef OML_META_POOL_H
#define OML_META_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "idmap.h"

typedef struct oml_meta_pool {
    oml_idmap map; /* blob bytes (the shared copy, borrowed) -> holders */
} oml_meta_pool;

void oml_meta_pool_init(oml_meta_pool *p);
/* Frees the map; the blobs must have been released (accepts a zeroed pool). */
void oml_meta_pool_free(oml_meta_pool *p);

/* The shared copy of blob (len bytes; copied if new) with one more holder,
 * or NULL when out of memory (nothing changed then). */
const uint8_t *oml_meta_pool_hold(oml_meta_pool *p, const uint8_t *blob, size_t len);

/* One holder fewer of a shared copy (from oml_meta_pool_hold); the last one
 * frees it. Never allocates. Accepts NULL. */
void oml_meta_pool_release(oml_meta_pool *p, const uint8_t *shared);

/* Distinct blobs held. */
uint32_t oml_meta_pool_count(const oml_meta_pool *p);

#endif
