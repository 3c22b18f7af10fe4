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
#include <stdlib.h>
#include <string.h>

#include "idmap.h"

#define STORE_MIN_CAP 16u

struct oml_store {
    int32_t dim;
    uint32_t max_items;
    uint32_t n_slots, cap, n_live;
    float *x;          /* (cap, dim) */
    char **ids;        /* (cap), owned NUL-terminated copies */
    uint32_t *id_len;  /* (cap) */
    int32_t *label;    /* (cap) */
    uint8_t *live;     /* (cap) */
    uint32_t *gen;     /* (cap) deletes of each slot: its generation */
    uint32_t *free_heap; /* (cap) dead slots, min-heap */
    uint32_t n_free;
    oml_idmap id_map;  /* live id -> slot */

    char **label_names; /* (label_cap), owned NUL-terminated copies */
    uint32_t *label_len;
    int32_t n_labels, label_cap;
    oml_idmap label_map; /* name -> label id */
};

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
    free(s->x);
    free(s->ids);
    free(s->id_len);
    free(s->label);
    free(s->live);
    free(s->gen);
    free(s->free_heap);
    free(s->label_names);
    free(s->label_len);
    oml_idmap_free(&s->id_map);
    oml_idmap_free(&s->label_map);
    free(s);
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
    if ((p = realloc(s->x, (size_t)cap * (size_t)s->dim * sizeof(float))) == NULL)
        return OML_ENOMEM;
    s->x = p;
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
    if ((p = realloc(s->free_heap, (size_t)cap * sizeof *s->free_heap)) == NULL)
        return OML_ENOMEM;
    s->free_heap = p;
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

static char *store_dup(const char *b, size_t n)
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

    /* Resolve or reserve the label. A new label's copy is made now and
     * owned by this function until the commit below. */
    int32_t lab = OML_LABEL_NONE;
    char *new_label = NULL;
    if (label != NULL) {
        uint32_t v;
        if (oml_idmap_get(&s->label_map, label, label_len, &v) == OML_OK) {
            lab = (int32_t)v;
        } else {
            if ((uint32_t)s->n_labels >= s->max_items)
                return oml_diag_set(diag, OML_EFULL, "label", "too many labels (max %u)",
                                    s->max_items);
            if (store_reserve_label(s) != OML_OK ||
                oml_idmap_reserve(&s->label_map, 1) != OML_OK ||
                (new_label = store_dup(label, label_len)) == NULL)
                return oml_diag_set(diag, OML_ENOMEM, "label", "out of memory");
            lab = s->n_labels;
        }
    }

    uint32_t slot;
    char *new_id = NULL;
    int reuse = 0;
    if (oml_idmap_get(&s->id_map, id, id_len, &slot) != OML_OK) {
        if (s->n_live >= s->max_items) { /* then n_slots < max_items or a slot is free */
            free(new_label);
            return oml_diag_set(diag, OML_EFULL, "id", "store is full (%u live items)",
                                s->max_items);
        }
        reuse = s->n_free > 0;
        if ((!reuse && store_reserve_slot(s) != OML_OK) ||
            oml_idmap_reserve(&s->id_map, 1) != OML_OK ||
            (new_id = store_dup(id, id_len)) == NULL) {
            free(new_label);
            free(new_id);
            return oml_diag_set(diag, OML_ENOMEM, "id", "out of memory");
        }
        slot = reuse ? s->free_heap[0] : s->n_slots;
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
    s->label[slot] = lab;
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
    s->gen[slot]++;
    heap_push(s, slot); /* room: the heap holds at most every slot */
    return OML_OK;
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

const float *oml_store_matrix(const oml_store *s)
{
    return s->x;
}

/* ---- serialisation (see store.h for the format) ----
 *
 * Encoding is two passes of one writer (sizing, then writing). Decoding
 * first checks that the buffer can hold the counts it claims (so hostile
 * counts cannot make it allocate more than a constant times len), then
 * rebuilds the store record by record, validating each before it is used;
 * the store under construction is always destroyable, so every refusal is
 * one path: destroy and return. */

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store codec assumes a little-endian host");

static const uint8_t STORE_MAGIC[4] = {'O', 'M', 'L', 'S'};
#define STORE_HEAD 24u          /* magic, version, dim, slots, live, labels */
#define STORE_LABEL_MIN 5u      /* u32 len + at least one byte */
#define STORE_SLOT_MIN 10u      /* u8 live + i32 label + u32 id_len + at least one byte */

typedef struct store_cursor {
    uint8_t *w;        /* writing: the buffer, or NULL to only count */
    const uint8_t *r;  /* reading */
    size_t len, pos;
    int bad;           /* a read ran past the end */
} store_cursor;

static void sc_put(store_cursor *c, const void *v, size_t n)
{
    if (c->w != NULL && n > 0)
        memcpy(c->w + c->pos, v, n);
    c->pos += n;
}

static void sc_get(store_cursor *c, void *v, size_t n)
{
    if (c->bad || c->len - c->pos < n) {
        c->bad = 1;
        memset(v, 0, n);
        return;
    }
    memcpy(v, c->r + c->pos, n);
    c->pos += n;
}

#define SC_PUT(c, v) sc_put(c, &(v), sizeof(v))
#define SC_GET(c, v) sc_get(c, &(v), sizeof(v))

static void store_encode_body(const oml_store *s, store_cursor *c)
{
    uint32_t version = OML_STORE_CODEC_VERSION, n_labels = (uint32_t)s->n_labels;
    sc_put(c, STORE_MAGIC, sizeof STORE_MAGIC);
    SC_PUT(c, version);
    SC_PUT(c, s->dim);
    SC_PUT(c, s->n_slots);
    SC_PUT(c, s->n_live);
    SC_PUT(c, n_labels);
    for (int32_t i = 0; i < s->n_labels; i++) {
        SC_PUT(c, s->label_len[i]);
        sc_put(c, s->label_names[i], s->label_len[i]);
    }
    for (uint32_t i = 0; i < s->n_slots; i++) {
        SC_PUT(c, s->live[i]);
        SC_PUT(c, s->label[i]);
        SC_PUT(c, s->id_len[i]);
        sc_put(c, s->ids[i], s->id_len[i]);
    }
    sc_put(c, s->x, (size_t)s->n_slots * (size_t)s->dim * sizeof(float));
    sc_put(c, s->gen, (size_t)s->n_slots * sizeof(uint32_t));
}

int oml_store_encode(const oml_store *s, uint8_t **buf, size_t *len)
{
    if (s == NULL || buf == NULL || len == NULL)
        return OML_EINVAL;
    store_cursor c = {0};
    store_encode_body(s, &c); /* sizing pass */
    uint8_t *b = malloc(c.pos);
    if (b == NULL)
        return OML_ENOMEM;
    size_t n = c.pos;
    c = (store_cursor){.w = b};
    store_encode_body(s, &c);
    *buf = b;
    *len = n;
    return OML_OK;
}

/* Reads one name (u32 length, bytes) into a fresh NUL-terminated copy. */
static int store_read_name(store_cursor *c, char **name, uint32_t *name_len, const char *what,
                           uint32_t index, oml_diag *diag)
{
    uint32_t n;
    SC_GET(c, n);
    if (c->bad)
        return oml_diag_set(diag, OML_EFORMAT, "store", "truncated in %s %u", what, index);
    if (n == 0 || n > OML_ID_MAX)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%s %u is %u bytes (want 1..%d)", what,
                            index, n, OML_ID_MAX);
    if (c->len - c->pos < n)
        return oml_diag_set(diag, OML_EFORMAT, "store", "truncated in %s %u", what, index);
    const char *b = (const char *)c->r + c->pos;
    if (memchr(b, '\0', n) != NULL)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%s %u has a NUL byte", what, index);
    if ((*name = store_dup(b, n)) == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "store", "out of memory");
    c->pos += n;
    *name_len = n;
    return OML_OK;
}

/* The body of oml_store_decode: fills the empty store s from c. */
static int store_decode_into(oml_store *s, store_cursor *c, uint32_t version, uint32_t n_slots,
                             uint32_t n_live, uint32_t n_labels, oml_diag *diag)
{
    if (n_labels > 0) {
        if ((s->label_names = malloc((size_t)n_labels * sizeof *s->label_names)) == NULL ||
            (s->label_len = malloc((size_t)n_labels * sizeof *s->label_len)) == NULL ||
            oml_idmap_reserve(&s->label_map, n_labels) != OML_OK)
            return oml_diag_set(diag, OML_ENOMEM, "store", "out of memory");
        s->label_cap = (int32_t)n_labels;
    }
    for (uint32_t i = 0; i < n_labels; i++) {
        char *name = NULL;
        uint32_t n = 0;
        int rc = store_read_name(c, &name, &n, "label", i, diag);
        if (rc != OML_OK)
            return rc;
        s->label_names[i] = name; /* owned by s from here on */
        s->label_len[i] = n;
        s->n_labels++;
        uint32_t prev;
        if (oml_idmap_get(&s->label_map, name, n, &prev) == OML_OK)
            return oml_diag_set(diag, OML_EFORMAT, "store", "label %u repeats label %u", i, prev);
        (void)oml_idmap_put(&s->label_map, name, n, i); /* reserved above */
    }

    if (n_slots > 0) {
        size_t cap = n_slots;
        if ((s->x = malloc(cap * (size_t)s->dim * sizeof(float))) == NULL ||
            (s->ids = malloc(cap * sizeof *s->ids)) == NULL ||
            (s->id_len = malloc(cap * sizeof *s->id_len)) == NULL ||
            (s->label = malloc(cap * sizeof *s->label)) == NULL ||
            (s->live = malloc(cap * sizeof *s->live)) == NULL ||
            (s->gen = calloc(cap, sizeof *s->gen)) == NULL ||
            (s->free_heap = malloc(cap * sizeof *s->free_heap)) == NULL ||
            oml_idmap_reserve(&s->id_map, n_live) != OML_OK)
            return oml_diag_set(diag, OML_ENOMEM, "store", "out of memory");
        s->cap = n_slots;
    }
    for (uint32_t i = 0; i < n_slots; i++) {
        uint8_t live;
        int32_t lab;
        SC_GET(c, live);
        SC_GET(c, lab);
        if (c->bad)
            return oml_diag_set(diag, OML_EFORMAT, "store", "truncated in slot %u", i);
        if (live > 1)
            return oml_diag_set(diag, OML_EFORMAT, "store", "slot %u has live flag %u", i,
                                (unsigned)live);
        if (lab < OML_LABEL_NONE || lab >= s->n_labels)
            return oml_diag_set(diag, OML_EFORMAT, "store",
                                "slot %u has label id %d, the table has %d labels", i, (int)lab,
                                (int)s->n_labels);
        char *id = NULL;
        uint32_t n = 0;
        int rc = store_read_name(c, &id, &n, "slot id", i, diag);
        if (rc != OML_OK)
            return rc;
        s->ids[i] = id; /* owned by s from here on */
        s->id_len[i] = n;
        s->label[i] = lab;
        s->live[i] = live;
        s->n_slots++;
        if (live) {
            if (s->n_live == n_live)
                return oml_diag_set(diag, OML_EFORMAT, "store",
                                    "more live slots than the %u the header says", n_live);
            uint32_t prev;
            if (oml_idmap_get(&s->id_map, id, n, &prev) == OML_OK)
                return oml_diag_set(diag, OML_EFORMAT, "store",
                                    "slot %u: its id is live in slot %u too", i, prev);
            (void)oml_idmap_put(&s->id_map, id, n, i); /* reserved above */
            s->n_live++;
        } else {
            s->free_heap[s->n_free++] = i; /* ascending: already a min-heap */
        }
    }
    if (s->n_live != n_live)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%u live slots, the header says %u",
                            s->n_live, n_live);

    size_t nx = (size_t)n_slots * (size_t)s->dim;
    size_t ng = version >= 2 ? (size_t)n_slots * sizeof(uint32_t) : 0;
    if (c->len - c->pos != nx * sizeof(float) + ng)
        return oml_diag_set(diag, OML_EFORMAT, "store",
                            "feature and generation blocks are %zu bytes, want %zu (truncated or "
                            "trailing bytes)", c->len - c->pos, nx * sizeof(float) + ng);
    if (nx > 0)
        sc_get(c, s->x, nx * sizeof(float));
    if (ng > 0)
        sc_get(c, s->gen, ng); /* version 1 had none: every generation 0 */
    for (size_t i = 0; i < nx; i++)
        if (!isfinite(s->x[i]))
            return oml_diag_set(diag, OML_EFORMAT, "store", "slot %zu feature %zu is not finite",
                                i / (size_t)s->dim, i % (size_t)s->dim);
    return OML_OK;
}

int oml_store_decode(oml_store **out, const uint8_t *buf, size_t len, uint32_t max_items,
                     oml_diag *diag)
{
    if (out == NULL || (buf == NULL && len > 0))
        return oml_diag_set(diag, OML_EINVAL, "store", "no output or no buffer");
    if (max_items == 0)
        return oml_diag_set(diag, OML_EINVAL, "max_items", "max_items is 0");
    if (len < sizeof STORE_MAGIC || memcmp(buf, STORE_MAGIC, sizeof STORE_MAGIC) != 0)
        return oml_diag_set(diag, OML_EFORMAT, "store", "not an encoded store (bad magic)");
    store_cursor c = {.r = buf, .len = len, .pos = sizeof STORE_MAGIC};
    uint32_t version, n_slots, n_live, n_labels;
    int32_t dim;
    SC_GET(&c, version);
    if (c.bad)
        return oml_diag_set(diag, OML_EFORMAT, "store", "truncated header");
    if (version != 1 && version != OML_STORE_CODEC_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "store",
                            "store format version %u; this build reads versions 1 and %u",
                            version, OML_STORE_CODEC_VERSION);
    SC_GET(&c, dim);
    SC_GET(&c, n_slots);
    SC_GET(&c, n_live);
    SC_GET(&c, n_labels);
    if (c.bad)
        return oml_diag_set(diag, OML_EFORMAT, "store", "truncated header");
    if (dim <= 0)
        return oml_diag_set(diag, OML_EFORMAT, "store", "dim is %d", (int)dim);
    if (n_live > n_slots)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%u live items in %u slots", n_live,
                            n_slots);
    if (n_labels > INT32_MAX)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%u labels (max %d)", n_labels,
                            INT32_MAX);
    /* Every label and slot takes bytes: refuse counts the buffer cannot hold
     * before allocating for them. */
    uint64_t rest = len - c.pos;
    if (n_slots > 0 && (uint64_t)dim > rest / sizeof(float) / n_slots)
        return oml_diag_set(diag, OML_EFORMAT, "store",
                            "%u slots of dim %d do not fit in %zu bytes (truncated?)", n_slots,
                            (int)dim, len);
    uint64_t need = (uint64_t)n_labels * STORE_LABEL_MIN + (uint64_t)n_slots * STORE_SLOT_MIN +
                    (uint64_t)n_slots * (uint64_t)dim * sizeof(float) +
                    (version >= 2 ? (uint64_t)n_slots * sizeof(uint32_t) : 0);
    if (need > rest)
        return oml_diag_set(diag, OML_EFORMAT, "store",
                            "%u labels and %u slots do not fit in %zu bytes (truncated?)",
                            n_labels, n_slots, len);
    if (n_slots > max_items || n_labels > max_items)
        return oml_diag_set(diag, OML_EFULL, "max_items",
                            "the encoded store has %u slots and %u labels, max_items is %u",
                            n_slots, n_labels, max_items);

    oml_store *s;
    int rc = oml_store_create(&s, dim, max_items);
    if (rc != OML_OK)
        return rc == OML_ENOMEM
                   ? oml_diag_set(diag, OML_ENOMEM, "store", "out of memory")
                   : oml_diag_set(diag, OML_EINVAL, "max_items",
                                  "max_items %u is too large for dim %d", max_items, (int)dim);
    rc = store_decode_into(s, &c, version, n_slots, n_live, n_labels, diag);
    if (rc != OML_OK) {
        oml_store_destroy(s);
        return rc;
    }
    *out = s;
    return OML_OK;
}

void oml_store_swap(oml_store *a, oml_store *b)
{
    oml_store t = *a;
    *a = *b;
    *b = t;
}
