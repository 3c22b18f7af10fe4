/* store_int.h - the store's representation, shared by store.c (items,
 * ids, labels) and store_codec.c (its encoding). Not part of the API: only
 * these two files include it. See store.c's DESIGN for the invariants. */
#ifndef OML_STORE_INT_H
#define OML_STORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "idmap.h"
#include "meta_pool.h"
#include "store.h"

struct oml_store {
    int32_t dim;
    uint32_t max_items;
    uint32_t n_slots, cap, n_live;
    uint64_t changes;  /* puts and deletes applied (oml_store_changes) */
    float *x;          /* (cap, dim) */
    size_t x_mapped;   /* x is a mapping of this many bytes for max_items (bigmem.h);
                          0: malloc'd for cap */
    char **ids;        /* (cap), owned NUL-terminated copies */
    uint32_t *id_len;  /* (cap) */
    int32_t *label;    /* (cap) */
    uint8_t *live;     /* (cap) */
    uint32_t *gen;     /* (cap) deletes of each slot: its generation */
    uint64_t *stamp;   /* (cap) when each slot's item was last written (oml_store_stamp) */
    const uint8_t **meta; /* (cap) each live item's packed metadata (metadata.h), a
                          copy shared by the items with equal metadata (meta_pool),
                          or NULL; the array itself is NULL until an item has
                          metadata, so a store without any pays nothing */
    size_t n_meta;     /* live items with metadata */
    oml_meta_pool meta_pool;
    uint32_t *free_heap; /* (cap) dead slots, min-heap */
    uint32_t n_free;
    oml_idmap id_map;  /* live id -> slot */

    char **label_names; /* (label_cap), owned NUL-terminated copies */
    uint32_t *label_len;
    int32_t n_labels, label_cap;
    oml_idmap label_map; /* name -> label id */
};

/* Gives every slot below cap a metadata pointer (NULL), if s->meta is not
 * there yet: OML_OK or OML_ENOMEM (store.c). */
int oml__store_meta_array(oml_store *s);

/* Room in s->x for cap slots: the first time, one mapping for max_items
 * when that is large (its pages never move, so they stay huge: bigmem.h),
 * else a realloc. OML_OK or OML_ENOMEM, s->x unchanged (store.c). */
int oml__store_grow_x(oml_store *s, size_t cap);

/* A stamp no other write in this process has (oml_store_stamp). */
uint64_t oml__store_next_stamp(void);

/* An owned NUL-terminated copy of b (n bytes), or NULL (store.c). */
char *oml__store_dup(const char *b, size_t n);

#endif
