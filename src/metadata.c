/* metadata.c - packed item metadata and the filter over it (metadata.h).
 *
 * Lookups walk the blob: an item holds a handful of entries, so a linear
 * walk over a few dozen contiguous bytes beats any table, and the blob
 * needs no pointers (it is its own checkpoint encoding). */
#include "metadata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENTRY_HEAD 3u /* u8 key_len, u16 value_len */

static size_t value_len_at(const uint8_t *p)
{
    return (size_t)p[1] | (size_t)p[2] << 8;
}

size_t oml_meta_count(const uint8_t *blob)
{
    return blob ? blob[0] : 0;
}

void oml_meta_entry(const uint8_t *blob, size_t i, oml_meta_kv *kv)
{
    const uint8_t *p = blob + 1;
    for (size_t j = 0; j < i; j++)
        p += ENTRY_HEAD + p[0] + value_len_at(p);
    kv->key_len = p[0];
    kv->value_len = value_len_at(p);
    kv->key = (const char *)p + ENTRY_HEAD;
    kv->value = kv->key + kv->key_len;
}

size_t oml_meta_size(const uint8_t *blob)
{
    const uint8_t *p = blob + 1;
    for (size_t j = 0; j < blob[0]; j++)
        p += ENTRY_HEAD + p[0] + value_len_at(p);
    return (size_t)(p - blob);
}

int oml_meta_get(const uint8_t *blob, const char *key, size_t key_len, const char **value,
                 size_t *len)
{
    if (blob == NULL)
        return 0;
    const uint8_t *p = blob + 1;
    for (size_t j = 0; j < blob[0]; j++) {
        size_t kl = p[0], vl = value_len_at(p);
        if (kl == key_len && memcmp(p + ENTRY_HEAD, key, kl) == 0) {
            *value = (const char *)p + ENTRY_HEAD + kl;
            *len = vl;
            return 1;
        }
        p += ENTRY_HEAD + kl + vl;
    }
    return 0;
}

/* The bounds and rules one entry must meet; i names it in the diag. */
static int check_entry(const oml_meta_kv *kv, size_t i, oml_diag *diag)
{
    char field[48];
    snprintf(field, sizeof field, "metadata[%zu].key", i);
    if (kv->key_len == 0 || kv->key_len > OML_META_KEY_MAX)
        return oml_diag_set(diag, OML_EINVAL, field, "key is %zu bytes, want 1..%d", kv->key_len,
                            OML_META_KEY_MAX);
    if (memchr(kv->key, '\0', kv->key_len) != NULL)
        return oml_diag_set(diag, OML_EINVAL, field, "key has a NUL byte");
    snprintf(field, sizeof field, "metadata[%zu].value", i);
    if (kv->value_len > OML_META_VALUE_MAX)
        return oml_diag_set(diag, OML_EINVAL, field, "value is %zu bytes, max %d", kv->value_len,
                            OML_META_VALUE_MAX);
    if (kv->value_len > 0 && memchr(kv->value, '\0', kv->value_len) != NULL)
        return oml_diag_set(diag, OML_EINVAL, field, "value has a NUL byte");
    return OML_OK;
}

int oml_meta_pack(const oml_meta_kv *kv, size_t n, uint8_t **blob, size_t *len, oml_diag *diag)
{
    if (n == 0 || n > OML_META_ENTRIES_MAX)
        return oml_diag_set(diag, OML_EINVAL, "metadata", "%zu entries, want 1..%d", n,
                            OML_META_ENTRIES_MAX);
    size_t bytes = 1;
    for (size_t i = 0; i < n; i++) {
        int rc = check_entry(&kv[i], i, diag);
        if (rc != OML_OK)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (kv[j].key_len == kv[i].key_len && memcmp(kv[j].key, kv[i].key, kv[i].key_len) == 0) {
                char field[48];
                snprintf(field, sizeof field, "metadata[%zu].key", i);
                return oml_diag_set(diag, OML_EINVAL, field, "key repeats metadata[%zu]'s", j);
            }
        bytes += ENTRY_HEAD + kv[i].key_len + kv[i].value_len;
    }
    uint8_t *b = malloc(bytes), *p = b + 1;
    if (b == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "metadata", "out of memory");
    b[0] = (uint8_t)n;
    for (size_t i = 0; i < n; i++) {
        p[0] = (uint8_t)kv[i].key_len;
        p[1] = (uint8_t)(kv[i].value_len & 0xff);
        p[2] = (uint8_t)(kv[i].value_len >> 8);
        memcpy(p + ENTRY_HEAD, kv[i].key, kv[i].key_len);
        if (kv[i].value_len > 0)
            memcpy(p + ENTRY_HEAD + kv[i].key_len, kv[i].value, kv[i].value_len);
        p += ENTRY_HEAD + kv[i].key_len + kv[i].value_len;
    }
    *blob = b;
    *len = bytes;
    return OML_OK;
}

int oml_meta_check(const uint8_t *buf, size_t len, oml_diag *diag)
{
    if (len < 1 || buf[0] == 0)
        return oml_diag_set(diag, OML_EFORMAT, "metadata", "no entries");
    oml_meta_kv kv[OML_META_ENTRIES_MAX];
    size_t pos = 1, n = buf[0];
    for (size_t i = 0; i < n; i++) {
        if (len - pos < ENTRY_HEAD)
            return oml_diag_set(diag, OML_EFORMAT, "metadata", "truncated in entry %zu", i);
        kv[i].key_len = buf[pos];
        kv[i].value_len = value_len_at(buf + pos);
        if (len - pos - ENTRY_HEAD < kv[i].key_len + kv[i].value_len)
            return oml_diag_set(diag, OML_EFORMAT, "metadata", "truncated in entry %zu", i);
        kv[i].key = (const char *)buf + pos + ENTRY_HEAD;
        kv[i].value = kv[i].key + kv[i].key_len;
        pos += ENTRY_HEAD + kv[i].key_len + kv[i].value_len;
    }
    if (pos != len)
        return oml_diag_set(diag, OML_EFORMAT, "metadata", "%zu trailing bytes", len - pos);
    oml_diag d = {0};
    uint8_t *copy = NULL;
    size_t copy_len = 0;
    int rc = oml_meta_pack(kv, n, &copy, &copy_len, &d); /* the same rules as a put */
    free(copy);
    if (rc == OML_EINVAL)
        return oml_diag_set(diag, OML_EFORMAT, "metadata", "%s: %s", d.field, d.msg);
    return rc == OML_OK ? OML_OK : oml_diag_set(diag, rc, "metadata", "%s", d.msg);
}

void oml_meta_filter_init(oml_meta_filter *f, const oml_meta_cond *conds, size_t n)
{
    f->conds = conds;
    f->n = n;
    memset(f->memo_blob, 0, sizeof f->memo_blob);
}

int oml_meta_filter_match(oml_meta_filter *f, const uint8_t *blob)
{
    if (f->n == 0)
        return 1;
    if (blob == NULL)
        return 0; /* no metadata meets no condition */
    size_t h = ((uintptr_t)blob >> 4) % OML_META_MEMO;
    if (f->memo_blob[h] != blob) {
        f->memo_ok[h] = (uint8_t)oml_meta_match(blob, f->conds, f->n);
        f->memo_blob[h] = blob;
    }
    return f->memo_ok[h];
}

int oml_meta_match(const uint8_t *blob, const oml_meta_cond *conds, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        const char *v;
        size_t vl;
        if (!oml_meta_get(blob, conds[c].key, strlen(conds[c].key), &v, &vl))
            return 0;
        int any = 0;
        for (size_t j = 0; j < conds[c].n_values && !any; j++)
            any = strlen(conds[c].values[j]) == vl && memcmp(conds[c].values[j], v, vl) == 0;
        if (!any)
            return 0;
    }
    return 1;
}
