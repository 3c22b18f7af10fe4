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
 * The scan itself reads the int8 codes of only a few rows: a first pass
 * over 4-bit product codes of the same residuals (pq4.h: a quarter of the
 * int8 bytes, in blocks a byte shuffle scores 32 rows at a time) keeps its
 * pq_keep best (1,024) plus what a donor keeps, and only those are scored
 * by their int8 codes with their bound. At 1M items under the whitened
 * start the scan's bytes were 92% of its time; with the first pass a
 * k = 10 query of all three heads took 2.2 ms of CPU against 5.3-6.2 ms,
 * at the same recall (the calibration scans 291 lists a head instead of
 * 258 to make up for the rows the first pass drops). Memory: 24 bytes a
 * row and head more.
 *
 * Built from an index's column layout (emb, n) without a copy of it, or
 * coded from the rows as they are embedded (oml_hlist_coder: an index
 * that never has columns); pure functions of their inputs (no random
 * seed: samples are strided). */
#ifndef OML_HLIST_H
#define OML_HLIST_H

#include <stddef.h>
#include <stdint.h>

#include "code8.h"
#include "hlist_keep.h"
#include "neighbor.h"
#include "pq4.h"

/* The widest head that gets lists (a query's code lives on the stack);
 * a wider index scans every row. */
#define OML_HLIST_MAX_EMB OML_CODE8_MAX_EMB

typedef struct oml_hlist {
    int32_t n_lists, emb, n;
    int32_t n_probe;      /* lists a query scans: calibrated (oml_index_calibrate) */
    int32_t shared_from;  /* -1: this head scans its own lists; else the head whose
                             scan proposes its rows (oml_hlist_rescore) */
    int32_t donor;        /* 0, or other heads take this one's scan: it keeps this
                             many times the rows (calibrated: 2, 4, 8 or 16) */
    float *centroids;     /* (n_lists, emb) unit rows */
    int32_t *list_start;  /* (n_lists + 1) first position of each list */
    /* The two maps between positions and index rows, inverse permutations
     * of each other: a head keeps the one its search reads
     * (oml_hlist_keep_maps), 4 bytes a row. */
    int32_t *rows;        /* (n) the index row at each position: a scan of these
                             lists reads it (NULL once the head shares a scan) */
    int32_t *pos_of;      /* (n) the position of each index row: a rescore of
                             another head's rows reads it (NULL once built) */
    uint16_t *scale;      /* (n) value j of position p in list l is about
                             centroids[l, j] + codes[p, j] * s, s =
                             oml_code8_bf16(scale[p]) (code8.h: 16 bits) */
    int8_t *codes;        /* (n, emb) */
    /* ||residual|| of position p and ||residual - codes[p] * s||,
     * which with the query's own code error bound a code's dot error
     * (slack): at most res_q[p] and err_q[p] steps of their list
     * (oml_hlist_step: a 255th of the list's largest, rounded up). A
     * byte each where floats took four: 18 MB an index at a million rows
     * of three heads, and a rebuild holds two. */
    uint8_t *res_q;       /* (n) */
    uint8_t *err_q;       /* (n) */
    float *list_res_max;  /* (n_lists) each list's largest ||residual|| and code error, */
    float *list_err_max;  /* rounded up so that 255 steps reach it */
    uint16_t *res_norm;   /* (n) while built only (NULL after): the norms the bytes */
    uint16_t *code_err;   /* above are rounded up from, themselves rounded up to 16
                             bits (oml_code8_bf16_up: within 2^-7 above the floats) */
    /* The scan's first pass (pq4.h): the same residuals as 4-bit product
     * codes, each list's positions in blocks of OML_PQ4_BLOCK (its last
     * one padded). pq.m 0: none (emb not a multiple of 4, or above
     * OML_PQ4_MAX_EMB), the int8 codes are scanned whole. */
    oml_pq4 pq;
    int32_t *blk_start;   /* (n_lists + 1) first block of each list */
    uint8_t *pq_codes;    /* (blk_start[n_lists], oml_pq4_block_bytes) */
    int32_t pq_keep;      /* rows the first pass hands the int8 codes (besides a
                             donor's keep); 0: no first pass */
    float recall;         /* the calibration's sample found this share of its exact
                             10 nearest with n_probe (oml_index_calibrate; 0 before) */
} oml_hlist;

/* One step of a list's bound whose largest is max (list_res_max,
 * list_err_max): 255 of them reach max. */
static inline float oml_hlist_step(float max)
{
    return max / 255.0f;
}

/* The first pass's rows by default, and at most (its heap is on the stack). */
#define OML_HLIST_PQ_KEEP 1024
#define OML_HLIST_PQ_MAX_KEEP 4096

/* The most lists a head has: a row's list is 16 bits while its lists are
 * built (oml_hlist_lists_for gives at most 4096). */
#define OML_HLIST_MAX_LISTS UINT16_MAX

/* Lists for a head of n rows: about sqrt(n) / 2, within [16, 4096]. Many
 * small lists let a query scan few rows; assigning the rows costs n x
 * lists x emb multiply-adds per head when the index is built. */
int32_t oml_hlist_lists_for(size_t n);

/* Builds hl over the head whose values are cols (emb, n; value j of row r
 * at cols[j * n + r]), with n_lists lists (n >= n_lists >= 1, n_lists <=
 * OML_HLIST_MAX_LISTS, emb <= OML_HLIST_MAX_EMB). n_probe starts at a
 * quarter of the lists, with its own scan. OML_OK, OML_EINVAL, OML_ENOMEM
 * (hl is then empty). */
int oml_hlist_build(oml_hlist *hl, const float *cols, int32_t n, int32_t emb, int32_t n_lists);
void oml_hlist_free(oml_hlist *hl); /* accepts a zeroed one */

/* The same lists without the head's columns (hlist_coder.c): centroids and
 * codebooks from an embedded sample of the rows, then the rows coded in
 * order, a block at a time as they are embedded, and grouped by list at
 * the end. Given the rows the build samples, the same centroids, lists
 * and int8 codes (its product codebooks come from the sample's residuals,
 * not the rows': test_coded_lists). Memory: the lists' own bytes, and 6
 * bytes a row more while coding (16-bit norms and list), 10 while the
 * rows are grouped. */
typedef struct oml_hlist_coder {
    oml_hlist hl;       /* centroids and codebooks; codes, scales and norms by row */
    uint16_t *list_of;  /* (cap) each row's list */
    uint8_t *pq_rows;   /* (cap, pq.m / 2) each row's product codes */
    size_t cap;         /* rows the arrays have room for */
} oml_hlist_coder;
/* Trains on sample (s unit rows of emb, row-major; s >= n_lists, n_lists
 * <= OML_HLIST_MAX_LISTS), with
 * room for about `expect` rows. with_pq 0: no product codes (the lists
 * of a head expected to share another's scan, which never reads them:
 * oml_hlist_drop_pq). OML_OK, OML_EINVAL, OML_ENOMEM (then freed). */
int oml_hlist_coder_init(oml_hlist_coder *c, const float *sample, size_t s, int32_t emb,
                         int32_t n_lists, size_t expect, int with_pq);
/* Codes the next m rows (m, emb), row-major: the row numbers go on from
 * the last call's. OML_OK, OML_EINVAL (past INT32_MAX rows), OML_ENOMEM. */
int oml_hlist_coder_add(oml_hlist_coder *c, const float *rows, int32_t m);
/* The lists of every row added, into out; the coder is then empty.
 * OML_OK or OML_ENOMEM (the coder stays to be freed). */
int oml_hlist_coder_finish(oml_hlist_coder *c, oml_hlist *out);
void oml_hlist_coder_free(oml_hlist_coder *c); /* accepts a zeroed one */
/* The bytes its arrays hold (centroids, codes, product codes, the maps it
 * has, bounds). */
size_t oml_hlist_bytes(const oml_hlist *hl);

/* The inverse of the permutation map (n): a head's rows from its pos_of,
 * or its pos_of from its rows. Allocated; NULL: out of memory. */
int32_t *oml_hlist_inverse(const int32_t *map, int32_t n);

/* Keeps those of the two maps asked for (at least one): rows, which a
 * scan of the head's own lists reads, and pos_of, which a rescore of
 * another head's rows reads (oml_hlist_rescore). One missing is made from
 * the other, one not asked for is freed. A build leaves rows only (a
 * built head scans; the coder's finish and the build need pos_of to lay
 * the lists out, not after); a calibration makes pos_of for the heads
 * that may share (index.h). OML_OK, OML_ENOMEM (nothing freed),
 * OML_EINVAL (none asked for, or neither to make one from). */
int oml_hlist_keep_maps(oml_hlist *hl, int rows, int pos_of);

/* Frees the scan's first pass (its product codes and codebooks): a head
 * that shares another's scan (shared_from >= 0) rescores that scan's rows
 * by its int8 codes and never reads them (24 bytes a row at emb 96, 48 MB
 * at a million rows for the two heads that share head 0's). Should the
 * head scan its own lists again, it scans their int8 codes whole.
 * Returns the bytes freed. */
size_t oml_hlist_drop_pq(oml_hlist *hl);

/* Rows a list the centroids are trained on (a strided sample of the
 * head's; a coder's sample of this many a list trains as the build does). */
#define OML_HLIST_SAMPLE_PER_LIST 32

/* The lists' centroid dot products with q (emb) into dots (n_lists). */
void oml_hlist_dots(const oml_hlist *hl, const float *q, float *dots);

/* The lists nearest to the unit query q (emb), best first, into order
 * (n_lists); dots (n_lists) gets oml_hlist_dots. Returns how many (all
 * finite). */
int32_t oml_hlist_order(const oml_hlist *hl, const float *q, int32_t *order, float *dots);
/* The same with only the first `want` in order (the rest of order[0 ..
 * return) holds the other finite lists, unordered): the same first `want`
 * as oml_hlist_order, for a scan of that many lists (a query scans 9 of
 * 500 at 1M; sorting all 500 per head was ~6% of a query's CPU). */
int32_t oml_hlist_order_first(const oml_hlist *hl, const float *q, int32_t want, int32_t *order,
                              float *dots);

/* The rows in lists order[0 .. n_probe), skipping `exclude` and the rows
 * allow (NULL: all) refuses, offered to keep (hlist_keep.h) with their
 * codes' dot products with q (emb) and those products' error bounds: it
 * then holds every scanned row that could be among its k nearest. dots_c:
 * the lists' dot products with q as oml_hlist_order left them. Returns
 * keep->cnt. */
int32_t oml_hlist_scan(const oml_hlist *hl, const float *q, const int32_t *order,
                       const float *dots_c, int32_t n_probe, int32_t exclude,
                       const uint8_t *allow, oml_hlist_keep *keep);

/* Another head's candidates scored by this head's codes (its pos_of:
 * oml_hlist_keep_maps): the m rows cand[].row offered to keep as
 * oml_hlist_scan offers its rows. dots_c:
 * this head's lists' dot products with q (oml_hlist_dots). Returns
 * keep->cnt. A row costs one code read, not a scan. */
int32_t oml_hlist_rescore(const oml_hlist *hl, const float *q, const float *dots_c,
                          const oml_hlist_hit *cand, int32_t m, oml_hlist_keep *keep);

#endif
