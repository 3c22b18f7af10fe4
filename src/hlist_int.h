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
 * and the product codes' blocks (allocated here) (a list of c positions takes ceil(c / 32))
 * when hl has codebooks. OML_OK or OML_ENOMEM. */
int oml__hlist_group(oml_hlist *hl, const int32_t *list_of);

/* The product codes of every position (pq_rows by position; NULL: none)
 * into their lists' blocks, in the blocks' order (written straight into
 * them in rows' order, each row touched a dozen cache lines of a block
 * far from the last one's); then each list's largest residual norm and
 * code error. */
void oml__hlist_finish_lists(oml_hlist *hl, const uint8_t *pq_rows);

/* Residuals the product codes are trained on. */
#define OML__HLIST_PQ_SAMPLE 16384

#endif
