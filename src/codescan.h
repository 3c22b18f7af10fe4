/* codescan.h - the exact scan's first pass: every row of one head as an
 * int8 code (issue 14).
 *
 * An index that scans every row (no lists, index.h) reads its float
 * columns once per query and head: 384 bytes a row at 96-d, and a single
 * query is bound by those bytes. The codes are about a quarter of them.
 * A query scores every row by its code, keeps every row whose code cannot
 * rule it out (hlist_keep.h) and re-ranks those exactly on the floats
 * (oml_index_topk), so the answer is the float scan's.
 *
 * A head's rows often share one direction (at 35,000 random inputs under
 * the default start every row was within 0.01 in dot product of every
 * other, their mean of norm 0.997): coding the rows themselves, the
 * codes' error (~0.02) dwarfed the differences and ruled nothing out. So
 * each row v is split along the head's mean direction c (unit),
 *   v = t c + res, t = v . c, res . c = 0,  so  q . v = t (q . c) + q_perp . res,
 * t kept as a float, res coded (code8.h), and q_perp = q - (q . c) c
 * coded once per query: both codes then scale with what is left after
 * the shared direction (norm 0.08 there), and so does their error. On
 * rows without a shared direction it costs nothing: res is about v.
 * Rows stay in index order: nothing to train, one pass over the columns. */
#ifndef OML_CODESCAN_H
#define OML_CODESCAN_H

#include <stddef.h>
#include <stdint.h>

#include "hlist_keep.h"

typedef struct oml_codescan {
    int32_t n, emb;
    float *dir;      /* (emb) c: the rows' mean direction, unit (or 0) */
    float *t;        /* (n) row r's component along c */
    uint16_t *scale; /* (n) res_r is about codes[r] * s_r, s_r = oml_code8_bf16(scale[r]) */
    float *res_norm; /* (n) ||res_r||, and */
    float *err;      /* (n) ||res_r - codes[r] * s_r||: the row's side of the bound */
    int8_t *codes;   /* (n, emb) */
    float norm_max, err_max; /* the largest res_norm and err: no row has more slack */
    void *_block;
} oml_codescan;

/* Codes of the head whose values are cols (emb, n; value j of row r at
 * cols[j * n + r]), emb <= OML_CODE8_MAX_EMB. OML_OK, OML_EINVAL,
 * OML_ENOMEM (cs is then empty). */
int oml_codescan_build(oml_codescan *cs, const float *cols, int32_t n, int32_t emb);
void oml_codescan_free(oml_codescan *cs); /* accepts a zeroed one */

/* Bytes a head's codes hold for n rows of emb values. */
size_t oml_codescan_bytes(int32_t n, int32_t emb);

/* Every row but `exclude` and the rows allow (NULL: all) refuses offered
 * to keep (hlist_keep.h) with its code's dot product with q (emb) and
 * that product's error bound, skipping rows whose code is below what keep
 * can still take: keep then holds every row that could be among its k
 * nearest (unless keep->overflow). Returns keep->cnt. */
int32_t oml_codescan_scan(const oml_codescan *cs, const float *q, int32_t exclude,
                          const uint8_t *allow, oml_hlist_keep *keep);

#endif
