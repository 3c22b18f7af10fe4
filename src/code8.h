/* code8.h - int8 codes of embedding rows and their dot products with a
 * query, with a proven bound on the error (issue 14).
 *
 * A vector v (e floats) is coded as round(v / s), s = max |v_j| / 127,
 * with ||v|| and ||v - s code|| kept beside it; a query q likewise, with
 * ||q - qs c|| and ||qs c||. Then, Cauchy-Schwarz,
 *   |q . v - qs s (c . code)| <= ||q - q^|| ||v|| + ||q^|| ||v - v^||,
 * and the integer dot product is exact, so a scan can be vectorised in
 * any order. The inverted lists (hlist.h) code residuals from their
 * centroids with it, the exact scan (codescan.h) the rows themselves.
 * Pure; no allocation. */
#ifndef OML_CODE8_H
#define OML_CODE8_H

#include <stdint.h>

/* The widest vector coded (a query's code lives on the stack). */
#define OML_CODE8_MAX_EMB 1024
/* Rows oml_code8_block_scores scores at once. */
#define OML_CODE8_BLOCK 256

/* A query's code and what bounds a code's dot error on its side. */
typedef struct oml_code8_query {
    int8_t c[OML_CODE8_MAX_EMB];
    float qs;     /* the query's scale */
    float err;    /* ||q - qs c|| */
    float norm;   /* ||qs c|| */
    float margin; /* float rounding of a base dot (an sgemv) and of base + dot * s * qs */
} oml_code8_query;

/* Codes q (e <= OML_CODE8_MAX_EMB). */
void oml_code8_query_init(oml_code8_query *qc, const float *q, int32_t e);

/* Codes v (e) into code (e); returns its scale and puts ||v|| and
 * ||v - scale code|| (taken in double, so the bound does not round down
 * by more than a float's last bit) into *norm and *err. */
float oml_code8_encode(const float *v, int32_t e, int8_t *code, float *norm, float *err);

/* The integer dot products of q's code with m codes of e values. */
void oml_code8_dots(const int8_t *codes, int32_t m, int32_t e, const int8_t *q, int32_t *out);

/* The part of each row's dot product its code leaves out, computed apart:
 * base for every row (t NULL: a list's centroid . q), or t[i] * tq for
 * row i (codescan.h: the row's and the query's components along one
 * direction). */
typedef struct oml_code8_base {
    float base;
    const float *t; /* (m) or NULL */
    float tq;
} oml_code8_base;

static inline float oml_code8_bias(const oml_code8_base *b, int32_t i)
{
    return b->t ? b->t[i] * b->tq : b->base;
}

/* The approximate dot products of m <= OML_CODE8_BLOCK consecutive codes,
 * d[i] = bias(i) + dots[i] * scale[i] * qs (the same float operations in
 * every path: AVX2 where the machine has it and e is a multiple of 32,
 * else portable), and a bit per row (bit i of word i / 64) set where
 * d > thr: the only rows the caller has to look at. b->t is b->t of the
 * block's first row. */
void oml_code8_block_scores(const int8_t *codes, int32_t m, int32_t e, const int8_t *q,
                            const float *scale, float qs, const oml_code8_base *b, float thr,
                            float *d, uint64_t *hit);

#endif
