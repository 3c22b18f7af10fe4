/* idmap.c - byte-string -> uint32 hash map (linear probing, backward shift).
 *
 * DESIGN
 * Owns only its bucket array; keys are borrowed (see idmap.h). Invariants:
 * _cap is 0 or a power of two; _count <= 3/4 _cap; every live entry is
 * reachable from its home bucket (hash & mask) without crossing an empty
 * bucket. Deletion shifts later entries of the same run back into the hole,
 * which keeps that invariant without tombstones. The full 32-bit hash is kept
 * in each entry so rehashing and most failed comparisons skip memcmp.
 * Thread: one owner. */
#include "idmap.h"

#include <stdlib.h>
#include <string.h>

#define IDMAP_MIN_CAP 16u
#define IDMAP_MAX_CAP (1u << 31)

/* FNV-1a over the bytes, then a 64-bit finaliser (splitmix) so that the low
 * bits used for the bucket index depend on every input byte. */
static uint32_t idmap_hash(const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return (uint32_t)h;
}

void oml_idmap_init(oml_idmap *m)
{
    m->_tab = NULL;
    m->_cap = 0;
    m->_count = 0;
}

void oml_idmap_free(oml_idmap *m)
{
    if (m == NULL)
        return;
    free(m->_tab);
    oml_idmap_init(m);
}

uint32_t oml_idmap_count(const oml_idmap *m)
{
    return m->_count;
}

/* Returns the bucket holding key, or the empty bucket where it would go. */
static uint32_t idmap_probe(const oml_idmap *m, const char *key, uint32_t len, uint32_t h)
{
    uint32_t mask = m->_cap - 1, i = h & mask;
    for (;;) {
        const oml_idmap_entry *e = &m->_tab[i];
        if (e->key == NULL)
            return i;
        if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
            return i;
        i = (i + 1) & mask;
    }
}

static int idmap_rehash(oml_idmap *m, uint32_t cap)
{
    oml_idmap_entry *tab = calloc(cap, sizeof *tab);
    if (tab == NULL)
        return OML_ENOMEM;
    uint32_t mask = cap - 1;
    for (uint32_t j = 0; j < m->_cap; j++) {
        const oml_idmap_entry *e = &m->_tab[j];
        if (e->key == NULL)
            continue;
        uint32_t i = e->hash & mask;
        while (tab[i].key != NULL)
            i = (i + 1) & mask;
        tab[i] = *e;
    }
    free(m->_tab);
    m->_tab = tab;
    m->_cap = cap;
    return OML_OK;
}

int oml_idmap_reserve(oml_idmap *m, uint32_t extra)
{
    uint64_t need = (uint64_t)m->_count + extra;
    uint64_t cap = m->_cap ? m->_cap : IDMAP_MIN_CAP;
    while (need > cap / 4 * 3) {
        cap *= 2;
        if (cap > IDMAP_MAX_CAP)
            return OML_EFULL;
    }
    if (cap == m->_cap)
        return OML_OK;
    return idmap_rehash(m, (uint32_t)cap);
}

int oml_idmap_get(const oml_idmap *m, const char *key, size_t len, uint32_t *value)
{
    if (m->_count == 0 || len > UINT32_MAX)
        return OML_ENOTFOUND;
    uint32_t i = idmap_probe(m, key, (uint32_t)len, idmap_hash(key, len));
    if (m->_tab[i].key == NULL)
        return OML_ENOTFOUND;
    *value = m->_tab[i].value;
    return OML_OK;
}

int oml_idmap_put(oml_idmap *m, const char *key, size_t len, uint32_t value)
{
    if (len > UINT32_MAX)
        return OML_EINVAL;
    uint32_t h = idmap_hash(key, len);
    if (m->_cap > 0) {
        uint32_t i = idmap_probe(m, key, (uint32_t)len, h);
        if (m->_tab[i].key != NULL) {
            m->_tab[i].value = value;
            return OML_OK;
        }
    }
    int rc = oml_idmap_reserve(m, 1);
    if (rc != OML_OK)
        return rc;
    uint32_t i = idmap_probe(m, key, (uint32_t)len, h);
    m->_tab[i] = (oml_idmap_entry){key, (uint32_t)len, h, value};
    m->_count++;
    return OML_OK;
}

int oml_idmap_del(oml_idmap *m, const char *key, size_t len)
{
    if (m->_count == 0 || len > UINT32_MAX)
        return OML_ENOTFOUND;
    uint32_t mask = m->_cap - 1;
    uint32_t hole = idmap_probe(m, key, (uint32_t)len, idmap_hash(key, len));
    if (m->_tab[hole].key == NULL)
        return OML_ENOTFOUND;
    /* Backward shift: walk the rest of the run and move back every entry whose
     * home bucket does not lie cyclically in (hole, j]. */
    uint32_t j = hole;
    for (;;) {
        j = (j + 1) & mask;
        oml_idmap_entry *e = &m->_tab[j];
        if (e->key == NULL)
            break;
        uint32_t home = e->hash & mask;
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->_tab[hole] = *e;
            hole = j;
        }
    }
    m->_tab[hole].key = NULL;
    m->_count--;
    return OML_OK;
}
