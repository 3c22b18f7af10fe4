/* hlist.h - one head's inverted lists over compact codes (issue 14).
 *
 * Every head of a large index (index.h) gets its own spherical k-means
 * lists over its own embeddings: a head's nearest rows are not the nearest
 * of the heads side by side, so lists formed on the concatenation split
 * them (at 1M items under the whitened start a query had to scan 40% of
 * the rows for 0.95 of the exact 10 nearest). The head's rows are copied,
 * grouped by list, as int8 codes of their residuals from their centroid
 * with one scale per row: a quarter of the float bytes, and the bytes are
 * what a scan costs. A query scans the
 * codes of the lists nearest to it and returns the rows of the largest
 * approximate dot products; the caller re-ranks them exactly on the
 * index's float embeddings (oml_index_topk_near).
 *
 * Built from an index's column layout (emb, n) without a copy of it; pure
 * functions of their inputs (no random seed: samples are strided). */
#ifndef OML_HLIST_H
#define OML_HLIST_H

#include <stddef.h>
#include <stdint.h>

#include "neighbor.h"

/* The widest head that gets lists (a query's code lives on the stack);
 * a wider index scans every row. */
#define OML_HLIST_MAX_EMB 1024

typedef struct oml_hlist {
    int32_t n_lists, emb, n;
    int32_t n_probe;      /* lists a query scans: calibrated (oml_index_calibrate) */
    int32_t shared_from;  /* -1: this head scans its own lists; else the head whose
                             scan proposes its rows (oml_hlist_rescore) */
    int32_t donor;        /* 0, or other heads take this one's scan: it keeps this
                             many times the rows (calibrated: 2, 4, 8 or 16) */
    float *centroids;     /* (n_lists, emb) unit rows */
    int32_t *list_start;  /* (n_lists + 1) first position of each list */
    int32_t *rows;        /* (n) the index row at each position */
    int32_t *pos_of;      /* (n) the position of each index row */
    float *scale;         /* (n) value j of position p in list l is about
                             centroids[l, j] + codes[p, j] * scale[p] */
    int8_t *codes;        /* (n, emb) */
} oml_hlist;

/* Lists for a head of n rows: about sqrt(n) / 2, within [16, 4096]. Many
 * small lists let a query scan few rows; assigning the rows costs n x
 * lists x emb multiply-adds per head when the index is built. */
int32_t oml_hlist_lists_for(size_t n);

/* Builds hl over the head whose values are cols (emb, n; value j of row r
 * at cols[j * n + r]), with n_lists lists (n >= n_lists >= 1, emb <=
 * OML_HLIST_MAX_EMB). n_probe starts at a quarter of the lists, with its
 * own scan. OML_OK, OML_EINVAL, OML_ENOMEM (hl is then empty). */
int oml_hlist_build(oml_hlist *hl, const float *cols, int32_t n, int32_t emb, int32_t n_lists);
void oml_hlist_free(oml_hlist *hl); /* accepts a zeroed one */

/* The lists' centroid dot products with q (emb) into dots (n_lists). */
void oml_hlist_dots(const oml_hlist *hl, const float *q, float *dots);

/* The lists nearest to the unit query q (emb), best first, into order
 * (n_lists); dots (n_lists) gets oml_hlist_dots. Returns how many (all
 * finite). */
int32_t oml_hlist_order(const oml_hlist *hl, const float *q, int32_t *order, float *dots);

/* Of the rows in lists order[0 .. n_probe), skipping `exclude` and the
 * rows allow (NULL: all) refuses: the up to r with the largest approximate
 * dot products with q (emb), into out (r; dist: the dot product), unordered. dots_c: the lists'
 * dot products with q as oml_hlist_order left them. Returns the count. */
int32_t oml_hlist_scan(const oml_hlist *hl, const float *q, const int32_t *order,
                       const float *dots_c, int32_t n_probe, int32_t r, int32_t exclude,
                       const uint8_t *allow, oml_neighbor *out);

/* Another head's candidates scored by this head's codes: of the m rows
 * cand[].row, the up to r with the largest approximate dot products with
 * q (emb), into out (r; dist: the dot product), unordered. dots_c: this
 * head's lists' dot products with q (oml_hlist_order). Returns the count.
 * A row costs one code read, not a scan. */
int32_t oml_hlist_rescore(const oml_hlist *hl, const float *q, const float *dots_c,
                          const oml_neighbor *cand, int32_t m, int32_t r, oml_neighbor *out);

#endif
