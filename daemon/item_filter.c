/* item_filter.c - a request's label and metadata filter over the store,
 * and metadata between the wire and the store (item_filter.h). */
#include "item_filter.h"

#include <stdlib.h>
#include <string.h>

void omld_item_filter_conds(omld_item_filter *f, Omld__MetadataCondition *const *c, size_t n)
{
    f->n_conds = n < OML_META_ENTRIES_MAX ? n : OML_META_ENTRIES_MAX;
    for (size_t i = 0; i < f->n_conds; i++)
        f->conds[i] = (oml_meta_cond){c[i]->key, (const char *const *)c[i]->values,
                                      c[i]->n_values};
    oml_meta_filter_init(&f->meta, f->conds, f->n_conds);
}

int omld_item_filter_init(omld_item_filter *f, const oml_store *store, char *const *labels,
                          size_t n_labels, Omld__MetadataCondition *const *c, size_t n)
{
    f->label_ok = NULL;
    f->n_labels = oml_store_label_count(store);
    omld_item_filter_conds(f, c, n);
    if (n_labels == 0)
        return 0;
    if ((f->label_ok = calloc((size_t)(f->n_labels > 0 ? f->n_labels : 1), 1)) == NULL)
        return -1;
    for (int32_t l = 0; l < f->n_labels; l++) {
        size_t len = 0;
        const char *name = oml_store_label_name(store, l, &len);
        for (size_t i = 0; i < n_labels && !f->label_ok[l]; i++)
            f->label_ok[l] = strlen(labels[i]) == len && memcmp(labels[i], name, len) == 0;
    }
    return 0;
}

void omld_item_filter_free(omld_item_filter *f)
{
    free(f->label_ok);
    f->label_ok = NULL;
}

int omld_item_filter_match(omld_item_filter *f, const oml_store *store, uint32_t slot)
{
    if (f->label_ok != NULL) {
        int32_t lab = oml_store_label(store, slot);
        if (lab < 0 || lab >= f->n_labels || !f->label_ok[lab])
            return 0;
    }
    return oml_meta_filter_match(&f->meta, oml_store_meta(store, slot));
}

int omld_item_filter_meta_row(omld_item_filter *f, const oml_store *store, const oml_index *ix,
                              int32_t row)
{
    uint32_t slot = ix->slots[row];
    /* The metadata first: blobs are shared and few, so this rarely misses
     * the cache; the slot's generation is read only for a match. */
    return oml_store_is_live(store, slot) &&
           oml_meta_filter_match(&f->meta, oml_store_meta(store, slot)) &&
           oml_index_row_current(ix, store, row);
}

int omld_meta_pack_item(const Omld__Item *it, uint8_t **blob, size_t *len, oml_diag *d)
{
    *blob = NULL;
    *len = 0;
    size_t n = it->n_metadata;
    if (n == 0)
        return OML_OK;
    if (n > OML_META_ENTRIES_MAX)
        return oml_diag_set(d, OML_EINVAL, "metadata", "%zu entries, max %d", n,
                            OML_META_ENTRIES_MAX);
    oml_meta_kv kv[OML_META_ENTRIES_MAX];
    for (size_t i = 0; i < n; i++) {
        const Omld__KeyValue *e = it->metadata[i];
        kv[i] = (oml_meta_kv){e->key, strlen(e->key), e->value, strlen(e->value)};
    }
    return oml_meta_pack(kv, n, blob, len, d);
}

int omld_meta_to_item(const uint8_t *blob, Omld__Item *it, omld_reply *r)
{
    return omld_meta_to_wire(blob, &it->metadata, &it->n_metadata, r);
}

int omld_meta_to_wire(const uint8_t *blob, Omld__KeyValue ***out, size_t *out_n, omld_reply *r)
{
    size_t n = oml_meta_count(blob);
    *out = NULL;
    *out_n = 0;
    if (n == 0)
        return 0;
    Omld__KeyValue *kv = omld_reply_alloc(r, n * sizeof *kv);
    Omld__KeyValue **kp = omld_reply_alloc(r, n * sizeof *kp);
    if (kv == NULL || kp == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        oml_meta_kv e;
        oml_meta_entry(blob, i, &e);
        omld__key_value__init(&kv[i]);
        if ((kv[i].key = omld_reply_strdup(r, e.key, e.key_len)) == NULL ||
            (kv[i].value = omld_reply_strdup(r, e.value, e.value_len)) == NULL)
            return -1;
        kp[i] = &kv[i];
    }
    *out_n = n;
    *out = kp;
    return 0;
}
