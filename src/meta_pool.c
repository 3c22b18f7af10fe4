/* meta_pool.c - shared, counted copies of metadata blobs (meta_pool.h).
 * The map's value is the blob's holder count; its key is the copy. */
#include "meta_pool.h"

#include <stdlib.h>
#include <string.h>

#include "metadata.h"

void oml_meta_pool_init(oml_meta_pool *p)
{
    oml_idmap_init(&p->map);
}

void oml_meta_pool_free(oml_meta_pool *p)
{
    oml_idmap_free(&p->map);
}

const uint8_t *oml_meta_pool_hold(oml_meta_pool *p, const uint8_t *blob, size_t len)
{
    const char *shared;
    uint32_t holders;
    if (oml_idmap_get_key(&p->map, (const char *)blob, len, &shared, &holders) == OML_OK) {
        (void)oml_idmap_put(&p->map, shared, len, holders + 1); /* present: no allocation */
        return (const uint8_t *)shared;
    }
    char *copy = malloc(len);
    if (copy == NULL)
        return NULL;
    memcpy(copy, blob, len);
    if (oml_idmap_put(&p->map, copy, len, 1) != OML_OK) {
        free(copy);
        return NULL;
    }
    return (const uint8_t *)copy;
}

void oml_meta_pool_release(oml_meta_pool *p, const uint8_t *shared)
{
    if (shared == NULL)
        return;
    size_t len = oml_meta_size(shared);
    uint32_t holders = 0;
    if (oml_idmap_get(&p->map, (const char *)shared, len, &holders) != OML_OK)
        return; /* not held: a bug elsewhere, but never a double free */
    if (holders > 1) {
        (void)oml_idmap_put(&p->map, (const char *)shared, len, holders - 1);
        return;
    }
    (void)oml_idmap_del(&p->map, (const char *)shared, len);
    free((void *)shared);
}

uint32_t oml_meta_pool_count(const oml_meta_pool *p)
{
    return oml_idmap_count(&p->map);
}
