/* store.c - the item store.
 *
 * DESIGN
 * Owns: per-slot arrays (features (cap, dim) row-major, id copy, id length,
 * label id, live flag), the id map (id -> slot of the *live* item), the label
 * table (NUL-terminated copies) and the label map (name -> label id). Both
 * maps borrow their keys from the copies owned here, which live until
 * destroy, so a tombstoned slot still answers oml_store_id().
 * Invariants: n_slots <= cap <= max_items; id_map holds exactly the live
 * slots; free_heap holds exactly the dead slots below n_slots, as a binary
 * min-heap (so a new id always takes the lowest free slot: a function of
 * the live flags alone, which is why the heap needs no place in the
 * encoding); n_live <= max_items; n_labels <= max_items (labels are never
 * forgotten, so this bound keeps memory finite under label churn); gen[i]
 * counts the deletes of slot i.
 * Every put validates all input, then reserves every allocation it may need
 * (array capacity, id copy, label copy, map buckets) and only then mutates;
 * so errors, OML_ENOMEM included, leave the store unchanged.
 * Thread: one writer, see store.h. */
#include "store.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "idmap.h"
#include "metadata.h"
#include "store_int.h"

#define STORE_MIN_CAP 16u

int oml_store_create(oml_store **out, int32_t dim, uint32_t max_items)
{
    if (out == NULL || dim <= 0 || max_items == 0 ||
        (uint64_t)max_items * (uint64_t)dim > SIZE_MAX / sizeof(float))
        return OML_EINVAL;
    oml_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return OML_ENOMEM;
    s->dim = dim;
    s->max_items = max_items;
    oml_idmap_init(&s->id_map);
    oml_idmap_init(&s->label_map);
    oml_meta_pool_init(&s->meta_pool);
    *out = s;
    return OML_OK;
}

void oml_store_destroy(oml_store *s)
{
    if (s == NULL)
        return;
    for (uint32_t i = 0; i < s->n_slots; i++)
        free(s->ids[i]);
    for (int32_t i = 0; i < s->n_labels; i++)
        free(s->label_names[i]);
    if (s->x_mapped)
        oml_bigmem_unmap(s->x, s->x_mapped);
    else
        free(s->x);
    free(s->ids);
    free(s->id_len);
    free(s->label);
    free(s->live);
    free(s->gen);
    free(s->stamp);
    if (s->meta != NULL)
        for (uint32_t i = 0; i < s->n_slots; i++)
            oml_meta_pool_release(&s->meta_pool, s->meta[i]);
    free(s->meta);
    oml_meta_pool_free(&s->meta_pool);
    free(s->free_heap);
    free(s->label_names);
    free(s->label_len);
    oml_idmap_free(&s->id_map);
    oml_idmap_free(&s->label_map);
    free(s);
}

int oml__store_grow_x(oml_store *s, size_t cap)
{
    if (s->x_mapped)
        return OML_OK; /* already room for max_items */
    size_t row = (size_t)s->dim * sizeof(float), max = (size_t)s->max_items * row;
    if (s->x == NULL && max >= OML_BIGMEM_MIN && (s->x = oml_bigmem_map(max)) != NULL) {
        s->x_mapped = max;
        return OML_OK;
    }
    float *p = realloc(s->x, cap * row);
    if (p == NULL)
        return OML_ENOMEM;
    s->x = p;
    oml_bigmem_advise(s->x, cap * row);
    return OML_OK;
}

/* Grows every slot array to hold one more slot. A failure part-way leaves
 * some arrays larger than cap, which is harmless: cap only moves once all
 * of them succeeded, and the next attempt reallocates again. */
static int store_reserve_slot(oml_store *s)
{
    if (s->n_slots < s->cap)
        return OML_OK;
    uint64_t want = s->cap ? 2ull * s->cap : STORE_MIN_CAP;
    uint32_t cap = want > s->max_items ? s->max_items : (uint32_t)want;
    void *p;
    if (oml__store_grow_x(s, cap) != OML_OK)
        return OML_ENOMEM;
    if ((p = realloc(s->ids, (size_t)cap * sizeof *s->ids)) == NULL)
        return OML_ENOMEM;
    s->ids = p;
    if ((p = realloc(s->id_len, (size_t)cap * sizeof *s->id_len)) == NULL)
        return OML_ENOMEM;
    s->id_len = p;
    if ((p = realloc(s->label, (size_t)cap * sizeof *s->label)) == NULL)
        return OML_ENOMEM;
    s->label = p;
    if ((p = realloc(s->live, (size_t)cap * sizeof *s->live)) == NULL)
        return OML_ENOMEM;
    s->live = p;
    if ((p = realloc(s->gen, (size_t)cap * sizeof *s->gen)) == NULL)
        return OML_ENOMEM;
    s->gen = p;
    if ((p = realloc(s->stamp, (size_t)cap * sizeof *s->stamp)) == NULL)
        return OML_ENOMEM;
    s->stamp = p;
    if ((p = realloc(s->free_heap, (size_t)cap * sizeof *s->free_heap)) == NULL)
        return OML_ENOMEM;
    s->free_heap = p;
    if (s->meta != NULL) {
        if ((p = realloc(s->meta, (size_t)cap * sizeof *s->meta)) == NULL)
            return OML_ENOMEM;
        s->meta = p;
        memset(s->meta + s->cap, 0, (size_t)(cap - s->cap) * sizeof *s->meta);
    }
    s->cap = cap;
    return OML_OK;
}

/* ---- the free-slot min-heap (room for every slot is reserved) ---- */

static void heap_push(oml_store *s, uint32_t slot)
{
    uint32_t i = s->n_free++, *h = s->free_heap;
    while (i > 0 && h[(i - 1) / 2] > slot) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = slot;
}

static uint32_t heap_pop(oml_store *s)
{
    uint32_t *h = s->free_heap, top = h[0], last = h[--s->n_free], i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, m = i;
        if (l < s->n_free && h[l] < last)
            m = l;
        if (l + 1 < s->n_free && h[l + 1] < (m == i ? last : h[m]))
            m = l + 1;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    if (s->n_free > 0)
        h[i] = last;
    return top;
}

static int store_reserve_label(oml_store *s)
{
    if (s->n_labels < s->label_cap)
        return OML_OK;
    uint64_t want = s->label_cap ? 2ull * (uint64_t)s->label_cap : STORE_MIN_CAP;
    int32_t cap = want > s->max_items ? (int32_t)s->max_items : (int32_t)want;
    void *p;
    if ((p = realloc(s->label_names, (size_t)cap * sizeof *s->label_names)) == NULL)
        return OML_ENOMEM;
    s->label_names = p;
    if ((p = realloc(s->label_len, (size_t)cap * sizeof *s->label_len)) == NULL)
        return OML_ENOMEM;
    s->label_len = p;
    s->label_cap = cap;
    return OML_OK;
}

int oml__store_meta_array(oml_store *s)
{
    if (s->meta == NULL && s->cap > 0 && (s->meta = calloc(s->cap, sizeof *s->meta)) == NULL)
        return OML_ENOMEM;
    return OML_OK;
}

char *oml__store_dup(const char *b, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, b, n);
        d[n] = '\0';
    }
    return d;
}

/* Ids and labels share the rules: 1..OML_ID_MAX bytes, no NUL. */
static int store_check_name(const char *b, size_t n, const char *field, oml_diag *diag)
{
    if (b == NULL || n == 0)
        return oml_diag_set(diag, OML_EINVAL, field, "%s is empty", field);
    if (n > OML_ID_MAX)
        return oml_diag_set(diag, OML_EINVAL, field, "%s is %zu bytes, max %d", field, n,
                            OML_ID_MAX);
    const char *z = memchr(b, '\0', n);
    if (z != NULL)
        return oml_diag_set(diag, OML_EINVAL, field, "%s has a NUL byte at offset %td", field,
                            z - b);
    return OML_OK;
}

int oml_store_put(oml_store *s, const char *id, size_t id_len, const float *x,
                  const char *label, size_t label_len, uint32_t *slot_out,
                  oml_diag *diag)
{
    return oml_store_put_meta(s, id, id_len, x, label, label_len, NULL, 0, slot_out, diag);
}

int oml_store_put_meta(oml_store *s, const char *id, size_t id_len, const float *x,
                       const char *label, size_t label_len, const uint8_t *meta,
                       size_t meta_len, uint32_t *slot_out, oml_diag *diag)
{
    int rc = store_check_name(id, id_len, "id", diag);
    if (rc != OML_OK)
        return rc;
    if (x == NULL)
        return oml_diag_set(diag, OML_EINVAL, "features", "features are missing");
    for (int32_t i = 0; i < s->dim; i++)
        if (!isfinite(x[i]))
            return oml_diag_set(diag, OML_ENONFINITE, "features",
                                "features[%d] is not finite", (int)i);
    if (label != NULL && (rc = store_check_name(label, label_len, "label", diag)) != OML_OK)
        return rc;
    if (meta != NULL && (rc = oml_meta_check(meta, meta_len, diag)) != OML_OK)
        return rc == OML_EFORMAT ? oml_diag_set(diag, OML_EINVAL, "metadata", "%s", diag->msg)
                                 : rc;
    /* The item's (shared) metadata, held here until the commit. */
    const uint8_t *new_meta = NULL;
    if (meta != NULL && (new_meta = oml_meta_pool_hold(&s->meta_pool, meta, meta_len)) == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "metadata", "out of memory");

    /* Resolve or reserve the label. A new label's copy is made now and
     * owned by this function until the commit below. */
    int32_t lab = OML_LABEL_NONE;
    char *new_label = NULL;
    if (label != NULL) {
        uint32_t v;
        if (oml_idmap_get(&s->label_map, label, label_len, &v) == OML_OK) {
            lab = (int32_t)v;
        } else {
            if ((uint32_t)s->n_labels >= s->max_items) {
                oml_meta_pool_release(&s->meta_pool, new_meta);
                return oml_diag_set(diag, OML_EFULL, "label", "too many labels (max %u)",
                                    s->max_items);
            }
            if (store_reserve_label(s) != OML_OK ||
                oml_idmap_reserve(&s->label_map, 1) != OML_OK ||
                (new_label = oml__store_dup(label, label_len)) == NULL) {
                oml_meta_pool_release(&s->meta_pool, new_meta);
                return oml_diag_set(diag, OML_ENOMEM, "label", "out of memory");
            }
            lab = s->n_labels;
        }
    }

    uint32_t slot;
    char *new_id = NULL;
    int reuse = 0;
    if (oml_idmap_get(&s->id_map, id, id_len, &slot) != OML_OK) {
        if (s->n_live >= s->max_items) { /* then n_slots < max_items or a slot is free */
            free(new_label);
            oml_meta_pool_release(&s->meta_pool, new_meta);
            return oml_diag_set(diag, OML_EFULL, "id", "store is full (%u live items)",
                                s->max_items);
        }
        reuse = s->n_free > 0;
        if ((!reuse && store_reserve_slot(s) != OML_OK) ||
            oml_idmap_reserve(&s->id_map, 1) != OML_OK ||
            (new_id = oml__store_dup(id, id_len)) == NULL) {
            free(new_label);
            free(new_id);
            oml_meta_pool_release(&s->meta_pool, new_meta);
            return oml_diag_set(diag, OML_ENOMEM, "id", "out of memory");
        }
        slot = reuse ? s->free_heap[0] : s->n_slots;
    }
    /* Slot capacity is reserved by now, so the pointer array covers it. */
    if (new_meta != NULL && oml__store_meta_array(s) != OML_OK) {
        free(new_label);
        free(new_id);
        oml_meta_pool_release(&s->meta_pool, new_meta);
        return oml_diag_set(diag, OML_ENOMEM, "metadata", "out of memory");
    }

    /* Commit: nothing below can fail, the maps have room reserved. */
    if (new_label != NULL) {
        s->label_names[lab] = new_label;
        s->label_len[lab] = (uint32_t)label_len;
        (void)oml_idmap_put(&s->label_map, new_label, label_len, (uint32_t)lab);
        s->n_labels++;
    }
    if (new_id != NULL) {
        if (reuse) {
            (void)heap_pop(s); /* == slot */
            free(s->ids[slot]); /* the deleted item's id, in no map */
        } else {
            s->gen[slot] = 0;
            s->n_slots++;
        }
        s->ids[slot] = new_id;
        s->id_len[slot] = (uint32_t)id_len;
        s->live[slot] = 1;
        (void)oml_idmap_put(&s->id_map, new_id, id_len, slot);
        s->n_live++;
    }
    memcpy(s->x + (size_t)slot * (size_t)s->dim, x, (size_t)s->dim * sizeof(float));
    s->stamp[slot] = oml__store_next_stamp();
    s->label[slot] = lab;
    if (s->meta != NULL) { /* a put replaces the whole item, metadata included */
        const uint8_t *old = s->meta[slot]; /* NULL for a new or reused slot */
        s->n_meta -= old != NULL;
        oml_meta_pool_release(&s->meta_pool, old);
        s->meta[slot] = new_meta;
        s->n_meta += new_meta != NULL;
    }
    s->changes++;
    if (slot_out != NULL)
        *slot_out = slot;
    return OML_OK;
}

int oml_store_delete(oml_store *s, const char *id, size_t id_len)
{
    uint32_t slot;
    if (id == NULL || oml_idmap_get(&s->id_map, id, id_len, &slot) != OML_OK)
        return OML_ENOTFOUND;
    (void)oml_idmap_del(&s->id_map, id, id_len);
    s->live[slot] = 0;
    s->n_live--;
    if (s->meta != NULL && s->meta[slot] != NULL) { /* a tombstone keeps no metadata */
        oml_meta_pool_release(&s->meta_pool, s->meta[slot]);
        s->meta[slot] = NULL;
        s->n_meta--;
    }
    s->gen[slot]++;
    s->changes++;
    heap_push(s, slot); /* room: the heap holds at most every slot */
    return OML_OK;
}

uint64_t oml__store_next_stamp(void)
{
    static atomic_uint_fast64_t last; /* every store's, so stamps never repeat */
    return (uint64_t)atomic_fetch_add_explicit(&last, 1, memory_order_relaxed) + 1;
}

uint64_t oml_store_stamp(const oml_store *s, uint32_t slot)
{
    return slot < s->n_slots ? s->stamp[slot] : 0;
}

uint32_t oml_store_generation(const oml_store *s, uint32_t slot)
{
    return slot < s->n_slots ? s->gen[slot] : 0;
}

int oml_store_find(const oml_store *s, const char *id, size_t id_len, uint32_t *slot)
{
    uint32_t v;
    if (id == NULL || oml_idmap_get(&s->id_map, id, id_len, &v) != OML_OK)
        return OML_ENOTFOUND;
    if (slot != NULL)
        *slot = v;
    return OML_OK;
}

int oml_store_is_live(const oml_store *s, uint32_t slot)
{
    return slot < s->n_slots && s->live[slot];
}

const float *oml_store_features(const oml_store *s, uint32_t slot)
{
    return slot < s->n_slots ? s->x + (size_t)slot * (size_t)s->dim : NULL;
}

const char *oml_store_id(const oml_store *s, uint32_t slot, size_t *len)
{
    if (slot >= s->n_slots)
        return NULL;
    if (len != NULL)
        *len = s->id_len[slot];
    return s->ids[slot];
}

int32_t oml_store_label(const oml_store *s, uint32_t slot)
{
    return slot < s->n_slots ? s->label[slot] : OML_LABEL_NONE;
}

const uint8_t *oml_store_meta(const oml_store *s, uint32_t slot)
{
    return s->meta != NULL && slot < s->n_slots ? s->meta[slot] : NULL;
}

size_t oml_store_meta_items(const oml_store *s)
{
    return s->n_meta;
}

int32_t oml_store_label_count(const oml_store *s)
{
    return s->n_labels;
}

const char *oml_store_label_name(const oml_store *s, int32_t label, size_t *len)
{
    if (label < 0 || label >= s->n_labels)
        return NULL;
    if (len != NULL)
        *len = s->label_len[label];
    return s->label_names[label];
}

int32_t oml_store_dim(const oml_store *s)
{
    return s->dim;
}

uint32_t oml_store_slots(const oml_store *s)
{
    return s->n_slots;
}

uint32_t oml_store_count(const oml_store *s)
{
    return s->n_live;
}

uint64_t oml_store_changes(const oml_store *s)
{
    return s->changes;
}

const float *oml_store_matrix(const oml_store *s)
{
    return s->x;
}

void oml_store_swap(oml_store *a, oml_store *b)
{
    oml_store t = *a;
    *a = *b;
    *b = t;
}
