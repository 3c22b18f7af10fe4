/* query_list.c - ListItems: the stored items a page at a time (omld.proto),
 * and CountItems: how many of them pass a filter,
 * on libuv's threadpool. Reads the store only (under its read lock, one
 * page at a time), so it answers with or without a published view.
 *
 * The cursor is a store slot: a page takes the live slots from it on, in
 * slot order, and next_cursor is the slot after the last one it looked
 * at. Slots only grow or get reused, so no item is listed twice; one
 * stored or deleted between pages may or may not be. */
#include <stdlib.h>
#include <string.h>

#include "item_filter.h"
#include "query_int.h"
#include "validate.h"

static int run_list_items(const omld_query_ctx *q, const Omld__ListItemsRequest *m,
                          omld_reply *r)
{
    size_t limit = m->limit ? m->limit : OMLD_LIST_DEFAULT, dim = (size_t)q->lim->dim;
    Omld__ListItemsResponse *resp = omld_reply_alloc(r, sizeof *resp);
    Omld__Item *items = omld_reply_alloc(r, limit * sizeof *items);
    Omld__Item **ip = omld_reply_alloc(r, limit * sizeof *ip);
    float *feats = m->with_features ? omld_reply_alloc(r, limit * dim * sizeof *feats) : NULL;
    if (resp == NULL || items == NULL || ip == NULL || (m->with_features && feats == NULL))
        return omld__query_oom(r, "list_items");
    omld__list_items_response__init(resp);
    int oom = 0;
    pthread_rwlock_rdlock(&q->lock->rw);
    const oml_store *st = q->store;
    int32_t n_labels = oml_store_label_count(st);
    omld_item_filter f;
    int filtered = omld_item_filter_init(&f, st, m->labels, m->n_labels, m->metadata,
                                         m->n_metadata) == 0;
    char **names = omld_reply_alloc(r, (size_t)(n_labels > 0 ? n_labels : 1) * sizeof *names);
    uint32_t slots = oml_store_slots(st), slot = (uint32_t)(m->cursor < slots ? m->cursor : slots);
    size_t n = 0;
    if (!filtered || names == NULL)
        oom = 1;
    for (; !oom && slot < slots && n < limit; slot++) {
        if (!oml_store_is_live(st, slot) || !omld_item_filter_match(&f, st, slot))
            continue;
        int32_t lab = oml_store_label(st, slot);
        int known = lab >= 0 && lab < n_labels;
        Omld__Item *it = &items[n];
        omld__item__init(it);
        size_t len = 0;
        const char *id = oml_store_id(st, slot, &len);
        if ((it->id = omld_reply_strdup(r, id, len)) == NULL) {
            oom = 1;
            break;
        }
        if (feats) {
            it->n_features = dim;
            it->features = feats + n * dim;
            memcpy(it->features, oml_store_features(st, slot), dim * sizeof(float));
        }
        if (omld_meta_to_item(oml_store_meta(st, slot), it, r) != 0) {
            oom = 1;
            break;
        }
        if (known) {
            if (names[lab] == NULL) {
                const char *name = oml_store_label_name(st, lab, &len);
                if ((names[lab] = omld_reply_strdup(r, name, len)) == NULL) {
                    oom = 1;
                    break;
                }
            }
            it->label_opt_case = OMLD__ITEM__LABEL_OPT_LABEL;
            it->label = names[lab];
        }
        ip[n++] = it;
    }
    /* More pages while a live slot remains after this one. */
    uint32_t next = slot;
    while (next < slots && !oml_store_is_live(st, next))
        next++;
    resp->next_cursor = next < slots ? slot : 0;
    resp->total = oml_store_count(st);
    pthread_rwlock_unlock(&q->lock->rw);
    if (filtered)
        omld_item_filter_free(&f);
    if (oom)
        return omld__query_oom(r, "list_items");
    resp->n_items = n;
    resp->items = ip;
    r->msg.list_items = resp;
    r->msg.body_case = OMLD__RESPONSE__BODY_LIST_ITEMS;
    return 0;
}

/* CountItems: one pass over the store's slots under its read lock. */
static int run_count_items(const omld_query_ctx *q, const Omld__CountItemsRequest *m,
                           omld_reply *r)
{
    Omld__CountItemsResponse *resp = omld_reply_alloc(r, sizeof *resp);
    if (resp == NULL)
        return omld__query_oom(r, "count_items");
    omld__count_items_response__init(resp);
    omld_item_filter f;
    pthread_rwlock_rdlock(&q->lock->rw);
    const oml_store *st = q->store;
    int ok = omld_item_filter_init(&f, st, m->labels, m->n_labels, m->metadata,
                                   m->n_metadata) == 0;
    if (ok && (m->n_labels > 0 || m->n_metadata > 0)) {
        for (uint32_t slot = 0; slot < oml_store_slots(st); slot++)
            resp->count += oml_store_is_live(st, slot) && omld_item_filter_match(&f, st, slot);
    } else {
        resp->count = oml_store_count(st);
    }
    resp->total = oml_store_count(st);
    pthread_rwlock_unlock(&q->lock->rw);
    if (!ok)
        return omld__query_oom(r, "count_items");
    omld_item_filter_free(&f);
    r->msg.count_items = resp;
    r->msg.body_case = OMLD__RESPONSE__BODY_COUNT_ITEMS;
    return 0;
}

void omld_query_count_items(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                            omld_reply *r)
{
    (void)live;
    static const Omld__CountItemsRequest none = OMLD__COUNT_ITEMS_REQUEST__INIT;
    run_count_items(q, req->count_items ? req->count_items : &none, r);
}

void omld_query_list_items(const omld_query_ctx *q, omld_view *live, const Omld__Request *req,
                           omld_reply *r)
{
    (void)live;
    static const Omld__ListItemsRequest none = OMLD__LIST_ITEMS_REQUEST__INIT;
    run_list_items(q, req->list_items ? req->list_items : &none, r);
}
