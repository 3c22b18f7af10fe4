/* index_build.c - building an index from the store, in steps.
 *
 * DESIGN: the store changes while a large index is built (embedding a
 * million items takes seconds), so the build is a builder that works in
 * gathers: each visits the next slots in ascending order and copies up to
 * INDEX_GATHER_ROWS live items (id, slot, label, features) out of the store,
 * which is all the caller must hold the store's lock for; embedding the
 * gathered rows needs no lock. An item is in the index in the state its
 * slot had when the gather visited it, so every change made before the
 * build began is in it; a change to a slot already visited waits for the
 * next build. oml_index_build runs the same steps without letting go of
 * the store, so both paths give the same index for the same store.
 *
 * The rows' ids go into one growing character buffer; their embeddings go
 * straight into the index's column layout (each head's rows as columns),
 * with room for the live items the build began with and some more, so
 * oml_index_builder_finish only closes the columns up and hands them to
 * the index: the embeddings never exist twice (they used to be gathered
 * row by row and copied into columns at the end, 2 x 1.15 GB at 1M items
 * of three 96-d heads). The rest goes into the index's arena (index.c).
 * Lists (hlist.h) come after, without the store (oml_index_add_lists);
 * or, for an index that will keep only its lists' codes, the rows are
 * coded into them as they are embedded and never go into columns
 * (oml_index_builder_code_lists: the gathers take a strided sample of the
 * store's items first, whose embeddings train each head's coder). */
#include "index.h"
#include "shard.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bigmem.h"
#include "net.h"
#include "parallel.h"

/* Doubles *cap until it holds need, reallocating *p (elem bytes each). */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return OML_OK;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (q == NULL)
        return OML_ENOMEM;
    oml_bigmem_advise(q, c * elem);
    *p = q;
    *cap = c;
    return OML_OK;
}

int oml_index_builder_init(oml_index_builder *b, oml_snapshot *snap, int32_t dim)
{
    memset(b, 0, sizeof *b);
    if (snap == NULL || dim != snap->cfg.dim)
        return snap == NULL ? OML_EINVAL : OML_EDIM;
    b->heads = oml_snapshot_heads(snap);
    b->emb = snap->cfg.emb;
    b->dim = dim;
    b->in = snap->lay.has_basis ? snap->lay.in : 0;
    size_t g = OML_INDEX_GATHER_ROWS;
    b->X = malloc(g * (size_t)dim * sizeof(float));
    b->out = malloc(g * (size_t)b->heads * (size_t)b->emb * sizeof(float));
    if (b->in > 0) {
        b->H0 = malloc(g * (size_t)b->in * sizeof(float));
        b->P = malloc(g * (size_t)b->in * sizeof(float));
        b->new_row = malloc(g * sizeof *b->new_row);
        b->new_slot = malloc(g * sizeof *b->new_slot);
        b->new_stamp = malloc(g * sizeof *b->new_stamp);
    }
    if (b->X == NULL || b->out == NULL ||
        (b->in > 0 && (b->H0 == NULL || b->P == NULL || b->new_row == NULL ||
                       b->new_slot == NULL || b->new_stamp == NULL))) {
        oml_index_builder_free(b);
        return OML_ENOMEM;
    }
    b->snap = oml_snapshot_retain(snap);
    return OML_OK;
}

/* A coded build's sample and coders, and its mode (restart ends it). */
static void drop_coding(oml_index_builder *b)
{
    free(b->sample);
    for (int h = 0; b->coders && h < b->heads; h++)
        oml_hlist_coder_free(&b->coders[h]);
    free(b->coders);
    b->sample = NULL;
    b->coders = NULL;
    b->code_lists = 0;
    b->pq_skip = 0;
    b->sampling = 0;
    b->nonfinite = 0;
    b->nonfinite_row = -1;
}

int oml_index_builder_restart(oml_index_builder *b, oml_snapshot *snap, int32_t dim)
{
    if (b->X == NULL || snap == NULL || dim != b->dim ||
        oml_snapshot_heads(snap) != b->heads || snap->cfg.emb != b->emb ||
        (snap->lay.has_basis ? snap->lay.in : 0) != b->in) {
        oml_projcache *cache = b->cache;
        oml_index_builder_free(b);
        int rc = oml_index_builder_init(b, snap, dim);
        b->cache = cache;
        return rc;
    }
    oml_snapshot_release(b->snap);
    b->snap = oml_snapshot_retain(snap);
    b->next_slot = 0;
    b->n = 0;
    b->pending = 0;
    b->shard_i = 0;
    b->shard_n = 0;
    b->use_cache = 0;
    drop_coding(b);
    return OML_OK;
}

int oml_index_builder_code_lists(oml_index_builder *b)
{
    if (b->shard_n > 1 || b->X == NULL)
        return OML_EINVAL;
    drop_coding(b);
    if (b->cols) /* a builder kept from a build with columns: this one has none */
        munmap(b->cols, b->cols_len);
    b->cols = NULL;
    b->cols_len = 0;
    b->cap_cols = 0;
    b->code_lists = 1;
    b->sampling = 1;
    b->sample_want = b->sample_next = b->sample_got = 0;
    return OML_OK;
}

void oml_index_builder_release_snapshot(oml_index_builder *b)
{
    oml_snapshot_release(b->snap);
    b->snap = NULL;
}

size_t oml_index_builder_bytes(const oml_index_builder *b)
{
    size_t per = (size_t)b->heads * (size_t)b->emb, in = (size_t)b->in;
    size_t new_rows = in ? sizeof *b->new_row + sizeof *b->new_slot + sizeof *b->new_stamp : 0;
    return (size_t)OML_INDEX_GATHER_ROWS * (((size_t)b->dim + per + 2 * in) * sizeof(float)
                                            + new_rows)
           + b->cap_rows * sizeof *b->slots + b->cap_labels * sizeof *b->labels
           + b->cap_gens * sizeof *b->gens + b->cap_mine + b->cap_cols * per * sizeof(float);
}

void oml_index_builder_free(oml_index_builder *b)
{
    oml_snapshot_release(b->snap);
    free(b->X);
    free(b->out);
    free(b->slots);
    free(b->labels);
    free(b->gens);
    free(b->mine);
    if (b->cols)
        munmap(b->cols, b->cols_len);
    free(b->H0);
    free(b->P);
    free(b->new_row);
    free(b->new_slot);
    free(b->new_stamp);
    drop_coding(b);
    memset(b, 0, sizeof *b);
}

/* Row m's input: its kept h(0), else its features (at the front of X with
 * a basis, to be projected; at row m without). */
static void gather_input(oml_index_builder *b, const oml_store *store, uint32_t slot, int32_t m)
{
    size_t d = (size_t)b->dim;
    if (b->defer)
        return; /* run_blocks reads them from the store */
    if (b->in == 0) {
        memcpy(b->X + (size_t)m * d, oml_store_features(store, slot), d * sizeof(float));
        return;
    }
    uint64_t stamp = oml_store_stamp(store, slot);
    const float *kept = b->use_cache ? oml_projcache_get(b->cache, slot, stamp) : NULL;
    if (kept != NULL) {
        memcpy(b->H0 + (size_t)m * (size_t)b->in, kept, (size_t)b->in * sizeof(float));
        return;
    }
    int32_t k = b->n_new++;
    memcpy(b->X + (size_t)k * d, oml_store_features(store, slot), d * sizeof(float));
    b->new_row[k] = m;
    b->new_slot[k] = slot;
    b->new_stamp[k] = stamp;
}

/* Projects the gather's new rows onto the basis into H0, keeping them. */
static void project_new(oml_index_builder *b)
{
    size_t in = (size_t)b->in;
    oml_net_project(&b->snap->lay, b->snap->params, b->X, b->n_new, b->P);
    for (int32_t k = 0; k < b->n_new; k++) {
        const float *p = b->P + (size_t)k * in;
        memcpy(b->H0 + (size_t)b->new_row[k] * in, p, in * sizeof(float));
        if (b->use_cache)
            oml_projcache_put(b->cache, b->new_slot[k], b->new_stamp[k], p);
    }
}

/* The sample's first gather: how many items, and room for their
 * embeddings. Item i is the first live one from slot i x slots / want. */
static int begin_sample(oml_index_builder *b, const oml_store *store)
{
    size_t live = oml_store_count(store);
    b->n_lists = oml_index_lists_for(live);
    if (live < OML_INDEX_CODE_LISTS_MIN || b->n_lists == 0)
        return OML_EINVAL;
    size_t want = (size_t)b->n_lists * OML_HLIST_SAMPLE_PER_LIST;
    b->sample_want = want < live ? want : live;
    b->sample_slots = oml_store_slots(store);
    b->sample = malloc((size_t)b->heads * b->sample_want * (size_t)b->emb * sizeof(float));
    b->coders = calloc((size_t)b->heads, sizeof *b->coders);
    b->expect = live;
    return b->sample && b->coders ? OML_OK : OML_ENOMEM;
}

/* The sample's next items into the gather buffers (pending); 1: the
 * build's rows come after it. */
static int gather_sample(oml_index_builder *b, const oml_store *store)
{
    int rc = b->sample == NULL ? begin_sample(b, store) : OML_OK;
    if (rc != OML_OK)
        return rc;
    uint32_t slots = oml_store_slots(store);
    int32_t m = 0;
    b->n_new = 0;
    for (; b->sample_next < b->sample_want && m < OML_INDEX_GATHER_ROWS; b->sample_next++) {
        size_t i = b->sample_next, s0 = i * b->sample_slots / b->sample_want,
               s1 = (i + 1) * b->sample_slots / b->sample_want;
        for (size_t s = s0; s < s1 && s < slots; s++)
            if (oml_store_is_live(store, (uint32_t)s)) {
                gather_input(b, store, (uint32_t)s, m++);
                break;
            }
    }
    b->pending = m;
    return 1;
}

int oml_index_builder_gather(oml_index_builder *b, const oml_store *store)
{
    if (b->pending > 0)
        return OML_EINVAL; /* embed what was gathered first */
    if (b->sampling)
        return gather_sample(b, store);
    uint32_t slots = oml_store_slots(store);
    size_t want = b->n + OML_INDEX_GATHER_ROWS;
    if (b->n == 0) { /* every live item at once: no doubling, no copy of what grew */
        b->expect = oml_store_count(store);
        want += b->expect;
    }
    if (grow((void **)&b->slots, &b->cap_rows, want, sizeof *b->slots) != OML_OK)
        return OML_ENOMEM;
    size_t cap = b->cap_labels;
    if (grow((void **)&b->labels, &cap, want, sizeof *b->labels) != OML_OK)
        return OML_ENOMEM;
    b->cap_labels = cap;
    if (grow((void **)&b->gens, &b->cap_gens, want, sizeof *b->gens) != OML_OK)
        return OML_ENOMEM;
    if (b->shard_n > 1 && grow((void **)&b->mine, &b->cap_mine, want, 1) != OML_OK)
        return OML_ENOMEM;
    if (b->n == 0 && b->next_slot == 0) /* the build's first gather */
        b->use_cache = b->in > 0 && b->cache != NULL && !b->code_lists &&
                       oml_projcache_begin(b->cache, b->snap, slots) == OML_OK;
    int32_t m = 0;
    b->n_new = 0;
    uint32_t s = b->next_slot;
    for (; s < slots && m < OML_INDEX_GATHER_ROWS; s++) {
        if (!oml_store_is_live(store, s))
            continue;
        size_t row = b->n + (size_t)m;
        if (b->shard_n > 1) {
            size_t len;
            const char *id = oml_store_id(store, s, &len);
            b->mine[row] = oml_shard_of(id, len, b->shard_n) == b->shard_i;
        }
        b->gens[row] = oml_store_generation(store, s);
        b->slots[row] = s;
        b->labels[row] = oml_store_label(store, s);
        gather_input(b, store, s, m);
        m++;
    }
    b->next_slot = s;
    b->pending = m;
    b->n += (size_t)m;
    return s < slots ? 1 : 0;
}

/* A shard keeps, of the rows from first on, those of its items: embedded
 * with every other item first, so that each row's embedding is what a
 * build over all items computes for it (a GEMM's result for a row depends
 * on the rows beside it in its block): merged shard answers then equal one
 * node's bit for bit. Rows and embeddings are compacted in place. */
static void keep_shard(oml_index_builder *b, size_t first)
{
    size_t cols = (size_t)b->heads * (size_t)b->emb, w = first;
    for (size_t r = first; r < b->n; r++) {
        if (!b->mine[r])
            continue; /* another shard's item */
        b->gens[w] = b->gens[r];
        b->slots[w] = b->slots[r];
        b->labels[w] = b->labels[r];
        for (size_t c = 0; c < cols; c++) /* w <= r: a row moves up its column */
            b->cols[c * b->cap_cols + w] = b->cols[c * b->cap_cols + r];
        w++;
    }
    b->n = w;
}

/* Bytes of a mapping of rows x c floats: whole pages, at least one. */
static size_t cols_len(size_t rows, size_t c)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = rows * c * sizeof(float);
    return bytes ? (bytes + page - 1) / page * page : page;
}

/* Room in b->cols for need rows. The first time for the live items the
 * build began with, a 32nd more and a gather (items put meanwhile), not a
 * doubling: with huge pages a column's untouched tail is not free. More
 * puts than that (a store filling while it is indexed) grow the mapping:
 * the kernel moves its pages, not their bytes, so the old columns and the
 * new never both take memory (a malloc and copy held 2 x 1 GB at a
 * million items for the seconds the copy's page faults took). Then each
 * column moves up to its new place, the last first: each lands at or above
 * where it was and above every column still to move. Not advised for huge
 * pages: so mapped and advised, at a million items the learner stalled
 * (omld-bench freshness p50 0.4-2.0 s, max 8.5-11.9 s in 3 runs; 255 / 503
 * ms unadvised; the cause not found: malloc'd and advised, as before, it
 * did not). The columns are transient there (dropped once calibrated). */
static int cols_room(oml_index_builder *b, size_t need)
{
    if (need <= b->cap_cols)
        return OML_OK;
    size_t base = b->cap_cols ? need + need / 8 : b->expect + b->expect / 32;
    size_t cap = base + OML_INDEX_GATHER_ROWS, c = (size_t)b->heads * (size_t)b->emb;
    cap = cap > need ? cap : need;
    size_t len = cols_len(cap, c);
    void *p = b->cols ? mremap(b->cols, b->cols_len, len, MREMAP_MAYMOVE)
                      : mmap(NULL, len, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return OML_ENOMEM;
    float *cols = p;
    size_t have = b->n - (size_t)b->pending; /* rows embedded so far */
    for (size_t j = c; have > 0 && j-- > 1;)
        memmove(cols + j * cap, cols + j * b->cap_cols, have * sizeof(float));
    b->cols = cols;
    b->cols_len = len;
    b->cap_cols = cap;
    return OML_OK;
}

/* Rows first .. first + m of out (heads, m, emb) into the columns
 * (heads, emb, cap_cols). */
static void to_columns(oml_index_builder *b, const float *out, size_t first, int32_t m)
{
    size_t e = (size_t)b->emb;
    for (int h = 0; h < b->heads; h++)
        for (size_t j = 0; j < e; j++) {
            float *col = b->cols + ((size_t)h * e + j) * b->cap_cols + first;
            const float *src = out + (size_t)h * (size_t)m * e + j;
            for (int32_t i = 0; i < m; i++)
                col[i] = src[(size_t)i * e];
        }
}

/* The m gathered rows' embeddings into out (heads, m, emb). */
static int embed_gathered(oml_index_builder *b, int32_t m)
{
    if (b->in > 0) {
        project_new(b);
        return oml_snapshot_embed_h0(b->snap, b->H0, m, b->out);
    }
    return oml_snapshot_embed(b->snap, b->X, m, b->out);
}

/* Zeroes each of the m rows of e values that holds a NaN or an infinity;
 * returns how many such values there were. */
static size_t zero_nonfinite_rows(float *rows, int32_t m, size_t e)
{
    size_t bad = 0;
    for (int32_t i = 0; i < m; i++) {
        float *v = rows + (size_t)i * e;
        size_t here = 0;
        for (size_t j = 0; j < e; j++)
            here += !isfinite(v[j]);
        if (here > 0)
            memset(v, 0, e * sizeof *v);
        bad += here;
    }
    return bad;
}

/* The sample's gathered items embedded into it; once it is whole, each
 * head's coder trained on it, and the rows' gathers begin. */
static int embed_sample(oml_index_builder *b)
{
    int32_t m = b->pending;
    size_t e = (size_t)b->emb, want = b->sample_want;
    int rc = m > 0 ? embed_gathered(b, m) : OML_OK;
    for (int h = 0; rc == OML_OK && h < b->heads; h++) {
        float *dst = b->sample + ((size_t)h * want + b->sample_got) * e;
        memcpy(dst, b->out + (size_t)h * (size_t)m * e, (size_t)m * e * sizeof(float));
        zero_nonfinite_rows(dst, m, e); /* (counted when the rows are coded) */
    }
    if (rc != OML_OK)
        return rc;
    b->sample_got += (size_t)m;
    b->pending = 0;
    if (b->sample_next < want)
        return OML_OK;
    for (int h = 0; rc == OML_OK && h < b->heads; h++) /* (a NaN row: a centroid of NaN) */
        rc = oml_hlist_coder_init(&b->coders[h], b->sample + (size_t)h * want * e, b->sample_got,
                                  b->emb, b->n_lists, b->expect, !(b->pq_skip >> h & 1));
    free(b->sample);
    b->sample = NULL;
    b->sampling = 0;
    return rc;
}

/* Rows first .. first + m, embedded in out (heads, m, emb), coded into
 * each head's lists (the next rows of its coder); a row with a value that
 * is not finite is counted and coded as zeros. */
static int code_rows(oml_index_builder *b, float *out, size_t first, int32_t m)
{
    size_t e = (size_t)b->emb;
    for (int h = 0; h < b->heads; h++)
        for (int32_t i = 0; i < m; i++) {
            size_t bad = zero_nonfinite_rows(out + ((size_t)h * (size_t)m + (size_t)i) * e, 1, e);
            if (bad == 0)
                continue;
            if (b->nonfinite_row < 0 || (int64_t)(first + (size_t)i) < b->nonfinite_row)
                b->nonfinite_row = (int64_t)(first + (size_t)i);
            b->nonfinite += bad;
        }
    int rc = OML_OK;
    for (int h = 0; rc == OML_OK && h < b->heads; h++)
        rc = oml_hlist_coder_add(&b->coders[h], out + (size_t)h * (size_t)m * e, m);
    return rc;
}

int oml_index_builder_embed(oml_index_builder *b)
{
    if (b->sampling)
        return embed_sample(b);
    int32_t m = b->pending;
    if (m == 0)
        return OML_OK;
    size_t first = b->n - (size_t)m;
    if (!b->code_lists && cols_room(b, b->n) != OML_OK)
        return OML_ENOMEM;
    int rc = embed_gathered(b, m);
    if (rc == OML_OK && b->code_lists)
        rc = code_rows(b, b->out, first, m);
    if (rc != OML_OK)
        return rc;
    b->pending = 0;
    if (b->code_lists)
        return OML_OK;
    to_columns(b, b->out, first, m);
    b->pending = 0;
    if (b->shard_n > 1)
        keep_shard(b, first);
    return OML_OK;
}

/* The store's label names into one arena: their pointers, then their
 * characters (label names only grow, so they name every label a gathered
 * row carries). OML_OK or OML_ENOMEM. */
static int copy_label_names(oml_index *ix, const oml_store *store)
{
    size_t nl = (size_t)ix->n_labels, bytes = 0;
    for (int32_t l = 0; l < ix->n_labels; l++) {
        size_t len;
        oml_store_label_name(store, l, &len);
        bytes += len + 1;
    }
    char *p = malloc(nl * sizeof(char *) + bytes + 1);
    if (p == NULL)
        return OML_ENOMEM;
    ix->_arena = p;
    ix->label_names = (const char **)(void *)p;
    p += nl * sizeof(char *);
    for (int32_t l = 0; l < ix->n_labels; l++) {
        size_t len;
        const char *name = oml_store_label_name(store, l, &len);
        memcpy(p, name, len);
        p[len] = '\0';
        ix->label_names[l] = p;
        p += len + 1;
    }
    return OML_OK;
}

/* A buffer of the builder's to the index, shrunk to `bytes` (a large
 * block's realloc moves pages, not bytes); *from is left NULL. */
static void *hand_over(void **from, size_t bytes)
{
    void *p = realloc(*from, bytes > 0 ? bytes : 1);
    if (p == NULL) /* a shrink that failed: the block as it was */
        p = *from;
    *from = NULL;
    return p;
}

static void *copy_of(const void *src, size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    if (p && bytes > 0)
        memcpy(p, src, bytes);
    return p;
}

/* The gathered rows' slots, labels and generations, in gathering (slot)
 * order, to the index. A coded build's builder is freed after it (its
 * rebuilds are seconds apart), so its buffers are handed over, not
 * copied: at a million rows the copies were 30 MB more while the new
 * index is finished beside the serving one. Any other builder keeps its
 * buffers for the next build, and the index gets copies. OML_OK or
 * OML_ENOMEM. */
static int take_rows(oml_index *ix, oml_index_builder *b)
{
    size_t n = (size_t)ix->n;
    if (b->code_lists) {
        ix->slots = hand_over((void **)&b->slots, n * sizeof *ix->slots);
        ix->labels = hand_over((void **)&b->labels, n * sizeof *ix->labels);
        ix->gens = hand_over((void **)&b->gens, n * sizeof *ix->gens);
        b->cap_rows = b->cap_labels = b->cap_gens = 0;
        b->n = 0;
    } else {
        ix->slots = copy_of(b->slots, n * sizeof *ix->slots);
        ix->labels = copy_of(b->labels, n * sizeof *ix->labels);
        ix->gens = copy_of(b->gens, n * sizeof *ix->gens);
    }
    return ix->slots && ix->labels && ix->gens ? OML_OK : OML_ENOMEM;
}

/* The builder's columns, closed up from row stride cap_cols to n, to the
 * index (emb_cols, owned as _cols, a mapping of _cols_len bytes). Column c
 * moves to c n from c cap_cols: never past where a later one still is, so
 * in place, first to last; the tail is given back. */
static void hand_over_cols(oml_index *ix, oml_index_builder *b)
{
    size_t n = b->n, c = (size_t)b->heads * (size_t)b->emb;
    if (b->cols == NULL || n == 0) {
        if (b->cols)
            munmap(b->cols, b->cols_len);
        b->cols = NULL;
        b->cap_cols = 0;
        ix->emb_cols = NULL;
        return;
    }
    for (size_t j = 1; n < b->cap_cols && j < c; j++)
        memmove(b->cols + j * n, b->cols + j * b->cap_cols, n * sizeof(float));
    size_t len = cols_len(n, c);
    if (len < b->cols_len && munmap((char *)b->cols + len, b->cols_len - len) == 0)
        b->cols_len = len;
    ix->emb_cols = b->cols;
    ix->_cols = b->cols;
    ix->_cols_len = b->cols_len;
    b->cols = NULL;
    b->cap_cols = 0;
}

/* A coded build's lists to the index, with its count of values that were
 * not finite. */
static int hand_over_lists(oml_index *ix, oml_index_builder *b)
{
    ix->hl = calloc((size_t)b->heads, sizeof *ix->hl);
    int rc = ix->hl ? OML_OK : OML_ENOMEM;
    for (int h = 0; rc == OML_OK && h < b->heads; h++)
        rc = oml_hlist_coder_finish(&b->coders[h], &ix->hl[h]);
    ix->n_lists = b->n_lists;
    ix->coded = 1;
    ix->_nonfinite = b->nonfinite;
    ix->_nonfinite_row = (int32_t)b->nonfinite_row;
    return rc;
}

/* The buffers a gather and its embedding use, freed (a restart allocates
 * them again): 21 MB at 784 features, 4,096 rows a gather, held while a
 * coded build's lists are finished beside the serving index otherwise. */
static void drop_gather_buffers(oml_index_builder *b)
{
    void **bufs[] = {(void **)&b->X,       (void **)&b->out,      (void **)&b->H0,
                     (void **)&b->P,       (void **)&b->new_row,  (void **)&b->new_slot,
                     (void **)&b->new_stamp};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

int oml_index_builder_finish(oml_index_builder *b, const oml_store *store, oml_index **out)
{
    if (b->pending > 0 || b->sampling)
        return OML_EINVAL;
    if (b->n > INT32_MAX)
        return OML_EINVAL;
    oml_index *ix = calloc(1, sizeof *ix);
    if (ix == NULL)
        return OML_ENOMEM;
    ix->n = (int32_t)b->n;
    ix->heads = b->heads;
    ix->emb = b->emb;
    ix->n_labels = oml_store_label_count(store);
    int rc = copy_label_names(ix, store);
    if (rc == OML_OK && b->code_lists) {
        drop_gather_buffers(b); /* every row is embedded: its builder is freed after it */
        rc = hand_over_lists(ix, b);
    } else if (rc == OML_OK) {
        hand_over_cols(ix, b);
    }
    if (rc == OML_OK)
        rc = take_rows(ix, b);
    if (rc != OML_OK) {
        oml_index_destroy(ix);
        return rc;
    }
    ix->snap = oml_snapshot_retain(b->snap);
    *out = ix;
    return OML_OK;
}

/* One worker's buffers for run_blocks' blocks. */
typedef struct lane {
    float *X, *H0, *out;
} lane;

typedef struct blocks {
    oml_index_builder *b;
    const oml_store *store;
    lane lanes[OML_PARALLEL_MAX];
    /* A coded build codes its blocks in order: block `coding` is next. */
    pthread_mutex_t mu;
    pthread_cond_t turn;
    int32_t coding;
} blocks;

/* Block i's rows, embedded in out, coded once every block before it is
 * (each head's coder takes its rows in order); embedding overlaps. */
static int code_in_turn(blocks *k, int32_t i, float *out, size_t first, int32_t m)
{
    pthread_mutex_lock(&k->mu);
    while (k->coding != i) /* blocks are handed out in order: i - 1 is running */
        pthread_cond_wait(&k->turn, &k->mu);
    pthread_mutex_unlock(&k->mu);
    int rc = code_rows(k->b, out, first, m);
    pthread_mutex_lock(&k->mu);
    k->coding = i + 1;
    pthread_cond_broadcast(&k->turn);
    pthread_mutex_unlock(&k->mu);
    return rc;
}

/* Block i of a run's rows, as a serial build embeds it: its gather's rows
 * (every gather but the last holds OML_INDEX_GATHER_ROWS), projected row
 * by row, embedded in one call, into the columns. */
static int embed_block(void *ctx, int worker, int32_t i)
{
    blocks *k = ctx;
    oml_index_builder *b = k->b;
    lane *ln = &k->lanes[worker];
    size_t first = (size_t)i * OML_INDEX_GATHER_ROWS, d = (size_t)b->dim;
    int32_t m = (int32_t)(b->n - first < OML_INDEX_GATHER_ROWS ? b->n - first
                                                                : OML_INDEX_GATHER_ROWS);
    for (int32_t r = 0; r < m; r++)
        memcpy(ln->X + (size_t)r * d, oml_store_features(k->store, b->slots[first + (size_t)r]),
               d * sizeof(float));
    int rc;
    if (b->in > 0) {
        oml_net_project(&b->snap->lay, b->snap->params, ln->X, m, ln->H0);
        rc = oml_snapshot_embed_h0(b->snap, ln->H0, m, ln->out);
    } else {
        rc = oml_snapshot_embed(b->snap, ln->X, m, ln->out);
    }
    if (b->code_lists) { /* in turn even when it failed: the next block waits for it */
        int coded = code_in_turn(k, i, ln->out, first, rc == OML_OK ? m : 0);
        return rc != OML_OK ? rc : coded;
    }
    if (rc == OML_OK)
        to_columns(b, ln->out, first, m);
    return rc;
}

/* Every live item gathered without its features, then the blocks embedded
 * on `threads` threads straight from the store (held still by the
 * caller): the same blocks, the same calls, so the same bits as the
 * serial loop. Not with a projection cache or a shard (their rows depend
 * on the gather in turn). */
static int run_blocks(oml_index_builder *b, const oml_store *store, int threads)
{
    int more = 1, rc = OML_OK;
    b->defer = 1;
    while (more > 0) {
        more = oml_index_builder_gather(b, store);
        b->pending = 0;
    }
    b->defer = 0;
    if (more < 0)
        return more;
    b->pending = (int32_t)(b->n < INT32_MAX ? b->n : INT32_MAX); /* none embedded: no copy */
    rc = b->code_lists ? OML_OK : cols_room(b, b->n);
    b->pending = 0;
    if (rc != OML_OK)
        return rc;
    blocks k = {.b = b, .store = store, .mu = PTHREAD_MUTEX_INITIALIZER,
                .turn = PTHREAD_COND_INITIALIZER};
    if (threads > OML_PARALLEL_MAX)
        threads = OML_PARALLEL_MAX;
    size_t g = OML_INDEX_GATHER_ROWS, in = (size_t)(b->in > 0 ? b->in : 1);
    for (int t = 0; t < threads && rc == OML_OK; t++) {
        lane *ln = &k.lanes[t];
        ln->X = t == 0 ? b->X : malloc(g * (size_t)b->dim * sizeof(float));
        ln->H0 = t == 0 ? b->H0 : b->in > 0 ? malloc(g * in * sizeof(float)) : NULL;
        ln->out = t == 0 ? b->out : malloc(g * (size_t)b->heads * (size_t)b->emb * sizeof(float));
        if (ln->X == NULL || ln->out == NULL || (b->in > 0 && ln->H0 == NULL))
            rc = OML_ENOMEM;
    }
    int32_t tasks = (int32_t)((b->n + g - 1) / g);
    if (rc == OML_OK)
        rc = oml_parallel_run(threads, tasks, embed_block, &k);
    for (int t = 1; t < threads; t++) {
        free(k.lanes[t].X);
        free(k.lanes[t].H0);
        free(k.lanes[t].out);
    }
    return rc;
}

int oml_index_builder_run_threads(oml_index_builder *b, oml_snapshot *snap,
                                  const oml_store *store, int threads, oml_index **out)
{
    int rc = oml_index_builder_restart(b, snap, oml_store_dim(store));
    if (rc == OML_OK && threads > 1 && b->cache == NULL)
        return (rc = run_blocks(b, store, threads)) == OML_OK
                   ? oml_index_builder_finish(b, store, out)
                   : rc;
    int more = 1;
    while (rc == OML_OK && more) {
        more = oml_index_builder_gather(b, store);
        rc = more < 0 ? more : oml_index_builder_embed(b);
    }
    return rc == OML_OK ? oml_index_builder_finish(b, store, out) : rc;
}

int oml_index_builder_run_coded_threads(oml_index_builder *b, oml_snapshot *snap,
                                        const oml_store *store, int threads, oml_index **out)
{
    int rc = oml_index_builder_restart(b, snap, oml_store_dim(store));
    if (rc == OML_OK)
        rc = oml_index_builder_code_lists(b);
    while (rc == OML_OK && b->sampling) { /* the sample, on this thread */
        int more = oml_index_builder_gather(b, store);
        rc = more < 0 ? more : oml_index_builder_embed(b);
    }
    if (rc == OML_OK && threads > 1)
        rc = run_blocks(b, store, threads);
    for (int more = threads > 1 ? 0 : 1; rc == OML_OK && more;) {
        more = oml_index_builder_gather(b, store);
        rc = more < 0 ? more : oml_index_builder_embed(b);
    }
    return rc == OML_OK ? oml_index_builder_finish(b, store, out) : rc;
}

int oml_index_builder_run(oml_index_builder *b, oml_snapshot *snap, const oml_store *store,
                          oml_index **out)
{
    return oml_index_builder_run_threads(b, snap, store, 1, out);
}

int oml_index_build(oml_index **out, oml_snapshot *snap, const oml_store *store)
{
    if (out == NULL || snap == NULL || store == NULL)
        return OML_EINVAL;
    oml_index_builder b = {0};
    int rc = oml_index_builder_run(&b, snap, store, out);
    oml_index_builder_free(&b);
    if (rc == OML_OK)
        oml_index_add_codes(*out); /* out of memory for them, it scans the floats */
    return rc;
}
