/* idempotency.c - the applied write requests' keys (idempotency.h). */
#include "idempotency.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"

int omld_idem_init(omld_idem *t, uint32_t cap)
{
    memset(t, 0, sizeof *t);
    oml_idmap_init(&t->by_key);
    t->cap = cap;
    if (cap == 0)
        return OML_OK;
    t->ring = calloc(cap, sizeof *t->ring);
    return t->ring ? OML_OK : OML_ENOMEM;
}

void omld_idem_free(omld_idem *t)
{
    for (uint32_t i = 0; t->ring && i < t->n; i++)
        free(t->ring[(t->head + i) % t->cap].key);
    free(t->ring);
    oml_idmap_free(&t->by_key);
    memset(t, 0, sizeof *t);
}

const omld_idem_entry *omld_idem_find(const omld_idem *t, const char *key, size_t len)
{
    uint32_t at;
    if (t->cap == 0 || oml_idmap_get(&t->by_key, key, len, &at) != OML_OK)
        return NULL;
    return &t->ring[at];
}

int omld_idem_add(omld_idem *t, const char *key, size_t len, int32_t op, uint64_t a, uint64_t b)
{
    if (t->cap == 0 || omld_idem_find(t, key, len) != NULL)
        return OML_OK;
    if (len > UINT32_MAX)
        return OML_EINVAL;
    char *copy = malloc(len ? len : 1);
    if (copy == NULL || oml_idmap_reserve(&t->by_key, 1) != OML_OK) {
        free(copy);
        return OML_ENOMEM;
    }
    memcpy(copy, key, len);
    uint32_t at = (t->head + t->n) % t->cap;
    if (t->n == t->cap) { /* full: the oldest goes, its place takes the new one */
        omld_idem_entry *old = &t->ring[t->head];
        oml_idmap_del(&t->by_key, old->key, old->len);
        free(old->key);
        at = t->head;
        t->head = (t->head + 1) % t->cap;
        t->n--;
    }
    t->ring[at] = (omld_idem_entry){copy, (uint32_t)len, op, a, b};
    oml_idmap_put(&t->by_key, copy, len, at); /* reserved: cannot fail */
    t->n++;
    return OML_OK;
}

int omld_idem_encode(const omld_idem *t, uint8_t **out, size_t *out_len)
{
    size_t n = 4;
    for (uint32_t i = 0; i < t->n; i++)
        n += 4 + t->ring[(t->head + i) % t->cap].len + 4 + 16;
    uint8_t *p = malloc(n), *w = p;
    if (p == NULL)
        return OML_ENOMEM;
    oml_le32_store(w, t->n);
    w += 4;
    for (uint32_t i = 0; i < t->n; i++) {
        const omld_idem_entry *e = &t->ring[(t->head + i) % t->cap];
        oml_le32_store(w, e->len);
        memcpy(w + 4, e->key, e->len);
        w += 4 + e->len;
        oml_le32_store(w, (uint32_t)e->op);
        oml_le64_store(w + 4, e->a);
        oml_le64_store(w + 12, e->b);
        w += 20;
    }
    *out = p;
    *out_len = n;
    return OML_OK;
}

int omld_idem_decode(omld_idem *t, const uint8_t *p, size_t n, oml_diag *d)
{
    if (n < 4)
        return oml_diag_set(d, OML_EFORMAT, "idempotency", "the key table is truncated");
    uint32_t count = oml_le32_load(p);
    size_t at = 4;
    for (uint32_t i = 0; i < count; i++) {
        if (n - at < 4 || n - at - 4 < (size_t)oml_le32_load(p + at) + 20)
            return oml_diag_set(d, OML_EFORMAT, "idempotency",
                                "the key table is truncated at key %u of %u", i, count);
        uint32_t len = oml_le32_load(p + at);
        const uint8_t *k = p + at + 4, *rest = k + len;
        int rc = omld_idem_add(t, (const char *)k, len, (int32_t)oml_le32_load(rest),
                               oml_le64_load(rest + 4), oml_le64_load(rest + 12));
        if (rc != OML_OK)
            return rc;
        at += 4 + (size_t)len + 20;
    }
    if (at != n)
        return oml_diag_set(d, OML_EFORMAT, "idempotency", "%zu bytes after the key table",
                            n - at);
    return OML_OK;
}
