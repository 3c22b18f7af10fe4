/* store_codec.c - the store's encoding (a checkpoint section; format in
 * store.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "bytes.h"
#include "metadata.h"
#include "store_int.h"

/* ---- serialisation (see store.h for the format) ----
 *
 * Encoding is two passes of one writer (sizing, then writing). Decoding
 * first checks that the buffer can hold the counts it claims (so hostile
 * counts cannot make it allocate more than a constant times len), then
 * rebuilds the store record by record, validating each before it is used;
 * the store under construction is always destroyable, so every refusal is
 * one path: destroy and return. */

static const uint8_t STORE_MAGIC[4] = {'O', 'M', 'L', 'S'};
#define STORE_HEAD 24u          /* magic, version, dim, slots, live, labels */
#define STORE_LABEL_MIN 5u      /* u32 len + at least one byte */
#define STORE_SLOT_MIN 10u      /* u8 live + i32 label + u32 id_len + at least one byte */

static void store_encode_head(const oml_store *s, oml_writer *c)
{
    uint32_t version = OML_STORE_CODEC_VERSION, n_labels = (uint32_t)s->n_labels;
    oml_put_bytes(c, STORE_MAGIC, sizeof STORE_MAGIC);
    OML_PUT(c, version);
    OML_PUT(c, s->dim);
    OML_PUT(c, s->n_slots);
    OML_PUT(c, s->n_live);
    OML_PUT(c, n_labels);
    for (int32_t i = 0; i < s->n_labels; i++) {
        OML_PUT(c, s->label_len[i]);
        oml_put_bytes(c, s->label_names[i], s->label_len[i]);
    }
    for (uint32_t i = 0; i < s->n_slots; i++) {
        OML_PUT(c, s->live[i]);
        OML_PUT(c, s->label[i]);
        OML_PUT(c, s->id_len[i]);
        oml_put_bytes(c, s->ids[i], s->id_len[i]);
    }
}

static void store_encode_tail(const oml_store *s, oml_writer *c)
{
    oml_put_le(c, s->gen, 4, s->n_slots);
    uint32_t n_meta = (uint32_t)s->n_meta;
    OML_PUT(c, n_meta);
    for (uint32_t i = 0; s->meta != NULL && i < s->n_slots; i++) {
        if (s->meta[i] == NULL)
            continue;
        uint32_t len = (uint32_t)oml_meta_size(s->meta[i]);
        OML_PUT(c, i);
        OML_PUT(c, len);
        oml_put_bytes(c, s->meta[i], len);
    }
}

static void store_encode_body(const oml_store *s, oml_writer *c)
{
    store_encode_head(s, c);
    oml_put_f32s(c, s->x, (size_t)s->n_slots * (size_t)s->dim);
    store_encode_tail(s, c);
}

/* One part's bytes, malloc'd (at least 1, so an empty part is not NULL). */
static int encode_part(const oml_store *s, void (*part)(const oml_store *, oml_writer *),
                       int with_x, uint8_t **buf, size_t *len)
{
    oml_writer c = oml_writer_counting();
    part(s, &c);
    if (with_x)
        oml_put_f32s(&c, s->x, (size_t)s->n_slots * (size_t)s->dim);
    size_t n = c.pos;
    uint8_t *b = malloc(n ? n : 1);
    if (b == NULL)
        return OML_ENOMEM;
    c = oml_writer_into(b, n);
    part(s, &c);
    if (with_x)
        oml_put_f32s(&c, s->x, (size_t)s->n_slots * (size_t)s->dim);
    *buf = b;
    *len = n;
    return OML_OK;
}

int oml_store_encode_parts(const oml_store *s, uint8_t **head, size_t *nhead,
                           const uint8_t **x, size_t *nx, uint8_t **tail, size_t *ntail)
{
    if (s == NULL || head == NULL || nhead == NULL || x == NULL || nx == NULL || tail == NULL ||
        ntail == NULL)
        return OML_EINVAL;
    const uint32_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    int le = first == 1; /* the features' bytes are their encoding (oml_put_f32s) */
    uint8_t *h = NULL, *t = NULL;
    size_t nh = 0, nt = 0;
    int rc = encode_part(s, store_encode_head, !le, &h, &nh);
    if (rc == OML_OK)
        rc = encode_part(s, store_encode_tail, 0, &t, &nt);
    if (rc != OML_OK) {
        free(h);
        return rc;
    }
    *head = h;
    *nhead = nh;
    *x = le && s->n_slots > 0 ? (const uint8_t *)s->x : NULL;
    *nx = *x ? (size_t)s->n_slots * (size_t)s->dim * sizeof(float) : 0;
    *tail = t;
    *ntail = nt;
    return OML_OK;
}

int oml_store_encode(const oml_store *s, uint8_t **buf, size_t *len)
{
    if (s == NULL || buf == NULL || len == NULL)
        return OML_EINVAL;
    oml_writer c = oml_writer_counting();
    store_encode_body(s, &c); /* sizing pass */
    uint8_t *b = malloc(c.pos);
    if (b == NULL)
        return OML_ENOMEM;
    size_t n = c.pos;
    c = oml_writer_into(b, n);
    store_encode_body(s, &c);
    *buf = b;
    *len = n;
    return OML_OK;
}

/* Reads one name (u32 length, bytes) into a fresh NUL-terminated copy. */
static int store_read_name(oml_reader *c, char **name, uint32_t *name_len, const char *what,
                           uint32_t index, oml_diag *diag)
{
    uint32_t n;
    OML_GET(c, n);
    if (c->bad)
        return oml_diag_set(diag, OML_EFORMAT, "store", "truncated in %s %u", what, index);
    if (n == 0 || n > OML_ID_MAX)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%s %u is %u bytes (want 1..%d)", what,
                            index, n, OML_ID_MAX);
    if (c->len - c->pos < n)
        return oml_diag_set(diag, OML_EFORMAT, "store", "truncated in %s %u", what, index);
    const char *b = (const char *)c->p + c->pos;
    if (memchr(b, '\0', n) != NULL)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%s %u has a NUL byte", what, index);
    if ((*name = oml__store_dup(b, n)) == NULL)
        return oml_diag_set(diag, OML_ENOMEM, "store", "out of memory");
    c->pos += n;
    *name_len = n;
    return OML_OK;
}

/* The label table: n_labels distinct names, in label id order. */
static int decode_labels(oml_store *s, oml_reader *c, uint32_t n_labels, oml_diag *diag)
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
    return OML_OK;
}

/* The slot records (live flag, label id, id), rebuilding the id map of the
 * live slots and the free list of the others. */
static int decode_slots(oml_store *s, oml_reader *c, uint32_t n_slots, uint32_t n_live,
                        oml_diag *diag)
{
    if (n_slots > 0) {
        size_t cap = n_slots;
        if (oml__store_grow_x(s, cap) != OML_OK ||
            (s->ids = malloc(cap * sizeof *s->ids)) == NULL ||
            (s->id_len = malloc(cap * sizeof *s->id_len)) == NULL ||
            (s->label = malloc(cap * sizeof *s->label)) == NULL ||
            (s->live = malloc(cap * sizeof *s->live)) == NULL ||
            (s->gen = calloc(cap, sizeof *s->gen)) == NULL ||
            (s->stamp = malloc(cap * sizeof *s->stamp)) == NULL ||
            (s->free_heap = malloc(cap * sizeof *s->free_heap)) == NULL ||
            oml_idmap_reserve(&s->id_map, n_live) != OML_OK)
            return oml_diag_set(diag, OML_ENOMEM, "store", "out of memory");
        s->cap = n_slots;
    }
    for (uint32_t i = 0; i < n_slots; i++) {
        uint8_t live;
        int32_t lab;
        OML_GET(c, live);
        OML_GET(c, lab);
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
    return OML_OK;
}

#define FEATURE_BLOCK ((size_t)8 << 20) /* floats: 32 MB */
#define FINITE_PART ((size_t)64 << 10) /* floats: 256 KB, copied then checked */

/* Whether no value of x (n) is an infinity or a NaN: all exponent bits set
 * marks both, tested without an early exit so that it vectorises. */
static int all_finite(const float *x, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        bad |= (b & 0x7f800000u) == 0x7f800000u;
    }
    return bad == 0;
}

/* The feature block (n_slots, dim) and, since version 2, the generations;
 * they end the buffer exactly (up to version 2: version 3's metadata
 * follows them), and every feature is finite. */
static int decode_features(oml_store *s, oml_reader *c, uint32_t version, uint32_t n_slots,
                           oml_diag *diag)
{
    size_t nx = (size_t)n_slots * (size_t)s->dim;
    size_t ng = version >= 2 ? (size_t)n_slots * sizeof(uint32_t) : 0;
    size_t have = c->len - c->pos, want = nx * sizeof(float) + ng;
    if (version >= 3 ? have < want + sizeof(uint32_t) : have != want)
        return oml_diag_set(diag, OML_EFORMAT, "store",
                            "feature and generation blocks are %zu bytes, want %zu (truncated or "
                            "trailing bytes)", have, want);
    /* A block at a time, each given back once read: the buffer may be a
     * mapped checkpoint file, which would otherwise stay resident beside
     * the store's own copy until the whole checkpoint is decoded. */
    for (size_t at = 0; at < nx;) {
        size_t m = nx - at < FEATURE_BLOCK ? nx - at : FEATURE_BLOCK;
        const uint8_t *src = c->p + c->pos;
        /* Each part checked while it is still in the cache: a second pass
         * over a million items' features read 3 GB again. */
        for (size_t p = at; p < at + m; p += FINITE_PART) {
            size_t k = at + m - p < FINITE_PART ? at + m - p : FINITE_PART;
            oml_get_f32s(c, s->x + p, k);
            if (!all_finite(s->x + p, k))
                for (size_t i = p; i < p + k; i++)
                    if (!isfinite(s->x[i]))
                        return oml_diag_set(diag, OML_EFORMAT, "store",
                                            "slot %zu feature %zu is not finite",
                                            i / (size_t)s->dim, i % (size_t)s->dim);
        }
        oml_bigmem_read_done(src, m * sizeof(float));
        at += m;
    }
    if (ng > 0)
        oml_get_le(c, s->gen, 4, n_slots); /* version 1 had none: every generation 0 */
    for (uint32_t i = 0; i < n_slots; i++)
        s->stamp[i] = oml__store_next_stamp(); /* new contents for every cache */
    return OML_OK;
}

/* Version 3's metadata: a count, then (slot, blob) in strictly ascending
 * live slots, each blob well-formed; it ends the buffer exactly. */
static int decode_meta(oml_store *s, oml_reader *c, oml_diag *diag)
{
    uint32_t n;
    OML_GET(c, n);
    if (c->bad || n > s->n_live || (uint64_t)n * 9u > c->len - c->pos)
        return oml_diag_set(diag, OML_EFORMAT, "store", "bad metadata count %u", n);
    if (n > 0 && oml__store_meta_array(s) != OML_OK)
        return oml_diag_set(diag, OML_ENOMEM, "store", "out of memory");
    int64_t prev = -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t slot, len;
        OML_GET(c, slot);
        OML_GET(c, len);
        if (c->bad || len > c->len - c->pos)
            return oml_diag_set(diag, OML_EFORMAT, "store", "truncated in metadata %u", i);
        if ((int64_t)slot <= prev || !oml_store_is_live(s, slot))
            return oml_diag_set(diag, OML_EFORMAT, "store",
                                "metadata %u names slot %u (not live, or out of order)", i, slot);
        oml_diag d = {0};
        if (oml_meta_check(c->p + c->pos, len, &d) != OML_OK)
            return oml_diag_set(diag, OML_EFORMAT, "store", "metadata of slot %u: %s", slot,
                                d.msg);
        if ((s->meta[slot] = oml_meta_pool_hold(&s->meta_pool, c->p + c->pos, len)) == NULL)
            return oml_diag_set(diag, OML_ENOMEM, "store", "out of memory");
        c->pos += len;
        s->n_meta++;
        prev = slot;
    }
    if (c->pos != c->len)
        return oml_diag_set(diag, OML_EFORMAT, "store", "%zu trailing bytes", c->len - c->pos);
    return OML_OK;
}

/* The body of oml_store_decode: fills the empty store s from c. */
static int store_decode_into(oml_store *s, oml_reader *c, uint32_t version, uint32_t n_slots,
                             uint32_t n_live, uint32_t n_labels, oml_diag *diag)
{
    int rc = decode_labels(s, c, n_labels, diag);
    if (rc == OML_OK)
        rc = decode_slots(s, c, n_slots, n_live, diag);
    if (rc == OML_OK)
        rc = decode_features(s, c, version, n_slots, diag);
    if (rc == OML_OK && version >= 3)
        rc = decode_meta(s, c, diag);
    return rc;
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
    oml_reader c = oml_reader_of(buf, len);
    c.pos = sizeof STORE_MAGIC;
    uint32_t version, n_slots, n_live, n_labels;
    int32_t dim;
    OML_GET(&c, version);
    if (c.bad)
        return oml_diag_set(diag, OML_EFORMAT, "store", "truncated header");
    if (version < 1 || version > OML_STORE_CODEC_VERSION)
        return oml_diag_set(diag, OML_EVERSION, "store",
                            "store format version %u; this build reads versions 1 to %u",
                            version, OML_STORE_CODEC_VERSION);
    OML_GET(&c, dim);
    OML_GET(&c, n_slots);
    OML_GET(&c, n_live);
    OML_GET(&c, n_labels);
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
                    (version >= 2 ? (uint64_t)n_slots * sizeof(uint32_t) : 0) +
                    (version >= 3 ? sizeof(uint32_t) : 0);
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

