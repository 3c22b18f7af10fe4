/* item_filter.h - which stored items a request's filter keeps: its labels
 * (one of them) and its metadata conditions (all of them, metadata.h), and
 * the conversions between the wire's metadata and the store's packed form.
 *
 * One filter serves every path that walks the store (ListItems, CountItems,
 * DeleteItems by filter) and, through omld_item_filter_meta_row, the
 * metadata half of the queries' row masks (query.c): so a condition means
 * the same thing everywhere. The caller holds the store still (its lock)
 * while a filter made from it is used. */
#ifndef OMLD_ITEM_FILTER_H
#define OMLD_ITEM_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"
#include "metadata.h"
#include "omld.pb-c.h"
#include "reply.h"
#include "store.h"

typedef struct omld_item_filter {
    uint8_t *label_ok;      /* (store's labels) 1: kept; NULL: any label or none */
    int32_t n_labels;
    oml_meta_cond conds[OML_META_ENTRIES_MAX];
    size_t n_conds;
    oml_meta_filter meta;   /* over conds, memoised per shared blob */
} omld_item_filter;

/* The metadata conditions of a request (validated: at most
 * OML_META_ENTRIES_MAX) into f->conds, borrowing the request's strings. */
void omld_item_filter_conds(omld_item_filter *f, Omld__MetadataCondition *const *c, size_t n);

/* A filter of the labels (n_labels = 0: any) and the metadata conditions
 * over store. 0, or -1 when out of memory. */
int omld_item_filter_init(omld_item_filter *f, const oml_store *store, char *const *labels,
                          size_t n_labels, Omld__MetadataCondition *const *c, size_t n);
void omld_item_filter_free(omld_item_filter *f);

/* 1 if the live slot passes f. */
int omld_item_filter_match(omld_item_filter *f, const oml_store *store, uint32_t slot);

/* 1 if row `row` of ix is still the item in its store slot and that item's
 * metadata passes f's conditions (labels are the index's business). */
int omld_item_filter_meta_row(omld_item_filter *f, const oml_store *store, const oml_index *ix,
                              int32_t row);

/* An item's metadata from the wire, packed (*blob malloc'd, NULL when the
 * item has none). OML_OK, or the store's error with d naming
 * "metadata[i].key" etc. */
int omld_meta_pack_item(const Omld__Item *it, uint8_t **blob, size_t *len, oml_diag *d);

/* A packed blob (NULL: none) as the wire's KeyValues in r's arena: *kv
 * and *n (0 and NULL for none). 0, or -1 when out of memory. */
int omld_meta_to_wire(const uint8_t *blob, Omld__KeyValue ***kv, size_t *n, omld_reply *r);
/* ... set on an Item. */
int omld_meta_to_item(const uint8_t *blob, Omld__Item *it, omld_reply *r);

#endif
