/* hlist_int.h - the steps hlist.c's build and hlist_coder.c share. */
#ifndef OML_HLIST_INT_H
#define OML_HLIST_INT_H

#include "hlist.h"

/* Position p's codes from v (emb), its row's residual from its list's
 * centroid: the int8 code with its scale and norms, and the product codes
 * (two a byte) into pq_rows at p (NULL: none). */
void oml__hlist_encode(oml_hlist *hl, const float *v, size_t p, uint8_t *pq_rows);

/* Positions grouped by list_of (n rows; a stable counting sort: ascending
 * rows within a list) into list_start, rows and pos_of (room for n each),
 * and, when hl has codebooks, where each list's blocks of product codes
 * start (blk_start: a list of c positions takes ceil(c / 32)), with the
 * blocks themselves allocated (zeroed) when `blocks`. OML_OK or
 * OML_ENOMEM. */
int oml__hlist_group(oml_hlist *hl, const uint16_t *list_of, int blocks);

/* The product codes (m, one a subspace) of a position packed two a byte
 * (row: m / 2 bytes), as oml__hlist_encode packs them. */
static inline void oml__hlist_pq_unpack(const uint8_t *row, int32_t m, uint8_t *c)
{
    for (int32_t j = 0; j < m; j += 2) {
        c[j] = row[j / 2] & 15;
        c[j + 1] = row[j / 2] >> 4;
    }
}

/* The product codes of every position (pq_rows by position; NULL: none)
 * into their lists' blocks, in the blocks' order (written straight into
 * them in rows' order, each row touched a dozen cache lines of a block
 * far from the last one's); then each list's largest residual norm and
 * code error, and every position's as steps of them (res_q, err_q), the
 * floats freed. OML_OK or OML_ENOMEM (the floats stay). */
int oml__hlist_finish_lists(oml_hlist *hl, const uint8_t *pq_rows);

/* Residuals the product codes are trained on. */
#define OML__HLIST_PQ_SAMPLE 16384

#endif
