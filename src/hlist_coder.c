/* hlist_coder.c - one head's lists coded from its rows as they come
 * (hlist.h, oml_hlist_coder).
 *
 * DESIGN: oml_hlist_build reads a head's float columns, which an index
 * that never keeps them (index.h, oml_index_builder_code_lists) does not
 * have: at a million rows of three 96-wide heads they are 1.15 GB, held
 * beside the serving index for the whole rebuild. The coder instead takes
 * its centroids and codebooks from an embedded sample of the rows (as the
 * build takes them from strided rows), then codes each block of rows as
 * it is embedded, in row order: its list, int8 code, scale, norms and
 * product codes. At the end the rows are grouped by list as the build
 * groups them, and the codes moved to their positions in place, one cycle
 * of the permutation at a time: the lists' bytes never exist twice. */
#include "hlist.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hlist_int.h"
#include "ivf.h"

void oml_hlist_coder_free(oml_hlist_coder *c)
{
    oml_hlist_free(&c->hl);
    free(c->list_of);
    free(c->pq_rows);
    memset(c, 0, sizeof *c);
}

static size_t pq_bytes(const oml_hlist_coder *c)
{
    return (size_t)(c->hl.pq.m / 2);
}

/* Resizes one row-ordered array to cap rows of elem bytes (a large
 * block's realloc moves pages, not bytes). */
static int resize(void **p, size_t cap, size_t elem)
{
    size_t bytes = cap * elem;
    void *q = realloc(*p, bytes > 0 ? bytes : 1);
    if (q == NULL)
        return OML_ENOMEM;
    *p = q;
    return OML_OK;
}

/* The lists' own arrays of int8 codes and scales sized to cap rows. */
static int room_code_rows(oml_hlist *hl, size_t cap)
{
    int rc = resize((void **)&hl->codes, cap, (size_t)hl->emb);
    if (rc == OML_OK)
        rc = resize((void **)&hl->scale, cap, sizeof *hl->scale);
    return rc;
}

/* Those and the norms (16-bit bounds until the lists are finished) sized to cap rows. */
static int room_codes(oml_hlist *hl, size_t cap)
{
    int rc = room_code_rows(hl, cap);
    if (rc == OML_OK)
        rc = resize((void **)&hl->res_norm, cap, sizeof *hl->res_norm);
    if (rc == OML_OK)
        rc = resize((void **)&hl->code_err, cap, sizeof *hl->code_err);
    return rc;
}

/* Every row-ordered array sized to cap rows. */
static int room(oml_hlist_coder *c, size_t cap)
{
    int rc = room_codes(&c->hl, cap);
    if (rc == OML_OK)
        rc = resize((void **)&c->list_of, cap, sizeof *c->list_of);
    if (rc == OML_OK && pq_bytes(c) > 0)
        rc = resize((void **)&c->pq_rows, cap, pq_bytes(c));
    if (rc == OML_OK)
        c->cap = cap;
    return rc;
}

/* The product codes' codebooks from the residuals of a strided part of
 * the sample, as oml_hlist_build trains them. */
static int train_pq(oml_hlist *hl, const float *sample, size_t s)
{
    if (!oml_pq4_fits(hl->emb))
        return OML_OK;
    size_t e = (size_t)hl->emb, t = s < OML__HLIST_PQ_SAMPLE ? s : OML__HLIST_PQ_SAMPLE;
    float *res = malloc(t * e * sizeof *res);
    int32_t *of = malloc(t * sizeof *of);
    int rc = res && of ? OML_OK : OML_ENOMEM;
    for (size_t i = 0; rc == OML_OK && i < t; i++)
        memcpy(res + i * e, sample + i * s / t * e, e * sizeof *res);
    if (rc == OML_OK)
        rc = oml_ivf_assign(res, t, hl->emb, hl->centroids, hl->n_lists, of);
    for (size_t i = 0; rc == OML_OK && i < t; i++)
        for (size_t j = 0; j < e; j++)
            res[i * e + j] -= hl->centroids[(size_t)of[i] * e + j];
    if (rc == OML_OK)
        rc = oml_pq4_train(&hl->pq, res, t, hl->emb);
    free(res);
    free(of);
    return rc;
}

int oml_hlist_coder_init(oml_hlist_coder *c, const float *sample, size_t s, int32_t emb,
                         int32_t n_lists, size_t expect, int with_pq)
{
    memset(c, 0, sizeof *c);
    if (sample == NULL || emb < 1 || emb > OML_HLIST_MAX_EMB || n_lists < 1 ||
        n_lists > OML_HLIST_MAX_LISTS || s < (size_t)n_lists)
        return OML_EINVAL;
    oml_hlist *hl = &c->hl;
    *hl = (oml_hlist){.n_lists = n_lists, .emb = emb, .n_probe = (n_lists + 3) / 4,
                      .shared_from = -1};
    size_t L = (size_t)n_lists;
    hl->centroids = malloc(L * (size_t)emb * sizeof *hl->centroids);
    hl->list_start = malloc((L + 1) * sizeof *hl->list_start);
    hl->list_res_max = malloc(L * sizeof *hl->list_res_max);
    hl->list_err_max = malloc(L * sizeof *hl->list_err_max);
    int rc = hl->centroids && hl->list_start && hl->list_res_max && hl->list_err_max
                 ? OML_OK
                 : OML_ENOMEM;
    if (rc == OML_OK)
        rc = oml_ivf_train(sample, s, emb, n_lists, hl->centroids);
    if (rc == OML_OK && with_pq)
        rc = train_pq(hl, sample, s);
    if (rc == OML_OK)
        rc = room(c, expect + expect / 32 + 1024);
    if (rc != OML_OK)
        oml_hlist_coder_free(c);
    return rc;
}

int oml_hlist_coder_add(oml_hlist_coder *c, const float *rows, int32_t m)
{
    oml_hlist *hl = &c->hl;
    size_t n = (size_t)hl->n, e = (size_t)hl->emb;
    if (m <= 0)
        return OML_OK;
    if ((size_t)INT32_MAX - n < (size_t)m)
        return OML_EINVAL;
    if (n + (size_t)m > c->cap && room(c, n + (size_t)m + (n + (size_t)m) / 8 + 1024) != OML_OK)
        return OML_ENOMEM;
    int32_t *of = malloc((size_t)m * sizeof *of); /* the block's lists, kept in 16 bits */
    int rc = of ? oml_ivf_assign(rows, (size_t)m, hl->emb, hl->centroids, hl->n_lists, of)
                : OML_ENOMEM;
    float v[OML_HLIST_MAX_EMB];
    for (size_t i = 0; rc == OML_OK && i < (size_t)m; i++) {
        const float *x = rows + i * e, *ctr = hl->centroids + (size_t)of[i] * e;
        for (size_t j = 0; j < e; j++)
            v[j] = x[j] - ctr[j];
        oml__hlist_encode(hl, v, n + i, c->pq_rows);
        c->list_of[n + i] = (uint16_t)of[i];
    }
    free(of);
    if (rc == OML_OK)
        hl->n = (int32_t)(n + (size_t)m);
    return rc;
}

/* Moves each row's element (elem bytes) of the row-ordered array a to
 * position pos_of[row], in place: one cycle of the permutation at a time,
 * carrying the element displaced (seen: n bits of scratch; t: 2 elems). */
static void to_positions(void *a, size_t elem, const int32_t *pos_of, size_t n, uint8_t *seen,
                         uint8_t *t)
{
    uint8_t *d = a, *carry = t, *next = t + elem;
    memset(seen, 0, (n + 7) / 8);
    for (size_t r = 0; r < n; r++) {
        if (seen[r / 8] >> (r % 8) & 1)
            continue;
        memcpy(carry, d + r * elem, elem);
        for (size_t at = r;;) { /* carry holds the element of row `at` */
            seen[at / 8] |= (uint8_t)(1u << (at % 8));
            size_t to = (size_t)pos_of[at];
            if (to == r) {
                memcpy(d + r * elem, carry, elem);
                break;
            }
            memcpy(next, d + to * elem, elem);
            memcpy(d + to * elem, carry, elem);
            uint8_t *swap = carry;
            carry = next;
            next = swap;
            at = to;
        }
    }
}

/* The product codes by position (c->pq_rows) into their lists' blocks in
 * the same buffer, which grows by the blocks' padding only (under 32 rows
 * a list): a second buffer beside it was 24 MB a head at a million rows.
 * A list's blocks start at or past where its rows did (the padding of the
 * lists before it only adds), so the lists move last first, each through
 * a copy of its own rows. The buffer becomes hl->pq_codes. */
static int blocks_in_place(oml_hlist_coder *c)
{
    oml_hlist *hl = &c->hl;
    const int32_t *at = hl->list_start;
    size_t pq = pq_bytes(c), bb = oml_pq4_block_bytes(&hl->pq), widest = 0;
    for (int32_t l = 0; l < hl->n_lists; l++)
        widest = (size_t)(at[l + 1] - at[l]) > widest ? (size_t)(at[l + 1] - at[l]) : widest;
    size_t total = (size_t)hl->blk_start[hl->n_lists] * bb;
    uint8_t *buf = realloc(c->pq_rows, total > 0 ? total : 1);
    uint8_t *rows = malloc(widest * pq + 1);
    if (buf == NULL || rows == NULL) {
        c->pq_rows = buf ? buf : c->pq_rows;
        free(rows);
        return OML_ENOMEM;
    }
    for (int32_t l = hl->n_lists - 1; l >= 0; l--) {
        size_t cnt = (size_t)(at[l + 1] - at[l]);
        memcpy(rows, buf + (size_t)at[l] * pq, cnt * pq);
        uint8_t *blk = buf + (size_t)hl->blk_start[l] * bb;
        memset(blk, 0, (size_t)(hl->blk_start[l + 1] - hl->blk_start[l]) * bb);
        for (size_t i = 0; i < cnt; i++) {
            uint8_t codes[OML_PQ4_MAX_EMB / OML_PQ4_DSUB];
            oml__hlist_pq_unpack(rows + i * pq, hl->pq.m, codes);
            oml_pq4_put(&hl->pq, codes, blk + i / OML_PQ4_BLOCK * bb, (int32_t)(i % OML_PQ4_BLOCK));
        }
    }
    free(rows);
    hl->pq_codes = buf;
    c->pq_rows = NULL;
    return OML_OK;
}

int oml_hlist_coder_finish(oml_hlist_coder *c, oml_hlist *out)
{
    oml_hlist *hl = &c->hl;
    size_t n = (size_t)hl->n, e = (size_t)hl->emb, pq = pq_bytes(c);
    hl->rows = malloc((n ? n : 1) * sizeof *hl->rows);
    hl->pos_of = malloc((n ? n : 1) * sizeof *hl->pos_of);
    size_t widest = e > pq ? e : pq;
    widest = widest > sizeof(float) ? widest : sizeof(float);
    uint8_t *seen = malloc(n / 8 + 1), *t = malloc(2 * widest);
    int rc = hl->rows && hl->pos_of && seen && t ? OML_OK : OML_ENOMEM;
    if (rc == OML_OK)
        rc = oml__hlist_group(hl, c->list_of, 0);
    if (rc == OML_OK) {
        free(c->list_of); /* grouped: no longer needed */
        c->list_of = NULL;
        to_positions(hl->codes, e, hl->pos_of, n, seen, t);
        to_positions(hl->scale, sizeof *hl->scale, hl->pos_of, n, seen, t);
        to_positions(hl->res_norm, sizeof *hl->res_norm, hl->pos_of, n, seen, t);
        to_positions(hl->code_err, sizeof *hl->code_err, hl->pos_of, n, seen, t);
        if (pq > 0) {
            to_positions(c->pq_rows, pq, hl->pos_of, n, seen, t);
            rc = blocks_in_place(c);
        }
    }
    if (rc == OML_OK) /* moved: a built head scans its lists (rows only) */
        (void)oml_hlist_keep_maps(hl, 1, 0);
    if (rc == OML_OK) /* each list's bounds, the norms as steps (their floats freed) */
        rc = oml__hlist_finish_lists(hl, NULL);
    if (rc == OML_OK)
        (void)room_code_rows(hl, n); /* a shrink: failing, they keep their room */
    free(seen);
    free(t);
    if (rc != OML_OK)
        return rc;
    *out = *hl;
    memset(hl, 0, sizeof *hl);
    oml_hlist_coder_free(c); /* the row-ordered lists and product codes */
    return OML_OK;
}
